/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv_shm.h - the shared-memory (PCIe-style) transport's control protocol. A host connects to the
 * target's Unix socket (SOCK_SEQPACKET: one message per send, file descriptors with SCM_RIGHTS),
 * says who it is, and gets one controller: a register page (BAR0 layout: CAP 00h ... ACQ 30h,
 * doorbells from 1000h, DSTRD 0) shared as a memfd it maps read-write. Everything after that is
 * NVMe as on PCIe: AQA/ASQ/ACQ and CC.EN through the registers, queues and data in memory the host
 * registered over this socket at IOVAs of its choosing, doorbells in the register page, CQEs with
 * phase bits. Closing the socket ends the controller.
 *
 * Messages are little-endian structs; every request gets exactly one reply, in order. HELLO must
 * come within the target's HELLO timeout (default 5 s) of connecting, or the socket is closed.
 *
 * The controller watches CC by polling: after clearing CC.EN, a host waits for CSTS.RDY = 0 (and
 * CSTS.CFS = 0) before setting EN again, as the NVMe base spec requires; a quick 1-0-1 may be
 * missed.
 *
 * Notifications (optional; a controller that offers them sets NKV_SHM_FEAT_NOTIFY in the register at
 * NKV_SHM_REG_FEAT). Both directions use eventfds the host creates and passes over the socket, and
 * suppression words in the register page's notification area (offset in NKV_SHM_REG_NOTIFY), so that
 * no system call is made while the other side is busy polling (virtio's and io_uring SQPOLL's model):
 *  - Doorbell kicks (host -> controller): SET_KICK binds an eventfd. A poller about to sleep sets the
 *    controller's NEED_WAKEUP word, issues a full fence and scans once more; then it sleeps until a
 *    kick, a backend completion or a bounded timeout. A host, after every SQ tail doorbell and CC
 *    write, issues a full fence and writes the kick eventfd only if NEED_WAKEUP is set. A poller
 *    serving any controller without a kick eventfd keeps napping `poll_idle_us` (it must look at that
 *    controller's doorbells by itself), and so does one whose queues wait for the host to free CQ
 *    entries or for bounce memory.
 *  - Interrupts (controller -> host): SET_IRQ binds an eventfd to an interrupt vector; Create I/O CQ
 *    with IEN = 1 and that IV (CDW11) makes the CQ interrupt-capable; the admin CQ uses vector 0. A
 *    host about to sleep on a CQ stores 1 in the CQ's ARM word, issues a full fence, looks at the
 *    phase bit once more, and only then waits on the eventfd. A controller that posted CQEs to a CQ
 *    issues a full fence, exchanges its ARM word with 0 and writes the eventfd if it was 1: at most
 *    one interrupt per arming. An unarmed CQ never costs a system call. A vector with no eventfd
 *    bound never interrupts (IEN is accepted as before). A controller that sets CSTS.CFS writes every
 *    bound vector, so that a sleeping host notices.
 *  Either side's eventfd may be replaced by binding another; SET_KICK without an fd unbinds the kick
 *  (a host about to hand queues to a GPU, which cannot write an eventfd, does that first).
 */
#ifndef NKV_SHM_H
#define NKV_SHM_H

#include <stdint.h>

#include "nkv_spec.h"

#define NKV_SHM_MAGIC 0x53564b4eu /* "NKVS" */
#define NKV_SHM_VERSION 1u

enum nkv_shm_op {
	NKV_SHM_HELLO = 1,   /* host -> target: struct nkv_shm_hello; reply carries the register memfd */
	NKV_SHM_REG = 2,     /* host -> target: struct nkv_shm_reg + one fd (memfd, hugetlbfs file) */
	NKV_SHM_DEREG = 3,   /* host -> target: struct nkv_shm_reg (iova only); also ends a REG_CUDA region */
	NKV_SHM_REG_CUDA = 4, /* host -> target: struct nkv_shm_reg_cuda: GPU memory by CUDA IPC handle */
	NKV_SHM_SET_KICK = 5, /* host -> target: struct nkv_shm_bind + an eventfd (none: unbind) */
	NKV_SHM_SET_IRQ = 6,  /* host -> target: struct nkv_shm_bind (vector) + an eventfd */
};

/** Every message starts with this. */
struct nkv_shm_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
};
NKV_SIZE(struct nkv_shm_hdr, 8);

/** HELLO: the host's identity, checked against the subsystem's allowlist. */
struct nkv_shm_hello {
	struct nkv_shm_hdr hdr;
	uint8_t hostid[16];
	char hostnqn[256];
};
NKV_SIZE(struct nkv_shm_hello, 280);

/**
 * REG / DEREG: a region of the passed fd, from @offset, @len bytes, seen by the controller at @iova.
 * The fd must be a memfd (or hugetlbfs memfd) sealed with F_SEAL_SHRINK, so that the host cannot
 * shrink it under the controller's mapping (the controller would fault); others are -EPERM.
 */
struct nkv_shm_reg {
	struct nkv_shm_hdr hdr;
	uint64_t iova;   /* 4 KiB aligned */
	uint64_t len;    /* multiple of 4 KiB */
	uint64_t offset; /* into the fd, 4 KiB aligned */
	uint32_t flags;  /* NKV_SHM_REG_* */
	uint32_t rsvd;
};
NKV_SIZE(struct nkv_shm_reg, 40);
#define NKV_SHM_REG_READONLY 0x1u /* the controller may only read it (Store sources, SQs) */

/**
 * REG_CUDA: @len bytes of GPU memory, @offset bytes into the allocation named by the CUDA IPC
 * handle (cudaIpcGetMemHandle) on device @device, seen by the controller at @iova. Such a region
 * can be a Retrieve target and a Store source (the target moves the bytes with cudaMemcpy, loading
 * the CUDA runtime only when the first one is registered), never a queue or a PRP list: those the
 * controller reads with its CPU. Replies: -ENOTSUP (no CUDA runtime on the target), -ENODEV (the
 * handle cannot be opened there), and the REG errors.
 */
struct nkv_shm_reg_cuda {
	struct nkv_shm_hdr hdr;
	uint64_t iova;     /* 4 KiB aligned */
	uint64_t len;      /* multiple of 4 KiB */
	uint64_t offset;   /* into the IPC allocation */
	int32_t device;    /* CUDA device ordinal, as the target numbers it */
	uint32_t flags;    /* NKV_SHM_REG_READONLY: a Store source only */
	uint8_t handle[64]; /* cudaIpcMemHandle_t */
};
NKV_SIZE(struct nkv_shm_reg_cuda, 104);

/**
 * SET_KICK / SET_IRQ: bind the passed eventfd as the controller's doorbell kick, or as interrupt
 * vector @vector (0 .. max_queues; the admin CQ's is 0). Replies: -ENOTSUP (notifications off on this
 * target), -EINVAL (vector out of range, rsvd not zero, or the fd is not an eventfd), -EBADF (SET_IRQ
 * without an fd). The target sets the eventfd's file O_NONBLOCK.
 */
struct nkv_shm_bind {
	struct nkv_shm_hdr hdr;
	uint16_t vector;     /* SET_IRQ: the interrupt vector; SET_KICK: 0 */
	uint16_t rsvd0;
	uint32_t rsvd;
};
NKV_SIZE(struct nkv_shm_bind, 16);

/** The reply to every request. */
struct nkv_shm_reply {
	struct nkv_shm_hdr hdr;
	int32_t status;      /* 0 or -errno: -EACCES (host not allowed), -EINVAL (bad alignment or length),
			      * -EEXIST (overlaps a region), -ENOSPC (region count or total size limit),
			      * -EBUSY (deregistering a region in use), -ENOENT (no such region),
			      * -EPERM (the fd is not sealed against shrinking),
			      * -EUSERS (HELLO: the controller limit, in all or for this host NQN) */
	uint32_t reg_size;   /* HELLO: bytes of the register memfd sent with the reply */
	uint16_t cntlid;     /* HELLO: the controller's ID */
	uint16_t max_queues; /* HELLO: I/O queue pairs the controller may create */
	uint32_t max_regions;/* HELLO: registration limits */
	uint64_t max_reg_bytes;
};
NKV_SIZE(struct nkv_shm_reply, 32);

/*
 * Register page layout: BAR0 registers; at F00h (the command-set-specific range) the shm features
 * and the notification area's offset; doorbells at 1000h + (2y + {0,1}) * 4; then, on a 64-byte
 * boundary, the notification area:
 *   +0                 NEED_WAKEUP (uint32): 1 while the controller's poller may sleep (written by it)
 *   +64 + 4 * qid      ARM[qid] (uint32): 1 when the host waits for an interrupt from CQ qid (written
 *                      by the host; the controller exchanges it with 0 when it interrupts)
 * A target without notifications leaves NOTIFY clear; older targets leave F00h zero (the page
 * starts zeroed).
 */
#define NKV_SHM_DB_BASE 0x1000u
#define NKV_SHM_REG_FEAT 0xf00u      /* uint32: NKV_SHM_FEAT_* */
#define NKV_SHM_REG_NOTIFY 0xf04u    /* uint32: byte offset of the notification area */
#define NKV_SHM_FEAT_NOTIFY 0x1u     /* SET_KICK / SET_IRQ served, the notification area is there */
/* CQE DW1 of a successful Retrieve or Retrieve Range on an I/O queue holds the bytes moved, which a
 * host checks against the min(HBS, DW0 - offset) it derives (a PCIe CQE does not say otherwise) */
#define NKV_SHM_FEAT_XFER 0x2u
#define NKV_SHM_NOTIFY_WAKEUP 0u     /* NEED_WAKEUP, from the notification area's start */
#define NKV_SHM_NOTIFY_ARM 64u       /* ARM[0], from the notification area's start */

/** Offset of the notification area in a register page of @max_queues I/O queues. */
static inline NKV_HD uint32_t nkv_shm_notify_off(uint16_t max_queues)
{
	uint32_t db_end = NKV_SHM_DB_BASE + (2u * ((uint32_t)max_queues + 1u)) * 4u;
	return (db_end + 63u) & ~63u;
}

static inline NKV_HD uint32_t nkv_shm_reg_size(uint16_t max_queues)
{
	/* admin + I/O queues: two doorbells each, then the notification area; rounded up to a page */
	uint32_t end = nkv_shm_notify_off(max_queues) + NKV_SHM_NOTIFY_ARM + 4u * ((uint32_t)max_queues + 1u);
	return (end + 0xfffu) & ~0xfffu;
}

#endif /* NKV_SHM_H */
