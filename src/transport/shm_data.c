/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_data.c - the shared-memory transport's data path: IOVA translation against the registered
 * regions, PRP walks, and bounce memory for buffers that are not contiguous in one region.
 *
 * Bounce memory is a resource a host can hold, so it has limits and a deadline: a transport-wide
 * budget and a per-controller one, both charged before the buffer is allocated and released as soon
 * as the data has moved (a Store's once the backend has it, a Retrieve's once it is in the host's
 * pages), never held until the host makes room in its CQ. Copies run on the poller in slices of
 * COPY_SLICE per controller per scan, so one host's large scattered commands cannot stall the other
 * controllers of its poller; PRP walks are bounded per scan as well (WALK_BUDGET, checked by the
 * caller) and a command waiting for budget is not walked again until the budget could take it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nkv/nkv_dev.h"
#include "transport/shm_cuda.h"
#include "transport/shm_int.h"

#define COPY_SLICE (1u << 20) /* bounce bytes one controller copies per poller scan */

/* ---- IOVA translation -------------------------------------------------------------------------- */

/* The region holding [iova, iova + len), or NULL. Caller holds c->mu. */
static struct shm_region *find_region(struct shm_ctrl *c, uint64_t iova, uint64_t len)
{
	for (unsigned i = 0; i < c->nregions; i++) {
		struct shm_region *r = c->regions[i];
		if (iova >= r->iova && len <= r->len && iova - r->iova <= r->len - len)
			return r;
	}
	return NULL;
}

void nkv_shm_unpin(struct shm_ctrl *c, struct shm_region **pin)
{
	if (!*pin)
		return;
	pthread_mutex_lock(&c->mu);
	(*pin)->refs--;
	pthread_mutex_unlock(&c->mu);
	*pin = NULL;
}

/* Pin the region holding a range the controller will read (or write, with @write). NULL if invalid. */
static struct shm_region *pin_range(struct shm_ctrl *c, uint64_t iova, uint64_t len, bool write)
{
	pthread_mutex_lock(&c->mu);
	struct shm_region *r = find_region(c, iova, len ? len : 1);
	if (r && write && r->ro)
		r = NULL;
	if (r)
		r->refs++;
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* Translate and pin a range in HOST memory (queues, PRP lists, direct data). NULL if invalid or if
 * it is GPU memory, which the controller's CPU cannot touch. */
uint8_t *nkv_shm_map_range(struct shm_ctrl *c, uint64_t iova, uint64_t len, bool write, struct shm_region **pin)
{
	struct shm_region *r = pin_range(c, iova, len, write);

	if (r && r->gpu) {
		nkv_shm_unpin(c, &r);
		return NULL;
	}
	*pin = r;
	return r ? r->va + (iova - r->iova) : NULL;
}

/* Read one 8-byte PRP list entry at @iova (bounds checked, copied: the host may change it). */
static int read_prp_entry(struct prp_iter *it, uint64_t iova, uint64_t *out)
{
	struct shm_region *pin = NULL;
	uint8_t *va;

	if (it->locked) { /* the walker holds c->mu: no region can go away under it */
		struct shm_region *r = find_region(it->c, iova, 8);
		if (!r || r->gpu)
			return -EFAULT;
		*out = nkv_get64(r->va + (iova - r->iova));
		return 0;
	}
	if (!(va = nkv_shm_map_range(it->c, iova, 8, false, &pin)))
		return -EFAULT;
	*out = nkv_get64(va);
	nkv_shm_unpin(it->c, &pin);
	return 0;
}

static nkv_status prp_begin(struct prp_iter *it, struct shm_ctrl *c, const struct nkv_sqe *cmd, uint32_t len)
{
	*it = (struct prp_iter){.c = c, .prp1 = nkv_get64(&cmd->dptr), .prp2 = nkv_get64((const uint8_t *)&cmd->dptr + 8),
				.len = len};
	it->pages = nkv_prp_pages(it->prp1, len);
	it->at = it->prp2;
	if (it->prp1 & 3) /* PRP1 is dword aligned */
		return ST(GENERIC, INVALID_PRP_OFFSET);
	if (it->pages == 2 && (it->prp2 & (PAGE - 1)))
		return ST(GENERIC, INVALID_PRP_OFFSET);
	if (it->pages > 2 && (it->prp2 & 7)) /* a list pointer may have an offset, dword-pair aligned */
		return ST(GENERIC, INVALID_PRP_OFFSET);
	return 0;
}

/* Next page: its IOVA and byte count. @return 1, 0 at the end, or -1 with the status in *st. */
static int prp_next(struct prp_iter *it, uint64_t *iova, uint32_t *n, nkv_status *st)
{
	uint32_t i = it->page;
	uint32_t first = PAGE - (uint32_t)(it->prp1 & (PAGE - 1));

	if (i >= it->pages)
		return 0;
	if (i == 0) {
		*iova = it->prp1;
		*n = first < it->len ? first : it->len;
	} else {
		uint32_t done = first + (i - 1) * PAGE;
		*n = it->len - done < PAGE ? it->len - done : PAGE;
		if (it->pages == 2) {
			*iova = it->prp2;
		} else {
			uint64_t e;
			/* The last slot of a list page chains to the next list page, unless it is the last entry. */
			if (((it->at + 8) & (PAGE - 1)) == 0 && i < it->pages - 1) {
				if (read_prp_entry(it, it->at, &e) < 0) {
					*st = ST(GENERIC, DATA_TRANSFER_ERROR);
					return -1;
				}
				if (e & 7) {
					*st = ST(GENERIC, INVALID_PRP_OFFSET);
					return -1;
				}
				it->at = e;
			}
			if (read_prp_entry(it, it->at, &e) < 0) {
				*st = ST(GENERIC, DATA_TRANSFER_ERROR);
				return -1;
			}
			if (e & (PAGE - 1)) {
				*st = ST(GENERIC, INVALID_PRP_OFFSET);
				return -1;
			}
			*iova = e;
			it->at += 8;
		}
	}
	it->page++;
	return 1;
}

/* ---- bounce budgets ---------------------------------------------------------------------------- */

bool nkv_shm_bounce_room(struct shm_ctrl *c, uint32_t len)
{
	const struct nkv_shm_conf *conf = &c->s->conf;
	uint64_t all = atomic_load(&c->s->bounced);

	/* Nothing bounced yet lets one command larger than a budget through, or it could never run. */
	return (c->bounced == 0 || c->bounced + len <= conf->bounce_ctrl_budget) &&
	       (all == 0 || all + len <= conf->bounce_budget);
}

/* Charge @len bytes to both budgets. @return false (nothing charged) when either is spent. */
static bool bounce_charge(struct shm_ctrl *c, uint32_t len)
{
	struct nkv_shm *s = c->s;
	uint64_t cur = atomic_load(&s->bounced);

	if (c->bounced && c->bounced + len > s->conf.bounce_ctrl_budget)
		return false;
	do {
		if (cur > 0 && cur + len > s->conf.bounce_budget)
			return false;
	} while (!atomic_compare_exchange_weak(&s->bounced, &cur, cur + len));
	c->bounced += len;
	return true;
}

void nkv_shm_bounce_release(struct shm_req *r)
{
	struct shm_ctrl *c = r->sq->c;

	if (r->charged) {
		atomic_fetch_sub(&c->s->bounced, r->charged);
		c->bounced -= r->charged;
		r->charged = 0;
	}
	/* Freed, not cached per request: a request table of idle buffers would be memory a host
	 * made the target keep after its commands were done. */
	if (r->bounce && r->req.data == r->bounce)
		r->req.data = NULL;
	free(r->bounce);
	r->bounce = NULL;
}

/*
 * Give the command a data buffer of @len bytes: the host's memory itself when its pages are one
 * contiguous run in one region (zero copy), otherwise a bounce buffer, after checking every page.
 * The walk holds c->mu once instead of per page (a 64 MiB buffer is 16,384 pages) and reads list
 * entries directly; the caller counts the pages against its per-scan WALK_BUDGET. A list that loops
 * ends by length: it is read at most once per page. @return 0, a status or WAIT_BUDGET.
 */
nkv_status nkv_shm_map_data(struct shm_ctrl *c, struct shm_req *r, uint32_t len, bool h2c)
{
	struct prp_iter it;
	nkv_status st = 0;
	uint64_t iova, expect = 0;
	uint32_t n;
	bool contiguous = true;
	int more;

	r->direct = false;
	if ((r->req.cmd.flags & NKV_SQE_PSDT_MASK) != 0) /* PCIe transport: PRPs only */
		return ST(GENERIC, INVALID_FIELD);
	if (len == 0)
		return 0;
	if ((st = prp_begin(&it, c, &r->req.cmd, len)) != 0)
		return st;
	c->walked += it.pages;
	it.locked = true;
	pthread_mutex_lock(&c->mu);
	while ((more = prp_next(&it, &iova, &n, &st)) == 1) {
		struct shm_region *reg = find_region(c, iova, n);
		if (it.page > 1 && iova != expect)
			contiguous = false;
		expect = (iova & ~(uint64_t)(PAGE - 1)) + PAGE;
		if (!reg || (!h2c && reg->ro)) {
			more = -1;
			st = ST(GENERIC, DATA_TRANSFER_ERROR);
			break;
		}
		if (reg->gpu) /* GPU memory moves through the bounce buffer with the copy engine */
			contiguous = false;
	}
	pthread_mutex_unlock(&c->mu);
	if (more < 0)
		return st;
	if (contiguous) {
		/* Every page checked out; a run across two adjacent regions is valid too, but not one
		 * mapping here: that one takes the bounce buffer. */
		uint8_t *va = nkv_shm_map_range(c, it.prp1, len, !h2c, &r->pinned);
		if (va) {
			r->req.data = va;
			r->direct = true;
			return 0;
		}
	}
	/* Past a budget the command stays in its SQ (the host sees backpressure as an SQ that drains
	 * slower); the SQ remembers how much it needs, so it is not walked again until that fits. */
	if (!bounce_charge(c, len)) {
		r->sq->wait_len = len;
		return WAIT_BUDGET;
	}
	r->sq->wait_len = 0;
	r->charged = len;
	if (!(r->bounce = malloc(len)))
		return nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INTERNAL, 0);
	r->req.data = r->bounce;
	return 0;
}

/* ---- sliced copies ----------------------------------------------------------------------------- */

/* Move one run of consecutive IOVAs within one region to or from the bounce buffer. */
static bool copy_run(struct shm_ctrl *c, uint64_t iova, uint32_t n, uint8_t *bounce, bool to_host)
{
	struct shm_region *r = pin_range(c, iova, n, to_host);
	bool ok = r != NULL;

	if (r && r->gpu) {
		uint8_t *dev = r->gpu_va + (iova - r->iova);
		ok = nkv_cuda_copy(r->device, to_host ? dev : bounce, to_host ? bounce : dev, n, to_host) == 0;
	} else if (r) {
		uint8_t *va = r->va + (iova - r->iova);
		memcpy(to_host ? va : bounce, to_host ? bounce : va, n);
	}
	nkv_shm_unpin(c, &r);
	return ok;
}

/* Does one region hold all of [iova, iova + len)? */
static bool one_region(struct shm_ctrl *c, uint64_t iova, uint64_t len)
{
	pthread_mutex_lock(&c->mu);
	bool yes = find_region(c, iova, len) != NULL;
	pthread_mutex_unlock(&c->mu);
	return yes;
}

nkv_status nkv_shm_copy_start(struct shm_ctrl *c, struct shm_req *r, uint32_t len, bool to_host)
{
	nkv_status st = prp_begin(&r->cit, c, &r->req.cmd, len);

	if (st)
		return st;
	r->to_host = to_host;
	r->copy_len = len;
	r->copied = r->run_len = 0;
	r->la = false;
	r->next = NULL;
	*c->copy_tail = r;
	c->copy_tail = &r->next;
	return 0;
}

/* The copy cursor's next page (the lookahead first). @return 1, 0 at the end, -1 on a bad entry. */
static int copy_take(struct shm_req *r, uint64_t *iova, uint32_t *n)
{
	nkv_status st;

	if (r->la) {
		r->la = false;
		*iova = r->la_iova;
		*n = r->la_n;
		return 1;
	}
	return prp_next(&r->cit, iova, n, &st);
}

/*
 * Copy up to @budget bytes of @r, a run of contiguous pages at a time (one copy-engine transfer per
 * run for GPU memory; a run is cut at the slice). The host may rewrite its list meanwhile: every
 * run is translated again as it is copied. @return bytes moved, or -1 if a page became invalid.
 */
static long copy_step(struct shm_ctrl *c, struct shm_req *r, uint32_t budget)
{
	uint32_t moved = 0;

	while (moved < budget && r->copied < r->copy_len) {
		if (!r->run_len) {
			uint64_t iova;
			uint32_t n;
			if (copy_take(r, &iova, &n) != 1)
				return -1;
			r->run = iova;
			r->run_len = n;
			while (r->run_len < budget - moved) {
				int m = copy_take(r, &iova, &n);
				if (m < 0)
					return -1;
				if (m == 0)
					break;
				if (iova == r->run + r->run_len && one_region(c, r->run, (uint64_t)r->run_len + n)) {
					r->run_len += n;
					continue;
				}
				r->la = true;
				r->la_iova = iova;
				r->la_n = n;
				break;
			}
		}
		uint32_t n = r->run_len < budget - moved ? r->run_len : budget - moved;
		if (r->copied + n > r->copy_len ||
		    !copy_run(c, r->run, n, r->bounce + r->copied, r->to_host))
			return -1;
		if (r->sq->qp.qid != 0) /* an I/O command's data through the bounce buffer: a copy */
			nkv_copy_count(c->s->tgt, NKV_XPORT_SHM, r->to_host ? NKV_XDIR_C2H : NKV_XDIR_H2C, n);
		r->run += n;
		r->run_len -= n;
		r->copied += n;
		moved += n;
	}
	return moved;
}

unsigned nkv_shm_copy_poll(struct shm_ctrl *c)
{
	uint32_t budget = COPY_SLICE;
	unsigned work = 0;

	while (c->copy_head && budget) {
		struct shm_req *r = c->copy_head;
		long m = copy_step(c, r, budget);
		if (m > 0) {
			budget -= (uint32_t)m;
			work++;
		}
		if (m >= 0 && r->copied < r->copy_len)
			break; /* the slice is spent: the rest next scan, after the other controllers */
		if (!(c->copy_head = r->next))
			c->copy_tail = &c->copy_head;
		nkv_shm_copied(c, r, m >= 0);
		work++;
	}
	return work;
}

void nkv_shm_copy_drop(struct shm_ctrl *c, struct shm_sq *sq, void (*release)(struct shm_req *))
{
	struct shm_req *r = c->copy_head;

	c->copy_head = NULL;
	c->copy_tail = &c->copy_head;
	while (r) {
		struct shm_req *next = r->next;
		if (r->sq == sq) {
			release(r);
		} else {
			r->next = NULL;
			*c->copy_tail = r;
			c->copy_tail = &r->next;
		}
		r = next;
	}
}
