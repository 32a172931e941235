# libclient/: libhaecer, static and shared. It carries the protocol, ring and logging code it
# needs so applications link one library.
HAECER_LIBRARY_SOURCES := $(wildcard libclient/*.c proto/*.c shm/*.c common/*.c)
HAECER_LIBRARY_OBJECTS := $(call objects_of,$(HAECER_LIBRARY_SOURCES))
HAECER_LDLIBS = $(PFM_LIBS) -lm
# Sanitizer runtimes are linked into executables, not shared libraries, so a sanitized
# libhaecer.so legitimately has undefined __asan_* symbols.
ifeq ($(SANITIZE),1)
HAECER_SHARED_FLAGS :=
else
HAECER_SHARED_FLAGS := -Wl,--no-undefined
endif

$(BUILD)/libhaecer.a: $(HAECER_LIBRARY_OBJECTS)
$(BUILD)/libhaecer.so: $(HAECER_LIBRARY_OBJECTS)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libhaecer.so.1 $(HAECER_SHARED_FLAGS) -o $@ $^ $(HAECER_LDLIBS)
PROGRAMS += $(BUILD)/libhaecer.a $(BUILD)/libhaecer.so
