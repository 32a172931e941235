# examples/: each examples/NAME.c is an instrumented program linked against libhaecer.
EXAMPLE_SOURCES := $(wildcard examples/*.c)
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SOURCES))
$(EXAMPLES): $(BUILD)/examples/%: $(BUILD)/examples/%.o $(BUILD)/libhaecer.a
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(HAECER_LDLIBS)
PROGRAMS += $(EXAMPLES)
