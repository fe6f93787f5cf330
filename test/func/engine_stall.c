/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_stall.c - the engine's deadlines against a target that stops answering: a rados-nkv daemon
 * (mem) this test starts is frozen with SIGSTOP while a batch is in flight.
 *   - NVMe/TCP: every op of the batch completes with -ETIMEDOUT within the deadline (1.5 s) plus a
 *     grace, none hangs; after SIGCONT the engine has reopened its queue pairs and a new batch of
 *     Stores and Retrieves succeeds, values intact;
 *   - shared memory: the same batch completes within the deadline plus a grace (the queue cannot be
 *     deleted while the controller is frozen, so what follows is the controller's fate, not checked);
 *   - both: one-op batches streamed with nkv_engine_submit() and a blocking nkv_engine_reap() (the
 *     reaping thread drives the queue pair) end the same way;
 *   - both: first a one-op nkv_engine_run(), which the calling thread runs on an idle worker's queue
 *     pair itself, ends the same way (-ETIMEDOUT or -ENOTCONN within the deadline plus the grace), and
 *     after SIGCONT the engine serves every queue again (a batch over all of them answers).
 * Usage: engine_stall PATH_TO_RADOS_NKV   (77: no daemon binary)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "check.h"
#include "daemon_spawn.h"
#include "nkv/nkv.h"

#define NQN "nqn.2026-11.io.rados-nkv:stall"
#define DEADLINE_MS 1500
#define GRACE_MS 2500
#define ONE_GRACE_MS 1000
#define NOPS 16

unsigned h_pass, h_fail;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fill_ops(struct nkv_op *ops, uint8_t type, uint8_t *buf, uint32_t len)
{
	memset(ops, 0, NOPS * sizeof(*ops));
	for (unsigned i = 0; i < NOPS; i++) {
		int n = snprintf((char *)ops[i].key, sizeof(ops[i].key), "stall%u", i);
		ops[i].klen = (uint8_t)n;
		ops[i].nsid = 1;
		ops[i].type = type;
		ops[i].buf = buf ? buf + (size_t)i * len : NULL;
		ops[i].len = buf ? len : 0;
	}
}

/** Freeze the daemon under a batch: every op must end by the deadline plus the grace. */
static void frozen_batch(const char *what, struct nkv_engine *e, pid_t pid)
{
	struct nkv_op ops[NOPS];
	fill_ops(ops, NKV_OP_EXIST, NULL, 0);
	daemon_freeze(pid);
	double t0 = now_ms();
	int rc = nkv_engine_run(e, ops, NOPS);
	double took = now_ms() - t0;
	unsigned timed_out = 0;
	for (unsigned i = 0; i < NOPS; i++) {
		timed_out += ops[i].rc == -ETIMEDOUT || ops[i].rc == -ENOTCONN;
		if (ops[i].rc != -ETIMEDOUT && ops[i].rc != -ENOTCONN)
			printf("%s: op %u: rc %d (%s) status %#x\n", what, i, ops[i].rc, strerror(-ops[i].rc),
			       ops[i].status);
	}
	printf("%s: frozen target: %d of %d ops failed (%u timed out or lost) in %.0f ms\n", what, rc, NOPS,
	       timed_out, took);
	CHECK(rc == NOPS && timed_out == NOPS, "%s: every op fails with -ETIMEDOUT/-ENOTCONN (%d failed, %u)", what,
	      rc, timed_out);
	CHECK(took >= DEADLINE_MS - 50 && took < DEADLINE_MS + GRACE_MS, "%s: ended in %.0f ms (deadline %d ms)",
	      what, took, DEADLINE_MS);
}

/** SIGCONT: the engine reopens its queue pairs (or reconnects) by itself and every queue serves
 *  again: the controller is up and a batch too big for one queue (it is cut over all of them) is
 *  answered (a miss is an answer). */
static void thaw(const char *what, struct nkv_engine *e, pid_t pid)
{
	enum { LEN = 32768 }; /* 16 x 32 KiB: more than a caller runs on one queue itself */
	struct nkv_op ops[NOPS];
	uint8_t *buf = malloc((size_t)NOPS * LEN);
	kill(pid, SIGCONT);
	double t0 = now_ms();
	unsigned answered = 0;
	do {
		if (nkv_engine_path_active(e, 1) != 0)
			continue;
		fill_ops(ops, NKV_OP_RETRIEVE, buf, LEN);
		for (unsigned i = 0; i < NOPS; i++)
			ops[i].key[0] = 'T'; /* absent keys */
		nkv_engine_run(e, ops, NOPS);
		answered = 0;
		for (unsigned i = 0; i < NOPS; i++)
			answered += ops[i].rc == -ENOENT;
	} while (answered < NOPS && now_ms() - t0 < 10000 && usleep(20000) == 0);
	printf("%s: after SIGCONT: a batch over every queue answered after %.0f ms\n", what, now_ms() - t0);
	CHECK(answered == NOPS, "%s: every queue serves again after SIGCONT (%u of %d answered)", what, answered, NOPS);
	free(buf);
}

/** The same with one-op batches kept in flight with nkv_engine_submit() and a blocking
 *  nkv_engine_reap(), which drives the queue pair on the calling thread (engine_drive): every tag
 *  comes back failed by the deadline plus the grace, none hangs. */
static void frozen_stream(const char *what, struct nkv_engine *e, pid_t pid)
{
	struct nkv_op ops[NOPS];
	fill_ops(ops, NKV_OP_EXIST, NULL, 0);
	daemon_freeze(pid);
	double t0 = now_ms();
	for (unsigned i = 0; i < NOPS; i++)
		CHECK(nkv_engine_submit(e, &ops[i], 1, i) == 0, "%s: submit %u", what, i);
	unsigned got = 0, failed = 0;
	while (got < NOPS) {
		uint64_t tags[NOPS];
		int n = nkv_engine_reap(e, tags, NOPS, DEADLINE_MS + GRACE_MS);
		if (n <= 0)
			break;
		for (int j = 0; j < n; j++, got++)
			failed += tags[j] < NOPS && (ops[tags[j]].rc == -ETIMEDOUT || ops[tags[j]].rc == -ENOTCONN);
	}
	double took = now_ms() - t0;
	printf("%s: frozen target, %d streamed ops: %u back, %u failed as they should, in %.0f ms\n", what, NOPS,
	       got, failed, took);
	CHECK(got == NOPS && failed == NOPS, "%s: every streamed op fails with -ETIMEDOUT/-ENOTCONN (%u of %u back)",
	      what, failed, got);
	CHECK(took >= DEADLINE_MS - 50 && took < DEADLINE_MS + GRACE_MS, "%s: the stream ended in %.0f ms (deadline %d ms)",
	      what, took, DEADLINE_MS);
	thaw(what, e, pid);
}

/** The same with a one-op run (the caller drives the queue pair), then SIGCONT: every queue serves again. */
static void frozen_one(const char *what, struct nkv_engine *e, pid_t pid)
{
	struct nkv_op ops[NOPS];
	fill_ops(ops, NKV_OP_EXIST, NULL, 0);
	daemon_freeze(pid);
	double t0 = now_ms();
	int rc = nkv_engine_run(e, ops, 1);
	double took = now_ms() - t0;
	printf("%s: frozen target, one op: rc %d, op rc %d (%s) in %.0f ms\n", what, rc, ops[0].rc,
	       strerror(-ops[0].rc), took);
	CHECK(rc == 1 && (ops[0].rc == -ETIMEDOUT || ops[0].rc == -ENOTCONN),
	      "%s: the one-op run fails with -ETIMEDOUT/-ENOTCONN (%d, rc %d)", what, rc, ops[0].rc);
	/* the caller returns when the op fails, not after the queue pair's teardown (an shm Delete SQ then
	 * waits for the admin timeout, another DEADLINE_MS): that is the worker's to wait for */
	CHECK(took >= DEADLINE_MS - 50 && took < DEADLINE_MS + ONE_GRACE_MS, "%s: one op ended in %.0f ms (deadline %d ms)",
	      what, took, DEADLINE_MS);
	thaw(what, e, pid);
}

int main(int argc, char **argv)
{
	if (argc < 2 || access(argv[1], X_OK)) {
		fprintf(stderr, "usage: engine_stall PATH_TO_RADOS_NKV\n");
		return 77;
	}
	char port[16], listen[64], sock[108], shm_arg[160];
	snprintf(port, sizeof(port), "%u", daemon_free_port());
	snprintf(listen, sizeof(listen), "127.0.0.1:%s", port);
	snprintf(sock, sizeof(sock), "%s/engine_stall.%d.sock", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	snprintf(shm_arg, sizeof(shm_arg), "%s", sock);
	const char *argv_d[] = {argv[1], "--backend", "mem", "--listen", listen, "--discovery", "none", "--subsys", NQN, "--shm", shm_arg,
				"--ns", "1", "--log-level", "warn", NULL};
	pid_t pid = daemon_spawn(argv_d, NULL, NULL);
	if (pid < 0 || !daemon_wait_port(pid, atoi(port))) {
		fprintf(stderr, "engine_stall: daemon did not start\n");
		return 1;
	}
	struct nkv_conn_opts o = {.timeout_ms = DEADLINE_MS, .no_keepalive = true};
	struct nkv_ctrl *c = NULL;
	struct nkv_engine *e = NULL;
	struct nkv_engine_opts eo = {.queues = 2, .depth = 16};

	int rc = nkv_connect("127.0.0.1", port, NQN, &o, &c);
	CHECK(rc == 0, "connect over TCP: %d", rc);
	if (rc == 0 && (rc = nkv_engine_create(c, &eo, &e)) == 0) {
		frozen_one("tcp", e, pid);
		frozen_stream("tcp", e, pid);
		frozen_batch("tcp", e, pid);
		/* Thawed, the engine reopens its queue pairs, or replaces the association when a reopen is
		 * refused; ops sent on the old one before that completes fail with Host Pathing Error (they
		 * may have run), as designed. Once every queue serves again, ops must succeed and data
		 * round-trip. */
		thaw("tcp", e, pid);
		enum { LEN = 65536 };
		uint8_t *buf = malloc((size_t)NOPS * LEN);
		for (size_t i = 0; i < (size_t)NOPS * LEN; i++)
			buf[i] = (uint8_t)(i * 7 + 3);
		struct nkv_op ops[NOPS];
		fill_ops(ops, NKV_OP_STORE, buf, LEN);
		double t0 = now_ms();
		rc = nkv_engine_run(e, ops, NOPS);
		printf("tcp: after SIGCONT: %d of %d stores failed (first rc %d), %.0f ms\n", rc, NOPS, ops[0].rc,
		       now_ms() - t0);
		CHECK(rc == 0, "stores after the target is back: %d failed (rc %d)", rc, ops[0].rc);
		memset(buf, 0, (size_t)NOPS * LEN);
		fill_ops(ops, NKV_OP_RETRIEVE, buf, LEN);
		rc = nkv_engine_run(e, ops, NOPS);
		bool same = true;
		for (size_t i = 0; i < (size_t)NOPS * LEN; i++)
			same &= buf[i] == (uint8_t)(i * 7 + 3);
		CHECK(rc == 0 && same, "retrieves after the target is back: %d failed, intact %d", rc, same);
		free(buf);
		nkv_engine_destroy(e);
	}
	nkv_disconnect(c);
	kill(pid, SIGCONT);

	c = NULL;
	rc = nkv_connect_shm(sock, &o, &c);
	CHECK(rc == 0, "connect over shm: %d", rc);
	if (rc == 0 && (rc = nkv_engine_create(c, &eo, &e)) == 0) {
		frozen_one("shm", e, pid);
		frozen_stream("shm", e, pid);
		frozen_batch("shm", e, pid);
		kill(pid, SIGCONT);
		double t0 = now_ms();
		nkv_engine_destroy(e);
		CHECK(now_ms() - t0 < 2.0 * DEADLINE_MS + GRACE_MS, "shm: engine destroyed in %.0f ms", now_ms() - t0);
	}
	nkv_disconnect(c);
	kill(pid, SIGCONT);
	daemon_stop(pid, 10);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
