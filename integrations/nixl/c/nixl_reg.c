/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_reg.c - the RADOS_NKV backend instance (connect, engine, teardown) and its registrations:
 * DRAM regions (registered with the shared-memory controller for zero copy) and object
 * registrations in a devId -> registration hash table, cheap enough to register and deregister
 * per transfer job.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKV_LOG_COMPONENT "nixl"
#include "common/log.h"
#include "nixl_int.h"

static void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t len, const char *fmt, ...)
{
	if (!err || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* ---- the devId table ------------------------------------------------------------------------- */

static size_t slot(const struct nkv_nixl *b, uint64_t id)
{
	/* splitmix64's finalizer: devIds are often small consecutive numbers */
	id ^= id >> 30;
	id *= 0xbf58476d1ce4e5b9ull;
	id ^= id >> 27;
	id *= 0x94d049bb133111ebull;
	id ^= id >> 31;
	return (size_t)id & (b->tab_size - 1);
}

/* Double the buckets (under reg_lock). On allocation failure the chains just get longer. */
static void grow(struct nkv_nixl *b)
{
	size_t old = b->tab_size;
	struct nkv_nixl_md **t = calloc(old * 2, sizeof(*t)), **ot = b->tab;
	if (!t)
		return;
	b->tab = t;
	b->tab_size = old * 2;
	for (size_t i = 0; i < old; i++) {
		for (struct nkv_nixl_md *m = ot[i], *nx; m; m = nx) {
			nx = m->hnext;
			size_t s = slot(b, m->dev_id);
			m->hnext = t[s];
			t[s] = m;
		}
	}
	free(ot);
}

/* Take @dev_id's current registration out of the table (under reg_lock). */
static struct nkv_nixl_md *tab_remove(struct nkv_nixl *b, uint64_t dev_id, const struct nkv_nixl_md *only)
{
	for (struct nkv_nixl_md **pp = &b->tab[slot(b, dev_id)]; *pp; pp = &(*pp)->hnext) {
		struct nkv_nixl_md *m = *pp;
		if (m->dev_id == dev_id && (!only || m == only)) {
			*pp = m->hnext;
			m->hnext = NULL;
			m->in_table = false;
			b->tab_count--;
			return m;
		}
	}
	return NULL;
}

static void regs_link(struct nkv_nixl *b, struct nkv_nixl_md *m)
{
	m->prev = NULL;
	m->next = b->regs;
	if (b->regs)
		b->regs->prev = m;
	b->regs = m;
}

static void regs_unlink(struct nkv_nixl *b, struct nkv_nixl_md *m)
{
	if (m->prev)
		m->prev->next = m->next;
	else
		b->regs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	m->prev = m->next = NULL;
}

void nixl_md_get(struct nkv_nixl_md *md)
{
	atomic_fetch_add_explicit(&md->refs, 1, memory_order_relaxed);
}

void nixl_md_put(struct nkv_nixl_md *md)
{
	/* acq_rel: the last dropper sees every earlier user's reads of the name */
	if (md && atomic_fetch_sub_explicit(&md->refs, 1, memory_order_acq_rel) == 1)
		free(md);
}

struct nkv_nixl_md *nixl_md_lookup(struct nkv_nixl *b, uint64_t dev_id)
{
	struct nkv_nixl_md *r = NULL;
	pthread_mutex_lock(&b->reg_lock);
	for (struct nkv_nixl_md *m = b->tab[slot(b, dev_id)]; m; m = m->hnext) {
		if (m->dev_id == dev_id) {
			nixl_md_get(m);
			r = m;
			break;
		}
	}
	pthread_mutex_unlock(&b->reg_lock);
	return r;
}

/* ---- the instance ---------------------------------------------------------------------------- */

static int connect_status(int rc)
{
	switch (rc) {
	case -ENOENT:
		return NKV_NIXL_ERR_NOT_FOUND;
	case -EACCES:
		return NKV_NIXL_ERR_NOT_ALLOWED;
	case -EINVAL:
	case -ENXIO: /* the address does not resolve */
	case -ENAMETOOLONG:
		return NKV_NIXL_ERR_INVALID_PARAM;
	default:
		return NKV_NIXL_ERR_BACKEND;
	}
}

int nkv_nixl_create(const struct nkv_nixl_param *params, size_t n, struct nkv_nixl **out, char *err, size_t err_len)
{
	if (!out) {
		say(err, err_len, "no output handle");
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	*out = NULL;
	struct nkv_nixl *b = calloc(1, sizeof(*b));
	if (!b) {
		say(err, err_len, "out of memory");
		return NKV_NIXL_ERR_BACKEND;
	}
	int st = nkv_nixl_parse_params(params, n, &b->o, err, err_len);
	if (st) {
		free(b);
		return st;
	}
	b->tab_size = 64;
	b->tab = calloc(b->tab_size, sizeof(*b->tab));
	if (!b->tab) {
		free(b);
		say(err, err_len, "out of memory");
		return NKV_NIXL_ERR_BACKEND;
	}
	pthread_mutex_init(&b->reg_lock, NULL);
	pthread_mutex_init(&b->req_lock, NULL);
	pthread_mutex_init(&b->stage_lock, NULL);

	struct nkv_conn_opts co = {
		.hostnqn = b->o.hostnqn[0] ? b->o.hostnqn : NULL,
		.queue_depth = (uint16_t)b->o.depth,
		.timeout_ms = (int)b->o.timeout_ms,
	};
	struct nkv_engine_opts eo = {
		.queues = b->o.queues,
		.depth = (uint16_t)b->o.depth,
		.timeout_ms = (int)b->o.timeout_ms,
		.max_ops = b->o.max_ops,
		.reconnect_max_ms = (int)b->o.reconnect_max_ms,
		.reconnect_wait_ms = b->o.reconnect_wait_ms ? (int)b->o.reconnect_wait_ms : -1, /* 0: fail fast */
	};
	b->shm = b->o.shm[0] != 0;
	b->mp = b->o.paths[0] != 0;
	int rc;
	if (b->mp) { /* the engine connects every path; its first connected controller serves admin */
		rc = nkv_engine_connect(b->o.paths, b->o.subnqn, &co, &eo, &b->eng);
		for (unsigned i = 0; rc == 0 && !b->ctrl && i < nkv_engine_paths(b->eng); i++)
			b->ctrl = nkv_engine_ctrl(b->eng, i);
	} else {
		rc = b->shm ? nkv_connect_shm(b->o.shm, &co, &b->ctrl)
			    : nkv_connect(b->o.traddr, b->o.port, b->o.subnqn, &co, &b->ctrl);
	}
	if (rc) {
		if (b->mp)
			say(err, err_len, "connect to %s subsystem %s: %s", b->o.paths, b->o.subnqn, strerror(-rc));
		else if (b->shm)
			say(err, err_len, "connect to shm:%s: %s", b->o.shm, strerror(-rc));
		else
			say(err, err_len, "connect to %s port %s subsystem %s: %s", b->o.traddr, b->o.port, b->o.subnqn,
			    strerror(-rc));
		st = connect_status(rc);
		goto fail;
	}
	struct nkv_id_ns_kv id;
	rc = nkv_ns_identify(b->ctrl, b->o.nsid, &id);
	if (rc) {
		say(err, err_len, "namespace %" PRIu32 ": %s", b->o.nsid,
		    rc == -ENOENT ? "no such KV namespace" : strerror(-rc));
		st = rc == -ENOENT ? NKV_NIXL_ERR_NOT_FOUND : NKV_NIXL_ERR_BACKEND;
		goto fail;
	}
	b->max_value = id.kvf[id.kvfc & 0xf].kvvml;
	rc = b->mp ? 0 : nkv_engine_create(b->ctrl, &eo, &b->eng);
	if (rc) {
		say(err, err_len, "engine of %u queue pair(s): %s", b->o.queues, strerror(-rc));
		st = NKV_NIXL_ERR_BACKEND;
		goto fail;
	}
	rc = nixl_stager_start(b);
	if (rc) {
		say(err, err_len, "staging thread: %s", strerror(-rc));
		st = NKV_NIXL_ERR_BACKEND;
		goto fail;
	}
	NKV_INFO("RADOS_NKV backend on %s%s%s, nsid %" PRIu32 ", %u queue pair(s)", b->mp ? b->o.paths :
		 b->shm ? "shm:" : b->o.traddr, b->mp ? "" : b->shm ? b->o.shm : ":", b->mp || b->shm ? "" : b->o.port,
		 b->o.nsid, nkv_engine_queues(b->eng));
	*out = b;
	return NKV_NIXL_SUCCESS;
fail:
	nkv_engine_destroy(b->eng); /* NULL: none yet; a multipath engine disconnects its paths */
	if (!b->mp)
		nkv_disconnect(b->ctrl);
	pthread_mutex_destroy(&b->reg_lock);
	pthread_mutex_destroy(&b->req_lock);
	pthread_mutex_destroy(&b->stage_lock);
	free(b->tab);
	free(b);
	return st;
}

uint64_t nixl_max_value_refresh(struct nkv_nixl *b)
{
	struct nkv_id_ns_kv id;
	if (nkv_ns_identify(b->ctrl, b->o.nsid, &id) != 0)
		return 0;
	uint64_t v = id.kvf[id.kvfc & 0xf].kvvml;
	b->max_value = v;
	return v;
}

void nkv_nixl_destroy(struct nkv_nixl *b)
{
	if (!b)
		return;
	/* Every op accepted completes (within its deadline) before this returns: only then may the
	 * requests' buffers and the DRAM registrations go. The stager submits the writes it holds
	 * first, so they too complete (or fail) in the engine. */
	nixl_stager_stop(b);
	nkv_engine_destroy(b->eng);
	b->eng = NULL;
	nixl_reqs_free_all(b);
	nixl_stage_drain(b); /* registered with the controller: before it goes */
	while (b->regs) {
		struct nkv_nixl_md *m = b->regs;
		regs_unlink(b, m);
		if (m->mem == NKV_NIXL_DRAM_SEG && m->buf_registered)
			nkv_buf_unregister(b->ctrl, m->addr);
		free(m); /* the caller's reference: it may not deregister after destroy */
	}
	if (!b->mp) /* a multipath engine disconnected its paths */
		nkv_disconnect(b->ctrl);
	pthread_mutex_destroy(&b->reg_lock);
	pthread_mutex_destroy(&b->req_lock);
	pthread_mutex_destroy(&b->stage_lock);
	free(b->tab);
	free(b);
}

const struct nkv_nixl_opts *nkv_nixl_opts(const struct nkv_nixl *b)
{
	return &b->o;
}

int nkv_nixl_is_shm(const struct nkv_nixl *b)
{
	return b->shm;
}

/* ---- registrations --------------------------------------------------------------------------- */

static int reg_dram(struct nkv_nixl *b, uint64_t addr, uint64_t len, struct nkv_nixl_md **out)
{
	if (!addr || !len || len > SIZE_MAX)
		return NKV_NIXL_ERR_INVALID_PARAM;
	struct nkv_nixl_md *m = calloc(1, sizeof(*m) + 1);
	if (!m)
		return NKV_NIXL_ERR_BACKEND;
	m->mem = NKV_NIXL_DRAM_SEG;
	m->addr = (void *)(uintptr_t)addr;
	m->len = (size_t)len;
	atomic_init(&m->refs, 1);
	/* Over shm this converts the pages in place into a registered memfd mapping: reads land in
	 * them and writes leave from them with no copy. Memory it cannot take (not private anonymous,
	 * overlapping another registration) still works, through the bounce area. Over TCP: 0. */
	int rc = b->mp ? -EOPNOTSUPP : nkv_buf_register(b->ctrl, m->addr, m->len); /* mp: one per path */
	if (rc == 0)
		m->buf_registered = true;
	else
		NKV_INFO("DRAM %p + %zu not registered with the controller (%s): its transfers go through the "
			 "bounce area", m->addr, m->len, strerror(-rc));
	pthread_mutex_lock(&b->reg_lock);
	regs_link(b, m);
	pthread_mutex_unlock(&b->reg_lock);
	*out = m;
	return NKV_NIXL_SUCCESS;
}

static int reg_obj(struct nkv_nixl *b, uint64_t addr, uint64_t len, uint64_t dev_id, const void *meta,
		   size_t meta_len, struct nkv_nixl_md **out)
{
	char num[24];
	if (!meta_len) { /* NIXL's S3 backend names such an object by its devId */
		meta_len = (size_t)snprintf(num, sizeof(num), "%" PRIu64, dev_id);
		meta = num;
	}
	if (!meta || meta_len > NKV_LNAME_MAX)
		return NKV_NIXL_ERR_INVALID_PARAM;
	struct nkv_nixl_md *m = malloc(sizeof(*m) + meta_len + 1);
	if (!m)
		return NKV_NIXL_ERR_BACKEND;
	memset(m, 0, sizeof(*m));
	m->mem = NKV_NIXL_OBJ_SEG;
	atomic_init(&m->refs, 1);
	m->dev_id = dev_id;
	m->base = addr;
	/* NIXL reads len 0 on object segments as unbounded (and so SIZE_MAX): a range that runs past
	 * 2^64 is unbounded here too */
	m->span = addr + len < addr ? 0 : len;
	m->name_len = meta_len;
	memcpy(m->name, meta, meta_len);
	m->name[meta_len] = 0;
	if (nkv_lname_key(m->name, meta_len, m->key) != 0) {
		free(m);
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	m->hdr_size = nkv_lname_hdr_size(meta_len);

	pthread_mutex_lock(&b->reg_lock);
	/* a devId registered again replaces the earlier registration for new requests; the earlier
	 * one stays valid for its holder (and the requests prepared with it) until deregistered */
	tab_remove(b, dev_id, NULL);
	size_t s = slot(b, dev_id);
	m->hnext = b->tab[s];
	b->tab[s] = m;
	m->in_table = true;
	if (++b->tab_count > 2 * b->tab_size)
		grow(b);
	regs_link(b, m);
	pthread_mutex_unlock(&b->reg_lock);
	*out = m;
	return NKV_NIXL_SUCCESS;
}

int nkv_nixl_register(struct nkv_nixl *b, int mem, uint64_t addr, uint64_t len, uint64_t dev_id, const void *meta,
		      size_t meta_len, struct nkv_nixl_md **out)
{
	if (!b || !out)
		return NKV_NIXL_ERR_INVALID_PARAM;
	*out = NULL;
	if (mem == NKV_NIXL_DRAM_SEG)
		return reg_dram(b, addr, len, out);
	if (mem == NKV_NIXL_OBJ_SEG)
		return reg_obj(b, addr, len, dev_id, meta, meta_len, out);
	return NKV_NIXL_ERR_NOT_SUPPORTED;
}

int nkv_nixl_deregister(struct nkv_nixl *b, struct nkv_nixl_md *md)
{
	if (!b || !md)
		return NKV_NIXL_ERR_INVALID_PARAM;
	if (md->mem == NKV_NIXL_DRAM_SEG) {
		if (md->buf_registered) {
			int rc = nkv_buf_unregister(b->ctrl, md->addr);
			if (rc == -EBUSY)
				return NKV_NIXL_ERR_NOT_ALLOWED; /* a command still uses it: stays registered */
			if (rc)
				NKV_WARN("DRAM %p: unregister: %s", md->addr, strerror(-rc));
		}
		pthread_mutex_lock(&b->reg_lock);
		regs_unlink(b, md);
		pthread_mutex_unlock(&b->reg_lock);
		free(md);
		return NKV_NIXL_SUCCESS;
	}
	pthread_mutex_lock(&b->reg_lock);
	if (md->in_table)
		tab_remove(b, md->dev_id, md);
	regs_unlink(b, md);
	pthread_mutex_unlock(&b->reg_lock);
	nixl_md_put(md);
	return NKV_NIXL_SUCCESS;
}

int nkv_nixl_md_obj(const struct nkv_nixl_md *md, uint64_t *dev_id, const char **name, size_t *name_len,
		    uint8_t key[16])
{
	if (!md || md->mem != NKV_NIXL_OBJ_SEG)
		return -EINVAL;
	if (dev_id)
		*dev_id = md->dev_id;
	if (name)
		*name = md->name;
	if (name_len)
		*name_len = md->name_len;
	if (key)
		memcpy(key, md->key, 16);
	return 0;
}

int nkv_nixl_md_zero_copy(const struct nkv_nixl_md *md)
{
	return md && md->mem == NKV_NIXL_DRAM_SEG && md->buf_registered;
}
