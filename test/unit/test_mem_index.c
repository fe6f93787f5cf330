/* SPDX-License-Identifier: Apache-2.0 */
/* test_mem_index.c - the mem backend's hash index against a model: inserts, finds, backward-shift removes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/mem_index.h"

#define NKEYS 3000

static struct nkv_key g_keys[NKEYS];
static bool g_in[NKEYS];

/* Keys alike on purpose: a shared prefix, lengths 4..16 ending in the key's number, and two keys that
 * differ only in length ("k" and "k\0"). */
static void keys_make(void)
{
	for (unsigned i = 0; i < NKEYS; i++) {
		struct nkv_key *k = &g_keys[i];
		memset(k, 0, sizeof(*k));
		k->len = (uint8_t)(4 + i % 13);
		memcpy(k->b, "kvcache-block-00", 16);
		for (unsigned j = 0; j < 4; j++)
			k->b[k->len - 1 - j] = (uint8_t)(i >> (8 * j));
	}
	/* two keys equal but for their length */
	g_keys[0].len = 1, g_keys[0].b[0] = 'k';
	g_keys[1].len = 2, g_keys[1].b[0] = 'k', g_keys[1].b[1] = 0;
	for (unsigned i = 0; i < NKEYS; i++) /* the generator above must give distinct keys */
		for (unsigned j = i + 1; j < NKEYS; j++)
			assert_false(g_keys[i].len == g_keys[j].len && !memcmp(g_keys[i].b, g_keys[j].b, g_keys[i].len));
}

static void check_all(const struct mem_index *x)
{
	size_t n = 0;
	for (unsigned i = 0; i < NKEYS; i++) {
		struct nkv_key probe = g_keys[i]; /* a copy: found by value, returned as the stored pointer */
		struct nkv_key *f = mem_index_find(x, &probe);
		if (g_in[i]) {
			assert_ptr_equal(f, &g_keys[i]);
			n++;
		} else {
			assert_null(f);
		}
	}
	assert_int_equal(x->n, n);
	assert_true(x->n <= x->cap / 2 || x->cap == 0);
}

static void model(void **state)
{
	(void)state;
	struct mem_index x;
	uint64_t r = 0x243f6a8885a308d3ull;

	keys_make();
	memset(g_in, 0, sizeof(g_in));
	mem_index_init(&x);
	assert_null(mem_index_find(&x, &g_keys[5])); /* empty, no table yet */
	for (unsigned step = 0; step < 200000; step++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		unsigned i = (unsigned)(r % NKEYS);
		if (g_in[i]) {
			mem_index_remove(&x, mem_index_find(&x, &g_keys[i]));
			g_in[i] = false;
		} else {
			assert_int_equal(mem_index_reserve(&x, x.n + 1), 0);
			mem_index_insert(&x, &g_keys[i]);
			g_in[i] = true;
		}
		if (step % 20000 == 0)
			check_all(&x);
	}
	check_all(&x);
	for (unsigned i = 0; i < NKEYS; i++) /* empty it in key order: long runs shift back */
		if (g_in[i]) {
			mem_index_remove(&x, &g_keys[i]);
			g_in[i] = false;
		}
	check_all(&x);
	assert_int_equal(x.n, 0);
	/* reserve once, then that many inserts need no memory */
	assert_int_equal(mem_index_reserve(&x, NKEYS), 0);
	size_t cap = x.cap;
	for (unsigned i = 0; i < NKEYS; i++) {
		mem_index_insert(&x, &g_keys[i]);
		g_in[i] = true;
	}
	assert_int_equal(x.cap, cap);
	check_all(&x);
	mem_index_fini(&x);
}

static void keyed(void **state)
{
	(void)state;
	struct mem_index a, b;
	mem_index_init(&a);
	mem_index_init(&b);
	/* each index draws its own SipHash key, so one table's collisions say nothing of another's */
	assert_false(a.k0 == b.k0 && a.k1 == b.k1);
	mem_index_fini(&a);
	mem_index_fini(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(model),
		cmocka_unit_test(keyed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
