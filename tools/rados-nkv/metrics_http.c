/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_http.c - the daemon's Prometheus endpoint (--metrics ADDR:PORT): GET /metrics over HTTP,
 * served by libmicrohttpd on a thread of its own, with the text from metrics.c.
 *
 * Bounded, since anyone who reaches the port can ask: one thread answers every request in turn (a
 * scrape takes milliseconds), at most METRICS_MAX_CONNS connections at once and
 * METRICS_MAX_PER_IP from one address, a connection idle for METRICS_IDLE_S is closed, a request's
 * headers fit in METRICS_REQ_MEM, and the text of one scrape is at most METRICS_MAX_BYTES.
 *
 * Idle time alone does not stop a slow client: one that sends a header line every few seconds is
 * never idle, and 16 of them would hold every slot. So each request has METRICS_REQUEST_S from the
 * connection's accept (or the previous response's end) to its response's end; a thread of ours
 * shuts down the sockets of late ones, and MHD then closes them. And a new connection over
 * METRICS_MAX_CONNS makes room: the oldest request of the address holding the most connections is
 * closed, so that slow clients cannot keep out a scraper from another address. MHD itself admits
 * METRICS_SPARE more, so that the new connection reaches us at all.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#define NKV_LOG_COMPONENT "metrics"
#include "common/clock.h"
#include "common/log.h"
#include "daemon.h"

#define METRICS_MAX_CONNS 16
#define METRICS_SPARE 8      /* MHD's own limit is this much higher: room for one to replace */
#define METRICS_MAX_PER_IP 4
#define METRICS_IDLE_S 10
#define METRICS_REQUEST_S 5  /* accept (or the last response's end) to the response's end */
#define METRICS_TICK_MS 250
#define METRICS_REQ_MEM (32 * 1024)
#define METRICS_MAX_BYTES (16u << 20)

/* A connection MHD has open, from its NOTIFY_STARTED to its NOTIFY_CLOSED. */
struct conn_slot {
	bool used;
	bool shut;                     /* its socket was shut down: MHD is closing it */
	int fd;
	struct sockaddr_storage peer;  /* to recognise the socket (fd numbers are reused) */
	socklen_t peer_len;
	uint64_t since_ms;             /* accept, or the end of its last response */
};

struct daemon_metrics {
	struct MHD_Daemon *mhd;
	struct nkv_target *tgt;
	pthread_mutex_t lock;          /* slots, stop */
	pthread_cond_t cv;
	pthread_t reaper;
	bool reaper_on, stop;
	struct conn_slot slot[METRICS_MAX_CONNS + METRICS_SPARE];
};

/* The landing page of "/", as Prometheus exporters serve one: where the metrics are. */
static const char ROOT_PAGE[] = "<html><head><title>rados-nkv</title></head><body><h1>rados-nkv</h1>"
				"<p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

/* A static @text of @type (NULL: plain text), with an Allow header if @allow. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text, const char *type,
			     const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type ? type : "text/plain; charset=utf-8");
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result rc = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls)
{
	struct daemon_metrics *m = cls;
	char *text;
	size_t len;
	int rc;

	(void)version, (void)upload_data, (void)upload_data_size, (void)req_cls;
	/* Answered on the first call, with the headers: a body sent along is never read. */
	bool root = strcmp(url, "/") == 0;
	if (!root && strcmp(url, "/metrics") != 0)
		return reply(conn, MHD_HTTP_NOT_FOUND, "not found: this server answers GET /metrics (and /)\n", NULL,
			     NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET /metrics\n", NULL,
			     "GET, HEAD");
	if (root)
		return reply(conn, MHD_HTTP_OK, ROOT_PAGE, "text/html; charset=utf-8", NULL);
	if ((rc = metrics_render(m->tgt, METRICS_MAX_BYTES, &text, &len)) < 0) {
		NKV_WARN("a scrape failed: %s", strerror(-rc));
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "the metrics could not be gathered (out of memory)\n",
			     NULL, NULL);
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result q = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return q;
}

/* ---- request deadlines ---------------------------------------------------------------------------- */

/* The address part of @a (no port), for comparing hosts. */
static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
			      16) == 0;
	return false;
}

static void host_name(const struct sockaddr_storage *a, char *buf, size_t len)
{
	const void *p = a->ss_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr
						 : (const void *)&((const struct sockaddr_in *)a)->sin_addr;
	if (!inet_ntop(a->ss_family, p, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* Shut @s's socket down, if it still is the socket MHD accepted (under m->lock): MHD sees the end of
 * the stream and closes the connection on its thread. */
static void shut(struct conn_slot *s, bool late)
{
	struct sockaddr_storage now;
	socklen_t len = sizeof(now);
	char host[INET6_ADDRSTRLEN];

	s->shut = true;
	if (getpeername(s->fd, (struct sockaddr *)&now, &len) != 0 || len != s->peer_len ||
	    memcmp(&now, &s->peer, len) != 0)
		return; /* already gone: the number may name another socket by now */
	shutdown(s->fd, SHUT_RDWR);
	host_name(&s->peer, host, sizeof(host));
	/* two call sites: each is rate limited on its own */
	if (late)
		NKV_WARN("closed a connection from %s: no complete request and response within %u s", host,
			 METRICS_REQUEST_S);
	else
		NKV_WARN("closed a connection from %s: the endpoint is full and this address holds the most "
			 "connections (a slow client?)", host);
}

/* A new connection over METRICS_MAX_CONNS: close the oldest request of the address holding the most
 * connections (never @fresh). Under m->lock. */
static void make_room(struct daemon_metrics *m, const struct conn_slot *fresh)
{
	const unsigned n = sizeof(m->slot) / sizeof(m->slot[0]);
	unsigned live = 0, best_count = 0;
	struct conn_slot *best = NULL;

	for (unsigned i = 0; i < n; i++)
		live += m->slot[i].used && !m->slot[i].shut;
	if (live <= METRICS_MAX_CONNS)
		return;
	for (unsigned i = 0; i < n; i++) {
		struct conn_slot *s = &m->slot[i];
		if (!s->used || s->shut || s == fresh)
			continue;
		unsigned count = 0;
		for (unsigned k = 0; k < n; k++)
			count += m->slot[k].used && !m->slot[k].shut && same_host(&m->slot[k].peer, &s->peer);
		if (!best || count > best_count || (count == best_count && s->since_ms < best->since_ms)) {
			best = s;
			best_count = count;
		}
	}
	if (best)
		shut(best, false);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct daemon_metrics *m = cls;
	struct conn_slot *s = *socket_context;

	pthread_mutex_lock(&m->lock);
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (s)
			s->used = false;
	} else if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		for (unsigned i = 0; !s && fd && i < sizeof(m->slot) / sizeof(m->slot[0]); i++)
			if (!m->slot[i].used)
				s = &m->slot[i];
		if (s) { /* none free cannot happen: MHD admits fewer; such a one is only not timed */
			memset(s, 0, sizeof(*s));
			s->used = true;
			s->fd = fd->connect_fd;
			s->peer_len = sizeof(s->peer);
			if (getpeername(s->fd, (struct sockaddr *)&s->peer, &s->peer_len) != 0)
				s->peer_len = 0;
			s->since_ms = nkv_now_ms();
			*socket_context = s;
			make_room(m, s);
		}
	}
	pthread_mutex_unlock(&m->lock);
}

/* A response ended (or the request failed): the connection's next request has its own time. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct daemon_metrics *m = cls;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	(void)req_cls, (void)toe;
	pthread_mutex_lock(&m->lock);
	if (ci && ci->socket_context)
		((struct conn_slot *)ci->socket_context)->since_ms = nkv_now_ms();
	pthread_mutex_unlock(&m->lock);
}

/* Our thread: close requests past METRICS_REQUEST_S. */
static void *reaper(void *arg)
{
	struct daemon_metrics *m = arg;

	pthread_mutex_lock(&m->lock);
	while (!m->stop) {
		struct timespec ts = nkv_abstime_in_ms(METRICS_TICK_MS);
		pthread_cond_timedwait(&m->cv, &m->lock, &ts);
		uint64_t now = nkv_now_ms();
		for (unsigned i = 0; i < sizeof(m->slot) / sizeof(m->slot[0]); i++) {
			struct conn_slot *s = &m->slot[i];
			if (s->used && !s->shut && now - s->since_ms > METRICS_REQUEST_S * 1000u)
				shut(s, true);
		}
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	NKV_WARN("libmicrohttpd: %s", line);
}

/* Bind @l's address ("" = every address). @return the socket (listening), its port and address
 * family, or -errno. */
static int bind_listener(const struct conf_listener *l, int *port, int *family)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res, *ai;
	int fd = -1, rc, err = -EADDRNOTAVAIL;

	if ((rc = getaddrinfo(*l->addr ? l->addr : NULL, l->port, &hints, &res)) != 0)
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		if ((fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0)) < 0) {
			err = -errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
			break;
		err = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err;
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*family = sa.ss_family;
	*port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
					       : ((struct sockaddr_in *)&sa)->sin_port);
	return fd;
}

int daemon_metrics_start(const struct daemon_conf *c, struct nkv_target *tgt, struct daemon_metrics **out)
{
	struct daemon_metrics *m;
	int fd, port = 0, family = AF_INET;

	*out = NULL;
	if (!c->metrics_on)
		return 0;
	if ((fd = bind_listener(&c->metrics, &port, &family)) < 0) {
		NKV_ERR("cannot serve metrics on %s:%s: %s (use --metrics ADDR:PORT or --metrics none)", c->metrics.addr,
			c->metrics.port, strerror(-fd));
		return -1;
	}
	if (!(m = calloc(1, sizeof(*m)))) {
		close(fd);
		return -1;
	}
	m->tgt = tgt;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* One internal thread answers everything: a scrape is short and scrapes are rare. The listening
	 * socket is ours (numeric or named addresses, IPv6, port 0); MHD closes it when it stops. */
	m->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
					  (family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, on_request, m,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, /* first: it covers the options' errors */
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)(METRICS_MAX_CONNS + METRICS_SPARE),
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_MAX_PER_IP,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_IDLE_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_REQ_MEM,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, m, MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
				  MHD_OPTION_END);
	if (m->mhd && pthread_create(&m->reaper, NULL, reaper, m) == 0)
		m->reaper_on = true;
	if (!m->reaper_on) {
		NKV_ERR("cannot start the metrics server on %s:%d", c->metrics.addr, port);
		if (m->mhd)
			MHD_stop_daemon(m->mhd); /* closes fd */
		else
			close(fd);
		pthread_mutex_destroy(&m->lock);
		pthread_cond_destroy(&m->cv);
		free(m);
		return -1;
	}
	bool v6 = strchr(c->metrics.addr, ':') != NULL;
	NKV_INFO("metrics on %s%s%s:%d (GET /metrics, Prometheus text)", v6 ? "[" : "",
		 *c->metrics.addr ? c->metrics.addr : "*", v6 ? "]" : "", port);
	if (!conf_addr_is_loopback(c->metrics.addr))
		NKV_WARN("the metrics endpoint is off loopback: whoever reaches it reads subsystem names and traffic "
			 "figures (no authentication; firewall it)");
	*out = m;
	return 0;
}

void daemon_metrics_stop(struct daemon_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->stop = true;
	pthread_cond_signal(&m->cv);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->reaper, NULL);
	MHD_stop_daemon(m->mhd);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cv);
	free(m);
}
