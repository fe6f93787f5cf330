/* SPDX-License-Identifier: Apache-2.0 */
/* ledger.c - self-describing values and the per-key ledger of the fault suite (see faults.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "faults.h"

#define FV_MAGIC 0x544c4146u /* "FALT" */
#define FV_STEP 0x9e3779b97f4a7c15ull

uint64_t f_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t f_rand(uint64_t *s)
{
	return mix64(*s += FV_STEP);
}

struct fv_hdr {
	uint32_t magic, ver;
	uint64_t key, len, check;
};

static uint64_t hdr_check(const struct fv_hdr *h)
{
	return mix64(h->key ^ mix64(h->len ^ ((uint64_t)h->ver << 32 | h->magic)));
}

/* Word i of a value is seed + i * STEP, from its key and version: a value of another version or key,
 * or two values spliced together, differs in the pattern even where a header would not tell. */
static uint64_t seed_of(uint64_t key, uint32_t ver)
{
	return mix64(key * 0x100000001b3ull ^ ((uint64_t)ver << 20) ^ 0x243f6a8885a308d3ull);
}

void fv_fill(uint8_t *buf, uint32_t len, uint64_t key, uint32_t ver)
{
	uint64_t s = seed_of(key, ver), w;
	uint32_t i = 0;

	for (; i + 8 <= len; i += 8) {
		w = s + (i / 8) * FV_STEP;
		memcpy(buf + i, &w, 8);
	}
	if (i < len) {
		w = s + (i / 8) * FV_STEP;
		memcpy(buf + i, &w, len - i);
	}
	struct fv_hdr h = {.magic = FV_MAGIC, .ver = ver, .key = key, .len = len};
	h.check = hdr_check(&h);
	memcpy(buf, &h, len < sizeof(h) ? len : sizeof(h));
}

uint32_t fv_check(const uint8_t *buf, uint32_t len, uint64_t key, char why[160])
{
	struct fv_hdr h;

	if (len < FV_HDR) {
		snprintf(why, 160, "%u bytes: shorter than any value stored", len);
		return 0;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != FV_MAGIC || h.check != hdr_check(&h) || h.ver == 0) {
		snprintf(why, 160, "header is not a whole value header (torn or foreign)");
		return 0;
	}
	if (h.key != key) {
		snprintf(why, 160, "the value of key %llu", (unsigned long long)h.key);
		return 0;
	}
	if (h.len != len) {
		snprintf(why, 160, "%u bytes, its header says %llu (torn)", len, (unsigned long long)h.len);
		return 0;
	}
	uint64_t s = seed_of(key, h.ver), w;
	for (uint32_t i = FV_HDR; i < len; i += 8) {
		uint32_t n = len - i < 8 ? len - i : 8;
		w = s + (i / 8) * FV_STEP;
		if (memcmp(buf + i, &w, n) != 0) {
			snprintf(why, 160, "version %u differs from its pattern at byte %u of %u (torn)", h.ver, i, len);
			return 0;
		}
	}
	return h.ver;
}

void fl_store_done(struct fl_key *k, uint32_t ver, uint32_t len, bool acked)
{
	if (acked) {
		/* Versions of one key are sent one at a time, in order: every older open Store has
		 * completed, so only this one can be there now. */
		k->floor = k->acked = ver;
		k->floor_len = len;
		k->nopen = 0;
		k->overflow = false;
		return;
	}
	if (k->nopen < FL_OPEN) {
		k->open_ver[k->nopen] = ver;
		k->open_len[k->nopen++] = len;
	} else {
		k->overflow = true;
	}
}

uint32_t fl_read_len(const struct fl_key *k)
{
	uint32_t m = k->floor ? k->floor_len : 4096;
	for (unsigned i = 0; i < k->nopen; i++)
		if (k->open_len[i] > m)
			m = k->open_len[i];
	if (k->overflow && m < (64u << 20))
		m = 64u << 20; /* lengths forgotten: as large as any the suite stores */
	return m < 4096 ? 4096 : m;
}

/* Is @ver (@len bytes) an open Store newer than the floor? */
static bool is_open(const struct fl_key *k, uint32_t ver, uint32_t len)
{
	if (ver <= k->floor || ver >= k->next_ver)
		return false;
	if (k->overflow)
		return true;
	for (unsigned i = 0; i < k->nopen; i++)
		if (k->open_ver[i] == ver && k->open_len[i] == len)
			return true;
	return false;
}

bool fl_read_done(struct fl_key *k, uint64_t key, bool found, const uint8_t *buf, uint32_t xfer, uint32_t size,
		  char why[200])
{
	char v[160];

	if (!found) {
		if (k->floor == 0)
			return true;
		snprintf(why, 200, "absent, but version %u (%u bytes) %s", k->floor, k->floor_len,
			 k->floor == k->acked ? "was acknowledged" : "was read before");
		return false;
	}
	if (size != xfer) {
		snprintf(why, 200, "a value of %u bytes, longer than any version stored (buffer %u)", size, xfer);
		return false;
	}
	uint32_t ver = fv_check(buf, xfer, key, v);
	if (!ver) {
		snprintf(why, 200, "%s", v);
		return false;
	}
	if (ver == k->floor && xfer == k->floor_len)
		return true;
	if (is_open(k, ver, xfer)) {
		/* It landed: from now on nothing older may come back. */
		unsigned j = 0;
		for (unsigned i = 0; i < k->nopen; i++)
			if (k->open_ver[i] > ver)
				k->open_ver[j] = k->open_ver[i], k->open_len[j++] = k->open_len[i];
		k->nopen = j;
		k->floor = ver;
		k->floor_len = xfer;
		return true;
	}
	if (ver < k->floor)
		snprintf(why, 200, "version %u, older than version %u %s (stale: lost update)", ver, k->floor,
			 k->floor == k->acked ? "acknowledged" : "read before");
	else
		snprintf(why, 200, "version %u (%u bytes) was never stored with an open outcome (floor %u, next %u)", ver,
			 xfer, k->floor, k->next_ver);
	return false;
}
