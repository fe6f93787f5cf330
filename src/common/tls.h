/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.h - one TLS 1.3 session over a nonblocking socket, for NVMe/TCP with a PSK (TP 8011), shared by
 * the target's reactors (src/transport/tcp_tls.c) and libnkv (src/client/tls.c). OpenSSL's libssl
 * does the protocol; this wraps its calls in the transports' conventions (bytes or -errno, -EAGAIN
 * when the socket is not ready, with want_write telling which way) and gathers PDUs for writing.
 *
 * Writing: SSL_write has no scatter-gather form, and after SSL_ERROR_WANT_WRITE it must be called
 * again with the same bytes. nkv_tls_sendv() therefore copies up to one record (16 KiB) of the
 * caller's iovecs into the session's own buffer and hands that to SSL_write: once it is called those
 * bytes are the session's (reported as taken, so the caller may retire and reuse its buffers), and
 * if the socket was full they go out with the next nkv_tls_sendv()/nkv_tls_flush() before anything
 * else. A caller keeps the socket's write interest while nkv_tls_want_write() is true.
 *
 * Reading: OpenSSL reads one record at a time (no read-ahead), so bytes it holds are only the rest
 * of a record already decrypted: nkv_tls_pending(). Poll-driven readers must drain those before
 * waiting on the socket again (epoll cannot see them).
 *
 * A session is used by one thread at a time.
 */
#ifndef NKV_COMMON_TLS_H
#define NKV_COMMON_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

#define NKV_TLS_RECORD 16384u /* the largest TLS plaintext record: one SSL_write at most */

struct nkv_tls {
	SSL *ssl;
	uint8_t *stage;      /* NKV_TLS_RECORD bytes, allocated on the first write */
	uint32_t stage_len;  /* bytes given to an SSL_write that has not finished (0: none) */
	bool want_write;     /* the last call that returned -EAGAIN needs the socket writable */
	bool rd_want_write;  /* ...and it was a read (a post-handshake message to answer) */
	bool up;             /* the handshake finished */
	bool broken;         /* a fatal error: no close_notify at the end */
	char why[200];       /* the last error, for logs */
};

/**
 * The context both ends start from: TLS 1.3 only, cipher suites TLS_AES_128_GCM_SHA256 and
 * TLS_AES_256_GCM_SHA384 (@cipher 1 or 2 keeps only that one; 0 both), no certificates, no session
 * tickets, no compression, no renegotiation. @return the context, or NULL (libssl failed).
 */
SSL_CTX *nkv_tls_ctx_new(bool server, uint8_t cipher);

/** Start a session on connected socket @fd. @return 0 or -ENOMEM. */
int nkv_tls_init(struct nkv_tls *t, SSL_CTX *ctx, int fd, bool server);

/**
 * Advance the handshake. @return 0 once it is done, -EAGAIN (wait for the socket: writable when
 * want_write), -EKEYREJECTED (the peer refused our PSK or offered one we do not know: a TLS alert
 * handshake_failure, decrypt_error, unknown_psk_identity, or no PSK matched), -ECONNRESET (the peer
 * closed), -EPROTO (not TLS on the other end, or another protocol error; t->why says which).
 */
int nkv_tls_handshake(struct nkv_tls *t);

/** Read up to @len bytes. @return bytes (> 0), 0 (the peer closed), -EAGAIN, -EPROTO (a TLS
 *  error: t->why), -ECONNRESET, or the socket's -errno. */
ssize_t nkv_tls_recv(struct nkv_tls *t, void *buf, size_t len);

/**
 * Take up to one record of the bytes of @iov[0..n) for sending (see the header).
 * @return bytes taken (> 0; 0 when @iov holds none), -EAGAIN (nothing taken: the previous record is
 * still waiting for the socket), -EPROTO (t->why), -ENOMEM, or the socket's -errno (-EPIPE...).
 */
ssize_t nkv_tls_sendv(struct nkv_tls *t, const struct iovec *iov, int n);

/** Push out a record an earlier nkv_tls_sendv() took. @return 0 (nothing left), -EAGAIN, -errno. */
int nkv_tls_flush(struct nkv_tls *t);

/** Decrypted bytes waiting inside the session (a poll on the socket does not see them). */
static inline size_t nkv_tls_pending(const struct nkv_tls *t)
{
	return t->ssl ? (size_t)SSL_pending(t->ssl) : 0;
}

/** Does the session need the socket writable (a record to push, a handshake step, or a read that
 *  must answer a post-handshake message first)? */
static inline bool nkv_tls_want_write(const struct nkv_tls *t)
{
	return t->stage_len != 0 || t->want_write || t->rd_want_write;
}

/** The cipher suite negotiated ("TLS_AES_128_GCM_SHA256"), or "none". */
const char *nkv_tls_cipher(const struct nkv_tls *t);

/** Send close_notify if the session is healthy (one nonblocking attempt), then free it. The socket
 *  stays open: the caller closes it. */
void nkv_tls_fini(struct nkv_tls *t);

#endif
