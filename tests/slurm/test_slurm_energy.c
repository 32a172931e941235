/*
 * The SPANK plugin (slurm/spank_haecer.c) in a real single-node Slurm cluster on loopback,
 * started here in a temporary directory from Debian's munged, slurmctld and slurmd (a generated
 * munge key and slurm.conf: proctrack/pgid, task/none, no accounting, SlurmUser root, free
 * ports; plugstack.conf loading build/spank_haecer.so), energy from a real msrd on the
 * simulated Sandy Bridge. Two batch jobs run side by side on the node's two CPUs, one busy
 * (spins 3 s) and one asleep (sleep 3), the busy one with --haecer-energy:
 *  - each job's AdminComment (scontrol show job) holds its step's haecer_energy line;
 *  - the busy job's energy dominates and the two energies follow the two jobs' CPU times;
 *  - in each job's window, its energy plus the node's remainder (idle, other processes, the
 *    other job) is the node's energy, and the other job's energy fits in that remainder within
 *    the stated ±;
 *  - the opted-in job's output has the line, the other's not;
 *  - `haecer-mon serve --slurm-dir` (the plugin's run_dir) exports the busy step's energy with
 *    job, step and user labels while it runs, and, after it ended, exactly what its
 *    AdminComment says.
 * sacct is not asserted on: it needs slurmdbd and a MySQL/MariaDB database, which this test
 * does not start; AdminComment is what sacct -o AdminComment shows where slurmdbd runs.
 * Skipped (77) when Slurm, munge or the plugin is not built/installed, or when not root
 * (slurmd must be). Named *energy* so it runs alone (it measures CPU time).
 */
#include "tests/mon/serve_test.h"

#include <arpa/inet.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "tests/lib/msrd_group.h"

#define MUNGED "/usr/sbin/munged"
#define SLURMCTLD "/usr/sbin/slurmctld"
#define SLURMD "/usr/sbin/slurmd"
#define SCONTROL "/usr/bin/scontrol"
#define SBATCH "/usr/bin/sbatch"

static struct msrd_server server;
static char directory[PATH_MAX];
static pid_t daemons[3];

struct job_energy {
	double joules, error, node_joules, other_joules, cpu_s;
};

static char *in_dir(const char *name)
{
	static char paths[8][PATH_MAX + 64];
	static unsigned next;
	char *path = paths[next++ % 8];

	snprintf(path, sizeof(paths[0]), "%s/%s", directory, name);
	return path;
}

/* A daemon in the foreground, its output in DIR/log_name. */
static pid_t start_daemon(const char *const *argv, const char *log_name)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int log_fd = open(in_dir(log_name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(log_fd, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void write_config(void)
{
	char conf[8 * PATH_MAX + 2048], plugstack[PATH_MAX * 2];
	char key[1024];
	FILE *random = fopen("/dev/urandom", "r");
	unsigned ctld_port = harness_free_loopback_port(), slurmd_port = harness_free_loopback_port();

	assert_non_null(random);
	assert_int_equal(fread(key, 1, sizeof(key), random), sizeof(key));
	fclose(random);
	assert_int_equal(mkdir(in_dir("munge"), 0700), 0);
	assert_int_equal(mkdir(in_dir("state"), 0700), 0);
	assert_int_equal(mkdir(in_dir("spool"), 0700), 0);
	int fd = open(in_dir("munge/key"), O_WRONLY | O_CREAT | O_EXCL, 0400);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, key, sizeof(key)), (ssize_t)sizeof(key));
	close(fd);
	snprintf(conf, sizeof(conf),
		 "ClusterName=haecer\nSlurmctldHost=localhost\nSlurmctldPort=%u\nSlurmdPort=%u\n"
		 "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nAuthInfo=socket=%s/munge/sock\n"
		 "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\n"
		 "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
		 "JobAcctGatherType=jobacct_gather/none\nMpiDefault=none\n"
		 "StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool\n"
		 "SlurmctldPidFile=%s/slurmctld.pid\nSlurmdPidFile=%s/slurmd.pid\n"
		 "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nReturnToService=2\n"
		 "PlugStackConfig=%s/plugstack.conf\n"
		 "NodeName=localhost CPUs=2 State=UNKNOWN\n"
		 "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n",
		 ctld_port, slurmd_port, directory, directory, directory, directory, directory,
		 directory);
	assert_int_equal(harness_write_file(in_dir("slurm.conf"), conf, 0644), 0);
	snprintf(plugstack, sizeof(plugstack),
		 "required %s/spank_haecer.so socket=%s interval_ms=200 run_dir=%s\n",
		 harness_build_dir(), server.socket_path, in_dir("run"));
	assert_int_equal(harness_write_file(in_dir("plugstack.conf"), plugstack, 0644), 0);
	setenv("SLURM_CONF", in_dir("slurm.conf"), 1);
}

static void start_cluster(void)
{
	char key_option[PATH_MAX + 16], socket_option[PATH_MAX + 16], pid_option[PATH_MAX + 16];
	char log_option[PATH_MAX + 16], seed_option[PATH_MAX + 16];

	snprintf(key_option, sizeof(key_option), "--key-file=%s", in_dir("munge/key"));
	snprintf(socket_option, sizeof(socket_option), "--socket=%s", in_dir("munge/sock"));
	snprintf(pid_option, sizeof(pid_option), "--pid-file=%s", in_dir("munge/pid"));
	snprintf(log_option, sizeof(log_option), "--log-file=%s", in_dir("munge/log"));
	snprintf(seed_option, sizeof(seed_option), "--seed-file=%s", in_dir("munge/seed"));
	const char *munged[] = { MUNGED, "-F", "--force", key_option, socket_option, pid_option,
				 log_option, seed_option, NULL };
	daemons[0] = start_daemon(munged, "munged.out");
	for (int round = 0; round < 100 && access(in_dir("munge/sock"), F_OK) != 0; round++)
		usleep(50000);
	const char *slurmctld[] = { SLURMCTLD, "-D", "-i", "-f", in_dir("slurm.conf"), NULL };
	daemons[1] = start_daemon(slurmctld, "slurmctld.out");
	const char *slurmd[] = { SLURMD, "-D", "-f", in_dir("slurm.conf"), NULL };
	daemons[2] = start_daemon(slurmd, "slurmd.out");
	for (int round = 0; round < 200; round++) {
		const char *argv[] = { SCONTROL, "show", "node", "localhost", NULL };
		char *out = NULL;
		int status = harness_run(argv, &out, NULL);
		bool idle = status == 0 && out != NULL && strstr(out, "State=IDLE") != NULL;
		free(out);
		if (idle)
			return;
		usleep(100000);
	}
	fail_msg("the node never became IDLE (logs in %s)", directory);
}

static unsigned submit(const char *output, bool opt_in, const char *script)
{
	const char *with[] = { SBATCH, "--parsable", "-n1", "--haecer-energy", "-o", output,
			       "--wrap", script, NULL };
	const char *without[] = { SBATCH, "--parsable", "-n1", "-o", output, "--wrap", script, NULL };
	char *out = NULL, *err = NULL;
	unsigned job = 0;

	if (harness_run(opt_in ? with : without, &out, &err) != 0)
		fail_msg("sbatch failed: %s", err != NULL ? err : "");
	assert_int_equal(sscanf(out, "%u", &job), 1);
	free(out);
	free(err);
	return job;
}

/* Poll scontrol show job until its AdminComment has the plugin's line. */
static void job_energy(unsigned job, struct job_energy *energy)
{
	char id[16];
	const char *argv[] = { SCONTROL, "show", "job", id, NULL };

	snprintf(id, sizeof(id), "%u", job);
	for (int round = 0; round < 400; round++) {
		char *out = NULL;
		harness_run(argv, &out, NULL);
		const char *line = out != NULL ? strstr(out, "AdminComment=haecer_energy,") : NULL;
		if (line != NULL) {
			fprintf(stderr, "job %u: %.*s\n", job, (int)strcspn(line, "\n"), line);
			assert_int_equal(sscanf(strstr(line, "joules="), "joules=%lf,error=%lf,"
						"node_joules=%lf,other_joules=%lf,cpu_s=%lf",
						&energy->joules, &energy->error, &energy->node_joules,
						&energy->other_joules, &energy->cpu_s), 5);
			assert_non_null(strstr(line, "source=simulated"));
			free(out);
			return;
		}
		free(out);
		usleep(100000);
	}
	fail_msg("job %u never got its AdminComment (logs in %s)", job, directory);
}

/* The busy step's series in serve's answer, or NAN when it is not there. */
static double step_series(unsigned port, unsigned job)
{
	struct http_reply reply;
	char series[160];
	double value;

	snprintf(series, sizeof(series),
		 "haecer_slurm_step_energy_joules_total{slurm_job=\"%u\",slurm_step=\"batch\",user=\"root\","
		 "simulated=\"1\"}", job);
	http_get(port, "/metrics", NULL, &reply);
	assert_int_equal(reply.code, 200);
	value = sample_value(reply.body, series);
	free(reply.text);
	return value;
}

/* Scrape until the step's series is above floor; a minute at most (only a hang fails). */
static double step_series_above(unsigned port, unsigned job, double floor)
{
	double value = NAN;

	for (int round = 0; round < 600; round++) {
		value = step_series(port, job);
		if (!isnan(value) && value > floor)
			return value;
		usleep(100000);
	}
	fail_msg("job %u's step series never went above %g (last %g)", job, floor, value);
	return value;
}

static bool file_has(const char *path, const char *text)
{
	char *content = NULL;
	const char *argv[] = { "/bin/cat", path, NULL };
	bool has = harness_run(argv, &content, NULL) == 0 && strstr(content, text) != NULL;

	free(content);
	return has;
}

/* The simulated Sandy Bridge package at its maximum (configs/models/sandybridge.yaml). */
#define PACKAGE_MAX_WATTS 35.0

static void test_two_jobs(void **state)
{
	struct job_energy busy, sleepy;
	char run_dir[PATH_MAX + 16];
	const char *serve_arguments[] = { "serve", "--listen", "127.0.0.1:0", "--interval", "200",
					  "--resolution-uj", "0", "--top", "0", "--slurm-dir",
					  run_dir, NULL };
	struct proc serve;
	unsigned port;

	(void)state;
	snprintf(directory, sizeof(directory), "%s", "/tmp/haecer-slurm-XXXXXX");
	assert_non_null(mkdtemp(directory));
	write_config();
	snprintf(run_dir, sizeof(run_dir), "%s/run", directory);
	port = serve_start_arguments(&serve, server.socket_path, serve_arguments);
	start_cluster();
	unsigned busy_job = submit(in_dir("busy.out"), true,
				   "timeout 3 sh -c 'while :; do :; done'; echo busy done");
	unsigned sleepy_job = submit(in_dir("sleepy.out"), false, "sleep 3; echo sleepy done");
	double running = step_series_above(port, busy_job, 0);
	job_energy(busy_job, &busy);
	job_energy(sleepy_job, &sleepy);
	/* Once ended, serve's series is the step's final figure (after serve's next tick). */
	double final = step_series_above(port, busy_job, busy.joules - 1e-3);
	fprintf(stderr, "serve: busy step %.3f J while running, %.6f J at the end\n", running, final);
	assert_true(running <= final);
	assert_true(fabs(final - busy.joules) <= 1e-3);
	serve_stop(&serve, NULL);
	assert_true(busy.cpu_s > 1 && busy.joules > 0);
	assert_true(busy.joules > 5 * sleepy.joules);
	/* The energies follow the CPU times. The sleeper's is a few ms of sh and sleep, charged at
	 * whatever the package drew in those ms: too little to compare energy per CPU second with
	 * the busy job's (4x apart in one run), but never more than its CPU time at the package's
	 * full power. The ratio is compared only when both CPU times are large enough to mean it. */
	double ratio = (busy.joules / fmax(sleepy.joules, 1e-9)) /
		       (busy.cpu_s / fmax(sleepy.cpu_s, 1e-9));
	fprintf(stderr, "energy ratio / CPU-time ratio: %.2f\n", ratio);
	assert_true(sleepy.joules <= sleepy.cpu_s * PACKAGE_MAX_WATTS + sleepy.error + 1e-3);
	assert_true(busy.joules <= busy.cpu_s * PACKAGE_MAX_WATTS + busy.error);
	if (sleepy.cpu_s >= 0.05)
		assert_true(ratio > 0.33 && ratio < 3);
	/* Each window: the job + the rest = the node; the other job fits in the rest. */
	assert_true(fabs(busy.joules + busy.other_joules - busy.node_joules) < 1e-2);
	assert_true(sleepy.joules <= busy.other_joules + busy.error + sleepy.error);
	assert_true(busy.joules <= sleepy.other_joules + busy.error + sleepy.error +
				   0.2 * busy.node_joules); /* windows differ by up to a tick */
	assert_true(file_has(in_dir("busy.out"), "haecer_energy step=batch"));
	assert_true(file_has(in_dir("sleepy.out"), "sleepy done"));
	assert_false(file_has(in_dir("sleepy.out"), "haecer_energy"));
}

/* After a failure: cancel what still runs (our slurm.conf is $SLURM_CONF) and give the step
 * daemons a few seconds to end, so no slurmstepd outlives the cluster. */
static void cancel_jobs(void)
{
	const char *scancel[] = { "/usr/bin/scancel", "--full", "-u", "root", NULL };
	const char *squeue[] = { "/usr/bin/squeue", "-h", NULL };

	if (daemons[1] <= 0 || harness_run(scancel, NULL, NULL) != 0)
		return;
	for (int round = 0; round < 50; round++) {
		char *out = NULL;
		bool empty = harness_run(squeue, &out, NULL) == 0 && out != NULL && out[0] == '\0';
		free(out);
		if (empty)
			return;
		usleep(100000);
	}
}

static int teardown(void **state)
{
	cancel_jobs();
	serve_teardown(state);
	for (int i = 2; i >= 0; i--)
		if (daemons[i] > 0) {
			kill(daemons[i], SIGTERM);
			waitpid(daemons[i], NULL, 0);
			daemons[i] = 0;
		}
	if (getenv("HAECER_TEST_KEEP") != NULL)
		fprintf(stderr, "kept %s\n", directory);
	else if (directory[0] != '\0')
		harness_remove_tree(directory);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_two_jobs, teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };
	const char *needed[] = { MUNGED, SLURMCTLD, SLURMD, SCONTROL, SBATCH };
	char plugin[PATH_MAX];

	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
		if (access(needed[i], X_OK) != 0) {
			printf("skip: %s is not installed (scripts/install-deps.sh)\n", needed[i]);
			return 77;
		}
	snprintf(plugin, sizeof(plugin), "%s/spank_haecer.so", harness_build_dir());
	if (access(plugin, R_OK) != 0) {
		printf("skip: %s is not built (no /usr/include/slurm/spank.h, or a sanitizer "
		       "build: slurmstepd cannot load an ASan/TSan object)\n", plugin);
		return 77;
	}
	if (geteuid() != 0) {
		printf("skip: slurmd must run as root\n");
		return 77;
	}
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
