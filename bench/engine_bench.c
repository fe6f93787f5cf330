/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_bench.c - what libnkv's engine (nkv.h "engine") adds to a command, against a bare queue pair
 * of the same controller, in the same run:
 *   - QD 1: Retrieves of SIZE bytes (4 KiB) through nkv_retrieve() on a queue pair and through
 *     nkv_engine_run() of one op, alternating op by op (and which goes first), so that load changes
 *     on the machine fall on both alike; p50 and p99 of each, and the engine's p50 overhead
 *     (engine - queue pair, per repetition);
 *   - QD 64: Retrieves for -T ms each way: on the queue pair, 64 async commands kept in flight and
 *     polled by this thread ("qpair"), and batches of 64 sent together and all awaited ("qpair-b");
 *     through the engine, batches of 64 ops in nkv_engine_run() ("engine": how a batch API such as
 *     Python's retrieve_many uses it; compared with qpair-b, since the queue drains between batches
 *     either way) and 64 one-op batches kept in flight with nkv_engine_submit() and a waiting
 *     nkv_engine_reap() ("stream": an event loop's use; compared with qpair); ops/s of each and its
 *     ratio (the order rotates by repetition);
 *   - an idle engine's CPU: the process's CPU time over -I ms after its last op (no busy waiting
 *     when there is no work).
 * Over NVMe/TCP (loopback) and shared memory, against a `rados-nkv --backend mem` it starts (its
 * defaults otherwise: 2 reactors, one shm poller, shm notifications on). Every Retrieve is checked
 * (rc, value size, the key index in the value's first bytes). Figures are medians over the
 * repetitions, with the min-max of the per-repetition differences and ratios.
 *
 *   engine_bench [-d RADOS_NKV] [-t tcp|shm|both] [-n OPS] [-r REPS] [-s SIZE] [-q QUEUES] [-T MS]
 *                [-I MS] [-v] [--smoke] [--max-shm-overhead-us US] [--max-idle-cpu-pct PCT]
 *
 * Defaults: -n 20000 -r 5 -s 4096 -q 4 -T 1000 -I 2000; -v prints every repetition's figures.
 * -d defaults to the rados-nkv next to this program's build directory (BUILD/bench/engine_bench ->
 * BUILD/rados-nkv). --smoke: few ops and short phases (CTest engine_bench_smoke); the two --max
 * options make the run fail (exit 1) when the shm p50 overhead's median or the idle CPU exceeds them.
 * Exit 0 when every op succeeded and the limits held, 1 otherwise, 77 without a daemon binary.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "daemon_spawn.h"
#include "nkv/nkv.h"

#define NQN "nqn.2026-12.io.rados-nkv:engine-bench"
#define NSID 1
#define NKEYS 256
#define QD 64
#define MAX_REPS 32
enum { P_QP, P_ENG, P_N };          /* QD 1 */
enum { Q_QP, Q_QPB, Q_RUN, Q_STREAM, Q_N }; /* QD 64 */
static const char *const g_qd_path[Q_N] = {"qpair", "qpair-b", "engine", "stream"};
/* what each QD 64 path is compared with: a batch API against the queue pair run in batches of 64
 * (sent together, all awaited: the queue drains between batches either way), a stream against the
 * queue pair kept at 64 */
static const int g_qd_base[Q_N] = {Q_QP, Q_QP, Q_QPB, Q_QP};
static const int g_qd_p[Q_N] = {P_QP, -1, P_ENG, -1}; /* the QD 1 row printed beside it */

static unsigned g_bad; /* ops that failed or read a wrong value */
unsigned h_pass, h_fail; /* the test harness's counters, which daemon_spawn.c links against */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct_us(uint64_t *v, unsigned n, unsigned p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t i = (size_t)n * p / 100;
	return v[i < n ? i : n - 1] / 1000.0;
}

/** Median of @v[0..n) (sorts it); @lo/@hi get the min and max. */
static double median(double *v, unsigned n, double *lo, double *hi)
{
	qsort(v, n, sizeof(*v), cmp_d);
	if (lo)
		*lo = v[0];
	if (hi)
		*hi = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static unsigned key_of(unsigned i, uint8_t key[16])
{
	char k[17];
	int n = snprintf(k, sizeof(k), "eb%u", i % NKEYS);
	memcpy(key, k, (size_t)n);
	return (unsigned)n;
}

/** The value of key @i: its index in the first 4 bytes, then a pattern. */
static void fill(uint8_t *buf, uint32_t size, unsigned i)
{
	for (uint32_t b = 0; b < size; b++)
		buf[b] = (uint8_t)(b * 31 + i);
	if (size >= 4)
		memcpy(buf, &i, 4);
}

/** Was key @i's value read into @buf (@vs its size, @xfer the bytes moved)? */
static bool check(int rc, const uint8_t *buf, uint32_t size, uint32_t vs, uint32_t xfer, unsigned i)
{
	unsigned got = i % NKEYS;
	if (buf && size >= 4)
		memcpy(&got, buf, 4);
	bool ok = rc == 0 && vs == size && xfer == size && got == i % NKEYS;
	if (!ok && g_bad++ < 5)
		fprintf(stderr, "engine_bench: retrieve of key %u: rc %d (%s), size %u/%u, index %u\n", i % NKEYS, rc,
			strerror(rc < 0 ? -rc : 0), vs, xfer, got);
	return ok;
}

/* ---- the daemon -------------------------------------------------------------------------------- */

/** Connect over @tr until the daemon listens (10 s). */
static int connect_tr(const char *tr, const char *port, const char *sock, pid_t pid, struct nkv_ctrl **c)
{
	struct nkv_conn_opts o = {.timeout_ms = 10000, .queue_depth = 128};
	int rc = -ECONNREFUSED;
	for (int i = 0; i < 200; i++) {
		rc = strcmp(tr, "shm") ? nkv_connect("127.0.0.1", port, NQN, &o, c) : nkv_connect_shm(sock, &o, c);
		if (rc != -ECONNREFUSED && rc != -ENOENT)
			return rc;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			fprintf(stderr, "engine_bench: the daemon exited (status %#x)\n", st);
			return -ECHILD;
		}
		usleep(50000);
	}
	return rc;
}

/* ---- QD 1 -------------------------------------------------------------------------------------- */

static uint64_t one(int path, struct nkv_qpair *qp, struct nkv_engine *e, uint8_t *buf, uint32_t size, unsigned i)
{
	uint8_t key[16];
	unsigned kl = key_of(i, key);
	memset(buf, 0xff, size < 4 ? size : 4);
	uint64_t t0 = now_ns(), t;
	if (path == P_QP) {
		uint32_t vs = 0;
		struct nkv_cpl cpl = {0};
		int rc = nkv_retrieve(qp, NSID, key, kl, buf, size, &vs, &cpl);
		t = now_ns() - t0;
		check(rc, buf, size, vs, cpl.xfer, i);
	} else {
		struct nkv_op op = {.type = NKV_OP_RETRIEVE, .nsid = NSID, .klen = (uint8_t)kl, .buf = buf, .len = size};
		memcpy(op.key, key, kl);
		int rc = nkv_engine_run(e, &op, 1);
		t = now_ns() - t0;
		check(rc < 0 ? rc : op.rc, buf, size, op.value_size, op.xfer, i);
	}
	return t;
}

/* ---- QD 64 ------------------------------------------------------------------------------------- */

struct qslot {
	struct nkv_qpair *qp;
	uint8_t *buf;
	uint32_t size;
	unsigned i;
	uint64_t *done, *issued, end_ns;
};

static void qslot_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct qslot *s = arg;
	check(nkv_cpl_errno(cpl), s->buf, s->size, cpl->dw0, cpl->xfer, s->i);
	(*s->done)++;
	if (now_ns() >= s->end_ns)
		return;
	uint8_t key[16];
	s->i = (unsigned)(*s->issued)++;
	unsigned kl = key_of(s->i, key);
	int rc = nkv_retrieve_async(s->qp, NSID, key, kl, s->buf, s->size, qslot_cb, s);
	if (rc) {
		check(rc, s->buf, s->size, 0, 0, s->i);
		(*s->issued)--;
	}
}

/** @return ops/s of 64 Retrieves on @qp for @ms: kept in flight (each completion sends the next),
 *  or, with @batch, sent 64 at a time and all awaited before the next 64. */
static double qd_qpair(struct nkv_qpair *qp, uint8_t *bufs, uint32_t size, unsigned ms, bool batch)
{
	struct qslot s[QD];
	uint64_t done = 0, issued = 0, t0 = now_ns(), end = t0 + ms * 1000000ull;
	do {
		for (unsigned k = 0; k < QD; k++) {
			s[k] = (struct qslot){.qp = qp, .buf = bufs + (size_t)k * size, .size = size,
					      .i = (unsigned)issued++, .done = &done, .issued = &issued,
					      .end_ns = batch ? 0 : end};
			uint8_t key[16];
			unsigned kl = key_of(s[k].i, key);
			if (nkv_retrieve_async(qp, NSID, key, kl, s[k].buf, size, qslot_cb, &s[k]))
				issued--;
		}
		while (done < issued) {
			int rc = nkv_qpair_poll(qp, 1000);
			if (rc < 0) {
				fprintf(stderr, "engine_bench: qpair poll: %s\n", strerror(-rc));
				g_bad++;
				break;
			}
		}
	} while (batch && now_ns() < end && !g_bad);
	return done / ((now_ns() - t0) / 1e9);
}

/** @return ops/s of batches of 64 ops through nkv_engine_run() for @ms. */
static double qd_run(struct nkv_engine *e, uint8_t *bufs, uint32_t size, unsigned ms)
{
	struct nkv_op ops[QD];
	uint64_t done = 0, t0 = now_ns(), end = t0 + ms * 1000000ull;
	unsigned next = 0;
	while (now_ns() < end) {
		for (unsigned k = 0; k < QD; k++) {
			ops[k] = (struct nkv_op){.type = NKV_OP_RETRIEVE, .nsid = NSID, .buf = bufs + (size_t)k * size,
						 .len = size, .user = next++};
			ops[k].klen = (uint8_t)key_of((unsigned)ops[k].user, ops[k].key);
		}
		int rc = nkv_engine_run(e, ops, QD);
		for (unsigned k = 0; k < QD; k++)
			check(rc < 0 ? rc : ops[k].rc, ops[k].buf, size, ops[k].value_size, ops[k].xfer, (unsigned)ops[k].user);
		done += QD;
	}
	return done / ((now_ns() - t0) / 1e9);
}

/** @return ops/s of 64 one-op engine batches kept in flight for @ms. */
static double qd_engine(struct nkv_engine *e, uint8_t *bufs, uint32_t size, unsigned ms)
{
	struct nkv_op ops[QD];
	unsigned idx[QD], inflight = 0, next = 0;
	uint64_t done = 0, t0 = now_ns(), end = t0 + ms * 1000000ull;
	for (unsigned k = 0; k < QD; k++) {
		ops[k] = (struct nkv_op){.type = NKV_OP_RETRIEVE, .nsid = NSID, .buf = bufs + (size_t)k * size,
					 .len = size};
		idx[k] = next++;
		ops[k].klen = (uint8_t)key_of(idx[k], ops[k].key);
		int rc = nkv_engine_submit(e, &ops[k], 1, k);
		if (rc)
			check(rc, NULL, size, 0, 0, idx[k]);
		else
			inflight++;
	}
	while (inflight) {
		uint64_t tags[QD];
		int n = nkv_engine_reap(e, tags, QD, 1000);
		if (n <= 0) {
			fprintf(stderr, "engine_bench: reap: %d\n", n);
			g_bad++;
			break;
		}
		uint64_t now = now_ns();
		for (int j = 0; j < n; j++) {
			unsigned k = (unsigned)tags[j];
			check(ops[k].rc, ops[k].buf, size, ops[k].value_size, ops[k].xfer, idx[k]);
			done++;
			inflight--;
			if (now >= end)
				continue;
			idx[k] = next++;
			ops[k].klen = (uint8_t)key_of(idx[k], ops[k].key);
			int rc = nkv_engine_submit(e, &ops[k], 1, k);
			if (rc)
				check(rc, NULL, size, 0, 0, idx[k]);
			else
				inflight++;
		}
	}
	return done / ((now_ns() - t0) / 1e9);
}

/* ---- one transport ----------------------------------------------------------------------------- */

struct conf {
	unsigned n, reps, queues, qd_ms, idle_ms;
	uint32_t size;
	bool verbose;
	double max_shm_us, max_idle_pct;
};

/** Measure over @tr; print its rows. @return 0, or -1 when a limit of @c was exceeded. */
static int run_tr(const struct conf *c, const char *tr, const char *port, const char *sock, pid_t pid)
{
	struct nkv_ctrl *ctrl = NULL;
	struct nkv_qpair *qp = NULL;
	struct nkv_engine *e = NULL;
	struct nkv_engine_opts eo = {.queues = c->queues};
	int rc = connect_tr(tr, port, sock, pid, &ctrl);
	if (rc == 0)
		rc = nkv_qpair_create(ctrl, 128, &qp);
	if (rc == 0)
		rc = nkv_engine_create(ctrl, &eo, &e);
	uint8_t *bq = rc ? NULL : nkv_buf_alloc(ctrl, (size_t)QD * c->size);
	uint8_t *be = rc ? NULL : nkv_buf_alloc(ctrl, (size_t)QD * c->size);
	if (rc || !bq || !be) {
		fprintf(stderr, "engine_bench: %s: connect, queue pair, engine or buffers: %s\n", tr,
			strerror(rc ? -rc : ENOMEM));
		g_bad++;
		goto out;
	}
	for (unsigned i = 0; i < NKEYS; i++) {
		uint8_t key[16];
		unsigned kl = key_of(i, key);
		fill(bq, c->size, i);
		if ((rc = nkv_store(qp, NSID, key, kl, bq, c->size, 0, NULL)) != 0) {
			fprintf(stderr, "engine_bench: %s: store: %s\n", tr, strerror(-rc));
			g_bad++;
			goto out;
		}
	}
	uint64_t *lat[P_N] = {calloc(c->n, sizeof(uint64_t)), calloc(c->n, sizeof(uint64_t))};
	static double p50[P_N][MAX_REPS], p99[P_N][MAX_REPS], ops[Q_N][MAX_REPS], diff[MAX_REPS], ratio[Q_N][MAX_REPS];
	for (unsigned r = 0; r < c->reps; r++) {
		for (unsigned i = 0; i < c->n; i++)
			for (unsigned k = 0; k < P_N; k++) {
				int p = (int)((i + k) % P_N);
				lat[p][i] = one(p, qp, e, p == P_QP ? bq : be, c->size, i);
			}
		for (int p = 0; p < P_N; p++) {
			p50[p][r] = pct_us(lat[p], c->n, 50);
			p99[p][r] = pct_us(lat[p], c->n, 99);
		}
		diff[r] = p50[P_ENG][r] - p50[P_QP][r];
		for (unsigned k = 0; k < Q_N; k++) {
			int q = (int)((r + k) % Q_N);
			ops[q][r] = q == Q_QP    ? qd_qpair(qp, bq, c->size, c->qd_ms, false)
				    : q == Q_QPB ? qd_qpair(qp, bq, c->size, c->qd_ms, true)
				    : q == Q_RUN ? qd_run(e, be, c->size, c->qd_ms)
						 : qd_engine(e, be, c->size, c->qd_ms);
		}
		for (int q = 0; q < Q_N; q++)
			ratio[q][r] = ops[q][r] / ops[g_qd_base[q]][r];
		if (c->verbose)
			printf("%-5s rep %u: QD 1 p50 qpair %.1f engine %.1f (%+.1f) us; QD 64 ops/s qpair %.0f qpair-b %.0f "
			       "engine %.0f stream %.0f\n",
			       tr, r + 1, p50[P_QP][r], p50[P_ENG][r], diff[r], ops[Q_QP][r], ops[Q_QPB][r], ops[Q_RUN][r],
			       ops[Q_STREAM][r]);
	}
	free(lat[0]);
	free(lat[1]);

	/* Idle: the engine just completed an op, then nothing for idle_ms. */
	one(P_ENG, qp, e, be, c->size, 0);
	double cpu0 = cpu_s();
	usleep(c->idle_ms * 1000u);
	double idle_ms = (cpu_s() - cpu0) * 1e3, idle_pct = idle_ms / c->idle_ms * 100;

	for (int q = 0; q < Q_N; q++) {
		int p = g_qd_p[q];
		if (p >= 0)
			printf("%-5s %-7s %9.1f %9.1f", tr, g_qd_path[q], median(p50[p], c->reps, NULL, NULL),
			       median(p99[p], c->reps, NULL, NULL));
		else
			printf("%-5s %-7s %9s %9s", tr, g_qd_path[q], "", "");
		printf(" %12.0f", median(ops[q], c->reps, NULL, NULL));
		if (q != Q_QP) {
			double lo, hi, md = median(ratio[q], c->reps, &lo, &hi);
			printf("   %.2fx (%.2f-%.2f) of %s", md, lo, hi, g_qd_path[g_qd_base[q]]);
		}
		printf("\n");
	}
	double lo, hi, md = median(diff, c->reps, &lo, &hi);
	printf("%-5s engine - qpair, QD 1 p50: %+.1f us (%+.1f..%+.1f)\n", tr, md, lo, hi);
	printf("%-5s idle engine: %.1f ms of CPU in %u ms (%.2f %%)\n", tr, idle_ms, c->idle_ms, idle_pct);
	if (!strcmp(tr, "shm") && c->max_shm_us > 0 && md > c->max_shm_us) {
		fprintf(stderr, "engine_bench: shm: the engine's QD 1 p50 overhead %.1f us is above %.1f us\n", md,
			c->max_shm_us);
		rc = -1;
	}
	if (c->max_idle_pct > 0 && idle_pct > c->max_idle_pct) {
		fprintf(stderr, "engine_bench: %s: an idle engine used %.2f %% CPU (limit %.2f %%)\n", tr, idle_pct,
			c->max_idle_pct);
		rc = -1;
	}
out:
	nkv_engine_destroy(e);
	if (bq)
		nkv_buf_free(ctrl, bq);
	if (be)
		nkv_buf_free(ctrl, be);
	nkv_qpair_destroy(qp);
	nkv_disconnect(ctrl);
	return rc == -1 ? -1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: engine_bench [-d RADOS_NKV] [-t tcp|shm|both] [-n OPS] [-r REPS] [-s SIZE] [-q QUEUES]\n"
			"                    [-T MS] [-I MS] [-v] [--smoke] [--max-shm-overhead-us US] [--max-idle-cpu-pct PCT]\n");
}

int main(int argc, char **argv)
{
	struct conf c = {.n = 20000, .reps = 5, .queues = 4, .qd_ms = 1000, .idle_ms = 2000, .size = 4096};
	const char *daemon = NULL, *trs = "both";
	char self[PATH_MAX], dflt[PATH_MAX + 16];
	enum { O_SMOKE = 256, O_MAXSHM, O_MAXIDLE };
	static const struct option lo[] = {{"smoke", no_argument, 0, O_SMOKE},
					   {"max-shm-overhead-us", required_argument, 0, O_MAXSHM},
					   {"max-idle-cpu-pct", required_argument, 0, O_MAXIDLE},
					   {0, 0, 0, 0}};
	int o;
	while ((o = getopt_long(argc, argv, "d:t:n:r:s:q:T:I:v", lo, NULL)) != -1) {
		switch (o) {
		case 'd': daemon = optarg; break;
		case 't': trs = optarg; break;
		case 'n': c.n = (unsigned)atoi(optarg); break;
		case 'r': c.reps = (unsigned)atoi(optarg); break;
		case 's': c.size = (uint32_t)atoi(optarg); break;
		case 'q': c.queues = (unsigned)atoi(optarg); break;
		case 'T': c.qd_ms = (unsigned)atoi(optarg); break;
		case 'I': c.idle_ms = (unsigned)atoi(optarg); break;
		case 'v': c.verbose = true; break;
		case O_SMOKE: c.n = 500, c.reps = 5, c.qd_ms = 100, c.idle_ms = 500; break;
		case O_MAXSHM: c.max_shm_us = atof(optarg); break;
		case O_MAXIDLE: c.max_idle_pct = atof(optarg); break;
		default: usage(); return 64;
		}
	}
	if (!c.n || !c.reps || c.reps > MAX_REPS || !c.size || c.size > (4u << 20) || !c.queues || !c.qd_ms ||
	    !c.idle_ms || (strcmp(trs, "tcp") && strcmp(trs, "shm") && strcmp(trs, "both"))) {
		fprintf(stderr, "engine_bench: -n, -q, -T, -I > 0, -r 1..%d, -s 1..4 MiB, -t tcp|shm|both\n", MAX_REPS);
		return 64;
	}
	if (!daemon) {
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		self[n > 0 ? n : 0] = 0;
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		snprintf(dflt, sizeof(dflt), "%s/../rados-nkv", self);
		daemon = dflt;
	}
	if (access(daemon, X_OK)) {
		fprintf(stderr, "engine_bench: no rados-nkv at %s (-d)\n", daemon);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	char port[16], listen[64], sock[108];
	snprintf(port, sizeof(port), "%u", daemon_free_port());
	snprintf(listen, sizeof(listen), "127.0.0.1:%s", port);
	snprintf(sock, sizeof(sock), "%s/engine_bench.%d.sock", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	const char *argv_d[] = {daemon, "--backend", "mem", "--listen", listen, "--discovery", "none", "--subsys", NQN,
				"--shm", sock, "--ns", "1", "--control", "none", "--log-level", "warn", NULL};
	pid_t pid = daemon_spawn(argv_d, NULL, NULL);
	if (pid < 0) {
		perror("engine_bench: fork");
		return 1;
	}
	printf("engine_bench: rados-nkv --backend mem; %u B Retrieves; QD 1: %u ops per path and rep; QD 64: %u ms "
	       "per path and rep; %u reps; engine over %u queue pairs\n",
	       c.size, c.n, c.qd_ms, c.reps, c.queues);
	printf("%-5s %-7s %9s %9s %12s   %s\n", "tr", "path", "p50 us", "p99 us", "QD64 ops/s", "ratio (min-max) of");
	int bad = 0;
	if (strcmp(trs, "shm"))
		bad |= run_tr(&c, "tcp", port, sock, pid);
	if (strcmp(trs, "tcp"))
		bad |= run_tr(&c, "shm", port, sock, pid);
	kill(pid, SIGTERM);
	int st;
	waitpid(pid, &st, 0);
	unlink(sock);
	if (g_bad)
		fprintf(stderr, "engine_bench: %u op(s) failed or read a wrong value\n", g_bad);
	return bad || g_bad ? 1 : 0;
}
