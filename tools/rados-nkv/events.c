/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events.c - the daemon's cache events (--events ENDPOINT): every entry a cache namespace stores,
 * deletes, evicts or expires is published as a KV event in the layout llm-d's indexer reads from
 * vLLM (BlockStored, BlockRemoved), named by the block hash the serving engine gave it on its Store,
 * so the indexer learns which engine blocks this storage tier holds and when one is gone.
 *
 * One ZMQ PUB socket, bound to ENDPOINT or connected to it (--events-mode connect, for a subscriber
 * that binds); each event is one message of three frames:
 *
 *     topic     "kv@<medium>@<RADOS namespace>" (llm-d's pod and model fields)
 *     sequence  8 bytes, big-endian, per publisher, starting at 0
 *     payload   msgpack of an event batch holding one BlockStored or BlockRemoved
 *
 * The target reports entries on its cache thread and on the threads that complete commands, which
 * must not block: the callback only copies the event into a bounded ring under a mutex held for
 * that copy, and this file's own thread encodes and sends. A full ring drops the event and counts
 * it; its sequence number is used up all the same, so a subscriber sees the gap. ZMQ's PUB socket
 * never blocks either: past its high-water mark a slow subscriber loses messages (ZMQ's own rule),
 * which it also sees as a gap.
 *
 * Built only where libzmq and msgpack-c were found (NKV_HAVE_EVENTS); elsewhere --events is refused
 * at startup with a message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKV_LOG_COMPONENT "events"
#include "common/log.h"
#include "daemon.h"

#ifdef NKV_HAVE_EVENTS
#include <msgpack.h>
#include <zmq.h>

#define EVENTS_BATCH 64       /* events taken from the ring per lock */
#define EVENTS_LINGER_MS 1000 /* at exit, time given to messages still queued for subscribers */

struct ev_entry {
	uint64_t seq;
	double ts;                 /* when the target reported it, seconds since the epoch */
	uint64_t hash;             /* the block hash (nkv_cache_event.block_hash) */
	bool stored;               /* BlockStored; else BlockRemoved */
	char ns[EVENTS_NS_MAX];
};

struct daemon_events {
	void *zctx, *pub;
	char pod[128], medium[64]; /* the topic's pod field: the medium, or the gateway without one */
	int format;               /* enum events_format */
	pthread_mutex_t lock;     /* the ring, next_seq, stop */
	pthread_cond_t cond;      /* ring not empty, or stop */
	struct ev_entry *ring;
	unsigned cap, head, count;
	uint64_t next_seq;
	bool stop, started;
	bool hold;                /* events_test_hold(): the thread leaves the ring alone */
	pthread_t thr;
	atomic_uint_fast64_t published, dropped_full, dropped_bad, send_errors;
	uint64_t logged_full, logged_bad; /* drops already logged (the events thread's) */
};

/* ---- the encoder ---------------------------------------------------------------------------- */

struct fixbuf {
	char *p;
	size_t len, cap;
};

static int fix_write(void *data, const char *buf, size_t len)
{
	struct fixbuf *b = data;

	if (len > b->cap - b->len)
		return -1;
	memcpy(b->p + b->len, buf, len);
	b->len += len;
	return 0;
}

static int pack_cstr(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

static int pack_hashes(msgpack_packer *pk, uint64_t hash)
{
	/* Always the 9-byte uint64 form: llm-d's decoder (Go, vmihailenco/msgpack) turns the compact
	 * forms of small numbers into int8..uint32, which its hash reader refuses. */
	return msgpack_pack_array(pk, 1) || msgpack_pack_fix_uint64(pk, hash);
}

static int pack_opt_str(msgpack_packer *pk, const char *s)
{
	return s && *s ? pack_cstr(pk, s) : msgpack_pack_nil(pk);
}

int events_encode(int format, double ts, bool stored, uint64_t hash, const char *medium, void *out, size_t cap)
{
	struct fixbuf b = {.p = out, .cap = cap};
	msgpack_packer pk;
	bool map = format == EVENTS_MAP;
	int e = 0;

	if (format != EVENTS_ARRAY && format != EVENTS_MAP)
		return -EINVAL;
	msgpack_packer_init(&pk, &b, fix_write);
	/* The batch is vLLM's EventBatch, array_like: [ts, [event], data_parallel_rank (nil)]. */
	e |= msgpack_pack_array(&pk, 3) || msgpack_pack_double(&pk, ts) || msgpack_pack_array(&pk, 1);
	/* The event: vLLM's BlockStored / BlockRemoved, field for field in declaration order, as a
	 * tagged array [tag, field...] or, in the map layout, {"type": tag, "field": value...} with the
	 * fields that have no default (the ones msgspec's omit_defaults always writes). A storage tier
	 * knows no parent, tokens or block size: nil, [] and 0, as llm-d's own storage publisher sends. */
	if (stored) {
		e |= map ? msgpack_pack_map(&pk, 8) || pack_cstr(&pk, "type") : msgpack_pack_array(&pk, 8);
		e |= pack_cstr(&pk, "BlockStored");
		e |= (map && pack_cstr(&pk, "block_hashes")) || pack_hashes(&pk, hash);
		e |= (map && pack_cstr(&pk, "parent_block_hash")) || msgpack_pack_nil(&pk);
		e |= (map && pack_cstr(&pk, "token_ids")) || msgpack_pack_array(&pk, 0);
		e |= (map && pack_cstr(&pk, "block_size")) || msgpack_pack_int(&pk, 0);
		e |= (map && pack_cstr(&pk, "lora_id")) || msgpack_pack_nil(&pk);
		e |= (map && pack_cstr(&pk, "medium")) || pack_opt_str(&pk, medium);
		e |= (map && pack_cstr(&pk, "lora_name")) || msgpack_pack_nil(&pk);
	} else {
		e |= map ? msgpack_pack_map(&pk, 3) || pack_cstr(&pk, "type") : msgpack_pack_array(&pk, 3);
		e |= pack_cstr(&pk, "BlockRemoved");
		e |= (map && pack_cstr(&pk, "block_hashes")) || pack_hashes(&pk, hash);
		e |= (map && pack_cstr(&pk, "medium")) || pack_opt_str(&pk, medium);
	}
	e |= msgpack_pack_nil(&pk);
	return e ? -ENOSPC : (int)b.len;
}

/* ---- the ring and the callback -------------------------------------------------------------- */

void events_post(void *arg, const struct nkv_cache_event *ev)
{
	struct daemon_events *d = arg;
	struct timespec now;

	if (!d || !ev)
		return;
	size_t nslen = ev->rados_ns ? strlen(ev->rados_ns) : 0;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&d->lock);
	uint64_t seq = d->next_seq++;
	bool full = d->count == d->cap, bad = nslen >= EVENTS_NS_MAX;
	if (!full && !bad) {
		struct ev_entry *e = &d->ring[(d->head + d->count) % d->cap];
		e->seq = seq;
		e->ts = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
		e->hash = ev->block_hash;
		e->stored = ev->reason == NKV_CACHE_STORED;
		memcpy(e->ns, ev->rados_ns ? ev->rados_ns : "", nslen + 1);
		if (d->count++ == 0)
			pthread_cond_signal(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
	/* Counted here, logged by the events thread: a log line can wait on stderr, this thread may not. */
	if (full)
		atomic_fetch_add_explicit(&d->dropped_full, 1, memory_order_relaxed);
	else if (bad)
		atomic_fetch_add_explicit(&d->dropped_bad, 1, memory_order_relaxed);
}

/* ---- the publisher thread ------------------------------------------------------------------- */

static void publish(struct daemon_events *d, const struct ev_entry *e)
{
	char topic[sizeof(d->pod) + EVENTS_NS_MAX + 8], payload[EVENTS_MSG_MAX];
	uint8_t seq[8];
	int n = events_encode(d->format, e->ts, e->stored, e->hash, d->medium, payload, sizeof(payload));
	int tl = snprintf(topic, sizeof(topic), "kv@%s@%s", d->pod, e->ns);

	for (int i = 0; i < 8; i++)
		seq[i] = (uint8_t)(e->seq >> (56 - 8 * i));
	/* A PUB socket queues or drops, it does not block; ZMQ_DONTWAIT only makes that explicit. */
	if (n < 0 || zmq_send(d->pub, topic, (size_t)tl, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(d->pub, seq, sizeof(seq), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(d->pub, payload, (size_t)n, ZMQ_DONTWAIT) < 0) {
		atomic_fetch_add_explicit(&d->send_errors, 1, memory_order_relaxed);
		NKV_WARN("cannot publish event %llu: %s", (unsigned long long)e->seq,
			 n < 0 ? strerror(-n) : zmq_strerror(zmq_errno()));
		return;
	}
	atomic_fetch_add_explicit(&d->published, 1, memory_order_relaxed);
}

static void report_drops(struct daemon_events *d)
{
	uint64_t full = atomic_load_explicit(&d->dropped_full, memory_order_relaxed);
	uint64_t bad = atomic_load_explicit(&d->dropped_bad, memory_order_relaxed);

	if (full != d->logged_full)
		NKV_WARN("event queue full (%u events): %llu cache event(s) dropped (%llu in all); "
			 "subscribers see the gap in the sequence numbers", d->cap,
			 (unsigned long long)(full - d->logged_full), (unsigned long long)full);
	if (bad != d->logged_bad)
		NKV_WARN("%llu event(s) dropped: their RADOS namespace's name is %d bytes or longer",
			 (unsigned long long)(bad - d->logged_bad), EVENTS_NS_MAX);
	d->logged_full = full;
	d->logged_bad = bad;
}

static void *events_thread(void *arg)
{
	struct daemon_events *d = arg;
	struct ev_entry batch[EVENTS_BATCH];

	for (;;) {
		unsigned n = 0;
		pthread_mutex_lock(&d->lock);
		/* A second at most: drops of names too long wake nobody, and are logged from here. */
		if ((!d->count || d->hold) && !d->stop) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&d->cond, &d->lock, &until);
		}
		/* At stop, the ring is drained first: events the target reported before it stopped go out. */
		for (; n < EVENTS_BATCH && d->count && (!d->hold || d->stop); n++) {
			batch[n] = d->ring[d->head];
			d->head = (d->head + 1) % d->cap;
			d->count--;
		}
		bool stop = d->stop && !d->count;
		pthread_mutex_unlock(&d->lock);
		for (unsigned i = 0; i < n; i++)
			publish(d, &batch[i]);
		report_drops(d);
		if (stop && !n)
			break;
	}
	return NULL;
}

int events_open(const char *endpoint, bool connect, const char *gateway, int format, const char *medium,
		unsigned ring, struct daemon_events **out)
{
	struct daemon_events *d;
	int linger = EVENTS_LINGER_MS;

	*out = NULL;
	if (!endpoint || !gateway || ring < 1 || strlen(gateway) >= sizeof(d->pod) ||
	    (medium && strlen(medium) >= sizeof(d->medium)) || (format != EVENTS_ARRAY && format != EVENTS_MAP))
		return -EINVAL;
	if (!(d = calloc(1, sizeof(*d))) || !(d->ring = calloc(ring, sizeof(*d->ring)))) {
		free(d);
		return -ENOMEM;
	}
	/* llm-d's storage-tier publishers name the tier in the pod field (kv@OBJECT_STORE@model): a block
	 * stored here is held by the shared tier, whichever gateway stored it. */
	snprintf(d->pod, sizeof(d->pod), "%s", medium && *medium ? medium : gateway);
	snprintf(d->medium, sizeof(d->medium), "%s", medium ? medium : "");
	d->format = format;
	d->cap = ring;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if (!(d->zctx = zmq_ctx_new()) || !(d->pub = zmq_socket(d->zctx, ZMQ_PUB)) ||
	    zmq_setsockopt(d->pub, ZMQ_LINGER, &linger, sizeof(linger)) < 0 ||
	    (connect ? zmq_connect(d->pub, endpoint) : zmq_bind(d->pub, endpoint)) < 0) {
		int rc = zmq_errno();
		events_close(d);
		return rc ? -rc : -ENOMEM;
	}
	*out = d;
	return 0;
}

int events_run(struct daemon_events *d)
{
	int rc = pthread_create(&d->thr, NULL, events_thread, d);

	if (rc)
		return -rc;
	d->started = true;
	return 0;
}

void events_close(struct daemon_events *d)
{
	if (!d)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		pthread_cond_signal(&d->cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thr, NULL);
	}
	if (d->pub)
		zmq_close(d->pub);
	if (d->zctx)
		zmq_ctx_term(d->zctx); /* bounded by ZMQ_LINGER */
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d->ring);
	free(d);
}

void events_counts(struct daemon_events *d, struct events_counts *c)
{
	memset(c, 0, sizeof(*c));
	if (!d)
		return;
	c->published = atomic_load_explicit(&d->published, memory_order_relaxed);
	c->dropped = atomic_load_explicit(&d->dropped_full, memory_order_relaxed) +
		     atomic_load_explicit(&d->dropped_bad, memory_order_relaxed);
	c->send_errors = atomic_load_explicit(&d->send_errors, memory_order_relaxed);
	pthread_mutex_lock(&d->lock);
	c->queued = d->count;
	pthread_mutex_unlock(&d->lock);
}

void events_test_hold(struct daemon_events *d, bool hold)
{
	pthread_mutex_lock(&d->lock);
	d->hold = hold;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

void events_read_counts(void *arg, struct events_counts *c)
{
	events_counts(arg, c);
}

const char *events_strerror(int rc)
{
	return rc == -EINVAL ? "invalid settings" : zmq_strerror(-rc);
}

#endif
