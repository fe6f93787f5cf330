/* SPDX-License-Identifier: Apache-2.0 */
/*
 * suite.c - the fault suite: one fault per run, under load, against a rados-nkv daemon the test
 * starts, every scenario checking the same invariant (faults.h):
 *   - every Store acknowledged before or during the fault reads back intact afterwards: each value
 *     read during the load and each key read at the end is the last acknowledged version or a later
 *     Store whose outcome was open (82h, connection lost), never older, never torn ("lost" = 0);
 *   - every command completes with success or a documented status (82h Namespace Not Ready, Host
 *     Pathing Error when the connection went; 87h for a key never stored) within the op timeout +
 *     GRACE_MS, measured per command (the longest is printed);
 *   - the daemon's VmRSS and descriptor count come back to their baseline (sampled idle, after a
 *     warm-up, before and after the fault), and it exits 0 on SIGTERM (LeakSanitizer in asan builds).
 * Scenarios (the quick tier runs in CI; --long is the long tier, scripts/faults-long.sh):
 *   osd      the OSD killed (SIGKILL) under 4 KiB-4 MiB values for 10 s (--long 20 s), restarted;
 *            needs a --durable (bluestore) cluster
 *   mon      the monitor killed for 8 s (--long 20 s), restarted
 *   both     monitor and OSD killed together for 20 s, restarted monitor first (long tier only)
 *   gateway  the daemon itself killed (SIGKILL) with Stores in flight and restarted on the same port,
 *            2 times (--long 10); hosts reconnect (--backend mem loses everything at each restart: the
 *            suite must then report lost values, which shows that it can)
 *   host     hosts that vanish mid-transfer while others work: a raw NVMe/TCP host that sends half of
 *            a Store's data and resets or closes, a shared-memory host killed with Retrieves in
 *            flight into its memory (6 and 4 times; --long 100 and 50)
 *   netem    netem delay 100 ms, loss 5 % between the daemon and the cluster for 10 s (--long 120 s),
 *            then removed (test/faults/netem.sh sets up the namespace and runs this)
 *   soak     64 connections x QD 16, 4 KiB-1 MiB, 60 s (--long 10 min), RSS and descriptors sampled
 *            every second: flat
 *   replica  one OSD of three (osd.1) killed (SIGKILL) under load for 10 s (--long 30 s) on the size-3
 *            min_size-2 pool: no command may fail at all; every value read back with the OSD down and
 *            again after it came back; the time until the monitor marked it down, the longest command
 *   ec       the same on the erasure-coded pool (k=2, m=1, min_size 2: one OSD down leaves k)
 *   hang     replica with osd.1 paused (SIGSTOP) instead: its connections stay open, so only missed
 *            heartbeats get it marked down (ceph-dev.sh --osds tunes them to seconds); then resumed
 *            (both need scripts/ceph-dev.sh start --osds 3 --ec-pool NAME; test/faults/topology.sh)
 *   selftest the value format and the ledger against torn, stale, foreign and lost values (no daemon)
 * Each prints a RESULT line: Stores acknowledged and failed (by status), reads verified, the final
 * read-back (keys, verified, lost, unread), the longest command, RSS and descriptors before/after;
 * then "N passed, N failed".
 * Usage: fault_suite SCENARIO --daemon PATH/rados-nkv [--long] [--backend rados|mem] [--cache]
 * --cache (osd, mon, both): namespace 1 is a cache namespace (TTLs, records, shares, the lease and the
 * reaper at work; no capacity, so nothing may be evicted and the invariant is unchanged).
 * The cluster comes from scripts/ceph-dev.sh env (NKV_CEPH_*); without one: 77, or 1 with
 * NKV_REQUIRE_RADOS=1. --backend applies to gateway, host and soak (default rados).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults.h"
#include "hosts.h"
#include "nkv/nkv.h"

unsigned h_pass, h_fail;

#define GRACE_MS 2000       /* allowed past the op timeout, for every command */
#define FD_SLACK 2          /* descriptors after vs before (librados may hold a second socket) */
#define RSS_SLACK_KB (32 * 1024)

static struct {
	const char *bin, *backend;
	bool lng;
	const char *cache; /* --cache: namespace 1 is a cache namespace (this "cache" object) */
} O = {.backend = "rados"};

static const uint32_t MIXED[] = {4096, 65536, 1u << 20, 4u << 20}; /* 4 KiB-4 MiB */

static void sleep_ms(unsigned ms)
{
	usleep(ms * 1000u);
}

/* ---- one run: a daemon, a load, its baseline, its end ------------------------------------------- */

struct run {
	const char *name;
	struct gw g;
	struct load_conf lc;
	struct load *l;
	long rss0, rss1, rss_bound; /* KiB */
	int fd0, fd1;
	bool no_failures;           /* other hosts must see no failed command at all */
};

static unsigned op_bound_ms(const struct run *r)
{
	return r->g.op_timeout_s * 1000 + GRACE_MS;
}

/* Sample RSS and descriptors once they are within bounds (memory goes back over a few reactor
 * ticks and allocator releases), at most 5 s. */
static void sample(const struct run *r, long *rss, int *fds, long rss_bound, int fd_bound)
{
	for (int i = 0; i < 50; i++) {
		*rss = proc_rss_kb(r->g.pid);
		*fds = proc_fds(r->g.pid);
		if (rss_bound <= 0 || (*rss <= rss_bound && *fds <= fd_bound))
			return;
		sleep_ms(100);
	}
}

/* Daemon up, a warm-up load, then the idle baseline; the load starts again. */
static bool run_begin(struct run *r, const char *name, unsigned warm_ms)
{
	r->name = name;
	printf("== %s: daemon %s (%s backend), %u workers x QD %u, %u keys each, Stores %u%%, op timeout %u s\n", name,
	       O.bin, r->g.backend, r->lc.workers, r->lc.qd, r->lc.keys, r->lc.store_pct, r->g.op_timeout_s);
	r->lc.addr = r->g.addr;
	r->lc.port = r->g.port;
	r->lc.bound_ms = op_bound_ms(r);
	if (!r->lc.hang_ms)
		r->lc.hang_ms = r->lc.bound_ms + 10000;
	int rc = gw_start(&r->g);
	CHECK(rc == 0, "%s: the daemon starts", name);
	if (rc)
		return false;
	r->l = load_create(&r->lc);
	load_run(r->l);
	sleep_ms(warm_ms);
	load_halt(r->l);
	sleep_ms(1000);
	sample(r, &r->rss0, &r->fd0, 0, 0);
	if (!r->rss_bound)
		r->rss_bound = r->rss0 + (r->rss0 / 5 > RSS_SLACK_KB ? r->rss0 / 5 : RSS_SLACK_KB);
	printf("%s: baseline after a %u ms warm-up: RSS %.1f MiB, %d descriptors\n", name, warm_ms, r->rss0 / 1024.0,
	       r->fd0);
	load_run(r->l);
	return true;
}

static void print_statuses(const struct load_stats *s, char *out, size_t n)
{
	size_t off = 0;
	out[0] = 0;
	for (unsigned i = 0; i < s->nst && off < n; i++)
		off += (size_t)snprintf(out + off, n - off, "%s%03xh x%u", i ? ", " : "", s->st_code[i], s->st_count[i]);
}

/* The load stops; RSS and descriptors against the baseline; every key read back; the daemon stops. */
static void run_end(struct run *r)
{
	struct load_stats s;
	char sts[160];

	load_halt(r->l);
	if (r->g.pid > 0)
		sample(r, &r->rss1, &r->fd1, r->rss_bound, r->fd0 + FD_SLACK);
	load_verify(r->l);
	load_stats(r->l, &s);
	print_statuses(&s, sts, sizeof(sts));
	printf("RESULT %s: Stores %llu acknowledged, %llu failed [%s]; Retrieves %llu verified, %llu absent, %llu "
	       "failed, %llu broke the ledger; final read-back: %llu keys, %llu with an acknowledged Store, %llu verified, %llu absent "
	       "(never stored), %llu lost, %llu unread; longest command %llu ms (bound %u ms); RSS %.1f -> %.1f MiB "
	       "(bound %.1f); descriptors %d -> %d; reconnects %llu\n",
	       r->name, (unsigned long long)s.stores_ok, (unsigned long long)s.stores_failed, sts,
	       (unsigned long long)s.reads_ok, (unsigned long long)s.reads_absent, (unsigned long long)s.reads_failed,
	       (unsigned long long)s.wrong, (unsigned long long)s.final_keys, (unsigned long long)s.final_acked,
	       (unsigned long long)s.final_verified, (unsigned long long)s.final_absent,
	       (unsigned long long)s.final_lost, (unsigned long long)s.final_unread, (unsigned long long)s.max_ms,
	       r->lc.bound_ms, r->rss0 / 1024.0, r->rss1 / 1024.0, r->rss_bound / 1024.0, r->fd0, r->fd1,
	       (unsigned long long)s.reconnects);
	CHECK(s.stores_ok > 0, "%s: Stores were acknowledged", r->name);
	CHECK(s.wrong == 0, "%s: %llu reads broke the ledger (torn, stale or lost values)", r->name,
	      (unsigned long long)s.wrong);
	CHECK(s.final_lost == 0 && s.final_unread == 0, "%s: final read-back: %llu lost, %llu unread", r->name,
	      (unsigned long long)s.final_lost, (unsigned long long)s.final_unread);
	CHECK(s.bad_status == 0, "%s: %llu commands answered an undocumented status", r->name,
	      (unsigned long long)s.bad_status);
	CHECK(s.slow == 0 && s.hung == 0, "%s: %llu commands slower than %u ms, %llu hung (longest %llu ms)", r->name,
	      (unsigned long long)s.slow, r->lc.bound_ms, (unsigned long long)s.hung, (unsigned long long)s.max_ms);
	if (r->no_failures)
		CHECK(s.stores_failed == 0 && s.reads_failed == 0, "%s: the other hosts saw %llu failed commands",
		      r->name, (unsigned long long)(s.stores_failed + s.reads_failed));
	CHECK(r->rss1 > 0 && r->rss1 <= r->rss_bound, "%s: RSS %.1f MiB after, baseline %.1f MiB, bound %.1f MiB",
	      r->name, r->rss1 / 1024.0, r->rss0 / 1024.0, r->rss_bound / 1024.0);
	CHECK(r->fd1 > 0 && r->fd1 <= r->fd0 + FD_SLACK, "%s: %d descriptors after, %d before", r->name, r->fd1, r->fd0);
	gw_stop(&r->g, 30);
	load_destroy(r->l);
	r->l = NULL;
}

/* ---- the micro cluster ----------------------------------------------------------------------------- */

static int ceph_dev(const char *cmd, const char *daemon)
{
	char line[1024];
	snprintf(line, sizeof(line), "bash '%s/scripts/ceph-dev.sh' %s %s --dir '%s'", NKV_SOURCE_DIR, cmd, daemon,
		 getenv("NKV_CEPH_DIR"));
	return system(line);
}

/* Until a fresh client can write (bounded). @return the monotonic ms it first did, or 0. */
static uint64_t wait_healthy(unsigned limit_s)
{
	char cmd[1024];
	uint64_t end = f_now_ms() + limit_s * 1000ull;
	snprintf(cmd, sizeof(cmd),
		 "timeout 10 rados -c '%s' -n 'client.%s' --keyring '%s' --client-mount-timeout 5 "
		 "--rados-mon-op-timeout 5 --rados-osd-op-timeout 5 -p '%s' put .fault-probe /etc/hostname >/dev/null 2>&1",
		 getenv("NKV_CEPH_CONF"), getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin",
		 getenv("NKV_CEPH_KEYRING"), getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv");
	while (f_now_ms() < end) {
		if (system(cmd) == 0)
			return f_now_ms();
		sleep_ms(200);
	}
	return 0;
}

static bool cluster_durable(void)
{
	char p[512], line[128];
	bool d = false;
	snprintf(p, sizeof(p), "%s/state", getenv("NKV_CEPH_DIR"));
	FILE *f = fopen(p, "r");
	while (f && fgets(line, sizeof(line), f))
		d |= strncmp(line, "durable=1", 9) == 0;
	if (f)
		fclose(f);
	return d;
}

/* osd, mon, both: crash @daemons, keep them down @down_s, start them again in the same order. */
static void scen_cluster(const char *name, const char *const *daemons, unsigned n, unsigned down_s)
{
	struct run r = {.lc = {.workers = 4, .qd = 4, .keys = 32, .sizes = MIXED, .nsizes = 4, .store_pct = 60}};

	if (gw_init(&r.g, O.bin, "rados", "127.0.0.1") || (r.g.cache = O.cache, !run_begin(&r, name, 3000)))
		goto out;
	unsigned recovery_ms = op_bound_ms(&r); /* commands started before the cluster healed may fail */
	sleep_ms(2000);
	printf("%s: killing", name);
	for (unsigned i = 0; i < n; i++)
		printf(" %s", daemons[i]);
	printf(" (SIGKILL) for %u s under load\n", down_s);
	uint64_t t_kill = f_now_ms(), ops0 = load_ops(r.l);
	for (unsigned i = 0; i < n; i++)
		CHECK(ceph_dev("kill", daemons[i]) == 0, "kill %s", daemons[i]);
	sleep_ms(down_s * 1000);
	for (unsigned i = 0; i < n; i++)
		CHECK(ceph_dev("revive", daemons[i]) == 0, "revive %s", daemons[i]);
	uint64_t healthy = wait_healthy(120);
	CHECK(healthy != 0, "%s: the cluster takes writes again within 120 s of the restart", name);
	if (healthy) {
		printf("%s: %llu commands completed between the kill and the recovery; the cluster took writes again "
		       "%.1f s after the kill\n",
		       name, (unsigned long long)(load_ops(r.l) - ops0), (healthy - t_kill) / 1000.0);
		sleep_ms(recovery_ms + 3000);
		uint64_t last = load_last_fail_start(r.l);
		if (last)
			printf("%s: the last failed command started %.1f s %s the cluster was healthy again\n", name,
			       (last > healthy ? last - healthy : healthy - last) / 1000.0, last > healthy ? "after" : "before");
		else
			printf("%s: no command failed\n", name);
		CHECK(last <= healthy + recovery_ms,
		      "%s: a command started %.1f s after the cluster was healthy failed (allowed: %.1f s)", name,
		      (last - healthy) / 1000.0, recovery_ms / 1000.0);
	}
	run_end(&r);
out:
	gw_cleanup(&r.g);
}

/* ---- one OSD of three: the replicated size-3 pool, the k=2 m=1 erasure-coded pool ---------------- */

#define TOPO_OSD "osd.1"
/* The op timeout of these runs: above the time the cluster needs to mark the OSD down (heartbeat
 * grace 4 s, ceph-dev.sh --osds) and peer again, so that no command fails; the longest is printed. */
#define TOPO_OP_TIMEOUT_S 10
/* A paused OSD is found by missed heartbeats only (grace 4 s, about 6-7 s to marked down): its
 * commands take up to about 8 s, so the hang's op timeout leaves room for a loaded machine. */
#define TOPO_HANG_OP_TIMEOUT_S 20

/* Until @osd is @state ("up" or "down") in the OSD map, at most @limit_s. @return ms waited, or -1. */
static long osd_wait(const char *osd, const char *state, unsigned limit_s)
{
	char cmd[1024];
	uint64_t t0 = f_now_ms();
	snprintf(cmd, sizeof(cmd),
		 "timeout 10 ceph -c '%s' -n 'client.%s' --keyring '%s' --connect-timeout 5 osd dump 2>/dev/null | "
		 "grep -q '^%s %s '", getenv("NKV_CEPH_CONF"), getenv("NKV_CEPH_USER") ? getenv("NKV_CEPH_USER") : "admin",
		 getenv("NKV_CEPH_KEYRING"), osd, state);
	while (f_now_ms() - t0 < limit_s * 1000ull) {
		if (system(cmd) == 0)
			return (long)(f_now_ms() - t0);
		sleep_ms(100);
	}
	return -1;
}

/* replica, ec: osd.1 of three SIGKILLed under load on @pool, revived; hang: paused, resumed.
 * Nothing may fail. */
static void scen_osd_of_three(const char *name, const char *pool, bool hang)
{
	struct run r = {.lc = {.workers = 4, .qd = 4, .keys = 32, .sizes = MIXED, .nsizes = 4, .store_pct = 60},
			.no_failures = true};
	unsigned down_s = O.lng ? 30 : 10;
	struct load_stats s, v;

	if (gw_init(&r.g, O.bin, "rados", "127.0.0.1"))
		goto out;
	r.g.pool = pool;
	r.g.op_timeout_s = hang ? TOPO_HANG_OP_TIMEOUT_S : TOPO_OP_TIMEOUT_S;
	if (!run_begin(&r, name, 3000))
		goto out;
	sleep_ms(2000);
	load_stats(r.l, &s);
	printf("%s: pool %s; %s %s of 3 (%s) for %u s under load; longest command so far %llu ms\n", name, pool,
	       hang ? "pausing" : "killing", TOPO_OSD, hang ? "SIGSTOP" : "SIGKILL", down_s, (unsigned long long)s.max_ms);
	uint64_t t_kill = f_now_ms(), ops0 = load_ops(r.l);
	CHECK(ceph_dev(hang ? "pause" : "kill", TOPO_OSD) == 0, "%s: %s %s", name, hang ? "pause" : "kill", TOPO_OSD);
	long down_ms = osd_wait(TOPO_OSD, "down", hang ? 30 : 60);
	CHECK(down_ms >= 0, "%s: the monitor marked %s down within %u s", name, TOPO_OSD, hang ? 30 : 60);
	if (down_ms >= 0)
		printf("%s: %s marked down %.1f s after the %s\n", name, TOPO_OSD, down_ms / 1000.0,
		       hang ? "pause" : "kill");
	while (f_now_ms() < t_kill + down_s * 1000ull)
		sleep_ms(100);
	load_halt(r.l);
	load_stats(r.l, &s);
	printf("%s: %llu commands completed in the %u s since the %s, %llu failed; longest command %llu ms\n", name,
	       (unsigned long long)(load_ops(r.l) - ops0), down_s, hang ? "pause" : "kill",
	       (unsigned long long)(s.stores_failed + s.reads_failed), (unsigned long long)s.max_ms);
	load_verify(r.l); /* every acknowledged value, with the OSD still down */
	load_stats(r.l, &v);
	printf("%s: read-back with %s down: %llu keys, %llu with an acknowledged Store, %llu verified, %llu absent "
	       "(never stored), %llu lost, %llu unread\n", name, TOPO_OSD, (unsigned long long)v.final_keys,
	       (unsigned long long)v.final_acked, (unsigned long long)v.final_verified,
	       (unsigned long long)v.final_absent, (unsigned long long)v.final_lost, (unsigned long long)v.final_unread);
	CHECK(v.final_lost == 0 && v.final_unread == 0, "%s: read-back with %s down: %llu lost, %llu unread", name,
	      TOPO_OSD, (unsigned long long)v.final_lost, (unsigned long long)v.final_unread);
	CHECK(v.stores_failed + v.reads_failed == 0, "%s: %llu commands failed with one OSD of three down", name,
	      (unsigned long long)(v.stores_failed + v.reads_failed));
	CHECK(ceph_dev(hang ? "resume" : "revive", TOPO_OSD) == 0, "%s: %s %s", name, hang ? "resume" : "revive",
	      TOPO_OSD);
	long up_ms = osd_wait(TOPO_OSD, "up", 60);
	CHECK(up_ms >= 0, "%s: %s up again within 60 s", name, TOPO_OSD);
	printf("%s: %s up again %.1f s after it was %s; the load runs on for 5 s\n", name, TOPO_OSD, up_ms / 1000.0,
	       hang ? "resumed" : "restarted");
	load_run(r.l);
	sleep_ms(5000);
	run_end(&r); /* read back once more; no failed command over the whole run, the longest command */
out:
	gw_cleanup(&r.g);
}

/* gateway: the daemon SIGKILLed with Stores in flight, restarted on the same port; hosts reconnect. */
static void scen_gateway(void)
{
	struct run r = {.lc = {.workers = 4, .qd = 8, .keys = 32, .sizes = MIXED, .nsizes = 4, .store_pct = 70}};
	unsigned kills = O.lng ? 10 : 2;
	uint64_t t_up = 0;

	if (gw_init(&r.g, O.bin, O.backend, "127.0.0.1") || !run_begin(&r, "gateway", 3000))
		goto out;
	for (unsigned i = 0; i < kills; i++) {
		sleep_ms(2500);
		uint64_t t = f_now_ms();
		while (load_stores_inflight(r.l) < 2 && f_now_ms() - t < 3000)
			usleep(1000);
		unsigned inflight = load_stores_inflight(r.l);
		uint64_t rec0 = load_reconnects(r.l);
		gw_kill(&r.g);
		uint64_t t_kill = f_now_ms();
		int rc = gw_start(&r.g);
		CHECK(rc == 0, "gateway: restart %u on port %s", i + 1, r.g.port);
		if (rc)
			break;
		t_up = f_now_ms();
		while (load_reconnects(r.l) < rec0 + r.lc.workers && f_now_ms() - t_up < 30000)
			sleep_ms(10);
		uint64_t t_all = f_now_ms();
		bool all = load_reconnects(r.l) >= rec0 + r.lc.workers;
		printf("gateway: kill %u with %u Stores in flight; listening again %llu ms after the kill; every host "
		       "reconnected %llu ms after that\n", i + 1, inflight, (unsigned long long)(t_up - t_kill),
		       (unsigned long long)(t_all - t_up));
		CHECK(inflight > 0, "gateway: kill %u came with Stores in flight", i + 1);
		CHECK(all, "gateway: every host reconnected within 30 s of restart %u", i + 1);
	}
	sleep_ms(4000);
	uint64_t last = load_last_fail_start(r.l);
	CHECK(last <= t_up, "gateway: a command started %llu ms after the last restart failed",
	      (unsigned long long)(last - t_up));
	run_end(&r);
out:
	gw_cleanup(&r.g);
}

/* ---- host: hosts that vanish mid-transfer ---------------------------------------------------------- */

#define FIXED_KEYS 8
#define FIXED_BASE 900000000ull
#define FIXED_LEN ((4u << 20) - 100)

static void key16(uint64_t idx, uint8_t out[16])
{
	char s[17];
	snprintf(s, sizeof(s), "fk%014llu", (unsigned long long)idx);
	memcpy(out, s, 16);
}

/* A libnkv host of its own: Store (@store) or check the fixed keys. @return how many failed. */
static unsigned fixed_keys(const struct run *r, struct fl_key *fk, bool store)
{
	struct nkv_conn_opts o = {.hostnqn = FAULT_HOSTNQN, .timeout_ms = 10000};
	struct nkv_ctrl *c = NULL;
	struct nkv_qpair *q = NULL;
	uint8_t *buf = malloc(FIXED_LEN), key[16];
	unsigned bad = 0;
	char why[200];

	o.hostid[15] = 0xdd;
	if (nkv_connect(r->g.addr, r->g.port, FAULT_SUBNQN, &o, &c) || nkv_qpair_create(c, 4, &q)) {
		nkv_disconnect(c);
		free(buf);
		return FIXED_KEYS;
	}
	for (unsigned i = 0; i < FIXED_KEYS; i++) {
		key16(FIXED_BASE + i, key);
		if (store) {
			uint32_t ver = fk[i].next_ver++;
			fv_fill(buf, FIXED_LEN, FIXED_BASE + i, ver);
			int rc = nkv_store(q, 1, key, 16, buf, FIXED_LEN, 0, NULL);
			fl_store_done(&fk[i], ver, FIXED_LEN, rc == 0);
			bad += rc != 0;
			continue;
		}
		uint32_t size = 0;
		struct nkv_cpl cpl = {0};
		int rc = nkv_retrieve(q, 1, key, 16, buf, FIXED_LEN, &size, &cpl);
		/* Strict: a Store whose data never fully arrived must not land, so only the acknowledged
		 * version will do (those attempts were never entered in the ledger as open). */
		if ((rc && rc != -ENOENT) || !fl_read_done(&fk[i], FIXED_BASE + i, rc == 0, buf, cpl.xfer, size, why) ||
		    fk[i].floor != fk[i].acked) {
			bad++;
			fprintf(stderr, "host: fixed key %u: %s\n", i, rc && rc != -ENOENT ? strerror(-rc) : why);
		}
	}
	nkv_disconnect(c);
	free(buf);
	return bad;
}

/* "host gone with N command(s)" lines of the daemon's log printed whole (not folded) with N > 0. */
static unsigned shm_gone_busy(const struct gw *g)
{
	FILE *f = fopen(g->log, "r");
	char line[4096];
	unsigned busy = 0;
	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "host gone with ");
		if (p && !strstr(line, "suppressed") && atoi(p + strlen("host gone with ")) > 0)
			busy++;
	}
	if (f)
		fclose(f);
	return busy;
}

/* One shared-memory host process killed with Retrieves in flight. @return true once it was ready. */
static bool shm_kill_one(const struct run *r, unsigned nreads)
{
	int p[2];
	char a[5][32];
	if (pipe(p))
		return false;
	snprintf(a[0], 32, "%llu", (unsigned long long)FIXED_BASE);
	snprintf(a[1], 32, "%u", FIXED_KEYS);
	snprintf(a[2], 32, "%u", FIXED_LEN);
	snprintf(a[3], 32, "%u", nreads);
	snprintf(a[4], 32, "%d", p[1]);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		execl("/proc/self/exe", "fault_suite", "shm-child", r->g.shm, a[0], a[1], a[2], a[3], a[4], (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	char c = 0;
	bool ready = poll(&pf, 1, 15000) == 1 && read(p[0], &c, 1) == 1;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(p[0]);
	return ready;
}

static void scen_host(void)
{
	static const uint32_t sizes[] = {4096, 65536, 1u << 20};
	struct run r = {.lc = {.workers = 2, .qd = 4, .keys = 32, .sizes = sizes, .nsizes = 3, .store_pct = 60},
			.no_failures = true};
	struct fl_key fk[FIXED_KEYS] = {0};
	unsigned ntcp = O.lng ? 100 : 6, nshm = O.lng ? 50 : 4, reads = 32;

	for (unsigned i = 0; i < FIXED_KEYS; i++)
		fk[i].next_ver = 1;
	if (gw_init(&r.g, O.bin, O.backend, "127.0.0.1"))
		goto out;
	r.g.op_timeout_s = 10; /* not a cluster fault: no command of the other hosts may fail, even on a busy machine */
	snprintf(r.g.shm, sizeof(r.g.shm), "%s/shm.sock", r.g.dir);
	if (!run_begin(&r, "host", 3000))
		goto out;
	CHECK(fixed_keys(&r, fk, true) == 0, "host: %u values of %u bytes stored for the vanishing hosts", FIXED_KEYS,
	      FIXED_LEN);

	uint8_t *val = malloc(1u << 20);
	unsigned drops0 = gw_log_count(&r.g, "dropped with"), ok = 0;
	for (unsigned i = 0; i < ntcp; i++) {
		uint8_t key[16];
		char why[128];
		uint32_t len = (1u << 20) - 333;
		key16(FIXED_BASE + i % FIXED_KEYS, key);
		fv_fill(val, len, FIXED_BASE + i % FIXED_KEYS, fk[i % FIXED_KEYS].next_ver++); /* never acknowledged */
		int sent = raw_half_store(r.g.addr, r.g.port, key, val, len, i % 2 == 0, why);
		if (sent > 0 && (uint32_t)sent < len)
			ok++;
		else
			fprintf(stderr, "host: raw host %u: %s\n", i, sent < 0 ? why : "sent nothing or everything");
	}
	free(val);
	CHECK(ok == ntcp, "host: %u of %u raw hosts sent part of a Store's data and vanished", ok, ntcp);
	/* Folded log lines come out when their 5 s window ends. */
	uint64_t t = f_now_ms();
	unsigned drops;
	while ((drops = gw_log_count(&r.g, "dropped with") - drops0) < ntcp && f_now_ms() - t < 8000)
		sleep_ms(200);
	printf("host: %u raw NVMe/TCP hosts vanished mid-H2C (%u reset, %u closed); the daemon logged %u Stores "
	       "dropped with part of their data\n", ntcp, (ntcp + 1) / 2, ntcp / 2, drops);
	CHECK(drops == ntcp, "host: the daemon's log names each Store dropped mid-transfer (%u of %u)", drops, ntcp);

	/* Shared-memory hosts, one at a time: the next dies once the daemon has unmapped the last one's
	 * memory, so the dead hosts' Retrieves (which RADOS still serves) never pile up on the others. */
	unsigned gone0 = gw_log_count(&r.g, "host disconnected"), ready = 0, released = 0;
	unsigned maps0 = proc_maps_count(r.g.pid, "memfd:nkv-");
	uint64_t slowest = 0;
	for (unsigned i = 0; i < nshm; i++) {
		bool rd = shm_kill_one(&r, reads);
		uint64_t t_kill = f_now_ms();
		ready += rd;
		while (proc_maps_count(r.g.pid, "memfd:nkv-") > maps0 && f_now_ms() - t_kill < 30000)
			sleep_ms(10);
		if (proc_maps_count(r.g.pid, "memfd:nkv-") <= maps0) {
			released++;
			slowest = f_now_ms() - t_kill > slowest ? f_now_ms() - t_kill : slowest;
		}
	}
	CHECK(ready == nshm, "host: %u of %u shared-memory hosts queued %u Retrieves of %u bytes and were killed", ready,
	      nshm, reads, FIXED_LEN);
	CHECK(released == nshm, "host: the daemon unmapped %u of %u dead hosts' memory within 30 s", released, nshm);
	t = f_now_ms();
	unsigned gone;
	while ((gone = gw_log_count(&r.g, "host disconnected") - gone0) < nshm && f_now_ms() - t < 8000)
		sleep_ms(200);
	unsigned busy = shm_gone_busy(&r.g);
	printf("host: %u shared-memory hosts killed with %u Retrieves of %u bytes queued; the daemon unmapped each "
	       "one's memory within %llu ms, logged %u disconnects, %u printed with commands still in the backend\n",
	       nshm, reads, FIXED_LEN, (unsigned long long)slowest, gone, busy);
	CHECK(gone == nshm, "host: the daemon's log has a disconnect per killed shared-memory host (%u)", gone);
	CHECK(busy > 0, "host: a shared-memory host died with Retrieves in flight into its memory (the log says so)");
	sleep_ms(1000);
	unsigned bad = fixed_keys(&r, fk, false);
	printf("host: the %u values the vanished hosts wrote or read: %u intact, %u not\n", FIXED_KEYS,
	       FIXED_KEYS - bad, bad);
	CHECK(bad == 0, "host: half-sent Stores left the acknowledged values intact");
	run_end(&r);
out:
	gw_cleanup(&r.g);
}

/* ---- netem: delay and loss between the daemon and the cluster ------------------------------------ */

static void scen_netem(void)
{
	static const uint32_t sizes[] = {4096, 65536, 262144, 1u << 20};
	struct run r = {.lc = {.workers = 4, .qd = 4, .keys = 32, .sizes = sizes, .nsizes = 4, .store_pct = 60}};
	const char *ns = getenv("NKV_FAULTS_NETNS"), *addr = getenv("NKV_FAULTS_ADDR"),
		   *on = getenv("NKV_FAULTS_IMPAIR_ON"), *off = getenv("NKV_FAULTS_IMPAIR_OFF"),
		   *what = getenv("NKV_FAULTS_IMPAIR");
	unsigned secs = O.lng ? 120 : 10;

	if (!ns || !addr || !on || !off) {
		fprintf(stderr, "netem: run by test/faults/netem.sh (NKV_FAULTS_NETNS, _ADDR, _IMPAIR_ON, _IMPAIR_OFF)\n");
		h_fail++;
		return;
	}
	if (gw_init(&r.g, O.bin, "rados", addr))
		goto out;
	r.g.netns = ns;
	r.g.op_timeout_s = 5;
	if (!run_begin(&r, "netem", 3000))
		goto out;
	unsigned recovery_ms = op_bound_ms(&r);
	sleep_ms(3000);
	struct load_stats s0, s1;
	load_stats(r.l, &s0);
	uint64_t ops0 = load_ops(r.l);
	printf("netem: impairing the cluster's traffic for %u s: %s\n", secs, what ? what : on);
	CHECK(system(on) == 0, "netem: %s", on);
	sleep_ms(secs * 1000);
	CHECK(system(off) == 0, "netem: %s", off);
	uint64_t t_off = f_now_ms(), ops1 = load_ops(r.l);
	load_stats(r.l, &s1);
	/* The failures under the impairment, by status: the counts now less those before it. */
	struct load_stats sd = {0};
	for (unsigned i = 0; i < s1.nst; i++) {
		unsigned before = 0;
		for (unsigned j = 0; j < s0.nst; j++)
			if (s0.st_code[j] == s1.st_code[i])
				before = s0.st_count[j];
		if (s1.st_count[i] > before) {
			sd.st_code[sd.nst] = s1.st_code[i];
			sd.st_count[sd.nst++] = s1.st_count[i] - before;
		}
	}
	char sts[160];
	print_statuses(&sd, sts, sizeof(sts));
	printf("netem: %llu commands completed under the impairment, %llu of them failed [%s]; longest so far %llu ms\n",
	       (unsigned long long)(ops1 - ops0),
	       (unsigned long long)(s1.stores_failed + s1.reads_failed - s0.stores_failed - s0.reads_failed), sts,
	       (unsigned long long)s1.max_ms);
	CHECK(ops1 > ops0, "netem: commands completed under the impairment");
	sleep_ms(recovery_ms + 3000);
	uint64_t last = load_last_fail_start(r.l);
	if (last)
		printf("netem: the last failed command started %.1f s %s the impairment was removed\n",
		       (last > t_off ? last - t_off : t_off - last) / 1000.0, last > t_off ? "after" : "before");
	else
		printf("netem: no command failed\n");
	CHECK(last <= t_off + recovery_ms, "netem: a command started %.1f s after the impairment ended failed",
	      (last - t_off) / 1000.0);
	run_end(&r);
out:
	gw_cleanup(&r.g);
}

/* ---- soak ----------------------------------------------------------------------------------------- */

/* Flat: the median of the last window of samples (one a second) within SOAK_FLAT_PCT of the median of
 * the first window after the warm-up. Medians of windows, not single samples: with 1,024 values of up to
 * 1 MiB in flight the daemon's RSS swings by 10-20 % from one second to the next, while a leak moves
 * the whole window. The warm-up (20 s; long 60 s) covers the climb while the connections' kept buffers
 * and the allocator's caches fill, which takes longer on a busy machine. Descriptors must not move at
 * all (the same connections stay open). */
#define SOAK_FLAT_PCT 10
#define SOAK_MAX_SAMPLES 1024

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

static long median(const long *v, unsigned n)
{
	long tmp[SOAK_MAX_SAMPLES];
	memcpy(tmp, v, n * sizeof(long));
	qsort(tmp, n, sizeof(long), cmp_long);
	return tmp[n / 2];
}

static void scen_soak(void)
{
	static const uint32_t sizes[] = {4096, 4096, 4096, 16384, 65536, 65536, 262144, 1u << 20};
	struct run r = {.lc = {.workers = 64, .qd = 16, .keys = 32, .sizes = sizes, .nsizes = 8, .store_pct = 50}};
	unsigned total_s = O.lng ? 600 : 60, warm_s = O.lng ? 60 : 20, print_s = O.lng ? 30 : 5, win = O.lng ? 60 : 10;
	static const char *const extra[] = {"--max-host-ctrlrs", "128", "--max-host-conns", "512", NULL};
	static long rss[SOAK_MAX_SAMPLES];
	int fd_min = 1 << 30, fd_max = 0;
	unsigned n = 0;

	if (gw_init(&r.g, O.bin, O.backend, "127.0.0.1"))
		goto out;
	memcpy(r.g.extra, extra, sizeof(extra));
	r.g.op_timeout_s = 10;
	r.name = "soak";
	r.lc.addr = r.g.addr;
	r.lc.port = r.g.port;
	r.lc.bound_ms = op_bound_ms(&r);
	r.lc.hang_ms = r.lc.bound_ms + 20000;
	printf("== soak: daemon %s (%s backend), %u connections x QD %u, %u keys each, Stores %u%%, %u s (%u s "
	       "warm-up), op timeout %u s; RSS and descriptors sampled every second\n", O.bin, O.backend, r.lc.workers,
	       r.lc.qd, r.lc.keys, r.lc.store_pct, total_s, warm_s, r.g.op_timeout_s);
	int rc = gw_start(&r.g);
	CHECK(rc == 0, "soak: the daemon starts");
	if (rc)
		goto out;
	printf("soak: idle at start: RSS %.1f MiB, %d descriptors\n", proc_rss_kb(r.g.pid) / 1024.0, proc_fds(r.g.pid));
	r.l = load_create(&r.lc);
	uint64_t t0 = f_now_ms();
	load_run(r.l);
	for (unsigned t = warm_s; t < total_s && n < SOAK_MAX_SAMPLES; t++, n++) {
		while (f_now_ms() < t0 + t * 1000ull)
			sleep_ms(20);
		rss[n] = proc_rss_kb(r.g.pid);
		int fds = proc_fds(r.g.pid);
		fd_min = fds < fd_min ? fds : fd_min;
		fd_max = fds > fd_max ? fds : fd_max;
		if ((t - warm_s) % print_s == print_s - 1) {
			uint64_t ops = load_ops(r.l);
			printf("soak: t=%3us RSS %6.1f MiB (median of the last %us %6.1f)  descriptors %4d  connected %2u  "
			       "commands %llu (%.0f/s)\n", t, rss[n] / 1024.0, print_s,
			       median(rss + n + 1 - print_s, print_s) / 1024.0, fds, load_connected(r.l),
			       (unsigned long long)ops, ops * 1000.0 / (f_now_ms() - t0));
		}
	}
	long first = median(rss, win), last = median(rss + n - win, win);
	r.rss0 = first;
	r.fd0 = fd_min;
	r.rss_bound = first + first * SOAK_FLAT_PCT / 100;
	printf("soak: RSS median of the first %us after the warm-up %.1f MiB, of the last %us %.1f MiB (flat: within "
	       "%d%%); descriptors %d..%d\n", win, first / 1024.0, win, last / 1024.0, SOAK_FLAT_PCT, fd_min, fd_max);
	CHECK(last <= r.rss_bound, "soak: RSS grew from %.1f to %.1f MiB (flat: within %d%%)", first / 1024.0,
	      last / 1024.0, SOAK_FLAT_PCT);
	CHECK(fd_max == fd_min, "soak: descriptors ranged %d..%d with the same connections open", fd_min, fd_max);
	run_end(&r);
out:
	gw_cleanup(&r.g);
}

/* ---- selftest: the checks can fail --------------------------------------------------------------- */

/* The value format and the ledger against values that must pass and values that must not. */
static void scen_selftest(void)
{
	uint32_t len = 100000;
	uint8_t *a = malloc(len), *b = malloc(len);
	char why[200];
	struct fl_key k = {.next_ver = 1};

	fv_fill(a, len, 42, 7);
	CHECK(fv_check(a, len, 42, why) == 7, "a whole value is version 7");
	CHECK(fv_check(a, len, 43, why) == 0, "another key's value is refused: %s", why);
	CHECK(fv_check(a, len - 8, 42, why) == 0, "a truncated value is refused: %s", why);
	memcpy(b, a, len);
	b[len / 2] ^= 1;
	CHECK(fv_check(b, len, 42, why) == 0, "a flipped bit is refused: %s", why);
	fv_fill(b, len, 42, 8);
	memcpy(b + len / 2, a + len / 2, len - len / 2); /* half of version 8, half of version 7 */
	CHECK(fv_check(b, len, 42, why) == 0, "two versions spliced together are refused: %s", why);

	CHECK(fl_read_done(&k, 42, false, NULL, 0, 0, why), "absent before any Store");
	fv_fill(a, len, 42, k.next_ver);
	fl_store_done(&k, k.next_ver++, len, true);                   /* version 1 acknowledged */
	CHECK(!fl_read_done(&k, 42, false, NULL, 0, 0, why), "absent after an acknowledged Store is lost: %s", why);
	CHECK(fl_read_done(&k, 42, true, a, len, len, why), "the acknowledged version reads back");
	CHECK(!fl_read_done(&k, 42, true, a, len - 4096, len, why), "a value longer than the buffer is refused: %s", why);
	fv_fill(b, len, 42, k.next_ver);
	fl_store_done(&k, k.next_ver++, len, false);                  /* version 2: 82h, outcome open */
	CHECK(fl_read_done(&k, 42, true, a, len, len, why), "version 1 while version 2 is open");
	CHECK(fl_read_done(&k, 42, true, b, len, len, why), "version 2 landed");
	CHECK(!fl_read_done(&k, 42, true, a, len, len, why), "version 1 after version 2 was read is stale: %s", why);
	fv_fill(b, len, 42, 9);
	CHECK(!fl_read_done(&k, 42, true, b, len, len, why), "a version never stored is refused: %s", why);
	fv_fill(b, len, 42, k.next_ver);
	fl_store_done(&k, k.next_ver++, len, true);                   /* version 3 acknowledged */
	fv_fill(a, len, 42, 2);
	CHECK(!fl_read_done(&k, 42, true, a, len, len, why), "version 2 after version 3 was acknowledged: %s", why);
	CHECK(fl_read_len(&k) == len, "the Retrieve buffer fits the value");
	free(a);
	free(b);
}

/* ---- main ---------------------------------------------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr, "usage: fault_suite osd|mon|both|gateway|host|netem|soak|replica|ec|hang --daemon PATH/rados-nkv [--long] "
			"[--backend rados|mem] [--cache]\n       fault_suite selftest\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 8 && strcmp(argv[1], "shm-child") == 0)
		return shm_child_main(argv[2], strtoull(argv[3], NULL, 10), (unsigned)atoi(argv[4]),
				      (uint32_t)strtoul(argv[5], NULL, 10), (unsigned)atoi(argv[6]), atoi(argv[7]));
	if (argc < 2)
		return usage();
	const char *scen = argv[1];
	if (strcmp(scen, "selftest") == 0) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		scen_selftest();
		printf("%u passed, %u failed\n", h_pass, h_fail);
		return h_fail || !h_pass ? 1 : 0;
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--long") == 0)
			O.lng = true;
		else if (strcmp(argv[i], "--daemon") == 0 && i + 1 < argc)
			O.bin = argv[++i];
		else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
			O.backend = argv[++i];
		else if (strcmp(argv[i], "--cache") == 0) /* TTLs and pins, no capacity: nothing may go */
			O.cache = "{\"default_ttl\": 86400, \"bytes_per_token\": 131072, \"reap_interval_s\": 2}";
		else
			return usage();
	}
	if (!O.bin || (strcmp(O.backend, "rados") && strcmp(O.backend, "mem")))
		return usage();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	bool topo = strcmp(scen, "replica") == 0 || strcmp(scen, "ec") == 0 || strcmp(scen, "hang") == 0;
	bool cluster = strcmp(scen, "osd") == 0 || strcmp(scen, "mon") == 0 || strcmp(scen, "both") == 0 || topo;
	bool rados = cluster || strcmp(scen, "netem") == 0 || strcmp(O.backend, "rados") == 0;
	if (rados && (!getenv("NKV_CEPH_CONF") || (cluster && !getenv("NKV_CEPH_DIR")))) {
		if (getenv("NKV_REQUIRE_RADOS") && strcmp(getenv("NKV_REQUIRE_RADOS"), "1") == 0) {
			fprintf(stderr, "fault_suite %s: NKV_REQUIRE_RADOS=1 but no cluster (eval \"$(scripts/ceph-dev.sh "
					"env)\")\n", scen);
			return 1;
		}
		printf("fault_suite %s: no cluster ($NKV_CEPH_CONF / $NKV_CEPH_DIR unset): skipped\n", scen);
		return 77;
	}
	if (cluster && strcmp(scen, "mon") != 0 && !cluster_durable()) {
		/* memstore keeps its objects in the OSD's memory: a killed OSD takes them along */
		fprintf(stderr, "fault_suite %s: the cluster in %s is not durable: start it with scripts/ceph-dev.sh start "
				"--durable (bluestore)\n", scen, getenv("NKV_CEPH_DIR"));
		return 1;
	}
	const char *osds = getenv("NKV_CEPH_OSDS"), *ec = getenv("NKV_CEPH_EC_POOL");
	if (topo && (!osds || atoi(osds) < 3 || (strcmp(scen, "ec") == 0 && !(ec && *ec)))) {
		fprintf(stderr, "fault_suite %s: needs a cluster of 3 OSDs%s (scripts/ceph-dev.sh start --osds 3 --ec-pool "
				"NAME; test/faults/topology.sh); %s has %s\n", scen, strcmp(scen, "ec") == 0 ? " with an EC pool" : "",
			getenv("NKV_CEPH_DIR"), osds ? osds : "1");
		return 1;
	}
	static const char *const osd[] = {"osd.0"}, *mon[] = {"mon.a"}, *both[] = {"mon.a", "osd.0"};
	if (strcmp(scen, "osd") == 0)
		scen_cluster("osd", osd, 1, O.lng ? 20 : 10);
	else if (strcmp(scen, "mon") == 0)
		scen_cluster("mon", mon, 1, O.lng ? 20 : 8);
	else if (strcmp(scen, "both") == 0)
		scen_cluster("both", both, 2, 20);
	else if (strcmp(scen, "gateway") == 0)
		scen_gateway();
	else if (strcmp(scen, "host") == 0)
		scen_host();
	else if (strcmp(scen, "netem") == 0)
		scen_netem();
	else if (strcmp(scen, "soak") == 0)
		scen_soak();
	else if (strcmp(scen, "replica") == 0)
		scen_osd_of_three("replica", getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv", false);
	else if (strcmp(scen, "ec") == 0)
		scen_osd_of_three("ec", ec, false);
	else if (strcmp(scen, "hang") == 0)
		scen_osd_of_three("hang", getenv("NKV_CEPH_POOL") ? getenv("NKV_CEPH_POOL") : "nkv", true);
	else
		return usage();
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail || !h_pass ? 1 : 0;
}
