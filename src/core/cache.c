/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c - a cache over a KV namespace (docs/cache.md): TTLs and pins on the command path, usage
 * and byte-hours accounting, and the target's cache thread, which shares each gateway's usage
 * through the namespace's shared state, holds the eviction lease, evicts automatic entries past
 * the capacity and removes expired ones.
 *
 * The command path costs a few relaxed atomics: the limits it checks are copies of the policy, and
 * the usage it checks is this gateway's live share plus the others' as last read (at most a second
 * old), plus what this gateway's Stores in flight reserved at admission. Only a pinned Store or the
 * replacement of a pinned entry takes the cache's mutex (byte-hours are a double).
 *
 * Usage is kept as shares: every gateway counts what its own commands and evictions changed (exact:
 * the backend reports what each Store replaced and each Delete removed) and writes its cumulative
 * share under its name ("u.<gateway>") once a second; the namespace's usage is the sum of the shares.
 * No object is written per command, so no counter object becomes a hot spot.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "core.h"

#define TICK_MS 100
#define SYNC_MS 1000
#define SAMPLE_N 32
#define SAMPLE_URGENT 128 /* past half the overshoot: bigger rounds, half of each sample evicted */
#define EVICT_BUDGET_MS 80 /* per namespace per tick: one busy namespace cannot starve the others */
#define REAP_BATCH 64
#define SHARE_PREFIX "u."

/* One gateway's cumulative share of a namespace's usage. */
struct share {
	int64_t bytes, keys, pinned_bytes, pinned_keys;
	int64_t evictions, evicted_bytes, expirations, expired_bytes;
	double byte_s; /* pinned byte-seconds charged, less refunds */
};

struct nkv_cache {
	pthread_mutex_t lock;            /* policy, byte_s, others, the lease */
	struct nkv_cache_policy pol;
	/* copies of the policy for the command path */
	_Atomic uint64_t hard_bytes, hard_keys, pin_quota, cap_bytes, cap_keys;
	atomic_bool kicked;              /* the cache thread was woken for this cache (cleared per tick) */
	_Atomic uint32_t default_ttl, max_ttl, touch_ms;
	/* this gateway's share, live */
	_Atomic int64_t bytes, keys, pinned_bytes, pinned_keys;
	_Atomic int64_t evictions, evicted_bytes, expirations, expired_bytes;
	double byte_s;
	_Atomic int64_t pin_reserved;    /* bytes of pinned Stores in flight */
	/* Stores admitted and not yet completed: their room under the hard limits. A Store is admitted
	 * at parse, before its data arrives; without this, a burst admitted together passes the limit
	 * by everything in flight. */
	_Atomic int64_t cap_reserved, keys_reserved;
	/* the other gateways' shares, summed, as last read */
	struct share others;
	_Atomic int64_t o_bytes, o_keys, o_pinned;
	unsigned gateways;
	atomic_bool loaded;              /* our share read back (a restart continues from it) */
	atomic_bool unanswered;          /* a share read under way or failed last (cluster unreachable?) */
	bool final;                      /* the last share write and lease release started (stopping thread) */
	char final_val[512];             /* the share they wrote ("": none) */
	unsigned final_leases;           /* lease_taken when they started */
	atomic_uint lease_taken;         /* successful takes and renewals of the lease */
	uint64_t next_sync;              /* monotonic ms */
	/* eviction lease and work (cache thread only) */
	atomic_bool lease;               /* held (read by the usage snapshot too) */
	uint64_t lease_until, next_lease;
	bool evicting;                   /* above capacity: evict down to the low watermark */
	uint64_t evict_age;              /* ms since last use of the entries evicted lately (EWMA) */
	struct nkv_scan_pos reap;
	bool reaping;
	uint64_t next_reap;
	char owner[128];                 /* the gateway's name: share key and lease cookie */
	char rados_ns[256];
};

static _Atomic uint64_t g_tag;

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void policy_publish(struct nkv_cache *c, const struct nkv_cache_policy *p)
{
	struct nkv_cache_policy q = *p;

	if (!q.low_watermark_pct || q.low_watermark_pct > 99)
		q.low_watermark_pct = 90;
	if (!q.overshoot_pct)
		q.overshoot_pct = 10;
	if (!q.touch_interval_ms)
		q.touch_interval_ms = 10000;
	if (!q.reap_interval_s)
		q.reap_interval_s = 10;
	if (!q.reap_rate)
		q.reap_rate = 2000;
	if (!q.lease_ms)
		q.lease_ms = 10000;
	pthread_mutex_lock(&c->lock);
	c->pol = q;
	pthread_mutex_unlock(&c->lock);
	/* Past capacity + overshoot a Store is refused (81h); without eviction, past capacity. */
	unsigned over = q.eviction == NKV_EVICT_OFF ? 0 : q.overshoot_pct;
	atomic_store(&c->hard_bytes, q.capacity_bytes ? q.capacity_bytes + q.capacity_bytes / 100 * over : 0);
	atomic_store(&c->hard_keys, q.capacity_keys ? q.capacity_keys + (q.capacity_keys * over + 99) / 100 : 0);
	atomic_store(&c->pin_quota, q.pin_quota_bytes);
	atomic_store(&c->cap_bytes, q.eviction == NKV_EVICT_OFF ? 0 : q.capacity_bytes);
	atomic_store(&c->cap_keys, q.eviction == NKV_EVICT_OFF ? 0 : q.capacity_keys);
	atomic_store(&c->default_ttl, q.default_ttl_s);
	atomic_store(&c->max_ttl, q.max_ttl_s);
	atomic_store(&c->touch_ms, q.eviction == NKV_EVICT_LRU ? q.touch_interval_ms : 0);
}

static int policy_check(const struct nkv_cache_policy *p)
{
	if (p->eviction > NKV_EVICT_OFF || p->low_watermark_pct > 99 || p->overshoot_pct > 100)
		return -EINVAL;
	if (p->lease_ms && p->lease_ms < 1000)
		return -EINVAL; /* renewals every third of it must fit between ticks and cluster round trips */
	return 0;
}

int nkv_cache_open(struct nkv_subsys *ss, struct nkv_ns *ns, const char *rados_ns, const struct nkv_cache_policy *p)
{
	struct nkv_cache *c;
	int rc;

	ns->cache = NULL;
	if (!p)
		return 0;
	if ((rc = policy_check(p)) < 0)
		return rc;
	if (!ss->tgt->be->lease)
		return -EOPNOTSUPP;
	if (ns->info.no_shared) {
		NKV_ERR("%s: nsid %u: pool '%s' is erasure-coded and keeps no omap, where a cache namespace keeps its "
			"usage shares and eviction lease: set a replicated meta pool (--meta-pool, \"meta_pool\")",
			ss->nqn, ns->nsid, ns->info.pool);
		return -EOPNOTSUPP;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	policy_publish(c, p);
	snprintf(c->owner, sizeof(c->owner), "%s", ss->tgt->gateway);
	snprintf(c->rados_ns, sizeof(c->rados_ns), "%s", rados_ns ? rados_ns : "");
	ns->cache = c;
	atomic_fetch_add(&ss->tgt->caches, 1);
	return 0;
}

/* ---- shares ------------------------------------------------------------------------------------ */

static void share_mine(struct nkv_cache *c, struct share *s)
{
	s->bytes = atomic_load(&c->bytes);
	s->keys = atomic_load(&c->keys);
	s->pinned_bytes = atomic_load(&c->pinned_bytes);
	s->pinned_keys = atomic_load(&c->pinned_keys);
	s->evictions = atomic_load(&c->evictions);
	s->evicted_bytes = atomic_load(&c->evicted_bytes);
	s->expirations = atomic_load(&c->expirations);
	s->expired_bytes = atomic_load(&c->expired_bytes);
	pthread_mutex_lock(&c->lock);
	s->byte_s = c->byte_s;
	pthread_mutex_unlock(&c->lock);
}

static int share_parse(const char *v, struct share *s)
{
	return sscanf(v, "v1 %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
		      " %" SCNd64 " %lf",
		      &s->bytes, &s->keys, &s->pinned_bytes, &s->pinned_keys, &s->evictions, &s->evicted_bytes,
		      &s->expirations, &s->expired_bytes, &s->byte_s) == 9
		       ? 0
		       : -EINVAL;
}

/* @d += @s, field by field. */
static void share_add(struct share *d, const struct share *s)
{
	d->bytes += s->bytes;
	d->keys += s->keys;
	d->pinned_bytes += s->pinned_bytes;
	d->pinned_keys += s->pinned_keys;
	d->evictions += s->evictions;
	d->evicted_bytes += s->evicted_bytes;
	d->expirations += s->expirations;
	d->expired_bytes += s->expired_bytes;
	d->byte_s += s->byte_s;
}

struct gather {
	const char *mine;
	struct share sum, own;
	bool have_own;
	unsigned n;
};

static void gather_cb(void *arg, const char *key, const char *val, size_t len)
{
	struct gather *g = arg;
	struct share s;

	(void)len;
	if (share_parse(val, &s) < 0) {
		NKV_WARN("cache: share %s is not readable; ignored", key);
		return;
	}
	if (strcmp(key + strlen(SHARE_PREFIX), g->mine) == 0) {
		g->own = s;
		g->have_own = true;
		return;
	}
	share_add(&g->sum, &s);
	g->n++;
}

/* Read every gateway's share: the others' become our view of them; the first time, ours is added
 * to what we counted since start (a restart continues from it). @return 0 or -errno. */
static int read_shares(struct nkv_target *t, struct nkv_ns *ns, struct nkv_cache *c)
{
	struct gather g = {.mine = c->owner};
	int rc;

	c->unanswered = true;
	if ((rc = t->be->shared_get(ns->kvns, SHARE_PREFIX, gather_cb, &g)) < 0) {
		NKV_DEBUG("cache: nsid %u: shares not read: %s", ns->nsid, strerror(-rc));
		return rc;
	}
	c->unanswered = false;
	if (!c->loaded) {
		if (g.have_own) {
			atomic_fetch_add(&c->bytes, g.own.bytes);
			atomic_fetch_add(&c->keys, g.own.keys);
			atomic_fetch_add(&c->pinned_bytes, g.own.pinned_bytes);
			atomic_fetch_add(&c->pinned_keys, g.own.pinned_keys);
			atomic_fetch_add(&c->evictions, g.own.evictions);
			atomic_fetch_add(&c->evicted_bytes, g.own.evicted_bytes);
			atomic_fetch_add(&c->expirations, g.own.expirations);
			atomic_fetch_add(&c->expired_bytes, g.own.expired_bytes);
			pthread_mutex_lock(&c->lock);
			c->byte_s += g.own.byte_s;
			pthread_mutex_unlock(&c->lock);
		}
		c->loaded = true;
	}
	pthread_mutex_lock(&c->lock);
	c->others = g.sum;
	c->gateways = g.n + 1;
	pthread_mutex_unlock(&c->lock);
	atomic_store(&c->o_bytes, g.sum.bytes);
	atomic_store(&c->o_keys, g.sum.keys);
	atomic_store(&c->o_pinned, g.sum.pinned_bytes);
	return 0;
}

/* Our share's key and value as written to the shared state. */
static void share_format(struct nkv_cache *c, char *key, size_t klen, char *val, size_t vlen)
{
	struct share s;

	share_mine(c, &s);
	snprintf(key, klen, SHARE_PREFIX "%s", c->owner);
	snprintf(val, vlen,
		 "v1 %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
		 " %.17g",
		 s.bytes, s.keys, s.pinned_bytes, s.pinned_keys, s.evictions, s.evicted_bytes, s.expirations,
		 s.expired_bytes, s.byte_s);
}

/* Write our cumulative share. Only after read_shares() succeeded once: never from a partial count. */
static void write_share(struct nkv_target *t, struct nkv_ns *ns, struct nkv_cache *c)
{
	char key[160], val[512];
	int rc;

	share_format(c, key, sizeof(key), val, sizeof(val));
	if ((rc = t->be->shared_put(ns->kvns, key, val)) < 0)
		NKV_DEBUG("cache: nsid %u: share not written: %s", ns->nsid, strerror(-rc));
}

/* Our share plus the others' as last read. Shares can be negative (a gateway evicting what others
 * stored), and the sum too for a moment (their Stores not read yet): never below zero. */
static int64_t sum0(_Atomic int64_t *others, _Atomic int64_t *mine)
{
	int64_t v = atomic_load_explicit(others, memory_order_relaxed) + atomic_load_explicit(mine, memory_order_relaxed);
	return v > 0 ? v : 0;
}

static int64_t used_bytes(struct nkv_cache *c)
{
	return sum0(&c->o_bytes, &c->bytes);
}

static int64_t used_keys(struct nkv_cache *c)
{
	return sum0(&c->o_keys, &c->keys);
}

/* ---- the command path ---------------------------------------------------------------------------- */

#define ST_FIELD nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD, 1)
#define ST_CAPACITY nkv_status_make(NKV_SCT_GENERIC, NKV_SC_KV_CAPACITY_EXCEEDED, 0) /* as a full pool: DNR clear */

nkv_status nkv_cache_parse_store(struct nkv_req *req, uint32_t ttl_s, uint32_t flags)
{
	struct nkv_cache *c = req->ns->cache;
	struct nkv_kvio *io = &req->io;
	uint64_t len = req->length, hard;
	uint64_t now = nkv_unix_ms();

	if (!c)
		return ST_FIELD; /* Store TTL without a cache: nothing would ever expire it */
	if (flags & ~(NKV_TTL_PIN | NKV_TTL_HASH))
		return ST_FIELD;
	if (ttl_s == NKV_TTL_DEFAULT)
		ttl_s = atomic_load_explicit(&c->default_ttl, memory_order_relaxed);
	if (ttl_s == NKV_TTL_NONE)
		ttl_s = 0;
	/* A pin is bought for a time: one asked for "never" (itself or through a namespace default of
	 * never) is refused on every namespace, even where max_ttl would cut it to something finite, so
	 * that no host is told "pinned, no expiry" for an entry that expires. */
	if ((flags & NKV_TTL_PIN) && ttl_s == 0)
		return ST_FIELD;
	uint32_t max = atomic_load_explicit(&c->max_ttl, memory_order_relaxed);
	if (max && (ttl_s == 0 || ttl_s > max))
		ttl_s = max; /* what the entry gets is reported in the completion (nkv_cache_ttl_applied) */
	/* Hard limits: eviction keeps usage under capacity, but never lets it run away past these. The
	 * room is reserved here and held until the Store completes (nkv_cache_unreserve, after its
	 * accounting): Stores in flight count as stored. A replacing Store reserves as a new key would. */
	if ((hard = atomic_load_explicit(&c->hard_bytes, memory_order_relaxed))) {
		int64_t before = atomic_fetch_add(&c->cap_reserved, (int64_t)len);
		req->cap_reserved = (uint32_t)len;
		if ((uint64_t)(used_bytes(c) + before) + len > hard) {
			nkv_cache_unreserve(req);
			return ST_CAPACITY;
		}
	}
	if ((hard = atomic_load_explicit(&c->hard_keys, memory_order_relaxed))) {
		int64_t before = atomic_fetch_add(&c->keys_reserved, 1);
		req->key_reserved = true;
		if ((uint64_t)(used_keys(c) + before) + 1 > hard) {
			nkv_cache_unreserve(req);
			return ST_CAPACITY;
		}
	}
	if (flags & NKV_TTL_PIN) {
		uint64_t quota = atomic_load_explicit(&c->pin_quota, memory_order_relaxed);
		int64_t before = atomic_fetch_add(&c->pin_reserved, (int64_t)len);
		req->pin_reserved = (uint32_t)len;
		if (quota && (uint64_t)(sum0(&c->o_pinned, &c->pinned_bytes) + before) + len > quota) {
			nkv_cache_unreserve(req);
			return ST_CAPACITY; /* refused before anything is written */
		}
		io->meta.flags = NKV_META_PIN;
	}
	if (flags & NKV_TTL_HASH) { /* the engine's block hash: kept in the record, named in the events */
		io->meta.flags |= NKV_META_HASH;
		io->meta.block_hash = nkv_get64(&req->cmd.mptr);
	}
	io->cache = true;
	io->meta.size = len;
	io->meta.stored_ms = now;
	io->meta.expiry_ms = ttl_s ? now + (uint64_t)ttl_s * 1000 : 0;
	io->meta.tag = mix64(atomic_fetch_add_explicit(&g_tag, 1, memory_order_relaxed) ^ (now << 20));
	return 0;
}

uint32_t nkv_cache_ttl_applied(const struct nkv_req *req)
{
	const struct nkv_meta *m = &req->io.meta;

	/* Whole seconds, as asked: parse set expiry = stored + ttl_s * 1000. */
	return m->expiry_ms ? (uint32_t)((m->expiry_ms - m->stored_ms) / 1000) : NKV_TTL_NONE;
}

void nkv_cache_parse_read(struct nkv_req *req)
{
	struct nkv_cache *c = req->ns->cache;

	if (c) {
		req->io.cache = true;
		req->io.touch_ms = atomic_load_explicit(&c->touch_ms, memory_order_relaxed);
	}
}

void nkv_cache_unreserve(struct nkv_req *req)
{
	struct nkv_cache *c = req->ns->cache;

	/* Each field is cleared as it is given back: a request releases once, whichever exit it takes
	 * (completion, a refusal at parse, a connection dropped with the command). */
	if (c && req->pin_reserved)
		atomic_fetch_sub(&c->pin_reserved, (int64_t)req->pin_reserved);
	if (c && req->cap_reserved)
		atomic_fetch_sub(&c->cap_reserved, (int64_t)req->cap_reserved);
	if (c && req->key_reserved)
		atomic_fetch_sub(&c->keys_reserved, 1);
	req->pin_reserved = req->cap_reserved = 0;
	req->key_reserved = false;
}

/* An entry left the namespace or was replaced: its share of the usage, and the unused part of a pin. */
static void account_gone(struct nkv_cache *c, uint64_t size, bool has_meta, const struct nkv_meta *m, uint64_t now)
{
	atomic_fetch_sub(&c->bytes, (int64_t)size);
	if (has_meta && (m->flags & NKV_META_PIN)) {
		atomic_fetch_sub(&c->pinned_bytes, (int64_t)size);
		atomic_fetch_sub(&c->pinned_keys, 1);
		if (m->expiry_ms > now) { /* refund the time not used */
			pthread_mutex_lock(&c->lock);
			c->byte_s -= (double)size * (double)(m->expiry_ms - now) / 1000.0;
			pthread_mutex_unlock(&c->lock);
		}
	}
}

/* The hash an event names an entry by: the one its Store gave, else the key's last 8 bytes as a
 * big-endian number (zero-padded on the left), as an index that reads the key bytes as a hash would. */
static uint64_t event_hash(const struct nkv_key *k, bool has_meta, const struct nkv_meta *m, bool *given)
{
	uint64_t h = 0;

	*given = has_meta && (m->flags & NKV_META_HASH);
	if (*given)
		return m->block_hash;
	for (unsigned i = k->len > 8 ? k->len - 8 : 0; i < k->len; i++)
		h = h << 8 | k->b[i];
	return h;
}

static void emit(struct nkv_target *t, struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_key *k,
		 bool has_meta, const struct nkv_meta *m, uint64_t size, unsigned reason)
{
	if (!t->cache_cb)
		return;
	struct nkv_cache_event ev = {.subnqn = ss->nqn, .nsid = ns->nsid, .rados_ns = ns->cache->rados_ns,
				     .klen = k->len, .reason = (uint8_t)reason, .size = size};
	ev.block_hash = event_hash(k, has_meta, m, &ev.has_hash);
	memcpy(ev.key, k->b, k->len);
	t->cache_cb(t->cache_cb_arg, &ev);
}

void nkv_cache_account(struct nkv_req *req)
{
	struct nkv_cache *c = req->ns->cache;
	struct nkv_kvio *io = &req->io;
	uint64_t now = nkv_unix_ms();

	if (!c || !io->cache)
		return;
	struct nkv_subsys *ss = req->qp->ctrlr->ss;
	if (io->op == NKV_IO_STORE && io->rc == 0) {
		if (io->old_exists) {
			account_gone(c, io->old_size, io->old_has_meta, &io->old_meta, now);
			/* Replaced under another hash: the old block is gone from here. Under the same one,
			 * the Stored event below says all there is to say. */
			bool g1, g2;
			if (event_hash(&io->key, io->old_has_meta, &io->old_meta, &g1) !=
			    event_hash(&io->key, true, &io->meta, &g2))
				emit(ss->tgt, ss, req->ns, &io->key, io->old_has_meta, &io->old_meta, io->old_size,
				     NKV_CACHE_DELETED);
		} else {
			atomic_fetch_add(&c->keys, 1);
		}
		emit(ss->tgt, ss, req->ns, &io->key, true, &io->meta, io->len, NKV_CACHE_STORED);
		atomic_fetch_add(&c->bytes, (int64_t)io->len);
		if (io->meta.flags & NKV_META_PIN) {
			atomic_fetch_add(&c->pinned_bytes, (int64_t)io->len);
			atomic_fetch_add(&c->pinned_keys, 1);
			pthread_mutex_lock(&c->lock); /* charged for the whole TTL now; refunds above */
			c->byte_s += (double)io->len * (double)(io->meta.expiry_ms - io->meta.stored_ms) / 1000.0;
			pthread_mutex_unlock(&c->lock);
		}
		/* Past capacity: wake the cache thread now rather than at its next tick. */
		uint64_t cap = atomic_load_explicit(&c->cap_bytes, memory_order_relaxed);
		uint64_t capk = atomic_load_explicit(&c->cap_keys, memory_order_relaxed);
		if (((cap && (uint64_t)used_bytes(c) > cap) || (capk && (uint64_t)used_keys(c) > capk)) &&
		    !atomic_exchange(&c->kicked, true))
			pthread_cond_signal(&req->qp->ctrlr->ss->tgt->cache_cv);
	} else if (io->op == NKV_IO_DELETE && io->old_exists) {
		account_gone(c, io->old_size, io->old_has_meta, &io->old_meta, now);
		atomic_fetch_sub(&c->keys, 1);
		emit(ss->tgt, ss, req->ns, &io->key, io->old_has_meta, &io->old_meta, io->old_size, NKV_CACHE_DELETED);
	}
}

/* ---- eviction and expiry (the cache thread, holding the namespace's lease) --------------------------- */

/* A stop was asked: each cluster call of a tick can block for the op timeout on an unreachable
 * cluster, so a tick checks before each one and a stop waits for one call, not for a whole pass
 * over the namespaces. */
static bool quitting(struct nkv_target *t)
{
	return atomic_load_explicit(&t->cache_quit, memory_order_relaxed);
}

/* Remove @n chosen entries (guarded) and account for the ones removed. */
static void remove_entries(struct nkv_target *t, struct nkv_subsys *ss, struct nkv_ns *ns, struct nkv_entry *e,
			   unsigned n, uint64_t now)
{
	struct nkv_cache *c = ns->cache;

	if (!n)
		return;
	t->be->remove_if(ns->kvns, e, n);
	for (unsigned i = 0; i < n; i++) {
		if (e[i].rc != 0)
			continue; /* stored or used again since it was read, or gone: not ours to count */
		bool expired = e[i].has_meta && nkv_meta_expired(&e[i].meta, now);
		account_gone(c, e[i].size, e[i].has_meta, &e[i].meta, now);
		atomic_fetch_sub(&c->keys, 1);
		if (expired) {
			atomic_fetch_add(&c->expirations, 1);
			atomic_fetch_add(&c->expired_bytes, (int64_t)e[i].size);
		} else {
			atomic_fetch_add(&c->evictions, 1);
			atomic_fetch_add(&c->evicted_bytes, (int64_t)e[i].size);
			/* the eviction age, smoothed: how long entries last here now */
			uint64_t age = now > e[i].atime_ms ? now - e[i].atime_ms : 0;
			c->evict_age = c->evict_age ? (c->evict_age * 7 + age) / 8 : age;
		}
		emit(t, ss, ns, &e[i].key, e[i].has_meta, &e[i].meta, e[i].size,
		     expired ? NKV_CACHE_EXPIRED : NKV_CACHE_EVICTED);
	}
}

/*
 * LRU with probation: an entry used since its Store sorts by its last use; one never used since
 * sorts as if it had been stored twice the recent eviction age earlier. So blocks stored once and
 * never read again (most misses of a skewed workload) leave before entries that were read, yet an
 * entry read long ago still ages out (no frozen cache when popularity moves).
 */
static uint64_t lru_key(struct nkv_cache *c, const struct nkv_entry *e)
{
	if (e->touched_ms > e->meta.stored_ms)
		return e->touched_ms;
	uint64_t p = 2 * c->evict_age;
	return e->meta.stored_ms > p + 1 ? e->meta.stored_ms - p : 1;
}

struct cand {
	uint64_t age_key; /* smaller goes first */
	unsigned i;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return x->age_key < y->age_key ? -1 : x->age_key > y->age_key;
}

/*
 * One eviction round: a random sample, the oldest automatic entries of it (and any expired one)
 * removed. Evicting the oldest eighth of each sample of 32 keeps the entries removed among the
 * least recently used of the namespace, at the cost of a listing page and 32 small reads per round.
 * When usage is past half the overshoot (Stores would soon get 81h), rounds of 128 remove half of
 * what they read: more per round trip, picked less finely.
 */
static void evict_round(struct nkv_target *t, struct nkv_subsys *ss, struct nkv_ns *ns, uint64_t now,
			int64_t need_bytes, int64_t need_keys, bool fifo, bool urgent)
{
	struct nkv_entry e[SAMPLE_URGENT], pick[SAMPLE_URGENT];
	struct cand cd[SAMPLE_URGENT];
	unsigned nc = 0, np = 0, want = urgent ? SAMPLE_URGENT : SAMPLE_N, k = urgent ? want / 2 : want / 8;
	int n = t->be->sample(ns->kvns, want, e);

	for (int i = 0; i < n; i++) {
		bool expired = e[i].has_meta && nkv_meta_expired(&e[i].meta, now);
		if (!expired && e[i].has_meta && (e[i].meta.flags & NKV_META_PIN))
			continue; /* pinned until it expires */
		uint64_t age = !e[i].has_meta ? 1 : fifo ? e[i].meta.stored_ms : lru_key(ns->cache, &e[i]);
		cd[nc++] = (struct cand){expired ? 0 : age, (unsigned)i};
	}
	qsort(cd, nc, sizeof(cd[0]), cand_cmp);
	int64_t got_b = 0, got_k = 0;
	for (unsigned i = 0; i < nc && (np < k || cd[i].age_key == 0); i++) {
		if (cd[i].age_key != 0 && got_b >= need_bytes && got_k >= need_keys)
			break;
		pick[np++] = e[cd[i].i];
		got_b += (int64_t)e[cd[i].i].size;
		got_k++;
	}
	remove_entries(t, ss, ns, pick, np, now);
}

static void evict(struct nkv_target *t, struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_cache_policy *pp,
		  uint64_t until)
{
	struct nkv_cache *c = ns->cache;
	const struct nkv_cache_policy p = *pp;

	if (p.eviction == NKV_EVICT_OFF || (!p.capacity_bytes && !p.capacity_keys)) {
		c->evicting = false;
		return;
	}
	int64_t low_b = (int64_t)(p.capacity_bytes / 100 * p.low_watermark_pct);
	int64_t low_k = (int64_t)(p.capacity_keys * p.low_watermark_pct / 100);
	for (;;) {
		int64_t ub = used_bytes(c), uk = used_keys(c);
		bool over = (p.capacity_bytes && ub > (int64_t)p.capacity_bytes) ||
			    (p.capacity_keys && uk > (int64_t)p.capacity_keys);
		if (over)
			c->evicting = true;
		int64_t need_b = p.capacity_bytes ? ub - low_b : 0, need_k = p.capacity_keys ? uk - low_k : 0;
		if (!c->evicting || (need_b <= 0 && need_k <= 0)) {
			c->evicting = false;
			return;
		}
		uint64_t now = nkv_now_ms();
		if (now >= until || now + p.lease_ms / 4 >= c->lease_until || quitting(t))
			return; /* next tick (renewing the lease first) */
		int64_t before = ub;
		uint64_t hb = atomic_load(&c->hard_bytes), hk = atomic_load(&c->hard_keys);
		bool urgent = (p.capacity_bytes && (uint64_t)ub > p.capacity_bytes + (hb - p.capacity_bytes) / 2) ||
			      (p.capacity_keys && (uint64_t)uk > p.capacity_keys + (hk - p.capacity_keys) / 2);
		evict_round(t, ss, ns, nkv_unix_ms(), need_b, need_k, p.eviction == NKV_EVICT_FIFO, urgent);
		if (used_bytes(c) == before && used_keys(c) == uk)
			return; /* nothing evictable in this sample (all pinned, or empty): next tick */
	}
}

/* Examine the next entries of the current pass and remove the expired ones; start passes. */
static void reap(struct nkv_target *t, struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_cache_policy *p,
		 uint64_t now_mono)
{
	unsigned budget = p->reap_rate * TICK_MS / 1000 ? p->reap_rate * TICK_MS / 1000 : 1;
	struct nkv_cache *c = ns->cache;
	struct nkv_entry e[REAP_BATCH], x[REAP_BATCH];

	if (!c->reaping) {
		if (now_mono < c->next_reap)
			return;
		memset(&c->reap, 0, sizeof(c->reap));
		c->reaping = true;
		c->next_reap = now_mono + (uint64_t)p->reap_interval_s * 1000;
	}
	while (budget && c->reaping && !quitting(t)) {
		unsigned want = budget < REAP_BATCH ? budget : REAP_BATCH, nx = 0;
		int n = t->be->scan(ns->kvns, &c->reap, want, e);
		uint64_t now = nkv_unix_ms();
		budget -= want;
		for (int i = 0; i < n; i++)
			if (e[i].has_meta && nkv_meta_expired(&e[i].meta, now))
				x[nx++] = e[i];
		remove_entries(t, ss, ns, x, nx, now);
		if (n < 0 || c->reap.done) {
			t->be->scan_end(ns->kvns, &c->reap);
			c->reaping = false;
		}
	}
}

/* Take or renew the lease when a third of it is gone. */
static void lease_keep(struct nkv_target *t, struct nkv_ns *ns, uint32_t lease_ms, uint64_t now)
{
	struct nkv_cache *c = ns->cache;

	if (now < c->next_lease)
		return;
	int rc = t->be->lease(ns->kvns, c->owner, lease_ms, c->lease);
	if (rc == 0) {
		atomic_fetch_add(&c->lease_taken, 1);
		if (!c->lease)
			NKV_INFO("cache: nsid %u: this gateway (%s) evicts and expires entries now", ns->nsid, c->owner);
		c->lease = true;
		c->lease_until = now + lease_ms;
		c->next_lease = now + lease_ms / 3;
	} else {
		if (c->lease)
			NKV_WARN("cache: nsid %u: lost the eviction lease: %s", ns->nsid, strerror(-rc));
		c->lease = false;
		c->next_lease = now + (rc == -EBUSY ? lease_ms / 3 : TICK_MS * 10);
	}
	if (c->lease && now >= c->lease_until)
		c->lease = false;
}

static void cache_ns_tick(struct nkv_subsys *ss, struct nkv_ns *ns, void *arg)
{
	struct nkv_target *t = arg;
	struct nkv_cache *c = ns->cache;
	uint64_t now = nkv_now_ms();

	if (!c || quitting(t))
		return;
	atomic_store(&c->kicked, false);
	if (now >= c->next_sync || !c->loaded) {
		if (read_shares(t, ns, c) == 0 && !quitting(t))
			write_share(t, ns, c);
		c->next_sync = now + SYNC_MS;
	}
	if (!c->loaded || quitting(t))
		return; /* do not evict on a share not yet read back */
	struct nkv_cache_policy p;
	pthread_mutex_lock(&c->lock);
	p = c->pol;
	pthread_mutex_unlock(&c->lock);
	lease_keep(t, ns, p.lease_ms, now);
	if (!c->lease || quitting(t))
		return;
	evict(t, ss, ns, &p, now + EVICT_BUDGET_MS);
	if (!quitting(t))
		reap(t, ss, ns, &p, nkv_now_ms());
}

static void *cache_main(void *arg)
{
	struct nkv_target *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->cache_stop) {
		struct timespec ts = nkv_abstime_in_ms(TICK_MS);
		pthread_cond_timedwait(&t->cache_cv, &t->lock, &ts);
		if (t->cache_stop || !atomic_load(&t->caches))
			continue;
		nkv_target_walk_ns(t, &t->cache_stop, cache_ns_tick, t);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int nkv_cache_start(struct nkv_target *t)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cache_cv, &ca);
	pthread_condattr_destroy(&ca);
	return -pthread_create(&t->cache_thread, NULL, cache_main, t);
}

/*
 * After the join: the last writes of the namespaces not done yet; for the others, what the thread's
 * last call changed since they started (an eviction round's removals, a renewal of the lease) is
 * written again. On an unreachable cluster that call changed nothing, so nothing more is waited for.
 */
static void cache_ns_final(struct nkv_subsys *ss, struct nkv_ns *ns, void *arg)
{
	struct nkv_target *t = arg;
	struct nkv_cache *c = ns->cache;
	char key[160], val[512];

	(void)ss;
	if (!c || !c->final) {
		nkv_cache_final(t, ns);
		return;
	}
	bool lease = c->lease && atomic_load(&c->lease_taken) != c->final_leases;
	share_format(c, key, sizeof(key), val, sizeof(val));
	bool share = c->final_val[0] && strcmp(val, c->final_val) != 0;
	if (!share && !lease)
		return;
	if (t->be->cache_final) {
		t->be->cache_final(ns->kvns, share ? key : NULL, val, lease ? c->owner : NULL);
		return;
	}
	if (share)
		(void)t->be->shared_put(ns->kvns, key, val);
	if (lease)
		t->be->lease_release(ns->kvns, c->owner);
}

/* Before the cache thread is joined: only namespaces whose share is read back (no read needed). */
static void cache_ns_final_loaded(struct nkv_subsys *ss, struct nkv_ns *ns, void *arg)
{
	(void)ss;
	if (ns->cache && atomic_load(&ns->cache->loaded))
		nkv_cache_final(arg, ns);
}

/*
 * Stop the cache thread and start every namespace's last writes. On an unreachable cluster the
 * thread may be in a call that ends only at the op timeout: the last writes are started without
 * waiting for it (they are aio, bounded by the op timeout too, and the backend's ns_close waits
 * for them), so the stop costs one op timeout whatever the number of namespaces. What that last
 * call changed is written again after the join (cache_ns_final); a namespace whose share was not
 * read back yet is done then too (its read must not race the thread's).
 */
void nkv_cache_stop(struct nkv_target *t)
{
	bool go_on = false;

	atomic_store(&t->cache_quit, true);
	pthread_mutex_lock(&t->lock);
	t->cache_stop = true;
	pthread_cond_signal(&t->cache_cv);
	nkv_target_walk_ns(t, &go_on, cache_ns_final_loaded, t);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->cache_thread, NULL);
	pthread_cond_destroy(&t->cache_cv);
	pthread_mutex_lock(&t->lock);
	nkv_target_walk_ns(t, &go_on, cache_ns_final, t);
	pthread_mutex_unlock(&t->lock);
}

void nkv_cache_final(struct nkv_target *t, struct nkv_ns *ns)
{
	struct nkv_cache *c = ns->cache;
	char key[160], val[512];

	if (!c || c->final)
		return;
	c->final = true;
	c->final_val[0] = 0;
	c->final_leases = atomic_load(&c->lease_taken);
	/* Leave our share written (a restart continues from it) and the lease to the others now. A
	 * share never read back is read first (a blocking call) unless the cluster did not answer the
	 * last read: then nothing could be written either. */
	if (!atomic_load(&c->loaded) && (atomic_load(&c->unanswered) || read_shares(t, ns, c) < 0)) {
		NKV_WARN("cache: nsid %u: share not read back from the cluster: this run's usage changes are "
			 "not written", ns->nsid);
		if (c->lease && t->be->cache_final)
			t->be->cache_final(ns->kvns, NULL, NULL, c->owner);
		else if (c->lease)
			t->be->lease_release(ns->kvns, c->owner);
		return;
	}
	share_format(c, key, sizeof(key), val, sizeof(val));
	snprintf(c->final_val, sizeof(c->final_val), "%s", val);
	if (t->be->cache_final) {
		t->be->cache_final(ns->kvns, key, val, c->lease ? c->owner : NULL);
		return;
	}
	int rc = t->be->shared_put(ns->kvns, key, val);
	if (rc < 0)
		NKV_DEBUG("cache: nsid %u: share not written: %s", ns->nsid, strerror(-rc));
	if (c->lease)
		t->be->lease_release(ns->kvns, c->owner);
}

void nkv_cache_close(struct nkv_target *t, struct nkv_ns *ns)
{
	struct nkv_cache *c = ns->cache;

	if (!c)
		return;
	nkv_cache_final(t, ns); /* the backend's ns_close, next, waits for it */
	if (c->reaping)
		t->be->scan_end(ns->kvns, &c->reap);
	pthread_mutex_destroy(&c->lock);
	free(c);
	ns->cache = NULL;
	atomic_fetch_sub(&t->caches, 1);
}

/* ---- the API ----------------------------------------------------------------------------------- */

int nkv_ns_set_cache_policy(struct nkv_subsys *ss, uint32_t nsid, const struct nkv_cache_policy *p)
{
	struct nkv_ns *ns = nkv_ns_get(ss, nsid);
	int rc = 0;

	if (!ns)
		return -ENOENT;
	if (!ns->cache || !p)
		rc = -EINVAL;
	else if ((rc = policy_check(p)) == 0)
		policy_publish(ns->cache, p);
	nkv_ns_put(ns);
	if (rc == 0)
		NKV_INFO("%s: nsid %u: cache policy changed (capacity %" PRIu64 " bytes, %" PRIu64 " keys, pin quota %" PRIu64
			 ")", ss->nqn, nsid, p->capacity_bytes, p->capacity_keys, p->pin_quota_bytes);
	return rc;
}

static uint64_t pos(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}

void nkv_cache_usage_of(struct nkv_cache *c, struct nkv_cache_usage *u)
{
	struct share s;

	memset(u, 0, sizeof(*u));
	share_mine(c, &s);
	pthread_mutex_lock(&c->lock);
	share_add(&s, &c->others); /* the namespace's totals, as this gateway sees them */
	u->policy = c->pol;
	u->gateways = c->gateways ? c->gateways : 1;
	pthread_mutex_unlock(&c->lock);
	u->used_bytes = pos(s.bytes);
	u->keys = pos(s.keys);
	u->pinned_bytes = pos(s.pinned_bytes);
	u->pinned_keys = pos(s.pinned_keys);
	u->evictions = (uint64_t)s.evictions;
	u->evicted_bytes = (uint64_t)s.evicted_bytes;
	u->expirations = (uint64_t)s.expirations;
	u->expired_bytes = (uint64_t)s.expired_bytes;
	u->byte_hours = s.byte_s / 3600.0;
	u->token_hours = u->policy.bytes_per_token ? u->byte_hours / (double)u->policy.bytes_per_token : 0;
	u->evicting = c->lease;
}

int nkv_ns_cache_usage(struct nkv_subsys *ss, uint32_t nsid, struct nkv_cache_usage *out)
{
	struct nkv_ns *ns = nkv_ns_get(ss, nsid);
	int rc = 0;

	if (!ns)
		return -ENOENT;
	if (!ns->cache)
		rc = -EINVAL;
	else
		nkv_cache_usage_of(ns->cache, out);
	nkv_ns_put(ns);
	return rc;
}

void nkv_target_set_cache_events(struct nkv_target *t, nkv_cache_event_cb cb, void *arg)
{
	pthread_mutex_lock(&t->lock);
	t->cache_cb = cb;
	t->cache_cb_arg = arg;
	pthread_mutex_unlock(&t->lock);
}
