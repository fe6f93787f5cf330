/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lname.c - long names (nkv.h "long names"): keys longer than 16 bytes as SHA-256's first 16 bytes
 * of the name, and the value header that carries the whole name so that a reader can tell its own
 * object from a hash collision or a foreign value. SHA-256 comes from OpenSSL's libcrypto.
 */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "nkv/nkv.h"

#define LNAME_MAGIC "NKVL"
#define LNAME_VERSION 1u
#define LNAME_FIXED 24u /* magic, H, version, flags, payload length, name length, zero */

int nkv_lname_key(const void *name, size_t len, uint8_t key[16])
{
	uint8_t md[32];
	unsigned mdlen = 0;
	if (!name || !key || len == 0 || len > NKV_LNAME_MAX)
		return -EINVAL;
	if (!EVP_Digest(name, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != sizeof(md))
		return -EIO;
	memcpy(key, md, 16);
	return 0;
}

uint32_t nkv_lname_hdr_size(size_t len)
{
	if (len == 0 || len > NKV_LNAME_MAX)
		return 0;
	return (uint32_t)((LNAME_FIXED + len + 7u) & ~(size_t)7u);
}

int nkv_lname_hdr_pack(const void *name, size_t len, uint64_t payload_len, void *buf, size_t buf_len)
{
	uint32_t h = nkv_lname_hdr_size(len);
	if (!name || !buf || h == 0 || buf_len < h)
		return -EINVAL;
	uint8_t *b = buf;
	memset(b, 0, h);
	memcpy(b, LNAME_MAGIC, 4);
	nkv_put16(b + 4, (uint16_t)h);
	b[6] = LNAME_VERSION;
	nkv_put64(b + 8, payload_len);
	nkv_put16(b + 16, (uint16_t)len);
	memcpy(b + LNAME_FIXED, name, len);
	return (int)h;
}

int nkv_lname_hdr_check(const void *buf, size_t buf_len, const void *name, size_t len, uint64_t *payload_len)
{
	const uint8_t *b = buf;
	uint32_t want = nkv_lname_hdr_size(len);
	if (!buf || !name || want == 0)
		return -EINVAL;
	if (buf_len < LNAME_FIXED || memcmp(b, LNAME_MAGIC, 4) || b[6] != LNAME_VERSION)
		return -EPROTO;
	uint32_t h = nkv_get16(b + 4);
	uint32_t nlen = nkv_get16(b + 16);
	if (nlen == 0 || nlen > NKV_LNAME_MAX || h != nkv_lname_hdr_size(nlen))
		return -EPROTO;
	/* Another valid name's header is a collision; that needs only the fixed part to tell. */
	if (h != want || nlen != len)
		return -ENOENT;
	if (buf_len < h)
		return -EPROTO;
	if (memcmp(b + LNAME_FIXED, name, len))
		return -ENOENT;
	if (payload_len)
		*payload_len = nkv_get64(b + 8);
	return (int)h;
}
