/* SPDX-License-Identifier: Apache-2.0 */
/* target.c - target, subsystem (pool) and namespace (RADOS namespace) registries. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dhchap.h"
#include "common/key.h"
#include "common/log.h"
#include "core.h"
#include "core/auth_dh.h"

void nkv_target_walk_ns(struct nkv_target *t, const bool *stop,
			void (*fn)(struct nkv_subsys *ss, struct nkv_ns *ns, void *arg), void *arg)
{
	/* Subsystems may be removed live: hold each one while its namespaces are visited. */
	struct nkv_subsys *ss = t->subsystems;
	if (ss)
		atomic_fetch_add(&ss->refs, 1);
	while (ss && !*stop) {
		pthread_mutex_unlock(&t->lock);
		for (uint32_t i = 1; i <= NKV_MAX_NSID; i++) {
			struct nkv_ns *ns = nkv_subsys_has_ns(ss, i) ? nkv_ns_get(ss, i) : NULL;
			if (ns) {
				fn(ss, ns, arg);
				nkv_ns_put(ns);
			}
		}
		pthread_mutex_lock(&t->lock);
		struct nkv_subsys *next = ss->removed ? NULL : ss->next; /* a removed one: next pass */
		if (next)
			atomic_fetch_add(&next->refs, 1);
		pthread_mutex_unlock(&t->lock);
		nkv_subsys_put(ss);
		pthread_mutex_lock(&t->lock);
		ss = next;
	}
	if (ss) { /* stopped midway */
		pthread_mutex_unlock(&t->lock);
		nkv_subsys_put(ss);
		pthread_mutex_lock(&t->lock);
	}
}

static void stats_ns(struct nkv_subsys *ss, struct nkv_ns *ns, void *arg)
{
	struct nkv_target *t = arg;
	struct nkv_kvns_info info;

	(void)ss;
	if (!t->stats_stop && t->be->ns_info(ns->kvns, &info) == 0) {
		atomic_store(&ns->used, info.used);
		atomic_store(&ns->capacity, info.capacity);
	}
}

/* Usage (NUSE) and capacity (NSZE) change with every Store: refresh them off the I/O path, so
 * Identify answers from memory and never blocks a reactor on the cluster. */
static void *stats_main(void *arg)
{
	struct nkv_target *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->stats_stop) {
		struct timespec ts = nkv_abstime_in_ms(t->stats_ms);
		pthread_cond_timedwait(&t->stats_cv, &t->lock, &ts);
		nkv_target_walk_ns(t, &t->stats_stop, stats_ns, t);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int nkv_target_create(const struct nkv_backend_conf *conf, struct nkv_target **out)
{
	const struct nkv_kvdev_ops *be = nkv_kvdev_find(conf ? conf->name : NULL);
	struct nkv_target *t;
	int rc;

	if (!be) {
		NKV_ERR("unknown backend '%s'", conf && conf->name ? conf->name : "(null)");
		return -EINVAL;
	}
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	t->be = be;
	atomic_init(&t->next_cntlid, 0);
	t->cntlid_min = 1;
	t->cntlid_max = NKV_CNTLID_MAX;
	for (unsigned g = 0; g <= NKV_ANA_GROUPS; g++)
		atomic_init(&t->ana_state[g], NKV_ANA_OPTIMIZED);
	atomic_init(&t->ana_chgcnt, 0);
	atomic_init(&t->genctr, 1);
	unsigned seq = 0;
	nkv_dhchap_random(&seq, sizeof(seq)); /* S1 starts anywhere: a restart does not replay numbers */
	atomic_init(&t->auth_seq, seq);
	if (!(t->dh = nkv_dh_pool_create())) {
		free(t);
		return -ENOMEM;
	}
	t->stats_ms = conf && conf->stats_interval_ms ? conf->stats_interval_ms : 5000;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->stats_cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = be->open(conf, &t->dev)) < 0) {
		nkv_dh_pool_destroy(t->dh);
		free(t);
		return rc;
	}
	snprintf(t->gateway, sizeof(t->gateway), "%s", conf && conf->gateway && *conf->gateway ? conf->gateway : "gateway");
	if ((rc = -pthread_create(&t->stats_thread, NULL, stats_main, t)) < 0) {
		be->close(t->dev);
		nkv_dh_pool_destroy(t->dh);
		free(t);
		return rc;
	}
	if ((rc = nkv_cache_start(t)) < 0) {
		pthread_mutex_lock(&t->lock);
		t->stats_stop = true;
		pthread_cond_signal(&t->stats_cv);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->stats_thread, NULL);
		be->close(t->dev);
		nkv_dh_pool_destroy(t->dh);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void nkv_target_destroy(struct nkv_target *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stats_stop = true;
	pthread_cond_signal(&t->stats_cv);
	pthread_mutex_unlock(&t->lock);
	/* Both threads told before either is joined: on an unreachable cluster each may be in a call
	 * bounded by the op timeout, and those run out together. */
	nkv_cache_stop(t);
	pthread_join(t->stats_thread, NULL);
	while (t->subsystems) {
		struct nkv_subsys *ss = t->subsystems;
		t->subsystems = ss->next;
		nkv_subsys_free(ss);
	}
	for (int peer = 0; peer < 2; peer++) {
		struct nkv_port *p = peer ? t->peer_ports : t->ports;
		while (p) {
			struct nkv_port *next = p->next;
			free(p);
			p = next;
		}
	}
	free(t->discovery);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->stats_cv);
	nkv_dh_pool_destroy(t->dh); /* no queue pair is left to wait for a DH job */
	t->be->close(t->dev);
	free(t);
}

struct nkv_subsys *nkv_target_find_subsys(struct nkv_target *t, const char *nqn)
{
	struct nkv_subsys *ss;

	pthread_mutex_lock(&t->lock);
	for (ss = t->subsystems; ss && strcmp(ss->nqn, nqn) != 0; ss = ss->next)
		;
	pthread_mutex_unlock(&t->lock);
	return ss;
}

struct nkv_subsys *nkv_target_get_subsys(struct nkv_target *t, const char *nqn)
{
	struct nkv_subsys *ss;

	pthread_mutex_lock(&t->lock);
	for (ss = t->subsystems; ss && strcmp(ss->nqn, nqn) != 0; ss = ss->next)
		;
	if (ss)
		atomic_fetch_add(&ss->refs, 1);
	pthread_mutex_unlock(&t->lock);
	return ss;
}

int nkv_subsys_add(struct nkv_target *t, const char *nqn, const char *pool, struct nkv_subsys **out)
{
	struct nkv_subsys *ss;
	struct nkv_kvns *probe;
	int rc;

	if (!nqn || !pool || strlen(nqn) >= NKV_NQN_MAX || strlen(pool) >= sizeof(ss->pool) || !*pool)
		return -EINVAL;
	if (nkv_target_find_subsys(t, nqn))
		return -EEXIST;
	/* Fail now, with a clear error, if the pool does not exist. */
	if ((rc = t->be->ns_open(t->dev, pool, "", &probe)) < 0)
		return rc;
	t->be->ns_close(probe);
	if (!(ss = calloc(1, sizeof(*ss))))
		return -ENOMEM;
	ss->tgt = t;
	atomic_init(&ss->refs, 1); /* the target's list */
	ss->allow_any = true;      /* until a host is allowed (nkv_subsys_allow_host) */
	snprintf(ss->nqn, sizeof(ss->nqn), "%s", nqn);
	snprintf(ss->pool, sizeof(ss->pool), "%s", pool);
	/* A stable serial number per subsystem, derived from its NQN. */
	uint8_t id[16];
	nkv_id128("subsystem", nqn, id);
	snprintf(ss->sn, sizeof(ss->sn), "%016" PRIx64, nkv_get64(id));
	pthread_mutex_lock(&t->lock); /* the discovery log walks the list */
	ss->next = t->subsystems;
	t->subsystems = ss;
	pthread_mutex_unlock(&t->lock);
	atomic_fetch_add(&t->genctr, 1);
	NKV_INFO("subsystem %s exports pool %s", nqn, pool);
	if (out)
		*out = ss;
	return 0;
}

static void hex16(char out[33], const uint8_t b[16])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/*
 * The IDs hosts key namespaces by: Linux refuses a namespace whose EUI64, NGUID or UUID equals
 * another's in the subsystem ("duplicate IDs"), so the backend's identity of the data (cluster
 * fsid, pool, RADOS namespace) is not enough when two NSIDs share a RADOS namespace. The subsystem
 * NQN and the NSID name the view of that data. Nothing random or per process goes in, so a restart,
 * or the same configuration on another gateway of the cluster (multipath), gives the same IDs.
 */
static void ns_ids(const struct nkv_subsys *ss, struct nkv_ns *ns)
{
	char data[33], view[NKV_NQN_MAX + 16], base[33];
	uint8_t id[16];

	hex16(data, ns->info.id);
	/* The NSID is last and has no '/', so no two (NQN, NSID) pairs give the same string. */
	snprintf(view, sizeof(view), "%s/%u", ss->nqn, ns->nsid);
	nkv_id128(data, view, id);
	hex16(base, id);
	/* One label per ID, so the three are unrelated bit patterns rather than prefixes of each other. */
	nkv_id128("nguid", base, ns->nguid);
	nkv_id128("uuid", base, ns->uuid);
	ns->uuid[6] = (uint8_t)((ns->uuid[6] & 0x0f) | 0x80); /* RFC 9562 version 8: custom (hash-based) */
	ns->uuid[8] = (uint8_t)((ns->uuid[8] & 0x3f) | 0x80); /* variant 10 */
	nkv_id128("eui64", base, id);
	memcpy(ns->eui64, id, 8);
	/* No IEEE OUI of our own: a unicast, locally administered EUI-64 (U/L bit set, I/G clear). */
	ns->eui64[0] = (uint8_t)((ns->eui64[0] & ~1u) | 2u);
}

/* Open namespace @conf into @ns (a fresh or a drained slot). @return 0 or -errno, @ns closed. */
static int ns_open(struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_ns_conf *conf)
{
	struct nkv_target *t = ss->tgt;
	int rc;

	ns->nsid = conf->nsid;
	ns->read_only = conf->read_only;
	ns->anagrpid = conf->ana_group ? conf->ana_group : 1;
	ns->kvns = NULL;
	if ((rc = t->be->ns_open(t->dev, ss->pool, conf->rados_ns ? conf->rados_ns : "", &ns->kvns)) < 0 ||
	    (rc = t->be->ns_info(ns->kvns, &ns->info)) < 0)
		goto fail;
	ns_ids(ss, ns);
	atomic_store(&ns->used, ns->info.used);
	atomic_store(&ns->capacity, ns->info.capacity);
	if ((rc = nkv_ns_check_max_value(ss, ns, conf->max_value)) < 0)
		goto fail;
	ns->max_value = conf->max_value ? conf->max_value : NKV_DEFAULT_MAX_VALUE;
	if (ns->max_value > nkv_ns_value_limit(ns))
		ns->max_value = nkv_ns_value_limit(ns);
	if ((rc = nkv_exec_init(ss, ns, conf->exec, conf->nexec)) < 0)
		goto fail;
	if ((rc = nkv_cache_open(ss, ns, conf->rados_ns, conf->cache)) < 0) {
		nkv_exec_free(ns);
		goto fail;
	}
	memset(&ns->stats, 0, sizeof(ns->stats));
	return 0;
fail:
	if (ns->kvns)
		t->be->ns_close(ns->kvns);
	ns->kvns = NULL;
	return rc;
}

int nkv_ns_add(struct nkv_subsys *ss, const struct nkv_ns_conf *conf)
{
	struct nkv_ns *ns;
	int rc;

	if (conf->nsid == 0 || conf->nsid > NKV_MAX_NSID || conf->ana_group > NKV_ANA_GROUPS)
		return -EINVAL;
	if (atomic_load(&ss->ns[conf->nsid]))
		return -EEXIST;
	if (ss->max_ns && nkv_subsys_ns_count(ss) >= ss->max_ns)
		return -ENOSPC;
	/* The NSID's struct is reused: a command that read the old pointer just before the removal
	 * may still look at it (and back off, nkv_ns_get), so it is never freed while the target runs. */
	if ((ns = ss->slot[conf->nsid])) {
		if ((rc = nkv_ns_reap(ss, ns, 0)) < 0)
			return rc; /* still draining commands of its previous life */
	} else if (!(ns = calloc(1, sizeof(*ns)))) {
		return -ENOMEM;
	}
	if ((rc = ns_open(ss, ns, conf)) < 0) {
		if (!ss->slot[conf->nsid])
			free(ns);
		return rc;
	}
	ss->slot[conf->nsid] = ns;
	if (ns->max_value > atomic_load(&ss->max_value)) /* MDTS first, so no namespace outgrows it */
		atomic_store(&ss->max_value, ns->max_value);
	/* Pairs with the acquire load in nkv_ns_get(). */
	atomic_store_explicit(&ss->ns[conf->nsid], ns, memory_order_release);
	NKV_INFO("%s: nsid %u = RADOS namespace '%s', max value %" PRIu64 "%s", ss->nqn, ns->nsid,
		 conf->rados_ns ? conf->rados_ns : "", ns->max_value, ns->read_only ? ", read-only" : "");
	nkv_subsys_ns_changed(ss, conf->nsid); /* hosts already connected rescan (none at startup) */
	return 0;
}

int nkv_subsys_allow_host_auth(struct nkv_subsys *ss, const char *hostnqn, const struct nkv_dhchap_conf *conf)
{
	struct nkv_dhchap_host *auth = NULL;
	int rc = 0;

	if (!hostnqn || !*hostnqn || strlen(hostnqn) >= NKV_NQN_MAX)
		return -EINVAL;
	/* The settings exist before the host is on the list: no Connect slips in unauthenticated. */
	if (conf && (rc = nkv_dhchap_host_build(ss, hostnqn, conf, &auth)) < 0)
		return rc;
	pthread_mutex_lock(&ss->tgt->lock);
	for (unsigned i = 0; i < ss->nhosts; i++)
		if (strcmp(ss->hosts[i], hostnqn) == 0)
			rc = conf ? -EEXIST : 0;
	if (rc == 0 && !(ss->allow_any == false && nkv_subsys_host_allowed(ss, hostnqn))) {
		char(*h)[NKV_NQN_MAX] = realloc(ss->hosts, (ss->nhosts + 1) * sizeof(*h));
		struct nkv_dhchap_host **a = h ? realloc(ss->dhchap, (ss->nhosts + 1) * sizeof(*a)) : NULL;
		if (h)
			ss->hosts = h;
		if (a)
			ss->dhchap = a;
		if (!h || !a) {
			rc = -ENOMEM;
		} else {
			snprintf(h[ss->nhosts], NKV_NQN_MAX, "%s", hostnqn);
			a[ss->nhosts++] = auth;
			auth = NULL;
			ss->allow_any = false;
		}
	}
	pthread_mutex_unlock(&ss->tgt->lock);
	nkv_dhchap_host_free(auth);
	if (rc == 0)
		atomic_fetch_add(&ss->tgt->genctr, 1);
	return rc;
}

int nkv_subsys_allow_host(struct nkv_subsys *ss, const char *hostnqn)
{
	return nkv_subsys_allow_host_auth(ss, hostnqn, NULL);
}
