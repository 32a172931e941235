# shm/: built as a static library; sources are picked up by wildcard.
SHM_SOURCES := $(wildcard shm/*.c)
$(BUILD)/libhaecer-shm.a: $(call objects_of,$(SHM_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-shm.a
