/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_func - the control plane's C side (src/control) through nkv_ctl_call, the JSON contract the
 * gRPC glue calls, with targets in this process:
 *   ctl_func mem    a state file: every method, its errors, live changes seen through the loop
 *                   transport (I/O on a namespace added, 0Bh once removed), a restart from the file
 *                   and cache namespaces: policies in AddNamespace (bad values refused), changed
 *                   live with SetCachePolicy (whole or some fields), GetUsage after Store TTLs,
 *                   the policy back after a restart, a malformed stored policy refused; a CNTLID
 *                   range honoured and a full one refusing Connect; no ANA states without a group
 *   ctl_func rados  two gateways of one group on the real cluster: a change through A is served by
 *                   B within 1 s (a value stored through A read through B), 2 x 20 concurrent
 *                   changes through A and B all present, a restart of both gives the same state;
 *                   a cache namespace added through A runs B's policy, a policy change through B
 *                   reaches A, usage stored through A is seen through B, and a restart keeps it;
 *                   multipath: disjoint controller ID ranges (kept across a restart, four gateways
 *                   joining at once, 32 held, hostile g/ entries), the same namespace IDs through
 *                   both; ANA: Identify fields, log 0Ch, SetAnaState through B notifying A's
 *                   controllers, 0302h through the drained gateway, hostile requests, a flood
 * Prints "ok - ..." / "FAIL - ...", then "N passed, N failed". Exit 0/1/77 (no cluster).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/ctl.h"
#include "control/ctl_int.h"
#include "nkv/nkv_spec.h"
#include "nkv/nkv_target.h"

#ifdef NKV_HAVE_RADOS
#include <rados/librados.h>
#endif

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

/* nkv_ctl_create with the test's hooks and cluster. @return its result. */
static int mk_rc(struct nkv_target *t, const char *gw, const char *group, const char *file, struct nkv_ctl **ctl)
{
	struct nkv_ctl_conf c = {.tgt = t, .hooks = {.tcp_listen = hk_listen, .tcp_unlisten = hk_unlisten},
				 .gateway = gw, .group = group, .group_pool = g_pool, .ceph_conf = g_bc.ceph_conf,
				 .keyring = g_bc.keyring, .client_id = g_bc.client_id, .state_file = file,
				 .backend = g_bc.name, .version = "test", .drain_ms = 5000, .poll_ms = 500};
	*ctl = NULL;
	return nkv_ctl_create(&c, EMPTY, ctl);
}

static struct nkv_ctl *mk(struct nkv_target *t, const char *gw, const char *group, const char *file)
{
	struct nkv_ctl *ctl = NULL;
	int rc = mk_rc(t, gw, group, file, &ctl);
	CHECK(rc == 0, "nkv_ctl_create(%s): %d", gw, rc);
	return ctl;
}

/* A new target and gateway "gw-a" keeping its state in a fresh file $TMPDIR/ctl_func-@tag-PID.json
 * (its name into @file). @return the control plane, or NULL (counted as a failure). */
static struct nkv_ctl *mk_file(const char *tag, char *file, size_t len, struct nkv_target **t)
{
	snprintf(file, len, "%s/ctl_func-%s%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag, (int)getpid());
	unlink(file);
	CHECK(nkv_target_create(&g_bc, t) == 0, "target");
	return *t ? mk(*t, "gw-a", NULL, file) : NULL;
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

/* Identify @cns (@nsid, @csi) through @c's admin queue into @buf (4096 bytes). @return SCT|SC. */
static unsigned identify(struct nkv_loop_ctrlr *c, unsigned cns, uint32_t nsid, unsigned csi, void *buf)
{
	struct nkv_sqe s = {.opc = NKV_ADM_IDENTIFY};
	struct nkv_cqe cq;
	nkv_put32(&s.nsid, nsid);
	nkv_put32(&s.cdw10, cns);
	nkv_put32(&s.cdw11, csi << 24);
	memset(buf, 0, NKV_IDENTIFY_SIZE);
	if (nkv_loop_qp_exec(nkv_loop_admin_qp(c), &s, buf, NKV_IDENTIFY_SIZE, &cq, NULL) < 0)
		return 0xffff;
	return (nkv_get16(&cq.status) >> 1) & 0x7ff;
}

/* A loop controller on @t's g_nqn, enabled; its CNTLID in *@id (Identify Controller). */
static int ctrlr_open(struct nkv_target *t, struct nkv_loop_ctrlr **c, unsigned *id)
{
	static uint8_t buf[NKV_IDENTIFY_SIZE];
	int rc = nkv_loop_connect(t, g_nqn, "nqn.2026-12.io.test:host", c);
	if (rc == 0 && (rc = nkv_loop_enable(*c)) == 0 && identify(*c, NKV_CNS_CTRLR, 0, 0, buf) != 0)
		rc = -EIO;
	*id = rc == 0 ? nkv_get16(&((struct nkv_id_ctrlr *)buf)->cntlid) : 0;
	return rc;
}

/* A gateway's controller ID range as GetGatewayInfo gives it: "MIN-MAX" into @out. */
static const char *info_range(struct nkv_ctl *ctl, char *out, size_t n)
{
	char *a = NULL;
	snprintf(out, n, "?");
	if (ctl && call(ctl, "GetGatewayInfo", &a, "{}") == 0 && a) {
		json_object *o = json_tokener_parse(a);
		snprintf(out, n, "%" PRIu64 "-%" PRIu64, (uint64_t)json_object_get_int64(st_get(o, "cntlid_min")),
			 (uint64_t)json_object_get_int64(st_get(o, "cntlid_max")));
		json_object_put(o);
	}
	free(a);
	return out;
}

/* Outside a group the whole CNTLID space; a range is honoured, and a full one refuses Connect. */
static void test_cntlid_range(void)
{
	char file[256], r[32];
	struct nkv_target *t = NULL;
	struct nkv_ctl *ctl = mk_file("range", file, sizeof(file), &t);
	struct nkv_loop_ctrlr *c[4] = {0};
	unsigned id[4] = {0};
	if (!ctl)
		return;
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0,
	      "CreateSubsystem");
	CHECK(strcmp(info_range(ctl, r, sizeof(r)), "1-65519") == 0, "without a group: controller IDs 1-65519 (%s)", r);
	int arc = call(ctl, "SetAnaState", NULL, "{\"gateway\":\"\",\"ana_group\":1,\"state\":\"inaccessible\"}");
	CHECK(arc == -EPERM && call(ctl, "GetAnaState", NULL, "{\"gateway\":\"\"}") == -EPERM,
	      "without a group: SetAnaState and GetAnaState FAILED_PRECONDITION (%d)", arc);
	CHECK(nkv_target_set_ana_state(t, 0, NKV_ANA_INACCESSIBLE) == -EINVAL &&
		      nkv_target_set_ana_state(t, 33, NKV_ANA_INACCESSIBLE) == -EINVAL &&
		      nkv_target_set_ana_state(t, 1, NKV_ANA_PERSISTENT_LOSS) == -EINVAL &&
		      nkv_target_set_ana_state(t, 1, NKV_ANA_NON_OPTIMIZED) == 1 && nkv_target_set_ana_state(t, 1, NKV_ANA_NON_OPTIMIZED) == 0 &&
		      nkv_target_set_ana_state(t, 1, NKV_ANA_OPTIMIZED) == 1,
	      "nkv_target_set_ana_state: groups 1-32, three states; 1 on a change, 0 on none");
	CHECK(nkv_target_set_cntlid_range(t, 5, 4) == -EINVAL && nkv_target_set_cntlid_range(t, 0, 3) == -EINVAL &&
		      nkv_target_set_cntlid_range(t, 1, 0xfff0) == -EINVAL, "bad ranges: -EINVAL");
	CHECK(nkv_target_set_cntlid_range(t, 10, 12) == 0, "range 10-12");
	int ok = 0;
	for (int i = 0; i < 3; i++)
		ok += ctrlr_open(t, &c[i], &id[i]) == 0 && id[i] >= 10 && id[i] <= 12;
	CHECK(ok == 3 && id[0] != id[1] && id[1] != id[2] && id[0] != id[2], "three controllers get 10-12 (%u %u %u)",
	      id[0], id[1], id[2]);
	int rc = nkv_loop_connect(t, g_nqn, "nqn.2026-12.io.test:host", &c[3]);
	CHECK(rc == -EBUSY, "a fourth Connect is refused: the range is full (%d)", rc);
	if (rc == 0)
		nkv_loop_disconnect(c[3]);
	nkv_loop_disconnect(c[1]);
	CHECK(ctrlr_open(t, &c[3], &id[3]) == 0 && id[3] == id[1], "a freed ID is given again (%u)", id[3]);
	struct nkv_loop_ctrlr *none = NULL;
	rc = nkv_target_set_cntlid_range(t, 0, 0) == 0 ? nkv_loop_connect(t, g_nqn, "nqn.2026-12.io.test:host", &none) : -1;
	CHECK(rc == -EBUSY, "no range: Connect refused (%d)", rc);
	if (rc == 0)
		nkv_loop_disconnect(none);
	c[1] = NULL;
	for (int i = 0; i < 4; i++)
		nkv_loop_disconnect(c[i]);
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(t);
	unlink(file);
}

static void test_file(void)
{
	char file[256], *a = NULL, *b = NULL;
	struct nkv_target *t = NULL;
	struct host h = {0};
	struct nkv_ctl *ctl = mk_file("", file, sizeof(file), &t);
	if (!ctl)
		return;
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"max_namespaces\":3}", g_nqn, g_pool) == 0,
	      "CreateSubsystem");
	CHECK(nkv_target_subsys(t, g_nqn) != NULL, "the subsystem is live");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\"}", g_nqn, g_pool) == -EEXIST, "again: -EEXIST");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"not-an-nqn\",\"pool\":\"%s\"}", g_pool) == -EINVAL, "bad NQN: -EINVAL");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"nqn.2026-12.io.test:x\"}") == -EINVAL, "no pool: -EINVAL");
	/* vfio_user_socket and vfio_user_host: checked before anything is committed, then kept */
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s-v\",\"pool\":\"%s\",\"vfio_user_host\":\"nqn.2026-12.io.test:h\"}",
		   g_nqn, g_pool) == -EINVAL, "vfio_user_host without vfio_user_socket: -EINVAL");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s-v\",\"pool\":\"%s\",\"vfio_user_socket\":\"/tmp/v\","
		   "\"vfio_user_host\":\"not-an-nqn\"}", g_nqn, g_pool) == -EINVAL, "vfio_user_host not an NQN: -EINVAL");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s-v\",\"pool\":\"%s\",\"vfio_user_socket\":\"/tmp/v\","
		   "\"shm_socket\":\"/tmp/v\"}", g_nqn, g_pool) == -EINVAL, "vfio_user_socket the shm_socket's path: -EINVAL");
	char *vr = NULL, vpath[300];
	snprintf(vpath, sizeof(vpath), "%s.vfu", file);
	CHECK(call(ctl, "CreateSubsystem", &vr, "{\"nqn\":\"%s-v\",\"pool\":\"%s\",\"vfio_user_socket\":\"%s\","
		   "\"vfio_user_host\":\"nqn.2026-12.io.test:h\"}", g_nqn, g_pool, vpath) == 0 && vr &&
		      strstr(vr, "\"vfio_user_host\":\"nqn.2026-12.io.test:h\"") && strstr(vr, ".json.vfu\""), /* json-c writes \/ for / */
	      "CreateSubsystem with a vfio-user socket and host: %s", vr ? vr : "");
	free(vr);
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s-w\",\"pool\":\"%s\",\"shm_socket\":\"%s\"}", g_nqn, g_pool,
		   vpath) == -EEXIST, "another subsystem's vfio-user socket as shm_socket: -EEXIST");
	CHECK(call(ctl, "DeleteSubsystem", NULL, "{\"nqn\":\"%s-v\"}", g_nqn) == 0, "DeleteSubsystem of it");
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

/* ---- cache namespaces ----------------------------------------------------------------------------- */

/* Store TTL through the loop host: @ttl seconds, @flags NKV_TTL_*. @return SCT/SC as kv(). */
static unsigned store_ttl(struct host *h, uint32_t nsid, const char *key, void *buf, uint32_t len, uint32_t ttl,
			  uint32_t flags)
{
	struct nkv_sqe s;
	struct nkv_cqe c;
	nkv_sqe_store_ttl(&s, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, 0, ttl, flags);
	if (nkv_loop_qp_exec(h->q, &s, buf, len, &c, NULL) < 0)
		return 0xffff;
	return (nkv_get16(&c.status) >> 1) & 0x7ff;
}

/* The live policy of namespace @nsid of g_nqn on @t. @return nkv_ns_cache_usage's result. */
static int live_policy(struct nkv_target *t, uint32_t nsid, struct nkv_cache_usage *u)
{
	struct nkv_subsys *ss = nkv_target_subsys(t, g_nqn);
	memset(u, 0, sizeof(*u));
	return ss ? nkv_ns_cache_usage(ss, nsid, u) : -ENOENT;
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* A number member of a JSON text (the first one named @key). */
static double num(const char *json, const char *key)
{
	char k[64];
	snprintf(k, sizeof(k), "\"%s\":", key);
	const char *p = json ? strstr(json, k) : NULL;
	return p ? strtod(p + strlen(k) + (p[strlen(k)] == '"'), NULL) : -1;
}

static void test_cache_file(void)
{
	char file[256], *a = NULL, *b = NULL;
	struct nkv_target *t = NULL;
	struct nkv_cache_usage u;
	struct host h = {0};
	struct nkv_ctl *ctl = mk_file("cache-", file, sizeof(file), &t);
	if (!ctl)
		return;
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0,
	      "CreateSubsystem");
	CHECK(call(ctl, "AddNamespace", &a, "{\"nqn\":\"%s\",\"nsid\":1,\"rados_namespace\":\"cache-a\",\"cache\":{"
		   "\"capacity_bytes\":\"1048576\",\"capacity_keys\":100,\"pin_quota_bytes\":65536,\"default_ttl_s\":60,"
		   "\"max_ttl_s\":3600,\"bytes_per_token\":1024,\"eviction\":\"fifo\"}}", g_nqn) == 0 &&
		      a && strstr(a, "\"cache\":{\"capacity_bytes\":1048576,\"capacity_keys\":100,\"pin_quota_bytes\":65536,"
				      "\"default_ttl_s\":60,\"max_ttl_s\":3600,\"bytes_per_token\":1024"),
	      "AddNamespace with a cache policy: the answer holds it: %s", a ? a : "");
	CHECK(a && strstr(a, "\"eviction\":\"fifo\""), "eviction fifo in the answer");
	free(a);
	int rc = live_policy(t, 1, &u);
	CHECK(rc == 0 && u.policy.capacity_bytes == 1048576 && u.policy.capacity_keys == 100 &&
		      u.policy.pin_quota_bytes == 65536 && u.policy.default_ttl_s == 60 && u.policy.max_ttl_s == 3600 &&
		      u.policy.bytes_per_token == 1024 && u.policy.eviction == NKV_EVICT_FIFO,
	      "the target runs NSID 1 as a cache with that policy (nkv_ns_cache_usage %d, capacity %llu, eviction %u)", rc,
	      (unsigned long long)u.policy.capacity_bytes, u.policy.eviction);
	CHECK(call(ctl, "AddNamespace", &a, "{\"nqn\":\"%s\",\"nsid\":2,\"rados_namespace\":\"plain\"}", g_nqn) == 0 && a &&
		      !strstr(a, "cache"), "a namespace without one is no cache: %s", a ? a : "");
	free(a);
	CHECK(live_policy(t, 2, &u) == -EINVAL, "nkv_ns_cache_usage of the plain namespace: -EINVAL");
	CHECK(call(ctl, "AddNamespace", &a, "{\"nqn\":\"%s\",\"nsid\":3,\"rados_namespace\":\"cache-b\",\"cache\":{}}", g_nqn) == 0 &&
		      a && strstr(a, "\"cache\":{\"capacity_bytes\":0,") && strstr(a, "\"eviction\":\"lru\""),
	      "cache {}: a cache with the defaults: %s", a ? a : "");
	free(a);
	CHECK(live_policy(t, 3, &u) == 0, "and the target runs it as a cache");
	static const char *const bad[] = {
		"{\"eviction\":\"random\"}", "{\"low_watermark_pct\":100}", "{\"overshoot_pct\":101}", "{\"colour\":1}",
		"{\"default_ttl_s\":100,\"max_ttl_s\":10}", "{\"capacity_bytes\":\"-5\"}", "{\"capacity_bytes\":-5}",
		"{\"max_ttl_s\":4294967295}", "{\"eviction\":3}", "{\"reap_rate\":4294967296}", "5", "[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(call(ctl, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":4,\"cache\":%s}", g_nqn, bad[i]) == -EINVAL,
		      "AddNamespace with cache %s: -EINVAL", bad[i]);
	CHECK(call(ctl, "ListNamespaces", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && count(a, "\"nsid\":") == 3 &&
		      count(a, "\"cache\":") == 2, "none of them was added; ListNamespaces shows 2 caches of 3: %s", a ? a : "");
	free(a);
	/* SetCachePolicy */
	CHECK(call(ctl, "SetCachePolicy", NULL, "{\"nqn\":\"%s\",\"nsid\":2,\"policy\":{\"capacity_bytes\":1}}", g_nqn) == -EPERM,
	      "SetCachePolicy on a namespace without a cache: -EPERM (FAILED_PRECONDITION)");
	CHECK(call(ctl, "SetCachePolicy", NULL, "{\"nqn\":\"%s\",\"nsid\":9,\"policy\":{}}", g_nqn) == -ENOENT,
	      "SetCachePolicy on no namespace: -ENOENT");
	CHECK(call(ctl, "SetCachePolicy", NULL, "{\"nqn\":\"nqn.2026-12.io.test:none\",\"nsid\":1,\"policy\":{}}") == -ENOENT,
	      "SetCachePolicy on no subsystem: -ENOENT");
	CHECK(call(ctl, "SetCachePolicy", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"policy\":{\"overshoot_pct\":101}}", g_nqn) == -EINVAL,
	      "SetCachePolicy with a bad value: -EINVAL");
	CHECK(call(ctl, "SetCachePolicy", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"policy\":{},\"fields\":[\"nope\"]}", g_nqn) == -EINVAL,
	      "SetCachePolicy naming a field CachePolicy lacks: -EINVAL");
	CHECK(call(ctl, "SetCachePolicy", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"policy\":{\"max_ttl_s\":30},\"fields\":[\"max_ttl_s\"]}",
		   g_nqn) == -EINVAL, "a max TTL below the default TTL left as it is (60): -EINVAL");
	CHECK(live_policy(t, 1, &u) == 0 && u.policy.capacity_bytes == 1048576 && u.policy.max_ttl_s == 3600,
	      "refused changes changed nothing live");
	CHECK(call(ctl, "SetCachePolicy", &a, "{\"nqn\":\"%s\",\"nsid\":1,\"policy\":{\"capacity_bytes\":\"2097152\",\"eviction\":\"off\"},"
		   "\"fields\":[\"capacity_bytes\"]}", g_nqn) == 0 && a && strstr(a, "\"capacity_bytes\":2097152") &&
		      strstr(a, "\"eviction\":\"fifo\"") && strstr(a, "\"capacity_keys\":100"),
	      "SetCachePolicy of one field: only capacity_bytes changed: %s", a ? a : "");
	free(a);
	rc = live_policy(t, 1, &u);
	CHECK(rc == 0 && u.policy.capacity_bytes == 2097152 && u.policy.eviction == NKV_EVICT_FIFO && u.policy.capacity_keys == 100,
	      "live: capacity 2 MiB, still fifo (%d, %llu, %u)", rc, (unsigned long long)u.policy.capacity_bytes, u.policy.eviction);
	CHECK(call(ctl, "SetCachePolicy", &a, "{\"nqn\":\"%s\",\"nsid\":1,\"policy\":{\"capacity_bytes\":\"1048576\",\"eviction\":\"lru\","
		   "\"default_ttl_s\":30,\"max_ttl_s\":7200,\"pin_quota_bytes\":\"65536\",\"bytes_per_token\":\"1024\"}}", g_nqn) == 0 &&
		      a && strstr(a, "\"capacity_keys\":0"), "SetCachePolicy of the whole policy: capacity_keys back to 0: %s", a ? a : "");
	free(a);
	rc = live_policy(t, 1, &u);
	CHECK(rc == 0 && u.policy.capacity_bytes == 1048576 && u.policy.eviction == NKV_EVICT_LRU && u.policy.default_ttl_s == 30 &&
		      u.policy.max_ttl_s == 7200 && u.policy.capacity_keys == 0, "live: the whole new policy (%d)", rc);
	/* GetUsage from real commands: a pinned 1000-byte entry for 1 h and an automatic 100-byte one. */
	char v[1000];
	memset(v, 'v', sizeof(v));
	CHECK(host_open(t, &h) == 0, "a host connects (loop)");
	CHECK(store_ttl(&h, 1, "pinned", v, 1000, 3600, NKV_TTL_PIN) == 0 && store_ttl(&h, 1, "auto", v, 100, 0, 0) == 0,
	      "Store TTL: a pin for 3600 s and an entry with the default TTL");
	CHECK(call(ctl, "GetUsage", &a, "{\"nqn\":\"%s\",\"nsid\":1}", g_nqn) == 0 && a, "GetUsage NSID 1: %s", a ? a : "");
	CHECK(num(a, "keys") == 2 && num(a, "used_bytes") >= 1100 && num(a, "pinned_keys") == 1 && num(a, "pinned_bytes") >= 1000 &&
		      num(a, "capacity_bytes") == 1048576 && num(a, "gateways") >= 1 && strstr(a, "\"gateway\":\"gw-a\""),
	      "usage: 2 keys, >= 1100 bytes, 1 pin of >= 1000 bytes, capacity 1 MiB");
	double bh = num(a, "byte_hours"), th = num(a, "token_hours");
	CHECK(bh >= 1000 && th > 0 && th * 1024 > bh * 0.999 && th * 1024 < bh * 1.001,
	      "byte_hours %.3f (>= 1000 bytes x 1 h) and token_hours %.6f = byte_hours / 1024", bh, th);
	free(a);
	host_close(&h);
	CHECK(call(ctl, "GetUsage", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && count(a, "\"nsid\":") == 2 &&
		      strstr(a, "\"nsid\":1,") && strstr(a, "\"nsid\":3,") && !strstr(a, "\"nsid\":2,"),
	      "GetUsage of the subsystem: its 2 caches, not the plain namespace: %s", a ? a : "");
	free(a);
	CHECK(call(ctl, "GetUsage", NULL, "{\"nqn\":\"%s\",\"nsid\":2}", g_nqn) == -EPERM, "GetUsage of the plain namespace: -EPERM");
	CHECK(call(ctl, "GetUsage", NULL, "{\"nqn\":\"%s\",\"nsid\":9}", g_nqn) == -ENOENT, "GetUsage of no namespace: -ENOENT");
	CHECK(call(ctl, "GetUsage", NULL, "{\"nqn\":\"nqn.2026-12.io.test:none\"}") == -ENOENT, "GetUsage of no subsystem: -ENOENT");
	CHECK(call(ctl, "ListNamespaces", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0, "ListNamespaces before the restart");
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(t);
	/* A restart: the policies come back from the file and run. */
	CHECK(nkv_target_create(&g_bc, &t) == 0, "target again");
	ctl = mk(t, "gw-a", NULL, file);
	CHECK(ctl && call(ctl, "ListNamespaces", &b, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && b && strcmp(a, b) == 0,
	      "after a restart the namespaces and policies are the same:\n  %s\n  %s", a ? a : "", b ? b : "");
	rc = live_policy(t, 1, &u);
	CHECK(rc == 0 && u.policy.capacity_bytes == 1048576 && u.policy.default_ttl_s == 30 && u.policy.max_ttl_s == 7200,
	      "and the restarted target runs NSID 1's policy (%d)", rc);
	CHECK(live_policy(t, 2, &u) == -EINVAL && live_policy(t, 3, &u) == 0, "NSID 2 plain, NSID 3 a cache");
	free(a);
	free(b);
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(t);
	/* A state whose stored policy is malformed (edited by hand): refused, not half applied. */
	FILE *f = fopen(file, "w");
	if (f) {
		fprintf(f, "{\"epoch\":3,\"subsystems\":{\"%s\":{\"nqn\":\"%s\",\"pool\":\"%s\",\"hosts\":{},\"namespaces\":"
			   "{\"1\":{\"nsid\":1,\"rados_namespace\":\"\",\"max_value\":0,\"cache\":{\"eviction\":\"sometimes\"}}}}},"
			   "\"listeners\":{}}\n", g_nqn, g_nqn, g_pool);
		fclose(f);
	}
	CHECK(nkv_target_create(&g_bc, &t) == 0, "target");
	struct nkv_ctl_conf cc = {.tgt = t, .gateway = "gw-a", .state_file = file, .backend = g_bc.name, .version = "test"};
	struct nkv_ctl *bad_ctl = NULL;
	CHECK(f && nkv_ctl_create(&cc, EMPTY, &bad_ctl) == -EINVAL && !bad_ctl, "a stored malformed cache policy: -EINVAL");
	nkv_target_destroy(t);
	unlink(file);
}

/* The state file is only ever created fresh by the daemon: a link planted at the temporary path is
 * neither followed nor written through (its target keeps its bytes and mode), the committed file is
 * 0600, and a state path that is a link is refused. */
static void test_state_file_links(void)
{
	char file[512], tmp[600], victim[600], *out = NULL;
	struct nkv_target *t = NULL;
	struct stat st;
	struct nkv_ctl *ctl = mk_file("links", file, sizeof(file), &t);
	if (!ctl)
		return;
	snprintf(victim, sizeof(victim), "%s.victim", file);
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", file, (long)getpid());
	FILE *f = fopen(victim, "w");
	if (f) {
		fputs("victim\n", f);
		fclose(f);
	}
	chmod(victim, 0644);
	unlink(tmp);
	CHECK(symlink(victim, tmp) == 0, "plant a link at the temporary path");
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\"}", g_nqn, g_pool) == 0,
	      "a change commits despite the planted link");
	char buf[64] = "";
	f = fopen(victim, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
	CHECK(strcmp(buf, "victim\n") == 0, "the link's target is not written through (it holds '%.40s')", buf);
	CHECK(stat(victim, &st) == 0 && (st.st_mode & 07777) == 0644, "the link's target keeps its mode (%o)",
	      (unsigned)(st.st_mode & 07777));
	CHECK(lstat(file, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) == 0,
	      "the state file is a regular file readable by its owner only (%o)", (unsigned)(st.st_mode & 07777));
	/* A state path that is a link: refused at the next read (every change reads first). */
	char moved[600];
	snprintf(moved, sizeof(moved), "%s.real", file);
	CHECK(rename(file, moved) == 0 && symlink(moved, file) == 0, "replace the state file by a link to it");
	CHECK(call(ctl, "AllowHost", &out, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:l\"}", g_nqn) == -EIO,
	      "a change through a state path that is a link is refused");
	free(out);
	f = fopen(moved, "r");
	n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	nkv_ctl_destroy(ctl);
	struct nkv_ctl_conf cc = {.tgt = t, .gateway = "gw-a", .state_file = file, .backend = g_bc.name, .version = "test"};
	struct nkv_ctl *again = NULL;
	CHECK(nkv_ctl_create(&cc, EMPTY, &again) < 0 && !again, "a daemon starting on a state path that is a link refuses it");
	nkv_ctl_destroy(again);
	nkv_target_destroy(t);
	unlink(tmp);
	unlink(file);
	unlink(moved);
	unlink(victim);
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
	/* Concurrent changes through both gateways: none may be lost. Host entries need an allowlist:
	 * on an allow-any-host subsystem they would restrict nothing (FAILED_PRECONDITION). */
	CHECK(call(A, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:r0-0\"}", g_nqn) == -EPERM &&
		      call(A, "DisallowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\"}", g_nqn) == 0,
	      "AllowHost on the any-host subsystem: -EPERM; DisallowHost '*' closes it to its allowlist");
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

/* Wait up to @ms for @cond on the target (polled every 20 ms). @return the ms it took, or 0. */
#define WAIT_FOR(ms, cond)                                                                               \
	({                                                                                               \
		uint64_t t0_ = nkv_now_ms(), took_ = 0;                                                  \
		while (nkv_now_ms() - t0_ < (ms) && !took_) {                                            \
			if (cond)                                                                        \
				took_ = nkv_now_ms() - t0_ + 1;                                          \
			else                                                                             \
				usleep(20000);                                                           \
		}                                                                                        \
		took_;                                                                                   \
	})

/* A target of gateway @gw: a cache keeps its usage share and its eviction lease under the target's
 * gateway name (nkv_backend_conf.gateway; the daemon sets it to --gateway-name). */
static int gw_target(const char *gw, struct nkv_target **t)
{
	struct nkv_backend_conf bc = g_bc;
	bc.gateway = gw;
	return nkv_target_create(&bc, t);
}

static void test_group_cache(void)
{
	char group[64], *a = NULL, *b = NULL;
	struct nkv_target *ta, *tb;
	struct nkv_cache_usage u;
	struct host ha = {0};
	snprintf(group, sizeof(group), "ctl-cache-%d-%ld", (int)getpid(), (long)time(NULL));
	CHECK(gw_target("gw-a", &ta) == 0 && gw_target("gw-b", &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL), *B = mk(tb, "gw-b", group, NULL);
	if (!A || !B)
		return;
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0 &&
		      call(A, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"rados_namespace\":\"%s\",\"cache\":{\"capacity_bytes\":"
			   "\"8388608\",\"default_ttl_s\":600,\"bytes_per_token\":4096,\"eviction\":\"fifo\"}}", g_nqn, group) == 0,
	      "a cache namespace added through gateway A");
	uint64_t ms = WAIT_FOR(5000, live_policy(tb, 1, &u) == 0 && u.policy.capacity_bytes == 8388608);
	printf("gateway B runs the new cache namespace's policy %llu ms after A's AddNamespace\n", (unsigned long long)ms);
	CHECK(ms && u.policy.eviction == NKV_EVICT_FIFO && u.policy.default_ttl_s == 600,
	      "gateway B runs it with A's policy (%llu ms)", (unsigned long long)ms);
	CHECK(call(B, "SetCachePolicy", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"policy\":{\"capacity_bytes\":\"16777216\"},"
		   "\"fields\":[\"capacity_bytes\"]}", g_nqn) == 0, "SetCachePolicy through B");
	CHECK(live_policy(tb, 1, &u) == 0 && u.policy.capacity_bytes == 16777216, "B runs the new capacity at once");
	ms = WAIT_FOR(5000, live_policy(ta, 1, &u) == 0 && u.policy.capacity_bytes == 16777216);
	printf("gateway A runs the policy changed through B %llu ms after the change\n", (unsigned long long)ms);
	CHECK(ms && u.policy.eviction == NKV_EVICT_FIFO, "A runs it within 5 s (%llu ms), other fields kept", (unsigned long long)ms);
	/* Usage is shared in RADOS: a pin stored through A shows in B's GetUsage. */
	char v[4096];
	memset(v, 'p', sizeof(v));
	CHECK(host_open(ta, &ha) == 0 && store_ttl(&ha, 1, "pin-a", v, sizeof(v), 3600, NKV_TTL_PIN) == 0,
	      "a 4 KiB pin for 1 h stored through A");
	host_close(&ha);
	ms = WAIT_FOR(10000, (free(a), a = NULL, call(B, "GetUsage", &a, "{\"nqn\":\"%s\",\"nsid\":1}", g_nqn) == 0 &&
							  num(a, "pinned_keys") >= 1));
	printf("GetUsage through B shows the pin stored through A %llu ms after it\n", (unsigned long long)ms);
	CHECK(ms && a && num(a, "pinned_bytes") >= 4096 && num(a, "byte_hours") >= 4096 && num(a, "gateways") >= 1 &&
		      strstr(a, "\"gateway\":\"gw-b\""),
	      "GetUsage through B sees A's pin within 10 s (%llu ms): %s", (unsigned long long)ms, a ? a : "");
	free(a);
	a = NULL;
	/* Restart both: the policy comes back from the group's state. */
	CHECK(call(A, "ListNamespaces", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && strstr(a, "\"capacity_bytes\":16777216"),
	      "ListNamespaces through A shows the policy: %s", a ? a : "");
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
	CHECK(gw_target("gw-a", &ta) == 0 && gw_target("gw-b", &tb) == 0, "two fresh targets");
	A = mk(ta, "gw-a", group, NULL);
	B = mk(tb, "gw-b", group, NULL);
	CHECK(A && B && call(B, "ListNamespaces", &b, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && b && strcmp(a, b) == 0,
	      "after restarting both, the same namespaces and policy:\n  %s\n  %s", a ? a : "", b ? b : "");
	CHECK(live_policy(ta, 1, &u) == 0 && u.policy.capacity_bytes == 16777216 && live_policy(tb, 1, &u) == 0 &&
		      u.policy.capacity_bytes == 16777216 && u.policy.eviction == NKV_EVICT_FIFO, "and both run it");
	CHECK(A && call(A, "DeleteSubsystem", NULL, "{\"nqn\":\"%s\"}", g_nqn) == 0, "DeleteSubsystem");
	free(a);
	free(b);
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
}

/* ---- no subsystem open by default is exposed (src/common/exposure.h) --------------------------- */

static bool g_tls_keys;
static bool hk_tls_ready(void *arg)
{
	(void)arg;
	return g_tls_keys;
}

/* A state file holding subsystem g_nqn with no allowlist and no allow_any_host (a daemon's flags
 * seeded it so) and, with @exposed, a listener of gw-a on 0.0.0.0 (a gateway that joined with it). */
static struct nkv_ctl *mk_loopback(const char *tag, bool exposed, char *file, size_t len, struct nkv_target **t)
{
	snprintf(file, len, "%s/ctl_func-%s%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag, (int)getpid());
	FILE *f = fopen(file, "w");
	if (f) {
		fprintf(f, "{\"epoch\":1,\"subsystems\":{\"%s\":{\"nqn\":\"%s\",\"pool\":\"%s\",\"max_namespaces\":0,"
			   "\"allow_any_host\":false,\"loopback_any_host\":true,\"shm_socket\":\"\",\"hosts\":{},"
			   "\"namespaces\":{}}},\"listeners\":{\"gw-a/127.0.0.1/4900\":{\"gateway\":\"gw-a\","
			   "\"address\":\"127.0.0.1\",\"port\":4900,\"tls\":false}%s}}",
			g_nqn, g_nqn, g_pool, exposed ? ",\"gw-a/0.0.0.0/4901\":{\"gateway\":\"gw-a\",\"address\":\"0.0.0.0\","
							"\"port\":4901,\"tls\":false}" : "");
		fclose(f);
	}
	CHECK(f && nkv_target_create(&g_bc, t) == 0, "target and state file %s", file);
	struct nkv_ctl_conf c = {.tgt = *t, .hooks = {.tcp_listen = hk_listen, .tcp_unlisten = hk_unlisten,
						      .tls_ready = hk_tls_ready},
				 .gateway = "gw-a", .state_file = file, .backend = g_bc.name, .version = "test",
				 .drain_ms = 5000, .poll_ms = 500};
	struct nkv_ctl *ctl = NULL;
	CHECK(*t && nkv_ctl_create(&c, EMPTY, &ctl) == 0, "nkv_ctl_create over the stored state");
	return ctl;
}

static void test_exposure(void)
{
	char file[256], *a = NULL;
	struct nkv_target *t = NULL;
	const char *open_nqn = "nqn.2026-12.io.test:open";
	struct nkv_ctl *ctl = mk_loopback("lb-", false, file, sizeof(file), &t);
	if (!ctl)
		return;
	CHECK(call(ctl, "GetSubsystem", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && strstr(a, "\"allow_any_host\":false") &&
		      strstr(a, "\"loopback_any_host\":true"), "GetSubsystem: any host by default, loopback only: %s", a ? a : "");
	free(a);
	int listens = g_listens;
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"0.0.0.0\",\"port\":4902}") == -EPERM && g_listens == listens,
	      "AddListener 0.0.0.0: -EPERM, nothing listens");
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"198.18.0.1\",\"port\":4902}") == -EPERM,
	      "AddListener of an address off loopback: -EPERM");
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"::\",\"port\":4902}") == -EPERM &&
		      call(ctl, "AddListener", NULL, "{\"address\":\"localhost.example\",\"port\":4902}") == -EPERM,
	      "AddListener of :: or of a name: -EPERM");
	CHECK(call(ctl, "AddListener", NULL, "{\"gateway\":\"gw-b\",\"address\":\"0.0.0.0\",\"port\":4902}") == -EPERM,
	      "AddListener off loopback for another gateway of the group: -EPERM");
	CHECK(call(ctl, "ListListeners", &a, "{}") == 0 && a && !strstr(a, "4902"), "none of them committed: %s", a ? a : "");
	free(a);
	g_tls_keys = false;
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"0.0.0.0\",\"port\":4903,\"tls\":true}") == -EPERM &&
		      call(ctl, "ListListeners", &a, "{}") == 0 && a && !strstr(a, "4903"),
	      "a TLS listener on a gateway without TLS keys: -EPERM, not committed");
	free(a);
	CHECK(call(ctl, "AddListener", NULL, "{\"gateway\":\"gw-b\",\"address\":\"127.0.0.1\",\"port\":4903,\"tls\":true}") == 0,
	      "another gateway's TLS listener: its keys are its own");
	g_tls_keys = true;
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"0.0.0.0\",\"port\":4904,\"tls\":true}") == 0,
	      "a TLS listener off loopback with TLS keys: fine (only hosts with a PSK get in)");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:h1\"}", g_nqn) == 0 &&
		      call(ctl, "GetSubsystem", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a &&
		      strstr(a, "\"loopback_any_host\":false") && strstr(a, "\"hosts\":[\"nqn.2026-12.io.test:h1\"]"),
	      "the first AllowHost makes it an allowlist: %s", a ? a : "");
	free(a);
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"0.0.0.0\",\"port\":4905}") == 0, "then AddListener 0.0.0.0 is fine");
	CHECK(call(ctl, "DisallowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:h1\"}", g_nqn) == 0 &&
		      call(ctl, "GetSubsystem", &a, "{\"nqn\":\"%s\"}", g_nqn) == 0 && a && strstr(a, "\"allow_any_host\":false") &&
		      strstr(a, "\"loopback_any_host\":false") && strstr(a, "\"hosts\":[]"),
	      "DisallowHost of the last host: nobody may connect, it does not open again: %s", a ? a : "");
	free(a);
	/* host "*": allow_any_host on and off. */
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", open_nqn, g_pool) == 0,
	      "CreateSubsystem with allow_any_host");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.2026-12.io.test:h1\"}", open_nqn) == -EPERM,
	      "AllowHost on it: -EPERM (it would restrict nothing)");
	CHECK(call(ctl, "DisallowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\"}", open_nqn) == 0 &&
		      call(ctl, "GetSubsystem", &a, "{\"nqn\":\"%s\"}", open_nqn) == 0 && a && strstr(a, "\"allow_any_host\":false"),
	      "DisallowHost '*': allow_any_host off: %s", a ? a : "");
	free(a);
	CHECK(call(ctl, "DisallowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\"}", open_nqn) == -ENOENT, "again: -ENOENT");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\",\"dhchap_key\":\"DHHC-1:00:x:\"}", open_nqn) == -EINVAL,
	      "AllowHost '*' with a secret: -EINVAL");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\"}", open_nqn) == 0 &&
		      call(ctl, "GetSubsystem", &a, "{\"nqn\":\"%s\"}", open_nqn) == 0 && a && strstr(a, "\"allow_any_host\":true"),
	      "AllowHost '*': allow_any_host on: %s", a ? a : "");
	free(a);
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\"}", open_nqn) == -EEXIST, "again: -EEXIST");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"not-an-nqn\"}", open_nqn) == -EINVAL,
	      "any other name that is no NQN: -EINVAL");
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(t);
	unlink(file);
	/* A stored state that already puts the two together (a gateway joined with a listener off loopback):
	 * not the doing of an unrelated change, which goes through; the repair goes through too. */
	t = NULL;
	if (!(ctl = mk_loopback("lbj-", true, file, sizeof(file), &t)))
		return;
	CHECK(call(ctl, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\"}", open_nqn, g_pool) == 0,
	      "an unrelated change over a state that exposes a subsystem: committed");
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"0.0.0.0\",\"port\":4906}") == -EPERM,
	      "a further listener off loopback: -EPERM");
	CHECK(call(ctl, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"*\"}", g_nqn) == 0,
	      "the repair (AllowHost '*'): committed");
	CHECK(call(ctl, "AddListener", NULL, "{\"address\":\"0.0.0.0\",\"port\":4906}") == 0, "then the listener too");
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(t);
	unlink(file);
}

/* ---- hostile contents of a group's object, names, watches ------------------------------------- */

#ifdef NKV_HAVE_RADOS
static rados_t g_cl;
static rados_ioctx_t g_io;

/* The test's own RADOS handle on the group pool (to write what no gateway would). */
static int raw_open(void)
{
	char who[160];
	snprintf(who, sizeof(who), "client.%s", g_bc.client_id);
	if (rados_create2(&g_cl, "ceph", who, 0) < 0)
		return -1;
	if (rados_conf_read_file(g_cl, g_bc.ceph_conf) < 0 || (g_bc.keyring && rados_conf_set(g_cl, "keyring", g_bc.keyring) < 0) ||
	    rados_connect(g_cl) < 0 || rados_ioctx_create(g_cl, g_pool, &g_io) < 0) {
		rados_shutdown(g_cl);
		return -1;
	}
	return 0;
}

static void raw_close(void)
{
	rados_ioctx_destroy(g_io);
	rados_shutdown(g_cl);
}

/* The stored epoch of @group's object (0: none). */
static uint64_t raw_epoch(const char *oid)
{
	const char *keys[] = {"epoch"};
	size_t lens[] = {5};
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	int prval = 0;
	uint64_t e = 0;
	char *k, *v;
	size_t kl, vl;
	rados_read_op_omap_get_vals_by_keys2(op, keys, 1, lens, &it, &prval);
	if (rados_read_op_operate(op, g_io, oid, 0) == 0 && it && rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k) {
		char s[32];
		snprintf(s, sizeof(s), "%.*s", (int)vl, v);
		e = strtoull(s, NULL, 10);
	}
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return e;
}

/* Set @n entries (and the next epoch) in one op, as a hostile writer would; notify the group. */
static int raw_set(const char *oid, const char **k, const size_t *kl, const char **v, const size_t *vl, size_t n)
{
	char e[24];
	snprintf(e, sizeof(e), "%020" PRIu64, raw_epoch(oid) + 1);
	rados_write_op_t op = rados_create_write_op();
	const char *ek = "epoch", *ev = e;
	size_t ekl = 5, evl = strlen(e);
	rados_write_op_omap_set2(op, k, v, kl, vl, n);
	rados_write_op_omap_set2(op, &ek, &ev, &ekl, &evl, 1);
	int rc = rados_write_op_operate2(op, g_io, oid, NULL, 0);
	rados_release_write_op(op);
	char *reply = NULL;
	size_t len = 0;
	rados_notify2(g_io, oid, "changed", 7, 1000, &reply, &len);
	rados_buffer_free(reply);
	return rc;
}

/* Does the object hold omap key @key? */
static bool raw_has(const char *oid, const char *key)
{
	const char *keys[] = {key};
	size_t lens[] = {strlen(key)};
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	int prval = 0;
	bool has = false;
	char *k, *v;
	size_t kl, vl;
	rados_read_op_omap_get_vals_by_keys2(op, keys, 1, lens, &it, &prval);
	if (rados_read_op_operate(op, g_io, oid, 0) == 0 && it && rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k)
		has = true;
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return has;
}

static void on_alarm(int sig)
{
	static const char m[] = "FAIL - a gateway did not start or stop within the test's deadline (hung)\n";
	(void)sig;
	(void)!write(1, m, sizeof(m) - 1);
	_exit(1);
}

/* 600 keys of 1,105 bytes sharing their first 1,100: loading the state terminates (bounded), a
 * joining gateway starts, both list them as malformed, and `RepairState all` removes them. */
static void test_group_long_keys(void)
{
	char group[64], oid[128], *a = NULL;
	struct nkv_target *ta, *tb;
	struct nkv_ctl *B = NULL;
	snprintf(group, sizeof(group), "ctl-long-%d-%ld", (int)getpid(), (long)time(NULL));
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL);
	if (!A)
		return;
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0,
	      "a subsystem through A");
	enum { N = 600, L = 1105 };
	static char keys[N][L + 1];
	const char *k[N], *v[N];
	size_t kl[N], vl[N];
	for (int i = 0; i < N; i++) {
		memset(keys[i], 'x', 1100);
		snprintf(keys[i] + 1100, 6, "%05d", i);
		k[i] = keys[i], kl[i] = L, v[i] = "{}", vl[i] = 2;
	}
	CHECK(raw_set(oid, k, kl, v, vl, N) == 0, "600 keys of 1105 bytes written to the group's object");
	alarm(120);
	uint64_t t0 = nkv_now_ms();
	int rc = mk_rc(tb, "gw-b", group, NULL, &B);
	uint64_t took = nkv_now_ms() - t0;
	printf("a gateway joins a group holding 600 long keys in %llu ms (rc %d)\n", (unsigned long long)took, rc);
	CHECK(rc == 0 && took < 20000, "gateway B starts within 20 s (%llu ms, rc %d)", (unsigned long long)took, rc);
	CHECK(B && nkv_target_subsys(tb, g_nqn), "and serves the well-formed entries");
	CHECK(B && call(B, "CheckState", &a, "{}") == 0 && a && strstr(a, "\"malformed\":600") &&
		      strstr(a, "the key is longer than 2048 bytes") == NULL && strstr(a, "not a kind of entry"),
	      "CheckState lists the 600 entries: %.200s", a ? a : "");
	free(a);
	a = NULL;
	t0 = nkv_now_ms();
	rc = call(A, "CreateSubsystem", &a, "{\"nqn\":\"%s-late\",\"pool\":\"%s\"}", g_nqn, g_pool);
	CHECK(rc == -EPERM && nkv_now_ms() - t0 < 20000, "gateway A answers a change within 20 s: refused (%d)", rc);
	free(a);
	a = NULL;
	CHECK(B && call(B, "RepairState", &a, "{\"all\":true}") == 0 && a && strstr(a, "\"malformed\":0"),
	      "RepairState all removes them: %s", a ? a : "");
	free(a);
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s-late\",\"pool\":\"%s\"}", g_nqn, g_pool) == 0,
	      "then changes are taken again");
	CHECK(call(A, "DeleteSubsystem", NULL, "{\"nqn\":\"%s\"}", g_nqn) == 0, "DeleteSubsystem");
	t0 = nkv_now_ms();
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	CHECK(nkv_now_ms() - t0 < 15000, "both stop within 15 s (%llu ms)", (unsigned long long)(nkv_now_ms() - t0));
	alarm(0);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
	rados_remove(g_io, oid);
}

/* NQNs with '/': subsystem X with host Y/Z and subsystem X/Y with host Z are two entries; a key
 * in the earlier unescaped form is read, and replaced by the next commit. */
static void test_group_slash(void)
{
	char group[64], oid[128], x[160], xy[160], *a = NULL;
	struct nkv_target *ta, *tb;
	snprintf(group, sizeof(group), "ctl-slash-%d-%ld", (int)getpid(), (long)time(NULL));
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	snprintf(x, sizeof(x), "%s", g_nqn);
	snprintf(xy, sizeof(xy), "%s/nqn.y", g_nqn);
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL);
	if (!A)
		return;
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\"}", x, g_pool) == 0 &&
		      call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\"}", xy, g_pool) == 0,
	      "subsystems X and X/nqn.y");
	CHECK(call(A, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.y/nqn.z\"}", x) == 0 &&
		      call(A, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.z\"}", xy) == 0,
	      "host nqn.y/nqn.z on X, host nqn.z on X/nqn.y");
	struct nkv_ctl *B = mk(tb, "gw-b", group, NULL);
	CHECK(B && call(B, "ListHosts", &a, "{\"nqn\":\"%s\"}", x) == 0 && a && strstr(a, "\"host_nqn\":\"nqn.y\\/nqn.z\""),
	      "a gateway reading the group's state has X's host: %s", a ? a : "");
	free(a);
	a = NULL;
	CHECK(B && call(B, "ListHosts", &a, "{\"nqn\":\"%s\"}", xy) == 0 && a && strstr(a, "\"host_nqn\":\"nqn.z\""),
	      "and X/nqn.y's host: %s", a ? a : "");
	free(a);
	a = NULL;
	/* The earlier form of a key: "h/X/nqn.y/nqn.old" for host nqn.old of X/nqn.y. */
	char lk[400], lv[600];
	snprintf(lk, sizeof(lk), "h/%s/nqn.old", xy);
	snprintf(lv, sizeof(lv), "{\"host_nqn\":\"nqn.old\",\"dhchap_key\":\"\",\"dhchap_ctrl_key\":\"\",\"nqn\":\"%s\"}", xy);
	const char *k[] = {lk}, *v[] = {lv};
	size_t kl[] = {strlen(lk)}, vl[] = {strlen(lv)};
	CHECK(raw_set(oid, k, kl, v, vl, 1) == 0, "a host entry written in the earlier key form");
	CHECK(B && call(B, "ListHosts", &a, "{\"nqn\":\"%s\"}", xy) == 0 && a && strstr(a, "\"nqn.old\""),
	      "it is read: %s", a ? a : "");
	free(a);
	a = NULL;
	CHECK(B && call(B, "AllowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.new\"}", xy) == 0, "a change through B");
	char nk[400];
	snprintf(nk, sizeof(nk), "h/%s%%2Fnqn.y/nqn.old", g_nqn);
	CHECK(!raw_has(oid, lk) && raw_has(oid, nk), "the next commit replaced the key by its escaped form");
	CHECK(call(A, "ListHosts", &a, "{\"nqn\":\"%s\"}", xy) == 0 && a && strstr(a, "\"nqn.old\"") && strstr(a, "\"nqn.new\"") &&
		      strstr(a, "\"nqn.z\""), "and A lists the three hosts of X/nqn.y: %s", a ? a : "");
	free(a);
	a = NULL;
	CHECK(call(A, "DisallowHost", NULL, "{\"nqn\":\"%s\",\"host_nqn\":\"nqn.y/nqn.z\"}", x) == 0 &&
		      call(B, "ListHosts", &a, "{\"nqn\":\"%s\"}", xy) == 0 && a && strstr(a, "\"nqn.z\""),
	      "disallowing X's host nqn.y/nqn.z leaves X/nqn.y's nqn.z: %s", a ? a : "");
	free(a);
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
	rados_remove(g_io, oid);
}

/* A second live gateway of one name is refused; once the first stops, the name is free. */
static void test_group_name_clash(void)
{
	char group[64], oid[128];
	struct nkv_target *ta, *tb;
	struct nkv_ctl *B = NULL;
	snprintf(group, sizeof(group), "ctl-name-%d-%ld", (int)getpid(), (long)time(NULL));
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-same", group, NULL);
	if (!A)
		return;
	int rc = mk_rc(tb, "gw-same", group, NULL, &B);
	CHECK(rc == -ENOTUNIQ && !B, "a second gateway named gw-same is refused while the first runs (%d)", rc);
	nkv_ctl_destroy(B);
	nkv_ctl_destroy(A);
	rc = mk_rc(tb, "gw-same", group, NULL, &B);
	CHECK(rc == 0, "after the first stops, the name is free (%d)", rc);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
	rados_remove(g_io, oid);
}

/* A lost watch is re-watched and the old one released (LeakSanitizer at exit says if not); the
 * new watch delivers the group's changes. */
static void test_group_watch_lost(void)
{
	char group[64], oid[128];
	struct nkv_target *ta, *tb;
	snprintf(group, sizeof(group), "ctl-watch-%d-%ld", (int)getpid(), (long)time(NULL));
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL), *B = mk(tb, "gw-b", group, NULL);
	if (!A || !B)
		return;
	for (int i = 0; i < 3; i++) {
		store_test_watch_error(A->store);
		usleep(1200 * 1000); /* the watcher re-watches within poll_ms */
	}
	CHECK(call(B, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0,
	      "a change through B");
	uint64_t ms = WAIT_FOR(5000, nkv_target_subsys(ta, g_nqn) != NULL);
	CHECK(ms, "A, re-watched three times, applies it (%llu ms)", (unsigned long long)ms);
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
	rados_remove(g_io, oid);
}

/* One entry that is not JSON: running gateways keep their state and refuse changes, saying how to
 * repair; a starting gateway runs the rest; RepairState removes it (and only malformed entries). */
static void test_group_malformed(void)
{
	char group[64], oid[128], *a = NULL;
	struct nkv_target *ta, *tc;
	struct nkv_ctl *C = NULL;
	snprintf(group, sizeof(group), "ctl-bad-%d-%ld", (int)getpid(), (long)time(NULL));
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tc) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL);
	if (!A)
		return;
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0,
	      "a subsystem through A");
	static char huge[3000];
	memset(huge, 'q', sizeof(huge));
	const char *k[] = {"s/nqn.garbage", huge}, *v[] = {"{{{not json", "{}"};
	size_t kl[] = {13, sizeof(huge)}, vl[] = {11, 2};
	CHECK(raw_set(oid, k, kl, v, vl, 2) == 0, "a non-JSON entry and a 3000-byte key written to the group's object");
	int rc = call(A, "CreateSubsystem", &a, "{\"nqn\":\"%s-late\",\"pool\":\"%s\"}", g_nqn, g_pool);
	CHECK(rc == -EPERM, "a change through A is refused (FAILED_PRECONDITION): %d", rc);
	CHECK(nkv_target_subsys(ta, g_nqn) != NULL, "A keeps serving its state");
	rc = mk_rc(tc, "gw-c", group, NULL, &C);
	CHECK(rc == 0 && C && nkv_target_subsys(tc, g_nqn), "a gateway starting now runs the well-formed entries (%d)", rc);
	CHECK(C && call(C, "CheckState", &a, "{}") == 0 && a && strstr(a, "\"key\":\"s\\/nqn.garbage\"") &&
		      strstr(a, "not a JSON object"), "CheckState lists the entry: %s", a ? a : "");
	free(a);
	a = NULL;
	char sk[200];
	snprintf(sk, sizeof(sk), "s/%s", g_nqn);
	rc = C ? call(C, "RepairState", NULL, "{\"keys\":[\"%s\"]}", sk) : 0;
	CHECK(rc == -ENOENT && raw_has(oid, sk), "RepairState refuses a well-formed entry (%d)", rc);
	CHECK(C && call(C, "CheckState", &a, "{}") == 0 && a && strstr(a, "\"malformed\":2") &&
		      strstr(a, "qqqq...[3000 bytes]\""), "CheckState shows the long key cut: %.100s", a ? a : "");
	free(a);
	a = NULL;
	char cut[300];
	snprintf(cut, sizeof(cut), "%.200s...[3000 bytes]", huge);
	CHECK(C && call(C, "RepairState", &a, "{\"keys\":[\"s/nqn.garbage\",\"%s\"]}", cut) == 0 && a &&
		      strstr(a, "\"malformed\":0") && !raw_has(oid, "s/nqn.garbage"),
	      "RepairState removes the malformed ones, the long key by its shown name: %s", a ? a : "");
	free(a);
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s-late\",\"pool\":\"%s\"}", g_nqn, g_pool) == 0,
	      "then A takes changes again");
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(C);
	nkv_target_destroy(ta);
	nkv_target_destroy(tc);
	rados_remove(g_io, oid);
}

struct range_racer {
	char group[64], name[16], range[32];
	struct nkv_target *t;
	struct nkv_ctl *ctl;
	int rc;
};
static void *range_race(void *arg)
{
	struct range_racer *r = arg;
	r->rc = nkv_target_create(&g_bc, &r->t);
	if (r->rc == 0)
		r->rc = mk_rc(r->t, r->name, r->group, NULL, &r->ctl);
	return NULL;
}

/* Four gateways joining an empty group at once: each commit is compared with the epoch, so each
 * takes a range of its own. */
static void test_group_range_race(void)
{
	struct range_racer r[4];
	pthread_t th[4];
	char group[64], oid[128];
	snprintf(group, sizeof(group), "ctl-race-%d-%ld", (int)getpid(), (long)time(NULL));
	for (int i = 0; i < 4; i++) {
		r[i] = (struct range_racer){0};
		snprintf(r[i].group, sizeof(r[i].group), "%s", group);
		snprintf(r[i].name, sizeof(r[i].name), "gw-%d", i);
		pthread_create(&th[i], NULL, range_race, &r[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	int ok = 0;
	for (int i = 0; i < 4; i++) {
		ok += r[i].rc == 0;
		info_range(r[i].ctl, r[i].range, sizeof(r[i].range));
	}
	printf("four gateways joining at once: %s %s %s %s\n", r[0].range, r[1].range, r[2].range, r[3].range);
	int distinct = 1;
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			distinct &= strcmp(r[i].range, r[j].range) != 0 && strcmp(r[i].range, "0-0") != 0;
	CHECK(ok == 4 && distinct, "four gateways joining an empty group at once: four ranges (%d started)", ok);
	for (int i = 0; i < 4; i++) {
		nkv_ctl_destroy(r[i].ctl);
		nkv_target_destroy(r[i].t);
	}
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	rados_remove(g_io, oid);
}

/* Controller ID ranges in a hostile group object: an entry that takes a held range or one past the
 * 32 is malformed (the other runs); when all 32 are held a new gateway name cannot join, while a
 * gateway that holds one restarts with it. */
static void test_group_ranges(void)
{
	char group[64], oid[128], names[32][16], vals[32][80], *a = NULL, r[32];
	const char *k[32], *v[32];
	size_t kl[32], vl[32];
	struct nkv_target *t;
	struct nkv_ctl *X = NULL;
	snprintf(group, sizeof(group), "ctl-ranges-%d-%ld", (int)getpid(), (long)time(NULL));
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	CHECK(nkv_target_create(&g_bc, &t) == 0, "a target");
	for (int i = 0; i < 32; i++) {
		snprintf(names[i], sizeof(names[i]), "g/old-%d", i);
		snprintf(vals[i], sizeof(vals[i]), "{\"gateway\":\"old-%d\",\"cntlid_range\":%d}", i, i);
		k[i] = names[i], v[i] = vals[i], kl[i] = strlen(names[i]), vl[i] = strlen(vals[i]);
	}
	CHECK(raw_set(oid, k, kl, v, vl, 32) == 0, "32 gateways with a range each written to the group's object");
	int rc = mk_rc(t, "gw-new", group, NULL, &X);
	CHECK(rc == -ENOSPC && !X, "a 33rd gateway name cannot join: every range is held (%d)", rc);
	nkv_ctl_destroy(X);
	rc = mk_rc(t, "old-5", group, NULL, &X);
	CHECK(rc == 0 && strcmp(info_range(X, r, sizeof(r)), "10201-12240") == 0,
	      "gateway old-5 (re)starts with its range 5: %s (%d)", r, rc);
	const char *bk[] = {"g/dup", "g/big", "g/other"};
	const char *bv[] = {"{\"gateway\":\"dup\",\"cntlid_range\":3}", "{\"gateway\":\"big\",\"cntlid_range\":99}",
			    "{\"gateway\":\"not-other\",\"cntlid_range\":1}"};
	size_t bkl[] = {5, 5, 7}, bvl[] = {strlen(bv[0]), strlen(bv[1]), strlen(bv[2])};
	CHECK(raw_set(oid, bk, bkl, bv, bvl, 3) == 0, "entries with a held range, range 99, a key not its name");
	usleep(300 * 1000);
	CHECK(X && call(X, "CheckState", &a, "{}") == 0 && a && strstr(a, "\"malformed\":3") &&
		      strstr(a, "a controller ID range another gateway holds") && strstr(a, "(0-31)") &&
		      strstr(a, "not the one its gateway gives"), "CheckState lists the three: %.300s", a ? a : "");
	free(a);
	CHECK(strcmp(info_range(X, r, sizeof(r)), "10201-12240") == 0, "old-5 keeps its range: %s", r);
	nkv_ctl_destroy(X);
	nkv_target_destroy(t);
	rados_remove(g_io, oid);
}

static void test_group_hostile(void)
{
	if (raw_open() < 0) {
		CHECK(0, "a RADOS handle of the test's own");
		return;
	}
	signal(SIGALRM, on_alarm);
	test_group_malformed();
	test_group_slash();
	test_group_name_clash();
	test_group_watch_lost();
	test_group_long_keys();
	test_group_ranges();
	test_group_range_race();
	raw_close();
}
#endif

/* Two gateways of one group serve one subsystem as two controllers of one NVM subsystem (Linux
 * native multipath): CNTLIDs from disjoint ranges recorded in the group's state (kept across a
 * restart), CMIC multi-controller, NMIC shared and the same NGUID/EUI64/UUID through both. */
static void test_group_multipath(void)
{
	char group[64], ra[32], rb[32];
	static uint8_t x[NKV_IDENTIFY_SIZE], y[NKV_IDENTIFY_SIZE];
	struct nkv_target *ta, *tb;
	struct nkv_loop_ctrlr *ca[3] = {0}, *cb[3] = {0};
	unsigned ia[3] = {0}, ib[3] = {0};
	snprintf(group, sizeof(group), "ctl-mp-%d-%ld", (int)getpid(), (long)time(NULL));
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL), *B = mk(tb, "gw-b", group, NULL);
	if (!A || !B)
		return;
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0 &&
		      call(A, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"rados_namespace\":\"%s\"}", g_nqn, group) == 0,
	      "a subsystem and a namespace through A");
	struct nkv_ns_stats nst;
	CHECK(WAIT_FOR(5000, nkv_target_subsys(tb, g_nqn) && nkv_ns_stats(nkv_target_subsys(tb, g_nqn), 1, &nst) == 0),
	      "B serves it");
	CHECK(strcmp(info_range(A, ra, sizeof(ra)), "1-2040") == 0 && strcmp(info_range(B, rb, sizeof(rb)), "2041-4080") == 0,
	      "controller ID ranges: A %s, B %s", ra, rb);
	int in = 0;
	for (int i = 0; i < 3; i++)
		in += ctrlr_open(ta, &ca[i], &ia[i]) == 0 && ia[i] >= 1 && ia[i] <= 2040 &&
		      ctrlr_open(tb, &cb[i], &ib[i]) == 0 && ib[i] >= 2041 && ib[i] <= 4080;
	printf("CNTLIDs through A: %u %u %u, through B: %u %u %u\n", ia[0], ia[1], ia[2], ib[0], ib[1], ib[2]);
	CHECK(in == 3, "three controllers on each gateway, each within its gateway's range");
	struct nkv_id_ctrlr *cx = (struct nkv_id_ctrlr *)x, *cy = (struct nkv_id_ctrlr *)y;
	CHECK(ca[0] && cb[0] && identify(ca[0], NKV_CNS_CTRLR, 0, 0, x) == 0 && identify(cb[0], NKV_CNS_CTRLR, 0, 0, y) == 0 &&
		      (cx->cmic & NKV_CMIC_MULTI_CTRL) && (cy->cmic & NKV_CMIC_MULTI_CTRL) &&
		      memcmp(cx->subnqn, cy->subnqn, sizeof(cx->subnqn)) == 0 && memcmp(cx->sn, cy->sn, sizeof(cx->sn)) == 0,
	      "Identify Controller: CMIC multi-controller, the same SUBNQN and serial number through both");
	static const uint8_t zero[16];
	CHECK(ca[0] && cb[0] && identify(ca[0], NKV_CNS_NS, 1, 0, x) == 0 && identify(cb[0], NKV_CNS_NS, 1, 0, y) == 0 &&
		      (((struct nkv_id_ns_nvm_head *)x)->nmic & NKV_NMIC_SHARED) &&
		      (((struct nkv_id_ns_nvm_head *)y)->nmic & NKV_NMIC_SHARED) &&
		      memcmp(x + NKV_ID_NS_NVM_NGUID, y + NKV_ID_NS_NVM_NGUID, 16) == 0 &&
		      memcmp(x + NKV_ID_NS_NVM_NGUID, zero, 16) != 0 &&
		      memcmp(x + NKV_ID_NS_NVM_EUI64, y + NKV_ID_NS_NVM_EUI64, 8) == 0,
	      "CNS 00h: NMIC shared, NGUID and EUI64 the same through both");
	struct nkv_id_ns_kv *kx = (struct nkv_id_ns_kv *)x, *ky = (struct nkv_id_ns_kv *)y;
	CHECK(ca[0] && cb[0] && identify(ca[0], NKV_CNS_CSI_NS, 1, NKV_CSI_KV, x) == 0 &&
		      identify(cb[0], NKV_CNS_CSI_NS, 1, NKV_CSI_KV, y) == 0 && (kx->nmic & NKV_NMIC_SHARED) &&
		      (ky->nmic & NKV_NMIC_SHARED) && memcmp(kx->nguid, ky->nguid, 16) == 0 && memcmp(kx->eui64, ky->eui64, 8) == 0,
	      "CNS 05h (KV): NMIC shared, NGUID and EUI64 the same through both");
	CHECK(ca[0] && cb[0] && identify(ca[0], NKV_CNS_INDEP_NS, 1, 0, x) == 0 && identify(cb[0], NKV_CNS_INDEP_NS, 1, 0, y) == 0 &&
		      (((struct nkv_id_ns_indep_head *)x)->nmic & NKV_NMIC_SHARED) &&
		      (((struct nkv_id_ns_indep_head *)y)->nmic & NKV_NMIC_SHARED),
	      "CNS 08h: NMIC shared through both");
	CHECK(ca[0] && cb[0] && identify(ca[0], NKV_CNS_NS_DESC, 1, 0, x) == 0 && identify(cb[0], NKV_CNS_NS_DESC, 1, 0, y) == 0 &&
		      x[0] && memcmp(x, y, NKV_IDENTIFY_SIZE) == 0,
	      "CNS 03h: the same EUI64, NGUID and UUID descriptors through both");
	for (int i = 0; i < 3; i++) {
		nkv_loop_disconnect(ca[i]);
		nkv_loop_disconnect(cb[i]);
	}
	/* B restarted under its name keeps its range; A's is untouched. */
	nkv_ctl_destroy(B);
	nkv_target_destroy(tb);
	CHECK(nkv_target_create(&g_bc, &tb) == 0, "a fresh target for B");
	B = mk(tb, "gw-b", group, NULL);
	CHECK(strcmp(info_range(B, rb, sizeof(rb)), "2041-4080") == 0 && strcmp(info_range(A, ra, sizeof(ra)), "1-2040") == 0,
	      "after B's restart: B %s, A %s", rb, ra);
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
#ifdef NKV_HAVE_RADOS
	char oid[128];
	snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
	if (raw_open() == 0) {
		CHECK(raw_has(oid, "g/gw-a") && raw_has(oid, "g/gw-b"), "the group's object holds g/gw-a and g/gw-b");
		rados_remove(g_io, oid);
		raw_close();
	}
#endif
}

/* An admin command through @c's admin queue; @return the CQE's status field (SF: bits 15:1, DNR in
 * bit 14 of the result), or 0xffff. */
static unsigned admin(struct nkv_loop_ctrlr *c, uint8_t opc, uint32_t nsid, uint32_t cdw10, uint32_t cdw11,
		      uint64_t lpo, void *buf, uint32_t len)
{
	struct nkv_sqe s = {.opc = opc};
	struct nkv_cqe cq;
	nkv_put32(&s.nsid, nsid);
	nkv_put32(&s.cdw10, cdw10);
	nkv_put32(&s.cdw11, cdw11);
	nkv_put32(&s.cdw12, (uint32_t)lpo);
	nkv_put32(&s.cdw13, (uint32_t)(lpo >> 32));
	if (buf)
		memset(buf, 0xee, len);
	if (nkv_loop_qp_exec(nkv_loop_admin_qp(c), &s, buf, len, &cq, NULL) < 0)
		return 0xffff;
	return nkv_get16(&cq.status) >> 1;
}

/* Get Log Page 0Ch (@rgo: groups only) of @len bytes at @lpo. @return SF. */
static unsigned ana_log(struct nkv_loop_ctrlr *c, bool rgo, uint64_t lpo, void *buf, uint32_t len)
{
	uint32_t numd = len / 4 - 1;
	return admin(c, NKV_ADM_GET_LOG_PAGE, 0xffffffffu, NKV_LID_ANA | (rgo ? NKV_ANA_LSP_RGO << 8 : 0) | (numd & 0xffff) << 16,
		     numd >> 16, lpo, buf, len);
}

/* An AER held by the target: its completion's DW0 lands in *@dw0 (0 until then). */
static void aer_done(void *arg, const struct nkv_cqe *cqe, uint32_t xfer)
{
	(void)xfer;
	*(uint32_t *)arg = nkv_get32(&cqe->dw0) | 0x80000000u; /* marked: completed */
}
static int aer_post(struct nkv_loop_ctrlr *c, uint32_t *dw0)
{
	struct nkv_sqe s = {.opc = NKV_ADM_ASYNC_EVENT};
	*dw0 = 0;
	return nkv_loop_qp_submit(nkv_loop_admin_qp(c), &s, NULL, 0, aer_done, dw0);
}
static bool aer_wait(struct nkv_loop_ctrlr *c, uint32_t *dw0, int ms)
{
	for (uint64_t t0 = nkv_now_ms(); !*dw0 && nkv_now_ms() - t0 < (uint64_t)ms;)
		nkv_loop_qp_poll(nkv_loop_admin_qp(c), 20);
	return *dw0 != 0;
}

/* A KV command's whole status field (SCT, SC and DNR), or 0xffff. */
static unsigned kv_sf(struct host *h, uint8_t opc, uint32_t nsid, const char *key, void *buf, uint32_t len)
{
	struct nkv_sqe s;
	struct nkv_cqe c;
	nkv_sqe_kv(&s, opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, 0);
	if (nkv_loop_qp_exec(h->q, &s, buf, len, &c, NULL) < 0)
		return 0xffff;
	return nkv_get16(&c.status) >> 1;
}

struct ana_flood {
	struct nkv_ctl *ctl;
	int ok;
};
static void *ana_flood_run(void *arg)
{
	struct ana_flood *f = arg;
	for (int i = 0; i < 25; i++)
		f->ok += call(f->ctl, "SetAnaState", NULL, "{\"gateway\":\"gw-a\",\"ana_group\":2,\"state\":\"%s\"}",
			      i % 2 ? "optimized" : "non-optimized") == 0;
	return NULL;
}

/* ANA across two gateways: Identify fields, log page 0Ch with and without RGO, SetAnaState through B
 * reaching A's controllers as an ANA Change notice, I/O through an inaccessible path failing with
 * 0302h (DNR clear) while the other gateway serves it, hostile requests, and a flood of changes. */
static void test_group_ana(void)
{
	char group[64], *a = NULL;
	static uint8_t x[8192];
	struct nkv_target *ta, *tb;
	struct host ha = {0}, hb = {0};
	uint32_t aer = 0;
	snprintf(group, sizeof(group), "ctl-ana-%d-%ld", (int)getpid(), (long)time(NULL));
	CHECK(nkv_target_create(&g_bc, &ta) == 0 && nkv_target_create(&g_bc, &tb) == 0, "two targets");
	struct nkv_ctl *A = mk(ta, "gw-a", group, NULL), *B = mk(tb, "gw-b", group, NULL);
	if (!A || !B)
		return;
	CHECK(call(A, "CreateSubsystem", NULL, "{\"nqn\":\"%s\",\"pool\":\"%s\",\"allow_any_host\":true}", g_nqn, g_pool) == 0 &&
		      call(A, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":1,\"rados_namespace\":\"%s\"}", g_nqn, group) == 0 &&
		      call(A, "AddNamespace", &a, "{\"nqn\":\"%s\",\"nsid\":2,\"rados_namespace\":\"%s\",\"ana_group\":2}", g_nqn,
			   group) == 0 && a && strstr(a, "\"ana_group\":2"),
	      "namespaces 1 (ANA group 1) and 2 (ANA group 2) through A: %s", a ? a : "");
	free(a);
	a = NULL;
	CHECK(call(A, "AddNamespace", NULL, "{\"nqn\":\"%s\",\"nsid\":3,\"ana_group\":33}", g_nqn) == -EINVAL,
	      "ANA group 33: refused");
	struct nkv_ns_stats nst;
	CHECK(WAIT_FOR(5000, nkv_target_subsys(tb, g_nqn) && nkv_ns_stats(nkv_target_subsys(tb, g_nqn), 2, &nst) == 0),
	      "B serves both");
	CHECK(host_open(ta, &ha) == 0 && host_open(tb, &hb) == 0, "a host on each gateway");
	if (!ha.c || !hb.c)
		return;
	struct nkv_id_ctrlr *id = (struct nkv_id_ctrlr *)x;
	CHECK(identify(ha.c, NKV_CNS_CTRLR, 0, 0, x) == 0 && (id->cmic & NKV_CMIC_ANA) && (id->cmic & NKV_CMIC_MULTI_CTRL) &&
		      id->anacap == (NKV_ANACAP_OPTIMIZED | NKV_ANACAP_NON_OPTIMIZED | NKV_ANACAP_INACCESSIBLE | NKV_ANACAP_GRPID_FIXED) &&
		      id->anatt > 0 && nkv_get32(&id->anagrpmax) == 32 && nkv_get32(&id->nanagrpid) == 32 &&
		      nkv_get32(&id->mnan) == NKV_MAX_NSID && nkv_get32(&id->mnan) <= nkv_get32(&id->nn) &&
		      (nkv_get32(&id->oaes) & NKV_OAES_ANA_CHANGE),
	      "Identify Controller: CMIC %#x, ANACAP %#x, ANATT %u, ANAGRPMAX %u, NANAGRPID %u, MNAN %u, OAES %#x", id->cmic,
	      id->anacap, id->anatt, nkv_get32(&id->anagrpmax), nkv_get32(&id->nanagrpid), nkv_get32(&id->mnan),
	      nkv_get32(&id->oaes));
	CHECK(identify(ha.c, NKV_CNS_NS, 1, 0, x) == 0 && nkv_get32(x + NKV_ID_NS_NVM_ANAGRPID) == 1 &&
		      identify(ha.c, NKV_CNS_CSI_NS, 2, NKV_CSI_KV, x) == 0 && nkv_get32(&((struct nkv_id_ns_kv *)x)->anagrpid) == 2 &&
		      identify(ha.c, NKV_CNS_INDEP_NS, 2, 0, x) == 0 && nkv_get32(&((struct nkv_id_ns_indep_head *)x)->anagrpid) == 2,
	      "ANAGRPID in CNS 00h (ns 1: 1), 05h and 08h (ns 2: 2)");
	/* The whole log as Linux reads it: 16 + NANAGRPID x 32 + MNAN x 4 bytes. */
	uint32_t linux_len = 16 + 32 * 32 + 4 * NKV_MAX_NSID;
	/* Descriptors at byte offsets (one after an odd number of NSIDs is not 8-byte aligned). */
#define GRPID(o) nkv_get32(x + (o))
#define NNSIDS(o) nkv_get32(x + (o) + 4)
#define CHGCNT(o) nkv_get64(x + (o) + 8)
#define STATE(o) x[(o) + 16]
	CHECK(ana_log(ha.c, false, 0, x, linux_len) == 0 && nkv_get16(x + 8) == 2 && GRPID(16) == 1 && NNSIDS(16) == 1 &&
		      nkv_get32(x + 48) == 1 && STATE(16) == NKV_ANA_OPTIMIZED && GRPID(52) == 2 && NNSIDS(52) == 1 &&
		      nkv_get32(x + 84) == 2 && STATE(52) == NKV_ANA_OPTIMIZED && x[88] == 0 && x[linux_len - 1] == 0,
	      "log 0Ch (%u bytes): 2 groups, NSIDs 1 and 2, optimized, zeros after", linux_len);
	uint64_t cc0 = nkv_get64(x);
	CHECK(ana_log(ha.c, true, 0, x, 4096) == 0 && nkv_get16(x + 8) == 2 && GRPID(16) == 1 && NNSIDS(16) == 0 &&
		      GRPID(48) == 2 && NNSIDS(48) == 0 && x[16 + 64] == 0,
	      "log 0Ch with RGO: 2 descriptors without NSIDs");
	CHECK(ana_log(ha.c, false, 16, x, 32) == 0 && nkv_get32(x) == 1 && nkv_get32(x + 4) == 1,
	      "log 0Ch at LPO 16: the first descriptor");
	unsigned sf = ana_log(ha.c, false, 16 + 36 + 36 + 4, x, 4);
	CHECK((sf & 0x7ff) == NKV_SC_INVALID_FIELD, "log 0Ch at an LPO past its end: Invalid Field (%#x)", sf);
	sf = ana_log(ha.c, false, 2, x, 4);
	CHECK((sf & 0x7ff) == NKV_SC_INVALID_FIELD, "log 0Ch at an LPO not dword aligned: Invalid Field (%#x)", sf);
	sf = ana_log(ha.c, false, 0, x, 8192);
	CHECK(sf == 0, "log 0Ch read with an 8 KiB buffer (%#x)", sf);
	/* Enable both notice types, hold an AER, and drain A for group 1 through B. */
	CHECK(admin(ha.c, NKV_ADM_SET_FEATURES, 0, NKV_FEAT_ASYNC_EVENT, NKV_OAES_NS_ATTR | NKV_OAES_ANA_CHANGE, 0, NULL, 0) == 0 &&
		      aer_post(ha.c, &aer) == 0, "AEC: namespace and ANA notices; an AER held");
	char v[512], r[512];
	memset(v, 'v', sizeof(v));
	CHECK(kv_sf(&ha, NKV_KV_STORE, 1, "ana-k", v, sizeof(v)) == 0, "Store through A while optimized");
	uint64_t t0 = nkv_now_ms();
	CHECK(call(B, "SetAnaState", &a, "{\"gateway\":\"gw-a\",\"ana_group\":1,\"state\":\"inaccessible\"}") == 0 && a &&
		      strstr(a, "\"state\":\"inaccessible\""), "SetAnaState gw-a group 1 inaccessible, through B: %s", a ? a : "");
	free(a);
	a = NULL;
	CHECK(aer_wait(ha.c, &aer, 5000) && (aer & 0x7fffffffu) == NKV_AEN_ANA_CHANGE,
	      "A's controller gets the ANA Change notice (DW0 %#x) %llu ms after the change through B", aer & 0x7fffffffu,
	      (unsigned long long)(nkv_now_ms() - t0));
	printf("ANA Change notice on gw-a's controller %llu ms after SetAnaState through gw-b\n",
	       (unsigned long long)(nkv_now_ms() - t0));
	CHECK(ana_log(ha.c, false, 0, x, 4096) == 0 && nkv_get64(x) > cc0 && STATE(16) == NKV_ANA_INACCESSIBLE &&
		      CHGCNT(16) == nkv_get64(x) && STATE(52) == NKV_ANA_OPTIMIZED,
	      "A's log: CHGCNT %" PRIu64 " -> %" PRIu64 ", group 1 inaccessible, group 2 optimized", cc0, nkv_get64(x));
	sf = kv_sf(&ha, NKV_KV_RETRIEVE, 1, "ana-k", r, sizeof(r));
	CHECK((sf & 0x7ff) == (NKV_SCT_PATH << 8 | NKV_SC_ANA_INACCESSIBLE) && !(sf & 0x4000),
	      "Retrieve of ns 1 through A: SCT 3h SC 02h, DNR clear (status field %#x)", sf);
	sf = kv_sf(&ha, NKV_KV_STORE, 1, "ana-k2", v, sizeof(v));
	CHECK((sf & 0x7ff) == 0x302 && !(sf & 0x4000), "Store of ns 1 through A: 0302h (%#x)", sf);
	CHECK(kv_sf(&ha, NKV_KV_STORE, 2, "ana-k", v, sizeof(v)) == 0, "ns 2 (group 2) through A still served");
	CHECK(kv_sf(&hb, NKV_KV_RETRIEVE, 1, "ana-k", r, sizeof(r)) == 0 && memcmp(v, r, sizeof(v)) == 0,
	      "ns 1 through B: the value stored through A");
	CHECK(ana_log(hb.c, false, 0, x, 4096) == 0 && STATE(16) == NKV_ANA_OPTIMIZED, "B's log: group 1 optimized");
	/* Hostile requests. */
	int rc = call(A, "SetAnaState", NULL, "{\"gateway\":\"gw-a\",\"ana_group\":1,\"state\":\"drained\"}");
	CHECK(rc == -EINVAL, "a bad state name: INVALID_ARGUMENT (%d)", rc);
	rc = call(A, "SetAnaState", NULL, "{\"gateway\":\"gw-a\",\"ana_group\":0,\"state\":\"optimized\"}");
	CHECK(rc == -EINVAL, "ANA group 0: INVALID_ARGUMENT (%d)", rc);
	rc = call(A, "SetAnaState", NULL, "{\"gateway\":\"gw-a\",\"ana_group\":33,\"state\":\"optimized\"}");
	CHECK(rc == -EINVAL, "ANA group 33: INVALID_ARGUMENT (%d)", rc);
	rc = call(A, "SetAnaState", NULL, "{\"gateway\":\"gw-nobody\",\"ana_group\":1,\"state\":\"optimized\"}");
	CHECK(rc == -ENOENT, "an unknown gateway: NOT_FOUND (%d)", rc);
	rc = call(A, "GetAnaState", NULL, "{\"gateway\":\"gw-nobody\"}");
	CHECK(rc == -ENOENT, "GetAnaState of an unknown gateway: NOT_FOUND (%d)", rc);
	CHECK(call(B, "GetAnaState", &a, "{}") == 0 && a &&
		      strstr(a, "{\"gateway\":\"gw-a\",\"ana_group\":1,\"state\":\"inaccessible\"}") &&
		      strstr(a, "{\"gateway\":\"gw-b\",\"ana_group\":1,\"state\":\"optimized\"}") &&
		      strstr(a, "{\"gateway\":\"gw-a\",\"ana_group\":2,\"state\":\"optimized\"}"),
	      "GetAnaState through B: %s", a ? a : "");
	free(a);
	a = NULL;
	/* A flood of changes through both gateways: every one commits, the host sees one notice at a
	 * time (masked until it reads the log), and the last state wins. */
	CHECK(aer_post(ha.c, &aer) == 0, "another AER held");
	struct ana_flood fa = {A, 0}, fb = {B, 0};
	pthread_t p1, p2;
	t0 = nkv_now_ms();
	pthread_create(&p1, NULL, ana_flood_run, &fa);
	pthread_create(&p2, NULL, ana_flood_run, &fb);
	pthread_join(p1, NULL);
	pthread_join(p2, NULL);
	printf("50 SetAnaState calls through two gateways in %llu ms\n", (unsigned long long)(nkv_now_ms() - t0));
	CHECK(fa.ok == 25 && fb.ok == 25, "50 concurrent SetAnaState calls succeeded (%d + %d)", fa.ok, fb.ok);
	CHECK(call(A, "SetAnaState", NULL, "{\"gateway\":\"gw-a\",\"ana_group\":2,\"state\":\"non-optimized\"}") == 0,
	      "then group 2 non-optimized");
	CHECK(WAIT_FOR(5000, nkv_target_ana_state(ta, 2) == NKV_ANA_NON_OPTIMIZED), "A runs the last state");
	CHECK(aer_wait(ha.c, &aer, 5000) && (aer & 0x7fffffffu) == NKV_AEN_ANA_CHANGE, "one ANA Change notice");
	uint32_t aer2 = 0;
	CHECK(aer_post(ha.c, &aer2) == 0 && !aer_wait(ha.c, &aer2, 300), "no second notice until the host reads the log");
	CHECK(ana_log(ha.c, false, 0, x, 4096) == 0 && STATE(52) == NKV_ANA_NON_OPTIMIZED, "the log: group 2 non-optimized");
	CHECK(call(B, "SetAnaState", NULL, "{\"gateway\":\"gw-a\",\"ana_group\":1,\"state\":\"optimized\"}") == 0 &&
		      aer_wait(ha.c, &aer2, 5000) && (aer2 & 0x7fffffffu) == NKV_AEN_ANA_CHANGE,
	      "after the log read, the next change notifies again");
	CHECK(WAIT_FOR(5000, kv_sf(&ha, NKV_KV_RETRIEVE, 1, "ana-k", r, sizeof(r)) == 0), "group 1 optimized: A serves ns 1 again");
	host_close(&ha);
	host_close(&hb);
	/* A restart keeps the states (the group's state). */
	nkv_ctl_destroy(A);
	nkv_target_destroy(ta);
	CHECK(nkv_target_create(&g_bc, &ta) == 0, "a fresh target for A");
	A = mk(ta, "gw-a", group, NULL);
	CHECK(nkv_target_ana_state(ta, 2) == NKV_ANA_NON_OPTIMIZED && nkv_target_ana_state(ta, 1) == NKV_ANA_OPTIMIZED,
	      "A restarted runs group 2 non-optimized, group 1 optimized");
#undef GRPID
#undef NNSIDS
#undef CHGCNT
#undef STATE
	nkv_ctl_destroy(A);
	nkv_ctl_destroy(B);
	nkv_target_destroy(ta);
	nkv_target_destroy(tb);
#ifdef NKV_HAVE_RADOS
	if (raw_open() == 0) {
		char oid[128];
		snprintf(oid, sizeof(oid), "rados_nkv.group.%s", group);
		rados_remove(g_io, oid);
		raw_close();
	}
#endif
}

int main(int argc, char **argv)
{
	const char *be = argc > 1 ? argv[1] : "mem";
	setvbuf(stdout, NULL, _IOLBF, 0); /* a hung test's watchdog exits with _exit: nothing left in a buffer */
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
		test_group_cache();
		test_group_multipath();
		test_group_ana();
#ifdef NKV_HAVE_RADOS
		test_group_hostile();
#endif
	} else {
		test_file();
		test_cache_file();
		test_exposure();
		test_state_file_links();
		test_cntlid_range();
	}
	printf("%d passed, %d failed\n", g_pass, g_fail);
	return g_fail ? 1 : 0;
}
