/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c.c - CRC32C over ISA-L (see crc32c.h). */
#include "crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t nkv_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	/* crc32_iscsi takes an int length: feed larger buffers in pieces. */
	while (len > 0) {
		int n = len > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)len;
		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return crc;
}
