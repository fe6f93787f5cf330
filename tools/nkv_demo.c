/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nkv-demo - the foundation end to end in one process: build a target over `mem` or `rados`,
 * export pool $NKV_CEPH_POOL (default "nkv") as a subsystem with one KV namespace (RADOS namespace
 * "demo"), then Store, Retrieve (whole and truncated), Exist, List and Delete through the loop
 * transport, printing each CQE. With `rados` the stored object can be read back with
 *   rados -p nkv -N demo get 6770756b65793031 -
 * Usage: nkv-demo [mem|rados]   (rados reads $NKV_CEPH_CONF, $NKV_CEPH_KEYRING, $NKV_CEPH_USER)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nkv/nkv_target.h"

static struct nkv_loop_qp *g_qp;

static unsigned run(const char *what, uint8_t opc, const char *key, uint32_t size, unsigned opts, void *buf,
		    uint32_t len, uint32_t *xfer)
{
	struct nkv_sqe sqe;
	struct nkv_cqe cqe;
	uint32_t x = 0;

	nkv_sqe_kv(&sqe, opc, 1, (const uint8_t *)key, (unsigned)strlen(key), size, opts);
	if (nkv_loop_qp_exec(g_qp, &sqe, buf, len, &cqe, &x) < 0) {
		fprintf(stderr, "%s: command did not complete\n", what);
		exit(1);
	}
	unsigned st = (nkv_get16(&cqe.status) >> 1) & 0x7ff;
	printf("%-28s status %02x/%02x  dw0 %-8u bytes %u\n", what, st >> 8, st & 0xff, nkv_get32(&cqe.dw0), x);
	if (xfer)
		*xfer = x;
	return st;
}

int main(int argc, char **argv)
{
	const char *backend = argc > 1 ? argv[1] : "mem";
	const char *pool = getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv";
	struct nkv_backend_conf bc = {.name = backend, .ceph_conf = getenv("NKV_CEPH_CONF"),
				      .keyring = getenv("NKV_CEPH_KEYRING"), .client_id = getenv("NKV_CEPH_USER")};
	struct nkv_ns_conf nc = {.nsid = 1, .rados_ns = "demo"};
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	struct nkv_loop_ctrlr *c;
	char buf[256];
	uint32_t x;
	int rc;

	if ((rc = nkv_target_create(&bc, &tgt)) < 0) {
		fprintf(stderr, "nkv-demo: cannot start the %s backend: %s\n", backend, strerror(-rc));
		return 1;
	}
	if ((rc = nkv_subsys_add(tgt, "nqn.2026-11.io.rados-nkv:demo", pool, &ss)) < 0 || (rc = nkv_ns_add(ss, &nc)) < 0 ||
	    (rc = nkv_loop_connect(tgt, "nqn.2026-11.io.rados-nkv:demo", "nqn.demo-host", &c)) < 0 ||
	    (rc = nkv_loop_enable(c)) < 0 || (rc = nkv_loop_qp_create(c, 1, 32, &g_qp)) < 0) {
		fprintf(stderr, "nkv-demo: setup failed on pool %s: %s\n", pool, strerror(-rc));
		return 1;
	}
	printf("backend %s, pool %s, RADOS namespace demo, NSID 1\n", backend, pool);
	const char *val = "KV cache block for prefix gpukey01";
	run("Store gpukey01", NKV_KV_STORE, "gpukey01", (uint32_t)strlen(val), 0, (void *)val, (uint32_t)strlen(val), NULL);
	run("Store gpukey01 (create-only)", NKV_KV_STORE, "gpukey01", 1, NKV_STORE_MUST_NOT_EXIST, "x", 1, NULL);
	memset(buf, 0, sizeof(buf));
	run("Retrieve gpukey01", NKV_KV_RETRIEVE, "gpukey01", sizeof(buf), 0, buf, sizeof(buf), &x);
	printf("  value: \"%.*s\"\n", (int)x, buf);
	run("Retrieve gpukey01 (8 B buf)", NKV_KV_RETRIEVE, "gpukey01", 8, 0, buf, 8, NULL);
	run("Exist gpukey02", NKV_KV_EXIST, "gpukey02", 0, 0, NULL, 0, NULL);
	run("Store gpukey02", NKV_KV_STORE, "gpukey02", 3, 0, "abc", 3, NULL);
	run("List from \"gpu\"", NKV_KV_LIST, "gpu", sizeof(buf), 0, buf, sizeof(buf), &x);
	for (uint32_t i = 0, off = 4; i < nkv_get32(buf); i++) {
		unsigned kl = nkv_get16(buf + off);
		printf("  key %u: %.*s\n", i, (int)kl, buf + off + 2);
		off += nkv_list_entry_size(kl);
	}
	run("Delete gpukey02", NKV_KV_DELETE, "gpukey02", 0, 0, NULL, 0, NULL);
	if (strcmp(backend, "rados") == 0)
		printf("inspect: rados -p %s -N demo get 6770756b65793031 -\n", pool);
	nkv_loop_disconnect(c);
	nkv_target_destroy(tgt);
	return 0;
}
