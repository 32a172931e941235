/*
 * prof/calm.c — haecer-prof calm (seed 003 §3.2): does profiling change what it measures?
 *
 * The command runs RUNS times plainly and RUNS times under `haecer-prof record`, interleaved
 * (plain, profiled, profiled, plain, ...) so a drift of the machine hits both alike. For each
 * run: wall time, the energy of every package (primary domain, msrd's 64-bit totals read before
 * and after), and — through an msrd schedule of APERF (0xE8) and MPERF (0xE7) of each host CPU
 * every 10 ms — the effective frequency of every CPU in every epoch it was not halted. A profiled
 * run's time and energy are the program's own, exec to exit, from its profile (the recorder's
 * set-up and last reading are not the program's; record reads the same energy totals at the two
 * ends, as calm reads them around a plain run); a plain run's are fork to exit
 * (TSC rate × ΔAPERF / ΔMPERF). CHAPPIE's criteria: time and energy within 5 %, and the two
 * frequency distributions (binned by the Freedman–Diaconis rule over both) correlated with a
 * Pearson coefficient of at least 0.9. The last line is key=value for scripts.
 */
#include "prof/prof.h"
#include "common/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "shm/ring.h"

#define EPOCH_NS 10000000ull
#define MAX_FREQ_CPUS 7u
#define CALM_TIME_PCT 5.0
#define CALM_ENERGY_PCT 5.0
#define CALM_PCC 0.9

struct samples {
	double *values;
	size_t count, capacity;
};

static int samples_add(struct samples *samples, double value)
{
	if (samples->count == samples->capacity) {
		size_t capacity = samples->capacity ? samples->capacity * 2 : 256;
		double *grown = realloc(samples->values, capacity * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		samples->values = grown;
		samples->capacity = capacity;
	}
	samples->values[samples->count++] = value;
	return 0;
}

struct calm {
	struct haecer_conn *conn;
	struct haecer_machine_info machine;
	/* frequency */
	bool frequency;
	uint32_t freq_cpus;
	struct ring_consumer ring;
	struct ring_record *records;
	uint64_t last_aperf[MAX_FREQ_CPUS], last_mperf[MAX_FREQ_CPUS];
	bool have_last[MAX_FREQ_CPUS];
	struct samples freq[2];
	/* Cycles over the active epochs of each mode: the mean clock weighted by activity. */
	double active_aperf[2], active_mperf[2];
	struct samples seconds[2], joules[2];
	/* CPU time: the program's (both modes) and the recorder's (profiled runs): in all, and
	 * while the program ran (what falls inside the window the energy is measured over) */
	struct samples cpu_seconds[2], recorder_seconds, recorder_run_seconds;
};

static int setup(struct calm *calm, const char *socket)
{
	int status = haecer_connect(socket, &calm->conn);

	if (status < 0) {
		tool_warn("calm: cannot connect to msrd: %s", haecer_msrd_strerror(status));
		return status;
	}
	status = haecer_machine_info(calm->conn, &calm->machine);
	if (status < 0)
		return status;
	const struct haecer_machine_info *machine = &calm->machine;
	double probe;
	status = prof_package_joules(calm->conn, machine, &probe);
	if (status < 0) {
		tool_warn("calm: msrd does not let this user read package energy: %s",
			  haecer_conn_error(calm->conn));
		return status;
	}

	/* Frequency: APERF and MPERF of the host's CPUs, if the policy grants them. */
	struct haecer_msr_op ops[2 * MAX_FREQ_CPUS];
	long host = sysconf(_SC_NPROCESSORS_ONLN);
	calm->freq_cpus = (uint32_t)(host < (long)MAX_FREQ_CPUS ? host : (long)MAX_FREQ_CPUS);
	if (calm->freq_cpus > machine->cpu_count)
		calm->freq_cpus = machine->cpu_count;
	for (uint32_t cpu = 0; cpu < calm->freq_cpus; cpu++) {
		ops[2 * cpu] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = cpu,
						       .address = MSR_IA32_APERF };
		ops[2 * cpu + 1] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = cpu,
							   .address = MSR_IA32_MPERF };
	}
	struct haecer_schedule_spec spec = { .period_ns = EPOCH_NS, .major = 42,
					     .minor = (uint16_t)(getpid() + 1), .capacity = 1 << 16 };
	const char *major = getenv("HAECER_PROF_RING_MAJOR");
	uint16_t major_number;
	if (number_parse_u16(major, &major_number))
		spec.major = major_number;
	uint32_t schedule, instance;
	int fd;
	if (haecer_batch_register(calm->conn, ops, 2 * calm->freq_cpus, &spec.handle) < 0) {
		tool_warn("calm: frequency not measured: %s", haecer_conn_error(calm->conn));
		return 0;
	}
	status = haecer_schedule_start(calm->conn, &spec, &schedule, &instance);
	haecer_batch_release(calm->conn, spec.handle);
	if (status < 0 ||
	    haecer_ring_open(calm->conn, spec.major, spec.minor, instance, NULL, &fd) < 0) {
		tool_warn("calm: frequency not measured: %s", haecer_conn_error(calm->conn));
		return 0;
	}
	status = ring_consumer_attach(&calm->ring, fd);
	close(fd);
	calm->records = calloc(1 << 16, sizeof(*calm->records));
	calm->frequency = status == 0 && calm->records;
	return 0;
}

/* Epochs since the last call: those inside [from, to] count for `mode`. */
static void collect_frequency(struct calm *calm, int mode, uint64_t from, uint64_t to)
{
	ssize_t got;
	uint64_t lost = 0;

	if (!calm->frequency)
		return;
	while ((got = ring_consume(&calm->ring, calm->records, 1 << 16, &lost)) > 0) {
		for (ssize_t i = 0; i + 1 < got; i++) {
			const struct ring_record *aperf = &calm->records[i];
			const struct ring_record *mperf = &calm->records[i + 1];
			if (aperf->counter_id % 2 != 0 || mperf->counter_id != aperf->counter_id + 1)
				continue;
			uint32_t cpu = aperf->counter_id / 2;
			i++;
			if (cpu >= MAX_FREQ_CPUS)
				continue;
			uint64_t da = aperf->value - calm->last_aperf[cpu];
			uint64_t dm = mperf->value - calm->last_mperf[cpu];
			/* An epoch the CPU was halted nearly all of says nothing about its clock:
			 * a ratio of a few cycles is noise. */
			double min_active = (double)calm->machine.tsc_hz * (EPOCH_NS / 1e9) * 0.01;
			bool usable = calm->have_last[cpu] && (double)dm >= min_active &&
				      aperf->timestamp >= from && aperf->timestamp <= to;
			calm->last_aperf[cpu] = aperf->value;
			calm->last_mperf[cpu] = mperf->value;
			calm->have_last[cpu] = true;
			if (!usable)
				continue;
			samples_add(&calm->freq[mode],
				    (double)calm->machine.tsc_hz * (double)da / (double)dm / 1e6);
			calm->active_aperf[mode] += (double)da;
			calm->active_mperf[mode] += (double)dm;
		}
	}
}

/* Package energy (primary domain, every package) at `when`, interpolated from the profile's
 * energy records. */
static double energy_at(const struct prof_data *data, uint64_t when, bool *found)
{
	double total = 0, last_j[PROF_MAX_PACKAGES] = { 0 };
	uint64_t last_t[PROF_MAX_PACKAGES] = { 0 };
	bool done[PROF_MAX_PACKAGES] = { false };
	int domain = -1;
	size_t offset = 8;
	uint32_t type, size;
	const void *payload;

	*found = false;
	while (prof_data_next(data, &offset, &type, &payload, &size) > 0) {
		if (type != PROF_REC_ENERGY || size < sizeof(struct prof_energy))
			continue;
		const struct prof_energy *energy = payload;
		if (domain < 0)
			domain = (int)energy->domain; /* the first op: PKG where there is one */
		if ((int)energy->domain != domain || energy->package >= PROF_MAX_PACKAGES ||
		    done[energy->package])
			continue;
		uint32_t p = energy->package;
		if (energy->time_ns >= when && last_t[p] != 0) {
			double fraction = (double)(when - last_t[p]) /
					  (double)(energy->time_ns - last_t[p]);
			total += last_j[p] + fraction * (energy->joules - last_j[p]);
			done[p] = true;
			*found = true;
		}
		last_t[p] = energy->time_ns;
		last_j[p] = energy->joules;
	}
	return total;
}

/* The profiled program's own time (exec to exit) and energy over it, from its data file: the
 * recorder's set-up before the exec and its last energy reading after the exit are not the
 * program's. The energy is what record read at the two ends; interpolated between the
 * schedule's readings it came out low (median -0.06 %, single runs to -0.2 %, quiet host at
 * 10 ms readings): the first and last intervals' idle part dilutes the program's power. */
static int profiled_window(const char *path, double *seconds, double *joules,
			   double *cpu_seconds, double *recorder_seconds,
			   double *recorder_run_seconds)
{
	struct prof_data data;
	int status = prof_data_load(path, &data);
	bool found_start, found_end;

	if (status < 0)
		return status;
	char *cpu_text = prof_meta_get(&data, "program_cpu_ns");
	char *recorder_text = prof_meta_get(&data, "recorder_cpu_ns");
	char *run_text = prof_meta_get(&data, "recorder_run_cpu_ns");
	*cpu_seconds = cpu_text ? strtoull(cpu_text, NULL, 10) / 1e9 : NAN;
	*recorder_seconds = recorder_text ? strtoull(recorder_text, NULL, 10) / 1e9 : NAN;
	*recorder_run_seconds = run_text ? strtoull(run_text, NULL, 10) / 1e9 : NAN;
	free(cpu_text);
	free(recorder_text);
	free(run_text);
	char *start_text = prof_meta_get(&data, "start_ns");
	char *end_text = prof_meta_get(&data, "end_ns");
	char *start_joules = prof_meta_get(&data, "package_joules_at_start");
	char *end_joules = prof_meta_get(&data, "package_joules_at_end");
	status = -EBADMSG;
	if (start_text && end_text) {
		uint64_t start = strtoull(start_text, NULL, 10), end = strtoull(end_text, NULL, 10);
		if (start_joules && end_joules && end > start) {
			/* read by record at the two ends, as a plain run is read */
			*seconds = (end - start) / 1e9;
			*joules = strtod(end_joules, NULL) - strtod(start_joules, NULL);
			status = 0;
		} else {
			/* an older profile, or msrd refused record those reads: between the
			 * schedule's readings */
			double before = energy_at(&data, start, &found_start);
			double after = energy_at(&data, end, &found_end);
			if (found_start && found_end && end > start) {
				*seconds = (end - start) / 1e9;
				*joules = after - before;
				status = 0;
			}
		}
	}
	free(start_joules);
	free(end_joules);
	free(start_text);
	free(end_text);
	prof_data_free(&data);
	return status;
}

static int run_once(struct calm *calm, const struct prof_calm_options *options, int mode,
		    const char *data_path)
{
	char hz[16];
	const char *profiled[10];
	char *const *argv = options->command;
	size_t count = 0;
	double before, after;
	int raw;

	snprintf(hz, sizeof(hz), "%u", options->hz);
	if (mode == 1) {
		profiled[count++] = "haecer-prof";
		profiled[count++] = "record";
		profiled[count++] = "-q";
		if (options->sampler) {
			profiled[count++] = "--sampler";
			profiled[count++] = options->sampler;
		}
		profiled[count++] = "-F";
		profiled[count++] = hz;
		profiled[count++] = "-o";
		profiled[count++] = data_path;
		profiled[count++] = "--";
	}
	collect_frequency(calm, mode, 0, 0); /* what came before does not count */
	if (prof_package_joules(calm->conn, &calm->machine, &before) < 0)
		return -EIO;
	uint64_t start = clock_monotonic_raw_ns();
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		if (mode == 1) {
			size_t words = 0;
			while (argv[words])
				words++;
			const char **all = calloc(count + words + 1, sizeof(*all));
			if (!all)
				_exit(127);
			memcpy(all, profiled, count * sizeof(*all));
			memcpy(all + count, argv, words * sizeof(*all));
			/* readlink, not exec of /proc/self/exe: under valgrind that link is
			 * the valgrind tool, the readlink answer is this program */
			char self[4096];
			ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
			if (length <= 0)
				_exit(127);
			self[length] = '\0';
			execv(self, (char *const *)all);
		} else {
			execvp(argv[0], argv);
		}
		_exit(127);
	}
	if (child < 0)
		return -errno;
	struct rusage usage;
	memset(&usage, 0, sizeof(usage));
	while (wait4(child, &raw, 0, &usage) < 0 && errno == EINTR)
		;
	uint64_t end = clock_monotonic_raw_ns();
	if (prof_package_joules(calm->conn, &calm->machine, &after) < 0)
		return -EIO;
	usleep(2 * EPOCH_NS / 1000);
	collect_frequency(calm, mode, start, end);
	if (!WIFEXITED(raw) || WEXITSTATUS(raw) != 0) {
		tool_warn("calm: '%s' failed (%s run)", argv[0], mode ? "profiled" : "plain");
		return -ECHILD;
	}
	double seconds = (end - start) / 1e9, joules = after - before;
	double cpu_seconds = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
			     (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
	double recorder_seconds = NAN, recorder_run_seconds = NAN;
	if (mode == 1 && profiled_window(data_path, &seconds, &joules, &cpu_seconds,
					 &recorder_seconds, &recorder_run_seconds) < 0) {
		tool_warn("calm: the profile of the run is unreadable");
		return -EBADMSG;
	}
	if (!isnan(cpu_seconds))
		samples_add(&calm->cpu_seconds[mode], cpu_seconds);
	if (!isnan(recorder_seconds))
		samples_add(&calm->recorder_seconds, recorder_seconds);
	if (!isnan(recorder_run_seconds))
		samples_add(&calm->recorder_run_seconds, recorder_run_seconds);
	samples_add(&calm->seconds[mode], seconds);
	samples_add(&calm->joules[mode], joules);
	return 0;
}

static double mean_of(const struct samples *samples)
{
	double sum = 0;

	for (size_t i = 0; i < samples->count; i++)
		sum += samples->values[i];
	return samples->count ? sum / samples->count : 0;
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* The p-quantile (0..1), interpolated between the two nearest order statistics. */
static double quantile_of(const struct samples *samples, double p)
{
	if (samples->count == 0)
		return 0;
	double *sorted = malloc(samples->count * sizeof(*sorted));
	if (!sorted)
		return mean_of(samples);
	memcpy(sorted, samples->values, samples->count * sizeof(*sorted));
	qsort(sorted, samples->count, sizeof(*sorted), compare_double);
	double position = p * (double)(samples->count - 1);
	size_t below = (size_t)position;
	double value = sorted[below];
	if (below + 1 < samples->count)
		value += (position - (double)below) * (sorted[below + 1] - sorted[below]);
	free(sorted);
	return value;
}

static double median_of(const struct samples *samples)
{
	return quantile_of(samples, 0.5);
}

/* The spread of the middle half: a few epochs whose two registers msrd read apart in time
 * (preempted between them) move it little, unlike the standard deviation. */
static double iqr_of(const struct samples *samples)
{
	return quantile_of(samples, 0.75) - quantile_of(samples, 0.25);
}

static double sd_of(const struct samples *samples)
{
	double mean = mean_of(samples), sum = 0;

	for (size_t i = 0; i < samples->count; i++)
		sum += (samples->values[i] - mean) * (samples->values[i] - mean);
	return samples->count > 1 ? sqrt(sum / (samples->count - 1)) : 0;
}



/* Pearson correlation of the two distributions' PMFs over Freedman–Diaconis bins of both;
 * returns NAN when there is nothing to compare, 1 when both sit in one bin. */
static double frequency_pcc(struct calm *calm, size_t *bins_out)
{
	struct samples *a = &calm->freq[0], *b = &calm->freq[1];
	size_t n = a->count + b->count;

	*bins_out = 0;
	if (a->count < 2 || b->count < 2)
		return NAN;
	double *all = malloc(n * sizeof(*all));
	if (!all)
		return NAN;
	memcpy(all, a->values, a->count * sizeof(*all));
	memcpy(all + a->count, b->values, b->count * sizeof(*all));
	qsort(all, n, sizeof(*all), compare_double);
	double low = all[0], high = all[n - 1];
	double iqr = all[(3 * n) / 4] - all[n / 4];
	free(all);
	/* No finer than 1 MHz: the ratio of two counters read a few microseconds apart is not
	 * exact to more than that, and a constant clock should land in one bin. */
	double width = 2 * iqr / cbrt((double)n);
	if (width < 1.0)
		width = 1.0;
	if (high - low < 1.0) {
		*bins_out = 1;
		return 1.0;
	}
	size_t bins = (size_t)ceil((high - low) / width);
	if (bins < 2)
		bins = 2;
	if (bins > 1000)
		bins = 1000;
	double *pa = calloc(bins, sizeof(double)), *pb = calloc(bins, sizeof(double));
	double pcc = NAN;
	if (!pa || !pb)
		goto out;
	for (size_t i = 0; i < a->count; i++) {
		size_t bin = (size_t)((a->values[i] - low) / (high - low) * (double)(bins - 1) + 0.5);
		pa[bin] += 1.0 / a->count;
	}
	for (size_t i = 0; i < b->count; i++) {
		size_t bin = (size_t)((b->values[i] - low) / (high - low) * (double)(bins - 1) + 0.5);
		pb[bin] += 1.0 / b->count;
	}
	double ma = 1.0 / bins, sab = 0, saa = 0, sbb = 0;
	for (size_t i = 0; i < bins; i++) {
		sab += (pa[i] - ma) * (pb[i] - ma);
		saa += (pa[i] - ma) * (pa[i] - ma);
		sbb += (pb[i] - ma) * (pb[i] - ma);
	}
	pcc = saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : NAN;
	*bins_out = bins;
out:
	free(pa);
	free(pb);
	return pcc;
}

/* The mean clock while active, every epoch weighted by its active cycles (sum of dAPERF over
 * sum of dMPERF): an epoch the CPU was barely awake in weighs as little as it ran. The plain
 * mean of per-epoch ratios lets a few such epochs, whose two registers an msrd preempted
 * between its reads shifted against each other, move it by percent. */
static double active_mhz(const struct calm *calm, int mode)
{
	if (calm->active_mperf[mode] <= 0.0)
		return NAN;
	return (double)calm->machine.tsc_hz * calm->active_aperf[mode] /
	       calm->active_mperf[mode] / 1e6;
}

int prof_calm(const struct prof_calm_options *options)
{
	struct calm calm;
	char data_path[] = "/tmp/haecer-prof-calm-XXXXXX";
	int status, fd = mkstemp(data_path);

	memset(&calm, 0, sizeof(calm));
	if (fd < 0) {
		tool_warn("calm: cannot create a temporary file: %s", strerror(errno));
		return -errno;
	}
	close(fd);
	status = setup(&calm, options->socket);
	if (status < 0)
		goto out;
	/* plain, profiled, profiled, plain, ...: a drift of the machine within a pair hits
	 * both modes alike, not always the second one. */
	for (unsigned run = 0; run < options->runs && status == 0; run++) {
		int first = run % 2;
		status = run_once(&calm, options, first, data_path);
		if (status == 0)
			status = run_once(&calm, options, !first, data_path);
	}
	if (status < 0)
		goto out;

	bool simulated = calm.machine.flags & HAECER_MACHINE_SIMULATED;
	/* Medians: one run that another process slowed should not decide the verdict. */
	double t0 = median_of(&calm.seconds[0]), t1 = median_of(&calm.seconds[1]);
	double e0 = median_of(&calm.joules[0]), e1 = median_of(&calm.joules[1]);
	double time_pct = t0 > 0 ? 100 * (t1 - t0) / t0 : NAN;
	double energy_pct = e0 > 0 ? 100 * (e1 - e0) / e0 : NAN;
	size_t bins;
	double pcc = frequency_pcc(&calm, &bins);
	printf("haecer-prof calm: %u runs each, interleaved, profiled at %u Hz%s%s%s\n",
	       options->runs, options->hz, options->sampler ? " by the sampler " : "",
	       options->sampler ? options->sampler : "", simulated ? "; SIMULATED CPU: energies and frequencies from a model" : "");
	printf("%-10s %23s %23s %10s\n", "", "plain: median (sd)", "profiled: median (sd)",
	       "overhead");
	printf("%-10s %14.4f (%6.4f) %14.4f (%6.4f) %+8.2f %%\n", "time s", t0,
	       sd_of(&calm.seconds[0]), t1, sd_of(&calm.seconds[1]), time_pct);
	printf("%-10s %14.4f (%6.4f) %14.4f (%6.4f) %+8.2f %%   (every package, whole machine)\n",
	       "energy J", e0, sd_of(&calm.joules[0]), e1, sd_of(&calm.joules[1]), energy_pct);
	if (calm.cpu_seconds[0].count && calm.cpu_seconds[1].count) {
		double c0 = median_of(&calm.cpu_seconds[0]), c1 = median_of(&calm.cpu_seconds[1]);
		printf("%-10s %14.4f (%6.4f) %14.4f (%6.4f) %+8.2f %%   (the program's CPU time; "
		       "record's own: median %.4f s, %.4f s of it while the program ran)\n",
		       "CPU s", c0, sd_of(&calm.cpu_seconds[0]), c1, sd_of(&calm.cpu_seconds[1]),
		       c0 > 0 ? 100 * (c1 - c0) / c0 : NAN, median_of(&calm.recorder_seconds),
		       median_of(&calm.recorder_run_seconds));
	}
	if (calm.frequency)
		printf("frequency: %zu and %zu CPU epochs of %llu ms, mean %.0f and %.0f MHz "
		       "(interquartile range %.1f and %.1f), PMF correlation %.3f over %zu "
		       "Freedman-Diaconis bins\n",
		       calm.freq[0].count, calm.freq[1].count, EPOCH_NS / 1000000ull,
		       active_mhz(&calm, 0), active_mhz(&calm, 1), iqr_of(&calm.freq[0]),
		       iqr_of(&calm.freq[1]), pcc, bins);
	else
		printf("frequency: not measured (msrd does not grant APERF/MPERF)\n");
	bool calm_time = fabs(time_pct) <= CALM_TIME_PCT;
	bool calm_energy = fabs(energy_pct) <= CALM_ENERGY_PCT;
	bool calm_freq = !calm.frequency || isnan(pcc) || pcc >= CALM_PCC;
	bool is_calm = calm_time && calm_energy && calm_freq;
	printf("verdict: %s (time %s, energy %s, frequency %s; thresholds %.0f %%, %.0f %%, "
	       "PCC %.1f)\n",
	       is_calm ? "calm: the profile can be trusted" : "NOT calm: profiling disturbed the run",
	       calm_time ? "ok" : "off", calm_energy ? "ok" : "off",
	       !calm.frequency || isnan(pcc) ? "unknown" : calm_freq ? "ok" : "off", CALM_TIME_PCT,
	       CALM_ENERGY_PCT, CALM_PCC);
	printf("overhead_time_pct=%.3f overhead_energy_pct=%.3f freq_pcc=%.3f calm=%s\n", time_pct,
	       energy_pct, pcc, is_calm ? "yes" : "no");
out:
	unlink(data_path);
	if (calm.frequency)
		ring_consumer_detach(&calm.ring);
	free(calm.records);
	for (int mode = 0; mode < 2; mode++) {
		free(calm.freq[mode].values);
		free(calm.seconds[mode].values);
		free(calm.joules[mode].values);
		free(calm.cpu_seconds[mode].values);
	}
	free(calm.recorder_seconds.values);
	free(calm.recorder_run_seconds.values);
	haecer_close(calm.conn);
	return status;
}
