# tools/: each tools/haecer-NAME.c, plus any tools/NAME/*.c, becomes build/haecer-NAME linked
# against tools/common (libhaecer-tools.a) and libhaecer.
TOOL_MAINS := $(wildcard tools/haecer-*.c)
TOOLS := $(patsubst tools/%.c,$(BUILD)/%,$(TOOL_MAINS))
tool_extra_sources = $(wildcard tools/$(patsubst haecer-%,%,$(1))/*.c)
# tools/common/: what every tool shares (options, usage, version: toolopt.h).
$(BUILD)/libhaecer-tools.a: $(call objects_of,$(wildcard tools/common/*.c))

.SECONDEXPANSION:
$(TOOLS): $(BUILD)/%: $(BUILD)/tools/%.o $$(call objects_of,$$(call tool_extra_sources,$$*)) \
		$(BUILD)/libhaecer-tools.a $(BUILD)/libhaecer.a
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(HAECER_LDLIBS)
PROGRAMS += $(TOOLS)
# haecer-mon top --by: the attribution engine (attribution/).
$(BUILD)/haecer-mon: $(BUILD)/libhaecer-attribution.a
# haecer-mon serve: HTTP by libmicrohttpd (tools/mon/serve.c).
MHD_LIBS = $(call pkg_libs,libmicrohttpd)
$(BUILD)/haecer-mon: HAECER_LDLIBS += $(MHD_LIBS)
