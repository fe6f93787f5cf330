/* SPDX-License-Identifier: Apache-2.0 */
/* daemon.h - pieces of the rados-nkv daemon shared between its files. */
#ifndef NKV_DAEMON_H
#define NKV_DAEMON_H

#include "config.h"
#include "nkv/nkv_target.h"

/** Serve subsystem @nqn over shared memory on @path (the transport starts on first use), with the
 *  socket's mode and group from @c. @return 0 or -errno (logged). */
int daemon_shm_serve(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm, const char *nqn,
		     const char *path);

/** The same as a vfio-user device, its clients acting as @hostnqn ("" or NULL: by uid). */
int daemon_vfu_serve(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm, const char *nqn,
		     const char *path, const char *hostnqn);

struct daemon_control;

/**
 * Start the control plane (control.c): the state (group object, state file or memory) seeded from
 * @c, applied to the running target, and the gRPC server on c->control_addr. @return 0 or -1 (logged).
 */
int daemon_control_start(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_tcp *tcp,
			 struct nkv_shm **shm, struct daemon_control **out);

/**
 * Give @tgt the controller IDs of this gateway's range in its group (nkv_ctl_group_range), before it
 * listens. Outside a group nothing changes. @return 0 or -1 (logged: every range held, or the
 * group's state unreadable).
 */
int daemon_control_range(const struct daemon_conf *c, struct nkv_target *tgt);

/** Stop the gRPC server and the watcher (before the transports go). */
void daemon_control_stop(struct daemon_control *dc);

/**
 * --check: print the state stored in the group or state file, which wins over @c's subsystems,
 * namespaces and hosts, and the stored subsystems this gateway would not serve on a listener off
 * loopback (src/common/exposure.h). Nothing is changed. @return 0 (also: nothing stored), or -1
 * (the state cannot be read: the daemon would not start; said on stderr).
 */
int daemon_control_check(const struct daemon_conf *c);

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

/* ---- cache events (events.c; docs/operations.md "Cache events") ---- */

enum events_format {
	EVENTS_ARRAY = 0, /* vLLM's array layout, as llm-d decodes it: [ts, [[tag, field...]], dp_rank] */
	EVENTS_MAP = 1,   /* vLLM's layout since it dropped array_like from its events: the same array
			   * batch, each event a map {"type": tag, field: value...} */
};

#define EVENTS_RING 16384  /* events queued for the events thread at most; more are dropped (counted) */
#define EVENTS_NS_MAX 256  /* a RADOS namespace name of this many bytes or more: its events are dropped */
#define EVENTS_MSG_MAX 512 /* bound of one encoded payload */

struct daemon_events;

/** Counters of the event publisher. */
struct events_counts {
	uint64_t published;   /* messages sent */
	uint64_t dropped;     /* events lost before sending: queue full, or a namespace name too long */
	uint64_t send_errors; /* messages ZMQ refused */
	uint64_t queued;      /* events waiting in the queue now */
};

/**
 * The payload of one event in @format at @ts (seconds since the epoch): a BlockStored (@stored) or a
 * BlockRemoved naming block @hash (a msgpack uint64, always 9 bytes), medium @medium (NULL or "": nil),
 * into @out of @cap bytes. @return its length, -EINVAL (bad format) or -ENOSPC (@cap too small).
 */
int events_encode(int format, double ts, bool stored, uint64_t hash, const char *medium, void *out, size_t cap);

/**
 * The publisher (events.c, built with NKV_HAVE_EVENTS; main.c wires it to the target and the
 * metrics; tests use it alone): events_open() binds @endpoint (or connects to it with @connect: a
 * subscriber that binds, as llm-d's global socket) with a queue of @ring events, events_post() is
 * the target's callback (any thread; never blocks on I/O), events_run() starts the thread that
 * sends, events_close() sends what is queued and frees. The topic is kv@@medium@<RADOS namespace>,
 * or kv@@gateway@<RADOS namespace> without a medium. @return 0 or -errno.
 */
int events_open(const char *endpoint, bool connect, const char *gateway, int format, const char *medium,
		unsigned ring, struct daemon_events **out);
int events_run(struct daemon_events *d);
void events_post(void *arg, const struct nkv_cache_event *ev);
void events_close(struct daemon_events *d);
void events_counts(struct daemon_events *d, struct events_counts *c);
void events_read_counts(void *arg, struct events_counts *c); /* events_counts() for metrics_set_events() */
/** Tests: while @hold, the events thread takes nothing from the queue (so a test can fill it). */
void events_test_hold(struct daemon_events *d, bool hold);
/** The message of an error events_open() returned (ZMQ's own codes included). */
const char *events_strerror(int rc);

/** Where metrics_render() reads the event publisher's counters (NULL: none, the families are left out). */
void metrics_set_events(void (*read)(void *arg, struct events_counts *c), void *arg);

#endif
