/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm.c - queue pairs of libnkv's shared-memory (PCIe-style) transport: rings and PRP lists in
 * registered memory, Create/Delete I/O CQ/SQ (docs/nvme-kv-wire.md B.4), PRP data pointers (B.5), a bounce area
 * for buffers the controller cannot see, and submit / flush / poll on nkv_dev.h's SQ/CQ helpers
 * (SQEs put, one doorbell per batch; CQEs read torn-read safe, then the CQ head doorbell).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client/prp.h"
#include "client/shm_int.h"
#include "common/cpu.h"
#include "common/log.h"

#define PAGE NKV_PRP_PAGE
#define REAP_BATCH 32u
#define POLL_SPINS 2000      /* busy polls before sleeping between looks at the CQ */
#define POLL_SLEEP_NS 10000L /* then 10 us naps: the controller's own idle poll is 50 us */
#define IRQ_SPIN_NS 20000    /* with interrupts: busy polls for this long before arming and sleeping
			      * (a fast backend answers within it; sleeping costs a wake-up, ~5-10 us) */
#define IRQ_WAIT_MS 100      /* longest sleep on the interrupt: CSTS.CFS is also checked then */
#define ALIVE_CHECK_MS 5     /* how often a waiting poll checks the socket and CSTS */

enum { DIR_NONE_, DIR_H2C_, DIR_C2H_ };

static size_t page_up(size_t n)
{
	return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

/* ---- page pool --------------------------------------------------------------------------------- */

static int pool_init(struct nkv_page_pool *p, uint32_t npages)
{
	p->bits = calloc((npages + 63) / 64 ? (npages + 63) / 64 : 1, sizeof(uint64_t));
	p->npages = npages;
	p->nfree = npages;
	return p->bits ? 0 : -ENOMEM;
}

static bool pool_test(const struct nkv_page_pool *p, uint32_t i)
{
	return (p->bits[i / 64] >> (i % 64)) & 1u;
}

static void pool_mark(struct nkv_page_pool *p, uint32_t start, uint32_t n, bool used)
{
	for (uint32_t i = start; i < start + n; i++) {
		if (used)
			p->bits[i / 64] |= 1ull << (i % 64);
		else
			p->bits[i / 64] &= ~(1ull << (i % 64));
	}
	p->nfree = used ? p->nfree - n : p->nfree + n;
}

/** First fit of @n contiguous pages. @return the first page, or -1. */
static int64_t pool_alloc(struct nkv_page_pool *p, uint32_t n)
{
	if (n == 0 || n > p->nfree)
		return -1;
	uint32_t run = 0, start = 0;
	for (uint32_t i = 0; i < p->npages;) {
		if (i % 64 == 0 && p->bits[i / 64] == ~0ull) {
			run = 0;
			i += 64;
			continue;
		}
		if (pool_test(p, i)) {
			run = 0;
		} else {
			if (run++ == 0)
				start = i;
			if (run == n) {
				pool_mark(p, start, n, true);
				return start;
			}
		}
		i++;
	}
	return -1;
}

/* ---- memory ------------------------------------------------------------------------------------ */

int nkv_shm_qp_alloc(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t entries, uint16_t slots, uint32_t bounce,
		     uint32_t max_xfer, struct nkv_qpair **out)
{
	struct nkv_shm_ctrl *sc = ctrl->shm;
	struct nkv_qpair *qp = calloc(1, sizeof(*qp));
	struct nkv_shm_qp *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	if (!qp || !s)
		goto fail;
	qp->ctrl = ctrl;
	qp->ops = &nkv_shm_ops;
	qp->shm = s;
	qp->fd = -1;
	qp->qid = qid;
	qp->depth = slots;
	qp->timeout_ms = ctrl->opts.timeout_ms;
	s->fd = -1;
	s->irq_fd = -1;
	nkv_spin_pay_init(&s->spin_pay);
	s->entries = entries;
	s->max_xfer = max_xfer;

	/* The list area covers two commands of max_xfer (or bounce-area) bytes at once, plus one page
	 * per slot: list pages for 256 MiB are 129, so this stays small. */
	uint32_t big = max_xfer > bounce ? max_xfer : bounce;
	uint32_t lists = 2 * nkv_prp_list_pages(PAGE - 4, big) + slots;
	uint32_t bounce_pages = (uint32_t)(page_up(bounce) / PAGE);
	size_t sq_len = page_up((size_t)entries * sizeof(struct nkv_sqe));
	size_t cq_len = page_up((size_t)entries * sizeof(struct nkv_cqe));
	s->ro_len = sq_len + (size_t)lists * PAGE;
	s->mem_len = s->ro_len + cq_len + (size_t)bounce_pages * PAGE;
	s->slots = calloc(slots, sizeof(*s->slots));
	if (!s->slots || pool_init(&s->list_pool, lists) || pool_init(&s->bounce_pool, bounce_pages))
		goto fail;
	for (uint16_t i = 0; i < slots; i++)
		s->slots[i].next = i + 1 < slots ? i + 1 : -1;
	s->free_head = 0;

	s->fd = nkv_shm_memfd("nkv-qp", s->mem_len);
	if (s->fd < 0) {
		rc = s->fd;
		goto fail;
	}
	void *m = mmap(NULL, s->mem_len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	s->mem = m;
	s->iova = nkv_shm_iova_alloc(sc, s->mem_len);
	s->sq_iova = s->iova;
	s->lists = (uint64_t *)(s->mem + sq_len);
	s->lists_iova = s->iova + sq_len;
	s->cq_iova = s->iova + s->ro_len;
	s->bounce = s->mem + s->ro_len + cq_len;
	s->bounce_iova = s->cq_iova + cq_len;

	/* The controller only reads SQEs and PRP lists; it writes CQEs and Retrieve data. */
	rc = nkv_shm_reg(ctrl, s->fd, 0, s->ro_len, s->iova, NKV_SHM_REG_READONLY);
	if (rc)
		goto fail;
	s->ro_reg = true;
	rc = nkv_shm_reg(ctrl, s->fd, s->ro_len, s->mem_len - s->ro_len, s->cq_iova, 0);
	if (rc)
		goto fail;
	s->rw_reg = true;

	s->sq.ring = (struct nkv_sqe *)s->mem;
	s->sq.db = nkv_shm_doorbell(ctrl, nkv_db_sq_tail(qid));
	s->sq.size = entries;
	s->cq.ring = (volatile struct nkv_cqe *)(s->mem + s->ro_len);
	s->cq.db = nkv_shm_doorbell(ctrl, nkv_db_cq_head(qid));
	s->cq.size = entries;
	s->cq.phase = 1;
	if (!s->sq.db || !s->cq.db) {
		NKV_WARN("shm qid %u: doorbells beyond the %u-byte register page", qid, sc->reg_size);
		rc = -EPROTO;
		goto fail;
	}
	*out = qp;
	return 0;
fail:
	if (qp) {
		qp->shm = s;
		nkv_shm_qp_free(qp);
	} else {
		free(s);
	}
	return rc;
}

void nkv_shm_qp_free(struct nkv_qpair *qp)
{
	if (!qp)
		return;
	struct nkv_shm_qp *s = qp->shm;
	if (s) {
		if (s->rw_reg)
			nkv_shm_dereg(qp->ctrl, s->cq_iova, s->mem_len - s->ro_len);
		if (s->ro_reg)
			nkv_shm_dereg(qp->ctrl, s->iova, s->ro_len);
		if (s->mem)
			munmap(s->mem, s->mem_len);
		if (s->fd >= 0)
			close(s->fd);
		if (s->irq_fd >= 0)
			close(s->irq_fd);
		free(s->list_pool.bits);
		free(s->bounce_pool.bits);
		free(s->slots);
		free(s);
	}
	free(qp);
}

/* ---- completion and failure -------------------------------------------------------------------- */

/** Bytes a controller-to-host command put in the buffer: PCIe CQEs do not say, so derive it. */
static uint32_t c2h_bytes(const struct nkv_qpair *qp, const struct nkv_shm_slot *sl, const uint8_t *data,
			  const struct nkv_cpl *cpl)
{
	if (cpl->status)
		return 0;
	if (qp->qid == 0)
		return sl->len;
	uint32_t lim = sl->cdw10 < sl->len ? sl->cdw10 : sl->len;
	/* Retrieve Range: what the value holds past the offset (DW0 is the full size), up to the buffer */
	if (sl->opc == NKV_VS_RETRIEVE_RANGE)
		return nkv_range_xfer(cpl->dw0, sl->offset, lim);
	/* Retrieve: min(value size in DW0, host buffer); a 10b vendor Exec likewise (DW0 = output length) */
	if (sl->opc == NKV_KV_RETRIEVE || sl->opc >= NKV_EXEC_OPC_FIRST)
		return cpl->dw0 < lim ? cpl->dw0 : lim;
	if (sl->opc == NKV_KV_LIST) { /* the count and the whole entries that fit */
		if (lim < NKV_LIST_HDR)
			return 0;
		uint32_t nrk = nkv_get32(data), off = NKV_LIST_HDR;
		for (uint32_t i = 0; i < nrk && lim - off >= 2; i++) {
			uint32_t e = nkv_list_entry_size(nkv_get16(data + off));
			if (e > lim - off)
				break;
			off += e;
		}
		return off;
	}
	return sl->len;
}

/*
 * A successful Retrieve (Range) must have moved exactly what the host derives from DW0. A target
 * that says so (NKV_SHM_FEAT_XFER) puts the bytes it moved in DW1; one that moved fewer (a value
 * larger than it would move, a backend that read less) is caught here instead of leaving stale
 * buffer bytes behind a full size. An older target gives no way to tell.
 */
static bool short_retrieve(const struct nkv_qpair *qp, const struct nkv_shm_slot *sl, const struct nkv_cpl *cpl)
{
	return qp->qid && !cpl->status && qp->ctrl->shm->xfer_dw1 &&
	       (sl->opc == NKV_KV_RETRIEVE || sl->opc == NKV_VS_RETRIEVE_RANGE) && cpl->dw1 != cpl->xfer;
}

static void slot_release(struct nkv_shm_qp *s, struct nkv_shm_slot *sl)
{
	if (sl->bounce_n)
		pool_mark(&s->bounce_pool, sl->bounce_pg, sl->bounce_n, false);
	if (sl->list_n)
		pool_mark(&s->list_pool, sl->list_pg, sl->list_n, false);
	sl->bounce_n = sl->list_n = 0;
	sl->busy = 0;
	sl->next = s->free_head;
	s->free_head = (int32_t)(sl - s->slots);
}

static void slot_complete(struct nkv_qpair *qp, struct nkv_shm_slot *sl, struct nkv_cpl *cpl, bool data_ok)
{
	struct nkv_shm_qp *s = qp->shm;
	nkv_cb cb = sl->cb;
	void *arg = sl->arg;

	if (sl->dir == DIR_C2H_ && data_ok) {
		const uint8_t *src = sl->bounce_n ? s->bounce + (size_t)sl->bounce_pg * PAGE : sl->ubuf;
		cpl->xfer = c2h_bytes(qp, sl, src, cpl);
		if (short_retrieve(qp, sl, cpl)) {
			NKV_WARN("shm qid %u: Retrieve moved %u bytes, %u expected from a %u-byte value", qp->qid,
				 cpl->dw1, cpl->xfer, cpl->dw0);
			cpl->status = NKV_SC_DATA_TRANSFER_ERROR; /* never a prefix taken for the value */
			cpl->xfer = 0;
		}
		if (sl->bounce_n && cpl->xfer)
			memcpy(sl->ubuf, src, cpl->xfer);
	}
	slot_release(s, sl);
	qp->outstanding--;
	qp->ncompleted++;
	if (cb)
		cb(arg, cpl);
}

static void shm_fail(struct nkv_qpair *qp, int err)
{
	if (qp->err)
		return;
	qp->err = err ? err : -ECONNRESET;
	NKV_DEBUG("shm qid %u failed: %s", qp->qid, strerror(-qp->err));
	struct nkv_cpl cpl = {.status = NKV_STATUS_HOST_PATH};
	for (uint16_t i = 0; i < qp->depth; i++)
		if (qp->shm->slots[i].busy) {
			struct nkv_cpl c = cpl;
			slot_complete(qp, &qp->shm->slots[i], &c, false);
		}
}

/* ---- submit ------------------------------------------------------------------------------------ */

/** Bytes the command itself will move (0: unknown, the caller's length rules). */
static uint64_t cmd_bytes(const struct nkv_qpair *qp, const struct nkv_sqe *sqe)
{
	if (qp->qid == 0) {
		if (sqe->opc == NKV_ADM_IDENTIFY)
			return NKV_IDENTIFY_SIZE;
		if (sqe->opc == NKV_ADM_GET_LOG_PAGE) {
			uint64_t numd = (nkv_get32(&sqe->cdw10) >> 16) | (uint64_t)(nkv_get32(&sqe->cdw11) & 0xffff) << 16;
			return (numd + 1) * 4;
		}
		return 0;
	}
	if (sqe->opc == NKV_KV_STORE || sqe->opc == NKV_KV_RETRIEVE || sqe->opc == NKV_KV_LIST ||
	    sqe->opc == NKV_VS_RETRIEVE_RANGE || sqe->opc == NKV_VS_STORE_TTL)
		return nkv_get32(&sqe->cdw10);
	/* vendor Exec with data: CDW10 is the input size (01b) or the host buffer size (10b) */
	if (sqe->opc >= NKV_EXEC_OPC_FIRST &&
	    (nkv_opc_xfer(sqe->opc) == NKV_XFER_H2C || nkv_opc_xfer(sqe->opc) == NKV_XFER_C2H))
		return nkv_get32(&sqe->cdw10);
	return 0;
}

static int shm_submit(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, nkv_cb cb,
		      void *arg, unsigned flags)
{
	struct nkv_shm_qp *s = qp ? qp->shm : NULL;
	if (!s || !sqe || (len && !buf))
		return -EINVAL;
	if (qp->err)
		return -ENOTCONN;
	/* Data direction: opcode bits 1:0 (no fabrics commands on PCIe). */
	uint8_t dir = len == 0 ? DIR_NONE_ : (sqe->opc & 1) ? DIR_H2C_ : (sqe->opc & 2) ? DIR_C2H_ : DIR_NONE_;
	if (len && dir == DIR_NONE_)
		return -EINVAL;
	if (cmd_bytes(qp, sqe) > len)
		return -EINVAL; /* PRPs carry no length: the controller would run past the buffer */
	if (s->free_head < 0)
		return -EAGAIN;

	struct nkv_shm_slot *sl = &s->slots[s->free_head];
	uint64_t iova = 0;
	int64_t bpg = -1, lpg = -1;
	uint32_t bn = 0, ln = 0;
	if (len) {
		iova = nkv_shm_buf_iova(qp->ctrl, buf, len);
		if (iova & 3u)
			iova = 0; /* PRP1 must be dword aligned: copy instead */
		if (!iova) {
			bn = (uint32_t)(page_up(len) / PAGE);
			if (bn > s->bounce_pool.npages)
				return -EINVAL; /* larger than the whole bounce area: use nkv_buf_alloc() */
			bpg = pool_alloc(&s->bounce_pool, bn);
			if (bpg < 0)
				return -EAGAIN; /* bounce area busy: completions free it */
			iova = s->bounce_iova + (uint64_t)bpg * PAGE;
		}
		ln = nkv_prp_list_pages(iova, len);
		if (ln > s->list_pool.npages) {
			if (bn)
				pool_mark(&s->bounce_pool, (uint32_t)bpg, bn, false);
			return -EINVAL; /* more PRP list pages than the queue pair has */
		}
		if (ln) {
			lpg = pool_alloc(&s->list_pool, ln);
			if (lpg < 0) {
				if (bn)
					pool_mark(&s->bounce_pool, (uint32_t)bpg, bn, false);
				return -EAGAIN;
			}
		}
	}

	struct nkv_sqe e = *sqe;
	e.flags = NKV_PSDT_PRP << NKV_SQE_PSDT_SHIFT; /* PRPs, no fusing */
	nkv_put16(&e.cid, (uint16_t)s->free_head);
	if (len) {
		uint64_t prp1, prp2;
		uint64_t list_iova = ln ? s->lists_iova + (uint64_t)lpg * PAGE : 0;
		uint64_t *list = ln ? s->lists + (size_t)lpg * NKV_PRP_PER_LIST : NULL;
		nkv_prp_build(iova, len, list_iova, list, ln, &prp1, &prp2);
		nkv_put64(e.dptr, prp1);
		nkv_put64(e.dptr + 8, prp2);
		if (bn && dir == DIR_H2C_)
			memcpy(s->bounce + (size_t)bpg * PAGE, buf, len);
	} else if (!(flags & NKV_SUBMIT_RAW_DPTR)) {
		memset(e.dptr, 0, sizeof(e.dptr));
	}
	if (nkv_sq_put(&s->sq, &e) < 0) {
		/* slots <= entries - 1, so only a controller that never reports SQHD progress gets here */
		if (bn)
			pool_mark(&s->bounce_pool, (uint32_t)bpg, bn, false);
		if (ln)
			pool_mark(&s->list_pool, (uint32_t)lpg, ln, false);
		return -EAGAIN;
	}
	s->free_head = sl->next;
	sl->cb = cb;
	sl->arg = arg;
	sl->ubuf = buf;
	sl->len = len;
	sl->cdw10 = nkv_get32(&sqe->cdw10);
	sl->offset = (uint64_t)nkv_get32(&sqe->cdw13) << 32 | nkv_get32(&sqe->cdw12);
	sl->opc = sqe->opc;
	sl->dir = dir;
	sl->bounce_pg = bn ? (uint32_t)bpg : 0;
	sl->bounce_n = bn;
	sl->list_pg = ln ? (uint32_t)lpg : 0;
	sl->list_n = ln;
	sl->busy = 1;
	qp->outstanding++;
	return 0;
}

static int shm_flush(struct nkv_qpair *qp)
{
	struct nkv_shm_qp *s = qp->shm;
	if (qp->err)
		return qp->err;
	if (s->sq.tail != s->rung_tail) {
		nkv_sq_ring(&s->sq); /* release fence, then the tail doorbell */
		s->rung_tail = s->sq.tail;
		nkv_shm_kick(qp->ctrl->shm);
	}
	return 0;
}

/* ---- poll -------------------------------------------------------------------------------------- */

/** Take the CQEs that are there (up to a batch), ring the CQ head doorbell, run their callbacks. */
static int reap(struct nkv_qpair *qp)
{
	struct nkv_shm_qp *s = qp->shm;
	struct nkv_cqe batch[REAP_BATCH];
	unsigned n = 0;

	while (n < REAP_BATCH && nkv_cq_peek(&s->cq, &batch[n])) {
		const struct nkv_cqe *c = &batch[n];
		uint16_t cid = nkv_get16(&c->cid), sqhd = nkv_get16(&c->sqhd), sqid = nkv_get16(&c->sqid);
		if (cid >= qp->depth || !s->slots[cid].busy || sqid != qp->qid || sqhd >= s->sq.size) {
			NKV_WARN("shm qid %u: bad CQE at head %u: CID %u SQID %u SQHD %u status %#x", qp->qid,
				 s->cq.head, cid, sqid, sqhd, nkv_get16(&c->status));
			if (n)
				nkv_cq_ring(&s->cq);
			return -EPROTO;
		}
		nkv_cq_advance(&s->cq, &s->sq, c);
		n++;
	}
	if (n == 0)
		return 0;
	nkv_cq_ring(&s->cq);
	for (unsigned i = 0; i < n; i++) {
		uint16_t st = nkv_get16(&batch[i].status) >> 1;
		struct nkv_cpl cpl = {
			.status = st & 0x7ff,
			.dnr = (st & NKV_STATUS_DNR) != 0,
			.dw0 = nkv_get32(&batch[i].dw0),
			.dw1 = nkv_get32(&batch[i].dw1),
		};
		struct nkv_shm_slot *sl = &s->slots[nkv_get16(&batch[i].cid)];
		if (!sl->busy) { /* the same CID twice in one batch */
			NKV_WARN("shm qid %u: CID %u completed twice", qp->qid, nkv_get16(&batch[i].cid));
			return -EPROTO;
		}
		slot_complete(qp, sl, &cpl, true);
	}
	return (int)n;
}

int nkv_shm_qp_arm(struct nkv_qpair *qp)
{
	struct nkv_shm_qp *s = qp->shm;
	struct nkv_cqe e;
	if (s->irq_fd < 0)
		return -1;
	if (!s->arm) {
		/* Standard MSI-X: every CQ post interrupts, armed or not, so the eventfd holds posts already
		 * reaped: drain it, then look. A CQE written before the look is seen here; one after it
		 * writes the eventfd after its CQE, and the wait sees that. */
		uint64_t v;
		(void)!read(s->irq_fd, &v, sizeof(v));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return nkv_cq_peek(&s->cq, &e) ? -2 : s->irq_fd;
	}
	/* Dekker with the controller's CQE store, fence, ARM exchange: either it sees the CQ armed or we
	 * see its CQE here. */
	__atomic_store_n(s->arm, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (nkv_cq_peek(&s->cq, &e)) {
		__atomic_store_n(s->arm, 0, __ATOMIC_RELAXED);
		return -2;
	}
	return s->irq_fd;
}

void nkv_shm_qp_disarm(struct nkv_qpair *qp)
{
	struct nkv_shm_qp *s = qp->shm;
	uint64_t v;
	if (s->irq_fd < 0)
		return;
	if (s->arm)
		__atomic_store_n(s->arm, 0, __ATOMIC_RELAXED); /* busy polling again: no interrupts wanted */
	(void)!read(s->irq_fd, &v, sizeof(v));
}

/* Sleep until the CQ interrupts, the socket hangs up, or @ms pass (interrupts only). Without an
 * interrupt, the next look also checks CSTS.CFS and the socket. */
static void irq_wait(struct nkv_qpair *qp, int ms)
{
	struct nkv_shm_qp *s = qp->shm;
	int fd = nkv_shm_qp_arm(qp);
	if (fd < 0)
		return;
	struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = qp->ctrl->shm->sock, .events = POLLRDHUP}};
	struct nkv_cqe e;
	int n = poll(p, 2, ms);
	s->irq_sleeps++;
	if (n <= 0 || p[1].revents)
		s->next_check_ms = 0;
	if (n == 0 && nkv_cq_peek(&s->cq, &e))
		s->irq_late++;
	nkv_shm_qp_disarm(qp);
}

/* Whether a wait with one command out spins IRQ_SPIN_NS before it arms is common/spin_pay.h's rule,
 * fed with whether each spin found a CQE within it. Only spins count: a wait spent asleep says little
 * about how soon the CQE came (it includes the wake-up). With more than one command out the spin
 * stays: measured, not spinning there lost throughput at QD 64 (bench/results/HISTORY.md,
 * "Performance work (2026-12-03): shared memory against NVMe/TCP"). */
static int shm_poll(struct nkv_qpair *qp, int timeout_ms)
{
	struct nkv_shm_qp *s = qp->shm;
	if (qp->err)
		return qp->err;
	uint64_t start = qp->ncompleted;
	int64_t deadline = timeout_ms > 0 ? nkv_client_now_ms() + timeout_ms : 0;
	unsigned spins = 0;
	uint64_t spin_end = 0, wait_start = 0;
	bool spun = false;
	for (;;) {
		bool in_spin = spun && nkv_now_ns() < spin_end;
		shm_flush(qp);
		int rc = reap(qp);
		if (rc > 0)
			shm_flush(qp); /* commands the callbacks submitted */
		if (rc < 0) {
			shm_fail(qp, rc);
			return rc;
		}
		if (qp->ncompleted != start || timeout_ms == 0 || qp->outstanding == 0) {
			if (spun && qp->ncompleted != start)
				nkv_spin_pay_note(&s->spin_pay, in_spin);
			return (int)(qp->ncompleted - start);
		}
		if (!wait_start)
			wait_start = nkv_now_ns();
		int64_t now = nkv_client_now_ms();
		if (timeout_ms > 0 && now >= deadline)
			return 0;
		if (now >= s->next_check_ms) {
			s->next_check_ms = now + ALIVE_CHECK_MS;
			rc = nkv_shm_alive(qp->ctrl);
			if (rc) {
				shm_fail(qp, rc);
				return rc;
			}
		}
		if (s->irq_fd >= 0 && spin_end == 0) {
			s->waits++;
			spun = qp->outstanding > 1 || nkv_spin_pay_worth(&s->spin_pay, s->waits);
			s->spun += spun;
			spin_end = wait_start + (spun ? IRQ_SPIN_NS : 0);
		}
		if (s->irq_fd >= 0 && nkv_now_ns() < spin_end) {
			nkv_cpu_relax(); /* the controller writes this CQ's lines: do not pull them every cycle */
		} else if (s->irq_fd < 0 && spins < POLL_SPINS) {
			spins++;
			nkv_cpu_relax();
		} else if (s->irq_fd >= 0) {
			int64_t left = timeout_ms > 0 ? deadline - now : IRQ_WAIT_MS;
			irq_wait(qp, left < IRQ_WAIT_MS ? (int)left : IRQ_WAIT_MS);
		} else {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = POLL_SLEEP_NS};
			nanosleep(&ts, NULL);
		}
	}
}

/* ---- I/O queue pairs --------------------------------------------------------------------------- */

static int queue_cmd(struct nkv_ctrl *ctrl, uint8_t opc, uint16_t qid, uint16_t qsize, uint32_t cdw11, uint64_t prp1)
{
	struct nkv_sqe sqe;
	struct nkv_cpl cpl = {0};
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = opc;
	nkv_put64(sqe.dptr, prp1);
	nkv_put32(&sqe.cdw10, qid | (qsize ? (uint32_t)(qsize - 1) << 16 : 0));
	nkv_put32(&sqe.cdw11, cdw11);
	int rc = nkv_admin_flags(ctrl, &sqe, NULL, 0, &cpl, NKV_SUBMIT_RAW_DPTR);
	if (rc)
		NKV_DEBUG("shm admin %#x qid %u: %s (status %#x)", opc, qid, strerror(-rc), cpl.status);
	return rc;
}

static int shm_qp_create(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t depth, struct nkv_qpair **out)
{
	/* @depth usable slots need depth + 1 ring entries (one always stays empty), within MQES + 1. */
	unsigned mqes = NKV_CAP_MQES(ctrl->shm->cap);
	unsigned d = depth > mqes ? mqes : depth;
	if (d < 1)
		d = 1;
	uint32_t bounce = ctrl->opts.shm_bounce_kib ? ctrl->opts.shm_bounce_kib * 1024u : 0;
	if (!bounce) {
		uint64_t b = 2ull * ctrl->shm->max_xfer;
		bounce = (uint32_t)(b < NKV_SHM_BOUNCE_MIN ? NKV_SHM_BOUNCE_MIN : b > NKV_SHM_BOUNCE_MAX ? NKV_SHM_BOUNCE_MAX : b);
	}
	struct nkv_qpair *qp;
	int rc = nkv_shm_qp_alloc(ctrl, qid, (uint16_t)(d + 1), (uint16_t)d, bounce, ctrl->shm->max_xfer, &qp);
	if (rc)
		return rc;
	struct nkv_shm_qp *s = qp->shm;
	/* Create I/O CQ first (PC = 1; IEN with IV = QID when the vector got an eventfd), then its SQ
	 * (PC = 1, CQID = QID): docs/nvme-kv-wire.md B.4. */
	uint32_t cq_dw11 = 1u;
	if (nkv_shm_irq_bind(ctrl, s, qid) == 0)
		cq_dw11 |= 2u | (uint32_t)qid << 16;
	rc = queue_cmd(ctrl, NKV_ADM_CREATE_CQ, qid, s->entries, cq_dw11, s->cq_iova);
	if (rc == 0) {
		rc = queue_cmd(ctrl, NKV_ADM_CREATE_SQ, qid, s->entries, 1u | (uint32_t)qid << 16, s->sq_iova);
		if (rc)
			queue_cmd(ctrl, NKV_ADM_DELETE_CQ, qid, 0, 0, 0);
	}
	if (rc) {
		nkv_shm_qp_free(qp);
		return rc;
	}
	s->created = true;
	*out = qp;
	return 0;
}

static void shm_qp_destroy(struct nkv_qpair *qp)
{
	if (!qp)
		return;
	struct nkv_shm_qp *s = qp->shm;
	if (s->created && qp->qid != 0) {
		/* Delete the SQ before its CQ (docs/nvme-kv-wire.md B.4); the controller aborts what is still queued. */
		int rc = queue_cmd(qp->ctrl, NKV_ADM_DELETE_SQ, qp->qid, 0, 0, 0);
		if (rc == 0)
			rc = queue_cmd(qp->ctrl, NKV_ADM_DELETE_CQ, qp->qid, 0, 0, 0);
		if (rc == 0)
			s->created = false;
	}
	shm_fail(qp, -ECONNABORTED);
	if (s->created) {
		/* The queues could not be deleted: the controller may still use the rings, so the regions
		 * stay registered (its own mapping keeps the memfd alive) until the socket closes. */
		s->ro_reg = s->rw_reg = false;
	}
	nkv_shm_qp_free(qp);
}

const struct nkv_transport_ops nkv_shm_ops = {
	.name = "shm",
	.qp_create = shm_qp_create,
	.qp_destroy = shm_qp_destroy,
	.submit = shm_submit,
	.flush = shm_flush,
	.poll = shm_poll,
	.fail = shm_fail,
	.ctrl_close = nkv_shm_ctrl_close,
	.buf_alloc = nkv_shm_buf_alloc,
	.buf_free = nkv_shm_buf_free,
	.buf_register = nkv_shm_buf_register,
	.buf_unregister = nkv_shm_buf_unregister,
};
