/* SPDX-License-Identifier: Apache-2.0 */
/* test_spec.c - SQE/CQE encoders and decoders (KV, Store TTL, Retrieve Range, vendor Exec; the device
 * builders of nkv_dev.h), status words, List entry sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nkv/nkv_dev.h"
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

/* Vendor Exec: key and KL as for Store, CDW10 = size, CDW11 bits 11:8 = inline count, CDW12-13 = bytes. */
static void exec_sqe_layout(void **state)
{
	(void)state;
	struct nkv_sqe s;
	const uint8_t key[16] = {'o', 'b', 'j', '0', '1', '2', '3', '4', 8, 9, 10, 11, 12, 13, 14, 15};
	const uint8_t in[9] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 0x99};
	memset(&s, 0xff, sizeof(s));
	nkv_sqe_exec(&s, 0x82, 3, key, 16, 0x100000, in, 5);
	const uint8_t *b = (const uint8_t *)&s;
	assert_int_equal(b[0], 0x82);
	assert_int_equal(b[1], 0); /* no fuse, PRP: the SQE was zeroed first */
	assert_int_equal(nkv_get32(b + 4), 3);
	assert_memory_equal(b + 8, key, 8);
	assert_memory_equal(b + 56, key + 8, 8);
	assert_int_equal(nkv_get32(b + 40), 0x100000); /* CDW10: host buffer size (10b) */
	assert_int_equal(b[44], 16);                  /* CDW11 7:0 KL */
	assert_int_equal(b[45], 5);                   /* CDW11 11:8 inline count, 15:12 reserved (0) */
	assert_int_equal(b[46], 0);
	assert_int_equal(b[47], 0);
	assert_int_equal(nkv_sqe_exec_inline_len(&s), 5);
	assert_int_equal(nkv_sqe_klen(&s), 16);
	assert_memory_equal(b + 48, in, 5); /* CDW12-13, in byte order */
	for (int i = 53; i < 56; i++)
		assert_int_equal(b[i], 0); /* unused inline bytes are zero */
	for (int i = 24; i < 40; i++)
		assert_int_equal(b[i], 0); /* MPTR/DPTR are the caller's */

	/* All 8 inline bytes; more are clamped to 8, never past CDW13. */
	nkv_sqe_exec(&s, 0x80, 1, key, 3, 0, in, 9);
	assert_int_equal(nkv_sqe_exec_inline_len(&s), 8);
	assert_memory_equal(b + 48, in, 8);
	assert_int_equal(nkv_get32(b + 44), 8u << 8 | 3u);
	assert_int_equal(nkv_get32(b + 40), 0);
	assert_memory_equal(b + 56, (const uint8_t[8]){0}, 8); /* key bytes past KL 3..: zero */

	/* 01b: no inline bytes, CDW10 = input size. */
	nkv_sqe_exec(&s, 0x81, 1, key, 8, 4096, NULL, 0);
	assert_int_equal(nkv_sqe_exec_inline_len(&s), 0);
	assert_int_equal(nkv_get32(b + 44), 8);
	assert_int_equal(nkv_get32(b + 40), 4096);
	assert_int_equal(nkv_get32(b + 48) | nkv_get32(b + 52), 0);
}

static void exec_directions(void **state)
{
	(void)state;
	/* Direction = opcode bits 1:0, as for every NVMe opcode. */
	assert_int_equal(nkv_opc_xfer(0x80), NKV_XFER_NONE);
	assert_int_equal(nkv_opc_xfer(0x81), NKV_XFER_H2C);
	assert_int_equal(nkv_opc_xfer(0x82), NKV_XFER_C2H);
	assert_int_equal(nkv_opc_xfer(0x83), NKV_XFER_BIDI);
	assert_int_equal(nkv_opc_xfer(0xfe), NKV_XFER_C2H);
	assert_int_equal(nkv_opc_xfer(NKV_KV_STORE), NKV_XFER_H2C);
	assert_int_equal(nkv_opc_xfer(NKV_KV_RETRIEVE), NKV_XFER_C2H);
	assert_int_equal(NKV_EXEC_OPC_FIRST, 0x80);
	assert_int_equal(nkv_status_make(NKV_SCT_GENERIC, NKV_SC_EXEC_UNAVAILABLE, 1) & 0x7ff, 0x0c0);
	assert_int_equal(nkv_status_make(NKV_SCT_GENERIC, NKV_SC_EXEC_FAILED, 1) & 0x7ff, 0x0c1);
}

/* Retrieve Range (F2h): Retrieve's layout, options byte 0 (reserved), the offset in CDW12 (low) and CDW13 (high). */
static void retrieve_range_sqe(void **state)
{
	(void)state;
	struct nkv_sqe s;
	const uint8_t key[16] = {'t', 'e', 'n', 's', 'o', 'r', '0', '1', 0, 9, 10, 11, 12, 13, 14, 0xff};
	memset(&s, 0xff, sizeof(s));
	nkv_sqe_retrieve_range(&s, 7, key, 16, 0x100000, 0x0123456789abcdefull);
	const uint8_t *b = (const uint8_t *)&s;
	assert_int_equal(NKV_VS_RETRIEVE_RANGE, 0xf2);
	assert_int_equal(NKV_VS_OPC_FIRST, 0xf0);
	assert_int_equal(nkv_opc_xfer(NKV_VS_RETRIEVE_RANGE), NKV_XFER_C2H); /* 10b: controller to host */
	assert_int_equal(b[0], 0xf2);
	assert_int_equal(b[1], 0); /* no fuse, PRP: the SQE was zeroed first */
	assert_int_equal(nkv_get16(b + 2), 0); /* CID: the caller's */
	assert_int_equal(nkv_get32(b + 4), 7);
	assert_memory_equal(b + 8, key, 8);
	assert_memory_equal(b + 56, key + 8, 8);
	assert_int_equal(nkv_get32(b + 40), 0x100000); /* CDW10: host buffer size */
	assert_int_equal(nkv_get32(b + 44), 16);       /* CDW11: KL 16, bits 15:8 reserved (0) */
	assert_int_equal(nkv_get32(b + 48), 0x89abcdefu); /* CDW12: offset bits 31:0 */
	assert_int_equal(nkv_get32(b + 52), 0x01234567u); /* CDW13: offset bits 63:32 */
	for (int i = 16; i < 40; i++)
		assert_int_equal(b[i], 0); /* MPTR/DPTR are the caller's */
	assert_int_equal(nkv_sqe_klen(&s), 16);
	assert_int_equal(nkv_sqe_kv_opts(&s), 0);

	/* A short key: bytes past KL zero; offset 0 and the top offset. */
	nkv_sqe_retrieve_range(&s, 1, key, 3, 0, 0);
	assert_int_equal(nkv_get32(b + 44), 3);
	assert_int_equal(nkv_get32(b + 48) | nkv_get32(b + 52) | nkv_get32(b + 40), 0);
	assert_memory_equal(b + 8, key, 3);
	assert_memory_equal(b + 56, (const uint8_t[8]){0}, 8);
	nkv_sqe_retrieve_range(&s, 1, key, 1, 1, UINT64_MAX);
	assert_int_equal(nkv_get32(b + 48), 0xffffffffu);
	assert_int_equal(nkv_get32(b + 52), 0xffffffffu);

	/* Bytes moved: min(HBS, size - offset), none at or past the end. */
	assert_int_equal(nkv_range_xfer(1000, 0, 100), 100);
	assert_int_equal(nkv_range_xfer(1000, 950, 100), 50);
	assert_int_equal(nkv_range_xfer(1000, 900, 100), 100);
	assert_int_equal(nkv_range_xfer(1000, 1000, 100), 0);
	assert_int_equal(nkv_range_xfer(1000, 1001, 100), 0);
	assert_int_equal(nkv_range_xfer(1000, UINT64_MAX, 100), 0);
	assert_int_equal(nkv_range_xfer(0, 0, 100), 0);
	assert_int_equal(nkv_range_xfer(1000, 10, 0), 0);
	assert_int_equal(nkv_range_xfer(0xffffffffull, 1, 0xffffffffu), 0xfffffffeu);
}

/* Store TTL (F1h): Store's layout (key, KL, options, CDW10 = value size) plus CDW12 = TTL, CDW13 = flags. */
static void store_ttl_sqe(void **state)
{
	(void)state;
	struct nkv_sqe s, ref;
	const uint8_t key[16] = {'b', 'l', 'o', 'c', 'k', '0', '1', 0, 0xfe, 9, 10, 11, 12, 13, 14, 15};
	assert_int_equal(NKV_VS_STORE_TTL, 0xf1);
	assert_true(NKV_VS_STORE_TTL >= NKV_VS_OPC_FIRST);
	assert_int_equal(nkv_opc_xfer(NKV_VS_STORE_TTL), NKV_XFER_H2C); /* 01b: host to controller, as Store */
	assert_int_equal(NKV_TTL_DEFAULT, 0);
	assert_int_equal(NKV_TTL_NONE, 0xffffffffu);
	assert_int_equal(NKV_TTL_PIN, 1);

	memset(&s, 0xff, sizeof(s));
	nkv_sqe_store_ttl(&s, 9, key, 16, 0x12345678, NKV_STORE_MUST_EXIST | NKV_STORE_NO_COMPRESS, 3600, NKV_TTL_PIN);
	const uint8_t *b = (const uint8_t *)&s;
	assert_int_equal(b[0], 0xf1);
	assert_int_equal(b[1], 0);             /* no fuse, PRP: the SQE was zeroed first */
	assert_int_equal(nkv_get16(b + 2), 0); /* CID: the caller's */
	assert_int_equal(nkv_get32(b + 4), 9);
	assert_memory_equal(b + 8, key, 8);
	assert_memory_equal(b + 56, key + 8, 8);
	for (int i = 16; i < 40; i++)
		assert_int_equal(b[i], 0); /* MPTR/DPTR are the caller's */
	assert_int_equal(nkv_get32(b + 40), 0x12345678); /* CDW10: value size */
	assert_int_equal(b[44], 16);                      /* CDW11 7:0: KL */
	assert_int_equal(b[45], NKV_STORE_MUST_EXIST | NKV_STORE_NO_COMPRESS); /* 15:8: Store options */
	assert_int_equal(nkv_get16(b + 46), 0);
	assert_int_equal(nkv_get32(b + 48), 3600);  /* CDW12: TTL seconds */
	assert_int_equal(nkv_get32(b + 52), 1);     /* CDW13: bit 0 pin */
	assert_int_equal(nkv_sqe_klen(&s), 16);
	assert_int_equal(nkv_sqe_kv_opts(&s), NKV_STORE_MUST_EXIST | NKV_STORE_NO_COMPRESS);

	/* The block hash: SQE bytes 23:16 little-endian, CDW13 bit 1 added to the pin bit */
	struct nkv_sqe h = s;
	nkv_sqe_set_block_hash(&h, 0x0102030405060708ull);
	static const uint8_t hle[8] = {8, 7, 6, 5, 4, 3, 2, 1};
	assert_int_equal(NKV_TTL_HASH, 2);
	assert_memory_equal((const uint8_t *)&h + 16, hle, 8);
	assert_int_equal(nkv_get32((const uint8_t *)&h + 52), NKV_TTL_PIN | NKV_TTL_HASH);
	assert_memory_equal((const uint8_t *)&h + 24, b + 24, 28); /* DPTR .. CDW12 unchanged */

	/* Everything but the opcode, CDW12 and CDW13 is a Store's */
	nkv_sqe_kv(&ref, NKV_KV_STORE, 9, key, 16, 0x12345678, NKV_STORE_MUST_EXIST | NKV_STORE_NO_COMPRESS);
	assert_memory_equal(b + 1, (const uint8_t *)&ref + 1, 47);
	assert_memory_equal(b + 56, (const uint8_t *)&ref + 56, 8);

	/* Default TTL, no pin: CDW12 = CDW13 = 0; never expires: all ones; a short key zero-fills */
	nkv_sqe_store_ttl(&s, 1, key, 3, 0, 0, NKV_TTL_DEFAULT, 0);
	assert_int_equal(b[0], 0xf1);
	assert_int_equal(nkv_get32(b + 40) | nkv_get32(b + 48) | nkv_get32(b + 52), 0);
	assert_int_equal(nkv_get32(b + 44), 3);
	assert_memory_equal(b + 8, key, 3);
	assert_memory_equal(b + 11, (const uint8_t[5]){0}, 5);
	assert_memory_equal(b + 56, (const uint8_t[8]){0}, 8);
	nkv_sqe_store_ttl(&s, 1, key, 1, 1, 0, NKV_TTL_NONE, 0);
	assert_int_equal(nkv_get32(b + 48), 0xffffffffu);
	assert_int_equal(nkv_get32(b + 52), 0);
}

/* The device builders of nkv_dev.h: the host builders' fields plus PRP1/PRP2 in DPTR. */
static void dev_store_ttl_sqe(void **state)
{
	(void)state;
	struct nkv_sqe s, ref;
	const uint8_t key[5] = {'g', 'p', 'u', '-', '1'};
	memset(&s, 0xee, sizeof(s));
	nkv_dev_sqe_store_ttl(&s, 4, key, 5, 65536, NKV_STORE_MUST_NOT_EXIST, 2, NKV_TTL_PIN, 0x1000200030004000ull,
			      0x5000600070008000ull);
	nkv_sqe_store_ttl(&ref, 4, key, 5, 65536, NKV_STORE_MUST_NOT_EXIST, 2, NKV_TTL_PIN);
	const uint8_t *b = (const uint8_t *)&s;
	assert_int_equal(b[0], 0xf1);
	assert_int_equal(nkv_get64(b + 24), 0x1000200030004000ull); /* PRP1 */
	assert_int_equal(nkv_get64(b + 32), 0x5000600070008000ull); /* PRP2 */
	assert_memory_equal(b, (const uint8_t *)&ref, 24);           /* up to DPTR: the host builder's */
	assert_memory_equal(b + 40, (const uint8_t *)&ref + 40, 24); /* CDW10-15 */
	assert_int_equal(nkv_get32(b + 48), 2);
	assert_int_equal(nkv_get32(b + 52), NKV_TTL_PIN);
	/* and the plain Store builder still sends 01h with CDW12/13 clear */
	nkv_dev_sqe_kv(&s, NKV_KV_STORE, 4, key, 5, 65536, 1, 2);
	assert_int_equal(b[0], 0x01);
	assert_int_equal(nkv_get32(b + 48) | nkv_get32(b + 52), 0);
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
		cmocka_unit_test(exec_sqe_layout),  cmocka_unit_test(exec_directions),
		cmocka_unit_test(retrieve_range_sqe), cmocka_unit_test(store_ttl_sqe),
		cmocka_unit_test(dev_store_ttl_sqe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
