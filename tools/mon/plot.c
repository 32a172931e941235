/*
 * tools/mon/plot.c — `haecer-mon plot MAJOR MINOR -o power.png`: power over time as a PNG.
 *
 * Follows the ring like `follow` (for --duration seconds, 10 by default, or until the producer
 * is gone), keeps the watts between consecutive records of each energy counter, writes them as
 * one gnuplot data block per counter into a private temporary directory, and runs gnuplot
 * ($HAECER_GNUPLOT or `gnuplot` from PATH) as a child on a generated script.
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
	double watts;
};

struct series {
	uint32_t counter_id;
	char name[RING_NAME_MAX];
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
	memcpy(series->name, reading->name, sizeof(series->name));
	return series;
}

static int add_point(struct series *series, double seconds, double watts)
{
	if (series->count == series->capacity) {
		size_t capacity = series->capacity > 0 ? series->capacity * 2 : 256;
		struct point *bigger = realloc(series->points, capacity * sizeof(*bigger));
		if (bigger == NULL)
			return -ENOMEM;
		series->points = bigger;
		series->capacity = capacity;
	}
	series->points[series->count++] = (struct point){ seconds, watts };
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
	if (!reading->have_watts)
		return 0;
	if (plot->points == MAX_POINTS)
		return -EFBIG;
	series = series_for(plot, reading);
	if (series == NULL)
		return 0;
	plot->points++;
	return add_point(series, reading->seconds - plot->origin, reading->watts);
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
		fprintf(file, "%s# counter %u %s: seconds watts\n", block > 0 ? "\n\n" : "",
			series->counter_id, series->name);
		for (size_t p = 0; p < series->count; p++)
			fprintf(file, "%.9f %.6f\n", series->points[p].seconds,
				series->points[p].watts);
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

static int write_script(const struct plot *plot, const struct ring_info *info,
			const char *script, const char *data, const char *output)
{
	FILE *file = fopen(script, "w");
	size_t block = 0;
	char title[96];

	if (file == NULL)
		return -errno;
	snprintf(title, sizeof(title), "haecer ring %u.%u.%u: power", info->major, info->minor,
		 info->instance);
	fputs("set terminal pngcairo size 1000,600 noenhanced\nset output ", file);
	print_gnuplot_string(file, output);
	fputs("\nset title ", file);
	print_gnuplot_string(file, title);
	fputs("\nset xlabel 'time (s)'\nset ylabel 'power (W)'\nset grid\nset key outside\n"
	      "plot ", file);
	for (size_t i = 0; i < plot->series_count; i++) {
		if (plot->series[i].count == 0)
			continue;
		fputs(block > 0 ? ", \\\n     " : "", file);
		print_gnuplot_string(file, data);
		fprintf(file, " index %zu using 1:2 with lines title ", block++);
		print_gnuplot_string(file, plot->series[i].name);
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
		fprintf(stderr, "haecer-mon: cannot remove %s: %s\n", path, strerror(errno));
}

/* Write data and script into a private directory, run gnuplot, clean up. */
static int render(const struct plot *plot, const struct ring_info *info,
		  const struct mon_options *options)
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
		status = write_script(plot, info, script, data, options->output);
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

static int check_plot_options(const struct mon_options *options)
{
	if (options->output == NULL)
		return mon_usage_error("plot needs -o FILE.png");
	if (strpbrk(options->output, "\r\n") != NULL ||
	    (options->data != NULL && strpbrk(options->data, "\r\n") != NULL))
		return mon_usage_error("file names with line breaks are not supported");
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
	status = mon_watch_ring(options, count, words, &watch, &handler, &info, &result);
	if (status != 0)
		goto out;
	if (result.end == MON_END_ERROR && result.error == -EFBIG)
		fprintf(stderr, "haecer-mon: stopped at %u points\n", MAX_POINTS);
	if (result.end == MON_END_ERROR && result.error != -EFBIG)
		status = mon_fail("reading the ring failed: %s", strerror(-result.error));
	else if (plot->points == 0)
		status = mon_fail("ring %u.%u.%u gave no power readings (%" PRIu64 " records; power "
				  "needs two records of an energy counter)", info.major, info.minor,
				  info.instance, result.records);
	else
		status = render(plot, &info, options);
out:
	plot_free(plot);
	free(plot);
	return status;
}
