/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctrl.c - controller association for libnkv: Fabrics Connect, Property Get/Set, CC.EN/CSTS.RDY,
 * Identify, Number of Queues, I/O queue pairs, the admin queue lock and the keep-alive thread
 * (docs/nvme-kv-wire.md C.1, C.2, C.11, D.3/D.4).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/dhchap.h"
#include "common/log.h"

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		return -EINVAL;
	memcpy(dst, src, n + 1);
	return 0;
}

struct nkv_ctrl *nkv_ctrl_alloc(const char *traddr, const char *trsvcid, const char *subnqn,
				const struct nkv_conn_opts *opts, bool allow_empty_nqn, int *err)
{
	struct nkv_ctrl *c = calloc(1, sizeof(*c));
	*err = -ENOMEM;
	if (!c)
		return NULL;
	if (opts)
		c->opts = *opts;
	*err = -EINVAL;
	if (copy_str(c->traddr, sizeof(c->traddr), traddr) || copy_str(c->trsvcid, sizeof(c->trsvcid), trsvcid) ||
	    copy_str(c->subnqn, 224, subnqn) || (!*subnqn && !allow_empty_nqn)) {
		free(c);
		return NULL;
	}
	if (c->opts.timeout_ms <= 0)
		c->opts.timeout_ms = NKV_DEFAULT_TIMEOUT_MS;
	if (!c->opts.queue_depth)
		c->opts.queue_depth = NKV_DEFAULT_DEPTH;
	/* What the caller left out comes from the machine's identity, as nvme-cli's does. */
	struct nkv_host_ident hi;
	bool need = all_zero(c->opts.hostid, 16) || !c->opts.hostnqn;
	if (need && nkv_host_ident_load(&hi) < 0)
		NKV_WARN("libnkv: %s is malformed; ignoring it (host NQN %s)",
			 hi.bad_hostnqn ? hi.hostnqn_file : hi.hostid_file, hi.hostnqn);
	memcpy(c->hostid, all_zero(c->opts.hostid, 16) ? hi.hostid : c->opts.hostid, 16);
	if (c->opts.hostnqn) {
		if (copy_str(c->hostnqn, NKV_HOSTNQN_MAX, c->opts.hostnqn) || !*c->opts.hostnqn) {
			free(c);
			return NULL;
		}
	} else {
		snprintf(c->hostnqn, sizeof(c->hostnqn), "%s", hi.hostnqn);
	}
	c->opts.hostnqn = NULL; /* not owned: never read again */
	c->discovery = strcmp(subnqn, NKV_DISCOVERY_NQN) == 0;
	if ((*err = nkv_auth_setup(c, &c->opts)) < 0) {
		nkv_dhchap_wipe(c, sizeof(*c));
		free(c);
		return NULL;
	}
	c->opts.dhchap_secret = c->opts.dhchap_ctrl_secret = NULL; /* not owned; transformed above */
	if (c->opts.tls) {
		/* The key, and the identity it makes for this host and subsystem, before any connection. */
		struct nkv_tls_psk t;
		int rc = c->opts.tls_identity > 1 ? -EINVAL : nkv_psk_load(c->opts.tls_key, &c->psk);
		if (rc == 0 && *c->subnqn)
			rc = nkv_psk_derive(&c->psk, c->opts.tls_identity, c->hostnqn, c->subnqn, &t);
		nkv_psk_wipe(&t, sizeof(t));
		if (rc < 0) {
			NKV_WARN("TLS key %s: %s", c->opts.tls_key && c->opts.tls_key[0] == '@' ? c->opts.tls_key : "given",
				 nkv_psk_strerror(rc));
			nkv_dhchap_wipe(c, sizeof(*c)); /* the PSK and the DH-HMAC-CHAP secrets */
			*err = rc;
			free(c);
			return NULL;
		}
	}
	c->opts.tls_key = NULL; /* not owned either: the key is in c->psk */
	c->ops = &nkv_tcp_ops;
	c->kato_ms = c->opts.no_keepalive ? 0 : (c->opts.kato_ms ? c->opts.kato_ms : NKV_DEFAULT_KATO_MS);
	pthread_mutex_init(&c->admin_mu, NULL);
	pthread_mutex_init(&c->qp_mu, NULL);
	pthread_mutex_init(&c->ka_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->ka_cv, &ca);
	pthread_condattr_destroy(&ca);
	*err = 0;
	return c;
}

/* ---- admin queue ------------------------------------------------------------------------------- */

int nkv_admin_flags(struct nkv_ctrl *ctrl, const struct nkv_sqe *sqe, void *buf, uint32_t len,
		    struct nkv_cpl *cpl, unsigned flags)
{
	if (!ctrl || !sqe)
		return -EINVAL;
	pthread_mutex_lock(&ctrl->admin_mu);
	/* no admin queue: between the loss of an association and its replacement (nkv_ctrl_reconnect) */
	int rc = !ctrl->admin ? -ENOTCONN
		 : ctrl->admin->err ? ctrl->admin->err : nkv_exec_flags(ctrl->admin, sqe, buf, len, cpl, flags);
	pthread_mutex_unlock(&ctrl->admin_mu);
	return rc;
}

int nkv_admin(struct nkv_ctrl *ctrl, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cpl *cpl)
{
	return nkv_admin_flags(ctrl, sqe, buf, len, cpl, 0);
}

static void fabrics_sqe(struct nkv_sqe *sqe, uint8_t fctype)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opc = NKV_ADM_FABRICS;
	((uint8_t *)sqe)[4] = fctype;
}

static int prop_get(struct nkv_ctrl *ctrl, uint32_t ofst, bool wide, uint64_t *val)
{
	struct nkv_sqe sqe;
	struct nkv_cpl cpl;
	fabrics_sqe(&sqe, NKV_FCTYPE_PROP_GET);
	((uint8_t *)&sqe)[40] = wide ? 1 : 0; /* ATTRIB: 0 = 4 bytes, 1 = 8 bytes */
	nkv_put32((uint8_t *)&sqe + 44, ofst);
	int rc = nkv_admin(ctrl, &sqe, NULL, 0, &cpl);
	if (rc == 0)
		*val = (uint64_t)cpl.dw0 | (wide ? (uint64_t)cpl.dw1 << 32 : 0);
	return rc;
}

static int prop_set(struct nkv_ctrl *ctrl, uint32_t ofst, uint32_t val)
{
	struct nkv_sqe sqe;
	fabrics_sqe(&sqe, NKV_FCTYPE_PROP_SET);
	nkv_put32((uint8_t *)&sqe + 44, ofst);
	nkv_put64((uint8_t *)&sqe + 48, val);
	return nkv_admin(ctrl, &sqe, NULL, 0, NULL);
}

/** Errno of a failed Connect: SCT 1 82h/84h mean other things there than for I/O (docs/nvme-kv-wire.md C.1). */
static int connect_errno(const struct nkv_cpl *cpl)
{
	unsigned ipo = cpl->dw0 & 0xffff, iattr = (cpl->dw0 >> 16) & 0xff;
	switch (cpl->status) {
	case 0x180: /* Incompatible Format */
		return -EPROTO;
	case 0x181: /* Controller Busy */
		return -EBUSY;
	case 0x182: /* Connect Invalid Parameters: IATTR 1 / IPO 256 is the SUBNQN */
		if (iattr == 1 && ipo == 256)
			return -ENOENT;
		if (iattr == 1 && ipo == 512)
			return -EACCES;
		return -EINVAL;
	case 0x183: /* Restart Discovery */
		return -EAGAIN;
	case 0x184: /* Connect Invalid Host */
		return -EACCES;
	default:
		return nkv_status_errno(cpl->status);
	}
}

int nkv_ctrl_fabrics_connect(struct nkv_ctrl *ctrl, struct nkv_qpair *qp, uint16_t sqsize, uint16_t cntlid,
			     uint16_t *cntlid_out)
{
	struct nkv_sqe sqe;
	struct nkv_connect_data d;
	struct nkv_cpl cpl = {0};
	uint8_t *b = (uint8_t *)&sqe;

	fabrics_sqe(&sqe, NKV_FCTYPE_CONNECT);
	nkv_put16(b + 40, 0); /* RECFMT */
	nkv_put16(b + 42, qp->qid);
	nkv_put16(b + 44, sqsize);
	b[46] = 0; /* CATTR: keep SQ flow control */
	nkv_put32(b + 48, qp->qid == 0 ? ctrl->kato_ms : 0);
	memset(&d, 0, sizeof(d));
	memcpy(d.hostid, ctrl->hostid, 16);
	nkv_put16(&d.cntlid, cntlid);
	/* both were checked shorter than 224 bytes; the rest of each field stays NUL */
	memcpy(d.subnqn, ctrl->subnqn, strnlen(ctrl->subnqn, sizeof(d.subnqn) - 1));
	memcpy(d.hostnqn, ctrl->hostnqn, strnlen(ctrl->hostnqn, sizeof(d.hostnqn) - 1));
	int rc = nkv_exec(qp, &sqe, &d, sizeof(d), &cpl);
	if (rc == 0) {
		if (cntlid_out)
			*cntlid_out = (uint16_t)cpl.dw0;
		return nkv_auth_after_connect(ctrl, qp, cpl.dw0);
	}
	if (cpl.status && cpl.status != NKV_STATUS_HOST_PATH) {
		NKV_DEBUG("Connect qid %u to %s: status %#x DW0 %#x", qp->qid, ctrl->subnqn, cpl.status,
			  cpl.dw0);
		return connect_errno(&cpl);
	}
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/** Wait for CSTS.RDY == @rdy, bounded by CAP.TO (at least 500 ms). */
static int wait_rdy(struct nkv_ctrl *ctrl, bool rdy)
{
	uint64_t to_ms = ((ctrl->cap >> NKV_CAP_TO_SHIFT) & 0xff) * 500;
	int64_t deadline = nkv_client_now_ms() + (int64_t)(to_ms < 500 ? 500 : to_ms);
	unsigned delay = 1;
	for (;;) {
		uint64_t csts;
		int rc = prop_get(ctrl, NKV_REG_CSTS, false, &csts);
		if (rc)
			return rc;
		if (csts & NKV_CSTS_CFS)
			return -EIO;
		if (!!(csts & NKV_CSTS_RDY) == rdy)
			return 0;
		if (nkv_client_now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_ms(delay);
		delay = delay < 64 ? delay * 2 : 64;
	}
}

/** CC.EN = 1 and wait for CSTS.RDY (docs/nvme-kv-wire.md D.3 step 3). */
static int enable(struct nkv_ctrl *ctrl)
{
	uint64_t cc;
	int rc = prop_get(ctrl, NKV_REG_CAP, true, &ctrl->cap);
	if (rc == 0)
		rc = prop_get(ctrl, NKV_REG_CC, false, &cc);
	if (rc)
		return rc;
	if (cc & NKV_CC_EN) {
		rc = prop_set(ctrl, NKV_REG_CC, (uint32_t)cc & ~NKV_CC_EN);
		if (rc == 0)
			rc = wait_rdy(ctrl, false);
		if (rc)
			return rc;
	}
	uint32_t css = NKV_CC_CSS_NVM;
	if (ctrl->cap & NKV_CAP_CSS_IOCS)
		css = NKV_CC_CSS_IOCS;
	else if ((ctrl->cap & NKV_CAP_CSS_ADMIN_ONLY) && !(ctrl->cap & NKV_CAP_CSS_NVM))
		css = NKV_CC_CSS_ADMIN;
	uint32_t ncc = (css << 4) | (6u << 16) | (4u << 20); /* MPS 0, AMS 0, IOSQES 6, IOCQES 4 */
	rc = prop_set(ctrl, NKV_REG_CC, ncc);
	if (rc == 0)
		rc = prop_set(ctrl, NKV_REG_CC, ncc | NKV_CC_EN);
	if (rc == 0)
		rc = wait_rdy(ctrl, true);
	if (rc == 0) {
		uint64_t vs;
		if ((rc = prop_get(ctrl, NKV_REG_VS, false, &vs)) == 0) /* vs is unset when it fails */
			ctrl->vs = (uint32_t)vs;
	}
	return rc;
}

int nkv_ctrl_identify_cmd(struct nkv_ctrl *ctrl, uint8_t cns, uint8_t csi, uint32_t nsid, void *buf)
{
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_IDENTIFY;
	nkv_put32(&sqe.nsid, nsid);
	nkv_put32(&sqe.cdw10, cns);
	nkv_put32(&sqe.cdw11, (uint32_t)csi << 24);
	return nkv_admin(ctrl, &sqe, buf, NKV_IDENTIFY_SIZE, NULL);
}

int nkv_ctrl_set_num_queues(struct nkv_ctrl *ctrl, unsigned want)
{
	struct nkv_sqe sqe;
	struct nkv_cpl cpl;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_SET_FEATURES;
	nkv_put32(&sqe.cdw10, NKV_FEAT_NUM_QUEUES);
	if (want < 1 || want > NKV_WANT_IO_QUEUES)
		want = NKV_WANT_IO_QUEUES;
	nkv_put32(&sqe.cdw11, (want - 1) | ((want - 1) << 16));
	int rc = nkv_admin(ctrl, &sqe, NULL, 0, &cpl);
	if (rc)
		return rc;
	unsigned nsq = (cpl.dw0 & 0xffff) + 1, ncq = (cpl.dw0 >> 16) + 1;
	unsigned n = nsq < ncq ? nsq : ncq;
	ctrl->nio = (uint16_t)(n < want ? n : want);
	return 0;
}

/* ---- keep alive -------------------------------------------------------------------------------- */

static void *ka_main(void *arg)
{
	struct nkv_ctrl *ctrl = arg;
	unsigned period = ctrl->kato_ms / 2 ? ctrl->kato_ms / 2 : 1;

	pthread_mutex_lock(&ctrl->ka_mu);
	while (!ctrl->ka_stop) {
		struct timespec ts = nkv_abstime_in_ms(period);
		int w = 0;
		while (!ctrl->ka_stop && w != ETIMEDOUT)
			w = pthread_cond_timedwait(&ctrl->ka_cv, &ctrl->ka_mu, &ts);
		if (ctrl->ka_stop)
			break;
		pthread_mutex_unlock(&ctrl->ka_mu);
		struct nkv_sqe sqe;
		memset(&sqe, 0, sizeof(sqe));
		sqe.opc = NKV_ADM_KEEP_ALIVE;
		int rc = nkv_admin(ctrl, &sqe, NULL, 0, NULL);
		pthread_mutex_lock(&ctrl->ka_mu);
		if (rc && (!ctrl->admin || ctrl->admin->err)) {
			NKV_WARN("keep alive to %s failed: %s; admin queue is down", ctrl->subnqn,
				 strerror(-rc));
			break;
		}
	}
	pthread_mutex_unlock(&ctrl->ka_mu);
	return NULL;
}

static void ka_stop(struct nkv_ctrl *ctrl)
{
	if (!ctrl->ka_running)
		return;
	pthread_mutex_lock(&ctrl->ka_mu);
	ctrl->ka_stop = true;
	pthread_cond_signal(&ctrl->ka_cv);
	pthread_mutex_unlock(&ctrl->ka_mu);
	pthread_join(ctrl->ka_thread, NULL);
	ctrl->ka_running = false;
}

/* ---- connect / disconnect ---------------------------------------------------------------------- */

void nkv_ctrl_free_mem(struct nkv_ctrl *ctrl)
{
	nkv_psk_wipe(&ctrl->psk, sizeof(ctrl->psk));
	pthread_mutex_destroy(&ctrl->admin_mu);
	pthread_mutex_destroy(&ctrl->qp_mu);
	pthread_mutex_destroy(&ctrl->ka_mu);
	pthread_cond_destroy(&ctrl->ka_cv);
	nkv_dhchap_wipe(ctrl->dh_tkey, sizeof(ctrl->dh_tkey));
	nkv_dhchap_wipe(ctrl->dh_tckey, sizeof(ctrl->dh_tckey));
	free(ctrl);
}

/** Keep Alive on its thread when the association asked for it. @return 0 or -EAGAIN. */
static int ka_start(struct nkv_ctrl *ctrl)
{
	if (!ctrl->kato_ms)
		return 0;
	ctrl->ka_stop = false;
	if (pthread_create(&ctrl->ka_thread, NULL, ka_main, ctrl) != 0)
		return -EAGAIN;
	ctrl->ka_running = true;
	return 0;
}

/**
 * A new NVMe/TCP association for @ctrl: admin queue connection, Fabrics Connect with the dynamic
 * controller ID (the target allocates a new controller), CC.EN, Identify into @id, Number of Queues.
 * The admin queue is published in ctrl->admin (under admin_mu) once it is connected; on failure it
 * stays there, failed or closed by the caller. @return 0 or -errno.
 */
static int tcp_associate(struct nkv_ctrl *ctrl, struct nkv_id_ctrlr *id)
{
	struct nkv_qpair *admin = NULL;
	uint16_t cntlid = 0;
	int rc = nkv_tcp_qp_open(ctrl, 0, NKV_ADMIN_SLOTS, &admin);
	if (rc)
		return rc;
	admin->icd_max = NKV_TCP_ADMIN_ICD;
	pthread_mutex_lock(&ctrl->admin_mu);
	ctrl->admin = admin;
	pthread_mutex_unlock(&ctrl->admin_mu);
	rc = nkv_ctrl_fabrics_connect(ctrl, admin, NKV_ADMIN_SQSIZE, NKV_CNTLID_DYNAMIC, &cntlid);
	if (rc == 0) {
		ctrl->cntlid = cntlid;
		rc = enable(ctrl);
	}
	if (rc == 0)
		rc = nkv_ctrl_identify_cmd(ctrl, NKV_CNS_CTRLR, 0, 0, id);
	if (rc == 0 && nkv_get16(&id->cntlid) != ctrl->cntlid) {
		NKV_WARN("Identify CNTLID %u differs from the Connect CNTLID %u", nkv_get16(&id->cntlid), ctrl->cntlid);
		rc = -EPROTO;
	}
	return rc;
}

int nkv_connect(const char *traddr, const char *trsvcid, const char *subnqn, const struct nkv_conn_opts *opts,
		struct nkv_ctrl **out)
{
	int rc;
	if (!traddr || !out)
		return -EINVAL;
	bool vfio_user = false;
	const char *shm_path = nkv_shm_traddr_path(traddr, &vfio_user);
	if (shm_path) /* the socket names the subsystem: NULL or "" takes whichever it serves */
		return nkv_connect_shm_nqn(shm_path, vfio_user, subnqn, opts, out);
	if (!subnqn)
		return -EINVAL;
	struct nkv_ctrl *ctrl = nkv_ctrl_alloc(traddr, trsvcid ? trsvcid : "4420", subnqn, opts, false, &rc);
	if (!ctrl)
		return rc;
	rc = tcp_associate(ctrl, &ctrl->id);
	if (rc == 0 && ctrl->id.cntrltype == NKV_CNTRLTYPE_DISCOVERY)
		ctrl->discovery = true;
	if (rc == 0 && !ctrl->discovery)
		rc = nkv_ctrl_set_num_queues(ctrl, NKV_WANT_IO_QUEUES);
	if (rc == 0)
		rc = ka_start(ctrl);
	if (rc) {
		NKV_DEBUG("connect %s at %s:%s failed: %s", subnqn, traddr, ctrl->trsvcid, strerror(-rc));
		ka_stop(ctrl);
		nkv_tcp_qp_close(ctrl->admin);
		nkv_ctrl_free_mem(ctrl);
		return rc;
	}
	NKV_INFO("connected to %s at %s:%s, cntlid %u, %u I/O queues", subnqn, traddr, ctrl->trsvcid,
		 ctrl->cntlid, ctrl->nio);
	*out = ctrl;
	return 0;
}

/* Close what is left of an association: no shutdown notification, it is gone or not ours. */
static void assoc_drop(struct nkv_ctrl *ctrl)
{
	if (ctrl->shm) {
		nkv_shm_ctrl_drop(ctrl);
		return;
	}
	pthread_mutex_lock(&ctrl->admin_mu);
	struct nkv_qpair *old = ctrl->admin;
	ctrl->admin = NULL;
	pthread_mutex_unlock(&ctrl->admin_mu);
	nkv_tcp_qp_close(old);
}

/* NVMe/TCP: close what is left of the old association, then associate again. */
static int tcp_reconnect(struct nkv_ctrl *ctrl, struct nkv_id_ctrlr *id)
{
	assoc_drop(ctrl);
	int rc = tcp_associate(ctrl, id);
	if (rc == 0 && id->cntrltype == NKV_CNTRLTYPE_DISCOVERY)
		rc = -EPROTO; /* the address now leads to a discovery controller */
	if (rc == 0)
		rc = nkv_ctrl_set_num_queues(ctrl, NKV_WANT_IO_QUEUES);
	return rc;
}

bool nkv_ctrl_hung_up(const struct nkv_ctrl *ctrl)
{
	int fd = ctrl->shm ? nkv_shm_ctrl_fd(ctrl) : ctrl->admin ? ctrl->admin->fd : -1;
	if (fd < 0)
		return true;
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL));
}

int nkv_ctrl_reconnect(struct nkv_ctrl *ctrl)
{
	if (!ctrl || ctrl->discovery)
		return -EINVAL;
	pthread_mutex_lock(&ctrl->qp_mu);
	bool busy = ctrl->qps != NULL;
	pthread_mutex_unlock(&ctrl->qp_mu);
	if (busy) /* their doorbells and sockets belong to the old association */
		return -EBUSY;
	ka_stop(ctrl);
	struct nkv_id_ctrlr *id = malloc(sizeof(*id));
	if (!id)
		return -ENOMEM;
	int rc = ctrl->shm ? nkv_shm_ctrl_reconnect(ctrl, id) : tcp_reconnect(ctrl, id);
	if (rc == 0 && strncmp(id->subnqn, ctrl->subnqn, sizeof(id->subnqn)) != 0) {
		NKV_WARN("reconnect to %s: the target now serves %.*s", ctrl->subnqn, (int)strnlen(id->subnqn, 256),
			 id->subnqn);
		rc = -ESTALE; /* another subsystem behind the same address: not the one the caller chose */
	}
	if (rc == 0) {
		memcpy(&ctrl->id, id, sizeof(*id));
		rc = ka_start(ctrl);
	}
	free(id);
	if (rc)
		assoc_drop(ctrl); /* a half-made association, or one to a subsystem not asked for: not kept */
	if (rc == 0)
		NKV_INFO("reconnected to %s at %s:%s, cntlid %u, %u I/O queues", ctrl->subnqn,
			 ctrl->shm ? nkv_shm_scheme(ctrl) : ctrl->traddr, ctrl->shm ? ctrl->traddr : ctrl->trsvcid,
			 ctrl->cntlid, ctrl->nio);
	else
		NKV_DEBUG("reconnect to %s at %s: %s", ctrl->subnqn, ctrl->traddr, strerror(-rc));
	return rc;
}

void nkv_disconnect(struct nkv_ctrl *ctrl)
{
	if (!ctrl)
		return;
	ka_stop(ctrl);
	while (ctrl->qps)
		nkv_qpair_destroy(ctrl->qps);
	ctrl->ops->ctrl_close(ctrl);
	nkv_ctrl_free_mem(ctrl);
}

void nkv_ctrl_fabrics_shutdown(struct nkv_ctrl *ctrl)
{
	/* Normal shutdown notification (CC.SHN = 01b); the target tears down on close anyway. */
	uint64_t cc;
	if (prop_get(ctrl, NKV_REG_CC, false, &cc) == 0)
		prop_set(ctrl, NKV_REG_CC, ((uint32_t)cc & ~(3u << 14)) | (1u << 14));
}

const struct nkv_id_ctrlr *nkv_ctrl_identify(const struct nkv_ctrl *ctrl)
{
	return &ctrl->id;
}

uint16_t nkv_ctrl_cntlid(const struct nkv_ctrl *ctrl)
{
	return ctrl->cntlid;
}

/* ---- I/O queue pairs --------------------------------------------------------------------------- */

int nkv_qpair_create(struct nkv_ctrl *ctrl, uint16_t depth, struct nkv_qpair **out)
{
	if (!ctrl || !out)
		return -EINVAL;
	if (ctrl->discovery)
		return -ENOSPC;
	uint16_t qid = 0;
	pthread_mutex_lock(&ctrl->qp_mu);
	for (uint16_t q = 1; q <= ctrl->nio; q++)
		if (!(ctrl->qid_used[q / 8] & (1u << (q % 8)))) {
			qid = q;
			ctrl->qid_used[q / 8] |= (uint8_t)(1u << (q % 8));
			break;
		}
	pthread_mutex_unlock(&ctrl->qp_mu);
	if (!qid)
		return -ENOSPC;

	unsigned d = depth ? depth : ctrl->opts.queue_depth;
	unsigned mqes = NKV_CAP_MQES(ctrl->cap) + 1u, maxcmd = nkv_get16(&ctrl->id.maxcmd);
	if (d > mqes)
		d = mqes;
	if (maxcmd && d > maxcmd)
		d = maxcmd;
	if (d > NKV_MAX_DEPTH)
		d = NKV_MAX_DEPTH;
	if (d < 2)
		d = 2; /* SQSIZE is 0's based and must be >= 1 */

	struct nkv_qpair *qp = NULL;
	int rc = ctrl->ops->qp_create(ctrl, qid, (uint16_t)d, &qp);
	pthread_mutex_lock(&ctrl->qp_mu);
	if (rc) {
		ctrl->qid_used[qid / 8] &= (uint8_t)~(1u << (qid % 8));
	} else {
		qp->next_qp = ctrl->qps;
		ctrl->qps = qp;
	}
	pthread_mutex_unlock(&ctrl->qp_mu);
	if (rc == 0)
		*out = qp;
	return rc;
}

void nkv_qpair_destroy(struct nkv_qpair *qp)
{
	if (!qp)
		return;
	struct nkv_ctrl *ctrl = qp->ctrl;
	int64_t deadline = nkv_client_now_ms() + qp->timeout_ms;
	while (qp->outstanding && !qp->err) {
		int64_t left = deadline - nkv_client_now_ms();
		if (left <= 0)
			break;
		nkv_qpair_poll(qp, (int)left);
	}
	pthread_mutex_lock(&ctrl->qp_mu);
	for (struct nkv_qpair **pp = &ctrl->qps; *pp; pp = &(*pp)->next_qp)
		if (*pp == qp) {
			*pp = qp->next_qp;
			break;
		}
	ctrl->qid_used[qp->qid / 8] &= (uint8_t)~(1u << (qp->qid % 8));
	pthread_mutex_unlock(&ctrl->qp_mu);
	ctrl->ops->qp_destroy(qp);
}

/* ---- namespaces -------------------------------------------------------------------------------- */

int nkv_ns_list(struct nkv_ctrl *ctrl, uint32_t *nsids, unsigned max)
{
	uint32_t *list = calloc(1024, sizeof(uint32_t));
	if (!list)
		return -ENOMEM;
	int rc = nkv_ctrl_identify_cmd(ctrl, NKV_CNS_CSI_ACTIVE_NS, NKV_CSI_KV, 0, list);
	if (rc == 0) {
		unsigned n = 0;
		while (n < 1024 && nkv_get32(&list[n])) {
			if (n < max)
				nsids[n] = nkv_get32(&list[n]);
			n++;
		}
		rc = (int)n;
	}
	free(list);
	return rc;
}

int nkv_ns_identify(struct nkv_ctrl *ctrl, uint32_t nsid, struct nkv_id_ns_kv *id)
{
	int rc = nkv_ctrl_identify_cmd(ctrl, NKV_CNS_CSI_NS, NKV_CSI_KV, nsid, id);
	if (rc == -ENXIO)
		return -ENOENT;
	/* An inactive NSID answers with a zero-filled structure: no KV format means no namespace. */
	if (rc == 0 && nkv_get16(&id->kvf[id->kvfc & 0xf].kvkml) == 0)
		return -ENOENT;
	return rc;
}
