/*
 * main.c - nkv, the rados-nkv command-line client (in the spirit of `nvme` and `rados`): global
 * options, usage, connection setup (with NQN discovery), error reporting, command dispatch.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/log.h"
#include "nkv/nkv_version.h"

static const char g_usage[] =
	"usage: nkv [options] <command> [args]\n"
	"\n"
	"Talk to an NVMe Key-Value controller (rados-nkv) over NVMe/TCP or its shared-memory\n"
	"(PCIe-style) transport.\n"
	"\n"
	"commands:\n"
	"  discover                      list the discovery log (port 8009 unless -s)\n"
	"  list-ns                       list the active KV namespaces\n"
	"  identify [--ns]               Identify Controller, or the KV namespace (--nsid)\n"
	"  store KEY [FILE|-]            store a value from FILE or stdin\n"
	"        [--must-exist | --must-not-exist]\n"
	"  retrieve KEY [FILE|-]         write a value to FILE or stdout\n"
	"        [--max-size N]          buffer size (default: the namespace's max value size)\n"
	"  delete KEY                    delete a key\n"
	"  exist KEY                     exit 0 if KEY exists, 2 if not\n"
	"  list [START_KEY] [--max N]    list keys >= START_KEY in order (all pages)\n"
	"\n"
	"options:\n"
	"  -t, --transport T     tcp (default) or shm:/path/to/socket (the target's --shm socket;\n"
	"                        it names the subsystem: -a, -s, -n, --hdgst, --ddgst unused;\n"
	"                        not for discover)\n"
	"  -a, --traddr ADDR     target address (default 127.0.0.1)\n"
	"  -s, --trsvcid PORT    target port (default 4420; discover: 8009)\n"
	"  -n, --nqn SUBNQN      subsystem NQN (default: the first NVM subsystem in the\n"
	"                        discovery log at ADDR, port -s or else 8009)\n"
	"      --nsid N          namespace (default 1)\n"
	"  -q, --hostnqn NQN     host NQN (default: a per-process uuid NQN)\n"
	"      --hdgst           enable the header digest (CRC32C)\n"
	"      --ddgst           enable the data digest (CRC32C)\n"
	"  -o, --output FMT      normal (default) or json: one JSON object per command\n"
	"      --hex             keys are given and printed as hex (binary keys)\n"
	"      --timeout MS      connect and command timeout (default 30000)\n"
	"  -v, --verbose         library debug log on stderr\n"
	"  -V, --version         print the version and exit\n"
	"  -h, --help            this help (also: nkv COMMAND --help)\n"
	"\n"
	"Keys are 1 to 16 bytes of text unless --hex. Sizes take K/M/G suffixes (binary).\n"
	"\n"
	"exit status:\n"
	"  0   success\n"
	"  1   error (connection, protocol, command failed)\n"
	"  2   key not found (retrieve, delete, exist, store --must-exist)\n"
	"  3   key exists (store --must-not-exist)\n"
	"  64  bad usage\n";

struct cmd {
	const char *name;
	int (*fn)(struct cli *);
	int min_args, max_args;
	const char *usage;
};

static const struct cmd g_cmds[] = {
	{"discover", cmd_discover, 0, 0, "nkv discover [-a ADDR] [-s PORT]\n  Print the discovery log entries."},
	{"list-ns", cmd_list_ns, 0, 0, "nkv list-ns\n  Print the active KV namespace IDs (Identify CNS 07h)."},
	{"identify", cmd_identify, 0, 0,
	 "nkv identify [--ns] [--nsid N]\n  Identify Controller, or with --ns the KV namespace (KVKML, KVVML, NUSE...)."},
	{"store", cmd_store, 1, 2,
	 "nkv store KEY [FILE|-] [--must-exist | --must-not-exist]\n"
	 "  Store FILE (or stdin) under KEY. --must-exist: only replace (exit 2 if absent);\n"
	 "  --must-not-exist: only create (exit 3 if present)."},
	{"retrieve", cmd_retrieve, 1, 2,
	 "nkv retrieve KEY [FILE|-] [--max-size N]\n"
	 "  Write KEY's value to FILE or stdout. Without --max-size the buffer is the namespace's\n"
	 "  max value size; with it, a longer value is truncated to N bytes (with a warning)."},
	{"delete", cmd_delete, 1, 1, "nkv delete KEY\n  Delete KEY (exit 2 if absent)."},
	{"exist", cmd_exist, 1, 1, "nkv exist KEY\n  Exit 0 if KEY exists, 2 if not."},
	{"list", cmd_list, 0, 1,
	 "nkv list [START_KEY] [--max N]\n  Print the keys >= START_KEY (default: all) in ascending byte order."},
	{"bench", cmd_bench, 0, 64, "nkv bench [KEY=VALUE...]   (nkv bench help: every knob)\n  Asynchronous load generator (qd=, conns=, size=4K,256K, keys=, mix=r70w30, time=, bytes=...); every retrieved value is verified."},
};

enum {
	OPT_NSID = 256,
	OPT_HDGST,
	OPT_DDGST,
	OPT_HEX,
	OPT_TIMEOUT,
	OPT_NS,
	OPT_MUST_EXIST,
	OPT_MUST_NOT_EXIST,
	OPT_MAX_SIZE,
	OPT_MAX,
};

static const struct option g_opts[] = {
	{"transport", required_argument, NULL, 't'},
	{"traddr", required_argument, NULL, 'a'},
	{"trsvcid", required_argument, NULL, 's'},
	{"nqn", required_argument, NULL, 'n'},
	{"nsid", required_argument, NULL, OPT_NSID},
	{"hostnqn", required_argument, NULL, 'q'},
	{"hdgst", no_argument, NULL, OPT_HDGST},
	{"ddgst", no_argument, NULL, OPT_DDGST},
	{"output", required_argument, NULL, 'o'},
	{"hex", no_argument, NULL, OPT_HEX},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{"ns", no_argument, NULL, OPT_NS},
	{"must-exist", no_argument, NULL, OPT_MUST_EXIST},
	{"must-not-exist", no_argument, NULL, OPT_MUST_NOT_EXIST},
	{"max-size", required_argument, NULL, OPT_MAX_SIZE},
	{"max", required_argument, NULL, OPT_MAX},
	{NULL, 0, NULL, 0},
};

static int usage_err(const char *fmt, const char *arg)
{
	fputs("nkv: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\n(nkv --help for usage)\n", stderr);
	return EXIT_USAGE;
}

static const char *port_of(const struct cli *c)
{
	return c->trsvcid ? c->trsvcid : "4420";
}

void cli_json_error(const struct cli *c, const char *reason, int rc, unsigned status)
{
	if (!c->json)
		return;
	printf("{\"command\":");
	json_str(stdout, c->cmd, strlen(c->cmd));
	printf(",\"error\":");
	json_str(stdout, reason, strlen(reason));
	printf(",\"errno\":%d,\"status\":%u}\n", -rc, status);
}

static void shm_connect_error(const struct cli *c, int rc)
{
	switch (rc) {
	case -ENOENT:
	case -ECONNREFUSED:
		fprintf(stderr, "nkv: cannot connect to shm:%s: %s (is rados-nkv serving --shm there?)\n", c->shm_path,
			strerror(-rc));
		break;
	case -EACCES:
		fprintf(stderr, "nkv: shm:%s refused this host (host NQN not allowed: see -q and the target's "
				"--allow-host)\n", c->shm_path);
		break;
	case -ETIMEDOUT:
		fprintf(stderr, "nkv: shm:%s: no answer or controller not ready in time (see --timeout)\n",
			c->shm_path);
		break;
	case -EPROTO:
	case -EIO:
		fprintf(stderr, "nkv: shm:%s: %s (run with -v for details)\n", c->shm_path,
			rc == -EIO ? "controller fatal status" : "protocol error");
		break;
	default:
		fprintf(stderr, "nkv: cannot connect to shm:%s: %s\n", c->shm_path, strerror(-rc));
	}
}

static void connect_error(const struct cli *c, const char *port, const char *nqn, int rc)
{
	char reason[96];
	snprintf(reason, sizeof(reason), "connect: %s", strerror(-rc));
	cli_json_error(c, reason, rc, 0);
	if (c->shm_path) {
		shm_connect_error(c, rc);
		return;
	}
	switch (rc) {
	case -ECONNREFUSED:
		fprintf(stderr, "nkv: cannot connect to %s:%s: %s (is rados-nkv running?)\n", c->traddr, port,
			strerror(-rc));
		break;
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		fprintf(stderr, "nkv: cannot connect to %s:%s: %s (check the address and the --timeout)\n", c->traddr,
			port, strerror(-rc));
		break;
	case -ENOENT:
		fprintf(stderr, "nkv: %s:%s has no subsystem %s (nkv discover -a %s lists them)\n", c->traddr, port,
			nqn, c->traddr);
		break;
	case -EACCES:
		fprintf(stderr, "nkv: subsystem %s refused this host (host NQN not allowed: see -q and the target's "
				"--allow-host)\n", nqn);
		break;
	case -EPROTO:
		fprintf(stderr, "nkv: protocol error talking to %s:%s (run with -v for details)\n", c->traddr, port);
		break;
	default:
		fprintf(stderr, "nkv: cannot connect to %s at %s:%s: %s\n", nqn, c->traddr, port, strerror(-rc));
	}
}

/**
 * Find the first NVM subsystem in the discovery log: at the -s port when given (rados-nkv serves its
 * discovery controller on every listener), else at port 8009.
 */
static int discover_nqn(struct cli *c)
{
	struct nkv_disc_entry *e = NULL;
	unsigned n = 0;
	const char *dport = c->trsvcid ? c->trsvcid : "8009";
	int rc = nkv_discover(c->traddr, dport, &c->opts, &e, &n);
	if (rc) {
		if (rc == -ECONNREFUSED) {
			cli_json_error(c, "discovery: Connection refused", rc, 0);
			fprintf(stderr, "nkv: no subsystem NQN given and no discovery controller at %s:%s (%s); "
					"pass -n SUBNQN\n", c->traddr, dport, strerror(-rc));
		} else
			connect_error(c, dport, NKV_DISCOVERY_NQN, rc);
		return EXIT_ERR;
	}
	for (unsigned i = 0; i < n; i++) {
		if (e[i].subtype != NKV_SUBTYPE_NVME || e[i].trtype != NKV_TRTYPE_TCP)
			continue;
		snprintf(c->nqn_buf, sizeof(c->nqn_buf), "%s", e[i].subnqn);
		c->nqn = c->nqn_buf;
		if (!c->trsvcid && e[i].trsvcid[0]) {
			snprintf(c->port_buf, sizeof(c->port_buf), "%s", e[i].trsvcid);
			c->trsvcid = c->port_buf;
		}
		break;
	}
	free(e);
	if (!c->nqn) {
		cli_json_error(c, "discovery: no NVMe/TCP subsystem", -ENOENT, 0);
		fprintf(stderr, "nkv: the discovery log at %s:%s lists no NVMe/TCP subsystem; pass -n SUBNQN\n",
			c->traddr, dport);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

int cli_connect(struct cli *c, bool io)
{
	if (!c->nqn && !c->shm_path) {
		int ex = discover_nqn(c);
		if (ex)
			return ex;
	}
	int rc = c->shm_path ? nkv_connect_shm(c->shm_path, &c->opts, &c->ctrl)
			     : nkv_connect(c->traddr, port_of(c), c->nqn, &c->opts, &c->ctrl);
	if (rc == 0 && c->shm_path && c->nqn && strncmp(c->nqn, nkv_ctrl_identify(c->ctrl)->subnqn, 256) != 0) {
		cli_json_error(c, "connect: another subsystem", -ENOENT, 0);
		fprintf(stderr, "nkv: shm:%s serves %.256s, not %s\n", c->shm_path, nkv_ctrl_identify(c->ctrl)->subnqn,
			c->nqn);
		return EXIT_ERR;
	}
	if (c->shm_path && rc == 0 && !c->nqn)
		c->nqn = nkv_ctrl_identify(c->ctrl)->subnqn;
	if (rc) {
		connect_error(c, port_of(c), c->nqn, rc);
		return EXIT_ERR;
	}
	if (!io)
		return EXIT_OK;
	rc = nkv_qpair_create(c->ctrl, 0, &c->qp);
	if (rc) {
		if (rc == -ENOSPC) {
			cli_json_error(c, "connect: no I/O queue granted", rc, 0);
			fprintf(stderr, "nkv: %s granted no I/O queue\n", c->nqn);
		} else
			connect_error(c, port_of(c), c->nqn, rc);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

int cli_fail(struct cli *c, const char *what, int rc, const struct nkv_cpl *cpl, const char *detail)
{
	char nb[96], lost[128];
	const char *reason;
	if (cpl && cpl->status && cpl->status != NKV_STATUS_HOST_PATH)
		reason = status_name(cpl->status, nb);
	else if (rc == -ETIMEDOUT)
		reason = "timed out (see --timeout)";
	else if (cpl && cpl->status == NKV_STATUS_HOST_PATH) {
		if (rc == -EPROTO)
			snprintf(lost, sizeof(lost), "connection lost: protocol error (run with -v for details)");
		else
			snprintf(lost, sizeof(lost), "connection lost: %s", strerror(-rc));
		reason = lost;
	}
	else
		reason = strerror(-rc);
	cli_json_error(c, reason, rc, cpl ? cpl->status : 0);
	if (detail && *detail)
		fprintf(stderr, "nkv: %s failed: %s (%s)\n", what, reason, detail);
	else
		fprintf(stderr, "nkv: %s failed: %s\n", what, reason);
	unsigned code = cpl ? cpl->status & 0xff : 0;
	bool kv = cpl && (cpl->status >> 8) <= 1;
	if (rc == -ENOENT && kv && code == NKV_SC_KV_KEY_NOT_EXIST)
		return EXIT_NOKEY;
	if (rc == -EEXIST && kv && code == NKV_SC_KV_KEY_EXISTS)
		return EXIT_EXISTS;
	return EXIT_ERR;
}

static void cmd_help(const struct cmd *k)
{
	printf("usage: %s\n\nGlobal options (-t, -a, -s, -n, --nsid, -q, --hdgst, --ddgst, -o, --hex, --timeout) "
	       "apply; see nkv --help.\n",
	       k->usage);
}

int main(int argc, char **argv)
{
	struct cli c = {.traddr = "127.0.0.1", .nsid = 1};
	bool help = false;
	int o;
	uint64_t v;

	while ((o = getopt_long(argc, argv, "t:a:s:n:q:o:vhV", g_opts, NULL)) != -1) {
		switch (o) {
		case 't':
			if (strncmp(optarg, "shm:", 4) == 0 && optarg[4])
				c.shm_path = optarg + 4;
			else if (strcmp(optarg, "tcp") == 0)
				c.shm_path = NULL;
			else
				return usage_err("unknown --transport '%s' (tcp or shm:/path/to/socket)", optarg);
			break;
		case 'a':
			c.traddr = optarg;
			break;
		case 's':
			c.trsvcid = optarg;
			break;
		case 'n':
			c.nqn = optarg;
			break;
		case 'q':
			c.opts.hostnqn = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json") == 0)
				c.json = true;
			else if (strcmp(optarg, "normal") != 0)
				return usage_err("unknown output format '%s' (normal or json)", optarg);
			break;
		case 'v':
			nkv_log_set_level(NKV_LOG_DEBUG);
			break;
		case 'h':
			help = true;
			break;
		case 'V':
			/* libnkv's own version too: the CLI links it statically today, a packaged build may not */
			printf("nkv %s (libnkv %s)\n", NKV_VERSION_STRING, nkv_version());
			return EXIT_OK;
		case OPT_NSID:
			if (parse_size(optarg, &v) || v == 0 || v > 0xfffffffeull)
				return usage_err("bad --nsid '%s'", optarg);
			c.nsid = (uint32_t)v;
			break;
		case OPT_HDGST:
			c.opts.hdgst = true;
			break;
		case OPT_DDGST:
			c.opts.ddgst = true;
			break;
		case OPT_HEX:
			c.hex = true;
			break;
		case OPT_TIMEOUT:
			if (parse_size(optarg, &v) || v == 0 || v > 86400000)
				return usage_err("bad --timeout '%s' (milliseconds)", optarg);
			c.opts.timeout_ms = (int)v;
			break;
		case OPT_NS:
			c.ns = true;
			break;
		case OPT_MUST_EXIST:
			c.store_opts |= NKV_STORE_MUST_EXIST;
			break;
		case OPT_MUST_NOT_EXIST:
			c.store_opts |= NKV_STORE_MUST_NOT_EXIST;
			break;
		case OPT_MAX_SIZE:
			if (parse_size(optarg, &v) || v == 0 || v > 0xffffffffull)
				return usage_err("bad --max-size '%s' (1 byte to 4 GiB - 1)", optarg);
			c.max_size = v;
			break;
		case OPT_MAX:
			if (parse_size(optarg, &v) || v == 0)
				return usage_err("bad --max '%s'", optarg);
			c.max_keys = v;
			break;
		default:
			fputs("(nkv --help for usage)\n", stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		if (help) {
			fputs(g_usage, stdout);
			return EXIT_OK;
		}
		fputs(g_usage, stderr);
		return EXIT_USAGE;
	}
	c.cmd = argv[optind];
	if (strcmp(c.cmd, "help") == 0) {
		fputs(g_usage, stdout);
		return EXIT_OK;
	}
	const struct cmd *k = NULL;
	for (size_t i = 0; i < sizeof(g_cmds) / sizeof(g_cmds[0]); i++)
		if (strcmp(g_cmds[i].name, c.cmd) == 0)
			k = &g_cmds[i];
	if (!k)
		return usage_err("unknown command '%s'", c.cmd);
	if (help) {
		cmd_help(k);
		return EXIT_OK;
	}
	c.args = argv + optind + 1;
	c.nargs = argc - optind - 1;
	if (c.nargs < k->min_args || c.nargs > k->max_args) {
		fprintf(stderr, "nkv: %s: wrong number of arguments\nusage: %s\n", c.cmd, k->usage);
		return EXIT_USAGE;
	}
	if (c.shm_path && k->fn == cmd_discover)
		return usage_err("%s: no discovery over shm (the socket path names the subsystem)", c.cmd);
	if (c.store_opts == (NKV_STORE_MUST_EXIST | NKV_STORE_MUST_NOT_EXIST))
		return usage_err("%s: --must-exist and --must-not-exist exclude each other", c.cmd);
	int ex = k->fn(&c);
	if (c.qp)
		nkv_qpair_destroy(c.qp);
	nkv_disconnect(c.ctrl);
	return ex;
}
