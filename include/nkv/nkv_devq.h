/*
 * nkv_devq.h - device queue pairs on a shared-memory (shm) controller from libnkv: I/O SQ/CQ rings in
 * memory registered with the target, driven directly through struct nkv_dev_qp (nkv_dev.h) by any
 * number of concurrent submitters: GPU threads (src/gpu maps the rings and doorbells into the GPU)
 * or CPU threads. libnkv itself never touches these queues after creating them.
 *
 * Memory of a device queue: one sealed memfd, [SQ ring | CQ ring], the SQ part registered read-only
 * for the controller and the CQ part read-write. Data buffers come from nkv_buf_alloc(); their IOVAs
 * and PRP lists from nkv_devq_prp().
 */
#ifndef NKV_DEVQ_H
#define NKV_DEVQ_H

#include <stddef.h>
#include <stdint.h>

#include "nkv.h"
#include "nkv_dev.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_devq;

/**
 * Create an I/O queue pair of @entries entries (rounded down to a power of two, capped by CAP.MQES;
 * at least 2) on shm controller @ctrl, with a QID libnkv's own queue pairs will not use.
 * @return 0, -EINVAL (not an shm controller), -ENOSPC (no QID left), -ENOMEM, or the target's -errno.
 */
int nkv_devq_create(struct nkv_ctrl *ctrl, uint32_t entries, struct nkv_devq **out);

/** Delete the queues on the controller (the SQ, then the CQ) and free the memory. */
void nkv_devq_destroy(struct nkv_devq *q);

/** The queue pair as CPU code drives it (counters zeroed, slot table allocated). */
struct nkv_dev_qp *nkv_devq_qp(struct nkv_devq *q);

/** The ring memory (page aligned: SQ ring, then CQ ring) to map elsewhere (cudaHostRegister). */
void *nkv_devq_mem(struct nkv_devq *q, size_t *len);

/** The controller's register page (doorbells from 1000h), to map elsewhere. */
void *nkv_ctrl_regs(struct nkv_ctrl *ctrl, size_t *len);

/**
 * The data pointer of @len bytes at @buf, which must lie inside one nkv_buf_alloc() buffer: PRP1, and
 * PRP2 or a PRP list written into @list (itself inside an nkv_buf_alloc() buffer, page aligned,
 * @list_pages pages). @return list pages used (>= 0), -EINVAL (not registered memory), -ENOSPC.
 */
int nkv_devq_prp(struct nkv_ctrl *ctrl, const void *buf, uint32_t len, void *list, uint32_t list_pages,
		 uint64_t *prp1, uint64_t *prp2);

/** List pages nkv_devq_prp() needs for @len bytes starting on a page boundary. */
uint32_t nkv_devq_prp_pages(uint32_t len);

#ifdef __cplusplus
}
#endif
#endif /* NKV_DEVQ_H */
