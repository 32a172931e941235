/*
 * policy/internal.h — the loaded policy's representation, shared by the files of policy/ only.
 * Nothing outside policy/ includes this header.
 */
#ifndef HAECER_POLICY_INTERNAL_H
#define HAECER_POLICY_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* Limits on what a policy may contain; a file beyond them is refused, not truncated. */
#define POLICY_MAX_FILE_BYTES (1u << 20)
#define POLICY_MAX_NAME 63u /* MSR entry and set names */

/* One MSR entry: a name, an inclusive address interval and what may be done to each address. */
struct policy_msr {
	char *name;
	uint32_t first;
	uint32_t last;
	bool read;
	uint64_t write_mask;
	char **sets;
	size_t set_count;
};

struct policy_major_range {
	uint16_t first;
	uint16_t last;
};

/* A list of ring majors, sorted and without overlaps after validation. */
struct policy_majors {
	struct policy_major_range *ranges;
	size_t count;
};

enum policy_match_kind {
	POLICY_MATCH_UID,
	POLICY_MATCH_USER,
	POLICY_MATCH_GID,
	POLICY_MATCH_GROUP,
	POLICY_MATCH_ANY,
};

struct policy_rule {
	enum policy_match_kind kind;
	char *match_name;   /* user or group name as written (USER, GROUP) */
	bool match_known;   /* the uid/gid below is meaningful: the name exists, or a number */
	uint32_t match_id;  /* uid or gid */
	char *match_comment; /* what the uid/gid/name resolves to here, for policy_print */
	char **allow;       /* set names as written, "all" included */
	size_t allow_count;
	size_t *entries;    /* indices into policy->msrs granted by `allow`, ascending */
	size_t entry_count;
	bool read_only;     /* grant the entries' reads but none of their write masks */
	struct policy_majors create_rings;
	struct policy_majors monitor_rings;
	bool coarse_energy;
	struct policy_energy_limit energy;
	bool persistent_schedules;
	bool sim_control;
	struct policy_perf perf; /* perf events msrd may open for the rule's clients */
};

struct policy {
	struct policy_msr *msrs; /* file order */
	size_t msr_count;
	size_t *by_address;      /* indices into msrs, ascending by first address */
	struct policy_rule *rules;
	size_t rule_count;
	char **warnings;
	size_t warning_count;
	char *name; /* what errors and warnings call the file */
	uint32_t energy_page_max_hz; /* energy_page.max_rate_hz */
	uint32_t edge_cpu_percent;   /* energy_page.edge_cpu_percent */
	uint32_t edge_cpu_percent_per_uid;
};

/* The raw text of a policy parsed into struct policy; `error->file` is already set. */
int policy_parse(const char *yaml, size_t length, struct policy *policy,
		 struct policy_error *error);

/* Record an error at a 1-based line and column (0, 0: no place). Returns -EINVAL. */
int policy_fail(struct policy_error *error, unsigned line, unsigned column, const char *format,
		...) __attribute__((format(printf, 4, 5)));

/* Warnings about an entry that loads but is probably wrong (lint.c): a register name at another
 * address, a write mask that opens unsafe bits. 0 or -ENOMEM. */
int policy_lint_msr(struct policy *policy, const struct policy_msr *msr, unsigned line);

/* Append "NAME:LINE: text" to the policy's warnings. */
int policy_warn(struct policy *policy, unsigned line, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/* Parse "0x..." hex or plain decimal without sign or leading zeros. 0, -ERANGE when the value
 * does not fit in 64 bits, -EINVAL when the text is not a number. */
int policy_parse_u64(const char *text, uint64_t *out);

/* MSR and set names: [A-Za-z_][A-Za-z0-9_]*, at most POLICY_MAX_NAME characters. */
bool policy_name_valid(const char *name);

/* User and group names that need no quoting in YAML: [A-Za-z0-9_.][A-Za-z0-9_.-]*, an optional
 * final '$' (Samba machine accounts), at most 32 characters. */
bool policy_account_name_valid(const char *name);

/* The energy-status registers a coarse grant applies to (hw/msr.h), ascending. */
extern const uint32_t policy_energy_registers[];
extern const size_t policy_energy_register_count;

char *policy_strdup(const char *text);
void policy_free_strings(char **strings, size_t count);

#endif
