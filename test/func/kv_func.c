/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv_func.c - the KV command set end to end through the loop transport: every command and option,
 * every status code, value sizes 0 B..64 MiB, binary keys, truncated Retrieve, Retrieve Range (F2h),
 * large values read in ranges (cut-through),
 * List paging against a sorted reference, concurrent Stores of one key, and 10,000 mixed operations
 * (Retrieve Range among them) against a model, and values larger than the namespace's current max
 * value (another NSID's, an earlier limit's, one written with the rados CLI).
 * Usage: kv_func mem|rados
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/key.h"
#include "harness.h"

#define NS_MAIN 1
#define NS_RO 2    /* same RADOS namespace as NS_MAIN, read-only */
#define NS_SMALL 3 /* max value 4096 */
#define NS_LIST 4  /* its own RADOS namespace: only the List test's keys */
#define NS_MODEL 5
#define NS_RACE 6
#define NS_VIEW 7  /* same RADOS namespace as NS_MAIN, read-only, max value 1 MiB */
#define NS_LOWER 8 /* its max value is lowered below a stored value (nkv_ns_set_max_value) */

#define G SC(NKV_SCT_GENERIC, 0)

static struct h_qp *Q;

static unsigned put(uint32_t nsid, const char *key, const void *val, uint32_t len, unsigned opts)
{
	return h_kv(Q, NKV_KV_STORE, nsid, key, (unsigned)strlen(key), len, opts, (void *)val, len, NULL, NULL);
}

static unsigned get(uint32_t nsid, const char *key, void *buf, uint32_t hbs, uint32_t *size, uint32_t *xfer)
{
	return h_kv(Q, NKV_KV_RETRIEVE, nsid, key, (unsigned)strlen(key), hbs, 0, buf, hbs, size, xfer);
}

static unsigned simple(uint8_t opc, uint32_t nsid, const char *key)
{
	return h_kv(Q, opc, nsid, key, (unsigned)strlen(key), 0, 0, NULL, 0, NULL, NULL);
}

static void test_basic(void)
{
	char buf[64];
	uint32_t size = 0, xfer = 0;

	CHECK(put(NS_MAIN, "alpha", "hello world", 11, 0) == G, "store");
	CHECK(get(NS_MAIN, "alpha", buf, sizeof(buf), &size, &xfer) == G, "retrieve");
	CHECK(size == 11 && xfer == 11 && memcmp(buf, "hello world", 11) == 0, "size %u xfer %u", size, xfer);
	CHECK(simple(NKV_KV_EXIST, NS_MAIN, "alpha") == G, "exist");
	CHECK(put(NS_MAIN, "alpha", "bye", 3, 0) == G, "overwrite");
	CHECK(get(NS_MAIN, "alpha", buf, sizeof(buf), &size, &xfer) == G && size == 3 && xfer == 3 &&
		      memcmp(buf, "bye", 3) == 0, "overwritten value, size %u", size);
	CHECK(simple(NKV_KV_DELETE, NS_MAIN, "alpha") == G, "delete");
	unsigned st = simple(NKV_KV_EXIST, NS_MAIN, "alpha");
	CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "exist after delete: %03x", st);
	CHECK(get(NS_MAIN, "alpha", buf, sizeof(buf), &size, &xfer) == SC(0, NKV_SC_KV_KEY_NOT_EXIST) && xfer == 0,
	      "retrieve absent");
	CHECK(simple(NKV_KV_DELETE, NS_MAIN, "alpha") == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "delete absent");
	CHECK(simple(NKV_KV_FLUSH, NS_MAIN, "") == G, "flush");

	/* the same key through the read-only namespace over the same RADOS namespace */
	CHECK(put(NS_MAIN, "shared", "v", 1, 0) == G, "store shared");
	CHECK(get(NS_RO, "shared", buf, sizeof(buf), &size, NULL) == G && size == 1, "ro retrieve");
	CHECK(put(NS_RO, "shared", "w", 1, 0) == SC(0, NKV_SC_NS_WRITE_PROTECTED), "ro store");
	CHECK(simple(NKV_KV_DELETE, NS_RO, "shared") == SC(0, NKV_SC_NS_WRITE_PROTECTED), "ro delete");
	CHECK(simple(NKV_KV_EXIST, NS_RO, "shared") == G, "ro exist");
}

static void test_delete_config(struct h_qp *admin)
{
	struct nkv_sqe s = {.opc = NKV_ADM_SET_FEATURES};
	uint32_t dw0 = 9;

	nkv_put32(&s.cdw10, NKV_FEAT_KV_CONFIG);
	nkv_put32(&s.cdw11, 0);
	CHECK(h_admin(admin, &s, NULL, 0, NULL) == G, "set feature 20h = 0");
	CHECK(simple(NKV_KV_DELETE, NS_MAIN, "never-stored") == G, "delete absent with EDNEK clear");
	s.opc = NKV_ADM_GET_FEATURES;
	CHECK(h_admin(admin, &s, NULL, 0, &dw0) == G && dw0 == 0, "get feature 20h: %u", dw0);
	s.opc = NKV_ADM_SET_FEATURES;
	nkv_put32(&s.cdw11, NKV_KV_CONFIG_EDNEK);
	CHECK(h_admin(admin, &s, NULL, 0, NULL) == G, "set feature 20h = 1");
	CHECK(simple(NKV_KV_DELETE, NS_MAIN, "never-stored") == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "EDNEK set");
}

static void test_keys(void)
{
	uint8_t k[17], buf[32];
	uint32_t size, xfer;

	memset(k, 0, sizeof(k));
	for (unsigned opc = 0; opc < 256; opc++) {
		if (opc != NKV_KV_STORE && opc != NKV_KV_RETRIEVE && opc != NKV_KV_DELETE && opc != NKV_KV_EXIST)
			continue;
		unsigned st0 = h_kv(Q, (uint8_t)opc, NS_MAIN, k, 0, 1, 0, buf, 1, NULL, NULL);
		unsigned st17 = h_kv(Q, (uint8_t)opc, NS_MAIN, k, 17, 1, 0, buf, 1, NULL, NULL);
		CHECK(st0 == SC(0, NKV_SC_KV_INVALID_KEY_SIZE), "opc %02x KL 0: %03x", opc, st0);
		CHECK(st17 == SC(0, NKV_SC_KV_INVALID_KEY_SIZE), "opc %02x KL 17: %03x", opc, st17);
	}
	{
		uint8_t lb[64];
		unsigned st = h_kv(Q, NKV_KV_LIST, NS_MAIN, k, 17, 64, 0, lb, 64, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_KV_INVALID_KEY_SIZE), "list KL 17: %03x", st);
	}
	/* binary keys with 00h are distinct from their prefixes, and 16-byte keys work */
	uint8_t a[2] = {'a', 0}, z[16];
	for (int i = 0; i < 16; i++)
		z[i] = (uint8_t)(i * 17);
	z[3] = 0;
	CHECK(h_kv(Q, NKV_KV_STORE, NS_MAIN, a, 1, 1, 0, "1", 1, NULL, NULL) == G, "store 'a'");
	CHECK(h_kv(Q, NKV_KV_STORE, NS_MAIN, a, 2, 1, 0, "2", 1, NULL, NULL) == G, "store 'a\\0'");
	CHECK(h_kv(Q, NKV_KV_STORE, NS_MAIN, z, 16, 2, 0, "16", 2, NULL, NULL) == G, "store 16-byte key");
	CHECK(h_kv(Q, NKV_KV_RETRIEVE, NS_MAIN, a, 1, 8, 0, buf, 8, &size, &xfer) == G && xfer == 1 && buf[0] == '1',
	      "retrieve 'a'");
	CHECK(h_kv(Q, NKV_KV_RETRIEVE, NS_MAIN, a, 2, 8, 0, buf, 8, &size, &xfer) == G && xfer == 1 && buf[0] == '2',
	      "retrieve 'a\\0'");
	CHECK(h_kv(Q, NKV_KV_RETRIEVE, NS_MAIN, z, 16, 8, 0, buf, 8, &size, &xfer) == G && size == 2 &&
		      memcmp(buf, "16", 2) == 0, "retrieve 16-byte key");
	/* bytes past KL are don't-care: garbage there must not change the key */
	struct nkv_sqe s;
	struct nkv_cqe c;
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, NS_MAIN, a, 1, 8, 0);
	nkv_put32(&s.cdw14, 0xdeadbeef);
	s.cdw2 |= 0xffffff00u; /* bytes 1..3 of the key field, past KL 1 */
	CHECK(h_exec(Q, &s, buf, 8, &c, &xfer) == 0 && h_status(&c) == G && buf[0] == '1',
	      "don't-care key bytes ignored");
}

static void test_options(void)
{
	char buf[8];
	uint32_t size;

	simple(NKV_KV_DELETE, NS_MAIN, "opt");
	CHECK(put(NS_MAIN, "opt", "x", 1, NKV_STORE_MUST_EXIST) == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "update absent");
	CHECK(simple(NKV_KV_EXIST, NS_MAIN, "opt") == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "update absent stored nothing");
	CHECK(put(NS_MAIN, "opt", "a", 1, NKV_STORE_MUST_NOT_EXIST) == G, "create absent");
	CHECK(put(NS_MAIN, "opt", "b", 1, NKV_STORE_MUST_NOT_EXIST) == SC(0, NKV_SC_KV_KEY_EXISTS), "create present");
	CHECK(get(NS_MAIN, "opt", buf, 8, &size, NULL) == G && buf[0] == 'a', "create-present left value");
	CHECK(put(NS_MAIN, "opt", "c", 1, NKV_STORE_MUST_EXIST) == G, "update present");
	CHECK(get(NS_MAIN, "opt", buf, 8, &size, NULL) == G && buf[0] == 'c', "updated value");
	unsigned st = put(NS_MAIN, "opt", "d", 1, NKV_STORE_MUST_EXIST | NKV_STORE_MUST_NOT_EXIST);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD), "both options: %03x", st);
	CHECK(put(NS_MAIN, "opt", "e", 1, NKV_STORE_NO_COMPRESS) == G, "no-compress option accepted");
	CHECK(h_kv(Q, NKV_KV_RETRIEVE, NS_MAIN, "opt", 3, 8, NKV_RETRIEVE_RAW, buf, 8, &size, NULL) == G &&
		      buf[0] == 'e', "raw retrieve (values are never compressed)");
}

static void test_sizes(void)
{
	static const uint32_t sizes[] = {0, 1, 4096, 1u << 20, 64u << 20};
	uint8_t *val = malloc((64u << 20) + 1), *out = malloc((64u << 20) + 1);
	uint32_t size, xfer;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char key[16];
		snprintf(key, sizeof(key), "size-%u", sizes[i]);
		h_fill(val, sizes[i], sizes[i] + 1);
		unsigned st = put(NS_MAIN, key, val, sizes[i], 0);
		CHECK(st == G, "store %u bytes: %03x", sizes[i], st);
		memset(out, 0xee, sizes[i] + 1);
		st = get(NS_MAIN, key, out, sizes[i] + 1, &size, &xfer);
		CHECK(st == G && size == sizes[i] && xfer == sizes[i] && h_verify(out, sizes[i], sizes[i] + 1),
		      "retrieve %u bytes: st %03x size %u xfer %u", sizes[i], st, size, xfer);
		CHECK(simple(NKV_KV_EXIST, NS_MAIN, key) == G, "exist %u", sizes[i]);
	}
	unsigned st = put(NS_MAIN, "too-big", val, (64u << 20) + 1, 0);
	CHECK(st == SC(0, NKV_SC_KV_INVALID_VALUE_SIZE), "64 MiB + 1: %03x", st);
	CHECK(put(NS_SMALL, "small", val, 4096, 0) == G, "small ns: 4096");
	CHECK(put(NS_SMALL, "small", val, 4097, 0) == SC(0, NKV_SC_KV_INVALID_VALUE_SIZE), "small ns: 4097");

	/* truncated Retrieve: DW0 has the full size, only HBS bytes move */
	h_fill(val, 1000, 77);
	CHECK(put(NS_MAIN, "trunc", val, 1000, 0) == G, "store 1000");
	memset(out, 0xee, 200);
	st = get(NS_MAIN, "trunc", out, 100, &size, &xfer);
	CHECK(st == G && size == 1000 && xfer == 100 && memcmp(out, val, 100) == 0 && out[100] == 0xee,
	      "truncated: st %03x size %u xfer %u", st, size, xfer);
	st = h_kv(Q, NKV_KV_RETRIEVE, NS_MAIN, "trunc", 5, 0, 0, NULL, 0, &size, &xfer);
	CHECK(st == G && size == 1000 && xfer == 0, "size probe with HBS 0: st %03x size %u", st, size);
	/* a buffer smaller than the command says */
	if (h_is_shm()) {
		/* PRPs carry no length, so the controller cannot see it: libnkv refuses before sending */
		struct nkv_sqe s;
		struct nkv_cqe c;
		nkv_sqe_kv(&s, NKV_KV_RETRIEVE, NS_MAIN, (const uint8_t *)"trunc", 5, 1000, 0);
		CHECK(h_exec(Q, &s, out, 999, &c, NULL) == -EINVAL, "short buffer retrieve refused by the PRP driver");
		nkv_sqe_kv(&s, NKV_KV_STORE, NS_MAIN, (const uint8_t *)"trunc", 5, 1000, 0);
		CHECK(h_exec(Q, &s, val, 10, &c, NULL) == -EINVAL, "short buffer store refused by the PRP driver");
	} else {
		st = h_kv(Q, NKV_KV_RETRIEVE, NS_MAIN, "trunc", 5, 1000, 0, out, 999, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_DATA_SGL_LENGTH_INVALID), "short buffer retrieve: %03x", st);
		st = h_kv(Q, NKV_KV_STORE, NS_MAIN, "trunc", 5, 1000, 0, val, 10, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_DATA_SGL_LENGTH_INVALID), "short buffer store: %03x", st);
	}
	CHECK(get(NS_MAIN, "trunc", out, 1000, &size, NULL) == G && memcmp(out, val, 1000) == 0,
	      "rejected store left the value");
	free(val);
	free(out);
}

/* ---- Retrieve Range (vendor F2h) ----------------------------------------------------------------- */

/* One Retrieve Range: HBS @hbs from byte @off, into @buf of @len bytes. @return the status. */
static unsigned rget(uint32_t nsid, const void *key, unsigned klen, uint64_t off, uint32_t hbs, void *buf,
		     uint32_t len, uint32_t *dw0, uint32_t *xfer)
{
	struct nkv_sqe s;
	struct nkv_cqe c;
	uint32_t x = 0;

	nkv_sqe_retrieve_range(&s, nsid, key, klen > 16 ? 16 : klen, hbs, off);
	if (klen > 16) /* a key length the encoder refuses: put it in CDW11 by hand */
		nkv_put32(&s.cdw11, (nkv_get32(&s.cdw11) & ~0xffu) | klen);
	if (h_exec(Q, &s, buf, len, &c, &x) < 0)
		return 0xffff;
	if (dw0)
		*dw0 = nkv_get32(&c.dw0);
	if (xfer)
		*xfer = x;
	return h_status(&c);
}

/*
 * Check one range of @key (value @val of @vlen bytes): status G, DW0 = @vlen, the expected bytes at
 * the start of @out and the canary byte EEh right after them (nothing written past what moved).
 */
static void range_case(const char *what, const char *key, const uint8_t *val, uint32_t vlen, uint64_t off,
		       uint32_t hbs, uint8_t *out)
{
	uint32_t dw0 = 0xdeadbeef, xfer = 0xdeadbeef;
	uint32_t want = nkv_range_xfer(vlen, off, hbs);

	memset(out, 0xee, (size_t)hbs + 1);
	unsigned st = rget(NS_MAIN, key, (unsigned)strlen(key), off, hbs, out, hbs, &dw0, &xfer);
	CHECK(st == G && dw0 == vlen && xfer == want && (want == 0 || memcmp(out, val + off, want) == 0) &&
		      out[want] == 0xee,
	      "range %s (offset %llu, HBS %u): st %03x DW0 %u xfer %u (want %u)", what, (unsigned long long)off, hbs,
	      st, dw0, xfer, want);
}

static void test_range(struct h_qp *admin)
{
	const uint32_t big = 4u << 20, mib = 1u << 20;
	uint8_t *val = malloc(big), *out = malloc(mib + 1);
	uint32_t dw0 = 0, xfer = 0;
	unsigned st;

	h_fill(val, 1000, 4711);
	CHECK(put(NS_MAIN, "range", val, 1000, 0) == G, "store 1000 bytes for ranges");
	range_case("at 0, shorter than the value", "range", val, 1000, 0, 100, out);
	range_case("at 0, the whole value", "range", val, 1000, 0, 1000, out);
	range_case("at 0, a larger buffer", "range", val, 1000, 0, 4096, out);
	range_case("in the middle", "range", val, 1000, 300, 200, out);
	range_case("at an odd offset", "range", val, 1000, 1, 3, out);
	range_case("straddling the end", "range", val, 1000, 900, 200, out);
	range_case("the last byte", "range", val, 1000, 999, 16, out);
	range_case("exactly at the end", "range", val, 1000, 1000, 100, out);
	range_case("past the end", "range", val, 1000, 1001, 100, out);
	range_case("far past the end (4 GiB)", "range", val, 1000, 1ull << 32, 100, out);
	range_case("far past the end (2^63 + 5)", "range", val, 1000, (1ull << 63) + 5, 100, out);
	range_case("at the top offset (2^64 - 1)", "range", val, 1000, UINT64_MAX, 100, out);
	st = rget(NS_MAIN, "range", 5, 500, 0, NULL, 0, &dw0, &xfer);
	CHECK(st == G && dw0 == 1000 && xfer == 0, "range with HBS 0 probes the size: st %03x DW0 %u", st, dw0);
	/* the read-only namespace over the same RADOS namespace reads ranges too */
	st = rget(NS_RO, "range", 5, 10, 10, out, 10, &dw0, &xfer);
	CHECK(st == G && dw0 == 1000 && xfer == 10 && memcmp(out, val + 10, 10) == 0, "range on the read-only ns: %03x",
	      st);

	/* an empty value: success, DW0 0, nothing moves */
	CHECK(put(NS_MAIN, "range-empty", "", 0, 0) == G, "store an empty value");
	range_case("of an empty value", "range-empty", val, 0, 0, 64, out);

	/* a 4 MiB value read at unaligned offsets into a 1 MiB buffer */
	h_fill(val, big, 4242);
	CHECK(put(NS_MAIN, "range-4m", val, big, 0) == G, "store 4 MiB");
	range_case("4 MiB value at an unaligned offset", "range-4m", val, big, 1234567, mib, out);
	range_case("4 MiB value, the last MiB + 1", "range-4m", val, big, big - mib - 1, mib, out);
	range_case("4 MiB value, straddling the end", "range-4m", val, big, big - 4099, mib, out);
	range_case("4 MiB value at offset 0", "range-4m", val, big, 0, mib, out);

	/* errors: nothing moves, the canary stays */
	memset(out, 0xee, 64);
	st = rget(NS_MAIN, "range-absent", 12, 0, 64, out, 64, &dw0, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST) && xfer == 0 && out[0] == 0xee, "range of an absent key: %03x", st);
	st = rget(NS_MAIN, "range-absent", 12, 5000, 64, out, 64, &dw0, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "range past the end of an absent key: %03x", st);
	uint8_t k[17] = {0};
	st = rget(NS_MAIN, k, 0, 0, 8, out, 8, NULL, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_INVALID_KEY_SIZE) && xfer == 0, "range KL 0: %03x", st);
	st = rget(NS_MAIN, k, 17, 0, 8, out, 8, NULL, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_INVALID_KEY_SIZE) && xfer == 0, "range KL 17: %03x", st);
	for (unsigned bit = 8; bit < 16; bit++) { /* CDW11 bits 15:8 are reserved */
		struct nkv_sqe s;
		struct nkv_cqe c;
		nkv_sqe_retrieve_range(&s, NS_MAIN, (const uint8_t *)"range", 5, 8, 0);
		nkv_put32(&s.cdw11, nkv_get32(&s.cdw11) | 1u << bit);
		memset(out, 0xee, 8);
		xfer = 0;
		int rc = h_exec(Q, &s, out, 8, &c, &xfer);
		CHECK(rc == 0 && h_status(&c) == SC(0, NKV_SC_INVALID_FIELD) && h_dnr(&c) && xfer == 0 && out[0] == 0xee,
		      "range with CDW11 bit %u set: rc %d %03x", bit, rc, rc == 0 ? h_status(&c) : 0);
	}
	st = rget(99, "range", 5, 0, 8, out, 8, NULL, NULL);
	CHECK(st == SC(0, NKV_SC_INVALID_NS), "range on an inactive NSID: %03x", st);
	if (h_is_shm()) { /* PRPs carry no length: libnkv refuses a buffer shorter than HBS */
		struct nkv_sqe s;
		struct nkv_cqe c;
		nkv_sqe_retrieve_range(&s, NS_MAIN, (const uint8_t *)"range", 5, 100, 10);
		CHECK(h_exec(Q, &s, out, 99, &c, NULL) == -EINVAL, "range into a short buffer refused by the PRP driver");
	} else {
		st = rget(NS_MAIN, "range", 5, 10, 100, out, 99, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_DATA_SGL_LENGTH_INVALID), "range into a short buffer: %03x", st);
	}
	/* the other built-in vendor opcodes are not assigned: 01h, like any unknown opcode */
	static const uint8_t unassigned[] = {0xf0, 0xf3, 0xf6, 0xfa, 0xfe};
	for (size_t i = 0; i < sizeof(unassigned); i++) {
		bool c2h = nkv_opc_xfer(unassigned[i]) == NKV_XFER_C2H; /* the others without data */
		st = h_kv(Q, unassigned[i], NS_MAIN, "range", 5, c2h ? 8 : 0, 0, c2h ? out : NULL, c2h ? 8 : 0, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_INVALID_OPCODE), "built-in vendor opcode %02xh (unassigned): %03x", unassigned[i],
		      st);
	}
	/* Store TTL (F1h) on a namespace without a cache: Invalid Field (nothing would expire it) */
	st = h_kv(Q, NKV_VS_STORE_TTL, NS_MAIN, "ttl", 3, 4, 0, "abcd", 4, NULL, NULL);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD), "Store TTL on a namespace without a cache: %03x", st);
	/* Commands Supported and Effects (CSI 01h) lists F2h (read-only) and F1h (changes contents) */
	{
		static uint8_t log[4096];
		struct nkv_sqe s = {.opc = NKV_ADM_GET_LOG_PAGE};
		nkv_put32(&s.cdw10, NKV_LID_CMD_EFFECTS | ((4096 / 4 - 1) << 16));
		nkv_put32(&s.cdw14, (uint32_t)NKV_CSI_KV << 24);
		st = h_admin(admin, &s, log, sizeof(log), NULL);
		const struct nkv_log_effects *e = (const struct nkv_log_effects *)log;
		unsigned others = 0;
		for (unsigned o = NKV_VS_OPC_FIRST; o < 256; o++)
			others += o != NKV_VS_RETRIEVE_RANGE && o != NKV_VS_STORE_TTL && nkv_get32(&e->iocs[o]) != 0;
		CHECK(st == G && nkv_get32(&e->iocs[NKV_VS_RETRIEVE_RANGE]) == NKV_EFFECTS_CSUPP &&
			      nkv_get32(&e->iocs[NKV_VS_STORE_TTL]) == (NKV_EFFECTS_CSUPP | NKV_EFFECTS_LBCC) && others == 0,
		      "effects log: F2h CSUPP (%#x), F1h CSUPP|LBCC (%#x), no other F0h-FFh (%u)",
		      nkv_get32(&e->iocs[NKV_VS_RETRIEVE_RANGE]), nkv_get32(&e->iocs[NKV_VS_STORE_TTL]), others);
	}
	free(val);
	free(out);
}

static void test_generic(void)
{
	uint8_t buf[8];
	struct nkv_sqe s;
	struct nkv_cqe c;
	static const uint8_t bad_opc[] = {0x03, 0x04, 0x05, 0x08, 0x11, 0x15, 0x7f, 0x80, 0x81, 0xff};

	for (size_t i = 0; i < sizeof(bad_opc); i++) {
		if (bad_opc[i] == NKV_ADM_FABRICS && h_is_tcp())
			continue; /* over fabrics 7Fh is a fabrics command on every queue */
		unsigned st = h_kv(Q, bad_opc[i], NS_MAIN, "k", 1, 0, 0, NULL, 0, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_INVALID_OPCODE), "opcode %02x: %03x", bad_opc[i], st);
	}
	static const uint32_t bad_ns[] = {0, 99, NKV_MAX_NSID, NKV_MAX_NSID + 1, 0xffffffffu};
	for (size_t i = 0; i < sizeof(bad_ns) / sizeof(bad_ns[0]); i++) {
		unsigned st = h_kv(Q, NKV_KV_EXIST, bad_ns[i], "k", 1, 0, 0, NULL, 0, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_INVALID_NS), "nsid %u: %03x", bad_ns[i], st);
	}
	if (!h_is_loop())
		return; /* libnkv sets the flags byte itself (TCP: SGL; shm: PRP, FUSE 0); tcp_proto sends
			 * fused commands raw */
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, NS_MAIN, (const uint8_t *)"k", 1, 8, 0);
	s.flags = 1; /* fused, first command */
	CHECK(h_exec(Q, &s, buf, 8, &c, NULL) == 0 && h_status(&c) == SC(0, NKV_SC_INVALID_FIELD) &&
		      h_dnr(&c), "fused: %03x", h_status(&c));
	CHECK(nkv_get16(&c.sqid) == 10 && (nkv_get16(&c.status) & 1) == 1, "CQE sqid and phase");
}

static void test_list(void)
{
	enum { N = 1000 };
	struct nkv_key *ref = calloc(N, sizeof(*ref));
	uint64_t rs = 12345;
	uint8_t buf[512];

	for (int i = 0; i < N; i++) {
		int dup;
		do {
			ref[i].len = (uint8_t)(1 + h_rand(&rs) % 16);
			for (int j = 0; j < ref[i].len; j++)
				ref[i].b[j] = (uint8_t)(h_rand(&rs) % 4 == 0 ? 0 : h_rand(&rs)); /* many 00h */
			dup = 0;
			for (int j = 0; j < i && !dup; j++)
				dup = nkv_key_cmp(&ref[i], &ref[j]) == 0;
		} while (dup);
		unsigned st = h_kv(Q, NKV_KV_STORE, NS_LIST, ref[i].b, ref[i].len, 1, 0, "v", 1, NULL, NULL);
		if (st != G)
			CHECK(st == G, "store list key %d: %03x", i, st);
	}
	/* sorted reference */
	for (int i = 1; i < N; i++)
		for (int j = i; j > 0 && nkv_key_cmp(&ref[j - 1], &ref[j]) > 0; j--) {
			struct nkv_key t = ref[j];
			ref[j] = ref[j - 1];
			ref[j - 1] = t;
		}
	/* page through with a 512-byte buffer, resubmitting the last key (inclusive start) */
	struct nkv_key start = {0};
	int got = 0, pages = 0, order_ok = 1, format_ok = 1;
	for (;;) {
		uint32_t xfer = 0;
		unsigned st = h_kv(Q, NKV_KV_LIST, NS_LIST, start.b, start.len, sizeof(buf), 0, buf, sizeof(buf), NULL, &xfer);
		if (st != G) {
			CHECK(st == G, "list page %d: %03x", pages, st);
			break;
		}
		pages++;
		uint32_t nrk = nkv_get32(buf), off = 4;
		int first = 1, fresh = 0;
		for (uint32_t e = 0; e < nrk; e++) {
			struct nkv_key k = {0};
			k.len = (uint8_t)nkv_get16(buf + off);
			memcpy(k.b, buf + off + 2, k.len);
			for (uint32_t p = off + 2 + k.len; p < off + nkv_list_entry_size(k.len); p++)
				format_ok &= buf[p] == 0;
			off += nkv_list_entry_size(k.len);
			if (first && pages > 1 && nkv_key_cmp(&k, &start) == 0) {
				first = 0;
				continue; /* the start key, seen at the end of the last page */
			}
			first = 0;
			if (got >= N || nkv_key_cmp(&k, &ref[got]) != 0)
				order_ok = 0;
			got++;
			fresh++;
			start = k;
		}
		format_ok &= off == xfer && off <= sizeof(buf);
		/* the page is full: the next entry (any key up to 20 bytes) would not have fitted */
		if (nrk && got < N)
			format_ok &= sizeof(buf) - off < 20;
		if (fresh == 0)
			break;
	}
	CHECK(got == N && order_ok, "list paging: got %d of %d, order %s", got, N, order_ok ? "ok" : "wrong");
	CHECK(format_ok, "list entry format (count, 4-byte padding, zero pad, full pages)");
	CHECK(pages > 10, "paging took %d pages", pages);
	/* start key between stored keys; KL 0 from the beginning; tiny buffers */
	uint32_t xfer;
	CHECK(h_kv(Q, NKV_KV_LIST, NS_LIST, NULL, 0, 64, 0, buf, 64, NULL, &xfer) == G && nkv_get32(buf) >= 1 &&
		      nkv_get16(buf + 4) == ref[0].len && memcmp(buf + 6, ref[0].b, ref[0].len) == 0,
	      "list from KL 0 starts at the smallest key");
	struct nkv_key mid = ref[500];
	mid.b[mid.len] = 0; /* ref[500] + 00h: the smallest key above ref[500] */
	mid.len++;
	if (ref[500].len < 16) {
		CHECK(h_kv(Q, NKV_KV_LIST, NS_LIST, mid.b, mid.len, 64, 0, buf, 64, NULL, NULL) == G &&
			      nkv_get32(buf) >= 1 && nkv_get16(buf + 4) == ref[501].len &&
			      memcmp(buf + 6, ref[501].b, ref[501].len) == 0,
		      "list from a key between two stored keys");
	}
	CHECK(h_kv(Q, NKV_KV_LIST, NS_LIST, NULL, 0, 4, 0, buf, 4, NULL, &xfer) == G && nkv_get32(buf) == 0 && xfer == 4,
	      "list with room for the count only");
	CHECK(h_kv(Q, NKV_KV_LIST, NS_LIST, NULL, 0, 3, 0, buf, 3, NULL, NULL) == SC(0, NKV_SC_INVALID_FIELD),
	      "list buffer under 4 bytes");
	struct nkv_key past = {.len = 16};
	memset(past.b, 0xff, 16);
	CHECK(h_kv(Q, NKV_KV_LIST, NS_LIST, past.b, 16, 64, 0, buf, 64, NULL, &xfer) == G && nkv_get32(buf) == 0,
	      "list past the last key");
	free(ref);
}

/*
 * Large values, which the RADOS backend reads in ranges and NVMe/TCP sends while the rest is read
 * (cut-through): the bytes at every chunk edge, buffers past, at and short of the value's end, and
 * ranges starting in the middle of a chunk. A small value in a large buffer reads nothing past it.
 */
static void test_big(void)
{
	const uint32_t mib = 1u << 20, vlen = 5 * mib + 12345, buf = 8 * mib;
	uint8_t *val = malloc(vlen), *out = malloc(buf + 1);
	static const struct {
		const char *what;
		uint64_t off;
		uint32_t hbs;
	} cases[] = {
		{"from 0, a buffer past the end", 0, 8u << 20},
		{"from 0, the exact size", 0, (5u << 20) + 12345},
		{"from 0, one byte short", 0, (5u << 20) + 12344},
		{"from 0, 2 MiB (truncated)", 0, 2u << 20},
		{"from a chunk edge - 7", (1u << 20) - 7, 4u << 20},
		{"from 3 MiB + 1", (3u << 20) + 1, 3u << 20},
		{"from the last 1000 bytes", (5u << 20) + 11345, 3u << 20},
		{"from the end", (5u << 20) + 12345, 3u << 20},
		{"from past the end", (5u << 20) + 12346, 3u << 20},
	};
	uint32_t size, xfer;

	h_fill(val, vlen, 5150);
	CHECK(put(NS_MAIN, "big", val, vlen, 0) == G, "store 5 MiB + 12345");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		range_case(cases[i].what, "big", val, vlen, cases[i].off, cases[i].hbs, out);
	memset(out, 0xee, buf + 1);
	unsigned st = get(NS_MAIN, "big", out, buf, &size, &xfer);
	CHECK(st == G && size == vlen && xfer == vlen && memcmp(out, val, vlen) == 0 && out[vlen] == 0xee,
	      "retrieve 5 MiB + 12345 into 8 MiB: st %03x size %u xfer %u", st, size, xfer);
	CHECK(put(NS_MAIN, "big-small", val, 3000, 0) == G, "store 3000 bytes");
	memset(out, 0xee, buf + 1);
	st = get(NS_MAIN, "big-small", out, buf, &size, &xfer);
	CHECK(st == G && size == 3000 && xfer == 3000 && memcmp(out, val, 3000) == 0 && out[3000] == 0xee,
	      "retrieve 3000 bytes into 8 MiB: st %03x size %u xfer %u", st, size, xfer);
	st = get(NS_MAIN, "big-absent", out, buf, &size, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST) && xfer == 0, "retrieve an absent key into 8 MiB: %03x", st);
	free(val);
	free(out);
}

/* ---- values above the namespace's current max value -------------------------------------------- */

/* Retrieve @key of @nsid from @off (Retrieve Range when @range) into a @hbs-byte buffer: it must move
 * exactly min(@vlen - @off, @hbs) bytes of @val, say DW0 = @vlen and write nothing past them. */
static void big_read(const char *what, uint32_t nsid, const char *key, const uint8_t *val, uint32_t vlen,
		     bool range, uint64_t off, uint32_t hbs, uint8_t *out)
{
	uint32_t dw0 = 0, xfer = 0, want = nkv_range_xfer(vlen, off, hbs);
	unsigned st;

	memset(out, 0xee, (size_t)hbs + 1);
	if (range)
		st = rget(nsid, key, (unsigned)strlen(key), off, hbs, out, hbs, &dw0, &xfer);
	else
		st = get(nsid, key, out, hbs, &dw0, &xfer);
	size_t bad = 0;
	while (bad < want && out[bad] == val[off + bad])
		bad++;
	CHECK(st == G && dw0 == vlen && xfer == want && bad == want && out[want] == 0xee,
	      "%s (nsid %u, offset %llu, HBS %u): st %03x DW0 %u xfer %u (want %u), first wrong byte %zu", what,
	      nsid, (unsigned long long)off, hbs, st, dw0, xfer, want, bad);
}

/*
 * The max value limits Stores. A value already larger (stored through another NSID on the same
 * RADOS namespace, or before the limit was lowered) is read whole, as a Retrieve of any other value:
 * never its first max-value bytes under the full size in DW0.
 */
static void test_above_max_value(void)
{
	const uint32_t vlen = (3u << 20) + 77, hbs = 4u << 20;
	uint8_t *val = malloc(vlen), *out = malloc(hbs + 1);

	h_fill(val, vlen, 3131);
	CHECK(put(NS_MAIN, "over-view", val, vlen, 0) == G, "store 3 MiB + 77 in nsid %u", NS_MAIN);
	big_read("retrieve through the 1 MiB view", NS_VIEW, "over-view", val, vlen, false, 0, hbs, out);
	big_read("range through the 1 MiB view", NS_VIEW, "over-view", val, vlen, true, 100000, hbs, out);
	big_read("range from past 1 MiB", NS_VIEW, "over-view", val, vlen, true, (1u << 20) + 5, hbs, out);
	big_read("truncated at 2 MiB", NS_VIEW, "over-view", val, vlen, false, 0, 2u << 20, out);

	CHECK(put(NS_LOWER, "over-lowered", val, vlen, 0) == G, "store 3 MiB + 77 in nsid %u", NS_LOWER);
	int rc = nkv_ns_set_max_value(H.ss, NS_LOWER, 1u << 20);
	CHECK(rc == 0, "lower nsid %u's max value to 1 MiB: %s", NS_LOWER, strerror(-rc));
	big_read("retrieve after lowering the max value", NS_LOWER, "over-lowered", val, vlen, false, 0, hbs, out);
	big_read("range after lowering the max value", NS_LOWER, "over-lowered", val, vlen, true, 4096, hbs, out);
	unsigned st = put(NS_LOWER, "over-lowered2", val, vlen, 0);
	CHECK(st == SC(0, NKV_SC_KV_INVALID_VALUE_SIZE), "store 3 MiB after lowering to 1 MiB: %03x", st);
	free(val);
	free(out);
}

/*
 * A RADOS object larger than one command moves (MDTS: 64 MiB here, the largest max value), written
 * with the rados CLI: a buffer of MDTS gets its first MDTS bytes (truncated, DW0 the full size), a
 * larger buffer gets 85h, never MDTS bytes reported as the whole value.
 */
static void test_above_mdts(void)
{
	const uint32_t mdts = 64u << 20, vlen = mdts + 4096, hbs = mdts + (1u << 20);
	uint8_t *val = malloc(vlen), *out = malloc((size_t)hbs + 1);
	char path[] = "/tmp/nkv-rados-put-XXXXXX", ns[160];
	int fd = mkstemp(path);
	uint32_t dw0 = 0, xfer = 0;

	h_fill(val, vlen, 6464);
	CHECK(fd >= 0 && write(fd, val, vlen) == (ssize_t)vlen, "write %s", path);
	close(fd);
	snprintf(ns, sizeof(ns), "%s-main", H.rados_ns);
	int rc = h_ceph_tool("rados", "-p", H.pool, "-N", ns, "put", "6f7665722d6d647473", path, (char *)NULL);
	unlink(path);
	CHECK(rc == 0, "rados put of %u bytes: exit status %d", vlen, rc);
	big_read("MDTS of a larger object", NS_MAIN, "over-mdts", val, vlen, false, 0, mdts, out);
	unsigned st = get(NS_MAIN, "over-mdts", out, hbs, &dw0, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_INVALID_VALUE_SIZE) && xfer == 0,
	      "retrieve of a %u-byte object into %u bytes: st %03x DW0 %u xfer %u", vlen, hbs, st, dw0, xfer);
	st = rget(NS_MAIN, "over-mdts", 9, 1000, hbs, out, hbs, &dw0, &xfer);
	CHECK(st == SC(0, NKV_SC_KV_INVALID_VALUE_SIZE) && xfer == 0,
	      "range of a %u-byte object from 1000 into %u bytes: st %03x xfer %u", vlen, hbs, st, xfer);
	big_read("range from 4097 into MDTS", NS_MAIN, "over-mdts", val, vlen, true, 4097, hbs, out);
	CHECK(simple(NKV_KV_DELETE, NS_MAIN, "over-mdts") == G, "delete over-mdts");
	free(val);
	free(out);
}

/* ---- concurrent Stores of one key: last writer wins, never a torn value ---------------------------- */

/* Run twice: 256 KiB values, and 6 MiB ones, which the RADOS backend reads in ranges (cut-through):
 * a Store landing between two ranges must fail the Retrieve (82h, the host retries), never mix two
 * values. The large reads use a buffer larger than the value. */
#define RACE_LEN_MAX (6u << 20)
#define RACE_BUF (8u << 20)
static uint32_t g_race_len;
static char g_race_key[9]; /* one key per round: the last round's value is not this one's */
static int g_race_iters;
static atomic_int g_writers_done;
struct racer {
	int id;
	struct h_ctrl *c;
	int errors;
	uint64_t last_seed;
};

static void *race_writer(void *arg)
{
	struct racer *r = arg;
	struct h_qp *qp;
	uint8_t *val = malloc(g_race_len);

	if (!(qp = h_qp_create(r->c, (uint16_t)(r->id + 1), 8))) {
		r->errors++;
		free(val);
		atomic_fetch_add(&g_writers_done, 1);
		return NULL;
	}
	for (int i = 0; i < g_race_iters; i++) {
		uint64_t seed = ((uint64_t)r->id << 32) | (uint64_t)i;
		h_fill(val, g_race_len, seed);
		memcpy(val, &seed, 8); /* the seed travels in the value */
		if (h_kv(qp, NKV_KV_STORE, NS_RACE, g_race_key, 8, g_race_len, 0, val, g_race_len, NULL, NULL) != G)
			r->errors++;
		r->last_seed = seed;
		if (g_race_len > (1u << 20))
			usleep(60000); /* room for whole reads between the Stores, not only torn-off ones */
	}
	h_qp_destroy(qp);
	free(val);
	atomic_fetch_add(&g_writers_done, 1);
	return NULL;
}

static bool race_value_ok(const uint8_t *v)
{
	uint64_t seed;
	static _Thread_local uint8_t *ref;
	if (!ref)
		ref = malloc(RACE_LEN_MAX);
	memcpy(&seed, v, 8);
	h_fill(ref, g_race_len, seed);
	memcpy(ref, &seed, 8);
	return memcmp(ref, v, g_race_len) == 0;
}

static void test_race(struct h_ctrl *c, uint32_t len, int iters)
{
	enum { W = 4 };
	struct racer r[W];
	pthread_t th[W];
	uint8_t *out = malloc(RACE_BUF);
	uint32_t size, xfer, hbs = len > (1u << 20) ? RACE_BUF : len; /* large: a buffer past the value */
	int reads = 0, torn = 0, retried = 0;

	g_race_len = len;
	g_race_iters = iters;
	snprintf(g_race_key, sizeof(g_race_key), "race%04x", len >> 16);
	atomic_store(&g_writers_done, 0);
	for (int i = 0; i < W; i++) {
		r[i] = (struct racer){.id = i, .c = c};
		pthread_create(&th[i], NULL, race_writer, &r[i]);
	}
	/* Read while they write, on this thread's own queue pair. */
	while (atomic_load(&g_writers_done) < W) {
		unsigned st = get(NS_RACE, g_race_key, out, hbs, &size, &xfer);
		if (st == SC(0, NKV_SC_KV_KEY_NOT_EXIST))
			continue;
		if (st == SC(0, NKV_SC_KV_NS_NOT_READY)) { /* overwritten while read in ranges: retry */
			retried++;
			continue;
		}
		reads++;
		if (st != G || size != len || xfer != len || !race_value_ok(out))
			torn++;
	}
	int errors = 0;
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		errors += r[i].errors;
	}
	CHECK(errors == 0, "racing stores failed: %d", errors);
	CHECK(torn == 0, "%d of %d concurrent reads of %u KiB saw a torn or wrong value", torn, reads, len >> 10);
	CHECK(reads > 0, "no read of %u KiB overlapped the writers (%d retried)", len >> 10, retried);
	printf("race: %d writers x %d stores of %u KiB, %d concurrent reads verified, %d answered 82h (retry)\n", W,
	       iters, len >> 10, reads, retried);
	CHECK(get(NS_RACE, g_race_key, out, hbs, &size, &xfer) == G && race_value_ok(out), "final value whole");
	uint64_t seed;
	memcpy(&seed, out, 8);
	int is_last = 0;
	for (int i = 0; i < W; i++)
		is_last |= seed == r[i].last_seed;
	CHECK(is_last, "final value is some writer's last store (seed %llx)", (unsigned long long)seed);
	free(out);
}

/* ---- 10,000 mixed operations against a model ------------------------------------------------------ */

#define MODEL_KEYS 128
#define MODEL_OPS 10000
struct model_ent {
	bool present;
	uint32_t len;
	uint64_t seed;
};

static void test_model(struct h_qp *admin)
{
	struct model_ent m[MODEL_KEYS] = {{0}};
	uint64_t rs = 424242;
	uint8_t *val = malloc(16384), *out = malloc(16384);
	unsigned mismatches = 0, counts[6] = {0};
	(void)admin;

	for (int i = 0; i < MODEL_OPS; i++) {
		int k = (int)(h_rand(&rs) % MODEL_KEYS);
		uint8_t key[3] = {'m', (uint8_t)k, 0}; /* odd k: 2 bytes; even k: 3 bytes ending in 00h */
		unsigned klen = (k % 2) ? 2 : 3;
		unsigned op = (unsigned)(h_rand(&rs) % 100), st, expect;
		uint32_t size = 0, xfer = 0;
		if (op < 35) { /* store, sometimes conditional */
			unsigned opts = op < 5 ? NKV_STORE_MUST_EXIST : op < 10 ? NKV_STORE_MUST_NOT_EXIST : 0;
			uint32_t len = (uint32_t)(h_rand(&rs) % 8192);
			uint64_t seed = h_rand(&rs);
			h_fill(val, len, seed);
			st = h_kv(Q, NKV_KV_STORE, NS_MODEL, key, klen, len, opts, val, len, NULL, NULL);
			if ((opts & NKV_STORE_MUST_EXIST) && !m[k].present)
				expect = SC(0, NKV_SC_KV_KEY_NOT_EXIST);
			else if ((opts & NKV_STORE_MUST_NOT_EXIST) && m[k].present)
				expect = SC(0, NKV_SC_KV_KEY_EXISTS);
			else {
				expect = G;
				m[k] = (struct model_ent){true, len, seed};
			}
			counts[0]++;
		} else if (op < 70) { /* retrieve; one in three a Retrieve Range anywhere up to past the end */
			uint32_t hbs = (uint32_t)(h_rand(&rs) % 10000);
			uint64_t off = op >= 58 ? h_rand(&rs) % 9000 : 0;
			if (op >= 58)
				st = rget(NS_MODEL, key, klen, off, hbs, out, hbs, &size, &xfer);
			else
				st = h_kv(Q, NKV_KV_RETRIEVE, NS_MODEL, key, klen, hbs, 0, out, hbs, &size, &xfer);
			expect = m[k].present ? G : SC(0, NKV_SC_KV_KEY_NOT_EXIST);
			if (st == G && expect == G) {
				uint32_t want = nkv_range_xfer(m[k].len, off, hbs);
				h_fill(val, m[k].len, m[k].seed);
				if (size != m[k].len || xfer != want || (want && memcmp(out, val + off, want) != 0))
					st = 0xfff; /* content mismatch */
			}
			counts[op >= 58 ? 5 : 1]++;
		} else if (op < 85) {
			st = h_kv(Q, NKV_KV_DELETE, NS_MODEL, key, klen, 0, 0, NULL, 0, NULL, NULL);
			expect = m[k].present ? G : SC(0, NKV_SC_KV_KEY_NOT_EXIST);
			m[k].present = false;
			counts[2]++;
		} else if (op < 98) {
			st = h_kv(Q, NKV_KV_EXIST, NS_MODEL, key, klen, 0, 0, NULL, 0, NULL, NULL);
			expect = m[k].present ? G : SC(0, NKV_SC_KV_KEY_NOT_EXIST);
			counts[3]++;
		} else { /* list everything and compare the key set */
			uint8_t lb[4096];
			st = h_kv(Q, NKV_KV_LIST, NS_MODEL, NULL, 0, sizeof(lb), 0, lb, sizeof(lb), NULL, NULL);
			expect = G;
			unsigned present = 0, listed = nkv_get32(lb);
			for (int j = 0; j < MODEL_KEYS; j++)
				present += m[j].present;
			if (st == G && listed != present)
				st = 0xffe;
			counts[4]++;
		}
		if (st != expect && mismatches++ < 10)
			fprintf(stderr, "model op %d (kind %u, key %d): status %03x, expected %03x\n", i, op, k, st, expect);
	}
	CHECK(mismatches == 0, "%u of %d operations disagreed with the model", mismatches, MODEL_OPS);
	printf("model: %u stores, %u retrieves, %u ranges, %u deletes, %u exists, %u lists\n", counts[0], counts[1],
	       counts[5], counts[2], counts[3], counts[4]);
	free(val);
	free(out);
}

/* ---- the stored object, seen with Ceph's own `rados` tool ---------------------------------------- */

static void test_rados_cli(void)
{
	static const char value[] = "value of gpukey01, checked with the rados CLI";
	char path[] = "/tmp/nkv-rados-get-XXXXXX", ns[160];
	int fd = mkstemp(path);

	CHECK(put(NS_MAIN, "gpukey01", value, sizeof(value), 0) == G, "store gpukey01");
	snprintf(ns, sizeof(ns), "%s-main", H.rados_ns);
	int rc = h_ceph_tool("rados", "-p", H.pool, "-N", ns, "get", "6770756b65793031", path, (char *)NULL);
	CHECK(rc == 0, "rados get exit status %d", rc);
	char got[256] = {0};
	ssize_t n = read(fd, got, sizeof(got));
	CHECK(n == (ssize_t)sizeof(value) && memcmp(got, value, sizeof(value)) == 0,
	      "object 6770756b65793031 holds the stored value (%zd bytes)", n);
	close(fd);
	unlink(path);
}

struct batch {
	int done, ok;
};
static void batch_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct batch *b = arg;
	b->done++;
	b->ok += cpl->status == 0;
}

/* Wait (bounded) until @b has @n completions. */
static void batch_wait(struct nkv_qpair *qp, struct batch *b, int n)
{
	for (int i = 0; i < 10000 && b->done < n; i++)
		if (nkv_qpair_poll(qp, 100) < 0)
			break;
}

static void range_cb(void *arg, const struct nkv_cpl *cpl)
{
	*(struct nkv_cpl *)arg = *cpl;
}

/*
 * nkv_retrieve_range() / _async() of key "zc" (@big bytes, pattern 4242): into the registered
 * buffer @rb (over shm: zero copy, PRP lists), into plain memory @plain (shm: bounced, also from an
 * address that is not dword aligned), past the end, absent keys and argument checks.
 */
static void test_lib_range(struct nkv_ctrl *ctrl, struct nkv_qpair *qp, uint8_t *rb, uint8_t *plain, uint32_t big)
{
	const uint32_t mib = 1u << 20;
	uint8_t *ref = malloc(big);
	uint32_t size = 0, x = 0;
	int rc;

	(void)ctrl;
	if (!ref)
		return;
	h_fill(ref, big, 4242);
	memset(rb, 0xee, 2 * mib + 4096);
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc", 2, 777777, rb + 4096 + 8, mib, &x, &size, NULL);
	CHECK(rc == 0 && x == mib && size == big && memcmp(rb + 4096 + 8, ref + 777777, mib) == 0 &&
		      rb[4096 + 7] == 0xee && rb[4096 + 8 + mib] == 0xee,
	      "nkv_retrieve_range: 1 MiB at 777777 into a registered buffer: rc %d xfer %u size %u", rc, x, size);
	memset(rb, 0xee, mib + 1);
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc", 2, big - 5000, rb, mib, &x, &size, NULL);
	CHECK(rc == 0 && x == 5000 && size == big && memcmp(rb, ref + big - 5000, 5000) == 0 && rb[5000] == 0xee,
	      "nkv_retrieve_range straddling the end (registered): rc %d xfer %u", rc, x);
	memset(plain, 0xee, mib + 2);
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc", 2, 3, plain + 1, 65536, &x, &size, NULL);
	CHECK(rc == 0 && x == 65536 && size == big && memcmp(plain + 1, ref + 3, 65536) == 0 && plain[0] == 0xee &&
		      plain[65537] == 0xee,
	      "nkv_retrieve_range at 3 into unaligned plain memory: rc %d xfer %u", rc, x);
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc", 2, (uint64_t)big - mib + 1, plain, mib, &x, &size, NULL);
	CHECK(rc == 0 && x == mib - 1 && memcmp(plain, ref + big - mib + 1, mib - 1) == 0 && plain[mib - 1] == 0xee,
	      "nkv_retrieve_range straddling the end (plain): rc %d xfer %u", rc, x);
	x = 99;
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc", 2, big, rb, 4096, &x, &size, NULL);
	CHECK(rc == 0 && x == 0 && size == big, "nkv_retrieve_range at the end: rc %d xfer %u size %u", rc, x, size);
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc", 2, 12345, NULL, 0, &x, &size, NULL);
	CHECK(rc == 0 && x == 0 && size == big, "nkv_retrieve_range probe (len 0): rc %d size %u", rc, size);
	struct nkv_cpl cpl = {0};
	rc = nkv_retrieve_range(qp, NS_MAIN, "zc-absent", 9, 0, rb, 4096, &x, &size, &cpl);
	CHECK(rc == -ENOENT && (cpl.status & 0xff) == NKV_SC_KV_KEY_NOT_EXIST, "nkv_retrieve_range absent: rc %d", rc);
	CHECK(nkv_retrieve_range(qp, NS_MAIN, "zc", 0, 0, rb, 16, NULL, NULL, NULL) == -EINVAL &&
		      nkv_retrieve_range(qp, NS_MAIN, "zc-seventeen-byte", 17, 0, rb, 16, NULL, NULL, NULL) == -EINVAL &&
		      nkv_retrieve_range(qp, NS_MAIN, NULL, 2, 0, rb, 16, NULL, NULL, NULL) == -EINVAL &&
		      nkv_retrieve_range(qp, NS_MAIN, "zc", 2, 0, NULL, 16, NULL, NULL, NULL) == -EINVAL &&
		      nkv_retrieve_range_async(qp, NS_MAIN, "zc", 0, 0, rb, 16, range_cb, &cpl) == -EINVAL &&
		      nkv_retrieve_range_async(qp, NS_MAIN, "zc", 2, 0, NULL, 16, range_cb, &cpl) == -EINVAL,
	      "nkv_retrieve_range argument checks (key 0/17 bytes, NULL key or buffer)");
	/* asynchronous: one into registered memory, one into plain memory, one past the end, one absent */
	struct nkv_cpl c[4];
	memset(c, 0xff, sizeof(c));
	memset(rb, 0xee, 8192);
	memset(plain, 0xee, 8192);
	rc = nkv_retrieve_range_async(qp, NS_MAIN, "zc", 2, 1000000, rb, 4096, range_cb, &c[0]);
	rc |= nkv_retrieve_range_async(qp, NS_MAIN, "zc", 2, 2000001, plain, 4095, range_cb, &c[1]);
	rc |= nkv_retrieve_range_async(qp, NS_MAIN, "zc", 2, (uint64_t)big + 1, rb + 4096, 4096, range_cb, &c[2]);
	rc |= nkv_retrieve_range_async(qp, NS_MAIN, "zc-absent", 9, 7, rb + 4096, 4096, range_cb, &c[3]);
	CHECK(rc == 0, "4 asynchronous ranges queued");
	for (int i = 0; i < 1000 && nkv_qpair_outstanding(qp); i++)
		nkv_qpair_poll(qp, 100);
	CHECK(c[0].status == 0 && c[0].dw0 == big && c[0].xfer == 4096 && memcmp(rb, ref + 1000000, 4096) == 0 &&
		      c[1].status == 0 && c[1].dw0 == big && c[1].xfer == 4095 && memcmp(plain, ref + 2000001, 4095) == 0 &&
		      plain[4095] == 0xee && c[2].status == 0 && c[2].dw0 == big && c[2].xfer == 0 && rb[4096] == 0xee &&
		      (c[3].status & 0xff) == NKV_SC_KV_KEY_NOT_EXIST && c[3].xfer == 0,
	      "async ranges: xfer %u/%u/%u, statuses %#x/%#x/%#x/%#x", c[0].xfer, c[1].xfer, c[2].xfer, c[0].status,
	      c[1].status, c[2].status, c[3].status);
	free(ref);
}

/*
 * libnkv only (TCP, shm): buffers from nkv_buf_alloc() (shm: registered, zero copy; a 3 MiB value at
 * a page offset needs a chained PRP list), mixed with plain memory (shm: bounce copies), and the
 * batch API (32 submits, then polls: one doorbell per batch over shm).
 */
static void test_lib_bufs(struct h_ctrl *c)
{
	struct nkv_ctrl *ctrl = h_lib(c);
	struct nkv_qpair *qp = h_lib_qp(Q);
	const uint32_t big = 3u << 20;
	uint8_t *rb = nkv_buf_alloc(ctrl, big + 8192), *plain = malloc(big);
	uint32_t size = 0;

	CHECK(rb != NULL && plain != NULL, "nkv_buf_alloc");
	if (!rb || !plain)
		goto out;
	h_fill(rb + 512, big, 4242);
	CHECK(nkv_store(qp, NS_MAIN, "zc", 2, rb + 512, big, 0, NULL) == 0, "store 3 MiB from a registered buffer");
	memset(rb, 0, big + 8192);
	CHECK(nkv_retrieve(qp, NS_MAIN, "zc", 2, rb + 512, big, &size, NULL) == 0 && size == big &&
		      h_verify(rb + 512, big, 4242) && rb[511] == 0 && rb[512 + big] == 0,
	      "retrieve 3 MiB into a registered buffer at an offset (size %u)", size);
	memset(plain, 0, big);
	CHECK(nkv_retrieve(qp, NS_MAIN, "zc", 2, plain, big, &size, NULL) == 0 && h_verify(plain, big, 4242),
	      "retrieve into plain memory");

	test_lib_range(ctrl, qp, rb, plain, big);

	struct batch b = {0};
	enum { N = 32, V = 4096 };
	int sub = 0;
	for (int i = 0; i < N; i++) {
		char key[16];
		snprintf(key, sizeof(key), "batch-%d", i);
		h_fill(rb + (size_t)i * V, V, 100 + (uint64_t)i);
		/* even: registered memory; odd: plain memory */
		const uint8_t *src = (i & 1) ? memcpy(plain + (size_t)i * V, rb + (size_t)i * V, V) : rb + (size_t)i * V;
		sub += nkv_store_async(qp, NS_MAIN, key, (unsigned)strlen(key), src, V, 0, batch_cb, &b) == 0;
	}
	CHECK(sub == N && nkv_qpair_outstanding(qp) == N, "%d stores queued before any poll", sub);
	batch_wait(qp, &b, N);
	CHECK(b.done == N && b.ok == N, "batch stores: %d done, %d ok", b.done, b.ok);
	memset(rb, 0, (size_t)N * V);
	memset(plain, 0, (size_t)N * V);
	b = (struct batch){0};
	for (int i = 0; i < N; i++) {
		char key[16];
		snprintf(key, sizeof(key), "batch-%d", i);
		uint8_t *dst = (i & 1) ? rb + (size_t)i * V : plain + (size_t)i * V;
		nkv_retrieve_async(qp, NS_MAIN, key, (unsigned)strlen(key), dst, V, batch_cb, &b);
	}
	batch_wait(qp, &b, N);
	int good = 0;
	for (int i = 0; i < N; i++)
		good += h_verify((i & 1) ? rb + (size_t)i * V : plain + (size_t)i * V, V, 100 + (uint64_t)i);
	CHECK(b.done == N && b.ok == N && good == N, "batch retrieves: %d done, %d ok, %d verified", b.done, b.ok, good);
out:
	nkv_buf_free(ctrl, rb);
	free(plain);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "kv_func");
	h_add_ns(NS_MAIN, "main", 0, false);
	h_add_ns(NS_RO, "main", 0, true);
	h_add_ns(NS_SMALL, "small", 4096, false);
	h_add_ns(NS_LIST, "list", 0, false);
	h_add_ns(NS_MODEL, "model", 0, false);
	h_add_ns(NS_RACE, "race", 0, false);
	h_add_ns(NS_VIEW, "main", 1u << 20, true);
	h_add_ns(NS_LOWER, "lower", 0, false);

	struct h_ctrl *c = h_connect();
	if (!(Q = h_qp_create(c, 10, 64))) {
		fprintf(stderr, "cannot create I/O queue\n");
		return 1;
	}
	test_basic();
	test_delete_config(h_admin_qp(c));
	test_keys();
	test_options();
	test_sizes();
	test_generic();
	test_range(h_admin_qp(c));
	test_big();
	test_above_max_value();
	test_list();
	test_race(c, 256u << 10, 20);
	test_race(c, RACE_LEN_MAX, 8);
	test_model(h_admin_qp(c));
	if (!h_is_loop())
		test_lib_bufs(c);
	if (strcmp(H.backend, "rados") == 0) {
		test_rados_cli();
		/* NVMe/TCP only: the transport that sends a ranged read's parts early, so the one where a
		 * prefix could leave before the 85h (a shm host cannot describe a buffer past MDTS) */
		if (strcmp(H.transport, "tcp") == 0)
			test_above_mdts();
	}
	h_disconnect(c);
	return h_finish();
}
