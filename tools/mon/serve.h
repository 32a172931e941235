/*
 * tools/mon/serve.h — `haecer-mon serve`: what the exporter knows (collect.c), how it is
 * written as OpenMetrics or Prometheus text (metrics.c), and the HTTP side (http.c, serve.c).
 */
#ifndef HAECER_TOOLS_MON_SERVE_H
#define HAECER_TOOLS_MON_SERVE_H

#include "tools/mon/mon.h"

#define SERVE_DEFAULT_LISTEN "127.0.0.1:9464"
#define SERVE_DEFAULT_INTERVAL_MS 1000u
/* What the exporter publishes by default, whatever its own grant: 1 J and one value per
 * second (the shipped coarse policy's, configs/policies/coarse-energy.yaml), or the running
 * policy's coarse setting where that is coarser (msrd says it: haecer_energy_grant). */
#define SERVE_DEFAULT_RESOLUTION_UJ 1000000u
#define SERVE_MAX_DOMAINS 64u
#define SERVE_MAX_DIES 8u         /* dies a package (Cascade Lake-AP: 2) */
#define SERVE_MAX_RINGS 256u      /* rings producers made, shared fairly between their uids */
#define SERVE_MAX_MSRD_RINGS 64u  /* rings msrd fills for schedules, followed besides */

/* One RAPL domain of one package, read through msrd's 64-bit energy totals: the sum of its
 * dies' totals where RAPL is die-scope (Cascade Lake-AP), each die read through a CPU of it. */
struct serve_domain {
	const char *name;          /* label: perf's energy-pkg, energy-cores, ... */
	uint32_t package;
	size_t die_count;          /* 1 unless the package's dies have their own registers */
	uint32_t cpus[SERVE_MAX_DIES]; /* a CPU of each die (of the package), to read it on */
	uint64_t die_totals[SERVE_MAX_DIES]; /* each die's own total, as published */
	uint32_t address;          /* its energy-status register */
	int exponent;              /* J = units * 2^-exponent */
	bool refused;              /* msrd refused it (policy, no such register): left out */
	bool have_total;
	uint64_t total;
	bool have_window;
	uint64_t window_total;     /* start of the current power window */
	double window_start;
	bool have_watts;
	double watts;              /* over the last complete window */
};

/* A ring the exporter follows: the latest reading of every counter. */
struct serve_ring {
	struct mon_ring ring;
	struct mon_decoder decoder;
	size_t latest_count;
	struct mon_reading latest[MON_MAX_TRACKED];
	uint64_t lost;             /* records this exporter missed, producer drops included */
	bool producer_gone;
	bool listed;               /* in msrd's latest listing */
	bool msrd_filled;          /* msrd fills it for a schedule (not a producer's) */
	bool corrupted;            /* its producer rewrote its header: no longer read or shown */
};

struct serve_state {
	const char *socket_path;
	double interval;           /* seconds: energy sampling and ring discovery */
	uint64_t resolution_uj;    /* energy totals rounded down to this; 0: msrd's own */
	bool interval_by_policy;   /* no --interval: the policy's coarse one, at least the default */
	bool resolution_by_policy; /* no --resolution-uj: likewise */
	bool setting_said;         /* the interval and resolution in use were logged */
	double energy_sampled_at;  /* mon_now() of the last energy sample: one per interval */
	struct haecer_conn *conn;  /* NULL while msrd cannot be reached */
	bool msrd_warned;
	bool simulated;            /* msrd presents a simulated CPU (its machine info says so) */
	const char *backend;       /* msrd's backend (haecer_backend_name) while connected */
	int energy_status;         /* 0, or why there are no energy series (e.g. -EOPNOTSUPP) */
	size_t domain_count;
	struct serve_domain domains[SERVE_MAX_DOMAINS];
	size_t ring_count;
	struct serve_ring *rings[SERVE_MAX_RINGS + SERVE_MAX_MSRD_RINGS];
	bool ring_limit_warned;
	uint32_t ring_limit_uid;   /* the uid the last "past its share" line named */
	struct serve_attribution *attribution; /* per-process energy; NULL when off */
	struct serve_slurm *slurm;  /* Slurm steps' energy; NULL when off */
};

/* collect.c */
void serve_state_init(struct serve_state *state, const char *socket_path, double interval,
		      uint64_t resolution_uj);
void serve_state_free(struct serve_state *state);
/* The periodic work: (re)connect, sample energy, discover and drop rings, read rings. */
void serve_tick(struct serve_state *state);
/* Before answering a scrape: everything the rings hold, and energy totals when the last sample
 * is an interval old (scrapes in between get the cached ones: no scraper sees more than one
 * fresh value per interval, however fast it asks). */
void serve_refresh(struct serve_state *state);

/* metrics.c: the exposition text (OpenMetrics 1.0.0 when openmetrics, else Prometheus text
 * 0.0.4) in a malloc'ed buffer; -ENOMEM. */
int serve_render(const struct serve_state *state, bool openmetrics, char **text, size_t *length);

/* serve_attribution.c: per-process and per-cgroup energy series (--top N, --cgroup-depth D). */
#define SERVE_DEFAULT_TOP 20u
#define SERVE_DEFAULT_CGROUP_DEPTH 3u
int serve_attribution_open(struct serve_state *state, unsigned top, unsigned depth,
			   double retention_s);
void serve_attribution_close(struct serve_state *state);
void serve_attribution_tick(struct serve_state *state);
void serve_attribution_render(const struct serve_state *state, FILE *out, bool openmetrics);
/* serve_attribution.c: HELP, TYPE (and UNIT) of a counter family in joules; name without
 * _total. */
void serve_write_joules_family(FILE *out, bool openmetrics, const char *name, const char *help);

/* serve_slurm.c: Slurm job steps' energy from the SPANK plugin's state files in dir
 * (--slurm-dir, default SERVE_DEFAULT_SLURM_DIR), read at each tick. */
#define SERVE_DEFAULT_SLURM_DIR "/run/haecer/slurm"
int serve_slurm_open(struct serve_state *state, const char *dir);
void serve_slurm_close(struct serve_state *state);
void serve_slurm_tick(struct serve_state *state);
void serve_slurm_render(const struct serve_state *state, FILE *out, bool openmetrics);

/* metrics.c: a label value with \\, \" and \\n escaped. */
void serve_write_label_value(FILE *out, const char *value);

/* serve.c: what bounds a client (libmicrohttpd enforces them). A connection idle this long is
 * closed; at most this many at once (less when the descriptor limit is lower); a request head
 * beyond the memory limit is answered 431 and closed. */
#define SERVE_CLIENT_TIMEOUT_S 10u
#define SERVE_MAX_CONNECTIONS 4096u
#define SERVE_CONNECTION_MEMORY 8192u

#endif
