/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prp.h - PRP (Physical Region Page) data pointers for the shm transport (docs/nvme-kv-wire.md B.5), with
 * 4 KiB memory pages (CC.MPS 0). Pure functions over IOVAs: unit-tested in test/unit/test_prp.c.
 */
#ifndef NKV_CLIENT_PRP_H
#define NKV_CLIENT_PRP_H

#include <stdint.h>

#define NKV_PRP_PAGE 4096u
#define NKV_PRP_PER_LIST (NKV_PRP_PAGE / 8u) /* 8-byte entries per list page */

/** List pages needed for @len bytes at IOVA @iova: 0 when PRP1 (and PRP2) suffice. */
uint32_t nkv_prp_list_pages(uint64_t iova, uint32_t len);

/**
 * Build the data pointer of a transfer of @len bytes at IOVA @iova.
 * - @len 0: PRP1 = PRP2 = 0.
 * - PRP1 = @iova (it may carry a page offset; it must be dword aligned).
 * - If the transfer ends in the page after PRP1's, PRP2 is that page (offset 0); if it ends in
 *   PRP1's page, PRP2 = 0.
 * - Otherwise PRP2 = @list_iova and @list (the host's view of the list memory at @list_iova, page
 *   aligned, @list_cap pages of NKV_PRP_PER_LIST entries) holds the remaining pages in order; when
 *   more entries remain than fit, the last entry of a full list page points to the next list page
 *   (@list_iova + 4096 * n), so every list page but the last carries 511 data pages.
 * @return list pages used (>= 0), -EINVAL (@iova not dword aligned, or a list is needed and
 * @list_iova is not page aligned), -ENOSPC (more than @list_cap list pages needed).
 */
int nkv_prp_build(uint64_t iova, uint32_t len, uint64_t list_iova, uint64_t *list, uint32_t list_cap,
		  uint64_t *prp1, uint64_t *prp2);

#endif
