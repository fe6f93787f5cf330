/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user_pci.c - the PCI face of a vfio-user controller: its type 0 config space and the MSI-X
 * BAR. What Linux's nvme driver (drivers/nvme/host/pci.c: pci_enable_device_mem, a 64-bit memory
 * BAR0 of at least 8 KiB, pci_alloc_irq_vectors with MSI-X) and QEMU's vfio-user-pci (which reads
 * the capability chain and virtualizes the MSI-X capability and table itself) need:
 *   00h vendor/device, 04h command (memory space, bus master, INTx disable writable), 06h status
 *   (capability list), 08h class 010802h, 10h BAR0 64-bit non-prefetchable, 20h BAR4 32-bit (MSI-X),
 *   2Ch subsystem IDs, 34h capabilities at 40h, 3Dh no INTx pin;
 *   40h power management (version 3, D0 only, No_Soft_Reset), 50h MSI-X (table at BAR4 + 0, PBA at
 *   BAR4 + NKV_VFU_MSIX_PBA), 60h PCI Express v2 endpoint (x1, no FLR), 100h no extended capability.
 * Unwritable bits keep their value; BAR bits below the BAR's size read 0, so writing all ones
 * and reading back gives the size, as PCI BAR sizing expects.
 */
#include <string.h>

#include "nkv/nkv_spec.h"
#include "transport/vfio_user_int.h"

#define CAP_PM 0x40u
#define CAP_MSIX 0x50u
#define CAP_PCIE 0x60u

static void put16(struct vfu_pci *p, uint32_t off, uint16_t v) { nkv_put16(p->cfg + off, v); }
static void put32(struct vfu_pci *p, uint32_t off, uint32_t v) { nkv_put32(p->cfg + off, v); }
static void wm16(struct vfu_pci *p, uint32_t off, uint16_t v) { nkv_put16(p->wmask + off, v); }
static void wm32(struct vfu_pci *p, uint32_t off, uint32_t v) { nkv_put32(p->wmask + off, v); }

void vfu_pci_init(struct vfu_pci *p, uint32_t bar0_size, uint16_t nvec)
{
	memset(p, 0, sizeof(*p));
	p->nvec = nvec;
	p->bar0_size = bar0_size;
	put16(p, 0x00, NKV_VFU_PCI_VENDOR);
	put16(p, 0x02, NKV_VFU_PCI_DEVICE);
	put16(p, 0x06, 0x0010); /* status: capabilities list */
	put32(p, 0x08, NKV_VFU_PCI_CLASS << 8); /* revision 0 */
	put32(p, 0x10, 0x4);   /* BAR0: memory, 64-bit, not prefetchable; BAR1 its upper half */
	put32(p, 0x20, 0x0);   /* BAR4: memory, 32-bit */
	put16(p, 0x2c, NKV_VFU_PCI_VENDOR);
	put16(p, 0x2e, NKV_VFU_PCI_DEVICE);
	p->cfg[0x34] = CAP_PM;
	/* power management: version 3; PMCSR No_Soft_Reset (a D3hot -> D0 keeps the function's state) */
	p->cfg[CAP_PM] = 0x01;
	p->cfg[CAP_PM + 1] = CAP_MSIX;
	put16(p, CAP_PM + 2, 0x0003);
	put16(p, CAP_PM + 4, 0x0008);
	/* MSI-X: table size N - 1; table and PBA in BAR4 */
	p->cfg[CAP_MSIX] = 0x11;
	p->cfg[CAP_MSIX + 1] = CAP_PCIE;
	put16(p, CAP_MSIX + 2, (uint16_t)(nvec - 1));
	put32(p, CAP_MSIX + 4, 0 | NKV_VFU_MSIX_BAR);
	put32(p, CAP_MSIX + 8, NKV_VFU_MSIX_PBA | NKV_VFU_MSIX_BAR);
	/* PCI Express: capability version 2, endpoint; device caps: 128-byte payload, no FLR; link x1 */
	p->cfg[CAP_PCIE] = 0x10;
	p->cfg[CAP_PCIE + 1] = 0x00;
	put16(p, CAP_PCIE + 2, 0x0002);
	put32(p, CAP_PCIE + 4, 0x00000000);
	put32(p, CAP_PCIE + 0x0c, 0x00000011); /* link caps: 2.5 GT/s, x1 */
	put16(p, CAP_PCIE + 0x12, 0x0011);     /* link status: 2.5 GT/s, x1 */

	wm16(p, 0x04, 0x0547); /* I/O, memory, bus master, parity, SERR, INTx disable */
	p->wmask[0x0c] = 0xff; /* cache line size */
	p->wmask[0x0d] = 0xff; /* latency timer */
	wm32(p, 0x10, ~(bar0_size - 1u) & ~0xfu);
	wm32(p, 0x14, 0xffffffffu);
	wm32(p, 0x20, ~(NKV_VFU_MSIX_BAR_SIZE - 1u) & ~0xfu);
	p->wmask[0x3c] = 0xff; /* interrupt line */
	wm16(p, CAP_PM + 4, 0x0003);     /* power state */
	wm16(p, CAP_MSIX + 2, 0xc000);   /* MSI-X enable, function mask */
	wm16(p, CAP_PCIE + 8, 0x7fff);   /* device control (not Initiate FLR) */
	wm16(p, CAP_PCIE + 0x10, 0x0fff); /* link control */
	wm16(p, CAP_PCIE + 0x28, 0xffff); /* device control 2 */
	/* MSI-X table entries start masked (PCI: vector control bit 0 set at reset) */
	for (uint16_t v = 0; v < nvec; v++)
		nkv_put32(p->table + v * 16u + 12, 1);
}

void vfu_pci_cfg_read(const struct vfu_pci *p, uint32_t off, uint32_t n, uint8_t *out)
{
	memcpy(out, p->cfg + off, n);
}

void vfu_pci_cfg_write(struct vfu_pci *p, uint32_t off, uint32_t n, const uint8_t *in)
{
	for (uint32_t i = 0; i < n && off + i < sizeof(p->wmask); i++) {
		uint8_t m = p->wmask[off + i];
		p->cfg[off + i] = (uint8_t)((p->cfg[off + i] & ~m) | (in[i] & m));
	}
}

void vfu_pci_msix_read(const struct vfu_pci *p, const _Atomic uint8_t *pend, uint32_t off, uint32_t n, uint8_t *out)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t o = off + i;
		if (o < (uint32_t)p->nvec * 16u) {
			out[i] = p->table[o];
		} else if (o >= NKV_VFU_MSIX_PBA && o < NKV_VFU_MSIX_PBA + ((uint32_t)p->nvec + 7u) / 8u) {
			uint8_t b = 0;
			for (uint32_t v = (o - NKV_VFU_MSIX_PBA) * 8u, k = 0; k < 8 && v + k < p->nvec; k++)
				b |= (uint8_t)((pend && pend[v + k] ? 1u : 0u) << k);
			out[i] = b;
		} else {
			out[i] = 0;
		}
	}
}

void vfu_pci_msix_write(struct vfu_pci *p, uint32_t off, uint32_t n, const uint8_t *in)
{
	for (uint32_t i = 0; i < n; i++) /* the PBA and the space past the table are read-only */
		if (off + i < (uint32_t)p->nvec * 16u)
			p->table[off + i] = in[i];
}
