/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_engine.h - the load generator behind `nkv bench` and the baseline harnesses in bench/
 * (raw librados, RGW S3, Redis): one workload model, one value pattern, one histogram and one report
 * format, so every system is measured and verified the same way. It knows nothing of any transport:
 * a backend supplies per-worker submit/poll calls and completes each I/O with bh_io_done().
 *
 * Workloads (mode=):
 *   raw  read-after-write: phase "write" stores keys 0..N-1 once each, then phase "read" retrieves the
 *        same keys in the same order (N bounded by keys=, bytes=, ops= and time=), then (cleanup=1)
 *        phase "cleanup" deletes them. This is what bench/compare.sh runs at every point.
 *   mix  optional "fill" (store every key once), "warmup" seconds (not reported), then phase "mix":
 *        random keys with the read/write/exist percentages of mix=, for time= seconds or ops= ops.
 *
 * Values: every value carries a 32-byte header (magic, key index, version, length, check) followed by a
 * pattern derived from key and version (values under 32 bytes are pattern only). Every retrieved value
 * is checked against it, and against the version and length the generator last stored, so a run can
 * never report fast wrong data: mismatches and errors are reported and make bh_run() return 1.
 *
 * CPU: every phase also reports the client process's CPU time per operation (getrusage RUSAGE_SELF,
 * user + system, every thread of the process, a client library's own threads included) and, with
 * watch=NAME:PID,..., that of other processes on the machine (the gateway, the OSD: /proc/PID/stat,
 * in clock ticks), each sampled just before the phase's first I/O and just after its last completion
 * and divided by the phase's operations (all kinds, failed ones included).
 */
#ifndef NKV_BENCH_ENGINE_H
#define NKV_BENCH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum bh_op { BH_WRITE, BH_READ, BH_EXIST, BH_DELETE, BH_NOPS };

#define BH_MAX_SIZES 16
#define BH_KEY_MAX 16
#define BH_MAX_WATCH 4 /* watch=: other processes whose CPU time each phase reports */

struct bh_worker;

/** One I/O. The backend reads op/key/name/buf/len and may use priv; the rest is the engine's. */
struct bh_io {
	enum bh_op op;
	uint8_t key[BH_KEY_MAX];
	unsigned klen;
	char name[2 * BH_KEY_MAX + 1]; /* lowercase hex of the key: RADOS object / S3 object / Redis key */
	void *buf;                     /* write: the value; read: the buffer (len bytes) */
	size_t len;
	void *priv;                    /* backend's per-I/O state */
	/* engine */
	struct bh_worker *w;
	uint64_t idx;
	uint64_t t0;                   /* latency runs from here: when this slot last became free (or
				        * its phase started), not when it was submitted */
	uint32_t ver;
	size_t vlen;                   /* expected value length (read) */
	void *slotbuf;
	size_t slotcap;
	unsigned phase;
	bool busy;
};

/** A transport: the engine calls worker_init on each worker thread, then only that thread's ctx. */
struct bh_backend {
	const char *name;
	void *arg;
	/** Connect one worker (its own connection / queue pair). @qd: most I/Os in flight. NULL: failed. */
	void *(*worker_init)(void *arg, unsigned worker, unsigned qd);
	void (*worker_fini)(void *ctx);
	/** I/O buffer of @len bytes (NULL: use malloc). */
	void *(*buf_alloc)(void *ctx, size_t len);
	void (*buf_free)(void *ctx, void *buf);
	/** Queue @io. @return 0, -EAGAIN (full: poll, then try again) or -errno (the I/O failed). */
	int (*submit)(void *ctx, struct bh_io *io);
	/** Send what is queued and complete what finished (bh_io_done), waiting up to @timeout_ms (< 0:
	 *  until one completes). @return completions (>= 0) or -errno (the connection failed). */
	int (*poll)(void *ctx, int timeout_ms);
};

/**
 * Complete @io: @rc 0, -ENOENT (no such key) or another -errno; for reads @got bytes landed in
 * io->buf and @full is the stored value's size (as far as the backend knows it; pass @got if not).
 * A backend whose read buffers are its own (e.g. a reply object) passes @data (else NULL: io->buf).
 */
void bh_io_done(struct bh_io *io, int rc, size_t got, size_t full, const void *data);

/** A process whose CPU time (/proc/PID/stat utime + stime) every phase reports (watch=). */
struct bh_watch {
	char name[16];
	int pid;
};

struct bh_conf {
	bool raw;                      /* mode=raw (true) or mix */
	unsigned qd, conns;
	size_t sizes[BH_MAX_SIZES];
	unsigned nsizes;
	uint64_t keys;                 /* key space (mix) / most keys (raw) */
	unsigned pct[BH_NOPS];         /* mix percentages: write, read, exist (delete unused) */
	double warmup, time;           /* seconds; time bounds every phase */
	uint64_t ops, bytes;           /* per phase; 0: unbounded */
	bool fill, cleanup;
	char prefix[9];                /* key prefix (keys are PREFIX + 8 hex digits of the index) */
	uint32_t seed;                 /* version seed (0: random) */
	int progress;                  /* -1 auto (stderr is a TTY), 0 off, 1 on */
	bool json;
	const char *tool;              /* "nkv-bench", "rados-bench"... */
	const char *command;           /* JSON report's "command" (nkv: "bench"); NULL: none */
	const char *target;            /* printed in the report */
	unsigned nwatch;               /* watch=NAME:PID,...: processes (a gateway, the OSD) whose CPU */
	struct bh_watch watch[BH_MAX_WATCH]; /* time each phase reports next to the client's own */
};

/** Defaults: raw, qd 1, 1 conn, 4 KiB, 1024 keys, time 10 s, cleanup on, prefix "nb". */
void bh_conf_init(struct bh_conf *c, bool raw);
/** Apply one KEY=VALUE workload argument. @return 0, or -EINVAL with a message on stderr. */
int bh_conf_arg(struct bh_conf *c, const char *arg);
/** Text listing every KEY=VALUE. */
extern const char bh_conf_help[];

/** Run the workload. @return 0 (all ok), 1 (errors or mismatches), 2 (could not start). */
int bh_run(const struct bh_conf *c, const struct bh_backend *b);

/* Helpers shared with the harnesses. */
uint64_t bh_now_ns(void);
void bh_fill(void *buf, size_t len, uint64_t idx, uint32_t ver);
/** @return 0 or -1 (reason in @why). @want_ver 0: any version. */
int bh_verify(const void *buf, size_t len, uint64_t idx, uint32_t want_ver, char why[96]);

#endif
