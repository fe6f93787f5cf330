/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem.c - in-process kvdev: a sorted table per (pool, namespace), with a hash index for point lookups
 * (mem_index.c). For unit tests, fuzzing and demos without Ceph; same semantics and List order as the
 * rados backend. Values are copied whole under the table lock, so a reader never sees a torn value.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "kvdev.h"
#include "mem_index.h"
#include "mem_slab.h"

/* One entry: its own allocation, so the index can point at it while the sorted array moves. */
struct mem_val {
	struct nkv_key key;     /* first: the index holds &key */
	uint8_t *data;
	uint64_t len;
	bool slab;              /* data came from the slabs (mem_slab.c), else from malloc */
	bool has_meta;          /* cache namespaces: the entry's record and last use */
	struct nkv_meta meta;
	uint64_t touched_ms;    /* the last touch (0: never) */
};

/* A cache namespace's shared state and eviction lease (RADOS keeps them in an object). */
struct mem_shared {
	char *key, *val;
};

struct mem_table {
	struct mem_table *next;
	char *name;             /* "pool/ns" */
	unsigned refs;          /* guarded by the kvdev lock */
	pthread_mutex_t lock;   /* guards everything below */
	struct nkv_key *keys;   /* ascending (List packs from here); parallel to vals */
	struct mem_val **vals;
	size_t n, cap;
	struct mem_index idx;   /* key -> entry */
	uint64_t used;
	struct mem_shared *shared;
	size_t nshared;
	char lease_owner[64];
	uint64_t lease_until;   /* monotonic ms */
};

struct nkv_kvdev {
	uint64_t max_object;
	pthread_mutex_t lock;
	struct mem_table *tables;
	struct mem_slab slab;   /* values up to MEM_SLAB_MAX */
};

struct nkv_kvns {
	struct nkv_kvdev *dev;
	struct mem_table *t;
};

static int mem_open(const struct nkv_backend_conf *conf, struct nkv_kvdev **out)
{
	struct nkv_kvdev *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->max_object = conf->mem_max_object ? conf->mem_max_object : (128ull << 20);
	pthread_mutex_init(&d->lock, NULL);
	mem_slab_init(&d->slab);
	*out = d;
	return 0;
}

/* Free @v's data (none: nothing to do) where it came from. */
static void val_free(struct nkv_kvdev *d, const struct mem_val *v)
{
	if (!v->data)
		return;
	if (v->slab)
		mem_slab_free(&d->slab, v->data, v->len);
	else
		free(v->data);
}

/* The entry that holds @k, or NULL. */
static struct mem_val *entry_find(const struct mem_table *t, const struct nkv_key *k)
{
	return (struct mem_val *)mem_index_find(&t->idx, k);
}

static void table_free(struct nkv_kvdev *d, struct mem_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		val_free(d, t->vals[i]);
		free(t->vals[i]);
	}
	mem_index_fini(&t->idx);
	for (size_t i = 0; i < t->nshared; i++) {
		free(t->shared[i].key);
		free(t->shared[i].val);
	}
	free(t->shared);
	free(t->keys);
	free(t->vals);
	free(t->name);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static void mem_close(struct nkv_kvdev *d)
{
	while (d->tables) {
		struct mem_table *t = d->tables;
		d->tables = t->next;
		NKV_WARN("mem: table %s still open at close", t->name);
		table_free(d, t);
	}
	mem_slab_fini(&d->slab);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int mem_ns_open(struct nkv_kvdev *d, const char *pool, const char *ns, struct nkv_kvns **out)
{
	size_t len = strlen(pool) + strlen(ns) + 2;
	char *name = malloc(len);
	struct nkv_kvns *h = calloc(1, sizeof(*h));
	struct mem_table *t;

	if (!name || !h) {
		free(name);
		free(h);
		return -ENOMEM;
	}
	snprintf(name, len, "%s/%s", pool, ns);
	pthread_mutex_lock(&d->lock);
	for (t = d->tables; t && strcmp(t->name, name) != 0; t = t->next)
		;
	if (!t && (t = calloc(1, sizeof(*t)))) {
		t->name = name;
		name = NULL;
		pthread_mutex_init(&t->lock, NULL);
		mem_index_init(&t->idx);
		t->next = d->tables;
		d->tables = t;
	}
	if (t)
		t->refs++;
	pthread_mutex_unlock(&d->lock);
	free(name);
	if (!t) {
		free(h);
		return -ENOMEM;
	}
	h->dev = d;
	h->t = t;
	*out = h;
	return 0;
}

static void mem_ns_close(struct nkv_kvns *h)
{
	struct nkv_kvdev *d = h->dev;
	struct mem_table **pp;

	pthread_mutex_lock(&d->lock);
	if (--h->t->refs == 0) {
		for (pp = &d->tables; *pp != h->t; pp = &(*pp)->next)
			;
		*pp = h->t->next;
		table_free(d, h->t);
	}
	pthread_mutex_unlock(&d->lock);
	free(h);
}

static int mem_ns_info(struct nkv_kvns *h, struct nkv_kvns_info *info)
{
	memset(info, 0, sizeof(*info));
	info->max_object = h->dev->max_object;
	pthread_mutex_lock(&h->t->lock);
	info->used = h->t->used;
	pthread_mutex_unlock(&h->t->lock);
	nkv_id128("mem", h->t->name, info->id);
	return 0;
}

/* Index of the first key >= k. */
static size_t lower_bound(const struct mem_table *t, const struct nkv_key *k)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (nkv_key_cmp(&t->keys[mid], k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int grow(struct mem_table *t)
{
	size_t cap = t->cap ? 2 * t->cap : 64;
	struct nkv_key *k = realloc(t->keys, cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	t->keys = k;
	struct mem_val **v = realloc(t->vals, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->vals = v;
	t->cap = cap;
	return 0;
}

/* Take @e out of the table (the sorted arrays and the index) and free it. @return its value, for
 * val_free() once the lock is dropped. */
static struct mem_val entry_unlink(struct mem_table *t, struct mem_val *e)
{
	struct mem_val v = *e;
	size_t i = lower_bound(t, &e->key);

	t->used -= e->len;
	memmove(&t->keys[i], &t->keys[i + 1], (t->n - i - 1) * sizeof(t->keys[0]));
	memmove(&t->vals[i], &t->vals[i + 1], (t->n - i - 1) * sizeof(t->vals[0]));
	t->n--;
	mem_index_remove(&t->idx, &e->key);
	free(e);
	return v;
}

static bool expired(const struct mem_val *v)
{
	return v->has_meta && nkv_meta_expired(&v->meta, nkv_unix_ms());
}

/* What a cache Store or Delete replaced or removed (the core's accounting). */
static void old_record(struct nkv_kvio *io, const struct mem_val *v)
{
	io->old_exists = true;
	io->old_size = v->len;
	io->old_has_meta = v->has_meta;
	io->old_meta = v->meta;
}

static int do_store(struct nkv_kvns *h, struct nkv_kvio *io)
{
	struct mem_table *t = h->t;
	struct mem_val old = {0};
	uint8_t *copy;
	bool slab = false;
	int rc = 0;

	if (io->len > h->dev->max_object)
		return -EFBIG;
	if (io->buf_gift && io->len) {
		/* A buffer the transport gives becomes the value, shrunk to it (it may be a size class
		 * larger; glibc shrinks in place or by mremap, never by copying). */
		if (!(copy = realloc(io->buf, io->len)))
			copy = io->buf;
		io->buf_taken = true;
	} else if (!(copy = io->len <= MEM_SLAB_MAX ? mem_slab_alloc(&h->dev->slab, io->len) : malloc(io->len))) {
		return -ENOMEM;
	} else {
		slab = io->len <= MEM_SLAB_MAX;
		if (io->len)
			memcpy(copy, io->buf, io->len);
		io->copied_in += io->len;
	}
	struct mem_val nv = {io->key, copy, io->len, slab, io->cache, io->meta, 0}, *e, *ne = NULL;
	pthread_mutex_lock(&t->lock);
	e = entry_find(t, &io->key);
	/* an expired entry is absent to the host, though still stored until it is replaced */
	bool live = e && !(io->cache && expired(e));
	if (live && (io->flags & NKV_IO_MUST_NOT_EXIST))
		rc = -EEXIST;
	else if (!live && (io->flags & NKV_IO_MUST_EXIST))
		rc = -ENOENT;
	else if (e) {
		old_record(io, e);
		old = *e;
		t->used += io->len - e->len;
		*e = nv;
		copy = NULL;
	} else if (!(ne = malloc(sizeof(*ne))) || (t->n == t->cap && grow(t) != 0) ||
		   mem_index_reserve(&t->idx, t->n + 1) != 0) {
		rc = -ENOMEM; /* nothing changed: the arrays and the index only gained room */
	} else {
		size_t i = lower_bound(t, &io->key);
		memmove(&t->keys[i + 1], &t->keys[i], (t->n - i) * sizeof(t->keys[0]));
		memmove(&t->vals[i + 1], &t->vals[i], (t->n - i) * sizeof(t->vals[0]));
		*ne = nv;
		t->keys[i] = io->key;
		t->vals[i] = ne;
		mem_index_insert(&t->idx, &ne->key);
		ne = NULL;
		t->n++;
		t->used += io->len;
		copy = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	free(ne);
	if (copy) /* not stored (a taken buffer too: the transport has forgotten it) */
		val_free(h->dev, &nv);
	val_free(h->dev, &old);
	return rc;
}

/* A Retrieve refreshes the entry's last use when it is touch_ms old (as the RADOS backend does). */
static void touch(const struct nkv_kvio *io, struct mem_val *v)
{
	if (!io->touch_ms || !v->has_meta)
		return; /* no clock read for a namespace that keeps no last use */
	uint64_t now = nkv_unix_ms(), last = v->touched_ms > v->meta.stored_ms ? v->touched_ms : v->meta.stored_ms;
	if (now >= last + io->touch_ms)
		v->touched_ms = now;
}

static int do_io(struct nkv_kvns *h, struct nkv_kvio *io)
{
	struct mem_table *t = h->t;
	struct mem_val gone = {0};
	int rc = 0;

	if (io->op == NKV_IO_STORE)
		return do_store(h, io);
	if (io->op == NKV_IO_EXEC)
		return -EOPNOTSUPP; /* no RADOS object classes in memory: C0h, as an OSD without the class */
	pthread_mutex_lock(&t->lock);
	struct mem_val *e = io->op == NKV_IO_LIST ? NULL : entry_find(t, &io->key);
	switch (io->op) {
	case NKV_IO_RETRIEVE:
		if (!e || (io->cache && expired(e))) {
			rc = -ENOENT;
			break;
		}
		touch(io, e);
		io->value_size = e->len;
		io->xfer = nkv_range_xfer(e->len, io->offset, io->len); /* offset 0: Retrieve */
		if (io->xfer) /* an offset at or past the end moves nothing, and still succeeds */
			memcpy(io->buf, e->data + io->offset, io->xfer);
		io->copied_out += io->xfer;
		break;
	case NKV_IO_DELETE:
		if (!e) {
			rc = -ENOENT;
			break;
		}
		if (io->cache) {
			old_record(io, e);
			rc = expired(e) ? -ENOENT : 0; /* removed, but it was absent to the host */
		}
		gone = entry_unlink(t, e);
		break;
	case NKV_IO_EXIST:
		rc = e && !(io->cache && expired(e)) ? 0 : -ENOENT;
		break;
	case NKV_IO_LIST: {
		uint32_t nrk;
		size_t i = lower_bound(t, &io->key);
		/* An empty table has no keys array at all: pack from nothing rather than &NULL[0]. */
		io->xfer = nkv_list_pack(io->buf, io->len, t->n ? &t->keys[i] : NULL, (uint32_t)(t->n - i), &nrk);
		break;
	}
	default:
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&t->lock);
	val_free(h->dev, &gone);
	return rc;
}

static void mem_submit(struct nkv_kvns *h, struct nkv_kvio *io)
{
	io->xfer = 0;
	io->value_size = 0;
	nkv_kvio_complete(io, do_io(h, io));
}

/* ---- cache support ---------------------------------------------------------------------------- */

static int mem_shared_put(struct nkv_kvns *h, const char *key, const char *val)
{
	struct mem_table *t = h->t;
	char *v = strdup(val), *k = NULL;
	int rc = 0;

	if (!v)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	size_t i = 0;
	while (i < t->nshared && strcmp(t->shared[i].key, key) != 0)
		i++;
	if (i == t->nshared) {
		struct mem_shared *ns = realloc(t->shared, (t->nshared + 1) * sizeof(*ns));
		if (!ns || !(k = strdup(key))) {
			if (ns)
				t->shared = ns;
			rc = -ENOMEM;
		} else {
			t->shared = ns;
			t->shared[t->nshared++] = (struct mem_shared){k, NULL};
		}
	}
	if (rc == 0) {
		free(t->shared[i].val);
		t->shared[i].val = v;
		v = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	free(v);
	return rc;
}

static int mem_shared_get(struct nkv_kvns *h, const char *prefix,
			  void (*cb)(void *arg, const char *key, const char *val, size_t len), void *arg)
{
	struct mem_table *t = h->t;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->nshared; i++)
		if (strncmp(t->shared[i].key, prefix, strlen(prefix)) == 0)
			cb(arg, t->shared[i].key, t->shared[i].val, strlen(t->shared[i].val));
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int mem_lease(struct nkv_kvns *h, const char *owner, uint32_t lease_ms, bool renew)
{
	struct mem_table *t = h->t;
	uint64_t now = nkv_now_ms();
	int rc = 0;

	(void)renew;
	pthread_mutex_lock(&t->lock);
	if (t->lease_until > now && strcmp(t->lease_owner, owner) != 0) {
		rc = -EBUSY;
	} else {
		snprintf(t->lease_owner, sizeof(t->lease_owner), "%s", owner);
		t->lease_until = now + lease_ms;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static void mem_lease_release(struct nkv_kvns *h, const char *owner)
{
	pthread_mutex_lock(&h->t->lock);
	if (strcmp(h->t->lease_owner, owner) == 0)
		h->t->lease_until = 0;
	pthread_mutex_unlock(&h->t->lock);
}

static void entry_of(const struct mem_table *t, size_t i, struct nkv_entry *e)
{
	const struct mem_val *v = t->vals[i];

	e->key = t->keys[i];
	e->size = v->len;
	e->has_meta = v->has_meta;
	e->meta = v->meta;
	e->touched_ms = v->touched_ms;
	e->atime_ms = e->touched_ms > e->meta.stored_ms ? e->touched_ms : e->meta.stored_ms;
	e->rc = 0;
}

static int mem_sample(struct nkv_kvns *h, unsigned n, struct nkv_entry *out)
{
	struct mem_table *t = h->t;
	unsigned got = 0;

	pthread_mutex_lock(&t->lock);
	for (; got < n && got < t->n; got++) /* with replacement: the cache thread drops duplicates */
		entry_of(t, (size_t)random() % t->n, &out[got]);
	pthread_mutex_unlock(&t->lock);
	return (int)got;
}

static int mem_scan(struct nkv_kvns *h, struct nkv_scan_pos *pos, unsigned n, struct nkv_entry *out)
{
	struct mem_table *t = h->t;
	unsigned got = 0;

	pthread_mutex_lock(&t->lock);
	for (; got < n && pos->next < t->n; got++)
		entry_of(t, pos->next++, &out[got]);
	pos->done = pos->next >= t->n;
	pthread_mutex_unlock(&t->lock);
	return (int)got;
}

static void mem_scan_end(struct nkv_kvns *h, struct nkv_scan_pos *pos)
{
	(void)h;
	memset(pos, 0, sizeof(*pos));
}

static void mem_remove_if(struct nkv_kvns *h, struct nkv_entry *e, unsigned n)
{
	struct mem_table *t = h->t;

	for (unsigned j = 0; j < n; j++) {
		struct mem_val gone = {0};
		pthread_mutex_lock(&t->lock);
		struct mem_val *v = entry_find(t, &e[j].key);
		if (!v) {
			e[j].rc = -ENOENT;
		} else if (v->has_meta != e[j].has_meta || v->meta.tag != e[j].meta.tag ||
			   v->touched_ms != e[j].touched_ms) {
			e[j].rc = -ECANCELED; /* stored again or used since it was read */
		} else {
			e[j].size = v->len;
			gone = entry_unlink(t, v);
			e[j].rc = 0;
		}
		pthread_mutex_unlock(&t->lock);
		val_free(h->dev, &gone);
	}
}

const struct nkv_kvdev_ops nkv_kvdev_mem = {
	.name = "mem",
	.open = mem_open,
	.close = mem_close,
	.ns_open = mem_ns_open,
	.ns_close = mem_ns_close,
	.ns_info = mem_ns_info,
	.submit = mem_submit,
	.shared_put = mem_shared_put,
	.shared_get = mem_shared_get,
	.lease = mem_lease,
	.lease_release = mem_lease_release,
	.sample = mem_sample,
	.scan = mem_scan,
	.scan_end = mem_scan_end,
	.remove_if = mem_remove_if,
};
