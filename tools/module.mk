# tools/: each tools/haecer-NAME.c, plus any tools/NAME/*.c, becomes build/haecer-NAME linked
# against libhaecer.
TOOL_MAINS := $(wildcard tools/haecer-*.c)
TOOLS := $(patsubst tools/%.c,$(BUILD)/%,$(TOOL_MAINS))
tool_extra_sources = $(wildcard tools/$(patsubst haecer-%,%,$(1))/*.c)

.SECONDEXPANSION:
$(TOOLS): $(BUILD)/%: $(BUILD)/tools/%.o $$(call objects_of,$$(call tool_extra_sources,$$*)) \
		$(BUILD)/libhaecer.a
	$(CC) $(LDFLAGS) -o $@ $^ $(HAECER_LDLIBS)
PROGRAMS += $(TOOLS)
