/*
 * tools/mon/serve_slurm.c — Slurm job steps' energy on the node's series:
 * haecer_slurm_step_energy_joules_total{slurm_job,slurm_step,user} (and its ±,
 * haecer_slurm_step_error_joules_total), from the state files the SPANK plugin
 * (slurm/spank_haecer.c) keeps in its run directory, one per step (JOB.STEP, key=value lines).
 * Not "job": Prometheus gives every target a job label, and would rename ours exported_job.
 *
 * The step's energy is the plugin's: its own processes' share by the attribution engine, the
 * same figure the job's AdminComment gets at its end, so a dashboard and scontrol agree. Read
 * once per interval (at the tick, like msrd's totals), rounded down to --resolution-uj; bounded
 * to SLURM_MAX_STEPS steps. Only files owned by root or by the exporter's own user, in a
 * directory that is not writable by others, are believed: anyone else could invent jobs.
 */
#include "tools/mon/serve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLURM_MAX_STEPS 256u
#define STATE_MAX_BYTES 1024u

struct serve_slurm_step {
	char job[16];
	char step[16];
	char user[64];
	double joules;
	double error;
};

struct serve_slurm {
	const char *dir;
	size_t count;
	struct serve_slurm_step steps[SLURM_MAX_STEPS];
	bool limit_warned;
};

int serve_slurm_open(struct serve_state *state, const char *dir)
{
	struct serve_slurm *slurm = calloc(1, sizeof(*slurm));

	if (slurm == NULL)
		return -ENOMEM;
	slurm->dir = dir;
	state->slurm = slurm;
	return 0;
}

void serve_slurm_close(struct serve_state *state)
{
	free(state->slurm);
	state->slurm = NULL;
}

static bool trusted(const struct stat *status)
{
	return status->st_uid == 0 || status->st_uid == geteuid();
}

/* A label value as the plugin writes it: digits, letters, '.', '_', '-'; nothing else. */
static bool plain_value(const char *value, size_t size)
{
	size_t length = strlen(value);

	if (length == 0 || length >= size)
		return false;
	return strspn(value, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-") ==
	       length;
}

static void copy_field(char *to, size_t size, const char *value)
{
	if (plain_value(value, size))
		snprintf(to, size, "%s", value);
}

/* A non-negative, finite number and nothing after it. */
static bool parse_joules(const char *text, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(text, &end);
	return errno == 0 && end != text && *end == '\0' && isfinite(*out) && *out >= 0;
}

/* One state file's fields; false when it is not a whole, sane one. */
static bool parse_step(char *text, struct serve_slurm_step *step)
{
	bool have_joules = false;

	*step = (struct serve_slurm_step){ 0 };
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		char *equals = strchr(line, '=');
		if (equals == NULL)
			return false;
		*equals = '\0';
		const char *value = equals + 1;
		if (strcmp(line, "job") == 0)
			copy_field(step->job, sizeof(step->job), value);
		else if (strcmp(line, "step") == 0)
			copy_field(step->step, sizeof(step->step), value);
		else if (strcmp(line, "user") == 0)
			copy_field(step->user, sizeof(step->user), value);
		else if (strcmp(line, "joules") == 0)
			have_joules = parse_joules(value, &step->joules);
		else if (strcmp(line, "error") == 0 && !parse_joules(value, &step->error))
			return false;
	}
	return have_joules && step->job[0] != '\0' && step->step[0] != '\0' &&
	       step->user[0] != '\0';
}

/* The file `name` in dir into step; false when it is missing, untrusted or malformed. */
static bool read_step(int dir, const char *name, struct serve_slurm_step *step)
{
	char text[STATE_MAX_BYTES + 1];
	struct stat status;
	ssize_t length;
	int fd;

	if (name[0] == '.' || strstr(name, ".tmp") != NULL)
		return false;
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	length = fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && trusted(&status)
			 ? read(fd, text, STATE_MAX_BYTES + 1)
			 : -1;
	close(fd);
	if (length <= 0 || length > (ssize_t)STATE_MAX_BYTES)
		return false;
	text[length] = '\0';
	return parse_step(text, step);
}

void serve_slurm_tick(struct serve_state *state)
{
	struct serve_slurm *slurm = state->slurm;
	struct dirent *entry;
	struct stat status;
	DIR *dir;

	if (slurm == NULL)
		return;
	slurm->count = 0;
	dir = opendir(slurm->dir);
	if (dir == NULL)
		return; /* no Slurm plugin on this node (yet) */
	if (fstat(dirfd(dir), &status) != 0 || !trusted(&status) || (status.st_mode & 0022)) {
		closedir(dir);
		return;
	}
	while ((entry = readdir(dir)) != NULL) {
		if (slurm->count == SLURM_MAX_STEPS) {
			if (!slurm->limit_warned)
				tool_warn("more than %u Slurm steps in %s: the rest are not "
					  "exported", SLURM_MAX_STEPS, slurm->dir);
			slurm->limit_warned = true;
			break;
		}
		if (read_step(dirfd(dir), entry->d_name, &slurm->steps[slurm->count]))
			slurm->count++;
	}
	closedir(dir);
}

/* Joules rounded down to the exporter's resolution (0: as the plugin wrote them). */
static double rounded(const struct serve_state *state, double joules)
{
	double resolution = state->resolution_uj / 1e6;

	return resolution > 0 ? floor(joules / resolution) * resolution : joules;
}

static void render_family(const struct serve_state *state, FILE *out, bool openmetrics,
			  const char *name, const char *help, bool error)
{
	const struct serve_slurm *slurm = state->slurm;

	serve_write_joules_family(out, openmetrics, name, help);
	for (size_t i = 0; i < slurm->count; i++) {
		const struct serve_slurm_step *step = &slurm->steps[i];
		fprintf(out, "%s_total{slurm_job=\"%s\",slurm_step=\"%s\",user=\"%s\"%s} %.6f\n",
			name, step->job, step->step, step->user, state->simulated ? ",simulated=\"1\"" : "",
			error ? step->error : rounded(state, step->joules));
	}
}

void serve_slurm_render(const struct serve_state *state, FILE *out, bool openmetrics)
{
	if (state->slurm == NULL || state->slurm->count == 0)
		return;
	render_family(state, out, openmetrics, "haecer_slurm_step_energy_joules",
		      "Energy charged to a Slurm job step's processes (SPANK plugin).", false);
	render_family(state, out, openmetrics, "haecer_slurm_step_error_joules",
		      "The stated error of haecer_slurm_step_energy_joules_total.", true);
}
