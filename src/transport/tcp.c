/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp.c - the NVMe/TCP transport (docs/nvme-kv-wire.md C and D).
 *
 * Each TCP connection is one NVMe queue. Connections are spread over reactor threads; a connection,
 * its requests and their completions live on one reactor (backend completions hop back through the
 * reactor's message queue). Per connection: a receive state machine that parses PDUs straight into
 * request buffers, a send queue of PDUs written with sendmsg (value buffers are never copied), and
 * requests allocated on first use (up to one per SQ entry). Command data is bounded by a
 * transport-wide buffer budget and by per-connection and per-host caps (tcp_limits.c); every phase
 * a host controls has a deadline (ICReq, Connect, each PDU, each R2T's data, each PDU we send, an
 * idle admin queue), so no single host can hold the gateway's memory or connections. A connection of
 * a secure listener has a TLS session (tcp_tls.c): its handshake comes first, under its own deadline,
 * and its bytes go through SSL_read/SSL_write; a plain connection has none and takes the same
 * recv/sendmsg path as before (one pointer test per call).
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "common/bufcache.h"
#include "common/crc32c.h"
#include "common/exposure.h"
#include "common/log.h"
#include "core/core.h"
#include "reactor/reactor.h"
#include "transport/tcp_limits.h"
#include "transport/tcp_tls.h"

#define RBUF_SIZE (64 * 1024)
#define RX_BUDGET (1024 * 1024)     /* bytes read per readiness event, for fairness */
#define DIRECT_READ_MIN (16 * 1024) /* read data this large straight into the request buffer */
#define KEEP_BUF_MAX (64 * 1024)    /* request buffers up to this size stay allocated... */
#define KEEP_CONN_MAX (512 * 1024)  /* ...while the connection's buffers stay under this */
#define BUF_IDLE_MS 2000            /* a cached large buffer unused this long is freed */
#define ACCEPT_PAUSE_MS 200         /* a listener out of file descriptors rests this long */
#define TERM_LINGER_MS 1000         /* after a termination PDU, close even if unsent */
#define MAX_IOV 64
#define HDR_MAX 192                 /* largest PDU header we send: term (24 + 128 copy) or 24 + digest + pad */

struct tcp_conn;

/* One PDU on the send queue: header bytes (with digest and padding), then data, then data digest. */
struct tcp_tx {
	struct tcp_tx *next;
	_Alignas(8) uint8_t hdr[HDR_MAX];
	uint32_t hlen;        /* bytes of hdr to send */
	const uint8_t *data;
	uint32_t dlen;
	uint8_t ddgst[4];
	uint32_t dglen;       /* 0 or 4 */
	uint32_t sent;
	void (*done)(struct tcp_conn *c, struct tcp_tx *tx);
};

enum req_state {
	REQ_FREE,      /* on the free list */
	REQ_WAIT_BUF,  /* parsed; waiting for buffer budget */
	REQ_RX,        /* receiving in-capsule or H2C data */
	REQ_EXEC,      /* in the core or the backend */
	REQ_TX,        /* response PDUs queued */
};

struct tcp_req {
	struct nkv_req req;       /* first: the core's view */
	struct tcp_conn *conn;
	enum req_state state;
	uint16_t ttag;
	uint8_t *buf;
	uint32_t cap;             /* allocated size of buf */
	uint32_t charged;         /* bytes charged to the buffer budget and caps */
	uint32_t need;            /* bytes the command needs in buf */
	uint32_t sgl_len;
	uint32_t h2c_got;         /* H2C bytes received (R2T path) */
	uint32_t icd_len;         /* in-capsule data length */
	bool h2c;                 /* data flows host to controller */
	bool connect;             /* a Connect on an unconnected queue */
	bool io;                  /* an I/O queue's command: counted in its reactor's inflight */
	nkv_status pending;       /* fail with this once the command's data is consumed */
	struct tcp_req *next_free;  /* free list, or the reactor's buffer wait list */
	uint64_t r2t_ms;          /* when its R2T was queued (deadline: r2t_timeout_ms) */
	struct tcp_req *r2t_next, **r2t_pprev; /* the connection's R2Ts awaiting data, oldest first */
	struct tcp_tx tx_data, tx_resp;
	/* Cut-through (Retrieve): C2HData PDUs sent while the backend still reads, one queued at a time */
	struct tcp_tx tx_part;
	uint32_t c2h_ready;       /* bytes of buf the backend reported final */
	uint32_t c2h_sent;        /* bytes of buf queued in C2HData PDUs */
	bool c2h_busy;            /* tx_part is queued */
};

enum rx_state {
	RX_CH,    /* common header */
	RX_PSH,   /* rest of the header and its digest */
	RX_PAD,   /* padding up to PDO */
	RX_DATA,  /* data into rx_dst (NULL: discard) */
	RX_DDGST, /* data digest */
};

struct tcp_reactor;

struct tcp_conn {
	struct nkv_event ev;
	struct nkv_msg msg;         /* hand-off from the acceptor */
	struct nkv_tcp *t;
	struct tcp_reactor *rx;
	struct tcp_conn *next, *next_dirty;
	int fd;
	char peer[64];
	uint64_t born_ms, term_ms;
	bool ic_done, hdgst, ddgst, sqfc_off, closed, terminating, dirty, draining;
	uint32_t events;             /* epoll interest */
	uint8_t hpda;
	struct nkv_qpair qp;        /* qp.ctrlr is NULL until Connect */
	uint16_t sqhd;
	unsigned outstanding;       /* requests not free */
	struct tcp_req connect_req; /* serves every command before Connect */
	struct tcp_req **reqs;      /* qp.size slots after Connect (index = TTAG - 1), filled on use */
	unsigned nreqs;             /* slots filled */
	struct tcp_req *free_reqs;
	struct tcp_host *host;      /* its peer address's share (tcp_limits.c) */
	struct tcp_tls_conn *tls;   /* a secure listener's connection: its TLS session; NULL: plain */
	uint64_t charged;           /* buffer bytes its requests hold */
	uint64_t bufmem;            /* bytes of request buffers allocated */
	bool ctrlr_claimed;         /* counted as a controller of its host */
	bool exposed, disc_only;    /* its listener's (tcp_listener) */
	struct tcp_req *r2t_head, **r2t_tail;
	uint64_t pdu_ms;            /* first byte of the PDU being received; 0 between PDUs */
	uint64_t tx_head_ms;        /* when the PDU at the head of the send queue got there */
	uint64_t cmd_ms;            /* last command received (idle admin queues) */
	/* receive */
	enum rx_state rs;
	_Alignas(8) uint8_t hdr[HDR_MAX];
	uint32_t hgot, hneed;
	uint8_t *rbuf;
	uint32_t rpos, rlen;
	struct tcp_req *rx_req;
	uint8_t *rx_dst;
	uint32_t rx_left, rx_pad, rx_dlen;
	uint32_t rx_crc;
	uint8_t rx_dg[4];
	uint32_t rx_dg_got;
	bool rx_is_h2c, rx_last;
	bool rx_direct;           /* this PDU's data is being read straight into its buffer */
	/* send */
	struct tcp_tx *txq, **txq_tail;
	struct tcp_tx ctl;          /* ICResp */
	struct tcp_tx term;         /* C2HTermReq: its own slot, as the ICResp may still be queued */
};

struct tcp_reactor {
	struct nkv_reactor r;
	struct nkv_tcp *t;
	struct tcp_conn *conns;
	struct tcp_conn *dirty;     /* connections with PDUs to send or events to re-arm */
	unsigned zombies;           /* closed connections waiting for their requests */
	struct tcp_req *wait_head, **wait_tail; /* commands waiting for buffer budget, oldest first */
	bool kick;                  /* budget was released: try the waiters */
	atomic_uint_fast64_t inflight; /* I/O commands held (the queue depth metric); this reactor writes it */
	struct nkv_bufcache bufs;   /* large request buffers, kept for reuse (bufcache.h) */
};

struct tcp_listener {
	struct nkv_event ev;
	struct nkv_tcp *t;
	struct tcp_listener *next;
	int fd;
	bool tls;                   /* a secure listener: connections start with a TLS handshake */
	bool exposed;               /* plain and off loopback (nkv_listener_exposes) */
	bool disc_only;             /* serves the discovery subsystem only (nkv_tcp_listen_discovery) */
	uint64_t paused_ms;         /* out of file descriptors since then; 0: armed */
	bool remove;                /* nkv_tcp_unlisten: reactor 0's tick closes it */
	uint16_t portid;            /* its discovery log port (0: not advertised) */
	int bound;                  /* its port */
	char addr[64];              /* as given to nkv_tcp_listen ("" = any) */
};

struct nkv_tcp {
	struct nkv_target *tgt;
	struct nkv_tcp_conf conf;
	struct tcp_reactor *rs;
	unsigned nr;
	atomic_uint next_rx;
	struct tcp_listener *listeners; /* lmu; owned by reactor 0, which closes them */
	pthread_mutex_t lmu;
	uint16_t next_portid;
	struct tcp_limits lim;
	struct tcp_tls_ctx *tls;    /* PSKs and the SSL context, once a PSK is added */
	atomic_int nconns;
	atomic_bool draining, force;
	struct nkv_transport_reg reg; /* its gauges, for the target's metrics */
};

static void conn_close(struct tcp_conn *c, const char *why);
static void unlink_waiter(struct tcp_reactor *rx, struct tcp_req *r);
static void tx_queue(struct tcp_conn *c, struct tcp_tx *tx);

/* ---- buffers and budget ------------------------------------------------------------------------ */

/* Drop @r's buffer: a large one goes back to the reactor's cache (bufcache.h: no page faults for the
 * next large command), a small one is freed. */
static void buf_free(struct tcp_req *r)
{
	struct tcp_conn *c = r->conn;

	nkv_bufcache_put(&c->rx->bufs, r->buf, r->cap, nkv_now_ms());
	c->bufmem -= r->cap;
	r->buf = NULL;
	r->cap = 0;
}

/* Give @r a buffer of r->need bytes within the budget and caps (see nkv_tcp_charge for @mode).
 * @return 0, -EAGAIN (over the budget), -EBUSY (over its connection's or host's cap), -ENOMEM. */
static int buf_get(struct tcp_req *r, enum tcp_charge mode)
{
	struct tcp_conn *c = r->conn;
	int rc = nkv_tcp_charge(&c->t->lim, c->host, &c->charged, r->need, mode);

	if (rc < 0)
		return rc;
	r->charged = r->need;
	if (r->cap < r->need || !r->buf) {
		buf_free(r);
		size_t cap;
		if (!(r->buf = nkv_bufcache_get(&c->rx->bufs, r->need, &cap))) {
			nkv_tcp_uncharge(&c->t->lim, c->host, &c->charged, r->charged);
			r->charged = 0;
			return -ENOMEM;
		}
		r->cap = cap;
		c->bufmem += r->cap;
	}
	return 0;
}

/* Uncharge @r's buffer; keep it for the next command only while small, and while the connection's
 * kept buffers stay small (a burst of commands must not leave an idle connection holding memory). */
static void buf_put(struct tcp_req *r)
{
	struct tcp_conn *c = r->conn;

	if (r->charged) {
		nkv_tcp_uncharge(&c->t->lim, c->host, &c->charged, r->charged);
		r->charged = 0;
	}
	if (r->cap > KEEP_BUF_MAX || c->bufmem > KEEP_CONN_MAX)
		buf_free(r);
}

/* ---- requests ---------------------------------------------------------------------------------- */

/* Free a closed connection whose requests have all come back (from the reactor's sweep). */
static void conn_free(struct tcp_conn *c)
{
	for (unsigned i = 0; i < c->nreqs; i++) {
		free(c->reqs[i]->buf);
		free(c->reqs[i]);
	}
	free(c->connect_req.buf);
	free(c->reqs);
	free(c->rbuf);
	if (c->ctrlr_claimed)
		nkv_tcp_ctrlr_release(&c->t->lim, c->host);
	nkv_tcp_host_put(&c->t->lim, c->host);
	nkv_auth_qp_free(&c->qp);
	if (c->qp.ctrlr) {
		if (c->qp.qid != 0)
			nkv_ctrlr_release_qid(c->qp.ctrlr, c->qp.qid);
		nkv_ctrlr_put(c->qp.ctrlr);
	}
	atomic_fetch_sub(&c->t->nconns, 1);
	free(c);
}

/* Take @r off its connection's list of R2Ts awaiting data (no-op when not on it). */
static void r2t_unlink(struct tcp_conn *c, struct tcp_req *r)
{
	if (!r->r2t_pprev)
		return;
	if (r->r2t_next)
		r->r2t_next->r2t_pprev = r->r2t_pprev;
	else
		c->r2t_tail = r->r2t_pprev;
	*r->r2t_pprev = r->r2t_next;
	r->r2t_next = NULL;
	r->r2t_pprev = NULL;
}

static void req_release(struct tcp_req *r)
{
	struct tcp_conn *c = r->conn;

	if (r->state == REQ_WAIT_BUF)
		unlink_waiter(c->rx, r);
	r2t_unlink(c, r);
	buf_put(r);
	nkv_req_drop(&r->req); /* a command dropped with its connection, never completed */
	if (r->io) {
		atomic_fetch_sub_explicit(&c->rx->inflight, 1, memory_order_relaxed);
		r->io = false;
	}
	c->rx->kick = c->rx->wait_head != NULL; /* budget came back: idle starts waiters */
	r->state = REQ_FREE;
	if (r != &c->connect_req) {
		r->next_free = c->free_reqs;
		c->free_reqs = r;
	}
	c->outstanding--; /* a closed connection is freed by the sweep once this reaches 0 */
}

/* A request for a new command. Requests are allocated on first use, not per SQ entry at Connect: an
 * idle queue of 1024 entries then costs a slot array, not 1024 requests. @return NULL when the SQ
 * is full (or out of memory). */
static struct tcp_req *req_alloc(struct tcp_conn *c)
{
	struct tcp_req *r = NULL;

	if (!c->qp.ctrlr) {
		r = c->connect_req.state == REQ_FREE ? &c->connect_req : NULL;
	} else if ((r = c->free_reqs)) {
		c->free_reqs = r->next_free;
	} else if (c->nreqs < c->qp.size && (r = calloc(1, sizeof(*r)))) {
		r->req.qp = &c->qp;
		r->conn = c;
		r->ttag = (uint16_t)(c->nreqs + 1);
		c->reqs[c->nreqs++] = r;
	}
	if (r) {
		c->outstanding++;
		/* An I/O queue's command: the connection's qid is fixed from its Connect on. */
		if ((r->io = c->qp.ctrlr && c->qp.qid != 0))
			atomic_fetch_add_explicit(&c->rx->inflight, 1, memory_order_relaxed);
		r->pending = 0;
		r->h2c_got = 0;
		r->c2h_ready = r->c2h_sent = 0;
		r->c2h_busy = false;
		r->connect = false;
		r->need = 0;
	}
	return r;
}

/* ---- send path --------------------------------------------------------------------------------- */

static void mark_dirty(struct tcp_conn *c)
{
	if (!c->dirty) {
		c->dirty = true;
		c->next_dirty = c->rx->dirty;
		c->rx->dirty = c;
	}
}

static void tx_queue(struct tcp_conn *c, struct tcp_tx *tx)
{
	tx->next = NULL;
	tx->sent = 0;
	if (!c->txq)
		c->tx_head_ms = nkv_now_ms(); /* the send deadline runs for the PDU at the head */
	*c->txq_tail = tx;
	c->txq_tail = &tx->next;
	mark_dirty(c);
}

/* Read unless terminating or draining; wait for EPOLLOUT while PDUs are unsent. */
static void set_events(struct tcp_conn *c)
{
	bool out = c->txq || (c->tls && nkv_tls_want_write(&c->tls->io));
	uint32_t ev = (!c->terminating && !c->draining ? EPOLLIN : 0) | (out ? EPOLLOUT : 0);

	if (!c->closed && ev != c->events) {
		nkv_reactor_mod(&c->rx->r, c->fd, ev, &c->ev);
		c->events = ev;
	}
}

/* Write as much of the send queue as the socket takes. @return 0, or -errno on a dead socket. */
static int tx_flush(struct tcp_conn *c)
{
	int rc;

	if (c->tls && !c->closed && (rc = nkv_tls_flush(&c->tls->io)) < 0) /* a record taken earlier */
		return rc == -EAGAIN ? 0 : rc;
	while (c->txq && !c->closed) {
		struct iovec iov[MAX_IOV];
		int n = 0;

		for (struct tcp_tx *tx = c->txq; tx && n + 3 <= MAX_IOV; tx = tx->next) {
			uint32_t off = tx->sent;
			const uint8_t *parts[3] = {tx->hdr, tx->data, tx->ddgst};
			uint32_t lens[3] = {tx->hlen, tx->dlen, tx->dglen};
			for (int i = 0; i < 3; i++) {
				if (off >= lens[i]) {
					off -= lens[i];
					continue;
				}
				iov[n].iov_base = (void *)(parts[i] + off);
				iov[n++].iov_len = lens[i] - off;
				off = 0;
			}
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w;
		if (c->tls) {
			if ((w = nkv_tls_sendv(&c->tls->io, iov, n)) == -EAGAIN)
				break;
			if (w < 0)
				return (int)w;
		} else if ((w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		while (w > 0 && c->txq) {
			struct tcp_tx *tx = c->txq;
			uint32_t left = tx->hlen + tx->dlen + tx->dglen - tx->sent;
			if ((uint32_t)w < left) {
				tx->sent += (uint32_t)w;
				break;
			}
			w -= left;
			c->txq = tx->next;
			if (!c->txq)
				c->txq_tail = &c->txq;
			else
				c->tx_head_ms = nkv_now_ms();
			if (tx->done)
				tx->done(c, tx);
			if (c->closed)
				return 0;
		}
	}
	return 0;
}

/* Finish a PDU header: header digest and padding up to @pdo (0: none), into tx->hlen. */
static void tx_seal(struct tcp_tx *tx, uint32_t hlen, bool digest, uint32_t pdo)
{
	uint32_t len = hlen;

	if (digest) {
		nkv_put32(tx->hdr + hlen, nkv_crc32c(tx->hdr, hlen));
		len += 4;
	}
	if (pdo > len) {
		memset(tx->hdr + len, 0, pdo - len);
		len = pdo;
	}
	tx->hlen = len;
}

/* Everything queued is on the wire (over TLS: including a record the session took). */
static bool tx_idle(const struct tcp_conn *c)
{
	return !c->txq && !(c->tls && nkv_tls_want_write(&c->tls->io));
}

static void conn_flush(struct tcp_conn *c)
{
	int rc = tx_flush(c);

	if (rc < 0) {
		conn_close(c, c->tls && c->tls->io.why[0] ? c->tls->io.why : strerror(-rc));
		return;
	}
	if (c->closed)
		return;
	if (c->terminating && tx_idle(c)) {
		conn_close(c, "terminated");
		return;
	}
	if (c->qp.disconnect && tx_idle(c) && c->outstanding == 0) {
		conn_close(c, "disconnect");
		return;
	}
	/* DH-HMAC-CHAP failed (AUTH_Failure1 sent, or AUTH_Failure2 received): the association ends
	 * once the answer has left, every queue of the controller with it. */
	if (c->qp.auth_fatal && !c->txq) {
		if (c->qp.ctrlr)
			nkv_ctrlr_kill(c->qp.ctrlr);
		conn_close(c, "authentication failed");
		return;
	}
	set_events(c);
}

/* Send a C2HTermReq carrying @len bytes of @hdr (the PDU at fault), then close (docs/nvme-kv-wire.md C.3). */
static void send_term_hdr(struct tcp_conn *c, uint16_t fes, uint32_t fei, const uint8_t *hdr, uint32_t len)
{
	struct tcp_tx *tx = &c->term;

	if (c->terminating)
		return; /* one termination per connection; the first reason is the one reported */
	struct nkv_tcp_term *tr = (struct nkv_tcp_term *)tx->hdr;
	uint32_t copy = len < NKV_TCP_TERM_MAX_PLEN - 24 ? len : NKV_TCP_TERM_MAX_PLEN - 24;

	NKV_WARN("tcp %s: protocol error, FES %02x FEI %u: terminating", c->peer, fes, fei);
	memset(tx, 0, sizeof(*tx));
	memcpy(tx->hdr + 24, hdr, copy);
	tr->ch.type = NKV_TCP_PDU_C2H_TERM;
	tr->ch.hlen = 24;
	nkv_put32(&tr->ch.plen, 24 + copy);
	nkv_put16(&tr->fes, fes);
	nkv_put32(tr->fei, fei);
	tx->hlen = 24 + copy;
	c->terminating = true;
	c->term_ms = nkv_now_ms();
	tx_queue(c, tx);
}

/* The usual case: the offending header is the one being received. */
static void send_term(struct tcp_conn *c, uint16_t fes, uint32_t fei)
{
	send_term_hdr(c, fes, fei, c->hdr, c->hgot);
}

/* ---- completion -------------------------------------------------------------------------------- */

static void resp_sent(struct tcp_conn *c, struct tcp_tx *tx)
{
	struct tcp_req *r = (struct tcp_req *)((char *)tx - offsetof(struct tcp_req, tx_resp));
	(void)c;
	req_release(r);
}

/* Queue in @tx a C2HData PDU carrying bytes [@off, @off + @len) of @r's buffer; LAST on the final one. */
static void c2h_queue(struct tcp_conn *c, struct tcp_req *r, struct tcp_tx *tx, uint32_t off, uint32_t len, bool last,
		      void (*done)(struct tcp_conn *c, struct tcp_tx *tx))
{
	struct nkv_tcp_data *d = (struct nkv_tcp_data *)tx->hdr;
	uint32_t hd = c->hdgst ? 4 : 0, align = (c->hpda + 1u) * 4, pdo = (24 + hd + align - 1) / align * align;

	memset(d, 0, sizeof(*d));
	d->ch.type = NKV_TCP_PDU_C2H_DATA;
	d->ch.flags = (last ? NKV_TCP_F_LAST : 0) | (c->hdgst ? NKV_TCP_F_HDGST : 0) | (c->ddgst ? NKV_TCP_F_DDGST : 0);
	d->ch.hlen = 24;
	d->ch.pdo = (uint8_t)pdo;
	nkv_put32(&d->ch.plen, pdo + len + (c->ddgst ? 4 : 0));
	nkv_put16(&d->cccid, r->req.cmd.cid);
	nkv_put32(&d->datao, off);
	nkv_put32(&d->datal, len);
	tx_seal(tx, 24, c->hdgst, pdo);
	tx->data = r->buf + off;
	tx->dlen = len;
	tx->dglen = c->ddgst ? 4 : 0;
	if (c->ddgst)
		nkv_put32(tx->ddgst, nkv_crc32c(tx->data, len));
	tx->done = done;
	tx_queue(c, tx);
}

static void part_sent(struct tcp_conn *c, struct tcp_tx *tx);

/* Send what the backend reported beyond what is queued (cut-through), unless the command ended. */
static void part_next(struct tcp_conn *c, struct tcp_req *r)
{
	if (r->c2h_busy || r->state != REQ_EXEC || c->closed || c->terminating || r->c2h_ready <= r->c2h_sent)
		return;
	uint32_t len = r->c2h_ready - r->c2h_sent;
	NKV_DEBUG("tcp %s: qid %u cid %u: C2HData of %u bytes at %u sent ahead (cut-through)", c->peer, c->qp.qid,
		  nkv_get16(&r->req.cmd.cid), len, r->c2h_sent);
	c2h_queue(c, r, &r->tx_part, r->c2h_sent, len, false, part_sent);
	r->c2h_sent += len;
	r->c2h_busy = true;
}

/* A cut-through PDU left: the next one carries whatever was reported meanwhile (reports coalesce). */
static void part_sent(struct tcp_conn *c, struct tcp_tx *tx)
{
	struct tcp_req *r = (struct tcp_req *)((char *)tx - offsetof(struct tcp_req, tx_part));
	r->c2h_busy = false;
	part_next(c, r);
}

/* The backend's cut-through report: the first @bytes of the Retrieve's buffer are final. */
static void tcp_data_ready(struct nkv_req *req, uint32_t bytes)
{
	struct tcp_req *r = (struct tcp_req *)req;

	if (bytes > req->length)
		bytes = req->length;
	if (bytes > r->c2h_ready)
		r->c2h_ready = bytes;
	part_next(r->conn, r);
}

/* The core's completion: C2HData when data goes back (the part not sent ahead), then always a
 * CapsuleResp (never the SUCCESS shortcut, which would lose DW0 = value size; docs/nvme-kv-wire.md
 * C.8). A failed command whose first bytes went ahead gets its error status: the host's data is not
 * a value (the backend never reports bytes it did not check). */
static void tcp_complete(struct nkv_req *req)
{
	struct tcp_req *r = (struct tcp_req *)req;
	struct tcp_conn *c = r->conn;
	uint32_t hd = c->hdgst ? 4 : 0;

	if (req->io.buf_taken) { /* the backend kept the buffer and frees it: forget it (still charged) */
		req->io.buf_taken = false;
		c->bufmem -= r->cap;
		r->buf = NULL;
		r->cap = 0;
	}
	NKV_DEBUG("tcp %s: qid %u cid %u cpl status %04xh dw0 %08xh xfer %u%s", c->peer, c->qp.qid,
		  nkv_get16(&req->cmd.cid), nkv_get16(&req->cpl.status) >> 1, nkv_get32(&req->cpl.dw0),
		  (unsigned)req->xfer, c->closed ? " (connection gone)" : "");
	if (c->closed) { /* the connection went away while the command ran: a tombstone */
		req_release(r);
		return;
	}
	r->state = REQ_TX;
	if (!r->h2c && req->xfer > r->c2h_sent && (nkv_get16(&req->cpl.status) >> 1) == 0)
		c2h_queue(c, r, &r->tx_data, r->c2h_sent, req->xfer - r->c2h_sent, true, NULL);
	struct tcp_tx *tx = &r->tx_resp;
	struct nkv_tcp_rsp *p = (struct nkv_tcp_rsp *)tx->hdr;
	memset(p, 0, 24);
	p->ch.type = NKV_TCP_PDU_RSP;
	p->ch.flags = c->hdgst ? NKV_TCP_F_HDGST : 0;
	p->ch.hlen = 24;
	nkv_put32(&p->ch.plen, 24 + hd);
	p->cqe = req->cpl;
	/* SQ head: FFFFh once the host disabled SQ flow control (docs/nvme-kv-wire.md C.7). */
	nkv_put16(&p->cqe.sqhd, c->sqfc_off ? 0xffff : c->sqhd);
	tx_seal(tx, 24, c->hdgst, 0);
	tx->data = NULL;
	tx->dlen = tx->dglen = 0;
	tx->done = resp_sent;
	tx_queue(c, tx);
}

static const struct nkv_qpair_ops g_tcp_ops = {.complete = tcp_complete, .data_ready = tcp_data_ready};

/* ---- commands ---------------------------------------------------------------------------------- */

static uint32_t icd_limit(const struct tcp_conn *c)
{
	return (!c->qp.ctrlr || c->qp.qid == 0) ? NKV_TCP_ADMIN_ICD : c->t->conf.in_capsule;
}

static struct nkv_ctrlr_opts ctrlr_opts(const struct nkv_tcp *t)
{
	return (struct nkv_ctrlr_opts){
		.mqes = (uint16_t)(t->conf.max_queue_depth - 1),
		.max_io_queues = t->conf.max_io_queues,
		.fabrics = true,
		.ioccsz = (64 + t->conf.in_capsule) / 16,
		.iorcsz = 1,
		.msdbd = 1,
		.trname = "tcp",
	};
}

static void do_connect(struct tcp_conn *c, struct tcp_req *r)
{
	struct nkv_ctrlr_opts opts = ctrlr_opts(c->t);
	struct nkv_ctrlr *ctrlr = NULL;
	opts.exposed = c->exposed;
	opts.discovery_only = c->disc_only;
	const uint8_t *sqe = (const uint8_t *)&r->req.cmd;
	uint16_t qid = nkv_get16(sqe + 42), size = (uint16_t)(nkv_get16(sqe + 44) + 1);
	nkv_status st;

	/* An admin Connect creates a controller: counted per host and in total, so that one host
	 * cannot fill the CNTLID space or the transport with associations (Controller Busy). */
	if (qid == 0 && nkv_tcp_ctrlr_claim(&c->t->lim, c->host) < 0) {
		NKV_WARN("tcp %s: controller limit reached (%u per host, %u in all): Connect refused", c->peer,
			 c->t->conf.max_host_ctrlrs, c->t->conf.max_ctrlrs);
		memset(&r->req.cpl, 0, sizeof(r->req.cpl));
		nkv_req_complete(&r->req, nkv_status_make(NKV_SCT_CMD, NKV_SC_CONTROLLER_BUSY, 0));
		return;
	}
	c->ctrlr_claimed = qid == 0;
	/* Over TLS the PSK identity named the host and subsystem: the Connect must name the same. */
	if (!c->tls || (st = nkv_tcp_tls_connect_check(c->tls, r->buf, r->sgl_len, c->peer)) == 0)
		st = nkv_fabrics_connect(c->t->tgt, &r->req.cmd, r->buf, r->sgl_len, &opts, &ctrlr, &r->req.cpl);
	else
		memset(&r->req.cpl, 0, sizeof(r->req.cpl));
	if (st == 0 && !(c->reqs = calloc(size, sizeof(*c->reqs)))) {
		if (qid)
			nkv_ctrlr_release_qid(ctrlr, qid);
		else
			nkv_ctrlr_kill(ctrlr);
		nkv_ctrlr_put(ctrlr);
		st = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INTERNAL, 0);
	}
	if (st == 0) {
		c->qp.ctrlr = ctrlr;
		c->qp.qid = qid;
		c->qp.size = size;
		c->sqhd = 1; /* the Connect itself took the first entry */
		c->sqfc_off = (sqe[46] & NKV_CONNECT_CATTR_DISABLE_SQFC) != 0;
		nkv_auth_qp_connected(&c->qp, c->t->conf.auth_timeout_ms);
		NKV_INFO("tcp %s: %s qid %u, %u entries, controller %u", c->peer, ctrlr->ss->nqn, qid, size,
			 ctrlr->cntlid);
	} else if (c->ctrlr_claimed) {
		nkv_tcp_ctrlr_release(&c->t->lim, c->host);
		c->ctrlr_claimed = false;
	}
	nkv_req_complete(&r->req, st);
}

static void req_execute(struct tcp_conn *c, struct tcp_req *r)
{
	r->state = REQ_EXEC;
	if (r->pending)
		nkv_req_complete(&r->req, r->pending);
	else if (r->connect)
		do_connect(c, r);
	else {
		r->req.data = r->buf;
		/* A large buffer (bufcache's, from malloc) may be kept by the backend: the mem backend
		 * stores a Store's value in the buffer it arrived in (docs/design.md section 2.3). Small
		 * ones stay with the request. */
		r->req.io.buf_gift = r->cap > KEEP_BUF_MAX; /* buf_taken: false until tcp_complete reads it */
		r->req.execute(&r->req);
	}
}

/* Send an R2T for the whole transfer (MAXR2T 0 from every host we know: one at a time). */
static void send_r2t(struct tcp_conn *c, struct tcp_req *r)
{
	struct tcp_tx *tx = &r->tx_data;
	struct nkv_tcp_data *d = (struct nkv_tcp_data *)tx->hdr;

	memset(d, 0, sizeof(*d));
	d->ch.type = NKV_TCP_PDU_R2T;
	d->ch.flags = c->hdgst ? NKV_TCP_F_HDGST : 0;
	d->ch.hlen = 24;
	nkv_put32(&d->ch.plen, 24 + (c->hdgst ? 4 : 0));
	nkv_put16(&d->cccid, r->req.cmd.cid);
	nkv_put16(&d->ttag, r->ttag);
	nkv_put32(&d->datao, 0);
	nkv_put32(&d->datal, r->sgl_len);
	tx_seal(tx, 24, c->hdgst, 0);
	tx->data = NULL;
	tx->dlen = tx->dglen = 0;
	tx->done = NULL;
	r->state = REQ_RX;
	r->r2t_ms = nkv_now_ms(); /* its data is due within r2t_timeout_ms: track it, oldest first */
	r->r2t_next = NULL;
	r->r2t_pprev = c->r2t_tail;
	*c->r2t_tail = r;
	c->r2t_tail = &r->r2t_next;
	tx_queue(c, tx);
}

/* After the buffer is there: receive in-capsule data, ask for H2C data, or execute. Only the
 * in-capsule case touches the receive state: a waiter may start while another PDU is arriving. */
static void req_start_data(struct tcp_conn *c, struct tcp_req *r)
{
	if (r->icd_len) {
		r->state = REQ_RX;
		c->rx_req = r;
		c->rx_dst = r->pending ? NULL : r->buf;
		c->rx_left = r->icd_len;
		c->rx_direct = false;
		c->rx_is_h2c = false;
		c->rs = c->rx_pad ? RX_PAD : RX_DATA;
	} else if (r->h2c && r->sgl_len && !r->pending) {
		send_r2t(c, r);
	} else {
		req_execute(c, r);
	}
}

/*
 * Get the buffer for a command and move it on. In-capsule data is already in the stream, so it is
 * taken past the transport budget (bounded by queue depth x in-capsule size) but not past its
 * host's share: there the command fails with 82h, DNR clear, and the host retries once its other
 * commands are done. Anything else over the budget or a cap waits in the reactor's list without
 * its R2T or its execution, while the connection keeps reading: the data of commands that already
 * hold buffers may be behind this capsule in the stream.
 */
static void req_try_buffer(struct tcp_conn *c, struct tcp_req *r)
{
	int rc = 0;

	if (!r->pending && r->need) {
		enum tcp_charge mode = r->icd_len ? TCP_CHARGE_STREAM : TCP_CHARGE_WAIT;
		if (c->qp.qid == 0 && r->need <= KEEP_BUF_MAX)
			mode = TCP_CHARGE_ADMIN; /* Identify after Connect never waits behind I/O */
		rc = buf_get(r, mode);
		if (rc == -EBUSY && r->icd_len) {
			r->pending = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY, 0);
		} else if (rc == -EAGAIN || rc == -EBUSY) {
			r->state = REQ_WAIT_BUF;
			r->next_free = NULL;
			*c->rx->wait_tail = r;
			c->rx->wait_tail = &r->next_free;
			return;
		}
	}
	if (rc == -ENOMEM)
		r->pending = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INTERNAL, 0);
	req_start_data(c, r);
}

/* Start waiting commands, oldest first, while the transport budget allows. A command held back by
 * its own connection's or host's cap is passed over: one host's backlog never blocks the others. */
static void run_waiters(struct tcp_reactor *rx)
{
	struct tcp_req **p = &rx->wait_head, *r;

	while ((r = *p)) {
		int rc = buf_get(r, TCP_CHARGE_WAIT);
		if (rc == -EAGAIN)
			break;
		if (rc == -EBUSY) {
			p = &r->next_free;
			continue;
		}
		if (!(*p = r->next_free))
			rx->wait_tail = p;
		if (rc == -ENOMEM)
			r->pending = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_INTERNAL, 0);
		req_start_data(r->conn, r); /* no in-capsule data waits, so this sends an R2T or executes */
		mark_dirty(r->conn);
	}
}

static void unlink_waiter(struct tcp_reactor *rx, struct tcp_req *r)
{
	for (struct tcp_req **p = &rx->wait_head; *p; p = &(*p)->next_free)
		if (*p == r) {
			if (!(*p = r->next_free))
				rx->wait_tail = p;
			return;
		}
}

/* Direction of a command's data from its opcode (fabrics: its FCTYPE, by the same rule): bit 0
 * host-to-controller (Connect, Authentication Send), bit 1 the reverse (Authentication Receive). */
static unsigned data_dir(const struct nkv_sqe *cmd)
{
	if (cmd->opc == NKV_ADM_FABRICS)
		return ((const struct nkv_fabrics_cmd *)cmd)->fctype & 3;
	return cmd->opc & 3;
}

/* A CapsuleCmd header arrived with @icd bytes of in-capsule data to follow. */
static void rx_cmd(struct tcp_conn *c, uint32_t icd)
{
	const struct nkv_tcp_cmd *pdu = (const struct nkv_tcp_cmd *)c->hdr;
	const uint8_t *sgl = (const uint8_t *)&pdu->sqe.dptr;
	struct tcp_req *r = req_alloc(c);
	uint32_t sgl_len = nkv_get32(sgl + 8);
	uint64_t sgl_addr = nkv_get64(sgl);
	unsigned dir = data_dir(&pdu->sqe);
	nkv_status st = 0;

	if (!r) { /* more commands than SQ entries: the host broke flow control */
		send_term(c, NKV_TCP_FES_PDU_SEQUENCE, 0);
		return;
	}
	c->cmd_ms = nkv_now_ms();
	r->req.cmd = pdu->sqe;
	/* One line per command at debug level: what the host sent, in order (fabrics: FCTYPE, and
	 * CDW10/CDW11 are ATTRIB/OFST for Property Get/Set). */
	NKV_DEBUG("tcp %s: qid %u cid %u cmd opc %02xh%s%.*x%s nsid %xh cdw10 %08xh cdw11 %08xh cdw12 %08xh "
		  "cdw14 %08xh sgl %u icd %u",
		  c->peer, c->qp.qid, nkv_get16(&pdu->sqe.cid), pdu->sqe.opc,
		  pdu->sqe.opc == NKV_ADM_FABRICS ? " fctype " : "", pdu->sqe.opc == NKV_ADM_FABRICS ? 2 : 0,
		  pdu->sqe.opc == NKV_ADM_FABRICS ? (unsigned)((const struct nkv_fabrics_cmd *)&pdu->sqe)->fctype : 0u,
		  pdu->sqe.opc == NKV_ADM_FABRICS ? "h" : "",
		  pdu->sqe.opc == NKV_ADM_FABRICS ? 0 : nkv_get32(&pdu->sqe.nsid), nkv_get32(&pdu->sqe.cdw10),
		  nkv_get32(&pdu->sqe.cdw11), nkv_get32(&pdu->sqe.cdw12), nkv_get32(&pdu->sqe.cdw14), sgl_len, icd);
	r->icd_len = icd;
	r->sgl_len = sgl_len;
	r->h2c = dir == 1;
	c->sqhd = c->qp.size ? (uint16_t)((c->sqhd + 1) % c->qp.size) : 0;
#define FAIL(sc) nkv_status_make(NKV_SCT_GENERIC, NKV_SC_##sc, 1)
	/* The data pointer (docs/nvme-kv-wire.md C.5): in-capsule Data Block/Offset, or Transport Data Block. */
	if (icd) {
		if (sgl[15] != NKV_SGL_DATA_BLOCK_OFFSET)
			st = FAIL(SGL_DESC_TYPE_INVALID);
		else if (sgl_addr != 0 || sgl_len > icd_limit(c))
			st = FAIL(SGL_OFFSET_INVALID);
		else if (sgl_len != icd)
			st = FAIL(DATA_SGL_LENGTH_INVALID);
		else if (dir != 1)
			st = FAIL(INVALID_FIELD); /* in-capsule data on a command that reads */
	} else if (sgl[15] == NKV_SGL_DATA_BLOCK_OFFSET && sgl_len != 0) {
		st = FAIL(DATA_SGL_LENGTH_INVALID); /* in-capsule data announced but not sent */
	} else if (sgl[15] != NKV_SGL_TRANSPORT_DATA_BLOCK && sgl[15] != NKV_SGL_DATA_BLOCK_OFFSET &&
		   (sgl[15] != 0 || sgl_len != 0)) {
		st = FAIL(SGL_DESC_TYPE_INVALID);
	}
	if (st == 0 && !c->qp.ctrlr) {
		const struct nkv_fabrics_cmd *f = (const struct nkv_fabrics_cmd *)&pdu->sqe;
		if (f->opc != NKV_ADM_FABRICS || f->fctype != NKV_FCTYPE_CONNECT)
			st = FAIL(CMD_SEQUENCE_ERROR); /* nothing runs before Connect */
		else if ((f->flags & NKV_SQE_PSDT_MASK) != NKV_SQE_PSDT_SGL)
			st = FAIL(INVALID_FIELD);
		else if (sgl_len < sizeof(struct nkv_connect_data) || sgl_len > NKV_TCP_ADMIN_ICD)
			st = FAIL(DATA_SGL_LENGTH_INVALID);
		r->connect = true;
		r->need = sgl_len;
	} else if (st == 0) {
		r->req.data_len = sgl_len;
		r->req.data = NULL;
		if ((st = nkv_req_parse(&r->req)) == 0) {
			if (r->h2c && sgl_len > nkv_ctrlr_max_xfer(c->qp.ctrlr) && sgl_len > icd_limit(c))
				st = FAIL(DATA_SGL_LENGTH_INVALID);
			r->need = r->h2c ? sgl_len : r->req.length;
		}
	}
#undef FAIL
	r->pending = st;
	if (st)
		r->need = 0;
	req_try_buffer(c, r);
}

/* ---- receive path ------------------------------------------------------------------------------ */

static uint32_t expected_hlen(uint8_t type)
{
	switch (type) {
	case NKV_TCP_PDU_ICREQ: return 128;
	case NKV_TCP_PDU_H2C_TERM: return 24;
	case NKV_TCP_PDU_CMD: return 72;
	case NKV_TCP_PDU_H2C_DATA: return 24;
	}
	return 0;
}

static void send_icresp(struct tcp_conn *c)
{
	const struct nkv_tcp_ic *req = (const struct nkv_tcp_ic *)c->hdr;
	struct tcp_tx *tx = &c->ctl;
	struct nkv_tcp_ic *ic = (struct nkv_tcp_ic *)tx->hdr;

	if (nkv_get16(&req->pfv) != 0) {
		send_term(c, NKV_TCP_FES_UNSUPPORTED_PARAM, 8);
		return;
	}
	if (req->pda > 31) {
		send_term(c, NKV_TCP_FES_UNSUPPORTED_PARAM, 10);
		return;
	}
	c->hpda = req->pda;
	c->hdgst = (req->dgst & NKV_TCP_DGST_HDR) != 0;
	c->ddgst = (req->dgst & NKV_TCP_DGST_DATA) != 0;
	memset(tx, 0, sizeof(*tx));
	ic->ch.type = NKV_TCP_PDU_ICRESP;
	ic->ch.hlen = 128;
	nkv_put32(&ic->ch.plen, 128);
	ic->pda = 0;                           /* CPDA 0: Linux refuses anything else */
	ic->dgst = req->dgst & 3;              /* echo exactly what the host asked for */
	nkv_put32(&ic->maxr2t_or_maxh2cdata, c->t->conf.maxh2cdata);
	tx->hlen = 128;
	c->ic_done = true;
	tx_queue(c, tx);
	NKV_DEBUG("tcp %s: ICReq hpda %u digests %s%s", c->peer, c->hpda, c->hdgst ? "H" : "-", c->ddgst ? "D" : "-");
}

/* H2CData header (docs/nvme-kv-wire.md C.6): find the request by TTAG and check the range. */
static void rx_h2c(struct tcp_conn *c, uint32_t dlen)
{
	const struct nkv_tcp_data *d = (const struct nkv_tcp_data *)c->hdr;
	uint16_t ttag = nkv_get16(&d->ttag);
	uint32_t datao = nkv_get32(&d->datao), datal = nkv_get32(&d->datal);
	struct tcp_req *r = NULL;

	if (ttag == 0) /* the Connect's own data, when a host sends it through R2T */
		r = &c->connect_req;
	else if (ttag <= c->nreqs)
		r = c->reqs[ttag - 1];
	if (!r || r->state != REQ_RX || !r->h2c || r->icd_len) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 10);
		return;
	}
	if (nkv_get16(&d->cccid) != r->req.cmd.cid) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 8);
		return;
	}
	if (datal != dlen || datal == 0) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 16);
		return;
	}
	if (datal > c->t->conf.maxh2cdata) {
		send_term(c, NKV_TCP_FES_DATA_LIMIT, 16);
		return;
	}
	if (datao != r->h2c_got || (uint64_t)datao + datal > r->sgl_len) {
		send_term(c, NKV_TCP_FES_DATA_OUT_OF_RANGE, 12);
		return;
	}
	c->rx_req = r;
	c->rx_dst = r->buf + datao;
	c->rx_left = datal;
	c->rx_direct = false;
	c->rx_is_h2c = true;
	c->rx_last = (d->ch.flags & NKV_TCP_F_LAST) != 0;
	c->rs = c->rx_pad ? RX_PAD : RX_DATA;
}

/* Do the negotiated digests apply to a PDU of @type? (Never to IC or termination PDUs.) */
static bool pdu_digests(const struct tcp_conn *c, uint8_t type)
{
	return c->ic_done && (type == NKV_TCP_PDU_CMD || type == NKV_TCP_PDU_H2C_DATA);
}

/* A whole header (and its digest) is in c->hdr. */
static void rx_header(struct tcp_conn *c)
{
	const struct nkv_tcp_ch *ch = (const struct nkv_tcp_ch *)c->hdr;
	uint32_t hlen = ch->hlen, plen = nkv_get32(&ch->plen);
	bool digests = pdu_digests(c, ch->type);
	uint32_t hd = digests && c->hdgst ? 4 : 0, dd = digests && c->ddgst ? 4 : 0, dlen = 0;

	if (hd && nkv_get32(c->hdr + hlen) != nkv_crc32c(c->hdr, hlen)) {
		send_term(c, NKV_TCP_FES_HDGST, nkv_get32(c->hdr + hlen));
		return;
	}
	c->rx_pad = 0;
	c->rx_crc = NKV_CRC32C_INIT;
	c->rx_dg_got = 0;
	if (plen > hlen + hd) {
		dlen = plen - ch->pdo - dd;
		c->rx_pad = ch->pdo - (hlen + hd);
		c->rx_dlen = dlen;
	}
	c->rs = RX_CH;
	switch (ch->type) {
	case NKV_TCP_PDU_ICREQ:
		send_icresp(c);
		break;
	case NKV_TCP_PDU_H2C_TERM:
		NKV_WARN("tcp %s: host terminated the connection (FES %u)", c->peer, nkv_get16(c->hdr + 8));
		conn_close(c, "H2CTermReq");
		break;
	case NKV_TCP_PDU_CMD:
		rx_cmd(c, dlen);
		break;
	case NKV_TCP_PDU_H2C_DATA:
		rx_h2c(c, dlen);
		break;
	}
}

/* The common header is in: check it (docs/nvme-kv-wire.md C.3) and size the rest of the header. */
static void rx_common(struct tcp_conn *c)
{
	const struct nkv_tcp_ch *ch = (const struct nkv_tcp_ch *)c->hdr;
	uint32_t hlen = ch->hlen, plen = nkv_get32(&ch->plen), want = expected_hlen(ch->type);
	bool digests = pdu_digests(c, ch->type);
	uint32_t hd = digests && c->hdgst ? 4 : 0, dd = digests && c->ddgst ? 4 : 0;

	if (!c->ic_done && !c->tls && c->hdr[0] == 0x16 && c->hdr[1] == 0x03) {
		/* A TLS handshake record (a ClientHello): no termination PDU, a TLS host cannot read one. */
		NKV_WARN("tcp %s: TLS ClientHello on a plain listener (TLS is served on secure listeners only)", c->peer);
		conn_close(c, "TLS on a plain listener");
		return;
	}
	if (!c->ic_done != (ch->type == NKV_TCP_PDU_ICREQ) && ch->type != NKV_TCP_PDU_H2C_TERM) {
		send_term(c, want || ch->type == NKV_TCP_PDU_ICREQ ? NKV_TCP_FES_PDU_SEQUENCE
								   : NKV_TCP_FES_INVALID_HEADER, 0);
		return;
	}
	if (!want) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 0);
		return;
	}
	if (hlen != want) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 2);
		return;
	}
	if (plen < hlen + hd || (ch->type == NKV_TCP_PDU_ICREQ && plen != 128) ||
	    (ch->type == NKV_TCP_PDU_H2C_TERM && plen > NKV_TCP_TERM_MAX_PLEN)) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 4);
		return;
	}
	if (digests && plen > hlen + hd) {
		/* Data present: PDO after the header, a multiple of (CPDA + 1) * 4 = 4, room for the digest. */
		if (ch->pdo < hlen + hd || (ch->pdo & 3) || ch->pdo > plen) {
			send_term(c, NKV_TCP_FES_INVALID_HEADER, 3);
			return;
		}
		if (plen - ch->pdo < dd) {
			send_term(c, NKV_TCP_FES_INVALID_HEADER, 4);
			return;
		}
	}
	/* The host's flag must agree with what was negotiated. */
	if (digests && !!(ch->flags & NKV_TCP_F_HDGST) != c->hdgst) {
		send_term(c, NKV_TCP_FES_INVALID_HEADER, 1);
		return;
	}
	c->hneed = hlen + (ch->type == NKV_TCP_PDU_H2C_TERM ? plen - hlen : hd);
	c->rs = RX_PSH;
}

/* The data of a PDU (and its digest) has been received. */
static void rx_data_done(struct tcp_conn *c)
{
	struct tcp_req *r = c->rx_req;
	uint32_t dlen = c->rx_dlen;

	c->rs = RX_CH;
	c->pdu_ms = 0;
	if (c->ddgst && c->rx_dst && nkv_get32(c->rx_dg) != nkv_crc32c_final(c->rx_crc)) {
		NKV_WARN("tcp %s: data digest error on cid %u", c->peer, r->req.cmd.cid);
		if (!r->pending)
			r->pending = nkv_status_make(NKV_SCT_GENERIC, NKV_SC_DATA_TRANSFER_ERROR, 0);
	}
	if (!c->rx_is_h2c) {
		req_execute(c, r);
		return;
	}
	r->h2c_got += dlen;
	if (r->h2c_got == r->sgl_len) {
		r2t_unlink(c, r);
		req_execute(c, r);
	}
}

/*
 * How much to read into rbuf next. While a host owes a transfer of DIRECT_READ_MIN or more (an R2T
 * is out), the next bytes are most likely an H2CData PDU's header and then its data: reading only
 * to the header's end (PDO) leaves the data in the socket, to be read straight into the request
 * buffer, where a full rbuf would take up to 64 KiB of it that must then be copied (47 % of a 1 MiB
 * Store's bytes were). The recv calls stay as many (header, then data); another PDU arriving in its
 * place costs one more recv. Plain TCP only: TLS decrypts whole records anyway.
 */
static size_t rx_want(const struct tcp_conn *c)
{
	const struct tcp_req *r = c->r2t_head;
	uint32_t hd = c->hdgst ? 4 : 0, align = (c->hpda + 1u) * 4, pdo = (24 + hd + align - 1) / align * align;
	uint32_t want = 0;

	if (c->tls || !r || r->sgl_len - r->h2c_got < DIRECT_READ_MIN)
		return RBUF_SIZE;
	if (c->rs == RX_CH)
		want = pdo - (c->hgot < 8 ? c->hgot : 0);
	else if (c->rs == RX_PSH && c->hgot < pdo)
		want = pdo - c->hgot;
	else if (c->rs == RX_PAD)
		want = c->rx_pad;
	else if (c->rs == RX_DDGST)
		want = 4 - c->rx_dg_got + pdo;
	return want ? want : RBUF_SIZE;
}

/* Move bytes from the socket (through rbuf, or directly for large data) into the state machine. */
static void conn_read(struct tcp_conn *c)
{
	uint32_t budget = RX_BUDGET;
	bool drained = false; /* a plain recv came back short: the socket is empty for now */

	if (!c->rbuf && !(c->rbuf = malloc(RBUF_SIZE))) { /* on first data: silent peers cost less */
		conn_close(c, "out of memory");
		return;
	}
	/*
	 * The budget bounds what is read from the socket per event, never what was already read: bytes
	 * left in rbuf get no new readiness event (epoll sees an empty socket), so stopping with some
	 * there stalled the connection until the host sent more - a deadlock when it waits for the
	 * completions of the very commands whose H2C data sat in rbuf.
	 */
	while (!c->closed && !c->terminating) {
		if (c->rpos == c->rlen) {
			/* Level-triggered epoll reports what arrives later: asking again now would only get
			 * EAGAIN (one system call per command saved). TLS may hold decrypted bytes: it asks. */
			if (drained)
				break;
			/* Past the budget, data still in the socket is reported again (level-triggered epoll),
			 * but not the rest of a record TLS already decrypted: take that much more. */
			size_t tls_left = budget == 0 && c->tls ? nkv_tls_pending(&c->tls->io) : 0;
			if (budget == 0 && !tls_left)
				break;
			uint8_t *dst = c->rbuf;
			size_t want = rx_want(c);
			/* A PDU's data that began straight in its buffer ends there too: a recv that came
			 * back short left a remainder below DIRECT_READ_MIN that rbuf would copy. */
			bool direct = c->rs == RX_DATA && c->rx_dst && (c->rx_left >= DIRECT_READ_MIN || c->rx_direct);
			if (direct) {
				dst = c->rx_dst;
				want = c->rx_left;
			}
			if (tls_left && want > tls_left)
				want = tls_left;
			ssize_t n = c->tls ? nkv_tls_recv(&c->tls->io, dst, want) : recv(c->fd, dst, want, MSG_DONTWAIT);
			int err = n < 0 ? (c->tls ? (int)-n : errno) : 0;
			if (n == 0) {
				conn_close(c, "peer closed");
				return;
			}
			if (n < 0) {
				if (err == EINTR)
					continue;
				if (err != EAGAIN && err != EWOULDBLOCK)
					conn_close(c, c->tls ? c->tls->io.why : strerror(err));
				return;
			}
			budget = (uint32_t)n > budget ? 0 : budget - (uint32_t)n;
			drained = !c->tls && (size_t)n < want;
			if (direct) {
				c->rx_direct = true;
				if (c->ddgst)
					c->rx_crc = nkv_crc32c_update(c->rx_crc, dst, (size_t)n);
				c->rx_dst += n;
				c->rx_left -= (uint32_t)n;
				if (c->rx_left == 0 && c->ddgst)
					c->rs = RX_DDGST;
				else if (c->rx_left == 0)
					rx_data_done(c);
				continue;
			}
			c->rpos = 0;
			c->rlen = (uint32_t)n;
		}
		uint32_t avail = c->rlen - c->rpos, take;
		const uint8_t *p = c->rbuf + c->rpos;

		switch (c->rs) {
		case RX_CH:
		case RX_PSH: {
			uint32_t goal = c->rs == RX_CH ? 8 : c->hneed;
			if (c->rs == RX_CH && c->hgot >= 8)
				c->hgot = 0;
			if (!c->pdu_ms) /* a PDU begins: it has pdu_timeout_ms to arrive whole (slowloris) */
				c->pdu_ms = nkv_now_ms();
			take = goal - c->hgot < avail ? goal - c->hgot : avail;
			memcpy(c->hdr + c->hgot, p, take);
			c->hgot += take;
			c->rpos += take;
			if (c->hgot == goal) {
				if (c->rs == RX_CH)
					rx_common(c);
				else {
					rx_header(c);
					if (c->rs == RX_CH) {
						c->hgot = 0;
						c->pdu_ms = 0;
					}
				}
			}
			break;
		}
		case RX_PAD:
			take = c->rx_pad < avail ? c->rx_pad : avail;
			c->rpos += take;
			c->rx_pad -= take;
			if (c->rx_pad == 0)
				c->rs = c->rx_left ? RX_DATA : RX_CH;
			if (c->rs == RX_CH)
				c->pdu_ms = 0;
			break;
		case RX_DATA:
			take = c->rx_left < avail ? c->rx_left : avail;
			if (c->rx_dst) {
				/* Data that came into rbuf with its PDU's header: copied once more (data read
				 * straight into the request buffer, at DIRECT_READ_MIN and up, is not). */
				memcpy(c->rx_dst, p, take);
				if (c->rx_req && c->rx_req->io)
					nkv_copy_count(c->t->tgt, NKV_XPORT_TCP, NKV_XDIR_H2C, take);
				if (c->ddgst)
					c->rx_crc = nkv_crc32c_update(c->rx_crc, p, take);
				c->rx_dst += take;
			}
			c->rpos += take;
			c->rx_left -= take;
			if (c->rx_left == 0) {
				if (c->ddgst)
					c->rs = RX_DDGST;
				else
					rx_data_done(c);
			}
			break;
		case RX_DDGST:
			take = 4 - c->rx_dg_got < avail ? 4 - c->rx_dg_got : avail;
			memcpy(c->rx_dg + c->rx_dg_got, p, take);
			c->rx_dg_got += take;
			c->rpos += take;
			if (c->rx_dg_got == 4)
				rx_data_done(c);
			break;
		}
	}
}

/* ---- connections ------------------------------------------------------------------------------- */

/* A secure connection's handshake step. @return true once the session is up. */
static bool conn_tls_up(struct tcp_conn *c)
{
	int rc = nkv_tcp_tls_accept(c->tls, c->fd);

	if (rc == 0) {
		NKV_INFO("tcp %s: TLS 1.3 %s, PSK identity %s", c->peer, nkv_tls_cipher(&c->tls->io),
			 c->tls->psk->tls.identity);
		c->born_ms = nkv_now_ms(); /* the ICReq and Connect deadlines run from the secure channel */
		return true;
	}
	if (rc != -EAGAIN) {
		NKV_WARN("tcp %s: TLS handshake failed: %s", c->peer, c->tls->io.why);
		conn_close(c, "TLS handshake failed");
	}
	return false;
}

static void conn_event(struct nkv_event *ev, uint32_t events)
{
	struct tcp_conn *c = (struct tcp_conn *)ev;

	if (c->closed) /* by a lent completion while epoll_wait returned this event (its fd is gone) */
		return;
	if (c->tls && !c->tls->io.up && !conn_tls_up(c)) {
		if (!c->closed)
			mark_dirty(c); /* the epoll interest follows what the handshake waits for */
		return;
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || (c->tls && c->tls->io.rd_want_write))
		conn_read(c);
	if (!c->closed)
		mark_dirty(c);
}

static void conn_close(struct tcp_conn *c, const char *why)
{
	if (c->closed)
		return;
	NKV_INFO("tcp %s: qid %u closed: %s", c->peer, c->qp.qid, why);
	c->closed = true;
	nkv_reactor_del(&c->rx->r, c->fd);
	nkv_tcp_tls_conn_free(c->tls);
	c->tls = NULL;
	close(c->fd);
	nkv_tcp_host_closed(&c->t->lim, c->host);
	c->txq = NULL;
	c->txq_tail = &c->txq;
	/* Requests not in the core or backend end here; the others become tombstones. */
	for (unsigned i = 0; i <= c->nreqs; i++) {
		struct tcp_req *r = i ? c->reqs[i - 1] : &c->connect_req;
		if (r->state == REQ_RX && r->h2c)
			/* Say it: a host that vanished mid-transfer left a command that never ran. */
			NKV_INFO("tcp %s: qid %u cid %u: opcode %02xh dropped with %u of %u data bytes received", c->peer,
				 c->qp.qid, nkv_get16(&r->req.cmd.cid), r->req.cmd.opc,
				 r->icd_len ? r->icd_len : r->h2c_got, r->need);
		if (r->state == REQ_WAIT_BUF || r->state == REQ_RX || r->state == REQ_TX)
			req_release(r);
	}
	/* The admin queue carries the association: its loss ends it (AERs complete into tombstones). */
	if (c->qp.ctrlr && c->qp.qid == 0)
		nkv_ctrlr_kill(c->qp.ctrlr);
	c->rx->zombies++;
}

static void conn_attach(struct nkv_msg *m)
{
	struct tcp_conn *c = (struct tcp_conn *)((char *)m - offsetof(struct tcp_conn, msg));
	int rc;

	c->next = c->rx->conns;
	c->rx->conns = c;
	c->qp.msgq = &c->rx->r.msgq;
	c->qp.peer_addr = c->host->addr; /* DH-HMAC-CHAP's per-address bucket (core/auth_dh.h) */
	if ((rc = nkv_reactor_add(&c->rx->r, c->fd, EPOLLIN, &c->ev)) < 0) {
		NKV_ERR("tcp %s: epoll: %s", c->peer, strerror(-rc));
		c->closed = true;
		nkv_tcp_tls_conn_free(c->tls);
		c->tls = NULL;
		close(c->fd);
		nkv_tcp_host_closed(&c->t->lim, c->host);
		c->rx->zombies++;
	}
}

/* Accept failed for want of a file descriptor or memory. The listener is level-triggered: left
 * armed it would fire again at once and spin reactor 0, so it rests ACCEPT_PAUSE_MS (the tick
 * re-arms it) while closing connections frees descriptors. */
static void listener_pause(struct tcp_listener *l, int err)
{
	nkv_tcp_accept_failed(&l->t->lim, err);
	nkv_reactor_mod(&l->t->rs[0].r, l->fd, 0, &l->ev);
	l->paused_ms = nkv_now_ms();
}

static void accept_ready(struct nkv_event *ev, uint32_t events)
{
	struct tcp_listener *l = (struct tcp_listener *)ev;
	struct nkv_tcp *t = l->t;
	(void)events;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1, rc;
		struct tcp_host *h = NULL;
		struct tcp_conn *c = NULL;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				listener_pause(l, errno);
			return;
		}
		if (atomic_load(&t->draining)) {
			close(fd);
			continue;
		}
		if ((rc = nkv_tcp_host_attach(&t->lim, &ss, &h)) == -EMLINK || rc == -EUSERS) {
			nkv_tcp_refuse(&t->lim, fd, rc);
			continue;
		}
		if (rc < 0 || !(c = calloc(1, sizeof(*c))) || (l->tls && !(c->tls = nkv_tcp_tls_conn_new(t->tls, fd)))) {
			NKV_ERR("tcp: out of memory accepting a connection");
			free(c);
			if (h) {
				nkv_tcp_host_closed(&t->lim, h);
				nkv_tcp_host_put(&t->lim, h);
			}
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->t = t;
		c->host = h;
		c->exposed = l->exposed;
		c->disc_only = l->disc_only;
		c->ev.fn = conn_event;
		c->born_ms = nkv_now_ms();
		c->txq_tail = &c->txq;
		c->r2t_tail = &c->r2t_head;
		c->qp.ops = &g_tcp_ops;
		c->connect_req.conn = c;
		c->connect_req.req.qp = &c->qp;
		nkv_tcp_peer_name(fd, c->peer, sizeof(c->peer));
		c->rx = &t->rs[atomic_fetch_add(&t->next_rx, 1) % t->nr];
		atomic_fetch_add(&t->nconns, 1);
		NKV_DEBUG("tcp: connection from %s on reactor %u", c->peer, c->rx->r.id);
		nkv_msgq_send(&c->rx->r.msgq, &c->msg, conn_attach);
	}
}

/* ---- reactor hooks ----------------------------------------------------------------------------- */

/* Send what completions queued, and start commands that waited for buffer budget. Also run after a
 * completion lent to a backend thread (reactor.h), so it frees nothing. */
static void reactor_flush(struct nkv_reactor *r)
{
	struct tcp_reactor *rx = (struct tcp_reactor *)r;

	if (rx->kick) {
		rx->kick = false;
		run_waiters(rx);
	}
	while (rx->dirty) {
		struct tcp_conn *c = rx->dirty;
		rx->dirty = c->next_dirty;
		c->dirty = false;
		if (!c->closed)
			conn_flush(c);
	}
}

/* After each batch of events: flush, then free finished closed connections (never earlier: the code
 * that closed one may still be on the stack, or an event for it in the batch). */
static void reactor_idle(struct nkv_reactor *r)
{
	struct tcp_reactor *rx = (struct tcp_reactor *)r;

	reactor_flush(r);
	for (struct tcp_conn **p = &rx->conns; rx->zombies && *p;) {
		struct tcp_conn *c = *p;
		if (c->closed && c->outstanding == 0) {
			*p = c->next;
			rx->zombies--;
			conn_free(c);
		} else {
			p = &c->next;
		}
	}
}

/* Commands in the core or backend, or with a response on its way (drain accounting). */
static unsigned running(const struct tcp_conn *c)
{
	unsigned n = c->connect_req.state == REQ_EXEC || c->connect_req.state == REQ_TX;

	for (unsigned i = 0; i < c->nreqs; i++)
		n += c->reqs[i]->state == REQ_EXEC || c->reqs[i]->state == REQ_TX;
	return n;
}

/*
 * The deadlines of a live connection (issue 18): the PDU at the head of the send queue, the data of
 * the oldest R2T, the PDU being received, an idle admin queue without keep alive. A missed R2T or
 * PDU deadline is a fatal transport error: C2HTermReq FES 02h (the spec has no timeout code; the
 * PDU the host owed never came in sequence) carrying the R2T or partial header, then close; its
 * command ends with the connection. A host that stops reading cannot even take a termination PDU:
 * it is simply closed. @return true when the connection was closed or terminated.
 */
/* More than @ms since @since? (@since may be after @now: stamped by run_waiters in this tick.) */
static bool past(uint64_t now, uint64_t since, uint32_t ms)
{
	return now > since && now - since > ms;
}

static bool conn_overdue(struct tcp_conn *c, uint64_t now)
{
	const struct nkv_tcp_conf *cf = &c->t->conf;
	struct nkv_ctrlr *ctrlr = c->qp.ctrlr;

	if ((c->txq || (c->tls && c->tls->io.up && nkv_tls_want_write(&c->tls->io))) &&
	    past(now, c->tx_head_ms, cf->send_timeout_ms)) {
		NKV_WARN("tcp %s: qid %u: host not reading: nothing sent for %u ms", c->peer, c->qp.qid,
			 cf->send_timeout_ms);
		conn_close(c, "send timeout");
		return true;
	}
	if (c->terminating || c->draining)
		return false;
	/* A queue that must authenticate and has not, or a transaction left half done. */
	if (ctrlr && nkv_auth_qp_expired(&c->qp, now)) {
		conn_close(c, "authentication not completed in time");
		return true;
	}
	if (c->r2t_head && past(now, c->r2t_head->r2t_ms, cf->r2t_timeout_ms)) {
		struct tcp_req *r = c->r2t_head;
		NKV_WARN("tcp %s: qid %u cid %u: H2C data %u of %u bytes after %u ms", c->peer, c->qp.qid,
			 nkv_get16(&r->req.cmd.cid), r->h2c_got, r->sgl_len, cf->r2t_timeout_ms);
		send_term_hdr(c, NKV_TCP_FES_PDU_SEQUENCE, 0, r->tx_data.hdr, r->tx_data.hlen);
		return true;
	}
	if (c->pdu_ms && past(now, c->pdu_ms, cf->pdu_timeout_ms)) {
		NKV_WARN("tcp %s: qid %u: PDU incomplete after %u ms", c->peer, c->qp.qid, cf->pdu_timeout_ms);
		send_term(c, NKV_TCP_FES_PDU_SEQUENCE, 0);
		return true;
	}
	/* KATO 0 means no keep-alive expiry, not a connection held forever for free: an admin queue
	 * with no I/O queues and nothing to do goes after idle_admin_ms. */
	if (ctrlr && c->qp.qid == 0 && !ctrlr->kato_ms && atomic_load(&ctrlr->refs) <= 1 &&
	    c->outstanding <= ctrlr->naer && past(now, c->cmd_ms, cf->idle_admin_ms)) {
		conn_close(c, "idle admin queue without keep alive");
		return true;
	}
	return false;
}

static void reactor_tick(struct nkv_reactor *r)
{
	struct tcp_reactor *rx = (struct tcp_reactor *)r;
	struct nkv_tcp *t = rx->t;
	uint64_t now = nkv_now_ms();
	bool draining = atomic_load(&t->draining), force = atomic_load(&t->force);

	nkv_bufcache_trim(&rx->bufs, now);

	if (r->id == 0) { /* listeners live on reactor 0 */
		pthread_mutex_lock(&t->lmu);
		for (struct tcp_listener **pl = &t->listeners; *pl;) {
			struct tcp_listener *l = *pl;
			if (draining || l->remove) {
				/* In the tick, between event batches: no event of this batch still points at it. */
				*pl = l->next;
				nkv_reactor_del(r, l->fd);
				close(l->fd);
				if (l->portid)
					nkv_target_del_port(t->tgt, l->portid);
				free(l);
				continue;
			}
			if (l->paused_ms && now - l->paused_ms >= ACCEPT_PAUSE_MS) { /* out of descriptors: retry */
				l->paused_ms = 0;
				nkv_reactor_mod(r, l->fd, EPOLLIN, &l->ev);
			}
			pl = &l->next;
		}
		pthread_mutex_unlock(&t->lmu);
	}
	run_waiters(rx); /* budget released by other reactors */
	for (struct tcp_conn *c = rx->conns, *next; c; c = next) {
		struct nkv_ctrlr *ctrlr = c->qp.ctrlr;
		next = c->next;
		if (c->closed)
			continue;
		if (force)
			conn_close(c, "shutdown");
		else if (c->terminating && now - c->term_ms > TERM_LINGER_MS)
			conn_close(c, "termination not acknowledged");
		else if (c->tls && !c->tls->io.up && now - c->born_ms > t->conf.tls_timeout_ms) {
			NKV_WARN("tcp %s: TLS handshake not finished within %u ms", c->peer, t->conf.tls_timeout_ms);
			conn_close(c, "TLS handshake timeout");
		} else if (!c->ic_done && now - c->born_ms > t->conf.icreq_timeout_ms)
			conn_close(c, "no ICReq");
		else if (!ctrlr && now - c->born_ms > t->conf.connect_timeout_ms)
			conn_close(c, "no Connect");
		else if (conn_overdue(c, now))
			continue;
		else if (ctrlr && nkv_ctrlr_closing(ctrlr))
			conn_close(c, "association ended");
		else if (ctrlr && c->qp.qid == 0 && ctrlr->kato_ms && now - ctrlr->last_keepalive_ms > ctrlr->kato_ms) {
			NKV_WARN("%s: controller %u: keep alive timeout (%u ms)", ctrlr->ss->nqn, ctrlr->cntlid,
				 ctrlr->kato_ms);
			conn_close(c, "keep alive timeout");
		} else if (draining) {
			/* Stop reading; close once every command that started executing is answered.
			 * Commands still waiting for their data or for buffer budget never ran: they end with
			 * the connection (the host sees it drop, so nothing is half done). An admin queue
			 * stays until its I/O queues are gone, as AERs are its only outstanding commands. */
			unsigned held = ctrlr && c->qp.qid == 0 ? ctrlr->naer : 0;
			c->draining = true;
			if (running(c) <= held && tx_idle(c) && (!ctrlr || c->qp.qid != 0 || atomic_load(&ctrlr->refs) <= 1))
				conn_close(c, "shutdown");
			else
				mark_dirty(c);
		}
	}
}

static int reactor_done(struct nkv_reactor *r)
{
	return ((struct tcp_reactor *)r)->conns == NULL;
}

/* ---- public API -------------------------------------------------------------------------------- */

static void tcp_read_gauges(void *arg, struct nkv_transport_metrics *m)
{
	struct nkv_tcp *t = arg;

	for (unsigned i = 0; i < t->nr; i++) {
		m->queue_depth += atomic_load_explicit(&t->rs[i].inflight, memory_order_relaxed);
		m->waits += atomic_load_explicit(&t->rs[i].r.waits, memory_order_relaxed);
	}
	int n = atomic_load_explicit(&t->nconns, memory_order_relaxed);
	m->connections = n > 0 ? (uint64_t)n : 0;
}

int nkv_tcp_create(struct nkv_target *tgt, const struct nkv_tcp_conf *conf, struct nkv_tcp **out)
{
	struct nkv_tcp *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->tgt = tgt;
	pthread_mutex_init(&t->lmu, NULL);
	if (conf)
		t->conf = *conf;
	if (!t->conf.reactors)
		t->conf.reactors = 2;
	if (!t->conf.in_capsule)
		t->conf.in_capsule = 8192;
	if (!t->conf.maxh2cdata)
		t->conf.maxh2cdata = 128 * 1024;
	if (!t->conf.max_queue_depth)
		t->conf.max_queue_depth = 1024;
	if (!t->conf.max_io_queues)
		t->conf.max_io_queues = 64;
	if (!t->conf.buffer_budget)
		t->conf.buffer_budget = 2ull << 30;
	if (!t->conf.tls_timeout_ms)
		t->conf.tls_timeout_ms = 10000;
	nkv_tcp_limits_defaults(&t->conf);
	/* MAXH2CDATA: a multiple of 4, at least 4096 (Linux checks both); MQES >= 31 for the admin queue;
	 * IOCCSZ counts 16-byte units after the 64-byte SQE; the I/O Connect's 1024 bytes fit in it. */
	if ((t->conf.maxh2cdata & 3) || t->conf.maxh2cdata < NKV_TCP_MIN_MAXH2CDATA || t->conf.max_queue_depth < 32 ||
	    (t->conf.in_capsule & 15) || t->conf.in_capsule < 1024 || t->conf.in_capsule > (1u << 20) ||
	    t->conf.reactors > 256 || t->conf.max_io_queues > 1024) {
		free(t);
		return -EINVAL;
	}
	if ((rc = nkv_tcp_limits_init(&t->lim, &t->conf)) < 0) {
		free(t);
		return rc;
	}
	if ((rc = nkv_target_enable_discovery(tgt)) < 0 || !(t->rs = calloc(t->conf.reactors, sizeof(*t->rs)))) {
		nkv_tcp_limits_fini(&t->lim);
		free(t);
		return rc < 0 ? rc : -ENOMEM;
	}
	for (t->nr = 0; t->nr < t->conf.reactors; t->nr++) {
		struct tcp_reactor *rx = &t->rs[t->nr];
		rx->t = t;
		rx->wait_tail = &rx->wait_head;
		/* A quarter of the budget, spread over the reactors, may stay cached after a burst. */
		nkv_bufcache_init(&rx->bufs, t->conf.buffer_budget / t->conf.reactors / 4, BUF_IDLE_MS);
		rx->r.tick = reactor_tick;
		rx->r.poll_us = t->conf.poll_us;
		rx->r.idle = reactor_idle;
		rx->r.done = reactor_done;
		rx->r.flush = reactor_flush;
		if ((rc = nkv_reactor_start(&rx->r, t->nr)) < 0) {
			nkv_tcp_destroy(t, 0);
			return rc;
		}
	}
	t->reg = (struct nkv_transport_reg){.name = "tcp", .read = tcp_read_gauges, .arg = t};
	nkv_target_add_transport(tgt, &t->reg);
	*out = t;
	return 0;
}

static int listen_on(struct nkv_tcp *t, const char *addr, const char *port, bool advertise, bool tls,
		     bool disc_only)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
			*ai = NULL;
	struct tcp_listener *l;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = -1, one = 1, rc;

	if ((rc = getaddrinfo(addr && *addr ? addr : NULL, port, &hints, &ai)) != 0) {
		/* debug: the caller reports the failure (the daemon names the address); one line, not two */
		NKV_DEBUG("tcp: cannot resolve %s:%s: %s", addr ? addr : "*", port, gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 512) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		NKV_DEBUG("tcp: cannot listen on %s:%s: %s", addr ? addr : "*", port, strerror(-rc));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	if (!(l = calloc(1, sizeof(*l)))) {
		close(fd);
		return -ENOMEM;
	}
	l->fd = fd;
	l->t = t;
	l->tls = tls;
	l->exposed = nkv_listener_exposes(addr ? addr : "", tls);
	l->disc_only = disc_only;
	l->ev.fn = accept_ready;
	int bound = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	l->bound = bound;
	snprintf(l->addr, sizeof(l->addr), "%s", addr ? addr : "");
	if (advertise) {
		/*
		 * A secure port: TREQ "required", TSAS SECTYPE TLS 1.3 (docs/nvme-kv-wire.md C.10, C.12). A
		 * plain one: "not specified" (as Linux nvmet's), never "not required": on that, libnvme 1.3
		 * (Debian 12's nvme-cli 2.3; linux-nvme/libnvme#612) makes nvme connect-all ask the kernel
		 * for TLS, which 6.1 refuses ("unknown parameter ... 'tls'").
		 */
		struct nkv_port p = {.trtype = NKV_TRTYPE_TCP, .portid = l->portid = ++t->next_portid,
				     .adrfam = ss.ss_family == AF_INET6 ? NKV_ADRFAM_IPV6 : NKV_ADRFAM_IPV4,
				     .treq = tls ? NKV_TREQ_REQUIRED : NKV_TREQ_NOT_SPECIFIED,
				     .sectype = tls ? NKV_TCP_SECTYPE_TLS13 : NKV_TCP_SECTYPE_NONE,
				     .exposed = l->exposed};
		char host[INET6_ADDRSTRLEN];
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
		snprintf(p.traddr, sizeof(p.traddr), "%s", host);
		snprintf(p.trsvcid, sizeof(p.trsvcid), "%d", bound);
		if ((rc = nkv_target_add_port(t->tgt, &p)) < 0) {
			close(fd);
			free(l);
			return rc;
		}
	}
	/* Listeners are owned by reactor 0 (its tick closes them on shutdown); link before arming. */
	pthread_mutex_lock(&t->lmu);
	l->next = t->listeners;
	t->listeners = l;
	if ((rc = nkv_reactor_add(&t->rs[0].r, fd, EPOLLIN, &l->ev)) < 0)
		l->remove = true; /* the tick takes it away */
	pthread_mutex_unlock(&t->lmu);
	if (rc < 0)
		return rc;
	NKV_DEBUG("tcp: listening on %s:%d%s%s", addr && *addr ? addr : "*", bound, tls ? " (TLS)" : "",
		  advertise ? "" : " (not advertised)");
	return bound;
}

int nkv_tcp_listen(struct nkv_tcp *t, const char *addr, const char *port, bool advertise)
{
	return listen_on(t, addr, port, advertise, false, false);
}

int nkv_tcp_listen_discovery(struct nkv_tcp *t, const char *addr, const char *port)
{
	return listen_on(t, addr, port, false, false, true);
}

int nkv_tcp_listen_tls(struct nkv_tcp *t, const char *addr, const char *port, bool advertise)
{
	if (!t->tls || nkv_tcp_tls_npsk(t->tls) == 0)
		return -ENOKEY; /* nobody could ever connect */
	return listen_on(t, addr, port, advertise, true, false);
}

int nkv_tcp_unlisten(struct nkv_tcp *t, const char *addr, int port)
{
	struct tcp_listener *l;
	bool found = false;

	pthread_mutex_lock(&t->lmu);
	for (l = t->listeners; l; l = l->next)
		if (!l->remove && l->bound == port && strcmp(l->addr, addr ? addr : "") == 0) {
			l->remove = true;
			found = true;
		}
	pthread_mutex_unlock(&t->lmu);
	if (!found)
		return -ENOENT;
	/* Reactor 0 closes it at its next tick: wait, so that the caller may bind the port again. */
	for (int i = 0; i < 500; i++) {
		bool gone = true;
		pthread_mutex_lock(&t->lmu);
		for (l = t->listeners; l; l = l->next)
			gone = gone && !(l->remove && l->bound == port);
		pthread_mutex_unlock(&t->lmu);
		if (gone)
			return 0;
		usleep(10 * 1000);
	}
	return -ETIMEDOUT;
}

int nkv_tcp_add_psk(struct nkv_tcp *t, const char *hostnqn, const char *subnqn, const char *key)
{
	return nkv_tcp_tls_add_key(&t->tls, hostnqn, subnqn, key);
}

void nkv_tcp_destroy(struct nkv_tcp *t, int grace_ms)
{
	if (!t)
		return;
	uint64_t deadline = nkv_now_ms() + (uint64_t)(grace_ms > 0 ? grace_ms : 0);

	nkv_target_del_transport(t->tgt, &t->reg); /* no metrics reader looks at it any more */
	atomic_store(&t->draining, true);
	while (atomic_load(&t->nconns) > 0 && nkv_now_ms() < deadline)
		usleep(10 * 1000);
	if (atomic_load(&t->nconns) > 0)
		NKV_WARN("tcp: %d connections still busy after %d ms: closing them", atomic_load(&t->nconns), grace_ms);
	atomic_store(&t->force, true);
	/* Each reactor exits once its connections are freed, i.e. every backend op has come back. */
	for (unsigned i = 0; i < t->nr; i++)
		nkv_reactor_stop(&t->rs[i].r);
	for (unsigned i = 0; i < t->nr; i++) {
		nkv_reactor_fini(&t->rs[i].r);
		nkv_bufcache_fini(&t->rs[i].bufs);
	}
	while (t->listeners) {
		struct tcp_listener *l = t->listeners;
		t->listeners = l->next;
		close(l->fd);
		free(l);
	}
	pthread_mutex_destroy(&t->lmu);
	nkv_tcp_limits_fini(&t->lim);
	nkv_tcp_tls_ctx_destroy(t->tls);
	free(t->rs);
	free(t);
}
