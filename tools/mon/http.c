/*
 * tools/mon/http.c — the HTTP/1.1 side of `haecer-mon serve`: one request per connection.
 *
 * Only `GET /metrics` (a query string is ignored) gets the metrics; any other method or path is
 * 404, a request that is not HTTP/1.x is 400, and one whose head exceeds SERVE_MAX_REQUEST is
 * 431 (the caller enforces the bound). The body is OpenMetrics when the Accept header asks for
 * application/openmetrics-text (as Prometheus does), else Prometheus text 0.0.4. Every answer
 * closes the connection, which keeps the server a small state machine.
 */
#include "tools/mon/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The end of the request head (after its blank line), or NULL when it has not arrived. */
static const char *head_end(const char *request)
{
	const char *crlf = strstr(request, "\r\n\r\n");
	const char *lf = strstr(request, "\n\n");

	if (crlf != NULL && (lf == NULL || crlf < lf))
		return crlf + 4;
	return lf != NULL ? lf + 2 : NULL;
}

static ssize_t respond(int code, const char *reason, const char *type, const char *body,
		       size_t body_length, char **response)
{
	char head[256];
	int head_length = snprintf(head, sizeof(head),
				   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
				   "Connection: close\r\n\r\n",
				   code, reason, type, body_length);
	char *buffer;

	if (head_length < 0 || (size_t)head_length >= sizeof(head))
		return -EINVAL;
	buffer = malloc((size_t)head_length + body_length);
	if (buffer == NULL)
		return -ENOMEM;
	memcpy(buffer, head, (size_t)head_length);
	memcpy(buffer + head_length, body, body_length);
	*response = buffer;
	return (ssize_t)((size_t)head_length + body_length);
}

static ssize_t respond_text(int code, const char *reason, const char *text, char **response)
{
	return respond(code, reason, "text/plain; charset=utf-8", text, strlen(text), response);
}

/* Whether a header line named `name` (case-insensitive) contains `needle`, within the head. */
static bool header_contains(const char *head, const char *end, const char *name,
			    const char *needle)
{
	size_t name_length = strlen(name);

	for (const char *line = strchr(head, '\n'); line != NULL && line < end;
	     line = strchr(line + 1, '\n')) {
		const char *start = line + 1;
		const char *stop = strchr(start, '\n');
		if (stop == NULL || stop > end)
			stop = end;
		if (strncasecmp(start, name, name_length) != 0 || start[name_length] != ':')
			continue;
		if (memmem(start, (size_t)(stop - start), needle, strlen(needle)) != NULL)
			return true;
	}
	return false;
}

/* Split "METHOD TARGET HTTP/1.x" off the head; false when it is not that shape. */
static bool request_line(const char *head, char *method, size_t method_size, char *path,
			 size_t path_size)
{
	const char *space = strchr(head, ' ');
	const char *second = space != NULL ? strchr(space + 1, ' ') : NULL;
	const char *line_end = strpbrk(head, "\r\n");
	size_t method_length, path_length;

	if (space == NULL || second == NULL || line_end == NULL || second > line_end)
		return false;
	if (strncmp(second + 1, "HTTP/1.", 7) != 0 || line_end - (second + 1) != 8)
		return false;
	method_length = (size_t)(space - head);
	path_length = strcspn(space + 1, " ?");
	if (method_length == 0 || method_length >= method_size || path_length == 0 ||
	    path_length >= path_size)
		return false;
	memcpy(method, head, method_length);
	method[method_length] = '\0';
	memcpy(path, space + 1, path_length);
	path[path_length] = '\0';
	return true;
}

ssize_t serve_http_answer(struct serve_state *state, const char *request, size_t length,
			  char **response)
{
	const char *end = head_end(request);
	char method[16];
	char path[256];
	bool openmetrics;
	char *body = NULL;
	size_t body_length = 0;
	ssize_t result;

	if (strlen(request) != length) /* a NUL byte: not HTTP */
		return respond_text(400, "Bad Request", "bad request\n", response);
	if (end == NULL)
		return -EAGAIN;
	if (!request_line(request, method, sizeof(method), path, sizeof(path)))
		return respond_text(400, "Bad Request", "bad request\n", response);
	if (strcmp(method, "GET") != 0 || strcmp(path, "/metrics") != 0)
		return respond_text(404, "Not Found", "only GET /metrics is served here\n",
				    response);
	openmetrics = header_contains(request, end, "Accept", "application/openmetrics-text");
	serve_refresh(state);
	if (serve_render(state, openmetrics, &body, &body_length) < 0)
		return respond_text(500, "Internal Server Error", "out of memory\n", response);
	result = respond(200, "OK", openmetrics ? OPENMETRICS_TYPE : PROMETHEUS_TYPE, body,
			 body_length, response);
	free(body);
	return result;
}
