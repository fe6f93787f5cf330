/* SPDX-License-Identifier: Apache-2.0 */
/* test_status.c - the errno -> NVMe status table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/status.h"

static void check(int rc, unsigned sct, unsigned sc, int dnr)
{
	nkv_status st = nkv_errno_to_status(rc);
	assert_int_equal(nkv_status_sct(st), sct);
	assert_int_equal(nkv_status_sc(st), sc);
	assert_int_equal(nkv_status_dnr(st), dnr);
}

static void zero_is_success(void **state)
{
	(void)state;
	assert_int_equal(nkv_errno_to_status(0), 0);
	assert_int_equal(nkv_errno_to_status(4096), 0); /* a positive byte count is success too */
	assert_string_equal(nkv_status_str(0), "Success");
}

static void kv_codes(void **state)
{
	(void)state;
	check(-ENOENT, 0, 0x87, 1);
	check(-EEXIST, 0, 0x89, 1);
	check(-EFBIG, 0, 0x85, 1);
	check(-E2BIG, 0, 0x85, 1);
	check(-ENOSPC, 0, 0x81, 1);
	check(-EDQUOT, 0, 0x81, 1);
	check(-EIO, 0, 0x88, 1);
	check(-EROFS, 0, 0x20, 1);
	check(-EINVAL, 0, 0x02, 1);
}

static void transient_codes_clear_dnr(void **state)
{
	(void)state;
	check(-ETIMEDOUT, 0, 0x82, 0);
	check(-ENOTCONN, 0, 0x82, 0);
	check(-ECONNREFUSED, 0, 0x82, 0);
	check(-ESHUTDOWN, 0, 0x82, 0);
	check(-EAGAIN, 0, 0x82, 0);
	check(-ENOMEM, 0, 0x06, 0);
}

static void unknown_errno_is_internal_error(void **state)
{
	(void)state;
	check(-EPROTO, 0, 0x06, 1);
	check(-12345, 0, 0x06, 1);
	assert_string_equal(nkv_status_str(nkv_errno_to_status(-ENOENT)), "KV Key Does Not Exist");
	assert_string_equal(nkv_status_str(nkv_status_make(7, 0xee, 0)), "Unknown Status");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zero_is_success),
		cmocka_unit_test(kv_codes),
		cmocka_unit_test(transient_codes_clear_dnr),
		cmocka_unit_test(unknown_errno_is_internal_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
