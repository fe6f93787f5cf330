/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_func.c - DH-HMAC-CHAP end to end: libnkv (and the nkv CLI) against a rados-nkv daemon on the
 * mem backend that this test starts, with a subsystem whose allowed hosts have secrets and policies
 * (every hash function, every DH group), plus raw Authentication Send/Receive through libnkv's
 * internal queue pair API for what a well-behaved host never does.
 *
 * Usage: auth_func PATH/TO/rados-nkv PATH/TO/nkv
 *
 *  - libnkv: unidirectional and bidirectional, SHA-256/384/512, null and ffdhe2048..8192 (the
 *    daemon log names what was negotiated per queue), Store/Retrieve on authenticated queues, four
 *    I/O queues each authenticating, re-authentication (nkv_ctrl_reauth, nkv_qpair_reauth), a wrong
 *    host secret (-EACCES), a wrong controller secret (-EKEYREJECTED), no secret (-ENOKEY), a
 *    controller secret where none is configured, malformed secrets (-EINVAL), a host without auth;
 *  - raw: AUTHREQ.ATR in Connect, 91h for admin commands and I/O Connects before authentication,
 *    I/O commands refused until the I/O queue authenticates, SECP/TL/AL checks, AUTH_Failure1 with
 *    the right explanation (incorrect message, concatenation, hash, DH group, payload, failed), the
 *    association ended after a failure (other queues too) and after AUTH_Failure2, a half-done
 *    transaction and a queue that never authenticates closed at --auth-timeout-ms, a half-done
 *    re-authentication dropped while the queue stays usable;
 *  - the nkv CLI: --dhchap-secret / --dhchap-ctrl-secret and its exit codes;
 *  - what a peer that knows only an allowed host NQN can make the target compute: a host NQN that
 *    reconnects in a loop gets AUTH_Failure1 once its share of DH transactions is spent, and (on a
 *    second daemon with one reactor, whose DH computations take NKV_TEST_DH_DELAY_MS) another
 *    host's commands on the same reactor complete while a Challenge is being computed.
 * The last line is "N passed, N failed"; exit 0 only without failures.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include "check.h"
#include "client/internal.h"
#include "common/dhchap.h"
#include "daemon_spawn.h"

unsigned h_pass, h_fail;

#define SUB "nqn.2026-11.io.rados-nkv:auth-func"
#define HOSTP "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000a"
#define AUTH_TMO_MS 1500

static char g_port[16], g_log[300], g_log_saved[300], g_dir[128];
static const char *g_nkv;

/* A host of the subsystem: its policy and secrets. */
struct host {
	const char *tag, *hash, *group; /* dhchap_hash / dhchap_dhgroup in the config (NULL: default) */
	const char *want_hash, *want_group; /* what the target must pick */
	int hh, len, chh, clen;         /* transformation hash and length of the secrets (chh < 0: none) */
	char nqn[128], key[128], ckey[128];
};

static struct host g_hosts[] = {
	{"def", NULL, NULL, "sha256", "ffdhe2048", 1, 32, 0, 64, "", "", ""},
	{"s256null", "sha256", "null", "sha256", "null", 0, 32, 1, 32, "", "", ""},
	{"s384dh2048", "sha384", "ffdhe2048", "sha384", "ffdhe2048", 2, 48, 2, 48, "", "", ""},
	{"s512null", "sha512", "null", "sha512", "null", 3, 64, 3, 64, "", "", ""},
	{"s256dh3072", "sha256", "ffdhe3072", "sha256", "ffdhe3072", 0, 48, -1, 0, "", "", ""},
	{"s384dh4096", "sha384", "ffdhe4096", "sha384", "ffdhe4096", 0, 64, 0, 32, "", "", ""},
	{"s512dh6144", "sha512", "ffdhe6144", "sha512", "ffdhe6144", 3, 64, -1, 0, "", "", ""},
	{"s512dh8192", "sha512,sha256", "ffdhe8192,null", "sha512", "ffdhe8192", 1, 32, 1, 32, "", "", ""},
	{"plain", NULL, NULL, NULL, NULL, -1, 0, -1, 0, "", "", ""}, /* allowed, no secret: no authentication */
	{"flood", "sha256", "ffdhe8192", "sha256", "ffdhe8192", 1, 32, -1, 0, "", "", ""}, /* t_dh_limits */
};
#define NHOSTS (sizeof(g_hosts) / sizeof(g_hosts[0]))
enum { H_DEF, H_256NULL, H_384DH, H_512NULL, H_256DH3072, H_384DH4096, H_512DH6144, H_512DH8192, H_PLAIN, H_FLOOD };

/* "DHHC-1:hh:<base64(key || CRC-32)>:" of a key made from @seed. */
static void mk_secret(int hh, int len, int seed, char *out)
{
	uint8_t k[68];
	for (int i = 0; i < len; i++)
		k[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 3));
	nkv_put32(k + len, crc32_gzip_refl(0, k, (uint64_t)len));
	int n = sprintf(out, "DHHC-1:%02d:", hh);
	n += EVP_EncodeBlock((unsigned char *)out + n, k, len + 4);
	strcpy(out + n, ":");
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Lines of the daemon log holding every one of @a and @b (NULL: any). */
static int log_count(const char *a, const char *b)
{
	FILE *f = fopen(g_log, "r");
	char line[2048];
	int n = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, a) && (!b || strstr(line, b));
	fclose(f);
	return n;
}

/* ---- libnkv ---------------------------------------------------------------------------------- */

static const uint8_t HOSTID[16] = {0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static int conn(const struct host *h, const char *key, const char *ckey, struct nkv_ctrl **c)
{
	struct nkv_conn_opts o = {.hostnqn = h->nqn, .dhchap_secret = key, .dhchap_ctrl_secret = ckey,
				  .timeout_ms = 10000};
	memcpy(o.hostid, HOSTID, 16);
	*c = NULL;
	return nkv_connect("127.0.0.1", g_port, SUB, &o, c);
}

/* Store and read back 4 KiB on a new I/O queue pair. */
static bool kv_ok(struct nkv_ctrl *c, const char *key)
{
	struct nkv_qpair *qp = NULL;
	static uint8_t v[4096], r[4096];
	uint32_t size = 0;
	for (size_t i = 0; i < sizeof(v); i++)
		v[i] = (uint8_t)(i * 13 + key[0]);
	bool ok = nkv_qpair_create(c, 16, &qp) == 0 && nkv_store(qp, 1, key, (unsigned)strlen(key), v, sizeof(v), 0, NULL) == 0 &&
		  nkv_retrieve(qp, 1, key, (unsigned)strlen(key), r, sizeof(r), &size, NULL) == 0 && size == sizeof(v) &&
		  memcmp(v, r, sizeof(v)) == 0;
	nkv_qpair_destroy(qp);
	return ok;
}

static void t_policies(void)
{
	for (size_t i = 0; i < NHOSTS; i++) {
		struct host *h = &g_hosts[i];
		if (h->hh < 0)
			continue;
		for (int bidir = 0; bidir <= (h->chh >= 0); bidir++) {
			char want[96];
			snprintf(want, sizeof(want), "host %s: %s %s%s\n", h->nqn, h->want_hash, h->want_group,
				 bidir ? " bidirectional" : "");
			int before = log_count(h->nqn, want);
			struct nkv_ctrl *c;
			int rc = conn(h, h->key, bidir ? h->ckey : NULL, &c);
			CHECK(rc == 0, "%s%s: connect: %s", h->tag, bidir ? " bidirectional" : "", strerror(-rc));
			if (rc)
				continue;
			CHECK(kv_ok(c, h->tag), "%s: Store + Retrieve 4 KiB on an authenticated I/O queue", h->tag);
			nkv_disconnect(c);
			/* admin queue and the I/O queue: one line each */
			int n = log_count(h->nqn, want) - before;
			CHECK(n == 2, "%s%s: %d queues logged '%s' (want 2)", h->tag, bidir ? " bidirectional" : "", n, want);
		}
	}
}

static void t_refusals(void)
{
	struct host *d = &g_hosts[H_DEF], *p = &g_hosts[H_PLAIN], *nc = &g_hosts[H_256DH3072];
	struct nkv_ctrl *c;
	char wrong[128];
	mk_secret(1, 32, 999, wrong);

	int before = log_count("dhchap failure1: ", "wrong response");
	/* (debug lines: one per event, never rate limited) */
	int rc = conn(d, wrong, NULL, &c);
	CHECK(rc == -EACCES, "a wrong host secret: %d (want -EACCES)", rc);
	CHECK(log_count("dhchap failure1: ", "wrong response") == before + 1, "the target logged the wrong response");
	rc = conn(d, g_hosts[H_256NULL].key, NULL, &c); /* another host's (right format, wrong key) */
	CHECK(rc == -EACCES, "another host's secret: %d (want -EACCES)", rc);
	before = log_count("dhchap failure2: ", d->nqn);
	rc = conn(d, d->key, wrong, &c);
	CHECK(rc == -EKEYREJECTED, "a wrong controller secret: %d (want -EKEYREJECTED)", rc);
	CHECK(log_count("dhchap failure2: ", d->nqn) == before + 1, "the target saw the host's AUTH_Failure2");
	rc = conn(d, NULL, NULL, &c);
	CHECK(rc == -ENOKEY, "no secret where one is required: %d (want -ENOKEY)", rc);
	rc = conn(nc, nc->key, wrong, &c);
	CHECK(rc == -EACCES, "a controller secret where the target has none for that host: %d (want -EACCES)", rc);
	CHECK(log_count("dhchap failure1: ", "no controller secret is configured") >= 1, "the target said why");
	rc = conn(d, "DHHC-1:01:notbase64!:", NULL, &c);
	CHECK(rc == -EINVAL, "a malformed secret: %d (want -EINVAL)", rc);
	rc = conn(d, NULL, d->ckey, &c);
	CHECK(rc == -EINVAL, "a controller secret without a host secret: %d (want -EINVAL)", rc);
	/* A host the subsystem does not authenticate: a host secret is unused, a controller secret is
	 * insisted on (the controller must prove itself, and cannot). */
	rc = conn(p, d->key, NULL, &c);
	CHECK(rc == 0, "a host without authentication, given a secret anyway: %s", strerror(-rc));
	if (rc == 0) {
		CHECK(kv_ok(c, "plain"), "Store + Retrieve without authentication");
		CHECK(nkv_ctrl_reauth(c) == -EPROTO, "re-authentication where the target has no secret: -EPROTO");
		nkv_disconnect(c);
	}
	rc = conn(p, d->key, d->ckey, &c);
	CHECK(rc == -EKEYREJECTED, "a controller secret for a controller that does not authenticate: %d", rc);
	rc = conn(p, NULL, NULL, &c);
	CHECK(rc == 0, "no secret, no authentication: %s", strerror(-rc));
	if (rc == 0) {
		CHECK(nkv_ctrl_reauth(c) == -ENOKEY, "nkv_ctrl_reauth without a secret: -ENOKEY");
		nkv_disconnect(c);
	}
}

static void t_reauth_queues(void)
{
	struct host *d = &g_hosts[H_DEF];
	struct nkv_ctrl *c;
	struct nkv_qpair *qp[4] = {0};
	int before = log_count("dhchap ok: ", d->nqn), rc = conn(d, d->key, d->ckey, &c);
	CHECK(rc == 0, "connect: %s", strerror(-rc));
	if (rc)
		return;
	for (int i = 0; i < 4; i++)
		CHECK(nkv_qpair_create(c, 8, &qp[i]) == 0, "I/O queue pair %d", i);
	int n = log_count("dhchap ok: ", d->nqn) - before;
	CHECK(n == 5, "admin + 4 I/O queues authenticated: %d lines", n);
	before = log_count(d->nqn, " re-authentication\n");
	CHECK((rc = nkv_ctrl_reauth(c)) == 0, "nkv_ctrl_reauth: %s", strerror(-rc));
	for (int i = 0; i < 4 && qp[i]; i++)
		CHECK((rc = nkv_qpair_reauth(qp[i])) == 0, "nkv_qpair_reauth %d: %s", i, strerror(-rc));
	CHECK(log_count(d->nqn, " re-authentication\n") - before == 5, "5 re-authentications logged");
	for (int i = 0; i < 4 && qp[i]; i++) {
		char k[8];
		snprintf(k, sizeof(k), "rq%d", i);
		CHECK(nkv_store(qp[i], 1, k, 3, "x", 1, 0, NULL) == 0, "Store on queue %d after re-authentication", i);
		nkv_qpair_destroy(qp[i]);
	}
	nkv_disconnect(c);
}

/* ---- raw: libnkv's queue pairs, commands built here ------------------------------------------ */

struct raw {
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp; /* the admin queue */
	uint16_t cntlid;
	uint32_t dw0;         /* Connect's */
};

static int raw_connect_qp(struct nkv_ctrl *c, struct nkv_qpair *qp, uint16_t cntlid, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	struct nkv_connect_data d;
	uint8_t *b = (uint8_t *)&sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_FABRICS;
	b[4] = NKV_FCTYPE_CONNECT;
	nkv_put16(b + 42, qp->qid);
	nkv_put16(b + 44, 7);
	memset(&d, 0, sizeof(d));
	memcpy(d.hostid, HOSTID, 16);
	nkv_put16(&d.cntlid, cntlid);
	strcpy(d.subnqn, SUB);
	strcpy(d.hostnqn, c->hostnqn);
	memset(cpl, 0, sizeof(*cpl));
	return nkv_exec(qp, &sqe, &d, sizeof(d), cpl);
}

/* An admin queue of host @h (with its secrets, for nkv_auth_run), connected and nothing more. */
static bool raw_open(struct raw *r, const struct host *h)
{
	struct nkv_conn_opts o = {.hostnqn = h->nqn, .dhchap_secret = h->hh >= 0 ? h->key : NULL, .timeout_ms = 5000};
	struct nkv_cpl cpl;
	int err;
	memset(r, 0, sizeof(*r));
	memcpy(o.hostid, HOSTID, 16);
	if (!(r->ctrl = nkv_ctrl_alloc("127.0.0.1", g_port, SUB, &o, false, &err)))
		return false;
	if (nkv_tcp_qp_open(r->ctrl, 0, NKV_ADMIN_SLOTS, &r->ctrl->admin)) {
		nkv_ctrl_free_mem(r->ctrl);
		r->ctrl = NULL;
		return false;
	}
	r->qp = r->ctrl->admin;
	r->qp->icd_max = NKV_TCP_ADMIN_ICD;
	if (raw_connect_qp(r->ctrl, r->qp, NKV_CNTLID_DYNAMIC, &cpl) != 0)
		return false;
	r->dw0 = cpl.dw0;
	r->cntlid = r->ctrl->cntlid = (uint16_t)cpl.dw0;
	return true;
}

static void raw_close(struct raw *r)
{
	if (r->ctrl) {
		nkv_tcp_qp_close(r->qp);
		nkv_ctrl_free_mem(r->ctrl);
	}
	memset(r, 0, sizeof(*r));
}

static int simple(struct nkv_qpair *qp, uint8_t opc, uint8_t fctype, uint32_t cdw10, uint32_t cdw11, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = opc;
	((uint8_t *)&sqe)[4] = fctype; /* fabrics only; NSID 0 otherwise */
	nkv_put32(&sqe.cdw10, cdw10);
	nkv_put32(&sqe.cdw11, cdw11);
	memset(cpl, 0, sizeof(*cpl));
	return nkv_exec(qp, &sqe, NULL, 0, cpl);
}

static int prop_get_cap(struct nkv_qpair *qp, struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_FABRICS;
	((uint8_t *)&sqe)[4] = NKV_FCTYPE_PROP_GET;
	((uint8_t *)&sqe)[40] = 1;
	memset(cpl, 0, sizeof(*cpl));
	return nkv_exec(qp, &sqe, NULL, 0, cpl);
}

static int auth_cmd(struct nkv_qpair *qp, bool send, void *buf, uint32_t len, uint32_t tl, uint8_t secp,
		    struct nkv_cpl *cpl)
{
	struct nkv_sqe sqe;
	uint8_t *b = (uint8_t *)&sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_FABRICS;
	b[4] = send ? NKV_FCTYPE_AUTH_SEND : NKV_FCTYPE_AUTH_RECV;
	b[NKV_AUTH_SQE_SPSP0] = b[NKV_AUTH_SQE_SPSP1] = 1;
	b[NKV_AUTH_SQE_SECP] = secp;
	nkv_put32(b + NKV_AUTH_SQE_LEN, tl);
	memset(cpl, 0, sizeof(*cpl));
	return nkv_exec(qp, &sqe, buf, len, cpl);
}

static uint8_t g_msg[4200], g_in[4096];

static uint32_t mk_negotiate(uint16_t tid, uint8_t scc, const uint8_t *hashes, int nh, const uint8_t *groups, int ng)
{
	memset(g_msg, 0, 72);
	g_msg[0] = NKV_AUTH_TYPE_COMMON;
	g_msg[1] = NKV_AUTH_ID_NEGOTIATE;
	nkv_put16(g_msg + 4, tid);
	g_msg[6] = scc;
	g_msg[7] = 1;
	g_msg[8] = NKV_AUTH_PROTO_DHCHAP;
	g_msg[10] = (uint8_t)nh;
	g_msg[11] = (uint8_t)ng;
	memcpy(g_msg + 12, hashes, (size_t)nh);
	memcpy(g_msg + 12 + 30, groups, (size_t)ng);
	return 72;
}

static const uint8_t ALL_H[] = {1, 2, 3}, ALL_G[] = {0, 1, 2, 3, 4, 5};

/* Send @len bytes of g_msg, then Receive: @return the AUTH_ID received (-1: the commands failed). */
static int exchange(struct nkv_qpair *qp, uint32_t len)
{
	struct nkv_cpl cpl;
	if (len && auth_cmd(qp, true, g_msg, len, len, NKV_AUTH_SECP, &cpl) != 0)
		return -1;
	memset(g_in, 0, sizeof(g_in));
	if (auth_cmd(qp, false, g_in, sizeof(g_in), sizeof(g_in), NKV_AUTH_SECP, &cpl) != 0)
		return -1;
	return g_in[1];
}

/* The queue is closed by the target within @ms: commands fail with a transport error. */
static bool closed_within(struct nkv_qpair *qp, int ms)
{
	int64_t end = now_ms() + ms;
	struct nkv_cpl cpl;
	while (now_ms() < end) {
		int rc = prop_get_cap(qp, &cpl);
		if (rc && (cpl.status == NKV_STATUS_HOST_PATH || cpl.status == 0) && qp->err)
			return true;
		sleep_ms(50);
	}
	return false;
}

static void t_raw_gates(void)
{
	struct raw r, p;
	struct nkv_cpl cpl;
	uint8_t id[4096];

	CHECK(raw_open(&r, &g_hosts[H_DEF]), "raw admin Connect");
	CHECK(r.dw0 & NKV_CONNECT_AUTHREQ_ATR, "Connect DW0 %#x: AUTHREQ.ATR (bit 17) set", r.dw0);
	CHECK(!(r.dw0 & NKV_CONNECT_AUTHREQ_ASCR) && r.cntlid != 0, "no ASCR, CNTLID %u in bits 15:0", r.cntlid);
	CHECK(raw_open(&p, &g_hosts[H_PLAIN]) && !(p.dw0 & NKV_CONNECT_AUTHREQ_ATR),
	      "a host without a secret: no ATR (DW0 %#x)", p.dw0);
	/* before authentication: everything but Authentication Send/Receive and Disconnect is 91h */
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_IDENTIFY;
	nkv_put32(&sqe.cdw10, NKV_CNS_CTRLR);
	memset(&cpl, 0, sizeof(cpl));
	int rc = nkv_exec(r.qp, &sqe, id, sizeof(id), &cpl);
	CHECK(rc == -EACCES && cpl.status == 0x191 && cpl.dnr, "Identify before authentication: %#x (want 191h, DNR)",
	      cpl.status);
	CHECK(prop_get_cap(r.qp, &cpl) && cpl.status == 0x191, "Property Get before authentication: %#x", cpl.status);
	CHECK(simple(r.qp, NKV_ADM_KEEP_ALIVE, 0, 0, 0, &cpl) && cpl.status == 0x191, "Keep Alive: %#x", cpl.status);
	CHECK(simple(r.qp, NKV_ADM_SET_FEATURES, 0, NKV_FEAT_NUM_QUEUES, 0, &cpl) && cpl.status == 0x191,
	      "Set Features: %#x", cpl.status);
	/* an I/O queue of this controller before its admin queue authenticated */
	struct nkv_qpair *io = NULL;
	if (nkv_tcp_qp_open(r.ctrl, 1, 4, &io) == 0) {
		io->icd_max = 8192;
		rc = raw_connect_qp(r.ctrl, io, r.cntlid, &cpl);
		CHECK(rc && cpl.status == 0x191 && cpl.dnr, "I/O Connect before the admin queue authenticated: %#x (want "
							     "SCT 1h 91h, DNR)", cpl.status);
		nkv_tcp_qp_close(io);
	}
	/* command-level checks of the authentication commands */
	mk_negotiate(1, 0, ALL_H, 3, ALL_G, 6);
	CHECK(auth_cmd(r.qp, true, g_msg, 72, 72, 0xea, &cpl) && cpl.status == 0x002, "SECP EAh: %#x (want 02h)", cpl.status);
	CHECK(auth_cmd(r.qp, true, g_msg, 72, 0, NKV_AUTH_SECP, &cpl) && cpl.status == 0x002, "TL 0: %#x", cpl.status);
	CHECK(auth_cmd(r.qp, true, g_msg, 4097, 4097, NKV_AUTH_SECP, &cpl) && cpl.status == 0x002, "TL 4097: %#x",
	      cpl.status);
	CHECK(auth_cmd(r.qp, false, g_in, 16, 0, NKV_AUTH_SECP, &cpl) && cpl.status == 0x002, "AL 0: %#x", cpl.status);
	/* a host without a secret has nothing to authenticate */
	CHECK(auth_cmd(p.qp, true, g_msg, 72, 72, NKV_AUTH_SECP, &cpl) && cpl.status == 0x00c,
	      "Authentication Send for a host without a secret: %#x (want 0Ch)", cpl.status);
	/* a full transaction, then the admin commands run */
	CHECK((rc = nkv_auth_run(r.ctrl, r.qp)) == 0, "nkv_auth_run on the raw admin queue: %s", strerror(-rc));
	CHECK(prop_get_cap(r.qp, &cpl) == 0, "Property Get after authentication: %#x", cpl.status);
	raw_close(&r);
	raw_close(&p);
}

/* One failure case: @make fills g_msg for the Send after the Challenge (0: skip it). */
static void failure_case(const char *what, const struct host *h, uint32_t neg_len, uint8_t want_rce)
{
	struct raw r;
	if (!raw_open(&r, h)) {
		CHECK(0, "%s: raw Connect", what);
		return;
	}
	int id = exchange(r.qp, neg_len);
	CHECK(id == NKV_AUTH_ID_FAILURE1 && g_in[0] == 0 && g_in[6] == NKV_AUTH_RC_FAILURE && g_in[7] == want_rce,
	      "%s: AUTH_Failure1 with explanation %02xh (got id %02xh, rc %02xh, explanation %02xh)", what, want_rce,
	      (unsigned)id, g_in[6], g_in[7]);
	CHECK(closed_within(r.qp, 1500), "%s: the association ends after AUTH_Failure1", what);
	raw_close(&r);
}

static void t_raw_failures(void)
{
	struct host *n = &g_hosts[H_256NULL], *dh = &g_hosts[H_384DH];
	static const uint8_t H512[] = {3}, G2048[] = {1};

	failure_case("Authentication Receive before AUTH_Negotiate", n, 0, NKV_AUTH_RCE_INCORRECT_MESSAGE);
	failure_case("secure channel concatenation asked (SC_C 1)", n, mk_negotiate(7, 1, ALL_H, 3, ALL_G, 6),
		     NKV_AUTH_RCE_CONCAT_MISMATCH);
	failure_case("only SHA-512 offered to a SHA-256 host", n, mk_negotiate(7, 0, H512, 1, ALL_G, 6),
		     NKV_AUTH_RCE_HASH_UNUSABLE);
	failure_case("only ffdhe2048 offered to a null-group host", n, mk_negotiate(7, 0, ALL_H, 3, G2048, 1),
		     NKV_AUTH_RCE_DHGROUP_UNUSABLE);
	uint32_t l = mk_negotiate(7, 0, ALL_H, 3, ALL_G, 6);
	g_msg[8] = 2; /* not DH-HMAC-CHAP */
	failure_case("no DH-HMAC-CHAP protocol descriptor", n, l, NKV_AUTH_RCE_PROTOCOL_UNUSABLE);
	/* a Reply message with no transaction */
	memset(g_msg, 0, 16);
	g_msg[0] = NKV_AUTH_TYPE_DHCHAP;
	g_msg[1] = NKV_AUTH_ID_REPLY;
	failure_case("DH-HMAC-CHAP_Reply before AUTH_Negotiate", n, 16, NKV_AUTH_RCE_INCORRECT_MESSAGE);

	/* after a Challenge: a Reply with another transaction ID, a bad DH value, a wrong response */
	for (int c = 0; c < 3; c++) {
		struct raw r;
		static const char *const what[] = {"Reply with the wrong transaction ID", "Reply with DH value 1",
						   "Reply with a wrong response"};
		static const uint8_t rce[] = {NKV_AUTH_RCE_INCORRECT_PAYLOAD, NKV_AUTH_RCE_DHGROUP_UNUSABLE,
					      NKV_AUTH_RCE_FAILED};
		if (!raw_open(&r, dh))
			continue;
		int id = exchange(r.qp, mk_negotiate(0x1234, 0, ALL_H, 3, ALL_G, 6));
		uint16_t dhvlen = nkv_get16(g_in + 10);
		CHECK(id == NKV_AUTH_ID_CHALLENGE && g_in[8] == 2 && g_in[9] == 1 && g_in[6] == 48 && dhvlen == 256 &&
			      nkv_get16(g_in + 4) == 0x1234 && nkv_get32(g_in + 12) != 0,
		      "Challenge: SHA-384, ffdhe2048, HL 48, DHVLEN 256, our T_ID, S1 != 0 (id %02xh hash %u group %u)",
		      (unsigned)id, g_in[8], g_in[9]);
		uint32_t len = 16 + 2 * 48 + 256;
		memset(g_msg, 0, len);
		g_msg[0] = NKV_AUTH_TYPE_DHCHAP;
		g_msg[1] = NKV_AUTH_ID_REPLY;
		nkv_put16(g_msg + 4, c == 0 ? 0x1235 : 0x1234);
		g_msg[6] = 48;
		nkv_put16(g_msg + 10, 256);
		if (c == 1)
			g_msg[len - 1] = 1; /* y = 1: outside the group */
		else
			memcpy(g_msg + 16 + 96, g_in + 16 + 48, 256); /* the controller's own value: valid */
		id = exchange(r.qp, len);
		CHECK(id == NKV_AUTH_ID_FAILURE1 && g_in[7] == rce[c], "%s: AUTH_Failure1 explanation %02xh (got %02xh/%02xh)",
		      what[c], rce[c], (unsigned)id, g_in[7]);
		CHECK(closed_within(r.qp, 1500), "%s: the association ends", what[c]);
		raw_close(&r);
	}
	/* Challenges cost the target a DH key each: at most 3 transactions per queue per auth timeout */
	struct raw q;
	if (raw_open(&q, dh)) {
		int ids[4];
		for (int i = 0; i < 4; i++)
			ids[i] = exchange(q.qp, mk_negotiate((uint16_t)(20 + i), 0, ALL_H, 3, ALL_G, 6));
		CHECK(ids[0] == NKV_AUTH_ID_CHALLENGE && ids[1] == NKV_AUTH_ID_CHALLENGE && ids[2] == NKV_AUTH_ID_CHALLENGE,
		      "three restarted transactions get their Challenge (%d %d %d)", ids[0], ids[1], ids[2]);
		CHECK(ids[3] == NKV_AUTH_ID_FAILURE1 && g_in[7] == NKV_AUTH_RCE_INCORRECT_MESSAGE,
		      "the fourth: AUTH_Failure1 07h (got %02xh/%02xh)", (unsigned)ids[3], g_in[7]);
		CHECK(closed_within(q.qp, 1500), "and the association ends");
		raw_close(&q);
	}
	/* AL below the Challenge: Invalid Field, and the host may ask again */
	struct raw r;
	struct nkv_cpl cpl;
	if (raw_open(&r, dh)) {
		uint32_t len = mk_negotiate(9, 0, ALL_H, 3, ALL_G, 6);
		CHECK(auth_cmd(r.qp, true, g_msg, len, len, NKV_AUTH_SECP, &cpl) == 0, "Negotiate");
		CHECK(auth_cmd(r.qp, false, g_in, 100, 100, NKV_AUTH_SECP, &cpl) && cpl.status == 0x002,
		      "Receive with AL 100 < the Challenge (320 bytes): %#x (want 02h)", cpl.status);
		CHECK(auth_cmd(r.qp, false, g_in, 320, 320, NKV_AUTH_SECP, &cpl) == 0 && g_in[1] == NKV_AUTH_ID_CHALLENGE,
		      "... then AL 320: the Challenge");
		raw_close(&r);
	}
}

static void t_raw_teardown(void)
{
	struct raw r;
	struct nkv_cpl cpl;
	struct host *d = &g_hosts[H_DEF];
	int rc;

	/* admin authenticated and enabled; an I/O queue refuses commands until it authenticates */
	if (!raw_open(&r, d) || nkv_auth_run(r.ctrl, r.qp) != 0) {
		CHECK(0, "raw admin queue authenticated");
		raw_close(&r);
		return;
	}
	struct nkv_sqe sqe;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opc = NKV_ADM_FABRICS;
	((uint8_t *)&sqe)[4] = NKV_FCTYPE_PROP_SET;
	nkv_put32((uint8_t *)&sqe + 44, NKV_REG_CC);
	nkv_put64((uint8_t *)&sqe + 48, NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20));
	CHECK(nkv_exec(r.qp, &sqe, NULL, 0, &cpl) == 0, "CC.EN after authentication");
	CHECK(simple(r.qp, NKV_ADM_SET_FEATURES, 0, NKV_FEAT_NUM_QUEUES, 0x10001, &cpl) == 0, "Number of Queues");
	struct nkv_qpair *io = NULL;
	CHECK(nkv_tcp_qp_open(r.ctrl, 1, 8, &io) == 0, "I/O queue socket");
	if (!io) {
		raw_close(&r);
		return;
	}
	io->icd_max = 8192;
	rc = raw_connect_qp(r.ctrl, io, r.cntlid, &cpl);
	CHECK(rc == 0 && (cpl.dw0 & NKV_CONNECT_AUTHREQ_ATR), "I/O Connect: success with ATR (DW0 %#x, status %#x)",
	      cpl.dw0, cpl.status);
	rc = nkv_exist(io, 1, "absent", 6, &cpl);
	CHECK(cpl.status == 0x191, "Exist on the unauthenticated I/O queue: %#x (want 191h)", cpl.status);
	CHECK((rc = nkv_auth_run(r.ctrl, io)) == 0, "the I/O queue authenticates: %s", strerror(-rc));
	rc = nkv_exist(io, 1, "absent", 6, &cpl);
	CHECK(rc == -ENOENT && (cpl.status & 0xff) == 0x87, "Exist after: Key Does Not Exist (%#x)", cpl.status);

	/* a half-done re-authentication of the authenticated admin queue is dropped; the queue lives */
	int dropped = log_count(d->nqn, "transaction dropped");
	uint32_t len = mk_negotiate(0x77, 0, ALL_H, 3, ALL_G, 6);
	CHECK(auth_cmd(r.qp, true, g_msg, len, len, NKV_AUTH_SECP, &cpl) == 0, "re-authentication: Negotiate");
	sleep_ms(AUTH_TMO_MS + 700);
	CHECK(prop_get_cap(r.qp, &cpl) == 0, "the admin queue still works after the re-authentication expired");
	CHECK(log_count(d->nqn, "transaction dropped") == dropped + 1, "and the target said so");
	CHECK(nkv_exist(io, 1, "absent", 6, &cpl) == -ENOENT, "the I/O queue too");

	/* a failed re-authentication on the admin queue ends the association: the I/O queue closes */
	len = mk_negotiate(0x78, 0, ALL_H, 3, ALL_G, 6);
	int id = exchange(r.qp, len);
	size_t dhv = (size_t)nkv_get16(g_in + 10), hl = g_in[6];
	memset(g_msg, 0, 16 + 2 * hl + dhv);
	g_msg[0] = NKV_AUTH_TYPE_DHCHAP;
	g_msg[1] = NKV_AUTH_ID_REPLY;
	nkv_put16(g_msg + 4, 0x78);
	g_msg[6] = (uint8_t)hl;
	nkv_put16(g_msg + 10, (uint16_t)dhv);
	memcpy(g_msg + 16 + 2 * hl, g_in + 16 + hl, dhv);
	id = id == NKV_AUTH_ID_CHALLENGE ? exchange(r.qp, (uint32_t)(16 + 2 * hl + dhv)) : -1;
	CHECK(id == NKV_AUTH_ID_FAILURE1 && g_in[7] == NKV_AUTH_RCE_FAILED, "re-authentication with a wrong response: "
									  "AUTH_Failure1 (%02xh)", (unsigned)id);
	CHECK(closed_within(r.qp, 1500), "the admin queue closes");
	CHECK(closed_within(io, 1500), "and the I/O queue of that association with it");
	nkv_tcp_qp_close(io);
	raw_close(&r);

	/* a failed re-authentication whose AUTH_Failure1 is never asked for: the association ends at the
	 * deadline all the same, I/O queue included */
	if (raw_open(&r, d) && nkv_auth_run(r.ctrl, r.qp) == 0) {
		memset(g_msg, 0, 16);
		g_msg[0] = NKV_AUTH_TYPE_DHCHAP;
		g_msg[1] = NKV_AUTH_ID_SUCCESS2; /* unasked: Failure1 (07h) is owed */
		CHECK(auth_cmd(r.qp, true, g_msg, 16, 16, NKV_AUTH_SECP, &cpl) == 0, "Success2 out of sequence on an "
											   "authenticated queue");
		CHECK(prop_get_cap(r.qp, &cpl) == 0, "the queue still works until the deadline");
		int64_t t0 = now_ms();
		CHECK(closed_within(r.qp, AUTH_TMO_MS + 2000) && now_ms() - t0 >= AUTH_TMO_MS - 300,
		      "the owed AUTH_Failure1 ends the association at the deadline (%lld ms)", (long long)(now_ms() - t0));
		CHECK(log_count(d->nqn, "failed: association ended") >= 1, "and the target said so");
	}
	raw_close(&r);

	/* AUTH_Failure2 from the host: the association ends */
	if (raw_open(&r, d) && nkv_auth_run(r.ctrl, r.qp) == 0) {
		memset(g_msg, 0, 8);
		g_msg[1] = NKV_AUTH_ID_FAILURE2;
		g_msg[6] = NKV_AUTH_RC_FAILURE;
		g_msg[7] = NKV_AUTH_RCE_FAILED;
		CHECK(auth_cmd(r.qp, true, g_msg, 8, 8, NKV_AUTH_SECP, &cpl) == 0, "AUTH_Failure2 sent");
		CHECK(closed_within(r.qp, 1500), "AUTH_Failure2 ends the association");
	}
	raw_close(&r);
}

static void t_raw_timeouts(void)
{
	struct raw r;
	struct host *d = &g_hosts[H_DEF];

	/* a queue that never starts */
	int64_t t0 = now_ms();
	CHECK(raw_open(&r, d), "Connect, then nothing");
	bool c = closed_within(r.qp, AUTH_TMO_MS + 2000);
	int64_t t = now_ms() - t0;
	CHECK(c && t >= AUTH_TMO_MS - 100, "closed %lld ms after Connect (auth timeout %d ms)", (long long)t, AUTH_TMO_MS);
	raw_close(&r);
	CHECK(log_count(d->nqn, "dhchap timeout: ") >= 1, "the target logged it");
	/* a transaction left after the Challenge */
	t0 = now_ms();
	CHECK(raw_open(&r, d) && exchange(r.qp, mk_negotiate(3, 0, ALL_H, 3, ALL_G, 6)) == NKV_AUTH_ID_CHALLENGE,
	      "Negotiate + Challenge, then nothing");
	c = closed_within(r.qp, AUTH_TMO_MS + 2000);
	t = now_ms() - t0;
	CHECK(c && t >= AUTH_TMO_MS - 100, "closed %lld ms after Connect", (long long)t);
	raw_close(&r);
	/* a Failure1 owed but never asked for: closed by the same deadline */
	t0 = now_ms();
	memset(g_msg, 0, 16);
	g_msg[0] = NKV_AUTH_TYPE_DHCHAP;
	g_msg[1] = NKV_AUTH_ID_SUCCESS2;
	struct nkv_cpl cpl;
	CHECK(raw_open(&r, d) && auth_cmd(r.qp, true, g_msg, 16, 16, NKV_AUTH_SECP, &cpl) == 0,
	      "Success2 out of sequence (the Send itself succeeds)");
	c = closed_within(r.qp, AUTH_TMO_MS + 2000);
	CHECK(c, "closed %lld ms later without asking for the AUTH_Failure1", (long long)(now_ms() - t0));
	raw_close(&r);
}

/* ---- DH computations an unauthenticated peer can ask for ---------------------------------------- */

static const uint8_t G8192[] = {NKV_DHCHAP_FFDHE8192};

/* A host NQN that reconnects in a loop, each time a Negotiate offering only ffdhe8192 and the
 * Receive that asks for its Challenge (the pattern that costs the target a key generation each):
 * after its share (a burst of 16, then 4 a second) the target answers AUTH_Failure1 01h and ends the
 * association. The bound is computed from the time the loop took, so a slow machine only loosens it. */
static void t_dh_limits(void)
{
	struct host *f = &g_hosts[H_FLOOD];
	int challenges = 0, refused = 0, other = 0, attempts = 0;
	int64_t t0 = now_ms();
	bool closed = false;

	while (attempts < 200 && !refused) {
		struct raw r;
		attempts++;
		if (!raw_open(&r, f)) {
			other++;
			raw_close(&r);
			continue;
		}
		int id = exchange(r.qp, mk_negotiate((uint16_t)attempts, 0, ALL_H, 3, G8192, 1));
		if (id == NKV_AUTH_ID_CHALLENGE && nkv_get16(g_in + 10) == 1024) {
			challenges++;
		} else if (id == NKV_AUTH_ID_FAILURE1 && g_in[7] == NKV_AUTH_RCE_FAILED) {
			refused++;
			closed = closed_within(r.qp, 1500);
		} else {
			other++;
		}
		raw_close(&r);
	}
	double secs = (double)(now_ms() - t0) / 1000.0;
	/* the burst, the refill over the loop's time, and one token of rounding */
	int bound = 16 + (int)(4 * secs) + 1;
	printf("# %d attempts in %.2f s: %d Challenges, %d refused, %d other\n", attempts, secs, challenges, refused,
	       other);
	CHECK(refused == 1, "a host NQN reconnecting in a loop is refused once its share is spent (%d Challenges in "
			    "%d attempts)", challenges, attempts);
	CHECK(challenges <= bound, "%d Challenges in %.2f s: at most %d (16, then 4 a second)", challenges, secs, bound);
	CHECK(challenges >= 8, "the first ones are served: %d Challenges", challenges);
	CHECK(other == 0, "every attempt got a Challenge or AUTH_Failure1 01h (%d others)", other);
	CHECK(closed, "the refused association ends");
	CHECK(log_count("dhchap failure1: ", "too many DH transactions of this host NQN") >= 1,
	      "the target said why");
	/* another host NQN from the same address still authenticates, and so does the refused one on an
	 * association whose admin queue has the secret (an I/O queue costs no token) */
	struct nkv_ctrl *c;
	int rc = conn(&g_hosts[H_DEF], g_hosts[H_DEF].key, NULL, &c);
	CHECK(rc == 0, "another host NQN from the same address authenticates: %s", strerror(-rc));
	if (rc == 0)
		nkv_disconnect(c);
}

static void child_log(void *arg);

/* The attacker's half of t_dh_offload: Negotiate, then the Receive that waits for the Challenge. */
struct offload {
	struct raw r;
	atomic_bool receiving;
	int id;
	uint16_t dhvlen;
	int64_t challenge_ms;
};

static uint8_t g_msg2[128], g_in2[4096];

static void *offload_attacker(void *arg)
{
	struct offload *o = arg;
	struct nkv_cpl cpl;
	memcpy(g_msg2, g_msg, 72);
	o->id = -1;
	if (auth_cmd(o->r.qp, true, g_msg2, 72, 72, NKV_AUTH_SECP, &cpl) == 0) {
		atomic_store(&o->receiving, true);
		if (auth_cmd(o->r.qp, false, g_in2, sizeof(g_in2), sizeof(g_in2), NKV_AUTH_SECP, &cpl) == 0) {
			o->id = g_in2[1];
			o->dhvlen = nkv_get16(g_in2 + 10);
		}
	}
	o->challenge_ms = now_ms();
	atomic_store(&o->receiving, true);
	return NULL;
}

/* A daemon with one reactor, whose DH computations each take @delay_ms more (NKV_TEST_DH_DELAY_MS):
 * while one Challenge is being computed, another host's Retrieves on that reactor complete. Were
 * the key generated on the reactor, they would wait for it. */
static void t_dh_offload(const char *daemon, const char *conf)
{
	const int delay_ms = 2500;
	char listen[64], port2[16], delay[16];
	int port = (int)daemon_free_port();
	snprintf(port2, sizeof(port2), "%d", port);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(delay, sizeof(delay), "%d", delay_ms);
	setenv("NKV_TEST_DH_DELAY_MS", delay, 1);
	char log2[sizeof(g_log)];
	snprintf(log2, sizeof(log2), "%s/daemon-offload.log", g_dir);
	const char *dargv[] = {daemon, "-c", conf, "--backend", "mem", "--listen", listen, "--discovery", "none",
			       "--reactors", "1", "--auth-timeout-ms", "4000", "--log-level", "debug", NULL};
	pid_t pid = daemon_spawn(dargv, child_log, log2);
	unsetenv("NKV_TEST_DH_DELAY_MS");
	bool ready = pid > 0 && daemon_wait_port(pid, port);
	CHECK(ready, "second daemon (one reactor) listening on %s", listen);
	if (!ready) {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		return;
	}
	char saved[16];
	strcpy(saved, g_port);
	strcpy(g_port, port2);
	/* the victim: a host without a secret, connected first, one I/O queue */
	struct nkv_ctrl *vc = NULL;
	struct nkv_qpair *vq = NULL;
	static uint8_t v[4096], got[4096];
	uint32_t size = 0;
	int rc = conn(&g_hosts[H_PLAIN], NULL, NULL, &vc);
	CHECK(rc == 0 && nkv_qpair_create(vc, 16, &vq) == 0 && nkv_store(vq, 1, "victim", 6, v, sizeof(v), 0, NULL) == 0,
	      "victim connected, one I/O queue, a 4 KiB value stored");
	struct offload o;
	memset(&o, 0, sizeof(o));
	pthread_t th;
	bool started = false;
	mk_negotiate(0x4242, 0, ALL_H, 3, G8192, 1);
	if (vq && raw_open(&o.r, &g_hosts[H_512DH8192]))
		started = pthread_create(&th, NULL, offload_attacker, &o) == 0;
	CHECK(started, "attacker: Connect, then Negotiate (ffdhe8192) and Receive on a thread");
	if (started) {
		while (!atomic_load(&o.receiving))
			sleep_ms(5);
		sleep_ms(300); /* the Receive is on the reactor by now: its key generation runs */
		int ok = 0, n = 20;
		int64_t worst = 0, t1 = now_ms();
		for (int i = 0; i < n; i++) {
			int64_t a = now_ms();
			ok += nkv_retrieve(vq, 1, "victim", 6, got, sizeof(got), &size, NULL) == 0 && size == sizeof(v);
			int64_t d = now_ms() - a;
			worst = d > worst ? d : worst;
		}
		int64_t victim_done = now_ms();
		pthread_join(th, NULL);
		printf("# victim: %d Retrieves in %lld ms (slowest %lld ms); Challenge %lld ms after them\n", n,
		       (long long)(victim_done - t1), (long long)worst, (long long)(o.challenge_ms - victim_done));
		CHECK(ok == n, "victim: %d of %d Retrieves succeeded", ok, n);
		CHECK(victim_done < o.challenge_ms, "the victim's Retrieves completed while the Challenge was being "
						    "computed (%lld ms before it)", (long long)(o.challenge_ms - victim_done));
		CHECK(o.id == NKV_AUTH_ID_CHALLENGE && o.dhvlen == 1024, "and the Challenge came (id %02xh, DHVLEN %u)",
		      (unsigned)o.id, o.dhvlen);
	}
	raw_close(&o.r);
	/* A transaction whose deadline passes while its shared secret is computed: Challenge after
	 * delay_ms, then a Reply (the controller's own DH value: valid) whose computation takes
	 * delay_ms more, past the 4 s deadline. The queue closes with the job running; the job's
	 * completion then finds the transaction gone, and the daemon serves on (and exits cleanly). */
	struct raw e;
	strcpy(g_log_saved, g_log);
	strcpy(g_log, log2); /* log_count reads this daemon's log */
	if (vq && raw_open(&e, &g_hosts[H_384DH])) {
		int before = log_count("dhchap timeout: ", g_hosts[H_384DH].nqn);
		int id = exchange(e.qp, mk_negotiate(0x99, 0, ALL_H, 3, ALL_G, 6));
		uint32_t len = 16 + 2 * 48 + 256;
		int id2 = -2;
		if (id == NKV_AUTH_ID_CHALLENGE) {
			static uint8_t reply[16 + 2 * 48 + 256];
			memset(reply, 0, sizeof(reply));
			reply[0] = NKV_AUTH_TYPE_DHCHAP;
			reply[1] = NKV_AUTH_ID_REPLY;
			nkv_put16(reply + 4, 0x99);
			reply[6] = 48;
			nkv_put16(reply + 10, 256);
			memcpy(reply + 16 + 96, g_in + 16 + 48, 256);
			memcpy(g_msg, reply, len);
			id2 = exchange(e.qp, len);
		}
		CHECK(id == NKV_AUTH_ID_CHALLENGE && id2 == -1, "a Reply whose computation outlives the deadline: the "
								 "queue closes (Challenge %02xh, then %d)", (unsigned)id, id2);
		raw_close(&e);
		sleep_ms(delay_ms); /* the job comes back to a closed queue */
		CHECK(log_count("dhchap timeout: ", g_hosts[H_384DH].nqn) == before + 1, "the target logged the deadline");
		CHECK(nkv_retrieve(vq, 1, "victim", 6, got, sizeof(got), &size, NULL) == 0, "the victim still works");
	}
	strcpy(g_log, g_log_saved);
	nkv_qpair_destroy(vq);
	if (vc)
		nkv_disconnect(vc);
	strcpy(g_port, saved);
	daemon_stop(pid, 10);
}

/* ---- the nkv CLI ------------------------------------------------------------------------------ */

static int cli(const char *args, char *out, size_t cap)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "%s -a 127.0.0.1 -s %s -n %s %s 2>&1", g_nkv, g_port, SUB, args);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(out, 1, cap - 1, p) : 0;
	out[n] = '\0';
	int st = p ? pclose(p) : -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void t_cli(void)
{
	struct host *d = &g_hosts[H_DEF];
	char args[1024], out[4096], wrong[128];
	mk_secret(1, 32, 4242, wrong);
	snprintf(args, sizeof(args), "-q %s --dhchap-secret '%s' --dhchap-ctrl-secret '%s' exist clikey", d->nqn, d->key,
		 d->ckey);
	CHECK(cli(args, out, sizeof(out)) == 2, "nkv exist with both secrets: exit 2 (absent key), got: %s", out);
	snprintf(args, sizeof(args), "-q %s exist clikey", d->nqn);
	CHECK(cli(args, out, sizeof(out)) == 1 && strstr(out, "requires DH-HMAC-CHAP authentication"),
	      "no secret: exit 1 naming the cause: %s", out);
	snprintf(args, sizeof(args), "-q %s --dhchap-secret '%s' exist clikey", d->nqn, wrong);
	CHECK(cli(args, out, sizeof(out)) == 1 && strstr(out, "DH-HMAC-CHAP secret"), "wrong secret: exit 1: %s", out);
	snprintf(args, sizeof(args), "-q %s --dhchap-secret '%s' --dhchap-ctrl-secret '%s' exist clikey", d->nqn, d->key,
		 wrong);
	CHECK(cli(args, out, sizeof(out)) == 1 && strstr(out, "failed to authenticate itself"),
	      "wrong controller secret: exit 1: %s", out);
	snprintf(args, sizeof(args), "-q %s --dhchap-secret 'DHHC-1:01:abc:' exist clikey", d->nqn);
	CHECK(cli(args, out, sizeof(out)) == 64 && strstr(out, "bad --dhchap-secret") && !strstr(out, "abc"),
	      "malformed secret: usage error that does not echo it: %s", out);
	snprintf(args, sizeof(args), "-q %s --dhchap-ctrl-secret '%s' exist clikey", d->nqn, d->ckey);
	CHECK(cli(args, out, sizeof(out)) == 64, "--dhchap-ctrl-secret alone: usage error: %s", out);
	snprintf(args, sizeof(args), "-q %s --dhchap-secret '%s' -o json exist clikey", d->nqn, wrong);
	CHECK(cli(args, out, sizeof(out)) == 1 && strstr(out, "\"EACCES\""), "-o json: EACCES: %s", out);
}

/* ---- main ------------------------------------------------------------------------------------- */

static void child_log(void *arg)
{
	int fd = open((const char *)arg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		dup2(fd, 2);
		close(fd);
	}
}

static bool write_config(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return false;
	fprintf(f, "{\"subsystems\": [{\"nqn\": \"%s\", \"namespaces\": [{\"nsid\": 1}], \"allowed_hosts\": [", SUB);
	for (size_t i = 0; i < NHOSTS; i++) {
		struct host *h = &g_hosts[i];
		snprintf(h->nqn, sizeof(h->nqn), HOSTP "%02zx", i);
		if (h->hh < 0) {
			fprintf(f, "%s\"%s\"", i ? ", " : "", h->nqn);
			continue;
		}
		mk_secret(h->hh, h->len, (int)i + 1, h->key);
		fprintf(f, "%s{\"nqn\": \"%s\", \"dhchap_key\": \"%s\"", i ? ", " : "", h->nqn, h->key);
		if (h->chh >= 0) {
			mk_secret(h->chh, h->clen, (int)i + 101, h->ckey);
			fprintf(f, ", \"dhchap_ctrl_key\": \"%s\"", h->ckey);
		}
		if (h->hash)
			fprintf(f, ", \"dhchap_hash\": \"%s\"", h->hash);
		if (h->group)
			fprintf(f, ", \"dhchap_dhgroup\": \"%s\"", h->group);
		fprintf(f, "}");
	}
	fprintf(f, "]}]}\n");
	return fclose(f) == 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s PATH/TO/rados-nkv PATH/TO/nkv\n", argv[0]);
		return 2;
	}
	g_nkv = argv[2];
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(g_dir, sizeof(g_dir), "%s/auth_func.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	char conf[256], listen[64], tmo[16];
	snprintf(conf, sizeof(conf), "%s/conf.json", g_dir);
	snprintf(g_log, sizeof(g_log), "%s/daemon.log", g_dir);
	umask(077); /* the configuration holds secrets */
	int port = (int)daemon_free_port();
	snprintf(g_port, sizeof(g_port), "%d", port);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(tmo, sizeof(tmo), "%d", AUTH_TMO_MS);
	CHECK(write_config(conf), "configuration written");
	const char *dargv[] = {argv[1], "-c", conf, "--backend", "mem", "--listen", listen, "--discovery", "none",
			       "--auth-timeout-ms", tmo, "--log-level", "debug", NULL};
	pid_t pid = daemon_spawn(dargv, child_log, g_log);
	bool ready = pid > 0 && daemon_wait_port(pid, port);
	CHECK(ready, "daemon listening on %s", listen);
	if (ready) {
		static void (*const groups[])(void) = {t_policies, t_refusals, t_reauth_queues, t_raw_gates,
						       t_raw_failures, t_raw_teardown, t_raw_timeouts, t_dh_limits, t_cli};
		static const char *const names[] = {"hashes and DH groups", "refusals", "re-authentication",
						    "raw: gates", "raw: AUTH_Failure1", "raw: teardown",
						    "raw: deadlines", "DH limits", "nkv CLI"};
		for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
			unsigned f = h_fail, p = h_pass;
			int64_t t0 = now_ms();
			groups[i]();
			printf("== %s: %u passed, %u failed (%lld ms)\n", names[i], h_pass - p, h_fail - f,
			       (long long)(now_ms() - t0));
		}
		daemon_stop(pid, 10);
		int64_t t0 = now_ms();
		unsigned f = h_fail, p = h_pass;
		t_dh_offload(argv[1], conf);
		printf("== DH off the reactor: %u passed, %u failed (%lld ms)\n", h_pass - p, h_fail - f,
		       (long long)(now_ms() - t0));
	} else if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (h_fail) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "tail -n 60 %s", g_log);
		fflush(stdout);
		if (system(cmd) < 0)
			perror("system");
	}
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	if (system(cmd) < 0)
		perror("system");
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
