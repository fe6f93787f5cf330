/*
 * mem.c - in-process kvdev: a sorted table per (pool, namespace). For unit tests, fuzzing and demos
 * without Ceph; same semantics and List order as the rados backend. Values are copied whole under
 * the table lock, so a reader never sees a torn value.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "kvdev.h"

struct mem_val {
	uint8_t *data;
	uint64_t len;
};

struct mem_table {
	struct mem_table *next;
	char *name;             /* "pool/ns" */
	unsigned refs;          /* guarded by the kvdev lock */
	pthread_mutex_t lock;   /* guards everything below */
	struct nkv_key *keys;   /* ascending; parallel to vals */
	struct mem_val *vals;
	size_t n, cap;
	uint64_t used;
};

struct nkv_kvdev {
	uint64_t max_object;
	pthread_mutex_t lock;
	struct mem_table *tables;
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
	*out = d;
	return 0;
}

static void table_free(struct mem_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->vals[i].data);
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
		table_free(t);
	}
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
		table_free(h->t);
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
	struct mem_val *v = realloc(t->vals, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->vals = v;
	t->cap = cap;
	return 0;
}

static int do_store(struct nkv_kvns *h, struct nkv_kvio *io)
{
	struct mem_table *t = h->t;
	uint8_t *copy, *old = NULL;
	int rc = 0;

	if (io->len > h->dev->max_object)
		return -EFBIG;
	if (!(copy = malloc(io->len ? io->len : 1)))
		return -ENOMEM;
	if (io->len)
		memcpy(copy, io->buf, io->len);
	pthread_mutex_lock(&t->lock);
	size_t i = lower_bound(t, &io->key);
	int found = i < t->n && nkv_key_cmp(&t->keys[i], &io->key) == 0;
	if (found && (io->flags & NKV_IO_MUST_NOT_EXIST))
		rc = -EEXIST;
	else if (!found && (io->flags & NKV_IO_MUST_EXIST))
		rc = -ENOENT;
	else if (found) {
		old = t->vals[i].data;
		t->used += io->len - t->vals[i].len;
		t->vals[i] = (struct mem_val){copy, io->len};
		copy = NULL;
	} else if (t->n < t->cap || (rc = grow(t)) == 0) {
		memmove(&t->keys[i + 1], &t->keys[i], (t->n - i) * sizeof(t->keys[0]));
		memmove(&t->vals[i + 1], &t->vals[i], (t->n - i) * sizeof(t->vals[0]));
		t->keys[i] = io->key;
		t->vals[i] = (struct mem_val){copy, io->len};
		t->n++;
		t->used += io->len;
		copy = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	free(copy);
	free(old);
	return rc;
}

static int do_io(struct nkv_kvns *h, struct nkv_kvio *io)
{
	struct mem_table *t = h->t;
	uint8_t *gone = NULL;
	int rc = 0;

	if (io->op == NKV_IO_STORE)
		return do_store(h, io);
	if (io->op == NKV_IO_EXEC)
		return -EOPNOTSUPP; /* no RADOS object classes in memory: C0h, as an OSD without the class */
	pthread_mutex_lock(&t->lock);
	size_t i = lower_bound(t, &io->key);
	int found = i < t->n && nkv_key_cmp(&t->keys[i], &io->key) == 0;
	switch (io->op) {
	case NKV_IO_RETRIEVE:
		if (!found) {
			rc = -ENOENT;
			break;
		}
		io->value_size = t->vals[i].len;
		io->xfer = nkv_range_xfer(t->vals[i].len, io->offset, io->len); /* offset 0: Retrieve */
		if (io->xfer) /* an offset at or past the end moves nothing, and still succeeds */
			memcpy(io->buf, t->vals[i].data + io->offset, io->xfer);
		break;
	case NKV_IO_DELETE:
		if (!found) {
			rc = -ENOENT;
			break;
		}
		gone = t->vals[i].data;
		t->used -= t->vals[i].len;
		memmove(&t->keys[i], &t->keys[i + 1], (t->n - i - 1) * sizeof(t->keys[0]));
		memmove(&t->vals[i], &t->vals[i + 1], (t->n - i - 1) * sizeof(t->vals[0]));
		t->n--;
		break;
	case NKV_IO_EXIST:
		rc = found ? 0 : -ENOENT;
		break;
	case NKV_IO_LIST: {
		uint32_t nrk;
		/* An empty table has no keys array at all: pack from nothing rather than &NULL[0]. */
		io->xfer = nkv_list_pack(io->buf, io->len, t->n ? &t->keys[i] : NULL, (uint32_t)(t->n - i), &nrk);
		break;
	}
	default:
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&t->lock);
	free(gone);
	return rc;
}

static void mem_submit(struct nkv_kvns *h, struct nkv_kvio *io)
{
	io->xfer = 0;
	io->value_size = 0;
	nkv_kvio_complete(io, do_io(h, io));
}

const struct nkv_kvdev_ops nkv_kvdev_mem = {
	.name = "mem",
	.open = mem_open,
	.close = mem_close,
	.ns_open = mem_ns_open,
	.ns_close = mem_ns_close,
	.ns_info = mem_ns_info,
	.submit = mem_submit,
};
