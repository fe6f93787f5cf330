/*
 * metrics_http.c - the daemon's Prometheus endpoint (--metrics ADDR:PORT): GET /metrics over HTTP,
 * served by libmicrohttpd on a thread of its own, with the text from metrics.c.
 *
 * Bounded, since anyone who reaches the port can ask: one thread answers every request in turn (a
 * scrape takes milliseconds), at most METRICS_MAX_CONNS connections at once and
 * METRICS_MAX_PER_IP from one address, a connection idle for METRICS_IDLE_S is closed, a request's
 * headers fit in METRICS_REQ_MEM, and the text of one scrape is at most METRICS_MAX_BYTES.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#define NKV_LOG_COMPONENT "metrics"
#include "common/log.h"
#include "daemon.h"

#define METRICS_MAX_CONNS 16
#define METRICS_MAX_PER_IP 4
#define METRICS_IDLE_S 10
#define METRICS_REQ_MEM (32 * 1024)
#define METRICS_MAX_BYTES (16u << 20)

struct daemon_metrics {
	struct MHD_Daemon *mhd;
	struct nkv_target *tgt;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text, const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
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
	if (strcmp(url, "/metrics") != 0)
		return reply(conn, MHD_HTTP_NOT_FOUND, "not found: this server answers GET /metrics only\n", NULL);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET /metrics\n", "GET, HEAD");
	if ((rc = metrics_render(m->tgt, METRICS_MAX_BYTES, &text, &len)) < 0) {
		NKV_WARN("a scrape failed: %s", strerror(-rc));
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "the metrics could not be gathered (out of memory)\n",
			     NULL);
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
	/* One internal thread answers everything: a scrape is short and scrapes are rare. The listening
	 * socket is ours (numeric or named addresses, IPv6, port 0); MHD closes it when it stops. */
	m->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
					  (family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, on_request, m,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, /* first: it covers the options' errors */
				  MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_MAX_CONNS,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)METRICS_MAX_PER_IP,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_IDLE_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_REQ_MEM, MHD_OPTION_END);
	if (!m->mhd) {
		NKV_ERR("cannot start the metrics server on %s:%d", c->metrics.addr, port);
		close(fd);
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
	MHD_stop_daemon(m->mhd);
	free(m);
}
