/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv.h - libnkv, the rados-nkv client library: an initiator for the NVMe Key Value command set
 * over two transports, NVMe/TCP (nkv_connect) and the target's shared-memory PCIe-style controller
 * (nkv_connect_shm: a register page, SQ/CQ rings and PRPs in memory shared over a Unix socket; or
 * the same controller as a vfio-user PCI device, nkv_connect() with "vfio-user:/path").
 * Connect to a subsystem (directly or through a discovery controller), identify its KV namespaces,
 * and run Store / Retrieve / Delete / Exist / List and vendor Exec (allowlisted RADOS class methods)
 * synchronously or asynchronously. Every call below
 * works over both transports unless it says otherwise.
 *
 * Errors: every call returns 0 (or a count) on success and -errno on failure. A command that
 * reached the controller and failed there returns the errno of its NVMe status (see
 * nkv_status_errno(): Key Does Not Exist -> -ENOENT, Key Exists -> -EEXIST, ...) and, when the
 * caller passes a struct nkv_cpl, the exact NVMe status and CQE dwords.
 *
 * Threads: a controller's admin queue may be used from any thread (it is locked). An I/O queue pair
 * (struct nkv_qpair) belongs to one thread at a time: submit and poll it from that thread only;
 * different queue pairs may run on different threads at once. Keep Alive runs on a background
 * thread of the controller.
 */
#ifndef NKV_H
#define NKV_H

#include <stdbool.h>
#include <stdint.h>

#include "nkv_spec.h"

/* libnkv's exported API: libnkv.so is built with -fvisibility=hidden, so only what carries this is
 * visible to programs; internal functions cannot clash with theirs or become accidental ABI. */
#ifndef NKV_API
#if defined(__GNUC__) || defined(__clang__)
#define NKV_API __attribute__((visibility("default")))
#else
#define NKV_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_ctrl;  /* one controller association: admin queue + I/O queues */
struct nkv_qpair; /* one I/O queue (one TCP connection, or one shm SQ/CQ pair) */

#define NKV_HOSTNQN_MAX 224 /* a host NQN's bytes with its NUL (the Connect data field allows 223) */

/** Where a host NQN or host ID came from (nkv_host_ident_load()). */
enum nkv_host_src {
	NKV_HOST_SRC_NONE,   /* not settled */
	NKV_HOST_SRC_FILE,   /* its file (/etc/nvme/hostnqn or /etc/nvme/hostid, or the NKV_*_FILE override) */
	NKV_HOST_SRC_NQN,    /* host ID: the UUID of a uuid-form host NQN read from its file */
	NKV_HOST_SRC_HOSTID, /* host NQN: nqn.2014-08.org.nvmexpress:uuid:<the host ID from its file> */
	NKV_HOST_SRC_DMI,    /* derived from /sys/class/dmi/id/product_uuid (stable per machine) */
	NKV_HOST_SRC_RANDOM, /* generated once for this process: neither file nor a DMI UUID */
	NKV_HOST_SRC_OPTION, /* given by the caller (nkv --hostnqn / --hostid) */
};

/** A host identity, as nkv_host_ident_load() finds it. */
struct nkv_host_ident {
	char hostnqn[NKV_HOSTNQN_MAX];
	uint8_t hostid[16];
	enum nkv_host_src hostnqn_src, hostid_src;
	char hostnqn_file[256], hostid_file[256]; /* the files consulted */
	bool bad_hostnqn; /* on -EINVAL: the host NQN file is malformed (else the host ID file) */
};

/**
 * The host identity nvme-cli would present, for Connect and the target's allowlists:
 * - host ID: the UUID in /etc/nvme/hostid; else, when the host NQN file holds a uuid-form NQN
 *   (nqn.2014-08.org.nvmexpress:uuid:<UUID>), that UUID; else /sys/class/dmi/id/product_uuid; else
 *   a UUID generated once for this process (the only case that differs between runs);
 * - host NQN: /etc/nvme/hostnqn; else nqn.2014-08.org.nvmexpress:uuid:<host ID>.
 * Files are read whole, surrounding whitespace trimmed; one that cannot be opened counts as absent.
 * $NKV_HOSTNQN_FILE and $NKV_HOSTID_FILE replace the two paths (tests, containers).
 * @return 0; -EINVAL when a file is present but malformed (host ID not a UUID, host NQN not
 * "nqn." + 1..219 printable bytes without spaces): h->bad_hostnqn says which (the host NQN file
 * when set, else the host ID file; with both bad, the NQN's), and *h still holds the identity
 * settled as if that file were absent. Thread-safe.
 */
int nkv_host_ident_load(struct nkv_host_ident *h);

/** Name of a source: "file", "hostnqn", "hostid", "dmi", "random", "option" or "none". */
const char *nkv_host_src_name(enum nkv_host_src src);

/** Is @nqn acceptable as a host NQN ("nqn.", at most 223 bytes, printable, no spaces)? @return 0 or -EINVAL. */
int nkv_hostnqn_check(const char *nqn);

/** Parse a UUID "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex, any case). @return 0 or -EINVAL. */
int nkv_uuid_parse(const char *s, uint8_t uuid[16]);

/** Format @uuid as 36 lowercase characters plus a NUL. */
void nkv_uuid_format(const uint8_t uuid[16], char out[37]);

/** Connection options; zeroed fields take the defaults noted. */
struct nkv_conn_opts {
	const char *hostnqn;   /* NULL: nkv_host_ident_load()'s (/etc/nvme/hostnqn, ...) */
	uint8_t hostid[16];    /* all zero: nkv_host_ident_load()'s (/etc/nvme/hostid, ...) */
	bool hdgst;            /* header digest (CRC32C) */
	bool ddgst;            /* data digest */
	uint32_t kato_ms;      /* keep-alive timeout; 0: 10000. Keep Alive is sent every kato/2 */
	bool no_keepalive;     /* send KATO 0 (no keep-alive timer on the target) */
	uint16_t queue_depth;  /* I/O queue entries; 0: 128 (clamped to the controller's MQES+1) */
	int timeout_ms;        /* connect and synchronous-command timeout; 0: 30000 */
	uint32_t shm_bounce_kib; /* shm: per queue pair bounce area for buffers not from nkv_buf_alloc();
				  * 0: twice the controller's MDTS, 1 MiB to 256 MiB (mapped lazily) */
	/* DH-HMAC-CHAP in-band authentication (NVMe/TCP), secrets as `nvme gen-dhchap-key` prints them
	 * ("DHHC-1:hh:<base64>:"); read during nkv_connect() only. */
	const char *dhchap_secret;      /* the host's secret: every queue authenticates when the controller
					 * asks; NULL: none (such a controller is refused: -ENOKEY) */
	const char *dhchap_ctrl_secret; /* the controller's secret: it must authenticate itself too
					 * (bidirectional), even if it does not ask; NULL: it need not */
	/* TLS 1.3 with a PSK (NVMe/TCP TP 8011), for targets' secure listeners; TCP only. */
	bool tls;              /* every connection of the controller (admin and I/O queues) over TLS */
	const char *tls_key;   /* the configured PSK: "NVMeTLSkey-1:hh:BASE64:" (nvme gen-tls-key), or
				* "@PATH" of a file holding it; required with tls, read at connect time */
	uint8_t tls_identity;  /* PSK identity version: 0 "NVMe0Rxx HOSTNQN SUBNQN" (TP 8011, what Linux
				* and nvme-cli use by default), 1 "NVMe1Rxx HOSTNQN SUBNQN DIGEST" (TP 8018) */
};

#define NKV_STATUS_HOST_PATH 0x370 /* SCT 3h SC 70h: the connection failed before the CQE arrived */

/** One CQE, decoded. */
struct nkv_cpl {
	uint16_t status; /* SCT << 8 | SC (0 = success) */
	bool dnr;        /* Do Not Retry */
	uint32_t dw0, dw1;
	uint32_t xfer;   /* bytes moved to the host buffer (controller-to-host commands) */
};

/**
 * Connect to subsystem @subnqn at @traddr:@trsvcid (numeric or names; IPv4 or IPv6) and bring the
 * controller up: ICReq, Connect (admin queue), CC.EN, CSTS.RDY, Identify Controller, Set Features
 * Number of Queues. @opts may be NULL.
 * @traddr may be bracketed ("[::1]", as rados-nkv --listen takes it); @trsvcid must be a port
 * number (1..65535).
 * @return 0, -ENXIO (@traddr does not resolve), -ECONNREFUSED (nothing listens there),
 * -EHOSTUNREACH / -ENETUNREACH (no route), -ETIMEDOUT (no answer), -EPROTO (the target broke the
 * protocol), -EACCES (Connect Invalid Host), -ENOENT (no such subsystem), -EINVAL (a bad argument,
 * e.g. a non-numeric port, or a malformed DH-HMAC-CHAP secret), -ENOMEM; with DH-HMAC-CHAP
 * (opts->dhchap_secret): -ENOKEY (the subsystem requires authentication and no secret was given),
 * -EACCES (the controller refused the host secret, like a host not on its allowlist), -EKEYREJECTED
 * (the controller's response does not match opts->dhchap_ctrl_secret: a wrong secret or an impostor),
 * -EOPNOTSUPP (it asks for what libnkv does not do: no common hash or DH group, secure channel
 * concatenation). Every queue pair that nkv_qpair_create() opens authenticates the same way.
 * With opts->tls: -EKEYREJECTED (the TLS handshake failed on the key: the target has no PSK for
 * this host and subsystem, or another one), -ECONNRESET (the target closed the connection: e.g. a
 * plain listener refusing TLS, or a TLS-only one a plain ICReq), -EPROTO (the other end does not
 * speak TLS 1.3), -EINVAL / -EMSGSIZE / -EBADMSG (opts->tls_key is not a valid PSK: bad format,
 * length, CRC), -ENOENT / -EACCES (its @FILE), -ENAMETOOLONG (the NQNs make a PSK identity over 255
 * bytes). Without opts->tls, a TLS-only listener closes the connection: -ECONNRESET.
 */
NKV_API int nkv_connect(const char *traddr, const char *trsvcid, const char *subnqn,
		const struct nkv_conn_opts *opts, struct nkv_ctrl **out);

/**
 * Connect to the shared-memory (PCIe-style) controller served on Unix socket @path (nkv_shm.h):
 * HELLO with the host NQN and ID, map the register page, register the admin queues, then bring the
 * controller up as a PCIe driver does (CSTS.RDY = 0, AQA/ASQ/ACQ, CC.EN with CSS 110b, CSTS.RDY
 * within CAP.TO), Identify Controller, Set Features Number of Queues. nkv_connect() with traddr
 * "shm:/path/to/socket" does the same (trsvcid ignored; a SUBNQN other than the socket's fails with
 * -ENOENT; NULL or "" accepts the socket's). opts->hdgst/ddgst/kato_ms do not apply (no Keep Alive on PCIe). @opts may be NULL.
 * nkv_connect() with "vfio-user:/path/to/socket" reaches the same controller model over vfio-user
 * (the target's --vfio-user socket: VERSION, region info, BAR0's registers and doorbells mapped,
 * DMA_MAP of the host's memory, MSI-X vectors over eventfds; no host NQN or ID is sent, the target
 * names its clients) and returns the same codes; a server that breaks the protocol is -EPROTO.
 * nkv_shm_reg_cuda() is nkv_shm.h's only (-ENOTSUP over vfio-user).
 * @return 0, -ENOENT / -ECONNREFUSED (no listener at @path), -EACCES (host not allowed),
 * -ETIMEDOUT (no reply, or CSTS.RDY not set within CAP.TO), -EIO (CSTS.CFS), -EPROTO (the target
 * broke the protocol), -ENAMETOOLONG, -EINVAL, -ENOMEM.
 */
NKV_API int nkv_connect_shm(const char *path, const struct nkv_conn_opts *opts, struct nkv_ctrl **out);

/**
 * Allocate @len bytes of I/O buffer for @ctrl. Over shm the memory is a memfd registered with the
 * controller: commands whose buffers lie inside it move data with no copy (other memory goes through
 * a per-queue-pair registered bounce area). Over TCP it is plain malloc memory. Any thread.
 * @return the buffer (4 KiB aligned over shm), or NULL (errno not set; out of memory or the
 * controller's registration limits).
 */
NKV_API void *nkv_buf_alloc(struct nkv_ctrl *ctrl, size_t len);
/** Free a buffer from nkv_buf_alloc() on the same controller (no command may still use it). */
NKV_API void nkv_buf_free(struct nkv_ctrl *ctrl, void *buf);

/**
 * Register the caller's memory [@addr, @addr + @len) with @ctrl, so that commands whose buffers
 * lie inside it move data with no copy, as with nkv_buf_alloc() (e.g. a tensor arena allocated
 * by someone else). Over shm the whole pages inside the range are converted in place into a
 * registered memfd mapping (same addresses, same contents; bytes of partial pages at the ends
 * keep going through the bounce area); the memory must be private anonymous memory (malloc,
 * mmap MAP_PRIVATE|MAP_ANONYMOUS) that no other thread touches during the call, and it stays
 * shared with any child forked later. A range without a whole page registers nothing (and
 * succeeds). Over TCP nothing needs registering: 0 (nkv_buf_unregister too).
 * @return 0, -EINVAL (NULL, zero length, not anonymous private memory), -EEXIST (overlaps a
 * registered buffer), -ENOSPC (the controller's registration limits), -ENOMEM.
 */
NKV_API int nkv_buf_register(struct nkv_ctrl *ctrl, void *addr, size_t len);
/**
 * Undo nkv_buf_register() for the region starting at @addr (the memory stays mapped, with its
 * contents, at the same addresses). No command may still use it.
 * @return 0, -ENOENT (not registered), -EBUSY (the controller still uses it). A controller that is
 * gone (the target restarted, the engine reconnecting) uses nothing: 0.
 */
NKV_API int nkv_buf_unregister(struct nkv_ctrl *ctrl, void *addr);

/**
 * Re-authenticate the admin queue: a new DH-HMAC-CHAP transaction with the secrets given at connect
 * (the queue stays usable meanwhile; Keep Alive waits for it). Any thread.
 * @return 0, -ENOKEY (connected without a secret), -EOPNOTSUPP (shm), or nkv_connect()'s
 * authentication errors; a refused re-authentication ends the association on the target.
 */
NKV_API int nkv_ctrl_reauth(struct nkv_ctrl *ctrl);

/** Re-authenticate I/O queue pair @qp, from the thread that owns it. @return as nkv_ctrl_reauth(). */
NKV_API int nkv_qpair_reauth(struct nkv_qpair *qp);

/** Delete all queue pairs, disconnect and free the controller. NULL is a no-op. */
NKV_API void nkv_disconnect(struct nkv_ctrl *ctrl);

/** A discovery log entry, decoded. */
struct nkv_disc_entry {
	uint8_t trtype, adrfam, subtype, treq;
	uint16_t portid, cntlid, asqsz;
	char trsvcid[33];
	char traddr[257];
	char subnqn[257];
};

/**
 * Read the discovery log from the discovery controller at @traddr:@trsvcid (NULL: NKV_DISCOVERY_PORT).
 * On success *entries is malloc'ed (free() it) and holds *n entries.
 * @return 0 or -errno as nkv_connect().
 */
NKV_API int nkv_discover(const char *traddr, const char *trsvcid, const struct nkv_conn_opts *opts,
		 struct nkv_disc_entry **entries, unsigned *n);

/** The well-known discovery port (NVMe/TCP), where a host looks when it was given no port. */
#define NKV_DISCOVERY_PORT "8009"

/**
 * Find the subsystem a host means when it names none, the same way in every client: read the
 * discovery log at @traddr:@trsvcid (the port the host was given: every rados-nkv listener serves
 * discovery), or at NKV_DISCOVERY_PORT over plain TCP when @trsvcid is NULL or "", and take the one
 * NVMe/TCP subsystem it lists (with @opts->tls one whose port requires TLS, without one whose port
 * does not; either when none fits). A log that lists more than one is -ENOTUNIQ, never "the first":
 * that default would move to another subsystem when an administrator adds one.
 * @sub: out, the chosen entry (subnqn, trsvcid) on success, the first candidate on -ENOTUNIQ.
 * @entries, @n: NULL, or out: the whole log (free() it), on success, -ENOENT and -ENOTUNIQ.
 * @return 0; -ENOENT (no NVMe/TCP subsystem listed), -ENOTUNIQ (several: name one), or
 * nkv_discover()'s errors (-ECONNREFUSED: nothing listening there). Thread-safe.
 */
NKV_API int nkv_discover_subsys(const char *traddr, const char *trsvcid, const struct nkv_conn_opts *opts,
				struct nkv_disc_entry *sub, struct nkv_disc_entry **entries, unsigned *n);

/** Identify Controller data (4096 bytes) read at connect time. */
NKV_API const struct nkv_id_ctrlr *nkv_ctrl_identify(const struct nkv_ctrl *ctrl);
/** CNTLID the target assigned. */
NKV_API uint16_t nkv_ctrl_cntlid(const struct nkv_ctrl *ctrl);

/**
 * Active KV namespace IDs (Identify CNS 07h, CSI 01h) into @nsids (up to @max).
 * @return the number of IDs (may exceed @max: only @max were stored), or -errno.
 */
NKV_API int nkv_ns_list(struct nkv_ctrl *ctrl, uint32_t *nsids, unsigned max);

/**
 * Identify KV namespace (CNS 05h, CSI 01h). @return 0 or -errno (-ENOENT: no such namespace, or an
 * inactive NSID, which the controller answers with zeros).
 */
NKV_API int nkv_ns_identify(struct nkv_ctrl *ctrl, uint32_t nsid, struct nkv_id_ns_kv *id);

/**
 * Run an admin command synchronously (any thread). @buf/@len: data buffer, direction from the
 * opcode (bit 0 host-to-controller). The CID is assigned by the library.
 * @return as the KV calls: 0, the errno of a failed NVMe status, or a transport -errno.
 */
NKV_API int nkv_admin(struct nkv_ctrl *ctrl, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cpl *cpl);

/**
 * Create an I/O queue pair (TCP: a new connection with its own Connect; shm: rings in registered
 * memory, then Create I/O CQ and Create I/O SQ on the admin queue). @depth 0: opts.queue_depth.
 * @return 0, -ENOSPC (the controller granted no more queues), or -errno as nkv_connect().
 */
NKV_API int nkv_qpair_create(struct nkv_ctrl *ctrl, uint16_t depth, struct nkv_qpair **out);
/** Wait (bounded by timeout_ms) for outstanding commands, then close the queue (shm: Delete I/O SQ
 *  then Delete I/O CQ). */
NKV_API void nkv_qpair_destroy(struct nkv_qpair *qp);
/** Queue entries usable for commands (the Connect SQSIZE + 1). */
NKV_API uint16_t nkv_qpair_depth(const struct nkv_qpair *qp);
/** Commands submitted and not completed. */
NKV_API unsigned nkv_qpair_outstanding(const struct nkv_qpair *qp);

/** Completion callback: runs inside nkv_qpair_poll() on the queue pair's thread. */
typedef void (*nkv_cb)(void *arg, const struct nkv_cpl *cpl);

/**
 * Queue a raw command (passthrough). The library sets the CID and the data pointer (TCP: an SGL;
 * shm: PRP1/PRP2/PRP list, PSDT 00b, FUSE 0); @buf must stay valid until the callback runs.
 * Nothing is sent until nkv_qpair_poll() or nkv_qpair_flush() runs (shm: one doorbell write per batch).
 * Over shm PRPs carry no length, so a buffer shorter than the command's own transfer (Store Value
 * Size, Retrieve/List Host Buffer Size, Identify 4096, Get Log Page NUMD) is refused with -EINVAL
 * before anything is sent, as is one above the controller's MDTS.
 * @return 0, -EAGAIN (queue full or bounce area busy: poll first), -ENOTCONN (queue failed), -EINVAL.
 */
NKV_API int nkv_submit(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, nkv_cb cb, void *arg);

/** Send what is queued (without waiting for completions). @return 0 or -errno. */
NKV_API int nkv_qpair_flush(struct nkv_qpair *qp);

/**
 * Send queued commands, receive PDUs, run callbacks. @timeout_ms: 0 never waits, < 0 waits for at
 * least one completion, > 0 waits up to that long for one.
 * @return completions run (>= 0), or -errno when the connection failed; every outstanding command
 * then completes with status NKV_STATUS_HOST_PATH (SCT 3h / SC 70h, Host Pathing Error, as the Linux
 * host reports a lost connection): it may or may not have executed on the target.
 */
NKV_API int nkv_qpair_poll(struct nkv_qpair *qp, int timeout_ms);

/*
 * ---- asynchronous KV commands (completion via @cb; buffers live until then) ----------------------
 * Each queues one command like nkv_submit() and returns 0, -EINVAL (key of 0 or > 16 bytes, NULL
 * buffer with a nonzero length), -EAGAIN (queue full) or -ENOTCONN. The callback's cpl->dw0 is the
 * full value size for Retrieve and cpl->xfer the bytes received. A callback may submit new commands
 * but must not call nkv_qpair_poll() or a synchronous call on the same queue pair.
 */
NKV_API int nkv_store_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
		    uint32_t len, unsigned opts, nkv_cb cb, void *arg);
NKV_API int nkv_retrieve_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, void *buf,
		       uint32_t len, nkv_cb cb, void *arg);
NKV_API int nkv_delete_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, nkv_cb cb, void *arg);
NKV_API int nkv_exist_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, nkv_cb cb, void *arg);

/**
 * Queue a Retrieve Range (nkv_spec.h, opcode F2h): up to @len bytes of the value starting at byte
 * @offset into @buf. cpl->dw0 is the full value size, cpl->xfer the bytes received (0 when @offset
 * is at or past the end, which is a success). Over shm @buf must hold @len bytes: the target may
 * fill all of them (PRPs carry no length). @return as the other asynchronous calls.
 */
NKV_API int nkv_retrieve_range_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen,
			     uint64_t offset, void *buf, uint32_t len, nkv_cb cb, void *arg);

/**
 * Queue a vendor Exec (an allowlisted RADOS class method run next to the data; nkv_spec.h "vendor
 * Exec"), as nkv_vendor_exec() describes, completing through @cb: on success cpl->dw0 is the
 * method's full output length and cpl->xfer the bytes placed in @out. Decode a failed completion
 * with nkv_cpl_errno() rather than nkv_status_errno(): Method Failed (C1h) carries the method's
 * errno in DW0. @in and @out must stay valid until @cb runs.
 * @return 0, -EINVAL (bad key, opcode or buffers, as for nkv_vendor_exec()), -EAGAIN, -ENOTCONN.
 */
NKV_API int nkv_vendor_exec_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint8_t opc,
			  const void *in, uint32_t in_len, void *out, uint32_t out_len, nkv_cb cb, void *arg);

/* ---- synchronous KV commands ------------------------------------------------------------------- */

/**
 * Store @len bytes under @key (1..16 bytes). @opts: NKV_STORE_MUST_EXIST / NKV_STORE_MUST_NOT_EXIST.
 * @return 0, -ENOENT (must-exist and absent), -EEXIST (must-not-exist and present), -EFBIG (value
 * over the namespace's limit), -EROFS (read-only namespace), -ENOSPC, -EAGAIN (namespace not
 * ready: retry), or a transport -errno.
 */
NKV_API int nkv_store(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
	      uint32_t len, unsigned opts, struct nkv_cpl *cpl);

/**
 * Store with a time to live (Store TTL, nkv_spec.h opcode F1h; docs/cache.md): as nkv_store(), on a
 * cache namespace. @ttl_s: seconds (NKV_TTL_DEFAULT 0: the namespace's default, NKV_TTL_NONE: never
 * expires); @pin: an explicit entry, never evicted until it expires, counted against the pin quota.
 * On success @cpl->dw0 is the TTL the entry got: seconds, NKV_TTL_NONE for never (the namespace's
 * default for NKV_TTL_DEFAULT; its max_ttl where that cut the TTL asked for; 0: an older target that
 * does not say).
 * @return as nkv_store(), and -ENOSPC for a pin past the quota (the value is not stored), -EINVAL
 * (Invalid Field: not a cache namespace, or a pin without a finite TTL), -EOPNOTSUPP (a target
 * without Store TTL: Invalid Command Opcode). To name the entry by the serving engine's block hash
 * in the gateway's KV events, build the command with nkv_sqe_store_ttl() and
 * nkv_sqe_set_block_hash() and send it with nkv_exec() (the engine: NKV_OP_HASH).
 */
NKV_API int nkv_store_ttl(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, const void *val,
			  uint32_t len, unsigned opts, uint32_t ttl_s, bool pin, struct nkv_cpl *cpl);
/** Queue a Store TTL (see nkv_store_ttl()); returns as the other asynchronous calls. */
NKV_API int nkv_store_ttl_async(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen,
				const void *val, uint32_t len, unsigned opts, uint32_t ttl_s, bool pin, nkv_cb cb,
				void *arg);

/**
 * Retrieve into @buf (@len bytes). *@value_size (if not NULL) gets the value's full size (CQE DW0),
 * which may exceed @len: then @len bytes were returned. @return 0, -ENOENT, or -errno.
 */
NKV_API int nkv_retrieve(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, void *buf,
		 uint32_t len, uint32_t *value_size, struct nkv_cpl *cpl);

/**
 * Retrieve up to @len bytes of the value starting at byte @offset (Retrieve Range, F2h): bytes
 * [@offset, min(@offset + @len, value size)) land at @buf. *@xfer (if not NULL) gets the bytes
 * moved (0 when @offset is at or past the end: still success), *@value_size (if not NULL) the full
 * value size (CQE DW0). @len 0 probes the size. @return 0, -ENOENT (absent key), -EINVAL (key of 0
 * or > 16 bytes, NULL @buf with a nonzero @len), -EOPNOTSUPP (a target without Retrieve Range:
 * Invalid Command Opcode), or -errno as nkv_retrieve().
 */
NKV_API int nkv_retrieve_range(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint64_t offset,
		       void *buf, uint32_t len, uint32_t *xfer, uint32_t *value_size, struct nkv_cpl *cpl);

/**
 * Run vendor Exec opcode @opc (80h-EFh) on @key (1..16 bytes): the target runs the RADOS class
 * method that namespace @nsid allowlists for @opc on the key's object. The opcode's bits 1:0 say
 * what moves, and so what @in and @out are:
 *   00b  no data: @in holds 0 to 8 inline input bytes (CDW12-13); @out must be NULL/0;
 *   01b  host to controller: @in is the input buffer (@in_len bytes, CDW10); @out must be NULL/0;
 *   10b  controller to host: @in holds 0 to 8 inline bytes; @out receives up to @out_len bytes of
 *        output (CDW10; 0 probes the output length without moving any);
 *   11b  refused (-EINVAL): one NVMe data pointer cannot move data both ways.
 * *@out_size (if not NULL) gets CQE DW0 on success: the full output length, which may exceed
 * @out_len (then only @out_len bytes were returned; the method is not re-run, it may have side
 * effects). Over shm, @out and @in must be at least their lengths (PRPs carry none).
 * @return 0; -EINVAL (key of 0 or > 16 bytes, opcode below 80h, a built-in vendor opcode (F0h-FFh,
 * nkv_spec.h; Retrieve Range has nkv_retrieve_range()) or direction 11b, more than 8
 * inline bytes, a buffer the direction does not use, NULL with a nonzero length); -EOPNOTSUPP when
 * the namespace does not allowlist @opc (Invalid Command Opcode, 01h) or the OSD lacks the class
 * or method (C0h; cpl->status tells which); the method's own -errno when it failed (C1h, errno in
 * DW0; -EIO if DW0 holds none); or any other -errno as nkv_store(). Same queue pair thread rules.
 */
NKV_API int nkv_vendor_exec(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, uint8_t opc,
		    const void *in, uint32_t in_len, void *out, uint32_t out_len, uint32_t *out_size,
		    struct nkv_cpl *cpl);

/** @return 0, -ENOENT (absent), or -errno. */
NKV_API int nkv_delete(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, struct nkv_cpl *cpl);
/** @return 0 (exists), -ENOENT (absent), or -errno. */
NKV_API int nkv_exist(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, struct nkv_cpl *cpl);

/**
 * List keys >= @key (klen 0: from the start) in ascending byte order into @buf (the raw List data:
 * a 4-byte count, then entries of a 2-byte length and the key padded to 4 bytes). Use
 * nkv_list_next() to walk it. @return 0 or -errno.
 */
NKV_API int nkv_list(struct nkv_qpair *qp, uint32_t nsid, const void *key, unsigned klen, void *buf, uint32_t len,
	     struct nkv_cpl *cpl);

/**
 * Walk a List buffer of @len bytes (pass cpl.xfer, the bytes received): *@pos is an opaque cursor
 * that starts at 0 (it holds the next entry's offset and the entries already returned, so the walk
 * ends after NRK entries whatever the rest of the buffer holds).
 * @return 1 with @key/@klen set, 0 at the end, -EPROTO if the buffer is malformed (an entry with
 * KL 0 or > 16, or one that runs past @len).
 */
NKV_API int nkv_list_next(const void *buf, uint32_t len, uint64_t *pos, uint8_t key[16], unsigned *klen);

/**
 * Run one raw command synchronously on a queue pair (submit, then poll until it completes or
 * opts.timeout_ms passes). On timeout the queue pair is failed (closed; every outstanding command
 * completes with NKV_STATUS_HOST_PATH), because the target could still write into @buf later.
 * @return as nkv_store() (the errno of nkv_cpl_errno()); -ETIMEDOUT on timeout; the connection's -errno (e.g. -EPROTO,
 * -ECONNRESET) if it failed.
 */
NKV_API int nkv_exec(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cpl *cpl);

/*
 * ---- engine: many commands in flight on several queue pairs, from any thread ------------------
 * An engine owns @queues I/O queue pairs of one controller, each driven by its own thread. Callers
 * on any thread hand it batches of struct nkv_op; it spreads them over the queues, keeps up to
 * each queue's depth in flight, and reports each batch's completion either to the thread waiting in
 * nkv_engine_run() or through nkv_engine_reap() and an eventfd (for event loops: asyncio,
 * LMCache's native plugin, NIXL's poll). Every op has a deadline (opts.timeout_ms from its
 * submission): an op still unanswered then fails its queue pair (the target could otherwise still
 * write into the buffer later), completes with -ETIMEDOUT, and the engine opens a new queue pair.
 *
 * Lost connections and restarted targets: the engine recovers by itself, without a new engine or
 * controller handle.
 * - A queue pair that fails (connection lost, target gone) completes the ops that were in flight on
 *   it with status NKV_STATUS_HOST_PATH (Host Pathing Error, SCT 3h SC 70h, DNR clear) and rc
 *   -ENOTCONN: retryable, but they may or may not have run (a Store may or may not be stored; a
 *   Retrieve's buffer holds nothing to trust). No op is ever reported successful without its CQE.
 * - The engine opens a new queue pair at once; when the controller refuses or is unreachable (a
 *   restarted target does not know the old controller ID; over shm the controller died with its
 *   socket), it replaces the whole association of @ctrl in place: a new admin queue, Connect with the
 *   dynamic controller ID FFFFh (shm: a new HELLO), CC.EN, Identify, Number of Queues, Keep Alive,
 *   the shm buffers of nkv_buf_alloc()/nkv_buf_register() registered again, then new I/O queue
 *   pairs. Tries are spaced reconnect_min_ms, doubling up to reconnect_max_ms, for as long as it
 *   takes. While idle the engine watches its connections, so a restart is repaired before the next op.
 * - Ops not yet sent (submitted while the controller is away, or queued behind a full queue) are
 *   kept and sent as soon as the controller is back; one that waits longer than reconnect_wait_ms
 *   completes with -EAGAIN and status 0: it never reached a controller, safe to retry as is.
 * - Meanwhile admin calls on @ctrl from other threads fail (-ENOTCONN). The reconnect needs the
 *   engine's queue pairs to be @ctrl's only ones (with others from nkv_qpair_create(), it retries
 *   until they are destroyed); CUDA regions (nkv_shm_reg_cuda()) are not registered again.
 */
struct nkv_engine;

enum nkv_op_type {
	NKV_OP_STORE = 1,    /* store @len bytes of @buf (opts: NKV_STORE_*; ttl_s/flags: Store TTL) */
	NKV_OP_RETRIEVE = 2, /* read up to @len bytes into @buf, from byte @offset (nonzero: Retrieve Range) */
	NKV_OP_DELETE = 3,
	NKV_OP_EXIST = 4,
	NKV_OP_LIST = 5,     /* keys >= @key (klen 0: from the start) into @buf, as nkv_list() */
	NKV_OP_EXEC = 6,     /* vendor Exec, as nkv_vendor_exec(): @opts the opcode (80h-EFh); @buf/@len
			      * the input (direction 01b) or output (10b) buffer; @offset the 0 to 8
			      * inline input bytes (its memory image; directions 00b and 10b), @ttl_s how
			      * many; value_size gets DW0 (the full output length). NKV_OP_IDEMPOTENT
			      * lets a multipath engine send it again (below) */
};

#define NKV_OP_PIN 0x1u /* nkv_op.flags: a pinned (explicit) Store TTL */
/* nkv_op.flags: STORE: @offset is the serving engine's block hash of the value (a Store TTL with
 * NKV_TTL_HASH, so a cache namespace only): the gateway names the entry by it in its KV events. */
#define NKV_OP_HASH 0x2u
/* nkv_op.flags: EXEC: the method may run twice with the same effect as once (a read, a set to a
 * value), so a multipath engine may send it again on another path when the first one was lost
 * (docs/exec.md "Retries"). Without it, an Exec that may have run is failed, never sent again. */
#define NKV_OP_IDEMPOTENT 0x4u

/** One command of a batch. The caller owns it (and @buf) until its batch completes. */
struct nkv_op {
	/* in */
	uint8_t type;        /* enum nkv_op_type */
	uint8_t klen;        /* 1..16 (LIST: 0..16) */
	uint8_t opts;        /* STORE: NKV_STORE_* options */
	uint8_t flags;       /* STORE: NKV_OP_PIN, NKV_OP_HASH; EXEC: NKV_OP_IDEMPOTENT */
	uint32_t nsid;
	uint8_t key[16];
	void *buf;
	uint32_t len;
	uint32_t ttl_s;      /* STORE: time to live (NKV_TTL_*); with NKV_OP_PIN or nonzero, a Store TTL;
			      * EXEC: inline input bytes in @offset (0..8) */
	uint64_t offset;     /* RETRIEVE: byte offset into the value; STORE with NKV_OP_HASH: the block hash;
			      * EXEC: the inline input bytes */
	uint64_t user;       /* the caller's; untouched */
	/* out, valid once the batch completed */
	int32_t rc;          /* 0 or -errno as nkv_cpl_errno(): -ENOENT for a missing key, ... */
	uint16_t status;     /* NVMe status (SCT << 8 | SC), NKV_STATUS_HOST_PATH for a lost queue */
	uint16_t retries;    /* a multipath engine: times the op was sent again after a path failed */
	uint32_t value_size; /* RETRIEVE: the full value size (CQE DW0); Store TTL: the TTL applied (DW0) */
	uint32_t xfer;       /* RETRIEVE, LIST: bytes moved into @buf */
};
NKV_SIZE(struct nkv_op, 72); /* a fixed layout: bindings (Python ctypes) mirror it */

/** Engine options; zeroed fields take the defaults noted. */
struct nkv_engine_opts {
	unsigned queues;     /* I/O queue pairs (and threads); 0: 4, at most what the controller grants */
	uint16_t depth;      /* entries per queue pair; 0: the connection's queue_depth */
	int timeout_ms;      /* per-op deadline; 0: the connection's timeout_ms */
	unsigned max_ops;    /* ops accepted and not yet completed, in all; 0: 65536 (-EAGAIN beyond) */
	/* A lost controller (see above): */
	int reconnect_min_ms;  /* first retry; 0: 50 (< 0: -EINVAL) */
	int reconnect_max_ms;  /* backoff cap, the longest gap between tries; 0: 1000 (< 0: -EINVAL) */
	int reconnect_wait_ms; /* how long an unsent op waits for it before -EAGAIN; 0: timeout_ms;
				* < 0: not at all (fail fast while it is away) */
};

/**
 * Create an engine over @ctrl (which must outlive it; the engine reconnects it in place when it is
 * lost). @opts may be NULL.
 * @return 0, -EINVAL (a negative reconnect_min_ms or reconnect_max_ms), -ENOSPC (no I/O queue
 * could be created), or -errno as nkv_qpair_create().
 */
NKV_API int nkv_engine_create(struct nkv_ctrl *ctrl, const struct nkv_engine_opts *opts, struct nkv_engine **out);
/** Wait for every accepted op to complete (each within its deadline), stop the threads, close
 *  the queue pairs and free the engine. Batches completed and not reaped are dropped. NULL: no-op. */
NKV_API void nkv_engine_destroy(struct nkv_engine *e);
/**
 * Submit @n ops as one batch named @tag (any value; the caller's). When every op completed, @tag
 * is queued for nkv_engine_reap() and the eventfd becomes readable. Any thread.
 * @return 0 (each op's outcome is in its rc), -EINVAL (n == 0, or an op with a bad type, key length
 * or buffer, flag bits other than NKV_OP_PIN/NKV_OP_HASH, or flags/ttl_s on an op other than STORE: nothing is
 * submitted and that op's rc says -EINVAL), -EAGAIN (max_ops reached),
 * -ESHUTDOWN (the engine is being destroyed).
 */
NKV_API int nkv_engine_submit(struct nkv_engine *e, struct nkv_op *ops, unsigned n, uint64_t tag);
/**
 * Submit @n ops and wait for all of them (any thread; several threads may run batches at once).
 * A small batch (one op, or up to 64 ops and 256 KiB) runs on the calling thread when one of the
 * engine's queue pairs is idle: the caller drives that queue pair itself (one thread at a time on
 * it still), with the same deadline and recovery, and no hand-off to the queue's thread and back.
 * @return the number of ops that failed (rc != 0; a miss counts), or -errno as nkv_engine_submit().
 */
NKV_API int nkv_engine_run(struct nkv_engine *e, struct nkv_op *ops, unsigned n);
/**
 * Take the tags of up to @max completed batches of nkv_engine_submit(), oldest first, waiting up to
 * @timeout_ms for the first (0: no wait, < 0: forever). The eventfd is readable while any remain.
 * While it waits, the calling thread drives the queue pairs that hold ops itself (sends what was
 * submitted, polls, completes), as a thread polling a bare queue pair would; their threads take them
 * back about a millisecond after the last waiting reap returned, so an op submitted after it
 * completes without another reap. A small batch goes to the submitting thread's own queue pair
 * (while it has room), so one thread's stream of small ops stays on one queue.
 * @return the number of tags stored (0 on timeout), or -EINVAL.
 */
NKV_API int nkv_engine_reap(struct nkv_engine *e, uint64_t *tags, unsigned max, int timeout_ms);
/** An eventfd (EFD_NONBLOCK) readable while completed batches wait in nkv_engine_reap(); do not
 *  read or close it. */
NKV_API int nkv_engine_eventfd(const struct nkv_engine *e);
/** Queue pairs the engine drives (opts.queues, clamped to what the controller granted). */
NKV_API unsigned nkv_engine_queues(const struct nkv_engine *e);

/*
 * ---- multipath: one engine over several paths to one subsystem --------------------------------
 * A subsystem served by several gateways (a gateway group: the same subsystem NQN and namespaces
 * on every gateway) is reached through several paths, one controller each. nkv_engine_connect()
 * connects them all and returns one engine that takes the same batches as any other
 * (nkv_engine_submit/run/reap/eventfd), and:
 * - sends I/O to the first path, in the order given, whose controller is up and whose namespace is
 *   ANA Optimized (a controller without ANA reporting, CMIC bit 3 clear, counts as Optimized); Non-
 *   Optimized paths only when no Optimized one is up; never to an Inaccessible, Persistent Loss or
 *   Change one. The ANA log page (0Ch) of each path is read at connect and every second after;
 * - keeps every path connected: each has an engine of its own that reconnects a lost controller with
 *   backoff (reconnect_min_ms .. reconnect_max_ms); a path not reachable at connect is connected in
 *   the background with the same backoff;
 * - on a path error (Host Pathing Error, -ENOTCONN: the connection went with the op in flight;
 *   -ETIMEDOUT on that path; -EAGAIN with status 0: never sent; an ANA status, SCT 3h SC 01h-03h)
 *   stops using that path for a while (reconnect_min_ms, doubling to reconnect_max_ms while it keeps
 *   failing) and sends the op again on another path, if its kind allows and its deadline
 *   (timeout_ms from its submission) has not passed. nkv_op.retries counts those resends. An op
 *   that finds no usable path waits for one until its deadline, then completes with its last path
 *   error (-ENOTCONN: it may have run; -EAGAIN: it never reached a controller); with
 *   reconnect_wait_ms < 0 it does not wait. The application sees no error unless every path stays
 *   gone past the deadline. Over the last try's own path, an op keeps that path's deadline, so an
 *   op completes within twice timeout_ms at worst.
 * - What is sent again (docs/multipath.md "Retries"): Store, Store TTL, Retrieve, Exist, List and
 *   Delete, which a second run leaves as one run would (a Store writes the whole value under its key):
 *   the op reports the answer of its last run. So a Delete whose first run was lost after it
 *   removed the key reports -ENOENT with retries > 0, and a Store with NKV_STORE_MUST_NOT_EXIST
 *   -EEXIST: the key is gone, or present, either way. An Exec is sent again only with
 *   NKV_OP_IDEMPOTENT, or when it surely did not run (never sent; an ANA status, which the
 *   controller returns without running it); otherwise it completes with -ENOTCONN, status
 *   NKV_STATUS_HOST_PATH (DNR clear: the caller decides).
 * Buffers from nkv_buf_alloc()/nkv_buf_register() belong to one controller (nkv_engine_ctrl(e, 0));
 * over TCP that changes nothing, over shm the other paths copy through their bounce areas.
 */

/**
 * Connect to every path of @paths and start a multipath engine over them (see above).
 * @paths: one path, or several separated by commas, each as the nkv CLI and Python's connect() take
 * a target: "HOST:PORT", "[IPv6]:PORT", "HOST" (port 4420, or the discovery log's),
 * "shm:/path/to/socket" or "vfio-user:/path/to/socket" (socket paths without commas); at most
 * NKV_ENGINE_PATHS_MAX.
 * @subnqn: the subsystem; NULL: read the discovery log at the first path that answers (its PORT, or
 * NKV_DISCOVERY_PORT without one), take the one subsystem it lists (nkv_discover_subsys()), and add
 * every other NVMe/TCP entry it lists for that subsystem as a path (so one gateway's discovery log
 * names the whole group; wildcard addresses such as 0.0.0.0 are skipped, the path given covers them).
 * @copts, @eopts: as nkv_connect() and nkv_engine_create(), for every path (each path's engine has
 * eopts->queues queue pairs). Either may be NULL.
 * @return 0 when at least one path connected (the others are connected in the background);
 * -EINVAL (an empty or malformed list, a bad port, more than NKV_ENGINE_PATHS_MAX paths, a negative
 * backoff), nkv_discover_subsys()'s errors, or the first path's nkv_connect() error when none
 * connected. nkv_engine_destroy() disconnects every path.
 */
NKV_API int nkv_engine_connect(const char *paths, const char *subnqn, const struct nkv_conn_opts *copts,
			       const struct nkv_engine_opts *eopts, struct nkv_engine **out);
#define NKV_ENGINE_PATHS_MAX 16

/** Paths of a multipath engine (nkv_engine_connect()); 1 for an engine of nkv_engine_create(). */
NKV_API unsigned nkv_engine_paths(const struct nkv_engine *e);

/**
 * The controller of path @i of a multipath engine (for admin calls, nkv_ns_identify(),
 * nkv_buf_alloc()), or NULL: @i out of range, or the path has not connected yet. Index 0 of an
 * engine of nkv_engine_create() is its controller. The engine owns it: do not disconnect it.
 */
NKV_API struct nkv_ctrl *nkv_engine_ctrl(const struct nkv_engine *e, unsigned i);

/**
 * The path the engine sends new I/O for @nsid to now (the index into @paths), or -ENOTCONN when
 * no path is usable. For monitoring and tests. @return the index, -ENOTCONN, or -EINVAL.
 */
NKV_API int nkv_engine_path_active(const struct nkv_engine *e, uint32_t nsid);

/*
 * ---- long names: keys longer than 16 bytes ------------------------------------------------------
 * Frameworks key their objects by names far longer than a KV key (LMCache's
 * "model@world@worker@hash@dtype", object names). The scheme: the key is the first 16 bytes of
 * SHA-256(name), and the value starts with a header carrying the whole name, so a reader tells a
 * hash collision or a foreign object under the same key from a hit (and treats it as a miss):
 *
 *   bytes 0-3   magic "NKVL"          bytes 4-5  header size H (little endian; multiple of 8)
 *   byte  6     version (1)           byte  7    flags (0)
 *   bytes 8-15  payload length (LE)   bytes 16-17 name length N (LE), 18-23 zero
 *   bytes 24..  the name, zero padded to H;  then the payload at byte H.
 *
 * H depends only on N, so a reader that knows the name can read the header and the payload at
 * once (a Retrieve Range of the payload at offset H straight into its buffer, beside a small read
 * of the header) and check the header afterwards.
 */
#define NKV_LNAME_MAX 4096u /* longest name */

/** The 16-byte key for @name (@len bytes, 1..NKV_LNAME_MAX): SHA-256's first 16 bytes. @return 0 or -EINVAL. */
NKV_API int nkv_lname_key(const void *name, size_t len, uint8_t key[16]);
/** The header size H for a name of @len bytes (0 for a bad length). */
NKV_API uint32_t nkv_lname_hdr_size(size_t len);
/** Write the header for @name and @payload_len into @buf (@buf_len >= nkv_lname_hdr_size()).
 *  @return H, or -EINVAL. */
NKV_API int nkv_lname_hdr_pack(const void *name, size_t len, uint64_t payload_len, void *buf, size_t buf_len);
/**
 * Check a value's header (its first @buf_len bytes) against @name. *@payload_len gets the payload length.
 * @return H when it is @name's header; -ENOENT when it is a valid header of another name (a hash
 * collision: a miss); -EPROTO when the bytes are no such header (a foreign object: a miss too).
 */
NKV_API int nkv_lname_hdr_check(const void *buf, size_t buf_len, const void *name, size_t len, uint64_t *payload_len);

/* ---- status helpers ----------------------------------------------------------------------------- */

/**
 * -errno for an NVMe status (SCT << 8 | SC; DNR and the other high bits are ignored); 0 for success.
 * Generic (SCT 0): 01h -EOPNOTSUPP, 02h/0Dh/0Eh/0Fh/11h/16h/18h -EINVAL, 03h/0Ch -EPROTO (the host
 * broke a rule), 04h/05h/06h -EIO, 07h/08h -ECANCELED, 0Bh -ENXIO (invalid namespace),
 * 19h -ETIMEDOUT, 20h -EROFS, 21h/22h -EAGAIN.
 * KV (SCT 0, and SCT 1 as some emulators send them): 81h -ENOSPC, 82h -EAGAIN (not ready: retry),
 * 83h/84h -EBUSY, 85h -EFBIG, 86h -EINVAL, 87h -ENOENT, 88h -EIO, 89h -EEXIST.
 * Command specific (SCT 1): 01h/02h/09h/0Dh -EINVAL, 0Eh -EPERM, 29h-2Ch -EOPNOTSUPP,
 * 80h -EPROTO, 84h -EACCES (Connect Invalid Host), 91h -EACCES. Fabrics Connect statuses are
 * decoded by nkv_connect() itself (82h on Connect is Invalid Parameters: -ENOENT for an unknown
 * SUBNQN, -EINVAL otherwise; 81h Controller Busy: -EBUSY).
 * Vendor Exec (SCT 0): C0h -EOPNOTSUPP (class or method not available on the OSD), C1h -EIO (the
 * method failed; its own errno is in DW0: nkv_cpl_errno() returns that).
 * Path (SCT 3): 60h/70h -ENOTCONN (NKV_STATUS_HOST_PATH), others -EIO. Anything unknown: -EIO.
 */
NKV_API int nkv_status_errno(uint16_t status);
/**
 * -errno for a whole completion: nkv_status_errno(cpl->status), except that Method Failed (SCT 0h
 * SC C1h) returns the method's errno from DW0, negated (-EIO when DW0 is not an errno, 1..4095).
 * The synchronous calls return this; asynchronous callbacks can use it. -EINVAL for NULL.
 */
NKV_API int nkv_cpl_errno(const struct nkv_cpl *cpl);
/** Human-readable name of an NVMe status ("Key Does Not Exist (SCT 1h SC 87h)"). Static storage. */
NKV_API const char *nkv_status_string(uint16_t status);

/**
 * The version of the libnkv actually loaded ("0.1.0"), which can differ from the NKV_VERSION_STRING
 * of the nkv_version.h a program was compiled with. Static storage; any thread.
 */
NKV_API const char *nkv_version(void);

#ifdef __cplusplus
}
#endif
#endif /* NKV_H */
