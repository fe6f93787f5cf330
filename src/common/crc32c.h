/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crc32c.h - CRC32C (Castagnoli) for NVMe/TCP header and data digests, on ISA-L's crc32_iscsi
 * (Debian libisal-dev), which picks the SSE4.2/PCLMUL or AArch64 CRC instructions at run time.
 */
#ifndef NKV_CRC32C_H
#define NKV_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define NKV_CRC32C_INIT 0xffffffffu

/** Continue a CRC32C over @len bytes: start with NKV_CRC32C_INIT, finish with nkv_crc32c_final(). */
uint32_t nkv_crc32c_update(uint32_t crc, const void *buf, size_t len);

static inline uint32_t nkv_crc32c_final(uint32_t crc)
{
	return crc ^ 0xffffffffu;
}

/** CRC32C of one buffer ("123456789" gives E3069283h). */
static inline uint32_t nkv_crc32c(const void *buf, size_t len)
{
	return nkv_crc32c_final(nkv_crc32c_update(NKV_CRC32C_INIT, buf, len));
}

#endif
