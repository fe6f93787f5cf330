/* SPDX-License-Identifier: Apache-2.0 */
/*
 * live.c - configuration changes while hosts are connected (the control plane's core half):
 * subsystems and namespaces removed under I/O, hosts disallowed, namespace attributes changed, and
 * the Asynchronous Event notices (Namespace Attribute Changed, Changed Namespace List log 04h) that
 * tell connected hosts to rescan. The totals of the per-namespace counters (nkv_ns_stats; counted in
 * metrics.c) and the list of controllers live here too.
 *
 * Lifetimes: a command holds its namespace from parse to completion (nkv_ns_get/put, core.h); a
 * controller holds its subsystem; the target's list holds each subsystem it names. A namespace
 * struct is never freed while the target runs (a host's command may still read the old pointer
 * and back off), but reused for the same NSID; its backend handle is closed once drained.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dhchap.h"
#include "common/log.h"
#include "common/status.h"
#include "core.h"

/* ---- namespaces -------------------------------------------------------------------------------- */

uint64_t nkv_ns_value_limit(const struct nkv_ns *ns)
{
	return ns->info.max_object < UINT32_MAX ? ns->info.max_object : UINT32_MAX; /* KVVML: 32 bits */
}

int nkv_ns_check_max_value(struct nkv_subsys *ss, const struct nkv_ns *ns, uint64_t max)
{
	/* An explicit size the cluster cannot hold is refused (naming the limit), never cut silently:
	 * the operator would see Stores of the promised size fail. The default follows the cluster. */
	if (max > nkv_ns_value_limit(ns)) {
		NKV_ERR("%s: nsid %u: max value %" PRIu64 " is above the largest the backend stores, %" PRIu64
			" (osd max object size; KVVML is 32 bits)", ss->nqn, ns->nsid, max, nkv_ns_value_limit(ns));
		return -EFBIG;
	}
	return 0;
}

unsigned nkv_subsys_ns_count(struct nkv_subsys *ss)
{
	unsigned n = 0;
	for (uint32_t i = 1; i <= NKV_MAX_NSID; i++)
		n += nkv_subsys_has_ns(ss, i);
	return n;
}

int nkv_ns_reap(struct nkv_subsys *ss, struct nkv_ns *ns, unsigned wait_ms)
{
	uint64_t until = nkv_now_ms() + wait_ms;

	if (!ns->kvns)
		return 0;
	/* Every command completes within the op timeout (the backend's watchdog), so this ends. */
	while (atomic_load(&ns->active) != 0) {
		if (nkv_now_ms() >= until)
			return -EBUSY;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	nkv_cache_close(ss->tgt, ns);
	ss->tgt->be->ns_close(ns->kvns);
	ns->kvns = NULL;
	nkv_exec_free(ns);
	return 0;
}

/* Unpublish @nsid (new commands: Invalid Namespace) and wait up to @drain_ms for those in flight. */
static void ns_unpublish(struct nkv_subsys *ss, uint32_t nsid, unsigned drain_ms)
{
	struct nkv_ns *ns = ss->slot[nsid];

	/* Sequentially consistent: pairs with the increment-then-recheck in nkv_ns_get(). */
	atomic_store(&ss->ns[nsid], NULL);
	if (nkv_ns_reap(ss, ns, drain_ms) < 0)
		NKV_WARN("%s: nsid %u: %u command(s) still in flight after %u ms; its backend handle stays open "
			 "until the NSID is added again or the subsystem goes", ss->nqn, nsid, atomic_load(&ns->active),
			 drain_ms);
}

/* The namespace as the configuring thread sees it (it alone publishes and unpublishes). */
static struct nkv_ns *ns_live(struct nkv_subsys *ss, uint32_t nsid)
{
	return nsid && nsid <= NKV_MAX_NSID ? atomic_load(&ss->ns[nsid]) : NULL;
}

int nkv_ns_remove(struct nkv_subsys *ss, uint32_t nsid, unsigned drain_ms)
{
	if (!ns_live(ss, nsid))
		return -ENOENT;
	ns_unpublish(ss, nsid, drain_ms);
	NKV_INFO("%s: nsid %u removed", ss->nqn, nsid);
	nkv_subsys_ns_changed(ss, nsid);
	return 0;
}

int nkv_ns_set_read_only(struct nkv_subsys *ss, uint32_t nsid, bool ro)
{
	struct nkv_ns *ns = ns_live(ss, nsid);

	if (!ns)
		return -ENOENT;
	if (ns->read_only != ro) {
		/* A plain flag, read at parse: commands parsed before keep the old answer. */
		__atomic_store_n(&ns->read_only, ro, __ATOMIC_RELAXED);
		NKV_INFO("%s: nsid %u is now %s", ss->nqn, nsid, ro ? "read-only" : "writable");
		nkv_subsys_ns_changed(ss, nsid);
	}
	return 0;
}

int nkv_ns_set_max_value(struct nkv_subsys *ss, uint32_t nsid, uint64_t max)
{
	struct nkv_ns *ns = ns_live(ss, nsid);
	int rc;

	if (!ns)
		return -ENOENT;
	if ((rc = nkv_ns_check_max_value(ss, ns, max)) < 0)
		return rc;
	if (!max)
		max = NKV_DEFAULT_MAX_VALUE < nkv_ns_value_limit(ns) ? NKV_DEFAULT_MAX_VALUE : nkv_ns_value_limit(ns);
	if (max > atomic_load(&ss->max_value)) /* MDTS first, so no namespace outgrows it */
		atomic_store(&ss->max_value, max);
	if (ns->max_value != max) {
		__atomic_store_n(&ns->max_value, max, __ATOMIC_RELAXED);
		NKV_INFO("%s: nsid %u: max value %" PRIu64, ss->nqn, nsid, max);
		nkv_subsys_ns_changed(ss, nsid);
	}
	return 0;
}

void nkv_subsys_set_max_ns(struct nkv_subsys *ss, unsigned max_ns)
{
	ss->max_ns = max_ns > NKV_MAX_NSID ? NKV_MAX_NSID : max_ns;
}

int nkv_ns_stats(struct nkv_subsys *ss, uint32_t nsid, struct nkv_ns_stats *out)
{
	struct nkv_ns *ns = ns_live(ss, nsid);
	struct nkv_ns_counters *k;
	uint64_t by_op[NKV_MOP_COUNT] = {0}, errors = 0, written = 0, read = 0;

	if (!ns)
		return -ENOENT;
	k = &ns->stats;
	/* The totals of the metrics' counters (metrics.c), as this call has always reported them. */
	for (unsigned o = 0; o < NKV_MOP_COUNT; o++) {
		for (unsigned s = 0; s < NKV_MST_COUNT; s++) {
			uint64_t v = atomic_load_explicit(&k->cmds[o][s], memory_order_relaxed);
			by_op[o] += v;
			errors += s != NKV_MST_SUCCESS ? v : 0;
		}
		written += atomic_load_explicit(&k->bytes_written[o], memory_order_relaxed);
		read += atomic_load_explicit(&k->bytes_read[o], memory_order_relaxed);
	}
	*out = (struct nkv_ns_stats){
		.stores = by_op[NKV_MOP_STORE],
		.retrieves = by_op[NKV_MOP_RETRIEVE] + by_op[NKV_MOP_RETRIEVE_RANGE],
		.deletes = by_op[NKV_MOP_DELETE],
		.exists = by_op[NKV_MOP_EXIST],
		.lists = by_op[NKV_MOP_LIST],
		.others = by_op[NKV_MOP_EXEC] + by_op[NKV_MOP_OTHER],
		.bytes_written = written,
		.bytes_read = read,
		.errors = errors,
		.in_flight = atomic_load(&ns->active),
		.used = atomic_load(&ns->used),
		.max_value = ns->max_value,
		.read_only = ns->read_only,
	};
	memcpy(out->nguid, ns->nguid, 16);
	return 0;
}

/* ---- subsystems and hosts ---------------------------------------------------------------------- */

int nkv_target_check_pool(struct nkv_target *t, const char *pool, uint64_t *max_value)
{
	struct nkv_kvns *probe;
	struct nkv_kvns_info info;
	int rc;

	if ((rc = t->be->ns_open(t->dev, pool, "", &probe)) < 0)
		return rc;
	rc = t->be->ns_info(probe, &info);
	t->be->ns_close(probe);
	if (rc == 0 && max_value)
		*max_value = info.max_object < UINT32_MAX ? info.max_object : UINT32_MAX;
	return rc;
}

const char *nkv_subsys_serial(const struct nkv_subsys *ss)
{
	return ss->sn;
}

int nkv_dhchap_secret_check(const char *secret)
{
	struct nkv_dhchap_key k;
	const char *why = NULL;
	int rc = nkv_dhchap_key_parse(secret, &k, &why);
	nkv_dhchap_wipe(&k, sizeof(k));
	return rc < 0 ? -EINVAL : 0;
}

struct nkv_subsys *nkv_target_subsys(struct nkv_target *t, const char *nqn)
{
	return nkv_target_find_subsys(t, nqn);
}

void nkv_subsys_free(struct nkv_subsys *ss)
{
	struct nkv_target *t = ss->tgt;

	/* Every cache namespace's last writes started before the first close waits for its own. */
	for (uint32_t i = 1; i <= NKV_MAX_NSID; i++)
		if (ss->slot[i] && ss->slot[i]->kvns)
			nkv_cache_final(t, ss->slot[i]);
	for (uint32_t i = 1; i <= NKV_MAX_NSID; i++) {
		struct nkv_ns *ns = ss->slot[i];
		if (!ns)
			continue;
		if (ns->kvns) {
			nkv_cache_close(t, ns);
			t->be->ns_close(ns->kvns);
		}
		nkv_exec_free(ns);
		free(ns);
	}
	for (unsigned i = 0; i < ss->nhosts; i++)
		nkv_dhchap_host_free(ss->dhchap[i]);
	free(ss->dhchap);
	free(ss->hosts);
	free(ss);
}

void nkv_subsys_put(struct nkv_subsys *ss)
{
	/* Only a removed subsystem can drop to zero: the target's list holds the others. */
	if (ss && atomic_fetch_sub(&ss->refs, 1) == 1) {
		NKV_DEBUG("%s: freed", ss->nqn);
		nkv_subsys_free(ss);
	}
}

/* Evict the controllers of @ss that @pick selects (under tgt->lock): unlinked so that no I/O queue
 * joins them, then every transport closes their queues at its next tick. @return how many. */
static int evict(struct nkv_subsys *ss, bool (*pick)(struct nkv_subsys *, struct nkv_ctrlr *, const void *),
		 const void *arg)
{
	int n = 0;

	for (struct nkv_ctrlr **p = &ss->ctrlrs; *p;) {
		struct nkv_ctrlr *c = *p;
		if (!pick(ss, c, arg)) {
			p = &c->next;
			continue;
		}
		*p = c->next;
		atomic_store(&c->evict, true);
		NKV_INFO("%s: controller %u of host %s: disconnected by the control plane", ss->nqn, c->cntlid,
			 c->hostnqn);
		n++;
	}
	return n;
}

static bool pick_all(struct nkv_subsys *ss, struct nkv_ctrlr *c, const void *arg)
{
	(void)ss, (void)c, (void)arg;
	return true;
}

static bool pick_host(struct nkv_subsys *ss, struct nkv_ctrlr *c, const void *hostnqn)
{
	(void)ss;
	return strcmp(c->hostnqn, hostnqn) == 0;
}

static bool pick_unallowed(struct nkv_subsys *ss, struct nkv_ctrlr *c, const void *arg)
{
	(void)arg;
	return !nkv_subsys_admits(ss, c->hostnqn, c->opts.exposed);
}

int nkv_subsys_remove(struct nkv_target *t, const char *nqn, unsigned drain_ms)
{
	struct nkv_subsys *ss;

	pthread_mutex_lock(&t->lock);
	struct nkv_subsys **p = &t->subsystems;
	while (*p && strcmp((*p)->nqn, nqn) != 0)
		p = &(*p)->next;
	if (!(ss = *p)) {
		pthread_mutex_unlock(&t->lock);
		return -ENOENT;
	}
	*p = ss->next; /* gone from Connect and discovery */
	ss->removed = true;
	int n = evict(ss, pick_all, NULL);
	pthread_mutex_unlock(&t->lock);
	atomic_fetch_add(&t->genctr, 1);
	for (uint32_t i = 1; i <= NKV_MAX_NSID; i++)
		if (ns_live(ss, i))
			ns_unpublish(ss, i, drain_ms);
	NKV_INFO("subsystem %s removed (%d controller(s) disconnected)", nqn, n);
	nkv_subsys_put(ss); /* the list's reference; controllers still closing hold theirs */
	return 0;
}

int nkv_subsys_disallow_host(struct nkv_subsys *ss, const char *hostnqn)
{
	int n = -ENOENT;

	pthread_mutex_lock(&ss->tgt->lock);
	for (unsigned i = 0; i < ss->nhosts; i++) {
		if (strcmp(ss->hosts[i], hostnqn) != 0)
			continue;
		nkv_dhchap_host_free(ss->dhchap[i]); /* controllers keep their own reference */
		memmove(&ss->hosts[i], &ss->hosts[i + 1], (ss->nhosts - i - 1) * sizeof(ss->hosts[0]));
		memmove(&ss->dhchap[i], &ss->dhchap[i + 1], (ss->nhosts - i - 1) * sizeof(ss->dhchap[0]));
		ss->nhosts--;
		/* Still reachable through allow_any: then its connections stay. */
		n = ss->allow_any ? 0 : evict(ss, pick_host, hostnqn);
		break;
	}
	pthread_mutex_unlock(&ss->tgt->lock);
	if (n >= 0) {
		atomic_fetch_add(&ss->tgt->genctr, 1);
		NKV_INFO("%s: host %s disallowed (%d controller(s) disconnected)", ss->nqn, hostnqn, n);
	}
	return n;
}

int nkv_subsys_set_allow_any(struct nkv_subsys *ss, bool any)
{
	int n = 0;

	pthread_mutex_lock(&ss->tgt->lock);
	ss->allow_any = any;
	if (!any)
		n = evict(ss, pick_unallowed, NULL);
	pthread_mutex_unlock(&ss->tgt->lock);
	atomic_fetch_add(&ss->tgt->genctr, 1);
	return n;
}

int nkv_subsys_set_loopback_only(struct nkv_subsys *ss, bool on)
{
	int n = 0;

	pthread_mutex_lock(&ss->tgt->lock);
	ss->loopback_only = on;
	if (on)
		n = evict(ss, pick_unallowed, NULL);
	pthread_mutex_unlock(&ss->tgt->lock);
	atomic_fetch_add(&ss->tgt->genctr, 1);
	return n;
}

int nkv_target_connections(struct nkv_target *t, const char *subnqn, struct nkv_conn_info **out)
{
	struct nkv_conn_info *v = NULL;
	int n = 0, cap = 0;

	*out = NULL;
	pthread_mutex_lock(&t->lock);
	for (struct nkv_subsys *ss = t->subsystems; ss; ss = ss->next) {
		if (subnqn && strcmp(ss->nqn, subnqn) != 0)
			continue;
		for (struct nkv_ctrlr *c = ss->ctrlrs; c; c = c->next) {
			if (n == cap) {
				struct nkv_conn_info *g = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*v));
				if (!g) {
					pthread_mutex_unlock(&t->lock);
					free(v);
					return -ENOMEM;
				}
				v = g;
			}
			struct nkv_conn_info *e = &v[n++];
			memset(e, 0, sizeof(*e));
			snprintf(e->subnqn, sizeof(e->subnqn), "%s", ss->nqn);
			snprintf(e->hostnqn, sizeof(e->hostnqn), "%s", c->hostnqn);
			snprintf(e->transport, sizeof(e->transport), "%s", c->opts.trname ? c->opts.trname : "");
			e->cntlid = c->cntlid;
			for (unsigned q = 1; q <= c->opts.max_io_queues; q++)
				e->io_queues += (uint16_t)(c->qids[q / 8] >> (q % 8) & 1);
			e->authenticated = c->dhchap && atomic_load(&c->auth_ok);
		}
	}
	pthread_mutex_unlock(&t->lock);
	*out = v;
	return n;
}

/* ---- Asynchronous Event notices ---------------------------------------------------------------- */

struct aen_msg {
	struct nkv_msg m;
	struct nkv_ctrlr *c;
};

static void aen_msg_run(struct nkv_msg *m)
{
	struct aen_msg *a = (struct aen_msg *)m;

	nkv_aen_deliver(a->c);
	nkv_ctrlr_put(a->c);
	free(a);
}

/* Under tgt->lock: the notice @c may be sent now (its type enabled in AEC, not masked), or 0. Each
 * type is masked from its notice until the host reads its log with RAE clear (NVMe 2.0 5.2). */
static uint32_t aen_ready(const struct nkv_ctrlr *c)
{
	if (c->aen_pending && !c->aen_masked && (c->aec & NKV_OAES_NS_ATTR))
		return NKV_AEN_NS_ATTR_CHANGED;
	if (c->ana_pending && !c->ana_masked && (c->aec & NKV_OAES_ANA_CHANGE))
		return NKV_AEN_ANA_CHANGE;
	return 0;
}

/* Under tgt->lock: wake @c's admin queue thread if a notice can go now. */
static void aen_kick(struct nkv_ctrlr *c)
{
	struct aen_msg *a;

	if (!c->aen_msgq || !aen_ready(c) || !(a = malloc(sizeof(*a))))
		return; /* no AER yet, or masked: the next AER or log read delivers it */
	a->c = c;
	nkv_ctrlr_get(c);
	nkv_msgq_send(c->aen_msgq, &a->m, aen_msg_run);
}

void nkv_subsys_ns_changed(struct nkv_subsys *ss, uint32_t nsid)
{
	pthread_mutex_lock(&ss->tgt->lock);
	for (struct nkv_ctrlr *c = ss->ctrlrs; c; c = c->next) {
		c->ns_changed[nsid / 8] |= (uint8_t)(1u << (nsid % 8));
		c->aen_pending = true;
		aen_kick(c);
	}
	pthread_mutex_unlock(&ss->tgt->lock);
}

void nkv_aen_attach(struct nkv_ctrlr *c, struct nkv_msgq *q)
{
	pthread_mutex_lock(&c->ss->tgt->lock);
	c->aen_msgq = q;
	pthread_mutex_unlock(&c->ss->tgt->lock);
}

void nkv_aen_deliver(struct nkv_ctrlr *c)
{
	for (;;) { /* both types may be ready, each for an AER of its own */
		pthread_mutex_lock(&c->ss->tgt->lock);
		uint32_t ev = c->naer > 0 && !atomic_load(&c->dead) ? aen_ready(c) : 0;
		if (ev == NKV_AEN_NS_ATTR_CHANGED) {
			c->aen_pending = false;
			c->aen_masked = true; /* until the host reads log 04h (NVMe 2.0 5.2: one per type) */
		} else if (ev == NKV_AEN_ANA_CHANGE) {
			c->ana_pending = false;
			c->ana_masked = true; /* until the host reads log 0Ch */
		}
		pthread_mutex_unlock(&c->ss->tgt->lock);
		if (!ev)
			return;
		struct nkv_req *req = c->aer[--c->naer];
		nkv_put32(&req->cpl.dw0, ev);
		nkv_req_complete(req, 0);
	}
}

int nkv_target_set_ana_state(struct nkv_target *t, uint32_t grp, enum nkv_ana_state state)
{
	if (grp == 0 || grp > NKV_ANA_GROUPS ||
	    (state != NKV_ANA_OPTIMIZED && state != NKV_ANA_NON_OPTIMIZED && state != NKV_ANA_INACCESSIBLE))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	bool changed = atomic_exchange(&t->ana_state[grp], (uint8_t)state) != state;
	if (changed) {
		atomic_fetch_add(&t->ana_chgcnt, 1);
		/* Every I/O controller: its host re-reads log 0Ch (Linux: nvme_ana_work). */
		for (struct nkv_subsys *ss = t->subsystems; ss; ss = ss->next)
			for (struct nkv_ctrlr *c = ss->ctrlrs; c; c = c->next) {
				c->ana_pending = true;
				aen_kick(c);
			}
	}
	pthread_mutex_unlock(&t->lock);
	return changed;
}

enum nkv_ana_state nkv_target_ana_state(struct nkv_target *t, uint32_t grp)
{
	return grp && grp <= NKV_ANA_GROUPS ? (enum nkv_ana_state)atomic_load(&t->ana_state[grp]) : 0;
}

uint32_t nkv_aen_ana_log(struct nkv_ctrlr *c, uint8_t *buf, bool rgo, bool clear)
{
	struct nkv_subsys *ss = c->ss;
	struct nkv_target *t = ss->tgt;
	uint32_t off = sizeof(struct nkv_ana_log_hdr), ngrps = 0;

	if (clear) { /* before the log is built: a change after this sends a notice again */
		pthread_mutex_lock(&t->lock);
		c->ana_pending = false;
		c->ana_masked = false;
		pthread_mutex_unlock(&t->lock);
	}
	/* One pass over the NSIDs (ascending: Linux's nvme_update_ana_state walks them in order). */
	uint8_t grp_of[NKV_MAX_NSID + 1] = {0};
	uint32_t count[NKV_ANA_GROUPS + 1] = {0};
	for (uint32_t i = 1; i <= NKV_MAX_NSID; i++) {
		struct nkv_ns *ns = nkv_ns_get(ss, i);
		if (ns) {
			grp_of[i] = (uint8_t)ns->anagrpid;
			count[ns->anagrpid]++;
			nkv_ns_put(ns);
		}
	}
	uint64_t chgcnt = atomic_load(&t->ana_chgcnt);
	for (uint32_t g = 1; g <= NKV_ANA_GROUPS; g++) {
		if (!count[g])
			continue; /* a group without namespaces here has no descriptor */
		/* Built aside: a descriptor after an odd number of NSIDs is not 8-byte aligned. */
		struct nkv_ana_group_desc d = {0};
		uint32_t n = 0;
		for (uint32_t i = 1; !rgo && i <= NKV_MAX_NSID; i++)
			if (grp_of[i] == g) {
				uint32_t le;
				nkv_put32(&le, i);
				memcpy(buf + off + sizeof(d) + 4 * n++, &le, 4);
			}
		nkv_put32(&d.anagrpid, g);
		nkv_put32(&d.nnsids, n);
		nkv_put64(&d.chgcnt, chgcnt);
		d.state = atomic_load(&t->ana_state[g]);
		memcpy(buf + off, &d, sizeof(d));
		off += sizeof(d) + 4 * n;
		ngrps++;
	}
	struct nkv_ana_log_hdr h = {0};
	nkv_put64(&h.chgcnt, chgcnt);
	nkv_put16(&h.ngrps, (uint16_t)ngrps);
	memcpy(buf, &h, sizeof(h));
	return off;
}

void nkv_aen_changed_ns_log(struct nkv_ctrlr *c, uint8_t *buf, bool clear)
{
	unsigned n = 0;

	pthread_mutex_lock(&c->ss->tgt->lock);
	for (uint32_t i = 1; i <= NKV_MAX_NSID; i++)
		if (c->ns_changed[i / 8] >> (i % 8) & 1)
			nkv_put32(buf + 4 * n++, i); /* 1,024 NSIDs at most: the list never overflows */
	if (clear) {
		memset(c->ns_changed, 0, sizeof(c->ns_changed));
		c->aen_pending = false; /* everything pending was in this read */
		c->aen_masked = false;
	}
	pthread_mutex_unlock(&c->ss->tgt->lock);
}
