/* SPDX-License-Identifier: Apache-2.0 */
/* bufcache.c - a cache of large data buffers for one thread (see bufcache.h). */
#include "common/bufcache.h"

#include <stdlib.h>

/* A free buffer's first bytes: the list link and when it was given back. */
struct bc_node {
	struct bc_node *next;
	uint64_t put_ms;
};

/* Class @k's size: 2^n x (4 + q) / 4 with n = k / 4 + 16 and q = k % 4 + 1. */
static size_t class_size(int k)
{
	return (((size_t)1 << (k / 4 + 16)) / 4) * (size_t)(4 + k % 4 + 1);
}

/* The class of @need bytes and its size; -1 when @need is not cached. */
static int class_of(size_t need, size_t *size)
{
	if (need <= NKV_BUFCACHE_MIN || need > ((size_t)1 << 30))
		return -1;
	unsigned n = 63u - (unsigned)__builtin_clzll((unsigned long long)need - 1); /* 2^n < need <= 2^(n+1) */
	size_t base = (size_t)1 << n, step = base / 4;
	size_t q = (need - base + step - 1) / step; /* 1..4 */
	int k = (int)((n - 16) * 4 + (q - 1));
	*size = class_size(k);
	return k;
}

void nkv_bufcache_init(struct nkv_bufcache *bc, uint64_t cap, uint32_t idle_ms)
{
	*bc = (struct nkv_bufcache){.cap = cap, .idle_ms = idle_ms};
}

void *nkv_bufcache_get(struct nkv_bufcache *bc, size_t need, size_t *cap)
{
	size_t size = need ? need : 1;
	int k = class_of(need, &size);

	if (k >= 0 && bc->free[k]) {
		struct bc_node *b = bc->free[k];
		bc->free[k] = b->next;
		bc->held -= size;
		bc->hits++;
		*cap = size;
		return b;
	}
	void *p = malloc(size);
	if (p) {
		bc->misses++;
		*cap = size;
	}
	return p;
}

void nkv_bufcache_put(struct nkv_bufcache *bc, void *buf, size_t cap, uint64_t now_ms)
{
	size_t size;
	int k = class_of(cap, &size);

	if (!buf)
		return;
	if (k < 0 || size != cap || bc->held + cap > bc->cap) {
		free(buf);
		return;
	}
	struct bc_node *b = buf;
	b->next = bc->free[k];
	b->put_ms = now_ms;
	bc->free[k] = b;
	bc->held += cap;
}

/* Free the nodes from *@pb on (class @k), all given back no later than the first of them. */
static void free_tail(struct nkv_bufcache *bc, struct bc_node **pb, int k)
{
	size_t size = class_size(k);
	struct bc_node *b = *pb;

	*pb = NULL;
	while (b) {
		struct bc_node *next = b->next;
		free(b);
		bc->held -= size;
		b = next;
	}
}

void nkv_bufcache_trim(struct nkv_bufcache *bc, uint64_t now_ms)
{
	for (int k = 0; k < NKV_BUFCACHE_CLASSES; k++) {
		/* Newest first: the first idle one starts a tail of idle ones. */
		struct bc_node **pb = (struct bc_node **)&bc->free[k];
		while (*pb && now_ms - (*pb)->put_ms < bc->idle_ms)
			pb = &(*pb)->next;
		if (*pb)
			free_tail(bc, pb, k);
	}
}

void nkv_bufcache_fini(struct nkv_bufcache *bc)
{
	for (int k = 0; k < NKV_BUFCACHE_CLASSES; k++)
		free_tail(bc, (struct bc_node **)&bc->free[k], k);
}
