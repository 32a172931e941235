#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static const char *log_ident = "haecer";
static enum log_level log_threshold = LOG_LEVEL_NOTICE;
static bool log_to_syslog;

static const char *const level_names[] = { "error", "warn", "notice", "info", "debug" };
static const int syslog_priorities[] = { LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG };

void log_init(const char *ident, enum log_level level, bool to_syslog)
{
	log_ident = ident;
	log_threshold = level;
	log_to_syslog = to_syslog;
	if (to_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

enum log_level log_get_level(void)
{
	return log_threshold;
}

int log_level_parse(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *log_escape(char *out, size_t size, const char *text, size_t length)
{
	static const char hex[] = "0123456789abcdef";
	size_t used = 0;

	if (size == 0)
		return out;
	for (size_t i = 0; i < length && text[i] != '\0'; i++) {
		unsigned char byte = (unsigned char)text[i];
		char escaped[5];
		size_t n = 0;
		if (byte >= 0x20 && byte < 0x7f && byte != '"' && byte != '\\') {
			escaped[n++] = (char)byte;
		} else {
			escaped[n++] = '\\';
			if (byte == '\n' || byte == '\t' || byte == '\r') {
				escaped[n++] = byte == '\n' ? 'n' : byte == '\t' ? 't' : 'r';
			} else if (byte == '"' || byte == '\\') {
				escaped[n++] = (char)byte;
			} else {
				escaped[n++] = 'x';
				escaped[n++] = hex[byte >> 4];
				escaped[n++] = hex[byte & 15];
			}
		}
		if (used + n >= size)
			break;
		memcpy(out + used, escaped, n);
		used += n;
	}
	out[used] = '\0';
	return out;
}

bool log_ratelimit_pass(struct log_ratelimit *limit, uint64_t now_ns, uint64_t interval_ns,
			uint32_t burst)
{
	if (limit->window_start_ns == 0 || now_ns - limit->window_start_ns >= interval_ns) {
		limit->window_start_ns = now_ns != 0 ? now_ns : 1;
		limit->printed = 0;
	}
	if (limit->printed < burst) {
		limit->printed++;
		return true;
	}
	limit->suppressed++;
	return false;
}

/* The last line of defence: a control character that reached a line by a path that forgot
 * log_escape still cannot end it. */
static void neutralise_controls(char *line)
{
	for (; *line != '\0'; line++) {
		if (((unsigned char)*line < 0x20 && *line != '\t') || *line == 0x7f)
			*line = '?';
	}
}

static void log_emit(enum log_level level, const char *format, va_list arguments,
		     const char *suffix)
{
	char line[1024];
	int length;

	if (level > log_threshold)
		return;
	length = vsnprintf(line, sizeof(line), format, arguments);
	if (length < 0)
		return;
	if (suffix != NULL && (size_t)length < sizeof(line))
		snprintf(line + length, sizeof(line) - (size_t)length, ": %s", suffix);
	neutralise_controls(line);
	if (log_to_syslog) {
		syslog(syslog_priorities[level], "%s", line);
		return;
	}
	/* One write per line so lines from several processes never interleave mid-line. */
	struct timespec now;
	struct tm local;
	char record[1200];
	clock_gettime(CLOCK_REALTIME, &now);
	localtime_r(&now.tv_sec, &local);
	length = snprintf(record, sizeof(record), "%02d:%02d:%02d.%03ld %s[%s]: %s\n", local.tm_hour,
			  local.tm_min, local.tm_sec, now.tv_nsec / 1000000, log_ident,
			  level_names[level], line);
	if (length > 0)
		(void)!write(STDERR_FILENO, record, (size_t)length < sizeof(record) ? (size_t)length : sizeof(record) - 1);
}

void log_message(enum log_level level, const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	log_emit(level, format, arguments, NULL);
	va_end(arguments);
}

void log_warn_errno(int negative_errno, const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	log_emit(LOG_LEVEL_WARN, format, arguments, strerror(-negative_errno));
	va_end(arguments);
}

void fatal(const char *format, ...)
{
	va_list arguments;
	va_start(arguments, format);
	log_emit(LOG_LEVEL_ERROR, format, arguments, NULL);
	va_end(arguments);
	abort();
}
