/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user_json.c - the VERSION message's capabilities: a strict JSON reader (RFC 8259 values,
 * nesting bounded) that keeps only the members of "capabilities" the server uses. The target links
 * no JSON library, and the input is a hostile client's, so this reader is small, bounded and never
 * allocates.
 */
#include <errno.h>
#include <string.h>

#include "transport/vfio_user_int.h"

#define MAX_DEPTH 8

struct rd {
	const char *p, *end;
};

static void ws(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static bool lit(struct rd *r, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
		return false;
	r->p += n;
	return true;
}

static bool hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string; its raw bytes (escapes left as they are) in [*s, *s + *n). */
static bool str(struct rd *r, const char **s, size_t *n)
{
	if (r->p >= r->end || *r->p != '"')
		return false;
	const char *b = ++r->p;
	while (r->p < r->end && *r->p != '"') {
		unsigned char c = (unsigned char)*r->p;
		if (c < 0x20)
			return false;
		if (c == '\\') {
			if (++r->p >= r->end)
				return false;
			c = (unsigned char)*r->p;
			if (c == 'u') {
				if (r->end - r->p < 5 || !hex(r->p[1]) || !hex(r->p[2]) || !hex(r->p[3]) || !hex(r->p[4]))
					return false;
				r->p += 4;
			} else if (!strchr("\"\\/bfnrt", c)) {
				return false;
			}
		}
		r->p++;
	}
	if (r->p >= r->end)
		return false;
	*s = b;
	*n = (size_t)(r->p - b);
	r->p++;
	return true;
}

/* A number; *@u its value when it is a non-negative integer below 2^53 (else *@is_u false). */
static bool num(struct rd *r, uint64_t *u, bool *is_u)
{
	const char *b = r->p;
	bool neg = false, frac = false;
	uint64_t v = 0;

	if (r->p < r->end && *r->p == '-') {
		neg = true;
		r->p++;
	}
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return false;
	if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9')
		return false; /* no leading zeros */
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
		if (v < (1ull << 53))
			v = v * 10 + (uint64_t)(*r->p - '0');
		r->p++;
	}
	if (r->p < r->end && *r->p == '.') {
		frac = true;
		if (++r->p >= r->end || *r->p < '0' || *r->p > '9')
			return false;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		frac = true;
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (r->p >= r->end || *r->p < '0' || *r->p > '9')
			return false;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	*is_u = !neg && !frac && v < (1ull << 53) && r->p - b < 17;
	*u = v;
	return true;
}

struct caps_ctx {
	struct vfu_caps *out;
	int depth;               /* 1: the top object, 2: "capabilities" */
	bool in_caps;
	bool bad;                /* a known member of the wrong type */
};

static bool value(struct rd *r, struct caps_ctx *x, int depth, const char *key, size_t klen);

static bool key_is(const char *k, size_t n, const char *w)
{
	return n == strlen(w) && memcmp(k, w, n) == 0;
}

static bool object(struct rd *r, struct caps_ctx *x, int depth, bool caps)
{
	r->p++; /* '{' */
	ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return true;
	}
	for (;;) {
		const char *k;
		size_t kn;
		ws(r);
		if (!str(r, &k, &kn))
			return false;
		ws(r);
		if (r->p >= r->end || *r->p != ':')
			return false;
		r->p++;
		ws(r);
		bool was = x->in_caps;
		x->in_caps = caps;
		if (!value(r, x, depth, k, kn))
			return false;
		x->in_caps = was;
		ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == '}') {
			r->p++;
			return true;
		}
		return false;
	}
}

static bool array(struct rd *r, struct caps_ctx *x, int depth)
{
	r->p++; /* '[' */
	ws(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return true;
	}
	for (;;) {
		ws(r);
		bool was = x->in_caps;
		x->in_caps = false;
		if (!value(r, x, depth, NULL, 0))
			return false;
		x->in_caps = was;
		ws(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == ']') {
			r->p++;
			return true;
		}
		return false;
	}
}

/* A value; @key names it when it is a member of "capabilities" (x->in_caps) or of the top object. */
static bool value(struct rd *r, struct caps_ctx *x, int depth, const char *key, size_t klen)
{
	if (r->p >= r->end || depth > MAX_DEPTH)
		return false;
	uint64_t *slot = NULL;
	if (key && x->in_caps) {
		if (key_is(key, klen, "max_msg_fds"))
			slot = &x->out->max_msg_fds;
		else if (key_is(key, klen, "max_data_xfer_size"))
			slot = &x->out->max_data_xfer_size;
		else if (key_is(key, klen, "max_dma_maps"))
			slot = &x->out->max_dma_maps;
		else if (key_is(key, klen, "pgsizes"))
			slot = &x->out->pgsizes;
	}
	bool top_caps = key && depth == 1 && key_is(key, klen, "capabilities");
	switch (*r->p) {
	case '{':
		if (slot)
			x->bad = true;
		return object(r, x, depth + 1, top_caps);
	case '[':
		if (slot || top_caps)
			x->bad = true;
		return array(r, x, depth + 1);
	case '"': {
		const char *s;
		size_t n;
		if (slot || top_caps)
			x->bad = true;
		return str(r, &s, &n);
	}
	case 't':
	case 'f':
	case 'n':
		if (slot || top_caps)
			x->bad = true;
		return lit(r, "true") || lit(r, "false") || lit(r, "null");
	default: {
		uint64_t u;
		bool is_u;
		if (!num(r, &u, &is_u))
			return false;
		if (top_caps || (slot && !is_u))
			x->bad = true;
		else if (slot)
			*slot = u;
		return true;
	}
	}
}

int vfu_json_caps(const char *js, size_t len, struct vfu_caps *out)
{
	struct rd r = {js, js + len};
	struct caps_ctx x = {.out = out};

	ws(&r);
	if (r.p >= r.end || *r.p != '{')
		return -EINVAL;
	if (!object(&r, &x, 1, false) || x.bad)
		return -EINVAL;
	ws(&r);
	return r.p == r.end ? 0 : -EINVAL;
}
