/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem_index.h - the mem backend's hash index (mem_index.c): key -> the entry that holds it.
 */
#ifndef NKV_MEM_INDEX_H
#define NKV_MEM_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/key.h"

struct mem_index_slot {
	uint64_t h;           /* the key's hash (valid when k is set) */
	struct nkv_key *k;    /* the entry's key, NULL: empty */
};

/**
 * Open addressing with linear probing, at most half full, deletion by backward shift (no
 * tombstones). Keys come from hosts, so the hash is SipHash-1-3 under a random key per index: a host
 * cannot choose keys that collide. Entries embed their key; the index holds a pointer to it.
 */
struct mem_index {
	struct mem_index_slot *slots;
	size_t cap, n;        /* cap: a power of two, or 0 before the first insert */
	uint64_t k0, k1;      /* SipHash key */
};

/** An empty index with a fresh random hash key. */
void mem_index_init(struct mem_index *x);
void mem_index_fini(struct mem_index *x);
/** The stored key equal to @k (its entry embeds it), or NULL. */
struct nkv_key *mem_index_find(const struct mem_index *x, const struct nkv_key *k);
/** Make room for @n keys, so that that many inserts cannot fail. @return 0 or -ENOMEM. */
int mem_index_reserve(struct mem_index *x, size_t n);
/** Add @k (not present; room reserved). */
void mem_index_insert(struct mem_index *x, struct nkv_key *k);
/** Remove @k, a pointer mem_index_find() returned. */
void mem_index_remove(struct mem_index *x, const struct nkv_key *k);

#endif
