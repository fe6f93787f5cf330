/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - rados-nkv daemon configuration: a JSON file (parsed with json-c) and command-line
 * flags, merged into one struct. The format is documented in docs/configuration.md and man/rados-nkv.8.scd.
 */
#ifndef NKV_DAEMON_CONFIG_H
#define NKV_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "nkv/nkv_target.h"

#define CONF_MAX_LISTENERS 16
#define CONF_MAX_SUBSYS 64
#define CONF_MAX_NS 64
#define CONF_MAX_HOSTS 64
#define CONF_SECRET_MAX 128 /* a DHHC-1 secret with its NUL */

/** DH-HMAC-CHAP settings of one allowed host (the secrets as written; checked when loaded). */
struct conf_host_auth {
	char key[CONF_SECRET_MAX];
	char ctrl_key[CONF_SECRET_MAX]; /* "": none */
	char hashes[64];                /* comma separated; "": the target's default */
	char dhgroups[128];
};

struct conf_listener {
	char addr[256];
	char port[16];
	bool tls;            /* a secure listener: TLS 1.3 with a PSK required (TP 8011) */
	int bound;           /* the port it got (port 0: the kernel's choice); 0 until listening */
};

/** A TLS PSK of one host on one subsystem. */
struct conf_psk {
	char host[224];
	char *key;           /* the interchange string, or "@PATH" of a file holding it (malloc'ed) */
};

struct conf_subsys {
	char nqn[224];
	char pool[256];
	struct nkv_ns_conf ns[CONF_MAX_NS];
	char rados_ns[CONF_MAX_NS][128];
	unsigned nns;
	struct nkv_exec_rule *exec[CONF_MAX_NS]; /* each namespace's Exec allowlist (malloc'ed, with its
						 * strings and inputs; conf_free) */
	unsigned nexec[CONF_MAX_NS];
	struct nkv_cache_policy cache[CONF_MAX_NS]; /* each namespace's cache policy, when has_cache */
	bool has_cache[CONF_MAX_NS];             /* a "cache" object: a cache namespace */
	struct nkv_subsys *ss;                   /* the running subsystem (for SIGHUP) */
	char hosts[CONF_MAX_HOSTS][224];
	struct conf_host_auth *auth[CONF_MAX_HOSTS]; /* per host: malloc'ed when it has a secret (conf_free) */
	unsigned nhosts;
	bool allow_any_host; /* explicit: no allowlist, any host (required off loopback) */
	struct conf_psk *psks; /* TLS PSKs per host (malloc'ed; conf_free) */
	unsigned npsks;
	char shm_path[108];  /* Unix socket of the shared-memory transport; "" = not served over shm */
	char vfu_path[108];  /* vfio-user socket (one PCI NVMe function); "" = not served over vfio-user */
	char vfu_host[224];  /* the host NQN vfio-user clients act as; "": one made from their uid */
};

struct daemon_conf {
	struct nkv_backend_conf backend;
	char backend_name[16], ceph_conf[4096], keyring[4096], client_id[128];
	char meta_pool[128]; /* --meta-pool: omap of namespaces on erasure-coded pools ("": none) */
	struct nkv_tcp_conf tcp;
	struct nkv_shm_conf shm;
	struct conf_listener listeners[CONF_MAX_LISTENERS];
	unsigned nlisteners;
	struct conf_listener discovery;
	bool no_discovery, discovery_set;
	struct conf_subsys subsys[CONF_MAX_SUBSYS];
	unsigned nsubsys;
	int log_level;       /* -1: unset */
	bool log_syslog;     /* log to syslog(3) (journald) instead of stderr */
	unsigned grace_ms;   /* shutdown: time given to commands in flight */
	bool sched_normal;   /* --sched normal: keep SCHED_OTHER (default: every thread SCHED_BATCH) */
	char pid_file[4096];
	unsigned shm_mode;   /* permissions of the shm sockets; 0: 0660 */
	char shm_group[64];  /* group of the shm sockets; "": the daemon's */
	bool check;          /* --check: validate, print the plan, exit */
	/* the control plane (docs/control-plane.md) */
	char control_addr[256];   /* --control: gRPC address; "none": no server */
	bool control_set;         /* given (flag or file): an address in use is then an error */
	char control_cert[4096], control_key[4096], control_ca[4096]; /* TLS / mTLS of the server */
	char group[128];          /* --group: state shared in RADOS; "": none */
	char group_pool[256];     /* --group-pool */
	char gateway_name[128];   /* --gateway-name (default: the host name) */
	char state_file[4096];    /* --state-file: state in a local file (no group) */
	char control_group[64];   /* --control-group: this group may call the control socket too */
	bool control_insecure_tcp; /* --control-insecure-tcp: TCP without mutual TLS, by choice */
	char run_dir[96];         /* --run-dir: the default control socket's directory; "": the default */
	char shm_dir[108];        /* --shm-dir: shm sockets the control plane creates; "": run_dir */
	struct conf_listener metrics; /* --metrics: the Prometheus endpoint's address */
	bool metrics_on;          /* off by default ("none") */
	/* cache events (docs/operations.md) */
	char events[256];         /* --events: ZMQ endpoint of the PUB socket */
	bool events_on;           /* off by default ("none") */
	bool events_connect;      /* --events-mode connect: connect to the endpoint instead of binding it */
	int events_format;        /* enum events_format (daemon.h): 0 array, 1 map */
	char events_medium[64];   /* --events-medium: the events' medium; "": nil */
};

/** Defaults: rados backend, 127.0.0.1:4420, discovery on 127.0.0.1:8009, log level info. */
void conf_defaults(struct daemon_conf *c);

/** Load a JSON configuration file into @c. @return 0, or -1 with a message on stderr. */
int conf_load_file(struct daemon_conf *c, const char *path);

/** Apply command-line flags (after the file). Exits 0 for --help, 64 for usage errors. */
int conf_parse_args(struct daemon_conf *c, int argc, char **argv);

/**
 * Fill what the user left out (listeners on loopback, a default subsystem and namespace) and refuse
 * an unsafe plan: a subsystem open to any host on a listener off loopback needs --allow-any-host.
 * @return 0 or -1 with a message.
 */
int conf_finish(struct daemon_conf *c);

/** Free what conf_load_file() and conf_parse_args() allocated (Exec allowlists, erased secrets). */
/** Free what conf_load_file() and the flags allocated (Exec allowlists, TLS keys, wiped). */
void conf_free(struct daemon_conf *c);

/** Is @addr (a listener address; "" = every address) reachable only from this machine? */
bool conf_addr_is_loopback(const char *addr);

/** Parse "ADDR:PORT", "[V6]:PORT" or "PORT". @return 0 or -1. */
int conf_parse_hostport(const char *s, struct conf_listener *l);

#endif
