/*
 * policy/policy.h — who may touch which MSR, which bits, and which rings.
 *
 * A policy is a YAML file (schema in configs/policies/README.md, parsed with libcyaml plus our
 * own range and consistency pass). It is immutable once loaded; msrd swaps whole policies on
 * SIGHUP. Default deny: an address no rule grants cannot be read or written, a ring major no rule
 * grants cannot be created or monitored.
 *
 * msrd resolves a policy once per connection into a policy_grant (the union of every rule that
 * matches the peer's uid, gid and supplementary groups); the hot-path questions are then answered
 * from the grant in O(log n) without allocation.
 *
 * All functions return 0 on success and -errno on failure; none sets errno.
 */
#ifndef HAECER_POLICY_H
#define HAECER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct policy;
struct policy_grant;

/* Where and why loading failed: "FILE:LINE:COLUMN: MESSAGE" when printed. Line and column are
 * 1-based; 0 when the error is not tied to a place (unreadable file, insecure permissions). */
struct policy_error {
	char file[256];
	unsigned line;
	unsigned column;
	char message[256];
};

struct policy_load_options {
	/* Accept a file (or a directory on its path) writable by a user other than root or the
	 * owner of the running process; sshd's StrictModes=no. Off by default. */
	bool allow_insecure_permissions;
};

/* The identity msrd learned from SO_PEERCRED / SO_PEERGROUPS. */
struct policy_subject {
	uid_t uid;
	gid_t gid;
	const gid_t *groups; /* supplementary groups, may be NULL */
	size_t group_count;
};

/* A reduced-resolution energy grant (PLATYPUS / CVE-2020-8694 mitigation). */
struct policy_energy_limit {
	uint32_t min_interval_ms; /* reads closer together than this return the previous value */
	uint64_t resolution_uj;   /* readings are rounded down to a multiple of this many µJ */
};

/* perf events msrd may open for a client (the perf_event broker), by event class: a rule's
 * `perf: {events: [software, msr, power, core], scope: own|cpu, sampling: false, max_open: N}`.
 * Events on the client's own threads are granted with any class; CPU-wide ones only with
 * scope cpu; sampling (a sample period) only with sampling: true. */
#define POLICY_PERF_SOFTWARE 0x1u /* PERF_TYPE_SOFTWARE: context switches, page faults, clocks */
#define POLICY_PERF_MSR 0x2u      /* the msr PMU: tsc, aperf, mperf, smi */
#define POLICY_PERF_POWER 0x4u    /* the power PMU: energy-pkg, -cores, -ram, -psys */
#define POLICY_PERF_CORE 0x8u     /* the core PMU: hardware, cache and raw events */
#define POLICY_PERF_DEFAULT_MAX_OPEN 64u
#define POLICY_PERF_MAX_OPEN_LIMIT 4096u
struct policy_perf {
	uint32_t classes;  /* POLICY_PERF_* */
	bool cpu_wide;
	bool sampling;
	uint32_t max_open; /* events msrd holds open for one uid at once */
};

/* Load and validate a policy file. On failure *out is NULL and error says file, line and what is
 * wrong. -EINVAL for content errors (always with a line and column), -EACCES for insecure
 * ownership/permissions, -EFBIG for a file over 1 MiB, -errno of the failing call for I/O
 * errors. options may be NULL; error may be NULL. Warnings do not fail the load. */
int policy_load(const char *path, const struct policy_load_options *options, struct policy **out,
		struct policy_error *error);

/* Same from memory (no permission check); `name` is what errors call the file. */
int policy_load_buffer(const char *yaml, size_t length, const char *name, struct policy **out,
		       struct policy_error *error);

void policy_free(struct policy *policy);

/* Warnings that did not make the policy invalid (e.g. a user or group name that does not exist
 * on this system: its rule matches nobody). Each is "FILE:LINE: text". */
size_t policy_warning_count(const struct policy *policy);
const char *policy_warning(const struct policy *policy, size_t index);

/* Print the canonical form: every MSR entry and every rule with names resolved, numbers in a
 * fixed format, in file order. Parsing the output gives the same canonical form again. */
int policy_print(const struct policy *policy, FILE *out);

/* Format an error as "FILE:LINE:COLUMN: MESSAGE" (or "FILE: MESSAGE" without a place).
 * Returns the length written, -ENOSPC when it was truncated to fit `size`. */
int policy_error_format(const struct policy_error *error, char *buffer, size_t size);

/* The name of the MSR entry covering `address` (for log lines), or NULL when no entry does.
 * Valid as long as the policy. */
const char *policy_msr_name(const struct policy *policy, uint32_t address);

/* ---- per-client grants ---- */

/* A grant is a snapshot: it does not refer to the policy, so it stays valid after policy_free
 * (a reload), and it is never modified, so any number of threads may query it. */

int policy_resolve(const struct policy *policy, const struct policy_subject *subject,
		   struct policy_grant **out);
/* The grant of every rule together, whoever it names: the union of all write masks and reads.
 * msrd's privileged parent checks each write against it (server/privsep_parent.c): whatever
 * uid the server says it writes for, no bit outside every rule's mask can change. */
int policy_resolve_everyone(const struct policy *policy, struct policy_grant **out);
void policy_grant_free(struct policy_grant *grant);

/* Whether the grant matched any rule at all (for logging "no rule for uid N"). */
bool policy_grant_matched(const struct policy_grant *grant);

bool policy_allows_read(const struct policy_grant *grant, uint32_t address);

/* Bits of `address` the grant may change; 0 when it may not write at all. */
uint64_t policy_write_mask(const struct policy_grant *grant, uint32_t address);

/* A write of `proposed` over the register's `current` value is allowed when every bit that
 * changes is inside the write mask; rewriting the current value of the other bits is fine.
 * 0 allowed, -EPERM no write access to the address, -EACCES a bit outside the mask would change. */
int policy_allows_write(const struct policy_grant *grant, uint32_t address, uint64_t current,
			uint64_t proposed);

bool policy_allows_create_ring(const struct policy_grant *grant, uint16_t major);
bool policy_allows_monitor(const struct policy_grant *grant, uint16_t major);

/* Whether scheduled batches of this client may persist after it disconnects. */
bool policy_allows_persistent_schedule(const struct policy_grant *grant);

/* The perf events the grant allows (the union of its matching rules; max_open the largest);
 * classes 0 when none. */
void policy_perf_grant(const struct policy_grant *grant, struct policy_perf *out);

/* Whether this client may drive the simulated CPU (virtual time, scripted load, ground truth). */
bool policy_allows_sim_control(const struct policy_grant *grant);

/* 1 and *limit filled when reads of `address` are granted only at reduced rate/resolution; 0 when
 * they are granted in full (or not at all: ask policy_allows_read). */
int policy_energy_limit(const struct policy_grant *grant, uint32_t address,
			struct policy_energy_limit *limit);

/* The policy's coarse setting: 1 and *limit filled with the coarsest of its rules' energy
 * limits (the longest min_interval_ms and the largest resolution_uj, each over every rule with
 * an energy limit), what anyone republishing energy to users the policy does not trust should
 * not go below; 0 when no rule limits energy. */
int policy_coarse_energy(const struct policy *policy, struct policy_energy_limit *limit);

/* The highest rate (Hz) at which msrd samples energy registers for energy pages
 * (energy_page: {max_rate_hz}); POLICY_ENERGY_PAGE_DEFAULT_HZ when the policy does not say. */
#define POLICY_ENERGY_PAGE_DEFAULT_HZ 1000u
uint32_t policy_energy_page_max_hz(const struct policy *policy);

/* How much of one CPU msrd's precise-edge windows may take, in percent, in all and for the
 * holders of one uid (energy_page: {edge_cpu_percent, edge_cpu_percent_per_uid}); 0 turns the
 * windows off. The defaults when the policy does not say: */
#define POLICY_EDGE_CPU_PERCENT_DEFAULT 30u
#define POLICY_EDGE_CPU_PERCENT_PER_UID_DEFAULT 20u
uint32_t policy_edge_cpu_percent(const struct policy *policy);
uint32_t policy_edge_cpu_percent_per_uid(const struct policy *policy);

/* ---- msr-safe import ---- */

/* Turn an msr-safe allowlist ("0xADDRESS 0xWRITEMASK" per line, '#' comments, blank lines) into
 * policy YAML on `out`. group == NULL grants to every user (msr-safe's global list); otherwise to
 * members of that group. A malformed line is -EINVAL with its line number in error. */
int policy_import_allowlist(FILE *in, const char *input_name, const char *group, FILE *out,
			    struct policy_error *error);
/* The same, and the rule also grants creating and monitoring the rings of ring_majors ("N" or
 * "N-M"; NULL: none), which an msr-safe allowlist cannot express: a seed-API program's
 * setupFerretMonitor needs its major. -EINVAL for majors that are not a range of 0-65535. */
int policy_import_allowlist_rings(FILE *in, const char *input_name, const char *group,
				  const char *ring_majors, FILE *out, struct policy_error *error);

#endif
