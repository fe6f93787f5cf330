/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_proto.c - NVMe/TCP protocol negative tests against the rados-nkv daemon, over raw sockets.
 *
 * Usage: tcp_proto PATH/TO/rados-nkv
 *
 * Starts the daemon (mem backend) on free loopback ports with two subsystems, then opens one
 * connection per case, sends exactly crafted PDUs and checks the answer docs/nvme-kv-wire.md (sections C
 * and D) requires: C2HTermReq FES/FEI, Connect status and DW0, R2T and
 * C2HData layout. After each group a normal connection must still work. Where the spec allows two
 * answers the test accepts both and prints a "note:" line saying which one the target chose.
 * Set TCP_PROTO_VERBOSE=1 to hex-dump every PDU sent and received.
 * Every check counts; the last line is "N passed, N failed"; exit 0 only without failures.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nkv/nkv_spec.h"
#include "common/crc32c.h"

#include "check.h"
#include "daemon_spawn.h"

unsigned h_pass, h_fail;

#define NOTE(...)                                                                                  \
	do {                                                                                       \
		printf("note: " __VA_ARGS__);                                                      \
		putchar('\n');                                                                     \
		fflush(stdout);                                                                    \
	} while (0)

#define SC(sct, sc) ((int)(((unsigned)(sct) << 8) | (unsigned)(sc)))
#define TMO_MS 5000
#define SUBNQN "nqn.2026-11.io.rados-nkv:proto"
#define SUBNQN2 "nqn.2026-11.io.rados-nkv:proto-open"
#define GOODHOST "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000600d"
#define BADHOST "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000bad"
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))

static const uint8_t HOSTID[16] = {0x60, 0x0d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
static int io_port;
static bool verbose;

/* ---- sockets ---------------------------------------------------------------------------------- */

struct conn {
	int fd;
	bool hd, dd;       /* negotiated digests */
	uint8_t cpda;
	uint8_t hpda;      /* requested in ICReq (set before ic_exchange) */
	uint32_t maxh2c;
	uint16_t cid;      /* last command identifier used */
};

struct pdu {
	uint8_t *b;        /* the whole PDU */
	uint32_t len;      /* PLEN */
	uint8_t type, flags, hlen, pdo;
	const uint8_t *data;
	uint32_t dlen;
};

static void hexdump(const char *tag, const uint8_t *b, size_t n)
{
	if (!verbose)
		return;
	printf("  %s %zu bytes:", tag, n);
	for (size_t i = 0; i < n && i < 160; i++)
		printf("%s%02x", i % 32 ? " " : "\n    ", b[i]);
	printf("%s\n", n > 160 ? " ..." : "");
}

static int tcp_open(struct conn *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)io_port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

static void tcp_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static bool send_all(struct conn *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	hexdump("sent", p, len);
	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/*
 * Send the first @split bytes; when the peer answers within 200 ms (a target that rejects on the
 * header alone), stop there, else send the rest. Keeps both reader designs from hanging or
 * resetting the connection under an unread tail.
 */
static bool send_split(struct conn *c, const uint8_t *buf, size_t len, size_t split)
{
	if (split >= len)
		return send_all(c, buf, len);
	if (!send_all(c, buf, split))
		return false;
	struct pollfd pf = {.fd = c->fd, .events = POLLIN};
	if (poll(&pf, 1, 200) > 0)
		return true;
	return send_all(c, buf + split, len - split);
}

/** @return 1 read, 0 closed (EOF or reset) first, -1 timeout or error. */
static int recv_exact(struct conn *c, void *buf, size_t n, int ms)
{
	uint8_t *p = buf;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (n) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return -1;
		struct pollfd pf = {.fd = c->fd, .events = POLLIN};
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t k = recv(c->fd, p, n, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0 || (k < 0 && (errno == ECONNRESET || errno == EPIPE)))
			return 0;
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 1;
}

static bool pdu_has_digests(uint8_t type)
{
	return type != NKV_TCP_PDU_ICREQ && type != NKV_TCP_PDU_ICRESP && type != NKV_TCP_PDU_H2C_TERM &&
	       type != NKV_TCP_PDU_C2H_TERM;
}

static void pdu_free(struct pdu *p)
{
	free(p->b);
	memset(p, 0, sizeof(*p));
}

/**
 * Receive one PDU and check its digests when they were negotiated.
 * @return 1 PDU, 0 connection closed, -1 timeout, -2 bad framing (PLEN below 8 or huge).
 */
static int recv_pdu(struct conn *c, struct pdu *p, int ms)
{
	uint8_t ch[8];
	memset(p, 0, sizeof(*p));
	int r = recv_exact(c, ch, 8, ms);
	if (r != 1)
		return r;
	uint32_t plen = nkv_get32(ch + 4);
	if (plen < 8 || plen > (64u << 20)) {
		hexdump("recv (bad PLEN)", ch, 8);
		return -2;
	}
	p->b = malloc(plen);
	memcpy(p->b, ch, 8);
	r = recv_exact(c, p->b + 8, plen - 8, ms);
	if (r != 1) {
		pdu_free(p);
		return r == 0 ? 0 : -1;
	}
	hexdump("recv", p->b, plen);
	p->len = plen;
	p->type = ch[0];
	p->flags = ch[1];
	p->hlen = ch[2];
	p->pdo = ch[3];
	if (!pdu_has_digests(p->type) || p->hlen > plen)
		return 1;
	uint32_t hd = 0;
	if (c->hd) {
		bool ok = (p->flags & NKV_TCP_F_HDGST) && plen >= p->hlen + 4u &&
			  nkv_get32(p->b + p->hlen) == nkv_crc32c(p->b, p->hlen);
		CHECK(ok, "header digest of received PDU type %#x", p->type);
		hd = 4;
	}
	if (p->pdo && p->pdo <= plen) {
		uint32_t end = plen;
		if (c->dd && (p->flags & NKV_TCP_F_DDGST) && end >= p->pdo + 4u)
			end -= 4;
		p->data = p->b + p->pdo;
		p->dlen = end - p->pdo;
		if (c->dd && p->dlen) {
			bool ok = (p->flags & NKV_TCP_F_DDGST) &&
				  nkv_get32(p->b + end) == nkv_crc32c(p->data, p->dlen);
			CHECK(ok, "data digest of received PDU type %#x", p->type);
		}
		CHECK(p->pdo >= p->hlen + hd, "PDO %u below HLEN %u + digest", p->pdo, p->hlen);
		CHECK(p->pdo % ((c->hpda + 1u) * 4u) == 0, "PDO %u of PDU type %#x not aligned to HPDA %u", p->pdo,
		      p->type, c->hpda);
	}
	return 1;
}

static const char *pdu_str(int r, const struct pdu *p)
{
	static char s[160];
	if (r == 0)
		return "connection closed";
	if (r == -1)
		return "timeout";
	if (r == -2)
		return "bad PDU framing";
	switch (p->type) {
	case NKV_TCP_PDU_C2H_TERM:
		snprintf(s, sizeof(s), "C2HTermReq FES %#x FEI %#x", nkv_get16(p->b + 8), nkv_get32(p->b + 10));
		break;
	case NKV_TCP_PDU_RSP:
		snprintf(s, sizeof(s), "CapsuleResp CID %u status %#x DW0 %#x", nkv_get16(p->b + 20),
			 (nkv_get16(p->b + 22) >> 1) & 0x7ff, nkv_get32(p->b + 8));
		break;
	default:
		snprintf(s, sizeof(s), "PDU type %#x flags %#x HLEN %u PLEN %u", p->type, p->flags, p->hlen, p->len);
	}
	return s;
}

/** True when the peer closes within 5 s without sending anything more. */
static bool expect_closed(struct conn *c)
{
	uint8_t b[64];
	int r = recv_exact(c, b, 1, TMO_MS);
	if (r == 1) {
		ssize_t k = recv(c->fd, b + 1, sizeof(b) - 1, MSG_DONTWAIT);
		hexdump("unexpected bytes before close", b, 1 + (k > 0 ? (size_t)k : 0));
	}
	return r == 0;
}

/* ---- PDU construction --------------------------------------------------------------------------- */

/**
 * Build a PDU into @out from @hdr (@hlen bytes, the common header's type set by the caller) and
 * @dlen bytes of data: fills flags, HLEN, PDO, PLEN and the negotiated digests. @return PLEN.
 */
static uint32_t pdu_build(const struct conn *c, uint8_t *out, const void *hdr, uint8_t hlen, const void *data,
			  uint32_t dlen)
{
	memcpy(out, hdr, hlen);
	bool dg = pdu_has_digests(out[0]);
	uint32_t hd = dg && c->hd ? 4 : 0, dd = dg && c->dd && dlen ? 4 : 0;
	uint32_t align = (c->cpda + 1u) * 4u, pdo = dlen ? (hlen + hd + align - 1) / align * align : 0;
	uint32_t plen = (dlen ? pdo + dlen : hlen + hd) + dd;
	out[1] |= (hd ? NKV_TCP_F_HDGST : 0) | (dd ? NKV_TCP_F_DDGST : 0);
	out[2] = hlen;
	out[3] = (uint8_t)pdo;
	nkv_put32(out + 4, plen);
	if (hd)
		nkv_put32(out + hlen, nkv_crc32c(out, hlen));
	if (dlen) {
		memset(out + hlen + hd, 0, pdo - hlen - hd);
		memcpy(out + pdo, data, dlen);
	}
	if (dd)
		nkv_put32(out + pdo + dlen, nkv_crc32c(data, dlen));
	return plen;
}

/** Room for any PDU built with @dlen data bytes. */
static uint8_t *pdu_alloc(uint32_t dlen)
{
	return calloc(1, 256 + dlen + 8);
}

static void sqe_sgl(struct nkv_sqe *s, uint8_t type, uint32_t len)
{
	memset(s->dptr, 0, sizeof(s->dptr));
	nkv_put32(s->dptr + 8, len);
	s->dptr[15] = type;
	s->flags = (uint8_t)((s->flags & 0x3f) | (NKV_PSDT_SGL << NKV_SQE_PSDT_SHIFT));
}

/** Build a CapsuleCmd for @sqe (CID assigned here) with in-capsule @data. @return PLEN; *out malloc'd. */
static uint32_t capsule_build(struct conn *c, struct nkv_sqe *sqe, const void *data, uint32_t dlen, uint8_t **out)
{
	if (++c->cid == 0xffff)
		c->cid = 1;
	sqe->cid = 0;
	nkv_put16(&sqe->cid, c->cid);
	struct nkv_tcp_cmd h = {.ch = {.type = NKV_TCP_PDU_CMD}, .sqe = *sqe};
	*out = pdu_alloc(dlen);
	return pdu_build(c, *out, &h, sizeof(h), data, dlen);
}

static bool capsule_send(struct conn *c, struct nkv_sqe *sqe, const void *data, uint32_t dlen)
{
	uint8_t *b;
	uint32_t n = capsule_build(c, sqe, data, dlen, &b);
	bool ok = send_all(c, b, n);
	free(b);
	return ok;
}

/* ---- ICReq -------------------------------------------------------------------------------------- */

static void icreq_fill(uint8_t b[128], uint8_t dgst, uint8_t hpda)
{
	memset(b, 0, 128);
	b[0] = NKV_TCP_PDU_ICREQ;
	b[2] = 128;
	nkv_put32(b + 4, 128);
	b[10] = hpda;
	b[11] = dgst; /* PFV 0, MAXR2T 0 */
}

/** ICReq/ICResp with the ICResp checks a Linux host applies. @return true when negotiated. */
static bool ic_exchange(struct conn *c, uint8_t dgst)
{
	uint8_t b[128];
	icreq_fill(b, dgst, c->hpda);
	if (!send_all(c, b, 128))
		return false;
	struct pdu p;
	int r = recv_pdu(c, &p, TMO_MS);
	bool ok = r == 1 && p.type == NKV_TCP_PDU_ICRESP && p.len == 128;
	CHECK(ok, "ICResp expected (DGST %u), got %s", dgst, pdu_str(r, &p));
	if (ok) {
		uint32_t mh = nkv_get32(p.b + 12);
		CHECK(p.hlen == 128 && p.pdo == 0 && p.flags == 0, "ICResp HLEN %u PDO %u flags %#x", p.hlen,
		      p.pdo, p.flags);
		CHECK(nkv_get16(p.b + 8) == 0, "ICResp PFV %u", nkv_get16(p.b + 8));
		CHECK(p.b[10] == 0, "ICResp CPDA %u (Linux refuses nonzero)", p.b[10]);
		CHECK(p.b[11] == dgst, "ICResp DGST %#x, requested %#x (must echo exactly)", p.b[11], dgst);
		CHECK(mh % 4 == 0 && mh >= NKV_TCP_MIN_MAXH2CDATA, "ICResp MAXH2CDATA %u", mh);
		c->hd = p.b[11] & NKV_TCP_DGST_HDR;
		c->dd = p.b[11] & NKV_TCP_DGST_DATA;
		c->cpda = p.b[10];
		c->maxh2c = mh;
	}
	pdu_free(&p);
	return ok;
}

/* ---- commands ----------------------------------------------------------------------------------- */

/** What the C2HData PDUs of one command looked like. */
struct xfer {
	unsigned pdus;
	uint32_t bytes;
	bool contiguous;     /* DATAO started at 0 and followed on */
	bool last_ok;        /* LAST_PDU on the final PDU only */
	bool success_flag;   /* SUCCESS seen (no CapsuleResp follows then) */
	bool got_rsp;
};

/**
 * Receive the answer to command @cid: C2HData into @buf (up to @len), then the CapsuleResp.
 * @return the status (SCT << 8 | SC), or -1 when a termination, a close or a timeout came instead
 * (*@last then holds that PDU's description).
 */
static int cmd_wait(struct conn *c, uint16_t cid, void *buf, uint32_t len, struct nkv_cqe *cqe, struct xfer *x,
		    const char **last)
{
	struct xfer xl = {.contiguous = true, .last_ok = true};
	struct nkv_cqe cl;
	if (!x)
		x = &xl;
	if (!cqe)
		cqe = &cl;
	*x = xl;
	memset(cqe, 0, sizeof(*cqe));
	bool last_seen = false;
	for (;;) {
		struct pdu p;
		int r = recv_pdu(c, &p, TMO_MS);
		if (last)
			*last = pdu_str(r, &p);
		if (r != 1)
			return -1;
		if (p.type == NKV_TCP_PDU_C2H_DATA && p.len >= 24) {
			uint32_t datao = nkv_get32(p.b + 12), datal = nkv_get32(p.b + 16);
			CHECK(p.hlen == 24, "C2HData HLEN %u", p.hlen);
			CHECK(nkv_get16(p.b + 8) == cid, "C2HData CCCID %u, command %u", nkv_get16(p.b + 8), cid);
			CHECK(datal == p.dlen, "C2HData DATAL %u but %u data bytes", datal, p.dlen);
			if (datao != x->bytes || last_seen)
				x->contiguous = false;
			if (last_seen)
				x->last_ok = false;
			if (buf && datao <= len && p.dlen <= len - datao)
				memcpy((uint8_t *)buf + datao, p.data, p.dlen);
			else if (p.dlen)
				x->contiguous = false;
			x->pdus++;
			x->bytes += p.dlen;
			last_seen = p.flags & NKV_TCP_F_LAST;
			if (p.flags & NKV_TCP_F_SUCCESS) {
				x->success_flag = true;
				if (last_seen) { /* the host would synthesize a CQE with DW0 = DW1 = 0 */
					pdu_free(&p);
					nkv_put16(&cqe->cid, cid);
					return 0;
				}
			}
			pdu_free(&p);
			continue;
		}
		if (p.type == NKV_TCP_PDU_RSP && p.len >= 24) {
			memcpy(cqe, p.b + 8, 16);
			CHECK(p.hlen == 24 && p.pdo == 0, "CapsuleResp HLEN %u PDO %u", p.hlen, p.pdo);
			CHECK(nkv_get16(&cqe->cid) == cid, "CapsuleResp CID %u, command %u", nkv_get16(&cqe->cid), cid);
			pdu_free(&p);
			x->got_rsp = true;
			if (x->pdus && !last_seen)
				x->last_ok = false;
			return (nkv_get16(&cqe->status) >> 1) & 0x7ff;
		}
		pdu_free(&p);
		return -1;
	}
}

/** Send @sqe with in-capsule @data and wait for its completion (see cmd_wait). */
static int cmd_exec(struct conn *c, struct nkv_sqe *sqe, const void *data, uint32_t dlen, void *buf, uint32_t len,
		    struct nkv_cqe *cqe, struct xfer *x)
{
	const char *last = "send failed";
	if (!capsule_send(c, sqe, data, dlen))
		return -1;
	int st = cmd_wait(c, c->cid, buf, len, cqe, x, &last);
	if (st < 0 && verbose)
		printf("  command %#x got %s\n", sqe->opc, last);
	return st;
}

static void sqe_fabrics(struct nkv_sqe *s, uint8_t fctype)
{
	memset(s, 0, sizeof(*s));
	s->opc = NKV_ADM_FABRICS;
	((uint8_t *)s)[4] = fctype;
	sqe_sgl(s, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
}

static void sqe_prop_get(struct nkv_sqe *s, uint32_t ofst, bool eight)
{
	sqe_fabrics(s, NKV_FCTYPE_PROP_GET);
	((uint8_t *)s)[40] = eight ? 1 : 0;
	nkv_put32((uint8_t *)s + 44, ofst);
}

static void sqe_identify(struct nkv_sqe *s, uint8_t cns, uint32_t nsid, uint8_t csi)
{
	memset(s, 0, sizeof(*s));
	s->opc = NKV_ADM_IDENTIFY;
	nkv_put32(&s->nsid, nsid);
	nkv_put32(&s->cdw10, cns);
	nkv_put32(&s->cdw11, (uint32_t)csi << 24);
	sqe_sgl(s, NKV_SGL_TRANSPORT_DATA_BLOCK, NKV_IDENTIFY_SIZE);
}

static int prop_get(struct conn *c, uint32_t ofst, bool eight, uint64_t *val)
{
	struct nkv_sqe s;
	struct nkv_cqe q;
	sqe_prop_get(&s, ofst, eight);
	int st = cmd_exec(c, &s, NULL, 0, NULL, 0, &q, NULL);
	*val = nkv_get32(&q.dw0) | ((uint64_t)nkv_get32(&q.dw1) << 32);
	return st;
}

static int prop_set(struct conn *c, uint32_t ofst, uint32_t v)
{
	struct nkv_sqe s;
	sqe_fabrics(&s, NKV_FCTYPE_PROP_SET);
	nkv_put32((uint8_t *)&s + 44, ofst);
	nkv_put32((uint8_t *)&s + 48, v);
	return cmd_exec(c, &s, NULL, 0, NULL, 0, NULL, NULL);
}

/** Connect parameters; cargs() gives a valid admin Connect. */
struct cargs {
	const char *subnqn, *hostnqn;
	const uint8_t *hostid;
	uint16_t qid, sqsize, cntlid, recfmt;
	uint8_t cattr;
	uint32_t kato;
};

static struct cargs cargs(const char *sub, const char *host)
{
	return (struct cargs){.subnqn = sub, .hostnqn = host, .hostid = HOSTID, .sqsize = 31,
			      .cntlid = NKV_CNTLID_DYNAMIC, .kato = 0};
}

static void connect_build(const struct cargs *a, struct nkv_sqe *s, struct nkv_connect_data *d)
{
	sqe_fabrics(s, NKV_FCTYPE_CONNECT);
	uint8_t *b = (uint8_t *)s;
	nkv_put16(b + 40, a->recfmt);
	nkv_put16(b + 42, a->qid);
	nkv_put16(b + 44, a->sqsize);
	b[46] = a->cattr;
	nkv_put32(b + 48, a->kato);
	sqe_sgl(s, NKV_SGL_DATA_BLOCK_OFFSET, sizeof(*d));
	memset(d, 0, sizeof(*d));
	memcpy(d->hostid, a->hostid, 16);
	nkv_put16(&d->cntlid, a->cntlid);
	snprintf(d->subnqn, sizeof(d->subnqn), "%s", a->subnqn);
	snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", a->hostnqn);
}

static int do_connect(struct conn *c, const struct cargs *a, struct nkv_cqe *q)
{
	struct nkv_sqe s;
	struct nkv_connect_data d;
	connect_build(a, &s, &d);
	return cmd_exec(c, &s, &d, sizeof(d), NULL, 0, q, NULL);
}

/** Connection + ICReq + Connect; @return status, or -1. */
static int open_connect(struct conn *c, uint8_t dgst, const struct cargs *a, struct nkv_cqe *q)
{
	if (tcp_open(c) != 0) {
		CHECK(0, "connect to 127.0.0.1:%d: %s", io_port, strerror(errno));
		return -1;
	}
	if (!ic_exchange(c, dgst))
		return -1;
	return do_connect(c, a, q);
}

/** A controller: enabled admin queue, optionally I/O queue 1. */
struct sess {
	struct conn adm, io;
	uint16_t cntlid;
	uint64_t cap;
	uint32_t icd;      /* I/O in-capsule data bytes (IOCCSZ * 16 - 64) */
	uint16_t nqueues;  /* I/O queues granted */
	uint8_t cattr;
	const char *sub, *host;
};

static bool sess_io_connect(struct sess *s, uint8_t dgst)
{
	struct cargs a = cargs(s->sub, s->host);
	a.qid = 1;
	a.sqsize = 31;
	a.cntlid = s->cntlid;
	a.cattr = s->cattr;
	struct nkv_cqe q;
	int st = open_connect(&s->io, dgst, &a, &q);
	CHECK(st == 0, "I/O Connect QID 1: status %#x", st);
	return st == 0;
}

static bool sess_open(struct sess *s, const char *sub, const char *host, uint8_t dgst, uint8_t cattr, bool io)
{
	memset(s, 0, sizeof(*s));
	s->adm.fd = s->io.fd = -1;
	s->sub = sub;
	s->host = host;
	s->cattr = cattr;
	struct cargs a = cargs(sub, host);
	a.cattr = cattr;
	struct nkv_cqe q;
	int st = open_connect(&s->adm, dgst, &a, &q);
	CHECK(st == 0, "admin Connect to %s: status %#x", sub, st);
	if (st != 0)
		return false;
	s->cntlid = (uint16_t)nkv_get32(&q.dw0);
	CHECK(prop_get(&s->adm, NKV_REG_CAP, true, &s->cap) == 0, "Property Get CAP");
	CHECK(prop_set(&s->adm, NKV_REG_CC, CC_ENABLE) == 0, "Property Set CC %#x", CC_ENABLE);
	uint64_t csts = 0;
	for (int i = 0; i < 100; i++) {
		if (prop_get(&s->adm, NKV_REG_CSTS, false, &csts) != 0 || (csts & NKV_CSTS_RDY))
			break;
		usleep(50000);
	}
	CHECK(csts & NKV_CSTS_RDY, "CSTS.RDY after enable: CSTS %#llx", (unsigned long long)csts);
	struct nkv_sqe sq;
	static struct nkv_id_ctrlr id;
	sqe_identify(&sq, NKV_CNS_CTRLR, 0, 0);
	st = cmd_exec(&s->adm, &sq, NULL, 0, &id, sizeof(id), NULL, NULL);
	CHECK(st == 0, "Identify controller: status %#x", st);
	uint32_t ioccsz = nkv_get32(&id.ioccsz);
	s->icd = ioccsz >= 4 ? ioccsz * 16 - 64 : 0;
	memset(&sq, 0, sizeof(sq));
	sq.opc = NKV_ADM_SET_FEATURES;
	nkv_put32(&sq.cdw10, NKV_FEAT_NUM_QUEUES);
	nkv_put32(&sq.cdw11, 1u | (1u << 16));
	sqe_sgl(&sq, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
	st = cmd_exec(&s->adm, &sq, NULL, 0, NULL, 0, &q, NULL);
	CHECK(st == 0, "Set Features 07h: status %#x", st);
	s->nqueues = (uint16_t)((nkv_get32(&q.dw0) & 0xffff) + 1);
	if (st != 0)
		return false;
	return io ? sess_io_connect(s, dgst) : true;
}

static void sess_close(struct sess *s)
{
	tcp_close(&s->io);
	tcp_close(&s->adm);
}

static void sqe_kv(struct nkv_sqe *s, uint8_t opc, uint32_t nsid, const char *key, uint32_t size, uint8_t sgl,
		   uint32_t sgl_len)
{
	nkv_sqe_kv(s, opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), size, 0);
	sqe_sgl(s, sgl, sgl_len);
}

static int kv_store(struct conn *c, uint32_t nsid, const char *key, const void *val, uint32_t len)
{
	struct nkv_sqe s;
	sqe_kv(&s, NKV_KV_STORE, nsid, key, len, NKV_SGL_DATA_BLOCK_OFFSET, len);
	return cmd_exec(c, &s, val, len, NULL, 0, NULL, NULL);
}

static int kv_retrieve(struct conn *c, uint32_t nsid, const char *key, void *buf, uint32_t len, uint32_t *dw0,
		       struct xfer *x)
{
	struct nkv_sqe s;
	struct nkv_cqe q;
	sqe_kv(&s, NKV_KV_RETRIEVE, nsid, key, len, NKV_SGL_TRANSPORT_DATA_BLOCK, len);
	int st = cmd_exec(c, &s, NULL, 0, buf, len, &q, x);
	if (dw0)
		*dw0 = nkv_get32(&q.dw0);
	return st;
}

static void fill(uint8_t *b, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 8)) ^ seed);
}

/** The daemon still serves a normal host: connect, enable, Store and Retrieve on an I/O queue. */
static void check_alive(const char *after)
{
	static unsigned n;
	struct sess s;
	char key[16];
	uint8_t v[300], r[512];
	snprintf(key, sizeof(key), "alive-%u", n++);
	fill(v, sizeof(v), n);
	bool ok = sess_open(&s, SUBNQN, GOODHOST, 0, 0, true);
	if (ok) {
		uint32_t dw0 = 0;
		ok = kv_store(&s.io, 1, key, v, sizeof(v)) == 0 &&
		     kv_retrieve(&s.io, 1, key, r, sizeof(r), &dw0, NULL) == 0 && dw0 == sizeof(v) &&
		     memcmp(r, v, sizeof(v)) == 0;
	}
	sess_close(&s);
	CHECK(ok, "a normal connection works after the %s cases", after);
}

/* ---- termination -------------------------------------------------------------------------------- */

/**
 * Receive a C2HTermReq: HLEN 24, 24 < PLEN <= 152, no digest flags, reserved bytes zero, a copy of
 * the offending header (its common header checked against @sent), FES @fes1 (or @fes2, recorded,
 * when nonzero) and FEI @fei (when >= 0). Then the target must close the connection.
 */
static void expect_term(struct conn *c, const uint8_t *sent, unsigned fes1, unsigned fes2, long fei,
			const char *what)
{
	struct pdu p;
	int r = recv_pdu(c, &p, TMO_MS);
	bool is_term = r == 1 && p.type == NKV_TCP_PDU_C2H_TERM && p.len >= 24;
	CHECK(is_term, "%s: expected C2HTermReq FES %#x, got %s", what, fes1, pdu_str(r, &p));
	if (is_term) {
		unsigned fes = nkv_get16(p.b + 8);
		uint32_t v = nkv_get32(p.b + 10);
		static const uint8_t zero[10];
		CHECK(p.hlen == 24, "%s: C2HTermReq HLEN %u", what, p.hlen);
		CHECK(p.len > 24 && p.len <= NKV_TCP_TERM_MAX_PLEN, "%s: C2HTermReq PLEN %u (24 + header copy)",
		      what, p.len);
		CHECK(!(p.flags & (NKV_TCP_F_HDGST | NKV_TCP_F_DDGST)), "%s: C2HTermReq flags %#x (no digests)",
		      what, p.flags);
		CHECK(memcmp(p.b + 14, zero, 10) == 0, "%s: C2HTermReq reserved bytes 23:14 nonzero", what);
		CHECK(fes == fes1 || (fes2 && fes == fes2), "%s: FES %#x, expected %#x", what, fes, fes1);
		if (fes2 && fes == fes2)
			NOTE("%s: target answered FES %#x (spec allows %#x or %#x)", what, fes, fes1, fes2);
		if (fei >= 0)
			CHECK(v == (uint32_t)fei, "%s: FEI %#x, expected %#lx", what, v, fei);
		if (sent && p.len > 24) {
			uint32_t n = p.len - 24 < 8 ? p.len - 24 : 8;
			CHECK(memcmp(p.b + 24, sent, n) == 0, "%s: C2HTermReq data is not the offending header",
			      what);
		}
	}
	pdu_free(&p);
	CHECK(expect_closed(c), "%s: target did not close the connection after the termination", what);
}

/** Fresh connection, optionally through ICReq (@dgst >= 0). */
static bool fresh(struct conn *c, int dgst)
{
	if (tcp_open(c) != 0) {
		CHECK(0, "connect to 127.0.0.1:%d: %s", io_port, strerror(errno));
		return false;
	}
	return dgst < 0 || ic_exchange(c, (uint8_t)dgst);
}

/** Fresh connection (after ICReq when @ic), send @len crafted bytes, expect a termination. */
static void term_case(bool ic, const uint8_t *b, size_t len, unsigned fes1, unsigned fes2, long fei,
		      const char *what)
{
	struct conn c;
	if (fresh(&c, ic ? 0 : -1)) {
		send_split(&c, b, len, len < 8 ? len : (b[2] && b[2] < len ? b[2] : 8));
		expect_term(&c, b, fes1, fes2, fei, what);
	}
	tcp_close(&c);
}

/* ---- groups ------------------------------------------------------------------------------------- */

static void group_icreq(void)
{
	uint8_t b[132];
	for (uint8_t d = 0; d < 4; d++) {
		struct conn c;
		struct nkv_cqe q;
		struct cargs a = cargs(SUBNQN2, GOODHOST);
		int st = open_connect(&c, d, &a, &q);
		CHECK(st == 0, "admin Connect with DGST %u: status %#x", d, st);
		tcp_close(&c);
	}

	icreq_fill(b, 0, 0);
	nkv_put32(b + 4, 132);
	memset(b + 128, 0, 4);
	term_case(false, b, 132, NKV_TCP_FES_INVALID_HEADER, 0, 4, "ICReq PLEN 132");

	icreq_fill(b, 0, 0);
	b[2] = 64;
	term_case(false, b, 128, NKV_TCP_FES_INVALID_HEADER, 0, 2, "ICReq HLEN 64");

	/* The brief asks 06h (unsupported parameter); SPDK answers 01h. Both carry the field offset. */
	icreq_fill(b, 0, 0);
	nkv_put16(b + 8, 1);
	term_case(false, b, 128, NKV_TCP_FES_UNSUPPORTED_PARAM, NKV_TCP_FES_INVALID_HEADER, 8, "ICReq PFV 1");

	icreq_fill(b, 0, 0);
	b[10] = 32;
	term_case(false, b, 128, NKV_TCP_FES_UNSUPPORTED_PARAM, NKV_TCP_FES_INVALID_HEADER, 10, "ICReq HPDA 32");

	icreq_fill(b, 0, 0);
	term_case(true, b, 128, NKV_TCP_FES_PDU_SEQUENCE, 0, -1, "second ICReq");

	/* A CapsuleCmd before any ICReq. */
	struct conn c = {.fd = -1};
	struct nkv_sqe s;
	uint8_t *cb;
	sqe_prop_get(&s, NKV_REG_CAP, true);
	uint32_t n = capsule_build(&c, &s, NULL, 0, &cb);
	term_case(false, cb, n, NKV_TCP_FES_PDU_SEQUENCE, 0, -1, "CapsuleCmd before ICReq");
	free(cb);

	check_alive("ICReq");
}

static void group_header(void)
{
	static const uint8_t types[] = {0x0a, NKV_TCP_PDU_RSP, NKV_TCP_PDU_C2H_DATA, NKV_TCP_PDU_R2T};
	uint8_t b[24];
	char what[64];
	for (size_t i = 0; i < sizeof(types); i++) {
		memset(b, 0, sizeof(b));
		b[0] = types[i];
		b[2] = 24;
		nkv_put32(b + 4, 24);
		snprintf(what, sizeof(what), "host PDU type %#x", types[i]);
		term_case(true, b, sizeof(b), NKV_TCP_FES_INVALID_HEADER, 0, 0, what);
	}

	/* CapsuleCmd with HLEN 64, PLEN < HLEN, bad PDO: a Connect capsule, then one field broken. */
	struct conn c = {.fd = -1};
	struct nkv_sqe s;
	struct nkv_connect_data d;
	struct cargs a = cargs(SUBNQN2, GOODHOST);
	uint8_t *cb;
	connect_build(&a, &s, &d);
	uint32_t n = capsule_build(&c, &s, &d, sizeof(d), &cb);
	uint8_t *x = malloc(n + 8);

	memcpy(x, cb, n);
	x[2] = 64;
	term_case(true, x, n, NKV_TCP_FES_INVALID_HEADER, 0, 2, "CapsuleCmd HLEN 64");

	memcpy(x, cb, n);
	nkv_put32(x + 4, 40);
	term_case(true, x, 72, NKV_TCP_FES_INVALID_HEADER, 0, 4, "CapsuleCmd PLEN 40 < HLEN 72");

	/* PDO 74: not a multiple of (CPDA + 1) * 4; the data moved to match it. */
	memcpy(x, cb, 72);
	x[72] = x[73] = 0;
	memcpy(x + 74, &d, sizeof(d));
	x[3] = 74;
	nkv_put32(x + 4, 74 + sizeof(d));
	term_case(true, x, 74 + sizeof(d), NKV_TCP_FES_INVALID_HEADER, 0, 3, "CapsuleCmd PDO 74");

	/* PDO 40: inside the header. */
	memcpy(x, cb, n);
	x[3] = 40;
	term_case(true, x, n, NKV_TCP_FES_INVALID_HEADER, 0, 3, "CapsuleCmd PDO 40 < HLEN");

	/* PDO 0 although data follows the header. */
	memcpy(x, cb, n);
	x[3] = 0;
	term_case(true, x, n, NKV_TCP_FES_INVALID_HEADER, 0, 3, "CapsuleCmd PDO 0 with data");

	/* H2CData for a command that does not exist (no R2T outstanding). */
	struct nkv_tcp_data h = {.ch = {.type = NKV_TCP_PDU_H2C_DATA, .flags = NKV_TCP_F_LAST}};
	nkv_put16(&h.cccid, 77);
	nkv_put32(&h.datal, 16);
	uint8_t zero16[16] = {0};
	n = pdu_build(&c, x, &h, sizeof(h), zero16, sizeof(zero16));
	term_case(true, x, n, NKV_TCP_FES_INVALID_HEADER, NKV_TCP_FES_PDU_SEQUENCE, -1, "H2CData without an R2T");
	free(x);
	free(cb);

	/* H2CTermReq from the host: the target closes without answering. */
	if (fresh(&c, 0)) {
		uint8_t t[32] = {NKV_TCP_PDU_H2C_TERM, 0, 24, 0, 32};
		nkv_put16(t + 8, NKV_TCP_FES_INVALID_HEADER);
		memcpy(t + 24, (uint8_t[8]){NKV_TCP_PDU_RSP, 0, 24, 0, 24}, 8);
		send_all(&c, t, sizeof(t));
		CHECK(expect_closed(&c), "H2CTermReq: target must close the connection and send nothing");
	}
	tcp_close(&c);

	check_alive("PDU header");
}

static void group_digest(void)
{
	struct conn c;
	struct nkv_sqe s;
	struct nkv_connect_data d;
	struct cargs a = cargs(SUBNQN2, GOODHOST);
	uint8_t *cb;

	/* Wrong header digest on a Connect capsule. */
	if (fresh(&c, NKV_TCP_DGST_HDR)) {
		connect_build(&a, &s, &d);
		uint32_t n = capsule_build(&c, &s, &d, sizeof(d), &cb);
		uint32_t bad = nkv_get32(cb + 72) ^ 0x5a5a0001u;
		nkv_put32(cb + 72, bad);
		send_split(&c, cb, n, 76);
		expect_term(&c, cb, NKV_TCP_FES_HDGST, 0, bad, "wrong header digest");
		free(cb);
	}
	tcp_close(&c);

	/* Wrong data digest on the Connect data: Data Transfer Error, no controller. */
	if (fresh(&c, NKV_TCP_DGST_DATA)) {
		connect_build(&a, &s, &d);
		uint32_t n = capsule_build(&c, &s, &d, sizeof(d), &cb);
		cb[n - 1] ^= 0xff;
		send_all(&c, cb, n);
		const char *got = "";
		int st = cmd_wait(&c, c.cid, NULL, 0, NULL, NULL, &got);
		CHECK(st == SC(0, NKV_SC_DATA_TRANSFER_ERROR), "Connect with a wrong data digest: %s (want status 0x004)",
		      st < 0 ? got : "status above");
		if (st >= 0 && st != SC(0, NKV_SC_DATA_TRANSFER_ERROR))
			NOTE("Connect with a wrong data digest completed with status %#x", st);
		free(cb);
	}
	tcp_close(&c);

	/* Wrong data digest on a Store: Data Transfer Error, and the value is not stored. */
	struct sess ss;
	if (sess_open(&ss, SUBNQN, GOODHOST, NKV_TCP_DGST_HDR | NKV_TCP_DGST_DATA, 0, true)) {
		uint8_t v[512];
		fill(v, sizeof(v), 3);
		sqe_kv(&s, NKV_KV_STORE, 1, "ddgst-bad", sizeof(v), NKV_SGL_DATA_BLOCK_OFFSET, sizeof(v));
		uint32_t n = capsule_build(&ss.io, &s, v, sizeof(v), &cb);
		cb[n - 2] ^= 0x10;
		send_all(&ss.io, cb, n);
		const char *got = "";
		int st = cmd_wait(&ss.io, ss.io.cid, NULL, 0, NULL, NULL, &got);
		CHECK(st == SC(0, NKV_SC_DATA_TRANSFER_ERROR), "Store with a wrong data digest: %s (want 0x004)",
		      st < 0 ? got : "status above");
		if (st >= 0 && st != SC(0, NKV_SC_DATA_TRANSFER_ERROR))
			NOTE("Store with a wrong data digest completed with status %#x", st);
		free(cb);
	}
	sess_close(&ss);
	if (sess_open(&ss, SUBNQN, GOODHOST, 0, 0, true)) {
		uint8_t r[512];
		int st = kv_retrieve(&ss.io, 1, "ddgst-bad", r, sizeof(r), NULL, NULL);
		CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "value with a bad data digest was stored: Retrieve %#x", st);
	}
	sess_close(&ss);

	check_alive("digest");
}

/** The first answer to a command sent before Connect: CapsuleResp 0Ch or a termination. */
static void before_connect(struct nkv_sqe *s, const char *what)
{
	struct conn c;
	if (fresh(&c, 0)) {
		capsule_send(&c, s, NULL, 0);
		struct pdu p;
		int r = recv_pdu(&c, &p, TMO_MS);
		bool rsp = r == 1 && p.type == NKV_TCP_PDU_RSP && p.len >= 24;
		bool term = r == 1 && p.type == NKV_TCP_PDU_C2H_TERM;
		CHECK(rsp || term, "%s before Connect: got %s", what, pdu_str(r, &p));
		if (rsp) {
			unsigned st = (nkv_get16(p.b + 22) >> 1) & 0x7ff;
			CHECK(st == SC(0, NKV_SC_CMD_SEQUENCE_ERROR), "%s before Connect: status %#x, want 0x00c", what,
			      st);
			NOTE("%s before Connect: CapsuleResp status %#x", what, st);
		} else if (term) {
			NOTE("%s before Connect: %s", what, pdu_str(r, &p));
		}
		pdu_free(&p);
	}
	tcp_close(&c);
}

static void group_preconnect(void)
{
	struct nkv_sqe s;
	sqe_identify(&s, NKV_CNS_CTRLR, 0, 0);
	before_connect(&s, "Identify");
	sqe_prop_get(&s, NKV_REG_CAP, true);
	before_connect(&s, "Property Get CAP");
	check_alive("before-Connect");
}

/** Connect that must fail with SCT 1 / @sc and, for 82h, DW0 = IATTR << 16 | IPO. */
static void connect_fail(struct conn *c, const struct cargs *a, unsigned sc, unsigned alt_sc, long dw0,
			 const char *what)
{
	struct nkv_cqe q;
	int st = do_connect(c, a, &q);
	CHECK(st == SC(1, sc) || (alt_sc && st == SC(1, alt_sc)), "%s: status %#x, want %#x", what, st, SC(1, sc));
	if (alt_sc && st == SC(1, alt_sc))
		NOTE("%s: target answered SCT 1 SC %#x (accepted: %#x or %#x)", what, alt_sc, sc, alt_sc);
	if (st == SC(1, NKV_SC_CONNECT_INVALID_PARAM) && dw0 >= 0)
		CHECK((nkv_get32(&q.dw0) & 0xffffff) == (uint32_t)dw0, "%s: DW0 %#x (IATTR/IPO), want %#lx", what,
		      nkv_get32(&q.dw0), dw0);
}

/** Same as connect_fail on a fresh connection. */
static void connect_fail_new(const struct cargs *a, unsigned sc, unsigned alt_sc, long dw0, const char *what)
{
	struct conn c;
	if (fresh(&c, 0))
		connect_fail(&c, a, sc, alt_sc, dw0, what);
	tcp_close(&c);
}

#define IPO(iattr, ipo) (((long)(iattr) << 16) | (ipo))

static void group_connect(void)
{
	struct cargs a = cargs("nqn.2026-11.io.rados-nkv:no-such-subsystem", GOODHOST);
	connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(1, 256), "unknown SUBNQN");
	a = cargs(SUBNQN, BADHOST);
	connect_fail_new(&a, NKV_SC_CONNECT_INVALID_HOST, 0, -1, "host not on the allowlist");
	a = cargs(SUBNQN, GOODHOST);
	a.recfmt = 1;
	connect_fail_new(&a, NKV_SC_INCOMPATIBLE_FORMAT, 0, -1, "RECFMT 1");
	a = cargs(SUBNQN, GOODHOST);
	a.sqsize = 0;
	connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(0, 44), "admin SQSIZE 0");
	a = cargs(SUBNQN, GOODHOST);
	a.cntlid = 5;
	connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(1, 16), "admin CNTLID 5 (not FFFFh)");

	/* SUBNQN filling all 256 bytes, no NUL: not a valid NQN. */
	struct conn c;
	if (fresh(&c, 0)) {
		struct nkv_sqe s;
		struct nkv_connect_data d;
		a = cargs(SUBNQN, GOODHOST);
		connect_build(&a, &s, &d);
		memset(d.subnqn, 'a', sizeof(d.subnqn));
		struct nkv_cqe q;
		int st = cmd_exec(&c, &s, &d, sizeof(d), NULL, 0, &q, NULL);
		CHECK(st == SC(1, NKV_SC_CONNECT_INVALID_PARAM) && (nkv_get32(&q.dw0) & 0xffffff) == IPO(1, 256),
		      "SUBNQN without NUL: status %#x DW0 %#x, want 0x182 / 0x10100", st, nkv_get32(&q.dw0));
	}
	tcp_close(&c);

	/* A second Connect on an admin queue that is already connected. */
	a = cargs(SUBNQN, GOODHOST);
	struct nkv_cqe q0;
	if (open_connect(&c, 0, &a, &q0) == 0) {
		int st = do_connect(&c, &a, &q0);
		CHECK(st == SC(0, NKV_SC_CMD_SEQUENCE_ERROR), "second Connect on one queue: status %#x, want 0x00c",
		      st);
	}
	tcp_close(&c);

	/* Successful admin Connects: CNTLID range, SQHD FFFFh with flow control disabled, distinct CNTLIDs. */
	struct conn c1, c2;
	struct nkv_cqe q1, q2;
	a = cargs(SUBNQN, GOODHOST);
	a.cattr = NKV_CONNECT_CATTR_DISABLE_SQFC;
	int st1 = open_connect(&c1, 0, &a, &q1);
	a.cattr = 0;
	int st2 = open_connect(&c2, 0, &a, &q2);
	CHECK(st1 == 0 && st2 == 0, "admin Connects: status %#x, %#x", st1, st2);
	if (st1 == 0 && st2 == 0) {
		uint16_t id1 = (uint16_t)nkv_get32(&q1.dw0), id2 = (uint16_t)nkv_get32(&q2.dw0);
		CHECK(id1 >= 1 && id1 <= NKV_CNTLID_MAX, "CNTLID %#x outside 1..FFEFh", id1);
		CHECK(id2 >= 1 && id2 <= NKV_CNTLID_MAX, "CNTLID %#x outside 1..FFEFh", id2);
		CHECK(id1 != id2, "two controllers share CNTLID %#x", id1);
		CHECK(nkv_get16(&q1.sqhd) == 0xffff, "SQHD %#x with SQ flow control disabled, want FFFFh",
		      nkv_get16(&q1.sqhd));
		CHECK(nkv_get16(&q2.sqhd) == 1, "SQHD %#x after the first command with flow control on, want 1",
		      nkv_get16(&q2.sqhd));
		CHECK(nkv_get16(&q1.sqid) == 0, "Connect CQE SQID %u", nkv_get16(&q1.sqid));
		struct nkv_sqe s;
		sqe_prop_get(&s, NKV_REG_CAP, true);
		int st = cmd_exec(&c2, &s, NULL, 0, NULL, 0, &q2, NULL);
		CHECK(st == 0 && nkv_get16(&q2.sqhd) == 2, "second command: status %#x SQHD %#x, want 2", st,
		      nkv_get16(&q2.sqhd));
	}
	tcp_close(&c1);
	tcp_close(&c2);

	/* I/O queue Connects against an enabled controller of the open subsystem. */
	struct sess s;
	if (sess_open(&s, SUBNQN2, GOODHOST, 0, 0, false)) {
		struct cargs io = cargs(SUBNQN2, GOODHOST);
		io.qid = 1;
		io.cntlid = s.cntlid;

		a = io;
		a.cntlid = s.cntlid == 0xffee ? 0xffed : 0xffee;
		connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(1, 16), "I/O Connect, unknown CNTLID");
		a = io;
		a.hostnqn = BADHOST;
		connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, NKV_SC_CONNECT_INVALID_HOST, IPO(1, 512),
				 "I/O Connect, other HOSTNQN");
		a = io;
		static const uint8_t other_id[16] = {0xee, 0xee};
		a.hostid = other_id;
		connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(1, 0), "I/O Connect, other HOSTID");
		a = io;
		a.qid = (uint16_t)(s.nqueues + 1);
		connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(0, 42), "I/O Connect, QID above the grant");
		if (NKV_CAP_MQES(s.cap) < 0xffff) {
			a = io;
			a.sqsize = (uint16_t)(NKV_CAP_MQES(s.cap) + 1);
			connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(0, 44), "I/O Connect, SQSIZE > MQES");
		}
		a = io;
		a.sqsize = 0;
		connect_fail_new(&a, NKV_SC_CONNECT_INVALID_PARAM, 0, IPO(0, 44), "I/O Connect, SQSIZE 0");
		/* and the right parameters still work */
		CHECK(sess_io_connect(&s, 0), "I/O Connect after the failed ones");
		/* QID 1 again while it is connected */
		struct nkv_cqe q;
		if (fresh(&c, 0)) {
			a = io;
			int st = do_connect(&c, &a, &q);
			CHECK(st == SC(1, NKV_SC_CONNECT_INVALID_PARAM) || st == SC(0, NKV_SC_CMD_SEQUENCE_ERROR),
			      "I/O Connect for a QID already connected: status %#x, want 0x182 or 0x00c", st);
			if (st == SC(1, NKV_SC_CONNECT_INVALID_PARAM))
				CHECK((nkv_get32(&q.dw0) & 0xffffff) == IPO(0, 42), "duplicate QID: DW0 %#x, want IPO 42",
				      nkv_get32(&q.dw0));
			NOTE("I/O Connect for a QID already connected: status %#x", st);
		}
		tcp_close(&c);
	}
	sess_close(&s);

	check_alive("Connect");
}

static void group_io(void)
{
	struct sess s;
	if (!sess_open(&s, SUBNQN, GOODHOST, 0, NKV_CONNECT_CATTR_DISABLE_SQFC, true)) {
		sess_close(&s);
		return;
	}
	struct nkv_sqe q;
	struct xfer x;
	struct nkv_cqe cqe;
	static struct nkv_id_ctrlr id;
	int st;

	/* Identify over C2HData */
	sqe_identify(&q, NKV_CNS_CTRLR, 0, 0);
	st = cmd_exec(&s.adm, &q, NULL, 0, &id, sizeof(id), &cqe, &x);
	CHECK(st == 0, "Identify: status %#x", st);
	CHECK(x.bytes == NKV_IDENTIFY_SIZE && x.contiguous, "Identify C2HData: %u bytes in %u PDUs, contiguous %d",
	      x.bytes, x.pdus, x.contiguous);
	CHECK(x.pdus && x.last_ok, "Identify C2HData: LAST_PDU not (only) on the final PDU");
	CHECK(!x.success_flag && x.got_rsp, "Identify: SUCCESS flag %d, CapsuleResp %d (SQ flow control off)",
	      x.success_flag, x.got_rsp);
	CHECK(nkv_get16(&id.cntlid) == s.cntlid, "Identify CNTLID %#x, Connect gave %#x", nkv_get16(&id.cntlid),
	      s.cntlid);
	CHECK(nkv_get16(&cqe.sqhd) == 0xffff, "SQHD %#x on the admin queue with flow control off",
	      nkv_get16(&cqe.sqhd));

	/* Read-only namespace 2 */
	uint8_t v[1000], r[4096];
	fill(v, sizeof(v), 11);
	st = kv_store(&s.io, 2, "ro-key", v, sizeof(v));
	CHECK(st == SC(0, NKV_SC_NS_WRITE_PROTECTED), "Store to read-only NS 2: status %#x, want 0x020", st);
	sqe_kv(&q, NKV_KV_DELETE, 2, "ro-key", 0, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
	st = cmd_exec(&s.io, &q, NULL, 0, NULL, 0, NULL, NULL);
	CHECK(st == SC(0, NKV_SC_NS_WRITE_PROTECTED), "Delete on read-only NS 2: status %#x, want 0x020", st);

	/* Retrieve: C2HData then CapsuleResp with DW0 = value size, never the SUCCESS shortcut */
	CHECK(kv_store(&s.io, 1, "rd-key", v, sizeof(v)) == 0, "Store rd-key");
	uint32_t dw0 = 0;
	st = kv_retrieve(&s.io, 1, "rd-key", r, sizeof(r), &dw0, &x);
	CHECK(st == 0 && dw0 == sizeof(v), "Retrieve: status %#x DW0 %u, want value size %zu", st, dw0, sizeof(v));
	CHECK(x.bytes == sizeof(v) && x.contiguous && x.last_ok && memcmp(r, v, sizeof(v)) == 0,
	      "Retrieve data: %u bytes in %u PDUs", x.bytes, x.pdus);
	CHECK(!x.success_flag && x.got_rsp, "Retrieve used the C2HData SUCCESS flag (loses DW0)");
	/* Host buffer smaller than the value: min(value, HBS) bytes, DW0 still the full size (C.8, A.3) */
	st = kv_retrieve(&s.io, 1, "rd-key", r, 100, &dw0, &x);
	CHECK(st == 0 && dw0 == sizeof(v) && x.bytes == 100 && memcmp(r, v, 100) == 0,
	      "Retrieve with HBS 100 of a %zu-byte value: status %#x DW0 %u, %u bytes", sizeof(v), st, dw0, x.bytes);

	/* PSDT 00b on a fabrics queue: Invalid Field */
	sqe_kv(&q, NKV_KV_STORE, 1, "psdt", 16, NKV_SGL_DATA_BLOCK_OFFSET, 16);
	q.flags &= 0x3f;
	st = cmd_exec(&s.io, &q, v, 16, NULL, 0, NULL, NULL);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD), "Store with PSDT 00b: status %#x, want 0x002", st);
	sqe_identify(&q, NKV_CNS_CTRLR, 0, 0);
	q.flags &= 0x3f;
	st = cmd_exec(&s.adm, &q, NULL, 0, &id, sizeof(id), NULL, NULL);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD), "Identify with PSDT 00b: status %#x, want 0x002", st);

	/* FUSE != 0: Invalid Field (docs/nvme-kv-wire.md B.1, C.1) */
	sqe_kv(&q, NKV_KV_STORE, 1, "fuse", 16, NKV_SGL_DATA_BLOCK_OFFSET, 16);
	q.flags |= 1;
	st = cmd_exec(&s.io, &q, v, 16, NULL, 0, NULL, NULL);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD), "Store with FUSE 01b: status %#x, want 0x002", st);

	/* Value Size (CDW10) different from the SGL length (docs/nvme-kv-wire.md A.3: Invalid Field or 0Fh) */
	sqe_kv(&q, NKV_KV_STORE, 1, "vs-mismatch", 100, NKV_SGL_DATA_BLOCK_OFFSET, 16);
	st = cmd_exec(&s.io, &q, v, 16, NULL, 0, NULL, NULL);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD) || st == SC(0, NKV_SC_DATA_SGL_LENGTH_INVALID),
	      "Store with Value Size 100 and 16 bytes of SGL: status %#x, want 0x002 or 0x00f", st);

	/* Queue management opcodes on a fabrics admin queue: Invalid Opcode (docs/nvme-kv-wire.md B.4) */
	static const uint8_t qm_ops[] = {NKV_ADM_CREATE_SQ, NKV_ADM_CREATE_CQ, NKV_ADM_DELETE_SQ, NKV_ADM_DELETE_CQ};
	for (size_t i = 0; i < sizeof(qm_ops); i++) {
		memset(&q, 0, sizeof(q));
		q.opc = qm_ops[i];
		nkv_put32(&q.cdw10, 2u | (31u << 16));
		sqe_sgl(&q, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
		st = cmd_exec(&s.adm, &q, NULL, 0, NULL, 0, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_INVALID_OPCODE), "admin opcode %#x on fabrics: status %#x, want 0x001",
		      qm_ops[i], st);
	}

	/* Property Get of a register fabrics do not have (AQA 24h) */
	uint64_t pv;
	st = prop_get(&s.adm, NKV_REG_AQA, false, &pv);
	CHECK(st == SC(1, NKV_SC_CONNECT_INVALID_PARAM) || st == SC(0, NKV_SC_INVALID_FIELD),
	      "Property Get AQA: status %#x, want 0x182 or 0x002", st);
	NOTE("Property Get AQA (not a fabrics property): status %#x", st);

	/* SGL descriptor types other than 01h / 5Ah */
	static const uint8_t sgl_types[] = {0x00, 0x20, 0x40, 0x11};
	for (size_t i = 0; i < sizeof(sgl_types); i++) {
		sqe_kv(&q, NKV_KV_STORE, 1, "sgl", 16, sgl_types[i], 16);
		st = cmd_exec(&s.io, &q, NULL, 0, NULL, 0, NULL, NULL);
		CHECK(st == SC(0, 0x11) || st == SC(0, NKV_SC_INVALID_SGL_SEG),
		      "Store with SGL type byte %#x: status %#x, want 0x011 or 0x00d", sgl_types[i], st);
		NOTE("SGL type byte %#x: status %#x", sgl_types[i], st);
	}

	/* In-capsule data on a read-direction command */
	sqe_kv(&q, NKV_KV_RETRIEVE, 1, "rd-key", 16, NKV_SGL_DATA_BLOCK_OFFSET, 16);
	st = cmd_exec(&s.io, &q, v, 16, r, sizeof(r), NULL, &x);
	CHECK(st == SC(0, NKV_SC_INVALID_FIELD) && x.bytes == 0,
	      "Retrieve with in-capsule data: status %#x, %u bytes back, want 0x002", st, x.bytes);

	/* In-capsule data above the in-capsule limit */
	CHECK(s.icd >= 1024, "IOCCSZ gives %u in-capsule bytes", s.icd);
	if (s.icd) {
		uint32_t big = s.icd + 16;
		uint8_t *bv = malloc(big);
		fill(bv, big, 5);
		st = kv_store(&s.io, 1, "too-big-icd", bv, big);
		CHECK(st == SC(0, NKV_SC_SGL_OFFSET_INVALID) || st == SC(0, NKV_SC_DATA_SGL_LENGTH_INVALID),
		      "Store with %u in-capsule bytes (limit %u): status %#x, want 0x016 or 0x00f", big, s.icd, st);
		NOTE("in-capsule data above the limit: status %#x", st);
		free(bv);
		st = kv_retrieve(&s.io, 1, "too-big-icd", r, sizeof(r), NULL, NULL);
		CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "oversized in-capsule Store was stored: Retrieve %#x", st);
	}
	sess_close(&s);
	check_alive("I/O command");
}

/* ---- R2T ---------------------------------------------------------------------------------------- */

struct r2t {
	uint16_t ttag;
	uint32_t r2to, r2tl;
};

/** Send a Store of @len bytes through R2T (SGL 5Ah, no in-capsule data) and read the first R2T. */
static bool r2t_start(struct conn *c, const char *key, uint32_t len, struct r2t *t)
{
	struct nkv_sqe q;
	sqe_kv(&q, NKV_KV_STORE, 1, key, len, NKV_SGL_TRANSPORT_DATA_BLOCK, len);
	if (!capsule_send(c, &q, NULL, 0))
		return false;
	struct pdu p;
	int r = recv_pdu(c, &p, TMO_MS);
	bool ok = r == 1 && p.type == NKV_TCP_PDU_R2T && p.len >= 24;
	CHECK(ok, "Store of %u bytes with SGL 5Ah: expected R2T, got %s", len, pdu_str(r, &p));
	if (ok) {
		t->ttag = nkv_get16(p.b + 10);
		t->r2to = nkv_get32(p.b + 12);
		t->r2tl = nkv_get32(p.b + 16);
		CHECK(p.hlen == 24 && p.pdo == 0 && p.len == 24u + (c->hd ? 4 : 0), "R2T HLEN %u PDO %u PLEN %u",
		      p.hlen, p.pdo, p.len);
		CHECK(nkv_get16(p.b + 8) == c->cid, "R2T CCCID %u, command %u", nkv_get16(p.b + 8), c->cid);
		CHECK(t->r2to == 0 && t->r2tl > 0 && t->r2tl <= len, "first R2T: R2TO %u R2TL %u for %u bytes", t->r2to,
		      t->r2tl, len);
	}
	pdu_free(&p);
	return ok;
}

/** Send one H2CData PDU for the last command; its 24-byte header is copied to @hdr when not NULL. */
static bool h2c_send(struct conn *c, uint16_t ttag, uint32_t datao, const uint8_t *data, uint32_t datal, bool last,
		     uint8_t *hdr)
{
	struct nkv_tcp_data h = {.ch = {.type = NKV_TCP_PDU_H2C_DATA, .flags = last ? NKV_TCP_F_LAST : 0}};
	nkv_put16(&h.cccid, c->cid);
	nkv_put16(&h.ttag, ttag);
	nkv_put32(&h.datao, datao);
	nkv_put32(&h.datal, datal);
	uint8_t *b = pdu_alloc(datal);
	uint32_t n = pdu_build(c, b, &h, sizeof(h), data, datal);
	if (hdr)
		memcpy(hdr, b, sizeof(h));
	bool ok = send_split(c, b, n, 24 + (c->hd ? 4 : 0));
	free(b);
	return ok;
}

/** One negative H2CData case on a fresh controller: expect a termination. */
static void r2t_bad(uint32_t len, int what_case, unsigned fes1, unsigned fes2, const char *what)
{
	struct sess s;
	struct r2t t;
	if (sess_open(&s, SUBNQN, GOODHOST, 0, 0, true) && r2t_start(&s.io, "r2t-bad", len, &t)) {
		uint32_t dl = t.r2tl < 4096 ? t.r2tl : 4096, mh = s.io.maxh2c;
		uint8_t *v = calloc(1, mh + 8);
		uint8_t hdr[24];
		switch (what_case) {
		case 0: /* wrong TTAG */
			h2c_send(&s.io, (uint16_t)(t.ttag ^ 0x5a5a), t.r2to, v, dl, dl == t.r2tl, hdr);
			break;
		case 1: /* DATAO just past the R2T range */
			h2c_send(&s.io, t.ttag, t.r2to + t.r2tl, v, 4, true, hdr);
			break;
		case 3: /* DATAO not contiguous: the first chunk twice */
			h2c_send(&s.io, t.ttag, t.r2to, v, dl / 2, false, NULL);
			h2c_send(&s.io, t.ttag, t.r2to, v, dl / 2, false, hdr);
			break;
		default: /* DATAL above MAXH2CDATA */
			if (t.r2tl <= mh)
				fes2 = NKV_TCP_FES_DATA_OUT_OF_RANGE; /* then it is also outside the R2T */
			h2c_send(&s.io, t.ttag, t.r2to, v, mh + 4, false, hdr);
			break;
		}
		expect_term(&s.io, hdr, fes1, fes2, -1, what);
		free(v);
	}
	sess_close(&s);
}

/** A Store through R2T answered with H2CData of @chunk bytes per PDU; the value must read back. */
static void r2t_good(uint8_t dgst, uint32_t len, uint32_t chunk)
{
	struct sess s;
	struct r2t t;
	char key[16];
	snprintf(key, sizeof(key), "r2t-%u-%u", dgst, len);
	uint8_t *v = malloc(len), *r = malloc(len + 64);
	fill(v, len, len);
	if (sess_open(&s, SUBNQN, GOODHOST, dgst, 0, true) && r2t_start(&s.io, key, len, &t)) {
		if (chunk > s.io.maxh2c)
			chunk = s.io.maxh2c;
		int st = -1;
		unsigned r2ts = 1;
		for (;;) {
			for (uint32_t o = t.r2to; o < t.r2to + t.r2tl; o += chunk) {
				uint32_t n = t.r2to + t.r2tl - o < chunk ? t.r2to + t.r2tl - o : chunk;
				h2c_send(&s.io, t.ttag, o, v + o, n, o + n == t.r2to + t.r2tl, NULL);
			}
			struct pdu p;
			int rr = recv_pdu(&s.io, &p, TMO_MS);
			if (rr == 1 && p.type == NKV_TCP_PDU_R2T && p.len >= 24 && r2ts < 1000) {
				uint32_t next = t.r2to + t.r2tl;
				t.ttag = nkv_get16(p.b + 10);
				t.r2to = nkv_get32(p.b + 12);
				t.r2tl = nkv_get32(p.b + 16);
				CHECK(t.r2to == next && t.r2tl && t.r2to + t.r2tl <= len, "R2T %u: R2TO %u R2TL %u", r2ts,
				      t.r2to, t.r2tl);
				r2ts++;
				pdu_free(&p);
				if (t.r2to != next)
					break;
				continue;
			}
			if (rr == 1 && p.type == NKV_TCP_PDU_RSP && p.len >= 24)
				st = (nkv_get16(p.b + 22) >> 1) & 0x7ff;
			CHECK(st == 0, "Store of %u bytes through %u R2T(s), DGST %u: %s", len, r2ts, dgst, pdu_str(rr, &p));
			pdu_free(&p);
			break;
		}
		uint32_t dw0 = 0;
		struct xfer x;
		st = kv_retrieve(&s.io, 1, key, r, len + 64, &dw0, &x);
		CHECK(st == 0 && dw0 == len && x.bytes == len && memcmp(r, v, len) == 0,
		      "read back %u bytes stored through R2T: status %#x DW0 %u, %u bytes", len, st, dw0, x.bytes);
	}
	sess_close(&s);
	free(v);
	free(r);
}

/** C2HData PDO must honour the host's HPDA (docs/nvme-kv-wire.md C.4). */
static void hpda_case(uint8_t hpda)
{
	struct conn c;
	struct cargs a = cargs(SUBNQN, GOODHOST);
	struct nkv_cqe q;
	if (tcp_open(&c) != 0)
		return;
	c.hpda = hpda;
	if (ic_exchange(&c, NKV_TCP_DGST_HDR) && do_connect(&c, &a, &q) == 0 && prop_set(&c, NKV_REG_CC, CC_ENABLE) == 0) {
		uint64_t csts = 0;
		for (int i = 0; i < 100 && prop_get(&c, NKV_REG_CSTS, false, &csts) == 0 && !(csts & NKV_CSTS_RDY); i++)
			usleep(50000);
		struct nkv_sqe s;
		static struct nkv_id_ctrlr id;
		struct xfer x;
		sqe_identify(&s, NKV_CNS_CTRLR, 0, 0);
		int st = cmd_exec(&c, &s, NULL, 0, &id, sizeof(id), NULL, &x);
		CHECK(st == 0 && x.bytes == sizeof(id), "Identify with HPDA %u: status %#x, %u bytes", hpda, st, x.bytes);
	} else {
		CHECK(0, "connection with HPDA %u", hpda);
	}
	tcp_close(&c);
}

/** H2CData with a wrong data digest: the Store fails with Data Transfer Error and stores nothing. */
static void r2t_bad_ddgst(uint32_t len)
{
	struct sess s;
	struct r2t t;
	uint8_t *v = calloc(1, len);
	if (sess_open(&s, SUBNQN, GOODHOST, NKV_TCP_DGST_DATA, 0, true) && r2t_start(&s.io, "r2t-ddgst", len, &t)) {
		uint32_t n = t.r2tl < s.io.maxh2c ? t.r2tl : s.io.maxh2c;
		struct nkv_tcp_data h = {.ch = {.type = NKV_TCP_PDU_H2C_DATA, .flags = n == t.r2tl ? NKV_TCP_F_LAST : 0}};
		nkv_put16(&h.cccid, s.io.cid);
		nkv_put16(&h.ttag, t.ttag);
		nkv_put32(&h.datao, t.r2to);
		nkv_put32(&h.datal, n);
		uint8_t *b = pdu_alloc(n);
		uint32_t plen = pdu_build(&s.io, b, &h, sizeof(h), v, n);
		b[plen - 1] ^= 0x01;
		send_all(&s.io, b, plen);
		free(b);
		const char *got = "";
		int st = cmd_wait(&s.io, s.io.cid, NULL, 0, NULL, NULL, &got);
		CHECK(st == SC(0, NKV_SC_DATA_TRANSFER_ERROR), "H2CData with a wrong data digest: %s (want status 0x004)",
		      st < 0 ? got : "status above");
		if (st >= 0 && st != SC(0, NKV_SC_DATA_TRANSFER_ERROR))
			NOTE("H2CData with a wrong data digest: status %#x", st);
	}
	sess_close(&s);
	if (sess_open(&s, SUBNQN, GOODHOST, 0, 0, true)) {
		int st = kv_retrieve(&s.io, 1, "r2t-ddgst", v, len, NULL, NULL);
		CHECK(st == SC(0, NKV_SC_KV_KEY_NOT_EXIST), "value with a bad H2CData digest was stored: Retrieve %#x", st);
	}
	sess_close(&s);
	free(v);
}

/** Several capsules in one send(), then one capsule a byte per send(): framing must not depend on reads. */
static void framing_cases(void)
{
	struct sess s;
	if (!sess_open(&s, SUBNQN, GOODHOST, NKV_TCP_DGST_HDR | NKV_TCP_DGST_DATA, 0, true)) {
		sess_close(&s);
		return;
	}
	enum { N = 8 };
	uint8_t v[N][600], r[700], *buf = malloc(N * 1024), *one;
	uint32_t off = 0, dw0;
	char key[16];
	bool seen[N] = {false};
	for (unsigned i = 0; i < N; i++) {
		struct nkv_sqe q;
		uint8_t *b;
		fill(v[i], sizeof(v[i]), 100 + i);
		snprintf(key, sizeof(key), "pipe-%u", i);
		sqe_kv(&q, NKV_KV_STORE, 1, key, sizeof(v[i]), NKV_SGL_DATA_BLOCK_OFFSET, sizeof(v[i]));
		uint32_t n = capsule_build(&s.io, &q, v[i], sizeof(v[i]), &b);
		memcpy(buf + off, b, n);
		off += n;
		free(b);
	}
	uint16_t cid0 = (uint16_t)(s.io.cid - N + 1);
	send_all(&s.io, buf, off);
	for (unsigned i = 0; i < N; i++) {
		struct pdu p;
		int rr = recv_pdu(&s.io, &p, TMO_MS);
		bool ok = rr == 1 && p.type == NKV_TCP_PDU_RSP && p.len >= 24;
		unsigned cid = ok ? nkv_get16(p.b + 20) : 0, st = ok ? (nkv_get16(p.b + 22) >> 1) & 0x7ff : 0;
		ok = ok && cid >= cid0 && cid < cid0 + (unsigned)N && !seen[cid - cid0] && st == 0;
		CHECK(ok, "pipelined Store %u of %u: %s", i, N, pdu_str(rr, &p));
		if (ok)
			seen[cid - cid0] = true;
		pdu_free(&p);
		if (!ok)
			break;
	}
	for (unsigned i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "pipe-%u", i);
		int st = kv_retrieve(&s.io, 1, key, r, sizeof(r), &dw0, NULL);
		CHECK(st == 0 && dw0 == sizeof(v[i]) && memcmp(r, v[i], sizeof(v[i])) == 0, "pipelined value %u: %#x", i,
		      st);
	}

	struct nkv_sqe q;
	sqe_kv(&q, NKV_KV_STORE, 1, "bytewise", sizeof(v[0]), NKV_SGL_DATA_BLOCK_OFFSET, sizeof(v[0]));
	uint32_t n = capsule_build(&s.io, &q, v[0], sizeof(v[0]), &one);
	bool sent = true;
	for (uint32_t i = 0; i < n && sent; i++)
		sent = send(s.io.fd, one + i, 1, MSG_NOSIGNAL) == 1;
	free(one);
	const char *got = "";
	int st = cmd_wait(&s.io, s.io.cid, NULL, 0, NULL, NULL, &got);
	CHECK(sent && st == 0, "Store sent one byte per send(): %s", st < 0 ? got : "status above");
	st = kv_retrieve(&s.io, 1, "bytewise", r, sizeof(r), &dw0, NULL);
	CHECK(st == 0 && dw0 == sizeof(v[0]) && memcmp(r, v[0], sizeof(v[0])) == 0, "bytewise value: %#x", st);
	free(buf);
	sess_close(&s);
}

/**
 * A capsule claiming @len bytes of in-capsule data, far above the limit: the target must answer
 * (SGL Offset Invalid after reading it, or a termination) without hanging. Recorded either way.
 */
static void huge_capsule(uint32_t len)
{
	struct sess s;
	if (sess_open(&s, SUBNQN, GOODHOST, 0, 0, true)) {
		struct nkv_sqe q;
		uint8_t *b;
		sqe_kv(&q, NKV_KV_STORE, 1, "huge-icd", len, NKV_SGL_DATA_BLOCK_OFFSET, len);
		capsule_build(&s.io, &q, NULL, 0, &b);
		b[3] = 72;
		nkv_put32(b + 4, 72 + len);
		send_split(&s.io, b, 72, 72);
		free(b);
		uint8_t *chunk = calloc(1, 1 << 16);
		for (uint32_t o = 0; o < len;) {
			struct pollfd pf = {.fd = s.io.fd, .events = POLLIN | POLLOUT};
			if (poll(&pf, 1, TMO_MS) <= 0 || (pf.revents & (POLLIN | POLLERR | POLLHUP)))
				break;
			ssize_t k = send(s.io.fd, chunk, len - o < (1u << 16) ? len - o : (1u << 16), MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k < 0 && errno != EAGAIN)
				break;
			o += k > 0 ? (uint32_t)k : 0;
		}
		free(chunk);
		struct pdu p;
		int rr = recv_pdu(&s.io, &p, TMO_MS);
		bool rsp = rr == 1 && p.type == NKV_TCP_PDU_RSP && p.len >= 24;
		bool term = rr == 1 && p.type == NKV_TCP_PDU_C2H_TERM;
		unsigned st = rsp ? (nkv_get16(p.b + 22) >> 1) & 0x7ff : 0;
		CHECK((rsp && (st == SC(0, NKV_SC_SGL_OFFSET_INVALID) || st == SC(0, NKV_SC_DATA_SGL_LENGTH_INVALID))) ||
		      (term && (nkv_get16(p.b + 8) == NKV_TCP_FES_DATA_LIMIT ||
				nkv_get16(p.b + 8) == NKV_TCP_FES_INVALID_HEADER)),
		      "capsule with %u in-capsule bytes: %s (want SC 16h/0Fh or FES 05h/01h)", len, pdu_str(rr, &p));
		NOTE("capsule with %u in-capsule bytes: %s", len, pdu_str(rr, &p));
		pdu_free(&p);
	}
	sess_close(&s);
}

/** CC with IOSQES 5: the controller must not become ready (docs/nvme-kv-wire.md B.3: validate CC). */
static void bad_cc_case(void)
{
	struct conn c;
	struct cargs a = cargs(SUBNQN, GOODHOST);
	struct nkv_cqe q;
	if (open_connect(&c, 0, &a, &q) == 0) {
		int st = prop_set(&c, NKV_REG_CC, (CC_ENABLE & ~(0xfu << 16)) | (5u << 16));
		uint64_t csts = 0;
		usleep(200000);
		int st2 = prop_get(&c, NKV_REG_CSTS, false, &csts);
		CHECK(st != 0 || (st2 == 0 && !(csts & NKV_CSTS_RDY)),
		      "CC with IOSQES 5: Property Set %#x, CSTS %#llx (must not become ready)", st,
		      (unsigned long long)csts);
		NOTE("CC with IOSQES 5: Property Set status %#x, CSTS %#llx", st, (unsigned long long)csts);
	}
	tcp_close(&c);
}

/** An I/O queue Connect to a controller that was never enabled must fail. */
static void io_before_enable_case(void)
{
	struct conn c, d;
	struct cargs a = cargs(SUBNQN, GOODHOST);
	struct nkv_cqe q;
	d.fd = -1;
	if (open_connect(&c, 0, &a, &q) == 0 && fresh(&d, 0)) {
		a.qid = 1;
		a.cntlid = (uint16_t)nkv_get32(&q.dw0);
		int st = do_connect(&d, &a, &q);
		CHECK(st == SC(0, NKV_SC_CMD_SEQUENCE_ERROR) || st == SC(1, NKV_SC_CONNECT_INVALID_PARAM),
		      "I/O Connect before CC.EN = 1: status %#x, want 0x00c or 0x182", st);
		NOTE("I/O Connect before CC.EN = 1: status %#x", st);
	}
	tcp_close(&d);
	tcp_close(&c);
}

/**
 * CC.SHN with AERs held: the Property Set's CapsuleResp is the next PDU and no CQE follows for the
 * AERs. SPDK's host completes its own AERs before it writes CC.SHN and terminates the association
 * on a CapsuleResp whose CID it no longer holds; SPDK's nvmf_tgt and Linux nvmet keep them held.
 */
static void shutdown_aer_case(void)
{
	struct conn c;
	struct cargs a = cargs(SUBNQN, GOODHOST);
	struct nkv_cqe q;
	if (open_connect(&c, 0, &a, &q) == 0 && prop_set(&c, NKV_REG_CC, CC_ENABLE) == 0) {
		struct nkv_sqe s;
		bool sent = true;
		for (int i = 0; i < 2; i++) {
			memset(&s, 0, sizeof(s));
			s.opc = NKV_ADM_ASYNC_EVENT;
			sqe_sgl(&s, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
			sent = sent && capsule_send(&c, &s, NULL, 0);
		}
		int st = sent ? prop_set(&c, NKV_REG_CC, CC_ENABLE | (1u << 14)) : -1;
		CHECK(st == 0, "Property Set CC.SHN = 01b with 2 AERs held: status %d", st);
		uint64_t csts = 0;
		CHECK(prop_get(&c, NKV_REG_CSTS, false, &csts) == 0 && (csts & NKV_CSTS_SHST_MASK) == NKV_CSTS_SHST_DONE,
		      "CSTS.SHST after CC.SHN: CSTS %#llx", (unsigned long long)csts);
		struct pdu p;
		int r = recv_pdu(&c, &p, 300);
		CHECK(r == -1, "nothing after the shutdown's Property Set: got %s", pdu_str(r, &p));
		pdu_free(&p);
	} else {
		CHECK(0, "Connect and enable for the shutdown case");
	}
	tcp_close(&c);
}

/** KATO 1000 ms: Keep Alive keeps the association; silence ends it (docs/nvme-kv-wire.md C.11). */
static void kato_case(void)
{
	struct conn c;
	struct cargs a = cargs(SUBNQN, GOODHOST);
	struct nkv_cqe q;
	a.kato = 1000;
	if (open_connect(&c, 0, &a, &q) == 0 && prop_set(&c, NKV_REG_CC, CC_ENABLE) == 0) {
		struct nkv_sqe s;
		bool ok = true;
		for (int i = 0; i < 8 && ok; i++) {
			usleep(300000);
			memset(&s, 0, sizeof(s));
			s.opc = NKV_ADM_KEEP_ALIVE;
			sqe_sgl(&s, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
			ok = cmd_exec(&c, &s, NULL, 0, NULL, 0, NULL, NULL) == 0;
		}
		CHECK(ok, "Keep Alive every 300 ms with KATO 1000 ms");
		uint8_t b;
		int r = recv_exact(&c, &b, 1, 12000);
		CHECK(r == 0, "no Keep Alive for 12 s with KATO 1000 ms: the association must end (got %d)", r);
	} else {
		CHECK(0, "Connect with KATO 1000 ms");
	}
	tcp_close(&c);
}

static void group_r2t(void)
{
	hpda_case(3);
	hpda_case(31);
	struct sess s;
	uint32_t icd = 8192, mh = 131072;
	if (sess_open(&s, SUBNQN, GOODHOST, 0, 0, false)) {
		icd = s.icd ? s.icd : icd;
		mh = s.adm.maxh2c;
	}
	sess_close(&s);

	r2t_good(0, icd + 5001, 4096);
	r2t_good(NKV_TCP_DGST_HDR | NKV_TCP_DGST_DATA, icd + 5001, 1000);
	r2t_good(0, mh + 3 * 4096 + 2, 65536);

	r2t_bad(icd + 4096, 0, NKV_TCP_FES_INVALID_HEADER, NKV_TCP_FES_PDU_SEQUENCE, "H2CData with a wrong TTAG");
	r2t_bad(icd + 4096, 1, NKV_TCP_FES_DATA_OUT_OF_RANGE, 0, "H2CData DATAO outside the R2T");
	r2t_bad(mh + 8192, 2, NKV_TCP_FES_DATA_LIMIT, 0, "H2CData DATAL above MAXH2CDATA");
	r2t_bad(icd + 4096, 3, NKV_TCP_FES_DATA_OUT_OF_RANGE, NKV_TCP_FES_INVALID_HEADER, "H2CData DATAO not contiguous");
	r2t_bad_ddgst(icd + 4096);
	check_alive("R2T");
}

static void group_misc(void)
{
	framing_cases();
	huge_capsule(16u << 20);
	bad_cc_case();
	io_before_enable_case();
	shutdown_aer_case();
	kato_case();
	check_alive("framing/state/keep-alive");
}

/* ---- daemon ------------------------------------------------------------------------------------- */

static int free_port(int *keep)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t l = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*keep = fd;
	return ntohs(a.sin_port);
}

static pid_t daemon_start(const char *path, int port, int dport)
{
	char listen[64], disc[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(disc, sizeof(disc), "127.0.0.1:%d", dport);
	const char *argv[] = {path, "--backend", "mem", "--listen", listen, "--discovery", disc,
			      "--log-level", getenv("TCP_PROTO_LOG") ? getenv("TCP_PROTO_LOG") : "warn",
			      "--subsys", SUBNQN, "--pool", "nkv", "--ns", "1", "--ns", "2::65536:ro",
			      "--allow-host", GOODHOST,
			      "--subsys", SUBNQN2, "--pool", "nkv", "--ns", "1", NULL};
	return daemon_spawn(argv, NULL, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH/TO/rados-nkv\n", argv[0]);
		return 2;
	}
	verbose = getenv("TCP_PROTO_VERBOSE") && atoi(getenv("TCP_PROTO_VERBOSE"));
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK(nkv_crc32c("123456789", 9) == 0xe3069283u, "CRC32C check value");

	int k1 = -1, k2 = -1;
	io_port = free_port(&k1);
	int dport = free_port(&k2);
	close(k1);
	close(k2);
	pid_t pid = io_port > 0 && dport > 0 ? daemon_start(argv[1], io_port, dport) : -1;
	bool ready = pid > 0 && daemon_wait_port(pid, io_port);
	CHECK(ready, "daemon %s listening on 127.0.0.1:%d within 10 s", argv[1], io_port);
	if (ready) {
		static void (*const groups[])(void) = {group_icreq,      group_header,  group_digest,
						       group_preconnect, group_connect, group_io,
						       group_r2t,        group_misc};
		static const char *const names[] = {"ICReq", "PDU header", "digests", "before Connect",
						    "Connect", "I/O commands", "R2T", "framing, state, keep alive"};
		for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
			unsigned f = h_fail;
			printf("== %s\n", names[i]);
			groups[i]();
			printf("== %s: %u failed\n", names[i], h_fail - f);
		}
	}
	if (pid > 0) {
		if (ready)
			daemon_stop(pid, 10);
		else {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
