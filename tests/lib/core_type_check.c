/* tests/lib/core_type_check.c — see core_type_check.h. */
#include "tests/lib/core_type_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/haecer.h"

void assert_core_type_counts(struct haecer_context *ctx, unsigned cpu, bool e_core)
{
	const char *table = e_core ? "adl_grt" : "adl_glc";
	struct haecer_counter *counter = NULL;
	struct haecer_counter_info info;
	int error = haecer_counter_open_named(ctx, (int)cpu, "INST_RETIRED:ANY_P", 0, 0, &counter);

	if (error < 0) {
		print_message("cpu %u: %s\n", cpu, haecer_error_detail());
		assert_non_null(strstr(haecer_error_detail(), table));
	} else {
		assert_int_equal(haecer_counter_info(counter, &info), 0);
		assert_non_null(strstr(info.name, table));
		haecer_counter_free(counter);
	}
	assert_int_equal(haecer_counter_open_arch(ctx, (int)cpu, HAECER_ARCH_INSTRUCTIONS_RETIRED,
						  0, 0, &counter),
			 0);
	assert_int_equal(haecer_counter_info(counter, &info), 0);
	assert_string_equal(info.core_type, e_core ? "E-core" : "P-core");
	haecer_counter_free(counter);
}
