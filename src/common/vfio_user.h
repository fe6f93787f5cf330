/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user.h - the vfio-user protocol's wire structures and constants, shared by the target's
 * vfio-user server (src/transport/vfio_user*.c) and libnkv's vfio-user host driver.
 *
 * Written from QEMU's specification, docs/interop/vfio-user.rst (checked against QEMU 10.1, where
 * the client is hw/vfio-user/; protocol version 0.0), and the VFIO structures of Linux's
 * include/uapi/linux/vfio.h that the specification reuses (region info, capability chain, sparse
 * mmap areas, IRQ info and IRQ set).
 *
 * A connection is a SOCK_STREAM Unix socket; file descriptors travel as SCM_RIGHTS ancillary data
 * on the first byte of the message that carries them. Every message starts with struct
 * nkv_vfu_hdr; msg_size counts the header and everything after it. A command is answered by one
 * reply with the same msg_id and command, unless it has NKV_VFU_F_NO_REPLY; an error reply is the
 * header alone with NKV_VFU_F_ERROR and a positive errno in @error.
 *
 * The specification says "the endianness of the host system"; every structure here is written in
 * fixed-width fields at natural alignment (no packing, no bitfields) and the sizes are pinned, and
 * both peers run on the same little-endian host. Sizes in comments are payload sizes (after the
 * 16-byte header) where the specification gives them so.
 *
 * Not target-only: nothing here depends on the controller; the NVMe device's layout over these
 * regions (which BAR holds what) is at the end, under "rados-nkv's device".
 */
#ifndef NKV_VFIO_USER_H
#define NKV_VFIO_USER_H

#include <stdint.h>

#include "nkv/nkv_spec.h"

#define NKV_VFU_MAJOR 0u /* the only version the specification defines */
#define NKV_VFU_MINOR 0u

enum nkv_vfu_cmd {
	NKV_VFU_VERSION = 1,
	NKV_VFU_DMA_MAP = 2,
	NKV_VFU_DMA_UNMAP = 3,
	NKV_VFU_DEVICE_GET_INFO = 4,
	NKV_VFU_DEVICE_GET_REGION_INFO = 5,
	NKV_VFU_DEVICE_GET_REGION_IO_FDS = 6,
	NKV_VFU_DEVICE_GET_IRQ_INFO = 7,
	NKV_VFU_DEVICE_SET_IRQS = 8,
	NKV_VFU_REGION_READ = 9,
	NKV_VFU_REGION_WRITE = 10,
	NKV_VFU_DMA_READ = 11,   /* server -> client */
	NKV_VFU_DMA_WRITE = 12,  /* server -> client */
	NKV_VFU_DEVICE_RESET = 13,
	NKV_VFU_REGION_WRITE_MULTI = 15,
	NKV_VFU_DEVICE_FEATURE = 16,
	NKV_VFU_MIG_DATA_READ = 17,
	NKV_VFU_MIG_DATA_WRITE = 18,
};

/* nkv_vfu_hdr.flags */
#define NKV_VFU_F_TYPE_MASK 0xfu
#define NKV_VFU_F_COMMAND 0x0u
#define NKV_VFU_F_REPLY 0x1u
#define NKV_VFU_F_NO_REPLY 0x10u
#define NKV_VFU_F_ERROR 0x20u

/** Every message, command or reply, starts with this. */
struct nkv_vfu_hdr {
	uint16_t msg_id;   /* chosen by the sender of a command, echoed in its reply */
	uint16_t cmd;      /* enum nkv_vfu_cmd, also in the reply */
	uint32_t msg_size; /* the whole message, this header included */
	uint32_t flags;    /* NKV_VFU_F_* */
	uint32_t error;    /* reply with NKV_VFU_F_ERROR: an errno (positive); 0 in commands */
};
NKV_SIZE(struct nkv_vfu_hdr, 16);

/**
 * VERSION, both directions: then an optional NUL-terminated UTF-8 JSON object,
 *   {"capabilities":{"max_msg_fds":N,"max_data_xfer_size":N,"max_dma_maps":N,"pgsizes":N,
 *                    "migration":{...},"twin_socket":{...},"write_multiple":bool}}
 * every member optional (defaults: 1 fd, 1 MiB, 65535 maps, 4 KiB pages). The reply's major is the
 * proposed one, its minor at most the proposed one, its capabilities a subset of the proposal.
 */
struct nkv_vfu_version {
	struct nkv_vfu_hdr hdr;
	uint16_t major;
	uint16_t minor;
	/* char json[]; NUL-terminated, up to msg_size */
};
NKV_SIZE(struct nkv_vfu_version, 20);

#define NKV_VFU_DEF_MAX_FDS 1u
#define NKV_VFU_DEF_MAX_XFER (1u << 20)
#define NKV_VFU_DEF_MAX_DMA_MAPS 65535u
#define NKV_VFU_DEF_PGSIZES 4096u

/** DMA_MAP: payload 32 bytes; one fd when the server may mmap the region (none: not mappable). */
struct nkv_vfu_dma_map {
	struct nkv_vfu_hdr hdr;
	uint32_t argsz;    /* 32 */
	uint32_t flags;    /* NKV_VFU_DMA_READ_OK | NKV_VFU_DMA_WRITE_OK */
	uint64_t offset;   /* into the fd */
	uint64_t addr;     /* the DMA address (IOVA) the device uses */
	uint64_t size;
};
NKV_SIZE(struct nkv_vfu_dma_map, 48);
#define NKV_VFU_DMA_READ_OK 0x1u  /* the device may read the region */
#define NKV_VFU_DMA_WRITE_OK 0x2u /* the device may write it */

/**
 * DMA_UNMAP: payload 24 bytes; @addr and @size match one earlier DMA_MAP exactly, or with
 * NKV_VFU_UNMAP_ALL (Linux's VFIO_DMA_UNMAP_FLAG_ALL, which QEMU sends) both are 0 and every
 * region goes. The reply repeats the request's payload.
 */
struct nkv_vfu_dma_unmap {
	struct nkv_vfu_hdr hdr;
	uint32_t argsz;
	uint32_t flags;
	uint64_t addr;
	uint64_t size;
};
NKV_SIZE(struct nkv_vfu_dma_unmap, 40);
#define NKV_VFU_UNMAP_DIRTY_BITMAP 0x1u /* VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP: not supported */
#define NKV_VFU_UNMAP_ALL 0x2u

/** DEVICE_GET_INFO: the same 16-byte payload both ways (the request's fields but argsz are 0). */
struct nkv_vfu_device_info {
	struct nkv_vfu_hdr hdr;
	uint32_t argsz;
	uint32_t flags;    /* NKV_VFU_DEV_* */
	uint32_t num_regions;
	uint32_t num_irqs;
};
NKV_SIZE(struct nkv_vfu_device_info, 32);
#define NKV_VFU_DEV_RESET 0x1u /* VFIO_DEVICE_FLAGS_RESET: DEVICE_RESET is served */
#define NKV_VFU_DEV_PCI 0x2u   /* VFIO_DEVICE_FLAGS_PCI */

/**
 * DEVICE_GET_REGION_INFO: struct vfio_region_info, 32 bytes, then (reply) capabilities from
 * @cap_offset, which counts from @argsz (the payload's start). A reply's argsz is the size the full
 * answer needs; when the request's argsz was smaller, the capabilities are left out and so is
 * NKV_VFU_REGION_CAPS (ask again with the argsz the reply names). A region
 * with NKV_VFU_REGION_MMAP comes with one fd, to mmap at @offset (plus an area's offset).
 */
struct nkv_vfu_region_info {
	struct nkv_vfu_hdr hdr;
	uint32_t argsz;
	uint32_t flags;    /* NKV_VFU_REGION_* */
	uint32_t index;    /* NKV_VFU_PCI_* */
	uint32_t cap_offset;
	uint64_t size;
	uint64_t offset;
};
NKV_SIZE(struct nkv_vfu_region_info, 48);
#define NKV_VFU_REGION_INFO_PAYLOAD 32u
#define NKV_VFU_REGION_READ_OK 0x1u
#define NKV_VFU_REGION_WRITE_OK 0x2u
#define NKV_VFU_REGION_MMAP 0x4u
#define NKV_VFU_REGION_CAPS 0x8u

/** A region capability's header (struct vfio_info_cap_header); @next counts from argsz, 0 ends. */
struct nkv_vfu_cap_hdr {
	uint16_t id;
	uint16_t version;
	uint32_t next;
};
NKV_SIZE(struct nkv_vfu_cap_hdr, 8);
#define NKV_VFU_CAP_SPARSE_MMAP 1u /* VFIO_REGION_INFO_CAP_SPARSE_MMAP, version 1 */
#define NKV_VFU_CAP_TYPE 2u        /* VFIO_REGION_INFO_CAP_TYPE */

/** VFIO_REGION_INFO_CAP_SPARSE_MMAP: @nr_areas struct nkv_vfu_sparse_area follow. */
struct nkv_vfu_sparse_mmap {
	struct nkv_vfu_cap_hdr hdr;
	uint32_t nr_areas;
	uint32_t rsvd;
};
NKV_SIZE(struct nkv_vfu_sparse_mmap, 16);

struct nkv_vfu_sparse_area {
	uint64_t offset;   /* from the region's start (and from its mmap offset) */
	uint64_t size;
};
NKV_SIZE(struct nkv_vfu_sparse_area, 16);

/** DEVICE_GET_IRQ_INFO: struct vfio_irq_info, 16 bytes both ways. */
struct nkv_vfu_irq_info {
	struct nkv_vfu_hdr hdr;
	uint32_t argsz;
	uint32_t flags;    /* NKV_VFU_IRQ_INFO_* */
	uint32_t index;    /* NKV_VFU_PCI_*_IRQ */
	uint32_t count;
};
NKV_SIZE(struct nkv_vfu_irq_info, 32);
#define NKV_VFU_IRQ_INFO_EVENTFD 0x1u
#define NKV_VFU_IRQ_INFO_MASKABLE 0x2u
#define NKV_VFU_IRQ_INFO_AUTOMASKED 0x4u
#define NKV_VFU_IRQ_INFO_NORESIZE 0x8u

/**
 * DEVICE_SET_IRQS: struct vfio_irq_set, 20 bytes, then (DATA_BOOL) @count bytes; with DATA_EVENTFD
 * @count fds travel with it (none: unbind those vectors). DATA_NONE with @start = @count = 0 turns
 * off every vector of @index. No reply payload.
 */
struct nkv_vfu_irq_set {
	struct nkv_vfu_hdr hdr;
	uint32_t argsz;
	uint32_t flags;    /* one NKV_VFU_IRQ_SET_DATA_* | one NKV_VFU_IRQ_SET_ACTION_* */
	uint32_t index;
	uint32_t start;
	uint32_t count;
};
NKV_SIZE(struct nkv_vfu_irq_set, 36);
#define NKV_VFU_IRQ_SET_DATA_NONE 0x1u
#define NKV_VFU_IRQ_SET_DATA_BOOL 0x2u
#define NKV_VFU_IRQ_SET_DATA_EVENTFD 0x4u
#define NKV_VFU_IRQ_SET_DATA_MASK 0x7u
#define NKV_VFU_IRQ_SET_ACTION_MASK 0x8u
#define NKV_VFU_IRQ_SET_ACTION_UNMASK 0x10u
#define NKV_VFU_IRQ_SET_ACTION_TRIGGER 0x20u
#define NKV_VFU_IRQ_SET_ACTION_MASK_ALL 0x38u

/** REGION_READ / REGION_WRITE: 16 bytes, then @count data bytes (the write's request, the read's
 * reply); a write's reply is the 16 bytes alone. */
struct nkv_vfu_region_rw {
	struct nkv_vfu_hdr hdr;
	uint64_t offset;
	uint32_t region;
	uint32_t count;
};
NKV_SIZE(struct nkv_vfu_region_rw, 32);

/** DMA_READ / DMA_WRITE (server -> client, for regions mapped without an fd): 16 bytes, then data. */
struct nkv_vfu_dma_rw {
	struct nkv_vfu_hdr hdr;
	uint64_t addr;
	uint64_t count;
};
NKV_SIZE(struct nkv_vfu_dma_rw, 32);

/* Region indexes of a PCI device (VFIO_PCI_*_REGION_INDEX) and its IRQ indexes (VFIO_PCI_*_IRQ_INDEX). */
enum nkv_vfu_pci_region {
	NKV_VFU_PCI_BAR0 = 0,
	NKV_VFU_PCI_BAR1, NKV_VFU_PCI_BAR2, NKV_VFU_PCI_BAR3, NKV_VFU_PCI_BAR4, NKV_VFU_PCI_BAR5,
	NKV_VFU_PCI_ROM = 6,
	NKV_VFU_PCI_CONFIG = 7,
	NKV_VFU_PCI_VGA = 8,
	NKV_VFU_PCI_NUM_REGIONS = 9,
};
enum nkv_vfu_pci_irq {
	NKV_VFU_PCI_INTX_IRQ = 0,
	NKV_VFU_PCI_MSI_IRQ = 1,
	NKV_VFU_PCI_MSIX_IRQ = 2,
	NKV_VFU_PCI_ERR_IRQ = 3,
	NKV_VFU_PCI_REQ_IRQ = 4,
	NKV_VFU_PCI_NUM_IRQS = 5,
};

/* ---- rados-nkv's device --------------------------------------------------------------------------
 * One socket is one NVMe controller, a PCI function with:
 *  - config space (region 7, 4 KiB: 256 bytes of PCI config and the PCIe extended space, all zero
 *    past the capabilities): class code 010802h (NVMe I/O controller), BAR0 64-bit
 *    non-prefetchable memory, capabilities power management, MSI-X and PCI Express;
 *  - BAR0 (region 0): the controller's register page as in nkv_shm.h (CAP 00h ... doorbells from
 *    1000h, DSTRD 0, the shm feature words at F00h), mmappable as one sparse area over the whole
 *    page; the BAR is that page's size rounded up to a power of two, past the page reads 0;
 *  - BAR4 (region 4): the MSI-X table at 0 and its PBA at NKV_VFU_MSIX_PBA, through REGION_READ and
 *    REGION_WRITE only (vectors are delivered by SET_IRQS eventfds; a masked vector is held back);
 *  - MSI-X vectors 0 .. max_queues (one per CQ the host may create, the admin CQ's is 0).
 * Interrupts: a CQ created with IEN interrupts after every batch of CQEs the controller posts to it
 * (at most once per poller pass and vector), as a PCIe device does. A host that sets
 * NKV_VFU_HOSTFEAT_ARM in the register at NKV_VFU_REG_HOSTFEAT before CC.EN = 1 instead gets the
 * shm transport's ARM-word scheme (nkv_shm.h: an interrupt only for a CQ whose ARM word is 1).
 */
#define NKV_VFU_PCI_VENDOR 0x4e4bu   /* not a PCI-SIG assigned ID: drivers bind by class code */
#define NKV_VFU_PCI_DEVICE 0x0001u
#define NKV_VFU_PCI_CLASS 0x010802u
#define NKV_VFU_CONFIG_SIZE 4096u
#define NKV_VFU_MSIX_BAR 4u
#define NKV_VFU_MSIX_PBA 0x2000u     /* the PBA's offset in BAR4 (the table: up to 512 vectors) */
#define NKV_VFU_MSIX_BAR_SIZE 0x4000u
#define NKV_VFU_REG_HOSTFEAT 0xf08u  /* BAR0 uint32, written by the host: NKV_VFU_HOSTFEAT_* */
#define NKV_VFU_HOSTFEAT_ARM 0x1u    /* interrupt a CQ only when its ARM word is set (nkv_shm.h) */
/* The vfio-user socket of a controller is the configured path itself (QEMU's socket=PATH); SPDK's
 * host connects to DIR/cntrl for traddr DIR, so a path ending in "/cntrl" serves both. */
#define NKV_VFU_SPDK_SOCKET_NAME "cntrl"

#endif /* NKV_VFIO_USER_H */
