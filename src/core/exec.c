/*
 * exec.c - vendor Exec commands (KV command set, opcodes 80h-EFh): each namespace allowlists opcodes
 * that run a RADOS class method on the object a key names (wire format: "vendor Exec" in nkv_spec.h).
 * The allowlist is an immutable table published with a release store: a command takes the entry it
 * was parsed with, and a replaced table is only retired (freed with the namespace), so a reload never
 * pulls an entry from under a command in flight and the I/O path takes no lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "core.h"

#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)
#define DEFAULT_MAX_INPUT (64u << 10)

static void table_free(struct nkv_exec_table *t)
{
	for (unsigned i = 0; t && i < t->n; i++)
		free(t->e[i].input);
	free(t);
}

static bool name_ok(const char *s)
{
	return s && *s && strlen(s) < sizeof(((struct nkv_exec_entry *)0)->cls);
}

/* Validate and copy @rules. @return the table (NULL for n == 0 with *rc 0) or NULL with *rc < 0. */
static struct nkv_exec_table *table_build(const struct nkv_exec_rule *rules, unsigned n, int *rc)
{
	struct nkv_exec_table *t;

	*rc = 0;
	if (n == 0)
		return NULL;
	if (n > 128 || !(t = calloc(1, sizeof(*t) + n * sizeof(t->e[0])))) {
		*rc = n > 128 ? -EINVAL : -ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct nkv_exec_rule *r = &rules[i];
		struct nkv_exec_entry *e = &t->e[i];
		unsigned dir = nkv_opc_xfer(r->opcode);
		const char *why = r->opcode < NKV_EXEC_OPC_FIRST	 ? "is not a vendor opcode (80h-EFh)"
				  : r->opcode >= NKV_VS_OPC_FIRST ? "is reserved for rados-nkv's built-in vendor "
								    "commands (F0h-FFh): use 80h-EFh"
				  : dir == NKV_XFER_BIDI		 ? "has data direction 11b (bidirectional)"
				  : t->by_opc[r->opcode - NKV_EXEC_OPC_FIRST] ? "is allowlisted twice"
				  : !name_ok(r->cls) || !name_ok(r->method) ? "needs a class and a method of 1-63 bytes"
				  : r->write && dir == NKV_XFER_C2H ? "runs a write method, which returns no output: use "
								      "direction 00b or 01b"
				  : r->create && !r->write ? "may create, but RADOS runs no read method on an absent "
							     "object (create is for write methods)"
							   : NULL;
		if (why) {
			NKV_ERR("exec: opcode %02xh %s", r->opcode, why);
			t->n = i;
			table_free(t);
			*rc = -EINVAL;
			return NULL;
		}
		e->opc = r->opcode;
		e->write = r->write;
		e->create = r->create;
		strcpy(e->cls, r->cls);
		strcpy(e->method, r->method);
		e->max_input = r->max_input ? r->max_input : DEFAULT_MAX_INPUT;
		if (r->input_len && !(e->input = malloc(r->input_len))) {
			t->n = i;
			table_free(t);
			*rc = -ENOMEM;
			return NULL;
		}
		if (r->input_len)
			memcpy(e->input, r->input, r->input_len);
		e->input_len = r->input_len;
		t->by_opc[r->opcode - NKV_EXEC_OPC_FIRST] = e;
		t->n = i + 1;
	}
	return t;
}

/* One line per allowlisted opcode: what an operator needs to audit what hosts may run. */
static void log_table(const struct nkv_subsys *ss, uint32_t nsid, const struct nkv_exec_table *t)
{
	for (unsigned i = 0; t && i < t->n; i++)
		NKV_INFO("%s: nsid %u: opcode %02xh runs %s.%s (%s%s, bound input %u bytes)", ss->nqn, nsid, t->e[i].opc,
			 t->e[i].cls, t->e[i].method, t->e[i].write ? "write" : "read",
			 t->e[i].create ? ", may create" : "", t->e[i].input_len);
}

int nkv_exec_init(struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_exec_rule *rules, unsigned n)
{
	int rc;
	struct nkv_exec_table *t = table_build(rules, n, &rc);

	atomic_init(&ns->exec, t);
	log_table(ss, ns->nsid, t);
	return rc;
}

int nkv_ns_set_exec(struct nkv_subsys *ss, uint32_t nsid, const struct nkv_exec_rule *rules, unsigned n)
{
	/* The thread that changes the configuration: the namespace cannot go meanwhile. */
	struct nkv_ns *ns = nsid && nsid <= NKV_MAX_NSID ? atomic_load(&ss->ns[nsid]) : NULL;
	struct nkv_exec_table *t, *old;
	int rc;

	if (!ns)
		return -ENOENT;
	t = table_build(rules, n, &rc);
	if (rc < 0)
		return rc;
	/* Pairs with the acquire load in nkv_exec_parse(): a command sees a complete table. */
	old = atomic_exchange_explicit(&ns->exec, t, memory_order_acq_rel);
	if (old) { /* a command parsed a moment ago may still point into it */
		pthread_mutex_lock(&ss->tgt->lock);
		old->retired_next = NULL;
		struct nkv_exec_table **p = &ns->exec_retired;
		while (*p)
			p = &(*p)->retired_next;
		*p = old;
		pthread_mutex_unlock(&ss->tgt->lock);
	}
	NKV_INFO("%s: nsid %u: Exec allowlist replaced: %u opcode(s)", ss->nqn, nsid, n);
	log_table(ss, nsid, t);
	return 0;
}

void nkv_exec_free(struct nkv_ns *ns)
{
	table_free(atomic_exchange(&ns->exec, NULL)); /* a reused NSID slot may be freed again later */
	while (ns->exec_retired) {
		struct nkv_exec_table *t = ns->exec_retired;
		ns->exec_retired = t->retired_next;
		table_free(t);
	}
}

static void exec_run(struct nkv_req *req)
{
	struct nkv_kvio *io = &req->io;
	struct nkv_target *t = req->qp->ctrlr->ss->tgt;

	/* The transport placed the data buffer after parse: the host's input, or room for the output. */
	if (nkv_opc_xfer(req->cmd.opc) == NKV_XFER_H2C) {
		io->in2 = req->data;
		io->in2_len = req->length;
	} else if (nkv_opc_xfer(req->cmd.opc) == NKV_XFER_C2H) {
		io->out = req->data;
		io->out_len = req->length;
	}
	io->msgq = req->qp->msgq;
	io->progress = NULL; /* an Exec's output goes with its completion */
	t->be->submit(req->ns->kvns, io);
}

nkv_status nkv_exec_parse(struct nkv_req *req)
{
	const struct nkv_sqe *cmd = &req->cmd;
	struct nkv_ctrlr *c = req->qp->ctrlr;
	struct nkv_kvio *io = &req->io;
	/* Pairs with the exchange in nkv_ns_set_exec(). */
	struct nkv_exec_table *t = atomic_load_explicit(&req->ns->exec, memory_order_acquire);
	const struct nkv_exec_entry *e = t ? t->by_opc[cmd->opc - NKV_EXEC_OPC_FIRST] : NULL;
	unsigned klen = nkv_sqe_klen(cmd), dir = nkv_opc_xfer(cmd->opc), inl = nkv_sqe_exec_inline_len(cmd);
	uint32_t size = nkv_get32(&cmd->cdw10);

	if (!e)
		return ST(GENERIC, INVALID_OPCODE); /* not allowlisted on this namespace */
	if (klen < 1 || klen > NKV_KEY_MAX)
		return ST(GENERIC, KV_INVALID_KEY_SIZE);
	if (e->write && req->ns->read_only)
		return ST(GENERIC, NS_WRITE_PROTECTED);
	if ((nkv_get32(&cmd->cdw11) >> 12) & 0xfu)
		return ST(GENERIC, INVALID_FIELD); /* reserved bits */
	if (inl > NKV_EXEC_INLINE_MAX || (inl && dir == NKV_XFER_H2C))
		return ST(GENERIC, INVALID_FIELD);
	if (dir == NKV_XFER_H2C && size > e->max_input)
		return ST(GENERIC, KV_INVALID_VALUE_SIZE);
	if (dir == NKV_XFER_C2H && size > nkv_ctrlr_max_xfer(c))
		return ST(GENERIC, INVALID_FIELD);

	memset(io, 0, offsetof(struct nkv_kvio, msgq));
	io->op = NKV_IO_EXEC;
	io->key.len = (uint8_t)klen;
	nkv_sqe_get_key(cmd, io->key.b);
	memset(io->key.b + klen, 0, NKV_KEY_MAX - klen);
	io->flags = e->create ? 0 : NKV_IO_MUST_EXIST;
	io->cls = e->cls;
	io->method = e->method;
	io->exec_write = e->write;
	io->in1 = e->input;
	io->in1_len = e->input_len;
	memcpy(io->inl, &cmd->cdw12, NKV_EXEC_INLINE_MAX);
	io->in2 = io->inl;
	io->in2_len = inl;
	req->length = dir == NKV_XFER_NONE ? 0 : size;
	req->execute = exec_run;
	return 0;
}

nkv_status nkv_exec_status(struct nkv_req *req, int rc)
{
	switch (rc) {
	case 0:
		nkv_put32(&req->cpl.dw0, (uint32_t)req->io.value_size);
		return 0;
	case -EOPNOTSUPP: /* the OSD has no such class, or the class no such method */
	case -ENOSYS:
		return ST(GENERIC, EXEC_UNAVAILABLE);
	/* What the errno table already says precisely (absent key, cluster not ready, sizes, space). */
	case -ENOENT:
	case -EEXIST:
	case -ETIMEDOUT:
	case -ENOTCONN:
	case -ECONNREFUSED:
	case -ESHUTDOWN:
	case -EAGAIN:
	case -ENOMEM:
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
	case -E2BIG:
	case -EMSGSIZE:
	case -EROFS:
		return nkv_errno_to_status(rc);
	default: /* the method's own error (-EINVAL, -EPERM, -ECANCELED, -ERANGE...): DW0 says which */
		nkv_put32(&req->cpl.dw0, (uint32_t)-rc);
		return ST(GENERIC, EXEC_FAILED);
	}
}

void nkv_exec_effects(struct nkv_subsys *ss, uint32_t iocs[256])
{
	for (uint32_t nsid = 1; nsid <= NKV_MAX_NSID; nsid++) {
		struct nkv_ns *ns = nkv_subsys_has_ns(ss, nsid) ? nkv_ns_get(ss, nsid) : NULL;
		struct nkv_exec_table *t = ns ? atomic_load_explicit(&ns->exec, memory_order_acquire) : NULL;
		for (unsigned i = 0; t && i < t->n; i++)
			nkv_put32(&iocs[t->e[i].opc], NKV_EFFECTS_CSUPP | (t->e[i].write ? NKV_EFFECTS_LBCC : 0));
		if (ns)
			nkv_ns_put(ns);
	}
}
