/* SPDX-License-Identifier: Apache-2.0 */
/* key.h - KV keys: object-name mapping, ordering, and the List data format. */
#ifndef NKV_KEY_H
#define NKV_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "nkv/nkv_spec.h"

/** A key of 0..16 bytes (0 only as a List start key). */
struct nkv_key {
	uint8_t len;
	uint8_t b[NKV_KEY_MAX];
};

#define NKV_OID_MAX (2 * NKV_KEY_MAX + 1)

/** Object name of a key: lowercase hex of its bytes, NUL-terminated. @return the name length. */
size_t nkv_key_to_oid(const struct nkv_key *k, char oid[NKV_OID_MAX]);

/**
 * Key of an object name. Only names nkv_key_to_oid() can produce are keys: 2..32 lowercase hex
 * digits, even length. @return 0, or -EINVAL for any other name (foreign objects are not keys).
 */
int nkv_oid_to_key(const char *oid, size_t len, struct nkv_key *k);

/** Key order used by List: memcmp over the common prefix, then the shorter key first. */
int nkv_key_cmp(const struct nkv_key *a, const struct nkv_key *b);

/**
 * Pack keys (already in ascending order) into a List data buffer of @hbs bytes (>= 4): NRK, then
 * whole entries while they fit. Pad bytes are zero. @return bytes written; *nrk = keys packed.
 */
uint32_t nkv_list_pack(uint8_t *buf, uint32_t hbs, const struct nkv_key *keys, uint32_t n, uint32_t *nrk);

/** Most entries a List buffer of @hbs bytes can hold (every entry takes at least 4 bytes). */
uint32_t nkv_list_capacity(uint32_t hbs);

/** A stable 128-bit identity of the strings @a and @b (FNV-1a over both, two lanes), for namespace IDs. */
void nkv_id128(const char *a, const char *b, uint8_t id[16]);

/**
 * Collector of the K smallest keys >= a start key, for backends that scan in hash order:
 * O(N log K) time, O(K) memory.
 */
struct nkv_keyheap {
	struct nkv_key start;
	struct nkv_key *v; /* max-heap while collecting; ascending after nkv_keyheap_sort() */
	uint32_t n;
	uint32_t cap;
};

/** @return 0 or -ENOMEM. cap 0 is valid (collects nothing). */
int nkv_keyheap_init(struct nkv_keyheap *h, const struct nkv_key *start, uint32_t cap);
void nkv_keyheap_offer(struct nkv_keyheap *h, const struct nkv_key *k);
/** Sort the collected keys ascending (destroys the heap order). */
void nkv_keyheap_sort(struct nkv_keyheap *h);
void nkv_keyheap_fini(struct nkv_keyheap *h);

#endif
