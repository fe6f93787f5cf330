/* SPDX-License-Identifier: Apache-2.0 */
/* ctl_cli.h - nkv-ctl, the control-plane client: shared state, the command table, helpers. */
#ifndef NKV_CTL_CLI_H
#define NKV_CTL_CLI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "control/ctl.h"

/* Exit codes (nkv-ctl --help, docs/cli.md): 0-3 and 64 as nkv's; one per class
 * of gRPC status the server answers; sysexits' EX_UNAVAILABLE and EX_SOFTWARE for the rest. */
#define EXIT_OK 0
#define EXIT_NOT_FOUND 2      /* NOT_FOUND */
#define EXIT_EXISTS 3         /* ALREADY_EXISTS */
#define EXIT_INVALID 4        /* INVALID_ARGUMENT */
#define EXIT_PRECONDITION 5   /* FAILED_PRECONDITION */
#define EXIT_ABORTED 6        /* ABORTED: a concurrent change won; retry */
#define EXIT_USAGE 64         /* bad usage (EX_USAGE) */
#define EXIT_UNAVAILABLE 69   /* UNAVAILABLE, DEADLINE_EXCEEDED: server or cluster unreachable (EX_UNAVAILABLE) */
#define EXIT_SOFTWARE 70      /* any other status (INTERNAL, UNIMPLEMENTED, ...) (EX_SOFTWARE) */

/* Command options: a bit each, so a command can refuse the ones it does not take. */
enum {
	O_POOL = 1u << 0,
	O_MAX_NS = 1u << 1,
	O_ANY_HOST = 1u << 2,
	O_SHM = 1u << 3,
	O_NSID = 1u << 4,
	O_RADOS_NS = 1u << 5,
	O_MAX_VALUE = 1u << 6,
	O_READ_ONLY = 1u << 7,
	O_DHCHAP = 1u << 8,
	O_DHCHAP_CTRL = 1u << 9,
	O_GATEWAY = 1u << 10,
	O_TLS_LISTENER = 1u << 11,
	O_CACHE = 1u << 12,         /* ns add --cache */
	O_REPLACE = 1u << 13,       /* ns cache-policy --replace */
	O_POLICY_FIRST = 14,        /* bit of the first cache policy option (g_ctl_policy_opts) */
	O_ALL = 1u << 27,           /* group repair --all */
	O_ANA_GROUP = 1u << 28,     /* ns add --ana-group */
	O_VFU = 1u << 29,           /* subsystem add --vfio-user, --vfio-user-host */
};
#define O_POLICY(i) (1u << (O_POLICY_FIRST + (i)))
#define CTL_NPOLICY 13
#define O_POLICY_ALL (((1u << CTL_NPOLICY) - 1) << O_POLICY_FIRST)

/** A cache policy option: --capacity SIZE and the others; each sets one CachePolicy field. */
struct ctl_policy_opt {
	const char *opt;          /* "--capacity" */
	const char *field;        /* "capacity_bytes" */
	enum { POL_SIZE, POL_NUM, POL_EVICT } kind;
	uint64_t lo, hi;          /* range of a number */
	bool u64;                 /* a uint64 field (proto3 JSON: a decimal string) */
};
extern const struct ctl_policy_opt g_ctl_policy_opts[CTL_NPOLICY];

struct ctl_cli {
	struct nkv_ctl_client_conf conf;
	bool json;                /* -o json */
	char cmd_name[64];        /* "subsystem add" (for messages and the JSON error), "" before one is known */
	char **args;              /* positional arguments after the command words */
	int nargs;
	unsigned given;           /* O_* seen */
	/* command option values */
	const char *pool, *shm, *rados_ns, *gateway;
	const char *vfu, *vfu_host; /* subsystem add --vfio-user, --vfio-user-host */
	char *dhchap_key, *dhchap_ctrl_key; /* malloc'ed (read from @FILE or copied); wiped at exit */
	uint32_t max_ns, nsid, ana_group;
	uint64_t max_value;
	uint64_t policy[CTL_NPOLICY];  /* cache policy option values (given: O_POLICY(i)) */
	const char *eviction;          /* --eviction: "lru", "fifo" or "off" */
};

struct ctl_cmd {
	const char *group, *verb; /* "subsystem", "add"; verb NULL: the group is the command */
	const char *summary;      /* one line for the command list */
	const char *method;       /* the RPC */
	int min_args, max_args;
	unsigned opts;            /* O_* it takes */
	/** Fill the request from c (arguments checked here). @return EXIT_OK or EXIT_USAGE (reported). */
	int (*build)(struct ctl_cli *c, json_object *req);
	/** Print the response for people. */
	void (*show)(const struct ctl_cli *c, json_object *resp);
	const char *usage;        /* "subsystem add NQN --pool P [...]\n  what it does" */
};

extern const struct ctl_cmd g_ctl_cmds[];
extern const unsigned g_ctl_ncmds;

/* main.c */
/** "nkv-ctl: MSG" on stderr, the JSON error with status "usage". @return EXIT_USAGE. */
int ctl_usage(const struct ctl_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* util.c */
/** A decimal number from @lo to @hi (no sign, no spaces, no base prefix). @return 0 or -EINVAL. */
int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/** A size: decimal with an optional K/M/G/T suffix (binary; "KiB"/"KB" too). @return 0 or -EINVAL. */
int parse_size(const char *s, uint64_t *out);
/** "ADDR:PORT" or "[V6]:PORT" with an IP literal and a port 1-65535 into @addr (no brackets). */
int parse_listener(const char *s, char addr[64], uint32_t *port);
/** "64 MiB", "1.5 GiB", "512 bytes". */
const char *size_str(uint64_t n, char buf[32]);
/** Members of a response object; absent members read as "", 0, false, an empty array. uint64
 *  members are decimal strings in proto3's JSON mapping; numbers are taken too. */
const char *jstr(json_object *o, const char *key);
uint64_t ju64(json_object *o, const char *key);
bool jbool(json_object *o, const char *key);
size_t jlen(json_object *o, const char *key);
json_object *jat(json_object *o, const char *key, size_t i);
/** Put a uint64 as proto3's JSON mapping writes it (a decimal string). */
void jput_u64(json_object *o, const char *key, uint64_t v);

/* table.c: columns padded to their widest cell; two spaces between columns. */
struct table;
struct table *tab_new(int ncol, const char *const *heads);
/** Add a row of @ncol cells (printf-formatted each: pass already formatted strings). */
void tab_row(struct table *t, const char *const *cells);
/** Print (with @indent spaces before each line) and free. */
void tab_print(struct table *t, FILE *f, int indent);

#endif
