/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmds.c - nkv-ctl's commands: for each, the RPC it calls, how its arguments and options become the
 * request (proto3 JSON mapping, original field names) and how the response reads for people. The
 * server checks every rule; here only the shape of each argument is (a number, a size, an address).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_cli.h"

/* ---- arguments ----------------------------------------------------------------------------- */

static int arg_nsid(const struct ctl_cli *c, const char *s, uint32_t *nsid)
{
	uint64_t v;
	if (parse_u64(s, 1, 0xfffffffeu, &v))
		return ctl_usage(c, "%s: bad NSID '%s' (1 to 4294967294)", c->cmd_name, s);
	*nsid = (uint32_t)v;
	return EXIT_OK;
}

static void put_str(json_object *req, const char *key, const char *v)
{
	json_object_object_add(req, key, json_object_new_string(v));
}

static void put_u32(json_object *req, const char *key, uint32_t v)
{
	json_object_object_add(req, key, json_object_new_int64(v));
}

static void put_bool(json_object *req, const char *key, bool v)
{
	json_object_object_add(req, key, json_object_new_boolean(v));
}

/* ---- cache policy options ------------------------------------------------------------------ */

const struct ctl_policy_opt g_ctl_policy_opts[CTL_NPOLICY] = {
	{"--capacity", "capacity_bytes", POL_SIZE, 0, UINT64_MAX, true},
	{"--capacity-keys", "capacity_keys", POL_NUM, 0, UINT64_MAX, true},
	{"--pin-quota", "pin_quota_bytes", POL_SIZE, 0, UINT64_MAX, true},
	{"--default-ttl", "default_ttl_s", POL_NUM, 0, 4294967294u, false},
	{"--max-ttl", "max_ttl_s", POL_NUM, 0, 4294967294u, false},
	{"--bytes-per-token", "bytes_per_token", POL_SIZE, 0, UINT64_MAX, true},
	{"--eviction", "eviction", POL_EVICT, 0, 0, false},
	{"--low-watermark", "low_watermark_pct", POL_NUM, 0, 99, false},
	{"--overshoot", "overshoot_pct", POL_NUM, 0, 100, false},
	{"--touch-interval", "touch_interval_ms", POL_NUM, 0, UINT32_MAX, false},
	{"--reap-interval", "reap_interval_s", POL_NUM, 0, UINT32_MAX, false},
	{"--reap-rate", "reap_rate", POL_NUM, 0, UINT32_MAX, false},
	{"--lease", "lease_ms", POL_NUM, 0, UINT32_MAX, false},
};

/* The given policy options as a CachePolicy message; their field names into @fields when not NULL. */
static json_object *policy_msg(const struct ctl_cli *c, json_object *fields)
{
	json_object *p = json_object_new_object();
	for (int i = 0; i < CTL_NPOLICY; i++) {
		const struct ctl_policy_opt *o = &g_ctl_policy_opts[i];
		if (!(c->given & O_POLICY(i)))
			continue;
		if (o->kind == POL_EVICT)
			json_object_object_add(p, o->field, json_object_new_string(c->eviction));
		else if (o->u64)
			jput_u64(p, o->field, c->policy[i]);
		else
			json_object_object_add(p, o->field, json_object_new_int64((int64_t)c->policy[i]));
		if (fields)
			json_object_array_add(fields, json_object_new_string(o->field));
	}
	return p;
}

/* ---- builders ------------------------------------------------------------------------------ */

static int b_nqn(struct ctl_cli *c, json_object *req)
{
	put_str(req, "nqn", c->args[0]);
	return EXIT_OK;
}

static int b_nqn_opt(struct ctl_cli *c, json_object *req)
{
	put_str(req, "nqn", c->nargs ? c->args[0] : "");
	return EXIT_OK;
}

static int b_none(struct ctl_cli *c, json_object *req)
{
	(void)c;
	(void)req;
	return EXIT_OK;
}

static int b_subsystem_add(struct ctl_cli *c, json_object *req)
{
	if (!c->pool)
		return ctl_usage(c, "subsystem add: --pool POOL is required (the RADOS pool the subsystem serves)");
	put_str(req, "nqn", c->args[0]);
	put_str(req, "pool", c->pool);
	put_u32(req, "max_namespaces", c->max_ns);
	put_bool(req, "allow_any_host", c->given & O_ANY_HOST);
	put_str(req, "shm_socket", c->shm ? c->shm : "");
	if (c->vfu_host && !c->vfu)
		return ctl_usage(c, "subsystem add: --vfio-user-host needs --vfio-user PATH");
	put_str(req, "vfio_user_socket", c->vfu ? c->vfu : "");
	put_str(req, "vfio_user_host", c->vfu_host ? c->vfu_host : "");
	return EXIT_OK;
}

static int b_ns_add(struct ctl_cli *c, json_object *req)
{
	put_str(req, "nqn", c->args[0]);
	put_u32(req, "nsid", c->nsid);
	put_str(req, "rados_namespace", c->rados_ns ? c->rados_ns : "");
	jput_u64(req, "max_value", c->max_value);
	put_bool(req, "read_only", c->given & O_READ_ONLY);
	put_u32(req, "ana_group", c->ana_group);
	if ((c->given & O_POLICY_ALL) && !(c->given & O_CACHE))
		return ctl_usage(c, "ns add: the cache policy options (--capacity, ...) need --cache");
	if (c->given & O_CACHE) /* present, even empty: a cache namespace */
		json_object_object_add(req, "cache", policy_msg(c, NULL));
	return EXIT_OK;
}

static int b_nqn_nsid(struct ctl_cli *c, json_object *req)
{
	uint32_t nsid = 0; /* set unless arg_nsid() fails; gcc -O3 cannot tell */
	int ex = arg_nsid(c, c->args[1], &nsid);
	if (ex)
		return ex;
	put_str(req, "nqn", c->args[0]);
	put_u32(req, "nsid", nsid);
	return EXIT_OK;
}

static int b_ns_set_ro(struct ctl_cli *c, json_object *req)
{
	const char *v = c->args[2];
	bool on;
	if (!strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "true"))
		on = true;
	else if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false"))
		on = false;
	else
		return ctl_usage(c, "ns set-ro: '%s' is not on or off", v);
	int ex = b_nqn_nsid(c, req);
	if (!ex)
		put_bool(req, "read_only", on);
	return ex;
}

static int b_ns_set_max(struct ctl_cli *c, json_object *req)
{
	uint64_t v;
	if (parse_size(c->args[2], &v))
		return ctl_usage(c, "ns set-max-value: bad SIZE '%s' (bytes, or with K/M/G/T: 64M)", c->args[2]);
	int ex = b_nqn_nsid(c, req);
	if (!ex)
		jput_u64(req, "max_value", v);
	return ex;
}

static int b_cache_policy(struct ctl_cli *c, json_object *req)
{
	if (!(c->given & (O_POLICY_ALL | O_REPLACE)))
		return ctl_usage(c, "ns cache-policy: nothing to change: give policy options (--capacity SIZE, ...), "
				 "or --replace to reset the others to their defaults");
	int ex = b_nqn_nsid(c, req);
	if (ex)
		return ex;
	json_object *fields = json_object_new_array();
	json_object_object_add(req, "policy", policy_msg(c, (c->given & O_REPLACE) ? NULL : fields));
	json_object_object_add(req, "fields", fields); /* empty with --replace: the whole policy */
	return EXIT_OK;
}

static int b_usage(struct ctl_cli *c, json_object *req)
{
	uint32_t nsid = 0;
	int ex = c->nargs > 1 ? arg_nsid(c, c->args[1], &nsid) : EXIT_OK;
	if (ex)
		return ex;
	put_str(req, "nqn", c->args[0]);
	put_u32(req, "nsid", nsid);
	return EXIT_OK;
}

static int b_host(struct ctl_cli *c, json_object *req)
{
	put_str(req, "nqn", c->args[0]);
	put_str(req, "host_nqn", c->args[1]);
	return EXIT_OK;
}

static int b_host_allow(struct ctl_cli *c, json_object *req)
{
	if (c->dhchap_ctrl_key && !c->dhchap_key)
		return ctl_usage(c, "host allow: --dhchap-ctrl-key needs --dhchap-key (the host authenticates first)");
	b_host(c, req);
	put_str(req, "dhchap_key", c->dhchap_key ? c->dhchap_key : "");
	put_str(req, "dhchap_ctrl_key", c->dhchap_ctrl_key ? c->dhchap_ctrl_key : "");
	return EXIT_OK;
}

static int b_listener(struct ctl_cli *c, json_object *req, bool add)
{
	char addr[64];
	uint32_t port;
	if (parse_listener(c->args[0], addr, &port))
		return ctl_usage(c, "%s: bad listener '%s' (IPV4:PORT or [IPV6]:PORT, an address literal and a port "
				 "1 to 65535)", c->cmd_name, c->args[0]);
	put_str(req, "gateway", c->gateway ? c->gateway : "");
	put_str(req, "address", addr);
	put_u32(req, "port", port);
	if (add)
		put_bool(req, "tls", c->given & O_TLS_LISTENER);
	return EXIT_OK;
}

static int b_listener_add(struct ctl_cli *c, json_object *req)
{
	return b_listener(c, req, true);
}

static int b_listener_del(struct ctl_cli *c, json_object *req)
{
	return b_listener(c, req, false);
}

static int b_listener_list(struct ctl_cli *c, json_object *req)
{
	put_str(req, "gateway", c->gateway ? c->gateway : "");
	return EXIT_OK;
}

/* ---- output -------------------------------------------------------------------------------- */

static const char *dash(const char *s)
{
	return *s ? s : "-";
}

static void kv(const char *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kv(const char *k, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%-16s", k);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

static const char *max_value_str(uint64_t v, char buf[64])
{
	char s[32];
	snprintf(buf, 64, "%s (%" PRIu64 " bytes)", size_str(v, s), v);
	return buf;
}

static json_object *member(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_object) ? v : NULL;
}

/* "64 MiB" / "no limit" for a capacity. */
static const char *limit_str(uint64_t v, char buf[32])
{
	if (!v)
		return "no limit";
	return size_str(v, buf);
}

static void ns_table(json_object *o, const char *key, int indent)
{
	static const char *const h[] = {"NSID", "RADOS NAMESPACE", "MAX VALUE", "MODE", "NGUID", "CACHE"};
	bool caches = false; /* the CACHE column only where a cache is listed */
	for (size_t i = 0; i < jlen(o, key); i++)
		caches |= member(jat(o, key, i), "cache") != NULL;
	struct table *t = tab_new(caches ? 6 : 5, h);
	for (size_t i = 0; i < jlen(o, key); i++) {
		json_object *n = jat(o, key, i), *pc = member(n, "cache");
		char nsid[16], mv[32], cap[32];
		snprintf(nsid, sizeof(nsid), "%" PRIu64, ju64(n, "nsid"));
		const char *row[] = {nsid, dash(jstr(n, "rados_namespace")), size_str(ju64(n, "max_value"), mv),
				     jbool(n, "read_only") ? "ro" : "rw", dash(jstr(n, "nguid")),
				     pc ? limit_str(ju64(pc, "capacity_bytes"), cap) : "-"};
		tab_row(t, row);
	}
	tab_print(t, stdout, indent);
}

/* A cache policy for people: 0 reads as the default it stands for. */
static void show_policy(json_object *p)
{
	char b[32];
	uint64_t v;
	printf("%-16s", "capacity");
	v = ju64(p, "capacity_bytes");
	printf("%s", v ? size_str(v, b) : "no byte limit");
	v = ju64(p, "capacity_keys");
	if (v)
		printf(", %" PRIu64 " keys", v);
	else
		printf(", no key limit");
	putchar('\n');
	v = ju64(p, "pin_quota_bytes");
	printf("%-16s%s\n", "pin quota", v ? size_str(v, b) : "no quota");
	v = ju64(p, "default_ttl_s");
	if (v)
		printf("%-16s%" PRIu64 " s\n", "default ttl", v);
	else
		printf("%-16s%s\n", "default ttl", "never expire");
	v = ju64(p, "max_ttl_s");
	if (v)
		printf("%-16s%" PRIu64 " s\n", "max ttl", v);
	else
		printf("%-16s%s\n", "max ttl", "no limit");
	v = ju64(p, "bytes_per_token");
	if (v)
		printf("%-16s%" PRIu64 "\n", "bytes per token", v);
	else
		printf("%-16s%s\n", "bytes per token", "- (no token-hours)");
	printf("%-16s%s\n", "eviction", *jstr(p, "eviction") ? jstr(p, "eviction") : "lru");
	static const struct { const char *k, *f, *unit, *def; } n[] = {
		{"low watermark", "low_watermark_pct", "%", "90%"}, {"overshoot", "overshoot_pct", "%", "10%"},
		{"touch interval", "touch_interval_ms", " ms", "10000 ms"}, {"reap interval", "reap_interval_s", " s", "10 s"},
		{"reap rate", "reap_rate", "/s", "2000/s"}, {"eviction lease", "lease_ms", " ms", "10000 ms"},
	};
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		v = ju64(p, n[i].f);
		if (v)
			printf("%-16s%" PRIu64 "%s\n", n[i].k, v, n[i].unit);
		else
			printf("%-16s%s (default)\n", n[i].k, n[i].def);
	}
}

static void show_subsystem(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	kv("subsystem", "%s", jstr(o, "nqn"));
	kv("pool", "%s", jstr(o, "pool"));
	kv("serial number", "%s", dash(jstr(o, "serial_number")));
	uint64_t mx = ju64(o, "max_namespaces");
	if (mx)
		kv("max namespaces", "%" PRIu64, mx);
	else
		kv("max namespaces", "the target's limit (1024)");
	if (jbool(o, "allow_any_host")) {
		kv("hosts", "any host may connect");
	} else if (jbool(o, "loopback_any_host")) {
		kv("hosts", "any host, through loopback and TLS listeners only (no allowlist; host allow NQN '*' opens it)");
	} else if (jlen(o, "hosts") == 0) {
		kv("hosts", "allowlist, empty: no host may connect");
	} else {
		printf("%-16s", "hosts");
		for (size_t i = 0; i < jlen(o, "hosts"); i++)
			printf("%s%s", i ? ", " : "", json_object_get_string(jat(o, "hosts", i)));
		putchar('\n');
	}
	kv("shm socket", "%s", dash(jstr(o, "shm_socket")));
	if (*jstr(o, "vfio_user_socket"))
		kv("vfio-user", "%s (clients act as %s)", jstr(o, "vfio_user_socket"),
		   *jstr(o, "vfio_user_host") ? jstr(o, "vfio_user_host") : "their uid's NQN");
	kv("namespaces", "%zu", jlen(o, "namespaces"));
	if (jlen(o, "namespaces"))
		ns_table(o, "namespaces", 2);
}

static void show_subsystems(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	if (!jlen(o, "subsystems")) {
		printf("no subsystems\n");
		return;
	}
	static const char *const h[] = {"NQN", "POOL", "NAMESPACES", "HOSTS", "SHM SOCKET"};
	struct table *t = tab_new(5, h);
	for (size_t i = 0; i < jlen(o, "subsystems"); i++) {
		json_object *s = jat(o, "subsystems", i);
		char ns[16], hosts[16];
		snprintf(ns, sizeof(ns), "%zu", jlen(s, "namespaces"));
		snprintf(hosts, sizeof(hosts), "%zu", jlen(s, "hosts"));
		const char *row[] = {jstr(s, "nqn"), jstr(s, "pool"), ns, jbool(s, "allow_any_host") ? "any" : jbool(s, "loopback_any_host") ? "any (loopback)" : hosts,
				     dash(jstr(s, "shm_socket"))};
		tab_row(t, row);
	}
	tab_print(t, stdout, 0);
}

static void show_deleted(const struct ctl_cli *c, json_object *o)
{
	(void)o;
	printf("deleted subsystem %s\n", c->args[0]);
}

static void show_namespace(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	char mv[64];
	kv("namespace", "%" PRIu64 " of %s", ju64(o, "nsid"), jstr(o, "nqn"));
	kv("rados namespace", "%s", dash(jstr(o, "rados_namespace")));
	kv("max value", "%s", max_value_str(ju64(o, "max_value"), mv));
	kv("mode", "%s", jbool(o, "read_only") ? "read-only" : "read-write");
	kv("nguid", "%s", dash(jstr(o, "nguid")));
	kv("ana group", "%" PRIu64, ju64(o, "ana_group"));
	json_object *p = member(o, "cache");
	kv("cache", "%s", p ? "yes" : "no");
	if (p)
		show_policy(p);
}

static void show_namespaces(const struct ctl_cli *c, json_object *o)
{
	if (!jlen(o, "namespaces")) {
		printf("no namespaces in %s\n", c->args[0]);
		return;
	}
	ns_table(o, "namespaces", 0);
}

static void show_ns_removed(const struct ctl_cli *c, json_object *o)
{
	(void)o;
	printf("removed namespace %s from %s\n", c->args[1], c->args[0]);
}

static void show_stats(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	char b[32];
	kv("namespace", "%" PRIu64 " of %s", ju64(o, "nsid"), jstr(o, "nqn"));
	kv("gateway", "%s", dash(jstr(o, "gateway")));
	static const char *const counts[] = {"stores", "retrieves", "deletes", "exists", "lists", "errors", "in_flight"};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		char k[24];
		snprintf(k, sizeof(k), "%s", counts[i]);
		for (char *p = k; *p; p++)
			if (*p == '_')
				*p = ' ';
		kv(k, "%" PRIu64, ju64(o, counts[i]));
	}
	kv("bytes written", "%" PRIu64 " (%s)", ju64(o, "bytes_written"), size_str(ju64(o, "bytes_written"), b));
	kv("bytes read", "%" PRIu64 " (%s)", ju64(o, "bytes_read"), size_str(ju64(o, "bytes_read"), b));
	kv("used", "%" PRIu64 " (%s)", ju64(o, "used_bytes"), size_str(ju64(o, "used_bytes"), b));
}

static double jdouble(json_object *o, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int) ? json_object_get_double(v) : 0;
}

static void show_usage(const struct ctl_cli *c, json_object *o)
{
	char b[32], b2[32];
	size_t n = jlen(o, "namespaces");
	if (!n) {
		printf("no cache namespaces of %s served by the answering gateway\n", c->args[0]);
		return;
	}
	if (c->nargs > 1) { /* one namespace: every figure */
		json_object *u = jat(o, "namespaces", 0);
		kv("namespace", "%" PRIu64 " of %s", ju64(u, "nsid"), jstr(u, "nqn"));
		kv("gateway", "%s%s", dash(jstr(u, "gateway")), jbool(u, "evicting") ? " (holds the eviction lease)" : "");
		kv("gateways", "%" PRIu64 " reporting usage", ju64(u, "gateways"));
		kv("used", "%" PRIu64 " (%s) of %s", ju64(u, "used_bytes"), size_str(ju64(u, "used_bytes"), b),
		   limit_str(ju64(u, "capacity_bytes"), b2));
		kv("keys", "%" PRIu64 "%s", ju64(u, "keys"), ju64(u, "capacity_keys") ? "" : " (no key limit)");
		if (ju64(u, "capacity_keys"))
			kv("key limit", "%" PRIu64, ju64(u, "capacity_keys"));
		kv("pinned", "%" PRIu64 " (%s) in %" PRIu64 " keys", ju64(u, "pinned_bytes"), size_str(ju64(u, "pinned_bytes"), b),
		   ju64(u, "pinned_keys"));
		kv("evictions", "%" PRIu64 " (%s)", ju64(u, "evictions"), size_str(ju64(u, "evicted_bytes"), b));
		kv("expirations", "%" PRIu64 " (%s)", ju64(u, "expirations"), size_str(ju64(u, "expired_bytes"), b));
		kv("byte-hours", "%.1f", jdouble(u, "byte_hours"));
		kv("token-hours", "%.3f", jdouble(u, "token_hours"));
		printf("policy:\n");
		if (member(u, "policy"))
			show_policy(member(u, "policy"));
		return;
	}
	static const char *const h[] = {"NSID", "USED", "CAPACITY", "KEYS", "PINNED", "EVICTIONS", "EXPIRATIONS",
					"BYTE-HOURS", "TOKEN-HOURS", "LEASE"};
	struct table *t = tab_new(10, h);
	for (size_t i = 0; i < n; i++) {
		json_object *u = jat(o, "namespaces", i);
		char nsid[16], keys[24], ev[24], ex[24], bh[32], th[32];
		snprintf(nsid, sizeof(nsid), "%" PRIu64, ju64(u, "nsid"));
		snprintf(keys, sizeof(keys), "%" PRIu64, ju64(u, "keys"));
		snprintf(ev, sizeof(ev), "%" PRIu64, ju64(u, "evictions"));
		snprintf(ex, sizeof(ex), "%" PRIu64, ju64(u, "expirations"));
		snprintf(bh, sizeof(bh), "%.1f", jdouble(u, "byte_hours"));
		snprintf(th, sizeof(th), "%.3f", jdouble(u, "token_hours"));
		char used[32], cap[32], pin[32];
		const char *row[] = {nsid, size_str(ju64(u, "used_bytes"), used), limit_str(ju64(u, "capacity_bytes"), cap), keys,
				     size_str(ju64(u, "pinned_bytes"), pin), ev, ex, bh, th, jbool(u, "evicting") ? "yes" : "no"};
		tab_row(t, row);
	}
	tab_print(t, stdout, 0);
}

static const char *auth_str(json_object *h)
{
	if (!jbool(h, "dhchap"))
		return "none";
	return jbool(h, "dhchap_bidirectional") ? "DH-HMAC-CHAP, bidirectional" : "DH-HMAC-CHAP";
}

static void show_host(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	if (strcmp(jstr(o, "host_nqn"), "*") == 0)
		printf("%s admits any host now, through every listener\n", jstr(o, "nqn"));
	else
		printf("allowed %s on %s (authentication: %s)\n", jstr(o, "host_nqn"), jstr(o, "nqn"), auth_str(o));
}

static void show_disallowed(const struct ctl_cli *c, json_object *o)
{
	uint64_t n = ju64(o, "disconnected");
	if (strcmp(c->args[1], "*") == 0)
		printf("%s admits only the hosts on its allowlist now; ", c->args[0]);
	else
		printf("disallowed %s on %s; ", c->args[1], c->args[0]);
	printf("%" PRIu64 " controller%s disconnected by the answering gateway\n", n, n == 1 ? "" : "s");
}

static void show_hosts(const struct ctl_cli *c, json_object *o)
{
	if (!jlen(o, "hosts")) {
		printf("no hosts on the allowlist of %s\n", c->args[0]);
		return;
	}
	static const char *const h[] = {"HOST NQN", "AUTHENTICATION"};
	struct table *t = tab_new(2, h);
	for (size_t i = 0; i < jlen(o, "hosts"); i++) {
		json_object *x = jat(o, "hosts", i);
		const char *row[] = {jstr(x, "host_nqn"), auth_str(x)};
		tab_row(t, row);
	}
	tab_print(t, stdout, 0);
}

static void conn_table(json_object *o, int indent)
{
	static const char *const h[] = {"SUBSYSTEM", "HOST NQN", "CNTLID", "IO QUEUES", "TRANSPORT", "AUTHENTICATED"};
	struct table *t = tab_new(6, h);
	for (size_t i = 0; i < jlen(o, "connections"); i++) {
		json_object *x = jat(o, "connections", i);
		char id[16], q[16];
		snprintf(id, sizeof(id), "%" PRIu64, ju64(x, "cntlid"));
		snprintf(q, sizeof(q), "%" PRIu64, ju64(x, "io_queues"));
		const char *row[] = {jstr(x, "nqn"), jstr(x, "host_nqn"), id, q, dash(jstr(x, "transport")),
				     jbool(x, "authenticated") ? "yes" : "no"};
		tab_row(t, row);
	}
	tab_print(t, stdout, indent);
}

static void show_connections(const struct ctl_cli *c, json_object *o)
{
	if (!jlen(o, "connections")) {
		printf("no connections%s%s\n", c->nargs ? " to " : "", c->nargs ? c->args[0] : "");
		return;
	}
	conn_table(o, 0);
}

/* "10.0.0.1:4420", "[fd00::2]:4421" */
static const char *listener_str(json_object *l, char buf[80])
{
	const char *a = jstr(l, "address");
	bool v6 = strchr(a, ':') != NULL;
	snprintf(buf, 80, "%s%s%s:%" PRIu64, v6 ? "[" : "", a, v6 ? "]" : "", ju64(l, "port"));
	return buf;
}

static void listener_table(json_object *o, int indent)
{
	static const char *const h[] = {"GATEWAY", "LISTENER", "TLS", "ACTIVE"};
	struct table *t = tab_new(4, h);
	for (size_t i = 0; i < jlen(o, "listeners"); i++) {
		json_object *x = jat(o, "listeners", i);
		char b[80];
		const char *row[] = {dash(jstr(x, "gateway")), listener_str(x, b), jbool(x, "tls") ? "yes" : "no",
				     jbool(x, "active") ? "yes" : "no"};
		tab_row(t, row);
	}
	tab_print(t, stdout, indent);
}

static void show_listener(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	char b[80];
	printf("listener %s on gateway %s%s, %s\n", listener_str(o, b), dash(jstr(o, "gateway")),
	       jbool(o, "tls") ? " (TLS)" : "", jbool(o, "active") ? "active" : "not active yet");
}

static void show_listener_removed(const struct ctl_cli *c, json_object *o)
{
	(void)o;
	printf("removed listener %s%s%s\n", c->args[0], c->gateway ? " from gateway " : "", c->gateway ? c->gateway : "");
}

static void show_listeners(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	if (!jlen(o, "listeners")) {
		printf("no listeners\n");
		return;
	}
	listener_table(o, 0);
}

static void show_gateway(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	uint64_t up = ju64(o, "uptime_s");
	kv("gateway", "%s", dash(jstr(o, "name")));
	kv("version", "%s", dash(jstr(o, "version")));
	kv("group", "%s", *jstr(o, "group") ? jstr(o, "group") : "- (not in a group)");
	kv("state epoch", "%" PRIu64, ju64(o, "epoch"));
	kv("state store", "%s", dash(jstr(o, "state_store")));
	if (ju64(o, "cntlid_min"))
		kv("controller IDs", "%" PRIu64 "-%" PRIu64, ju64(o, "cntlid_min"), ju64(o, "cntlid_max"));
	else
		kv("controller IDs", "none yet (Connects refused until it joins its group)");
	kv("backend", "%s", dash(jstr(o, "backend")));
	kv("uptime", "%" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64 " (%" PRIu64 " s)", up / 86400,
	   up / 3600 % 24, up / 60 % 60, up % 60, up);
	kv("listeners", "%zu", jlen(o, "listeners"));
	if (jlen(o, "listeners"))
		listener_table(o, 2);
	kv("connections", "%zu", jlen(o, "connections"));
	if (jlen(o, "connections"))
		conn_table(o, 2);
}

static int b_ana_set(struct ctl_cli *c, json_object *req)
{
	uint64_t g;
	if (parse_u64(c->args[0], 1, 32, &g))
		return ctl_usage(c, "ana set: bad ANA group '%s' (1 to 32)", c->args[0]);
	if (strcmp(c->args[1], "optimized") != 0 && strcmp(c->args[1], "non-optimized") != 0 &&
	    strcmp(c->args[1], "inaccessible") != 0)
		return ctl_usage(c, "ana set: bad state '%s' (optimized, non-optimized or inaccessible)", c->args[1]);
	put_str(req, "gateway", c->gateway ? c->gateway : "");
	put_u32(req, "ana_group", (uint32_t)g);
	put_str(req, "state", c->args[1]);
	return EXIT_OK;
}

static int b_ana_get(struct ctl_cli *c, json_object *req)
{
	put_str(req, "gateway", c->gateway ? c->gateway : "");
	return EXIT_OK;
}

static void show_ana_state(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	printf("gateway %s: ANA group %" PRIu64 " %s\n", dash(jstr(o, "gateway")), ju64(o, "ana_group"), dash(jstr(o, "state")));
}

static void show_ana_states(const struct ctl_cli *c, json_object *o)
{
	json_object *a = NULL;
	(void)c;
	json_object_object_get_ex(o, "states", &a);
	printf("%-24s %-9s %s\n", "GATEWAY", "ANA GROUP", "STATE");
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		json_object *x = json_object_array_get_idx(a, i);
		printf("%-24s %-9" PRIu64 " %s\n", dash(jstr(x, "gateway")), ju64(x, "ana_group"), dash(jstr(x, "state")));
	}
}

static int b_repair(struct ctl_cli *c, json_object *req)
{
	if (!c->nargs && !(c->given & O_ALL))
		return ctl_usage(c, "group repair: name the malformed entries (KEY..., as group check lists them), or --all");
	if (c->nargs && (c->given & O_ALL))
		return ctl_usage(c, "group repair: KEY... or --all, not both");
	json_object *keys = json_object_new_array();
	for (int i = 0; i < c->nargs; i++)
		json_object_array_add(keys, json_object_new_string(c->args[i]));
	json_object_object_add(req, "keys", keys);
	put_bool(req, "all", c->given & O_ALL);
	return EXIT_OK;
}

static void show_state(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	kv("state store", "%s", dash(jstr(o, "state_store")));
	kv("stored epoch", "%" PRIu64, ju64(o, "epoch"));
	kv("applied epoch", "%" PRIu64, ju64(o, "applied_epoch"));
	kv("malformed", "%" PRIu64 "%s", ju64(o, "malformed"),
	   ju64(o, "malformed") ? " (changes are refused until they are removed: group repair)" : "");
	for (size_t i = 0; i < jlen(o, "malformed_entries"); i++) {
		json_object *e = jat(o, "malformed_entries", i);
		printf("  %s\n    %s\n", jstr(e, "key"), jstr(e, "reason"));
	}
}

/* ---- the table ----------------------------------------------------------------------------- */

const struct ctl_cmd g_ctl_cmds[] = {
	{"subsystem", "add", "create a subsystem over a RADOS pool", "CreateSubsystem", 1, 1, O_POOL | O_MAX_NS | O_ANY_HOST | O_SHM | O_VFU, b_subsystem_add,
	 show_subsystem,
	 "subsystem add NQN --pool POOL [--max-namespaces N] [--allow-any-host] [--shm PATH] [--vfio-user PATH\n"
	 "              [--vfio-user-host NQN]]\n"
	 "  Create subsystem NQN over RADOS pool POOL, in the group's state and live on every gateway.\n"
	 "  --max-namespaces N: at most N namespaces (default 0: the target's limit, 1024);\n"
	 "  --allow-any-host: no allowlist; --shm PATH: also serve it over shared memory on Unix socket PATH;\n"
	 "  --vfio-user PATH: also serve it as a vfio-user PCI NVMe device on Unix socket PATH (both paths\n"
	 "  directly in the daemon's --shm-dir), its clients acting as --vfio-user-host NQN (default: an NQN\n"
	 "  made from their uid)."},
	{"subsystem", "del", "delete a subsystem", "DeleteSubsystem", 1, 1, 0, b_nqn, show_deleted,
	 "subsystem del NQN\n  Delete subsystem NQN (its data stays in the pool)."},
	{"subsystem", "list", "list the subsystems of the group", "ListSubsystems", 0, 0, 0, b_none, show_subsystems,
	 "subsystem list\n  The subsystems of the group."},
	{"subsystem", "get", "a subsystem, its hosts and namespaces", "GetSubsystem", 1, 1, 0, b_nqn, show_subsystem,
	 "subsystem get NQN\n  Subsystem NQN with its hosts and namespaces."},
	{"ns", "add", "add a namespace (a RADOS namespace of the pool)", "AddNamespace", 1, 1, O_NSID | O_RADOS_NS | O_MAX_VALUE | O_READ_ONLY | O_CACHE | O_POLICY_ALL | O_ANA_GROUP, b_ns_add, show_namespace,
	 "ns add NQN [--nsid N] [--rados-ns NAME] [--max-value SIZE] [--read-only] [--ana-group G] [--cache [POLICY]]\n"
	 "  Add a namespace to NQN: NSID N (default: the lowest free one) on RADOS namespace NAME of the\n"
	 "  subsystem's pool; --max-value: its largest value (default 64M or the cluster's limit);\n"
	 "  --ana-group: its ANA group, 1-32 (default 1; see ana set).\n"
	 "  --cache: a cache namespace (TTLs, pins, capacity with eviction), with the POLICY options\n"
	 "  (see ns cache-policy; none: TTLs and pins, no limits). Only at creation."},
	{"ns", "del", "remove a namespace", "RemoveNamespace", 2, 2, 0, b_nqn_nsid, show_ns_removed,
	 "ns del NQN NSID\n  Remove namespace NSID from NQN (its keys stay in RADOS)."},
	{"ns", "list", "list the namespaces of a subsystem", "ListNamespaces", 1, 1, 0, b_nqn, show_namespaces, "ns list NQN\n  The namespaces of NQN."},
	{"ns", "set-ro", "make a namespace read-only or writable", "SetNamespaceReadOnly", 3, 3, 0, b_ns_set_ro, show_namespace,
	 "ns set-ro NQN NSID on|off\n  Make namespace NSID read-only (on) or writable (off)."},
	{"ns", "set-max-value", "set the largest value of a namespace", "SetNamespaceMaxValue", 3, 3, 0, b_ns_set_max, show_namespace,
	 "ns set-max-value NQN NSID SIZE\n  Set the largest value of namespace NSID (KVVML; K/M/G/T suffixes)."},
	{"ns", "stats", "the answering gateway's counters of a namespace", "GetNamespaceStats", 2, 2, 0, b_nqn_nsid, show_stats,
	 "ns stats NQN NSID\n  The answering gateway's counters for namespace NSID."},
	{"ns", "cache-policy", "change a cache namespace's policy live", "SetCachePolicy", 2, 2, O_POLICY_ALL | O_REPLACE, b_cache_policy, show_namespace,
	 "ns cache-policy NQN NSID [--capacity SIZE] [--capacity-keys N] [--pin-quota SIZE] [--default-ttl S]\n"
	 "  [--max-ttl S] [--bytes-per-token N] [--eviction lru|fifo|off] [--low-watermark PCT] [--overshoot PCT]\n"
	 "  [--touch-interval MS] [--reap-interval S] [--reap-rate N] [--lease MS] [--replace]\n"
	 "  Change the policy of cache namespace NSID on every gateway, live: the options given change, the\n"
	 "  others stay (--replace: the others go back to their defaults). 0 means the default: --capacity,\n"
	 "  --capacity-keys, --pin-quota, --max-ttl: no limit; --default-ttl: never expire; --low-watermark\n"
	 "  90; --overshoot 10; --touch-interval 10000; --reap-interval 10; --reap-rate 2000; --lease 10000.\n"
	 "  --eviction off: never evict (Stores past the hard limit get 81h). TTLs in seconds."},
	{"host", "allow", "allow a host (optionally with DH-HMAC-CHAP keys)", "AllowHost", 2, 2, O_DHCHAP | O_DHCHAP_CTRL, b_host_allow, show_host,
	 "host allow NQN HOSTNQN [--dhchap-key KEY|@FILE] [--dhchap-ctrl-key KEY|@FILE]\n"
	 "  Put HOSTNQN on NQN's allowlist; with --dhchap-key it must authenticate with DH-HMAC-CHAP\n"
	 "  (DHHC-1:hh:...:, as nvme gen-dhchap-key prints it), with --dhchap-ctrl-key too the controller\n"
	 "  authenticates itself (bidirectional). @FILE reads the key from FILE. HOSTNQN '*': any host may\n"
	 "  connect, through every listener (allow_any_host); refused while NQN admits any host already,\n"
	 "  where a host entry would restrict nothing."},
	{"host", "disallow", "disallow a host and disconnect it", "DisallowHost", 2, 2, 0, b_host, show_disallowed,
	 "host disallow NQN HOSTNQN\n  Take HOSTNQN off NQN's allowlist and disconnect its controllers. HOSTNQN '*':\n"
	 "  NQN stops admitting any host; only its allowlist applies (empty: nobody)."},
	{"host", "list", "the allowlist of a subsystem", "ListHosts", 1, 1, 0, b_nqn, show_hosts, "host list NQN\n  The allowlist of NQN."},
	{"usage", NULL, "cache usage: bytes, keys, pins, evictions, byte-/token-hours", "GetUsage", 1, 2, 0, b_usage, show_usage,
	 "usage NQN [NSID]\n"
	 "  The usage of cache namespace NSID of NQN (or of each of its cache namespaces served by the\n"
	 "  answering gateway): used bytes and keys against the capacity, pinned bytes, evictions,\n"
	 "  expirations, byte-hours and token-hours, shared by every gateway serving it."},
	{"connections", NULL, "controllers connected to the answering gateway", "ListConnections", 0, 1, 0, b_nqn_opt, show_connections,
	 "connections [NQN]\n  The controllers connected to the answering gateway (to NQN, or to any subsystem)."},
	{"listener", "add", "serve NVMe/TCP on an address (of one gateway)", "AddListener", 1, 1, O_GATEWAY | O_TLS_LISTENER, b_listener_add, show_listener,
	 "listener add ADDR:PORT [--gateway NAME] [--tls]\n"
	 "  Serve NVMe/TCP on ADDR:PORT ([V6]:PORT for IPv6) from gateway NAME (default: the answering\n"
	 "  one); --tls: TLS 1.3 with a PSK only (TP 8011)."},
	{"listener", "del", "stop serving an address", "RemoveListener", 1, 1, O_GATEWAY, b_listener_del, show_listener_removed,
	 "listener del ADDR:PORT [--gateway NAME]\n  Stop serving ADDR:PORT on gateway NAME (default: the answering one)."},
	{"listener", "list", "the listeners of one gateway or of all", "ListListeners", 0, 0, O_GATEWAY, b_listener_list, show_listeners,
	 "listener list [--gateway NAME]\n  The listeners of gateway NAME, or of every gateway of the group."},
	{"gateway", "info", "the answering gateway: version, group, state epoch, controller IDs", "GetGatewayInfo", 0, 0, 0, b_none, show_gateway,
	 "gateway info\n  The answering gateway: name, version, group, state epoch, listeners, connections."},
	{"group", "check", "the group's state: epochs, malformed entries", "CheckState", 0, 0, 0, b_none, show_state,
	 "group check\n  The group's stored epoch, the epoch the answering gateway runs, and the entries of the\n"
	 "  group's state that no gateway could have written (each key, escaped as \\xHH outside printable\n"
	 "  ASCII, with the reason). While there are any, gateways run the other entries and refuse changes."},
	{"group", "repair", "remove malformed entries from the group's state", "RepairState", 0, 256, O_ALL, b_repair, show_state,
	 "group repair [KEY...] [--all]\n  Remove the malformed entries KEY (as group check writes them), or all of them, in one\n"
	 "  commit; well-formed entries cannot be removed this way. Every gateway then runs the repaired state."},
	{"ana", "set", "a gateway's ANA state for an ANA group (drain before maintenance)", "SetAnaState", 2, 2, O_GATEWAY, b_ana_set, show_ana_state,
	 "ana set GROUP optimized|non-optimized|inaccessible [--gateway NAME]\n"
	 "  The ANA state of ANA group GROUP (1-32) on gateway NAME (default: the answering one), kept in\n"
	 "  the group's state. Hosts with native multipath send I/O to optimized paths; non-optimized ones\n"
	 "  are used when no optimized path is left; I/O through an inaccessible one fails with a path\n"
	 "  error that the host retries on another gateway. The gateway's controllers get an ANA Change\n"
	 "  notice. Drain a gateway with non-optimized (or inaccessible), then stop it."},
	{"ana", "get", "the ANA states of the group's gateways", "GetAnaState", 0, 0, O_GATEWAY, b_ana_get, show_ana_states,
	 "ana get [--gateway NAME]\n  Each gateway's (or NAME's) state of ANA group 1, of every group that holds a namespace\n"
	 "  and of every group whose state was set."},
};

const unsigned g_ctl_ncmds = sizeof(g_ctl_cmds) / sizeof(g_ctl_cmds[0]);
