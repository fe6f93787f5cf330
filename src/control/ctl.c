/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.c - the control plane's methods (one per RPC of proto/rados_nkv/v1/control.proto, JSON in and
 * out, ctl.h) and the watcher that applies the group's changes.
 *
 * A change is made as an optimistic transaction: read the stored state, apply the method to a copy,
 * commit it with a compare-and-set on the epoch (store.c) and start again from the fresh state when
 * another gateway committed first; then apply it to this gateway's target (state.c) and notify the
 * group. Validation happens before the commit, against the state the change is made from, so what
 * the store holds is always a state every gateway can apply.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NKV_LOG_COMPONENT "control"
#include "common/clock.h"
#include "common/exposure.h"
#include "common/log.h"
#include "control/cache_policy.h"
#include "control/ctl_int.h"
#include "nkv/nkv_target.h"

#define COMMIT_TRIES 32

struct call {
	struct nkv_ctl *ctl;
	json_object *req;
	json_object *resp;
	char err[1024];
};

static int fail(struct call *c, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- request fields ---------------------------------------------------------------------------- */

static const char *req_str(struct call *c, const char *key)
{
	const char *s = st_str(c->req, key);
	return s ? s : "";
}

static int req_u64(struct call *c, const char *key, uint64_t *out)
{
	if (st_u64(c->req, key, 0, out) < 0)
		return fail(c, -EINVAL, "'%s' must be a non-negative integer", key);
	return 0;
}

static int check_nqn(struct call *c, const char *what, const char *nqn)
{
	size_t n = strlen(nqn);
	if (n == 0)
		return fail(c, -EINVAL, "%s is required", what);
	if (n > 223 || strncmp(nqn, "nqn.", 4) != 0)
		return fail(c, -EINVAL, "%s '%.240s' is not an NQN (\"nqn.\" followed by at most 219 bytes)", what, nqn);
	return 0;
}

static json_object *find_ss(struct call *c, json_object *st, const char *nqn, int *rc)
{
	json_object *ss = st_get(st_subsystems(st), nqn);
	if (!ss)
		*rc = fail(c, -ENOENT, "no subsystem %s", nqn);
	return ss;
}

/* ---- responses (the proto's messages) ---------------------------------------------------------- */

static json_object *ns_msg(const char *nqn, json_object *ns)
{
	json_object *o = json_object_new_object();
	uint64_t nsid, maxv;
	st_u64(ns, "nsid", 0, &nsid);
	st_u64(ns, "max_value", 0, &maxv);
	json_object_object_add(o, "nqn", json_object_new_string(nqn));
	json_object_object_add(o, "nsid", json_object_new_int64((int64_t)nsid));
	json_object_object_add(o, "rados_namespace", json_object_new_string(st_str(ns, "rados_namespace") ? st_str(ns, "rados_namespace") : ""));
	json_object_object_add(o, "max_value", json_object_new_uint64(maxv));
	json_object_object_add(o, "read_only", json_object_new_boolean(st_bool(ns, "read_only")));
	uint64_t grp;
	st_u64(ns, "ana_group", 1, &grp);
	json_object_object_add(o, "ana_group", json_object_new_int64((int64_t)grp));
	if (st_get(ns, "cache")) /* absent: not a cache (the message field's presence says so) */
		json_object_object_add(o, "cache", json_object_get(st_get(ns, "cache")));
	return o;
}

static json_object *host_msg(const char *nqn, json_object *h)
{
	json_object *o = json_object_new_object();
	const char *k = st_str(h, "dhchap_key"), *ck = st_str(h, "dhchap_ctrl_key");
	json_object_object_add(o, "nqn", json_object_new_string(nqn));
	json_object_object_add(o, "host_nqn", json_object_new_string(st_str(h, "host_nqn")));
	json_object_object_add(o, "dhchap", json_object_new_boolean(k && *k)); /* never the secret */
	json_object_object_add(o, "dhchap_bidirectional", json_object_new_boolean(ck && *ck));
	return o;
}

static int nsid_cmp(const void *a, const void *b)
{
	uint64_t x, y;
	st_u64(*(json_object *const *)a, "nsid", 0, &x);
	st_u64(*(json_object *const *)b, "nsid", 0, &y);
	return x < y ? -1 : x > y;
}

/* The namespaces of @ss by NSID. */
static json_object *ns_list(const char *nqn, json_object *ss)
{
	json_object *arr = json_object_new_array(), *v[NKV_MAX_NSID];
	size_t n = 0;
	json_object_object_foreach(st_get(ss, "namespaces"), k, ns) {
		(void)k;
		if (n < NKV_MAX_NSID)
			v[n++] = ns;
	}
	qsort(v, n, sizeof(v[0]), nsid_cmp);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, ns_msg(nqn, v[i]));
	return arr;
}

static json_object *ss_msg(json_object *ss)
{
	json_object *o = json_object_new_object(), *hosts = json_object_new_array();
	const char *nqn = st_str(ss, "nqn");
	uint64_t maxns;
	st_u64(ss, "max_namespaces", 0, &maxns);
	json_object_object_add(o, "nqn", json_object_new_string(nqn));
	json_object_object_add(o, "pool", json_object_new_string(st_str(ss, "pool")));
	json_object_object_add(o, "max_namespaces", json_object_new_int64((int64_t)maxns));
	json_object_object_add(o, "allow_any_host", json_object_new_boolean(st_bool(ss, "allow_any_host")));
	json_object_object_foreach(st_get(ss, "hosts"), h, hv) {
		(void)hv;
		json_object_array_add(hosts, json_object_new_string(h));
	}
	json_object_object_add(o, "hosts", hosts);
	json_object_object_add(o, "namespaces", ns_list(nqn, ss));
	json_object_object_add(o, "serial_number", json_object_new_string(""));
	json_object_object_add(o, "shm_socket", json_object_new_string(st_str(ss, "shm_socket") ? st_str(ss, "shm_socket") : ""));
	json_object_object_add(o, "loopback_any_host", json_object_new_boolean(st_access(ss) == ST_LOOPBACK));
	json_object_object_add(o, "vfio_user_socket", json_object_new_string(st_str(ss, "vfio_user_socket") ? st_str(ss, "vfio_user_socket") : ""));
	json_object_object_add(o, "vfio_user_host", json_object_new_string(st_str(ss, "vfio_user_host") ? st_str(ss, "vfio_user_host") : ""));
	return o;
}

static json_object *listener_msg(json_object *l, bool active)
{
	json_object *o = json_object_new_object();
	uint64_t port;
	st_u64(l, "port", 0, &port);
	json_object_object_add(o, "gateway", json_object_new_string(st_str(l, "gateway")));
	json_object_object_add(o, "address", json_object_new_string(st_str(l, "address")));
	json_object_object_add(o, "port", json_object_new_int64((int64_t)port));
	json_object_object_add(o, "tls", json_object_new_boolean(st_bool(l, "tls")));
	json_object_object_add(o, "active", json_object_new_boolean(active));
	return o;
}

static json_object *connections(struct nkv_ctl *ctl, const char *nqn)
{
	json_object *arr = json_object_new_array();
	struct nkv_conn_info *v = NULL;
	int n = nkv_target_connections(ctl->conf.tgt, nqn && *nqn ? nqn : NULL, &v);
	for (int i = 0; i < n; i++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "nqn", json_object_new_string(v[i].subnqn));
		json_object_object_add(o, "host_nqn", json_object_new_string(v[i].hostnqn));
		json_object_object_add(o, "cntlid", json_object_new_int(v[i].cntlid));
		json_object_object_add(o, "io_queues", json_object_new_int(v[i].io_queues));
		json_object_object_add(o, "transport", json_object_new_string(v[i].transport));
		json_object_object_add(o, "authenticated", json_object_new_boolean(v[i].authenticated));
		json_object_array_add(arr, o);
	}
	free(v);
	return arr;
}

static void fill_live(struct nkv_ctl *ctl, json_object *resp);

/* fill_live for each namespace of a list, and of each subsystem's list. */
static void fill_list(struct nkv_ctl *ctl, json_object *arr)
{
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		fill_live(ctl, o);
		fill_list(ctl, st_get(o, "namespaces"));
	}
}

/* ---- mutating methods: change @st (a copy of the stored state); c->resp is the answer ----------- */

/* A shared-memory or vfio-user socket path (@what) no subsystem of @st uses, and where nothing but a
 * socket (a stale one, which the daemon replaces) lies: checked before the commit, so that a path
 * that cannot be served is refused rather than committed and reported served. */
static int check_shm_free(struct call *c, json_object *st, const char *nqn, const char *shm, const char *what)
{
	struct stat sb;

	json_object_object_foreach(st_subsystems(st), other, o) {
		const char *p = st_str(o, "shm_socket"), *v = st_str(o, "vfio_user_socket");
		if ((p && strcmp(p, shm) == 0) || (v && strcmp(v, shm) == 0))
			return fail(c, -EEXIST, "subsystem %s: %s %s is subsystem %s's", nqn, what, shm, other);
	}
	if (lstat(shm, &sb) == 0 && !S_ISSOCK(sb.st_mode))
		return fail(c, -EEXIST, "subsystem %s: %s exists and is not a socket (not replaced)", nqn, shm);
	return 0;
}

/* A socket the daemon makes for the control plane: at most 107 bytes, directly in --shm-dir. */
static int check_sock_path(struct call *c, const char *nqn, const char *what, const char *path)
{
	const char *sd = c->ctl->conf.shm_dir, *name = sd && strlen(path) > strlen(sd) ? path + strlen(sd) + 1 : "";

	if (strlen(path) > 107)
		return fail(c, -EINVAL, "subsystem %s: %s path longer than 107 bytes", nqn, what);
	/* The daemon makes this socket: only directly in its socket directory, never where a caller
	 * chooses (another user's directory, a link to one). */
	if (*path && sd && (strncmp(path, sd, strlen(sd)) != 0 || path[strlen(sd)] != '/' || !*name || strchr(name, '/') ||
			    strcmp(name, ".") == 0 || strcmp(name, "..") == 0))
		return fail(c, -EINVAL, "subsystem %s: %s %s must be a file directly in %s (the daemon's --shm-dir)", nqn,
			    what, path, sd);
	return 0;
}

static int m_create_subsystem(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn"), *pool = req_str(c, "pool"), *shm = req_str(c, "shm_socket");
	const char *vfu = req_str(c, "vfio_user_socket"), *vfu_host = req_str(c, "vfio_user_host");
	uint64_t maxns;
	int rc;

	if ((rc = check_nqn(c, "nqn", nqn)) < 0 || (rc = req_u64(c, "max_namespaces", &maxns)) < 0)
		return rc;
	if (!*pool || strlen(pool) > 255)
		return fail(c, -EINVAL, "subsystem %s: a pool name is required (at most 255 bytes)", nqn);
	if (maxns > NKV_MAX_NSID)
		return fail(c, -EINVAL, "subsystem %s: max_namespaces %" PRIu64 " is above %u", nqn, maxns, NKV_MAX_NSID);
	if ((rc = check_sock_path(c, nqn, "shm_socket", shm)) < 0 ||
	    (rc = check_sock_path(c, nqn, "vfio_user_socket", vfu)) < 0)
		return rc;
	if (*vfu_host && !*vfu)
		return fail(c, -EINVAL, "subsystem %s: vfio_user_host without a vfio_user_socket", nqn);
	if (*vfu_host && (rc = check_nqn(c, "vfio_user_host", vfu_host)) < 0)
		return rc;
	if (*vfu && strcmp(vfu, shm) == 0)
		return fail(c, -EINVAL, "subsystem %s: vfio_user_socket and shm_socket are the same path", nqn);
	if (st_get(st_subsystems(st), nqn))
		return fail(c, -EEXIST, "subsystem %s exists", nqn);
	if ((*shm && (rc = check_shm_free(c, st, nqn, shm, "shm_socket")) < 0) ||
	    (*vfu && (rc = check_shm_free(c, st, nqn, vfu, "vfio_user_socket")) < 0))
		return rc;
	if ((rc = nkv_target_check_pool(c->ctl->conf.tgt, pool, NULL)) < 0)
		return fail(c, rc == -ENOENT ? -EPERM : rc, "subsystem %s: pool '%s': %s", nqn, pool,
			    rc == -ENOENT ? "no such pool (create it: ceph osd pool create NAME)" : strerror(-rc));
	json_object *ss = json_object_new_object();
	json_object_object_add(ss, "nqn", json_object_new_string(nqn));
	json_object_object_add(ss, "pool", json_object_new_string(pool));
	json_object_object_add(ss, "max_namespaces", json_object_new_int64((int64_t)maxns));
	json_object_object_add(ss, "allow_any_host", json_object_new_boolean(st_bool(c->req, "allow_any_host")));
	json_object_object_add(ss, "shm_socket", json_object_new_string(shm));
	if (*vfu) { /* absent unless set: states written before these keys compare equal */
		json_object_object_add(ss, "vfio_user_socket", json_object_new_string(vfu));
		json_object_object_add(ss, "vfio_user_host", json_object_new_string(vfu_host));
	}
	json_object_object_add(ss, "hosts", json_object_new_object());
	json_object_object_add(ss, "namespaces", json_object_new_object());
	json_object_object_add(st_subsystems(st), nqn, ss);
	c->resp = ss_msg(ss);
	return 0;
}

static int m_delete_subsystem(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn");
	int rc = 0;
	if (!find_ss(c, st, nqn, &rc))
		return rc;
	json_object_object_del(st_subsystems(st), nqn);
	c->resp = json_object_new_object();
	return 0;
}

/* A namespace max value of subsystem @ss (state) that the cluster can store (0: the default). */
static int check_max_value(struct call *c, json_object *ss, const char *nqn, uint64_t maxv)
{
	uint64_t limit = UINT32_MAX;
	int rc = nkv_target_check_pool(c->ctl->conf.tgt, st_str(ss, "pool"), &limit);

	if (rc < 0)
		return fail(c, -EPERM, "%s: pool '%s': %s", nqn, st_str(ss, "pool"), strerror(-rc));
	if (maxv > limit || maxv > UINT32_MAX)
		return fail(c, -EINVAL, "%s: max_value %" PRIu64 " is above the largest value the cluster stores, %" PRIu64,
			    nqn, maxv, limit < UINT32_MAX ? limit : (uint64_t)UINT32_MAX);
	return 0;
}

static int m_add_namespace(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn"), *rns = req_str(c, "rados_namespace");
	uint64_t nsid, maxv, maxns;
	char key[16];
	int rc = 0;
	json_object *ss = find_ss(c, st, nqn, &rc), *nss;

	if (!ss)
		return rc;
	if ((rc = req_u64(c, "nsid", &nsid)) < 0 || (rc = req_u64(c, "max_value", &maxv)) < 0)
		return rc;
	nss = st_get(ss, "namespaces");
	if (nsid > NKV_MAX_NSID)
		return fail(c, -EINVAL, "%s: nsid %" PRIu64 " is out of range (1-%u)", nqn, nsid, NKV_MAX_NSID);
	for (uint64_t i = 1; nsid == 0 && i <= NKV_MAX_NSID; i++) { /* 0: the lowest free NSID */
		snprintf(key, sizeof(key), "%" PRIu64, i);
		if (!st_get(nss, key))
			nsid = i;
	}
	snprintf(key, sizeof(key), "%" PRIu64, nsid);
	if (nsid == 0 || st_get(nss, key))
		return fail(c, -EEXIST, "%s: namespace %s exists", nqn, nsid ? key : "(all NSIDs in use)");
	st_u64(ss, "max_namespaces", 0, &maxns);
	if (maxns && (uint64_t)json_object_object_length(nss) >= maxns)
		return fail(c, -EPERM, "%s: max_namespaces (%" PRIu64 ") reached", nqn, maxns);
	if (strlen(rns) > 127)
		return fail(c, -EINVAL, "%s: rados_namespace longer than 127 bytes", nqn);
	if ((rc = check_max_value(c, ss, nqn, maxv)) < 0)
		return rc;
	uint64_t grp = 0;
	if (req_u64(c, "ana_group", &grp) < 0 || grp > NKV_ANA_GROUPS)
		return fail(c, -EINVAL, "%s: ana_group must be 1-%u (0: 1)", nqn, NKV_ANA_GROUPS);
	json_object *jc = st_get(c->req, "cache");
	struct nkv_cache_policy pol = {0};
	char why[256];
	if (jc && !json_object_is_type(jc, json_type_null) && ctl_cache_policy_from_json(jc, NULL, &pol, why, sizeof(why)) < 0)
		return fail(c, -EINVAL, "%s: namespace %s: %s", nqn, key, why);
	json_object *ns = json_object_new_object();
	json_object_object_add(ns, "nsid", json_object_new_int64((int64_t)nsid));
	json_object_object_add(ns, "rados_namespace", json_object_new_string(rns));
	json_object_object_add(ns, "max_value", json_object_new_uint64(maxv));
	json_object_object_add(ns, "read_only", json_object_new_boolean(st_bool(c->req, "read_only")));
	if (grp > 1) /* absent: group 1, so that states written before ANA read the same */
		json_object_object_add(ns, "ana_group", json_object_new_int64((int64_t)grp));
	if (jc && !json_object_is_type(jc, json_type_null))
		json_object_object_add(ns, "cache", ctl_cache_policy_to_json(&pol));
	json_object_object_add(nss, key, ns);
	c->resp = ns_msg(nqn, ns);
	return 0;
}

/* The namespace the request names. */
static json_object *find_ns(struct call *c, json_object *st, int *rc)
{
	const char *nqn = req_str(c, "nqn");
	json_object *ss = find_ss(c, st, nqn, rc), *ns;
	uint64_t nsid;
	char key[16];

	if (!ss)
		return NULL;
	if ((*rc = req_u64(c, "nsid", &nsid)) < 0)
		return NULL;
	snprintf(key, sizeof(key), "%" PRIu64, nsid);
	if (!(ns = st_get(st_get(ss, "namespaces"), key)))
		*rc = fail(c, -ENOENT, "%s: no namespace %s", nqn, key);
	return ns;
}

static int m_remove_namespace(struct call *c, json_object *st)
{
	int rc = 0;
	json_object *ns = find_ns(c, st, &rc);
	uint64_t nsid;
	char key[16];

	if (!ns)
		return rc;
	st_u64(ns, "nsid", 0, &nsid);
	snprintf(key, sizeof(key), "%" PRIu64, nsid);
	json_object_object_del(st_get(st_get(st_subsystems(st), req_str(c, "nqn")), "namespaces"), key);
	c->resp = json_object_new_object();
	return 0;
}

static int m_set_read_only(struct call *c, json_object *st)
{
	int rc = 0;
	json_object *ns = find_ns(c, st, &rc);
	if (!ns)
		return rc;
	json_object_object_add(ns, "read_only", json_object_new_boolean(st_bool(c->req, "read_only")));
	c->resp = ns_msg(req_str(c, "nqn"), ns);
	return 0;
}

static int m_set_max_value(struct call *c, json_object *st)
{
	int rc = 0;
	json_object *ns = find_ns(c, st, &rc), *ss = st_get(st_subsystems(st), req_str(c, "nqn"));
	uint64_t maxv;
	if (!ns)
		return rc;
	if ((rc = req_u64(c, "max_value", &maxv)) < 0)
		return rc;
	if ((rc = check_max_value(c, ss, req_str(c, "nqn"), maxv)) < 0)
		return rc;
	json_object_object_add(ns, "max_value", json_object_new_uint64(maxv));
	c->resp = ns_msg(req_str(c, "nqn"), ns);
	return 0;
}

/* SetCachePolicy: the named fields of "policy" (all of them when "fields" is empty) replace the
 * namespace's; the reconciler applies the result live (nkv_ns_set_cache_policy) on every gateway. */
static int m_set_cache_policy(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn"), *only[32];
	json_object *jf = st_get(c->req, "fields"), *jp = st_get(c->req, "policy");
	struct nkv_cache_policy pol = {0};
	size_t nf = 0;
	char why[256];
	int rc = 0;
	json_object *ns = find_ns(c, st, &rc);

	if (!ns)
		return rc;
	if (!st_get(ns, "cache"))
		return fail(c, -EPERM, "%s: namespace %s has no cache (a cache is given when the namespace is added: "
			    "AddNamespace with a cache policy)", nqn, json_object_get_string(st_get(ns, "nsid")));
	if (jf && !json_object_is_type(jf, json_type_null) && !json_object_is_type(jf, json_type_array))
		return fail(c, -EINVAL, "%s: 'fields' must be a list of CachePolicy field names", nqn);
	for (size_t i = 0; jf && json_object_is_type(jf, json_type_array) && i < json_object_array_length(jf); i++) {
		json_object *f = json_object_array_get_idx(jf, i);
		const char *name = json_object_is_type(f, json_type_string) ? json_object_get_string(f) : "";
		if (!ctl_cache_policy_field(name))
			return fail(c, -EINVAL, "%s: 'fields': '%.64s' is not a field of CachePolicy", nqn, name);
		if (nf == sizeof(only) / sizeof(only[0]) - 1)
			return fail(c, -EINVAL, "%s: 'fields': too many", nqn);
		only[nf++] = name;
	}
	only[nf] = NULL;
	/* The stored policy was checked when it was written: start from it for a partial change. */
	if (ctl_cache_policy_from_json(st_get(ns, "cache"), NULL, &pol, why, sizeof(why)) < 0)
		return fail(c, -EIO, "%s: the stored %s", nqn, why);
	if (!jp || json_object_is_type(jp, json_type_null))
		jp = NULL;
	json_object *empty = jp ? NULL : json_object_new_object();
	rc = ctl_cache_policy_from_json(jp ? jp : empty, nf ? only : NULL, &pol, why, sizeof(why));
	json_object_put(empty);
	if (rc < 0)
		return fail(c, -EINVAL, "%s: namespace %s: %s", nqn, json_object_get_string(st_get(ns, "nsid")), why);
	json_object_object_add(ns, "cache", ctl_cache_policy_to_json(&pol));
	c->resp = ns_msg(nqn, ns);
	return 0;
}

/* Controllers on this gateway of subsystem @nqn whose host is not on @ss's allowlist. */
static int unlisted_connections(struct call *c, json_object *ss, const char *nqn)
{
	struct nkv_conn_info *v = NULL;
	int n = nkv_target_connections(c->ctl->conf.tgt, nqn, &v), k = 0;
	for (int i = 0; i < n; i++)
		k += !st_get(st_get(ss, "hosts"), v[i].hostnqn);
	free(v);
	return k;
}

/* Host "*" of AllowHost (@any) and DisallowHost: open @ss to any host through every listener, or
 * close it to its allowlist (an empty one: nobody). */
static int allow_any(struct call *c, json_object *ss, const char *nqn, bool any)
{
	enum st_access was = st_access(ss);

	if (any && (*req_str(c, "dhchap_key") || *req_str(c, "dhchap_ctrl_key")))
		return fail(c, -EINVAL, "%s: host '*' (any host) takes no DH-HMAC-CHAP secret", nqn);
	if (any && was == ST_ANY)
		return fail(c, -EEXIST, "%s admits any host already", nqn);
	if (!any && was == ST_ALLOWLIST)
		return fail(c, -ENOENT, "%s does not admit any host: its allowlist applies (nkv-ctl host list %s)", nqn, nqn);
	json_object_object_add(ss, "allow_any_host", json_object_new_boolean(any));
	json_object_object_del(ss, "loopback_any_host");
	c->resp = json_object_new_object();
	if (any) {
		json_object_object_add(c->resp, "nqn", json_object_new_string(nqn));
		json_object_object_add(c->resp, "host_nqn", json_object_new_string("*"));
	} else {
		json_object_object_add(c->resp, "disconnected", json_object_new_int(unlisted_connections(c, ss, nqn)));
	}
	return 0;
}

static int m_allow_host(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn"), *host = req_str(c, "host_nqn");
	const char *key = req_str(c, "dhchap_key"), *ckey = req_str(c, "dhchap_ctrl_key");
	int rc = 0;
	json_object *ss = find_ss(c, st, nqn, &rc);

	if (!ss)
		return rc;
	if (strcmp(host, "*") == 0) /* any host, as ceph-nvmeof's `host add --host-nqn '*'` */
		return allow_any(c, ss, nqn, true);
	if ((rc = check_nqn(c, "host_nqn", host)) < 0)
		return rc;
	if (st_access(ss) == ST_ANY)
		return fail(c, -EPERM, "%s admits any host (allow_any_host), so an allowlist entry would restrict nothing: "
			    "close it to its allowlist first (nkv-ctl host disallow %s '*'), then allow hosts", nqn, nqn);
	if (st_get(st_get(ss, "hosts"), host))
		return fail(c, -EEXIST, "%s: host %s is allowed already", nqn, host);
	if (*ckey && !*key)
		return fail(c, -EINVAL, "%s: host %s: a controller secret needs a host secret", nqn, host);
	if (*key && (rc = nkv_dhchap_secret_check(key)) < 0)
		return fail(c, -EINVAL, "%s: host %s: dhchap_key is not a DHHC-1 secret", nqn, host);
	if (*ckey && (rc = nkv_dhchap_secret_check(ckey)) < 0)
		return fail(c, -EINVAL, "%s: host %s: dhchap_ctrl_key is not a DHHC-1 secret", nqn, host);
	json_object *h = json_object_new_object();
	json_object_object_add(h, "host_nqn", json_object_new_string(host));
	json_object_object_add(h, "dhchap_key", json_object_new_string(key));
	json_object_object_add(h, "dhchap_ctrl_key", json_object_new_string(ckey));
	json_object_object_add(st_get(ss, "hosts"), host, h);
	json_object_object_del(ss, "loopback_any_host"); /* its first host ends the any-host default */
	c->resp = host_msg(nqn, h);
	return 0;
}

static int m_disallow_host(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn"), *host = req_str(c, "host_nqn");
	int rc = 0;
	json_object *ss = find_ss(c, st, nqn, &rc);

	if (!ss)
		return rc;
	if (strcmp(host, "*") == 0)
		return allow_any(c, ss, nqn, false);
	if (!st_get(st_get(ss, "hosts"), host))
		return fail(c, -ENOENT, "%s: host %s is not on the allowlist", nqn, host);
	json_object_object_del(st_get(ss, "hosts"), host);
	/* How many this gateway will disconnect (unless the subsystem is open to any host). */
	struct nkv_conn_info *v = NULL;
	int n = st_bool(ss, "allow_any_host") ? 0 : nkv_target_connections(c->ctl->conf.tgt, nqn, &v), k = 0;
	for (int i = 0; i < n; i++)
		k += strcmp(v[i].hostnqn, host) == 0;
	free(v);
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "disconnected", json_object_new_int(k));
	return 0;
}

static int listener_req(struct call *c, char *key, size_t n, uint64_t *port)
{
	const char *gw = *req_str(c, "gateway") ? req_str(c, "gateway") : c->ctl->gateway, *addr = req_str(c, "address");
	int rc;
	if ((rc = req_u64(c, "port", port)) < 0)
		return rc;
	if (*port == 0 || *port > 65535)
		return fail(c, -EINVAL, "port %" PRIu64 " is out of range (1-65535)", *port);
	if (!*addr || strlen(addr) > 63 || strchr(addr, '/'))
		return fail(c, -EINVAL, "address '%.64s' is not an IP address", addr);
	if (strlen(gw) > 200 || strchr(gw, '/'))
		return fail(c, -EINVAL, "gateway name '%.64s' is too long or has a '/'", gw);
	st_listener_key(key, n, gw, addr, (unsigned)*port);
	return 0;
}

static int m_add_listener(struct call *c, json_object *st)
{
	char key[300];
	uint64_t port;
	int rc;

	if ((rc = listener_req(c, key, sizeof(key), &port)) < 0)
		return rc;
	if (st_get(st_listeners(st), key))
		return fail(c, -EEXIST, "listener %s exists", key);
	const struct nkv_ctl_hooks *hk = &c->ctl->conf.hooks;
	if (st_bool(c->req, "tls") && (!*req_str(c, "gateway") || strcmp(req_str(c, "gateway"), c->ctl->gateway) == 0) &&
	    hk->tls_ready && !hk->tls_ready(hk->arg)) /* another gateway's keys are its own business */
		return fail(c, -EPERM, "listener %s: gateway %s has no TLS keys, so no host could connect over TLS: give "
			    "hosts keys (--tls-key HOSTNQN=KEY after -s NQN, or \"tls_keys\") and restart it", key,
			    c->ctl->gateway);
	json_object *l = json_object_new_object();
	json_object_object_add(l, "gateway", json_object_new_string(*req_str(c, "gateway") ? req_str(c, "gateway") : c->ctl->gateway));
	json_object_object_add(l, "address", json_object_new_string(req_str(c, "address")));
	json_object_object_add(l, "port", json_object_new_int64((int64_t)port));
	json_object_object_add(l, "tls", json_object_new_boolean(st_bool(c->req, "tls")));
	json_object_object_add(st_listeners(st), key, l);
	c->resp = listener_msg(l, false);
	return 0;
}

/* Would listener @l of a state reach, from the network, a subsystem that admits any host only because
 * nobody named its hosts? The rule of src/common/exposure.h. */
static bool l_exposes(json_object *l)
{
	return nkv_listener_exposes(st_str(l, "address"), st_bool(l, "tls"));
}

/*
 * Refuse a change after which a subsystem that admits any host by default (ST_LOOPBACK) would be
 * served through a listener that exposes it, on any gateway of the group: a listener added, a state
 * made so. Pairs that @prev has already (a gateway joined with such a listener) are not the change's
 * doing: the gateway concerned refuses those Connects and logs it, and a change that repairs them
 * must not be refused for them.
 */
static int check_exposure(struct call *c, json_object *prev, json_object *next)
{
	json_object_object_foreach(st_subsystems(next), nqn, ss) {
		if (st_access(ss) != ST_LOOPBACK)
			continue;
		json_object *pss = st_get(st_subsystems(prev), nqn);
		bool was = pss && st_access(pss) == ST_LOOPBACK;
		json_object_object_foreach(st_listeners(next), k, l) {
			json_object *pl = st_get(st_listeners(prev), k);
			if (!l_exposes(l) || (was && pl && l_exposes(pl)))
				continue;
			return fail(c, -EPERM, "listener %s is not on loopback and subsystem %s has no allowlist and was not "
				    "opened to any host explicitly, so any host on the network could use it: allow its hosts "
				    "first (nkv-ctl host allow %s HOSTNQN) or open it to any host (nkv-ctl host allow %s '*'), "
				    "or listen on loopback or with --tls", k, nqn, nqn, nqn);
		}
	}
	return 0;
}

static int m_remove_listener(struct call *c, json_object *st)
{
	char key[300];
	uint64_t port;
	int rc;

	if ((rc = listener_req(c, key, sizeof(key), &port)) < 0)
		return rc;
	if (!st_get(st_listeners(st), key))
		return fail(c, -ENOENT, "no listener %s", key);
	json_object_object_del(st_listeners(st), key);
	c->resp = json_object_new_object();
	return 0;
}

/* ---- read-only methods: answer from the state this gateway last read ---------------------------- */

static int r_list_subsystems(struct call *c, json_object *st)
{
	json_object *arr = json_object_new_array();
	json_object_object_foreach(st_subsystems(st), nqn, ss) {
		(void)nqn;
		json_object_array_add(arr, ss_msg(ss));
	}
	fill_list(c->ctl, arr);
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "subsystems", arr);
	return 0;
}

static int r_get_subsystem(struct call *c, json_object *st)
{
	int rc = 0;
	json_object *ss = find_ss(c, st, req_str(c, "nqn"), &rc);
	if (!ss)
		return rc;
	c->resp = ss_msg(ss);
	fill_live(c->ctl, c->resp);
	fill_list(c->ctl, st_get(c->resp, "namespaces"));
	return 0;
}

static int r_list_namespaces(struct call *c, json_object *st)
{
	int rc = 0;
	json_object *ss = find_ss(c, st, req_str(c, "nqn"), &rc);
	if (!ss)
		return rc;
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "namespaces", ns_list(req_str(c, "nqn"), ss));
	fill_list(c->ctl, st_get(c->resp, "namespaces"));
	return 0;
}

static int r_list_hosts(struct call *c, json_object *st)
{
	int rc = 0;
	json_object *ss = find_ss(c, st, req_str(c, "nqn"), &rc), *arr = json_object_new_array();
	if (!ss) {
		json_object_put(arr);
		return rc;
	}
	json_object_object_foreach(st_get(ss, "hosts"), h, hv) {
		(void)h;
		json_object_array_add(arr, host_msg(req_str(c, "nqn"), hv));
	}
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "hosts", arr);
	return 0;
}

static int r_namespace_stats(struct call *c, json_object *st)
{
	struct nkv_ns_stats s;
	int rc = 0;
	json_object *ns = find_ns(c, st, &rc);
	struct nkv_subsys *ss = ns ? nkv_target_subsys(c->ctl->conf.tgt, req_str(c, "nqn")) : NULL;
	uint64_t nsid;

	if (!ns)
		return rc;
	st_u64(ns, "nsid", 0, &nsid);
	if (!ss || nkv_ns_stats(ss, (uint32_t)nsid, &s) < 0)
		return fail(c, -ENOENT, "%s: namespace %" PRIu64 " is not served by gateway %s", req_str(c, "nqn"), nsid,
			    c->ctl->gateway);
	json_object *o = c->resp = json_object_new_object();
	json_object_object_add(o, "nqn", json_object_new_string(req_str(c, "nqn")));
	json_object_object_add(o, "nsid", json_object_new_int64((int64_t)nsid));
	json_object_object_add(o, "gateway", json_object_new_string(c->ctl->gateway));
	const struct { const char *k; uint64_t v; } f[] = {
		{"stores", s.stores}, {"retrieves", s.retrieves}, {"deletes", s.deletes}, {"exists", s.exists},
		{"lists", s.lists}, {"bytes_written", s.bytes_written}, {"bytes_read", s.bytes_read},
		{"errors", s.errors}, {"in_flight", s.in_flight}, {"used_bytes", s.used},
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		json_object_object_add(o, f[i].k, json_object_new_uint64(f[i].v));
	return 0;
}

/* One CacheUsage message: the live figures of namespace @nsid of @ss. @return 0 or the core's -errno. */
static int usage_msg(struct call *c, struct nkv_subsys *ss, const char *nqn, uint32_t nsid, json_object **out)
{
	struct nkv_cache_usage u;
	int rc = ss ? nkv_ns_cache_usage(ss, nsid, &u) : -ENOENT;
	if (rc < 0)
		return rc;
	json_object *o = *out = json_object_new_object();
	json_object_object_add(o, "nqn", json_object_new_string(nqn));
	json_object_object_add(o, "nsid", json_object_new_int64(nsid));
	json_object_object_add(o, "gateway", json_object_new_string(c->ctl->gateway));
	json_object_object_add(o, "policy", ctl_cache_policy_to_json(&u.policy));
	const struct { const char *k; uint64_t v; } f[] = {
		{"used_bytes", u.used_bytes}, {"keys", u.keys}, {"pinned_bytes", u.pinned_bytes},
		{"pinned_keys", u.pinned_keys}, {"evictions", u.evictions}, {"evicted_bytes", u.evicted_bytes},
		{"expirations", u.expirations}, {"expired_bytes", u.expired_bytes},
		{"capacity_bytes", u.policy.capacity_bytes}, {"capacity_keys", u.policy.capacity_keys},
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		json_object_object_add(o, f[i].k, json_object_new_uint64(f[i].v));
	/* JSON has no NaN or infinity (json-c would write them, protobuf refuse them) */
	json_object_object_add(o, "byte_hours", json_object_new_double(isfinite(u.byte_hours) ? u.byte_hours : 0));
	json_object_object_add(o, "token_hours", json_object_new_double(isfinite(u.token_hours) ? u.token_hours : 0));
	json_object_object_add(o, "evicting", json_object_new_boolean(u.evicting));
	json_object_object_add(o, "gateways", json_object_new_int64(u.gateways));
	return 0;
}

/* GetUsage: one cache namespace (nsid), or every cache namespace of the subsystem that this gateway
 * serves (nsid 0), by NSID. */
static int r_get_usage(struct call *c, json_object *st)
{
	const char *nqn = req_str(c, "nqn");
	uint64_t nsid;
	int rc = 0;
	json_object *ss = find_ss(c, st, nqn, &rc), *arr, *u = NULL;
	struct nkv_subsys *live = ss ? nkv_target_subsys(c->ctl->conf.tgt, nqn) : NULL;

	if (!ss)
		return rc;
	if ((rc = req_u64(c, "nsid", &nsid)) < 0)
		return rc;
	if (nsid) {
		json_object *ns = find_ns(c, st, &rc);
		if (!ns)
			return rc;
		if (!st_get(ns, "cache"))
			return fail(c, -EPERM, "%s: namespace %" PRIu64 " has no cache", nqn, nsid);
		if ((rc = usage_msg(c, live, nqn, (uint32_t)nsid, &u)) < 0)
			return fail(c, rc == -ENOENT ? -ENOENT : rc == -EINVAL ? -EPERM : -EIO,
				    "%s: namespace %" PRIu64 ": no cache usage on gateway %s: %s", nqn, nsid, c->ctl->gateway,
				    rc == -ENOENT ? "not served here" : strerror(-rc));
	}
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "namespaces", arr = json_object_new_array());
	if (u) {
		json_object_array_add(arr, u);
		return 0;
	}
	json_object *list = ns_list(nqn, ss); /* by NSID */
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		json_object *ns = json_object_array_get_idx(list, i);
		if (st_get(ns, "cache") && st_u64(ns, "nsid", 0, &nsid) == 0 &&
		    usage_msg(c, live, nqn, (uint32_t)nsid, &u) == 0) /* not served here: left out */
			json_object_array_add(arr, u);
	}
	json_object_put(list);
	return 0;
}

static int r_list_connections(struct call *c, json_object *st)
{
	(void)st;
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "connections", connections(c->ctl, req_str(c, "nqn")));
	return 0;
}

static int r_list_listeners(struct call *c, json_object *st)
{
	const char *gw = req_str(c, "gateway");
	json_object *arr = json_object_new_array();
	json_object_object_foreach(st_listeners(st), k, l) {
		if (*gw && strcmp(gw, st_str(l, "gateway")) != 0)
			continue;
		json_object_array_add(arr, listener_msg(l, st_get(st_listeners(c->ctl->applied), k) != NULL));
	}
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "listeners", arr);
	return 0;
}

static int r_gateway_info(struct call *c, json_object *st)
{
	struct nkv_ctl *ctl = c->ctl;
	json_object *o = c->resp = json_object_new_object(), *ls = json_object_new_array();
	(void)st;
	json_object_object_add(o, "name", json_object_new_string(ctl->gateway));
	json_object_object_add(o, "version", json_object_new_string(ctl->version));
	json_object_object_add(o, "group", json_object_new_string(ctl->group));
	json_object_object_add(o, "epoch", json_object_new_uint64(st_epoch(ctl->applied)));
	json_object_object_add(o, "uptime_s", json_object_new_uint64((nkv_now_ms() - ctl->started_ms) / 1000));
	json_object_object_add(o, "backend", json_object_new_string(ctl->backend));
	json_object_object_foreach(st_listeners(ctl->applied), k, l) {
		(void)k;
		json_object_array_add(ls, listener_msg(l, true));
	}
	json_object_object_add(o, "listeners", ls);
	json_object_object_add(o, "connections", connections(ctl, NULL));
	json_object_object_add(o, "state_store", json_object_new_string(store_name(ctl->store)));
	uint64_t r = ST_CNTLID_RANGES;
	st_u64(st_get(st_gateways(ctl->applied), ctl->gateway), "cntlid_range", ST_CNTLID_RANGES, &r);
	bool whole = !ctl->group[0], some = r < ST_CNTLID_RANGES;
	int64_t lo = whole ? 1 : some ? (int64_t)(r * ST_CNTLID_RANGE + 1) : 0;
	int64_t hi = whole ? NKV_CNTLID_MAX : some ? (int64_t)((r + 1) * ST_CNTLID_RANGE) : 0;
	json_object_object_add(o, "cntlid_min", json_object_new_int64(lo));
	json_object_object_add(o, "cntlid_max", json_object_new_int64(hi));
	return 0;
}

/* ---- ANA states ------------------------------------------------------------------------------------- */

/* The gateway a request names ("": this one) in state @st's gateways: NULL (and *@rc) when not in a
 * group or unknown. */
static json_object *ana_gateway(struct call *c, json_object *st, const char **name, int *rc)
{
	const char *gw = *req_str(c, "gateway") ? req_str(c, "gateway") : c->ctl->gateway;
	json_object *g = st_get(st_gateways(st), gw);

	*name = gw;
	if (!c->ctl->group[0])
		*rc = fail(c, -EPERM, "ANA states are per gateway of a group: this gateway runs without --group");
	else if (!g)
		*rc = fail(c, -ENOENT, "group %s has no gateway '%.64s' (nkv-ctl ana get names them)", c->ctl->group,
			   gw);
	return c->ctl->group[0] ? g : NULL;
}

/* SetAnaState: a gateway's state for one ANA group; its controllers get an ANA Change notice when it
 * applies. "optimized" is the default, so it removes the entry. */
static int m_set_ana_state(struct call *c, json_object *st)
{
	const char *gw, *name = req_str(c, "state");
	uint64_t grp = 0;
	int rc = 0;
	enum nkv_ana_state s = st_ana_parse(name);
	json_object *g = ana_gateway(c, st, &gw, &rc);

	if (!g)
		return rc;
	if (req_u64(c, "ana_group", &grp) < 0 || grp == 0 || grp > NKV_ANA_GROUPS)
		return fail(c, -EINVAL, "ana_group must be 1-%u", NKV_ANA_GROUPS);
	if (!s)
		return fail(c, -EINVAL, "state '%.32s' is not optimized, non-optimized or inaccessible", name);
	char k[16];
	snprintf(k, sizeof(k), "%" PRIu64, grp);
	json_object *ana = st_get(g, "ana");
	if (s == NKV_ANA_OPTIMIZED) {
		if (ana)
			json_object_object_del(ana, k);
		if (ana && !json_object_object_length(ana))
			json_object_object_del(g, "ana");
	} else {
		if (!ana)
			json_object_object_add(g, "ana", ana = json_object_new_object());
		json_object_object_add(ana, k, json_object_new_string(name));
	}
	json_object *o = c->resp = json_object_new_object();
	json_object_object_add(o, "gateway", json_object_new_string(gw));
	json_object_object_add(o, "ana_group", json_object_new_int64((int64_t)grp));
	json_object_object_add(o, "state", json_object_new_string(name));
	return 0;
}

/* GetAnaState: for each gateway (or the one named), the state of every ANA group that holds a
 * namespace or has a state set, and of group 1. */
static int r_get_ana_state(struct call *c, json_object *st)
{
	const char *gw;
	int rc = 0;
	bool used[NKV_ANA_GROUPS + 1] = {false, true};

	if (*req_str(c, "gateway") && !ana_gateway(c, st, &gw, &rc))
		return rc;
	if (!c->ctl->group[0])
		return fail(c, -EPERM, "ANA states are per gateway of a group: this gateway runs without --group");
	json_object_object_foreach(st_subsystems(st), nqn, ss) {
		(void)nqn;
		json_object_object_foreach(st_get(ss, "namespaces"), n, ns) {
			uint64_t g = 1;
			(void)n;
			if (st_u64(ns, "ana_group", 1, &g) == 0 && g >= 1 && g <= NKV_ANA_GROUPS)
				used[g] = true;
		}
	}
	json_object *gws = st_gateways(st) ? st_gateways(st) : json_object_new_object();
	json_object_object_foreach(gws, k, g) {
		(void)k;
		for (unsigned x = 1; x <= NKV_ANA_GROUPS; x++)
			used[x] = used[x] || st_ana_of(g, x) != NKV_ANA_OPTIMIZED;
	}
	json_object *arr = json_object_new_array();
	json_object_object_foreach(gws, name, gv) {
		if (*req_str(c, "gateway") && strcmp(name, req_str(c, "gateway")) != 0)
			continue;
		for (unsigned x = 1; x <= NKV_ANA_GROUPS; x++) {
			if (!used[x])
				continue;
			json_object *o = json_object_new_object();
			json_object_object_add(o, "gateway", json_object_new_string(name));
			json_object_object_add(o, "ana_group", json_object_new_int64(x));
			json_object_object_add(o, "state", json_object_new_string(st_ana_name(st_ana_of(gv, x))));
			json_object_array_add(arr, o);
		}
	}
	if (gws != st_gateways(st))
		json_object_put(gws);
	c->resp = json_object_new_object();
	json_object_object_add(c->resp, "states", arr);
	return 0;
}

/* ---- the group's state itself: malformed entries --------------------------------------------------- */

static int apply(struct nkv_ctl *ctl);
static int refresh(struct nkv_ctl *ctl);

/* How many malformed entries the state last read holds. */
static uint64_t nbad(struct nkv_ctl *ctl)
{
	uint64_t n = 0;
	st_u64(ctl->bad, "malformed", 0, &n);
	return n;
}
static int join(struct nkv_ctl *ctl, json_object **stored);

/* CheckState: the stored epoch, the applied one and the malformed entries of the state just read. */
static int r_check_state(struct call *c, json_object *st)
{
	struct nkv_ctl *ctl = c->ctl;
	int64_t e = store_epoch(ctl->store);
	json_object *o = c->resp = json_object_new_object();

	(void)st;
	if (e < 0)
		return fail(c, -EIO, "cannot read the state (%s): %s", store_name(ctl->store), strerror((int)-e));
	json_object_object_add(o, "state_store", json_object_new_string(store_name(ctl->store)));
	json_object_object_add(o, "epoch", json_object_new_uint64((uint64_t)e));
	json_object_object_add(o, "applied_epoch", json_object_new_uint64(st_epoch(ctl->applied)));
	json_object *list = st_get(ctl->bad, "entries");
	json_object_object_add(o, "malformed", json_object_new_uint64(nbad(ctl)));
	json_object_object_add(o, "malformed_entries", list ? json_object_get(list) : json_object_new_array());
	return 0;
}

/* RepairState: remove the malformed entries named in "keys" (as CheckState writes them), or all of
 * them ("all"), under the epoch's compare-and-set; well-formed entries cannot be removed here. */
static int m_repair_state(struct call *c, json_object *st)
{
	struct nkv_ctl *ctl = c->ctl;
	json_object *jk = st_get(c->req, "keys");
	const char *keys[256], *missing = NULL;
	size_t n = 0;
	int rc = 0;

	if (jk && !json_object_is_type(jk, json_type_null) && !json_object_is_type(jk, json_type_array))
		return fail(c, -EINVAL, "'keys' must be a list of the keys CheckState lists");
	for (size_t i = 0; jk && json_object_is_type(jk, json_type_array) && i < json_object_array_length(jk); i++) {
		json_object *k = json_object_array_get_idx(jk, i);
		if (!json_object_is_type(k, json_type_string) || !*json_object_get_string(k))
			return fail(c, -EINVAL, "'keys': an empty or non-string key");
		if (n == sizeof(keys) / sizeof(keys[0]))
			return fail(c, -EINVAL, "'keys': more than %zu (use all)", sizeof(keys) / sizeof(keys[0]));
		keys[n++] = json_object_get_string(k);
	}
	if (!n && !st_bool(c->req, "all"))
		return fail(c, -EINVAL, "name the malformed entries to remove ('keys'), or all of them ('all')");
	if (!ctl->group[0])
		return fail(c, -EPERM, "not in a group: a state file or memory has no malformed entries to remove");
	for (int tries = 0; tries < COMMIT_TRIES; tries++) {
		int64_t e = store_epoch(ctl->store);
		if (e <= 0)
			return fail(c, -EIO, "cannot read the state (%s): %s", store_name(ctl->store),
				    e < 0 ? strerror((int)-e) : "nothing stored");
		rc = store_repair(ctl->store, (uint64_t)e, keys, n, st_bool(c->req, "all"), &missing);
		if (rc != -ECANCELED)
			break;
	}
	if (rc == -ENOENT)
		return fail(c, -ENOENT, "'%.300s' is not a malformed entry of the group's state (nkv-ctl group check lists "
			    "them)", missing ? missing : "");
	if (rc == -ECANCELED)
		return fail(c, -EAGAIN, "RepairState: %d concurrent changes won the commit in a row; retry", COMMIT_TRIES);
	if (rc < 0)
		return fail(c, -EIO, "cannot write the state (%s): %s", store_name(ctl->store), strerror(-rc));
	store_notify(ctl->store);
	if (refresh(ctl) == 0) {
		if (!ctl->joined)
			join(ctl, &ctl->want);
		apply(ctl);
	}
	json_object_put(c->resp);
	c->resp = NULL;
	return r_check_state(c, st);
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

struct method {
	const char *name;
	int (*fn)(struct call *c, json_object *st);
	bool changes;
};

static const struct method g_methods[] = {
	{"CreateSubsystem", m_create_subsystem, true},
	{"DeleteSubsystem", m_delete_subsystem, true},
	{"ListSubsystems", r_list_subsystems, false},
	{"GetSubsystem", r_get_subsystem, false},
	{"AddNamespace", m_add_namespace, true},
	{"RemoveNamespace", m_remove_namespace, true},
	{"ListNamespaces", r_list_namespaces, false},
	{"SetNamespaceReadOnly", m_set_read_only, true},
	{"SetNamespaceMaxValue", m_set_max_value, true},
	{"GetNamespaceStats", r_namespace_stats, false},
	{"SetCachePolicy", m_set_cache_policy, true},
	{"GetUsage", r_get_usage, false},
	{"AllowHost", m_allow_host, true},
	{"DisallowHost", m_disallow_host, true},
	{"ListHosts", r_list_hosts, false},
	{"ListConnections", r_list_connections, false},
	{"AddListener", m_add_listener, true},
	{"RemoveListener", m_remove_listener, true},
	{"ListListeners", r_list_listeners, false},
	{"GetGatewayInfo", r_gateway_info, false},
	{"CheckState", r_check_state, false},
	{"RepairState", m_repair_state, false}, /* its own commit (store_repair) */
	{"SetAnaState", m_set_ana_state, true},
	{"GetAnaState", r_get_ana_state, false},
};

/* Say, once each time it starts, that this gateway refuses a subsystem's Connects through one of its
 * listeners: the subsystem admits any host by default and the listener exposes it (a state from the
 * group, or a stored one, put them together). The target enforces it (nkv_subsys_set_loopback_only);
 * this tells the operator why and how to repair it (ctl->mu held). */
static void log_exposures(struct nkv_ctl *ctl)
{
	json_object *now = json_object_new_object();
	char pair[600];

	json_object_object_foreach(st_subsystems(ctl->applied), nqn, ss) {
		if (st_access(ss) != ST_LOOPBACK)
			continue;
		json_object_object_foreach(st_listeners(ctl->applied), k, l) {
			if (!l_exposes(l))
				continue;
			snprintf(pair, sizeof(pair), "%s %s", nqn, k);
			if (!st_get(ctl->exposed, pair))
				NKV_ERR("subsystem %s has no allowlist and was not opened to any host explicitly, and listener %s "
					"is not on loopback: its Connects there are refused. Allow its hosts (nkv-ctl host allow "
					"%s HOSTNQN) or open it to any host (nkv-ctl host allow %s '*')", nqn, k, nqn, nqn);
			json_object_object_add(now, pair, json_object_new_boolean(1));
		}
	}
	json_object_put(ctl->exposed);
	ctl->exposed = now;
}

/* Apply @ctl->want to the target (ctl->mu held). */
static int apply(struct nkv_ctl *ctl)
{
	int rc = st_reconcile(ctl, ctl->applied, ctl->want);
	if (rc < 0)
		NKV_WARN("state epoch %" PRIu64 ": not all of it applies on this gateway (%s); retried on the next change",
			 st_epoch(ctl->want), strerror(-rc));
	log_exposures(ctl);
	return rc;
}

/* Log the malformed entries of the group's state at epoch @epoch, once per epoch. */
static void log_bad(struct nkv_ctl *ctl, uint64_t epoch)
{
	json_object *list = st_get(ctl->bad, "entries");
	uint64_t n = nbad(ctl);
	if (ctl->bad_logged == epoch)
		return;
	ctl->bad_logged = epoch;
	for (size_t i = 0; list && i < json_object_array_length(list) && i < 10; i++) {
		json_object *b = json_object_array_get_idx(list, i);
		NKV_ERR("group %s, epoch %" PRIu64 ": malformed entry '%.300s': %s", ctl->group, epoch, st_str(b, "key"),
			st_str(b, "reason"));
	}
	NKV_ERR("group %s, epoch %" PRIu64 ": %" PRIu64 " malformed entr%s left out; changes are refused until they are "
		"removed (nkv-ctl group check, nkv-ctl group repair)", ctl->group, epoch, n, n == 1 ? "y" : "ies");
}

/* Read the stored state into ctl->want (ctl->mu held). A state with malformed entries (ctl->bad)
 * is not taken: the gateway keeps running the last well-formed one. @return 0, -EUCLEAN
 * (malformed entries) or -errno. */
static int refresh(struct nkv_ctl *ctl)
{
	json_object *st = NULL, *bad = NULL;
	int rc = store_load(ctl->store, &st, &bad);
	if (rc < 0)
		return rc;
	json_object_put(ctl->bad);
	ctl->bad = bad;
	if (bad) {
		log_bad(ctl, st_epoch(st));
		json_object_put(st);
		return -EUCLEAN;
	}
	if (st) {
		json_object_put(ctl->want);
		ctl->want = st;
	}
	return 0;
}

/* The answer to a change refused for malformed entries. */
static int fail_bad(struct call *c)
{
	uint64_t n = nbad(c->ctl);
	json_object *first = json_object_array_get_idx(st_get(c->ctl->bad, "entries"), 0);
	return fail(c, -EPERM, "the group's state has %" PRIu64 " malformed entr%s (the first: '%.200s': %s); changes are "
		    "refused until they are removed: nkv-ctl group check lists them, nkv-ctl group repair KEY removes one",
		    n, n == 1 ? "y" : "ies", st_str(first, "key"), st_str(first, "reason"));
}

/* What only the running target knows, once a change is applied: the serial number of a subsystem
 * and the effective max value of a namespace created with 0 (the default or the cluster's limit). */
static void fill_live(struct nkv_ctl *ctl, json_object *resp)
{
	const char *nqn = st_str(resp, "nqn");
	struct nkv_subsys *ss = nqn ? nkv_target_subsys(ctl->conf.tgt, nqn) : NULL;
	struct nkv_ns_stats st;
	uint64_t nsid;

	/* A listener's reply is built before the change applies: it is active once this gateway
	 * serves it. */
	if (resp && st_get(resp, "active") && st_get(resp, "address")) {
		char key[300];
		uint64_t port;
		st_u64(resp, "port", 0, &port);
		st_listener_key(key, sizeof(key), st_str(resp, "gateway"), st_str(resp, "address"), (unsigned)port);
		json_object_object_add(resp, "active", json_object_new_boolean(st_get(st_listeners(ctl->applied), key) != NULL));
	}
	if (!ss)
		return;
	if (st_get(resp, "serial_number"))
		json_object_object_add(resp, "serial_number", json_object_new_string(nkv_subsys_serial(ss)));
	if (st_get(resp, "max_value") && st_u64(resp, "nsid", 0, &nsid) == 0 && nsid &&
	    nkv_ns_stats(ss, (uint32_t)nsid, &st) == 0) {
		char hex[33];
		for (int i = 0; i < 16; i++)
			snprintf(hex + 2 * i, 3, "%02x", st.nguid[i]);
		json_object_object_add(resp, "max_value", json_object_new_uint64(st.max_value));
		json_object_object_add(resp, "nguid", json_object_new_string(hex));
	}
}

/* A change: read, change a copy, compare-and-set, repeat on a conflict. */
static int change(struct call *c, const struct method *m)
{
	struct nkv_ctl *ctl = c->ctl;
	int rc;

	for (int tries = 0; tries < COMMIT_TRIES; tries++) {
		if ((rc = refresh(ctl)) == -EUCLEAN)
			return fail_bad(c);
		if (rc < 0)
			return fail(c, -EIO, "cannot read the state (%s): %s", store_name(ctl->store), strerror(-rc));
		json_object *next = st_copy(ctl->want);
		if (!next)
			return fail(c, -ENOMEM, "out of memory");
		json_object_put(c->resp);
		c->resp = NULL;
		if ((rc = m->fn(c, next)) < 0 || (rc = check_exposure(c, ctl->want, next)) < 0) {
			json_object_put(next);
			return rc;
		}
		json_object_object_add(next, "epoch", json_object_new_int64((int64_t)st_epoch(ctl->want) + 1));
		rc = store_commit(ctl->store, st_epoch(ctl->want) ? ctl->want : NULL, next);
		if (rc == -ECANCELED) { /* another gateway committed first: start from its state */
			json_object_put(next);
			NKV_DEBUG("%s: epoch %" PRIu64 " moved on, retrying", m->name, st_epoch(ctl->want));
			continue;
		}
		if (rc < 0) {
			json_object_put(next);
			return fail(c, -EIO, "cannot write the state (%s): %s", store_name(ctl->store), strerror(-rc));
		}
		json_object_put(ctl->want);
		ctl->want = next;
		NKV_INFO("%s committed: epoch %" PRIu64, m->name, st_epoch(next));
		rc = apply(ctl);
		fill_live(ctl, c->resp);
		store_notify(ctl->store);
		if (rc < 0)
			return fail(c, -EIO, "%s committed (epoch %" PRIu64 ") but not applied on gateway %s: %s", m->name,
				    st_epoch(next), ctl->gateway, strerror(-rc));
		return 0;
	}
	return fail(c, -EAGAIN, "%s: %d concurrent changes won the commit in a row; retry", m->name, COMMIT_TRIES);
}

int nkv_ctl_call(struct nkv_ctl *ctl, const char *method, const char *req_json, char **resp_json, char **err_msg)
{
	struct call c = {.ctl = ctl};
	const struct method *m = NULL;
	int rc;

	*resp_json = NULL;
	*err_msg = NULL;
	for (size_t i = 0; i < sizeof(g_methods) / sizeof(g_methods[0]); i++)
		if (strcmp(g_methods[i].name, method) == 0)
			m = &g_methods[i];
	if (!m) {
		rc = fail(&c, -ENOSYS, "no method %s", method);
	} else if (!(c.req = json_tokener_parse(req_json && *req_json ? req_json : "{}")) ||
		   !json_object_is_type(c.req, json_type_object)) {
		rc = fail(&c, -EINVAL, "%s: the request is not a JSON object", method);
	} else {
		pthread_mutex_lock(&ctl->mu);
		if (m->changes) {
			rc = change(&c, m);
		} else {
			/* Group members answer from the state they last read: refresh first, so that a read
			 * right after another gateway's change sees it. */
			if (ctl->group[0])
				refresh(ctl);
			rc = m->fn(&c, ctl->want);
		}
		pthread_mutex_unlock(&ctl->mu);
	}
	if (rc == 0) {
		*resp_json = strdup(json_object_to_json_string_ext(c.resp ? c.resp : json_object_new_object(),
								    JSON_C_TO_STRING_PLAIN));
		if (!*resp_json)
			rc = -ENOMEM;
	}
	if (rc < 0) {
		*err_msg = strdup(c.err[0] ? c.err : strerror(-rc));
		NKV_DEBUG("%s: %s", method, c.err);
	}
	json_object_put(c.resp);
	json_object_put(c.req);
	return rc;
}

/* ---- the watcher ------------------------------------------------------------------------------- */

/* From a librados callback thread: never wait for ctl->mu there (a notify in progress holds it and
 * may need that thread), only for the watcher's own small lock. */
static void kick(void *arg)
{
	struct nkv_ctl *ctl = arg;
	pthread_mutex_lock(&ctl->kick_mu);
	ctl->kick = true;
	pthread_cond_signal(&ctl->cv);
	pthread_mutex_unlock(&ctl->kick_mu);
}

static void *watch_main(void *arg)
{
	struct nkv_ctl *ctl = arg;
	unsigned poll = ctl->conf.poll_ms ? ctl->conf.poll_ms : 2000;

	for (;;) {
		pthread_mutex_lock(&ctl->kick_mu);
		if (!ctl->kick && !ctl->stop) {
			struct timespec ts = nkv_abstime_in_ms(poll);
			pthread_cond_timedwait(&ctl->cv, &ctl->kick_mu, &ts);
		}
		bool stop = ctl->stop;
		ctl->kick = false;
		pthread_mutex_unlock(&ctl->kick_mu);
		if (stop)
			break;
		pthread_mutex_lock(&ctl->mu);
		int64_t e = store_epoch(ctl->store);
		/* An epoch known to hold malformed entries is not read again until it moves. */
		if (e > 0 && (uint64_t)e != st_epoch(ctl->applied) && !(ctl->bad && (uint64_t)e == ctl->bad_logged) &&
		    refresh(ctl) == 0) {
			if (!ctl->joined)
				join(ctl, &ctl->want); /* started on a broken state, now repaired */
			if (st_epoch(ctl->want) != st_epoch(ctl->applied)) {
				NKV_INFO("group %s: epoch %" PRIu64 " -> %" PRIu64 ": applying", ctl->group,
					 st_epoch(ctl->applied), st_epoch(ctl->want));
				apply(ctl);
			}
		}
		pthread_mutex_unlock(&ctl->mu);
	}
	return NULL;
}

/* Has state @st listeners of gateway @gw? */
static bool has_listeners_of(json_object *st, const char *gw)
{
	json_object_object_foreach(st_listeners(st), k, l) {
		(void)k;
		if (strcmp(st_str(l, "gateway"), gw) == 0)
			return true;
	}
	return false;
}

/* This gateway joins stored state *@stored (ctl->mu held, or not shared yet): the first time (the
 * state has no listener of this gateway) its listeners from the flags go in, and in a group the
 * first time it has no controller ID range it takes one; one commit, retried. Later the state's
 * listeners win, and a flag listener the state does not name is closed by the reconciler: said
 * here, so that it is never dropped silently. @return 0 or -errno (-ENOSPC: every range is held). */
static int join(struct nkv_ctl *ctl, json_object **stored)
{
	int rc = 0;

	if (json_object_object_length(st_listeners(ctl->applied)) && has_listeners_of(*stored, ctl->gateway)) {
		json_object_object_foreach(st_listeners(ctl->applied), k, l) {
			uint64_t port;
			st_u64(l, "port", 0, &port);
			if (!st_get(st_listeners(*stored), k))
				NKV_WARN("group %s: listener %s:%" PRIu64 " from the flags is not in the group's state, which "
					 "has other listeners of gateway %s: it is closed (the state wins; nkv-ctl listener "
					 "add serves it again)", ctl->group, st_str(l, "address"), port, ctl->gateway);
		}
	}
	for (int tries = 0; tries < COMMIT_TRIES; tries++) {
		bool add = json_object_object_length(st_listeners(ctl->applied)) && !has_listeners_of(*stored, ctl->gateway);
		json_object *next = st_copy(*stored);
		if (add) {
			json_object_object_foreach(st_listeners(ctl->applied), k, l)
				json_object_object_add(st_listeners(next), k, json_object_get(l));
		}
		int r = ctl->group[0] ? st_claim_range(next, ctl->gateway) : 0;
		if (r < 0) {
			NKV_ERR("group %s: all %u controller ID ranges are held by other gateway names, so gateway %s "
				"cannot join: a group has at most %u gateway names (each keeps its range across restarts)",
				ctl->group, ST_CNTLID_RANGES, ctl->gateway, ST_CNTLID_RANGES);
			json_object_put(next);
			return r;
		}
		if (!add && r == 0) {
			json_object_put(next);
			ctl->joined = true;
			return 0;
		}
		json_object_object_add(next, "epoch", json_object_new_int64((int64_t)st_epoch(*stored) + 1));
		if ((rc = store_commit(ctl->store, *stored, next)) == 0) {
			json_object_put(*stored);
			*stored = next;
			store_notify(ctl->store);
			ctl->joined = true;
			return 0;
		}
		json_object_put(next);
		json_object *fresh = NULL, *bad = NULL;
		if (rc != -ECANCELED || (rc = store_load(ctl->store, &fresh, &bad)) < 0)
			return rc;
		json_object_put(bad);
		if (!fresh || bad) { /* emptied or broken meanwhile: joined the next time it is read */
			json_object_put(fresh);
			return -EAGAIN;
		}
		json_object_put(*stored);
		*stored = fresh;
	}
	return -EAGAIN;
}

/* How long a starting gateway waits for the group's gateways to say their names. */
#define NAME_PROBE_MS 2000

/* Refuse a gateway name that a live gateway of the group has: two gateways of one name would
 * each take the other's listeners for its own (and close its own). */
static int name_check(struct nkv_ctl *ctl)
{
	char who[64] = "";
	int rc = store_name_taken(ctl->store, ctl->gateway, who, sizeof(who), NAME_PROBE_MS);

	if (rc < 0) {
		NKV_WARN("group %s: cannot ask the group's gateways for their names: %s", ctl->group, strerror(-rc));
		return 0; /* the load that follows says whether the cluster answers */
	}
	if (rc > 0) {
		NKV_ERR("group %s: gateway name '%s' is taken by a live gateway of the group (RADOS %s); give each "
			"gateway its own --gateway-name (the default is the host name)", ctl->group, ctl->gateway, who);
		return -ENOTUNIQ;
	}
	return 0;
}

int nkv_ctl_create(const struct nkv_ctl_conf *conf, const char *seed_json, struct nkv_ctl **out)
{
	struct nkv_ctl *ctl = calloc(1, sizeof(*ctl));
	const char *why = NULL;
	json_object *stored = NULL;
	int rc;

	if (!ctl)
		return -ENOMEM;
	ctl->conf = *conf;
	snprintf(ctl->gateway, sizeof(ctl->gateway), "%s", conf->gateway ? conf->gateway : "gateway");
	snprintf(ctl->group, sizeof(ctl->group), "%s", conf->group ? conf->group : "");
	snprintf(ctl->backend, sizeof(ctl->backend), "%s", conf->backend ? conf->backend : "");
	snprintf(ctl->version, sizeof(ctl->version), "%s", conf->version ? conf->version : "");
	ctl->conf.gateway = ctl->gateway;
	ctl->conf.group = ctl->group;
	ctl->started_ms = nkv_now_ms();
	pthread_mutex_init(&ctl->mu, NULL);
	pthread_mutex_init(&ctl->kick_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ctl->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* What the daemon set up from its flags and file is what runs now. */
	ctl->applied = json_tokener_parse(seed_json ? seed_json : "");
	if (!ctl->applied || st_check(ctl->applied, &why) < 0) {
		NKV_ERR("the seed state is malformed: %s", why ? why : "not JSON");
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = store_open(conf, &ctl->store)) < 0)
		goto fail;
	/* Watch first, so that a gateway of the same name starting now sees this one too. */
	store_set_identity(ctl->store, ctl->gateway);
	if ((rc = store_watch(ctl->store, kick, ctl)) < 0 || (ctl->group[0] && (rc = name_check(ctl)) < 0) ||
	    (rc = store_load(ctl->store, &stored, &ctl->bad)) < 0)
		goto fail;
	ctl->want = st_copy(ctl->applied);
	if (stored && ctl->bad) {
		/* Degraded: the well-formed entries apply, this gateway's listeners from the flags are
		 * kept (not committed: the group's state takes no change until it is repaired). */
		log_bad(ctl, st_epoch(stored));
		json_object_object_foreach(st_listeners(ctl->applied), k, l)
			if (!st_get(st_listeners(stored), k))
				json_object_object_add(st_listeners(stored), k, json_object_get(l));
	} else if (stored && (rc = join(ctl, &stored)) < 0) {
		json_object_put(stored);
		goto fail;
	}
	if (stored) { /* the stored state wins */
		json_object_put(ctl->want);
		ctl->want = stored;
		NKV_INFO("state %s, epoch %" PRIu64 ": applying it", store_name(ctl->store), st_epoch(stored));
		apply(ctl);
	} else { /* nothing stored yet: the flags and file seed it */
		json_object_object_add(ctl->want, "epoch", json_object_new_int64(1));
		if (ctl->group[0])
			st_claim_range(ctl->want, ctl->gateway); /* the first range of an empty group */
		if ((rc = store_commit(ctl->store, NULL, ctl->want)) < 0 && rc != -ECANCELED)
			goto fail;
		if (rc == -ECANCELED) { /* another gateway seeded the group meanwhile: take its state */
			if ((rc = refresh(ctl)) < 0 || (rc = join(ctl, &ctl->want)) < 0)
				goto fail;
			apply(ctl);
		} else {
			ctl->joined = true;
			json_object_object_add(ctl->applied, "epoch", json_object_new_int64(1));
			st_reconcile_gateways(ctl, ctl->applied, ctl->want);
			NKV_INFO("state %s seeded from the configuration (epoch 1)", store_name(ctl->store));
		}
	}
	if ((rc = -pthread_create(&ctl->thread, NULL, watch_main, ctl)) < 0)
		goto fail;
	*out = ctl;
	return 0;
fail:
	json_object_put(ctl->applied);
	json_object_put(ctl->want);
	json_object_put(ctl->bad);
	json_object_put(ctl->exposed);
	store_close(ctl->store);
	pthread_mutex_destroy(&ctl->mu);
	pthread_mutex_destroy(&ctl->kick_mu);
	pthread_cond_destroy(&ctl->cv);
	free(ctl);
	return rc < 0 ? rc : -EINVAL;
}

void nkv_ctl_destroy(struct nkv_ctl *ctl)
{
	if (!ctl)
		return;
	pthread_mutex_lock(&ctl->kick_mu);
	ctl->stop = true;
	pthread_cond_signal(&ctl->cv);
	pthread_mutex_unlock(&ctl->kick_mu);
	store_cancel(ctl->store); /* a load in progress stops at its next page */
	pthread_join(ctl->thread, NULL);
	store_close(ctl->store); /* no more watch callbacks after this */
	json_object_put(ctl->applied);
	json_object_put(ctl->want);
	json_object_put(ctl->bad);
	json_object_put(ctl->exposed);
	pthread_mutex_destroy(&ctl->mu);
	pthread_mutex_destroy(&ctl->kick_mu);
	pthread_cond_destroy(&ctl->cv);
	free(ctl);
}

int nkv_ctl_group_range(const struct nkv_ctl_conf *conf, uint16_t *min, uint16_t *max)
{
	const char *gw = conf->gateway ? conf->gateway : "gateway";
	struct ctl_store *s = NULL;
	json_object *st = NULL;
	uint64_t r = 0;
	int rc;

	*min = 1, *max = NKV_CNTLID_MAX;
	if (!conf->group || !*conf->group)
		return 0;
	*min = *max = 0;
	if ((rc = store_open(conf, &s)) < 0)
		return rc;
	if ((rc = store_load(s, &st, NULL)) == 0 && st) { /* nothing stored: the first range */
		json_object *c = st_copy(st);
		if (st_claim_range(c, gw) < 0)
			rc = -ENOSPC;
		else
			st_u64(st_get(st_gateways(c), gw), "cntlid_range", 0, &r);
		json_object_put(c);
	}
	json_object_put(st);
	store_close(s);
	if (rc < 0)
		return rc;
	*min = (uint16_t)(r * ST_CNTLID_RANGE + 1);
	*max = (uint16_t)((r + 1) * ST_CNTLID_RANGE);
	return 0;
}

int nkv_ctl_stored_state(const struct nkv_ctl_conf *conf, char **state_json, char *where, size_t n)
{
	struct ctl_store *s = NULL;
	json_object *st = NULL;
	const char *why = NULL;
	int rc;

	*state_json = NULL;
	if ((rc = store_open(conf, &s)) < 0)
		return rc;
	snprintf(where, n, "%s", store_name(s));
	if ((rc = store_load(s, &st, NULL)) == 0 && st && st_check(st, &why) < 0) /* malformed entries left out */
		rc = -EINVAL;
	if (rc == 0 && st && !(*state_json = strdup(json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN))))
		rc = -ENOMEM;
	json_object_put(st);
	store_close(s);
	return rc;
}
