# harness/: what tests and benchmarks share to run the real msrd (start, stop, raw clients,
# policy texts, what /proc says of a process). Linked into tests and benchmarks, never into a
# product binary.
HARNESS_SOURCES := $(wildcard harness/*.c)
$(BUILD)/libhaecer-harness.a: $(call objects_of,$(HARNESS_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-harness.a
