/* SPDX-License-Identifier: Apache-2.0 */
/* util.c - nkv-ctl helpers: numbers, sizes, listener addresses, response members. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctl_cli.h"

int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	unsigned shift = 0;
	if (*end) {
		const char *u = "KMGT", *p = strchr(u, toupper((unsigned char)*end));
		if (!p)
			return -EINVAL;
		shift = 10 * (unsigned)(p - u + 1);
		if (end[1] && strcasecmp(end + 1, "ib") != 0 && strcasecmp(end + 1, "b") != 0)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int parse_listener(const char *s, char addr[64], uint32_t *port)
{
	const char *colon = strrchr(s, ':');
	if (!colon)
		return -EINVAL;
	size_t n = (size_t)(colon - s);
	const char *a = s;
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		a = s + 1;
		n -= 2;
	} else if (memchr(s, ':', n)) {
		return -EINVAL; /* IPv6 without brackets */
	}
	if (n == 0 || n >= 64)
		return -EINVAL;
	memcpy(addr, a, n);
	addr[n] = '\0';
	unsigned char bin[16];
	int fam = a == s ? AF_INET : AF_INET6;
	if (inet_pton(fam, addr, bin) != 1)
		return -EINVAL;
	uint64_t p;
	if (parse_u64(colon + 1, 1, 65535, &p))
		return -EINVAL;
	*port = (uint32_t)p;
	return 0;
}

const char *size_str(uint64_t n, char buf[32])
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (n < 1024) {
		snprintf(buf, 32, "%" PRIu64 " bytes", n);
		return buf;
	}
	double v = (double)n;
	int u = -1;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (n % (1ull << (10 * (u + 1))) == 0)
		snprintf(buf, 32, "%" PRIu64 " %s", n >> (10 * (u + 1)), unit[u]);
	else
		snprintf(buf, 32, "%.1f %s", v, unit[u]);
	return buf;
}

const char *jstr(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return "";
	return json_object_get_string(v);
}

uint64_t ju64(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (json_object_is_type(v, json_type_string)) {
		uint64_t x = 0;
		return parse_u64(json_object_get_string(v), 0, UINT64_MAX, &x) ? 0 : x;
	}
	return json_object_is_type(v, json_type_int) ? json_object_get_uint64(v) : 0;
}

bool jbool(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

size_t jlen(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
		return 0;
	return json_object_array_length(v);
}

json_object *jat(json_object *o, const char *key, size_t i)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
		return NULL;
	return json_object_array_get_idx(v, i);
}

void jput_u64(json_object *o, const char *key, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "%" PRIu64, v);
	json_object_object_add(o, key, json_object_new_string(b));
}
