/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp.c - the NVMe/TCP initiator engine of libnkv: socket setup, ICReq/ICResp, command capsules,
 * R2T/H2CData, C2HData, CapsuleResp, digests, and the submit/poll API (docs/nvme-kv-wire.md C.3-C.9).
 *
 * One queue pair = one nonblocking TCP socket. Commands live in preallocated slots (CID = slot
 * index). Sending batches the queued PDUs of many commands into one sendmsg() and points the iovecs
 * at the caller's value buffers (no copy). Receiving stages headers and short data in a 64 KiB buffer
 * and reads long C2HData runs straight into the caller's buffer. With opts.tls the connection runs
 * a TLS handshake first (tls.c) and every byte goes through the session (src/common/tls.h: records
 * gathered from the same iovecs), the plain path unchanged.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/tls.h"

#define TX_IOV_MAX 64
#define RX_BUDGET 256 /* PDUs handled per poll round before sending again */

static const uint8_t g_zeros[128]; /* PDO padding source: (CPDA+1)*4 <= 128 bytes */


/* ---- socket setup ------------------------------------------------------------------------------ */

/** Wait for @events on @fd until @deadline (ms, monotonic). @return 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - nkv_client_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int connect_one(const struct addrinfo *ai, int64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		int e = -errno;
		close(fd);
		return e;
	}
	int rc = wait_fd(fd, POLLOUT, deadline);
	if (rc == 0) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			rc = -errno;
		else if (soerr)
			rc = -soerr;
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	int one = 1;
	/* Small PDUs (capsules, H2C headers) must not wait for Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int tcp_connect(const char *addr, const char *port, int64_t deadline)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV},
			*res = NULL;
	char host[257];
	size_t n = strlen(addr);
	char *end;
	unsigned long pn = strtoul(port, &end, 10);

	/* A port is a number: a name would be looked up as a service, and fail as if the host did. */
	if (!*port || *end || *port == '-' || *port == '+' || pn == 0 || pn > 65535) {
		NKV_DEBUG("port '%s' is not a number from 1 to 65535", port);
		return -EINVAL;
	}
	/* "[::1]", as the daemon's --listen writes IPv6 addresses: getaddrinfo wants it bare. */
	if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']' && n - 2 < sizeof(host)) {
		memcpy(host, addr + 1, n - 2);
		host[n - 2] = '\0';
		addr = host;
	}
	int g = getaddrinfo(addr, port, &hints, &res);
	if (g != 0) {
		NKV_DEBUG("resolve %s:%s: %s", addr, port, gai_strerror(g));
		/* -ENXIO: the name does not resolve, told apart from a host that does not answer. */
		return g == EAI_SYSTEM ? -errno : -ENXIO;
	}
	int fd = -EHOSTUNREACH;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, deadline);
		if (fd >= 0 || fd == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

/* Over TLS: the bytes go to the session, which must then push them out. */
static int tls_send_all(struct nkv_tls *t, int fd, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;
	int rc = 0;
	while (rc == 0 && (len || t->stage_len)) {
		struct iovec iov = {(void *)p, len};
		ssize_t n = len ? nkv_tls_sendv(t, &iov, 1) : nkv_tls_flush(t);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n == -EAGAIN) {
			rc = wait_fd(fd, t->want_write ? POLLOUT : POLLIN, deadline);
		} else if (n < 0) {
			rc = (int)n;
		}
	}
	return rc;
}

static int send_all(struct nkv_qpair *qp, const void *buf, size_t len, int64_t deadline)
{
	const uint8_t *p = buf;
	int fd = qp->fd;
	if (qp->tls)
		return tls_send_all(nkv_tcp_tls_io(qp), fd, buf, len, deadline);
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = wait_fd(fd, POLLOUT, deadline);
			if (rc)
				return rc;
		} else {
			return n < 0 ? -errno : -ECONNRESET;
		}
	}
	return 0;
}

static int recv_all(struct nkv_qpair *qp, void *buf, size_t len, int64_t deadline)
{
	uint8_t *p = buf;
	int fd = qp->fd;
	struct nkv_tls *t = nkv_tcp_tls_io(qp);
	while (len) {
		ssize_t n = t ? nkv_tls_recv(t, p, len) : recv(fd, p, len, 0);
		if (t && n < 0) {
			int rc = n == -EAGAIN ? wait_fd(fd, t->rd_want_write ? POLLOUT : POLLIN, deadline) : (int)n;
			if (rc)
				return rc;
			continue;
		}
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n == 0) {
			return -ECONNRESET;
		} else if (errno == EAGAIN || errno == EINTR) {
			int rc = wait_fd(fd, POLLIN, deadline);
			if (rc)
				return rc;
		} else {
			return -errno;
		}
	}
	return 0;
}

/** ICReq/ICResp exchange and the checks a Linux host applies (docs/nvme-kv-wire.md C.4). */
static int ic_exchange(struct nkv_qpair *qp, int64_t deadline)
{
	struct nkv_tcp_ic ic;
	memset(&ic, 0, sizeof(ic));
	ic.ch.type = NKV_TCP_PDU_ICREQ;
	ic.ch.hlen = sizeof(ic);
	nkv_put32(&ic.ch.plen, sizeof(ic));
	nkv_put16(&ic.pfv, 0);
	ic.pda = 0;   /* HPDA 0: no padding before C2H data */
	ic.dgst = (qp->hdgst ? NKV_TCP_DGST_HDR : 0) | (qp->ddgst ? NKV_TCP_DGST_DATA : 0);
	nkv_put32(&ic.maxr2t_or_maxh2cdata, 0); /* MAXR2T 0's based: one R2T per command */
	int rc = send_all(qp, &ic, sizeof(ic), deadline);
	if (rc)
		return rc;

	uint8_t r[NKV_TCP_TERM_MAX_PLEN];
	rc = recv_all(qp, r, 8, deadline);
	if (rc)
		return rc;
	uint32_t plen = nkv_get32(r + 4);
	if (r[0] == NKV_TCP_PDU_C2H_TERM) {
		if (plen > 8 && plen <= sizeof(r))
			recv_all(qp, r + 8, plen - 8, deadline);
		NKV_WARN("target refused ICReq: C2HTermReq FES %u", nkv_get16(r + 8));
		return -EPROTO;
	}
	if (r[0] != NKV_TCP_PDU_ICRESP || r[2] != 128 || plen != 128) {
		NKV_WARN("expected ICResp, got PDU type %u hlen %u plen %u", r[0], r[2], plen);
		return -EPROTO;
	}
	rc = recv_all(qp, r + 8, 120, deadline);
	if (rc)
		return rc;
	struct nkv_tcp_ic resp;
	memcpy(&resp, r, sizeof(resp));
	uint32_t maxh2c = nkv_get32(&resp.maxr2t_or_maxh2cdata);
	if (nkv_get16(&resp.pfv) != 0 || resp.pda > 31 || resp.dgst != ic.dgst ||
	    maxh2c < NKV_TCP_MIN_MAXH2CDATA || (maxh2c & 3)) {
		NKV_WARN("bad ICResp: PFV %u CPDA %u DGST %u (asked %u) MAXH2CDATA %u",
			 nkv_get16(&resp.pfv), resp.pda, resp.dgst, ic.dgst, maxh2c);
		return -EPROTO;
	}
	qp->cpda = resp.pda;
	qp->maxh2cdata = maxh2c;
	return 0;
}

int nkv_tcp_qp_open(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t slots, struct nkv_qpair **out)
{
	struct nkv_qpair *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->reqs = calloc(slots, sizeof(*qp->reqs));
	qp->stage = malloc(NKV_RX_STAGE);
	if (!qp->reqs || !qp->stage) {
		free(qp->reqs);
		free(qp->stage);
		free(qp);
		return -ENOMEM;
	}
	qp->ctrl = ctrl;
	qp->ops = &nkv_tcp_ops;
	qp->fd = -1;
	qp->qid = qid;
	qp->depth = slots;
	qp->hdgst = ctrl->opts.hdgst;
	qp->ddgst = ctrl->opts.ddgst;
	qp->timeout_ms = ctrl->opts.timeout_ms;
	qp->icd_max = NKV_TCP_ADMIN_ICD; /* the I/O queue value is set after Connect */
	for (uint16_t i = 0; i < slots; i++)
		qp->reqs[i].next = i + 1 < slots ? i + 1 : -1;
	qp->free_head = 0;
	qp->txq_head = qp->txq_tail = -1;
	qp->rx_state = RX_HDR;
	qp->rxh_need = 8;

	int64_t deadline = nkv_client_now_ms() + qp->timeout_ms;
	int fd = tcp_connect(ctrl->traddr, ctrl->trsvcid, deadline);
	if (fd < 0) {
		nkv_tcp_qp_close(qp);
		return fd;
	}
	qp->fd = fd;
	int rc = ctrl->opts.tls ? nkv_tcp_tls_open(qp, deadline) : 0;
	if (rc == 0)
		rc = ic_exchange(qp, deadline);
	if (rc) {
		nkv_tcp_qp_close(qp);
		return rc;
	}
	*out = qp;
	return 0;
}

/* ---- completion and failure ------------------------------------------------------------------- */

/*
 * A successful Retrieve (Range) moves min(DW0 - offset, buffer) bytes (docs/nvme-kv-wire.md A.3,
 * A.9): a C2HData count that differs means the host would take a prefix, or bytes it never got, for
 * the value. The command's SQE is still in r->hdr (a controller-to-host command sends no H2CData).
 */
static bool short_retrieve(const struct nkv_qpair *qp, const struct nkv_req *r, const struct nkv_cpl *c)
{
	struct nkv_sqe sqe;
	memcpy(&sqe, r->hdr + 8, sizeof(sqe));
	if (qp->qid == 0 || (sqe.opc != NKV_KV_RETRIEVE && sqe.opc != NKV_VS_RETRIEVE_RANGE))
		return false;
	uint32_t hbs = nkv_get32(&sqe.cdw10), lim = hbs < r->len ? hbs : r->len;
	uint64_t off = sqe.opc == NKV_VS_RETRIEVE_RANGE ? (uint64_t)nkv_get32(&sqe.cdw13) << 32 | nkv_get32(&sqe.cdw12) : 0;
	return (r->dir == DIR_C2H ? c->xfer : 0) != nkv_range_xfer(c->dw0, off, r->dir == DIR_C2H ? lim : 0);
}

static void req_complete(struct nkv_qpair *qp, struct nkv_req *r, const struct nkv_cpl *cpl)
{
	nkv_cb cb = r->cb;
	void *arg = r->arg;
	struct nkv_cpl c = *cpl;

	if (r->data_err && c.status == 0)
		c.status = NKV_SC_DATA_TRANSFER_ERROR; /* data digest mismatch (docs/nvme-kv-wire.md C.9) */
	if (r->dir == DIR_C2H)
		c.xfer = r->c2h_next;
	if (c.status == 0 && short_retrieve(qp, r, &c)) {
		NKV_WARN("qid %u: Retrieve got %u bytes of a %u-byte value for a %u-byte buffer", qp->qid, c.xfer,
			 c.dw0, r->len);
		c.status = NKV_SC_DATA_TRANSFER_ERROR; /* never a prefix taken for the value */
	}
	r->state = REQ_FREE;
	r->next = qp->free_head;
	qp->free_head = (int32_t)(r - qp->reqs);
	qp->outstanding--;
	qp->ncompleted++;
	if (cb)
		cb(arg, &c);
}

void nkv_tcp_qp_fail(struct nkv_qpair *qp, int err)
{
	if (qp->err)
		return;
	qp->err = err ? err : -ECONNRESET;
	if (qp->fd >= 0) {
		NKV_DEBUG("qid %u connection failed: %s", qp->qid, strerror(-qp->err));
		nkv_tcp_tls_close(qp);
		close(qp->fd);
		qp->fd = -1;
	}
	qp->txq_head = qp->txq_tail = -1;
	struct nkv_cpl cpl = {.status = NKV_STATUS_HOST_PATH};
	for (uint16_t i = 0; i < qp->depth; i++)
		if (qp->reqs[i].state != REQ_FREE) {
			qp->reqs[i].data_err = false;
			req_complete(qp, &qp->reqs[i], &cpl);
		}
}

void nkv_tcp_qp_close(struct nkv_qpair *qp)
{
	if (!qp)
		return;
	if (qp->reqs)
		nkv_tcp_qp_fail(qp, -ECONNABORTED);
	nkv_tcp_tls_close(qp);
	if (qp->fd >= 0)
		close(qp->fd);
	free(qp->reqs);
	free(qp->stage);
	free(qp);
}

/* ---- send side --------------------------------------------------------------------------------- */

static uint32_t pdo_align(const struct nkv_qpair *qp, uint32_t off)
{
	uint32_t a = (qp->cpda + 1u) * 4u;
	return (off + a - 1) / a * a;
}

static void txq_push(struct nkv_qpair *qp, struct nkv_req *r)
{
	int32_t idx = (int32_t)(r - qp->reqs);
	r->next = -1;
	if (qp->txq_tail < 0)
		qp->txq_head = idx;
	else
		qp->reqs[qp->txq_tail].next = idx;
	qp->txq_tail = idx;
}

/** Fill in the PDU framing common to CapsuleCmd and H2CData: digests, PDO, PLEN. */
static void frame_pdu(struct nkv_qpair *qp, struct nkv_req *r, uint8_t type, uint8_t flags, uint8_t hlen,
		      const uint8_t *data, uint32_t dlen)
{
	uint32_t hd = qp->hdgst ? 4 : 0;
	uint32_t dd = (qp->ddgst && dlen) ? 4 : 0;
	uint32_t pdo = dlen ? pdo_align(qp, hlen + hd) : 0;

	r->hdr[0] = type;
	r->hdr[1] = flags | (hd ? NKV_TCP_F_HDGST : 0) | (dd ? NKV_TCP_F_DDGST : 0);
	r->hdr[2] = hlen;
	r->hdr[3] = (uint8_t)pdo;
	nkv_put32(r->hdr + 4, (dlen ? pdo + dlen + dd : hlen + hd));
	if (hd)
		nkv_put32(r->hdr + hlen, nkv_crc32c(r->hdr, hlen));
	r->hdr_len = hlen + hd;
	r->pad = dlen ? pdo - (hlen + hd) : 0;
	r->tx_data = data;
	r->tx_len = dlen;
	if (dd)
		nkv_put32(r->ddgst, nkv_crc32c(data, dlen));
}

/** Build the next H2CData PDU of the active R2T (not queued yet). */
static void frame_h2c(struct nkv_qpair *qp, struct nkv_req *r)
{
	uint32_t n = r->r2t_end - r->r2t_next;
	if (n > qp->maxh2cdata)
		n = qp->maxh2cdata;
	bool last = r->r2t_next + n == r->r2t_end;
	nkv_put16(r->hdr + 8, (uint16_t)(r - qp->reqs));
	nkv_put16(r->hdr + 10, r->ttag);
	nkv_put32(r->hdr + 12, r->r2t_next);
	nkv_put32(r->hdr + 16, n);
	nkv_put32(r->hdr + 20, 0);
	frame_pdu(qp, r, NKV_TCP_PDU_H2C_DATA, last ? NKV_TCP_F_LAST : 0, 24, (const uint8_t *)r->buf + r->r2t_next,
		  n);
	r->state = REQ_TX_H2C;
}

/** Build the next H2CData PDU of the active R2T and queue it at the tail. */
static void queue_h2c(struct nkv_qpair *qp, struct nkv_req *r)
{
	frame_h2c(qp, r);
	txq_push(qp, r);
}

/*
 * Queue the next H2CData PDUs of the commands whose data PDU just went out at the FRONT of the send
 * queue (behind a partly sent head), oldest first: a command's data keeps flowing until it is
 * complete, instead of every large Store advancing one PDU per round, which made concurrent Stores
 * all finish their transfers (and reach RADOS) at the same late moment.
 */
static void queue_h2c_continuations(struct nkv_qpair *qp, int32_t first)
{
	int32_t head = -1, tail = -1;

	for (int32_t i = first; i >= 0; i = qp->reqs[i].more_next) {
		frame_h2c(qp, &qp->reqs[i]);
		qp->reqs[i].next = -1;
		if (tail < 0)
			head = i;
		else
			qp->reqs[tail].next = i;
		tail = i;
	}
	if (head < 0)
		return;
	if (qp->txq_head < 0) {
		qp->txq_head = head;
		qp->txq_tail = tail;
	} else if (qp->tx_off > 0) { /* the head PDU is partly on the wire: go right behind it */
		struct nkv_req *h = &qp->reqs[qp->txq_head];
		qp->reqs[tail].next = h->next;
		h->next = head;
		if (qp->txq_tail == qp->txq_head)
			qp->txq_tail = tail;
	} else {
		qp->reqs[tail].next = qp->txq_head;
		qp->txq_head = head;
	}
}

/** The current PDU of @r went out completely. @return true if @r has more H2C data to send now. */
static bool pdu_sent(struct nkv_qpair *qp, struct nkv_req *r)
{
	if (r->state == REQ_TX_CMD) {
		r->state = REQ_WAIT;
		return false;
	}
	/* H2CData */
	r->r2t_next += r->tx_len;
	if (r->rsp_pending) {
		/* The target answered before taking all the data: nothing more to send. */
		r->rsp_pending = false;
		r->r2t_active = false;
		req_complete(qp, r, &r->cpl);
		return false;
	}
	if (r->r2t_next < r->r2t_end)
		return true;
	r->r2t_active = false;
	r->state = REQ_WAIT;
	return false;
}

static int pdu_iov(const struct nkv_qpair *qp, struct nkv_req *r, struct iovec *iov, uint32_t *total)
{
	int n = 0;
	iov[n++] = (struct iovec){r->hdr, r->hdr_len};
	*total = r->hdr_len;
	if (r->tx_len) {
		if (r->pad)
			iov[n++] = (struct iovec){(void *)g_zeros, r->pad};
		iov[n++] = (struct iovec){(void *)r->tx_data, r->tx_len};
		*total += r->pad + r->tx_len;
		if (qp->ddgst) {
			iov[n++] = (struct iovec){r->ddgst, 4};
			*total += 4;
		}
	}
	return n;
}

/** Send queued PDUs until the queue is empty or the socket is full. @return 0 or -errno. */
static int tx_flush(struct nkv_qpair *qp)
{
	struct nkv_tls *t = nkv_tcp_tls_io(qp);
	if (t) { /* a record taken earlier goes first */
		int rc = nkv_tls_flush(t);
		if (rc < 0)
			return rc == -EAGAIN ? 0 : rc;
	}
	while (qp->txq_head >= 0) {
		struct iovec iov[TX_IOV_MAX];
		int niov = 0;
		for (int32_t i = qp->txq_head; i >= 0 && niov + 4 <= TX_IOV_MAX; i = qp->reqs[i].next) {
			uint32_t tot;
			int k = pdu_iov(qp, &qp->reqs[i], iov + niov, &tot);
			if (i == qp->txq_head) {
				/* skip what an earlier partial send already delivered */
				uint32_t skip = qp->tx_off;
				int j = 0;
				while (skip >= iov[niov + j].iov_len) {
					skip -= (uint32_t)iov[niov + j].iov_len;
					j++;
				}
				iov[niov + j].iov_base = (uint8_t *)iov[niov + j].iov_base + skip;
				iov[niov + j].iov_len -= skip;
				memmove(iov + niov, iov + niov + j, (size_t)(k - j) * sizeof(*iov));
				k -= j;
			}
			niov += k;
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
		ssize_t sent;
		if (t) {
			if ((sent = nkv_tls_sendv(t, iov, niov)) < 0)
				return sent == -EAGAIN ? 0 : (int)sent;
		} else if ((sent = sendmsg(qp->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return 0;
			return -errno;
		}
		/* Retire the PDUs that went out completely. */
		size_t left = (size_t)sent;
		int32_t more = -1, more_tail = -1;
		while (left > 0 && qp->txq_head >= 0) {
			struct nkv_req *r = &qp->reqs[qp->txq_head];
			uint32_t tot;
			struct iovec tmp[4];
			pdu_iov(qp, r, tmp, &tot);
			uint32_t rem = tot - qp->tx_off;
			if (left < rem) {
				qp->tx_off += (uint32_t)left;
				break;
			}
			left -= rem;
			qp->tx_off = 0;
			qp->txq_head = r->next;
			if (qp->txq_head < 0)
				qp->txq_tail = -1;
			if (pdu_sent(qp, r)) {
				int32_t idx = (int32_t)(r - qp->reqs);
				r->more_next = -1;
				if (more_tail < 0)
					more = idx;
				else
					qp->reqs[more_tail].more_next = idx;
				more_tail = idx;
			}
			if (qp->err)
				return qp->err;
		}
		queue_h2c_continuations(qp, more);
	}
	return 0;
}

/* ---- receive side ------------------------------------------------------------------------------ */

static struct nkv_req *req_of_cid(struct nkv_qpair *qp, uint16_t cid)
{
	if (cid >= qp->depth || qp->reqs[cid].state == REQ_FREE)
		return NULL;
	return &qp->reqs[cid];
}

/** Remove @r from the send queue (it is not the partially sent head). */
static void txq_remove(struct nkv_qpair *qp, struct nkv_req *r)
{
	int32_t idx = (int32_t)(r - qp->reqs), prev = -1;
	for (int32_t i = qp->txq_head; i >= 0; prev = i, i = qp->reqs[i].next) {
		if (i != idx)
			continue;
		if (prev < 0)
			qp->txq_head = r->next;
		else
			qp->reqs[prev].next = r->next;
		if (qp->txq_tail == idx)
			qp->txq_tail = prev;
		return;
	}
}

static int on_rsp(struct nkv_qpair *qp)
{
	struct nkv_cqe cqe;
	memcpy(&cqe, qp->rxh + 8, sizeof(cqe));
	uint16_t cid = nkv_get16(&cqe.cid);
	struct nkv_req *r = req_of_cid(qp, cid);
	if (!r || r->state == REQ_TX_CMD) {
		NKV_WARN("qid %u: CapsuleResp for unknown CID %u", qp->qid, cid);
		return -EPROTO;
	}
	uint16_t st = nkv_get16(&cqe.status) >> 1;
	struct nkv_cpl cpl = {
		.status = st & 0x7ff,
		.dnr = (st & NKV_STATUS_DNR) != 0,
		.dw0 = nkv_get32(&cqe.dw0),
		.dw1 = nkv_get32(&cqe.dw1),
	};
	if (r->state == REQ_TX_H2C) {
		int32_t idx = (int32_t)(r - qp->reqs);
		if (idx == qp->txq_head && qp->tx_off > 0) {
			/* Half-sent PDU: finish it to keep the stream framed, complete afterwards. */
			r->cpl = cpl;
			r->rsp_pending = true;
			return 0;
		}
		txq_remove(qp, r);
	}
	req_complete(qp, r, &cpl);
	return 0;
}

static int on_r2t(struct nkv_qpair *qp)
{
	uint16_t cid = nkv_get16(qp->rxh + 8);
	uint32_t r2to = nkv_get32(qp->rxh + 12), r2tl = nkv_get32(qp->rxh + 16);
	struct nkv_req *r = req_of_cid(qp, cid);
	if (!r || r->state != REQ_WAIT || r->dir != DIR_H2C || r->icd || r->r2t_active || r2tl == 0 ||
	    r2to > r->len || r2tl > r->len - r2to) {
		NKV_WARN("qid %u: unexpected R2T CID %u R2TO %u R2TL %u", qp->qid, cid, r2to, r2tl);
		return -EPROTO;
	}
	r->ttag = nkv_get16(qp->rxh + 10);
	r->r2t_next = r2to;
	r->r2t_end = r2to + r2tl;
	r->r2t_active = true;
	queue_h2c(qp, r);
	return 0;
}

static void c2h_done(struct nkv_qpair *qp);

/** A C2HData header arrived: validate it and set up the data step. */
static int on_c2h(struct nkv_qpair *qp, uint32_t hlen_hd)
{
	const uint8_t *h = qp->rxh;
	uint16_t cid = nkv_get16(h + 8);
	uint32_t datao = nkv_get32(h + 12), datal = nkv_get32(h + 16), plen = nkv_get32(h + 4);
	uint8_t flags = h[1];
	uint32_t pdo = h[3], dd = (qp->ddgst && datal) ? 4 : 0;
	struct nkv_req *r = req_of_cid(qp, cid);

	if (datal == 0 && pdo < hlen_hd)
		pdo = hlen_hd; /* no data: PDO may be 0 */
	if (!r || r->state != REQ_WAIT || r->dir != DIR_C2H || datao != r->c2h_next || datao > r->len ||
	    datal > r->len - datao || pdo < hlen_hd || plen != pdo + datal + dd ||
	    ((flags & NKV_TCP_F_SUCCESS) && !(flags & NKV_TCP_F_LAST)) ||
	    (datal && qp->ddgst && !(flags & NKV_TCP_F_DDGST))) {
		NKV_WARN("qid %u: bad C2HData CID %u DATAO %u DATAL %u PDO %u PLEN %u flags %#x", qp->qid,
			 cid, datao, datal, pdo, plen, flags);
		return -EPROTO;
	}
	qp->rx_req = r;
	qp->rx_dst = (uint8_t *)r->buf + datao;
	qp->rx_flags = flags;
	qp->rx_crc = NKV_CRC32C_INIT;
	qp->rx_left = pdo - hlen_hd;
	qp->rx_state = RX_PAD;
	/* rx_left of RX_DATA is set when the pad is done: keep DATAL in the header buffer */
	return 0;
}

/** Move through the C2HData steps that are complete (including empty ones). */
static void rx_step(struct nkv_qpair *qp)
{
	uint32_t datal = nkv_get32(qp->rxh + 16);
	for (;;) {
		switch (qp->rx_state) {
		case RX_PAD:
			if (qp->rx_left)
				return;
			qp->rx_state = RX_DATA;
			qp->rx_left = datal;
			continue;
		case RX_DATA:
			if (qp->rx_left)
				return;
			if (qp->ddgst && datal) {
				qp->rx_state = RX_DDGST;
				qp->rx_left = 4;
				return;
			}
			qp->rx_state = RX_HDR;
			c2h_done(qp);
			return;
		case RX_DDGST:
			if (qp->rx_left)
				return;
			qp->rx_state = RX_HDR;
			c2h_done(qp);
			return;
		default:
			return;
		}
	}
}

/** The whole C2HData PDU was received. */
static void c2h_done(struct nkv_qpair *qp)
{
	struct nkv_req *r = qp->rx_req;
	uint32_t datal = nkv_get32(qp->rxh + 16);
	if (qp->ddgst && datal && nkv_get32(qp->rx_ddgst) != nkv_crc32c_final(qp->rx_crc)) {
		NKV_WARN("qid %u: C2HData data digest mismatch (CID %u)", qp->qid,
			 (unsigned)(r - qp->reqs));
		r->data_err = true;
	}
	r->c2h_next += datal;
	qp->rx_req = NULL;
	if (qp->rx_flags & NKV_TCP_F_SUCCESS) {
		struct nkv_cpl cpl = {0}; /* synthesized CQE: DW0 = DW1 = 0 (docs/nvme-kv-wire.md C.8) */
		req_complete(qp, r, &cpl);
	}
}

static int hdr_expected_hlen(uint8_t type)
{
	switch (type) {
	case NKV_TCP_PDU_RSP:
	case NKV_TCP_PDU_C2H_DATA:
	case NKV_TCP_PDU_R2T:
	case NKV_TCP_PDU_C2H_TERM:
		return 24;
	default:
		return -1;
	}
}

/** The common header (8 bytes) is in: decide how many header bytes follow. */
static int on_ch(struct nkv_qpair *qp)
{
	uint8_t type = qp->rxh[0], hlen = qp->rxh[2];
	uint32_t plen = nkv_get32(qp->rxh + 4);
	if (hdr_expected_hlen(type) != hlen || plen < hlen) {
		NKV_WARN("qid %u: unexpected PDU type %u HLEN %u PLEN %u", qp->qid, type, hlen, plen);
		return -EPROTO;
	}
	if (type == NKV_TCP_PDU_C2H_TERM) {
		if (plen > NKV_TCP_TERM_MAX_PLEN)
			return -EPROTO;
		qp->rxh_need = plen; /* TermReq: no digests */
		return 0;
	}
	if (qp->hdgst && !(qp->rxh[1] & NKV_TCP_F_HDGST)) {
		NKV_WARN("qid %u: PDU type %u without the negotiated header digest", qp->qid, type);
		return -EPROTO;
	}
	qp->rxh_need = hlen + (qp->hdgst ? 4u : 0u);
	return 0;
}

/** A whole PDU header (with digest) is in. */
static int on_hdr(struct nkv_qpair *qp)
{
	uint8_t type = qp->rxh[0], hlen = qp->rxh[2];
	uint32_t plen = nkv_get32(qp->rxh + 4);

	if (type == NKV_TCP_PDU_C2H_TERM) {
		NKV_WARN("qid %u: target terminated the connection: C2HTermReq FES %u FEI %#x", qp->qid,
			 nkv_get16(qp->rxh + 8), nkv_get32(qp->rxh + 10));
		return -EPROTO;
	}
	if (qp->hdgst && nkv_get32(qp->rxh + hlen) != nkv_crc32c(qp->rxh, hlen)) {
		NKV_WARN("qid %u: header digest mismatch (PDU type %u)", qp->qid, type);
		return -EPROTO;
	}
	uint32_t hlen_hd = hlen + (qp->hdgst ? 4u : 0u);
	qp->rxh_have = 0;
	qp->rxh_need = 8;
	switch (type) {
	case NKV_TCP_PDU_RSP:
		if (plen != hlen_hd)
			return -EPROTO;
		return on_rsp(qp);
	case NKV_TCP_PDU_R2T:
		if (plen != hlen_hd)
			return -EPROTO;
		return on_r2t(qp);
	case NKV_TCP_PDU_C2H_DATA: {
		int rc = on_c2h(qp, hlen_hd);
		if (rc == 0)
			rx_step(qp);
		return rc;
	}
	}
	return -EPROTO;
}

/** Feed @n staged bytes at @p to the receive state machine. @return bytes used or -errno. */
static int64_t rx_feed(struct nkv_qpair *qp, const uint8_t *p, uint32_t n)
{
	uint32_t used = 0;
	while (used < n && !qp->err) {
		uint32_t avail = n - used, take;
		switch (qp->rx_state) {
		case RX_HDR: {
			take = qp->rxh_need - qp->rxh_have;
			if (take > avail)
				take = avail;
			memcpy(qp->rxh + qp->rxh_have, p + used, take);
			qp->rxh_have += take;
			used += take;
			if (qp->rxh_have < qp->rxh_need)
				break;
			int rc;
			if (qp->rxh_need == 8) {
				rc = on_ch(qp);
				if (rc < 0)
					return rc;
				break; /* keep collecting: every header is longer than 8 bytes */
			}
			rc = on_hdr(qp);
			if (rc < 0)
				return rc;
			break;
		}
		case RX_PAD:
			take = qp->rx_left < avail ? qp->rx_left : avail;
			used += take;
			qp->rx_left -= take;
			rx_step(qp);
			break;
		case RX_DATA:
			take = qp->rx_left < avail ? qp->rx_left : avail;
			memcpy(qp->rx_dst, p + used, take);
			if (qp->ddgst)
				qp->rx_crc = nkv_crc32c_update(qp->rx_crc, p + used, take);
			qp->rx_dst += take;
			qp->rx_left -= take;
			used += take;
			rx_step(qp);
			break;
		case RX_DDGST:
			take = qp->rx_left < avail ? qp->rx_left : avail;
			memcpy(qp->rx_ddgst + (4 - qp->rx_left), p + used, take);
			qp->rx_left -= take;
			used += take;
			rx_step(qp);
			break;
		default:
			return -EPROTO;
		}
	}
	return qp->err ? qp->err : (int64_t)used;
}

/** Receive what the socket has. @return 0 or -errno. */
static int rx_poll(struct nkv_qpair *qp)
{
	struct nkv_tls *t = nkv_tcp_tls_io(qp);
	for (int round = 0; round < RX_BUDGET; round++) {
		if (qp->stage_off < qp->stage_len) {
			int64_t u = rx_feed(qp, qp->stage + qp->stage_off, qp->stage_len - qp->stage_off);
			if (u < 0)
				return (int)u;
			qp->stage_off += (uint32_t)u;
			continue;
		}
		ssize_t n;
		if (qp->rx_state == RX_DATA && qp->rx_left >= NKV_RX_DIRECT_MIN) {
			/* Long data run: straight into the caller's buffer, no staging copy. */
			n = t ? nkv_tls_recv(t, qp->rx_dst, qp->rx_left) : recv(qp->fd, qp->rx_dst, qp->rx_left, MSG_DONTWAIT);
			if (n > 0) {
				if (qp->ddgst)
					qp->rx_crc = nkv_crc32c_update(qp->rx_crc, qp->rx_dst, (size_t)n);
				qp->rx_dst += n;
				qp->rx_left -= (uint32_t)n;
				rx_step(qp);
				continue;
			}
		} else {
			n = t ? nkv_tls_recv(t, qp->stage, NKV_RX_STAGE) : recv(qp->fd, qp->stage, NKV_RX_STAGE, MSG_DONTWAIT);
			if (n > 0) {
				qp->stage_off = 0;
				qp->stage_len = (uint32_t)n;
				continue;
			}
		}
		if (n == 0)
			return -ECONNRESET;
		if (t)
			return n == -EAGAIN ? 0 : (int)n;
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		return -errno;
	}
	return 0;
}

short nkv_tcp_qp_events(const struct nkv_qpair *qp)
{
	const struct nkv_tls *t = nkv_tcp_tls_io(qp);
	if (t && nkv_tls_pending(t))
		return 0;
	bool out = qp->txq_head >= 0 || (t && nkv_tls_want_write(t));
	return (short)(POLLIN | (out ? POLLOUT : 0));
}

/* ---- public queue pair API --------------------------------------------------------------------- */

static int tcp_submit(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, nkv_cb cb, void *arg,
		      unsigned flags)
{
	(void)flags; /* the SGL is always built here */
	if (!qp || !sqe || (len && !buf))
		return -EINVAL;
	if (qp->err)
		return -ENOTCONN;
	if (qp->free_head < 0)
		return -EAGAIN;
	struct nkv_req *r = &qp->reqs[qp->free_head];
	uint16_t cid = (uint16_t)qp->free_head;
	qp->free_head = r->next;

	/* Data direction: opcode bits 1:0, or FCTYPE bits 1:0 for fabrics commands. */
	uint8_t xfer = sqe->opc == NKV_ADM_FABRICS ? ((const uint8_t *)sqe)[4] & 3 : sqe->opc & 3;
	r->dir = len == 0 ? DIR_NONE : (xfer & 1) ? DIR_H2C : (xfer & 2) ? DIR_C2H : DIR_NONE;
	if (len && r->dir == DIR_NONE) {
		r->next = qp->free_head;
		qp->free_head = cid;
		return -EINVAL;
	}
	r->buf = buf;
	r->len = len;
	r->cb = cb;
	r->arg = arg;
	r->data_err = r->rsp_pending = r->r2t_active = false;
	r->c2h_next = 0;
	/* No data (a 0-byte Store too): Transport Data Block of length 0, as Linux sends. */
	r->icd = r->dir == DIR_H2C && len <= qp->icd_max;

	struct nkv_sqe s = *sqe;
	s.flags = NKV_PSDT_SGL << NKV_SQE_PSDT_SHIFT; /* SGL, no fusing */
	nkv_put16(&s.cid, cid);
	memset(s.dptr, 0, sizeof(s.dptr));
	nkv_put32(s.dptr + 8, len);
	s.dptr[15] = r->icd ? NKV_SGL_DATA_BLOCK_OFFSET : NKV_SGL_TRANSPORT_DATA_BLOCK;
	memcpy(r->hdr + 8, &s, sizeof(s));
	frame_pdu(qp, r, NKV_TCP_PDU_CMD, 0, 72, r->icd ? buf : NULL, r->icd ? len : 0);
	r->state = REQ_TX_CMD;
	qp->outstanding++;
	txq_push(qp, r);
	return 0;
}

static int tcp_flush(struct nkv_qpair *qp)
{
	if (qp->err)
		return qp->err;
	int rc = tx_flush(qp);
	if (rc < 0) {
		nkv_tcp_qp_fail(qp, rc);
		return rc;
	}
	return 0;
}

static int tcp_poll(struct nkv_qpair *qp, int timeout_ms)
{
	if (qp->err)
		return qp->err;
	uint64_t start = qp->ncompleted;
	int64_t deadline = timeout_ms > 0 ? nkv_client_now_ms() + timeout_ms : 0;
	for (;;) {
		int rc = tx_flush(qp);
		if (rc == 0)
			rc = rx_poll(qp);
		if (rc == 0 && qp->txq_head >= 0)
			rc = tx_flush(qp); /* R2Ts received just now */
		if (rc < 0) {
			nkv_tcp_qp_fail(qp, rc);
			return rc;
		}
		if (qp->ncompleted != start || timeout_ms == 0 || qp->outstanding == 0)
			return (int)(qp->ncompleted - start);
		int wait = -1;
		if (timeout_ms > 0) {
			int64_t left = deadline - nkv_client_now_ms();
			if (left <= 0)
				return 0;
			wait = (int)left;
		}
		short ev = nkv_tcp_qp_events(qp);
		if (!ev)
			continue; /* TLS holds decrypted bytes the socket will not signal */
		struct pollfd p = {.fd = qp->fd, .events = ev};
		if (poll(&p, 1, wait) < 0 && errno != EINTR) {
			rc = -errno;
			nkv_tcp_qp_fail(qp, rc);
			return rc;
		}
	}
}

/* ---- transport ops ----------------------------------------------------------------------------- */

/** I/O queue pair: a new connection with its own Connect (docs/nvme-kv-wire.md C.2). */
static int tcp_qp_create(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t depth, struct nkv_qpair **out)
{
	struct nkv_qpair *qp;
	int rc = nkv_tcp_qp_open(ctrl, qid, depth, &qp);
	if (rc)
		return rc;
	uint32_t ioccsz = nkv_get32(&ctrl->id.ioccsz);
	qp->icd_max = ioccsz >= 4 ? ioccsz * 16 - 64 : 0;
	rc = nkv_ctrl_fabrics_connect(ctrl, qp, (uint16_t)(depth - 1), ctrl->cntlid, NULL);
	if (rc) {
		nkv_tcp_qp_close(qp);
		return rc;
	}
	*out = qp;
	return 0;
}

static void tcp_ctrl_close(struct nkv_ctrl *ctrl)
{
	if (ctrl->admin && !ctrl->admin->err)
		nkv_ctrl_fabrics_shutdown(ctrl);
	nkv_tcp_qp_close(ctrl->admin);
	ctrl->admin = NULL;
}

/* Over TCP every buffer is sent from or received into where it is: plain memory will do. */
static void *tcp_buf_alloc(struct nkv_ctrl *ctrl, size_t len)
{
	(void)ctrl;
	return malloc(len ? len : 1);
}

static void tcp_buf_free(struct nkv_ctrl *ctrl, void *p)
{
	(void)ctrl;
	free(p);
}

const struct nkv_transport_ops nkv_tcp_ops = {
	.name = "tcp",
	.qp_create = tcp_qp_create,
	.qp_destroy = nkv_tcp_qp_close,
	.submit = tcp_submit,
	.flush = tcp_flush,
	.poll = tcp_poll,
	.fail = nkv_tcp_qp_fail,
	.ctrl_close = tcp_ctrl_close,
	.buf_alloc = tcp_buf_alloc,
	.buf_free = tcp_buf_free,
};
