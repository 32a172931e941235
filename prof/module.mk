# prof/: haecer-prof, the energy profiler (record, report, calm), linked against libhaecer and
# elfutils' libdw (symbols, inlined frames, source lines).
PROF_SOURCES := $(wildcard prof/*.c)
DW_LIBS = $(call pkg_libs,libdw)
$(BUILD)/haecer-prof: $(call objects_of,$(PROF_SOURCES)) $(BUILD)/libhaecer-tools.a \
		$(BUILD)/libhaecer.a
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(HAECER_LDLIBS) $(DW_LIBS)
PROGRAMS += $(BUILD)/haecer-prof

# Test programs the profiler samples: frame pointers and debug information, so call chains and
# lines are known.
$(BUILD)/tests/prof/%.o: HAECER_CFLAGS += -fno-omit-frame-pointer -g

# libhaecer-instrument.so: the -finstrument-functions runtime, preloaded or linked; it carries
# the libhaecer objects it needs so a preload needs nothing else.
INSTRUMENT_SOURCES := $(wildcard prof/instrument/*.c)
INSTRUMENT_VERSION_SCRIPT := prof/instrument/instrument.map
$(BUILD)/libhaecer-instrument.so: $(call objects_of,$(INSTRUMENT_SOURCES)) $(HAECER_LIBRARY_OBJECTS) \
		$(INSTRUMENT_VERSION_SCRIPT)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -shared $(HAECER_SHARED_FLAGS) \
		-Wl,--version-script=$(INSTRUMENT_VERSION_SCRIPT) -o $@ \
		$(filter-out $(INSTRUMENT_VERSION_SCRIPT),$^) $(HAECER_LDLIBS) $(DW_LIBS)
PROGRAMS += $(BUILD)/libhaecer-instrument.so
$(BUILD)/tests/prof/helper_instrumented.o: HAECER_CFLAGS += -finstrument-functions
$(BUILD)/tests/prof/helper_prof_nofp.o: HAECER_CFLAGS += -fomit-frame-pointer

# libhaecer-prof-agent.so: record's sampler where perf_event_open is refused (--sampler timer),
# preloaded into the program; plain C and libc only, so it loads into anything.
AGENT_SOURCES := $(wildcard prof/agent/*.c)
AGENT_VERSION_SCRIPT := prof/agent/agent.map
$(BUILD)/libhaecer-prof-agent.so: $(call objects_of,$(AGENT_SOURCES)) $(AGENT_VERSION_SCRIPT)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -shared $(HAECER_SHARED_FLAGS) \
		-Wl,--version-script=$(AGENT_VERSION_SCRIPT) -o $@ \
		$(filter-out $(AGENT_VERSION_SCRIPT),$^) -ldl
PROGRAMS += $(BUILD)/libhaecer-prof-agent.so
