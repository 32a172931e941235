/*
 * slurm/spank_haecer.c — haecer's SPANK plugin: each job step's own energy on a node.
 *
 * In slurmstepd (remote context), from slurm_spank_init_post_opt (as root: msrd's policy sees
 * slurmstepd, not the job's user; before the tasks start) until slurm_spank_exit, a thread
 * steps the attribution engine (attribution/attribution.h) every interval on the package
 * energy msrd counts (energy-pkg, all packages), and adds to the step what its processes were charged:
 * its tasks (S_TASK_PID), their descendants, and processes in a task's process group
 * (proctrack/pgid puts each task in its own group; a daemonized child keeps it). A process
 * that starts and exits inside one interval is seen by no snapshot and lands in the node's
 * "other" share; so does the time since the last snapshot of one that exits.
 *
 * At the step's end it reports "haecer_energy step=ID joules=J error=E node_joules=N
 * other_joules=R cpu_s=C source=hardware|simulated" (R: the node's energy in the step's window
 * that went to anything but this step — idle, other processes, the kernel):
 *   - in the job's AdminComment, through `scontrol update` (slurmstepd runs as root), so
 *     `scontrol show job` shows it without slurmdbd (one field per job: the latest step's);
 *   - appended to the job's standard output file (scontrol's StdOut=) when the job asked with
 *     --haecer-energy (batch steps: srun steps' output goes through srun, not a file);
 *   - in slurmd's log (slurm_info).
 * While the step runs, every interval, it also writes the step's energy so far to
 * RUN_DIR/JOB.STEP (key=value lines: job, step, user, uid, joules, error, cpu_s, ended), which
 * `haecer-mon serve` exports as
 * haecer_slurm_step_energy_joules_total{slurm_job,slurm_step,user}: the node's Prometheus
 * series carry the job. The file of an ended step stays (ended=1, its final
 * figures) for KEEP_ENDED_S, so the last scrape sees the whole step; a later step's exit removes
 * it. The file is written by root into a root-owned directory: serve trusts no other owner.
 * plugstack.conf arguments: socket=PATH (msrd's socket; libhaecer's default otherwise),
 * interval_ms=N (default 250), run_dir=PATH (default /run/haecer/slurm).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "attribution/attribution.h"
#include "haecer/msrd.h"
#include "hw/msr.h"

SPANK_PLUGIN(haecer, 1);

#define MAX_TASKS 256u
#define DEFAULT_INTERVAL_MS 250u
#define DEFAULT_RUN_DIR "/run/haecer/slurm"
#define KEEP_ENDED_S 600

struct step_energy {
	struct attribution *engine;
	struct haecer_conn *conn;
	struct haecer_machine_info machine;
	uint32_t package_cpu[ATTRIBUTION_MAX_PACKAGES];
	double previous[ATTRIBUTION_MAX_PACKAGES];
	unsigned packages;
	char job[16], name[16];    /* job id and step name (a number, batch or extern) */
	char user[64];
	uint32_t uid;
	pid_t tasks[MAX_TASKS];
	unsigned task_count;
	double joules, error_joules, node_joules, cpu_ns;
	pthread_t thread;
	pthread_mutex_t lock;
	bool running;
	bool stop;
};

static struct step_energy step = { .lock = PTHREAD_MUTEX_INITIALIZER };
static const char *socket_path;
static const char *run_dir = DEFAULT_RUN_DIR;
static unsigned interval_ms = DEFAULT_INTERVAL_MS;
static int print_output;

static int opt_in(int value, const char *argument, int remote)
{
	(void)value;
	(void)argument;
	(void)remote;
	print_output = 1;
	return 0;
}

static struct spank_option options[] = {
	{ "haecer-energy", NULL, "print the step's energy (haecer) in the job's output", 0, 0,
	  opt_in },
	SPANK_OPTIONS_TABLE_END
};

static void parse_arguments(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "socket=", 7) == 0)
			socket_path = argv[i] + 7;
		else if (strncmp(argv[i], "interval_ms=", 12) == 0 && atoi(argv[i] + 12) > 0)
			interval_ms = (unsigned)atoi(argv[i] + 12);
		else if (strncmp(argv[i], "run_dir=", 8) == 0 && argv[i][8] == '/')
			run_dir = argv[i] + 8;
		else
			slurm_error("haecer: unknown argument '%s'", argv[i]);
	}
}

int slurm_spank_init(spank_t spank, int argc, char **argv)
{
	parse_arguments(argc, argv);
	for (struct spank_option *option = options; option->name != NULL; option++)
		if (spank_option_register(spank, option) != ESPANK_SUCCESS)
			return -1;
	return 0;
}

/* Each package's energy-pkg joules since the previous call (0 the first time). */
static int package_energy(double *joules)
{
	int exponent = step.machine.rapl_energy_exponent[RAPL_DOMAIN_PKG];

	for (unsigned p = 0; p < step.packages; p++) {
		uint64_t total;
		int status = haecer_energy_read(step.conn, step.package_cpu[p],
						rapl_energy_status_address(RAPL_DOMAIN_PKG), NULL,
						&total);
		if (status < 0)
			return status;
		double now = ldexp((double)total, -exponent);
		joules[p] = step.previous[p] > 0 && now >= step.previous[p] ? now - step.previous[p]
									     : 0;
		step.previous[p] = now;
	}
	return 0;
}

/* pid's parent and process group (fields 4 and 5 of /proc/PID/stat); false when it is gone. */
static bool parent_and_group(pid_t pid, pid_t *parent, pid_t *group)
{
	char path[64], text[512];
	bool found = false;
	FILE *file;
	int ppid, pgid;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	file = fopen(path, "r");
	if (file == NULL)
		return false;
	if (fgets(text, sizeof(text), file) != NULL) {
		const char *end = strrchr(text, ')'); /* comm may hold spaces and parentheses */
		found = end != NULL && sscanf(end + 1, " %*c %d %d", &ppid, &pgid) == 2;
	}
	fclose(file);
	*parent = found ? ppid : 0;
	*group = found ? pgid : 0;
	return found;
}

static bool is_task(pid_t pid)
{
	for (unsigned i = 0; i < step.task_count; i++)
		if (step.tasks[i] == pid)
			return true;
	return false;
}

/* Whether pid belongs to the step: a task, a descendant of one (timeout(1) and shells make
 * their own process groups), or in a task's process group (a daemonized child, reparented). */
static bool in_step(pid_t pid)
{
	for (unsigned depth = 0; depth < 64 && pid > 1; depth++) {
		pid_t parent, group;
		if (is_task(pid))
			return true;
		if (!parent_and_group(pid, &parent, &group))
			return false;
		if (is_task(group))
			return true;
		pid = parent;
	}
	return false;
}

static void sample(void)
{
	double joules[ATTRIBUTION_MAX_PACKAGES];
	const struct attribution_process *processes;
	struct attribution_interval interval;

	if (package_energy(joules) < 0 ||
	    attribution_step(step.engine, joules, step.packages, &interval) < 0)
		return;
	size_t count = attribution_processes(step.engine, &processes);
	pthread_mutex_lock(&step.lock);
	step.node_joules += interval.package_joules;
	for (size_t i = 0; i < count; i++) {
		if (processes[i].interval_cpu_ns <= 0 || !in_step(processes[i].pid))
			continue;
		step.joules += processes[i].interval_joules;
		step.error_joules += processes[i].error_joules;
		step.cpu_ns += processes[i].interval_cpu_ns;
	}
	pthread_mutex_unlock(&step.lock);
}

/* RUN_DIR/JOB.STEP, replaced whole (a rename), so a reader never sees half of it. */
static void write_state(bool ended)
{
	char path[4096], temporary[4200];
	FILE *file;

	snprintf(path, sizeof(path), "%s/%s.%s", run_dir, step.job, step.name);
	snprintf(temporary, sizeof(temporary), "%s.tmp", path);
	file = fopen(temporary, "we");
	if (file == NULL)
		return;
	pthread_mutex_lock(&step.lock);
	fprintf(file, "job=%s\nstep=%s\nuser=%s\nuid=%u\njoules=%.6f\nerror=%.6f\ncpu_s=%.6f\n"
		      "ended=%d\n", step.job, step.name, step.user, step.uid, step.joules,
		step.error_joules, step.cpu_ns / 1e9, ended ? 1 : 0);
	pthread_mutex_unlock(&step.lock);
	if (fclose(file) != 0 || rename(temporary, path) != 0)
		unlink(temporary);
}

/* Remove the files of steps that ended more than KEEP_ENDED_S ago (their last write). */
static void remove_old_states(void)
{
	DIR *dir = opendir(run_dir);
	struct dirent *entry;
	struct stat status;
	time_t now = time(NULL);

	if (dir == NULL)
		return;
	while ((entry = readdir(dir)) != NULL) {
		if (entry->d_name[0] == '.' ||
		    fstatat(dirfd(dir), entry->d_name, &status, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(status.st_mode) || now - status.st_mtime < KEEP_ENDED_S)
			continue;
		unlinkat(dirfd(dir), entry->d_name, 0);
	}
	closedir(dir);
}

static void *sampler(void *unused)
{
	struct timespec wait = { .tv_sec = interval_ms / 1000,
				 .tv_nsec = (long)(interval_ms % 1000) * 1000000L };
	(void)unused;
	while (!__atomic_load_n(&step.stop, __ATOMIC_ACQUIRE)) {
		nanosleep(&wait, NULL);
		sample();
		write_state(false);
	}
	return NULL;
}

/* msrd's machine: the first CPU of each package, to read its energy on. */
static int open_energy(void)
{
	int status = haecer_connect(socket_path, &step.conn);

	if (status == 0)
		status = haecer_machine_info(step.conn, &step.machine);
	if (status < 0)
		return status;
	step.packages = step.machine.package_count < ATTRIBUTION_MAX_PACKAGES
				? step.machine.package_count
				: ATTRIBUTION_MAX_PACKAGES;
	for (unsigned p = 0; p < step.packages; p++)
		for (uint32_t cpu = step.machine.cpu_count; cpu-- > 0;)
			if (cpu < HAECER_MAX_CPUS && step.machine.cpu_package[cpu] == p)
				step.package_cpu[p] = cpu;
	return 0;
}

/* The step's job id, name and user, for its state file and report. */
static void identify(spank_t spank)
{
	uint32_t job = 0, step_id = 0;
	uid_t uid = 0;
	struct passwd entry, *found = NULL;
	char buffer[1024];

	spank_get_item(spank, S_JOB_ID, &job);
	spank_get_item(spank, S_JOB_STEPID, &step_id);
	spank_get_item(spank, S_JOB_UID, &uid);
	snprintf(step.job, sizeof(step.job), "%u", job);
	if (step_id == SLURM_BATCH_SCRIPT)
		snprintf(step.name, sizeof(step.name), "batch");
	else if (step_id == SLURM_EXTERN_CONT)
		snprintf(step.name, sizeof(step.name), "extern");
	else
		snprintf(step.name, sizeof(step.name), "%u", step_id);
	step.uid = uid;
	if (getpwuid_r(uid, &entry, buffer, sizeof(buffer), &found) == 0 && found != NULL)
		snprintf(step.user, sizeof(step.user), "%s", found->pw_name);
	else
		snprintf(step.user, sizeof(step.user), "%u", (unsigned)uid);
}

int slurm_spank_init_post_opt(spank_t spank, int argc, char **argv)
{
	double joules[ATTRIBUTION_MAX_PACKAGES];
	struct attribution_interval interval;
	int status;

	(void)argc;
	(void)argv;
	if (!spank_remote(spank))
		return 0;
	identify(spank);
	if (mkdir(run_dir, 0755) != 0 && errno != EEXIST)
		slurm_error("haecer: cannot create %s: %s", run_dir, strerror(errno));
	status = open_energy();
	if (status == 0)
		status = attribution_open(&step.engine, NULL);
	if (status == 0)
		status = package_energy(joules);
	if (status == 0)
		status = attribution_step(step.engine, joules, step.packages, &interval);
	if (status == 0 && pthread_create(&step.thread, NULL, sampler, NULL) == 0)
		step.running = true;
	else
		slurm_error("haecer: no energy for this step: %s",
			    strerror(status < 0 ? -status : EAGAIN));
	return 0; /* a step runs without its energy rather than not at all */
}

int slurm_spank_task_post_fork(spank_t spank, int argc, char **argv)
{
	pid_t pid;

	(void)argc;
	(void)argv;
	if (spank_get_item(spank, S_TASK_PID, &pid) != ESPANK_SUCCESS)
		return 0;
	pthread_mutex_lock(&step.lock);
	if (step.task_count < MAX_TASKS)
		step.tasks[step.task_count++] = pid;
	pthread_mutex_unlock(&step.lock);
	return 0;
}

/* Run argv (scontrol) and return its stdout (malloc'ed) or NULL. */
static char *run(char *const argv[])
{
	int pipe_fds[2];
	char *text = NULL;
	size_t size = 0;
	pid_t pid;

	if (pipe(pipe_fds) != 0)
		return NULL;
	pid = fork();
	if (pid == 0) {
		dup2(pipe_fds[1], STDOUT_FILENO);
		close(pipe_fds[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipe_fds[1]);
	FILE *out = open_memstream(&text, &size);
	char buffer[4096];
	ssize_t got;
	while (out != NULL && (got = read(pipe_fds[0], buffer, sizeof(buffer))) > 0)
		fwrite(buffer, 1, (size_t)got, out);
	close(pipe_fds[0]);
	if (out != NULL)
		fclose(out);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return text;
}

/* Append the line to the job's StdOut= file (scontrol show job). */
static void append_to_output(const char *job, const char *line)
{
	char *argv[] = { "/usr/bin/scontrol", "show", "job", (char *)job, NULL };
	char *shown = run(argv), path[4096];
	const char *field = shown != NULL ? strstr(shown, "StdOut=") : NULL;

	if (field != NULL && sscanf(field + 7, "%4095s", path) == 1) {
		FILE *file = fopen(path, "a");
		if (file != NULL) {
			fprintf(file, "%s\n", line);
			fclose(file);
		}
	}
	free(shown);
}

static void report(void)
{
	char line[512], jobid_arg[32], comment[560];
	const char *job_text = step.job, *step_text = step.name;
	bool simulated = step.machine.sim_model[0] != '\0';

	snprintf(line, sizeof(line),
		 "haecer_energy step=%s joules=%.3f error=%.3f node_joules=%.3f other_joules=%.3f "
		 "cpu_s=%.3f source=%s",
		 step_text, step.joules, step.error_joules, step.node_joules, step.node_joules - step.joules,
		 step.cpu_ns / 1e9, simulated ? "simulated" : "hardware");
	slurm_info("haecer: job %s: %s", job_text, line);
	snprintf(comment, sizeof(comment), "AdminComment=%s", line);
	for (char *c = comment; *c != '\0'; c++)
		if (*c == ' ')
			*c = ',';
	snprintf(jobid_arg, sizeof(jobid_arg), "JobId=%s", job_text);
	char *argv[] = { "/usr/bin/scontrol", "update", jobid_arg, comment, NULL };
	free(run(argv));
	if (print_output)
		append_to_output(job_text, line);
}

int slurm_spank_exit(spank_t spank, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	if (!spank_remote(spank) || !step.running)
		return 0;
	__atomic_store_n(&step.stop, true, __ATOMIC_RELEASE);
	pthread_join(step.thread, NULL);
	step.running = false;
	sample(); /* up to the step's end */
	write_state(true);
	remove_old_states();
	report();
	attribution_close(step.engine);
	haecer_close(step.conn);
	return 0;
}
