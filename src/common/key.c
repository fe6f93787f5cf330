/* SPDX-License-Identifier: Apache-2.0 */
/* key.c - KV keys: object-name mapping, ordering, the List data format and a top-K collector. */
#include "key.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t nkv_key_to_oid(const struct nkv_key *k, char oid[NKV_OID_MAX])
{
	static const char hex[] = "0123456789abcdef";
	size_t n = k->len > NKV_KEY_MAX ? NKV_KEY_MAX : k->len;

	for (size_t i = 0; i < n; i++) {
		oid[2 * i] = hex[k->b[i] >> 4];
		oid[2 * i + 1] = hex[k->b[i] & 0xf];
	}
	oid[2 * n] = '\0';
	return 2 * n;
}

static int nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase is another object name, so not a key */
}

int nkv_oid_to_key(const char *oid, size_t len, struct nkv_key *k)
{
	if (len < 2 || len > 2 * NKV_KEY_MAX || (len & 1))
		return -EINVAL;
	for (size_t i = 0; i < len / 2; i++) {
		int hi = nibble(oid[2 * i]), lo = nibble(oid[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		k->b[i] = (uint8_t)(hi << 4 | lo);
	}
	k->len = (uint8_t)(len / 2);
	return 0;
}

int nkv_key_cmp(const struct nkv_key *a, const struct nkv_key *b)
{
	unsigned n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->b, b->b, n);

	if (c)
		return c;
	return (int)a->len - (int)b->len;
}

uint32_t nkv_list_capacity(uint32_t hbs)
{
	return hbs < NKV_LIST_HDR ? 0 : (hbs - NKV_LIST_HDR) / 4;
}

uint32_t nkv_list_pack(uint8_t *buf, uint32_t hbs, const struct nkv_key *keys, uint32_t n, uint32_t *nrk)
{
	uint32_t off = NKV_LIST_HDR, cnt = 0;

	for (; cnt < n; cnt++) {
		uint32_t esz = nkv_list_entry_size(keys[cnt].len);
		if (esz > hbs - off)
			break;
		memset(buf + off, 0, esz);
		nkv_put16(buf + off, keys[cnt].len);
		memcpy(buf + off + 2, keys[cnt].b, keys[cnt].len);
		off += esz;
	}
	nkv_put32(buf, cnt);
	*nrk = cnt;
	return off;
}

int nkv_keyheap_init(struct nkv_keyheap *h, const struct nkv_key *start, uint32_t cap)
{
	h->start = *start;
	h->n = 0;
	h->cap = cap;
	h->v = NULL;
	if (cap && !(h->v = malloc((size_t)cap * sizeof(*h->v))))
		return -ENOMEM;
	return 0;
}

static void swap(struct nkv_key *a, struct nkv_key *b)
{
	struct nkv_key t = *a;
	*a = *b;
	*b = t;
}

static void sift_down(struct nkv_keyheap *h, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && nkv_key_cmp(&h->v[l], &h->v[m]) > 0)
			m = l;
		if (r < h->n && nkv_key_cmp(&h->v[r], &h->v[m]) > 0)
			m = r;
		if (m == i)
			return;
		swap(&h->v[i], &h->v[m]);
		i = m;
	}
}

void nkv_keyheap_offer(struct nkv_keyheap *h, const struct nkv_key *k)
{
	if (h->cap == 0 || nkv_key_cmp(k, &h->start) < 0)
		return;
	if (h->n < h->cap) {
		uint32_t i = h->n++;
		h->v[i] = *k;
		while (i > 0 && nkv_key_cmp(&h->v[(i - 1) / 2], &h->v[i]) < 0) {
			swap(&h->v[(i - 1) / 2], &h->v[i]);
			i = (i - 1) / 2;
		}
	} else if (nkv_key_cmp(k, &h->v[0]) < 0) {
		h->v[0] = *k; /* evict the largest of the K kept */
		sift_down(h, 0);
	}
}

static int cmp_qsort(const void *a, const void *b)
{
	return nkv_key_cmp(a, b);
}

void nkv_keyheap_sort(struct nkv_keyheap *h)
{
	if (h->n > 1)
		qsort(h->v, h->n, sizeof(*h->v), cmp_qsort);
}

void nkv_keyheap_fini(struct nkv_keyheap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

void nkv_id128(const char *a, const char *b, uint8_t id[16])
{
	uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
	const char *parts[2] = {a, b};

	for (int i = 0; i < 2; i++) {
		for (const char *p = parts[i]; p && *p; p++) {
			h1 = (h1 ^ (uint8_t)*p) * 0x100000001b3ull;
			h2 = (h2 ^ (uint8_t)*p) * 0x1000193ull + 7;
		}
		/* a separator no string contains, so ("ab", "") and ("a", "b") differ */
		h1 = (h1 ^ 0x100) * 0x100000001b3ull;
		h2 = (h2 ^ 0x100) * 0x1000193ull + 7;
	}
	nkv_put64(id, h1);
	nkv_put64(id + 8, h2);
}
