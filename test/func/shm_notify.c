/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_notify.c - the shared-memory transport's notifications (nkv_shm.h): doorbell kicks and CQ
 * interrupts over eventfds, against the polling they replace.
 *
 * Usage: shm_notify mem|rados. One target (harness.h) with two shm transports on the same subsystem:
 * "on" (defaults: notifications offered) and "off" (conf.no_notify: the old polling protocol), one
 * poller each, so each poller's thread CPU time is that transport's cost alone. Groups:
 *  proto    a raw host: the feature register, SET_KICK / SET_IRQ refusals, NEED_WAKEUP published
 *  idle     a connected, idle host costs the "on" poller < 2 % of a core over 1 s (the "off" poller's
 *           naps are measured the same way, and must cost more)
 *  slow     a host blocked on a command that takes long (an Asynchronous Event Request, answered when
 *           a namespace is added) does not spin: its thread's CPU time while waiting is small, and
 *           the completion still arrives promptly
 *  burst    after random idle gaps of 0-200 us, QD 32 on 4 queue pairs (a thread each), many times:
 *           every command completes and verifies; no kick or interrupt was lost (the poller's and
 *           libnkv's counters of sleeps that timed out with work waiting stay 0)
 *  adapt    QD 1 commands one after another: against RADOS (hundreds of microseconds) the host stops
 *           spinning before it arms its interrupt and arms at once (against mem, microseconds, it
 *           spins where its spins find CQEs: printed); every completion still comes (no wake-up lost)
 *  fallback a host that binds nothing (a target that refuses, or NKV_SHM_NOTIFY=off) still works
 *  nokick   a third transport without notifications (no kick, as vfio-user), 500 us naps: QD 1
 *           commands 100 us apart; the poller keeps scanning after work for 4 naps' time instead of
 *           napping after 64 empty scans, so on mem it naps for under a quarter of the commands (the
 *           old poller, for nearly each; the window's margin over the pause is for loaded machines)
 * Every check counts; the last line is "N passed, N failed".
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdpass.h"
#include "harness.h"
#include "nkv/nkv_devq.h"
#include "nkv/nkv_shm.h"
#undef SC /* harness.h's; shm_host.h has its own (unused here) */
#include "shm_host.h"
#include "shm_notify.h"

#define NSID 1
#define BURST_QPS 4
#define BURST_QD 32
#define VLEN 512

static struct nkv_shm *g_off;  /* the transport without notifications */
static char g_sock_off[128];
static bool g_mem;

/** CPU time of @t in ns. */
static uint64_t thread_cpu_ns(pthread_t t)
{
	clockid_t cid;
	struct timespec ts;
	if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_t poller_thread(struct nkv_shm *s)
{
	struct sn_poller p;
	sn_poller(s, 0, &p);
	return p.thread;
}

static struct nkv_ctrl *connect_to(const char *sock)
{
	struct nkv_conn_opts o = {.hostnqn = HOSTNQN, .timeout_ms = 20000};
	struct nkv_ctrl *c = NULL;
	memcpy(o.hostid, H_HOSTID, 16);
	int rc = nkv_connect_shm(sock, &o, &c);
	CHECK(rc == 0, "connect to %s: %s", sock, strerror(-rc));
	return rc == 0 ? c : NULL;
}

/* ---- proto: the raw protocol ------------------------------------------------------------------- */

static int bind_raw(struct host *h, uint16_t op, uint16_t vector, uint16_t rsvd0, int fd)
{
	struct nkv_shm_bind m;
	struct nkv_shm_reply rep;
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, op);
	m.vector = vector;
	m.rsvd0 = rsvd0;
	if (nkv_send_fd(h->sock, &m, sizeof(m), fd) != (ssize_t)sizeof(m) || recv_reply(h->sock, &rep, NULL, TMO_MS) != 1)
		return -EPROTO;
	return rep.status;
}

static void test_proto(void)
{
	uint8_t id[16] = {1, 2, 3};
	struct host on, off;
	int rc;

	CHECK((rc = host_hello(&on, H.sock, id, HOSTNQN)) == 0, "hello on: %d", rc);
	CHECK((rc = host_hello(&off, g_sock_off, id, HOSTNQN)) == 0, "hello off: %d", rc);
	if (on.sock < 0 || off.sock < 0)
		goto out;
	uint16_t maxq = on.hello.max_queues;
	uint32_t noff = rd32(&on, NKV_SHM_REG_NOTIFY);
	CHECK(rd32(&on, NKV_SHM_REG_FEAT) == (NKV_SHM_FEAT_NOTIFY | NKV_SHM_FEAT_XFER) && noff == nkv_shm_notify_off(maxq),
	      "on: FEAT %#x, notification area at %#x", rd32(&on, NKV_SHM_REG_FEAT), noff);
	CHECK(on.reg_size == nkv_shm_reg_size(maxq) && noff + NKV_SHM_NOTIFY_ARM + 4u * (maxq + 1u) <= on.reg_size,
	      "register page %u bytes for %u queues", on.reg_size, maxq);
	CHECK(rd32(&off, NKV_SHM_REG_FEAT) == NKV_SHM_FEAT_XFER, "off: FEAT %#x", rd32(&off, NKV_SHM_REG_FEAT));

	int efd = eventfd(0, EFD_CLOEXEC), pfd[2] = {-1, -1};
	CHECK(efd >= 0 && pipe(pfd) == 0, "eventfd and pipe");
	CHECK((rc = bind_raw(&off, NKV_SHM_SET_KICK, 0, 0, efd)) == -ENOTSUP, "off: SET_KICK: %d", rc);
	CHECK((rc = bind_raw(&off, NKV_SHM_SET_IRQ, 0, 0, efd)) == -ENOTSUP, "off: SET_IRQ: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_KICK, 0, 0, pfd[1])) == -EINVAL, "SET_KICK with a pipe: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_IRQ, 1, 0, pfd[1])) == -EINVAL, "SET_IRQ with a pipe: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_IRQ, (uint16_t)(maxq + 1), 0, efd)) == -EINVAL,
	      "SET_IRQ vector past max_queues: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_IRQ, 1, 0, -1)) == -EBADF, "SET_IRQ without an fd: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_IRQ, 1, 7, efd)) == -EINVAL, "SET_IRQ rsvd: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_KICK, 3, 0, efd)) == -EINVAL, "SET_KICK with a vector: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_KICK, 0, 0, -1)) == 0, "unbind an unbound kick: %d", rc);
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_IRQ, maxq, 0, efd)) == 0, "SET_IRQ: %d", rc);
	/* A bound vector gets one interrupt at once (a CQ armed before the bind could have missed one). */
	uint64_t v = 0;
	struct pollfd p = {.fd = efd, .events = POLLIN};
	CHECK(poll(&p, 1, TMO_MS) == 1 && read(efd, &v, sizeof(v)) == 8 && v >= 1, "bind interrupt: %llu",
	      (unsigned long long)v);
	/* With a kick bound and nothing to do, the poller publishes NEED_WAKEUP; unbound, it clears it. */
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_KICK, 0, 0, efd)) == 0, "SET_KICK: %d", rc);
	uint64_t end = now_ms() + TMO_MS;
	while (rd32(&on, noff + NKV_SHM_NOTIFY_WAKEUP) != 1 && now_ms() < end)
		usleep(1000);
	CHECK(rd32(&on, noff + NKV_SHM_NOTIFY_WAKEUP) == 1, "NEED_WAKEUP not set by an idle poller");
	/* A kick wakes it (it clears NEED_WAKEUP when it wakes, sets it again before the next sleep). */
	struct sn_poller before, after;
	sn_poller(H.shm, 0, &before);
	uint64_t one = 1;
	CHECK(write(efd, &one, sizeof(one)) == 8, "kick");
	end = now_ms() + TMO_MS;
	do {
		usleep(1000);
		sn_poller(H.shm, 0, &after);
	} while (after.kicks == before.kicks && now_ms() < end);
	CHECK(after.kicks > before.kicks, "the poller took no kick");
	CHECK((rc = bind_raw(&on, NKV_SHM_SET_KICK, 0, 0, -1)) == 0, "unbind: %d", rc);
	end = now_ms() + TMO_MS;
	while (rd32(&on, noff + NKV_SHM_NOTIFY_WAKEUP) != 0 && now_ms() < end)
		usleep(1000);
	CHECK(rd32(&on, noff + NKV_SHM_NOTIFY_WAKEUP) == 0, "NEED_WAKEUP left set after the unbind");
	close(efd);
	close(pfd[0]);
	close(pfd[1]);
out:
	host_close(&on);
	host_close(&off);
}

/* ---- idle: what a connected, idle host costs the target --------------------------------------------- */

static void test_idle(void)
{
	struct nkv_ctrl *on = connect_to(H.sock), *off = connect_to(g_sock_off);
	struct nkv_qpair *qon = NULL, *qoff = NULL;
	if (!on || !off)
		goto out;
	CHECK(nkv_qpair_create(on, 8, &qon) == 0 && nkv_qpair_create(off, 8, &qoff) == 0, "queue pairs");
	usleep(200 * 1000); /* past the pollers' idle scans */
	pthread_t pon = poller_thread(H.shm), poff = poller_thread(g_off);
	uint64_t t0 = nkv_now_ns(), c_on = thread_cpu_ns(pon), c_off = thread_cpu_ns(poff);
	usleep(1000 * 1000);
	uint64_t wall = nkv_now_ns() - t0;
	c_on = thread_cpu_ns(pon) - c_on;
	c_off = thread_cpu_ns(poff) - c_off;
	double pct_on = 100.0 * (double)c_on / (double)wall, pct_off = 100.0 * (double)c_off / (double)wall;
	printf("idle: poller CPU over %.2f s with one idle host: notifications %.2f %% of a core, polling %.2f %%\n",
	       (double)wall / 1e9, pct_on, pct_off);
	CHECK(pct_on < 2.0, "an idle host costs the poller %.2f %% of a core", pct_on);
	CHECK(c_off > c_on, "the polling transport's naps (%.2f %%) cost no more than sleeping (%.2f %%)", pct_off,
	      pct_on);
out:
	nkv_qpair_destroy(qon);
	nkv_qpair_destroy(qoff);
	if (on)
		nkv_disconnect(on);
	if (off)
		nkv_disconnect(off);
}

/* ---- slow: a host waiting long for one completion ------------------------------------------------- */

struct aer_wait {
	struct nkv_ctrl *c;
	pthread_t t;
	int rc;
	struct nkv_cpl cpl;
	uint64_t done_ns;
};

static void *aer_main(void *arg)
{
	struct aer_wait *w = arg;
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_ASYNC_EVENT;
	w->rc = nkv_admin(w->c, &sqe, NULL, 0, &w->cpl);
	w->done_ns = nkv_now_ns();
	return NULL;
}

static int enable_ns_notices(struct nkv_ctrl *c)
{
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_SET_FEATURES;
	nkv_put32(&sqe.cdw10, NKV_FEAT_ASYNC_EVENT);
	nkv_put32(&sqe.cdw11, NKV_OAES_NS_ATTR);
	return nkv_admin(c, &sqe, NULL, 0, NULL);
}

static void test_slow(void)
{
	struct aer_wait w[2] = {{.c = connect_to(H.sock)}, {.c = connect_to(g_sock_off)}};
	bool started[2] = {false, false};
	if (!w[0].c || !w[1].c)
		goto out;
	for (int i = 0; i < 2; i++) {
		int rc = enable_ns_notices(w[i].c);
		CHECK(rc == 0, "Set Features Async Event Configuration: %s", strerror(-rc));
		started[i] = rc == 0 && pthread_create(&w[i].t, NULL, aer_main, &w[i]) == 0;
	}
	if (!started[0] || !started[1])
		goto out;
	usleep(100 * 1000); /* both wait now */
	uint64_t t0 = nkv_now_ns(), c0 = thread_cpu_ns(w[0].t), c1 = thread_cpu_ns(w[1].t);
	usleep(500 * 1000);
	uint64_t wall = nkv_now_ns() - t0;
	c0 = thread_cpu_ns(w[0].t) - c0;
	c1 = thread_cpu_ns(w[1].t) - c1;
	double p0 = 100.0 * (double)c0 / (double)wall, p1 = 100.0 * (double)c1 / (double)wall;
	uint64_t trig = nkv_now_ns();
	h_add_ns(NSID + 1, "aen", 0, false); /* a namespace change: both AERs complete */
	for (int i = 0; i < 2; i++) {
		pthread_join(w[i].t, NULL);
		started[i] = false;
	}
	double l0 = (double)(w[0].done_ns - trig) / 1e6, l1 = (double)(w[1].done_ns - trig) / 1e6;
	printf("slow: a thread waiting %.2f s for its AER: interrupts %.2f %% of a core (answered %.2f ms after the "
	       "event), polling %.2f %% (%.2f ms)\n", (double)wall / 1e9, p0, l0, p1, l1);
	for (int i = 0; i < 2; i++)
		CHECK(w[i].rc == 0 && w[i].cpl.dw0 == NKV_AEN_NS_ATTR_CHANGED, "AER %d: %s, DW0 %#x", i,
		      strerror(-w[i].rc), w[i].cpl.dw0);
	CHECK(p0 < 2.0, "a host sleeping on its interrupt spent %.2f %% of a core", p0);
	CHECK(c1 > c0, "the polling host (%.2f %%) spent no more than the sleeping one (%.2f %%)", p1, p0);
	CHECK(l0 < 50.0, "the interrupt came %.2f ms after the event", l0);
out:
	for (int i = 0; i < 2; i++) {
		if (started[i]) /* its AER never completed: closing the controller fails it */
			pthread_detach(w[i].t);
		if (w[i].c && !started[i])
			nkv_disconnect(w[i].c);
	}
}

/* ---- burst: QD 32 on several queue pairs after idle gaps -------------------------------------------- */

struct burst {
	struct nkv_ctrl *c;
	struct nkv_qpair *qp;
	unsigned idx, cycles;
	uint8_t *bufs;                /* BURST_QD values of VLEN, registered */
	atomic_uint done;
	unsigned bad, stuck;
	uint64_t max_ns, seed;
	pthread_t t;
};

static void burst_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct burst *b = arg;
	if (cpl->status)
		b->bad++;
	atomic_fetch_add(&b->done, 1);
}

static void *burst_main(void *arg)
{
	struct burst *b = arg;
	prctl(PR_SET_TIMERSLACK, 1UL); /* gaps of the length asked for, not the default 50 us slack */
	for (unsigned cyc = 0; cyc < b->cycles && !b->stuck; cyc++) {
		struct timespec gap = {0, (long)(h_rand(&b->seed) % 201) * 1000};
		nanosleep(&gap, NULL);
		bool store = cyc % 2 == 0; /* odd cycles read back what the one before stored */
		uint64_t t0 = nkv_now_ns();
		atomic_store(&b->done, 0);
		for (unsigned i = 0; i < BURST_QD; i++) {
			char key[16];
			uint8_t *v = b->bufs + (size_t)i * VLEN;
			snprintf(key, sizeof(key), "b%u-%u", b->idx, i);
			int rc;
			if (store) {
				h_fill(v, VLEN, (uint64_t)cyc << 16 | i);
				rc = nkv_store_async(b->qp, NSID, key, (unsigned)strlen(key), v, VLEN, 0, burst_cb, b);
			} else {
				memset(v, 0, VLEN);
				rc = nkv_retrieve_async(b->qp, NSID, key, (unsigned)strlen(key), v, VLEN, burst_cb, b);
			}
			if (rc) {
				b->bad++;
				atomic_fetch_add(&b->done, 1);
			}
		}
		uint64_t deadline = nkv_now_ns() + 10ull * 1000000000ull;
		while (atomic_load(&b->done) < BURST_QD && nkv_now_ns() < deadline)
			if (nkv_qpair_poll(b->qp, 1000) < 0)
				break;
		if (atomic_load(&b->done) < BURST_QD) {
			b->stuck++;
			break;
		}
		uint64_t dt = nkv_now_ns() - t0;
		if (dt > b->max_ns)
			b->max_ns = dt;
		if (!store)
			for (unsigned i = 0; i < BURST_QD; i++)
				if (!h_verify(b->bufs + (size_t)i * VLEN, VLEN, (uint64_t)(cyc - 1) << 16 | i))
					b->bad++;
	}
	return NULL;
}

static void test_burst(void)
{
	struct nkv_ctrl *c = connect_to(H.sock);
	struct burst b[BURST_QPS];
	unsigned cycles = g_mem ? 2000 : 200, n = 0;
	memset(b, 0, sizeof(b));
	if (!c)
		return;
	CHECK(sn_kick_bound(c), "libnkv bound no kick on a target that offers notifications");
	struct sn_poller p0, p1;
	sn_poller(H.shm, 0, &p0);
	uint64_t t0 = nkv_now_ns();
	for (; n < BURST_QPS; n++) {
		b[n] = (struct burst){.c = c, .idx = n, .cycles = cycles, .seed = 0x5eed + n};
		if (nkv_qpair_create(c, BURST_QD, &b[n].qp) != 0 || !(b[n].bufs = nkv_buf_alloc(c, BURST_QD * VLEN)) ||
		    pthread_create(&b[n].t, NULL, burst_main, &b[n]) != 0) {
			CHECK(false, "queue pair %u", n);
			nkv_buf_free(c, b[n].bufs);
			nkv_qpair_destroy(b[n].qp);
			break;
		}
	}
	unsigned bad = 0, stuck = 0;
	uint64_t max_ns = 0, sleeps = 0, late = 0;
	for (unsigned i = 0; i < n; i++) {
		pthread_join(b[i].t, NULL);
		struct sn_qpair q;
		sn_qpair(b[i].qp, &q);
		CHECK(q.irq, "queue pair %u has no interrupt", i);
		sleeps += q.sleeps;
		late += q.late;
		bad += b[i].bad;
		stuck += b[i].stuck;
		if (b[i].max_ns > max_ns)
			max_ns = b[i].max_ns;
		nkv_buf_free(c, b[i].bufs);
		nkv_qpair_destroy(b[i].qp);
	}
	sn_poller(H.shm, 0, &p1);
	printf("burst: %u queue pairs x %u cycles of QD %u in %.2f s: slowest cycle %.2f ms; host slept %llu times on "
	       "interrupts (%llu timed out with a CQE there); poller: %llu sleeps, %llu kicks, %llu interrupts, %llu "
	       "sleeps timed out with work waiting\n", n, cycles, BURST_QD, (double)(nkv_now_ns() - t0) / 1e9,
	       (double)max_ns / 1e6, (unsigned long long)sleeps, (unsigned long long)late,
	       (unsigned long long)(p1.sleeps - p0.sleeps), (unsigned long long)(p1.kicks - p0.kicks),
	       (unsigned long long)(p1.irqs - p0.irqs), (unsigned long long)(p1.late - p0.late));
	CHECK(stuck == 0, "%u queue pair(s) stopped getting completions", stuck);
	CHECK(bad == 0, "%u command(s) failed or read back wrong data", bad);
	CHECK(late == 0, "%llu interrupt(s) lost (the host's sleep timed out with a CQE there)", (unsigned long long)late);
	CHECK(p1.late == p0.late, "%llu kick(s) lost (the poller's sleep timed out with work there)",
	      (unsigned long long)(p1.late - p0.late));
	/* The test is about sleeping and waking: it must have happened, both ways, many times. */
	CHECK(sleeps > cycles / 10 && p1.kicks - p0.kicks > cycles / 10 && p1.irqs - p0.irqs > cycles / 10,
	      "too few sleeps and wake-ups to test anything");
	nkv_disconnect(c);
}

/* ---- adapt: whether the host spins follows how soon the controller answers --------------------------- */

static void test_adapt(void)
{
	struct nkv_ctrl *c = connect_to(H.sock);
	struct nkv_qpair *qp = NULL;
	uint8_t *v = c ? nkv_buf_alloc(c, VLEN) : NULL;
	unsigned warm = 100, n = g_mem ? 4000 : 400, bad = 0;
	if (!v || nkv_qpair_create(c, 4, &qp) != 0) {
		CHECK(false, "a queue pair and a buffer");
		goto out;
	}
	struct sn_qpair q0, q1;
	struct sn_poller p0, p1;
	for (unsigned i = 0; i < warm + n; i++) {
		if (i == warm) { /* the average has settled: count from here */
			sn_qpair(qp, &q0);
			sn_poller(H.shm, 0, &p0);
		}
		char key[16];
		snprintf(key, sizeof(key), "a%u", i / 2 % 16); /* odd i reads back what i - 1 stored */
		struct nkv_cpl cpl;
		uint32_t size = 0;
		int rc;
		if (i % 2 == 0) {
			h_fill(v, VLEN, i);
			rc = nkv_store(qp, NSID, key, (unsigned)strlen(key), v, VLEN, 0, &cpl);
		} else {
			memset(v, 0, VLEN);
			rc = nkv_retrieve(qp, NSID, key, (unsigned)strlen(key), v, VLEN, &size, &cpl);
			rc = rc ? rc : h_verify(v, VLEN, i - 1) ? 0 : -EBADMSG;
		}
		bad += rc != 0;
	}
	sn_qpair(qp, &q1);
	sn_poller(H.shm, 0, &p1);
	uint64_t waits = q1.waits - q0.waits, spun = q1.spun - q0.spun;
	double host = waits ? (double)spun / (double)waits : 0;
	printf("adapt: %u QD 1 commands: the host spun before arming in %llu of %llu waits (%.0f %%), slept %llu times\n",
	       n, (unsigned long long)spun, (unsigned long long)waits, 100 * host,
	       (unsigned long long)(q1.sleeps - q0.sleeps));
	CHECK(bad == 0, "%u command(s) failed or read back wrong data", bad);
	CHECK(q1.late == q0.late && p1.late == p0.late, "a wake-up was lost: %llu interrupt(s), %llu kick(s)",
	      (unsigned long long)(q1.late - q0.late), (unsigned long long)(p1.late - p0.late));
	/* Against mem the share of spins depends on how soon this machine's poller answers (a sleeping
	 * poller's wake-up can take longer than the spin under load): printed, not checked. Against RADOS
	 * a spin per command would be CPU taken from the OSD and the gateway, for nothing. */
	if (!g_mem)
		CHECK(waits > n / 2 && host < 0.2, "against RADOS the host spun in %.0f %% of %llu waits", 100 * host,
		      (unsigned long long)waits);
out:
	nkv_qpair_destroy(qp);
	if (c) {
		nkv_buf_free(c, v);
		nkv_disconnect(c);
	}
}

/* ---- nokick: a poller whose hosts cannot kick it ------------------------------------------------- */

static void test_nokick(void)
{
	struct nkv_shm_conf conf = {.pollers = 1, .no_notify = true, .poll_idle_us = 500};
	struct nkv_shm *nk = NULL;
	struct nkv_ctrl *c = NULL;
	struct nkv_qpair *qp = NULL;
	unsigned n = g_mem ? 400 : 40, bad = 0;
	uint8_t v[VLEN], r[VLEN];
	struct sn_poller p0, p1;
	char sock[160];

	snprintf(sock, sizeof(sock), "%.100s.nk", H.sock);
	int rc = nkv_shm_create(H.tgt, &conf, &nk);
	if (rc == 0 && (rc = nkv_shm_listen(nk, SUBNQN, sock)) != 0)
		nkv_shm_destroy(nk, 5000), nk = NULL;
	CHECK(rc == 0, "a transport without notifications: %s", strerror(-rc));
	if (rc || !(c = connect_to(sock)))
		goto out;
	if (nkv_qpair_create(c, 4, &qp) != 0) {
		CHECK(false, "a queue pair");
		goto out;
	}
	prctl(PR_SET_TIMERSLACK, 1UL); /* pauses of 100 us, not 100 + the default 50 us of slack */
	for (unsigned i = 0; i < 20 + n; i++) {
		if (i == 20) /* the first windows have opened: count from here */
			sn_poller(nk, 0, &p0);
		uint32_t size = 0;
		h_fill(v, VLEN, i);
		memset(r, 0, sizeof(r));
		bad += nkv_store(qp, NSID, "nokick", 6, v, VLEN, 0, NULL) != 0;
		nanosleep(&(struct timespec){0, 100000}, NULL);
		bad += nkv_retrieve(qp, NSID, "nokick", 6, r, VLEN, &size, NULL) != 0 || !h_verify(r, VLEN, i);
		nanosleep(&(struct timespec){0, 100000}, NULL);
	}
	sn_poller(nk, 0, &p1);
	prctl(PR_SET_TIMERSLACK, 0UL);
	uint64_t naps = p1.sleeps - p0.sleeps;
	printf("nokick: %u commands 100 us apart without a kick: the poller napped %llu times\n", 2 * n,
	       (unsigned long long)naps);
	CHECK(bad == 0, "%u command(s) failed or read back wrong data", bad);
	/* Against RADOS a command takes longer than a window and the windows stop: printed, not checked. */
	if (g_mem)
		CHECK(naps < n / 2, "the poller napped %llu times for %u commands", (unsigned long long)naps, 2 * n);
out:
	nkv_qpair_destroy(qp);
	if (c)
		nkv_disconnect(c);
	if (nk)
		nkv_shm_destroy(nk, 5000);
}

/* ---- fallback: hosts that bind nothing ----------------------------------------------------------------- */

static void roundtrip(struct nkv_ctrl *c, const char *what, bool want_irq)
{
	struct nkv_qpair *qp = NULL;
	uint8_t v[VLEN], r[VLEN];
	uint32_t size = 0;
	int rc = nkv_qpair_create(c, 4, &qp);
	CHECK(rc == 0, "%s: queue pair: %s", what, strerror(-rc));
	if (rc)
		return;
	struct sn_qpair q;
	sn_qpair(qp, &q);
	CHECK(q.irq == want_irq, "%s: interrupts %d", what, q.irq);
	for (int i = 0; i < 20; i++) {
		h_fill(v, VLEN, (uint64_t)i);
		memset(r, 0, sizeof(r));
		int a = nkv_store(qp, NSID, what, (unsigned)strlen(what), v, VLEN, 0, NULL);
		int b = nkv_retrieve(qp, NSID, what, (unsigned)strlen(what), r, VLEN, &size, NULL);
		CHECK(a == 0 && b == 0 && size == VLEN && h_verify(r, VLEN, (uint64_t)i), "%s: round trip %d: %d %d",
		      what, i, a, b);
	}
	nkv_qpair_destroy(qp);
}

static void test_fallback(void)
{
	struct nkv_ctrl *c = connect_to(g_sock_off); /* the target offers nothing: nothing is bound */
	if (c) {
		CHECK(!sn_kick_bound(c), "a kick bound on a target without notifications");
		roundtrip(c, "off-target", false);
		nkv_disconnect(c);
	}
	setenv("NKV_SHM_NOTIFY", "off", 1); /* the host does not want them */
	c = connect_to(H.sock);
	unsetenv("NKV_SHM_NOTIFY");
	if (c) {
		CHECK(!sn_kick_bound(c), "a kick bound with NKV_SHM_NOTIFY=off");
		roundtrip(c, "off-host", false);
		nkv_disconnect(c);
	}
	/* A host that hands a queue to a device unbinds its kick first; its own queues keep working. */
	c = connect_to(H.sock);
	if (c) {
		struct nkv_devq *dq = NULL;
		int rc = nkv_devq_create(c, 8, &dq);
		CHECK(rc == 0, "devq: %s", strerror(-rc));
		roundtrip(c, "devq-host", true);
		nkv_devq_destroy(dq);
		nkv_disconnect(c);
	}
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "shm_notify");
	if (!H.shm) {
		fprintf(stderr, "shm_notify: run it with the shm transport (shm_notify mem|rados shm)\n");
		return 1;
	}
	g_mem = strcmp(H.backend, "mem") == 0;
	h_add_ns(NSID, "n", 0, false);
	struct nkv_shm_conf off = {.pollers = 1, .no_notify = true};
	snprintf(g_sock_off, sizeof(g_sock_off), "%.100s.off", H.sock);
	int rc = nkv_shm_create(H.tgt, &off, &g_off);
	if (rc == 0)
		rc = nkv_shm_listen(g_off, SUBNQN, g_sock_off);
	if (rc) {
		fprintf(stderr, "shm_notify: the second shm transport: %s\n", strerror(-rc));
		return 1;
	}
	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {{"proto", test_proto}, {"idle", test_idle}, {"slow", test_slow}, {"burst", test_burst},
		      {"adapt", test_adapt}, {"fallback", test_fallback}, {"nokick", test_nokick}};
	const char *only = getenv("SHM_NOTIFY_ONLY");
	for (unsigned i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		if (only && strcmp(only, groups[i].name))
			continue;
		unsigned f0 = h_fail;
		uint64_t t0 = nkv_now_ns();
		groups[i].fn();
		printf("%-8s %s (%llu ms)\n", groups[i].name, h_fail == f0 ? "ok" : "FAILED",
		       (unsigned long long)((nkv_now_ns() - t0) / 1000000));
	}
	nkv_shm_destroy(g_off, 5000);
	return h_finish();
}
