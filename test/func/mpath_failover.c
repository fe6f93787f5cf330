/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpath_failover.c - the multipath engine (nkv_engine_connect) across two gateways of one group on
 * the cluster: gateways A and B (rados-nkv --group, the same subsystem and namespace from one
 * configuration; A with a second listener), one engine over "A,B":
 *   - discovery: without a subsystem NQN, one gateway's discovery log names its other listener as a
 *     second path; malformed path lists and options are refused (-EINVAL);
 *   - failover: A is killed (SIGKILL) under a Store load: 0 ops fail at the application, every
 *     Store acknowledged reads back intact, new I/O goes to B; the time to resume (the longest
 *     batch around the kill, and kill -> first batch completed after it) is printed and bounded;
 *   - fail back: A restarts; the engine takes it again as the first path; B is killed under load:
 *     the same checks;
 *   - a non-idempotent Exec (numops.add, a counter) in flight on a frozen gateway when it is killed
 *     fails with -ENOTCONN and Host Pathing Error, is not sent again (retries 0; the counter counts
 *     only the one run asked afterwards), while a Store in flight with it is resent and succeeds;
 *   - every path gone: an op fails after the deadline (timeout_ms), not before, not much after.
 * Usage: mpath_failover PATH_TO_RADOS_NKV   (needs NKV_CEPH_CONF: else 77, or 1 with NKV_REQUIRE_RADOS=1)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "daemon_spawn.h"
#include "nkv/nkv.h"

#define NQN "nqn.2026-12.io.rados-nkv:mpath"
#define NOPS 8
#define VLEN 16384
#define MAXB 8192
#define TIMEOUT_MS 4000     /* the engine's per-op deadline */
#define RESUME_MAX_MS 3000  /* kill -> the load runs again */
#define OPC_ADD 0x80        /* numops.add "n" += 1: runs twice, counts twice */

unsigned h_pass, h_fail;

static const char *g_exe, *g_conf, *g_keyring, *g_pool;
static char g_dir[128], g_rns[64], g_group[64];
static unsigned g_port[3]; /* A, B, A's second listener */
static pid_t g_pid[2] = {-1, -1};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/** Gateway @g (0: A, 1: B) of the group, with the subsystem, the namespace and an Exec rule. */
static bool start_gw(int g)
{
	char path[192], name[16];
	snprintf(path, sizeof(path), "%s/%c.json", g_dir, 'a' + g);
	snprintf(name, sizeof(name), "gw-%c", 'a' + g);
	FILE *f = fopen(path, "w");
	if (!f)
		return false;
	char extra[64] = "";
	if (g == 0)
		snprintf(extra, sizeof(extra), ", {\"address\": \"127.0.0.1\", \"port\": %u}", g_port[2]);
	fprintf(f, "{\"backend\": {\"type\": \"rados\", \"ceph_conf\": \"%s\", \"keyring\": \"%s\", \"client_id\": \"%s\"},\n"
		" \"listeners\": [{\"address\": \"127.0.0.1\", \"port\": %u}%s],\n"
		" \"group\": {\"name\": \"%s\", \"pool\": \"%s\"}, \"control\": {\"address\": \"unix:%s/%c.sock\"},\n"
		" \"subsystems\": [{\"nqn\": \"%s\", \"pool\": \"%s\", \"allow_any_host\": true,\n"
		"  \"namespaces\": [{\"nsid\": 1, \"rados_namespace\": \"%s\", \"exec\": [{\"opcode\": \"0x80\","
		" \"class\": \"numops\", \"method\": \"add\", \"mode\": \"write\", \"create\": true,"
		" \"input_hex\": \"010000006e0100000031\"}]}]}]}\n",
		g_conf, g_keyring ? g_keyring : "", getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin",
		g_port[g], extra, g_group, g_pool, g_dir, 'a' + g, NQN, g_pool, g_rns);
	fclose(f);
	/* the discovery listener: the first listener's address on a free port of its own */
	char disc[32];
	snprintf(disc, sizeof(disc), "127.0.0.1:%u", daemon_free_port());
	const char *argv[] = {g_exe, "-c", path, "--gateway-name", name, "-d", disc, "--op-timeout", "5",
			      "--log-level", "warn", NULL};
	g_pid[g] = daemon_spawn(argv, NULL, NULL);
	return g_pid[g] > 0 && daemon_wait_port(g_pid[g], (int)g_port[g]);
}

static void kill_gw(int g)
{
	if (g_pid[g] <= 0)
		return;
	kill(g_pid[g], SIGKILL);
	waitpid(g_pid[g], NULL, 0);
	g_pid[g] = -1;
}

/* ---- the load ----------------------------------------------------------------------------------- */

struct rec {
	double t0, t1;
	unsigned seq;
	int rc[NOPS];
	uint16_t retries;
};

struct load {
	struct nkv_engine *e;
	unsigned base;     /* key numbers of this load start here */
	atomic_bool stop;
	unsigned nb;
	struct rec *r;
	pthread_t th;
};

static void key_of(uint8_t key[16], unsigned i)
{
	memset(key, 0, 16);
	snprintf((char *)key, 16, "mp%u", i);
}

static void fill(uint8_t *p, unsigned i)
{
	for (unsigned j = 0; j < VLEN; j++)
		p[j] = (uint8_t)(i * 131 + j * 7 + 3);
}

static void *load_main(void *arg)
{
	struct load *L = arg;
	uint8_t *buf = malloc((size_t)NOPS * VLEN);
	while (!atomic_load(&L->stop) && L->nb < MAXB) {
		struct rec *r = &L->r[L->nb];
		struct nkv_op ops[NOPS];
		memset(ops, 0, sizeof(ops));
		r->seq = L->nb;
		for (unsigned i = 0; i < NOPS; i++) {
			unsigned k = L->base + r->seq * NOPS + i;
			fill(buf + (size_t)i * VLEN, k);
			ops[i] = (struct nkv_op){.type = NKV_OP_STORE, .klen = 16, .nsid = 1,
						 .buf = buf + (size_t)i * VLEN, .len = VLEN};
			key_of(ops[i].key, k);
		}
		r->t0 = now_ms();
		int rc = nkv_engine_run(L->e, ops, NOPS);
		r->t1 = now_ms();
		for (unsigned i = 0; i < NOPS; i++) {
			r->rc[i] = rc < 0 ? rc : ops[i].rc;
			r->retries += ops[i].retries;
		}
		L->nb++;
		usleep(1000);
	}
	free(buf);
	return NULL;
}

/** Kill gateway @victim under load through @e: 0 errors, every acknowledged Store reads back. */
static void failover(struct nkv_engine *e, int victim, const char *what, unsigned base)
{
	struct load L = {.e = e, .base = base, .r = calloc(MAXB, sizeof(struct rec))};
	pthread_create(&L.th, NULL, load_main, &L);
	usleep(800000);
	unsigned before = L.nb;
	double t_kill = now_ms();
	kill_gw(victim);
	usleep(2000000);
	atomic_store(&L.stop, true);
	pthread_join(L.th, NULL);
	int active = nkv_engine_path_active(e, 1);
	CHECK(active == 1 - victim, "%s: new I/O goes to path %d (want %d)", what, active, 1 - victim);

	unsigned ok = 0, failed = 0, retried = 0, after = 0;
	double worst = 0, first_after = 0;
	for (unsigned b = 0; b < L.nb; b++) {
		struct rec *r = &L.r[b];
		retried += r->retries;
		for (unsigned i = 0; i < NOPS; i++) {
			if (r->rc[i] == 0) {
				ok++;
			} else if (failed++ < 5) {
				printf("%s: batch %u op %u: rc %d (%s)\n", what, b, i, r->rc[i], strerror(-r->rc[i]));
			}
		}
		if (r->t1 >= t_kill) {
			if (r->t1 - r->t0 > worst)
				worst = r->t1 - r->t0;
			if (r->t0 >= t_kill && !first_after)
				first_after = r->t1;
			after++;
		}
	}
	double resume = first_after ? first_after - t_kill : -1;
	printf("%s: %u batches (%u before the kill, %u ending after it), %u stores ok, %u failed at the "
	       "application, %u resent on the other path; time to resume: longest batch around the kill "
	       "%.0f ms, kill -> first batch started after it done %.0f ms\n",
	       what, L.nb, before, after, ok, failed, retried, worst, resume);
	CHECK(failed == 0, "%s: %u op(s) failed at the application", what, failed);
	CHECK(before > 0 && after > 0, "%s: the load ran before and after the kill (%u, %u)", what, before, after);
	CHECK(worst < RESUME_MAX_MS && resume >= 0 && resume < RESUME_MAX_MS, "%s: resume %.0f ms, longest %.0f ms",
	      what, resume, worst);

	/* every acknowledged Store reads back, through the surviving gateway */
	uint8_t *got = malloc(VLEN), *want = malloc(VLEN);
	unsigned checked = 0, bad = 0;
	for (unsigned b = 0; b < L.nb; b++)
		for (unsigned i = 0; i < NOPS; i++) {
			if (L.r[b].rc[i])
				continue;
			unsigned k = base + L.r[b].seq * NOPS + i;
			struct nkv_op op = {.type = NKV_OP_RETRIEVE, .klen = 16, .nsid = 1, .buf = got, .len = VLEN};
			key_of(op.key, k);
			fill(want, k);
			nkv_engine_run(e, &op, 1);
			checked++;
			if (op.rc || op.value_size != VLEN || memcmp(got, want, VLEN)) {
				if (bad++ < 3)
					printf("%s: key %u: rc %d size %u\n", what, k, op.rc, op.value_size);
			}
		}
	printf("%s: %u acknowledged stores read back, %u missing or different\n", what, checked, bad);
	CHECK(checked == ok && bad == 0, "%s: %u of %u acknowledged stores missing or different", what, bad, checked);
	free(got);
	free(want);
	free(L.r);
}

/** Wait until the engine sends new I/O to @path again. @return ms waited, or -1. */
static double wait_active(struct nkv_engine *e, int path, double max_ms)
{
	double t0 = now_ms();
	while (now_ms() - t0 < max_ms) {
		if (nkv_engine_path_active(e, 1) == path)
			return now_ms() - t0;
		usleep(10000);
	}
	return -1;
}

/** numops' counter "n" in the omap of @key's object, read with the rados CLI (-1: absent). */
static long counter(const char *key)
{
	char hex[40] = "", out[192], cmd[1024];
	for (size_t i = 0; key[i] && i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)key[i]);
	snprintf(out, sizeof(out), "%s/counter", g_dir);
	unlink(out);
	snprintf(cmd, sizeof(cmd), "rados -c '%s' %s%s%s -p '%s' -N '%s' getomapval %s n '%s' >/dev/null 2>&1", g_conf,
		 g_keyring ? "--keyring '" : "", g_keyring ? g_keyring : "", g_keyring ? "'" : "", g_pool, g_rns, hex, out);
	if (system(cmd) != 0)
		return -1;
	FILE *f = fopen(out, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/**
 * A non-idempotent Exec in flight when its gateway dies fails; a Store beside it is resent. The
 * counter must end at the number of adds that reported success: one that failed never ran, none ran
 * twice. The engine may send the batch to B instead of the frozen A (a path it holds back or finds
 * down at that moment, which a loaded machine makes likely): A frozen cannot answer, so a batch done
 * before the kill went to B; A is thawed and the case runs again.
 */
static void exec_in_flight(struct nkv_engine *e)
{
	uint8_t val[512];
	memset(val, 0x6b, sizeof(val));
	struct nkv_op ops[2];
	long ok_adds = 0;
	int got = 0, tries = 0;
	uint64_t tag = 0;

	for (;;) {
		ops[0] = (struct nkv_op){.type = NKV_OP_EXEC, .klen = 7, .nsid = 1, .key = "counter", .opts = OPC_ADD};
		ops[1] = (struct nkv_op){.type = NKV_OP_STORE, .klen = 7, .nsid = 1, .key = "beside1", .buf = val,
					 .len = sizeof(val)};
		/* A takes the commands and answers nothing */
		CHECK(daemon_freeze(g_pid[0]), "exec: every thread of A stopped");
		int rc = nkv_engine_submit(e, ops, 2, 42);
		CHECK(rc == 0, "exec: submit %d", rc);
		usleep(300000);
		got = nkv_engine_reap(e, &tag, 1, 0);
		if (got == 0 || ++tries == 5)
			break;
		ok_adds += ops[0].rc == 0;
		printf("exec: the batch went to B (A frozen; Exec rc %d): again\n", ops[0].rc);
		kill(g_pid[0], SIGCONT);
		CHECK(wait_active(e, 0, 5000) >= 0, "exec: A active again");
	}
	CHECK(got == 0, "exec: a batch in flight on the frozen A in %d tries", tries);
	kill_gw(0);
	if (got == 0)
		got = nkv_engine_reap(e, &tag, 1, TIMEOUT_MS * 2);
	CHECK(got == 1 && tag == 42, "exec: the batch completed (%d)", got);
	printf("exec in flight at the kill: rc %d status %#x retries %u; store beside it: rc %d retries %u\n",
	       ops[0].rc, ops[0].status, ops[0].retries, ops[1].rc, ops[1].retries);
	CHECK(ops[0].rc == -ENOTCONN && ops[0].status == NKV_STATUS_HOST_PATH && ops[0].retries == 0,
	      "exec: a non-idempotent Exec in flight fails with Host Pathing Error, not resent (rc %d status %#x "
	      "retries %u)", ops[0].rc, ops[0].status, ops[0].retries);
	CHECK(ops[1].rc == 0 && ops[1].retries >= 1, "exec: the Store beside it is resent and succeeds (rc %d, "
	      "retries %u)", ops[1].rc, ops[1].retries);
	ok_adds += ops[0].rc == 0;
	/* one more add through B: the counter says ok_adds + 1 if the lost one never ran anywhere */
	struct nkv_op add = {.type = NKV_OP_EXEC, .klen = 7, .nsid = 1, .key = "counter", .opts = OPC_ADD};
	nkv_engine_run(e, &add, 1);
	CHECK(add.rc == 0, "exec: numops.add through B: rc %d", add.rc);
	ok_adds += add.rc == 0;
	long n = counter("counter");
	printf("exec: counter after the lost add and one more: %ld (%ld adds reported success)\n", n, ok_adds);
	CHECK(n == ok_adds, "exec: the counter is %ld (want %ld, the adds that succeeded: the lost add was not run)",
	      n, ok_adds);
	/* the caller's declaration makes an Exec resendable; a bad flag is refused */
	struct nkv_op bad = {.type = NKV_OP_EXEC, .klen = 7, .nsid = 1, .key = "counter", .opts = OPC_ADD,
			     .flags = NKV_OP_PIN};
	CHECK(nkv_engine_run(e, &bad, 1) == -EINVAL, "exec: NKV_OP_PIN on an Exec refused");
	struct nkv_op idem = {.type = NKV_OP_STORE, .klen = 1, .nsid = 1, .key = "x", .flags = NKV_OP_IDEMPOTENT};
	CHECK(nkv_engine_run(e, &idem, 1) == -EINVAL, "NKV_OP_IDEMPOTENT on a Store refused");
}

/** Both gateways gone: an op fails once its deadline passed. */
static void all_gone(struct nkv_engine *e)
{
	kill_gw(1);
	struct nkv_op op = {.type = NKV_OP_EXIST, .klen = 3, .nsid = 1, .key = "abc"};
	double t0 = now_ms();
	nkv_engine_run(e, &op, 1);
	double took = now_ms() - t0;
	printf("every path gone: rc %d (%s) after %.0f ms (deadline %d ms)\n", op.rc, strerror(-op.rc), took,
	       TIMEOUT_MS);
	CHECK((op.rc == -ENOTCONN || op.rc == -EAGAIN) && took >= TIMEOUT_MS - 50 && took < TIMEOUT_MS + 1500,
	      "every path gone: rc %d after %.0f ms (deadline %d ms)", op.rc, took, TIMEOUT_MS);
	CHECK(nkv_engine_path_active(e, 1) == -ENOTCONN, "every path gone: no active path");
}

static void bad_lists(void)
{
	static const char *const bad[] = {"", ",", "127.0.0.1:1,", "127.0.0.1:0", "127.0.0.1:65536", "[::1",
					  "[::1]x", "h:12a", "shm:", ":4420",
					  "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"};
	struct nkv_engine *e = NULL;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = nkv_engine_connect(bad[i], NQN, NULL, NULL, &e);
		CHECK(rc == -EINVAL, "path list \"%s\": %d (want -EINVAL)", bad[i], rc);
	}
	struct nkv_engine_opts neg = {.reconnect_min_ms = -1};
	CHECK(nkv_engine_connect("127.0.0.1:1", NQN, NULL, &neg, &e) == -EINVAL, "negative backoff refused");
	CHECK(nkv_engine_connect(NULL, NQN, NULL, NULL, &e) == -EINVAL, "NULL path list refused");
}

int main(int argc, char **argv)
{
	if (argc < 2 || access(argv[1], X_OK)) {
		fprintf(stderr, "usage: mpath_failover PATH_TO_RADOS_NKV\n");
		return 77;
	}
	struct nkv_engine *e = NULL;
	g_exe = argv[1];
	g_conf = getenv("NKV_CEPH_CONF");
	g_keyring = getenv("NKV_CEPH_KEYRING");
	g_pool = getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv";
	if (!g_conf) {
		if (getenv("NKV_REQUIRE_RADOS") && !strcmp(getenv("NKV_REQUIRE_RADOS"), "1")) {
			printf("FAIL - no cluster (NKV_CEPH_CONF unset)\n");
			return 1;
		}
		printf("skip: no cluster (NKV_CEPH_CONF unset)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(g_dir, sizeof(g_dir), "%s/nkv-mpath.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(g_dir))
		return 1;
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	snprintf(g_rns, sizeof(g_rns), "mpath-%d-%d", (int)getpid(), rand() % 100000);
	snprintf(g_group, sizeof(g_group), "mpath-%d-%d", (int)getpid(), rand() % 100000);
	for (int i = 0; i < 3; i++)
		g_port[i] = daemon_free_port();
	bad_lists();
	bool up = start_gw(0);
	CHECK(up, "gateway A starts");
	if (!up)
		goto out;

	char paths[96], one[48];
	snprintf(paths, sizeof(paths), "127.0.0.1:%u,127.0.0.1:%u", g_port[0], g_port[1]);
	snprintf(one, sizeof(one), "127.0.0.1:%u", g_port[0]);
	struct nkv_conn_opts co = {.timeout_ms = TIMEOUT_MS};
	struct nkv_engine_opts eo = {.queues = 2, .depth = 32, .reconnect_max_ms = 400};

	/* B is not up yet: the engine starts on A and connects B in the background once it listens */
	int rc = nkv_engine_connect(paths, NQN, &co, &eo, &e);
	CHECK(rc == 0 && nkv_engine_paths(e) == 2, "connect %s: %d", paths, rc);
	if (rc)
		goto out;
	CHECK(nkv_engine_ctrl(e, 0) && !nkv_engine_ctrl(e, 1) && !nkv_engine_ctrl(e, 2), "A connected, B not yet");
	up = start_gw(1);
	CHECK(up, "gateway B starts");
	if (!up)
		goto out;
	double t_b = now_ms();
	while (!nkv_engine_ctrl(e, 1) && now_ms() - t_b < 3000)
		usleep(10000);
	printf("path B connected in the background %.0f ms after it listens\n", now_ms() - t_b);
	CHECK(nkv_engine_ctrl(e, 1), "B connected in the background");
	CHECK(nkv_engine_path_active(e, 1) == 0, "I/O goes to the first path");

	/* one gateway's discovery log names its second listener: two paths without a subsystem NQN */
	struct nkv_engine *d = NULL;
	rc = nkv_engine_connect(one, NULL, &co, &eo, &d);
	CHECK(rc == 0 && nkv_engine_paths(d) >= 2, "discovery: %d, %u path(s) from one listener", rc,
	      rc ? 0 : nkv_engine_paths(d));
	if (rc == 0) {
		struct nkv_op op = {.type = NKV_OP_EXIST, .klen = 3, .nsid = 1, .key = "abc"};
		nkv_engine_run(d, &op, 1);
		CHECK(op.rc == -ENOENT, "discovery: an Exist answered: %d", op.rc);
		nkv_engine_destroy(d);
	}

	failover(e, 0, "failover (A killed)", 0);
	up = start_gw(0);
	CHECK(up, "A restarts");
	double back = wait_active(e, 0, 5000);
	printf("fail back: I/O on A again %.0f ms after its restart\n", back);
	CHECK(back >= 0, "fail back: A is the active path again (%.0f ms)", back);
	failover(e, 1, "fail back (B killed)", 1000000);
	up = start_gw(1);
	CHECK(up, "B restarts");
	CHECK(wait_active(e, 0, 5000) >= 0, "A active");
	/* B's engine finds it again within its backoff (reconnect_max_ms 400) before A stops: the Store
	 * beside the Exec needs somewhere to go */
	usleep(1500000);
	exec_in_flight(e);
	all_gone(e);
out:
	nkv_engine_destroy(e);
	kill_gw(0);
	kill_gw(1);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rados -c '%s' %s%s%s -p '%s' rm 'rados_nkv.group.%s' >/dev/null 2>&1; rm -rf '%s'",
		 g_conf, g_keyring ? "--keyring '" : "", g_keyring ? g_keyring : "", g_keyring ? "'" : "", g_pool,
		 g_group, g_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup: %s\n", cmd);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
