/*
 * tools/mon/plot.c — `haecer-mon plot MAJOR MINOR -o FILE.png|FILE.svg`: every counter of a ring
 * over time: power (W) for energy counters, on the left axis, and the rate (per second) of every
 * other counter, on the right axis.
 *
 * The output is checked before anything is waited for (its suffix picks PNG or SVG; a path that
 * cannot be written fails at once). Follows the ring like `follow` (for --duration seconds, 10 by
 * default, or until the producer is gone) and shows the last --duration seconds of what it
 * read, on an x axis exactly that long; writes one gnuplot data block per counter into a private
 * temporary directory, and runs gnuplot ($HAECER_GNUPLOT or `gnuplot` from PATH) as a child on a
 * generated script.
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_PLOT_SECONDS 10.0
#define MAX_POINTS (1u << 22) /* 4 Mi points (64 MiB): a day at 20 records/s */

struct point {
	double seconds;
	double value;       /* watts, or counts per second */
};

struct series {
	uint32_t counter_id;
	char name[RING_NAME_MAX];
	bool energy;        /* watts on y1; otherwise a rate on y2 */
	bool have_previous;
	uint64_t previous_value;
	double previous_seconds;
	struct point *points;
	size_t count;
	size_t capacity;
};

struct plot {
	struct series series[MON_MAX_TRACKED];
	size_t series_count;
	size_t points;
	bool have_origin;
	double origin;      /* seconds of the first record: the plot starts at 0 */
};

static struct series *series_for(struct plot *plot, const struct mon_reading *reading)
{
	struct series *series;

	for (size_t i = 0; i < plot->series_count; i++)
		if (plot->series[i].counter_id == reading->counter_id)
			return &plot->series[i];
	if (plot->series_count == MON_MAX_TRACKED)
		return NULL;
	series = &plot->series[plot->series_count++];
	memset(series, 0, sizeof(*series));
	series->counter_id = reading->counter_id;
	series->energy = reading->is_energy;
	memcpy(series->name, reading->name, sizeof(series->name));
	return series;
}

static int add_point(struct series *series, double seconds, double value)
{
	if (series->count == series->capacity) {
		size_t capacity = series->capacity > 0 ? series->capacity * 2 : 256;
		struct point *bigger = realloc(series->points, capacity * sizeof(*bigger));
		if (bigger == NULL)
			return -ENOMEM;
		series->points = bigger;
		series->capacity = capacity;
	}
	series->points[series->count++] = (struct point){ seconds, value };
	return 0;
}

static int collect(void *context, const struct mon_reading *reading)
{
	struct plot *plot = context;
	struct series *series;

	if (!plot->have_origin) {
		plot->origin = reading->seconds;
		plot->have_origin = true;
	}
	if (plot->points == MAX_POINTS)
		return -EFBIG;
	series = series_for(plot, reading);
	if (series == NULL)
		return 0;
	if (series->energy) {
		if (!reading->have_watts)
			return 0;
		plot->points++;
		return add_point(series, reading->seconds - plot->origin, reading->watts);
	}
	/* Any other counter: its rate between consecutive records (a counter that went back
	 * was reset: no point across the reset). */
	bool usable = series->have_previous && reading->seconds > series->previous_seconds &&
		      reading->value >= series->previous_value;
	double rate = usable ? (double)(reading->value - series->previous_value) /
				       (reading->seconds - series->previous_seconds)
			     : 0.0;
	series->have_previous = true;
	series->previous_value = reading->value;
	series->previous_seconds = reading->seconds;
	if (!usable)
		return 0;
	plot->points++;
	return add_point(series, reading->seconds - plot->origin, rate);
}

/* Keep the last `length` seconds of every series, shifted to start at 0. */
static void keep_last(struct plot *plot, double length)
{
	double end = 0.0;

	for (size_t i = 0; i < plot->series_count; i++)
		for (size_t p = 0; p < plot->series[i].count; p++)
			if (plot->series[i].points[p].seconds > end)
				end = plot->series[i].points[p].seconds;
	double start = end > length ? end - length : 0.0;
	plot->points = 0;
	for (size_t i = 0; i < plot->series_count; i++) {
		struct series *series = &plot->series[i];
		size_t kept = 0;
		for (size_t p = 0; p < series->count; p++) {
			if (series->points[p].seconds < start)
				continue;
			series->points[kept] = series->points[p];
			series->points[kept++].seconds -= start;
		}
		series->count = kept;
		plot->points += kept;
	}
}

static void plot_free(struct plot *plot)
{
	for (size_t i = 0; i < plot->series_count; i++)
		free(plot->series[i].points);
}

/* Close a file written with stdio: -EIO when a write failed, -errno when the close did. */
static int close_written(FILE *file)
{
	int status = ferror(file) ? -EIO : 0;

	if (fclose(file) != 0 && status == 0)
		status = -errno;
	return status;
}

/* One block per counter with points, separated by two blank lines (gnuplot's `index`). */
static int write_data(const struct plot *plot, const char *path)
{
	FILE *file = fopen(path, "w");
	size_t block = 0;

	if (file == NULL)
		return -errno;
	for (size_t i = 0; i < plot->series_count; i++) {
		const struct series *series = &plot->series[i];
		if (series->count == 0)
			continue;
		fprintf(file, "%s# counter %u %s: seconds %s\n", block > 0 ? "\n\n" : "",
			series->counter_id, series->name,
			series->energy ? "watts" : "per_second");
		for (size_t p = 0; p < series->count; p++)
			fprintf(file, "%.9f %.6f\n", series->points[p].seconds,
				series->points[p].value);
		block++;
	}
	return close_written(file);
}

/* A gnuplot single-quoted string: no escapes inside, a quote is doubled. */
static void print_gnuplot_string(FILE *file, const char *text)
{
	fputc('\'', file);
	for (const char *c = text; *c != '\0'; c++) {
		if (*c == '\'')
			fputc('\'', file);
		fputc(*c, file);
	}
	fputc('\'', file);
}

static bool is_svg(const char *path)
{
	size_t length = strlen(path);

	return length > 4 && strcmp(path + length - 4, ".svg") == 0;
}

static int write_script(const struct plot *plot, const struct ring_info *info,
			const char *script, const char *data, const char *output, double length)
{
	FILE *file = fopen(script, "w");
	bool energy = false, rates = false;
	size_t block = 0;
	char title[96];

	if (file == NULL)
		return -errno;
	for (size_t i = 0; i < plot->series_count; i++) {
		energy = energy || (plot->series[i].energy && plot->series[i].count > 0);
		rates = rates || (!plot->series[i].energy && plot->series[i].count > 0);
	}
	snprintf(title, sizeof(title), "haecer ring %u.%u.%u: %s", info->major, info->minor,
		 info->instance, energy && rates ? "power and rates" : energy ? "power" : "rates");
	fprintf(file, "set terminal %s size 1000,600 noenhanced\nset output ",
		is_svg(output) ? "svg" : "pngcairo");
	print_gnuplot_string(file, output);
	fputs("\nset title ", file);
	print_gnuplot_string(file, title);
	/* The x axis is exactly --duration long, whatever the first record's time. */
	fputs("\nset xlabel 'time (s)'\nset grid\nset key outside\n", file);
	if (length > 0)
		fprintf(file, "set xrange [0:%.9g]\n", length);
	if (energy)
		fputs("set ylabel 'power (W)'\n", file);
	if (rates)
		fprintf(file, "set %s 'rate (per second)'\n%s", energy ? "y2label" : "ylabel",
			energy ? "set y2tics\nset ytics nomirror\n" : "");
	fputs("plot ", file);
	for (size_t i = 0; i < plot->series_count; i++) {
		const struct series *series = &plot->series[i];
		char name[RING_NAME_MAX + 16];
		if (series->count == 0)
			continue;
		fputs(block > 0 ? ", \\\n     " : "", file);
		print_gnuplot_string(file, data);
		fprintf(file, " index %zu using 1:2 axes %s with lines title ", block++,
			!series->energy && energy ? "x1y2" : "x1y1");
		snprintf(name, sizeof(name), "%s%s", series->name, series->energy ? " (W)" : " (/s)");
		print_gnuplot_string(file, name);
	}
	fputc('\n', file);
	return close_written(file);
}

/* Run gnuplot on the script; 0, or MON_EXIT_FAILED after saying why. */
static int run_gnuplot(const char *script)
{
	const char *program = getenv("HAECER_GNUPLOT");
	int wait_status;
	pid_t pid;

	if (program == NULL || program[0] == '\0')
		program = "gnuplot";
	pid = fork();
	if (pid < 0)
		return mon_fail("cannot start gnuplot: %s", strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
		}
		execlp(program, program, script, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &wait_status, 0) < 0)
		return mon_fail("waiting for gnuplot: %s", strerror(errno));
	if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127)
		return mon_fail("cannot run %s (install gnuplot-nox)", program);
	if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0)
		return mon_fail("%s failed (status %d)", program, wait_status);
	return 0;
}

static void remove_if_present(const char *path)
{
	if (unlink(path) < 0 && errno != ENOENT)
		tool_warn("cannot remove %s: %s", path, strerror(errno));
}

/* Write data and script into a private directory, run gnuplot, clean up. */
static int render(const struct plot *plot, const struct ring_info *info,
		  const struct mon_options *options, double length)
{
	const char *base = getenv("TMPDIR");
	char directory[PATH_MAX];
	char script[PATH_MAX + 16];
	char data[PATH_MAX + 16];
	int status;

	snprintf(directory, sizeof(directory), "%s/haecer-mon-plot-XXXXXX",
		 base != NULL && base[0] == '/' ? base : "/tmp");
	if (mkdtemp(directory) == NULL)
		return mon_fail("cannot make a temporary directory: %s", strerror(errno));
	snprintf(script, sizeof(script), "%s/power.gp", directory);
	if (options->data != NULL)
		snprintf(data, sizeof(data), "%s", options->data);
	else
		snprintf(data, sizeof(data), "%s/power.dat", directory);
	status = write_data(plot, data);
	if (status == 0)
		status = write_script(plot, info, script, data, options->output, length);
	if (status < 0)
		status = mon_fail("cannot write the plot's files: %s", strerror(-status));
	else
		status = run_gnuplot(script);
	remove_if_present(script);
	if (options->data == NULL)
		remove_if_present(data);
	rmdir(directory);
	return status;
}

/* Whether path can be written, found out now rather than after the whole --duration: opened
 * for appending (nothing changes in a file that exists), removed again if it did not. */
static int check_writable(const char *path)
{
	bool existed = access(path, F_OK) == 0;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);

	if (fd < 0)
		return mon_fail("cannot write %s: %s", path, strerror(errno));
	close(fd);
	if (!existed)
		unlink(path);
	return 0;
}

static int check_plot_options(const struct mon_options *options)
{
	size_t length;

	if (options->output == NULL)
		return tool_usage_error("plot needs -o FILE.png or -o FILE.svg");
	if (strpbrk(options->output, "\r\n") != NULL ||
	    (options->data != NULL && strpbrk(options->data, "\r\n") != NULL))
		return tool_usage_error("file names with line breaks are not supported");
	length = strlen(options->output);
	if (!is_svg(options->output) && (length <= 4 || strcmp(options->output + length - 4, ".png")))
		return tool_usage_error("-o takes FILE.png or FILE.svg, not '%s'", options->output);
	if (check_writable(options->output) != 0)
		return MON_EXIT_FAILED;
	if (options->data != NULL && check_writable(options->data) != 0)
		return MON_EXIT_FAILED;
	return 0;
}

int mon_plot_main(const struct mon_options *options, int count, char *const *words)
{
	struct mon_watch_options watch = { options->duration, options->count,
					   options->interval_ms };
	struct plot *plot = NULL;
	struct mon_watch_handler handler = { collect, NULL, NULL, NULL };
	struct mon_watch_result result;
	struct ring_info info;
	int status = check_plot_options(options);

	if (status != 0)
		return status;
	plot = calloc(1, sizeof(*plot));
	if (plot == NULL)
		return mon_fail("out of memory");
	handler.context = plot;
	if (watch.duration == 0 && watch.count == 0)
		watch.duration = DEFAULT_PLOT_SECONDS;
	double length = watch.duration > 0 ? watch.duration : 0.0;
	status = mon_watch_ring(options, count, words, &watch, &handler, &info, &result);
	if (status != 0)
		goto out;
	if (result.end == MON_END_ERROR && result.error == -EFBIG)
		tool_warn("stopped at %u points", MAX_POINTS);
	if (result.end == MON_END_ERROR && result.error != -EFBIG)
		status = mon_fail("reading the ring failed: %s", strerror(-result.error));
	if (status != 0)
		goto out;
	if (length > 0)
		keep_last(plot, length);
	if (plot->points == 0)
		status = mon_fail("ring %u.%u.%u gave nothing to plot (%" PRIu64 " records; a power "
				  "or a rate needs two records of a counter)", info.major,
				  info.minor, info.instance, result.records);
	else
		status = render(plot, &info, options, length);
out:
	plot_free(plot);
	free(plot);
	return status;
}
