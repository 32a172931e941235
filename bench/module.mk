# bench/: each bench/NAME.c becomes build/bench/NAME (benchmarks, not tests), linked with the
# sources of bench/parts/NAME/ when a benchmark has more than one file; bench/lib/ is what they
# share (order statistics, latency histograms, seeded randomness), libhaecer-benchlib.a.
BENCH_SOURCES := $(wildcard bench/*.c)
BENCH_NAMES := $(patsubst bench/%.c,%,$(BENCH_SOURCES))
BENCH_LIB_SOURCES := $(wildcard bench/lib/*.c)
$(BUILD)/libhaecer-benchlib.a: $(call objects_of,$(BENCH_LIB_SOURCES))
BENCH_BINARIES := $(patsubst %,$(BUILD)/bench/%,$(BENCH_NAMES))
$(foreach name,$(BENCH_NAMES),$(eval \
	$(BUILD)/bench/$(name): $(call objects_of,$(wildcard bench/parts/$(name)/*.c))))
$(BENCH_BINARIES): $(BUILD)/bench/%: $(BUILD)/bench/%.o $(BUILD)/libhaecer-benchlib.a \
		   $(ALL_ARCHIVES)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libhaecer-benchlib.a \
		$(ALL_ARCHIVES) $(ALL_LDLIBS) $(CK_LIBS)
BENCH_PROGRAMS += $(BENCH_BINARIES)
