/*
 * tools/haecer-msr.c — rdmsr/wrmsr through msrd: the same commands and output options as
 * msr-tools, but every access is checked against msrd's policy for the caller's uid/gid.
 *
 *   haecer-msr [OPTIONS] read CPU ADDRESS          haecer-msr [OPTIONS] read -a ADDRESS
 *   haecer-msr [OPTIONS] write CPU ADDRESS VALUE   haecer-msr [OPTIONS] write -a ADDRESS VALUE
 *   haecer-msr [OPTIONS] batch FILE|-
 *
 * Exit status: 0 success, 1 refused by the policy, device error or no server, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "haecer/msrd.h"
#include "tools/common/toolopt.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define BATCH_MAX 1024u

enum output_mode { OUT_HEX, OUT_HEX_UPPER, OUT_SIGNED, OUT_UNSIGNED, OUT_OCTAL };

struct options {
	const char *socket;
	enum output_mode mode;
	bool c_language;     /* -c: 0x / 0 prefix */
	bool zero_pad;       /* -0: pad to the field's width */
	unsigned high_bit;   /* -f HI:LO */
	unsigned low_bit;
	bool all_cpus;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: haecer-msr [OPTIONS] read CPU ADDRESS\n"
		"       haecer-msr [OPTIONS] read --all-cpus ADDRESS\n"
		"       haecer-msr [OPTIONS] write CPU ADDRESS VALUE\n"
		"       haecer-msr [OPTIONS] write --all-cpus ADDRESS VALUE\n"
		"       haecer-msr [OPTIONS] batch FILE   (FILE '-' is standard input)\n"
		"Read and write model-specific registers through msrd, under its policy.\n"
		"Numbers are C literals: 0x611 is hex, 1553 decimal (as msr-tools reads them).\n"
		"\n"
		"  -s, --socket PATH  msrd's socket (default $HAECER_SOCKET or %s)\n"
		"  -a, --all-cpus     every CPU, one line each in CPU order\n"
		"  -x, --hexadecimal  lower-case hex output (default)\n"
		"  -X, --capital-hex  upper-case hex output\n"
		"  -d, --decimal      signed decimal output\n"
		"  -u, --unsigned     unsigned decimal output\n"
		"  -o, --octal        octal output\n"
		"  -c, --c-language   C-language prefix (0x for hex, 0 for octal)\n"
		"  -0, --zero-pad     pad with zeros to the field's width\n"
		"  -f, --bitfield H:L only bits H down to L\n"
		"  -h, --help         this text\n"
		"  -V, --version      the version\n"
		"\n"
		"A batch FILE has one op per line: 'read CPU ADDRESS' or 'write CPU ADDRESS VALUE';\n"
		"'#' starts a comment. msrd checks the whole batch before running any op, so a refused\n"
		"op means nothing was written. Each read prints its value on its own line, in order.\n"
		"\n"
		"Exit status: 0 success, 1 refused or failed (one line says why), 2 bad usage.\n",
		HAECER_DEFAULT_SOCKET);
}

#define usage_error tool_usage_error

static bool parse_bitfield(const char *text, unsigned *high, unsigned *low)
{
	unsigned h, l;
	char tail;

	if (sscanf(text, "%u:%u%c", &h, &l, &tail) != 2 || h > 63 || l > h)
		return false;
	*high = h;
	*low = l;
	return true;
}

/* rdmsr's formatting: the bit field first, then the mode, prefix and padding. */
static void print_value(const struct options *options, uint64_t raw)
{
	unsigned bits = options->high_bit - options->low_bit + 1;
	uint64_t value = raw >> options->low_bit;
	int width;

	if (bits < 64)
		value &= (UINT64_C(1) << bits) - 1;
	switch (options->mode) {
	case OUT_SIGNED:
		printf("%" PRId64 "\n", (int64_t)value);
		break;
	case OUT_UNSIGNED:
		printf("%" PRIu64 "\n", value);
		break;
	case OUT_OCTAL:
		width = options->zero_pad ? (int)((bits + 2) / 3) : 0;
		printf("%s%0*" PRIo64 "\n", options->c_language ? "0" : "", width, value);
		break;
	case OUT_HEX_UPPER:
		width = options->zero_pad ? (int)((bits + 3) / 4) : 0;
		printf("%s%0*" PRIX64 "\n", options->c_language ? "0x" : "", width, value);
		break;
	case OUT_HEX:
	default:
		width = options->zero_pad ? (int)((bits + 3) / 4) : 0;
		printf("%s%0*" PRIx64 "\n", options->c_language ? "0x" : "", width, value);
		break;
	}
}

static int connect_or_report(const struct options *options, struct haecer_conn **conn)
{
	int status = haecer_connect(options->socket, conn);

	if (status < 0) {
		const char *path = options->socket;
		if (path == NULL)
			path = getenv(HAECER_SOCKET_ENV);
		tool_warn("cannot connect to msrd at %s: %s%s%s",
			  path != NULL && path[0] != '\0' ? path : HAECER_DEFAULT_SOCKET,
			  strerror(-status), haecer_connect_hint(status)[0] != '\0' ? "; " : "",
			  haecer_connect_hint(status));
		return EXIT_REFUSED;
	}
	return 0;
}

static int report_op(struct haecer_conn *conn, const char *what, const struct haecer_msr_op *op,
		     int status)
{
	const char *detail = haecer_conn_error(conn);
	const char *reason = detail[0] != '\0' && status != -ECANCELED ? detail
								: haecer_msrd_strerror(status);

	tool_warn("%s cpu %u MSR 0x%x: %s", what, op->cpu, op->address, reason);
	return EXIT_REFUSED;
}

/* Run ops as one batch and print every read; the first failure decides the exit status. */
static int run_ops(struct haecer_conn *conn, const struct options *options,
		   struct haecer_msr_op *ops, size_t count, const unsigned *lines)
{
	int status = haecer_msr_batch(conn, ops, count);
	int exit_status = 0;

	for (size_t i = 0; i < count; i++) {
		char what[48];
		if (ops[i].status == 0) {
			if (ops[i].kind == HAECER_MSR_READ)
				print_value(options, ops[i].value);
			continue;
		}
		if (status < 0 && ops[i].status == -ECANCELED)
			continue; /* not run because another op was refused: that one is reported */
		if (lines != NULL)
			snprintf(what, sizeof(what), "line %u: %s", lines[i],
				 ops[i].kind == HAECER_MSR_READ ? "read" : "write");
		else
			snprintf(what, sizeof(what), "%s",
				 ops[i].kind == HAECER_MSR_READ ? "read" : "write");
		if (exit_status == 0)
			exit_status = report_op(conn, what, &ops[i], ops[i].status);
	}
	if (status < 0 && exit_status == 0) {
		tool_warn("%s", haecer_conn_error(conn)[0] != '\0'
			  ? haecer_conn_error(conn)
			  : haecer_msrd_strerror(status));
		exit_status = EXIT_REFUSED;
	}
	return exit_status;
}

static int run_single(const struct options *options, bool write, char **arguments, int count)
{
	static struct haecer_msr_op ops[HAECER_MAX_CPUS];
	struct haecer_machine_info *machine = NULL;
	struct haecer_conn *conn = NULL;
	int expected = (write ? 2 : 1) + (options->all_cpus ? 0 : 1);
	int position = 0;
	uint32_t cpu = 0;
	uint32_t address;
	uint64_t value = 0;
	size_t cpus = 1;
	int status;

	if (count != expected)
		return usage_error("%s", write ? "write takes CPU ADDRESS VALUE (or -a ADDRESS VALUE)"
					       : "read takes CPU ADDRESS (or -a ADDRESS)");
	if (!options->all_cpus && !number_parse_u32(arguments[position++], &cpu))
		return usage_error("bad CPU number '%s'", arguments[position - 1]);
	if (!number_parse_u32(arguments[position++], &address))
		return usage_error("bad MSR address '%s'", arguments[position - 1]);
	if (write && !number_parse(arguments[position++], 0, UINT64_MAX, &value))
		return usage_error("bad value '%s'", arguments[position - 1]);
	status = connect_or_report(options, &conn);
	if (status != 0)
		return status;
	if (options->all_cpus) {
		machine = malloc(sizeof(*machine));
		status = machine != NULL ? haecer_machine_info(conn, machine) : -ENOMEM;
		if (status < 0) {
			tool_warn("asking msrd for the CPU count: %s",
				  haecer_msrd_strerror(status));
			status = EXIT_REFUSED;
			goto out;
		}
		cpus = machine->cpu_count;
	}
	for (size_t i = 0; i < cpus; i++) {
		ops[i] = (struct haecer_msr_op){
			.kind = write ? HAECER_MSR_WRITE : HAECER_MSR_READ,
			.cpu = options->all_cpus ? (uint32_t)i : cpu,
			.address = address,
			.value = value,
		};
	}
	if (!options->all_cpus) {
		/* One op: READ or WRITE, whose refusals come with the server's detail text. */
		status = write ? haecer_msr_write(conn, cpu, address, value)
			       : haecer_msr_read(conn, cpu, address, &ops[0].value);
		if (status < 0)
			status = report_op(conn, write ? "write" : "read", &ops[0], status);
		else if (!write)
			print_value(options, ops[0].value);
		goto out;
	}
	status = run_ops(conn, options, ops, cpus, NULL);
out:
	free(machine);
	haecer_close(conn);
	return status;
}

/* One batch line into an op; 0 for blank/comment lines, 1 for an op, -1 for a bad line. */
static int parse_batch_line(char *line, struct haecer_msr_op *op)
{
	char *words[5];
	int count = 0;
	char *save = NULL;
	char *hash = strchr(line, '#');

	if (hash != NULL)
		*hash = '\0';
	for (char *word = strtok_r(line, " \t\r\n", &save); word != NULL;
	     word = strtok_r(NULL, " \t\r\n", &save)) {
		if (count == 5)
			return -1;
		words[count++] = word;
	}
	if (count == 0)
		return 0;
	*op = (struct haecer_msr_op){ 0 };
	if (strcmp(words[0], "read") == 0 && count == 3) {
		op->kind = HAECER_MSR_READ;
	} else if (strcmp(words[0], "write") == 0 && count == 4) {
		op->kind = HAECER_MSR_WRITE;
		if (!number_parse(words[3], 0, UINT64_MAX, &op->value))
			return -1;
	} else {
		return -1;
	}
	if (!number_parse_u32(words[1], &op->cpu) || !number_parse_u32(words[2], &op->address))
		return -1;
	return 1;
}

static int run_batch(const struct options *options, char **arguments, int count)
{
	static struct haecer_msr_op ops[BATCH_MAX];
	static unsigned lines[BATCH_MAX];
	struct haecer_conn *conn = NULL;
	char line[512];
	unsigned number = 0;
	size_t ops_count = 0;
	bool from_stdin;
	FILE *in;
	int status = 0;

	if (count != 1 || options->all_cpus)
		return usage_error("%s", "batch takes one FILE (and no --all-cpus)");
	from_stdin = strcmp(arguments[0], "-") == 0;
	in = from_stdin ? stdin : fopen(arguments[0], "r");
	if (in == NULL) {
		tool_warn("%s: %s", arguments[0], strerror(errno));
		return EXIT_REFUSED;
	}
	while (fgets(line, sizeof(line), in) != NULL) {
		int parsed;
		number++;
		if (ops_count == BATCH_MAX) {
			tool_warn("%s:%u: more than %u ops in one batch",
				  arguments[0], number, BATCH_MAX);
			status = EXIT_REFUSED;
			goto out;
		}
		parsed = parse_batch_line(line, &ops[ops_count]);
		if (parsed < 0) {
			tool_warn("%s:%u: expected 'read CPU ADDRESS' or "
				  "'write CPU ADDRESS VALUE'",
				  arguments[0], number);
			status = EXIT_USAGE;
			goto out;
		}
		if (parsed > 0)
			lines[ops_count++] = number;
	}
	if (ops_count == 0) {
		tool_warn("%s: no ops", arguments[0]);
		status = EXIT_USAGE;
		goto out;
	}
	status = connect_or_report(options, &conn);
	if (status == 0)
		status = run_ops(conn, options, ops, ops_count, lines);
out:
	if (!from_stdin)
		fclose(in);
	haecer_close(conn);
	return status;
}

static int parse_options(int argc, char **argv, struct options *options)
{
	static const struct option long_options[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "hexadecimal", no_argument, NULL, 'x' },
		{ "capital-hex", no_argument, NULL, 'X' },
		{ "decimal", no_argument, NULL, 'd' },
		{ "unsigned", no_argument, NULL, 'u' },
		{ "octal", no_argument, NULL, 'o' },
		{ "c-language", no_argument, NULL, 'c' },
		{ "zero-pad", no_argument, NULL, '0' },
		{ "bitfield", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int option;

	*options = (struct options){ .mode = OUT_HEX, .high_bit = 63, .low_bit = 0 };
	opterr = 0; /* tools/common's messages, with the --help hint */
	while ((option = getopt_long(argc, argv, ":s:axXduoc0f:hV", long_options, NULL)) != -1) {
		switch (option) {
		case 's': options->socket = optarg; break;
		case 'a': options->all_cpus = true; break;
		case 'x': options->mode = OUT_HEX; break;
		case 'X': options->mode = OUT_HEX_UPPER; break;
		case 'd': options->mode = OUT_SIGNED; break;
		case 'u': options->mode = OUT_UNSIGNED; break;
		case 'o': options->mode = OUT_OCTAL; break;
		case 'c': options->c_language = true; break;
		case '0': options->zero_pad = true; break;
		case 'f':
			if (!parse_bitfield(optarg, &options->high_bit, &options->low_bit))
				return usage_error("-f takes HIGH:LOW bits within 63:0, not '%s'",
						   optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			tool_print_version();
			exit(0);
		default:
			return tool_getopt_error(option, argv, long_options);
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options options;
	int status;

	tool_init("haecer-msr");
	status = parse_options(argc, argv, &options);
	const char *command;

	if (status != 0)
		return status;
	if (optind >= argc)
		return usage_error("%s", "missing command: read, write or batch");
	command = argv[optind];
	if (strcmp(command, "read") == 0)
		return run_single(&options, false, argv + optind + 1, argc - optind - 1);
	if (strcmp(command, "write") == 0)
		return run_single(&options, true, argv + optind + 1, argc - optind - 1);
	if (strcmp(command, "batch") == 0)
		return run_batch(&options, argv + optind + 1, argc - optind - 1);
	return usage_error("unknown command '%s' (read, write or batch)", command);
}
