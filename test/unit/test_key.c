/* SPDX-License-Identifier: Apache-2.0 */
/* test_key.c - key <-> object name mapping, key order, List packing and the top-K collector. */
#include <errno.h>
#include <setjmp.h>
#include <string.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "common/key.h"

static struct nkv_key K(const char *s, unsigned n)
{
	struct nkv_key k = {.len = (uint8_t)n};
	memcpy(k.b, s, n);
	return k;
}

static void oid_mapping(void **state)
{
	(void)state;
	char oid[NKV_OID_MAX];
	struct nkv_key k = K("gpukey01", 8), back;
	assert_int_equal(nkv_key_to_oid(&k, oid), 16);
	assert_string_equal(oid, "6770756b65793031");
	assert_int_equal(nkv_oid_to_key(oid, 16, &back), 0);
	assert_int_equal(nkv_key_cmp(&k, &back), 0);

	struct nkv_key bin = K("\x00\xff\x10\x00", 4);
	nkv_key_to_oid(&bin, oid);
	assert_string_equal(oid, "00ff1000");
	assert_int_equal(nkv_oid_to_key("00ff1000", 8, &back), 0);
	assert_int_equal(back.len, 4);
	assert_memory_equal(back.b, bin.b, 4);

	struct nkv_key full;
	full.len = 16;
	for (int i = 0; i < 16; i++)
		full.b[i] = (uint8_t)(0xf0 + i);
	assert_int_equal(nkv_key_to_oid(&full, oid), 32);
	assert_int_equal(nkv_oid_to_key(oid, 32, &back), 0);
	assert_memory_equal(back.b, full.b, 16);
}

static void oid_rejects_foreign_names(void **state)
{
	(void)state;
	struct nkv_key k;
	assert_int_equal(nkv_oid_to_key("", 0, &k), -EINVAL);
	assert_int_equal(nkv_oid_to_key("a", 1, &k), -EINVAL);         /* odd */
	assert_int_equal(nkv_oid_to_key("6G", 2, &k), -EINVAL);        /* not hex */
	assert_int_equal(nkv_oid_to_key("6A", 2, &k), -EINVAL);        /* uppercase: another object */
	assert_int_equal(nkv_oid_to_key("rbd_directory", 13, &k), -EINVAL);
	assert_int_equal(nkv_oid_to_key("000000000000000000000000000000000000", 34, &k), -EINVAL); /* > 16 B */
}

static void key_order(void **state)
{
	(void)state;
	struct nkv_key a = K("a", 1), a0 = K("a\0", 2), ab = K("ab", 2), b = K("b", 1), z = K("\0", 1);
	assert_true(nkv_key_cmp(&a, &a0) < 0);  /* shorter first */
	assert_true(nkv_key_cmp(&a0, &ab) < 0);
	assert_true(nkv_key_cmp(&ab, &b) < 0);  /* memcmp over the common prefix */
	assert_true(nkv_key_cmp(&z, &a) < 0);
	assert_true(nkv_key_cmp(&b, &b) == 0);
	struct nkv_key hi = K("\xff", 1);
	assert_true(nkv_key_cmp(&b, &hi) < 0);  /* unsigned bytes */
}

static void list_pack_odd_and_full_keys(void **state)
{
	(void)state;
	struct nkv_key keys[3] = {K("abc", 3), K("0123456789abcdef", 16), K("x", 1)};
	uint8_t buf[64];
	uint32_t nrk;
	memset(buf, 0xee, sizeof(buf));
	uint32_t n = nkv_list_pack(buf, sizeof(buf), keys, 3, &nrk);
	assert_int_equal(nrk, 3);
	assert_int_equal(n, 4 + 8 + 20 + 4);
	assert_int_equal(nkv_get32(buf), 3);
	assert_int_equal(nkv_get16(buf + 4), 3);
	assert_memory_equal(buf + 6, "abc", 3);
	assert_int_equal(buf[9], 0); /* pad */
	assert_int_equal(buf[10], 0);
	assert_int_equal(buf[11], 0);
	assert_int_equal(nkv_get16(buf + 12), 16);
	assert_memory_equal(buf + 14, "0123456789abcdef", 16);
	assert_int_equal(buf[30], 0);
	assert_int_equal(buf[31], 0);
	assert_int_equal(nkv_get16(buf + 32), 1);
	assert_int_equal(buf[34], 'x');
	assert_int_equal(buf[35], 0);
	assert_int_equal(buf[36], 0xee); /* nothing written past the last entry */
}

static void list_pack_stops_at_first_misfit(void **state)
{
	(void)state;
	struct nkv_key keys[2] = {K("abc", 3), K("0123456789abcdef", 16)};
	uint8_t buf[31];
	uint32_t nrk;
	assert_int_equal(nkv_list_pack(buf, sizeof(buf), keys, 2, &nrk), 12);
	assert_int_equal(nrk, 1);
	/* too small for even one entry */
	assert_int_equal(nkv_list_pack(buf, 7, keys, 2, &nrk), 4);
	assert_int_equal(nrk, 0);
	assert_int_equal(nkv_get32(buf), 0);
	assert_int_equal(nkv_list_pack(buf, 4, keys, 2, &nrk), 4);
	assert_int_equal(nrk, 0);
	assert_int_equal(nkv_list_capacity(3), 0);
	assert_int_equal(nkv_list_capacity(4), 0);
	assert_int_equal(nkv_list_capacity(8), 1);
}

static void keyheap_keeps_k_smallest_from_start(void **state)
{
	(void)state;
	struct nkv_keyheap h;
	struct nkv_key start = K("m", 1);
	assert_int_equal(nkv_keyheap_init(&h, &start, 5), 0);
	srand(7);
	struct nkv_key all[300];
	for (int i = 0; i < 300; i++) {
		all[i].len = (uint8_t)(1 + rand() % 16);
		for (int j = 0; j < all[i].len; j++)
			all[i].b[j] = (uint8_t)rand();
		nkv_keyheap_offer(&h, &all[i]);
	}
	nkv_keyheap_offer(&h, &start); /* inclusive start */
	nkv_keyheap_sort(&h);
	assert_int_equal(h.n, 5);
	assert_int_equal(nkv_key_cmp(&h.v[0], &start), 0);
	for (unsigned i = 1; i < h.n; i++)
		assert_true(nkv_key_cmp(&h.v[i - 1], &h.v[i]) < 0);
	/* no offered key >= start lies below the largest kept one without being kept */
	for (int i = 0; i < 300; i++) {
		if (nkv_key_cmp(&all[i], &start) < 0 || nkv_key_cmp(&all[i], &h.v[4]) > 0)
			continue;
		int found = 0;
		for (unsigned j = 0; j < h.n; j++)
			found |= nkv_key_cmp(&all[i], &h.v[j]) == 0;
		assert_true(found);
	}
	nkv_keyheap_fini(&h);
	assert_int_equal(nkv_keyheap_init(&h, &start, 0), 0);
	nkv_keyheap_offer(&h, &start);
	assert_int_equal(h.n, 0);
	nkv_keyheap_fini(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(oid_mapping),
		cmocka_unit_test(oid_rejects_foreign_names),
		cmocka_unit_test(key_order),
		cmocka_unit_test(list_pack_odd_and_full_keys),
		cmocka_unit_test(list_pack_stops_at_first_misfit),
		cmocka_unit_test(keyheap_keeps_k_smallest_from_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
