/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeout_func.c - a stalled cluster never hangs a command. The test makes a pool whose placement
 * groups cannot go active (size 2 / min_size 2 on a one-OSD cluster), so every op on it blocks in
 * RADOS; Store, Retrieve, Delete, Exist and List there must complete within the per-op timeout with
 * KV Namespace Not Ready (82h) and DNR clear, so hosts retry, while a healthy pool served by the
 * same target keeps working. Usage: timeout_func rados
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define OP_TIMEOUT_S 3
#define STALL_POOL "nkv-stall"
#define STALL_NQN "nqn.2026-11.io.rados-nkv:stall"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "rados") != 0) {
		printf("timeout_func: only meaningful on the rados backend: skipped\n");
		return 77;
	}
	setenv("NKV_TEST_OP_TIMEOUT", "3", 1);
	h_init(argc, argv, "timeout_func");
	h_add_ns(1, "t", 0, false);

	/* A pool that can never serve I/O on a one-OSD cluster (idempotent: rerunning is fine). */
	CHECK(h_ceph_tool("ceph", "osd", "pool", "create", STALL_POOL, "1", "1", (char *)NULL) == 0, "create " STALL_POOL);
	CHECK(h_ceph_tool("ceph", "osd", "pool", "set", STALL_POOL, "size", "2", (char *)NULL) == 0, "size 2");
	CHECK(h_ceph_tool("ceph", "osd", "pool", "set", STALL_POOL, "min_size", "2", (char *)NULL) == 0, "min_size 2");

	struct nkv_subsys *stall;
	CHECK(nkv_subsys_add(H.tgt, STALL_NQN, STALL_POOL, &stall) == 0, "subsystem on " STALL_POOL);
	struct nkv_ns_conf nc = {.nsid = 1, .rados_ns = H.rados_ns};
	CHECK(nkv_ns_add(stall, &nc) == 0, "namespace on " STALL_POOL);

	struct h_ctrl *good = h_connect();
	struct nkv_loop_ctrlr *bad;
	struct h_qp *gq;
	struct nkv_loop_qp *bq;
	uint8_t buf[64];
	uint32_t size = 0;
	CHECK(nkv_loop_connect(H.tgt, STALL_NQN, HOSTNQN, &bad) == 0 && nkv_loop_enable(bad) == 0, "connect stall");
	CHECK((gq = h_qp_create(good, 1, 8)) != NULL && nkv_loop_qp_create(bad, 1, 8, &bq) == 0, "queues");

	const uint8_t opcs[] = {NKV_KV_STORE, NKV_KV_RETRIEVE, NKV_KV_DELETE, NKV_KV_EXIST, NKV_KV_LIST};
	for (size_t i = 0; i < sizeof(opcs); i++) {
		struct nkv_sqe s;
		struct nkv_cqe cqe;
		memcpy(buf, "stalled!", 8);
		nkv_sqe_kv(&s, opcs[i], 1, (const uint8_t *)"key", 3, 8, 0);
		double t0 = now_s();
		int rc = nkv_loop_qp_exec(bq, &s, buf, 8, &cqe, NULL);
		double dt = now_s() - t0;
		CHECK(rc == 0 && h_status(&cqe) == SC(0, NKV_SC_KV_NS_NOT_READY) && !h_dnr(&cqe),
		      "opc %02x on an inactive pool: status %03x dnr %d", opcs[i], h_status(&cqe), h_dnr(&cqe));
		CHECK(dt >= OP_TIMEOUT_S - 0.5 && dt < OP_TIMEOUT_S + 10, "opc %02x completed after %.1f s", opcs[i], dt);
		printf("opc %02x: status %03x after %.1f s\n", opcs[i], h_status(&cqe), dt);
		/* the healthy pool on the same target is unaffected */
		CHECK(h_kv(gq, NKV_KV_STORE, 1, "ok", 2, 2, 0, "ok", 2, NULL, NULL) == 0 &&
			      h_kv(gq, NKV_KV_RETRIEVE, 1, "ok", 2, 8, 0, buf, 8, &size, NULL) == 0 && size == 2,
		      "healthy pool during the stall");
	}
	/* A Retrieve into a large buffer is read in ranges (cut-through): the watchdog cancels every
	 * range in flight at the one deadline, and the command ends like the others. */
	{
		const uint32_t big = 8u << 20;
		uint8_t *bbuf = malloc(big);
		struct nkv_sqe s;
		struct nkv_cqe cqe;
		nkv_sqe_kv(&s, NKV_KV_RETRIEVE, 1, (const uint8_t *)"key", 3, big, 0);
		double t0 = now_s();
		int rc = nkv_loop_qp_exec(bq, &s, bbuf, big, &cqe, NULL);
		double dt = now_s() - t0;
		CHECK(rc == 0 && h_status(&cqe) == SC(0, NKV_SC_KV_NS_NOT_READY) && !h_dnr(&cqe),
		      "8 MiB Retrieve on an inactive pool: status %03x dnr %d", h_status(&cqe), h_dnr(&cqe));
		CHECK(dt >= OP_TIMEOUT_S - 0.5 && dt < OP_TIMEOUT_S + 10, "8 MiB Retrieve completed after %.1f s", dt);
		printf("8 MiB Retrieve: status %03x after %.1f s\n", h_status(&cqe), dt);
		/* the healthy pool's large Retrieves (read in ranges too) are unaffected */
		for (uint32_t i = 0; i < big; i++)
			bbuf[i] = (uint8_t)(i * 7);
		CHECK(h_kv(gq, NKV_KV_STORE, 1, "big", 3, big, 0, bbuf, big, NULL, NULL) == 0, "store 8 MiB on the healthy pool");
		memset(bbuf, 0, big);
		uint32_t xfer = 0, bad_at = big;
		CHECK(h_kv(gq, NKV_KV_RETRIEVE, 1, "big", 3, big, 0, bbuf, big, &size, &xfer) == 0 && size == big && xfer == big,
		      "retrieve 8 MiB on the healthy pool: size %u xfer %u", size, xfer);
		for (uint32_t i = 0; i < big && bad_at == big; i++)
			if (bbuf[i] != (uint8_t)(i * 7))
				bad_at = i;
		CHECK(bad_at == big, "8 MiB value from the healthy pool differs at byte %u", bad_at);
		free(bbuf);
	}
	nkv_loop_disconnect(bad);
	h_qp_destroy(gq);
	h_disconnect(good);
	CHECK(h_ceph_tool("ceph", "osd", "pool", "rm", STALL_POOL, STALL_POOL, "--yes-i-really-really-mean-it", (char *)NULL) == 0,
	      "remove " STALL_POOL);
	return h_finish();
}
