# attribution/: whose energy is it — package energy charged to processes and cgroups by the
# kernel's CPU time (attribution.h); a static library for haecer-mon, tests and the Slurm plugin.
ATTRIBUTION_SOURCES := $(wildcard attribution/*.c)
$(BUILD)/libhaecer-attribution.a: $(call objects_of,$(ATTRIBUTION_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-attribution.a
