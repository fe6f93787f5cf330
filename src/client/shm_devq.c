/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_devq.c - device queue pairs (nkv_devq.h): rings registered with an shm controller, created
 * with Create I/O CQ/SQ on the admin queue, then left to struct nkv_dev_qp submitters.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/log.h"
#include "client/prp.h"
#include "client/shm_int.h"
#include "nkv/nkv_devq.h"

#define PG 4096u

struct nkv_devq {
	struct nkv_ctrl *ctrl;
	uint16_t qid;
	uint32_t entries;
	int fd;
	uint8_t *mem;
	size_t mem_len, sq_len;
	uint64_t iova;
	bool ro_reg, rw_reg, cq_created, sq_created;
	struct nkv_dev_slot *slots;
	struct nkv_dev_qp qp;
};

static size_t page_up(size_t n)
{
	return (n + PG - 1) & ~(size_t)(PG - 1);
}

static int queue_cmd(struct nkv_ctrl *ctrl, uint8_t opc, uint16_t qid, uint32_t qsize, uint32_t cdw11, uint64_t prp1)
{
	struct nkv_sqe sqe;
	struct nkv_cpl cpl = {0};
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = opc;
	nkv_put64(sqe.dptr, prp1);
	nkv_put32(&sqe.cdw10, qid | (qsize ? (qsize - 1) << 16 : 0));
	nkv_put32(&sqe.cdw11, cdw11);
	int rc = nkv_admin_flags(ctrl, &sqe, NULL, 0, &cpl, NKV_SUBMIT_RAW_DPTR);
	if (rc)
		NKV_DEBUG("devq admin %#x qid %u: %s (status %#x)", opc, qid, strerror(-rc), cpl.status);
	return rc;
}

static uint16_t qid_take(struct nkv_ctrl *ctrl)
{
	uint16_t qid = 0;
	pthread_mutex_lock(&ctrl->qp_mu);
	/* From the top, so libnkv's qpairs (which take the lowest free QID) rarely meet these. */
	for (uint16_t q = ctrl->nio; q >= 1; q--)
		if (!(ctrl->qid_used[q / 8] & (1u << (q % 8)))) {
			qid = q;
			ctrl->qid_used[q / 8] |= (uint8_t)(1u << (q % 8));
			break;
		}
	pthread_mutex_unlock(&ctrl->qp_mu);
	return qid;
}

static void qid_put(struct nkv_ctrl *ctrl, uint16_t qid)
{
	pthread_mutex_lock(&ctrl->qp_mu);
	ctrl->qid_used[qid / 8] &= (uint8_t)~(1u << (qid % 8));
	pthread_mutex_unlock(&ctrl->qp_mu);
}

void nkv_devq_destroy(struct nkv_devq *q)
{
	if (!q)
		return;
	bool keep = false;
	if (q->sq_created && queue_cmd(q->ctrl, NKV_ADM_DELETE_SQ, q->qid, 0, 0, 0) != 0)
		keep = true;
	if (!keep && q->cq_created && queue_cmd(q->ctrl, NKV_ADM_DELETE_CQ, q->qid, 0, 0, 0) != 0)
		keep = true;
	/* Queues that could not be deleted may still be used by the controller: leave the regions
	 * registered (the controller's own mapping keeps the memfd alive until the socket closes). */
	if (!keep) {
		if (q->rw_reg)
			nkv_shm_dereg(q->ctrl, q->iova + q->sq_len, q->mem_len - q->sq_len);
		if (q->ro_reg)
			nkv_shm_dereg(q->ctrl, q->iova, q->sq_len);
		qid_put(q->ctrl, q->qid);
	}
	if (q->mem)
		munmap(q->mem, q->mem_len);
	if (q->fd >= 0)
		close(q->fd);
	free(q->slots);
	free(q);
}

int nkv_devq_create(struct nkv_ctrl *ctrl, uint32_t entries, struct nkv_devq **out)
{
	if (!ctrl || !out || !ctrl->shm || ctrl->discovery)
		return -EINVAL;
	uint32_t mqes = (uint32_t)NKV_CAP_MQES(ctrl->cap) + 1u, n = 2;
	if (entries > mqes)
		entries = mqes;
	if (entries > 65536u)
		entries = 65536u;
	while (n * 2 <= entries)
		n *= 2;

	struct nkv_devq *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->ctrl = ctrl;
	q->fd = -1;
	q->entries = n;
	int rc = -ENOMEM;
	q->slots = calloc(n, sizeof(*q->slots));
	if (!q->slots)
		goto fail_noqid;
	q->qid = qid_take(ctrl);
	if (!q->qid) {
		rc = -ENOSPC;
		goto fail_noqid;
	}
	q->sq_len = page_up((size_t)n * sizeof(struct nkv_sqe));
	q->mem_len = q->sq_len + page_up((size_t)n * sizeof(struct nkv_cqe));
	if ((q->fd = nkv_shm_memfd("nkv-devq", q->mem_len)) < 0) {
		rc = q->fd;
		goto fail;
	}
	void *m = mmap(NULL, q->mem_len, PROT_READ | PROT_WRITE, MAP_SHARED, q->fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	q->mem = m;
	q->iova = nkv_shm_iova_alloc(ctrl->shm, q->mem_len);
	if ((rc = nkv_shm_reg(ctrl, q->fd, 0, q->sq_len, q->iova, NKV_SHM_REG_READONLY)) != 0)
		goto fail;
	q->ro_reg = true;
	if ((rc = nkv_shm_reg(ctrl, q->fd, q->sq_len, q->mem_len - q->sq_len, q->iova + q->sq_len, 0)) != 0)
		goto fail;
	q->rw_reg = true;
	volatile uint32_t *sdb = nkv_shm_doorbell(ctrl, nkv_db_sq_tail(q->qid));
	volatile uint32_t *cdb = nkv_shm_doorbell(ctrl, nkv_db_cq_head(q->qid));
	if (!sdb || !cdb) {
		rc = -EPROTO;
		goto fail;
	}
	if (nkv_dev_qp_init(&q->qp, (struct nkv_sqe *)q->mem, (volatile struct nkv_cqe *)(q->mem + q->sq_len), sdb,
			    cdb, q->slots, n, q->qid) != NKV_DEV_OK) {
		rc = -EINVAL;
		goto fail;
	}
	if (ctrl->shm->xfer_dw1) /* so that kernels can check each Retrieve (nkv_dev_retrieve_status) */
		q->qp.flags |= NKV_DEV_QP_XFER;
	/* Whoever rings this queue's doorbells (a GPU kernel) cannot write an eventfd: the controller's
	 * poller must look at the doorbells by itself from now on, so the doorbell kick goes (for good:
	 * a kernel may still hold the queue after nkv_devq_destroy). The CQ interrupts no one (IEN 0). */
	if ((rc = nkv_shm_kick_unbind(ctrl)) != 0)
		goto fail;
	if ((rc = queue_cmd(ctrl, NKV_ADM_CREATE_CQ, q->qid, n, 1u, q->iova + q->sq_len)) != 0)
		goto fail;
	q->cq_created = true;
	if ((rc = queue_cmd(ctrl, NKV_ADM_CREATE_SQ, q->qid, n, 1u | (uint32_t)q->qid << 16, q->iova)) != 0)
		goto fail;
	q->sq_created = true;
	*out = q;
	return 0;
fail:
	nkv_devq_destroy(q);
	return rc;
fail_noqid:
	free(q->slots);
	free(q);
	return rc;
}

struct nkv_dev_qp *nkv_devq_qp(struct nkv_devq *q)
{
	return &q->qp;
}

void *nkv_devq_mem(struct nkv_devq *q, size_t *len)
{
	if (len)
		*len = q->mem_len;
	return q->mem;
}

void *nkv_ctrl_regs(struct nkv_ctrl *ctrl, size_t *len)
{
	if (!ctrl || !ctrl->shm)
		return NULL;
	if (len)
		*len = ctrl->shm->reg_size;
	return ctrl->shm->regs;
}

uint32_t nkv_devq_prp_pages(uint32_t len)
{
	return nkv_prp_list_pages(0, len);
}

int nkv_devq_prp(struct nkv_ctrl *ctrl, const void *buf, uint32_t len, void *list, uint32_t list_pages,
		 uint64_t *prp1, uint64_t *prp2)
{
	if (!ctrl || !ctrl->shm)
		return -EINVAL;
	uint64_t iova = nkv_shm_buf_iova(ctrl, buf, len ? len : 1);
	uint64_t liova = list && list_pages ? nkv_shm_buf_iova(ctrl, list, list_pages * PG) : 0;
	if (!iova || (list && list_pages && !liova))
		return -EINVAL;
	return nkv_prp_build(iova, len, liova, list, list_pages, prp1, prp2);
}

int nkv_devq_prp_iova(struct nkv_ctrl *ctrl, uint64_t iova, uint32_t len, void *list, uint32_t list_pages,
		      uint64_t *prp1, uint64_t *prp2)
{
	if (!ctrl || !ctrl->shm || !iova)
		return -EINVAL;
	uint64_t liova = list && list_pages ? nkv_shm_buf_iova(ctrl, list, list_pages * PG) : 0;
	if (list && list_pages && !liova)
		return -EINVAL;
	return nkv_prp_build(iova, len, liova, list, list_pages, prp1, prp2);
}
