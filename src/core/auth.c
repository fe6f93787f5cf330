/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.c - the controller's side of DH-HMAC-CHAP (NVMe base specification 2.0 section 8.13, in-band
 * authentication over the fabrics commands Authentication Send 05h and Receive 06h; docs/nvme-kv-wire.md
 * C.12). Per allowed host: a secret, optionally a controller secret (bidirectional), preference lists
 * of hash functions and DH groups. Per queue: one transaction at a time, a small state machine:
 *
 *   (none) --AUTH_Negotiate--> CHALLENGE --Receive: Challenge--> REPLY --DH-HMAC-CHAP_Reply-->
 *   SUCCESS1 --Receive: Success1--> done (unidirectional) | SUCCESS2 --Success2--> done
 *
 * A wrong message, payload or response turns the next Authentication Receive into AUTH_Failure1
 * (with the reason), after which the association ends, as it does on an AUTH_Failure2 from the host.
 * The Send itself succeeds: the protocol, not the command status, carries the verdict. A new
 * AUTH_Negotiate on a queue restarts (re-authenticates); the queue stays usable meanwhile. Deadlines:
 * a queue that must authenticate has auth_timeout_ms from its Connect, and every transaction as
 * long from its Negotiate; a host that leaves one half done loses the queue (a re-authentication is
 * only dropped). Crypto: src/common/dhchap.c (OpenSSL). Everything per queue runs on its owner thread,
 * except the DH computations (a key pair for the Challenge, the shared secret for the Reply): those
 * run on auth_dh.c's workers while their command waits, so that no reactor spends milliseconds on
 * them; an unauthenticated association's transaction must first get a token of its host NQN and of
 * its address (nkv_dh_admit) to use a DH group.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/dhchap.h"
#include "common/log.h"
#include "core.h"
#include "core/auth_dh.h"

#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)
#define OK 0
#define MAX_SEND 4096u   /* the longest message a host sends: Negotiate with 63 descriptors */
#define MAX_RECV 65536u  /* the largest buffer we fill (AL); hosts use 4 KiB */
/* Every Challenge costs a DH key generation (about 9 ms on ffdhe8192, on a worker), and a host that
 * knows only an allowed NQN can ask for them: at most this many transactions start on a queue per
 * auth_timeout_ms; the next one fails (and the association with it). Across queues and connections
 * the token buckets of auth_dh.c bound them. */
#define MAX_STARTS 3u

enum step {
	STEP_CHALLENGE, /* negotiated: the next Receive gets the Challenge */
	STEP_REPLY,     /* waiting for DH-HMAC-CHAP_Reply */
	STEP_DERIVE,    /* the Reply arrived: its shared secret is being computed (auth_dh.c) */
	STEP_SUCCESS1,  /* the host's response was right: the next Receive gets Success1 */
	STEP_SUCCESS2,  /* bidirectional: waiting for DH-HMAC-CHAP_Success2 */
	STEP_FAILURE1,  /* failed: the next Receive gets AUTH_Failure1, then the association ends */
};

struct nkv_auth_txn {
	enum step step;
	uint8_t rce;       /* STEP_FAILURE1: the reason code explanation */
	uint16_t tid;
	uint8_t hash, group;
	size_t hl;
	uint32_t s1;
	bool bidir;        /* the host asked the controller to authenticate itself */
	uint8_t c1[NKV_DHCHAP_MAX_HASH];
	uint8_t r2[NKV_DHCHAP_MAX_HASH]; /* the controller's response, computed with the Reply */
	struct evp_pkey_st *dh;          /* our ephemeral DH key, from Challenge to Reply */
	struct nkv_dh_job *job;          /* the DH computation a command of this transaction waits for */
	const uint8_t *pub;              /* STEP_CHALLENGE: our public value, computed (in the job) */
	uint64_t deadline_ms;
};

static const uint8_t g_def_hashes[] = {NKV_DHCHAP_SHA256, NKV_DHCHAP_SHA384, NKV_DHCHAP_SHA512};
static const uint8_t g_def_groups[] = {NKV_DHCHAP_FFDHE2048, NKV_DHCHAP_FFDHE3072, NKV_DHCHAP_FFDHE4096,
				       NKV_DHCHAP_FFDHE6144, NKV_DHCHAP_FFDHE8192, NKV_DHCHAP_DH_NULL};

/* ---- configuration ------------------------------------------------------------------------------- */

/* A comma-separated list of names into IDs (each once). @return the count or -EINVAL. */
static int parse_list(const char *s, int (*id)(const char *), uint8_t *out, unsigned cap, const char **bad)
{
	char buf[128], *save = NULL;
	unsigned n = 0;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int v = id(t);
		if (v < 0 || n == cap || memchr(out, v, n)) {
			*bad = s;
			return -EINVAL;
		}
		out[n++] = (uint8_t)v;
	}
	return n ? (int)n : -EINVAL;
}

void nkv_dhchap_host_free(struct nkv_dhchap_host *h)
{
	if (h && atomic_fetch_sub(&h->refs, 1) == 1) {
		nkv_dhchap_wipe(h, sizeof(*h));
		free(h);
	}
}

int nkv_dhchap_host_build(struct nkv_subsys *ss, const char *hostnqn, const struct nkv_dhchap_conf *conf,
			  struct nkv_dhchap_host **out)
{
	struct nkv_dhchap_key key, ckey;
	struct nkv_dhchap_host *h;
	const char *why = NULL, *bad = NULL;
	int rc;

	if (nkv_dhchap_key_parse(conf->key, &key, &why) < 0) {
		NKV_ERR("%s: DH-HMAC-CHAP secret of host %s: %s", ss->nqn, hostnqn, why);
		return -EINVAL;
	}
	if (conf->ctrl_key && nkv_dhchap_key_parse(conf->ctrl_key, &ckey, &why) < 0) {
		NKV_ERR("%s: DH-HMAC-CHAP controller secret for host %s: %s", ss->nqn, hostnqn, why);
		nkv_dhchap_wipe(&key, sizeof(key));
		return -EINVAL;
	}
	if (!(h = calloc(1, sizeof(*h)))) {
		rc = -ENOMEM;
		goto out;
	}
	atomic_init(&h->refs, 1);
	rc = nkv_dhchap_transform(&key, hostnqn, h->tkey);
	h->tkey_len = (uint8_t)(rc > 0 ? rc : 0);
	if (rc > 0 && conf->ctrl_key) {
		rc = nkv_dhchap_transform(&ckey, ss->nqn, h->tckey);
		h->tckey_len = (uint8_t)(rc > 0 ? rc : 0);
	}
	if (rc < 0)
		goto out;
	memcpy(h->hashes, g_def_hashes, sizeof(g_def_hashes));
	h->nhashes = sizeof(g_def_hashes);
	memcpy(h->groups, g_def_groups, sizeof(g_def_groups));
	h->ngroups = sizeof(g_def_groups);
	if (conf->hashes && (rc = parse_list(conf->hashes, nkv_dhchap_hash_id, h->hashes, 3, &bad)) < 0) {
		NKV_ERR("%s: host %s: bad DH-HMAC-CHAP hash list '%s' (sha256, sha384, sha512)", ss->nqn, hostnqn,
			conf->hashes);
		goto out;
	}
	if (conf->hashes)
		h->nhashes = (uint8_t)rc;
	if (conf->dhgroups && (rc = parse_list(conf->dhgroups, nkv_dhchap_dh_id, h->groups, 6, &bad)) < 0) {
		NKV_ERR("%s: host %s: bad DH-HMAC-CHAP group list '%s' (null, ffdhe2048 ... ffdhe8192)", ss->nqn,
			hostnqn, conf->dhgroups);
		goto out;
	}
	if (conf->dhgroups)
		h->ngroups = (uint8_t)rc;
	*out = h;
	h = NULL;
	rc = 0;
out:
	nkv_dhchap_host_free(h);
	nkv_dhchap_wipe(&key, sizeof(key));
	nkv_dhchap_wipe(&ckey, sizeof(ckey));
	return rc;
}

int nkv_subsys_host_dhchap(struct nkv_subsys *ss, const char *hostnqn, const struct nkv_dhchap_conf *conf)
{
	struct nkv_dhchap_host *h = NULL;
	int rc = -ENOENT;

	if (!ss || !hostnqn || !conf)
		return -EINVAL;
	pthread_mutex_lock(&ss->tgt->lock);
	for (unsigned i = 0; i < ss->nhosts; i++)
		if (strcmp(ss->hosts[i], hostnqn) == 0)
			rc = ss->dhchap[i] ? -EEXIST : 0;
	pthread_mutex_unlock(&ss->tgt->lock);
	if (rc < 0 || (rc = nkv_dhchap_host_build(ss, hostnqn, conf, &h)) < 0)
		return rc;
	rc = -ENOENT; /* only the thread that changes the configuration calls this: it is still there */
	pthread_mutex_lock(&ss->tgt->lock);
	for (unsigned i = 0; i < ss->nhosts; i++)
		if (strcmp(ss->hosts[i], hostnqn) == 0 && !ss->dhchap[i]) {
			ss->dhchap[i] = h;
			h = NULL;
			rc = 0;
		}
	pthread_mutex_unlock(&ss->tgt->lock);
	nkv_dhchap_host_free(h);
	if (rc == 0)
		NKV_INFO("%s: host %s must authenticate (DH-HMAC-CHAP%s)", ss->nqn, hostnqn,
			 conf->ctrl_key ? ", controller secret for bidirectional" : "");
	return rc;
}

const struct nkv_dhchap_host *nkv_subsys_host_auth(struct nkv_subsys *ss, const char *hostnqn)
{
	for (unsigned i = 0; i < ss->nhosts; i++)
		if (strcmp(ss->hosts[i], hostnqn) == 0)
			return ss->dhchap[i];
	return NULL;
}

/* ---- per queue --------------------------------------------------------------------------------- */

static void txn_free(struct nkv_qpair *qp)
{
	struct nkv_auth_txn *t = qp->auth;
	if (!t)
		return;
	if (t->job) /* its command still waits: it finds the transaction gone (owner thread only) */
		t->job->txn = NULL;
	nkv_dhchap_dh_free(t->dh);
	nkv_dhchap_wipe(t, sizeof(*t));
	free(t);
	qp->auth = NULL;
}

void nkv_auth_qp_free(struct nkv_qpair *qp)
{
	txn_free(qp);
}

void nkv_auth_qp_connected(struct nkv_qpair *qp, uint32_t timeout_ms)
{
	qp->auth_timeout_ms = timeout_ms;
	if (nkv_auth_pending(qp))
		qp->auth_due_ms = nkv_now_ms() + timeout_ms;
}

bool nkv_auth_qp_expired(struct nkv_qpair *qp, uint64_t now)
{
	struct nkv_ctrlr *c = qp->ctrlr;

	if (!c || !c->dhchap)
		return false;
	if (!qp->authenticated && qp->auth_due_ms && now > qp->auth_due_ms) {
		NKV_WARN("%s: controller %u qid %u: host %s did not authenticate within %u ms", c->ss->nqn, c->cntlid,
			 qp->qid, c->hostnqn, qp->auth_timeout_ms);
		NKV_DEBUG("dhchap timeout: %s controller %u qid %u host %s: queue closed", c->ss->nqn, c->cntlid, qp->qid,
			  c->hostnqn);
		txn_free(qp);
		return true;
	}
	if (qp->auth && now > qp->auth->deadline_ms) {
		/* A failed transaction whose AUTH_Failure1 the host never asked for still ends the
		 * association; an unfinished one ends an unauthenticated queue, and is only dropped on an
		 * authenticated one (a re-authentication). */
		bool failed = qp->auth->step == STEP_FAILURE1, keep = qp->authenticated && !failed;
		NKV_WARN("%s: controller %u qid %u: authentication transaction %u of host %s not finished within %u ms%s",
			 c->ss->nqn, c->cntlid, qp->qid, qp->auth->tid, c->hostnqn, qp->auth_timeout_ms,
			 keep ? ": dropped (the queue stays authenticated)" : failed ? " after it failed" : "");
		NKV_DEBUG("dhchap timeout: %s controller %u qid %u host %s: %s", c->ss->nqn, c->cntlid, qp->qid, c->hostnqn,
			  keep ? "transaction dropped" : failed ? "failed: association ended" : "queue closed");
		txn_free(qp);
		if (failed)
			nkv_ctrlr_kill(c);
		return !keep;
	}
	return false;
}

static void fail(struct nkv_qpair *qp, uint8_t rce, const char *why)
{
	struct nkv_ctrlr *c = qp->ctrlr;
	NKV_WARN("%s: controller %u qid %u: authentication of host %s failed: %s", c->ss->nqn, c->cntlid, qp->qid,
		 c->hostnqn, why);
	/* Debug lines are never rate limited: one per event, for tools and tests. */
	NKV_DEBUG("dhchap failure1: %s controller %u qid %u host %s: explanation %02xh: %s", c->ss->nqn, c->cntlid,
		  qp->qid, c->hostnqn, rce, why);
	nkv_dhchap_dh_free(qp->auth->dh);
	qp->auth->dh = NULL;
	qp->auth->step = STEP_FAILURE1;
	qp->auth->rce = rce;
}

/* Fail the transaction and leave the message handler. */
#define FAIL_RETURN(qp, rce, why)                                                                  \
	do {                                                                                       \
		fail(qp, rce, why);                                                                \
		return;                                                                            \
	} while (0)

static void authenticated(struct nkv_qpair *qp)
{
	struct nkv_ctrlr *c = qp->ctrlr;
	struct nkv_auth_txn *t = qp->auth;
	bool again = qp->authenticated;

	qp->authenticated = true;
	qp->auth_due_ms = 0;
	if (qp->qid == 0) {
		atomic_store(&c->auth_ok, true);
		c->last_keepalive_ms = nkv_now_ms(); /* the time authentication took is not the host's silence */
	}
	NKV_INFO("%s: controller %u qid %u: host %s %sauthenticated (DH-HMAC-CHAP, %s, %s%s)", c->ss->nqn, c->cntlid,
		 qp->qid, c->hostnqn, again ? "re-" : "", nkv_dhchap_hash_name(t->hash), nkv_dhchap_dh_name(t->group),
		 t->bidir ? ", controller authenticated too" : "");
	NKV_DEBUG("dhchap ok: %s controller %u qid %u host %s: %s %s%s%s", c->ss->nqn, c->cntlid, qp->qid, c->hostnqn,
		  nkv_dhchap_hash_name(t->hash), nkv_dhchap_dh_name(t->group), t->bidir ? " bidirectional" : "",
		  again ? " re-authentication" : "");
	txn_free(qp);
}

/* Pick the first of our @pref the host lists. @return the ID or -1. */
static int pick(const uint8_t *pref, unsigned npref, const uint8_t *offer, unsigned noffer)
{
	for (unsigned i = 0; i < npref; i++)
		if (memchr(offer, pref[i], noffer))
			return pref[i];
	return -1;
}

/* AUTH_Negotiate: a new transaction (a restart if one was running). */
static void on_negotiate(struct nkv_qpair *qp, const uint8_t *m, uint32_t len)
{
	const struct nkv_dhchap_host *h = qp->ctrlr->dhchap;
	const struct nkv_auth_negotiate *n = (const void *)m;
	struct nkv_auth_txn *t;

	txn_free(qp);
	uint64_t now = nkv_now_ms();
	if (now - qp->auth_window_ms > qp->auth_timeout_ms) {
		qp->auth_window_ms = now;
		qp->auth_starts = 0;
	}
	if (!(t = calloc(1, sizeof(*t)))) { /* nothing to answer with: the queue cannot go on */
		NKV_ERR("%s: out of memory for an authentication transaction", qp->ctrlr->ss->nqn);
		qp->auth_fatal = true;
		return;
	}
	qp->auth = t;
	t->tid = nkv_get16(&n->t_id);
	t->deadline_ms = now + qp->auth_timeout_ms;
	if (++qp->auth_starts > MAX_STARTS)
		FAIL_RETURN(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "too many authentication transactions on one queue");
	if (n->sc_c != 0)
		FAIL_RETURN(qp, NKV_AUTH_RCE_CONCAT_MISMATCH, "secure channel concatenation asked for (not supported)");
	if (n->napd == 0 || len < sizeof(*n) + (size_t)n->napd * sizeof(struct nkv_auth_proto_desc))
		FAIL_RETURN(qp, NKV_AUTH_RCE_INCORRECT_PAYLOAD, "AUTH_Negotiate shorter than its descriptors");
	const struct nkv_auth_proto_desc *d = NULL;
	for (unsigned i = 0; i < n->napd && !d; i++) {
		const struct nkv_auth_proto_desc *x = (const void *)(m + sizeof(*n) + i * sizeof(*x));
		if (x->authid == NKV_AUTH_PROTO_DHCHAP)
			d = x;
	}
	if (!d)
		FAIL_RETURN(qp, NKV_AUTH_RCE_PROTOCOL_UNUSABLE, "no DH-HMAC-CHAP protocol descriptor");
	if (d->halen > 30 || d->dhlen > 30)
		FAIL_RETURN(qp, NKV_AUTH_RCE_INCORRECT_PAYLOAD, "HALEN or DHLEN above 30");
	int hash = pick(h->hashes, h->nhashes, d->idlist, d->halen);
	if (hash < 0)
		FAIL_RETURN(qp, NKV_AUTH_RCE_HASH_UNUSABLE, "none of the offered hash functions is allowed");
	int group = pick(h->groups, h->ngroups, d->idlist + 30, d->dhlen);
	if (group < 0)
		FAIL_RETURN(qp, NKV_AUTH_RCE_DHGROUP_UNUSABLE, "none of the offered DH groups is allowed");
	/* A peer that has not proved the secret pays for the DH computations it asks for. */
	if (group && !atomic_load(&qp->ctrlr->auth_ok)) {
		int rc = nkv_dh_admit(qp->ctrlr->ss->tgt->dh, qp->ctrlr->hostnqn, qp->peer_addr);
		if (rc == -EAGAIN)
			FAIL_RETURN(qp, NKV_AUTH_RCE_FAILED, "too many DH transactions of this host NQN, try later");
		if (rc < 0)
			FAIL_RETURN(qp, NKV_AUTH_RCE_FAILED, "too many DH transactions from this address, try later");
	}
	t->hash = (uint8_t)hash;
	t->hl = nkv_dhchap_hash_len(t->hash);
	t->group = (uint8_t)group;
	t->step = STEP_CHALLENGE;
	NKV_DEBUG("%s: controller %u qid %u: transaction %u: %s, %s", qp->ctrlr->ss->nqn, qp->ctrlr->cntlid, qp->qid,
		  t->tid, nkv_dhchap_hash_name(t->hash), nkv_dhchap_dh_name(t->group));
}

/* Hand @j (op and inputs set) to the DH workers for @req; done(j) runs on this thread afterwards.
 * @return true when queued; false when the transaction failed instead (@j freed). */
static bool job_submit(struct nkv_req *req, struct nkv_dh_job *j, void (*done)(struct nkv_dh_job *j))
{
	struct nkv_qpair *qp = req->qp;
	int rc;

	j->msgq = qp->msgq;
	j->done = done;
	j->req = req;
	j->txn = qp->auth;
	j->group = qp->auth->group;
	if ((rc = nkv_dh_submit(qp->ctrlr->ss->tgt->dh, j)) < 0) {
		nkv_dh_job_free(j);
		fail(qp, NKV_AUTH_RCE_FAILED, rc == -EBUSY ? "too many DH computations waiting on the target, try later"
							  : "no thread for the DH computation");
		return false;
	}
	qp->auth->job = j;
	return true;
}

/* The rest of DH-HMAC-CHAP_Reply @m once the shared secret is known (@secret: NULL with the null
 * group): check R1, compute R2 when the host wants the controller authenticated. */
static void reply_check(struct nkv_qpair *qp, const uint8_t *m, const uint8_t *secret)
{
	struct nkv_ctrlr *c = qp->ctrlr;
	const struct nkv_dhchap_host *h = c->dhchap;
	struct nkv_auth_txn *t = qp->auth;
	const struct nkv_auth_reply *r = (const void *)m;
	size_t dhvlen = nkv_get16(&r->dhvlen);
	uint8_t chal[NKV_DHCHAP_MAX_HASH], want[NKV_DHCHAP_MAX_HASH];
	const uint8_t *r1 = m + sizeof(*r), *c2 = r1 + t->hl;
	int rc = 0;

	memcpy(chal, t->c1, t->hl);
	if (secret)
		rc = nkv_dhchap_augment(t->hash, secret, dhvlen, t->c1, chal);
	if (rc == 0)
		rc = nkv_dhchap_response(t->hash, h->tkey, h->tkey_len, chal, t->s1, t->tid, 0, "HostHost", c->hostnqn,
					 c->ss->nqn, want);
	if (rc == 0 && !nkv_dhchap_equal(want, r1, t->hl))
		rc = -EACCES;
	/* Bidirectional when C2 is valid and S2 is not 0 (S2 = 0 with a C2 is only for deriving a TLS
	 * PSK, which this target does not do; such a reply authenticates the host alone). */
	t->bidir = (r->cvalid & 1) && nkv_get32(&r->seqnum) != 0;
	if (rc == 0 && t->bidir) {
		if (!h->tckey_len) {
			rc = -ENOKEY;
		} else {
			if (secret)
				rc = nkv_dhchap_augment(t->hash, secret, dhvlen, c2, chal);
			else
				memcpy(chal, c2, t->hl);
			if (rc == 0)
				rc = nkv_dhchap_response(t->hash, h->tckey, h->tckey_len, chal, nkv_get32(&r->seqnum),
							 t->tid, 0, "Controller", c->ss->nqn, c->hostnqn, t->r2);
		}
	}
	nkv_dhchap_wipe(chal, sizeof(chal));
	nkv_dhchap_wipe(want, sizeof(want));
	if (rc == -EACCES)
		FAIL_RETURN(qp, NKV_AUTH_RCE_FAILED, "wrong response (the host's secret differs from ours)");
	if (rc == -ENOKEY)
		FAIL_RETURN(qp, NKV_AUTH_RCE_FAILED, "the host asked the controller to authenticate, but no "
						     "controller secret is configured for it");
	if (rc < 0)
		FAIL_RETURN(qp, NKV_AUTH_RCE_FAILED, "internal error computing the response");
	t->step = STEP_SUCCESS1;
}

/* The shared secret of a Reply is computed (owner thread): finish the Reply, complete its Send. */
static void reply_ready(struct nkv_dh_job *j)
{
	struct nkv_req *req = j->req;
	struct nkv_auth_txn *t = j->txn; /* NULL: dropped meanwhile (the Send succeeds all the same) */

	if (t) {
		t->job = NULL;
		if (t->step == STEP_DERIVE && j->rc < 0)
			fail(req->qp, NKV_AUTH_RCE_DHGROUP_UNUSABLE, "DH-HMAC-CHAP_Reply: the host's DH value is not valid");
		else if (t->step == STEP_DERIVE)
			reply_check(req->qp, req->data, j->secret);
	}
	nkv_dh_job_free(j);
	nkv_req_complete(req, OK);
}

/* DH-HMAC-CHAP_Reply. @return true when its Send completes later (the shared secret is computed
 * off this thread: reply_ready). */
static bool on_reply(struct nkv_req *req, const uint8_t *m, uint32_t len)
{
	struct nkv_qpair *qp = req->qp;
	struct nkv_auth_txn *t = qp->auth;
	const struct nkv_auth_reply *r = (const void *)m;
	uint16_t dhvlen = nkv_get16(&r->dhvlen);
	struct nkv_dh_job *j;

	if (r->hl != t->hl || len < sizeof(*r) + 2 * t->hl + dhvlen) {
		fail(qp, NKV_AUTH_RCE_INCORRECT_PAYLOAD, "DH-HMAC-CHAP_Reply: HL or its length is wrong");
		return false;
	}
	if ((int)dhvlen != nkv_dhchap_dh_len(t->group)) {
		fail(qp, NKV_AUTH_RCE_INCORRECT_PAYLOAD, "DH-HMAC-CHAP_Reply: DH value of the wrong size");
		return false;
	}
	if (!t->group) {
		reply_check(qp, m, NULL);
		return false;
	}
	if (!(j = nkv_dh_job_new())) {
		fail(qp, NKV_AUTH_RCE_FAILED, "internal error computing the response");
		return false;
	}
	j->op = NKV_DH_DERIVE;
	memcpy(j->val, m + sizeof(*r) + 2 * t->hl, dhvlen);
	j->key = t->dh; /* used once: the worker frees it */
	t->dh = NULL;
	t->step = STEP_DERIVE;
	return job_submit(req, j, reply_ready);
}

static void exec_send(struct nkv_req *req)
{
	struct nkv_qpair *qp = req->qp;
	const uint8_t *m = req->data;
	uint32_t len = req->length;
	struct nkv_auth_txn *t = qp->auth;

	if (t && t->step == STEP_FAILURE1) { /* already failed: the verdict is waiting for a Receive */
		nkv_req_complete(req, OK);
		return;
	}
	if (len >= sizeof(struct nkv_auth_negotiate) && m[0] == NKV_AUTH_TYPE_COMMON && m[1] == NKV_AUTH_ID_NEGOTIATE) {
		on_negotiate(qp, m, len);
	} else if (len >= sizeof(struct nkv_auth_failure) && m[0] == NKV_AUTH_TYPE_COMMON &&
		   m[1] == NKV_AUTH_ID_FAILURE2) {
		NKV_WARN("%s: controller %u qid %u: host %s ended authentication with AUTH_Failure2 (reason %02xh/%02xh): "
			 "it did not accept the controller", qp->ctrlr->ss->nqn, qp->ctrlr->cntlid, qp->qid,
			 qp->ctrlr->hostnqn, m[6], m[7]);
		NKV_DEBUG("dhchap failure2: %s controller %u qid %u host %s: explanation %02xh", qp->ctrlr->ss->nqn,
			  qp->ctrlr->cntlid, qp->qid, qp->ctrlr->hostnqn, m[7]);
		txn_free(qp);
		qp->auth_fatal = true;
	} else if (!t) {
		/* a DH-HMAC-CHAP message with no transaction: answer Failure1 at the next Receive */
		if ((qp->auth = t = calloc(1, sizeof(*t)))) {
			t->tid = len >= 6 ? nkv_get16(m + 4) : 0;
			t->deadline_ms = nkv_now_ms() + qp->auth_timeout_ms;
			fail(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "a message before AUTH_Negotiate");
		} else {
			qp->auth_fatal = true;
		}
	} else if (len < 16 || m[0] != NKV_AUTH_TYPE_DHCHAP) {
		fail(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "not a DH-HMAC-CHAP message");
	} else if (nkv_get16(m + 4) != t->tid) {
		fail(qp, NKV_AUTH_RCE_INCORRECT_PAYLOAD, "wrong transaction identifier");
	} else if (m[1] == NKV_AUTH_ID_REPLY && t->step == STEP_REPLY) {
		if (on_reply(req, m, len))
			return; /* completed by reply_ready */
	} else if (m[1] == NKV_AUTH_ID_SUCCESS2 && t->step == STEP_SUCCESS2) {
		authenticated(qp);
	} else {
		fail(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "a message out of sequence");
	}
	nkv_req_complete(req, OK);
}

/* Build the message the transaction owes the host into @b (@al bytes). @return its size, 0 when @al
 * is too small for it (Invalid Field; the host may ask again with a larger buffer). */
static uint32_t build(struct nkv_qpair *qp, uint8_t *b, uint32_t al)
{
	struct nkv_auth_txn *t = qp->auth;
	int dhlen;

	switch (t->step) {
	case STEP_CHALLENGE: {
		struct nkv_auth_challenge *ch = (void *)b;
		dhlen = nkv_dhchap_dh_len(t->group);
		if (al < sizeof(*ch) + t->hl + (uint32_t)dhlen)
			return 0;
		unsigned s;
		do /* S1: a counter of the target, from a random start, never 0 */
			s = atomic_fetch_add(&qp->ctrlr->ss->tgt->auth_seq, 1) + 1;
		while (s == 0);
		t->s1 = s;
		if (nkv_dhchap_random(t->c1, t->hl) < 0 || (t->group && !t->pub)) {
			fail(qp, NKV_AUTH_RCE_FAILED, "internal error making the challenge");
			return build(qp, b, al);
		}
		if (t->group) /* our public value, computed by a DH worker (challenge_ready) */
			memcpy(b + sizeof(*ch) + t->hl, t->pub, (size_t)dhlen);
		t->pub = NULL;
		ch->auth_type = NKV_AUTH_TYPE_DHCHAP;
		ch->auth_id = NKV_AUTH_ID_CHALLENGE;
		nkv_put16(&ch->t_id, t->tid);
		ch->hl = (uint8_t)t->hl;
		ch->hashid = t->hash;
		ch->dhgid = t->group;
		nkv_put16(&ch->dhvlen, (uint16_t)dhlen);
		nkv_put32(&ch->seqnum, t->s1);
		memcpy(b + sizeof(*ch), t->c1, t->hl);
		t->step = STEP_REPLY;
		return (uint32_t)(sizeof(*ch) + t->hl + (uint32_t)dhlen);
	}
	case STEP_SUCCESS1: {
		struct nkv_auth_success1 *s = (void *)b;
		if (al < sizeof(*s) + (t->bidir ? t->hl : 0))
			return 0;
		s->auth_type = NKV_AUTH_TYPE_DHCHAP;
		s->auth_id = NKV_AUTH_ID_SUCCESS1;
		nkv_put16(&s->t_id, t->tid);
		s->hl = (uint8_t)t->hl;
		if (t->bidir) {
			s->rvalid = 1;
			memcpy(b + sizeof(*s), t->r2, t->hl);
			t->step = STEP_SUCCESS2;
			return (uint32_t)(sizeof(*s) + t->hl);
		}
		authenticated(qp);
		return sizeof(*s);
	}
	case STEP_FAILURE1: {
		struct nkv_auth_failure *f = (void *)b;
		if (al < sizeof(*f))
			return 0;
		f->auth_type = NKV_AUTH_TYPE_COMMON;
		f->auth_id = NKV_AUTH_ID_FAILURE1;
		nkv_put16(&f->t_id, t->tid);
		f->rescode = NKV_AUTH_RC_FAILURE;
		f->rescode_exp = t->rce;
		txn_free(qp);
		qp->auth_fatal = true; /* the association ends once this is sent */
		return sizeof(*f);
	}
	default: /* a Receive where the protocol expects a Send */
		fail(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "Authentication Receive out of sequence");
		return build(qp, b, al);
	}
}

/* Answer a Receive with the message the transaction owes. */
static void recv_answer(struct nkv_req *req)
{
	uint8_t *b = req->data;

	memset(b, 0, req->length);
	uint32_t n = build(req->qp, b, req->length);
	if (n == 0) {
		nkv_req_complete(req, ST(GENERIC, INVALID_FIELD)); /* AL below the message: ask again */
		return;
	}
	req->xfer = req->length; /* the message, then zeros up to AL */
	nkv_req_complete(req, OK);
}

/* The key pair of a Challenge is computed (owner thread): answer the Receive that waits for it. */
static void challenge_ready(struct nkv_dh_job *j)
{
	struct nkv_req *req = j->req;
	struct nkv_auth_txn *t = j->txn;

	if (!t) { /* a new Negotiate, a deadline or a failure dropped the transaction meanwhile */
		nkv_dh_job_free(j);
		nkv_req_complete(req, ST(GENERIC, CMD_SEQUENCE_ERROR));
		return;
	}
	t->job = NULL;
	if (t->step == STEP_CHALLENGE && j->rc < 0) {
		fail(req->qp, NKV_AUTH_RCE_FAILED, "internal error making the challenge");
	} else if (t->step == STEP_CHALLENGE) {
		t->dh = j->key;
		j->key = NULL;
		t->pub = j->val;
	}
	recv_answer(req); /* consumes t->pub (may free t) */
	nkv_dh_job_free(j);
}

static void exec_recv(struct nkv_req *req)
{
	struct nkv_qpair *qp = req->qp;
	struct nkv_auth_txn *t = qp->auth;

	if (!t) { /* nothing negotiated: the answer is AUTH_Failure1 */
		if (!(qp->auth = t = calloc(1, sizeof(*qp->auth)))) {
			qp->auth_fatal = true;
			nkv_req_complete(req, ST(GENERIC, INTERNAL));
			return;
		}
		t->deadline_ms = nkv_now_ms() + qp->auth_timeout_ms;
		fail(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "Authentication Receive before AUTH_Negotiate");
	}
	if (t->job) {
		fail(qp, NKV_AUTH_RCE_INCORRECT_MESSAGE, "Authentication Receive while a DH computation runs");
	} else if (t->step == STEP_CHALLENGE && t->group) {
		/* AL below the Challenge: Invalid Field before any computation (the host may ask again) */
		if (req->length < sizeof(struct nkv_auth_challenge) + t->hl + (uint32_t)nkv_dhchap_dh_len(t->group)) {
			nkv_req_complete(req, ST(GENERIC, INVALID_FIELD));
			return;
		}
		struct nkv_dh_job *j = nkv_dh_job_new();
		if (!j) {
			fail(qp, NKV_AUTH_RCE_FAILED, "internal error making the challenge");
		} else {
			j->op = NKV_DH_GEN;
			if (job_submit(req, j, challenge_ready))
				return; /* answered by challenge_ready */
		}
	}
	recv_answer(req);
}

nkv_status nkv_auth_parse(struct nkv_req *req)
{
	const uint8_t *sqe = (const uint8_t *)&req->cmd;
	bool send = sqe[4] == NKV_FCTYPE_AUTH_SEND;
	uint32_t len = nkv_get32(sqe + NKV_AUTH_SQE_LEN);

	if (!req->qp->ctrlr->dhchap)
		return ST(GENERIC, CMD_SEQUENCE_ERROR); /* no secret for this host: nothing to authenticate */
	if (sqe[NKV_AUTH_SQE_SECP] != NKV_AUTH_SECP || sqe[NKV_AUTH_SQE_SPSP0] != NKV_AUTH_SPSP ||
	    sqe[NKV_AUTH_SQE_SPSP1] != NKV_AUTH_SPSP)
		return ST(GENERIC, INVALID_FIELD);
	if (len == 0 || len > (send ? MAX_SEND : MAX_RECV))
		return ST(GENERIC, INVALID_FIELD);
	req->length = len;
	req->execute = send ? exec_send : exec_recv;
	return OK;
}
