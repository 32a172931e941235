/*
 * haecer-prof — energy profiler for unmodified programs (see prof/prof.h, haecer-prof(1)).
 *
 *   haecer-prof record [-F HZ] [-o FILE] [--sampler perf|timer] [--socket PATH] [-q] -- ./app args
 *   haecer-prof report [-i FILE] [--format text|folded|callgrind|json|svg] [-o OUT]
 *   haecer-prof calm [-F HZ] [-n RUNS] [--sampler perf|timer] [--socket PATH] -- ./app args
 *
 * Exit status: record returns the program's status; 2 for usage errors, 1 when the profile
 * could not be taken or read.
 */
#include "prof/prof.h"
#include "tools/common/toolopt.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2

static const char usage_text[] =
	"usage: haecer-prof --help | --version\n"
	"       haecer-prof record [-F HZ] [-o FILE] [-E MS] [--call-graph fp|dwarf]\n"
	"                          [--sampler perf|timer] [--socket PATH] [-q] -- COMMAND [ARGS]\n"
	"       haecer-prof report [-i FILE] [--format text|folded|callgrind|json|svg] [-o OUT]\n"
	"       haecer-prof calm [-F HZ] [-n RUNS] [--sampler perf|timer] [--socket PATH]\n"
	"                        -- COMMAND [ARGS]\n"
	"\n"
	"record  run COMMAND, sample its threads' call stacks HZ times per second of CPU time\n"
	"        (default 1000) and msrd's energy readings of every package and RAPL domain,\n"
	"        into FILE (default ./" PROF_DEFAULT_FILE "), energy every MS ms (default 20);\n"
	"        sampler: perf_event_open, or CPU-time timers in a preloaded agent when perf is\n"
	"        refused (--sampler forces one)\n"
	"report  charge each energy interval to the program's threads by CPU-time share and show\n"
	"        per thread, function and call path; folded = FlameGraph lines weighted in uJ\n"
	"calm    run COMMAND RUNS times without and with the profiler (default 5): time and\n"
	"        energy overhead, and whether the CPU frequency distribution changed\n";

static int usage(const char *problem)
{
	if (problem)
		tool_warn("%s", problem);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

static int parse_hz(const char *text, unsigned *hz)
{
	uint64_t value;

	if (!number_parse(text, 10, PROF_MAX_HZ, &value) || value == 0)
		return -EINVAL;
	*hz = (unsigned)value;
	return 0;
}

static int record_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "frequency", required_argument, NULL, 'F' },
		{ "output", required_argument, NULL, 'o' },
		{ "socket", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "energy-period", required_argument, NULL, 'E' },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "sampler", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	struct prof_record_options record = { .hz = PROF_DEFAULT_HZ, .output = PROF_DEFAULT_FILE };
	int option;

	optind = 1;
	while ((option = getopt_long(argc, argv, "+F:o:qE:", options, NULL)) != -1) {
		switch (option) {
		case 'S':
			if (strcmp(optarg, "perf") == 0)
				record.sampler = PROF_SAMPLER_PERF;
			else if (strcmp(optarg, "timer") == 0)
				record.sampler = PROF_SAMPLER_TIMER;
			else
				return usage("--sampler: perf or timer");
			break;
		case 'g':
			if (strcmp(optarg, "fp") == 0) {
				record.dwarf_unwind = false;
			} else if (strcmp(optarg, "dwarf") == 0) {
#ifdef __x86_64__
				record.dwarf_unwind = true;
#else
				return usage("--call-graph dwarf: x86-64 only");
#endif
			} else {
				return usage("--call-graph: fp or dwarf");
			}
			break;
		case 'E': {
			uint64_t ms;
			if (!number_parse(optarg, 10, 10000, &ms) || ms < 1)
				return usage("-E: an energy period from 1 to 10000 ms");
			record.energy_period_ns = ms * 1000000ull;
			break;
		}
		case 'F':
			if (parse_hz(optarg, &record.hz) < 0)
				return usage("-F: a rate from 1 to 10000 Hz");
			break;
		case 'o': record.output = optarg; break;
		case 's': record.socket = optarg; break;
		case 'q': record.quiet = true; break;
		default: return usage(NULL);
		}
	}
	if (optind >= argc)
		return usage("record: no command given");
	record.command = argv + optind;
	int status = prof_record(&record);
	return status < 0 ? 1 : status;
}

static int report_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const names[] = { "text", "folded", "callgrind", "json", "svg" };
	const char *input = PROF_DEFAULT_FILE, *output = NULL;
	enum prof_format format = PROF_TEXT;
	struct prof_data data;
	struct prof_profile profile;
	int option, status;
	FILE *out = stdout;

	optind = 1;
	while ((option = getopt_long(argc, argv, "i:f:o:", options, NULL)) != -1) {
		switch (option) {
		case 'i': input = optarg; break;
		case 'o': output = optarg; break;
		case 'f': {
			size_t i = 0;
			while (i < sizeof(names) / sizeof(names[0]) && strcmp(optarg, names[i]) != 0)
				i++;
			if (i == sizeof(names) / sizeof(names[0]))
				return usage("--format: text, folded, callgrind, json or svg");
			format = (enum prof_format)i;
			break;
		}
		default: return usage(NULL);
		}
	}
	if (optind != argc)
		return usage("report: unexpected argument");
	status = prof_data_load(input, &data);
	if (status < 0) {
		tool_warn("cannot read %s: %s", input,
			  status == -EBADMSG ? "not a haecer-prof data file (or torn)"
			  : strerror(-status));
		return 1;
	}
	status = prof_profile_build(&data, &profile);
	if (status < 0) {
		tool_warn("%s: %s", input, strerror(-status));
		prof_data_free(&data);
		return 1;
	}
	if (output && !(out = fopen(output, "w"))) {
		tool_warn("cannot write %s: %s", output, strerror(errno));
		status = -errno;
	} else {
		status = prof_report(&profile, format, out);
		if (output && fclose(out) != 0 && status == 0)
			status = -errno;
		if (status < 0)
			tool_warn("writing the report failed: %s", strerror(-status));
	}
	prof_profile_free(&profile);
	prof_data_free(&data);
	return status < 0 ? 1 : 0;
}

static int calm_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "frequency", required_argument, NULL, 'F' },
		{ "runs", required_argument, NULL, 'n' },
		{ "socket", required_argument, NULL, 's' },
		{ "sampler", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	struct prof_calm_options calm = { .hz = PROF_DEFAULT_HZ, .runs = 5 };
	int option;

	optind = 1;
	while ((option = getopt_long(argc, argv, "+F:n:", options, NULL)) != -1) {
		switch (option) {
		case 'F':
			if (parse_hz(optarg, &calm.hz) < 0)
				return usage("-F: a rate from 1 to 10000 Hz");
			break;
		case 'n': {
			uint64_t runs;
			if (!number_parse(optarg, 10, 1000, &runs) || runs < 2)
				return usage("-n: 2 to 1000 runs");
			calm.runs = (unsigned)runs;
			break;
		}
		case 's': calm.socket = optarg; break;
		case 'S':
			if (strcmp(optarg, "perf") != 0 && strcmp(optarg, "timer") != 0)
				return usage("--sampler: perf or timer");
			calm.sampler = optarg;
			break;
		default: return usage(NULL);
		}
	}
	if (optind >= argc)
		return usage("calm: no command given");
	calm.command = argv + optind;
	return prof_calm(&calm) < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	tool_init("haecer-prof");
	if (argc < 2)
		return usage(NULL);
	if (strcmp(argv[1], "--version") == 0) {
		tool_print_version();
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (strcmp(argv[1], "record") == 0)
		return record_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "report") == 0)
		return report_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "calm") == 0)
		return calm_main(argc - 1, argv + 1);
	return usage("unknown command (record, report, calm)");
}
