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
 * missed. Create I/O CQ accepts IEN but never interrupts: hosts poll the phase bit.
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

/** Register page layout: BAR0 registers, then doorbells at 1000h + (2y + {0,1}) * 4. */
#define NKV_SHM_DB_BASE 0x1000u
static inline NKV_HD uint32_t nkv_shm_reg_size(uint16_t max_queues)
{
	/* admin + I/O queues, two doorbells each, rounded up to a page */
	uint32_t end = NKV_SHM_DB_BASE + (2u * ((uint32_t)max_queues + 1u)) * 4u;
	return (end + 0xfffu) & ~0xfffu;
}

#endif /* NKV_SHM_H */
