/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_tls.c - TLS 1.3 with configured PSKs on the target's secure NVMe/TCP listeners (tcp_tls.h). */
#include "transport/tcp_tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"

#define TLS_RECORD_HANDSHAKE 22 /* the content type a ClientHello's record starts with */

struct tcp_tls_ctx {
	SSL_CTX *ssl;
	pthread_mutex_t lock;  /* the table: added to by configuration, read by the reactors */
	struct tcp_psk *psks;
	unsigned npsk;
};

static const struct tcp_psk *lookup(struct tcp_tls_ctx *x, const unsigned char *id, size_t len)
{
	const struct tcp_psk *e;

	pthread_mutex_lock(&x->lock);
	for (e = x->psks; e; e = e->next)
		if (strlen(e->tls.identity) == len && memcmp(e->tls.identity, id, len) == 0)
			break;
	pthread_mutex_unlock(&x->lock);
	return e; /* entries are never removed while the transport lives */
}

/*
 * OpenSSL's server callback: the host offered PSK identity @id. A known one becomes the session's
 * PSK with the cipher suite of its hash; an unknown one leaves no PSK, and a server without
 * certificates then fails the handshake (handshake_failure alert).
 */
static int find_psk(SSL *ssl, const unsigned char *id, size_t len, SSL_SESSION **sess)
{
	struct tcp_tls_conn *tc = SSL_get_app_data(ssl);
	const struct tcp_psk *e = lookup(tc->ctx, id, len);
	SSL_SESSION *s = NULL;

	*sess = NULL;
	if (!e) {
		size_t n = len < sizeof(tc->offered) - 1 ? len : sizeof(tc->offered) - 1;
		for (size_t i = 0; i < n; i++) /* printable, for the log line */
			tc->offered[i] = id[i] >= 0x20 && id[i] < 0x7f ? (char)id[i] : '?';
		tc->offered[n] = '\0';
		return 1;
	}
	const unsigned char suite[2] = {0x13, e->tls.cipher == 2 ? 0x02 : 0x01};
	const SSL_CIPHER *c = SSL_CIPHER_find(ssl, suite);
	if (!c || !(s = SSL_SESSION_new()) || SSL_SESSION_set1_master_key(s, e->tls.key, e->tls.len) != 1 ||
	    SSL_SESSION_set_cipher(s, c) != 1 || SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
		SSL_SESSION_free(s);
		return 0;
	}
	*sess = s;
	tc->psk = e;
	return 1;
}

int nkv_tcp_tls_ctx_create(struct tcp_tls_ctx **out)
{
	struct tcp_tls_ctx *x = calloc(1, sizeof(*x));

	if (!x || !(x->ssl = nkv_tls_ctx_new(true, 0))) {
		free(x);
		return -ENOMEM;
	}
	SSL_CTX_set_psk_find_session_callback(x->ssl, find_psk);
	pthread_mutex_init(&x->lock, NULL);
	*out = x;
	return 0;
}

void nkv_tcp_tls_ctx_destroy(struct tcp_tls_ctx *x)
{
	if (!x)
		return;
	while (x->psks) {
		struct tcp_psk *e = x->psks;
		x->psks = e->next;
		nkv_psk_wipe(e, sizeof(*e));
		free(e);
	}
	SSL_CTX_free(x->ssl);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* Add one identity; the same identity with the same key again is a no-op. */
static int add_identity(struct tcp_tls_ctx *x, const struct nkv_psk *k, unsigned version, const char *hostnqn,
			const char *subnqn)
{
	struct tcp_psk *e = calloc(1, sizeof(*e));
	int rc;

	if (!e)
		return -ENOMEM;
	if ((rc = nkv_psk_derive(k, version, hostnqn, subnqn, &e->tls)) < 0) {
		free(e);
		return rc;
	}
	snprintf(e->hostnqn, sizeof(e->hostnqn), "%s", hostnqn);
	snprintf(e->subnqn, sizeof(e->subnqn), "%s", subnqn);
	pthread_mutex_lock(&x->lock);
	for (struct tcp_psk *o = x->psks; o; o = o->next)
		if (strcmp(o->tls.identity, e->tls.identity) == 0) {
			/* version 1 identities carry a digest of the key: equal means the same key */
			rc = o->tls.len == e->tls.len && memcmp(o->tls.key, e->tls.key, e->tls.len) == 0 ? 1 : -EEXIST;
			break;
		}
	if (rc == 0) {
		e->next = x->psks;
		x->psks = e;
	}
	pthread_mutex_unlock(&x->lock);
	if (rc != 0) {
		nkv_psk_wipe(e, sizeof(*e));
		free(e);
	}
	return rc < 0 ? rc : 0;
}

int nkv_tcp_tls_add_psk(struct tcp_tls_ctx *x, const char *hostnqn, const char *subnqn, const struct nkv_psk *k)
{
	const char *subs[2] = {subnqn, NKV_DISCOVERY_NQN};
	int rc = 0;

	/* Version 0 first: a version 0 identity of the subsystem that exists with another key is the
	 * conflict to report (version 1 identities of different keys differ by their digest). */
	for (unsigned s = 0; s < 2 && rc == 0; s++)
		for (unsigned v = 0; v < 2 && rc == 0; v++) {
			rc = add_identity(x, k, v, hostnqn, subs[s]);
			if (rc == -EEXIST && s == 1)
				rc = 0; /* two subsystems, two keys: discovery keeps the first one's */
			if (rc == -ENAMETOOLONG && v == 0) { /* long NQNs: only version 1 identities fit */
				NKV_WARN("host %s, %s: NQNs too long for a version 0 PSK identity (NVMe0R0x, 255 bytes); "
					 "only version 1 (NVMe1R0x) is accepted", hostnqn, subs[s]);
				rc = 0;
			}
		}
	if (rc == 0) {
		pthread_mutex_lock(&x->lock);
		x->npsk++;
		pthread_mutex_unlock(&x->lock);
	}
	return rc;
}

int nkv_tcp_tls_add_key(struct tcp_tls_ctx **x, const char *hostnqn, const char *subnqn, const char *key)
{
	struct nkv_psk k;
	int rc;

	if (!hostnqn || !subnqn || !key)
		return -EINVAL;
	if ((rc = nkv_psk_load(key, &k)) == 0 && (*x || (rc = nkv_tcp_tls_ctx_create(x)) == 0))
		rc = nkv_tcp_tls_add_psk(*x, hostnqn, subnqn, &k);
	nkv_psk_wipe(&k, sizeof(k));
	return rc;
}

unsigned nkv_tcp_tls_npsk(struct tcp_tls_ctx *x)
{
	pthread_mutex_lock(&x->lock);
	unsigned n = x->npsk;
	pthread_mutex_unlock(&x->lock);
	return n;
}

struct tcp_tls_conn *nkv_tcp_tls_conn_new(struct tcp_tls_ctx *x, int fd)
{
	struct tcp_tls_conn *tc = calloc(1, sizeof(*tc));

	if (!tc || nkv_tls_init(&tc->io, x->ssl, fd, true) < 0) {
		free(tc);
		return NULL;
	}
	tc->ctx = x;
	SSL_set_app_data(tc->io.ssl, tc);
	return tc;
}

int nkv_tcp_tls_accept(struct tcp_tls_conn *tc, int fd)
{
	if (!tc->checked) {
		/* Tell a plain NVMe/TCP host (ICReq: type 0) from a TLS one before OpenSSL reads anything. */
		uint8_t b;
		ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0) {
			snprintf(tc->io.why, sizeof(tc->io.why), "the host closed before the TLS handshake");
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return -EAGAIN;
			snprintf(tc->io.why, sizeof(tc->io.why), "%s", strerror(errno));
			return -errno;
		}
		if (b != TLS_RECORD_HANDSHAKE) {
			snprintf(tc->io.why, sizeof(tc->io.why),
				 "not a TLS handshake (first byte %02xh%s): this listener requires TLS", b,
				 b == NKV_TCP_PDU_ICREQ ? ", a plain NVMe/TCP ICReq" : "");
			return -EPROTO;
		}
		tc->checked = true;
	}
	int rc = nkv_tls_handshake(&tc->io);
	if (rc == 0 && !tc->psk) { /* cannot happen without certificates; never serve an unbound session */
		snprintf(tc->io.why, sizeof(tc->io.why), "the handshake finished without a PSK");
		tc->io.broken = true;
		return -EKEYREJECTED;
	}
	if (rc == -EKEYREJECTED && tc->offered[0])
		snprintf(tc->io.why, sizeof(tc->io.why), "no PSK for identity '%s'", tc->offered);
	return rc;
}

void nkv_tcp_tls_conn_free(struct tcp_tls_conn *tc)
{
	if (!tc)
		return;
	nkv_tls_fini(&tc->io);
	free(tc);
}

/* A Connect's NQN field (256 bytes, NUL terminated within them) equals @want? */
static bool nqn_is(const char *field, const char *want)
{
	return strnlen(field, 256) < 256 && strcmp(field, want) == 0;
}

nkv_status nkv_tcp_tls_connect_check(const struct tcp_tls_conn *tc, const void *data, uint32_t len,
				     const char *peer)
{
	const struct nkv_connect_data *d = data;

	if (len < sizeof(*d))
		return 0; /* the core answers a short Connect */
	if (tc->psk && nqn_is(d->hostnqn, tc->psk->hostnqn) && nqn_is(d->subnqn, tc->psk->subnqn))
		return 0;
	NKV_WARN("tcp %s: Connect for host %.223s to %.223s over TLS PSK identity %s: the NQNs differ from the "
		 "identity's", peer, d->hostnqn, d->subnqn, tc->psk ? tc->psk->tls.identity : "(none)");
	return nkv_status_make(NKV_SCT_CMD, NKV_SC_CONNECT_INVALID_HOST, 1);
}
