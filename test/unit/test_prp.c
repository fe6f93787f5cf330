/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_prp.c - PRP1/PRP2/PRP list construction of libnkv's shm driver (docs/nvme-kv-wire.md B.5): empty
 * transfers, one page, page offsets, exactly two pages, lists, full list pages and chaining.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "client/prp.h"
#include "nkv/nkv_spec.h"

#define LIST_IOVA 0x7000000000ull
#define CAP 64u

static uint64_t g_list[CAP * NKV_PRP_PER_LIST];

/** Walk what a controller would: PRP1, then PRP2 or the list, following chain entries. Check every
 *  data page is the next one of [iova, iova + len). */
static void check_walk(uint64_t iova, uint32_t len, uint64_t prp1, uint64_t prp2, int used)
{
	uint32_t pages = (uint32_t)(((iova & 0xfff) + len + 0xfff) >> 12);
	uint64_t page0 = iova & ~0xfffull;
	assert_int_equal(prp1, iova);
	if (pages == 1) {
		assert_int_equal(prp2, 0);
		assert_int_equal(used, 0);
		return;
	}
	if (pages == 2) {
		assert_int_equal(prp2, page0 + 4096);
		assert_int_equal(used, 0);
		return;
	}
	assert_int_equal(prp2, LIST_IOVA);
	uint64_t cur = prp2;
	uint32_t slot = 0, seen_pages = 1;
	for (uint32_t i = 1; i < pages; i++) {
		const uint64_t *lp = g_list + (cur - LIST_IOVA) / 8;
		if (slot == NKV_PRP_PER_LIST - 1 && i < pages - 1) {
			uint64_t next = nkv_get64(&lp[slot]);
			assert_int_equal(next & 0xfff, 0);
			assert_int_equal(next, cur + 4096); /* list pages are consecutive here */
			cur = next;
			slot = 0;
			seen_pages++;
			lp = g_list + (cur - LIST_IOVA) / 8;
		}
		assert_int_equal(nkv_get64(&lp[slot]), page0 + (uint64_t)i * 4096);
		slot++;
	}
	assert_int_equal(seen_pages, (uint32_t)used);
}

static int build(uint64_t iova, uint32_t len, uint64_t *p1, uint64_t *p2)
{
	return nkv_prp_build(iova, len, LIST_IOVA, g_list, CAP, p1, p2);
}

static void t_zero(void **st)
{
	(void)st;
	uint64_t p1 = 1, p2 = 1;
	assert_int_equal(build(0x10000, 0, &p1, &p2), 0);
	assert_int_equal(p1, 0);
	assert_int_equal(p2, 0);
	assert_int_equal(nkv_prp_list_pages(0x10000, 0), 0);
}

static void t_one_page(void **st)
{
	(void)st;
	uint64_t p1, p2;
	assert_int_equal(build(0x10000, 1, &p1, &p2), 0);
	check_walk(0x10000, 1, p1, p2, 0);
	assert_int_equal(build(0x10000, 4096, &p1, &p2), 0);
	check_walk(0x10000, 4096, p1, p2, 0);
	/* offset within the page, ending exactly at its end */
	assert_int_equal(build(0x10100, 4096 - 0x100, &p1, &p2), 0);
	assert_int_equal(p1, 0x10100);
	assert_int_equal(p2, 0);
}

static void t_two_pages(void **st)
{
	(void)st;
	uint64_t p1, p2;
	assert_int_equal(build(0x10000, 8192, &p1, &p2), 0);
	assert_int_equal(p2, 0x11000);
	assert_int_equal(build(0x10000, 4097, &p1, &p2), 0);
	assert_int_equal(p2, 0x11000);
	/* 4 KiB at an offset spans two pages: PRP2 is the second page, offset 0 */
	assert_int_equal(build(0x10ffc, 4096, &p1, &p2), 0);
	assert_int_equal(p1, 0x10ffc);
	assert_int_equal(p2, 0x11000);
	/* 8 KiB at an offset needs three pages: a list */
	assert_int_equal(build(0x10800, 8192, &p1, &p2), 1);
	check_walk(0x10800, 8192, p1, p2, 1);
}

static void t_lists(void **st)
{
	(void)st;
	uint64_t p1, p2;
	/* 2 MiB aligned: PRP1 + 511 entries, one list page, no chain */
	assert_int_equal(nkv_prp_list_pages(0x200000, 2u << 20), 1);
	assert_int_equal(build(0x200000, 2u << 20, &p1, &p2), 1);
	check_walk(0x200000, 2u << 20, p1, p2, 1);
	/* 2 MiB + 4 KiB: 512 entries fill the list page exactly (the last one is data, not a chain) */
	assert_int_equal(build(0x200000, (2u << 20) + 4096, &p1, &p2), 1);
	check_walk(0x200000, (2u << 20) + 4096, p1, p2, 1);
	assert_int_equal(nkv_get64(&g_list[511]), 0x200000 + 512ull * 4096);
	/* 2 MiB at a page offset: 513 pages, 512 list entries, still one page */
	assert_int_equal(build(0x200200, 2u << 20, &p1, &p2), 1);
	check_walk(0x200200, 2u << 20, p1, p2, 1);
	/* 2 MiB + 8 KiB: 513 entries: 511 + chain, then 2 on the second list page */
	assert_int_equal(nkv_prp_list_pages(0x200000, (2u << 20) + 8192), 2);
	assert_int_equal(build(0x200000, (2u << 20) + 8192, &p1, &p2), 2);
	check_walk(0x200000, (2u << 20) + 8192, p1, p2, 2);
	assert_int_equal(nkv_get64(&g_list[511]), LIST_IOVA + 4096);
	/* 4 MiB: 1023 entries = 511 + 512 exactly: two pages */
	assert_int_equal(build(0x400000, 4u << 20, &p1, &p2), 2);
	check_walk(0x400000, 4u << 20, p1, p2, 2);
	/* 8 MiB at an offset (2049 pages, 2048 entries): 511 * 4 + 4 -> 5 list pages */
	assert_int_equal(build(0x400010, 8u << 20, &p1, &p2), 5);
	check_walk(0x400010, 8u << 20, p1, p2, 5);
	/* 64 MiB: 16383 entries -> 1 + ceil((16383 - 512) / 511) = 33 list pages */
	assert_int_equal(nkv_prp_list_pages(0x4000000, 64u << 20), 33);
	assert_int_equal(build(0x4000000, 64u << 20, &p1, &p2), 33);
	check_walk(0x4000000, 64u << 20, p1, p2, 33);
}

static void t_errors(void **st)
{
	(void)st;
	uint64_t p1, p2;
	assert_int_equal(build(0x10002, 16, &p1, &p2), -EINVAL); /* PRP1 not dword aligned */
	assert_int_equal(nkv_prp_build(0x10000, 3 * 4096, LIST_IOVA + 8, g_list, CAP, &p1, &p2), -EINVAL);
	assert_int_equal(nkv_prp_build(0x10000, 1u << 30, LIST_IOVA, g_list, CAP, &p1, &p2), -ENOSPC);
	assert_int_equal(nkv_prp_build(0x10000, 3 * 4096, LIST_IOVA, g_list, 0, &p1, &p2), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_zero),    cmocka_unit_test(t_one_page), cmocka_unit_test(t_two_pages),
		cmocka_unit_test(t_lists),   cmocka_unit_test(t_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
