/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm.c - the shared-memory (PCIe-style) transport: an NVMe controller whose BAR0 registers and
 * doorbells live in a page shared with the host, and whose queues and data buffers are host memory
 * registered over a Unix socket (protocol: include/nkv/nkv_shm.h; design: docs/design.md section 3).
 *
 * Threads: one socket thread accepts hosts and serves HELLO/REG/DEREG; poller threads own
 * controllers: they watch CC, read SQ tail doorbells, fetch SQEs, run them through the core, and
 * post CQEs (phase bit last) without overrunning the host's CQ head. Backend completions come back
 * to the owning poller through its message queue.
 *
 * Every address the host gives (queue bases, PRP1/PRP2, PRP list entries) is an IOVA translated
 * against the registered regions with bounds, alignment and permission checks before anything is
 * touched; a bad one fails the command (04h, 13h, 02h) or, for the admin queue, sets CSTS.CFS.
 * Regions are mmapped by the target and stay mapped while any command or queue uses them, so a host
 * that dies mid-I/O never makes the target write into unmapped memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/clock.h"
#include "common/cpu.h"
#include "common/log.h"
#include "common/spin_pay.h"
#include "common/unix_sock.h"
#include "common/vfio_user.h"
#include "transport/shm_cuda.h"
#include "transport/shm_int.h"
#include "core/core.h"
#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"

#define RELAX_SPINS 8          /* spin-wait hints after an empty scan (nkv_cpu_relax) */
#define IDLE_SCANS 64          /* empty scans before a poller sleeps */
#define POLL_WINDOW_NAPS 4     /* kickless controllers: scan this many naps' time after work (poller_main) */
#define SLEEP_MAX_MS 100       /* longest sleep of a poller all of whose hosts kick: it still looks at
				* CC, evictions and budgets now and then without being asked */
#define FETCH_BUDGET 64        /* SQEs taken from one SQ per scan, for fairness */
#define WALK_BUDGET 16384      /* PRP entries one controller may have walked per scan (64 MiB) */
#define ADMIN_MAX 4096u        /* AQA: up to 4096 entries per admin queue */
#define MAX_PENDING 64         /* connections that have not said HELLO yet; past it the oldest goes */


/* ---- registers --------------------------------------------------------------------------------- */

static uint32_t reg_rd32(struct shm_ctrl *c, uint32_t off)
{
	return __atomic_load_n((uint32_t *)(c->regs + off), __ATOMIC_ACQUIRE);
}

static void reg_wr32(struct shm_ctrl *c, uint32_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(c->regs + off), v, __ATOMIC_RELEASE);
}

static uint64_t reg_rd64(struct shm_ctrl *c, uint32_t off)
{
	return (uint64_t)reg_rd32(c, off) | (uint64_t)reg_rd32(c, off + 4) << 32;
}

static void publish_regs(struct shm_ctrl *c)
{
	nkv_put64(c->regs + NKV_REG_CAP, c->ctrlr->cap);
	nkv_put32(c->regs + NKV_REG_VS, c->ctrlr->vs);
	uint32_t feat = NKV_SHM_FEAT_XFER;
	/* vfio-user has no kick channel (no FEAT_NOTIFY) but its hosts may opt into the ARM words
	 * (NKV_VFU_HOSTFEAT_ARM), which live in the notification area */
	if (!c->s->conf.no_notify || c->vfu)
		nkv_put32(c->regs + NKV_SHM_REG_NOTIFY, nkv_shm_notify_off(c->s->conf.max_io_queues));
	if (!c->s->conf.no_notify && !c->vfu)
		feat |= NKV_SHM_FEAT_NOTIFY;
	nkv_put32(c->regs + NKV_SHM_REG_FEAT, feat);
	reg_wr32(c, NKV_REG_CSTS, c->ctrlr->csts);
}

/* ---- notifications (nkv_shm.h): kicks in, interrupts out ------------------------------------------ */

/* Write an eventfd (ours: O_NONBLOCK, so a counter at its limit drops the write, never blocks). */
static void efd_signal(int fd)
{
	uint64_t one = 1;
	(void)!write(fd, &one, sizeof(one));
}

/* Send vector @v's interrupt, or hold it pending while the vector is masked (vfio-user's MSI-X). */
static void irq_send(struct shm_ctrl *c, uint16_t v)
{
	int fd = c->irq_fds[v];

	if (fd < 0)
		return;
	if (c->irq_masked && c->irq_masked[v]) {
		atomic_store_explicit(&c->irq_pend[v], 1, memory_order_relaxed);
		return;
	}
	efd_signal(fd);
	atomic_fetch_add_explicit(&c->p->irqs, 1, memory_order_relaxed);
}

/* Interrupt the host for every CQ that got CQEs since the last call and that it armed: one write per
 * arming. The fence orders the CQE stores before the ARM loads, against the host's ARM store before
 * its phase load (Dekker): either it sees the CQE or we see it armed. A vfio-user host that did not
 * opt into ARM words (batch_irq) is interrupted once per pass for every CQ that got CQEs, as a PCIe
 * device raises MSI-X after posting (Linux's nvme driver has no other way to learn of them). */
static void irq_flush(struct shm_ctrl *c)
{
	if (!c->irq_pending)
		return;
	c->irq_pending = false;
	c->irq_pass++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (uint16_t q = 0; q <= c->ctrlr->opts.max_io_queues; q++) {
		struct shm_cq *cq = &c->cqs[q];
		if (!cq->fire)
			continue;
		cq->fire = false;
		if (cq->iv > c->ctrlr->opts.max_io_queues || c->irq_fds[cq->iv] < 0)
			continue;
		if (c->batch_irq) { /* one write per vector however many of its CQs got CQEs */
			if (c->irq_pass_at[cq->iv] != c->irq_pass) {
				c->irq_pass_at[cq->iv] = c->irq_pass;
				irq_send(c, cq->iv);
			}
		} else if (__atomic_load_n(&c->arm[q], __ATOMIC_RELAXED) &&
			   __atomic_exchange_n(&c->arm[q], 0, __ATOMIC_SEQ_CST)) {
			irq_send(c, cq->iv);
		}
	}
}

/* Every bound vector, armed or not: a host asleep on any CQ must see CSTS.CFS. */
static void irq_all(struct shm_ctrl *c)
{
	for (uint16_t v = 0; c->irq_fds && v <= c->ctrlr->opts.max_io_queues; v++)
		irq_send(c, v);
}

static void ctrl_reset(struct shm_ctrl *c);

/* What a front hands from the socket thread to the controller's poller (nkv_shm_ctrl_post). */
struct shm_post_msg {
	struct nkv_msg msg;
	struct shm_ctrl *c;
	enum shm_post_op op;
	uint16_t vector;
	int fd;                  /* KICK, IRQ: the eventfd, -1: unbind */
};

static void post_apply(struct nkv_msg *m)
{
	struct shm_post_msg *b = (struct shm_post_msg *)m;
	struct shm_ctrl *c = b->c;
	int *slot = b->op == SHM_POST_KICK ? &c->kick_fd : &c->irq_fds[b->vector];

	switch (b->op) {
	case SHM_POST_KICK:
	case SHM_POST_IRQ:
		if (*slot >= 0)
			close(*slot);
		*slot = b->fd;
		if (b->op == SHM_POST_KICK) {
			c->p->pfds_dirty = true;
			if (b->fd < 0) /* polled again: the host need not kick */
				__atomic_store_n(c->wakeup, 0, __ATOMIC_SEQ_CST);
		} else if (b->fd >= 0 && !c->vfu) {
			/* A host may have armed a CQ of this vector before the bind reached us (its CQE
			 * then went without an interrupt): one spurious wake-up makes it look again. */
			efd_signal(b->fd);
		}
		break;
	case SHM_POST_MASK:
		c->irq_masked[b->vector] = 1;
		break;
	case SHM_POST_UNMASK:
		c->irq_masked[b->vector] = 0;
		if (atomic_exchange(&c->irq_pend[b->vector], 0))
			irq_send(c, b->vector);
		break;
	case SHM_POST_TRIGGER:
		irq_send(c, b->vector);
		break;
	case SHM_POST_RESET:
		ctrl_reset(c);
		atomic_fetch_add(&c->resets, 1);
		break;
	}
	atomic_fetch_sub(&c->binds, 1);
	free(b);
}

int nkv_shm_ctrl_post(struct shm_ctrl *c, enum shm_post_op op, uint16_t vector, int fd)
{
	struct shm_post_msg *b = malloc(sizeof(*b));

	if (!b)
		return -ENOMEM;
	*b = (struct shm_post_msg){.c = c, .op = op, .vector = vector, .fd = fd};
	atomic_fetch_add(&c->binds, 1);
	nkv_msgq_send(&c->p->msgq, &b->msg, post_apply);
	return 0;
}

/* ---- completion -------------------------------------------------------------------------------- */

static void sq_maybe_free(struct shm_sq *sq);
static void region_release(struct shm_region *r);

/* Take a request from the controller's table, growing it up to conf.max_cmds. NULL at the limit:
 * the SQE stays in its SQ until a command completes (a table sized by every SQ's entries would let
 * a host make the target allocate for 65 x 65,536 commands it never sends). */
static struct shm_req *req_get(struct shm_ctrl *c)
{
	struct shm_req *r = c->free_reqs;

	if (r) {
		c->free_reqs = r->next;
		return r;
	}
	if (c->nreqs >= c->s->conf.max_cmds || !(r = calloc(1, sizeof(*r))))
		return NULL;
	c->nreqs++;
	return r;
}

static bool slot_busy(const struct shm_sq *sq, uint16_t slot)
{
	return sq->busy[slot / 64] >> (slot % 64) & 1;
}

static void slot_mark(struct shm_sq *sq, uint16_t slot, bool busy)
{
	if (busy)
		sq->busy[slot / 64] |= 1ull << (slot % 64);
	else
		sq->busy[slot / 64] &= ~(1ull << (slot % 64));
}

/* The command is over (CQE posted or dropped): give back its memory, pins, slot and request. */
static void req_release(struct shm_req *r)
{
	struct shm_sq *sq = r->sq;
	struct shm_ctrl *c = sq->c;

	nkv_shm_unpin(c, &r->pinned);
	nkv_shm_bounce_release(r);
	nkv_req_drop(&r->req);
	slot_mark(sq, r->slot, false);
	r->next = c->free_reqs;
	c->free_reqs = r;
	sq->outstanding--;
	c->outstanding--;
	if (sq->qp.qid)
		atomic_fetch_sub_explicit(&c->p->inflight, 1, memory_order_relaxed);
	sq_maybe_free(sq);
}

/* A bad doorbell: the controller stops with fatal status (CSTS.CFS), as a PCIe controller would. */
static void ctrl_fatal(struct shm_ctrl *c)
{
	c->failed = true;
	c->ctrlr->csts |= NKV_CSTS_CFS;
	reg_wr32(c, NKV_REG_CSTS, c->ctrlr->csts);
	irq_all(c);
}

/* Write one CQE into the CQ if there is room. @return true if posted. */
static bool cq_post(struct shm_ctrl *c, struct shm_cq *cq, struct shm_req *r)
{
	uint32_t head = reg_rd32(c, nkv_db_cq_head(cq->qid));

	if (head >= cq->size) { /* an invalid head doorbell value: the controller stops */
		NKV_WARN("shm: controller %u: CQ %u head doorbell %u beyond size %u", c->ctrlr->cntlid, cq->qid, head,
			 cq->size);
		ctrl_fatal(c);
		return false;
	}
	if ((cq->tail + 1u) % cq->size == head)
		return false; /* full: the host has not consumed yet */
	struct nkv_cqe e = r->req.cpl;
	volatile uint32_t *dst = (volatile uint32_t *)&cq->ring[cq->tail];
	uint32_t src[4]; /* memcpy'd: reading the struct through a uint32_t pointer breaks aliasing rules */

	nkv_put16(&e.sqhd, r->sq->head);
	nkv_put16(&e.status, (uint16_t)((nkv_get16(&e.status) & ~1u) | cq->phase));
	memcpy(src, &e, sizeof(src));
	dst[0] = src[0];
	dst[1] = src[1];
	dst[2] = src[2];
	__atomic_thread_fence(__ATOMIC_RELEASE); /* pairs with nkv_cq_peek's acquire after the phase */
	dst[3] = src[3];
	if (cq->ien && !cq->fire) {
		cq->fire = true;
		c->irq_pending = true;
	}
	if (++cq->tail == cq->size) {
		cq->tail = 0;
		cq->phase ^= 1u;
	}
	return true;
}

/* Post now, or queue for CQ room (the request holds no bounce memory by then). */
static void cqe_post(struct shm_ctrl *c, struct shm_req *r)
{
	struct shm_cq *cq = &c->cqs[r->sq->cqid];

	if (!cq->post_head && cq_post(c, cq, r)) {
		req_release(r);
		return;
	}
	r->next = NULL;
	*cq->post_tail = r;
	cq->post_tail = &r->next;
}

/* The core is done with a command: queue the copy-out of a bounced read, else give the bounce
 * memory back now (a Store's data is in the backend) and post. */
static void shm_complete(struct nkv_req *req)
{
	struct shm_req *r = (struct shm_req *)req;
	struct shm_sq *sq = r->sq;
	struct shm_ctrl *c = sq->c;

	if (!sq->live || atomic_load(&c->gone)) { /* queue deleted or host gone: a tombstone */
		req_release(r);
		return;
	}
	/* NKV_SHM_FEAT_XFER: the bytes a Retrieve moved, so that the host checks them against DW0 */
	if (sq->qp.qid && (req->cmd.opc == NKV_KV_RETRIEVE || req->cmd.opc == NKV_VS_RETRIEVE_RANGE) &&
	    (nkv_get16(&req->cpl.status) >> 1) == 0)
		nkv_put32(&req->cpl.dw1, req->xfer);
	if (!r->direct && r->bounce && r->req.xfer && !(r->req.cmd.opc & 1) &&
	    (nkv_get16(&req->cpl.status) >> 1) == 0) {
		nkv_status st = nkv_shm_copy_start(c, r, r->req.xfer, true);
		if (st == 0)
			return; /* nkv_shm_copied posts it */
		nkv_put16(&req->cpl.status, (uint16_t)(st << 1));
	}
	nkv_shm_bounce_release(r);
	cqe_post(c, r);
}

void nkv_shm_copied(struct shm_ctrl *c, struct shm_req *r, bool ok)
{
	if (!r->to_host) { /* a Store's data is staged: run it, or fail it */
		if (ok) {
			r->req.execute(&r->req);
		} else {
			r->req.xfer = 0;
			nkv_req_complete(&r->req, ST(GENERIC, DATA_TRANSFER_ERROR));
		}
		return;
	}
	if (!ok)
		nkv_put16(&r->req.cpl.status, (uint16_t)(ST(GENERIC, DATA_TRANSFER_ERROR) << 1));
	nkv_shm_bounce_release(r);
	cqe_post(c, r);
}

static bool cq_drain(struct shm_ctrl *c, struct shm_cq *cq)
{
	bool any = false;

	while (cq->post_head && cq_post(c, cq, cq->post_head)) {
		struct shm_req *r = cq->post_head;
		if (!(cq->post_head = r->next))
			cq->post_tail = &cq->post_head;
		req_release(r);
		any = true;
	}
	return any;
}

static const struct nkv_qpair_ops g_shm_ops = {.complete = shm_complete};

/* ---- queues ------------------------------------------------------------------------------------ */

static void sq_maybe_free(struct shm_sq *sq)
{
	if (sq->live || sq->outstanding)
		return;
	struct shm_ctrl *c = sq->c;
	for (struct shm_sq **p = &c->zombies; *p; p = &(*p)->next_zombie)
		if (*p == sq) {
			*p = sq->next_zombie;
			break;
		}
	free(sq->busy);
	free(sq);
}

/* Does [base, base + bytes) overlap a live queue of @c? Two queues on one ring would let a host make
 * the target keep request state for the same memory many times over (and are never meaningful). */
static bool queue_overlaps(struct shm_ctrl *c, uint64_t base, uint64_t bytes)
{
	uint16_t maxq = c->ctrlr->opts.max_io_queues;

	for (uint16_t q = 0; q <= maxq; q++) {
		const struct shm_sq *sq = c->sqs[q];
		const struct shm_cq *cq = &c->cqs[q];
		if (sq && base < sq->base + (uint64_t)sq->qp.size * 64 && sq->base < base + bytes)
			return true;
		if (cq->live && base < cq->base + (uint64_t)cq->size * 16 && cq->base < base + bytes)
			return true;
	}
	return false;
}

static nkv_status sq_create(struct shm_ctrl *c, uint16_t qid, uint16_t size, uint16_t cqid, uint64_t base)
{
	struct shm_region *reg = NULL;
	struct nkv_sqe *ring;
	struct shm_sq *sq;

	if (queue_overlaps(c, base, (uint64_t)size * 64) ||
	    !(ring = (struct nkv_sqe *)nkv_shm_map_range(c, base, (uint64_t)size * 64, false, &reg)))
		return ST(GENERIC, INVALID_FIELD);
	if (!(sq = calloc(1, sizeof(*sq))) || !(sq->busy = calloc((size + 63u) / 64, sizeof(*sq->busy)))) {
		free(sq);
		nkv_shm_unpin(c, &reg);
		return nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INTERNAL, 0);
	}
	sq->c = c;
	sq->qp = (struct nkv_qpair){.ctrlr = c->ctrlr, .qid = qid, .size = size, .ops = &g_shm_ops,
				    .msgq = &c->p->msgq};
	sq->cqid = cqid;
	sq->base = base;
	sq->ring = ring;
	sq->reg = reg;
	sq->live = true;
	c->sqs[qid] = sq;
	c->cqs[cqid].sqs++;
	if (qid)
		nkv_ctrlr_claim_qid(c->ctrlr, qid); /* listed as connected (nkv_target_connections) */
	reg_wr32(c, nkv_db_sq_tail(qid), 0);
	return 0;
}

/* Delete an SQ: commands still running complete into nothing; the struct lives until they end. */
static void sq_delete(struct shm_ctrl *c, uint16_t qid)
{
	struct shm_sq *sq = c->sqs[qid];

	c->sqs[qid] = NULL;
	c->cqs[sq->cqid].sqs--;
	if (qid)
		nkv_ctrlr_release_qid(c->ctrlr, qid);
	nkv_shm_unpin(c, &sq->reg);
	/* Copies not yet done and completions waiting for CQ room belong to this SQ's requests: drop
	 * them. The SQ stays live until they are gone, or releasing the last one would free it under
	 * these loops. */
	nkv_shm_copy_drop(c, sq, req_release);
	struct shm_cq *cq = &c->cqs[sq->cqid];
	for (struct shm_req **p = &cq->post_head; *p;) {
		struct shm_req *r = *p;
		if (r->sq == sq) {
			*p = r->next;
			req_release(r);
		} else {
			p = &r->next;
		}
	}
	cq->post_tail = &cq->post_head;
	while (*cq->post_tail)
		cq->post_tail = &(*cq->post_tail)->next;
	sq->live = false;
	if (sq->outstanding) {
		sq->next_zombie = c->zombies;
		c->zombies = sq;
	}
	sq_maybe_free(sq);
}

static nkv_status cq_create(struct shm_ctrl *c, uint16_t qid, uint16_t size, uint64_t base, bool ien, uint16_t iv)
{
	struct shm_cq *cq = &c->cqs[qid];
	struct shm_region *reg = NULL;
	struct nkv_cqe *ring;

	if (queue_overlaps(c, base, (uint64_t)size * 16) ||
	    !(ring = (struct nkv_cqe *)nkv_shm_map_range(c, base, (uint64_t)size * 16, true, &reg)))
		return ST(GENERIC, INVALID_FIELD);
	*cq = (struct shm_cq){.qid = qid, .size = size, .phase = 1, .live = true, .base = base, .ring = ring,
			      .reg = reg, .ien = ien, .iv = iv};
	cq->post_tail = &cq->post_head;
	reg_wr32(c, nkv_db_cq_head(qid), 0);
	return 0;
}

static void cq_delete(struct shm_ctrl *c, uint16_t qid)
{
	struct shm_cq *cq = &c->cqs[qid];

	cq->live = false;
	nkv_shm_unpin(c, &cq->reg);
}

/* ---- queue management admin commands (PCIe only; docs/nvme-kv-wire.md B.4) ---------------------- */

static nkv_status admin_queue_cmd(struct shm_ctrl *c, const struct nkv_sqe *cmd)
{
	uint32_t c10 = nkv_get32(&cmd->cdw10), c11 = nkv_get32(&cmd->cdw11);
	uint16_t qid = (uint16_t)c10, size = (uint16_t)((c10 >> 16) + 1);
	uint64_t base = nkv_get64(&cmd->dptr);
	uint16_t maxq = c->ctrlr->opts.max_io_queues;

	switch (cmd->opc) {
	case NKV_ADM_CREATE_CQ:
		if (NKV_CC_IOCQES(c->ctrlr->cc) != 4) /* 16-byte CQEs only; CC.IOCQES 0 means unset */
			return ST(GENERIC, INVALID_FIELD);
		if (qid == 0 || qid > maxq || qid > (unsigned)c->ctrlr->ncqa + 1 || c->cqs[qid].live)
			return ST(CMD, INVALID_QUEUE_ID);
		if (size < 2 || size > NKV_CAP_MQES(c->ctrlr->cap) + 1u || (c10 >> 16) == 0xffff)
			return ST(CMD, INVALID_QUEUE_SIZE);
		if (!(c11 & 1)) /* physically contiguous only */
			return ST(GENERIC, INVALID_FIELD);
		if (base & (PAGE - 1))
			return ST(GENERIC, INVALID_PRP_OFFSET);
		/* IEN with any IV is accepted: a vector without a bound eventfd never interrupts */
		return cq_create(c, qid, size, base, c11 & 2, (uint16_t)(c11 >> 16));
	case NKV_ADM_CREATE_SQ: {
		uint16_t cqid = (uint16_t)(c11 >> 16);
		if (NKV_CC_IOSQES(c->ctrlr->cc) != 6) /* 64-byte SQEs only */
			return ST(GENERIC, INVALID_FIELD);
		if (qid == 0 || qid > maxq || qid > (unsigned)c->ctrlr->nsqa + 1 || c->sqs[qid])
			return ST(CMD, INVALID_QUEUE_ID);
		if (size < 2 || size > NKV_CAP_MQES(c->ctrlr->cap) + 1u || (c10 >> 16) == 0xffff)
			return ST(CMD, INVALID_QUEUE_SIZE);
		if (cqid == 0 || cqid > maxq || !c->cqs[cqid].live)
			return ST(CMD, CQ_INVALID);
		if (!(c11 & 1))
			return ST(GENERIC, INVALID_FIELD);
		if (base & (PAGE - 1))
			return ST(GENERIC, INVALID_PRP_OFFSET);
		return sq_create(c, qid, size, cqid, base);
	}
	case NKV_ADM_DELETE_SQ:
		if (qid == 0 || qid > maxq || !c->sqs[qid])
			return ST(CMD, INVALID_QUEUE_ID);
		sq_delete(c, qid);
		return 0;
	case NKV_ADM_DELETE_CQ:
		if (qid == 0 || qid > maxq || !c->cqs[qid].live)
			return ST(CMD, INVALID_QUEUE_ID);
		if (c->cqs[qid].sqs)
			return ST(CMD, INVALID_QUEUE_DELETION);
		cq_delete(c, qid);
		return 0;
	}
	return ST(GENERIC, INVALID_OPCODE);
}

/* ---- command fetch ----------------------------------------------------------------------------- */

static bool is_queue_cmd(uint8_t opc)
{
	return opc == NKV_ADM_CREATE_CQ || opc == NKV_ADM_CREATE_SQ || opc == NKV_ADM_DELETE_SQ ||
	       opc == NKV_ADM_DELETE_CQ;
}

/* Start one fetched command. @return false when it must wait for bounce budget (not started). */
static bool run_cmd(struct shm_ctrl *c, struct shm_sq *sq, struct shm_req *r)
{
	nkv_status st;
	bool h2c = (r->req.cmd.opc & 3) == 1;

	slot_mark(sq, r->slot, true);
	r->charged = 0;
	r->pinned = NULL;
	r->bounce = NULL;
	r->direct = false;
	sq->outstanding++;
	c->outstanding++;
	if (sq->qp.qid)
		atomic_fetch_add_explicit(&c->p->inflight, 1, memory_order_relaxed);
	if (sq->qp.qid == 0 && is_queue_cmd(r->req.cmd.opc)) {
		memset(&r->req.cpl, 0, sizeof(r->req.cpl));
		r->req.xfer = 0;
		nkv_req_complete(&r->req, admin_queue_cmd(c, &r->req.cmd));
		return true;
	}
	r->req.data = NULL;
	r->req.data_len = UINT32_MAX; /* PRPs carry no length: the command's own fields do */
	if ((st = nkv_req_parse(&r->req)) == 0)
		st = nkv_shm_map_data(c, r, r->req.length, h2c);
	if (st == WAIT_BUDGET) { /* nothing is held: undo the start */
		nkv_req_drop(&r->req);
		slot_mark(sq, r->slot, false);
		sq->outstanding--;
		c->outstanding--;
		if (sq->qp.qid)
			atomic_fetch_sub_explicit(&c->p->inflight, 1, memory_order_relaxed);
		return false;
	}
	/* A bounced Store runs once its data is staged, a slice per scan (nkv_shm_copied). */
	if (st == 0 && r->bounce && h2c && (st = nkv_shm_copy_start(c, r, r->req.length, false)) == 0)
		return true;
	if (st) {
		r->req.xfer = 0;
		nkv_req_complete(&r->req, st);
		return true;
	}
	r->req.execute(&r->req);
	return true;
}

/*
 * Take new SQEs up to the tail doorbell, within this scan's budgets: FETCH_BUDGET commands, the
 * controller's PRP walk budget, its request table, and the bounce budgets (a head SQE that waits
 * for bounce memory is not walked again until the budgets could take it). @return SQEs fetched.
 */
static unsigned sq_fetch(struct shm_ctrl *c, struct shm_sq *sq)
{
	uint32_t tail = reg_rd32(c, nkv_db_sq_tail(sq->qp.qid));
	unsigned n = 0;

	if (tail >= sq->qp.size) {
		NKV_WARN("shm: controller %u: SQ %u tail doorbell %u beyond size %u", c->ctrlr->cntlid, sq->qp.qid, tail,
			 sq->qp.size);
		ctrl_fatal(c);
		return 0;
	}
	if (sq->wait_len && !nkv_shm_bounce_room(c, sq->wait_len))
		return 0;
	while (sq->head != tail && n < FETCH_BUDGET && c->walked < WALK_BUDGET && sq->live && !c->failed) {
		if (slot_busy(sq, sq->head))
			break; /* the host reused a slot whose command has not completed: wait */
		struct shm_req *r = req_get(c);
		if (!r)
			break; /* conf.max_cmds in flight: the rest waits in the SQ */
		__atomic_thread_fence(__ATOMIC_ACQUIRE); /* the doorbell read before the SQE read */
		memcpy(&r->req.cmd, &sq->ring[sq->head], sizeof(r->req.cmd)); /* a private copy */
		r->sq = sq;
		r->slot = sq->head;
		r->req.qp = &sq->qp;
		sq->head = (uint16_t)((sq->head + 1) % sq->qp.size);
		if (!run_cmd(c, sq, r)) {
			sq->head = r->slot; /* over a bounce budget: fetch it again once memory comes back */
			r->next = c->free_reqs;
			c->free_reqs = r;
			break;
		}
		n++;
	}
	return n;
}

/* ---- controller state -------------------------------------------------------------------------- */

/* Drop every queue (reset or teardown). Commands in flight complete into tombstones. */
static void queues_teardown(struct shm_ctrl *c)
{
	uint16_t maxq = c->ctrlr->opts.max_io_queues;

	for (uint16_t q = 1; q <= maxq; q++)
		if (c->sqs[q])
			sq_delete(c, q);
	if (c->sqs[0])
		sq_delete(c, 0);
	for (uint16_t q = 0; q <= maxq; q++)
		if (c->cqs[q].live)
			cq_delete(c, q);
}

/* CC.EN 0 -> 1: latch AQA/ASQ/ACQ and build the admin queues; CFS if they are unusable. */
static void enable_admin(struct shm_ctrl *c)
{
	uint32_t aqa = reg_rd32(c, NKV_REG_AQA);
	uint16_t sqs = (uint16_t)((aqa & 0xfff) + 1), cqs = (uint16_t)(((aqa >> 16) & 0xfff) + 1);
	uint64_t asq = reg_rd64(c, NKV_REG_ASQ), acq = reg_rd64(c, NKV_REG_ACQ);

	if (sqs < 2 || cqs < 2 || (asq & (PAGE - 1)) || (acq & (PAGE - 1)) || cq_create(c, 0, cqs, acq, true, 0) != 0) {
		NKV_WARN("shm: controller %u: unusable admin queues (AQA %08x ASQ %llx ACQ %llx)", c->ctrlr->cntlid, aqa,
			 (unsigned long long)asq, (unsigned long long)acq);
		c->ctrlr->csts = (c->ctrlr->csts & ~NKV_CSTS_RDY) | NKV_CSTS_CFS;
		return;
	}
	if (sq_create(c, 0, sqs, 0, asq) != 0) {
		cq_delete(c, 0);
		c->ctrlr->csts = (c->ctrlr->csts & ~NKV_CSTS_RDY) | NKV_CSTS_CFS;
		return;
	}
	c->enabled = true;
	/* How this enabled controller interrupts: a vfio-user host that set the feature bit uses the
	 * ARM words like a shm host, any other (Linux's nvme driver) gets an interrupt per batch. */
	c->batch_irq = c->vfu && !(reg_rd32(c, NKV_VFU_REG_HOSTFEAT) & NKV_VFU_HOSTFEAT_ARM);
}

/* React to a CC written by the host (enable, reset, shutdown), then mirror CSTS. */
static void check_cc(struct shm_ctrl *c)
{
	uint32_t cc = reg_rd32(c, NKV_REG_CC);

	if (cc == c->last_cc)
		return;
	bool was = c->last_cc & NKV_CC_EN;
	c->last_cc = cc;
	if (was && !(cc & NKV_CC_EN)) {
		queues_teardown(c);
		c->enabled = false;
		c->failed = false;
	}
	/* Shutdown drops the queues, so the AERs aborted here complete into tombstones: a PCIe
	 * controller posts nothing for them (SPDK's host completes its own AERs before CC.SHN and
	 * reports a CQE for one as an error; a reset drops them). */
	if (NKV_CC_SHN(cc)) {
		queues_teardown(c);
		c->enabled = false;
		nkv_admin_abort_aers(c->ctrlr);
	}
	nkv_ctrlr_prop_set(c->ctrlr, NKV_REG_CC, 4, cc);
	if (!NKV_CC_SHN(cc) && !was && (cc & NKV_CC_EN) && nkv_ctrlr_ready(c->ctrlr))
		enable_admin(c);
	reg_wr32(c, NKV_REG_CSTS, c->ctrlr->csts);
}

/* DEVICE_RESET (vfio-user): as CC.EN 1 -> 0 and a fresh register page. Commands in flight complete
 * into tombstones, holding their regions' pins until then (as on a CC reset). */
static void ctrl_reset(struct shm_ctrl *c)
{
	reg_wr32(c, NKV_REG_CC, 0);
	check_cc(c);
	if (c->enabled || c->sqs[0] || c->cqs[0].live) /* CC was already 0 but queues live: cannot be */
		queues_teardown(c);
	c->enabled = false;
	c->failed = false;
	c->ctrlr->csts &= ~NKV_CSTS_CFS;
	for (uint32_t off = NKV_REG_INTMS; off < c->reg_size; off += 4)
		if (off != NKV_REG_CSTS && off != NKV_SHM_REG_FEAT && off != NKV_SHM_REG_NOTIFY)
			reg_wr32(c, off, 0);
	publish_regs(c);
}

/* One pass over a controller. @return work done (commands fetched, CQEs posted). */
static unsigned ctrl_scan(struct shm_ctrl *c)
{
	unsigned work = 0;

	check_cc(c);
	if (!c->enabled || c->failed)
		return 0;
	if (nkv_ctrlr_closing(c->ctrlr)) { /* evicted (host disallowed, subsystem removed) */
		NKV_INFO("shm: controller %u: association ended by the target", c->ctrlr->cntlid);
		ctrl_fatal(c);
		if (c->sock >= 0) /* the socket thread sees the hang-up and tears it down */
			shutdown(c->sock, SHUT_RDWR);
		return 1;
	}
	c->walked = 0;
	work += nkv_shm_copy_poll(c);
	for (uint16_t q = 0; q <= c->ctrlr->opts.max_io_queues; q++) {
		struct shm_sq *sq = c->sqs[q];
		if (sq) {
			if (c->cqs[sq->cqid].post_head)
				work += cq_drain(c, &c->cqs[sq->cqid]);
			work += sq_fetch(c, sq);
		}
	}
	irq_flush(c);
	return work;
}

/* ---- controller lifecycle ---------------------------------------------------------------------- */

static void ctrl_free(struct shm_ctrl *c)
{
	if (c->ctrlr)
		nkv_ctrlr_destroy(c->ctrlr);
	for (unsigned i = 0; i < c->nregions; i++) {
		region_release(c->regions[i]);
		free(c->regions[i]);
	}
	free(c->regions);
	if (c->regs)
		munmap(c->regs, c->reg_size);
	free(c->sqs);
	free(c->cqs);
	while (c->free_reqs) { /* every request is back here: nothing is outstanding */
		struct shm_req *r = c->free_reqs;
		c->free_reqs = r->next;
		free(r);
	}
	pthread_mutex_destroy(&c->mu);
	if (c->sock >= 0)
		close(c->sock);
	if (c->kick_fd >= 0)
		close(c->kick_fd);
	for (unsigned v = 0; c->irq_fds && v <= c->s->conf.max_io_queues; v++)
		if (c->irq_fds[v] >= 0)
			close(c->irq_fds[v]);
	free(c->irq_fds);
	free(c->irq_masked);
	free((void *)c->irq_pend);
	free(c->irq_pass_at);
	atomic_fetch_sub(&c->s->nctrls, 1);
	free(c);
}

/* The host is gone: stop, drop the queues, and free once the backend has returned every command. */
static bool ctrl_reap(struct shm_ctrl *c)
{
	if (!c->reaping) {
		c->reaping = true;
		NKV_INFO("shm: controller %u: host gone with %u command(s) in the backend; its memory stays mapped until "
			 "they return", c->ctrlr->cntlid, c->outstanding);
	}
	nkv_admin_abort_aers(c->ctrlr); /* held AERs complete into tombstones */
	if (c->enabled || c->sqs[0] || c->cqs[0].live) {
		queues_teardown(c);
		c->enabled = false;
	}
	/* A SET_KICK / SET_IRQ sent before the host left may still be in the message queue: it names us. */
	return c->outstanding == 0 && c->zombies == NULL && atomic_load(&c->binds) == 0;
}

static void ctrl_attach(struct nkv_msg *m)
{
	struct shm_ctrl *c = (struct shm_ctrl *)((char *)m - offsetof(struct shm_ctrl, msg));
	c->next = c->p->ctrls;
	c->p->ctrls = c;
}

/* One pass of a poller: controllers handed over and backend completions (no system call when there
 * are none), then a scan of every controller (freeing those whose host is gone once they are quiet).
 * @return work done. */
static unsigned poller_pass(struct shm_poller *p)
{
	unsigned work = (unsigned)nkv_msgq_poll(&p->msgq, 0);

	for (struct shm_ctrl **pc = &p->ctrls; *pc;) {
		struct shm_ctrl *c = *pc;
		/* Only the socket thread marks a controller gone, and it never touches one after
		 * that: freeing any other would race with its REG/DEREG handling and conn_close. */
		if (atomic_load(&c->gone)) {
			if (ctrl_reap(c)) {
				*pc = c->next;
				NKV_INFO("shm: controller %u: released", c->ctrlr->cntlid);
				if (c->kick_fd >= 0)
					p->pfds_dirty = true;
				ctrl_free(c);
				continue;
			}
		} else {
			work += ctrl_scan(c);
		}
		pc = &c->next;
	}
	return work;
}

/* The fds a poller sleeps on: its message queue's, then each kick eventfd of its controllers. */
static void pfds_build(struct shm_poller *p)
{
	unsigned n = 1;

	p->pfds_dirty = false;
	for (struct shm_ctrl *c = p->ctrls; c; c = c->next)
		n += c->kick_fd >= 0;
	if (n > p->pfd_cap) {
		struct pollfd *f = realloc(p->pfds, n * sizeof(*f));
		if (f)
			p->pfds = f;
		struct shm_ctrl **pc = f ? realloc(p->pfd_ctrl, n * sizeof(*pc)) : NULL;
		if (pc)
			p->pfd_ctrl = pc;
		if (!f || !pc) { /* out of memory: naps on the message queue alone, until a rebuild works */
			p->npfds = 0;
			p->pfds_dirty = true;
			return;
		}
		p->pfd_cap = n;
	}
	p->pfds[0] = (struct pollfd){.fd = p->msgq.efd, .events = POLLIN};
	p->npfds = 1;
	for (struct shm_ctrl *c = p->ctrls; c; c = c->next)
		if (c->kick_fd >= 0) {
			p->pfd_ctrl[p->npfds] = c;
			p->pfds[p->npfds++] = (struct pollfd){.fd = c->kick_fd, .events = POLLIN};
		}
}

/* Work only the poller's passes finish: bounce copies, CQEs waiting for the host to free CQ room. */
static bool ctrl_owes(const struct shm_ctrl *c)
{
	if (c->copy_head)
		return true;
	for (uint16_t q = 0; q <= c->ctrlr->opts.max_io_queues; q++)
		if (c->cqs[q].live && c->cqs[q].post_head)
			return true;
	return false;
}

/* Can the poller sleep on @c until the host kicks? Not without a kick eventfd, nor while work waits on
 * something no one will signal: SQEs left in an SQ (CQ room, bounce budget, the command table), CQEs
 * waiting for the host to free CQ entries, bounce copies. */
static bool ctrl_quiet(struct shm_ctrl *c)
{
	if (atomic_load(&c->gone) || !c->enabled || c->failed)
		return c->kick_fd >= 0 || atomic_load(&c->gone);
	if (c->kick_fd < 0 || ctrl_owes(c))
		return false;
	for (uint16_t q = 0; q <= c->ctrlr->opts.max_io_queues; q++) {
		struct shm_sq *sq = c->sqs[q];
		if (sq && sq->head != reg_rd32(c, nkv_db_sq_tail(q)))
			return false;
	}
	return true;
}

/* After a completion lent to a backend thread (reactor/msgq.h) while the poller slept: interrupt the
 * hosts it posted to, and wake the poller for what only its passes do (bounce copies, CQEs waiting
 * for CQ room). Frees nothing: the poller may be about to read its controllers' kick fds. */
static void poller_lent_after(void *arg)
{
	struct shm_poller *p = arg;
	bool wake = false;

	for (struct shm_ctrl *c = p->ctrls; c; c = c->next)
		if (!atomic_load(&c->gone) && c->enabled && !c->failed) {
			irq_flush(c);
			wake = wake || ctrl_owes(c);
		}
	if (wake)
		efd_signal(p->msgq.efd);
}

/* Say to every host that kicks that we may sleep (or no longer). */
static void wakeup_set(struct shm_poller *p, uint32_t v)
{
	for (struct shm_ctrl *c = p->ctrls; c; c = c->next)
		if (c->kick_fd >= 0 && !atomic_load(&c->gone))
			__atomic_store_n(c->wakeup, v, __ATOMIC_SEQ_CST);
}

/*
 * Nothing to do for IDLE_SCANS scans: sleep. If every controller can be kicked and is quiet, until a
 * kick, a backend completion (message queue) or SLEEP_MAX_MS; else poll_idle_us, as without
 * notifications (kicks still cut it short). NEED_WAKEUP is set and fenced, then one more pass looks
 * for work a host published before it could see the flag (Dekker: the host stores its doorbell,
 * fences, then loads NEED_WAKEUP). @return work that last pass found (then no sleep).
 */
static unsigned poller_sleep(struct shm_poller *p)
{
	struct nkv_shm *s = p->s;
	bool deep = !s->conf.no_notify;

	if (p->pfds_dirty)
		pfds_build(p);
	for (struct shm_ctrl *c = p->ctrls; c && deep; c = c->next)
		deep = ctrl_quiet(c);
	if (p->npfds > 1) {
		wakeup_set(p, 1);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		unsigned work = poller_pass(p);
		/* A kick bound, unbound or closed by that pass: the fd set is stale, and a new kick's host
		 * has not seen NEED_WAKEUP. Look again instead of sleeping. */
		if (work || p->pfds_dirty) {
			wakeup_set(p, 0);
			return work + 1;
		}
	}
	/* Backend completions write the message queue's eventfd only once we say we sleep; a message
	 * that landed since the pass above cancels the sleep. */
	if (!nkv_msgq_sleep_begin(&p->msgq)) {
		if (p->npfds > 1)
			wakeup_set(p, 0);
		return 1;
	}
	struct pollfd one = {.fd = p->msgq.efd, .events = POLLIN};
	deep = deep && p->npfds;
	struct timespec ts = deep ? (struct timespec){SLEEP_MAX_MS / 1000, (SLEEP_MAX_MS % 1000) * 1000000L}
				  : (struct timespec){0, (long)s->conf.poll_idle_us * 1000};
	atomic_fetch_add_explicit(&p->sleeps, 1, memory_order_relaxed);
	struct pollfd *f = p->npfds ? p->pfds : &one;
	nkv_msgq_unlock(&p->msgq); /* completions may run on their own thread meanwhile */
	int n = ppoll(f, p->npfds ? p->npfds : 1, &ts, NULL);
	nkv_msgq_sleep_end(&p->msgq);
	nkv_msgq_lock(&p->msgq);
	p->deep_timeout = deep && n == 0;
	if (n > 0)
		for (unsigned i = 1; i < p->npfds; i++)
			if (p->pfds[i].revents & POLLIN) {
				uint64_t v;
				(void)!read(p->pfds[i].fd, &v, sizeof(v));
				atomic_fetch_add_explicit(&p->kicks, 1, memory_order_relaxed);
			}
	if (p->npfds > 1)
		wakeup_set(p, 0);
	/* After the kick reads: a message may close a kick eventfd. The ack also takes a wake-up that
	 * came without a message (poller_wake), which the passes, looking for messages, would never read. */
	if (n > 0 && (f[0].revents & POLLIN)) {
		nkv_msgq_ack(&p->msgq);
		return (unsigned)nkv_msgq_poll(&p->msgq, 0);
	}
	return 0;
}

/* Does a controller on @p have no way to kick it (vfio-user, or a host that polls)? Then a doorbell it
 * writes while we nap waits for the nap to end. */
static bool poller_kickless(const struct shm_poller *p)
{
	for (const struct shm_ctrl *c = p->ctrls; c; c = c->next)
		if (c->kick_fd < 0 && c->enabled && !atomic_load(&c->gone))
			return true;
	return false;
}

static void *poller_main(void *arg)
{
	struct shm_poller *p = arg;
	struct nkv_shm *s = p->s;
	unsigned idle = 0;
	/* After work, while a controller cannot kick us: keep scanning for POLL_WINDOW_NAPS naps' time
	 * (poll_idle_us each) before napping, while such windows find the next command
	 * (common/spin_pay.h). A nap there costs a command up to poll_idle_us plus the timer's slack, and
	 * a queue pair that refills only once its completions are in waits a nap per round: at QD 32
	 * over vfio-user that capped a stream at 32 commands per nap. The window is longer than a nap
	 * because a host that handles a round of completions before it refills (verifying values) takes
	 * longer than one; the rule stops windows that do not pay. Hosts that kick keep the short spin
	 * and the deep sleep. */
	struct nkv_spin_window win;

	nkv_spin_window_init(&win, (uint64_t)s->conf.poll_idle_us * 1000 * POLL_WINDOW_NAPS);

	char name[16];
	snprintf(name, sizeof(name), "nkv-shm-poll%u", p->id % 100);
	pthread_setname_np(pthread_self(), name);
	p->pfds_dirty = true;
	/* A backend completion that lands while we sleep posts its CQE from its own thread instead of
	 * waking us (reactor/msgq.h). */
	nkv_msgq_lend(&p->msgq, poller_lent_after, p);
	for (;;) {
		/* Read before the message queue: every controller handed over before pollers_stop was
		 * set is attached by this pass, so none is left behind in the queue. */
		bool last = atomic_load(&s->pollers_stop);
		unsigned work = poller_pass(p);
		if (last && !p->ctrls)
			break;
		if (p->deep_timeout && work && atomic_fetch_add_explicit(&p->late, 1, memory_order_relaxed) == 0)
			NKV_WARN("shm: poller %u slept %d ms with work waiting: a host wrote a doorbell without the kick "
				 "NEED_WAKEUP asked for (said once)", p->id, SLEEP_MAX_MS);
		p->deep_timeout = false;
		if (work) {
			idle = 0;
			nkv_spin_window_work(&win, poller_kickless(p), nkv_now_ns());
		} else if (++idle < IDLE_SCANS || nkv_spin_window_open(&win, nkv_now_ns())) {
			for (int i = 0; i < RELAX_SPINS; i++) /* leave the hosts' doorbell lines alone a moment */
				nkv_cpu_relax();
		} else if (poller_sleep(p)) {
			idle = 0;
		}
	}
	nkv_msgq_unlend(&p->msgq);
	free(p->pfds);
	free(p->pfd_ctrl);
	return NULL;
}

/* ---- socket thread: HELLO, REG, DEREG ---------------------------------------------------------- */

static int send_reply(int fd, const struct nkv_shm_reply *rep, int pass_fd)
{
	ssize_t n = nkv_send_fd(fd, rep, sizeof(*rep), pass_fd);
	return n == (ssize_t)sizeof(*rep) ? 0 : n < 0 ? (int)n : -EPROTO;
}

/* Is there room (count, bytes) and no overlap for [iova, iova + len)? @extra: regions the front
 * holds elsewhere (vfio-user's unmappable ones). @return 0, -ENOSPC, -EEXIST. */
static int region_room(struct shm_ctrl *c, uint64_t iova, uint64_t len, unsigned extra)
{
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	if (c->nregions + extra >= c->s->conf.max_regions || c->reg_bytes + len > c->s->conf.max_reg_bytes)
		rc = -ENOSPC;
	for (unsigned i = 0; rc == 0 && i < c->nregions; i++)
		if (iova < c->regions[i]->iova + c->regions[i]->len && c->regions[i]->iova < iova + len)
			rc = -EEXIST;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* Publish a region (the socket thread is the only one adding, so room checked earlier still holds). */
static int region_add(struct shm_ctrl *c, const struct shm_region *tmpl)
{
	pthread_mutex_lock(&c->mu);
	struct shm_region **nr = realloc(c->regions, (c->nregions + 1) * sizeof(*nr));
	struct shm_region *reg = malloc(sizeof(*reg));
	if (nr)
		c->regions = nr;
	if (!nr || !reg) {
		pthread_mutex_unlock(&c->mu);
		free(reg);
		return -ENOMEM;
	}
	*reg = *tmpl;
	c->regions[c->nregions++] = reg;
	c->reg_bytes += reg->len;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/*
 * Map @len bytes of @fd from @off between two inaccessible guards of @align bytes each (the fd's
 * block size: a huge page for hugetlbfs, whose mappings must be aligned to it). A translation that
 * strayed past either end of a region then faults at once instead of reading or writing whatever
 * mapping happens to be its neighbour (fuzz_shm relies on it). *@map, *@map_len: the reservation to
 * munmap. @return the region's address, or MAP_FAILED with errno set.
 */
static void *map_guarded(int fd, uint64_t len, uint64_t off, uint64_t align, bool ro, void **map, size_t *map_len)
{
	size_t total = (size_t)len + 3 * (size_t)align; /* a guard each side, and room to align */
	uint8_t *g = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (g == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *at = (uint8_t *)(((uintptr_t)g + 2 * align - 1) & ~(uintptr_t)(align - 1));
	void *va = mmap(at, len, PROT_READ | (ro ? 0 : PROT_WRITE), MAP_SHARED | MAP_FIXED, fd, (off_t)off);
	if (va == MAP_FAILED) {
		int e = errno;
		munmap(g, total);
		errno = e;
		return MAP_FAILED;
	}
	*map = g;
	*map_len = total;
	return va;
}

/*
 * May @fd be mapped? Sealed against shrinking, or, if @may_shrink, a regular file of memory (tmpfs,
 * hugetlbfs) without that seal. A file cut short under our mapping turns our next access into a
 * SIGBUS that ends the daemon (hugetlbfs files can be truncated while mapped, and cannot be sealed
 * unless made by memfd_create with MFD_ALLOW_SEALING), so only a host that could stop the daemon
 * anyway may pass one. Never a device (/dev/zero) or a file on a disk.
 */
static bool region_fd_ok(int fd, bool may_shrink)
{
	int seals = fcntl(fd, F_GET_SEALS);
	struct statfs sf;
	struct stat sb;

	if (seals >= 0 && (seals & F_SEAL_SHRINK))
		return true;
	return may_shrink && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && fstatfs(fd, &sf) == 0 &&
	       (sf.f_type == TMPFS_MAGIC || sf.f_type == HUGETLBFS_MAGIC);
}

int nkv_shm_region_map(struct shm_ctrl *c, uint64_t iova, uint64_t len, uint64_t off, bool ro, int fd,
		       unsigned extra, bool may_shrink)
{
	struct stat sb;

	if ((iova | len | off) & (PAGE - 1) || len == 0 || iova + len < iova || off + len < off)
		return -EINVAL;
	if (!region_fd_ok(fd, may_shrink))
		return -EPERM; /* the host could shrink it under our mapping */
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < off + len)
		return -EINVAL;
	int rc = region_room(c, iova, len, extra);
	if (rc)
		return rc;
	uint64_t align = sb.st_blksize > PAGE && !(sb.st_blksize & (sb.st_blksize - 1)) ? (uint64_t)sb.st_blksize : PAGE;
	struct shm_region reg = {.iova = iova, .len = len, .ro = ro};
	if ((reg.va = map_guarded(fd, len, off, align, ro, &reg.map, &reg.map_len)) == MAP_FAILED)
		return -errno; /* the length is bounded by the fd's size, checked above */
	if ((rc = region_add(c, &reg)) < 0)
		munmap(reg.map, reg.map_len);
	return rc;
}

bool nkv_shm_region_overlaps(struct shm_ctrl *c, uint64_t iova, uint64_t len)
{
	bool hit = false;

	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; !hit && i < c->nregions; i++)
		hit = iova < c->regions[i]->iova + c->regions[i]->len && c->regions[i]->iova < iova + len;
	pthread_mutex_unlock(&c->mu);
	return hit;
}

static int do_register(struct shm_ctrl *c, const struct nkv_shm_reg *m, int fd)
{
	return nkv_shm_region_map(c, m->iova, m->len, m->offset, m->flags & NKV_SHM_REG_READONLY, fd, 0, false);
}

/* REG_CUDA: GPU memory by IPC handle, bounds checked against the allocation's real size. */
static int do_register_cuda(struct shm_ctrl *c, const struct nkv_shm_reg_cuda *m)
{
	void *base;
	uint64_t size;
	int rc;

	if ((m->iova | m->len) & (PAGE - 1) || m->len == 0 || m->iova + m->len < m->iova ||
	    m->offset + m->len < m->offset)
		return -EINVAL;
	if ((rc = region_room(c, m->iova, m->len, 0)) || (rc = nkv_cuda_open(m->device, m->handle, &base, &size)))
		return rc;
	if (m->offset + m->len > size) {
		nkv_cuda_close(m->device, base);
		return -EINVAL;
	}
	struct shm_region reg = {.iova = m->iova, .len = m->len, .ro = m->flags & NKV_SHM_REG_READONLY, .gpu = true,
				 .device = m->device, .gpu_base = base, .gpu_va = (uint8_t *)base + m->offset};
	if ((rc = region_add(c, &reg)) < 0)
		nkv_cuda_close(m->device, base);
	return rc;
}

/* Give back what a region holds: our mapping, or the opened IPC handle. */
static void region_release(struct shm_region *r)
{
	if (r->gpu)
		nkv_cuda_close(r->device, r->gpu_base);
	else
		munmap(r->map, r->map_len);
}

int nkv_shm_region_unmap(struct shm_ctrl *c, uint64_t iova, uint64_t len)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < c->nregions; i++) {
		struct shm_region *r = c->regions[i];
		if (r->iova != iova || (len && r->len != len))
			continue;
		if (r->refs) {
			rc = -EBUSY; /* a queue or a command still uses it */
		} else {
			region_release(r);
			c->reg_bytes -= r->len;
			free(r);
			c->regions[i] = c->regions[--c->nregions];
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int nkv_shm_region_unmap_all(struct shm_ctrl *c)
{
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < c->nregions;) {
		struct shm_region *r = c->regions[i];
		if (r->refs) {
			rc = -EBUSY;
			i++;
			continue;
		}
		region_release(r);
		c->reg_bytes -= r->len;
		free(r);
		c->regions[i] = c->regions[--c->nregions];
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static int do_deregister(struct shm_ctrl *c, const struct nkv_shm_reg *m)
{
	return nkv_shm_region_unmap(c, m->iova, 0);
}

static int make_regs(struct shm_ctrl *c)
{
	int fd = memfd_create("nkv-regs", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	c->reg_size = nkv_shm_reg_size(c->s->conf.max_io_queues);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, c->reg_size) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
	    (c->regs = mmap(NULL, c->reg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int rc = -errno;
		c->regs = NULL;
		close(fd);
		return rc;
	}
	return fd;
}

/* Live controllers of @hostnqn among the connected hosts. */
static unsigned host_ctrls(struct nkv_shm *s, const char *hostnqn)
{
	unsigned n = 0;

	for (struct shm_conn *k = s->conns; k; k = k->next)
		n += k->c && strcmp(k->hostnqn, hostnqn) == 0;
	return n;
}

int nkv_shm_ctrl_open(struct nkv_shm *s, struct shm_listener *l, int sock, const char *hostnqn,
		      const uint8_t hostid[16], bool vfu, struct shm_ctrl **out)
{
	struct nkv_ctrlr_opts opts = {.mqes = s->conf.mqes, .max_io_queues = s->conf.max_io_queues,
				      .trname = vfu ? "vfio-user" : "shm"};
	unsigned nvec = (unsigned)s->conf.max_io_queues + 1;
	struct shm_ctrl *c;
	int rfd, rc;

	pthread_mutex_lock(&s->tgt->lock); /* the allowlist changes live; l->ss too (nkv_shm_listen) */
	struct nkv_subsys *ss = l->ss;
	bool allowed = *hostnqn && !ss->removed && nkv_subsys_host_allowed(ss, hostnqn);
	if (allowed)
		atomic_fetch_add(&ss->refs, 1); /* until its controller holds it */
	pthread_mutex_unlock(&s->tgt->lock);
	if (!allowed) {
		NKV_WARN("%s %s: host '%s' is not allowed", l->front->name, l->path, hostnqn);
		return -EACCES;
	}
	/* Each controller costs the target memory and poller time: bounded per host and in all, so
	 * one host NQN cannot take every controller. Controllers of departed hosts still count in the
	 * total until their poller has reaped them. */
	if ((unsigned)atomic_load(&s->nctrls) >= s->conf.max_ctrls ||
	    host_ctrls(s, hostnqn) >= s->conf.max_ctrls_per_host) {
		NKV_WARN("%s %s: host '%s': controller limit reached (%u in all, %u per host)", l->front->name, l->path,
			 hostnqn, s->conf.max_ctrls, s->conf.max_ctrls_per_host);
		nkv_subsys_put(ss);
		return -EUSERS;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		nkv_subsys_put(ss);
		return -ENOMEM;
	}
	c->s = s;
	c->vfu = vfu;
	c->kick_fd = -1;
	/* Our own descriptor of the host's socket, closed with the controller: the poller may shut the
	 * socket down (eviction) without racing the socket thread's close of its own. */
	c->sock = fcntl(sock, F_DUPFD_CLOEXEC, 0);
	c->copy_tail = &c->copy_head;
	pthread_mutex_init(&c->mu, NULL);
	atomic_fetch_add(&s->nctrls, 1);
	c->sqs = calloc(nvec, sizeof(*c->sqs));
	c->cqs = calloc(nvec, sizeof(*c->cqs));
	if ((c->irq_fds = malloc(nvec * sizeof(*c->irq_fds))))
		for (unsigned v = 0; v < nvec; v++)
			c->irq_fds[v] = -1;
	if (vfu) {
		c->irq_masked = calloc(nvec, 1);
		c->irq_pend = calloc(nvec, sizeof(*c->irq_pend));
		c->irq_pass_at = calloc(nvec, sizeof(*c->irq_pass_at));
	}
	rfd = -1;
	rc = -ENOMEM;
	if (!c->sqs || !c->cqs || !c->irq_fds || (vfu && (!c->irq_masked || !c->irq_pend || !c->irq_pass_at)) ||
	    (rfd = rc = make_regs(c)) < 0 || (rc = nkv_ctrlr_create(ss, hostnqn, hostid, &opts, &c->ctrlr)) < 0) {
		if (rfd >= 0)
			close(rfd);
		ctrl_free(c);
		nkv_subsys_put(ss);
		return rc < 0 ? rc : -ENOMEM;
	}
	nkv_subsys_put(ss); /* the controller holds it now */
	c->wakeup = (uint32_t *)(c->regs + nkv_shm_notify_off(s->conf.max_io_queues) + NKV_SHM_NOTIFY_WAKEUP);
	c->arm = (uint32_t *)(c->regs + nkv_shm_notify_off(s->conf.max_io_queues) + NKV_SHM_NOTIFY_ARM);
	publish_regs(c);
	*out = c;
	return rfd;
}

void nkv_shm_ctrl_start(struct shm_ctrl *c)
{
	struct nkv_shm *s = c->s;

	c->p = &s->pollers[s->next_poller++ % s->conf.pollers];
	nkv_msgq_send(&c->p->msgq, &c->msg, ctrl_attach);
}

void nkv_shm_ctrl_discard(struct shm_ctrl *c)
{
	ctrl_free(c);
}

/* HELLO: check the host, create the controller and its register page, hand it to a poller. */
static int do_hello(struct nkv_shm *s, struct shm_listener *l, int sock, const struct nkv_shm_hello *h,
		    struct shm_ctrl **out, char *nqn_out)
{
	struct nkv_shm_reply rep = {.hdr = {NKV_SHM_MAGIC, NKV_SHM_VERSION, NKV_SHM_HELLO}};
	char hostnqn[NKV_NQN_MAX];
	struct shm_ctrl *c;
	int rfd, rc;

	snprintf(hostnqn, sizeof(hostnqn), "%.*s", (int)strnlen(h->hostnqn, sizeof(h->hostnqn)), h->hostnqn);
	if ((rfd = nkv_shm_ctrl_open(s, l, sock, hostnqn, h->hostid, false, &c)) < 0) {
		rep.status = rfd;
		send_reply(sock, &rep, -1);
		return rfd;
	}
	rep.reg_size = c->reg_size;
	rep.cntlid = c->ctrlr->cntlid;
	rep.max_queues = s->conf.max_io_queues;
	rep.max_regions = s->conf.max_regions;
	rep.max_reg_bytes = s->conf.max_reg_bytes;
	rc = send_reply(sock, &rep, rfd);
	close(rfd); /* the host has its own reference now */
	if (rc < 0) {
		ctrl_free(c);
		return rc;
	}
	*out = c;
	memcpy(nqn_out, hostnqn, sizeof(hostnqn));
	nkv_shm_ctrl_start(c);
	return 0;
}


/* Wake a poller that may sleep until kicked: a controller of it is gone, or the pollers stop. */
static void poller_wake(struct shm_poller *p)
{
	efd_signal(p->msgq.efd);
}

/* Stop the first @n pollers: each reaps its controllers, then exits. */
static void pollers_join(struct nkv_shm *s, unsigned n)
{
	atomic_store(&s->pollers_stop, true);
	for (unsigned i = 0; i < n; i++)
		poller_wake(&s->pollers[i]);
	for (unsigned i = 0; i < n; i++)
		pthread_join(s->pollers[i].thread, NULL);
}

/* Is @fd an eventfd? Anything else (a pipe that fills up, a socket) could block or misdirect a
 * poller's writes and reads. */
bool nkv_shm_eventfd_ok(int fd)
{
	char path[32], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if ((n = readlink(path, link, sizeof(link) - 1)) < 0)
		return false;
	link[n] = 0;
	return strcmp(link, "anon_inode:[eventfd]") == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0;
}

/* SET_KICK / SET_IRQ: check, then hand to the poller (which owns the fds from then on). The fd is
 * ours to close unless this returns 0 with *@fd set to -1. */
static int do_bind(struct nkv_shm *s, struct shm_ctrl *c, const struct nkv_shm_bind *m, int *fd)
{
	bool kick = m->hdr.op == NKV_SHM_SET_KICK;

	if (s->conf.no_notify)
		return -ENOTSUP;
	if (m->rsvd0 || m->rsvd || (kick && m->vector) || (!kick && m->vector > s->conf.max_io_queues))
		return -EINVAL;
	if (!kick && *fd < 0)
		return -EBADF;
	if (*fd >= 0 && !nkv_shm_eventfd_ok(*fd))
		return -EINVAL;
	int rc = nkv_shm_ctrl_post(c, kick ? SHM_POST_KICK : SHM_POST_IRQ, m->vector, *fd);
	if (rc == 0)
		*fd = -1;
	return rc;
}

static void conn_close(struct nkv_shm *s, struct shm_conn *k)
{
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, k->fd, NULL);
	shutdown(k->fd, SHUT_RDWR); /* the controller's duplicate must not keep the host's end open */
	close(k->fd);
	for (struct shm_conn **p = &s->conns; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	if (!k->c)
		s->pending--;
	if (k->l->front->closed)
		k->l->front->closed(s, k);
	if (k->c) {
		NKV_INFO("%s %s: controller %u: host disconnected", k->l->front->name, k->l->path, k->c->ctrlr->cntlid);
		atomic_store(&k->c->gone, true); /* its poller reaps it; nothing here touches it again */
		poller_wake(k->c->p);
	}
	free(k);
}

/* One request from a host (the shm front). @return false when the connection must close. */
static bool conn_message(struct nkv_shm *s, struct shm_conn *k)
{
	union {
		struct nkv_shm_hello hello;
		struct nkv_shm_reg reg;
		struct nkv_shm_reg_cuda cuda;
		struct nkv_shm_bind bind;
		struct nkv_shm_hdr hdr;
	} m;
	int fd;
	ssize_t n = nkv_recv_fd(k->fd, &m, sizeof(m), &fd, MSG_DONTWAIT);

	if (n == -EAGAIN || n == -EINTR)
		return true;
	if (n <= 0) /* end of stream, an empty message, an error, or one larger than any of the protocol */
		return false;
	struct nkv_shm_reply rep = {.hdr = {NKV_SHM_MAGIC, NKV_SHM_VERSION, m.hdr.op}};
	bool keep = true;
	if ((size_t)n < sizeof(m.hdr) || m.hdr.magic != NKV_SHM_MAGIC || m.hdr.version != NKV_SHM_VERSION)
		keep = false; /* not our protocol */
	else if (m.hdr.op == NKV_SHM_HELLO) {
		keep = !k->c && (size_t)n == sizeof(m.hello) && do_hello(s, k->l, k->fd, &m.hello, &k->c, k->hostnqn) == 0;
		if (keep)
			s->pending--; /* it has a controller now, limited as such */
	} else if ((m.hdr.op == NKV_SHM_REG || m.hdr.op == NKV_SHM_DEREG) && k->c && (size_t)n == sizeof(m.reg)) {
		if (m.hdr.op == NKV_SHM_REG)
			rep.status = fd < 0 ? -EBADF : do_register(k->c, &m.reg, fd);
		else
			rep.status = do_deregister(k->c, &m.reg);
		keep = send_reply(k->fd, &rep, -1) == 0;
	} else if (m.hdr.op == NKV_SHM_REG_CUDA && k->c && (size_t)n == sizeof(m.cuda)) {
		rep.status = do_register_cuda(k->c, &m.cuda);
		keep = send_reply(k->fd, &rep, -1) == 0;
	} else if ((m.hdr.op == NKV_SHM_SET_KICK || m.hdr.op == NKV_SHM_SET_IRQ) && k->c && (size_t)n == sizeof(m.bind)) {
		rep.status = do_bind(s, k->c, &m.bind, &fd);
		keep = send_reply(k->fd, &rep, -1) == 0;
	} else {
		keep = false;
	}
	if (fd >= 0)
		close(fd); /* a registered region keeps its own mapping */
	return keep;
}

const struct shm_front nkv_shm_front_shm = {.name = "shm", .sock_type = SOCK_SEQPACKET, .message = conn_message};

/* The connection that has waited longest without saying HELLO (the list is newest first). */
static struct shm_conn *oldest_pending(struct nkv_shm *s)
{
	struct shm_conn *old = NULL;

	for (struct shm_conn *k = s->conns; k; k = k->next)
		if (!k->c)
			old = k;
	return old;
}

/* Close connections whose HELLO is overdue: a silent socket holds an fd and a slot forever. */
static void hello_sweep(struct nkv_shm *s)
{
	uint64_t now = nkv_now_ms();

	for (struct shm_conn *k = s->conns, *next; k; k = next) {
		next = k->next;
		if (!k->c && now - k->since >= s->conf.hello_timeout_ms) {
			NKV_WARN("%s %s: no %s within %u ms: closed", k->l->front->name, k->l->path,
				 k->l->front == &nkv_shm_front_shm ? "HELLO" : "VERSION", s->conf.hello_timeout_ms);
			conn_close(s, k);
		}
	}
}

/* A host's connection on @l, before HELLO (socket thread, or the test hooks' single thread). */
static struct shm_conn *conn_new(struct nkv_shm *s, struct shm_listener *l, int fd)
{
	struct shm_conn *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->kind = EP_CONN;
	k->fd = fd;
	k->l = l;
	k->since = nkv_now_ms();
	k->next = s->conns;
	s->conns = k;
	s->pending++;
	return k;
}

static void accept_host(struct nkv_shm *s, struct shm_listener *l)
{
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct shm_conn *k;

	if (fd < 0)
		return;
	if (atomic_load(&s->draining) || !(k = conn_new(s, l, fd))) {
		close(fd);
		return;
	}
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = k};
	if ((l->front->opened && l->front->opened(s, k) < 0) || epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
		conn_close(s, k);
}

static void *sock_main(void *arg)
{
	struct nkv_shm *s = arg;
	struct epoll_event evs[32];

	while (!atomic_load(&s->stop)) {
		/* Wake for HELLO deadlines only while some connection has one. */
		int tmo = s->pending ? (int)(s->conf.hello_timeout_ms < 400 ? s->conf.hello_timeout_ms / 4 + 1 : 100) : -1;
		int n = epoll_wait(s->epfd, evs, 32, tmo);
		/* Connections first, then listeners: a host that disconnects and connects again at once
		 * has both in one batch, and vfio-user, one client per socket, must see the old one gone
		 * before it takes the new one. Accepting adds no connection that the batch names. */
		for (int i = 0; i < n; i++) {
			enum ep_kind *kind = evs[i].data.ptr;
			if (*kind == EP_CONN) {
				struct shm_conn *k = (struct shm_conn *)kind;
				if (!k->l->front->message(s, k) || (evs[i].events & (EPOLLHUP | EPOLLERR)))
					conn_close(s, k);
				evs[i].data.ptr = NULL; /* maybe freed */
			}
		}
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr && *(enum ep_kind *)evs[i].data.ptr == EP_LISTENER)
				accept_host(s, evs[i].data.ptr);
		/* After the batch (its events may name any connection): past MAX_PENDING the oldest
		 * silent connections go, so a newcomer always gets its turn to say HELLO. */
		while (s->pending > MAX_PENDING)
			conn_close(s, oldest_pending(s));
		if (s->pending)
			hello_sweep(s);
	}
	while (s->conns) /* hosts still connected at shutdown */
		conn_close(s, s->conns);
	return NULL;
}

/* ---- public API -------------------------------------------------------------------------------- */

/* A transport with its settings (defaults filled in, checked), and no threads or descriptors yet. */
static int shm_alloc(struct nkv_target *tgt, const struct nkv_shm_conf *conf, struct nkv_shm **out)
{
	struct nkv_shm *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->tgt = tgt;
	s->epfd = s->stop_efd = -1;
	if (conf)
		s->conf = *conf;
	if (!s->conf.pollers)
		s->conf.pollers = 1;
	if (!s->conf.mqes)
		s->conf.mqes = 4095;
	if (!s->conf.max_io_queues)
		s->conf.max_io_queues = 64;
	if (!s->conf.poll_idle_us)
		s->conf.poll_idle_us = 50;
	if (!s->conf.max_regions)
		s->conf.max_regions = 256;
	if (!s->conf.max_reg_bytes)
		s->conf.max_reg_bytes = 64ull << 30;
	if (!s->conf.bounce_budget)
		s->conf.bounce_budget = 1ull << 30;
	if (!s->conf.bounce_ctrl_budget)
		s->conf.bounce_ctrl_budget = s->conf.bounce_budget / 4;
	if (!s->conf.max_cmds)
		s->conf.max_cmds = 1024;
	if (!s->conf.max_ctrls)
		s->conf.max_ctrls = 256;
	if (!s->conf.max_ctrls_per_host)
		s->conf.max_ctrls_per_host = 16;
	if (!s->conf.hello_timeout_ms)
		s->conf.hello_timeout_ms = 5000;
	if (s->conf.pollers > 64 || s->conf.mqes < 1 || s->conf.max_io_queues > 1024) {
		free(s);
		return -EINVAL;
	}
	pthread_mutex_init(&s->mu, NULL);
	s->stop_kind = EP_STOP;
	*out = s;
	return 0;
}

static void shm_read_gauges(void *arg, struct nkv_transport_metrics *m)
{
	struct nkv_shm *s = arg;

	m->notifies = true;
	for (unsigned i = 0; i < s->conf.pollers; i++) {
		struct shm_poller *p = &s->pollers[i];
		m->queue_depth += atomic_load_explicit(&p->inflight, memory_order_relaxed);
		m->waits += atomic_load_explicit(&p->sleeps, memory_order_relaxed);
		m->kicks += atomic_load_explicit(&p->kicks, memory_order_relaxed);
		m->interrupts += atomic_load_explicit(&p->irqs, memory_order_relaxed);
	}
	int n = atomic_load_explicit(&s->nctrls, memory_order_relaxed);
	m->connections = n > 0 ? (uint64_t)n : 0;
}

int nkv_shm_create(struct nkv_target *tgt, const struct nkv_shm_conf *conf, struct nkv_shm **out)
{
	struct nkv_shm *s;
	int rc;

	if ((rc = shm_alloc(tgt, conf, &s)) < 0)
		return rc;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->stop_kind};
	if (s->epfd < 0 || s->stop_efd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->stop_efd, &e) < 0 ||
	    !(s->pollers = calloc(s->conf.pollers, sizeof(*s->pollers)))) {
		rc = s->epfd < 0 || s->stop_efd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < s->conf.pollers; i++) {
		struct shm_poller *p = &s->pollers[i];
		p->s = s;
		p->id = i;
		if ((rc = nkv_msgq_init(&p->msgq)) < 0 || (rc = -pthread_create(&p->thread, NULL, poller_main, p)) < 0) {
			pollers_join(s, i);
			goto fail;
		}
	}
	if ((rc = -pthread_create(&s->sock_thread, NULL, sock_main, s)) < 0) {
		pollers_join(s, s->conf.pollers);
		goto fail;
	}
	s->reg = (struct nkv_transport_reg){.name = "shm", .read = shm_read_gauges, .arg = s};
	nkv_target_add_transport(tgt, &s->reg);
	*out = s;
	return 0;
fail:
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->stop_efd >= 0)
		close(s->stop_efd);
	free(s->pollers);
	free(s);
	return rc;
}

static int listen_front(struct nkv_shm *s, const char *subnqn, const char *path, const struct shm_front *front,
			const char *hostnqn)
{
	struct nkv_subsys *ss = nkv_target_find_subsys(s->tgt, subnqn); /* removal: see do_hello */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct shm_listener *l;
	int fd;

	if (!ss)
		return -ENOENT;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (hostnqn && strlen(hostnqn) >= NKV_NQN_MAX)
		return -EINVAL;
	/* Ours already: a subsystem removed live left its socket behind (refusing every HELLO); the
	 * subsystem created again on that path takes it over. */
	pthread_mutex_lock(&s->mu);
	for (l = s->listeners; l && strcmp(l->path, path) != 0; l = l->next)
		;
	struct nkv_subsys *old = NULL;
	int taken = 0;
	if (l) {
		pthread_mutex_lock(&s->tgt->lock);
		if (l->front != front) {
			taken = -EADDRINUSE;
		} else if (l->ss->removed) {
			old = l->ss;
			l->ss = ss;
			atomic_fetch_add(&ss->refs, 1);
		} else {
			taken = -EADDRINUSE;
		}
		pthread_mutex_unlock(&s->tgt->lock);
	}
	pthread_mutex_unlock(&s->mu);
	if (l) {
		nkv_subsys_put(old);
		if (!taken)
			NKV_INFO("%s: %s on %s (the socket of a removed subsystem)", front->name, subnqn, path);
		return taken;
	}
	/* A live socket there is refused (as TCP refuses a port in use), and what is not a socket is
	 * never replaced; a socket nobody answers on is left from a dead run and replaced. */
	struct stat st;
	fd = nkv_unix_listen(path, front->sock_type | SOCK_NONBLOCK, 64, s->conf.socket_mode ? s->conf.socket_mode : 0600,
			     s->conf.socket_group_set ? (gid_t)s->conf.socket_gid : (gid_t)-1, &st);
	if (fd == -EADDRINUSE)
		NKV_ERR("%s: %s is served by another live process", front->name, path);
	if (fd < 0)
		return fd;
	if (!(l = calloc(1, sizeof(*l)))) {
		nkv_unix_unlink_if(path, &st);
		close(fd);
		return -ENOMEM;
	}
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	l->kind = EP_LISTENER;
	l->front = front;
	snprintf(l->hostnqn, sizeof(l->hostnqn), "%s", hostnqn ? hostnqn : "");
	l->ss = ss;
	atomic_fetch_add(&ss->refs, 1); /* a removed subsystem stays until its listener goes */
	l->fd = fd;
	snprintf(l->path, sizeof(l->path), "%s", path);
	pthread_mutex_lock(&s->mu);
	l->next = s->listeners;
	s->listeners = l;
	pthread_mutex_unlock(&s->mu);
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = l};
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
		return -errno;
	NKV_INFO("%s: %s on %s", front->name, subnqn, path);
	return 0;
}

int nkv_shm_listen(struct nkv_shm *s, const char *subnqn, const char *path)
{
	return listen_front(s, subnqn, path, &nkv_shm_front_shm, NULL);
}

int nkv_shm_listen_vfio_user(struct nkv_shm *s, const char *subnqn, const char *path, const char *hostnqn)
{
	return listen_front(s, subnqn, path, &nkv_vfu_front, hostnqn);
}

void nkv_shm_destroy(struct nkv_shm *s, int grace_ms)
{
	if (!s)
		return;
	uint64_t deadline = nkv_now_ms() + (uint64_t)(grace_ms > 0 ? grace_ms : 0);

	nkv_target_del_transport(s->tgt, &s->reg); /* no metrics reader looks at it any more */
	/* No new hosts; give hosts time to finish and leave; then cut the rest off. */
	atomic_store(&s->draining, true);
	while (atomic_load(&s->nctrls) > 0 && nkv_now_ms() < deadline)
		usleep(10 * 1000);
	atomic_store(&s->stop, true);
	uint64_t one = 1;
	(void)!write(s->stop_efd, &one, sizeof(one));
	/* The socket thread first: it closes every host connection and marks each controller gone,
	 * and only then may the pollers free them (it reads them until it is done). */
	pthread_join(s->sock_thread, NULL);
	pollers_join(s, s->conf.pollers);
	for (unsigned i = 0; i < s->conf.pollers; i++)
		nkv_msgq_fini(&s->pollers[i].msgq);
	while (s->listeners) {
		struct shm_listener *l = s->listeners;
		s->listeners = l->next;
		close(l->fd);
		struct stat st;
		if (stat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
			unlink(l->path); /* ours still: a successor's socket is left alone */
		nkv_subsys_put(l->ss);
		free(l);
	}
	close(s->epfd);
	close(s->stop_efd);
	pthread_mutex_destroy(&s->mu);
	free(s->pollers);
	free(s);
}

/* ---- testing hooks (shm_int.h): one thread plays the socket thread and the poller ------------------ */

int nkv_shm_test_create(struct nkv_target *tgt, const struct nkv_shm_conf *conf, struct nkv_shm **out)
{
	struct nkv_shm_conf one = conf ? *conf : (struct nkv_shm_conf){0};
	struct nkv_shm *s;
	int rc;

	one.pollers = 1;
	if ((rc = shm_alloc(tgt, &one, &s)) < 0)
		return rc;
	if (!(s->pollers = calloc(1, sizeof(*s->pollers))) || (rc = nkv_msgq_init(&s->pollers[0].msgq)) < 0) {
		pthread_mutex_destroy(&s->mu);
		free(s->pollers);
		free(s);
		return rc < 0 ? rc : -ENOMEM;
	}
	s->pollers[0].s = s;
	s->single = true;
	*out = s;
	return 0;
}

static int test_adopt(struct nkv_shm *s, const char *subnqn, int fd, const struct shm_front *front)
{
	struct nkv_subsys *ss = nkv_target_find_subsys(s->tgt, subnqn);
	struct shm_listener *l;
	struct shm_conn *k;

	if (!ss)
		return -ENOENT;
	for (l = s->listeners; l && (l->ss != ss || l->front != front); l = l->next)
		;
	if (!l) { /* a listener without a socket: it only names the subsystem (and the path in logs) */
		if (!(l = calloc(1, sizeof(*l))))
			return -ENOMEM;
		l->kind = EP_LISTENER;
		l->front = front;
		l->ss = ss;
		atomic_fetch_add(&ss->refs, 1);
		l->fd = -1;
		snprintf(l->path, sizeof(l->path), "(test %s)", subnqn);
		l->next = s->listeners;
		s->listeners = l;
	}
	if (!(k = conn_new(s, l, fd)))
		return -ENOMEM;
	if (front->opened && front->opened(s, k) < 0) {
		conn_close(s, k);
		return -EACCES;
	}
	return 0;
}

int nkv_shm_test_adopt(struct nkv_shm *s, const char *subnqn, int fd)
{
	return test_adopt(s, subnqn, fd, &nkv_shm_front_shm);
}

int nkv_vfu_test_adopt(struct nkv_shm *s, const char *subnqn, int fd)
{
	return test_adopt(s, subnqn, fd, &nkv_vfu_front);
}

unsigned nkv_shm_test_poll(struct nkv_shm *s, bool conns)
{
	unsigned work = 0;

	/* What sock_main does for one epoll event of each connection: one message, then close on
	 * error or hang-up. No HELLO deadlines: they would make a run depend on the clock. */
	for (struct shm_conn *k = conns ? s->conns : NULL, *next; k; k = next) {
		struct pollfd pf = {.fd = k->fd, .events = POLLIN};
		next = k->next;
		while (poll(&pf, 1, 0) == 1) {
			work++;
			if (!k->l->front->message(s, k) || (pf.revents & (POLLHUP | POLLERR))) {
				conn_close(s, k);
				break;
			}
		}
	}
	return work + poller_pass(&s->pollers[0]);
}

int nkv_shm_test_destroy(struct nkv_shm *s, unsigned max_passes)
{
	struct shm_poller *p = &s->pollers[0];

	while (s->conns)
		conn_close(s, s->conns);
	for (unsigned i = 0; i < max_passes && (p->ctrls || atomic_load(&s->nctrls) > 0); i++)
		poller_pass(p);
	if (p->ctrls || atomic_load(&s->nctrls) > 0)
		return -EBUSY; /* a command never came back: left as it is, for the caller to report */
	nkv_msgq_fini(&p->msgq);
	while (s->listeners) {
		struct shm_listener *l = s->listeners;
		s->listeners = l->next;
		nkv_subsys_put(l->ss);
		free(l);
	}
	pthread_mutex_destroy(&s->mu);
	free(s->pollers);
	free(s);
	return 0;
}
