/*
 * common/log.h — one-line logging for msrd and the tools, to stderr or syslog.
 * OpenBSD daemons' habit: log_warn() appends strerror of an explicit error, fatal() is only for
 * states that cannot happen.
 */
#ifndef HAECER_COMMON_LOG_H
#define HAECER_COMMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_NOTICE = 2,
	LOG_LEVEL_INFO = 3,
	LOG_LEVEL_DEBUG = 4,
};

/* ident names the program in every line; to_syslog sends lines to syslog(3) instead of stderr. */
void log_init(const char *ident, enum log_level level, bool to_syslog);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* "error", "warn", "notice", "info", "debug" -> 0, or -EINVAL. */
int log_level_parse(const char *name, enum log_level *out);

void log_message(enum log_level level, const char *format, ...)
	__attribute__((format(printf, 2, 3)));
#define log_error(...) log_message(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warnx(...) log_message(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_notice(...) log_message(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...) log_message(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_message(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* A warning with the text of a negative errno value appended: "what: No such file". */
void log_warn_errno(int negative_errno, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/* Text from outside the process (a client's name, anything off the wire) made safe for one log
 * line: printable ASCII but the quote and the backslash is copied, everything else becomes a C
 * escape (backslash-n, backslash-quote, backslash-xNN...), so no byte of it can end the line,
 * forge another one or hide what was sent. Reads at most `length` bytes of `text` (stops at a
 * NUL); `out` is always terminated, and cut (never mid-escape) when `size` is too small.
 * Returns `out`, for use as a printf argument. */
const char *log_escape(char *out, size_t size, const char *text, size_t length);

/* printk_ratelimit for one kind of line: at most `burst` lines per `interval_ns`, the rest
 * counted in `suppressed` for a summary line the caller prints. Zero-initialised is ready. */
struct log_ratelimit {
	uint64_t window_start_ns;
	uint32_t printed;
	uint64_t suppressed;
};
/* Whether one more line may be printed at `now_ns` (counted either way). */
bool log_ratelimit_pass(struct log_ratelimit *limit, uint64_t now_ns, uint64_t interval_ns,
			uint32_t burst);

/* For impossible states only: log and abort. */
void fatal(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
