/* SPDX-License-Identifier: Apache-2.0 */
/* version.c - nkv_version(): the version libnkv was built as (see nkv_version.h). */
#include "nkv/nkv.h"
#include "nkv/nkv_version.h"

const char *nkv_version(void)
{
	return NKV_VERSION_STRING;
}
