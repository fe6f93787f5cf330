/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_bench.c - the Redis baseline for bench/compare.sh (against rados-nkv's mem backend): the same
 * workload engine and value verification as `nkv bench`, as SET / GET / EXISTS / DEL in RESP. Requests
 * are written with writev straight from the value buffers (no copies, as libnkv does); replies are
 * parsed with hiredis' reader. Key = lowercase hex of the bench key. qd = commands pipelined on the
 * worker's one connection (Redis answers in order; each reply's latency is from its own submission).
 *
 *   redis_bench [-h HOST] [-p PORT] [-o json] KEY=VALUE...
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"

struct rd_arg {
	const char *host;
	int port;
};

/* One queued request: a RESP header we own, then (SET) the value straight from the I/O's buffer. */
struct rd_out {
	char hdr[128];
	size_t hlen;
	const void *val;
	size_t vlen;
	size_t sent; /* of hlen + vlen + 2 (the value's CRLF) */
};

struct rd_ctx {
	int fd;
	redisReader *rd;
	struct bh_io **fifo;   /* requests awaiting replies, in order */
	struct rd_out *out;    /* requests not fully sent, same ring */
	unsigned qd, head, n, sent_upto; /* fifo ring; [head, head+sent_upto) fully sent */
	char *rbuf;
	size_t rcap;
};

static void *rd_init(void *arg, unsigned worker, unsigned qd)
{
	struct rd_arg *a = arg;
	struct rd_ctx *x = calloc(1, sizeof(*x));
	char port[16];
	snprintf(port, sizeof(port), "%d", a->port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	if (getaddrinfo(a->host, port, &hints, &ai)) {
		fprintf(stderr, "redis_bench: cannot resolve %s\n", a->host);
		return NULL;
	}
	x->fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (x->fd < 0 || connect(x->fd, ai->ai_addr, ai->ai_addrlen)) {
		fprintf(stderr, "redis_bench: worker %u: %s:%d: %s\n", worker, a->host, a->port, strerror(errno));
		freeaddrinfo(ai);
		return NULL;
	}
	freeaddrinfo(ai);
	int one = 1;
	setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(x->fd, F_SETFL, fcntl(x->fd, F_GETFL) | O_NONBLOCK);
	x->rd = redisReaderCreate();
	x->rd->maxbuf = 0; /* keep the reader's buffer (no shrink/regrow per reply) */
	x->qd = qd;
	x->fifo = calloc(qd, sizeof(*x->fifo));
	x->out = calloc(qd, sizeof(*x->out));
	x->rcap = 1 << 20;
	x->rbuf = malloc(x->rcap);
	return x;
}

static void rd_fini(void *ctx)
{
	struct rd_ctx *x = ctx;
	close(x->fd);
	redisReaderFree(x->rd);
	free(x->fifo);
	free(x->out);
	free(x->rbuf);
	free(x);
}

static int rd_submit(void *ctx, struct bh_io *io)
{
	struct rd_ctx *x = ctx;
	if (x->n == x->qd)
		return -EAGAIN;
	unsigned slot = (x->head + x->n) % x->qd;
	struct rd_out *o = &x->out[slot];
	size_t kl = strlen(io->name);
	static const char *const cmd[BH_NOPS] = {"SET", "GET", "EXISTS", "DEL"};
	const char *c = cmd[io->op];
	if (io->op == BH_WRITE) {
		o->hlen = (size_t)snprintf(o->hdr, sizeof(o->hdr), "*3\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(c), c,
					   kl, io->name, io->len);
		o->val = io->buf;
		o->vlen = io->len;
	} else {
		o->hlen = (size_t)snprintf(o->hdr, sizeof(o->hdr), "*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen(c), c, kl,
					   io->name);
		o->val = NULL;
		o->vlen = 0;
	}
	o->sent = 0;
	x->fifo[slot] = io;
	x->n++;
	return 0;
}

static void rd_complete(struct rd_ctx *x, redisReply *r)
{
	struct bh_io *io = x->fifo[x->head];
	x->head = (x->head + 1) % x->qd;
	x->n--;
	x->sent_upto--;
	int rc = 0;
	size_t got = 0;
	const void *data = NULL;
	if (r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "redis_bench: %s: %s\n", io->name, r->str);
		rc = -EIO;
	} else if (io->op == BH_READ) {
		if (r->type == REDIS_REPLY_NIL)
			rc = -ENOENT;
		else {
			got = r->len;
			data = r->str;
		}
	} else if (io->op == BH_EXIST || io->op == BH_DELETE) {
		rc = r->integer ? 0 : -ENOENT;
	}
	bh_io_done(io, rc, got, got, data);
}

/* Write what the socket takes (writev of headers and values, no copies). @return 0 or -errno. */
static int rd_flush(struct rd_ctx *x)
{
	while (x->sent_upto < x->n) {
		struct iovec iov[64];
		int cnt = 0;
		for (unsigned i = x->sent_upto; i < x->n && cnt < 60; i++) {
			struct rd_out *o = &x->out[(x->head + i) % x->qd];
			size_t off = o->sent;
			if (off < o->hlen) {
				iov[cnt++] = (struct iovec){o->hdr + off, o->hlen - off};
				off = o->hlen;
			}
			if (o->val) {
				size_t vo = off - o->hlen;
				if (vo < o->vlen)
					iov[cnt++] = (struct iovec){(char *)o->val + vo, o->vlen - vo};
				size_t co = vo > o->vlen ? vo - o->vlen : 0;
				iov[cnt++] = (struct iovec){(char *)"\r\n" + co, 2 - co};
			}
		}
		ssize_t w = writev(x->fd, iov, cnt);
		if (w < 0)
			return errno == EAGAIN ? 0 : -errno;
		size_t left = (size_t)w;
		while (left && x->sent_upto < x->n) {
			struct rd_out *o = &x->out[(x->head + x->sent_upto) % x->qd];
			size_t total = o->hlen + (o->val ? o->vlen + 2 : 0), rest = total - o->sent;
			size_t take = left < rest ? left : rest;
			o->sent += take;
			left -= take;
			if (o->sent == total)
				x->sent_upto++;
		}
	}
	return 0;
}

static int rd_poll(void *ctx, int timeout_ms)
{
	struct rd_ctx *x = ctx;
	int n = 0;
	for (;;) {
		int rc = rd_flush(x);
		if (rc)
			return rc;
		void *rep = NULL;
		while (x->n && redisReaderGetReply(x->rd, &rep) == REDIS_OK && rep) {
			rd_complete(x, rep);
			freeReplyObject(rep);
			n++;
		}
		if (n || !x->n)
			return n;
		struct pollfd p = {.fd = x->fd, .events = POLLIN | (x->sent_upto < x->n ? POLLOUT : 0)};
		if (poll(&p, 1, timeout_ms) == 0)
			return 0;
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = read(x->fd, x->rbuf, x->rcap);
			if (r == 0)
				return -ECONNRESET;
			if (r < 0 && errno != EAGAIN)
				return -errno;
			if (r > 0 && redisReaderFeed(x->rd, x->rbuf, (size_t)r) != REDIS_OK)
				return -EPROTO;
		}
	}
}

int main(int argc, char **argv)
{
	struct rd_arg a = {.host = "127.0.0.1", .port = 6379};
	struct bh_conf conf;
	bh_conf_init(&conf, true);
	int o;
	while ((o = getopt(argc, argv, "+h:p:o:")) != -1) {
		switch (o) {
		case 'h': a.host = optarg; break;
		case 'p': a.port = atoi(optarg); break;
		case 'o': conf.json = strcmp(optarg, "json") == 0; break;
		default:
			printf("usage: redis_bench [-h HOST] [-p PORT] [-o json] [KEY=VALUE...]\n\n%s", bh_conf_help);
			return 64;
		}
	}
	for (int i = optind; i < argc; i++)
		if (bh_conf_arg(&conf, argv[i]))
			return 64;
	char target[300];
	snprintf(target, sizeof(target), "redis %s:%d", a.host, a.port);
	conf.tool = "redis-bench";
	conf.target = target;
	struct bh_backend b = {
		.name = "redis",
		.arg = &a,
		.worker_init = rd_init,
		.worker_fini = rd_fini,
		.submit = rd_submit,
		.poll = rd_poll,
	};
	return bh_run(&conf, &b);
}
