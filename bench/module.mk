# bench/: each bench/NAME.c becomes build/bench/NAME (benchmarks, not tests).
BENCH_SOURCES := $(wildcard bench/*.c)
BENCH_BINARIES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SOURCES))
$(BENCH_BINARIES): $(BUILD)/bench/%: $(BUILD)/bench/%.o $(ALL_ARCHIVES)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $< $(ALL_ARCHIVES) $(ALL_LDLIBS) $(CK_LIBS)
BENCH_PROGRAMS += $(BENCH_BINARIES)
