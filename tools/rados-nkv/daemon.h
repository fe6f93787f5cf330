/* daemon.h - pieces of the rados-nkv daemon shared between its files. */
#ifndef NKV_DAEMON_H
#define NKV_DAEMON_H

#include "config.h"
#include "nkv/nkv_target.h"

/** Serve subsystem @nqn over shared memory on @path (the transport starts on first use), with the
 *  socket's mode and group from @c. @return 0 or -errno (logged). */
int daemon_shm_serve(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm, const char *nqn,
		     const char *path);

struct daemon_control;

/**
 * Start the control plane (control.c): the state (group object, state file or memory) seeded from
 * @c, applied to the running target, and the gRPC server on c->control_addr. @return 0 or -1 (logged).
 */
int daemon_control_start(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_tcp *tcp,
			 struct nkv_shm **shm, struct daemon_control **out);

/** Stop the gRPC server and the watcher (before the transports go). */
void daemon_control_stop(struct daemon_control *dc);

struct daemon_metrics;

/**
 * Serve GET /metrics on c->metrics (metrics_http.c), when c->metrics_on; logs the bound port.
 * @return 0 (*out NULL when off) or -1 (logged: address in use, bad address).
 */
int daemon_metrics_start(const struct daemon_conf *c, struct nkv_target *tgt, struct daemon_metrics **out);

/** Stop the metrics server (before the transports go); NULL is a no-op. */
void daemon_metrics_stop(struct daemon_metrics *m);

/**
 * The target's metrics as Prometheus text, format 0.0.4 (metrics.c), in a malloc'ed buffer of
 * *len bytes (no NUL counted) at most about @max_bytes long: namespaces past that are left out and
 * counted in rados_nkv_metrics_namespaces_omitted. @return 0 or -ENOMEM.
 */
int metrics_render(struct nkv_target *tgt, size_t max_bytes, char **out, size_t *len);

#endif
