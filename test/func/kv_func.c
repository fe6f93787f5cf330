/*
 * kv_func.c - the KV command set end to end through the loop transport: every command and option,
 * every status code, value sizes 0 B..64 MiB, binary keys, truncated Retrieve, List paging against
 * a sorted reference, concurrent Stores of one key, and 10,000 mixed operations against a model.
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

/* ---- concurrent Stores of one key: last writer wins, never a torn value ---------------------------- */

#define RACE_LEN (256u << 10)
#define RACE_ITERS 20
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
	uint8_t *val = malloc(RACE_LEN);

	if (!(qp = h_qp_create(r->c, (uint16_t)(r->id + 1), 8))) {
		r->errors++;
		free(val);
		atomic_fetch_add(&g_writers_done, 1);
		return NULL;
	}
	for (int i = 0; i < RACE_ITERS; i++) {
		uint64_t seed = ((uint64_t)r->id << 32) | (uint64_t)i;
		h_fill(val, RACE_LEN, seed);
		memcpy(val, &seed, 8); /* the seed travels in the value */
		if (h_kv(qp, NKV_KV_STORE, NS_RACE, "race", 4, RACE_LEN, 0, val, RACE_LEN, NULL, NULL) != G)
			r->errors++;
		r->last_seed = seed;
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
		ref = malloc(RACE_LEN);
	memcpy(&seed, v, 8);
	h_fill(ref, RACE_LEN, seed);
	memcpy(ref, &seed, 8);
	return memcmp(ref, v, RACE_LEN) == 0;
}

static void test_race(struct h_ctrl *c)
{
	enum { W = 4 };
	struct racer r[W];
	pthread_t th[W];
	uint8_t *out = malloc(RACE_LEN);
	uint32_t size, xfer;
	int reads = 0, torn = 0;

	for (int i = 0; i < W; i++) {
		r[i] = (struct racer){.id = i, .c = c};
		pthread_create(&th[i], NULL, race_writer, &r[i]);
	}
	/* Read while they write, on this thread's own queue pair. */
	while (atomic_load(&g_writers_done) < W) {
		unsigned st = get(NS_RACE, "race", out, RACE_LEN, &size, &xfer);
		if (st == SC(0, NKV_SC_KV_KEY_NOT_EXIST))
			continue;
		reads++;
		if (st != G || size != RACE_LEN || xfer != RACE_LEN || !race_value_ok(out))
			torn++;
	}
	int errors = 0;
	for (int i = 0; i < W; i++) {
		pthread_join(th[i], NULL);
		errors += r[i].errors;
	}
	CHECK(errors == 0, "racing stores failed: %d", errors);
	CHECK(torn == 0, "%d of %d concurrent reads saw a torn or wrong value", torn, reads);
	CHECK(reads > 0, "no read overlapped the writers");
	printf("race: %d writers x %d stores of %u KiB, %d concurrent reads verified\n", W, RACE_ITERS, RACE_LEN >> 10,
	       reads);
	CHECK(get(NS_RACE, "race", out, RACE_LEN, &size, &xfer) == G && race_value_ok(out), "final value whole");
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
		} else if (op < 70) {
			uint32_t hbs = (uint32_t)(h_rand(&rs) % 10000);
			st = h_kv(Q, NKV_KV_RETRIEVE, NS_MODEL, key, klen, hbs, 0, out, hbs, &size, &xfer);
			expect = m[k].present ? G : SC(0, NKV_SC_KV_KEY_NOT_EXIST);
			if (st == G && expect == G) {
				uint32_t want = m[k].len < hbs ? m[k].len : hbs;
				h_fill(val, m[k].len, m[k].seed);
				if (size != m[k].len || xfer != want || memcmp(out, val, want) != 0)
					st = 0xfff; /* content mismatch */
			}
			counts[1]++;
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
	printf("model: %u stores, %u retrieves, %u deletes, %u exists, %u lists\n", counts[0], counts[1], counts[2],
	       counts[3], counts[4]);
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
	test_list();
	test_race(c);
	test_model(h_admin_qp(c));
	if (!h_is_loop())
		test_lib_bufs(c);
	if (strcmp(H.backend, "rados") == 0)
		test_rados_cli();
	h_disconnect(c);
	return h_finish();
}
