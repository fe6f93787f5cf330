/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.h - the transport-agnostic controller core: target, subsystems, namespaces, controllers,
 * queue pairs and the request lifecycle. A transport embeds struct nkv_req in its own request,
 * points data/data_len at the command's buffer and calls nkv_req_exec(); the core parses the SQE
 * (returning a status or choosing an execute function), executes it and ends every command in
 * nkv_req_complete(), which calls the transport's complete op exactly once.
 */
#ifndef NKV_CORE_H
#define NKV_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/kvdev.h"
#include "common/clock.h"
#include "nkv/nkv_spec.h"
#include "nkv/nkv_target.h"
#include "nkv/nkv_version.h"
#include "reactor/msgq.h"

#define NKV_NQN_MAX 224    /* 223 bytes + NUL */
#define NKV_AERL 3         /* 0's based: 4 Asynchronous Event Requests held */
#define NKV_KAS 10         /* keep-alive granularity, 100 ms units */
/* Identify Controller FR and the firmware slot log: the project version (CMakeLists.txt). */
#define NKV_FW_REV NKV_VERSION_STRING
_Static_assert(sizeof(NKV_FW_REV) <= 9, "the project version must fit Identify's 8-byte FR field");

/** A transport address reported in the discovery log. */
struct nkv_port {
	struct nkv_port *next;
	uint8_t trtype, adrfam;
	uint8_t treq;        /* secure channel: NKV_TREQ_REQUIRED (TLS) or _NOT_SPECIFIED (plain) */
	uint8_t sectype;     /* TSAS SECTYPE: NKV_TCP_SECTYPE_* */
	uint16_t portid;
	bool exposed;        /* a plain listener off loopback (nkv_listener_exposes) */
	char traddr[256];
	char trsvcid[32];
};

/** The transports and directions the copy counters are kept for (nkv_copy_count). */
enum nkv_xport { NKV_XPORT_TCP, NKV_XPORT_SHM, NKV_XPORT_LOOP, NKV_XPORT_COUNT };
enum nkv_xdir { NKV_XDIR_H2C, NKV_XDIR_C2H, NKV_XDIR_COUNT }; /* host to gateway (Store), back (Retrieve) */

/**
 * What the gateway does with the data of I/O-queue commands, per transport and direction (the
 * metrics' rados_nkv_data_bytes_total and rados_nkv_copied_bytes_total): @data, the bytes that
 * successful commands moved between the host and the gateway; @copied, the bytes copied from one
 * buffer into another in the gateway's memory on the way, by the gateway or by librados' C API on
 * its behalf (docs/operations.md, "Metrics", says which copies). Relaxed atomics: a few adds per
 * command; a reader gets each counter exactly, not a snapshot of all at one instant.
 */
struct nkv_copy_stats {
	atomic_uint_fast64_t data[NKV_XPORT_COUNT][NKV_XDIR_COUNT];
	atomic_uint_fast64_t copied[NKV_XPORT_COUNT][NKV_XDIR_COUNT];
};

struct nkv_target {
	const struct nkv_kvdev_ops *be;
	struct nkv_kvdev *dev;
	struct nkv_subsys *subsystems;
	struct nkv_subsys *discovery;  /* the discovery subsystem, once a fabrics transport exists */
	atomic_uint next_cntlid;
	pthread_mutex_t lock;          /* ports, the CNTLID range, and each subsystem's controller list */
	uint16_t cntlid_min, cntlid_max; /* IDs given to new controllers (0: none: Connect refused) */
	struct nkv_port *ports;
	struct nkv_port *peer_ports;   /* other gateways' listeners of the group (discovery log only) */
	_Atomic uint8_t ana_state[NKV_ANA_GROUPS + 1]; /* per ANA group 1..32: enum nkv_ana_state */
	_Atomic uint64_t ana_chgcnt;   /* ANA log CHGCNT: moves on every state change */
	_Atomic uint64_t genctr;       /* discovery log generation: bumped on every change */
	pthread_t stats_thread;        /* refreshes namespace usage every stats_ms */
	pthread_cond_t stats_cv;
	unsigned stats_ms;
	bool stats_stop;
	atomic_uint auth_seq;          /* DH-HMAC-CHAP S1: random start, never 0 (auth.c) */
	struct nkv_dh_pool *dh;        /* DH-HMAC-CHAP's DH workers and token buckets (auth_dh.c) */
	char gateway[128];             /* this gateway's name (cache shares, the eviction lease) */
	pthread_t cache_thread;        /* evicts, expires and shares usage of cache namespaces (cache.c) */
	pthread_cond_t cache_cv;
	bool cache_stop;
	atomic_bool cache_quit;        /* cache_stop, read without the lock: a tick skips its cluster calls */
	atomic_uint caches;            /* cache namespaces open: the thread idles without */
	nkv_cache_event_cb cache_cb;   /* evictions and expiries reported to it */
	void *cache_cb_arg;
	struct nkv_transport_reg *transports; /* running transports' gauges (lock) */
	struct nkv_copy_stats copies;  /* data moved and copied per transport (nkv_copy_count) */
};

/** One allowlisted vendor opcode, as the core keeps it (see struct nkv_exec_rule). */
struct nkv_exec_entry {
	uint8_t opc;
	bool write, create;
	bool append;        /* the host's input follows the bound input (declared by the rule) */
	uint8_t form;       /* how the method's input is built (enum nkv_exec_form) */
	char cls[64], method[64];
	uint8_t *input;     /* bound input; for a Lua script rule, the encoded script and handler */
	uint32_t input_len, max_input;
};

/** How an Exec command's input is built from the rule's bound input and the host's bytes. */
enum nkv_exec_form {
	NKV_EXEC_RAW,      /* the bound input, or the host's, or (append) the bound input then the host's */
	NKV_EXEC_LUA_JSON, /* lua.eval_json: {"script", "handler", "input": the host's bytes as a JSON string} */
	NKV_EXEC_LUA_BL,   /* lua.eval_bufferlist: cls_lua_eval_op, Ceph-encoded, the host's bytes its input */
};

/** A namespace's Exec allowlist: immutable once published; replaced whole (nkv_ns_set_exec) and
 *  freed when the last command parsed with it ends (refs: one for being published, one per command). */
struct nkv_exec_table {
	atomic_uint refs;
	struct nkv_exec_entry *by_opc[128];  /* by opcode - 80h; NULL: not allowlisted */
	unsigned n;
	struct nkv_exec_entry e[];
};

/** Per-namespace command counters (this gateway), updated at completion with relaxed atomics: the
 *  metrics snapshot (nkv_target_metrics) and nkv_ns_stats() add them up. */
struct nkv_ns_counters {
	atomic_uint_fast64_t cmds[NKV_MOP_COUNT][NKV_MST_COUNT];
	atomic_uint_fast64_t bytes_written[NKV_MOP_COUNT], bytes_read[NKV_MOP_COUNT];
	atomic_uint_fast64_t lat[NKV_MLAT_COUNT][NKV_MLAT_BUCKETS];
	atomic_uint_fast64_t lat_sum_ns[NKV_MLAT_COUNT];
};

/** A transport's gauges, registered with its target so that a metrics reader finds every transport
 *  (even one started later by the control plane) and never reads one being freed. */
struct nkv_transport_reg {
	struct nkv_transport_reg *next;
	const char *name;
	/** Fill @m but its name (any thread, under tgt->lock): relaxed loads only, never blocks. */
	void (*read)(void *arg, struct nkv_transport_metrics *m);
	void *arg;
};

struct nkv_ns {
	uint32_t nsid;
	struct nkv_kvns *kvns;
	uint64_t max_value;       /* KVVML actually enforced */
	bool read_only;
	struct nkv_kvns_info info; /* limits and backend identity read when the namespace was added */
	uint8_t nguid[16];        /* namespace IDs (nkv_ns_ids): unique per NSID, the same on every gateway */
	uint8_t uuid[16];
	uint8_t eui64[8];
	_Atomic uint64_t used, capacity; /* refreshed by the target's stats thread (NUSE, NSZE) */
	_Atomic(struct nkv_exec_table *) exec; /* the Exec allowlist; NULL: none (release-published) */
	atomic_uint exec_readers;  /* threads between loading exec and counting their reference */
	unsigned exec_version;     /* allowlists published so far (the configuring thread's; logs) */
	/* Live removal (live.c): commands hold the namespace from parse to completion (nkv_ns_get). A
	 * removed namespace is unpublished, drained to 0, then its backend handle closed; the struct
	 * stays in its subsystem's slot for the NSID (never freed while hosts may hold a stale pointer). */
	atomic_uint active;
	struct nkv_ns_counters stats;
	struct nkv_cache *cache;  /* NULL: not a cache namespace (set before publication) */
	uint32_t anagrpid;        /* its ANA group (1..NKV_ANA_GROUPS), fixed while it is attached */
};

struct nkv_subsys {
	struct nkv_subsys *next;
	atomic_int refs;                          /* the target's list, each controller, each lookup */
	bool removed;                             /* unlinked by nkv_subsys_remove (tgt->lock) */
	unsigned max_ns;                          /* namespaces at most; 0: NKV_MAX_NSID */
	struct nkv_ns *slot[NKV_MAX_NSID + 1];    /* every namespace struct ever made for the NSID */
	struct nkv_target *tgt;
	char nqn[NKV_NQN_MAX];
	char pool[256];
	char sn[21];                              /* serial number shared by its controllers */
	_Atomic uint64_t max_value;               /* largest KVVML of its namespaces (drives MDTS) */
	_Atomic(struct nkv_ns *) ns[NKV_MAX_NSID + 1]; /* by NSID; published with release stores */
	bool discovery;                           /* the discovery subsystem: no namespaces, no I/O */
	char (*hosts)[NKV_NQN_MAX];               /* allowed host NQNs; none = any host */
	struct nkv_dhchap_host **dhchap;          /* per allowed host: its DH-HMAC-CHAP settings, or NULL */
	unsigned nhosts;
	bool allow_any;                           /* any host may connect (no allowlist) */
	bool loopback_only;                       /* not served through exposed listeners (tgt->lock;
						   * nkv_subsys_set_loopback_only) */
	struct nkv_ctrlr *ctrlrs;                 /* live controllers (tgt->lock) */
};

/** What a transport tells the core about itself when it creates a controller. */
struct nkv_ctrlr_opts {
	uint16_t mqes;         /* 0's based max queue entries (CAP.MQES) */
	uint16_t max_io_queues;/* I/O queue pairs the transport can serve */
	bool fabrics;          /* NVMe-oF: SGLs, IOCCSZ/IORCSZ/ICDOFF/MSDBD reported */
	uint32_t ioccsz;       /* 16-byte units */
	uint32_t iorcsz;
	uint8_t msdbd;
	const char *trname;    /* "tcp", "shm", "loop": for listings */
	bool exposed;          /* the queue came through a plain TCP listener off loopback
				* (nkv_listener_exposes): loopback-only subsystems refuse it */
	bool discovery_only;   /* it came through a discovery-only listener: only the discovery
				* subsystem may be connected */
};

struct nkv_req;

/** DH-HMAC-CHAP settings of one allowed host, immutable once hosts may connect (auth.c). */
struct nkv_dhchap_host {
	atomic_int refs;              /* the allowlist entry and each controller of the host */
	uint8_t tkey[64], tkey_len;   /* the host's secret, transformed with the host NQN */
	uint8_t tckey[64], tckey_len; /* the controller's, transformed with the subsystem NQN; 0: none */
	uint8_t hashes[3], nhashes;   /* HashIDs in order of preference */
	uint8_t groups[6], ngroups;   /* DHgIDs in order of preference */
};

struct nkv_ctrlr {
	struct nkv_subsys *ss;
	struct nkv_ctrlr *next;   /* in ss->ctrlrs */
	atomic_int refs;          /* the admin queue and each I/O queue hold one */
	atomic_bool dead;         /* association torn down: I/O queues must close */
	uint16_t cntlid;
	char hostnqn[NKV_NQN_MAX];
	uint8_t hostid[16];
	struct nkv_ctrlr_opts opts;
	enum nkv_xport xport;     /* opts.trname as an index into the copy counters */
	const struct nkv_dhchap_host *dhchap; /* set: every queue must authenticate (auth.c); a reference */
	atomic_bool auth_ok;      /* the admin queue authenticated: I/O queues may connect */
	/* properties */
	uint64_t cap;
	uint32_t vs, cc, csts;
	/* features (current values) */
	uint32_t feat_arb, feat_pm, feat_temp, feat_err;
	uint32_t aec;          /* 0Bh */
	uint32_t kato_ms;      /* 0Fh */
	uint32_t iocs_index;   /* 19h */
	uint32_t kv_config;    /* 20h */
	uint16_t nsqa, ncqa;   /* 07h granted, 0's based */
	uint8_t *qids;         /* bitmap of connected I/O queue IDs (tgt->lock) */
	/* Asynchronous Event Requests held (admin queue owner thread only) */
	struct nkv_req *aer[NKV_AERL + 1];
	unsigned naer;
	uint64_t last_keepalive_ms;
	/* Asynchronous events from other threads (live.c): the changed-namespace list (log 04h) and a
	 * pending notice, under tgt->lock; delivered on the admin queue's thread through aen_msgq. */
	uint8_t ns_changed[(NKV_MAX_NSID + 8) / 8];
	bool aen_pending;      /* a Namespace Attribute Changed notice waits for an AER */
	bool aen_masked;       /* one was sent; masked until the host reads log 04h (RAE clear) */
	bool ana_pending;      /* an ANA Change notice waits for an AER */
	bool ana_masked;       /* one was sent; masked until the host reads log 0Ch (RAE clear) */
	struct nkv_msgq *aen_msgq; /* the admin queue owner's, once it sent an AER */
	atomic_bool evict;     /* the control plane ended the association: every transport closes it */
	/* SMART counters, updated from every I/O thread */
	atomic_uint_fast64_t bytes_read, bytes_written, host_reads, host_writes, media_errors;
};

struct nkv_qpair;
struct nkv_qpair_ops {
	/** Deliver req->cpl to the host and recycle the request. Called once per command. */
	void (*complete)(struct nkv_req *req);
	/** Optional (cut-through): the first @bytes of req->data are final, send them now. Owner thread,
	 *  only before complete; @bytes grows and never reaches the command's final xfer. */
	void (*data_ready)(struct nkv_req *req, uint32_t bytes);
};

struct nkv_qpair {
	struct nkv_ctrlr *ctrlr;
	uint16_t qid;
	uint16_t size;
	const struct nkv_qpair_ops *ops;
	struct nkv_msgq *msgq; /* the owner thread's completion queue */
	bool disconnect;       /* a fabrics Disconnect completed: close the queue after its response */
	/* DH-HMAC-CHAP (auth.c), owner thread only */
	bool authenticated;    /* a transaction succeeded on this queue */
	bool auth_fatal;       /* authentication failed: end the association once the answer is sent */
	struct nkv_auth_txn *auth; /* the transaction in progress, or NULL */
	uint64_t auth_due_ms;  /* unauthenticated queue of a controller that requires it: deadline */
	uint32_t auth_timeout_ms;
	uint64_t auth_window_ms; /* start of the window counting AUTH_Negotiates (auth.c) */
	unsigned auth_starts;    /* AUTH_Negotiates in that window */
	const uint8_t *peer_addr; /* the host's IP address (16 bytes, IPv4 v4-mapped), for per-address
				   * limits; NULL where the transport has none. Set before Connect. */
};

struct nkv_req {
	struct nkv_qpair *qp;
	struct nkv_sqe cmd;
	struct nkv_cqe cpl;
	void *data;         /* transport's buffer for the command's data */
	uint32_t data_len;  /* its size */
	uint32_t length;    /* bytes the command moves, set by parse */
	uint32_t xfer;      /* bytes moved to the host (controller-to-host commands) */
	void (*execute)(struct nkv_req *req);
	struct nkv_ns *ns;
	uint64_t start_ns;  /* parse time (CLOCK_MONOTONIC): the latency metrics */
	uint32_t pin_reserved; /* pin quota bytes this Store reserved at parse (released at drop) */
	struct nkv_exec_table *exec_tbl; /* Exec: the allowlist it was parsed with (a reference; drop) */
	uint8_t *exec_in;   /* Exec: the method's input built for it (freed at drop) */
	uint32_t cap_reserved; /* hard-limit bytes this Store reserved at parse (released at drop) */
	bool key_reserved;     /* ... and one key of the hard key limit */
	struct nkv_kvio io;
};

/* ---- request lifecycle (request.c) ---- */

/**
 * Parse a command: check it against the controller state and pick its execute function. Sets
 * req->length (bytes the command moves); req->data_len must be the size the host's SGL/PRP
 * describes (the buffer itself may be placed later, before execute). @return 0 or a status.
 */
nkv_status nkv_req_parse(struct nkv_req *req);

/** Parse and execute a command whose data buffer is in place. Completion via nkv_req_complete. */
void nkv_req_exec(struct nkv_req *req);

/** The single completion exit: fill CID/SQID/status and hand the CQE to the transport. */
void nkv_req_complete(struct nkv_req *req, nkv_status st);

/**
 * A transport drops a parsed command it will never complete (its connection went, or it must wait
 * for memory and will parse it again): release what parse took (the namespace). Idempotent.
 */
void nkv_req_drop(struct nkv_req *req);

/** Count @n bytes of command data copied in the gateway's memory (any thread; relaxed). */
static inline void nkv_copy_count(struct nkv_target *t, enum nkv_xport x, enum nkv_xdir d, uint64_t n)
{
	if (n)
		atomic_fetch_add_explicit(&t->copies.copied[x][d], n, memory_order_relaxed);
}

/** The name of transport @x in the metrics' labels ("tcp", "shm", "loop"). */
const char *nkv_xport_name(enum nkv_xport x);

/** Copy controller data to the host buffer (up to req->length); records req->xfer. */
void nkv_req_copy_out(struct nkv_req *req, const void *src, uint32_t len);

/* ---- cache namespaces (cache.c) ---- */
struct nkv_cache;
/** Make @ns a cache namespace if @p (else ns->cache = NULL). @return 0, -EINVAL, -ENOMEM. */
int nkv_cache_open(struct nkv_subsys *ss, struct nkv_ns *ns, const char *rados_ns, const struct nkv_cache_policy *p);
/**
 * Start this gateway's last share write and the lease's release for @ns without waiting for them
 * (best effort: the backend's ns_close waits, each bounded by the op timeout). Calling it for every
 * namespace first, then closing them, makes a stop cost one op timeout on an unreachable cluster
 * whatever the number of namespaces. Idempotent; no-op without a cache.
 */
void nkv_cache_final(struct nkv_target *t, struct nkv_ns *ns);
/** nkv_cache_final() if not done yet, then free (before the backend handle closes). */
void nkv_cache_close(struct nkv_target *t, struct nkv_ns *ns);
/** Store and Store TTL on any namespace: TTL, pin and limits into req->io. @return 0 or a status. */
nkv_status nkv_cache_parse_store(struct nkv_req *req, uint32_t ttl_s, uint32_t flags);
/** The TTL a Store TTL gave its entry (CQE DW0 of its success): seconds, NKV_TTL_NONE for never. */
uint32_t nkv_cache_ttl_applied(const struct nkv_req *req);
/** Retrieve and Exist on a cache namespace: expiry checked, last use refreshed. */
void nkv_cache_parse_read(struct nkv_req *req);
/** A completed Store or Delete: this gateway's share of the usage. */
void nkv_cache_account(struct nkv_req *req);
/** Release the pin quota and hard-limit room a Store reserved at parse (idempotent). */
void nkv_cache_unreserve(struct nkv_req *req);
/** The cache's figures (metrics). */
void nkv_cache_usage_of(struct nkv_cache *c, struct nkv_cache_usage *u);
int nkv_cache_start(struct nkv_target *t);
void nkv_cache_stop(struct nkv_target *t);

/* ---- target (target.c) ---- */
/**
 * Call @fn on every published namespace of every subsystem, each held (nkv_ns_get) during the call,
 * the subsystem held too. Called with t->lock held; drops it around each call. Stops early when
 * *@stop turns true (read under the lock).
 */
void nkv_target_walk_ns(struct nkv_target *t, const bool *stop,
			void (*fn)(struct nkv_subsys *ss, struct nkv_ns *ns, void *arg), void *arg);
/** Free a subsystem (no references left, or the target is going): namespaces closed, hosts erased. */
void nkv_subsys_free(struct nkv_subsys *ss);
/** Namespaces published in @ss. */
unsigned nkv_subsys_ns_count(struct nkv_subsys *ss);
/** The largest value the backend stores in @ns (KVVML is 32 bits). */
uint64_t nkv_ns_value_limit(const struct nkv_ns *ns);
/** Refuse (-EFBIG, logged with the limit) a max value @max the backend cannot store in @ns. */
int nkv_ns_check_max_value(struct nkv_subsys *ss, const struct nkv_ns *ns, uint64_t max);
/** Close an unpublished namespace once no command holds it, waiting up to @wait_ms. @return 0 or -EBUSY. */
int nkv_ns_reap(struct nkv_subsys *ss, struct nkv_ns *ns, unsigned wait_ms);
/** Find a subsystem by NQN, without a reference: for the thread that changes the configuration. */
struct nkv_subsys *nkv_target_find_subsys(struct nkv_target *tgt, const char *nqn);
/** Find a live subsystem by NQN and take a reference (nkv_subsys_put). @return it or NULL. */
struct nkv_subsys *nkv_target_get_subsys(struct nkv_target *tgt, const char *nqn);
/** Drop a subsystem reference; the last one of a removed subsystem frees it. */
void nkv_subsys_put(struct nkv_subsys *ss);
/** Is namespace @nsid of @ss published? For listings only: the answer may change at once. */
static inline bool nkv_subsys_has_ns(struct nkv_subsys *ss, uint32_t nsid)
{
	return nsid != 0 && nsid <= NKV_MAX_NSID && atomic_load_explicit(&ss->ns[nsid], memory_order_relaxed);
}
/**
 * Take namespace @nsid of @ss for one command (or one look at it): NULL if none is published. The
 * caller must nkv_ns_put() it; until then a live removal waits and the backend handle stays open.
 */
static inline struct nkv_ns *nkv_ns_get(struct nkv_subsys *ss, uint32_t nsid)
{
	if (nsid == 0 || nsid > NKV_MAX_NSID)
		return NULL;
	/* Sequentially consistent on both sides (live.c, ns_unpublish): either the remover sees our
	 * count, or we see its NULL and back off. Acquire also pairs with nkv_ns_add's publication. */
	struct nkv_ns *ns = atomic_load(&ss->ns[nsid]);
	if (!ns)
		return NULL;
	atomic_fetch_add(&ns->active, 1);
	if (atomic_load(&ss->ns[nsid]) != ns) {
		atomic_fetch_sub(&ns->active, 1);
		return NULL;
	}
	return ns;
}
static inline void nkv_ns_put(struct nkv_ns *ns)
{
	atomic_fetch_sub_explicit(&ns->active, 1, memory_order_release);
}
/** Count a finished command on its namespace (nkv_req_complete): kind, status class, bytes, latency. */
void nkv_ns_count(struct nkv_ns *ns, const struct nkv_req *req, nkv_status st);

/* ---- live changes (live.c) ---- */
/** Queue a Namespace Attribute Changed notice for @nsid to every controller of @ss. */
void nkv_subsys_ns_changed(struct nkv_subsys *ss, uint32_t nsid);
/** Admin queue thread: where notices for @c are sent (its owner's message queue). */
void nkv_aen_attach(struct nkv_ctrlr *c, struct nkv_msgq *q);
/** Admin queue thread: an AER arrived or a notice is pending: deliver what can be. */
void nkv_aen_deliver(struct nkv_ctrlr *c);
/** Build the Changed Namespace List (log 04h) into @buf (4096 bytes); @clear (RAE clear) empties it. */
void nkv_aen_changed_ns_log(struct nkv_ctrlr *c, uint8_t *buf, bool clear);
/** The ANA log (0Ch) of @c's subsystem on this target into @buf (NKV_ANA_LOG_MAX bytes): groups that
 *  hold namespaces, ascending, each with its NSIDs ascending (none with @rgo). @clear (RAE clear)
 *  ends the ANA Change notice. @return its length. */
uint32_t nkv_aen_ana_log(struct nkv_ctrlr *c, uint8_t *buf, bool rgo, bool clear);
#define NKV_ANA_LOG_MAX (16u + 32u * NKV_ANA_GROUPS + 4u * NKV_MAX_NSID)
/** Should a transport close this controller's queues (association ended or evicted)? */
static inline bool nkv_ctrlr_closing(struct nkv_ctrlr *c)
{
	return atomic_load_explicit(&c->dead, memory_order_relaxed) ||
	       atomic_load_explicit(&c->evict, memory_order_relaxed);
}

/* ---- controller (ctrlr.c) ---- */
/** @return 0, -ENOMEM. */
int nkv_ctrlr_create(struct nkv_subsys *ss, const char *hostnqn, const uint8_t hostid[16],
		     const struct nkv_ctrlr_opts *opts, struct nkv_ctrlr **out);
void nkv_ctrlr_destroy(struct nkv_ctrlr *c);
/** Fabrics Property Get/Set. @return 0 or -EINVAL (unknown or read-only property, bad size). */
int nkv_ctrlr_prop_get(struct nkv_ctrlr *c, uint32_t ofs, unsigned size, uint64_t *val);
int nkv_ctrlr_prop_set(struct nkv_ctrlr *c, uint32_t ofs, unsigned size, uint64_t val);
static inline bool nkv_ctrlr_ready(const struct nkv_ctrlr *c)
{
	/* I/O queues on other threads read CSTS; pairs with the release store in prop_set. */
	return (__atomic_load_n(&c->csts, __ATOMIC_ACQUIRE) & NKV_CSTS_RDY) != 0;
}
/** Take a reference on behalf of an I/O queue. */
static inline void nkv_ctrlr_get(struct nkv_ctrlr *c)
{
	atomic_fetch_add(&c->refs, 1);
}
/** Drop a reference; the last one frees the controller. */
void nkv_ctrlr_put(struct nkv_ctrlr *c);
/** Find a live controller of @ss by CNTLID and take a reference. @return it or NULL. */
struct nkv_ctrlr *nkv_ctrlr_lookup(struct nkv_subsys *ss, uint16_t cntlid);
/** Mark I/O queue @qid connected. @return false if out of range or already taken. */
bool nkv_ctrlr_claim_qid(struct nkv_ctrlr *c, uint16_t qid);
void nkv_ctrlr_release_qid(struct nkv_ctrlr *c, uint16_t qid);
/** End the association (admin queue gone, keep-alive expired): AERs aborted, I/O queues told to close. */
void nkv_ctrlr_kill(struct nkv_ctrlr *c);
/** Largest data transfer in bytes (MDTS). */
uint32_t nkv_ctrlr_max_xfer(struct nkv_ctrlr *c);

/* ---- fabrics (fabrics.c) ---- */

/**
 * Execute a Connect on a queue that has no controller yet: validate the SQE and its 1024-byte data,
 * check the host allowlist, and create a controller (admin queue) or find the one named by CNTLID
 * (I/O queue, same HOSTNQN and HOSTID). On success *out holds a reference for the queue and
 * cpl->dw0 the CNTLID; on failure cpl->dw0 carries IATTR/IPO for Connect Invalid Parameters.
 * @return 0 or a status.
 */
nkv_status nkv_fabrics_connect(struct nkv_target *t, const struct nkv_sqe *cmd, const void *data,
			       uint32_t len, const struct nkv_ctrlr_opts *opts, struct nkv_ctrlr **out,
			       struct nkv_cqe *cpl);
/** Parse a fabrics command on a connected queue (Property Get/Set, Disconnect). */
nkv_status nkv_fabrics_parse(struct nkv_req *req);
/** Register a transport address for the discovery log. @return 0 or -ENOMEM. */
int nkv_target_add_port(struct nkv_target *t, const struct nkv_port *port);
/** Take a transport address out of the discovery log (its listener closed). */
void nkv_target_del_port(struct nkv_target *t, uint16_t portid);
/** Register a transport's gauges (@r lives until nkv_target_del_transport). */
void nkv_target_add_transport(struct nkv_target *t, struct nkv_transport_reg *r);
/** Unregister them (idempotent): after it returns no reader calls r->read. */
void nkv_target_del_transport(struct nkv_target *t, struct nkv_transport_reg *r);
/** Create the target's discovery subsystem (idempotent). @return 0 or -ENOMEM. */
int nkv_target_enable_discovery(struct nkv_target *t);
/** Is @hostnqn allowed on @ss? Caller holds tgt->lock (the allowlist changes live). */
bool nkv_subsys_host_allowed(struct nkv_subsys *ss, const char *hostnqn);
/** nkv_subsys_host_allowed() through a queue of @exposed (nkv_ctrlr_opts): a loopback-only subsystem
 *  is not served there (tgt->lock held). */
bool nkv_subsys_admits(struct nkv_subsys *ss, const char *hostnqn, bool exposed);
/**
 * Build the discovery log (header + one entry per port and subsystem @hostnqn may use) in a
 * malloc'ed buffer. @return its size, or 0 on -ENOMEM.
 */
uint32_t nkv_disc_log_build(struct nkv_target *t, const char *hostnqn, uint8_t **out);

/* ---- DH-HMAC-CHAP in-band authentication (auth.c) ---- */
/** Must @qp authenticate before running anything but Authentication Send/Receive and Disconnect? */
static inline bool nkv_auth_pending(const struct nkv_qpair *qp)
{
	return qp->ctrlr && qp->ctrlr->dhchap && !qp->authenticated;
}
/** The DH-HMAC-CHAP settings of @hostnqn on @ss, or NULL (no authentication). Caller holds tgt->lock. */
const struct nkv_dhchap_host *nkv_subsys_host_auth(struct nkv_subsys *ss, const char *hostnqn);
/** Parse and transform one host's secrets into new settings (one reference). @return 0, -EINVAL, -ENOMEM. */
int nkv_dhchap_host_build(struct nkv_subsys *ss, const char *hostnqn, const struct nkv_dhchap_conf *conf,
			  struct nkv_dhchap_host **out);
/** Drop a reference to one host's settings; the last one erases and frees them. */
void nkv_dhchap_host_free(struct nkv_dhchap_host *h);
/** Parse Authentication Send (05h) / Receive (06h). @return 0 or a status. */
nkv_status nkv_auth_parse(struct nkv_req *req);
/** A queue was just connected: start its authentication deadline (@timeout_ms) if it must authenticate. */
void nkv_auth_qp_connected(struct nkv_qpair *qp, uint32_t timeout_ms);
/** The queue's authentication deadlines (transport tick). @return true when the queue must close. */
bool nkv_auth_qp_expired(struct nkv_qpair *qp, uint64_t now_ms);
/** Free a queue's transaction state (queue teardown). */
void nkv_auth_qp_free(struct nkv_qpair *qp);

/* ---- vendor Exec (exec.c) ---- */
/** Parse a vendor opcode (80h-FFh) of the KV command set on req->ns. @return 0 or a status. */
nkv_status nkv_exec_parse(struct nkv_req *req);
/** The status of a finished Exec I/O (@rc 0 or -errno); sets the CQE's DW0 (output length, or the
 *  method's errno on NKV_SC_EXEC_FAILED). */
nkv_status nkv_exec_status(struct nkv_req *req, int rc);
/** Mark @ss's allowlisted opcodes in the KV command set's effects (log 05h, 256 dwords). */
void nkv_exec_effects(struct nkv_subsys *ss, uint32_t iocs[256]);
/** Set the allowlist of a namespace not yet published (nkv_ns_add). @return as nkv_ns_set_exec(). */
int nkv_exec_init(struct nkv_subsys *ss, struct nkv_ns *ns, const struct nkv_exec_rule *rules, unsigned n);
/** Free a namespace's allowlist (namespace teardown: no command holds it any more). */
void nkv_exec_free(struct nkv_ns *ns);
/** Release what an Exec command took at parse: its allowlist reference and its built input. */
void nkv_exec_release(struct nkv_req *req);
/**
 * The input a Lua script rule @e sends for the host's @n bytes at @host (read once: a host sharing
 * the memory may change them meanwhile): the rule's script and handler, the host's bytes only ever as
 * the handler's input. @return 0 with *@out (malloc'd, *@len bytes), -ENOMEM or -EFBIG.
 */
int nkv_exec_lua_input(const struct nkv_exec_entry *e, const void *host, uint32_t n, uint8_t **out, uint32_t *len);

/* ---- command sets ---- */
nkv_status nkv_admin_parse(struct nkv_req *req); /* admin.c */
nkv_status nkv_kv_parse(struct nkv_req *req);    /* kv_cmd.c */
/** Complete held AERs with Aborted - SQ Deletion (controller reset or teardown). */
void nkv_admin_abort_aers(struct nkv_ctrlr *c);

#endif
