/* test_spec.c - SQE/CQE encoders and decoders, status words, List entry sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nkv/nkv_spec.h"

static void kv_sqe_layout(void **state)
{
	(void)state;
	struct nkv_sqe s;
	const uint8_t key[16] = {0x67, 0x70, 0x75, 0x6b, 0x65, 0x79, 0x30, 0x31, 8, 9, 10, 11, 12, 13, 14, 15};
	nkv_sqe_kv(&s, NKV_KV_STORE, 7, key, 16, 0x12345678, NKV_STORE_MUST_NOT_EXIST);
	const uint8_t *b = (const uint8_t *)&s;
	assert_int_equal(b[0], 0x01);
	assert_int_equal(nkv_get32(b + 4), 7);
	assert_memory_equal(b + 8, key, 8);       /* key bytes 0..7 at SQE 8..15 */
	assert_memory_equal(b + 56, key + 8, 8);  /* key bytes 8..15 at SQE 56..63 */
	assert_int_equal(nkv_get32(b + 40), 0x12345678);
	assert_int_equal(b[44], 16);   /* KL */
	assert_int_equal(b[45], 0x02); /* options: bit 9 of CDW11 */
	assert_int_equal(b[46], 0);
	assert_int_equal(nkv_sqe_klen(&s), 16);
	assert_int_equal(nkv_sqe_kv_opts(&s), NKV_STORE_MUST_NOT_EXIST);
	uint8_t out[16];
	nkv_sqe_get_key(&s, out);
	assert_memory_equal(out, key, 16);
}

static void short_key_zero_fills(void **state)
{
	(void)state;
	struct nkv_sqe s;
	memset(&s, 0xff, sizeof(s));
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, 1, (const uint8_t *)"abc", 3, 4096, 0);
	const uint8_t *b = (const uint8_t *)&s;
	for (int i = 11; i < 16; i++)
		assert_int_equal(b[i], 0);
	for (int i = 56; i < 64; i++)
		assert_int_equal(b[i], 0);
	assert_int_equal(b[1], 0); /* no fuse, PRP */
	assert_int_equal(nkv_get32(&s.cdw11), 3);
}

static void le_accessors(void **state)
{
	(void)state;
	uint8_t b[8];
	nkv_put64(b, 0x0102030405060708ull);
	assert_int_equal(b[0], 0x08);
	assert_int_equal(b[7], 0x01);
	assert_true(nkv_get64(b) == 0x0102030405060708ull);
	nkv_put16(b, 0xabcd);
	assert_int_equal(b[0], 0xcd);
	assert_int_equal(nkv_get16(b), 0xabcd);
}

static void status_word(void **state)
{
	(void)state;
	nkv_status st = nkv_status_make(NKV_SCT_CMD, NKV_SC_AER_LIMIT_EXCEEDED, 1);
	assert_int_equal(nkv_status_sc(st), 0x05);
	assert_int_equal(nkv_status_sct(st), 1);
	assert_true(nkv_status_dnr(st));
	assert_int_equal(nkv_status_code(st), 0x105);
	/* CQE word: phase in bit 0, SC at 8:1, SCT at 11:9, DNR at 15 */
	uint16_t w = (uint16_t)(st << 1) | 1;
	assert_int_equal(w, 0x8000 | (1 << 9) | (0x05 << 1) | 1);
	st = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 0);
	assert_false(nkv_status_dnr(st));
	assert_int_equal(st, 0x82);
}

static void list_entry_sizes(void **state)
{
	(void)state;
	assert_int_equal(nkv_list_entry_size(1), 4);
	assert_int_equal(nkv_list_entry_size(2), 4);
	assert_int_equal(nkv_list_entry_size(3), 8);
	assert_int_equal(nkv_list_entry_size(5), 8);
	assert_int_equal(nkv_list_entry_size(6), 8);
	assert_int_equal(nkv_list_entry_size(7), 12);
	assert_int_equal(nkv_list_entry_size(16), 20);
}

static void identify_layouts(void **state)
{
	(void)state;
	/* Offsets hosts read, restated from docs/nvme-kv-wire.md A.7, B.9 (the header asserts them at compile time). */
	assert_int_equal(offsetof(struct nkv_id_ctrlr, kas), 320);
	assert_int_equal(offsetof(struct nkv_id_ctrlr, ioccsz), 1792);
	assert_int_equal(offsetof(struct nkv_id_ns_kv, kvf) + offsetof(struct nkv_kv_format, kvvml), 76);
	assert_int_equal(offsetof(struct nkv_id_ns_indep_head, nstat), 14);
	assert_int_equal(sizeof(struct nkv_log_effects), 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kv_sqe_layout),   cmocka_unit_test(short_key_zero_fills),
		cmocka_unit_test(le_accessors),    cmocka_unit_test(status_word),
		cmocka_unit_test(list_entry_sizes), cmocka_unit_test(identify_layouts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
