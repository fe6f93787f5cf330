/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_tcp.c - libFuzzer target over the NVMe/TCP receive path (src/transport/tcp.c): every input is
 * written as a byte stream of PDUs to a fresh TCP connection to one process-wide target (mem backend,
 * one reactor, 8 MiB buffer budget), then the host half-closes and reads what comes back until the
 * target closes the connection.
 *
 * Input: two option bytes, then the fuzzer's PDU bytes.
 *   byte 0  bits 1:0  prologue the harness puts before the fuzzer's bytes:
 *                     0 none (raw stream), 1 ICReq, 2 ICReq + admin Connect + Property Set CC.EN=1
 *                     (pipelined on the same connection), 3 an I/O queue: a separate admin
 *                     association is set up with real round trips (for its CNTLID), then ICReq +
 *                     I/O Connect (QID 1) on the fuzzed connection
 *           bit 2     the prologue's ICReq asks for header digests
 *           bit 3     ... and data digests
 *           bit 4     fix up the digests (and the HDGST/DDGST flags) of the fuzzer's CapsuleCmd and
 *                     H2CData PDUs, following the digests negotiated so far (or by an ICReq found
 *                     in the fuzzer's bytes)
 *           bit 5     linger: read answers until the target is quiet before half-closing
 *           bits 7:6  Connect target: 0 the fuzz subsystem, 1 the host-restricted subsystem with
 *                     its allowed host, 2 the same with a host that is not allowed, 3 discovery
 *   byte 1  bits 1:0  HPDA of the ICReq
 *           bit 2     Connect CATTR: disable SQ flow control
 *           bits 4:3  Connect SQSIZE (0's based): 31, 1, 7, 30
 *           bit 5     write the stream in 13-byte pieces (partial PDUs at the target)
 *
 * Nothing is asserted about the answers: the target must not crash, leak or hang, and must close the
 * connection within NKV_FUZZ_TCP_CLOSE_MS (default 3000) of the host's FIN (a hang aborts). At exit
 * a fresh well-formed session (Connect, Store in-capsule and through R2T, Retrieve both) must still
 * work, with and without digests; then the transport and the target are torn down (LeakSanitizer
 * checks the rest). Every NKV_FUZZ_TCP_RECYCLE inputs (default 4096) the target is rebuilt so the
 * mem backend does not grow without bound.
 *
 * NKV_FUZZ_TCP_PREFILL=1: store one key in every namespace at setup, stepping around a known bug so
 * fuzzing can go further while it is open: a List on a never-written mem table
 * (corpus_tcp/ubsan-mem-list-empty-table, &t->keys[0] on a NULL array, clang UBSan).
 * corpus_tcp/hang-ctl-reuse-icresp-term reproduces a fixed one (c4c88f3: the C2HTermReq reused the
 * still-queued ICResp's send slot and the send queue became a cycle; the reactor spun).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "nkv/nkv_target.h"

#define SS_NQN "nqn.2026-11.io.rados-nkv:fuzz"
#define SS2_NQN "nqn.2026-11.io.rados-nkv:fuzz-acl"
#define HOST_NQN "nqn.2014-08.org.nvmexpress:uuid:0f0f0f0f-1111-2222-3333-444444444444"
#define HOST2_NQN "nqn.2026-11.io.rados-nkv:allowed-host"
#define ICD 4096u       /* in-capsule data on I/O queues */
#define MAXH2C 16384u   /* MAXH2CDATA */
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))

static struct nkv_target *g_tgt;
static struct nkv_tcp *g_tcp;
static int g_port;
static unsigned long g_inputs, g_since_recycle, g_recycle = 4096;
static int g_close_ms = 3000;
static bool g_prefill;
static uint8_t g_scratch[65536];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- target ------------------------------------------------------------------------------------- */

/* One key in the namespace, through the loop transport (NKV_FUZZ_TCP_PREFILL, see above). */
static void prefill(const char *subnqn, const char *hostnqn)
{
	struct nkv_loop_ctrlr *c;
	struct nkv_loop_qp *qp;
	struct nkv_sqe s;
	struct nkv_cqe q;
	char v[8] = "prefill";

	if (nkv_loop_connect(g_tgt, subnqn, hostnqn, &c) || nkv_loop_enable(c) || nkv_loop_qp_create(c, 1, 4, &qp))
		abort();
	nkv_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"prefill", 7, sizeof(v), 0);
	if (nkv_loop_qp_exec(qp, &s, v, sizeof(v), &q, NULL) || (nkv_get16(&q.status) >> 1) != 0)
		abort();
	nkv_loop_qp_destroy(qp);
	nkv_loop_disconnect(c);
}

static void target_up(void)
{
	struct nkv_backend_conf bc = {.name = "mem", .mem_max_object = 1 << 20};
	struct nkv_ns_conf ns1 = {.nsid = 1, .rados_ns = "", .max_value = 256 * 1024};
	struct nkv_ns_conf ns2 = {.nsid = 2, .rados_ns = "", .read_only = true};
	struct nkv_ns_conf ns3 = {.nsid = 1, .rados_ns = "acl", .max_value = 4096};
	struct nkv_tcp_conf tc = {.reactors = 1, .in_capsule = ICD, .maxh2cdata = MAXH2C, .max_queue_depth = 32,
				  .max_io_queues = 4, .buffer_budget = 8u << 20};
	struct nkv_subsys *ss, *ss2;

	if (nkv_target_create(&bc, &g_tgt) || nkv_subsys_add(g_tgt, SS_NQN, "nkv", &ss) || nkv_ns_add(ss, &ns1) ||
	    nkv_ns_add(ss, &ns2) || nkv_subsys_add(g_tgt, SS2_NQN, "nkv", &ss2) || nkv_ns_add(ss2, &ns3) ||
	    nkv_subsys_allow_host(ss2, HOST2_NQN) || nkv_tcp_create(g_tgt, &tc, &g_tcp) ||
	    (g_port = nkv_tcp_listen(g_tcp, "127.0.0.1", "0", true)) <= 0) {
		fprintf(stderr, "fuzz_tcp: cannot set up the target\n");
		abort();
	}
	if (g_prefill) {
		prefill(SS_NQN, HOST_NQN);
		prefill(SS2_NQN, HOST2_NQN);
	}
}

static void target_down(void)
{
	nkv_tcp_destroy(g_tcp, 2000);
	nkv_target_destroy(g_tgt);
	g_tcp = NULL;
	g_tgt = NULL;
}

/* ---- PDU builders --------------------------------------------------------------------------------- */

static size_t put_icreq(uint8_t *o, unsigned hpda, unsigned dgst)
{
	memset(o, 0, 128);
	o[0] = NKV_TCP_PDU_ICREQ;
	o[2] = 128;
	nkv_put32(o + 4, 128);
	o[10] = (uint8_t)hpda;
	o[11] = (uint8_t)dgst;
	return 128;
}

/* Header @h of @hlen bytes (CH included, PLEN filled here), then data with the negotiated digests. */
static size_t put_pdu(uint8_t *o, const uint8_t *h, uint32_t hlen, const void *data, uint32_t dlen, bool hd, bool dd)
{
	uint32_t hdl = hlen + (hd ? 4 : 0), plen = hdl + (dlen ? dlen + (dd ? 4 : 0) : 0);

	memcpy(o, h, hlen);
	o[1] = (uint8_t)((o[1] & ~(NKV_TCP_F_HDGST | NKV_TCP_F_DDGST)) | (hd ? NKV_TCP_F_HDGST : 0) |
			 (dd && dlen ? NKV_TCP_F_DDGST : 0));
	o[2] = (uint8_t)hlen;
	o[3] = (uint8_t)(dlen ? hdl : 0);
	nkv_put32(o + 4, plen);
	if (hd)
		nkv_put32(o + hlen, nkv_crc32c(o, hlen));
	if (dlen) {
		memcpy(o + hdl, data, dlen);
		if (dd)
			nkv_put32(o + hdl + dlen, nkv_crc32c(data, dlen));
	}
	return plen;
}

static size_t put_cmd(uint8_t *o, const struct nkv_sqe *sqe, const void *data, uint32_t dlen, bool hd, bool dd)
{
	uint8_t h[72] = {NKV_TCP_PDU_CMD};
	memcpy(h + 8, sqe, 64);
	return put_pdu(o, h, 72, data, dlen, hd, dd);
}

static size_t put_h2c(uint8_t *o, uint16_t cid, uint16_t ttag, uint32_t datao, const void *data, uint32_t dlen,
		      bool last, bool hd, bool dd)
{
	uint8_t h[24] = {NKV_TCP_PDU_H2C_DATA, last ? NKV_TCP_F_LAST : 0};
	nkv_put16(h + 8, cid);
	nkv_put16(h + 10, ttag);
	nkv_put32(h + 12, datao);
	nkv_put32(h + 16, dlen);
	return put_pdu(o, h, 24, data, dlen, hd, dd);
}

/* SGL: in-capsule (Data Block, offset 0) when @icd, else a Transport Data Block. */
static void sqe_sgl(struct nkv_sqe *s, uint32_t len, bool icd)
{
	s->flags = (uint8_t)((s->flags & ~NKV_SQE_PSDT_MASK) | NKV_SQE_PSDT_SGL);
	memset(s->dptr, 0, 16);
	nkv_put32(s->dptr + 8, len);
	s->dptr[15] = icd ? NKV_SGL_DATA_BLOCK_OFFSET : NKV_SGL_TRANSPORT_DATA_BLOCK;
}

static size_t put_connect(uint8_t *o, uint16_t cid, uint16_t qid, uint16_t sqsize, uint8_t cattr, uint16_t cntlid,
			  const char *subnqn, const char *hostnqn, bool hd, bool dd)
{
	struct nkv_sqe s = {0};
	struct nkv_fabrics_cmd *f = (struct nkv_fabrics_cmd *)&s;
	struct nkv_connect_data d;

	f->opc = NKV_ADM_FABRICS;
	f->fctype = NKV_FCTYPE_CONNECT;
	nkv_put16(&f->cid, cid);
	nkv_put16(f->spec + 2, qid);
	nkv_put16(f->spec + 4, sqsize);
	f->spec[6] = cattr;
	sqe_sgl(&s, sizeof(d), true);
	memset(&d, 0, sizeof(d));
	memcpy(d.hostid, "fuzz-tcp-hostid!", 16);
	nkv_put16(&d.cntlid, cntlid);
	snprintf(d.subnqn, sizeof(d.subnqn), "%s", subnqn);
	snprintf(d.hostnqn, sizeof(d.hostnqn), "%s", hostnqn);
	return put_cmd(o, &s, &d, sizeof(d), hd, dd);
}

static size_t put_prop_set(uint8_t *o, uint16_t cid, uint32_t ofs, uint32_t val, bool hd, bool dd)
{
	struct nkv_sqe s = {0};
	struct nkv_fabrics_cmd *f = (struct nkv_fabrics_cmd *)&s;

	f->opc = NKV_ADM_FABRICS;
	f->fctype = NKV_FCTYPE_PROP_SET;
	nkv_put16(&f->cid, cid);
	sqe_sgl(&s, 0, false);
	nkv_put32(f->spec + 4, ofs);
	nkv_put32(f->spec + 8, val);
	return put_cmd(o, &s, NULL, 0, hd, dd);
}

/* Recompute the digests of the CapsuleCmd and H2CData PDUs in @b, as far as they are complete. */
static void fix_digests(uint8_t *b, size_t n, bool ic_done, bool hd, bool dd)
{
	size_t p = 0;

	while (p + 8 <= n) {
		uint8_t type = b[p], hlen = b[p + 2], pdo = b[p + 3];
		uint32_t plen = nkv_get32(b + p + 4);

		if (type == NKV_TCP_PDU_ICREQ && !ic_done && hlen == 128 && p + 12 <= n) {
			hd = (b[p + 11] & NKV_TCP_DGST_HDR) != 0;
			dd = (b[p + 11] & NKV_TCP_DGST_DATA) != 0;
			ic_done = true;
		} else if (ic_done && (type == NKV_TCP_PDU_CMD || type == NKV_TCP_PDU_H2C_DATA) && hlen >= 8) {
			uint32_t hdl = hlen + (hd ? 4u : 0u);
			b[p + 1] = (uint8_t)((b[p + 1] & ~(NKV_TCP_F_HDGST | NKV_TCP_F_DDGST)) | (hd ? NKV_TCP_F_HDGST : 0) |
					     (dd && plen > hdl ? NKV_TCP_F_DDGST : 0));
			if (hd && p + hlen + 4 <= n)
				nkv_put32(b + p + hlen, nkv_crc32c(b + p, hlen));
			if (dd && plen > hdl && pdo >= hdl && plen >= (uint32_t)pdo + 4 && p + plen <= n)
				nkv_put32(b + p + plen - 4, nkv_crc32c(b + p + pdo, plen - pdo - 4));
		}
		if (plen < 8)
			break;
		p += plen;
	}
}

/* ---- socket helpers --------------------------------------------------------------------------------- */

static int tcp_connect(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc < 0 && errno == EINTR) {
		/* A signal (libFuzzer's timer, LeakSanitizer stopping the world) cut the wait short; the
		 * connection goes on: wait for it and take its outcome. */
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		int err = 0;
		socklen_t len = sizeof(err);
		while ((rc = poll(&pf, 1, g_close_ms)) < 0 && errno == EINTR)
			;
		if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
			rc = 0;
		} else {
			errno = rc == 0 ? ETIMEDOUT : err ? err : errno;
			rc = -1;
		}
	}
	if (rc < 0) {
		perror("fuzz_tcp: connect");
		abort(); /* the listener is gone: that is a failure of the target */
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Read and drop what is there. @return bytes read, 0 at EOF (or reset), -1 if nothing is there. */
static ssize_t drop_input(int fd)
{
	ssize_t n = recv(fd, g_scratch, sizeof(g_scratch), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -1;
	return n < 0 ? 0 : n;
}

static int ms_left(uint64_t deadline)
{
	uint64_t t = now_ms();
	return t >= deadline ? 0 : (int)(deadline - t);
}

/* Write @n bytes while reading whatever comes back. @return false once the target closed. */
static bool stream_out(int fd, const uint8_t *p, size_t n, bool split)
{
	uint64_t deadline = now_ms() + (uint64_t)g_close_ms;
	size_t off = 0;

	while (off < n) {
		size_t chunk = split && n - off > 13 ? 13 : n - off;
		ssize_t w = send(fd, p + off, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			off += (size_t)w;
			if (split)
				sched_yield();
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return false; /* reset: the target closed */
		struct pollfd pf = {.fd = fd, .events = POLLIN | POLLOUT};
		int left = ms_left(deadline);
		if (left == 0) {
			fprintf(stderr, "fuzz_tcp: the target neither reads nor closes (%d ms)\n", g_close_ms);
			abort();
		}
		if (poll(&pf, 1, left) > 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR)))
			if (drop_input(fd) == 0)
				return false;
	}
	return true;
}

/* Read until @quiet_ms pass without data (bounded by @max_ms), or until EOF (@return false). */
static bool read_quiet(int fd, int quiet_ms, int max_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)max_ms;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline);
		if (left == 0)
			return true;
		if (poll(&pf, 1, left < quiet_ms ? left : quiet_ms) <= 0)
			return true;
		ssize_t n = drop_input(fd);
		if (n == 0)
			return false;
	}
}

/* After the host's FIN: read until the target closes; past the bound it is a hang. */
static void wait_close(int fd)
{
	uint64_t deadline = now_ms() + (uint64_t)g_close_ms;

	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline);
		if (left == 0) {
			fprintf(stderr, "fuzz_tcp: the target did not close the connection within %d ms of the FIN\n",
				g_close_ms);
			abort();
		}
		if (poll(&pf, 1, left) > 0 && drop_input(fd) == 0)
			return;
	}
}

/* ---- a well-behaved host (blocking, with timeouts) ------------------------------------------------- */

static bool send_blocking(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static bool recv_exact(int fd, uint8_t *p, size_t n)
{
	uint64_t deadline = now_ms() + (uint64_t)g_close_ms;

	while (n > 0) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline), pr = left ? poll(&pf, 1, left) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return false;
		ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* One PDU into @buf (at most @cap bytes). @return its type, or -1. */
static int recv_pdu(int fd, uint8_t *buf, size_t cap)
{
	if (!recv_exact(fd, buf, 8))
		return -1;
	uint32_t plen = nkv_get32(buf + 4);
	if (plen < 8 || plen > cap || !recv_exact(fd, buf + 8, plen - 8))
		return -1;
	return buf[0];
}

/* Wait for the CapsuleResp of @cid; C2HData on the way is copied into @out (up to @cap bytes).
 * @return the status field (0 = success), or -1 on a transport failure. */
static int wait_rsp(int fd, uint16_t cid, uint8_t *out, uint32_t cap, uint32_t *got, uint32_t *dw0)
{
	static uint8_t buf[128 * 1024]; /* the target sends a value in one C2HData */

	for (;;) {
		int t = recv_pdu(fd, buf, sizeof(buf));
		if (t == NKV_TCP_PDU_C2H_DATA && out && nkv_get16(buf + 8) == cid) {
			uint32_t datao = nkv_get32(buf + 12), datal = nkv_get32(buf + 16);
			if ((uint64_t)datao + datal > cap || (uint32_t)buf[3] + datal > nkv_get32(buf + 4))
				return -1;
			memcpy(out + datao, buf + buf[3], datal);
			if (got)
				*got += datal;
			continue;
		}
		if (t != NKV_TCP_PDU_RSP)
			return -1;
		const struct nkv_cqe *q = (const struct nkv_cqe *)(buf + 8);
		if (nkv_get16(&q->cid) != cid)
			return -1;
		if (dw0)
			*dw0 = nkv_get32(&q->dw0);
		return nkv_get16(&q->status) >> 1;
	}
}

static bool ic_exchange(int fd, unsigned dgst)
{
	uint8_t b[128];

	put_icreq(b, 0, dgst);
	return send_blocking(fd, b, 128) && recv_pdu(fd, b, sizeof(b)) == NKV_TCP_PDU_ICRESP && b[11] == dgst;
}

/* An admin association on a new connection (no digests): ICReq, Connect, CC.EN = 1.
 * @return the connection (and *cntlid), or -1 with the connection closed. */
static int host_admin(const char *subnqn, const char *hostnqn, uint16_t *cntlid)
{
	static uint8_t b[2048];
	int fd = tcp_connect();
	uint32_t dw0 = 0;
	size_t n;

	if (!ic_exchange(fd, 0))
		goto fail;
	n = put_connect(b, 1, 0, 31, 0, NKV_CNTLID_DYNAMIC, subnqn, hostnqn, false, false);
	if (!send_blocking(fd, b, n) || wait_rsp(fd, 1, NULL, 0, NULL, &dw0) != 0)
		goto fail;
	*cntlid = (uint16_t)dw0;
	n = put_prop_set(b, 2, NKV_REG_CC, CC_ENABLE, false, false);
	if (!send_blocking(fd, b, n) || wait_rsp(fd, 2, NULL, 0, NULL, NULL) != 0)
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

/* ---- the one functional assertion: a fresh session still works ----------------------------------- */

static bool check_session(unsigned dgst)
{
	static uint8_t small[200], big[3 * MAXH2C / 2 + 3000], back[sizeof(big)], pdu[MAXH2C + 4096];
	bool hd = dgst & 1, dd = dgst & 2, ok = false;
	uint16_t cntlid = 0;
	int afd = host_admin(SS_NQN, HOST_NQN, &cntlid), fd = -1;
	struct nkv_sqe s;
	uint32_t dw0 = 0, got = 0;
	size_t n;

	for (size_t i = 0; i < sizeof(small); i++)
		small[i] = (uint8_t)(i * 7 + dgst);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13 + (i >> 8) + dgst);
	if (afd < 0)
		return false;
	fd = tcp_connect();
	if (!ic_exchange(fd, dgst))
		goto out;
	n = put_connect(pdu, 1, 1, 31, 0, cntlid, SS_NQN, HOST_NQN, hd, dd);
	if (!send_blocking(fd, pdu, n) || wait_rsp(fd, 1, NULL, 0, NULL, NULL) != 0)
		goto out;
	/* Store in-capsule */
	nkv_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"fuzz-check-small", 16, sizeof(small), 0);
	nkv_put16(&s.cid, 10);
	sqe_sgl(&s, sizeof(small), true);
	n = put_cmd(pdu, &s, small, sizeof(small), hd, dd);
	if (!send_blocking(fd, pdu, n) || wait_rsp(fd, 10, NULL, 0, NULL, NULL) != 0)
		goto out;
	/* Store through R2T + H2CData (several PDUs, each at most MAXH2CDATA) */
	nkv_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"fuzz-check-big", 14, sizeof(big), 0);
	nkv_put16(&s.cid, 11);
	sqe_sgl(&s, sizeof(big), false);
	n = put_cmd(pdu, &s, NULL, 0, hd, dd);
	if (!send_blocking(fd, pdu, n) || recv_pdu(fd, pdu, sizeof(pdu)) != NKV_TCP_PDU_R2T ||
	    nkv_get16(pdu + 8) != 11 || nkv_get32(pdu + 12) != 0 || nkv_get32(pdu + 16) != sizeof(big))
		goto out;
	uint16_t ttag = nkv_get16(pdu + 10);
	for (uint32_t off = 0; off < sizeof(big); off += MAXH2C) {
		uint32_t len = sizeof(big) - off < MAXH2C ? (uint32_t)sizeof(big) - off : MAXH2C;
		n = put_h2c(pdu, 11, ttag, off, big + off, len, off + len == sizeof(big), hd, dd);
		if (!send_blocking(fd, pdu, n))
			goto out;
	}
	if (wait_rsp(fd, 11, NULL, 0, NULL, NULL) != 0)
		goto out;
	/* Retrieve both */
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, 1, (const uint8_t *)"fuzz-check-small", 16, sizeof(back), 0);
	nkv_put16(&s.cid, 12);
	sqe_sgl(&s, sizeof(back), false);
	n = put_cmd(pdu, &s, NULL, 0, hd, dd);
	memset(back, 0, sizeof(back));
	if (!send_blocking(fd, pdu, n) || wait_rsp(fd, 12, back, sizeof(back), &got, &dw0) != 0 ||
	    dw0 != sizeof(small) || got != sizeof(small) || memcmp(back, small, sizeof(small)) != 0)
		goto out;
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, 1, (const uint8_t *)"fuzz-check-big", 14, sizeof(back), 0);
	nkv_put16(&s.cid, 13);
	sqe_sgl(&s, sizeof(back), false);
	n = put_cmd(pdu, &s, NULL, 0, hd, dd);
	got = 0;
	memset(back, 0, sizeof(back));
	if (!send_blocking(fd, pdu, n) || wait_rsp(fd, 13, back, sizeof(back), &got, &dw0) != 0 ||
	    dw0 != sizeof(big) || got != sizeof(big) || memcmp(back, big, sizeof(big)) != 0)
		goto out;
	ok = true;
out:
	if (fd >= 0)
		close(fd);
	close(afd);
	return ok;
}

static void at_exit(void)
{
	if (!g_tgt)
		return;
	bool ok = check_session(0) && check_session(3);
	printf("fuzz_tcp: %lu inputs; fresh session after them (Connect, Store in-capsule and R2T, Retrieve, "
	       "no digests and digests): %s\n", g_inputs, ok ? "ok" : "FAILED");
	fflush(stdout);
	if (!ok)
		_exit(1);
	target_down(); /* every connection must be freed; LeakSanitizer checks the rest */
}

static void setup(void)
{
	const char *e;

	nkv_log_set_level(NKV_LOG_ERROR); /* every rejected PDU warns */
	if ((e = getenv("NKV_FUZZ_TCP_CLOSE_MS")) && atoi(e) > 0)
		g_close_ms = atoi(e);
	if ((e = getenv("NKV_FUZZ_TCP_RECYCLE")))
		g_recycle = strtoul(e, NULL, 0);
	g_prefill = (e = getenv("NKV_FUZZ_TCP_PREFILL")) && atoi(e) > 0;
	target_up();
	atexit(at_exit);
}

/* ---- one input ------------------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const subs[4] = {SS_NQN, SS2_NQN, SS2_NQN, NKV_DISCOVERY_NQN};
	static const char *const hosts[4] = {HOST_NQN, HOST2_NQN, HOST_NQN, HOST_NQN};
	static const uint16_t sqsizes[4] = {31, 1, 7, 30};
	uint8_t o0 = size > 0 ? data[0] : 0, o1 = size > 1 ? data[1] : 0;
	unsigned pro = o0 & 3, dgst = (o0 >> 2) & 3, sub = o0 >> 6;
	bool hd = dgst & 1, dd = dgst & 2, fix = o0 & 0x10, linger = o0 & 0x20, split = o1 & 0x20;
	uint8_t cattr = (o1 & 4) ? NKV_CONNECT_CATTR_DISABLE_SQFC : 0;
	uint16_t sqsize = sqsizes[(o1 >> 3) & 3], cntlid = NKV_CNTLID_DYNAMIC;
	const uint8_t *fz = size > 2 ? data + 2 : data + size;
	size_t fzn = size > 2 ? size - 2 : 0, n = 0;
	int afd = -1, fd;
	uint8_t *buf;

	if (!g_tgt)
		setup();
	if (g_recycle && ++g_since_recycle > g_recycle) {
		target_down();
		target_up();
		g_since_recycle = 1;
	}
	g_inputs++;
	if (pro == 3 && (afd = host_admin(subs[sub], hosts[sub], &cntlid)) < 0)
		cntlid = 1; /* no association (not allowed, or discovery): the I/O Connect fails, fine */
	if (!(buf = malloc(fzn + 4096)))
		abort();
	if (pro >= 1)
		n += put_icreq(buf, o1 & 3, dgst);
	if (pro == 2) {
		n += put_connect(buf + n, 0x8001, 0, sqsize, cattr, NKV_CNTLID_DYNAMIC, subs[sub], hosts[sub], hd, dd);
		n += put_prop_set(buf + n, 0x8002, NKV_REG_CC, CC_ENABLE, hd, dd);
	} else if (pro == 3) {
		n += put_connect(buf + n, 0x8001, 1, sqsize, cattr, cntlid, subs[sub], hosts[sub], hd, dd);
	}
	memcpy(buf + n, fz, fzn);
	if (fix)
		fix_digests(buf + n, fzn, pro >= 1, pro >= 1 && hd, pro >= 1 && dd);
	n += fzn;

	fd = tcp_connect();
	if (stream_out(fd, buf, n, split) && (!linger || read_quiet(fd, 2, 20))) {
		shutdown(fd, SHUT_WR);
		wait_close(fd);
	}
	close(fd);
	if (afd >= 0)
		close(afd);
	free(buf);
	return 0;
}
