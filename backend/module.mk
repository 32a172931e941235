# backend/: the ways msrd reaches registers (msr driver, msr-safe, the simulated CPU in sim/), a
# layer below msrd that depends only on hw/ and common/. One public header: backend/backend.h.
BACKEND_SOURCES := $(wildcard backend/*.c backend/sim/*.c)
$(BUILD)/libhaecer-backend.a: $(call objects_of,$(BACKEND_SOURCES))
PROGRAMS += $(BUILD)/libhaecer-backend.a
