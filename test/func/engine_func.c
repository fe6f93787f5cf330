/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine_func.c - libnkv's engine (nkv_engine_*), buffer registration (nkv_buf_register) and long
 * names (nkv_lname_*) against the target over NVMe/TCP or shared memory, on mem or the micro cluster:
 *   - nkv_engine_run: 512 Stores of mixed sizes (0 B - 1 MiB) in one batch spread over 4 queue pairs,
 *     then Retrieves verifying every byte, Exist, Retrieve of absent keys (-ENOENT, 87h), Delete, a
 *     List, and a Retrieve into a short buffer (value size in value_size, only len bytes moved);
 *   - 8 threads running batches at once on one engine;
 *   - one-op batches of nkv_engine_run() (which a caller runs on an idle worker's queue pair itself)
 *     from 6 threads at once, while the main thread keeps 32 one-op nkv_engine_submit() batches in
 *     flight on the same queue pairs: every value reads back intact, every tag comes back once;
 *   - nkv_engine_submit + eventfd + nkv_engine_reap: 64 batches in flight, every tag back once, the
 *     eventfd readable exactly while tags wait; also after a blocking reap (which drives the queue
 *     pairs itself) took fewer than were done; an op submitted after the last blocking reap completes
 *     without another one;
 *   - bad ops (type, key length, NULL buffer, offset on a Store) refuse the whole batch with -EINVAL
 *     and that op's rc; max_ops gives -EAGAIN;
 *   - shm: nkv_buf_register of malloc'ed memory keeps its bytes and addresses, turns its whole pages
 *     into a memfd mapping, and Retrieves land there; a file mapping is refused; overlaps -EEXIST;
 *     unregister twice -ENOENT;
 *   - long names: a value written as header + payload reads back as a hit through the header check;
 *     another name's header under the same key is a collision.
 * Usage: engine_func mem|rados tcp|shm|vfio-user
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

#define NSID 1
#define NOPS 512
#define MAXV (1u << 20)
#define THREADS 8
#define ASYNC_BATCHES 64

static struct nkv_engine *g_e;
static struct nkv_ctrl *g_ctrl;

static uint32_t val_len(unsigned i)
{
	static const uint32_t sizes[] = {0, 1, 4095, 4096, 4097, 65536, 300000, MAXV};
	return sizes[i % 8];
}

static void op_key(struct nkv_op *op, const char *pfx, unsigned i)
{
	char k[17];
	int n = snprintf(k, sizeof(k), "%s%u", pfx, i);
	memcpy(op->key, k, (size_t)n);
	op->klen = (uint8_t)n;
	op->nsid = NSID;
}

static void test_run(void)
{
	struct nkv_op *ops = calloc(NOPS, sizeof(*ops));
	uint8_t **bufs = calloc(NOPS, sizeof(*bufs));
	for (unsigned i = 0; i < NOPS; i++) {
		bufs[i] = malloc(val_len(i) + 1);
		h_fill(bufs[i], val_len(i), i);
		op_key(&ops[i], "e", i);
		ops[i].type = NKV_OP_STORE;
		ops[i].buf = bufs[i];
		ops[i].len = val_len(i);
	}
	int rc = nkv_engine_run(g_e, ops, NOPS);
	CHECK(rc == 0, "run of %u stores: %d failed (op 0 rc %d)", NOPS, rc, ops[0].rc);

	for (unsigned i = 0; i < NOPS; i++) {
		memset(bufs[i], 0, val_len(i) + 1);
		ops[i].type = NKV_OP_RETRIEVE;
		ops[i].len = val_len(i) + 1;
	}
	rc = nkv_engine_run(g_e, ops, NOPS);
	unsigned bad = 0;
	for (unsigned i = 0; i < NOPS; i++)
		bad += ops[i].rc || ops[i].value_size != val_len(i) || ops[i].xfer != val_len(i) ||
		       !h_verify(bufs[i], val_len(i), i);
	CHECK(rc == 0 && bad == 0, "run of %u retrieves: rc %d, %u bad", NOPS, rc, bad);

	/* a short buffer: value_size is the full size, only len bytes moved */
	struct nkv_op s = ops[7];
	uint8_t small[100];
	s.buf = small;
	s.len = sizeof(small);
	rc = nkv_engine_run(g_e, &s, 1);
	CHECK(rc == 0 && s.rc == 0 && s.value_size == MAXV && s.xfer == sizeof(small) && h_verify(small, 100, 7),
	      "short retrieve: rc %d/%d size %u xfer %u", rc, s.rc, s.value_size, s.xfer);

	/* exist: half present, half absent; retrieve of absent keys */
	struct nkv_op mix[4] = {0};
	for (unsigned i = 0; i < 4; i++) {
		op_key(&mix[i], i < 2 ? "e" : "absent", i);
		mix[i].type = i % 2 ? NKV_OP_RETRIEVE : NKV_OP_EXIST;
		mix[i].buf = i % 2 ? small : NULL;
		mix[i].len = i % 2 ? sizeof(small) : 0;
	}
	rc = nkv_engine_run(g_e, mix, 4);
	CHECK(rc == 2 && mix[0].rc == 0 && mix[1].rc == 0 && mix[2].rc == -ENOENT && mix[3].rc == -ENOENT &&
		      (mix[3].status & 0xff) == NKV_SC_KV_KEY_NOT_EXIST,
	      "exist/retrieve mix: %d failed, rc %d %d %d %d status %#x", rc, mix[0].rc, mix[1].rc, mix[2].rc,
	      mix[3].rc, mix[3].status);

	/* list from "e1" */
	uint8_t lbuf[4096];
	struct nkv_op l = {.type = NKV_OP_LIST, .nsid = NSID, .klen = 2, .key = "e1", .buf = lbuf, .len = sizeof(lbuf)};
	rc = nkv_engine_run(g_e, &l, 1);
	uint64_t pos = 0;
	uint8_t k[16];
	unsigned kl, nk = 0;
	bool sorted_ok = true;
	char prev[17] = "e1";
	while (rc == 0 && nkv_list_next(lbuf, l.xfer, &pos, k, &kl) == 1) {
		char cur[17] = {0};
		memcpy(cur, k, kl);
		sorted_ok &= strcmp(cur, prev) >= 0;
		memcpy(prev, cur, sizeof(prev));
		nk++;
	}
	CHECK(rc == 0 && l.rc == 0 && nk > 0 && sorted_ok, "list: rc %d/%d, %u keys, sorted %d", rc, l.rc, nk,
	      sorted_ok);

	for (unsigned i = 0; i < NOPS; i++) {
		ops[i].type = NKV_OP_DELETE;
		ops[i].buf = NULL;
		ops[i].len = 0;
	}
	rc = nkv_engine_run(g_e, ops, NOPS);
	CHECK(rc == 0, "run of %u deletes: %d failed", NOPS, rc);
	rc = nkv_engine_run(g_e, ops, 4);
	CHECK(rc == 4 && ops[0].rc == -ENOENT, "deleting again: %d failed, rc %d", rc, ops[0].rc);
	for (unsigned i = 0; i < NOPS; i++)
		free(bufs[i]);
	free(bufs);
	free(ops);
}

static void *thread_main(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg, bad = 0;
	enum { N = 32, LEN = 8192 };
	struct nkv_op ops[N];
	static __thread uint8_t bufs[N][LEN];
	for (unsigned round = 0; round < 8; round++) {
		memset(ops, 0, sizeof(ops));
		for (unsigned i = 0; i < N; i++) {
			char pfx[8];
			snprintf(pfx, sizeof(pfx), "t%u_", t);
			op_key(&ops[i], pfx, i);
			ops[i].type = round % 2 ? NKV_OP_RETRIEVE : NKV_OP_STORE;
			ops[i].buf = bufs[i];
			ops[i].len = LEN;
			if (!(round % 2))
				h_fill(bufs[i], LEN, t * 1000 + i + round);
			else
				memset(bufs[i], 0, LEN);
		}
		int rc = nkv_engine_run(g_e, ops, N);
		bad += rc != 0;
		if (round % 2)
			for (unsigned i = 0; i < N; i++)
				bad += !h_verify(bufs[i], LEN, t * 1000 + i + round - 1);
	}
	return (void *)(uintptr_t)bad;
}

static void test_threads(void)
{
	pthread_t th[THREADS];
	for (unsigned t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, thread_main, (void *)(uintptr_t)t);
	unsigned bad = 0;
	for (unsigned t = 0; t < THREADS; t++) {
		void *r;
		pthread_join(th[t], &r);
		bad += (unsigned)(uintptr_t)r;
	}
	CHECK(bad == 0, "%u threads x 8 batches x 32 ops store/verify: %u bad", THREADS, bad);
}

/* One-op runs: Store, Retrieve and check, INLINE_ROUNDS times, on keys of its own. */
enum { INLINE_THREADS = 6, INLINE_ROUNDS = 300, INLINE_LEN = 4096, STREAM_QD = 32 };

static void *inline_main(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg, bad = 0;
	uint8_t *buf = malloc(INLINE_LEN);
	for (unsigned r = 0; r < INLINE_ROUNDS; r++) {
		struct nkv_op op = {.type = NKV_OP_STORE, .buf = buf, .len = INLINE_LEN};
		char pfx[8];
		snprintf(pfx, sizeof(pfx), "i%u_", t);
		op_key(&op, pfx, r % 16);
		h_fill(buf, INLINE_LEN, t * 100000 + r);
		bad += nkv_engine_run(g_e, &op, 1) != 0 || op.rc != 0;
		memset(buf, 0, INLINE_LEN);
		op.type = NKV_OP_RETRIEVE;
		bad += nkv_engine_run(g_e, &op, 1) != 0 || op.rc != 0 || op.xfer != INLINE_LEN ||
		       !h_verify(buf, INLINE_LEN, t * 100000 + r);
	}
	free(buf);
	return (void *)(uintptr_t)bad;
}

static void test_inline_mix(void)
{
	pthread_t th[INLINE_THREADS];
	struct nkv_op ops[STREAM_QD];
	uint8_t *sbuf = malloc((size_t)STREAM_QD * INLINE_LEN);
	unsigned bad = 0, inflight = 0, reaped = 0, bad_tags = 0;
	bool out[STREAM_QD] = {false};
	for (unsigned k = 0; k < STREAM_QD; k++) { /* values the stream reads back over and over */
		ops[k] = (struct nkv_op){.type = NKV_OP_STORE, .buf = sbuf + (size_t)k * INLINE_LEN, .len = INLINE_LEN};
		op_key(&ops[k], "st", k);
		h_fill(ops[k].buf, INLINE_LEN, 7000 + k);
	}
	int rc = nkv_engine_run(g_e, ops, STREAM_QD);
	CHECK(rc == 0, "stream keys stored: %d failed", rc);
	for (unsigned t = 0; t < INLINE_THREADS; t++)
		pthread_create(&th[t], NULL, inline_main, (void *)(uintptr_t)t);
	/* keep STREAM_QD one-op batches in flight until the inline threads are done */
	bool stop = false;
	unsigned joined = 0;
	while (!stop || inflight) {
		for (unsigned k = 0; k < STREAM_QD && !stop; k++) {
			if (out[k])
				continue;
			ops[k].type = NKV_OP_RETRIEVE;
			memset(ops[k].buf, 0, INLINE_LEN);
			if (nkv_engine_submit(g_e, &ops[k], 1, k) == 0) {
				out[k] = true;
				inflight++;
			} else {
				bad++;
			}
		}
		uint64_t tags[STREAM_QD];
		int n = nkv_engine_reap(g_e, tags, STREAM_QD, 2000);
		if (n <= 0) {
			bad++;
			break;
		}
		for (int i = 0; i < n; i++) {
			unsigned k = (unsigned)tags[i];
			if (k >= STREAM_QD || !out[k]) {
				bad_tags++;
				continue;
			}
			out[k] = false;
			inflight--;
			reaped++;
			bad += ops[k].rc != 0 || !h_verify(ops[k].buf, INLINE_LEN, 7000 + k);
		}
		void *r;
		while (joined < INLINE_THREADS && pthread_tryjoin_np(th[joined], &r) == 0) {
			bad += (unsigned)(uintptr_t)r;
			joined++;
		}
		stop = joined == INLINE_THREADS;
	}
	CHECK(bad == 0 && bad_tags == 0 && joined == INLINE_THREADS && reaped > 0,
	      "%u threads x %u one-op store/retrieve runs beside %u streamed retrieves (%u reaped): %u bad, "
	      "%u unknown tags",
	      INLINE_THREADS, INLINE_ROUNDS, STREAM_QD, reaped, bad, bad_tags);
	/* A reap that timed out above left ops in flight: their buffers stay until each one is back (the
	 * engine's deadline completes them), or are leaked rather than freed under a write. */
	for (uint64_t end = nkv_now_ns() + 30000000000ull; inflight && nkv_now_ns() < end;) {
		uint64_t tags[STREAM_QD];
		int n = nkv_engine_reap(g_e, tags, STREAM_QD, 1000);
		inflight -= n > 0 ? (unsigned)n : 0;
	}
	while (joined < INLINE_THREADS)
		pthread_join(th[joined++], NULL);
	CHECK(inflight == 0, "%u streamed retrieves never came back", inflight);
	if (inflight == 0)
		free(sbuf);
}

static bool fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void test_async(void)
{
	enum { PER = 4, LEN = 4096 };
	struct nkv_op *ops = calloc(ASYNC_BATCHES * PER, sizeof(*ops));
	uint8_t *buf = malloc((size_t)ASYNC_BATCHES * PER * LEN);
	int efd = nkv_engine_eventfd(g_e);
	CHECK(efd >= 0 && !fd_readable(efd), "eventfd %d idle", efd);
	for (unsigned b = 0; b < ASYNC_BATCHES; b++) {
		for (unsigned i = 0; i < PER; i++) {
			struct nkv_op *op = &ops[b * PER + i];
			op_key(op, "as", b * PER + i);
			op->type = NKV_OP_STORE;
			op->buf = buf + (size_t)(b * PER + i) * LEN;
			op->len = LEN;
			h_fill(op->buf, LEN, b * PER + i);
		}
		int rc = nkv_engine_submit(g_e, &ops[b * PER], PER, 1000 + b);
		CHECK(rc == 0, "submit batch %u: %d", b, rc);
	}
	bool seen[ASYNC_BATCHES] = {false};
	unsigned got = 0, dup = 0, waits = 0;
	while (got < ASYNC_BATCHES && waits < 100) {
		struct pollfd p = {.fd = efd, .events = POLLIN};
		if (poll(&p, 1, 100) != 1) {
			waits++;
			continue;
		}
		uint64_t tags[16];
		int n = nkv_engine_reap(g_e, tags, 16, 0);
		for (int i = 0; i < n; i++) {
			unsigned b = (unsigned)(tags[i] - 1000);
			if (b >= ASYNC_BATCHES || seen[b])
				dup++;
			else
				seen[b] = true;
			got++;
		}
	}
	unsigned failed = 0;
	for (unsigned i = 0; i < ASYNC_BATCHES * PER; i++)
		failed += ops[i].rc != 0;
	CHECK(got == ASYNC_BATCHES && dup == 0 && failed == 0 && !fd_readable(efd),
	      "reaped %u of %u tags (%u unknown or twice), %u ops failed, eventfd still readable %d", got,
	      ASYNC_BATCHES, dup, failed, fd_readable(efd));
	uint64_t t;
	CHECK(nkv_engine_reap(g_e, &t, 1, 50) == 0, "reap with nothing left waits and returns 0");
	free(buf);
	free(ops);
}

/** Blocking reaps drive the queue pairs on the calling thread (engine_drive): what the driver
 *  completes and leaves queued still makes the eventfd readable, and once the caller stops reaping,
 *  the workers take over (a streamed op completes without any reap). */
static void test_drive(void)
{
	enum { N = 8, LEN = 4096 };
	struct nkv_op ops[N];
	uint8_t *buf = malloc((size_t)N * LEN);
	int efd = nkv_engine_eventfd(g_e);
	for (unsigned round = 0; round < 20; round++) {
		for (unsigned i = 0; i < N; i++) {
			ops[i] = (struct nkv_op){.type = NKV_OP_STORE, .buf = buf + (size_t)i * LEN, .len = LEN};
			op_key(&ops[i], "dr", i);
			h_fill(ops[i].buf, LEN, round * N + i);
			CHECK(nkv_engine_submit(g_e, &ops[i], 1, i) == 0, "drive: submit %u", i);
		}
		uint64_t tags[N];
		unsigned got = 0, bad = 0;
		int n = nkv_engine_reap(g_e, tags, 1, 2000); /* takes one; the rest queue behind it */
		got += n > 0 ? (unsigned)n : 0;
		while (got < N) { /* the others: the eventfd must say so, whoever completed them */
			struct pollfd p = {.fd = efd, .events = POLLIN};
			if (poll(&p, 1, 2000) != 1)
				break;
			n = nkv_engine_reap(g_e, tags, N, 0);
			got += n > 0 ? (unsigned)n : 0;
		}
		for (unsigned i = 0; i < N; i++)
			bad += ops[i].rc != 0;
		if (got != N || bad || fd_readable(efd)) {
			CHECK(false, "drive round %u: %u of %u tags seen through the eventfd, %u failed, eventfd left %d",
			      round, got, N, bad, fd_readable(efd));
			break;
		}
	}
	/* a stream, then no more blocking reaps: the op must complete by itself (the worker takes the
	 * queue pair back about a millisecond after the last reap let go of it) */
	unsigned late = 0;
	for (unsigned round = 0; round < 20; round++) {
		uint64_t t;
		ops[0].type = NKV_OP_RETRIEVE;
		CHECK(nkv_engine_submit(g_e, &ops[0], 1, 1) == 0 && nkv_engine_reap(g_e, &t, 1, 2000) == 1,
		      "drive: stream op");
		CHECK(nkv_engine_submit(g_e, &ops[0], 1, 2) == 0, "drive: one more op");
		struct pollfd p = {.fd = efd, .events = POLLIN};
		late += poll(&p, 1, 2000) != 1; /* never, were the queue pair not taken back: any bound tells */
		CHECK(nkv_engine_reap(g_e, &t, 1, 2000) == 1 && t == 2 && ops[0].rc == 0, "drive: the op's tag");
	}
	CHECK(late == 0, "ops submitted after the last blocking reap completed without one: %u of 20 waited > 2 s",
	      late);
	free(buf);
}

static void test_bad_ops(void)
{
	uint8_t b[8];
	struct nkv_op ops[5] = {0};
	for (unsigned i = 0; i < 5; i++) {
		op_key(&ops[i], "bad", i);
		ops[i].type = NKV_OP_EXIST;
	}
	ops[1].type = 99;
	ops[2].klen = 17;
	ops[3].type = NKV_OP_STORE; /* NULL buffer with a length */
	ops[3].len = 8;
	ops[4].type = NKV_OP_STORE; /* an offset only means something to a Retrieve */
	ops[4].buf = b;
	ops[4].len = 8;
	ops[4].offset = 4;
	int rc = nkv_engine_run(g_e, ops, 5);
	CHECK(rc == -EINVAL && ops[0].rc == 0 && ops[1].rc == -EINVAL && ops[2].rc == -EINVAL && ops[3].rc == -EINVAL &&
		      ops[4].rc == -EINVAL,
	      "bad ops: %d (%d %d %d %d %d)", rc, ops[0].rc, ops[1].rc, ops[2].rc, ops[3].rc, ops[4].rc);
	CHECK(nkv_engine_run(g_e, ops, 0) == -EINVAL, "empty batch");

	struct nkv_engine *small;
	struct nkv_engine_opts o = {.queues = 1, .max_ops = 4};
	rc = nkv_engine_create(g_ctrl, &o, &small);
	CHECK(rc == 0 && nkv_engine_queues(small) == 1, "engine with max_ops 4: %d", rc);
	if (rc)
		return;
	struct nkv_op five[5] = {0};
	for (unsigned i = 0; i < 5; i++) {
		op_key(&five[i], "five", i);
		five[i].type = NKV_OP_EXIST;
	}
	CHECK(nkv_engine_submit(small, five, 5, 1) == -EAGAIN, "5 ops over max_ops 4: -EAGAIN");
	CHECK(nkv_engine_run(small, five, 4) == 4 && five[0].rc == -ENOENT, "4 ops fit");
	nkv_engine_destroy(small);
}

/** Is [p, p + len) mapped from a memfd named "nkv-user"? */
static bool mapped_from_memfd(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;
	while (f && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi)
			found = strstr(line, "memfd:nkv-user") != NULL;
	}
	if (f)
		fclose(f);
	return found;
}

static void test_bufreg(void)
{
	enum { LEN = 3 << 20 };
	uint8_t *m = malloc(LEN + 123);
	uint8_t *p = m + 123; /* not page aligned: the whole pages inside are registered */
	h_fill(p, LEN, 77);
	int rc = nkv_buf_register(g_ctrl, p, LEN);
	CHECK(rc == 0, "register malloc'ed memory: %d", rc);
	CHECK(h_verify(p, LEN, 77), "the bytes are unchanged after registration");
	uint8_t *mid = p + LEN / 2;
	CHECK(h_is_tcp() || mapped_from_memfd(mid), "the pages are now a memfd mapping (shm)");
	CHECK(nkv_buf_register(g_ctrl, p + 4096, 8192) == (h_is_tcp() ? 0 : -EEXIST), "overlapping registration");

	/* store from it, retrieve into it at another place, through the engine */
	struct nkv_op op = {.type = NKV_OP_STORE, .buf = p, .len = 1 << 20};
	op_key(&op, "reg", 0);
	CHECK(nkv_engine_run(g_e, &op, 1) == 0, "store from registered memory: %d", op.rc);
	memset(mid, 0, 1 << 20);
	op.type = NKV_OP_RETRIEVE;
	op.buf = mid;
	CHECK(nkv_engine_run(g_e, &op, 1) == 0 && op.xfer == 1u << 20 && h_verify(mid, 1 << 20, 77),
	      "retrieve into registered memory: rc %d xfer %u", op.rc, op.xfer);
	CHECK(nkv_buf_unregister(g_ctrl, p) == 0, "unregister");
	CHECK(nkv_buf_unregister(g_ctrl, p) == (h_is_tcp() ? 0 : -ENOENT), "unregister twice");
	CHECK(h_verify(mid, 1 << 20, 77), "memory intact after unregister");
	free(m);

	/* sparse memory: only the pages that hold data are copied; the rest read as zeros */
	enum { SPARSE = 256u << 20 };
	uint8_t *sp = mmap(NULL, SPARSE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sp != MAP_FAILED) {
		static const size_t at[] = {0, 5 * 4096 + 17, (size_t)SPARSE - 1};
		for (unsigned i = 0; i < 3; i++)
			sp[at[i]] = (uint8_t)(0xa0 + i);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = nkv_buf_register(g_ctrl, sp, SPARSE);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		bool ok = rc == 0;
		for (unsigned i = 0; i < 3; i++)
			ok &= sp[at[i]] == (uint8_t)(0xa0 + i);
		ok &= sp[1] == 0 && sp[6 * 4096] == 0 && sp[SPARSE / 2] == 0;
		printf("registered 256 MiB with 3 touched pages in %.1f ms\n",
		       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
		CHECK(ok, "sparse registration keeps the touched bytes and zeros: rc %d", rc);
		CHECK(nkv_buf_unregister(g_ctrl, sp) == 0, "unregister the sparse region");
		munmap(sp, SPARSE);
	}

	/* a file mapping cannot become a memfd */
	char path[] = "/tmp/engine_func_XXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0 && ftruncate(fd, 65536) == 0) {
		void *f = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(f != MAP_FAILED && nkv_buf_register(g_ctrl, f, 65536) == (h_is_tcp() ? 0 : -EINVAL),
		      "file mapping refused over shm");
		if (f != MAP_FAILED)
			munmap(f, 65536);
	}
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	CHECK(nkv_buf_register(g_ctrl, NULL, 10) == -EINVAL && nkv_buf_register(g_ctrl, path, 0) == -EINVAL,
	      "NULL or empty registration");
}

static void test_lname(void)
{
	static const char name[] = "llama-3-70b@8@3@0123456789abcdef0123456789abcdef@bfloat16";
	const size_t nl = sizeof(name) - 1;
	uint32_t h = nkv_lname_hdr_size(nl);
	enum { PAY = 100000 };
	uint8_t *v = malloc(h + PAY);
	CHECK(nkv_lname_hdr_pack(name, nl, PAY, v, h) == (int)h, "pack header of %u bytes", h);
	h_fill(v + h, PAY, 5);
	struct nkv_op op = {.type = NKV_OP_STORE, .nsid = NSID, .klen = 16, .buf = v, .len = h + PAY};
	CHECK(nkv_lname_key(name, nl, op.key) == 0, "derive key");
	CHECK(nkv_engine_run(g_e, &op, 1) == 0, "store named value: %d", op.rc);

	/* header and payload read at once: the payload straight into its own buffer */
	uint8_t *hdr = calloc(1, h), *pay = calloc(1, PAY);
	struct nkv_op rd[2] = {op, op};
	rd[0].type = rd[1].type = NKV_OP_RETRIEVE;
	rd[0].buf = hdr;
	rd[0].len = h;
	rd[1].buf = pay;
	rd[1].len = PAY;
	rd[1].offset = h;
	int rc = nkv_engine_run(g_e, rd, 2);
	uint64_t plen = 0;
	CHECK(rc == 0 && rd[1].xfer == PAY && nkv_lname_hdr_check(hdr, h, name, nl, &plen) == (int)h && plen == PAY &&
		      h_verify(pay, PAY, 5),
	      "named read: rc %d (%d %d) xfer %u plen %llu", rc, rd[0].rc, rd[1].rc, rd[1].xfer,
	      (unsigned long long)plen);

	/* another name of the same length under this key: a collision, read as a miss */
	char other[sizeof(name)];
	memcpy(other, name, sizeof(name));
	other[0] = 'L';
	nkv_lname_hdr_pack(other, nl, PAY, v, h);
	CHECK(nkv_engine_run(g_e, &op, 1) == 0, "overwrite with a colliding header");
	CHECK(nkv_engine_run(g_e, rd, 1) == 0 && nkv_lname_hdr_check(hdr, h, name, nl, &plen) == -ENOENT,
	      "colliding header is a miss");
	free(v);
	free(hdr);
	free(pay);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "engine_func");
	if (h_is_loop()) {
		fprintf(stderr, "engine_func: needs a libnkv transport (tcp or shm)\n");
		return 77;
	}
	h_add_ns(NSID, "engine", 0, false);
	struct h_ctrl *c = h_connect();
	g_ctrl = h_lib(c);
	struct nkv_engine_opts o = {.queues = 4, .depth = 32};
	int rc = nkv_engine_create(g_ctrl, &o, &g_e);
	CHECK(rc == 0 && nkv_engine_queues(g_e) == 4, "engine over 4 queue pairs: %d", rc);
	if (rc == 0) {
		test_run();
		test_threads();
		test_inline_mix();
		test_async();
		test_drive();
		test_bad_ops();
		test_bufreg();
		test_lname();
		nkv_engine_destroy(g_e);
	}
	h_disconnect(c); /* first: a vfio-user socket serves one client at a time */
	if (h_is_shm()) { /* nkv_connect's "shm:" form with no SUBNQN takes the socket's subsystem */
		char addr[128];
		struct nkv_ctrl *sc = NULL;
		snprintf(addr, sizeof(addr), "%s:%s", H.vfio_user ? "vfio-user" : "shm", H.sock);
		rc = nkv_connect(addr, NULL, NULL, NULL, &sc);
		CHECK(rc == 0, "nkv_connect(\"%s\", NULL subnqn): %d", addr, rc);
		nkv_disconnect(sc);
	}
	return h_finish();
}
