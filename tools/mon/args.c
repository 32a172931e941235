/*
 * tools/mon/args.c — numbers, ring keys, messages, signals and time for haecer-mon.
 */
#include "tools/mon/mon.h"
#include "common/clock.h"
#include "tools/common/toolopt.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECONDS_PER_YEAR (366.0 * 86400.0)

static volatile sig_atomic_t stop_signal;

bool mon_parse_seconds(const char *text, double *out)
{
	char *end;
	double value;

	/* The tools' rule for numbers (tools/common/toolopt.h): a digit first, no blank or sign;
	 * ".5" is a number of seconds too. */
	if (text == NULL || !(isdigit((unsigned char)text[0]) || text[0] == '.'))
		return false;
	errno = 0;
	value = strtod(text, &end);
	if (errno != 0 || *end != '\0' || !isfinite(value) || value <= 0 ||
	    value > SECONDS_PER_YEAR)
		return false;
	*out = value;
	return true;
}

int mon_fail(const char *format, ...)
{
	va_list arguments;

	va_start(arguments, format);
	tool_vwarn(format, arguments);
	va_end(arguments);
	return MON_EXIT_FAILED;
}

int mon_connect(const char *socket_path, struct haecer_conn **conn)
{
	int status = haecer_connect(socket_path, conn);
	const char *path = socket_path;

	if (status == 0)
		return 0;
	if (path == NULL)
		path = getenv(HAECER_SOCKET_ENV);
	if (path == NULL || path[0] == '\0')
		path = HAECER_DEFAULT_SOCKET;
	return mon_fail("cannot connect to msrd at %s: %s%s%s", path, strerror(-status),
			haecer_connect_hint(status)[0] != '\0' ? "; " : "",
			haecer_connect_hint(status));
}

int mon_parse_ring_key(char *const *words, int count, struct mon_ring_key *key)
{
	*key = (struct mon_ring_key){ 0 };
	if (count < 2)
		return tool_usage_error("missing MAJOR and MINOR of the ring");
	if (count > 3)
		return tool_usage_error("unexpected argument '%s'", words[3]);
	if (!number_parse_u16(words[0], &key->major))
		return tool_usage_error("bad MAJOR '%s' (0 to 65535)", words[0]);
	if (!number_parse_u16(words[1], &key->minor))
		return tool_usage_error("bad MINOR '%s' (0 to 65535)", words[1]);
	if (count == 3 && !number_parse_u32(words[2], &key->instance))
		return tool_usage_error("bad INSTANCE '%s'", words[2]);
	return 0;
}

double mon_now(void)
{
	return (double)clock_monotonic_ns() * 1e-9;
}

void mon_sleep_ms(unsigned ms)
{
	struct timespec wait = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	if (!mon_stop_requested())
		nanosleep(&wait, NULL); /* EINTR on a stop signal: the caller checks the flag */
}

static void on_stop_signal(int number)
{
	stop_signal = number;
}

void mon_catch_stop_signals(void)
{
	struct sigaction action = { .sa_handler = on_stop_signal };

	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, NULL);
	sigaction(SIGTERM, &action, NULL);
}

bool mon_stop_requested(void)
{
	return stop_signal != 0;
}

void mon_safe_name(const char *name, size_t name_size, char *out, size_t out_size)
{
	size_t i = 0;

	if (out_size == 0)
		return;
	for (; i < name_size && i + 1 < out_size && name[i] != '\0'; i++)
		out[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	out[i] = '\0';
}
