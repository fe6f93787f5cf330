/*
 * test_events.c - the daemon's cache event publisher (tools/rados-nkv/events.c) in one process:
 * the msgpack payload of both layouts byte for byte against encodings written out by hand from the
 * msgpack specification (not produced by the library under test), the bounds of the encoder, then
 * the publisher over a real ZMQ socket (ipc://) read by a SUB socket: three frames, the topic, the
 * big-endian sequence from 0, the payload; a full queue drops events, counts them and leaves a gap
 * in the sequence; what is queued at close is still sent.
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

static const uint8_t KEY8[8] = {'g', 'p', 'u', 'k', 'e', 'y', '0', '1'};
/* 1700000000.5 as a msgpack float 64 (CBh, then the IEEE 754 double, big-endian) */
#define TS_BYTES 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0x00, 0x00
#define TS 1700000000.5

/* [1700000000.5, [["BlockRemoved", [bin "gpukey01"], "storage"]], nil] */
static const uint8_t ARRAY_PAYLOAD[] = {
	0x93, TS_BYTES, 0x91, 0x93, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
	0x91, 0xc4, 0x08, 'g', 'p', 'u', 'k', 'e', 'y', '0', '1', 0xa7, 's', 't', 'o', 'r', 'a', 'g', 'e', 0xc0,
};

/* {"ts": 1700000000.5, "events": [{"type": "BlockRemoved", "block_hashes": [bin "gpukey01"],
 *  "medium": "storage"}], "data_parallel_rank": nil} */
static const uint8_t MAP_PAYLOAD[] = {
	0x83, 0xa2, 't', 's', TS_BYTES, 0xa6, 'e', 'v', 'e', 'n', 't', 's', 0x91,
	0x83, 0xa4, 't', 'y', 'p', 'e', 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
	0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, 0xc4, 0x08, 'g', 'p', 'u', 'k', 'e', 'y',
	'0', '1', 0xa6, 'm', 'e', 'd', 'i', 'u', 'm', 0xa7, 's', 't', 'o', 'r', 'a', 'g', 'e',
	0xb2, 'd', 'a', 't', 'a', '_', 'p', 'a', 'r', 'a', 'l', 'l', 'e', 'l', '_', 'r', 'a', 'n', 'k', 0xc0,
};

static void encode_array(void **state)
{
	uint8_t out[EVENTS_MSG_MAX];
	(void)state;
	int n = events_encode(EVENTS_ARRAY, TS, KEY8, 8, "storage", out, sizeof(out));
	assert_int_equal(n, sizeof(ARRAY_PAYLOAD));
	assert_memory_equal(out, ARRAY_PAYLOAD, sizeof(ARRAY_PAYLOAD));
}

static void encode_map(void **state)
{
	uint8_t out[EVENTS_MSG_MAX];
	(void)state;
	int n = events_encode(EVENTS_MAP, TS, KEY8, 8, "storage", out, sizeof(out));
	assert_int_equal(n, sizeof(MAP_PAYLOAD));
	assert_memory_equal(out, MAP_PAYLOAD, sizeof(MAP_PAYLOAD));
}

/* No medium: nil in its place; a 16-byte key and a 1-byte key as bin 8 of their length. */
static void encode_nil_medium_and_key_sizes(void **state)
{
	uint8_t out[EVENTS_MSG_MAX], key[16];
	(void)state;
	for (unsigned i = 0; i < 16; i++)
		key[i] = (uint8_t)(0xf0 + i);
	int n = events_encode(EVENTS_ARRAY, TS, key, 16, NULL, out, sizeof(out));
	/* 93, ts(9), 91, 93, "BlockRemoved"(13), 91, c4 10 + 16 bytes, c0, c0 */
	assert_int_equal(n, 1 + 9 + 1 + 1 + 13 + 1 + 2 + 16 + 1 + 1);
	assert_int_equal(out[26], 0xc4);
	assert_int_equal(out[27], 16);
	assert_memory_equal(out + 28, key, 16);
	assert_int_equal(out[44], 0xc0); /* medium nil */
	assert_int_equal(out[45], 0xc0); /* dp_rank nil */
	n = events_encode(EVENTS_ARRAY, TS, key, 1, "", out, sizeof(out));
	assert_int_equal(n, 1 + 9 + 1 + 1 + 13 + 1 + 2 + 1 + 1 + 1);
	assert_int_equal(out[27], 1);
	assert_int_equal(out[28], 0xf0);
	assert_int_equal(out[29], 0xc0);
}

static void encode_bounds(void **state)
{
	uint8_t out[EVENTS_MSG_MAX], key[17] = {0};
	(void)state;
	assert_int_equal(events_encode(EVENTS_ARRAY, TS, key, 0, NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(events_encode(EVENTS_ARRAY, TS, key, 17, NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(events_encode(7, TS, key, 4, NULL, out, sizeof(out)), -EINVAL);
	/* one byte short of the whole payload, and nothing at all */
	assert_int_equal(events_encode(EVENTS_ARRAY, TS, KEY8, 8, "storage", out, sizeof(ARRAY_PAYLOAD) - 1), -ENOSPC);
	assert_int_equal(events_encode(EVENTS_MAP, TS, KEY8, 8, "storage", out, 0), -ENOSPC);
	/* the largest payload (16-byte key, 63-byte medium, map layout) fits the publisher's buffer */
	char medium[64];
	memset(medium, 'm', 63);
	medium[63] = '\0';
	assert_in_range(events_encode(EVENTS_MAP, TS, key, 16, medium, out, sizeof(out)), 1, EVENTS_MSG_MAX);
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

static struct nkv_cache_event ev_of(const char *ns, const uint8_t *key, unsigned klen)
{
	struct nkv_cache_event ev = {.subnqn = "nqn.2026-12.io.test:ev", .nsid = 1, .rados_ns = ns,
				     .klen = (uint8_t)klen, .reason = NKV_CACHE_EVICTED, .size = 4096};
	memcpy(ev.key, key, klen);
	return ev;
}

/* A PUB socket drops what it sends before a subscription reaches it. Post probes one at a time until
 * one arrives; every probe before it was lost, none after it was posted, so the next message is the
 * next event posted. @return the sequence number of the probe received. */
static uint64_t handshake(struct daemon_events *d, struct sub *s)
{
	struct nkv_cache_event ev = ev_of("probe", (const uint8_t *)"p", 1);
	struct msg m;

	for (int i = 0; i < 200; i++) {
		events_post(d, &ev);
		if (recv_msg(s, &m, 50) == 0) {
			assert_string_equal(m.topic, "kv@gw-1@probe");
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
	assert_int_equal(events_open(s.ep, "gw-1", EVENTS_ARRAY, "storage", 64, &d), 0);
	assert_int_equal(zmq_connect(s.sock, s.ep), 0);
	assert_int_equal(events_run(d), 0);
	uint64_t seq0 = handshake(d, &s);
	assert_true(seq0 < 200); /* numbered from 0, one per event */

	struct timespec t0, t1;
	clock_gettime(CLOCK_REALTIME, &t0);
	struct nkv_cache_event ev = ev_of("tenant-a", KEY8, 8);
	events_post(d, &ev);
	uint8_t k16[16];
	for (unsigned i = 0; i < 16; i++)
		k16[i] = (uint8_t)i; /* 00h inside a key */
	ev = ev_of("", k16, 16);    /* the default RADOS namespace: an empty last topic field */
	ev.reason = NKV_CACHE_EXPIRED;
	events_post(d, &ev);

	assert_int_equal(recv_msg(&s, &m, 5000), 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	assert_string_equal(m.topic, "kv@gw-1@tenant-a");
	assert_int_equal(m.seq, seq0 + 1);
	/* the payload is ARRAY_PAYLOAD but for the timestamp: when the event was posted */
	assert_int_equal(m.plen, sizeof(ARRAY_PAYLOAD));
	assert_memory_equal(m.payload, ARRAY_PAYLOAD, 1);
	assert_memory_equal(m.payload + 10, ARRAY_PAYLOAD + 10, sizeof(ARRAY_PAYLOAD) - 10);
	assert_int_equal(m.payload[1], 0xcb);
	uint64_t bits = 0;
	double ts;
	for (int i = 2; i < 10; i++)
		bits = bits << 8 | m.payload[i];
	memcpy(&ts, &bits, sizeof(ts));
	assert_true(ts >= (double)t0.tv_sec && ts <= (double)t1.tv_sec + 1);

	assert_int_equal(recv_msg(&s, &m, 5000), 0);
	assert_string_equal(m.topic, "kv@gw-1@");
	assert_int_equal(m.seq, seq0 + 2);
	assert_int_equal(m.payload[26], 0xc4);
	assert_int_equal(m.payload[27], 16);
	assert_memory_equal(m.payload + 28, k16, 16);

	/* the counter follows zmq_send, which may return after the subscriber already has the message */
	for (int i = 0; i < 200 && (events_counts(d, &c), c.published < seq0 + 3); i++)
		usleep(10000);
	assert_int_equal(c.published, seq0 + 3); /* the probes that reached no one were sent all the same */
	assert_int_equal(c.dropped, 0);
	assert_int_equal(c.send_errors, 0);
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
	uint8_t key[1];
	(void)state;

	sub_open(&s);
	assert_int_equal(events_open(s.ep, "gw-1", EVENTS_MAP, NULL, 4, &d), 0);
	assert_int_equal(zmq_connect(s.sock, s.ep), 0);
	assert_int_equal(events_run(d), 0);
	uint64_t seq0 = handshake(d, &s);

	events_test_hold(d, true);
	for (unsigned i = 0; i < 6; i++) { /* 4 fit, 2 are dropped */
		key[0] = (uint8_t)i;
		struct nkv_cache_event ev = ev_of("ns", key, 1);
		events_post(d, &ev);
	}
	events_counts(d, &c);
	assert_int_equal(c.queued, 4);
	assert_int_equal(c.dropped, 2);
	events_test_hold(d, false);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(recv_msg(&s, &m, 5000), 0);
		assert_int_equal(m.seq, seq0 + 1 + i);
		/* map layout, medium nil: ... "block_hashes", [bin 1 byte], "medium", nil, ... */
		static const uint8_t tail[] = {0xa6, 'm', 'e', 'd', 'i', 'u', 'm', 0xc0};
		assert_int_equal(m.payload[0], 0x83);
		assert_int_equal(m.payload[m.plen - 29], i); /* the key: before "medium", nil, "data_parallel_rank", nil */
		assert_memory_equal(m.payload + m.plen - 28, tail, sizeof(tail));
	}
	key[0] = 0x77;
	struct nkv_cache_event ev = ev_of("ns", key, 1);
	events_post(d, &ev);
	assert_int_equal(recv_msg(&s, &m, 5000), 0);
	assert_int_equal(m.seq, seq0 + 7); /* seq0 + 5 and + 6 were dropped: the gap a subscriber sees */

	/* A RADOS namespace name too long for the queue entry: dropped and counted, never truncated. */
	char longns[EVENTS_NS_MAX + 1];
	memset(longns, 'n', EVENTS_NS_MAX);
	longns[EVENTS_NS_MAX] = '\0';
	ev = ev_of(longns, key, 1);
	events_post(d, &ev);
	assert_int_equal(recv_msg(&s, &m, 300), -1);
	for (int i = 0; i < 200 && (events_counts(d, &c), c.published < seq0 + 1 + 4 + 1); i++)
		usleep(10000);
	assert_int_equal(c.dropped, 3);
	assert_int_equal(c.published, seq0 + 1 + 4 + 1);

	/* Events still queued when the publisher closes are sent first. */
	events_test_hold(d, true);
	for (unsigned i = 0; i < 3; i++) {
		key[0] = (uint8_t)(0xa0 + i);
		ev = ev_of("ns", key, 1);
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
	assert_int_equal(events_open("nonsense", "gw", EVENTS_ARRAY, NULL, 4, &d), -EINVAL);
	assert_null(d);
	assert_int_equal(events_open("tcp://127.0.0.1:1", "gw", 9, NULL, 4, &d), -EINVAL);
	assert_int_equal(events_open("tcp://127.0.0.1:1", "gw", EVENTS_ARRAY, NULL, 0, &d), -EINVAL);
	/* an address another socket holds */
	void *ctx = zmq_ctx_new(), *pub = zmq_socket(ctx, ZMQ_PUB);
	char ep[128];
	size_t epl = sizeof(ep);
	assert_int_equal(zmq_bind(pub, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(pub, ZMQ_LAST_ENDPOINT, ep, &epl), 0);
	assert_int_equal(events_open(ep, "gw", EVENTS_ARRAY, NULL, 4, &d), -EADDRINUSE);
	assert_null(d);
	zmq_close(pub);
	zmq_ctx_term(ctx);
	assert_int_equal(events_open("ipc:///nonexistent-dir/x/y", "gw", EVENTS_ARRAY, NULL, 4, &d), -ENOENT);
	assert_string_equal(events_strerror(-ENOENT), strerror(ENOENT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode_array),
		cmocka_unit_test(encode_map),
		cmocka_unit_test(encode_nil_medium_and_key_sizes),
		cmocka_unit_test(encode_bounds),
		cmocka_unit_test(publish_frames),
		cmocka_unit_test(full_queue_drops),
		cmocka_unit_test(open_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
