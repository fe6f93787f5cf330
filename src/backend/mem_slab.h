/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem_slab.h - the mem backend's allocator for small values (mem_slab.c).
 */
#ifndef NKV_MEM_SLAB_H
#define NKV_MEM_SLAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_SLAB_MAX (64u << 10) /* values up to this size come from the slabs */
#define MEM_SLAB_CLASSES 11      /* 64 B, 128 B, ... 64 KiB */

struct mem_slab_class {
	pthread_mutex_t lock;
	void *free;          /* freed blocks, linked through their first word */
	uint8_t *next, *end; /* the unused rest of the newest chunk */
	void *chunks;        /* every chunk, linked through its first word (unmapped at fini) */
};

struct mem_slab {
	struct mem_slab_class c[MEM_SLAB_CLASSES];
};

void mem_slab_init(struct mem_slab *s);
/** Unmap every chunk: every block is gone with it. */
void mem_slab_fini(struct mem_slab *s);
/** A block of at least @len bytes (@len <= MEM_SLAB_MAX; 0 is a 64-byte block), or NULL. */
void *mem_slab_alloc(struct mem_slab *s, size_t len);
/** Give back a block of @len bytes (the @len it was allocated with). */
void mem_slab_free(struct mem_slab *s, void *p, size_t len);

#endif
