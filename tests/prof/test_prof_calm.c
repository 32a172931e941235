/*
 * haecer-prof calm runs the program plainly and profiled, interleaved, and reports time and
 * energy overhead and the frequency distributions (APERF/MPERF through an msrd schedule, which
 * the simulated CPU implements): with the policy granting APERF/MPERF it measures epochs in both
 * modes and finds the simulated Sandy Bridge's turbo clock in both: a mean between its all-core
 * and 1-core bins (the host's other CPU, busy with whatever else runs here, decides which), and
 * a distribution with a spread (the model's clock noise and the other core's comings and goings),
 * where the ideal CPU's constant clock gives 2.5 GHz with the middle half of the epochs within
 * 1 MHz (what every simulated run gave before the turbo clock); without the grant it says the
 * frequency was not measured instead of inventing one. Its last line is key=value. The overheads
 * themselves are not asserted (tests never assert on speed), nor the verdict: whether the other
 * host CPU is busier during the profiled runs depends on what else runs on this machine.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"
#include "harness/tool_argv.h"

#define POLICY_BASE                                                                                \
	POLICY_HEADER                                                                               \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"                    \
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"                         \
	"  - {name: IA32_MPERF, address: 0xE7, read: true, set: freq}\n"                          \
	"  - {name: IA32_APERF, address: 0xE8, read: true, set: freq}\n"                          \
	"rules:\n"                                                                                 \
	"  - match: {uid: 0}\n"                                                                    \
	"    create_rings: [1-99]\n"                                                               \
	"    monitor_rings: [1-99]\n"

static const char with_frequency[] = POLICY_BASE "    allow: [rapl, freq]\n";
static const char without_frequency[] = POLICY_BASE "    allow: [rapl]\n";

/* Run calm against msrd on the simulated Sandy Bridge, rough or (`ideal`) with a constant clock. */
static int calm(const char *policy, bool ideal, char **out)
{
	struct msrd_server server;
	char tool[PATH_MAX], helper[PATH_MAX];
	const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
					  ideal ? "--sim-ideal" : NULL, NULL };
	char *err = NULL;

	snprintf(tool, sizeof(tool), "%s/haecer-prof", harness_build_dir());
	snprintf(helper, sizeof(helper), "%s/tests/prof/helper_prof_work", harness_build_dir());
	if (msrd_start(&server, policy, arguments) < 0)
		return -1;
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	const char *words[] = { "calm", "-n", "2", "-F", "500", "--", helper, "functions", "0.15",
				NULL };
	int status = harness_run_program(tool, words, out, &err);
	if (status != 0)
		fprintf(stderr, "calm exited %d: %s\n%s\n", status, err, *out ? *out : "");
	free(err);
	if (msrd_stop(&server) != 0)
		status = -1;
	return status;
}

struct frequency_report {
	unsigned long epochs[2], bins;
	double mhz[2], iqr[2], pcc;
};

static int frequency_report(const char *policy, bool ideal, struct frequency_report *report)
{
	char *out = NULL;
	if (calm(policy, ideal, &out) != 0) {
		free(out);
		return 1;
	}
	const char *last = strstr(out, "overhead_time_pct=");
	double time_pct, energy_pct;
	char verdict[8];
	const char *frequency = strstr(out, "frequency: ");
	int ok = last && frequency &&
		 sscanf(last, "overhead_time_pct=%lf overhead_energy_pct=%lf freq_pcc=%lf calm=%3s",
			&time_pct, &energy_pct, &report->pcc, verdict) == 4 &&
		 (strcmp(verdict, "yes") == 0 || strcmp(verdict, "no") == 0) &&
		 sscanf(frequency,
			"frequency: %lu and %lu CPU epochs of 10 ms, mean %lf and %lf MHz "
			"(interquartile range %lf and %lf), PMF correlation %*f over %lu "
			"Freedman-Diaconis bins",
			&report->epochs[0], &report->epochs[1], &report->mhz[0], &report->mhz[1],
			&report->iqr[0], &report->iqr[1], &report->bins) == 7 &&
		 strstr(out, "SIMULATED CPU");
	if (!ok)
		fprintf(stderr, "unexpected calm report:\n%s\n", out);
	free(out);
	if (!ok)
		return 1;
	fprintf(stderr, "%s: epochs %lu / %lu, %.0f / %.0f MHz, interquartile range %.1f / %.1f MHz, "
		"pcc %.3f over %lu bins\n", ideal ? "ideal" : "rough", report->epochs[0],
		report->epochs[1], report->mhz[0], report->mhz[1], report->iqr[0], report->iqr[1],
		report->pcc, report->bins);
	return 0;
}

static int check_with_frequency(void)
{
	struct frequency_report rough, ideal;

	if (frequency_report(with_frequency, false, &rough) ||
	    frequency_report(with_frequency, true, &ideal))
		return 1;
	CHECK(rough.epochs[0] > 0 && rough.epochs[1] > 0);
	/* configs/models/sandybridge.yaml: 3.0 GHz with both cores active, 3.2 GHz with one, each
	 * within +-30 MHz of noise; an epoch's two registers are read apart in time: 5 % */
	for (int mode = 0; mode < 2; mode++)
		CHECK(rough.mhz[mode] > 3000 * 0.95 && rough.mhz[mode] < 3200 * 1.05);
	/* Not degenerate: the middle half of the epochs spreads over more than 1 MHz in each mode
	 * (the noise of 20 draws of sigma 10 MHz alone gives about 3). */
	CHECK(rough.bins >= 2 && rough.iqr[0] > 1.0 && rough.iqr[1] > 1.0);
	/* The constant clock of the ideal CPU (what every simulated run gave before the turbo
	 * clock): 2.5 GHz, and the middle half of the epochs within a tenth of the rough clock's
	 * spread, or 1 MHz -- the spread above is the clock's, not the method's. Only the time
	 * between an epoch's two reads moves the ideal epochs, with any change of load in it:
	 * 0.1-0.3 MHz natively (rough 12-20 MHz); under valgrind, whose msrd reads the two
	 * registers up to a hundred microseconds apart while the load of msrd's clients changes
	 * every 1 ms (backend/sim/sim_follow.c; every 100 us until 2026-11-28), 1.0-1.8 MHz (rough
	 * 120-133 MHz). */
	CHECK(ideal.epochs[0] > 0 && ideal.epochs[1] > 0);
	for (int mode = 0; mode < 2; mode++)
		CHECK(ideal.mhz[mode] > 2500 * 0.95 && ideal.mhz[mode] < 2500 * 1.05 &&
		      ideal.iqr[mode] < fmax(1.0, rough.iqr[mode] / 10.0));
	return 0;
}

static int check_without_frequency(void)
{
	char *out = NULL;
	if (calm(without_frequency, false, &out) != 0) {
		free(out);
		return 1;
	}
	int ok = strstr(out, "frequency: not measured") && strstr(out, "freq_pcc=nan");
	if (!ok)
		fprintf(stderr, "unexpected calm report:\n%s\n", out);
	free(out);
	return ok ? 0 : 1;
}

int main(void)
{
	if (check_with_frequency() || check_without_frequency())
		return 1;
	return 0;
}
