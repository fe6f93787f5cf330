/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_client_tcp.c - libnkv end to end against a rados-nkv daemon (mem backend) that the test
 * starts itself: discovery, every digest combination, in-capsule and R2T stores, C2HData
 * retrieves, truncation, a pipelined async workload, List paging, keep alive, error statuses (vendor
 * Exec of an opcode nothing allowlists included).
 *
 * usage: test_client_tcp PATH_TO_RADOS_NKV   (exit 77 = skipped: no daemon binary)
 */
#include <errno.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "func/daemon_spawn.h"
#include "nkv/nkv.h"

#define NQN "nqn.2026-11.io.rados-nkv:nkv"
#define NKEYS 3000

static char g_port[16], g_dport[16];
static pid_t g_daemon;
static int g_fail;
unsigned h_pass, h_fail; /* daemon_spawn.c's check counters (its daemon_stop is not used here) */

#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			g_fail = 1;                                                \
			return;                                                    \
		}                                                                  \
	} while (0)
#define CHECK_RC(e, want)                                                                           \
	do {                                                                                        \
		int rc_ = (e);                                                                      \
		if (rc_ != (want)) {                                                                \
			fprintf(stderr, "%s:%d: %s = %d (%s), want %d\n", __FILE__, __LINE__, #e, rc_, \
				strerror(rc_ < 0 ? -rc_ : rc_), (want));                            \
			g_fail = 1;                                                                 \
			return;                                                                     \
		}                                                                                   \
	} while (0)

static void start_daemon(const char *path)
{
	snprintf(g_port, sizeof(g_port), "%u", daemon_free_port());
	snprintf(g_dport, sizeof(g_dport), "%u", daemon_free_port());
	char listen[64], disc[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%s", g_port);
	snprintf(disc, sizeof(disc), "127.0.0.1:%s", g_dport);
	g_daemon = fork();
	if (g_daemon == 0) {
		execl(path, path, "--backend", "mem", "--listen", listen, "--discovery", disc, "--pool", "nkv", "--ns",
		      "1", "--ns", "2::65536:ro", "--log-level", "warn", (char *)NULL);
		_exit(127);
	}
}

static void stop_daemon(void)
{
	if (g_daemon > 0) {
		kill(g_daemon, SIGTERM);
		waitpid(g_daemon, NULL, 0);
	}
}

static int connect_retry(const struct nkv_conn_opts *o, struct nkv_ctrl **c)
{
	int rc = -ECONNREFUSED;
	for (int i = 0; i < 100 && rc == -ECONNREFUSED; i++) {
		rc = nkv_connect("127.0.0.1", g_port, NQN, o, c);
		if (rc == -ECONNREFUSED)
			usleep(50000);
	}
	return rc;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static void t_discover(void)
{
	struct nkv_disc_entry *e = NULL;
	unsigned n = 0;
	CHECK_RC(nkv_discover("127.0.0.1", g_dport, NULL, &e, &n), 0);
	CHECK(n >= 1);
	CHECK(strcmp(e[0].subnqn, NQN) == 0);
	CHECK(strcmp(e[0].trsvcid, g_port) == 0);
	CHECK(strcmp(e[0].traddr, "127.0.0.1") == 0);
	CHECK(e[0].trtype == NKV_TRTYPE_TCP && e[0].subtype == NKV_SUBTYPE_NVME);
	free(e);
}

/* Sizes across the in-capsule limit, the R2T path and several MAXH2CDATA chunks. */
static void t_sizes(bool hd, bool dd)
{
	static const uint32_t sizes[] = {0, 1, 3, 4096, 8192, 8193, 100 * 1024, 5u << 20};
	struct nkv_conn_opts o = {.hdgst = hd, .ddgst = dd};
	struct nkv_ctrl *c;
	struct nkv_qpair *qp;
	CHECK_RC(connect_retry(&o, &c), 0);
	CHECK_RC(nkv_qpair_create(c, 0, &qp), 0);
	uint8_t *v = malloc(5u << 20), *r = malloc(5u << 20);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char key[16];
		uint32_t vs = 0;
		struct nkv_cpl cpl;
		snprintf(key, sizeof(key), "sz%u", sizes[i]);
		fill(v, sizes[i], (unsigned)i);
		CHECK_RC(nkv_store(qp, 1, key, (unsigned)strlen(key), v, sizes[i], 0, NULL), 0);
		memset(r, 0xa5, sizes[i]);
		CHECK_RC(nkv_retrieve(qp, 1, key, (unsigned)strlen(key), r, 5u << 20, &vs, &cpl), 0);
		CHECK(vs == sizes[i] && cpl.xfer == sizes[i]);
		CHECK(memcmp(v, r, sizes[i]) == 0);
	}
	/* truncation: the full size in DW0, HBS bytes moved */
	uint32_t vs = 0;
	struct nkv_cpl cpl;
	CHECK_RC(nkv_retrieve(qp, 1, "sz102400", 8, r, 100, &vs, &cpl), 0);
	CHECK(vs == 100 * 1024 && cpl.xfer == 100);
	free(v);
	free(r);
	nkv_disconnect(c); /* destroys qp too */
}

struct batch {
	unsigned done, errors;
	uint8_t (*bufs)[256];
};

static void batch_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct batch *b = arg;
	b->done++;
	if (cpl->status)
		b->errors++;
}

static int drain(struct nkv_qpair *qp, struct batch *b, unsigned want)
{
	for (int i = 0; i < 100000 && b->done < want; i++) {
		int rc = nkv_qpair_poll(qp, 1000);
		if (rc < 0)
			return rc;
	}
	return b->done == want ? 0 : -ETIMEDOUT;
}

/* Pipelined async stores/retrieves/deletes, and List paging over all the keys. */
static void t_async_and_list(void)
{
	struct nkv_ctrl *c;
	struct nkv_qpair *qp;
	CHECK_RC(connect_retry(NULL, &c), 0);
	CHECK_RC(nkv_qpair_create(c, 64, &qp), 0);
	CHECK(nkv_qpair_depth(qp) == 64);
	static uint8_t vals[NKEYS][256], back[NKEYS][256];
	static char keys[NKEYS][17];
	struct batch b = {0};
	for (unsigned i = 0; i < NKEYS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "async-%05u", i);
		fill(vals[i], sizeof(vals[i]), i);
		int rc;
		while ((rc = nkv_store_async(qp, 1, keys[i], (unsigned)strlen(keys[i]), vals[i], 1 + i % 256, 0, batch_cb,
					     &b)) == -EAGAIN)
			CHECK(nkv_qpair_poll(qp, 1000) >= 0);
		CHECK_RC(rc, 0);
	}
	CHECK_RC(drain(qp, &b, NKEYS), 0);
	CHECK(b.errors == 0);
	CHECK(nkv_qpair_outstanding(qp) == 0);

	b = (struct batch){0};
	for (unsigned i = 0; i < NKEYS; i++) {
		int rc;
		while ((rc = nkv_retrieve_async(qp, 1, keys[i], (unsigned)strlen(keys[i]), back[i], 256, batch_cb, &b)) ==
		       -EAGAIN)
			CHECK(nkv_qpair_poll(qp, 1000) >= 0);
		CHECK_RC(rc, 0);
	}
	CHECK_RC(drain(qp, &b, NKEYS), 0);
	CHECK(b.errors == 0);
	for (unsigned i = 0; i < NKEYS; i++)
		CHECK(memcmp(vals[i], back[i], 1 + i % 256) == 0);

	/* List with a small buffer so it takes many pages: every key once, ascending */
	uint8_t lb[1024], last[16];
	unsigned llen = 0, seen = 0;
	bool first = true;
	for (int page = 0; page < 10000; page++) {
		struct nkv_cpl cpl;
		CHECK_RC(nkv_list(qp, 1, last, llen, lb, sizeof(lb), &cpl), 0);
		uint64_t pos = 0;
		uint8_t k[16];
		unsigned kl, fresh = 0;
		int rc;
		while ((rc = nkv_list_next(lb, cpl.xfer, &pos, k, &kl)) == 1) {
			if (!first && kl == llen && memcmp(k, last, kl) == 0)
				continue; /* the start key comes back: it was the last of the previous page */
			if (kl == 11 && memcmp(k, "async-", 6) == 0) {
				CHECK(memcmp(k, keys[seen], 11) == 0);
				seen++;
			}
			if (!first || fresh)
				CHECK(llen == 0 || memcmp(k, last, kl < llen ? kl : llen) >= 0);
			memcpy(last, k, kl);
			llen = kl;
			fresh++;
		}
		CHECK(rc == 0);
		first = false;
		if (fresh == 0)
			break;
	}
	CHECK(seen == NKEYS);

	b = (struct batch){0};
	for (unsigned i = 0; i < NKEYS; i++) {
		int rc;
		while ((rc = nkv_delete_async(qp, 1, keys[i], (unsigned)strlen(keys[i]), batch_cb, &b)) == -EAGAIN)
			CHECK(nkv_qpair_poll(qp, 1000) >= 0);
		CHECK_RC(rc, 0);
	}
	CHECK_RC(drain(qp, &b, NKEYS), 0);
	CHECK(b.errors == 0);
	struct nkv_cpl cpl;
	CHECK_RC(nkv_exist(qp, 1, keys[7], (unsigned)strlen(keys[7]), &cpl), -ENOENT);
	CHECK((cpl.status & 0xff) == NKV_SC_KV_KEY_NOT_EXIST);
	nkv_qpair_destroy(qp);
	nkv_disconnect(c);
}

/* Many large stores and retrieves in flight at once: interleaved R2Ts, H2CData and C2HData. */
struct big {
	uint8_t *val, *back;
	uint32_t size;
	bool retrieve; /* check the data in the callback */
	unsigned *bad;
};

static void big_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct big *b = arg;
	if (cpl->status)
		(*b->bad)++;
	else if (b->retrieve && (cpl->dw0 != b->size || cpl->xfer != b->size || memcmp(b->val, b->back, b->size)))
		(*b->bad)++;
}

static void t_big_pipeline(void)
{
	enum { N = 48 };
	struct nkv_ctrl *c;
	struct nkv_qpair *qp;
	struct big b[N];
	unsigned bad = 0;
	CHECK_RC(connect_retry(&(struct nkv_conn_opts){.hdgst = true, .ddgst = true}, &c), 0);
	CHECK_RC(nkv_qpair_create(c, 16, &qp), 0);
	for (unsigned i = 0; i < N; i++) {
		b[i] = (struct big){.size = (i % 7) * 300000u + i * 13u + (i % 3 ? 0 : 5000u), .bad = &bad};
		b[i].val = malloc(b[i].size + 1);
		b[i].back = malloc(b[i].size + 1);
		fill(b[i].val, b[i].size, i);
	}
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < N; i++) {
			char k[16];
			int rc;
			snprintf(k, sizeof(k), "big%u", i);
			do {
				b[i].retrieve = pass == 1;
				if (pass == 0) {
					rc = nkv_store_async(qp, 1, k, (unsigned)strlen(k), b[i].val, b[i].size, 0, big_cb, &b[i]);
				} else {
					rc = nkv_retrieve_async(qp, 1, k, (unsigned)strlen(k), b[i].back, b[i].size + 1, big_cb,
								&b[i]);
				}
				if (rc == -EAGAIN)
					CHECK(nkv_qpair_poll(qp, 1000) >= 0);
			} while (rc == -EAGAIN);
			CHECK_RC(rc, 0);
		}
		for (int i = 0; i < 1000 && nkv_qpair_outstanding(qp); i++)
			CHECK(nkv_qpair_poll(qp, 1000) >= 0);
		CHECK(nkv_qpair_outstanding(qp) == 0);
	}
	CHECK(bad == 0);
	for (unsigned i = 0; i < N; i++) {
		free(b[i].val);
		free(b[i].back);
	}
	nkv_disconnect(c);
}

static void t_errors(void)
{
	struct nkv_ctrl *c;
	struct nkv_qpair *qp;
	struct nkv_cpl cpl;
	CHECK_RC(nkv_connect("127.0.0.1", g_port, "nqn.2026-11.io.rados-nkv:nope", NULL, &c), -ENOENT);
	CHECK_RC(connect_retry(NULL, &c), 0);
	uint32_t ids[8];
	CHECK_RC(nkv_ns_list(c, ids, 8), 2);
	CHECK(ids[0] == 1 && ids[1] == 2);
	struct nkv_id_ns_kv id;
	CHECK_RC(nkv_ns_identify(c, 2, &id), 0);
	CHECK(nkv_get32(&id.kvf[0].kvvml) == 65536 && (id.nsattr & 1));
	CHECK_RC(nkv_ns_identify(c, 9, &id), -ENOENT);
	CHECK_RC(nkv_qpair_create(c, 0, &qp), 0);
	CHECK_RC(nkv_retrieve(qp, 1, "missing", 7, NULL, 0, NULL, &cpl), -ENOENT);
	CHECK_RC(nkv_store(qp, 2, "ro", 2, "x", 1, 0, &cpl), -EROFS);
	static uint8_t big[65537];
	CHECK_RC(nkv_store(qp, 1, "big", 3, big, sizeof(big), 0, NULL), 0);
	CHECK_RC(nkv_store(qp, 1, "big", 3, big, 1, NKV_STORE_MUST_NOT_EXIST, &cpl), -EEXIST);
	CHECK_RC(nkv_store(qp, 1, "nobig", 5, big, 1, NKV_STORE_MUST_EXIST, &cpl), -ENOENT);
	CHECK_RC(nkv_store(qp, 1, "01234567890123456", 17, big, 1, 0, &cpl), -EINVAL);
	CHECK_RC(nkv_retrieve(qp, 9, "big", 3, big, 1, NULL, &cpl), -ENXIO);
	/* vendor Exec of an opcode no namespace allowlists: 01h (-EOPNOTSUPP) in every direction, with
	 * the input in-capsule (4 KiB) and through R2T (64 KiB), and the connection keeps serving */
	static uint8_t out[65536];
	const uint8_t inl[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint32_t osz = 12345;
	CHECK_RC(nkv_vendor_exec(qp, 1, "big", 3, 0x82, inl, 8, out, sizeof(out), &osz, &cpl), -EOPNOTSUPP);
	CHECK((cpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE && cpl.xfer == 0 && osz == 12345);
	CHECK_RC(nkv_vendor_exec(qp, 1, "big", 3, 0x81, big, 4096, NULL, 0, NULL, &cpl), -EOPNOTSUPP);
	CHECK_RC(nkv_vendor_exec(qp, 1, "big", 3, 0x81, big, sizeof(big), NULL, 0, NULL, &cpl), -EOPNOTSUPP);
	CHECK((cpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE);
	CHECK_RC(nkv_vendor_exec(qp, 1, "big", 3, 0x80, inl, 2, NULL, 0, NULL, &cpl), -EOPNOTSUPP);
	CHECK_RC(nkv_vendor_exec(qp, 1, "big", 3, 0x83, NULL, 0, NULL, 0, NULL, &cpl), -EINVAL);
	uint32_t vs = 0;
	CHECK_RC(nkv_retrieve(qp, 1, "big", 3, out, sizeof(out), &vs, &cpl), 0);
	CHECK(vs == sizeof(big));
	nkv_disconnect(c);
}

/* With KATO 1 s the target drops a silent host; the keep-alive thread keeps us alive. */
static void t_keepalive(void)
{
	struct nkv_conn_opts o = {.kato_ms = 1000};
	struct nkv_ctrl *c;
	struct nkv_qpair *qp;
	CHECK_RC(connect_retry(&o, &c), 0);
	CHECK_RC(nkv_qpair_create(c, 0, &qp), 0);
	sleep(3);
	CHECK_RC(nkv_store(qp, 1, "ka", 2, "v", 1, 0, NULL), 0);
	uint32_t ids[4];
	CHECK_RC(nkv_ns_list(c, ids, 4), 2);
	nkv_disconnect(c);
}

struct thr {
	struct nkv_ctrl *c;
	int id, rc;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	struct nkv_qpair *qp;
	t->rc = nkv_qpair_create(t->c, 16, &qp);
	if (t->rc)
		return NULL;
	uint8_t v[20000], r[20000];
	for (int i = 0; i < 200 && !t->rc; i++) {
		char key[16];
		uint32_t vs;
		snprintf(key, sizeof(key), "t%d-%d", t->id, i);
		fill(v, sizeof(v), (unsigned)i + 1000u * (unsigned)t->id);
		t->rc = nkv_store(qp, 1, key, (unsigned)strlen(key), v, sizeof(v), 0, NULL);
		if (!t->rc)
			t->rc = nkv_retrieve(qp, 1, key, (unsigned)strlen(key), r, sizeof(r), &vs, NULL);
		if (!t->rc && memcmp(v, r, sizeof(v)))
			t->rc = -EILSEQ;
	}
	nkv_qpair_destroy(qp);
	return NULL;
}

static void t_threads(void)
{
	struct nkv_ctrl *c;
	CHECK_RC(connect_retry(&(struct nkv_conn_opts){.hdgst = true, .ddgst = true}, &c), 0);
	pthread_t th[4];
	struct thr t[4];
	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){.c = c, .id = i};
		pthread_create(&th[i], NULL, thr_main, &t[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_RC(t[i].rc, 0);
	}
	nkv_disconnect(c);
}

int main(int argc, char **argv)
{
	if (argc < 2 || access(argv[1], X_OK) != 0) {
		fprintf(stderr, "test_client_tcp: no rados-nkv binary given: skipped\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	start_daemon(argv[1]);
	struct nkv_ctrl *c;
	if (connect_retry(NULL, &c) != 0) {
		fprintf(stderr, "test_client_tcp: the daemon did not come up\n");
		stop_daemon();
		return 1;
	}
	nkv_disconnect(c);
	struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{"errors", t_errors},             {"discover", t_discover}, {"async_and_list", t_async_and_list},
		{"threads", t_threads},           {"big_pipeline", t_big_pipeline}, {"keepalive", t_keepalive},
	};
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int before = g_fail;
		g_fail = 0;
		tests[i].fn();
		printf("%s %s\n", g_fail ? "FAIL" : "ok  ", tests[i].name);
		g_fail |= before;
	}
	for (int m = 0; m < 4; m++) {
		int before = g_fail;
		g_fail = 0;
		t_sizes(m & 1, m & 2);
		printf("%s sizes hdgst=%d ddgst=%d\n", g_fail ? "FAIL" : "ok  ", m & 1, (m & 2) >> 1);
		g_fail |= before;
	}
	stop_daemon();
	return g_fail;
}
