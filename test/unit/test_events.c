/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_events.c - the daemon's cache event publisher (tools/rados-nkv/events.c) in one process:
 * BlockStored and BlockRemoved in both layouts byte for byte against encodings written out by hand
 * from the msgpack specification (not produced by the library under test), the bounds of the
 * encoder, then the publisher over a real ZMQ socket (ipc://) read by a SUB socket: three frames,
 * the topic kv@<medium>@<namespace>, the big-endian sequence from 0, the payload; the publisher
 * connecting to a subscriber that binds; a full queue drops events, counts them and leaves a gap in
 * the sequence; what is queued at close is still sent.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <zmq.h>

#include "daemon.h"

/* 1700000000.5 as a msgpack float 64 (CBh, then the IEEE 754 double, big-endian) */
#define TS_BYTES 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0x00, 0x00
#define TS 1700000000.5
#define HASH 0x0123456789abcdefull
/* a block hash: always uint 64 (CFh, then 8 bytes big-endian), never a shorter form */
#define HASH_BYTES 0xcf, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef
#define OS_BYTES 0xac, 'O', 'B', 'J', 'E', 'C', 'T', '_', 'S', 'T', 'O', 'R', 'E' /* "OBJECT_STORE" */

/* [ts, [["BlockStored", [hash], nil, [], 0, nil, "OBJECT_STORE", nil]], nil] */
static const uint8_t STORED_ARRAY[] = {
	0x93, TS_BYTES, 0x91, 0x98, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
	0x91, HASH_BYTES, 0xc0, 0x90, 0x00, 0xc0, OS_BYTES, 0xc0, 0xc0,
};

/* [ts, [["BlockRemoved", [hash], "OBJECT_STORE"]], nil] */
static const uint8_t REMOVED_ARRAY[] = {
	0x93, TS_BYTES, 0x91, 0x93, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
	0x91, HASH_BYTES, OS_BYTES, 0xc0,
};

/* [ts, [{"type": "BlockStored", "block_hashes": [hash], "parent_block_hash": nil, "token_ids": [],
 *   "block_size": 0, "lora_id": nil, "medium": "OBJECT_STORE", "lora_name": nil}], nil] */
static const uint8_t STORED_MAP[] = {
	0x93, TS_BYTES, 0x91, 0x88,
	0xa4, 't', 'y', 'p', 'e', 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
	0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, HASH_BYTES,
	0xb1, 'p', 'a', 'r', 'e', 'n', 't', '_', 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 0xc0,
	0xa9, 't', 'o', 'k', 'e', 'n', '_', 'i', 'd', 's', 0x90,
	0xaa, 'b', 'l', 'o', 'c', 'k', '_', 's', 'i', 'z', 'e', 0x00,
	0xa7, 'l', 'o', 'r', 'a', '_', 'i', 'd', 0xc0,
	0xa6, 'm', 'e', 'd', 'i', 'u', 'm', OS_BYTES,
	0xa9, 'l', 'o', 'r', 'a', '_', 'n', 'a', 'm', 'e', 0xc0,
	0xc0,
};

/* [ts, [{"type": "BlockRemoved", "block_hashes": [hash], "medium": "OBJECT_STORE"}], nil] */
static const uint8_t REMOVED_MAP[] = {
	0x93, TS_BYTES, 0x91, 0x83,
	0xa4, 't', 'y', 'p', 'e', 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
	0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, HASH_BYTES,
	0xa6, 'm', 'e', 'd', 'i', 'u', 'm', OS_BYTES,
	0xc0,
};

static void check_encoding(int format, bool stored, const uint8_t *want, size_t len)
{
	uint8_t out[EVENTS_MSG_MAX];
	int n = events_encode(format, TS, stored, HASH, "OBJECT_STORE", out, sizeof(out));
	assert_int_equal(n, len);
	assert_memory_equal(out, want, len);
}

static void encode_array(void **state)
{
	(void)state;
	check_encoding(EVENTS_ARRAY, true, STORED_ARRAY, sizeof(STORED_ARRAY));
	check_encoding(EVENTS_ARRAY, false, REMOVED_ARRAY, sizeof(REMOVED_ARRAY));
}

static void encode_map(void **state)
{
	(void)state;
	check_encoding(EVENTS_MAP, true, STORED_MAP, sizeof(STORED_MAP));
	check_encoding(EVENTS_MAP, false, REMOVED_MAP, sizeof(REMOVED_MAP));
}

/* No medium: nil in its place; a small hash keeps the 9-byte form (llm-d's decoder refuses the
 * compact forms of small numbers as hashes). */
static void encode_nil_medium_small_hash(void **state)
{
	uint8_t out[EVENTS_MSG_MAX];
	static const uint8_t want[] = {0x91, 0xcf, 0, 0, 0, 0, 0, 0, 0, 5, 0xc0, 0xc0};
	(void)state;
	int n = events_encode(EVENTS_ARRAY, TS, false, 5, NULL, out, sizeof(out));
	/* 93, ts(9), 91, 93, "BlockRemoved"(13), then the tail above */
	assert_int_equal(n, 1 + 9 + 1 + 1 + 13 + sizeof(want));
	assert_memory_equal(out + 25, want, sizeof(want));
	n = events_encode(EVENTS_ARRAY, TS, false, 5, "", out, sizeof(out));
	assert_memory_equal(out + 25, want, sizeof(want));
}

static void encode_bounds(void **state)
{
	uint8_t out[EVENTS_MSG_MAX];
	(void)state;
	assert_int_equal(events_encode(7, TS, true, HASH, NULL, out, sizeof(out)), -EINVAL);
	/* one byte short of the whole payload, and nothing at all */
	assert_int_equal(events_encode(EVENTS_ARRAY, TS, true, HASH, "OBJECT_STORE", out, sizeof(STORED_ARRAY) - 1),
			 -ENOSPC);
	assert_int_equal(events_encode(EVENTS_MAP, TS, false, HASH, "OBJECT_STORE", out, 0), -ENOSPC);
	/* the largest payload (a 63-byte medium, map layout, BlockStored) fits the publisher's buffer */
	char medium[64];
	memset(medium, 'm', 63);
	medium[63] = '\0';
	assert_in_range(events_encode(EVENTS_MAP, TS, true, UINT64_MAX, medium, out, sizeof(out)), 1, EVENTS_MSG_MAX);
}

/* ---- the publisher over ZMQ --------------------------------------------------------------------- */

struct sub {
	char dir[64], ep[128];
	void *ctx, *sock;
};

struct msg {
	char topic[512];
	uint64_t seq;
	uint8_t payload[EVENTS_MSG_MAX];
	int plen;
};

/* One message of exactly three frames within @ms, or -1 on timeout. */
static int recv_msg(struct sub *s, struct msg *m, int ms)
{
	zmq_pollitem_t it = {.socket = s->sock, .events = ZMQ_POLLIN};
	uint8_t seq[16];
	int more = 0;
	size_t ml = sizeof(more);

	if (zmq_poll(&it, 1, ms) <= 0)
		return -1;
	int tl = zmq_recv(s->sock, m->topic, sizeof(m->topic) - 1, 0);
	assert_true(tl > 0);
	m->topic[tl] = '\0';
	assert_int_equal(zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &ml), 0);
	assert_int_equal(more, 1);
	assert_int_equal(zmq_recv(s->sock, seq, sizeof(seq), 0), 8); /* exactly 8 bytes */
	assert_int_equal(zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &ml), 0);
	assert_int_equal(more, 1);
	m->plen = zmq_recv(s->sock, m->payload, sizeof(m->payload), 0);
	assert_in_range(m->plen, 1, sizeof(m->payload));
	assert_int_equal(zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &ml), 0);
	assert_int_equal(more, 0); /* three frames, no more */
	m->seq = 0;
	for (int i = 0; i < 8; i++)
		m->seq = m->seq << 8 | seq[i];
	return 0;
}

static void sub_open(struct sub *s)
{
	snprintf(s->dir, sizeof(s->dir), "/tmp/nkv-events.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	snprintf(s->ep, sizeof(s->ep), "ipc://%s/pub", s->dir);
	assert_non_null(s->ctx = zmq_ctx_new());
	assert_non_null(s->sock = zmq_socket(s->ctx, ZMQ_SUB));
	assert_int_equal(zmq_setsockopt(s->sock, ZMQ_SUBSCRIBE, "kv@", 3), 0);
}

static void sub_close(struct sub *s)
{
	char path[160];
	zmq_close(s->sock);
	zmq_ctx_term(s->ctx);
	snprintf(path, sizeof(path), "%s/pub", s->dir);
	unlink(path);
	rmdir(s->dir);
}

static struct nkv_cache_event ev_of(const char *ns, uint64_t hash, unsigned reason)
{
	struct nkv_cache_event ev = {.subnqn = "nqn.2026-12.io.test:ev", .nsid = 1, .rados_ns = ns, .klen = 1,
				     .reason = (uint8_t)reason, .size = 4096, .block_hash = hash, .has_hash = true};
	return ev;
}

/* A PUB socket drops what it sends before a subscription reaches it. Post probes one at a time until
 * one arrives; every probe before it was lost, none after it was posted, so the next message is the
 * next event posted. @return the sequence number of the probe received. */
static uint64_t handshake(struct daemon_events *d, struct sub *s, const char *topic)
{
	struct nkv_cache_event ev = ev_of("probe", 1, NKV_CACHE_EVICTED);
	struct msg m;

	for (int i = 0; i < 200; i++) {
		events_post(d, &ev);
		if (recv_msg(s, &m, 50) == 0) {
			assert_string_equal(m.topic, topic);
			return m.seq;
		}
	}
	fail_msg("no probe event reached the subscriber in 10 s");
	return 0;
}

static void publish_frames(void **state)
{
	struct daemon_events *d;
	struct events_counts c;
	struct sub s;
	struct msg m;
	(void)state;

	sub_open(&s);
	assert_int_equal(events_open(s.ep, false, "gw-1", EVENTS_ARRAY, "OBJECT_STORE", 64, &d), 0);
	assert_int_equal(zmq_connect(s.sock, s.ep), 0);
	assert_int_equal(events_run(d), 0);
	/* the topic's pod field is the medium, as llm-d's storage-tier publishers name it */
	uint64_t seq0 = handshake(d, &s, "kv@OBJECT_STORE@probe");
	assert_true(seq0 < 200); /* numbered from 0, one per event */

	struct timespec t0, t1;
	clock_gettime(CLOCK_REALTIME, &t0);
	struct nkv_cache_event ev = ev_of("tenant-a", HASH, NKV_CACHE_STORED);
	events_post(d, &ev);
	ev = ev_of("", HASH, NKV_CACHE_EXPIRED); /* the default RADOS namespace: an empty last topic field */
	events_post(d, &ev);
	ev = ev_of("t", HASH, NKV_CACHE_DELETED);
	events_post(d, &ev);
	ev = ev_of("t", HASH, NKV_CACHE_EVICTED);
	events_post(d, &ev);

	assert_int_equal(recv_msg(&s, &m, 5000), 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	assert_string_equal(m.topic, "kv@OBJECT_STORE@tenant-a");
	assert_int_equal(m.seq, seq0 + 1);
	/* the payload is STORED_ARRAY but for the timestamp: when the event was posted */
	assert_int_equal(m.plen, sizeof(STORED_ARRAY));
	assert_memory_equal(m.payload, STORED_ARRAY, 1);
	assert_memory_equal(m.payload + 10, STORED_ARRAY + 10, sizeof(STORED_ARRAY) - 10);
	assert_int_equal(m.payload[1], 0xcb);
	uint64_t bits = 0;
	double ts;
	for (int i = 2; i < 10; i++)
		bits = bits << 8 | m.payload[i];
	memcpy(&ts, &bits, sizeof(ts));
	assert_true(ts >= (double)t0.tv_sec && ts <= (double)t1.tv_sec + 1);

	/* expiry, host Delete and eviction are all BlockRemoved */
	static const char *const topics[] = {"kv@OBJECT_STORE@", "kv@OBJECT_STORE@t", "kv@OBJECT_STORE@t"};
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(recv_msg(&s, &m, 5000), 0);
		assert_string_equal(m.topic, topics[i]);
		assert_int_equal(m.seq, seq0 + 2 + i);
		assert_int_equal(m.plen, sizeof(REMOVED_ARRAY));
		assert_memory_equal(m.payload + 10, REMOVED_ARRAY + 10, sizeof(REMOVED_ARRAY) - 10);
	}

	/* the counter follows zmq_send, which may return after the subscriber already has the message */
	for (int i = 0; i < 200 && (events_counts(d, &c), c.published < seq0 + 5); i++)
		usleep(10000);
	assert_int_equal(c.published, seq0 + 5); /* the probes that reached no one were sent all the same */
	assert_int_equal(c.dropped, 0);
	assert_int_equal(c.send_errors, 0);
	events_close(d);
	sub_close(&s);
}

/* --events-mode connect: the subscriber binds (llm-d's global socket) and the publisher connects. */
static void publish_connect(void **state)
{
	struct daemon_events *d;
	struct sub s;
	struct msg m;
	(void)state;

	sub_open(&s);
	assert_int_equal(zmq_bind(s.sock, s.ep), 0);
	assert_int_equal(events_open(s.ep, true, "gw-1", EVENTS_MAP, "OBJECT_STORE", 64, &d), 0);
	assert_int_equal(events_run(d), 0);
	uint64_t seq0 = handshake(d, &s, "kv@OBJECT_STORE@probe");
	struct nkv_cache_event ev = ev_of("model", HASH, NKV_CACHE_STORED);
	events_post(d, &ev);
	assert_int_equal(recv_msg(&s, &m, 5000), 0);
	assert_string_equal(m.topic, "kv@OBJECT_STORE@model");
	assert_int_equal(m.seq, seq0 + 1);
	assert_int_equal(m.plen, sizeof(STORED_MAP));
	assert_memory_equal(m.payload + 10, STORED_MAP + 10, sizeof(STORED_MAP) - 10);
	events_close(d);
	sub_close(&s);
}

/* A full queue drops and counts, and the sequence skips the dropped events' numbers. */
static void full_queue_drops(void **state)
{
	struct daemon_events *d;
	struct events_counts c;
	struct sub s;
	struct msg m;
	(void)state;

	sub_open(&s);
	assert_int_equal(events_open(s.ep, false, "gw-1", EVENTS_MAP, NULL, 4, &d), 0);
	assert_int_equal(zmq_connect(s.sock, s.ep), 0);
	assert_int_equal(events_run(d), 0);
	uint64_t seq0 = handshake(d, &s, "kv@gw-1@probe"); /* no medium: the gateway's name */

	events_test_hold(d, true);
	for (unsigned i = 0; i < 6; i++) { /* 4 fit, 2 are dropped */
		struct nkv_cache_event ev = ev_of("ns", i, NKV_CACHE_EVICTED);
		events_post(d, &ev);
	}
	events_counts(d, &c);
	assert_int_equal(c.queued, 4);
	assert_int_equal(c.dropped, 2);
	events_test_hold(d, false);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(recv_msg(&s, &m, 5000), 0);
		assert_int_equal(m.seq, seq0 + 1 + i);
		/* map layout, medium nil: ... "block_hashes", [hash i], "medium", nil}], nil] */
		static const uint8_t tail[] = {0xa6, 'm', 'e', 'd', 'i', 'u', 'm', 0xc0, 0xc0};
		assert_int_equal(m.payload[0], 0x93);
		assert_int_equal(m.payload[m.plen - 10], i); /* the hash's last byte: before "medium", nil, nil */
		assert_memory_equal(m.payload + m.plen - 9, tail, sizeof(tail));
	}
	struct nkv_cache_event ev = ev_of("ns", 0x77, NKV_CACHE_EVICTED);
	events_post(d, &ev);
	assert_int_equal(recv_msg(&s, &m, 5000), 0);
	assert_int_equal(m.seq, seq0 + 7); /* seq0 + 5 and + 6 were dropped: the gap a subscriber sees */

	/* A RADOS namespace name too long for the queue entry: dropped and counted, never truncated. */
	char longns[EVENTS_NS_MAX + 1];
	memset(longns, 'n', EVENTS_NS_MAX);
	longns[EVENTS_NS_MAX] = '\0';
	ev = ev_of(longns, 0x77, NKV_CACHE_EVICTED);
	events_post(d, &ev);
	assert_int_equal(recv_msg(&s, &m, 300), -1);
	for (int i = 0; i < 200 && (events_counts(d, &c), c.published < seq0 + 1 + 4 + 1); i++)
		usleep(10000);
	assert_int_equal(c.dropped, 3);
	assert_int_equal(c.published, seq0 + 1 + 4 + 1);

	/* Events still queued when the publisher closes are sent first. */
	events_test_hold(d, true);
	for (unsigned i = 0; i < 3; i++) {
		ev = ev_of("ns", 0xa0 + i, NKV_CACHE_EXPIRED);
		events_post(d, &ev);
	}
	events_close(d);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(recv_msg(&s, &m, 5000), 0);
		assert_int_equal(m.seq, seq0 + 9 + i);
	}
	sub_close(&s);
}

static void open_errors(void **state)
{
	struct daemon_events *d = (void *)1;
	(void)state;
	assert_int_equal(events_open("nonsense", false, "gw", EVENTS_ARRAY, NULL, 4, &d), -EINVAL);
	assert_null(d);
	assert_int_equal(events_open("tcp://127.0.0.1:1", false, "gw", 9, NULL, 4, &d), -EINVAL);
	assert_int_equal(events_open("tcp://127.0.0.1:1", false, "gw", EVENTS_ARRAY, NULL, 0, &d), -EINVAL);
	/* an address another socket holds */
	void *ctx = zmq_ctx_new(), *pub = zmq_socket(ctx, ZMQ_PUB);
	char ep[128];
	size_t epl = sizeof(ep);
	assert_int_equal(zmq_bind(pub, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(pub, ZMQ_LAST_ENDPOINT, ep, &epl), 0);
	assert_int_equal(events_open(ep, false, "gw", EVENTS_ARRAY, NULL, 4, &d), -EADDRINUSE);
	assert_null(d);
	zmq_close(pub);
	zmq_ctx_term(ctx);
	assert_int_equal(events_open("ipc:///nonexistent-dir/x/y", false, "gw", EVENTS_ARRAY, NULL, 4, &d), -ENOENT);
	assert_string_equal(events_strerror(-ENOENT), strerror(ENOENT));
	/* connect: a bad endpoint is refused; one nobody listens on is not (ZMQ connects when it can) */
	assert_int_equal(events_open("nonsense", true, "gw", EVENTS_ARRAY, NULL, 4, &d), -EINVAL);
	assert_null(d);
	assert_int_equal(events_open("tcp://127.0.0.1:1", true, "gw", EVENTS_ARRAY, NULL, 4, &d), 0);
	events_close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode_array),
		cmocka_unit_test(encode_map),
		cmocka_unit_test(encode_nil_medium_small_hash),
		cmocka_unit_test(encode_bounds),
		cmocka_unit_test(publish_frames),
		cmocka_unit_test(publish_connect),
		cmocka_unit_test(full_queue_drops),
		cmocka_unit_test(open_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
