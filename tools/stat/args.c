/*
 * tools/stat/args.c — haecer-stat's command line: options up to the command (getopt stops at
 * the first word that is not an option, or at "--"), events split at commas.
 */
#include "tools/stat/stat.h"
#include "tools/common/toolopt.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void stat_error(const char *format, ...)
{
	va_list arguments;

	va_start(arguments, format);
	tool_vwarn(format, arguments);
	va_end(arguments);
}

#define usage_error tool_usage_error

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: haecer-stat [OPTIONS] [--] COMMAND [ARGS...]\n"
		"       haecer-stat [-s PATH] list\n"
		"Run COMMAND and report the energy it took (every RAPL domain, from msrd's\n"
		"64-bit totals), the average power, the elapsed time and, where msrd's policy\n"
		"allows, instructions and cycles (or the -e events), in perf stat's layout.\n"
		"\n"
		"  -r, --repeat N        run N times; report mean +- standard deviation and the\n"
		"                        relative spread ( +- %% of the mean) of every metric\n"
		"  -e, --event LIST      events to count instead of instructions,cycles: perf names\n"
		"                        (instructions, cycles, ref-cycles, branches, branch-misses,\n"
		"                        cache-references, cache-misses), architectural names\n"
		"                        (INSTRUCTIONS_RETIRED), fixed counters (fixed0..fixed2),\n"
		"                        raw rUUEE (umask, event in hex) or libpfm4 names; perf's\n"
		"                        :u and :k modifiers; energy domains power/energy-pkg/ or\n"
		"                        energy-pkg, -cores, -gpu, -ram, -psys (only those shown);\n"
		"                        perf's software events (context-switches, page-faults,\n"
		"                        ...) and PMU events (msr/tsc/) through msrd's perf broker\n"
		"      --skip-unavailable  run even when an -e event cannot be counted (else 129)\n"
		"  -C, --cpu CPU         pin the command to host CPU CPU and count only there\n"
		"  -a, --all-cpus        count on every CPU of the machine\n"
		"      --per-socket      one line per package instead of the sum (its dies summed)\n"
		"      --per-die         one line per die (Intel packages of several dies)\n"
		"      --per-core        one line per counted CPU (events; energy per package)\n"
		"  -x, --field-separator SEP  perf stat's CSV with SEP between fields\n"
		"  -I, --interval-print MS    print the counts every MS ms while COMMAND runs\n"
		"  -j, --json            one JSON object instead of the table\n"
		"  -o, --output FILE     write the report to FILE (default: stderr); opened before\n"
		"                        COMMAND runs\n"
		"  -s, --socket PATH     msrd's socket (default $HAECER_SOCKET or %s)\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"Counters count per CPU, not per process. By default the command keeps its CPU\n"
		"affinity and every CPU it may run on is counted and summed (everything that\n"
		"runs there is counted); only --cpu pins it. Energy is package-wide.\n"
		"Exit status: the command's (128 + N when signal N killed it); 2 bad usage,\n"
		"125 haecer-stat failed (msrd unreachable, -o not writable), 126 the command\n"
		"cannot be executed, 127 no such command, 129 an -e event cannot be counted.\n",
		HAECER_DEFAULT_SOCKET);
}

static bool parse_number(const char *text, long low, long high, long *out)
{
	uint64_t value;

	if (!number_parse(text, 10, (uint64_t)high, &value) || value < (uint64_t)low)
		return false;
	*out = (long)value;
	return true;
}

/* Add a comma-separated list to the events. Each list is copied and split in place; every list
 * adds at least one event, so STAT_MAX_EVENTS copies are enough. */
static int add_events(struct stat_options *options, const char *list)
{
	size_t length = strlen(list);
	char *copy, *save = NULL;

	if (length == 0 || list[0] == ',' || list[length - 1] == ',' || strstr(list, ",,"))
		return usage_error("-e takes names separated by single commas, not '%s'", list);
	if (options->event_count == STAT_MAX_EVENTS)
		return usage_error("at most %u events", STAT_MAX_EVENTS);
	copy = strdup(list);
	if (copy == NULL)
		return usage_error("out of memory");
	options->event_lists[options->list_count++] = copy;
	for (char *name = strtok_r(copy, ",", &save); name != NULL;
	     name = strtok_r(NULL, ",", &save)) {
		if (options->event_count == STAT_MAX_EVENTS)
			return usage_error("at most %u events", STAT_MAX_EVENTS);
		if (strlen(name) >= STAT_NAME_MAX)
			return usage_error("event name too long: %.40s...", name);
		options->events[options->event_count++] = name;
	}
	return 0;
}

static int take_option(int option, const char *value, struct stat_options *options)
{
	long number;

	switch (option) {
	case 'r':
		if (!parse_number(value, 1, STAT_MAX_RUNS, &number))
			return usage_error("-r takes a number of runs from 1 to %u, not '%s'",
					   STAT_MAX_RUNS, value);
		options->runs = (unsigned)number;
		return 0;
	case 'e': return add_events(options, value);
	case 'C':
		if (!parse_number(value, 0, CPU_SETSIZE - 1, &number))
			return usage_error("--cpu takes a CPU number, not '%s'", value);
		options->cpu = (int)number;
		return 0;
	case 'a': options->all_cpus = true; return 0;
	case 'j': options->json = true; return 0;
	case 'o': options->output = value; return 0;
	case 'x':
		if (value[0] == '\0')
			return usage_error("-x takes a separator, not an empty string");
		options->separator = value;
		return 0;
	case 'I':
		if (!parse_number(value, 10, 3600000, &number))
			return usage_error("-I takes milliseconds from 10 to 3600000, not '%s'", value);
		options->interval_ms = (unsigned)number;
		return 0;
	case 'S': options->aggregate = STAT_PER_SOCKET; return 0;
	case 'P': options->aggregate = STAT_PER_CORE; return 0;
	case 'D': options->aggregate = STAT_PER_DIE; return 0;
	case 'k': options->skip_unavailable = true; return 0;
	case 's': options->socket_path = value; return 0;
	default: return usage_error("unknown option");
	}
}

/* The CPU must be one this process may run on (the command inherits the affinity). */
static int check_cpu(const struct stat_options *options)
{
	cpu_set_t allowed;

	if (options->separator != NULL && options->json)
		return usage_error("-x and --json exclude each other");
	if (options->interval_ms > 0 && options->runs > 1)
		return usage_error("-I and -r exclude each other");
	if (options->interval_ms > 0 && options->json)
		return usage_error("-I and --json exclude each other (use -x for intervals)");
	if (options->cpu < 0)
		return 0;
	if (options->all_cpus)
		return usage_error("--cpu and --all-cpus exclude each other");
	if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 &&
	    !CPU_ISSET(options->cpu, &allowed))
		return usage_error("CPU %d does not exist here or is not allowed to this process",
				   options->cpu);
	return 0;
}

int stat_parse_options(int argc, char **argv, struct stat_options *options)
{
	static const struct option long_options[] = {
		{ "repeat", required_argument, NULL, 'r' },
		{ "event", required_argument, NULL, 'e' },
		{ "cpu", required_argument, NULL, 'C' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "field-separator", required_argument, NULL, 'x' },
		{ "interval-print", required_argument, NULL, 'I' },
		{ "per-socket", no_argument, NULL, 'S' },
		{ "per-core", no_argument, NULL, 'P' },
		{ "per-die", no_argument, NULL, 'D' },
		{ "skip-unavailable", no_argument, NULL, 'k' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int option, status;

	memset(options, 0, sizeof(*options));
	options->runs = 1;
	options->cpu = -1;
	opterr = 0;
	/* '+': stop at the command, whose own options are not ours. */
	while ((option = getopt_long(argc, argv, "+:r:e:C:ajo:x:I:s:hV", long_options, NULL)) != -1) {
		if (option == 'h') {
			usage(stdout);
			return 1;
		}
		if (option == 'V') {
			tool_print_version();
			return 1;
		}
		if (option == ':' || option == '?')
			return tool_getopt_error(option, argv, long_options);
		status = take_option(option, optarg, options);
		if (status != 0)
			return status;
	}
	if (optind >= argc)
		return usage_error("no command to run");
	/* perf stat list: the events and energy domains this machine has. */
	if (strcmp(argv[optind], "list") == 0 && optind + 1 == argc) {
		options->list = true;
		return 0;
	}
	status = check_cpu(options);
	if (status != 0)
		return status;
	options->command = argv + optind;
	options->command_count = argc - optind;
	return 0;
}

void stat_options_free(struct stat_options *options)
{
	for (size_t i = 0; i < options->list_count; i++)
		free(options->event_lists[i]);
	options->list_count = 0;
	options->event_count = 0;
}
