/*
 * rados-nkv - the target daemon: exports RADOS pools as NVMe Key-Value subsystems over NVMe/TCP.
 * Startup fails fast with a message naming the cause (cluster unreachable, pool missing, port in
 * use); SIGINT/SIGTERM stop accepting, let commands in flight finish (--grace-ms) and exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NKV_LOG_COMPONENT "daemon"
#include "common/log.h"
#include "config.h"
#include "nkv/nkv_target.h"

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

static int build(struct daemon_conf *c, struct nkv_target **tgt)
{
	int rc;

	if ((rc = nkv_target_create(&c->backend, tgt)) < 0) {
		NKV_ERR("cannot open the %s backend: %s%s", c->backend_name, strerror(-rc),
			backend_hint(c, rc));
		return rc;
	}
	for (unsigned i = 0; i < c->nsubsys; i++) {
		struct conf_subsys *s = &c->subsys[i];
		struct nkv_subsys *ss;
		if ((rc = nkv_subsys_add(*tgt, s->nqn, s->pool, &ss)) < 0) {
			NKV_ERR("cannot export pool '%s' as %s: %s%s", s->pool, s->nqn, strerror(-rc),
				rc == -ENOENT ? " (create it: ceph osd pool create <name>)" : "");
			return rc;
		}
		for (unsigned j = 0; j < s->nhosts; j++)
			if ((rc = nkv_subsys_allow_host(ss, s->hosts[j])) < 0) {
				NKV_ERR("bad host NQN '%s': %s", s->hosts[j], strerror(-rc));
				return rc;
			}
		for (unsigned j = 0; j < s->nns; j++) {
			s->ns[j].rados_ns = s->rados_ns[j];
			if ((rc = nkv_ns_add(ss, &s->ns[j])) < 0) {
				NKV_ERR("%s: cannot add namespace %u (RADOS namespace '%s'): %s", s->nqn,
					s->ns[j].nsid, s->rados_ns[j], strerror(-rc));
				return rc;
			}
		}
	}
	return 0;
}

static int listen_all(struct daemon_conf *c, struct nkv_tcp *tcp)
{
	int port;

	for (unsigned i = 0; i < c->nlisteners; i++) {
		struct conf_listener *l = &c->listeners[i];
		if ((port = nkv_tcp_listen(tcp, l->addr, l->port, true)) < 0) {
			NKV_ERR("cannot listen on %s:%s: %s", l->addr, l->port, strerror(-port));
			return port;
		}
		NKV_INFO("NVMe/TCP on %s:%d", l->addr, port);
	}
	if (!c->no_discovery) {
		if ((port = nkv_tcp_listen(tcp, c->discovery.addr, c->discovery.port, false)) < 0) {
			NKV_ERR("cannot listen for discovery on %s:%s: %s (use --discovery ADDR:PORT "
					"or --discovery none)", c->discovery.addr, c->discovery.port, strerror(-port));
			return port;
		}
		NKV_INFO("discovery on %s:%d", c->discovery.addr, port);
	}
	return 0;
}

/* The shared-memory transport starts only when a subsystem names a socket for it. */
static int listen_shm(struct daemon_conf *c, struct nkv_target *tgt, struct nkv_shm **shm)
{
	int rc;

	for (unsigned i = 0; i < c->nsubsys; i++) {
		struct conf_subsys *s = &c->subsys[i];
		if (!*s->shm_path)
			continue;
		if (!*shm && (rc = nkv_shm_create(tgt, &c->shm, shm)) < 0) {
			NKV_ERR("cannot start the shared-memory transport: %s", strerror(-rc));
			return rc;
		}
		if ((rc = nkv_shm_listen(*shm, s->nqn, s->shm_path)) < 0) {
			NKV_ERR("cannot serve %s on %s: %s", s->nqn, s->shm_path, strerror(-rc));
			return rc;
		}
		NKV_INFO("shared memory for %s on %s", s->nqn, s->shm_path);
	}
	return 0;
}

/* The -c/--config file is loaded before the other flags so that they override it. */
static const char *config_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc)
			return argv[i + 1];
		if (strncmp(argv[i], "--config=", 9) == 0)
			return argv[i] + 9;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct daemon_conf conf; /* large: keep it off the stack */
	struct nkv_target *tgt = NULL;
	struct nkv_tcp *tcp = NULL;
	struct nkv_shm *shm = NULL;
	const char *cfile = config_arg(argc, argv);
	sigset_t sigs;
	int sig = 0, rc = 1;

	conf_defaults(&conf);
	if (cfile && conf_load_file(&conf, cfile) < 0)
		return 1;
	conf_parse_args(&conf, argc, argv);
	if (conf_finish(&conf) < 0)
		return 1;
	nkv_log_set_level((enum nkv_log_level)conf.log_level);
	if (conf.log_syslog)
		nkv_log_to_syslog("rados-nkv");
	/* Block the stop signals before any thread starts, so only sigwait() below sees them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (build(&conf, &tgt) < 0)
		goto out;
	if ((rc = nkv_tcp_create(tgt, &conf.tcp, &tcp)) < 0) {
		NKV_ERR("cannot start the NVMe/TCP transport: %s", strerror(-rc));
		rc = 1;
		goto out;
	}
	if (listen_all(&conf, tcp) < 0 || listen_shm(&conf, tgt, &shm) < 0) {
		rc = 1;
		goto out;
	}
	if (*conf.pid_file) {
		FILE *f = fopen(conf.pid_file, "w");
		if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
			NKV_ERR("cannot write %s: %s", conf.pid_file, strerror(errno));
			rc = 1;
			goto out;
		}
	}
	NKV_INFO("ready: %u subsystem(s) on the %s backend", conf.nsubsys, conf.backend_name);
	/* Wake every second so that rate-limited log lines report their counts within a second of their
	 * window's end, even when nothing else is logged. */
	while ((sig = sigtimedwait(&sigs, NULL, &(struct timespec){.tv_sec = 1})) < 0)
		nkv_log_tick();
	NKV_INFO("%s: shutting down (up to %u ms for commands in flight)", strsignal(sig),
		conf.grace_ms);
	rc = 0;
out:
	nkv_shm_destroy(shm, (int)conf.grace_ms);
	nkv_tcp_destroy(tcp, (int)conf.grace_ms);
	nkv_target_destroy(tgt);
	if (*conf.pid_file && rc == 0)
		unlink(conf.pid_file);
	if (rc == 0)
		NKV_INFO("stopped");
	nkv_log_flush();
	return rc ? 1 : 0;
}
