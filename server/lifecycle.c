/*
 * server/lifecycle.c — what changes the running server as a whole: loading and reloading the
 * policy (SIGHUP), and the start of a shutdown (SIGTERM). Kept out of msrd.c (main) so that
 * everything the loop calls is in libmsrd.a, where tests and fuzz targets link it.
 */
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int msrd_load_policy(const struct msrd_config *config, struct policy **out)
{
	struct policy_load_options options = {
		.allow_insecure_permissions = config->insecure_policy_permissions,
	};
	struct policy_error error;
	char text[600];
	int status = policy_load(config->policy_path, &options, out, &error);

	if (status < 0) {
		policy_error_format(&error, text, sizeof(text));
		log_error("policy: %s", text);
		if (strcmp(config->policy_path, MSRD_DEFAULT_POLICY) == 0)
			log_error("policy: %s is the default policy path; --policy FILE names "
				  "another (an installed example: PREFIX/share/haecer/policies/"
				  "default.yaml)", MSRD_DEFAULT_POLICY);
		return status;
	}
	for (size_t i = 0; i < policy_warning_count(*out); i++)
		log_warnx("policy: %s", policy_warning(*out, i));
	return 0;
}

void msrd_reload_policy(struct msrd *server)
{
	struct policy *fresh = NULL;
	struct policy_grant **grants = NULL;
	size_t count = 0;
	size_t index = 0;
	int status;

	if (msrd_load_policy(server->config, &fresh) < 0) {
		log_error("SIGHUP: the new policy is invalid; keeping the current one");
		return;
	}
	for (struct client *client = server->clients; client != NULL; client = client->next)
		count++;
	grants = calloc(count > 0 ? count : 1, sizeof(*grants));
	if (grants == NULL) {
		status = -ENOMEM;
		goto fail;
	}
	/* Every grant is resolved before anything changes: a failure keeps the old policy whole.
	 * Closing clients too, since a request of theirs may still be finishing. */
	for (struct client *client = server->clients; client != NULL; client = client->next) {
		struct policy *current = server->policy;
		server->policy = fresh;
		status = msrd_resolve_grant(server, client, &grants[index]);
		server->policy = current;
		if (status < 0)
			goto fail;
		index++;
	}
	index = 0;
	for (struct client *client = server->clients; client != NULL; client = client->next) {
		client_replace_grant(client, grants[index++]);
		client->grant_generation = server->policy_generation + 1;
	}
	free(grants);
	policy_free(server->policy);
	server->policy = fresh;
	server->policy_generation++;
	slots_policy_reloaded(server);
	schedule_policy_reloaded(server);
	energy_pages_policy_reloaded(server);
	/* Last: whoever waits for this line (tests, an administrator) may rely on every page
	 * being marked STALE by then, not only on the grants (a fine page read after the line
	 * was seen once, under valgrind). */
	log_notice("SIGHUP: policy reloaded from %s (%zu clients re-resolved)",
		   server->config->policy_path, count);
	return;
fail:
	for (size_t i = 0; i < index; i++)
		policy_grant_free(grants[i]);
	free(grants);
	policy_free(fresh);
	log_warn_errno(status, "SIGHUP: resolving the new policy; keeping the current one");
}

void msrd_begin_shutdown(struct msrd *server, const char *why)
{
	struct client *next;

	if (server->stopping)
		return;
	server->stopping = true;
	log_notice("%s: stopping (%u clients connected)", why, server->client_count);
	if (server->accept_armed) {
		struct io_uring_sqe *sqe = loop_sqe(&server->loop);
		io_uring_prep_cancel64(sqe, loop_user_data(server, TAG_ACCEPT, 0), 0);
		io_uring_sqe_set_data64(sqe, loop_user_data(NULL, TAG_IGNORE, 0));
	}
	if (server->listen_fd >= 0) {
		close(server->listen_fd);
		server->listen_fd = -1;
		unlink(server->config->socket_path);
	}
	for (struct client *client = server->clients; client != NULL; client = next) {
		next = client->next;
		client_close(client, "server shutting down");
	}
	schedule_stop_all(server, why);
}

