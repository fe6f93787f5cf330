/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.c - libnkv's side of NVMe/TCP TLS (TP 8011): each connection of a controller opened with
 * opts.tls runs a TLS 1.3 handshake right after the TCP connect, offering one PSK identity (version
 * opts.tls_identity: NVMe0Rxx by default, as Linux does) with the TLS PSK derived from the configured
 * key for the controller's host and subsystem NQNs (src/common/nvme_psk.h), and the one cipher suite
 * of that PSK's hash. The PDU engine (tcp.c) then reads and writes through the session.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/log.h"
#include "common/tls.h"

struct nkv_client_tls {
	struct nkv_tls io;
	struct nkv_tls_psk psk;  /* the identity offered and its TLS PSK */
};

/* OpenSSL's client callback: offer the one PSK, unless the handshake already settled on a hash
 * (@md, after a HelloRetryRequest) that is not the PSK's. */
static int use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen, SSL_SESSION **sess)
{
	struct nkv_client_tls *ct = SSL_get_app_data(ssl);
	const EVP_MD *want = ct->psk.cipher == 2 ? EVP_sha384() : EVP_sha256();
	const unsigned char suite[2] = {0x13, ct->psk.cipher == 2 ? 0x02 : 0x01};
	const SSL_CIPHER *c = SSL_CIPHER_find(ssl, suite);
	SSL_SESSION *s = NULL;

	*sess = NULL;
	if (md && EVP_MD_get_type(md) != EVP_MD_get_type(want))
		return 1;
	if (!c || !(s = SSL_SESSION_new()) || SSL_SESSION_set1_master_key(s, ct->psk.key, ct->psk.len) != 1 ||
	    SSL_SESSION_set_cipher(s, c) != 1 || SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
		SSL_SESSION_free(s);
		return 0;
	}
	*id = (const unsigned char *)ct->psk.identity;
	*idlen = strlen(ct->psk.identity);
	*sess = s;
	return 1;
}

int nkv_tcp_tls_open(struct nkv_qpair *qp, int64_t deadline)
{
	struct nkv_ctrl *ctrl = qp->ctrl;
	struct nkv_client_tls *ct = calloc(1, sizeof(*ct));
	SSL_CTX *ctx = NULL;
	int rc;

	if (!ct)
		return -ENOMEM;
	if ((rc = nkv_psk_derive(&ctrl->psk, ctrl->opts.tls_identity, ctrl->hostnqn, ctrl->subnqn, &ct->psk)) < 0) {
		NKV_WARN("TLS PSK for host %s and %s: %s", ctrl->hostnqn, ctrl->subnqn, nkv_psk_strerror(rc));
		free(ct);
		return rc;
	}
	if (!(ctx = nkv_tls_ctx_new(false, ct->psk.cipher)) || nkv_tls_init(&ct->io, ctx, qp->fd, false) < 0) {
		SSL_CTX_free(ctx);
		nkv_psk_wipe(ct, sizeof(*ct));
		free(ct);
		return -ENOMEM;
	}
	SSL_set_psk_use_session_callback(ct->io.ssl, use_psk);
	SSL_CTX_free(ctx); /* the session holds its own reference */
	SSL_set_app_data(ct->io.ssl, ct);
	qp->tls = ct;
	while ((rc = nkv_tls_handshake(&ct->io)) == -EAGAIN) {
		int64_t left = deadline - nkv_client_now_ms();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			snprintf(ct->io.why, sizeof(ct->io.why), "no TLS handshake within the connect timeout");
			break;
		}
		struct pollfd p = {.fd = qp->fd, .events = ct->io.want_write ? POLLOUT : POLLIN};
		if (poll(&p, 1, (int)(left > 1000000 ? 1000000 : left)) < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
	}
	if (rc == 0)
		NKV_DEBUG("qid %u: TLS 1.3 %s, PSK identity %s", qp->qid, nkv_tls_cipher(&ct->io), ct->psk.identity);
	else
		NKV_WARN("qid %u: TLS handshake with %s:%s as %s failed: %s", qp->qid, ctrl->traddr, ctrl->trsvcid,
			 ct->psk.identity, ct->io.why[0] ? ct->io.why : strerror(-rc));
	return rc;
}

void nkv_tcp_tls_close(struct nkv_qpair *qp)
{
	if (!qp->tls)
		return;
	nkv_tls_fini(&qp->tls->io);
	nkv_psk_wipe(qp->tls, sizeof(*qp->tls));
	free(qp->tls);
	qp->tls = NULL;
}

struct nkv_tls *nkv_tcp_tls_io(const struct nkv_qpair *qp)
{
	return qp->tls ? &qp->tls->io : NULL;
}
