/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpath.c - one engine over several paths to one subsystem (nkv.h "multipath").
 *
 * Each path is a controller with a single-path engine of its own (engine.c), which keeps its queue
 * pairs and reconnects its controller with backoff. This layer only chooses a path per op, moves
 * ops to another path when theirs fails, and completes the caller's batches:
 *
 * - A caller's batch is copied into "shadow" ops (struct mp_sub, one per path used), submitted to
 *   the paths' engines from the calling thread. The caller's buffers are shared: a path's engine
 *   completes an op only once nothing can write into its buffer any more (engine.c's deadline and
 *   queue failure rules), so the next path may use the buffer at once.
 * - The dispatcher thread reaps the paths' engines (their eventfds), decides per op: done (copy the
 *   result to the caller's op), or sent again (a path error, an op that may be sent again, time
 *   left), and finishes the caller's batches (run waiter, or reap queue and eventfd, as engine.c).
 *   Ops with no usable path wait on its pending list, tried again every MP_PEND_TICK_MS.
 * - The watcher thread connects paths that were not reachable at connect time (backoff as the
 *   engine's reconnect) and reads each path's ANA log page (0Ch) every MP_ANA_REFRESH_MS, at once
 *   after an op met an ANA status. Admin commands can block for the connection's timeout on a hung
 *   gateway: they run here, never on the dispatcher.
 *
 * Path choice: the first path in the caller's order that has an engine, whose controller is up,
 * that is not held after a path error, and whose ANA state for the namespace is Optimized; else
 * the first such Non-Optimized one. Holding a failed path (reconnect_min_ms doubling up to
 * reconnect_max_ms while it keeps failing, reset by a success) keeps ops off a gateway that just
 * died before its engine has noticed, and brings them back, in order, once it is up again.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/doneq.h"
#include "client/internal.h"
#include "common/log.h"

#define MP_ANA_REFRESH_MS 1000 /* ANA log re-read: a state change is seen within a second */
#define MP_ANA_NS_MAX 256u     /* namespaces whose ANA state a path keeps; others count as optimized */
#define MP_ANA_LOG_MAX 65536u  /* the longest ANA log page read */
#define MP_PEND_TICK_MS 10     /* ops waiting for a path: tried again this often */
#define MP_WATCH_TICK_MS 50
#define MP_REAP 64
#define MP_DEFAULT_MAX_OPS 65536u
#define MP_DEFAULT_PORT "4420"

struct mp_batch;

/** One of the caller's ops on its way. */
struct mp_item {
	struct nkv_op *op;
	struct mp_batch *b;
	struct mp_item *next;  /* inbox / pending */
	int64_t deadline;      /* no resend after this */
	int last_rc;           /* the last path error (0: not sent yet) */
	uint16_t last_status;
	uint16_t retries;
};

struct mp_batch {
	atomic_uint left;
	unsigned n;
	struct nkv_doneq_batch d; /* its run() waiter, or its tag for reap */
	struct mp_item items[];
};

/** One submission to one path's engine: shadow ops and the items they stand for. */
struct mp_sub {
	unsigned path, n;
	struct nkv_op *ops;
	struct mp_item **its;
};

struct mp_path {
	char traddr[260], trsvcid[34];
	struct nkv_ctrl *_Atomic ctrl;   /* published by nkv_engine_connect() or the watcher */
	struct nkv_engine *_Atomic eng;
	_Atomic int64_t hold_until;      /* after a path error: not chosen before */
	int hold_ms;                     /* the dispatcher's */
	atomic_bool ana_stale;           /* an op met an ANA status: read the log again now */
	pthread_mutex_t ana_mu;
	bool ana;                        /* the log was read: ana_ns holds the states */
	unsigned nana;
	struct nkv_ana_ns ana_ns[MP_ANA_NS_MAX];
	/* the watcher's */
	int64_t ana_at, conn_at;
	int conn_ms;
};

struct nkv_mp {
	unsigned np;
	char subnqn[257];
	struct nkv_conn_opts copts;      /* for paths connected later: its strings are the ones below */
	char *own_hostnqn, *own_secret, *own_ctrl_secret, *own_tls_key;
	struct nkv_engine_opts eopts;    /* for each path's engine */
	int timeout_ms, wait_ms, rc_min_ms, rc_max_ms;
	unsigned max_ops, queues;
	atomic_uint ops;                 /* accepted and not completed */
	atomic_uint entering;
	atomic_bool closing;
	int wake_fd;                     /* the dispatcher's */
	pthread_mutex_t in_mu;
	struct mp_item *in_head, *in_tail; /* waiting for a path, handed to the dispatcher */
	pthread_t disp_th, watch_th;
	bool disp_started, watch_started;
	atomic_bool stop;
	pthread_mutex_t watch_mu;
	pthread_cond_t watch_cv;
	/* completed batches for reap, as engine.c */
	struct nkv_doneq done;
	struct mp_path p[];
};

/* ---- ANA ---------------------------------------------------------------------------------------- */

int nkv_ana_parse(const void *buf, size_t len, struct nkv_ana_ns *out, unsigned max)
{
	const uint8_t *b = buf;
	if (!buf || len < sizeof(struct nkv_ana_log_hdr))
		return -EPROTO;
	unsigned ngrps = nkv_get16(b + 8), got = 0;
	size_t off = sizeof(struct nkv_ana_log_hdr);
	for (unsigned g = 0; g < ngrps; g++) {
		if (len - off < sizeof(struct nkv_ana_group_desc))
			return -EPROTO;
		uint32_t nn = nkv_get32(b + off + 4);
		uint8_t st = b[off + 16] & 0xf;
		if (st != NKV_ANA_OPTIMIZED && st != NKV_ANA_NON_OPTIMIZED && st != NKV_ANA_INACCESSIBLE &&
		    st != NKV_ANA_PERSISTENT_LOSS && st != NKV_ANA_CHANGE)
			return -EPROTO;
		off += sizeof(struct nkv_ana_group_desc);
		if (nn > (len - off) / 4)
			return -EPROTO;
		for (uint32_t i = 0; i < nn; i++, off += 4)
			if (got < max)
				out[got++] = (struct nkv_ana_ns){.nsid = nkv_get32(b + off), .state = st};
	}
	return (int)got;
}

/** Read path @p's ANA log page into its table (watcher thread). */
static void mp_ana_read(struct mp_path *p, struct nkv_ctrl *c)
{
	const struct nkv_id_ctrlr *id = nkv_ctrl_identify(c);
	if (!(id->cmic & NKV_CMIC_ANA)) {
		pthread_mutex_lock(&p->ana_mu);
		p->ana = false; /* no ANA reporting: optimized */
		pthread_mutex_unlock(&p->ana_mu);
		return;
	}
	/* as Linux sizes it (drivers/nvme/host/multipath.c, nvme_mpath_init_identify): the header,
	 * NANAGRPID descriptors and an NSID per attachable namespace (MNAN; NN when MNAN is 0) */
	uint32_t nns = id->mnan ? id->mnan : id->nn;
	uint64_t want = sizeof(struct nkv_ana_log_hdr) + (uint64_t)(id->nanagrpid ? id->nanagrpid : 1) *
			sizeof(struct nkv_ana_group_desc) + (uint64_t)(nns ? nns : 1) * 4;
	uint32_t len = want > MP_ANA_LOG_MAX ? MP_ANA_LOG_MAX : (uint32_t)((want + 3) & ~3ull);
	uint8_t *buf = calloc(1, len);
	struct nkv_ana_ns *ns = calloc(MP_ANA_NS_MAX, sizeof(*ns));
	if (!buf || !ns)
		goto out;
	struct nkv_sqe sqe;
	uint32_t numd = len / 4 - 1;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_GET_LOG_PAGE;
	nkv_put32(&sqe.nsid, 0xffffffffu); /* as Linux: NSID FFFFFFFFh, LSP 0 (with NSID lists) */
	nkv_put32(&sqe.cdw10, NKV_LID_ANA | (numd & 0xffff) << 16);
	nkv_put32(&sqe.cdw11, numd >> 16);
	int rc = nkv_admin(c, &sqe, buf, len, NULL);
	if (rc == 0)
		rc = nkv_ana_parse(buf, len, ns, MP_ANA_NS_MAX);
	if (rc < 0) {
		if (rc != -ENOTCONN) /* reconnecting: its engine says it is down anyway */
			NKV_WARN("multipath: %s:%s: ANA log page: %s", p->traddr, p->trsvcid, strerror(-rc));
		goto out;
	}
	pthread_mutex_lock(&p->ana_mu);
	p->ana = true;
	p->nana = (unsigned)rc;
	memcpy(p->ana_ns, ns, (size_t)rc * sizeof(*ns));
	pthread_mutex_unlock(&p->ana_mu);
out:
	free(buf);
	free(ns);
}

/** Path @p's ANA state for @nsid (optimized without ANA reporting or for a namespace not listed). */
static unsigned mp_ana_state(struct mp_path *p, uint32_t nsid)
{
	unsigned st = NKV_ANA_OPTIMIZED;
	pthread_mutex_lock(&p->ana_mu);
	for (unsigned i = 0; p->ana && i < p->nana; i++)
		if (p->ana_ns[i].nsid == nsid) {
			st = p->ana_ns[i].state;
			break;
		}
	pthread_mutex_unlock(&p->ana_mu);
	return st;
}

/* ---- path choice and errors --------------------------------------------------------------------- */

/** The path for new I/O to @nsid, or -1 (none usable now). */
static int mp_pick(struct nkv_mp *mp, uint32_t nsid, int64_t now)
{
	int best = -1, best_rank = 2;
	for (unsigned i = 0; i < mp->np && best_rank > 0; i++) {
		struct mp_path *p = &mp->p[i];
		struct nkv_engine *eng = atomic_load(&p->eng);
		if (!eng || nkv_engine_is_down(eng) || atomic_load(&p->hold_until) > now)
			continue;
		unsigned st = mp_ana_state(p, nsid);
		int rank = st == NKV_ANA_OPTIMIZED ? 0 : st == NKV_ANA_NON_OPTIMIZED ? 1 : 2;
		if (rank < best_rank) {
			best = (int)i;
			best_rank = rank;
		}
	}
	return best;
}

static bool status_ana(uint16_t status)
{
	unsigned sct = (status >> 8) & 7, sc = status & 0xff;
	return sct == NKV_SCT_PATH && sc >= NKV_SC_ANA_PERSISTENT_LOSS && sc <= NKV_SC_ANA_TRANSITION;
}

bool nkv_mp_path_error(const struct nkv_op *s)
{
	return s->rc == -ENOTCONN || (s->rc == -ETIMEDOUT && s->status == NKV_STATUS_HOST_PATH) ||
	       (s->rc == -EAGAIN && s->status == 0) || status_ana(s->status);
}

/* Always when it surely did not run: never sent, or an ANA status (the controller refuses it
 * unrun). Else (it may have run) only when a second run does what one does: every KV command; an
 * Exec only when the caller marked it NKV_OP_IDEMPOTENT. */
bool nkv_mp_may_resend(const struct nkv_op *op, const struct nkv_op *s)
{
	if ((s->rc == -EAGAIN && s->status == 0) || status_ana(s->status))
		return true;
	return op->type != NKV_OP_EXEC || (op->flags & NKV_OP_IDEMPOTENT);
}

/* ---- batches ------------------------------------------------------------------------------------ */

static void batch_free(struct mp_batch *b)
{
	nkv_doneq_batch_fini(&b->d);
	free(b);
}

static void batch_free_dn(struct nkv_doneq_node *n)
{
	batch_free((struct mp_batch *)((char *)n - offsetof(struct mp_batch, d.dn)));
}

static void batch_finish(struct nkv_mp *mp, struct mp_batch *b)
{
	atomic_fetch_sub(&mp->ops, b->n);
	nkv_doneq_batch_finish(&mp->done, &b->d);
}

/** Complete @it with the result in @s (NULL: with its last path error, or -EAGAIN if never sent). */
static void item_done(struct nkv_mp *mp, struct mp_item *it, const struct nkv_op *s)
{
	struct nkv_op *op = it->op;
	if (s) {
		op->rc = s->rc;
		op->status = s->status;
		op->value_size = s->value_size;
		op->xfer = s->xfer;
	} else {
		op->rc = it->last_rc ? it->last_rc : -EAGAIN;
		op->status = it->last_rc ? it->last_status : 0;
		op->value_size = op->xfer = 0;
	}
	op->retries = it->retries;
	if (atomic_fetch_sub(&it->b->left, 1) == 1)
		batch_finish(mp, it->b);
}

static void wake(int fd)
{
	uint64_t one = 1;
	if (write(fd, &one, sizeof(one)) < 0)
		NKV_WARN("multipath: eventfd write: %s", strerror(errno));
}

/** Hand items that found no path (a NULL-terminated chain) to the dispatcher. */
static void inbox_push(struct nkv_mp *mp, struct mp_item *head, struct mp_item *tail)
{
	pthread_mutex_lock(&mp->in_mu);
	if (mp->in_tail)
		mp->in_tail->next = head;
	else
		mp->in_head = head;
	mp->in_tail = tail;
	pthread_mutex_unlock(&mp->in_mu);
	wake(mp->wake_fd);
}

/**
 * Send @n items, each to the path mp_pick() gives it, as one batch per path. Items with no path, or
 * whose path's engine refused the batch, come back in the chain *@rest (NULL-terminated).
 */
static void mp_send(struct nkv_mp *mp, struct mp_item **its, unsigned n, int64_t now, struct mp_item **rest)
{
	unsigned cnt[NKV_ENGINE_PATHS_MAX] = {0};
	int16_t *path = malloc(n * sizeof(*path));
	struct mp_item *rh = NULL, *rt = NULL;
	uint32_t last_nsid = 0; /* one choice per run of ops of one namespace */
	int last = -2;
	for (unsigned i = 0; i < n; i++) {
		uint32_t nsid = its[i]->op->nsid;
		int p = nsid == last_nsid && last != -2 ? last : mp_pick(mp, nsid, now);
		last_nsid = nsid;
		last = p;
		if (path)
			path[i] = (int16_t)p;
		if (p >= 0)
			cnt[p]++;
	}
	for (unsigned p = 0; p < mp->np && path; p++) {
		if (!cnt[p])
			continue;
		struct mp_sub *sub = calloc(1, sizeof(*sub) + cnt[p] * (sizeof(struct nkv_op) + sizeof(void *)));
		struct nkv_engine *eng = atomic_load(&mp->p[p].eng);
		unsigned k = 0;
		if (sub) {
			sub->path = p;
			sub->n = cnt[p];
			sub->ops = (struct nkv_op *)(sub + 1);
			sub->its = (struct mp_item **)(sub->ops + cnt[p]);
			for (unsigned i = 0; i < n; i++)
				if (path[i] == (int)p) {
					sub->its[k] = its[i];
					sub->ops[k] = *its[i]->op;
					k++;
				}
		}
		if (sub && nkv_engine_submit(eng, sub->ops, sub->n, (uintptr_t)sub) == 0)
			continue;
		free(sub); /* max_ops of the path's engine, or no memory: wait like ops without a path */
		for (unsigned i = 0; i < n; i++)
			if (path[i] == (int)p)
				path[i] = -1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (path && path[i] >= 0)
			continue;
		its[i]->next = NULL;
		if (rt)
			rt->next = its[i];
		else
			rh = its[i];
		rt = its[i];
	}
	free(path);
	*rest = rh;
}

/* ---- the dispatcher ----------------------------------------------------------------------------- */

/** A path's engine completed @sub: finish or resend each op. Resends are appended to @pend. */
static void sub_done(struct nkv_mp *mp, struct mp_sub *sub, int64_t now, struct mp_item **ph, struct mp_item **pt)
{
	struct mp_path *p = &mp->p[sub->path];
	bool failed = false, ok = false;
	for (unsigned i = 0; i < sub->n; i++) {
		struct nkv_op *s = &sub->ops[i];
		struct mp_item *it = sub->its[i];
		if (!nkv_mp_path_error(s)) {
			ok = true;
			item_done(mp, it, s);
			continue;
		}
		failed = true;
		if (status_ana(s->status))
			atomic_store(&p->ana_stale, true);
		if (!nkv_mp_may_resend(it->op, s) || now >= it->deadline || atomic_load(&mp->stop)) {
			item_done(mp, it, s);
			continue;
		}
		it->last_rc = s->rc;
		it->last_status = s->status;
		it->retries++;
		it->next = NULL;
		if (*pt)
			(*pt)->next = it;
		else
			*ph = it;
		*pt = it;
	}
	if (failed && now < atomic_load(&p->hold_until)) {
		/* already held: the ops of one failure come back in many batches, one backoff step */
	} else if (failed) {
		p->hold_ms = p->hold_ms ? p->hold_ms * 2 : mp->rc_min_ms;
		if (p->hold_ms > mp->rc_max_ms)
			p->hold_ms = mp->rc_max_ms;
		atomic_store(&p->hold_until, now + p->hold_ms);
		NKV_WARN("multipath: path %s:%s failed an op (holding it %d ms)", p->traddr, p->trsvcid, p->hold_ms);
	} else if (ok) {
		p->hold_ms = 0;
	}
	free(sub);
}

/** Try to send the pending items; complete those past their deadline (or at once with wait_ms < 0). */
static void pend_run(struct nkv_mp *mp, struct mp_item **ph, struct mp_item **pt, int64_t now)
{
	unsigned n = 0;
	for (struct mp_item *it = *ph; it; it = it->next)
		n++;
	if (!n)
		return;
	struct mp_item **its = malloc(n * sizeof(*its));
	if (!its)
		return; /* next tick */
	n = 0;
	for (struct mp_item *it = *ph, *nx; it; it = nx) {
		nx = it->next;
		its[n++] = it;
	}
	*ph = *pt = NULL;
	struct mp_item *rest = NULL;
	mp_send(mp, its, n, now, &rest);
	free(its);
	for (struct mp_item *it = rest, *nx; it; it = nx) {
		nx = it->next;
		if (now >= it->deadline || mp->wait_ms < 0 || atomic_load(&mp->stop)) {
			item_done(mp, it, NULL);
			continue;
		}
		it->next = NULL;
		if (*pt)
			(*pt)->next = it;
		else
			*ph = it;
		*pt = it;
	}
}

static void *disp_main(void *arg)
{
	struct nkv_mp *mp = arg;
	struct mp_item *ph = NULL, *pt = NULL; /* pending: waiting for a path */
	for (;;) {
		struct pollfd pf[NKV_ENGINE_PATHS_MAX + 1] = {{.fd = mp->wake_fd, .events = POLLIN}};
		struct nkv_engine *eng[NKV_ENGINE_PATHS_MAX];
		nfds_t nf = 1;
		for (unsigned i = 0; i < mp->np; i++)
			if ((eng[i] = atomic_load(&mp->p[i].eng)))
				pf[nf++] = (struct pollfd){.fd = nkv_engine_eventfd(eng[i]), .events = POLLIN};
		int tmo = ph ? MP_PEND_TICK_MS : MP_WATCH_TICK_MS * 4;
		poll(pf, nf, tmo);
		if (pf[0].revents & POLLIN) {
			uint64_t v;
			if (read(mp->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				NKV_WARN("multipath: eventfd read: %s", strerror(errno));
		}
		int64_t now = nkv_client_now_ms();
		for (unsigned i = 0; i < mp->np; i++) {
			if (!eng[i])
				continue;
			uint64_t tags[MP_REAP];
			int got;
			while ((got = nkv_engine_reap(eng[i], tags, MP_REAP, 0)) > 0)
				for (int k = 0; k < got; k++)
					sub_done(mp, (struct mp_sub *)(uintptr_t)tags[k], now, &ph, &pt);
		}
		pthread_mutex_lock(&mp->in_mu);
		if (mp->in_head) {
			if (pt)
				pt->next = mp->in_head;
			else
				ph = mp->in_head;
			pt = mp->in_tail;
			mp->in_head = mp->in_tail = NULL;
		}
		pthread_mutex_unlock(&mp->in_mu);
		pend_run(mp, &ph, &pt, now);
		if (atomic_load(&mp->stop) && atomic_load(&mp->ops) == 0)
			break;
	}
	return NULL;
}

/* ---- the watcher: late paths and ANA ----------------------------------------------------------- */

static int path_engine(struct nkv_mp *mp, struct mp_path *p, struct nkv_ctrl *c)
{
	struct nkv_engine *eng;
	int rc = nkv_engine_create(c, &mp->eopts, &eng);
	if (rc)
		return rc;
	if (!mp->queues)
		mp->queues = nkv_engine_queues(eng);
	p->ana_at = 0;
	mp_ana_read(p, c); /* before any op can choose the path */
	atomic_store(&p->ctrl, c);
	atomic_store(&p->eng, eng);
	return 0;
}

static void *watch_main(void *arg)
{
	struct nkv_mp *mp = arg;
	while (!atomic_load(&mp->stop)) {
		int64_t now = nkv_client_now_ms();
		for (unsigned i = 0; i < mp->np && !atomic_load(&mp->stop); i++) {
			struct mp_path *p = &mp->p[i];
			struct nkv_ctrl *c = atomic_load(&p->ctrl);
			if (!c) {
				if (now < p->conn_at)
					continue;
				int rc = nkv_connect(p->traddr, p->trsvcid, mp->subnqn, &mp->copts, &c);
				if (rc == 0 && (rc = path_engine(mp, p, c)) != 0)
					nkv_disconnect(c);
				if (rc == 0) {
					NKV_INFO("multipath: path %s:%s connected", p->traddr, p->trsvcid);
					wake(mp->wake_fd); /* the dispatcher polls the new engine's eventfd */
					continue;
				}
				p->conn_ms = p->conn_ms ? p->conn_ms * 2 : mp->rc_min_ms;
				if (p->conn_ms > mp->rc_max_ms)
					p->conn_ms = mp->rc_max_ms;
				p->conn_at = nkv_client_now_ms() + p->conn_ms;
				continue;
			}
			if (now >= p->ana_at || atomic_exchange(&p->ana_stale, false)) {
				if (!nkv_engine_is_down(atomic_load(&p->eng)))
					mp_ana_read(p, c);
				p->ana_at = nkv_client_now_ms() + MP_ANA_REFRESH_MS;
			}
		}
		pthread_mutex_lock(&mp->watch_mu);
		if (!atomic_load(&mp->stop)) {
			struct timespec ts = nkv_abstime_in_ms(MP_WATCH_TICK_MS);
			pthread_cond_timedwait(&mp->watch_cv, &mp->watch_mu, &ts);
		}
		pthread_mutex_unlock(&mp->watch_mu);
	}
	return NULL;
}

/* ---- public (through engine.c) ------------------------------------------------------------------ */

static int mp_submit(struct nkv_mp *mp, struct nkv_op *ops, unsigned n, uint64_t tag, bool run,
		     struct mp_batch **bout)
{
	if (!ops || n == 0)
		return -EINVAL;
	int bad = 0;
	for (unsigned i = 0; i < n; i++) {
		ops[i].rc = nkv_engine_op_check(&ops[i]);
		ops[i].status = ops[i].retries = 0;
		ops[i].value_size = ops[i].xfer = 0;
		if (ops[i].rc)
			bad = -EINVAL;
	}
	if (bad)
		return bad;
	atomic_fetch_add(&mp->entering, 1);
	int rc = 0;
	struct mp_batch *b = NULL;
	struct mp_item **its = NULL;
	if (atomic_load(&mp->closing))
		rc = -ESHUTDOWN;
	else if (atomic_fetch_add(&mp->ops, n) + n > mp->max_ops)
		rc = -EAGAIN;
	else if (!(b = calloc(1, sizeof(*b) + n * sizeof(b->items[0]))) || !(its = malloc(n * sizeof(*its))))
		rc = -ENOMEM;
	if (rc) {
		if (rc != -ESHUTDOWN)
			atomic_fetch_sub(&mp->ops, n);
		atomic_fetch_sub(&mp->entering, 1);
		free(b);
		return rc;
	}
	atomic_init(&b->left, n);
	b->n = n;
	nkv_doneq_batch_init(&b->d, run, tag);
	if (bout)
		*bout = b;
	int64_t now = nkv_client_now_ms();
	for (unsigned i = 0; i < n; i++) {
		b->items[i] = (struct mp_item){.op = &ops[i], .b = b, .deadline = now + mp->timeout_ms};
		its[i] = &b->items[i];
	}
	struct mp_item *rest = NULL;
	mp_send(mp, its, n, now, &rest);
	free(its);
	if (rest) {
		struct mp_item *tail = rest;
		while (tail->next)
			tail = tail->next;
		inbox_push(mp, rest, tail);
	}
	atomic_fetch_sub(&mp->entering, 1);
	return 0;
}

int nkv_mp_submit(struct nkv_mp *mp, struct nkv_op *ops, unsigned n, uint64_t tag)
{
	return mp_submit(mp, ops, n, tag, false, NULL);
}

int nkv_mp_run(struct nkv_mp *mp, struct nkv_op *ops, unsigned n)
{
	struct mp_batch *b = NULL;
	int rc = mp_submit(mp, ops, n, 0, true, &b);
	if (rc)
		return rc;
	nkv_doneq_batch_wait(&b->d);
	batch_free(b);
	int failed = 0;
	for (unsigned i = 0; i < n; i++)
		failed += ops[i].rc != 0;
	return failed;
}

int nkv_mp_reap(struct nkv_mp *mp, uint64_t *tags, unsigned max, int timeout_ms)
{
	return nkv_doneq_reap(&mp->done, tags, max, timeout_ms, batch_free_dn, NULL, NULL);
}

int nkv_mp_eventfd(const struct nkv_mp *mp)
{
	return mp->done.fd;
}

unsigned nkv_mp_queues(const struct nkv_mp *mp)
{
	return mp->queues;
}

unsigned nkv_mp_paths(const struct nkv_mp *mp)
{
	return mp->np;
}

struct nkv_ctrl *nkv_mp_ctrl(const struct nkv_mp *mp, unsigned i)
{
	return i < mp->np ? atomic_load(&((struct nkv_mp *)mp)->p[i].ctrl) : NULL;
}

int nkv_mp_active(struct nkv_mp *mp, uint32_t nsid)
{
	int p = mp_pick(mp, nsid, nkv_client_now_ms());
	return p < 0 ? -ENOTCONN : p;
}

void nkv_mp_destroy(struct nkv_mp *mp)
{
	atomic_store(&mp->closing, true);
	while (atomic_load(&mp->entering))
		sched_yield();
	/* every accepted op completes within its deadline (pending ones are failed by the stop flag
	 * only once their paths' engines gave them back) */
	while (mp->disp_started && atomic_load(&mp->ops))
		usleep(1000);
	atomic_store(&mp->stop, true);
	if (mp->disp_started) {
		wake(mp->wake_fd);
		pthread_join(mp->disp_th, NULL);
	}
	if (mp->watch_started) {
		pthread_mutex_lock(&mp->watch_mu);
		pthread_cond_signal(&mp->watch_cv);
		pthread_mutex_unlock(&mp->watch_mu);
		pthread_join(mp->watch_th, NULL);
	}
	for (unsigned i = 0; i < mp->np; i++) {
		struct mp_path *p = &mp->p[i];
		nkv_engine_destroy(atomic_load(&p->eng));
		nkv_disconnect(atomic_load(&p->ctrl));
		pthread_mutex_destroy(&p->ana_mu);
	}
	nkv_doneq_fini(&mp->done, batch_free_dn);
	if (mp->wake_fd >= 0)
		close(mp->wake_fd);
	pthread_mutex_destroy(&mp->in_mu);
	pthread_mutex_destroy(&mp->watch_mu);
	pthread_cond_destroy(&mp->watch_cv);
	char *own[] = {mp->own_hostnqn, mp->own_secret, mp->own_ctrl_secret, mp->own_tls_key};
	for (unsigned i = 0; i < 4; i++)
		if (own[i]) {
			explicit_bzero(own[i], strlen(own[i]));
			free(own[i]);
		}
	free(mp);
}

/* ---- nkv_engine_connect ------------------------------------------------------------------------- */

/** One path of the list ("HOST:PORT", "[v6]:PORT", "HOST", "shm:/path", "vfio-user:/path"): @return 0 or
 *  -EINVAL. */
static int parse_path(const char *s, size_t n, struct mp_path *p)
{
	char buf[300];
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	const char *port = NULL;
	bool vfio_user;
	const char *sock = nkv_shm_traddr_path(buf, &vfio_user);
	if (sock) {
		if (!*sock || n >= sizeof(p->traddr))
			return -EINVAL;
		memcpy(p->traddr, buf, n + 1);
		return 0;
	}
	char *host = buf;
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');
		if (!close || close == buf + 1 || (close[1] && close[1] != ':'))
			return -EINVAL;
		if (close[1]) {
			port = close + 2;
			close[1] = '\0';
		}
	} else {
		char *c = strchr(buf, ':');
		if (c && !strchr(c + 1, ':')) { /* one colon: HOST:PORT; more: a bare IPv6 address */
			*c = '\0';
			port = c + 1;
		}
	}
	if (!*host || strlen(host) >= sizeof(p->traddr))
		return -EINVAL;
	if (port) {
		char *end;
		unsigned long v = strtoul(port, &end, 10);
		if (!*port || *end || *port < '0' || *port > '9' || v < 1 || v > 65535)
			return -EINVAL;
		snprintf(p->trsvcid, sizeof(p->trsvcid), "%lu", v);
	}
	snprintf(p->traddr, sizeof(p->traddr), "%s", host);
	return 0;
}

/* A PCIe-style controller's socket (shm or vfio-user): it names the subsystem, no discovery. */
static bool is_shm(const struct mp_path *p)
{
	bool vfio_user;
	return nkv_shm_traddr_path(p->traddr, &vfio_user) != NULL;
}

/** The same address and port (brackets aside)? */
static bool same_path(const struct mp_path *p, const char *traddr, const char *trsvcid)
{
	const char *a = p->traddr;
	size_t la = strlen(a), lb = strlen(traddr);
	if (a[0] == '[' && la > 2) {
		a++;
		la -= 2;
	}
	return la == lb && !strncmp(a, traddr, la) && !strcmp(p->trsvcid, trsvcid);
}

static bool wildcard(const char *traddr)
{
	return !*traddr || !strcmp(traddr, "0.0.0.0") || !strcmp(traddr, "::") || !strcmp(traddr, "[::]");
}

/**
 * Without a subsystem NQN: read the discovery log at the first TCP path that answers, take its one
 * subsystem, give paths without a port its port, and add the log's other entries of that
 * subsystem as paths.
 */
static int discover_paths(struct nkv_mp *mp, const struct nkv_conn_opts *copts)
{
	int rc = 0; /* shm paths only: the first socket that answers names the subsystem */
	for (unsigned i = 0; i < mp->np; i++) {
		struct mp_path *p = &mp->p[i];
		if (is_shm(p))
			continue;
		struct nkv_disc_entry sub, *ents = NULL;
		unsigned n = 0;
		rc = nkv_discover_subsys(p->traddr, p->trsvcid[0] ? p->trsvcid : NULL, copts, &sub, &ents, &n);
		if (rc == -ENOTUNIQ || rc == -ENOENT) {
			free(ents);
			return rc;
		}
		if (rc)
			continue;
		snprintf(mp->subnqn, sizeof(mp->subnqn), "%s", sub.subnqn);
		for (unsigned k = 0; k < mp->np; k++)
			if (!is_shm(&mp->p[k]) && !mp->p[k].trsvcid[0])
				snprintf(mp->p[k].trsvcid, sizeof(mp->p[k].trsvcid), "%s", sub.trsvcid);
		unsigned np0 = mp->np;
		for (unsigned e = 0; e < n && mp->np < NKV_ENGINE_PATHS_MAX; e++) {
			if (ents[e].subtype != NKV_SUBTYPE_NVME || ents[e].trtype != NKV_TRTYPE_TCP ||
			    strcmp(ents[e].subnqn, sub.subnqn) || wildcard(ents[e].traddr) ||
			    ((ents[e].treq & 3) == NKV_TREQ_REQUIRED) != (copts && copts->tls))
				continue;
			bool known = false;
			for (unsigned k = 0; k < mp->np && !known; k++)
				known = same_path(&mp->p[k], ents[e].traddr, ents[e].trsvcid);
			if (known)
				continue;
			struct mp_path *q = &mp->p[mp->np++];
			snprintf(q->traddr, sizeof(q->traddr), "%s", ents[e].traddr);
			snprintf(q->trsvcid, sizeof(q->trsvcid), "%s", ents[e].trsvcid);
		}
		if (mp->np > np0)
			NKV_INFO("multipath: the discovery log at %s lists %u more path(s) to %s", p->traddr,
				 mp->np - np0, mp->subnqn);
		free(ents);
		return 0;
	}
	return rc;
}

int nkv_engine_connect(const char *paths, const char *subnqn, const struct nkv_conn_opts *copts,
		       const struct nkv_engine_opts *eopts, struct nkv_engine **out)
{
	struct nkv_engine_opts eo = eopts ? *eopts : (struct nkv_engine_opts){0};
	if (!paths || !out || eo.reconnect_min_ms < 0 || eo.reconnect_max_ms < 0 ||
	    (subnqn && strlen(subnqn) >= sizeof(((struct nkv_mp *)0)->subnqn)))
		return -EINVAL;
	struct nkv_mp *mp = calloc(1, sizeof(*mp) + NKV_ENGINE_PATHS_MAX * sizeof(mp->p[0]));
	if (!mp)
		return -ENOMEM;
	mp->wake_fd = -1;
	int qrc = nkv_doneq_init(&mp->done);
	pthread_mutex_init(&mp->in_mu, NULL);
	pthread_mutex_init(&mp->watch_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* nkv_abstime_in_ms() */
	pthread_cond_init(&mp->watch_cv, &ca);
	pthread_condattr_destroy(&ca);
	for (unsigned i = 0; i < NKV_ENGINE_PATHS_MAX; i++)
		pthread_mutex_init(&mp->p[i].ana_mu, NULL);
	int rc = 0;
	for (const char *s = paths;; ) {
		const char *c = strchr(s, ',');
		size_t n = c ? (size_t)(c - s) : strlen(s);
		if (mp->np == NKV_ENGINE_PATHS_MAX || (rc = parse_path(s, n, &mp->p[mp->np])) != 0) {
			rc = -EINVAL;
			break;
		}
		mp->np++;
		if (!c)
			break;
		s = c + 1;
	}
	/* paths connected later by the watcher need the caller's strings after this call returns */
	if (copts) {
		mp->copts = *copts;
		const char *src[] = {copts->dhchap_secret, copts->dhchap_ctrl_secret, copts->tls_key};
		char **dst[] = {&mp->own_secret, &mp->own_ctrl_secret, &mp->own_tls_key};
		for (unsigned i = 0; i < 3 && rc == 0; i++)
			if (src[i] && !(*dst[i] = strdup(src[i])))
				rc = -ENOMEM;
		mp->copts.dhchap_secret = mp->own_secret;
		mp->copts.dhchap_ctrl_secret = mp->own_ctrl_secret;
		mp->copts.tls_key = mp->own_tls_key;
	}
	if (rc == 0 && subnqn)
		snprintf(mp->subnqn, sizeof(mp->subnqn), "%s", subnqn);
	else if (rc == 0)
		rc = discover_paths(mp, copts);
	/* connect every path now; the first that answers settles the subsystem for shm-only lists */
	int first_err = 0;
	unsigned up = 0;
	for (unsigned i = 0; rc == 0 && i < mp->np; i++) {
		struct mp_path *p = &mp->p[i];
		if (!is_shm(p) && !p->trsvcid[0])
			snprintf(p->trsvcid, sizeof(p->trsvcid), "%s", MP_DEFAULT_PORT);
		struct nkv_ctrl *c;
		int r = nkv_connect(p->traddr, p->trsvcid, mp->subnqn[0] ? mp->subnqn : NULL, &mp->copts, &c);
		if (r == 0) {
			if (!mp->subnqn[0])
				snprintf(mp->subnqn, sizeof(mp->subnqn), "%s", c->subnqn);
			if (!up && !mp->own_hostnqn) { /* every later path presents the same host identity */
				mp->own_hostnqn = strdup(c->hostnqn);
				memcpy(mp->copts.hostid, c->hostid, sizeof(c->hostid));
			}
			mp->copts.hostnqn = mp->own_hostnqn;
			mp->eopts = eo;
			mp->eopts.reconnect_wait_ms = -1; /* unsent ops come back at once: another path takes them */
			r = path_engine(mp, p, c);
			if (r)
				nkv_disconnect(c);
		}
		if (r == 0)
			up++;
		else if (!first_err)
			first_err = r;
		if (r)
			NKV_WARN("multipath: path %s%s%s: %s (retrying in the background)", p->traddr,
				 p->trsvcid[0] ? ":" : "", p->trsvcid, strerror(-r));
	}
	if (rc == 0 && !up)
		rc = first_err ? first_err : -ENOTCONN;
	mp->timeout_ms = eo.timeout_ms > 0 ? eo.timeout_ms : (mp->copts.timeout_ms > 0 ? mp->copts.timeout_ms : 30000);
	mp->wait_ms = eo.reconnect_wait_ms;
	mp->rc_min_ms = eo.reconnect_min_ms ? eo.reconnect_min_ms : 50;
	mp->rc_max_ms = eo.reconnect_max_ms ? eo.reconnect_max_ms : 1000;
	if (mp->rc_max_ms < mp->rc_min_ms)
		mp->rc_max_ms = mp->rc_min_ms;
	mp->max_ops = eo.max_ops ? eo.max_ops : MP_DEFAULT_MAX_OPS;
	if (rc == 0 && (rc = qrc) == 0) {
		mp->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (mp->wake_fd < 0)
			rc = -errno;
	}
	if (rc == 0) {
		rc = -pthread_create(&mp->disp_th, NULL, disp_main, mp);
		mp->disp_started = rc == 0;
	}
	if (rc == 0) {
		rc = -pthread_create(&mp->watch_th, NULL, watch_main, mp);
		mp->watch_started = rc == 0;
	}
	struct nkv_engine *e = rc == 0 ? nkv_engine_wrap_mp(mp) : NULL;
	if (rc == 0 && !e)
		rc = -ENOMEM;
	if (rc) {
		for (unsigned i = mp->np; i < NKV_ENGINE_PATHS_MAX; i++)
			pthread_mutex_destroy(&mp->p[i].ana_mu);
		nkv_mp_destroy(mp);
		return rc;
	}
	for (unsigned i = mp->np; i < NKV_ENGINE_PATHS_MAX; i++)
		pthread_mutex_destroy(&mp->p[i].ana_mu);
	*out = e;
	return 0;
}
