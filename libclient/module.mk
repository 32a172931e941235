# libclient/: libhaecer, static and shared. It carries the protocol, ring and logging code it
# needs so applications link one library.
HAECER_LIBRARY_SOURCES := $(wildcard libclient/*.c proto/*.c shm/*.c common/*.c)
HAECER_LIBRARY_OBJECTS := $(call objects_of,$(HAECER_LIBRARY_SOURCES))
HAECER_LDLIBS = $(PFM_LIBS) -lm

$(BUILD)/libhaecer.a: $(HAECER_LIBRARY_OBJECTS)
$(BUILD)/libhaecer.so: $(HAECER_LIBRARY_OBJECTS)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libhaecer.so.1 -Wl,--no-undefined -o $@ $^ $(HAECER_LDLIBS)
PROGRAMS += $(BUILD)/libhaecer.a $(BUILD)/libhaecer.so
