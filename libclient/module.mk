# libclient/: libhaecer, static and shared. It carries the protocol, ring and descriptor-passing
# code it needs so applications link one library, but not msrd's logger (common/log.c): the
# library reports through return values and haecer_error_detail(), never on stderr.
# libclient/haecer.map keeps everything but the public API local to libhaecer.so.
HAECER_LIBRARY_SOURCES := $(wildcard libclient/*.c proto/*.c shm/*.c) common/fdpass.c common/json.c common/callgrind.c
HAECER_VERSION_SCRIPT := libclient/haecer.map
HAECER_LIBRARY_OBJECTS := $(call objects_of,$(HAECER_LIBRARY_SOURCES))
HAECER_LDLIBS = $(PFM_LIBS) -lm
# Sanitizer runtimes are linked into executables, not shared libraries, so a sanitized
# libhaecer.so legitimately has undefined __asan_* (__tsan_*) symbols.
ifneq ($(SANITIZE),0)
HAECER_SHARED_FLAGS :=
else
HAECER_SHARED_FLAGS := -Wl,--no-undefined
endif

$(BUILD)/libhaecer.a: $(HAECER_LIBRARY_OBJECTS)
$(BUILD)/libhaecer.so: $(HAECER_LIBRARY_OBJECTS) $(HAECER_VERSION_SCRIPT)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -shared -Wl,-soname,libhaecer.so.1 \
		-Wl,--version-script=$(HAECER_VERSION_SCRIPT) $(HAECER_SHARED_FLAGS) -o $@ \
		$(HAECER_LIBRARY_OBJECTS) $(HAECER_LDLIBS)
PROGRAMS += $(BUILD)/libhaecer.a $(BUILD)/libhaecer.so
