/*
 * ctl_func - the control plane's C side (src/control) through nkv_ctl_call, the JSON contract the
 * gRPC glue calls, with targets in this process:
 *   ctl_func mem    a state file: every method, its errors, live changes seen through the loop
 *                   transport (I/O on a namespace added, 0Bh once removed), a restart from the file
 *   ctl_func rados  two gateways of one group on the real cluster: a change through A is served by
 *                   B within 1 s (a value stored through A read through B), 2 x 20 concurrent
 *                   changes through A and B all present, a restart of both gives the same state
 * Prints "ok - ..." / "FAIL - ...", then "N passed, N failed". Exit 0/1/77 (no cluster).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/ctl.h"
#include "nkv/nkv_spec.h"
#include "nkv/nkv_target.h"

static int g_pass, g_fail;
#define CHECK(cond, ...)                                                                                 \
	do {                                                                                             \
		if (cond) {                                                                              \
			g_pass++;                                                                        \
		} else {                                                                                 \
			g_fail++;                                                                        \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                      \
			printf(__VA_ARGS__);                                                             \
			printf("\n");                                                                    \
		}                                                                                        \
	} while (0)

static struct nkv_backend_conf g_bc;
static const char *g_pool = "nkv";
static char g_nqn[128];

/* Listener hooks: record what the control plane asked for. */
static int g_listens, g_unlistens;
static int hk_listen(void *arg, const char *addr, unsigned port, bool tls)
{
	(void)arg, (void)addr, (void)tls;
	g_listens++;
	return (int)port;
}
static int hk_unlisten(void *arg, const char *addr, unsigned port)
{
	(void)arg, (void)addr, (void)port;
	g_unlistens++;
	return 0;
}

static const char *EMPTY = "{\"epoch\":0,\"subsystems\":{},\"listeners\":{}}";

static struct nkv_ctl *mk(struct nkv_target *t, const char *gw, const char *group, const char *file)
{
	struct nkv_ctl_conf c = {.tgt = t, .hooks = {.tcp_listen = hk_listen, .tcp_unlisten = hk_unlisten},
				 .gateway = gw, .group = group, .group_pool = g_pool, .ceph_conf = g_bc.ceph_conf,
				 .keyring = g_bc.keyring, .client_id = g_bc.client_id, .state_file = file,
				 .backend = g_bc.name, .version = "test", .drain_ms = 5000, .poll_ms = 500};
	struct nkv_ctl *ctl = NULL;
	int rc = nkv_ctl_create(&c, EMPTY, &ctl);
	CHECK(rc == 0, "nkv_ctl_create(%s): %d", gw, rc);
	return ctl;
}

/* Call @method; @return its errno-style result, with the response in @out (free it) when wanted. */
static int call(struct nkv_ctl *ctl, const char *method, char **out, const char *fmt, ...)
{
	char req[2048], *resp = NULL, *err = NULL;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(req, sizeof(req), fmt, ap);
	va_end(ap);
	int rc = nkv_ctl_call(ctl, method, req, &resp, &err);
	if (rc < 0 && getenv("CTL_VERBOSE"))
		printf("  %s %s -> %d %s\n", method, req, rc, err ? err : "");
	CHECK((rc == 0) == (resp != NULL) && (rc < 0) == (err != NULL), "%s: result %d with resp %p err %p", method,
	      rc, (void *)resp, (void *)err);
	if (out)
		*out = resp;
	else
		free(resp);
	free(err);
	return rc;
}

/* A loop controller with one I/O queue on @t's subsystem g_nqn. */
struct host {
	struct nkv_loop_ctrlr *c;
	struct nkv_loop_qp *q;
};
static int host_open(struct nkv_target *t, struct host *h)
{
	int rc = nkv_loop_connect(t, g_nqn, "nqn.2026-12.io.test:host", &h->c);
	if (rc == 0 && (rc = nkv_loop_enable(h->c)) == 0)
		rc = nkv_loop_qp_create(h->c, 1, 16, &h->q);
	return rc;
}
static void host_close(struct host *h)
{
	if (h->q)
		nkv_loop_qp_destroy(h->q);
	nkv_loop_disconnect(h->c);
}
static unsigned kv(struct host *h, uint8_t opc, uint32_t nsid, const char *key, void *buf, uint32_t len)
{
	struct nkv_sqe s;
	struct nkv_cqe c;
	nkv_sqe_kv(&s, opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, 0);
	if (nkv_loop_qp_exec(h->q, &s, buf, len, &c, NULL) < 0)
		return 0xffff;
	return (nkv_get16(&c.status) >> 1) & 0x7ff; /* SCT and SC */
}

static void test_file(void)
{
	char file[256], *a = NULL, *b = NULL;
	struct nkv_target *t;
	struct host h = {0};
	snprintf(file, sizeof(file), "%s/ctl_func-%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	unlink(file);
	CHECK(nkv_target_create(&g_bc, &t) == 0, "target");
	struct nkv_ctl *ctl = mk(t, "gw-a", NULL, file);
	if (!ctl)
		return;
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"max_namespaces\":3}", g_nqn, g_pool) == 0,
	      "CreateSubsystem");
	CHECK(nkv_target_subsys(t, g_nqn) != NULL, "the subsystem is live");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\"}", g_nqn, g_pool) == -EEXIST, "again: -EEXIST");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"not-an-nqn\",\"pool\":\"%s\"}", g_pool) == -EINVAL, "bad NQN: -EINVAL");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"nqn.2026-12.io.test:x\"}") == -EINVAL, "no pool: -EINVAL");
	CHECK(call(ctl, "Frobnicate", NULL, "{}") == -ENOSYS, "unknown method: -ENOSYS");
	CHECK(call(ctl, "GetSubsystem", NULL, "[1,2]") == -EINVAL, "a request that is not an object: -EINVAL");
	CHECK(call(ctl, "AddNamespace", &a, "{\"nqn\":\"%s\",\"nsid\":0,\"rados_namespace\":\"ctl-a\",\"max_value\":\"1048576\"}", g_nqn) == 0 &&
		      a && strstr(a, "\"nsid\":1") && strstr(a, "\"max_value\":1048576"), "AddNamespace: lowest free NSID 1: %s", a ? a : "");
	free(a);
	CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":1}", g_nqn) == -EEXIST, "NSID 1 again: -EEXIST");
	CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":2000}", g_nqn) == -EINVAL, "NSID 2000: -EINVAL");
	CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":\"-1\"}", g_nqn) == -EINVAL, "NSID -1: -EINVAL");
	CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"max_value\":\"99999999999\"}", g_nqn) == -EINVAL,
	      "a max value above the cluster's: -EINVAL");
	CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"nqn.2026-12.io.test:none\"}") == -ENOENT, "no subsystem: -ENOENT");
	CHECK(host_open(t, &h) == 0, "a host connects (loop)");
	char v[64] = "value through the control plane", r[64] = {0};
	CHECK(kv(&h, NKV_KV_STORE, 1, "k1", v, sizeof(v)) == 0 && kv(&h, NKV_KV_RETRIEVE, 1, "k1", r, sizeof(r)) == 0 &&
		      memcmp(v, r, sizeof(v)) == 0, "Store/Retrieve on the namespace added live");
	CHECK(call(ctl, "SetNamespaceReadOnly", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"read_only\":true}", g_nqn) == 0 &&
		      kv(&h, NKV_KV_STORE, 1, "k2", v, sizeof(v)) == ((NKV_SCT_GENERIC << 8) | NKV_SC_NS_WRITE_PROTECTED),
	      "read-only live: Store answers 20h");
	CHECK(call(ctl, "SetNamespaceMaxValue", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"max_value\":\"32\"}", g_nqn) == 0 &&
		      call(ctl, "SetNamespaceReadOnly", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"read_only\":false}", g_nqn) == 0 &&
		      kv(&h, NKV_KV_STORE, 1, "k2", v, sizeof(v)) == ((NKV_SCT_GENERIC << 8) | NKV_SC_KV_INVALID_VALUE_SIZE),
	      "max value 32 live: a 64-byte Store answers 85h");
	CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":2}", g_nqn) == 0 &&
		      call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":3}", g_nqn) == 0 &&
		      call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":4}", g_nqn) == -EPERM,
	      "max_namespaces 3: the fourth is refused (-EPERM)");
	CHECK(call(ctl, "RemoveNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":3}", g_nqn) == 0 &&
		      kv(&h, NKV_KV_RETRIEVE, 3, "k1", r, sizeof(r)) == ((NKV_SCT_GENERIC << 8) | NKV_SC_INVALID_NS),
	      "removed live: 0Bh");
	CHECK(call(ctl, "RemoveNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":3}", g_nqn) == -ENOENT, "removed again: -ENOENT");
	CHECK(kv(&h, NKV_KV_RETRIEVE, 1, "k1", r, sizeof(r)) == 0, "NSID 1 untouched by the removal of 3");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:other\"}", g_nqn) == 0,
	      "AllowHost (another host)");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:h2\",\"dhchap_key\":\"DHHC-1:00:nope:\"}",
		   g_nqn) == -EINVAL, "a malformed DH-HMAC-CHAP secret: -EINVAL");
	CHECK(call(ctl, "ListHosts", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && strstr(a, "nqn.2026-12.io.test:other") &&
		      !strstr(a, "DHHC"), "ListHosts names the host, never a secret");
	free(a);
	CHECK(call(ctl, "DisallowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:nobody\"}", g_nqn) == -ENOENT,
	      "DisallowHost of a host not allowed: -ENOENT");
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"127.0.0.1\",\"port\":4999}") == 0 && g_listens == 1,
	      "AddListener: this gateway listens");
	CHECK(call(ctl, "AddListener", NULL, "{\"gateway\":\"gw-other\",\"address\":\"127.0.0.1\",\"port\":4998}") == 0 &&
		      g_listens == 1, "AddListener of another gateway: not here");
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"127.0.0.1\",\"port\":70000}") == -EINVAL, "port 70000: -EINVAL");
	CHECK(call(ctl, "GetNamespaceStats", &a, "{\"nqn\":\"%s\",\"nsid\":1}", g_nqn) == 0 && a &&
		      strstr(a, "\"stores\":3") && strstr(a, "\"retrieves\":2") && strstr(a, "\"errors\":2"), "GetNamespaceStats counts this gateway's commands: %s",
	      a ? a : "");
	free(a);
	CHECK(call(ctl, "GetGatewayInfo", &a, "{}") == 0 && a && strstr(a, "\"name\":\"gw-a\"") && strstr(a, "file:"),
	      "GetGatewayInfo: %s", a ? a : "");
	free(a);
	host_close(&h);
	CHECK(call(ctl, "ListSubsystems", &a, "{}") == 0 && a, "ListSubsystems");
	nkv_ctl_destroy(ctl);
	/* A restart: a fresh target, the same file: the state comes back and is applied. */
	nkv_target_destroy(t);
	CHECK(nkv_target_create(&g_bc, &t) == 0, "target again");
	ctl = mk(t, "gw-a", NULL, file);
	CHECK(ctl && call(ctl, "ListSubsystems", &b, "{}") == 0 && b && a && strcmp(a, b) == 0,
	      "after a restart the state is the same:\n  %s\n  %s", a ? a : "", b ? b : "");
	CHECK(nkv_target_subsys(t, g_nqn) != NULL && g_listens == 2, "and applied (subsystem, listener)");
	CHECK(host_open(t, &h) == 0 && kv(&h, NKV_KV_RETRIEVE, 1, "k1", r, sizeof(r)) == ((NKV_SCT_GENERIC << 8) | NKV_SC_KV_KEY_NOT_EXIST),
	      "NSID 1 served again (the mem backend forgot its values: 87h, not 0Bh)");
	host_close(&h);
	CHECK(call(ctl, "DeleteSubsystem", NULL, "{\"nqn\":\"%s\"}", g_nqn) == 0 && !nkv_target_subsys(t, g_nqn),
	      "DeleteSubsystem: gone live");
	free(a);
	free(b);
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(t);
	unlink(file);
}

/* ---- two gateways of one group ------------------------------------------------------------------ */

struct racer {
	struct nkv_ctl *ctl;
	int id, ok;
};
static void *race(void *arg)
{
	struct racer *r = arg;
	for (int i = 0; i < 20; i++)
		r->ok += call(r->ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:r%d-%d\"}", g_nqn,
			      r->id, i) == 0;
	return NULL;
}

static void test_group(void)
{
	char group[64], *a = NULL, *b = NULL;
	struct nkv_target *ta, *tb;
	struct host ha = {0}, hb = {0};
	snprintf(group, sizeof(group), "ctl-func-%d-%ld", (int)getpid(), (long)time(NULL));
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL), *B = mk(tb, "gw-b", group, NULL);
	if (!A || !B)
		return;
	uint64_t t0 = nkv_now_ms();
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0 &&
		      call(A, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"rados_namespace\":\"%s\"}", g_nqn, group) == 0,
	      "create a subsystem and a namespace through gateway A");
	uint64_t seen = 0;
	while (nkv_now_ms() - t0 < 5000 && !seen) {
		struct nkv_subsys *ss = nkv_target_subsys(tb, g_nqn);
		struct nkv_ns_stats st;
		if (ss && nkv_ns_stats(ss, 1, &st) == 0)
			seen = nkv_now_ms() - t0;
		else
			usleep(10000);
	}
	printf("gateway B serves the namespace %llu ms after A's change\n", (unsigned long long)seen);
	CHECK(seen && seen <= 1000, "gateway B serves it within 1 s (%llu ms)", (unsigned long long)seen);
	char v[4096], r[4096];
	for (size_t i = 0; i < sizeof(v); i++)
		v[i] = (char)(i * 7 + 3);
	CHECK(host_open(ta, &ha) == 0 && host_open(tb, &hb) == 0, "a host on each gateway");
	CHECK(kv(&ha, NKV_KV_STORE, 1, "shared", v, sizeof(v)) == 0 && kv(&hb, NKV_KV_RETRIEVE, 1, "shared", r, sizeof(r)) == 0 &&
		      memcmp(v, r, sizeof(v)) == 0, "stored through A, the same value retrieved through B");
	host_close(&ha);
	host_close(&hb);
	/* Concurrent changes through both gateways: none may be lost. */
	struct racer ra = {A, 0, 0}, rb = {B, 1, 0};
	pthread_t x, y;
	pthread_create(&x, NULL, race, &ra);
	pthread_create(&y, NULL, race, &rb);
	pthread_join(x, NULL);
	pthread_join(y, NULL);
	CHECK(ra.ok == 20 && rb.ok == 20, "40 concurrent AllowHost calls succeeded (%d + %d)", ra.ok, rb.ok);
	CHECK(call(B, "ListHosts", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0, "ListHosts");
	int present = 0;
	for (int id = 0; id < 2; id++)
		for (int i = 0; i < 20; i++) {
			char h[80];
			snprintf(h, sizeof(h), "\"nqn.2026-12.io.test:r%d-%d\"", id, i);
			present += a && strstr(a, h) != NULL;
		}
	CHECK(present == 40, "all 40 hosts are in the group's state (%d)", present);
	free(a);
	a = NULL;
	/* Restart both: the state comes back exactly. */
	CHECK(call(A, "ListSubsystems", &a, "{}") == 0, "state before");
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two fresh targets");
	A = mk(ta, "gw-a", group, NULL);
	B = mk(tb, "gw-b", group, NULL);
	CHECK(A && B && call(B, "ListSubsystems", &b, "{}") == 0 && a && b && strcmp(a, b) == 0,
	      "after restarting both, the state is the same");
	CHECK(nkv_target_subsys(ta, g_nqn) && nkv_target_subsys(tb, g_nqn), "and both serve it");
	CHECK(A && call(A, "DeleteSubsystem", NULL, "{\"nqn\":\"%s\"}", g_nqn) == 0, "DeleteSubsystem through A");
	t0 = nkv_now_ms();
	while (nkv_now_ms() - t0 < 5000 && nkv_target_subsys(tb, g_nqn))
		usleep(10000);
	CHECK(!nkv_target_subsys(tb, g_nqn), "B dropped it (%llu ms)", (unsigned long long)(nkv_now_ms() - t0));
	free(a);
	free(b);
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
}

int main(int argc, char **argv)
{
	const char *be = argc > 1 ? argv[1] : "mem";
	snprintf(g_nqn, sizeof(g_nqn), "nqn.2026-12.io.rados-nkv:ctl-func-%d", (int)getpid());
	g_bc.name = be;
	if (strcmp(be, "rados") == 0) {
		if (!getenv("NKV_CEPH_CONF")) {
			printf("skip: no cluster (NKV_CEPH_CONF unset)\n");
			return getenv("NKV_REQUIRE_RADOS") && atoi(getenv("NKV_REQUIRE_RADOS")) ? 1 : 77;
		}
		g_bc.ceph_conf = getenv("NKV_CEPH_CONF");
		g_bc.keyring = getenv("NKV_CEPH_KEYRING");
		g_bc.client_id = getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin";
		g_pool = getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv";
		test_group();
	} else {
		test_file();
	}
	printf("%d passed, %d failed\n", g_pass, g_fail);
	return g_fail ? 1 : 0;
}
