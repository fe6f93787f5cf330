/* SPDX-License-Identifier: Apache-2.0 */
/* config.c - JSON configuration file and command-line flags of the rados-nkv daemon (see config.h). */
#include "config.h"
#include "common/dhchap.h"
#include "common/exposure.h"
#include "control/cache_policy.h"
#include "common/nvme_psk.h"
#include "common/unix_sock.h"
#include "nkv/nkv_version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <json-c/json.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>
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
		"      --list-workers N      threads scanning namespaces for List, 1..64 (default 4)\n"
		"      --cut-through MIB     Retrieves into host buffers of at least MIB MiB are read in ranges and\n"
		"                            sent over NVMe/TCP as they land; 0 turns it off (default 2)\n"
		"      --meta-pool POOL      replicated pool for the omap of namespaces on erasure-coded pools (a\n"
		"                            cache namespace's usage and lease); without it such a cache is refused\n"
		"  -l, --listen ADDR:PORT    NVMe/TCP listener, repeatable (default 127.0.0.1:4420; IPv6 as [::1]:4420)\n"
		"      --listen-tls ADDR:PORT\n"
		"                            NVMe/TCP listener that requires TLS 1.3 with a PSK (TP 8011), repeatable;\n"
		"                            plain and TLS listeners may be mixed\n"
		"  -d, --discovery ADDR:PORT discovery listener (default: the first listener's address, port 8009);\n"
		"                            'none' serves discovery only on the I/O listeners\n"
		"  -s, --subsys NQN          start a subsystem; the --pool/--ns/--allow-host/--allow-any-host/--shm\n"
		"                            after it apply to it (before the first -s they are an error)\n"
		"                            (default NQN: nqn.2026-11.io.rados-nkv:<pool>)\n"
		"  -p, --pool NAME           RADOS pool of the current subsystem (default nkv)\n"
		"  -n, --ns NSID[:RADOS_NS[:MAX_VALUE[:ro]]]\n"
		"                            KV namespace of the current subsystem (default: NSID 1 on the pool's\n"
		"                            default RADOS namespace). MAX_VALUE takes K/M/G suffixes (default 64M)\n"
		"  -a, --allow-host NQN      allow only these hosts on the current subsystem (repeatable)\n"
		"      --allow-any-host      let any host use the current subsystem; required for a subsystem\n"
		"                            without --allow-host when a plain listener is not on loopback\n"
		"      --dhchap-key SECRET   the host of the last --allow-host must authenticate (DH-HMAC-CHAP, NVMe/TCP)\n"
		"                            with this secret, as `nvme gen-dhchap-key` prints it (DHHC-1:hh:...:)\n"
		"      --dhchap-ctrl-key SECRET  that host's controller secret (bidirectional authentication)\n"
		"      --dhchap-hash LIST    that host's hash functions, in order of preference\n"
		"                            (default sha256,sha384,sha512)\n"
		"      --dhchap-dhgroup LIST that host's DH groups, in order of preference\n"
		"                            (default ffdhe2048,ffdhe3072,ffdhe4096,ffdhe6144,ffdhe8192,null)\n"
		"      --auth-timeout-ms MS  a queue must authenticate within this of its Connect, and every\n"
		"                            authentication transaction end within this (default 10000)\n"
		"      --tls-key HOSTNQN=KEY let HOSTNQN use the current subsystem over TLS with this PSK: the\n"
		"                            interchange string NVMeTLSkey-1:hh:...: (nvme gen-tls-key) or @FILE\n"
		"                            holding it (repeatable; one key per host and subsystem)\n"
		"      --tls-handshake-timeout-ms MS\n"
		"                            a TLS handshake must finish within this of accept (default 10000)\n"
		"  -S, --shm PATH            also serve the current subsystem over the shared-memory transport\n"
		"                            on this Unix socket (PCIe-style queues in registered host memory)\n"
		"      --vfio-user PATH      also serve the current subsystem as a vfio-user PCI NVMe device on\n"
		"                            this Unix socket (QEMU's vfio-user-pci socket=PATH; for SPDK's\n"
		"                            traddr DIR name it DIR/cntrl); one client at a time\n"
		"      --vfio-user-host NQN  the host NQN its clients act as for the allowlist and limits\n"
		"                            (default nqn.2026-12.io.rados-nkv:vfio-user:uid:UID of the client)\n"
		"      --shm-mode MODE       permissions of the shared-memory sockets, octal (default 0660)\n"
		"      --shm-group GROUP     group of the shared-memory sockets (default: the daemon's)\n"
		"  -r, --reactors N          reactor threads (default 2)\n"
		"      --queue-depth N       largest I/O queue (CAP.MQES + 1; default 1024)\n"
		"      --in-capsule BYTES    in-capsule data size on I/O queues (default 8192)\n"
		"      --buffer-budget MB    command data buffered at once before backpressure (default 2048)\n"
		"      --conn-buffer MB      buffer bytes one connection may hold (default budget / 8)\n"
		"      --host-buffer MB      buffer bytes one host (peer address) may hold (default budget / 4)\n"
		"      --r2t-timeout-ms MS   an R2T's data must arrive within this (default 30000)\n"
		"      --pdu-timeout-ms MS   a PDU must arrive whole within this of its first byte (default 10000)\n"
		"      --send-timeout-ms MS  a PDU we send must leave within this; else close (default 30000)\n"
		"      --icreq-timeout-ms MS ICReq within this of accept (default 10000)\n"
		"      --tcp-connect-timeout-ms MS  fabrics Connect within this of accept (default 30000)\n"
		"      --idle-admin-ms MS    close an idle admin queue with KATO 0 and no I/O queues (default 60000)\n"
		"      --max-conns N         NVMe/TCP connections at once (default 4096, at most the fd limit - 64)\n"
		"      --max-host-conns N    connections at once from one host (default 256)\n"
		"      --max-ctrlrs N        controllers at once (default 1024)\n"
		"      --max-host-ctrlrs N   controllers at once from one host (default 32)\n"
		"      --tcp-poll-us US      a reactor that found work polls this long before it sleeps, while\n"
		"                            that pays: lower QD 1 latency for a busy core (default 0: off)\n"
		"      --shm-pollers N       shared-memory poller threads (default 1)\n"
		"      --shm-poll-us US      an idle poller sleeps this long between scans (default 50) while\n"
		"                            it serves a host that does not kick (see --shm-notify)\n"
		"      --shm-notify on|off   offer shm hosts doorbell kicks and CQ interrupts, so that idle\n"
		"                            pollers and waiting hosts sleep instead of polling (default on)\n"
		"      --shm-mqes N          shared-memory CAP.MQES, 0's based (default 4095)\n"
		"      --shm-max-ctrls N     shared-memory controllers live at once, all hosts (default 256)\n"
		"      --shm-max-ctrls-per-host N\n"
		"                            shared-memory controllers live at once per host NQN (default 16)\n"
		"      --grace-ms MS         on SIGINT/SIGTERM, time given to commands in flight (default 10000)\n"
		"      --sched batch|normal  scheduling policy of every daemon thread: batch (SCHED_BATCH, the\n"
		"                            default) never preempts a running thread when it wakes; normal\n"
		"                            (SCHED_OTHER) does (docs/design.md 2.2.1)\n"
		"      --log-level LEVEL     error|warn|info|debug (default info)\n"
		"      --log-syslog          log to syslog (journald) instead of stderr\n"
		"      --pid-file PATH       lock this file for the daemon's life (refused if a live daemon\n"
		"                            holds it) and write the process ID once listening; removed on exit\n"
		"      --control ADDR|none   gRPC control plane on unix:PATH or HOST:PORT (default\n"
		"                            unix:RUN_DIR/control.sock; TCP needs --control-client-ca)\n"
		"      --control-group NAME  members of this group may call the control socket too (default: only\n"
		"                            the daemon's user and root)\n"
		"      --control-insecure-tcp\n"
		"                            allow a TCP control address without mutual TLS (anyone who can\n"
		"                            reach it can reconfigure the gateway)\n"
		"      --run-dir DIR         runtime directory (default /run/rados-nkv as root, else\n"
		"                            $XDG_RUNTIME_DIR/rados-nkv); owned by the daemon's user\n"
		"      --shm-dir DIR         shm sockets created through the control plane must be in DIR\n"
		"                            (default: the runtime directory)\n"
		"      --control-tls-cert F, --control-tls-key F\n"
		"                            serve the control plane over TLS with this certificate and key\n"
		"      --control-client-ca F require client certificates signed by this CA (mutual TLS)\n"
		"      --group NAME          share subsystems, namespaces, hosts and listeners with the gateways\n"
		"                            of group NAME through one RADOS object (applied live)\n"
		"      --group-pool POOL     pool of the group's state object (default nkv)\n"
		"      --gateway-name NAME   this gateway's name in its group (default: the host name)\n"
		"      --state-file PATH     without a group: keep the control plane's state in this file\n"
		"      --metrics ADDR:PORT|none\n"
		"                            serve Prometheus metrics at http://ADDR:PORT/metrics (port 0: any\n"
		"                            free one, logged); default none\n"
		"      --events ENDPOINT|none\n"
		"                            publish every cache Store, Delete, eviction and expiry as an\n"
		"                            llm-d KV event (BlockStored, BlockRemoved) on a ZMQ PUB socket\n"
		"                            at this endpoint, e.g. tcp://127.0.0.1:5557; default none\n"
		"      --events-mode bind|connect\n"
		"                            bind the endpoint (default), or connect to a subscriber that\n"
		"                            binds it (llm-d's global socket)\n"
		"      --events-format array|map\n"
		"                            event layout: arrays (default) or maps, as vLLM encodes them\n"
		"      --events-medium NAME|none\n"
		"                            the events' medium and topic pod (default OBJECT_STORE; none:\n"
		"                            medium nil, the gateway's name in the topic)\n"
		"      --check               validate the configuration, print what would be served, and exit\n"
		"  -V, --version             print the version and exit\n"
		"  -h, --help                this text\n");
}

void conf_defaults(struct daemon_conf *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->backend_name, sizeof(c->backend_name), "rados");
	c->log_level = -1;
	c->grace_ms = 10000;
	snprintf(c->group_pool, sizeof(c->group_pool), "nkv");
	if (gethostname(c->gateway_name, sizeof(c->gateway_name) - 1) < 0 || !c->gateway_name[0])
		snprintf(c->gateway_name, sizeof(c->gateway_name), "gateway");
	snprintf(c->events_medium, sizeof(c->events_medium), "OBJECT_STORE");
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

/*
 * The subsystem a per-subsystem flag (--pool, --ns, --allow-host, --allow-any-host, --shm) applies
 * to: the last -s before it. Before any -s it applies to the only subsystem there is (the file's, or
 * the default one), and is remembered in *loose: a -s after it would otherwise leave the flag on a
 * subsystem the user did not mean (an allowlist on the default subsystem and the named one open to
 * everyone), so that is a usage error, as is a loose flag when the file defines several subsystems.
 */
static struct conf_subsys *flag_subsys(struct daemon_conf *c, const char *flag, bool cli_subsys,
				       const char **loose)
{
	if (!cli_subsys) {
		if (c->nsubsys > 1) {
			fprintf(stderr, "rados-nkv: %s before any --subsys is ambiguous: the configuration file "
					"defines %u subsystems; put it after -s NQN\n", flag, c->nsubsys);
			exit(EX_USAGE);
		}
		if (!*loose)
			*loose = flag;
	}
	return cur_subsys(c);
}

bool conf_addr_is_loopback(const char *addr)
{
	return nkv_addr_is_loopback(addr);
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

/* "batch" or "normal" (--sched, "sched"). */
static int set_sched(struct daemon_conf *c, const char *s)
{
	if (strcmp(s, "batch") && strcmp(s, "normal"))
		return -1;
	c->sched_normal = strcmp(s, "normal") == 0;
	return 0;
}

/* ---- JSON file ----------------------------------------------------------------------------------- */

/*
 * Validating accessors: a key that is absent leaves the default; a key of the wrong type, out of
 * range, or unknown to its object is an error naming the file and the key (a typo must not be
 * silently ignored).
 */
struct jctx {
	const char *path;
	int err;
	bool secrets; /* the file holds DH-HMAC-CHAP secrets (not only file names) */
};

static void jfail(struct jctx *j, const char *where, const char *key, const char *what)
{
	if (!j->err)
		fprintf(stderr, "rados-nkv: %s: %s%s\"%s\" %s\n", j->path, where, *where ? ": " : "", key, what);
	j->err = -1;
}

/* Every key of object @o must be in the NULL-terminated @known list. */
static void jkeys(struct jctx *j, json_object *o, const char *where, const char *const *known)
{
	json_object_object_foreach(o, key, val) {
		(void)val;
		const char *const *k = known;
		while (*k && strcmp(*k, key) != 0)
			k++;
		if (!*k)
			jfail(j, where, key, "is not a known key");
	}
}

static json_object *jget(struct jctx *j, json_object *o, const char *where, const char *key, json_type t)
{
	json_object *v;

	if (!o || !json_object_object_get_ex(o, key, &v))
		return NULL;
	if (!json_object_is_type(v, t)) {
		static const char *const names[] = {"null", "a boolean", "a number", "an integer", "an object",
						    "an array", "a string"};
		char what[64];
		snprintf(what, sizeof(what), "must be %s", (unsigned)t < 7 ? names[t] : "something else");
		jfail(j, where, key, what);
		return NULL;
	}
	return v;
}

static const char *jstr(struct jctx *j, json_object *o, const char *where, const char *key)
{
	json_object *v = jget(j, o, where, key, json_type_string);
	return v ? json_object_get_string(v) : NULL;
}

/* An integer in [min, max] into *out (left alone when absent). */
static void jnum(struct jctx *j, json_object *o, const char *where, const char *key, int64_t min, int64_t max,
		 int64_t *out)
{
	json_object *v = jget(j, o, where, key, json_type_int);
	if (!v)
		return;
	int64_t n = json_object_get_int64(v);
	if (n < min || n > max) {
		char what[96];
		snprintf(what, sizeof(what), "must be between %lld and %lld", (long long)min, (long long)max);
		jfail(j, where, key, what);
		return;
	}
	*out = n;
}

static bool jbool(struct jctx *j, json_object *o, const char *where, const char *key)
{
	json_object *v = jget(j, o, where, key, json_type_boolean);
	return v && json_object_get_boolean(v);
}

static void copy(char *dst, size_t n, const char *src)
{
	if (src)
		snprintf(dst, n, "%s", src);
}

static void jlistener(struct jctx *j, json_object *o, const char *where, uint16_t defport, struct conf_listener *l)
{
	static const char *const known[] = {"address", "port", "tls", NULL};
	int64_t port = defport;
	const char *addr = jstr(j, o, where, "address");

	jkeys(j, o, where, known);
	jnum(j, o, where, "port", 0, 65535, &port);
	if (addr && strlen(addr) >= sizeof(l->addr))
		jfail(j, where, "address", "is too long");
	copy(l->addr, sizeof(l->addr), addr);
	snprintf(l->port, sizeof(l->port), "%lld", (long long)port);
	l->tls = jbool(j, o, where, "tls");
}

/* Add a TLS PSK of @host to @s (the key checked by conf_finish). @return 0, -1 (too many, too long). */
static int add_psk(struct conf_subsys *s, const char *host, const char *key)
{
	struct conf_psk *p;

	if (s->npsks == CONF_MAX_HOSTS || !*host || strlen(host) >= sizeof(s->psks[0].host) || strlen(key) > 4096)
		return -1;
	if (!(p = realloc(s->psks, (s->npsks + 1) * sizeof(*p))) || !(p[s->npsks].key = strdup(key))) {
		if (p)
			s->psks = p;
		return -1;
	}
	s->psks = p;
	snprintf(p[s->npsks++].host, sizeof(p->host), "%s", host);
	return 0;
}

/* "tls_keys": [{"host": NQN, "key": "NVMeTLSkey-1:..." | "key_file": PATH}] */
static void load_psks(struct jctx *j, struct conf_subsys *s, json_object *arr, const char *where)
{
	static const char *const known[] = {"host", "key", "key_file", NULL};

	for (size_t i = 0; i < json_object_array_length(arr) && !j->err; i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		char w[96], spec[4100];
		snprintf(w, sizeof(w), "%s: tls_keys %zu", where, i);
		if (!json_object_is_type(o, json_type_object)) {
			jfail(j, where, "tls_keys", "entries must be objects {\"host\", \"key\" or \"key_file\"}");
			return;
		}
		jkeys(j, o, w, known);
		const char *host = jstr(j, o, w, "host"), *key = jstr(j, o, w, "key"), *file = jstr(j, o, w, "key_file");
		if (!host || !key == !file) {
			jfail(j, w, "host", "and one of \"key\" or \"key_file\" are required");
			return;
		}
		snprintf(spec, sizeof(spec), "%s%s", file ? "@" : "", file ? file : key);
		if (add_psk(s, host, spec) < 0)
			jfail(j, w, "host", "too many keys (64), or the NQN or key file path is too long");
	}
}

static int hexval(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* A file of at most 16 MiB, with room for a NUL after its *@n bytes. @return it (malloc'd) or NULL. */
static uint8_t *read_small(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	long len = -1;

	if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && len <= (16 << 20) &&
	    fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)len + 1)) && fread(b, 1, (size_t)len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	if (f)
		fclose(f);
	*n = b ? (size_t)len : 0;
	return b;
}

/* The bound input of an Exec rule: "input" (text), "input_hex" or "input_file", at most one. */
static void load_exec_input(struct jctx *j, json_object *jr, const char *where, struct nkv_exec_rule *r)
{
	const char *text = jstr(j, jr, where, "input"), *hex = jstr(j, jr, where, "input_hex"),
		   *file = jstr(j, jr, where, "input_file");
	uint8_t *b = NULL;
	size_t n = 0;

	if ((text != NULL) + (hex != NULL) + (file != NULL) > 1) {
		jfail(j, where, "input", "and input_hex / input_file exclude each other");
		return;
	}
	if (text) {
		if (!(b = malloc((n = strlen(text)) + 1))) {
			jfail(j, where, "input", "out of memory");
			return;
		}
		memcpy(b, text, n);
	}
	if (hex && (strlen(hex) % 2 || !(b = malloc((n = strlen(hex) / 2) + 1)))) {
		jfail(j, where, "input_hex", "must be an even number of hex digits");
		return;
	}
	for (size_t i = 0; hex && i < n; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(b);
			jfail(j, where, "input_hex", "must be hex digits");
			return;
		}
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	if (file && !(b = read_small(file, &n)))
		jfail(j, where, "input_file", "cannot be read (or is above 16 MiB)");
	r->input = b;
	r->input_len = (uint32_t)n;
}

/* A Lua rule's script ("script" text or "script_file") and "handler"; the core encodes them. */
static void load_exec_script(struct jctx *j, json_object *jr, const char *where, struct nkv_exec_rule *r)
{
	const char *text = jstr(j, jr, where, "script"), *file = jstr(j, jr, where, "script_file"),
		   *handler = jstr(j, jr, where, "handler");
	uint8_t *b = NULL;
	size_t n = 0;

	if (text && file) {
		jfail(j, where, "script", "and script_file exclude each other");
		return;
	}
	if (file && !(b = read_small(file, &n)))
		jfail(j, where, "script_file", "cannot be read (or is above 16 MiB)");
	if (b && memchr(b, 0, n)) { /* cls_lua reads the script up to its first NUL byte */
		jfail(j, where, "script_file", "contains a NUL byte");
		free(b);
		b = NULL;
	}
	if (b)
		b[n] = '\0';
	r->script = text ? strdup(text) : (const char *)b;
	r->handler = handler ? strdup(handler) : NULL;
}

/* "exec": [{"opcode", "class", "method", "mode", "create", "input"|"input_hex"|"input_file",
 * "append_host_input", "script"|"script_file", "handler", "max_input"}]: the namespace's vendor Exec
 * allowlist (each rule checked by the core's nkv_exec_rule_problem, again at startup). */
static void load_exec(struct jctx *j, struct conf_subsys *s, unsigned nsi, json_object *arr, const char *nswhere)
{
	static const char *const known[] = {"opcode", "class", "method", "mode", "create", "input", "input_hex",
					    "input_file", "max_input", "append_host_input", "script", "script_file",
					    "handler", NULL};
	size_t n = json_object_array_length(arr);
	struct nkv_exec_rule *r = n ? calloc(n, sizeof(*r)) : NULL;

	if (n && !r) {
		jfail(j, nswhere, "exec", "out of memory");
		return;
	}
	s->exec[nsi] = r;
	for (size_t i = 0; i < n && !j->err; i++) {
		json_object *jr = json_object_array_get_idx(arr, i), *jo;
		char where[400];
		int64_t opc = -1, maxin = 0;
		snprintf(where, sizeof(where), "%s: exec %zu", nswhere, i);
		if (!json_object_is_type(jr, json_type_object)) {
			jfail(j, nswhere, "exec", "entries must be objects");
			return;
		}
		jkeys(j, jr, where, known);
		/* the opcode as a number (130) or a hex string ("0x82", "82h") */
		if (json_object_object_get_ex(jr, "opcode", &jo) && json_object_is_type(jo, json_type_string)) {
			char *end;
			const char *t = json_object_get_string(jo);
			opc = (int64_t)strtol(t, &end, 16);
			if (end == t || (*end && strcmp(end, "h")))
				opc = -1;
		} else {
			jnum(j, jr, where, "opcode", 128, 255, &opc);
		}
		if (opc >= NKV_VS_OPC_FIRST && opc <= 255) {
			char why[160];
			snprintf(why, sizeof(why), "0x%02x is reserved: 0xf0-0xff are rados-nkv's built-in vendor commands "
				 "(0xf2: Retrieve Range); Exec opcodes are 0x80-0xef", (unsigned)opc);
			jfail(j, where, "opcode", why);
			return;
		}
		if (opc < 128 || opc > 255) {
			jfail(j, where, "opcode", "must be a vendor Exec opcode, 0x80-0xef");
			return;
		}
		const char *cls = jstr(j, jr, where, "class"), *meth = jstr(j, jr, where, "method");
		const char *mode = jstr(j, jr, where, "mode");
		if (!cls || !meth || !mode || (strcmp(mode, "read") && strcmp(mode, "write"))) {
			jfail(j, where, "class", "method and mode (\"read\" or \"write\") are required");
			return;
		}
		jnum(j, jr, where, "max_input", 0, 16 << 20, &maxin);
		r[i].opcode = (uint8_t)opc;
		r[i].cls = strdup(cls);
		r[i].method = strdup(meth);
		r[i].write = strcmp(mode, "write") == 0;
		r[i].create = jbool(j, jr, where, "create");
		r[i].max_input = (uint32_t)maxin;
		load_exec_input(j, jr, where, &r[i]);
		r[i].append_host_input = jbool(j, jr, where, "append_host_input");
		load_exec_script(j, jr, where, &r[i]);
		s->nexec[nsi] = (unsigned)i + 1; /* what conf_free releases */
		const char *why = j->err ? NULL : nkv_exec_rule_problem(&r[i]);
		if (why) {
			char msg[320];
			snprintf(msg, sizeof(msg), "0x%02x %s", (unsigned)opc, why);
			jfail(j, where, "opcode", msg);
		}
	}
}

void conf_free(struct daemon_conf *c)
{
	for (unsigned i = 0; i < c->nsubsys; i++) {
		for (unsigned k = 0; k < c->subsys[i].npsks; k++) {
			nkv_psk_wipe(c->subsys[i].psks[k].key, strlen(c->subsys[i].psks[k].key));
			free(c->subsys[i].psks[k].key);
		}
		free(c->subsys[i].psks);
		c->subsys[i].psks = NULL;
		c->subsys[i].npsks = 0;
	}
	for (unsigned i = 0; i < c->nsubsys; i++)
		for (unsigned h = 0; h < CONF_MAX_HOSTS; h++)
			if (c->subsys[i].auth[h]) {
				nkv_dhchap_wipe(c->subsys[i].auth[h], sizeof(*c->subsys[i].auth[h]));
				free(c->subsys[i].auth[h]);
				c->subsys[i].auth[h] = NULL;
			}
	for (unsigned i = 0; i < c->nsubsys; i++)
		for (unsigned k = 0; k < c->subsys[i].nns; k++) {
			for (unsigned e = 0; e < c->subsys[i].nexec[k]; e++) {
				struct nkv_exec_rule *r = &c->subsys[i].exec[k][e];
				free((void *)r->cls);
				free((void *)r->method);
				free((void *)r->input);
				free((void *)r->script);
				free((void *)r->handler);
			}
			free(c->subsys[i].exec[k]);
			c->subsys[i].exec[k] = NULL;
			c->subsys[i].nexec[k] = 0;
		}
}

/* Bytes as a number, or a size string like "64M", into *out (left alone when absent). */
static void jsize(struct jctx *j, json_object *o, const char *where, const char *key, uint64_t *out)
{
	json_object *v;
	int64_t n = -1;

	if (!json_object_object_get_ex(o, key, &v))
		return;
	if (json_object_is_type(v, json_type_string)) {
		if (parse_size(json_object_get_string(v), out) < 0)
			jfail(j, where, key, "must be bytes or a size like \"64M\"");
		return;
	}
	if (!json_object_is_type(v, json_type_int)) {
		jfail(j, where, key, "must be bytes or a size like \"64M\"");
		return;
	}
	jnum(j, o, where, key, 0, INT64_MAX, &n);
	if (n >= 0)
		*out = (uint64_t)n;
}

/* "cache": {"capacity", "capacity_keys", "pin_quota", "default_ttl", "max_ttl", "bytes_per_token",
 * "eviction", "low_watermark_pct", "overshoot_pct", "touch_interval_ms", "reap_interval_s",
 * "reap_rate", "lease_ms"}: the namespace is a cache with this policy ({}: TTLs and pins, no limits). */
static void load_cache(struct jctx *j, json_object *jc, const char *nswhere, struct nkv_cache_policy *p)
{
	static const char *const known[] = {"capacity", "capacity_keys", "pin_quota", "default_ttl", "max_ttl",
					    "bytes_per_token", "eviction", "low_watermark_pct", "overshoot_pct",
					    "touch_interval_ms", "reap_interval_s", "reap_rate", "lease_ms", NULL};
	static const struct {
		const char *key;
		int64_t min, max;
		size_t off, size;
	} nums[] = {
#define N(k, lo, hi, f) {k, lo, hi, offsetof(struct nkv_cache_policy, f), sizeof(((struct nkv_cache_policy *)0)->f)}
		N("capacity_keys", 0, INT64_MAX, capacity_keys),
		N("default_ttl", 0, 0xfffffffe, default_ttl_s),
		N("max_ttl", 0, 0xfffffffe, max_ttl_s),
		N("bytes_per_token", 0, INT64_MAX, bytes_per_token),
		N("low_watermark_pct", 1, 99, low_watermark_pct),
		N("overshoot_pct", 0, 100, overshoot_pct),
		N("touch_interval_ms", 0, UINT32_MAX, touch_interval_ms),
		N("reap_interval_s", 0, UINT32_MAX, reap_interval_s),
		N("reap_rate", 0, UINT32_MAX, reap_rate),
		N("lease_ms", 0, UINT32_MAX, lease_ms),
#undef N
	};
	char where[400], why[256];

	snprintf(where, sizeof(where), "%s: cache", nswhere);
	*p = (struct nkv_cache_policy){0};
	jkeys(j, jc, where, known);
	jsize(j, jc, where, "capacity", &p->capacity_bytes);
	jsize(j, jc, where, "pin_quota", &p->pin_quota_bytes);
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		int64_t v = 0;
		jnum(j, jc, where, nums[i].key, nums[i].min, nums[i].max, &v);
		uint64_t u = (uint64_t)v;
		uint32_t u32 = (uint32_t)v;
		uint8_t u8 = (uint8_t)v;
		memcpy((char *)p + nums[i].off, nums[i].size == 8 ? (void *)&u : nums[i].size == 4 ? (void *)&u32 : (void *)&u8,
		       nums[i].size);
	}
	const char *ev = jstr(j, jc, where, "eviction");
	int e = ev ? ctl_evict_parse(ev) : NKV_EVICT_LRU;
	if (e < 0 || (ev && !*ev))
		jfail(j, where, "eviction", "must be \"lru\", \"fifo\" or \"off\"");
	else
		p->eviction = (uint8_t)e;
	if (!j->err && ctl_cache_policy_check(p, why, sizeof(why)) < 0) {
		/* "cache policy: default_ttl_s ..." names the struct's field; say the file's key */
		jfail(j, where, p->max_ttl_s && p->default_ttl_s > p->max_ttl_s ? "default_ttl" : "cache",
		      p->max_ttl_s && p->default_ttl_s > p->max_ttl_s ? "is above \"max_ttl\"" : why);
	}
}

static void load_ns(struct jctx *j, struct conf_subsys *s, json_object *jn, size_t i)
{
	static const char *const known[] = {"nsid", "rados_namespace", "max_value", "read_only", "exec", "cache", NULL};
	char where[320];
	int64_t nsid = 0, max = 0;
	uint64_t m = 0;
	json_object *mv;

	snprintf(where, sizeof(where), "subsystem %s: namespace %zu", s->nqn, i);
	if (!json_object_is_type(jn, json_type_object)) {
		jfail(j, where, "namespaces", "entries must be objects");
		return;
	}
	jkeys(j, jn, where, known);
	jnum(j, jn, where, "nsid", 1, NKV_MAX_NSID, &nsid);
	if (!nsid && !j->err)
		jfail(j, where, "nsid", "is required");
	/* max_value: bytes as a number, or a size string like "64M" */
	if (json_object_object_get_ex(jn, "max_value", &mv)) {
		if (json_object_is_type(mv, json_type_string)) {
			if (parse_size(json_object_get_string(mv), &m) < 0)
				jfail(j, where, "max_value", "must be bytes or a size like \"64M\"");
		} else {
			jnum(j, jn, where, "max_value", 0, INT64_MAX, &max);
			m = (uint64_t)max;
		}
	}
	const char *rns = jstr(j, jn, where, "rados_namespace");
	bool ro = jbool(j, jn, where, "read_only");
	if (!j->err && add_ns(s, (uint32_t)nsid, rns ? rns : "", m, ro) < 0)
		jfail(j, where, "nsid", "is a duplicate, or the RADOS namespace name is too long");
	json_object *arr = jget(j, jn, where, "exec", json_type_array);
	if (arr && !j->err)
		load_exec(j, s, s->nns - 1, arr, where);
	json_object *jc = jget(j, jn, where, "cache", json_type_object);
	if (jc && !j->err) {
		load_cache(j, jc, where, &s->cache[s->nns - 1]);
		s->has_cache[s->nns - 1] = true;
	}
}

/* ---- DH-HMAC-CHAP settings of allowed hosts ------------------------------------------------------- */

/* The auth settings of host @h of @s, made on first use. */
static struct conf_host_auth *host_auth(struct conf_subsys *s, unsigned h)
{
	if (!s->auth[h] && !(s->auth[h] = calloc(1, sizeof(*s->auth[h])))) {
		fprintf(stderr, "rados-nkv: out of memory\n");
		exit(1);
	}
	return s->auth[h];
}

/* Check a secret without ever printing it. @return NULL, or why it is malformed. */
static const char *secret_error(const char *v, size_t cap)
{
	struct nkv_dhchap_key k;
	const char *why = NULL;
	if (strlen(v) >= cap)
		return "it is longer than any DHHC-1 secret";
	int rc = nkv_dhchap_key_parse(v, &k, &why);
	nkv_dhchap_wipe(&k, sizeof(k));
	return rc < 0 ? why : NULL;
}

/* A comma-separated list whose names @id knows. @return NULL or what is wrong. */
static const char *list_error(const char *v, int (*id)(const char *))
{
	char buf[128], *save = NULL;
	if (!*v || strlen(v) >= sizeof(buf))
		return "it is empty or too long";
	strcpy(buf, v);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (id(t) < 0)
			return "it names an unknown hash function or DH group";
	return NULL;
}

/* "dhchap_key" or "dhchap_key_file" (a file holding the secret, surrounding whitespace ignored). */
static void jsecret(struct jctx *j, json_object *h, const char *where, const char *key, char *dst)
{
	char fkey[64];
	snprintf(fkey, sizeof(fkey), "%s_file", key);
	const char *v = jstr(j, h, where, key), *file = jstr(j, h, where, fkey);
	if (v && file) {
		jfail(j, where, key, "and its _file form exclude each other");
		return;
	}
	if (file) {
		char buf[CONF_SECRET_MAX + 64];
		FILE *f = fopen(file, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = '\0';
		char *p = buf + strspn(buf, " \t\r\n");
		for (size_t e = strlen(p); e && strchr(" \t\r\n", p[e - 1]); e--)
			p[e - 1] = '\0';
		if (!f || !*p) {
			jfail(j, where, fkey, "cannot be read, or is empty");
			return;
		}
		const char *why = secret_error(p, CONF_SECRET_MAX);
		if (why) {
			char what[200];
			snprintf(what, sizeof(what), "holds a malformed secret: %s", why);
			jfail(j, where, fkey, what);
		} else {
			copy(dst, CONF_SECRET_MAX, p);
		}
		nkv_dhchap_wipe(buf, sizeof(buf));
		return;
	}
	if (!v)
		return;
	const char *why = secret_error(v, CONF_SECRET_MAX);
	if (why) {
		char what[200];
		snprintf(what, sizeof(what), "is malformed: %s", why);
		jfail(j, where, key, what);
		return;
	}
	copy(dst, CONF_SECRET_MAX, v);
	j->secrets = true;
}

/* "dhchap_hash" / "dhchap_dhgroup": names (a string, comma separated, or an array of them), into one
 * comma-separated list. */
static void jnames(struct jctx *j, json_object *h, const char *where, const char *key, int (*id)(const char *),
		   char *dst, size_t cap)
{
	json_object *v;
	size_t off = 0;
	if (!json_object_object_get_ex(h, key, &v))
		return;
	bool arr = json_object_is_type(v, json_type_array);
	size_t n = arr ? json_object_array_length(v) : 1;
	for (size_t i = 0; i < n; i++) {
		json_object *e = arr ? json_object_array_get_idx(v, i) : v;
		if (!json_object_is_type(e, json_type_string) || list_error(json_object_get_string(e), id) ||
		    off + strlen(json_object_get_string(e)) + 2 > cap) {
			jfail(j, where, key, id == nkv_dhchap_hash_id
						     ? "must be \"sha256\", \"sha384\", \"sha512\" or a list of them"
						     : "must be \"null\", \"ffdhe2048\" ... \"ffdhe8192\" or a list of them");
			return;
		}
		off += (size_t)snprintf(dst + off, cap - off, "%s%s", i ? "," : "", json_object_get_string(e));
	}
}

/* One "allowed_hosts" entry: an NQN, or {"nqn", "dhchap_key"[_file], "dhchap_ctrl_key"[_file],
 * "dhchap_hash", "dhchap_dhgroup"}. */
static void load_host(struct jctx *j, struct conf_subsys *s, json_object *h, const char *swhere)
{
	static const char *const known[] = {"nqn", "dhchap_key", "dhchap_key_file", "dhchap_ctrl_key",
					    "dhchap_ctrl_key_file", "dhchap_hash", "dhchap_dhgroup", NULL};
	const char *nqn = json_object_is_type(h, json_type_string) ? json_object_get_string(h) : NULL;
	char where[320];

	if (json_object_is_type(h, json_type_object))
		nqn = jstr(j, h, swhere, "nqn");
	if (!nqn || !*nqn || s->nhosts == CONF_MAX_HOSTS || strlen(nqn) >= sizeof(s->hosts[0])) {
		jfail(j, swhere, "allowed_hosts", "must be host NQNs or {\"nqn\", \"dhchap_key\", ...} objects "
						  "(at most 64, NQNs of 223 bytes at most)");
		return;
	}
	unsigned idx = s->nhosts++;
	copy(s->hosts[idx], sizeof(s->hosts[0]), nqn);
	if (!json_object_is_type(h, json_type_object))
		return;
	snprintf(where, sizeof(where), "%s: host %s", swhere, nqn);
	jkeys(j, h, where, known);
	struct conf_host_auth *a = host_auth(s, idx);
	jsecret(j, h, where, "dhchap_key", a->key);
	jsecret(j, h, where, "dhchap_ctrl_key", a->ctrl_key);
	jnames(j, h, where, "dhchap_hash", nkv_dhchap_hash_id, a->hashes, sizeof(a->hashes));
	jnames(j, h, where, "dhchap_dhgroup", nkv_dhchap_dh_id, a->dhgroups, sizeof(a->dhgroups));
	if (!j->err && !*a->key && (*a->ctrl_key || *a->hashes || *a->dhgroups))
		jfail(j, where, "dhchap_key", "is required with the other dhchap_ settings");
	if (!*a->key) { /* only an NQN after all */
		free(a);
		s->auth[idx] = NULL;
	}
}

static void load_subsys(struct jctx *j, struct daemon_conf *c, json_object *js, size_t idx)
{
	static const char *const known[] = {"nqn", "pool", "allowed_hosts", "allow_any_host", "namespaces",
					    "shm_socket", "tls_keys", "vfio_user_socket", "vfio_user_host", NULL};
	char where[64];
	json_object *arr;

	snprintf(where, sizeof(where), "subsystem %zu", idx);
	if (!json_object_is_type(js, json_type_object)) {
		jfail(j, "", "subsystems", "entries must be objects");
		return;
	}
	jkeys(j, js, where, known);
	struct conf_subsys *s = new_subsys(c, jstr(j, js, where, "nqn"));
	if (!s) {
		j->err = -1;
		return;
	}
	copy(s->pool, sizeof(s->pool), jstr(j, js, where, "pool"));
	s->allow_any_host = jbool(j, js, where, "allow_any_host");
	const char *shm = jstr(j, js, where, "shm_socket");
	if (shm && strlen(shm) >= sizeof(s->shm_path))
		jfail(j, where, "shm_socket", "is longer than a Unix socket path may be");
	copy(s->shm_path, sizeof(s->shm_path), shm);
	const char *vfu = jstr(j, js, where, "vfio_user_socket"), *vfu_host = jstr(j, js, where, "vfio_user_host");
	if (vfu && strlen(vfu) >= sizeof(s->vfu_path))
		jfail(j, where, "vfio_user_socket", "is longer than a Unix socket path may be");
	if (vfu_host && (strlen(vfu_host) >= sizeof(s->vfu_host) || strncmp(vfu_host, "nqn.", 4) != 0))
		jfail(j, where, "vfio_user_host", "must be an NQN (nqn.*) of at most 223 bytes");
	copy(s->vfu_path, sizeof(s->vfu_path), vfu);
	copy(s->vfu_host, sizeof(s->vfu_host), vfu_host);
	if ((arr = jget(j, js, where, "allowed_hosts", json_type_array)))
		for (size_t i = 0; i < json_object_array_length(arr) && !j->err; i++)
			load_host(j, s, json_object_array_get_idx(arr, i), where);
	if ((arr = jget(j, js, where, "namespaces", json_type_array)))
		for (size_t i = 0; i < json_object_array_length(arr) && !j->err; i++)
			load_ns(j, s, json_object_array_get_idx(arr, i), i);
	if ((arr = jget(j, js, where, "tls_keys", json_type_array)))
		load_psks(j, s, arr, where);
}

/* Read and parse @path; a syntax error names its line and column. @return the root or NULL (said why). */
static json_object *load_json(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	json_object *root = NULL;

	if (!f) {
		fprintf(stderr, "rados-nkv: cannot read configuration %s: %s\n", path, strerror(errno));
		return NULL;
	}
	for (size_t n;; len += n) {
		if (len == cap) {
			char *nb = cap < (16u << 20) ? realloc(buf, cap = cap ? cap * 2 : 65536) : NULL;
			if (!nb) {
				fprintf(stderr, "rados-nkv: %s: larger than 16 MiB or out of memory\n", path);
				goto out;
			}
			buf = nb;
		}
		if ((n = fread(buf + len, 1, cap - len, f)) == 0)
			break;
	}
	json_tokener *tok = json_tokener_new();
	if (!tok)
		goto out;
	root = json_tokener_parse_ex(tok, buf, (int)len);
	enum json_tokener_error err = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	while (root && end < len && strchr(" \t\r\n", buf[end]))
		end++;
	if (!root || end < len) {
		unsigned line = 1, col = 1;
		for (size_t i = 0; i < end && i < len; i++, col++)
			if (buf[i] == '\n')
				line++, col = 0;
		fprintf(stderr, "rados-nkv: %s:%u:%u: invalid JSON: %s\n", path, line, col,
			root ? "text after the configuration object"
			: err == json_tokener_continue ? "unexpected end of file (a bracket or quote is not closed)"
						       : json_tokener_error_desc(err));
		json_object_put(root);
		root = NULL;
	}
	json_tokener_free(tok);
out:
	free(buf);
	fclose(f);
	return root;
}

/* --metrics / "metrics": {"address"}: ADDR:PORT, [V6]:PORT, PORT (every address) or none. */
static int set_metrics(struct daemon_conf *c, const char *s)
{
	if (strcmp(s, "none") == 0) {
		c->metrics_on = false;
		return 0;
	}
	if (conf_parse_hostport(s, &c->metrics) < 0)
		return -1;
	c->metrics_on = true;
	return 0;
}

/* --events / "events": a ZMQ endpoint (TRANSPORT://ADDRESS, checked by ZMQ when bound) or none. */
static int set_events(struct daemon_conf *c, const char *s)
{
	if (strcmp(s, "none") == 0) {
		c->events_on = false;
		return 0;
	}
	const char *sep = strstr(s, "://");
	if (!sep || sep == s || !sep[3] || strlen(s) >= sizeof(c->events))
		return -1;
	copy(c->events, sizeof(c->events), s);
	c->events_on = true;
	return 0;
}

static int set_events_format(struct daemon_conf *c, const char *s)
{
	if (strcmp(s, "array") && strcmp(s, "map"))
		return -1;
	c->events_format = strcmp(s, "map") == 0;
	return 0;
}

static int set_events_mode(struct daemon_conf *c, const char *s)
{
	if (strcmp(s, "bind") && strcmp(s, "connect"))
		return -1;
	c->events_connect = strcmp(s, "connect") == 0;
	return 0;
}

static int set_events_medium(struct daemon_conf *c, const char *s)
{
	if (!*s || strlen(s) >= sizeof(c->events_medium))
		return -1;
	copy(c->events_medium, sizeof(c->events_medium), strcmp(s, "none") == 0 ? "" : s);
	return 0;
}

/* "events": "ENDPOINT" or {"endpoint", "mode", "format", "medium"}. */
static void jevents(struct jctx *j, struct daemon_conf *c, json_object *root)
{
	static const char *const keys[] = {"endpoint", "mode", "format", "medium", NULL};
	json_object *o;
	const char *v;

	if (!json_object_object_get_ex(root, "events", &o))
		return;
	if (json_object_is_type(o, json_type_string)) {
		if (set_events(c, json_object_get_string(o)) < 0)
			jfail(j, "", "events", "must be a ZMQ endpoint such as \"tcp://127.0.0.1:5557\", or \"none\"");
		return;
	}
	if (!json_object_is_type(o, json_type_object)) {
		jfail(j, "", "events", "must be an endpoint string or {\"endpoint\", \"mode\", \"format\", \"medium\"}");
		return;
	}
	jkeys(j, o, "events", keys);
	if ((v = jstr(j, o, "events", "endpoint")) && set_events(c, v) < 0)
		jfail(j, "events", "endpoint", "must be a ZMQ endpoint such as \"tcp://127.0.0.1:5557\", or \"none\"");
	if ((v = jstr(j, o, "events", "mode")) && set_events_mode(c, v) < 0)
		jfail(j, "events", "mode", "must be \"bind\" or \"connect\"");
	if ((v = jstr(j, o, "events", "format")) && set_events_format(c, v) < 0)
		jfail(j, "events", "format", "must be \"array\" or \"map\"");
	if ((v = jstr(j, o, "events", "medium")) && set_events_medium(c, v) < 0)
		jfail(j, "events", "medium", "must be 1 to 63 bytes, or \"none\"");
}

int conf_load_file(struct daemon_conf *c, const char *path)
{
	static const char *const top[] = {"backend", "listeners", "discovery", "subsystems", "tcp", "shm",
					  "log_level", "log_syslog", "shutdown_grace_ms", "sched", "control", "group",
					  "gateway_name", "state_file", "metrics", "events", "run_dir", NULL};
	static const char *const metrics_keys[] = {"address", NULL};
	static const char *const control_keys[] = {"address", "tls_cert", "tls_key", "client_ca", "group",
						   "insecure_tcp", NULL};
	static const char *const group_keys[] = {"name", "pool", NULL};
	static const char *const backend_keys[] = {"type", "ceph_conf", "keyring", "client_id", "op_timeout_s",
						   "connect_timeout_s", "list_workers", "cut_through_mb", "mem_max_object",
						   "meta_pool", NULL};
	static const char *const tcp_keys[] = {"reactors", "in_capsule", "maxh2cdata", "max_queue_depth",
					       "max_io_queues", "buffer_budget_mb", "conn_buffer_mb", "host_buffer_mb",
					       "r2t_timeout_ms", "pdu_timeout_ms", "send_timeout_ms", "icreq_timeout_ms",
					       "connect_timeout_ms", "idle_admin_ms", "max_conns", "max_host_conns",
					       "max_ctrlrs", "max_host_ctrlrs", "auth_timeout_ms", "tls_handshake_timeout_ms",
					       "poll_us", NULL};
	static const char *const shm_keys[] = {"pollers", "poll_idle_us", "mqes", "max_io_queues", "max_regions",
					       "max_reg_mb", "bounce_budget_mb", "bounce_ctrl_mb", "max_cmds",
					       "max_ctrls", "max_ctrls_per_host", "hello_timeout_ms", "socket_mode",
					       "socket_group", "notify", "socket_dir", NULL};
	struct jctx j = {.path = path};
	json_object *root = load_json(path), *o, *arr;
	int64_t v;

	if (!root)
		return -1;
	if (!json_object_is_type(root, json_type_object)) {
		fprintf(stderr, "rados-nkv: %s: the configuration must be a JSON object\n", path);
		json_object_put(root);
		return -1;
	}
	jkeys(&j, root, "", top);
	if ((o = jget(&j, root, "", "backend", json_type_object))) {
		jkeys(&j, o, "backend", backend_keys);
		const char *type = jstr(&j, o, "backend", "type");
		if (type && strcmp(type, "rados") && strcmp(type, "mem"))
			jfail(&j, "backend", "type", "must be \"rados\" or \"mem\"");
		copy(c->backend_name, sizeof(c->backend_name), type);
		copy(c->ceph_conf, sizeof(c->ceph_conf), jstr(&j, o, "backend", "ceph_conf"));
		copy(c->keyring, sizeof(c->keyring), jstr(&j, o, "backend", "keyring"));
		copy(c->client_id, sizeof(c->client_id), jstr(&j, o, "backend", "client_id"));
		v = c->backend.op_timeout_s;
		jnum(&j, o, "backend", "op_timeout_s", 0, 86400, &v);
		c->backend.op_timeout_s = (unsigned)v;
		v = c->backend.connect_timeout_s;
		jnum(&j, o, "backend", "connect_timeout_s", 0, 86400, &v);
		c->backend.connect_timeout_s = (unsigned)v;
		v = c->backend.list_workers;
		jnum(&j, o, "backend", "list_workers", 0, 64, &v);
		c->backend.list_workers = (unsigned)v;
		v = c->backend.cut_through_mb == NKV_CUT_THROUGH_OFF ? 0 : c->backend.cut_through_mb ? c->backend.cut_through_mb
											   : NKV_CUT_THROUGH_DEFAULT_MB;
		jnum(&j, o, "backend", "cut_through_mb", 0, 4096, &v);
		c->backend.cut_through_mb = v ? (unsigned)v : NKV_CUT_THROUGH_OFF;
		const char *mp = jstr(&j, o, "backend", "meta_pool");
		if (mp && (!*mp || strlen(mp) >= sizeof(c->meta_pool) || strpbrk(mp, "\"\\")))
			jfail(&j, "backend", "meta_pool", "must be a pool name (1-127 bytes, no quote or backslash)");
		else
			copy(c->meta_pool, sizeof(c->meta_pool), mp);
		v = (int64_t)c->backend.mem_max_object;
		jnum(&j, o, "backend", "mem_max_object", 0, INT64_MAX, &v);
		c->backend.mem_max_object = (uint64_t)v;
	}
	if ((arr = jget(&j, root, "", "listeners", json_type_array)))
		for (size_t i = 0; i < json_object_array_length(arr); i++) {
			json_object *l = json_object_array_get_idx(arr, i);
			if (c->nlisteners == CONF_MAX_LISTENERS || !json_object_is_type(l, json_type_object))
				jfail(&j, "", "listeners", "must be up to 16 objects {\"address\", \"port\"}");
			else
				jlistener(&j, l, "listeners", NKV_TCP_PORT, &c->listeners[c->nlisteners++]);
		}
	if (json_object_object_get_ex(root, "discovery", &o)) {
		if (json_object_is_type(o, json_type_boolean) && !json_object_get_boolean(o)) {
			c->no_discovery = true;
		} else if (json_object_is_type(o, json_type_object)) {
			jlistener(&j, o, "discovery", NKV_TCP_DISC_PORT, &c->discovery);
			c->discovery_set = true;
		} else {
			jfail(&j, "", "discovery", "must be {\"address\", \"port\"} or false");
		}
	}
	if ((arr = jget(&j, root, "", "subsystems", json_type_array)))
		for (size_t i = 0; i < json_object_array_length(arr) && !j.err; i++)
			load_subsys(&j, c, json_object_array_get_idx(arr, i), i);
	if ((o = jget(&j, root, "", "tcp", json_type_object))) {
		jkeys(&j, o, "tcp", tcp_keys);
		v = c->tcp.reactors, jnum(&j, o, "tcp", "reactors", 1, 256, &v), c->tcp.reactors = (unsigned)v;
		v = c->tcp.in_capsule, jnum(&j, o, "tcp", "in_capsule", 1024, 1 << 20, &v), c->tcp.in_capsule = (uint32_t)v;
		if (v % 16)
			jfail(&j, "tcp", "in_capsule", "must be a multiple of 16 (IOCCSZ counts 16-byte units)");
		v = c->tcp.maxh2cdata, jnum(&j, o, "tcp", "maxh2cdata", 4096, 1 << 30, &v), c->tcp.maxh2cdata = (uint32_t)v;
		v = c->tcp.max_queue_depth, jnum(&j, o, "tcp", "max_queue_depth", 32, 65535, &v);
		c->tcp.max_queue_depth = (uint16_t)v;
		v = c->tcp.max_io_queues, jnum(&j, o, "tcp", "max_io_queues", 1, 1024, &v);
		c->tcp.max_io_queues = (uint16_t)v;
		v = (int64_t)(c->tcp.buffer_budget >> 20), jnum(&j, o, "tcp", "buffer_budget_mb", 1, 1 << 20, &v);
		c->tcp.buffer_budget = (uint64_t)v << 20;
		v = (int64_t)(c->tcp.conn_buffer >> 20), jnum(&j, o, "tcp", "conn_buffer_mb", 1, 1 << 20, &v);
		c->tcp.conn_buffer = (uint64_t)v << 20;
		v = (int64_t)(c->tcp.host_buffer >> 20), jnum(&j, o, "tcp", "host_buffer_mb", 1, 1 << 20, &v);
		c->tcp.host_buffer = (uint64_t)v << 20;
		static const char *const ms_keys[] = {"r2t_timeout_ms", "pdu_timeout_ms", "send_timeout_ms",
						      "icreq_timeout_ms", "connect_timeout_ms", "idle_admin_ms",
						      "auth_timeout_ms", "tls_handshake_timeout_ms"};
		uint32_t *ms[] = {&c->tcp.r2t_timeout_ms, &c->tcp.pdu_timeout_ms, &c->tcp.send_timeout_ms,
				  &c->tcp.icreq_timeout_ms, &c->tcp.connect_timeout_ms, &c->tcp.idle_admin_ms,
				  &c->tcp.auth_timeout_ms, &c->tcp.tls_timeout_ms};
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
			v = *ms[i], jnum(&j, o, "tcp", ms_keys[i], 1, 86400000, &v), *ms[i] = (uint32_t)v;
		static const char *const n_keys[] = {"max_conns", "max_host_conns", "max_ctrlrs", "max_host_ctrlrs"};
		unsigned *n[] = {&c->tcp.max_conns, &c->tcp.max_host_conns, &c->tcp.max_ctrlrs, &c->tcp.max_host_ctrlrs};
		for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
			v = *n[i], jnum(&j, o, "tcp", n_keys[i], 1, 1 << 20, &v), *n[i] = (unsigned)v;
		v = c->tcp.poll_us, jnum(&j, o, "tcp", "poll_us", 0, 10000, &v), c->tcp.poll_us = (uint32_t)v;
	}
	if ((o = jget(&j, root, "", "shm", json_type_object))) {
		jkeys(&j, o, "shm", shm_keys);
		v = c->shm.pollers, jnum(&j, o, "shm", "pollers", 1, 64, &v), c->shm.pollers = (unsigned)v;
		v = c->shm.poll_idle_us, jnum(&j, o, "shm", "poll_idle_us", 1, 1000000, &v), c->shm.poll_idle_us = (unsigned)v;
		v = c->shm.mqes, jnum(&j, o, "shm", "mqes", 1, 65535, &v), c->shm.mqes = (uint16_t)v;
		v = c->shm.max_io_queues, jnum(&j, o, "shm", "max_io_queues", 1, 1024, &v);
		c->shm.max_io_queues = (uint16_t)v;
		v = c->shm.max_regions, jnum(&j, o, "shm", "max_regions", 1, 65536, &v), c->shm.max_regions = (unsigned)v;
		v = (int64_t)(c->shm.max_reg_bytes >> 20), jnum(&j, o, "shm", "max_reg_mb", 1, INT32_MAX, &v);
		c->shm.max_reg_bytes = (uint64_t)v << 20;
		v = (int64_t)(c->shm.bounce_budget >> 20), jnum(&j, o, "shm", "bounce_budget_mb", 1, 1 << 20, &v);
		c->shm.bounce_budget = (uint64_t)v << 20;
		v = (int64_t)(c->shm.bounce_ctrl_budget >> 20), jnum(&j, o, "shm", "bounce_ctrl_mb", 1, 1 << 20, &v);
		c->shm.bounce_ctrl_budget = (uint64_t)v << 20;
		v = c->shm.max_cmds, jnum(&j, o, "shm", "max_cmds", 1, 1 << 20, &v), c->shm.max_cmds = (unsigned)v;
		v = c->shm.max_ctrls, jnum(&j, o, "shm", "max_ctrls", 1, 65536, &v), c->shm.max_ctrls = (unsigned)v;
		v = c->shm.max_ctrls_per_host, jnum(&j, o, "shm", "max_ctrls_per_host", 1, 65536, &v);
		c->shm.max_ctrls_per_host = (unsigned)v;
		v = c->shm.hello_timeout_ms, jnum(&j, o, "shm", "hello_timeout_ms", 1, 3600000, &v);
		c->shm.hello_timeout_ms = (unsigned)v;
		json_object *nv = jget(&j, o, "shm", "notify", json_type_boolean);
		if (nv)
			c->shm.no_notify = !json_object_get_boolean(nv);
		const char *mode = jstr(&j, o, "shm", "socket_mode"), *grp = jstr(&j, o, "shm", "socket_group");
		char *end = NULL;
		unsigned long m = mode ? strtoul(mode, &end, 8) : 0;
		if (mode && (end == mode || *end || m > 0777))
			jfail(&j, "shm", "socket_mode", "must be an octal mode string such as \"0660\"");
		c->shm_mode = (unsigned)m;
		if (grp && strlen(grp) >= sizeof(c->shm_group))
			jfail(&j, "shm", "socket_group", "is too long");
		copy(c->shm_group, sizeof(c->shm_group), grp);
		const char *sd = jstr(&j, o, "shm", "socket_dir");
		if (sd && (*sd != '/' || strlen(sd) >= sizeof(c->shm_dir)))
			jfail(&j, "shm", "socket_dir", "must be an absolute path shorter than 108 bytes");
		copy(c->shm_dir, sizeof(c->shm_dir), sd);
	}
	const char *lvl = jstr(&j, root, "", "log_level");
	if (lvl && set_log_level(c, lvl) < 0)
		jfail(&j, "", "log_level", "must be error, warn, info or debug");
	if (jbool(&j, root, "", "log_syslog"))
		c->log_syslog = true;
	v = c->grace_ms, jnum(&j, root, "", "shutdown_grace_ms", 0, 3600000, &v), c->grace_ms = (unsigned)v;
	const char *pol = jstr(&j, root, "", "sched");
	if (pol && set_sched(c, pol) < 0)
		jfail(&j, "", "sched", "must be \"batch\" or \"normal\"");
	if ((o = jget(&j, root, "", "control", json_type_object))) {
		jkeys(&j, o, "control", control_keys);
		copy(c->control_addr, sizeof(c->control_addr), jstr(&j, o, "control", "address"));
		c->control_set = c->control_set || jstr(&j, o, "control", "address");
		copy(c->control_cert, sizeof(c->control_cert), jstr(&j, o, "control", "tls_cert"));
		copy(c->control_key, sizeof(c->control_key), jstr(&j, o, "control", "tls_key"));
		copy(c->control_ca, sizeof(c->control_ca), jstr(&j, o, "control", "client_ca"));
		const char *cg = jstr(&j, o, "control", "group");
		if (cg && (!*cg || strlen(cg) >= sizeof(c->control_group)))
			jfail(&j, "control", "group", "must be a group name of 1 to 63 bytes");
		copy(c->control_group, sizeof(c->control_group), cg);
		if (jbool(&j, o, "control", "insecure_tcp"))
			c->control_insecure_tcp = true;
	}
	const char *rd = jstr(&j, root, "", "run_dir");
	if (rd && (*rd != '/' || strlen(rd) >= sizeof(c->run_dir)))
		jfail(&j, "", "run_dir", "must be an absolute path shorter than 96 bytes");
	copy(c->run_dir, sizeof(c->run_dir), rd);
	if ((o = jget(&j, root, "", "group", json_type_object))) {
		jkeys(&j, o, "group", group_keys);
		copy(c->group, sizeof(c->group), jstr(&j, o, "group", "name"));
		copy(c->group_pool, sizeof(c->group_pool), jstr(&j, o, "group", "pool"));
	}
	copy(c->gateway_name, sizeof(c->gateway_name), jstr(&j, root, "", "gateway_name"));
	copy(c->state_file, sizeof(c->state_file), jstr(&j, root, "", "state_file"));
	if ((o = jget(&j, root, "", "metrics", json_type_object))) {
		jkeys(&j, o, "metrics", metrics_keys);
		const char *a = jstr(&j, o, "metrics", "address");
		if (a && set_metrics(c, a) < 0)
			jfail(&j, "metrics", "address", "must be \"ADDR:PORT\", \"[V6]:PORT\", \"PORT\" or \"none\"");
	}
	jevents(&j, c, root);
	json_object_put(root);
	struct stat st;
	if (!j.err && j.secrets && stat(path, &st) == 0 && (st.st_mode & 077))
		fprintf(stderr, "rados-nkv: warning: %s holds DH-HMAC-CHAP secrets and is readable by others (mode %04o): "
				"chmod 600 it, or move the secrets to dhchap_key_file files\n",
			path, (unsigned)(st.st_mode & 07777));
	return j.err;
}

/* ---- flags --------------------------------------------------------------------------------------- */

enum { OPT_CEPH_CONF = 256, OPT_KEYRING, OPT_CLIENT_ID, OPT_OP_TIMEOUT, OPT_CONNECT_TIMEOUT, OPT_QD,
       OPT_ICD, OPT_BUDGET, OPT_GRACE, OPT_LOG, OPT_PID, OPT_SHM_POLLERS, OPT_SHM_POLL_US, OPT_SHM_MQES,
       OPT_LIST_WORKERS, OPT_CUT_THROUGH, OPT_CONN_BUF, OPT_HOST_BUF, OPT_R2T_MS, OPT_PDU_MS, OPT_SEND_MS, OPT_ICREQ_MS,
       OPT_TCP_CONNECT_MS, OPT_IDLE_ADMIN_MS, OPT_MAX_CONNS, OPT_MAX_HOST_CONNS, OPT_MAX_CTRLRS,
       OPT_MAX_HOST_CTRLRS, OPT_ALLOW_ANY, OPT_SHM_MODE, OPT_SHM_GROUP, OPT_CHECK, OPT_SHM_MAX_CTRLS,
       OPT_SHM_MAX_CTRLS_HOST, OPT_LOG_SYSLOG, OPT_DHCHAP_KEY, OPT_DHCHAP_CTRL_KEY, OPT_DHCHAP_HASH,
       OPT_DHCHAP_DHGROUP, OPT_AUTH_TIMEOUT, OPT_LISTEN_TLS, OPT_TLS_KEY, OPT_TLS_MS, OPT_CONTROL,
       OPT_CONTROL_CERT, OPT_CONTROL_KEY, OPT_CONTROL_CA, OPT_GROUP, OPT_GROUP_POOL, OPT_GATEWAY_NAME,
       OPT_STATE_FILE, OPT_METRICS, OPT_EVENTS, OPT_EVENTS_FORMAT, OPT_EVENTS_MEDIUM, OPT_EVENTS_MODE,
       OPT_SHM_NOTIFY, OPT_SCHED,
       OPT_CONTROL_GROUP, OPT_CONTROL_INSECURE_TCP, OPT_RUN_DIR, OPT_SHM_DIR, OPT_META_POOL, OPT_VFU, OPT_VFU_HOST,
       OPT_TCP_POLL_US };

int conf_parse_args(struct daemon_conf *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, 0, 'c'}, {"backend", required_argument, 0, 'b'},
		{"ceph-conf", required_argument, 0, OPT_CEPH_CONF}, {"keyring", required_argument, 0, OPT_KEYRING},
		{"client-id", required_argument, 0, OPT_CLIENT_ID}, {"op-timeout", required_argument, 0, OPT_OP_TIMEOUT},
		{"connect-timeout", required_argument, 0, OPT_CONNECT_TIMEOUT},
		{"list-workers", required_argument, 0, OPT_LIST_WORKERS}, {"cut-through", required_argument, 0, OPT_CUT_THROUGH},
		{"meta-pool", required_argument, 0, OPT_META_POOL},
		{"allow-any-host", no_argument, 0, OPT_ALLOW_ANY}, {"shm-mode", required_argument, 0, OPT_SHM_MODE},
		{"shm-group", required_argument, 0, OPT_SHM_GROUP}, {"check", no_argument, 0, OPT_CHECK},
		{"listen", required_argument, 0, 'l'}, {"discovery", required_argument, 0, 'd'},
		{"subsys", required_argument, 0, 's'}, {"pool", required_argument, 0, 'p'},
		{"ns", required_argument, 0, 'n'}, {"allow-host", required_argument, 0, 'a'},
		{"reactors", required_argument, 0, 'r'}, {"queue-depth", required_argument, 0, OPT_QD},
		{"in-capsule", required_argument, 0, OPT_ICD}, {"buffer-budget", required_argument, 0, OPT_BUDGET},
		{"grace-ms", required_argument, 0, OPT_GRACE}, {"log-level", required_argument, 0, OPT_LOG},
		{"pid-file", required_argument, 0, OPT_PID}, {"shm", required_argument, 0, 'S'},
		{"vfio-user", required_argument, 0, OPT_VFU}, {"vfio-user-host", required_argument, 0, OPT_VFU_HOST},
		{"shm-pollers", required_argument, 0, OPT_SHM_POLLERS}, {"shm-poll-us", required_argument, 0, OPT_SHM_POLL_US},
		{"shm-mqes", required_argument, 0, OPT_SHM_MQES}, {"help", no_argument, 0, 'h'},
		{"shm-notify", required_argument, 0, OPT_SHM_NOTIFY}, {"sched", required_argument, 0, OPT_SCHED},
		{"conn-buffer", required_argument, 0, OPT_CONN_BUF}, {"host-buffer", required_argument, 0, OPT_HOST_BUF},
		{"r2t-timeout-ms", required_argument, 0, OPT_R2T_MS}, {"pdu-timeout-ms", required_argument, 0, OPT_PDU_MS},
		{"send-timeout-ms", required_argument, 0, OPT_SEND_MS},
		{"icreq-timeout-ms", required_argument, 0, OPT_ICREQ_MS},
		{"tcp-connect-timeout-ms", required_argument, 0, OPT_TCP_CONNECT_MS},
		{"idle-admin-ms", required_argument, 0, OPT_IDLE_ADMIN_MS},
		{"max-conns", required_argument, 0, OPT_MAX_CONNS}, {"max-host-conns", required_argument, 0, OPT_MAX_HOST_CONNS},
		{"max-ctrlrs", required_argument, 0, OPT_MAX_CTRLRS},
		{"max-host-ctrlrs", required_argument, 0, OPT_MAX_HOST_CTRLRS},
		{"shm-max-ctrls", required_argument, 0, OPT_SHM_MAX_CTRLS},
		{"shm-max-ctrls-per-host", required_argument, 0, OPT_SHM_MAX_CTRLS_HOST},
		{"version", no_argument, 0, 'V'}, {"log-syslog", no_argument, 0, OPT_LOG_SYSLOG},
		{"dhchap-key", required_argument, 0, OPT_DHCHAP_KEY},
		{"dhchap-ctrl-key", required_argument, 0, OPT_DHCHAP_CTRL_KEY},
		{"dhchap-hash", required_argument, 0, OPT_DHCHAP_HASH},
		{"dhchap-dhgroup", required_argument, 0, OPT_DHCHAP_DHGROUP},
		{"auth-timeout-ms", required_argument, 0, OPT_AUTH_TIMEOUT},
		{"listen-tls", required_argument, 0, OPT_LISTEN_TLS}, {"tls-key", required_argument, 0, OPT_TLS_KEY},
		{"tls-handshake-timeout-ms", required_argument, 0, OPT_TLS_MS},
		{"control", required_argument, 0, OPT_CONTROL}, {"control-tls-cert", required_argument, 0, OPT_CONTROL_CERT},
		{"control-tls-key", required_argument, 0, OPT_CONTROL_KEY},
		{"control-client-ca", required_argument, 0, OPT_CONTROL_CA}, {"group", required_argument, 0, OPT_GROUP},
		{"group-pool", required_argument, 0, OPT_GROUP_POOL},
		{"gateway-name", required_argument, 0, OPT_GATEWAY_NAME},
		{"state-file", required_argument, 0, OPT_STATE_FILE}, {"metrics", required_argument, 0, OPT_METRICS},
		{"events", required_argument, 0, OPT_EVENTS}, {"events-format", required_argument, 0, OPT_EVENTS_FORMAT},
		{"events-medium", required_argument, 0, OPT_EVENTS_MEDIUM}, {"events-mode", required_argument, 0, OPT_EVENTS_MODE},
		{"control-group", required_argument, 0, OPT_CONTROL_GROUP},
		{"control-insecure-tcp", no_argument, 0, OPT_CONTROL_INSECURE_TCP},
		{"run-dir", required_argument, 0, OPT_RUN_DIR}, {"shm-dir", required_argument, 0, OPT_SHM_DIR},
		{"tcp-poll-us", required_argument, 0, OPT_TCP_POLL_US},
		{0, 0, 0, 0},
	};
	struct conf_subsys *host_ss = NULL; /* the subsystem and host of the last --allow-host */
	unsigned host_idx = 0;
	bool cli_listeners = false, cli_subsys = false;
	const char *loose = NULL; /* the first per-subsystem flag seen before any -s */
	unsigned u;
	uint64_t sz;
	int o;

	optind = 1;
	int li = -1;
	while ((li = -1, o = getopt_long(argc, argv, "c:b:l:d:s:p:n:a:r:S:hV", opts, &li)) != -1) {
		struct conf_subsys *s;
		switch (o) {
		case 'c':
			break; /* loaded before the flags by main() */
		case 'b':
			if (strcmp(optarg, "rados") && strcmp(optarg, "mem"))
				goto bad;
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
		case OPT_LIST_WORKERS:
			if (parse_uint(optarg, 64, &u) < 0 || u == 0)
				goto bad;
			c->backend.list_workers = u;
			break;
		case OPT_CUT_THROUGH:
			if (parse_uint(optarg, 4096, &u) < 0)
				goto bad;
			c->backend.cut_through_mb = u ? u : NKV_CUT_THROUGH_OFF;
			break;
		case 'l':
		case OPT_LISTEN_TLS:
			if (!cli_listeners) /* flags replace the file's listeners */
				c->nlisteners = 0;
			cli_listeners = true;
			if (c->nlisteners == CONF_MAX_LISTENERS || conf_parse_hostport(optarg, &c->listeners[c->nlisteners]) < 0)
				goto bad;
			c->listeners[c->nlisteners++].tls = o == OPT_LISTEN_TLS;
			break;
		case OPT_TLS_KEY: {
			/* HOSTNQN=KEY: NQNs contain no '=', the key's base64 may */
			char host[224];
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof(host))
				goto bad;
			memcpy(host, optarg, (size_t)(eq - optarg));
			host[eq - optarg] = '\0';
			if (!(s = flag_subsys(c, "--tls-key", cli_subsys, &loose)) || add_psk(s, host, eq + 1) < 0)
				goto bad;
			break;
		}
		case OPT_TLS_MS:
			if (parse_uint(optarg, 86400000, &u) < 0 || u == 0)
				goto bad;
			c->tcp.tls_timeout_ms = u;
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
			if (loose) {
				fprintf(stderr, "rados-nkv: %s comes before the first --subsys: per-subsystem flags apply "
						"to the -s before them; move it after -s %s\n", loose, optarg);
				exit(EX_USAGE);
			}
			cli_subsys = true;
			if (!new_subsys(c, optarg))
				return -1;
			break;
		case 'p':
			if (!(s = flag_subsys(c, "--pool", cli_subsys, &loose)))
				return -1;
			copy(s->pool, sizeof(s->pool), optarg);
			break;
		case 'n':
			if (!(s = flag_subsys(c, "--ns", cli_subsys, &loose)) || parse_ns(s, optarg) < 0)
				goto bad;
			break;
		case 'a':
			if (!(s = flag_subsys(c, "--allow-host", cli_subsys, &loose)) || s->nhosts == CONF_MAX_HOSTS ||
			    strlen(optarg) >= sizeof(s->hosts[0]))
				goto bad;
			host_ss = s;
			host_idx = s->nhosts;
			copy(s->hosts[s->nhosts++], sizeof(s->hosts[0]), optarg);
			break;
		case OPT_DHCHAP_KEY:
		case OPT_DHCHAP_CTRL_KEY:
		case OPT_DHCHAP_HASH:
		case OPT_DHCHAP_DHGROUP: {
			/* They describe the host of the last --allow-host, of the current subsystem. */
			if (!host_ss || host_ss != cur_subsys(c)) {
				fprintf(stderr, "rados-nkv: --%s applies to a host: put it after --allow-host NQN (of the "
						"same subsystem)\n", opts[li].name);
				exit(EX_USAGE);
			}
			struct conf_host_auth *a = host_auth(host_ss, host_idx);
			const char *why = o == OPT_DHCHAP_HASH	  ? list_error(optarg, nkv_dhchap_hash_id)
					  : o == OPT_DHCHAP_DHGROUP ? list_error(optarg, nkv_dhchap_dh_id)
								    : secret_error(optarg, CONF_SECRET_MAX);
			if (why) { /* never echo a secret back */
				fprintf(stderr, "rados-nkv: invalid --%s for host %s: %s\n", opts[li].name,
					host_ss->hosts[host_idx], why);
				exit(EX_USAGE);
			}
			char *dst = o == OPT_DHCHAP_KEY ? a->key : o == OPT_DHCHAP_CTRL_KEY ? a->ctrl_key
								  : o == OPT_DHCHAP_HASH  ? a->hashes : a->dhgroups;
			size_t cap = o == OPT_DHCHAP_HASH ? sizeof(a->hashes) : o == OPT_DHCHAP_DHGROUP ? sizeof(a->dhgroups)
											  : CONF_SECRET_MAX;
			copy(dst, cap, optarg);
			break;
		}
		case OPT_AUTH_TIMEOUT:
			if (parse_uint(optarg, 86400000, &u) < 0 || u == 0)
				goto bad;
			c->tcp.auth_timeout_ms = u;
			break;
		case OPT_ALLOW_ANY:
			if (!(s = flag_subsys(c, "--allow-any-host", cli_subsys, &loose)))
				return -1;
			s->allow_any_host = true;
			break;
		case OPT_SHM_MODE: {
			char *end;
			unsigned long m = strtoul(optarg, &end, 8);
			if (end == optarg || *end || m > 0777)
				goto bad;
			c->shm_mode = (unsigned)m;
			break;
		}
		case OPT_SHM_GROUP:
			if (strlen(optarg) >= sizeof(c->shm_group))
				goto bad;
			copy(c->shm_group, sizeof(c->shm_group), optarg);
			break;
		case OPT_CHECK:
			c->check = true;
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
			/* IOCCSZ = (64 + in-capsule) / 16: a multiple of 16, at least 1 KiB (docs/nvme-kv-wire.md) */
			if (parse_size(optarg, &sz) < 0 || sz > (1u << 20) || sz < 1024 || sz % 16)
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
		case OPT_CONN_BUF:
		case OPT_HOST_BUF:
			if (parse_uint(optarg, 1u << 20, &u) < 0 || u == 0)
				goto bad;
			*(o == OPT_CONN_BUF ? &c->tcp.conn_buffer : &c->tcp.host_buffer) = (uint64_t)u << 20;
			break;
		case OPT_R2T_MS:
		case OPT_PDU_MS:
		case OPT_SEND_MS:
		case OPT_ICREQ_MS:
		case OPT_TCP_CONNECT_MS:
		case OPT_IDLE_ADMIN_MS: {
			uint32_t *ms[] = {&c->tcp.r2t_timeout_ms, &c->tcp.pdu_timeout_ms, &c->tcp.send_timeout_ms,
					  &c->tcp.icreq_timeout_ms, &c->tcp.connect_timeout_ms, &c->tcp.idle_admin_ms};
			if (parse_uint(optarg, 86400000, &u) < 0 || u == 0)
				goto bad;
			*ms[o - OPT_R2T_MS] = u;
			break;
		}
		case OPT_MAX_CONNS:
		case OPT_MAX_HOST_CONNS:
		case OPT_MAX_CTRLRS:
		case OPT_MAX_HOST_CTRLRS: {
			unsigned *n[] = {&c->tcp.max_conns, &c->tcp.max_host_conns, &c->tcp.max_ctrlrs,
					 &c->tcp.max_host_ctrlrs};
			if (parse_uint(optarg, 1u << 20, &u) < 0 || u == 0)
				goto bad;
			*n[o - OPT_MAX_CONNS] = u;
			break;
		}
		case OPT_LOG:
			if (set_log_level(c, optarg) < 0)
				goto bad;
			break;
		case OPT_PID: copy(c->pid_file, sizeof(c->pid_file), optarg); break;
		case OPT_CONTROL:
			copy(c->control_addr, sizeof(c->control_addr), optarg);
			c->control_set = true;
			break;
		case OPT_CONTROL_CERT: copy(c->control_cert, sizeof(c->control_cert), optarg); break;
		case OPT_CONTROL_KEY: copy(c->control_key, sizeof(c->control_key), optarg); break;
		case OPT_CONTROL_CA: copy(c->control_ca, sizeof(c->control_ca), optarg); break;
		case OPT_CONTROL_GROUP:
			if (!*optarg || strlen(optarg) >= sizeof(c->control_group))
				goto bad;
			copy(c->control_group, sizeof(c->control_group), optarg);
			break;
		case OPT_CONTROL_INSECURE_TCP: c->control_insecure_tcp = true; break;
		case OPT_RUN_DIR:
			if (*optarg != '/' || strlen(optarg) >= sizeof(c->run_dir))
				goto bad;
			copy(c->run_dir, sizeof(c->run_dir), optarg);
			break;
		case OPT_SHM_DIR:
			if (*optarg != '/' || strlen(optarg) >= sizeof(c->shm_dir))
				goto bad;
			copy(c->shm_dir, sizeof(c->shm_dir), optarg);
			break;
		case OPT_GROUP:
			if (!*optarg || strlen(optarg) >= sizeof(c->group) || strchr(optarg, '/'))
				goto bad;
			copy(c->group, sizeof(c->group), optarg);
			break;
		case OPT_GROUP_POOL: copy(c->group_pool, sizeof(c->group_pool), optarg); break;
		case OPT_META_POOL:
			if (!*optarg || strlen(optarg) >= sizeof(c->meta_pool) || strpbrk(optarg, "\"\\"))
				goto bad;
			copy(c->meta_pool, sizeof(c->meta_pool), optarg);
			break;
		case OPT_GATEWAY_NAME:
			if (!*optarg || strlen(optarg) >= sizeof(c->gateway_name) || strchr(optarg, '/'))
				goto bad;
			copy(c->gateway_name, sizeof(c->gateway_name), optarg);
			break;
		case OPT_STATE_FILE: copy(c->state_file, sizeof(c->state_file), optarg); break;
		case OPT_METRICS:
			if (set_metrics(c, optarg) < 0)
				goto bad;
			break;
		case OPT_EVENTS:
			if (set_events(c, optarg) < 0)
				goto bad;
			break;
		case OPT_EVENTS_FORMAT:
			if (set_events_format(c, optarg) < 0)
				goto bad;
			break;
		case OPT_EVENTS_MEDIUM:
			if (set_events_medium(c, optarg) < 0)
				goto bad;
			break;
		case OPT_EVENTS_MODE:
			if (set_events_mode(c, optarg) < 0)
				goto bad;
			break;
		case 'S':
			if (!(s = flag_subsys(c, "--shm", cli_subsys, &loose)) || strlen(optarg) >= sizeof(s->shm_path))
				goto bad;
			copy(s->shm_path, sizeof(s->shm_path), optarg);
			break;
		case OPT_VFU:
			if (!(s = flag_subsys(c, "--vfio-user", cli_subsys, &loose)) || strlen(optarg) >= sizeof(s->vfu_path)) {
				fprintf(stderr, "rados-nkv: --vfio-user: a Unix socket path of at most 107 bytes\n");
				goto bad;
			}
			copy(s->vfu_path, sizeof(s->vfu_path), optarg);
			break;
		case OPT_VFU_HOST:
			if (!(s = flag_subsys(c, "--vfio-user-host", cli_subsys, &loose)) ||
			    strlen(optarg) >= sizeof(s->vfu_host) || strncmp(optarg, "nqn.", 4) != 0) {
				fprintf(stderr, "rados-nkv: --vfio-user-host: an NQN (nqn.*) of at most 223 bytes\n");
				goto bad;
			}
			copy(s->vfu_host, sizeof(s->vfu_host), optarg);
			break;
		case OPT_SHM_POLLERS:
			if (parse_uint(optarg, 64, &u) < 0 || u == 0)
				goto bad;
			c->shm.pollers = u;
			break;
		case OPT_TCP_POLL_US:
			if (parse_uint(optarg, 10000, &u) < 0)
				goto bad;
			c->tcp.poll_us = u;
			break;
		case OPT_SHM_POLL_US:
			if (parse_uint(optarg, 1000000, &u) < 0 || u == 0)
				goto bad;
			c->shm.poll_idle_us = u;
			break;
		case OPT_SHM_NOTIFY:
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				goto bad;
			c->shm.no_notify = strcmp(optarg, "off") == 0;
			break;
		case OPT_SHM_MQES:
			if (parse_uint(optarg, 65535, &u) < 0 || u == 0)
				goto bad;
			c->shm.mqes = (uint16_t)u;
			break;
		case OPT_SHM_MAX_CTRLS:
			if (parse_uint(optarg, 65536, &u) < 0 || u == 0)
				goto bad;
			c->shm.max_ctrls = u;
			break;
		case OPT_SHM_MAX_CTRLS_HOST:
			if (parse_uint(optarg, 65536, &u) < 0 || u == 0)
				goto bad;
			c->shm.max_ctrls_per_host = u;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case OPT_LOG_SYSLOG:
			c->log_syslog = true;
			break;
		case OPT_SCHED:
			if (set_sched(c, optarg) < 0)
				goto bad;
			break;
		case 'V':
			printf("rados-nkv %s\n", NKV_VERSION_STRING);
			exit(0);
		default: /* getopt said what was wrong; the help is one --help away (GNU convention) */
			fprintf(stderr, "Try 'rados-nkv --help' for more information.\n");
			exit(EX_USAGE);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rados-nkv: unexpected argument '%s' (see --help)\n", argv[optind]);
		exit(EX_USAGE);
	}
	return 0;
bad:
	if (li >= 0)
		fprintf(stderr, "rados-nkv: invalid value for --%s: '%s' (see --help)\n", opts[li].name, optarg);
	else
		fprintf(stderr, "rados-nkv: invalid value for -%c: '%s' (see --help)\n", o, optarg);
	exit(EX_USAGE);
}

int conf_finish(struct daemon_conf *c)
{
	if (c->nlisteners == 0) {
		c->nlisteners = 1;
		/* Loopback unless told: exposing a cluster's data to a network is an explicit decision. */
		snprintf(c->listeners[0].addr, sizeof(c->listeners[0].addr), "127.0.0.1");
		snprintf(c->listeners[0].port, sizeof(c->listeners[0].port), "%d", NKV_TCP_PORT);
	}
	if (!c->no_discovery && !c->discovery_set) {
		c->discovery = c->listeners[0];
		snprintf(c->discovery.port, sizeof(c->discovery.port), "%d", NKV_TCP_DISC_PORT);
	}
	if (c->nsubsys == 0 && !new_subsys(c, NULL))
		return -1;
	unsigned ntls = 0;
	for (unsigned i = 0; i < c->nsubsys; i++) {
		struct conf_subsys *s = &c->subsys[i];
		if (!*s->nqn) {
			char pool[181] = {0};
			memcpy(pool, s->pool, sizeof(pool) - 1); /* NQNs hold 223 bytes */
			snprintf(s->nqn, sizeof(s->nqn), "nqn.2026-11.io.rados-nkv:%s", pool);
		}
		if (s->nns == 0)
			add_ns(s, 1, "", 0, false);
		for (unsigned h = 0; h < s->nhosts; h++)
			if (s->auth[h] && !*s->auth[h]->key) {
				fprintf(stderr, "rados-nkv: subsystem %s: host %s has DH-HMAC-CHAP settings but no --dhchap-key\n",
					s->nqn, s->hosts[h]);
				return -1;
			}
		if (*s->vfu_host && !*s->vfu_path) {
			fprintf(stderr, "rados-nkv: subsystem %s: a vfio-user host NQN (--vfio-user-host, "
					"\"vfio_user_host\") without a vfio-user socket (--vfio-user, \"vfio_user_socket\")\n",
				s->nqn);
			return -1;
		}
		if (s->nhosts && s->allow_any_host) {
			fprintf(stderr, "rados-nkv: subsystem %s has both an allowlist and allow-any-host; pick one\n",
				s->nqn);
			return -1;
		}
		for (unsigned k = 0; k < s->npsks; k++) {
			struct nkv_psk key;
			int rc = nkv_psk_load(s->psks[k].key, &key);
			nkv_psk_wipe(&key, sizeof(key));
			if (rc < 0) {
				fprintf(stderr, "rados-nkv: subsystem %s: TLS key of host %s%s%s: %s\n", s->nqn, s->psks[k].host,
					s->psks[k].key[0] == '@' ? " in " : "", s->psks[k].key[0] == '@' ? s->psks[k].key + 1 : "",
					nkv_psk_strerror(rc));
				return -1;
			}
			for (unsigned m = 0; m < k; m++)
				if (strcmp(s->psks[m].host, s->psks[k].host) == 0) {
					fprintf(stderr, "rados-nkv: subsystem %s: two TLS keys for host %s\n", s->nqn, s->psks[k].host);
					return -1;
				}
			bool listed = !s->nhosts;
			for (unsigned h = 0; h < s->nhosts; h++)
				listed |= strcmp(s->hosts[h], s->psks[k].host) == 0;
			if (!listed)
				fprintf(stderr, "rados-nkv: warning: subsystem %s: host %s has a TLS key but is not on the "
						"allowlist: its Connect will be refused\n", s->nqn, s->psks[k].host);
			ntls++;
		}
		/* The rule of src/common/exposure.h (the discovery listener serves discovery only). */
		for (unsigned l = 0; !s->nhosts && !s->allow_any_host && l < c->nlisteners; l++)
			if (nkv_listener_exposes(c->listeners[l].addr, c->listeners[l].tls)) {
				fprintf(stderr, "rados-nkv: subsystem %s would be open to any host on %s:%s: name the hosts "
						"(--allow-host NQN after -s, or \"allowed_hosts\") or say --allow-any-host "
						"(\"allow_any_host\": true)\n", s->nqn,
					*c->listeners[l].addr ? c->listeners[l].addr : "*", c->listeners[l].port);
				return -1;
			}
	}
	for (unsigned l = 0; l < c->nlisteners && !ntls; l++)
		if (c->listeners[l].tls) {
			fprintf(stderr, "rados-nkv: TLS listener %s:%s but no TLS key: give hosts keys (--tls-key HOSTNQN=KEY "
					"after -s, or \"tls_keys\")\n", *c->listeners[l].addr ? c->listeners[l].addr : "*",
				c->listeners[l].port);
			return -1;
		}
	if (!c->shm_mode)
		c->shm_mode = 0660;
	/* The control plane's default: a Unix socket in the runtime directory (only the daemon's user,
	 * root and --control-group may call it; docs/control-plane.md "Who may call the control plane"). */
	if (!*c->run_dir && nkv_run_dir_default(c->run_dir, sizeof(c->run_dir)) < 0) {
		fprintf(stderr, "rados-nkv: the default runtime directory is too long ($XDG_RUNTIME_DIR): give --run-dir\n");
		return -1;
	}
	while (strlen(c->run_dir) > 1 && c->run_dir[strlen(c->run_dir) - 1] == '/')
		c->run_dir[strlen(c->run_dir) - 1] = '\0';
	if (!*c->shm_dir)
		copy(c->shm_dir, sizeof(c->shm_dir), c->run_dir);
	while (strlen(c->shm_dir) > 1 && c->shm_dir[strlen(c->shm_dir) - 1] == '/')
		c->shm_dir[strlen(c->shm_dir) - 1] = '\0';
	if (!*c->control_addr)
		snprintf(c->control_addr, sizeof(c->control_addr), "unix:%s/" NKV_CONTROL_SOCKET, c->run_dir);
	c->backend.name = c->backend_name;
	c->backend.ceph_conf = *c->ceph_conf ? c->ceph_conf : NULL;
	c->backend.keyring = *c->keyring ? c->keyring : NULL;
	c->backend.client_id = *c->client_id ? c->client_id : NULL;
	c->backend.meta_pool = *c->meta_pool ? c->meta_pool : NULL;
	c->backend.gateway = c->gateway_name; /* a cache's usage share and eviction lease are kept under it */
	if (c->log_level < 0)
		c->log_level = 2; /* info: a daemon says what it serves */
	return 0;
}
