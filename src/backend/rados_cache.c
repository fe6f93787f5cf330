/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados_cache.c - the RADOS backend's calls for the target's cache thread (docs/cache.md): the
 * namespace's shared state (the omap of CACHE_OID, or on an erasure-coded pool of its object in the
 * meta pool: h->meta_ioctx, h->cache_oid), its eviction lease (cls_lock on the same object,
 * with a duration, so a gateway that dies hands it over when the lease ends), random samples and
 * passes over the namespace's entries with their records, and guarded removals.
 *
 * Every call here blocks the cache thread only: they run on the list handle, whose ops carry
 * rados_osd_op_timeout. Entries are read and removed in parallel batches of aio ops.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "rados_int.h"

#define LEASE_NAME "rados_nkv.evict"
#define SHARED_PAGE 256
/* Names taken from one place of the listing per sample: adjacent in hash order, so as good as random
 * for age; one seek costs a PG listing request. */
#define SAMPLE_RUN 32

static int rc_of(int rc)
{
	return rc < 0 ? rc : 0;
}

int rados_cache_shared_put(struct nkv_kvns *h, const char *key, const char *val)
{
	rados_write_op_t op;
	size_t vlen = strlen(val);
	int rc;

	if (!h->meta_ioctx) /* an erasure-coded pool without a meta pool: never a cache namespace */
		return -EOPNOTSUPP;
	if (!(op = rados_create_write_op()))
		return -ENOMEM;
	rados_write_op_omap_set(op, &key, &val, &vlen, 1);
	rc = rados_write_op_operate(op, h->meta_ioctx, h->cache_oid, NULL, LIBRADOS_OPERATION_FULL_TRY);
	rados_release_write_op(op);
	return rc_of(rc);
}

int rados_cache_shared_get(struct nkv_kvns *h, const char *prefix,
			    void (*cb)(void *arg, const char *key, const char *val, size_t len), void *arg)
{
	char after[256] = "";
	int rc;

	if (!h->meta_ioctx)
		return -EOPNOTSUPP;
	for (;;) { /* page by page: one share per gateway, rarely more than one page */
		rados_read_op_t op = rados_create_read_op();
		rados_omap_iter_t it = NULL;
		unsigned char more = 0;
		int prval = 0;
		unsigned n = 0;

		if (!op)
			return -ENOMEM;
		rados_read_op_omap_get_vals2(op, after, prefix, SHARED_PAGE, &it, &more, &prval);
		rc = rados_read_op_operate(op, h->meta_ioctx, h->cache_oid, 0);
		if (rc == 0 && prval < 0)
			rc = prval;
		if (rc == 0) {
			char *k, *v;
			size_t len;
			while (rados_omap_get_next(it, &k, &v, &len) == 0 && k) {
				char val[512];
				snprintf(val, sizeof(val), "%.*s", (int)(len < sizeof(val) ? len : sizeof(val) - 1), v);
				cb(arg, k, val, len);
				snprintf(after, sizeof(after), "%s", k);
				n++;
			}
		}
		if (it)
			rados_omap_get_end(it);
		rados_release_read_op(op);
		if (rc == -ENOENT)
			return 0; /* no gateway has written yet */
		if (rc < 0 || !more || n == 0)
			return rc_of(rc);
	}
}

int rados_cache_lease(struct nkv_kvns *h, const char *owner, uint32_t lease_ms, bool renew)
{
	struct timeval d = {.tv_sec = lease_ms / 1000, .tv_usec = (lease_ms % 1000) * 1000};
	if (!h->meta_ioctx)
		return -EOPNOTSUPP;
	/* The cookie is the owner: a renewal by the same gateway extends its own lock. */
	int rc = rados_lock_exclusive(h->meta_ioctx, h->cache_oid, LEASE_NAME, owner, "eviction lease", &d,
				      renew ? LIBRADOS_LOCK_FLAG_RENEW : 0);
	if (rc == -EEXIST && !renew) /* ours already (the thread restarted its tick): renew it */
		rc = rados_lock_exclusive(h->meta_ioctx, h->cache_oid, LEASE_NAME, owner, "eviction lease", &d,
					  LIBRADOS_LOCK_FLAG_RENEW);
	return rc == -EEXIST ? -EBUSY : rc_of(rc);
}

void rados_cache_lease_release(struct nkv_kvns *h, const char *owner)
{
	if (!h->meta_ioctx)
		return;
	rados_unlock(h->meta_ioctx, h->cache_oid, LEASE_NAME, owner);
}

/* A final write is over (done, failed or timed out): nothing waits for its result. */
static void final_done(rados_completion_t c, void *arg)
{
	rados_aio_release(c);
	if (arg)
		rados_release_write_op(arg);
}

/*
 * The last share write and the lease's release, as aio ops on the list handle: their OSD op timeout
 * bounds them, and rados_ns_close's rados_aio_flush() waits for them. Started for every namespace
 * before any is closed, a stop waits one op timeout on a dead cluster, not one per namespace.
 */
void rados_cache_final(struct nkv_kvns *h, const char *key, const char *val, const char *owner)
{
	rados_completion_t c;

	if (!h->meta_ioctx)
		return;
	if (key) {
		rados_write_op_t op = rados_create_write_op();
		size_t vlen = strlen(val);
		if (op && rados_aio_create_completion2(op, final_done, &c) == 0) {
			rados_write_op_omap_set(op, &key, &val, &vlen, 1);
			if (rados_aio_write_op_operate(op, h->meta_ioctx, c, h->cache_oid, NULL, LIBRADOS_OPERATION_FULL_TRY) < 0)
				final_done(c, op);
		} else if (op) {
			rados_release_write_op(op);
		}
	}
	if (owner && rados_aio_create_completion2(NULL, final_done, &c) == 0 &&
	    rados_aio_unlock(h->meta_ioctx, h->cache_oid, LEASE_NAME, owner, c) < 0)
		final_done(c, NULL);
}

/* Read the size and record of @n named entries in parallel; drops the ones gone. @return kept. */
static int read_entries(struct nkv_kvns *h, struct nkv_entry *e, unsigned n)
{
	struct rd {
		rados_read_op_t op;
		rados_completion_t c;
		rados_xattrs_iter_t it;
		time_t mtime;
		int rv[2];
		int rc;
	} *r = calloc(n ? n : 1, sizeof(*r));
	unsigned kept = 0;

	if (!r)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		char oid[NKV_OID_MAX];
		nkv_key_to_oid(&e[i].key, oid);
		r[i].rc = -ENOMEM;
		if (!(r[i].op = rados_create_read_op()))
			continue;
		rados_read_op_stat(r[i].op, &e[i].size, &r[i].mtime, &r[i].rv[0]);
		rados_read_op_getxattrs(r[i].op, &r[i].it, &r[i].rv[1]);
		if (rados_aio_create_completion2(NULL, NULL, &r[i].c) < 0) {
			r[i].c = NULL;
			continue;
		}
		r[i].rc = rados_aio_read_op_operate(r[i].op, h->list_ioctx, r[i].c, oid, 0);
	}
	for (unsigned i = 0; i < n; i++) {
		if (r[i].c && r[i].rc == 0) {
			rados_aio_wait_for_complete(r[i].c);
			r[i].rc = rados_aio_get_return_value(r[i].c);
		}
		if (r[i].c)
			rados_aio_release(r[i].c);
		if (r[i].op)
			rados_release_read_op(r[i].op);
		struct nkv_entry *x = &e[i];
		rados_read_meta(r[i].it, &x->has_meta, &x->meta, NULL, NULL, &x->touched_ms);
		if (r[i].rc < 0)
			continue;
		x->atime_ms = x->has_meta && x->meta.stored_ms > x->touched_ms ? x->meta.stored_ms : x->touched_ms;
		x->rc = 0;
		e[kept++] = *x;
	}
	free(r);
	return (int)kept;
}

/* Up to @n keys from @lc into @e (non-key objects skipped). @return how many, or -errno. */
static int list_keys(rados_list_ctx_t lc, struct nkv_entry *e, unsigned n, bool *end)
{
	const char *entry;
	size_t elen;
	unsigned got = 0;
	int rc = 0;

	*end = false;
	while (got < n && (rc = rados_nobjects_list_next2(lc, &entry, NULL, NULL, &elen, NULL, NULL)) == 0) {
		memset(&e[got], 0, sizeof(e[got]));
		if (nkv_oid_to_key(entry, elen, &e[got].key) == 0)
			got++;
	}
	if (rc == -ENOENT)
		*end = true;
	else if (rc < 0)
		return rc;
	return (int)got;
}

int rados_cache_sample(struct nkv_kvns *h, unsigned n, struct nkv_entry *out)
{
	rados_list_ctx_t lc;
	unsigned got = 0;
	bool end;
	int rc;

	if ((rc = rados_nobjects_list_open(h->list_ioctx, &lc)) < 0)
		return rc;
	/* From a random hash position; past the end, go on from the start (once). */
	rados_nobjects_list_seek(lc, (uint32_t)random());
	for (int wrap = 0; got < n && wrap < 2; wrap++) {
		while (got < n && (rc = list_keys(lc, out + got, n - got < SAMPLE_RUN ? n - got : SAMPLE_RUN, &end)) > 0) {
			got += (unsigned)rc;
			if (end)
				break;
			rados_nobjects_list_seek(lc, (uint32_t)random());
		}
		if (rc < 0)
			break;
		rados_nobjects_list_seek(lc, 0);
	}
	rados_nobjects_list_close(lc);
	if (rc < 0 && got == 0)
		return rc;
	/* Positions can repeat: drop duplicates (a second removal would only miss). */
	unsigned u = 0;
	for (unsigned i = 0; i < got; i++) {
		bool dup = false;
		for (unsigned j = 0; j < u && !dup; j++)
			dup = nkv_key_cmp(&out[j].key, &out[i].key) == 0;
		if (!dup)
			out[u++] = out[i];
	}
	return read_entries(h, out, u);
}

int rados_cache_scan(struct nkv_kvns *h, struct nkv_scan_pos *pos, unsigned n, struct nkv_entry *out)
{
	bool end = false;
	int rc;

	if (!pos->be) {
		rados_list_ctx_t lc;
		if ((rc = rados_nobjects_list_open(h->list_ioctx, &lc)) < 0)
			return rc;
		pos->be = lc;
	}
	if ((rc = list_keys(pos->be, out, n, &end)) < 0 || end) {
		rados_nobjects_list_close(pos->be);
		pos->be = NULL;
		pos->done = true;
	}
	return rc < 0 ? rc : read_entries(h, out, (unsigned)rc);
}

void rados_cache_scan_end(struct nkv_kvns *h, struct nkv_scan_pos *pos)
{
	(void)h;
	if (pos->be)
		rados_nobjects_list_close(pos->be);
	memset(pos, 0, sizeof(*pos));
}

void rados_cache_remove_if(struct nkv_kvns *h, struct nkv_entry *e, unsigned n)
{
	rados_write_op_t *ops = calloc(n ? n : 1, sizeof(*ops));
	rados_completion_t *cs = calloc(n ? n : 1, sizeof(*cs));

	for (unsigned i = 0; i < n; i++) {
		char oid[NKV_OID_MAX];
		uint8_t m[NKV_META_MAX], a[8];
		e[i].rc = -ENOMEM;
		if (!ops || !cs || !(ops[i] = rados_create_write_op()))
			continue;
		nkv_key_to_oid(&e[i].key, oid);
		size_t mlen = nkv_meta_encode(&e[i].meta, m);
		nkv_put64(a, e[i].touched_ms);
		/* Unchanged since read: the same Store (record) and no use since (last touch). An absent
		 * xattr compares equal to an empty value. */
		rados_write_op_cmpxattr(ops[i], XATTR_META, LIBRADOS_CMPXATTR_OP_EQ, (const char *)m,
					e[i].has_meta ? mlen : 0);
		rados_write_op_cmpxattr(ops[i], XATTR_ATIME, LIBRADOS_CMPXATTR_OP_EQ, (const char *)a,
					e[i].touched_ms ? 8 : 0);
		rados_write_op_remove(ops[i]);
		if (rados_aio_create_completion2(NULL, NULL, &cs[i]) < 0) {
			cs[i] = NULL;
			continue;
		}
		e[i].rc = rados_aio_write_op_operate(ops[i], h->list_ioctx, cs[i], oid, NULL, LIBRADOS_OPERATION_FULL_TRY);
	}
	for (unsigned i = 0; i < n && ops && cs; i++) {
		if (cs[i] && e[i].rc == 0) {
			rados_aio_wait_for_complete(cs[i]);
			e[i].rc = rc_of(rados_aio_get_return_value(cs[i]));
		}
		if (cs[i])
			rados_aio_release(cs[i]);
		if (ops[i])
			rados_release_write_op(ops[i]);
	}
	free(ops);
	free(cs);
}
