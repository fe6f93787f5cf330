/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin.c - admin command set (docs/nvme-kv-wire.md D.1): Identify, Get Log Page, Get/Set Features, Keep Alive,
 * Asynchronous Event Request, Abort. Parse validates the SQE and picks the execute function from an
 * opcode table; execute builds the data and completes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "core.h"

#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)
#define OK 0
#define NKV_DISC_LOG_MAX_READ (1u << 20)

static inline uint32_t cdw(const struct nkv_req *r, int n)
{
	const uint32_t *d = &r->cmd.cdw10;
	return nkv_get32(&d[n - 10]);
}

static void pad_copy(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}

/* ---- Identify ---------------------------------------------------------------------------------- */

static void id_ctrlr(struct nkv_req *req, uint8_t *buf)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;
	struct nkv_id_ctrlr *id = (struct nkv_id_ctrlr *)buf;
	uint32_t mdts = 0;

	pad_copy(id->sn, sizeof(id->sn), c->ss->sn);
	pad_copy(id->mn, sizeof(id->mn), "rados-nkv");
	pad_copy(id->fr, sizeof(id->fr), NKV_FW_REV);
	id->rab = 6;
	/* The subsystem may have several controllers (the gateways of a group), and ANA reports which
	 * paths to use. Linux builds a multipath head on bit 1 and reads log 0Ch on bit 3. */
	id->cmic = NKV_CMIC_MULTI_CTRL | (c->ss->discovery ? 0 : NKV_CMIC_ANA);
	while ((4096u << mdts) < nkv_ctrlr_max_xfer(c))
		mdts++;
	id->mdts = (uint8_t)mdts;
	nkv_put16(&id->cntlid, c->cntlid);
	nkv_put32(&id->ver, c->vs);
	nkv_put32(&id->ctratt, NKV_CTRATT_HOSTID_128);
	id->cntrltype = c->ss->discovery ? NKV_CNTRLTYPE_DISCOVERY : NKV_CNTRLTYPE_IO;
	id->acl = 3;
	id->aerl = NKV_AERL;
	if (!c->ss->discovery) { /* namespaces come and go live (control plane): hosts rescan on the notice */
		nkv_put32(&id->oaes, NKV_OAES_NS_ATTR | NKV_OAES_ANA_CHANGE);
		/* ANA: states optimized, non-optimized and inaccessible (the control plane sets them); a
		 * namespace's group is fixed while it is attached. Linux sizes its log buffer from
		 * NANAGRPID and MNAN (MNAN 0 with CMIC bit 3 fails its controller: "Invalid MNAN"). */
		id->anacap = NKV_ANACAP_OPTIMIZED | NKV_ANACAP_NON_OPTIMIZED | NKV_ANACAP_INACCESSIBLE |
			     NKV_ANACAP_GRPID_FIXED;
		id->anatt = 10; /* seconds; states change at once, never through "change" */
		nkv_put32(&id->anagrpmax, NKV_ANA_GROUPS);
		nkv_put32(&id->nanagrpid, NKV_ANA_GROUPS);
		nkv_put32(&id->mnan, NKV_MAX_NSID);
	}
	id->frmw = 0x3; /* one read-only slot */
	id->lpa = NKV_LPA_CMD_EFFECTS | NKV_LPA_EXT_DATA;
	nkv_put16(&id->kas, NKV_KAS);
	id->sqes = 0x66;
	id->cqes = 0x44;
	nkv_put16(&id->maxcmd, (uint16_t)(c->opts.mqes + 1));
	nkv_put32(&id->nn, c->ss->discovery ? 0 : NKV_MAX_NSID);
	if (c->opts.fabrics) {
		nkv_put32(&id->sgls, NKV_SGLS_SUPPORTED | NKV_SGLS_TRANSPORT_DATA_BLOCK);
		nkv_put32(&id->ioccsz, c->opts.ioccsz);
		nkv_put32(&id->iorcsz, c->opts.iorcsz);
		id->msdbd = c->opts.msdbd;
	}
	snprintf(id->subnqn, sizeof(id->subnqn), "%s", c->ss->nqn);
}

static void id_ns_kv(const struct nkv_ns *ns, uint8_t *buf)
{
	struct nkv_id_ns_kv *id = (struct nkv_id_ns_kv *)buf;
	uint64_t used = atomic_load(&ns->used), cap = atomic_load(&ns->capacity);

	nkv_put64(&id->nsze, cap ? cap : used);
	nkv_put64(&id->nuse, used);
	id->nkvf = 0; /* one format */
	id->nmic = NKV_NMIC_SHARED;
	nkv_put32(&id->anagrpid, ns->anagrpid);
	id->nsattr = ns->read_only ? 1 : 0;
	memcpy(id->nguid, ns->nguid, 16);
	memcpy(id->eui64, ns->eui64, 8);
	nkv_put16(&id->kvf[0].kvkml, NKV_KEY_MAX);
	nkv_put32(&id->kvf[0].kvvml, (uint32_t)ns->max_value);
}

/*
 * CNS 00h for a KV namespace: SPDK's host drops a namespace whose NCAP is 0, and computes its size
 * as NSZE * 2^LBADS; so NSZE/NCAP/NUSE carry bytes with LBADS 0 (docs/nvme-kv-wire.md A.8).
 */
static void id_ns_nvm(const struct nkv_ns *ns, uint8_t *buf)
{
	struct nkv_id_ns_nvm_head *id = (struct nkv_id_ns_nvm_head *)buf;
	uint64_t used = atomic_load(&ns->used), cap = atomic_load(&ns->capacity);

	if (!cap)
		cap = used > ns->max_value ? used : ns->max_value;
	nkv_put64(&id->nsze, cap);
	nkv_put64(&id->ncap, cap);
	nkv_put64(&id->nuse, used);
	id->nmic = NKV_NMIC_SHARED;
	nkv_put32(buf + NKV_ID_NS_NVM_ANAGRPID, ns->anagrpid);
	memcpy(buf + NKV_ID_NS_NVM_NGUID, ns->nguid, 16);
	memcpy(buf + NKV_ID_NS_NVM_EUI64, ns->eui64, 8);
}

static void id_ns_indep(const struct nkv_ns *ns, uint8_t *buf)
{
	struct nkv_id_ns_indep_head *id = (struct nkv_id_ns_indep_head *)buf;

	id->nmic = NKV_NMIC_SHARED;
	nkv_put32(&id->anagrpid, ns->anagrpid);
	id->nsattr = ns->read_only ? 1 : 0;
	id->nstat = 0x1; /* ready: Linux skips a namespace without it */
}

static uint8_t *ns_desc(uint8_t *p, uint8_t nidt, const void *v, uint8_t nidl)
{
	struct nkv_ns_desc *d = (struct nkv_ns_desc *)p;

	d->nidt = nidt;
	d->nidl = nidl;
	memcpy(p + sizeof(*d), v, nidl);
	return p + sizeof(*d) + nidl;
}

/* The same IDs as CNS 00h and 05h report: hosts compare them (Linux: "IDs don't match"). */
static void id_ns_desc(const struct nkv_ns *ns, uint8_t *buf)
{
	static const uint8_t csi = NKV_CSI_KV;
	uint8_t *p = buf;

	p = ns_desc(p, NKV_NIDT_EUI64, ns->eui64, 8);
	p = ns_desc(p, NKV_NIDT_NGUID, ns->nguid, 16);
	p = ns_desc(p, NKV_NIDT_UUID, ns->uuid, 16);
	ns_desc(p, NKV_NIDT_CSI, &csi, 1); /* then NIDT 0 (the buffer is zeroed): the end */
}

static void id_active_list(struct nkv_req *req, uint32_t after, uint8_t *buf)
{
	unsigned n = 0;
	for (uint32_t i = after + 1; i <= NKV_MAX_NSID && n < 1024; i++)
		if (nkv_subsys_has_ns(req->qp->ctrlr->ss, i))
			nkv_put32(buf + 4 * n++, i);
}

static void exec_identify(struct nkv_req *req)
{
	static _Thread_local uint8_t buf[NKV_IDENTIFY_SIZE];
	uint32_t nsid = nkv_get32(&req->cmd.nsid);
	unsigned cns = cdw(req, 10) & 0xff, csi = cdw(req, 11) >> 24;
	struct nkv_ns *ns = nkv_ns_get(req->qp->ctrlr->ss, nsid); /* held while we copy from it */
	nkv_status st = OK;

	memset(buf, 0, sizeof(buf));
	switch (cns) {
	case NKV_CNS_NS:
	case NKV_CNS_INDEP_NS:
		/* A valid but inactive NSID (or the broadcast one) gets zeros; 0 or > NN is invalid. */
		if (nsid == 0 || (nsid > NKV_MAX_NSID && nsid != 0xffffffffu))
			st = ST(GENERIC, INVALID_NS);
		else if (ns && cns == NKV_CNS_NS)
			id_ns_nvm(ns, buf);
		else if (ns)
			id_ns_indep(ns, buf);
		break;
	case NKV_CNS_CTRLR:
		id_ctrlr(req, buf);
		break;
	case NKV_CNS_ACTIVE_NS:
		if (nsid >= 0xfffffffeu)
			st = ST(GENERIC, INVALID_NS);
		else
			id_active_list(req, nsid, buf);
		break;
	case NKV_CNS_NS_DESC:
		if (!ns)
			st = ST(GENERIC, INVALID_NS);
		else
			id_ns_desc(ns, buf);
		break;
	case NKV_CNS_CSI_NS:
		if (csi != NKV_CSI_KV)
			st = ST(GENERIC, INVALID_FIELD);
		else if (nsid == 0 || nsid > NKV_MAX_NSID)
			st = ST(GENERIC, INVALID_NS);
		else if (ns)
			id_ns_kv(ns, buf);
		break;
	case NKV_CNS_CSI_CTRLR:
		if (csi == NKV_CSI_KV)
			nkv_put32(buf, NKV_KV_SPEC_VER);
		else if (csi != NKV_CSI_NVM)
			st = ST(GENERIC, INVALID_FIELD);
		break;
	case NKV_CNS_CSI_ACTIVE_NS:
		if (nsid >= 0xfffffffeu)
			st = ST(GENERIC, INVALID_NS);
		else if (csi == NKV_CSI_KV)
			id_active_list(req, nsid, buf);
		else if (csi != NKV_CSI_NVM)
			st = ST(GENERIC, INVALID_FIELD);
		break;
	case NKV_CNS_IOCS:
		nkv_put64(buf, NKV_IOCS_VECTOR_NVM | NKV_IOCS_VECTOR_KV);
		break;
	default:
		st = ST(GENERIC, INVALID_FIELD);
	}
	if (ns)
		nkv_ns_put(ns);
	if (st == OK)
		nkv_req_copy_out(req, buf, NKV_IDENTIFY_SIZE);
	nkv_req_complete(req, st);
}

/* ---- Get Log Page ------------------------------------------------------------------------------ */

static const uint8_t g_admin_supported[] = {
	NKV_ADM_GET_LOG_PAGE, NKV_ADM_IDENTIFY, NKV_ADM_ABORT, NKV_ADM_SET_FEATURES,
	NKV_ADM_GET_FEATURES, NKV_ADM_ASYNC_EVENT, NKV_ADM_KEEP_ALIVE,
};

static void put128(uint8_t *p, uint64_t v)
{
	nkv_put64(p, v);
	nkv_put64(p + 8, 0);
}

/* Build log @lid for CSI @csi (@lsp) into @buf; @return its size, or 0 when the log does not exist. */
static uint32_t build_log(struct nkv_ctrlr *c, unsigned lid, unsigned csi, unsigned lsp, bool rae, uint8_t *buf)
{
	switch (lid) {
	case NKV_LID_ANA:
		return nkv_aen_ana_log(c, buf, lsp & NKV_ANA_LSP_RGO, !rae);
	case NKV_LID_CHANGED_NS:
		nkv_aen_changed_ns_log(c, buf, !rae); /* RAE clear: read, so cleared and unmasked */
		return 4096;
	case NKV_LID_SUPPORTED: {
		static const uint8_t lids[] = {NKV_LID_SUPPORTED, NKV_LID_ERROR, NKV_LID_SMART,
					       NKV_LID_FW_SLOT, NKV_LID_CHANGED_NS, NKV_LID_CMD_EFFECTS,
					       NKV_LID_ANA};
		for (size_t i = 0; i < sizeof(lids); i++)
			nkv_put32(buf + 4 * lids[i], 1); /* LSUPP */
		return 1024;
	}
	case NKV_LID_ERROR:
		return 64 * 1; /* ELPE 0: one entry; no errors recorded, so error count 0 */
	case NKV_LID_SMART: {
		struct nkv_log_smart *s = (struct nkv_log_smart *)buf;
		/* Data units are thousands of 512-byte units, rounded up. */
		put128(s->data_units_read, (atomic_load(&c->bytes_read) / 512 + 999) / 1000);
		put128(s->data_units_written, (atomic_load(&c->bytes_written) / 512 + 999) / 1000);
		put128(s->host_reads, atomic_load(&c->host_reads));
		put128(s->host_writes, atomic_load(&c->host_writes));
		put128(s->media_errors, atomic_load(&c->media_errors));
		return sizeof(*s);
	}
	case NKV_LID_FW_SLOT: {
		struct nkv_log_fw_slot *f = (struct nkv_log_fw_slot *)buf;
		f->afi = 1;
		pad_copy(f->frs[0], 8, NKV_FW_REV);
		return sizeof(*f);
	}
	case NKV_LID_CMD_EFFECTS: {
		struct nkv_log_effects *e = (struct nkv_log_effects *)buf;
		if (csi != NKV_CSI_NVM && csi != NKV_CSI_KV)
			return 0;
		for (size_t i = 0; i < sizeof(g_admin_supported); i++)
			nkv_put32(&e->acs[g_admin_supported[i]], NKV_EFFECTS_CSUPP);
		if (csi == NKV_CSI_KV) {
			nkv_put32(&e->iocs[NKV_KV_FLUSH], NKV_EFFECTS_CSUPP);
			nkv_put32(&e->iocs[NKV_KV_STORE], NKV_EFFECTS_CSUPP | NKV_EFFECTS_LBCC);
			nkv_put32(&e->iocs[NKV_KV_RETRIEVE], NKV_EFFECTS_CSUPP);
			nkv_put32(&e->iocs[NKV_KV_LIST], NKV_EFFECTS_CSUPP);
			nkv_put32(&e->iocs[NKV_KV_DELETE], NKV_EFFECTS_CSUPP | NKV_EFFECTS_LBCC);
			nkv_put32(&e->iocs[NKV_KV_EXIST], NKV_EFFECTS_CSUPP);
			nkv_put32(&e->iocs[NKV_VS_RETRIEVE_RANGE], NKV_EFFECTS_CSUPP); /* built-in vendor */
			nkv_put32(&e->iocs[NKV_VS_STORE_TTL], NKV_EFFECTS_CSUPP | NKV_EFFECTS_LBCC);
			nkv_exec_effects(c->ss, e->iocs); /* the allowlisted vendor opcodes */
		}
		return sizeof(*e);
	}
	default:
		return 0;
	}
}

/* Discovery log (70h): built per request, since it depends on the host and changes with config. */
static void exec_get_disc_log(struct nkv_req *req)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;
	uint64_t ofs = ((uint64_t)cdw(req, 13) << 32) | cdw(req, 12);
	uint8_t *log = NULL;
	uint32_t size = nkv_disc_log_build(c->ss->tgt, c->hostnqn, &log);

	if (size == 0)
		nkv_req_complete(req, ST(GENERIC, INTERNAL));
	else if (ofs > size)
		nkv_req_complete(req, ST(GENERIC, INVALID_FIELD));
	else {
		nkv_req_copy_out(req, log + ofs, (uint32_t)(size - ofs));
		nkv_req_complete(req, OK);
	}
	free(log);
}

static void exec_get_log(struct nkv_req *req)
{
	static _Thread_local uint8_t buf[NKV_ANA_LOG_MAX];
	unsigned lid = cdw(req, 10) & 0xff, csi = cdw(req, 14) >> 24, lsp = cdw(req, 10) >> 8 & 0x7f;
	uint64_t ofs = ((uint64_t)cdw(req, 13) << 32) | cdw(req, 12);
	uint32_t size;

	if (req->qp->ctrlr->ss->discovery) {
		if (lid == NKV_LID_DISCOVERY)
			exec_get_disc_log(req);
		else
			nkv_req_complete(req, ST(CMD, INVALID_LOG_PAGE));
		return;
	}
	memset(buf, 0, sizeof(buf));
	if ((size = build_log(req->qp->ctrlr, lid, csi, lsp, cdw(req, 10) >> 15 & 1, buf)) == 0) {
		nkv_req_complete(req, lid == NKV_LID_CMD_EFFECTS ? ST(GENERIC, INVALID_FIELD) : ST(CMD, INVALID_LOG_PAGE));
		return;
	}
	if (ofs > size) { /* an offset past the end of the log */
		nkv_req_complete(req, ST(GENERIC, INVALID_FIELD));
		return;
	}
	nkv_req_copy_out(req, buf + ofs, (uint32_t)(size - ofs));
	nkv_req_complete(req, OK);
}

/* ---- Features ---------------------------------------------------------------------------------- */

static bool feature_known(unsigned fid)
{
	switch (fid) {
	case NKV_FEAT_ARBITRATION: case NKV_FEAT_POWER_MGMT: case NKV_FEAT_TEMP_THRESH:
	case NKV_FEAT_ERROR_RECOVERY: case NKV_FEAT_VWC: case NKV_FEAT_NUM_QUEUES:
	case NKV_FEAT_ASYNC_EVENT: case NKV_FEAT_KATO: case NKV_FEAT_IOCS_PROFILE:
	case NKV_FEAT_KV_CONFIG: case NKV_FEAT_HOST_ID:
		return true;
	}
	return false;
}

static uint32_t *feature_slot(struct nkv_ctrlr *c, unsigned fid)
{
	switch (fid) {
	case NKV_FEAT_ARBITRATION: return &c->feat_arb;
	case NKV_FEAT_POWER_MGMT: return &c->feat_pm;
	case NKV_FEAT_TEMP_THRESH: return &c->feat_temp;
	case NKV_FEAT_ERROR_RECOVERY: return &c->feat_err;
	case NKV_FEAT_ASYNC_EVENT: return &c->aec;
	case NKV_FEAT_KATO: return &c->kato_ms;
	case NKV_FEAT_IOCS_PROFILE: return &c->iocs_index;
	case NKV_FEAT_KV_CONFIG: return &c->kv_config;
	}
	return NULL;
}

static uint32_t feature_default(unsigned fid)
{
	switch (fid) {
	case NKV_FEAT_TEMP_THRESH: return 0x0157;
	case NKV_FEAT_KV_CONFIG: return NKV_KV_CONFIG_EDNEK;
	}
	return 0;
}

static uint32_t num_queues(const struct nkv_ctrlr *c)
{
	return (uint32_t)c->nsqa | ((uint32_t)c->ncqa << 16);
}

static void exec_get_features(struct nkv_req *req)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;
	unsigned fid = cdw(req, 10) & 0xff, sel = (cdw(req, 10) >> 8) & 7;
	uint32_t *slot = feature_slot(c, fid);
	uint32_t v = 0;

	if (sel == NKV_FEAT_SEL_CAPS) {
		/* Changeable, not saveable, not namespace specific. */
		v = (fid == NKV_FEAT_VWC || fid == NKV_FEAT_HOST_ID) ? 0 : NKV_FEAT_CAP_CHANGEABLE;
	} else if (fid == NKV_FEAT_HOST_ID) {
		if (!(cdw(req, 11) & 1)) { /* only the 128-bit host identifier exists */
			nkv_req_complete(req, ST(GENERIC, INVALID_FIELD));
			return;
		}
		nkv_req_copy_out(req, c->hostid, 16);
	} else if (fid == NKV_FEAT_NUM_QUEUES) {
		v = sel == NKV_FEAT_SEL_CURRENT ? num_queues(c) : 0;
	} else if (slot) {
		v = sel == NKV_FEAT_SEL_CURRENT ? *slot : feature_default(fid);
	} /* VWC: none present, reads as disabled */
	nkv_put32(&req->cpl.dw0, v);
	nkv_req_complete(req, OK);
}

static void exec_set_features(struct nkv_req *req)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;
	unsigned fid = cdw(req, 10) & 0xff;
	uint32_t v = cdw(req, 11);
	nkv_status st = OK;

	switch (fid) {
	case NKV_FEAT_NUM_QUEUES: {
		uint32_t nsqr = v & 0xffff, ncqr = v >> 16, max = c->opts.max_io_queues ? c->opts.max_io_queues - 1u : 0;
		if (nsqr == 0xffff || ncqr == 0xffff || c->opts.max_io_queues == 0) {
			st = ST(GENERIC, INVALID_FIELD);
			break;
		}
		c->nsqa = (uint16_t)(nsqr < max ? nsqr : max);
		c->ncqa = (uint16_t)(ncqr < max ? ncqr : max);
		nkv_put32(&req->cpl.dw0, num_queues(c));
		break;
	}
	case NKV_FEAT_KATO: {
		/* Round up to the keep-alive granularity (KAS x 100 ms), as SPDK does. */
		uint32_t g = NKV_KAS * 100;
		c->kato_ms = v ? (v + g - 1) / g * g : 0;
		c->last_keepalive_ms = nkv_now_ms();
		break;
	}
	case NKV_FEAT_IOCS_PROFILE:
		if ((v & 0x1ff) != 0) /* one combination: vector 0 = NVM + KV */
			st = ST(CMD, IOCS_COMBINATION_REJECTED);
		else
			c->iocs_index = 0;
		break;
	case NKV_FEAT_KV_CONFIG:
		c->kv_config = v & NKV_KV_CONFIG_EDNEK;
		break;
	case NKV_FEAT_VWC:
		st = ST(GENERIC, INVALID_FIELD); /* no volatile write cache: RADOS acks are durable */
		break;
	case NKV_FEAT_HOST_ID:
		st = ST(GENERIC, CMD_SEQUENCE_ERROR); /* fabrics: the host ID comes with Connect */
		break;
	case NKV_FEAT_ASYNC_EVENT:
		c->aec = v;
		nkv_aen_deliver(c); /* a notice that waited for the host to enable it */
		break;
	default:
		*feature_slot(c, fid) = v;
	}
	nkv_req_complete(req, st);
}

/* ---- Keep Alive, AER, Abort -------------------------------------------------------------------- */

static void exec_keep_alive(struct nkv_req *req)
{
	req->qp->ctrlr->last_keepalive_ms = nkv_now_ms();
	nkv_req_complete(req, OK);
}

static void exec_aer(struct nkv_req *req)
{
	struct nkv_ctrlr *c = req->qp->ctrlr;

	if (c->naer > NKV_AERL) {
		nkv_req_complete(req, ST(CMD, AER_LIMIT_EXCEEDED));
		return;
	}
	c->aer[c->naer++] = req; /* held until an event, a reset or teardown */
	nkv_aen_attach(c, req->qp->msgq);
	nkv_aen_deliver(c);
}

void nkv_admin_abort_aers(struct nkv_ctrlr *c)
{
	while (c->naer > 0) {
		struct nkv_req *req = c->aer[--c->naer];
		nkv_req_complete(req, ST(GENERIC, ABORTED_SQ_DELETION));
	}
}

static void exec_abort(struct nkv_req *req)
{
	/* Commands are never aborted once started (RADOS ops cannot be recalled): DW0 bit 0 says so. */
	nkv_put32(&req->cpl.dw0, 1);
	nkv_req_complete(req, OK);
}

/* ---- parse ------------------------------------------------------------------------------------- */

struct admin_op {
	void (*execute)(struct nkv_req *req);
	nkv_status (*parse)(struct nkv_req *req); /* NULL: no fields to check, no data */
};

static nkv_status parse_identify(struct nkv_req *req)
{
	req->length = NKV_IDENTIFY_SIZE;
	return OK;
}

static nkv_status parse_get_log(struct nkv_req *req)
{
	uint64_t numd = ((uint64_t)(cdw(req, 11) & 0xffff) << 16 | (cdw(req, 10) >> 16)) + 1;
	uint64_t ofs = ((uint64_t)cdw(req, 13) << 32) | cdw(req, 12);

	if (cdw(req, 14) & (1u << 23)) /* offset type: index. No log here is indexed. */
		return ST(GENERIC, INVALID_FIELD);
	/* LPO is dword aligned; no log here exceeds 4 KiB, except the discovery log and the ANA log
	 * (Linux reads 16 + NANAGRPID x 32 + MNAN x 4 bytes of it at once; past the log: zeros). */
	unsigned lid = cdw(req, 10) & 0xff;
	uint32_t max = req->qp->ctrlr->ss->discovery ? NKV_DISC_LOG_MAX_READ : lid == NKV_LID_ANA ? 65536u : 4096u;
	if ((ofs & 3) || numd * 4 > max)
		return ST(GENERIC, INVALID_FIELD);
	req->length = (uint32_t)(numd * 4);
	return OK;
}

static nkv_status parse_features(struct nkv_req *req)
{
	unsigned fid = cdw(req, 10) & 0xff;

	if (!feature_known(fid))
		return ST(GENERIC, INVALID_FIELD);
	if (req->cmd.opc == NKV_ADM_SET_FEATURES && (cdw(req, 10) >> 31))
		return ST(CMD, FEATURE_NOT_SAVEABLE);
	if (req->cmd.opc == NKV_ADM_GET_FEATURES && fid == NKV_FEAT_HOST_ID &&
	    ((cdw(req, 10) >> 8) & 7) != NKV_FEAT_SEL_CAPS)
		req->length = 16;
	return OK;
}

static const struct admin_op g_admin_ops[256] = {
	[NKV_ADM_GET_LOG_PAGE] = {exec_get_log, parse_get_log},
	[NKV_ADM_IDENTIFY] = {exec_identify, parse_identify},
	[NKV_ADM_ABORT] = {exec_abort, NULL},
	[NKV_ADM_SET_FEATURES] = {exec_set_features, parse_features},
	[NKV_ADM_GET_FEATURES] = {exec_get_features, parse_features},
	[NKV_ADM_ASYNC_EVENT] = {exec_aer, NULL},
	[NKV_ADM_KEEP_ALIVE] = {exec_keep_alive, NULL},
};

/* A discovery controller serves only these (docs/nvme-kv-wire.md C.10). */
static bool discovery_allows(const struct nkv_req *req)
{
	unsigned fid = cdw(req, 10) & 0xff;

	switch (req->cmd.opc) {
	case NKV_ADM_IDENTIFY:
	case NKV_ADM_GET_LOG_PAGE:
	case NKV_ADM_ASYNC_EVENT:
	case NKV_ADM_KEEP_ALIVE:
		return true;
	case NKV_ADM_SET_FEATURES:
	case NKV_ADM_GET_FEATURES:
		return fid == NKV_FEAT_ASYNC_EVENT || fid == NKV_FEAT_KATO;
	}
	return false;
}

nkv_status nkv_admin_parse(struct nkv_req *req)
{
	const struct admin_op *op = &g_admin_ops[req->cmd.opc];

	if (!op->execute)
		return ST(GENERIC, INVALID_OPCODE);
	if (req->qp->ctrlr->ss->discovery && !discovery_allows(req))
		return req->cmd.opc == NKV_ADM_SET_FEATURES || req->cmd.opc == NKV_ADM_GET_FEATURES
			       ? ST(GENERIC, INVALID_FIELD) : ST(GENERIC, INVALID_OPCODE);
	if (req->qp->ctrlr->ss->discovery && req->cmd.opc == NKV_ADM_IDENTIFY && (cdw(req, 10) & 0xff) != NKV_CNS_CTRLR)
		return ST(GENERIC, INVALID_FIELD);
	req->execute = op->execute;
	return op->parse ? op->parse(req) : OK;
}
