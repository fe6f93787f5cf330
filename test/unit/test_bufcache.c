/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_bufcache.c - the reactors' large-buffer cache (src/common/bufcache.h): size classes, reuse of
 * the same buffer, the byte cap, idle trimming, and that small and huge requests bypass it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/bufcache.h"

#define K 1024u
#define M (1024u * 1024u)

static size_t got(struct nkv_bufcache *bc, size_t need, void **p)
{
	size_t cap = 0;
	*p = nkv_bufcache_get(bc, need, &cap);
	assert_non_null(*p);
	assert_true(cap >= need);
	memset(*p, 0xa5, need); /* the whole of it is usable (ASan checks) */
	return cap;
}

static void t_classes(void **state)
{
	(void)state;
	struct nkv_bufcache bc;
	void *p;
	nkv_bufcache_init(&bc, 1ull << 32, 1000);
	/* Small requests are exact and never cached. */
	assert_int_equal(got(&bc, 4 * K, &p), 4 * K);
	nkv_bufcache_put(&bc, p, 4 * K, 0);
	assert_int_equal(bc.held, 0);
	assert_int_equal(got(&bc, 64 * K, &p), 64 * K);
	nkv_bufcache_put(&bc, p, 64 * K, 0);
	assert_int_equal(bc.held, 0);
	/* Above 64 KiB: 2^n x {5,6,7,8}/4, at most 25 % over. */
	static const size_t cases[][2] = {
		{64 * K + 1, 80 * K}, {80 * K, 80 * K}, {80 * K + 1, 96 * K}, {128 * K, 128 * K},
		{128 * K + 1, 160 * K}, {256 * K, 256 * K}, {4 * M, 4 * M}, {4 * M + 1, 5 * M},
		{32 * M, 32 * M}, {33 * M, 40 * M}, {1024 * M, 1024 * M},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t cap = got(&bc, cases[i][0], &p);
		assert_int_equal(cap, cases[i][1]);
		assert_true(cap - cases[i][0] <= cases[i][0] / 4);
		nkv_bufcache_put(&bc, p, cap, 0);
		assert_int_equal(bc.held, cap);
		nkv_bufcache_fini(&bc);
		assert_int_equal(bc.held, 0);
	}
	/* Past 1 GiB: exact, not cached. */
	size_t cap = 0;
	p = nkv_bufcache_get(&bc, 1024 * M + 1, &cap);
	if (p) { /* may not fit this machine's memory limits */
		assert_int_equal(cap, 1024 * M + 1);
		nkv_bufcache_put(&bc, p, cap, 0);
		assert_int_equal(bc.held, 0);
	}
}

static void t_reuse(void **state)
{
	(void)state;
	struct nkv_bufcache bc;
	void *a, *b, *c;
	nkv_bufcache_init(&bc, 16 * M, 1000);
	size_t ca = got(&bc, 256 * K, &a);
	assert_int_equal(bc.misses, 1);
	nkv_bufcache_put(&bc, a, ca, 10);
	/* The same class gets the same buffer back, newest first. */
	got(&bc, 240 * K, &b); /* 240 KiB rounds up to the 256 KiB class */
	assert_ptr_equal(a, b);
	assert_int_equal(bc.hits, 1);
	assert_int_equal(bc.held, 0);
	/* Another class does not take it. */
	nkv_bufcache_put(&bc, b, ca, 10);
	size_t cc = got(&bc, 4 * M, &c);
	assert_int_equal(bc.misses, 2);
	assert_int_equal(bc.held, ca);
	nkv_bufcache_put(&bc, c, cc, 10);
	assert_int_equal(bc.held, ca + cc);
	/* A buffer whose size is not a class size (an exact large malloc) is freed, not kept. */
	void *odd = malloc(100 * K);
	nkv_bufcache_put(&bc, odd, 100 * K, 10);
	assert_int_equal(bc.held, ca + cc);
	nkv_bufcache_put(&bc, NULL, 256 * K, 10);
	assert_int_equal(bc.held, ca + cc);
	nkv_bufcache_fini(&bc);
	assert_int_equal(bc.held, 0);
}

static void t_cap(void **state)
{
	(void)state;
	struct nkv_bufcache bc;
	void *p[5];
	size_t cap[5];
	nkv_bufcache_init(&bc, 1 * M, 1000);
	for (int i = 0; i < 5; i++)
		cap[i] = got(&bc, 256 * K, &p[i]);
	for (int i = 0; i < 5; i++)
		nkv_bufcache_put(&bc, p[i], cap[i], 0);
	assert_int_equal(bc.held, 1 * M); /* four kept, the fifth freed */
	nkv_bufcache_fini(&bc);
	/* A cap of 0 caches nothing. */
	nkv_bufcache_init(&bc, 0, 1000);
	cap[0] = got(&bc, 256 * K, &p[0]);
	nkv_bufcache_put(&bc, p[0], cap[0], 0);
	assert_int_equal(bc.held, 0);
}

static void t_trim(void **state)
{
	(void)state;
	struct nkv_bufcache bc;
	void *p[4];
	size_t cap[4];
	nkv_bufcache_init(&bc, 64 * M, 1000);
	for (int i = 0; i < 4; i++)
		cap[i] = got(&bc, 1 * M, &p[i]);
	/* Given back at 0, 0, 500 and 900 ms. */
	nkv_bufcache_put(&bc, p[0], cap[0], 0);
	nkv_bufcache_put(&bc, p[1], cap[1], 0);
	nkv_bufcache_put(&bc, p[2], cap[2], 500);
	nkv_bufcache_put(&bc, p[3], cap[3], 900);
	nkv_bufcache_trim(&bc, 999);
	assert_int_equal(bc.held, 4 * M);
	nkv_bufcache_trim(&bc, 1000); /* the two from 0 ms */
	assert_int_equal(bc.held, 2 * M);
	nkv_bufcache_trim(&bc, 1600); /* the one from 500 ms */
	assert_int_equal(bc.held, 1 * M);
	void *q;
	got(&bc, 1 * M, &q); /* the newest is still there */
	assert_ptr_equal(q, p[3]);
	nkv_bufcache_put(&bc, q, cap[3], 5000);
	nkv_bufcache_trim(&bc, 5999);
	assert_int_equal(bc.held, 1 * M);
	nkv_bufcache_trim(&bc, 6000);
	assert_int_equal(bc.held, 0);
	nkv_bufcache_fini(&bc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_classes),
		cmocka_unit_test(t_reuse),
		cmocka_unit_test(t_cap),
		cmocka_unit_test(t_trim),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
