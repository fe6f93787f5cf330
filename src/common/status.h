/* SPDX-License-Identifier: Apache-2.0 */
/* status.h - the single errno -> NVMe status table. */
#ifndef NKV_STATUS_H
#define NKV_STATUS_H

#include "nkv/nkv_spec.h"

/**
 * Map a backend result (0 or -errno) to an NVMe status. 0 maps to success. Transient conditions
 * (timeouts, cluster unreachable) map to KV Namespace Not Ready (82h) with DNR clear so hosts retry;
 * every other failure sets DNR. Unknown errnos map to Internal Error (06h).
 */
nkv_status nkv_errno_to_status(int rc);

/** Human-readable name of a status code ("KV Key Does Not Exist"), for logs and the CLI. */
const char *nkv_status_str(nkv_status st);

#endif
