/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_limits.c - per-host and transport-wide limits of the NVMe/TCP transport (see tcp_limits.h). */
#include "tcp_limits.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define WARN_EVERY_MS 10000

void nkv_tcp_limits_defaults(struct nkv_tcp_conf *cf)
{
	struct rlimit rl;

	if (!cf->conn_buffer)
		cf->conn_buffer = cf->buffer_budget / 8;
	if (!cf->host_buffer)
		cf->host_buffer = cf->buffer_budget / 4;
	if (!cf->r2t_timeout_ms)
		cf->r2t_timeout_ms = 30000;
	if (!cf->pdu_timeout_ms)
		cf->pdu_timeout_ms = 10000;
	if (!cf->send_timeout_ms)
		cf->send_timeout_ms = 30000;
	if (!cf->icreq_timeout_ms)
		cf->icreq_timeout_ms = 10000;
	if (!cf->connect_timeout_ms)
		cf->connect_timeout_ms = 30000;
	if (!cf->idle_admin_ms)
		cf->idle_admin_ms = 60000;
	if (!cf->auth_timeout_ms)
		cf->auth_timeout_ms = 10000;
	if (!cf->max_conns) {
		/* Leave 64 descriptors to the listeners, the reactors and the backend (librados). */
		cf->max_conns = 4096;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 4096 + 64)
			cf->max_conns = rl.rlim_cur > 128 ? (unsigned)rl.rlim_cur - 64 : 64;
	}
	if (!cf->max_host_conns)
		cf->max_host_conns = 256;
	if (!cf->max_ctrlrs)
		cf->max_ctrlrs = 1024;
	if (!cf->max_host_ctrlrs)
		cf->max_host_ctrlrs = 32;
}

int nkv_tcp_limits_init(struct tcp_limits *l, const struct nkv_tcp_conf *conf)
{
	memset(l, 0, sizeof(*l));
	l->conf = conf;
	atomic_init(&l->buffered, 0);
	return -pthread_mutex_init(&l->lock, NULL);
}

void nkv_tcp_limits_fini(struct tcp_limits *l)
{
	for (unsigned i = 0; i < TCP_HOST_BUCKETS; i++)
		while (l->hosts[i]) { /* only after a failed start; connections put their hosts */
			struct tcp_host *h = l->hosts[i];
			l->hosts[i] = h->next;
			free(h);
		}
	pthread_mutex_destroy(&l->lock);
}

/* The peer's address as 16 bytes (IPv4 v4-mapped), so both families share one table. */
static void peer_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
	memset(key, 0, 16);
	if (ss->ss_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

static unsigned bucket(const uint8_t key[16])
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 16777619u;
	return h % TCP_HOST_BUCKETS;
}

int nkv_tcp_host_attach(struct tcp_limits *l, const struct sockaddr_storage *peer, struct tcp_host **out)
{
	uint8_t key[16];
	struct tcp_host *h;
	int rc = 0;

	peer_key(peer, key);
	unsigned b = bucket(key);
	pthread_mutex_lock(&l->lock);
	for (h = l->hosts[b]; h && memcmp(h->addr, key, 16) != 0; h = h->next)
		;
	if (l->conns >= l->conf->max_conns)
		rc = -EMLINK;
	else if (h && h->conns >= l->conf->max_host_conns)
		rc = -EUSERS;
	else if (!h && !(h = calloc(1, sizeof(*h))))
		rc = -ENOMEM;
	else if (h->refs == 0) { /* new entry */
		memcpy(h->addr, key, 16);
		atomic_init(&h->buffered, 0);
		h->next = l->hosts[b];
		l->hosts[b] = h;
	}
	if (rc == 0) {
		h->refs++;
		h->conns++;
		l->conns++;
		*out = h;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void nkv_tcp_host_closed(struct tcp_limits *l, struct tcp_host *h)
{
	pthread_mutex_lock(&l->lock);
	h->conns--;
	l->conns--;
	pthread_mutex_unlock(&l->lock);
}

void nkv_tcp_host_put(struct tcp_limits *l, struct tcp_host *h)
{
	pthread_mutex_lock(&l->lock);
	if (--h->refs == 0) {
		for (struct tcp_host **p = &l->hosts[bucket(h->addr)]; *p; p = &(*p)->next)
			if (*p == h) {
				*p = h->next;
				break;
			}
		free(h);
	}
	pthread_mutex_unlock(&l->lock);
}

void nkv_tcp_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
			    NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(buf, len, "%s:%s", host, port);
}

/* Accepted and closed at once, so the host sees a reset instead of a hang and the backlog keeps
 * moving; said, but not once per connection of a flood. */
void nkv_tcp_refuse(struct tcp_limits *l, int fd, int why)
{
	uint64_t now = nkv_now_ms();
	char peer[64];

	l->refused++;
	if (now - l->warned_ms >= WARN_EVERY_MS) {
		nkv_tcp_peer_name(fd, peer, sizeof(peer));
		NKV_WARN("tcp: refused %u connection(s) over the %s limit (%u), the latest from %s", l->refused,
			 why == -EUSERS ? "per-host connection" : "connection",
			 why == -EUSERS ? l->conf->max_host_conns : l->conf->max_conns, peer);
		l->refused = 0;
		l->warned_ms = now;
	}
	close(fd);
}

void nkv_tcp_accept_failed(struct tcp_limits *l, int err)
{
	uint64_t now = nkv_now_ms();

	if (now - l->warned_ms >= WARN_EVERY_MS) {
		pthread_mutex_lock(&l->lock);
		unsigned conns = l->conns;
		pthread_mutex_unlock(&l->lock);
		NKV_ERR("tcp: accept: %s with %u connections open: listener paused (raise the file limit or "
			"lower max_conns)", strerror(err), conns);
		l->warned_ms = now;
	}
}

int nkv_tcp_ctrlr_claim(struct tcp_limits *l, struct tcp_host *h)
{
	int rc = -EBUSY;

	pthread_mutex_lock(&l->lock);
	if (l->ctrlrs < l->conf->max_ctrlrs && h->ctrlrs < l->conf->max_host_ctrlrs) {
		l->ctrlrs++;
		h->ctrlrs++;
		rc = 0;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void nkv_tcp_ctrlr_release(struct tcp_limits *l, struct tcp_host *h)
{
	pthread_mutex_lock(&l->lock);
	l->ctrlrs--;
	h->ctrlrs--;
	pthread_mutex_unlock(&l->lock);
}

/* Add @need to @ctr unless that passes @cap while @ctr already holds something. */
static bool take(atomic_uint_fast64_t *ctr, uint64_t need, uint64_t cap, bool force)
{
	uint64_t cur = atomic_load(ctr);

	do {
		if (!force && cur > 0 && cur + need > cap)
			return false;
	} while (!atomic_compare_exchange_weak(ctr, &cur, cur + need));
	return true;
}

int nkv_tcp_charge(struct tcp_limits *l, struct tcp_host *h, uint64_t *conn_bytes, uint64_t need,
		   enum tcp_charge mode)
{
	const struct nkv_tcp_conf *cf = l->conf;
	bool force = mode != TCP_CHARGE_WAIT;

	if (!force && *conn_bytes > 0 && *conn_bytes + need > cf->conn_buffer)
		return -EBUSY;
	if (!take(&h->buffered, need, cf->host_buffer, mode == TCP_CHARGE_ADMIN))
		return -EBUSY;
	if (!take(&l->buffered, need, cf->buffer_budget, force)) {
		atomic_fetch_sub(&h->buffered, need);
		return -EAGAIN;
	}
	*conn_bytes += need;
	return 0;
}

void nkv_tcp_uncharge(struct tcp_limits *l, struct tcp_host *h, uint64_t *conn_bytes, uint64_t n)
{
	*conn_bytes -= n;
	atomic_fetch_sub(&h->buffered, n);
	atomic_fetch_sub(&l->buffered, n);
}
