/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec_bench.c - computational storage (issue 13): reduce a large value inside the OSD with a vendor
 * Exec command (lua.eval_json, a Lua script bound in the daemon's allowlist, that sums the object's
 * 64-bit words and returns the sum as text) against Retrieve of the whole value plus the same sum on
 * the client, in one run on one connection, interleaved (Exec, then Retrieve + sum, N times).
 *
 *   exec_bench --lua-script             print the Lua script for the daemon's configuration
 *                                       ("script_file" of the allowlisted opcode, handler "sum")
 *   exec_bench -a ADDR -p PORT -n NQN [-N NSID] [-o OPCODE] [-s SIZE_MIB] [-i ITERS] [-k KEY]
 *
 * Stores a SIZE MiB value (default 32) under KEY, then runs one unmeasured warm-up of each and ITERS
 * (default 20) measured rounds. Every round checks that both sums equal the one computed when the
 * value was generated. Reports per operation: latency p50/p90 (and for Retrieve + sum the two parts),
 * the payload bytes that reached the host (Exec: the output length; Retrieve: the value length), and
 * the bytes on this process's TCP sockets to the gateway (Linux TCP_INFO tcpi_bytes_received /
 * tcpi_bytes_sent summed over every TCP socket of the process, i.e. libnkv's admin and I/O queue
 * connections: NVMe/TCP PDU headers and data, no TCP/IP headers; keep-alives included).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "nkv/nkv.h"
#include "nkv/nkv_spec.h"
#include "lua_sum.h"

static void print_lua_script(void)
{
	fputs(nkv_lua_sum_script, stdout);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Bytes received and sent on every TCP socket of this process (libnkv's connections). */
static int tcp_bytes(uint64_t *rx, uint64_t *tx)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	*rx = *tx = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		struct stat st;
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		if (e->d_name[0] == '.' || fd == dirfd(d) || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		memset(&ti, 0, sizeof(ti));
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
		    len < offsetof(struct tcp_info, tcpi_bytes_sent) + sizeof(ti.tcpi_bytes_sent))
			continue;
		*rx += ti.tcpi_bytes_received;
		*tx += ti.tcpi_bytes_sent;
		n++;
	}
	closedir(d);
	return n;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}
/* Nearest-rank percentile of @n samples (sorted in place). */
static double pct(double *v, unsigned n, double p)
{
	qsort(v, n, sizeof(*v), cmp_d);
	unsigned k = (unsigned)(p * n + 0.999999);
	return v[k ? k - 1 : 0];
}
static uint64_t median_u64(uint64_t *v, unsigned n)
{
	double d[1024];
	for (unsigned i = 0; i < n; i++)
		d[i] = (double)v[i];
	return (uint64_t)pct(d, n, 0.5);
}

static void usage(void)
{
	fprintf(stderr, "usage: exec_bench --lua-script\n"
			"       exec_bench -a ADDR -p PORT -n NQN [-N NSID] [-o OPCODE] [-s SIZE_MIB] [-i ITERS] [-k KEY]\n");
	exit(64);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"lua-script", no_argument, 0, 'L'}, {0, 0, 0, 0}};
	const char *addr = "127.0.0.1", *port = "4420", *nqn = NULL, *key = "exec-bench";
	unsigned nsid = 1, opc = 0x8a, mib = 32, iters = 20;
	int o;

	while ((o = getopt_long(argc, argv, "a:p:n:N:o:s:i:k:", lo, NULL)) != -1) {
		switch (o) {
		case 'L': print_lua_script(); return 0;
		case 'a': addr = optarg; break;
		case 'p': port = optarg; break;
		case 'n': nqn = optarg; break;
		case 'N': nsid = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'o': opc = (unsigned)strtoul(optarg, NULL, 0); break;
		case 's': mib = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'i': iters = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'k': key = optarg; break;
		default: usage();
		}
	}
	if (!nqn || opc < 0x80 || opc > 0xff || (opc & 3) != NKV_XFER_C2H || !mib || mib > 1024 || !iters ||
	    iters > 1024 || strlen(key) < 1 || strlen(key) > 16)
		usage();

	size_t size = (size_t)mib << 20;
	uint8_t *val = malloc(size), *buf = malloc(size);
	if (!val || !buf)
		return 1;
	uint64_t x = 0x9e3779b97f4a7c15ull; /* xorshift: data the sum cannot shortcut */
	for (size_t i = 0; i < size; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(val + i, &x, 8);
	}
	int64_t want = nkv_lua_sum_local(val, size);

	struct nkv_conn_opts co = {.timeout_ms = 300000};
	struct nkv_ctrl *c;
	struct nkv_qpair *q;
	struct nkv_cpl cpl;
	int rc = nkv_connect(addr, port, nqn, &co, &c);
	if (rc < 0) {
		fprintf(stderr, "exec_bench: connect %s:%s %s: %s\n", addr, port, nqn, strerror(-rc));
		return 1;
	}
	if ((rc = nkv_qpair_create(c, 4, &q)) < 0) {
		fprintf(stderr, "exec_bench: I/O queue: %s\n", strerror(-rc));
		return 1;
	}
	if ((rc = nkv_store(q, nsid, key, (unsigned)strlen(key), val, (uint32_t)size, 0, &cpl)) != 0) {
		fprintf(stderr, "exec_bench: store %u MiB: %s\n", mib, nkv_status_string(cpl.status));
		return 1;
	}

	double *lat_x = calloc(iters, sizeof(double)), *lat_r = calloc(iters, sizeof(double));
	double *lat_rr = calloc(iters, sizeof(double)), *lat_rc = calloc(iters, sizeof(double));
	uint64_t *rx_x = calloc(iters, 8), *tx_x = calloc(iters, 8), *rx_r = calloc(iters, 8), *tx_r = calloc(iters, 8);
	uint32_t out_len = 0;
	unsigned bad = 0;
	int nsock = 0;
	if (!lat_x || !lat_r || !lat_rr || !lat_rc || !rx_x || !tx_x || !rx_r || !tx_r)
		return 1;

	for (unsigned it = 0; it <= iters; it++) { /* round 0: warm-up, not counted */
		uint64_t r0, t0, r1, t1;
		char out[64];
		struct nkv_sqe s;

		/* (a) Exec: the OSD sums; a 64-byte host buffer gets the decimal text */
		memset(&s, 0, sizeof(s));
		nkv_sqe_exec(&s, (uint8_t)opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), sizeof(out) - 1, NULL, 0);
		memset(out, 0, sizeof(out));
		nsock = tcp_bytes(&r0, &t0);
		double a = now_ms();
		rc = nkv_exec(q, &s, out, sizeof(out) - 1, &cpl);
		double b = now_ms();
		tcp_bytes(&r1, &t1);
		if (rc != 0) {
			fprintf(stderr, "exec_bench: Exec %02xh: %s (DW0 %u)\n", opc, nkv_status_string(cpl.status), cpl.dw0);
			return 1;
		}
		int64_t got_x = strtoll(out, NULL, 10);
		out_len = cpl.xfer;
		if (it) {
			lat_x[it - 1] = b - a;
			rx_x[it - 1] = r1 - r0;
			tx_x[it - 1] = t1 - t0;
		}

		/* (b) Retrieve the whole value, then the same sum here */
		tcp_bytes(&r0, &t0);
		a = now_ms();
		uint32_t vs = 0;
		rc = nkv_retrieve(q, nsid, key, (unsigned)strlen(key), buf, (uint32_t)size, &vs, &cpl);
		double m = now_ms();
		int64_t got_r = nkv_lua_sum_local(buf, cpl.xfer);
		b = now_ms();
		tcp_bytes(&r1, &t1);
		if (rc != 0 || vs != size || cpl.xfer != size) {
			fprintf(stderr, "exec_bench: Retrieve: %s (%u of %zu bytes)\n", nkv_status_string(cpl.status), cpl.xfer, size);
			return 1;
		}
		if (it) {
			lat_r[it - 1] = b - a;
			lat_rr[it - 1] = m - a;
			lat_rc[it - 1] = b - m;
			rx_r[it - 1] = r1 - r0;
			tx_r[it - 1] = t1 - t0;
		}
		if (got_x != want || got_r != want) {
			fprintf(stderr, "exec_bench: round %u: OSD sum '%s', client sum %" PRId64 ", expected %" PRId64 "\n", it,
				out, got_r, want);
			bad++;
		}
	}
	nkv_delete(q, nsid, key, (unsigned)strlen(key), &cpl);
	nkv_qpair_destroy(q);
	nkv_disconnect(c);

	double xp50 = pct(lat_x, iters, 0.5), xp90 = pct(lat_x, iters, 0.9);
	double rp50 = pct(lat_r, iters, 0.5), rp90 = pct(lat_r, iters, 0.9);
	double rrp50 = pct(lat_rr, iters, 0.5), rrp90 = pct(lat_rr, iters, 0.9);
	double rcp50 = pct(lat_rc, iters, 0.5), rcp90 = pct(lat_rc, iters, 0.9);
	uint64_t mrx_x = median_u64(rx_x, iters), mtx_x = median_u64(tx_x, iters);
	uint64_t mrx_r = median_u64(rx_r, iters), mtx_r = median_u64(tx_r, iters);

	printf("value %u MiB, key '%s', NSID %u, Exec opcode %02xh; %u rounds (after 1 warm-up), interleaved; "
	       "%d TCP socket(s) counted\n", mib, key, nsid, opc, iters, nsock);
	printf("sum %" PRId64 ": OSD and client agree in %u of %u rounds\n\n", want, iters + 1 - bad, iters + 1);
	printf("| per operation | Exec (sum in the OSD) | Retrieve + sum on the client | ratio Exec / Retrieve+sum |\n");
	printf("|---|---:|---:|---:|\n");
	printf("| latency p50 (ms) | %.1f | %.1f (retrieve %.1f + sum %.1f) | %.2f |\n", xp50, rp50, rrp50, rcp50,
	       xp50 / rp50);
	printf("| latency p90 (ms) | %.1f | %.1f (retrieve %.1f + sum %.1f) | %.2f |\n", xp90, rp90, rrp90, rcp90,
	       xp90 / rp90);
	printf("| payload to the host (bytes) | %u | %zu | %.2g |\n", out_len, size, (double)out_len / (double)size);
	printf("| TCP bytes gateway -> host (median) | %" PRIu64 " | %" PRIu64 " | %.2g |\n", mrx_x, mrx_r,
	       (double)mrx_x / (double)mrx_r);
	printf("| TCP bytes host -> gateway (median) | %" PRIu64 " | %" PRIu64 " | %.2g |\n", mtx_x, mtx_r,
	       (double)mtx_x / (double)mtx_r);
	printf("\nJSON {\"size\": %zu, \"iters\": %u, \"exec_p50_ms\": %.3f, \"exec_p90_ms\": %.3f, "
	       "\"retrieve_sum_p50_ms\": %.3f, \"retrieve_sum_p90_ms\": %.3f, \"retrieve_p50_ms\": %.3f, "
	       "\"sum_p50_ms\": %.3f, \"exec_payload\": %u, \"retrieve_payload\": %zu, \"exec_tcp_rx\": %" PRIu64
	       ", \"exec_tcp_tx\": %" PRIu64 ", \"retrieve_tcp_rx\": %" PRIu64 ", \"retrieve_tcp_tx\": %" PRIu64
	       ", \"mismatches\": %u}\n",
	       size, iters, xp50, xp90, rp50, rp90, rrp50, rcp50, out_len, size, mrx_x, mtx_x, mrx_r, mtx_r, bad);
	free(val);
	free(buf);
	return bad ? 1 : 0;
}
