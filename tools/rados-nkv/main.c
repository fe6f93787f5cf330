/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados-nkv - the target daemon: exports RADOS pools as NVMe Key-Value subsystems over NVMe/TCP.
 * Startup fails fast with a message naming the cause (cluster unreachable, pool missing, port in
 * use); SIGINT/SIGTERM stop accepting, let commands in flight finish (--grace-ms) and exit 0;
 * SIGHUP re-reads the configuration file's log level and Exec allowlists (everything else needs a
 * restart). A service manager is told READY=1 once it serves, RELOADING=1/READY=1 around SIGHUP and
 * STOPPING=1 at shutdown (notify.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NKV_LOG_COMPONENT "daemon"
#include "common/log.h"
#include "common/nvme_psk.h"
#include "config.h"
#include "control/cache_policy.h"
#include "daemon.h"
#include "nkv/nkv_target.h"
#include "notify.h"

static const char *backend_hint(const struct daemon_conf *c, int rc)
{
	if (strcmp(c->backend_name, "rados") != 0)
		return "";
	switch (rc) {
	case -ETIMEDOUT:
	case -ENOTCONN:
		return " (is the cluster up? check mon_host in the ceph.conf given with --ceph-conf)";
	case -EACCES:
	case -EPERM:
		return " (cephx refused: check --client-id and --keyring)";
	case -ENOENT:
		return " (ceph.conf or keyring not found)";
	}
	return "";
}

/* Who may connect to @s, in one line (startup log and --check). */
static void describe_access(const struct conf_subsys *s, char *out, size_t n)
{
	size_t off;

	if (!s->nhosts) {
		snprintf(out, n, "any host%s", s->allow_any_host ? " (allow-any-host)" : " (listeners on loopback only)");
		return;
	}
	off = (size_t)snprintf(out, n, "only %u host(s):", s->nhosts);
	for (unsigned i = 0; i < s->nhosts && off < n; i++)
		off += (size_t)snprintf(out + off, n - off, " %s%s", s->hosts[i],
					!s->auth[i] ? "" : *s->auth[i]->ctrl_key ? " (DH-HMAC-CHAP, bidirectional)"
										 : " (DH-HMAC-CHAP)");
}

/* --check: what would be served, on stdout; nothing is opened. */
static void print_plan(const struct daemon_conf *c)
{
	char who[4096];

	printf("backend: %s\n", c->backend_name);
	if (strcmp(c->backend_name, "rados") == 0) {
		if (c->backend.cut_through_mb == NKV_CUT_THROUGH_OFF)
			printf("cut-through: off (Retrieves are read whole)\n");
		else
			printf("cut-through: Retrieves into buffers of %u MiB or more are read in ranges\n",
			       c->backend.cut_through_mb ? c->backend.cut_through_mb : NKV_CUT_THROUGH_DEFAULT_MB);
	}
	printf("scheduling: %s\n", c->sched_normal ? "SCHED_OTHER (--sched normal)" : "SCHED_BATCH (--sched batch)");
	for (unsigned i = 0; i < c->nlisteners; i++)
		printf("NVMe/TCP listener: %s:%s%s\n", *c->listeners[i].addr ? c->listeners[i].addr : "*",
		       c->listeners[i].port, c->listeners[i].tls ? " (TLS 1.3 with a PSK required)" : "");
	if (c->tcp.poll_us)
		printf("NVMe/TCP reactors: poll %u us after work before they sleep, while it pays\n", c->tcp.poll_us);
	if (c->no_discovery)
		printf("discovery: on the NVMe/TCP listeners only\n");
	else
		printf("discovery: %s:%s (discovery only)\n", c->discovery.addr, c->discovery.port);
	if (c->metrics_on)
		printf("metrics: GET /metrics on %s:%s\n", *c->metrics.addr ? c->metrics.addr : "*", c->metrics.port);
	if (c->events_on)
		printf("cache events: ZMQ PUB %s %s, topic kv@%s@<RADOS namespace>, %s layout, medium %s\n",
		       c->events_connect ? "connected to" : "bound to", c->events,
		       *c->events_medium ? c->events_medium : c->gateway_name, c->events_format ? "map" : "array",
		       *c->events_medium ? c->events_medium : "nil");
	for (unsigned i = 0; i < c->nsubsys; i++) {
		const struct conf_subsys *s = &c->subsys[i];
		describe_access(s, who, sizeof(who));
		printf("subsystem %s: pool %s; may connect: %s\n", s->nqn, s->pool, who);
		for (unsigned j = 0; j < s->nns; j++) {
			printf("  nsid %u: RADOS namespace '%s'%s\n", s->ns[j].nsid, s->rados_ns[j],
			       s->ns[j].read_only ? ", read-only" : "");
			if (s->has_cache[j]) {
				const struct nkv_cache_policy *p = &s->cache[j];
				printf("    cache: capacity %llu bytes, %llu keys; pin quota %llu bytes; default TTL %u s, max TTL %u s; "
				       "bytes per token %llu; eviction %s; low watermark %u%%, overshoot %u%%; touch %u ms; "
				       "reap every %u s at %u/s; lease %u ms (0: the default or no limit)\n",
				       (unsigned long long)p->capacity_bytes, (unsigned long long)p->capacity_keys,
				       (unsigned long long)p->pin_quota_bytes, p->default_ttl_s, p->max_ttl_s,
				       (unsigned long long)p->bytes_per_token, ctl_evict_name(p->eviction), p->low_watermark_pct,
				       p->overshoot_pct, p->touch_interval_ms, p->reap_interval_s, p->reap_rate, p->lease_ms);
			}
			for (unsigned e = 0; e < s->nexec[j]; e++) {
				const struct nkv_exec_rule *r = &s->exec[j][e];
				printf("    exec %02xh: %s.%s (%s%s, ", r->opcode, r->cls, r->method, r->write ? "write" : "read",
				       r->create ? ", may create" : "");
				if (r->script)
					printf("script %zu bytes, handler %s; the host's input is its input)\n",
					       strlen(r->script), r->handler);
				else
					printf("bound input %u bytes%s)\n", r->input_len,
					       r->append_host_input ? ", the host's appended" : "");
			}
		}
		if (*s->shm_path)
			printf("  shared memory: %s (mode %04o%s%s)\n", s->shm_path, c->shm_mode,
			       *c->shm_group ? ", group " : "", c->shm_group);
		if (*s->vfu_path)
			printf("  vfio-user: %s (mode %04o%s%s), clients act as %s\n", s->vfu_path, c->shm_mode,
			       *c->shm_group ? ", group " : "", c->shm_group,
			       *s->vfu_host ? s->vfu_host : "nqn.2026-12.io.rados-nkv:vfio-user:uid:UID");
		for (unsigned k = 0; k < s->npsks; k++) { /* the hash, never the key */
			struct nkv_psk key;
			nkv_psk_load(s->psks[k].key, &key);
			printf("  TLS PSK of host %s: %u bytes, identity NVMe0R%02u/NVMe1R%02u (%s)%s%s\n", s->psks[k].host,
			       key.len, nkv_psk_cipher(&key), nkv_psk_cipher(&key),
			       nkv_psk_cipher(&key) == 2 ? "TLS_AES_256_GCM_SHA384" : "TLS_AES_128_GCM_SHA256",
			       s->psks[k].key[0] == '@' ? ", from " : "", s->psks[k].key[0] == '@' ? s->psks[k].key + 1 : "");
			nkv_psk_wipe(&key, sizeof(key));
		}
	}
}

/* --events: the publisher (events.c) bound or connected, its thread started, and the target's cache event callback
 * set, before any namespace exists as the target requires. @return 0 (*out NULL when off) or -1. */
static int events_start(const struct daemon_conf *c, struct nkv_target *tgt, struct daemon_events **out)
{
	*out = NULL;
	if (!c->events_on)
		return 0;
#ifdef NKV_HAVE_EVENTS
	int rc = events_open(c->events, c->events_connect, c->gateway_name, c->events_format, c->events_medium,
			     EVENTS_RING, out);
	if (rc < 0) {
		NKV_ERR("--events: cannot %s a ZMQ PUB socket to %s: %s", c->events_connect ? "connect" : "bind",
			c->events, events_strerror(rc));
		return -1;
	}
	if ((rc = events_run(*out)) < 0) {
		NKV_ERR("--events: cannot start the events thread: %s", strerror(-rc));
		events_close(*out);
		*out = NULL;
		return -1;
	}
	nkv_target_set_cache_events(tgt, events_post, *out);
	metrics_set_events(events_read_counts, *out);
	NKV_INFO("cache events: ZMQ PUB %s %s, topic kv@%s@<RADOS namespace>, %s layout, medium %s",
		 c->events_connect ? "connected to" : "bound to", c->events,
		 *c->events_medium ? c->events_medium : c->gateway_name,
		 c->events_format == EVENTS_MAP ? "map" : "array", *c->events_medium ? c->events_medium : "nil");
	return 0;
#else
	(void)tgt;
	NKV_ERR("--events %s: this rados-nkv was built without libzmq and msgpack-c (libzmq3-dev, libmsgpack-dev)",
		c->events);
	return -1;
#endif
}

/* Send what is queued and close; after nkv_target_destroy, so no callback can come later. */
static void events_stop(struct daemon_events *d)
{
#ifdef NKV_HAVE_EVENTS
	if (d) {
		metrics_set_events(NULL, NULL);
		events_close(d);
	}
#else
	(void)d;
#endif
}

static int build(struct daemon_conf *c, struct nkv_target **tgt, struct daemon_events **events)
{
	char who[4096];
	int rc;

	if ((rc = nkv_target_create(&c->backend, tgt)) < 0) {
		NKV_ERR("cannot open the %s backend: %s%s", c->backend_name, strerror(-rc),
			backend_hint(c, rc));
		return rc;
	}
	/* The event callback is set before any namespace exists, as the target requires. */
	if (events_start(c, *tgt, events) < 0)
		return -1;
	for (unsigned i = 0; i < c->nsubsys; i++) {
		struct conf_subsys *s = &c->subsys[i];
		struct nkv_subsys *ss;
		if ((rc = nkv_subsys_add(*tgt, s->nqn, s->pool, &ss)) < 0) {
			NKV_ERR("cannot export pool '%s' as %s: %s%s", s->pool, s->nqn, strerror(-rc),
				rc == -ENOENT ? " (create it: ceph osd pool create <name>)" : "");
			return rc;
		}
		bool auth = false;
		for (unsigned j = 0; j < s->nhosts; j++) {
			if ((rc = nkv_subsys_allow_host(ss, s->hosts[j])) < 0) {
				NKV_ERR("bad host NQN '%s': %s", s->hosts[j], strerror(-rc));
				return rc;
			}
			const struct conf_host_auth *a = s->auth[j];
			if (!a)
				continue;
			struct nkv_dhchap_conf dc = {.key = a->key, .ctrl_key = *a->ctrl_key ? a->ctrl_key : NULL,
						     .hashes = *a->hashes ? a->hashes : NULL,
						     .dhgroups = *a->dhgroups ? a->dhgroups : NULL};
			if ((rc = nkv_subsys_host_dhchap(ss, s->hosts[j], &dc)) < 0) {
				NKV_ERR("%s: DH-HMAC-CHAP settings of host %s refused: %s", s->nqn, s->hosts[j],
					strerror(-rc));
				return rc;
			}
			auth = true;
		}
		if (auth && (*s->shm_path || *s->vfu_path))
			NKV_WARN("%s: its shared-memory socket %s does not authenticate hosts (no in-band authentication "
				 "over shared memory): only its permissions (--shm-mode, --shm-group) guard it", s->nqn,
				 *s->shm_path ? s->shm_path : s->vfu_path);
		/* No allowlist and no --allow-any-host: any host, but never through a listener the network
		 * reaches, whatever listeners the control plane adds later (src/common/exposure.h). */
		if (!s->nhosts && !s->allow_any_host)
			nkv_subsys_set_loopback_only(ss, true);
		describe_access(s, who, sizeof(who));
		NKV_INFO("subsystem %s may be used by %s", s->nqn, who);
		s->ss = ss;
		for (unsigned j = 0; j < s->nns; j++) {
			s->ns[j].rados_ns = s->rados_ns[j];
			s->ns[j].exec = s->exec[j];
			s->ns[j].nexec = s->nexec[j];
			s->ns[j].cache = s->has_cache[j] ? &s->cache[j] : NULL;
			if ((rc = nkv_ns_add(ss, &s->ns[j])) < 0) {
				NKV_ERR("%s: cannot add namespace %u (RADOS namespace '%s'): %s%s", s->nqn, s->ns[j].nsid,
					s->rados_ns[j], strerror(-rc),
					rc == -EFBIG ? " (its max value is above what the cluster stores; see the line above)" : "");
				return rc;
			}
		}
	}
	return 0;
}

static int listen_all(struct daemon_conf *c, struct nkv_tcp *tcp)
{
	int port;

	/* TLS keys first: a secure listener serves only hosts that have one. */
	for (unsigned i = 0; i < c->nsubsys; i++)
		for (unsigned k = 0; k < c->subsys[i].npsks; k++) {
			const struct conf_psk *p = &c->subsys[i].psks[k];
			if ((port = nkv_tcp_add_psk(tcp, p->host, c->subsys[i].nqn, p->key)) < 0) {
				NKV_ERR("subsystem %s: TLS key of host %s: %s", c->subsys[i].nqn, p->host, nkv_psk_strerror(port));
				return port;
			}
			NKV_INFO("subsystem %s: TLS PSK of host %s", c->subsys[i].nqn, p->host);
		}
	for (unsigned i = 0; i < c->nlisteners; i++) {
		struct conf_listener *l = &c->listeners[i];
		port = l->tls ? nkv_tcp_listen_tls(tcp, l->addr, l->port, true) : nkv_tcp_listen(tcp, l->addr, l->port, true);
		if (port < 0) {
			NKV_ERR("cannot listen on %s:%s: %s", l->addr, l->port, strerror(-port));
			return port;
		}
		NKV_INFO("NVMe/TCP%s on %s:%d", l->tls ? " with TLS" : "", l->addr, port);
		l->bound = port;
	}
	if (!c->no_discovery) {
		if ((port = nkv_tcp_listen_discovery(tcp, c->discovery.addr, c->discovery.port)) < 0) {
			NKV_ERR("cannot listen for discovery on %s:%s: %s (use --discovery ADDR:PORT "
					"or --discovery none)", c->discovery.addr, c->discovery.port, strerror(-port));
			return port;
		}
		NKV_INFO("discovery on %s:%d (discovery only)", c->discovery.addr, port);
	}
	return 0;
}

/* The shared-memory transport starts only when a subsystem names a socket for it. Each socket file
 * gets --shm-mode and --shm-group on the inode bound, before its path names it (nkv_shm_listen):
 * never a chmod or chown by path, which would follow whatever another user put there meanwhile.
 * GPU processes usually run as a non-root user in that group. */
/* The shm transport (created on first use), then a listener of @nqn on @path: shm's own protocol, or
 * vfio-user with @vfu (its clients acting as @vfu_host, "" for their uid's NQN). */
static int shm_serve(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm, const char *nqn,
		     const char *path, bool vfu, const char *vfu_host)
{
	struct nkv_shm_conf sc = c->shm;
	int rc;

	sc.socket_mode = c->shm_mode;
	if (*c->shm_group) {
		struct group *g = getgrnam(c->shm_group);
		if (!g) {
			NKV_ERR("--shm-group: no group named '%s'", c->shm_group);
			return -ENOENT;
		}
		sc.socket_group_set = true;
		sc.socket_gid = g->gr_gid;
	}
	if (!*shm && (rc = nkv_shm_create(tgt, &sc, shm)) < 0) {
		NKV_ERR("cannot start the shared-memory transport: %s", strerror(-rc));
		return rc;
	}
	rc = vfu ? nkv_shm_listen_vfio_user(*shm, nqn, path, vfu_host) : nkv_shm_listen(*shm, nqn, path);
	if (rc < 0) {
		NKV_ERR("cannot serve %s on %s: %s%s", nqn, path, strerror(-rc),
			rc == -EADDRINUSE ? " (another live daemon answers on it)"
			: rc == -EEXIST  ? " (the path exists and is not a socket: not removed)"
			: rc == -EPERM   ? " (cannot set its group: the daemon needs CAP_CHOWN for --shm-group)"
					 : "");
		return rc;
	}
	NKV_INFO("%s for %s on %s (mode %04o%s%s)", vfu ? "vfio-user" : "shared memory", nqn, path, c->shm_mode,
		 *c->shm_group ? ", group " : "", c->shm_group);
	return 0;
}

int daemon_shm_serve(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm, const char *nqn,
		     const char *path)
{
	return shm_serve(c, tgt, shm, nqn, path, false, NULL);
}

int daemon_vfu_serve(const struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm, const char *nqn,
		     const char *path, const char *hostnqn)
{
	return shm_serve(c, tgt, shm, nqn, path, true, hostnqn);
}

static int listen_shm(struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm)
{
	for (unsigned i = 0; i < c->nsubsys; i++) {
		int rc;
		if (*c->subsys[i].shm_path &&
		    (rc = daemon_shm_serve(c, tgt, shm, c->subsys[i].nqn, c->subsys[i].shm_path)) < 0)
			return rc;
		if (*c->subsys[i].vfu_path && (rc = daemon_vfu_serve(c, tgt, shm, c->subsys[i].nqn, c->subsys[i].vfu_path,
								     c->subsys[i].vfu_host)) < 0)
			return rc;
	}
	return 0;
}

/* The -c/--config file is loaded before the other flags so that they override it. One only: a
 * second would silently win or lose. */
static const char *config_arg(int argc, char **argv)
{
	const char *file = NULL;

	for (int i = 1; i < argc; i++) {
		const char *f = NULL;
		if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc)
			f = argv[++i];
		else if (strncmp(argv[i], "--config=", 9) == 0)
			f = argv[i] + 9;
		else if (strncmp(argv[i], "-c", 2) == 0 && argv[i][2])
			f = argv[i] + 2;
		if (f && file) {
			fprintf(stderr, "rados-nkv: -c/--config given twice ('%s' and '%s'): one file, flags override it\n",
				file, f);
			exit(64);
		}
		file = f ? f : file;
	}
	return file;
}

/*
 * The pid file is the daemon's lock: opened (never through a link) and locked with flock() before
 * anything else starts, held for the process's life, so that of two daemons started at once with
 * one --pid-file exactly one runs. The lock is on the inode: after locking, the path must still name
 * it (a daemon exiting unlinks the file; a newcomer that opened the old inode would lock a file
 * nobody can see), else try again. The file stays empty until pid_file_write().
 * @return the locked fd, or -1 (logged).
 */
static int pid_file_lock(const char *path)
{
	for (int tries = 0; tries < 10; tries++) {
		struct stat a, b;
		int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			NKV_ERR("cannot open the pid file %s: %s", path,
				errno == ELOOP ? "it is a symbolic link (refused)" : strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			if (errno == EWOULDBLOCK) {
				char buf[32] = "";
				long pid = pread(fd, buf, sizeof(buf) - 1, 0) > 0 ? strtol(buf, NULL, 10) : 0;
				if (pid > 0)
					NKV_ERR("%s belongs to a running rados-nkv (pid %ld); stop it or use another "
						"--pid-file", path, pid);
				else
					NKV_ERR("%s belongs to a rados-nkv that is starting; stop it or use another "
						"--pid-file", path);
			} else {
				NKV_ERR("cannot lock the pid file %s: %s", path, strerror(errno));
			}
			close(fd);
			return -1;
		}
		if (fstat(fd, &a) == 0 && !S_ISREG(a.st_mode)) {
			NKV_ERR("the pid file %s is not a regular file", path);
			close(fd);
			return -1;
		}
		if (stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			if (ftruncate(fd, 0) < 0) /* a dead daemon's pid: not ours to show */
				NKV_WARN("cannot empty the pid file %s: %s", path, strerror(errno));
			return fd;
		}
		close(fd); /* unlinked by the daemon that held it, just now: lock the new file */
	}
	NKV_ERR("cannot lock the pid file %s: it keeps being replaced", path);
	return -1;
}

/* Write our pid into the locked pid file in one write (a reader sees it empty or whole).
 * @return 0 or -errno. */
static int pid_file_write(int fd)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (pwrite(fd, buf, (size_t)n, 0) != n)
		return errno ? -errno : -EIO;
	return 0;
}

/* Remove the pid file if @path still names the inode we locked (we hold the lock: it is ours). */
static void pid_file_remove(int fd, const char *path)
{
	struct stat a, b;
	if (fd < 0)
		return;
	if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(path);
	close(fd); /* releases the lock, after the unlink */
}

/* SIGHUP: the log level is the one setting applied live (from the file, unless a flag set it). */
/* SIGHUP, Exec allowlists: each running namespace takes the file's allowlist (none if the file has
 * none for it). Namespaces the file adds or drops need a restart. */
static void reload_exec(struct nkv_target *tgt, const struct daemon_conf *run, const struct daemon_conf *fresh)
{
	for (unsigned i = 0; i < run->nsubsys; i++) {
		const struct conf_subsys *rs = &run->subsys[i], *fs = NULL;
		for (unsigned k = 0; k < fresh->nsubsys && !fs; k++)
			if (strcmp(fresh->subsys[k].nqn, rs->nqn) == 0)
				fs = &fresh->subsys[k];
		/* By name: the control plane may have removed (or re-created) the subsystem since startup. */
		struct nkv_subsys *ss = nkv_target_subsys(tgt, rs->nqn);
		for (unsigned j = 0; ss && j < rs->nns; j++) {
			unsigned n = 0;
			const struct nkv_exec_rule *r = NULL;
			for (unsigned k = 0; fs && k < fs->nns; k++)
				if (fs->ns[k].nsid == rs->ns[j].nsid) {
					r = fs->exec[k];
					n = fs->nexec[k];
				}
			int rc = nkv_ns_set_exec(ss, rs->ns[j].nsid, r, n);
			if (rc < 0 && rc != -ENOENT) /* -ENOENT: the control plane removed it */
				NKV_ERR("SIGHUP: %s nsid %u: Exec allowlist refused (%s); the previous one stays", rs->nqn,
					rs->ns[j].nsid, strerror(-rc));
		}
	}
}

/* SIGHUP: what applies live is the log level (from the file, unless a flag set it) and each
 * namespace's Exec allowlist. */
static void reload(struct nkv_target *tgt, const struct daemon_conf *run, const char *cfile, int argc, char **argv)
{
	static struct daemon_conf fresh;

	conf_defaults(&fresh);
	if (!cfile) {
		NKV_INFO("SIGHUP: no configuration file to re-read");
		return;
	}
	if (conf_load_file(&fresh, cfile) < 0) {
		NKV_ERR("SIGHUP: %s is not valid; the running configuration stays", cfile);
		conf_free(&fresh);
		return;
	}
	conf_parse_args(&fresh, argc, argv); /* flags still override the file (validated at startup) */
	if (fresh.log_level < 0)
		fresh.log_level = 2;
	nkv_log_set_level((enum nkv_log_level)fresh.log_level);
	reload_exec(tgt, run, &fresh);
	NKV_INFO("SIGHUP: re-read %s: log level %s and Exec allowlists applied; listeners, subsystems, "
		 "namespaces, TLS keys and limits need a restart", cfile,
		 nkv_log_level_name((enum nkv_log_level)fresh.log_level));
	conf_free(&fresh);
}

int main(int argc, char **argv)
{
	static struct daemon_conf conf; /* large: keep it off the stack */
	struct nkv_target *tgt = NULL;
	struct nkv_tcp *tcp = NULL;
	struct nkv_shm *shm = NULL;
	struct daemon_control *ctl = NULL;
	struct daemon_metrics *metrics = NULL;
	struct daemon_events *events = NULL;
	const char *cfile = config_arg(argc, argv);
	sigset_t sigs;
	int sig = 0, rc = 1, pid_fd = -1;

	conf_defaults(&conf);
	if ((cfile && conf_load_file(&conf, cfile) < 0) || conf_parse_args(&conf, argc, argv) < 0 ||
	    conf_finish(&conf) < 0) {
		conf_free(&conf);
		return 1;
	}
	if (conf.check) {
		print_plan(&conf);
		rc = daemon_control_check(&conf) < 0;
		conf_free(&conf);
		return rc;
	}
	nkv_log_set_level((enum nkv_log_level)conf.log_level);
	if (conf.log_syslog)
		nkv_log_to_syslog("rados-nkv");
	if (*conf.pid_file && (pid_fd = pid_file_lock(conf.pid_file)) < 0) {
		conf_free(&conf);
		return 1;
	}
	if (strcmp(conf.backend_name, "rados") == 0 && (!*conf.client_id || strcmp(conf.client_id, "admin") == 0))
		NKV_WARN("running as client.admin: a cephx user limited to the exported pools is safer (docs/security.md, "
			 "\"Secure defaults\")");
	/*
	 * Before any thread starts, so that every one (reactors, pollers, librados' own) inherits it:
	 * SCHED_BATCH keeps a thread's share of the CPU but stops it preempting a running thread when it
	 * wakes. The gateway's threads wake once per command or burst; on a host shared with OSDs or
	 * with the shm clients they preempted the very threads that feed them (4 KiB Stores at QD 64:
	 * the OSD's threads were preempted 1.3 times per command and its CPU per command rose by half;
	 * bench/results/HISTORY.md "Wake-up preemption"). An idle CPU still runs a woken thread at once.
	 */
	if (!conf.sched_normal && sched_setscheduler(0, SCHED_BATCH, &(struct sched_param){0}) < 0)
		NKV_WARN("cannot set SCHED_BATCH (%s); running with the default policy", strerror(errno));
	/* Block the signals handled below before any thread starts, so only sigtimedwait() sees them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN); /* a host that vanished mid-send is an EPIPE, not a dead daemon */

	if (build(&conf, &tgt, &events) < 0)
		goto out;
	/* A gateway of a group gives controller IDs of its own range from its first Connect on. */
	if (daemon_control_range(&conf, tgt) < 0) {
		rc = 1;
		goto out;
	}
	if ((rc = nkv_tcp_create(tgt, &conf.tcp, &tcp)) < 0) {
		NKV_ERR("cannot start the NVMe/TCP transport: %s", strerror(-rc));
		rc = 1;
		goto out;
	}
	if (listen_all(&conf, tcp) < 0 || listen_shm(&conf, tgt, &shm) < 0 ||
	    daemon_control_start(&conf, tgt, tcp, &shm, &ctl) < 0 || daemon_metrics_start(&conf, tgt, &metrics) < 0) {
		rc = 1;
		goto out;
	}
	if (pid_fd >= 0 && (rc = pid_file_write(pid_fd)) < 0) {
		NKV_ERR("cannot write %s: %s", conf.pid_file, strerror(-rc));
		rc = 1;
		goto out;
	}
	NKV_INFO("ready: %u subsystem(s) on the %s backend", conf.nsubsys, conf.backend_name);
	/* Only now: every listener, the control socket and the metrics endpoint accept connections */
	daemon_notify("READY=1\nSTATUS=serving %u subsystem(s) on the %s backend", conf.nsubsys, conf.backend_name);
	/* Wake every second so that rate-limited log lines report their counts within a second of their
	 * window's end, even when nothing else is logged; SIGHUP re-reads the configuration. */
	while ((sig = sigtimedwait(&sigs, NULL, &(struct timespec){.tv_sec = 1})) < 0 || sig == SIGHUP) {
		if (sig == SIGHUP) {
			daemon_notify_reloading("SIGHUP: re-reading the configuration");
			reload(tgt, &conf, cfile, argc, argv);
			daemon_notify("READY=1\nSTATUS=serving %u subsystem(s) on the %s backend", conf.nsubsys,
				      conf.backend_name);
		}
		nkv_log_tick();
	}
	NKV_INFO("%s: shutting down (up to %u ms for commands in flight)", strsignal(sig),
		conf.grace_ms);
	daemon_notify("STOPPING=1\nSTATUS=%s: shutting down", strsignal(sig));
	rc = 0;
out:
	daemon_metrics_stop(metrics); /* first: it reads the transports */
	daemon_control_stop(ctl);
	nkv_shm_destroy(shm, (int)conf.grace_ms);
	nkv_tcp_destroy(tcp, (int)conf.grace_ms);
	nkv_target_destroy(tgt);
	events_stop(events); /* after the target: its cache thread reports until it stops */
	pid_file_remove(pid_fd, conf.pid_file); /* every exit once locked: never a stale pid file */
	conf_free(&conf);
	if (rc == 0)
		NKV_INFO("stopped");
	nkv_log_flush();
	return rc ? 1 : 0;
}
