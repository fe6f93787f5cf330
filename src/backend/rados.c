/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados.c - kvdev over librados: one RADOS object per key-value pair, named by the lowercase hex of
 * the key, in the pool's RADOS namespace. Each command is one compound op (docs/design.md section 2.3).
 * Completions fire on librados threads: the callback reads the result, releases the completion and
 * the op, then hands the I/O back to its owner thread through io->msgq (as SPDK's bdev_rbd does), or
 * completes it right there while that thread sleeps and lends itself (reactor/msgq.h).
 *
 * Deadlines are the target's, not librados': every I/O carries a deadline (op timeout), and a
 * watchdog thread cancels late ops with rados_aio_cancel(), which completes them with 82h (DNR clear).
 * rados_osd_op_timeout is deliberately NOT set on the I/O handle.
 *
 * Recovery after an OSD restart: the Objecter asks the monitor for a newer OSD map only when, at one
 * of its ticks (objecter_tick_interval, 5 s), an op has been in flight longer than objecter_timeout
 * (10 s) - "laggy". Ops that end sooner (by rados_osd_op_timeout or by a cancel) never trigger it, so
 * after an OSD restart (a new address) the client kept sending to the old one and every op timed out
 * for minutes (seen with a plain librados program). Both handles therefore tick every second and call
 * an op laggy after 1 s: while ops stall, the Objecter pings the OSD and renews its map subscription,
 * asynchronously, and resends in-flight ops as soon as the new map names the OSD's new address.
 * (A blocking rados_wait_for_latest_osdmap() on a helper thread did the same but hung shutdown while
 * the monitor was down: it has no timeout.)
 *
 * List is a namespace scan with librados' blocking listing calls, run by a small pool of worker
 * threads on a second cluster handle that does carry rados_osd_op_timeout (a blocking call cannot be
 * cancelled).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <rados/librados.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "rados_int.h"
#include "rados_pool.h"

/* Largest List answer kept in memory: 1 Mi keys (~17 MiB); a host pages past it. */
#define LIST_MAX_KEYS (1u << 20)
#define WATCHDOG_TICK_MS 100
#define CANCEL_BATCH 64
/* The snapshot id Exec reads at on a read-only namespace (rados_int.h, exec_ro_ioctx): above any
 * object's snapshot sequence, so the OSD reads the current object; never CEPH_NOSNAP. */
#define EXEC_RO_SNAP (1ull << 62)

static int conf_set(rados_t c, const char *key, unsigned long long val)
{
	char v[24];
	snprintf(v, sizeof(v), "%llu", val);
	int rc = rados_conf_set(c, key, v);
	if (rc < 0)
		NKV_ERR("rados: cannot set %s=%s: %s", key, v, strerror(-rc));
	return rc;
}

/* Parse a size printed by the mon ("134217728", "\"128M\"" or "128M"). 0 when not a size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	while (*s == '"' || *s == ' ')
		s++;
	uint64_t v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': case 'k': return v << 10;
	case 'M': case 'm': return v << 20;
	case 'G': case 'g': return v << 30;
	default: return v;
	}
}

/*
 * The OSDs reject objects above osd_max_object_size with -EFBIG (mapped to 85h either way). Ask the
 * mon's central config (which falls back to the default; it does not see an OSD's own ceph.conf),
 * and also honour a value set in the client's ceph.conf: the smaller wins. Asking each OSD
 * (`tell osd.N config get`) would be exact but costs a round trip per OSD at start.
 */
static uint64_t query_max_object(rados_t c)
{
	const char *cmd[] = {"{\"prefix\": \"config get\", \"who\": \"osd\", \"key\": \"osd_max_object_size\"}"};
	char *out = NULL, *outs = NULL, local[64];
	size_t outlen = 0, outslen = 0;
	uint64_t best = 128ull << 20, v;

	if (rados_mon_command(c, cmd, 1, "", 0, &out, &outlen, &outs, &outslen) == 0 && out) {
		char tmp[64];
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(outlen < 63 ? outlen : 63), out);
		if ((v = parse_size(tmp)) > 0)
			best = v;
	}
	rados_buffer_free(out);
	rados_buffer_free(outs);
	if (rados_conf_get(c, "osd_max_object_size", local, sizeof(local)) == 0 &&
	    (v = parse_size(local)) > 0 && v < best)
		best = v;
	return best;
}

/* The cephx user and the op timeout, with their defaults. */
static const char *client_id(const struct nkv_backend_conf *conf)
{
	return conf->client_id && *conf->client_id ? conf->client_id : "admin";
}

static unsigned op_timeout_s(const struct nkv_backend_conf *conf)
{
	return conf->op_timeout_s ? conf->op_timeout_s : 30;
}

/*
 * Create and connect one cluster handle. @osd_timeout_s: rados_osd_op_timeout (0: unset, the I/O
 * handle, whose deadlines are the watchdog's). The Objecter's own throttle (objecter_inflight_ops,
 * _op_bytes: 1024 ops / 100 MiB by default) would block the submitting reactor thread inside
 * librados while an OSD is down; the transports already bound what is in flight (queue depth,
 * buffer budget), so the throttle is raised out of their way.
 */
static int cluster_open(const struct nkv_backend_conf *conf, unsigned osd_timeout_s, rados_t *out)
{
	const char *id = client_id(conf);
	unsigned op_to = op_timeout_s(conf);
	unsigned conn_to = conf->connect_timeout_s ? conf->connect_timeout_s : 15;
	rados_t c;
	int rc;

	if ((rc = rados_create(&c, id)) < 0)
		return rc;
	if ((rc = rados_conf_read_file(c, conf->ceph_conf)) < 0) {
		NKV_ERR("rados: cannot read ceph conf %s: %s", conf->ceph_conf ? conf->ceph_conf : "(default)",
			strerror(-rc));
		goto fail;
	}
	if (conf->keyring && (rc = rados_conf_set(c, "keyring", conf->keyring)) < 0)
		goto fail;
	if ((osd_timeout_s && (rc = conf_set(c, "rados_osd_op_timeout", osd_timeout_s)) < 0) ||
	    (rc = conf_set(c, "rados_mon_op_timeout", op_to)) < 0 ||
	    (rc = conf_set(c, "client_mount_timeout", conn_to)) < 0 ||
	    (rc = conf_set(c, "objecter_inflight_ops", 1u << 20)) < 0 ||
	    (rc = conf_set(c, "objecter_inflight_op_bytes", 1ull << 40)) < 0 ||
	    /* see the top of this file: stalled ops make the Objecter fetch a newer OSD map */
	    (rc = conf_set(c, "objecter_tick_interval", 1)) < 0 || (rc = conf_set(c, "objecter_timeout", 1)) < 0)
		goto fail;
	if ((rc = rados_connect(c)) < 0) {
		NKV_ERR("rados: cannot connect to the cluster as client.%s within %u s: %s", id, conn_to,
			strerror(-rc));
		goto fail;
	}
	*out = c;
	return 0;
fail:
	rados_shutdown(c);
	return rc;
}

/* The meta pool must exist and keep omap (replicated): a bad one is a configuration error at start,
 * not a cache that fails later. */
static int meta_pool_check(struct nkv_kvdev *d)
{
	rados_ioctx_t io;
	int rc = rados_ioctx_create(d->list_cluster, d->meta_pool, &io);
	if (rc < 0) {
		NKV_ERR("rados: meta pool '%s': %s", d->meta_pool, strerror(-rc));
		return rc;
	}
	rados_ioctx_destroy(io);
	if ((rc = nkv_rados_pool_erasure(d->cluster, d->meta_pool)) == 1) {
		NKV_ERR("rados: meta pool '%s' is erasure-coded: it must keep omap, use a replicated pool",
			d->meta_pool);
		return -EINVAL;
	}
	if (rc < 0)
		NKV_WARN("rados: cannot tell whether meta pool '%s' is erasure-coded (%s; the monitor answers "
			 "'osd pool get' to clients with mon 'allow r'): it must be replicated", d->meta_pool,
			 strerror(-rc));
	return 0;
}

static void *list_worker(void *arg);
static void lists_expire(struct nkv_kvdev *d, uint64_t now);
static void *watchdog_main(void *arg);

/* Stop and join every thread rados_open() started. */
static void threads_stop(struct nkv_kvdev *d, bool wd)
{
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_broadcast(&d->cond);
	pthread_cond_broadcast(&d->wd_cond);
	pthread_mutex_unlock(&d->lock);
	for (unsigned i = 0; i < d->nworkers; i++)
		pthread_join(d->workers[i].thread, NULL);
	if (wd)
		pthread_join(d->watchdog, NULL);
}

static int rados_open(const struct nkv_backend_conf *conf, struct nkv_kvdev **out)
{
	struct nkv_kvdev *d = calloc(1, sizeof(*d));
	unsigned op_to = op_timeout_s(conf);
	unsigned want = conf->list_workers ? conf->list_workers : 4;
	bool wd = false;
	int rc;

	if (!d)
		return -ENOMEM;
	if (conf->meta_pool && *conf->meta_pool)
		snprintf(d->meta_pool, sizeof(d->meta_pool), "%s", conf->meta_pool);
	d->op_timeout_ms = (uint64_t)op_to * 1000;
	d->range_min = conf->cut_through_mb == NKV_CUT_THROUGH_OFF ? 0
		       : (uint64_t)(conf->cut_through_mb ? conf->cut_through_mb : NKV_CUT_THROUGH_DEFAULT_MB) << 20;
	if ((rc = cluster_open(conf, 0, &d->cluster)) < 0) {
		free(d);
		return rc;
	}
	/* The List command's deadline is the watchdog's too; the handle's own op timeout only bounds
	 * how long a worker stays blocked in a scan whose List was already answered. */
	if ((rc = cluster_open(conf, op_to, &d->list_cluster)) < 0) {
		rados_shutdown(d->cluster);
		free(d);
		return rc;
	}
	d->max_object = query_max_object(d->cluster);
	if (d->meta_pool[0] && (rc = meta_pool_check(d)) < 0) {
		rados_shutdown(d->list_cluster);
		rados_shutdown(d->cluster);
		free(d);
		return rc;
	}
	if (rados_cluster_fsid(d->cluster, d->fsid, sizeof(d->fsid)) < 0)
		d->fsid[0] = '\0';
	for (unsigned i = 0; i < FLIGHT_SHARDS; i++)
		pthread_mutex_init(&d->flight[i].lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits: see nkv_abstime_in_ms() */
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	pthread_cond_init(&d->wd_cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&d->watchdog, NULL, watchdog_main, d);
	wd = rc == 0;
	for (; rc == 0 && d->nworkers < want && d->nworkers < LIST_WORKERS_MAX; d->nworkers++) {
		d->workers[d->nworkers].d = d;
		rc = -pthread_create(&d->workers[d->nworkers].thread, NULL, list_worker, &d->workers[d->nworkers]);
	}
	if (rc < 0) {
		threads_stop(d, wd);
		rados_shutdown(d->list_cluster);
		rados_shutdown(d->cluster);
		free(d);
		return rc;
	}
	NKV_INFO("rados: connected as client.%s, fsid %s, osd max object size %" PRIu64
		 ", op timeout %u s, %u list workers, cut-through %s%" PRIu64 "%s",
		 client_id(conf), d->fsid, d->max_object, op_to, d->nworkers, d->range_min ? "from " : "off",
		 d->range_min >> 20, d->range_min ? " MiB" : "");
	*out = d;
	return 0;
}

static void rados_close(struct nkv_kvdev *d)
{
	threads_stop(d, true);
	NKV_DEBUG("rados: %" PRIu64 " ops cancelled at their deadline", atomic_load(&d->cancelled));
	for (unsigned i = 0; i < FLIGHT_SHARDS; i++)
		pthread_mutex_destroy(&d->flight[i].lock);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	pthread_cond_destroy(&d->wd_cond);
	rados_shutdown(d->list_cluster);
	rados_shutdown(d->cluster);
	free(d);
}

static void rados_ns_close(struct nkv_kvns *h);

/*
 * Is @pool erasure-coded (rados_pool.h)? Then the cache's shared state and lease go to the meta pool
 * (same RADOS namespace, CACHE_OID "@" pool), or nowhere (a cache namespace is then refused, ns_info's
 * no_shared). A monitor that does not say is logged and taken as replicated: the OSD then still
 * refuses omap writes (-EOPNOTSUPP), though omap reads would come back empty.
 */
static int ns_erasure(struct nkv_kvdev *d, struct nkv_kvns *h, const char *pool, const char *ns)
{
	int rc = nkv_rados_pool_erasure(d->cluster, pool);

	if (rc < 0) {
		NKV_WARN("rados: cannot tell whether pool '%s' is erasure-coded (%s; the monitor answers 'osd pool "
			 "get' to clients with mon 'allow r'): taken as replicated", pool, strerror(-rc));
		return 0;
	}
	h->erasure = rc == 1;
	if (!h->erasure)
		return 0;
	h->meta_ioctx = NULL; /* the data pool keeps no omap */
	if (!d->meta_pool[0])
		return 0;
	if ((rc = rados_ioctx_create(d->list_cluster, d->meta_pool, &h->meta_ioctx)) < 0) {
		NKV_ERR("rados: meta pool '%s': %s", d->meta_pool, strerror(-rc));
		h->meta_ioctx = NULL;
		return rc;
	}
	h->meta_own = true;
	rados_ioctx_set_namespace(h->meta_ioctx, ns);
	if (snprintf(h->cache_oid, sizeof(h->cache_oid), "%s@%s", CACHE_OID, pool) >= (int)sizeof(h->cache_oid)) {
		NKV_ERR("rados: pool name '%s' too long for its cache object in the meta pool", pool);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int rados_ns_open(struct nkv_kvdev *d, const char *pool, const char *ns, struct nkv_kvns **out)
{
	struct nkv_kvns *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return -ENOMEM;
	if ((rc = rados_ioctx_create(d->cluster, pool, &h->ioctx)) < 0) {
		NKV_ERR("rados: cannot open pool '%s': %s", pool, strerror(-rc));
		free(h);
		return rc;
	}
	if ((rc = rados_ioctx_create(d->list_cluster, pool, &h->list_ioctx)) < 0) {
		NKV_ERR("rados: cannot open pool '%s': %s", pool, strerror(-rc));
		rados_ioctx_destroy(h->ioctx);
		free(h);
		return rc;
	}
	if ((rc = rados_ioctx_create(d->cluster, pool, &h->exec_ro_ioctx)) < 0) {
		NKV_ERR("rados: cannot open pool '%s': %s", pool, strerror(-rc));
		rados_ioctx_destroy(h->list_ioctx);
		rados_ioctx_destroy(h->ioctx);
		free(h);
		return rc;
	}
	rados_ioctx_set_namespace(h->ioctx, ns);
	rados_ioctx_set_namespace(h->list_ioctx, ns);
	rados_ioctx_set_namespace(h->exec_ro_ioctx, ns);
	rados_ioctx_snap_set_read(h->exec_ro_ioctx, EXEC_RO_SNAP);
	snprintf(h->name, sizeof(h->name), "%s/%s", pool, ns);
	h->dev = d;
	h->meta_ioctx = h->list_ioctx;
	snprintf(h->cache_oid, sizeof(h->cache_oid), "%s", CACHE_OID);
	if ((rc = ns_erasure(d, h, pool, ns)) < 0) {
		rados_ns_close(h);
		return rc;
	}
	*out = h;
	return 0;
}

static void rados_ns_close(struct nkv_kvns *h)
{
	/* Returns within the op timeout even on a dead cluster: the watchdog cancels what is late,
	 * and the list handle's ops (touches) carry the OSD op timeout. */
	rados_aio_flush(h->ioctx);
	rados_aio_flush(h->list_ioctx);
	rados_aio_flush(h->exec_ro_ioctx);
	if (h->meta_own) {
		rados_aio_flush(h->meta_ioctx);
		rados_ioctx_destroy(h->meta_ioctx);
	}
	rados_ioctx_destroy(h->exec_ro_ioctx);
	rados_ioctx_destroy(h->list_ioctx);
	rados_ioctx_destroy(h->ioctx);
	free(h);
}

static int rados_ns_info(struct nkv_kvns *h, struct nkv_kvns_info *info)
{
	struct rados_pool_stat_t ps;
	struct rados_cluster_stat_t cs;

	memset(info, 0, sizeof(*info));
	info->max_object = h->dev->max_object;
	if (rados_ioctx_pool_stat(h->ioctx, &ps) == 0)
		info->used = ps.num_bytes;
	if (rados_cluster_stat(h->dev->cluster, &cs) == 0)
		info->capacity = cs.kb * 1024;
	nkv_id128(h->dev->fsid, h->name, info->id);
	info->erasure = h->erasure;
	info->no_shared = h->erasure && !h->meta_ioctx;
	snprintf(info->pool, sizeof(info->pool), "%.*s", (int)strcspn(h->name, "/"), h->name);
	return 0;
}

/* ---- deadlines ------------------------------------------------------------------------------- */

static struct flight *flight_of(struct nkv_kvdev *d, const struct nkv_kvio *io)
{
	return &d->flight[((uintptr_t)io * 0x9E3779B97F4A7C15ull) >> 61 & (FLIGHT_SHARDS - 1)];
}

/* Track @io for the watchdog; @fresh: a new command (a cache Store's later stages keep its deadline). */
void rados_flight_add(struct nkv_kvdev *d, struct nkv_kvio *io, bool fresh)
{
	struct flight *f = flight_of(d, io);

	if (fresh)
		io->be_deadline_ms = nkv_now_ms() + d->op_timeout_ms;
	io->be_cancelled = false;
	atomic_store_explicit(&io->be_refs, 1, memory_order_relaxed);
	io->be_next = NULL;
	pthread_mutex_lock(&f->lock);
	io->be_prev = f->tail;
	if (f->tail)
		f->tail->be_next = io;
	else
		f->head = io;
	f->tail = io;
	pthread_mutex_unlock(&f->lock);
}

void rados_flight_del(struct nkv_kvdev *d, struct nkv_kvio *io)
{
	struct flight *f = flight_of(d, io);

	pthread_mutex_lock(&f->lock);
	if (io->be_prev)
		io->be_prev->be_next = io->be_next;
	else
		f->head = io->be_next;
	if (io->be_next)
		io->be_next->be_prev = io->be_prev;
	else
		f->tail = io->be_prev;
	pthread_mutex_unlock(&f->lock);
}

/*
 * Stores and Deletes on a cache namespace report what they replaced (the usage accounting), yet a
 * write op returns no data. So a Store first tries to create the object (stage NEW): the usual case
 * for content-addressed blocks, one op. If it exists, the old record and size are read (READ) and the
 * write is guarded by comparing the record read (WRITE: cmpxattr, so a racing Store through another
 * gateway makes it read again). A Delete reads, then removes under the same guard (REMOVE).
 * A Retrieve takes the value's size from the record; an entry stored before the namespace had a
 * cache has none, and is read again as on a plain namespace (LEGACY: stat + read).
 */
enum { ST_PLAIN, ST_NEW, ST_READ, ST_WRITE, ST_REMOVE, ST_LEGACY };
#define CACHE_TRIES 16

static bool is_write(const struct nkv_kvio *io)
{
	if (io->be_stage == ST_READ)
		return false;
	return io->op == NKV_IO_STORE || io->op == NKV_IO_DELETE || (io->op == NKV_IO_EXEC && io->exec_write);
}

void rados_read_meta(rados_xattrs_iter_t it, bool *has_meta, struct nkv_meta *meta, uint8_t *raw, size_t *raw_len,
		     uint64_t *touched_ms)
{
	const char *name, *val;
	size_t len;

	*has_meta = false;
	*touched_ms = 0;
	if (raw_len)
		*raw_len = 0;
	while (it && rados_getxattrs_next(it, &name, &val, &len) == 0 && name) {
		if (strcmp(name, XATTR_META) == 0 && nkv_meta_decode(val, len, meta) == 0) {
			*has_meta = true;
			if (raw) {
				memcpy(raw, val, len); /* decode accepted it: NKV_META_LEN or NKV_META_MAX bytes */
				*raw_len = len;
			}
		} else if (strcmp(name, XATTR_ATIME) == 0 && len == 8) {
			*touched_ms = nkv_get64(val);
		}
	}
	if (it)
		rados_getxattrs_end(it);
}

struct touch {
	rados_write_op_t op;
	struct nkv_kvdev *d;
};

static void touch_done(rados_completion_t c, void *arg)
{
	struct touch *t = arg;
	rados_aio_release(c);
	rados_release_write_op(t->op);
	atomic_fetch_sub(&t->d->touches, 1);
	free(t);
}

/*
 * Refresh the last use of a retrieved entry (LRU), off the command's path: a write op of its own
 * that changes nothing if the entry was stored again meanwhile. On the list handle, whose ops carry
 * the OSD op timeout, so a dead OSD cannot keep touches forever; at most TOUCH_MAX in flight.
 */
static void touch(struct nkv_kvns *h, const struct nkv_kvio *io, const char *oid)
{
	struct nkv_kvdev *d = h->dev;
	uint8_t m[NKV_META_MAX], a[8];
	uint64_t now = nkv_unix_ms();
	rados_completion_t c;
	struct touch *t;

	if (atomic_fetch_add(&d->touches, 1) >= TOUCH_MAX || !(t = malloc(sizeof(*t)))) {
		atomic_fetch_sub(&d->touches, 1);
		return;
	}
	t->d = d;
	size_t mlen = nkv_meta_encode(&io->meta, m);
	nkv_put64(a, now);
	if (!(t->op = rados_create_write_op()) || rados_aio_create_completion2(t, touch_done, &c) < 0) {
		if (t->op)
			rados_release_write_op(t->op);
		free(t);
		atomic_fetch_sub(&d->touches, 1);
		return;
	}
	rados_write_op_cmpxattr(t->op, XATTR_META, LIBRADOS_CMPXATTR_OP_EQ, (const char *)m, mlen);
	rados_write_op_setxattr(t->op, XATTR_ATIME, (const char *)a, sizeof(a));
	if (rados_aio_write_op_operate(t->op, h->list_ioctx, c, oid, NULL, LIBRADOS_OPERATION_FULL_TRY) < 0)
		touch_done(c, t);
}

/* A read method's output: the host gets what fits, DW0 the full length (as Retrieve). */
static void exec_output(struct nkv_kvio *io, int rc)
{
	if (rc >= 0 && !io->exec_write) {
		io->value_size = io->be_out_len;
		io->xfer = (uint32_t)(io->be_out_len < io->out_len ? io->be_out_len : io->out_len);
		if (io->xfer)
			memcpy(io->out, io->be_out, io->xfer);
		/* the C API copied the method's output into be_out, then this into the host's buffer */
		io->copied_out += io->be_out_len + io->xfer;
	}
	if (io->be_out)
		rados_buffer_free(io->be_out);
	io->be_out = NULL;
}

/* A Retrieve or Exist hit on a cache namespace: expired is absent; a hit may refresh the last use.
 * @return the I/O's result, or 1 when it was submitted again (an entry without a record). */
static int cache_read_done(struct nkv_kvio *io, int rc)
{
	uint64_t touched, now = nkv_unix_ms();
	bool has;

	rados_read_meta(io->be_xattrs, &has, &io->meta, NULL, NULL, &touched);
	io->be_xattrs = NULL;
	if (rc < 0 || io->be_stage == ST_LEGACY)
		return rc;
	if (!has) {
		if (io->op == NKV_IO_EXIST)
			return rc;
		char oid[NKV_OID_MAX]; /* no record, so no size: read it as a plain namespace does */
		nkv_key_to_oid(&io->key, oid);
		io->be_stage = ST_LEGACY;
		io->be_tries = 1; /* keeps the deadline */
		return (rc = rados_submit_op(io->be_ns, io, oid)) < 0 ? rc : 1;
	}
	if (nkv_meta_expired(&io->meta, now)) {
		io->xfer = 0;
		return -ENOENT;
	}
	if (io->op == NKV_IO_RETRIEVE) {
		io->value_size = io->meta.size;
		io->xfer = (uint32_t)io->be_read;
	}
	/* A Retrieve refreshes the last use when it is touch_ms old (the Store counts as a use): at
	 * most one small write per entry per touch interval, none for a read right after its Store. */
	uint64_t last = touched > io->meta.stored_ms ? touched : io->meta.stored_ms;
	if (io->touch_ms && io->op == NKV_IO_RETRIEVE && now >= last + io->touch_ms) {
		char oid[NKV_OID_MAX];
		nkv_key_to_oid(&io->key, oid);
		touch(io->be_ns, io, oid);
	}
	return rc;
}

/*
 * The next stage of a cache Store or Delete (see ST_*), given the last op's result. @return 1 when
 * a next op was submitted, else the I/O's result.
 */
static int cache_step(struct nkv_kvio *io, int rc)
{
	struct nkv_kvns *h = io->be_ns;
	bool must_exist = io->flags & NKV_IO_MUST_EXIST, must_not = io->flags & NKV_IO_MUST_NOT_EXIST;
	int next;

	switch (io->be_stage) {
	case ST_NEW:
		if (rc != -EEXIST)
			return rc; /* created (old_exists stays false), or failed */
		next = ST_READ;
		break;
	case ST_READ: {
		uint64_t touched;
		rados_read_meta(io->be_xattrs, &io->old_has_meta, &io->old_meta, io->be_mold, &io->be_mold_len, &touched);
		io->be_xattrs = NULL;
		if (rc == -ENOENT) {
			if (io->op == NKV_IO_DELETE || must_exist)
				return -ENOENT;
			next = ST_NEW; /* deleted meanwhile: create it */
			break;
		}
		if (rc < 0)
			return rc;
		io->old_size = io->be_size;
		bool live = !(io->old_has_meta && nkv_meta_expired(&io->old_meta, nkv_unix_ms()));
		if (io->op == NKV_IO_STORE && must_not && live)
			return -EEXIST;
		if (io->op == NKV_IO_STORE && must_exist && !live)
			return -ENOENT; /* expired: absent to the host (left to the reaper) */
		next = io->op == NKV_IO_DELETE ? ST_REMOVE : ST_WRITE;
		break;
	}
	case ST_WRITE:
	case ST_REMOVE:
		if (rc == 0) {
			io->old_exists = true;
			/* Deleting an expired entry removes it, but to the host it was not there */
			if (io->op == NKV_IO_DELETE && io->old_has_meta && nkv_meta_expired(&io->old_meta, nkv_unix_ms()))
				return -ENOENT;
			return 0;
		}
		if (rc != -ECANCELED && rc != -ENOENT)
			return rc;
		next = ST_READ; /* changed or removed since it was read: look again */
		break;
	default:
		return rc;
	}
	if (++io->be_tries > CACHE_TRIES)
		return -EAGAIN; /* endless contention on one key: 82h, the host retries */
	io->be_stage = next;
	char oid[NKV_OID_MAX];
	nkv_key_to_oid(&io->key, oid);
	if ((rc = rados_submit_op(h, io, oid)) < 0)
		return rc;
	return 1;
}

/* Release the op and its completion, then complete the I/O: on its owner thread, or on this one while
 * the owner sleeps (nkv_kvio_complete_direct). */
static void io_finish(struct nkv_kvio *io)
{
	int rc = io->be_rc;

	if (io->be_split) {
		rados_range_finish(io);
		return;
	}

	rados_aio_release(io->be_comp);
	if (io->op == NKV_IO_EXEC)
		exec_output(io, rc);
	/* The OSD refused the op as a whole (the method's own -EINVAL would be in its return value):
	 * the method may write and the namespace is read-only (exec_ro_ioctx). */
	if (io->op == NKV_IO_EXEC && io->exec_ro && rc == -EINVAL && io->be_rval[0] == 0)
		rc = -EROFS;
	if (is_write(io)) {
		rados_release_write_op(io->be_op);
	} else {
		rados_release_read_op(io->be_op);
		/* The C API copies the reply's bufferlist into buf: be_read bytes (0 when nothing was read). */
		if (io->op == NKV_IO_RETRIEVE)
			io->copied_out += io->be_read;
		if (rc >= 0 && io->op == NKV_IO_RETRIEVE) {
			io->value_size = io->be_size;
			io->xfer = (uint32_t)io->be_read;
		}
	}
	if (io->be_cancelled && rc == -ECANCELED)
		rc = -ETIMEDOUT; /* our deadline: 82h Namespace Not Ready, DNR clear */
	if (rc > 0)
		rc = 0;
	if (io->cache && (io->op == NKV_IO_RETRIEVE || io->op == NKV_IO_EXIST)) {
		if ((rc = cache_read_done(io, rc)) == 1)
			return; /* read again, as a plain namespace */
	} else if (io->cache && rc == -ETIMEDOUT) {
		if (io->be_xattrs)
			rados_getxattrs_end(io->be_xattrs);
		io->be_xattrs = NULL;
	} else if (io->cache && (rc = cache_step(io, rc)) == 1) {
		return; /* the next stage is in flight */
	}
	nkv_kvio_complete_direct(io, rc); /* no lock held here: from op_done or after shard_expire's */
}

/* Drop one reference; the last holder (callback or cancelling watchdog) finishes the I/O. */
void rados_io_put(struct nkv_kvio *io)
{
	if (atomic_fetch_sub_explicit(&io->be_refs, 1, memory_order_acq_rel) == 1)
		io_finish(io);
}

/*
 * Cancel the late ops of one shard. The ops to cancel are collected under the shard lock with an
 * extra reference each, and cancelled after it is dropped: librados may run the completion (which
 * takes the shard lock to unlink) from inside rados_aio_cancel, and the reference keeps the
 * completion alive until the cancel returned.
 */
static void shard_expire(struct nkv_kvdev *d, struct flight *f, uint64_t now)
{
	struct nkv_kvio *batch[CANCEL_BATCH];
	unsigned n = 0;

	pthread_mutex_lock(&f->lock);
	for (struct nkv_kvio *io = f->head; io && io->be_deadline_ms <= now && n < CANCEL_BATCH; io = io->be_next) {
		if (io->be_cancelled)
			continue; /* cancelled already; its completion is on the way */
		io->be_cancelled = true;
		atomic_fetch_add_explicit(&io->be_refs, 1, memory_order_relaxed);
		batch[n++] = io;
	}
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < n; i++) {
		struct nkv_kvns *h = batch[i]->be_ns;
		if (batch[i]->be_split) { /* every range in flight */
			rados_range_cancel(batch[i]);
			rados_io_put(batch[i]);
			continue;
		}
		int rc = rados_aio_cancel(h->ioctx, batch[i]->be_comp);
		NKV_DEBUG("rados: op on %s cancelled at its deadline (%s)", h->name, rc < 0 ? strerror(-rc) : "ok");
		rados_io_put(batch[i]);
	}
	if (n) {
		atomic_fetch_add(&d->cancelled, n);
		NKV_WARN("rados: %u ops passed the %" PRIu64 " s op timeout: answered 82h (Namespace Not Ready)", n,
			 d->op_timeout_ms / 1000);
	}
}

/* Every WATCHDOG_TICK_MS: cancel late ops. */
static void *watchdog_main(void *arg)
{
	struct nkv_kvdev *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		struct timespec ts = nkv_abstime_in_ms(WATCHDOG_TICK_MS);
		pthread_cond_timedwait(&d->wd_cond, &d->lock, &ts);
		pthread_mutex_unlock(&d->lock);
		uint64_t now = nkv_now_ms();
		for (unsigned i = 0; i < FLIGHT_SHARDS; i++)
			shard_expire(d, &d->flight[i], now);
		pthread_mutex_lock(&d->lock);
		lists_expire(d, nkv_now_ms());
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- I/O --------------------------------------------------------------------------------------- */

static void op_done(rados_completion_t c, void *arg)
{
	struct nkv_kvio *io = arg;
	struct nkv_kvns *h = io->be_ns;

	io->be_rc = rados_aio_get_return_value(c);
	rados_flight_del(h->dev, io);
	rados_io_put(io);
}

/*
 * Exec: the method runs in the OSD next to the object, in the same compound op as the existence
 * check. librados copies the input when the op is built, so a joined input lives only until then.
 */
static int build_exec(struct nkv_kvio *io)
{
	const char *in = io->in1_len ? io->in1 : io->in2;
	size_t in_len = (size_t)io->in1_len + io->in2_len;
	char *joined = NULL;

	if (io->in1_len && io->in2_len) { /* bound input + the host's */
		if (!(joined = malloc(in_len)))
			return -ENOMEM;
		memcpy(joined, io->in1, io->in1_len);
		memcpy(joined + io->in1_len, io->in2, io->in2_len);
		io->copied_in += in_len;
		in = joined;
	}
	io->copied_in += in_len; /* the C API appends the input to a bufferlist of its own */
	io->be_out = NULL;
	io->be_out_len = 0;
	io->be_rval[0] = 0;
	if (io->exec_write) {
		rados_write_op_t op = rados_create_write_op();
		if (op) {
			if (io->flags & NKV_IO_MUST_EXIST)
				rados_write_op_assert_exists(op);
			rados_write_op_exec(op, io->cls, io->method, in ? in : "", in_len, &io->be_rval[0]);
		}
		io->be_op = op;
	} else {
		rados_read_op_t op = rados_create_read_op();
		if (op) {
			if (io->flags & NKV_IO_MUST_EXIST)
				rados_read_op_assert_exists(op);
			rados_read_op_exec(op, io->cls, io->method, in ? in : "", in_len, &io->be_out, &io->be_out_len,
					   &io->be_rval[0]);
		}
		io->be_op = op;
	}
	free(joined);
	return io->be_op ? 0 : -ENOMEM;
}

/* Build the compound op for @io into io->be_op. @return 0 or -ENOMEM. */
static int build_op(struct nkv_kvio *io)
{
	if (io->op == NKV_IO_EXEC)
		return build_exec(io);
	if (io->be_stage == ST_READ) { /* a cache Store or Delete: the entry's size and record */
		rados_read_op_t op = rados_create_read_op();
		if (!op)
			return -ENOMEM;
		io->be_size = 0;
		io->be_xattrs = NULL;
		rados_read_op_stat(op, &io->be_size, &io->be_mtime, &io->be_rval[0]);
		rados_read_op_getxattrs(op, (rados_xattrs_iter_t *)&io->be_xattrs, &io->be_rval[1]);
		io->be_op = op;
		return 0;
	}
	if (io->op == NKV_IO_STORE || io->op == NKV_IO_DELETE) {
		rados_write_op_t op = rados_create_write_op();
		if (!op)
			return -ENOMEM;
		if (io->be_stage == ST_WRITE || io->be_stage == ST_REMOVE) /* unchanged since read */
			rados_write_op_cmpxattr(op, XATTR_META, LIBRADOS_CMPXATTR_OP_EQ, (const char *)io->be_mold,
						io->be_mold_len);
		if (io->op == NKV_IO_DELETE) {
			rados_write_op_remove(op);
		} else {
			if (io->be_stage == ST_NEW || (io->be_stage == ST_PLAIN && (io->flags & NKV_IO_MUST_NOT_EXIST)))
				rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
			if ((io->flags & NKV_IO_MUST_EXIST) && io->be_stage == ST_PLAIN)
				rados_write_op_assert_exists(op);
			rados_write_op_write_full(op, io->len ? io->buf : "", io->len); /* 0 B: an empty object */
			io->copied_in += io->len; /* the C API appends the value to a bufferlist of its own */
			if (io->cache) /* the record goes with the value, in the same op */
				rados_write_op_setxattr(op, XATTR_META, (const char *)io->be_m, io->be_m_len);
		}
		io->be_op = op;
		return 0;
	}
	rados_read_op_t op = rados_create_read_op();
	if (!op)
		return -ENOMEM;
	io->be_size = 0;
	io->be_read = 0;
	io->be_xattrs = NULL;
	if (io->cache && io->be_stage != ST_LEGACY) {
		/* Expiry is decided on the record read with the value, in the same op; the record also
		 * holds the size, so the op is getxattrs + read where a plain namespace's is stat + read
		 * (and getxattrs alone for Exist: it fails with -ENOENT as assert_exists does). */
		rados_read_op_getxattrs(op, (rados_xattrs_iter_t *)&io->be_xattrs, &io->be_rval[2]);
		if (io->op == NKV_IO_RETRIEVE && io->len && io->offset < RANGE_OFFSET_MAX)
			rados_read_op_read(op, io->offset, io->len, io->buf, &io->be_read, &io->be_rval[1]);
	} else if (io->op == NKV_IO_EXIST) {
		rados_read_op_assert_exists(op);
	} else {
		/* stat and read in one op: DW0 carries the full size even when the read is truncated, and
		 * a range is cut from the same version of the value the size describes. The OSD answers a
		 * read at or past the end with 0 bytes; an offset past what any object can hold (and
		 * where offset + len would wrap) is not sent at all: nothing can be there. */
		rados_read_op_stat(op, &io->be_size, &io->be_mtime, &io->be_rval[0]);
		if (io->len && io->offset < RANGE_OFFSET_MAX)
			rados_read_op_read(op, io->offset, io->len, io->buf, &io->be_read, &io->be_rval[1]);
	}
	io->be_op = op;
	return 0;
}

int rados_submit_op(struct nkv_kvns *h, struct nkv_kvio *io, const char *oid)
{
	bool write = is_write(io);
	rados_completion_t c;
	int rc;

	if ((rc = build_op(io)) < 0)
		return rc;
	if ((rc = rados_aio_create_completion2(io, op_done, &c)) < 0)
		goto fail_op;
	io->be_comp = c;
	io->be_ns = h;
	rados_flight_add(h->dev, io, io->be_tries == 0); /* before submitting: the callback unlinks it */
	/* FULL_TRY: on a full cluster or pool a Store fails with -ENOSPC/-EDQUOT (81h Capacity
	 * Exceeded) and a Delete goes through, instead of librados holding the op until space returns. */
	if (write)
		rc = rados_aio_write_op_operate(io->be_op, h->ioctx, c, oid, NULL, LIBRADOS_OPERATION_FULL_TRY);
	else
		rc = rados_aio_read_op_operate(io->be_op, io->op == NKV_IO_EXEC && io->exec_ro ? h->exec_ro_ioctx : h->ioctx,
					       c, oid, 0);
	if (rc == 0)
		return 0;
	rados_flight_del(h->dev, io); /* no callback for an op that was never submitted */
	rados_aio_release(c);
fail_op:
	if (write)
		rados_release_write_op(io->be_op);
	else
		rados_release_read_op(io->be_op);
	if (io->be_xattrs)
		rados_getxattrs_end(io->be_xattrs);
	io->be_xattrs = NULL;
	return rc;
}

/*
 * Scan the namespace keeping the K smallest keys >= @start (docs/design.md section 2.5) into @heap.
 * @return 0, -ETIMEDOUT past @deadline_ms or when a page request timed out, or -errno.
 */
static int scan(struct nkv_kvns *h, const struct nkv_key *start, uint32_t cap, uint64_t deadline_ms,
		struct nkv_keyheap *heap)
{
	rados_list_ctx_t lc;
	const char *entry;
	size_t elen;
	unsigned n = 0;
	int rc;

	if ((rc = nkv_keyheap_init(heap, start, cap)) < 0)
		return rc;
	if ((rc = rados_nobjects_list_open(h->list_ioctx, &lc)) < 0)
		return rc;
	while ((rc = rados_nobjects_list_next2(lc, &entry, NULL, NULL, &elen, NULL, NULL)) == 0) {
		struct nkv_key k;
		if (nkv_oid_to_key(entry, elen, &k) == 0)
			nkv_keyheap_offer(heap, &k);
		if ((++n & 1023) == 0 && nkv_now_ms() >= deadline_ms) {
			rc = -ETIMEDOUT; /* answered by the watchdog already: stop wasting the cluster's time */
			break;
		}
	}
	rados_nobjects_list_close(lc);
	return rc == -ENOENT ? 0 : rc; /* -ENOENT: the end of the listing */
}

static void *list_worker(void *arg)
{
	struct list_worker *w = arg;
	struct nkv_kvdev *d = w->d;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		while (!d->head && !d->stop)
			pthread_cond_wait(&d->cond, &d->lock);
		if (!d->head)
			break; /* stop requested and queue drained */
		struct nkv_kvio *io = d->head;
		d->head = io->be_next;
		if (!d->head)
			d->tail = NULL;
		w->job = io;
		/* Everything the scan needs is copied now: once the lock drops, @io may be taken away. */
		struct nkv_kvns *h = io->be_ns;
		struct nkv_key start = io->key;
		uint32_t cap = nkv_list_capacity(io->len);
		uint64_t deadline = io->be_deadline_ms;
		pthread_mutex_unlock(&d->lock);

		struct nkv_keyheap heap;
		int rc = scan(h, &start, cap > LIST_MAX_KEYS ? LIST_MAX_KEYS : cap, deadline, &heap);
		pthread_mutex_lock(&d->lock);
		bool mine = w->job == io;
		w->job = NULL;
		pthread_mutex_unlock(&d->lock);
		if (mine) {
			uint32_t nrk;
			if (rc == 0) {
				nkv_keyheap_sort(&heap);
				io->xfer = nkv_list_pack(io->buf, io->len, heap.v, heap.n, &nrk);
			}
			nkv_kvio_complete(io, rc);
		}
		nkv_keyheap_fini(&heap);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* Answer Lists past their deadline with 82h, queued or being scanned (d->lock held). */
static void lists_expire(struct nkv_kvdev *d, uint64_t now)
{
	while (d->head && d->head->be_deadline_ms <= now) {
		struct nkv_kvio *io = d->head;
		d->head = io->be_next;
		if (!d->head)
			d->tail = NULL;
		nkv_kvio_complete(io, -ETIMEDOUT);
	}
	for (unsigned i = 0; i < d->nworkers; i++) {
		struct nkv_kvio *io = d->workers[i].job;
		if (io && io->be_deadline_ms <= now) {
			d->workers[i].job = NULL;
			NKV_WARN("rados: a List on %s passed the %" PRIu64 " s op timeout: answered 82h",
				 ((struct nkv_kvns *)io->be_ns)->name, d->op_timeout_ms / 1000);
			nkv_kvio_complete(io, -ETIMEDOUT);
		}
	}
}

static void rados_submit(struct nkv_kvns *h, struct nkv_kvio *io)
{
	char oid[NKV_OID_MAX];
	int rc;

	io->xfer = 0;
	io->value_size = 0;
	io->be_split = NULL;
	if (io->op == NKV_IO_LIST) {
		io->be_ns = h;
		io->be_next = NULL;
		io->be_deadline_ms = nkv_now_ms() + h->dev->op_timeout_ms;
		pthread_mutex_lock(&h->dev->lock);
		if (h->dev->tail)
			h->dev->tail->be_next = io;
		else
			h->dev->head = io;
		h->dev->tail = io;
		pthread_cond_signal(&h->dev->cond);
		pthread_mutex_unlock(&h->dev->lock);
		return;
	}
	nkv_key_to_oid(&io->key, oid);
	io->be_tries = 0;
	io->be_stage = ST_PLAIN;
	if (io->cache && io->op == NKV_IO_STORE) {
		io->be_m_len = nkv_meta_encode(&io->meta, io->be_m);
		io->be_stage = io->flags & NKV_IO_MUST_EXIST ? ST_READ : ST_NEW;
	} else if (io->cache && io->op == NKV_IO_DELETE) {
		io->be_stage = ST_READ;
	}
	if (rados_range_submit(h, io, oid))
		return;
	if ((rc = rados_submit_op(h, io, oid)) < 0)
		nkv_kvio_complete(io, rc);
}

const struct nkv_kvdev_ops nkv_kvdev_rados = {
	.name = "rados",
	.open = rados_open,
	.close = rados_close,
	.ns_open = rados_ns_open,
	.ns_close = rados_ns_close,
	.ns_info = rados_ns_info,
	.submit = rados_submit,
	.shared_put = rados_cache_shared_put,
	.shared_get = rados_cache_shared_get,
	.lease = rados_cache_lease,
	.lease_release = rados_cache_lease_release,
	.cache_final = rados_cache_final,
	.sample = rados_cache_sample,
	.scan = rados_cache_scan,
	.scan_end = rados_cache_scan_end,
	.remove_if = rados_cache_remove_if,
};
