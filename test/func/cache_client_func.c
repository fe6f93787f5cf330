/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_client_func.c - Store TTL (F1h) from the host side against the target's caches, through the
 * transport named on the command line (loop, tcp, tcp-digest, shm), on mem or the micro cluster:
 *   - raw F1h SQEs on every transport: a value stored with a 1 s TTL is retrievable (and Exist finds
 *     it) at once and answers 87h after 2.5 s, while 30 s and never-expiring entries stay; a
 *     standard Store (01h) on a namespace with a 1 s default TTL expires the same way; a pin with
 *     no finite TTL (none given and no default, or FFFFFFFFh) is Invalid Field (02h) and stores
 *     nothing; F1h on a namespace without a cache is 02h and stores nothing; a reserved CDW13 bit is
 *     02h; a pin past the pin quota is 81h and stores nothing, while an automatic entry of the same
 *     size goes in; F1h keeps Store's options (Must Not Exist: 89h); CQE DW0 is the TTL applied (a
 *     namespace's max_ttl cuts longer ones and "never", and byte-hours follow it), while a pin of
 *     "never" is 02h there too;
 *   - libnkv (tcp, shm): nkv_store_ttl() / _async() with the same outcomes as errnos (-ENOENT after
 *     expiry, -EINVAL, -ENOSPC), and the engine's STORE ops with ttl_s / NKV_OP_PIN (an unknown flag
 *     bit refuses the batch with -EINVAL before anything is sent);
 *   - the hard limit under concurrency (engine: 4 queues x 64): 160 Stores of 16 KiB in one batch
 *     into a 256 KiB cache with eviction off admit exactly 16 and answer 81h to the rest (usage never
 *     past the limit); the same with a 16-key limit; Stores that fail give their reservation back
 *     (the whole capacity is usable afterwards); over NVMe/TCP, a host (a child process,
 *     `cache_client_func hold-child PORT`) whose admitted Stores hold the whole capacity while their
 *     data never comes makes another host's Store get 81h, and once it is killed the whole capacity
 *     is usable again.
 * Usage: cache_client_func mem|rados [loop|tcp|tcp-digest|shm]
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define NS_PLAIN 1  /* no cache */
#define NS_CACHE 2  /* a cache: no default TTL, no limits */
#define NS_DEFTTL 3 /* a cache whose default TTL is 1 s */
#define NS_QUOTA 4  /* a cache with a 1000-byte pin quota */
#define NS_MAX 7    /* a cache whose max_ttl is 86400 s */
#define NS_CAP 5    /* a cache of CAP_BYTES, eviction off: the hard limit is the capacity */
#define NS_CAPK 6   /* a cache of CAP_KEYS entries, eviction off */
#define CAP_BYTES (256u << 10)
#define CAP_KEYS 16u
#define CAP_VAL (16u << 10) /* 16 such values fill NS_CAP */
#define CAP_N 160           /* Stores in one batch: 10 times what fits, on 4 queues of depth 64 */
#define EXPIRE_WAIT_MS 2500 /* past a 1 s TTL on a whole-second clock, with room for a loaded host */

static struct h_qp *g_qp;
static uint8_t g_v[4096];

/** A raw Store TTL through whichever transport runs. @return the status (SCT << 8 | SC). */
static unsigned st(uint32_t nsid, const char *key, const void *val, uint32_t len, unsigned opts, uint32_t ttl,
		   uint32_t flags)
{
	struct nkv_sqe sqe;
	struct nkv_cqe cqe;
	nkv_sqe_store_ttl(&sqe, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, opts, ttl, flags);
	if (h_exec(g_qp, &sqe, (void *)val, len, &cqe, NULL) < 0)
		return 0xffff;
	return h_status(&cqe);
}

/** As st(), and *@dw0 = CQE DW0 (the TTL applied, for a Store TTL that succeeded). */
static unsigned st_dw0(uint32_t nsid, const char *key, uint32_t len, uint32_t ttl, uint32_t flags, uint32_t *dw0)
{
	struct nkv_sqe sqe;
	struct nkv_cqe cqe;
	memset(&cqe, 0, sizeof(cqe));
	nkv_sqe_store_ttl(&sqe, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, 0, ttl, flags);
	int rc = h_exec(g_qp, &sqe, g_v, len, &cqe, NULL);
	*dw0 = nkv_get32(&cqe.dw0);
	return rc < 0 ? 0xffff : h_status(&cqe);
}

/** Retrieve @key and check its bytes against seed @seed / length @len when it succeeds. */
static unsigned get(uint32_t nsid, const char *key, uint32_t len, uint64_t seed, bool *same)
{
	uint8_t *b = malloc(len + 16);
	uint32_t dw0 = 0, xfer = 0;
	unsigned s = h_kv(g_qp, NKV_KV_RETRIEVE, nsid, key, (unsigned)strlen(key), len + 16, 0, b, len + 16, &dw0, &xfer);
	if (same)
		*same = s == 0 && dw0 == len && xfer == len && h_verify(b, len, seed);
	free(b);
	return s;
}

static unsigned exist(uint32_t nsid, const char *key)
{
	return h_kv(g_qp, NKV_KV_EXIST, nsid, key, (unsigned)strlen(key), 0, 0, NULL, 0, NULL, NULL);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* ---- raw F1h: stores before the wait ----------------------------------------------------------- */

static void raw_before(void)
{
	bool same = false;
	unsigned s = st(NS_CACHE, "t1", g_v, 1000, 0, 1, 0);
	CHECK(s == 0, "F1h TTL 1 s on a cache namespace: status %#x", s);
	s = get(NS_CACHE, "t1", 1000, 1, &same);
	CHECK(s == 0 && same, "retrieve before expiry: status %#x, value %s", s, same ? "intact" : "wrong");
	CHECK(exist(NS_CACHE, "t1") == 0, "exist before expiry");
	s = st(NS_CACHE, "t30", g_v, 10, 0, 30, 0);
	CHECK(s == 0, "F1h TTL 30 s: status %#x", s);
	s = st(NS_CACHE, "tnone", g_v, 10, 0, NKV_TTL_NONE, 0);
	CHECK(s == 0, "F1h TTL none: status %#x", s);
	s = st(NS_CACHE, "tdef", g_v, 10, 0, NKV_TTL_DEFAULT, 0);
	CHECK(s == 0, "F1h TTL 0 (the namespace's default: none here): status %#x", s);
	s = h_kv(g_qp, NKV_KV_STORE, NS_DEFTTL, "d1", 2, 100, 0, g_v, 100, NULL, NULL);
	CHECK(s == 0, "standard Store on a namespace with a 1 s default TTL: status %#x", s);
	s = st(NS_DEFTTL, "d2", g_v, 10, 0, NKV_TTL_NONE, 0);
	CHECK(s == 0, "F1h TTL none on that namespace: status %#x", s);

	/* pins need a finite TTL */
	s = st(NS_CACHE, "p0", g_v, 10, 0, NKV_TTL_DEFAULT, NKV_TTL_PIN);
	CHECK(s == SC(0, 0x02), "pin with no TTL and no namespace default: Invalid Field, got %#x", s);
	s = st(NS_CACHE, "p0", g_v, 10, 0, NKV_TTL_NONE, NKV_TTL_PIN);
	CHECK(s == SC(0, 0x02), "pin with TTL none: Invalid Field, got %#x", s);
	CHECK(exist(NS_CACHE, "p0") == SC(0, 0x87), "the refused pins stored nothing");
	s = st(NS_CACHE, "p60", g_v, 10, 0, 60, NKV_TTL_PIN);
	CHECK(s == 0, "pin with TTL 60 s: status %#x", s);
	s = st(NS_DEFTTL, "pdef", g_v, 10, 0, NKV_TTL_DEFAULT, NKV_TTL_PIN);
	CHECK(s == 0, "pin with the namespace's default TTL: status %#x", s);

	/* no cache, reserved bits */
	s = st(NS_PLAIN, "x", g_v, 10, 0, 5, 0);
	CHECK(s == SC(0, 0x02), "F1h on a namespace without a cache: Invalid Field, got %#x", s);
	s = st(NS_PLAIN, "x", g_v, 10, 0, 5, NKV_TTL_PIN);
	CHECK(s == SC(0, 0x02), "pinned F1h on a namespace without a cache: Invalid Field, got %#x", s);
	CHECK(exist(NS_PLAIN, "x") == SC(0, 0x87), "... and nothing stored");
	s = st(NS_CACHE, "r", g_v, 10, 0, 5, 0x4);
	CHECK(s == SC(0, 0x02), "CDW13 bit 2 (reserved): Invalid Field, got %#x", s);
	s = st(NS_CACHE, "r", g_v, 10, 0, 5, 0x80000000u);
	CHECK(s == SC(0, 0x02), "CDW13 bit 31 (reserved): Invalid Field, got %#x", s);

	/* pin quota: 1000 bytes */
	s = st(NS_QUOTA, "q1", g_v, 600, 0, 60, NKV_TTL_PIN);
	CHECK(s == 0, "a 600-byte pin under a 1000-byte quota: status %#x", s);
	s = st(NS_QUOTA, "q2", g_v, 600, 0, 60, NKV_TTL_PIN);
	CHECK(s == SC(0, 0x81), "a second 600-byte pin: Capacity Exceeded, got %#x", s);
	CHECK(exist(NS_QUOTA, "q2") == SC(0, 0x87), "... and the value is not stored");
	s = st(NS_QUOTA, "q3", g_v, 600, 0, 60, 0);
	CHECK(s == 0, "an automatic 600-byte entry: the pin quota does not count it (%#x)", s);

	/* The completion says which TTL the entry got (DW0): a maximum TTL cuts, a default fills in; a
	 * pin asked for "never" is refused under a maximum TTL as without one. */
	uint32_t dw0 = 0;
	s = st_dw0(NS_MAX, "m1", 10, 999999, 0, &dw0);
	CHECK(s == 0 && dw0 == 86400, "TTL 999999 s under max_ttl 86400: DW0 %u (status %#x)", dw0, s);
	s = st_dw0(NS_MAX, "m2", 10, NKV_TTL_NONE, 0, &dw0);
	CHECK(s == 0 && dw0 == 86400, "TTL none under max_ttl 86400: DW0 %u (status %#x)", dw0, s);
	s = st_dw0(NS_MAX, "m3", 10, 60, 0, &dw0);
	CHECK(s == 0 && dw0 == 60, "TTL 60 s under max_ttl: DW0 %u (status %#x)", dw0, s);
	s = st_dw0(NS_CACHE, "m4", 10, NKV_TTL_NONE, 0, &dw0);
	CHECK(s == 0 && dw0 == NKV_TTL_NONE, "TTL none without a maximum: DW0 %#x (status %#x)", dw0, s);
	s = st_dw0(NS_DEFTTL, "m5", 10, NKV_TTL_DEFAULT, 0, &dw0);
	CHECK(s == 0 && dw0 == 1, "TTL 0 on a namespace with a 1 s default: DW0 %u (status %#x)", dw0, s);
	s = st_dw0(NS_MAX, "mp", 1000, 999999, NKV_TTL_PIN, &dw0);
	CHECK(s == 0 && dw0 == 86400, "a pin of 999999 s under max_ttl: DW0 %u (status %#x)", dw0, s);
	struct nkv_cache_usage u;
	int urc = nkv_ns_cache_usage(H.ss, NS_MAX, &u);
	CHECK(urc == 0 && u.byte_hours > 23999.99 && u.byte_hours < 24000.01,
	      "... charged for the TTL applied: %.3f byte-hours (1000 B x 86400 s = 24000)", u.byte_hours);
	s = st_dw0(NS_MAX, "mn", 10, NKV_TTL_NONE, NKV_TTL_PIN, &dw0);
	CHECK(s == SC(0, 0x02), "a pin with TTL none under max_ttl: Invalid Field, got %#x", s);
	s = st_dw0(NS_MAX, "mn", 10, NKV_TTL_DEFAULT, NKV_TTL_PIN, &dw0);
	CHECK(s == SC(0, 0x02), "a pin with the default (none) under max_ttl: Invalid Field, got %#x", s);
	CHECK(exist(NS_MAX, "mn") == SC(0, 0x87), "... and nothing stored");
	s = h_kv(g_qp, NKV_KV_STORE, NS_MAX, "ms", 2, 10, 0, g_v, 10, &dw0, NULL);
	CHECK(s == 0 && dw0 == 0, "a standard Store's DW0 stays 0 (%u, status %#x)", dw0, s);

	/* Store's options ride along */
	s = st(NS_CACHE, "t30", g_v, 10, NKV_STORE_MUST_NOT_EXIST, 30, 0);
	CHECK(s == SC(0, 0x89), "F1h with Must Not Exist on a present key: Key Exists, got %#x", s);
	s = st(NS_CACHE, "absent", g_v, 10, NKV_STORE_MUST_EXIST, 30, 0);
	CHECK(s == SC(0, 0x87), "F1h with Must Exist on an absent key: Key Does Not Exist, got %#x", s);
}

static void raw_after(void)
{
	bool same = false;
	unsigned s = get(NS_CACHE, "t1", 1000, 1, NULL);
	CHECK(s == SC(0, 0x87), "retrieve after a 1 s TTL: Key Does Not Exist, got %#x", s);
	s = exist(NS_CACHE, "t1");
	CHECK(s == SC(0, 0x87), "exist after a 1 s TTL: Key Does Not Exist, got %#x", s);
	s = get(NS_CACHE, "t30", 10, 1, &same);
	CHECK(s == 0 && same, "the 30 s entry is still there (%#x)", s);
	s = get(NS_CACHE, "tnone", 10, 1, &same);
	CHECK(s == 0 && same, "the never-expiring entry is still there (%#x)", s);
	s = get(NS_CACHE, "tdef", 10, 1, &same);
	CHECK(s == 0 && same, "TTL 0 without a namespace default never expires (%#x)", s);
	s = get(NS_DEFTTL, "d1", 100, 1, NULL);
	CHECK(s == SC(0, 0x87), "a standard Store under a 1 s default TTL expired: got %#x", s);
	s = get(NS_DEFTTL, "d2", 10, 1, &same);
	CHECK(s == 0 && same, "TTL none overrides the namespace default (%#x)", s);
	s = get(NS_DEFTTL, "pdef", 10, 1, NULL);
	CHECK(s == SC(0, 0x87), "a pin expires with its (default) TTL like any entry: got %#x", s);
	s = get(NS_CACHE, "p60", 10, 1, &same);
	CHECK(s == 0 && same, "the 60 s pin is there (%#x)", s);
}

/* ---- libnkv: nkv_store_ttl, _async, the engine ------------------------------------------------- */

struct acb {
	bool done;
	int rc;
};

static void async_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct acb *a = arg;
	a->rc = nkv_cpl_errno(cpl);
	a->done = true;
}

static struct nkv_engine *g_e;

static void op_set(struct nkv_op *op, uint32_t nsid, const char *key, void *buf, uint32_t len, uint32_t ttl,
		   uint8_t flags)
{
	memset(op, 0, sizeof(*op));
	op->type = NKV_OP_STORE;
	op->nsid = nsid;
	op->klen = (uint8_t)strlen(key);
	memcpy(op->key, key, op->klen);
	op->buf = buf;
	op->len = len;
	op->ttl_s = ttl;
	op->flags = flags;
}

static void lib_before(struct nkv_qpair *qp)
{
	struct nkv_cpl cpl = {0};
	int rc = nkv_store_ttl(qp, NS_CACHE, "L1", 2, g_v, 2000, 0, 1, false, &cpl);
	CHECK(rc == 0, "nkv_store_ttl TTL 1 s: %d", rc);
	uint8_t b[4096];
	uint32_t vs = 0;
	rc = nkv_retrieve(qp, NS_CACHE, "L1", 2, b, sizeof(b), &vs, NULL);
	CHECK(rc == 0 && vs == 2000 && h_verify(b, 2000, 1), "nkv_retrieve before expiry: %d, size %u", rc, vs);
	rc = nkv_store_ttl(qp, NS_CACHE, "L60", 3, g_v, 10, 0, 60, true, NULL);
	CHECK(rc == 0, "nkv_store_ttl pinned 60 s: %d", rc);
	rc = nkv_store_ttl(qp, NS_CACHE, "Lp", 2, g_v, 10, 0, NKV_TTL_DEFAULT, true, &cpl);
	CHECK(rc == -EINVAL && cpl.status == SC(0, 0x02), "pin without a finite TTL: %d (status %#x)", rc, cpl.status);
	rc = nkv_store_ttl(qp, NS_PLAIN, "Lx", 2, g_v, 10, 0, 5, false, &cpl);
	CHECK(rc == -EINVAL && cpl.status == SC(0, 0x02), "nkv_store_ttl on a namespace without a cache: %d", rc);
	rc = nkv_store_ttl(qp, NS_MAX, "Lm", 2, g_v, 10, 0, NKV_TTL_NONE, false, &cpl);
	CHECK(rc == 0 && cpl.dw0 == 86400, "nkv_store_ttl never under max_ttl: cpl.dw0 %u (rc %d)", cpl.dw0, rc);
	rc = nkv_store_ttl(qp, NS_QUOTA, "Lq", 2, g_v, 600, 0, 60, true, &cpl);
	CHECK(rc == -ENOSPC && cpl.status == SC(0, 0x81), "a pin past the quota: %d (status %#x)", rc, cpl.status);
	rc = nkv_exist(qp, NS_QUOTA, "Lq", 2, NULL);
	CHECK(rc == -ENOENT, "... not stored: exist %d", rc);

	struct acb a = {0};
	rc = nkv_store_ttl_async(qp, NS_CACHE, "La", 2, g_v, 3000, 0, 1, false, async_cb, &a);
	CHECK(rc == 0, "nkv_store_ttl_async queued: %d", rc);
	for (int i = 0; rc == 0 && !a.done && i < 3000; i++)
		nkv_qpair_poll(qp, 10);
	CHECK(a.done && a.rc == 0, "nkv_store_ttl_async completed: done %d rc %d", a.done, a.rc);
	struct acb b2 = {0};
	rc = nkv_store_ttl_async(qp, NS_PLAIN, "Lb", 2, g_v, 10, 0, 1, false, async_cb, &b2);
	for (int i = 0; rc == 0 && !b2.done && i < 3000; i++)
		nkv_qpair_poll(qp, 10);
	CHECK(rc == 0 && b2.done && b2.rc == -EINVAL, "nkv_store_ttl_async on a namespace without a cache: %d", b2.rc);

	/* the engine */
	struct nkv_op ops[4];
	op_set(&ops[0], NS_CACHE, "E1", g_v, 500, 1, 0);
	op_set(&ops[1], NS_CACHE, "E60", g_v, 500, 60, NKV_OP_PIN);
	op_set(&ops[2], NS_CACHE, "Eplain", g_v, 500, 0, 0); /* a standard Store: no default TTL here */
	op_set(&ops[3], NS_PLAIN, "Enocache", g_v, 500, 0, NKV_OP_PIN);
	rc = nkv_engine_run(g_e, ops, 4);
	CHECK(rc == 1 && ops[0].rc == 0 && ops[1].rc == 0 && ops[2].rc == 0 && ops[3].rc == -EINVAL &&
		      ops[3].status == SC(0, 0x02) && ops[0].value_size == 1 && ops[1].value_size == 60 &&
		      ops[2].value_size == 0,
	      "engine: TTL, pin, plain, pin without a cache: %d failed (rc %d %d %d %d)", rc, ops[0].rc, ops[1].rc,
	      ops[2].rc, ops[3].rc);
	op_set(&ops[0], NS_CACHE, "Ebad", g_v, 10, 5, 0x4);
	rc = nkv_engine_run(g_e, ops, 1);
	CHECK(rc == -EINVAL && ops[0].rc == -EINVAL, "engine: an unknown flag bit refuses the batch: %d", rc);
	rc = nkv_exist(qp, NS_CACHE, "Ebad", 4, NULL);
	CHECK(rc == -ENOENT, "... and nothing was sent: exist %d", rc);
}

static void lib_after(struct nkv_qpair *qp)
{
	uint8_t b[4096];
	int rc = nkv_retrieve(qp, NS_CACHE, "L1", 2, b, sizeof(b), NULL, NULL);
	CHECK(rc == -ENOENT, "nkv_retrieve after a 1 s TTL: %d", rc);
	rc = nkv_retrieve(qp, NS_CACHE, "La", 2, b, sizeof(b), NULL, NULL);
	CHECK(rc == -ENOENT, "the async 1 s entry expired: %d", rc);
	rc = nkv_retrieve(qp, NS_CACHE, "L60", 3, b, sizeof(b), NULL, NULL);
	CHECK(rc == 0, "the 60 s pin is there: %d", rc);
	struct nkv_op ops[3];
	op_set(&ops[0], NS_CACHE, "E1", b, 600, 0, 0);
	op_set(&ops[1], NS_CACHE, "E60", b + 1000, 600, 0, 0);
	op_set(&ops[2], NS_CACHE, "Eplain", b + 2000, 600, 0, 0);
	for (int i = 0; i < 3; i++)
		ops[i].type = NKV_OP_RETRIEVE;
	rc = nkv_engine_run(g_e, ops, 3);
	CHECK(rc == 1 && ops[0].rc == -ENOENT && ops[1].rc == 0 && ops[1].value_size == 500 && ops[2].rc == 0,
	      "engine retrieves: the 1 s entry gone, the pin and the plain entry there (%d %d %d)", ops[0].rc,
	      ops[1].rc, ops[2].rc);
}

/* ---- the hard limit under concurrency (engine: 4 queues x 64 in flight) ------------------------ */

static uint8_t g_cap[CAP_VAL];

/* @n Stores of @len bytes (keys PREFIX0..) with @opts, in one batch. @return how many succeeded;
 * *@full: how many got 81h; *@other: other failures (the errno of the first in *@first). */
static unsigned cap_batch(uint32_t nsid, const char *prefix, unsigned n, uint32_t len, unsigned opts, unsigned *full,
			  unsigned *other, int *first)
{
	static struct nkv_op ops[CAP_N];
	unsigned ok = 0;
	*full = *other = 0;
	*first = 0;
	for (unsigned i = 0; i < n; i++) {
		char k[17];
		snprintf(k, sizeof(k), "%s%u", prefix, i);
		op_set(&ops[i], nsid, k, g_cap, len, 0, 0);
		ops[i].opts = (uint8_t)opts;
	}
	nkv_engine_run(g_e, ops, n);
	for (unsigned i = 0; i < n; i++) {
		if (ops[i].rc == 0)
			ok++;
		else if (ops[i].rc == -ENOSPC && ops[i].status == SC(0, 0x81))
			(*full)++;
		else if ((*other)++ == 0)
			*first = ops[i].rc;
	}
	return ok;
}

static void lib_capacity(void)
{
	struct nkv_cache_usage u;
	unsigned full, other;
	int first;

	/* Admission reserves: Stores in flight count against the hard limit until they complete. */
	unsigned ok = cap_batch(NS_CAP, "c", CAP_N, CAP_VAL, 0, &full, &other, &first);
	int rc = nkv_ns_cache_usage(H.ss, NS_CAP, &u);
	CHECK(ok == CAP_BYTES / CAP_VAL && full == CAP_N - ok && other == 0,
	      "%u concurrent %u KiB Stores into %u KiB (eviction off): %u admitted (%u KiB), %u got 81h, %u other "
	      "(%d)", CAP_N, CAP_VAL >> 10, CAP_BYTES >> 10, ok, ok * (CAP_VAL >> 10), full, other, first);
	CHECK(rc == 0 && u.used_bytes <= CAP_BYTES && u.keys == ok, "... usage %llu bytes, %llu keys (hard limit %u)",
	      (unsigned long long)u.used_bytes, (unsigned long long)u.keys, CAP_BYTES);
	ok = cap_batch(NS_CAPK, "k", CAP_N, 8, 0, &full, &other, &first);
	rc = nkv_ns_cache_usage(H.ss, NS_CAPK, &u);
	CHECK(ok == CAP_KEYS && full == CAP_N - ok && other == 0 && rc == 0 && u.keys == CAP_KEYS,
	      "%u concurrent Stores into a %u-key cache: %u admitted, %u got 81h, %u other (%d); %llu keys", CAP_N,
	      CAP_KEYS, ok, full, other, first, (unsigned long long)u.keys);

	/* Failed Stores give their reservation back: must-exist Stores of absent keys fail (87h, or 81h
	 * past the room), then the whole capacity is still there. */
	for (unsigned i = 0; i < CAP_N; i++) {
		char k[17];
		snprintf(k, sizeof(k), "c%u", i);
		(void)nkv_delete(h_lib_qp(g_qp), NS_CAP, k, (unsigned)strlen(k), NULL);
	}
	ok = cap_batch(NS_CAP, "x", CAP_N, CAP_VAL, NKV_STORE_MUST_EXIST, &full, &other, &first);
	CHECK(ok == 0 && full + other == CAP_N && (other == 0 || first == -ENOENT),
	      "%u must-exist Stores of absent keys all fail: %u 87h, %u 81h", CAP_N, other, full);
	ok = cap_batch(NS_CAP, "y", CAP_BYTES / CAP_VAL, CAP_VAL, 0, &full, &other, &first);
	rc = nkv_ns_cache_usage(H.ss, NS_CAP, &u);
	CHECK(ok == CAP_BYTES / CAP_VAL && rc == 0 && u.used_bytes == CAP_BYTES,
	      "... then the full capacity is usable: %u of %u Stores (%u 81h, %u other: %d), usage %llu bytes", ok,
	      CAP_BYTES / CAP_VAL, full, other, first, (unsigned long long)u.used_bytes);
}

/*
 * `cache_client_func hold-child PORT`: a host that fills NS_CAP with Stores whose data it never
 * sends (NVMe/TCP through R2T: it never polls), says 'H' on descriptor 3, and waits to be killed.
 */
#define HOLD_VAL (64u << 10) /* through R2T, past any in-capsule data limit */
static void hold_cb(void *arg, const struct nkv_cpl *cpl)
{
	(void)arg;
	(void)cpl;
}

static int hold_child(const char *port)
{
	struct nkv_conn_opts o = {.hostnqn = HOSTNQN, .timeout_ms = 10000};
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	static uint8_t v[HOLD_VAL];

	memcpy(o.hostid, H_HOSTID, 16);
	if (nkv_connect("127.0.0.1", port, SUBNQN, &o, &ctrl) < 0 || nkv_qpair_create(ctrl, 32, &qp) < 0)
		return 1;
	for (unsigned i = 0; i < CAP_BYTES / HOLD_VAL; i++) {
		char k[17];
		snprintf(k, sizeof(k), "h%u", i);
		if (nkv_store_async(qp, NS_CAP, k, (unsigned)strlen(k), v, HOLD_VAL, 0, hold_cb, NULL) < 0)
			return 1;
	}
	if (nkv_qpair_flush(qp) < 0 || write(3, "H", 1) != 1) /* the capsules out; R2Ts never read */
		return 1;
	for (;;)
		pause();
}

/* Reservations of Stores dropped with their connection come back: a host holds the whole capacity
 * with Stores whose data never comes (others get 81h meanwhile), then dies; the capacity is usable. */
static void lib_capacity_dropped(const char *self)
{
	int fd[2];
	unsigned full, other;
	int first;

	for (unsigned j = 0; j < CAP_BYTES / CAP_VAL; j++) { /* empty again (lib_capacity filled it) */
		char k[17];
		snprintf(k, sizeof(k), "y%u", j);
		(void)nkv_delete(h_lib_qp(g_qp), NS_CAP, k, (unsigned)strlen(k), NULL);
	}
	struct nkv_cache_usage u;
	CHECK(nkv_ns_cache_usage(H.ss, NS_CAP, &u) == 0 && u.used_bytes == 0, "the capacity is free again: %llu bytes",
	      (unsigned long long)u.used_bytes);
	if (pipe(fd) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) { /* a fresh process, not a copy of this one's target */
		dup2(fd[1], 3);
		execl(self, self, "hold-child", H.port, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char c = 0;
	bool held = read(fd[0], &c, 1) == 1 && c == 'H';
	close(fd[0]);
	CHECK(held, "a host with %u Stores of %u KiB in flight whose data it never sends", CAP_BYTES / HOLD_VAL,
	      HOLD_VAL >> 10);
	unsigned ok = 0;
	for (int i = 0; held && i < 100; i++) { /* until the target has admitted them all */
		sleep_ms(20);
		ok = cap_batch(NS_CAP, "z", 1, 4096, 0, &full, &other, &first);
		if (ok)
			(void)nkv_delete(h_lib_qp(g_qp), NS_CAP, "z0", 2, NULL);
		else
			break;
	}
	CHECK(held && ok == 0 && full == 1, "while they are admitted, another host's Store gets 81h (%u stored, %u 81h)",
	      ok, full);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 100; i++) { /* the target notices the closed connection */
		ok = cap_batch(NS_CAP, "w", CAP_BYTES / CAP_VAL, CAP_VAL, 0, &full, &other, &first);
		if (ok == CAP_BYTES / CAP_VAL)
			break;
		for (unsigned j = 0; j < CAP_BYTES / CAP_VAL; j++) {
			char k[17];
			snprintf(k, sizeof(k), "w%u", j);
			(void)nkv_delete(h_lib_qp(g_qp), NS_CAP, k, (unsigned)strlen(k), NULL);
		}
		sleep_ms(20);
	}
	CHECK(ok == CAP_BYTES / CAP_VAL, "the host killed: its reservations came back, the whole capacity is usable "
	      "(%u of %u Stores, %u 81h)", ok, CAP_BYTES / CAP_VAL, full);
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "hold-child") == 0)
		return hold_child(argv[2]);
	h_init(argc, argv, "cache_client_func");
	h_fill(g_v, sizeof(g_v), 1);
	struct nkv_cache_policy none = {0}, def1 = {.default_ttl_s = 1}, quota = {.pin_quota_bytes = 1000};
	struct nkv_cache_policy maxttl = {.max_ttl_s = 86400};
	struct nkv_cache_policy cap = {.capacity_bytes = CAP_BYTES, .eviction = NKV_EVICT_OFF};
	struct nkv_cache_policy capk = {.capacity_keys = CAP_KEYS, .eviction = NKV_EVICT_OFF};
	h_add_ns(NS_PLAIN, "plain", 0, false);
	h_add_ns_cache(NULL, NS_CACHE, "cache", &none);
	h_add_ns_cache(NULL, NS_DEFTTL, "defttl", &def1);
	h_add_ns_cache(NULL, NS_QUOTA, "quota", &quota);
	h_add_ns_cache(NULL, NS_MAX, "max", &maxttl);
	h_add_ns_cache(NULL, NS_CAP, "cap", &cap);
	h_add_ns_cache(NULL, NS_CAPK, "capk", &capk);
	struct h_ctrl *c = h_connect();
	g_qp = h_qp_create(c, 1, 32);
	CHECK(g_qp != NULL, "I/O queue pair");
	if (!g_qp)
		return h_finish();
	struct nkv_qpair *lqp = h_lib_qp(g_qp);
	if (lqp) {
		struct nkv_engine_opts o = {.queues = 4, .depth = 64};
		int rc = nkv_engine_create(h_lib(c), &o, &g_e);
		CHECK(rc == 0, "engine: %d", rc);
	}

	raw_before();
	if (lqp && g_e)
		lib_before(lqp);
	if (lqp && g_e)
		lib_capacity();
	if (lqp && g_e && H.tcp && strcmp(H.transport, "tcp") == 0)
		lib_capacity_dropped(argv[0]);
	sleep_ms(EXPIRE_WAIT_MS);
	raw_after();
	if (lqp && g_e)
		lib_after(lqp);

	nkv_engine_destroy(g_e);
	h_qp_destroy(g_qp);
	h_disconnect(c);
	return h_finish();
}
