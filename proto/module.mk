# proto/: built as a static library; sources are picked up by wildcard.
PROTO_SOURCES := $(wildcard proto/*.c)
$(BUILD)/libhaecer-proto.a: $(call objects_of,$(PROTO_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-proto.a
