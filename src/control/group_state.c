/* SPDX-License-Identifier: Apache-2.0 */
/*
 * group_state.c - a gateway group's state as the omap entries of its RADOS object, both ways,
 * without RADOS (store.c does the I/O; test/fuzz/fuzz_group.c feeds group_parse hostile entries).
 *
 * Keys: "s/SUB" (a subsystem), "h/SUB/HOST" (an allowed host), "n/SUB/NSID" (a namespace),
 * "l/GATEWAY/ADDRESS/PORT" (a listener), "g/GATEWAY" (a gateway: its controller ID range) and
 * "epoch". SUB and HOST are NQNs written with '%' as "%25"
 * and '/' as "%2F", so that a key names one entry whatever the NQNs hold (NVMe allows '/' in an
 * NQN: unescaped, subsystem "nqn.x" with host "nqn.y/nqn.z" and subsystem "nqn.x/nqn.y" with host
 * "nqn.z" were one key). An NQN without '%' or '/' is written as it is, so the keys of groups
 * written before are unchanged; the others (the earlier unescaped form) are still read, and the
 * next commit replaces them (store.c diffs against the keys it read). Gateway names and addresses
 * hold no '/' (ctl.c refuses them), and an NSID or port is digits, so those parts need no escape.
 *
 * Each value is a JSON object that names its subsystem inside ("nqn"): the entry is placed by its
 * value, and the key must be the one the value gives (in either form), so that no two keys can
 * hold one entry. An entry that breaks a rule is left out of the state and reported (group_parse's
 * @bad) rather than failing the whole load: one bad entry must not stop every gateway.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/cache_policy.h"
#include "control/ctl_int.h"
#include "nkv/nkv_target.h"

/* @nqn with '%' and '/' escaped, appended to @out (at least 3 * strlen + 1 bytes free). */
static char *esc(char *out, const char *nqn)
{
	for (; *nqn; nqn++) {
		if (*nqn == '%' || *nqn == '/')
			out += sprintf(out, "%%%02X", (unsigned char)*nqn);
		else
			*out++ = *nqn;
	}
	*out = '\0';
	return out;
}

/* The key of an entry: @kind 's', 'h' or 'n' with subsystem @nqn and @sub (a host NQN, an NSID or
 * NULL); escaped (@legacy false) or as written before (true). malloc'ed; NULL: no memory. */
static char *entry_key(char kind, const char *nqn, const char *sub, bool escaped)
{
	size_t n = 3 * strlen(nqn) + (sub ? 3 * strlen(sub) : 0) + 8;
	char *k = malloc(n), *p = k;

	if (!k)
		return NULL;
	p += sprintf(p, "%c/", kind);
	p = escaped ? esc(p, nqn) : p + sprintf(p, "%s", nqn);
	if (sub) {
		*p++ = '/';
		if (escaped && kind == 'h')
			esc(p, sub);
		else
			sprintf(p, "%s", sub);
	}
	return k;
}

static json_object *jstring(json_object *o)
{
	return json_object_new_string(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

static void put_key(json_object *out, char *key, json_object *val)
{
	if (key)
		json_object_object_add(out, key, val);
	else
		json_object_put(val);
	free(key);
}

/* A host's or namespace's value: the entry with its subsystem's NQN inside. */
static json_object *with_nqn(json_object *o, const char *nqn)
{
	json_object *c = st_copy(o);
	json_object_object_add(c, "nqn", json_object_new_string(nqn));
	json_object *s = jstring(c);
	json_object_put(c);
	return s;
}

json_object *group_flatten(json_object *st)
{
	json_object *out = json_object_new_object();
	char lk[600];

	json_object_object_foreach(st_subsystems(st), nqn, ss) {
		json_object *top = json_object_new_object();
		json_object_object_foreach(ss, k, v) {
			if (strcmp(k, "hosts") != 0 && strcmp(k, "namespaces") != 0)
				json_object_object_add(top, k, json_object_get(v));
		}
		put_key(out, entry_key('s', nqn, NULL, true), jstring(top));
		json_object_put(top);
		json_object_object_foreach(st_get(ss, "hosts"), h, hv)
			put_key(out, entry_key('h', nqn, h, true), with_nqn(hv, nqn));
		json_object_object_foreach(st_get(ss, "namespaces"), n, nv)
			put_key(out, entry_key('n', nqn, n, true), with_nqn(nv, nqn));
	}
	json_object_object_foreach(st_listeners(st), k, lv) {
		snprintf(lk, sizeof(lk), "l/%s", k);
		json_object_object_add(out, lk, jstring(lv));
	}
	if (st_gateways(st)) {
		json_object_object_foreach(st_gateways(st), g, gv) {
			snprintf(lk, sizeof(lk), "g/%s", g);
			json_object_object_add(out, lk, jstring(gv));
		}
	}
	return out;
}

char *group_key_print(const char *k, size_t n)
{
	/* A key no gateway writes may be huge: a bounded text (StateReport stays small); repair
	 * prints keys the same way, so the text still names the entry. */
	size_t shown = n > GROUP_KEY_MAX ? 200 : n;
	char *out = malloc(4 * shown + 40), *p = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < shown; i++) {
		unsigned char b = (unsigned char)k[i];
		if (b < 0x20 || b > 0x7e || b == '\\')
			p += sprintf(p, "\\x%02x", b);
		else
			*p++ = (char)b;
	}
	if (shown < n)
		sprintf(p, "...[%zu bytes]", n);
	else
		*p = '\0';
	return out;
}

/* ---- parse --------------------------------------------------------------------------------------- */

struct parse {
	json_object *st, *raw, *bad;
	size_t nbad;
};

static void bad(struct parse *p, const struct group_entry *e, const char *why)
{
	p->nbad++;
	if (json_object_array_length(p->bad) >= GROUP_BAD_REPORT)
		return; /* counted, not listed: the report stays a bounded size */
	char *k = group_key_print(e->key, e->klen);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "key", json_object_new_string(k ? k : ""));
	json_object_object_add(o, "reason", json_object_new_string(why));
	json_object_array_add(p->bad, o);
	free(k);
}

/* Is @e's key the one @kind/@nqn/@sub gives, escaped or as written before? */
static bool key_is(const struct group_entry *e, char kind, const char *nqn, const char *sub)
{
	bool ok = false;
	for (int escaped = 1; escaped >= 0 && !ok; escaped--) {
		char *k = entry_key(kind, nqn, sub, escaped);
		ok = k && strlen(k) == e->klen && memcmp(k, e->key, e->klen) == 0;
		free(k);
	}
	return ok;
}

static bool str_or_absent(json_object *o, const char *key)
{
	return !st_get(o, key) || st_str(o, key);
}

/* A subsystem's entry (pass 0). @return why it is refused, or NULL (added to the state). */
static const char *parse_subsystem(struct parse *p, const struct group_entry *e, json_object *o)
{
	const char *nqn = st_str(o, "nqn");
	uint64_t x;

	if (!nqn || !*nqn || strlen(nqn) > 223 || !st_str(o, "pool"))
		return "a subsystem without a string nqn (1-223 bytes) or pool";
	if (!key_is(e, 's', nqn, NULL))
		return "the key is not the one its nqn gives";
	if (st_u64(o, "max_namespaces", 0, &x) < 0 || x > NKV_MAX_NSID || !str_or_absent(o, "shm_socket") ||
	    !str_or_absent(o, "vfio_user_socket") || !str_or_absent(o, "vfio_user_host"))
		return "a subsystem with a bad max_namespaces, shm_socket or vfio_user_socket/host";
	if (st_get(st_subsystems(p->st), nqn))
		return "a second entry for this subsystem";
	json_object_object_add(o, "hosts", json_object_new_object());
	json_object_object_add(o, "namespaces", json_object_new_object());
	json_object_object_add(st_subsystems(p->st), nqn, json_object_get(o));
	return NULL;
}

static const char *parse_host(const struct group_entry *e, json_object *o, json_object *ss)
{
	const char *h = st_str(o, "host_nqn");

	if (!h || !*h || strlen(h) > 223)
		return "a host without a string host_nqn (1-223 bytes)";
	if (!key_is(e, 'h', st_str(o, "nqn"), h))
		return "the key is not the one its nqn and host_nqn give";
	if (!str_or_absent(o, "dhchap_key") || !str_or_absent(o, "dhchap_ctrl_key"))
		return "a host with a non-string secret";
	if (st_get(st_get(ss, "hosts"), h))
		return "a second entry for this host";
	json_object_object_del(o, "nqn");
	json_object_object_add(st_get(ss, "hosts"), h, json_object_get(o));
	return NULL;
}

static const char *parse_namespace(const struct group_entry *e, json_object *o, json_object *ss)
{
	uint64_t nsid, x;
	char n[24], why[256];
	struct nkv_cache_policy pol;

	if (st_u64(o, "nsid", 0, &nsid) < 0 || nsid == 0 || nsid > NKV_MAX_NSID || st_u64(o, "max_value", 0, &x) < 0 ||
	    st_u64(o, "ana_group", 1, &x) < 0 || x == 0 || x > NKV_ANA_GROUPS)
		return "a namespace with a bad nsid, max_value or ana_group";
	snprintf(n, sizeof(n), "%" PRIu64, nsid);
	if (!key_is(e, 'n', st_str(o, "nqn"), n))
		return "the key is not the one its nqn and nsid give";
	if (!str_or_absent(o, "rados_namespace"))
		return "a namespace with a non-string rados_namespace";
	if (st_get(o, "cache") && ctl_cache_policy_from_json(st_get(o, "cache"), NULL, &pol, why, sizeof(why)) < 0)
		return "a namespace with a malformed cache policy";
	if (st_get(st_get(ss, "namespaces"), n))
		return "a second entry for this namespace";
	json_object_object_del(o, "nqn");
	json_object_object_add(st_get(ss, "namespaces"), n, json_object_get(o));
	return NULL;
}

static const char *parse_listener(struct parse *p, const struct group_entry *e, json_object *o)
{
	const char *gw = st_str(o, "gateway"), *addr = st_str(o, "address");
	uint64_t port;
	char k[600];

	if (!gw || !*gw || strlen(gw) > 255 || strchr(gw, '/') || !addr || !*addr || strlen(addr) > 63 ||
	    strchr(addr, '/') || st_u64(o, "port", 0, &port) < 0 || port == 0 || port > 65535)
		return "a listener without gateway, address or port";
	k[0] = 'l', k[1] = '/';
	st_listener_key(k + 2, sizeof(k) - 2, gw, addr, (unsigned)port);
	if (strlen(k) != e->klen || memcmp(k, e->key, e->klen) != 0)
		return "the key is not the one its gateway, address and port give";
	if (st_get(st_listeners(p->st), k + 2))
		return "a second entry for this listener";
	json_object_object_add(st_listeners(p->st), k + 2, json_object_get(o));
	return NULL;
}

static const char *parse_gateway(struct parse *p, const struct group_entry *e, json_object *o)
{
	const char *gw = st_str(o, "gateway");
	uint64_t r;

	if (!gw || !*gw || strlen(gw) > 255 || st_u64(o, "cntlid_range", ST_CNTLID_RANGES, &r) < 0 ||
	    r >= ST_CNTLID_RANGES)
		return "a gateway without a name (1-255 bytes) or a controller ID range (0-31)";
	if (!st_ana_ok(st_get(o, "ana")))
		return "a gateway whose ANA states are not {\"GROUP\": \"non-optimized\"|\"inaccessible\"|\"optimized\"}";
	if (e->klen != strlen(gw) + 2 || memcmp(e->key + 2, gw, e->klen - 2) != 0)
		return "the key is not the one its gateway gives";
	if (st_get(st_gateways(p->st), gw))
		return "a second entry for this gateway";
	json_object_object_foreach(st_gateways(p->st), k, g) {
		uint64_t x;
		(void)k;
		if (st_u64(g, "cntlid_range", 0, &x) == 0 && x == r)
			return "a controller ID range another gateway holds";
	}
	json_object_object_add(st_gateways(p->st), gw, json_object_get(o));
	return NULL;
}

/* One entry in pass @pass (0: subsystems, 1: the rest). */
static void parse_one(struct parse *p, const struct group_entry *e, int pass)
{
	char kind = e->klen >= 2 && e->key[1] == '/' ? e->key[0] : 0;
	const char *why = NULL;
	json_object *o = NULL;

	if ((kind == 's') != (pass == 0))
		return;
	if (e->klen > GROUP_KEY_MAX) {
		why = "the key is longer than " GROUP_KEY_MAX_STR " bytes";
	} else if (kind != 's' && kind != 'h' && kind != 'n' && kind != 'l' && kind != 'g') {
		why = "not a kind of entry (s/, h/, n/, l/, g/ or epoch)";
	} else if (e->vlen > GROUP_VALUE_MAX) {
		why = "the value is longer than " GROUP_VALUE_MAX_STR " bytes";
	} else {
		json_tokener *tok = json_tokener_new_ex(32);
		if (tok) {
			o = json_tokener_parse_ex(tok, e->val, (int)e->vlen);
			if (o && tok->char_offset != (int)e->vlen) { /* bytes after the object */
				json_object_put(o);
				o = NULL;
			}
			json_tokener_free(tok);
		}
		if (!o || !json_object_is_type(o, json_type_object))
			why = "the value is not a JSON object";
	}
	if (!why) {
		const char *nqn = st_str(o, "nqn");
		json_object *ss = nqn && kind != 's' && kind != 'l' && kind != 'g' ? st_get(st_subsystems(p->st), nqn) : NULL;
		if (kind == 's')
			why = parse_subsystem(p, e, o);
		else if (kind == 'l')
			why = parse_listener(p, e, o);
		else if (kind == 'g')
			why = parse_gateway(p, e, o);
		else if (!ss)
			why = "its subsystem (\"nqn\") has no entry";
		else
			why = kind == 'h' ? parse_host(e, o, ss) : parse_namespace(e, o, ss);
	}
	json_object_put(o);
	if (why) {
		bad(p, e, why);
		return;
	}
	/* A good key holds no NUL (it is one the value gives): a C string from here on. */
	char *k = strndup(e->key, e->klen);
	if (k)
		json_object_object_add(p->raw, k, json_object_new_string_len(e->val, (int)e->vlen));
	free(k);
}

int group_parse(const struct group_entry *e, size_t n, struct group_parsed *out)
{
	struct parse p = {.st = st_new(), .raw = json_object_new_object(), .bad = json_object_new_array()};
	uint64_t epoch = 0;
	const char *why = NULL;

	*out = (struct group_parsed){0};
	for (size_t i = 0; i < n; i++) {
		if (e[i].klen == 5 && memcmp(e[i].key, "epoch", 5) == 0) {
			char s[32];
			snprintf(s, sizeof(s), "%.*s", (int)(e[i].vlen < 31 ? e[i].vlen : 31), e[i].val);
			epoch = strtoull(s, NULL, 10);
		}
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++)
			if (!(e[i].klen == 5 && memcmp(e[i].key, "epoch", 5) == 0))
				parse_one(&p, &e[i], pass);
	json_object_object_add(p.st, "epoch", json_object_new_int64((int64_t)(epoch & INT64_MAX)));
	if (st_check(p.st, &why) < 0) { /* every entry was checked above: a state that fails is a bug here */
		json_object_put(p.st);
		json_object_put(p.raw);
		json_object_put(p.bad);
		return -EINVAL;
	}
	out->epoch = epoch;
	out->st = p.st;
	out->raw = p.raw;
	out->bad = p.bad;
	out->nbad = p.nbad;
	return 0;
}

void group_parsed_free(struct group_parsed *g)
{
	json_object_put(g->st);
	json_object_put(g->raw);
	json_object_put(g->bad);
	*g = (struct group_parsed){0};
}
