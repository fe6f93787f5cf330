/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dev_func.c - the GPU queue logic of nkv_dev.h (tickets, batches, per-slot completions, bounded
 * waits) compiled as host code and driven by CPU threads playing GPU threads and warps, against the
 * shm target in this process (mem backend), through libnkv's device queues (nkv_devq.h).
 *
 *  basic    one thread: Store/Retrieve/missing key through nkv_dev_submit + nkv_dev_wait
 *  wrap     a 4-entry queue: 2000 commands, the rings wrap 500 times (phase flips, slot turns)
 *  ticket   16 threads on one 32-entry queue, each submitting and waiting on its own (tickets)
 *  batch    "warps" of 32 threads (pthread barriers): the leader reserves 32 tickets, each thread
 *           writes its SQE, the leader publishes with one doorbell, each reaps its own completion;
 *           4 warps at once on one 256-entry queue; values checked
 *  torn     a fake controller thread writes CQEs dword by dword (phase dword last, with delays):
 *           every completion the waiters collect carries the DW0 of its own command
 *  bounded  waits that cannot succeed return NKV_DEV_ETIMEDOUT / NKV_DEV_EBUSY within their budget
 *  exec     vendor Exec: nkv_dev_sqe_exec() refuses bad opcodes/inline lengths and packs opcode, key,
 *           inline bytes, CDW10 and PRPs; a vendor opcode no namespace allowlists (none here) completes
 *           with Invalid Command Opcode (01h) in every direction, also through libnkv's
 *           nkv_vendor_exec() (sync and async, registered and bounced buffers), and the queues keep
 *           serving Store/Retrieve
 *  range    Retrieve Range: nkv_dev_sqe_retrieve_range() packing; 17 slices of one 64 KiB value at
 *           unaligned offsets (the last past the end) in one batch, each verified with DW0; 87h, 02h
 *  ttl      Store TTL: nkv_dev_sqe_store_ttl() packing; 8 values stored with a 1 s TTL in one batch
 *           on a cache namespace (nsid 2), read back, then 87h after 2.5 s while a pinned 60 s entry
 *           stays; F1h on a namespace without a cache and a pin without a finite TTL: 02h
 *  cuda     nkv_shm_reg_cuda() with a made-up CUDA IPC handle fails cleanly (-ENOTSUP where the target
 *           loads no CUDA runtime, -ENODEV where it does but cannot open the handle), bad arguments
 *           are -EINVAL, nothing stays registered, and the controller still serves Store/Retrieve
 *
 * Prints CPU-emulated figures (ops/s, batch latency). Every check counts; the last line is
 * "N passed, N failed"; exit 0 only without failures.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* More submitter threads than cores: a waiter gives its core away between polls. */
#define NKV_DEV_RELAX() sched_yield()
#include "nkv/nkv.h"
#include "nkv/nkv_dev.h"
#include "nkv/nkv_devq.h"
#include "nkv/nkv_target.h"

#include "check.h"

unsigned h_pass, h_fail;

#define SUBNQN "nqn.2026-11.io.rados-nkv:dev"
#define NSID 1u
#define NSID_CACHE 2u /* a cache namespace without a default TTL */
#define BUDGET (2000000000ull) /* polls: a backstop, far above any healthy wait */
#define VLEN 4096u

static struct nkv_ctrl *g_ctrl;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The seeded LFSR the GPU demo uses too: byte i of key k's value. */
static uint8_t val_byte(uint32_t key, uint32_t i)
{
	uint32_t x = key * 2654435761u ^ (i >> 2) * 40503u;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return (uint8_t)(x >> ((i & 3) * 8));
}

/** A registered data area: @n buffers of @len bytes, each with its data pointer precomputed. */
struct area {
	uint8_t *data;
	uint32_t n, len;
	uint64_t *prp1, *prp2;
	void *lists;
};

static bool area_init(struct area *a, uint32_t n, uint32_t len)
{
	uint32_t lp = nkv_devq_prp_pages(len);
	memset(a, 0, sizeof(*a));
	a->n = n;
	a->len = len;
	a->data = nkv_buf_alloc(g_ctrl, (size_t)n * len);
	a->prp1 = calloc(n, 8);
	a->prp2 = calloc(n, 8);
	if (lp)
		a->lists = nkv_buf_alloc(g_ctrl, (size_t)n * lp * 4096);
	if (!a->data || !a->prp1 || !a->prp2 || (lp && !a->lists))
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (nkv_devq_prp(g_ctrl, a->data + (size_t)i * len, len, lp ? (uint8_t *)a->lists + (size_t)i * lp * 4096 : NULL,
				 lp, &a->prp1[i], &a->prp2[i]) < 0)
			return false;
	return true;
}

static void area_free(struct area *a)
{
	if (a->data)
		nkv_buf_free(g_ctrl, a->data);
	if (a->lists)
		nkv_buf_free(g_ctrl, a->lists);
	free(a->prp1);
	free(a->prp2);
}

static void key_of(uint32_t k, uint8_t key[16], unsigned *klen)
{
	*klen = (unsigned)snprintf((char *)key, 16, "dev-%08x", k);
}

static void sqe_for(struct nkv_sqe *s, uint8_t opc, uint32_t k, const struct area *a, uint32_t buf)
{
	uint8_t key[16];
	unsigned klen;
	key_of(k, key, &klen);
	nkv_dev_sqe_kv(s, opc, NSID, key, klen, a->len, a->prp1[buf], a->prp2[buf]);
}

static void fill(struct area *a, uint32_t buf, uint32_t k)
{
	uint8_t *p = a->data + (size_t)buf * a->len;
	for (uint32_t i = 0; i < a->len; i++)
		p[i] = val_byte(k, i);
}

static bool verify(const struct area *a, uint32_t buf, uint32_t k)
{
	const uint8_t *p = a->data + (size_t)buf * a->len;
	for (uint32_t i = 0; i < a->len; i++)
		if (p[i] != val_byte(k, i))
			return false;
	return true;
}

/** Submit one command and wait for it. @return the status (>= 0) or a negative NKV_DEV_* error. */
static int dev_cmd(struct nkv_dev_qp *qp, struct nkv_sqe *s, struct nkv_dev_cpl *c)
{
	uint32_t t = 0;
	int rc = nkv_dev_submit(qp, s, BUDGET, &t);
	if (rc)
		return rc;
	if ((rc = nkv_dev_wait(qp, t, c, BUDGET)))
		return rc;
	return c->status & 0x7ff;
}

/* ---- vendor Exec ------------------------------------------------------------------------------- */

static void exec_cb(void *arg, const struct nkv_cpl *cpl)
{
	*(struct nkv_cpl *)arg = *cpl;
}

/* libnkv's vendor Exec over the shm driver: every direction reaches the target and comes back 01h. */
static void exec_libnkv(const uint8_t *key, unsigned klen, const uint8_t inl[8])
{
	struct nkv_qpair *lq;
	struct nkv_cpl cpl;
	int rc = nkv_qpair_create(g_ctrl, 8, &lq);
	CHECK(rc == 0, "qpair create: %d", rc);
	if (rc)
		return;
	uint8_t *reg = nkv_buf_alloc(g_ctrl, 8192); /* zero copy */
	uint8_t *bounced = malloc(8192);            /* through the bounce area */
	CHECK(reg && bounced, "buffers");
	if (!reg || !bounced)
		goto out;
	uint32_t osz = 0xabcd;
	memset(&cpl, 0xff, sizeof(cpl));
	rc = nkv_vendor_exec(lq, NSID, key, klen, 0x82, inl, 8, reg, 8192, &osz, &cpl);
	CHECK(rc == -EOPNOTSUPP && (cpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE && cpl.xfer == 0 && osz == 0xabcd,
	      "nkv_vendor_exec 82h (registered): %d status %#x xfer %u out_size %u", rc, cpl.status, cpl.xfer, osz);
	rc = nkv_vendor_exec(lq, NSID, key, klen, 0xee, NULL, 0, bounced, 8192, &osz, &cpl);
	CHECK(rc == -EOPNOTSUPP && (cpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE && cpl.xfer == 0,
	      "nkv_vendor_exec EEh (bounced): %d status %#x", rc, cpl.status);
	/* F0h-FFh are built-in vendor commands with layouts of their own: never sent as an Exec */
	rc = nkv_vendor_exec(lq, NSID, key, klen, 0xfe, NULL, 0, bounced, 8192, &osz, &cpl);
	CHECK(rc == -EINVAL, "nkv_vendor_exec FEh (a built-in vendor opcode) refused: %d", rc);
	rc = nkv_vendor_exec(lq, NSID, key, klen, NKV_VS_RETRIEVE_RANGE, NULL, 0, bounced, 8192, &osz, &cpl);
	CHECK(rc == -EINVAL, "nkv_vendor_exec F2h (Retrieve Range) refused: %d", rc);
	memset(bounced, 0x5a, 8192);
	rc = nkv_vendor_exec(lq, NSID, key, klen, 0x81, bounced, 8192, NULL, 0, NULL, &cpl);
	CHECK(rc == -EOPNOTSUPP && (cpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE, "nkv_vendor_exec 81h: %d status %#x",
	      rc, cpl.status);
	rc = nkv_vendor_exec(lq, NSID, key, klen, 0x80, inl, 3, NULL, 0, NULL, &cpl);
	CHECK(rc == -EOPNOTSUPP && (cpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE, "nkv_vendor_exec 80h: %d status %#x",
	      rc, cpl.status);
	/* a buffer shorter than CDW10 would let the controller run past it (PRPs carry no length) */
	struct nkv_sqe raw;
	nkv_sqe_exec(&raw, 0x82, NSID, key, klen, 8192, NULL, 0);
	rc = nkv_submit(lq, &raw, reg, 4096, NULL, NULL);
	CHECK(rc == -EINVAL, "raw 82h with CDW10 8192 over a 4096-byte buffer: %d", rc);
	nkv_sqe_exec(&raw, 0x81, NSID, key, klen, 8192, NULL, 0);
	rc = nkv_submit(lq, &raw, reg, 4096, NULL, NULL);
	CHECK(rc == -EINVAL, "raw 81h with CDW10 8192 over a 4096-byte buffer: %d", rc);
	/* async: the callback gets the completion; nkv_cpl_errno() decodes it */
	struct nkv_cpl acpl;
	memset(&acpl, 0xff, sizeof(acpl));
	rc = nkv_vendor_exec_async(lq, NSID, key, klen, 0x82, inl, 8, reg, 8192, exec_cb, &acpl);
	CHECK(rc == 0, "nkv_vendor_exec_async: %d", rc);
	for (int i = 0; rc == 0 && i < 1000 && nkv_qpair_outstanding(lq); i++)
		nkv_qpair_poll(lq, 100);
	CHECK((acpl.status & 0x7ff) == NKV_SC_INVALID_OPCODE && nkv_cpl_errno(&acpl) == -EOPNOTSUPP,
	      "async 82h: status %#x errno %d", acpl.status, nkv_cpl_errno(&acpl));
	/* the queue pair still serves KV */
	memset(reg, 0x3c, 4096);
	rc = nkv_store(lq, NSID, key, klen, reg, 4096, 0, NULL);
	CHECK(rc == 0, "store after the Exec refusals: %d", rc);
	uint32_t vs = 0;
	rc = nkv_retrieve(lq, NSID, key, klen, bounced, 8192, &vs, NULL);
	CHECK(rc == 0 && vs == 4096 && bounced[4095] == 0x3c, "retrieve after the Exec refusals: %d, %u", rc, vs);
out:
	if (reg)
		nkv_buf_free(g_ctrl, reg);
	free(bounced);
	nkv_qpair_destroy(lq);
}

static void test_exec(void)
{
	struct nkv_devq *dq;
	struct area a;
	struct nkv_sqe s;
	struct nkv_dev_cpl c;
	uint8_t key[16], k2[16];
	unsigned klen;
	const uint8_t inl[8] = {0xca, 0xfe, 0xba, 0xbe, 1, 2, 3, 4};
	key_of(0xe4ec, key, &klen);

	/* Checked, not clamped: an opcode below 80h would build a KV command (01h is Store). */
	memset(&s, 0xa5, sizeof(s));
	CHECK(nkv_dev_sqe_exec(&s, NKV_KV_STORE, NSID, key, klen, 16, NULL, 0, 0, 0) == NKV_DEV_EINVAL, "opcode 01h");
	CHECK(nkv_dev_sqe_exec(&s, 0x7f, NSID, key, klen, 0, NULL, 0, 0, 0) == NKV_DEV_EINVAL, "opcode 7Fh");
	CHECK(nkv_dev_sqe_exec(&s, 0x83, NSID, key, klen, 16, NULL, 0, 0, 0) == NKV_DEV_EINVAL, "direction 11b");
	CHECK(nkv_dev_sqe_exec(&s, 0x82, NSID, key, klen, 16, inl, 9, 0, 0) == NKV_DEV_EINVAL, "9 inline bytes");
	CHECK(nkv_dev_sqe_exec(&s, 0x81, NSID, key, klen, 16, inl, 1, 0, 0) == NKV_DEV_EINVAL, "inline with 01b");
	CHECK(nkv_dev_sqe_exec(&s, 0x80, NSID, key, klen, 16, inl, 1, 0, 0) == NKV_DEV_EINVAL, "a size with 00b");
	CHECK(nkv_dev_sqe_exec(&s, NKV_VS_RETRIEVE_RANGE, NSID, key, klen, 16, NULL, 0, 0, 0) == NKV_DEV_EINVAL,
	      "opcode F2h (built-in Retrieve Range)");
	CHECK(nkv_dev_sqe_exec(&s, 0xfe, NSID, key, klen, 16, NULL, 0, 0, 0) == NKV_DEV_EINVAL, "opcode FEh (built in)");
	CHECK(((const uint8_t *)&s)[0] == 0xa5 && ((const uint8_t *)&s)[63] == 0xa5, "SQE written on a refusal");

	int rc = nkv_devq_create(g_ctrl, 16, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(area_init(&a, 1, VLEN), "area");

	/* 10b: inline input, output into the PRP buffer */
	CHECK(nkv_dev_sqe_exec(&s, 0x82, NSID, key, klen, VLEN, inl, 8, a.prp1[0], a.prp2[0]) == NKV_DEV_OK, "82h");
	nkv_sqe_get_key(&s, k2);
	CHECK(s.opc == 0x82 && nkv_get32(&s.nsid) == NSID && nkv_get32(&s.cdw10) == VLEN && nkv_sqe_klen(&s) == klen &&
		      nkv_sqe_exec_inline_len(&s) == 8 && memcmp(&s.cdw12, inl, 8) == 0 && memcmp(k2, key, klen) == 0 &&
		      nkv_get64(s.dptr) == a.prp1[0] && nkv_get64(s.dptr + 8) == a.prp2[0] && (nkv_get32(&s.cdw11) >> 12) == 0,
	      "82h SQE packing: opc %#x cdw10 %u cdw11 %#x", s.opc, nkv_get32(&s.cdw10), nkv_get32(&s.cdw11));
	rc = dev_cmd(qp, &s, &c);
	CHECK(rc == NKV_SC_INVALID_OPCODE, "82h (allowlisted nowhere): %#x, want 01h", rc);
	/* 01b: the buffer is the input */
	fill(&a, 0, 0xe4ec);
	CHECK(nkv_dev_sqe_exec(&s, 0x81, NSID, key, klen, VLEN, NULL, 0, a.prp1[0], a.prp2[0]) == NKV_DEV_OK, "81h");
	CHECK(nkv_get32(&s.cdw10) == VLEN && nkv_sqe_exec_inline_len(&s) == 0 && nkv_get32(&s.cdw12) == 0,
	      "81h SQE packing");
	rc = dev_cmd(qp, &s, &c);
	CHECK(rc == NKV_SC_INVALID_OPCODE, "81h: %#x, want 01h", rc);
	/* 00b: inline bytes only, no data pointer */
	CHECK(nkv_dev_sqe_exec(&s, 0x80, NSID, key, klen, 0, inl, 3, 0, 0) == NKV_DEV_OK, "80h");
	CHECK(nkv_sqe_exec_inline_len(&s) == 3 && nkv_get32(&s.cdw10) == 0 && nkv_get32(&s.cdw13) == 0 &&
		      memcmp(&s.cdw12, inl, 3) == 0 && ((const uint8_t *)&s.cdw12)[3] == 0,
	      "80h SQE packing");
	rc = dev_cmd(qp, &s, &c);
	CHECK(rc == NKV_SC_INVALID_OPCODE, "80h: %#x, want 01h", rc);
	/* the device queue still serves KV */
	sqe_for(&s, NKV_KV_STORE, 0xe4ec, &a, 0);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0, "store after the Exec refusals: %#x", rc);
	memset(a.data, 0, VLEN);
	sqe_for(&s, NKV_KV_RETRIEVE, 0xe4ec, &a, 0);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0 && c.dw0 == VLEN && verify(&a, 0, 0xe4ec), "retrieve: %#x", rc);
	CHECK(qp->bad_cqes == 0 && qp->inflight == 0, "bad %u inflight %u", qp->bad_cqes, qp->inflight);
	area_free(&a);
	nkv_devq_destroy(dq);

	exec_libnkv(key, klen, inl);
}

/* ---- Retrieve Range: slices of one value, one batch ------------------------------------------------ */

#define RANGE_VLEN (64u << 10)
#define RANGE_N 17 /* 16 slices of 4 KiB at unaligned offsets, the last straddling the end; one past it */

static void test_range(void)
{
	struct nkv_devq *dq;
	struct area big, a;
	struct nkv_sqe s;
	struct nkv_dev_cpl c;
	uint8_t key[16], k2[16];
	unsigned klen;
	uint32_t t0 = 0;
	key_of(0x5a1ce, key, &klen);

	int rc = nkv_devq_create(g_ctrl, 32, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(area_init(&big, 1, RANGE_VLEN) && area_init(&a, RANGE_N, VLEN), "areas");
	fill(&big, 0, 0x5a1ce);
	nkv_dev_sqe_kv(&s, NKV_KV_STORE, NSID, key, klen, RANGE_VLEN, big.prp1[0], big.prp2[0]);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0, "store 64 KiB: %#x", rc);

	/* packing: nkv_sqe_retrieve_range's fields plus the PRPs */
	nkv_dev_sqe_retrieve_range(&s, NSID, key, klen, VLEN, 0x100000007ull, a.prp1[0], a.prp2[0]);
	nkv_sqe_get_key(&s, k2);
	CHECK(s.opc == NKV_VS_RETRIEVE_RANGE && nkv_get32(&s.nsid) == NSID && nkv_get32(&s.cdw10) == VLEN &&
		      nkv_get32(&s.cdw11) == klen && nkv_get32(&s.cdw12) == 7 && nkv_get32(&s.cdw13) == 1 &&
		      memcmp(k2, key, klen) == 0 && nkv_get64(s.dptr) == a.prp1[0] && nkv_get64(s.dptr + 8) == a.prp2[0],
	      "F2h SQE packing: opc %#x cdw10 %u cdw11 %#x cdw12 %#x cdw13 %#x", s.opc, nkv_get32(&s.cdw10),
	      nkv_get32(&s.cdw11), nkv_get32(&s.cdw12), nkv_get32(&s.cdw13));

	/* one batch, as a warp would: reserve RANGE_N tickets, write every SQE, one doorbell */
	memset(a.data, 0xee, (size_t)RANGE_N * VLEN);
	rc = nkv_dev_reserve(qp, RANGE_N, BUDGET, &t0);
	CHECK(rc == NKV_DEV_OK, "reserve %u tickets: %d", RANGE_N, rc);
	if (rc != NKV_DEV_OK)
		goto out;
	for (uint32_t i = 0; i < RANGE_N; i++) {
		uint64_t off = i < RANGE_N - 1 ? (uint64_t)i * VLEN + 3 * i + 1 : RANGE_VLEN + 1;
		nkv_dev_sqe_retrieve_range(&s, NSID, key, klen, VLEN, off, a.prp1[i], a.prp2[i]);
		if ((rc = nkv_dev_put(qp, t0 + i, &s, BUDGET)) < 0)
			break;
	}
	CHECK(rc >= 0 && nkv_dev_publish(qp, t0, RANGE_N, BUDGET) == NKV_DEV_OK, "put and publish %u ranges", RANGE_N);
	unsigned good = 0;
	for (uint32_t i = 0; i < RANGE_N; i++) {
		uint64_t off = i < RANGE_N - 1 ? (uint64_t)i * VLEN + 3 * i + 1 : RANGE_VLEN + 1;
		uint32_t want = nkv_range_xfer(RANGE_VLEN, off, VLEN), j;
		const uint8_t *p = a.data + (size_t)i * VLEN;
		if (nkv_dev_wait(qp, t0 + i, &c, BUDGET) != NKV_DEV_OK || (c.status & 0x7ff) || c.dw0 != RANGE_VLEN ||
		    nkv_dev_retrieve_status(qp, &c, off, VLEN) != 0)
			continue;
		for (j = 0; j < want && p[j] == val_byte(0x5a1ce, (uint32_t)off + j); j++)
			;
		good += j == want && (want == VLEN || p[want] == 0xee);
	}
	CHECK(good == RANGE_N, "%u of %u ranges in one batch: DW0 = 64 KiB, DW1 = the bytes moved, and the bytes of "
			       "each slice (the last straddling the end, one past it)", good, RANGE_N);
	/* a success that moved fewer bytes than DW0 implies is a failure for the kernel, never a value */
	CHECK(qp->flags & NKV_DEV_QP_XFER, "the device queue knows the controller reports the bytes moved");
	struct nkv_dev_cpl fake = {.dw0 = RANGE_VLEN, .dw1 = VLEN - 1, .status = 0};
	CHECK(nkv_dev_retrieve_status(qp, &fake, 0, VLEN) == NKV_SC_DATA_TRANSFER_ERROR,
	      "a Retrieve that moved %u of %u bytes: 04h", VLEN - 1, VLEN);
	fake.dw1 = 1; /* one byte from offset RANGE_VLEN - 1 */
	CHECK(nkv_dev_retrieve_status(qp, &fake, RANGE_VLEN - 1, VLEN) == 0, "the last byte of the value: 1 byte moved");
	fake.status = NKV_SC_KV_KEY_NOT_EXIST;
	CHECK(nkv_dev_retrieve_status(qp, &fake, 0, VLEN) == NKV_SC_KV_KEY_NOT_EXIST, "a failure's status stands");
	/* errors on the device queue: an absent key, reserved CDW11 bits */
	key_of(0xdead5, k2, &klen);
	nkv_dev_sqe_retrieve_range(&s, NSID, k2, klen, VLEN, 0, a.prp1[0], a.prp2[0]);
	CHECK((rc = dev_cmd(qp, &s, &c)) == NKV_SC_KV_KEY_NOT_EXIST, "range of an absent key: %#x", rc);
	key_of(0x5a1ce, key, &klen);
	nkv_dev_sqe_retrieve_range(&s, NSID, key, klen, VLEN, 0, a.prp1[0], a.prp2[0]);
	nkv_put32(&s.cdw11, nkv_get32(&s.cdw11) | 0x100u);
	CHECK((rc = dev_cmd(qp, &s, &c)) == NKV_SC_INVALID_FIELD, "range with CDW11 bit 8 set: %#x", rc);
	CHECK(qp->bad_cqes == 0 && qp->inflight == 0, "bad %u inflight %u", qp->bad_cqes, qp->inflight);
out:
	area_free(&big);
	area_free(&a);
	nkv_devq_destroy(dq);
}

/* ---- Store TTL: one batch of F1h on a cache namespace, expiry ------------------------------------- */

#define TTL_N 8

static void test_ttl(void)
{
	struct nkv_devq *dq;
	struct area a;
	struct nkv_sqe s;
	struct nkv_dev_cpl c;
	uint8_t key[16], k2[16];
	unsigned klen;
	uint32_t t0 = 0;

	int rc = nkv_devq_create(g_ctrl, 32, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(area_init(&a, TTL_N + 1, VLEN), "area");

	/* packing: nkv_sqe_store_ttl's fields plus the PRPs */
	key_of(0x77100, key, &klen);
	nkv_dev_sqe_store_ttl(&s, NSID_CACHE, key, klen, VLEN, NKV_STORE_MUST_NOT_EXIST, 1, 0, a.prp1[0], a.prp2[0]);
	nkv_sqe_get_key(&s, k2);
	CHECK(s.opc == NKV_VS_STORE_TTL && nkv_get32(&s.nsid) == NSID_CACHE && nkv_get32(&s.cdw10) == VLEN &&
		      nkv_get32(&s.cdw11) == (klen | NKV_STORE_MUST_NOT_EXIST << 8) && nkv_get32(&s.cdw12) == 1 &&
		      nkv_get32(&s.cdw13) == 0 && memcmp(k2, key, klen) == 0 && nkv_get64(s.dptr) == a.prp1[0] &&
		      nkv_get64(s.dptr + 8) == a.prp2[0],
	      "F1h SQE packing: opc %#x cdw11 %#x cdw12 %u cdw13 %#x", s.opc, nkv_get32(&s.cdw11), nkv_get32(&s.cdw12),
	      nkv_get32(&s.cdw13));

	/* one batch of TTL_N Store TTLs (1 s), as a warp would */
	for (uint32_t i = 0; i < TTL_N; i++)
		fill(&a, i, 0x77100 + i);
	rc = nkv_dev_reserve(qp, TTL_N, BUDGET, &t0);
	CHECK(rc == NKV_DEV_OK, "reserve %u tickets: %d", TTL_N, rc);
	if (rc != NKV_DEV_OK)
		goto out;
	for (uint32_t i = 0; i < TTL_N && rc >= 0; i++) {
		key_of(0x77100 + i, key, &klen);
		nkv_dev_sqe_store_ttl(&s, NSID_CACHE, key, klen, VLEN, 0, 1, 0, a.prp1[i], a.prp2[i]);
		rc = nkv_dev_put(qp, t0 + i, &s, BUDGET);
	}
	CHECK(rc >= 0 && nkv_dev_publish(qp, t0, TTL_N, BUDGET) == NKV_DEV_OK, "put and publish %u Store TTLs", TTL_N);
	unsigned good = 0;
	for (uint32_t i = 0; i < TTL_N; i++)
		good += nkv_dev_wait(qp, t0 + i, &c, BUDGET) == NKV_DEV_OK && (c.status & 0x7ff) == 0;
	CHECK(good == TTL_N, "%u of %u Store TTLs succeeded", good, TTL_N);
	/* a pinned 60 s entry */
	fill(&a, TTL_N, 0x77199);
	key_of(0x77199, key, &klen);
	nkv_dev_sqe_store_ttl(&s, NSID_CACHE, key, klen, VLEN, 0, 60, NKV_TTL_PIN, a.prp1[TTL_N], a.prp2[TTL_N]);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0, "pinned Store TTL (60 s): %#x", rc);
	/* read back before expiry */
	memset(a.data, 0, (size_t)TTL_N * VLEN);
	good = 0;
	for (uint32_t i = 0; i < TTL_N; i++) {
		key_of(0x77100 + i, key, &klen);
		nkv_dev_sqe_kv(&s, NKV_KV_RETRIEVE, NSID_CACHE, key, klen, VLEN, a.prp1[i], a.prp2[i]);
		good += dev_cmd(qp, &s, &c) == 0 && c.dw0 == VLEN && verify(&a, i, 0x77100 + i);
	}
	CHECK(good == TTL_N, "%u of %u values read back before their TTL", good, TTL_N);
	/* refused: no cache on nsid 1, a pin without a finite TTL */
	key_of(0x77200, key, &klen);
	nkv_dev_sqe_store_ttl(&s, NSID, key, klen, VLEN, 0, 5, 0, a.prp1[0], a.prp2[0]);
	CHECK((rc = dev_cmd(qp, &s, &c)) == NKV_SC_INVALID_FIELD, "F1h on a namespace without a cache: %#x", rc);
	nkv_dev_sqe_store_ttl(&s, NSID_CACHE, key, klen, VLEN, 0, NKV_TTL_DEFAULT, NKV_TTL_PIN, a.prp1[0], a.prp2[0]);
	CHECK((rc = dev_cmd(qp, &s, &c)) == NKV_SC_INVALID_FIELD, "a pin without a finite TTL: %#x", rc);

	usleep(2500 * 1000);
	unsigned gone = 0;
	for (uint32_t i = 0; i < TTL_N; i++) {
		key_of(0x77100 + i, key, &klen);
		nkv_dev_sqe_kv(&s, NKV_KV_RETRIEVE, NSID_CACHE, key, klen, VLEN, a.prp1[i], a.prp2[i]);
		gone += dev_cmd(qp, &s, &c) == NKV_SC_KV_KEY_NOT_EXIST;
	}
	CHECK(gone == TTL_N, "%u of %u values gone (87h) 2.5 s after a 1 s TTL", gone, TTL_N);
	memset(a.data + (size_t)TTL_N * VLEN, 0, VLEN);
	key_of(0x77199, key, &klen);
	nkv_dev_sqe_kv(&s, NKV_KV_RETRIEVE, NSID_CACHE, key, klen, VLEN, a.prp1[TTL_N], a.prp2[TTL_N]);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0 && verify(&a, TTL_N, 0x77199), "the 60 s pin is still there: %#x", rc);
	CHECK(qp->bad_cqes == 0 && qp->inflight == 0, "bad %u inflight %u", qp->bad_cqes, qp->inflight);
out:
	area_free(&a);
	nkv_devq_destroy(dq);
}

/* ---- basic and wrap ----------------------------------------------------------------------------- */

static void test_basic(void)
{
	struct nkv_devq *dq;
	struct area a;
	struct nkv_sqe s;
	struct nkv_dev_cpl c;
	int rc = nkv_devq_create(g_ctrl, 64, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(qp->size == 64 && qp->qid >= 1, "size %u qid %u", qp->size, qp->qid);
	CHECK(area_init(&a, 2, VLEN), "area");
	fill(&a, 0, 7);
	sqe_for(&s, NKV_KV_STORE, 7, &a, 0);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0, "store: %#x", rc);
	memset(a.data + VLEN, 0, VLEN);
	sqe_for(&s, NKV_KV_RETRIEVE, 7, &a, 1);
	CHECK((rc = dev_cmd(qp, &s, &c)) == 0, "retrieve: %#x", rc);
	CHECK(c.dw0 == VLEN, "retrieve DW0 %u", c.dw0);
	CHECK(verify(&a, 1, 7), "retrieved value");
	sqe_for(&s, NKV_KV_RETRIEVE, 0xdead, &a, 1);
	rc = dev_cmd(qp, &s, &c);
	CHECK(rc == (NKV_SCT_GENERIC << 8 | NKV_SC_KV_KEY_NOT_EXIST), "missing key: %#x", rc);
	CHECK(qp->bad_cqes == 0 && qp->inflight == 0, "bad %u inflight %u", qp->bad_cqes, qp->inflight);
	area_free(&a);
	nkv_devq_destroy(dq);
}

static void test_wrap(void)
{
	struct nkv_devq *dq;
	struct area a;
	int rc = nkv_devq_create(g_ctrl, 4, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(qp->size == 4, "size %u", qp->size);
	CHECK(area_init(&a, 1, 512), "area");
	unsigned bad = 0, n = 2000;
	for (unsigned i = 0; i < n; i++) {
		struct nkv_sqe s;
		struct nkv_dev_cpl c;
		bool st = (i % 2) == 0;
		uint32_t k = 0x1000 + i / 2;
		if (st)
			fill(&a, 0, k);
		else
			memset(a.data, 0, 512);
		sqe_for(&s, st ? NKV_KV_STORE : NKV_KV_RETRIEVE, k, &a, 0);
		rc = dev_cmd(qp, &s, &c);
		if (rc != 0 || c.cid != (uint16_t)(i % 4) || (!st && !verify(&a, 0, k)))
			bad++;
	}
	CHECK(bad == 0, "%u of %u commands failed across the wrap", bad, n);
	CHECK(qp->ticket == n && qp->published == n && qp->inflight == 0, "ticket %u published %u", qp->ticket,
	      qp->published);
	CHECK(qp->cq_phase == ((n / 4) % 2 == 0 ? 1u : 0u) && qp->cq_head == n % 4, "CQ head %u phase %u",
	      qp->cq_head, qp->cq_phase);
	area_free(&a);
	nkv_devq_destroy(dq);
}

/* ---- ticket: many concurrent submitters on one queue ------------------------------------------- */

#define TK_THREADS 16
#define TK_OPS 400

struct tk_arg {
	struct nkv_dev_qp *qp;
	struct area *a;
	unsigned id, bad;
	pthread_barrier_t *go;
};

static void *tk_main(void *p)
{
	struct tk_arg *t = p;
	pthread_barrier_wait(t->go);
	for (unsigned i = 0; i < TK_OPS; i++) {
		struct nkv_sqe s;
		struct nkv_dev_cpl c;
		bool st = (i % 2) == 0;
		uint32_t k = 0x20000 + t->id * TK_OPS + i / 2;
		if (st)
			fill(t->a, t->id, k);
		else
			memset(t->a->data + (size_t)t->id * t->a->len, 0, t->a->len);
		sqe_for(&s, st ? NKV_KV_STORE : NKV_KV_RETRIEVE, k, t->a, t->id);
		int rc = dev_cmd(t->qp, &s, &c);
		if (rc != 0 || (!st && (c.dw0 != t->a->len || !verify(t->a, t->id, k))))
			t->bad++;
	}
	return NULL;
}

static void test_ticket(void)
{
	struct nkv_devq *dq;
	struct area a;
	pthread_t th[TK_THREADS];
	struct tk_arg args[TK_THREADS];
	pthread_barrier_t go;
	int rc = nkv_devq_create(g_ctrl, 32, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(area_init(&a, TK_THREADS, 1024), "area");
	pthread_barrier_init(&go, NULL, TK_THREADS + 1);
	for (unsigned i = 0; i < TK_THREADS; i++) {
		args[i] = (struct tk_arg){.qp = qp, .a = &a, .id = i, .go = &go};
		pthread_create(&th[i], NULL, tk_main, &args[i]);
	}
	pthread_barrier_wait(&go);
	uint64_t t0 = now_ns();
	unsigned bad = 0;
	for (unsigned i = 0; i < TK_THREADS; i++) {
		pthread_join(th[i], NULL);
		bad += args[i].bad;
	}
	double s = (double)(now_ns() - t0) / 1e9;
	unsigned n = TK_THREADS * TK_OPS;
	CHECK(bad == 0, "%u of %u commands failed", bad, n);
	CHECK(qp->ticket == n && qp->published == n && qp->inflight == 0 && qp->bad_cqes == 0,
	      "ticket %u published %u inflight %u bad %u", qp->ticket, qp->published, qp->inflight, qp->bad_cqes);
	printf("ticket   %u threads x %u ops (1 KiB) on one %u-entry queue: %.0f ops/s, %u CQ doorbells\n",
	       TK_THREADS, TK_OPS, qp->size, n / s, qp->reaps);
	pthread_barrier_destroy(&go);
	area_free(&a);
	nkv_devq_destroy(dq);
}

/* ---- batch: warps of threads, one doorbell per batch ------------------------------------------- */

#define WARP 32
#define WARPS 4
#define ROUNDS 60

struct warp {
	struct nkv_dev_qp *qp;
	struct area *a;
	unsigned id;
	pthread_barrier_t bar;
	uint32_t t0;     /* the leader's reservation, broadcast (a __shfl_sync on a GPU) */
	int err;
	uint64_t *lat;   /* per batch: reservation to last completion */
	unsigned bad;
	pthread_mutex_t mu;
};

struct lane {
	struct warp *w;
	unsigned lane;
};

static void *lane_main(void *p)
{
	struct lane *l = p;
	struct warp *w = l->w;
	unsigned bad = 0;

	for (unsigned r = 0; r < ROUNDS; r++) {
		bool st = (r % 2) == 0;
		uint32_t k = 0x40000 + (w->id * ROUNDS + r / 2) * WARP + l->lane;
		uint32_t buf = w->id * WARP + l->lane;
		uint64_t b0 = 0;
		struct nkv_sqe s;
		struct nkv_dev_cpl c;
		if (st)
			fill(w->a, buf, k);
		else
			memset(w->a->data + (size_t)buf * w->a->len, 0, w->a->len);
		sqe_for(&s, st ? NKV_KV_STORE : NKV_KV_RETRIEVE, k, w->a, buf);
		pthread_barrier_wait(&w->bar);
		if (l->lane == 0) {
			b0 = now_ns();
			w->err = nkv_dev_reserve(w->qp, WARP, BUDGET, &w->t0);
		}
		pthread_barrier_wait(&w->bar);
		if (w->err) {
			bad++;
			continue;
		}
		uint32_t t = w->t0 + l->lane;
		if (nkv_dev_put(w->qp, t, &s, BUDGET) < 0)
			bad++;
		pthread_barrier_wait(&w->bar); /* every SQE written (__syncwarp) */
		if (l->lane == 0 && nkv_dev_publish(w->qp, w->t0, WARP, BUDGET) != 0)
			bad++;
		int rc = nkv_dev_wait(w->qp, t, &c, BUDGET);
		if (rc || c.status || (!st && !verify(w->a, buf, k)))
			bad++;
		pthread_barrier_wait(&w->bar); /* the whole batch reaped */
		if (l->lane == 0)
			w->lat[r] = now_ns() - b0;
	}
	pthread_mutex_lock(&w->mu);
	w->bad += bad;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void test_batch(void)
{
	struct nkv_devq *dq;
	struct area a;
	static struct warp w[WARPS];
	static struct lane lanes[WARPS][WARP];
	static pthread_t th[WARPS][WARP];
	static uint64_t lat[WARPS * ROUNDS];
	int rc = nkv_devq_create(g_ctrl, 256, &dq);
	CHECK(rc == 0, "devq create: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(area_init(&a, WARPS * WARP, VLEN), "area");
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < WARPS; i++) {
		w[i] = (struct warp){.qp = qp, .a = &a, .id = i, .lat = lat + i * ROUNDS};
		pthread_barrier_init(&w[i].bar, NULL, WARP);
		pthread_mutex_init(&w[i].mu, NULL);
		for (unsigned j = 0; j < WARP; j++) {
			lanes[i][j] = (struct lane){.w = &w[i], .lane = j};
			pthread_create(&th[i][j], NULL, lane_main, &lanes[i][j]);
		}
	}
	unsigned bad = 0;
	for (unsigned i = 0; i < WARPS; i++) {
		for (unsigned j = 0; j < WARP; j++)
			pthread_join(th[i][j], NULL);
		bad += w[i].bad;
		pthread_barrier_destroy(&w[i].bar);
		pthread_mutex_destroy(&w[i].mu);
	}
	double s = (double)(now_ns() - t0) / 1e9;
	unsigned n = WARPS * WARP * ROUNDS;
	CHECK(bad == 0, "%u of %u commands failed", bad, n);
	CHECK(qp->ticket == n && qp->published == n && qp->inflight == 0 && qp->bad_cqes == 0,
	      "ticket %u published %u inflight %u bad %u", qp->ticket, qp->published, qp->inflight, qp->bad_cqes);
	qsort(lat, WARPS * ROUNDS, sizeof(lat[0]), cmp_u64);
	printf("batch    %u warps x %u lanes x %u batches (4 KiB, store/retrieve): %.0f ops/s, %.1f MB/s; batch "
	       "latency p50 %.1f us p99 %.1f us; %u SQ doorbells, %u CQ doorbells\n",
	       WARPS, WARP, ROUNDS, n / s, n * (double)VLEN / s / 1e6, lat[WARPS * ROUNDS / 2] / 1e3,
	       lat[WARPS * ROUNDS * 99 / 100] / 1e3, WARPS * ROUNDS, qp->reaps);
	area_free(&a);
	nkv_devq_destroy(dq);
}

/* ---- torn: a fake controller that writes CQEs slowly, phase dword last ------------------------- */

#define FQ 16
#define TORN_THREADS 8
#define TORN_OPS 3000

struct fake {
	struct nkv_sqe sq[FQ];
	struct nkv_cqe cq[FQ];
	uint32_t sq_db, cq_db;
	struct nkv_dev_slot slots[FQ];
	struct nkv_dev_qp qp;
	volatile int stop;
};

static void *fake_ctrl(void *p)
{
	struct fake *f = p;
	uint32_t head = 0, cq_tail = 0, phase = 1, seed = 1;
	while (!f->stop) {
		uint32_t tail = __atomic_load_n(&f->sq_db, __ATOMIC_ACQUIRE);
		if (head == tail) {
			sched_yield();
			continue;
		}
		/* never overwrite an entry the host has not consumed (CQ full: one slot empty) */
		if ((cq_tail + 1) % FQ == __atomic_load_n(&f->cq_db, __ATOMIC_ACQUIRE))
			continue;
		struct nkv_sqe s = f->sq[head];
		head = (head + 1) % FQ;
		volatile uint32_t *d = (volatile uint32_t *)&f->cq[cq_tail];
		d[0] = nkv_get32(&s.cdw10) ^ 0x5a5a5a5au; /* DW0: derived from the command */
		d[1] = nkv_get32(&s.cdw10);
		d[2] = head | (uint32_t)1 << 16; /* SQHD, SQID */
		seed = seed * 1103515245u + 12345u;
		for (unsigned spin = (seed >> 16) & 0xff; spin; spin--) /* the torn window */
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n((uint32_t *)&d[3], (uint32_t)nkv_get16(&s.cid) | (phase << 16), __ATOMIC_RELEASE);
		if (++cq_tail == FQ) {
			cq_tail = 0;
			phase ^= 1;
		}
	}
	return NULL;
}

struct torn_arg {
	struct fake *f;
	unsigned id, bad;
};

static void *torn_main(void *p)
{
	struct torn_arg *t = p;
	for (unsigned i = 0; i < TORN_OPS; i++) {
		struct nkv_sqe s;
		struct nkv_dev_cpl c;
		uint32_t tag = t->id << 20 | i, tk = 0;
		memset(&s, 0, sizeof(s));
		s.opc = NKV_KV_RETRIEVE;
		nkv_put32(&s.cdw10, tag);
		if (nkv_dev_submit(&t->f->qp, &s, BUDGET, &tk) || nkv_dev_wait(&t->f->qp, tk, &c, BUDGET) ||
		    c.dw0 != (tag ^ 0x5a5a5a5au) || c.dw1 != tag)
			t->bad++;
	}
	return NULL;
}

static void test_torn(void)
{
	static struct fake f;
	pthread_t ctl, th[TORN_THREADS];
	struct torn_arg args[TORN_THREADS];
	struct nkv_cqe e;

	memset(&f, 0, sizeof(f));
	CHECK(nkv_dev_qp_init(&f.qp, f.sq, f.cq, &f.sq_db, &f.cq_db, f.slots, FQ, 1) == 0, "init");

	/* Deterministic: a CQE whose other dwords are new but whose phase is old is not taken. */
	struct nkv_dev_cq cq = {.ring = f.cq, .db = &f.cq_db, .size = FQ, .phase = 1};
	f.cq[0].dw0 = 0x1234;
	f.cq[0].status = 0; /* phase 0: an old entry */
	CHECK(nkv_cq_peek(&cq, &e) == 0, "stale phase taken");
	f.cq[0].status = 1;
	CHECK(nkv_cq_peek(&cq, &e) == 1 && e.dw0 == 0x1234, "new phase not taken");
	memset(f.cq, 0, sizeof(f.cq));

	pthread_create(&ctl, NULL, fake_ctrl, &f);
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < TORN_THREADS; i++) {
		args[i] = (struct torn_arg){.f = &f, .id = i};
		pthread_create(&th[i], NULL, torn_main, &args[i]);
	}
	unsigned bad = 0;
	for (unsigned i = 0; i < TORN_THREADS; i++) {
		pthread_join(th[i], NULL);
		bad += args[i].bad;
	}
	double s = (double)(now_ns() - t0) / 1e9;
	f.stop = 1;
	pthread_join(ctl, NULL);
	CHECK(bad == 0, "%u of %u completions carried another command's DW0", bad, TORN_THREADS * TORN_OPS);
	CHECK(f.qp.bad_cqes == 0 && f.qp.inflight == 0, "bad %u inflight %u", f.qp.bad_cqes, f.qp.inflight);
	printf("torn     %u threads x %u ops on a 16-entry queue, fake controller with torn-write windows: "
	       "%.0f ops/s (queue logic only)\n",
	       TORN_THREADS, TORN_OPS, TORN_THREADS * TORN_OPS / s);
}

/* ---- bounded: waits that cannot succeed end with an error ---------------------------------------- */

static void test_bounded(void)
{
	static struct fake f;
	struct nkv_dev_cpl c;
	uint32_t t = 0, t2 = 0;
	uint64_t t0;

	memset(&f, 0, sizeof(f));
	nkv_dev_qp_init(&f.qp, f.sq, f.cq, &f.sq_db, &f.cq_db, f.slots, FQ, 1);
	/* no controller: a submitted command never completes */
	struct nkv_sqe s;
	memset(&s, 0, sizeof(s));
	CHECK(nkv_dev_submit(&f.qp, &s, 1000, &t) == 0, "submit");
	t0 = now_ns();
	CHECK(nkv_dev_wait(&f.qp, t, &c, 100000) == NKV_DEV_ETIMEDOUT, "wait did not time out");
	CHECK(now_ns() - t0 < 2000000000ull, "wait took %llu ns", (unsigned long long)(now_ns() - t0));
	/* a full queue: reservation gives up */
	CHECK(nkv_dev_reserve(&f.qp, FQ - 2, 1000, &t2) == 0, "reserve the rest");
	CHECK(nkv_dev_reserve(&f.qp, 1, 100000, &t2) == NKV_DEV_EBUSY, "reserve on a full queue");
	CHECK(nkv_dev_reserve(&f.qp, FQ, 10, &t2) == NKV_DEV_EINVAL, "batch larger than the queue");
	/* publication waits for an earlier ticket that is never published */
	CHECK(nkv_dev_publish(&f.qp, t2 + 1, 1, 100000) == NKV_DEV_ETIMEDOUT, "publish out of turn");
	/* a slot whose previous command was never collected */
	CHECK(nkv_dev_put(&f.qp, t + FQ, &s, 100000) == NKV_DEV_ETIMEDOUT, "put into a busy slot");
	/* completion arrives late: waiting again after a timeout still works */
	volatile uint32_t *d = (volatile uint32_t *)&f.cq[0];
	d[0] = 77;
	__atomic_store_n((uint32_t *)&d[3], (uint32_t)nkv_dev_cid(&f.qp, t) | 1u << 16, __ATOMIC_RELEASE);
	CHECK(nkv_dev_wait(&f.qp, t, &c, 1000) == 0 && c.dw0 == 77, "late completion");
	CHECK(f.cq_db == 1, "CQ head doorbell %u", f.cq_db);

	/* and against the real target: a ticket never submitted times out, the queue stays usable */
	struct nkv_devq *dq;
	if (nkv_devq_create(g_ctrl, 8, &dq) == 0) {
		struct nkv_dev_qp *qp = nkv_devq_qp(dq);
		t0 = now_ns();
		CHECK(nkv_dev_wait(qp, 0, &c, 200000) == NKV_DEV_ETIMEDOUT, "wait on the real queue");
		printf("bounded  200000-poll wait on an idle queue returned NKV_DEV_ETIMEDOUT after %.1f ms\n",
		       (now_ns() - t0) / 1e6);
		struct area a;
		CHECK(area_init(&a, 1, 512), "area");
		fill(&a, 0, 99);
		sqe_for(&s, NKV_KV_STORE, 99, &a, 0);
		CHECK(dev_cmd(qp, &s, &c) == 0, "store after the timeout");
		area_free(&a);
		nkv_devq_destroy(dq);
	} else {
		CHECK(false, "devq create");
	}
}

/* ---- cuda: REG_CUDA without a GPU ----------------------------------------------------------------- */

static void test_cuda(void)
{
	uint8_t handle[64];
	uint64_t iova = 1;
	memset(handle, 0xab, sizeof(handle));
	int rc = nkv_shm_reg_cuda(g_ctrl, handle, 0, 0, 100, &iova, 0);
	CHECK(rc == -EINVAL && iova == 0, "length not a multiple of 4 KiB: %d, iova %#llx", rc, (unsigned long long)iova);
	CHECK((rc = nkv_shm_reg_cuda(g_ctrl, NULL, 0, 0, 65536, &iova, 0)) == -EINVAL, "no handle: %d", rc);
	CHECK((rc = nkv_shm_reg_cuda(g_ctrl, handle, -1, 0, 65536, &iova, 0)) == -EINVAL, "device -1: %d", rc);
	CHECK((rc = nkv_shm_reg_cuda(g_ctrl, handle, 0, 0, 65536, &iova, 0x80)) == -EINVAL, "unknown flag: %d", rc);
	/* Twice: the first call may load the CUDA runtime in the target, the second finds it loaded. */
	for (int i = 0; i < 2; i++) {
		uint64_t t0 = now_ns();
		iova = 1;
		rc = nkv_shm_reg_cuda(g_ctrl, handle, 0, 0, 65536, &iova, i ? NKV_SHM_REG_READONLY : 0);
		uint64_t ms = (now_ns() - t0) / 1000000;
		CHECK(rc == -ENOTSUP || rc == -ENODEV, "made-up IPC handle (call %d): %d (%s)", i, rc, strerror(-rc));
		CHECK(iova == 0, "iova %#llx after a failed registration", (unsigned long long)iova);
		printf("cuda     REG_CUDA with a made-up handle: %s (%llu ms)\n", strerror(-rc), (unsigned long long)ms);
	}
	CHECK((rc = nkv_shm_dereg_cuda(g_ctrl, 0)) == -EINVAL, "dereg iova 0: %d", rc);
	CHECK((rc = nkv_shm_dereg_cuda(g_ctrl, 1ull << 47)) == -ENOENT, "dereg of nothing: %d", rc);

	/* The controller and its socket stream are still in step: a device queue, Store, Retrieve. */
	struct nkv_devq *dq;
	struct area a;
	struct nkv_sqe sq;
	struct nkv_dev_cpl c;
	rc = nkv_devq_create(g_ctrl, 8, &dq);
	CHECK(rc == 0, "devq create after REG_CUDA: %d", rc);
	if (rc)
		return;
	struct nkv_dev_qp *qp = nkv_devq_qp(dq);
	CHECK(area_init(&a, 2, VLEN), "area");
	fill(&a, 0, 0xc0da);
	sqe_for(&sq, NKV_KV_STORE, 0xc0da, &a, 0);
	CHECK((rc = dev_cmd(qp, &sq, &c)) == 0, "store: %#x", rc);
	memset(a.data + VLEN, 0, VLEN);
	sqe_for(&sq, NKV_KV_RETRIEVE, 0xc0da, &a, 1);
	CHECK((rc = dev_cmd(qp, &sq, &c)) == 0 && c.dw0 == VLEN, "retrieve: %#x, DW0 %u", rc, c.dw0);
	CHECK(verify(&a, 1, 0xc0da), "retrieved value");
	/* nkv_devq_prp_iova() gives the same data pointer as nkv_devq_prp() for registered memory. */
	uint64_t p1 = 0, p2 = 0;
	rc = nkv_devq_prp_iova(g_ctrl, a.prp1[1], VLEN, NULL, 0, &p1, &p2);
	CHECK(rc == 0 && p1 == a.prp1[1] && p2 == a.prp2[1], "prp_iova: %d %#llx %#llx", rc, (unsigned long long)p1,
	      (unsigned long long)p2);
	area_free(&a);
	nkv_devq_destroy(dq);
}

int main(void)
{
	struct nkv_target *tgt = NULL;
	struct nkv_subsys *ss;
	struct nkv_shm *shm = NULL;
	char dir[64], sock[128];
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/dev_func.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s/dev.sock", dir);
	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_ns_conf ns = {.nsid = NSID, .rados_ns = "dev-func"};
	struct nkv_cache_policy cache = {0};
	struct nkv_ns_conf ns_cache = {.nsid = NSID_CACHE, .rados_ns = "dev-func-cache", .cache = &cache};
	struct nkv_shm_conf sc = {.poll_idle_us = 10};
	if ((rc = nkv_target_create(&bc, &tgt)) < 0 || (rc = nkv_subsys_add(tgt, SUBNQN, "nkv", &ss)) < 0 ||
	    (rc = nkv_ns_add(ss, &ns)) < 0 || (rc = nkv_ns_add(ss, &ns_cache)) < 0 ||
	    (rc = nkv_shm_create(tgt, &sc, &shm)) < 0 ||
	    (rc = nkv_shm_listen(shm, SUBNQN, sock)) < 0) {
		fprintf(stderr, "dev_func: target setup failed: %s\n", strerror(-rc));
		return 1;
	}
	if ((rc = nkv_connect_shm(sock, NULL, &g_ctrl)) < 0) {
		fprintf(stderr, "dev_func: connect: %s\n", strerror(-rc));
		return 1;
	}

	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {
		{"basic", test_basic}, {"wrap", test_wrap},   {"ticket", test_ticket},
		{"batch", test_batch}, {"torn", test_torn},   {"bounded", test_bounded},
		{"exec", test_exec},   {"range", test_range}, {"ttl", test_ttl},
		{"cuda", test_cuda},
	};
	for (unsigned i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		unsigned f0 = h_fail;
		uint64_t t0 = now_ns();
		groups[i].fn();
		printf("%-8s %s (%llu ms)\n", groups[i].name, h_fail == f0 ? "ok" : "FAILED",
		       (unsigned long long)((now_ns() - t0) / 1000000));
	}
	nkv_disconnect(g_ctrl);
	nkv_shm_destroy(shm, 1000);
	nkv_target_destroy(tgt);
	unlink(sock);
	rmdir(dir);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
