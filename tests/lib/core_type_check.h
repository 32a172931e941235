/*
 * tests/lib/core_type_check.h — what the hybrid-core tests (a stand-in Alder Lake and the
 * simulated one) assert of one CPU through the library: a named model-specific event is asked
 * of the core type's own libpfm4 table, and an architectural count says which core type it
 * came from.
 */
#ifndef HAECER_TESTS_LIB_CORE_TYPE_CHECK_H
#define HAECER_TESTS_LIB_CORE_TYPE_CHECK_H

#include <stdbool.h>

struct haecer_context;

/* On `cpu` (an E-core when e_core): INST_RETIRED:ANY_P opens from adl_grt (E) or adl_glc (P),
 * or its refusal names that table (the installed libpfm4 may lack it); an instructions-retired
 * counter reports "E-core" or "P-core". cmocka asserts. */
void assert_core_type_counts(struct haecer_context *ctx, unsigned cpu, bool e_core);

#endif
