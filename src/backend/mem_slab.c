/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem_slab.c - the mem backend's allocator for values up to 64 KiB: size classes of powers of two,
 * each carved from 2 MiB chunks mapped and populated in one system call, freed blocks kept on a list
 * per class for the next value of that size.
 *
 * Why not malloc: a reactor thread allocates from a glibc arena of its own, and glibc grows such an
 * arena's heap by exactly what each allocation needs: one mprotect() per 4 KiB value, then a page
 * fault on it. A first pass of 4 KiB Stores spent half the mem daemon's CPU there
 * (docs/benchmarks.md, "What remains, and why"). A class keeps its chunks until the backend closes:
 * the memory held is the peak stored, as for the values themselves (a test and demo backend).
 */
#include "mem_slab.h"

#include <sys/mman.h>

#define MIN_SHIFT 6              /* 64 B: the smallest class, and each chunk's header */
#define CHUNK (2u << 20)

static unsigned class_of(size_t len)
{
	unsigned c = 0;
	while (((size_t)1 << (MIN_SHIFT + c)) < len)
		c++;
	return c;
}

void mem_slab_init(struct mem_slab *s)
{
	for (unsigned i = 0; i < MEM_SLAB_CLASSES; i++) {
		struct mem_slab_class *c = &s->c[i];
		pthread_mutex_init(&c->lock, NULL);
		c->free = c->chunks = NULL;
		c->next = c->end = NULL;
	}
}

void mem_slab_fini(struct mem_slab *s)
{
	for (unsigned i = 0; i < MEM_SLAB_CLASSES; i++) {
		struct mem_slab_class *c = &s->c[i];
		while (c->chunks) {
			void *next = *(void **)c->chunks;
			munmap(c->chunks, CHUNK);
			c->chunks = next;
		}
		pthread_mutex_destroy(&c->lock);
	}
}

void *mem_slab_alloc(struct mem_slab *s, size_t len)
{
	unsigned ci = class_of(len);
	size_t size = (size_t)1 << (MIN_SHIFT + ci);
	struct mem_slab_class *c = &s->c[ci];
	void *p = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->free) {
		p = c->free;
		c->free = *(void **)p;
	} else {
		if ((size_t)(c->end - c->next) < size) {
			uint8_t *chunk = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
					      -1, 0);
			if (chunk == MAP_FAILED) {
				pthread_mutex_unlock(&c->lock);
				return NULL;
			}
			*(void **)chunk = c->chunks;
			c->chunks = chunk;
			c->next = chunk + (1u << MIN_SHIFT); /* the header: the chunk list's link */
			c->end = chunk + CHUNK;
		}
		p = c->next;
		c->next += size;
	}
	pthread_mutex_unlock(&c->lock);
	return p;
}

void mem_slab_free(struct mem_slab *s, void *p, size_t len)
{
	struct mem_slab_class *c = &s->c[class_of(len)];

	pthread_mutex_lock(&c->lock);
	*(void **)p = c->free;
	c->free = p;
	pthread_mutex_unlock(&c->lock);
}
