/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvdev.h - the key-value device backend interface (ops table). A kvdev is one connection to a
 * store (a RADOS cluster, or the in-process mem table); a kvns is one namespace of one pool in it.
 * Each I/O is a struct nkv_kvio the caller owns until its done callback runs, exactly once, on
 * the thread that owns io->msgq (or inline from submit, for backends that complete at once).
 */
#ifndef NKV_KVDEV_H
#define NKV_KVDEV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/key.h"
#include "nkv/nkv_target.h"
#include "reactor/msgq.h"

struct nkv_kvdev;
struct nkv_kvns;

enum nkv_kvio_op {
	NKV_IO_STORE,    /* write the whole value (buf, len) */
	NKV_IO_RETRIEVE, /* read up to len bytes from byte offset into buf (none when offset is at or
			  * past the end); value_size = full size */
	NKV_IO_DELETE,   /* remove the key */
	NKV_IO_EXIST,    /* succeed iff the key exists */
	NKV_IO_LIST,     /* pack keys >= key, ascending, into buf (len >= 4) */
	NKV_IO_EXEC,     /* run class method cls.method with input in1 + in2; output (read methods)
			  * into out up to out_len, value_size = its full length */
};

#define NKV_IO_MUST_EXIST 0x1u     /* Store: fail with -ENOENT if absent */
#define NKV_IO_MUST_NOT_EXIST 0x2u /* Store: fail with -EEXIST if present */

/*
 * A cache entry's record (docs/cache.md), kept with the value by backends of cache namespaces: the
 * RADOS backend keeps it in the object's xattr "nkv.m" (nkv_meta_encode) and the last use in
 * "nkv.a" (8 bytes, little-endian unix ms), so that reading it is part of the read's own op.
 */
#define NKV_META_PIN 0x1u
#define NKV_META_HASH 0x2u  /* block_hash is the one the Store gave (NKV_TTL_HASH) */
#define NKV_META_LEN 40u    /* a record without a block hash ("NKM1") */
#define NKV_META_MAX 48u    /* one with it ("NKM2") */
struct nkv_meta {
	uint64_t size;      /* the value's size: a cache Retrieve reads it here instead of a stat */
	uint64_t expiry_ms; /* unix ms; 0: never */
	uint64_t stored_ms; /* unix ms when the Store was received */
	uint64_t tag;       /* random: tells two Stores of the same key apart (guards of the cache thread) */
	uint64_t block_hash; /* with NKV_META_HASH: the serving engine's hash of the block (cache events) */
	uint32_t flags;     /* NKV_META_* */
};
/** Encode @m into @out; @return its length: NKV_META_LEN, or NKV_META_MAX with a block hash. A
 *  record decoded and encoded again gives the same bytes (the cache thread's guards compare them). */
size_t nkv_meta_encode(const struct nkv_meta *m, uint8_t out[NKV_META_MAX]);
/** Decode; @return 0, or -EINVAL for a record of another length or version (treated as none). */
int nkv_meta_decode(const void *in, size_t len, struct nkv_meta *m);
/** Is @m expired at @now_ms (unix)? */
static inline bool nkv_meta_expired(const struct nkv_meta *m, uint64_t now_ms)
{
	return m->expiry_ms && m->expiry_ms <= now_ms;
}

/** One entry as the cache thread sees it (sample, scan, remove_if). */
struct nkv_entry {
	struct nkv_key key;
	uint64_t size;
	bool has_meta;       /* false: stored before the namespace had a cache (automatic, never expires) */
	struct nkv_meta meta;
	uint64_t atime_ms;   /* last use: max(stored, last touch); 0 when unknown */
	uint64_t touched_ms; /* the last touch as recorded (0: never touched): remove_if's guard */
	int rc;              /* remove_if: 0 removed, -ECANCELED changed since read, -ENOENT gone */
};

/** Where a scan of a namespace is (kvdev_ops.scan); zeroed = at the start. */
struct nkv_scan_pos {
	void *be;            /* backend cursor */
	uint64_t next;       /* mem: next index */
	bool done;           /* the pass reached the end (the cursor is released) */
};

struct nkv_kvio {
	enum nkv_kvio_op op;
	unsigned flags;
	struct nkv_key key;
	void *buf;
	uint32_t len;
	uint64_t offset;     /* Retrieve: first byte of the value to read (Retrieve Range; 0 otherwise) */
	/* Retrieve: the host's buffer is larger than @len (the most one command moves), so a value with
	 * more than @len bytes past @offset fails the command (the core answers 85h); a backend that
	 * reports progress checks it before the first report, so that no prefix is sent */
	bool exact;
	/* Store: @buf came from malloc() and the backend may keep it (set by the transport after the
	 * parse); a backend that does sets buf_taken and frees it itself, the transport forgets it */
	bool buf_gift, buf_taken;
	/* Exec: the method and its input in up to two pieces (bound + host), output for read methods */
	const char *cls, *method;
	bool exec_write;
	bool exec_ro;        /* the namespace is read-only: the backend must not let the method write */
	const void *in1, *in2;
	uint32_t in1_len, in2_len;
	void *out;
	uint32_t out_len;
	uint8_t inl[8];      /* inline input bytes (in2 points here for directions 00b and 10b) */
	/* cache namespaces: Store writes @meta with the value; Retrieve and Exist answer -ENOENT for an
	 * expired entry and refresh the last use when older than touch_ms (0: never); Store and Delete
	 * report the entry they replaced or removed (old_*) */
	bool cache;
	uint32_t touch_ms;
	struct nkv_meta meta;
	bool old_exists, old_has_meta;
	uint64_t old_size;
	struct nkv_meta old_meta;
	/* results */
	int rc;              /* 0 or -errno */
	uint64_t value_size; /* Retrieve: full size of the value */
	uint32_t xfer;       /* bytes written into buf (Retrieve, List) */
	/* bytes of the value the backend copied from buf (Store) or into it (Retrieve), itself or by a
	 * library on its behalf (librados' C API), every try counted: the copy counters. Zeroed by the
	 * core at parse; the backend adds, from its completion threads one at a time. */
	uint64_t copied_in, copied_out;
	/* completion */
	struct nkv_msgq *msgq;             /* thread to complete on */
	void (*done)(struct nkv_kvio *io); /* runs once, on msgq's consumer thread (or lent: msgq.h) */
	struct nkv_msg msg;
	/* Cut-through (Retrieve): a backend that reads a large value in pieces reports the bytes of buf
	 * that are final, from its start, in @ready, and runs @progress (set by the caller; NULL: it
	 * wants no reports) on msgq's consumer thread, always before done. @ready never reaches the
	 * Retrieve's final xfer: the last piece arrives with done. */
	void (*progress)(struct nkv_kvio *io);
	_Atomic uint32_t ready;
	atomic_bool prog_queued; /* prog_msg is in msgq (reports coalesce into one message) */
	struct nkv_msg prog_msg;
	/* backend scratch: lives as long as the I/O, so no allocation on the I/O path */
	void *be_op;          /* rados read/write op */
	void *be_comp;        /* rados: the op's completion (cancelled at the deadline) */
	void *be_ns;          /* rados: the namespace the I/O runs in */
	struct nkv_kvio *be_next, *be_prev; /* rados: in-flight list links (the List queue uses be_next) */
	uint64_t be_deadline_ms; /* rados: monotonic ms after which the I/O is cancelled (82h) */
	atomic_int be_refs;   /* rados: the completion callback and a cancelling watchdog hold one each */
	bool be_cancelled;    /* rados: the watchdog cancelled it (-ECANCELED then means -ETIMEDOUT) */
	int be_rc;            /* rados: the op's return value, read in the callback */
	char *be_out;         /* rados: a read method's output (librados allocates it) */
	size_t be_out_len;
	uint64_t be_size;     /* rados: stat size */
	size_t be_read;       /* rados: bytes read */
	time_t be_mtime;      /* rados: stat mtime */
	int be_rval[3];
	int be_stage;         /* rados: step of a cache Store/Delete (read the old record, then guard) */
	unsigned be_tries;
	void *be_xattrs;      /* rados: the getxattrs iterator */
	uint8_t be_m[NKV_META_MAX], be_mold[NKV_META_MAX]; /* rados: encoded new / replaced record */
	size_t be_m_len, be_mold_len;
	void *be_split;       /* rados: a Retrieve read in ranges (rados_range.c), or NULL */
};

/** Space and limits of a namespace, as reported by Identify. */
struct nkv_kvns_info {
	uint64_t max_object; /* largest value the backend accepts (osd max object size) */
	uint64_t capacity;   /* bytes; 0 = unknown */
	uint64_t used;       /* bytes stored in the pool (RADOS) or namespace (mem) */
	uint8_t id[16];      /* stable identity of (cluster, pool, namespace): the data; the core adds the subsystem and NSID for the namespace IDs */
	bool erasure;        /* the pool is erasure-coded: no omap, and class methods cannot read the
			      * object's data (backend/rados_pool.h): the Exec log says so */
	bool no_shared;      /* the cache's shared state has nowhere to live (erasure-coded pool and no
			      * meta pool): a cache namespace is refused */
	char pool[128];      /* the pool, for the logs of the refusals above */
};

struct nkv_kvdev_ops {
	const char *name;
	/** Connect. @return 0 or -errno (-ETIMEDOUT, -ENOTCONN, -EINVAL). */
	int (*open)(const struct nkv_backend_conf *conf, struct nkv_kvdev **out);
	void (*close)(struct nkv_kvdev *dev);
	/** Open @pool / @ns. @return 0, -ENOENT (no such pool) or -errno. */
	int (*ns_open)(struct nkv_kvdev *dev, const char *pool, const char *ns, struct nkv_kvns **out);
	void (*ns_close)(struct nkv_kvns *ns);
	/** Limits and usage (may block briefly on the cluster). @return 0 or -errno. */
	int (*ns_info)(struct nkv_kvns *ns, struct nkv_kvns_info *info);
	/** Start an I/O; completion always through io->done. */
	void (*submit)(struct nkv_kvns *ns, struct nkv_kvio *io);
	/*
	 * Cache support (the target's cache thread; blocking, each call bounded by the op timeout).
	 * Shared state: one small store per namespace (RADOS: the omap of object "rados_nkv.cache").
	 */
	/** Set @key = @val in the namespace's shared state. @return 0 or -errno. */
	int (*shared_put)(struct nkv_kvns *ns, const char *key, const char *val);
	/** Every key with @prefix: @cb(@arg, key, val) each. @return 0 or -errno. */
	int (*shared_get)(struct nkv_kvns *ns, const char *prefix,
			  void (*cb)(void *arg, const char *key, const char *val, size_t len), void *arg);
	/** Take (or renew) the namespace's eviction lease for @lease_ms as @owner. @return 0, -EBUSY
	 *  (another owner holds it), -errno. */
	int (*lease)(struct nkv_kvns *ns, const char *owner, uint32_t lease_ms, bool renew);
	void (*lease_release)(struct nkv_kvns *ns, const char *owner);
	/**
	 * A namespace's last cache writes, started and not waited for: @key = @val into the shared
	 * state, and with @owner the release of its lease. ns_close waits for them (each bounded by the
	 * op timeout). NULL: the core calls shared_put and lease_release (a backend that never blocks).
	 */
	void (*cache_final)(struct nkv_kvns *ns, const char *key, const char *val, const char *owner);
	/** Up to @n entries from random places of the namespace, with their records. @return how many. */
	int (*sample)(struct nkv_kvns *ns, unsigned n, struct nkv_entry *out);
	/** The next up to @n entries of a pass over the namespace. @return how many (pos->done at end). */
	int (*scan)(struct nkv_kvns *ns, struct nkv_scan_pos *pos, unsigned n, struct nkv_entry *out);
	/** Release a pass not run to its end. */
	void (*scan_end)(struct nkv_kvns *ns, struct nkv_scan_pos *pos);
	/** Remove each entry unless it changed since it was read (record, last use); sets each ->rc. */
	void (*remove_if)(struct nkv_kvns *ns, struct nkv_entry *e, unsigned n);
};

extern const struct nkv_kvdev_ops nkv_kvdev_mem;
#ifdef NKV_HAVE_RADOS
extern const struct nkv_kvdev_ops nkv_kvdev_rados;
#endif

/** Backend by name ("mem", "rados"), or NULL. */
const struct nkv_kvdev_ops *nkv_kvdev_find(const char *name);

/** Complete @io with @rc on its owner thread (hop through io->msgq). Any thread. */
void nkv_kvio_complete(struct nkv_kvio *io, int rc);
/**
 * As nkv_kvio_complete, but when the owner thread is blocked and lends itself (msgq.h), run
 * io->done here instead of waking it. Only from a thread that holds no lock done() could need
 * (done() may submit new I/O): the backend's callback, not code under a backend lock.
 */
void nkv_kvio_complete_direct(struct nkv_kvio *io, int rc);
/**
 * Report that the first @bytes of io->buf are final (cut-through; see nkv_kvio.progress). Any
 * thread; reports coalesce. Complete such an I/O with nkv_kvio_complete only: the completion then
 * queues behind the last report, so progress never runs after done.
 */
void nkv_kvio_progress(struct nkv_kvio *io, uint32_t bytes);

#endif
