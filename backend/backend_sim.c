/*
 * backend/backend_sim.c — the simulated CPU's own calls of backend/backend_sim.h, each routed to
 * the simulator (backend/sim/) when the backend is the simulated CPU.
 */
#include "backend/backend_sim.h"
#include "backend/backend_internal.h"

#include <errno.h>

#include "backend/sim/sim.h"

bool backend_sim_virtual_time(const struct msr_backend *backend)
{
	return backend->sim != NULL && backend->info.sim_virtual_time;
}

int backend_sim_now(const struct msr_backend *backend, uint64_t *now_ns)
{
	return backend->sim ? sim_now(backend->sim, now_ns) : -EOPNOTSUPP;
}

int backend_sim_advance(struct msr_backend *backend, uint64_t ns)
{
	return backend->sim ? sim_advance(backend->sim, ns) : -EOPNOTSUPP;
}

int backend_sim_set_load(struct msr_backend *backend, int cpu, double load)
{
	return backend->sim ? sim_set_load(backend->sim, cpu, load) : -EOPNOTSUPP;
}

int backend_sim_load_script(struct msr_backend *backend, const char *path)
{
	return backend->sim ? sim_load_script(backend->sim, path) : -EOPNOTSUPP;
}

int backend_sim_follow_process(struct msr_backend *backend, int pid, bool follow)
{
	return backend->sim ? sim_follow_process(backend->sim, (pid_t)pid, follow) : -EOPNOTSUPP;
}

int backend_sim_busy_cpu_microwatts(const struct msr_backend *backend, uint32_t cpu,
				    enum rapl_domain domain, uint64_t *uw)
{
	return backend->sim ? sim_busy_cpu_microwatts(backend->sim, cpu, domain, uw) : -EOPNOTSUPP;
}

int backend_sim_energy_truth_cpu(const struct msr_backend *backend, uint32_t cpu,
				 enum rapl_domain domain, struct sim_energy_truth *out)
{
	return backend->sim ? sim_energy_truth(backend->sim, cpu, domain, out) : -EOPNOTSUPP;
}

/* The simulated CPU that answers for `package` (its first), or -errno. */
static int sim_package_cpu(const struct msr_backend *backend, uint32_t package)
{
	return backend->sim ? sim_package_first_cpu(backend->sim, package) : -EOPNOTSUPP;
}

int backend_sim_energy_at(const struct msr_backend *backend, uint32_t package,
			  enum rapl_domain domain, uint64_t at_ns, struct sim_energy_truth *out)
{
	int cpu = sim_package_cpu(backend, package);

	return cpu < 0 ? cpu : sim_energy_at(backend->sim, (uint32_t)cpu, domain, at_ns, out);
}

int backend_sim_power_trace(struct msr_backend *backend, const char *text, const char *where)
{
	return backend->sim ? sim_power_trace(backend->sim, text, where) : -EOPNOTSUPP;
}

int backend_sim_energy_truth(const struct msr_backend *backend, uint32_t package,
			     enum rapl_domain domain, struct sim_energy_truth *out)
{
	int cpu = sim_package_cpu(backend, package);

	return cpu < 0 ? cpu : sim_energy_truth(backend->sim, (uint32_t)cpu, domain, out);
}
