/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - the Prometheus text exposition (format 0.0.4) of the target's metrics snapshot
 * (nkv_target_metrics, nkv_target_transport_metrics, nkv_target_connections). The HTTP side is
 * metrics_http.c; this file only turns numbers into text, so it knows nothing of sockets.
 *
 * The text format wants every line of a metric family together, under its HELP and TYPE lines, but
 * the snapshot comes namespace by namespace: each family gets its own buffer, each namespace
 * appends to all of them, and the buffers are joined at the end. A scrape is bounded: a namespace
 * whose lines would take the text past its limit is rolled back, and it and the ones after it are
 * counted in rados_nkv_metrics_namespaces_omitted instead.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon.h"
#include "nkv/nkv_version.h"

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_vadd(struct sbuf *b, const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, aq);
	va_end(aq);
	if (n < 0 || b->oom)
		return;
	if (b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->oom = true;
			return;
		}
		b->p = q;
		b->cap = cap;
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_vadd(b, fmt, ap);
	va_end(ap);
}

/* A label value as the text format wants it: backslash, double quote and newline escaped. NQNs are
 * printable ASCII, but the format must hold whatever a subsystem was named. */
static const char *esc(const char *s, char *out, size_t n)
{
	size_t o = 0;

	for (; *s && o + 3 < n; s++) {
		if (*s == '\\' || *s == '"') {
			out[o++] = '\\';
			out[o++] = *s;
		} else if (*s == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *s;
		}
	}
	out[o] = '\0';
	return out;
}

/* The metric families, in the order they are written. */
enum fam {
	F_CMDS, F_RBYTES, F_WBYTES, F_LAT, F_INFLIGHT, F_USED, F_MAXVAL, F_RO, /* per namespace */
	F_C_USED, F_C_KEYS, F_C_PINNED, F_C_PINNED_KEYS, F_C_CAP, F_C_CAP_KEYS, F_C_QUOTA,  /* per cache namespace */
	F_C_EVICT, F_C_EVICT_BYTES, F_C_EXPIRE, F_C_EXPIRE_BYTES, F_C_BYTE_H, F_C_TOKEN_H,
	F_C_LEASE, F_C_GATEWAYS,
	F_EV_PUB, F_EV_DROP, F_EV_ERR, F_EV_QUEUED,                             /* the event publisher */
	F_CTRLRS, F_IOQ,                                                       /* per subsystem and transport */
	F_TR_CONNS, F_TR_QD, F_TR_DATA, F_TR_COPIED, F_TR_WAITS, F_TR_KICKS, F_TR_IRQS, /* per transport */
	F_P_CPU, F_P_RSS, F_P_VSZ, F_P_FDS, F_P_MAXFDS, F_P_START,            /* the process */
	F_OMITTED, F_BUILD,
	F_COUNT
};

static const struct {
	const char *name, *type, *help;
} g_fam[F_COUNT] = {
	[F_CMDS] = {"rados_nkv_commands_total", "counter",
		    "Commands completed on a namespace, by opcode and status class (success for every opcode; "
		    "other classes once seen)."},
	[F_RBYTES] = {"rados_nkv_read_bytes_total", "counter",
		      "Bytes sent to hosts by successful commands (values, value ranges, key lists, Exec output)."},
	[F_WBYTES] = {"rados_nkv_written_bytes_total", "counter",
		      "Bytes received from hosts by successful commands (stored values, Exec input)."},
	[F_LAT] = {"rados_nkv_command_latency_seconds", "histogram",
		   "Command latency from parse to completion, by opcode group (store; retrieve with Retrieve "
		   "Range; other)."},
	[F_INFLIGHT] = {"rados_nkv_namespace_in_flight", "gauge", "Commands parsed and not yet completed."},
	[F_USED] = {"rados_nkv_namespace_used_bytes", "gauge",
		    "Bytes in use as the backend reports them (rados: the whole pool), refreshed every few seconds."},
	[F_MAXVAL] = {"rados_nkv_namespace_max_value_bytes", "gauge", "Largest value a Store may write (KVVML)."},
	[F_RO] = {"rados_nkv_namespace_read_only", "gauge", "1 when the namespace is read-only."},
	[F_C_USED] = {"rados_nkv_cache_used_bytes", "gauge",
		      "Bytes of the cache's entries, every gateway's together (expired ones until they are removed)."},
	[F_C_KEYS] = {"rados_nkv_cache_keys", "gauge", "Entries in the cache, every gateway's together."},
	[F_C_PINNED] = {"rados_nkv_cache_pinned_bytes", "gauge", "Bytes of pinned (explicit) entries."},
	[F_C_PINNED_KEYS] = {"rados_nkv_cache_pinned_keys", "gauge", "Pinned (explicit) entries."},
	[F_C_CAP] = {"rados_nkv_cache_capacity_bytes", "gauge",
		     "The policy's capacity: automatic entries are evicted above it (0: no byte limit)."},
	[F_C_CAP_KEYS] = {"rados_nkv_cache_capacity_keys", "gauge",
			  "The policy's capacity in entries (0: no key limit)."},
	[F_C_QUOTA] = {"rados_nkv_cache_pin_quota_bytes", "gauge",
		       "The policy's pin quota: pinned bytes at most (0: no quota)."},
	[F_C_EVICT] = {"rados_nkv_cache_evictions_total", "counter", "Automatic entries evicted."},
	[F_C_EVICT_BYTES] = {"rados_nkv_cache_evicted_bytes_total", "counter", "Bytes of the entries evicted."},
	[F_C_EXPIRE] = {"rados_nkv_cache_expirations_total", "counter", "Expired entries removed."},
	[F_C_EXPIRE_BYTES] = {"rados_nkv_cache_expired_bytes_total", "counter", "Bytes of the expired entries removed."},
	[F_C_BYTE_H] = {"rados_nkv_cache_pinned_byte_hours", "gauge",
			"Pinned byte-hours charged: size x TTL at each pin, less the part refunded when a pinned entry "
			"is replaced or deleted before it expires (so it can go down)."},
	[F_C_TOKEN_H] = {"rados_nkv_cache_pinned_token_hours", "gauge",
			 "Pinned token-hours: byte-hours / the policy's bytes_per_token (only where that is set)."},
	[F_C_LEASE] = {"rados_nkv_cache_eviction_lease", "gauge",
		       "1 when this gateway holds the namespace's eviction lease (it evicts and removes expired entries)."},
	[F_C_GATEWAYS] = {"rados_nkv_cache_gateways", "gauge", "Gateways that reported usage for the namespace."},
	[F_EV_PUB] = {"rados_nkv_cache_events_published_total", "counter",
		      "Cache events (BlockRemoved) sent on the --events socket."},
	[F_EV_DROP] = {"rados_nkv_cache_events_dropped_total", "counter",
		       "Cache events lost before sending: the queue to the events thread was full (or the RADOS "
		       "namespace name was 256 bytes or longer)."},
	[F_EV_ERR] = {"rados_nkv_cache_events_send_errors_total", "counter", "Cache events ZMQ refused to send."},
	[F_EV_QUEUED] = {"rados_nkv_cache_events_queued", "gauge", "Cache events waiting to be sent."},
	[F_CTRLRS] = {"rados_nkv_controllers", "gauge", "Controllers (host associations) of a subsystem, by transport."},
	[F_IOQ] = {"rados_nkv_io_queues", "gauge", "I/O queues connected to a subsystem's controllers, by transport."},
	[F_TR_CONNS] = {"rados_nkv_transport_connections", "gauge",
			"tcp: connections open (every queue, discovery too); shm: controllers live."},
	[F_TR_QD] = {"rados_nkv_transport_queue_depth", "gauge",
		     "I/O commands a transport holds: received and not yet answered."},
	[F_TR_DATA] = {"rados_nkv_data_bytes_total", "counter",
		       "Data bytes that successful I/O commands moved between hosts and this gateway, by transport and "
		       "direction (h2c: to the gateway, Store; c2h: to the host, Retrieve)."},
	[F_TR_COPIED] = {"rados_nkv_copied_bytes_total", "counter",
			 "Bytes of I/O commands' data copied from one buffer into another in the gateway's memory, by "
			 "the gateway or by librados' C API on its behalf, by transport and direction."},
	[F_TR_WAITS] = {"rados_nkv_transport_waits_total", "counter",
			"Times a transport thread (tcp: a reactor; shm: a poller, vfio-user's too) went to wait in the "
			"kernel for work. The command that ends a wait pays a thread wake-up: compared with the commands, "
			"it says how many do."},
	[F_TR_KICKS] = {"rados_nkv_transport_kicks_total", "counter",
			"shm: doorbell kicks from hosts that woke a waiting poller."},
	[F_TR_IRQS] = {"rados_nkv_transport_interrupts_total", "counter",
		       "shm: interrupts sent to hosts (eventfd writes for completion queues they armed)."},
	/* The process collector's families, as Prometheus' client libraries name them */
	[F_P_CPU] = {"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."},
	[F_P_RSS] = {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes."},
	[F_P_VSZ] = {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."},
	[F_P_FDS] = {"process_open_fds", "gauge", "Number of open file descriptors."},
	[F_P_MAXFDS] = {"process_max_fds", "gauge", "Maximum number of open file descriptors."},
	[F_P_START] = {"process_start_time_seconds", "gauge",
		       "Start time of the process since unix epoch in seconds."},
	[F_OMITTED] = {"rados_nkv_metrics_namespaces_omitted", "gauge",
		       "Namespaces left out of this scrape because it reached its size limit."},
	[F_BUILD] = {"rados_nkv_build_info", "gauge", "The daemon's version (value 1)."},
};

/* "0.000008", "8.388608": a bucket bound in seconds, exactly (bounds are whole microseconds). */
static void le_str(uint64_t us, char *out, size_t n)
{
	if (us == UINT64_MAX) {
		snprintf(out, n, "+Inf");
		return;
	}
	int len = snprintf(out, n, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
	while (len > 2 && out[len - 1] == '0' && out[len - 2] != '.')
		out[--len] = '\0';
}

/* The figures of a cache namespace (nkv_ns_metrics.cache): the whole namespace's, as this gateway last
 * read them, so every gateway serving it reports the same totals; the lease is this gateway's own. */
static void render_cache(struct sbuf *f, const char *lbl, const struct nkv_cache_usage *u)
{
	const struct {
		enum fam fam;
		uint64_t v;
	} n[] = {
		{F_C_USED, u->used_bytes}, {F_C_KEYS, u->keys}, {F_C_PINNED, u->pinned_bytes},
		{F_C_PINNED_KEYS, u->pinned_keys}, {F_C_CAP, u->policy.capacity_bytes},
		{F_C_CAP_KEYS, u->policy.capacity_keys}, {F_C_QUOTA, u->policy.pin_quota_bytes},
		{F_C_EVICT, u->evictions}, {F_C_EVICT_BYTES, u->evicted_bytes}, {F_C_EXPIRE, u->expirations},
		{F_C_EXPIRE_BYTES, u->expired_bytes}, {F_C_LEASE, u->evicting ? 1 : 0}, {F_C_GATEWAYS, u->gateways},
	};

	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
		sb_add(&f[n[i].fam], "%s{%s} %" PRIu64 "\n", g_fam[n[i].fam].name, lbl, n[i].v);
	/* %.17g: a double printed back exactly; Prometheus parses the same float. */
	sb_add(&f[F_C_BYTE_H], "%s{%s} %.17g\n", g_fam[F_C_BYTE_H].name, lbl, u->byte_hours);
	if (u->policy.bytes_per_token)
		sb_add(&f[F_C_TOKEN_H], "%s{%s} %.17g\n", g_fam[F_C_TOKEN_H].name, lbl, u->token_hours);
}

static void render_ns(struct sbuf *f, const struct nkv_ns_metrics *m)
{
	char nqn[512], lbl[600];

	snprintf(lbl, sizeof(lbl), "subsystem=\"%s\",nsid=\"%" PRIu32 "\"", esc(m->subnqn, nqn, sizeof(nqn)), m->nsid);
	for (unsigned o = 0; o < NKV_MOP_COUNT; o++)
		for (unsigned s = 0; s < NKV_MST_COUNT; s++)
			if (s == NKV_MST_SUCCESS || m->cmds[o][s])
				sb_add(&f[F_CMDS], "%s{%s,opcode=\"%s\",status=\"%s\"} %" PRIu64 "\n", g_fam[F_CMDS].name, lbl,
				       nkv_metric_op_name(o), nkv_metric_status_name(s), m->cmds[o][s]);
	/* Bytes only where the opcode can move them that way (or did: an unknown opcode's data). */
	for (unsigned o = 0; o < NKV_MOP_COUNT; o++) {
		bool rd = o == NKV_MOP_RETRIEVE || o == NKV_MOP_RETRIEVE_RANGE || o == NKV_MOP_LIST || o == NKV_MOP_EXEC;
		bool wr = o == NKV_MOP_STORE || o == NKV_MOP_EXEC;
		if (rd || m->bytes_read[o])
			sb_add(&f[F_RBYTES], "%s{%s,opcode=\"%s\"} %" PRIu64 "\n", g_fam[F_RBYTES].name, lbl,
			       nkv_metric_op_name(o), m->bytes_read[o]);
		if (wr || m->bytes_written[o])
			sb_add(&f[F_WBYTES], "%s{%s,opcode=\"%s\"} %" PRIu64 "\n", g_fam[F_WBYTES].name, lbl,
			       nkv_metric_op_name(o), m->bytes_written[o]);
	}
	static const char *const groups[NKV_MLAT_COUNT] = {"store", "retrieve", "other"};
	for (unsigned g = 0; g < NKV_MLAT_COUNT; g++) {
		uint64_t cum = 0;
		char le[32];
		for (unsigned b = 0; b < NKV_MLAT_BUCKETS; b++) {
			cum += m->lat[g][b];
			le_str(nkv_metric_lat_bound_us(b), le, sizeof(le));
			sb_add(&f[F_LAT], "%s_bucket{%s,op_group=\"%s\",le=\"%s\"} %" PRIu64 "\n", g_fam[F_LAT].name, lbl,
			       groups[g], le, cum);
		}
		sb_add(&f[F_LAT], "%s_sum{%s,op_group=\"%s\"} %" PRIu64 ".%09" PRIu64 "\n", g_fam[F_LAT].name, lbl,
		       groups[g], m->lat_sum_ns[g] / 1000000000u, m->lat_sum_ns[g] % 1000000000u);
		sb_add(&f[F_LAT], "%s_count{%s,op_group=\"%s\"} %" PRIu64 "\n", g_fam[F_LAT].name, lbl, groups[g], cum);
	}
	sb_add(&f[F_INFLIGHT], "%s{%s} %" PRIu64 "\n", g_fam[F_INFLIGHT].name, lbl, m->in_flight);
	sb_add(&f[F_USED], "%s{%s} %" PRIu64 "\n", g_fam[F_USED].name, lbl, m->used);
	sb_add(&f[F_MAXVAL], "%s{%s} %" PRIu64 "\n", g_fam[F_MAXVAL].name, lbl, m->max_value);
	sb_add(&f[F_RO], "%s{%s} %d\n", g_fam[F_RO].name, lbl, m->read_only ? 1 : 0);
	if (m->cache)
		render_cache(f, lbl, &m->cache_usage);
}

/* Subsystems that show up in the snapshot (with namespaces or controllers), each once, in order. */
static unsigned subsystems(const struct nkv_ns_metrics *ns, int nns, const struct nkv_conn_info *cn, int ncn,
			   const char **out, unsigned max)
{
	unsigned n = 0;

	for (int i = 0; i < nns + ncn; i++) {
		const char *nqn = i < nns ? ns[i].subnqn : cn[i - nns].subnqn;
		bool seen = n && strcmp(out[n - 1], nqn) == 0; /* both lists come grouped by subsystem */
		for (unsigned k = 0; k < n && !seen; k++)
			seen = strcmp(out[k], nqn) == 0;
		if (!seen && n < max)
			out[n++] = nqn;
	}
	return n;
}

/* The event publisher (--events), when there is one. Set before the metrics server starts and cleared
 * after it stops (main.c), so a plain pointer pair is enough. */
static void (*g_events_read)(void *arg, struct events_counts *c);
static void *g_events_arg;

void metrics_set_events(void (*read)(void *arg, struct events_counts *c), void *arg)
{
	g_events_read = read;
	g_events_arg = arg;
}

static void render_events(struct sbuf *f)
{
	struct events_counts c;

	if (!g_events_read)
		return;
	g_events_read(g_events_arg, &c);
	sb_add(&f[F_EV_PUB], "%s %" PRIu64 "\n", g_fam[F_EV_PUB].name, c.published);
	sb_add(&f[F_EV_DROP], "%s %" PRIu64 "\n", g_fam[F_EV_DROP].name, c.dropped);
	sb_add(&f[F_EV_ERR], "%s %" PRIu64 "\n", g_fam[F_EV_ERR].name, c.send_errors);
	sb_add(&f[F_EV_QUEUED], "%s %" PRIu64 "\n", g_fam[F_EV_QUEUED].name, c.queued);
}

/* The first line of @path into @buf. @return true if one was read. */
static bool read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	bool ok = f && fgets(buf, (int)n, f);

	if (f)
		fclose(f);
	return ok;
}

/* The process families, from getrusage, getrlimit and /proc (a family that cannot be read is left
 * out). The start time is the kernel's: the process's start in clock ticks after boot, plus boot. */
static void render_process(struct sbuf *f)
{
	struct rusage ru;
	struct rlimit rl;
	char line[1024];
	unsigned long long vsz, rss, start;
	long page = sysconf(_SC_PAGESIZE), hz = sysconf(_SC_CLK_TCK);

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		sb_add(&f[F_P_CPU], "%s %.6f\n", g_fam[F_P_CPU].name,
		       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	if (read_line("/proc/self/statm", line, sizeof(line)) && sscanf(line, "%llu %llu", &vsz, &rss) == 2 && page > 0) {
		sb_add(&f[F_P_RSS], "%s %llu\n", g_fam[F_P_RSS].name, rss * (unsigned long long)page);
		sb_add(&f[F_P_VSZ], "%s %llu\n", g_fam[F_P_VSZ].name, vsz * (unsigned long long)page);
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		unsigned long long n = 0;
		for (struct dirent *e; (e = readdir(d));)
			n += e->d_name[0] != '.';
		closedir(d);
		sb_add(&f[F_P_FDS], "%s %llu\n", g_fam[F_P_FDS].name, n ? n - 1 : 0); /* less the one reading it */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		sb_add(&f[F_P_MAXFDS], "%s %llu\n", g_fam[F_P_MAXFDS].name, (unsigned long long)rl.rlim_cur);
	/* /proc/self/stat: "pid (comm) state ..." with starttime the 20th field after the comm, whose
	 * name may hold spaces and parentheses: parse from the last ')'. */
	unsigned long long btime = 0;
	FILE *st = fopen("/proc/stat", "re");
	while (st && fgets(line, sizeof(line), st))
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	if (st)
		fclose(st);
	char *p = read_line("/proc/self/stat", line, sizeof(line)) ? strrchr(line, ')') : NULL;
	if (p && btime && hz > 0 &&
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) == 1)
		sb_add(&f[F_P_START], "%s %.2f\n", g_fam[F_P_START].name, (double)btime + (double)start / (double)hz);
}

int metrics_render(struct nkv_target *tgt, size_t max_bytes, char **out, size_t *len)
{
	struct sbuf f[F_COUNT] = {0}, all = {0};
	struct nkv_ns_metrics *ns = NULL;
	struct nkv_conn_info *cn = NULL;
	struct nkv_transport_metrics tr[8];
	const char **ss = NULL;
	char esc_buf[512];
	int nns, ncn, ntr, rc = 0;
	unsigned nss = 0, omitted = 0;

	*out = NULL;
	*len = 0;
	if ((nns = nkv_target_metrics(tgt, &ns)) < 0)
		return nns;
	if ((ncn = nkv_target_connections(tgt, NULL, &cn)) < 0) {
		free(ns);
		return ncn;
	}
	ntr = nkv_target_transport_metrics(tgt, tr, 8);
	ntr = ntr < 8 ? ntr : 8;
	if (!(ss = calloc((size_t)(nns + ncn) + 1, sizeof(*ss)))) {
		rc = -ENOMEM;
		goto out;
	}
	nss = subsystems(ns, nns, cn, ncn, ss, (unsigned)(nns + ncn));

	/* What does not grow with namespaces first: subsystems x transports, transports, build. */
	for (unsigned s = 0; s < nss; s++)
		for (int t = 0; t < ntr; t++) {
			uint64_t ctrls = 0, ioq = 0;
			for (int i = 0; i < ncn; i++)
				if (strcmp(cn[i].subnqn, ss[s]) == 0 && strcmp(cn[i].transport, tr[t].name) == 0) {
					ctrls++;
					ioq += cn[i].io_queues;
				}
			esc(ss[s], esc_buf, sizeof(esc_buf));
			sb_add(&f[F_CTRLRS], "%s{subsystem=\"%s\",transport=\"%s\"} %" PRIu64 "\n", g_fam[F_CTRLRS].name,
			       esc_buf, tr[t].name, ctrls);
			sb_add(&f[F_IOQ], "%s{subsystem=\"%s\",transport=\"%s\"} %" PRIu64 "\n", g_fam[F_IOQ].name, esc_buf,
			       tr[t].name, ioq);
		}
	for (int t = 0; t < ntr; t++) {
		sb_add(&f[F_TR_CONNS], "%s{transport=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_CONNS].name, tr[t].name,
		       tr[t].connections);
		sb_add(&f[F_TR_QD], "%s{transport=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_QD].name, tr[t].name, tr[t].queue_depth);
		sb_add(&f[F_TR_WAITS], "%s{transport=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_WAITS].name, tr[t].name,
		       tr[t].waits);
		if (!tr[t].notifies)
			continue;
		sb_add(&f[F_TR_KICKS], "%s{transport=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_KICKS].name, tr[t].name,
		       tr[t].kicks);
		sb_add(&f[F_TR_IRQS], "%s{transport=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_IRQS].name, tr[t].name,
		       tr[t].interrupts);
	}
	struct nkv_copy_metrics cp[4];
	int ncp = nkv_target_copy_metrics(tgt, cp, 4);
	for (int x = 0; x < ncp && x < 4; x++)
		for (int d = 0; d < 2; d++) {
			const char *dir = d ? "c2h" : "h2c";
			sb_add(&f[F_TR_DATA], "%s{transport=\"%s\",dir=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_DATA].name,
			       cp[x].transport, dir, cp[x].data[d]);
			sb_add(&f[F_TR_COPIED], "%s{transport=\"%s\",dir=\"%s\"} %" PRIu64 "\n", g_fam[F_TR_COPIED].name,
			       cp[x].transport, dir, cp[x].copied[d]);
		}
	sb_add(&f[F_BUILD], "%s{version=\"%s\"} 1\n", g_fam[F_BUILD].name, NKV_VERSION_STRING);
	render_events(f);
	render_process(f);

	size_t total = 0;
	for (unsigned i = 0; i < F_COUNT; i++)
		total += strlen(g_fam[i].name) * 2 + strlen(g_fam[i].help) + strlen(g_fam[i].type) + 16 + f[i].len;
	total += 64; /* the omitted gauge's line */
	for (int i = 0; i < nns; i++) {
		size_t mark[F_COUNT], before = 0, after = 0;
		for (unsigned k = 0; k < F_COUNT; k++) {
			mark[k] = f[k].len;
			before += f[k].len;
		}
		render_ns(f, &ns[i]);
		for (unsigned k = 0; k < F_COUNT; k++)
			after += f[k].len;
		if (total + (after - before) > max_bytes) { /* roll this one back: the rest is omitted */
			for (unsigned k = 0; k < F_COUNT; k++) {
				f[k].len = mark[k];
				if (f[k].p)
					f[k].p[mark[k]] = '\0';
			}
			omitted = (unsigned)(nns - i);
			break;
		}
		total += after - before;
	}
	sb_add(&f[F_OMITTED], "%s %u\n", g_fam[F_OMITTED].name, omitted);

	for (unsigned i = 0; i < F_COUNT; i++) {
		if (!f[i].len)
			continue; /* a family with no samples (no transport yet, no namespace) is left out */
		sb_add(&all, "# HELP %s %s\n# TYPE %s %s\n", g_fam[i].name, g_fam[i].help, g_fam[i].name, g_fam[i].type);
		sb_add(&all, "%s", f[i].p);
	}
	for (unsigned i = 0; i < F_COUNT; i++)
		if (f[i].oom)
			all.oom = true;
	if (all.oom) {
		rc = -ENOMEM;
		free(all.p);
	} else {
		*out = all.p;
		*len = all.len;
	}
out:
	for (unsigned i = 0; i < F_COUNT; i++)
		free(f[i].p);
	free(ss);
	free(ns);
	free(cn);
	return rc;
}
