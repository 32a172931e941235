/*
 * tests/backend/backend_test.h — helpers shared by the backend tests: opening the simulated CPU
 * on the shipped models, and building stand-in device trees in a temporary directory.
 */
#ifndef HAECER_TESTS_BACKEND_TEST_H
#define HAECER_TESTS_BACKEND_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "backend/backend.h"
#include "backend/backend_sim.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

static const char *const shipped_models[] = { "sandybridge", "skylake-sp", "zen3", "zen4" };
#define SHIPPED_MODEL_COUNT (sizeof(shipped_models) / sizeof(shipped_models[0]))

/* configs/models of the source tree (HAECER_SOURCE is set by scripts/run-tests.sh). */
static inline const char *test_models_dir(void)
{
	static char dir[PATH_MAX];
	const char *source = getenv("HAECER_SOURCE");

	snprintf(dir, sizeof(dir), "%s/configs/models", source ? source : ".");
	return dir;
}

static inline void test_quiet_logs(void)
{
	log_init("test", getenv("HAECER_TEST_VERBOSE") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR, false);
}

/* The seed of the rough simulated CPU in these tests: the same roughness every run. */
#define TEST_SIM_SEED 12ull

/* The simulated CPU in virtual time from the model files of `models_dir`, every CPU idle; rough
 * (seed TEST_SIM_SEED) unless `ideal`. Aborts the test when it does not open. */
static inline struct msr_backend *open_virtual_sim_mode(const char *models_dir, const char *model,
							 uint64_t access_step_ns, bool ideal)
{
	struct backend_options options = {
		.kind = BACKEND_SIM,
		.sim_model = model,
		.models_dir = models_dir,
		.sim_virtual_time = true,
		.sim_access_step_ns = access_step_ns,
		.sim_ideal = ideal,
		.sim_seed = TEST_SIM_SEED,
	};
	struct msr_backend *backend = NULL;
	char why[512] = "";
	int ret = backend_open(&options, &backend, why, sizeof(why));

	if (ret < 0) {
		fprintf(stderr, "cannot open sim model %s in %s: %d %s\n", model, models_dir, ret,
			why);
		abort();
	}
	return backend;
}

/* The rough simulated CPU (the default). */
static inline struct msr_backend *open_virtual_sim_from(const char *models_dir, const char *model,
							 uint64_t access_step_ns)
{
	return open_virtual_sim_mode(models_dir, model, access_step_ns, false);
}

/* The ideal one, for tests of exact values: updates every 1 ms in phase, SMIs take no time. */
static inline struct msr_backend *open_ideal_sim(const char *model, uint64_t access_step_ns)
{
	return open_virtual_sim_mode(test_models_dir(), model, access_step_ns, true);
}

/* The same with the shipped models. */
static inline struct msr_backend *open_virtual_sim(const char *model, uint64_t access_step_ns)
{
	return open_virtual_sim_from(test_models_dir(), model, access_step_ns);
}

/* The same from a directory of variants (write_variant_model). */
static inline struct msr_backend *open_virtual_sim_in(const char *models_dir, const char *model)
{
	return open_virtual_sim_from(models_dir, model, 0);
}

/* dir/NAME.yaml: a variant of the shipped model `from` (tests/lib harness_model_variant). */
static inline void write_variant_model(const char *dir, const char *name, const char *from,
				       const char *const *replace, size_t pairs,
				       const char *extra)
{
	if (harness_model_variant(dir, name, from, replace, pairs, extra) < 0)
		abort();
}

/* ---- stand-in trees ---- */

static inline char *make_temp_dir(void)
{
	char *dir = strdup("/tmp/haecer-backend-XXXXXX");

	if (!dir || !mkdtemp(dir))
		abort();
	return dir;
}

static inline void remove_tree(const char *dir)
{
	harness_remove_tree(dir);
}

/* One temporary tree per test program, for cmocka group setup/teardown. */
static char *test_root;

static inline int test_root_setup(void **state)
{
	(void)state;
	test_root = make_temp_dir();
	return 0;
}

static inline int test_root_teardown(void **state)
{
	(void)state;
	remove_tree(test_root);
	free(test_root);
	test_root = NULL;
	return 0;
}

/* The machine the msr backend describes from the stand-in tree at `root`; the tree is then
 * removed and `root` freed. Aborts the test when the backend does not open or describe it. */
static inline struct machine_info standin_machine_info(char *root)
{
	struct backend_options options = { .kind = BACKEND_MSR, .dev_root = root };
	struct msr_backend *backend = NULL;
	struct machine_info info;
	int ret = backend_open(&options, &backend, NULL, 0);

	if (ret == 0)
		ret = backend_machine_info(backend, &info);
	if (ret < 0) {
		fprintf(stderr, "msr backend on the stand-in tree %s: %d\n", root, ret);
		abort();
	}
	backend_close(backend);
	remove_tree(root);
	free(root);
	return info;
}

static inline uint64_t read_or_die(struct msr_backend *backend, uint32_t cpu, uint32_t address)
{
	uint64_t value = 0;
	int ret = backend_read(backend, cpu, address, &value);

	if (ret < 0) {
		fprintf(stderr, "read cpu %u 0x%X: %d\n", cpu, address, ret);
		abort();
	}
	return value;
}

#endif
