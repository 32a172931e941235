/*
 * tools/mon/serve_http.h — serve's HTTP side on libmicrohttpd: the request handler (http.c)
 * and what it needs to know. Only serve.c and http.c include libmicrohttpd's header.
 */
#ifndef HAECER_TOOLS_MON_SERVE_HTTP_H
#define HAECER_TOOLS_MON_SERVE_HTTP_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "tools/mon/serve.h"

struct serve_http {
	struct serve_state *state;
	char *user;                /* basic auth's user and password; NULL: no authentication */
	char *password;
};

/* libmicrohttpd's access handler (MHD_AccessHandlerCallback); context is a struct serve_http. */
enum MHD_Result serve_http_answer(void *context, struct MHD_Connection *connection,
				  const char *url, const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **request_state);

#endif
