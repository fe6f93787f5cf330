/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c - many KV commands in flight on several queue pairs, from any thread (nkv.h "engine").
 *
 * One worker thread per queue pair owns it (the queue pair rules of nkv.h): callers push the ops of
 * a batch into the workers' inboxes (a mutex-guarded list and an eventfd to wake the worker), the
 * worker moves them onto its queue pair as far as the queue depth allows, polls, and completes
 * each op into the caller's struct nkv_op. The last op of a batch wakes the thread waiting in
 * nkv_engine_run(), or queues the batch's tag for nkv_engine_reap() and makes the engine's eventfd
 * readable.
 *
 * Deadlines: an op's clock starts when it is sent. A worker whose oldest op outlives the deadline
 * fails its queue pair (every op on it completes; the late ones with -ETIMEDOUT, the others with
 * Host Pathing Error: they may have run) and opens a new one: nothing can then write into a buffer
 * the caller already got back.
 *
 * A lost controller (its target restarted, the connection dropped): a worker whose queue pair failed
 * opens a new one at once; when that fails too, the controller itself is gone (a restarted target
 * refuses the old controller ID; over shm the admin queue died with the socket), so the worker marks
 * the engine down. Every worker then drops its queue pair (ops still on it complete with Host Pathing
 * Error, -ENOTCONN) and keeps its unsent ops; once none holds a queue pair, the engine's supervisor
 * thread replaces the whole association (nkv_ctrl_reconnect: admin queue, Connect with a new
 * controller ID or a new shm HELLO, I/O queues), retrying with exponential backoff (reconnect_min_ms
 * doubling up to reconnect_max_ms), and wakes the workers, which open new queue pairs and send what
 * waited. An op that waits for a queue longer than reconnect_wait_ms completes with -EAGAIN: it was
 * never sent. Workers also watch their connection (TCP socket, shm control socket) for a hang-up
 * while idle, so a restart is noticed, and repaired, before the next op arrives.
 *
 * Small batches of nkv_engine_run() skip the hand-off: when the worker that would get the batch is
 * idle (nothing queued or in flight), the calling thread takes its queue pair (the worker's qp_mu,
 * which the worker holds whenever it drives the queue and lets go of only while it sleeps idle),
 * sends the ops and polls for their completions itself, exactly as the worker would, deadlines and
 * failures included. A QD 1 command then costs what it costs on a bare queue pair: no eventfd write
 * to wake the worker, no condition variable to wake the caller (two thread wake-ups, each several
 * microseconds, more on a busy machine). The queue pair still has one thread at a time on it.
 *
 * Waiting: an idle worker sleeps in poll() on its eventfd. A busy NVMe/TCP worker sleeps in poll()
 * on the socket and the eventfd together; a busy shm worker polls the CQ, spinning first, then sleeps
 * on the eventfd and the CQ's interrupt eventfd together (nkv_shm.h notifications), or, when the
 * target offers no interrupts, naps a few microseconds on the eventfd. Callers write the eventfd
 * only while the worker sleeps (or is about to): a busy worker is not sent a system call per batch.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/doneq.h"
#include "client/internal.h"
#include "common/clock.h"
#include "common/cpu.h"
#include "common/log.h"

#define ENG_DEFAULT_QUEUES 4u
#define ENG_DEFAULT_MAX_OPS 65536u
#define ENG_SHM_SPINS 2000u          /* empty CQ polls before napping (as shm.c's own poll) */
#define ENG_SHM_NAP_NS 10000L        /* then 10 us naps, cut short by new work */
#define ENG_SHM_SPIN_NS 20000u       /* empty CQ polls for this long before arming the CQ interrupt and
				      * sleeping (as shm.c's own poll): time, not a count, so that a
				      * slower loop (the caller's, sanitizers) spins no longer */
#define ENG_RECONNECT_MIN_MS 50      /* first retry of a lost controller */
#define ENG_RECONNECT_MAX_MS 1000    /* backoff cap: a target back after a restart is found within ~1 s */
#define ENG_IDLE_TICK_MS 1000        /* an idle worker still wakes up now and then to check stop */
#define ENG_YIELD_NS 1000000u       /* a worker leaves its queue pair to reaping callers until none has
				      * driven it for this long (engine_drive) */
#define ENG_DRIVE_MAX 64u            /* queue pairs one reaping caller drives (the others' workers do) */
#define ENG_INLINE_OPS 64u           /* nkv_engine_run() batches up to this many ops ... */
#define ENG_INLINE_BYTES (256u << 10) /* ... and bytes (or one op of any size) may run on the caller */

struct eng_batch;

/** One op on its way: inbox, pending list and in-flight list links. */
struct eng_item {
	struct nkv_op *op;
	struct eng_batch *b;
	struct eng_worker *w;
	struct eng_item *next, *prev;
	int64_t t_ms;     /* pending: when it reached the worker; in flight: when it was sent */
	bool expired;     /* its deadline passed: complete with -ETIMEDOUT */
};

struct eng_batch {
	atomic_uint left;
	unsigned n;
	struct nkv_doneq_batch d;  /* its run() waiter, or its tag for reap */
	struct eng_item items[];
};

/** An intrusive FIFO of items. */
struct eng_list {
	struct eng_item *head, *tail;
	unsigned n;
};

struct eng_worker {
	struct nkv_engine *e;
	pthread_t th;
	bool started;
	int wake_fd;
	atomic_uint sleepers;      /* threads blocked in poll() on wake_fd (or about to): the worker, and a
				    * caller on its queue pair (run_inline); new work must write wake_fd */
	pthread_mutex_t mu;
	struct eng_list inbox;     /* guarded by mu */
	bool stop;                 /* guarded by mu */
	atomic_uint load;          /* ops given to this worker and not completed */
	/* Guarded by qp_mu: whoever holds it drives the queue pair. The worker thread holds it except
	 * while it sleeps with nothing in flight; a caller may take it then (run_inline). */
	pthread_mutex_t qp_mu;
	struct nkv_qpair *qp;
	struct eng_list pend;      /* taken from the inbox, not yet sent */
	struct eng_list inflight;  /* sent, in send order (oldest first) */
	int64_t reopen_at;         /* no queue pair for want of a free queue (-ENOSPC): next try */
	int reopen_ms;
	unsigned spins;
	uint64_t spin_until;       /* shm: end of the current busy poll (0: none started) */
	bool hup;                  /* the connection hung up while the worker slept */
	/* Reaping callers that drive the queue pair (engine_drive): the worker leaves it to them. */
	atomic_uint want;          /* callers in a blocking reap that want the queue pair */
	pthread_cond_t yield_cv;   /* with mu: a yielding worker's sleep (worker_yield) */
	_Atomic uint64_t driven_ns;/* when one last let go of it after driving (0: it asked the worker back) */
};

struct nkv_engine {
	struct nkv_ctrl *ctrl;
	struct nkv_mp *mp;         /* a multipath engine (mpath.c): every call goes there; no workers */
	unsigned nw;
	uint16_t depth;
	int timeout_ms;
	int wait_ms;               /* how long an unsent op waits for a queue pair (< 0: not at all) */
	int rc_min_ms, rc_max_ms;  /* reconnect backoff */
	unsigned max_ops;
	/* the controller's state, guarded by sup_mu */
	pthread_mutex_t sup_mu;
	pthread_cond_t sup_cv;
	pthread_t sup_th;
	bool sup_started, sup_stop;
	atomic_bool down;          /* the controller is lost: no worker may hold or open a queue pair */
	unsigned open_qps;         /* worker queue pairs open or being opened */
	atomic_uint ops;           /* accepted and not completed */
	atomic_uint rr;            /* where the next batch starts */
	unsigned qd;               /* commands one queue pair holds (its depth) */
	atomic_bool closing;
	atomic_uint entering;      /* submit calls between their closing check and their last push */
	struct nkv_doneq done;     /* completed batches of nkv_engine_submit(), for reap */
	struct eng_worker w[];
};

/* ---- lists ------------------------------------------------------------------------------------- */

static void list_push(struct eng_list *l, struct eng_item *it)
{
	it->next = NULL;
	it->prev = l->tail;
	if (l->tail)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	l->n++;
}

static void list_del(struct eng_list *l, struct eng_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		l->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		l->tail = it->prev;
	it->next = it->prev = NULL;
	l->n--;
}

/** Move all of @src to the end of @dst. */
static void list_splice(struct eng_list *dst, struct eng_list *src)
{
	if (!src->head)
		return;
	if (dst->tail) {
		dst->tail->next = src->head;
		src->head->prev = dst->tail;
	} else {
		dst->head = src->head;
	}
	dst->tail = src->tail;
	dst->n += src->n;
	*src = (struct eng_list){0};
}

/* ---- completion -------------------------------------------------------------------------------- */

static void batch_free(struct eng_batch *b)
{
	nkv_doneq_batch_fini(&b->d);
	free(b);
}

static void batch_free_dn(struct nkv_doneq_node *n)
{
	batch_free((struct eng_batch *)((char *)n - offsetof(struct eng_batch, d.dn)));
}

/** The batch's last op completed: wake its waiter, or queue its tag for reap. */
static void batch_finish(struct nkv_engine *e, struct eng_batch *b)
{
	atomic_fetch_sub(&e->ops, b->n);
	nkv_doneq_batch_finish(&e->done, &b->d);
}

/** Complete one op with @rc (and, when it reached the controller, its CQE). */
static void item_complete(struct eng_worker *w, struct eng_item *it, int rc, const struct nkv_cpl *cpl)
{
	struct nkv_op *op = it->op;
	op->rc = rc;
	op->status = cpl ? cpl->status : 0;
	op->value_size = cpl ? cpl->dw0 : 0;
	op->xfer = cpl ? cpl->xfer : 0;
	atomic_fetch_sub(&w->load, 1);
	struct eng_batch *b = it->b;
	if (atomic_fetch_sub(&b->left, 1) == 1)
		batch_finish(w->e, b);
}

/* Queue pair callback: runs inside nkv_qpair_poll() (or the queue's failure) on the worker. */
static void op_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct eng_item *it = arg;
	struct eng_worker *w = it->w;
	list_del(&w->inflight, it);
	int rc = nkv_cpl_errno(cpl);
	if (cpl->status == NKV_STATUS_HOST_PATH)
		rc = it->expired ? -ETIMEDOUT : -ENOTCONN;
	item_complete(w, it, rc, cpl);
}

/* ---- the worker -------------------------------------------------------------------------------- */

/** A vendor Exec op's command, checked as nkv_vendor_exec() checks its arguments. */
static int exec_op_sqe(const struct nkv_op *op, struct nkv_sqe *sqe)
{
	uint8_t opc = op->opts, inl[8];
	unsigned xfer = nkv_opc_xfer(opc);
	if (op->klen == 0 || op->klen > NKV_KEY_MAX || opc < NKV_EXEC_OPC_FIRST || opc >= NKV_VS_OPC_FIRST ||
	    (op->len && !op->buf) || (op->flags & ~NKV_OP_IDEMPOTENT) || op->ttl_s > NKV_EXEC_INLINE_MAX ||
	    xfer == NKV_XFER_BIDI || (xfer == NKV_XFER_NONE && op->len) ||
	    (xfer == NKV_XFER_H2C && (op->ttl_s || op->offset)))
		return -EINVAL;
	memcpy(inl, &op->offset, sizeof(inl));
	nkv_sqe_exec(sqe, opc, op->nsid, op->key, op->klen, op->len, inl, op->ttl_s);
	return 0;
}

/** Build @op's command. @return 0 or -EINVAL. */
static int op_sqe(const struct nkv_op *op, struct nkv_sqe *sqe)
{
	unsigned opc;
	if (op->type == NKV_OP_EXEC)
		return exec_op_sqe(op, sqe);
	switch (op->type) {
	case NKV_OP_STORE:
		opc = NKV_KV_STORE;
		break;
	case NKV_OP_RETRIEVE:
		opc = NKV_KV_RETRIEVE;
		break;
	case NKV_OP_DELETE:
		opc = NKV_KV_DELETE;
		break;
	case NKV_OP_EXIST:
		opc = NKV_KV_EXIST;
		break;
	case NKV_OP_LIST:
		opc = NKV_KV_LIST;
		break;
	default:
		return -EINVAL;
	}
	bool has_data = op->type == NKV_OP_STORE || op->type == NKV_OP_RETRIEVE || op->type == NKV_OP_LIST;
	bool store = op->type == NKV_OP_STORE;
	/* flags and ttl_s belong to Store; an unknown flag bit is refused rather than dropped, so a
	 * caller built against a later libnkv does not lose what it asked for without hearing of it. */
	if (op->klen > NKV_KEY_MAX || (op->klen == 0 && op->type != NKV_OP_LIST) || (op->len && !op->buf) ||
	    (!has_data && op->len) || (op->offset && op->type != NKV_OP_RETRIEVE && !(op->flags & NKV_OP_HASH)) ||
	    (op->opts && !store) || (op->flags & ~(NKV_OP_PIN | NKV_OP_HASH)) || ((op->flags || op->ttl_s) && !store) ||
	    (op->type == NKV_OP_LIST && op->len < NKV_LIST_HDR))
		return -EINVAL;
	if (op->type == NKV_OP_RETRIEVE && op->offset)
		nkv_sqe_retrieve_range(sqe, op->nsid, op->key, op->klen, op->len, op->offset);
	else if (store && (op->ttl_s || op->flags)) { /* Store TTL (F1h) */
		nkv_sqe_store_ttl(sqe, op->nsid, op->key, op->klen, op->len, op->opts, op->ttl_s,
				  (op->flags & NKV_OP_PIN) ? NKV_TTL_PIN : 0);
		if (op->flags & NKV_OP_HASH)
			nkv_sqe_set_block_hash(sqe, op->offset);
	}
	else
		nkv_sqe_kv(sqe, (uint8_t)opc, op->nsid, op->key, op->klen, op->len, op->opts);
	return 0;
}

static void worker_wake(struct eng_worker *w)
{
	uint64_t one = 1;
	if (write(w->wake_fd, &one, sizeof(one)) < 0)
		NKV_WARN("engine: eventfd write: %s", strerror(errno));
	pthread_cond_signal(&w->yield_cv); /* a yielding worker (worker_yield) does not poll wake_fd */
}

static void engine_wake_all(struct nkv_engine *e)
{
	for (unsigned i = 0; i < e->nw; i++)
		if (e->w[i].wake_fd >= 0) /* set before the threads start, closed after they all stopped */
			worker_wake(&e->w[i]);
}

/** One worker queue pair fewer; the supervisor waits for none before it reconnects. */
static void engine_qp_gone(struct nkv_engine *e)
{
	pthread_mutex_lock(&e->sup_mu);
	if (--e->open_qps == 0 && atomic_load(&e->down))
		pthread_cond_signal(&e->sup_cv);
	pthread_mutex_unlock(&e->sup_mu);
}

/** The controller is gone (a queue pair cannot be opened on it): every worker drops its queue pair
 *  and the supervisor replaces the association. */
static void engine_lost(struct nkv_engine *e, int err)
{
	pthread_mutex_lock(&e->sup_mu);
	bool was = atomic_exchange(&e->down, true);
	pthread_cond_signal(&e->sup_cv);
	pthread_mutex_unlock(&e->sup_mu);
	if (!was) {
		NKV_WARN("engine: controller %s lost (%s); reconnecting", e->ctrl->subnqn, strerror(-err));
		engine_wake_all(e);
	}
}

/** Drop the queue pair: take the completions already there, fail the rest (the callbacks complete
 *  those ops), close it. */
static void worker_drop_qp(struct eng_worker *w, int err)
{
	if (!w->qp)
		return;
	if (!w->qp->err && w->inflight.head)
		(void)nkv_qpair_poll(w->qp, 0);
	if (!w->qp->err)
		w->qp->ops->fail(w->qp, err);
	nkv_qpair_destroy(w->qp);
	w->qp = NULL;
	int64_t now = nkv_client_now_ms();
	for (struct eng_item *it = w->pend.head; it; it = it->next)
		it->t_ms = now; /* from now on they wait for a queue, not for room in one */
	w->reopen_at = 0; /* at once the first time */
	w->reopen_ms = 0;
	engine_qp_gone(w->e);
}

static void worker_reopen(struct eng_worker *w, int64_t now)
{
	struct nkv_engine *e = w->e;
	if (w->qp || now < w->reopen_at)
		return;
	pthread_mutex_lock(&e->sup_mu); /* counted before it exists: the supervisor must not reconnect under it */
	bool down = atomic_load(&e->down);
	if (!down)
		e->open_qps++;
	pthread_mutex_unlock(&e->sup_mu);
	if (down)
		return;
	/* a restarted target may already listen again and even hand the old controller ID to
	 * another association: a queue pair is only opened while the old one is still there */
	int rc = nkv_ctrl_hung_up(e->ctrl) ? -ECONNRESET : nkv_qpair_create(e->ctrl, e->depth, &w->qp);
	if (rc == 0) {
		w->reopen_ms = 0;
		w->reopen_at = 0;
		return;
	}
	w->qp = NULL;
	engine_qp_gone(e);
	if (rc == -ENOSPC || rc == -ENOMEM) { /* the controller is there, a queue is not: retry this one */
		w->reopen_ms = w->reopen_ms ? w->reopen_ms * 2 : e->rc_min_ms;
		if (w->reopen_ms > e->rc_max_ms)
			w->reopen_ms = e->rc_max_ms;
		w->reopen_at = now + w->reopen_ms;
		NKV_WARN("engine: opening a queue pair: %s (next try in %d ms)", strerror(-rc), w->reopen_ms);
		return;
	}
	engine_lost(e, rc);
}

/** Send pending ops while the queue takes them; a queue pair that failed is dropped when @own (the
 *  worker thread), else left to the worker (run_inline). @return ops sent. */
static unsigned worker_send(struct eng_worker *w, int64_t now, bool own)
{
	unsigned sent = 0;
	while (w->qp && w->pend.head) {
		struct eng_item *it = w->pend.head;
		struct nkv_sqe sqe;
		int rc = op_sqe(it->op, &sqe); /* checked at submit: cannot fail here */
		if (rc == 0)
			rc = nkv_submit(w->qp, &sqe, it->op->buf, it->op->len, op_cb, it);
		if (rc == -EAGAIN && nkv_qpair_outstanding(w->qp) == 0)
			rc = -ENOBUFS; /* nothing to wait for: it can never fit (shm bounce area) */
		if (rc == -EAGAIN)
			break;
		list_del(&w->pend, it);
		if (rc == 0) {
			it->t_ms = now;
			list_push(&w->inflight, it);
			sent++;
		} else if (rc == -ENOTCONN) {
			list_push(&w->pend, it); /* back in line (at the end: order is not promised) */
			if (!own)
				break;
			worker_drop_qp(w, w->qp->err ? w->qp->err : rc);
		} else {
			item_complete(w, it, rc, NULL);
		}
	}
	return sent;
}

/** Deadlines: fail the queue under an op sent too long ago; give up on ops waiting for a queue
 *  (at once when the engine stops or fails fast). */
static void worker_expire(struct eng_worker *w, int64_t now, bool stop)
{
	int64_t tmo = w->e->timeout_ms;
	struct eng_item *it = w->inflight.head;
	if (w->qp && it && now - it->t_ms >= tmo) {
		unsigned late = 0;
		for (; it && now - it->t_ms >= tmo; it = it->next, late++)
			it->expired = true;
		NKV_WARN("engine: qid %u: %u command(s) unanswered after %d ms; reopening the queue", w->qp->qid,
			 late, w->e->timeout_ms);
		worker_drop_qp(w, -ETIMEDOUT);
	}
	if (!w->qp) {
		int wait = w->e->wait_ms;
		while ((it = w->pend.head) && (stop || wait < 0 || now - it->t_ms >= wait)) {
			list_del(&w->pend, it);
			item_complete(w, it, -EAGAIN, NULL); /* never sent: safe to retry */
		}
	}
}

/**
 * Block in poll() (ppoll() when @ts) on @p, whose first entry is wake_fd, unless work already waits
 * in the inbox. `sleepers` is raised first and the inbox looked at after it, under mu: a caller that
 * queued work after that look sees the count and writes wake_fd (engine_submit). With nothing in
 * flight the worker lets go of its queue pair meanwhile, so a caller may run a small batch on it
 * (run_inline); such a caller never closes the queue pair, so the fds in @p stay the ones polled.
 */
static void worker_block(struct eng_worker *w, struct pollfd *p, nfds_t n, int tmo, const struct timespec *ts)
{
	bool idle = !w->inflight.head;
	atomic_fetch_add(&w->sleepers, 1);
	pthread_mutex_lock(&w->mu);
	bool work = w->inbox.head != NULL;
	pthread_mutex_unlock(&w->mu);
	if (!work) {
		if (idle)
			pthread_mutex_unlock(&w->qp_mu);
		if (ts)
			ppoll(p, n, ts, NULL);
		else
			poll(p, n, tmo);
		if (idle)
			pthread_mutex_lock(&w->qp_mu);
	}
	atomic_fetch_sub(&w->sleepers, 1);
}

/**
 * Put in @p what signals @w's next completion: the CQ's interrupt eventfd (shm; the CQ is armed
 * until qp_wait_end) or the socket (NVMe/TCP). @return 1 when @p is set, 0 when there is nothing to
 * wait for (a CQE is there, or TLS holds decrypted bytes the socket will not signal: poll the queue
 * again), -1 when the controller offers no interrupts (shm: nap instead).
 */
static int qp_wait_fd(struct eng_worker *w, struct pollfd *p)
{
	if (w->qp->shm) {
		int irq = nkv_shm_qp_arm(w->qp); /* -1: no interrupts; -2: a CQE is there */
		if (irq < 0)
			return irq == -2 ? 0 : -1;
		*p = (struct pollfd){.fd = irq, .events = POLLIN};
		return 1;
	}
	short ev = nkv_tcp_qp_events(w->qp);
	if (!ev)
		return 0;
	*p = (struct pollfd){.fd = w->qp->fd, .events = ev};
	return 1;
}

/** After a wait that qp_wait_fd() set up: disarm the CQ (shm). */
static void qp_wait_end(struct eng_worker *w)
{
	if (w->qp->shm)
		nkv_shm_qp_disarm(w->qp);
}

/** Read wake_fd's count if @p (its pollfd) says it is readable. @return whether it was. */
static bool wake_take(struct eng_worker *w, const struct pollfd *p)
{
	if (!(p->revents & POLLIN))
		return false;
	uint64_t v;
	if (read(w->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		NKV_WARN("engine: eventfd read: %s", strerror(errno));
	return true;
}

/** Sleep until new work, I/O on the queue, a hang-up of the connection, the next deadline, or
 *  @until_max (ms, nkv_client_now_ms). @return true when it read (took) a wake-up from wake_fd. */
static bool worker_wait(struct eng_worker *w, int64_t now, int64_t until_max)
{
	struct nkv_engine *e = w->e;
	int64_t until = now + ENG_IDLE_TICK_MS < until_max ? now + ENG_IDLE_TICK_MS : until_max;
	if (w->inflight.head && w->inflight.head->t_ms + e->timeout_ms < until)
		until = w->inflight.head->t_ms + e->timeout_ms;
	if (!w->qp && w->pend.head && e->wait_ms >= 0 && w->pend.head->t_ms + e->wait_ms < until)
		until = w->pend.head->t_ms + e->wait_ms;
	if (!w->qp && w->reopen_at && w->reopen_at < until)
		until = w->reopen_at;
	int tmo = until > now ? (int)(until - now) : 0;
	struct pollfd p[3] = {{.fd = w->wake_fd, .events = POLLIN}};
	nfds_t n = 1;
	int hup = -1;
	/* A target that goes away closes the connection: see it while idle too (over shm, the control
	 * socket; a busy TCP queue sees it on its own socket below). */
	if (w->qp && (w->qp->shm || !w->inflight.head)) {
		int fd = w->qp->shm ? nkv_shm_ctrl_fd(e->ctrl) : w->qp->fd;
		if (fd >= 0) {
			p[n] = (struct pollfd){.fd = fd, .events = POLLRDHUP};
			hup = (int)n++;
		}
	}
	if (w->qp && w->inflight.head) {
		if (w->qp->shm) {
			uint64_t t = nkv_now_ns();
			if (!w->spin_until)
				w->spin_until = t + ENG_SHM_SPIN_NS;
			if (t < w->spin_until) {
				nkv_cpu_relax();
				return false;
			}
		}
		int r = qp_wait_fd(w, &p[n]);
		if (r == 0)
			return false;
		if (r < 0) { /* shm without interrupts: spin a while, then nap */
			if (w->spins < ENG_SHM_SPINS) {
				w->spins++;
				return false;
			}
			struct timespec ts = {.tv_sec = 0, .tv_nsec = ENG_SHM_NAP_NS};
			worker_block(w, p, n, 0, &ts);
			goto drain;
		}
		/* sleep until the CQ interrupts or the socket is ready, new work, a hang-up, or the next deadline */
		worker_block(w, p, n + 1, tmo, NULL);
		qp_wait_end(w);
		goto drain;
	}
	worker_block(w, p, n, tmo, NULL);
drain:
	if (hup >= 0 && (p[hup].revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)))
		w->hup = true;
	return wake_take(w, &p[0]);
}

/** Is a reaping caller driving @w's queue pair, or did one within ENG_YIELD_NS? */
static bool worker_driven(struct eng_worker *w, uint64_t now)
{
	return atomic_load(&w->want) || now - atomic_load(&w->driven_ns) < ENG_YIELD_NS;
}

/**
 * Leave the queue pair to reaping callers (engine_drive) while one drives it or did within
 * ENG_YIELD_NS. A worker and a reaper polling the same queue pair would take turns on it through
 * qp_mu and wake each other for every batch: two threads (three with the target's, on a small
 * machine) for what one does alone. Sleeps on yield_cv, not counted in `sleepers`: new work reaches
 * the queue through the next reap, or through the worker once no caller has driven for ENG_YIELD_NS
 * (a caller that stops reaping delays its ops by about that much, once). Takes the queue back at
 * once on stop or a lost controller (the caller lets go on those too) and when a caller asks it to
 * (driven_ns 0 and worker_wake). Called and returns with qp_mu held.
 */
static void worker_yield(struct eng_worker *w)
{
	pthread_mutex_unlock(&w->qp_mu);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		if (w->stop || atomic_load(&w->e->down)) {
			pthread_mutex_unlock(&w->mu);
			pthread_mutex_lock(&w->qp_mu);
			return;
		}
		uint64_t now = nkv_now_ns();
		if (!worker_driven(w, now) && pthread_mutex_trylock(&w->qp_mu) == 0) {
			pthread_mutex_unlock(&w->mu);
			return;
		}
		/* not on wake_fd: a reaper sleeping on the queue waits on it for new work */
		uint64_t until = atomic_load(&w->driven_ns) + ENG_YIELD_NS;
		uint64_t ms = !atomic_load(&w->want) && until > now ? (until - now + 999999) / 1000000 : 1;
		struct timespec ts = nkv_abstime_in_ms(ms);
		pthread_cond_timedwait(&w->yield_cv, &w->mu, &ts);
	}
}

/** Move the inbox to the pending list, stamped @now (whoever drives the queue pair does this).
 *  @return whether the worker is to stop. */
static bool take_inbox(struct eng_worker *w, int64_t now)
{
	pthread_mutex_lock(&w->mu);
	for (struct eng_item *it = w->inbox.head; it; it = it->next)
		it->t_ms = now;
	list_splice(&w->pend, &w->inbox);
	bool stop = w->stop;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

static void *worker_main(void *arg)
{
	struct eng_worker *w = arg;
	struct nkv_engine *e = w->e;
	pthread_mutex_lock(&w->qp_mu);
	for (;;) {
		if (worker_driven(w, nkv_now_ns()))
			worker_yield(w);
		int64_t now = nkv_client_now_ms();
		bool stop = take_inbox(w, now);
		if (stop && !w->pend.head && !w->inflight.head)
			break;
		bool down = atomic_load(&e->down);
		if (w->qp && (w->hup || down || w->qp->err)) { /* err: it failed under a caller (run_inline) */
			if (w->hup)
				NKV_WARN("engine: qid %u: the target closed the connection", w->qp->qid);
			worker_drop_qp(w, w->qp->err ? w->qp->err : -ECONNRESET);
		}
		w->hup = false;
		if (!w->qp && !down && (w->pend.head || !stop))
			worker_reopen(w, now); /* eagerly: a hang-up is then seen while idle */
		unsigned sent = worker_send(w, now, true);
		int got = 0;
		if (w->qp && w->inflight.head) {
			got = nkv_qpair_poll(w->qp, 0);
			if (got < 0) { /* the connection failed: its ops completed with Host Pathing Error */
				NKV_WARN("engine: qid %u failed: %s; reopening", w->qp->qid, strerror(-got));
				worker_drop_qp(w, got);
				got = 0;
			}
		}
		worker_expire(w, nkv_client_now_ms(), stop);
		if (sent || got > 0) {
			w->spins = 0, w->spin_until = 0;
			continue;
		}
		if (!w->qp && !atomic_load(&e->down) && !w->reopen_at && (w->pend.head || !stop))
			continue; /* the queue pair just failed: open another now */
		worker_wait(w, nkv_client_now_ms(), INT64_MAX);
	}
	pthread_mutex_unlock(&w->qp_mu);
	return NULL;
}

/* ---- the supervisor: replaces a lost controller ------------------------------------------------ */

static void *sup_main(void *arg)
{
	struct nkv_engine *e = arg;
	int delay = 0;
	int64_t next = 0, since = 0;
	unsigned tries = 0;
	pthread_mutex_lock(&e->sup_mu);
	while (!e->sup_stop) {
		if (!atomic_load(&e->down) || e->open_qps) {
			pthread_cond_wait(&e->sup_cv, &e->sup_mu);
			continue;
		}
		int64_t now = nkv_client_now_ms();
		if (!since)
			since = now;
		if (now < next) {
			struct timespec ts = nkv_abstime_in_ms((uint64_t)(next - now));
			pthread_cond_timedwait(&e->sup_cv, &e->sup_mu, &ts);
			continue;
		}
		pthread_mutex_unlock(&e->sup_mu);
		int rc = nkv_ctrl_reconnect(e->ctrl);
		tries++;
		pthread_mutex_lock(&e->sup_mu);
		if (rc == 0) {
			NKV_INFO("engine: %s back after %u attempt(s), %lld ms", e->ctrl->subnqn, tries,
				 (long long)(nkv_client_now_ms() - since));
			atomic_store(&e->down, false);
			delay = 0;
			next = since = 0;
			tries = 0;
			pthread_mutex_unlock(&e->sup_mu);
			engine_wake_all(e);
			pthread_mutex_lock(&e->sup_mu);
			continue;
		}
		delay = delay ? delay * 2 : e->rc_min_ms;
		if (delay > e->rc_max_ms)
			delay = e->rc_max_ms;
		next = nkv_client_now_ms() + delay;
		if (tries == 1 || tries % 30 == 0) /* a few lines a minute at the cap, not one per try */
			NKV_WARN("engine: reconnecting to %s: %s (attempt %u; next in %d ms)", e->ctrl->subnqn,
				 strerror(-rc), tries, delay);
	}
	pthread_mutex_unlock(&e->sup_mu);
	return NULL;
}

/* ---- public ------------------------------------------------------------------------------------ */

static void engine_stop(struct nkv_engine *e)
{
	for (unsigned i = 0; i < e->nw; i++) {
		struct eng_worker *w = &e->w[i];
		if (!w->started)
			continue;
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_mutex_unlock(&w->mu);
		worker_wake(w);
		pthread_join(w->th, NULL);
		w->started = false;
	}
	if (e->sup_started) { /* after the workers: ops waiting for the controller completed first */
		pthread_mutex_lock(&e->sup_mu);
		e->sup_stop = true;
		pthread_cond_signal(&e->sup_cv);
		pthread_mutex_unlock(&e->sup_mu);
		pthread_join(e->sup_th, NULL);
		e->sup_started = false;
	}
}

void nkv_engine_destroy(struct nkv_engine *e)
{
	if (!e)
		return;
	if (e->mp) {
		nkv_mp_destroy(e->mp);
		free(e);
		return;
	}
	atomic_store(&e->closing, true);
	while (atomic_load(&e->entering))
		sched_yield();
	engine_stop(e);
	for (unsigned i = 0; i < e->nw; i++) {
		struct eng_worker *w = &e->w[i];
		if (w->qp)
			nkv_qpair_destroy(w->qp);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		pthread_mutex_destroy(&w->mu);
		pthread_mutex_destroy(&w->qp_mu);
		pthread_cond_destroy(&w->yield_cv);
	}
	nkv_doneq_fini(&e->done, batch_free_dn);
	pthread_mutex_destroy(&e->sup_mu);
	pthread_cond_destroy(&e->sup_cv);
	free(e);
}

int nkv_engine_create(struct nkv_ctrl *ctrl, const struct nkv_engine_opts *opts, struct nkv_engine **out)
{
	struct nkv_engine_opts o = opts ? *opts : (struct nkv_engine_opts){0};
	if (!ctrl || !out || ctrl->discovery || o.reconnect_min_ms < 0 || o.reconnect_max_ms < 0)
		return -EINVAL;
	unsigned nw = o.queues ? o.queues : ENG_DEFAULT_QUEUES;
	if (nw > ctrl->nio)
		nw = ctrl->nio;
	if (nw == 0)
		return -ENOSPC;
	struct nkv_engine *e = calloc(1, sizeof(*e) + nw * sizeof(e->w[0]));
	if (!e)
		return -ENOMEM;
	e->ctrl = ctrl;
	e->depth = o.depth;
	e->timeout_ms = o.timeout_ms > 0 ? o.timeout_ms : ctrl->opts.timeout_ms;
	e->max_ops = o.max_ops ? o.max_ops : ENG_DEFAULT_MAX_OPS;
	e->wait_ms = o.reconnect_wait_ms ? o.reconnect_wait_ms : e->timeout_ms;
	e->rc_min_ms = o.reconnect_min_ms ? o.reconnect_min_ms : ENG_RECONNECT_MIN_MS;
	e->rc_max_ms = o.reconnect_max_ms ? o.reconnect_max_ms : ENG_RECONNECT_MAX_MS;
	if (e->rc_max_ms < e->rc_min_ms)
		e->rc_max_ms = e->rc_min_ms;
	int rc = nkv_doneq_init(&e->done);
	pthread_mutex_init(&e->sup_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* nkv_abstime_in_ms() */
	pthread_cond_init(&e->sup_cv, &ca);
	for (unsigned i = 0; i < nw; i++) {
		struct eng_worker *w = &e->w[i];
		w->e = e;
		w->wake_fd = -1;
		pthread_mutex_init(&w->mu, NULL);
		pthread_mutex_init(&w->qp_mu, NULL);
		pthread_cond_init(&w->yield_cv, &ca);
		e->nw = i + 1;
		if (rc)
			break;
		w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w->wake_fd < 0) {
			rc = -errno;
			break;
		}
		rc = nkv_qpair_create(ctrl, o.depth, &w->qp);
		if (rc == -ENOSPC && i > 0) { /* fewer queues than asked: run with those */
			close(w->wake_fd);
			pthread_mutex_destroy(&w->mu);
			pthread_mutex_destroy(&w->qp_mu);
			pthread_cond_destroy(&w->yield_cv);
			e->nw = i;
			rc = 0;
			break;
		}
		if (rc)
			break;
		if (!e->qd || w->qp->depth < e->qd)
			e->qd = w->qp->depth;
		e->open_qps++;
		rc = -pthread_create(&w->th, NULL, worker_main, w);
		if (rc)
			break;
		w->started = true;
	}
	pthread_condattr_destroy(&ca);
	if (rc == 0) {
		rc = -pthread_create(&e->sup_th, NULL, sup_main, e);
		e->sup_started = rc == 0;
	}
	if (rc) {
		nkv_engine_destroy(e);
		return rc;
	}
	*out = e;
	return 0;
}

/** May @ops run on the calling thread (run_inline)? One op, or up to a queue's worth of small ones
 *  (64 x 4 KiB Retrieves inline: 0.55x the bare queue pair's ops/s over shm at QD 64, handed to a
 *  worker: 0.28x); more bytes are better spread over every queue. */
static bool inline_ok(const struct nkv_op *ops, unsigned n)
{
	uint64_t bytes = 0;
	for (unsigned i = 0; i < n && n <= ENG_INLINE_OPS; i++)
		bytes += ops[i].len;
	return n == 1 || (n <= ENG_INLINE_OPS && bytes <= ENG_INLINE_BYTES);
}

/** Is @w idle, its queue pair open and sound? Under w->qp_mu. */
static bool worker_idle(struct eng_worker *w)
{
	if (!w->qp || w->qp->err || w->hup || w->pend.head || w->inflight.head || atomic_load(&w->e->down))
		return false;
	pthread_mutex_lock(&w->mu);
	bool idle = !w->inbox.head && !w->stop;
	pthread_mutex_unlock(&w->mu);
	return idle;
}

/**
 * Run batch @b of nkv_engine_run() on the calling thread, on the queue pair of the first idle worker
 * from the round-robin position (see the head of this file). The caller holds that worker's qp_mu and
 * runs the worker's own loop for as long as its batch is out: sends, polls, and waits as the worker
 * waits (worker_wait: spin, then sleep on the queue and wake_fd; its timeout is the oldest op's
 * deadline). It gives the queue pair back as soon as the batch completed, or early when the worker
 * is needed: another caller queued work for it (which wakes this sleep through wake_fd), an op
 * outlived its deadline, the queue pair failed (its ops then completed with Host Pathing Error) or
 * hung up, or the controller was lost. What is left stays on the worker's lists and the worker,
 * woken, does the rest as it would have: fails the queue pair under a late op (worker_expire),
 * drops and reopens a failed one. The caller itself never closes a queue pair: teardown can block
 * (an shm Delete SQ on a frozen target waits for the admin timeout) and is the worker's to wait for.
 * @return false when no worker was idle (nothing taken: dispatch as usual); true when the ops were
 * taken (entering dropped), complete or left to the worker, which then wakes the waiter as usual.
 */
static bool run_inline(struct nkv_engine *e, struct eng_batch *b, struct nkv_op *ops, unsigned n)
{
	struct eng_worker *w = NULL;
	unsigned first = atomic_fetch_add(&e->rr, 1);
	for (unsigned k = 0; k < e->nw && !w; k++) {
		struct eng_worker *c = &e->w[(first + k) % e->nw];
		if (pthread_mutex_trylock(&c->qp_mu) == 0) { /* never wait for a busy worker */
			if (worker_idle(c))
				w = c;
			else
				pthread_mutex_unlock(&c->qp_mu);
		}
	}
	if (!w)
		return false;
	int64_t now = nkv_client_now_ms();
	atomic_fetch_add(&w->load, n);
	for (unsigned i = 0; i < n; i++) {
		b->items[i] = (struct eng_item){.op = &ops[i], .b = b, .w = w, .t_ms = now};
		list_push(&w->pend, &b->items[i]);
	}
	atomic_fetch_sub(&e->entering, 1); /* on the worker's lists: it will not stop before they complete */
	w->spins = 0, w->spin_until = 0;
	bool queued = false, took_wake = false;
	for (;;) { /* worker_main's loop, less what only the worker does */
		unsigned sent = worker_send(w, nkv_client_now_ms(), false);
		int got = 0;
		if (w->inflight.head && !w->qp->err) {
			got = nkv_qpair_poll(w->qp, 0);
			if (got < 0)
				NKV_WARN("engine: qid %u failed: %s; reopening", w->qp->qid, strerror(-got));
		}
		if (!atomic_load(&b->left))
			break;
		pthread_mutex_lock(&w->mu);
		queued = w->inbox.head || w->stop;
		pthread_mutex_unlock(&w->mu);
		struct eng_item *old = w->inflight.head;
		bool late = old && nkv_client_now_ms() - old->t_ms >= e->timeout_ms;
		/* work for the worker, or what only it does (expiring, reopening, reconnecting): give the
		 * queue back */
		if (queued || late || w->qp->err || w->hup || atomic_load(&e->down) || (w->pend.head && !old))
			break;
		if (sent || got > 0)
			w->spins = 0, w->spin_until = 0;
		else
			took_wake |= worker_wait(w, nkv_client_now_ms(), INT64_MAX);
	}
	/* Work left, or a wake-up meant for the worker taken from wake_fd (new work, a lost controller,
	 * stop: all seen above): wake it. Under qp_mu: it cannot have stopped and closed wake_fd. */
	if (took_wake || w->pend.head || w->inflight.head || w->qp->err || w->hup)
		worker_wake(w);
	pthread_mutex_unlock(&w->qp_mu);
	return true;
}

/**
 * One pass of the worker's loop over @w's queue pair on a reaping caller's thread (the caller holds
 * qp_mu): take the inbox, send, poll. @return ops sent + completed (>= 0), or -1 when only the worker
 * can go on: stop, an op past its deadline, a failed or hung-up queue pair, a lost controller.
 */
static int drive_pass(struct eng_worker *w)
{
	int64_t now = nkv_client_now_ms();
	if (take_inbox(w, now) || !w->qp)
		return -1;
	unsigned sent = worker_send(w, now, false);
	int got = 0;
	if (w->inflight.head && !w->qp->err) {
		got = nkv_qpair_poll(w->qp, 0);
		if (got < 0) {
			NKV_WARN("engine: qid %u failed: %s; reopening", w->qp->qid, strerror(-got));
			got = 0;
		}
	}
	struct eng_item *old = w->inflight.head;
	if (w->qp->err || w->hup || atomic_load(&w->e->down) || (old && now - old->t_ms >= w->e->timeout_ms) ||
	    (w->pend.head && !old))
		return -1;
	return (int)sent + got;
}

/** A reaping caller lets go of @w's queue pair: lazily (the worker takes it back after ENG_YIELD_NS
 *  without callers), or handing it back now (@now: the worker is needed, or the caller goes to
 *  sleep with ops still on it). */
static void drive_release(struct eng_worker *w, bool held, bool now)
{
	atomic_store(&w->driven_ns, now ? 0 : nkv_now_ns());
	atomic_fetch_sub(&w->want, 1);
	if (held)
		pthread_mutex_unlock(&w->qp_mu);
	if (now)
		worker_wake(w);
}

/**
 * engine_drive's sleep over the queue pairs it holds (@held, of the first @n workers), as worker_wait
 * sleeps over one: on each one's CQ interrupt or socket and on its wake_fd, with `sleepers` raised so
 * that another thread's submit wakes it, and on the doneq's eventfd (the other queues' workers), until
 * one signals, @until_ms (the reap's timeout) or the oldest op's deadline. @return 0, or -1 when a queue cannot be waited on (shm without interrupts):
 * the caller hands them back to their workers, which nap instead.
 */
static int drive_sleep(struct nkv_engine *e, uint64_t held, unsigned n, int64_t until_ms)
{
	struct pollfd p[2 * ENG_DRIVE_MAX + 1] = {{.fd = e->done.fd, .events = POLLIN}};
	int wi[ENG_DRIVE_MAX];
	bool armed[ENG_DRIVE_MAX] = {false}, ready = false;
	nfds_t np = 1; /* the doneq's eventfd: the queues' workers complete into it */
	int rc = 0;
	int64_t until = nkv_client_now_ms() + ENG_IDLE_TICK_MS;
	if (until_ms < until)
		until = until_ms;
	for (unsigned i = 0; i < n; i++) {
		struct eng_worker *w = &e->w[i];
		if (!(held & (1ull << i)))
			continue;
		atomic_fetch_add(&w->sleepers, 1);
		wi[i] = (int)np;
		p[np++] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
		if (w->inflight.head && rc == 0) {
			if (w->inflight.head->t_ms + e->timeout_ms < until)
				until = w->inflight.head->t_ms + e->timeout_ms;
			int r = qp_wait_fd(w, &p[np]);
			armed[i] = r > 0;
			np += r > 0;
			ready |= r == 0;
			rc = r < 0 ? -1 : 0;
		}
		pthread_mutex_lock(&w->mu); /* after sleepers: a submit that missed this sees the count */
		ready |= w->inbox.head != NULL;
		pthread_mutex_unlock(&w->mu);
	}
	if (!ready && rc == 0) {
		int64_t now = nkv_client_now_ms();
		poll(p, np, until > now ? (int)(until - now) : 0);
	}
	for (unsigned i = 0; i < n; i++) {
		struct eng_worker *w = &e->w[i];
		if (!(held & (1ull << i)))
			continue;
		if (armed[i])
			qp_wait_end(w);
		wake_take(w, &p[wi[i]]);
		atomic_fetch_sub(&w->sleepers, 1);
	}
	return rc;
}

/**
 * nkv_engine_reap()'s wait (a nkv_doneq_drive hook): the calling thread drives the queue pairs as the
 * workers would, until a batch completes, the timeout passes, or it would have to sleep. An event
 * loop that keeps ops in flight with nkv_engine_submit() and waits in nkv_engine_reap() then costs
 * what a bare queue pair polled by its thread costs: no wake-up of a worker per submit, none of the
 * reaper per completion, no third thread spinning on a small machine. Each wanted worker leaves its
 * queue pair (worker_yield; one asleep on a busy queue is woken once to let go). Without progress
 * the caller spins ENG_SHM_SPIN_NS and then sleeps on the queues it holds as the workers would
 * (drive_sleep; queues whose workers have not let go yet stay theirs), or, when one has no
 * interrupts, hands them back and leaves the wait to the doneq wait after this hook. Whatever only a worker does
 * (deadlines, failures, reconnects) is handed back at once (drive_pass).
 */
static void engine_drive(void *arg, int timeout_ms)
{
	struct nkv_engine *e = arg;
	unsigned n = e->nw < ENG_DRIVE_MAX ? e->nw : ENG_DRIVE_MAX;
	if (timeout_ms == 0 || !atomic_load(&e->ops) || atomic_load(&e->down))
		return;
	uint64_t wanted = 0, held = 0;
	bool spin = false;
	for (unsigned i = 0; i < n; i++) {
		if (!atomic_load(&e->w[i].load))
			continue; /* nothing there: its worker, idle, takes what comes meanwhile */
		atomic_fetch_add(&e->w[i].want, 1);
		wanted |= 1ull << i;
		if (atomic_load(&e->w[i].sleepers))
			worker_wake(&e->w[i]);
	}
	uint64_t t = nkv_now_ns(), spin_until = t + ENG_SHM_SPIN_NS;
	int64_t end_ms = timeout_ms > 0 ? nkv_client_now_ms() + timeout_ms : INT64_MAX;
	bool sleep = false;
	while (wanted && !nkv_doneq_ready(&e->done) && atomic_load(&e->ops)) {
		bool moved = false;
		unsigned nheld = 0;
		for (unsigned i = 0; i < n; i++) {
			struct eng_worker *w = &e->w[i];
			uint64_t bit = 1ull << i;
			if (!(wanted & bit))
				continue;
			if (!(held & bit)) {
				if (pthread_mutex_trylock(&w->qp_mu))
					continue; /* its worker, or a run_inline caller, still has it */
				held |= bit;
				w->spins = 0, w->spin_until = 0;
				spin |= w->qp && w->qp->shm;
			}
			int r = drive_pass(w);
			if (r < 0) {
				drive_release(w, true, true);
				held &= ~bit;
				wanted &= ~bit;
				continue;
			}
			moved |= r > 0;
			nheld++;
		}
		int64_t now_ms = nkv_client_now_ms();
		if (now_ms >= end_ms)
			break;
		t = nkv_now_ns();
		if (moved) {
			spin_until = t + ENG_SHM_SPIN_NS;
			continue;
		}
		if (spin && t < spin_until) { /* as the workers over shm: spin a while before sleeping */
			nkv_cpu_relax();
			continue;
		}
		if (!nheld) { /* every queue is still with its worker: the doneq wait after this hook */
			sleep = true;
			break;
		}
		for (unsigned i = 0; i < n; i++) { /* queues not let go of yet stay with their workers */
			uint64_t bit = 1ull << i;
			if ((wanted & bit) && !(held & bit)) {
				drive_release(&e->w[i], false, false);
				wanted &= ~bit;
			}
		}
		if (drive_sleep(e, held, n, end_ms) < 0) {
			sleep = true;
			break;
		}
		spin_until = nkv_now_ns() + ENG_SHM_SPIN_NS;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t bit = 1ull << i;
		if (!(wanted & bit))
			continue;
		struct eng_worker *w = &e->w[i];
		bool busy = (held & bit) && (w->pend.head || w->inflight.head);
		drive_release(w, held & bit, sleep && busy);
	}
}

/** The calling thread's home worker for a small batch of @n ops: its own (threads take homes in
 *  turn, engine-independent), or, while that one holds a queue's worth, the next with room (or the
 *  least loaded). */
static unsigned home_worker(struct nkv_engine *e, unsigned n)
{
	static atomic_uint next_home;
	static _Thread_local unsigned home; /* 0: none yet */
	if (!home)
		home = atomic_fetch_add(&next_home, 1) + 1;
	unsigned best = (home - 1) % e->nw, best_load = UINT_MAX;
	for (unsigned k = 0; k < e->nw; k++) {
		unsigned i = (home - 1 + k) % e->nw, load = atomic_load(&e->w[i].load);
		if (load + n <= e->qd)
			return i;
		if (load < best_load)
			best = i, best_load = load;
	}
	return best;
}

/** Check the ops, then hand them to the workers as one batch (nkv_engine_run: a small one may run
 *  on the calling thread instead, run_inline; it has completed or been left to a worker on return). */
static int engine_submit(struct nkv_engine *e, struct nkv_op *ops, unsigned n, uint64_t tag, bool run,
			 struct eng_batch **bout)
{
	if (!e || !ops || n == 0)
		return -EINVAL;
	int bad = 0;
	for (unsigned i = 0; i < n; i++) {
		struct nkv_sqe sqe;
		ops[i].rc = op_sqe(&ops[i], &sqe);
		ops[i].status = 0;
		ops[i].value_size = ops[i].xfer = 0;
		if (ops[i].rc)
			bad = -EINVAL;
	}
	if (bad)
		return bad;
	/* Destroy sets closing and then waits for entering to drain: a batch is either refused or fully
	 * handed to workers that are still running. */
	atomic_fetch_add(&e->entering, 1);
	int rc = 0;
	struct eng_batch *b = NULL;
	if (atomic_load(&e->closing))
		rc = -ESHUTDOWN;
	else if (atomic_fetch_add(&e->ops, n) + n > e->max_ops)
		rc = -EAGAIN;
	else if (!(b = calloc(1, sizeof(*b) + n * sizeof(b->items[0]))))
		rc = -ENOMEM;
	if (rc) {
		if (rc != -ESHUTDOWN)
			atomic_fetch_sub(&e->ops, n);
		atomic_fetch_sub(&e->entering, 1);
		return rc;
	}
	atomic_init(&b->left, n);
	b->n = n;
	nkv_doneq_batch_init(&b->d, run, tag);
	if (bout)
		*bout = b;
	if (run && inline_ok(ops, n) && run_inline(e, b, ops, n))
		return 0;
	/*
	 * A small batch goes to the calling thread's home queue pair (as an NVMe driver's per-CPU
	 * queues): one thread's stream of small ops stays on one queue, which its reaps then drive alone
	 * (engine_drive). A big one is cut in contiguous slices, one per worker, starting where the last
	 * batch stopped, so that it uses every queue.
	 */
	unsigned nw = e->nw, slices, per, first;
	if (inline_ok(ops, n)) {
		slices = 1, per = n;
		first = home_worker(e, n);
	} else {
		slices = n < nw ? n : nw, per = (n + slices - 1) / slices;
		first = atomic_fetch_add(&e->rr, slices);
	}
	for (unsigned s = 0, i = 0; s < slices && i < n; s++) {
		struct eng_worker *w = &e->w[(first + s) % nw];
		unsigned end = i + per < n ? i + per : n;
		atomic_fetch_add(&w->load, end - i);
		pthread_mutex_lock(&w->mu);
		for (; i < end; i++) {
			b->items[i] = (struct eng_item){.op = &ops[i], .b = b, .w = w};
			list_push(&w->inbox, &b->items[i]);
		}
		pthread_mutex_unlock(&w->mu);
		if (atomic_load(&w->sleepers)) /* else it looks at its inbox before it sleeps: worker_block */
			worker_wake(w);
	}
	atomic_fetch_sub(&e->entering, 1);
	return 0;
}

int nkv_engine_submit(struct nkv_engine *e, struct nkv_op *ops, unsigned n, uint64_t tag)
{
	if (e && e->mp)
		return nkv_mp_submit(e->mp, ops, n, tag);
	return engine_submit(e, ops, n, tag, false, NULL);
}

int nkv_engine_run(struct nkv_engine *e, struct nkv_op *ops, unsigned n)
{
	if (e && e->mp)
		return nkv_mp_run(e->mp, ops, n);
	struct eng_batch *b = NULL;
	int rc = engine_submit(e, ops, n, 0, true, &b);
	if (rc)
		return rc;
	nkv_doneq_batch_wait(&b->d);
	batch_free(b);
	int failed = 0;
	for (unsigned i = 0; i < n; i++)
		failed += ops[i].rc != 0;
	return failed;
}

int nkv_engine_reap(struct nkv_engine *e, uint64_t *tags, unsigned max, int timeout_ms)
{
	if (!e || (!tags && max))
		return -EINVAL;
	if (e->mp)
		return nkv_mp_reap(e->mp, tags, max, timeout_ms);
	return nkv_doneq_reap(&e->done, tags, max, timeout_ms, batch_free_dn, engine_drive, e);
}

int nkv_engine_eventfd(const struct nkv_engine *e)
{
	return !e ? -EINVAL : e->mp ? nkv_mp_eventfd(e->mp) : e->done.fd;
}

unsigned nkv_engine_queues(const struct nkv_engine *e)
{
	return !e ? 0 : e->mp ? nkv_mp_queues(e->mp) : e->nw;
}

/* ---- for mpath.c -------------------------------------------------------------------------------- */

int nkv_engine_op_check(const struct nkv_op *op)
{
	struct nkv_sqe sqe;
	return op_sqe(op, &sqe);
}

bool nkv_engine_is_down(const struct nkv_engine *e)
{
	return atomic_load(&e->down);
}

struct nkv_ctrl *nkv_engine_ctrl(const struct nkv_engine *e, unsigned i)
{
	if (!e)
		return NULL;
	if (e->mp)
		return nkv_mp_ctrl(e->mp, i);
	return i == 0 ? e->ctrl : NULL;
}

unsigned nkv_engine_paths(const struct nkv_engine *e)
{
	return !e ? 0 : e->mp ? nkv_mp_paths(e->mp) : 1;
}

int nkv_engine_path_active(const struct nkv_engine *e, uint32_t nsid)
{
	if (!e)
		return -EINVAL;
	if (e->mp)
		return nkv_mp_active(e->mp, nsid);
	return atomic_load(&e->down) ? -ENOTCONN : 0;
}

struct nkv_engine *nkv_engine_wrap_mp(struct nkv_mp *mp)
{
	struct nkv_engine *e = calloc(1, sizeof(*e));
	if (e)
		e->mp = mp;
	return e;
}
