/*
 * fault_cluster.c - the gateway survives cluster faults under load, and loses nothing it acknowledged.
 *
 * Workers (each with its own controller and I/O queue, over the transport given) Store and Retrieve
 * values of 4 KiB to 1 MiB (4 MiB in --long) on keys of their own, while the test crashes a Ceph
 * daemon of the micro cluster with SIGKILL, keeps it down, and starts it again:
 *   1. the OSD (bluestore) down for 10 s (--long: 20 s);
 *   2. the monitor down for 10 s (--long: 20 s);
 *   --long adds 3. both down together for 20 s, the OSD returning first.
 * Checked for every scenario (the invariant of the fault suite):
 *   - every command completes, with success or 82h (Namespace Not Ready, DNR clear), within the op
 *     timeout (3 s) + 2 s of grace; nothing else, and no transport failure;
 *   - recovery: once a fresh client (`rados put`) succeeds again, every command the workers start
 *     more than RECOVERY_MS later succeeds (a gateway whose librados kept a stale OSD map answered
 *     82h for minutes after an OSD restart);
 *   - every value read back is intact: byte for byte the last acknowledged Store of its key, or a
 *     Store attempted after it that was answered 82h (it may have landed), never older, never torn;
 *   - at the end, every key reads back that way through a new controller.
 * The recovery time (from the cluster being healthy to the last failed command) is printed per
 * scenario. Needs the micro cluster (NKV_CEPH_DIR: scripts/ceph-dev.sh env; --durable) and kills its
 * daemons: run it alone (ctest RUN_SERIAL). Usage: fault_cluster rados [loop|tcp|shm] [--long]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

#define OP_TIMEOUT_S 3
#define GRACE_MS 2000
#define RECOVERY_MS 5000   /* op timeout + 2 s: commands started before the cluster healed may fail */
#define WORKERS 4
#define KEYS_PER_WORKER 24
#define MAX_PENDING 64

struct key_state {
	uint64_t acked_seed;   /* 0: never acknowledged */
	uint32_t acked_len;
	uint64_t pending_seed[MAX_PENDING]; /* Stores answered 82h since that acknowledgement */
	uint32_t pending_len[MAX_PENDING];
	unsigned npending;
	bool overflow;         /* more than MAX_PENDING: the key is no longer checked exactly */
};

struct worker {
	pthread_t thread;
	unsigned id;
	struct h_ctrl *ctrl;
	struct h_qp *qp;
	uint8_t *buf;
	struct key_state keys[KEYS_PER_WORKER];
	uint64_t rng;
};

static struct worker W[WORKERS];
static uint32_t g_max_len;
static atomic_bool g_stop;
/* Shared results (any thread): monotonic ms of the last failed command's start and end. */
static _Atomic uint64_t g_last_fail_start, g_last_fail_end;
static atomic_uint g_ops, g_ok, g_notready, g_bad_status, g_slow, g_corrupt;
static _Atomic uint64_t g_max_lat;

static void key_name(unsigned w, unsigned k, uint8_t out[16])
{
	memset(out, 0, 16);
	snprintf((char *)out, 16, "f%02u-%04u", w, k);
}

static bool value_ok(const struct key_state *ks, const uint8_t *buf, uint32_t len)
{
	if (ks->overflow)
		return true;
	if (ks->acked_seed && len == ks->acked_len && h_verify(buf, len, ks->acked_seed))
		return true;
	for (unsigned i = 0; i < ks->npending; i++)
		if (len == ks->pending_len[i] && h_verify(buf, len, ks->pending_seed[i]))
			return true;
	return false;
}

static void note_latency(uint64_t t0, uint64_t t1, unsigned w, const char *what, unsigned st)
{
	uint64_t lat = t1 - t0, m = atomic_load(&g_max_lat);
	while (lat > m && !atomic_compare_exchange_weak(&g_max_lat, &m, lat))
		;
	if (lat > OP_TIMEOUT_S * 1000 + GRACE_MS) {
		atomic_fetch_add(&g_slow, 1);
		fprintf(stderr, "worker %u: %s took %llu ms (status %03x)\n", w, what, (unsigned long long)lat, st);
	}
}

static void note_fail(uint64_t t0, uint64_t t1)
{
	uint64_t v = atomic_load(&g_last_fail_start);
	while (t0 > v && !atomic_compare_exchange_weak(&g_last_fail_start, &v, t0))
		;
	v = atomic_load(&g_last_fail_end);
	while (t1 > v && !atomic_compare_exchange_weak(&g_last_fail_end, &v, t1))
		;
}

static uint32_t pick_len(uint64_t *rng)
{
	static const uint32_t sizes[] = {4096, 65536, 1u << 20, 4u << 20};
	uint32_t len = sizes[h_rand(rng) % 4];
	if (len > g_max_len)
		len = 4096;
	return len - (uint32_t)(h_rand(rng) % 512); /* odd sizes too */
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&g_stop)) {
		unsigned k = (unsigned)(h_rand(&w->rng) % KEYS_PER_WORKER);
		struct key_state *ks = &w->keys[k];
		uint8_t key[16];
		uint32_t dw0 = 0, xfer = 0;
		bool store = h_rand(&w->rng) % 100 < 60;
		unsigned st;
		uint64_t t0 = nkv_now_ms(), t1;

		key_name(w->id, k, key);
		if (store) {
			uint32_t len = pick_len(&w->rng);
			uint64_t seed = h_rand(&w->rng) | 1;
			h_fill(w->buf, len, seed);
			st = h_kv(w->qp, NKV_KV_STORE, 1, key, 16, len, 0, w->buf, len, NULL, NULL);
			t1 = nkv_now_ms();
			if (st == 0) {
				ks->acked_seed = seed;
				ks->acked_len = len;
				ks->npending = 0;
				ks->overflow = false;
			} else if (ks->npending < MAX_PENDING) {
				ks->pending_seed[ks->npending] = seed;
				ks->pending_len[ks->npending++] = len;
			} else {
				ks->overflow = true;
			}
		} else {
			st = h_kv(w->qp, NKV_KV_RETRIEVE, 1, key, 16, g_max_len, 0, w->buf, g_max_len, &dw0, &xfer);
			t1 = nkv_now_ms();
			if (st == SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST) && !ks->acked_seed)
				st = 0; /* never acknowledged: absent is right */
			else if (st == 0 && (dw0 != xfer || !value_ok(ks, w->buf, xfer))) {
				atomic_fetch_add(&g_corrupt, 1);
				fprintf(stderr, "worker %u key %u: value of %u bytes (dw0 %u) is neither the acknowledged "
					"one (%u bytes) nor a later attempt\n", w->id, k, xfer, dw0, ks->acked_len);
			}
		}
		atomic_fetch_add(&g_ops, 1);
		note_latency(t0, t1, w->id, store ? "Store" : "Retrieve", st);
		if (st == 0) {
			atomic_fetch_add(&g_ok, 1);
		} else {
			note_fail(t0, t1);
			if (st == SC(NKV_SCT_GENERIC, NKV_SC_KV_NS_NOT_READY)) {
				atomic_fetch_add(&g_notready, 1);
			} else {
				atomic_fetch_add(&g_bad_status, 1);
				fprintf(stderr, "worker %u: %s answered %03x (only success or 82h are allowed)\n", w->id,
					store ? "Store" : "Retrieve", st);
				if (st == 0xffff)
					break; /* the queue is gone */
			}
		}
	}
	return NULL;
}

static int ceph_dev(const char *cmd, const char *daemon)
{
	char line[1024];
	snprintf(line, sizeof(line), "bash '%s/scripts/ceph-dev.sh' %s %s --dir '%s'", NKV_SOURCE_DIR, cmd, daemon,
		 getenv("NKV_CEPH_DIR"));
	return system(line);
}

/* Wait until a fresh client can write (bounded). @return the monotonic ms it first succeeded, or 0. */
static uint64_t wait_healthy(unsigned limit_s)
{
	uint64_t end = nkv_now_ms() + limit_s * 1000ull;
	while (nkv_now_ms() < end) {
		/* bounded: a fresh client waits forever for a monitor otherwise */
		if (h_ceph_tool("rados", "--client-mount-timeout", "5", "--rados-mon-op-timeout", "5",
				"--rados-osd-op-timeout", "5", "-p", H.pool, "put", ".fault-probe", "/etc/hostname",
				(char *)NULL) == 0)
			return nkv_now_ms();
		usleep(200000);
	}
	return 0;
}

static void load_for(unsigned ms)
{
	usleep(ms * 1000u);
}

/* One scenario: crash @daemons, keep them down @down_s, start them again in the same order. */
static void scenario(const char *name, const char *const *daemons, unsigned n, unsigned down_s)
{
	unsigned ok0 = atomic_load(&g_ok), nr0 = atomic_load(&g_notready);
	uint64_t t0 = nkv_now_ms();

	printf("--- %s: down %u s\n", name, down_s);
	load_for(2000);
	for (unsigned i = 0; i < n; i++)
		CHECK(ceph_dev("kill", daemons[i]) == 0, "kill %s", daemons[i]);
	load_for(down_s * 1000);
	for (unsigned i = 0; i < n; i++)
		CHECK(ceph_dev("revive", daemons[i]) == 0, "revive %s", daemons[i]);
	uint64_t healthy = wait_healthy(120);
	CHECK(healthy != 0, "%s: the cluster takes writes again within 120 s of the restart", name);
	if (!healthy)
		return;
	printf("%s: cluster healthy %.1f s after the crash\n", name, (double)(healthy - t0) / 1000);
	/* Keep the load on past the recovery window, then some more, all of which must succeed. */
	load_for(RECOVERY_MS + 5000);
	uint64_t last_start = atomic_load(&g_last_fail_start), last_end = atomic_load(&g_last_fail_end);
	double rec = last_end > healthy ? (double)(last_end - healthy) / 1000 : 0;
	printf("%s: %u ok, %u answered 82h; last failed command ended %.1f s after the cluster was healthy\n", name,
	       atomic_load(&g_ok) - ok0, atomic_load(&g_notready) - nr0, rec);
	CHECK(last_start <= healthy + RECOVERY_MS,
	      "%s: a command started %.1f s after the cluster was healthy still failed (allowed: %.1f s)", name,
	      (double)(last_start - healthy) / 1000, RECOVERY_MS / 1000.0);
	CHECK(atomic_load(&g_ok) > ok0, "%s: commands succeeded", name);
}

int main(int argc, char **argv)
{
	bool lng = argc > 3 && strcmp(argv[3], "--long") == 0;

	if (argc < 2 || strcmp(argv[1], "rados") != 0) {
		printf("fault_cluster: needs the rados backend: skipped\n");
		return 77;
	}
	setenv("NKV_TEST_OP_TIMEOUT", "3", 1);
	h_init(argc, argv, "fault_cluster");
	if (!getenv("NKV_CEPH_DIR")) {
		fprintf(stderr, "fault_cluster: NKV_CEPH_DIR is not set (eval \"$(scripts/ceph-dev.sh env)\")\n");
		return 1;
	}
	g_max_len = lng ? 4u << 20 : 1u << 20;
	h_add_ns(1, "f", 0, false);

	for (unsigned i = 0; i < WORKERS; i++) {
		W[i].id = i;
		W[i].rng = 0x9e3779b97f4a7c15ull * (i + 1);
		W[i].ctrl = h_connect();
		W[i].qp = h_qp_create(W[i].ctrl, 1, 4);
		W[i].buf = malloc(g_max_len);
		CHECK(W[i].qp && W[i].buf, "worker %u queue", i);
		if (!W[i].qp || !W[i].buf)
			return h_finish();
		pthread_create(&W[i].thread, NULL, worker_main, &W[i]);
	}

	const char *osd[] = {"osd.0"}, *mon[] = {"mon.a"}, *both[] = {"mon.a", "osd.0"};
	scenario("OSD crash", osd, 1, lng ? 20 : 10);
	scenario("monitor crash", mon, 1, lng ? 20 : 10);
	if (lng)
		scenario("monitor and OSD crash", both, 2, 20);

	atomic_store(&g_stop, true);
	for (unsigned i = 0; i < WORKERS; i++)
		pthread_join(W[i].thread, NULL);
	printf("load: %u commands, %u ok, %u answered 82h, max latency %llu ms\n", atomic_load(&g_ops),
	       atomic_load(&g_ok), atomic_load(&g_notready), (unsigned long long)atomic_load(&g_max_lat));
	CHECK(atomic_load(&g_bad_status) == 0, "%u commands answered something other than success or 82h",
	      atomic_load(&g_bad_status));
	CHECK(atomic_load(&g_slow) == 0, "%u commands took longer than the op timeout + %u ms", atomic_load(&g_slow),
	      GRACE_MS);
	CHECK(atomic_load(&g_corrupt) == 0, "%u values read back were stale or torn", atomic_load(&g_corrupt));

	/* Every key, through a new controller: the last acknowledged value (or a later attempt). */
	struct h_ctrl *c = h_connect();
	struct h_qp *q = h_qp_create(c, 1, 4);
	unsigned checked = 0, bad = 0;
	for (unsigned i = 0; q && i < WORKERS; i++)
		for (unsigned k = 0; k < KEYS_PER_WORKER; k++) {
			struct key_state *ks = &W[i].keys[k];
			uint8_t key[16];
			uint32_t dw0 = 0, xfer = 0;
			key_name(i, k, key);
			unsigned st = h_kv(q, NKV_KV_RETRIEVE, 1, key, 16, g_max_len, 0, W[i].buf, g_max_len, &dw0, &xfer);
			bool ok = st == 0 ? value_ok(ks, W[i].buf, xfer)
					  : st == SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST) && !ks->acked_seed;
			checked++;
			if (!ok) {
				bad++;
				fprintf(stderr, "final: worker %u key %u: status %03x, %u bytes, acknowledged %u bytes\n", i,
					k, st, xfer, ks->acked_len);
			}
		}
	CHECK(q && bad == 0, "%u of %u keys did not read back as acknowledged", bad, checked);
	printf("final: %u keys read back, %u wrong\n", checked, bad);
	if (q)
		h_qp_destroy(q);
	h_disconnect(c);
	for (unsigned i = 0; i < WORKERS; i++) {
		h_qp_destroy(W[i].qp);
		h_disconnect(W[i].ctrl);
		free(W[i].buf);
	}
	return h_finish();
}
