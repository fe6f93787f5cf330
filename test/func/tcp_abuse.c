/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_abuse.c - issue 18: one NVMe/TCP host must not take the gateway from the others.
 *
 * Usage: tcp_abuse PATH/TO/rados-nkv
 *
 * Starts the daemon (mem backend, 64 MiB buffer budget, deadlines of a few seconds) and runs small
 * raw-socket attacks from their own loopback addresses (127.0.0.x: a "host" is a peer address),
 * each while a victim host on 127.0.0.1 does Connect + Identify + Store + Retrieve, which must
 * finish within VICTIM_MS. Then the attacker's connection must be ended by the daemon (C2HTermReq
 * FES 02h where it can still read, a close otherwise) and the daemon's VmRSS must come back near
 * its baseline. Cases:
 *   r2t_hold    Stores through R2T whose data never comes (finding 2)
 *   slowloris   a command capsule one byte at a time; silent connections before ICReq/Connect
 *   no_read     Retrieves of large values from a host that never reads its socket (finding 3)
 *   conn_flood  more connections than a host may open; idle KATO 0 admin queues; controllers
 *   emfile      a second daemon at a low file limit: accept at EMFILE must not spin (finding 6)
 * TCP_ABUSE_OLD_FLAGS=1 starts the daemon with only the flags older daemons know (to measure them).
 * Exit 0 only without failures; the last line is "N passed, N failed".
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nkv/nkv_spec.h"

#include "check.h"
#include "daemon_spawn.h"

unsigned h_pass, h_fail;

#define SUBNQN "nqn.2026-11.io.rados-nkv:abuse"
#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000ab05e"
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))
#define VICTIM_MS 2000     /* the victim's whole session, while an attack runs */
#define DEADLINE_MS 2000   /* every deadline the daemon is started with */
#define BIG (4u << 20)     /* the attacker's value size */
#define RSS_SLACK_MB 24    /* RSS after an attack: within this of the baseline */

static int io_port;
static bool old_flags;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- raw NVMe/TCP host (no digests) --------------------------------------------------------------- */

struct conn {
	int fd;
	uint16_t cid;
};

/** Connect from 127.0.0.@src (0: any) with an optional small receive buffer. @return fd or -1. */
static int tcp_open_from(int src, int rcvbuf)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (fd < 0)
		return -1;
	if (rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (src) {
		struct sockaddr_in b = {.sin_family = AF_INET};
		b.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)src);
		if (bind(fd, (struct sockaddr *)&b, sizeof(b)) != 0) {
			close(fd);
			return -1;
		}
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)io_port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

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

/** @return 1 read, 0 closed (EOF or reset), -1 timeout. */
static int recv_exact(int fd, void *buf, size_t n, int ms)
{
	uint8_t *p = buf;
	uint64_t end = now_ms() + (uint64_t)ms;
	while (n) {
		int left = (int)(end - now_ms());
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return -1;
		ssize_t k = recv(fd, p, n, 0);
		if (k == 0 || (k < 0 && (errno == ECONNRESET || errno == EPIPE)))
			return 0;
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 1;
}

/** One PDU: its first 24 header bytes in @hdr (more discarded), data into @data (up to @cap).
 * @return the PDU type, -2 closed, -1 timeout. */
static int recv_pdu(int fd, uint8_t hdr[24], void *data, uint32_t cap, int ms)
{
	uint8_t ch[8];
	int r = recv_exact(fd, ch, 8, ms);
	if (r != 1)
		return r == 0 ? -2 : -1;
	uint32_t plen = nkv_get32(ch + 4), got = 8;
	memset(hdr, 0, 24);
	memcpy(hdr, ch, 8);
	uint8_t *tmp = malloc(plen > 8 ? plen : 8);
	r = plen > 8 ? recv_exact(fd, tmp, plen - 8, ms) : 1;
	if (r == 1) {
		memcpy(hdr + 8, tmp, plen - 8 < 16 ? plen - 8 : 16);
		got = plen;
		if (data && ch[3] && plen > ch[3]) /* PDO: data follows */
			memcpy(data, tmp + ch[3] - 8, plen - ch[3] < cap ? plen - ch[3] : cap);
	}
	free(tmp);
	(void)got;
	return r == 1 ? ch[0] : (r == 0 ? -2 : -1);
}

static bool icreq(int fd)
{
	uint8_t b[128] = {NKV_TCP_PDU_ICREQ, 0, 128}, h[24];
	nkv_put32(b + 4, 128);
	return send_all(fd, b, 128) && recv_pdu(fd, h, NULL, 0, 3000) == NKV_TCP_PDU_ICRESP;
}

static void sqe_sgl(struct nkv_sqe *s, uint8_t type, uint32_t len)
{
	memset(s->dptr, 0, sizeof(s->dptr));
	nkv_put32(s->dptr + 8, len);
	s->dptr[15] = type;
	s->flags = (uint8_t)((s->flags & 0x3f) | (NKV_PSDT_SGL << NKV_SQE_PSDT_SHIFT));
}

/** Send a CapsuleCmd with @dlen bytes in-capsule. */
static bool capsule(struct conn *c, struct nkv_sqe *sqe, const void *data, uint32_t dlen)
{
	c->cid = (uint16_t)(c->cid % 0xfffe + 1);
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

/** Wait for the CapsuleResp of the last command, data into @buf. @return status code or -1. */
static int wait_rsp(struct conn *c, void *buf, uint32_t cap, struct nkv_cqe *cqe, int ms)
{
	uint8_t h[24];
	for (;;) {
		int t = recv_pdu(c->fd, h, buf, cap, ms);
		if (t == NKV_TCP_PDU_C2H_DATA)
			continue;
		if (t != NKV_TCP_PDU_RSP)
			return -1;
		if (cqe)
			memcpy(cqe, h + 8, 16);
		return (nkv_get16(h + 22) >> 1) & 0x7ff;
	}
}

static int exec(struct conn *c, struct nkv_sqe *sqe, const void *d, uint32_t dl, void *buf, uint32_t cap,
		struct nkv_cqe *cqe)
{
	return capsule(c, sqe, d, dl) ? wait_rsp(c, buf, cap, cqe, 5000) : -1;
}

static void sqe_fabrics(struct nkv_sqe *s, uint8_t fctype)
{
	memset(s, 0, sizeof(*s));
	s->opc = NKV_ADM_FABRICS;
	((uint8_t *)s)[4] = fctype;
	sqe_sgl(s, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
}

/** Fabrics Connect (qid 0: new controller). @return status, -1 on a transport failure. */
static int fconnect(struct conn *c, uint16_t qid, uint16_t cntlid, uint32_t kato, struct nkv_cqe *q)
{
	struct nkv_sqe s;
	struct nkv_connect_data d;
	sqe_fabrics(&s, NKV_FCTYPE_CONNECT);
	nkv_put16((uint8_t *)&s + 42, qid);
	nkv_put16((uint8_t *)&s + 44, 31);
	nkv_put32((uint8_t *)&s + 48, kato);
	sqe_sgl(&s, NKV_SGL_DATA_BLOCK_OFFSET, sizeof(d));
	memset(&d, 0, sizeof(d));
	d.hostid[0] = 0xab;
	nkv_put16(&d.cntlid, cntlid);
	snprintf(d.subnqn, sizeof(d.subnqn), "%s", SUBNQN);
	snprintf(d.hostnqn, sizeof(d.hostnqn), "%s", HOSTNQN);
	return exec(c, &s, &d, sizeof(d), NULL, 0, q);
}

static int prop_set(struct conn *c, uint32_t ofst, uint32_t v)
{
	struct nkv_sqe s;
	sqe_fabrics(&s, NKV_FCTYPE_PROP_SET);
	nkv_put32((uint8_t *)&s + 44, ofst);
	nkv_put32((uint8_t *)&s + 48, v);
	return exec(c, &s, NULL, 0, NULL, 0, NULL);
}

static int identify(struct conn *c)
{
	static uint8_t id[NKV_IDENTIFY_SIZE];
	struct nkv_sqe s;
	memset(&s, 0, sizeof(s));
	s.opc = NKV_ADM_IDENTIFY;
	nkv_put32(&s.cdw10, NKV_CNS_CTRLR);
	sqe_sgl(&s, NKV_SGL_TRANSPORT_DATA_BLOCK, sizeof(id));
	return exec(c, &s, NULL, 0, id, sizeof(id), NULL);
}

/** A controller from 127.0.0.@src: admin queue (KATO @kato) enabled, I/O queue 1 when @io. */
struct sess {
	struct conn adm, io;
};

static bool sess_open(struct sess *s, int src, bool io, uint32_t kato, int rcvbuf)
{
	struct nkv_cqe q;
	memset(s, 0, sizeof(*s));
	s->io.fd = -1;
	if ((s->adm.fd = tcp_open_from(src, 0)) < 0 || !icreq(s->adm.fd) || fconnect(&s->adm, 0, 0xffff, kato, &q) != 0)
		return false;
	uint16_t cntlid = (uint16_t)nkv_get32(&q.dw0);
	if (prop_set(&s->adm, NKV_REG_CC, CC_ENABLE) != 0 || identify(&s->adm) != 0)
		return false;
	struct nkv_sqe f;
	memset(&f, 0, sizeof(f));
	f.opc = NKV_ADM_SET_FEATURES;
	nkv_put32(&f.cdw10, NKV_FEAT_NUM_QUEUES);
	sqe_sgl(&f, NKV_SGL_TRANSPORT_DATA_BLOCK, 0);
	if (exec(&s->adm, &f, NULL, 0, NULL, 0, NULL) != 0)
		return false;
	if (!io)
		return true;
	return (s->io.fd = tcp_open_from(src, rcvbuf)) >= 0 && icreq(s->io.fd) &&
	       fconnect(&s->io, 1, cntlid, 0, &q) == 0;
}

static void sess_close(struct sess *s)
{
	if (s->io.fd >= 0)
		close(s->io.fd);
	if (s->adm.fd >= 0)
		close(s->adm.fd);
	s->io.fd = s->adm.fd = -1;
}

static void sqe_kv(struct nkv_sqe *s, uint8_t opc, const char *key, uint32_t size, uint8_t sgl)
{
	nkv_sqe_kv(s, opc, 1, (const uint8_t *)key, (unsigned)strlen(key), size, 0);
	sqe_sgl(s, sgl, size);
}

/** Store @len bytes through R2T (SGL 5Ah) and send the data when @data. @return the R2T's TTAG or -1. */
static int store_r2t(struct conn *c, const char *key, const uint8_t *data, uint32_t len, int ms)
{
	struct nkv_sqe s;
	uint8_t h[24];
	sqe_kv(&s, NKV_KV_STORE, key, len, NKV_SGL_TRANSPORT_DATA_BLOCK);
	if (!capsule(c, &s, NULL, 0) || recv_pdu(c->fd, h, NULL, 0, ms) != NKV_TCP_PDU_R2T)
		return -1;
	uint16_t ttag = nkv_get16(h + 10);
	for (uint32_t off = 0; data && off < len;) {
		uint32_t n = len - off < 65536 ? len - off : 65536;
		uint8_t *b = calloc(1, 24 + n);
		b[0] = NKV_TCP_PDU_H2C_DATA;
		b[1] = off + n == len ? NKV_TCP_F_LAST : 0;
		b[2] = 24;
		b[3] = 24;
		nkv_put32(b + 4, 24 + n);
		nkv_put16(b + 8, c->cid);
		nkv_put16(b + 10, ttag);
		nkv_put32(b + 12, off);
		nkv_put32(b + 16, n);
		memcpy(b + 24, data + off, n);
		bool ok = send_all(c->fd, b, 24 + n);
		free(b);
		if (!ok)
			return -1;
		off += n;
	}
	return ttag;
}

/** The victim: a whole session from 127.0.0.1 with a 1 MiB Store through R2T and its Retrieve.
 * @return elapsed ms, or -1 when a step failed (hung past its own timeout). */
static long victim(void)
{
	static unsigned n;
	uint64_t t0 = now_ms();
	struct sess s;
	char key[16];
	uint32_t len = 1u << 20;
	uint8_t *v = malloc(len), *r = malloc(len);
	snprintf(key, sizeof(key), "victim%u", n++);
	for (uint32_t i = 0; i < len; i++)
		v[i] = (uint8_t)(i * 7 + n);
	bool ok = sess_open(&s, 1, true, 10000, 0) && store_r2t(&s.io, key, v, len, 5000) >= 0 &&
		  wait_rsp(&s.io, NULL, 0, NULL, 5000) == 0;
	if (ok) {
		struct nkv_sqe q;
		sqe_kv(&q, NKV_KV_RETRIEVE, key, len, NKV_SGL_TRANSPORT_DATA_BLOCK);
		ok = exec(&s.io, &q, NULL, 0, r, len, NULL) == 0 && memcmp(v, r, len) == 0;
	}
	sess_close(&s);
	free(v);
	free(r);
	return ok ? (long)(now_ms() - t0) : -1;
}

static void check_victim(const char *during)
{
	long ms = victim();
	printf("  victim during %s: %ld ms\n", during, ms);
	CHECK(ms >= 0 && ms <= VICTIM_MS, "victim session during %s: %ld ms (bound %d ms, -1: failed or hung)",
	      during, ms, VICTIM_MS);
}

/** Wait for a C2HTermReq with FES @fes then the close, reading past anything else. @return ms or -1. */
static long wait_term(int fd, unsigned fes, int ms)
{
	uint64_t t0 = now_ms();
	uint8_t h[24];
	for (;;) {
		int left = ms - (int)(now_ms() - t0), t = recv_pdu(fd, h, NULL, 0, left > 0 ? left : 1);
		if (t < 0)
			return -1;
		if (t == NKV_TCP_PDU_C2H_TERM) {
			unsigned got = nkv_get16(h + 8);
			int after = recv_pdu(fd, h, NULL, 0, 3000);
			if (got != fes || after != -2)
				printf("  C2HTermReq FES %#x (want %#x), then %s\n", got, fes,
				       after == -2 ? "closed" : "not closed");
			return got == fes && after == -2 ? (long)(now_ms() - t0) : -1;
		}
	}
}

/** Read until the daemon closes the connection. @return ms taken, or -1 (still open after @ms). */
static long wait_closed(int fd, int ms)
{
	uint64_t t0 = now_ms();
	static uint8_t b[1 << 16];
	for (;;) {
		int left = ms - (int)(now_ms() - t0);
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return -1;
		ssize_t k = recv(fd, b, sizeof(b), 0);
		if (k == 0 || (k < 0 && errno == ECONNRESET))
			return (long)(now_ms() - t0);
	}
}

/* ---- daemon --------------------------------------------------------------------------------------- */

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/** utime + stime of @pid in clock ticks. */
static long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

/** In the daemon's child before exec: ASan options, and a file limit of *@arg (0: unchanged). */
static void daemon_child_setup(void *arg)
{
	unsigned nofile = *(const unsigned *)arg;
	/* Freed memory must go back to the system for the RSS checks, even under ASan. */
	const char *a = getenv("ASAN_OPTIONS");
	char opts[512];
	snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=1", a ? a : "", a && *a ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	if (nofile) {
		struct rlimit rl = {nofile, nofile};
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/** Start the daemon with @extra flags (NULL-terminated) and a file limit of @nofile (0: unchanged). */
static pid_t daemon_start(const char *path, const char *const *extra, unsigned nofile)
{
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", io_port);
	const char *argv[64] = {path, "--backend", "mem", "--listen", listen, "--discovery", "none", "--log-level",
				getenv("TCP_ABUSE_LOG") ? getenv("TCP_ABUSE_LOG") : "error", "--subsys", SUBNQN,
				"--pool", "nkv", "--ns", "1", "--buffer-budget", "64"};
	int n = 17;
	for (; extra && *extra && n < 62; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	pid_t pid = daemon_spawn(argv, daemon_child_setup, &nofile);
	return daemon_wait_port(pid, io_port) ? pid : -1;
}

/* ---- cases ---------------------------------------------------------------------------------------- */

static pid_t dpid;
static long rss_base;

static void check_rss(const char *after)
{
	long kb = -1;
	/* Buffers go back when connections are freed; give the reactors a few ticks. */
	for (int i = 0; i < 30; i++) {
		kb = rss_kb(dpid);
		if (kb >= 0 && kb <= rss_base + RSS_SLACK_MB * 1024)
			break;
		usleep(100000);
	}
	printf("  RSS after %s: %ld KiB (baseline %ld KiB)\n", after, kb, rss_base);
	CHECK(kb >= 0 && kb <= rss_base + RSS_SLACK_MB * 1024, "RSS after %s: %ld KiB, baseline %ld KiB + %d MiB",
	      after, kb, rss_base, RSS_SLACK_MB);
}

/* Finding 2: 3 controllers from 127.0.0.2, 8 Stores of 4 MiB each through R2T, data never sent:
 * 96 MiB asked of a 64 MiB budget. */
static void case_r2t_hold(void)
{
	struct sess a[3];
	int r2ts = 0;
	for (int k = 0; k < 3; k++) {
		bool ok = sess_open(&a[k], 2, true, 0, 0);
		CHECK(ok, "attacker session %d", k);
		for (int i = 0; ok && i < 8; i++) {
			struct nkv_sqe s;
			char key[16];
			snprintf(key, sizeof(key), "hold%d-%d", k, i);
			sqe_kv(&s, NKV_KV_STORE, key, BIG, NKV_SGL_TRANSPORT_DATA_BLOCK);
			ok = capsule(&a[k].io, &s, NULL, 0);
		}
	}
	usleep(300000);
	for (int k = 0; k < 3; k++) { /* take the R2Ts that came */
		uint8_t h[24];
		while (recv_pdu(a[k].io.fd, h, NULL, 0, 100) == NKV_TCP_PDU_R2T)
			r2ts++;
	}
	printf("  attacker got %d R2Ts for 24 Stores of %u MiB\n", r2ts, BIG >> 20);
	CHECK(r2ts >= 1, "the attacker got at least one R2T (%d)", r2ts);
	check_victim("R2T hold");
	for (int k = 0; k < 3; k++) {
		long ms = wait_term(a[k].io.fd, NKV_TCP_FES_PDU_SEQUENCE, DEADLINE_MS + 3000);
		printf("  attacker I/O connection %d: C2HTermReq + close after %ld ms\n", k, ms);
		CHECK(ms >= 0, "attacker I/O connection %d ended by C2HTermReq FES 02h within %d ms", k, DEADLINE_MS + 3000);
		sess_close(&a[k]);
	}
	check_victim("after R2T hold");
	check_rss("R2T hold");
}

/* Slowloris and silent peers: a capsule header one byte every 300 ms; a connection that never
 * sends ICReq; one that sends ICReq but no Connect. */
static void case_slowloris(void)
{
	struct sess s; /* keep alive 10 s: neither the Connect nor the idle admin deadline interferes */
	bool ok = sess_open(&s, 5, true, 10000, 0);
	int slow = s.io.fd, mute = tcp_open_from(5, 0), noconn = tcp_open_from(5, 0);
	CHECK(ok && mute >= 0 && noconn >= 0 && icreq(noconn), "slowloris connections");
	uint8_t cap[72] = {NKV_TCP_PDU_CMD, 0, 72, 0, 72};
	uint64_t t0 = now_ms();
	long term = -1;
	for (int i = 0; i < 72 && now_ms() - t0 < (uint64_t)DEADLINE_MS + 3000; i++) {
		send(slow, cap + i, 1, MSG_NOSIGNAL);
		struct pollfd pf = {.fd = slow, .events = POLLIN};
		if (poll(&pf, 1, 300) > 0) {
			term = wait_term(slow, NKV_TCP_FES_PDU_SEQUENCE, 3000);
			break;
		}
	}
	printf("  slowloris: C2HTermReq after %llu ms\n", (unsigned long long)(now_ms() - t0));
	CHECK(term >= 0, "one byte every 300 ms: C2HTermReq FES 02h and close before the capsule is whole");
	long m = wait_closed(mute, DEADLINE_MS + 2000), nc = wait_closed(noconn, DEADLINE_MS + 2000);
	CHECK(m >= 0, "a connection without ICReq closed within %d ms", DEADLINE_MS + 2000);
	CHECK(nc >= 0, "a connection without Connect closed within %d ms", DEADLINE_MS + 2000);
	sess_close(&s);
	close(mute);
	close(noconn);
}

/* Finding 3: 127.0.0.3 stores a 4 MiB value, then asks for it 20 times on a socket it never reads. */
static void case_no_read(void)
{
	struct sess a;
	uint8_t *v = calloc(1, BIG);
	bool ok = sess_open(&a, 3, true, 0, 4096) && store_r2t(&a.io, "big", v, BIG, 3000) >= 0 &&
		  wait_rsp(&a.io, NULL, 0, NULL, 5000) == 0;
	CHECK(ok, "attacker stored a %u MiB value", BIG >> 20);
	for (int i = 0; ok && i < 20; i++) {
		struct nkv_sqe s;
		sqe_kv(&s, NKV_KV_RETRIEVE, "big", BIG, NKV_SGL_TRANSPORT_DATA_BLOCK);
		ok = capsule(&a.io, &s, NULL, 0);
	}
	usleep(500000);
	long peak = rss_kb(dpid);
	printf("  RSS with 20 unread Retrieves of %u MiB: %ld KiB (baseline %ld KiB)\n", BIG >> 20, peak, rss_base);
	CHECK(peak >= 0 && peak <= rss_base + 32 * 1024, "RSS while a host does not read: %ld KiB, bound %ld KiB",
	      peak, rss_base + 32 * 1024);
	check_victim("unread Retrieves");
	usleep((DEADLINE_MS + 1000) * 1000);
	long ms = wait_closed(a.io.fd, 3000);
	CHECK(ms >= 0, "the connection that stopped reading was closed after the send deadline");
	sess_close(&a);
	free(v);
	check_victim("after unread Retrieves");
	check_rss("unread Retrieves");
}

/* Finding 6: 100 connections from 127.0.0.4 (8 allowed per host), idle KATO 0 admin queues,
 * controllers past the per-host limit (4). */
static void case_conn_flood(void)
{
	int fds[100], ok = 0;
	for (int i = 0; i < 100; i++)
		if ((fds[i] = tcp_open_from(4, 0)) >= 0 && icreq(fds[i]))
			ok++;
	printf("  %d of 100 connections from one host served\n", ok);
	CHECK(ok <= 8, "connections served from one host: %d, limit 8", ok);
	check_victim("connection flood");
	for (int i = 0; i < 100; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	usleep(300000);
	struct sess s[5];
	int st[5];
	for (int i = 0; i < 5; i++) {
		struct nkv_cqe q;
		s[i].io.fd = -1;
		s[i].adm.fd = tcp_open_from(6, 0);
		st[i] = s[i].adm.fd >= 0 && icreq(s[i].adm.fd) ? fconnect(&s[i].adm, 0, 0xffff, 0, &q) : -1;
	}
	CHECK(st[0] == 0 && st[3] == 0, "the first 4 controllers of a host: status %#x, %#x", st[0], st[3]);
	CHECK(st[4] == ((NKV_SCT_CMD << 8) | NKV_SC_CONTROLLER_BUSY), "5th controller of one host: %#x, want 181h",
	      st[4]);
	long ms = wait_closed(s[0].adm.fd, DEADLINE_MS + 2000);
	printf("  idle KATO 0 admin queue closed after %ld ms\n", ms);
	CHECK(ms >= 0, "an idle admin queue with KATO 0 closed within %d ms", DEADLINE_MS + 2000);
	for (int i = 0; i < 5; i++)
		sess_close(&s[i]);
	check_rss("connection flood");
}

/* Finding 6: a second daemon with 64 descriptors and max-conns 1000: 80 idle connections. */
static void case_emfile(const char *path)
{
	/* No control server: this case is the NVMe/TCP listener's, and gRPC's own threads would meet
	 * the same descriptor shortage (one CI run saw a UBSan report inside gRPC at EMFILE). */
	static const char *const flags[] = {"--max-conns", "1000", "--max-host-conns", "1000", "--icreq-timeout-ms",
					    "60000", "--tcp-connect-timeout-ms", "60000", "--control", "none", NULL};
	io_port = (int)daemon_free_port();
	pid_t pid = daemon_start(path, old_flags ? NULL : flags, 64);
	CHECK(pid > 0, "second daemon with RLIMIT_NOFILE 64");
	if (pid <= 0)
		return;
	int fds[80];
	for (int i = 0; i < 80; i++)
		fds[i] = tcp_open_from(7, 0); /* the kernel completes them; the daemon cannot accept all */
	usleep(500000);
	long c0 = cpu_ticks(pid);
	usleep(1000000);
	long c1 = cpu_ticks(pid), hz = sysconf(_SC_CLK_TCK);
	long pct = c0 >= 0 && c1 >= 0 ? (c1 - c0) * 100 / hz : -1;
	printf("  daemon CPU at EMFILE: %ld%% of one core\n", pct);
	CHECK(pct >= 0 && pct < 30, "daemon CPU while out of file descriptors: %ld%%, bound 30%%", pct);
	for (int i = 0; i < 80; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	usleep(500000);
	struct sess s;
	uint64_t t0 = now_ms();
	bool ok = sess_open(&s, 1, false, 0, 0);
	long ms = (long)(now_ms() - t0);
	sess_close(&s);
	printf("  new host after the descriptors came back: %s in %ld ms\n", ok ? "connected" : "failed", ms);
	CHECK(ok && ms <= VICTIM_MS, "a new host connects once descriptors are free: %ld ms", ms);
	daemon_stop(pid, 15);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH/TO/rados-nkv\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	old_flags = getenv("TCP_ABUSE_OLD_FLAGS") && atoi(getenv("TCP_ABUSE_OLD_FLAGS"));
	static const char *const flags[] = {
		"--r2t-timeout-ms", "2000", "--pdu-timeout-ms", "2000", "--send-timeout-ms", "2000",
		"--icreq-timeout-ms", "2000", "--tcp-connect-timeout-ms", "2000", "--idle-admin-ms", "2000",
		"--max-host-conns", "8", "--max-host-ctrlrs", "4", NULL};
	io_port = (int)daemon_free_port();
	dpid = daemon_start(argv[1], old_flags ? NULL : flags, 0);
	CHECK(dpid > 0, "daemon %s listening on 127.0.0.1:%d", argv[1], io_port);
	if (dpid > 0) {
		long ms = victim();
		CHECK(ms >= 0, "victim session without an attack: %ld ms", ms);
		rss_base = rss_kb(dpid);
		printf("  baseline: victim %ld ms, RSS %ld KiB\n", ms, rss_base);
		static void (*const cases[])(void) = {case_r2t_hold, case_slowloris, case_no_read, case_conn_flood};
		static const char *const names[] = {"r2t_hold", "slowloris", "no_read", "conn_flood"};
		const char *only = getenv("TCP_ABUSE_CASE");
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			if (only && strcmp(only, names[i]) != 0)
				continue;
			unsigned f = h_fail;
			uint64_t t0 = now_ms();
			printf("== %s\n", names[i]);
			cases[i]();
			printf("== %s: %u failed (%llu ms)\n", names[i], h_fail - f, (unsigned long long)(now_ms() - t0));
		}
		daemon_stop(dpid, 15);
	}
	const char *only = getenv("TCP_ABUSE_CASE");
	if (!only || strcmp(only, "emfile") == 0) {
		unsigned f = h_fail;
		printf("== emfile\n");
		case_emfile(argv[1]);
		printf("== emfile: %u failed\n", h_fail - f);
	}
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
