/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bufcache.h - a cache of large data buffers for one thread (a reactor).
 *
 * Why: a buffer above glibc's mmap threshold is a fresh mapping each time it is allocated, so
 * every large command paid a page fault and a zeroed page per 4 KiB of its value (a 256 KiB
 * Retrieve on the mem backend spent more time faulting than copying). The cache keeps freed
 * buffers, already faulted in, for the next command of about the same size.
 *
 * Sizes are rounded up to classes of 2^n x {5/4, 6/4, 7/4, 8/4} (at most 25 % over the request),
 * from above 64 KiB to 1 GiB; smaller and larger requests are not cached. What the cache holds is
 * bounded by @cap bytes, and buffers not reused within @idle_ms are freed by nkv_bufcache_trim(),
 * so a burst does not leave an idle gateway holding its memory.
 * Not thread-safe: each reactor has its own.
 */
#ifndef NKV_BUFCACHE_H
#define NKV_BUFCACHE_H

#include <stddef.h>
#include <stdint.h>

#define NKV_BUFCACHE_MIN (64u * 1024)  /* requests up to this size are not cached */
#define NKV_BUFCACHE_CLASSES (14 * 4)  /* 2^16 < size <= 2^30 */

struct nkv_bufcache {
	void *free[NKV_BUFCACHE_CLASSES]; /* per class: newest first */
	uint64_t held;                    /* bytes of buffers in the lists */
	uint64_t cap;                     /* most bytes held */
	uint32_t idle_ms;                 /* a buffer unused this long is freed at the next trim */
	uint64_t hits, misses;            /* gets served from the lists / by malloc */
};

/** Empty cache holding at most @cap bytes (0: caches nothing), freeing buffers idle @idle_ms. */
void nkv_bufcache_init(struct nkv_bufcache *bc, uint64_t cap, uint32_t idle_ms);

/**
 * A buffer of at least @need bytes; *@cap gets its real size (the class size when cached), which
 * must be passed back to nkv_bufcache_put(). @return the buffer, or NULL (out of memory).
 */
void *nkv_bufcache_get(struct nkv_bufcache *bc, size_t need, size_t *cap);

/** Give back a buffer from nkv_bufcache_get() (or any malloc'd one of @cap bytes): kept or freed. */
void nkv_bufcache_put(struct nkv_bufcache *bc, void *buf, size_t cap, uint64_t now_ms);

/** Free the buffers unused for idle_ms or more. Call it now and then (a reactor's tick). */
void nkv_bufcache_trim(struct nkv_bufcache *bc, uint64_t now_ms);

/** Free everything held. */
void nkv_bufcache_fini(struct nkv_bufcache *bc);

#endif
