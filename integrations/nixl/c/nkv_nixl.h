/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv_nixl.h - the logic of the RADOS_NKV NIXL storage backend, in C: a NIXL-shaped table of
 * registrations and transfer requests over libnkv's engine (nkv_engine_*), so that the C++ plugin
 * (integrations/nixl/plugin) is a thin adapter and everything here is tested without NIXL.
 *
 * Model (NIXL's object segments):
 * - An object registration (OBJ_SEG) names an object: devId is the number transfers use to pick
 *   it, metaInfo the object's name (an arbitrary string; empty: the decimal devId, as NIXL's S3
 *   backend does). Registering a devId again replaces the earlier registration for new requests.
 *   Registration is cheap (one allocation, one SHA-256, one hash-table insert): frameworks register
 *   and deregister object descriptors around every transfer job.
 * - Objects are stored under libnkv's long-name scheme (nkv_lname_*): key = SHA-256(name)[0:16],
 *   value = header carrying the whole name + payload. A read of [off, off + len) of the payload is
 *   a Retrieve Range at header size + off straight into the caller's DRAM, with a read of the
 *   header in flight at the same time; a header of another name, or no header at all, means the
 *   object does not exist (NKV_NIXL_ERR_NOT_FOUND).
 * - Writes are whole-object: a write descriptor replaces the object with its local bytes, and must
 *   say offset 0 (another offset: NKV_NIXL_ERR_NOT_SUPPORTED). The header must precede the payload
 *   in one value, so each write copies header + payload into a staging buffer (nkv_buf_alloc()
 *   memory, registered with the controller over shm; kept for reuse). The copy, and freeing
 *   staging, run on the backend's stager thread after the post: posting never waits on them, and
 *   the local bytes must stay unchanged until the transfer completes (NIXL's rule for every backend).
 * - A DRAM registration over the shared-memory transport is registered with the controller
 *   (nkv_buf_register()), so reads land in it and writes leave from it with no copy in between;
 *   over NVMe/TCP it is only recorded.
 *
 * Status codes are NIXL's nixl_status_t values (nixl_types.h, backend API version 1), so the
 * adapter returns them as they are. Every function is thread-safe unless it says otherwise.
 */
#ifndef NKV_NIXL_H
#define NKV_NIXL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** NIXL's status codes (nixl_status_t), same values. */
enum nkv_nixl_status {
	NKV_NIXL_IN_PROG = 1,               /* posted, not finished */
	NKV_NIXL_SUCCESS = 0,               /* done */
	NKV_NIXL_ERR_NOT_POSTED = -1,       /* checked before it was posted */
	NKV_NIXL_ERR_INVALID_PARAM = -2,    /* a bad descriptor, parameter or handle; a read past the object's end */
	NKV_NIXL_ERR_BACKEND = -3,          /* the target or the connection failed (timeouts, lost queues, I/O errors) */
	NKV_NIXL_ERR_NOT_FOUND = -4,        /* the object does not exist (or a foreign/colliding object holds its key) */
	NKV_NIXL_ERR_MISMATCH = -5,         /* local and remote descriptors disagree (count, length) */
	NKV_NIXL_ERR_NOT_ALLOWED = -6,      /* refused: read-only namespace, access denied, region still in use */
	NKV_NIXL_ERR_REPOST_ACTIVE = -7,    /* posted again while still in flight */
	NKV_NIXL_ERR_UNKNOWN = -8,          /* not returned */
	NKV_NIXL_ERR_NOT_SUPPORTED = -9,    /* a write at a nonzero offset, an unsupported memory type */
	NKV_NIXL_ERR_REMOTE_DISCONNECT = -10, /* not returned (NIXL drops a remote agent's metadata on it) */
	NKV_NIXL_ERR_CANCELED = -11,        /* not returned */
};

/** NIXL's memory segment types (nixl_mem_t), same values. Only DRAM and OBJ are supported. */
enum nkv_nixl_mem {
	NKV_NIXL_DRAM_SEG = 0,
	NKV_NIXL_VRAM_SEG = 1,
	NKV_NIXL_BLK_SEG = 2,
	NKV_NIXL_OBJ_SEG = 3,
	NKV_NIXL_FILE_SEG = 4,
};

/** NIXL's transfer operations (nixl_xfer_op_t), same values. READ: object -> DRAM. */
enum nkv_nixl_op {
	NKV_NIXL_READ = 0,
	NKV_NIXL_WRITE = 1,
};

/** One backend parameter (NIXL passes a string map). */
struct nkv_nixl_param {
	const char *key;
	const char *value;
};

/** Connection settings, as parsed from the parameters (nkv_nixl_parse_params()). */
struct nkv_nixl_opts {
	char traddr[256];    /* "traddr": NVMe/TCP address; default 127.0.0.1 */
	char port[8];        /* "port" (or "trsvcid"): default 4420 */
	char subnqn[224];    /* "subnqn": default nqn.2026-11.io.rados-nkv:nkv (the daemon's for pool nkv) */
	char shm[108];       /* "shm": Unix socket of the shared-memory transport; set: used instead of TCP */
	char paths[1024];    /* "paths": several paths to the subsystem (a gateway group), as
			      * nkv_engine_connect() takes them ("HOST:PORT,HOST:PORT"); set: used instead
			      * of traddr/port, with libnkv's multipath engine (failover between them) */
	char hostnqn[224];   /* "hostnqn": default libnkv's (/etc/nvme/hostnqn, ...) */
	uint32_t nsid;       /* "nsid": KV namespace; default 1 */
	unsigned queues;     /* "queues": engine queue pairs (threads), 1..64; default 4 */
	unsigned depth;      /* "queue_depth": entries per queue pair, 0 (libnkv's 128) or 2..65535 */
	unsigned timeout_ms; /* "timeout_ms": connect timeout and per-op deadline, 1..3600000; default 30000 */
	unsigned max_ops;    /* "max_ops": ops in flight in the engine, 1..16777216; default 65536 */
	unsigned staging_mb; /* "staging_mb": write staging buffers kept for reuse, MiB, 0..65536; default 256 */
	unsigned reconnect_max_ms;  /* "reconnect_max_ms": longest gap between tries to reach a lost daemon
				     * again, 10..60000; default 1000 */
	unsigned reconnect_wait_ms; /* "reconnect_wait_ms": how long a transfer posted while the daemon is
				     * away waits for it, 0 (not at all: NIXL_ERR_BACKEND at once)..3600000;
				     * default timeout_ms */
};

/**
 * Fill @o from @params (@n entries; keys above), then from the environment for keys the
 * parameters do not give (NKV_NIXL_TRADDR, NKV_NIXL_PORT, NKV_NIXL_SUBNQN, NKV_NIXL_SHM,
 * NKV_NIXL_HOSTNQN, NKV_NIXL_PATHS, NKV_NIXL_NSID, NKV_NIXL_QUEUES, NKV_NIXL_QUEUE_DEPTH, NKV_NIXL_TIMEOUT_MS,
 * NKV_NIXL_MAX_OPS, NKV_NIXL_STAGING_MB, NKV_NIXL_RECONNECT_MAX_MS, NKV_NIXL_RECONNECT_WAIT_MS: how a plugin installed under another backend's name, e.g. OBJ, is configured
 * when the framework passes that backend's parameters), then the defaults. An empty value counts
 * as not given. Unknown keys (S3's bucket, endpoint_override, access_key, ...) are ignored. @err
 * (may be NULL) gets a message.
 * @return NKV_NIXL_SUCCESS, or NKV_NIXL_ERR_INVALID_PARAM (a value that is not a number, out of
 * range or too long; the message names the key).
 */
int nkv_nixl_parse_params(const struct nkv_nixl_param *params, size_t n, struct nkv_nixl_opts *o, char *err,
			  size_t err_len);

/** The NIXL status for a libnkv result (0 or -errno): -ENOENT NOT_FOUND, -EINVAL/-EFBIG INVALID_PARAM, ... */
int nkv_nixl_status_from_errno(int rc);
/** The NIXL status for an NVMe completion status (SCT << 8 | SC), through nkv_status_errno(). */
int nkv_nixl_status_from_nvme(uint16_t status);
/** NIXL's name of a status: "NIXL_ERR_NOT_FOUND", ...; "NIXL_ERR_?" for other values. Static storage. */
const char *nkv_nixl_status_str(int st);

struct nkv_nixl;     /* one backend instance: a controller, an engine, the tables */
struct nkv_nixl_md;  /* one registration */
struct nkv_nixl_req; /* one transfer request */

/**
 * Connect as @params say (nkv_nixl_parse_params()), check that the namespace exists and start an
 * engine. @err (may be NULL) gets a message on failure.
 * @return NKV_NIXL_SUCCESS with *@out set; INVALID_PARAM (bad parameters), NOT_FOUND (no such
 * subsystem or namespace), NOT_ALLOWED (host refused), BACKEND (the target is unreachable, ...).
 */
int nkv_nixl_create(const struct nkv_nixl_param *params, size_t n, struct nkv_nixl **out, char *err, size_t err_len);

/**
 * Wait for every op in flight (each within its deadline), free every request and registration
 * left, unregister DRAM from the controller, disconnect. Not concurrently with other calls on @b.
 * NULL: no-op.
 */
void nkv_nixl_destroy(struct nkv_nixl *b);

/** The options @b runs with. */
const struct nkv_nixl_opts *nkv_nixl_opts(const struct nkv_nixl *b);

/** Is @b on the shared-memory transport? */
int nkv_nixl_is_shm(const struct nkv_nixl *b);

/**
 * Register memory. DRAM (@mem NKV_NIXL_DRAM_SEG): [@addr, @addr + @len) with the controller over
 * shm (nkv_buf_register(); memory it cannot take, e.g. not private anonymous, or overlapping an
 * earlier registration, still works through the bounce area: logged at info, success). OBJ: the
 * object @meta (@meta_len bytes; 0: the decimal @dev_id) under @dev_id, valid for transfers at
 * object offsets [@addr, @addr + @len) (@len 0, or a range past 2^64: unbounded); it replaces an earlier registration of
 * @dev_id for requests prepared from now on (those prepared before keep theirs).
 * @return SUCCESS with *@out set; NOT_SUPPORTED (another memory type); INVALID_PARAM (name longer
 * than NKV_LNAME_MAX, DRAM at NULL or of length 0); BACKEND (out of memory).
 */
int nkv_nixl_register(struct nkv_nixl *b, int mem, uint64_t addr, uint64_t len, uint64_t dev_id, const void *meta,
		      size_t meta_len, struct nkv_nixl_md **out);

/**
 * Undo nkv_nixl_register(). An OBJ registration leaves the devId table only if it is still the
 * current one for its devId; requests that use it keep it alive until they are released.
 * @return SUCCESS; NOT_ALLOWED when the controller still uses DRAM (a command in flight: -EBUSY;
 * @md stays registered, call again later); INVALID_PARAM for NULL.
 */
int nkv_nixl_deregister(struct nkv_nixl *b, struct nkv_nixl_md *md);

/** The devId, name and derived key of an OBJ registration (tests, logs). @return 0 or -EINVAL (DRAM). */
int nkv_nixl_md_obj(const struct nkv_nixl_md *md, uint64_t *dev_id, const char **name, size_t *name_len,
		    uint8_t key[16]);

/** Did the controller take a DRAM registration for zero copy (nkv_buf_register())? 1 or 0 (also for OBJ). */
int nkv_nixl_md_zero_copy(const struct nkv_nixl_md *md);

/** One descriptor of a transfer: local DRAM (addr = pointer) or remote OBJ (addr = object offset). */
struct nkv_nixl_desc {
	uint64_t addr;
	uint64_t len;
	uint64_t dev_id;
};

/**
 * Prepare a request (once per NIXL request): @n pairs of @local (DRAM) and @remote (OBJ)
 * descriptors, pair i moving remote[i] <-> local[i]. Registrations are resolved now (the devId's
 * current one). Nothing is sent, but an Identify when a write looks over the namespace's limit
 * (the limit may have been raised).
 * @return SUCCESS with *@out; INVALID_PARAM (n == 0, @op not READ/WRITE, a NULL local address with
 * a nonzero length, a length of 4 GiB or more, an unregistered devId, a remote range outside its
 * registration, two writes to one object, more ops than max_ops, a write whose header + payload
 * exceeds the namespace's largest value); NOT_SUPPORTED (@local_mem not
 * DRAM, @remote_mem not OBJ, a write at a nonzero offset); MISMATCH (local and remote lengths
 * differ); BACKEND (out of memory).
 */
int nkv_nixl_prep(struct nkv_nixl *b, int op, int local_mem, const struct nkv_nixl_desc *local, int remote_mem,
		  const struct nkv_nixl_desc *remote, size_t n, struct nkv_nixl_req **out);

/**
 * Post @req: its ops go to the engine as one batch (a write is queued for the stager thread, which
 * copies its payloads into staging and then submits it: this call never copies or frees staging). A finished request may be posted again (same descriptors; its result is reset).
 * When the engine is full the request waits in a FIFO and is submitted by later calls.
 * @return IN_PROG; REPOST_ACTIVE (still in flight); INVALID_PARAM (NULL); BACKEND (the engine
 * refused a read; a write the engine refuses reports it through nkv_nixl_check()).
 */
int nkv_nixl_post(struct nkv_nixl *b, struct nkv_nixl_req *req);

/**
 * Progress and state of @req, never blocking: completed batches are collected first.
 * @return IN_PROG, SUCCESS, NOT_POSTED (never posted), or the error of the first failed pair
 * (NOT_FOUND: the object is missing; INVALID_PARAM: a read past its end; BACKEND; ...).
 */
int nkv_nixl_check(struct nkv_nixl *b, struct nkv_nixl_req *req);

/**
 * Release @req, never blocking. One still in flight is detached: it is freed when its batch
 * completes (each op within its deadline), and until then its reads may still write into the
 * local DRAM and its writes still read from it, which must stay mapped (NIXL frameworks keep one registered pool for their lifetime).
 * @return SUCCESS; INVALID_PARAM for NULL.
 */
int nkv_nixl_release(struct nkv_nixl *b, struct nkv_nixl_req *req);

/** The answer for one object of nkv_nixl_query(). */
struct nkv_nixl_qresp {
	int present;   /* 1: exists (a long-name object of exactly this name) */
	uint64_t size; /* present: the payload size in bytes */
};

/**
 * Do the objects @names[i] (@lens[i] bytes each) exist? One header read each, all in flight at
 * once; blocks until they answer (each within the deadline). A key that is absent, or holds a
 * foreign object or another name's object, is absent.
 * @return SUCCESS with @resp[0..n) filled; INVALID_PARAM (an empty or too long name); BACKEND (a
 * read failed other than by absence: the whole answer is unreliable).
 */
int nkv_nixl_query(struct nkv_nixl *b, const char *const *names, const size_t *lens, size_t n,
		   struct nkv_nixl_qresp *resp);

/** Requests alive (prepared and not freed: released in-flight ones count until their batch completes). */
unsigned nkv_nixl_live_reqs(struct nkv_nixl *b);

#ifdef __cplusplus
}
#endif
#endif /* NKV_NIXL_H */
