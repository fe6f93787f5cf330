/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.c - where the control plane's state is kept.
 *
 * - A group (--group NAME): one RADOS object, "rados_nkv.group.NAME" in --group-pool, whose omap
 *   holds one entry per subsystem, namespace, host and listener (group_state.c: the keys and what
 *   a well-formed entry is), each a JSON object, plus "epoch" (20 decimal digits, so that byte
 *   order is number order). A commit is one write op: compare "epoch" with the epoch the change was
 *   made from, set the changed entries and the next epoch, remove the deleted ones. Two gateways
 *   committing at once: one op finds the epoch moved (-ECANCELED) and its caller starts again from
 *   the state the other wrote, so no update is ever lost. Gateways watch the object (rados_watch3);
 *   a commit is followed by a notify, which every watcher acknowledges with its gateway's name (so
 *   a starting gateway can tell whether its name is taken by a live one).
 *   A load reads the omap in pages and is bounded whatever the object holds: GROUP_MAX_ENTRIES
 *   entries, GROUP_MAX_BYTES bytes, GROUP_LOAD_MS, each page past the last key read (kept whole).
 * - A state file (--state-file): the whole state as JSON, replaced atomically (write, fsync, rename).
 * - Neither: memory only (changes are live, and lost on restart).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define NKV_LOG_COMPONENT "control"
#include "common/clock.h"
#include "common/log.h"
#include "control/ctl_int.h"

#ifdef NKV_HAVE_RADOS
#include <rados/librados.h>

#include "backend/rados_pool.h"
#endif

enum store_kind { STORE_MEMORY, STORE_FILE, STORE_RADOS };

#define GROUP_MAX_ENTRIES (1u << 20)     /* entries a group object may hold */
#define GROUP_MAX_BYTES (256ull << 20)   /* bytes of keys and values it may hold */
#define GROUP_LOAD_MS 60000              /* the longest a load may take */
#define GROUP_PAGE 512                   /* entries per read */

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
	bool watching;             /* a watch is registered (cookie): unwatch it before another */
	atomic_bool watch_lost;    /* librados reported it lost (watch_err): re-watch */
	atomic_bool cancel;        /* store_cancel: loads stop */
	void (*fn)(void *);
	void *fn_arg;
	char ident[300];           /* "nkv-gw INSTANCE NAME": the notify ack (store_set_identity) */
	uint64_t instance;         /* this process's store, among the group's watchers */
	json_object *raw;          /* the well-formed entries last read, key -> value ... */
	uint64_t raw_epoch;        /* ... at this epoch (the next commit diffs against them) */
#endif
};

const char *store_name(struct ctl_store *s)
{
	return s->name;
}

#ifdef NKV_HAVE_RADOS
static void watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id, void *data, size_t len)
{
	struct ctl_store *s = arg;
	(void)notifier_id, (void)data, (void)len;
	/* The ack carries this gateway's name (store_name_taken); every notify gets it, it is small. */
	rados_notify_ack(s->io, s->oid, notify_id, handle, s->ident, s->ident[0] ? strlen(s->ident) : 0);
	if (s->fn)
		s->fn(s->fn_arg);
}

/* From a librados thread: the watch is gone. It stays registered (s->watching) until the control
 * thread unwatches it in rewatch(): librados frees a watch's handle only in rados_unwatch2, and an
 * unwatch from this callback would wait for the callback itself. */
static void watch_err(void *arg, uint64_t cookie, int err)
{
	struct ctl_store *s = arg;
	(void)cookie;
	NKV_WARN("group %s: watch lost (%s): re-watching; the epoch is re-read meanwhile", s->oid, strerror(-err));
	atomic_store(&s->watch_lost, true);
	if (s->fn)
		s->fn(s->fn_arg);
}

static int rewatch(struct ctl_store *s)
{
	if (s->watching)
		rados_unwatch2(s->io, s->cookie); /* lost or not: its handle is released here */
	s->watching = false;
	atomic_store(&s->watch_lost, false);
	int rc = rados_watch3(s->io, s->oid, &s->cookie, watch_cb, watch_err, 30, s);
	s->watching = rc == 0;
	return rc;
}

void store_test_watch_error(struct ctl_store *s)
{
	if (s->kind == STORE_RADOS)
		watch_err(s, s->cookie, -ENOTCONN);
}
#else
void store_test_watch_error(struct ctl_store *s)
{
	(void)s;
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
		if (getrandom(&s->instance, sizeof(s->instance), 0) != sizeof(s->instance))
			s->instance = nkv_now_ms() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s;
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
		/* The state is an omap: on an erasure-coded pool a commit fails and a load reads an empty
		 * group, as if no gateway had ever written one (backend/rados_pool.h). */
		if (nkv_rados_pool_erasure(s->cluster, c->group_pool) == 1) {
			NKV_ERR("group %s: pool '%s' is erasure-coded and keeps no omap, where the group state lives: "
				"use a replicated --group-pool", c->group, c->group_pool);
			rados_ioctx_destroy(s->io);
			rados_shutdown(s->cluster);
			free(s);
			return -EOPNOTSUPP;
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
		json_object_put(s->raw);
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
/* The entries read so far (copies: an iterator's strings live until it ends). */
struct entries {
	struct group_entry *v;
	size_t n, cap, bytes;
};

static void entries_free(struct entries *e)
{
	for (size_t i = 0; i < e->n; i++) {
		free((char *)e->v[i].key);
		free((char *)e->v[i].val);
	}
	free(e->v);
}

static int entries_add(struct entries *e, const char *k, size_t kl, const char *v, size_t vl)
{
	if (e->n == GROUP_MAX_ENTRIES || (e->bytes += kl + vl) > GROUP_MAX_BYTES)
		return -EFBIG;
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 64;
		struct group_entry *nv = realloc(e->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		e->v = nv, e->cap = cap;
	}
	char *kc = malloc(kl + 1), *vc = malloc(vl + 1);
	if (!kc || !vc) {
		free(kc), free(vc);
		return -ENOMEM;
	}
	memcpy(kc, k, kl), kc[kl] = '\0';
	memcpy(vc, v, vl), vc[vl] = '\0';
	e->v[e->n++] = (struct group_entry){.key = kc, .val = vc, .klen = kl, .vlen = vl};
	return 0;
}

/* Byte order of omap keys: is @a (@an bytes) after @b? */
static bool key_after(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c > 0 || (c == 0 && an > bn);
}

/* Every omap entry of the group's object into @e; *exists false when there is no object. */
static int rados_read_all(struct ctl_store *s, struct entries *e, bool *exists)
{
	uint64_t deadline = nkv_now_ms() + GROUP_LOAD_MS;
	int rc = 0;

	*exists = true;
	for (unsigned char more = 1; more && rc == 0;) {
		/* The page starts after the last key read, whole. rados_read_op_omap_get_vals2 takes a C
		 * string: after a key with a NUL byte the page starts at its prefix, so keys not past the
		 * last one read are skipped, and a page that brings none is an error, not a loop. */
		const char *after = e->n ? e->v[e->n - 1].key : "";
		size_t got = 0;
		rados_read_op_t op;
		rados_omap_iter_t it = NULL;
		int prval = 0;

		if (atomic_load(&s->cancel))
			return -EINTR;
		if (nkv_now_ms() > deadline)
			return -ETIMEDOUT;
		op = rados_create_read_op();
		rados_read_op_omap_get_vals2(op, after, "", GROUP_PAGE, &it, &more, &prval);
		rc = rados_read_op_operate(op, s->io, s->oid, 0);
		if (rc == 0 && prval < 0)
			rc = prval;
		if (rc == -ENOENT) {
			*exists = false;
			rc = 0;
			more = 0;
		}
		char *k, *v;
		size_t kl, vl;
		while (rc == 0 && it && rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k) {
			if (e->n && !key_after(k, kl, e->v[e->n - 1].key, e->v[e->n - 1].klen))
				continue; /* read already */
			rc = entries_add(e, k, kl, v, vl);
			got++;
		}
		if (rc == 0 && more && got == 0)
			rc = -EIO;
		if (it)
			rados_omap_get_end(it);
		rados_release_read_op(op);
	}
	return rc;
}

static int rados_load(struct ctl_store *s, json_object **out, json_object **bad)
{
	struct entries e = {0};
	struct group_parsed g;
	bool exists;
	int rc = rados_read_all(s, &e, &exists);

	if (rc == -EFBIG)
		NKV_ERR("group %s: more than %u entries or %llu MiB: not a state a gateway wrote; refused", s->oid,
			GROUP_MAX_ENTRIES, GROUP_MAX_BYTES >> 20);
	else if (rc == -ETIMEDOUT)
		NKV_ERR("group %s: not read within %u s", s->oid, GROUP_LOAD_MS / 1000);
	else if (rc == -EIO)
		NKV_ERR("group %s: the omap listing does not move on", s->oid);
	if (rc == 0 && exists && (rc = group_parse(e.v, e.n, &g)) == 0) {
		if (g.epoch) {
			*out = g.st;
			g.st = NULL;
			if (bad && g.nbad) {
				*bad = json_object_new_object();
				json_object_object_add(*bad, "malformed", json_object_new_uint64(g.nbad));
				json_object_object_add(*bad, "entries", g.bad);
				g.bad = NULL;
			}
			json_object_put(s->raw);
			s->raw = g.raw;
			s->raw_epoch = g.epoch;
			g.raw = NULL;
		}
		group_parsed_free(&g);
	}
	entries_free(&e);
	return rc;
}

void store_cancel(struct ctl_store *s)
{
	atomic_store(&s->cancel, true);
}
#else
void store_cancel(struct ctl_store *s)
{
	(void)s;
}
#endif

int store_load(struct ctl_store *s, json_object **out, json_object **bad)
{
	*out = NULL;
	if (bad)
		*bad = NULL;
	switch (s->kind) {
	case STORE_FILE:
		return file_load(s, out);
#ifdef NKV_HAVE_RADOS
	case STORE_RADOS:
		return rados_load(s, out, bad);
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
		if (!s->watching || atomic_load(&s->watch_lost))
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
	/* Diff against what the object holds at @prev's epoch, as read (keys in the earlier form
	 * included, so that this commit replaces them); only when that is not at hand, against
	 * @prev's own entries. */
	json_object *a = prev && s->raw && s->raw_epoch == st_epoch(prev) ? json_object_get(s->raw)
			 : prev ? group_flatten(prev) : json_object_new_object();
	json_object *b = group_flatten(next);
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
	if (rc == 0 && !s->watching && s->fn)
		rewatch(s); /* the first commit made the object: watch it now, not at the next poll */
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

/* ---- malformed entries, gateway names ------------------------------------------------------------- */

int store_repair(struct ctl_store *s, uint64_t epoch, const char *const *keys, size_t n, bool all,
		 const char **missing)
{
#ifdef NKV_HAVE_RADOS
	struct entries e = {0};
	struct group_parsed g = {0};
	const char **rk = NULL;
	size_t *rkl = NULL, nr = 0;
	bool exists, *found = calloc(n + 1, sizeof(*found));
	int rc = -ENOMEM, prval = 0;

	*missing = NULL;
	if (s->kind != STORE_RADOS) {
		free(found);
		return -ENOTSUP;
	}
	if (!found || (rc = rados_read_all(s, &e, &exists)) < 0 || (rc = group_parse(e.v, e.n, &g)) < 0)
		goto out;
	rc = -ECANCELED;
	if (!exists || g.epoch != epoch)
		goto out;
	rc = -ENOMEM;
	if (!(rk = calloc(e.n + 1, sizeof(*rk))) || !(rkl = calloc(e.n + 1, sizeof(*rkl))))
		goto out;
	for (size_t i = 0; i < e.n; i++) { /* malformed: neither the epoch nor a well-formed entry */
		const struct group_entry *x = &e.v[i];
		if ((x->klen == 5 && memcmp(x->key, "epoch", 5) == 0) ||
		    (!memchr(x->key, 0, x->klen) && st_get(g.raw, x->key)))
			continue;
		char *shown = group_key_print(x->key, x->klen);
		bool drop = all;
		for (size_t j = 0; shown && j < n; j++)
			if (strcmp(shown, keys[j]) == 0)
				drop = found[j] = true;
		free(shown);
		if (drop) {
			rk[nr] = x->key;
			rkl[nr++] = x->klen;
		}
	}
	for (size_t j = 0; j < n; j++)
		if (!found[j]) {
			*missing = keys[j];
			rc = -ENOENT;
			goto out;
		}
	char eold[24], enew[24];
	snprintf(eold, sizeof(eold), "%020" PRIu64, epoch);
	snprintf(enew, sizeof(enew), "%020" PRIu64, epoch + 1);
	const char *ek = "epoch", *ev = enew;
	size_t ekl = 5, evl = strlen(enew);
	rados_write_op_t op = rados_create_write_op();
	rados_write_op_omap_cmp(op, "epoch", LIBRADOS_CMPXATTR_OP_EQ, eold, strlen(eold), &prval);
	if (nr)
		rados_write_op_omap_rm_keys2(op, rk, rkl, nr);
	rados_write_op_omap_set2(op, &ek, &ev, &ekl, &evl, 1);
	rc = rados_write_op_operate2(op, s->io, s->oid, NULL, 0);
	rados_release_write_op(op);
	if (rc == -ECANCELED || prval == -ECANCELED)
		rc = -ECANCELED;
	if (rc == 0)
		NKV_WARN("group %s: %zu malformed entr%s removed (epoch %" PRIu64 ")", s->oid, nr, nr == 1 ? "y" : "ies",
			 epoch + 1);
out:
	free(rk);
	free(rkl);
	free(found);
	group_parsed_free(&g);
	entries_free(&e);
	return rc;
#else
	(void)s, (void)epoch, (void)keys, (void)n, (void)all;
	*missing = NULL;
	return -ENOTSUP;
#endif
}

void store_set_identity(struct ctl_store *s, const char *gw)
{
#ifdef NKV_HAVE_RADOS
	snprintf(s->ident, sizeof(s->ident), "nkv-gw %016" PRIx64 " %s", s->instance, gw);
#else
	(void)s, (void)gw;
#endif
}

#ifdef NKV_HAVE_RADOS
/* Little-endian reads from a notify reply; false when it is shorter. */
static bool take(const char **p, const char *end, void *out, size_t n)
{
	if ((size_t)(end - *p) < n)
		return false;
	if (out) {
		memset(out, 0, 8);
		for (size_t i = 0; i < n; i++)
			((uint8_t *)out)[i] = (uint8_t)(*p)[i]; /* hosts are little-endian, as the encoding */
	}
	*p += n;
	return true;
}
#endif

int store_name_taken(struct ctl_store *s, const char *gw, char *who, size_t n, unsigned timeout_ms)
{
#ifdef NKV_HAVE_RADOS
	char *reply = NULL;
	size_t len = 0;
	int taken = 0;

	if (s->kind != STORE_RADOS)
		return 0;
	/* A gateway that died without unwatching stays a watcher until its watch times out; it does
	 * not answer, so the notify waits @timeout_ms (-ETIMEDOUT) and the answers are still there. */
	int rc = rados_notify2(s->io, s->oid, "who", 3, timeout_ms, &reply, &len);
	if (rc == -ENOENT)
		return 0; /* no object: no gateway yet */
	if (rc < 0 && rc != -ETIMEDOUT) {
		rados_buffer_free(reply);
		return rc;
	}
	/* The reply: u32 acks, each {u64 gid, u64 cookie, u32 len, payload}; then the timeouts. */
	const char *p = reply, *end = reply ? reply + len : NULL;
	uint64_t nacks = 0;
	if (reply && take(&p, end, &nacks, 4)) {
		for (uint64_t i = 0; i < nacks; i++) {
			uint64_t gid = 0, cookie = 0, plen = 0;
			if (!take(&p, end, &gid, 8) || !take(&p, end, &cookie, 8) || !take(&p, end, &plen, 4) ||
			    (uint64_t)(end - p) < plen)
				break;
			char ack[300], name[300];
			unsigned long long inst;
			snprintf(ack, sizeof(ack), "%.*s", (int)(plen < 299 ? plen : 299), p);
			p += plen;
			if (sscanf(ack, "nkv-gw %llx %299[^\n]", &inst, name) == 2 && inst != s->instance &&
			    strcmp(name, gw) == 0) {
				snprintf(who, n, "client.%" PRIu64, gid);
				taken = 1;
			}
		}
	}
	rados_buffer_free(reply);
	return taken;
#else
	(void)s, (void)gw, (void)who, (void)n, (void)timeout_ms;
	return 0;
#endif
}
