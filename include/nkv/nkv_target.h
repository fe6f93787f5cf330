/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv_target.h - embedding API of the rados-nkv target: build a target over a kvdev backend
 * (`rados` or `mem`), add subsystems (RADOS pools) and KV namespaces (RADOS namespaces), and drive a
 * controller through the in-process loop transport.
 *
 * Thread-safety: configuration calls (create/add/destroy) must not race each other. A loop queue
 * pair is owned by the thread that created it: submit and poll it from that thread only. Different
 * queue pairs may be used from different threads concurrently.
 */
#ifndef NKV_TARGET_H
#define NKV_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include "nkv_spec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_target;
struct nkv_subsys;

#define NKV_CUT_THROUGH_OFF 0xffffffffu
#define NKV_CUT_THROUGH_DEFAULT_MB 2 /* nkv_backend_conf.cut_through_mb 0 */

/** Backend configuration. Unset strings take the defaults noted. */
struct nkv_backend_conf {
	const char *name;        /* "rados" or "mem" */
	/* rados */
	const char *ceph_conf;   /* path to ceph.conf (NULL: librados default search) */
	const char *keyring;     /* path to a keyring (NULL: from ceph.conf) */
	const char *client_id;   /* cephx user without "client." (NULL: "admin") */
	unsigned op_timeout_s;   /* per-op timeout; 0: 30 s. Expiry completes with 82h, DNR clear */
	unsigned connect_timeout_s; /* cluster connect timeout; 0: 15 s */
	unsigned list_workers;   /* threads scanning namespaces for List; 0: 4 */
	unsigned cut_through_mb; /* Retrieves into host buffers of at least this many MiB are read in
				  * ranges and sent as they land; 0: NKV_CUT_THROUGH_DEFAULT_MB;
				  * NKV_CUT_THROUGH_OFF: never */
	/* mem */
	uint64_t mem_max_object; /* largest value the mem backend accepts; 0: 128 MiB (Ceph default) */
	unsigned stats_interval_ms; /* how often namespace usage (Identify NUSE/NSZE) is refreshed; 0: 5000 */
	const char *gateway;     /* this gateway's name, unique among the gateways serving a namespace:
				  * its share of a cache's usage and its eviction lease are kept under it
				  * (NULL: "gateway") */
	const char *meta_pool;   /* rados: a replicated pool for what needs omap (a cache's shared state
				  * and lease) of namespaces on erasure-coded pools (NULL: none, and a
				  * cache namespace on an erasure-coded pool is refused) */
};

/**
 * One allowlisted vendor Exec opcode of a namespace: the RADOS class method it runs on the object
 * named by the command's key (see "vendor Exec" in nkv_spec.h for the wire format).
 */
struct nkv_exec_rule {
	uint8_t opcode;          /* 80h-EFh (F0h-FFh are built-in vendor commands); bits 1:0 the data
				  * direction, never 11b */
	const char *cls;         /* RADOS class, e.g. "hello" (at most 63 bytes) */
	const char *method;      /* its method, e.g. "say_hello" (at most 63 bytes) */
	bool write;              /* a write method (rados_write_op_exec): no output (directions 00b and
				  * 01b only), refused on a read-only namespace; else run as a read op
				  * (output returned). On a read-only namespace RADOS itself refuses any
				  * method its class flags as a writer (20h), whatever this says */
	bool create;             /* a write method may run on an absent key (e.g. to create it); otherwise,
				  * and always for read methods, an absent key answers 87h */
	const void *input;       /* bound input, the method's whole input; copied. Not for class "lua" */
	uint32_t input_len;
	uint32_t max_input;      /* largest host input (direction 01b); 0: 64 KiB; above: 85h */
	/* Class "lua" (cls_lua: methods eval_json and eval_bufferlist) runs its input as code, so a Lua
	 * rule binds the script and the name of its handler (both required; copied) and the target
	 * builds the method's input from them: the host's input reaches the handler only as its input
	 * bufferlist, never as part of the script. Refused for any other class. */
	const char *script;      /* NUL-terminated, at most 16 MiB */
	const char *handler;     /* at most 255 bytes */
	bool append_host_input;  /* the host's input follows the bound input. Without it, a rule that
				  * binds input takes none from the host (inline bytes: 02h; direction 01b
				  * refused). Refused for class "lua" */
};

/**
 * Why @rule cannot be allowlisted, in words that follow "opcode XXh " (e.g. "is allowlisted twice"
 * is left to nkv_ns_set_exec), or NULL when it can. For configuration checks before a target exists.
 */
const char *nkv_exec_rule_problem(const struct nkv_exec_rule *rule);

/** Namespace configuration. */
struct nkv_ns_conf {
	uint32_t nsid;           /* 1..NKV_MAX_NSID */
	const char *rados_ns;    /* RADOS namespace ("" = the pool's default namespace) */
	uint64_t max_value;      /* KVVML; 0: 64 MiB. Capped by the cluster's osd max object size */
	bool read_only;          /* Store/Delete fail with Namespace Is Write Protected (20h) */
	const struct nkv_exec_rule *exec; /* the vendor Exec allowlist (copied); NULL: none */
	unsigned nexec;
	const struct nkv_cache_policy *cache; /* a cache over the namespace (copied); NULL: none */
	uint32_t ana_group;      /* its ANA group, 1..NKV_ANA_GROUPS; 0: 1 */
};

/* ---- cache (docs/cache.md) ----------------------------------------------------------------------
 * A namespace with a cache keeps a small record with every entry (its expiry, whether it is pinned,
 * when it was stored and last used) and answers Retrieve and Exist of an expired entry with 87h.
 * Its usage, pins and byte-hours are kept in RADOS, shared by every gateway serving it; one gateway
 * at a time (holding a lease) evicts automatic entries past the capacity and removes expired ones. */

enum nkv_evict {
	NKV_EVICT_LRU = 0,  /* sampled least-recently-used: entries retrieved lately stay longest */
	NKV_EVICT_FIFO = 1, /* sampled oldest-stored first (for comparison) */
	NKV_EVICT_OFF = 2,  /* never evict: a Store past the hard limit gets 81h */
};

/** Policy of a cache namespace. Zeroed fields take the defaults noted. */
struct nkv_cache_policy {
	uint64_t capacity_bytes;   /* evict automatic entries above it; 0: no byte limit */
	uint64_t capacity_keys;    /* evict above this many entries; 0: no key limit */
	uint64_t pin_quota_bytes;  /* pinned bytes at most (81h past it); 0: no quota */
	uint32_t default_ttl_s;    /* TTL of Stores that give none (standard Stores); 0: never expire */
	uint32_t max_ttl_s;        /* longest TTL accepted (longer ones are cut to it); 0: no limit */
	uint64_t bytes_per_token;  /* for token-hours (e.g. 131072); 0: token-hours not reported */
	uint8_t eviction;          /* enum nkv_evict */
	uint8_t low_watermark_pct; /* evict down to this share of the capacity; 0: 90 */
	uint8_t overshoot_pct;     /* hard limit above capacity: Stores get 81h past it; 0: 10 */
	uint32_t touch_interval_ms; /* a Retrieve refreshes an entry's last use at most this often; 0: 10000 */
	uint32_t reap_interval_s;  /* a pass removing expired entries starts this often; 0: 10 */
	uint32_t reap_rate;        /* entries examined per second by that pass; 0: 2000 */
	uint32_t lease_ms;         /* the eviction lease; 0: 10000 */
};

/** Figures of one cache namespace: the whole namespace (every gateway), as this gateway last read
 *  them (within a second), plus this gateway's own live changes. */
struct nkv_cache_usage {
	struct nkv_cache_policy policy;
	uint64_t used_bytes, keys;     /* entries stored (expired ones until they are removed) */
	uint64_t pinned_bytes, pinned_keys;
	uint64_t evictions, evicted_bytes;   /* automatic entries evicted */
	uint64_t expirations, expired_bytes; /* expired entries removed */
	double byte_hours;             /* pinned byte-hours: size x TTL charged at the pin, the unused part
					* refunded when the entry is replaced or deleted before it expires */
	double token_hours;            /* byte_hours / bytes_per_token (0 without it) */
	bool evicting;                 /* this gateway holds the eviction lease */
	unsigned gateways;             /* gateways that reported usage for the namespace */
};

/** Change the policy of cache namespace @nsid live. @return 0, -ENOENT (no such namespace),
 *  -EINVAL (not a cache namespace: a cache is given when the namespace is added). */
int nkv_ns_set_cache_policy(struct nkv_subsys *ss, uint32_t nsid, const struct nkv_cache_policy *p);

/** Figures of cache namespace @nsid. @return 0, -ENOENT, -EINVAL (not a cache namespace). */
int nkv_ns_cache_usage(struct nkv_subsys *ss, uint32_t nsid, struct nkv_cache_usage *out);

/** What happened to a cache entry. */
enum nkv_cache_reason {
	NKV_CACHE_EVICTED = 1, /* the cache evicted it (capacity) */
	NKV_CACHE_EXPIRED = 2, /* its TTL ran out and the cache removed it */
	NKV_CACHE_STORED = 3,  /* a host stored it (Store or Store TTL; a replaced entry also gets DELETED
				* first when its block hash differs) */
	NKV_CACHE_DELETED = 4, /* a host deleted it, or a Store replaced it under another block hash */
};

/** An entry of a cache namespace stored, deleted, evicted or expired. */
struct nkv_cache_event {
	const char *subnqn;
	uint32_t nsid;
	const char *rados_ns;  /* the namespace's RADOS namespace */
	uint8_t key[16];
	uint8_t klen;
	uint8_t reason;        /* enum nkv_cache_reason */
	uint64_t size;         /* the value's size */
	uint64_t block_hash;   /* the block hash the Store gave (NKV_TTL_HASH); without one, the key's
				* last 8 bytes as a big-endian number (zero-padded on the left) */
	bool has_hash;         /* the Store gave block_hash */
};
typedef void (*nkv_cache_event_cb)(void *arg, const struct nkv_cache_event *ev);

/** Report every Store, Delete, eviction and expiry on cache namespaces to @cb (NULL: stop). Set
 *  before namespaces are added. @cb runs on the target's cache thread (evictions, expiries) and on
 *  the threads that complete commands (Stores, Deletes), once per entry, and must not block. */
void nkv_target_set_cache_events(struct nkv_target *tgt, nkv_cache_event_cb cb, void *arg);

#define NKV_MAX_NSID 1024u
#define NKV_DEFAULT_MAX_VALUE (64ull << 20)

/**
 * Create a target over one backend connection.
 * @return 0, or -errno: -EINVAL (unknown backend, bad conf), -ETIMEDOUT / -ENOTCONN (cluster
 * unreachable within connect_timeout_s), -ENOMEM.
 */
int nkv_target_create(const struct nkv_backend_conf *conf, struct nkv_target **out);

/** Destroy a target. All controllers must be disconnected first. */
void nkv_target_destroy(struct nkv_target *tgt);

/**
 * Give new controllers IDs @min..@max only (1 <= @min <= @max <= FFEFh; the default is the whole
 * 1..FFEFh). Each gateway of a group gets a range of its own, so that no two gateways' controllers
 * of one subsystem share a CNTLID (Linux native multipath refuses the second). @min 0: no range;
 * every Connect is refused (Controller Busy) until one is set. Live controllers keep theirs.
 * @return 0 or -EINVAL.
 */
int nkv_target_set_cntlid_range(struct nkv_target *tgt, uint16_t min, uint16_t max);

/* ANA (Asymmetric Namespace Access): every namespace is in one of groups 1..NKV_ANA_GROUPS, and
 * this target has a state per group (default optimized), reported in log page 0Ch. */
#define NKV_ANA_GROUPS 32u

/**
 * Set this target's state for ANA group @grp (1..NKV_ANA_GROUPS): NKV_ANA_OPTIMIZED,
 * NKV_ANA_NON_OPTIMIZED or NKV_ANA_INACCESSIBLE (I/O to its namespaces then fails with Asymmetric
 * Access Inaccessible, SCT 3h SC 02h, DNR clear: the host retries on another path). A change moves
 * the ANA change count and sends every controller an ANA Change notice (as it enabled them).
 * @return 1 (changed), 0 (already so), -EINVAL.
 */
int nkv_target_set_ana_state(struct nkv_target *tgt, uint32_t grp, enum nkv_ana_state state);
/** This target's state for ANA group @grp (1..NKV_ANA_GROUPS), or 0 (no such group). */
enum nkv_ana_state nkv_target_ana_state(struct nkv_target *tgt, uint32_t grp);

/** A listener of another gateway of the group: listed in this target's discovery log too. */
struct nkv_peer_listener {
	const char *traddr;  /* its address as configured ("0.0.0.0", "10.0.0.2", "fd00::2") */
	unsigned port;
	bool tls;            /* a secure port: TREQ required, SECTYPE TLS 1.3 */
	uint16_t portid;     /* the PORTID its entries carry */
};

/**
 * Replace the set of other gateways' listeners that this target's discovery log lists (one entry per
 * listener and subsystem, as for its own; a host sees those it may connect to). The log's
 * generation counter moves only when the set changes. @return 0, -EINVAL (an address over 255
 * bytes, port 0 or over 65535), -ENOMEM.
 */
int nkv_target_set_peer_listeners(struct nkv_target *tgt, const struct nkv_peer_listener *l, unsigned n);

/**
 * Add a subsystem exporting @pool under @nqn.
 * @return 0, -EEXIST (NQN taken), -ENOENT (pool missing), -EINVAL (NQN over 223 bytes), -ENOMEM.
 */
int nkv_subsys_add(struct nkv_target *tgt, const char *nqn, const char *pool, struct nkv_subsys **out);

/**
 * Replace the vendor Exec allowlist of namespace @nsid of @ss, live: commands parsed before keep the
 * rules they were parsed with; every later command sees the new ones. The rules are copied; a
 * replaced allowlist is freed once the last command parsed with it has ended, and rules equal to the
 * current ones change nothing. Not for concurrent use with itself (the daemon calls it from its main
 * thread). @return 0, -ENOENT (no such namespace), -EINVAL (an opcode twice, or a rule that
 * nkv_exec_rule_problem() refuses), -ENOMEM.
 */
int nkv_ns_set_exec(struct nkv_subsys *ss, uint32_t nsid, const struct nkv_exec_rule *rules, unsigned n);

/**
 * Add a KV namespace. conf->max_value 0 takes min(64 MiB, the backend's object limit).
 * @return 0, -EEXIST (NSID in use), -EINVAL (NSID out of range), -EFBIG (conf->max_value above the
 * backend's object limit or 4 GiB - 1; logged with the limit), -ENOMEM, or a backend error.
 */
int nkv_ns_add(struct nkv_subsys *ss, const struct nkv_ns_conf *conf);

/**
 * Allow @hostnqn to connect to @ss. A subsystem with no allowed hosts accepts any host; once one is
 * added, other hosts get Connect Invalid Host (SCT 1h / 84h) and do not see it in discovery.
 * @return 0, -EINVAL (NQN too long), -ENOMEM.
 */
int nkv_subsys_allow_host(struct nkv_subsys *ss, const char *hostnqn);

struct nkv_dhchap_conf;

/* ---- live changes (the control plane) -------------------------------------------------------------
 * Every function below is for the one thread that changes the configuration (the daemon's control
 * thread); I/O, Connects and discovery go on meanwhile on every other thread. */

/** The subsystem named @nqn, or NULL. Valid until nkv_subsys_remove() (same thread). */
struct nkv_subsys *nkv_target_subsys(struct nkv_target *tgt, const char *nqn);

/**
 * Remove a subsystem live: it disappears from discovery and Connect at once, every controller of it
 * is disconnected (its transports close the queues within their tick, 100 ms - 1 s), commands in
 * flight complete (waiting up to @drain_ms for them before the namespaces' backend handles close;
 * later ones close when their last command ends). @return 0 or -ENOENT.
 */
int nkv_subsys_remove(struct nkv_target *tgt, const char *nqn, unsigned drain_ms);

/**
 * Remove namespace @nsid live: new commands for it get Invalid Namespace (0Bh) at once, commands in
 * flight complete normally (waited for up to @drain_ms; past that the backend handle closes when the
 * last one ends), and every controller of the subsystem gets a Namespace Attribute Changed notice
 * (Asynchronous Event, Changed Namespace List log 04h). @return 0, -ENOENT.
 */
int nkv_ns_remove(struct nkv_subsys *ss, uint32_t nsid, unsigned drain_ms);

/** Make namespace @nsid read-only or writable, live (notice sent). @return 0, -ENOENT. */
int nkv_ns_set_read_only(struct nkv_subsys *ss, uint32_t nsid, bool read_only);

/**
 * Change namespace @nsid's largest value (KVVML), live (notice sent); 0 means the default. Stores
 * parsed after it see the new limit. @return 0, -ENOENT, -EFBIG (above what the backend stores).
 */
int nkv_ns_set_max_value(struct nkv_subsys *ss, uint32_t nsid, uint64_t max_value);

/** Limit the namespaces of @ss (nkv_ns_add then fails with -ENOSPC); 0: NKV_MAX_NSID. */
void nkv_subsys_set_max_ns(struct nkv_subsys *ss, unsigned max_ns);

/**
 * Allow @hostnqn, with DH-HMAC-CHAP settings (@conf, may be NULL) in place before the host can
 * connect. @return 0, -EEXIST (@conf given and the host is already allowed), -EINVAL, -ENOMEM.
 */
int nkv_subsys_allow_host_auth(struct nkv_subsys *ss, const char *hostnqn, const struct nkv_dhchap_conf *conf);

/**
 * Open @ss to any host (@any true; the allowlist stays but is not consulted) or back to its
 * allowlist (an empty allowlist then admits nobody). Connected hosts not allowed any more are
 * disconnected. @return controllers disconnected.
 */
int nkv_subsys_set_allow_any(struct nkv_subsys *ss, bool any);

/**
 * Serve @ss only where no host on the network reaches it (@on), or everywhere (@on false). While
 * on, a Connect to @ss through a plain NVMe/TCP listener off loopback (nkv_listener_exposes, as the
 * listener was given) gets Connect Invalid Parameters on SUBNQN, as for a subsystem that port does
 * not serve, the discovery log leaves those ports out for it, and controllers already connected
 * through one are disconnected. Loopback and TLS listeners and shared memory are not affected. For
 * a subsystem that admits any host only because nobody named its hosts. @return controllers
 * disconnected.
 */
int nkv_subsys_set_loopback_only(struct nkv_subsys *ss, bool on);

/**
 * Take @hostnqn off the allowlist: its controllers on @ss are disconnected (their queues close
 * within the transports' tick) and it no longer sees @ss in discovery. An empty allowlist admits
 * nobody (not everybody). @return controllers disconnected (>= 0), -ENOENT (not allowed).
 */
int nkv_subsys_disallow_host(struct nkv_subsys *ss, const char *hostnqn);

/**
 * Does @pool exist (and what is the largest value the cluster stores there, into @max_value if not
 * NULL)? A probe of the backend. @return 0, -ENOENT, or a backend error.
 */
int nkv_target_check_pool(struct nkv_target *tgt, const char *pool, uint64_t *max_value);

/** The serial number of @ss (Identify Controller SN), 16 hex digits. */
const char *nkv_subsys_serial(const struct nkv_subsys *ss);

/** Is @secret a well-formed DH-HMAC-CHAP secret ("DHHC-1:hh:<base64>:")? @return 0 or -EINVAL. */
int nkv_dhchap_secret_check(const char *secret);

/** Counters of one namespace on this target since it was added (nkv_ns_stats). */
struct nkv_ns_stats {
	uint64_t stores, retrieves, deletes, exists, lists, others; /* commands completed */
	uint64_t bytes_written, bytes_read;
	uint64_t errors;      /* completed with a status other than success */
	uint64_t in_flight;   /* parsed, not yet completed */
	uint64_t used;        /* bytes in use, as the last usage refresh saw them */
	uint64_t max_value;
	bool read_only;
	uint8_t nguid[16];    /* Identify Namespace NGUID */
};
/** @return 0 or -ENOENT. */
int nkv_ns_stats(struct nkv_subsys *ss, uint32_t nsid, struct nkv_ns_stats *out);

/** One controller (association) of a subsystem. */
struct nkv_conn_info {
	char subnqn[224];
	char hostnqn[224];
	uint16_t cntlid;
	uint16_t io_queues;   /* I/O queues connected */
	bool authenticated;   /* DH-HMAC-CHAP done (false where none is required) */
	char transport[8];    /* "tcp", "shm", "loop" */
};
/**
 * The controllers of subsystem @subnqn (NULL: of every subsystem) in a malloc'ed array.
 * @return how many (>= 0; *out NULL when 0) or -ENOMEM.
 */
int nkv_target_connections(struct nkv_target *tgt, const char *subnqn, struct nkv_conn_info **out);

/* ---- metrics: what a monitoring exporter reads (the daemon's --metrics) ------------------------------
 * Every command that reached a namespace (it named a published one) is counted once when it
 * completes, by kind and status class, with its bytes and its latency from parse to completion.
 * The counters are per namespace since it was added (a namespace removed and added again starts
 * from zero); they are read without stopping I/O, so one snapshot may see a command in one counter
 * and not yet in another. */

/** Command kinds (by opcode). */
enum nkv_metric_op {
	NKV_MOP_STORE,          /* 01h */
	NKV_MOP_RETRIEVE,       /* 02h */
	NKV_MOP_RETRIEVE_RANGE, /* F2h */
	NKV_MOP_DELETE,         /* 10h */
	NKV_MOP_EXIST,          /* 14h */
	NKV_MOP_LIST,           /* 06h */
	NKV_MOP_EXEC,           /* 80h-EFh, the namespace's Exec allowlist */
	NKV_MOP_OTHER,          /* Flush and any other opcode sent to a namespace */
	NKV_MOP_COUNT
};

/** Status classes. */
enum nkv_metric_status {
	NKV_MST_SUCCESS,     /* 00h */
	NKV_MST_NOT_FOUND,   /* 87h KV Key Does Not Exist */
	NKV_MST_EXISTS,      /* 89h KV Key Exists (a Store that must not overwrite) */
	NKV_MST_SIZE,        /* 85h Invalid Value Size, 86h Invalid Key Size */
	NKV_MST_CAPACITY,    /* 81h KV Capacity Exceeded (pool quota or cluster full) */
	NKV_MST_NOT_READY,   /* 82h KV Namespace Not Ready: op timeout, cluster unreachable; hosts retry */
	NKV_MST_REFUSED,     /* the command was refused as sent: invalid opcode, field, namespace or SGL,
			      * namespace write protected (20h), not authenticated */
	NKV_MST_EXEC_FAILED, /* C0h method unavailable, C1h the method returned an error */
	NKV_MST_OTHER,       /* internal (06h), unrecovered (88h), aborted, data transfer errors... */
	NKV_MST_COUNT
};

/** Latency histogram groups. */
enum nkv_metric_lat { NKV_MLAT_STORE, NKV_MLAT_RETRIEVE /* with Retrieve Range */, NKV_MLAT_OTHER, NKV_MLAT_COUNT };

/** Latency buckets: bucket i < 21 holds (8 us << (i - 1), 8 us << i] (the first from 0), the last
 *  everything above 8 us << 20 (8.39 s). */
#define NKV_MLAT_BUCKETS 22

/** The upper bound of latency bucket @i in microseconds; UINT64_MAX for the last (+Inf). */
uint64_t nkv_metric_lat_bound_us(unsigned i);
/** Short lowercase names ("store", "retrieve_range"; "not_found", "exec_failed"): label values. */
const char *nkv_metric_op_name(unsigned op);
const char *nkv_metric_status_name(unsigned st);

/** One namespace's metrics (nkv_target_metrics). */
struct nkv_ns_metrics {
	char subnqn[224];
	uint32_t nsid;
	bool read_only;
	uint64_t cmds[NKV_MOP_COUNT][NKV_MST_COUNT];     /* completed commands */
	uint64_t bytes_written[NKV_MOP_COUNT];           /* host-to-controller data of successful commands */
	uint64_t bytes_read[NKV_MOP_COUNT];              /* controller-to-host data of successful commands */
	uint64_t lat[NKV_MLAT_COUNT][NKV_MLAT_BUCKETS];  /* commands per latency bucket (not cumulative) */
	uint64_t lat_sum_ns[NKV_MLAT_COUNT];             /* their latencies added up */
	uint64_t in_flight;   /* parsed, not yet completed */
	uint64_t used;        /* bytes in use as the backend reports them (rados: the whole pool), as the
			       * last usage refresh saw them */
	uint64_t max_value;
	bool cache;           /* a cache namespace: cache_usage holds its figures */
	struct nkv_cache_usage cache_usage;
};

/**
 * Every published namespace of every subsystem, in a malloc'ed array (free() it), subsystems in
 * the target's order and namespaces by NSID. Takes the target's configuration lock briefly; never
 * waits for I/O. @return how many (>= 0; *out NULL when 0) or -ENOMEM.
 */
int nkv_target_metrics(struct nkv_target *tgt, struct nkv_ns_metrics **out);

/** One transport's gauges (nkv_target_transport_metrics). */
struct nkv_transport_metrics {
	char name[8];          /* "tcp", "shm" */
	uint64_t connections;  /* tcp: connections open (admin, I/O and discovery queues, and those not
				* yet connected); shm: controllers live */
	uint64_t queue_depth;  /* I/O commands the transport holds: received, not yet answered (waiting
				* for buffers or data, in the core or the backend, or being sent back) */
	uint64_t waits;        /* since start: times one of its threads (tcp: a reactor; shm: a poller)
				* went to wait in the kernel for work; the next command pays its wake-up */
	bool notifies;         /* shm: hosts kick its pollers and take interrupts (the two below) */
	uint64_t kicks;        /* since start: doorbell kicks that a waiting poller took */
	uint64_t interrupts;   /* since start: interrupts sent to hosts (eventfd writes) */
};

/**
 * The gauges of the transports running on @tgt (nkv_tcp_create, nkv_shm_create; the loop
 * transport has none), up to @max of them into @out. @return how many there are (may exceed @max).
 */
int nkv_target_transport_metrics(struct nkv_target *tgt, struct nkv_transport_metrics *out, unsigned max);

/** Data moved and copied by one transport's I/O commands (nkv_target_copy_metrics), in bytes. */
struct nkv_copy_metrics {
	char transport[8];     /* "tcp", "shm", "loop" */
	uint64_t data[2];      /* [0] host to gateway (Store), [1] gateway to host (Retrieve): data of
				* the commands that succeeded */
	uint64_t copied[2];    /* bytes copied from buffer to buffer in the gateway's memory on the way,
				* by the gateway or by librados' C API (docs/operations.md, "Metrics") */
};

/**
 * The copy counters of every transport (tcp, shm, loop, whether running or not) into @out (up to
 * @max). Counters since the target was created; each read exactly, not all at one instant.
 * @return how many there are (may exceed @max).
 */
int nkv_target_copy_metrics(struct nkv_target *tgt, struct nkv_copy_metrics *out, unsigned max);

/**
 * DH-HMAC-CHAP settings of one allowed host (NVMe in-band authentication, docs/nvme-kv-wire.md C.12).
 * Secrets are in the representation `nvme gen-dhchap-key` prints, "DHHC-1:hh:<base64>:".
 */
struct nkv_dhchap_conf {
	const char *key;      /* the host's secret: required */
	const char *ctrl_key; /* the controller's secret, for bidirectional authentication; NULL: none
			       * (a host asking the controller to authenticate itself then fails) */
	const char *hashes;   /* hash functions in order of preference, comma separated: "sha256",
			       * "sha384", "sha512"; NULL: "sha256,sha384,sha512" */
	const char *dhgroups; /* DH groups in order of preference: "ffdhe2048" ... "ffdhe8192", "null";
			       * NULL: "ffdhe2048,ffdhe3072,ffdhe4096,ffdhe6144,ffdhe8192,null" */
};

/**
 * Require DH-HMAC-CHAP authentication from @hostnqn, which must be on @ss's allowlist
 * (nkv_subsys_allow_host): its Connects answer AUTHREQ.ATR, every queue must then complete an
 * authentication transaction (the controller picks the first hash function and DH group of its
 * lists that the host offers) before anything but Authentication Send/Receive and Disconnect runs
 * on it, and I/O queue Connects of a controller whose admin queue has not authenticated answer
 * SCT 1h / 91h (Authentication Required). Call once per host, before hosts connect (settings are
 * fixed while the target runs). The secrets are transformed and kept (erased when the target is
 * destroyed). Over the shared-memory and loop transports there is no in-band authentication.
 * @return 0, -ENOENT (@hostnqn not on the allowlist), -EEXIST (already set for that host),
 * -EINVAL (a malformed secret or an unknown hash or group: logged with the reason, never the
 * secret), -ENOMEM.
 */
int nkv_subsys_host_dhchap(struct nkv_subsys *ss, const char *hostnqn, const struct nkv_dhchap_conf *conf);

/* ---- NVMe/TCP transport ---------------------------------------------------------------------------- */

struct nkv_tcp;

/** NVMe/TCP transport settings; zeroed fields take the defaults noted. */
struct nkv_tcp_conf {
	unsigned reactors;       /* reactor threads; 0: 2 */
	uint32_t in_capsule;     /* in-capsule data bytes on I/O queues (IOCCSZ); 0: 8192 */
	uint32_t maxh2cdata;     /* MAXH2CDATA, multiple of 4, >= 4096; 0: 131072 */
	uint16_t max_queue_depth;/* I/O queue entries (CAP.MQES + 1); 0: 1024 */
	uint16_t max_io_queues;  /* I/O queues per controller; 0: 64 */
	uint64_t buffer_budget;  /* bytes of command data buffered at once, all connections; 0: 2 GiB.
				  * Past it, connections stop reading until buffers are released */
	/* Limits and deadlines, so that no single host takes the gateway from the others. A "host"
	 * is a peer IP address. */
	uint64_t conn_buffer;    /* buffer bytes one connection may hold; 0: buffer_budget / 8 */
	uint64_t host_buffer;    /* buffer bytes one host may hold; 0: buffer_budget / 4 */
	uint32_t r2t_timeout_ms; /* all data of an R2T must arrive within this, else C2HTermReq
				  * (FES 02h) and close; 0: 30000 */
	uint32_t pdu_timeout_ms; /* a PDU must arrive whole within this of its first byte, else
				  * C2HTermReq (FES 02h) and close; 0: 10000 */
	uint32_t send_timeout_ms;/* a PDU at the head of the send queue must be sent within this,
				  * else the connection closes; 0: 30000 */
	uint32_t icreq_timeout_ms;   /* ICReq within this of accept; 0: 10000 */
	uint32_t connect_timeout_ms; /* fabrics Connect within this of accept; 0: 30000 */
	uint32_t idle_admin_ms;  /* an admin queue with KATO 0 and no I/O queues closes after this
				  * long without a command; 0: 60000 */
	unsigned max_conns;      /* connections at once; 0: 4096, at most RLIMIT_NOFILE - 64 */
	unsigned max_host_conns; /* connections at once from one host; 0: 256 */
	unsigned max_ctrlrs;     /* controllers (admin queues) at once; 0: 1024 */
	unsigned max_host_ctrlrs;/* controllers at once from one host; 0: 32 */
	uint32_t auth_timeout_ms;/* DH-HMAC-CHAP: a queue that must authenticate does so within this of
				  * its Connect, and every authentication transaction ends within this
				  * of its AUTH_Negotiate; else the queue closes (a re-authentication of
				  * an authenticated queue is only dropped); 0: 10000 */
	uint32_t tls_timeout_ms; /* a secure listener's TLS handshake must finish within this of
				  * accept, else the connection closes; 0: 10000 */
	uint32_t poll_us;        /* a reactor that found work looks again without blocking for up to
				  * this long, while that pays (polling for QD 1 latency, at a core's
				  * cost while busy); 0: blocks at once */
};

/**
 * Start the NVMe/TCP transport of @tgt: reactor threads, no listeners yet. Also creates the
 * target's discovery subsystem (nqn.2014-08.org.nvmexpress.discovery).
 * @return 0, -EINVAL (bad conf), -ENOMEM, or -errno from thread or epoll creation.
 */
int nkv_tcp_create(struct nkv_target *tgt, const struct nkv_tcp_conf *conf, struct nkv_tcp **out);

/**
 * Listen on @addr:@port (numeric IPv4/IPv6 or a host name; port "0" picks a free one). Every
 * listener serves every subsystem and the discovery subsystem. A listener with @advertise set is
 * reported in the discovery log page (one entry per listener and subsystem); a discovery-only port
 * (8009) is nkv_tcp_listen_discovery().
 * @return the bound port number (> 0), or -EADDRINUSE, -EADDRNOTAVAIL, -EINVAL, -errno.
 */
int nkv_tcp_listen(struct nkv_tcp *tcp, const char *addr, const char *port, bool advertise);

/**
 * Listen for discovery only on @addr:@port (the discovery port, 8009): a Connect through it to any
 * subsystem but the discovery subsystem gets Connect Invalid Parameters on SUBNQN, as Linux nvmet
 * answers for a subsystem not linked to a port. Not advertised in the discovery log.
 * @return as nkv_tcp_listen().
 */
int nkv_tcp_listen_discovery(struct nkv_tcp *tcp, const char *addr, const char *port);

/**
 * Let host @hostnqn reach subsystem @subnqn over TLS (TP 8011) with configured PSK @key: the
 * interchange string "NVMeTLSkey-1:hh:BASE64:" (`nvme gen-tls-key`), or "@PATH" of a file holding it.
 * The target accepts the PSK identities NVMe0Rxx and NVMe1Rxx of that host and subsystem, and of that
 * host and the discovery subsystem, each with its derived TLS PSK; a Connect over the session must
 * name the identity's host and subsystem. Call before the secure listeners start.
 * @return 0, -EINVAL / -EMSGSIZE / -EBADMSG (not a valid key: see the header of src/common/nvme_psk.h),
 * -ENOENT / -EACCES (the key file), -EEXIST (another key for this host and subsystem), -ENOMEM.
 * NQNs that make a version 0 identity longer than 255 bytes get version 1 identities only (logged).
 */
int nkv_tcp_add_psk(struct nkv_tcp *tcp, const char *hostnqn, const char *subnqn, const char *key);

/**
 * Stop listening on @addr (as given to nkv_tcp_listen; "" or NULL = any) port @port, live: the
 * socket closes and leaves the discovery log within a reactor tick (waited for); connections it
 * accepted stay. @return 0, -ENOENT (no such listener), -ETIMEDOUT.
 */
int nkv_tcp_unlisten(struct nkv_tcp *tcp, const char *addr, int port);

/**
 * Listen with TLS, as nkv_tcp_listen() otherwise: every connection must open with a TLS 1.3
 * handshake using a PSK added with nkv_tcp_add_psk() (cipher suite TLS_AES_128_GCM_SHA256 or
 * TLS_AES_256_GCM_SHA384 by the PSK's hash), within conf.tls_timeout_ms; the ICReq and every PDU then
 * travel inside the session. A host speaking plain NVMe/TCP to it is closed. Its discovery log entries
 * say TREQ "required" and TSAS SECTYPE TLS 1.3. Plain and secure listeners may coexist.
 * @return the bound port (> 0), -ENOKEY (no PSK added), or as nkv_tcp_listen().
 */
int nkv_tcp_listen_tls(struct nkv_tcp *tcp, const char *addr, const char *port, bool advertise);

/**
 * Stop: close the listeners, stop reading new commands, wait up to @grace_ms for commands in flight
 * to complete and their responses to be sent, then close every connection, join the reactors and
 * free the transport. Call before nkv_target_destroy().
 */
void nkv_tcp_destroy(struct nkv_tcp *tcp, int grace_ms);

/* ---- shared-memory (PCIe-style) transport ------------------------------------------------------ */

struct nkv_shm;

/** Shared-memory transport settings (protocol: nkv_shm.h); zeroed fields take the defaults noted. */
struct nkv_shm_conf {
	unsigned pollers;         /* poller threads; 0: 1 */
	uint16_t mqes;            /* CAP.MQES (0's based); 0: 4095. Up to 65535 */
	uint16_t max_io_queues;   /* I/O queue pairs per controller; 0: 64 */
	unsigned poll_idle_us;    /* a poller with nothing to do sleeps this long between scans; 0: 50.
				   * Lower is faster and burns more CPU */
	unsigned max_regions;     /* registered regions per controller; 0: 256 */
	uint64_t max_reg_bytes;   /* registered bytes per controller; 0: 64 GiB */
	uint64_t bounce_budget;   /* staging memory for scattered buffers, all controllers; 0: 1 GiB.
				   * Past it, commands wait in their SQ */
	uint64_t bounce_ctrl_budget; /* the part of it one controller may hold; 0: bounce_budget / 4 */
	unsigned max_cmds;        /* commands in flight per controller (its request table grows on
				   * demand up to this; more SQEs wait in their SQ); 0: 1024 */
	unsigned max_ctrls;       /* live controllers, all hosts (HELLO past it: -EUSERS); 0: 256 */
	unsigned max_ctrls_per_host; /* live controllers per host NQN (HELLO past it: -EUSERS); 0: 16 */
	unsigned hello_timeout_ms; /* a connection that has not said HELLO by then is closed; 0: 5000 */
	bool no_notify;           /* refuse SET_KICK / SET_IRQ (nkv_shm.h): hosts and pollers poll, the
				   * pollers napping poll_idle_us; false: a poller whose hosts all bound a
				   * kick eventfd sleeps until kicked, and CQs interrupt hosts that ask */
	unsigned socket_mode;     /* mode of the socket files (nkv_shm_listen), set before they are
				   * visible; 0: 0600 */
	bool socket_group_set;    /* give the socket files group socket_gid (needs CAP_CHOWN for a group
				   * the process is not in) */
	unsigned socket_gid;
};

/** Start the shared-memory transport of @tgt (poller threads). @return 0, -EINVAL, -ENOMEM, -errno. */
int nkv_shm_create(struct nkv_target *tgt, const struct nkv_shm_conf *conf, struct nkv_shm **out);

/**
 * Serve subsystem @subnqn on Unix socket @path (a stale socket file there is replaced; a live one or
 * anything else is not). The socket file has the conf's socket_mode and group before @path names it
 * (made in a private directory beside it and renamed into place: nothing is ever done by path to
 * what another user may have put at @path).
 * @return 0, -ENOENT (no such subsystem), -EADDRINUSE, -EEXIST (not a socket there), -ENAMETOOLONG,
 * -errno.
 */
int nkv_shm_listen(struct nkv_shm *shm, const char *subnqn, const char *path);

/**
 * Serve subsystem @subnqn as a vfio-user PCI device (an NVMe controller, protocol: QEMU's
 * docs/interop/vfio-user.rst; layout: src/common/vfio_user.h) on SOCK_STREAM Unix socket @path,
 * one client at a time, each getting a controller of the same model as a shared-memory host's.
 * The socket file is made as nkv_shm_listen() makes it (mode, group, never through a link); a
 * client must also pass the peer check of the control socket (the daemon's user, root, or a member
 * of the conf's socket group). vfio-user carries no host NQN: clients act as @hostnqn, or, when
 * NULL or "", as "nqn.2014-08.io.rados-nkv:vfio-user:uid:UID" of the connecting process, and the
 * subsystem's allowlist and the controller limits apply to that NQN.
 * @return as nkv_shm_listen(), or -EINVAL (@hostnqn too long).
 */
int nkv_shm_listen_vfio_user(struct nkv_shm *shm, const char *subnqn, const char *path, const char *hostnqn);

/**
 * Stop: close the listeners and unlink their socket files, give commands in flight up to @grace_ms,
 * tear every controller down (waiting for backend operations still running), join the pollers, free.
 */
void nkv_shm_destroy(struct nkv_shm *shm, int grace_ms);

/* ---- loop transport: in-process controller access ---------------------------------------------- */

struct nkv_loop_ctrlr;
struct nkv_loop_qp;

/** Called on the owning thread when a command completes; @xfer = bytes moved to/from the buffer. */
typedef void (*nkv_loop_cb)(void *arg, const struct nkv_cqe *cqe, uint32_t xfer);

/**
 * Connect a host to subsystem @subnqn: creates a controller with an admin queue (QID 0) owned by the
 * calling thread. The controller starts disabled; enable it with nkv_loop_enable().
 * @return 0, -ENOENT (no such subsystem), -ENOMEM.
 */
int nkv_loop_connect(struct nkv_target *tgt, const char *subnqn, const char *hostnqn,
		     struct nkv_loop_ctrlr **out);

/** Disconnect: waits (bounded) for outstanding commands, then frees the controller and its queues. */
void nkv_loop_disconnect(struct nkv_loop_ctrlr *c);

/** Fabrics Property Get/Set. @size is 4 or 8. @return 0, or -EINVAL (bad offset/size/read-only). */
int nkv_loop_prop_get(struct nkv_loop_ctrlr *c, uint32_t ofs, unsigned size, uint64_t *val);
int nkv_loop_prop_set(struct nkv_loop_ctrlr *c, uint32_t ofs, unsigned size, uint64_t val);

/** Write CC (EN=1, CSS=110b, IOSQES 6, IOCQES 4) and wait for CSTS.RDY. @return 0 or -EIO (CFS). */
int nkv_loop_enable(struct nkv_loop_ctrlr *c);

/** The admin queue pair (QID 0). */
struct nkv_loop_qp *nkv_loop_admin_qp(struct nkv_loop_ctrlr *c);

/**
 * Create I/O queue pair @qid with @depth slots, owned by the calling thread.
 * @return 0, -EINVAL (qid 0 or over the granted queue count, depth 0 or above MQES+1), -EEXIST, -ENOMEM.
 */
int nkv_loop_qp_create(struct nkv_loop_ctrlr *c, uint16_t qid, uint16_t depth, struct nkv_loop_qp **out);

/** Destroy an I/O queue pair after waiting (bounded) for its outstanding commands. */
void nkv_loop_qp_destroy(struct nkv_loop_qp *qp);

/**
 * Submit one SQE with an optional data buffer of @len bytes (source for host-to-controller
 * commands, destination otherwise). The CID is assigned by the queue pair. @cb runs from
 * nkv_loop_qp_poll() (or from this call when the command completes at once).
 * @return 0, or -EBUSY (queue full).
 */
int nkv_loop_qp_submit(struct nkv_loop_qp *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len,
		       nkv_loop_cb cb, void *arg);

/** Run completions handed back by the backend. @timeout_ms < 0 waits for one; 0 never waits.
 *  @return commands completed (>= 0), or -ETIMEDOUT when a wait saw none. */
int nkv_loop_qp_poll(struct nkv_loop_qp *qp, int timeout_ms);

/** Commands submitted and not yet completed. */
unsigned nkv_loop_qp_outstanding(const struct nkv_loop_qp *qp);

/**
 * Submit and wait for one command (bounded by 5 minutes; backend ops time out well before).
 * @return 0 with *cqe filled (check its status), or -EBUSY / -ETIMEDOUT.
 */
int nkv_loop_qp_exec(struct nkv_loop_qp *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len,
		     struct nkv_cqe *cqe, uint32_t *xfer);

#ifdef __cplusplus
}
#endif
#endif /* NKV_TARGET_H */
