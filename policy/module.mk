# policy/: built as a static library; sources are picked up by wildcard.
POLICY_SOURCES := $(wildcard policy/*.c)
$(BUILD)/libhaecer-policy.a: $(call objects_of,$(POLICY_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-policy.a
