/*
 * nkv_dev.h - the PCIe-style queue pair, as a host driver sees it: SQ ring + tail doorbell, CQ ring
 * + phase bit + head doorbell. One header for the CPU driver (libnkv's shm transport) and for GPU
 * kernels (nvcc): every helper is NKV_HD (__host__ __device__ under nvcc, nothing in plain C), uses
 * no libc, and every wait is bounded by a caller-given poll budget.
 *
 * Memory ordering, the rules that matter (wire doc B, DESIGN section 3):
 *  - Submit: write the SQE(s), then a release fence (system scope on a GPU: the controller is
 *    another agent), then the tail doorbell store. The controller reads the doorbell, then the SQEs.
 *  - Complete: the controller writes the CQE with the phase bit in its last dword last. A host that
 *    sees the expected phase must fence (acquire) and read the whole CQE again before trusting DW0:
 *    the first read may have raced the controller's write of the other dwords (a torn read).
 *  - Consume: after taking CQEs, write the new CQ head to the CQ doorbell, so the controller never
 *    overwrites an entry the host has not read.
 *
 * Not thread-safe by itself: one submitter per SQ and one reaper per CQ, unless the caller
 * serializes (the GPU layer adds tickets on top of these primitives).
 */
#ifndef NKV_DEV_H
#define NKV_DEV_H

#include <stdint.h>

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
	const uint32_t *src = (const uint32_t *)sqe;
	volatile uint32_t *dst = (volatile uint32_t *)&sq->ring[slot];
	for (int i = 0; i < 16; i++)
		dst[i] = src[i];
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

/** PRP entries for a buffer at IOVA @iova of @len bytes with 4 KiB pages (wire doc B.5). */
static inline NKV_HD uint32_t nkv_prp_pages(uint64_t iova, uint32_t len)
{
	if (len == 0)
		return 0;
	return (uint32_t)(((iova & 0xfffu) + len + 0xfffu) >> 12);
}

#ifdef __cplusplus
}
#endif
#endif /* NKV_DEV_H */
