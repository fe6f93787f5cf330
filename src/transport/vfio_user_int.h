/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user_int.h - internals of the vfio-user front (vfio_user.c: socket and messages;
 * vfio_user_pci.c: PCI config space and the MSI-X BAR; vfio_user_json.c: the VERSION capabilities).
 * Not an API.
 */
#ifndef NKV_VFIO_USER_INT_H
#define NKV_VFIO_USER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/vfio_user.h"

#define VFU_MAX_VEC 512u /* MSI-X vectors the BAR4 layout holds (NKV_VFU_MSIX_PBA / 16) */

/** A function's PCI state: config space with its writable bits, and the MSI-X table. */
struct vfu_pci {
	uint8_t cfg[NKV_VFU_CONFIG_SIZE];
	uint8_t wmask[256];      /* writable bits of the first 256 bytes (the rest is read-only zero) */
	uint8_t table[VFU_MAX_VEC * 16];
	uint16_t nvec;
	uint32_t bar0_size;
};

/** Config space of an NVMe function with a @bar0_size BAR0 (a power of two) and @nvec MSI-X vectors. */
void vfu_pci_init(struct vfu_pci *p, uint32_t bar0_size, uint16_t nvec);

/** Config space read/write of @n bytes at @off (the caller checked off + n <= NKV_VFU_CONFIG_SIZE).
 * Writes change only writable bits: BAR sizing (all ones) reads back the size mask. */
void vfu_pci_cfg_read(const struct vfu_pci *p, uint32_t off, uint32_t n, uint8_t *out);
void vfu_pci_cfg_write(struct vfu_pci *p, uint32_t off, uint32_t n, const uint8_t *in);

/** BAR4: the MSI-X table (read/write storage) and the PBA (@pend: a byte per vector, 1 = pending).
 * The caller checked off + n <= NKV_VFU_MSIX_BAR_SIZE. */
void vfu_pci_msix_read(const struct vfu_pci *p, const _Atomic uint8_t *pend, uint32_t off, uint32_t n, uint8_t *out);
void vfu_pci_msix_write(struct vfu_pci *p, uint32_t off, uint32_t n, const uint8_t *in);

/** What a VERSION proposal says (absent members keep the specification's defaults). */
struct vfu_caps {
	uint64_t max_msg_fds, max_data_xfer_size, max_dma_maps, pgsizes;
};

/** Parse the NUL-terminated JSON of a VERSION message (@len bytes, the NUL excluded) into @out.
 * @return 0, or -EINVAL (not JSON, not an object, a capability of the wrong type, nested too deep). */
int vfu_json_caps(const char *js, size_t len, struct vfu_caps *out);

#endif /* NKV_VFIO_USER_INT_H */
