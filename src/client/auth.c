/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.c - libnkv's side of DH-HMAC-CHAP (NVMe base specification 2.0 section 8.13): one
 * authentication transaction on a queue pair, right after its Connect when the controller asks
 * (AUTHREQ.ATR), or on request (re-authentication):
 *
 *   Send AUTH_Negotiate (every hash, every DH group) -> Receive DH-HMAC-CHAP_Challenge ->
 *   Send DH-HMAC-CHAP_Reply (R1, and C2 when the controller must authenticate too) -> Receive
 *   DH-HMAC-CHAP_Success1 (check R2) -> Send DH-HMAC-CHAP_Success2 (bidirectional only).
 *
 * A controller's AUTH_Failure1 ends it with -EACCES (secret refused) or -EOPNOTSUPP (nothing in
 * common); a controller that fails to prove itself gets AUTH_Failure2 and -EKEYREJECTED; a malformed
 * message AUTH_Failure2 and -EPROTO. Crypto: src/common/dhchap.c (OpenSSL).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/dhchap.h"
#include "common/log.h"

#define RECV_LEN 4096u /* AL: the largest message (ffdhe8192 Challenge) is 1104 bytes */

struct txn {
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	uint16_t tid;
	uint8_t hash, group;
	size_t hl;
	uint32_t s1, s2;
	bool bidir;
	uint8_t c1[NKV_DHCHAP_MAX_HASH], c2[NKV_DHCHAP_MAX_HASH];
	uint8_t *buf; /* RECV_LEN bytes for every message */
};

static const char *const g_rce[] = {
	[NKV_AUTH_RCE_FAILED] = "authentication failed (the controller refused the host secret)",
	[NKV_AUTH_RCE_PROTOCOL_UNUSABLE] = "no usable authentication protocol",
	[NKV_AUTH_RCE_CONCAT_MISMATCH] = "secure channel concatenation mismatch",
	[NKV_AUTH_RCE_HASH_UNUSABLE] = "none of our hash functions is allowed for this host",
	[NKV_AUTH_RCE_DHGROUP_UNUSABLE] = "none of our DH groups is allowed for this host",
	[NKV_AUTH_RCE_INCORRECT_PAYLOAD] = "incorrect payload",
	[NKV_AUTH_RCE_INCORRECT_MESSAGE] = "incorrect message",
};

static void auth_sqe(struct nkv_sqe *sqe, uint8_t fctype, uint32_t len)
{
	uint8_t *b = (uint8_t *)sqe;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opc = NKV_ADM_FABRICS;
	b[4] = fctype;
	b[NKV_AUTH_SQE_SPSP0] = NKV_AUTH_SPSP;
	b[NKV_AUTH_SQE_SPSP1] = NKV_AUTH_SPSP;
	b[NKV_AUTH_SQE_SECP] = NKV_AUTH_SECP;
	nkv_put32(b + NKV_AUTH_SQE_LEN, len);
}

/* Authentication Send of @len bytes of t->buf. @return 0 or -errno (-EPROTO for a refused command). */
static int send_msg(struct txn *t, uint32_t len, const char *what)
{
	struct nkv_sqe sqe;
	struct nkv_cpl cpl = {0};
	auth_sqe(&sqe, NKV_FCTYPE_AUTH_SEND, len);
	int rc = nkv_exec(t->qp, &sqe, t->buf, len, &cpl);
	if (rc && cpl.status && cpl.status != NKV_STATUS_HOST_PATH) {
		NKV_WARN("%s qid %u: Authentication Send (%s) failed with status %#x", t->ctrl->subnqn, t->qp->qid, what,
			 cpl.status);
		return -EPROTO;
	}
	return rc;
}

/* Authentication Receive into t->buf. @return the bytes the controller sent, or -errno. */
static int recv_msg(struct txn *t, const char *what)
{
	struct nkv_sqe sqe;
	struct nkv_cpl cpl = {0};
	memset(t->buf, 0, RECV_LEN);
	auth_sqe(&sqe, NKV_FCTYPE_AUTH_RECV, RECV_LEN);
	int rc = nkv_exec(t->qp, &sqe, t->buf, RECV_LEN, &cpl);
	if (rc && cpl.status && cpl.status != NKV_STATUS_HOST_PATH) {
		NKV_WARN("%s qid %u: Authentication Receive (%s) failed with status %#x", t->ctrl->subnqn, t->qp->qid,
			 what, cpl.status);
		return -EPROTO;
	}
	return rc ? rc : (int)cpl.xfer;
}

/* AUTH_Failure2 (we reject the controller or its message); the association ends. */
static void send_failure2(struct txn *t, uint8_t rce)
{
	struct nkv_auth_failure *f = (void *)t->buf;
	memset(f, 0, sizeof(*f));
	f->auth_type = NKV_AUTH_TYPE_COMMON;
	f->auth_id = NKV_AUTH_ID_FAILURE2;
	nkv_put16(&f->t_id, t->tid);
	f->rescode = NKV_AUTH_RC_FAILURE;
	f->rescode_exp = rce;
	send_msg(t, sizeof(*f), "AUTH_Failure2");
}

/* A message from the controller: AUTH_Failure1, or the one expected. @return 0 or -errno. */
static int check_msg(struct txn *t, int n, uint8_t want_id, size_t min, const char *what)
{
	const uint8_t *m = t->buf;

	if (n < 0)
		return n;
	if (n >= (int)sizeof(struct nkv_auth_failure) && m[0] == NKV_AUTH_TYPE_COMMON && m[1] == NKV_AUTH_ID_FAILURE1) {
		uint8_t rce = m[7];
		NKV_WARN("%s qid %u: DH-HMAC-CHAP: the controller answered AUTH_Failure1: %s (%02xh)", t->ctrl->subnqn,
			 t->qp->qid, rce < sizeof(g_rce) / sizeof(g_rce[0]) && g_rce[rce] ? g_rce[rce] : "unknown reason",
			 rce);
		return rce == NKV_AUTH_RCE_FAILED ? -EACCES
		       : rce >= NKV_AUTH_RCE_PROTOCOL_UNUSABLE && rce <= NKV_AUTH_RCE_DHGROUP_UNUSABLE ? -EOPNOTSUPP
												  : -EPROTO;
	}
	if ((size_t)n < min || m[0] != NKV_AUTH_TYPE_DHCHAP || m[1] != want_id || nkv_get16(m + 4) != t->tid) {
		NKV_WARN("%s qid %u: DH-HMAC-CHAP: expected %s, got type %02xh id %02xh transaction %u (ours %u), %d bytes",
			 t->ctrl->subnqn, t->qp->qid, what, m[0], m[1], nkv_get16(m + 4), t->tid, n);
		send_failure2(t, NKV_AUTH_RCE_INCORRECT_MESSAGE);
		return -EPROTO;
	}
	return 0;
}

static int negotiate(struct txn *t)
{
	struct nkv_auth_negotiate *n = (void *)t->buf;
	struct nkv_auth_proto_desc *d = (void *)(t->buf + sizeof(*n));
	memset(t->buf, 0, sizeof(*n) + sizeof(*d));
	n->auth_type = NKV_AUTH_TYPE_COMMON;
	n->auth_id = NKV_AUTH_ID_NEGOTIATE;
	nkv_put16(&n->t_id, t->tid);
	n->sc_c = 0; /* no secure channel concatenation */
	n->napd = 1;
	d->authid = NKV_AUTH_PROTO_DHCHAP;
	d->halen = 3;
	d->idlist[0] = NKV_DHCHAP_SHA256;
	d->idlist[1] = NKV_DHCHAP_SHA384;
	d->idlist[2] = NKV_DHCHAP_SHA512;
	d->dhlen = 6;
	for (uint8_t g = 0; g < 6; g++)
		d->idlist[30 + g] = g;
	return send_msg(t, sizeof(*n) + sizeof(*d), "AUTH_Negotiate");
}

/* Receive the Challenge, answer with the Reply. */
static int challenge_reply(struct txn *t)
{
	struct nkv_ctrl *c = t->ctrl;
	uint8_t secret[NKV_DHCHAP_MAX_DH], pub[NKV_DHCHAP_MAX_DH], ctrl_pub[NKV_DHCHAP_MAX_DH];
	uint8_t chal[NKV_DHCHAP_MAX_HASH], r1[NKV_DHCHAP_MAX_HASH];
	struct evp_pkey_st *dh = NULL;
	int n = recv_msg(t, "DH-HMAC-CHAP_Challenge"), rc;

	if ((rc = check_msg(t, n, NKV_AUTH_ID_CHALLENGE, sizeof(struct nkv_auth_challenge), "DH-HMAC-CHAP_Challenge")))
		return rc;
	const struct nkv_auth_challenge *ch = (const void *)t->buf;
	uint16_t dhvlen = nkv_get16(&ch->dhvlen);
	t->hash = ch->hashid;
	t->hl = nkv_dhchap_hash_len(t->hash);
	t->group = ch->dhgid;
	int glen = nkv_dhchap_dh_len(t->group);
	if (!t->hl || ch->hl != t->hl || glen < 0 || dhvlen != glen || (size_t)n < sizeof(*ch) + t->hl + dhvlen) {
		NKV_WARN("%s qid %u: DH-HMAC-CHAP_Challenge with hash %u (HL %u), DH group %u (DHVLEN %u): not valid",
			 c->subnqn, t->qp->qid, ch->hashid, ch->hl, ch->dhgid, dhvlen);
		send_failure2(t, !t->hl ? NKV_AUTH_RCE_HASH_UNUSABLE : glen < 0 ? NKV_AUTH_RCE_DHGROUP_UNUSABLE
										 : NKV_AUTH_RCE_INCORRECT_PAYLOAD);
		return -EPROTO;
	}
	t->s1 = nkv_get32(&ch->seqnum);
	memcpy(t->c1, t->buf + sizeof(*ch), t->hl);
	memcpy(chal, t->c1, t->hl);
	rc = 0;
	if (t->group) {
		memcpy(ctrl_pub, t->buf + sizeof(*ch) + t->hl, dhvlen);
		if ((rc = nkv_dhchap_dh_gen(t->group, &dh, pub)) == 0 &&
		    (rc = nkv_dhchap_dh_derive(dh, t->group, ctrl_pub, dhvlen, secret)) == -EINVAL) {
			NKV_WARN("%s qid %u: the controller's DH value is not valid", c->subnqn, t->qp->qid);
			send_failure2(t, NKV_AUTH_RCE_DHGROUP_UNUSABLE);
			rc = -EPROTO;
		}
		if (rc == 0)
			rc = nkv_dhchap_augment(t->hash, secret, dhvlen, t->c1, chal);
	}
	if (rc == 0)
		rc = nkv_dhchap_response(t->hash, c->dh_tkey, c->dh_tkey_len, chal, t->s1, t->tid, 0, "HostHost",
					 c->hostnqn, c->subnqn, r1);
	if (rc == 0 && t->bidir) {
		uint32_t s;
		do /* S2: a counter of the controller association, from a random start, never 0 */
			s = atomic_fetch_add(&c->dh_seq, 1) + 1;
		while (s == 0);
		t->s2 = s;
		rc = nkv_dhchap_random(t->c2, t->hl);
		if (rc == 0 && t->group) /* keep the augmented C2 to check R2 against */
			rc = nkv_dhchap_augment(t->hash, secret, dhvlen, t->c2, chal);
	}
	nkv_dhchap_dh_free(dh);
	if (rc == 0) {
		struct nkv_auth_reply *r = (void *)t->buf;
		memset(t->buf, 0, sizeof(*r) + 2 * t->hl + (size_t)glen);
		r->auth_type = NKV_AUTH_TYPE_DHCHAP;
		r->auth_id = NKV_AUTH_ID_REPLY;
		nkv_put16(&r->t_id, t->tid);
		r->hl = (uint8_t)t->hl;
		r->cvalid = t->bidir ? 1 : 0;
		nkv_put16(&r->dhvlen, (uint16_t)glen);
		nkv_put32(&r->seqnum, t->s2);
		memcpy(t->buf + sizeof(*r), r1, t->hl);
		if (t->bidir)
			memcpy(t->buf + sizeof(*r) + t->hl, t->c2, t->hl);
		if (t->group)
			memcpy(t->buf + sizeof(*r) + 2 * t->hl, pub, (size_t)glen);
		if (t->bidir && t->group)
			memcpy(t->c2, chal, t->hl); /* from here on c2 is the augmented challenge */
		rc = send_msg(t, (uint32_t)(sizeof(*r) + 2 * t->hl + (size_t)glen), "DH-HMAC-CHAP_Reply");
	} else if (rc != -EPROTO) {
		NKV_WARN("%s qid %u: DH-HMAC-CHAP computation failed: %s", c->subnqn, t->qp->qid, strerror(-rc));
		send_failure2(t, NKV_AUTH_RCE_FAILED);
	}
	nkv_dhchap_wipe(secret, sizeof(secret));
	nkv_dhchap_wipe(chal, sizeof(chal));
	nkv_dhchap_wipe(r1, sizeof(r1));
	return rc;
}

/* Receive Success1; check the controller's R2; Success2. */
static int success(struct txn *t)
{
	struct nkv_ctrl *c = t->ctrl;
	uint8_t want[NKV_DHCHAP_MAX_HASH];
	int n = recv_msg(t, "DH-HMAC-CHAP_Success1"), rc;

	if ((rc = check_msg(t, n, NKV_AUTH_ID_SUCCESS1, sizeof(struct nkv_auth_success1), "DH-HMAC-CHAP_Success1")))
		return rc;
	const struct nkv_auth_success1 *s = (const void *)t->buf;
	if (s->hl != t->hl) {
		send_failure2(t, NKV_AUTH_RCE_INCORRECT_PAYLOAD);
		return -EPROTO;
	}
	if (!t->bidir)
		return 0;
	if (!(s->rvalid & 1) || (size_t)n < sizeof(*s) + t->hl) {
		NKV_WARN("%s qid %u: DH-HMAC-CHAP: the controller did not answer our challenge", c->subnqn, t->qp->qid);
		send_failure2(t, NKV_AUTH_RCE_FAILED);
		return -EKEYREJECTED;
	}
	rc = nkv_dhchap_response(t->hash, c->dh_tckey, c->dh_tckey_len, t->c2, t->s2, t->tid, 0, "Controller",
				 c->subnqn, c->hostnqn, want);
	bool ok = rc == 0 && nkv_dhchap_equal(want, t->buf + sizeof(*s), t->hl);
	nkv_dhchap_wipe(want, sizeof(want));
	if (!ok) {
		NKV_WARN("%s qid %u: DH-HMAC-CHAP: the controller's response does not match the controller secret: "
			 "wrong secret, or not the controller it claims to be", c->subnqn, t->qp->qid);
		send_failure2(t, NKV_AUTH_RCE_FAILED);
		return -EKEYREJECTED;
	}
	struct nkv_auth_success2 *s2 = (void *)t->buf;
	memset(s2, 0, sizeof(*s2));
	s2->auth_type = NKV_AUTH_TYPE_DHCHAP;
	s2->auth_id = NKV_AUTH_ID_SUCCESS2;
	nkv_put16(&s2->t_id, t->tid);
	return send_msg(t, sizeof(*s2), "DH-HMAC-CHAP_Success2");
}

int nkv_auth_run(struct nkv_ctrl *ctrl, struct nkv_qpair *qp)
{
	struct txn t = {.ctrl = ctrl, .qp = qp, .bidir = ctrl->dh_tckey_len > 0};
	int rc;

	if (!ctrl->dh_tkey_len) {
		NKV_WARN("%s requires DH-HMAC-CHAP authentication: give a host secret (nkv --dhchap-secret, "
			 "nkv_conn_opts.dhchap_secret)", ctrl->subnqn);
		return -ENOKEY;
	}
	if (!(t.buf = calloc(1, RECV_LEN)))
		return -ENOMEM;
	t.tid = (uint16_t)atomic_fetch_add(&ctrl->dh_tid, 1);
	if ((rc = negotiate(&t)) == 0 && (rc = challenge_reply(&t)) == 0)
		rc = success(&t);
	if (rc == 0)
		NKV_INFO("%s qid %u: authenticated (DH-HMAC-CHAP, %s, %s%s)", ctrl->subnqn, qp->qid,
			 nkv_dhchap_hash_name(t.hash), nkv_dhchap_dh_name(t.group),
			 t.bidir ? ", controller authenticated" : "");
	nkv_dhchap_wipe(t.buf, RECV_LEN);
	free(t.buf);
	nkv_dhchap_wipe(&t, sizeof(t));
	return rc;
}

int nkv_auth_setup(struct nkv_ctrl *ctrl, const struct nkv_conn_opts *opts)
{
	struct nkv_dhchap_key k;
	const char *why = NULL;
	int rc = 0;

	if (!opts || (!opts->dhchap_secret && !opts->dhchap_ctrl_secret))
		return 0;
	if (!opts->dhchap_secret) {
		NKV_WARN("a controller secret (dhchap_ctrl_secret) needs a host secret (dhchap_secret) too");
		return -EINVAL;
	}
	if (nkv_dhchap_key_parse(opts->dhchap_secret, &k, &why) < 0) {
		NKV_WARN("the DH-HMAC-CHAP host secret is malformed: %s", why);
		return -EINVAL;
	}
	if ((rc = nkv_dhchap_transform(&k, ctrl->hostnqn, ctrl->dh_tkey)) > 0) {
		ctrl->dh_tkey_len = (uint8_t)rc;
		rc = 0;
	}
	nkv_dhchap_wipe(&k, sizeof(k));
	if (rc == 0 && opts->dhchap_ctrl_secret) {
		if (nkv_dhchap_key_parse(opts->dhchap_ctrl_secret, &k, &why) < 0) {
			NKV_WARN("the DH-HMAC-CHAP controller secret is malformed: %s", why);
			rc = -EINVAL;
		} else if ((rc = nkv_dhchap_transform(&k, ctrl->subnqn, ctrl->dh_tckey)) > 0) {
			ctrl->dh_tckey_len = (uint8_t)rc;
			rc = 0;
		}
		nkv_dhchap_wipe(&k, sizeof(k));
	}
	uint32_t seq = 0;
	nkv_dhchap_random(&seq, sizeof(seq));
	atomic_init(&ctrl->dh_seq, seq);
	uint16_t tid = 0;
	nkv_dhchap_random(&tid, sizeof(tid));
	atomic_init(&ctrl->dh_tid, tid);
	return rc;
}

int nkv_auth_after_connect(struct nkv_ctrl *ctrl, struct nkv_qpair *qp, uint32_t dw0)
{
	if (dw0 & NKV_CONNECT_AUTHREQ_ASCR) {
		NKV_WARN("%s requires a secure channel concatenated with authentication, which libnkv does not do",
			 ctrl->subnqn);
		return -EOPNOTSUPP;
	}
	if (dw0 & NKV_CONNECT_AUTHREQ_ATR)
		return nkv_auth_run(ctrl, qp);
	/* With a controller secret we insist that the controller proves itself, whether it asks or not
	 * (a controller that does not authenticate could be anyone). */
	if (qp->qid == 0 && ctrl->dh_tckey_len && !ctrl->discovery) {
		int rc = nkv_auth_run(ctrl, qp);
		if (rc == -EPROTO) {
			NKV_WARN("%s does not authenticate itself, but a controller secret was given", ctrl->subnqn);
			return -EKEYREJECTED;
		}
		return rc;
	}
	return 0;
}

int nkv_ctrl_reauth(struct nkv_ctrl *ctrl)
{
	if (!ctrl)
		return -EINVAL;
	if (ctrl->shm)
		return -EOPNOTSUPP;
	if (!ctrl->dh_tkey_len)
		return -ENOKEY;
	pthread_mutex_lock(&ctrl->admin_mu); /* one transaction at a time; Keep Alive waits */
	int rc = ctrl->admin->err ? ctrl->admin->err : nkv_auth_run(ctrl, ctrl->admin);
	pthread_mutex_unlock(&ctrl->admin_mu);
	return rc;
}

int nkv_qpair_reauth(struct nkv_qpair *qp)
{
	if (!qp)
		return -EINVAL;
	if (qp->shm)
		return -EOPNOTSUPP;
	if (!qp->ctrl->dh_tkey_len)
		return -ENOKEY;
	return qp->err ? qp->err : nkv_auth_run(qp->ctrl, qp);
}
