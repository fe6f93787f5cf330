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

#endif
