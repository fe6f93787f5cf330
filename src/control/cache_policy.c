/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_policy.c - struct nkv_cache_policy <-> the CachePolicy message as JSON, and its rules
 * (cache_policy.h). One table of fields: the proto's names are the struct's, so the daemon's state,
 * the gRPC glue and this file agree by construction.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/cache_policy.h"
#include "nkv/nkv_spec.h"

/* Each numeric field: where it lives, its width and the largest value the field holds. */
struct field {
	const char *name;
	size_t off;
	unsigned size; /* 1, 4 or 8 bytes */
	uint64_t max;
};

#define F(n, w, m) {#n, offsetof(struct nkv_cache_policy, n), w, m}
static const struct field g_fields[] = {
	F(capacity_bytes, 8, UINT64_MAX),
	F(capacity_keys, 8, UINT64_MAX),
	F(pin_quota_bytes, 8, UINT64_MAX),
	F(default_ttl_s, 4, NKV_TTL_NONE - 1), /* FFFFFFFFh is "never" on the wire, not a duration */
	F(max_ttl_s, 4, NKV_TTL_NONE - 1),
	F(bytes_per_token, 8, UINT64_MAX),
	F(low_watermark_pct, 1, 99),
	F(overshoot_pct, 1, 100),
	F(touch_interval_ms, 4, UINT32_MAX),
	F(reap_interval_s, 4, UINT32_MAX),
	F(reap_rate, 4, UINT32_MAX),
	F(lease_ms, 4, UINT32_MAX),
};
#undef F
#define NFIELDS (sizeof(g_fields) / sizeof(g_fields[0]))

static const char *const g_evict[] = {[NKV_EVICT_LRU] = "lru", [NKV_EVICT_FIFO] = "fifo", [NKV_EVICT_OFF] = "off"};

const char *ctl_evict_name(unsigned e)
{
	return e < sizeof(g_evict) / sizeof(g_evict[0]) ? g_evict[e] : NULL;
}

int ctl_evict_parse(const char *name)
{
	if (!*name)
		return NKV_EVICT_LRU;
	for (unsigned i = 0; i < sizeof(g_evict) / sizeof(g_evict[0]); i++)
		if (strcmp(name, g_evict[i]) == 0)
			return (int)i;
	return -EINVAL;
}

static uint64_t get(const struct nkv_cache_policy *p, const struct field *f)
{
	const char *b = (const char *)p + f->off;
	uint8_t u8;
	uint32_t u32;
	uint64_t u64;
	switch (f->size) {
	case 1: memcpy(&u8, b, 1); return u8;
	case 4: memcpy(&u32, b, 4); return u32;
	default: memcpy(&u64, b, 8); return u64;
	}
}

static void set(struct nkv_cache_policy *p, const struct field *f, uint64_t v)
{
	char *b = (char *)p + f->off;
	uint8_t u8 = (uint8_t)v;
	uint32_t u32 = (uint32_t)v;
	switch (f->size) {
	case 1: memcpy(b, &u8, 1); break;
	case 4: memcpy(b, &u32, 4); break;
	default: memcpy(b, &v, 8); break;
	}
}

int ctl_cache_policy_check(const struct nkv_cache_policy *p, char *why, size_t n)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (get(p, &g_fields[i]) > g_fields[i].max) {
			snprintf(why, n, "cache policy: %s %" PRIu64 " is above %" PRIu64, g_fields[i].name,
				 get(p, &g_fields[i]), g_fields[i].max);
			return -EINVAL;
		}
	if (!ctl_evict_name(p->eviction)) {
		snprintf(why, n, "cache policy: eviction %u is not lru (0), fifo (1) or off (2)", p->eviction);
		return -EINVAL;
	}
	if (p->max_ttl_s && p->default_ttl_s > p->max_ttl_s) {
		snprintf(why, n, "cache policy: default_ttl_s %" PRIu32 " is above max_ttl_s %" PRIu32
			 " (every Store without a TTL would be cut to the maximum)", p->default_ttl_s, p->max_ttl_s);
		return -EINVAL;
	}
	return 0;
}

int ctl_cache_policy_field(const char *name)
{
	if (strcmp(name, "eviction") == 0)
		return 1;
	for (size_t i = 0; i < NFIELDS; i++)
		if (strcmp(name, g_fields[i].name) == 0)
			return 1;
	return 0;
}

static int listed(const char *const *only, const char *name)
{
	if (!only)
		return 1;
	for (; *only; only++)
		if (strcmp(*only, name) == 0)
			return 1;
	return 0;
}

/* A non-negative integer: a JSON number, or a decimal string (proto3 writes uint64 so). */
static int to_u64(json_object *v, uint64_t *out)
{
	if (json_object_is_type(v, json_type_int)) {
		if (json_object_get_int64(v) < 0)
			return -EINVAL;
		*out = json_object_get_uint64(v);
		return 0;
	}
	if (json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		char *end;
		errno = 0;
		unsigned long long x = strtoull(s, &end, 10);
		if (!*s || *end || errno || *s == '-' || *s == '+' || *s == ' ')
			return -EINVAL;
		*out = x;
		return 0;
	}
	return -EINVAL;
}

int ctl_cache_policy_from_json(json_object *o, const char *const *only, struct nkv_cache_policy *p, char *why,
			       size_t n)
{
	struct nkv_cache_policy q = *p;

	if (!o || !json_object_is_type(o, json_type_object)) {
		snprintf(why, n, "cache policy: must be an object");
		return -EINVAL;
	}
	json_object_object_foreach(o, key, v) {
		if (!ctl_cache_policy_field(key)) {
			snprintf(why, n, "cache policy: no field '%.64s'", key);
			return -EINVAL;
		}
		(void)v;
	}
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &g_fields[i];
		json_object *v = NULL;
		uint64_t x = 0;
		if (!listed(only, f->name))
			continue;
		if (json_object_object_get_ex(o, f->name, &v) && v && to_u64(v, &x) < 0) {
			snprintf(why, n, "cache policy: %s must be a non-negative integer", f->name);
			return -EINVAL;
		}
		if (x > f->max) {
			snprintf(why, n, "cache policy: %s %" PRIu64 " is above %" PRIu64, f->name, x, f->max);
			return -EINVAL;
		}
		set(&q, f, x);
	}
	if (listed(only, "eviction")) {
		json_object *v = NULL;
		int e = NKV_EVICT_LRU;
		if (json_object_object_get_ex(o, "eviction", &v) && v &&
		    (!json_object_is_type(v, json_type_string) || (e = ctl_evict_parse(json_object_get_string(v))) < 0)) {
			snprintf(why, n, "cache policy: eviction must be \"lru\", \"fifo\" or \"off\"");
			return -EINVAL;
		}
		q.eviction = (uint8_t)e;
	}
	int rc = ctl_cache_policy_check(&q, why, n);
	if (rc == 0)
		*p = q;
	return rc;
}

json_object *ctl_cache_policy_to_json(const struct nkv_cache_policy *p)
{
	json_object *o = json_object_new_object();
	for (size_t i = 0; i < NFIELDS; i++)
		json_object_object_add(o, g_fields[i].name, json_object_new_uint64(get(p, &g_fields[i])));
	const char *e = ctl_evict_name(p->eviction);
	json_object_object_add(o, "eviction", json_object_new_string(e ? e : "lru"));
	return o;
}
