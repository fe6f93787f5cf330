/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faults.h - the fault suite (test/faults): a rados-nkv daemon started by the test, hosts loading it
 * through libnkv over NVMe/TCP, and one fault per scenario (suite.c). Every scenario checks the same
 * invariant with the same parts:
 *   - values (ledger.c) describe themselves: a header with the key, the version and the length, then
 *     a pattern from key and version, so a torn, misplaced or stale value is recognised as such;
 *   - a ledger per key (ledger.c) of the last acknowledged version and of the later Stores whose
 *     outcome is open (failed with 82h or a lost connection): a value read back must be the last
 *     acknowledged version, or one of those later ones, never older, never torn;
 *   - the load (load.c): worker threads, each with its own controller and I/O queue pair at a given
 *     queue depth, Store and Retrieve their own keys (one command per key at a time), time every
 *     command, reconnect when the gateway goes away, and read every key back at the end;
 *   - the gateway (gateway.c): the rados-nkv child process, its log, its VmRSS and descriptors.
 */
#ifndef NKV_TEST_FAULTS_H
#define NKV_TEST_FAULTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "check.h"

#define FAULT_SUBNQN "nqn.2026-11.io.rados-nkv:faults"
#define FAULT_HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000fa17"

/* Statuses as SCT << 8 | SC. */
#define ST_NOT_READY 0x082    /* 82h Namespace Not Ready (DNR clear): the cluster did not answer in time */
#define ST_NOT_EXIST 0x087    /* 87h Key Does Not Exist */
#define ST_HOST_PATH 0x370    /* libnkv: the connection was lost before the CQE (may have executed) */

uint64_t f_now_ms(void);
/** splitmix64 step. */
uint64_t f_rand(uint64_t *state);

/* ---- self-describing values (ledger.c) --------------------------------------------------------- */

#define FV_HDR 32 /* magic, version, key, length, check; every value the suite stores is at least this */

/** Fill @buf with version @ver of key @key, @len bytes (>= FV_HDR). */
void fv_fill(uint8_t *buf, uint32_t len, uint64_t key, uint32_t ver);

/**
 * Check that @buf (@len bytes) is a whole value of key @key.
 * @return its version (>= 1), or 0 with @why said (a header that is not ours, another key's value,
 * a length other than the header's, the first byte where the pattern differs).
 */
uint32_t fv_check(const uint8_t *buf, uint32_t len, uint64_t key, char why[160]);

/* ---- ledger (ledger.c) --------------------------------------------------------------------------- */

#define FL_OPEN 32 /* Stores with an open outcome remembered per key */

/** What the host knows about one key. Owned by one thread at a time. */
struct fl_key {
	uint32_t next_ver;   /* the version the next Store carries (from 1) */
	uint32_t floor;      /* no read may return an older version: the last acknowledged one, or a newer
			      * open one that a read has already returned; 0: nothing may be there yet */
	uint32_t floor_len;
	uint32_t acked;      /* the last acknowledged version (0: none) */
	uint32_t open_ver[FL_OPEN], open_len[FL_OPEN]; /* Stores newer than floor whose outcome is open */
	unsigned nopen;
	bool overflow;       /* more than FL_OPEN of them: any version in (floor, next_ver) passes */
};

/** A Store of version @ver (@len bytes) completed: @acked (success), else its outcome is open. */
void fl_store_done(struct fl_key *k, uint32_t ver, uint32_t len, bool acked);

/** A Retrieve buffer that holds every version the key may hold now (at least 4 KiB). */
uint32_t fl_read_len(const struct fl_key *k);

/**
 * Judge a Retrieve of key @key: @found (success) with @xfer bytes in @buf of a value of @size bytes
 * (CQE DW0), or not found (87h). A value that is the floor, or an open version newer than it, passes
 * (and becomes the floor); anything else (older, torn, another key's, truncated because it is longer
 * than any version stored, absent while a value must be there) fails with @why said.
 * @return true when the read is allowed.
 */
bool fl_read_done(struct fl_key *k, uint64_t key, bool found, const uint8_t *buf, uint32_t xfer, uint32_t size,
		  char why[200]);

/* ---- load (load.c) ------------------------------------------------------------------------------- */

struct load_conf {
	const char *addr, *port;   /* the gateway's NVMe/TCP listener */
	unsigned workers;          /* threads, each with its own controller and one I/O queue pair */
	unsigned qd;               /* commands in flight per worker */
	unsigned keys;             /* keys per worker (at least qd: one command per key at a time) */
	const uint32_t *sizes;     /* value sizes, picked uniformly; each minus 0..511 bytes (odd sizes) */
	unsigned nsizes;
	unsigned store_pct;        /* Stores among commands, the rest Retrieves */
	unsigned bound_ms;         /* op timeout + grace: a command slower than this counts as slow */
	unsigned hang_ms;          /* a command older than this fails its queue pair (counted as hung) */
	uint64_t key_base;         /* keys are key_base + worker * keys + i (distinct runs, distinct keys) */
};

/** Counts of a load, summed over workers. */
struct load_stats {
	uint64_t stores_ok, stores_failed, reads_ok, reads_absent, reads_failed;
	uint64_t wrong;            /* reads that broke the ledger (torn, stale, lost) */
	uint64_t bad_status;       /* statuses other than success, 82h, Host Pathing Error (87h on reads) */
	uint64_t slow, hung;       /* slower than bound_ms; older than hang_ms */
	uint64_t max_ms;           /* the longest command */
	uint64_t reconnects;       /* new controllers after a lost one */
	unsigned st_code[8], st_count[8], nst; /* failed commands per status */
	/* the final read-back (load_verify) */
	uint64_t final_keys, final_acked, final_verified, final_absent, final_lost, final_unread;
};

struct load;

/** Allocate a load and its ledger (no connection yet). @return NULL on a bad configuration. */
struct load *load_create(const struct load_conf *c);
/** Start the workers: each connects (retrying until halted) and runs mixed commands. */
void load_run(struct load *l);
/** Stop submitting, wait for what is in flight (bounded by hang_ms), disconnect, join. */
void load_halt(struct load *l);
/**
 * Read every key once through new controllers and judge it (the workers, one pass, retrying a read
 * answered 82h or Host Pathing Error up to 5 times). Call after load_halt(). Fills the final_* counts
 * (of this pass: a second call starts them again; load_run() may follow).
 */
void load_verify(struct load *l);
/** Counts summed over the workers: exact after load_halt()/load_verify(); while the workers run they
 * are read without synchronisation, good for progress lines only. */
void load_stats(struct load *l, struct load_stats *s);
/** Stores in flight now (any thread). */
unsigned load_stores_inflight(struct load *l);
/** Workers connected now (any thread). */
unsigned load_connected(struct load *l);
/** Monotonic ms at which the latest-starting failed command started (0: none failed). */
uint64_t load_last_fail_start(struct load *l);
/** Reconnections after a lost controller, all workers (any thread). */
uint64_t load_reconnects(struct load *l);
/** Commands completed so far (any thread). */
uint64_t load_ops(struct load *l);
void load_destroy(struct load *l);

/* ---- the gateway (gateway.c) --------------------------------------------------------------------- */

struct gw {
	const char *bin;           /* rados-nkv */
	const char *backend;       /* "rados" or "mem" */
	const char *pool;          /* the subsystem's pool (NULL: $NKV_CEPH_POOL, else nkv) */
	char addr[64], port[16];   /* NVMe/TCP listener */
	char rados_ns[96];         /* namespace 1's RADOS namespace (unique per run) */
	char shm[200];             /* shared-memory socket, or "" */
	const char *netns;         /* run inside this network namespace (/run/netns/NAME), or NULL */
	unsigned op_timeout_s;
	const char *extra[16];     /* more flags, NULL-terminated */
	const char *cache;         /* namespace 1 is a cache: its JSON "cache" object (the daemon then
				    * gets its subsystem from a configuration file), or NULL */
	char conf[160];            /* that file */
	char dir[128];             /* the run's temporary directory (logs) */
	char log[160];             /* the daemon's stderr, appended across restarts */
	pid_t pid;
	unsigned starts;
};

/** Make the run's directory and pick a free port on @addr. @return 0 or -1. */
int gw_init(struct gw *g, const char *bin, const char *backend, const char *addr);
/** Start the daemon and wait (15 s) until its listener accepts. @return 0 or -1 (said on stderr). */
int gw_start(struct gw *g);
/** SIGKILL the daemon and reap it. */
void gw_kill(struct gw *g);
/** SIGTERM: it must exit 0 within @secs (one CHECK; LeakSanitizer reports make the status nonzero). */
void gw_stop(struct gw *g, int secs);
/** Remove the run's directory (kept, and said, when checks failed or $NKV_FAULTS_KEEP is set). */
void gw_cleanup(struct gw *g);
/** Messages of the daemon's log holding @needle (a rate-limited burst counts with its count). */
unsigned gw_log_count(const struct gw *g, const char *needle);
/** Print the last @n lines of the daemon's log to stderr. */
void gw_log_tail(const struct gw *g, unsigned n);

/** VmRSS of @pid in KiB, or -1. */
long proc_rss_kb(pid_t pid);
/** Open descriptors of @pid, or -1. */
int proc_fds(pid_t pid);
/** Mappings of @pid whose /proc/PID/maps line holds @needle (e.g. "memfd:nkv-buf"). */
unsigned proc_maps_count(pid_t pid, const char *needle);

#endif
