/* config.c - JSON configuration file and command-line flags of the rados-nkv daemon (see config.h). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EX_USAGE 64

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rados-nkv [options]\n"
		"Export RADOS pools as NVMe Key-Value subsystems over NVMe/TCP.\n\n"
		"  -c, --config FILE         JSON configuration file (flags given after it override it)\n"
		"  -b, --backend rados|mem   storage backend (default rados)\n"
		"      --ceph-conf PATH      ceph.conf for the rados backend (default: librados search path)\n"
		"      --keyring PATH        cephx keyring (default: from ceph.conf)\n"
		"      --client-id NAME      cephx user without \"client.\" (default admin)\n"
		"      --op-timeout SEC      per-operation RADOS timeout; expiry answers 82h (default 30)\n"
		"      --connect-timeout SEC cluster connect timeout at startup (default 15)\n"
		"  -l, --listen ADDR:PORT    NVMe/TCP listener, repeatable (default 0.0.0.0:4420; IPv6 as [::1]:4420)\n"
		"  -d, --discovery ADDR:PORT discovery listener (default: the first listener's address, port 8009);\n"
		"                            'none' serves discovery only on the I/O listeners\n"
		"  -s, --subsys NQN          start a subsystem; the --pool/--ns/--allow-host after it apply to it\n"
		"                            (default NQN: nqn.2026-11.io.rados-nkv:<pool>)\n"
		"  -p, --pool NAME           RADOS pool of the current subsystem (default nkv)\n"
		"  -n, --ns NSID[:RADOS_NS[:MAX_VALUE[:ro]]]\n"
		"                            KV namespace of the current subsystem (default: NSID 1 on the pool's\n"
		"                            default RADOS namespace). MAX_VALUE takes K/M/G suffixes (default 64M)\n"
		"  -a, --allow-host NQN      allow only these hosts on the current subsystem (repeatable)\n"
		"  -S, --shm PATH            also serve the current subsystem over the shared-memory transport\n"
		"                            on this Unix socket (PCIe-style queues in registered host memory)\n"
		"  -r, --reactors N          reactor threads (default 2)\n"
		"      --queue-depth N       largest I/O queue (CAP.MQES + 1; default 1024)\n"
		"      --in-capsule BYTES    in-capsule data size on I/O queues (default 8192)\n"
		"      --buffer-budget MB    command data buffered at once before backpressure (default 2048)\n"
		"      --shm-pollers N       shared-memory poller threads (default 1)\n"
		"      --shm-poll-us US      an idle poller sleeps this long between scans (default 50)\n"
		"      --shm-mqes N          shared-memory CAP.MQES, 0's based (default 4095)\n"
		"      --grace-ms MS         on SIGINT/SIGTERM, time given to commands in flight (default 10000)\n"
		"      --log-level LEVEL     error|warn|info|debug (default info)\n"
		"      --pid-file PATH       write the process ID here once listening\n"
		"  -h, --help                this text\n");
}

void conf_defaults(struct daemon_conf *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->backend_name, sizeof(c->backend_name), "rados");
	c->log_level = -1;
	c->grace_ms = 10000;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int conf_parse_hostport(const char *s, struct conf_listener *l)
{
	const char *colon;

	memset(l, 0, sizeof(*l));
	if (s[0] == '[') { /* [v6]:port */
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(l->addr))
			return -1;
		memcpy(l->addr, s + 1, (size_t)(close - s - 1));
		colon = close + 1;
	} else if ((colon = strrchr(s, ':'))) {
		if ((size_t)(colon - s) >= sizeof(l->addr))
			return -1;
		memcpy(l->addr, s, (size_t)(colon - s));
	} else {
		colon = s - 1; /* just a port */
	}
	unsigned port;
	if (parse_uint(colon + 1, 65535, &port) < 0)
		return -1;
	snprintf(l->port, sizeof(l->port), "%u", port);
	return 0;
}

static struct conf_subsys *new_subsys(struct daemon_conf *c, const char *nqn)
{
	if (c->nsubsys == CONF_MAX_SUBSYS) {
		fprintf(stderr, "rados-nkv: more than %d subsystems\n", CONF_MAX_SUBSYS);
		return NULL;
	}
	struct conf_subsys *s = &c->subsys[c->nsubsys++];
	memset(s, 0, sizeof(*s));
	if (nqn && strlen(nqn) >= sizeof(s->nqn)) {
		fprintf(stderr, "rados-nkv: subsystem NQN longer than 223 bytes: %s\n", nqn);
		return NULL;
	}
	snprintf(s->nqn, sizeof(s->nqn), "%s", nqn ? nqn : "");
	snprintf(s->pool, sizeof(s->pool), "nkv");
	return s;
}

static struct conf_subsys *cur_subsys(struct daemon_conf *c)
{
	return c->nsubsys ? &c->subsys[c->nsubsys - 1] : new_subsys(c, NULL);
}

static int add_ns(struct conf_subsys *s, uint32_t nsid, const char *rados_ns, uint64_t max_value, bool ro)
{
	if (s->nns == CONF_MAX_NS || nsid == 0 || nsid > NKV_MAX_NSID || strlen(rados_ns) >= sizeof(s->rados_ns[0]))
		return -1;
	snprintf(s->rados_ns[s->nns], sizeof(s->rados_ns[0]), "%s", rados_ns);
	s->ns[s->nns] = (struct nkv_ns_conf){.nsid = nsid, .max_value = max_value, .read_only = ro};
	s->nns++;
	return 0;
}

/* NSID[:RADOS_NS[:MAX_VALUE[:ro]]] */
static int parse_ns(struct conf_subsys *s, const char *spec)
{
	char buf[512], *parts[4] = {0};
	unsigned n = 0, nsid;
	uint64_t max = 0;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *p = buf; p && n < 4; n++) {
		parts[n] = p;
		if ((p = strchr(p, ':')))
			*p++ = '\0';
	}
	if (parse_uint(parts[0], NKV_MAX_NSID, &nsid) < 0 || nsid == 0)
		return -1;
	if (parts[2] && *parts[2] && parse_size(parts[2], &max) < 0)
		return -1;
	if (parts[3] && strcmp(parts[3], "ro") != 0)
		return -1;
	return add_ns(s, nsid, parts[1] ? parts[1] : "", max, parts[3] != NULL);
}

static int set_log_level(struct daemon_conf *c, const char *s)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			c->log_level = i;
			return 0;
		}
	return -1;
}

/* ---- JSON file ----------------------------------------------------------------------------------- */

static const char *jstr(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v) : NULL;
}

static bool jint(json_object *o, const char *key, int64_t *out)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*out = json_object_get_int64(v);
	return true;
}

static bool jbool(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static void copy(char *dst, size_t n, const char *src)
{
	if (src)
		snprintf(dst, n, "%s", src);
}

static int load_subsys(struct daemon_conf *c, json_object *js, const char *path)
{
	struct conf_subsys *s = new_subsys(c, jstr(js, "nqn"));
	json_object *arr;

	if (!s)
		return -1;
	copy(s->pool, sizeof(s->pool), jstr(js, "pool"));
	copy(s->shm_path, sizeof(s->shm_path), jstr(js, "shm_socket"));
	if (json_object_object_get_ex(js, "allowed_hosts", &arr)) {
		for (size_t i = 0; i < json_object_array_length(arr) && s->nhosts < CONF_MAX_HOSTS; i++)
			copy(s->hosts[s->nhosts++], sizeof(s->hosts[0]), json_object_get_string(json_object_array_get_idx(arr, i)));
	}
	if (json_object_object_get_ex(js, "namespaces", &arr)) {
		for (size_t i = 0; i < json_object_array_length(arr); i++) {
			json_object *jn = json_object_array_get_idx(arr, i);
			int64_t nsid = 0, max = 0;
			const char *mv = jstr(jn, "max_value");
			uint64_t m = 0;
			if (!jint(jn, "nsid", &nsid) || (mv && parse_size(mv, &m) < 0)) {
				fprintf(stderr, "rados-nkv: %s: subsystem %s: namespace %zu needs an integer \"nsid\" "
						"(and \"max_value\" as a number or a size like \"64M\")\n", path, s->nqn, i);
				return -1;
			}
			if (jint(jn, "max_value", &max))
				m = (uint64_t)max;
			const char *rns = jstr(jn, "rados_namespace");
			if (add_ns(s, (uint32_t)nsid, rns ? rns : "", m, jbool(jn, "read_only")) < 0) {
				fprintf(stderr, "rados-nkv: %s: bad namespace %lld in subsystem %s\n", path, (long long)nsid, s->nqn);
				return -1;
			}
		}
	}
	return 0;
}

int conf_load_file(struct daemon_conf *c, const char *path)
{
	json_object *root = json_object_from_file(path), *o, *arr;
	int64_t v;

	if (!root) {
		fprintf(stderr, "rados-nkv: cannot read configuration %s: %s\n", path, json_util_get_last_err());
		return -1;
	}
	int rc = -1;
	if (json_object_object_get_ex(root, "backend", &o)) {
		copy(c->backend_name, sizeof(c->backend_name), jstr(o, "type"));
		copy(c->ceph_conf, sizeof(c->ceph_conf), jstr(o, "ceph_conf"));
		copy(c->keyring, sizeof(c->keyring), jstr(o, "keyring"));
		copy(c->client_id, sizeof(c->client_id), jstr(o, "client_id"));
		if (jint(o, "op_timeout_s", &v))
			c->backend.op_timeout_s = (unsigned)v;
		if (jint(o, "connect_timeout_s", &v))
			c->backend.connect_timeout_s = (unsigned)v;
		if (jint(o, "mem_max_object", &v))
			c->backend.mem_max_object = (uint64_t)v;
	}
	if (json_object_object_get_ex(root, "listeners", &arr)) {
		for (size_t i = 0; i < json_object_array_length(arr) && c->nlisteners < CONF_MAX_LISTENERS; i++) {
			json_object *l = json_object_array_get_idx(arr, i);
			struct conf_listener *cl = &c->listeners[c->nlisteners++];
			copy(cl->addr, sizeof(cl->addr), jstr(l, "address"));
			snprintf(cl->port, sizeof(cl->port), "%lld", jint(l, "port", &v) ? (long long)v : (long long)NKV_TCP_PORT);
		}
	}
	if (json_object_object_get_ex(root, "discovery", &o)) {
		if (json_object_is_type(o, json_type_boolean) && !json_object_get_boolean(o)) {
			c->no_discovery = true;
		} else {
			copy(c->discovery.addr, sizeof(c->discovery.addr), jstr(o, "address"));
			snprintf(c->discovery.port, sizeof(c->discovery.port), "%lld",
				 jint(o, "port", &v) ? (long long)v : (long long)NKV_TCP_DISC_PORT);
			c->discovery_set = true;
		}
	}
	if (json_object_object_get_ex(root, "subsystems", &arr))
		for (size_t i = 0; i < json_object_array_length(arr); i++)
			if (load_subsys(c, json_object_array_get_idx(arr, i), path) < 0)
				goto out;
	if (json_object_object_get_ex(root, "tcp", &o)) {
		if (jint(o, "reactors", &v)) c->tcp.reactors = (unsigned)v;
		if (jint(o, "in_capsule", &v)) c->tcp.in_capsule = (uint32_t)v;
		if (jint(o, "maxh2cdata", &v)) c->tcp.maxh2cdata = (uint32_t)v;
		if (jint(o, "max_queue_depth", &v)) c->tcp.max_queue_depth = (uint16_t)v;
		if (jint(o, "max_io_queues", &v)) c->tcp.max_io_queues = (uint16_t)v;
		if (jint(o, "buffer_budget_mb", &v)) c->tcp.buffer_budget = (uint64_t)v << 20;
	}
	if (json_object_object_get_ex(root, "shm", &o)) {
		if (jint(o, "pollers", &v)) c->shm.pollers = (unsigned)v;
		if (jint(o, "poll_idle_us", &v)) c->shm.poll_idle_us = (unsigned)v;
		if (jint(o, "mqes", &v)) c->shm.mqes = (uint16_t)v;
		if (jint(o, "max_io_queues", &v)) c->shm.max_io_queues = (uint16_t)v;
		if (jint(o, "max_regions", &v)) c->shm.max_regions = (unsigned)v;
		if (jint(o, "max_reg_mb", &v)) c->shm.max_reg_bytes = (uint64_t)v << 20;
	}
	if (jstr(root, "log_level") && set_log_level(c, jstr(root, "log_level")) < 0) {
		fprintf(stderr, "rados-nkv: %s: log_level must be error, warn, info or debug\n", path);
		goto out;
	}
	if (jint(root, "shutdown_grace_ms", &v))
		c->grace_ms = (unsigned)v;
	rc = 0;
out:
	json_object_put(root);
	return rc;
}

/* ---- flags --------------------------------------------------------------------------------------- */

enum { OPT_CEPH_CONF = 256, OPT_KEYRING, OPT_CLIENT_ID, OPT_OP_TIMEOUT, OPT_CONNECT_TIMEOUT, OPT_QD,
       OPT_ICD, OPT_BUDGET, OPT_GRACE, OPT_LOG, OPT_PID, OPT_SHM_POLLERS, OPT_SHM_POLL_US, OPT_SHM_MQES };

int conf_parse_args(struct daemon_conf *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
		{"ceph-conf", required_argument, 0, OPT_CEPH_CONF}, {"keyring", required_argument, 0, OPT_KEYRING},
		{"client-id", required_argument, 0, OPT_CLIENT_ID}, {"op-timeout", required_argument, 0, OPT_OP_TIMEOUT},
		{"connect-timeout", required_argument, 0, OPT_CONNECT_TIMEOUT},
		{"listen", required_argument, 0, 'l'}, {"discovery", required_argument, 0, 'd'},
		{"subsys", required_argument, 0, 's'}, {"pool", required_argument, 0, 'p'},
		{"ns", required_argument, 0, 'n'}, {"allow-host", required_argument, 0, 'a'},
		{"reactors", required_argument, 0, 'r'}, {"queue-depth", required_argument, 0, OPT_QD},
		{"in-capsule", required_argument, 0, OPT_ICD}, {"buffer-budget", required_argument, 0, OPT_BUDGET},
		{"grace-ms", required_argument, 0, OPT_GRACE}, {"log-level", required_argument, 0, OPT_LOG},
		{"pid-file", required_argument, 0, OPT_PID}, {"shm", required_argument, 0, 'S'},
		{"shm-pollers", required_argument, 0, OPT_SHM_POLLERS}, {"shm-poll-us", required_argument, 0, OPT_SHM_POLL_US},
		{"shm-mqes", required_argument, 0, OPT_SHM_MQES}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
	};
	bool cli_listeners = false;
	unsigned u;
	uint64_t sz;
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, "c:b:l:d:s:p:n:a:r:S:h", opts, NULL)) != -1) {
		struct conf_subsys *s;
		switch (o) {
		case 'c':
			break; /* loaded before the flags by main() */
		case 'b':
			copy(c->backend_name, sizeof(c->backend_name), optarg);
			break;
		case OPT_CEPH_CONF: copy(c->ceph_conf, sizeof(c->ceph_conf), optarg); break;
		case OPT_KEYRING: copy(c->keyring, sizeof(c->keyring), optarg); break;
		case OPT_CLIENT_ID: copy(c->client_id, sizeof(c->client_id), optarg); break;
		case OPT_OP_TIMEOUT:
		case OPT_CONNECT_TIMEOUT:
			if (parse_uint(optarg, 86400, &u) < 0)
				goto bad;
			*(o == OPT_OP_TIMEOUT ? &c->backend.op_timeout_s : &c->backend.connect_timeout_s) = u;
			break;
		case 'l':
			if (!cli_listeners) /* flags replace the file's listeners */
				c->nlisteners = 0;
			cli_listeners = true;
			if (c->nlisteners == CONF_MAX_LISTENERS || conf_parse_hostport(optarg, &c->listeners[c->nlisteners]) < 0)
				goto bad;
			c->nlisteners++;
			break;
		case 'd':
			if (strcmp(optarg, "none") == 0) {
				c->no_discovery = true;
			} else if (conf_parse_hostport(optarg, &c->discovery) < 0) {
				goto bad;
			} else {
				c->no_discovery = false;
				c->discovery_set = true;
			}
			break;
		case 's':
			if (!new_subsys(c, optarg))
				return -1;
			break;
		case 'p':
			if (!(s = cur_subsys(c)))
				return -1;
			copy(s->pool, sizeof(s->pool), optarg);
			break;
		case 'n':
			if (!(s = cur_subsys(c)) || parse_ns(s, optarg) < 0)
				goto bad;
			break;
		case 'a':
			if (!(s = cur_subsys(c)) || s->nhosts == CONF_MAX_HOSTS || strlen(optarg) >= sizeof(s->hosts[0]))
				goto bad;
			copy(s->hosts[s->nhosts++], sizeof(s->hosts[0]), optarg);
			break;
		case 'r':
			if (parse_uint(optarg, 256, &u) < 0 || u == 0)
				goto bad;
			c->tcp.reactors = u;
			break;
		case OPT_QD:
			if (parse_uint(optarg, 65536, &u) < 0 || u < 32)
				goto bad;
			c->tcp.max_queue_depth = (uint16_t)(u > 65535 ? 65535 : u);
			break;
		case OPT_ICD:
			if (parse_size(optarg, &sz) < 0 || sz > (1u << 20))
				goto bad;
			c->tcp.in_capsule = (uint32_t)sz;
			break;
		case OPT_BUDGET:
			if (parse_uint(optarg, 1u << 20, &u) < 0 || u == 0)
				goto bad;
			c->tcp.buffer_budget = (uint64_t)u << 20;
			break;
		case OPT_GRACE:
			if (parse_uint(optarg, 3600000, &c->grace_ms) < 0)
				goto bad;
			break;
		case OPT_LOG:
			if (set_log_level(c, optarg) < 0)
				goto bad;
			break;
		case OPT_PID: copy(c->pid_file, sizeof(c->pid_file), optarg); break;
		case 'S':
			if (!(s = cur_subsys(c)) || strlen(optarg) >= sizeof(s->shm_path))
				goto bad;
			copy(s->shm_path, sizeof(s->shm_path), optarg);
			break;
		case OPT_SHM_POLLERS:
			if (parse_uint(optarg, 64, &u) < 0 || u == 0)
				goto bad;
			c->shm.pollers = u;
			break;
		case OPT_SHM_POLL_US:
			if (parse_uint(optarg, 1000000, &u) < 0 || u == 0)
				goto bad;
			c->shm.poll_idle_us = u;
			break;
		case OPT_SHM_MQES:
			if (parse_uint(optarg, 65535, &u) < 0 || u == 0)
				goto bad;
			c->shm.mqes = (uint16_t)u;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(EX_USAGE);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rados-nkv: unexpected argument '%s' (see --help)\n", argv[optind]);
		exit(EX_USAGE);
	}
	return 0;
bad:
	fprintf(stderr, "rados-nkv: invalid value for %s: '%s' (see --help)\n", argv[optind - 1], optarg);
	exit(EX_USAGE);
}

int conf_finish(struct daemon_conf *c)
{
	if (c->nlisteners == 0) {
		c->nlisteners = 1;
		snprintf(c->listeners[0].addr, sizeof(c->listeners[0].addr), "0.0.0.0");
		snprintf(c->listeners[0].port, sizeof(c->listeners[0].port), "%d", NKV_TCP_PORT);
	}
	if (!c->no_discovery && !c->discovery_set) {
		c->discovery = c->listeners[0];
		snprintf(c->discovery.port, sizeof(c->discovery.port), "%d", NKV_TCP_DISC_PORT);
	}
	if (c->nsubsys == 0 && !new_subsys(c, NULL))
		return -1;
	for (unsigned i = 0; i < c->nsubsys; i++) {
		struct conf_subsys *s = &c->subsys[i];
		if (!*s->nqn) {
			char pool[181] = {0};
			memcpy(pool, s->pool, sizeof(pool) - 1); /* NQNs hold 223 bytes */
			snprintf(s->nqn, sizeof(s->nqn), "nqn.2026-11.io.rados-nkv:%s", pool);
		}
		if (s->nns == 0)
			add_ns(s, 1, "", 0, false);
	}
	c->backend.name = c->backend_name;
	c->backend.ceph_conf = *c->ceph_conf ? c->ceph_conf : NULL;
	c->backend.keyring = *c->keyring ? c->keyring : NULL;
	c->backend.client_id = *c->client_id ? c->client_id : NULL;
	if (c->log_level < 0)
		c->log_level = 2; /* info: a daemon says what it serves */
	return 0;
}
