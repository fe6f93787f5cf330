/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_bench.c - what a cache namespace costs on the command path (docs/cache.md 2.6): p50 and p99
 * of 4 KiB Store (new key), Store (replacing a key), Retrieve and Exist at queue depth 1, on a plain
 * namespace and on a cache namespace (default TTL, capacity and pin quota set, LRU touches on) of
 * the same target, in the same process, over NVMe/TCP on loopback through libnkv. Each pass
 * alternates the two namespaces op by op; the report gives each point's median p50 and the ratio cache/plain
 * with its min-max over the repetitions.
 *
 *   cache_bench [-c CEPH_CONF] [-k KEYRING] [-i CLIENT_ID] [-p POOL] [-n OPS] [-r REPS] [-s SIZE]
 *
 * Without -c the mem backend is used (the CPU cost alone). Keys are removed at the end.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nkv/nkv.h"
#include "nkv/nkv_target.h"

#define SUBNQN "nqn.2026-11.io.rados-nkv:cache-bench"
#define MAX_REPS 32
enum { P_STORE, P_REPLACE, P_RETRIEVE, P_EXIST, P_COUNT };
static const char *const g_names[P_COUNT] = {"store (new key)", "store (replace)", "retrieve", "exist"};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static uint64_t pct(uint64_t *v, unsigned n, unsigned p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(size_t)n * p / 100 < n ? (size_t)n * p / 100 : n - 1];
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "cache_bench: %s: %s\n", what, strerror(-rc));
	exit(1);
}

/* One op of kind @p on @nsid, key @i of repetition @rep. @return its latency in ns. */
static uint64_t one(struct nkv_qpair *qp, uint32_t nsid, unsigned p, unsigned rep, unsigned i, uint8_t *buf,
		    uint32_t size)
{
	char key[32]; /* at most 16 bytes used */
	snprintf(key, sizeof(key), "r%u-%u", rep, i);
	uint64_t t0 = now_ns();
	int rc;
	switch (p) {
	case P_STORE:
	case P_REPLACE:
		buf[0] = (uint8_t)i;
		rc = nkv_store(qp, nsid, key, (unsigned)strlen(key), buf, size, 0, NULL);
		break;
	case P_RETRIEVE: {
		uint32_t vs = 0;
		rc = nkv_retrieve(qp, nsid, key, (unsigned)strlen(key), buf, size, &vs, NULL);
		if (rc == 0 && (vs != size || buf[0] != (uint8_t)i))
			rc = -EIO;
		break;
	}
	default:
		rc = nkv_exist(qp, nsid, key, (unsigned)strlen(key), NULL);
	}
	uint64_t t = now_ns() - t0;
	if (rc < 0)
		die(g_names[p], rc);
	return t;
}

/* @n ops of kind @p on both namespaces, alternating op by op (and which goes first), so that load
 * changes on the machine fall on both alike: latencies into @lat[0] (plain) and @lat[1] (cache). */
static void pass(struct nkv_qpair *qp, unsigned p, unsigned rep, unsigned n, uint8_t *buf, uint32_t size,
		 uint64_t *lat[2])
{
	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < 2; k++) {
			unsigned w = (i + k) % 2;
			lat[w][i] = one(qp, w + 1, p, rep, i, buf, size);
		}
}

int main(int argc, char **argv)
{
	struct nkv_backend_conf bc = {.name = "mem"};
	const char *pool = "nkv";
	unsigned n = 2000, reps = 5;
	uint32_t size = 4096;
	int opt, rc;

	while ((opt = getopt(argc, argv, "c:k:i:p:n:r:s:")) != -1) {
		switch (opt) {
		case 'c': bc.name = "rados"; bc.ceph_conf = optarg; break;
		case 'k': bc.keyring = optarg; break;
		case 'i': bc.client_id = optarg; break;
		case 'p': pool = optarg; break;
		case 'n': n = (unsigned)atoi(optarg); break;
		case 'r': reps = (unsigned)atoi(optarg); break;
		case 's': size = (uint32_t)atoi(optarg); break;
		default:
			fprintf(stderr, "usage: cache_bench [-c CEPH_CONF] [-k KEYRING] [-i ID] [-p POOL] [-n OPS] [-r REPS] "
					"[-s SIZE]\n");
			return 64;
		}
	}
	if (!n || !reps || reps > MAX_REPS || !size || size > (1u << 20)) {
		fprintf(stderr, "cache_bench: -n > 0, -r 1..%d, -s 1..1 MiB\n", MAX_REPS);
		return 64;
	}
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	struct nkv_tcp *tcp;
	char plain[64], cached[64], port[16];
	snprintf(plain, sizeof(plain), "cache-bench-plain-%ld", (long)getpid());
	snprintf(cached, sizeof(cached), "cache-bench-cache-%ld", (long)getpid());
	/* Every cache feature on, none of them limiting: default TTL, capacity and pin quota far above
	 * what the run stores, LRU with touches (the first hit on each entry writes its last use). */
	struct nkv_cache_policy pol = {.capacity_bytes = 1ull << 40, .pin_quota_bytes = 1ull << 40, .default_ttl_s = 86400,
				       .bytes_per_token = 131072};
	struct nkv_ns_conf n1 = {.nsid = 1, .rados_ns = plain}, n2 = {.nsid = 2, .rados_ns = cached, .cache = &pol};
	struct nkv_tcp_conf tc = {.reactors = 1};
	if ((rc = nkv_target_create(&bc, &tgt)) < 0)
		die("target", rc);
	if ((rc = nkv_subsys_add(tgt, SUBNQN, pool, &ss)) < 0 || (rc = nkv_ns_add(ss, &n1)) < 0 ||
	    (rc = nkv_ns_add(ss, &n2)) < 0)
		die("subsystem/namespaces", rc);
	if ((rc = nkv_tcp_create(tgt, &tc, &tcp)) < 0 || (rc = nkv_tcp_listen(tcp, "127.0.0.1", "0", true)) < 0)
		die("tcp", rc);
	snprintf(port, sizeof(port), "%d", rc);
	struct nkv_conn_opts o = {.timeout_ms = 60000};
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	if ((rc = nkv_connect("127.0.0.1", port, SUBNQN, &o, &ctrl)) < 0 || (rc = nkv_qpair_create(ctrl, 4, &qp)) < 0)
		die("connect", rc);

	uint8_t *buf = calloc(1, size);
	uint64_t *lat[2] = {calloc(n, sizeof(uint64_t)), calloc(n, sizeof(uint64_t))};
	static double p50[2][P_COUNT][MAX_REPS], p99[2][P_COUNT][MAX_REPS];
	if (!buf || !lat[0] || !lat[1])
		die("memory", -ENOMEM);
	printf("cache_bench: backend %s, %u B values, QD 1, %u ops per point, %u repetitions (NVMe/TCP, loopback)\n",
	       bc.name, size, n, reps);
	for (unsigned r = 0; r < reps; r++)
		for (unsigned p = 0; p < P_COUNT; p++) {
			pass(qp, p, r, n, buf, size, lat);
			for (unsigned w = 0; w < 2; w++) {
				p99[w][p][r] = pct(lat[w], n, 99) / 1000.0;
				p50[w][p][r] = pct(lat[w], n, 50) / 1000.0;
			}
		}
	printf("%-16s %12s %12s %12s %12s %22s\n", "op", "plain p50", "cache p50", "plain p99", "cache p99",
	       "p50 ratio (min-max)");
	for (unsigned p = 0; p < P_COUNT; p++) {
		double ratio[MAX_REPS], m[2][2];
		for (unsigned r = 0; r < reps; r++)
			ratio[r] = p50[1][p][r] / p50[0][p][r];
		for (unsigned w = 0; w < 2; w++) {
			qsort(p50[w][p], reps, sizeof(double), cmp_d);
			qsort(p99[w][p], reps, sizeof(double), cmp_d);
			m[w][0] = p50[w][p][reps / 2];
			m[w][1] = p99[w][p][reps / 2];
		}
		qsort(ratio, reps, sizeof(double), cmp_d);
		printf("%-16s %10.1fus %10.1fus %10.1fus %10.1fus %8.3fx (%.3f-%.3f)\n", g_names[p], m[0][0], m[1][0],
		       m[0][1], m[1][1], ratio[reps / 2], ratio[0], ratio[reps - 1]);
	}
	/* clean up: every key of both namespaces */
	for (unsigned r = 0; r < reps; r++)
		for (unsigned i = 0; i < n; i++) {
			char key[32]; /* at most 16 bytes used */
			snprintf(key, sizeof(key), "r%u-%u", r, i);
			for (uint32_t ns = 1; ns <= 2; ns++)
				nkv_delete(qp, ns, key, (unsigned)strlen(key), NULL);
		}
	nkv_qpair_destroy(qp);
	nkv_disconnect(ctrl);
	nkv_tcp_destroy(tcp, 5000);
	nkv_target_destroy(tgt);
	free(buf);
	free(lat[0]);
	free(lat[1]);
	return 0;
}
