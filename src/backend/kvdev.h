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

struct nkv_kvio {
	enum nkv_kvio_op op;
	unsigned flags;
	struct nkv_key key;
	void *buf;
	uint32_t len;
	uint64_t offset;     /* Retrieve: first byte of the value to read (Retrieve Range; 0 otherwise) */
	/* Exec: the method and its input in up to two pieces (bound + host), output for read methods */
	const char *cls, *method;
	bool exec_write;
	const void *in1, *in2;
	uint32_t in1_len, in2_len;
	void *out;
	uint32_t out_len;
	uint8_t inl[8];      /* inline input bytes (in2 points here for directions 00b and 10b) */
	/* results */
	int rc;              /* 0 or -errno */
	uint64_t value_size; /* Retrieve: full size of the value */
	uint32_t xfer;       /* bytes written into buf (Retrieve, List) */
	/* completion */
	struct nkv_msgq *msgq;             /* thread to complete on */
	void (*done)(struct nkv_kvio *io); /* runs once, on msgq's consumer thread */
	struct nkv_msg msg;
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
	int be_rval[2];
};

/** Space and limits of a namespace, as reported by Identify. */
struct nkv_kvns_info {
	uint64_t max_object; /* largest value the backend accepts (osd max object size) */
	uint64_t capacity;   /* bytes; 0 = unknown */
	uint64_t used;       /* bytes stored in the pool (RADOS) or namespace (mem) */
	uint8_t id[16];      /* stable identity of (cluster, pool, namespace): the data; the core adds the subsystem and NSID for the namespace IDs */
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
};

extern const struct nkv_kvdev_ops nkv_kvdev_mem;
#ifdef NKV_HAVE_RADOS
extern const struct nkv_kvdev_ops nkv_kvdev_rados;
#endif

/** Backend by name ("mem", "rados"), or NULL. */
const struct nkv_kvdev_ops *nkv_kvdev_find(const char *name);

/** Complete @io with @rc on its owner thread (hop through io->msgq). Any thread. */
void nkv_kvio_complete(struct nkv_kvio *io, int rc);

#endif
