/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_abuse.c - one host must not take the shared-memory transport from the others (issue 18):
 * attackers and a victim, raw hosts over nkv_shm.h (no libnkv), against an in-process target
 * (mem backend), each group with its own transport and small limits so it runs in seconds.
 *
 *   shm_abuse teardown   200 hosts connected (half with live queues), 4 pollers, destroyed with a
 *                        100 ms grace, three times: no use-after-free (ASan), bounded stop time.
 *   shm_abuse bounce     a 2-entry CQ never drained, scattered Stores: bounce memory not held hostage.
 *   shm_abuse poller     32 scattered 16 MiB Stores in flight: other hosts keep their latency.
 *   shm_abuse amplify    overlapping queues, controller limits, silent connections, memory returned.
 *
 * Each group asserts a bound (victim latency while the attacker runs, memory after it leaves, the
 * documented refusal status), never just prints. The last line is "N passed, N failed"; exit 0 only
 * without failures. With no argument every group runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"
#include "nkv/nkv_spec.h"
#include "nkv/nkv_target.h"

#include "check.h"
#include "shm_host.h"

unsigned h_pass, h_fail;

/* ASan keeps freed blocks in a quarantine (256 MiB by default), so memory the target gives back
 * would still count as resident; a small one keeps the memory checks meaningful and still catches
 * a use of something freed moments earlier (the teardown race). ASAN_OPTIONS overrides it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "quarantine_size_mb=4";
}

#define KIB 1024u
#define MIB (1u << 20)
#define SUBNQN "nqn.2026-11.io.rados-nkv:shm-abuse"
#define HOSTFMT "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-%012x"

static char g_dir[64], g_sock[128];
static struct nkv_target *g_tgt;

/* ---- time and memory ----------------------------------------------------------------------------- */

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/** Anonymous resident memory of this process (the target's heap; host memfds are shmem). */
static uint64_t rss_anon(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

/** CPU seconds this process has used (all threads). */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- a raw host (shm_host.c; here only what this test does its own way) ------------------------- */

/** Connect as host number @id (host ID bytes id + i, NQN HOSTFMT) and say HELLO. @return as host_hello(). */
static int host_connect(struct host *h, unsigned id)
{
	uint8_t hostid[16];
	char nqn[sizeof(((struct nkv_shm_hello *)0)->hostnqn)];

	for (int i = 0; i < 16; i++)
		hostid[i] = (uint8_t)(id + (unsigned)i);
	snprintf(nqn, sizeof(nqn), HOSTFMT, id);
	return host_hello(h, g_sock, hostid, nqn);
}

/** Connect as host @id and register a sealed memfd of @len bytes at MAIN_IOVA. @return 0 or -errno. */
static int host_setup(struct host *h, unsigned id, uint64_t len)
{
	int rc = host_connect(h, id);

	return rc != 0 ? rc : host_main_region(h, len);
}

/** @len bytes of the main region, page aligned. @return the IOVA (0 when the region is used up). */
static uint64_t halloc(struct host *h, uint64_t len)
{
	uint64_t at = h->brk, n = (len + PG - 1) & ~(uint64_t)(PG - 1);

	if (n == 0)
		n = PG;
	if (at + n > h->mem_len)
		return 0;
	h->brk += n;
	return MAIN_IOVA + at;
}

/** 32-entry admin queues in the main region, then CC.EN. @return CSTS once RDY or CFS is set. */
static uint32_t ctrl_enable(struct host *h)
{
	uint16_t entries = 32;
	uint64_t sq = halloc(h, (uint64_t)entries * 64), cq = halloc(h, (uint64_t)entries * 16);

	host_rings(h, 0, sq, entries, cq, entries, &h->asq, &h->acq);
	wr32(h, NKV_REG_AQA, (uint32_t)(entries - 1) | (uint32_t)(entries - 1) << 16);
	wr64(h, NKV_REG_ASQ, sq);
	wr64(h, NKV_REG_ACQ, cq);
	wr32(h, NKV_REG_CC, CC_ENABLE);
	return wait_any(h, NKV_CSTS_RDY | NKV_CSTS_CFS, TMO_MS);
}

/** Wait (bounded) for the next CQE of @cq, consume it, write the head doorbell. @return 1, 0 on timeout. */
static int wait_cqe(struct nkv_dev_cq *cq, struct nkv_dev_sq *sq, struct nkv_cqe *out, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	unsigned spins = 0;

	while (!nkv_cq_peek(cq, out)) {
		if (++spins > 256) {
			if (now_ms() >= end)
				return 0;
			usleep(20);
		}
	}
	nkv_cq_advance(cq, sq, out);
	nkv_cq_ring(cq);
	return 1;
}

/** Submit one command and wait up to @ms for its CQE. @return SCT << 8 | SC, or ST_TIMEOUT. */
static int exec_cmd(struct host *h, struct nkv_dev_sq *sq, struct nkv_dev_cq *cq, struct nkv_sqe *sqe, int ms)
{
	struct nkv_cqe e;

	if (submit(h, sq, sqe) < 0 || !wait_cqe(cq, sq, &e, ms))
		return ST_TIMEOUT;
	return e.cid == sqe->cid ? cqe_code(&e) : ST_TIMEOUT;
}

static int admin_cmd(struct host *h, struct nkv_sqe *s)
{
	return exec_cmd(h, &h->asq, &h->acq, s, TMO_MS);
}

static int set_num_queues(struct host *h, uint16_t n)
{
	struct nkv_sqe s = sqe_adm(NKV_ADM_SET_FEATURES, NKV_FEAT_NUM_QUEUES, (uint32_t)(n - 1) << 16 | (uint16_t)(n - 1), 0);
	return admin_cmd(h, &s);
}

static int create_cq(struct host *h, uint16_t qid, uint32_t entries, uint64_t base)
{
	struct nkv_sqe s = sqe_adm(NKV_ADM_CREATE_CQ, qid | (entries - 1) << 16, 1, base);
	return admin_cmd(h, &s);
}

static int create_sq(struct host *h, uint16_t qid, uint32_t entries, uint16_t cqid, uint64_t base)
{
	struct nkv_sqe s = sqe_adm(NKV_ADM_CREATE_SQ, qid | (entries - 1) << 16, 1u | (uint32_t)cqid << 16, base);
	return admin_cmd(h, &s);
}

/** Create CQ @qid (@cqn entries) then SQ @qid (@sqn) in the main region. @return the first failing status. */
static int create_qpair(struct host *h, uint16_t qid, uint16_t sqn, uint16_t cqn, struct qpair *q)
{
	uint64_t sq = halloc(h, (uint64_t)sqn * 64), cq = halloc(h, (uint64_t)cqn * 16);
	int st;

	if (!sq || !cq)
		return ST_TIMEOUT;
	if ((st = create_cq(h, qid, cqn, cq)) != 0 || (st = create_sq(h, qid, sqn, qid, sq)) != 0)
		return st;
	q->qid = qid;
	host_rings(h, qid, sq, sqn, cq, cqn, &q->sq, &q->cq);
	return 0;
}

/** Connect as @id, register @mem bytes, enable, grant @nq queues, create qpair 1. @return 0 or a status. */
static int host_ready(struct host *h, unsigned id, uint64_t mem, uint16_t nq, uint16_t sqn, uint16_t cqn,
		      struct qpair *q)
{
	int rc = host_setup(h, id, mem);

	if (rc != 0)
		return rc;
	if ((ctrl_enable(h) & (NKV_CSTS_RDY | NKV_CSTS_CFS)) != NKV_CSTS_RDY)
		return -EIO;
	if ((rc = set_num_queues(h, nq)) != 0)
		return rc;
	return q ? create_qpair(h, 1, sqn, cqn, q) : 0;
}

/* ---- data buffers --------------------------------------------------------------------------------- */

/** A buffer's PRP1/PRP2, built once and reused by every command that moves it. */
struct dbuf {
	uint32_t len;
	uint64_t prp1, prp2;
};

/**
 * @len bytes (page multiple) in the main region; @scatter: every other page in reverse order, so
 * the target must bounce it; PRP lists chained across list pages as docs/nvme-kv-wire.md B.5 says.
 */
static bool dbuf_alloc(struct host *h, struct dbuf *d, uint32_t len, bool scatter)
{
	uint32_t npages = len / PG;
	uint64_t base = halloc(h, (uint64_t)npages * PG * (scatter ? 2 : 1));

	d->len = len;
	if (!base)
		return false;
	for (uint32_t i = 0; i < npages * (scatter ? 2 : 1); i++)
		memset(hva(h, base + (uint64_t)i * PG), (int)(i & 0xff), PG);
#define PAGE_AT(i) (base + (scatter ? 2ull * (npages - 1 - (i)) : (uint64_t)(i)) * PG)
	d->prp1 = PAGE_AT(0);
	d->prp2 = 0;
	if (npages == 2) {
		d->prp2 = PAGE_AT(1);
	} else if (npages > 2) {
		uint64_t list = halloc(h, PG);
		uint8_t *lp;
		unsigned slot = 0;
		if (!list)
			return false;
		lp = hva(h, list);
		d->prp2 = list;
		for (uint32_t i = 1; i < npages; i++) {
			if (slot == PG / 8 - 1 && npages - i > 1) { /* last slot, more to come: chain */
				uint64_t next = halloc(h, PG);
				if (!next)
					return false;
				nkv_put64(lp + slot * 8, next);
				lp = hva(h, next);
				slot = 0;
			}
			nkv_put64(lp + slot++ * 8, PAGE_AT(i));
		}
	}
#undef PAGE_AT
	return true;
}

static struct nkv_sqe sqe_kv(uint8_t opc, const char *key, const struct dbuf *d)
{
	struct nkv_sqe s;

	nkv_sqe_kv(&s, opc, 1, (const uint8_t *)key, (unsigned)strlen(key), d ? d->len : 0, 0);
	if (d) {
		nkv_put64(s.dptr, d->prp1);
		nkv_put64(s.dptr + 8, d->prp2);
	}
	return s;
}

/* ---- the victim ----------------------------------------------------------------------------------- */

struct lat {
	unsigned ok, bad;
	uint64_t sum_us, max_us;
};

/** @n Stores of @d (each waited for, up to @tmo_ms) on @q; latencies into @l. */
static void victim_run(struct host *h, struct qpair *q, const struct dbuf *d, unsigned n, int tmo_ms, struct lat *l)
{
	memset(l, 0, sizeof(*l));
	for (unsigned i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof(key), "victim-%u", i % 8);
		struct nkv_sqe s = sqe_kv(NKV_KV_STORE, key, d);
		uint64_t t0 = now_us();
		int st = exec_cmd(h, &q->sq, &q->cq, &s, tmo_ms);
		uint64_t dt = now_us() - t0;
		if (st != 0) {
			l->bad++;
			if (st == ST_TIMEOUT)
				break; /* the queue is out of step now: stop */
			continue;
		}
		l->ok++;
		l->sum_us += dt;
		if (dt > l->max_us)
			l->max_us = dt;
	}
}

static uint64_t lat_avg_us(const struct lat *l)
{
	return l->ok ? l->sum_us / l->ok : 0;
}

/* ---- target --------------------------------------------------------------------------------------- */

static struct nkv_shm *shm_start(const struct nkv_shm_conf *conf)
{
	struct nkv_shm *s = NULL;
	int rc = nkv_shm_create(g_tgt, conf, &s);

	if (rc == 0 && (rc = nkv_shm_listen(s, SUBNQN, g_sock)) < 0) {
		nkv_shm_destroy(s, 0);
		s = NULL;
	}
	CHECK(rc == 0, "shm transport: %s", strerror(-rc));
	return rc == 0 ? s : NULL;
}

/* ---- finding 8: teardown with hosts connected ----------------------------------------------------- */

#define TEARDOWN_HOSTS 200
#define TEARDOWN_ROUNDS 3

/*
 * Pollers used to free every controller as soon as stop was set, while the socket thread's final
 * close loop still read and wrote them (heap-use-after-free under ASan in 3 of 3 runs). Half the
 * hosts have live queues so that reaping is not instant either.
 */
static void test_teardown(void)
{
	static struct host hosts[TEARDOWN_HOSTS];
	struct nkv_shm_conf conf = {.pollers = 4};

	for (unsigned round = 0; round < TEARDOWN_ROUNDS; round++) {
		struct nkv_shm *s = shm_start(&conf);
		unsigned up = 0, ready = 0;
		if (!s)
			return;
		for (unsigned i = 0; i < TEARDOWN_HOSTS; i++) {
			struct qpair q;
			int rc = i % 2 ? host_connect(&hosts[i], 1000 + i) : host_ready(&hosts[i], 1000 + i, 256 * KIB, 1, 16, 16, &q);
			up += rc == 0;
			ready += rc == 0 && i % 2 == 0;
		}
		CHECK(up == TEARDOWN_HOSTS && ready == TEARDOWN_HOSTS / 2, "round %u: %u hosts up, %u with queues", round,
		      up, ready);
		uint64_t t0 = now_ms();
		nkv_shm_destroy(s, 100);
		uint64_t dt = now_ms() - t0;
		CHECK(dt < 3000, "round %u: destroy with %u hosts connected took %llu ms (bound 3000)", round, up,
		      (unsigned long long)dt);
		unsigned closed = 0;
		for (unsigned i = 0; i < TEARDOWN_HOSTS; i++) {
			closed += hosts[i].sock >= 0 && sock_closed(hosts[i].sock, 50);
			host_close(&hosts[i]);
		}
		CHECK(closed == TEARDOWN_HOSTS, "round %u: %u of %u host sockets closed by the target", round, closed,
		      TEARDOWN_HOSTS);
		printf("teardown round %u: %u hosts, destroy %llu ms\n", round, up, (unsigned long long)dt);
	}
}

/* ---- finding 4: bounce memory held hostage ----------------------------------------------------- */

#define B4_BUDGET (32u * MIB)
#define B4_VICTIM_MAX_MS 500

/*
 * An attacker with a 2-entry CQ that never moves its head submits scattered 2 MiB Stores: each one
 * used to keep its bounce charge until its CQE was posted, i.e. forever, so the 32 MiB budget ran
 * out and every other host's bounced command waited (and the poller re-walked the waiting list on
 * every scan). Asserts: the victim's scattered 64 KiB Stores complete, each within 500 ms, while
 * the attacker holds its CQ full; the process is mostly idle meanwhile; after the attacker leaves
 * the anonymous RSS is back within 16 MiB of where it was before it came.
 */
static void test_bounce(void)
{
	struct nkv_shm_conf conf = {.pollers = 1, .bounce_budget = B4_BUDGET};
	struct nkv_shm *s = shm_start(&conf);
	struct host a, v;
	struct qpair qa, qv;
	struct dbuf da, dv;
	struct lat l;

	if (!s)
		return;
	int rc = host_ready(&v, 2, 4 * MIB, 1, 16, 16, &qv);
	CHECK(rc == 0 && dbuf_alloc(&v, &dv, 64 * KIB, true), "victim ready: %d", rc);
	victim_run(&v, &qv, &dv, 4, TMO_MS, &l); /* warm up: the mem backend's table and key */
	uint64_t rss0 = rss_anon();
	rc = host_ready(&a, 1, 16 * MIB, 1, 64, 2, &qa);
	CHECK(rc == 0 && dbuf_alloc(&a, &da, 2 * MIB, true), "attacker ready: %d", rc);
	unsigned sent = 0;
	for (unsigned i = 0; rc == 0 && i < 40; i++) {
		struct nkv_sqe sq = sqe_kv(NKV_KV_STORE, "attack", &da);
		sent += submit(&a, &qa.sq, &sq) >= 0;
	}
	usleep(300 * 1000); /* the attacker's commands ran; their CQEs wait for a CQ head that never moves */
	victim_run(&v, &qv, &dv, 20, 2000, &l);
	printf("bounce: attacker %u scattered 2 MiB Stores on a 2-entry CQ; victim 64 KiB bounced Stores: %u ok, %u "
	       "failed, avg %llu us, max %llu us\n", sent, l.ok, l.bad, (unsigned long long)lat_avg_us(&l),
	       (unsigned long long)l.max_us);
	CHECK(l.ok == 20 && l.max_us < B4_VICTIM_MAX_MS * 1000ull,
	      "victim's bounced Stores while the attacker's CQ is full: %u of 20, max %llu ms (bound %u)", l.ok,
	      (unsigned long long)l.max_us / 1000, B4_VICTIM_MAX_MS);
	double c0 = cpu_s();
	usleep(1000 * 1000);
	double busy = cpu_s() - c0;
	printf("bounce: CPU over 1 s with the attacker stalled: %.2f s\n", busy);
	CHECK(busy < 0.5, "the poller does not spin on the attacker's waiting commands: %.2f CPU s in 1 s (bound 0.5)",
	      busy);
	host_close(&a);
	usleep(500 * 1000);
	victim_run(&v, &qv, &dv, 4, TMO_MS, &l);
	int64_t grew = (int64_t)rss_anon() - (int64_t)rss0;
	printf("bounce: RSS after the attacker left: %+lld KiB (its 2 MiB value is stored)\n", (long long)grew / 1024);
	CHECK(l.ok == 4 && grew < 16ll * MIB, "after the attacker left: victim %u of 4, RSS %+lld KiB (bound 16 MiB)",
	      l.ok, (long long)grew / 1024);
	host_close(&v);
	nkv_shm_destroy(s, 100);
}

/* ---- finding 5: one host's copies stall the poller ----------------------------------------------- */

#define P5_VALUE (16u * MIB)
#define P5_INFLIGHT 32
#define P5_AVG_MS 25
#define P5_MAX_MS 250
#define P5_ENABLE_MS 1000

struct attacker {
	struct host h;
	struct qpair q;
	struct dbuf d;
	atomic_bool stop;
	unsigned done, bad;
};

/* Keep P5_INFLIGHT scattered Stores in flight (reading CQEs as they come) until told to stop. */
static void *attacker_main(void *arg)
{
	struct attacker *a = arg;
	unsigned inflight = 0;
	uint64_t end = now_ms() + 60000;

	while ((!atomic_load(&a->stop) || inflight) && now_ms() < end) {
		while (!atomic_load(&a->stop) && inflight < P5_INFLIGHT) {
			struct nkv_sqe s = sqe_kv(NKV_KV_STORE, "flood", &a->d);
			if (submit(&a->h, &a->q.sq, &s) < 0)
				break;
			inflight++;
		}
		struct nkv_cqe e;
		if (nkv_cq_peek(&a->q.cq, &e)) {
			nkv_cq_advance(&a->q.cq, &a->q.sq, &e);
			nkv_cq_ring(&a->q.cq);
			inflight--;
			a->done++;
			a->bad += cqe_code(&e) != 0;
		} else {
			usleep(200);
		}
	}
	return NULL;
}

/*
 * An attacker keeps 32 scattered 16 MiB Stores in flight; bounce copies used to run whole on the
 * poller, so another host's 4 KiB direct Stores on the same poller waited for all of them, and a
 * new host could not get through enabling. Asserts: a new host comes up within 1 s, and the
 * victim's Stores average under 25 ms with none over 250 ms while the attacker runs.
 */
static void test_poller(void)
{
	struct nkv_shm_conf conf = {.pollers = 1, .bounce_budget = 256u * MIB};
	struct nkv_shm *s = shm_start(&conf);
	static struct attacker a;
	struct host v;
	struct qpair qv;
	struct dbuf dv;
	struct lat l;
	pthread_t th;

	if (!s)
		return;
	memset(&a, 0, sizeof(a));
	int rc = host_ready(&a.h, 11, 2 * P5_VALUE + 2 * MIB, 1, 64, 64, &a.q);
	CHECK(rc == 0 && dbuf_alloc(&a.h, &a.d, P5_VALUE, true), "attacker ready: %d", rc);
	if (rc != 0 || pthread_create(&th, NULL, attacker_main, &a) != 0) {
		host_close(&a.h);
		nkv_shm_destroy(s, 100);
		return;
	}
	usleep(500 * 1000);
	uint64_t t0 = now_us();
	rc = host_ready(&v, 12, 1 * MIB, 1, 16, 16, &qv);
	uint64_t enable_us = now_us() - t0;
	CHECK(rc == 0 && dbuf_alloc(&v, &dv, 4 * KIB, false), "victim ready during the flood: %d", rc);
	CHECK(enable_us < P5_ENABLE_MS * 1000ull, "a new host connects and enables within %u ms: %llu ms",
	      P5_ENABLE_MS, (unsigned long long)enable_us / 1000);
	victim_run(&v, &qv, &dv, 50, 20000, &l);
	unsigned during = a.done;
	atomic_store(&a.stop, true);
	pthread_join(th, NULL);
	printf("poller: new host enabled in %llu ms; victim 4 KiB direct Stores: %u ok, avg %llu us, max %llu us; "
	       "attacker: %u Stores of 16 MiB done meanwhile (%u failed)\n",
	       (unsigned long long)enable_us / 1000, l.ok, (unsigned long long)lat_avg_us(&l),
	       (unsigned long long)l.max_us, during, a.bad);
	CHECK(l.ok == 50 && lat_avg_us(&l) < P5_AVG_MS * 1000ull && l.max_us < P5_MAX_MS * 1000ull,
	      "victim during the flood: %u of 50, avg %llu ms (bound %u), max %llu ms (bound %u)", l.ok,
	      (unsigned long long)lat_avg_us(&l) / 1000, P5_AVG_MS, (unsigned long long)l.max_us / 1000, P5_MAX_MS);
	CHECK(during > 0 && a.bad == 0, "the attacker is served too: %u Stores, %u failed", during, a.bad);
	host_close(&a.h);
	host_close(&v);
	nkv_shm_destroy(s, 100);
}

/* ---- finding 7: memory amplification, controller and connection limits --------------------------- */

#define A7_PER_HOST 4
#define A7_TOTAL 8
#define A7_QUEUES 16
#define A7_RSS_BOUND (8ull * MIB)

/*
 * About 1 MiB of host memory (16 queue pairs x 4,096 entries on one shared ring) used to cost the
 * target a 4,096-request table per SQ (~20 MB per controller); hosts could open controllers and
 * silent connections without limit. Asserts: SQs and CQs overlapping a live queue are refused with
 * 02h; four such controllers cost under 8 MiB; a fifth of the same host NQN gets -EUSERS, as does
 * any HELLO past 8 controllers in all, while another host still gets in and is served; silent
 * connections are closed after the HELLO timeout and never lock a new host out; once everyone has
 * left, the RSS is back within 8 MiB and the first host may connect again.
 */
static void test_amplify(void)
{
	struct nkv_shm_conf conf = {.pollers = 1, .max_io_queues = A7_QUEUES, .max_ctrls = A7_TOTAL,
				    .max_ctrls_per_host = A7_PER_HOST, .hello_timeout_ms = 300, .max_cmds = 64};
	struct nkv_shm *s = shm_start(&conf);
	static struct host a[A7_PER_HOST + 1], b[A7_TOTAL], v, v2;
	struct qpair qv;
	struct dbuf dv;
	struct lat l;
	unsigned refused = 0, accepted = 0;

	if (!s)
		return;
	uint64_t rss0 = rss_anon();
	for (unsigned i = 0; i < A7_PER_HOST; i++) {
		int rc = host_ready(&a[i], 21, 1 * MIB + 64 * KIB, A7_QUEUES, 0, 0, NULL);
		uint64_t ring = halloc(&a[i], 4096ull * 64), cqr = halloc(&a[i], 4096ull * 16);
		CHECK(rc == 0 && ring && cqr, "attacker controller %u: %d", i, rc);
		if (rc != 0 || create_cq(&a[i], 1, 4096, cqr) != 0)
			continue;
		for (uint16_t q = 1; q <= A7_QUEUES; q++) {
			int st = create_sq(&a[i], q, 4096, 1, ring);
			accepted += q > 1 && st == 0;
			refused += q > 1 && st == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD);
		}
		refused += create_cq(&a[i], 2, 4096, ring) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD);
	}
	int64_t grew = (int64_t)rss_anon() - (int64_t)rss0;
	printf("amplify: %u controllers x %u SQs of 4,096 entries on one ring: %u overlapping queues accepted, %u "
	       "refused; RSS %+lld KiB\n", A7_PER_HOST, A7_QUEUES, accepted, refused, (long long)grew / 1024);
	CHECK(accepted == 0 && refused == A7_PER_HOST * A7_QUEUES,
	      "overlapping queues refused with 02h: %u accepted, %u refused", accepted, refused);
	CHECK(grew < (int64_t)A7_RSS_BOUND, "4 controllers with 4,096-entry queues: RSS %+lld KiB (bound %llu KiB)",
	      (long long)grew / 1024, A7_RSS_BOUND / 1024);
	int rc = host_connect(&a[A7_PER_HOST], 21);
	CHECK(rc == -EUSERS, "controller %u of one host NQN: %d (want -EUSERS)", A7_PER_HOST + 1, rc);
	host_close(&a[A7_PER_HOST]);

	rc = host_ready(&v, 22, 1 * MIB, 1, 16, 16, &qv);
	CHECK(rc == 0 && dbuf_alloc(&v, &dv, 4 * KIB, false), "victim gets a controller: %d", rc);
	victim_run(&v, &qv, &dv, 20, 2000, &l);
	CHECK(l.ok == 20 && l.max_us < 500000, "victim served: %u of 20, max %llu ms (bound 500)", l.ok,
	      (unsigned long long)l.max_us / 1000);
	unsigned got = 0;
	for (unsigned i = 0; i < A7_TOTAL; i++) {
		rc = host_connect(&b[i], 23 + i);
		got += rc == 0;
		if (rc != 0) {
			CHECK(rc == -EUSERS && got == A7_TOTAL - A7_PER_HOST - 1, "HELLO past %u controllers: %d after %u",
			      A7_TOTAL, rc, got);
			break;
		}
	}
	for (unsigned i = 0; i < A7_TOTAL; i++)
		host_close(&b[i]);

	/* Silent connections: more than the target keeps, then a real host. */
	static int silent[100];
	for (unsigned i = 0; i < 100; i++)
		silent[i] = unix_connect(g_sock);
	usleep(100 * 1000);
	uint64_t t0 = now_ms();
	rc = host_connect(&v2, 40);
	uint64_t dt = now_ms() - t0;
	CHECK(rc == 0 && dt < 1000, "a host gets in past 100 silent connections: %d in %llu ms", rc,
	      (unsigned long long)dt);
	unsigned closed = 0;
	usleep(1000 * 1000); /* three HELLO timeouts */
	for (unsigned i = 0; i < 100; i++) {
		closed += silent[i] >= 0 && sock_closed(silent[i], 100);
		if (silent[i] >= 0)
			close(silent[i]);
	}
	printf("amplify: %u of 100 silent connections closed by the target\n", closed);
	CHECK(closed == 100, "silent connections closed after the HELLO timeout: %u of 100", closed);

	host_close(&v2);
	host_close(&v);
	for (unsigned i = 0; i < A7_PER_HOST; i++)
		host_close(&a[i]);
	usleep(500 * 1000);
	grew = (int64_t)rss_anon() - (int64_t)rss0;
	rc = host_connect(&a[0], 21);
	printf("amplify: after everyone left: RSS %+lld KiB, the first host again: %d\n", (long long)grew / 1024, rc);
	CHECK(rc == 0 && grew < (int64_t)A7_RSS_BOUND, "after everyone left: HELLO %d, RSS %+lld KiB (bound %llu KiB)",
	      rc, (long long)grew / 1024, A7_RSS_BOUND / 1024);
	host_close(&a[0]);
	nkv_shm_destroy(s, 100);
}

/* ---- main ----------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {
		{"teardown", test_teardown}, {"bounce", test_bounce}, {"poller", test_poller}, {"amplify", test_amplify},
	};
	struct nkv_subsys *ss;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 && rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096; /* 200 hosts: both ends here */
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	snprintf(g_dir, sizeof(g_dir), "/tmp/shm_abuse.XXXXXX");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(g_sock, sizeof(g_sock), "%s/s.sock", g_dir);
	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_ns_conf ns = {.nsid = 1, .rados_ns = "shm-abuse"};
	if ((rc = nkv_target_create(&bc, &g_tgt)) < 0 || (rc = nkv_subsys_add(g_tgt, SUBNQN, "nkv", &ss)) < 0 ||
	    (rc = nkv_ns_add(ss, &ns)) < 0) {
		fprintf(stderr, "shm_abuse: target setup failed: %s\n", strerror(-rc));
		return 1;
	}
	unsigned ran = 0;
	for (unsigned i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		if (argc > 1 && strcmp(argv[1], groups[i].name) != 0)
			continue;
		unsigned f0 = h_fail;
		uint64_t t0 = now_ms();
		groups[i].fn();
		ran++;
		printf("%-10s %s (%llu ms)\n", groups[i].name, h_fail == f0 ? "ok" : "FAILED",
		       (unsigned long long)(now_ms() - t0));
	}
	CHECK(ran > 0, "no group named %s", argc > 1 ? argv[1] : "");
	nkv_target_destroy(g_tgt);
	unlink(g_sock);
	rmdir(g_dir);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
