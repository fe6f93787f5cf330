/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_stress.c - NVMe/TCP under load, libnkv against the target's TCP transport in this process:
 *   1. 16 connections (controllers) x 4 I/O queues each, all in parallel, asynchronous commands at
 *      queue depth 8: Stores of 0 B to 300 KiB (in-capsule and R2T), Retrieves verified byte for
 *      byte, Exists and Deletes checked against a per-thread model.
 *   2. Backpressure: a second transport with a 2 MiB buffer budget serving 4 connections that keep
 *      16 Stores of 512 KiB in flight each: everything completes, nothing is lost.
 *   3. Graceful stop: a third transport is destroyed while a client keeps it busy. Every command
 *      either succeeds (and its data verifies) or fails with Host Pathing Error after the
 *      connection closes; the stop returns within its grace period.
 * Usage: tcp_stress mem|rados. Last line: "N passed, N failed".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

#define NS 1
#define CONNS 16
#define QUEUES 4
#define QD 8
#define OPS_PER_QUEUE 300
#define KEYS_PER_QUEUE 24
#define MAX_VAL (300u << 10)

/* ---- 1. many connections, many queues ---------------------------------------------------------- */

struct slot {
	struct worker *w;
	int key;           /* model index */
	uint8_t opc;
	uint32_t len;
	uint64_t seed;
	uint8_t *buf;
	bool busy;
};

struct model {
	bool present;
	uint32_t len;
	uint64_t seed;
	bool inflight;     /* one command per key at a time keeps the model exact */
};

struct worker {
	int id, q;
	const char *port;
	struct nkv_qpair *qp;
	struct slot slots[QD];
	struct model m[KEYS_PER_QUEUE];
	uint64_t rs;
	unsigned done, errors, verified;
};

static void key_of(const struct worker *w, int k, char out[17])
{
	snprintf(out, 17, "s%02d.%d.%03d", w->id, w->q, k);
}

static void slot_done(void *arg, const struct nkv_cpl *cpl)
{
	struct slot *s = arg;
	struct worker *w = s->w;
	struct model *m = &w->m[s->key];
	bool ok;

	switch (s->opc) {
	case NKV_KV_STORE:
		ok = cpl->status == 0;
		if (ok)
			*m = (struct model){.present = true, .len = s->len, .seed = s->seed};
		break;
	case NKV_KV_RETRIEVE:
		if (m->present) {
			ok = cpl->status == 0 && cpl->dw0 == m->len && cpl->xfer == m->len && h_verify(s->buf, m->len, m->seed);
			w->verified += ok;
		} else {
			ok = cpl->status == SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST);
		}
		break;
	case NKV_KV_EXIST:
		ok = cpl->status == (m->present ? 0 : SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST));
		break;
	default: /* delete */
		ok = cpl->status == (m->present ? 0 : SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST));
		if (cpl->status == 0)
			m->present = false;
	}
	if (!ok && w->errors++ < 5)
		fprintf(stderr, "conn %d q %d: opc %02x key %d: status %03x dw0 %u xfer %u (model: %s, %u bytes)\n", w->id,
			w->q, s->opc, s->key, cpl->status, cpl->dw0, cpl->xfer, m->present ? "present" : "absent", m->len);
	m->inflight = false;
	s->busy = false;
	w->done++;
}

static int issue(struct worker *w, struct slot *s)
{
	char key[17];
	int k;
	do
		k = (int)(h_rand(&w->rs) % KEYS_PER_QUEUE);
	while (w->m[k].inflight);
	unsigned pick = (unsigned)(h_rand(&w->rs) % 10);

	s->key = k;
	s->busy = true;
	w->m[k].inflight = true;
	key_of(w, k, key);
	if (pick < 4) {
		s->opc = NKV_KV_STORE;
		/* a spread of sizes: empty, in-capsule (<= 8 KiB), and R2T with several H2CData PDUs */
		uint32_t r = (uint32_t)(h_rand(&w->rs) % 100);
		s->len = r < 5 ? 0 : r < 50 ? (uint32_t)(h_rand(&w->rs) % 8192) : (uint32_t)(h_rand(&w->rs) % MAX_VAL);
		s->seed = h_rand(&w->rs);
		h_fill(s->buf, s->len, s->seed);
		return nkv_store_async(w->qp, NS, key, (unsigned)strlen(key), s->buf, s->len, 0, slot_done, s);
	}
	if (pick < 8) {
		s->opc = NKV_KV_RETRIEVE;
		return nkv_retrieve_async(w->qp, NS, key, (unsigned)strlen(key), s->buf, MAX_VAL, slot_done, s);
	}
	if (pick < 9) {
		s->opc = NKV_KV_EXIST;
		return nkv_exist_async(w->qp, NS, key, (unsigned)strlen(key), slot_done, s);
	}
	s->opc = NKV_KV_DELETE;
	return nkv_delete_async(w->qp, NS, key, (unsigned)strlen(key), slot_done, s);
}

static void *queue_worker(void *arg)
{
	struct worker *w = arg;
	unsigned issued = 0;
	uint64_t deadline = nkv_now_ms() + 300000;

	while (w->done < OPS_PER_QUEUE && nkv_now_ms() < deadline) {
		for (int i = 0; i < QD && issued < OPS_PER_QUEUE; i++)
			if (!w->slots[i].busy) {
				if (issue(w, &w->slots[i]) < 0) {
					w->errors++;
					w->slots[i].busy = false;
					w->done++;
				}
				issued++;
			}
		if (nkv_qpair_poll(w->qp, 1000) < 0) {
			w->errors++;
			break;
		}
	}
	if (w->done < OPS_PER_QUEUE)
		w->errors++;
	return NULL;
}

struct conn {
	int id;
	struct worker w[QUEUES];
	struct nkv_ctrl *ctrl;
	int err;
};

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct nkv_conn_opts o = {.hostnqn = HOSTNQN, .timeout_ms = 60000, .hdgst = c->id % 2, .ddgst = c->id % 4 == 1};
	pthread_t th[QUEUES];

	if ((c->err = nkv_connect("127.0.0.1", H.port, SUBNQN, &o, &c->ctrl)) < 0)
		return NULL;
	for (int q = 0; q < QUEUES; q++) {
		struct worker *w = &c->w[q];
		w->id = c->id;
		w->q = q;
		w->rs = (uint64_t)c->id * 1000 + (uint64_t)q;
		if ((c->err = nkv_qpair_create(c->ctrl, 32, &w->qp)) < 0)
			return NULL;
		for (int i = 0; i < QD; i++)
			w->slots[i] = (struct slot){.w = w, .buf = malloc(MAX_VAL)};
	}
	for (int q = 0; q < QUEUES; q++)
		pthread_create(&th[q], NULL, queue_worker, &c->w[q]);
	for (int q = 0; q < QUEUES; q++)
		pthread_join(th[q], NULL);
	for (int q = 0; q < QUEUES; q++) {
		nkv_qpair_destroy(c->w[q].qp);
		for (int i = 0; i < QD; i++)
			free(c->w[q].slots[i].buf);
	}
	nkv_disconnect(c->ctrl);
	return NULL;
}

static void test_parallel(void)
{
	static struct conn conns[CONNS];
	pthread_t th[CONNS];
	unsigned done = 0, errors = 0, verified = 0, failed_conn = 0;
	uint64_t t0 = nkv_now_ms();

	for (int i = 0; i < CONNS; i++) {
		conns[i].id = i;
		pthread_create(&th[i], NULL, conn_thread, &conns[i]);
	}
	for (int i = 0; i < CONNS; i++) {
		pthread_join(th[i], NULL);
		failed_conn += conns[i].err != 0;
		for (int q = 0; q < QUEUES; q++) {
			done += conns[i].w[q].done;
			errors += conns[i].w[q].errors;
			verified += conns[i].w[q].verified;
		}
	}
	CHECK(failed_conn == 0, "%u connections failed to set up", failed_conn);
	CHECK(done == CONNS * QUEUES * OPS_PER_QUEUE, "%u of %u commands completed", done, CONNS * QUEUES * OPS_PER_QUEUE);
	CHECK(errors == 0, "%u commands disagreed with the model", errors);
	CHECK(verified > 1000, "only %u retrieves verified values", verified);
	printf("parallel: %d connections x %d queues, QD %d: %u commands in %.1f s, %u values verified\n", CONNS, QUEUES, QD,
	       done, (double)(nkv_now_ms() - t0) / 1000, verified);
}

/* ---- 2. backpressure ---------------------------------------------------------------------------- */

#define BP_LEN (512u << 10)
#define BP_QD 16
#define BP_CONNS 4
#define BP_OPS 64

struct bp {
	const char *port;
	int id;
	unsigned ok, bad;
};

static void bp_cb(void *arg, const struct nkv_cpl *cpl)
{
	unsigned *n = arg;
	n[cpl->status == 0 ? 0 : 1]++;
}

static void *bp_thread(void *arg)
{
	struct bp *b = arg;
	struct nkv_conn_opts o = {.hostnqn = HOSTNQN, .timeout_ms = 60000};
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	uint8_t *vals = malloc((size_t)BP_QD * BP_LEN), *out = malloc(BP_LEN);
	unsigned res[2] = {0, 0};
	char key[17];

	if (nkv_connect("127.0.0.1", b->port, SUBNQN, &o, &ctrl) < 0 || nkv_qpair_create(ctrl, BP_QD, &qp) < 0) {
		b->bad = BP_OPS;
		free(vals);
		free(out);
		return NULL;
	}
	for (int i = 0; i < BP_QD; i++)
		h_fill(vals + (size_t)i * BP_LEN, BP_LEN, (uint64_t)b->id << 8 | (uint64_t)i);
	for (int sent = 0; sent < BP_OPS;) {
		while (sent < BP_OPS && nkv_qpair_outstanding(qp) < BP_QD) {
			int i = sent % BP_QD;
			snprintf(key, sizeof(key), "bp%d.%d", b->id, i);
			if (nkv_store_async(qp, NS, key, (unsigned)strlen(key), vals + (size_t)i * BP_LEN, BP_LEN, 0, bp_cb, res) < 0)
				break;
			sent++;
		}
		if (nkv_qpair_poll(qp, 1000) < 0)
			break;
	}
	while (nkv_qpair_outstanding(qp) > 0 && nkv_qpair_poll(qp, 1000) >= 0)
		;
	for (int i = 0; i < BP_QD; i++) { /* the last Store of each key is what reads back */
		uint32_t size = 0;
		snprintf(key, sizeof(key), "bp%d.%d", b->id, i);
		if (nkv_retrieve(qp, NS, key, (unsigned)strlen(key), out, BP_LEN, &size, NULL) == 0 && size == BP_LEN &&
		    h_verify(out, BP_LEN, (uint64_t)b->id << 8 | (uint64_t)i))
			res[0]++;
		else
			res[1]++;
	}
	b->ok = res[0];
	b->bad = res[1];
	nkv_qpair_destroy(qp);
	nkv_disconnect(ctrl);
	free(vals);
	free(out);
	return NULL;
}

static void test_backpressure(void)
{
	struct nkv_tcp_conf tc = {.reactors = 1, .buffer_budget = 2u << 20};
	struct nkv_tcp *t;
	char port[16];
	struct bp b[BP_CONNS];
	pthread_t th[BP_CONNS];
	unsigned ok = 0, bad = 0;
	int p = 0;

	CHECK(nkv_tcp_create(H.tgt, &tc, &t) == 0 && (p = nkv_tcp_listen(t, "127.0.0.1", "0", false)) > 0,
	      "second transport");
	snprintf(port, sizeof(port), "%d", p);
	for (int i = 0; i < BP_CONNS; i++) {
		b[i] = (struct bp){.port = port, .id = i};
		pthread_create(&th[i], NULL, bp_thread, &b[i]);
	}
	for (int i = 0; i < BP_CONNS; i++) {
		pthread_join(th[i], NULL);
		ok += b[i].ok;
		bad += b[i].bad;
	}
	CHECK(bad == 0 && ok == BP_CONNS * (BP_OPS + BP_QD), "backpressure: %u ok, %u failed", ok, bad);
	printf("backpressure: %d connections x %d Stores of %u KiB (QD %d) through a 2 MiB buffer budget: %u ok\n",
	       BP_CONNS, BP_OPS, BP_LEN >> 10, BP_QD, ok);
	nkv_tcp_destroy(t, 5000);
}

/* ---- 3. graceful stop under load --------------------------------------------------------------- */

struct stopper {
	const char *port;
	atomic_bool connected;
	unsigned ok, host_path, wrong, submitted;
};

static void stop_cb(void *arg, const struct nkv_cpl *cpl)
{
	struct stopper *s = arg;
	if (cpl->status == 0)
		s->ok++;
	else if (cpl->status == NKV_STATUS_HOST_PATH)
		s->host_path++;
	else
		s->wrong++;
}

static void *stop_thread(void *arg)
{
	struct stopper *s = arg;
	struct nkv_conn_opts o = {.hostnqn = HOSTNQN, .timeout_ms = 10000};
	struct nkv_ctrl *ctrl;
	struct nkv_qpair *qp;
	static uint8_t val[64 << 10];
	char key[17];

	if (nkv_connect("127.0.0.1", s->port, SUBNQN, &o, &ctrl) < 0 || nkv_qpair_create(ctrl, 32, &qp) < 0) {
		atomic_store(&s->connected, true);
		return NULL;
	}
	atomic_store(&s->connected, true);
	for (unsigned i = 0;; i++) {
		while (nkv_qpair_outstanding(qp) < 16) {
			snprintf(key, sizeof(key), "stop%u", i % 64);
			if (nkv_store_async(qp, NS, key, (unsigned)strlen(key), val, sizeof(val), 0, stop_cb, s) < 0)
				goto out;
			s->submitted++;
		}
		if (nkv_qpair_poll(qp, 1000) < 0)
			break;
	}
out:
	nkv_qpair_destroy(qp);
	nkv_disconnect(ctrl);
	return NULL;
}

static void test_graceful_stop(void)
{
	struct nkv_tcp *t;
	struct stopper s = {0};
	char port[16];
	pthread_t th;
	int p = 0;

	CHECK(nkv_tcp_create(H.tgt, &(struct nkv_tcp_conf){.reactors = 1}, &t) == 0 &&
		      (p = nkv_tcp_listen(t, "127.0.0.1", "0", false)) > 0, "third transport");
	snprintf(port, sizeof(port), "%d", p);
	s.port = port;
	pthread_create(&th, NULL, stop_thread, &s);
	while (!atomic_load(&s.connected))
		usleep(1000);
	usleep(300 * 1000);
	uint64_t t0 = nkv_now_ms();
	nkv_tcp_destroy(t, 5000);
	uint64_t dt = nkv_now_ms() - t0;
	pthread_join(th, NULL);
	CHECK(dt < 5000, "stop took %llu ms (grace 5000)", (unsigned long long)dt);
	CHECK(s.ok > 0 && s.wrong == 0 && s.ok + s.host_path == s.submitted,
	      "during stop: %u ok, %u host path errors, %u other, %u submitted", s.ok, s.host_path, s.wrong, s.submitted);
	printf("graceful stop: %llu ms; %u Stores succeeded, %u failed with Host Pathing Error\n", (unsigned long long)dt,
	       s.ok, s.host_path);
}

int main(int argc, char **argv)
{
	char *args[] = {argv[0], argc > 1 ? argv[1] : "mem", "tcp", NULL};

	h_init(3, args, "tcp_stress");
	h_add_ns(NS, "stress", 0, false);
	test_parallel();
	test_backpressure();
	test_graceful_stop();
	return h_finish();
}
