/* SPDX-License-Identifier: Apache-2.0 */
/* gateway.c - the rados-nkv daemon of a fault scenario as a child process (see faults.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_spawn.h"
#include "faults.h"

int gw_init(struct gw *g, const char *bin, const char *backend, const char *addr)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	memset(g, 0, sizeof(*g));
	g->bin = bin;
	g->backend = backend;
	g->op_timeout_s = 3;
	snprintf(g->addr, sizeof(g->addr), "%s", addr);
	snprintf(g->dir, sizeof(g->dir), "%s/nkv-faults.XXXXXX", tmp);
	if (!mkdtemp(g->dir)) {
		fprintf(stderr, "cannot make a directory under %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	snprintf(g->log, sizeof(g->log), "%s/daemon.log", g->dir);
	snprintf(g->rados_ns, sizeof(g->rados_ns), "faults-%ld-%ld", (long)getpid(), (long)time(NULL));
	/* A free port on the host's loopback; inside a namespace of its own every port is free. */
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &al)) {
		fprintf(stderr, "no free port: %s\n", strerror(errno));
		return -1;
	}
	snprintf(g->port, sizeof(g->port), "%u", ntohs(a.sin_port));
	close(fd);
	return 0;
}

/* In the child: the log, ASan's quarantine (freed memory must go back for the RSS checks), the
 * network namespace. */
static void child_setup(void *arg)
{
	const struct gw *g = arg;
	int fd = open(g->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	const char *a = getenv("ASAN_OPTIONS");
	char opts[512];
	snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=1", a ? a : "", a && *a ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	if (g->netns) {
		char p[256];
		snprintf(p, sizeof(p), "/run/netns/%s", g->netns);
		int nfd = open(p, O_RDONLY | O_CLOEXEC);
		if (nfd < 0 || setns(nfd, CLONE_NEWNET) != 0) {
			fprintf(stderr, "cannot enter network namespace %s: %s\n", g->netns, strerror(errno));
			_exit(126);
		}
	}
}

static bool accepts(const struct gw *g)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	bool ok = false;
	if (getaddrinfo(g->addr, g->port, &hints, &ai) != 0)
		return false;
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return ok;
}

/* The subsystem as a configuration file, for a cache namespace (no flag makes one). */
static int write_conf(struct gw *g)
{
	const char *pool = g->pool ? g->pool : getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv";
	FILE *f;

	snprintf(g->conf, sizeof(g->conf), "%s/conf.json", g->dir);
	if (!(f = fopen(g->conf, "w")))
		return -1;
	fprintf(f,
		"{\"subsystems\": [{\"nqn\": \"%s\", \"pool\": \"%s\", \"allowed_hosts\": [\"%s\"],%s%s%s\n"
		"  \"namespaces\": [{\"nsid\": 1, \"rados_namespace\": \"%s\", \"cache\": %s}]}]}\n",
		FAULT_SUBNQN, pool, FAULT_HOSTNQN, *g->shm ? " \"shm_socket\": \"" : "", *g->shm ? g->shm : "",
		*g->shm ? "\"," : "", g->rados_ns, g->cache);
	return fclose(f) == 0 ? 0 : -1;
}

int gw_start(struct gw *g)
{
	char listen[96], ns[160], opt[16];
	const char *argv[64];
	int n = 0;

	if (g->cache && write_conf(g) < 0) {
		fprintf(stderr, "cannot write %s: %s\n", g->conf, strerror(errno));
		return -1;
	}

	snprintf(listen, sizeof(listen), "%s:%s", g->addr, g->port);
	snprintf(ns, sizeof(ns), "1:%s", g->rados_ns);
	snprintf(opt, sizeof(opt), "%u", g->op_timeout_s);
	argv[n++] = g->bin;
	if (g->cache) { /* first: the flags after it override it */
		argv[n++] = "--config";
		argv[n++] = g->conf;
	}
	argv[n++] = "--backend";
	argv[n++] = g->backend;
	if (strcmp(g->backend, "rados") == 0) {
		argv[n++] = "--ceph-conf";
		argv[n++] = getenv("NKV_CEPH_CONF");
		argv[n++] = "--keyring";
		argv[n++] = getenv("NKV_CEPH_KEYRING");
		argv[n++] = "--client-id";
		argv[n++] = getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin";
		argv[n++] = "--op-timeout";
		argv[n++] = opt;
	}
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--discovery";
	argv[n++] = "none";
	argv[n++] = "--log-level";
	argv[n++] = getenv("NKV_FAULTS_LOG_LEVEL") ? getenv("NKV_FAULTS_LOG_LEVEL") : "info";
	if (!g->cache) {
		argv[n++] = "--subsys";
		argv[n++] = FAULT_SUBNQN;
		argv[n++] = "--pool";
		argv[n++] = g->pool ? g->pool : getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv";
		argv[n++] = "--ns";
		argv[n++] = ns;
		argv[n++] = "--allow-host";
		argv[n++] = FAULT_HOSTNQN;
		if (*g->shm) {
			argv[n++] = "--shm";
			argv[n++] = g->shm;
		}
	}
	for (unsigned i = 0; g->extra[i] && n < 62; i++)
		argv[n++] = g->extra[i];
	argv[n] = NULL;

	uint64_t t0 = f_now_ms();
	g->pid = daemon_spawn(argv, child_setup, g);
	g->starts++;
	while (g->pid > 0 && f_now_ms() - t0 < 15000) {
		int status;
		if (waitpid(g->pid, &status, WNOHANG) == g->pid) {
			fprintf(stderr, "the daemon exited at startup (status %#x):\n", status);
			gw_log_tail(g, 20);
			g->pid = 0;
			return -1;
		}
		if (accepts(g))
			return 0;
		usleep(50000);
	}
	fprintf(stderr, "the daemon does not accept on %s:%s after 15 s\n", g->addr, g->port);
	gw_log_tail(g, 20);
	return -1;
}

void gw_kill(struct gw *g)
{
	if (g->pid <= 0)
		return;
	kill(g->pid, SIGKILL);
	waitpid(g->pid, NULL, 0);
	g->pid = 0;
}

void gw_stop(struct gw *g, int secs)
{
	if (g->pid <= 0)
		return;
	daemon_stop(g->pid, secs);
	g->pid = 0;
}

void gw_cleanup(struct gw *g)
{
	if (g->pid > 0)
		gw_kill(g);
	if (h_fail || getenv("NKV_FAULTS_KEEP")) {
		printf("kept %s (daemon log: %s)\n", g->dir, g->log);
		return;
	}
	DIR *d = opendir(g->dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", g->dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(g->dir);
}

unsigned gw_log_count(const struct gw *g, const char *needle)
{
	FILE *f = fopen(g->log, "r");
	char line[4096];
	unsigned n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (!strstr(line, needle))
			continue;
		/* The daemon's rate limiter folds bursts into one line with a count (docs/operations.md, "Logs"). */
		const char *p = strstr(line, " (the last of "), *q = strstr(line, " (repeated ");
		unsigned k = 0;
		if (p && sscanf(p, " (the last of %u similar", &k) == 1)
			n += k;
		else if (q && sscanf(q, " (repeated %u times", &k) == 1)
			n += k;
		else
			n++;
	}
	if (f)
		fclose(f);
	return n;
}

unsigned proc_maps_count(pid_t pid, const char *needle)
{
	char path[64], line[512];
	unsigned n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return n;
}

void gw_log_tail(const struct gw *g, unsigned n)
{
	char cmd[256];
	fflush(stderr);
	snprintf(cmd, sizeof(cmd), "tail -n %u '%s' >&2", n, g->log);
	if (system(cmd) != 0)
		fprintf(stderr, "(no daemon log at %s)\n", g->log);
}

long proc_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

int proc_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}
