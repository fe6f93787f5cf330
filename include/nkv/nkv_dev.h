/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv_dev.h - the PCIe-style queue pair, as a host driver sees it: SQ ring + tail doorbell, CQ ring
 * + phase bit + head doorbell. One header for the CPU driver (libnkv's shm transport) and for GPU
 * kernels (nvcc): every helper is NKV_HD (__host__ __device__ under nvcc, nothing in plain C), uses
 * no libc beyond memcpy, and every wait is bounded by a caller-given poll budget.
 *
 * Memory ordering, the rules that matter (docs/nvme-kv-wire.md B, docs/design.md section 3):
 *  - Submit: write the SQE(s), then a release fence (system scope on a GPU: the controller is
 *    another agent), then the tail doorbell store. The controller reads the doorbell, then the SQEs.
 *  - Complete: the controller writes the CQE with the phase bit in its last dword last. A host that
 *    sees the expected phase must fence (acquire) and read the whole CQE again before trusting DW0:
 *    the first read may have raced the controller's write of the other dwords (a torn read).
 *  - Consume: after taking CQEs, write the new CQ head to the CQ doorbell, so the controller never
 *    overwrites an entry the host has not read.
 *
 * The nkv_sq_* / nkv_cq_* helpers are not thread-safe by themselves: one submitter per SQ and one
 * reaper per CQ (libnkv's shm driver). struct nkv_dev_qp and the nkv_dev_* calls below add tickets on
 * top of them for many concurrent submitters on one queue (GPU threads, or CPU threads in tests).
 */
#ifndef NKV_DEV_H
#define NKV_DEV_H

#include <stdint.h>
#include <string.h>

#include "nkv_spec.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDA_ARCH__)
#define NKV_FENCE_RELEASE() __threadfence_system()
#define NKV_FENCE_ACQUIRE() __threadfence_system()
#elif defined(__cplusplus)
#define NKV_FENCE_RELEASE() __atomic_thread_fence(__ATOMIC_RELEASE)
#define NKV_FENCE_ACQUIRE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#else
#define NKV_FENCE_RELEASE() __atomic_thread_fence(__ATOMIC_RELEASE)
#define NKV_FENCE_ACQUIRE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/** Doorbell offset of SQ @qid's tail (DSTRD 0). CQ @qid's head is 4 bytes after it. */
#define NKV_DB_OFFSET 0x1000u
static inline NKV_HD uint32_t nkv_db_sq_tail(uint16_t qid)
{
	return NKV_DB_OFFSET + (2u * qid) * 4u;
}
static inline NKV_HD uint32_t nkv_db_cq_head(uint16_t qid)
{
	return NKV_DB_OFFSET + (2u * qid + 1u) * 4u;
}

/*
 * Copy a 64-byte SQE into a controller-visible slot, a dword at a time. The SQE is first copied with
 * memcpy: reading a struct nkv_sqe through a uint32_t pointer breaks C's aliasing rules, and at -O2
 * gcc dropped the caller's last field stores before the copy (CIDs reached the controller as 0).
 */
static inline NKV_HD void nkv_dev_store_sqe(struct nkv_sqe *slot, const struct nkv_sqe *sqe)
{
	uint32_t w[16];
	volatile uint32_t *dst = (volatile uint32_t *)slot;

	memcpy(w, sqe, sizeof(w));
	for (int i = 0; i < 16; i++)
		dst[i] = w[i];
}

/** Host view of a submission queue. */
struct nkv_dev_sq {
	struct nkv_sqe *ring;      /* size entries, in memory the controller reads */
	volatile uint32_t *db;     /* tail doorbell */
	uint16_t size;             /* entries (1 slot always stays empty: size - 1 usable) */
	uint16_t tail;             /* next slot to fill */
	uint16_t head;             /* controller's head, as reported in CQE SQHD */
};

/** Host view of a completion queue. */
struct nkv_dev_cq {
	volatile struct nkv_cqe *ring;
	volatile uint32_t *db;     /* head doorbell */
	uint16_t size;
	uint16_t head;             /* next entry to read */
	uint8_t phase;             /* phase value of a new entry: starts at 1, flips on each wrap */
};

/** Free SQ slots (one is always left empty, so a full ring is not mistaken for an empty one). */
static inline NKV_HD uint16_t nkv_sq_space(const struct nkv_dev_sq *sq)
{
	return (uint16_t)((sq->head + sq->size - sq->tail - 1) % sq->size);
}

/**
 * Copy @sqe into the next slot and advance the local tail (no doorbell yet: batch, then
 * nkv_sq_ring()). @return the slot index, or -1 when the SQ is full.
 */
static inline NKV_HD int nkv_sq_put(struct nkv_dev_sq *sq, const struct nkv_sqe *sqe)
{
	if (nkv_sq_space(sq) == 0)
		return -1;
	int slot = sq->tail;
	nkv_dev_store_sqe(&sq->ring[slot], sqe);
	sq->tail = (uint16_t)((sq->tail + 1) % sq->size);
	return slot;
}

/** Publish every SQE put so far: release fence, then the tail doorbell. */
static inline NKV_HD void nkv_sq_ring(struct nkv_dev_sq *sq)
{
	NKV_FENCE_RELEASE();
	*sq->db = sq->tail;
}

/**
 * Look at the CQ head entry. @return 1 with *out a consistent copy (phase seen, fence, re-read),
 * 0 when no new entry is there.
 */
static inline NKV_HD int nkv_cq_peek(const struct nkv_dev_cq *cq, struct nkv_cqe *out)
{
	volatile const struct nkv_cqe *e = &cq->ring[cq->head];
	uint16_t st = e->status;

	if ((uint8_t)(st & 1u) != cq->phase)
		return 0;
	NKV_FENCE_ACQUIRE(); /* pairs with the controller's write of the phase dword last */
	out->dw0 = e->dw0;
	out->dw1 = e->dw1;
	out->sqhd = e->sqhd;
	out->sqid = e->sqid;
	out->cid = e->cid;
	out->status = e->status;
	return 1;
}

/** Consume the head entry (after nkv_cq_peek returned 1); the doorbell is written separately. */
static inline NKV_HD void nkv_cq_advance(struct nkv_dev_cq *cq, struct nkv_dev_sq *sq, const struct nkv_cqe *cqe)
{
	if (sq)
		sq->head = (uint16_t)(nkv_get16(&cqe->sqhd) % sq->size);
	if (++cq->head == cq->size) {
		cq->head = 0;
		cq->phase ^= 1u;
	}
}

/** Tell the controller which CQ entries are free again. */
static inline NKV_HD void nkv_cq_ring(struct nkv_dev_cq *cq)
{
	NKV_FENCE_RELEASE(); /* our reads of the entries happen before the controller may reuse them */
	*cq->db = cq->head;
}

/**
 * Wait (bounded by @budget polls) for the next CQE. @return 1 with *out filled and the entry
 * consumed (doorbell not yet written), or 0 if the budget ran out.
 */
static inline NKV_HD int nkv_cq_wait(struct nkv_dev_cq *cq, struct nkv_dev_sq *sq, struct nkv_cqe *out,
				     uint64_t budget)
{
	for (uint64_t i = 0; i < budget; i++)
		if (nkv_cq_peek(cq, out)) {
			nkv_cq_advance(cq, sq, out);
			return 1;
		}
	return 0;
}

/** PRP entries for a buffer at IOVA @iova of @len bytes with 4 KiB pages (docs/nvme-kv-wire.md B.5). */
static inline NKV_HD uint32_t nkv_prp_pages(uint64_t iova, uint32_t len)
{
	if (len == 0)
		return 0;
	return (uint32_t)(((iova & 0xfffu) + len + 0xfffu) >> 12);
}

/* ==== Concurrent submitters: tickets, batches, per-slot completions (GPU warps, CPU threads) ==== */

/*
 * struct nkv_dev_qp is one I/O queue pair shared by many submitters (the threads of a GPU grid, or CPU
 * threads). The scheme is BaM's:
 *  - Reservation: an atomic in-flight count keeps at most size - 1 commands between reservation and
 *    collection (so neither ring can overflow), then an atomic ticket counter hands out consecutive
 *    tickets; ticket t owns SQ slot t % size and CID t % size.
 *  - A slot is reused only after its previous command was collected (slot turn = t / size), so a CID
 *    is never in flight twice.
 *  - Publication is in ticket order: the holder of tickets [t0, t0 + n) waits until every earlier
 *    ticket is published, fences (system scope on a GPU), writes the SQ tail doorbell once for the
 *    whole batch, then lets the next batch go.
 *  - Completion: whoever waits takes the CQ lock when it is free and drains every new CQE (phase seen
 *    -> fence -> re-read, nkv_cq_peek), files each into the slot named by its CID, then writes the CQ
 *    head doorbell once. The owner of a ticket collects its slot's result and frees the slot.
 * Every wait is bounded by a poll budget and returns NKV_DEV_ETIMEDOUT (or NKV_DEV_EBUSY) instead of
 * spinning forever. A timeout in nkv_dev_publish() leaves the queue unusable (a ticket before it was
 * never published): tear the queue down. A timeout in nkv_dev_wait() does not: wait again.
 *
 * The size must be a power of two (ticket arithmetic wraps at 2^32). On a GPU keep this struct and the
 * slot table in device memory (the atomics are device scope); the rings and doorbells are host memory
 * mapped into the GPU. On a CPU everything is plain memory and the __atomic builtins are used.
 */

#define NKV_DEV_OK 0
#define NKV_DEV_EBUSY (-16)     /* no room in the queue within the budget */
#define NKV_DEV_EINVAL (-22)
#define NKV_DEV_ETIMEDOUT (-110) /* the budget ran out */

/*
 * What a spinning waiter does between polls. Host code whose submitters outnumber its cores may
 * define NKV_DEV_RELAX (e.g. as sched_yield()) before including this header.
 */
#if defined(NKV_DEV_RELAX)
/* the includer's */
#elif defined(__CUDA_ARCH__)
#define NKV_DEV_RELAX() __nanosleep(64)
#elif defined(__x86_64__) || defined(__i386__)
#define NKV_DEV_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define NKV_DEV_RELAX() __asm__ __volatile__("yield")
#else
#define NKV_DEV_RELAX() ((void)0)
#endif

/* ---- atomics: CUDA (device scope) or C11/GNU builtins ---- */

static inline NKV_HD uint32_t nkv_atomic_add32(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	return atomicAdd((unsigned int *)p, (unsigned int)v);
#else
	return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
#endif
}
static inline NKV_HD uint32_t nkv_atomic_sub32(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	return atomicSub((unsigned int *)p, (unsigned int)v);
#else
	return __atomic_fetch_sub(p, v, __ATOMIC_ACQ_REL);
#endif
}
/** Compare and swap. @return the old value (success when it equals @expect). */
static inline NKV_HD uint32_t nkv_atomic_cas32(uint32_t *p, uint32_t expect, uint32_t desired)
{
#if defined(__CUDA_ARCH__)
	return atomicCAS((unsigned int *)p, (unsigned int)expect, (unsigned int)desired);
#else
	__atomic_compare_exchange_n(p, &expect, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	return expect;
#endif
}
static inline NKV_HD uint32_t nkv_atomic_load32(const uint32_t *p)
{
#if defined(__CUDA_ARCH__)
	uint32_t v = *(const volatile uint32_t *)p;
	__threadfence();
	return v;
#else
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}
static inline NKV_HD void nkv_atomic_store32(uint32_t *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
	__threadfence();
	*(volatile uint32_t *)p = v;
#else
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/** One command slot (index = CID): the turn for the next ticket and the CQE filed by the reaper. */
struct nkv_dev_slot {
	uint32_t turn;   /* ticket t may use this slot when turn == t / size */
	uint32_t done;   /* 1: the CQE below is this slot's command's */
	uint32_t dw0, dw1;
	uint16_t status; /* CQE status without the phase bit: SCT << 8 | SC (plus DNR, M) */
	uint16_t sqhd;
	uint32_t rsvd;
};

/** A completion as the owner of a ticket gets it. */
struct nkv_dev_cpl {
	uint32_t dw0, dw1;
	uint16_t status; /* SCT << 8 | SC (0: success), DNR in bit 14, as nkv_status */
	uint16_t cid;
};

/** A queue pair shared by concurrent submitters (see above). Zero the counters before first use. */
struct nkv_dev_qp {
	struct nkv_sqe *sq;          /* SQ ring, size entries (controller memory space: host memory) */
	volatile struct nkv_cqe *cq; /* CQ ring, size entries */
	volatile uint32_t *sq_db;    /* SQ tail doorbell */
	volatile uint32_t *cq_db;    /* CQ head doorbell */
	struct nkv_dev_slot *slots;  /* size entries */
	uint32_t size;               /* entries of both rings: a power of two, 2..65536 */
	uint32_t shift;              /* log2(size) */
	uint16_t qid;
	uint16_t flags;              /* NKV_DEV_QP_*: what the controller reports (set by its creator) */
	/* shared state, atomics only */
	uint32_t inflight;           /* reserved and not yet collected (<= size - 1) */
	uint32_t ticket;             /* next ticket */
	uint32_t published;          /* every ticket below this one is visible to the controller */
	uint32_t cq_lock;            /* 1: a reaper drains the CQ */
	/* under cq_lock */
	uint32_t cq_head;
	uint32_t cq_phase;
	uint32_t bad_cqes;           /* CQEs naming a CID with no command in flight (dropped) */
	uint32_t reaps;              /* CQ head doorbell writes */
};

/* nkv_dev_qp.flags: the controller puts the bytes a Retrieve (Range) moved in CQE DW1 (a rados-nkv
 * shared-memory controller with NKV_SHM_FEAT_XFER; nkv_devq_create() sets it from the controller). */
#define NKV_DEV_QP_XFER 0x1u

/** Set up @qp over rings and doorbells that exist already (flags 0). @return 0 or NKV_DEV_EINVAL. */
static inline NKV_HD int nkv_dev_qp_init(struct nkv_dev_qp *qp, struct nkv_sqe *sq, volatile struct nkv_cqe *cq,
					 volatile uint32_t *sq_db, volatile uint32_t *cq_db, struct nkv_dev_slot *slots,
					 uint32_t size, uint16_t qid)
{
	uint32_t shift = 0;

	if (size < 2 || size > 65536u || (size & (size - 1)) != 0)
		return NKV_DEV_EINVAL;
	while ((1u << shift) != size)
		shift++;
	qp->sq = sq;
	qp->cq = cq;
	qp->sq_db = sq_db;
	qp->cq_db = cq_db;
	qp->slots = slots;
	qp->size = size;
	qp->shift = shift;
	qp->qid = qid;
	qp->flags = 0;
	qp->inflight = qp->ticket = qp->published = qp->cq_lock = 0;
	qp->cq_head = 0;
	qp->cq_phase = 1;
	qp->bad_cqes = qp->reaps = 0;
	for (uint32_t i = 0; i < size; i++) {
		slots[i].turn = 0;
		slots[i].done = 0;
		slots[i].dw0 = slots[i].dw1 = 0;
		slots[i].status = slots[i].sqhd = 0;
		slots[i].rsvd = 0;
	}
	return NKV_DEV_OK;
}

/** The CID (and SQ slot) of ticket @t. */
static inline NKV_HD uint16_t nkv_dev_cid(const struct nkv_dev_qp *qp, uint32_t t)
{
	return (uint16_t)(t & (qp->size - 1));
}

/**
 * Drain the CQ if no one else is (try-lock): file each new CQE into its CID's slot, then write the CQ
 * head doorbell once. @return CQEs taken (0 also when another reaper holds the lock).
 */
static inline NKV_HD uint32_t nkv_dev_reap(struct nkv_dev_qp *qp)
{
	if (nkv_atomic_load32(&qp->cq_lock) != 0 || nkv_atomic_cas32(&qp->cq_lock, 0, 1) != 0)
		return 0;
	struct nkv_dev_cq cq;
	cq.ring = qp->cq;
	cq.db = qp->cq_db;
	cq.size = (uint16_t)qp->size; /* 65536 wraps to 0: the index arithmetic below uses qp->size */
	cq.head = (uint16_t)qp->cq_head;
	cq.phase = (uint8_t)qp->cq_phase;
	uint32_t n = 0;
	struct nkv_cqe e;
	while (n < qp->size && nkv_cq_peek(&cq, &e)) { /* phase seen -> fence -> whole CQE re-read */
		uint16_t cid = nkv_get16(&e.cid);
		struct nkv_dev_slot *s = &qp->slots[cid & (qp->size - 1)];
		if (cid >= qp->size || nkv_atomic_load32(&s->done) != 0) {
			qp->bad_cqes++;
		} else {
			s->dw0 = nkv_get32(&e.dw0);
			s->dw1 = nkv_get32(&e.dw1);
			s->status = (uint16_t)(nkv_get16(&e.status) >> 1);
			s->sqhd = nkv_get16(&e.sqhd);
			nkv_atomic_store32(&s->done, 1); /* release: the fields above first */
		}
		if ((uint32_t)cq.head + 1u == qp->size) {
			cq.head = 0;
			cq.phase ^= 1u;
		} else {
			cq.head++;
		}
		n++;
	}
	if (n) {
		qp->cq_head = cq.head;
		qp->cq_phase = cq.phase;
		qp->reaps++;
		nkv_cq_ring(&cq); /* fence, then the head doorbell: the entries are free again */
	}
	nkv_atomic_store32(&qp->cq_lock, 0);
	return n;
}

/**
 * Reserve @n consecutive tickets (one batch; 1 <= n <= size - 1). Polls (and reaps) while the queue is
 * full. @return 0 with *t0 the first ticket, NKV_DEV_EBUSY when the budget ran out, NKV_DEV_EINVAL.
 */
static inline NKV_HD int nkv_dev_reserve(struct nkv_dev_qp *qp, uint32_t n, uint64_t budget, uint32_t *t0)
{
	if (n == 0 || n > qp->size - 1)
		return NKV_DEV_EINVAL;
	for (uint64_t i = 0; i < budget; i++) {
		uint32_t cur = nkv_atomic_load32(&qp->inflight);
		if (cur + n <= qp->size - 1) {
			if (nkv_atomic_cas32(&qp->inflight, cur, cur + n) == cur) {
				*t0 = nkv_atomic_add32(&qp->ticket, n);
				return NKV_DEV_OK;
			}
			continue;
		}
		nkv_dev_reap(qp);
		NKV_DEV_RELAX();
	}
	return NKV_DEV_EBUSY;
}

/**
 * Write @sqe into ticket @t's slot with CID = slot (waits, bounded, for the slot's previous command to
 * be collected), then a release fence so a publisher on another thread sees it after a barrier.
 * @return the CID, or NKV_DEV_ETIMEDOUT.
 */
static inline NKV_HD int nkv_dev_put(struct nkv_dev_qp *qp, uint32_t t, const struct nkv_sqe *sqe, uint64_t budget)
{
	uint32_t slot = t & (qp->size - 1), turn = t >> qp->shift;
	uint64_t i = 0;

	while (nkv_atomic_load32(&qp->slots[slot].turn) != turn) {
		if (++i >= budget)
			return NKV_DEV_ETIMEDOUT;
		nkv_dev_reap(qp);
		NKV_DEV_RELAX();
	}
	struct nkv_sqe e = *sqe;
	nkv_put16(&e.cid, (uint16_t)slot);
	nkv_dev_store_sqe(&qp->sq[slot], &e);
	NKV_FENCE_RELEASE();
	return (int)slot;
}

/**
 * Make tickets [t0, t0 + n) visible to the controller: wait (bounded) until every earlier ticket is
 * published, fence (system scope on a GPU), write the SQ tail doorbell once, pass the turn on.
 * Call after every SQE of the batch was written (nkv_dev_put) and, across threads, after a barrier.
 * @return 0 or NKV_DEV_ETIMEDOUT (the queue is then unusable: see above).
 */
static inline NKV_HD int nkv_dev_publish(struct nkv_dev_qp *qp, uint32_t t0, uint32_t n, uint64_t budget)
{
	uint64_t i = 0;

	while (nkv_atomic_load32(&qp->published) != t0) {
		if (++i >= budget)
			return NKV_DEV_ETIMEDOUT;
		NKV_DEV_RELAX();
	}
	NKV_FENCE_RELEASE(); /* every SQE of the batch before the doorbell */
	*qp->sq_db = (t0 + n) & (qp->size - 1);
	NKV_FENCE_RELEASE(); /* our doorbell before the next batch's */
	nkv_atomic_store32(&qp->published, t0 + n);
	return NKV_DEV_OK;
}

/** Has ticket @t's completion been filed (non-blocking; reaps once)? */
static inline NKV_HD int nkv_dev_done(struct nkv_dev_qp *qp, uint32_t t)
{
	if (nkv_atomic_load32(&qp->slots[t & (qp->size - 1)].done))
		return 1;
	nkv_dev_reap(qp);
	return nkv_atomic_load32(&qp->slots[t & (qp->size - 1)].done) != 0;
}

/**
 * Wait (bounded by @budget polls, reaping for everyone meanwhile) for ticket @t's completion, collect
 * it into *out and free the slot. @return 0, or NKV_DEV_ETIMEDOUT (the command is still in flight:
 * wait again later).
 */
static inline NKV_HD int nkv_dev_wait(struct nkv_dev_qp *qp, uint32_t t, struct nkv_dev_cpl *out, uint64_t budget)
{
	struct nkv_dev_slot *s = &qp->slots[t & (qp->size - 1)];
	uint64_t i = 0;

	while (!nkv_atomic_load32(&s->done)) {
		if (++i >= budget)
			return NKV_DEV_ETIMEDOUT;
		if (!nkv_dev_reap(qp))
			NKV_DEV_RELAX();
	}
	out->dw0 = s->dw0;
	out->dw1 = s->dw1;
	out->status = s->status;
	out->cid = (uint16_t)(t & (qp->size - 1));
	s->done = 0;
	nkv_atomic_store32(&s->turn, (t + qp->size) >> qp->shift); /* the slot's next ticket may go */
	nkv_atomic_sub32(&qp->inflight, 1);
	return NKV_DEV_OK;
}

/**
 * Check a Retrieve's (or Retrieve Range's) completion from nkv_dev_wait() against what it must have
 * moved: for a success, nkv_range_xfer(DW0, @offset, @size) bytes (@offset 0 for Retrieve, @size its
 * CDW10). Call it before using the buffer: a success whose bytes fall short (the value changed size
 * between the target's size check and its read, a backend that read less) would otherwise leave the
 * buffer's old bytes behind a full size. A queue whose controller does not report the bytes moved
 * (flags without NKV_DEV_QP_XFER) cannot be checked: the status stands.
 * @return @c->status, or NKV_SC_DATA_TRANSFER_ERROR (04h) for a success that moved the wrong count.
 */
static inline NKV_HD uint16_t nkv_dev_retrieve_status(const struct nkv_dev_qp *qp, const struct nkv_dev_cpl *c,
						      uint64_t offset, uint32_t size)
{
	if (c->status || !(qp->flags & NKV_DEV_QP_XFER))
		return c->status;
	return c->dw1 == nkv_range_xfer(c->dw0, offset, size) ? 0 : (uint16_t)NKV_SC_DATA_TRANSFER_ERROR;
}

/** Per-thread submit: reserve one ticket, write the SQE, publish it. @return 0 with *t, or an error. */
static inline NKV_HD int nkv_dev_submit(struct nkv_dev_qp *qp, const struct nkv_sqe *sqe, uint64_t budget, uint32_t *t)
{
	int rc = nkv_dev_reserve(qp, 1, budget, t);
	if (rc != NKV_DEV_OK)
		return rc;
	if ((rc = nkv_dev_put(qp, *t, sqe, budget)) < 0)
		return rc;
	return nkv_dev_publish(qp, *t, 1, budget);
}

/** Build a KV Store/Retrieve with PRP1/PRP2 (CID is set by nkv_dev_put). */
static inline NKV_HD void nkv_dev_sqe_kv(struct nkv_sqe *sqe, uint8_t opc, uint32_t nsid, const uint8_t *key,
					 unsigned klen, uint32_t size, uint64_t prp1, uint64_t prp2)
{
	nkv_sqe_kv(sqe, opc, nsid, key, klen, size, 0);
	nkv_put64(sqe->dptr, prp1);
	nkv_put64(sqe->dptr + 8, prp2);
}

/**
 * Build a Store TTL (nkv_spec.h, opcode F1h; nkv_sqe_store_ttl) with PRP1/PRP2 (CID is set by
 * nkv_dev_put): the @size bytes of the value at PRP1/PRP2 are stored under @key with the Store
 * options @opts (NKV_STORE_*), time to live @ttl_s (NKV_TTL_DEFAULT 0: the namespace's default,
 * NKV_TTL_NONE: never) and @flags (NKV_TTL_PIN: an explicit, pinned entry). Statuses as Store, plus
 * Invalid Field (02h) on a namespace without a cache or for a pin without a finite TTL, and 81h for a
 * pin past the namespace's pin quota.
 */
static inline NKV_HD void nkv_dev_sqe_store_ttl(struct nkv_sqe *sqe, uint32_t nsid, const uint8_t *key, unsigned klen,
						uint32_t size, unsigned opts, uint32_t ttl_s, uint32_t flags,
						uint64_t prp1, uint64_t prp2)
{
	nkv_sqe_store_ttl(sqe, nsid, key, klen, size, opts, ttl_s, flags);
	nkv_put64(sqe->dptr, prp1);
	nkv_put64(sqe->dptr + 8, prp2);
}

/**
 * Build a Retrieve Range (nkv_spec.h, opcode F2h; nkv_sqe_retrieve_range) with PRP1/PRP2 (CID is
 * set by nkv_dev_put): up to @size bytes of the value from byte @offset land in the buffer at
 * PRP1/PRP2, which must hold @size bytes. The completion's DW0 is the full value size; the bytes
 * moved are nkv_range_xfer(dw0, @offset, @size) (a PCIe CQE does not say).
 */
static inline NKV_HD void nkv_dev_sqe_retrieve_range(struct nkv_sqe *sqe, uint32_t nsid, const uint8_t *key,
						     unsigned klen, uint32_t size, uint64_t offset, uint64_t prp1,
						     uint64_t prp2)
{
	nkv_sqe_retrieve_range(sqe, nsid, key, klen, size, offset);
	nkv_put64(sqe->dptr, prp1);
	nkv_put64(sqe->dptr + 8, prp2);
}

/**
 * Build a vendor Exec (nkv_spec.h "vendor Exec"; nkv_sqe_exec) with PRP1/PRP2 (CID is set by
 * nkv_dev_put). @size is CDW10: the input size for direction 01b (the buffer at PRP1/PRP2 holds the
 * input), the host buffer size for 10b (the output lands there, DW0 = its full length), 0 for 00b;
 * @inl holds @inl_len (0-8) inline input bytes, for 00b and 10b only. Checked rather than clamped,
 * because an opcode below 80h would silently build a KV command (01h is Store), and one of F0h-FFh
 * a built-in vendor command with a layout of its own (F2h is Retrieve Range).
 * @return NKV_DEV_OK, or NKV_DEV_EINVAL (opcode below 80h or above EFh, direction 11b, @inl_len > 8
 * or inline bytes with 01b, a nonzero @size with 00b) with *@sqe untouched.
 */
static inline NKV_HD int nkv_dev_sqe_exec(struct nkv_sqe *sqe, uint8_t opc, uint32_t nsid, const uint8_t *key,
					  unsigned klen, uint32_t size, const uint8_t *inl, unsigned inl_len,
					  uint64_t prp1, uint64_t prp2)
{
	unsigned x = nkv_opc_xfer(opc);
	if (opc < NKV_EXEC_OPC_FIRST || opc >= NKV_VS_OPC_FIRST || x == NKV_XFER_BIDI ||
	    inl_len > NKV_EXEC_INLINE_MAX || (x == NKV_XFER_H2C && inl_len) || (x == NKV_XFER_NONE && size))
		return NKV_DEV_EINVAL;
	nkv_sqe_exec(sqe, opc, nsid, key, klen, size, inl, inl_len);
	nkv_put64(sqe->dptr, prp1);
	nkv_put64(sqe->dptr + 8, prp2);
	return NKV_DEV_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* NKV_DEV_H */
