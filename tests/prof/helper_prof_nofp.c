/*
 * helper_prof_work built without frame pointers (prof/module.mk): for the CFI unwinding test,
 * whose call chains frame pointers cannot give.
 */
#include "tests/prof/helper_prof_work.c"
