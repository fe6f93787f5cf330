/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_tls.h - TLS on the target's NVMe/TCP listeners (TP 8011; docs/nvme-kv-wire.md C.12).
 *
 * A secure listener's connections start with a TLS 1.3 handshake authenticated by a PSK; the ICReq
 * and every PDU after it travel inside the session (tcp.c reads and writes through src/common/tls.h
 * when a connection has one, the plain path is untouched). PSKs are configured per host and
 * subsystem (nkv_tcp_add_psk): each becomes a table entry per PSK identity it may be offered under
 * (versions 0 and 1, for the subsystem and for the discovery subsystem), holding the TLS PSK derived
 * for it (src/common/nvme_psk.h). The server's OpenSSL callback looks the identity the host offers up
 * in that table; the entry found then binds the connection: its Connect must name the same host NQN
 * and subsystem NQN, or it gets Connect Invalid Host.
 *
 * The context is shared by the reactors (its table under a mutex); a connection's state belongs to
 * its reactor.
 */
#ifndef NKV_TCP_TLS_H
#define NKV_TCP_TLS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/nvme_psk.h"
#include "common/tls.h"
#include "nkv/nkv_spec.h"

struct tcp_tls_ctx;

/** One PSK identity the target accepts, and what it admits. */
struct tcp_psk {
	struct tcp_psk *next;
	struct nkv_tls_psk tls;      /* identity, TLS PSK, cipher */
	char hostnqn[224], subnqn[224];
};

/** A connection of a secure listener. */
struct tcp_tls_conn {
	struct nkv_tls io;
	struct tcp_tls_ctx *ctx;
	const struct tcp_psk *psk;   /* the entry the handshake used (NULL until it succeeded) */
	bool checked;                /* the first byte was a TLS handshake record */
	char offered[128];           /* the start of an identity no entry matched, for the log */
};

/** Create the context (SSL_CTX and an empty table). @return 0, -ENOMEM. */
int nkv_tcp_tls_ctx_create(struct tcp_tls_ctx **out);
void nkv_tcp_tls_ctx_destroy(struct tcp_tls_ctx *x);

/**
 * Accept configured PSK @k from host @hostnqn for subsystem @subnqn (and for the discovery subsystem).
 * NQNs too long for a version 0 identity (255 bytes) get version 1 identities only (logged).
 * @return 0, -EEXIST (that host and subsystem already have a different key), -EINVAL (from
 * nkv_psk_derive(): an empty NQN, or one with a space), -ENOMEM.
 */
int nkv_tcp_tls_add_psk(struct tcp_tls_ctx *x, const char *hostnqn, const char *subnqn, const struct nkv_psk *k);

/** nkv_tcp_add_psk(): load @key (string or @FILE) and add it to *@x, creating the context first.
 *  @return as nkv_tcp_add_psk(). */
int nkv_tcp_tls_add_key(struct tcp_tls_ctx **x, const char *hostnqn, const char *subnqn, const char *key);

/** Number of host/subsystem PSKs configured (the discovery identities not counted). */
unsigned nkv_tcp_tls_npsk(struct tcp_tls_ctx *x);

/** A new accepted connection's TLS state on socket @fd. @return it, or NULL (out of memory). */
struct tcp_tls_conn *nkv_tcp_tls_conn_new(struct tcp_tls_ctx *x, int fd);

/**
 * Advance the handshake on a readiness event. A first byte other than a TLS handshake record (22)
 * fails at once: a plain NVMe/TCP host sends an ICReq (type 0). @return 0 (done), -EAGAIN, or -errno
 * with the reason in tc->io.why (-EKEYREJECTED: no PSK for the offered identity, or the host's key
 * differs; -EPROTO: not TLS; -ECONNRESET: the host went away).
 */
int nkv_tcp_tls_accept(struct tcp_tls_conn *tc, int fd);

/** End the session (close_notify when healthy) and free the state; the socket stays open. */
void nkv_tcp_tls_conn_free(struct tcp_tls_conn *tc);

/**
 * Does the Connect data @data (@len bytes) name the host and subsystem the connection's PSK identity
 * authenticated? @return 0, or Connect Invalid Host (SCT 1h / 84h) after logging the mismatch.
 */
nkv_status nkv_tcp_tls_connect_check(const struct tcp_tls_conn *tc, const void *data, uint32_t len,
				     const char *peer);

#endif
