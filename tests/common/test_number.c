/*
 * common/number.h, the one rule every tool, haecer-prof and its agent read numbers by (issue 30,
 * item 5): a digit first, the whole text, C's notation for base 0, a maximum; a blank, a sign,
 * a trailing character or an overflow is refused. tests/tools/test_number_rule checks the tools'
 * real command lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/number.h"

static void test_accepted(void **state)
{
	uint64_t value;
	uint32_t small;

	(void)state;
	assert_true(number_parse("12", 10, 100, &value));
	assert_int_equal(value, 12);
	assert_true(number_parse("0x10", 0, UINT64_MAX, &value));
	assert_int_equal(value, 16);
	assert_true(number_parse("010", 0, UINT64_MAX, &value));
	assert_int_equal(value, 8);
	assert_true(number_parse("ff", 16, 0xffff, &value));
	assert_int_equal(value, 255);
	assert_true(number_parse("18446744073709551615", 10, UINT64_MAX, &value));
	assert_true(value == UINT64_MAX);
	assert_true(number_parse_u32("4294967295", &small));
	assert_true(small == UINT32_MAX);
}

static void test_refused(void **state)
{
	static const char *const refused[] = { " 12", "+12", "-1", "12 ", "12x", "", "0x", "1e3" };
	uint64_t value = 7;
	uint16_t small;

	(void)state;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_false(number_parse(refused[i], 0, UINT64_MAX, &value));
	assert_false(number_parse(NULL, 0, UINT64_MAX, &value));
	assert_false(number_parse("18446744073709551616", 10, UINT64_MAX, &value));
	assert_false(number_parse("101", 10, 100, &value));
	assert_false(number_parse_u16("65536", &small));
	assert_int_equal(value, 7); /* untouched by a refusal */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
