/* SPDX-License-Identifier: Apache-2.0 */
/* cli.h - the nkv command-line client: shared state and helpers. */
#ifndef NKV_CLI_H
#define NKV_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nkv/nkv.h"

/* Exit codes (documented in `nkv --help` and docs/cli.md) */
#define EXIT_OK 0
#define EXIT_ERR 1
#define EXIT_NOKEY 2  /* key not found */
#define EXIT_EXISTS 3 /* key exists (store --must-not-exist) */
#define EXIT_USAGE 64 /* bad usage (sysexits EX_USAGE) */

struct cli {
	const char *shm_path;  /* --transport shm:PATH or vfio-user:PATH (NULL: NVMe/TCP) */
	const char *shm_addr;  /* the whole --transport value then */
	const char *shm_scheme;/* "shm" or "vfio-user" then */
	const char *traddr;
	const char *trsvcid;   /* NULL: 4420, or the port discovery reported */
	const char *nqn;
	uint32_t nsid;
	bool json;
	bool hex;
	bool ns;               /* identify --ns */
	unsigned store_opts;
	uint32_t ttl_s;        /* store --ttl: seconds, NKV_TTL_NONE for "none" (Store TTL, F1h) */
	bool ttl_set;          /* --ttl given (even 0: the namespace's default): send Store TTL */
	bool pin;              /* store --pin: an explicit (pinned) entry */
	bool hash_set;         /* store --block-hash given: a Store TTL naming the entry in KV events */
	uint64_t block_hash;   /* its value (the serving engine's 64-bit block hash) */
	uint64_t max_size;     /* retrieve --max-size (0: namespace KVVML) */
	uint64_t offset;       /* retrieve --offset: first byte of the value (Retrieve Range, F2h) */
	bool offset_set;       /* --offset given (even 0): send Retrieve Range */
	uint64_t max_keys;     /* list --max (0: all) */
	const char *exec_in;   /* exec --in FILE ("-": stdin) */
	const char *exec_arg;  /* exec --arg HEX */
	const char *exec_out;  /* exec --out FILE ("-": stdout) */
	uint64_t exec_size;    /* exec --size (host buffer for 10b opcodes) */
	bool exec_size_set;    /* --size given (0 is valid: it probes the output length) */
	struct nkv_conn_opts opts;
	struct nkv_host_ident host; /* the host NQN and ID sent (opts points at them), and their sources */
	const char *cmd;
	char **args;           /* positional arguments after the command */
	int nargs;
	/* connection */
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	char port_buf[33];
	char addr_buf[257];    /* -a without its ":PORT" */
	char nqn_buf[257];
};

/* main.c */
/** Connect (discovering the NQN when -n is absent); @io: also create an I/O queue pair. @return exit code. */
int cli_connect(struct cli *c, bool io);
/* json_out.c */
#define CLI_STATUS_USAGE 0x10000u /* cli_json_error(): bad usage, not an NVMe status */
/** Set c->json from argv (before any option is parsed, so even a bad option answers in JSON) and,
 *  with it, hold stdout in memory until cli_json_end(). */
void cli_json_begin(struct cli *c, int argc, char **argv);
/** End the run: print what was held, or an error object if nothing was. @return @ex. */
int cli_json_end(struct cli *c, int ex);
/** Drop what the command printed so far (the object it started is replaced by an error). */
void cli_json_discard(void);
/**
 * With -o json, print the command's error object: {"command": name or null, "error": text,
 * "status": the NVMe status name when the target answered, "usage" for bad usage, else the
 * errno's name ("ECONNREFUSED"), "errno": positive errno or 0, and "nvme_status": SCT << 8 | SC
 * when the target answered}. It replaces anything the command printed before.
 */
void cli_json_error(const struct cli *c, const char *reason, int rc, unsigned status);
/** Report bad usage: "nkv: MSG" on stderr, the JSON error with status "usage". @return EXIT_USAGE. */
int cli_usage(const struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Print help @text (with -o json: {"command":"help","usage":text}). */
void cli_help(const struct cli *c, const char *text);
/** Where the host NQN (@nqn) or the host ID came from, for people ("/etc/nvme/hostnqn", "--hostid"...). */
const char *cli_host_src(const struct cli *c, bool nqn);
/** Print "nkv: WHAT failed: REASON" for a failed command. @return the exit code for @rc. */
int cli_fail(struct cli *c, const char *what, int rc, const struct nkv_cpl *cpl, const char *detail);

/* conn.c */
/**
 * Check -a/-s: "[v6]", "[v6]:PORT" and "HOST:PORT" are split (a port in both places must agree);
 * a port is a number, 1 to 65535. @return EXIT_OK or EXIT_USAGE (reported).
 */
int cli_addr_settle(struct cli *c);
/** Report a failed connection to @port (@nqn: the subsystem), one message per cause (stderr, JSON). */
void cli_connect_error(const struct cli *c, const char *port, const char *nqn, int rc);

/* cmds.c */
int cmd_discover(struct cli *c);
int cmd_list_ns(struct cli *c);
int cmd_identify(struct cli *c);
int cmd_store(struct cli *c);
int cmd_retrieve(struct cli *c);
int cmd_delete(struct cli *c);
int cmd_exist(struct cli *c);
int cmd_list(struct cli *c);
int cmd_show_host(struct cli *c);
int cmd_gen_tls_key(struct cli *c); /* tlskey.c */
int cmd_exec(struct cli *c);  /* exec.c */
int cmd_bench(struct cli *c); /* bench.c */

/* util.c */
/** Parse a key (text, or hex with --hex). @return 0 or -EINVAL (with a message printed). */
int key_parse(const struct cli *c, const char *s, uint8_t key[16], unsigned *klen);
/** JSON members "key" (text, or hex with --hex) and "key_hex" (cmds.c). */
void json_key(const struct cli *c, const uint8_t *key, unsigned klen);
/** Key for people: text (non-printable bytes as \xNN), or hex with --hex. */
void key_print(FILE *f, const struct cli *c, const uint8_t *key, unsigned klen);
void key_hex(char out[33], const uint8_t *key, unsigned klen);
/** JSON string literal of @len bytes (non-ASCII bytes as \u00XX). */
void json_str(FILE *f, const void *buf, size_t len);
/** "64 MiB", "4 KiB", "70.5 MiB", "12 bytes". */
const char *size_str(uint64_t n, char buf[32]);
/** Status name without the "(SCT ..)" suffix. */
const char *status_name(uint16_t status, char buf[96]);
/** Read a whole file ("-": stdin) into a malloc'ed buffer. @return 0 or -errno. */
int read_input(const char *path, uint8_t **buf, size_t *len, size_t limit);
/** Write @len bytes to @path ("-" or NULL: stdout). @return 0 or -errno. */
int write_output(const char *path, const void *buf, size_t len);
/** Parse a size with an optional K/M/G suffix (binary). @return 0 or -EINVAL. */
int parse_size(const char *s, uint64_t *out);

#endif
