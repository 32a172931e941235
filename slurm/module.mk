# slurm/: haecer's SPANK plugin (spank_haecer.c) — each job step's own energy by the attribution
# engine. Built only where Slurm's public header is (Debian's libslurm-dev), and not in sanitizer
# builds: slurmstepd, not built with ASan/TSan, cannot load an object that needs their runtime.
ifneq ($(wildcard /usr/include/slurm/spank.h),)
ifeq ($(SANITIZER_FLAGS),)
SLURM_PLUGIN := $(BUILD)/spank_haecer.so
$(SLURM_PLUGIN): $(BUILD)/slurm/spank_haecer.o $(BUILD)/libhaecer-attribution.a \
		 $(BUILD)/libhaecer.a $(BUILD)/libhaecer-common.a
	$(CC) -shared $(HAECER_LDFLAGS) $(LDFLAGS) -o $@ $^ -lm -pthread
PROGRAMS += $(SLURM_PLUGIN)
# `make tests` builds the plugin its test loads into slurmd.
$(BUILD)/tests/slurm/test_slurm_energy: | $(SLURM_PLUGIN)
endif
endif
