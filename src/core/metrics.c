/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - per-namespace command metrics (kind x status class, bytes, latency histograms),
 * counted once per command in nkv_req_complete, and the snapshots a monitoring exporter reads:
 * namespaces (nkv_target_metrics) and transports (nkv_target_transport_metrics).
 *
 * The counting sits on every command's completion, so it is a few relaxed atomic adds on the
 * namespace's counters: no lock, no allocation, no division (the histogram bucket is a count of
 * leading zeros). Reading takes the target's configuration lock, never anything I/O takes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static const char *const g_op_names[NKV_MOP_COUNT] = {
	[NKV_MOP_STORE] = "store", [NKV_MOP_RETRIEVE] = "retrieve", [NKV_MOP_RETRIEVE_RANGE] = "retrieve_range",
	[NKV_MOP_DELETE] = "delete", [NKV_MOP_EXIST] = "exist", [NKV_MOP_LIST] = "list",
	[NKV_MOP_EXEC] = "exec", [NKV_MOP_OTHER] = "other",
};

static const char *const g_status_names[NKV_MST_COUNT] = {
	[NKV_MST_SUCCESS] = "success", [NKV_MST_NOT_FOUND] = "not_found", [NKV_MST_EXISTS] = "exists",
	[NKV_MST_SIZE] = "size", [NKV_MST_CAPACITY] = "capacity", [NKV_MST_NOT_READY] = "not_ready",
	[NKV_MST_REFUSED] = "refused", [NKV_MST_EXEC_FAILED] = "exec_failed", [NKV_MST_OTHER] = "other",
};

const char *nkv_metric_op_name(unsigned op)
{
	return op < NKV_MOP_COUNT ? g_op_names[op] : "?";
}

const char *nkv_metric_status_name(unsigned st)
{
	return st < NKV_MST_COUNT ? g_status_names[st] : "?";
}

uint64_t nkv_metric_lat_bound_us(unsigned i)
{
	return i < NKV_MLAT_BUCKETS - 1 ? 8ull << i : UINT64_MAX;
}

static unsigned op_of(uint8_t opc)
{
	switch (opc) {
	case NKV_KV_STORE: return NKV_MOP_STORE;
	case NKV_VS_STORE_TTL: return NKV_MOP_STORE;
	case NKV_KV_RETRIEVE: return NKV_MOP_RETRIEVE;
	case NKV_VS_RETRIEVE_RANGE: return NKV_MOP_RETRIEVE_RANGE;
	case NKV_KV_DELETE: return NKV_MOP_DELETE;
	case NKV_KV_EXIST: return NKV_MOP_EXIST;
	case NKV_KV_LIST: return NKV_MOP_LIST;
	}
	return opc >= NKV_EXEC_OPC_FIRST && opc < NKV_VS_OPC_FIRST ? NKV_MOP_EXEC : NKV_MOP_OTHER;
}

static unsigned status_of(nkv_status st)
{
	if (nkv_status_sct(st) == NKV_SCT_CMD) /* command specific: Authentication Required is the one a
						 * namespace command can get */
		return NKV_MST_REFUSED;
	if (nkv_status_sct(st) != NKV_SCT_GENERIC)
		return NKV_MST_OTHER;
	switch (nkv_status_sc(st)) {
	case NKV_SC_SUCCESS: return NKV_MST_SUCCESS;
	case NKV_SC_KV_KEY_NOT_EXIST: return NKV_MST_NOT_FOUND;
	case NKV_SC_KV_KEY_EXISTS: return NKV_MST_EXISTS;
	case NKV_SC_KV_INVALID_VALUE_SIZE:
	case NKV_SC_KV_INVALID_KEY_SIZE: return NKV_MST_SIZE;
	case NKV_SC_KV_CAPACITY_EXCEEDED: return NKV_MST_CAPACITY;
	case NKV_SC_KV_NS_NOT_READY: return NKV_MST_NOT_READY;
	case NKV_SC_INVALID_OPCODE:
	case NKV_SC_INVALID_FIELD:
	case NKV_SC_INVALID_NS:
	case NKV_SC_CMD_SEQUENCE_ERROR:
	case NKV_SC_INVALID_SGL_SEG:
	case NKV_SC_DATA_SGL_LENGTH_INVALID:
	case NKV_SC_SGL_DESC_TYPE_INVALID:
	case NKV_SC_INVALID_PRP_OFFSET:
	case NKV_SC_SGL_OFFSET_INVALID:
	case NKV_SC_NS_WRITE_PROTECTED: return NKV_MST_REFUSED;
	case NKV_SC_EXEC_UNAVAILABLE:
	case NKV_SC_EXEC_FAILED: return NKV_MST_EXEC_FAILED;
	}
	return NKV_MST_OTHER;
}

/* Bucket of a latency: i with (8 us << (i - 1), 8 us << i], in whole microseconds rounded up. */
static unsigned lat_bucket(uint64_t ns)
{
	uint64_t us = (ns + 999) / 1000; /* a multiplication: the divisor is a constant */

	if (us <= 8)
		return 0;
	unsigned b = 64u - (unsigned)__builtin_clzll((us - 1) >> 3);
	return b < NKV_MLAT_BUCKETS - 1 ? b : NKV_MLAT_BUCKETS - 1;
}

void nkv_ns_count(struct nkv_ns *ns, const struct nkv_req *req, nkv_status st)
{
	struct nkv_ns_counters *k = &ns->stats;
	unsigned op = op_of(req->cmd.opc), cls = status_of(st);
	unsigned grp = op == NKV_MOP_STORE ? NKV_MLAT_STORE
		       : op == NKV_MOP_RETRIEVE || op == NKV_MOP_RETRIEVE_RANGE ? NKV_MLAT_RETRIEVE
										  : NKV_MLAT_OTHER;
	uint64_t now = nkv_now_ns(), lat = now > req->start_ns ? now - req->start_ns : 0;

	atomic_fetch_add_explicit(&k->cmds[op][cls], 1, memory_order_relaxed);
	if (cls == NKV_MST_SUCCESS) {
		/* The opcode's data direction says which way its bytes went (Exec's too). */
		if (nkv_opc_xfer(req->cmd.opc) == NKV_XFER_H2C)
			atomic_fetch_add_explicit(&k->bytes_written[op], req->length, memory_order_relaxed);
		else if (req->xfer)
			atomic_fetch_add_explicit(&k->bytes_read[op], req->xfer, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&k->lat[grp][lat_bucket(lat)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&k->lat_sum_ns[grp], lat, memory_order_relaxed);
}

static void ns_snapshot(struct nkv_subsys *ss, struct nkv_ns *ns, struct nkv_ns_metrics *m)
{
	struct nkv_ns_counters *k = &ns->stats;

	memset(m, 0, sizeof(*m));
	snprintf(m->subnqn, sizeof(m->subnqn), "%s", ss->nqn);
	m->nsid = ns->nsid;
	m->read_only = __atomic_load_n(&ns->read_only, __ATOMIC_RELAXED);
	for (unsigned o = 0; o < NKV_MOP_COUNT; o++) {
		for (unsigned s = 0; s < NKV_MST_COUNT; s++)
			m->cmds[o][s] = atomic_load_explicit(&k->cmds[o][s], memory_order_relaxed);
		m->bytes_written[o] = atomic_load_explicit(&k->bytes_written[o], memory_order_relaxed);
		m->bytes_read[o] = atomic_load_explicit(&k->bytes_read[o], memory_order_relaxed);
	}
	for (unsigned g = 0; g < NKV_MLAT_COUNT; g++) {
		for (unsigned b = 0; b < NKV_MLAT_BUCKETS; b++)
			m->lat[g][b] = atomic_load_explicit(&k->lat[g][b], memory_order_relaxed);
		m->lat_sum_ns[g] = atomic_load_explicit(&k->lat_sum_ns[g], memory_order_relaxed);
	}
	m->in_flight = atomic_load_explicit(&ns->active, memory_order_relaxed);
	m->used = atomic_load_explicit(&ns->used, memory_order_relaxed);
	m->max_value = __atomic_load_n(&ns->max_value, __ATOMIC_RELAXED);
	/* A cache namespace's figures (cache.c): the call holds the namespace (nkv_ns_get), so a live
	 * removal cannot free its cache meanwhile, and takes only the cache's own lock (after t->lock). */
	m->cache = nkv_ns_cache_usage(ss, ns->nsid, &m->cache_usage) == 0; /* -EINVAL: no cache */
}

int nkv_target_metrics(struct nkv_target *t, struct nkv_ns_metrics **out)
{
	struct nkv_ns_metrics *v = NULL;
	int n = 0, cap = 0;

	*out = NULL;
	/* The lock keeps the subsystem list (and so every namespace struct in it) alive; namespaces are
	 * published and unpublished without it, so each is looked at through its atomic slot. */
	pthread_mutex_lock(&t->lock);
	for (struct nkv_subsys *ss = t->subsystems; ss; ss = ss->next) {
		for (uint32_t i = 1; i <= NKV_MAX_NSID; i++) {
			struct nkv_ns *ns = atomic_load_explicit(&ss->ns[i], memory_order_acquire);
			if (!ns)
				continue;
			if (n == cap) {
				struct nkv_ns_metrics *g = realloc(v, (size_t)(cap = cap ? 2 * cap : 8) * sizeof(*v));
				if (!g) {
					pthread_mutex_unlock(&t->lock);
					free(v);
					return -ENOMEM;
				}
				v = g;
			}
			ns_snapshot(ss, ns, &v[n++]);
		}
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	return n;
}

void nkv_target_add_transport(struct nkv_target *t, struct nkv_transport_reg *r)
{
	pthread_mutex_lock(&t->lock);
	r->next = t->transports;
	t->transports = r;
	pthread_mutex_unlock(&t->lock);
}

void nkv_target_del_transport(struct nkv_target *t, struct nkv_transport_reg *r)
{
	pthread_mutex_lock(&t->lock);
	for (struct nkv_transport_reg **p = &t->transports; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&t->lock);
}

int nkv_target_transport_metrics(struct nkv_target *t, struct nkv_transport_metrics *out, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->lock);
	for (struct nkv_transport_reg *r = t->transports; r; r = r->next, n++) {
		if (n >= max)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		snprintf(out[n].name, sizeof(out[n].name), "%s", r->name);
		r->read(r->arg, &out[n]);
	}
	pthread_mutex_unlock(&t->lock);
	return (int)n;
}
