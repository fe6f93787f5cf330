/* SPDX-License-Identifier: Apache-2.0 */
/* tls.c - a TLS 1.3 PSK session over a nonblocking socket (tls.h). */
#include "common/tls.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>

/*
 * OpenSSL's socket BIO writes with write(2): a peer gone away raises SIGPIPE, which would kill a
 * program using libnkv. This BIO is the socket one with its write done by send(MSG_NOSIGNAL).
 */
static BIO_METHOD *g_sock_meth;
static pthread_once_t g_sock_once = PTHREAD_ONCE_INIT;

static int sock_write_nosig(BIO *b, const char *buf, int len)
{
	int fd = -1;
	BIO_get_fd(b, &fd);
	errno = 0;
	int r = (int)send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
	BIO_clear_retry_flags(b);
	if (r <= 0 && BIO_sock_should_retry(r))
		BIO_set_retry_write(b);
	return r;
}

static void sock_meth_init(void)
{
	const BIO_METHOD *s = BIO_s_socket();
	BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "nkv socket");
	if (m && BIO_meth_set_write(m, sock_write_nosig) == 1 && BIO_meth_set_read(m, BIO_meth_get_read(s)) == 1 &&
	    BIO_meth_set_puts(m, BIO_meth_get_puts(s)) == 1 && BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(s)) == 1 &&
	    BIO_meth_set_create(m, BIO_meth_get_create(s)) == 1 && BIO_meth_set_destroy(m, BIO_meth_get_destroy(s)) == 1)
		g_sock_meth = m;
	else
		BIO_meth_free(m);
}

SSL_CTX *nkv_tls_ctx_new(bool server, uint8_t cipher)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	const char *suites = cipher == 1   ? "TLS_AES_128_GCM_SHA256"
			     : cipher == 2 ? "TLS_AES_256_GCM_SHA384"
					   : "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384";

	if (!ctx)
		return NULL;
	/* TLS 1.3 only (TP 8011), with (EC)DHE on top of the PSK (psk_dhe_ke, OpenSSL's default). No
	 * tickets: every connection authenticates with the configured PSK, never a resumption one. */
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
	    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 || SSL_CTX_set_ciphersuites(ctx, suites) != 1 ||
	    SSL_CTX_set_num_tickets(ctx, 0) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
					 SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	/* Idle connections give their record buffers back (thousands of them may be open). */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	return ctx;
}

int nkv_tls_init(struct nkv_tls *t, SSL_CTX *ctx, int fd, bool server)
{
	BIO *bio = NULL;

	memset(t, 0, sizeof(*t));
	pthread_once(&g_sock_once, sock_meth_init);
	if (!g_sock_meth || !(t->ssl = SSL_new(ctx)) || !(bio = BIO_new(g_sock_meth))) {
		SSL_free(t->ssl);
		t->ssl = NULL;
		return -ENOMEM;
	}
	BIO_set_fd(bio, fd, BIO_NOCLOSE);
	SSL_set_bio(t->ssl, bio, bio);
	if (server)
		SSL_set_accept_state(t->ssl);
	else
		SSL_set_connect_state(t->ssl);
	return 0;
}

/* A received TLS alert (reason codes above SSL_AD_REASON_OFFSET) that means "not this key". */
static bool key_alert(int alert)
{
	/* OpenSSL's server answers a PSK binder that does not verify (the same identity, another key)
	 * with illegal_parameter, an identity it does not know with handshake_failure. */
	return alert == SSL_AD_HANDSHAKE_FAILURE || alert == SSL_AD_DECRYPT_ERROR || alert == SSL_AD_ILLEGAL_PARAMETER ||
	       alert == SSL_AD_UNKNOWN_PSK_IDENTITY || alert == SSL_AD_INSUFFICIENT_SECURITY;
}

/* After a failed SSL call: -EAGAIN with the direction it waits for, or the errno of the failure with
 * its reason in t->why. OpenSSL's error queue is per thread and cleared before every call. */
static int ssl_fail(struct nkv_tls *t, int ret, bool *want)
{
	int e = SSL_get_error(t->ssl, ret), err = errno;
	unsigned long code;

	switch (e) {
	case SSL_ERROR_WANT_READ:
		*want = false;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		*want = true;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		snprintf(t->why, sizeof(t->why), "the peer closed the TLS session");
		return -ECONNRESET;
	case SSL_ERROR_SYSCALL:
		t->broken = true;
		if (ret == 0 || err == 0) {
			snprintf(t->why, sizeof(t->why), "the peer closed the connection%s",
				 t->up ? "" : " during the TLS handshake");
			return -ECONNRESET;
		}
		snprintf(t->why, sizeof(t->why), "%s", strerror(err));
		return -err;
	default:
		break;
	}
	t->broken = true;
	code = ERR_peek_error();
	int reason = ERR_GET_REASON(code);
	char desc[120];
	ERR_error_string_n(code, desc, sizeof(desc));
	ERR_clear_error();
	if (reason > SSL_AD_REASON_OFFSET) {
		int alert = reason - SSL_AD_REASON_OFFSET;
		snprintf(t->why, sizeof(t->why), "TLS alert from the peer: %s%s", SSL_alert_desc_string_long(alert),
			 key_alert(alert) ? " (the peer does not accept this PSK)" : "");
		return key_alert(alert) ? -EKEYREJECTED : -EPROTO;
	}
	switch (reason) {
	case SSL_R_BINDER_DOES_NOT_VERIFY:
		snprintf(t->why, sizeof(t->why), "the PSK binder does not verify: the peer has another key for this identity");
		return -EKEYREJECTED;
	case SSL_R_NO_SHARED_CIPHER:
	case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
	case SSL_R_PSK_IDENTITY_NOT_FOUND:
	case SSL_R_BAD_PSK:
		/* a server without certificates that matched no PSK ends up here */
		snprintf(t->why, sizeof(t->why), "no PSK matched (%s)", desc);
		return -EKEYREJECTED;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_HTTP_REQUEST:
	case SSL_R_WRONG_SSL_VERSION:
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_UNEXPECTED_RECORD:
		snprintf(t->why, sizeof(t->why), "the peer does not speak TLS 1.3 (%s)", desc);
		return -EPROTO;
	default:
		snprintf(t->why, sizeof(t->why), "TLS error: %s", desc);
		return -EPROTO;
	}
}

int nkv_tls_handshake(struct nkv_tls *t)
{
	if (t->up)
		return 0;
	ERR_clear_error();
	int r = SSL_do_handshake(t->ssl);
	if (r == 1) {
		t->up = true;
		t->want_write = false;
		return 0;
	}
	return ssl_fail(t, r, &t->want_write);
}

ssize_t nkv_tls_recv(struct nkv_tls *t, void *buf, size_t len)
{
	ERR_clear_error();
	int r = SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (r > 0) {
		t->rd_want_write = false;
		return r;
	}
	if (SSL_get_error(t->ssl, r) == SSL_ERROR_ZERO_RETURN)
		return 0; /* close_notify */
	int rc = ssl_fail(t, r, &t->rd_want_write);
	return rc == -ECONNRESET && !t->broken ? 0 : rc;
}

int nkv_tls_flush(struct nkv_tls *t)
{
	if (!t->stage_len)
		return 0;
	ERR_clear_error();
	/* The same buffer and length as the call that took these bytes, as SSL_write wants a retry. */
	int r = SSL_write(t->ssl, t->stage, (int)t->stage_len);
	if (r > 0) {
		t->stage_len = 0;
		t->want_write = false;
		return 0;
	}
	return ssl_fail(t, r, &t->want_write);
}

ssize_t nkv_tls_sendv(struct nkv_tls *t, const struct iovec *iov, int n)
{
	uint32_t len = 0;
	int rc = nkv_tls_flush(t);

	if (rc < 0)
		return rc;
	if (!t->stage && !(t->stage = malloc(NKV_TLS_RECORD)))
		return -ENOMEM;
	for (int i = 0; i < n && len < NKV_TLS_RECORD; i++) {
		size_t k = iov[i].iov_len < NKV_TLS_RECORD - len ? iov[i].iov_len : NKV_TLS_RECORD - len;
		memcpy(t->stage + len, iov[i].iov_base, k);
		len += (uint32_t)k;
	}
	if (len == 0)
		return 0;
	t->stage_len = len;
	rc = nkv_tls_flush(t);
	return rc == 0 || rc == -EAGAIN ? (ssize_t)len : rc;
}

const char *nkv_tls_cipher(const struct nkv_tls *t)
{
	const SSL_CIPHER *c = t->ssl ? SSL_get_current_cipher(t->ssl) : NULL;
	return c ? SSL_CIPHER_get_name(c) : "none";
}

void nkv_tls_fini(struct nkv_tls *t)
{
	if (t->ssl) {
		if (t->up && !t->broken) {
			ERR_clear_error();
			SSL_shutdown(t->ssl); /* one nonblocking close_notify; the peer's answer is not awaited */
		}
		ERR_clear_error();
		SSL_free(t->ssl);
	}
	free(t->stage);
	memset(t, 0, sizeof(*t));
}
