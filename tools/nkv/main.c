/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - nkv, the rados-nkv command-line client (in the spirit of `nvme` and `rados`): global
 * options, usage, connection setup (with NQN discovery), error reporting, command dispatch.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/dhchap.h"
#include "common/log.h"
#include "common/nvme_psk.h"
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
	"        [--ttl SECONDS|none] [--pin]  cache namespaces: expire after SECONDS (0: the\n"
	"                                namespace's default; none: never), pin until then\n"
	"  retrieve KEY [FILE|-]         write a value to FILE or stdout\n"
	"        [--max-size N]          buffer size (default: the namespace's max value size)\n"
	"        [--offset N]            from byte N of the value on (Retrieve Range)\n"
	"  delete KEY                    delete a key\n"
	"  exist KEY                     exit 0 if KEY exists, 2 if not\n"
	"  list [START_KEY] [--max N]    list keys >= START_KEY in order (all pages)\n"
	"  exec KEY OPCODE               run vendor Exec OPCODE (0x80-0xef): the RADOS class method\n"
	"                                the namespace allowlists for it, on KEY's object\n"
	"        [--in FILE|- | --arg HEX]  input: a file (01b opcodes) or up to 8 bytes (00b, 10b)\n"
	"        [--out FILE|-] [--size N]  output of 10b opcodes (default stdout), buffer (default 1M)\n"
	"  show-host                     the host NQN and ID nkv sends, and where they come from\n"
	"  gen-tls-key [01|02|00]        print a random TLS PSK in the interchange format (01: SHA-256,\n"
	"                                default; 02: SHA-384) for rados-nkv --tls-key and nkv --tls-key\n"
	"  bench [KEY=VALUE...]          load generator (nkv bench help)\n"
	"\n"
	"options:\n"
	"  -t, --transport T     tcp (default), shm:/path/to/socket (the target's --shm socket) or\n"
	"                        vfio-user:/path/to/socket (its --vfio-user socket); the socket\n"
	"                        names the subsystem: -a, -s, --hdgst, --ddgst unused;\n"
	"                        not for discover\n"
	"  -a, --traddr ADDR     target address (default 127.0.0.1); [::1] for IPv6;\n"
	"                        [::1]:PORT and HOST:PORT also give the port\n"
	"  -s, --trsvcid PORT    target port, 1 to 65535 (default 4420; discover: 8009)\n"
	"  -n, --nqn SUBNQN      subsystem NQN (default: the NVM subsystem the discovery log\n"
	"                        at ADDR, port -s or else 8009, lists; several: exit 64)\n"
	"      --nsid N          namespace (default 1)\n"
	"  -q, --hostnqn NQN     host NQN (default: /etc/nvme/hostnqn, else\n"
	"                        nqn.2014-08.org.nvmexpress:uuid:<host ID>)\n"
	"  -I, --hostid UUID     host ID (default: /etc/nvme/hostid, else the UUID of a uuid\n"
	"                        host NQN file, else /sys/class/dmi/id/product_uuid, else one\n"
	"                        generated for this run); $NKV_HOSTNQN_FILE and\n"
	"                        $NKV_HOSTID_FILE replace the two /etc/nvme paths\n"
	"      --hdgst           enable the header digest (CRC32C)\n"
	"      --ddgst           enable the data digest (CRC32C)\n"
	"      --dhchap-secret S DH-HMAC-CHAP host secret (DHHC-1:hh:...:, as `nvme gen-dhchap-key`\n"
	"                        prints it): authenticate when the subsystem requires it\n"
	"      --dhchap-ctrl-secret S  the controller's secret: it must authenticate itself too\n"
	"                        (bidirectional; needs --dhchap-secret)\n"
	"      --tls             NVMe/TCP over TLS 1.3 with a PSK (TP 8011), for the target's\n"
	"                        --listen-tls listeners; needs --tls-key (discover too)\n"
	"      --tls-key KEY     the PSK: NVMeTLSkey-1:hh:...: (nvme gen-tls-key) or @FILE holding\n"
	"                        it; implies --tls\n"
	"      --tls-identity V  PSK identity version: 0 NVMe0Rxx (default, as Linux), 1 NVMe1Rxx\n"
	"  -o, --output FMT      normal (default) or json: one JSON object per command\n"
	"      --hex             keys are given and printed as hex (binary keys)\n"
	"      --timeout MS      connect and command timeout (default 30000)\n"
	"  -v, --verbose         library debug log on stderr (default: its errors only)\n"
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
	 "nkv store KEY [FILE|-] [--must-exist | --must-not-exist] [--ttl SECONDS|none] [--pin]\n"
	 "          [--block-hash HASH]\n"
	 "  Store FILE (or stdin) under KEY. --must-exist: only replace (exit 2 if absent);\n"
	 "  --must-not-exist: only create (exit 3 if present).\n"
	 "  On a namespace with a cache (rados-nkv's Store TTL, vendor opcode F1h): --ttl SECONDS: the\n"
	 "  entry expires SECONDS after the store (0: the namespace's default TTL; none: never);\n"
	 "  --pin: an explicit entry, never evicted until it expires (needs a finite TTL, its own or\n"
	 "  the namespace's default), counted against the pin quota (\"pin quota exceeded\": exit 1).\n"
	 "  The TTL printed is the one the target applied (a namespace's max_ttl cuts longer ones).\n"
	 "  --block-hash HASH (decimal or 0x hex, 64 bits): the serving engine's block hash, which\n"
	 "  the gateway's KV events name the entry by (a Store TTL; without it, the key's last 8 bytes).\n"
	 "  Each on a namespace without a cache fails (exit 1), --block-hash excepted (ignored there)."},
	{"retrieve", cmd_retrieve, 1, 2,
	 "nkv retrieve KEY [FILE|-] [--max-size N] [--offset N]\n"
	 "  Write KEY's value to FILE or stdout. Without --max-size the buffer is the namespace's\n"
	 "  max value size; with it, a longer value is truncated to N bytes (with a warning).\n"
	 "  --offset N: only the bytes from offset N on (rados-nkv's Retrieve Range, vendor opcode\n"
	 "  F2h), at most --max-size of them; an offset at or past the end returns nothing (exit 0,\n"
	 "  with a warning)."},
	{"delete", cmd_delete, 1, 1, "nkv delete KEY\n  Delete KEY (exit 2 if absent)."},
	{"exist", cmd_exist, 1, 1, "nkv exist KEY\n  Exit 0 if KEY exists, 2 if not."},
	{"list", cmd_list, 0, 1,
	 "nkv list [START_KEY] [--max N]\n  Print the keys >= START_KEY (default: all) in ascending byte order."},
	{"exec", cmd_exec, 2, 2,
	 "nkv exec KEY OPCODE [--in FILE|- | --arg HEX] [--out FILE|-] [--size N]\n"
	 "  Run rados-nkv vendor Exec OPCODE (0x80 to 0xef, hex with 0x or decimal) on KEY: the target runs\n"
	 "  the RADOS class method the namespace allowlists for OPCODE on KEY's object. OPCODE bits 1:0 give\n"
	 "  the data direction: 00b no data, 01b input from --in FILE (or - for stdin; none: empty),\n"
	 "  10b output to --out FILE or stdout (binary; --size N is the buffer, default 1M: a longer output\n"
	 "  is truncated with a warning, the method is not re-run). --arg HEX: up to 8 inline input bytes\n"
	 "  (00b and 10b). Errors: Invalid Command Opcode (not allowlisted), \"class or method not\n"
	 "  available on the OSD\" (C0h), \"method failed: ERRNO\" (C1h); exit 1."},
	{"show-host", cmd_show_host, 0, 0,
	 "nkv show-host\n  Print the host NQN and host ID nkv sends in Connect (and to --allow-host lists),\n"
	 "  and where each comes from: option, file, hostnqn (the UUID of a uuid host NQN), hostid\n"
	 "  (a uuid NQN of the host ID), dmi (product_uuid) or random (this run only)."},
	{"gen-tls-key", cmd_gen_tls_key, 0, 1,
	 "nkv gen-tls-key [01|02|00]\n  Print a random configured PSK for NVMe/TCP TLS in the interchange format\n"
	 "  NVMeTLSkey-1:hh:BASE64(key + CRC-32): (what nvme gen-tls-key prints): hh 01 (default) a 32-byte key\n"
	 "  for TLS_AES_128_GCM_SHA256, 02 a 48-byte key for TLS_AES_256_GCM_SHA384, 00 a 32-byte key used as is.\n"
	 "  Give it to the target (rados-nkv --tls-key HOSTNQN=KEY) and to the host (nkv --tls-key KEY)."},
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
	OPT_OFFSET,
	OPT_MAX,
	OPT_IN,
	OPT_ARG,
	OPT_OUT,
	OPT_SIZE,
	OPT_DHCHAP_SECRET,
	OPT_DHCHAP_CTRL_SECRET,
	OPT_TLS,
	OPT_TLS_KEY,
	OPT_TLS_ID,
	OPT_TTL,
	OPT_PIN,
	OPT_BLOCK_HASH,
};

/* A leading ':' tells a missing argument (':') from an unknown option ('?'); opterr is 0, the
 * messages are ours (so -o json reports them too). */
static const char *const g_short = ":t:a:s:n:q:I:o:vhV";

static const struct option g_opts[] = {
	{"transport", required_argument, NULL, 't'},
	{"traddr", required_argument, NULL, 'a'},
	{"trsvcid", required_argument, NULL, 's'},
	{"nqn", required_argument, NULL, 'n'},
	{"nsid", required_argument, NULL, OPT_NSID},
	{"hostnqn", required_argument, NULL, 'q'},
	{"hostid", required_argument, NULL, 'I'},
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
	{"offset", required_argument, NULL, OPT_OFFSET},
	{"max", required_argument, NULL, OPT_MAX},
	{"in", required_argument, NULL, OPT_IN},
	{"arg", required_argument, NULL, OPT_ARG},
	{"out", required_argument, NULL, OPT_OUT},
	{"size", required_argument, NULL, OPT_SIZE},
	{"dhchap-secret", required_argument, NULL, OPT_DHCHAP_SECRET},
	{"dhchap-ctrl-secret", required_argument, NULL, OPT_DHCHAP_CTRL_SECRET},
	{"tls", no_argument, NULL, OPT_TLS},
	{"tls-key", required_argument, NULL, OPT_TLS_KEY},
	{"tls-identity", required_argument, NULL, OPT_TLS_ID},
	{"ttl", required_argument, NULL, OPT_TTL},
	{"pin", no_argument, NULL, OPT_PIN},
	{"block-hash", required_argument, NULL, OPT_BLOCK_HASH},
	{NULL, 0, NULL, 0},
};


static const char *port_of(const struct cli *c)
{
	return c->trsvcid ? c->trsvcid : "4420";
}

const char *cli_host_src(const struct cli *c, bool nqn)
{
	static char buf[320];
	enum nkv_host_src s = nqn ? c->host.hostnqn_src : c->host.hostid_src;
	switch (s) {
	case NKV_HOST_SRC_FILE:
		snprintf(buf, sizeof(buf), "%s", nqn ? c->host.hostnqn_file : c->host.hostid_file);
		return buf;
	case NKV_HOST_SRC_NQN:
		snprintf(buf, sizeof(buf), "the uuid NQN in %s", c->host.hostnqn_file);
		return buf;
	case NKV_HOST_SRC_HOSTID:
		snprintf(buf, sizeof(buf), "the host ID in %s", c->host.hostid_file);
		return buf;
	case NKV_HOST_SRC_DMI:
		return "/sys/class/dmi/id/product_uuid";
	case NKV_HOST_SRC_RANDOM:
		return "generated for this run";
	default:
		return nqn ? "--hostnqn" : "--hostid";
	}
}

int cmd_show_host(struct cli *c)
{
	char u[37];
	nkv_uuid_format(c->host.hostid, u);
	if (c->json) {
		printf("{\"command\":\"show-host\",\"hostnqn\":");
		json_str(stdout, c->host.hostnqn, strlen(c->host.hostnqn));
		printf(",\"hostid\":\"%s\",\"hostnqn_source\":\"%s\",\"hostid_source\":\"%s\",\"hostnqn_file\":", u,
		       nkv_host_src_name(c->host.hostnqn_src), nkv_host_src_name(c->host.hostid_src));
		json_str(stdout, c->host.hostnqn_file, strlen(c->host.hostnqn_file));
		printf(",\"hostid_file\":");
		json_str(stdout, c->host.hostid_file, strlen(c->host.hostid_file));
		printf("}\n");
	} else {
		printf("hostnqn : %s (%s)\n", c->host.hostnqn, cli_host_src(c, true));
		printf("hostid  : %s (%s)\n", u, cli_host_src(c, false));
	}
	return EXIT_OK;
}

/*
 * Settle the host identity once, before any connection: --hostnqn/--hostid, else the files and
 * fallbacks of nkv_host_ident_load(). A malformed file that an option does not replace is an error
 * (exit 1): sending some other identity would only fail later, at an allowlist, less clearly.
 */
static int host_settle(struct cli *c, const char *hostnqn, const char *hostid)
{
	int rc = nkv_host_ident_load(&c->host);
	if (rc < 0 && ((c->host.bad_hostnqn && !hostnqn) || (!c->host.bad_hostnqn && !hostid))) {
		const char *f = c->host.bad_hostnqn ? c->host.hostnqn_file : c->host.hostid_file;
		fprintf(stderr, "nkv: %s is malformed (%s); fix it or pass %s\n", f,
			c->host.bad_hostnqn ? "want one NQN: nqn.<yyyy-mm>.<domain>:<name>, at most 223 bytes"
					    : "want one UUID: xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
			c->host.bad_hostnqn ? "--hostnqn" : "--hostid");
		return EXIT_ERR;
	}
	if (hostnqn) {
		snprintf(c->host.hostnqn, sizeof(c->host.hostnqn), "%s", hostnqn);
		c->host.hostnqn_src = NKV_HOST_SRC_OPTION;
	}
	if (hostid) {
		nkv_uuid_parse(hostid, c->host.hostid); /* checked when parsed */
		c->host.hostid_src = NKV_HOST_SRC_OPTION;
	}
	c->opts.hostnqn = c->host.hostnqn;
	memcpy(c->opts.hostid, c->host.hostid, 16);
	return EXIT_OK;
}

/**
 * No -n: the subsystem the discovery log lists (nkv_discover_subsys(): at the -s port when given, as
 * rados-nkv serves discovery on every listener, else at 8009), when it lists exactly one. Several
 * are a usage error naming them: a default that moved to a newly added subsystem would send I/O
 * there silently.
 */
static int discover_nqn(struct cli *c)
{
	struct nkv_disc_entry sub, *e = NULL;
	unsigned n = 0;
	const char *dport = c->trsvcid ? c->trsvcid : NKV_DISCOVERY_PORT;
	int rc = nkv_discover_subsys(c->traddr, c->trsvcid, &c->opts, &sub, &e, &n);
	if (rc == -ENOTUNIQ) {
		fprintf(stderr, "nkv: the discovery log at %s:%s lists several subsystems:\n", c->traddr, dport);
		for (unsigned i = 0; i < n; i++)
			if (e[i].subtype == NKV_SUBTYPE_NVME && e[i].trtype == NKV_TRTYPE_TCP)
				fprintf(stderr, "  %s (port %s)\n", e[i].subnqn, e[i].trsvcid);
		free(e);
		return cli_usage(c, "no subsystem NQN given and %s:%s offers several; pass -n SUBNQN", c->traddr, dport);
	}
	free(e);
	if (rc == -ENOENT) {
		cli_json_error(c, "discovery: no NVMe/TCP subsystem", -ENOENT, 0);
		fprintf(stderr, "nkv: the discovery log at %s:%s lists no NVMe/TCP subsystem; pass -n SUBNQN\n",
			c->traddr, dport);
		return EXIT_ERR;
	}
	if (rc == -ECONNREFUSED) {
		char m[512];
		snprintf(m, sizeof(m), "nothing listening at %s:%s (is rados-nkv running there?); without -n, nkv "
				       "reads the subsystem from the discovery log at that port", c->traddr, dport);
		cli_json_error(c, m, rc, 0);
		fprintf(stderr, "nkv: %s\n", m);
		return EXIT_ERR;
	}
	if (rc) {
		cli_connect_error(c, dport, NKV_DISCOVERY_NQN, rc);
		return EXIT_ERR;
	}
	snprintf(c->nqn_buf, sizeof(c->nqn_buf), "%s", sub.subnqn);
	c->nqn = c->nqn_buf;
	if (!c->trsvcid && sub.trsvcid[0]) {
		snprintf(c->port_buf, sizeof(c->port_buf), "%s", sub.trsvcid);
		c->trsvcid = c->port_buf;
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
	int rc = c->shm_path ? nkv_connect(c->shm_addr, NULL, NULL, &c->opts, &c->ctrl)
			     : nkv_connect(c->traddr, port_of(c), c->nqn, &c->opts, &c->ctrl);
	if (rc == 0 && c->shm_path && c->nqn && strncmp(c->nqn, nkv_ctrl_identify(c->ctrl)->subnqn, 256) != 0) {
		cli_json_error(c, "connect: another subsystem", -ENOENT, 0);
		fprintf(stderr, "nkv: %s serves %.256s, not %s\n", c->shm_addr, nkv_ctrl_identify(c->ctrl)->subnqn,
			c->nqn);
		return EXIT_ERR;
	}
	if (c->shm_path && rc == 0 && !c->nqn)
		c->nqn = nkv_ctrl_identify(c->ctrl)->subnqn;
	if (rc) {
		cli_connect_error(c, port_of(c), c->nqn, rc);
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
			cli_connect_error(c, port_of(c), c->nqn, rc);
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

static void cmd_help(const struct cli *c, const struct cmd *k)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "usage: %s\n\nGlobal options (-t, -a, -s, -n, --nsid, -q, -I, --hdgst, --ddgst, --dhchap-secret, "
		 "--dhchap-ctrl-secret, -o, --hex, --timeout) "
		 "apply; see nkv --help.\n",
		 k->usage);
	cli_help(c, text);
}

/* Parse the options and run the command. @return the exit status. */
static int run(struct cli *c, int argc, char **argv)
{
	bool help = false;
	const char *hostnqn = NULL, *hostid = NULL;

	opterr = 0;
	uint8_t uuid[16];
	int o;
	uint64_t v;

	while ((o = getopt_long(argc, argv, g_short, g_opts, NULL)) != -1) {
		switch (o) {
		case 't':
			if (strncmp(optarg, "shm:", 4) == 0 && optarg[4]) {
				c->shm_path = optarg + 4;
				c->shm_scheme = "shm";
			} else if (strncmp(optarg, "vfio-user:", 10) == 0 && optarg[10]) {
				c->shm_path = optarg + 10;
				c->shm_scheme = "vfio-user";
			} else if (strcmp(optarg, "tcp") == 0) {
				c->shm_path = NULL;
			} else {
				return cli_usage(c, "unknown --transport '%s' (tcp, shm:/path/to/socket or "
						    "vfio-user:/path/to/socket)", optarg);
			}
			c->shm_addr = optarg;
			break;
		case 'a':
			c->traddr = optarg;
			break;
		case 's':
			c->trsvcid = optarg;
			break;
		case 'n':
			c->nqn = optarg;
			break;
		case 'q':
			if (nkv_hostnqn_check(optarg))
				return cli_usage(c, "bad --hostnqn '%s' (nqn.<yyyy-mm>.<domain>:<name>, at most 223 bytes, "
						 "no spaces)", optarg);
			hostnqn = optarg;
			break;
		case 'I':
			if (nkv_uuid_parse(optarg, uuid))
				return cli_usage(c, "bad --hostid '%s' (a UUID: xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", optarg);
			hostid = optarg;
			break;
		case 'o':
			/* c->json is already set: cli_json_begin() read every -o before any option ran */
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "normal") != 0)
				return cli_usage(c, "unknown output format '%s' (normal or json)", optarg);
			break;
		case 'v':
			nkv_log_set_level(NKV_LOG_DEBUG);
			break;
		case 'h':
			help = true;
			break;
		case 'V':
			/* libnkv's own version too: the CLI links it statically today, a packaged build may not */
			if (c->json)
				printf("{\"command\": \"version\", \"nkv\": \"%s\", \"libnkv\": \"%s\"}\n",
				       NKV_VERSION_STRING, nkv_version());
			else
				printf("nkv %s (libnkv %s)\n", NKV_VERSION_STRING, nkv_version());
			return EXIT_OK;
		case OPT_NSID:
			if (parse_size(optarg, &v) || v == 0 || v > 0xfffffffeull)
				return cli_usage(c, "bad --nsid '%s'", optarg);
			c->nsid = (uint32_t)v;
			break;
		case OPT_HDGST:
			c->opts.hdgst = true;
			break;
		case OPT_DDGST:
			c->opts.ddgst = true;
			break;
		case OPT_DHCHAP_SECRET:
		case OPT_DHCHAP_CTRL_SECRET: {
			struct nkv_dhchap_key k;
			const char *why = NULL;
			int bad = nkv_dhchap_key_parse(optarg, &k, &why);
			nkv_dhchap_wipe(&k, sizeof(k));
			if (bad) /* never echo the secret */
				return cli_usage(c, "bad --%s: %s", o == OPT_DHCHAP_SECRET ? "dhchap-secret" : "dhchap-ctrl-secret",
						 why);
			*(o == OPT_DHCHAP_SECRET ? &c->opts.dhchap_secret : &c->opts.dhchap_ctrl_secret) = optarg;
			break;
		}
		case OPT_HEX:
			c->hex = true;
			break;
		case OPT_TIMEOUT:
			if (parse_size(optarg, &v) || v == 0 || v > 86400000)
				return cli_usage(c, "bad --timeout '%s' (milliseconds)", optarg);
			c->opts.timeout_ms = (int)v;
			break;
		case OPT_NS:
			c->ns = true;
			break;
		case OPT_MUST_EXIST:
			c->store_opts |= NKV_STORE_MUST_EXIST;
			break;
		case OPT_MUST_NOT_EXIST:
			c->store_opts |= NKV_STORE_MUST_NOT_EXIST;
			break;
		case OPT_MAX_SIZE:
			if (parse_size(optarg, &v) || v == 0 || v > 0xffffffffull)
				return cli_usage(c, "bad --max-size '%s' (1 byte to 4 GiB - 1)", optarg);
			c->max_size = v;
			break;
		case OPT_OFFSET:
			if (parse_size(optarg, &v))
				return cli_usage(c, "bad --offset '%s' (a byte offset, 0 to 2^64 - 1; K/M/G suffixes)", optarg);
			c->offset = v;
			c->offset_set = true;
			break;
		case OPT_MAX:
			if (parse_size(optarg, &v) || v == 0)
				return cli_usage(c, "bad --max '%s'", optarg);
			c->max_keys = v;
			break;
		case OPT_IN:
			c->exec_in = optarg;
			break;
		case OPT_ARG:
			c->exec_arg = optarg;
			break;
		case OPT_OUT:
			c->exec_out = optarg;
			break;
		case OPT_SIZE:
			if (parse_size(optarg, &v) || v > 0xffffffffull)
				return cli_usage(c, "bad --size '%s' (0 bytes to 4 GiB - 1)", optarg);
			c->exec_size = v;
			c->exec_size_set = true;
			break;
		case OPT_TLS:
			c->opts.tls = true;
			break;
		case OPT_TLS_KEY: {
			struct nkv_psk k;
			int rc = nkv_psk_load(optarg, &k);
			nkv_psk_wipe(&k, sizeof(k));
			if (rc < 0)
				return cli_usage(c, "bad --tls-key%s%s: %s", optarg[0] == '@' ? " " : "",
						 optarg[0] == '@' ? optarg : "", nkv_psk_strerror(rc));
			c->opts.tls = true;
			c->opts.tls_key = optarg;
			break;
		}
		case OPT_TLS_ID:
			if (strcmp(optarg, "0") && strcmp(optarg, "1"))
				return cli_usage(c, "bad --tls-identity '%s' (0: NVMe0Rxx, 1: NVMe1Rxx)", optarg);
			c->opts.tls_identity = (uint8_t)(optarg[0] - '0');
			break;
		case OPT_TTL:
			if (strcmp(optarg, "none") == 0) {
				c->ttl_s = NKV_TTL_NONE;
			} else {
				/* seconds in decimal; FFFFFFFFh is "none" on the wire, so the largest number is one less */
				char *end;
				errno = 0;
				unsigned long long t = strtoull(optarg, &end, 10);
				if (errno || end == optarg || *end || optarg[0] == '-' || t >= NKV_TTL_NONE)
					return cli_usage(c, "bad --ttl '%s' (seconds, 0 to 4294967294; 0: the namespace's "
							 "default; none: never expires)", optarg);
				c->ttl_s = (uint32_t)t;
			}
			c->ttl_set = true;
			break;
		case OPT_PIN:
			c->pin = true;
			break;
		case OPT_BLOCK_HASH: {
			/* decimal or 0x hex, all 64 bits (vLLM's hashes are unsigned; llm-d reads a uint64) */
			char *end;
			errno = 0;
			unsigned long long h = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end || optarg[0] == '-' || optarg[0] == '+' ||
			    (optarg[0] == '0' && optarg[1] >= '0' && optarg[1] <= '9'))
				return cli_usage(c, "bad --block-hash '%s' (a 64-bit number, decimal or 0x hex)", optarg);
			c->block_hash = h;
			c->hash_set = true;
			break;
		}
		case ':':
			return cli_usage(c, "option '%s' needs an argument", argv[optind - 1]);
		default: /* '?' */
			if (optopt)
				return cli_usage(c, "unknown option '-%c'", optopt);
			return cli_usage(c, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		if (help) {
			cli_help(c, g_usage);
			return EXIT_OK;
		}
		if (!c->json)
			fputs(g_usage, stderr);
		return cli_usage(c, "no command given");
	}
	c->cmd = argv[optind];
	if (strcmp(c->cmd, "help") == 0) {
		cli_help(c, g_usage);
		return EXIT_OK;
	}
	const struct cmd *k = NULL;
	for (size_t i = 0; i < sizeof(g_cmds) / sizeof(g_cmds[0]); i++)
		if (strcmp(g_cmds[i].name, c->cmd) == 0)
			k = &g_cmds[i];
	if (!k)
		return cli_usage(c, "unknown command '%s'", c->cmd);
	if (help) {
		cmd_help(c, k);
		return EXIT_OK;
	}
	c->args = argv + optind + 1;
	c->nargs = argc - optind - 1;
	if (c->nargs < k->min_args || c->nargs > k->max_args) {
		fprintf(stderr, "usage: %s\n", k->usage);
		return cli_usage(c, "%s: wrong number of arguments (%d)", c->cmd, c->nargs);
	}
	if (c->shm_path && k->fn == cmd_discover)
		return cli_usage(c, "%s: no discovery over %s (the socket path names the subsystem)", c->cmd,
				 c->shm_scheme);
	if (c->opts.tls && !c->opts.tls_key)
		return cli_usage(c, "--tls needs --tls-key KEY|@FILE (the PSK in the interchange format)");
	if (c->opts.tls && c->shm_path)
		return cli_usage(c, "--tls is for NVMe/TCP, not %s", c->shm_scheme);
	if ((c->ttl_set || c->pin) && k->fn != cmd_store && k->fn != cmd_bench)
		return cli_usage(c, "%s: --ttl and --pin are for store (and bench)", c->cmd);
	if (c->hash_set && k->fn != cmd_store)
		return cli_usage(c, "%s: --block-hash is for store", c->cmd);
	if (c->store_opts == (NKV_STORE_MUST_EXIST | NKV_STORE_MUST_NOT_EXIST))
		return cli_usage(c, "%s: --must-exist and --must-not-exist exclude each other", c->cmd);
	if (c->opts.dhchap_ctrl_secret && !c->opts.dhchap_secret)
		return cli_usage(c, "--dhchap-ctrl-secret needs --dhchap-secret (the host authenticates first)");
	int ex = c->shm_path ? EXIT_OK : cli_addr_settle(c);
	if (!ex)
		ex = host_settle(c, hostnqn, hostid);
	return ex ? ex : k->fn(c);
}

int main(int argc, char **argv)
{
	struct cli c = {.traddr = "127.0.0.1", .nsid = 1};
	/* One message per failure: nkv explains each error itself, so libnkv's warnings would say it
	 * twice. -v (or NKV_LOG_LEVEL) brings the library's lines back. */
	if (!getenv("NKV_LOG_LEVEL"))
		nkv_log_set_level(NKV_LOG_ERROR);
	cli_json_begin(&c, argc, argv);
	int ex = run(&c, argc, argv);
	if (c.qp)
		nkv_qpair_destroy(c.qp);
	nkv_disconnect(c.ctrl);
	return cli_json_end(&c, ex);
}
