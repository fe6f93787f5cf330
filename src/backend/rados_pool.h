/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados_pool.h - is a pool erasure-coded? Shared by the RADOS backend (namespaces, the cache's meta
 * pool, Exec) and the control plane's group store.
 *
 * An erasure-coded pool keeps no omap (Ceph 16.2.15, checked on a k=2 m=1 pool with
 * allow_ec_overwrites): omap writes fail with -EOPNOTSUPP, and omap reads succeed with nothing in
 * them, also inside a class method (map_get_keys answers no keys, map_get_val -ENOENT): a reader
 * would take that for an empty state, a wrong answer. Class methods cannot read the object's data
 * there either (-EOPNOTSUPP). So whatever needs omap is placed elsewhere or refused up front, which
 * needs the pool's type before the first op; librados' C API has no call for it (the alignment
 * calls see only EC pools without overwrites), so the monitor is asked.
 */
#ifndef NKV_RADOS_POOL_H
#define NKV_RADOS_POOL_H

#include <errno.h>
#include <rados/librados.h>
#include <stdio.h>
#include <string.h>

/**
 * Ask the monitor for @pool's erasure_code_profile (`osd pool get POOL erasure_code_profile`, which
 * needs mon 'allow r'): an erasure-coded pool has one, a replicated pool answers -EACCES ("not a
 * erasure pool"). @return 1 erasure-coded, 0 replicated, or -errno when the monitor did not say
 * (no mon caps, a name that cannot be quoted, the monitor's own error).
 */
static inline int nkv_rados_pool_erasure(rados_t c, const char *pool)
{
	char cmd[512];
	const char *cmds[1] = {cmd};
	char *out = NULL, *outs = NULL;
	size_t outlen = 0, outslen = 0;

	if (strpbrk(pool, "\"\\") || strlen(pool) > 400)
		return -EINVAL;
	snprintf(cmd, sizeof(cmd),
		 "{\"prefix\": \"osd pool get\", \"pool\": \"%s\", \"var\": \"erasure_code_profile\", \"format\": \"json\"}",
		 pool);
	int rc = rados_mon_command(c, cmds, 1, "", 0, &out, &outlen, &outs, &outslen);
	int erasure = rc == 0 ? 1 : rc;
	if (rc == -EACCES && outs && outslen && memmem(outs, outslen, "not a erasure pool", 18))
		erasure = 0;
	rados_buffer_free(out);
	rados_buffer_free(outs);
	return erasure;
}

#endif
