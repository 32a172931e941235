/*
 * server/energy_cost.c — what measuring costs, counted where it is spent (issue 23, item 3).
 *
 * Precise edges make msrd read a register densely around its updates (energy_edges.c), and a
 * held page makes it sample the registers at the page's rate (energy_page.c). Both are CPU time
 * on a package that is being measured: on real silicon that busy core draws power that lands in
 * the very regions its holders measure. msrd counts, per register, the CPU time of every window
 * and its share of every page sample (CLOCK_THREAD_CPUTIME_ID around them: two clock reads per
 * window or sample) and publishes the running sum on the register's fine pages
 * (measurement_cpu_ns). A client takes the difference over its region: the CPU msrd spent on
 * the registers it measures during it. A page is shared by every holder of the register, so
 * when two programs measure at once each is shown the whole (what the windows cost is the same
 * whether one or two read them): a reader's figure errs high, never low.
 *
 * On the simulated CPU the energy that CPU time drew is known exactly from the model: a busy
 * CPU adds span / cpus of its domain at its power factor (backend_sim_busy_cpu_microwatts), so
 * msrd publishes that energy too (measurement_nj), counted at the moment of each charge; under
 * an imposed power trace it is 0 (the trace, not the load, sets the power). On real hardware
 * msrd cannot know it (the package does not say what one core draws): measurement_nj stays 0
 * and the client estimates it from the CPU time and the package's power (libclient,
 * haecer_energy_cost.c).
 *
 * For that energy to land in the simulated package when it is spent, as on real silicon, msrd
 * has the simulator follow its own process by its CPU-time clock (energy_cost_follow_self), as
 * it follows its clients: at the simulator's 1 ms follow sample instead of /proc/stat's 10 ms
 * ticks, where a window's CPU was smeared over tens of milliseconds into whatever region ran
 * then. Coarse pages show neither (no windows run for them, and a cost that
 * moved with the windows would tell a coarse holder when the register changed).
 */
#include "server/server.h"
#include "backend/backend_sim.h"
#include "common/clock.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t energy_cost_thread_cpu_ns(void)
{
	return clock_ns_of(CLOCK_THREAD_CPUTIME_ID);
}

void energy_cost_charge(struct msrd *server, struct energy_counter *counter, uint64_t cpu_ns)
{
	uint64_t uw = 0;

	counter->sampled.measurement_cpu_ns += cpu_ns;
	if (backend_kind(server->backend) != BACKEND_SIM ||
	    backend_sim_busy_cpu_microwatts(server->backend, counter->cpu,
					    (enum rapl_domain)counter->domain, &uw) < 0)
		return;
	/* ns x uW = fJ; a double keeps the fractions a uint64 of nJ would drop per charge. */
	counter->measurement_nj += (double)cpu_ns * (double)uw * 1e-6;
	counter->sampled.measurement_nj = (uint64_t)counter->measurement_nj;
}

void energy_cost_charge_sampler(struct msrd *server, const bool *wanted, uint64_t cpu_ns)
{
	struct energy_state *energy = &server->energy;
	uint32_t count = 0;

	for (uint32_t i = 0; i < energy->count; i++)
		count += wanted[i];
	for (uint32_t i = 0; count > 0 && i < energy->count; i++)
		if (wanted[i])
			energy_cost_charge(server, &energy->counters[i], cpu_ns / count);
}

void energy_cost_follow_self(struct msrd *server)
{
	int status;

	if (backend_kind(server->backend) != BACKEND_SIM)
		return;
	/* -EOPNOTSUPP in virtual or scripted time: nothing of the host is followed there. */
	status = backend_sim_follow_process(server->backend, (int)getpid(), true);
	if (status < 0 && status != -EOPNOTSUPP)
		log_info("sim: cannot follow msrd's own load (%s): its windows' CPU reaches the "
			 "simulated package through /proc/stat only", strerror(-status));
}
