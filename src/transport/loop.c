/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - in-process transport: 64-byte SQEs and flat data buffers in, 16-byte CQEs out. It drives
 * the controller core exactly as the network and shared-memory transports do (embedded requests,
 * one completion op, backend completions handed back through the queue pair's message queue) and
 * is the main test harness.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "core/core.h"

#define LOOP_MQES 4095          /* 0's based: 4096-entry queues */
#define LOOP_MAX_IO_QUEUES 64
#define EXEC_TIMEOUT_MS (5 * 60 * 1000)
#define DRAIN_TIMEOUT_MS (2 * 60 * 1000)

struct loop_req {
	struct nkv_req req; /* first: the core's view */
	nkv_loop_cb cb;
	void *arg;
};

struct nkv_loop_qp {
	struct nkv_qpair qp;
	struct nkv_msgq msgq;
	struct nkv_loop_ctrlr *owner;
	struct loop_req *reqs;
	uint16_t *free_ids; /* stack of free slots; a slot index is the CID */
	uint16_t nfree;
};

struct nkv_loop_ctrlr {
	struct nkv_ctrlr *ctrlr;
	struct nkv_loop_qp *admin;
	struct nkv_loop_qp *io[LOOP_MAX_IO_QUEUES + 1];
};

static void loop_complete(struct nkv_req *req)
{
	struct loop_req *lr = (struct loop_req *)req;
	struct nkv_loop_qp *qp = (struct nkv_loop_qp *)req->qp;
	struct nkv_cqe cqe = req->cpl;
	uint32_t xfer = req->xfer;
	nkv_loop_cb cb = lr->cb;
	void *arg = lr->arg;

	/* The CQE a PCIe or TCP host would see: phase 1, SQ head of a queue that never backs up. */
	nkv_put16(&cqe.status, (uint16_t)(nkv_get16(&cqe.status) | 1));
	qp->free_ids[qp->nfree++] = (uint16_t)(lr - qp->reqs);
	cb(arg, &cqe, xfer);
}

static const struct nkv_qpair_ops g_loop_ops = {.complete = loop_complete};

static int qp_new(struct nkv_loop_ctrlr *c, uint16_t qid, uint16_t depth, struct nkv_loop_qp **out)
{
	struct nkv_loop_qp *qp = calloc(1, sizeof(*qp));
	int rc;

	if (!qp)
		return -ENOMEM;
	qp->reqs = calloc(depth, sizeof(*qp->reqs));
	qp->free_ids = calloc(depth, sizeof(*qp->free_ids));
	rc = qp->reqs && qp->free_ids ? nkv_msgq_init(&qp->msgq) : -ENOMEM;
	if (rc < 0) {
		free(qp->reqs);
		free(qp->free_ids);
		free(qp);
		return rc;
	}
	qp->owner = c;
	qp->qp = (struct nkv_qpair){.ctrlr = c->ctrlr, .qid = qid, .size = depth, .ops = &g_loop_ops,
				    .msgq = &qp->msgq};
	for (uint16_t i = 0; i < depth; i++) {
		qp->reqs[i].req.qp = &qp->qp;
		qp->free_ids[qp->nfree++] = (uint16_t)(depth - 1 - i);
	}
	*out = qp;
	return 0;
}

static void qp_free(struct nkv_loop_qp *qp)
{
	nkv_msgq_fini(&qp->msgq);
	free(qp->reqs);
	free(qp->free_ids);
	free(qp);
}

/* Run completions until nothing is outstanding, bounded; held AERs do not count. */
static void drain(struct nkv_loop_qp *qp, unsigned keep)
{
	uint64_t deadline = nkv_now_ms() + DRAIN_TIMEOUT_MS;

	while (nkv_loop_qp_outstanding(qp) > keep && nkv_now_ms() < deadline)
		nkv_loop_qp_poll(qp, 100);
	if (nkv_loop_qp_outstanding(qp) > keep)
		NKV_ERR("loop: qid %u: %u commands still outstanding after %d s", qp->qp.qid,
			nkv_loop_qp_outstanding(qp) - keep, DRAIN_TIMEOUT_MS / 1000);
}

int nkv_loop_connect(struct nkv_target *tgt, const char *subnqn, const char *hostnqn,
		     struct nkv_loop_ctrlr **out)
{
	struct nkv_subsys *ss = nkv_target_get_subsys(tgt, subnqn); /* held until the controller holds it */
	struct nkv_ctrlr_opts opts = {.mqes = LOOP_MQES, .max_io_queues = LOOP_MAX_IO_QUEUES, .trname = "loop"};
	struct nkv_loop_ctrlr *c;
	int rc;

	if (!ss)
		return -ENOENT;
	if (!(c = calloc(1, sizeof(*c)))) {
		nkv_subsys_put(ss);
		return -ENOMEM;
	}
	rc = nkv_ctrlr_create(ss, hostnqn, NULL, &opts, &c->ctrlr);
	nkv_subsys_put(ss);
	if (rc < 0 || (rc = qp_new(c, 0, 32, &c->admin)) < 0) {
		nkv_ctrlr_destroy(c->ctrlr);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void nkv_loop_disconnect(struct nkv_loop_ctrlr *c)
{
	if (!c)
		return;
	for (unsigned i = 1; i <= LOOP_MAX_IO_QUEUES; i++)
		if (c->io[i])
			nkv_loop_qp_destroy(c->io[i]);
	drain(c->admin, c->ctrlr->naer);
	nkv_ctrlr_destroy(c->ctrlr); /* completes the held AERs */
	nkv_msgq_poll(&c->admin->msgq, 0); /* notices already sent hold the controller: run them */
	qp_free(c->admin);
	free(c);
}

int nkv_loop_prop_get(struct nkv_loop_ctrlr *c, uint32_t ofs, unsigned size, uint64_t *val)
{
	return nkv_ctrlr_prop_get(c->ctrlr, ofs, size, val);
}

int nkv_loop_prop_set(struct nkv_loop_ctrlr *c, uint32_t ofs, unsigned size, uint64_t val)
{
	return nkv_ctrlr_prop_set(c->ctrlr, ofs, size, val);
}

int nkv_loop_enable(struct nkv_loop_ctrlr *c)
{
	uint64_t csts = 0;
	uint32_t cc = NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20);
	int rc = nkv_loop_prop_set(c, NKV_REG_CC, 4, cc);

	if (rc == 0)
		rc = nkv_loop_prop_get(c, NKV_REG_CSTS, 4, &csts);
	return rc < 0 ? rc : (csts & NKV_CSTS_RDY) ? 0 : -EIO;
}

struct nkv_loop_qp *nkv_loop_admin_qp(struct nkv_loop_ctrlr *c)
{
	return c->admin;
}

int nkv_loop_qp_create(struct nkv_loop_ctrlr *c, uint16_t qid, uint16_t depth, struct nkv_loop_qp **out)
{
	int rc;

	if (qid == 0 || qid > LOOP_MAX_IO_QUEUES || depth == 0 || depth > LOOP_MQES + 1u)
		return -EINVAL;
	if (!nkv_ctrlr_ready(c->ctrlr))
		return -EINVAL;
	if (c->io[qid])
		return -EEXIST;
	if ((rc = qp_new(c, qid, depth, &c->io[qid])) < 0)
		return rc;
	*out = c->io[qid];
	return 0;
}

void nkv_loop_qp_destroy(struct nkv_loop_qp *qp)
{
	if (!qp)
		return;
	drain(qp, 0);
	qp->owner->io[qp->qp.qid] = NULL;
	qp_free(qp);
}

int nkv_loop_qp_submit(struct nkv_loop_qp *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len,
		       nkv_loop_cb cb, void *arg)
{
	if (qp->nfree == 0)
		return -EBUSY;
	uint16_t id = qp->free_ids[--qp->nfree];
	struct loop_req *lr = &qp->reqs[id];

	lr->cb = cb;
	lr->arg = arg;
	lr->req.cmd = *sqe;
	lr->req.cmd.cid = id;
	lr->req.data = buf;
	lr->req.data_len = buf ? len : 0;
	nkv_req_exec(&lr->req);
	return 0;
}

int nkv_loop_qp_poll(struct nkv_loop_qp *qp, int timeout_ms)
{
	return nkv_msgq_poll(&qp->msgq, timeout_ms);
}

unsigned nkv_loop_qp_outstanding(const struct nkv_loop_qp *qp)
{
	return qp->qp.size - qp->nfree;
}

struct exec_ctx {
	bool done;
	struct nkv_cqe *cqe;
	uint32_t *xfer;
};

static void ignore_cb(void *arg, const struct nkv_cqe *cqe, uint32_t xfer)
{
	(void)arg;
	(void)cqe;
	(void)xfer;
}

static void exec_cb(void *arg, const struct nkv_cqe *cqe, uint32_t xfer)
{
	struct exec_ctx *x = arg;

	*x->cqe = *cqe;
	if (x->xfer)
		*x->xfer = xfer;
	x->done = true;
}

int nkv_loop_qp_exec(struct nkv_loop_qp *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len,
		     struct nkv_cqe *cqe, uint32_t *xfer)
{
	struct exec_ctx x = {.cqe = cqe, .xfer = xfer};
	uint64_t deadline = nkv_now_ms() + EXEC_TIMEOUT_MS;
	uint16_t id = qp->nfree ? qp->free_ids[qp->nfree - 1] : 0; /* the slot submit will take */
	int rc = nkv_loop_qp_submit(qp, sqe, buf, len, exec_cb, &x);

	while (rc == 0 && !x.done) {
		if (nkv_now_ms() >= deadline) {
			qp->reqs[id].cb = ignore_cb; /* x dies with this frame; the command may still end */
			return -ETIMEDOUT;
		}
		nkv_loop_qp_poll(qp, 1000);
	}
	return rc;
}
