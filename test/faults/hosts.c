/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hosts.c - hosts that vanish in the middle of a transfer (the "host" scenario of suite.c):
 *   - a raw NVMe/TCP host (no libnkv: libnkv never stops half way) that sends half of a Store's
 *     H2C data and then resets the connection (SO_LINGER 0) or just closes it;
 *   - a shared-memory host (libnkv in a process of its own, `fault_suite shm-child`) that queues
 *     Retrieves into its registered memory and is killed with SIGKILL while they are in flight.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faults.h"
#include "hosts.h"
#include "nkv/nkv.h"
#include "nkv/nkv_spec.h"

#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))
#define RAW_MS 5000      /* every wait for the daemon */
#define H2C_CHUNK 65536  /* bytes per H2CData PDU (MAXH2CDATA is 128 KiB) */

struct raw {
	int fd;
	uint16_t cid;
};

static bool send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool recv_exact(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	uint64_t end = f_now_ms() + RAW_MS;
	while (n) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = (int)(end - f_now_ms());
		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return false;
		ssize_t k = recv(fd, p, n, 0);
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* One PDU: the first 24 bytes of its header into @hdr, the rest dropped. @return its type or -1. */
static int recv_pdu(int fd, uint8_t hdr[24])
{
	uint8_t ch[8];
	if (!recv_exact(fd, ch, 8))
		return -1;
	uint32_t plen = nkv_get32(ch + 4);
	if (plen < 8 || plen > (8u << 20))
		return -1;
	uint8_t *rest = malloc(plen);
	bool ok = plen == 8 || recv_exact(fd, rest, plen - 8);
	memset(hdr, 0, 24);
	memcpy(hdr, ch, 8);
	if (ok && plen > 8)
		memcpy(hdr + 8, rest, plen - 8 < 16 ? plen - 8 : 16);
	free(rest);
	return ok ? ch[0] : -1;
}

static int raw_open(const char *addr, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int one = 1, fd = -1;
	if (getaddrinfo(addr, port, &hints, &ai) != 0)
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	uint8_t ic[128] = {NKV_TCP_PDU_ICREQ, 0, 128}, h[24];
	nkv_put32(ic + 4, 128);
	if (!send_all(fd, ic, sizeof(ic)) || recv_pdu(fd, h) != NKV_TCP_PDU_ICRESP) {
		close(fd);
		return -1;
	}
	return fd;
}

static void sgl(struct nkv_sqe *s, uint8_t type, uint32_t len)
{
	memset(s->dptr, 0, sizeof(s->dptr));
	nkv_put32(s->dptr + 8, len);
	s->dptr[15] = type;
	s->flags = (uint8_t)((s->flags & 0x3f) | (NKV_PSDT_SGL << NKV_SQE_PSDT_SHIFT));
}

static bool capsule(struct raw *c, struct nkv_sqe *sqe, const void *data, uint32_t dlen)
{
	c->cid++;
	nkv_put16(&sqe->cid, c->cid);
	uint32_t plen = 72 + dlen;
	uint8_t *b = calloc(1, plen);
	b[0] = NKV_TCP_PDU_CMD;
	b[2] = 72;
	b[3] = dlen ? 72 : 0;
	nkv_put32(b + 4, plen);
	memcpy(b + 8, sqe, 64);
	if (dlen)
		memcpy(b + 72, data, dlen);
	bool ok = send_all(c->fd, b, plen);
	free(b);
	return ok;
}

/* Send @sqe (+ in-capsule data) and wait for its response. @return the status, -1 on failure. */
static int exec(struct raw *c, struct nkv_sqe *sqe, const void *data, uint32_t dlen, uint32_t *dw0)
{
	uint8_t h[24];
	if (!capsule(c, sqe, data, dlen))
		return -1;
	for (;;) {
		int t = recv_pdu(c->fd, h);
		if (t == NKV_TCP_PDU_C2H_DATA)
			continue;
		if (t != NKV_TCP_PDU_RSP)
			return -1;
		if (dw0)
			*dw0 = nkv_get32(h + 8);
		return (nkv_get16(h + 22) >> 1) & 0x7ff;
	}
}

static void fabrics(struct nkv_sqe *s, uint8_t fctype)
{
	memset(s, 0, sizeof(*s));
	s->opc = NKV_ADM_FABRICS;
	((uint8_t *)s)[4] = fctype;
	sgl(s, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
}

static int fconnect(struct raw *c, uint16_t qid, uint16_t cntlid, uint32_t *dw0)
{
	struct nkv_sqe s;
	struct nkv_connect_data d;
	fabrics(&s, NKV_FCTYPE_CONNECT);
	nkv_put16((uint8_t *)&s + 42, qid);
	nkv_put16((uint8_t *)&s + 44, 31);
	nkv_put32((uint8_t *)&s + 48, qid ? 0 : 10000);
	sgl(&s, NKV_SGL_DATA_BLOCK_OFFSET, sizeof(d));
	memset(&d, 0, sizeof(d));
	d.hostid[15] = 0xbb;
	nkv_put16(&d.cntlid, cntlid);
	snprintf(d.subnqn, sizeof(d.subnqn), "%s", FAULT_SUBNQN);
	snprintf(d.hostnqn, sizeof(d.hostnqn), "%s", FAULT_HOSTNQN);
	return exec(c, &s, &d, sizeof(d), dw0);
}

int raw_half_store(const char *addr, const char *port, const uint8_t key[16], const uint8_t *val, uint32_t len,
		   bool rst, char why[128])
{
	struct raw adm = {.fd = raw_open(addr, port)}, io = {.fd = -1};
	struct nkv_sqe s;
	uint32_t dw0 = 0;
	int sent = -1;

	if (adm.fd < 0 || fconnect(&adm, 0, 0xffff, &dw0) != 0) {
		snprintf(why, 128, "admin queue: ICReq or Connect failed");
		goto out;
	}
	fabrics(&s, NKV_FCTYPE_PROP_SET);
	nkv_put32((uint8_t *)&s + 44, NKV_REG_CC);
	nkv_put32((uint8_t *)&s + 48, CC_ENABLE);
	if (exec(&adm, &s, NULL, 0, NULL) != 0) {
		snprintf(why, 128, "Property Set CC.EN failed");
		goto out;
	}
	memset(&s, 0, sizeof(s));
	s.opc = NKV_ADM_SET_FEATURES;
	nkv_put32(&s.cdw10, NKV_FEAT_NUM_QUEUES);
	sgl(&s, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
	uint16_t cntlid = (uint16_t)dw0;
	if (exec(&adm, &s, NULL, 0, NULL) != 0 || (io.fd = raw_open(addr, port)) < 0 || fconnect(&io, 1, cntlid, NULL) != 0) {
		snprintf(why, 128, "I/O queue: Set Features, ICReq or Connect failed");
		goto out;
	}
	/* The Store, its data through R2T (far above the in-capsule size). */
	nkv_sqe_kv(&s, NKV_KV_STORE, 1, key, 16, len, 0);
	sgl(&s, NKV_SGL_TRANSPORT_DATA_BLOCK, len);
	uint8_t h[24];
	if (!capsule(&io, &s, NULL, 0) || recv_pdu(io.fd, h) != NKV_TCP_PDU_R2T) {
		snprintf(why, 128, "no R2T for a Store of %u bytes", len);
		goto out;
	}
	uint16_t ttag = nkv_get16(h + 10);
	uint32_t half = len / 2;
	sent = 0;
	for (uint32_t off = 0; off < half;) {
		/* Whole PDUs up to half the value, then one PDU cut in the middle of its data. */
		uint32_t n = len - off < H2C_CHUNK ? len - off : H2C_CHUNK;
		uint32_t give = off + n >= half ? n / 2 : n;
		uint8_t *b = calloc(1, 24 + n);
		b[0] = NKV_TCP_PDU_H2C_DATA;
		b[1] = off + n == len ? NKV_TCP_F_LAST : 0;
		b[2] = 24;
		b[3] = 24;
		nkv_put32(b + 4, 24 + n);
		nkv_put16(b + 8, io.cid);
		nkv_put16(b + 10, ttag);
		nkv_put32(b + 12, off);
		nkv_put32(b + 16, n);
		memcpy(b + 24, val + off, n);
		bool ok = send_all(io.fd, b, 24 + give);
		free(b);
		if (!ok)
			break;
		sent += (int)give;
		off += n;
		if (give < n)
			break;
	}
	/* Let the daemon take in what was sent before the connection goes. */
	usleep(100000);
	if (rst) {
		struct linger lg = {1, 0};
		setsockopt(io.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
out:
	if (io.fd >= 0)
		close(io.fd);
	if (adm.fd >= 0) {
		if (rst) {
			struct linger lg = {1, 0};
			setsockopt(adm.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		close(adm.fd);
	}
	return sent;
}

/* ---- the shared-memory host, in a process of its own ------------------------------------------- */

struct shm_child_op {
	unsigned done;
};

static void child_cb(void *arg, const struct nkv_cpl *cpl)
{
	(void)cpl;
	((struct shm_child_op *)arg)->done++;
}

int shm_child_main(const char *sock, uint64_t key_base, unsigned nkeys, uint32_t len, unsigned nreads, int ready_fd)
{
	struct nkv_conn_opts o = {.hostnqn = FAULT_HOSTNQN, .timeout_ms = 10000};
	struct nkv_ctrl *ctrl = NULL;
	struct nkv_qpair *qp = NULL;
	struct shm_child_op st = {0};
	int rc;

	o.hostid[15] = 0xcc;
	if ((rc = nkv_connect_shm(sock, &o, &ctrl)) != 0 || (rc = nkv_qpair_create(ctrl, (uint16_t)(nreads + 1), &qp)) != 0) {
		fprintf(stderr, "shm host: connect %s: %s\n", sock, strerror(-rc));
		return 1;
	}
	uint8_t *mem = nkv_buf_alloc(ctrl, (size_t)nreads * len);
	if (!mem) {
		fprintf(stderr, "shm host: cannot register %u x %u bytes\n", nreads, len);
		return 1;
	}
	for (unsigned i = 0; i < nreads; i++) {
		char s[17];
		snprintf(s, sizeof(s), "fk%014llu", (unsigned long long)(key_base + i % nkeys));
		if ((rc = nkv_retrieve_async(qp, 1, s, 16, mem + (size_t)i * len, len, child_cb, &st)) != 0) {
			fprintf(stderr, "shm host: Retrieve %u: %s\n", i, strerror(-rc));
			return 1;
		}
	}
	nkv_qpair_flush(qp); /* one doorbell: every Retrieve is the controller's now */
	if (write(ready_fd, "r", 1) != 1)
		return 1;
	/* Wait for the SIGKILL; polling keeps the queue as a live host would. */
	for (;;)
		nkv_qpair_poll(qp, 100);
}
