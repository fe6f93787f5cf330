/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_params.c - the RADOS_NKV backend's parameters (NIXL's string map, the environment, the
 * defaults) and the mapping of libnkv results to NIXL status codes.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nkv/nkv.h"
#include "nkv_nixl.h"

/* How one key is stored: a string field, or a number with its range. */
struct pkey {
	const char *key;   /* the parameter's name */
	const char *alias; /* another name for it, or NULL */
	const char *env;   /* environment fallback */
	size_t str_off;    /* string field: offset into struct nkv_nixl_opts */
	size_t str_len;    /* its size; 0 for numbers */
	size_t num_off;    /* number field (unsigned or uint32_t, both 32-bit) */
	unsigned long min, max;
};

#define STR(k, a, e, f)                                                                            \
	{ k, a, e, offsetof(struct nkv_nixl_opts, f), sizeof(((struct nkv_nixl_opts *)0)->f), 0, 0, 0 }
#define NUM(k, e, f, lo, hi) { k, NULL, e, 0, 0, offsetof(struct nkv_nixl_opts, f), lo, hi }

_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "number fields are 32-bit");

static const struct pkey g_keys[] = {
	STR("traddr", NULL, "NKV_NIXL_TRADDR", traddr),
	STR("port", "trsvcid", "NKV_NIXL_PORT", port),
	STR("subnqn", NULL, "NKV_NIXL_SUBNQN", subnqn),
	STR("shm", NULL, "NKV_NIXL_SHM", shm),
	STR("hostnqn", NULL, "NKV_NIXL_HOSTNQN", hostnqn),
	STR("paths", NULL, "NKV_NIXL_PATHS", paths),
	NUM("nsid", "NKV_NIXL_NSID", nsid, 1, 0xfffffffeul),
	NUM("queues", "NKV_NIXL_QUEUES", queues, 1, 64),
	NUM("queue_depth", "NKV_NIXL_QUEUE_DEPTH", depth, 0, 65535),
	NUM("timeout_ms", "NKV_NIXL_TIMEOUT_MS", timeout_ms, 1, 3600000),
	NUM("max_ops", "NKV_NIXL_MAX_OPS", max_ops, 1, 1ul << 24),
	NUM("staging_mb", "NKV_NIXL_STAGING_MB", staging_mb, 0, 65536),
	NUM("reconnect_max_ms", "NKV_NIXL_RECONNECT_MAX_MS", reconnect_max_ms, 10, 60000),
	NUM("reconnect_wait_ms", "NKV_NIXL_RECONNECT_WAIT_MS", reconnect_wait_ms, 0, 3600000),
};

static void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t len, const char *fmt, ...)
{
	if (!err || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* The value for @k: the parameters first (last one wins, as in a map), then the environment. */
static const char *lookup(const struct pkey *k, const struct nkv_nixl_param *p, size_t n, const char **from)
{
	const char *v = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!p[i].key || !p[i].value || !p[i].value[0])
			continue; /* empty: not given (the plugin advertises its keys with empty values) */
		if (strcmp(p[i].key, k->key) == 0 || (k->alias && strcmp(p[i].key, k->alias) == 0))
			v = p[i].value;
	}
	*from = "parameter";
	if (!v) {
		v = getenv(k->env);
		*from = k->env;
	}
	return v && v[0] ? v : NULL;
}

static int set_one(const struct pkey *k, const char *v, const char *from, struct nkv_nixl_opts *o, char *err,
		   size_t err_len)
{
	if (k->str_len) {
		size_t l = strlen(v);
		if (l >= k->str_len) {
			say(err, err_len, "%s %s: longer than %zu bytes", from, k->key, k->str_len - 1);
			return NKV_NIXL_ERR_INVALID_PARAM;
		}
		memcpy((char *)o + k->str_off, v, l + 1);
		return NKV_NIXL_SUCCESS;
	}
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 0);
	/* strtoul takes "-1" and leading spaces: only plain digits (or 0x...) are numbers here */
	if (!isdigit((unsigned char)v[0]) || *end || errno || x < k->min || x > k->max) {
		say(err, err_len, "%s %s: '%s' is not a number in %lu..%lu", from, k->key, v, k->min, k->max);
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	*(unsigned *)((char *)o + k->num_off) = (unsigned)x;
	return NKV_NIXL_SUCCESS;
}

int nkv_nixl_parse_params(const struct nkv_nixl_param *params, size_t n, struct nkv_nixl_opts *o, char *err,
			  size_t err_len)
{
	if (!o || (n && !params)) {
		say(err, err_len, "no options");
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	memset(o, 0, sizeof(*o));
	snprintf(o->traddr, sizeof(o->traddr), "127.0.0.1");
	snprintf(o->port, sizeof(o->port), "4420");
	snprintf(o->subnqn, sizeof(o->subnqn), "nqn.2026-11.io.rados-nkv:nkv");
	o->nsid = 1;
	o->queues = 4;
	o->timeout_ms = 30000;
	o->max_ops = 65536;
	o->staging_mb = 256;
	o->reconnect_max_ms = 1000;
	o->reconnect_wait_ms = UINT32_MAX; /* not given: timeout_ms, below */
	for (size_t i = 0; i < sizeof(g_keys) / sizeof(g_keys[0]); i++) {
		const char *from, *v = lookup(&g_keys[i], params, n, &from);
		if (!v)
			continue;
		int st = set_one(&g_keys[i], v, from, o, err, err_len);
		if (st)
			return st;
	}
	if (o->reconnect_wait_ms == UINT32_MAX)
		o->reconnect_wait_ms = o->timeout_ms;
	if (o->depth == 1) {
		say(err, err_len, "queue_depth: 1 is too small (0 for the default, or 2..65535)");
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	if (o->paths[0] && o->shm[0]) {
		say(err, err_len, "paths and shm: give one (an shm path may be one of the paths)");
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	if (!o->traddr[0] || !o->port[0] || !o->subnqn[0]) {
		say(err, err_len, "traddr, port and subnqn must not be empty");
		return NKV_NIXL_ERR_INVALID_PARAM;
	}
	return NKV_NIXL_SUCCESS;
}

int nkv_nixl_status_from_errno(int rc)
{
	switch (rc) {
	case 0:
		return NKV_NIXL_SUCCESS;
	case -ENOENT: /* Key Does Not Exist */
	case -ENXIO:  /* no such namespace */
		return NKV_NIXL_ERR_NOT_FOUND;
	case -EINVAL:
	case -EFBIG: /* value above the namespace's limit */
	case -E2BIG:
	case -EMSGSIZE:
	case -ERANGE:
		return NKV_NIXL_ERR_INVALID_PARAM;
	case -EOPNOTSUPP:
		return NKV_NIXL_ERR_NOT_SUPPORTED;
	case -EROFS: /* read-only namespace */
	case -EACCES:
	case -EPERM:
		return NKV_NIXL_ERR_NOT_ALLOWED;
	default: /* -EIO, -ETIMEDOUT, -ENOTCONN, -EAGAIN (not ready), -ENOSPC, -ENOMEM, -EPROTO, ... */
		return NKV_NIXL_ERR_BACKEND;
	}
}

int nkv_nixl_status_from_nvme(uint16_t status)
{
	return nkv_nixl_status_from_errno(nkv_status_errno(status));
}

const char *nkv_nixl_status_str(int st)
{
	switch (st) {
	case NKV_NIXL_IN_PROG: return "NIXL_IN_PROG";
	case NKV_NIXL_SUCCESS: return "NIXL_SUCCESS";
	case NKV_NIXL_ERR_NOT_POSTED: return "NIXL_ERR_NOT_POSTED";
	case NKV_NIXL_ERR_INVALID_PARAM: return "NIXL_ERR_INVALID_PARAM";
	case NKV_NIXL_ERR_BACKEND: return "NIXL_ERR_BACKEND";
	case NKV_NIXL_ERR_NOT_FOUND: return "NIXL_ERR_NOT_FOUND";
	case NKV_NIXL_ERR_MISMATCH: return "NIXL_ERR_MISMATCH";
	case NKV_NIXL_ERR_NOT_ALLOWED: return "NIXL_ERR_NOT_ALLOWED";
	case NKV_NIXL_ERR_REPOST_ACTIVE: return "NIXL_ERR_REPOST_ACTIVE";
	case NKV_NIXL_ERR_UNKNOWN: return "NIXL_ERR_UNKNOWN";
	case NKV_NIXL_ERR_NOT_SUPPORTED: return "NIXL_ERR_NOT_SUPPORTED";
	case NKV_NIXL_ERR_REMOTE_DISCONNECT: return "NIXL_ERR_REMOTE_DISCONNECT";
	case NKV_NIXL_ERR_CANCELED: return "NIXL_ERR_CANCELED";
	default: return "NIXL_ERR_?";
	}
}
