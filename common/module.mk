# common/: small helpers every program shares (logging).
COMMON_SOURCES := $(wildcard common/*.c)
$(BUILD)/libhaecer-common.a: $(call objects_of,$(COMMON_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-common.a
