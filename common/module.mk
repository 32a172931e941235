# common/: small helpers every program shares (logging; energy_share.h, the seed 003 §4 rule
# haecer-prof and the region markers both charge energy by).
COMMON_SOURCES := $(wildcard common/*.c)
$(BUILD)/libhaecer-common.a: $(call objects_of,$(COMMON_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-common.a
