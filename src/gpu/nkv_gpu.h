/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv_gpu.h - host glue for GPU-initiated KV I/O (issue 7; built only where CMake finds nvcc).
 *
 * nkv_gpu_open() connects to an shm target (libnkv, nkv_connect_shm) and maps its register page
 * (doorbells) into the GPU (cudaHostRegister, mapped). nkv_gpu_qp_create() creates a device queue
 * (nkv_devq.h) whose SQ/CQ rings are host memory registered with both the target and CUDA, and puts
 * its struct nkv_dev_qp (tickets, slot table) in device memory: GPU threads then submit, ring and
 * reap on their own (nkv_dev.h). nkv_gpu_buf_alloc() makes data buffers in the memory mode asked for
 * and precomputes each buffer's PRPs in device memory: host memory (nkv_buf_alloc, pinned and
 * mapped into the GPU) or VRAM (cudaMalloc, registered with the target by CUDA IPC handle through
 * nkv_shm_reg_cuda(): the target copies Retrieve values straight into it and Store values out of it;
 * its PRPs are built from its IOVA exactly as for host memory, PRP lists in registered host memory).
 */
#ifndef NKV_GPU_H
#define NKV_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "nkv/nkv.h"
#include "nkv/nkv_dev.h"
#include "nkv/nkv_devq.h"

/* Memory-mode mask: where a data buffer lives. */
#define NKV_GPU_MEM_HOST 0x1u /* host memory registered with the target, pinned and mapped into the GPU */
#define NKV_GPU_MEM_VRAM 0x2u /* GPU memory registered with the target by CUDA IPC handle (NKV_SHM_REG_CUDA) */

struct nkv_gpu {
	struct nkv_ctrl *ctrl;
	void *regs;         /* register page (host) */
	size_t reg_len;
	unsigned mem_modes; /* the modes this target and GPU support */
};

struct nkv_gpu_qp {
	struct nkv_gpu *g;
	struct nkv_devq *dq;
	void *ring_mem;              /* host, registered with CUDA */
	struct nkv_dev_qp *d_qp;     /* device memory: pointers are device views of the rings/doorbells */
	struct nkv_dev_slot *d_slots;
	uint32_t size;
};

/** @n data buffers of @len bytes each, with their data pointers. */
struct nkv_gpu_buf {
	unsigned mode;   /* NKV_GPU_MEM_* */
	uint32_t n, len;
	uint8_t *host;   /* host view (HOST mode), NULL for VRAM */
	uint8_t *dev;    /* the GPU's view of buffer 0 (buffer i at dev + i * len); VRAM: the cudaMalloc */
	uint64_t *d_prp; /* device: prp1, prp2 for each buffer (2n entries) */
	void *lists;     /* PRP list pages (host, registered) */
	uint64_t iova;   /* VRAM: the registered region's IOVA (0: not registered) */
};

int nkv_gpu_open(const char *sock, struct nkv_gpu **out);
void nkv_gpu_close(struct nkv_gpu *g);
int nkv_gpu_qp_create(struct nkv_gpu *g, uint32_t entries, struct nkv_gpu_qp **out);
void nkv_gpu_qp_destroy(struct nkv_gpu_qp *q);
int nkv_gpu_buf_alloc(struct nkv_gpu *g, uint32_t n, uint32_t len, unsigned mode, struct nkv_gpu_buf **out);
void nkv_gpu_buf_free(struct nkv_gpu *g, struct nkv_gpu_buf *b);

#endif
