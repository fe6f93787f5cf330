/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c - vendor Exec commands (KV command set, opcodes 80h-EFh): each namespace allowlists opcodes
 * that run a RADOS class method on the object a key names (wire format: "vendor Exec" in nkv_spec.h).
 * The allowlist is an immutable table, published atomically and counted: a command holds a
 * reference from parse to its end, so a reload never pulls an entry from under a command in flight,
 * a replaced table is freed when its last command ends, and the I/O path takes no lock.
 *
 * The host never chooses the code that runs: the rule names the method, and a rule for a class that
 * runs its input as code (cls_lua) binds the script; the target builds that input itself with the
 * host's bytes only in the handler's input field (nkv_exec_lua_input). Elsewhere the host's bytes
 * follow bound input only where the rule says so (append_host_input).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "core.h"

#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)
#define DEFAULT_MAX_INPUT (64u << 10)
#define SCRIPT_MAX (16u << 20)
#define HANDLER_MAX 255u
#define JSON_TAIL "\"}"

static void table_free(struct nkv_exec_table *t)
{
	for (unsigned i = 0; t && i < t->n; i++)
		free(t->e[i].input);
	free(t);
}

/* A command's reference. The reader count closes the window between loading the pointer and
 * counting: a replacement waits for it to drain before it drops the published reference. */
static struct nkv_exec_table *table_get(struct nkv_ns *ns)
{
	struct nkv_exec_table *t;

	atomic_fetch_add(&ns->exec_readers, 1);
	t = atomic_load(&ns->exec); /* seq_cst: ordered against the replacement's exchange */
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&ns->exec_readers, 1, memory_order_release);
	return t;
}

static void table_put(struct nkv_exec_table *t)
{
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		table_free(t);
}

/* Unpublish @ns's table for @t and drop the published reference of the old one. */
static void table_swap(struct nkv_ns *ns, struct nkv_exec_table *t)
{
	struct nkv_exec_table *old = atomic_exchange(&ns->exec, t);

	/* A reader that loaded @old has counted its reference once it left (seq_cst load). */
	while (atomic_load(&ns->exec_readers) != 0)
		sched_yield();
	table_put(old);
}

static bool name_ok(const char *s)
{
	return s && *s && strlen(s) < sizeof(((struct nkv_exec_entry *)0)->cls);
}

/* Classes that run their input as code: the host's bytes must never become part of it. */
static bool runs_code(const char *cls)
{
	return cls && strcmp(cls, "lua") == 0;
}

const char *nkv_exec_rule_problem(const struct nkv_exec_rule *r)
{
	unsigned dir = nkv_opc_xfer(r->opcode);
	bool lua = runs_code(r->cls);

	if (r->opcode < NKV_EXEC_OPC_FIRST)
		return "is not a vendor opcode (80h-EFh)";
	if (r->opcode >= NKV_VS_OPC_FIRST)
		return "is reserved for rados-nkv's built-in vendor commands (F0h-FFh): use 80h-EFh";
	if (dir == NKV_XFER_BIDI)
		return "has data direction 11b (bidirectional)";
	if (!name_ok(r->cls) || !name_ok(r->method))
		return "needs a class and a method of 1-63 bytes";
	if (r->write && dir == NKV_XFER_C2H)
		return "runs a write method, which returns no output: use direction 00b or 01b";
	if (r->create && !r->write)
		return "may create, but RADOS runs no read method on an absent object (create is for write methods)";
	if (!lua && (r->script || r->handler))
		return "binds a script or handler, which only class lua takes";
	if (lua && strcmp(r->method, "eval_json") && strcmp(r->method, "eval_bufferlist"))
		return "runs a lua method other than eval_json or eval_bufferlist";
	if (lua && r->input_len)
		return "binds raw input for lua, which runs its input as code: bind a script and a handler "
		       "instead (the host's input reaches the handler as its input)";
	if (lua && r->append_host_input)
		return "appends the host's input for lua, which runs its input as code (a script rule passes "
		       "the host's input to the handler as its input)";
	if (lua && (!r->script || !*r->script || !r->handler || !*r->handler))
		return "runs lua without a bound script and handler: the host would choose the code";
	if (lua && (strlen(r->script) > SCRIPT_MAX || strlen(r->handler) > HANDLER_MAX))
		return "has a script above 16 MiB or a handler name above 255 bytes";
	if (r->input_len && dir == NKV_XFER_H2C && !r->append_host_input)
		return "binds input and takes the host's (direction 01b): declare append_host_input to have "
		       "the host's input follow it";
	return NULL;
}

/* Escape @n bytes at @b as the inside of a JSON string (into @o, if not NULL); @return the length.
 * Quote, backslash and control bytes are escaped (\u00XX: cls_lua's parser turns it back into that
 * one byte); every other byte, 80h-FFh included, goes as it is, which cls_lua's parser keeps. */
static size_t json_escape(uint8_t *o, const uint8_t *b, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = b[i];
		if (c == '"' || c == '\\') {
			if (o) {
				o[k] = '\\';
				o[k + 1] = c;
			}
			k += 2;
		} else if (c < 0x20 || c == 0x7f) {
			if (o)
				memcpy(o + k, (const char[]){'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]}, 6);
			k += 6;
		} else {
			if (o)
				o[k] = c;
			k++;
		}
	}
	return k;
}

/* Bound part of a Lua script rule's input: what comes before the host's bytes (the JSON document up
 * to the opening quote of "input"; or the cls_lua_eval_op encoding up to its input, whose lengths
 * are filled in per command). @return 0 or -ENOMEM. */
static int lua_bound(struct nkv_exec_entry *e, const char *script, const char *handler)
{
	static const char j1[] = "{\"script\": \"", j2[] = "\", \"handler\": \"", j3[] = "\", \"input\": \"";
	size_t sl = strlen(script), hl = strlen(handler), n;
	uint8_t *b;

	if (e->form == NKV_EXEC_LUA_JSON) {
		size_t es = json_escape(NULL, (const uint8_t *)script, sl), eh = json_escape(NULL, (const uint8_t *)handler, hl);
		n = sizeof(j1) - 1 + es + sizeof(j2) - 1 + eh + sizeof(j3) - 1;
		if (!(b = malloc(n)))
			return -ENOMEM;
		size_t k = 0;
		memcpy(b, j1, sizeof(j1) - 1);
		k += sizeof(j1) - 1;
		k += json_escape(b + k, (const uint8_t *)script, sl);
		memcpy(b + k, j2, sizeof(j2) - 1);
		k += sizeof(j2) - 1;
		k += json_escape(b + k, (const uint8_t *)handler, hl);
		memcpy(b + k, j3, sizeof(j3) - 1);
	} else { /* ENCODE_START(1, 1): version, compat, length; then script, handler (u32 length + bytes) */
		n = 6 + 4 + sl + 4 + hl;
		if (!(b = malloc(n)))
			return -ENOMEM;
		b[0] = 1;
		b[1] = 1;
		nkv_put32(b + 6, (uint32_t)sl);
		memcpy(b + 10, script, sl);
		nkv_put32(b + 10 + sl, (uint32_t)hl);
		memcpy(b + 14 + sl, handler, hl);
	}
	e->input = b;
	e->input_len = (uint32_t)n;
	return 0;
}

int nkv_exec_lua_input(const struct nkv_exec_entry *e, const void *host, uint32_t n, uint8_t **out, uint32_t *len)
{
	uint8_t *copy = NULL, *b;
	size_t total;

	*out = NULL;
	if (e->form == NKV_EXEC_LUA_BL) { /* the input bufferlist: u32 length + bytes, last */
		total = (size_t)e->input_len + 4 + n;
		if (total > UINT32_MAX)
			return -EFBIG;
		if (!(b = malloc(total)))
			return -ENOMEM;
		memcpy(b, e->input, e->input_len);
		nkv_put32(b + 2, (uint32_t)(total - 6));
		nkv_put32(b + e->input_len, n);
		if (n)
			memcpy(b + e->input_len + 4, host, n);
	} else {
		/* One private copy, so that the length counted is the length written. */
		if (n && !(copy = malloc(n)))
			return -ENOMEM;
		if (n)
			memcpy(copy, host, n);
		total = (size_t)e->input_len + json_escape(NULL, copy, n) + sizeof(JSON_TAIL) - 1;
		if (total > UINT32_MAX || !(b = malloc(total))) {
			free(copy);
			return total > UINT32_MAX ? -EFBIG : -ENOMEM;
		}
		memcpy(b, e->input, e->input_len);
		size_t k = e->input_len + json_escape(b + e->input_len, copy, n);
		memcpy(b + k, JSON_TAIL, sizeof(JSON_TAIL) - 1);
		free(copy);
	}
	*out = b;
	*len = (uint32_t)total;
	return 0;
}

static bool entry_equal(const struct nkv_exec_entry *a, const struct nkv_exec_entry *b)
{
	return a->opc == b->opc && a->write == b->write && a->create == b->create && a->append == b->append &&
	       a->form == b->form && a->max_input == b->max_input && a->input_len == b->input_len &&
	       strcmp(a->cls, b->cls) == 0 && strcmp(a->method, b->method) == 0 &&
	       (a->input_len == 0 || memcmp(a->input, b->input, a->input_len) == 0);
}

static bool table_equal(const struct nkv_exec_table *a, const struct nkv_exec_table *b)
{
	if (!a || !b)
		return a == b;
	if (a->n != b->n)
		return false;
	for (unsigned i = 0; i < a->n; i++)
		if (!entry_equal(&a->e[i], &b->e[i]))
			return false;
	return true;
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
	atomic_init(&t->refs, 1);
	for (unsigned i = 0; i < n; i++) {
		const struct nkv_exec_rule *r = &rules[i];
		struct nkv_exec_entry *e = &t->e[i];
		const char *why = nkv_exec_rule_problem(r);
		if (!why && t->by_opc[r->opcode - NKV_EXEC_OPC_FIRST])
			why = "is allowlisted twice";
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
		e->append = r->append_host_input;
		strcpy(e->cls, r->cls);
		strcpy(e->method, r->method);
		e->max_input = r->max_input ? r->max_input : DEFAULT_MAX_INPUT;
		e->form = !runs_code(r->cls)			 ? NKV_EXEC_RAW
			  : strcmp(r->method, "eval_json") == 0 ? NKV_EXEC_LUA_JSON
								 : NKV_EXEC_LUA_BL;
		t->n = i + 1; /* what table_free releases from here on */
		if (e->form != NKV_EXEC_RAW) {
			*rc = lua_bound(e, r->script, r->handler);
		} else if (r->input_len) {
			if ((e->input = malloc(r->input_len)))
				memcpy(e->input, r->input, r->input_len);
			e->input_len = r->input_len;
			*rc = e->input ? 0 : -ENOMEM;
		}
		if (*rc < 0) {
			table_free(t);
			return NULL;
		}
		t->by_opc[r->opcode - NKV_EXEC_OPC_FIRST] = e;
	}
	return t;
}

/* One line per allowlisted opcode: what an operator needs to audit what hosts may run. */
static void log_table(const struct nkv_subsys *ss, uint32_t nsid, const struct nkv_exec_table *t)
{
	for (unsigned i = 0; t && i < t->n; i++) {
		const struct nkv_exec_entry *e = &t->e[i];
		NKV_INFO("%s: nsid %u: opcode %02xh runs %s.%s (%s%s, %s %u bytes%s)", ss->nqn, nsid, e->opc, e->cls,
			 e->method, e->write ? "write" : "read", e->create ? ", may create" : "",
			 e->form == NKV_EXEC_RAW ? "bound input" : "bound script and handler, encoded", e->input_len,
			 e->form != NKV_EXEC_RAW ? "; the host's input is the handler's input"
			 : e->append	       ? "; the host's input appended"
					       : "");
	}
}

int nkv_exec_init(struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_exec_rule *rules, unsigned n)
{
	int rc;
	struct nkv_exec_table *t = table_build(rules, n, &rc);

	atomic_init(&ns->exec, t);
	atomic_init(&ns->exec_readers, 0);
	ns->exec_version = 1;
	log_table(ss, ns->nsid, t);
	if (t && t->n && ns->info.erasure)
		NKV_WARN("%s: nsid %u: pool '%s' is erasure-coded: a method that reads the object's data or writes "
			 "omap is refused there (C0h), and omap reads find nothing", ss->nqn, ns->nsid, ns->info.pool);
	return rc;
}

int nkv_ns_set_exec(struct nkv_subsys *ss, uint32_t nsid, const struct nkv_exec_rule *rules, unsigned n)
{
	/* The thread that changes the configuration: the namespace cannot go meanwhile. */
	struct nkv_ns *ns = nsid && nsid <= NKV_MAX_NSID ? atomic_load(&ss->ns[nsid]) : NULL;
	struct nkv_exec_table *t;
	int rc;

	if (!ns)
		return -ENOENT;
	t = table_build(rules, n, &rc);
	if (rc < 0)
		return rc;
	/* Only this thread replaces the table, so it may read the current one without a reference. */
	if (table_equal(t, atomic_load_explicit(&ns->exec, memory_order_acquire))) {
		table_free(t);
		NKV_DEBUG("%s: nsid %u: Exec allowlist unchanged", ss->nqn, nsid);
		return 0;
	}
	table_swap(ns, t); /* the old table goes when the last command parsed with it ends */
	NKV_INFO("%s: nsid %u: Exec allowlist replaced (version %u): %u opcode(s)", ss->nqn, nsid, ++ns->exec_version, n);
	log_table(ss, nsid, t);
	return 0;
}

void nkv_exec_free(struct nkv_ns *ns)
{
	table_swap(ns, NULL); /* NULL stays: a reused NSID slot may be freed again later */
}

void nkv_exec_release(struct nkv_req *req)
{
	free(req->exec_in);
	req->exec_in = NULL;
	table_put(req->exec_tbl);
	req->exec_tbl = NULL;
}

static void exec_run(struct nkv_req *req)
{
	struct nkv_kvio *io = &req->io;
	struct nkv_target *t = req->qp->ctrlr->ss->tgt;
	const struct nkv_exec_entry *e = req->exec_tbl->by_opc[req->cmd.opc - NKV_EXEC_OPC_FIRST];

	/* The transport placed the data buffer after parse: the host's input, or room for the output. */
	if (nkv_opc_xfer(req->cmd.opc) == NKV_XFER_H2C) {
		io->in2 = req->data;
		io->in2_len = req->length;
	} else if (nkv_opc_xfer(req->cmd.opc) == NKV_XFER_C2H) {
		io->out = req->data;
		io->out_len = req->length;
	}
	if (e->form != NKV_EXEC_RAW) { /* a Lua script rule: the host's bytes become the handler's input */
		uint32_t len;
		int rc = nkv_exec_lua_input(e, io->in2, io->in2_len, &req->exec_in, &len);
		if (rc < 0) {
			nkv_req_complete(req, nkv_exec_status(req, rc));
			return;
		}
		io->in1 = req->exec_in;
		io->in1_len = len;
		io->in2_len = 0;
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
	/* Held until the command ends (nkv_exec_release, from nkv_req_drop). */
	struct nkv_exec_table *t = req->exec_tbl = table_get(req->ns);
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
	if (inl && e->form == NKV_EXEC_RAW && e->input_len && !e->append)
		return ST(GENERIC, INVALID_FIELD); /* the rule binds the whole input */
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
	io->exec_ro = req->ns->read_only; /* RADOS then refuses a method flagged as a writer */
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
		/* ... or, on an erasure-coded pool, the method read the object's data or wrote omap, which
		 * the OSD refuses there with the same errno (backend/rados_pool.h): the log says so. */
		if (req->ns->info.erasure)
			NKV_WARN("%s: nsid %u: opcode %02xh (%s.%s) answered C0h: pool '%s' is erasure-coded, where the OSD "
				 "refuses a method that reads the object's data or writes omap (or the class is missing)",
				 req->qp->ctrlr->ss->nqn, req->ns->nsid, req->cmd.opc, req->io.cls, req->io.method,
				 req->ns->info.pool);
		return ST(GENERIC, EXEC_UNAVAILABLE);
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
		struct nkv_exec_table *t = ns ? table_get(ns) : NULL;
		for (unsigned i = 0; t && i < t->n; i++)
			nkv_put32(&iocs[t->e[i].opc], NKV_EFFECTS_CSUPP | (t->e[i].write ? NKV_EFFECTS_LBCC : 0));
		table_put(t);
		if (ns)
			nkv_ns_put(ns);
	}
}
