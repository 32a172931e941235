# tests/: every tests/*/test_*.c is a test program, every tests/*/helper_*.c a program tests
# start. All link against every archive (static linking takes only what is used) and cmocka.
TEST_SOURCES := $(wildcard tests/*/test_*.c)
TEST_HELPER_SOURCES := $(wildcard tests/*/helper_*.c)
TESTLIB_SOURCES := $(wildcard tests/lib/*.c)
$(BUILD)/libhaecer-testlib.a: $(call objects_of,$(TESTLIB_SOURCES))


TEST_BINARIES := $(patsubst %.c,$(BUILD)/%,$(TEST_SOURCES) $(TEST_HELPER_SOURCES))
$(TEST_BINARIES): $(BUILD)/tests/%: $(BUILD)/tests/%.o $(ALL_ARCHIVES)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $< $(ALL_ARCHIVES) $(ALL_LDLIBS)
TEST_PROGRAMS += $(TEST_BINARIES)
PROGRAMS += $(BUILD)/libhaecer-testlib.a
