/*
 * tools/haecer-mon.c — watch haecer rings: list them, follow one live, plot its power, or export
 * energy and ring readings to Prometheus.
 *
 *   haecer-mon [OPTIONS] list
 *   haecer-mon [OPTIONS] follow MAJOR MINOR [INSTANCE]
 *   haecer-mon [OPTIONS] plot MAJOR MINOR [INSTANCE] -o FILE.png
 *   haecer-mon [OPTIONS] serve [--listen HOST:PORT] [--top N] [--cgroup-depth D]
 *   haecer-mon [OPTIONS] top
 *
 * Exit status: 0 success, 1 failure (no server, no such ring, refused by the policy), 2 bad
 * usage. The subcommands live in tools/mon/.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tools/common/toolopt.h"
#include "tools/mon/mon.h"

struct command {
	const char *name;
	unsigned accepts; /* MON_OPT_* */
	int (*main)(const struct mon_options *options, int count, char *const *words);
};

static const struct command commands[] = {
	{ "list", MON_OPT_FORMAT, mon_list_main },
	{ "follow",
	  MON_OPT_FORMAT | MON_OPT_DURATION | MON_OPT_COUNT | MON_OPT_INTERVAL | MON_OPT_UID,
	  mon_follow_main },
	{ "plot", MON_OPT_DURATION | MON_OPT_COUNT | MON_OPT_INTERVAL | MON_OPT_OUTPUT |
	  MON_OPT_DATA, mon_plot_main },
	{ "serve", MON_OPT_LISTEN | MON_OPT_INTERVAL | MON_OPT_RESOLUTION | MON_OPT_TOP |
			  MON_OPT_CGROUP_DEPTH | MON_OPT_CGROUP_RETENTION | MON_OPT_WEB |
			  MON_OPT_SLURM_DIR,
	  mon_serve_main },
	{ "top", MON_OPT_FORMAT | MON_OPT_DURATION | MON_OPT_COUNT | MON_OPT_INTERVAL | MON_OPT_BY,
	  mon_top_main },
};

static const struct {
	unsigned bit;
	const char *name;
} option_names[] = {
	{ MON_OPT_FORMAT, "--format" },     { MON_OPT_DURATION, "--duration" },
	{ MON_OPT_COUNT, "--count" },       { MON_OPT_INTERVAL, "--interval" },
	{ MON_OPT_OUTPUT, "--output" },     { MON_OPT_DATA, "--data" },
	{ MON_OPT_LISTEN, "--listen" },     { MON_OPT_UID, "--uid" },
	{ MON_OPT_BY, "--by" },
	{ MON_OPT_RESOLUTION, "--resolution-uj" },
	{ MON_OPT_TOP, "--top" },
	{ MON_OPT_CGROUP_DEPTH, "--cgroup-depth" },
	{ MON_OPT_CGROUP_RETENTION, "--cgroup-retention" },
	{ MON_OPT_WEB, "--tls-cert, --tls-key or --basic-auth-file" },
	{ MON_OPT_SLURM_DIR, "--slurm-dir" },
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: haecer-mon [OPTIONS] list\n"
		"       haecer-mon [OPTIONS] follow MAJOR MINOR [INSTANCE]\n"
		"       haecer-mon [OPTIONS] plot MAJOR MINOR [INSTANCE] -o FILE.png\n"
		"       haecer-mon [OPTIONS] serve [--listen HOST:PORT] [--top N] [--cgroup-depth D]\n"
		"       haecer-mon [OPTIONS] top [--by process|cgroup|service] [MAJOR MINOR]\n"
		"Watch the shared-memory rings msrd lists, read-only, under its policy.\n"
		"\n"
		"  list     every ring you may monitor: producer, counters, records, lost\n"
		"  follow   print a ring's records as they arrive (energy in J, power in W)\n"
		"  plot     power over time as a PNG, through gnuplot\n"
		"  serve    OpenMetrics/Prometheus endpoint: GET /metrics\n"
		"  top      the node's power per package and RAPL domain, live, sampled by an\n"
		"           msrd schedule every --interval (default 1000 ms) into ring MAJOR\n"
		"           MINOR (default 99 1)\n"
		"\n"
		"  -s, --socket PATH      msrd's socket (default $HAECER_SOCKET or %s)\n"
		"  -f, --format FORMAT    text (default), csv or json (JSON lines)   list, follow\n"
		"  -d, --duration SECONDS stop after this long                       follow, plot\n"
		"  -n, --count N          stop after N records                      follow, plot\n"
		"  -i, --interval MS      sleep between polls (default %u; serve: energy\n"
		"                         sampling period, default 1000)\n"
		"  -o, --output FILE      the PNG to write                           plot\n"
		"      --data FILE        also keep the plotted data (time, watts)   plot\n"
		"  -l, --listen HOST:PORT where to serve (default 127.0.0.1:9464)    serve\n"
		"      --top N            per-process energy series for the N heaviest\n"
		"                         processes (default 20)                      serve\n"
		"      --cgroup-depth D   cgroup series cut to D path levels (3)      serve\n"
		"      --cgroup-retention SECONDS  how long a removed cgroup's series stays\n"
		"                         with its final total (default 300)        serve\n"
		"      --tls-cert FILE    serve HTTPS with this PEM certificate ...   serve\n"
		"      --tls-key FILE     ... and this PEM private key              serve\n"
		"      --basic-auth-file FILE  require HTTP basic auth: one line USER:PASSWORD\n"
		"                         (docs/cluster.md, Who can reach serve)      serve\n"
		"      --slurm-dir DIR    the Slurm plugin's step files (default\n"
		"                         /run/haecer/slurm)                          serve\n"
		"  -u, --uid UID          only a ring UID created (the newest of them) follow\n"
		"  -b, --by WHAT          process, cgroup or service: each interval's package\n"
		"                         energy split by CPU time (docs/attribution.md) top\n"
		"      --resolution-uj N  energy rounded down to N uJ (default 1000000,\n"
		"                         0: msrd's own)                             serve\n"
		"  -h, --help             this text\n"
		"  -V, --version          the version\n"
		"\n"
		"INSTANCE 0 or none means the newest ring of (MAJOR, MINOR). A ring whose producer\n"
		"is gone is drained and follow ends. Anyone allowed to create rings of a MAJOR may\n"
		"publish a newer instance of its (MAJOR, MINOR): list shows each ring's owner, and\n"
		"follow warns when a newer instance has another owner. Exit status: 0 success, 1 failure (no server,\n"
		"no such ring, refused by the policy), 2 bad usage.\n",
		HAECER_DEFAULT_SOCKET, MON_DEFAULT_INTERVAL_MS);
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* One option into options; MON_EXIT_USAGE (printed) for a bad value. */
static int take_option(int option, const char *value, struct mon_options *options)
{
	uint32_t interval;

	switch (option) {
	case 's': options->socket_path = value; return 0;
	case 'f':
		options->given |= MON_OPT_FORMAT;
		if (!mon_parse_format(value, &options->format))
			return tool_usage_error("--format takes text, csv or json, not '%s'",
						value);
		return 0;
	case 'd':
		options->given |= MON_OPT_DURATION;
		if (!mon_parse_seconds(value, &options->duration))
			return tool_usage_error("--duration takes a positive number of seconds, "
						"not '%s'", value);
		return 0;
	case 'n':
		options->given |= MON_OPT_COUNT;
		if (!number_parse(value, 0, UINT64_MAX, &options->count) ||
		    options->count == 0)
			return tool_usage_error("--count takes a positive number, not '%s'", value);
		return 0;
	case 'i':
		options->given |= MON_OPT_INTERVAL;
		if (!number_parse_u32(value, &interval) || interval == 0 ||
		    interval > MON_MAX_INTERVAL_MS)
			return tool_usage_error("--interval takes milliseconds from 1 to %u, "
						"not '%s'", MON_MAX_INTERVAL_MS, value);
		options->interval_ms = interval;
		return 0;
	case 'o': options->given |= MON_OPT_OUTPUT; options->output = value; return 0;
	case 'D': options->given |= MON_OPT_DATA; options->data = value; return 0;
	case 'l': options->given |= MON_OPT_LISTEN; options->listen = value; return 0;
	case 'b':
		options->given |= MON_OPT_BY;
		if (!mon_parse_by(value, &options->by))
			return tool_usage_error("--by takes process, cgroup or service, not '%s'",
						value);
		return 0;
	case 'R':
		options->given |= MON_OPT_RESOLUTION;
		if (!number_parse(value, 0, UINT64_MAX, &options->resolution_uj))
			return tool_usage_error("--resolution-uj takes microjoules, not '%s'",
						value);
		return 0;
	case 'T':
		options->given |= MON_OPT_TOP;
		if (!number_parse_u32(value, &options->top) || options->top > 100000)
			return tool_usage_error("--top takes a number of processes from 0 to "
						"100000, not '%s'", value);
		return 0;
	case 'G':
		options->given |= MON_OPT_CGROUP_DEPTH;
		if (!number_parse_u32(value, &options->cgroup_depth) || options->cgroup_depth > 64)
			return tool_usage_error("--cgroup-depth takes 0 to 64, not '%s'", value);
		return 0;
	case 'E':
		options->given |= MON_OPT_CGROUP_RETENTION;
		if (!number_parse_u32(value, &options->cgroup_retention_s))
			return tool_usage_error("--cgroup-retention takes seconds, not '%s'", value);
		return 0;
	case 'C': options->given |= MON_OPT_WEB; options->tls_cert = value; return 0;
	case 'K': options->given |= MON_OPT_WEB; options->tls_key = value; return 0;
	case 'A': options->given |= MON_OPT_WEB; options->basic_auth_file = value; return 0;
	case 'S': options->given |= MON_OPT_SLURM_DIR; options->slurm_dir = value; return 0;
	case 'u':
		options->given |= MON_OPT_UID;
		if (!number_parse_u32(value, &options->uid))
			return tool_usage_error("--uid takes a numeric uid, not '%s'", value);
		return 0;
	default: return tool_usage_error("unknown option");
	}
}

static int refuse_foreign_options(const struct command *command, unsigned given)
{
	for (size_t i = 0; i < sizeof(option_names) / sizeof(option_names[0]); i++) {
		if ((given & option_names[i].bit) && !(command->accepts & option_names[i].bit))
			return tool_usage_error("%s does not apply to %s", option_names[i].name,
						command->name);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "format", required_argument, NULL, 'f' },
		{ "duration", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "interval", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "data", required_argument, NULL, 'D' },
		{ "listen", required_argument, NULL, 'l' },
		{ "uid", required_argument, NULL, 'u' },
		{ "by", required_argument, NULL, 'b' },
		{ "resolution-uj", required_argument, NULL, 'R' },
		{ "top", required_argument, NULL, 'T' },
		{ "cgroup-depth", required_argument, NULL, 'G' },
		{ "cgroup-retention", required_argument, NULL, 'E' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "basic-auth-file", required_argument, NULL, 'A' },
		{ "slurm-dir", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct mon_options options = { .interval_ms = MON_DEFAULT_INTERVAL_MS, .top = 20, .cgroup_depth = 3,
				       .cgroup_retention_s = MON_DEFAULT_CGROUP_RETENTION_S };
	const struct command *command;
	int option;
	int status;

	tool_init("haecer-mon");
	opterr = 0; /* our own messages, with the --help hint */
	while ((option = getopt_long(argc, argv, ":s:f:d:n:i:o:l:u:b:hV", long_options, NULL)) != -1) {
		if (option == 'h') {
			usage(stdout);
			return MON_EXIT_OK;
		}
		if (option == 'V') {
			tool_print_version();
			return MON_EXIT_OK;
		}
		if (option == ':' || option == '?')
			return tool_getopt_error(option, argv, long_options);
		status = take_option(option, optarg, &options);
		if (status != 0)
			return status;
	}
	if (optind >= argc)
		return tool_usage_error("missing command (list, follow, plot, serve or top)");
	command = find_command(argv[optind]);
	if (command == NULL)
		return tool_usage_error("unknown command '%s'", argv[optind]);
	status = refuse_foreign_options(command, options.given);
	if (status != 0)
		return status;
	return command->main(&options, argc - optind - 1, argv + optind + 1);
}
