/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - the control plane's state model (ctl_int.h) and the reconciler that makes the running
 * target match it: subsystems, namespaces, hosts and this gateway's listeners are added, changed
 * and removed live, through the core's live-change functions (nkv_target.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKV_LOG_COMPONENT "control"
#include "common/log.h"
#include "control/cache_policy.h"
#include "control/ctl_int.h"
#include "nkv/nkv_target.h"

json_object *st_new(void)
{
	json_object *st = json_object_new_object();
	json_object_object_add(st, "epoch", json_object_new_int64(0));
	json_object_object_add(st, "subsystems", json_object_new_object());
	json_object_object_add(st, "listeners", json_object_new_object());
	json_object_object_add(st, "gateways", json_object_new_object());
	return st;
}

json_object *st_get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

uint64_t st_epoch(json_object *st)
{
	uint64_t e = 0;
	st_u64(st, "epoch", 0, &e);
	return e;
}

json_object *st_subsystems(json_object *st)
{
	return st_get(st, "subsystems");
}

json_object *st_listeners(json_object *st)
{
	return st_get(st, "listeners");
}

json_object *st_gateways(json_object *st)
{
	return st_get(st, "gateways");
}

const char *st_ana_name(enum nkv_ana_state s)
{
	switch (s) {
	case NKV_ANA_OPTIMIZED: return "optimized";
	case NKV_ANA_NON_OPTIMIZED: return "non-optimized";
	case NKV_ANA_INACCESSIBLE: return "inaccessible";
	default: return NULL;
	}
}

enum nkv_ana_state st_ana_parse(const char *name)
{
	for (enum nkv_ana_state s = NKV_ANA_OPTIMIZED; s <= NKV_ANA_INACCESSIBLE; s++)
		if (name && strcmp(name, st_ana_name(s)) == 0)
			return s;
	return 0;
}

bool st_ana_ok(json_object *ana)
{
	if (!ana)
		return true;
	if (!json_object_is_type(ana, json_type_object))
		return false;
	json_object_object_foreach(ana, k, v) {
		char *end;
		unsigned long g = strtoul(k, &end, 10);
		char canon[16];
		snprintf(canon, sizeof(canon), "%lu", g);
		if (!*k || *end || g == 0 || g > NKV_ANA_GROUPS || strcmp(canon, k) != 0 ||
		    !json_object_is_type(v, json_type_string) || !st_ana_parse(json_object_get_string(v)))
			return false;
	}
	return true;
}

enum nkv_ana_state st_ana_of(json_object *g, unsigned grp)
{
	char k[16];
	snprintf(k, sizeof(k), "%u", grp);
	enum nkv_ana_state s = st_ana_parse(st_str(st_get(g, "ana"), k));
	return s ? s : NKV_ANA_OPTIMIZED;
}

int st_claim_range(json_object *st, const char *gw)
{
	bool used[ST_CNTLID_RANGES] = {0};
	uint64_t r;

	if (st_get(st_gateways(st), gw))
		return 0;
	if (!st_gateways(st))
		json_object_object_add(st, "gateways", json_object_new_object());
	json_object_object_foreach(st_gateways(st), k, held) {
		(void)k;
		if (st_u64(held, "cntlid_range", 0, &r) == 0 && r < ST_CNTLID_RANGES)
			used[r] = true;
	}
	for (r = 0; r < ST_CNTLID_RANGES && used[r]; r++)
		;
	if (r == ST_CNTLID_RANGES)
		return -ENOSPC;
	json_object *g = json_object_new_object();
	json_object_object_add(g, "gateway", json_object_new_string(gw));
	json_object_object_add(g, "cntlid_range", json_object_new_int64((int64_t)r));
	json_object_object_add(st_gateways(st), gw, g);
	return 1;
}

int st_u64(json_object *o, const char *key, uint64_t def, uint64_t *out)
{
	json_object *v = st_get(o, key);
	char *end;

	*out = def;
	if (!v || json_object_is_type(v, json_type_null))
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		if (json_object_get_int64(v) < 0)
			return -EINVAL;
		*out = json_object_get_uint64(v);
		return 0;
	}
	if (json_object_is_type(v, json_type_string)) { /* proto3 JSON writes 64-bit integers so */
		const char *s = json_object_get_string(v);
		errno = 0;
		unsigned long long x = strtoull(s, &end, 10);
		if (!*s || *end || errno || *s == '-')
			return -EINVAL;
		*out = x;
		return 0;
	}
	return -EINVAL;
}

const char *st_str(json_object *o, const char *key)
{
	json_object *v = st_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

int st_bool(json_object *o, const char *key)
{
	json_object *v = st_get(o, key);
	return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

json_object *st_copy(json_object *st)
{
	json_object *c = NULL;
	return json_object_deep_copy(st, &c, NULL) == 0 ? c : NULL;
}

void st_listener_key(char *out, size_t n, const char *gw, const char *addr, unsigned port)
{
	snprintf(out, n, "%s/%s/%u", gw, addr, port);
}

enum st_access st_access(json_object *ss)
{
	if (st_bool(ss, "allow_any_host"))
		return ST_ANY;
	if (st_bool(ss, "loopback_any_host") && json_object_object_length(st_get(ss, "hosts")) == 0)
		return ST_LOOPBACK;
	return ST_ALLOWLIST;
}

int st_check(json_object *st, const char **why)
{
	uint64_t x;

	if (!json_object_is_type(st, json_type_object) || st_u64(st, "epoch", 0, &x) < 0) {
		*why = "not a state object (no epoch)";
		return -EINVAL;
	}
	if (!json_object_is_type(st_subsystems(st), json_type_object) ||
	    !json_object_is_type(st_listeners(st), json_type_object)) {
		*why = "'subsystems' and 'listeners' must be objects";
		return -EINVAL;
	}
	json_object_object_foreach(st_subsystems(st), nqn, ss) {
		if (!st_str(ss, "pool") || !st_str(ss, "nqn") || strcmp(st_str(ss, "nqn"), nqn) != 0 ||
		    !json_object_is_type(st_get(ss, "hosts"), json_type_object) ||
		    !json_object_is_type(st_get(ss, "namespaces"), json_type_object)) {
			*why = "a subsystem without nqn, pool, hosts or namespaces";
			return -EINVAL;
		}
		json_object_object_foreach(st_get(ss, "namespaces"), k, ns) {
			(void)k;
			if (st_u64(ns, "nsid", 0, &x) < 0 || x == 0 || x > NKV_MAX_NSID || st_u64(ns, "max_value", 0, &x) < 0 ||
			    st_u64(ns, "ana_group", 1, &x) < 0 || x == 0 || x > NKV_ANA_GROUPS) {
				*why = "a namespace with a bad nsid, max_value or ana_group";
				return -EINVAL;
			}
			struct nkv_cache_policy p = {0};
			char w[256];
			if (st_get(ns, "cache") && ctl_cache_policy_from_json(st_get(ns, "cache"), NULL, &p, w, sizeof(w)) < 0) {
				*why = "a namespace with a malformed cache policy";
				return -EINVAL;
			}
		}
	}
	json_object_object_foreach(st_listeners(st), lk, l) {
		(void)lk;
		if (!st_str(l, "gateway") || !st_str(l, "address") || st_u64(l, "port", 0, &x) < 0 || x == 0 || x > 65535) {
			*why = "a listener without gateway, address or port";
			return -EINVAL;
		}
	}
	if (st_gateways(st) && !json_object_is_type(st_gateways(st), json_type_object)) {
		*why = "'gateways' must be an object";
		return -EINVAL;
	}
	uint32_t held = 0;
	if (!st_gateways(st))
		return 0; /* a state from before ranges, or not a group's */
	json_object_object_foreach(st_gateways(st), gk, g) {
		if (!st_str(g, "gateway") || strcmp(st_str(g, "gateway"), gk) != 0 ||
		    st_u64(g, "cntlid_range", 0, &x) < 0 || x >= ST_CNTLID_RANGES || (held & (1u << x)) ||
		    !st_ana_ok(st_get(g, "ana"))) {
			*why = "a gateway without its name, with a bad or twice held controller ID range, or bad ANA states";
			return -EINVAL;
		}
		held |= 1u << x;
	}
	return 0;
}

/* ---- reconcile --------------------------------------------------------------------------------- */

static bool same(json_object *a, json_object *b, const char *key)
{
	const char *x = json_object_to_json_string_ext(st_get(a, key), JSON_C_TO_STRING_PLAIN);
	char *copy = strdup(x ? x : "null");
	const char *y = json_object_to_json_string_ext(st_get(b, key), JSON_C_TO_STRING_PLAIN);
	bool eq = copy && strcmp(copy, y ? y : "null") == 0;
	free(copy);
	return eq;
}

/* Both values as integers (proto3 JSON may give a string where the file had a number). */
static bool same_u64(json_object *a, json_object *b, const char *key)
{
	uint64_t x, y;
	return st_u64(a, key, 0, &x) == 0 && st_u64(b, key, 0, &y) == 0 && x == y;
}

/* The cache policy of state namespace @ns into @p. @return @p, or NULL (no cache). The state was
 * checked when it was read or made (st_check, the methods), so the policy parses. */
static const struct nkv_cache_policy *ns_cache(json_object *ns, struct nkv_cache_policy *p)
{
	char why[256];
	*p = (struct nkv_cache_policy){0};
	if (!st_get(ns, "cache"))
		return NULL;
	if (ctl_cache_policy_from_json(st_get(ns, "cache"), NULL, p, why, sizeof(why)) < 0)
		NKV_ERR("namespace %s: %s: the defaults apply", json_object_get_string(st_get(ns, "nsid")), why);
	return p;
}

static int ns_apply(struct nkv_subsys *ss, json_object *ns)
{
	uint64_t nsid, maxv, grp;
	struct nkv_cache_policy pol;
	st_u64(ns, "nsid", 0, &nsid);
	st_u64(ns, "max_value", 0, &maxv);
	st_u64(ns, "ana_group", 1, &grp);
	struct nkv_ns_conf c = {.nsid = (uint32_t)nsid, .rados_ns = st_str(ns, "rados_namespace"),
				.max_value = maxv, .read_only = st_bool(ns, "read_only"), .cache = ns_cache(ns, &pol),
				.ana_group = (uint32_t)grp};
	return nkv_ns_add(ss, &c);
}

static int host_apply(struct nkv_subsys *ss, json_object *h)
{
	const char *key = st_str(h, "dhchap_key"), *ckey = st_str(h, "dhchap_ctrl_key");
	struct nkv_dhchap_conf dc = {.key = key, .ctrl_key = ckey && *ckey ? ckey : NULL};
	return nkv_subsys_allow_host_auth(ss, st_str(h, "host_nqn"), key && *key ? &dc : NULL);
}

/* Make running subsystem @ss (applied as @have) match @want; @have is updated entry by entry. */
static int subsys_reconcile(struct nkv_ctl *ctl, struct nkv_subsys *ss, json_object *have, json_object *want)
{
	const char *nqn = st_str(want, "nqn");
	json_object *hh = st_get(have, "hosts"), *wh = st_get(want, "hosts");
	json_object *hn = st_get(have, "namespaces"), *wn = st_get(want, "namespaces");
	int first = 0, rc;
	uint64_t maxns;

	st_u64(want, "max_namespaces", 0, &maxns);
	nkv_subsys_set_max_ns(ss, (unsigned)maxns);
	json_object_object_add(have, "max_namespaces", json_object_get(st_get(want, "max_namespaces")));
	/* Hosts: removed ones (or ones whose secrets changed) first, then the new ones. */
	json_object_object_foreach(hh, h, hv) {
		json_object *w = st_get(wh, h);
		if (w && same(w, hv, "dhchap_key") && same(w, hv, "dhchap_ctrl_key"))
			continue;
		nkv_subsys_disallow_host(ss, h);
		json_object_object_del(hh, h);
	}
	bool hosts_changed = false;
	json_object_object_foreach(wh, h2, wv) {
		if (st_get(hh, h2))
			continue;
		hosts_changed = true;
		if ((rc = host_apply(ss, wv)) < 0) {
			NKV_ERR("%s: cannot allow host %s: %s", nqn, h2, strerror(-rc));
			first = first ? first : rc;
			continue;
		}
		json_object_object_add(hh, h2, json_object_get(wv));
	}
	/* After the hosts: allowing one closes an open subsystem in the core (the flags' meaning), so
	 * the state's explicit setting is applied again whenever the allowlist moved. Whatever narrows
	 * who may connect goes first, so that no moment admits more than either state. */
	enum st_access acc = st_access(want);
	if (hosts_changed || st_access(have) != acc || !st_get(have, "allow_any_host")) {
		if (acc == ST_LOOPBACK) {
			nkv_subsys_set_loopback_only(ss, true);
			nkv_subsys_set_allow_any(ss, true);
		} else {
			nkv_subsys_set_allow_any(ss, acc == ST_ANY);
			nkv_subsys_set_loopback_only(ss, false);
		}
		json_object_object_add(have, "allow_any_host", json_object_new_boolean(acc == ST_ANY));
		json_object_object_add(have, "loopback_any_host", json_object_new_boolean(acc == ST_LOOPBACK));
	}
	/* Namespaces: removed or re-pointed ones, then attribute changes, then new ones. */
	json_object_object_foreach(hn, n, nv) {
		json_object *w = st_get(wn, n);
		uint64_t nsid;
		st_u64(nv, "nsid", 0, &nsid);
		/* A cache and an ANA group are given when a namespace is added: one that gains or loses its
		 * cache, or moves to another ANA group, is added again. */
		uint64_t wg = 1, hg = 1;
		st_u64(w, "ana_group", 1, &wg);
		st_u64(nv, "ana_group", 1, &hg);
		if (w && same(w, nv, "rados_namespace") && !st_get(w, "cache") == !st_get(nv, "cache") && wg == hg)
			continue;
		nkv_ns_remove(ss, (uint32_t)nsid, ctl->conf.drain_ms);
		json_object_object_del(hn, n);
	}
	json_object_object_foreach(wn, n2, wnv) {
		json_object *h = st_get(hn, n2);
		uint64_t nsid, maxv;
		st_u64(wnv, "nsid", 0, &nsid);
		st_u64(wnv, "max_value", 0, &maxv);
		if (!h) {
			if ((rc = ns_apply(ss, wnv)) < 0) {
				NKV_ERR("%s: cannot add namespace %s (RADOS namespace '%s'): %s", nqn, n2,
					st_str(wnv, "rados_namespace") ? st_str(wnv, "rados_namespace") : "", strerror(-rc));
				first = first ? first : rc;
				continue;
			}
		} else {
			if (st_bool(h, "read_only") != st_bool(wnv, "read_only"))
				nkv_ns_set_read_only(ss, (uint32_t)nsid, st_bool(wnv, "read_only"));
			if (!same_u64(h, wnv, "max_value") && (rc = nkv_ns_set_max_value(ss, (uint32_t)nsid, maxv)) < 0) {
				first = first ? first : rc;
				continue;
			}
			struct nkv_cache_policy pol;
			if (st_get(wnv, "cache") && !same(h, wnv, "cache") &&
			    (rc = nkv_ns_set_cache_policy(ss, (uint32_t)nsid, ns_cache(wnv, &pol))) < 0) {
				NKV_ERR("%s: cannot change the cache policy of namespace %s: %s", nqn, n2, strerror(-rc));
				first = first ? first : rc;
				continue;
			}
		}
		json_object_object_add(hn, n2, json_object_get(wnv));
	}
	return first;
}

static int subsys_create(struct nkv_ctl *ctl, json_object *want, json_object *applied_ss)
{
	const char *nqn = st_str(want, "nqn"), *shm = st_str(want, "shm_socket");
	struct nkv_subsys *ss;
	int rc;

	if ((rc = nkv_subsys_add(ctl->conf.tgt, nqn, st_str(want, "pool"), &ss)) < 0) {
		NKV_ERR("cannot export pool '%s' as %s: %s", st_str(want, "pool"), nqn, strerror(-rc));
		return rc;
	}
	json_object *have = json_object_new_object();
	json_object_object_add(have, "nqn", json_object_new_string(nqn));
	json_object_object_add(have, "pool", json_object_new_string(st_str(want, "pool")));
	json_object_object_add(have, "hosts", json_object_new_object());
	json_object_object_add(have, "namespaces", json_object_new_object());
	json_object_object_add(applied_ss, nqn, have);
	int shm_rc = 0; /* the caller hears of it ("committed but not applied"), after the rest applied */
	if (shm && *shm && ctl->conf.hooks.shm_listen) {
		if ((shm_rc = ctl->conf.hooks.shm_listen(ctl->conf.hooks.arg, nqn, shm)) < 0)
			NKV_ERR("%s: cannot serve it over shared memory on %s: %s", nqn, shm, strerror(-shm_rc));
		else
			json_object_object_add(have, "shm_socket", json_object_new_string(shm));
	}
	const char *vfu = st_str(want, "vfio_user_socket"), *vfu_host = st_str(want, "vfio_user_host");
	if (vfu && *vfu && ctl->conf.hooks.vfu_listen) {
		int vrc = ctl->conf.hooks.vfu_listen(ctl->conf.hooks.arg, nqn, vfu, vfu_host ? vfu_host : "");
		if (vrc < 0) {
			NKV_ERR("%s: cannot serve it over vfio-user on %s: %s", nqn, vfu, strerror(-vrc));
			shm_rc = shm_rc < 0 ? shm_rc : vrc;
		} else {
			json_object_object_add(have, "vfio_user_socket", json_object_new_string(vfu));
		}
	}
	rc = subsys_reconcile(ctl, ss, have, want);
	return rc < 0 ? rc : (shm_rc < 0 ? shm_rc : rc);
}

static int listeners_reconcile(struct nkv_ctl *ctl, json_object *have, json_object *want)
{
	int first = 0, rc = 0;

	json_object_object_foreach(have, k, hv) {
		json_object *w = st_get(want, k);
		uint64_t port;
		if (w && st_bool(w, "tls") == st_bool(hv, "tls"))
			continue;
		st_u64(hv, "port", 0, &port);
		if (ctl->conf.hooks.tcp_unlisten &&
		    (rc = ctl->conf.hooks.tcp_unlisten(ctl->conf.hooks.arg, st_str(hv, "address"), (unsigned)port)) < 0 &&
		    rc != -ENOENT) {
			NKV_ERR("cannot stop listening on %s: %s", k, strerror(-rc));
			first = first ? first : rc;
			continue;
		}
		json_object_object_del(have, k);
	}
	json_object_object_foreach(want, k2, wv) {
		uint64_t port;
		if (st_get(have, k2) || strcmp(st_str(wv, "gateway"), ctl->gateway) != 0)
			continue; /* running, or another gateway's */
		st_u64(wv, "port", 0, &port);
		if (!ctl->conf.hooks.tcp_listen ||
		    (rc = ctl->conf.hooks.tcp_listen(ctl->conf.hooks.arg, st_str(wv, "address"), (unsigned)port,
						     st_bool(wv, "tls"))) < 0) {
			NKV_ERR("cannot listen on %s:%" PRIu64 ": %s", st_str(wv, "address"), port,
				strerror(ctl->conf.hooks.tcp_listen ? -rc : ENOTSUP));
			first = first ? first : (ctl->conf.hooks.tcp_listen ? rc : -ENOTSUP);
			continue;
		}
		json_object_object_add(have, k2, json_object_get(wv));
	}
	return first;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void st_reconcile_gateways(struct nkv_ctl *ctl, json_object *applied, json_object *want)
{
	json_object *mine = st_get(st_gateways(want), ctl->gateway), *had = st_get(st_gateways(applied), ctl->gateway);
	uint64_t r = ST_CNTLID_RANGES, was = ST_CNTLID_RANGES;
	uint16_t lo = 1, hi = NKV_CNTLID_MAX;

	if (ctl->group[0]) {
		st_u64(mine, "cntlid_range", ST_CNTLID_RANGES, &r);
		st_u64(had, "cntlid_range", ST_CNTLID_RANGES, &was);
		lo = r < ST_CNTLID_RANGES ? (uint16_t)(r * ST_CNTLID_RANGE + 1) : 0;
		hi = r < ST_CNTLID_RANGES ? (uint16_t)((r + 1) * ST_CNTLID_RANGE) : 0;
		if (r != was || !st_get(applied, "gateways")) {
			if (lo)
				NKV_INFO("group %s: gateway %s gives controller IDs %u-%u", ctl->group, ctl->gateway, lo, hi);
			else
				NKV_ERR("group %s: gateway %s has no controller ID range in the group's state yet: Connects "
					"are refused until it joins (see the log above)", ctl->group, ctl->gateway);
		}
	}
	nkv_target_set_cntlid_range(ctl->conf.tgt, lo, hi);
	/* This gateway's ANA states: a change notifies every controller here (nkv_target_set_ana_state). */
	for (unsigned g = 1; g <= NKV_ANA_GROUPS; g++) {
		enum nkv_ana_state s = st_ana_of(mine, g);
		if (nkv_target_set_ana_state(ctl->conf.tgt, g, s) > 0)
			NKV_INFO("group %s: gateway %s: ANA group %u is %s now (ANA Change notices sent)", ctl->group,
				 ctl->gateway, g, st_ana_name(s));
	}
	json_object_object_add(applied, "gateways",
			       st_gateways(want) ? st_copy(st_gateways(want)) : json_object_new_object());

	/* The other gateways' listeners, in key order so that every pass gives the same port IDs. */
	size_t n = 0, cap = (size_t)json_object_object_length(st_listeners(want));
	const char **keys = calloc(cap + 1, sizeof(*keys));
	struct nkv_peer_listener *pl = calloc(cap + 1, sizeof(*pl));
	if (!keys || !pl) {
		free(keys);
		free(pl);
		return;
	}
	json_object_object_foreach(st_listeners(want), k, l)
		if (ctl->group[0] && strcmp(st_str(l, "gateway"), ctl->gateway) != 0) /* no group: no other gateway */
			keys[n++] = k;
	qsort(keys, n, sizeof(*keys), key_cmp);
	for (size_t i = 0; i < n; i++) {
		json_object *l = st_get(st_listeners(want), keys[i]);
		uint64_t port;
		st_u64(l, "port", 0, &port);
		/* Port IDs of their own (this gateway's transports number theirs from 1). */
		pl[i] = (struct nkv_peer_listener){.traddr = st_str(l, "address"), .port = (unsigned)port,
						   .tls = st_bool(l, "tls"), .portid = (uint16_t)(0x8000u + i)};
	}
	int rc = nkv_target_set_peer_listeners(ctl->conf.tgt, pl, (unsigned)n);
	if (rc < 0)
		NKV_ERR("group %s: the discovery log cannot list the other gateways' listeners: %s", ctl->group, strerror(-rc));
	free(keys);
	free(pl);
}

int st_reconcile(struct nkv_ctl *ctl, json_object *applied, json_object *want)
{
	json_object *have_ss = st_subsystems(applied), *want_ss = st_subsystems(want);
	int first = 0, rc;

	json_object_object_foreach(have_ss, nqn, hv) {
		(void)hv;
		json_object *w = st_get(want_ss, nqn);
		if (w && same(w, hv, "pool"))
			continue;
		nkv_subsys_remove(ctl->conf.tgt, nqn, ctl->conf.drain_ms);
		json_object_object_del(have_ss, nqn);
	}
	json_object_object_foreach(want_ss, nqn2, wv) {
		json_object *h = st_get(have_ss, nqn2);
		struct nkv_subsys *ss = h ? nkv_target_subsys(ctl->conf.tgt, nqn2) : NULL;
		rc = ss ? subsys_reconcile(ctl, ss, h, wv) : subsys_create(ctl, wv, have_ss);
		first = first ? first : rc;
	}
	rc = listeners_reconcile(ctl, st_listeners(applied), st_listeners(want));
	first = first ? first : rc;
	st_reconcile_gateways(ctl, applied, want);
	json_object_object_add(applied, "epoch", json_object_new_int64((int64_t)st_epoch(want)));
	return first;
}
