/*
 * haecer-mon serve stays up under the abuse of issue 25 item 5, and offers the protections of
 * issue 28 item 3, against the real binary in front of a real msrd:
 *   - slowloris: SLOW connections each send half a request and wait; a scrape is still
 *     answered (the answer must arrive: the limit is the tests' generous timeout, not a speed),
 *     and again once they close;
 *   - a 1 MB request head is answered 431 or the connection closed, never left hanging;
 *   - CONNECTS connections opened and closed at once; scrapes between them are answered;
 *   - --tls-cert/--tls-key serve HTTPS, --basic-auth-file requires the user and password (401
 *     without them or with a wrong one); plain HTTP on the TLS port gets no metrics.
 * HAECER_TEST_SCALE=small (the valgrind pass) opens a tenth of the connections.
 */
#include "tests/mon/serve_test.h"

#include "tests/lib/msrd_group.h"

#define SLOW 1000u
#define CONNECTS 10000u
#define HUGE_HEAD (1u << 20)

static struct msrd_server server;
static char directory[PATH_MAX];

static unsigned scaled(unsigned count)
{
	const char *scale = getenv("HAECER_TEST_SCALE");

	return scale != NULL && strcmp(scale, "small") == 0 ? count / 10 : count;
}

static void expect_scrape(unsigned port)
{
	struct http_reply reply;

	http_get(port, "/metrics", NULL, &reply);
	assert_int_equal(reply.code, 200);
	assert_non_null(strstr(reply.body, "haecer_msrd_up"));
	free(reply.text);
}

static void test_slowloris(void **state)
{
	struct proc serve;
	unsigned port;
	int *slow;

	(void)state;
	if (!raise_file_limit(SLOW + 64))
		skip();
	port = serve_start(&serve, server.socket_path, "1000");
	slow = slowloris_open(port, scaled(SLOW));
	expect_scrape(port);
	expect_scrape(port);
	slowloris_close(slow, scaled(SLOW));
	expect_scrape(port);
	serve_stop(&serve, NULL);
}

/* A 1 MB head: sent as far as serve takes it, then 431 or a close (a reset counts as one). */
static void test_huge_head(void **state)
{
	char *huge = malloc(HUGE_HEAD);
	char answer[64] = "";
	struct proc serve;
	unsigned port;
	ssize_t got;
	int fd, code = 0;

	(void)state;
	assert_non_null(huge);
	port = serve_start(&serve, server.socket_path, "1000");
	memset(huge, 'a', HUGE_HEAD);
	memcpy(huge, "GET /metrics HTTP/1.1\r\nX: ", 26);
	fd = http_connect(port);
	(void)send(fd, huge, HUGE_HEAD, MSG_NOSIGNAL); /* EPIPE/ECONNRESET once serve closes */
	got = recv(fd, answer, sizeof(answer) - 1, 0);
	assert_false(got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)); /* a hang */
	if (got > 0) {
		assert_int_equal(sscanf(answer, "HTTP/1.1 %d ", &code), 1);
		assert_int_equal(code, 431);
	}
	close(fd);
	free(huge);
	expect_scrape(port);
	serve_stop(&serve, NULL);
}

static void test_many_connects(void **state)
{
	struct proc serve;
	unsigned port;

	(void)state;
	port = serve_start(&serve, server.socket_path, "1000");
	for (unsigned i = 1; i <= scaled(CONNECTS); i++) {
		close(http_connect(port));
		if (i % 1000 == 0)
			expect_scrape(port);
	}
	expect_scrape(port);
	serve_stop(&serve, NULL);
}

/* curl's HTTP status for URL (with `user` as -u USER:PASSWORD when not NULL), "000" when
 * there was no HTTP answer. */
static int curl_code(const char *url, const char *user)
{
	const char *argv[] = { "/usr/bin/curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}",
			       "--max-time", "60", url, user != NULL ? "-u" : NULL, user, NULL };
	char *out = NULL;
	int code;

	harness_run(argv, &out, NULL);
	assert_non_null(out);
	code = atoi(out);
	free(out);
	return code;
}

static void make_tls_files(char *cert, char *key, char *auth, size_t size)
{
	const char *openssl[] = { "/usr/bin/openssl", "req", "-x509", "-newkey", "ec",
				  "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
				  "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", key,
				  "-out", cert, NULL };

	snprintf(directory, sizeof(directory), "%s", "/tmp/haecer-serve-tls-XXXXXX");
	assert_non_null(mkdtemp(directory));
	snprintf(cert, size, "%s/cert.pem", directory);
	snprintf(key, size, "%s/key.pem", directory);
	snprintf(auth, size, "%s/auth", directory);
	assert_int_equal(harness_run(openssl, NULL, NULL), 0);
	assert_int_equal(harness_write_file(auth, "scraper:s3cret\n", 0600), 0);
}

static void test_tls_and_basic_auth(void **state)
{
	char cert[PATH_MAX + 16], key[PATH_MAX + 16], auth[PATH_MAX + 16], url[64];
	const char *arguments[] = { "serve", "--listen", "127.0.0.1:0", "--tls-cert", cert,
				    "--tls-key", key, "--basic-auth-file", auth, NULL };
	struct proc serve;
	unsigned port;

	(void)state;
	if (access("/usr/bin/openssl", X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0)
		skip();
	make_tls_files(cert, key, auth, sizeof(cert));
	port = serve_start_arguments(&serve, server.socket_path, arguments);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/metrics", port);
	assert_int_equal(curl_code(url, "scraper:s3cret"), 200);
	assert_int_equal(curl_code(url, NULL), 401);
	assert_int_equal(curl_code(url, "scraper:wrong"), 401);
	assert_int_equal(curl_code(url, "other:s3cret"), 401);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metrics", port);
	assert_true(curl_code(url, "scraper:s3cret") != 200);
	serve_stop(&serve, NULL);
	harness_remove_tree(directory);
	directory[0] = '\0';
}

static int teardown(void **state)
{
	serve_teardown(state);
	if (directory[0] != '\0')
		harness_remove_tree(directory);
	directory[0] = '\0';
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_slowloris, teardown),
		cmocka_unit_test_teardown(test_huge_head, teardown),
		cmocka_unit_test_teardown(test_many_connects, teardown),
		cmocka_unit_test_teardown(test_tls_and_basic_auth, teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
