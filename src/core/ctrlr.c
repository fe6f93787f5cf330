/* ctrlr.c - controller state: properties (CAP, VS, CC, CSTS), enable/reset/shutdown, limits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "core.h"

uint64_t nkv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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
	/* Dynamic controller IDs 1..FFEFh, as the fabrics spec reserves the rest. */
	c->cntlid = (uint16_t)(atomic_fetch_add(&ss->tgt->next_cntlid, 1) % 0xffef + 1);
	snprintf(c->hostnqn, sizeof(c->hostnqn), "%s", hostnqn ? hostnqn : "");
	if (hostid)
		memcpy(c->hostid, hostid, 16);
	c->opts = *opts;
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

void nkv_ctrlr_destroy(struct nkv_ctrlr *c)
{
	if (!c)
		return;
	nkv_admin_abort_aers(c);
	free(c);
}

/* CC values this controller accepts on enable (wire doc B.3, D.2). */
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
			c->csts = (c->csts & ~NKV_CSTS_CFS) | NKV_CSTS_RDY;
		} else {
			NKV_WARN("%s: controller %u: invalid CC %08x on enable", c->ss->nqn, c->cntlid, cc);
			c->csts |= NKV_CSTS_CFS;
		}
	}
	if (NKV_CC_SHN(cc) && !NKV_CC_SHN(old)) {
		/* Nothing is cached: RADOS acknowledged every write, so shutdown completes at once. */
		nkv_admin_abort_aers(c);
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
