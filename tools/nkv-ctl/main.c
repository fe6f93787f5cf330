/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - nkv-ctl, the rados-nkv control-plane client: options, usage, the call through the gRPC
 * glue (nkv_ctl_client_call, src/control/ctl.h), output and exit codes. Each command builds one
 * request (cmds.c), makes one call and prints the response for people, or with -o json the
 * response message as proto3's JSON mapping writes it (original field names, every field).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "control/glue.h"
#include "ctl_cli.h"
#include "nkv/nkv_version.h"
#include "common/cli_json.h"
#include "common/unix_sock.h"

#define DEFAULT_SERVER "unix:RUN_DIR/" NKV_CONTROL_SOCKET

/* The daemon's default control socket (unix_sock.h): in this user's runtime directory, or, when
 * there is none there, root's (a --control-group member calling a root daemon). */
static const char *default_server(void)
{
	static char addr[160];
	char dir[128];
	struct stat st;
	if (nkv_run_dir_default(dir, sizeof(dir)) < 0)
		snprintf(dir, sizeof(dir), "/run/rados-nkv");
	snprintf(addr, sizeof(addr), "unix:%s/" NKV_CONTROL_SOCKET, dir);
	if (stat(addr + 5, &st) < 0 && stat("/run/rados-nkv/" NKV_CONTROL_SOCKET, &st) == 0)
		snprintf(addr, sizeof(addr), "unix:/run/rados-nkv/" NKV_CONTROL_SOCKET);
	return addr;
}

static const char g_usage_head[] =
	"usage: nkv-ctl [options] <command> [args]\n"
	"\n"
	"Configure a rados-nkv gateway group through its gRPC control plane (rados-nkv --control):\n"
	"subsystems, namespaces (ns, or namespace) and their cache policies, host allowlists,\n"
	"listeners, cache usage. A change made through any gateway of a group is committed to the\n"
	"group's state and applied live by every gateway.\n"
	"\n"
	"commands:\n";

static const char g_usage_tail[] =
	"\n"
	"options:\n"
	"      --server ADDR          the control server: HOST:PORT, [IPV6]:PORT or unix:PATH\n"
	"                             (default $NKV_CTL_SERVER, else " DEFAULT_SERVER ": RUN_DIR is\n"
	"                             /run/rados-nkv for root, else $XDG_RUNTIME_DIR/rados-nkv)\n"
	"      --tls-ca FILE          TLS: the PEM CA that signed the server's certificate\n"
	"      --tls-cert FILE        mTLS: this client's PEM certificate (with --tls-key)\n"
	"      --tls-key FILE         mTLS: its PEM private key\n"
	"      --tls-server-name NAME\n"
	"                             the name to check in the server's certificate (default:\n"
	"                             the host of --server)\n"
	"      --timeout MS           per call (default 10000)\n"
	"  -o, --output FMT           normal (default) or json: the response message as JSON, or one\n"
	"                             error object\n"
	"  -v, --verbose              gRPC's and the glue's log on stderr\n"
	"  -V, --version              print the version and exit\n"
	"  -h, --help                 this help (also: nkv-ctl COMMAND --help)\n"
	"\n"
	"cache policy options (ns add --cache, ns cache-policy; 0 means the default):\n"
	"      --cache                ns add: a cache namespace (TTLs, pins, capacity with eviction)\n"
	"      --capacity SIZE        evict automatic entries above SIZE bytes (0: no limit)\n"
	"      --capacity-keys N      evict above N entries (0: no limit)\n"
	"      --pin-quota SIZE       pinned bytes at most; a pin past it gets 81h (0: no quota)\n"
	"      --default-ttl S        TTL of Stores that give none, seconds (0: never expire)\n"
	"      --max-ttl S            longest TTL, longer ones are cut (0: no limit)\n"
	"      --bytes-per-token N    bytes per token for token-hours (0: not reported)\n"
	"      --eviction lru|fifo|off\n"
	"                             eviction order, or never evict (default lru)\n"
	"      --low-watermark PCT    evict down to PCT % of the capacity, 1-99 (0: 90)\n"
	"      --overshoot PCT        hard limit PCT % above the capacity, 0-100 (0: 10)\n"
	"      --touch-interval MS    a Retrieve refreshes last use at most this often (0: 10000)\n"
	"      --reap-interval S      expired entries are looked for this often (0: 10)\n"
	"      --reap-rate N          entries examined per second then (0: 2000)\n"
	"      --lease MS             the eviction lease (0: 10000)\n"
	"      --replace              ns cache-policy: the options not given go back to 0\n"
	"      --all                  group repair: every malformed entry\n"
	"\n"
	"Sizes take K/M/G/T suffixes (binary). Keys given as @FILE are read from FILE.\n"
	"\n"
	"exit status:\n"
	"  0   success\n"
	"  2   not found (NOT_FOUND)\n"
	"  3   already exists (ALREADY_EXISTS)\n"
	"  4   invalid argument (INVALID_ARGUMENT)\n"
	"  5   not possible in the current state (FAILED_PRECONDITION)\n"
	"  6   a concurrent change won; retry (ABORTED)\n"
	"  64  bad usage\n"
	"  69  the server, or the group's state in the cluster, is unreachable (UNAVAILABLE,\n"
	"      DEADLINE_EXCEEDED)\n"
	"  70  any other error (INTERNAL, UNIMPLEMENTED, PERMISSION_DENIED, ...)\n";

enum {
	OPT_SERVER = 256,
	OPT_TLS_CA,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_TLS_NAME,
	OPT_TIMEOUT,
	OPT_POOL,
	OPT_MAX_NS,
	OPT_ANY_HOST,
	OPT_SHM,
	OPT_VFU,
	OPT_VFU_HOST,
	OPT_NSID,
	OPT_RADOS_NS,
	OPT_MAX_VALUE,
	OPT_READ_ONLY,
	OPT_DHCHAP,
	OPT_DHCHAP_CTRL,
	OPT_GATEWAY,
	OPT_TLS,
	OPT_CACHE,
	OPT_REPLACE,
	OPT_ALL,
	OPT_ANA_GROUP,
	OPT_POLICY, /* + i: g_ctl_policy_opts[i] */
};

static const char *const g_short = ":o:hvV";

static const struct option g_opts[] = {
	{"server", required_argument, NULL, OPT_SERVER},
	{"tls-ca", required_argument, NULL, OPT_TLS_CA},
	{"tls-cert", required_argument, NULL, OPT_TLS_CERT},
	{"tls-key", required_argument, NULL, OPT_TLS_KEY},
	{"tls-server-name", required_argument, NULL, OPT_TLS_NAME},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"output", required_argument, NULL, 'o'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{"help", no_argument, NULL, 'h'},
	{"pool", required_argument, NULL, OPT_POOL},
	{"max-namespaces", required_argument, NULL, OPT_MAX_NS},
	{"allow-any-host", no_argument, NULL, OPT_ANY_HOST},
	{"shm", required_argument, NULL, OPT_SHM},
	{"vfio-user", required_argument, NULL, OPT_VFU},
	{"vfio-user-host", required_argument, NULL, OPT_VFU_HOST},
	{"nsid", required_argument, NULL, OPT_NSID},
	{"rados-ns", required_argument, NULL, OPT_RADOS_NS},
	{"max-value", required_argument, NULL, OPT_MAX_VALUE},
	{"read-only", no_argument, NULL, OPT_READ_ONLY},
	{"dhchap-key", required_argument, NULL, OPT_DHCHAP},
	{"dhchap-ctrl-key", required_argument, NULL, OPT_DHCHAP_CTRL},
	{"gateway", required_argument, NULL, OPT_GATEWAY},
	{"tls", no_argument, NULL, OPT_TLS},
	{"cache", no_argument, NULL, OPT_CACHE},
	{"replace", no_argument, NULL, OPT_REPLACE},
	{"all", no_argument, NULL, OPT_ALL},
	{"ana-group", required_argument, NULL, OPT_ANA_GROUP},
	/* the cache policy options, in g_ctl_policy_opts' order */
	{"capacity", required_argument, NULL, OPT_POLICY + 0},
	{"capacity-keys", required_argument, NULL, OPT_POLICY + 1},
	{"pin-quota", required_argument, NULL, OPT_POLICY + 2},
	{"default-ttl", required_argument, NULL, OPT_POLICY + 3},
	{"max-ttl", required_argument, NULL, OPT_POLICY + 4},
	{"bytes-per-token", required_argument, NULL, OPT_POLICY + 5},
	{"eviction", required_argument, NULL, OPT_POLICY + 6},
	{"low-watermark", required_argument, NULL, OPT_POLICY + 7},
	{"overshoot", required_argument, NULL, OPT_POLICY + 8},
	{"touch-interval", required_argument, NULL, OPT_POLICY + 9},
	{"reap-interval", required_argument, NULL, OPT_POLICY + 10},
	{"reap-rate", required_argument, NULL, OPT_POLICY + 11},
	{"lease", required_argument, NULL, OPT_POLICY + 12},
	{NULL, 0, NULL, 0},
};

/* The command options, by O_* bit, for "does not apply" messages. */
static const char *const g_opt_names[] = {
	"--pool",     "--max-namespaces", "--allow-any-host", "--shm",	   "--nsid",	"--rados-ns",
	"--max-value", "--read-only",	  "--dhchap-key",     "--dhchap-ctrl-key", "--gateway", "--tls",
	"--cache",     "--replace",
};

/* The name of command option bit @b. */
static const char *opt_name(unsigned b)
{
	if ((1u << b) == O_ALL)
		return "--all";
	if ((1u << b) == O_ANA_GROUP)
		return "--ana-group";
	if (b >= O_POLICY_FIRST && b < O_POLICY_FIRST + CTL_NPOLICY)
		return g_ctl_policy_opts[b - O_POLICY_FIRST].opt;
	return b < sizeof(g_opt_names) / sizeof(g_opt_names[0]) ? g_opt_names[b] : "an option";
}

/* A cache policy option's value. @return EXIT_OK or EXIT_USAGE (reported). */
static int policy_opt(struct ctl_cli *c, int i, const char *v)
{
	const struct ctl_policy_opt *o = &g_ctl_policy_opts[i];
	uint64_t x = 0;
	switch (o->kind) {
	case POL_EVICT:
		if (strcmp(v, "lru") && strcmp(v, "fifo") && strcmp(v, "off"))
			return ctl_usage(c, "bad %s '%s' (lru, fifo or off)", o->opt, v);
		c->eviction = v;
		break;
	case POL_SIZE:
		if (parse_size(v, &x))
			return ctl_usage(c, "bad %s '%s' (bytes, or with K/M/G/T: 64M; 0: no limit)", o->opt, v);
		break;
	default:
		if (parse_u64(v, o->lo, o->hi, &x))
			return ctl_usage(c, "bad %s '%s' (%" PRIu64 " to %" PRIu64 ")", o->opt, v, o->lo, o->hi);
	}
	c->policy[i] = x;
	c->given |= O_POLICY(i);
	return EXIT_OK;
}

/* ---- output -------------------------------------------------------------------------------- */

static void json_print(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* With -o json: {"command": NAME or null, "error": TEXT, "status": STATUS, "errno": N}. */
static void json_error(const struct ctl_cli *c, const char *msg, const char *status, int err)
{
	if (!c->json)
		return;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "command", c->cmd_name[0] ? json_object_new_string(c->cmd_name) : NULL);
	json_object_object_add(o, "error", json_object_new_string(msg));
	json_object_object_add(o, "status", json_object_new_string(status));
	json_object_object_add(o, "errno", json_object_new_int(err < 0 ? -err : err));
	json_print(o);
	json_object_put(o);
}

int ctl_usage(const struct ctl_cli *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "nkv-ctl: %s\n(nkv-ctl --help for usage)\n", msg);
	json_error(c, msg, "usage", EINVAL);
	return EXIT_USAGE;
}

static void help(const struct ctl_cli *c, const char *text)
{
	if (!c->json) {
		fputs(text, stdout);
		return;
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "command", json_object_new_string("help"));
	json_object_object_add(o, "usage", json_object_new_string(text));
	json_print(o);
	json_object_put(o);
}

/* The whole usage: the head, each command (its words and arguments, its summary, its options on a
 * line of their own), the options. Two columns, as help2man expects them. */
static char *usage_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fputs(g_usage_head, f);
	for (unsigned i = 0; i < g_ctl_ncmds; i++) {
		const struct ctl_cmd *k = &g_ctl_cmds[i];
		int line = (int)strcspn(k->usage, "\n");
		const char *opt = strstr(k->usage, " [--");
		if (!opt || opt - k->usage > line)
			opt = strstr(k->usage, " --");
		int words = opt && opt - k->usage < line ? (int)(opt - k->usage) : line;
		fprintf(f, "  %-32.*s %s\n", words, k->usage, k->summary);
		if (words < line)
			fprintf(f, "        %.*s\n", line - words - 1, k->usage + words + 1);
	}
	fputs(g_usage_tail, f);
	fclose(f);
	return buf;
}

static void cmd_help(const struct ctl_cli *c, const char *group, const struct ctl_cmd *k)
{
	char text[8192];
	size_t n = 0;
	for (unsigned i = 0; i < g_ctl_ncmds && n < sizeof(text); i++)
		if ((k && &g_ctl_cmds[i] == k) || (!k && !strcmp(g_ctl_cmds[i].group, group)))
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%susage: nkv-ctl %s\n", n ? "\n" : "",
					      g_ctl_cmds[i].usage);
	if (n < sizeof(text))
		snprintf(text + n, sizeof(text) - n,
			 "\nGlobal options (--server, --tls-ca, --tls-cert, --tls-key, --tls-server-name, --timeout, -o)\n"
			 "apply; see nkv-ctl --help.\n");
	help(c, text);
}


/* ---- options ------------------------------------------------------------------------------- */

/* A DH-HMAC-CHAP secret: KEY, or @FILE holding it (surrounding whitespace trimmed). Never echoed. */
static int load_secret(const struct ctl_cli *c, const char *opt, const char *v, char **out)
{
	char buf[4096];
	size_t n;
	if (v[0] != '@') {
		n = strlen(v);
		if (n >= sizeof(buf))
			return ctl_usage(c, "%s: the key is too long", opt);
		memcpy(buf, v, n + 1);
	} else {
		FILE *f = fopen(v + 1, "r");
		if (!f)
			return ctl_usage(c, "%s %s: %s", opt, v, strerror(errno));
		n = fread(buf, 1, sizeof(buf) - 1, f);
		bool more = fgetc(f) != EOF;
		fclose(f);
		if (more)
			return ctl_usage(c, "%s %s: larger than a key", opt, v);
		buf[n] = '\0';
	}
	char *s = buf + strspn(buf, " \t\r\n");
	size_t len = strlen(s);
	while (len && strchr(" \t\r\n", s[len - 1]))
		len--;
	s[len] = '\0';
	if (!len) {
		explicit_bzero(buf, sizeof(buf));
		return ctl_usage(c, "%s: empty key", opt);
	}
	if (*out) {
		explicit_bzero(*out, strlen(*out));
		free(*out);
	}
	*out = strdup(s);
	explicit_bzero(buf, sizeof(buf));
	return *out ? EXIT_OK : EXIT_SOFTWARE;
}

static int readable(const struct ctl_cli *c, const char *opt, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return ctl_usage(c, "cannot read %s %s: %s", opt, path, strerror(errno));
	fclose(f);
	return EXIT_OK;
}

/* The exit code for gRPC status @code (-1: no call was made, @rc says why). */
static int exit_code(int code, int rc)
{
	switch (code) {
	case 0:
		return EXIT_OK;
	case 5:
		return EXIT_NOT_FOUND;
	case 6:
		return EXIT_EXISTS;
	case 3:
		return EXIT_INVALID;
	case 9:
		return EXIT_PRECONDITION;
	case 10:
		return EXIT_ABORTED;
	case 4:
	case 14:
		return EXIT_UNAVAILABLE;
	case -1:
		return rc == -EINVAL ? EXIT_USAGE : EXIT_SOFTWARE;
	default:
		return EXIT_SOFTWARE;
	}
}

/* Say why the call failed (stderr; with -o json the error object). @return the exit code. */
static int report(const struct ctl_cli *c, int rc, int code, const char *err)
{
	char msg[1024];
	const char *status = code >= 0 ? nkv_ctl_code_name(code) : strerrorname_np(-rc);
	unsigned ms = c->conf.timeout_ms;
	if (!err)
		err = strerror(-rc);
	if (code == 14 && rc == -ECONNREFUSED) { /* no nkv-errno: the server itself is out of reach */
		/* grpc says "failed to connect to all addresses; last error: UNKNOWN: ipv4:...: ...": the cause */
		const char *last = strstr(err, "last error: ");
		if (last) {
			err = last + strlen("last error: ");
			if (!strncmp(err, "UNKNOWN: ", 9))
				err += 9;
		}
		snprintf(msg, sizeof(msg), "cannot reach the control server at %s: %s", c->conf.addr, err);
	}
	else if (code == 4)
		snprintf(msg, sizeof(msg), "no answer from %s within %u ms (see --timeout)", c->conf.addr, ms);
	else
		snprintf(msg, sizeof(msg), "%s", err);
	if (code > 0)
		fprintf(stderr, "nkv-ctl: %s: %s (%s)\n", c->cmd_name, msg, status);
	else
		fprintf(stderr, "nkv-ctl: %s: %s\n", c->cmd_name, msg);
	if (code == 14 && rc == -ECONNREFUSED && strncmp(c->conf.addr, "unix:", 5) == 0)
		fprintf(stderr, "(is rados-nkv serving its control plane there (--control, --run-dir)? Only the daemon's "
				"user, root and its --control-group may call it)\n");
	else if (code == 14 && rc == -ECONNREFUSED)
		fprintf(stderr, "(is rados-nkv serving its control plane there (--control)? Over TLS: --tls-ca; "
				"mTLS: --tls-cert and --tls-key too)\n");
	json_error(c, msg, status ? status : "error", rc);
	return exit_code(code, rc);
}

/* Parse the options and run the command. @return the exit status. */
static int run(struct ctl_cli *c, int argc, char **argv)
{
	bool want_help = false;
	int o, ex;
	uint64_t v;
	const char *server = NULL;

	opterr = 0;
	while ((o = getopt_long(argc, argv, g_short, g_opts, NULL)) != -1) {
		switch (o) {
		case OPT_SERVER:
			server = optarg;
			break;
		case OPT_TLS_CA:
			c->conf.tls_ca = optarg;
			break;
		case OPT_TLS_CERT:
			c->conf.tls_cert = optarg;
			break;
		case OPT_TLS_KEY:
			c->conf.tls_key = optarg;
			break;
		case OPT_TLS_NAME:
			c->conf.tls_server_name = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_u64(optarg, 1, 86400000, &v))
				return ctl_usage(c, "bad --timeout '%s' (milliseconds, 1 to 86400000)", optarg);
			c->conf.timeout_ms = (unsigned)v;
			break;
		case 'o':
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "normal") != 0)
				return ctl_usage(c, "unknown output format '%s' (normal or json)", optarg);
			break;
		case 'v':
			nkv_log_set_level(NKV_LOG_DEBUG);
			break;
		case 'V':
			if (c->json)
				printf("{\"command\":\"version\",\"nkv-ctl\":\"%s\"}\n", NKV_VERSION_STRING);
			else
				printf("nkv-ctl %s\n", NKV_VERSION_STRING);
			return EXIT_OK;
		case 'h':
			want_help = true;
			break;
		case OPT_POOL:
			c->pool = optarg;
			c->given |= O_POOL;
			break;
		case OPT_MAX_NS:
			if (parse_u64(optarg, 0, UINT32_MAX, &v))
				return ctl_usage(c, "bad --max-namespaces '%s' (a number; 0: the target's limit)", optarg);
			c->max_ns = (uint32_t)v;
			c->given |= O_MAX_NS;
			break;
		case OPT_ANY_HOST:
			c->given |= O_ANY_HOST;
			break;
		case OPT_SHM:
			c->shm = optarg;
			c->given |= O_SHM;
			break;
		case OPT_VFU:
			c->vfu = optarg;
			c->given |= O_VFU;
			break;
		case OPT_VFU_HOST:
			c->vfu_host = optarg;
			c->given |= O_VFU;
			break;
		case OPT_NSID:
			if (parse_u64(optarg, 0, 0xfffffffeu, &v))
				return ctl_usage(c, "bad --nsid '%s' (1 to 4294967294; 0: the lowest free one)", optarg);
			c->nsid = (uint32_t)v;
			c->given |= O_NSID;
			break;
		case OPT_RADOS_NS:
			c->rados_ns = optarg;
			c->given |= O_RADOS_NS;
			break;
		case OPT_MAX_VALUE:
			if (parse_size(optarg, &v))
				return ctl_usage(c, "bad --max-value '%s' (bytes, or with K/M/G/T: 64M)", optarg);
			c->max_value = v;
			c->given |= O_MAX_VALUE;
			break;
		case OPT_READ_ONLY:
			c->given |= O_READ_ONLY;
			break;
		case OPT_DHCHAP:
		case OPT_DHCHAP_CTRL:
			ex = load_secret(c, o == OPT_DHCHAP ? "--dhchap-key" : "--dhchap-ctrl-key", optarg,
					 o == OPT_DHCHAP ? &c->dhchap_key : &c->dhchap_ctrl_key);
			if (ex)
				return ex;
			c->given |= o == OPT_DHCHAP ? O_DHCHAP : O_DHCHAP_CTRL;
			break;
		case OPT_GATEWAY:
			c->gateway = optarg;
			c->given |= O_GATEWAY;
			break;
		case OPT_TLS:
			c->given |= O_TLS_LISTENER;
			break;
		case OPT_CACHE:
			c->given |= O_CACHE;
			break;
		case OPT_ALL:
			c->given |= O_ALL;
			break;
		case OPT_ANA_GROUP:
			if (parse_u64(optarg, 1, 32, &v))
				return ctl_usage(c, "bad --ana-group '%s' (1 to 32)", optarg);
			c->ana_group = (uint32_t)v;
			c->given |= O_ANA_GROUP;
			break;
		case OPT_REPLACE:
			c->given |= O_REPLACE;
			break;
		case ':':
			return ctl_usage(c, "option '%s' needs an argument", argv[optind - 1]);
		case OPT_POLICY ... OPT_POLICY + CTL_NPOLICY - 1:
			if ((ex = policy_opt(c, o - OPT_POLICY, optarg)))
				return ex;
			break;
		default: /* '?' */
			if (optopt)
				return ctl_usage(c, "unknown option '-%c'", optopt);
			return ctl_usage(c, "unknown option '%s'", argv[optind - 1]);
		}
	}

	char **pos = argv + optind;
	int npos = argc - optind;
	if (npos && strcmp(pos[0], "namespace") == 0)
		pos[0] = "ns"; /* the long name of the group */
	if (npos == 0 || strcmp(pos[0], "help") == 0) {
		char *u = usage_text();
		if (npos || want_help) {
			help(c, u ? u : g_usage_head);
			free(u);
			return EXIT_OK;
		}
		if (!c->json && u)
			fputs(u, stderr);
		free(u);
		return ctl_usage(c, "no command given");
	}
	const struct ctl_cmd *k = NULL;
	bool group = false;
	for (unsigned i = 0; i < g_ctl_ncmds; i++) {
		const struct ctl_cmd *e = &g_ctl_cmds[i];
		if (strcmp(e->group, pos[0]) != 0)
			continue;
		group = true;
		if (!e->verb || (npos > 1 && strcmp(e->verb, pos[1]) == 0))
			k = e;
	}
	if (!group)
		return ctl_usage(c, "unknown command '%s'", pos[0]);
	if (!k) {
		if (want_help) {
			cmd_help(c, pos[0], NULL);
			return EXIT_OK;
		}
		snprintf(c->cmd_name, sizeof(c->cmd_name), "%s", pos[0]);
		char verbs[128] = "";
		for (unsigned i = 0; i < g_ctl_ncmds; i++)
			if (!strcmp(g_ctl_cmds[i].group, pos[0]))
				snprintf(verbs + strlen(verbs), sizeof(verbs) - strlen(verbs), "%s%s", verbs[0] ? ", " : "",
					 g_ctl_cmds[i].verb);
		if (npos > 1)
			return ctl_usage(c, "%s: unknown subcommand '%s' (%s)", pos[0], pos[1], verbs);
		return ctl_usage(c, "%s: which one? %s", pos[0], verbs);
	}
	if (want_help) {
		cmd_help(c, NULL, k);
		return EXIT_OK;
	}
	snprintf(c->cmd_name, sizeof(c->cmd_name), "%s%s%s", k->group, k->verb ? " " : "", k->verb ? k->verb : "");
	int words = k->verb ? 2 : 1;
	c->args = pos + words;
	c->nargs = npos - words;
	if (c->nargs < k->min_args || c->nargs > k->max_args) {
		if (!c->json)
			fprintf(stderr, "usage: nkv-ctl %.*s\n", (int)strcspn(k->usage, "\n"), k->usage);
		return ctl_usage(c, "%s: wrong number of arguments (%d)", c->cmd_name, c->nargs);
	}
	unsigned extra = c->given & ~k->opts;
	for (unsigned b = 0; extra && b < 32; b++)
		if (extra & (1u << b))
			return ctl_usage(c, "%s: %s does not apply", c->cmd_name, opt_name(b));

	/* where and how to call */
	const char *env = getenv("NKV_CTL_SERVER");
	c->conf.addr = server ? server : env && *env ? env : default_server();
	char why[256];
	if (nkv_ctl_addr_check(c->conf.addr, 0, why, sizeof(why)))
		return ctl_usage(c, "bad %s: %s", server ? "--server" : "$NKV_CTL_SERVER", why);
	if (!c->conf.tls_cert != !c->conf.tls_key)
		return ctl_usage(c, "--tls-cert and --tls-key go together (mTLS)");
	if ((c->conf.tls_cert || c->conf.tls_server_name) && !c->conf.tls_ca)
		return ctl_usage(c, "%s needs --tls-ca (TLS)", c->conf.tls_cert ? "--tls-cert" : "--tls-server-name");
	if ((c->conf.tls_ca && (ex = readable(c, "--tls-ca", c->conf.tls_ca))) ||
	    (c->conf.tls_cert && (ex = readable(c, "--tls-cert", c->conf.tls_cert))) ||
	    (c->conf.tls_key && (ex = readable(c, "--tls-key", c->conf.tls_key))))
		return ex;

	json_object *req = json_object_new_object();
	ex = k->build(c, req);
	if (ex) {
		json_object_put(req);
		return ex;
	}
	char *resp = NULL, *err = NULL;
	int code;
	const char *rj = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	int rc = nkv_ctl_client_call_code(&c->conf, k->method, rj, &resp, &err, &code);
	if (c->dhchap_key || c->dhchap_ctrl_key) /* the request's text held the secrets */
		explicit_bzero((char *)rj, strlen(rj));
	json_object_put(req);
	if (rc) {
		ex = report(c, rc, code, err);
	} else if (c->json) {
		puts(resp);
	} else {
		json_object *o = json_tokener_parse(resp);
		if (o) {
			k->show(c, o);
			json_object_put(o);
		} else {
			ex = report(c, -EPROTO, -1, "the response is not JSON");
		}
	}
	free(resp);
	free(err);
	return ex;
}

int main(int argc, char **argv)
{
	struct ctl_cli c = {0};
	c.json = nkv_cli_wants_json(argc, argv);
	int ex = run(&c, argc, argv);
	char *secrets[] = {c.dhchap_key, c.dhchap_ctrl_key};
	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
		if (secrets[i]) {
			explicit_bzero(secrets[i], strlen(secrets[i]));
			free(secrets[i]);
		}
	fflush(stdout);
	return ex;
}
