/* test_client.c - libnkv pieces that need no target: the List walker and the status tables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nkv/nkv.h"

/* Build List data: NRK, then {KL, key, pad to 4}. @return bytes used. */
static uint32_t pack(uint8_t *buf, uint32_t nrk, const char *const *keys, unsigned n)
{
	uint32_t off = 4;
	nkv_put32(buf, nrk);
	for (unsigned i = 0; i < n; i++) {
		unsigned kl = (unsigned)strlen(keys[i]);
		nkv_put16(buf + off, (uint16_t)kl);
		memcpy(buf + off + 2, keys[i], kl);
		off += nkv_list_entry_size(kl);
	}
	return off;
}

static void list_walk(void **state)
{
	(void)state;
	static const char *const keys[] = {"a", "bb", "ccc", "dddd", "0123456789abcdef"};
	uint8_t buf[256];
	memset(buf, 0xee, sizeof(buf)); /* garbage past the entries must not be read as entries */
	uint32_t len = pack(buf, 5, keys, 5);
	assert_int_equal(len, 4 + 4 + 4 + 8 + 8 + 20);

	uint64_t pos = 0;
	uint8_t k[16];
	unsigned kl;
	for (unsigned i = 0; i < 5; i++) {
		assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), 1);
		assert_int_equal(kl, strlen(keys[i]));
		assert_memory_equal(k, keys[i], kl);
	}
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), 0);
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), 0);
}

static void list_empty_and_malformed(void **state)
{
	(void)state;
	uint8_t buf[64] = {0};
	uint64_t pos = 0;
	uint8_t k[16];
	unsigned kl;

	assert_int_equal(nkv_list_next(buf, 4, &pos, k, &kl), 0);       /* NRK 0 */
	assert_int_equal(nkv_list_next(buf, 3, &pos, k, &kl), -EPROTO); /* shorter than the header */

	static const char *const one[] = {"key1"};
	uint32_t len = pack(buf, 2, one, 1); /* claims 2 keys, holds 1 */
	pos = 0;
	assert_int_equal(nkv_list_next(buf, len, &pos, k, &kl), 1);
	assert_int_equal(nkv_list_next(buf, len, &pos, k, &kl), -EPROTO);

	pos = 0;
	nkv_put32(buf, 1);
	nkv_put16(buf + 4, 17); /* KL > 16 */
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), -EPROTO);
	pos = 0;
	nkv_put16(buf + 4, 0); /* KL 0 */
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), -EPROTO);
	pos = 0;
	nkv_put16(buf + 4, 16); /* entry runs past len */
	assert_int_equal(nkv_list_next(buf, 12, &pos, k, &kl), -EPROTO);
}

static void status_errno(void **state)
{
	(void)state;
	assert_int_equal(nkv_status_errno(0), 0);
	assert_int_equal(nkv_status_errno(0x4000), 0); /* DNR alone is still success */
	assert_int_equal(nkv_status_errno(0x087), -ENOENT);
	assert_int_equal(nkv_status_errno(0x4087), -ENOENT);
	assert_int_equal(nkv_status_errno(0x187), -ENOENT);
	assert_int_equal(nkv_status_errno(0x089), -EEXIST);
	assert_int_equal(nkv_status_errno(0x189), -EEXIST);
	assert_int_equal(nkv_status_errno(0x085), -EFBIG);
	assert_int_equal(nkv_status_errno(0x086), -EINVAL);
	assert_int_equal(nkv_status_errno(0x081), -ENOSPC);
	assert_int_equal(nkv_status_errno(0x082), -EAGAIN);
	assert_int_equal(nkv_status_errno(0x088), -EIO);
	assert_int_equal(nkv_status_errno(0x002), -EINVAL);
	assert_int_equal(nkv_status_errno(0x00b), -ENXIO);
	assert_int_equal(nkv_status_errno(0x020), -EROFS);
	assert_int_equal(nkv_status_errno(0x004), -EIO);
	assert_int_equal(nkv_status_errno(0x184), -EACCES);
	assert_int_equal(nkv_status_errno(NKV_STATUS_HOST_PATH), -ENOTCONN);
	assert_int_equal(nkv_status_errno(0x3ff), -ENOTCONN); /* unknown path status */
	assert_int_equal(nkv_status_errno(0x0ff), -EIO);      /* unknown generic status */
}

static void status_string(void **state)
{
	(void)state;
	assert_string_equal(nkv_status_string(0x087), "Key Does Not Exist (SCT 0h SC 87h)");
	assert_string_equal(nkv_status_string(0x4187), "Key Does Not Exist (SCT 1h SC 87h)");
	assert_string_equal(nkv_status_string(0x085), "Invalid Value Size (SCT 0h SC 85h)");
	assert_string_equal(nkv_status_string(0x0fe), "Unknown Status (SCT 0h SC FEh)");
	assert_non_null(strstr(nkv_status_string(NKV_STATUS_HOST_PATH), "Host Pathing Error"));
}

static void kv_args(void **state)
{
	(void)state;
	/* bad keys are refused before anything is queued (a NULL queue pair is never touched) */
	assert_int_equal(nkv_store_async(NULL, 1, "k", 0, "v", 1, 0, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_retrieve_async(NULL, 1, "0123456789abcdefX", 17, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_delete_async(NULL, 1, NULL, 3, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_submit(NULL, NULL, NULL, 0, NULL, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(list_walk),
		cmocka_unit_test(list_empty_and_malformed),
		cmocka_unit_test(status_errno),
		cmocka_unit_test(status_string),
		cmocka_unit_test(kv_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
