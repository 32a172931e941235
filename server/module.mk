# server/: msrd. Everything but main() goes into libmsrd.a so tests can link its parts; the
# backends are a layer of their own below it (backend/, libhaecer-backend.a).
SERVER_MAIN := server/msrd.c
SERVER_SOURCES := $(filter-out $(SERVER_MAIN),$(wildcard server/*.c))
$(BUILD)/libmsrd.a: $(call objects_of,$(SERVER_SOURCES))
PROGRAMS += $(BUILD)/libmsrd.a

MSRD_ARCHIVES = $(BUILD)/libmsrd.a $(BUILD)/libhaecer-backend.a $(BUILD)/libhaecer-policy.a \
		$(BUILD)/libhaecer-proto.a $(BUILD)/libhaecer-shm.a $(BUILD)/libhaecer-common.a
MSRD_LDLIBS = $(URING_LIBS) $(CYAML_LIBS) $(CAP_LIBS) $(SECCOMP_LIBS) -lm

ifneq ($(wildcard $(SERVER_MAIN)),)
$(BUILD)/msrd: $(BUILD)/server/msrd.o $(MSRD_ARCHIVES)
	$(CC) $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $^ $(MSRD_LDLIBS)
PROGRAMS += $(BUILD)/msrd
endif
