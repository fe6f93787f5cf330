/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_func.c - the RADOS_NKV NIXL table (integrations/nixl/c) end to end against a rados-nkv
 * daemon this test starts: whole-object writes and offset reads (several offsets, straddling
 * 4 KiB / 128 KiB boundaries, many pairs on one object), the stored format checked with plain
 * libnkv, registration replace, refused descriptors, queryMem (present / absent / foreign /
 * colliding), 64 requests in flight, release of requests in flight, reposts, errors (missing
 * object, read past the end, read-only namespace, unknown namespace or subsystem), several
 * threads at once.
 *
 * usage: nixl_func PATH_TO_RADOS_NKV mem|rados tcp|shm
 * rados: the micro cluster named by NKV_CEPH_CONF, NKV_CEPH_KEYRING, NKV_CEPH_USER, NKV_CEPH_POOL
 * (scripts/ceph-dev.sh env); without it exit 77 (skip), or 1 with NKV_REQUIRE_RADOS=1.
 * Every check counts; the last line is "N passed, N failed"; exit 0 only without failures.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "daemon_spawn.h"
#include "nkv/nkv.h"
#include "nixl_int.h" /* nixl_stager_hold(): holds the stager, to see what posting alone does */
#include "nkv_nixl.h"

unsigned h_pass, h_fail;

#define POOL_BYTES (16u << 20) /* the DRAM pool, registered once, as frameworks do */
#define RO_NSID 2              /* a read-only namespace of the daemon */

static const char *g_backend, *g_transport;
static char g_port[16], g_sock[108], g_subnqn[256], g_prefix[64];
static pid_t g_pid = -1;
static uint8_t *g_mem;              /* the DRAM pool */
static struct nkv_ctrl *g_raw;      /* plain libnkv, to look at and plant objects */
static struct nkv_qpair *g_rawqp;

#define S(st) nkv_nixl_status_str(st)

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

/* The daemon goes when this test goes, even on an abort (it would hold ctest's output pipe). */
static void die_with_parent(void *arg)
{
	(void)arg;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
}

/* Start the daemon: NSID 1 read-write, NSID 2 read-only, TCP and shm. 77 when rados has no cluster. */
static const char *g_argv[40]; /* the daemon's command line, for a restart */

static int start_daemon(const char *exe)
{
	const char **argv = g_argv;
	int a = 0;
	static char listen[64], ns1[160], ns2[160];
	snprintf(g_port, sizeof(g_port), "%u", daemon_free_port());
	snprintf(listen, sizeof(listen), "127.0.0.1:%s", g_port);
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(g_sock, sizeof(g_sock), "%s/nixl-%d.sock", tmp, (int)getpid());
	unlink(g_sock);
	snprintf(g_prefix, sizeof(g_prefix), "nixl-%d-%ld", (int)getpid(), (long)time(NULL));
	const char *pool = "nkv";
	argv[a++] = exe;
	if (strcmp(g_backend, "rados") == 0) {
		const char *conf = getenv("NKV_CEPH_CONF");
		if (!conf || !*conf) {
			const char *req = getenv("NKV_REQUIRE_RADOS");
			if (req && strcmp(req, "1") == 0) {
				fprintf(stderr, "NKV_REQUIRE_RADOS=1 but NKV_CEPH_CONF is not set\n");
				return 1;
			}
			printf("nixl_func: no cluster ($NKV_CEPH_CONF unset): skipped\n");
			return 77;
		}
		pool = getenv("NKV_CEPH_POOL") && *getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv";
		argv[a++] = "--backend";
		argv[a++] = "rados";
		argv[a++] = "--ceph-conf";
		argv[a++] = conf;
		argv[a++] = "--client-id";
		argv[a++] = getenv("NKV_CEPH_USER") && *getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin";
		if (getenv("NKV_CEPH_KEYRING") && *getenv("NKV_CEPH_KEYRING")) {
			argv[a++] = "--keyring";
			argv[a++] = getenv("NKV_CEPH_KEYRING");
		}
		/* RADOS namespaces of this run only: reruns never see each other's objects */
		snprintf(ns1, sizeof(ns1), "1:%s", g_prefix);
		snprintf(ns2, sizeof(ns2), "2:%s-ro::ro", g_prefix);
	} else {
		argv[a++] = "--backend";
		argv[a++] = "mem";
		snprintf(ns1, sizeof(ns1), "1");
		snprintf(ns2, sizeof(ns2), "2:ro-ns::ro");
	}
	snprintf(g_subnqn, sizeof(g_subnqn), "nqn.2026-11.io.rados-nkv:%s", pool);
	argv[a++] = "--pool";
	argv[a++] = pool;
	argv[a++] = "--ns";
	argv[a++] = ns1;
	argv[a++] = "--ns";
	argv[a++] = ns2;
	argv[a++] = "--listen";
	argv[a++] = listen;
	argv[a++] = "--discovery";
	argv[a++] = "none";
	argv[a++] = "--shm";
	argv[a++] = g_sock;
	argv[a++] = "--log-level";
	argv[a++] = "warn";
	argv[a] = NULL;
	g_pid = daemon_spawn(argv, die_with_parent, NULL);
	if (g_pid < 0 || !daemon_wait_port(g_pid, atoi(g_port))) {
		fprintf(stderr, "the daemon did not come up on port %s\n", g_port);
		return 1;
	}
	struct stat st;
	for (int i = 0; i < 200 && stat(g_sock, &st) != 0; i++)
		usleep(20000);
	return 0;
}

/* A backend on namespace @nsid through this run's transport, with S3's parameters thrown in
 * (a plugin installed as OBJ gets them and must ignore them). */
static struct nkv_nixl *mk(uint32_t nsid, int *st_out)
{
	char ns[16];
	snprintf(ns, sizeof(ns), "%u", nsid);
	struct nkv_nixl_param p[8];
	size_t n = 0;
	if (strcmp(g_transport, "shm") == 0) {
		p[n++] = (struct nkv_nixl_param){"shm", g_sock};
	} else {
		p[n++] = (struct nkv_nixl_param){"traddr", "127.0.0.1"};
		p[n++] = (struct nkv_nixl_param){"port", g_port};
	}
	p[n++] = (struct nkv_nixl_param){"subnqn", g_subnqn};
	p[n++] = (struct nkv_nixl_param){"nsid", ns};
	p[n++] = (struct nkv_nixl_param){"bucket", "kvcache"};
	p[n++] = (struct nkv_nixl_param){"endpoint_override", "http://127.0.0.1:9000"};
	p[n++] = (struct nkv_nixl_param){"access_key", "AKIA"};
	p[n++] = (struct nkv_nixl_param){"queues", "2"};
	struct nkv_nixl *b = NULL;
	char err[256] = "";
	int st = nkv_nixl_create(p, n, &b, err, sizeof(err));
	if (st_out)
		*st_out = st;
	else
		CHECK(st == NKV_NIXL_SUCCESS, "create nsid %u over %s: %s: %s", nsid, g_transport, S(st), err);
	return b;
}

/* Poll a request until it leaves IN_PROG (bounded: 60 s). */
static int wait_done(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	double end = now_s() + 60;
	int st;
	while ((st = nkv_nixl_check(b, r)) == NKV_NIXL_IN_PROG && now_s() < end)
		usleep(200);
	return st;
}

/* Prepare, post, wait, release: one transfer of @n pairs. @return its status. */
static int xfer(struct nkv_nixl *b, int op, const struct nkv_nixl_desc *l, const struct nkv_nixl_desc *r, size_t n)
{
	struct nkv_nixl_req *req = NULL;
	int st = nkv_nixl_prep(b, op, NKV_NIXL_DRAM_SEG, l, NKV_NIXL_OBJ_SEG, r, n, &req);
	if (st)
		return st;
	st = nkv_nixl_post(b, req);
	if (st == NKV_NIXL_IN_PROG)
		st = wait_done(b, req);
	nkv_nixl_release(b, req);
	return st;
}

static int xfer1(struct nkv_nixl *b, int op, void *local, uint64_t len, uint64_t dev_id, uint64_t off)
{
	struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)local, len, 0}, r = {off, len, dev_id};
	return xfer(b, op, &l, &r, 1);
}

static struct nkv_nixl_md *reg_obj(struct nkv_nixl *b, uint64_t dev_id, const char *name)
{
	struct nkv_nixl_md *md = NULL;
	int st = nkv_nixl_register(b, NKV_NIXL_OBJ_SEG, 0, 0, dev_id, name, strlen(name), &md);
	CHECK(st == NKV_NIXL_SUCCESS && md, "register devId %" PRIu64 " '%s': %s", dev_id, name, S(st));
	return md;
}

static void name_of(char *out, size_t len, const char *what)
{
	snprintf(out, len, "%s/%s", g_prefix, what);
}

static int query1(struct nkv_nixl *b, const char *name, struct nkv_nixl_qresp *q)
{
	size_t len = strlen(name);
	return nkv_nixl_query(b, &name, &len, 1, q);
}

/* ---- cases ----------------------------------------------------------------------------------- */

/* A whole-object write, then reads at several offsets, straddling page and 128 KiB boundaries,
 * many pairs of one request on one object; the stored value is checked with plain libnkv. */
static void t_write_read(struct nkv_nixl *b)
{
	char name[512];
	/* a long name, as LMCache's "model@world@worker@hash@dtype" */
	snprintf(name, sizeof(name), "%s/%s", g_prefix,
		 "meta-llama/Llama-3.1-8B-Instruct@8@3@4f1c2d0a9b8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0@bfloat16");
	const size_t N = 300001; /* not a multiple of anything */
	uint8_t *src = g_mem, *dst = g_mem + (4u << 20);
	fill(src, N, 1);
	struct nkv_nixl_md *md = reg_obj(b, 11, name);
	int st = xfer1(b, NKV_NIXL_WRITE, src, N, 11, 0);
	CHECK(st == NKV_NIXL_SUCCESS, "write: %s", S(st));

	/* the stored value: long-name header, then the payload */
	uint8_t key[16];
	nkv_lname_key(name, strlen(name), key);
	uint32_t H = nkv_lname_hdr_size(strlen(name)), vsize = 0;
	uint8_t *raw = malloc(H + N + 64);
	int rc = nkv_retrieve(g_rawqp, 1, key, 16, raw, (uint32_t)(H + N + 64), &vsize, NULL);
	uint64_t plen = 0;
	CHECK(rc == 0 && vsize == H + N, "raw retrieve: %d, size %u (want %zu)", rc, vsize, (size_t)(H + N));
	CHECK(nkv_lname_hdr_check(raw, vsize, name, strlen(name), &plen) == (int)H && plen == N,
	      "stored header (payload %" PRIu64 ")", plen);
	CHECK(memcmp(raw + H, src, N) == 0, "stored payload differs");
	free(raw);

	/* single reads at offsets */
	const uint64_t offs[][2] = {
		{0, N}, {1, 4095}, {4095, 2}, {4096 * 10 + 3, 70000}, {131071, 2}, {131072 - 100, 131072 + 200},
		{N - 1, 1}, {N - 4096, 4096}, {N, 0},
	};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		memset(dst, 0xee, N + 16);
		st = xfer1(b, NKV_NIXL_READ, dst, offs[i][1], 11, offs[i][0]);
		CHECK(st == NKV_NIXL_SUCCESS, "read [%" PRIu64 ", +%" PRIu64 "]: %s", offs[i][0], offs[i][1], S(st));
		CHECK(memcmp(dst, src + offs[i][0], offs[i][1]) == 0, "read [%" PRIu64 ", +%" PRIu64 "] bytes differ",
		      offs[i][0], offs[i][1]);
		CHECK(dst[offs[i][1]] == 0xee, "read [%" PRIu64 ", +%" PRIu64 "] wrote past its length", offs[i][0],
		      offs[i][1]);
	}

	/* one request: 37 pairs tiling the object in uneven pieces, to scattered local places */
	struct nkv_nixl_desc l[37], r[37];
	uint64_t off = 0;
	memset(dst, 0, 2 * N);
	for (int i = 0; i < 37; i++) {
		uint64_t len = i == 36 ? N - off : 1000 + (uint64_t)i * 300; /* the last: 75001 */
		r[i] = (struct nkv_nixl_desc){off, len, 11};
		l[i] = (struct nkv_nixl_desc){(uint64_t)(uintptr_t)(dst + off + (uint64_t)i * 8), len, 0};
		off += len;
	}
	st = xfer(b, NKV_NIXL_READ, l, r, 37);
	CHECK(st == NKV_NIXL_SUCCESS, "37-pair read: %s", S(st));
	int bad = 0;
	for (int i = 0; i < 37; i++)
		bad += memcmp((void *)(uintptr_t)l[i].addr, src + r[i].addr, r[i].len) != 0;
	CHECK(bad == 0, "%d of 37 pairs differ", bad);

	/* a second, shorter write replaces the object whole */
	fill(src, 5000, 2);
	st = xfer1(b, NKV_NIXL_WRITE, src, 5000, 11, 0);
	CHECK(st == NKV_NIXL_SUCCESS, "rewrite: %s", S(st));
	struct nkv_nixl_qresp q;
	CHECK(query1(b, name, &q) == NKV_NIXL_SUCCESS && q.present && q.size == 5000, "size after rewrite %" PRIu64,
	      q.size);
	st = xfer1(b, NKV_NIXL_READ, dst, 5000, 11, 0);
	CHECK(st == NKV_NIXL_SUCCESS && memcmp(dst, src, 5000) == 0, "read after rewrite: %s", S(st));
	/* an empty object */
	st = xfer1(b, NKV_NIXL_WRITE, src, 0, 11, 0);
	CHECK(st == NKV_NIXL_SUCCESS, "empty write: %s", S(st));
	CHECK(query1(b, name, &q) == NKV_NIXL_SUCCESS && q.present && q.size == 0, "empty object present");
	nkv_nixl_deregister(b, md);
}

/* devId registered twice: the second replaces the first for new requests; deregistering the first
 * leaves the second in place; requests prepared before keep their object. */
static void t_replace(struct nkv_nixl *b)
{
	char a[128], bn[128];
	name_of(a, sizeof(a), "replace-A");
	name_of(bn, sizeof(bn), "replace-B");
	uint8_t *buf = g_mem, *out = g_mem + (1u << 20);
	struct nkv_nixl_md *ma = reg_obj(b, 7, a);
	memset(buf, 'A', 4000);
	CHECK(xfer1(b, NKV_NIXL_WRITE, buf, 4000, 7, 0) == NKV_NIXL_SUCCESS, "write A");
	/* prepared now, posted after the replacement: still A */
	struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)out, 4000, 0}, r = {0, 4000, 7};
	struct nkv_nixl_req *old = NULL;
	CHECK(nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &r, 1, &old) == 0, "prep A");

	struct nkv_nixl_md *mb = reg_obj(b, 7, bn);
	memset(buf, 'B', 3000);
	CHECK(xfer1(b, NKV_NIXL_WRITE, buf, 3000, 7, 0) == NKV_NIXL_SUCCESS, "write B through devId 7");
	struct nkv_nixl_qresp q;
	CHECK(query1(b, a, &q) == 0 && q.present && q.size == 4000, "A untouched (%d, %" PRIu64 ")", q.present, q.size);
	CHECK(query1(b, bn, &q) == 0 && q.present && q.size == 3000, "B written (%d, %" PRIu64 ")", q.present, q.size);
	memset(out, 0, 4000);
	CHECK(xfer1(b, NKV_NIXL_READ, out, 3000, 7, 0) == NKV_NIXL_SUCCESS && out[0] == 'B' && out[2999] == 'B',
	      "devId 7 reads B");
	CHECK(nkv_nixl_deregister(b, ma) == NKV_NIXL_SUCCESS, "deregister the replaced A");
	CHECK(xfer1(b, NKV_NIXL_READ, out, 3000, 7, 0) == NKV_NIXL_SUCCESS && out[0] == 'B',
	      "devId 7 still B after A's deregistration");
	/* the request prepared with A (A is deregistered now: the request kept it alive) */
	memset(out, 0, 4000);
	int st = nkv_nixl_post(b, old);
	if (st == NKV_NIXL_IN_PROG)
		st = wait_done(b, old);
	CHECK(st == NKV_NIXL_SUCCESS && out[0] == 'A' && out[3999] == 'A', "old request reads A: %s", S(st));
	nkv_nixl_release(b, old);
	CHECK(nkv_nixl_deregister(b, mb) == NKV_NIXL_SUCCESS, "deregister B");
	CHECK(xfer1(b, NKV_NIXL_READ, out, 10, 7, 0) == NKV_NIXL_ERR_INVALID_PARAM, "devId 7 unregistered");

	/* NIXL's unbounded length (SIZE_MAX) from a nonzero base: unbounded, not an overflow */
	struct nkv_nixl_md *mu = NULL;
	CHECK(nkv_nixl_register(b, NKV_NIXL_OBJ_SEG, 4096, UINT64_MAX, 8, a, strlen(a), &mu) == 0, "SIZE_MAX length");
	CHECK(xfer1(b, NKV_NIXL_READ, out, 10, 8, 4096) == NKV_NIXL_ERR_INVALID_PARAM, "read past A's end (4000 B)");
	CHECK(xfer1(b, NKV_NIXL_READ, out, 10, 8, 4095) == NKV_NIXL_ERR_INVALID_PARAM, "below the base");
	nkv_nixl_deregister(b, mu);

	/* an empty metaInfo names the object by its devId, as NIXL's S3 backend does */
	struct nkv_nixl_md *mn = NULL;
	CHECK(nkv_nixl_register(b, NKV_NIXL_OBJ_SEG, 0, 0, 4242, NULL, 0, &mn) == 0, "register without a name");
	const char *nm = NULL;
	size_t nl = 0;
	CHECK(nkv_nixl_md_obj(mn, NULL, &nm, &nl, NULL) == 0 && nl == 4 && memcmp(nm, "4242", 4) == 0,
	      "name is the devId");
	nkv_nixl_deregister(b, mn);

	/* registration is cheap: 20,000 register + deregister (the table grows and shrinks) */
	struct nkv_nixl_md **many = calloc(20000, sizeof(*many));
	char nbuf[64];
	double t0 = now_s();
	int fails = 0;
	for (int i = 0; i < 20000; i++) {
		int n = snprintf(nbuf, sizeof(nbuf), "%s/many/%d", g_prefix, i);
		fails += nkv_nixl_register(b, NKV_NIXL_OBJ_SEG, 0, 0, 100000 + (uint64_t)i, nbuf, (size_t)n, &many[i]) != 0;
	}
	for (int i = 0; i < 20000; i++)
		fails += nkv_nixl_deregister(b, many[i]) != 0;
	CHECK(fails == 0, "%d registration calls failed", fails);
	printf("20000 object registrations + deregistrations: %.1f ms\n", (now_s() - t0) * 1e3);
	free(many);
}

/* Descriptors refused at prep, with the status NIXL users get. */
static void t_refused(struct nkv_nixl *b)
{
	char n1[128];
	name_of(n1, sizeof(n1), "refused");
	struct nkv_nixl_md *m = reg_obj(b, 21, n1);
	struct nkv_nixl_md *mr = NULL; /* a registration covering object bytes [100, 1100) only */
	CHECK(nkv_nixl_register(b, NKV_NIXL_OBJ_SEG, 100, 1000, 22, n1, strlen(n1), &mr) == 0, "ranged reg");
	uint8_t *p = g_mem;
	struct nkv_nixl_req *r = NULL;
	struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)p, 100, 0}, rm = {4096, 100, 21};
	int st = nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_NOT_SUPPORTED && !r, "write at offset 4096: %s", S(st));
	rm.addr = 0;
	rm.len = 99;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_MISMATCH, "lengths 100 vs 99: %s", S(st));
	rm.len = 100;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_VRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_NOT_SUPPORTED, "VRAM local: %s", S(st));
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_FILE_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_NOT_SUPPORTED, "FILE remote: %s", S(st));
	st = nkv_nixl_prep(b, 7, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "op 7: %s", S(st));
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 0, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "no pairs: %s", S(st));
	rm.dev_id = 999999;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "unregistered devId: %s", S(st));
	struct nkv_nixl_desc nl = {0, 100, 0};
	rm.dev_id = 21;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &nl, NKV_NIXL_OBJ_SEG, &rm, 1, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "NULL local: %s", S(st));
	struct nkv_nixl_desc big = {(uint64_t)(uintptr_t)p, 1ull << 32, 0}, rbig = {0, 1ull << 32, 21};
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &big, NKV_NIXL_OBJ_SEG, &rbig, 1, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "4 GiB pair: %s", S(st));
	/* the ranged registration: inside is fine, outside is refused */
	struct nkv_nixl_desc in = {100, 1000, 22}, out1 = {50, 100, 22}, out2 = {1000, 101, 22};
	l.len = 1000;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &in, 1, &r);
	CHECK(st == NKV_NIXL_SUCCESS && r, "inside the registered range: %s", S(st));
	nkv_nixl_release(b, r);
	r = NULL;
	l.len = 100;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &out1, 1, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "below the registered range: %s", S(st));
	l.len = 101;
	st = nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &out2, 1, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "past the registered range: %s", S(st));
	/* two whole-object writes to one object in one request */
	struct nkv_nixl_desc l2[2] = {{(uint64_t)(uintptr_t)p, 10, 0}, {(uint64_t)(uintptr_t)p + 10, 10, 0}};
	struct nkv_nixl_desc r2[2] = {{0, 10, 21}, {0, 10, 21}};
	st = nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, l2, NKV_NIXL_OBJ_SEG, r2, 2, &r);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "two writes to one object: %s", S(st));
	/* check before post; post twice while in flight */
	l.len = 100;
	rm = (struct nkv_nixl_desc){0, 100, 21};
	CHECK(nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rm, 1, &r) == 0, "prep");
	CHECK(nkv_nixl_check(b, r) == NKV_NIXL_ERR_NOT_POSTED, "check before post");
	nkv_nixl_release(b, r);
	CHECK(nkv_nixl_register(b, NKV_NIXL_BLK_SEG, 0, 0, 1, "x", 1, &mr) == NKV_NIXL_ERR_NOT_SUPPORTED,
	      "BLK registration");
	mr = NULL;
	CHECK(nkv_nixl_register(b, NKV_NIXL_DRAM_SEG, 0, 4096, 0, NULL, 0, &mr) == NKV_NIXL_ERR_INVALID_PARAM,
	      "DRAM at NULL");
	nkv_nixl_deregister(b, m);
}

/* REPOST_ACTIVE while in flight, and reposting a finished request: a write takes the local bytes
 * as they are at each post, a read refills its buffer. */
static void t_repost(struct nkv_nixl *b)
{
	enum { NP = 32, LEN = 256 << 10 };
	char nm[128];
	struct nkv_nixl_md *mds[NP];
	struct nkv_nixl_desc l[NP], r[NP];
	uint8_t *src = g_mem, *dst = g_mem + (8u << 20);
	for (int i = 0; i < NP; i++) {
		snprintf(nm, sizeof(nm), "%s/repost/%d", g_prefix, i);
		mds[i] = reg_obj(b, 300 + (uint64_t)i, nm);
		l[i] = (struct nkv_nixl_desc){(uint64_t)(uintptr_t)(src + (size_t)i * LEN), LEN, 0};
		r[i] = (struct nkv_nixl_desc){0, LEN, 300 + (uint64_t)i};
	}
	fill(src, (size_t)NP * LEN, 5);
	struct nkv_nixl_req *w = NULL;
	CHECK(nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, l, NKV_NIXL_OBJ_SEG, r, NP, &w) == 0, "prep 32 writes");
	int st = nkv_nixl_post(b, w);
	CHECK(st == NKV_NIXL_IN_PROG, "post: %s", S(st));
	int st2 = nkv_nixl_post(b, w);
	CHECK(st2 == NKV_NIXL_ERR_REPOST_ACTIVE, "post again at once: %s (8 MiB in flight)", S(st2));
	CHECK(wait_done(b, w) == NKV_NIXL_SUCCESS, "32 writes");
	fill(src, (size_t)NP * LEN, 6); /* new bytes, same request */
	st = nkv_nixl_post(b, w);
	CHECK(st == NKV_NIXL_IN_PROG, "repost: %s", S(st));
	CHECK(wait_done(b, w) == NKV_NIXL_SUCCESS, "32 writes again");
	nkv_nixl_release(b, w);

	for (int i = 0; i < NP; i++)
		l[i].addr = (uint64_t)(uintptr_t)(dst + (size_t)i * LEN);
	struct nkv_nixl_req *rd = NULL;
	CHECK(nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, l, NKV_NIXL_OBJ_SEG, r, NP, &rd) == 0, "prep reads");
	for (int round = 0; round < 2; round++) {
		memset(dst, 0, (size_t)NP * LEN);
		st = nkv_nixl_post(b, rd);
		if (st == NKV_NIXL_IN_PROG)
			st = wait_done(b, rd);
		CHECK(st == NKV_NIXL_SUCCESS, "read round %d: %s", round, S(st));
		CHECK(memcmp(dst, src, (size_t)NP * LEN) == 0, "read round %d: the second write's bytes", round);
	}
	nkv_nixl_release(b, rd);
	for (int i = 0; i < NP; i++)
		nkv_nixl_deregister(b, mds[i]);
}

/* queryMem: present with its size, absent, a foreign object and another name's object under the
 * key are absent, and reading them is NOT_FOUND. */
static void t_query(struct nkv_nixl *b)
{
	char present[128], absent[128], foreign[128], collide[128], other[128];
	name_of(present, sizeof(present), "q-present");
	name_of(absent, sizeof(absent), "q-absent");
	name_of(foreign, sizeof(foreign), "q-foreign");
	name_of(collide, sizeof(collide), "q-collide");
	name_of(other, sizeof(other), "q-someone-else");
	struct nkv_nixl_md *mp = reg_obj(b, 31, present), *mf = reg_obj(b, 32, foreign), *mc = reg_obj(b, 33, collide);
	fill(g_mem, 12345, 9);
	CHECK(xfer1(b, NKV_NIXL_WRITE, g_mem, 12345, 31, 0) == NKV_NIXL_SUCCESS, "write present");

	uint8_t key[16], val[4096];
	/* a foreign object (plain bytes, no header) under q-foreign's key */
	nkv_lname_key(foreign, strlen(foreign), key);
	memset(val, 'x', sizeof(val));
	CHECK(nkv_store(g_rawqp, 1, key, 16, val, sizeof(val), 0, NULL) == 0, "plant a foreign object");
	/* another name's long-name object under q-collide's key (what a hash collision looks like) */
	nkv_lname_key(collide, strlen(collide), key);
	int H = nkv_lname_hdr_pack(other, strlen(other), 100, val, sizeof(val));
	CHECK(H > 0 && nkv_store(g_rawqp, 1, key, 16, val, (uint32_t)H + 100, 0, NULL) == 0, "plant a collision");

	const char *names[5] = {present, absent, foreign, collide, present};
	size_t lens[5];
	for (int i = 0; i < 5; i++)
		lens[i] = strlen(names[i]);
	struct nkv_nixl_qresp q[5];
	memset(q, 0x55, sizeof(q));
	int st = nkv_nixl_query(b, names, lens, 5, q);
	CHECK(st == NKV_NIXL_SUCCESS, "query: %s", S(st));
	CHECK(q[0].present == 1 && q[0].size == 12345, "present: %d %" PRIu64, q[0].present, q[0].size);
	CHECK(q[1].present == 0, "absent");
	CHECK(q[2].present == 0, "foreign object counts as absent");
	CHECK(q[3].present == 0, "another name's object counts as absent");
	CHECK(q[4].present == 1 && q[4].size == 12345, "the same name twice");
	CHECK(nkv_nixl_query(b, names, lens, 0, q) == NKV_NIXL_SUCCESS, "empty query");
	size_t zero = 0;
	CHECK(nkv_nixl_query(b, names, &zero, 1, q) == NKV_NIXL_ERR_INVALID_PARAM, "empty name");

	st = xfer1(b, NKV_NIXL_READ, g_mem, 100, 32, 0);
	CHECK(st == NKV_NIXL_ERR_NOT_FOUND, "read of a foreign object: %s", S(st));
	st = xfer1(b, NKV_NIXL_READ, g_mem, 100, 33, 0);
	CHECK(st == NKV_NIXL_ERR_NOT_FOUND, "read of another name's object: %s", S(st));
	struct nkv_nixl_md *ma = reg_obj(b, 34, absent);
	st = xfer1(b, NKV_NIXL_READ, g_mem, 100, 34, 0);
	CHECK(st == NKV_NIXL_ERR_NOT_FOUND, "read of a missing object: %s", S(st));
	st = xfer1(b, NKV_NIXL_READ, g_mem, 0, 34, 0);
	CHECK(st == NKV_NIXL_ERR_NOT_FOUND, "0-byte read of a missing object: %s", S(st));
	/* read past the end: [12345 - 10, +11) and [12346, +1) */
	st = xfer1(b, NKV_NIXL_READ, g_mem, 11, 31, 12335);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "read past the end: %s", S(st));
	st = xfer1(b, NKV_NIXL_READ, g_mem, 1, 31, 12346);
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM, "read beyond the end: %s", S(st));
	/* in one request, the failing pair decides */
	struct nkv_nixl_desc l[2] = {{(uint64_t)(uintptr_t)g_mem, 100, 0}, {(uint64_t)(uintptr_t)g_mem + 100, 100, 0}};
	struct nkv_nixl_desc r[2] = {{0, 100, 31}, {0, 100, 34}};
	st = xfer(b, NKV_NIXL_READ, l, r, 2);
	CHECK(st == NKV_NIXL_ERR_NOT_FOUND, "one missing object of two: %s", S(st));
	nkv_nixl_deregister(b, mp);
	nkv_nixl_deregister(b, mf);
	nkv_nixl_deregister(b, mc);
	nkv_nixl_deregister(b, ma);
}

/* 64 requests in flight at once, each its own object: 64 writes posted, then polled; the same
 * for 64 reads, checked byte for byte. */
static void t_inflight(struct nkv_nixl *b)
{
	enum { NR = 64, LEN = 96 << 10 };
	struct nkv_nixl_md *mds[NR];
	struct nkv_nixl_req *req[NR];
	char nm[128];
	uint8_t *src = g_mem, *dst = g_mem + (8u << 20);
	fill(src, (size_t)NR * LEN, 77);
	for (int i = 0; i < NR; i++) {
		snprintf(nm, sizeof(nm), "%s/inflight/%d", g_prefix, i);
		mds[i] = reg_obj(b, 1000 + (uint64_t)i, nm);
	}
	for (int op = NKV_NIXL_WRITE; op >= NKV_NIXL_READ; op--) {
		uint8_t *base = op == NKV_NIXL_WRITE ? src : dst;
		memset(dst, 0, (size_t)NR * LEN);
		int posted = 0, inprog = 0;
		for (int i = 0; i < NR; i++) {
			struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)(base + (size_t)i * LEN), LEN, 0};
			struct nkv_nixl_desc r = {0, LEN, 1000 + (uint64_t)i};
			req[i] = NULL;
			if (nkv_nixl_prep(b, op, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &r, 1, &req[i]) == 0)
				posted += nkv_nixl_post(b, req[i]) == NKV_NIXL_IN_PROG;
		}
		CHECK(posted == NR, "%d of %d posted", posted, NR);
		CHECK(nkv_nixl_live_reqs(b) == NR, "64 requests alive");
		for (int i = 0; i < NR; i++)
			inprog += req[i] && nkv_nixl_check(b, req[i]) == NKV_NIXL_IN_PROG;
		int ok = 0;
		for (int i = 0; i < NR; i++)
			ok += req[i] && wait_done(b, req[i]) == NKV_NIXL_SUCCESS;
		CHECK(ok == NR, "%s: %d of %d succeeded", op == NKV_NIXL_WRITE ? "writes" : "reads", ok, NR);
		printf("%s: %d of 64 still in progress after all were posted\n", op == NKV_NIXL_WRITE ? "writes" : "reads",
		       inprog);
		for (int i = 0; i < NR; i++)
			nkv_nixl_release(b, req[i]);
	}
	CHECK(memcmp(src, dst, (size_t)NR * LEN) == 0, "64 objects read back");
	CHECK(nkv_nixl_live_reqs(b) == 0, "no request left");
	for (int i = 0; i < NR; i++)
		nkv_nixl_deregister(b, mds[i]);
}

/* Release requests while in flight: release never waits, they are freed when their batches
 * complete; the objects and the backend stay usable. */
static void t_release_inflight(struct nkv_nixl *b)
{
	enum { NR = 32, LEN = 512 << 10 };
	struct nkv_nixl_md *mds[NR];
	struct nkv_nixl_req *req[NR];
	char nm[128];
	fill(g_mem, (size_t)NR * LEN / 4, 3);
	for (int i = 0; i < NR; i++) {
		snprintf(nm, sizeof(nm), "%s/release/%d", g_prefix, i);
		mds[i] = reg_obj(b, 2000 + (uint64_t)i, nm);
		CHECK(xfer1(b, NKV_NIXL_WRITE, g_mem + (size_t)(i % 4) * LEN, LEN, 2000 + (uint64_t)i, 0) == 0, "write %d", i);
	}
	for (int op = NKV_NIXL_READ; op <= NKV_NIXL_WRITE; op++) {
		int in_flight = 0;
		double rel_ms = 0, t0 = now_s();
		/* each released right after its post, while the others are in flight too */
		for (int i = 0; i < NR; i++) {
			struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)(g_mem + (8u << 20) + (size_t)(i % 8) * LEN), LEN, 0};
			struct nkv_nixl_desc r = {0, LEN, 2000 + (uint64_t)i};
			req[i] = NULL;
			CHECK(nkv_nixl_prep(b, op, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &r, 1, &req[i]) == 0, "prep");
			CHECK(nkv_nixl_post(b, req[i]) == NKV_NIXL_IN_PROG, "post");
			double t1 = now_s();
			in_flight += nkv_nixl_check(b, req[i]) == NKV_NIXL_IN_PROG;
			CHECK(nkv_nixl_release(b, req[i]) == NKV_NIXL_SUCCESS, "release");
			rel_ms += (now_s() - t1) * 1e3;
		}
		CHECK(in_flight > 0, "no request was still in flight when released: the case did not happen");
		double end = now_s() + 60;
		unsigned live;
		while ((live = nkv_nixl_live_reqs(b)) > 0 && now_s() < end)
			usleep(1000);
		CHECK(live == 0, "%u released request(s) never freed", live);
		printf("%s: released %d of %d requests in flight (check + release: %.3f ms in all); all freed %.1f ms "
		       "after the first post\n",
		       op == NKV_NIXL_READ ? "reads" : "writes", in_flight, NR, rel_ms, (now_s() - t0) * 1e3);
	}
	/* released in flight and never checked again: the backend's destroy frees them (ASan: no leak) */
	struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)(g_mem + (8u << 20)), LEN, 0}, r = {0, LEN, 2000};
	struct nkv_nixl_req *last = NULL;
	CHECK(nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &r, 1, &last) == 0 &&
		      nkv_nixl_post(b, last) == NKV_NIXL_IN_PROG, "last read");
	nkv_nixl_release(b, last);
	for (int i = 0; i < NR; i++)
		nkv_nixl_deregister(b, mds[i]);
}

/* The namespace's limit (KVVML) bounds header + payload: a payload of KVVML - H bytes (H: the name's
 * header) is stored and read back whole; one byte more, and a payload of KVVML itself (a 64 MiB
 * object in a 64 MiB namespace), are refused at prepare with INVALID_PARAM, before any byte moves. */
static void t_limit(struct nkv_nixl *b)
{
	struct nkv_id_ns_kv id;
	CHECK(nkv_ns_identify(g_raw, 1, &id) == 0, "identify namespace 1");
	uint64_t kvvml = id.kvf[id.kvfc & 0xf].kvvml;
	char nm[128];
	name_of(nm, sizeof(nm), "limit");
	uint64_t H = nkv_lname_hdr_size(strlen(nm));
	CHECK(kvvml > H, "KVVML %" PRIu64 " above the header %" PRIu64, kvvml, H);
	if (kvvml <= H)
		return;
	struct nkv_nixl_md *m = reg_obj(b, 6000, nm);
	size_t big = (size_t)kvvml + 4096;
	uint8_t *src = mmap(NULL, 2 * big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(src != MAP_FAILED, "mmap");
	if (src == MAP_FAILED)
		return;
	uint8_t *dst = src + big;
	struct nkv_nixl_req *r = NULL;
	uint64_t sizes[2] = {kvvml - H + 1, kvvml};
	for (int i = 0; i < 2; i++) {
		struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)src, sizes[i], 0}, rd = {0, sizes[i], 6000};
		int st = nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &rd, 1, &r);
		CHECK(st == NKV_NIXL_ERR_INVALID_PARAM && !r, "prep a write of %" PRIu64 " bytes into values of %" PRIu64
		      " (header %" PRIu64 "): %s", sizes[i], kvvml, H, S(st));
		if (r) {
			nkv_nixl_release(b, r);
			r = NULL;
		}
	}
	/* the largest payload that fits: on the mem backend only (a 64 MiB object on the micro cluster
	 * costs seconds and proves nothing more) */
	if (strcmp(g_backend, "mem") == 0) {
		uint64_t n = kvvml - H;
		fill(src, n, 21);
		int st = xfer1(b, NKV_NIXL_WRITE, src, n, 6000, 0);
		CHECK(st == NKV_NIXL_SUCCESS, "write of %" PRIu64 " bytes (KVVML %" PRIu64 " - header %" PRIu64 "): %s", n,
		      kvvml, H, S(st));
		st = xfer1(b, NKV_NIXL_READ, dst, n, 6000, 0);
		CHECK(st == NKV_NIXL_SUCCESS && memcmp(dst, src, n) == 0, "read back %" PRIu64 " bytes: %s", n, S(st));
	}
	nkv_nixl_deregister(b, m);
	munmap(src, 2 * big);
}

/* Posting a write only queues it: the copy into staging, and freeing staging, run on the backend's
 * stager thread. Proof: with the stager held, post returns IN_PROG having staged nothing, and bytes
 * changed after the post returned are the ones stored (NIXL's rule: the local bytes stay as they are
 * until completion). Also: the worst post time of N x 4 MiB writes and of the read post after them
 * (NIXL_FUNC_NOCOPY_N sets N: 256 for the figures of a serving engine), a write released while
 * held, and a backend destroyed with a held write (it is stored, nothing leaks). */
static void t_post_no_copy(struct nkv_nixl *b)
{
	const size_t LEN = 4u << 20;
	unsigned n = strcmp(g_backend, "mem") == 0 ? 32 : 8;
	if (getenv("NIXL_FUNC_NOCOPY_N") && atoi(getenv("NIXL_FUNC_NOCOPY_N")) > 0)
		n = (unsigned)atoi(getenv("NIXL_FUNC_NOCOPY_N"));
	size_t total = (size_t)n * LEN;
	uint8_t *src = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(src != MAP_FAILED, "mmap %zu MiB", total >> 20);
	if (src == MAP_FAILED)
		return;
	struct nkv_nixl_md **mds = calloc(n, sizeof(*mds));
	struct nkv_nixl_desc *l = calloc(n, sizeof(*l)), *r = calloc(n, sizeof(*r));
	char nm[128];
	for (unsigned i = 0; i < n; i++) {
		snprintf(nm, sizeof(nm), "%s/nocopy/%u", g_prefix, i);
		mds[i] = reg_obj(b, 5000 + (uint64_t)i, nm);
		l[i] = (struct nkv_nixl_desc){(uint64_t)(uintptr_t)(src + (size_t)i * LEN), LEN, 0};
		r[i] = (struct nkv_nixl_desc){0, LEN, 5000 + (uint64_t)i};
	}
	fill(src, total, 11);
	struct nkv_nixl_req *w = NULL, *rd = NULL;
	CHECK(nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, l, NKV_NIXL_OBJ_SEG, r, n, &w) == 0, "prep writes");
	/* the read request: the first object, into the pool */
	struct nkv_nixl_desc lr = {(uint64_t)(uintptr_t)(g_mem + (8u << 20)), LEN, 0};
	CHECK(nkv_nixl_prep(b, NKV_NIXL_READ, NKV_NIXL_DRAM_SEG, &lr, NKV_NIXL_OBJ_SEG, &r[0], 1, &rd) == 0, "prep read");
	if (!w || !rd)
		goto out;
	double wpost = 0, rpost = 0;
	for (int k = 0; k < 3; k++) {
		double t0 = now_s();
		int st = nkv_nixl_post(b, w);
		double dt = (now_s() - t0) * 1e3;
		wpost = dt > wpost ? dt : wpost;
		CHECK(st == NKV_NIXL_IN_PROG, "post %u x 4 MiB writes: %s", n, S(st));
		CHECK((st = wait_done(b, w)) == NKV_NIXL_SUCCESS, "%u x 4 MiB writes: %s", n, S(st));
		t0 = now_s();
		st = nkv_nixl_post(b, rd); /* the staging just given back is freed meanwhile, not here */
		dt = (now_s() - t0) * 1e3;
		rpost = dt > rpost ? dt : rpost;
		CHECK(st == NKV_NIXL_IN_PROG && wait_done(b, rd) == NKV_NIXL_SUCCESS, "read after the writes");
	}
	printf("post of %u x 4 MiB writes: worst %.3f ms; the read post after them: worst %.3f ms\n", n, wpost, rpost);

	unsigned long staged = nixl_stager_hold(b, true);
	int st = nkv_nixl_post(b, w);
	CHECK(st == NKV_NIXL_IN_PROG, "held: post: %s", S(st));
	usleep(20000);
	CHECK(nkv_nixl_check(b, w) == NKV_NIXL_IN_PROG, "held: the write is still in progress");
	CHECK(nkv_nixl_post(b, w) == NKV_NIXL_ERR_REPOST_ACTIVE, "held: post again: REPOST_ACTIVE");
	CHECK(nixl_stager_hold(b, true) == staged, "the post staged the write itself");
	fill(src, total, 12); /* after the post returned: the bytes the stager copies */
	nixl_stager_hold(b, false);
	CHECK((st = wait_done(b, w)) == NKV_NIXL_SUCCESS, "released stager: %s", S(st));
	int bad = 0;
	for (unsigned i = 0; i < n; i++) {
		memset(g_mem + (8u << 20), 0, LEN);
		st = xfer1(b, NKV_NIXL_READ, g_mem + (8u << 20), LEN, 5000 + (uint64_t)i, 0);
		bad += st != NKV_NIXL_SUCCESS || memcmp(g_mem + (8u << 20), src + (size_t)i * LEN, LEN) != 0;
	}
	CHECK(bad == 0, "%d of %u objects differ from the bytes as they were after the post", bad, n);

	/* released while waiting for the stager: the stager frees it */
	nixl_stager_hold(b, true);
	CHECK(nkv_nixl_post(b, w) == NKV_NIXL_IN_PROG, "held: post to release");
	CHECK(nkv_nixl_release(b, w) == NKV_NIXL_SUCCESS, "release a held write");
	w = NULL;
	nixl_stager_hold(b, false);

	/* a backend destroyed with a held write: the write is submitted and completes first */
	struct nkv_nixl *b2 = mk(1, NULL);
	if (b2) {
		snprintf(nm, sizeof(nm), "%s/nocopy/destroy", g_prefix);
		struct nkv_nixl_md *m2 = reg_obj(b2, 1, nm);
		struct nkv_nixl_desc l2 = {(uint64_t)(uintptr_t)src, 1000, 0}, r2 = {0, 1000, 1};
		struct nkv_nixl_req *w2 = NULL;
		nixl_stager_hold(b2, true);
		CHECK(nkv_nixl_prep(b2, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, &l2, NKV_NIXL_OBJ_SEG, &r2, 1, &w2) == 0 &&
			      nkv_nixl_post(b2, w2) == NKV_NIXL_IN_PROG,
		      "held write on a second backend");
		(void)m2;
		nkv_nixl_destroy(b2);
		struct nkv_nixl_qresp q;
		CHECK(query1(b, nm, &q) == 0 && q.present && q.size == 1000, "the held write stored at destroy (%d, %" PRIu64 ")",
		      q.present, q.size);
	}
out:;
	double end = now_s() + 60;
	while (nkv_nixl_live_reqs(b) > 1 && now_s() < end)
		usleep(1000);
	CHECK(nkv_nixl_live_reqs(b) == 1, "the released write was freed (%u live)", nkv_nixl_live_reqs(b));
	if (w)
		nkv_nixl_release(b, w);
	if (rd)
		nkv_nixl_release(b, rd);
	for (unsigned i = 0; i < n; i++)
		if (mds[i])
			nkv_nixl_deregister(b, mds[i]);
	free(mds);
	free(l);
	free(r);
	munmap(src, total);
}

/* Namespaces that refuse: read-only (write NOT_ALLOWED, read fine), unknown (create NOT_FOUND);
 * an unknown subsystem and a closed port. */
static void t_errors(struct nkv_nixl *b_rw)
{
	(void)b_rw;
	struct nkv_nixl *ro = mk(RO_NSID, NULL);
	if (ro) {
		char nm[128];
		name_of(nm, sizeof(nm), "ro-object");
		struct nkv_nixl_md *m = reg_obj(ro, 1, nm);
		int st = xfer1(ro, NKV_NIXL_WRITE, g_mem, 100, 1, 0);
		CHECK(st == NKV_NIXL_ERR_NOT_ALLOWED, "write to a read-only namespace: %s", S(st));
		st = xfer1(ro, NKV_NIXL_READ, g_mem, 100, 1, 0);
		CHECK(st == NKV_NIXL_ERR_NOT_FOUND, "read there: %s", S(st));
		nkv_nixl_deregister(ro, m);
		nkv_nixl_destroy(ro);
	}
	int st = 0;
	struct nkv_nixl *x = mk(9, &st);
	CHECK(!x && st == NKV_NIXL_ERR_NOT_FOUND, "nsid 9: %s", S(st));
	nkv_nixl_destroy(x);

	char err[256] = "";
	struct nkv_nixl_param p[4] = {{"traddr", "127.0.0.1"}, {"port", g_port}, {"subnqn", "nqn.2026-11.io.example:none"},
				      {"timeout_ms", "5000"}};
	struct nkv_nixl_param ps[2] = {{"shm", g_sock}, {"subnqn", "nqn.2026-11.io.example:none"}};
	if (strcmp(g_transport, "tcp") == 0) {
		st = nkv_nixl_create(p, 4, &x, err, sizeof(err));
		CHECK(st == NKV_NIXL_ERR_NOT_FOUND && !x, "unknown subsystem: %s (%s)", S(st), err);
		char closed[16];
		snprintf(closed, sizeof(closed), "%u", daemon_free_port());
		p[1].value = closed;
		st = nkv_nixl_create(p, 4, &x, err, sizeof(err));
		CHECK(st == NKV_NIXL_ERR_BACKEND && !x && strstr(err, closed), "closed port: %s (%s)", S(st), err);
	} else {
		(void)ps;
		struct nkv_nixl_param pn[1] = {{"shm", "/nonexistent/nixl.sock"}};
		st = nkv_nixl_create(pn, 1, &x, err, sizeof(err));
		CHECK(st != NKV_NIXL_SUCCESS && !x && strstr(err, "/nonexistent/nixl.sock"), "no socket: %s (%s)", S(st),
		      err);
	}
	struct nkv_nixl_param bad[1] = {{"nsid", "one"}};
	st = nkv_nixl_create(bad, 1, &x, err, sizeof(err));
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM && !x && strstr(err, "nsid"), "nsid=one: %s (%s)", S(st), err);
}

/* Writes with no staging buffer kept (staging_mb 0): each is freed after its write. */
static void t_no_stage_cache(void)
{
	struct nkv_nixl_param p[4] = {{"subnqn", g_subnqn}, {"staging_mb", "0"}};
	if (strcmp(g_transport, "shm") == 0) {
		p[2] = (struct nkv_nixl_param){"shm", g_sock};
		p[3] = (struct nkv_nixl_param){"nsid", "1"};
	} else {
		p[2] = (struct nkv_nixl_param){"port", g_port};
		p[3] = (struct nkv_nixl_param){"nsid", "1"};
	}
	struct nkv_nixl *b = NULL;
	char err[256] = "", nm[128];
	int st = nkv_nixl_create(p, 4, &b, err, sizeof(err));
	CHECK(st == NKV_NIXL_SUCCESS, "staging_mb=0: %s %s", S(st), err);
	if (!b)
		return;
	name_of(nm, sizeof(nm), "no-stage-cache");
	struct nkv_nixl_md *m = reg_obj(b, 1, nm);
	int ok = 0;
	for (int i = 0; i < 8; i++) {
		size_t len = 100000 + (size_t)i * 70000;
		fill(g_mem, len, 40 + (unsigned)i);
		memset(g_mem + (8u << 20), 0, len);
		ok += xfer1(b, NKV_NIXL_WRITE, g_mem, len, 1, 0) == 0 &&
		      xfer1(b, NKV_NIXL_READ, g_mem + (8u << 20), len, 1, 0) == 0 &&
		      memcmp(g_mem, g_mem + (8u << 20), len) == 0;
	}
	CHECK(ok == 8, "%d of 8 round trips without kept staging", ok);
	nkv_nixl_deregister(b, m);
	nkv_nixl_destroy(b);
}

/* "paths": the multipath engine over this run's port and one nothing listens on (connected in the
 * background): transfers run on the live path; a list nkv_engine_connect() refuses is a bad parameter. */
static void t_paths(void)
{
	char paths[64], closed[16], err[256] = "", nm[128];
	snprintf(closed, sizeof(closed), "%u", daemon_free_port());
	snprintf(paths, sizeof(paths), "127.0.0.1:%s,127.0.0.1:%s", g_port, closed);
	struct nkv_nixl_param p[3] = {{"paths", paths}, {"subnqn", g_subnqn}, {"nsid", "1"}};
	struct nkv_nixl *b = NULL;
	int st = nkv_nixl_create(p, 3, &b, err, sizeof(err));
	CHECK(st == NKV_NIXL_SUCCESS, "paths %s: %s %s", paths, S(st), err);
	if (b) {
		name_of(nm, sizeof(nm), "paths");
		struct nkv_nixl_md *m = reg_obj(b, 1, nm);
		size_t len = 300000;
		fill(g_mem, len, 77);
		memset(g_mem + (8u << 20), 0, len);
		CHECK(xfer1(b, NKV_NIXL_WRITE, g_mem, len, 1, 0) == 0 &&
			      xfer1(b, NKV_NIXL_READ, g_mem + (8u << 20), len, 1, 0) == 0 &&
			      memcmp(g_mem, g_mem + (8u << 20), len) == 0,
		      "a round trip through the multipath engine");
		nkv_nixl_deregister(b, m);
		nkv_nixl_destroy(b);
	}
	struct nkv_nixl_param bad[2] = {{"paths", "127.0.0.1:70000"}, {"subnqn", g_subnqn}};
	b = NULL;
	st = nkv_nixl_create(bad, 2, &b, err, sizeof(err));
	CHECK(st == NKV_NIXL_ERR_INVALID_PARAM && !b, "paths with a bad port: %s (%s)", S(st), err);
}

/* Several threads preparing, posting, checking and releasing at once, each on its own objects. */
struct thr {
	struct nkv_nixl *b;
	int id, ok, iters;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	enum { LEN = 40000 };
	char nm[128];
	uint8_t *src = g_mem + (size_t)t->id * 2 * LEN, *dst = src + LEN;
	for (int it = 0; it < t->iters; it++) {
		snprintf(nm, sizeof(nm), "%s/thr/%d/%d", g_prefix, t->id, it);
		uint64_t dev = 5000 + (uint64_t)t->id * 1000 + (uint64_t)it;
		struct nkv_nixl_md *m = NULL;
		if (nkv_nixl_register(t->b, NKV_NIXL_OBJ_SEG, 0, 0, dev, nm, strlen(nm), &m))
			continue;
		fill(src, LEN, (unsigned)(t->id * 100 + it));
		int st = xfer1(t->b, NKV_NIXL_WRITE, src, LEN, dev, 0);
		memset(dst, 0, LEN);
		if (st == 0)
			st = xfer1(t->b, NKV_NIXL_READ, dst + 3, LEN - 7, dev, 3);
		if (st == 0 && memcmp(dst + 3, src + 3, LEN - 7) == 0)
			t->ok++;
		nkv_nixl_deregister(t->b, m);
	}
	return NULL;
}

static void t_threads(struct nkv_nixl *b)
{
	enum { NT = 4, IT = 25 };
	pthread_t th[NT];
	struct thr t[NT];
	for (int i = 0; i < NT; i++) {
		t[i] = (struct thr){.b = b, .id = i, .iters = IT};
		pthread_create(&th[i], NULL, thr_main, &t[i]);
	}
	int ok = 0;
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		ok += t[i].ok;
	}
	CHECK(ok == NT * IT, "threads: %d of %d write + offset read round trips", ok, NT * IT);
}

/* Does the daemon answer on the shm socket (a killed one leaves its file behind)? */
static bool sock_answers(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, g_sock, strlen(g_sock) + 1);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * The daemon killed (SIGKILL) under transfers in flight, then started again with the same command
 * line (port, socket, namespaces): the same backend, never recreated, recovers. Each request in flight
 * ends, SUCCESS or NIXL_ERR_BACKEND, within the op deadline; none stays IN_PROG. A transfer posted
 * after the restart succeeds within 2 s of it (the time is printed), data intact, through the pool
 * registered before the kill (over shm registered again with the new controller: still zero copy),
 * and the pool deregisters cleanly afterwards.
 */
static void t_restart(struct nkv_nixl *b)
{
	enum { NR = 16, LEN = 256 << 10 };
	struct nkv_nixl_md *mds[NR];
	struct nkv_nixl_req *req[NR];
	char nm[128];
	uint8_t *src = g_mem, *dst = g_mem + (8u << 20);
	fill(src, (size_t)NR * LEN, 91);
	for (int i = 0; i < NR; i++) {
		snprintf(nm, sizeof(nm), "%s/restart/%d", g_prefix, i);
		mds[i] = reg_obj(b, 3000 + (uint64_t)i, nm);
	}
	int posted = 0;
	for (int i = 0; i < NR; i++) {
		struct nkv_nixl_desc l = {(uint64_t)(uintptr_t)(src + (size_t)i * LEN), LEN, 0};
		struct nkv_nixl_desc r = {0, LEN, 3000 + (uint64_t)i};
		req[i] = NULL;
		if (nkv_nixl_prep(b, NKV_NIXL_WRITE, NKV_NIXL_DRAM_SEG, &l, NKV_NIXL_OBJ_SEG, &r, 1, &req[i]) == 0)
			posted += nkv_nixl_post(b, req[i]) == NKV_NIXL_IN_PROG;
	}
	kill(g_pid, SIGKILL);
	waitpid(g_pid, NULL, 0);
	double t_kill = now_s();
	usleep(300000); /* the backend notices and retries meanwhile */
	g_pid = daemon_spawn(g_argv, die_with_parent, NULL);
	bool up = g_pid > 0 && daemon_wait_port(g_pid, atoi(g_port));
	for (int i = 0; up && i < 500 && !sock_answers(); i++)
		usleep(10000);
	double t_up = now_s();
	CHECK(up, "the daemon starts again");

	/* a new transfer: it waits for the controller if it must, then succeeds */
	double t_ok = 0;
	int st = NKV_NIXL_ERR_BACKEND;
	while (up && now_s() - t_up < 10) {
		st = xfer1(b, NKV_NIXL_WRITE, src, LEN, 3000, 0);
		if (st == NKV_NIXL_SUCCESS) {
			t_ok = now_s();
			break;
		}
		usleep(5000);
	}
	/* the requests of before the kill: each ended (those never sent went after the restart) */
	int ok = 0, backend = 0, other = 0;
	for (int i = 0; i < NR; i++) {
		int rst = req[i] ? wait_done(b, req[i]) : NKV_NIXL_ERR_NOT_POSTED;
		ok += rst == NKV_NIXL_SUCCESS;
		backend += rst == NKV_NIXL_ERR_BACKEND;
		other += rst != NKV_NIXL_SUCCESS && rst != NKV_NIXL_ERR_BACKEND;
		nkv_nixl_release(b, req[i]);
	}
	double ended = now_s() - t_kill;
	CHECK(posted == NR && other == 0, "writes across the kill: %d posted, %d ok, %d NIXL_ERR_BACKEND, %d other",
	      posted, ok, backend, other);
	CHECK(ended < 10, "the writes across the kill ended %.1f s after it", ended);
	printf("nixl_func %s %s: restart: writes across the kill ended %.0f ms after it (%d ok, %d "
	       "NIXL_ERR_BACKEND); first success %.0f ms after the restart\n",
	       g_backend, g_transport, ended * 1e3, ok, backend, t_ok ? (t_ok - t_up) * 1e3 : -1.0);
	CHECK(t_ok && t_ok - t_up < 2.0, "a write succeeds within 2 s of the restart: %s after %.0f ms", S(st),
	      t_ok ? (t_ok - t_up) * 1e3 : -1.0);
	int good = 0;
	for (int i = 0; t_ok && i < NR; i++) {
		memset(dst + (size_t)i * LEN, 0, LEN);
		if (xfer1(b, NKV_NIXL_WRITE, src + (size_t)i * LEN, LEN, 3000 + (uint64_t)i, 0) == NKV_NIXL_SUCCESS &&
		    xfer1(b, NKV_NIXL_READ, dst + (size_t)i * LEN, LEN, 3000 + (uint64_t)i, 0) == NKV_NIXL_SUCCESS &&
		    memcmp(dst + (size_t)i * LEN, src + (size_t)i * LEN, LEN) == 0)
			good++;
	}
	CHECK(good == NR, "after the restart: %d of %d objects written and read back", good, NR);
	for (int i = 0; i < NR; i++)
		nkv_nixl_deregister(b, mds[i]);
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[2], "mem") && strcmp(argv[2], "rados")) ||
	    (strcmp(argv[3], "tcp") && strcmp(argv[3], "shm"))) {
		fprintf(stderr, "usage: %s PATH_TO_RADOS_NKV mem|rados tcp|shm\n", argv[0]);
		return 2;
	}
	g_backend = argv[2];
	g_transport = argv[3];
	if (access(argv[1], X_OK) != 0) {
		printf("nixl_func: no daemon binary at %s: skipped\n", argv[1]);
		return 77;
	}
	int rc = start_daemon(argv[1]);
	if (rc)
		return rc;
	/* the pool: private anonymous memory, so the shm controller can take it for zero copy */
	g_mem = mmap(NULL, POOL_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(g_mem != MAP_FAILED, "mmap pool");
	rc = strcmp(g_transport, "shm") == 0 ? nkv_connect_shm(g_sock, NULL, &g_raw)
					      : nkv_connect("127.0.0.1", g_port, g_subnqn, NULL, &g_raw);
	CHECK(rc == 0, "plain libnkv connect: %d", rc);
	if (rc == 0)
		rc = nkv_qpair_create(g_raw, 0, &g_rawqp);
	struct nkv_nixl *b = rc == 0 ? mk(1, NULL) : NULL;
	if (b) {
		struct nkv_nixl_md *pool = NULL;
		int st = nkv_nixl_register(b, NKV_NIXL_DRAM_SEG, (uint64_t)(uintptr_t)g_mem, POOL_BYTES, 0, NULL, 0, &pool);
		CHECK(st == NKV_NIXL_SUCCESS, "register the DRAM pool: %s", S(st));
		if (strcmp(g_transport, "shm") == 0)
			CHECK(nkv_nixl_md_zero_copy(pool) == 1, "shm: the pool is registered with the controller");
		else
			CHECK(nkv_nixl_is_shm(b) == 0, "tcp backend");
		printf("nixl_func %s %s: backend up\n", g_backend, g_transport);
		t_write_read(b);
		t_replace(b);
		t_refused(b);
		t_repost(b);
		t_query(b);
		t_inflight(b);
		t_release_inflight(b);
		t_post_no_copy(b);
		t_limit(b);
		t_errors(b);
		t_threads(b);
		t_no_stage_cache();
		if (strcmp(g_transport, "tcp") == 0)
			t_paths();
		t_restart(b); /* last: the plain libnkv queue pair above does not survive it */
		CHECK(nkv_nixl_deregister(b, pool) == NKV_NIXL_SUCCESS, "deregister the pool");
		nkv_nixl_destroy(b);
	}
	if (g_rawqp)
		nkv_qpair_destroy(g_rawqp);
	nkv_disconnect(g_raw);
	daemon_stop(g_pid, 20);
	unlink(g_sock);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
