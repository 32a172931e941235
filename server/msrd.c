/*
 * server/msrd.c — msrd's main(): the one-shot actions, start-up in a safe order, shutdown.
 *
 * Start-up order matters: signals are blocked before anything can deliver them; the policy is
 * loaded (and refused when invalid or writable by others) before any device is touched; devices,
 * the journal (which may restore what a killed msrd left) and the socket are opened while msrd
 * still holds its privileges; then it becomes --user, every capability but CAP_SYS_RAWIO is
 * dropped, and the system call filter goes on, all before the first client can connect.
 */
#include "server/server.h"
#include "backend/backend_sim.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "hw/vendor.h"

static struct msrd server_state __attribute__((aligned(16)));

static void print_policy_error(const struct policy_error *error)
{
	char text[600];

	policy_error_format(error, text, sizeof(text));
	fprintf(stderr, "msrd: %s\n", text);
}

static void print_policy_warnings(const struct policy *policy)
{
	for (size_t i = 0; i < policy_warning_count(policy); i++)
		fprintf(stderr, "msrd: warning: %s\n", policy_warning(policy, i));
}

static int check_policy(const struct msrd_config *config)
{
	struct policy_load_options options = {
		.allow_insecure_permissions = config->insecure_policy_permissions,
	};
	struct policy_error error;
	struct policy *policy = NULL;

	if (policy_load(config->action_file, &options, &policy, &error) < 0) {
		print_policy_error(&error);
		return 1;
	}
	print_policy_warnings(policy);
	policy_print(policy, stdout);
	size_t warnings = policy_warning_count(policy);
	policy_free(policy);
	if (config->strict && warnings > 0) {
		fprintf(stderr, "msrd: %zu warning%s and --strict: the policy is refused\n",
			warnings, warnings == 1 ? "" : "s");
		return 1;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

static int import_allowlist(const struct msrd_config *config)
{
	bool from_stdin = strcmp(config->action_file, "-") == 0;
	FILE *in = from_stdin ? stdin : fopen(config->action_file, "r");
	struct policy_error error;
	int status;

	if (in == NULL) {
		fprintf(stderr, "msrd: %s: %s\n", config->action_file, strerror(errno));
		return 1;
	}
	status = policy_import_allowlist_rings(in, from_stdin ? "<stdin>" : config->action_file,
					       config->for_group, config->ring_majors, stdout, &error);
	if (!from_stdin)
		fclose(in);
	if (status < 0) {
		print_policy_error(&error);
		return 1;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

static int list_sim_models(const struct msrd_config *config)
{
	char names[64][32];
	int count = backend_sim_list_models(config->backend.models_dir, names, 64);

	if (count < 0) {
		char searched[8192];
		backend_sim_describe_search(config->backend.models_dir, searched, sizeof(searched));
		fprintf(stderr, "msrd: listing simulated CPU models: %s (searched %s)\n",
			strerror(-count), searched);
		return 1;
	}
	for (int i = 0; i < count && i < 64; i++)
		printf("%s\n", names[i]);
	return 0;
}

/* ---- the running server ---- */

/* Intel packages of several dies keep energy per die (machine_energy_key); AMD's stay per
 * package whatever its topology says of dies. */
static bool energy_per_die(const struct machine_info *machine)
{
	return !cpu_vendor_is_amd(machine->vendor) && machine->die_count > machine->package_count;
}

/* What the flags of MACHINE_INFO say, from msrd's own fields. */
static uint32_t machine_flags(const struct machine_info *machine)
{
	return (machine->has_smi_count ? WIRE_MACHINE_HAS_SMI_COUNT : 0) |
	       (machine->pmc_full_width_writes ? WIRE_MACHINE_PMC_FULL_WIDTH : 0) |
	       (machine->simulated ? WIRE_MACHINE_SIMULATED : 0) |
	       (((uint32_t)machine->tsc_source << WIRE_MACHINE_TSC_SOURCE_SHIFT) &
		WIRE_MACHINE_TSC_SOURCE_MASK) |
	       (machine->sim_virtual_time ? WIRE_MACHINE_VIRTUAL_TIME : 0) |
	       (machine->hybrid ? WIRE_MACHINE_HYBRID : 0) |
	       (energy_per_die(machine) ? WIRE_MACHINE_DIES : 0) |
	       (machine->hypervisor[0] ? WIRE_MACHINE_VIRTUAL : 0) |
	       (machine->tsc_invariant == 1 ? WIRE_MACHINE_TSC_INVARIANT : 0);
}

/* Every field of <haecer/machine_fields.h> from msrd's description to the message's: both
 * structs are spelled from that list, so each field has the same type and size in both. */
#define COPY_FIELD(name, ...)                                                              \
	_Static_assert(sizeof(wire.name) == sizeof(machine->name), #name " differs");      \
	memcpy(&wire.name, &machine->name, sizeof(wire.name));
#define COPY_TYPED(type, name, ...) COPY_FIELD(name)
#define SKIP_FIELD(...)

static int encode_machine_info(struct msrd *server)
{
	const struct machine_info *machine = &server->machine;
	static struct wire_machine_info wire;
	struct wire_writer writer;

	HAECER_MACHINE_FIELDS(COPY_FIELD, COPY_TYPED, COPY_TYPED, COPY_FIELD, SKIP_FIELD,
			      COPY_TYPED)
	wire.flags = machine_flags(machine);
	server->machine_reply = malloc(WIRE_MACHINE_INFO_MAX_SIZE);
	if (server->machine_reply == NULL)
		return -ENOMEM;
	wire_writer_init(&writer, server->machine_reply, WIRE_MACHINE_INFO_MAX_SIZE);
	wire_put_machine_info(&writer, &wire);
	server->machine_reply_length = writer.used;
	return 0;
}

static int open_backend(struct msrd *server)
{
	char why[1024] = "";
	int status;

	backend_log_device_limits(&server->config->backend);
	status = backend_open(&server->config->backend, &server->backend, why, sizeof(why));

	if (status < 0) {
		log_error("opening the %s backend: %s%s%s",
			  backend_kind_name(server->config->backend.kind), strerror(-status),
			  why[0] != '\0' ? ": " : "", why);
		return status;
	}
	log_notice("backend %s%s%s", backend_kind_name(backend_kind(server->backend)),
		   why[0] != '\0' ? ": " : "", why);
	status = backend_machine_info(server->backend, &server->machine);
	if (status < 0) {
		log_warn_errno(status, "reading the machine description");
		return status;
	}
	if (server->machine.tsc_hz != 0)
		log_notice("TSC %.3f GHz, from %s%s", (double)server->machine.tsc_hz / 1e9,
			   tsc_source_name(server->machine.tsc_source),
			   server->machine.tsc_invariant == 1 ? ", invariant" : "");
	else
		log_warnx("TSC frequency unknown (no CPUID 0x15/0x16, MSR_PLATFORM_INFO or AMD P0 "
			  "frequency, and calibration failed): clients get no seconds for regions");
	msrstate_init(&server->saved, &server->machine);
	status = slots_init(&server->slots, &server->machine);
	if (status == 0)
		status = energy_init(server);
	if (status == 0)
		status = encode_machine_info(server);
	return status;
}

static int setup_signals(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, mask, NULL) < 0)
		return -errno;
	return 0;
}

static void signal_ready(const struct msrd_config *config)
{
	if (config->ready_fd < 0)
		return;
	if (write(config->ready_fd, "R", 1) != 1)
		log_warnx("cannot write to --ready-fd %d", config->ready_fd);
	close(config->ready_fd);
}

static void server_cleanup(struct msrd *server)
{
	if (server->listen_fd >= 0) {
		close(server->listen_fd);
		unlink(server->config->socket_path);
	}
	if (server->signal_fd >= 0)
		close(server->signal_fd);
	loop_exit(&server->loop);
	client_free_retired(server);
	schedule_free_all(server);
	ringdir_free(&server->rings);
	accounts_free(&server->accounts);
	slots_free_deferred(server);
	slots_free(&server->slots);
	energy_pages_free(server);
	energy_free(&server->energy);
	msrstate_free(&server->saved);
	journal_close(server, true); /* still open only when start-up failed: nothing written */
	if (server->backend != NULL)
		backend_close(server->backend);
	policy_free(server->policy);
	free(server->machine_reply);
}

/* 0 in the process that serves; 1 in the privileged parent once it is done (*parent_exit set);
 * -errno when msrd cannot start. */
static int start_server(struct msrd *server, sigset_t *mask, int *parent_exit)
{
	const struct msrd_config *config = server->config;
	static struct privilege_user user;
	enum privilege_role role;
	int status;

	/* Names are looked up while every file can still be read. */
	if (config->user != NULL && privilege_resolve_user(config->user, &user) < 0) {
		log_error("--user %s: no such user", config->user);
		return -ENOENT;
	}
	if (msrd_load_policy(config, &server->policy) < 0)
		return -EINVAL;
	status = open_backend(server);
	if (status == 0)
		status = journal_open(server);
	if (status < 0)
		return status;
	accounts_init(&server->accounts, config);
	ringdir_init(&server->rings, config->ring_memory_max,
		     (uint64_t)config->ring_grace_ms * 1000000ull, &server->accounts);
	server->listen_fd = listener_open(config);
	if (server->listen_fd < 0)
		return server->listen_fd;
	if (!config->foreground && daemon(0, 0) < 0)
		return -errno;
	/* A device backend splits here: the parent keeps the writable devices and the journal. */
	status = privsep_start(server, config->user != NULL ? &user : NULL, parent_exit);
	if (status != 0)
		return status;
	role = server->parent != NULL ? PRIVILEGE_SERVER : PRIVILEGE_WHOLE;
	status = privilege_drop(config->user != NULL ? &user : NULL, role,
				perf_broker_enabled(server));
	if (status < 0)
		return status;
	server->signal_fd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (server->signal_fd < 0)
		return -errno;
	status = loop_init(&server->loop, config->recv_buffers);
	if (status < 0) {
		log_warn_errno(status, "setting up io_uring");
		return status;
	}
	energy_arm(server);
	return privilege_seccomp_role(config->seccomp, role, 0);
}

/* The server beside a privileged parent stops: the parent writes the registers back once this
 * process has ended; a slot whose own restore failed keeps the journal. */
static int stop_beside_parent(struct msrd *server, int status)
{
	if (server->restore_incomplete)
		(void)privsep_keep_journal(server->parent);
	log_notice("server stopped; the privileged parent writes the registers back");
	server_cleanup(server);
	privilege_log_refused();
	return status == 0 ? 0 : 1;
}

static int run_server(const struct msrd_config *config)
{
	struct msrd *server = &server_state;
	sigset_t mask;
	size_t failed;
	int parent_exit = 1;
	int status;

	log_init("msrd", config->log_level, !config->foreground);
	*server = (struct msrd){ .config = config, .listen_fd = -1, .signal_fd = -1,
				 .journal = { .fd = -1 } };
	status = setup_signals(&mask);
	if (status == 0) {
		privilege_raise_fd_limit();
		status = start_server(server, &mask, &parent_exit);
	}
	if (status > 0)
		return parent_exit;
	if (status < 0) {
		log_error("not starting: %s", strerror(-status));
		server_cleanup(server);
		return 1;
	}
	log_notice("listening on %s (policy %s)", config->socket_path, config->policy_path);
	signal_ready(config);
	status = loop_run(server);
	if (server->parent != NULL)
		return stop_beside_parent(server, status);
	failed = msrstate_restore(&server->saved, server->backend, NULL);
	log_notice("stopped: %zu MSRs restored%s", server->saved.count - failed,
		   failed > 0 ? ", some restores failed" : "");
	journal_close(server, failed == 0 && !server->restore_incomplete);
	server_cleanup(server);
	privilege_log_refused();
	return status == 0 && failed == 0 ? 0 : 1;
}

/* Paths msrd uses after start-up must not depend on the working directory, which a daemon
 * leaves for "/": the policy is read again at SIGHUP, the socket removed at exit. */
static int make_absolute(const char **path, char *storage, size_t size)
{
	char directory[PATH_MAX];

	if ((*path)[0] == '/')
		return 0;
	if (getcwd(directory, sizeof(directory)) == NULL)
		return -errno;
	if ((size_t)snprintf(storage, size, "%s/%s", directory, *path) >= size)
		return -ENAMETOOLONG;
	*path = storage;
	return 0;
}

int main(int argc, char **argv)
{
	static char policy_path[PATH_MAX + 256];
	static char socket_path[PATH_MAX + 256];
	static char state_dir[PATH_MAX + 256];
	struct msrd_config config;

	if (options_parse(argc, argv, &config) < 0)
		return 2;
	if (make_absolute(&config.policy_path, policy_path, sizeof(policy_path)) < 0 ||
	    make_absolute(&config.socket_path, socket_path, sizeof(socket_path)) < 0 ||
	    make_absolute(&config.state_dir, state_dir, sizeof(state_dir)) < 0) {
		fprintf(stderr, "msrd: path too long\n");
		return 2;
	}
	switch (config.action) {
	case MSRD_HELP:
		options_usage(stdout);
		return 0;
	case MSRD_VERSION_ACTION:
		printf("%s\n", MSRD_VERSION);
		return 0;
	case MSRD_CHECK_POLICY:
		return check_policy(&config);
	case MSRD_IMPORT_ALLOWLIST:
		return import_allowlist(&config);
	case MSRD_LIST_SIM_MODELS:
		return list_sim_models(&config);
	case MSRD_PROBE:
		backend_probe_report(&config.backend, stdout);
		return 0;
	case MSRD_RUN:
	default:
		return run_server(&config);
	}
}
