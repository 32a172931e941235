/*
 * tests/mon/prometheus_test.h — a real Prometheus (Debian's /usr/bin/prometheus) for tests: its
 * config and TSDB in prometheus_directory, on a free loopback port, scraping one target every
 * second; queried through its HTTP API with curl.
 */
#ifndef HAECER_TESTS_MON_PROMETHEUS_TEST_H
#define HAECER_TESTS_MON_PROMETHEUS_TEST_H

#include "tests/mon/serve_test.h"
#include "harness/msrd_harness.h"


#define PROMETHEUS "/usr/bin/prometheus"

static char directory[PATH_MAX];
static unsigned prometheus_port;
static pid_t prometheus_pid;

/* DIRECTORY/prometheus.yml: scrape 127.0.0.1:target_port every second. */
static inline void write_prometheus_config(const char *config, unsigned target_port)
{
	char yaml[512];

	snprintf(yaml, sizeof(yaml),
		 "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		 "  evaluation_interval: 1s\n"
		 "scrape_configs:\n  - job_name: haecer\n    static_configs:\n"
		 "      - targets: ['127.0.0.1:%u']\n", target_port);
	assert_int_equal(harness_write_file(config, yaml, 0644), 0);
}

/* Prometheus in the foreground, its output in DIRECTORY/prometheus.log. */
static inline pid_t start_prometheus(unsigned target_port)
{
	char config[PATH_MAX + 32], storage[PATH_MAX + 32], log_path[PATH_MAX + 32];
	char config_option[PATH_MAX + 64], storage_option[PATH_MAX + 64], listen_option[64];
	pid_t pid;

	snprintf(config, sizeof(config), "%s/prometheus.yml", directory);
	snprintf(storage, sizeof(storage), "%s/data", directory);
	snprintf(log_path, sizeof(log_path), "%s/prometheus.log", directory);
	write_prometheus_config(config, target_port);
	prometheus_port = harness_free_loopback_port();
	snprintf(config_option, sizeof(config_option), "--config.file=%s", config);
	snprintf(storage_option, sizeof(storage_option), "--storage.tsdb.path=%s", storage);
	snprintf(listen_option, sizeof(listen_option), "--web.listen-address=127.0.0.1:%u",
		 prometheus_port);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(log_fd, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
		execl(PROMETHEUS, PROMETHEUS, config_option, storage_option, listen_option,
		      "--log.level=warn", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The running Prometheus (prometheus_pid) made to scrape target_port instead: its config
 * rewritten and reloaded (SIGHUP), which is much faster than starting another. */
static inline void retarget_prometheus(unsigned target_port)
{
	char config[PATH_MAX + 32];

	snprintf(config, sizeof(config), "%s/prometheus.yml", directory);
	write_prometheus_config(config, target_port);
	assert_int_equal(kill(prometheus_pid, SIGHUP), 0);
}

/* curl -s [-G --data-urlencode QUERY] http://127.0.0.1:PORT/PATH; its stdout, or NULL. */
static inline char *prometheus_get(const char *path, const char *query)
{
	char url[128];
	const char *argv[] = { "/usr/bin/curl", "-sf", "-G", "--data-urlencode", query, url, NULL };
	const char *plain[] = { "/usr/bin/curl", "-sf", url, NULL };
	char *out = NULL;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", prometheus_port, path);
	if (harness_run(query != NULL ? argv : plain, &out, NULL) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* The sample value in a query answer ("value":[time,"VALUE"]), or NAN when there is none. */
static inline double query_value(const char *answer)
{
	const char *value = answer != NULL ? strstr(answer, "\"value\":[") : NULL;

	if (value == NULL || (value = strstr(value, ",\"")) == NULL)
		return NAN;
	return strtod(value + 2, NULL);
}

static inline void wait_ready(void)
{
	for (int round = 0; round < 600; round++) {
		char *answer = prometheus_get("/-/ready", NULL);
		free(answer);
		if (answer != NULL)
			return;
		usleep(100000);
	}
	fail_msg("Prometheus did not get ready (see %s/prometheus.log)", directory);
}

/* Kill Prometheus if a failed test left it running; remove its directory unless
 * HAECER_TEST_KEEP is set after a failure. True when something was left running. */
static inline bool prometheus_teardown(void)
{
	bool failed = prometheus_pid > 0 || serve_test_running > 0;

	if (prometheus_pid > 0) {
		kill(prometheus_pid, SIGKILL);
		waitpid(prometheus_pid, NULL, 0);
	}
	prometheus_pid = 0;
	serve_teardown(NULL);
	if (failed && getenv("HAECER_TEST_KEEP") != NULL)
		fprintf(stderr, "kept %s\n", directory);
	else if (directory[0] != '\0')
		harness_remove_tree(directory);
	return failed;
}

#endif
