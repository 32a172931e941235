/*
 * server/options.c — msrd's command line. Bad options print one message and exit 2 (the caller
 * does the exit); `msrd --help` documents every option.
 */
#include "server/server.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum option_id {
	OPT_SOCKET = 256,
	OPT_POLICY,
	OPT_BACKEND,
	OPT_SIM_MODEL,
	OPT_SIM_VIRTUAL_TIME,
	OPT_ALLOW_SIM_FALLBACK,
	OPT_SIM_KERNEL_COUNTERS,
	OPT_SIM_LOAD_SCRIPT,
	OPT_SIM_ACCESS_STEP,
	OPT_SIM_LATE_ENERGY_READS,
	OPT_MODELS_DIR,
	OPT_DEV_ROOT,
	OPT_SYSFS_ROOT,
	OPT_PERF_BROKER,
	OPT_LOG_LEVEL,
	OPT_INSECURE_POLICY,
	OPT_SOCKET_MODE,
	OPT_SOCKET_GROUP,
	OPT_READY_FD,
	OPT_RING_GRACE_MS,
	OPT_FRAME_TIMEOUT_MS,
	OPT_CLIENT_TIMEOUT_MS,
	OPT_MAX_CLIENTS,
	OPT_MAX_RINGS,
	OPT_RING_MEMORY_MIB,
	OPT_RECV_BUFFERS,
	OPT_MAX_CLIENTS_PER_UID,
	OPT_MAX_RINGS_PER_UID,
	OPT_RING_MEMORY_PER_UID_MIB,
	OPT_MAX_HANDLES_PER_UID,
	OPT_MAX_SCHEDULES_PER_UID,
	OPT_CHECK_POLICY,
	OPT_IMPORT_ALLOWLIST,
	OPT_FOR_GROUP,
	OPT_RING_MAJORS,
	OPT_STRICT,
	OPT_LIST_SIM_MODELS,
	OPT_PROBE,
	OPT_STATE_DIR,
	OPT_USER,
	OPT_SOCKET_OWNER,
	OPT_SECCOMP,
	OPT_SIM_IDEAL,
	OPT_SIM_SEED,
	OPT_SIM_POWER_SCRIPT,
	OPT_REFUSAL_LOG_BURST,
};

static const struct option long_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "sim-model", required_argument, NULL, OPT_SIM_MODEL },
	{ "sim-virtual-time", no_argument, NULL, OPT_SIM_VIRTUAL_TIME },
	{ "allow-sim-fallback", no_argument, NULL, OPT_ALLOW_SIM_FALLBACK },
	{ "sim-kernel-counters", required_argument, NULL, OPT_SIM_KERNEL_COUNTERS },
	{ "sim-load-script", required_argument, NULL, OPT_SIM_LOAD_SCRIPT },
	{ "sim-access-step-ns", required_argument, NULL, OPT_SIM_ACCESS_STEP },
	{ "sim-late-energy-reads", required_argument, NULL, OPT_SIM_LATE_ENERGY_READS },
	{ "sim-ideal", no_argument, NULL, OPT_SIM_IDEAL },
	{ "sim-seed", required_argument, NULL, OPT_SIM_SEED },
	{ "sim-power-script", required_argument, NULL, OPT_SIM_POWER_SCRIPT },
	{ "models-dir", required_argument, NULL, OPT_MODELS_DIR },
	{ "dev-root", required_argument, NULL, OPT_DEV_ROOT },
	{ "sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT },
	{ "perf-broker", no_argument, NULL, OPT_PERF_BROKER },
	{ "foreground", no_argument, NULL, 'f' },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "insecure-policy-permissions", no_argument, NULL, OPT_INSECURE_POLICY },
	{ "socket-mode", required_argument, NULL, OPT_SOCKET_MODE },
	{ "socket-group", required_argument, NULL, OPT_SOCKET_GROUP },
	{ "ready-fd", required_argument, NULL, OPT_READY_FD },
	{ "ring-grace-ms", required_argument, NULL, OPT_RING_GRACE_MS },
	{ "frame-timeout-ms", required_argument, NULL, OPT_FRAME_TIMEOUT_MS },
	{ "client-timeout-ms", required_argument, NULL, OPT_CLIENT_TIMEOUT_MS },
	{ "max-clients", required_argument, NULL, OPT_MAX_CLIENTS },
	{ "max-rings-per-client", required_argument, NULL, OPT_MAX_RINGS },
	{ "ring-memory-mib", required_argument, NULL, OPT_RING_MEMORY_MIB },
	{ "recv-buffers", required_argument, NULL, OPT_RECV_BUFFERS },
	{ "max-clients-per-uid", required_argument, NULL, OPT_MAX_CLIENTS_PER_UID },
	{ "max-rings-per-uid", required_argument, NULL, OPT_MAX_RINGS_PER_UID },
	{ "ring-memory-per-uid-mib", required_argument, NULL, OPT_RING_MEMORY_PER_UID_MIB },
	{ "max-handles-per-uid", required_argument, NULL, OPT_MAX_HANDLES_PER_UID },
	{ "max-schedules-per-uid", required_argument, NULL, OPT_MAX_SCHEDULES_PER_UID },
	{ "check-policy", required_argument, NULL, OPT_CHECK_POLICY },
	{ "import-allowlist", required_argument, NULL, OPT_IMPORT_ALLOWLIST },
	{ "for-group", required_argument, NULL, OPT_FOR_GROUP },
	{ "ring-majors", required_argument, NULL, OPT_RING_MAJORS },
	{ "strict", no_argument, NULL, OPT_STRICT },
	{ "list-sim-models", no_argument, NULL, OPT_LIST_SIM_MODELS },
	{ "probe", no_argument, NULL, OPT_PROBE },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "user", required_argument, NULL, OPT_USER },
	{ "socket-owner", required_argument, NULL, OPT_SOCKET_OWNER },
	{ "seccomp", required_argument, NULL, OPT_SECCOMP },
	{ "refusal-log-burst", required_argument, NULL, OPT_REFUSAL_LOG_BURST },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

void options_usage(FILE *out)
{
	fprintf(out,
		"Usage: msrd [OPTION]...\n"
		"The haecer MSR server: gives unprivileged programs policy-checked access to\n"
		"model-specific registers and a directory of shared-memory rings.\n"
		"\n"
		"Server:\n"
		"  --socket PATH              listen here (default %s)\n"
		"  --policy FILE              policy file (default %s)\n"
		"  --insecure-policy-permissions  accept a policy file others can write\n"
		"  --socket-mode MODE         octal mode of the socket (default 0666)\n"
		"  --socket-owner USER        user owning the socket\n"
		"  --socket-group GROUP       group owning the socket\n"
		"  --state-dir DIR            where the journal of changed registers lives, so a\n"
		"                             restart after a crash restores them (default %s)\n"
		"  --user USER                run as USER once the devices and the socket are open,\n"
		"                             keeping only CAP_SYS_RAWIO\n"
		"  --seccomp MODE             system call filter: enforce (default; others fail with\n"
		"                             EPERM and are logged), log (the kernel logs them), off\n"
		"  -f, --foreground           stay in the foreground, log to stderr\n"
		"  --log-level LEVEL          error, warn, notice (default), info, debug\n"
		"  --ready-fd N               write one byte to descriptor N once listening\n"
		"  --refusal-log-burst N      log at most N refusals per connection, 4 N per uid,\n"
		"                             every 5 s; count the rest (default 10; 0: all)\n"
		"Backend:\n"
		"  --backend KIND             auto (default: msr, else msr-safe), msr, msr-safe,\n"
		"                             powercap (RAPL energy from sys/class/powercap),\n"
		"                             perf (no registers: the perf_event broker only) or\n"
		"                             sim (the simulated CPU: invented values)\n"
		"  --allow-sim-fallback       auto may fall back to the simulated CPU when no device\n"
		"                             is usable (every result then says it is simulated)\n"
		"  --dev-root DIR             look up dev/cpu/N/msr (and sys/...) under DIR\n"
		"  --sysfs-root DIR           powercap: look up sys/class/powercap under DIR\n"
		"  --perf-broker              open perf events for clients as the policy allows\n"
		"                             (always on with --backend perf)\n"
		"  --sim-model NAME           simulated CPU model (see --list-sim-models)\n"
		"  --models-dir DIR           directory of simulated CPU models\n"
		"  --sim-virtual-time         simulated time moves only when a client advances it\n"
		"  --sim-load-script FILE     scripted load for the simulated CPU\n"
		"  --sim-access-step-ns N     virtual time: each register access moves time by N ns\n"
		"  --sim-kernel-counters SPEC  counters the simulated kernel holds: nmi (the NMI\n"
		"                             watchdog), pmcN, pmcN@MS (taken at MS ms), comma-separated\n"
		"  --sim-late-energy-reads N  every Nth read of an energy register returns the value\n"
		"                             of a read N-1 reads earlier, as a late completion would\n"
		"  --sim-ideal                exact simulated CPU: energy updates every 1 ms in phase,\n"
		"                             SMIs take no time, the clock is constant (default:\n"
		"                             rough, turbo clock, as the model says)\n"
		"  --sim-seed N               seed of the rough simulation (replays it; 0: from the clock)\n"
		"  --sim-power-script FILE    power trace for the simulated CPU's RAPL domains\n"
		"Limits:\n"
		"  --max-clients N            connected clients (default 8192)\n"
		"  --max-rings-per-client N   rings one connection may create or open (default 64)\n"
		"  --ring-memory-mib N        shared memory of all rings (default 256)\n"
		"  --recv-buffers N           most receive buffers of 2 KiB shared by all clients, a\n"
		"                             power of two (default 16384; 512 at start, doubled\n"
		"                             while clients with input ready find them all in use)\n"
		"Limits per uid (over all its connections):\n"
		"  --max-clients-per-uid N    connections (default: half of --max-clients)\n"
		"  --max-rings-per-uid N      rings created or opened (default 1024)\n"
		"  --ring-memory-per-uid-mib N  memory of the rings it created (default: half of\n"
		"                             --ring-memory-mib)\n"
		"  --max-handles-per-uid N    registered batches (default 1024)\n"
		"  --max-schedules-per-uid N  running schedules (default 64)\n"
		"  --ring-grace-ms N          how long a ring stays listed once its producer left\n"
		"                             (default 60000); consumers do not keep it\n"
		"  --frame-timeout-ms N       a started frame must complete within N ms (default 5000)\n"
		"  --client-timeout-ms N      drop a client whose replies cannot be sent for N ms\n"
		"                             (default 10000)\n"
		"Other actions:\n"
		"  --check-policy FILE        validate FILE, print its effective rules (exit 0/1)\n"
		"  --import-allowlist FILE    convert an msr-safe allowlist to policy YAML on stdout\n"
		"  --for-group NAME           ... granting it to group NAME instead of everyone\n"
		"  --ring-majors N-M          ... and ring majors N-M to create and monitor (an\n"
		"                             allowlist has no rings; setupFerretMonitor needs one)\n"
		"  --strict                   with --check-policy: warnings fail too (exit 1)\n"
		"  --list-sim-models          name the simulated CPU models\n"
		"  --probe                    say which backend serves each event class here\n"
		"  -h, --help                 this text\n"
		"  -V, --version              the version\n"
		"\n"
		"Signals: SIGHUP reloads the policy (an invalid one is refused, the old one kept);\n"
		"SIGTERM restores every MSR msrd wrote and exits.\n",
		MSRD_DEFAULT_SOCKET, MSRD_DEFAULT_POLICY, MSRD_DEFAULT_STATE_DIR);
}

static int bad_option(const char *format, const char *argument)
{
	fprintf(stderr, "msrd: ");
	fprintf(stderr, format, argument);
	fprintf(stderr, "\nTry 'msrd --help' for more information.\n");
	return -EINVAL;
}

static int parse_unsigned(const char *text, int base, unsigned long long min,
			  unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long value;

	if (text[0] == '\0' || text[0] == '-')
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, base);
	if (errno != 0 || *end != '\0' || value < min || value > max)
		return -EINVAL;
	*out = value;
	return 0;
}

static void set_defaults(struct msrd_config *config)
{
	*config = (struct msrd_config){
		.action = MSRD_RUN,
		.socket_path = MSRD_DEFAULT_SOCKET,
		.policy_path = MSRD_DEFAULT_POLICY,
		.state_dir = MSRD_DEFAULT_STATE_DIR,
		.backend = { .kind = BACKEND_AUTO },
		.log_level = LOG_LEVEL_NOTICE,
		.socket_mode = 0666,
		.ready_fd = -1,
		.ring_grace_ms = 60000,
		.frame_timeout_ms = 5000,
		.client_timeout_ms = 10000,
		.max_clients = 8192,
		.max_rings_per_client = 64,
		.ring_memory_max = 256ull << 20,
		.recv_buffers = LOOP_BUFFER_COUNT,
		.max_rings_per_uid = 1024,
		.max_handles_per_uid = 1024,
		.max_schedules_per_uid = 64,
		.refusal_log_burst = 10,
	};
}

struct number_option {
	int id;
	const char *name;
	int base;
	unsigned long long min;
	unsigned long long max;
};

static const struct number_option number_options[] = {
	{ OPT_SOCKET_MODE, "--socket-mode", 8, 0, 07777 },
	{ OPT_READY_FD, "--ready-fd", 10, 0, INT_MAX },
	{ OPT_RING_GRACE_MS, "--ring-grace-ms", 10, 0, 86400000 },
	{ OPT_FRAME_TIMEOUT_MS, "--frame-timeout-ms", 10, 1, 3600000 },
	{ OPT_CLIENT_TIMEOUT_MS, "--client-timeout-ms", 10, 1, 3600000 },
	{ OPT_MAX_CLIENTS, "--max-clients", 10, 1, 1000000 },
	{ OPT_MAX_RINGS, "--max-rings-per-client", 10, 1, 4096 },
	{ OPT_RING_MEMORY_MIB, "--ring-memory-mib", 10, 1, 1ull << 20 },
	{ OPT_RECV_BUFFERS, "--recv-buffers", 10, 1, 32768 },
	{ OPT_MAX_CLIENTS_PER_UID, "--max-clients-per-uid", 10, 1, 1000000 },
	{ OPT_MAX_RINGS_PER_UID, "--max-rings-per-uid", 10, 1, 1000000 },
	{ OPT_RING_MEMORY_PER_UID_MIB, "--ring-memory-per-uid-mib", 10, 1, 1ull << 20 },
	{ OPT_MAX_HANDLES_PER_UID, "--max-handles-per-uid", 10, 1, 1000000 },
	{ OPT_MAX_SCHEDULES_PER_UID, "--max-schedules-per-uid", 10, 1, 100000 },
	{ OPT_SIM_ACCESS_STEP, "--sim-access-step-ns", 10, 0, 1000000000ull },
	{ OPT_SIM_LATE_ENERGY_READS, "--sim-late-energy-reads", 10, 3, 1000000ull },
	{ OPT_SIM_SEED, "--sim-seed", 0, 0, UINT64_MAX },
	{ OPT_REFUSAL_LOG_BURST, "--refusal-log-burst", 10, 0, 1000000 },
};

static void store_number(struct msrd_config *config, int id, unsigned long long value)
{
	switch (id) {
	case OPT_SOCKET_MODE: config->socket_mode = (unsigned)value; break;
	case OPT_READY_FD: config->ready_fd = (int)value; break;
	case OPT_RING_GRACE_MS: config->ring_grace_ms = (unsigned)value; break;
	case OPT_FRAME_TIMEOUT_MS: config->frame_timeout_ms = (unsigned)value; break;
	case OPT_CLIENT_TIMEOUT_MS: config->client_timeout_ms = (unsigned)value; break;
	case OPT_MAX_CLIENTS: config->max_clients = (unsigned)value; break;
	case OPT_MAX_RINGS: config->max_rings_per_client = (unsigned)value; break;
	case OPT_RING_MEMORY_MIB: config->ring_memory_max = value << 20; break;
	case OPT_RECV_BUFFERS: config->recv_buffers = (unsigned)value; break;
	case OPT_MAX_CLIENTS_PER_UID: config->max_clients_per_uid = (unsigned)value; break;
	case OPT_MAX_RINGS_PER_UID: config->max_rings_per_uid = (unsigned)value; break;
	case OPT_RING_MEMORY_PER_UID_MIB: config->ring_memory_per_uid = value << 20; break;
	case OPT_MAX_HANDLES_PER_UID: config->max_handles_per_uid = (unsigned)value; break;
	case OPT_MAX_SCHEDULES_PER_UID: config->max_schedules_per_uid = (unsigned)value; break;
	case OPT_SIM_ACCESS_STEP: config->backend.sim_access_step_ns = value; break;
	case OPT_SIM_LATE_ENERGY_READS: config->backend.sim_late_energy_reads = (uint32_t)value; break;
	case OPT_SIM_SEED: config->backend.sim_seed = value; break;
	case OPT_REFUSAL_LOG_BURST: config->refusal_log_burst = (unsigned)value; break;
	default: break;
	}
}

/* Options that take a number; 1 when `id` was one of them (0 otherwise), -EINVAL if bad. */
static int parse_number_option(struct msrd_config *config, int id, const char *argument)
{
	for (size_t i = 0; i < sizeof(number_options) / sizeof(number_options[0]); i++) {
		const struct number_option *option = &number_options[i];
		unsigned long long value;
		if (option->id != id)
			continue;
		if (parse_unsigned(argument, option->base, option->min, option->max, &value) < 0) {
			fprintf(stderr, "msrd: %s: '%s' is not a number in %llu..%llu%s\n",
				option->name, argument, option->min, option->max,
				option->base == 8 ? " (octal)" : "");
			fprintf(stderr, "Try 'msrd --help' for more information.\n");
			return -EINVAL;
		}
		store_number(config, id, value);
		return 1;
	}
	return 0;
}

static int set_action(struct msrd_config *config, enum msrd_action action, const char *file)
{
	if (config->action != MSRD_RUN && config->action != action)
		return bad_option("%s", "only one of --check-policy, --import-allowlist, "
					"--list-sim-models, --probe, --help, --version");
	config->action = action;
	config->action_file = file;
	return 0;
}

static int parse_one(struct msrd_config *config, int id, const char *argument)
{
	int status = parse_number_option(config, id, argument);

	if (status != 0)
		return status < 0 ? status : 0;
	switch (id) {
	case OPT_SOCKET: config->socket_path = argument; return 0;
	case OPT_POLICY: config->policy_path = argument; return 0;
	case OPT_SIM_MODEL: config->backend.sim_model = argument; return 0;
	case OPT_SIM_VIRTUAL_TIME: config->backend.sim_virtual_time = true; return 0;
	case OPT_ALLOW_SIM_FALLBACK: config->backend.allow_sim_fallback = true; return 0;
	case OPT_SIM_KERNEL_COUNTERS: config->backend.sim_kernel_counters = argument; return 0;
	case OPT_SIM_LOAD_SCRIPT: config->backend.sim_load_script = argument; return 0;
	case OPT_SIM_IDEAL: config->backend.sim_ideal = true; return 0;
	case OPT_SIM_POWER_SCRIPT: config->backend.sim_power_script = argument; return 0;
	case OPT_MODELS_DIR: config->backend.models_dir = argument; return 0;
	case OPT_DEV_ROOT: config->backend.dev_root = argument; return 0;
	case OPT_SYSFS_ROOT: config->backend.sysfs_root = argument; return 0;
	case OPT_PERF_BROKER: config->perf_broker = true; return 0;
	case 'f': config->foreground = true; return 0;
	case OPT_INSECURE_POLICY: config->insecure_policy_permissions = true; return 0;
	case OPT_SOCKET_GROUP: config->socket_group = argument; return 0;
	case OPT_SOCKET_OWNER: config->socket_owner = argument; return 0;
	case OPT_STATE_DIR: config->state_dir = argument; return 0;
	case OPT_USER: config->user = argument; return 0;
	case OPT_SECCOMP:
		if (strcmp(argument, "enforce") == 0)
			config->seccomp = MSRD_SECCOMP_ENFORCE;
		else if (strcmp(argument, "log") == 0)
			config->seccomp = MSRD_SECCOMP_LOG;
		else if (strcmp(argument, "off") == 0)
			config->seccomp = MSRD_SECCOMP_OFF;
		else
			return bad_option("--seccomp: unknown mode '%s' (enforce, log, off)",
					  argument);
		return 0;
	case OPT_FOR_GROUP: config->for_group = argument; return 0;
	case OPT_RING_MAJORS: config->ring_majors = argument; return 0;
	case OPT_STRICT: config->strict = true; return 0;
	case OPT_BACKEND:
		if (backend_kind_parse(argument, &config->backend.kind) < 0)
			return bad_option("--backend: unknown backend '%s' (auto, msr, msr-safe, sim)",
					  argument);
		return 0;
	case OPT_LOG_LEVEL:
		if (log_level_parse(argument, &config->log_level) < 0)
			return bad_option("--log-level: unknown level '%s' (error, warn, notice, "
					  "info, debug)",
					  argument);
		return 0;
	case OPT_CHECK_POLICY: return set_action(config, MSRD_CHECK_POLICY, argument);
	case OPT_IMPORT_ALLOWLIST: return set_action(config, MSRD_IMPORT_ALLOWLIST, argument);
	case OPT_LIST_SIM_MODELS: return set_action(config, MSRD_LIST_SIM_MODELS, NULL);
	case OPT_PROBE: return set_action(config, MSRD_PROBE, NULL);
	case 'h': return set_action(config, MSRD_HELP, NULL);
	case 'V': return set_action(config, MSRD_VERSION_ACTION, NULL);
	default:
		/* getopt_long already said what was wrong. */
		fprintf(stderr, "Try 'msrd --help' for more information.\n");
		return -EINVAL;
	}
}

int options_parse(int argc, char **argv, struct msrd_config *config)
{
	int id;

	set_defaults(config);
	optind = 1;
	opterr = 1;
	while ((id = getopt_long(argc, argv, "fhV", long_options, NULL)) != -1) {
		int status = parse_one(config, id, optarg);
		if (status < 0)
			return status;
	}
	if (optind < argc)
		return bad_option("unexpected argument '%s'", argv[optind]);
	/* Shares that follow the server-wide limits unless given. */
	if (config->max_clients_per_uid == 0)
		config->max_clients_per_uid = (config->max_clients + 1) / 2;
	if (config->ring_memory_per_uid == 0)
		config->ring_memory_per_uid = config->ring_memory_max / 2;
	if (config->for_group != NULL && config->action != MSRD_IMPORT_ALLOWLIST)
		return bad_option("%s", "--for-group goes with --import-allowlist");
	if (config->ring_majors != NULL && config->action != MSRD_IMPORT_ALLOWLIST)
		return bad_option("%s", "--ring-majors goes with --import-allowlist");
	if (config->strict && config->action != MSRD_CHECK_POLICY)
		return bad_option("%s", "--strict goes with --check-policy");
	if ((config->recv_buffers & (config->recv_buffers - 1)) != 0)
		return bad_option("%s", "--recv-buffers must be a power of two");
	if (config->backend.sim_virtual_time && config->backend.kind != BACKEND_SIM)
		return bad_option("%s", "--sim-virtual-time needs --backend sim");
	if (config->backend.sim_kernel_counters != NULL && config->backend.kind != BACKEND_SIM)
		return bad_option("%s", "--sim-kernel-counters needs --backend sim");
	if (config->backend.sim_late_energy_reads != 0 && config->backend.kind != BACKEND_SIM)
		return bad_option("%s", "--sim-late-energy-reads needs --backend sim");
	if (config->backend.allow_sim_fallback && config->backend.kind != BACKEND_AUTO)
		return bad_option("%s", "--allow-sim-fallback goes with --backend auto");
	if ((config->backend.sim_ideal || config->backend.sim_seed ||
	     config->backend.sim_power_script) && config->backend.kind != BACKEND_SIM)
		return bad_option("%s", "--sim-ideal, --sim-seed and --sim-power-script need "
				  "--backend sim");
	if (config->backend.sim_access_step_ns != 0 && !config->backend.sim_virtual_time)
		return bad_option("%s", "--sim-access-step-ns needs --sim-virtual-time");
	return 0;
}
