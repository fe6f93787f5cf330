/*
 * store.c - where the control plane's state is kept.
 *
 * - A group (--group NAME): one RADOS object, "rados_nkv.group.NAME" in --group-pool, whose omap
 *   holds one entry per subsystem ("s/NQN"), namespace ("n/NQN/NSID"), host ("h/NQN/HOSTNQN") and
 *   listener ("l/GATEWAY/ADDRESS/PORT"), each a JSON object, plus "epoch" (20 decimal digits, so
 *   that byte order is number order). A commit is one write op: compare "epoch" with the epoch the
 *   change was made from, set the changed entries and the next epoch, remove the deleted ones. Two
 *   gateways committing at once: one op finds the epoch moved (-ECANCELED) and its caller starts
 *   again from the state the other wrote, so no update is ever lost. Gateways watch the object
 *   (rados_watch3); a commit is followed by a notify.
 * - A state file (--state-file): the whole state as JSON, replaced atomically (write, fsync, rename).
 * - Neither: memory only (changes are live, and lost on restart).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NKV_LOG_COMPONENT "control"
#include "common/log.h"
#include "control/ctl_int.h"

#ifdef NKV_HAVE_RADOS
#include <rados/librados.h>
#endif

enum store_kind { STORE_MEMORY, STORE_FILE, STORE_RADOS };

struct ctl_store {
	enum store_kind kind;
	char name[512];
	char path[4096];           /* file */
	uint64_t mem_epoch;        /* memory */
#ifdef NKV_HAVE_RADOS
	rados_t cluster;
	rados_ioctx_t io;
	char oid[300];
	uint64_t cookie;
	bool watching;
	void (*fn)(void *);
	void *fn_arg;
#endif
};

const char *store_name(struct ctl_store *s)
{
	return s->name;
}

/* ---- flattening: state <-> omap entries ---------------------------------------------------------- */

/* A host's or namespace's entry names its subsystem inside (an NQN may hold a '/'). */
static json_object *entry(json_object *o, const char *nqn)
{
	json_object *c = st_copy(o);
	json_object_object_add(c, "nqn", json_object_new_string(nqn));
	json_object *s = json_object_new_string(json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN));
	json_object_put(c);
	return s;
}

/* Put every entry of @st into @out as key -> JSON string (an object of strings). */
static json_object *flatten(json_object *st)
{
	json_object *out = json_object_new_object();
	char key[1024];

	json_object_object_foreach(st_subsystems(st), nqn, ss) {
		json_object *top = json_object_new_object();
		json_object_object_foreach(ss, k, v) {
			if (strcmp(k, "hosts") != 0 && strcmp(k, "namespaces") != 0)
				json_object_object_add(top, k, json_object_get(v));
		}
		snprintf(key, sizeof(key), "s/%s", nqn);
		json_object_object_add(out, key, json_object_new_string(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN)));
		json_object_put(top);
		json_object_object_foreach(st_get(ss, "hosts"), h, hv) {
			snprintf(key, sizeof(key), "h/%s/%s", nqn, h);
			json_object_object_add(out, key, entry(hv, nqn));
		}
		json_object_object_foreach(st_get(ss, "namespaces"), n, nv) {
			snprintf(key, sizeof(key), "n/%s/%s", nqn, n);
			json_object_object_add(out, key, entry(nv, nqn));
		}
	}
	json_object_object_foreach(st_listeners(st), lk, lv) {
		snprintf(key, sizeof(key), "l/%s", lk);
		json_object_object_add(out, key, json_object_new_string(json_object_to_json_string_ext(lv, JSON_C_TO_STRING_PLAIN)));
	}
	return out;
}

#ifdef NKV_HAVE_RADOS
/* Rebuild a state from omap entries. Subsystems first (hosts and namespaces hang off them). */
static int unflatten(json_object *kv, uint64_t epoch, json_object **out)
{
	json_object *st = st_new();
	const char *why = NULL;

	json_object_object_add(st, "epoch", json_object_new_int64((int64_t)epoch));
	for (int pass = 0; pass < 2; pass++) {
		json_object_object_foreach(kv, k, v) {
			json_object *o = json_tokener_parse(json_object_get_string(v));
			if (!o || !json_object_is_type(o, json_type_object)) {
				NKV_ERR("group state: entry '%s' is not a JSON object", k);
				json_object_put(o);
				json_object_put(st);
				return -EINVAL;
			}
			const char *nqn = st_str(o, "nqn");
			json_object *ss = nqn ? st_get(st_subsystems(st), nqn) : NULL;
			if (pass == 0 && k[0] == 's') {
				json_object_object_add(o, "hosts", json_object_new_object());
				json_object_object_add(o, "namespaces", json_object_new_object());
				json_object_object_add(st_subsystems(st), nqn ? nqn : "", o);
				continue;
			}
			if (pass == 1 && k[0] == 'h' && ss && st_str(o, "host_nqn")) {
				json_object_object_del(o, "nqn");
				json_object_object_add(st_get(ss, "hosts"), st_str(o, "host_nqn"), o);
				continue;
			}
			uint64_t nsid;
			if (pass == 1 && k[0] == 'n' && ss && st_u64(o, "nsid", 0, &nsid) == 0) {
				char n[16];
				snprintf(n, sizeof(n), "%" PRIu64, nsid);
				json_object_object_del(o, "nqn");
				json_object_object_add(st_get(ss, "namespaces"), n, o);
				continue;
			}
			if (pass == 1 && k[0] == 'l') {
				json_object_object_add(st_listeners(st), k + 2, o);
				continue;
			}
			json_object_put(o); /* the other pass's, or an orphan (checked below) */
		}
	}
	if (st_check(st, &why) < 0) {
		NKV_ERR("group state: %s", why);
		json_object_put(st);
		return -EINVAL;
	}
	*out = st;
	return 0;
}

static void watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id, void *data, size_t len)
{
	struct ctl_store *s = arg;
	(void)notifier_id, (void)data, (void)len;
	rados_notify_ack(s->io, s->oid, notify_id, handle, NULL, 0);
	if (s->fn)
		s->fn(s->fn_arg);
}

static void watch_err(void *arg, uint64_t cookie, int err)
{
	struct ctl_store *s = arg;
	(void)cookie;
	NKV_WARN("group %s: watch lost (%s): re-watching; the epoch is re-read meanwhile", s->oid, strerror(-err));
	s->watching = false; /* the control thread re-watches (store_epoch) */
	if (s->fn)
		s->fn(s->fn_arg);
}

static int rewatch(struct ctl_store *s)
{
	if (s->watching)
		rados_unwatch2(s->io, s->cookie);
	int rc = rados_watch3(s->io, s->oid, &s->cookie, watch_cb, watch_err, 30, s);
	s->watching = rc == 0;
	return rc;
}
#endif

/* ---- open / close -------------------------------------------------------------------------------- */

int store_open(const struct nkv_ctl_conf *c, struct ctl_store **out)
{
	struct ctl_store *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	if (c->group && *c->group) {
#ifdef NKV_HAVE_RADOS
		int rc;
		s->kind = STORE_RADOS;
		snprintf(s->oid, sizeof(s->oid), "rados_nkv.group.%s", c->group);
		snprintf(s->name, sizeof(s->name), "rados:%s/%s", c->group_pool, s->oid);
		char who[160];
		snprintf(who, sizeof(who), "client.%s", c->client_id && *c->client_id ? c->client_id : "admin");
		if ((rc = rados_create2(&s->cluster, "ceph", who, 0)) < 0) {
			free(s);
			return rc;
		}
		if ((c->ceph_conf && *c->ceph_conf && (rc = rados_conf_read_file(s->cluster, c->ceph_conf)) < 0) ||
		    (!(c->ceph_conf && *c->ceph_conf) && (rc = rados_conf_read_file(s->cluster, NULL)) < 0) ||
		    (c->keyring && *c->keyring && (rc = rados_conf_set(s->cluster, "keyring", c->keyring)) < 0) ||
		    (rc = rados_conf_set(s->cluster, "rados_osd_op_timeout", "10")) < 0 ||
		    (rc = rados_conf_set(s->cluster, "rados_mon_op_timeout", "10")) < 0 ||
		    (rc = rados_connect(s->cluster)) < 0) {
			NKV_ERR("group %s: cannot connect to the cluster: %s", c->group, strerror(-rc));
			rados_shutdown(s->cluster);
			free(s);
			return rc;
		}
		if ((rc = rados_ioctx_create(s->cluster, c->group_pool, &s->io)) < 0) {
			NKV_ERR("group %s: pool '%s': %s", c->group, c->group_pool, strerror(-rc));
			rados_shutdown(s->cluster);
			free(s);
			return rc;
		}
#else
		free(s);
		NKV_ERR("--group needs the rados backend (built without librados)");
		return -ENOTSUP;
#endif
	} else if (c->state_file && *c->state_file) {
		s->kind = STORE_FILE;
		snprintf(s->path, sizeof(s->path), "%s", c->state_file);
		snprintf(s->name, sizeof(s->name), "file:%s", c->state_file);
	} else {
		s->kind = STORE_MEMORY;
		snprintf(s->name, sizeof(s->name), "memory");
	}
	*out = s;
	return 0;
}

void store_close(struct ctl_store *s)
{
	if (!s)
		return;
#ifdef NKV_HAVE_RADOS
	if (s->kind == STORE_RADOS) {
		if (s->watching)
			rados_unwatch2(s->io, s->cookie);
		rados_watch_flush(s->cluster);
		rados_ioctx_destroy(s->io);
		rados_shutdown(s->cluster);
	}
#endif
	free(s);
}

/* ---- load ------------------------------------------------------------------------------------------ */

static int file_load(struct ctl_store *s, json_object **out)
{
	const char *why = NULL;
	json_object *st;

	/* Never through a link: the daemon writes this file, it reads only what it wrote. */
	int fd = open(s->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		int rc = -errno;
		NKV_ERR("state file %s: %s", s->path, rc == -ELOOP ? "is a symbolic link: refused" : strerror(-rc));
		return rc;
	}
	st = json_object_from_fd(fd);
	close(fd);
	if (!st) {
		NKV_ERR("state file %s: %s", s->path, json_util_get_last_err());
		return -EINVAL;
	}
	if (st_check(st, &why) < 0) {
		NKV_ERR("state file %s: %s", s->path, why);
		json_object_put(st);
		return -EINVAL;
	}
	*out = st;
	return 0;
}

#ifdef NKV_HAVE_RADOS
static int rados_load(struct ctl_store *s, json_object **out)
{
	json_object *kv = json_object_new_object();
	char after[1024] = "";
	uint64_t epoch = 0;
	bool exists = true;
	int rc = 0;

	for (unsigned char more = 1; more && rc == 0;) {
		rados_read_op_t op = rados_create_read_op();
		rados_omap_iter_t it = NULL;
		int prval = 0;
		rados_read_op_omap_get_vals2(op, after, "", 512, &it, &more, &prval);
		rc = rados_read_op_operate(op, s->io, s->oid, 0);
		if (rc == 0 && prval < 0)
			rc = prval;
		if (rc == -ENOENT) {
			exists = false;
			rc = 0;
			more = 0;
		}
		char *k, *v;
		size_t kl, vl;
		while (rc == 0 && it && rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k) {
			snprintf(after, sizeof(after), "%.*s", (int)kl, k);
			if (strcmp(after, "epoch") == 0) {
				char e[32];
				snprintf(e, sizeof(e), "%.*s", (int)vl, v);
				epoch = strtoull(e, NULL, 10);
			} else {
				json_object_object_add(kv, after, json_object_new_string_len(v, (int)vl));
			}
		}
		if (it)
			rados_omap_get_end(it);
		rados_release_read_op(op);
	}
	if (rc == 0 && exists && epoch)
		rc = unflatten(kv, epoch, out);
	json_object_put(kv);
	return rc;
}
#endif

int store_load(struct ctl_store *s, json_object **out)
{
	*out = NULL;
	switch (s->kind) {
	case STORE_FILE:
		return file_load(s, out);
#ifdef NKV_HAVE_RADOS
	case STORE_RADOS:
		return rados_load(s, out);
#endif
	default:
		return 0; /* memory: the caller's copy is the state */
	}
}

int64_t store_epoch(struct ctl_store *s)
{
#ifdef NKV_HAVE_RADOS
	if (s->kind == STORE_RADOS) {
		const char *keys[] = {"epoch"};
		size_t lens[] = {5};
		rados_read_op_t op = rados_create_read_op();
		rados_omap_iter_t it = NULL;
		int prval = 0, rc;
		int64_t epoch = 0;
		if (!s->watching)
			rewatch(s); /* lost, or never set: the object may not exist yet */
		rados_read_op_omap_get_vals_by_keys2(op, keys, 1, lens, &it, &prval);
		rc = rados_read_op_operate(op, s->io, s->oid, 0);
		char *k, *v;
		size_t kl, vl;
		if (rc == 0 && prval == 0 && it && rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k) {
			char e[32];
			snprintf(e, sizeof(e), "%.*s", (int)vl, v);
			epoch = (int64_t)strtoull(e, NULL, 10);
		}
		if (it)
			rados_omap_get_end(it);
		rados_release_read_op(op);
		return rc == -ENOENT ? 0 : rc < 0 ? rc : epoch;
	}
#endif
	if (s->kind == STORE_FILE) {
		json_object *st = NULL;
		int rc = file_load(s, &st);
		int64_t e = rc < 0 ? rc : st ? (int64_t)st_epoch(st) : 0;
		json_object_put(st);
		return e;
	}
	return (int64_t)s->mem_epoch;
}

/* ---- commit ---------------------------------------------------------------------------------------- */

/* fsync the directory holding @path, so that a rename into it survives a crash. */
static int sync_dir(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * Replace the state file: a temporary file created fresh (O_EXCL: never one someone planted, nor a
 * link to follow; mode 0600, as the state holds DH-HMAC-CHAP secrets), written, synced, renamed over
 * the state (rename replaces a link planted there, never its target), and the directory synced.
 */
static int file_commit(struct ctl_store *s, json_object *next)
{
	char tmp[4200];
	const char *txt = json_object_to_json_string_ext(next, JSON_C_TO_STRING_PRETTY);
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", s->path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* left by a crash (or planted): removed, never used */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		NKV_ERR("state file %s: cannot create %s: %s", s->path, tmp, strerror(-rc));
		return rc;
	}
	size_t len = strlen(txt);
	if (write(fd, txt, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, s->path) < 0)
		rc = -errno;
	if (rc < 0) {
		NKV_ERR("state file %s: %s", s->path, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	if ((rc = sync_dir(s->path)) < 0)
		NKV_WARN("state file %s: cannot sync its directory: %s", s->path, strerror(-rc));
	return 0;
}

#ifdef NKV_HAVE_RADOS
static int rados_commit(struct ctl_store *s, json_object *prev, json_object *next)
{
	json_object *a = prev ? flatten(prev) : json_object_new_object(), *b = flatten(next);
	uint64_t old = prev ? st_epoch(prev) : 0;
	char eold[24], enew[24];
	const char **sk = NULL, **sv = NULL, **rk = NULL;
	size_t *skl = NULL, *svl = NULL, *rkl = NULL, ns = 0, nr = 0;
	int prval = 0, rc;

	snprintf(eold, sizeof(eold), "%020" PRIu64, old);
	snprintf(enew, sizeof(enew), "%020" PRIu64, st_epoch(next));
	size_t cap = (size_t)json_object_object_length(a) + (size_t)json_object_object_length(b) + 1;
	sk = calloc(cap, sizeof(*sk));
	sv = calloc(cap, sizeof(*sv));
	rk = calloc(cap, sizeof(*rk));
	skl = calloc(cap, sizeof(*skl));
	svl = calloc(cap, sizeof(*svl));
	rkl = calloc(cap, sizeof(*rkl));
	if (!sk || !sv || !rk || !skl || !svl || !rkl) {
		rc = -ENOMEM;
		goto out;
	}
	json_object_object_foreach(b, k, v) { /* new or changed entries */
		json_object *was = st_get(a, k);
		if (was && strcmp(json_object_get_string(was), json_object_get_string(v)) == 0)
			continue;
		sk[ns] = k;
		skl[ns] = strlen(k);
		sv[ns] = json_object_get_string(v);
		svl[ns++] = strlen(json_object_get_string(v));
	}
	sk[ns] = "epoch";
	skl[ns] = 5;
	sv[ns] = enew;
	svl[ns++] = strlen(enew);
	json_object_object_foreach(a, ka, va) { /* deleted entries */
		(void)va;
		if (!st_get(b, ka)) {
			rk[nr] = ka;
			rkl[nr++] = strlen(ka);
		}
	}
	rados_write_op_t op = rados_create_write_op();
	if (old == 0)
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL); /* the first commit: nobody else's */
	else
		rados_write_op_omap_cmp(op, "epoch", LIBRADOS_CMPXATTR_OP_EQ, eold, strlen(eold), &prval);
	rados_write_op_omap_set2(op, sk, sv, skl, svl, ns);
	if (nr)
		rados_write_op_omap_rm_keys2(op, rk, rkl, nr);
	rc = rados_write_op_operate2(op, s->io, s->oid, NULL, 0);
	rados_release_write_op(op);
	if (rc == -EEXIST || rc == -ECANCELED || prval == -ECANCELED)
		rc = -ECANCELED;
out:
	free(sk), free(sv), free(rk), free(skl), free(svl), free(rkl);
	json_object_put(a);
	json_object_put(b);
	return rc;
}
#endif

int store_commit(struct ctl_store *s, json_object *prev, json_object *next)
{
	int64_t cur;

	switch (s->kind) {
	case STORE_FILE:
		/* One daemon per state file (the pid file guards that): compare, then replace. */
		if ((cur = store_epoch(s)) < 0)
			return (int)cur;
		if ((uint64_t)cur != (prev ? st_epoch(prev) : 0))
			return -ECANCELED;
		return file_commit(s, next);
#ifdef NKV_HAVE_RADOS
	case STORE_RADOS:
		return rados_commit(s, prev, next);
#endif
	default:
		if (s->mem_epoch != (prev ? st_epoch(prev) : 0))
			return -ECANCELED;
		s->mem_epoch = st_epoch(next);
		return 0;
	}
}

void store_notify(struct ctl_store *s)
{
#ifdef NKV_HAVE_RADOS
	if (s->kind == STORE_RADOS) {
		char *reply = NULL;
		size_t len = 0;
		/* Every watcher acks at once (before applying), so this returns within a round trip; a
		 * gateway that is down times out here and catches up by re-reading the epoch. */
		int rc = rados_notify2(s->io, s->oid, "changed", 7, 1000, &reply, &len);
		if (rc < 0 && rc != -ETIMEDOUT)
			NKV_WARN("group %s: notify: %s", s->oid, strerror(-rc));
		rados_buffer_free(reply);
	}
#else
	(void)s;
#endif
}

int store_watch(struct ctl_store *s, void (*fn)(void *), void *arg)
{
#ifdef NKV_HAVE_RADOS
	if (s->kind == STORE_RADOS) {
		s->fn = fn;
		s->fn_arg = arg;
		rewatch(s); /* no object yet (-ENOENT): store_epoch watches once it exists */
		return 0;
	}
#endif
	(void)s, (void)fn, (void)arg;
	return 0;
}
