/* SPDX-License-Identifier: Apache-2.0 */
/* bench_engine.c - see bench_engine.h. */
#include "bench_engine.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- clock, pattern ----------------------------------------------------------------------------- */

uint64_t bh_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define BH_MAGIC 0x4e4b5642u /* "BVKN" */
#define BH_HDR 32
#define BH_STEP 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t seed_of(uint64_t idx, uint32_t ver)
{
	return mix64(idx * 0x100000001b3ull ^ ((uint64_t)ver << 17) ^ 0x6a09e667f3bcc909ull);
}

struct bh_hdr {
	uint32_t magic, ver;
	uint64_t idx, len, check;
};

static uint64_t hdr_check(const struct bh_hdr *h)
{
	return mix64(h->idx ^ mix64(h->len ^ ((uint64_t)h->ver << 32 | h->magic)));
}

/* Word i of the value (byte offset 8*i) is seed + i * STEP; then the header overwrites bytes 0..31. */
void bh_fill(void *buf, size_t len, uint64_t idx, uint32_t ver)
{
	uint64_t s = seed_of(idx, ver);
	size_t nw = len / 8;
	uint64_t *p = buf;
	for (size_t i = 0; i < nw; i++)
		p[i] = s + i * BH_STEP;
	if (len % 8) {
		uint64_t last = s + nw * BH_STEP;
		memcpy((uint8_t *)buf + nw * 8, &last, len % 8);
	}
	if (len >= BH_HDR) {
		struct bh_hdr h = {.magic = BH_MAGIC, .ver = ver, .idx = idx, .len = len};
		h.check = hdr_check(&h);
		memcpy(buf, &h, sizeof(h));
	}
}

int bh_verify(const void *buf, size_t len, uint64_t idx, uint32_t want_ver, char why[96])
{
	uint32_t ver = want_ver;
	size_t from = 0;
	if (len >= BH_HDR) {
		struct bh_hdr h;
		memcpy(&h, buf, sizeof(h));
		if (h.magic != BH_MAGIC || h.check != hdr_check(&h)) {
			snprintf(why, 96, "bad header (not a bench value, or corrupt)");
			return -1;
		}
		if (h.idx != idx) {
			snprintf(why, 96, "value of key %" PRIu64 " returned for key %" PRIu64, h.idx, idx);
			return -1;
		}
		if (h.len != len) {
			snprintf(why, 96, "length %zu, header says %" PRIu64, len, h.len);
			return -1;
		}
		if (want_ver && h.ver != want_ver) {
			snprintf(why, 96, "version %" PRIu32 ", expected %" PRIu32 " (stale value)", h.ver, want_ver);
			return -1;
		}
		ver = h.ver;
		from = BH_HDR / 8;
	} else if (!want_ver) {
		return 0; /* too short to carry its version: nothing to check against */
	}
	uint64_t s = seed_of(idx, ver);
	size_t nw = len / 8;
	const uint64_t *p = buf;
	uint64_t bad = 0;
	for (size_t i = from; i < nw; i++)
		bad |= p[i] ^ (s + i * BH_STEP);
	if (!bad && len % 8) {
		uint64_t last = s + nw * BH_STEP, got = 0;
		memcpy(&got, (const uint8_t *)buf + nw * 8, len % 8);
		uint64_t mask = (len % 8) ? ((1ull << (8 * (len % 8))) - 1) : ~0ull;
		bad = (got ^ last) & mask;
	}
	if (bad) {
		for (size_t i = from; i < nw; i++)
			if (p[i] != s + i * BH_STEP) {
				snprintf(why, 96, "data differs at byte %zu", i * 8);
				return -1;
			}
		snprintf(why, 96, "data differs in the last %zu bytes", len % 8);
		return -1;
	}
	return 0;
}

/* ---- histogram: 32 sub-buckets per power of two (about 3 % resolution), ns ------------------------ */

#define H_SUB 32
#define H_NB (64 + 36 * H_SUB)

struct hist {
	uint64_t b[H_NB];
	uint64_t n, min, max, sum;
	uint64_t bytes, errors, bad, miss;
};

static unsigned h_idx(uint64_t v)
{
	if (v < 64)
		return (unsigned)v;
	unsigned e = 63 - (unsigned)__builtin_clzll(v);
	if (e > 41)
		return H_NB - 1;
	return 64 + (e - 6) * H_SUB + (unsigned)((v >> (e - 5)) & (H_SUB - 1));
}

static uint64_t h_upper(unsigned i)
{
	if (i < 64)
		return i;
	unsigned e = (i - 64) / H_SUB + 6, sub = (i - 64) % H_SUB;
	return ((uint64_t)(H_SUB + sub + 1) << (e - 5)) - 1;
}

static void h_add(struct hist *h, uint64_t v)
{
	h->b[h_idx(v)]++;
	if (!h->n || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->n++;
	h->sum += v;
}

static void h_merge(struct hist *d, const struct hist *s)
{
	for (unsigned i = 0; i < H_NB; i++)
		d->b[i] += s->b[i];
	if (s->n && (!d->n || s->min < d->min))
		d->min = s->min;
	if (s->max > d->max)
		d->max = s->max;
	d->n += s->n;
	d->sum += s->sum;
	d->bytes += s->bytes;
	d->errors += s->errors;
	d->bad += s->bad;
	d->miss += s->miss;
}

static uint64_t h_pct(const struct hist *h, double p)
{
	if (!h->n)
		return 0;
	uint64_t want = (uint64_t)(p * 1000.0) * h->n, acc = 0;
	want = want / 100000 + (want % 100000 != 0); /* ceil(p% of n) */
	if (want < 1)
		want = 1;
	for (unsigned i = 0; i < H_NB; i++) {
		acc += h->b[i];
		if (acc >= want) {
			uint64_t u = h_upper(i);
			return u > h->max ? h->max : (u < h->min ? h->min : u);
		}
	}
	return h->max;
}

/* ---- configuration ---------------------------------------------------------------------------- */

const char bh_conf_help[] =
	"workload (KEY=VALUE arguments; sizes take K/M/G, times are seconds):\n"
	"  mode=raw|mix      raw: read-after-write (store N keys, then retrieve them; default)\n"
	"                    mix: random keys with the mix= percentages for time=/ops=\n"
	"  qd=N              I/Os in flight per connection (default 1)\n"
	"  conns=N           connections / queue pairs, one thread each (default 1)\n"
	"  size=S[,S...]     value size, or a list used in turn (raw) / at random (mix) (default 4K)\n"
	"  keys=N            key space (mix) or most keys written (raw) (default 1024)\n"
	"  mix=rNwNeN        mix percentages of retrieve/store/exist (default r70w30e0)\n"
	"  warmup=SEC        mix: run the mix this long before measuring (default 1)\n"
	"  time=SEC          bound on each phase (default 10)\n"
	"  ops=N             bound on the operations of each phase (default none)\n"
	"  bytes=S           bound on the bytes of each phase (raw: sets N; default none)\n"
	"  fill=0|1          mix: store every key once before the warm-up (default 1)\n"
	"  cleanup=0|1       delete the keys written at the end (phase cleanup; default 1); with 0 the\n"
	"                    keys stay, and the run says so\n"
	"  prefix=STR        key prefix, up to 8 bytes; keys are PREFIX + 8 hex digits (default nb)\n"
	"  seed=N            version seed (default random: stale values from other runs are caught)\n"
	"  progress=0|1      live progress line on stderr (default: when stderr is a terminal)\n"
	"  watch=NAME:PID[,NAME:PID...]  also report each phase's CPU time of these processes (e.g. the\n"
	"                    gateway and the OSD; /proc/PID/stat user+system, up to 4), per operation\n";

void bh_conf_init(struct bh_conf *c, bool raw)
{
	memset(c, 0, sizeof(*c));
	c->raw = raw;
	c->qd = 1;
	c->conns = 1;
	c->sizes[0] = 4096;
	c->nsizes = 1;
	c->keys = 1024;
	c->pct[BH_READ] = 70;
	c->pct[BH_WRITE] = 30;
	c->warmup = 1;
	c->time = 10;
	c->fill = true;
	c->cleanup = true; /* a load generator leaves nothing behind unless asked to */
	strcpy(c->prefix, "nb");
	c->progress = -1;
}

static int parse_sz(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned shift = 0;
	switch (tolower((unsigned char)*end)) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case '\0': break;
	default: return -1;
	}
	if (*end && end[1] && strcasecmp(end + 1, "ib") != 0 && strcasecmp(end + 1, "b") != 0)
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int bad_arg(const char *arg, const char *why)
{
	fprintf(stderr, "bench: bad argument '%s': %s\n", arg, why);
	return -EINVAL;
}

int bh_conf_arg(struct bh_conf *c, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq)
		return bad_arg(arg, "expected KEY=VALUE (bench help lists them)");
	size_t kl = (size_t)(eq - arg);
	const char *v = eq + 1;
	uint64_t n = 0;
	char *end;
#define K(s) (kl == strlen(s) && strncmp(arg, s, kl) == 0)
	if (K("mode")) {
		if (strcmp(v, "raw") == 0)
			c->raw = true;
		else if (strcmp(v, "mix") == 0)
			c->raw = false;
		else
			return bad_arg(arg, "raw or mix");
	} else if (K("qd") || K("conns") || K("keys") || K("ops") || K("bytes")) {
		if (parse_sz(v, &n) || (!K("ops") && !K("bytes") && n == 0))
			return bad_arg(arg, "a positive number");
		if (K("qd")) {
			if (n > 4096)
				return bad_arg(arg, "at most 4096");
			c->qd = (unsigned)n;
		} else if (K("conns")) {
			if (n > 256)
				return bad_arg(arg, "at most 256");
			c->conns = (unsigned)n;
		} else if (K("keys")) {
			if (n > (1ull << 32))
				return bad_arg(arg, "at most 4G keys");
			c->keys = n;
		} else if (K("ops"))
			c->ops = n;
		else
			c->bytes = n;
	} else if (K("size")) {
		char tmp[256];
		snprintf(tmp, sizeof(tmp), "%s", v);
		c->nsizes = 0;
		for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			if (c->nsizes == BH_MAX_SIZES)
				return bad_arg(arg, "at most 16 sizes");
			if (parse_sz(t, &n) || n > 0xffffffffull)
				return bad_arg(arg, "sizes from 0 to 4G-1");
			c->sizes[c->nsizes++] = (size_t)n;
		}
		if (!c->nsizes)
			return bad_arg(arg, "no size");
	} else if (K("mix")) {
		unsigned p[BH_NOPS] = {0};
		const char *s = v;
		while (*s) {
			int op;
			switch (*s) {
			case 'r': op = BH_READ; break;
			case 'w': op = BH_WRITE; break;
			case 'e': op = BH_EXIST; break;
			default: return bad_arg(arg, "like r70w30e0");
			}
			unsigned long x = strtoul(s + 1, &end, 10);
			if (end == s + 1 || x > 100)
				return bad_arg(arg, "like r70w30e0");
			p[op] = (unsigned)x;
			s = end;
		}
		if (p[BH_READ] + p[BH_WRITE] + p[BH_EXIST] != 100)
			return bad_arg(arg, "percentages must add up to 100");
		memcpy(c->pct, p, sizeof(p));
	} else if (K("warmup") || K("time")) {
		double d = strtod(v, &end);
		if (end == v || *end || d < 0 || d > 1e6)
			return bad_arg(arg, "seconds");
		if (K("warmup"))
			c->warmup = d;
		else
			c->time = d;
	} else if (K("fill") || K("cleanup") || K("progress")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			return bad_arg(arg, "0 or 1");
		bool b = v[0] == '1';
		if (K("fill"))
			c->fill = b;
		else if (K("cleanup"))
			c->cleanup = b;
		else
			c->progress = b;
	} else if (K("prefix")) {
		if (strlen(v) > 8)
			return bad_arg(arg, "at most 8 bytes");
		strcpy(c->prefix, v);
	} else if (K("watch")) {
		/* parsed whole into a copy first: a bad entry leaves the configuration as it was */
		char tmp[256];
		unsigned nw = 0;
		struct bh_watch ws[BH_MAX_WATCH];
		if (strlen(v) >= sizeof(tmp))
			return bad_arg(arg, "too long");
		strcpy(tmp, v);
		for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char *colon = strchr(t, ':');
			size_t nl = colon ? (size_t)(colon - t) : 0;
			if (!colon || nl == 0 || nl >= sizeof(ws[0].name))
				return bad_arg(arg, "NAME:PID[,NAME:PID...], NAME 1-15 letters, digits, '-' or '_'");
			for (size_t i = 0; i < nl; i++)
				if (!isalnum((unsigned char)t[i]) && t[i] != '-' && t[i] != '_')
					return bad_arg(arg, "NAME:PID[,NAME:PID...], NAME 1-15 letters, digits, '-' or '_'");
			errno = 0;
			long pid = strtol(colon + 1, &end, 10);
			if (errno || end == colon + 1 || *end || pid <= 0 || pid > 0x7fffffff)
				return bad_arg(arg, "a PID is a positive number");
			if (nw == BH_MAX_WATCH)
				return bad_arg(arg, "at most 4 processes");
			memcpy(ws[nw].name, t, nl);
			ws[nw].name[nl] = 0;
			for (unsigned i = 0; i < nw; i++)
				if (strcmp(ws[i].name, ws[nw].name) == 0)
					return bad_arg(arg, "a NAME given twice");
			ws[nw++].pid = (int)pid;
		}
		if (!nw)
			return bad_arg(arg, "NAME:PID[,NAME:PID...]");
		memcpy(c->watch, ws, sizeof(ws));
		c->nwatch = nw;
	} else if (K("seed")) {
		if (parse_sz(v, &n) || n == 0 || n >= 0xffffffffull)
			return bad_arg(arg, "1 to 2^32-2");
		c->seed = (uint32_t)n;
	} else {
		return bad_arg(arg, "unknown key (bench help lists them)");
	}
#undef K
	return 0;
}

/* ---- run state ---------------------------------------------------------------------------------- */

enum { PH_FILL, PH_WARMUP, PH_WRITE, PH_READ, PH_MIX, PH_CLEANUP, PH_N };
static const char *const g_phase_name[PH_N] = {"fill", "warmup", "write", "read", "mix", "cleanup"};
static const char *const g_op_name[BH_NOPS] = {"store", "retrieve", "exist", "delete"};

#define VER_UNKNOWN 0u
#define VER_ABSENT 0xffffffffu

struct run {
	const struct bh_conf *c;
	const struct bh_backend *b;
	uint32_t *ver;     /* per key: expected version (VER_UNKNOWN / VER_ABSENT) */
	uint8_t *szi;      /* per key: size index of the stored value */
	uint8_t *busy;     /* per key: an I/O is in flight (mix) */
	uint64_t nmax;     /* raw: keys in the write phase */
	_Atomic uint64_t next;       /* raw: next key index to hand out */
	uint64_t written;            /* raw: keys handed out by the write phase */
	_Atomic uint64_t issued_ops, issued_bytes, done_ops, done_bytes;
	_Atomic int stop;
	uint64_t t0, deadline;
	unsigned phase;
	pthread_barrier_t bar;
	struct bh_worker *w;
	struct hist total[PH_N][BH_NOPS];
	double secs[PH_N];
	double cpu_user[PH_N], cpu_sys[PH_N]; /* the client process's CPU seconds over each phase */
	double wcpu[PH_N][BH_MAX_WATCH];      /* each watch= process's; < 0: it was gone */
	uint64_t t_end[PH_N];
	size_t maxsize;
	uint32_t wver;     /* raw: version of every write; mix: next version */
	_Atomic int failed;
	_Atomic unsigned finished; /* workers done with the phase */
};

struct bh_worker {
	struct run *r;
	unsigned id;
	void *ctx;
	pthread_t th;
	struct bh_io *io;
	unsigned nio, nfree;
	unsigned *free;
	struct hist h[BH_NOPS];
	uint64_t rng;
	uint64_t t_last;
	uint32_t vnext;
	bool dead;
	struct bh_io *pending;
	uint64_t mix_next; /* fill/cleanup cursor in this worker's partition */
};

static uint64_t rng_next(uint64_t *s)
{
	*s += BH_STEP;
	return mix64(*s);
}

static void key_of(const struct run *r, uint64_t idx, struct bh_io *io)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%s%08" PRIx64, r->c->prefix, (uint64_t)(idx & 0xffffffffu));
	io->klen = (unsigned)n > BH_KEY_MAX ? BH_KEY_MAX : (unsigned)n;
	memcpy(io->key, tmp, io->klen);
	static const char hx[] = "0123456789abcdef";
	for (unsigned i = 0; i < io->klen; i++) {
		io->name[2 * i] = hx[io->key[i] >> 4];
		io->name[2 * i + 1] = hx[io->key[i] & 15];
	}
	io->name[2 * io->klen] = 0;
}

static void *slot_buf(struct bh_worker *w, struct bh_io *io, size_t len)
{
	if (io->slotbuf && io->slotcap >= len)
		return io->slotbuf;
	const struct bh_backend *b = w->r->b;
	if (io->slotbuf) {
		if (b->buf_free)
			b->buf_free(w->ctx, io->slotbuf);
		else
			free(io->slotbuf);
	}
	size_t cap = len < 4096 ? 4096 : len;
	io->slotbuf = b->buf_alloc ? b->buf_alloc(w->ctx, cap) : NULL;
	if (!io->slotbuf && !b->buf_alloc && posix_memalign(&io->slotbuf, 4096, cap))
		io->slotbuf = NULL;
	io->slotcap = io->slotbuf ? cap : 0;
	return io->slotbuf;
}

static bool out_of_time(struct run *r)
{
	if (atomic_load_explicit(&r->stop, memory_order_relaxed))
		return true;
	if (bh_now_ns() >= r->deadline) {
		atomic_store(&r->stop, 1);
		return true;
	}
	return false;
}

/* Reserve one op against the phase's ops bound. */
static bool take_op(struct run *r)
{
	if (!r->c->ops || r->phase == PH_WARMUP || r->phase == PH_FILL || r->phase == PH_CLEANUP)
		return true;
	return atomic_fetch_add(&r->issued_ops, 1) < r->c->ops;
}

/* Choose the next I/O of this phase for @io; false when the phase has nothing more for this worker. */
static bool next_io(struct bh_worker *w, struct bh_io *io)
{
	struct run *r = w->r;
	const struct bh_conf *c = r->c;
	uint64_t idx;
	enum bh_op op;
	if (r->phase != PH_CLEANUP && r->phase != PH_FILL && out_of_time(r))
		return false;
	switch (r->phase) {
	case PH_WRITE:
	case PH_READ:
	case PH_CLEANUP: {
		uint64_t lim = r->phase == PH_WRITE ? r->nmax : r->written;
		idx = atomic_fetch_add(&r->next, 1);
		if (idx >= lim)
			return false;
		op = r->phase == PH_WRITE ? BH_WRITE : r->phase == PH_READ ? BH_READ : BH_DELETE;
		break;
	}
	case PH_FILL: {
		idx = w->id + w->mix_next * c->conns;
		if (idx >= c->keys)
			return false;
		w->mix_next++;
		op = BH_WRITE;
		break;
	}
	default: { /* warm-up, mix: a random idle key of this worker's partition */
		if (!take_op(r))
			return false;
		uint64_t per = (c->keys - w->id + c->conns - 1) / c->conns;
		uint64_t k = rng_next(&w->rng) % per;
		for (uint64_t t = 0; t < per; t++, k = (k + 1) % per)
			if (!r->busy[w->id + k * c->conns])
				break;
		idx = w->id + k * c->conns;
		unsigned p = (unsigned)(rng_next(&w->rng) % 100);
		op = p < c->pct[BH_READ] ? BH_READ : p < c->pct[BH_READ] + c->pct[BH_WRITE] ? BH_WRITE : BH_EXIST;
		break;
	}
	}
	io->idx = idx;
	io->op = op;
	io->phase = r->phase;
	key_of(r, idx, io);
	if (op == BH_WRITE) {
		unsigned si = c->raw || r->phase == PH_FILL ? (unsigned)(idx % c->nsizes)
							    : (unsigned)(rng_next(&w->rng) % c->nsizes);
		size_t len = c->sizes[si];
		if (!slot_buf(w, io, len))
			return false;
		io->ver = c->raw ? r->wver : w->vnext;
		if (!c->raw && ++w->vnext == VER_ABSENT)
			w->vnext = 1;
		io->buf = io->slotbuf;
		io->len = len;
		io->vlen = si; /* size index until completion */
		bh_fill(io->buf, len, idx, io->ver);
	} else if (op == BH_READ) {
		if (!slot_buf(w, io, r->maxsize))
			return false;
		io->buf = io->slotbuf;
		io->len = r->maxsize;
		io->ver = r->ver[idx];
		io->vlen = c->sizes[r->szi[idx]];
	} else {
		io->buf = NULL;
		io->len = 0;
		io->ver = r->ver[idx];
	}
	r->busy[idx] = 1;
	return true;
}

static bool counted(unsigned phase)
{
	return phase != PH_WARMUP;
}

void bh_io_done(struct bh_io *io, int rc, size_t got, size_t full, const void *data)
{
	struct bh_worker *w = io->w;
	struct run *r = w->r;
	uint64_t now = bh_now_ns();
	struct hist *h = &w->h[io->op];
	uint64_t idx = io->idx;
	char why[96] = "";
	bool bad = false, err = false;
	size_t moved = 0;
	switch (io->op) {
	case BH_WRITE:
		if (rc) {
			err = true;
			r->ver[idx] = VER_UNKNOWN;
		} else {
			r->ver[idx] = io->ver;
			r->szi[idx] = (uint8_t)io->vlen;
			moved = io->len;
		}
		break;
	case BH_READ:
		if (rc == -ENOENT) {
			if (io->ver != VER_UNKNOWN && io->ver != VER_ABSENT) {
				bad = true;
				snprintf(why, sizeof(why), "key missing (stored in this run)");
			}
			h->miss++;
		} else if (rc) {
			err = true;
		} else if (io->ver == VER_ABSENT) {
			bad = true;
			snprintf(why, sizeof(why), "key present (deleted in this run)");
		} else if (io->ver != VER_UNKNOWN && full != io->vlen) {
			bad = true;
			snprintf(why, sizeof(why), "value size %zu, stored %zu", full, io->vlen);
		} else if (got != (full < io->len ? full : io->len)) {
			bad = true;
			snprintf(why, sizeof(why), "%zu bytes returned of a %zu-byte value", got, full);
		} else {
			if (bh_verify(data ? data : io->buf, got, idx, io->ver, why))
				bad = true;
			moved = got;
		}
		break;
	case BH_EXIST:
		if (rc && rc != -ENOENT)
			err = true;
		else if ((rc == 0 && io->ver == VER_ABSENT) ||
			 (rc == -ENOENT && io->ver != VER_ABSENT && io->ver != VER_UNKNOWN)) {
			bad = true;
			snprintf(why, sizeof(why), "exist says %s", rc ? "absent" : "present");
		}
		if (rc == -ENOENT)
			h->miss++;
		break;
	case BH_DELETE:
		if (rc && rc != -ENOENT)
			err = true;
		r->ver[idx] = rc && rc != -ENOENT ? VER_UNKNOWN : VER_ABSENT;
		break;
	default:
		break;
	}
	if (err) {
		h->errors++;
		if (h->errors + h->bad <= 5)
			fprintf(stderr, "\nbench: %s %s: %s\n", g_op_name[io->op], io->name, strerror(-rc));
		atomic_store(&r->failed, 1);
	} else if (bad) {
		h->bad++;
		if (h->errors + h->bad <= 5)
			fprintf(stderr, "\nbench: MISMATCH on %s %s: %s\n", g_op_name[io->op], io->name, why);
		atomic_store(&r->failed, 1);
	}
	if (counted(io->phase) && !err) {
		h_add(h, now - io->t0);
		h->bytes += moved;
	}
	atomic_fetch_add_explicit(&r->done_ops, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->done_bytes, moved, memory_order_relaxed);
	w->t_last = now;
	r->busy[idx] = 0;
	io->busy = false;
	/* The slot's next I/O is timed from now, not from when this thread gets round to submitting
	 * it: a harness whose submit blocks (librados' in-flight throttle) or that is busy verifying
	 * other completions would otherwise leave that wait out of its latency ("coordinated
	 * omission"), and look faster than a queue that accepts at once. */
	io->t0 = now;
	w->free[w->nfree++] = (unsigned)(io - w->io);
}

static void run_phase(struct bh_worker *w)
{
	struct run *r = w->r;
	memset(w->h, 0, sizeof(w->h));
	w->mix_next = 0;
	w->t_last = 0;
	if (w->dead)
		return;
	uint64_t start = bh_now_ns();
	for (unsigned i = 0; i < w->nio; i++)
		w->io[i].t0 = start;
	for (;;) {
		while (w->nfree && !w->dead) {
			struct bh_io *io = w->pending;
			if (!io) {
				io = &w->io[w->free[w->nfree - 1]];
				if (!next_io(w, io))
					break;
				w->nfree--;
				io->busy = true;
			}
			w->pending = NULL;
			int rc = r->b->submit(w->ctx, io);
			if (rc == -EAGAIN) {
				w->pending = io;
				break;
			}
			if (rc)
				bh_io_done(io, rc, 0, 0, NULL);
		}
		if (w->nfree == w->nio && !w->pending)
			break;
		int n = r->b->poll(w->ctx, -1);
		if (n < 0) {
			fprintf(stderr, "\nbench: worker %u: connection failed: %s\n", w->id, strerror(-n));
			atomic_store(&r->failed, 1);
			w->dead = true;
			/* the backend completed (or dropped) what was in flight */
			w->nfree = w->nio;
			for (unsigned i = 0; i < w->nio; i++)
				w->free[i] = i;
			w->pending = NULL;
			break;
		}
	}
}

static void *worker_main(void *p)
{
	struct bh_worker *w = p;
	struct run *r = w->r;
	w->ctx = r->b->worker_init(r->b->arg, w->id, r->c->qd);
	if (!w->ctx) {
		atomic_store(&r->failed, 2);
		w->dead = true;
	}
	pthread_barrier_wait(&r->bar); /* connected */
	for (;;) {
		pthread_barrier_wait(&r->bar); /* phase set up by main */
		if (r->phase == PH_N)
			break;
		run_phase(w);
		atomic_fetch_add(&r->finished, 1);
		pthread_barrier_wait(&r->bar); /* phase done */
	}
	for (unsigned i = 0; i < w->nio; i++)
		if (w->io[i].slotbuf) {
			if (r->b->buf_free)
				r->b->buf_free(w->ctx, w->io[i].slotbuf);
			else
				free(w->io[i].slotbuf);
		}
	if (w->ctx)
		r->b->worker_fini(w->ctx);
	return NULL;
}

/* ---- CPU time: the client's own (getrusage) and the watch= processes' (/proc/PID/stat) ----------- */

/* The whole client process: every worker thread, the main thread and a library's own threads
 * (librados' messenger, libnkv's), live or already exited. */
static void self_cpu(double *user, double *sys)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru)) {
		*user = *sys = 0;
		return;
	}
	*user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	*sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* One clock tick in seconds: /proc/PID/stat counts CPU time in these. */
static double tick_s(void)
{
	long hz = sysconf(_SC_CLK_TCK);
	return 1.0 / (double)(hz > 0 ? hz : 100);
}

/* utime + stime of process @pid (all its threads) in seconds, in clock ticks (10 ms at the usual
 * 100 Hz), or -1 when it is gone or its stat is unreadable. */
static double proc_cpu_s(int pid)
{
	char path[32], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* field 2, the command name, may hold spaces and ')': count the fields from the last ')'; fields 3
	 * (state) to 13 are skipped as words, 14 and 15 are utime and stime */
	const char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!p || sscanf(p + 1, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * tick_s();
}

struct cpu_mark {
	double user, sys, w[BH_MAX_WATCH];
};

static void cpu_mark(const struct bh_conf *c, struct cpu_mark *m)
{
	self_cpu(&m->user, &m->sys);
	for (unsigned i = 0; i < c->nwatch; i++)
		m->w[i] = proc_cpu_s(c->watch[i].pid);
}

/* Record phase @ph's CPU time: from mark @a (before its first I/O) to mark @b (after its last). */
static void cpu_phase(struct run *r, unsigned ph, const struct cpu_mark *a, const struct cpu_mark *b)
{
	r->cpu_user[ph] = b->user - a->user;
	r->cpu_sys[ph] = b->sys - a->sys;
	for (unsigned i = 0; i < r->c->nwatch; i++)
		r->wcpu[ph][i] = a->w[i] < 0 || b->w[i] < 0 ? -1 : b->w[i] - a->w[i];
}

/* The operations of a phase, every kind (a mix phase has several), failed ones included. */
static uint64_t phase_ops(const struct run *r, unsigned ph)
{
	uint64_t n = 0;
	for (unsigned o = 0; o < BH_NOPS; o++)
		n += r->total[ph][o].n + r->total[ph][o].errors;
	return n;
}

static double per_op_us(double secs, uint64_t ops)
{
	return ops ? secs * 1e6 / (double)ops : 0;
}

/* ---- report ------------------------------------------------------------------------------------- */

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

static void report(struct run *r, const unsigned *phases, unsigned nph)
{
	const struct bh_conf *c = r->c;
	uint64_t errs = 0, bad = 0, verified = 0;
	for (unsigned i = 0; i < nph; i++)
		for (unsigned o = 0; o < BH_NOPS; o++) {
			errs += r->total[phases[i]][o].errors;
			bad += r->total[phases[i]][o].bad;
			if (o == BH_READ)
				verified += r->total[phases[i]][o].n - r->total[phases[i]][o].miss;
		}
	char sz[160] = "";
	for (unsigned i = 0; i < c->nsizes; i++)
		snprintf(sz + strlen(sz), sizeof(sz) - strlen(sz), "%s%zu", i ? "," : "", c->sizes[i]);
	if (c->json) {
		if (c->command)
			printf("{\"command\":\"%s\",", c->command);
		printf("%s\"tool\":\"%s\",\"target\":\"%s\",\"mode\":\"%s\",\"qd\":%u,\"conns\":%u,\"sizes\":[%s],"
		       "\"keys\":%" PRIu64 ",\"time_limit_s\":%g,\"bytes_limit\":%" PRIu64 ",\"ops_limit\":%" PRIu64
		       ",\"results\":[",
		       c->command ? "" : "{", c->tool, c->target ? c->target : "", c->raw ? "raw" : "mix", c->qd, c->conns, sz,
		       c->raw ? r->written : c->keys, c->time, c->bytes, c->ops);
		bool first = true;
		for (unsigned i = 0; i < nph; i++)
			for (unsigned o = 0; o < BH_NOPS; o++) {
				const struct hist *h = &r->total[phases[i]][o];
				if (!h->n && !h->errors)
					continue;
				double s = r->secs[phases[i]];
				printf("%s{\"phase\":\"%s\",\"op\":\"%s\",\"ops\":%" PRIu64 ",\"bytes\":%" PRIu64
				       ",\"seconds\":%.6f,\"ops_s\":%.1f,\"mb_s\":%.2f,\"lat_us\":{\"min\":%.1f,\"mean\":%.1f,"
				       "\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f},\"misses\":%" PRIu64
				       ",\"errors\":%" PRIu64 ",\"mismatches\":%" PRIu64,
				       first ? "" : ",", g_phase_name[phases[i]], g_op_name[o], h->n, h->bytes, s,
				       s > 0 ? (double)h->n / s : 0, s > 0 ? (double)h->bytes / s / 1e6 : 0, us(h->min),
				       h->n ? us(h->sum / h->n) : 0, us(h_pct(h, 50)), us(h_pct(h, 90)), us(h_pct(h, 99)),
				       us(h_pct(h, 99.9)), us(h->max), h->miss, h->errors, h->bad);
				/* CPU is the phase's, over all its operations: in a mix phase every op's row has the same */
				unsigned ph = phases[i];
				uint64_t pops = phase_ops(r, ph);
				printf(",\"phase_ops\":%" PRIu64 ",\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,\"cpu_us_per_op\":%.2f,"
				       "\"cpu_user_us_per_op\":%.2f,\"cpu_sys_us_per_op\":%.2f",
				       pops, r->cpu_user[ph], r->cpu_sys[ph], per_op_us(r->cpu_user[ph] + r->cpu_sys[ph], pops),
				       per_op_us(r->cpu_user[ph], pops), per_op_us(r->cpu_sys[ph], pops));
				if (c->nwatch) {
					printf(",\"watch\":{");
					for (unsigned k = 0; k < c->nwatch; k++) {
						double w = r->wcpu[ph][k];
						printf("%s\"%s\":{\"pid\":%d,", k ? "," : "", c->watch[k].name, c->watch[k].pid);
						/* tick_s: the resolution of cpu_s (each end is cut to whole ticks) */
						if (w < 0)
							printf("\"cpu_s\":null,\"us_per_op\":null,\"tick_s\":%g}", tick_s());
						else
							printf("\"cpu_s\":%.3f,\"us_per_op\":%.2f,\"tick_s\":%g}", w,
							       per_op_us(w, pops), tick_s());
					}
					printf("}");
				}
				printf("}");
				first = false;
			}
		printf("],\"verified\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"mismatches\":%" PRIu64 ",\"ok\":%s}\n",
		       verified, errs, bad, errs || bad || r->failed ? "false" : "true");
		fflush(stdout);
		return;
	}
	printf("%s: %s | mode %s, qd %u x %u conn%s, size %s, %" PRIu64 " keys\n", c->tool, c->target ? c->target : "",
	       c->raw ? "raw (read-after-write)" : "mix", c->qd, c->conns, c->conns == 1 ? "" : "s", sz,
	       c->raw ? r->written : c->keys);
	printf("%-8s %-9s %9s %8s %11s %9s %9s %9s %9s %9s %9s %5s %5s %9s\n", "phase", "op", "ops", "secs", "ops/s",
	       "MB/s", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us", "err", "bad", "cpu us/op");
	for (unsigned i = 0; i < nph; i++)
		for (unsigned o = 0; o < BH_NOPS; o++) {
			const struct hist *h = &r->total[phases[i]][o];
			if (!h->n && !h->errors)
				continue;
			double s = r->secs[phases[i]];
			unsigned ph = phases[i];
			printf("%-8s %-9s %9" PRIu64 " %8.2f %11.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %5" PRIu64
			       " %5" PRIu64 " %9.1f\n",
			       g_phase_name[ph], g_op_name[o], h->n, s, s > 0 ? (double)h->n / s : 0,
			       s > 0 ? (double)h->bytes / s / 1e6 : 0, us(h_pct(h, 50)), us(h_pct(h, 90)),
			       us(h_pct(h, 99)), us(h_pct(h, 99.9)), us(h->max), h->errors, h->bad,
			       per_op_us(r->cpu_user[ph] + r->cpu_sys[ph], phase_ops(r, ph)));
		}
	/* the watched processes, one line per phase: "cpu write us/op: client 12.3  gw 45.6  osd 78.9" */
	for (unsigned i = 0; i < nph && c->nwatch; i++) {
		unsigned ph = phases[i];
		uint64_t pops = phase_ops(r, ph);
		if (!pops)
			continue;
		printf("cpu %-8s us/op: client %.1f", g_phase_name[ph], per_op_us(r->cpu_user[ph] + r->cpu_sys[ph], pops));
		for (unsigned k = 0; k < c->nwatch; k++) {
			if (r->wcpu[ph][k] < 0)
				printf("  %s gone", c->watch[k].name);
			else
				printf("  %s %.1f", c->watch[k].name, per_op_us(r->wcpu[ph][k], pops));
		}
		printf("\n");
	}
	printf("verified %" PRIu64 " retrieved value%s: %" PRIu64 " mismatch%s, %" PRIu64 " error%s%s\n", verified,
	       verified == 1 ? "" : "s", bad, bad == 1 ? "" : "es", errs, errs == 1 ? "" : "s",
	       errs || bad || r->failed ? "  ** FAILED **" : "");
}

static void progress_line(struct run *r, uint64_t t_start, uint64_t last_ops, uint64_t last_bytes, double dt)
{
	uint64_t o = atomic_load(&r->done_ops), b = atomic_load(&r->done_bytes);
	double el = (double)(bh_now_ns() - t_start) / 1e9;
	fprintf(stderr, "\r%-8s %6.1fs %10" PRIu64 " ops %10.0f ops/s %9.1f MB/s   ", g_phase_name[r->phase], el, o,
		(double)(o - last_ops) / dt, (double)(b - last_bytes) / dt / 1e6);
	fflush(stderr);
}

int bh_run(const struct bh_conf *c, const struct bh_backend *b)
{
	struct run *r = calloc(1, sizeof(*r));
	if (!r)
		return 2;
	r->c = c;
	r->b = b;
	for (unsigned i = 0; i < c->nwatch; i++)
		if (proc_cpu_s(c->watch[i].pid) < 0) {
			fprintf(stderr, "bench: watch=%s:%d: no such process (or its /proc/%d/stat is unreadable)\n",
				c->watch[i].name, c->watch[i].pid, c->watch[i].pid);
			free(r);
			return 2;
		}
	if (c->keys < c->conns) {
		fprintf(stderr, "bench: keys=%" PRIu64 " is fewer than conns=%u\n", c->keys, c->conns);
		free(r);
		return 2;
	}
	if (!c->raw && c->keys < (uint64_t)c->conns * c->qd) {
		fprintf(stderr, "bench: mix needs keys >= conns x qd (%u)\n", c->conns * c->qd);
		free(r);
		return 2;
	}
	r->ver = calloc(c->keys, sizeof(*r->ver));
	r->szi = calloc(c->keys, 1);
	r->busy = calloc(c->keys, 1);
	r->w = calloc(c->conns, sizeof(*r->w));
	if (!r->ver || !r->szi || !r->busy || !r->w) {
		fprintf(stderr, "bench: out of memory for %" PRIu64 " keys\n", c->keys);
		return 2;
	}
	for (unsigned i = 0; i < c->nsizes; i++)
		if (c->sizes[i] > r->maxsize)
			r->maxsize = c->sizes[i];
	uint32_t seed = c->seed;
	if (!seed) {
		uint64_t x = mix64(bh_now_ns() ^ ((uint64_t)getpid() << 32));
		seed = (uint32_t)(x % 0xfffffffdull) + 1;
	}
	r->wver = seed;
	/* raw: keys written = keys, cut by bytes= and ops= */
	r->nmax = c->keys;
	if (c->raw) {
		uint64_t acc = 0, n = 0;
		if (c->bytes)
			for (n = 0; n < c->keys; n++) {
				acc += c->sizes[n % c->nsizes];
				if (acc > c->bytes && n > 0)
					break;
			}
		if (c->bytes && n < r->nmax)
			r->nmax = n;
		if (c->ops && c->ops < r->nmax)
			r->nmax = c->ops;
	}
	unsigned phases[8], nph = 0, rep[8], nrep = 0;
	if (c->raw) {
		phases[nph++] = PH_WRITE;
		phases[nph++] = PH_READ;
		if (c->cleanup)
			phases[nph++] = PH_CLEANUP;
	} else {
		if (c->fill)
			phases[nph++] = PH_FILL;
		if (c->warmup > 0)
			phases[nph++] = PH_WARMUP;
		phases[nph++] = PH_MIX;
		if (c->cleanup)
			phases[nph++] = PH_CLEANUP;
	}
	for (unsigned i = 0; i < nph; i++)
		if (phases[i] != PH_WARMUP)
			rep[nrep++] = phases[i];
	bool prog = c->progress < 0 ? isatty(2) : c->progress;
	pthread_barrier_init(&r->bar, NULL, c->conns + 1);
	for (unsigned i = 0; i < c->conns; i++) {
		struct bh_worker *w = &r->w[i];
		w->r = r;
		w->id = i;
		w->rng = mix64(seed ^ (i + 1) * BH_STEP);
		w->vnext = (uint32_t)(seed + i * 0x01000000u);
		if (!w->vnext || w->vnext == VER_ABSENT)
			w->vnext = 1;
		w->nio = c->qd;
		w->io = calloc(w->nio, sizeof(*w->io));
		w->free = calloc(w->nio, sizeof(*w->free));
		if (!w->io || !w->free)
			return 2;
		for (unsigned k = 0; k < w->nio; k++) {
			w->io[k].w = w;
			w->free[k] = w->nio - 1 - k;
		}
		w->nfree = w->nio;
		if (pthread_create(&w->th, NULL, worker_main, w)) {
			fprintf(stderr, "bench: cannot start a thread\n");
			return 2;
		}
	}
	pthread_barrier_wait(&r->bar);
	int rc = 0;
	if (atomic_load(&r->failed) == 2) {
		fprintf(stderr, "bench: %s: could not connect every worker\n", c->tool);
		rc = 2;
	}
	for (unsigned i = 0; i < nph && !rc; i++) {
		r->phase = phases[i];
		atomic_store(&r->next, 0);
		atomic_store(&r->stop, 0);
		atomic_store(&r->issued_ops, 0);
		atomic_store(&r->done_ops, 0);
		atomic_store(&r->done_bytes, 0);
		atomic_store(&r->finished, 0);
		r->t0 = bh_now_ns();
		double lim = r->phase == PH_WARMUP ? c->warmup : c->time;
		r->deadline = r->t0 + (uint64_t)(lim * 1e9);
		struct cpu_mark m0, m1;
		cpu_mark(c, &m0);
		pthread_barrier_wait(&r->bar); /* go */
		if (prog) {
			/* the workers run; report once a second until they meet at the barrier */
			uint64_t lo = 0, lb = 0, lt = r->t0;
			while (atomic_load(&r->finished) < c->conns) {
				struct timespec ts = {0, 100000000};
				nanosleep(&ts, NULL);
				uint64_t now = bh_now_ns();
				if (now - lt >= 1000000000ull) {
					progress_line(r, r->t0, lo, lb, (double)(now - lt) / 1e9);
					lo = atomic_load(&r->done_ops);
					lb = atomic_load(&r->done_bytes);
					lt = now;
				}
			}
		}
		pthread_barrier_wait(&r->bar); /* done */
		cpu_mark(c, &m1);
		cpu_phase(r, r->phase, &m0, &m1);
		if (prog)
			fprintf(stderr, "\r%80s\r", "");
		uint64_t tend = r->t0;
		for (unsigned k = 0; k < c->conns; k++) {
			for (unsigned o = 0; o < BH_NOPS; o++)
				h_merge(&r->total[r->phase][o], &r->w[k].h[o]);
			if (r->w[k].t_last > tend)
				tend = r->w[k].t_last;
		}
		r->secs[r->phase] = (double)(tend - r->t0) / 1e9;
		if (r->phase == PH_WRITE) {
			uint64_t n = atomic_load(&r->next);
			r->written = n < r->nmax ? n : r->nmax;
		}
		if (r->phase == PH_MIX || r->phase == PH_FILL) {
			r->written = c->keys; /* cleanup deletes the whole key space */
		}
	}
	r->phase = PH_N;
	pthread_barrier_wait(&r->bar);
	for (unsigned i = 0; i < c->conns; i++) {
		pthread_join(r->w[i].th, NULL);
		free(r->w[i].io);
		free(r->w[i].free);
	}
	if (!c->cleanup && r->written)
		fprintf(stderr, "bench: kept the %llu keys written (prefix '%s'); cleanup=1 deletes them\n",
			(unsigned long long)r->written, c->prefix);
	if (rc == 0) {
		report(r, rep, nrep);
		rc = atomic_load(&r->failed) ? 1 : 0;
		for (unsigned i = 0; i < nrep; i++)
			if (r->total[rep[i]][BH_READ].n + r->total[rep[i]][BH_WRITE].n + r->total[rep[i]][BH_EXIST].n +
				    r->total[rep[i]][BH_DELETE].n == 0 &&
			    rep[i] != PH_CLEANUP) {
				fprintf(stderr, "bench: phase %s ran no operation\n", g_phase_name[rep[i]]);
				rc = 1;
			}
	}
	pthread_barrier_destroy(&r->bar);
	free(r->ver);
	free(r->szi);
	free(r->busy);
	free(r->w);
	free(r);
	return rc;
}
