/* SPDX-License-Identifier: Apache-2.0 */
/*
 * load.c - the fault suite's hosts (see faults.h): worker threads, each with its own controller and
 * one I/O queue pair, keep up to qd asynchronous Stores and Retrieves in flight on keys of their own
 * (one command per key at a time, so the ledger knows the order), judge every completion against
 * the ledger, and reconnect when the gateway goes away.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"
#include "nkv/nkv.h"

#define RECONNECT_MS 100   /* between two connection attempts while the gateway is away */
#define VERIFY_TRIES 5     /* reads of one key at the end before it counts as unread */

enum mode { MODE_LOAD, MODE_VERIFY };

struct op {
	struct worker *w;
	unsigned k;
	bool store, busy;
	uint32_t ver, len;
	uint8_t *buf;
	uint64_t t0;
};

struct worker {
	pthread_t th;
	struct load *l;
	unsigned id;
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	struct fl_key *keys;
	bool *kbusy;
	unsigned *ktries;   /* verify: reads done per key */
	unsigned vnext;     /* verify: next key to read */
	struct op *ops;
	unsigned inflight;
	uint64_t rng;
	bool ever_connected;
	struct load_stats st;
};

struct load {
	struct load_conf c;
	struct worker *w;
	enum mode mode;
	atomic_bool stop;
	atomic_uint stores_inflight, connected;
	_Atomic uint64_t reconnects;
	_Atomic uint64_t last_fail_start, ops;
};

static void max_u64(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load(a);
	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static void key_bytes(uint64_t idx, uint8_t out[16])
{
	char s[17];
	snprintf(s, sizeof(s), "fk%014llu", (unsigned long long)idx);
	memcpy(out, s, 16);
}

static uint64_t key_index(const struct worker *w, unsigned k)
{
	return w->l->c.key_base + (uint64_t)w->id * w->l->c.keys + k;
}

static void count_status(struct load_stats *s, unsigned st)
{
	for (unsigned i = 0; i < s->nst; i++)
		if (s->st_code[i] == st) {
			s->st_count[i]++;
			return;
		}
	if (s->nst < 8) {
		s->st_code[s->nst] = st;
		s->st_count[s->nst++] = 1;
	}
}

static void op_done(void *arg, const struct nkv_cpl *cpl)
{
	struct op *o = arg;
	struct worker *w = o->w;
	struct load *l = w->l;
	struct fl_key *k = &w->keys[o->k];
	uint64_t t1 = f_now_ms(), ms = t1 - o->t0, idx = key_index(w, o->k);
	unsigned st = cpl->status;
	char why[200];

	if (ms > w->st.max_ms)
		w->st.max_ms = ms;
	if (ms > l->c.bound_ms) {
		w->st.slow++;
		fprintf(stderr, "worker %u key %llu: %s took %llu ms (status %03xh; bound %u ms)\n", w->id,
			(unsigned long long)idx, o->store ? "Store" : "Retrieve", (unsigned long long)ms, st, l->c.bound_ms);
	}
	bool documented = st == 0 || st == ST_NOT_READY || st == ST_HOST_PATH || (!o->store && st == ST_NOT_EXIST);
	if (!documented) {
		w->st.bad_status++;
		fprintf(stderr, "worker %u key %llu: %s answered %03xh (allowed: success, 82h, Host Pathing Error%s)\n",
			w->id, (unsigned long long)idx, o->store ? "Store" : "Retrieve", st, o->store ? "" : ", 87h");
	}
	if (o->store) {
		fl_store_done(k, o->ver, o->len, st == 0);
		if (st == 0)
			w->st.stores_ok++;
		else
			w->st.stores_failed++;
		atomic_fetch_sub(&l->stores_inflight, 1);
	} else if (st == 0 || st == ST_NOT_EXIST) {
		bool final = l->mode == MODE_VERIFY;
		if (!fl_read_done(k, idx, st == 0, o->buf, cpl->xfer, cpl->dw0, why)) {
			w->st.wrong++;
			if (final)
				w->st.final_lost++;
			fprintf(stderr, "%sworker %u key %llu: LOST: %s\n", final ? "final: " : "", w->id,
				(unsigned long long)idx, why);
		} else if (final) {
			if (st == 0)
				w->st.final_verified++;
			else
				w->st.final_absent++;
		}
		if (st == 0)
			w->st.reads_ok++;
		else
			w->st.reads_absent++;
		if (final)
			w->ktries[o->k] = VERIFY_TRIES; /* judged */
	} else {
		w->st.reads_failed++;
	}
	if (st && !(st == ST_NOT_EXIST && !o->store)) {
		count_status(&w->st, st);
		max_u64(&l->last_fail_start, o->t0);
	}
	atomic_fetch_add(&l->ops, 1);
	free(o->buf);
	o->buf = NULL;
	o->busy = false;
	w->kbusy[o->k] = false;
	w->inflight--;
}

static void w_disconnect(struct worker *w)
{
	if (w->qp) {
		nkv_qpair_destroy(w->qp); /* outstanding commands complete here, Host Pathing Error */
		atomic_fetch_sub(&w->l->connected, 1);
	}
	nkv_disconnect(w->ctrl);
	w->qp = NULL;
	w->ctrl = NULL;
}

static bool w_connect(struct worker *w)
{
	struct nkv_conn_opts o = {.hostnqn = FAULT_HOSTNQN, .timeout_ms = 10000};
	o.hostid[15] = 0xfa;
	o.hostid[14] = (uint8_t)w->id;
	int rc = nkv_connect(w->l->c.addr, w->l->c.port, FAULT_SUBNQN, &o, &w->ctrl);
	if (rc == 0 && (rc = nkv_qpair_create(w->ctrl, (uint16_t)(w->l->c.qd + 1), &w->qp)) != 0) {
		nkv_disconnect(w->ctrl);
		w->ctrl = NULL;
	}
	if (rc)
		return false;
	if (w->ever_connected) {
		w->st.reconnects++;
		atomic_fetch_add(&w->l->reconnects, 1);
	}
	w->ever_connected = true;
	atomic_fetch_add(&w->l->connected, 1);
	return true;
}

static uint32_t pick_len(struct worker *w)
{
	const struct load_conf *c = &w->l->c;
	uint32_t len = c->sizes[f_rand(&w->rng) % c->nsizes];
	uint32_t cut = (uint32_t)(f_rand(&w->rng) % 512);
	return len > FV_HDR + cut ? len - cut : len;
}

/* Pick the next key: a random idle one (load), or the next unjudged one (verify). @return -1: none now. */
static int pick_key(struct worker *w)
{
	unsigned n = w->l->c.keys;
	if (w->l->mode == MODE_VERIFY) {
		for (unsigned i = 0; i < n; i++) {
			unsigned k = (w->vnext + i) % n;
			if (!w->kbusy[k] && w->ktries[k] < VERIFY_TRIES) {
				w->vnext = k + 1;
				return (int)k;
			}
		}
		return -1;
	}
	unsigned start = (unsigned)(f_rand(&w->rng) % n);
	for (unsigned i = 0; i < n; i++)
		if (!w->kbusy[(start + i) % n])
			return (int)((start + i) % n);
	return -1;
}

/* Fill the queue pair up to qd. @return false when the queue pair failed. */
static bool w_submit(struct worker *w)
{
	struct load *l = w->l;
	while (w->inflight < l->c.qd) {
		int k = pick_key(w);
		if (k < 0)
			return true;
		struct op *o = NULL;
		for (unsigned i = 0; i < l->c.qd && !o; i++)
			if (!w->ops[i].busy)
				o = &w->ops[i];
		struct fl_key *fk = &w->keys[k];
		uint8_t key[16];
		uint64_t idx = key_index(w, (unsigned)k);
		key_bytes(idx, key);
		*o = (struct op){.w = w, .k = (unsigned)k, .busy = true};
		o->store = l->mode == MODE_LOAD && f_rand(&w->rng) % 100 < l->c.store_pct;
		if (o->store) {
			o->len = pick_len(w);
			o->ver = fk->next_ver++;
			o->buf = malloc(o->len);
			fv_fill(o->buf, o->len, idx, o->ver);
		} else {
			o->len = fl_read_len(fk);
			o->buf = malloc(o->len);
			if (l->mode == MODE_VERIFY)
				w->ktries[k]++;
		}
		o->t0 = f_now_ms();
		int rc = o->store ? nkv_store_async(w->qp, 1, key, 16, o->buf, o->len, 0, op_done, o)
				  : nkv_retrieve_async(w->qp, 1, key, 16, o->buf, o->len, op_done, o);
		if (rc) {
			if (o->store)
				fk->next_ver--; /* never sent */
			else if (l->mode == MODE_VERIFY)
				w->ktries[k]--;
			free(o->buf);
			o->buf = NULL;
			o->busy = false;
			return rc == -EAGAIN;
		}
		if (o->store)
			atomic_fetch_add(&l->stores_inflight, 1);
		w->kbusy[k] = true;
		w->inflight++;
	}
	return true;
}

/* The oldest command in flight, in ms (0: none). */
static uint64_t oldest_ms(const struct worker *w)
{
	uint64_t now = f_now_ms(), m = 0;
	for (unsigned i = 0; i < w->l->c.qd; i++)
		if (w->ops[i].busy && now - w->ops[i].t0 > m)
			m = now - w->ops[i].t0;
	return m;
}

static bool verify_done(const struct worker *w)
{
	for (unsigned k = 0; k < w->l->c.keys; k++)
		if (w->ktries[k] < VERIFY_TRIES)
			return false;
	return true;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	uint64_t verify_end = f_now_ms() + 60000;

	for (;;) {
		bool stop = atomic_load(&l->stop);
		if (l->mode == MODE_VERIFY)
			stop = (verify_done(w) && !w->inflight) || f_now_ms() > verify_end;
		if (stop)
			break;
		if (!w->qp) {
			if (!w_connect(w))
				usleep(RECONNECT_MS * 1000);
			continue;
		}
		bool ok = w_submit(w);
		int rc = ok ? nkv_qpair_poll(w->qp, 50) : -ENOTCONN;
		if (rc < 0) {
			if (getenv("NKV_FAULTS_VERBOSE"))
				fprintf(stderr, "worker %u: connection lost (%s) with %u in flight\n", w->id, strerror(-rc),
					w->inflight);
			w_disconnect(w); /* the gateway went away: every command in flight got Host Pathing Error */
			continue;
		}
		uint64_t old = oldest_ms(w);
		if (old > l->c.hang_ms) {
			w->st.hung += w->inflight;
			fprintf(stderr, "worker %u: %u command(s) in flight, the oldest for %llu ms: failing the queue\n",
				w->id, w->inflight, (unsigned long long)old);
			w_disconnect(w);
		}
	}
	/* Drain: what is in flight completes (or fails with its queue pair) before the ledger is read. */
	uint64_t end = f_now_ms() + l->c.hang_ms;
	while (w->qp && w->inflight && f_now_ms() < end)
		if (nkv_qpair_poll(w->qp, 50) < 0)
			break;
	if (w->inflight) {
		fprintf(stderr, "worker %u: %u command(s) still in flight at the end\n", w->id, w->inflight);
		w->st.hung += w->inflight;
	}
	w_disconnect(w);
	w->ever_connected = false; /* the next run's first connection is no reconnection */
	return NULL;
}

struct load *load_create(const struct load_conf *c)
{
	if (!c->workers || !c->qd || c->keys < c->qd || !c->nsizes)
		return NULL;
	for (unsigned i = 0; i < c->nsizes; i++)
		if (c->sizes[i] < FV_HDR)
			return NULL;
	struct load *l = calloc(1, sizeof(*l));
	l->c = *c;
	l->w = calloc(c->workers, sizeof(*l->w));
	for (unsigned i = 0; i < c->workers; i++) {
		struct worker *w = &l->w[i];
		w->l = l;
		w->id = i;
		w->rng = 0x5eed0000ull + i * 7919;
		w->keys = calloc(c->keys, sizeof(*w->keys));
		w->kbusy = calloc(c->keys, sizeof(bool));
		w->ktries = calloc(c->keys, sizeof(unsigned));
		w->ops = calloc(c->qd, sizeof(*w->ops));
		for (unsigned k = 0; k < c->keys; k++)
			w->keys[k].next_ver = 1;
	}
	return l;
}

static void start(struct load *l, enum mode m)
{
	l->mode = m;
	atomic_store(&l->stop, false);
	for (unsigned i = 0; i < l->c.workers; i++)
		pthread_create(&l->w[i].th, NULL, worker_main, &l->w[i]);
}

static void join(struct load *l)
{
	for (unsigned i = 0; i < l->c.workers; i++)
		pthread_join(l->w[i].th, NULL);
}

void load_run(struct load *l)
{
	start(l, MODE_LOAD);
}

void load_halt(struct load *l)
{
	atomic_store(&l->stop, true);
	join(l);
}

void load_verify(struct load *l)
{
	for (unsigned i = 0; i < l->c.workers; i++) {
		struct load_stats *s = &l->w[i].st; /* the counts of this pass only */
		s->final_keys = s->final_acked = s->final_verified = s->final_absent = s->final_lost = 0;
		memset(l->w[i].ktries, 0, l->c.keys * sizeof(unsigned));
	}
	start(l, MODE_VERIFY);
	join(l);
	for (unsigned i = 0; i < l->c.workers; i++)
		for (unsigned k = 0; k < l->c.keys; k++) {
			l->w[i].st.final_keys++;
			if (l->w[i].keys[k].acked)
				l->w[i].st.final_acked++;
		}
}

void load_stats(struct load *l, struct load_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < l->c.workers; i++) {
		const struct load_stats *a = &l->w[i].st;
		s->stores_ok += a->stores_ok;
		s->stores_failed += a->stores_failed;
		s->reads_ok += a->reads_ok;
		s->reads_absent += a->reads_absent;
		s->reads_failed += a->reads_failed;
		s->wrong += a->wrong;
		s->bad_status += a->bad_status;
		s->slow += a->slow;
		s->hung += a->hung;
		s->reconnects += a->reconnects;
		if (a->max_ms > s->max_ms)
			s->max_ms = a->max_ms;
		for (unsigned j = 0; j < a->nst; j++)
			for (unsigned n = 0; n < a->st_count[j]; n++)
				count_status(s, a->st_code[j]);
		s->final_keys += a->final_keys;
		s->final_acked += a->final_acked;
		s->final_verified += a->final_verified;
		s->final_absent += a->final_absent;
		s->final_lost += a->final_lost;
	}
	s->final_unread = s->final_keys - s->final_verified - s->final_absent - s->final_lost;
}

unsigned load_stores_inflight(struct load *l)
{
	return atomic_load(&l->stores_inflight);
}

unsigned load_connected(struct load *l)
{
	return atomic_load(&l->connected);
}

uint64_t load_last_fail_start(struct load *l)
{
	return atomic_load(&l->last_fail_start);
}

uint64_t load_reconnects(struct load *l)
{
	return atomic_load(&l->reconnects);
}

uint64_t load_ops(struct load *l)
{
	return atomic_load(&l->ops);
}

void load_destroy(struct load *l)
{
	if (!l)
		return;
	for (unsigned i = 0; i < l->c.workers; i++) {
		free(l->w[i].keys);
		free(l->w[i].kbusy);
		free(l->w[i].ktries);
		free(l->w[i].ops);
	}
	free(l->w);
	free(l);
}
