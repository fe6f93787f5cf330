/* SPDX-License-Identifier: Apache-2.0 */
/* prp.c - PRP1/PRP2/PRP list construction (docs/nvme-kv-wire.md B.5); see prp.h. */
#include "client/prp.h"

#include <errno.h>

#include "nkv/nkv_dev.h"

static uint32_t list_entries(uint64_t iova, uint32_t len)
{
	uint32_t pages = nkv_prp_pages(iova, len);
	return pages > 2 ? pages - 1 : 0; /* PRP1 covers the first page; the list the rest */
}

uint32_t nkv_prp_list_pages(uint64_t iova, uint32_t len)
{
	uint32_t n = list_entries(iova, len);
	if (n == 0)
		return 0;
	if (n <= NKV_PRP_PER_LIST)
		return 1;
	/* every page but the last gives up its last entry to the chain pointer */
	return 1 + (n - NKV_PRP_PER_LIST + (NKV_PRP_PER_LIST - 1) - 1) / (NKV_PRP_PER_LIST - 1);
}

int nkv_prp_build(uint64_t iova, uint32_t len, uint64_t list_iova, uint64_t *list, uint32_t list_cap,
		  uint64_t *prp1, uint64_t *prp2)
{
	*prp1 = *prp2 = 0;
	if (len == 0)
		return 0;
	if (iova & 3u)
		return -EINVAL;
	uint32_t pages = nkv_prp_pages(iova, len);
	uint64_t page0 = iova & ~(uint64_t)(NKV_PRP_PAGE - 1);
	*prp1 = iova;
	if (pages == 1)
		return 0;
	if (pages == 2) {
		*prp2 = page0 + NKV_PRP_PAGE;
		return 0;
	}
	uint32_t need = nkv_prp_list_pages(iova, len);
	if (list_iova & (NKV_PRP_PAGE - 1))
		return -EINVAL;
	if (need > list_cap)
		return -ENOSPC;
	uint32_t n = pages - 1, slot = 0, lp = 0;
	for (uint32_t i = 1; i <= n; i++) {
		if (slot == NKV_PRP_PER_LIST - 1 && i < n) {
			/* last entry of a full page, more to come: chain to the next list page */
			lp++;
			nkv_put64(&list[(uint64_t)(lp - 1) * NKV_PRP_PER_LIST + slot], list_iova + (uint64_t)lp * NKV_PRP_PAGE);
			slot = 0;
		}
		nkv_put64(&list[(uint64_t)lp * NKV_PRP_PER_LIST + slot], page0 + (uint64_t)i * NKV_PRP_PAGE);
		slot++;
	}
	*prp2 = list_iova;
	return (int)need;
}
