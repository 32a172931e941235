/*
 * tools/mon/http.c — what `haecer-mon serve` answers, as libmicrohttpd's request handler.
 *
 * libmicrohttpd parses the request and keeps the connection (keep-alive, timeouts, limits:
 * serve.c); this file decides the answer. Only `GET /metrics` (a query string is ignored) gets
 * the metrics; any other method or path is 404. With basic auth configured, a request without
 * the right user and password gets 401 first, whatever it asks. The body is OpenMetrics when the
 * Accept header asks for application/openmetrics-text (as Prometheus does), else Prometheus text
 * 0.0.4.
 */
#include "tools/mon/serve_http.h"

#include <stdlib.h>
#include <string.h>

#define OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define AUTH_REALM "haecer-mon serve"

/* Equal strings, in a time that does not depend on where they differ (a password check). */
static bool same_secret(const char *given, const char *expected)
{
	size_t given_length = strlen(given), expected_length = strlen(expected);
	unsigned char difference = given_length != expected_length;

	for (size_t i = 0; i < expected_length; i++)
		difference |= (unsigned char)(expected[i] ^ given[i < given_length ? i : 0]);
	return difference == 0 && given_length > 0;
}

static bool authorised(const struct serve_http *http, struct MHD_Connection *connection)
{
	char *password = NULL;
	char *user;
	bool ok;

	if (http->user == NULL)
		return true;
	user = MHD_basic_auth_get_username_password(connection, &password);
	ok = user != NULL && password != NULL && same_secret(user, http->user) &&
	     same_secret(password, http->password);
	MHD_free(user);
	MHD_free(password);
	return ok;
}

/* Queue `body` (malloc'ed: freed by libmicrohttpd, or here when it cannot take it). */
static enum MHD_Result queue(struct MHD_Connection *connection, unsigned code, const char *type,
			     char *body, size_t length, bool auth_failed)
{
	struct MHD_Response *response =
		MHD_create_response_from_buffer_with_free_callback(length, body, free);
	enum MHD_Result result;

	if (response == NULL) {
		free(body);
		return MHD_NO; /* libmicrohttpd closes the connection */
	}
	MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (auth_failed)
		result = MHD_queue_basic_auth_fail_response(connection, AUTH_REALM, response);
	else
		result = MHD_queue_response(connection, code, response);
	MHD_destroy_response(response);
	return result;
}

static enum MHD_Result queue_text(struct MHD_Connection *connection, unsigned code,
				  const char *text, bool auth_failed)
{
	char *copy = strdup(text);

	if (copy == NULL)
		return MHD_NO;
	return queue(connection, code, "text/plain; charset=utf-8", copy, strlen(copy),
		     auth_failed);
}

enum MHD_Result serve_http_answer(void *context, struct MHD_Connection *connection,
				  const char *url, const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **request_state)
{
	struct serve_http *http = context;
	const char *accept;
	bool openmetrics;
	char *body = NULL;
	size_t body_length = 0;

	(void)version;
	(void)upload_data;
	/* Answer on the last call, once the request (a body, which is never read) has been taken
	 * in whole: an answer queued earlier makes libmicrohttpd close instead of keeping alive. */
	if (*request_state == NULL) {
		*request_state = http;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (!authorised(http, connection))
		return queue_text(connection, MHD_HTTP_UNAUTHORIZED, "authorisation required\n",
				  true);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 || strcmp(url, "/metrics") != 0)
		return queue_text(connection, MHD_HTTP_NOT_FOUND,
				  "only GET /metrics is served here\n", false);
	accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
					     MHD_HTTP_HEADER_ACCEPT);
	openmetrics = accept != NULL && strstr(accept, "application/openmetrics-text") != NULL;
	serve_refresh(http->state);
	if (serve_render(http->state, openmetrics, &body, &body_length) < 0)
		return queue_text(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n",
				  false);
	return queue(connection, MHD_HTTP_OK, openmetrics ? OPENMETRICS_TYPE : PROMETHEUS_TYPE,
		     body, body_length, false);
}
