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
	return EXIT_OK;
}

static int b_ns_add(struct ctl_cli *c, json_object *req)
{
	put_str(req, "nqn", c->args[0]);
	put_u32(req, "nsid", c->nsid);
	put_str(req, "rados_namespace", c->rados_ns ? c->rados_ns : "");
	jput_u64(req, "max_value", c->max_value);
	put_bool(req, "read_only", c->given & O_READ_ONLY);
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

static void ns_table(json_object *o, const char *key, int indent)
{
	static const char *const h[] = {"NSID", "RADOS NAMESPACE", "MAX VALUE", "MODE", "NGUID"};
	struct table *t = tab_new(5, h);
	for (size_t i = 0; i < jlen(o, key); i++) {
		json_object *n = jat(o, key, i);
		char nsid[16], mv[32];
		snprintf(nsid, sizeof(nsid), "%" PRIu64, ju64(n, "nsid"));
		const char *row[] = {nsid, dash(jstr(n, "rados_namespace")), size_str(ju64(n, "max_value"), mv),
				     jbool(n, "read_only") ? "ro" : "rw", dash(jstr(n, "nguid"))};
		tab_row(t, row);
	}
	tab_print(t, stdout, indent);
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
	} else if (jlen(o, "hosts") == 0) {
		kv("hosts", "allowlist, empty: no host may connect");
	} else {
		printf("%-16s", "hosts");
		for (size_t i = 0; i < jlen(o, "hosts"); i++)
			printf("%s%s", i ? ", " : "", json_object_get_string(jat(o, "hosts", i)));
		putchar('\n');
	}
	kv("shm socket", "%s", dash(jstr(o, "shm_socket")));
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
		const char *row[] = {jstr(s, "nqn"), jstr(s, "pool"), ns, jbool(s, "allow_any_host") ? "any" : hosts,
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

static const char *auth_str(json_object *h)
{
	if (!jbool(h, "dhchap"))
		return "none";
	return jbool(h, "dhchap_bidirectional") ? "DH-HMAC-CHAP, bidirectional" : "DH-HMAC-CHAP";
}

static void show_host(const struct ctl_cli *c, json_object *o)
{
	(void)c;
	printf("allowed %s on %s (authentication: %s)\n", jstr(o, "host_nqn"), jstr(o, "nqn"), auth_str(o));
}

static void show_disallowed(const struct ctl_cli *c, json_object *o)
{
	uint64_t n = ju64(o, "disconnected");
	printf("disallowed %s on %s; %" PRIu64 " controller%s disconnected by the answering gateway\n", c->args[1],
	       c->args[0], n, n == 1 ? "" : "s");
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

/* ---- the table ----------------------------------------------------------------------------- */

const struct ctl_cmd g_ctl_cmds[] = {
	{"subsystem", "add", "create a subsystem over a RADOS pool", "CreateSubsystem", 1, 1, O_POOL | O_MAX_NS | O_ANY_HOST | O_SHM, b_subsystem_add,
	 show_subsystem,
	 "subsystem add NQN --pool POOL [--max-namespaces N] [--allow-any-host] [--shm PATH]\n"
	 "  Create subsystem NQN over RADOS pool POOL, in the group's state and live on every gateway.\n"
	 "  --max-namespaces N: at most N namespaces (default 0: the target's limit, 1024);\n"
	 "  --allow-any-host: no allowlist; --shm PATH: also serve it over shared memory on Unix socket PATH."},
	{"subsystem", "del", "delete a subsystem", "DeleteSubsystem", 1, 1, 0, b_nqn, show_deleted,
	 "subsystem del NQN\n  Delete subsystem NQN (its data stays in the pool)."},
	{"subsystem", "list", "list the subsystems of the group", "ListSubsystems", 0, 0, 0, b_none, show_subsystems,
	 "subsystem list\n  The subsystems of the group."},
	{"subsystem", "get", "a subsystem, its hosts and namespaces", "GetSubsystem", 1, 1, 0, b_nqn, show_subsystem,
	 "subsystem get NQN\n  Subsystem NQN with its hosts and namespaces."},
	{"ns", "add", "add a namespace (a RADOS namespace of the pool)", "AddNamespace", 1, 1, O_NSID | O_RADOS_NS | O_MAX_VALUE | O_READ_ONLY, b_ns_add, show_namespace,
	 "ns add NQN [--nsid N] [--rados-ns NAME] [--max-value SIZE] [--read-only]\n"
	 "  Add a namespace to NQN: NSID N (default: the lowest free one) on RADOS namespace NAME of the\n"
	 "  subsystem's pool; --max-value: its largest value (default 64M or the cluster's limit)."},
	{"ns", "del", "remove a namespace", "RemoveNamespace", 2, 2, 0, b_nqn_nsid, show_ns_removed,
	 "ns del NQN NSID\n  Remove namespace NSID from NQN (its keys stay in RADOS)."},
	{"ns", "list", "list the namespaces of a subsystem", "ListNamespaces", 1, 1, 0, b_nqn, show_namespaces, "ns list NQN\n  The namespaces of NQN."},
	{"ns", "set-ro", "make a namespace read-only or writable", "SetNamespaceReadOnly", 3, 3, 0, b_ns_set_ro, show_namespace,
	 "ns set-ro NQN NSID on|off\n  Make namespace NSID read-only (on) or writable (off)."},
	{"ns", "set-max-value", "set the largest value of a namespace", "SetNamespaceMaxValue", 3, 3, 0, b_ns_set_max, show_namespace,
	 "ns set-max-value NQN NSID SIZE\n  Set the largest value of namespace NSID (KVVML; K/M/G/T suffixes)."},
	{"ns", "stats", "the answering gateway's counters of a namespace", "GetNamespaceStats", 2, 2, 0, b_nqn_nsid, show_stats,
	 "ns stats NQN NSID\n  The answering gateway's counters for namespace NSID."},
	{"host", "allow", "allow a host (optionally with DH-HMAC-CHAP keys)", "AllowHost", 2, 2, O_DHCHAP | O_DHCHAP_CTRL, b_host_allow, show_host,
	 "host allow NQN HOSTNQN [--dhchap-key KEY|@FILE] [--dhchap-ctrl-key KEY|@FILE]\n"
	 "  Put HOSTNQN on NQN's allowlist; with --dhchap-key it must authenticate with DH-HMAC-CHAP\n"
	 "  (DHHC-1:hh:...:, as nvme gen-dhchap-key prints it), with --dhchap-ctrl-key too the controller\n"
	 "  authenticates itself (bidirectional). @FILE reads the key from FILE."},
	{"host", "disallow", "disallow a host and disconnect it", "DisallowHost", 2, 2, 0, b_host, show_disallowed,
	 "host disallow NQN HOSTNQN\n  Take HOSTNQN off NQN's allowlist and disconnect its controllers."},
	{"host", "list", "the allowlist of a subsystem", "ListHosts", 1, 1, 0, b_nqn, show_hosts, "host list NQN\n  The allowlist of NQN."},
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
	{"gateway", "info", "the answering gateway: version, group, state epoch", "GetGatewayInfo", 0, 0, 0, b_none, show_gateway,
	 "gateway info\n  The answering gateway: name, version, group, state epoch, listeners, connections."},
};

const unsigned g_ctl_ncmds = sizeof(g_ctl_cmds) / sizeof(g_ctl_cmds[0]);
