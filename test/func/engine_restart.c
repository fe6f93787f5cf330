/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_restart.c - the engine across a lost target: a rados-nkv daemon (mem) this test starts is
 * killed (SIGKILL) under a batch load, a gateway that accepts connections and closes them at once
 * stands in its place for a while (a target that keeps failing), then the daemon starts again on the
 * same port and socket. Over NVMe/TCP and shared memory:
 *   - every op completes, none hangs: with 0, or -ENOTCONN (in flight when the connection went:
 *     Host Pathing Error, may have run), or -EAGAIN (never sent); nothing else;
 *   - while the target is away the engine retries with bounded backoff: the failing gateway sees a
 *     handful of connections, not a flood;
 *   - an op submitted after the restart succeeds within 2 s of it (the figure is printed: the
 *     recovery time, restart -> first success);
 *   - every Store reported successful after the restart reads back intact (mem: what was stored
 *     before the kill is gone with the process);
 *   - the process has as many file descriptors as before the kill, memory registered before it and
 *     unregistered while the target was away included (ASan's leak check covers memory);
 *   - with reconnect_wait_ms < 0, an op submitted while the target is away fails at once (-EAGAIN);
 *   - a daemon of another subsystem on the same shm socket is not taken for the lost controller;
 *     negative backoff options are refused.
 * Usage: engine_restart PATH_TO_RADOS_NKV   (77: no daemon binary)
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "check.h"
#include "daemon_spawn.h"
#include "nkv/nkv.h"

#define NQN "nqn.2026-11.io.rados-nkv:restart"
#define NOPS 16
#define VLEN 65536
#define MAXB 4096            /* batches recorded */
#define DOWN_MS 1500         /* how long the failing gateway stands in */
#define RECOVERY_MAX_MS 2000 /* restart -> first success */

unsigned h_pass, h_fail;

static const char *g_exe;
static char g_port[16], g_listen[64], g_sock[108];
static pid_t g_pid = -1;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool start_daemon_nqn(const char *nqn)
{
	const char *argv_d[] = {g_exe, "--backend", "mem", "--listen", g_listen, "--discovery", "none",
				"--subsys", nqn, "--shm", g_sock, "--ns", "1", "--log-level", "error", NULL};
	g_pid = daemon_spawn(argv_d, NULL, NULL);
	if (g_pid < 0 || !daemon_wait_port(g_pid, atoi(g_port)))
		return false;
	/* the socket of a killed daemon stays behind: wait until the new one answers on it */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, g_sock, strlen(g_sock) + 1);
	for (int i = 0; i < 500; i++) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (ok == 0)
			return true;
		usleep(10000);
	}
	return false;
}

static bool start_daemon(void)
{
	return start_daemon_nqn(NQN);
}

static void kill9(void)
{
	kill(g_pid, SIGKILL);
	waitpid(g_pid, NULL, 0);
	g_pid = -1;
}

static unsigned count_fds(void)
{
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1; /* the directory's own */
}

/* ---- a gateway that keeps failing: accepts, closes at once, counts ------------------------------ */

struct bad_gw {
	int fd;
	atomic_bool stop;
	atomic_uint accepts;
	pthread_t th;
};

static void *bad_gw_main(void *arg)
{
	struct bad_gw *g = arg;
	while (!atomic_load(&g->stop)) {
		int c = accept(g->fd, NULL, NULL);
		if (c >= 0) {
			atomic_fetch_add(&g->accepts, 1);
			close(c);
		} else {
			usleep(2000);
		}
	}
	return NULL;
}

/** Listen where the daemon was (its TCP port, or its shm socket path). @return false if it cannot. */
static bool bad_gw_start(struct bad_gw *g, bool shm)
{
	g->stop = false;
	g->accepts = 0;
	if (shm) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		memcpy(sa.sun_path, g_sock, strlen(g_sock) + 1);
		unlink(g_sock);
		g->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (bind(g->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(g->fd, 64) < 0)
			return false;
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(g_port))};
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int one = 1;
		g->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		setsockopt(g->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(g->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(g->fd, 64) < 0)
			return false;
	}
	return pthread_create(&g->th, NULL, bad_gw_main, g) == 0;
}

static unsigned bad_gw_stop(struct bad_gw *g)
{
	atomic_store(&g->stop, true);
	pthread_join(g->th, NULL);
	close(g->fd);
	return atomic_load(&g->accepts);
}

/* ---- the load ----------------------------------------------------------------------------------- */

struct batch_rec {
	double t_start, t_end;
	unsigned seq;         /* keys seq*NOPS .. +NOPS */
	int rc[NOPS];
};

struct load {
	struct nkv_engine *e;
	atomic_bool stop;
	unsigned nb;
	struct batch_rec *rec;
	double worst_ms;      /* the longest batch */
	pthread_t th;
};

static void key_of(uint8_t key[16], unsigned i)
{
	memset(key, 0, 16);
	snprintf((char *)key, 16, "rs%u", i);
}

static void fill_val(uint8_t *p, unsigned i)
{
	for (unsigned j = 0; j < VLEN; j++)
		p[j] = (uint8_t)(i * 131 + j * 7 + 1);
}

static void *load_main(void *arg)
{
	struct load *L = arg;
	uint8_t *buf = malloc((size_t)NOPS * VLEN);
	while (!atomic_load(&L->stop) && L->nb < MAXB) {
		struct batch_rec *r = &L->rec[L->nb];
		struct nkv_op ops[NOPS];
		memset(ops, 0, sizeof(ops));
		r->seq = L->nb;
		for (unsigned i = 0; i < NOPS; i++) {
			unsigned k = r->seq * NOPS + i;
			fill_val(buf + (size_t)i * VLEN, k);
			ops[i] = (struct nkv_op){.type = NKV_OP_STORE, .klen = 16, .nsid = 1,
						 .buf = buf + (size_t)i * VLEN, .len = VLEN};
			key_of(ops[i].key, k);
		}
		r->t_start = now_ms();
		int rc = nkv_engine_run(L->e, ops, NOPS);
		r->t_end = now_ms();
		if (r->t_end - r->t_start > L->worst_ms)
			L->worst_ms = r->t_end - r->t_start;
		for (unsigned i = 0; i < NOPS; i++)
			r->rc[i] = rc < 0 ? rc : ops[i].rc;
		L->nb++;
		usleep(2000);
	}
	free(buf);
	return NULL;
}

static void run_case(const char *tr, bool shm)
{
	struct nkv_conn_opts o = {.timeout_ms = 5000};
	struct nkv_ctrl *c = NULL;
	int rc = shm ? nkv_connect_shm(g_sock, &o, &c) : nkv_connect("127.0.0.1", g_port, NQN, &o, &c);
	CHECK(rc == 0, "%s: connect: %d", tr, rc);
	if (rc)
		return;
	struct nkv_engine_opts eo = {.queues = 2, .depth = 16, .reconnect_max_ms = 400};
	struct nkv_engine *e = NULL;
	rc = nkv_engine_create(c, &eo, &e);
	CHECK(rc == 0, "%s: engine: %d", tr, rc);
	if (rc) {
		nkv_disconnect(c);
		return;
	}
	struct load L = {.e = e, .rec = calloc(MAXB, sizeof(struct batch_rec))};
	pthread_create(&L.th, NULL, load_main, &L);
	usleep(300000);
	unsigned fds_before = count_fds();
	/* memory registered before the kill and unregistered while the target is away: nothing of it
	 * may stay behind (over shm its memfd) */
	size_t reg_len = 1u << 20;
	void *reg = mmap(NULL, reg_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rc = nkv_buf_register(c, reg, reg_len);
	CHECK(rc == 0, "%s: register 1 MiB: %d", tr, rc);

	kill9();
	double t_kill = now_ms();
	struct bad_gw g;
	bool gw = bad_gw_start(&g, shm);
	CHECK(gw, "%s: the failing gateway listens", tr);
	usleep(DOWN_MS * 1000);
	rc = nkv_buf_unregister(c, reg);
	CHECK(rc == 0, "%s: unregister while the target is away: %d", tr, rc);
	munmap(reg, reg_len);
	unsigned accepts = gw ? bad_gw_stop(&g) : 0;
	if (shm)
		unlink(g_sock);
	bool up = start_daemon();
	double t_up = now_ms();
	CHECK(up, "%s: the daemon starts again", tr);
	usleep(1500000);
	atomic_store(&L.stop, true);
	pthread_join(L.th, NULL);

	/* every op ended, with success or a retryable error; the first success after the restart */
	unsigned ok = 0, lost = 0, never = 0, other = 0;
	double first = 0;
	for (unsigned b = 0; b < L.nb; b++)
		for (unsigned i = 0; i < NOPS; i++) {
			int r = L.rec[b].rc[i];
			ok += r == 0;
			lost += r == -ENOTCONN;
			never += r == -EAGAIN;
			if (r && r != -ENOTCONN && r != -EAGAIN) {
				if (other++ < 5)
					printf("%s: batch %u op %u: rc %d (%s)\n", tr, b, i, r, strerror(-r));
			}
			if (r == 0 && L.rec[b].t_end > t_up && (!first || L.rec[b].t_end < first))
				first = L.rec[b].t_end;
		}
	double recovery = first ? first - t_up : -1;
	printf("%s: %u batches; ops: %u ok, %u lost in flight (-ENOTCONN), %u never sent (-EAGAIN), %u other; "
	       "down %.0f ms; failing gateway saw %u connection(s) in %d ms; recovery (restart -> first success) "
	       "%.0f ms; longest batch %.0f ms\n",
	       tr, L.nb, ok, lost, never, other, t_up - t_kill, accepts, DOWN_MS, recovery, L.worst_ms);
	CHECK(other == 0, "%s: %u op(s) ended with another error", tr, other);
	CHECK(first && recovery < RECOVERY_MAX_MS, "%s: first success %.0f ms after the restart", tr, recovery);
	CHECK(L.worst_ms < 5000 + 3000, "%s: no batch hung (longest %.0f ms)", tr, L.worst_ms);
	/* bounded backoff: min 50 ms doubling to 400 ms over 1.5 s is about 8 tries, a flood is thousands */
	CHECK(accepts >= 2 && accepts <= 20, "%s: %u connection(s) to the failing gateway", tr, accepts);

	/* what batches submitted after the restart reported stored reads back intact (a batch that
	 * straddles the kill may hold Stores the killed daemon answered: mem lost them with it) */
	uint8_t *got = malloc(VLEN), *want = malloc(VLEN);
	unsigned checked = 0, bad = 0;
	for (unsigned b = 0; b < L.nb; b++) {
		if (L.rec[b].t_start <= t_up)
			continue;
		for (unsigned i = 0; i < NOPS; i++) {
			if (L.rec[b].rc[i] != 0)
				continue;
			unsigned k = L.rec[b].seq * NOPS + i;
			struct nkv_op op = {.type = NKV_OP_RETRIEVE, .klen = 16, .nsid = 1, .buf = got, .len = VLEN};
			key_of(op.key, k);
			fill_val(want, k);
			int f = nkv_engine_run(e, &op, 1);
			checked++;
			if (f != 0 || op.rc != 0 || op.value_size != VLEN || memcmp(got, want, VLEN) != 0) {
				if (bad++ < 3)
					printf("%s: key %u: rc %d size %u\n", tr, k, op.rc, op.value_size);
			}
		}
	}
	CHECK(checked > 0 && bad == 0, "%s: %u of %u stores reported after the restart are missing or differ", tr,
	      bad, checked);
	free(got);
	free(want);
	unsigned fds_after = count_fds();
	CHECK(fds_after == fds_before, "%s: %u file descriptors before the kill, %u after recovery", tr, fds_before,
	      fds_after);

	/* fail fast: a second engine with reconnect_wait_ms < 0, on a controller of its own */
	struct nkv_ctrl *c2 = NULL;
	struct nkv_engine *e2 = NULL;
	rc = shm ? nkv_connect_shm(g_sock, &o, &c2) : nkv_connect("127.0.0.1", g_port, NQN, &o, &c2);
	struct nkv_engine_opts eo2 = {.queues = 1, .reconnect_wait_ms = -1};
	if (rc == 0)
		rc = nkv_engine_create(c2, &eo2, &e2);
	CHECK(rc == 0, "%s: fail-fast engine: %d", tr, rc);
	if (rc == 0) {
		kill9();
		usleep(200000);
		struct nkv_op op = {.type = NKV_OP_EXIST, .klen = 3, .nsid = 1, .key = "abc"};
		double t0 = now_ms();
		nkv_engine_run(e2, &op, 1);
		double took = now_ms() - t0;
		CHECK(op.rc == -EAGAIN && took < 1000, "%s: fail fast while away: rc %d in %.0f ms", tr, op.rc, took);
		if (shm)
			unlink(g_sock);
		up = start_daemon();
		t_up = now_ms();
		double t_ok = 0;
		while (up && now_ms() - t_up < 5000) {
			op = (struct nkv_op){.type = NKV_OP_EXIST, .klen = 3, .nsid = 1, .key = "abc"};
			nkv_engine_run(e2, &op, 1);
			if (op.rc == -ENOENT) { /* answered by the controller */
				t_ok = now_ms();
				break;
			}
			usleep(10000);
		}
		CHECK(t_ok && t_ok - t_up < RECOVERY_MAX_MS, "%s: fail-fast engine back %.0f ms after the restart", tr,
		      t_ok ? t_ok - t_up : -1.0);
		nkv_engine_destroy(e2);
	}
	nkv_disconnect(c2);
	nkv_engine_destroy(e);
	nkv_disconnect(c);
	free(L.rec);
}

/*
 * Who may take the place of a lost controller: only the same subsystem. A daemon serving another
 * subsystem on the same shm socket (the socket names the subsystem) is refused: ops wait and fail
 * with -EAGAIN, none runs there; the right one coming back is taken. Bad options are refused.
 */
static void wrong_subsystem(void)
{
	struct nkv_conn_opts o = {.timeout_ms = 3000};
	struct nkv_ctrl *c = NULL;
	struct nkv_engine *e = NULL;
	struct nkv_engine_opts bad = {.reconnect_min_ms = -1};
	int rc = nkv_connect_shm(g_sock, &o, &c);
	CHECK(rc == 0, "shm connect: %d", rc);
	if (rc)
		return;
	CHECK(nkv_engine_create(c, &bad, &e) == -EINVAL, "reconnect_min_ms < 0 refused");
	bad = (struct nkv_engine_opts){.reconnect_max_ms = -5};
	CHECK(nkv_engine_create(c, &bad, &e) == -EINVAL, "reconnect_max_ms < 0 refused");
	struct nkv_engine_opts eo = {.queues = 1, .reconnect_max_ms = 200, .reconnect_wait_ms = 800};
	rc = nkv_engine_create(c, &eo, &e);
	CHECK(rc == 0, "engine: %d", rc);
	if (rc) {
		nkv_disconnect(c);
		return;
	}
	uint8_t val[512];
	memset(val, 0x5a, sizeof(val));
	kill9();
	bool up = start_daemon_nqn("nqn.2026-11.io.rados-nkv:someone-else");
	CHECK(up, "another subsystem's daemon on the socket");
	struct nkv_op op = {.type = NKV_OP_STORE, .klen = 5, .nsid = 1, .key = "other", .buf = val, .len = sizeof(val)};
	nkv_engine_run(e, &op, 1);
	CHECK(op.rc == -EAGAIN, "a Store while another subsystem answers: rc %d (want -EAGAIN)", op.rc);
	struct nkv_ctrl *peek = NULL;
	struct nkv_qpair *qp = NULL;
	if (nkv_connect_shm(g_sock, &o, &peek) == 0 && nkv_qpair_create(peek, 0, &qp) == 0)
		CHECK(nkv_exist(qp, 1, "other", 5, NULL) == -ENOENT, "nothing was stored in the other subsystem");
	nkv_qpair_destroy(qp);
	nkv_disconnect(peek);
	kill9();
	up = start_daemon();
	double t_up = now_ms(), t_ok = 0;
	while (up && now_ms() - t_up < 5000) {
		op = (struct nkv_op){.type = NKV_OP_STORE, .klen = 5, .nsid = 1, .key = "other", .buf = val,
				     .len = sizeof(val)};
		nkv_engine_run(e, &op, 1);
		if (op.rc == 0) {
			t_ok = now_ms();
			break;
		}
		usleep(10000);
	}
	CHECK(t_ok && t_ok - t_up < RECOVERY_MAX_MS, "back on its own subsystem %.0f ms after the restart",
	      t_ok ? t_ok - t_up : -1.0);
	nkv_engine_destroy(e);
	nkv_disconnect(c);
}

int main(int argc, char **argv)
{
	if (argc < 2 || access(argv[1], X_OK)) {
		fprintf(stderr, "usage: engine_restart PATH_TO_RADOS_NKV\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	g_exe = argv[1];
	snprintf(g_port, sizeof(g_port), "%u", daemon_free_port());
	snprintf(g_listen, sizeof(g_listen), "127.0.0.1:%s", g_port);
	snprintf(g_sock, sizeof(g_sock), "%s/engine_restart.%d.sock", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	if (!start_daemon()) {
		fprintf(stderr, "engine_restart: daemon did not start\n");
		return 1;
	}
	run_case("tcp", false);
	run_case("shm", true);
	wrong_subsystem();
	if (g_pid > 0)
		daemon_stop(g_pid, 10);
	unlink(g_sock);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
