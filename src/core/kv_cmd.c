/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv_cmd.c - the Key Value I/O command set (CSI 01h): parse each SQE into a kvdev I/O or a status,
 * execute it on the namespace's backend, and map the result to a CQE. Vendor opcodes 80h-EFh are
 * the namespace's Exec allowlist (exec.c); F0h-FFh are rados-nkv's built-in vendor commands, served
 * on every KV namespace from the same table as the standard ones (Store TTL, F1h, and Retrieve
 * Range, F2h). On a cache namespace (cache.c) Stores carry a TTL and pin, Retrieves and Exists check
 * expiry, and completed Stores and Deletes are accounted.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "core.h"

#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)
#define OK 0

struct kv_op {
	enum nkv_kvio_op io;
	uint8_t min_klen;  /* List accepts KL 0: "from the first key" */
	bool has_key;      /* 0 means the table slot is empty */
	bool modifies;     /* refused on read-only namespaces */
};

static const struct kv_op g_kv_ops[256] = {
	[NKV_KV_STORE] = {NKV_IO_STORE, 1, true, true},
	[NKV_KV_RETRIEVE] = {NKV_IO_RETRIEVE, 1, true, false},
	[NKV_KV_LIST] = {NKV_IO_LIST, 0, true, false},
	[NKV_KV_DELETE] = {NKV_IO_DELETE, 1, true, true},
	[NKV_KV_EXIST] = {NKV_IO_EXIST, 1, true, false},
	[NKV_VS_RETRIEVE_RANGE] = {NKV_IO_RETRIEVE, 1, true, false},
	[NKV_VS_STORE_TTL] = {NKV_IO_STORE, 1, true, true},
};

/* 80h-EFh: the namespace's Exec allowlist decides; F0h-FFh are built in (g_kv_ops). */
static bool is_exec_opc(uint8_t opc)
{
	return opc >= NKV_EXEC_OPC_FIRST && opc < NKV_VS_OPC_FIRST;
}

static struct nkv_req *req_of(struct nkv_kvio *io)
{
	return (struct nkv_req *)((char *)io - offsetof(struct nkv_req, io));
}

/*
 * A successful Retrieve (Range) moves exactly min(value size - offset, HBS) bytes, whichever
 * backend served it: the host learns the value's size from DW0 and, over a PCIe-style transport,
 * derives the bytes moved from it. A value that does not fit the buffer this controller moves
 * (MDTS) is 85h, one that does not fit DW0 too; a backend that read less than the value holds is
 * 88h. Either way the host never takes a prefix for the value.
 */
static int retrieve_check(struct nkv_req *req)
{
	struct nkv_kvio *io = &req->io;
	uint32_t hbs = nkv_get32(&req->cmd.cdw10), want = nkv_range_xfer(io->value_size, io->offset, hbs);

	if (io->value_size > UINT32_MAX || want > req->length) {
		NKV_DEBUG("nsid %u: value of %llu bytes, %u asked from offset %llu, %u per command: 85h",
			  req->ns->nsid, (unsigned long long)io->value_size, hbs, (unsigned long long)io->offset,
			  req->length);
		return -EFBIG;
	}
	if (io->xfer != want) {
		NKV_WARN("nsid %u: backend read %u bytes of a value of %llu, %u expected: 88h", req->ns->nsid,
			 io->xfer, (unsigned long long)io->value_size, want);
		return -EIO;
	}
	return 0;
}

static void kv_done(struct nkv_kvio *io)
{
	struct nkv_req *req = req_of(io);
	struct nkv_ctrlr *c = req->qp->ctrlr;
	int rc = io->rc;

	if (io->op == NKV_IO_EXEC) {
		nkv_status st = nkv_exec_status(req, rc);
		req->xfer = st == 0 ? io->xfer : 0;
		nkv_req_complete(req, st);
		return;
	}
	nkv_cache_account(req);
	/* Feature 20h: with EDNEK clear, deleting an absent key succeeds. */
	if (io->op == NKV_IO_DELETE && rc == -ENOENT && !(c->kv_config & NKV_KV_CONFIG_EDNEK))
		rc = 0;
	if (rc == 0 && io->op == NKV_IO_RETRIEVE)
		rc = retrieve_check(req);
	if (rc == 0) {
		if (io->op == NKV_IO_RETRIEVE) {
			nkv_put32(&req->cpl.dw0, (uint32_t)io->value_size);
			atomic_fetch_add_explicit(&c->host_reads, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&c->bytes_read, io->xfer, memory_order_relaxed);
		} else if (io->op == NKV_IO_STORE) {
			/* Store TTL: DW0 = the TTL the entry got (max_ttl may have cut the one asked for). */
			if (req->cmd.opc == NKV_VS_STORE_TTL)
				nkv_put32(&req->cpl.dw0, nkv_cache_ttl_applied(req));
			atomic_fetch_add_explicit(&c->host_writes, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&c->bytes_written, io->len, memory_order_relaxed);
		}
		req->xfer = io->xfer;
	} else {
		req->xfer = 0; /* never a partial value */
		if (rc == -EIO)
			atomic_fetch_add_explicit(&c->media_errors, 1, memory_order_relaxed);
		NKV_DEBUG("nsid %u op %d: %s", req->ns->nsid, io->op, strerror(-rc));
	}
	nkv_req_complete(req, nkv_errno_to_status(rc));
}

/* A backend reading a large value in pieces reports a final prefix: the transport may send it. */
static void kv_progress(struct nkv_kvio *io)
{
	struct nkv_req *req = req_of(io);
	req->qp->ops->data_ready(req, atomic_load_explicit(&io->ready, memory_order_acquire));
}

static void exec_kv(struct nkv_req *req)
{
	struct nkv_target *t = req->qp->ctrlr->ss->tgt;

	req->io.buf = req->data; /* the transport places the buffer after parse */
	req->io.len = req->length;
	req->io.msgq = req->qp->msgq;
	req->io.done = kv_done;
	req->io.progress = req->io.op == NKV_IO_RETRIEVE && req->qp->ops->data_ready ? kv_progress : NULL;
	atomic_store_explicit(&req->io.ready, 0, memory_order_relaxed);
	t->be->submit(req->ns->kvns, &req->io);
}

static void exec_flush(struct nkv_req *req)
{
	nkv_req_complete(req, OK); /* no volatile cache: every acknowledged Store is in RADOS */
}

nkv_status nkv_kv_parse(struct nkv_req *req)
{
	const struct nkv_sqe *cmd = &req->cmd;
	const struct kv_op *op = &g_kv_ops[cmd->opc];
	struct nkv_ctrlr *c = req->qp->ctrlr;
	struct nkv_kvio *io = &req->io;
	uint32_t size = nkv_get32(&cmd->cdw10);
	unsigned klen = nkv_sqe_klen(cmd), opts = nkv_sqe_kv_opts(cmd);

	io->copied_in = io->copied_out = 0; /* before any return: completion counts them (request.c) */

	if (!op->has_key && cmd->opc != NKV_KV_FLUSH && !is_exec_opc(cmd->opc))
		return ST(GENERIC, INVALID_OPCODE);
	/* Held until nkv_req_complete (or nkv_req_drop): a live removal waits for it. */
	if (!(req->ns = nkv_ns_get(c->ss, nkv_get32(&cmd->nsid))))
		return ST(GENERIC, INVALID_NS);
	if (NKV_CC_CSS(c->cc) != NKV_CC_CSS_IOCS) /* KV is enabled only through the IOCS profile */
		return ST(GENERIC, INVALID_NS);
	/* A path the operator made inaccessible (a gateway drained for maintenance): a path error with
	 * DNR clear, so the host's multipath retries the command on another gateway. */
	if (atomic_load_explicit(&c->ss->tgt->ana_state[req->ns->anagrpid], memory_order_relaxed) ==
	    NKV_ANA_INACCESSIBLE)
		return nkv_status_make(NKV_SCT_PATH, NKV_SC_ANA_INACCESSIBLE, 0);
	if (cmd->opc == NKV_KV_FLUSH) {
		req->execute = exec_flush;
		return OK;
	}
	if (is_exec_opc(cmd->opc)) {
		nkv_status st = nkv_exec_parse(req);
		req->io.done = kv_done;
		return st;
	}
	if (klen < op->min_klen || klen > NKV_KEY_MAX)
		return ST(GENERIC, KV_INVALID_KEY_SIZE);
	if (op->modifies && req->ns->read_only)
		return ST(GENERIC, NS_WRITE_PROTECTED);

	memset(io, 0, offsetof(struct nkv_kvio, msgq));
	io->op = op->io;
	io->key.len = (uint8_t)klen;
	nkv_sqe_get_key(cmd, io->key.b);
	memset(io->key.b + klen, 0, NKV_KEY_MAX - klen); /* bytes past KL are the host's don't-care */
	switch (op->io) {
	case NKV_IO_STORE:
		if ((opts & NKV_STORE_MUST_EXIST) && (opts & NKV_STORE_MUST_NOT_EXIST))
			return ST(GENERIC, INVALID_FIELD);
		if (size > req->ns->max_value)
			return ST(GENERIC, KV_INVALID_VALUE_SIZE);
		io->flags = (opts & NKV_STORE_MUST_EXIST ? NKV_IO_MUST_EXIST : 0) |
			    (opts & NKV_STORE_MUST_NOT_EXIST ? NKV_IO_MUST_NOT_EXIST : 0);
		req->length = size;
		/* A Store TTL that only names its block (default TTL, no pin, NKV_TTL_HASH) asks nothing a
		 * namespace without a cache cannot do: a plain Store there (the hash serves cache events
		 * only), so a host may send the engine's hashes whatever the namespace. */
		bool hash_only = cmd->opc == NKV_VS_STORE_TTL && nkv_get32(&cmd->cdw12) == NKV_TTL_DEFAULT &&
				 nkv_get32(&cmd->cdw13) == NKV_TTL_HASH;
		if ((cmd->opc == NKV_VS_STORE_TTL && !(hash_only && !req->ns->cache)) || req->ns->cache) {
			nkv_status st = cmd->opc == NKV_VS_STORE_TTL
						? nkv_cache_parse_store(req, nkv_get32(&cmd->cdw12), nkv_get32(&cmd->cdw13))
						: nkv_cache_parse_store(req, NKV_TTL_DEFAULT, 0);
			if (st)
				return st;
		}
		break;
	case NKV_IO_RETRIEVE:
		if (cmd->opc == NKV_VS_RETRIEVE_RANGE) {
			if (opts) /* CDW11 bits 15:8 are reserved: Retrieve's options have no meaning here */
				return ST(GENERIC, INVALID_FIELD);
			io->offset = (uint64_t)nkv_get32(&cmd->cdw13) << 32 | nkv_get32(&cmd->cdw12);
		}
		/* The namespace's max value limits Stores only: a larger value is there when another
		 * NSID on the same RADOS namespace, an earlier limit, another gateway or `rados put`
		 * wrote it. So the buffer is what one command may move (MDTS), not max_value; a value
		 * that needs more than that fails in kv_done, never as a prefix. */
		req->length = size < nkv_ctrlr_max_xfer(c) ? size : nkv_ctrlr_max_xfer(c);
		io->exact = size > req->length;
		nkv_cache_parse_read(req);
		break;
	case NKV_IO_LIST:
		if (size < NKV_LIST_HDR) /* no room even for the key count */
			return ST(GENERIC, INVALID_FIELD);
		if (size > nkv_ctrlr_max_xfer(c))
			return ST(GENERIC, INVALID_FIELD);
		req->length = size;
		break;
	case NKV_IO_EXIST:
		nkv_cache_parse_read(req);
		break;
	case NKV_IO_DELETE:
		io->cache = req->ns->cache != NULL; /* the backend reports what it removed (accounting) */
		break;
	default:
		break;
	}
	req->execute = exec_kv;
	return OK;
}
