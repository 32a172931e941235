/*
 * tools/mon/mon.h — haecer-mon's internals, shared by its subcommands.
 *
 * haecer-mon is a FERRET consumer: it opens rings read-only through msrd (which checks the
 * policy's monitor_rings), maps them, and turns records into counter readings, joules and
 * watts. Everything here returns 0 (or a count) on success and -errno on failure, and never
 * sets errno for the caller; messages for the user are printed by the subcommands.
 */
#ifndef HAECER_TOOLS_MON_H
#define HAECER_TOOLS_MON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "haecer/msrd.h"
#include "shm/ring.h"
#include "tools/common/toolopt.h"

#define MON_EXIT_OK 0
#define MON_EXIT_FAILED 1
#define MON_EXIT_USAGE 2

#define MON_DEFAULT_INTERVAL_MS 50u
#define MON_MAX_INTERVAL_MS 3600000u
#define MON_MAX_TRACKED 64u /* counter ids a decoder tracks (a ring names at most 16) */

/* ---- arguments and messages (args.c) ---- */

/* A positive, finite number of seconds (fractions allowed), at most a year. */
bool mon_parse_seconds(const char *text, double *out);

/* "haecer-mon: <message>" on stderr; returns MON_EXIT_FAILED. */
int mon_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Connect to msrd (NULL: $HAECER_SOCKET or the default); on failure print why and return
 * MON_EXIT_FAILED, else 0. */
int mon_connect(const char *socket_path, struct haecer_conn **conn);

/* A ring key given on the command line: MAJOR MINOR [INSTANCE]. */
struct mon_ring_key {
	uint16_t major;
	uint16_t minor;
	uint32_t instance; /* 0: the newest */
};

/* Parse `count` (2 or 3) positional words into key; MON_EXIT_USAGE (message printed) or 0. */
int mon_parse_ring_key(char *const *words, int count, struct mon_ring_key *key);

/* Monotonic seconds (CLOCK_MONOTONIC), for deadlines. */
double mon_now(void);
/* Sleep up to ms milliseconds; returns early when a stop signal arrived. */
void mon_sleep_ms(unsigned ms);
/* SIGINT and SIGTERM set a flag instead of killing (no SA_RESTART, so sleeps end). */
void mon_catch_stop_signals(void);
bool mon_stop_requested(void);

/* Copy a counter name from shared memory into out (NUL-terminated), replacing every byte that
 * is not printable ASCII by '?': names come from producers and must not corrupt our output. */
void mon_safe_name(const char *name, size_t name_size, char *out, size_t out_size);

/* ---- output rows: the same fields as text, CSV or JSON lines (output.c) ---- */

enum mon_format { MON_FORMAT_TEXT, MON_FORMAT_CSV, MON_FORMAT_JSON };

bool mon_parse_format(const char *text, enum mon_format *format);

#define MON_ROW_FIELDS 16u
#define MON_FIELD_TEXT 640u /* room for 16 counter names and commas */

struct mon_row {
	size_t count;
	struct {
		const char *name;
		int width;       /* text: column width (negative: left-aligned); 0: not in text */
		bool quoted;     /* a string (JSON and CSV quote it) */
		bool present;    /* absent: empty in CSV, left out in JSON, "-" in text */
		char text[MON_FIELD_TEXT];
	} fields[MON_ROW_FIELDS];
};

void mon_row_reset(struct mon_row *row);
void mon_row_string(struct mon_row *row, const char *name, int width, const char *value);
void mon_row_number(struct mon_row *row, const char *name, int width, const char *format, ...)
	__attribute__((format(printf, 4, 5)));
void mon_row_absent(struct mon_row *row, const char *name, int width);
/* Print the row; *header_done makes CSV and text print their header line once. */
void mon_row_print(FILE *out, enum mon_format format, const struct mon_row *row,
		   bool *header_done);

/* ---- energy: joules and watts from counter readings (energy.c) ---- */

/* Energy counted between two readings of one counter: a smaller value than before is a 32-bit
 * register that wrapped when the previous value fits 32 bits (RAPL's raw registers); a 64-bit
 * total never goes back, so a smaller total means the counter restarted: -ERANGE. */
int mon_energy_delta(uint64_t previous, uint64_t value, uint64_t *delta);

/* Joules = units * 2^-exponent. */
double mon_joules(uint64_t units, int exponent);

/* A RAPL domain of one package (or die), as serve and top read it: on a CPU of it. */
struct mon_energy_domain {
	unsigned domain;           /* enum rapl_domain */
	const char *name;          /* perf's: energy-pkg, energy-cores, ... */
	uint32_t package;
	uint32_t die;              /* the die (HAECER_MACHINE_DIES), else the package */
	uint32_t cpu;
	uint32_t address;          /* its energy-status register */
	int exponent;              /* J = units * 2^-exponent */
};

/* Every (domain, package) the machine has, at most max; the count: one entry per die where an
 * Intel package has several (Cascade Lake-AP: RAPL is die-scope, each die's registers read
 * through a CPU of that die), so a package's figure is the sum of its dies' entries. */
size_t mon_energy_dies(const struct haecer_machine_info *machine, struct mon_energy_domain *out,
		       size_t max);

/* What a consumer keeps per counter to compute power and a 64-bit running total. */
struct mon_counter_state {
	uint32_t id;
	bool seen;
	uint64_t value;      /* latest raw value */
	uint64_t timestamp;  /* its time, in the ring's clock */
	uint64_t extended;   /* first value + every delta since: a total that never wraps */
	bool have_watts;
	double watts;        /* between the latest two readings */
};

/* ---- ring records as readings (reading.c) ---- */

struct mon_reading {
	uint32_t counter_id;
	char name[RING_NAME_MAX];  /* safe to print */
	uint16_t kind;             /* enum ring_counter_kind; SOFTWARE when the header lacks it */
	int32_t package;
	int32_t cpu;
	uint64_t value;
	uint64_t timestamp;        /* in the ring's clock */
	double seconds;            /* the timestamp in seconds of that clock */
	bool is_energy;
	int unit_exponent;
	double joules;             /* value * 2^-unit_exponent */
	double total_joules;       /* the counter's extended total in joules */
	bool have_watts;
	double watts;              /* since the previous reading of the same counter */
	bool simulated;            /* msrd presents a simulated CPU: the value is invented */
	const char *backend;       /* msrd's backend behind the value ("msr", "powercap", ...) */
};

struct mon_decoder {
	struct ring_info info;
	bool simulated;            /* msrd's CPU is simulated (machine info flag) */
	const char *backend;       /* msrd's backend (haecer_backend_name), "unknown" without msrd */
	size_t tracked;
	struct mon_counter_state states[MON_MAX_TRACKED];
};

void mon_decoder_init(struct mon_decoder *decoder, const struct ring_info *info);
/* Turn a record into a reading, updating the counter's state (power, total). */
void mon_decode(struct mon_decoder *decoder, const struct ring_record *record,
		struct mon_reading *reading);
/* Seconds of a timestamp in the ring's clock (TSC ticks / tsc_hz, otherwise nanoseconds). */
double mon_ring_seconds(const struct ring_info *info, uint64_t timestamp);

/* ---- an opened ring and the follow loop (watch.c) ---- */

struct mon_ring {
	struct haecer_ring_entry entry;
	struct ring_info info;        /* the header when attached */
	struct ring_consumer consumer;
	bool attached;
	bool shadow_warned;           /* a newer instance by another owner was reported */
};

/* Open (major, minor, instance) through conn and map it read-only. -EPERM / -ENOENT / ... from
 * msrd (haecer_conn_error says why), or the attach error. */
int mon_ring_open(struct haecer_conn *conn, uint16_t major, uint16_t minor, uint32_t instance,
		  struct mon_ring *ring);
void mon_ring_close(struct mon_ring *ring);

/* Whether the ring's producer is gone: its process no longer exists, or msrd (when conn is not
 * NULL) no longer lists the ring with a connected producer. Once gone, a final drain reads what
 * is left without waiting for half-written records. Asking msrd also warns (once, on stderr)
 * when a newer instance of the ring's (major, minor) has another owner. */
bool mon_ring_producer_gone(struct haecer_conn *conn, struct mon_ring *ring);

/* Print the message for a failed mon_ring_open and return the exit status (1). */
int mon_ring_open_failed(struct haecer_conn *conn, const struct mon_ring_key *key, int status);

struct mon_watch_options {
	double duration;     /* seconds; 0: unlimited */
	uint64_t count;      /* records; 0: unlimited */
	unsigned interval_ms;
};

enum mon_watch_end {
	MON_END_PRODUCER_GONE,
	MON_END_COUNT,
	MON_END_DURATION,
	MON_END_SIGNAL,
	MON_END_ERROR,
};

struct mon_watch_handler {
	/* Each reading in push order; a negative return stops the watch with that error. */
	int (*reading)(void *context, const struct mon_reading *reading);
	/* Records missed since the previous call (lost > 0), and the total so far. */
	int (*lost)(void *context, uint64_t lost, uint64_t lost_total);
	/* After each poll that delivered something (e.g. to flush output); may be NULL. */
	void (*batch_done)(void *context);
	void *context;
};

struct mon_watch_result {
	enum mon_watch_end end;
	uint64_t records;
	uint64_t lost;
	int error;
};

/* Read records as they arrive until the producer is gone (then drain what is left), `count`
 * readings were handed over, `duration` passed or SIGINT/SIGTERM came; sleeps interval_ms
 * between polls that found nothing new, so the producer is not slowed by a busy reader. */
void mon_watch(struct haecer_conn *conn, struct mon_ring *ring,
	       const struct mon_watch_options *options, const struct mon_watch_handler *handler,
	       struct mon_watch_result *result);

const char *mon_watch_end_text(enum mon_watch_end end);

/* Whether the msrd behind conn presents a simulated CPU (false when it cannot tell). */
bool mon_msrd_simulated(struct haecer_conn *conn);
/* The name of the backend of the msrd behind conn (its HELLO), "unknown" when conn is NULL. */
const char *mon_msrd_backend(const struct haecer_conn *conn);

struct mon_options;

/* The whole of a ring consumer's command: parse MAJOR MINOR [INSTANCE] from words, connect,
 * open the ring, catch stop signals, mon_watch it, close. 0 when the watch ran (*info is the
 * ring's header, *result how it ended), otherwise the exit status after printing why. */
int mon_watch_ring(const struct mon_options *options, int count, char *const *words,
		   const struct mon_watch_options *watch, const struct mon_watch_handler *handler,
		   struct ring_info *info, struct mon_watch_result *result);

/* ---- subcommands ---- */

/* Options as given on the command line (haecer-mon.c parses them for every subcommand and
 * refuses the ones a subcommand does not take). */
#define MON_OPT_FORMAT 0x01u
#define MON_OPT_DURATION 0x02u
#define MON_OPT_COUNT 0x04u
#define MON_OPT_INTERVAL 0x08u
#define MON_OPT_OUTPUT 0x10u
#define MON_OPT_DATA 0x20u
#define MON_OPT_LISTEN 0x40u
#define MON_OPT_UID 0x80u
#define MON_OPT_BY 0x100u
#define MON_OPT_RESOLUTION 0x200u
#define MON_OPT_TOP 0x400u
#define MON_OPT_CGROUP_DEPTH 0x800u
#define MON_OPT_WEB 0x1000u /* serve --tls-cert, --tls-key, --basic-auth-file */
#define MON_OPT_SLURM_DIR 0x2000u
#define MON_OPT_CGROUP_RETENTION 0x4000u
/* serve: how long a series none of whose cgroups is live keeps its final total (a few
 * scrapes' worth) before it goes */
#define MON_DEFAULT_CGROUP_RETENTION_S 300u

/* top --by: whose energy rows show (tools/mon/top_by.c). */
enum mon_by { MON_BY_PACKAGE, MON_BY_PROCESS, MON_BY_CGROUP, MON_BY_SERVICE };

struct mon_options {
	const char *socket_path;  /* NULL: $HAECER_SOCKET or the default */
	unsigned given;           /* MON_OPT_* */
	enum mon_format format;
	double duration;          /* 0: unlimited */
	uint64_t count;           /* 0: unlimited */
	unsigned interval_ms;
	const char *output;
	const char *data;
	const char *listen;
	uint32_t uid;             /* MON_OPT_UID: only rings this uid created */
	enum mon_by by;           /* MON_OPT_BY: top's rows */
	uint64_t resolution_uj;   /* MON_OPT_RESOLUTION: serve's energy resolution, 0 full */
	uint32_t top;             /* serve --top: process series (SERVE_DEFAULT_TOP) */
	uint32_t cgroup_depth;    /* serve --cgroup-depth: levels of a cgroup series' path */
	uint32_t cgroup_retention_s; /* serve --cgroup-retention: a removed cgroup's series */
	const char *tls_cert;     /* serve --tls-cert: PEM file; HTTPS with tls_key */
	const char *tls_key;
	const char *basic_auth_file; /* serve --basic-auth-file: "USER:PASSWORD" */
	const char *slurm_dir;    /* serve --slurm-dir: the SPANK plugin's run_dir */
};

/* top --by process|cgroup|service (tools/mon/top_by.c): an attribution engine over the real
 * /proc; each interval's package joules (one per package) are charged and the rows printed,
 * sorted by watts. mon_top_by_open returns 0 or -errno. */
struct mon_top_by;
int mon_top_by_open(enum mon_by by, struct mon_top_by **out);
int mon_top_by_print(struct mon_top_by *view, enum mon_format format, bool *header_done,
		     double seconds, double interval_s, const double *package_joules,
		     unsigned packages, bool simulated);
void mon_top_by_close(struct mon_top_by *view);

/* rank.c: the attribution engine's processes the caller may see (root: all; anyone else: their
 * own uid's), heaviest first by the last interval's joules or the joules so far; the others'
 * interval joules in hidden_joules. mon_rank_processes returns the count in order or -ENOMEM. */
struct attribution;
struct attribution_process;
struct mon_rank {
	const struct attribution_process **order;
	size_t size;
	double hidden_joules;
	double hidden_error_joules;
};
enum mon_rank_by { MON_RANK_INTERVAL, MON_RANK_TOTAL };
bool mon_sees_every_process(void);
bool mon_may_see_process(uid_t owner);
long mon_rank_processes(struct mon_rank *rank, const struct attribution *engine,
			enum mon_rank_by by);
void mon_rank_free(struct mon_rank *rank);

/* "process", "cgroup" or "service" into by; false for anything else. */
bool mon_parse_by(const char *text, enum mon_by *by);

/* Each takes its positional words (after the subcommand's name) and returns the exit status. */
int mon_list_main(const struct mon_options *options, int count, char *const *words);
int mon_follow_main(const struct mon_options *options, int count, char *const *words);
int mon_plot_main(const struct mon_options *options, int count, char *const *words);
int mon_serve_main(const struct mon_options *options, int count, char *const *words);
int mon_top_main(const struct mon_options *options, int count, char *const *words);

#endif
