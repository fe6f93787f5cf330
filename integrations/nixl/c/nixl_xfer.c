/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_xfer.c - RADOS_NKV transfer requests over libnkv's engine: prepare (validate, resolve
 * registrations, build the ops once), post (one engine batch per request; a FIFO backlog when the
 * engine is full), check (collect completed batches without blocking, judge the result), release
 * (never blocks: a request in flight is detached and freed when its batch completes) and the
 * existence query.
 *
 * A read of pair i is two ops in one batch: a Retrieve Range of the payload at header size + offset
 * straight into the local DRAM, and a Retrieve of the object's header (one per distinct object of
 * the request), so a read costs one round trip. The header decides afterwards whether the bytes
 * belong to the name asked for. A write is one Store of header + payload, built in a staging
 * buffer by the stager thread after the request is posted (nixl_stager.c): posting only queues it.
 *
 * A request is used by one thread at a time (NIXL's contract for a transfer handle); different
 * requests may be prepared, posted, checked and released on any threads at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKV_LOG_COMPONENT "nixl"
#include "common/log.h"
#include "nixl_int.h"

#define NO_OP UINT32_MAX

/* ---- request list and freeing (under req_lock) ----------------------------------------------- */

static void req_free_locked(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		b->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	b->live--;
	for (unsigned i = 0; i < r->nd; i++)
		nixl_md_put(r->xd[i].md);
	if (r->op == NKV_NIXL_WRITE)
		nixl_stage_put(b, r->bufs, r->stage_cap, r->stage_lib);
	else
		free(r->bufs);
	free(r->xd);
	free(r->ops);
	free(r);
}

void nixl_reqs_free_all(struct nkv_nixl *b)
{
	pthread_mutex_lock(&b->req_lock);
	while (b->reqs)
		req_free_locked(b, b->reqs);
	b->backlog = b->backlog_tail = NULL;
	pthread_mutex_unlock(&b->req_lock);
}

/* ---- judging a completed request ------------------------------------------------------------- */

static int op_status(const struct nkv_op *op)
{
	return nkv_nixl_status_from_errno(op->rc);
}

static int judge_read(const struct nkv_nixl_req *r, const struct nixl_xd *x)
{
	const struct nkv_op *h = &r->ops[x->hdr];
	if (h->rc)
		return op_status(h); /* -ENOENT: no object under the key */
	uint64_t plen = 0;
	int H = nkv_lname_hdr_check(h->buf, h->xfer, x->md->name, x->md->name_len, &plen);
	/* another name's header (a hash collision), no header (a foreign object), or a header whose
	 * length disagrees with the object's size: not this name's object */
	if (H < 0 || (uint64_t)h->value_size != (uint64_t)H + plen)
		return NKV_NIXL_ERR_NOT_FOUND;
	if (x->off > plen || x->len > plen - x->off)
		return NKV_NIXL_ERR_INVALID_PARAM; /* a read past the end of the object */
	if (x->op == NO_OP)
		return NKV_NIXL_SUCCESS;
	const struct nkv_op *p = &r->ops[x->op];
	if (p->rc)
		return op_status(p);
	/* the two reads are separate commands: an object replaced in between shows another size */
	if (p->value_size != h->value_size || p->xfer != x->len)
		return NKV_NIXL_ERR_BACKEND;
	return NKV_NIXL_SUCCESS;
}

static int judge(const struct nkv_nixl_req *r)
{
	for (unsigned i = 0; i < r->nd; i++) {
		const struct nixl_xd *x = &r->xd[i];
		int st = r->op == NKV_NIXL_READ ? judge_read(r, x) : op_status(&r->ops[x->op]);
		if (st != NKV_NIXL_SUCCESS) {
			NKV_DEBUG("object '%s' (devId %" PRIu64 ") %s [%" PRIu64 ", +%" PRIu64 "): %s", x->md->name,
				  x->md->dev_id, r->op == NKV_NIXL_READ ? "read" : "write", x->off, x->len,
				  nkv_nixl_status_str(st));
			return st;
		}
	}
	return NKV_NIXL_SUCCESS;
}

/* A write's staging buffer is held only while it is in flight: a prepared request holds no payload copy. */
static void drop_staging(struct nkv_nixl_req *r)
{
	if (r->op == NKV_NIXL_WRITE) {
		nixl_stage_put(r->b, r->bufs, r->stage_cap, r->stage_lib);
		r->bufs = NULL;
	}
}

/* ---- engine submission and completion (under req_lock) --------------------------------------- */

static void complete_locked(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	if (r->detached) {
		req_free_locked(b, r);
		return;
	}
	r->result = judge(r);
	r->state = REQ_DONE;
	drop_staging(r);
}

static int submit_locked(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	return nkv_engine_submit(b->eng, r->ops, r->nops, (uint64_t)(uintptr_t)r);
}

/* Submit backlogged requests in order until the engine is full again. */
static void drain_locked(struct nkv_nixl *b)
{
	while (b->backlog) {
		struct nkv_nixl_req *r = b->backlog;
		int rc = submit_locked(b, r);
		if (rc == -EAGAIN)
			return;
		b->backlog = r->q_next;
		if (!b->backlog)
			b->backlog_tail = NULL;
		r->q_next = NULL;
		if (rc == 0) {
			r->state = REQ_POSTED;
			continue;
		}
		NKV_WARN("submitting a queued request of %u op(s): %s", r->nops, strerror(-rc));
		if (r->detached) {
			req_free_locked(b, r);
		} else {
			r->result = rc == -EINVAL ? NKV_NIXL_ERR_INVALID_PARAM : NKV_NIXL_ERR_BACKEND;
			r->state = REQ_DONE;
			drop_staging(r);
		}
	}
}

/* Collect every completed batch without waiting, then refill the engine from the backlog. */
static void reap_locked(struct nkv_nixl *b)
{
	uint64_t tags[64];
	int n;
	do {
		n = nkv_engine_reap(b->eng, tags, 64, 0);
		for (int i = 0; i < n; i++)
			complete_locked(b, (struct nkv_nixl_req *)(uintptr_t)tags[i]);
	} while (n == 64);
	drain_locked(b);
}

/* ---- prepare --------------------------------------------------------------------------------- */

/* A small open-addressing set of registrations, to give each distinct object of a request one
 * header read (reads) or to refuse two writes to one object (writes). @cap: a power of two > n. */
struct mdset {
	struct nkv_nixl_md **k;
	unsigned *v;
	size_t cap;
};

static unsigned *mdset_slot(struct mdset *s, struct nkv_nixl_md *m, bool *fresh)
{
	size_t i = ((uintptr_t)m >> 4) * 0x9e3779b97f4a7c15ull & (s->cap - 1);
	while (s->k[i] && s->k[i] != m)
		i = (i + 1) & (s->cap - 1);
	*fresh = s->k[i] == NULL;
	s->k[i] = m;
	return &s->v[i];
}

static int prep_fail(struct nkv_nixl *b, struct nkv_nixl_req *r, int st)
{
	pthread_mutex_lock(&b->req_lock);
	req_free_locked(b, r);
	pthread_mutex_unlock(&b->req_lock);
	return st;
}

/* Check pair @i and take its registration. */
static int prep_pair(struct nkv_nixl *b, int op, const struct nkv_nixl_desc *l, const struct nkv_nixl_desc *rm,
		     struct nixl_xd *x)
{
	if (l->len != rm->len)
		return NKV_NIXL_ERR_MISMATCH;
	if ((l->len && !l->addr) || l->len > UINT32_MAX)
		return NKV_NIXL_ERR_INVALID_PARAM;
	struct nkv_nixl_md *m = nixl_md_lookup(b, rm->dev_id);
	if (!m) {
		NKV_DEBUG("devId %" PRIu64 " is not registered", rm->dev_id);
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	x->md = m;
	x->off = rm->addr;
	x->len = rm->len;
	x->local = (void *)(uintptr_t)l->addr;
	x->op = x->hdr = NO_OP;
	if (rm->addr + rm->len < rm->addr || rm->addr < m->base ||
	    (m->span && (rm->addr - m->base > m->span || rm->len > m->span - (rm->addr - m->base))))
		return NKV_NIXL_ERR_INVALID_PARAM; /* outside the registered range */
	if (op == NKV_NIXL_WRITE) {
		if (rm->addr != 0)
			return NKV_NIXL_ERR_NOT_SUPPORTED; /* objects are written whole */
		if ((uint64_t)m->hdr_size + rm->len > UINT32_MAX)
			return NKV_NIXL_ERR_INVALID_PARAM;
		/* The value is header + payload, and the namespace's limit (KVVML) bounds the value: a
		 * 64 MiB payload does not fit a 64 MiB namespace. Refused here, before any byte moves;
		 * the limit may have been raised since it was read, so ask once more before refusing. */
		uint64_t mv = b->max_value;
		if (mv && m->hdr_size + rm->len > mv && (mv = nixl_max_value_refresh(b)) && m->hdr_size + rm->len > mv) {
			NKV_WARN("object '%.*s': %" PRIu64 " bytes do not fit namespace %" PRIu32 ", whose values hold at "
				 "most %" PRIu64 " bytes: %" PRIu64 " of payload after this name's %" PRIu32 "-byte header",
				 (int)(m->name_len > 256 ? 256 : m->name_len), m->name, rm->len, b->o.nsid, mv, mv > m->hdr_size ? mv - m->hdr_size : 0, m->hdr_size);
			return NKV_NIXL_ERR_INVALID_PARAM;
		}
	} else if ((uint64_t)m->hdr_size + rm->addr + rm->len < rm->addr) {
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	return NKV_NIXL_SUCCESS;
}

static void op_init(struct nkv_op *op, uint8_t type, const struct nkv_nixl *b, const struct nkv_nixl_md *m)
{
	memset(op, 0, sizeof(*op));
	op->type = type;
	op->klen = 16;
	op->nsid = b->o.nsid;
	memcpy(op->key, m->key, 16);
}

/* Build the ops of a prepared request: reads get their header ops first, then the payload ops. */
static int prep_ops(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	struct mdset s = {0};
	for (s.cap = 16; s.cap <= 2 * (size_t)r->nd; s.cap *= 2)
		;
	s.k = calloc(s.cap, sizeof(*s.k));
	s.v = calloc(s.cap, sizeof(*s.v));
	int st = NKV_NIXL_ERR_BACKEND;
	if (!s.k || !s.v)
		goto out;
	unsigned nhdr = 0, npay = 0;
	size_t hbytes = 0;
	for (unsigned i = 0; i < r->nd; i++) {
		bool fresh;
		unsigned *v = mdset_slot(&s, r->xd[i].md, &fresh);
		if (r->op == NKV_NIXL_WRITE && !fresh) {
			st = NKV_NIXL_ERR_INVALID_PARAM; /* two whole-object writes to one object */
			goto out;
		}
		if (fresh) {
			*v = nhdr++;
			hbytes += r->xd[i].md->hdr_size;
		}
		r->xd[i].hdr = *v;
		npay += r->op == NKV_NIXL_WRITE || r->xd[i].len > 0;
	}
	r->nops = r->op == NKV_NIXL_READ ? nhdr + npay : r->nd;
	if (r->nops > b->o.max_ops) {
		st = NKV_NIXL_ERR_INVALID_PARAM; /* could never enter the engine */
		goto out;
	}
	r->ops = calloc(r->nops, sizeof(*r->ops));
	if (!r->ops)
		goto out;
	if (r->op == NKV_NIXL_WRITE) {
		for (unsigned i = 0; i < r->nd; i++) {
			r->xd[i].op = i;
			r->xd[i].hdr = NO_OP;
			op_init(&r->ops[i], NKV_OP_STORE, b, r->xd[i].md);
		}
		st = NKV_NIXL_SUCCESS;
		goto out;
	}
	r->bufs = malloc(hbytes ? hbytes : 1);
	if (!r->bufs)
		goto out;
	size_t boff = 0;
	unsigned p = nhdr;
	for (unsigned i = 0; i < r->nd; i++) {
		struct nixl_xd *x = &r->xd[i];
		struct nkv_op *h = &r->ops[x->hdr];
		if (!h->type) { /* the first pair of this object: its header read */
			op_init(h, NKV_OP_RETRIEVE, b, x->md);
			h->buf = r->bufs + boff;
			h->len = x->md->hdr_size;
			boff += x->md->hdr_size;
		}
		if (x->len) {
			x->op = p;
			struct nkv_op *op = &r->ops[p++];
			op_init(op, NKV_OP_RETRIEVE, b, x->md);
			op->buf = x->local;
			op->len = (uint32_t)x->len;
			op->offset = x->md->hdr_size + x->off; /* nonzero: a Retrieve Range */
		}
	}
	st = NKV_NIXL_SUCCESS;
out:
	free(s.k);
	free(s.v);
	return st;
}

int nkv_nixl_prep(struct nkv_nixl *b, int op, int local_mem, const struct nkv_nixl_desc *local, int remote_mem,
		  const struct nkv_nixl_desc *remote, size_t n, struct nkv_nixl_req **out)
{
	if (!b || !out || !n || !local || !remote || n > UINT32_MAX / 2 ||
	    (op != NKV_NIXL_READ && op != NKV_NIXL_WRITE))
		return NKV_NIXL_ERR_INVALID_PARAM;
	*out = NULL;
	if (local_mem != NKV_NIXL_DRAM_SEG || remote_mem != NKV_NIXL_OBJ_SEG)
		return NKV_NIXL_ERR_NOT_SUPPORTED;
	struct nkv_nixl_req *r = calloc(1, sizeof(*r));
	struct nixl_xd *xd = calloc(n, sizeof(*xd));
	if (!r || !xd) {
		free(r);
		free(xd);
		return NKV_NIXL_ERR_BACKEND;
	}
	r->b = b;
	r->op = op;
	r->xd = xd;
	r->state = REQ_IDLE;
	pthread_mutex_lock(&b->req_lock);
	r->next = b->reqs;
	if (b->reqs)
		b->reqs->prev = r;
	b->reqs = r;
	b->live++;
	pthread_mutex_unlock(&b->req_lock);

	for (size_t i = 0; i < n; i++) {
		int st = prep_pair(b, op, &local[i], &remote[i], &r->xd[i]);
		if (r->xd[i].md)
			r->nd = (unsigned)i + 1; /* its reference is dropped with the request */
		if (st)
			return prep_fail(b, r, st);
	}
	int st = prep_ops(b, r);
	if (st)
		return prep_fail(b, r, st);
	*out = r;
	return NKV_NIXL_SUCCESS;
}

/* ---- post, check, release -------------------------------------------------------------------- */

/* Header + payload of every write into one staging buffer (the stager, after the post). */
static int stage_writes(struct nkv_nixl_req *r)
{
	size_t total = 0;
	for (unsigned i = 0; i < r->nd; i++)
		total += r->xd[i].md->hdr_size + r->xd[i].len;
	r->bufs = nixl_stage_get(r->b, total, &r->stage_cap, &r->stage_lib);
	if (!r->bufs)
		return NKV_NIXL_ERR_BACKEND;
	uint8_t *p = r->bufs;
	for (unsigned i = 0; i < r->nd; i++) {
		const struct nixl_xd *x = &r->xd[i];
		struct nkv_op *op = &r->ops[x->op];
		int H = nkv_lname_hdr_pack(x->md->name, x->md->name_len, x->len, p, x->md->hdr_size);
		if (H != (int)x->md->hdr_size)
			return NKV_NIXL_ERR_BACKEND;
		if (x->len)
			memcpy(p + H, x->local, x->len);
		op->buf = p;
		op->len = (uint32_t)(H + x->len);
		p += H + x->len;
	}
	return NKV_NIXL_SUCCESS;
}

/* Submit @r (not in flight), FIFO behind the backlog. @return 0, -EAGAIN (queued) or the engine's -errno
 * (then @r is idle again, its staging given back). */
static int submit_or_queue_locked(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	int rc = b->backlog ? -EAGAIN : submit_locked(b, r); /* FIFO: no overtaking the backlog */
	if (rc == 0) {
		r->state = REQ_POSTED;
	} else if (rc == -EAGAIN) {
		r->state = REQ_QUEUED;
		r->q_next = NULL;
		if (b->backlog_tail)
			b->backlog_tail->q_next = r;
		else
			b->backlog = r;
		b->backlog_tail = r;
		drain_locked(b);
	} else {
		r->state = REQ_IDLE;
		drop_staging(r);
	}
	return rc;
}

static int post_status(const struct nkv_nixl_req *r, int rc)
{
	NKV_WARN("posting a request of %u op(s): %s", r->nops, strerror(-rc));
	return rc == -EINVAL ? NKV_NIXL_ERR_INVALID_PARAM : NKV_NIXL_ERR_BACKEND;
}

void nixl_stage_and_submit(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	/* REQ_STAGING: check and release leave the request's ops and buffers to this thread. One
	 * released before its turn is not copied: its local memory may be gone already. */
	pthread_mutex_lock(&b->req_lock);
	bool gone = r->detached;
	if (gone)
		req_free_locked(b, r);
	pthread_mutex_unlock(&b->req_lock);
	if (gone)
		return;
	int st = stage_writes(r);
	pthread_mutex_lock(&b->req_lock);
	if (r->detached) {
		req_free_locked(b, r); /* released while waiting here: nothing to submit */
	} else if (st) {
		drop_staging(r);
		r->result = st;
		r->state = REQ_DONE;
	} else {
		int rc = submit_or_queue_locked(b, r);
		if (rc && rc != -EAGAIN) {
			r->result = post_status(r, rc);
			r->state = REQ_DONE;
		}
	}
	pthread_mutex_unlock(&b->req_lock);
}

int nkv_nixl_post(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	if (!b || !r || r->b != b)
		return NKV_NIXL_ERR_INVALID_PARAM;
	pthread_mutex_lock(&b->req_lock);
	reap_locked(b);
	enum nixl_req_state s = r->state;
	pthread_mutex_unlock(&b->req_lock);
	if (s == REQ_POSTED || s == REQ_QUEUED || s == REQ_STAGING)
		return NKV_NIXL_ERR_REPOST_ACTIVE;

	/* Not in flight, and only this thread uses the request: reset it without the lock. */
	for (unsigned i = 0; i < r->nops; i++) {
		struct nkv_op *op = &r->ops[i];
		op->rc = 0;
		op->status = 0;
		op->value_size = op->xfer = 0;
	}
	if (r->op == NKV_NIXL_WRITE) {
		/* the copy into staging is the stager's: this thread only queues the write */
		pthread_mutex_lock(&b->req_lock);
		r->state = REQ_STAGING;
		pthread_mutex_unlock(&b->req_lock);
		nixl_stager_push(b, r);
		return NKV_NIXL_IN_PROG;
	}
	pthread_mutex_lock(&b->req_lock);
	int rc = submit_or_queue_locked(b, r);
	pthread_mutex_unlock(&b->req_lock);
	nixl_stager_kick(b); /* staging given back by the completions reaped above: freed there */
	if (rc && rc != -EAGAIN)
		return post_status(r, rc);
	return NKV_NIXL_IN_PROG;
}

int nkv_nixl_check(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	if (!b || !r || r->b != b)
		return NKV_NIXL_ERR_INVALID_PARAM;
	pthread_mutex_lock(&b->req_lock);
	if (r->state == REQ_POSTED || r->state == REQ_QUEUED)
		reap_locked(b);
	int st = r->state == REQ_DONE ? r->result : r->state == REQ_IDLE ? NKV_NIXL_ERR_NOT_POSTED : NKV_NIXL_IN_PROG;
	pthread_mutex_unlock(&b->req_lock);
	nixl_stager_kick(b);
	return st;
}

int nkv_nixl_release(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	if (!b || !r || r->b != b)
		return NKV_NIXL_ERR_INVALID_PARAM;
	pthread_mutex_lock(&b->req_lock);
	reap_locked(b); /* a batch that already completed frees its request right here */
	if (r->state == REQ_POSTED || r->state == REQ_STAGING) {
		r->detached = true; /* the engine (or the stager) still owns its ops and buffers */
	} else {
		if (r->state == REQ_QUEUED) {
			struct nkv_nixl_req **pp = &b->backlog, *prev = NULL;
			while (*pp != r) {
				prev = *pp;
				pp = &(*pp)->q_next;
			}
			*pp = r->q_next;
			if (b->backlog_tail == r)
				b->backlog_tail = prev;
		}
		req_free_locked(b, r);
	}
	pthread_mutex_unlock(&b->req_lock);
	nixl_stager_kick(b);
	return NKV_NIXL_SUCCESS;
}

unsigned nkv_nixl_live_reqs(struct nkv_nixl *b)
{
	pthread_mutex_lock(&b->req_lock);
	reap_locked(b);
	unsigned n = b->live;
	pthread_mutex_unlock(&b->req_lock);
	return n;
}

/* ---- query ----------------------------------------------------------------------------------- */

/* Run @n ops, retrying while the engine is full (other requests' ops), within the deadline. */
static int run_ops(struct nkv_nixl *b, struct nkv_op *ops, unsigned n)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int rc = nkv_engine_run(b->eng, ops, n);
		if (rc != -EAGAIN)
			return rc < 0 ? rc : 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > (long)b->o.timeout_ms)
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
}

#define QUERY_CHUNK 256u /* header reads in flight at once per query call */

int nkv_nixl_query(struct nkv_nixl *b, const char *const *names, const size_t *lens, size_t n,
		   struct nkv_nixl_qresp *resp)
{
	if (!b || (n && (!names || !lens || !resp)))
		return NKV_NIXL_ERR_INVALID_PARAM;
	for (size_t i = 0; i < n; i++) {
		if (!names[i] || !lens[i] || lens[i] > NKV_LNAME_MAX)
			return NKV_NIXL_ERR_INVALID_PARAM;
		resp[i].present = 0;
		resp[i].size = 0;
	}
	size_t hmax = nkv_lname_hdr_size(NKV_LNAME_MAX);
	unsigned chunk = QUERY_CHUNK < b->o.max_ops ? QUERY_CHUNK : b->o.max_ops;
	struct nkv_op *ops = calloc(chunk, sizeof(*ops));
	uint8_t *bufs = NULL;
	int st = NKV_NIXL_ERR_BACKEND;
	if (!ops)
		goto out;
	for (size_t base = 0; base < n; base += chunk) {
		unsigned m = (unsigned)(n - base < chunk ? n - base : chunk);
		size_t total = 0;
		for (unsigned i = 0; i < m; i++)
			total += nkv_lname_hdr_size(lens[base + i]);
		free(bufs);
		bufs = malloc(total < hmax ? hmax : total);
		if (!bufs)
			goto out;
		size_t off = 0;
		for (unsigned i = 0; i < m; i++) {
			struct nkv_op *op = &ops[i];
			memset(op, 0, sizeof(*op));
			op->type = NKV_OP_RETRIEVE;
			op->klen = 16;
			op->nsid = b->o.nsid;
			nkv_lname_key(names[base + i], lens[base + i], op->key);
			op->buf = bufs + off;
			op->len = nkv_lname_hdr_size(lens[base + i]);
			off += op->len;
		}
		int rc = run_ops(b, ops, m);
		if (rc) {
			NKV_WARN("query of %u object(s): %s", m, strerror(-rc));
			goto out;
		}
		for (unsigned i = 0; i < m; i++) {
			const struct nkv_op *op = &ops[i];
			uint64_t plen = 0;
			if (op->rc == -ENOENT)
				continue;
			if (op->rc) {
				NKV_WARN("query of '%.*s': %s", (int)(lens[base + i] > 256 ? 256 : lens[base + i]),
					 names[base + i], strerror(-op->rc));
				goto out;
			}
			int H = nkv_lname_hdr_check(op->buf, op->xfer, names[base + i], lens[base + i], &plen);
			if (H >= 0 && (uint64_t)op->value_size == (uint64_t)H + plen) {
				resp[base + i].present = 1;
				resp[base + i].size = plen;
			}
		}
	}
	st = NKV_NIXL_SUCCESS;
out:
	free(ops);
	free(bufs);
	return st;
}
