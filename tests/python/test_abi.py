"""The package's ctypes structs are the C library's: sizes and offsets as the C compiler lays
out <haecer/haecer.h> and <haecer/ring.h>, so a field added in C cannot make Python read the
wrong bytes or the library write past a Python buffer."""
import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import SOURCE
from haecer import _lib

STRUCTS = {
    "haecer_counter_info": _lib.CounterInfo,
    "haecer_energy_reading": _lib.EnergyReading,
    "haecer_energy_region": _lib.EnergyRegion,
    "haecer_energy_result": _lib.EnergyResult,
    "haecer_ring_record": _lib.RingRecord,
    "haecer_ring_counter": _lib.RingCounter,
    "haecer_ring_info": _lib.RingInfo,
}


def test_structs_match_the_c_headers(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <haecer/haecer.h>",
             "int main(void) {"]
    for name, struct in STRUCTS.items():
        lines.append(f'printf("{name} size %zu\\n", sizeof(struct {name}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{name} {field} %zu\\n", offsetof(struct {name}, {field}));')
    lines += ["return 0; }"]
    source = tmp_path / "abi.c"
    source.write_text("\n".join(lines))
    program = tmp_path / "abi"
    subprocess.run([compiler, "-std=gnu11", "-I", os.path.join(SOURCE, "libclient", "include"),
                    "-o", str(program), str(source)], check=True)
    layout = {}
    for line in subprocess.run([str(program)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        name, field, value = line.split()
        layout[(name, field)] = int(value)
    for name, struct in STRUCTS.items():
        assert ctypes.sizeof(struct) == layout[(name, "size")], name
        for field, _ in struct._fields_:
            assert getattr(struct, field).offset == layout[(name, field)], f"{name}.{field}"

