/*
 * tests/lib/install_stage.h — what the tests of an installed haecer share: scripts/install.sh of
 * the build under test into a staging directory (DESTDIR), and shell commands run with that
 * directory at hand.
 */
#ifndef HAECER_TESTS_LIB_INSTALL_STAGE_H
#define HAECER_TESTS_LIB_INSTALL_STAGE_H

/* sh -c COMMAND with $STAGE (the staging directory), $BUILD and $SOURCE (harness_build_dir,
 * harness_source_dir) in its environment. Returns the exit status; stdout in *out (malloc'ed;
 * out may be NULL); the command and its stderr are printed when it fails. */
int stage_shell(const char *stage, const char *command, char **out);

/* DESTDIR=stage scripts/install.sh BUILD stage+prefix: 0, or the script's exit status. */
int stage_install(const char *stage, const char *prefix);

#endif
