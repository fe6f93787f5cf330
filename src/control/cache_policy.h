/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_policy.h - a cache namespace's policy (struct nkv_cache_policy, nkv_target.h) as the control
 * plane and the daemon's configuration read and write it: the CachePolicy message of
 * proto/rados_nkv/v1/control.proto as JSON (field names = the struct's), and the one set of rules
 * every way in (JSON file, gRPC, the group's state) checks it against.
 */
#ifndef NKV_CONTROL_CACHE_POLICY_H
#define NKV_CONTROL_CACHE_POLICY_H

#include <json-c/json.h>
#include <stddef.h>

#include "nkv/nkv_target.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "lru", "fifo" or "off" for enum nkv_evict @e; NULL for any other value. */
const char *ctl_evict_name(unsigned e);

/** enum nkv_evict of @name ("lru", "fifo", "off"; "" is lru, the default). @return it or -EINVAL. */
int ctl_evict_parse(const char *name);

/**
 * Is @p a policy the target can run? Percentages in range (low_watermark_pct 0-99, overshoot_pct
 * 0-100), a known eviction, TTLs below NKV_TTL_NONE, and a default TTL no longer than max_ttl_s
 * (when both are set: the core would cut every default Store's TTL). @return 0, or -EINVAL with
 * the reason naming the field in @why.
 */
int ctl_cache_policy_check(const struct nkv_cache_policy *p, char *why, size_t n);

/**
 * Read a CachePolicy message (JSON object @o: proto3 mapping, 64-bit integers as numbers or decimal
 * strings; absent fields are 0) into @p, then check it. Unknown members are errors. @only, when not
 * NULL, is a NULL-terminated list of the fields to take from @o; the others keep @p's value (a
 * partial update). @return 0 or -EINVAL with the reason naming the field in @why.
 */
int ctl_cache_policy_from_json(json_object *o, const char *const *only, struct nkv_cache_policy *p, char *why,
			       size_t n);

/** Is @name a field of CachePolicy? */
int ctl_cache_policy_field(const char *name);

/** @p as a CachePolicy message (every field; uint64 ones as numbers). A new reference. */
json_object *ctl_cache_policy_to_json(const struct nkv_cache_policy *p);

#ifdef __cplusplus
}
#endif
#endif
