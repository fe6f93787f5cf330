/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fabrics.c - NVMe over Fabrics commands (opcode 7Fh): Connect, which binds a transport queue to a
 * controller; Property Get/Set; Disconnect; Authentication Send/Receive go to auth.c. Also the
 * discovery subsystem's log page (70h). Wire rules: docs/nvme-kv-wire.md C.1, C.2, C.10, C.12.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exposure.h"
#include "common/log.h"
#include "core.h"

#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)
#define OK 0

/* Connect SQE fields (byte offsets in the SQE) and data fields (offsets in the 1024 bytes). */
#define CONNECT_RECFMT 40
#define CONNECT_QID 42
#define CONNECT_SQSIZE 44
#define CONNECT_CATTR 46
#define CONNECT_KATO 48
#define DATA_HOSTID 0
#define DATA_CNTLID 16
#define DATA_SUBNQN 256
#define DATA_HOSTNQN 512

/* Connect Invalid Parameters with the offending field: IATTR 0 = in the SQE, 1 = in the data. */
static nkv_status invalid_param(struct nkv_cqe *cpl, unsigned iattr, unsigned ipo)
{
	nkv_put32(&cpl->dw0, (iattr << 16) | ipo);
	return ST(CMD, CONNECT_INVALID_PARAM);
}

/* An NQN field must be NUL terminated within its 256 bytes (223 characters at most). */
static bool nqn_valid(const char *f)
{
	size_t n = strnlen(f, 256);
	return n > 0 && n < NKV_NQN_MAX;
}

bool nkv_subsys_host_allowed(struct nkv_subsys *ss, const char *hostnqn)
{
	if (ss->allow_any)
		return true;
	for (unsigned i = 0; i < ss->nhosts; i++)
		if (strcmp(ss->hosts[i], hostnqn) == 0)
			return true;
	return false;
}

bool nkv_subsys_admits(struct nkv_subsys *ss, const char *hostnqn, bool exposed)
{
	return !(ss->loopback_only && exposed) && nkv_subsys_host_allowed(ss, hostnqn);
}

static nkv_status connect_io(struct nkv_subsys *ss, const struct nkv_connect_data *d, uint16_t qid,
			     struct nkv_ctrlr **out, struct nkv_cqe *cpl)
{
	struct nkv_ctrlr *c;

	if (ss->discovery) /* a discovery controller has no I/O queues */
		return invalid_param(cpl, 0, CONNECT_QID);
	if (!(c = nkv_ctrlr_lookup(ss, nkv_get16(&d->cntlid))))
		return invalid_param(cpl, 1, DATA_CNTLID);
	/* Every queue of an association comes from the same host (docs/nvme-kv-wire.md C.2). */
	if (strcmp(c->hostnqn, d->hostnqn) != 0) {
		nkv_ctrlr_put(c);
		return invalid_param(cpl, 1, DATA_HOSTNQN);
	}
	if (memcmp(c->hostid, d->hostid, 16) != 0) {
		nkv_ctrlr_put(c);
		return invalid_param(cpl, 1, DATA_HOSTID);
	}
	/* An I/O queue joins an association only after its admin queue authenticated (8.13). */
	if (c->dhchap && !atomic_load(&c->auth_ok)) {
		NKV_WARN("%s: controller %u: I/O queue Connect of host %s before the admin queue authenticated",
			 ss->nqn, c->cntlid, c->hostnqn);
		nkv_ctrlr_put(c);
		return ST(CMD, AUTH_REQUIRED);
	}
	if (!nkv_ctrlr_ready(c)) {
		nkv_ctrlr_put(c);
		return ST(GENERIC, CMD_SEQUENCE_ERROR);
	}
	/* QIDs 1..granted, each once. */
	if (qid > (unsigned)c->nsqa + 1 || !nkv_ctrlr_claim_qid(c, qid)) {
		nkv_ctrlr_put(c);
		return invalid_param(cpl, 0, CONNECT_QID);
	}
	*out = c;
	return OK;
}

static nkv_status connect_ss(struct nkv_target *t, struct nkv_subsys *ss, const struct nkv_connect_data *d,
			     uint16_t qid, uint16_t sqsize, uint32_t kato, const struct nkv_ctrlr_opts *opts,
			     struct nkv_ctrlr **out, struct nkv_cqe *cpl);

nkv_status nkv_fabrics_connect(struct nkv_target *t, const struct nkv_sqe *cmd, const void *data,
			       uint32_t len, const struct nkv_ctrlr_opts *opts, struct nkv_ctrlr **out,
			       struct nkv_cqe *cpl)
{
	const uint8_t *sqe = (const uint8_t *)cmd;
	const struct nkv_connect_data *d = data;
	uint16_t qid = nkv_get16(sqe + CONNECT_QID), sqsize = nkv_get16(sqe + CONNECT_SQSIZE);
	uint32_t kato = nkv_get32(sqe + CONNECT_KATO);
	struct nkv_subsys *ss;
	nkv_status st;

	memset(cpl, 0, sizeof(*cpl));
	if (nkv_get16(sqe + CONNECT_RECFMT) != 0)
		return ST(CMD, INCOMPATIBLE_FORMAT);
	if (!data || len < sizeof(*d))
		return ST(GENERIC, DATA_SGL_LENGTH_INVALID);
	if (!nqn_valid(d->subnqn))
		return invalid_param(cpl, 1, DATA_SUBNQN);
	if (!nqn_valid(d->hostnqn))
		return invalid_param(cpl, 1, DATA_HOSTNQN);
	bool disc = strcmp(d->subnqn, NKV_DISCOVERY_NQN) == 0;
	/* A discovery-only listener serves no I/O subsystem: the answer Linux nvmet gives for a subsystem
	 * not linked to the port (Invalid Parameters on SUBNQN), which does not say whether it exists. */
	if (!disc && opts->discovery_only) {
		NKV_WARN("host %s: Connect to %s through a discovery-only listener refused", d->hostnqn, d->subnqn);
		return invalid_param(cpl, 1, DATA_SUBNQN);
	}
	/* A reference for the Connect: the subsystem may be removed live meanwhile. */
	ss = disc ? t->discovery : nkv_target_get_subsys(t, d->subnqn);
	if (!ss)
		return invalid_param(cpl, 1, DATA_SUBNQN);
	st = connect_ss(t, ss, d, qid, sqsize, kato, opts, out, cpl);
	if (!disc)
		nkv_subsys_put(ss);
	return st;
}

/* Connect to @ss, held by the caller. */
static nkv_status connect_ss(struct nkv_target *t, struct nkv_subsys *ss, const struct nkv_connect_data *d,
			     uint16_t qid, uint16_t sqsize, uint32_t kato, const struct nkv_ctrlr_opts *opts,
			     struct nkv_ctrlr **out, struct nkv_cqe *cpl)
{
	const struct nkv_dhchap_host *auth = NULL;
	nkv_status st;
	bool allowed;
	int rc;

	pthread_mutex_lock(&t->lock);
	bool hidden = !ss->discovery && ss->loopback_only && opts->exposed;
	allowed = ss->discovery || nkv_subsys_host_allowed(ss, d->hostnqn);
	pthread_mutex_unlock(&t->lock);
	if (hidden) { /* not served on this listener at all, as on a discovery-only one */
		NKV_ERR("%s: Connect of host %s through a plain listener off loopback refused: the subsystem has no "
			"allowlist and was not opened to any host explicitly (nkv-ctl host allow %s HOSTNQN, or "
			"nkv-ctl host allow %s '*')", ss->nqn, d->hostnqn, ss->nqn, ss->nqn);
		return invalid_param(cpl, 1, DATA_SUBNQN);
	}
	if (!allowed) {
		NKV_WARN("%s: host %s is not allowed", ss->nqn, d->hostnqn);
		return ST(CMD, CONNECT_INVALID_HOST);
	}
	/* SQSIZE is 0's based and at least 1; no queue beyond MQES + 1 entries. */
	if (sqsize == 0 || sqsize > opts->mqes)
		return invalid_param(cpl, 0, CONNECT_SQSIZE);
	if (qid != 0) {
		if ((st = connect_io(ss, d, qid, out, cpl)) != OK)
			return st;
	} else {
		if (nkv_get16(&d->cntlid) != NKV_CNTLID_DYNAMIC) /* dynamic controller model only */
			return invalid_param(cpl, 1, DATA_CNTLID);
		if ((rc = nkv_ctrlr_create(ss, d->hostnqn, d->hostid, opts, out)) < 0)
			return rc == -EBUSY ? ST(CMD, CONTROLLER_BUSY) : ST(GENERIC, INTERNAL);
		/* Again, with the controller on the subsystem's list: a host disallowed meanwhile either
		 * is refused here or has this controller evicted by nkv_subsys_disallow_host. */
		pthread_mutex_lock(&t->lock);
		allowed = ss->discovery || (!ss->removed && nkv_subsys_admits(ss, d->hostnqn, opts->exposed));
		if (allowed && !ss->discovery && (auth = nkv_subsys_host_auth(ss, d->hostnqn)))
			atomic_fetch_add(&((struct nkv_dhchap_host *)auth)->refs, 1);
		pthread_mutex_unlock(&t->lock);
		if (!allowed) {
			nkv_ctrlr_destroy(*out);
			*out = NULL;
			return ST(CMD, CONNECT_INVALID_HOST);
		}
		/* Round KATO up to the keep-alive granularity (KAS x 100 ms), as SPDK does. */
		uint32_t g = NKV_KAS * 100;
		(*out)->kato_ms = kato ? (kato + g - 1) / g * g : 0;
		(*out)->last_keepalive_ms = nkv_now_ms();
		(*out)->dhchap = auth;
	}
	/* AUTHREQ.ATR on every queue of a host that must authenticate: each one runs a transaction. */
	nkv_put32(&cpl->dw0, (*out)->cntlid | ((*out)->dhchap ? NKV_CONNECT_AUTHREQ_ATR : 0));
	NKV_DEBUG("%s: connect qid %u sqsize %u cntlid %u host %s", ss->nqn, qid, sqsize, (*out)->cntlid,
		  d->hostnqn);
	return OK;
}

/* ---- Property Get/Set, Disconnect -------------------------------------------------------------- */

static void exec_prop_get(struct nkv_req *req)
{
	const uint8_t *sqe = (const uint8_t *)&req->cmd;
	unsigned size = (sqe[40] & 7) ? 8 : 4;
	uint64_t v = 0;

	if (nkv_ctrlr_prop_get(req->qp->ctrlr, nkv_get32(sqe + 44), size, &v) < 0) {
		nkv_req_complete(req, ST(CMD, CONNECT_INVALID_PARAM)); /* SPDK's answer to a bad offset */
		return;
	}
	nkv_put32(&req->cpl.dw0, (uint32_t)v);
	nkv_put32(&req->cpl.dw1, (uint32_t)(v >> 32));
	nkv_req_complete(req, OK);
}

static void exec_prop_set(struct nkv_req *req)
{
	const uint8_t *sqe = (const uint8_t *)&req->cmd;
	unsigned size = (sqe[40] & 7) ? 8 : 4;

	if (nkv_ctrlr_prop_set(req->qp->ctrlr, nkv_get32(sqe + 44), size, nkv_get64(sqe + 48)) < 0)
		nkv_req_complete(req, ST(CMD, CONNECT_INVALID_PARAM));
	else
		nkv_req_complete(req, OK);
}

static void exec_disconnect(struct nkv_req *req)
{
	req->qp->disconnect = true;
	nkv_req_complete(req, OK);
}

nkv_status nkv_fabrics_parse(struct nkv_req *req)
{
	const struct nkv_fabrics_cmd *f = (const struct nkv_fabrics_cmd *)&req->cmd;

	if (!req->qp->ctrlr->opts.fabrics)
		return ST(GENERIC, INVALID_OPCODE);
	switch (f->fctype) {
	case NKV_FCTYPE_CONNECT:
		return ST(GENERIC, CMD_SEQUENCE_ERROR); /* the queue is already connected */
	case NKV_FCTYPE_PROP_GET:
	case NKV_FCTYPE_PROP_SET:
		if (req->qp->qid != 0)
			return ST(GENERIC, INVALID_OPCODE);
		if ((f->spec[0] & 7) > 1) /* ATTRIB: 4 or 8 bytes */
			return ST(CMD, CONNECT_INVALID_PARAM);
		req->execute = f->fctype == NKV_FCTYPE_PROP_GET ? exec_prop_get : exec_prop_set;
		return OK;
	case NKV_FCTYPE_AUTH_SEND:
	case NKV_FCTYPE_AUTH_RECV:
		return nkv_auth_parse(req);
	case NKV_FCTYPE_DISCONNECT:
		if (nkv_get16(f->spec) != 0) /* RECFMT */
			return ST(CMD, INCOMPATIBLE_FORMAT);
		req->execute = exec_disconnect;
		return OK;
	default:
		return ST(GENERIC, INVALID_OPCODE);
	}
}

/* ---- discovery --------------------------------------------------------------------------------- */

int nkv_target_enable_discovery(struct nkv_target *t)
{
	struct nkv_subsys *ss;

	if (t->discovery)
		return 0;
	if (!(ss = calloc(1, sizeof(*ss))))
		return -ENOMEM;
	ss->tgt = t;
	atomic_init(&ss->refs, 1);
	ss->allow_any = true;
	ss->discovery = true;
	strcpy(ss->nqn, NKV_DISCOVERY_NQN);
	memcpy(ss->sn, t->subsystems ? t->subsystems->sn : "0000000000000000", 16);
	t->discovery = ss;
	return 0;
}

int nkv_target_add_port(struct nkv_target *t, const struct nkv_port *port)
{
	struct nkv_port *p = malloc(sizeof(*p));

	if (!p)
		return -ENOMEM;
	*p = *port;
	pthread_mutex_lock(&t->lock);
	p->next = t->ports;
	t->ports = p;
	pthread_mutex_unlock(&t->lock);
	atomic_fetch_add(&t->genctr, 1);
	return 0;
}

void nkv_target_del_port(struct nkv_target *t, uint16_t portid)
{
	struct nkv_port *gone = NULL;

	pthread_mutex_lock(&t->lock);
	for (struct nkv_port **p = &t->ports; *p; p = &(*p)->next)
		if ((*p)->portid == portid) {
			gone = *p;
			*p = gone->next;
			break;
		}
	pthread_mutex_unlock(&t->lock);
	if (gone)
		atomic_fetch_add(&t->genctr, 1);
	free(gone);
}

int nkv_target_set_cntlid_range(struct nkv_target *t, uint16_t min, uint16_t max)
{
	if (min > max || max > NKV_CNTLID_MAX || (min == 0 && max != 0))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	t->cntlid_min = min;
	t->cntlid_max = max;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static void nkv_ports_free(struct nkv_port *p)
{
	while (p) {
		struct nkv_port *next = p->next;
		free(p);
		p = next;
	}
}

static bool same_port(const struct nkv_port *a, const struct nkv_port *b)
{
	return a->portid == b->portid && a->adrfam == b->adrfam && a->treq == b->treq && a->sectype == b->sectype &&
	       a->exposed == b->exposed && strcmp(a->traddr, b->traddr) == 0 && strcmp(a->trsvcid, b->trsvcid) == 0;
}

int nkv_target_set_peer_listeners(struct nkv_target *t, const struct nkv_peer_listener *l, unsigned n)
{
	struct nkv_port *head = NULL, **tail = &head;

	for (unsigned i = 0; i < n; i++) {
		if (!l[i].traddr || strlen(l[i].traddr) >= sizeof(head->traddr) || l[i].port == 0 || l[i].port > 65535) {
			nkv_ports_free(head);
			return -EINVAL;
		}
		struct nkv_port *p = calloc(1, sizeof(*p));
		if (!p) {
			nkv_ports_free(head);
			return -ENOMEM;
		}
		*p = (struct nkv_port){.trtype = NKV_TRTYPE_TCP, .portid = l[i].portid,
				       .adrfam = strchr(l[i].traddr, ':') ? NKV_ADRFAM_IPV6 : NKV_ADRFAM_IPV4,
				       .treq = l[i].tls ? NKV_TREQ_REQUIRED : NKV_TREQ_NOT_SPECIFIED,
				       .sectype = l[i].tls ? NKV_TCP_SECTYPE_TLS13 : NKV_TCP_SECTYPE_NONE,
				       .exposed = nkv_listener_exposes(l[i].traddr, l[i].tls)};
		snprintf(p->traddr, sizeof(p->traddr), "%s", l[i].traddr);
		snprintf(p->trsvcid, sizeof(p->trsvcid), "%u", l[i].port);
		*tail = p;
		tail = &p->next;
	}
	pthread_mutex_lock(&t->lock);
	struct nkv_port *a = t->peer_ports, *b = head;
	while (a && b && same_port(a, b))
		a = a->next, b = b->next;
	bool changed = a || b;
	struct nkv_port *old = t->peer_ports;
	t->peer_ports = head;
	pthread_mutex_unlock(&t->lock);
	nkv_ports_free(old);
	if (changed)
		atomic_fetch_add(&t->genctr, 1);
	return 0;
}

/* ASCII fields of a discovery entry are space padded. */
static void space_pad(char *dst, size_t n, const char *src)
{
	size_t l = strnlen(src, n);
	memcpy(dst, src, l);
	memset(dst + l, ' ', n - l);
}

uint32_t nkv_disc_log_build(struct nkv_target *t, const char *hostnqn, uint8_t **out)
{
	struct nkv_disc_log_hdr *h;
	uint32_t n = 0, cap = 0;
	uint8_t *buf;

	pthread_mutex_lock(&t->lock);
	for (int peer = 0; peer < 2; peer++)
		for (struct nkv_port *p = peer ? t->peer_ports : t->ports; p; p = p->next)
			for (struct nkv_subsys *ss = t->subsystems; ss; ss = ss->next)
				cap++;
	buf = calloc(1 + cap, 1024);
	/* This gateway's ports, then the other gateways' of its group: a host learns every path from
	 * the discovery controller of any gateway. */
	for (int peer = 0; peer < 2; peer++)
		for (struct nkv_port *p = peer ? t->peer_ports : t->ports; buf && p; p = p->next) {
			for (struct nkv_subsys *ss = t->subsystems; ss; ss = ss->next) {
				if (!nkv_subsys_admits(ss, hostnqn, p->exposed))
					continue; /* a host sees only the subsystems it may connect to, where it may */
				struct nkv_disc_log_entry *e = (struct nkv_disc_log_entry *)(buf + 1024 * (1 + n++));
				e->trtype = p->trtype;
				e->adrfam = p->adrfam;
				e->subtype = NKV_SUBTYPE_NVME;
				e->treq = p->treq | NKV_TREQ_DISABLE_SQFC;
				nkv_put16(&e->portid, p->portid);
				nkv_put16(&e->cntlid, NKV_CNTLID_DYNAMIC);
				nkv_put16(&e->asqsz, 32);
				space_pad(e->trsvcid, sizeof(e->trsvcid), p->trsvcid);
				strncpy(e->subnqn, ss->nqn, sizeof(e->subnqn) - 1);
				space_pad(e->traddr, sizeof(e->traddr), p->traddr);
				e->tsas[0] = p->sectype; /* SECTYPE: none, or TLS 1.3 on a secure port */
			}
		}
	pthread_mutex_unlock(&t->lock);
	if (!buf)
		return 0;
	h = (struct nkv_disc_log_hdr *)buf;
	nkv_put64(&h->genctr, atomic_load(&t->genctr));
	nkv_put64(&h->numrec, n);
	nkv_put32(&h->tdlpl, 1024 * (1 + n));
	*out = buf;
	return 1024 * (1 + n);
}
