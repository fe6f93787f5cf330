/* SPDX-License-Identifier: Apache-2.0 */
/* harness.c - shared setup and helpers of the functional tests (see harness.h). */
#include "harness.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

struct h_env H;
unsigned h_pass, h_fail;

int h_shm_start(void)
{
	struct nkv_shm_conf sc = {.pollers = 1};
	int rc = nkv_shm_create(H.tgt, &sc, &H.shm);
	if (rc == 0)
		rc = H.vfio_user ? nkv_shm_listen_vfio_user(H.shm, SUBNQN, H.sock, HOSTNQN)
				 : nkv_shm_listen(H.shm, SUBNQN, H.sock);
	return rc;
}

void h_init(int argc, char **argv, const char *name)
{
	struct nkv_backend_conf bc = {0};
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	H.backend = argc > 1 ? argv[1] : "mem";
	H.transport = argc > 2 ? argv[2] : "loop";
	if (strcmp(H.transport, "loop") && strcmp(H.transport, "tcp") && strcmp(H.transport, "tcp-digest") &&
	    strcmp(H.transport, "shm") && strcmp(H.transport, "vfio-user")) {
		fprintf(stderr, "%s: unknown transport '%s' (loop, tcp, tcp-digest, shm, vfio-user)\n", name, H.transport);
		exit(1);
	}
	H.vfio_user = strcmp(H.transport, "vfio-user") == 0;
	bc.name = H.backend;
	bc.stats_interval_ms = 200; /* Identify's NUSE follows Stores quickly in tests */
	snprintf(H.rados_ns, sizeof(H.rados_ns), "%s-%ld-%ld", name, (long)getpid(), (long)time(NULL));
	if (strcmp(H.backend, "rados") == 0) {
		const char *req = getenv("NKV_REQUIRE_RADOS");
		H.ceph_conf = getenv("NKV_CEPH_CONF");
		H.keyring = getenv("NKV_CEPH_KEYRING");
		H.user = getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin";
		if (!H.ceph_conf) {
			if (req && strcmp(req, "1") == 0) {
				fprintf(stderr, "%s: NKV_REQUIRE_RADOS=1 but NKV_CEPH_CONF is not set "
						"(run: eval \"$(scripts/ceph-dev.sh env)\")\n", name);
				exit(1);
			}
			printf("%s: no cluster ($NKV_CEPH_CONF unset): skipped\n", name);
			exit(77);
		}
		bc.ceph_conf = H.ceph_conf;
		bc.keyring = H.keyring;
		bc.client_id = H.user;
		bc.op_timeout_s = getenv("NKV_TEST_OP_TIMEOUT") ? (unsigned)atoi(getenv("NKV_TEST_OP_TIMEOUT")) : 30;
		snprintf(H.pool, sizeof(H.pool), "%s", getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv");
	} else {
		snprintf(H.pool, sizeof(H.pool), "nkv");
	}
	H.bc = bc;
	if ((rc = nkv_target_create(&bc, &H.tgt)) < 0) {
		fprintf(stderr, "%s: cannot create the %s target: %s\n", name, H.backend, strerror(-rc));
		exit(1);
	}
	if ((rc = nkv_subsys_add(H.tgt, SUBNQN, H.pool, &H.ss)) < 0) {
		fprintf(stderr, "%s: cannot add subsystem on pool %s: %s\n", name, H.pool, strerror(-rc));
		exit(1);
	}
	if (strcmp(H.transport, "shm") == 0 || H.vfio_user) {
		const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		snprintf(H.sock, sizeof(H.sock), "%s/nkv-%ld.sock", tmp, (long)getpid());
		if ((rc = h_shm_start()) < 0) {
			fprintf(stderr, "%s: cannot start the %s transport on %s: %s\n", name, H.transport, H.sock,
				strerror(-rc));
			exit(1);
		}
	} else if (strcmp(H.transport, "loop") != 0) {
		struct nkv_tcp_conf tc = {.reactors = 2};
		int port;
		if ((rc = nkv_tcp_create(H.tgt, &tc, &H.tcp)) < 0 ||
		    (port = rc = nkv_tcp_listen(H.tcp, "127.0.0.1", "0", true)) < 0) {
			fprintf(stderr, "%s: cannot start the TCP transport: %s\n", name, strerror(-rc));
			exit(1);
		}
		snprintf(H.port, sizeof(H.port), "%d", port);
	}
	printf("%s: backend %s, transport %s, pool %s, RADOS namespaces %s-*\n", name, H.backend, H.transport,
	       H.pool, H.rados_ns);
}

void h_add_ns(uint32_t nsid, const char *suffix, uint64_t max_value, bool read_only)
{
	char ns[128];
	snprintf(ns, sizeof(ns), "%s-%s", H.rados_ns, suffix);
	struct nkv_ns_conf c = {.nsid = nsid, .rados_ns = ns, .max_value = max_value, .read_only = read_only};
	int rc = nkv_ns_add(H.ss, &c);
	if (rc < 0) {
		fprintf(stderr, "cannot add nsid %u: %s\n", nsid, strerror(-rc));
		exit(1);
	}
}

void h_add_ns_cache(struct nkv_subsys *ss, uint32_t nsid, const char *suffix, const struct nkv_cache_policy *p)
{
	char ns[128];
	snprintf(ns, sizeof(ns), "%s-%s", H.rados_ns, suffix);
	struct nkv_ns_conf c = {.nsid = nsid, .rados_ns = ns, .cache = p};
	int rc = nkv_ns_add(ss ? ss : H.ss, &c);
	if (rc < 0) {
		fprintf(stderr, "cannot add cache nsid %u: %s\n", nsid, strerror(-rc));
		exit(1);
	}
}

struct nkv_target *h_target_new(const char *gateway, struct nkv_subsys **ss)
{
	struct nkv_backend_conf bc = H.bc;
	struct nkv_target *t;
	int rc;

	bc.gateway = gateway;
	if ((rc = nkv_target_create(&bc, &t)) < 0 || (rc = nkv_subsys_add(t, SUBNQN, H.pool, ss)) < 0) {
		fprintf(stderr, "cannot create target %s: %s\n", gateway, strerror(-rc));
		exit(1);
	}
	return t;
}

struct h_ctrl {
	struct nkv_loop_ctrlr *loop;
	struct nkv_ctrl *lib; /* libnkv over TCP or shm */
	struct h_qp *admin;
};

struct h_qp {
	struct h_ctrl *c;
	struct nkv_loop_qp *loop;
	struct nkv_qpair *lib; /* NULL with c->lib set: the admin queue */
};

/* vfio-user: a socket serves one client at a time (a PCI function has one driver), so a test with
 * several controllers at once gets a socket of its own for each beyond the first. */
static unsigned g_vfu_live, g_vfu_socks;

static int vfu_connect(const struct nkv_conn_opts *o, struct nkv_ctrl **out)
{
	char path[sizeof(H.sock) + 16], addr[sizeof(path) + 16];
	int rc = 0;
	snprintf(path, sizeof(path), "%s", H.sock);
	if (g_vfu_live) {
		snprintf(path, sizeof(path), "%s.%u", H.sock, ++g_vfu_socks);
		rc = nkv_shm_listen_vfio_user(H.shm, SUBNQN, path, HOSTNQN);
	}
	snprintf(addr, sizeof(addr), "vfio-user:%s", path);
	if (rc == 0)
		rc = nkv_connect(addr, NULL, SUBNQN, o, out);
	g_vfu_live += rc == 0;
	return rc;
}

struct h_ctrl *h_connect(void)
{
	struct h_ctrl *c = calloc(1, sizeof(*c));
	int rc;

	c->admin = calloc(1, sizeof(*c->admin));
	c->admin->c = c;
	if (H.tcp || H.shm) {
		struct nkv_conn_opts o = {.hostnqn = HOSTNQN, .timeout_ms = 60000};
		memcpy(o.hostid, H_HOSTID, 16);
		o.hdgst = o.ddgst = strcmp(H.transport, "tcp-digest") == 0;
		if (H.vfio_user) {
			rc = vfu_connect(&o, &c->lib);
		} else {
			rc = H.shm ? nkv_connect_shm(H.sock, &o, &c->lib)
				   : nkv_connect("127.0.0.1", H.port, SUBNQN, &o, &c->lib);
		}
	} else {
		rc = nkv_loop_connect(H.tgt, SUBNQN, HOSTNQN, &c->loop);
		if (rc == 0)
			rc = nkv_loop_enable(c->loop);
		if (rc == 0)
			c->admin->loop = nkv_loop_admin_qp(c->loop);
	}
	if (rc < 0) {
		fprintf(stderr, "cannot connect/enable a controller over %s: %s\n", H.transport, strerror(-rc));
		exit(1);
	}
	return c;
}

void h_disconnect(struct h_ctrl *c)
{
	if (c->lib && H.vfio_user)
		g_vfu_live--;
	if (c->lib)
		nkv_disconnect(c->lib);
	else
		nkv_loop_disconnect(c->loop);
	free(c->admin);
	free(c);
}

struct h_qp *h_admin_qp(struct h_ctrl *c)
{
	return c->admin;
}

struct nkv_loop_ctrlr *h_loop(struct h_ctrl *c)
{
	return c->loop;
}

struct nkv_ctrl *h_lib(struct h_ctrl *c)
{
	return c->lib;
}

struct nkv_qpair *h_lib_qp(struct h_qp *q)
{
	return q->lib;
}

struct h_qp *h_qp_create(struct h_ctrl *c, uint16_t qid, uint16_t depth)
{
	struct h_qp *q = calloc(1, sizeof(*q));
	int rc = c->lib ? nkv_qpair_create(c->lib, depth, &q->lib) : nkv_loop_qp_create(c->loop, qid, depth, &q->loop);

	if (rc < 0) {
		fprintf(stderr, "cannot create I/O queue %u over %s: %s\n", qid, H.transport, strerror(-rc));
		free(q);
		return NULL;
	}
	q->c = c;
	return q;
}

void h_qp_destroy(struct h_qp *q)
{
	if (!q)
		return;
	if (q->lib)
		nkv_qpair_destroy(q->lib);
	else
		nkv_loop_qp_destroy(q->loop);
	free(q);
}

int h_exec(struct h_qp *q, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cqe *cqe, uint32_t *xfer)
{
	struct nkv_cpl cpl = {0};
	int rc;

	if (!q->c->lib)
		return nkv_loop_qp_exec(q->loop, sqe, buf, len, cqe, xfer);
	rc = q->lib ? nkv_exec(q->lib, sqe, buf, len, &cpl) : nkv_admin(q->c->lib, sqe, buf, len, &cpl);
	/* NVMe errors come back as -errno with the status in cpl; only transport failures have none. */
	if (rc < 0 && cpl.status == 0)
		return rc;
	if (cpl.status == NKV_STATUS_HOST_PATH)
		return -ENOTCONN;
	memset(cqe, 0, sizeof(*cqe));
	nkv_put32(&cqe->dw0, cpl.dw0);
	nkv_put32(&cqe->dw1, cpl.dw1);
	nkv_put16(&cqe->status, (uint16_t)((cpl.status << 1) | (cpl.dnr ? 0x8000 : 0)));
	cqe->cid = sqe->cid;
	if (xfer)
		*xfer = cpl.xfer;
	return 0;
}

int h_finish(void)
{
	if (H.shm)
		nkv_shm_destroy(H.shm, 5000);
	nkv_tcp_destroy(H.tcp, 5000);
	nkv_target_destroy(H.tgt);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return (h_fail || h_pass == 0) ? 1 : 0;
}

unsigned h_kv(struct h_qp *qp, uint8_t opc, uint32_t nsid, const void *key, unsigned klen,
	      uint32_t size, unsigned opts, void *buf, uint32_t len, uint32_t *dw0, uint32_t *xfer)
{
	struct nkv_sqe sqe;
	struct nkv_cqe cqe;
	uint32_t x = 0;

	if (!(opc & 3)) { /* no data phase: a buffer means nothing to the loop and is refused by libnkv */
		buf = NULL;
		len = 0;
	}
	nkv_sqe_kv(&sqe, opc, nsid, key, klen > 16 ? 16 : klen, size, opts);
	if (klen > 16) /* a key length the encoder refuses: put it in CDW11 by hand */
		nkv_put32(&sqe.cdw11, (nkv_get32(&sqe.cdw11) & ~0xffu) | klen);
	if (h_exec(qp, &sqe, buf, len, &cqe, &x) < 0) {
		fprintf(stderr, "exec failed (queue full, timeout or connection lost)\n");
		return 0xffff;
	}
	if (dw0)
		*dw0 = nkv_get32(&cqe.dw0);
	if (xfer)
		*xfer = x;
	return h_status(&cqe);
}

unsigned h_admin(struct h_qp *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, uint32_t *dw0)
{
	struct nkv_cqe cqe;
	if (h_exec(qp, sqe, buf, len, &cqe, NULL) < 0)
		return 0xffff;
	if (dw0)
		*dw0 = nkv_get32(&cqe.dw0);
	return h_status(&cqe);
}

uint64_t h_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void h_fill(uint8_t *buf, uint32_t len, uint64_t seed)
{
	uint64_t s = seed;
	uint32_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = h_rand(&s);
		memcpy(buf + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = h_rand(&s);
		memcpy(buf + i, &v, len - i);
	}
}

bool h_verify(const uint8_t *buf, uint32_t len, uint64_t seed)
{
	uint64_t s = seed;
	uint32_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = h_rand(&s);
		if (memcmp(buf + i, &v, 8))
			return false;
	}
	if (i < len) {
		uint64_t v = h_rand(&s);
		return memcmp(buf + i, &v, len - i) == 0;
	}
	return true;
}

int h_ceph_tool(const char *tool, ...)
{
	const char *argv[32];
	char user[64];
	int n = 0;
	va_list ap;

	snprintf(user, sizeof(user), "client.%s", H.user);
	argv[n++] = tool;
	argv[n++] = "-c";
	argv[n++] = H.ceph_conf;
	argv[n++] = "-n";
	argv[n++] = user;
	if (H.keyring) {
		argv[n++] = "--keyring";
		argv[n++] = H.keyring;
	}
	va_start(ap, tool);
	for (const char *a = va_arg(ap, const char *); a && n < 31; a = va_arg(ap, const char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		execvp(tool, (char **)argv);
		_exit(127);
	}
	int st = -1;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
