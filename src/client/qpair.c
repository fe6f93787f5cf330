/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qpair.c - the transport-independent queue pair API of libnkv: nkv_submit / flush / poll dispatch
 * through the queue pair's transport ops, synchronous execution (nkv_exec) on top of them, and the
 * registered-buffer helpers.
 */
#include <errno.h>
#include <string.h>

#include "client/internal.h"
#include "common/log.h"

int nkv_submit(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, nkv_cb cb, void *arg)
{
	if (!qp)
		return -EINVAL;
	return qp->ops->submit(qp, sqe, buf, len, cb, arg, 0);
}

int nkv_qpair_flush(struct nkv_qpair *qp)
{
	if (!qp)
		return -EINVAL;
	return qp->ops->flush(qp);
}

int nkv_qpair_poll(struct nkv_qpair *qp, int timeout_ms)
{
	if (!qp)
		return -EINVAL;
	return qp->ops->poll(qp, timeout_ms);
}

uint16_t nkv_qpair_depth(const struct nkv_qpair *qp)
{
	return qp->depth;
}

unsigned nkv_qpair_outstanding(const struct nkv_qpair *qp)
{
	return qp->outstanding;
}

void *nkv_buf_alloc(struct nkv_ctrl *ctrl, size_t len)
{
	if (!ctrl)
		return NULL;
	return ctrl->ops->buf_alloc(ctrl, len);
}

void nkv_buf_free(struct nkv_ctrl *ctrl, void *p)
{
	if (ctrl && p)
		ctrl->ops->buf_free(ctrl, p);
}

int nkv_buf_register(struct nkv_ctrl *ctrl, void *addr, size_t len)
{
	if (!ctrl || !addr || !len)
		return -EINVAL;
	return ctrl->ops->buf_register ? ctrl->ops->buf_register(ctrl, addr, len) : 0;
}

int nkv_buf_unregister(struct nkv_ctrl *ctrl, void *addr)
{
	if (!ctrl || !addr)
		return -EINVAL;
	return ctrl->ops->buf_unregister ? ctrl->ops->buf_unregister(ctrl, addr) : 0;
}

/* ---- synchronous execution --------------------------------------------------------------------- */

struct waiter {
	bool done;
	struct nkv_cpl cpl;
};

static void waiter_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct waiter *w = arg;
	w->cpl = *cpl;
	w->done = true;
}

int nkv_exec_flags(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cpl *cpl,
		   unsigned flags)
{
	struct waiter w = {0};
	if (!qp)
		return -EINVAL;
	int rc = qp->ops->submit(qp, sqe, buf, len, waiter_cb, &w, flags);
	if (rc == -EAGAIN) {
		/* All slots busy with async commands: make room first, within the timeout. */
		int64_t deadline = nkv_client_now_ms() + qp->timeout_ms;
		while (rc == -EAGAIN && nkv_client_now_ms() < deadline) {
			int p = nkv_qpair_poll(qp, (int)(deadline - nkv_client_now_ms()));
			if (p < 0)
				return p;
			rc = qp->ops->submit(qp, sqe, buf, len, waiter_cb, &w, flags);
		}
	}
	if (rc == -ENOTCONN && qp->err)
		return qp->err;
	if (rc)
		return rc;
	int64_t deadline = nkv_client_now_ms() + qp->timeout_ms;
	while (!w.done) {
		int64_t left = deadline - nkv_client_now_ms();
		if (left <= 0) {
			/*
			 * The command may still run on the target and its data would land in @buf after we
			 * return: fail the queue so nothing can touch the caller's buffer any more.
			 */
			NKV_WARN("qid %u: command %#x timed out after %d ms; closing the queue", qp->qid,
				 sqe->opc, qp->timeout_ms);
			qp->ops->fail(qp, -ETIMEDOUT);
			break;
		}
		nkv_qpair_poll(qp, (int)left);
	}
	if (cpl)
		*cpl = w.cpl;
	if (w.cpl.status == NKV_STATUS_HOST_PATH && qp->err)
		return qp->err;
	return nkv_cpl_errno(&w.cpl); /* not just the status: Method Failed's errno is in DW0 */
}

int nkv_exec(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cpl *cpl)
{
	return nkv_exec_flags(qp, sqe, buf, len, cpl, 0);
}
