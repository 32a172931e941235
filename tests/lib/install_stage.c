/*
 * tests/lib/install_stage.c — install the build under test into a staging directory and run
 * commands beside it (install_stage.h).
 */
#include "tests/lib/install_stage.h"

#include <stdio.h>
#include <stdlib.h>

#include "harness/msrd_harness.h"

int stage_shell(const char *stage, const char *command, char **out)
{
	const char *argv[] = { "/bin/sh", "-c", command, NULL };
	char *err = NULL;
	int status;

	setenv("STAGE", stage, 1);
	setenv("BUILD", harness_build_dir(), 1);
	setenv("SOURCE", harness_source_dir(), 1);
	status = harness_run(argv, out, &err);
	if (status != 0)
		fprintf(stderr, "$ %s\nexit %d: %s\n", command, status, err ? err : "");
	free(err);
	return status;
}

int stage_install(const char *stage, const char *prefix)
{
	char command[512];
	char *out = NULL;
	int status;

	snprintf(command, sizeof(command),
		 "DESTDIR=\"$STAGE\" \"$SOURCE/scripts/install.sh\" \"$BUILD\" \"$STAGE%s\"",
		 prefix);
	status = stage_shell(stage, command, &out);
	free(out);
	return status;
}
