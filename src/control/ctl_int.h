/*
 * ctl_int.h - inside the control plane: the state model (state.c), where it is kept (store.c) and
 * the methods (ctl.c).
 *
 * The state is a json-c object:
 *   {"epoch": N,
 *    "subsystems": {NQN: {"nqn", "pool", "max_namespaces", "allow_any_host", "loopback_any_host", "shm_socket",
 *                         "hosts": {HOSTNQN: {"host_nqn", "dhchap_key", "dhchap_ctrl_key"}},
 *                         "namespaces": {"NSID": {"nsid", "rados_namespace", "max_value", "read_only",
 *                                                 "cache": CachePolicy (present: a cache namespace)}}}},
 *    "listeners": {"GATEWAY/ADDRESS/PORT": {"gateway", "address", "port", "tls"}}}
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
#include <stdint.h>

#include "control/ctl.h"

/* ---- state.c ---- */
json_object *st_new(void);
uint64_t st_epoch(json_object *st);
json_object *st_subsystems(json_object *st);
json_object *st_listeners(json_object *st);
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

/* ---- store.c ---- */
struct ctl_store;
/** Open the store the conf names (group object, file, or memory). */
int store_open(const struct nkv_ctl_conf *conf, struct ctl_store **out);
void store_close(struct ctl_store *s);
/** Read the whole state. @return 0 (*out NULL: nothing stored yet) or -errno. */
int store_load(struct ctl_store *s, json_object **out);
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
	pthread_mutex_t kick_mu;     /* stop, kick and cv only */
	pthread_cond_t cv;
	bool stop, kick;
	json_object *exposed;        /* "NQN LISTENER" pairs refused here, logged (log_exposures) */
};

#endif
