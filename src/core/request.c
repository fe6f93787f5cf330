/* SPDX-License-Identifier: Apache-2.0 */
/* request.c - request lifecycle: parse, then execute, then one completion exit. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "core.h"

/* What a queue that must still authenticate may run: the authentication commands and Disconnect. */
static bool auth_exempt(const struct nkv_sqe *cmd)
{
	uint8_t fctype = ((const struct nkv_fabrics_cmd *)cmd)->fctype;
	return cmd->opc == NKV_ADM_FABRICS &&
	       (fctype == NKV_FCTYPE_AUTH_SEND || fctype == NKV_FCTYPE_AUTH_RECV || fctype == NKV_FCTYPE_DISCONNECT);
}

nkv_status nkv_req_parse(struct nkv_req *req)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;
	nkv_status st;

	/* Latency runs from here: a command that waits for buffers after its parse (NVMe/TCP) counts
	 * that wait; one the transport parses again later (shm, out of bounce memory) starts over. */
	req->start_ns = nkv_now_ns();
	memset(&req->cpl, 0, sizeof(req->cpl));
	req->length = 0;
	req->xfer = 0;
	req->execute = NULL;
	req->ns = NULL;
	req->exec_tbl = NULL;
	req->exec_in = NULL;
	if ((nkv_auth_pending(req->qp) || req->qp->auth_fatal) && !auth_exempt(&req->cmd))
		st = nkv_status_make(NKV_SCT_CMD, NKV_SC_AUTH_REQUIRED, 1); /* 8.13: authenticate first */
	else if (req->cmd.opc == NKV_ADM_FABRICS)
		st = nkv_fabrics_parse(req); /* allowed before CC.EN: that is how EN gets set */
	else if (!nkv_ctrlr_ready(c))
		st = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_CMD_SEQUENCE_ERROR, 1);
	else if (req->cmd.flags & NKV_SQE_FUSE_MASK)
		st = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD, 1); /* no fused operations */
	else if (c->opts.fabrics && (req->cmd.flags & NKV_SQE_PSDT_MASK) != NKV_SQE_PSDT_SGL)
		st = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD, 1); /* fabrics use SGLs only */
	else
		st = req->qp->qid == 0 ? nkv_admin_parse(req) : nkv_kv_parse(req);
	/* The buffer must hold what the command moves; a larger one is used only up to that. */
	if (st == 0 && req->length > req->data_len)
		st = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_DATA_SGL_LENGTH_INVALID, 1);
	if (st != 0)
		NKV_DEBUG("qid %u cid %u opc %02x: %s", req->qp->qid, req->cmd.cid, req->cmd.opc,
			  nkv_status_str(st));
	return st;
}

void nkv_req_exec(struct nkv_req *req)
{
	nkv_status st = nkv_req_parse(req);

	if (st != 0)
		nkv_req_complete(req, st);
	else
		req->execute(req);
}

void nkv_req_drop(struct nkv_req *req)
{
	if (req->ns) {
		nkv_cache_unreserve(req);
		nkv_exec_release(req); /* before the namespace: its allowlist goes with it */
		nkv_ns_put(req->ns);
		req->ns = NULL;
	}
}

static const char *const g_xport_names[NKV_XPORT_COUNT] = {"tcp", "shm", "loop"};

const char *nkv_xport_name(enum nkv_xport x)
{
	return (unsigned)x < NKV_XPORT_COUNT ? g_xport_names[x] : "loop";
}

int nkv_target_copy_metrics(struct nkv_target *t, struct nkv_copy_metrics *out, unsigned max)
{
	for (unsigned x = 0; x < NKV_XPORT_COUNT && x < max; x++) {
		snprintf(out[x].transport, sizeof(out[x].transport), "%s", g_xport_names[x]);
		for (int d = 0; d < NKV_XDIR_COUNT; d++) {
			out[x].data[d] = atomic_load_explicit(&t->copies.data[x][d], memory_order_relaxed);
			out[x].copied[d] = atomic_load_explicit(&t->copies.copied[x][d], memory_order_relaxed);
		}
	}
	return NKV_XPORT_COUNT;
}

/*
 * A namespace command's data and the backend's copies, in the copy counters. The data counts when
 * the command succeeded, in the direction its opcode gives (bits 1:0: 01b to the gateway, 10b to
 * the host; Exec's 11b and 00b move data as its rule says and count as both or neither); the copies
 * count whatever the outcome, as they were made.
 */
static void count_data(struct nkv_req *req, nkv_status st)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;
	struct nkv_copy_stats *cs = &c->ss->tgt->copies;
	unsigned dir = req->cmd.opc & 3;

	if (req->qp->qid == 0)
		return;
	nkv_copy_count(c->ss->tgt, c->xport, NKV_XDIR_H2C, req->io.copied_in);
	nkv_copy_count(c->ss->tgt, c->xport, NKV_XDIR_C2H, req->io.copied_out);
	if (st != 0)
		return;
	if ((dir & 1) && req->length)
		atomic_fetch_add_explicit(&cs->data[c->xport][NKV_XDIR_H2C], req->length, memory_order_relaxed);
	if ((dir & 2) && req->xfer)
		atomic_fetch_add_explicit(&cs->data[c->xport][NKV_XDIR_C2H], req->xfer, memory_order_relaxed);
}

void nkv_req_complete(struct nkv_req *req, nkv_status st)
{
	if (req->ns) {
		count_data(req, st);
		nkv_ns_count(req->ns, req, st);
		nkv_req_drop(req);
	}
	req->cpl.cid = req->cmd.cid;
	nkv_put16(&req->cpl.sqid, req->qp->qid);
	nkv_put16(&req->cpl.status, (uint16_t)(st << 1)); /* the transport owns the phase bit */
	req->qp->ops->complete(req);
}

void nkv_req_copy_out(struct nkv_req *req, const void *src, uint32_t len)
{
	uint32_t n = len < req->length ? len : req->length;

	memcpy(req->data, src, n);
	if (n < req->length)
		memset((uint8_t *)req->data + n, 0, req->length - n);
	req->xfer = req->length;
}
