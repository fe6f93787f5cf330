/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_int.h - inside the control plane: the state model (state.c), where it is kept (store.c) and
 * the methods (ctl.c).
 *
 * The state is a json-c object:
 *   {"epoch": N,
 *    "subsystems": {NQN: {"nqn", "pool", "max_namespaces", "allow_any_host", "loopback_any_host", "shm_socket",
 *                         "vfio_user_socket", "vfio_user_host" (both absent: not served over vfio-user),
 *                         "hosts": {HOSTNQN: {"host_nqn", "dhchap_key", "dhchap_ctrl_key"}},
 *                         "namespaces": {"NSID": {"nsid", "rados_namespace", "max_value", "read_only",
 *                                                 "ana_group" (absent: 1),
 *                                                 "cache": CachePolicy (present: a cache namespace)}}}},
 *    "listeners": {"GATEWAY/ADDRESS/PORT": {"gateway", "address", "port", "tls"}},
 *    "gateways": {GATEWAY: {"gateway", "cntlid_range",       (a group's only; may be absent)
 *                           "ana": {"GROUP": "non-optimized"|"inaccessible"} (absent: optimized)}}}
 * Objects keyed by name, so that two states compare entry by entry.
 * Who may connect to a subsystem (st_access): "allow_any_host" true: any host, through every
 * listener (the operator said so); else "loopback_any_host" true and no hosts: any host, but never
 * through a listener that exposes it (src/common/exposure.h; a subsystem the flags or file gave no
 * allowlist and no --allow-any-host); else its hosts only (none: nobody).
 */
#ifndef NKV_CONTROL_CTL_INT_H
#define NKV_CONTROL_CTL_INT_H

#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "control/ctl.h"
#include "nkv/nkv_target.h"

/* ---- state.c ---- */
json_object *st_new(void);
uint64_t st_epoch(json_object *st);
json_object *st_subsystems(json_object *st);
json_object *st_listeners(json_object *st);
/** The group's gateways (NULL: none recorded: not a group, or a state from before ranges). */
json_object *st_gateways(json_object *st);
/* Controller ID ranges of a group's gateways: range i is i * 2040 + 1 .. (i + 1) * 2040, as
 * ceph-nvmeof divides the CNTLID space; 32 of them fit under FFEFh. */
#define ST_CNTLID_RANGE 2040u
#define ST_CNTLID_RANGES 32u
/**
 * Give gateway @gw of state @st a controller ID range if it has none: the lowest one no gateway of
 * @st holds. @return 1 (added), 0 (it has one), -ENOSPC (all ST_CNTLID_RANGES are held).
 */
int st_claim_range(json_object *st, const char *gw);
/** An ANA state's name ("optimized", "non-optimized", "inaccessible") as the state and the RPCs
 *  write it, or NULL. */
const char *st_ana_name(enum nkv_ana_state s);
/** The state a name gives, or 0 (not one of the three). */
enum nkv_ana_state st_ana_parse(const char *name);
/** Is @ana a gateway's "ana" object of the model (absent is)? */
bool st_ana_ok(json_object *ana);
/** Gateway @g's state for ANA group @grp in its "ana" object (optimized when unnamed). */
enum nkv_ana_state st_ana_of(json_object *g, unsigned grp);
/** The member @key of object @o, or NULL. */
json_object *st_get(json_object *o, const char *key);
/** Member @key as an unsigned integer (a number or a decimal string, as proto3 JSON writes 64-bit
 *  ones); @def when absent. @return 0 or -EINVAL (not a non-negative integer). */
int st_u64(json_object *o, const char *key, uint64_t def, uint64_t *out);
const char *st_str(json_object *o, const char *key);
int st_bool(json_object *o, const char *key);
/** Deep copy. */
json_object *st_copy(json_object *st);
/** Listener key "GATEWAY/ADDRESS/PORT". */
void st_listener_key(char *out, size_t n, const char *gw, const char *addr, unsigned port);
/** Who may connect to subsystem @ss of a state (see above). */
enum st_access {
	ST_ALLOWLIST,   /* its hosts only; none: nobody */
	ST_ANY,         /* any host, explicitly */
	ST_LOOPBACK,    /* any host, through listeners that do not expose it only */
};
enum st_access st_access(json_object *ss);
/** Does the state parse as this model? @return 0 or -EINVAL (why in @why). */
int st_check(json_object *st, const char **why);

/**
 * Change the running target from @applied to @want (this gateway's listeners only), as far as it
 * goes: whatever fails is logged and left out of @applied, so the next pass tries again.
 * @return 0 when everything applied, else the first error.
 */
int st_reconcile(struct nkv_ctl *ctl, json_object *applied, json_object *want);
/**
 * The group-wide part of st_reconcile: this gateway's controller ID range (none in a group whose
 * state has no entry for it yet: Connects are refused until it has one; the whole range outside a
 * group) and the other gateways' listeners in the discovery log.
 */
void st_reconcile_gateways(struct nkv_ctl *ctl, json_object *applied, json_object *want);

/* ---- group_state.c: the state as a group object's omap entries (no RADOS) ---- */
#define GROUP_KEY_MAX 2048         /* longest key read (a gateway writes at most 1,341 bytes) */
#define GROUP_KEY_MAX_STR "2048"
#define GROUP_VALUE_MAX 65536      /* largest value read (a gateway writes under 2 KiB) */
#define GROUP_VALUE_MAX_STR "65536"
#define GROUP_BAD_REPORT 100       /* malformed entries listed (all are counted) */
/** One omap entry as read: bytes, not NUL-terminated. */
struct group_entry {
	const char *key, *val;
	size_t klen, vlen;
};
/** What group_parse makes of a set of entries. */
struct group_parsed {
	uint64_t epoch;       /* the "epoch" entry (0: none: nothing stored) */
	json_object *st;      /* the state of the well-formed entries */
	json_object *raw;     /* those entries, omap key -> value, as stored (the next commit's diff) */
	json_object *bad;     /* the others: [{"key": group_key_print, "reason": TEXT}], GROUP_BAD_REPORT at most */
	size_t nbad;          /* how many others */
};
/** The omap entries of state @st: key -> value (JSON strings in an object). */
json_object *group_flatten(json_object *st);
/**
 * Rebuild a state from entries @e[0..@n) (any order, "epoch" among them). An entry that breaks a
 * rule (a key too long or not the one its value gives, a value that is not a JSON object of the
 * model, a second entry for one object, a host or namespace without its subsystem) is left out and
 * listed in out->bad. @return 0 (free with group_parsed_free), -EINVAL (a bug: the state of
 * checked entries fails st_check).
 */
int group_parse(const struct group_entry *e, size_t n, struct group_parsed *out);
void group_parsed_free(struct group_parsed *g);
/** Key bytes as printable ASCII: bytes outside 0x20-0x7e and '\\' as \xHH; a key longer than
 *  GROUP_KEY_MAX as its first 200 bytes, "...", its length in bytes. malloc'ed, or NULL. */
char *group_key_print(const char *k, size_t n);

/* ---- store.c ---- */
struct ctl_store;
/** Open the store the conf names (group object, file, or memory). */
int store_open(const struct nkv_ctl_conf *conf, struct ctl_store **out);
void store_close(struct ctl_store *s);
/**
 * Read the whole state. @return 0 (*out NULL: nothing stored yet) or -errno: -EFBIG (a group
 * object with more than GROUP_MAX_ENTRIES entries or GROUP_MAX_BYTES), -ETIMEDOUT (not read within
 * GROUP_LOAD_MS), -EINTR (store_cancel). A group's malformed entries are left out of *out and
 * described in *bad when @bad is not NULL: {"malformed": N, "entries": group_parsed.bad}, or NULL
 * when there are none.
 */
int store_load(struct ctl_store *s, json_object **out, json_object **bad);
/** Make a load in progress, and every later one, return -EINTR (any thread): shutdown. */
void store_cancel(struct ctl_store *s);
/**
 * Remove the malformed entries named by @keys (group_key_print form; @n of them; @all: every
 * malformed entry) if the stored epoch is still @epoch, and advance it. @return 0, -ECANCELED
 * (the epoch moved), -ENOENT (a key is not a malformed entry: its text in @missing), -ENOTSUP
 * (not a group), or -errno.
 */
int store_repair(struct ctl_store *s, uint64_t epoch, const char *const *keys, size_t n, bool all,
		 const char **missing);
/**
 * Ask the group's live gateways for their names (a notify every watcher answers, @timeout_ms).
 * @return 1 when a gateway other than this process answers with name @gw (who: its RADOS client,
 * in @who), 0 when none does, or -errno.
 */
int store_name_taken(struct ctl_store *s, const char *gw, char *who, size_t n, unsigned timeout_ms);
/** What this gateway answers to store_name_taken: its name (set before store_watch). */
void store_set_identity(struct ctl_store *s, const char *gw);
/** Testing hook: run the watch-error callback as librados does when the watch is lost. */
void store_test_watch_error(struct ctl_store *s);
/** Read only the epoch. @return it (0: nothing stored) or -errno. */
int64_t store_epoch(struct ctl_store *s);
/**
 * Write @next (whose "epoch" must be @old + 1) if the stored epoch is still @old, in one atomic
 * step. @prev is the state @next was made from (@old's), so only changed entries are written.
 * @return 0, -ECANCELED (someone else committed first), or -errno.
 */
int store_commit(struct ctl_store *s, json_object *prev, json_object *next);
/** Tell the group's other gateways (RADOS notify, bounded wait). */
void store_notify(struct ctl_store *s);
/** Call @fn(arg) when another gateway notifies (from a librados thread). @return 0 or -errno. */
int store_watch(struct ctl_store *s, void (*fn)(void *arg), void *arg);
/** "rados:POOL/OBJECT", "file:PATH" or "memory". */
const char *store_name(struct ctl_store *s);

/* ---- ctl.c ---- */
struct nkv_ctl {
	struct nkv_ctl_conf conf;
	char gateway[256], group[256], backend[16], version[32];
	struct ctl_store *store;
	pthread_mutex_t mu;          /* one call or one reconcile at a time */
	json_object *want;           /* the last state read or committed */
	json_object *applied;        /* what the target runs */
	uint64_t started_ms;
	pthread_t thread;            /* the watcher: re-reads and applies the group's changes */
	json_object *bad;            /* the malformed entries of the group's state last read, or NULL */
	uint64_t bad_logged;         /* the epoch whose malformed entries were logged */
	bool joined;                 /* this gateway's listeners are in the group's state */
	pthread_mutex_t kick_mu;     /* stop, kick and cv only */
	pthread_cond_t cv;
	bool stop, kick;
	json_object *exposed;        /* "NQN LISTENER" pairs refused here, logged (log_exposures) */
};

#endif
