/* SPDX-License-Identifier: Apache-2.0 */
/* ctrlr.c - controller state: properties (CAP, VS, CC, CSTS), enable/reset/shutdown, limits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "core.h"

static void set_feature_defaults(struct nkv_ctrlr *c)
{
	c->feat_arb = 0;
	c->feat_pm = 0;
	c->feat_temp = 0x0157; /* 343 K over-temperature threshold, the spec's customary default */
	c->feat_err = 0;
	c->aec = 0;
	c->iocs_index = 0;
	c->kv_config = NKV_KV_CONFIG_EDNEK; /* Delete of an absent key fails with 87h */
	c->nsqa = c->ncqa = 0;
}

int nkv_ctrlr_create(struct nkv_subsys *ss, const char *hostnqn, const uint8_t hostid[16],
		     const struct nkv_ctrlr_opts *opts, struct nkv_ctrlr **out)
{
	struct nkv_ctrlr *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->ss = ss;
	atomic_fetch_add(&ss->refs, 1); /* a removed subsystem lives until its last controller goes */
	if (!(c->qids = calloc(opts->max_io_queues / 8 + 1, 1))) {
		free(c);
		nkv_subsys_put(ss);
		return -ENOMEM;
	}
	atomic_init(&c->refs, 1);
	atomic_init(&c->dead, false);
	atomic_init(&c->auth_ok, false);
	/* Dynamic controller IDs in the target's range (1..FFEFh, the fabrics spec reserves the rest;
	 * a gateway of a group has a range of its own, so no two gateways' controllers share an ID:
	 * Linux native multipath refuses a second controller of one CNTLID in a subsystem), unique in
	 * the subsystem. */
	pthread_mutex_lock(&ss->tgt->lock);
	unsigned lo = ss->tgt->cntlid_min, n = lo ? ss->tgt->cntlid_max - lo + 1u : 0;
	for (unsigned tries = 0; tries < n; tries++) {
		c->cntlid = (uint16_t)(lo + atomic_fetch_add(&ss->tgt->next_cntlid, 1) % n);
		struct nkv_ctrlr *o = ss->ctrlrs;
		while (o && o->cntlid != c->cntlid)
			o = o->next;
		if (!o)
			break;
		c->cntlid = 0;
	}
	if (c->cntlid != 0) {
		c->next = ss->ctrlrs;
		ss->ctrlrs = c;
	}
	unsigned hi = ss->tgt->cntlid_max;
	pthread_mutex_unlock(&ss->tgt->lock);
	if (c->cntlid == 0) { /* every ID of the range is live (65,519 without a group) */
		if (n)
			NKV_WARN("%s: Connect of host %s refused (Controller Busy): all %u controller IDs of this "
				 "gateway's range %u-%u are in use", ss->nqn, hostnqn ? hostnqn : "", n, lo, hi);
		else
			NKV_WARN("%s: Connect of host %s refused (Controller Busy): this gateway has no controller "
				 "ID range yet (its group's state gives one; see the log)", ss->nqn, hostnqn ? hostnqn : "");
		free(c->qids);
		free(c);
		nkv_subsys_put(ss);
		return -EBUSY;
	}
	snprintf(c->hostnqn, sizeof(c->hostnqn), "%s", hostnqn ? hostnqn : "");
	if (hostid)
		memcpy(c->hostid, hostid, 16);
	c->opts = *opts;
	c->xport = NKV_XPORT_LOOP;
	for (int x = 0; x < NKV_XPORT_COUNT; x++)
		if (opts->trname && strcmp(opts->trname, nkv_xport_name((enum nkv_xport)x)) == 0)
			c->xport = (enum nkv_xport)x;
	c->cap = (uint64_t)opts->mqes | NKV_CAP_CQR | (20ull << NKV_CAP_TO_SHIFT) | NKV_CAP_CSS_NVM |
		 NKV_CAP_CSS_IOCS;
	c->vs = NKV_VS_2_0;
	set_feature_defaults(c);
	c->last_keepalive_ms = nkv_now_ms();
	atomic_init(&c->bytes_read, 0);
	atomic_init(&c->bytes_written, 0);
	atomic_init(&c->host_reads, 0);
	atomic_init(&c->host_writes, 0);
	atomic_init(&c->media_errors, 0);
	NKV_INFO("%s: controller %u for host %s", ss->nqn, c->cntlid, c->hostnqn);
	*out = c;
	return 0;
}

static void unlink_ctrlr(struct nkv_ctrlr *c)
{
	pthread_mutex_lock(&c->ss->tgt->lock);
	c->aen_msgq = NULL; /* no more notices: its admin queue is going */
	for (struct nkv_ctrlr **p = &c->ss->ctrlrs; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&c->ss->tgt->lock);
}

void nkv_ctrlr_kill(struct nkv_ctrlr *c)
{
	if (atomic_exchange(&c->dead, true))
		return;
	unlink_ctrlr(c); /* no new I/O queue can join it */
	nkv_admin_abort_aers(c);
	NKV_INFO("%s: controller %u for host %s: association ended", c->ss->nqn, c->cntlid, c->hostnqn);
}

void nkv_ctrlr_put(struct nkv_ctrlr *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
		struct nkv_subsys *ss = c->ss;
		if (!atomic_load(&c->dead))
			unlink_ctrlr(c);
		nkv_dhchap_host_free((struct nkv_dhchap_host *)c->dhchap);
		free(c->qids);
		free(c);
		nkv_subsys_put(ss);
	}
}

struct nkv_ctrlr *nkv_ctrlr_lookup(struct nkv_subsys *ss, uint16_t cntlid)
{
	struct nkv_ctrlr *c;

	pthread_mutex_lock(&ss->tgt->lock);
	for (c = ss->ctrlrs; c && c->cntlid != cntlid; c = c->next)
		;
	if (c)
		nkv_ctrlr_get(c);
	pthread_mutex_unlock(&ss->tgt->lock);
	return c;
}

bool nkv_ctrlr_claim_qid(struct nkv_ctrlr *c, uint16_t qid)
{
	bool ok = false;

	if (qid == 0 || qid > c->opts.max_io_queues)
		return false;
	pthread_mutex_lock(&c->ss->tgt->lock);
	if (!(c->qids[qid / 8] & (1u << (qid % 8)))) {
		c->qids[qid / 8] |= (uint8_t)(1u << (qid % 8));
		ok = true;
	}
	pthread_mutex_unlock(&c->ss->tgt->lock);
	return ok;
}

void nkv_ctrlr_release_qid(struct nkv_ctrlr *c, uint16_t qid)
{
	if (qid == 0 || qid > c->opts.max_io_queues)
		return;
	pthread_mutex_lock(&c->ss->tgt->lock);
	c->qids[qid / 8] &= (uint8_t)~(1u << (qid % 8));
	pthread_mutex_unlock(&c->ss->tgt->lock);
}

void nkv_ctrlr_destroy(struct nkv_ctrlr *c)
{
	if (!c)
		return;
	nkv_ctrlr_kill(c);
	nkv_ctrlr_put(c);
}

/* CC values this controller accepts on enable (docs/nvme-kv-wire.md B.3, D.2). */
static bool cc_valid(uint32_t cc)
{
	unsigned css = NKV_CC_CSS(cc);
	if (css != NKV_CC_CSS_NVM && css != NKV_CC_CSS_IOCS && css != NKV_CC_CSS_ADMIN)
		return false;
	if (NKV_CC_MPS(cc) != 0 || NKV_CC_AMS(cc) != 0) /* MPSMIN = MPSMAX = 4 KiB; round robin only */
		return false;
	/* Queue entry sizes are checked when I/O queues are made; 0 (unset) or the only sizes we have. */
	if ((NKV_CC_IOSQES(cc) != 0 && NKV_CC_IOSQES(cc) != 6) || (NKV_CC_IOCQES(cc) != 0 && NKV_CC_IOCQES(cc) != 4))
		return false;
	return true;
}

static void ctrlr_reset(struct nkv_ctrlr *c)
{
	nkv_admin_abort_aers(c);
	set_feature_defaults(c);
	c->csts &= ~(NKV_CSTS_RDY | NKV_CSTS_CFS);
}

int nkv_ctrlr_prop_get(struct nkv_ctrlr *c, uint32_t ofs, unsigned size, uint64_t *val)
{
	if (ofs == NKV_REG_CAP && size == 8)
		*val = c->cap;
	else if (ofs == NKV_REG_VS && size == 4)
		*val = c->vs;
	else if (ofs == NKV_REG_CC && size == 4)
		*val = c->cc;
	else if (ofs == NKV_REG_CSTS && size == 4)
		*val = c->csts;
	else
		return -EINVAL;
	return 0;
}

int nkv_ctrlr_prop_set(struct nkv_ctrlr *c, uint32_t ofs, unsigned size, uint64_t val)
{
	if (ofs != NKV_REG_CC || size != 4)
		return -EINVAL; /* CAP, VS and CSTS are read-only; NSSR is not supported */
	uint32_t old = c->cc, cc = (uint32_t)val & 0x01fffff1u; /* EN, CSS, MPS, AMS, SHN, IOSQES, IOCQES, CRIME */

	if ((old & NKV_CC_EN) && !(cc & NKV_CC_EN)) {
		ctrlr_reset(c);
		c->csts &= ~NKV_CSTS_SHST_MASK;
	}
	if (!(old & NKV_CC_EN) && (cc & NKV_CC_EN)) {
		if (cc_valid(cc)) {
			/* Pairs with the acquire load in nkv_ctrlr_ready() on I/O queue threads. */
			__atomic_store_n(&c->csts, (c->csts & ~NKV_CSTS_CFS) | NKV_CSTS_RDY, __ATOMIC_RELEASE);
		} else {
			NKV_WARN("%s: controller %u: invalid CC %08x on enable", c->ss->nqn, c->cntlid, cc);
			c->csts |= NKV_CSTS_CFS;
		}
	}
	if (NKV_CC_SHN(cc) && !NKV_CC_SHN(old)) {
		/* Nothing is cached: RADOS acknowledged every write, so shutdown completes at once. Held
		 * AERs stay held until a reset or the association's end, as in SPDK's nvmf_tgt and Linux
		 * nvmet: hosts (SPDK's) complete their own AERs before CC.SHN and treat a CQE for one as
		 * a protocol error. */
		c->csts = (c->csts & ~NKV_CSTS_SHST_MASK) | NKV_CSTS_SHST_DONE;
	}
	c->cc = cc;
	return 0;
}

uint32_t nkv_ctrlr_max_xfer(struct nkv_ctrlr *c)
{
	uint64_t need = atomic_load_explicit(&c->ss->max_value, memory_order_relaxed), x = 4096;
	while (x < need && x < (1ull << 31))
		x <<= 1;
	return (uint32_t)x;
}
