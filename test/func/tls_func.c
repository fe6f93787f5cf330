/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls_func.c - NVMe/TCP over TLS 1.3 with PSKs (TP 8011) end to end: libnkv against a rados-nkv daemon
 * (mem backend) that the test starts with a plain listener, a TLS listener and a discovery listener,
 * two subsystems and three hosts' keys.
 *
 *   - Store/Retrieve/List over TLS with values of 0 B to 16 MiB (in-capsule, R2T and C2HData through
 *     the session), with header and data digests inside TLS, with a SHA-256 and a SHA-384 key, with
 *     PSK identity versions 0 and 1; the engine (4 queue pairs, 64 x 256 KiB in flight);
 *   - refusals, each a clear errno within seconds: a wrong key for a known identity, a host with no
 *     key, an identity for a subsystem with no key (-EKEYREJECTED); a plain client on the TLS-only
 *     listener and a TLS client on the plain one (-ECONNRESET); a Connect naming another host or
 *     subsystem than the PSK identity (Connect Invalid Host, 84h), sent by a raw TLS client, which
 *     also checks that a command after a TLS KeyUpdate (update requested) is answered;
 *   - both listeners at once on the same data; the discovery log's TREQ and TSAS SECTYPE per port,
 *     read over plain TCP and over TLS;
 *   - handshake deadlines: a silent connection and one stalled inside the ClientHello are closed at
 *     --tls-handshake-timeout-ms while another host's session keeps working.
 * The daemon must exit 0 at the end (sanitizer clean).
 *
 * usage: tls_func PATH_TO_RADOS_NKV   (exit 77: no daemon binary)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/clock.h"
#include "common/nvme_psk.h"
#include "common/tls.h"
#include "daemon_spawn.h"
#include "nkv/nkv.h"

unsigned h_pass, h_fail;

#define SUB1 "nqn.2026-11.io.rados-nkv:tls-one"
#define SUB2 "nqn.2026-11.io.rados-nkv:tls-two"
#define HOSTA "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-0000-4000-8000-000000000001"
#define HOSTB "nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-4000-8000-000000000002"
#define HOSTC "nqn.2014-08.org.nvmexpress:uuid:cccccccc-0000-4000-8000-000000000003"
#define HANDSHAKE_MS 1500

static int g_plain, g_tls, g_disc;
static char g_sp[16], g_st[16], g_sd[16];
static char g_keya[NKV_PSK_STR_MAX], g_keyb[NKV_PSK_STR_MAX], g_wrong[NKV_PSK_STR_MAX], g_filea[64];

/* A key in the interchange format from a seed: 32 bytes with hh 01, or 48 with hh 02. */
static void make_key(char *out, unsigned seed, uint8_t hmac)
{
	struct nkv_psk k = {.len = hmac == 2 ? 48 : 32, .hmac = hmac};
	for (unsigned i = 0; i < k.len; i++)
		k.key[i] = (uint8_t)(seed * 97 + i * 31 + 7);
	nkv_psk_format(&k, out, NKV_PSK_STR_MAX);
}

static struct nkv_conn_opts opts(const char *host, const char *key, bool hd, bool dd, uint8_t idv)
{
	return (struct nkv_conn_opts){.hostnqn = host, .tls = key != NULL, .tls_key = key, .hdgst = hd, .ddgst = dd,
				      .tls_identity = idv, .timeout_ms = 10000};
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/* ---- data over TLS ------------------------------------------------------------------------------ */

static void t_roundtrip(const char *what, const char *host, const char *key, bool hd, bool dd, uint8_t idv)
{
	static const uint32_t sizes[] = {0, 100, 4096, 8193, 65536, 1u << 20, 5u << 20, 16u << 20};
	struct nkv_conn_opts o = opts(host, key, hd, dd, idv);
	struct nkv_ctrl *c = NULL;
	struct nkv_qpair *qp = NULL;
	uint8_t *v = malloc(16u << 20), *r = malloc(16u << 20), list[4096];
	int rc = nkv_connect("127.0.0.1", g_st, SUB1, &o, &c);

	CHECK(rc == 0, "%s: connect over TLS: %d (%s)", what, rc, strerror(-rc));
	if (rc == 0 && (rc = nkv_qpair_create(c, 0, &qp)) != 0)
		CHECK(0, "%s: I/O queue over TLS: %d", what, rc);
	for (size_t i = 0; qp && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char k[16];
		uint32_t vs = 0;
		struct nkv_cpl cpl;
		snprintf(k, sizeof(k), "t%c%u", what[0], sizes[i]);
		fill(v, sizes[i], (unsigned)i + (unsigned)what[0]);
		rc = nkv_store(qp, 1, k, (unsigned)strlen(k), v, sizes[i], 0, NULL);
		CHECK(rc == 0, "%s: store %u bytes: %d", what, sizes[i], rc);
		memset(r, 0xa5, sizes[i]);
		rc = nkv_retrieve(qp, 1, k, (unsigned)strlen(k), r, 16u << 20, &vs, &cpl);
		CHECK(rc == 0 && vs == sizes[i] && cpl.xfer == sizes[i] && memcmp(v, r, sizes[i]) == 0,
		      "%s: retrieve %u bytes: rc %d size %u xfer %u", what, sizes[i], rc, vs, cpl.xfer);
	}
	if (qp) { /* List: every key of this round, in order */
		struct nkv_cpl cpl;
		char first[16];
		snprintf(first, sizeof(first), "t%c", what[0]);
		rc = nkv_list(qp, 1, first, (unsigned)strlen(first), list, sizeof(list), &cpl);
		uint64_t pos = 0;
		uint8_t kb[16], prev[17] = {0};
		unsigned kl, n = 0, prevl = 0;
		bool ordered = true;
		while (rc == 0 && nkv_list_next(list, cpl.xfer, &pos, kb, &kl) == 1) {
			if (kl < 2 || kb[0] != 't' || kb[1] != (uint8_t)what[0])
				break;
			ordered &= n == 0 || memcmp(prev, kb, prevl < kl ? prevl : kl) < 0 ||
				   (memcmp(prev, kb, prevl < kl ? prevl : kl) == 0 && prevl < kl);
			memcpy(prev, kb, kl);
			prevl = kl;
			n++;
		}
		CHECK(rc == 0 && n == sizeof(sizes) / sizeof(sizes[0]) && ordered, "%s: list: rc %d, %u keys, ordered %d",
		      what, rc, n, ordered);
	}
	nkv_qpair_destroy(qp);
	nkv_disconnect(c);
	free(v);
	free(r);
}

/* The engine: several TLS queue pairs on their own threads, many PDUs in flight on each. */
static void t_engine(void)
{
	enum { N = 64, SZ = 256 * 1024 };
	struct nkv_conn_opts o = opts(HOSTA, g_keya, false, true, 0);
	struct nkv_engine_opts eo = {.queues = 4};
	struct nkv_ctrl *c = NULL;
	struct nkv_engine *e = NULL;
	static struct nkv_op ops[N];
	uint8_t *v = malloc((size_t)N * SZ), *r = malloc((size_t)N * SZ);
	int rc = nkv_connect("127.0.0.1", g_st, SUB1, &o, &c);

	if (rc == 0)
		rc = nkv_engine_create(c, &eo, &e);
	CHECK(rc == 0, "engine over TLS: %d", rc);
	for (int pass = 0; e && pass < 2; pass++) {
		for (unsigned i = 0; i < N; i++) {
			ops[i] = (struct nkv_op){.type = pass ? NKV_OP_RETRIEVE : NKV_OP_STORE, .nsid = 1, .len = SZ,
						 .buf = (pass ? r : v) + (size_t)i * SZ};
			ops[i].klen = (uint8_t)snprintf((char *)ops[i].key, 16, "eng%u", i);
			if (!pass)
				fill(ops[i].buf, SZ, i + 1000);
		}
		rc = nkv_engine_run(e, ops, N);
		CHECK(rc == 0, "engine %s x%u of %u KiB over TLS: %d failed", pass ? "retrieve" : "store", N, SZ / 1024, rc);
	}
	CHECK(e && memcmp(v, r, (size_t)N * SZ) == 0, "engine: values read back differ");
	nkv_engine_destroy(e);
	nkv_disconnect(c);
	free(v);
	free(r);
}

/* ---- refusals ----------------------------------------------------------------------------------- */

static void expect_refused(const char *what, const char *port, const char *sub, struct nkv_conn_opts o, int want)
{
	struct nkv_ctrl *c = NULL;
	uint64_t t0 = nkv_now_ms();
	int rc = nkv_connect("127.0.0.1", port, sub, &o, &c);
	uint64_t ms = nkv_now_ms() - t0;
	CHECK(rc == want && ms < 5000, "%s: %d (%s) after %llu ms, want %d (%s)", what, rc, strerror(-rc),
	      (unsigned long long)ms, want, strerror(-want));
	nkv_disconnect(c);
}

static void t_refusals(void)
{
	expect_refused("wrong key, known identity", g_st, SUB1, opts(HOSTA, g_wrong, false, false, 0), -EKEYREJECTED);
	expect_refused("wrong key, identity version 1", g_st, SUB1, opts(HOSTA, g_wrong, false, false, 1), -EKEYREJECTED);
	expect_refused("host without a key", g_st, SUB1, opts(HOSTC, g_keya, false, false, 0), -EKEYREJECTED);
	expect_refused("host B's key for subsystem two (has none there)", g_st, SUB2, opts(HOSTB, g_keyb, false, false, 0),
		       -EKEYREJECTED);
	expect_refused("SHA-384 key given as host A's", g_st, SUB1, opts(HOSTA, g_keyb, false, false, 0), -EKEYREJECTED);
	expect_refused("plain client on the TLS-only listener", g_st, SUB1, opts(HOSTA, NULL, false, false, 0), -ECONNRESET);
	expect_refused("TLS client on the plain listener", g_sp, SUB1, opts(HOSTA, g_keya, false, false, 0), -ECONNRESET);
	expect_refused("a malformed key", g_st, SUB1, opts(HOSTA, "NVMeTLSkey-1:01:AAAA:", false, false, 0), -EMSGSIZE);
	expect_refused("a missing key file", g_st, SUB1, opts(HOSTA, "@/nonexistent/key", false, false, 0), -ENOENT);
}

/* ---- a raw TLS client: a Connect that names another host or subsystem than its PSK identity --------- */

static struct nkv_tls_psk g_raw_psk;

static int raw_use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen, SSL_SESSION **sess)
{
	const unsigned char suite[2] = {0x13, 0x01};
	SSL_SESSION *s = SSL_SESSION_new();
	(void)md;
	SSL_SESSION_set1_master_key(s, g_raw_psk.key, g_raw_psk.len);
	SSL_SESSION_set_cipher(s, SSL_CIPHER_find(ssl, suite));
	SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION);
	*id = (const unsigned char *)g_raw_psk.identity;
	*idlen = strlen(g_raw_psk.identity);
	*sess = s;
	return 1;
}

static int tcp_open(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Blocking-style loops over the nonblocking session (the socket is blocking here). */
static bool raw_send(struct nkv_tls *t, const void *b, size_t n)
{
	struct iovec iov = {(void *)b, n};
	while (iov.iov_len) {
		ssize_t w = nkv_tls_sendv(t, &iov, 1);
		if (w < 0)
			return false;
		iov.iov_base = (uint8_t *)iov.iov_base + w;
		iov.iov_len -= (size_t)w;
	}
	return nkv_tls_flush(t) == 0;
}

static bool raw_recv(struct nkv_tls *t, void *b, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = nkv_tls_recv(t, (uint8_t *)b + got, n - got);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* A Property Get of CAP on the admin queue: @return its status, or -1. */
static int raw_prop_get(struct nkv_tls *t)
{
	uint8_t pdu[72] = {NKV_TCP_PDU_CMD, 0, 72, 0}, rsp[24];
	nkv_put32(pdu + 4, 72);
	pdu[8] = NKV_ADM_FABRICS;
	pdu[9] = 0x40;
	pdu[8 + 2] = 7; /* CID */
	pdu[8 + 4] = NKV_FCTYPE_PROP_GET;
	pdu[8 + 24 + 15] = NKV_SGL_TRANSPORT_DATA_BLOCK;
	pdu[8 + 40] = 1; /* 8 bytes */
	if (!raw_send(t, pdu, sizeof(pdu)) || !raw_recv(t, rsp, 24) || rsp[0] != NKV_TCP_PDU_RSP)
		return -1;
	return (nkv_get16(rsp + 8 + 14) >> 1) & 0x7ff;
}

/* TLS as host A for SUB1, then ICReq and an admin Connect for (@host, @sub); with @key_update, then a
 * TLS KeyUpdate that asks the target to update its keys too, and a command after it.
 * @return the Connect's status (or the command's, with @key_update), or -1. */
static int raw_connect(const char *host, const char *sub, bool key_update)
{
	struct nkv_psk k;
	struct nkv_tls t;
	int fd = tcp_open(g_tls), st = -1;
	SSL_CTX *ctx = nkv_tls_ctx_new(false, 1);
	uint8_t ic[128] = {NKV_TCP_PDU_ICREQ, 0, 128}, pdu[72 + 1024], rsp[128];

	nkv_psk_parse(g_keya, &k);
	nkv_psk_derive(&k, 0, HOSTA, SUB1, &g_raw_psk);
	if (fd < 0 || !ctx || nkv_tls_init(&t, ctx, fd, false) < 0)
		goto out;
	SSL_set_psk_use_session_callback(t.ssl, raw_use_psk);
	if (nkv_tls_handshake(&t) != 0)
		goto fini;
	nkv_put32(ic + 4, 128);
	if (!raw_send(&t, ic, 128) || !raw_recv(&t, rsp, 128) || rsp[0] != NKV_TCP_PDU_ICRESP)
		goto fini;
	memset(pdu, 0, sizeof(pdu));
	pdu[0] = NKV_TCP_PDU_CMD;
	pdu[2] = 72;
	pdu[3] = 72; /* PDO: the data follows the header */
	nkv_put32(pdu + 4, sizeof(pdu));
	uint8_t *s = pdu + 8;
	s[0] = NKV_ADM_FABRICS;
	s[1] = 0x40; /* PSDT 01b: SGL */
	s[4] = NKV_FCTYPE_CONNECT;
	nkv_put32(s + 24 + 8, 1024);
	s[24 + 15] = NKV_SGL_DATA_BLOCK_OFFSET;
	nkv_put16(s + 44, 31);
	struct nkv_connect_data *d = (struct nkv_connect_data *)(pdu + 72);
	nkv_put16(&d->cntlid, NKV_CNTLID_DYNAMIC);
	snprintf(d->subnqn, sizeof(d->subnqn), "%s", sub);
	snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", host);
	if (raw_send(&t, pdu, sizeof(pdu)) && raw_recv(&t, rsp, 24) && rsp[0] == NKV_TCP_PDU_RSP)
		st = (nkv_get16(rsp + 8 + 14) >> 1) & 0x7ff;
	if (st == 0 && key_update) /* the target reads the KeyUpdate, answers with its own, goes on */
		st = SSL_key_update(t.ssl, SSL_KEY_UPDATE_REQUESTED) == 1 ? raw_prop_get(&t) : -1;
fini:
	nkv_tls_fini(&t);
out:
	SSL_CTX_free(ctx);
	if (fd >= 0)
		close(fd);
	return st;
}

static void t_identity_binding(void)
{
	int st = raw_connect(HOSTA, SUB1, false);
	CHECK(st == 0, "raw TLS client, Connect matching its identity: status %#x", st);
	st = raw_connect(HOSTA, SUB1, true);
	CHECK(st == 0, "a command after a TLS KeyUpdate (update requested): status %#x", st);
	st = raw_connect(HOSTB, SUB1, false);
	CHECK(st == 0x184, "Connect as host B over host A's PSK: status %#x, want 184h (Connect Invalid Host)", st);
	st = raw_connect(HOSTA, SUB2, false);
	CHECK(st == 0x184, "Connect to subsystem two over a PSK for subsystem one: status %#x, want 184h", st);
}

/* ---- both listeners, discovery ------------------------------------------------------------------ */

static void t_both_listeners(void)
{
	struct nkv_conn_opts plain = opts(HOSTC, NULL, false, false, 0), tls = opts(HOSTA, g_keya, false, false, 0);
	struct nkv_ctrl *cp = NULL, *ct = NULL;
	struct nkv_qpair *qp = NULL, *qt = NULL;
	uint8_t v[20000], r[20000];
	uint32_t vs = 0;
	int rc1 = nkv_connect("127.0.0.1", g_sp, SUB1, &plain, &cp), rc2 = nkv_connect("127.0.0.1", g_st, SUB1, &tls, &ct);

	CHECK(rc1 == 0 && rc2 == 0, "plain %d and TLS %d controllers at once", rc1, rc2);
	if (rc1 == 0 && rc2 == 0 && nkv_qpair_create(cp, 0, &qp) == 0 && nkv_qpair_create(ct, 0, &qt) == 0) {
		fill(v, sizeof(v), 77);
		CHECK(nkv_store(qp, 1, "both", 4, v, sizeof(v), 0, NULL) == 0, "store over plain TCP");
		CHECK(nkv_retrieve(qt, 1, "both", 4, r, sizeof(r), &vs, NULL) == 0 && vs == sizeof(v) &&
			      memcmp(v, r, sizeof(v)) == 0,
		      "retrieve over TLS of what plain TCP stored");
		fill(v, sizeof(v), 78);
		CHECK(nkv_store(qt, 1, "both", 4, v, sizeof(v), 0, NULL) == 0, "store over TLS");
		CHECK(nkv_retrieve(qp, 1, "both", 4, r, sizeof(r), &vs, NULL) == 0 && memcmp(v, r, sizeof(v)) == 0,
		      "retrieve over plain TCP of what TLS stored");
	}
	nkv_qpair_destroy(qp);
	nkv_qpair_destroy(qt);
	nkv_disconnect(cp);
	nkv_disconnect(ct);
}

/* The log page itself: TREQ and TSAS SECTYPE of each entry, by port. */
static void check_raw_log(const char *what, const char *port, struct nkv_conn_opts o)
{
	struct nkv_ctrl *c = NULL;
	uint8_t log[4096] = {0};
	struct nkv_sqe s = {.opc = NKV_ADM_GET_LOG_PAGE};
	struct nkv_cpl cpl;
	int rc = nkv_connect("127.0.0.1", port, NKV_DISCOVERY_NQN, &o, &c);

	nkv_put32(&s.cdw10, NKV_LID_DISCOVERY | ((sizeof(log) / 4 - 1) << 16));
	if (rc == 0)
		rc = nkv_admin(c, &s, log, sizeof(log), &cpl);
	CHECK(rc == 0, "%s: Get Log Page 70h: %d", what, rc);
	unsigned n = (unsigned)nkv_get64(log + 8), secure = 0, plainn = 0;
	for (unsigned i = 0; rc == 0 && i < n && i < 3; i++) {
		const struct nkv_disc_log_entry *e = (const struct nkv_disc_log_entry *)(log + 1024 * (i + 1));
		unsigned p = (unsigned)strtoul(e->trsvcid, NULL, 10);
		if ((int)p == g_tls) {
			secure++;
			CHECK((e->treq & 3) == NKV_TREQ_REQUIRED && e->tsas[0] == NKV_TCP_SECTYPE_TLS13,
			      "%s: TLS port entry TREQ %#x SECTYPE %u", what, e->treq, e->tsas[0]);
		} else if ((int)p == g_plain) {
			plainn++;
			CHECK((e->treq & 3) == NKV_TREQ_NOT_SPECIFIED && e->tsas[0] == NKV_TCP_SECTYPE_NONE,
			      "%s: plain port entry TREQ %#x SECTYPE %u", what, e->treq, e->tsas[0]);
		}
	}
	CHECK(n == 4 && secure + plainn == 3, "%s: %u entries (want 4: 2 ports x 2 subsystems; 3 read here)", what, n);
	nkv_disconnect(c);
}

static void t_discovery(void)
{
	struct nkv_disc_entry *e = NULL;
	unsigned n = 0, req = 0, notreq = 0;
	struct nkv_conn_opts plain = opts(HOSTC, NULL, false, false, 0), tls = opts(HOSTB, g_keyb, false, false, 0);
	int rc = nkv_discover("127.0.0.1", g_sd, &plain, &e, &n);

	CHECK(rc == 0 && n == 4, "discovery on the plain discovery port: rc %d, %u entries", rc, n);
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		unsigned p = (unsigned)strtoul(e[i].trsvcid, NULL, 10);
		req += (int)p == g_tls && (e[i].treq & 3) == NKV_TREQ_REQUIRED;
		notreq += (int)p == g_plain && (e[i].treq & 3) == NKV_TREQ_NOT_SPECIFIED;
	}
	CHECK(req == 2 && notreq == 2, "TREQ: %u TLS entries 'required', %u plain 'not specified' (want 2 and 2)", req, notreq);
	free(e);
	e = NULL;
	/* Over TLS on the secure port: host B's key admits it to the discovery subsystem too. */
	rc = nkv_discover("127.0.0.1", g_st, &tls, &e, &n);
	CHECK(rc == 0 && n == 4, "discovery over TLS: rc %d, %u entries", rc, n);
	free(e);
	check_raw_log("discovery log over plain TCP", g_sd, plain);
	check_raw_log("discovery log over TLS", g_st, opts(HOSTA, g_keya, false, false, 1));
}

/* ---- handshake deadline ------------------------------------------------------------------------- */

/* Connect to the TLS port and send @n bytes of @pre, then nothing more. @return the socket or -1. */
static int stall_open(const void *pre, size_t n)
{
	int fd = tcp_open(g_tls);
	if (fd >= 0 && n && send(fd, pre, n, MSG_NOSIGNAL) != (ssize_t)n) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* @return ms from @t0 until the target closed @fd (at most 10 s of waiting), or -1. */
static long stall_wait(int fd, uint64_t t0)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b[64];
	long ms = -1;

	while (fd >= 0 && poll(&p, 1, 10000) == 1) {
		ssize_t r = recv(fd, b, sizeof(b), 0);
		if (r <= 0) { /* closed (0) or reset */
			ms = (long)(nkv_now_ms() - t0);
			break;
		}
	}
	if (fd >= 0)
		close(fd);
	return ms;
}

static void t_stalled_handshake(void)
{
	static const uint8_t record_start[3] = {0x16, 0x03, 0x01}; /* a ClientHello record, cut short */
	uint64_t t0 = nkv_now_ms();
	int silent = stall_open(NULL, 0), partial = stall_open(record_start, sizeof(record_start));

	/* Meanwhile another host's session works: stalled handshakes hold no reactor. */
	struct nkv_conn_opts o = opts(HOSTB, g_keyb, false, false, 0);
	struct nkv_ctrl *c = NULL;
	struct nkv_qpair *qp = NULL;
	uint8_t v[65536], r[65536];
	uint32_t vs = 0;
	fill(v, sizeof(v), 5);
	int rc = nkv_connect("127.0.0.1", g_st, SUB1, &o, &c);
	if (rc == 0 && (rc = nkv_qpair_create(c, 0, &qp)) == 0 && (rc = nkv_store(qp, 1, "victim", 6, v, sizeof(v), 0, NULL)) == 0)
		rc = nkv_retrieve(qp, 1, "victim", 6, r, sizeof(r), &vs, NULL);
	CHECK(rc == 0 && vs == sizeof(v) && memcmp(v, r, sizeof(v)) == 0, "victim host over TLS: rc %d", rc);
	nkv_qpair_destroy(qp);
	nkv_disconnect(c);
	uint64_t victim_ms = nkv_now_ms() - t0;
	long ms_silent = stall_wait(silent, t0), ms_partial = stall_wait(partial, t0);
	printf("stalled handshakes closed after %ld ms (silent) and %ld ms (partial ClientHello), deadline %d ms; "
	       "a victim's TLS session did its work in %llu ms meanwhile\n",
	       ms_silent, ms_partial, HANDSHAKE_MS, (unsigned long long)victim_ms);
	CHECK(victim_ms < HANDSHAKE_MS, "the victim took %llu ms: it did not run while the stalls were pending",
	      (unsigned long long)victim_ms);
	CHECK(ms_silent >= HANDSHAKE_MS - 100 && ms_silent < HANDSHAKE_MS + 2500, "silent connection closed after %ld ms",
	      ms_silent);
	CHECK(ms_partial >= HANDSHAKE_MS - 100 && ms_partial < HANDSHAKE_MS + 2500, "partial ClientHello closed after %ld ms",
	      ms_partial);
}

int main(int argc, char **argv)
{
	if (argc < 2 || access(argv[1], X_OK) != 0) {
		fprintf(stderr, "usage: tls_func PATH_TO_RADOS_NKV (skipped: no daemon)\n");
		return 77;
	}
	make_key(g_keya, 1, 1);
	make_key(g_keyb, 2, 2);
	make_key(g_wrong, 3, 1);
	snprintf(g_filea, sizeof(g_filea), "/tmp/nkv-tls-func-%d.key", (int)getpid());
	FILE *f = fopen(g_filea, "w");
	if (!f || fprintf(f, "%s\n", g_keya) < 0 || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", g_filea);
		return 1;
	}
	g_plain = (int)daemon_free_port();
	g_tls = (int)daemon_free_port();
	g_disc = (int)daemon_free_port();
	char lp[64], lt[64], ld[64], ka1[300], ka2[300], kb[300], hs[16];
	snprintf(g_sp, sizeof(g_sp), "%d", g_plain);
	snprintf(g_st, sizeof(g_st), "%d", g_tls);
	snprintf(g_sd, sizeof(g_sd), "%d", g_disc);
	snprintf(lp, sizeof(lp), "127.0.0.1:%d", g_plain);
	snprintf(lt, sizeof(lt), "127.0.0.1:%d", g_tls);
	snprintf(ld, sizeof(ld), "127.0.0.1:%d", g_disc);
	snprintf(ka1, sizeof(ka1), "%s=@%s", HOSTA, g_filea); /* one from a file, the others inline */
	snprintf(ka2, sizeof(ka2), "%s=%s", HOSTA, g_keya);
	snprintf(kb, sizeof(kb), "%s=%s", HOSTB, g_keyb);
	snprintf(hs, sizeof(hs), "%d", HANDSHAKE_MS);
	const char *const dargv[] = {argv[1], "--backend", "mem", "--listen", lp, "--listen-tls", lt, "--discovery", ld,
				     "-s", SUB1, "--pool", "one", "--ns", "1", "--tls-key", ka1, "--tls-key", kb,
				     "-s", SUB2, "--pool", "two", "--ns", "1", "--tls-key", ka2,
				     "--tls-handshake-timeout-ms", hs, "--log-level", "info", NULL};
	pid_t pid = daemon_spawn(dargv, NULL, NULL);
	if (!daemon_wait_port(pid, g_plain)) {
		fprintf(stderr, "the daemon did not start\n");
		unlink(g_filea);
		return 1;
	}
	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {{"refusals", t_refusals}, {"identity binding", t_identity_binding},
		      {"both listeners", t_both_listeners}, {"discovery", t_discovery}, {"engine", t_engine},
		      {"stalled handshake", t_stalled_handshake}};
	uint64_t t0 = nkv_now_ms();
	t_roundtrip("A: SHA-256 key, identity 0", HOSTA, g_keya, false, false, 0);
	printf("== roundtrip SHA-256: %u failed (%llu ms)\n", h_fail, (unsigned long long)(nkv_now_ms() - t0));
	t_roundtrip("B: SHA-384 key, digests", HOSTB, g_keyb, true, true, 0);
	t_roundtrip("C: identity 1, data digest", HOSTA, g_keya, false, true, 1);
	printf("== roundtrips: %u failed\n", h_fail);
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		unsigned fb = h_fail;
		t0 = nkv_now_ms();
		groups[i].fn();
		printf("== %s: %u failed (%llu ms)\n", groups[i].name, h_fail - fb, (unsigned long long)(nkv_now_ms() - t0));
	}
	daemon_stop(pid, 15);
	unlink(g_filea);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
