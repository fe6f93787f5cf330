/* SPDX-License-Identifier: Apache-2.0 */
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
#include "nkv_shm.h" /* NKV_SHM_REG_READONLY */

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_devq;

/**
 * Create an I/O queue pair of @entries entries (rounded down to a power of two, capped by CAP.MQES;
 * at least 2) on shm controller @ctrl, with a QID libnkv's own queue pairs will not use.
 * @return 0, -EINVAL (not an shm controller), -ENOSPC (no QID left), -ENOMEM, or the target's -errno.
 */
NKV_API int nkv_devq_create(struct nkv_ctrl *ctrl, uint32_t entries, struct nkv_devq **out);

/** Delete the queues on the controller (the SQ, then the CQ) and free the memory. */
NKV_API void nkv_devq_destroy(struct nkv_devq *q);

/** The queue pair as CPU code drives it (counters zeroed, slot table allocated). */
NKV_API struct nkv_dev_qp *nkv_devq_qp(struct nkv_devq *q);

/** The ring memory (page aligned: SQ ring, then CQ ring) to map elsewhere (cudaHostRegister). */
NKV_API void *nkv_devq_mem(struct nkv_devq *q, size_t *len);

/** The controller's register page (doorbells from 1000h), to map elsewhere. */
NKV_API void *nkv_ctrl_regs(struct nkv_ctrl *ctrl, size_t *len);

/**
 * The data pointer of @len bytes at @buf, which must lie inside one nkv_buf_alloc() buffer: PRP1, and
 * PRP2 or a PRP list written into @list (itself inside an nkv_buf_alloc() buffer, page aligned,
 * @list_pages pages). @return list pages used (>= 0), -EINVAL (not registered memory), -ENOSPC.
 */
NKV_API int nkv_devq_prp(struct nkv_ctrl *ctrl, const void *buf, uint32_t len, void *list, uint32_t list_pages,
		 uint64_t *prp1, uint64_t *prp2);

/**
 * The data pointer of @len bytes at IOVA @iova (a region registered otherwise, e.g. GPU memory from
 * nkv_shm_reg_cuda()), with a PRP list in @list as nkv_devq_prp() does it (@list must lie inside an
 * nkv_buf_alloc() buffer: the controller reads lists with its CPU). @return as nkv_devq_prp().
 */
NKV_API int nkv_devq_prp_iova(struct nkv_ctrl *ctrl, uint64_t iova, uint32_t len, void *list, uint32_t list_pages,
		      uint64_t *prp1, uint64_t *prp2);

/**
 * Register GPU memory with shm controller @ctrl (NKV_SHM_REG_CUDA, nkv_shm.h): @len bytes (a multiple
 * of 4 KiB), @offset bytes into the allocation named by the CUDA IPC handle @ipc_handle64 (the 64
 * bytes of a cudaIpcMemHandle_t, opaque here) on CUDA device @device as the target numbers it.
 * libnkv picks the IOVA (never overlapping its own regions) and returns it in *@iova_out (0 on
 * failure). @flags: 0 or NKV_SHM_REG_READONLY (a Store source only). Such memory can be a Retrieve
 * target or a Store source (PRPs from nkv_devq_prp_iova()), never a queue or a PRP list.
 * @return 0, -EINVAL (arguments; not an shm controller), or the target's -errno: -ENOTSUP (no CUDA
 * runtime on the target), -ENODEV (the handle cannot be opened there), -EEXIST, -ENOSPC, ...
 * The target may load the CUDA runtime on the first call: allow for it in the controller's timeout.
 */
NKV_API int nkv_shm_reg_cuda(struct nkv_ctrl *ctrl, const void *ipc_handle64, int device, uint64_t offset, uint64_t len,
		     uint64_t *iova_out, uint32_t flags);

/** End a region of nkv_shm_reg_cuda() (DEREG). @return 0, -EBUSY (in use), -ENOENT, -EINVAL. */
NKV_API int nkv_shm_dereg_cuda(struct nkv_ctrl *ctrl, uint64_t iova);

/** List pages nkv_devq_prp() needs for @len bytes starting on a page boundary. */
NKV_API uint32_t nkv_devq_prp_pages(uint32_t len);

#ifdef __cplusplus
}
#endif
#endif /* NKV_DEVQ_H */
