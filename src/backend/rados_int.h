/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados_int.h - the RADOS backend's internals, shared by its I/O path (rados.c) and the cache
 * thread's calls (rados_cache.c).
 */
#ifndef NKV_RADOS_INT_H
#define NKV_RADOS_INT_H

#include <pthread.h>
#include <rados/librados.h>
#include <stdatomic.h>

#include "kvdev.h"

/* In-flight lists: sharded so submitters on different threads rarely meet on one mutex. */
#define FLIGHT_SHARDS 8
#define LIST_WORKERS_MAX 64
/* The object holding a cache namespace's shared state (omap) and eviction lease (cls_lock). Its
 * name is no key's (keys are hex), so List and the cache's scans skip it. */
#define CACHE_OID "rados_nkv.cache"
/* ... and its name in a meta pool (an erasure-coded data pool has no omap): CACHE_OID "@" the data
 * pool, so that namespaces of several data pools never share one object there. */
#define CACHE_OID_MAX 200
#define XATTR_META "nkv.m"
#define XATTR_ATIME "nkv.a"
/* Touches (last-use refreshes) in flight at most; more are skipped, not queued. */
#define TOUCH_MAX 256
/* Retrieve Range: no value reaches this offset (KVVML is at most 4 GiB - 1, DW0 is 32 bits). */
#define RANGE_OFFSET_MAX (1ull << 32)

struct flight {
	pthread_mutex_t lock;
	struct nkv_kvio *head, *tail; /* submit order = deadline order (one timeout for all) */
};

/*
 * A List worker. Its job is the List it scans; the watchdog may take the job away at the deadline
 * (completing it with 82h) while the scan still blocks in librados: the worker then drops its result.
 * Both sides hand the job over under the device lock, and the worker never touches the I/O after
 * losing it (the transport may have reused it).
 */
struct list_worker {
	struct nkv_kvdev *d;
	pthread_t thread;
	struct nkv_kvio *job; /* the List being scanned; NULL once answered or taken away (d->lock) */
};

struct nkv_kvdev {
	rados_t cluster;      /* I/O: async ops, target-side deadlines */
	rados_t list_cluster; /* List scans: blocking calls bounded by rados_osd_op_timeout */
	uint64_t max_object;
	uint64_t op_timeout_ms;
	char fsid[40];
	struct flight flight[FLIGHT_SHARDS];
	/* List workers: namespace scans are blocking librados calls, kept off the owner threads. */
	struct list_worker workers[LIST_WORKERS_MAX];
	unsigned nworkers;
	pthread_mutex_t lock;         /* the List queue, the workers' jobs, stop */
	pthread_cond_t cond;
	struct nkv_kvio *head, *tail; /* queued Lists, linked through be_next, oldest first */
	bool stop;
	pthread_t watchdog;           /* cancels late ops */
	pthread_cond_t wd_cond;
	_Atomic uint64_t cancelled;   /* ops cancelled at their deadline, for the log */
	atomic_uint touches;          /* last-use refreshes in flight */
	atomic_uint range_reads;      /* Retrieves being read in ranges (rados_range.c) */
	uint64_t range_min;           /* host buffers at least this large are read in ranges; 0: never */
	char meta_pool[128];          /* --meta-pool ("": none) */
};

struct nkv_kvns {
	struct nkv_kvdev *dev;
	rados_ioctx_t ioctx;
	rados_ioctx_t list_ioctx;
	/* Exec on a read-only namespace: reads at a snapshot id above any the pool can reach. RADOS serves
	 * them from the current object, but refuses (-EINVAL, before it runs) any op that may write,
	 * which includes every class method flagged as a writer: the gateway need not know which are. */
	rados_ioctx_t exec_ro_ioctx;
	/* The cache's shared state and lease object: list_ioctx and CACHE_OID on a replicated pool; on
	 * an erasure-coded one, the meta pool's (same RADOS namespace) or NULL when there is none. */
	rados_ioctx_t meta_ioctx;
	bool meta_own;            /* meta_ioctx is an ioctx of its own (the meta pool's) */
	char cache_oid[CACHE_OID_MAX];
	bool erasure;
	char name[512]; /* "pool/ns", for logs and the NGUID */
};

/* Read an entry's record from a getxattrs iterator (freed): has_meta/meta, the raw record into
 * @raw (if not NULL; *@raw_len its length, 0 when none) and the last touch (0: none). */
void rados_read_meta(rados_xattrs_iter_t it, bool *has_meta, struct nkv_meta *meta, uint8_t *raw, size_t *raw_len,
		     uint64_t *touched_ms);

/* The in-flight list (the watchdog's): add @io (@fresh: a new command, a new deadline) with one
 * reference, or take it off. */
void rados_flight_add(struct nkv_kvdev *d, struct nkv_kvio *io, bool fresh);
void rados_flight_del(struct nkv_kvdev *d, struct nkv_kvio *io);
/* Drop a reference on @io; the last one finishes it. */
void rados_io_put(struct nkv_kvio *io);

/* Build and submit @io's op on object @oid (io->be_tries 0: a new deadline). @return 0 or -errno
 * (no completion then). */
int rados_submit_op(struct nkv_kvns *h, struct nkv_kvio *io, const char *oid);

/* Large Retrieves read in ranges (rados_range.c). submit: @return false when @io is not one (the
 * caller submits it whole); cancel: the watchdog's, every range in flight (a reference held);
 * finish: the last reference went, complete it. */
bool rados_range_submit(struct nkv_kvns *h, struct nkv_kvio *io, const char *oid);
void rados_range_cancel(struct nkv_kvio *io);
void rados_range_finish(struct nkv_kvio *io);

/* The cache thread's calls (rados_cache.c; see struct nkv_kvdev_ops). */
int rados_cache_shared_put(struct nkv_kvns *h, const char *key, const char *val);
int rados_cache_shared_get(struct nkv_kvns *h, const char *prefix,
			   void (*cb)(void *arg, const char *key, const char *val, size_t len), void *arg);
int rados_cache_lease(struct nkv_kvns *h, const char *owner, uint32_t lease_ms, bool renew);
void rados_cache_lease_release(struct nkv_kvns *h, const char *owner);
void rados_cache_final(struct nkv_kvns *h, const char *key, const char *val, const char *owner);
int rados_cache_sample(struct nkv_kvns *h, unsigned n, struct nkv_entry *out);
int rados_cache_scan(struct nkv_kvns *h, struct nkv_scan_pos *pos, unsigned n, struct nkv_entry *out);
void rados_cache_scan_end(struct nkv_kvns *h, struct nkv_scan_pos *pos);
void rados_cache_remove_if(struct nkv_kvns *h, struct nkv_entry *e, unsigned n);

#endif
