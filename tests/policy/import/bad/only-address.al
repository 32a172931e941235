# a register without its write mask
0x00000010 0x0000000000000000
0x00000611
