/* SPDX-License-Identifier: Apache-2.0 */
/* nkv_gpu.cu - host glue for GPU-initiated KV I/O (nkv_gpu.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "gpu/nkv_gpu.h"

#define PG 4096u

static int cu_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "nkv-gpu: %s: %s\n", what, cudaGetErrorString(e));
	return -EIO;
}

/** Pin and map host memory [p, p + len) into the GPU. @return the device pointer or NULL. */
static void *map_host(void *p, size_t len)
{
	void *d = NULL;
	if (cu_err(cudaHostRegister(p, len, cudaHostRegisterMapped), "cudaHostRegister") ||
	    cu_err(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer"))
		return NULL;
	return d;
}

int nkv_gpu_open(const char *sock, struct nkv_gpu **out)
{
	struct nkv_gpu *g = (struct nkv_gpu *)calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	int rc = nkv_connect_shm(sock, NULL, &g->ctrl);
	if (rc) {
		free(g);
		return rc;
	}
	g->regs = nkv_ctrl_regs(g->ctrl, &g->reg_len);
	if (!g->regs || !map_host(g->regs, g->reg_len)) {
		nkv_disconnect(g->ctrl);
		free(g);
		return -EIO;
	}
	/* VRAM needs the target's CUDA too: a target without it answers the registration -ENOTSUP. */
	g->mem_modes = NKV_GPU_MEM_HOST | NKV_GPU_MEM_VRAM;
	*out = g;
	return 0;
}

void nkv_gpu_close(struct nkv_gpu *g)
{
	if (!g)
		return;
	cudaHostUnregister(g->regs);
	nkv_disconnect(g->ctrl);
	free(g);
}

int nkv_gpu_qp_create(struct nkv_gpu *g, uint32_t entries, struct nkv_gpu_qp **out)
{
	struct nkv_gpu_qp *q = (struct nkv_gpu_qp *)calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->g = g;
	int rc = nkv_devq_create(g->ctrl, entries, &q->dq);
	if (rc) {
		free(q);
		return rc;
	}
	struct nkv_dev_qp hq = *nkv_devq_qp(q->dq);
	size_t len;
	q->ring_mem = nkv_devq_mem(q->dq, &len);
	q->size = hq.size;
	uint8_t *d_ring = (uint8_t *)map_host(q->ring_mem, len);
	uint8_t *d_regs = NULL;
	if (cu_err(cudaHostGetDevicePointer((void **)&d_regs, g->regs, 0), "doorbell page") || !d_ring) {
		rc = -EIO;
		goto fail;
	}
	/* The device copy: the same layout, every pointer translated to the GPU's view. */
	hq.sq = (struct nkv_sqe *)(d_ring + ((uint8_t *)hq.sq - (uint8_t *)q->ring_mem));
	hq.cq = (volatile struct nkv_cqe *)(d_ring + ((const volatile uint8_t *)hq.cq - (uint8_t *)q->ring_mem));
	hq.sq_db = (volatile uint32_t *)(d_regs + nkv_db_sq_tail(hq.qid));
	hq.cq_db = (volatile uint32_t *)(d_regs + nkv_db_cq_head(hq.qid));
	if (cu_err(cudaMalloc((void **)&q->d_slots, sizeof(struct nkv_dev_slot) * hq.size), "cudaMalloc slots") ||
	    cu_err(cudaMemset(q->d_slots, 0, sizeof(struct nkv_dev_slot) * hq.size), "cudaMemset") ||
	    cu_err(cudaMalloc((void **)&q->d_qp, sizeof(hq)), "cudaMalloc qp")) {
		rc = -ENOMEM;
		goto fail;
	}
	hq.slots = q->d_slots;
	if (cu_err(cudaMemcpy(q->d_qp, &hq, sizeof(hq), cudaMemcpyHostToDevice), "qp copy")) {
		rc = -EIO;
		goto fail;
	}
	*out = q;
	return 0;
fail:
	nkv_gpu_qp_destroy(q);
	return rc;
}

void nkv_gpu_qp_destroy(struct nkv_gpu_qp *q)
{
	if (!q)
		return;
	cudaFree(q->d_qp);
	cudaFree(q->d_slots);
	if (q->ring_mem)
		cudaHostUnregister(q->ring_mem);
	nkv_devq_destroy(q->dq);
	free(q);
}

/** VRAM for @b (n * len bytes, rounded up to 4 KiB), registered with the target. */
static int vram_alloc(struct nkv_gpu *g, struct nkv_gpu_buf *b, uint64_t *iova)
{
	size_t len = ((size_t)b->n * b->len + PG - 1) & ~(size_t)(PG - 1);
	cudaIpcMemHandle_t h;
	int dev = 0;
	static_assert(sizeof(h) == 64, "cudaIpcMemHandle_t is 64 bytes");
	if (cu_err(cudaGetDevice(&dev), "cudaGetDevice") || cu_err(cudaMalloc((void **)&b->dev, len), "cudaMalloc data"))
		return -ENOMEM;
	if (cu_err(cudaIpcGetMemHandle(&h, b->dev), "cudaIpcGetMemHandle"))
		return -EIO;
	/* cudaMalloc returns the allocation's base: offset 0. The target numbers devices as we do as
	 * long as both see the same CUDA_VISIBLE_DEVICES. */
	int rc = nkv_shm_reg_cuda(g->ctrl, &h, dev, 0, len, iova, 0);
	if (rc)
		fprintf(stderr, "nkv-gpu: registering %zu bytes of VRAM (device %d) with the target: %s\n", len, dev,
			strerror(-rc));
	return rc;
}

int nkv_gpu_buf_alloc(struct nkv_gpu *g, uint32_t n, uint32_t len, unsigned mode, struct nkv_gpu_buf **out)
{
	if ((mode != NKV_GPU_MEM_HOST && mode != NKV_GPU_MEM_VRAM) || !(g->mem_modes & mode))
		return -ENOTSUP;
	if (!n || !len || len % 4)
		return -EINVAL;
	struct nkv_gpu_buf *b = (struct nkv_gpu_buf *)calloc(1, sizeof(*b));
	uint64_t *prp = (uint64_t *)calloc(2 * (size_t)n, 8);
	uint32_t lp = nkv_devq_prp_pages(len);
	int rc = -ENOMEM;
	if (!b || !prp)
		goto fail;
	b->mode = mode;
	b->n = n;
	b->len = len;
	if (mode == NKV_GPU_MEM_HOST && !(b->host = (uint8_t *)nkv_buf_alloc(g->ctrl, (size_t)n * len)))
		goto fail;
	if (mode == NKV_GPU_MEM_VRAM && (rc = vram_alloc(g, b, &b->iova)) != 0)
		goto fail;
	rc = -ENOMEM;
	if (lp && !(b->lists = nkv_buf_alloc(g->ctrl, (size_t)n * lp * PG)))
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		void *list = lp ? (uint8_t *)b->lists + (size_t)i * lp * PG : NULL;
		if (mode == NKV_GPU_MEM_HOST)
			rc = nkv_devq_prp(g->ctrl, b->host + (size_t)i * len, len, list, lp, &prp[2 * i], &prp[2 * i + 1]);
		else
			rc = nkv_devq_prp_iova(g->ctrl, b->iova + (uint64_t)i * len, len, list, lp, &prp[2 * i],
					       &prp[2 * i + 1]);
		if (rc < 0)
			goto fail;
	}
	rc = -EIO;
	if ((mode == NKV_GPU_MEM_HOST && !(b->dev = (uint8_t *)map_host(b->host, (size_t)n * len))) ||
	    cu_err(cudaMalloc((void **)&b->d_prp, 16 * (size_t)n), "cudaMalloc prp") ||
	    cu_err(cudaMemcpy(b->d_prp, prp, 16 * (size_t)n, cudaMemcpyHostToDevice), "prp copy"))
		goto fail;
	free(prp);
	*out = b;
	return 0;
fail:
	free(prp);
	nkv_gpu_buf_free(g, b);
	return rc;
}

void nkv_gpu_buf_free(struct nkv_gpu *g, struct nkv_gpu_buf *b)
{
	if (!b)
		return;
	cudaFree(b->d_prp);
	if (b->mode == NKV_GPU_MEM_VRAM && b->dev) {
		/* The target closes its IPC mapping on DEREG; only then may the memory go. A region it
		 * would not let go of (-EBUSY) is leaked rather than freed under it. */
		int rc = b->iova ? nkv_shm_dereg_cuda(g->ctrl, b->iova) : 0;
		if (rc)
			fprintf(stderr, "nkv-gpu: DEREG of VRAM at iova %#llx: %s (leaking it)\n",
				(unsigned long long)b->iova, strerror(-rc));
		else
			cudaFree(b->dev);
	}
	if (b->mode == NKV_GPU_MEM_HOST && b->dev && b->host)
		cudaHostUnregister(b->host);
	if (b->host)
		nkv_buf_free(g->ctrl, b->host);
	if (b->lists)
		nkv_buf_free(g->ctrl, b->lists);
	free(b);
}
