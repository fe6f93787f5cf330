/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.h - the control plane's C side. The gRPC server (server.cc) is glue only: it turns each RPC's
 * request message into JSON (proto3 JSON mapping with the original field names, as
 * proto/rados_nkv/v1/control.proto defines them), calls nkv_ctl_call() with the RPC's method name,
 * and turns the JSON it returns back into the response message. Every rule lives here, in C:
 * validation, the commit to the group's state (RADOS object or file) and the live change of the
 * running target.
 */
#ifndef NKV_CONTROL_CTL_H
#define NKV_CONTROL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_ctl;
struct nkv_target;

/** What the daemon does for the control plane: listeners are its business (modes, groups). */
struct nkv_ctl_hooks {
	void *arg;
	/** Listen on NVMe/TCP @addr:@port (@tls: a secure listener). @return bound port or -errno. */
	int (*tcp_listen)(void *arg, const char *addr, unsigned port, bool tls);
	/** Stop listening there. @return 0 or -errno. */
	int (*tcp_unlisten)(void *arg, const char *addr, unsigned port);
	/** Serve subsystem @nqn over shared memory on @path. @return 0 or -errno. */
	int (*shm_listen)(void *arg, const char *nqn, const char *path);
	/** Serve subsystem @nqn as a vfio-user device on @path, its clients acting as @hostnqn ("": by
	 * uid). NULL: not served. @return 0 or -errno. */
	int (*vfu_listen)(void *arg, const char *nqn, const char *path, const char *hostnqn);
	/** Could a TLS listener of this gateway admit anyone (a TLS PSK is configured)? NULL: yes. */
	bool (*tls_ready)(void *arg);
};

/** The control plane of one gateway (nkv_ctl_create). */
struct nkv_ctl_conf {
	struct nkv_target *tgt;
	struct nkv_ctl_hooks hooks;
	const char *gateway;     /* this gateway's name in the group (--gateway-name) */
	const char *group;       /* --group NAME: state in RADOS; NULL: not in a group */
	const char *group_pool;  /* pool of the group's state object */
	const char *ceph_conf, *keyring, *client_id; /* cluster access for the state object */
	const char *state_file;  /* --state-file: state in a local JSON file (no group); NULL: memory */
	const char *backend;     /* "rados" or "mem" (GatewayInfo) */
	const char *version;
	unsigned drain_ms;       /* how long a removal waits for commands in flight */
	unsigned poll_ms;        /* re-read the group's epoch at least this often (0: 2000) */
	const char *shm_dir;     /* CreateSubsystem's shm_socket and vfio_user_socket must name a file directly in this
				  * directory (no "/" after it); NULL: any path */
};

/**
 * Start the control plane over a target the daemon has already configured from its flags and file
 * (@seed_json: that configuration as the state's JSON, see state.c). In a group or with a state
 * file, a stored state wins: the target is changed to match it; when none is stored yet, @seed_json
 * is stored (the first gateway seeds the group). A group is then watched (RADOS watch/notify, and
 * the epoch re-read every poll_ms) and every committed change applied live.
 * A group's malformed entries (ones no gateway wrote) are left out and logged, and changes are
 * refused (-EPERM) until RepairState removes them.
 * @return 0 or -errno (state unreadable: logged; -ENOTUNIQ: a live gateway of the group has this
 * gateway's name).
 */
int nkv_ctl_create(const struct nkv_ctl_conf *conf, const char *seed_json, struct nkv_ctl **out);

/**
 * Read the state stored where @conf says (group object or state file; memory: none) without joining
 * or changing anything: what nkv_ctl_create() would apply (rados-nkv --check). @where gets the
 * store's name ("rados:POOL/OBJECT", "file:PATH"). @return 0 with *state_json malloc'ed (NULL:
 * nothing stored yet), or -errno (unreachable, unreadable, -EINVAL: not a state).
 */
int nkv_ctl_stored_state(const struct nkv_ctl_conf *conf, char **state_json, char *where, size_t n);

/**
 * The controller IDs gateway conf->gateway of group conf->group gives, read from the group's state
 * before the daemon listens (so that no Connect finds it without a range): its own range when the
 * state holds it (a restart), else the lowest free one, which nkv_ctl_create() then claims (two
 * names joining at once: the loser moves to the next range when it commits). Not a group: the
 * whole 1..FFEFh. @return 0, -ENOSPC (every range is held by other names), or -errno (unreadable).
 */
int nkv_ctl_group_range(const struct nkv_ctl_conf *conf, uint16_t *min, uint16_t *max);

/** Stop watching and free. Leaves the target as it is. */
void nkv_ctl_destroy(struct nkv_ctl *ctl);

/**
 * Run one control-plane method. @method is the RPC name ("CreateSubsystem", "ListNamespaces", ...);
 * @req_json its request message as JSON (an object; "{}" for an empty one; 64-bit integers may be
 * numbers or decimal strings). Thread-safe: calls are serialised inside.
 * On success *resp_json is a malloc'ed JSON object (the response message) and 0 is returned.
 * On failure *err_msg is a malloc'ed message naming the object, and the return value maps to a gRPC
 * status code:
 *   -ENOENT NOT_FOUND, -EEXIST ALREADY_EXISTS, -EINVAL INVALID_ARGUMENT,
 *   -EPERM FAILED_PRECONDITION, -EAGAIN ABORTED, -EIO / -ETIMEDOUT UNAVAILABLE,
 *   -ENOSYS UNIMPLEMENTED (unknown method), anything else INTERNAL.
 * The caller frees both strings with free().
 */
int nkv_ctl_call(struct nkv_ctl *ctl, const char *method, const char *req_json, char **resp_json,
		 char **err_msg);

/** Where and how the gRPC server listens (--control, --control-tls-*). */
struct nkv_ctl_server_conf {
	const char *addr;       /* "HOST:PORT" (e.g. "127.0.0.1:5500", "[::1]:5500") or "unix:PATH" */
	const char *tls_cert;   /* PEM server certificate chain; NULL: plaintext */
	const char *tls_key;    /* PEM private key of tls_cert */
	const char *client_ca;  /* PEM CA bundle: clients must present a certificate it signed (mTLS);
				 * NULL: clients are not asked for one */
	unsigned max_message;   /* largest request in bytes; 0: 4 MiB */
	/* "unix:" only: the socket file is 0660, made race-free, and every connection's peer is
	 * checked (SO_PEERCRED): the server's own user and root may call; with peer_group_set,
	 * members of group peer_gid too (the socket file gets that group). Others are disconnected. */
	bool peer_group_set;
	unsigned peer_gid;
};

struct nkv_ctl_server;

/**
 * Start the gRPC server (its own threads) serving @ctl. @return 0, -EINVAL (bad address or
 * unreadable TLS files: logged), -EADDRINUSE (address taken), -ENOMEM.
 */
int nkv_ctl_server_start(struct nkv_ctl *ctl, const struct nkv_ctl_server_conf *conf,
			 struct nkv_ctl_server **out);

/** Stop the server: refuse new calls, wait up to @grace_ms for calls in flight, free it. */
void nkv_ctl_server_stop(struct nkv_ctl_server *srv, int grace_ms);

/** gRPC client for nkv-ctl: the same JSON contract, over the wire. */
struct nkv_ctl_client_conf {
	const char *addr;       /* as nkv_ctl_server_conf.addr */
	const char *tls_ca;     /* PEM CA that signed the server's certificate; NULL: plaintext */
	const char *tls_cert;   /* client certificate and key for mTLS; NULL: none */
	const char *tls_key;
	const char *tls_server_name; /* override the name checked in the server's certificate */
	unsigned timeout_ms;    /* per call; 0: 10000 */
};

/**
 * Call @method on the server at conf->addr with @req_json. @return 0 with *resp_json (malloc'ed),
 * or the negative errno matching the gRPC status (the inverse of the table above; UNAVAILABLE and
 * DEADLINE_EXCEEDED: -ECONNREFUSED / -ETIMEDOUT, UNAUTHENTICATED / PERMISSION_DENIED: -EACCES)
 * with *err_msg (malloc'ed) holding the server's message.
 */
int nkv_ctl_client_call(const struct nkv_ctl_client_conf *conf, const char *method,
			const char *req_json, char **resp_json, char **err_msg);

#ifdef __cplusplus
}
#endif
#endif
