/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_func.c - cache namespaces (docs/cache.md) end to end, through the target: TTL expiry as
 * hosts see it (and through a second gateway), the reaper's bound, pins and the pin quota, tenant
 * isolation under churn, eviction quality (sampled LRU against FIFO on a Zipf(0.99) workload),
 * byte-/token-hours against their closed form (and across a restart), the eviction lease (one
 * gateway evicts; a killed holder hands it over after its lease), the engine's block hash on Store
 * TTL (CDW13 bit 1) kept in the record and named in the cache events, and its bad forms.
 *
 * Usage: cache_func mem|rados [loop]. The two-gateway, restart and lease parts need RADOS (a second
 * mem target shares nothing). `cache_func lease-child NS` is the holder the lease part kills.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

enum { NS_TTL = 1, NS_DEF, NS_PIN, NS_A, NS_B, NS_LRU, NS_FIFO, NS_TOK, NS_TWO, NS_LEASE, NS_OLD, NS_OLDC };

static struct h_qp *Q;
static bool g_rados;

/* A gateway: a target with its own controller and queue (the test's is H's). */
struct gw {
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	struct nkv_loop_ctrlr *c;
	struct nkv_loop_qp *qp;
};

static void gw_open(struct gw *g, const char *name)
{
	g->tgt = h_target_new(name, &g->ss);
	if (nkv_loop_connect(g->tgt, SUBNQN, HOSTNQN, &g->c) < 0 || nkv_loop_enable(g->c) < 0 ||
	    nkv_loop_qp_create(g->c, 1, 32, &g->qp) < 0) {
		fprintf(stderr, "gateway %s: cannot connect\n", name);
		exit(1);
	}
}

static void gw_close(struct gw *g)
{
	nkv_loop_qp_destroy(g->qp);
	nkv_loop_disconnect(g->c);
	nkv_target_destroy(g->tgt);
	memset(g, 0, sizeof(*g));
}

static unsigned status_of(int rc, const struct nkv_cqe *c)
{
	return rc < 0 ? 0xfff : h_status(c);
}

/* Run @s with @buf on gateway @g (NULL: the test's own queue). */
static unsigned run(struct gw *g, struct nkv_sqe *s, void *buf, uint32_t len, uint32_t *xfer)
{
	struct nkv_cqe c;
	int rc = g ? nkv_loop_qp_exec(g->qp, s, buf, len, &c, xfer) : h_exec(Q, s, buf, len, &c, xfer);
	return status_of(rc, &c);
}

static void keyf(char *k, const char *p, unsigned i)
{
	snprintf(k, 17, "%s%u", p, i);
}

/* Run the Store in @s with @len deterministic bytes (seed @seed). */
static unsigned store(struct gw *g, struct nkv_sqe *s, uint32_t len, uint64_t seed)
{
	static uint8_t buf[1 << 16];
	h_fill(buf, len, seed);
	return run(g, s, buf, len, NULL);
}

/* Store TTL (F1h). */
static unsigned put_ttl(struct gw *g, uint32_t nsid, const char *key, uint32_t len, uint64_t seed, uint32_t ttl,
			bool pin)
{
	struct nkv_sqe s;
	nkv_sqe_store_ttl(&s, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, 0, ttl, pin ? NKV_TTL_PIN : 0);
	return store(g, &s, len, seed);
}

/* A standard Store (01h) with options @opts. */
static unsigned put(struct gw *g, uint32_t nsid, const char *key, uint32_t len, uint64_t seed, unsigned opts)
{
	struct nkv_sqe s;
	nkv_sqe_kv(&s, NKV_KV_STORE, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, opts);
	return store(g, &s, len, seed);
}

/* Retrieve: 0 with the right bytes, the status otherwise (0x1ff: wrong bytes). */
static unsigned get(struct gw *g, uint32_t nsid, const char *key, uint32_t len, uint64_t seed)
{
	static uint8_t buf[1 << 16];
	struct nkv_sqe s;
	uint32_t xfer = 0;
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, 0);
	unsigned st = run(g, &s, buf, len, &xfer);
	if (st == 0 && (xfer != len || !h_verify(buf, len, seed)))
		return 0x1ff;
	return st;
}

static unsigned op(struct gw *g, uint8_t opc, uint32_t nsid, const char *key)
{
	struct nkv_sqe s;
	nkv_sqe_kv(&s, opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), 0, 0);
	return run(g, &s, NULL, 0, NULL);
}

static struct nkv_cache_usage usage(struct nkv_subsys *ss, uint32_t nsid)
{
	struct nkv_cache_usage u;
	int rc = nkv_ns_cache_usage(ss ? ss : H.ss, nsid, &u);
	if (rc < 0) {
		fprintf(stderr, "usage of nsid %u: %s\n", nsid, strerror(-rc));
		exit(1);
	}
	return u;
}

static void sleep_ms(unsigned ms)
{
	nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/*
 * Poll Retrieve until 87h. The gateway decides expiry when the backend's read completes, somewhere
 * inside the Retrieve that saw 87h: @return its start (ms from @t0; bounds how late expiry came) and
 * set *end to its end (bounds how early), or -1 by @limit_ms. Times are on the wall clock, as expiry
 * times are (a clock step under the test would move both alike).
 */
static long gone_after(struct gw *g, uint32_t nsid, const char *key, uint32_t len, uint64_t seed, uint64_t t0,
		       unsigned limit_ms, long *end)
{
	*end = -1;
	while (nkv_unix_ms() < t0 + limit_ms) {
		uint64_t before = nkv_unix_ms();
		unsigned st = get(g, nsid, key, len, seed);
		if (st == SC(0, NKV_SC_KV_KEY_NOT_EXIST)) {
			*end = (long)(nkv_unix_ms() - t0);
			return (long)(before - t0);
		}
		if (st != 0)
			return -2;
		sleep_ms(10);
	}
	return -1;
}

#define GONE SC(0, NKV_SC_KV_KEY_NOT_EXIST)
/* A check whose figures the run reports (printed when it passes too). */
#define MEASURE(cond, ...)                                                                         \
	do {                                                                                       \
		CHECK(cond, __VA_ARGS__);                                                          \
		printf("  ");                                                                      \
		printf(__VA_ARGS__);                                                               \
		putchar('\n');                                                                     \
	} while (0)

/* ---- the cache events the target reports (nkv_target_set_cache_events) ---- */

#define EV_MAX 512
static struct ev {
	uint32_t nsid;
	char key[17];
	uint8_t reason;
	bool has_hash;
	uint64_t hash;
} g_ev[EV_MAX];
static unsigned g_nev;
static pthread_mutex_t g_ev_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_event(void *arg, const struct nkv_cache_event *e)
{
	(void)arg;
	pthread_mutex_lock(&g_ev_lock);
	if (g_nev < EV_MAX) {
		struct ev *v = &g_ev[g_nev++];
		v->nsid = e->nsid;
		memcpy(v->key, e->key, e->klen);
		v->key[e->klen] = '\0';
		v->reason = e->reason;
		v->has_hash = e->has_hash;
		v->hash = e->block_hash;
	}
	pthread_mutex_unlock(&g_ev_lock);
}

/* The events for key @key, in order, into @out (at most @max). @return how many. */
static unsigned events_of(const char *key, struct ev *out, unsigned max)
{
	unsigned n = 0;
	pthread_mutex_lock(&g_ev_lock);
	for (unsigned i = 0; i < g_nev && n < max; i++)
		if (strcmp(g_ev[i].key, key) == 0)
			out[n++] = g_ev[i];
	pthread_mutex_unlock(&g_ev_lock);
	return n;
}

/* Store TTL with the block hash @hash and CDW13 @flags (NKV_TTL_HASH and what else the test sets). */
static unsigned put_hash(uint32_t nsid, const char *key, uint32_t ttl, uint32_t flags, uint64_t hash)
{
	struct nkv_sqe s;
	nkv_sqe_store_ttl(&s, nsid, (const uint8_t *)key, (unsigned)strlen(key), 256, 0, ttl, 0);
	nkv_sqe_set_block_hash(&s, hash);
	nkv_put32(&s.cdw13, flags);
	return store(NULL, &s, 256, hash);
}

static void test_ttl(void)
{
	/* Expiry at TTL as the host sees it: within [2000, 2000 + a poll and a round trip] ms */
	uint64_t t0 = nkv_unix_ms();
	CHECK(put_ttl(NULL, NS_TTL, "t1", 4096, 1, 2, false) == 0, "store TTL 2 s");
	CHECK(get(NULL, NS_TTL, "t1", 4096, 1) == 0 && op(NULL, NKV_KV_EXIST, NS_TTL, "t1") == 0, "retrievable before");
	long end, ms = gone_after(NULL, NS_TTL, "t1", 4096, 1, t0, 4000, &end);
	MEASURE(end >= 1990 && ms >= 0 && ms <= 2150, "TTL 2 s: gone for Retrieve after %ld..%ld ms (2000 .. 2150)", ms, end);
	CHECK(op(NULL, NKV_KV_EXIST, NS_TTL, "t1") == GONE, "and for Exist");
	/* A Store refreshes the TTL */
	t0 = nkv_unix_ms();
	CHECK(put_ttl(NULL, NS_TTL, "t2", 100, 2, 2, false) == 0, "store TTL 2 s");
	sleep_ms(1500);
	CHECK(put_ttl(NULL, NS_TTL, "t2", 100, 3, 2, false) == 0, "stored again at 1.5 s, TTL 2 s");
	sleep_ms(1000);
	CHECK(get(NULL, NS_TTL, "t2", 100, 3) == 0, "still there at 2.5 s (the new value)");
	ms = gone_after(NULL, NS_TTL, "t2", 100, 3, t0, 6000, &end);
	MEASURE(end >= 3490 && ms >= 0 && ms <= 3700, "refreshed TTL: gone after %ld..%ld ms (3500 .. 3700)", ms, end);
	/* Must-not-exist replaces an expired entry; must-exist does not see it */
	CHECK(put(NULL, NS_TTL, "t2", 100, 4, NKV_STORE_MUST_EXIST) == GONE, "must-exist Store of an expired key: 87h");
	CHECK(put(NULL, NS_TTL, "t2", 100, 5, NKV_STORE_MUST_NOT_EXIST) == 0, "must-not-exist Store over an expired key");
	CHECK(get(NULL, NS_TTL, "t2", 100, 5) == 0, "and it reads back (no TTL: the namespace has no default)");
	CHECK(put(NULL, NS_TTL, "t2", 100, 6, NKV_STORE_MUST_NOT_EXIST) == SC(0, NKV_SC_KV_KEY_EXISTS),
	      "must-not-exist Store over a live key: 89h");
	/* The namespace's default TTL applies to standard Stores; NKV_TTL_NONE opts out; max TTL cuts */
	t0 = nkv_unix_ms();
	CHECK(put(NULL, NS_DEF, "d1", 64, 7, 0) == 0 && put_ttl(NULL, NS_DEF, "d2", 64, 8, NKV_TTL_NONE, false) == 0 &&
		      put_ttl(NULL, NS_DEF, "d3", 64, 9, 1000, false) == 0,
	      "standard Store, TTL none, TTL 1000 s on a namespace with default 1 s and max 2 s");
	ms = gone_after(NULL, NS_DEF, "d1", 64, 7, t0, 3000, &end);
	MEASURE(end >= 990 && ms >= 0 && ms <= 1200, "default TTL: gone after %ld..%ld ms", ms, end);
	ms = gone_after(NULL, NS_DEF, "d3", 64, 9, t0, 4000, &end);
	MEASURE(end >= 1990 && ms >= 0 && ms <= 2200, "TTL cut to the max (2 s): gone after %ld..%ld ms", ms, end);
	CHECK(get(NULL, NS_DEF, "d2", 64, 8) == GONE, "TTL none is cut to the max too");
	/* Delete of an expired key: absent to the host (87h with EDNEK, the default), and removed */
	CHECK(op(NULL, NKV_KV_DELETE, NS_DEF, "d3") == GONE, "Delete of an expired key: 87h");
	CHECK(op(NULL, NKV_KV_DELETE, NS_DEF, "d3") == GONE, "and again");
}

/* The engine's block hash (CDW13 bit 1, SQE bytes 23:16): kept in the entry's record, so the events of
 * the Store, a replacement, a Delete and the reaper all name it; the key's last 8 bytes without it. */
static void test_block_hash(void)
{
	const uint64_t h1 = 0xfedcba9876543210ull, h2 = 5, h3 = 0x0102030405060708ull;
	struct ev e[8];
	unsigned n;

	CHECK(put_hash(NS_TTL, "bh1", 1, NKV_TTL_HASH, h1) == 0 && get(NULL, NS_TTL, "bh1", 256, h1) == 0,
	      "Store TTL with a block hash: stored, reads back");
	CHECK(put_hash(NS_TTL, "bh2", 60, NKV_TTL_HASH, h2) == 0, "a second entry, TTL 60 s");
	CHECK(put_hash(NS_TTL, "bh2", 1, NKV_TTL_HASH, h3) == 0, "replaced under another hash, TTL 1 s");
	CHECK(put_hash(NS_TTL, "bh3", 60, NKV_TTL_HASH, h1) == 0 && op(NULL, NKV_KV_DELETE, NS_TTL, "bh3") == 0,
	      "a third stored and deleted by the host");
	CHECK(put_ttl(NULL, NS_TTL, "bh4", 256, 4, 1, false) == 0, "one without a hash, TTL 1 s");
	/* bad forms: reserved CDW13 bits, with and without bit 1; TTL or pin on a plain namespace */
	CHECK(put_hash(NS_TTL, "bhx", 60, NKV_TTL_HASH | 0x4, h1) == SC(0, NKV_SC_INVALID_FIELD) &&
		      put_hash(NS_TTL, "bhx", 60, 0x80000000u, h1) == SC(0, NKV_SC_INVALID_FIELD),
	      "CDW13 bits 31:2: Invalid Field, with or without bit 1");
	CHECK(op(NULL, NKV_KV_EXIST, NS_TTL, "bhx") == GONE, "and nothing stored");
	CHECK(put_hash(NS_OLD, "bhp", 0, NKV_TTL_HASH, h1) == 0 && get(NULL, NS_OLD, "bhp", 256, h1) == 0,
	      "a plain namespace takes a Store TTL that only names its block as a plain Store");
	CHECK(put_hash(NS_OLD, "bhq", 5, NKV_TTL_HASH, h1) == SC(0, NKV_SC_INVALID_FIELD) &&
		      put_hash(NS_OLD, "bhq", 0, NKV_TTL_HASH | NKV_TTL_PIN, h1) == SC(0, NKV_SC_INVALID_FIELD),
	      "but not a TTL or a pin with it: Invalid Field");
	CHECK(op(NULL, NKV_KV_DELETE, NS_OLD, "bhp") == 0, "the plain entry deleted");
	/* the reaper removes bh1, bh2 and bh4 within a few seconds */
	uint64_t until = nkv_now_ms() + 8000;
	while (nkv_now_ms() < until && (events_of("bh1", e, 8) < 2 || events_of("bh2", e, 8) < 4 ||
					events_of("bh4", e, 8) < 2))
		sleep_ms(100);
	n = events_of("bh1", e, 8);
	CHECK(n == 2 && e[0].reason == NKV_CACHE_STORED && e[1].reason == NKV_CACHE_EXPIRED && e[0].has_hash &&
		      e[1].has_hash && e[0].hash == h1 && e[1].hash == h1,
	      "Store then expiry, both naming the hash the Store gave (%u events)", n);
	n = events_of("bh2", e, 8);
	CHECK(n == 4 && e[0].reason == NKV_CACHE_STORED && e[0].hash == h2 && e[1].reason == NKV_CACHE_DELETED &&
		      e[1].hash == h2 && e[2].reason == NKV_CACHE_STORED && e[2].hash == h3 &&
		      e[3].reason == NKV_CACHE_EXPIRED && e[3].hash == h3,
	      "replaced under another hash: Stored h2, Deleted h2, Stored h3, then the expiry of h3 (%u events)", n);
	n = events_of("bh3", e, 8);
	CHECK(n == 2 && e[1].reason == NKV_CACHE_DELETED && e[1].hash == h1 && e[1].has_hash,
	      "a host's Delete names the hash read back from the record (%u events)", n);
	n = events_of("bh4", e, 8);
	CHECK(n == 2 && !e[0].has_hash && !e[1].has_hash && e[0].hash == 0x626834 && e[1].hash == 0x626834,
	      "without a hash: the key's last 8 bytes, big-endian (%u events)", n);
	CHECK(events_of("bhp", e, 8) == 0 && events_of("bhx", e, 8) == 0 && events_of("bhq", e, 8) == 0,
	      "no event for a plain namespace or a refused Store");
}

/* Entries stored before the namespace had a cache (no record): served as they were, never expire. */
static void test_legacy(void)
{
	static uint8_t buf[8192];
	struct nkv_sqe s;
	uint32_t xfer = 0;
	CHECK(put(NULL, NS_OLD, "old", 5000, 77, 0) == 0, "stored through a plain namespace");
	CHECK(get(NULL, NS_OLDC, "old", 5000, 77) == 0, "retrieved through a cache namespace on the same RADOS namespace");
	nkv_sqe_retrieve_range(&s, NS_OLDC, (const uint8_t *)"old", 3, 100, 4950);
	struct nkv_cqe c;
	int rc = h_exec(Q, &s, buf, 100, &c, &xfer);
	CHECK(rc == 0 && h_status(&c) == 0 && nkv_get32(&c.dw0) == 5000 && xfer == 50,
	      "Retrieve Range of it: DW0 %u (5000), %u bytes (50)", nkv_get32(&c.dw0), xfer);
	CHECK(op(NULL, NKV_KV_EXIST, NS_OLDC, "old") == 0, "Exist of it");
	CHECK(put(NULL, NS_OLDC, "old", 3000, 78, 0) == 0 && get(NULL, NS_OLDC, "old", 3000, 78) == 0,
	      "replaced through the cache namespace");
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, NS_OLDC, (const uint8_t *)"old", 3, 0, 0);
	rc = h_exec(Q, &s, NULL, 0, &c, &xfer);
	CHECK(rc == 0 && h_status(&c) == 0 && nkv_get32(&c.dw0) == 3000, "size probe (HBS 0): DW0 %u", nkv_get32(&c.dw0));
}

/* The reaper removes expired entries within reap_interval + keys / reap_rate (+ ticks). */
static void test_reaper(void)
{
	struct nkv_cache_usage u0 = usage(NULL, NS_TTL);
	char k[17];
	for (unsigned i = 0; i < 20; i++) {
		keyf(k, "r", i);
		CHECK(put_ttl(NULL, NS_TTL, k, 512, i, 1, false) == 0, "store %s TTL 1 s", k);
	}
	uint64_t t0 = nkv_now_ms();
	struct nkv_cache_usage u;
	do {
		sleep_ms(50);
		u = usage(NULL, NS_TTL);
	} while (u.expirations < u0.expirations + 20 && nkv_now_ms() < t0 + 10000);
	long ms = (long)(nkv_now_ms() - t0);
	/* TTL 1 s + interval 1 s + 20 keys at 2000/s + 2 ticks + slack. The schedule is held to 500 ms
	 * of slack in memory; on RADOS a pass's list, reads and guarded removes are the cluster's round
	 * trips, 2877 ms in all once in a full parallel run, so they get 2.5 s. */
	MEASURE(u.expirations == u0.expirations + 20, "reaper removed %llu of 20 expired entries in %ld ms",
	      (unsigned long long)(u.expirations - u0.expirations), ms);
	long bound = 1000 + 1000 + 300 + (g_rados ? 2500 : 500);
	CHECK(ms <= bound, "within the bound: %ld ms <= %ld", ms, bound);
	CHECK(u.expired_bytes - u0.expired_bytes == 20 * 512, "expired bytes %llu",
	      (unsigned long long)(u.expired_bytes - u0.expired_bytes));
	if (g_rados) { /* the objects themselves are gone */
		char ns[160];
		snprintf(ns, sizeof(ns), "%s-ttl", H.rados_ns);
		CHECK(h_ceph_tool("rados", "-p", H.pool, "-N", ns, "stat", "7230", NULL) != 0 &&
			      h_ceph_tool("rados", "-p", H.pool, "-N", ns, "stat", "723139", NULL) != 0,
		      "rados stat: objects r0 and r19 removed");
	}
}

static void test_pins(void)
{
	char k[17];
	CHECK(put_ttl(NULL, NS_PIN, "nottl", 100, 1, 0, true) == SC(0, NKV_SC_INVALID_FIELD),
	      "pin without a TTL (no default): Invalid Field");
	CHECK(put_ttl(NULL, NS_PIN, "nottl", 100, 1, NKV_TTL_NONE, true) == SC(0, NKV_SC_INVALID_FIELD),
	      "pin with TTL none: Invalid Field");
	for (unsigned i = 0; i < 4; i++) {
		keyf(k, "p", i);
		CHECK(put_ttl(NULL, NS_PIN, k, 16384, 100 + i, 120, true) == 0, "pin %s (16 KiB, quota 64 KiB)", k);
	}
	CHECK(put_ttl(NULL, NS_PIN, "p4", 16384, 104, 120, true) == SC(0, NKV_SC_KV_CAPACITY_EXCEEDED),
	      "fifth pin past the quota: 81h");
	CHECK(op(NULL, NKV_KV_EXIST, NS_PIN, "p4") == GONE, "the refused value is not stored");
	CHECK(put_ttl(NULL, NS_PIN, "p4", 16384, 104, 120, false) == 0, "the same value unpinned is stored");
	struct nkv_cache_usage u = usage(NULL, NS_PIN);
	MEASURE(u.pinned_bytes == 65536 && u.pinned_keys == 4 && u.keys == 5 && u.used_bytes == 5 * 16384,
	      "usage: pinned %llu B / %llu keys, %llu keys, %llu B", (unsigned long long)u.pinned_bytes,
	      (unsigned long long)u.pinned_keys, (unsigned long long)u.keys, (unsigned long long)u.used_bytes);
	CHECK(put(NULL, NS_PIN, "p0", 16384, 200, 0) == 0, "p0 replaced by an automatic entry");
	CHECK(usage(NULL, NS_PIN).pinned_bytes == 49152, "pinned bytes drop with it");
	CHECK(put_ttl(NULL, NS_PIN, "p5", 16384, 105, 120, true) == 0, "so a new pin fits");
	CHECK(op(NULL, NKV_KV_DELETE, NS_PIN, "p5") == 0 && usage(NULL, NS_PIN).pinned_bytes == 49152,
	      "deleting a pin releases its quota");
}

/*
 * Tenant A churns 5x its capacity while B's working set is retrieved between A's Stores: B stays
 * 100% resident, A's pinned entries survive, A never holds more than capacity + overshoot.
 */
static void test_isolation(void)
{
	const uint64_t cap = 512 << 10, hard = cap + cap / 10;
	const uint32_t vs = 4096;
	char k[17];
	unsigned b_miss = 0, refused = 0;
	uint64_t max_used = 0;

	for (unsigned i = 0; i < 32; i++) {
		keyf(k, "b", i);
		CHECK(put(NULL, NS_B, k, vs, 5000 + i, 0) == 0, "B stores %s", k);
	}
	for (unsigned i = 0; i < 8; i++) {
		keyf(k, "pin", i);
		CHECK(put_ttl(NULL, NS_A, k, vs, 7000 + i, 300, true) == 0, "A pins %s", k);
	}
	unsigned n = (unsigned)(5 * cap / vs);
	for (unsigned i = 0; i < n; i++) {
		keyf(k, "a", i);
		unsigned st;
		while ((st = put(NULL, NS_A, k, vs, i, 0)) == SC(0, NKV_SC_KV_CAPACITY_EXCEEDED)) {
			refused++; /* past the hard limit until the evictor catches up: the host retries */
			sleep_ms(5);
		}
		CHECK(st == 0, "A stores %s: %03x", k, st);
		uint64_t used = usage(NULL, NS_A).used_bytes;
		max_used = used > max_used ? used : max_used;
		if (i % 16 == 0)
			for (unsigned j = 0; j < 32; j++) {
				keyf(k, "b", j);
				b_miss += get(NULL, NS_B, k, vs, 5000 + j) != 0;
			}
		if (!g_rados && i % 8 == 0)
			sleep_ms(1); /* in memory a Store takes microseconds: give the evictor's ticks a chance */
	}
	MEASURE(b_miss == 0, "B's working set stayed resident: %u misses in %u reads", b_miss, n / 16 * 32);
	MEASURE(max_used <= hard, "A's usage peaked at %llu B <= capacity %llu + overshoot = %llu (Stores refused "
	      "meanwhile: %u)", (unsigned long long)max_used, (unsigned long long)cap, (unsigned long long)hard, refused);
	unsigned pins = 0;
	for (unsigned i = 0; i < 8; i++) {
		keyf(k, "pin", i);
		pins += get(NULL, NS_A, k, vs, 7000 + i) == 0;
	}
	MEASURE(pins == 8, "A's pinned entries survived the churn: %u of 8", pins);
	/* What is really there, once eviction has settled (it goes on to the low watermark): every key */
	uint64_t last = UINT64_MAX;
	for (int i = 0; i < 50 && usage(NULL, NS_A).used_bytes != last; i++) {
		last = usage(NULL, NS_A).used_bytes;
		sleep_ms(300);
	}
	uint64_t resident = 0;
	for (unsigned i = 0; i < n; i++) {
		keyf(k, "a", i);
		resident += op(NULL, NKV_KV_EXIST, NS_A, k) == 0 ? vs : 0;
	}
	struct nkv_cache_usage u = usage(NULL, NS_A);
	MEASURE(resident + 8 * vs <= hard && u.used_bytes == resident + 8 * vs,
	      "A holds %llu B (probed) = usage %llu B, evictions %llu", (unsigned long long)(resident + 8 * vs),
	      (unsigned long long)u.used_bytes, (unsigned long long)u.evictions);
	struct nkv_cache_usage ub = usage(NULL, NS_B);
	CHECK(ub.evictions == 0 && ub.keys == 32, "B: no evictions, 32 keys (%llu, %llu)",
	      (unsigned long long)ub.evictions, (unsigned long long)ub.keys);
}

/* Zipf(0.99) ranks over @n keys: the inverse of the cumulative weights. */
static unsigned zipf(const double *cdf, unsigned n, uint64_t *rs)
{
	double u = (double)(h_rand(rs) >> 11) / (double)(1ull << 53);
	unsigned lo = 0, hi = n - 1;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Wait until eviction has brought @nsid back to @cap keys, until @end (ms) at most. @return the ms it
 * waited. On a loaded machine eviction can fall behind the test's Stores; the namespace then sits
 * at its hard limit, refusing new keys, and what stays resident is whatever came first, whichever
 * policy: the test would compare the machine's speed, not the policies.
 */
static uint64_t settle(uint32_t nsid, uint64_t cap, uint64_t end)
{
	uint64_t t0 = nkv_now_ms();

	while (usage(NULL, nsid).keys > cap && nkv_now_ms() < end)
		sleep_ms(2);
	return nkv_now_ms() - t0;
}

/*
 * Eviction quality: a read-through cache (miss -> Store) on a Zipf(0.99) workload over 3x the
 * capacity, the same sequence on an LRU and a FIFO namespace, interleaved.
 */
static void test_zipf(void)
{
	enum { KEYS = 600, OPS = 6000 };
	static double cdf[KEYS];
	double sum = 0;
	for (unsigned i = 0; i < KEYS; i++)
		sum += 1.0 / pow(i + 1, 0.99);
	double acc = 0;
	for (unsigned i = 0; i < KEYS; i++) {
		acc += 1.0 / pow(i + 1, 0.99) / sum;
		cdf[i] = acc;
	}
	uint64_t rs = 42;
	unsigned hits[2] = {0, 0}, refused[2] = {0, 0};
	uint64_t waited[2] = {0, 0}, settle_end = nkv_now_ms() + 120000;
	const uint32_t nsids[2] = {NS_LRU, NS_FIFO};
	char k[17];
	for (unsigned i = 0; i < OPS; i++) {
		unsigned r = zipf(cdf, KEYS, &rs);
		/* ranks scattered over the key space, so hot keys are not adjacent in any order */
		unsigned key = (unsigned)((r * 2654435761u) % 1000003u);
		keyf(k, "z", key);
		for (unsigned j = 0; j < 2; j++) {
			waited[j] += settle(nsids[j], KEYS / 3, settle_end);
			if (get(NULL, nsids[j], k, 1024, key) == 0) {
				hits[j]++;
			} else {
				unsigned st = put(NULL, nsids[j], k, 1024, key, 0);
				CHECK(st == 0 || st == SC(0, NKV_SC_KV_CAPACITY_EXCEEDED), "fill %s: %03x", k, st);
				refused[j] += st != 0;
			}
		}
		if (!g_rados)
			sleep_ms(1); /* pace the in-memory run so that eviction keeps up as it does on RADOS */
	}
	double lru = 100.0 * hits[0] / OPS, fifo = 100.0 * hits[1] / OPS;
	printf("zipf(0.99), %u keys, capacity %u keys, %u reads: hit ratio LRU %.1f %%, FIFO %.1f %% (waited for "
	       "eviction %llu, %llu ms; Stores refused %u, %u)\n",
	       KEYS, KEYS / 3, OPS, lru, fifo, (unsigned long long)waited[0], (unsigned long long)waited[1], refused[0],
	       refused[1]);
	MEASURE(lru >= fifo + 3.0, "sampled LRU beats FIFO clearly: %.1f %% vs %.1f %%", lru, fifo);
	struct nkv_cache_usage u = usage(NULL, NS_LRU);
	CHECK(u.keys <= KEYS / 3 + KEYS / 30 && u.evictions > 0, "LRU namespace: %llu keys (capacity %u), %llu evictions",
	      (unsigned long long)u.keys, KEYS / 3, (unsigned long long)u.evictions);
}

/*
 * Byte-hours: charged at the pin for its TTL, refunded for the time not used. The one refund is
 * known to the test only within its round trips, so it is small next to the rest (0.2 % per 50 ms).
 */
static void test_token_hours(void)
{
	struct nkv_cache_usage u0 = usage(NULL, NS_TOK);
	CHECK(put_ttl(NULL, NS_TOK, "h1", 65536, 1, 2, true) == 0, "pinned 64 KiB for 2 s");
	uint64_t s0 = nkv_unix_ms();
	CHECK(put_ttl(NULL, NS_TOK, "h2", 16384, 2, 3, true) == 0, "pinned 16 KiB for 3 s");
	uint64_t s1 = nkv_unix_ms();
	CHECK(put_ttl(NULL, NS_TOK, "h3", 65536, 3, 4, true) == 0, "pinned 64 KiB for 4 s");
	sleep_ms(1000);
	uint64_t d0 = nkv_unix_ms();
	CHECK(op(NULL, NKV_KV_DELETE, NS_TOK, "h2") == 0, "the 16 KiB pin deleted after about 1 s");
	uint64_t d1 = nkv_unix_ms();
	sleep_ms(3200); /* all expired */
	double held_s = ((double)(d0 + d1) / 2 - (double)(s0 + s1) / 2) / 1000.0; /* h2's, +- the round trips */
	double expect = (65536.0 * 2 + 16384.0 * held_s + 65536.0 * 4) / 3600.0;
	struct nkv_cache_usage u = usage(NULL, NS_TOK);
	double got = u.byte_hours - u0.byte_hours;
	MEASURE(fabs(got - expect) <= expect * 0.01, "byte-hours %.4f, closed form %.4f (within 1 %%; round trips %llu + %llu ms)",
		got, expect, (unsigned long long)(s1 - s0), (unsigned long long)(d1 - d0));
	CHECK(fabs(u.token_hours - u.byte_hours / 4096.0) < 1e-9, "token-hours = byte-hours / 4096: %.6f", u.token_hours);
}

/* ---- RADOS only: gateways sharing a namespace ---------------------------------------------------- */

static struct nkv_cache_policy two_policy(void)
{
	return (struct nkv_cache_policy){.capacity_bytes = 256 << 10, .reap_interval_s = 1, .lease_ms = 2000,
					 .touch_interval_ms = 200};
}

static void test_two_gateways(void)
{
	struct nkv_cache_policy p = two_policy();
	struct gw g2;
	char k[17];

	gw_open(&g2, "gw-b");
	h_add_ns_cache(g2.ss, NS_TWO, "two", &p);
	/* TTL through the other gateway */
	uint64_t t0 = nkv_unix_ms();
	CHECK(put_ttl(NULL, NS_TWO, "x1", 1000, 1, 2, false) == 0, "gateway A stores TTL 2 s");
	CHECK(get(&g2, NS_TWO, "x1", 1000, 1) == 0, "gateway B retrieves it");
	long end, ms = gone_after(&g2, NS_TWO, "x1", 1000, 1, t0, 4000, &end);
	MEASURE(end >= 1990 && ms >= 0 && ms <= 2150, "gone through gateway B after %ld..%ld ms", ms, end);
	CHECK(op(NULL, NKV_KV_EXIST, NS_TWO, "x1") == GONE, "and through A");
	/* One lease holder */
	sleep_ms(1500);
	bool ea = usage(NULL, NS_TWO).evicting, eb = usage(g2.ss, NS_TWO).evicting;
	MEASURE(ea != eb, "exactly one gateway holds the eviction lease (A %d, B %d)", ea, eb);
	/* Both write 2x the capacity: one evicts, to the low watermark and not far below */
	for (unsigned i = 0; i < 128; i++) {
		keyf(k, "w", i);
		unsigned st;
		while ((st = put(i % 2 ? &g2 : NULL, NS_TWO, k, 4096, i, 0)) == SC(0, NKV_SC_KV_CAPACITY_EXCEEDED))
			sleep_ms(5);
		CHECK(st == 0, "store %s through gateway %c", k, i % 2 ? 'B' : 'A');
	}
	/* Each gateway writes its share and reads the other's once a second; the evictor learns of the
	 * other's Stores that way, and the other of the evictions: a few seconds to settle. */
	uint64_t t0s = nkv_now_ms();
	struct nkv_cache_usage ua, ub;
	do {
		sleep_ms(100);
		ua = usage(NULL, NS_TWO);
		ub = usage(g2.ss, NS_TWO);
	} while ((ua.used_bytes != ub.used_bytes || ua.evictions != ub.evictions || ua.used_bytes > 256 << 10 ||
		  !ua.evictions) && /* 512 KiB were written: something must have been evicted */
		 nkv_now_ms() < t0s + 10000);
	printf("  the two gateways agree on the usage %llu ms after the last Store\n",
	       (unsigned long long)(nkv_now_ms() - t0s));
	uint64_t resident = 0;
	for (unsigned i = 0; i < 128; i++) {
		keyf(k, "w", i);
		resident += op(NULL, NKV_KV_EXIST, NS_TWO, k) == 0 ? 4096 : 0;
	}
	uint64_t low = (256 << 10) / 100 * 90;
	MEASURE(ua.used_bytes == resident && ub.used_bytes == resident, "both see the usage: A %llu, B %llu, probed %llu",
	      (unsigned long long)ua.used_bytes, (unsigned long long)ub.used_bytes, (unsigned long long)resident);
	MEASURE(resident <= 256 << 10 && resident + 16 * 4096 >= low,
	      "evicted to %llu B: under capacity, not below the low watermark %llu by more than one round",
	      (unsigned long long)resident, (unsigned long long)low);
	MEASURE(ua.evictions == ub.evictions && ua.evictions == 128 - resident / 4096 && ua.gateways == 2,
	      "evictions counted once: %llu (A) %llu (B), %u gateways", (unsigned long long)ua.evictions,
	      (unsigned long long)ub.evictions, ua.gateways);
	gw_close(&g2);
}

/* The lease holder is killed: another gateway takes over after the lease (2 s). */
static void test_lease_handover(const char *self)
{
	struct nkv_cache_policy p = two_policy();
	int fd[2];
	char ns[160];

	snprintf(ns, sizeof(ns), "%s-lease", H.rados_ns);
	if (pipe(fd) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) { /* a fresh process: librados must not be used across fork */
		dup2(fd[1], 3); /* the child says 'L' on descriptor 3 once it holds the lease */
		execl(self, self, "lease-child", ns, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char c = 0;
	CHECK(read(fd[0], &c, 1) == 1 && c == 'L', "the child gateway holds the lease");
	close(fd[0]);
	struct gw g2;
	gw_open(&g2, "gw-c");
	struct nkv_ns_conf nc = {.nsid = NS_LEASE, .rados_ns = ns, .cache = &p};
	CHECK(nkv_ns_add(g2.ss, &nc) == 0, "another gateway serves the namespace");
	sleep_ms(1500);
	CHECK(!usage(g2.ss, NS_LEASE).evicting, "it does not take the lease from a live holder");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	uint64_t t0 = nkv_now_ms();
	while (!usage(g2.ss, NS_LEASE).evicting && nkv_now_ms() < t0 + 10000)
		sleep_ms(20);
	long ms = (long)(nkv_now_ms() - t0);
	MEASURE(usage(g2.ss, NS_LEASE).evicting && ms <= 2000 + 700 + 500,
	      "holder killed: the lease handed over after %ld ms (lease 2000 ms, renewal every third)", ms);
	gw_close(&g2);
}

static int lease_child(const char *ns)
{
	struct nkv_cache_policy p = two_policy();
	struct nkv_subsys *ss;
	char *argv[] = {"cache_func", "rados", NULL};

	h_init(2, argv, "cache_func-child");
	struct nkv_target *t = h_target_new("gw-kill", &ss);
	struct nkv_ns_conf nc = {.nsid = 1, .rados_ns = ns, .cache = &p};
	if (nkv_ns_add(ss, &nc) < 0)
		return 1;
	struct nkv_cache_usage u;
	for (int i = 0; i < 200; i++) {
		if (nkv_ns_cache_usage(ss, 1, &u) == 0 && u.evicting) {
			if (write(3, "L", 1) != 1)
				return 1;
			for (;;)
				pause(); /* until killed */
		}
		sleep_ms(50);
	}
	(void)t;
	return 1;
}

/* Byte-hours and usage survive a restart of the gateway (they are its share in RADOS). */
static void test_restart(void)
{
	struct nkv_cache_policy p = {.bytes_per_token = 1000};
	struct gw g;
	gw_open(&g, "gw-r");
	h_add_ns_cache(g.ss, 1, "restart", &p);
	CHECK(put_ttl(&g, 1, "q1", 10000, 1, 36, true) == 0 && put(&g, 1, "q2", 500, 2, 0) == 0,
	      "pinned 10000 B for 36 s, stored 500 B");
	struct nkv_cache_usage before = usage(g.ss, 1);
	MEASURE(fabs(before.byte_hours - 100.0) < 1e-9 && fabs(before.token_hours - 0.1) < 1e-12,
	      "charged 100 byte-hours = 0.1 token-hours (%.6f, %.6f)", before.byte_hours, before.token_hours);
	gw_close(&g);
	gw_open(&g, "gw-r");
	h_add_ns_cache(g.ss, 1, "restart", &p);
	sleep_ms(600); /* the share is read back on the cache thread's first tick */
	struct nkv_cache_usage after = usage(g.ss, 1);
	MEASURE(fabs(after.byte_hours - before.byte_hours) < 1e-9 && after.used_bytes == 10500 && after.keys == 2 &&
		      after.pinned_bytes == 10000,
	      "after a restart: %.6f byte-hours, %llu B, %llu keys, %llu pinned B", after.byte_hours,
	      (unsigned long long)after.used_bytes, (unsigned long long)after.keys,
	      (unsigned long long)after.pinned_bytes);
	gw_close(&g);
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "lease-child") == 0)
		return lease_child(argv[2]);
	h_init(argc, argv, "cache_func");
	g_rados = strcmp(H.backend, "rados") == 0;
	nkv_target_set_cache_events(H.tgt, on_event, NULL); /* before the namespaces, as it must be */
	struct nkv_cache_policy ttl = {.reap_interval_s = 1};
	struct nkv_cache_policy def = {.default_ttl_s = 1, .max_ttl_s = 2};
	struct nkv_cache_policy pin = {.pin_quota_bytes = 65536};
	struct nkv_cache_policy part = {.capacity_bytes = 512 << 10, .touch_interval_ms = 200};
	struct nkv_cache_policy lru = {.capacity_keys = 200, .touch_interval_ms = 100};
	struct nkv_cache_policy fifo = {.capacity_keys = 200, .eviction = NKV_EVICT_FIFO};
	struct nkv_cache_policy tok = {.bytes_per_token = 4096};
	h_add_ns_cache(NULL, NS_TTL, "ttl", &ttl);
	h_add_ns_cache(NULL, NS_DEF, "def", &def);
	h_add_ns_cache(NULL, NS_PIN, "pin", &pin);
	h_add_ns_cache(NULL, NS_A, "a", &part);
	h_add_ns_cache(NULL, NS_B, "b", &part);
	h_add_ns_cache(NULL, NS_LRU, "lru", &lru);
	h_add_ns_cache(NULL, NS_FIFO, "fifo", &fifo);
	h_add_ns_cache(NULL, NS_TOK, "tok", &tok);
	h_add_ns_cache(NULL, NS_OLD, "old", NULL);
	h_add_ns_cache(NULL, NS_OLDC, "old", &ttl);
	if (g_rados) {
		struct nkv_cache_policy two = two_policy();
		h_add_ns_cache(NULL, NS_TWO, "two", &two);
	}
	struct h_ctrl *c = h_connect();
	Q = h_qp_create(c, 1, 32);
	if (!Q)
		return 1;
	test_ttl();
	test_block_hash();
	test_legacy();
	test_reaper();
	test_pins();
	test_isolation();
	test_zipf();
	test_token_hours();
	if (g_rados) {
		test_two_gateways();
		test_lease_handover(argv[0][0] == '/' ? argv[0] : "/proc/self/exe");
		test_restart();
	}
	h_qp_destroy(Q);
	h_disconnect(c);
	return h_finish();
}
