/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_limits.h - what one NVMe/TCP peer may hold (issue 18): connections, controllers and command
 * buffer bytes, per host and in total, so that no single host can take the gateway from the others.
 *
 * A "host" here is the peer's IP address: it is known at accept time, before any NQN, and a host
 * cannot mint new ones for free the way it can mint host NQNs. Buffer bytes are charged at three
 * levels (connection, host, transport); connection bytes are the caller's (one reactor owns a
 * connection), host and transport bytes are atomics shared by every reactor. Connection and
 * controller counts take a mutex: they change once per connection, never per command.
 */
#ifndef NKV_TCP_LIMITS_H
#define NKV_TCP_LIMITS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nkv/nkv_target.h"

#define TCP_HOST_BUCKETS 256

/** One peer address and what its connections hold. */
struct tcp_host {
	struct tcp_host *next;          /* hash chain (lim->lock) */
	uint8_t addr[16];               /* IPv4 as v4-mapped IPv6 */
	unsigned refs;                  /* connections not yet freed (lim->lock) */
	unsigned conns;                 /* connections not yet closed (lim->lock) */
	unsigned ctrlrs;                /* live controllers created from this address (lim->lock) */
	atomic_uint_fast64_t buffered;  /* buffer bytes charged by its connections */
};

struct tcp_limits {
	const struct nkv_tcp_conf *conf;  /* the transport's, defaults applied */
	pthread_mutex_t lock;
	struct tcp_host *hosts[TCP_HOST_BUCKETS];
	unsigned conns, ctrlrs;           /* totals (lock) */
	atomic_uint_fast64_t buffered;    /* bytes charged by every connection */
	uint64_t warned_ms;               /* last accept-side warning (acceptor thread), rate limiting */
	unsigned refused;                 /* connections refused since then */
};

/** Fill the limit and deadline fields of @conf left at 0 (see struct nkv_tcp_conf). */
void nkv_tcp_limits_defaults(struct nkv_tcp_conf *conf);

/** Set up @l for @conf (kept by pointer; must outlive @l). @return 0 or -errno. */
int nkv_tcp_limits_init(struct tcp_limits *l, const struct nkv_tcp_conf *conf);
/** Free the host table. Every host must have been put. */
void nkv_tcp_limits_fini(struct tcp_limits *l);

/**
 * Admit a new connection from @peer: counts it against max_conns and max_host_conns.
 * @return 0 with *@out referenced, -EMLINK (transport full), -EUSERS (this host's share is full),
 * -ENOMEM. Thread-safe.
 */
int nkv_tcp_host_attach(struct tcp_limits *l, const struct sockaddr_storage *peer, struct tcp_host **out);
/** The connection's socket closed: it no longer counts against the connection limits. Thread-safe. */
void nkv_tcp_host_closed(struct tcp_limits *l, struct tcp_host *h);
/** Drop the connection's reference (after its last buffer was uncharged). Thread-safe. */
void nkv_tcp_host_put(struct tcp_limits *l, struct tcp_host *h);

/** "ADDR:PORT" of the peer of @fd into @buf. */
void nkv_tcp_peer_name(int fd, char *buf, size_t len);
/** Close @fd, a connection refused with @why (-EMLINK or -EUSERS from nkv_tcp_host_attach), and
 * log it at most every 10 s with a count. Acceptor thread only. */
void nkv_tcp_refuse(struct tcp_limits *l, int fd, int why);
/** Log (at most every 10 s) that accept failed with @err (EMFILE...). Acceptor thread only. */
void nkv_tcp_accept_failed(struct tcp_limits *l, int err);

/** Count a new controller of @h against max_ctrlrs and max_host_ctrlrs. @return 0 or -EBUSY. */
int nkv_tcp_ctrlr_claim(struct tcp_limits *l, struct tcp_host *h);
void nkv_tcp_ctrlr_release(struct tcp_limits *l, struct tcp_host *h);

/** How a charge may pass the caps. */
enum tcp_charge {
	TCP_CHARGE_WAIT,   /* may wait: every cap applies */
	TCP_CHARGE_STREAM, /* in-capsule data already in the stream: past the connection cap and the
			    * transport budget, never past the host cap (small commands pin memory too) */
	TCP_CHARGE_ADMIN,  /* a small admin-queue buffer (Identify, logs): past every cap, so a host
			    * can always bring up a controller; bounded by controllers x admin SQ size */
};

/**
 * Charge @need buffer bytes to a connection (*@conn_bytes), its host and the transport.
 * A level may always go from nothing to one command however large it is (a value bigger than a
 * cap must still make progress), never past a cap once it holds something, except as @mode allows.
 * @return 0; -EBUSY over the connection or host cap (only this host waits); -EAGAIN over the
 * transport budget (everyone waits, oldest first). Owner reactor of the connection only.
 */
int nkv_tcp_charge(struct tcp_limits *l, struct tcp_host *h, uint64_t *conn_bytes, uint64_t need,
		   enum tcp_charge mode);
/** Return bytes charged with nkv_tcp_charge(). */
void nkv_tcp_uncharge(struct tcp_limits *l, struct tcp_host *h, uint64_t *conn_bytes, uint64_t n);

#endif
