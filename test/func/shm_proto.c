/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_proto.c - register-level conformance, queue and malicious-host tests of the shared-memory
 * (PCIe-style) target transport, driven by a raw host (no libnkv).
 *
 * Creates a target in-process (mem backend): subsystem SUBNQN with NSID 1 and a read-only NSID 2,
 * subsystem ACLNQN with an allowlist; one nkv_shm transport with the default conf (sockets s1, acl)
 * and one with MQES 255 and small registration limits (socket s2), all under a temp dir. Each host
 * is a SOCK_SEQPACKET connection: HELLO, the register memfd mapped, sealed memfds registered at
 * IOVAs, then NVMe through registers, doorbells and queues in that memory (nkv_dev.h helpers).
 * Expected answers are those of docs/nvme-kv-wire.md section B. Every wait is bounded (TMO_MS).
 * Two children forked before the target exists play hosts that die mid-I/O.
 * Every check counts; the last line is "N passed, N failed"; exit 0 only without failures.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"
#include "nkv/nkv_spec.h"
#include "nkv/nkv_target.h"

#include "check.h"
#include "common/fdpass.h"
#include "shm_host.h"

unsigned h_pass, h_fail;

/* Only a failure is counted (per-CQE checks would drown the pass count). */
#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond))                                                                       \
			CHECK(cond, __VA_ARGS__);                                                  \
	} while (0)

#define ST_OK 0
#define SUBNQN "nqn.2026-11.io.rados-nkv:shm"
#define ACLNQN "nqn.2026-11.io.rados-nkv:shm-acl"
#define GOODHOST "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000600d"
#define BADHOST "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000bad"
#define SMALL_MAX_REGIONS 4
#define SMALL_MAX_BYTES (64ull << 20)
#define BIG_KEY "death-key"
#define MIB (1u << 20)

static char g_dir[64], g_s1[128], g_s2[128], g_acl[128];

/* ---- a raw host ------------------------------------------------------------------------------ */

/** Say HELLO to @path as @hostnqn with this test's host ID. */
static int host_connect(struct host *h, const char *path, const char *hostnqn)
{
	uint8_t id[16];

	for (int k = 0; k < 16; k++)
		id[k] = (uint8_t)(0x60 + k);
	return host_hello(h, path, id, hostnqn);
}

static int reg_mem(struct host *h, int fd, uint64_t iova, uint64_t len, uint64_t off, uint32_t flags)
{
	return host_req(h, NKV_SHM_REG, iova, len, off, flags, fd);
}

/** Connect to @path and register a main region of @len bytes at MAIN_IOVA. @return 0 or -errno. */
static int host_setup(struct host *h, const char *path, uint64_t len)
{
	int rc = host_connect(h, path, GOODHOST);

	return rc != 0 ? rc : host_main_region(h, len);
}

/** @len bytes of the main region, page aligned. @return the IOVA (0 when the region is used up). */
static uint64_t halloc(struct host *h, uint64_t len)
{
	uint64_t at = h->brk, n = (len + PG - 1) & ~(uint64_t)(PG - 1);

	if (n == 0)
		n = PG;
	if (at + n > h->mem_len) {
		CHECK(false, "host region of %llu bytes used up", (unsigned long long)h->mem_len);
		return 0;
	}
	h->brk += n;
	memset(h->mem + at, 0, n);
	return MAIN_IOVA + at;
}

/* ---- registers and bring-up -------------------------------------------------------------------- */

/** Wait until (CSTS & @mask) == @want. @return the last CSTS read. */
static uint32_t wait_csts(struct host *h, uint32_t mask, uint32_t want, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	uint32_t v;

	while (((v = rd32(h, NKV_REG_CSTS)) & mask) != want && now_ms() < end)
		usleep(200);
	return v;
}

/**
 * Admin queues of @entries each in the main region (or at @asq/@acq when nonzero), then CC.
 * @return CSTS once RDY or CFS is set (or the bound passed).
 */
static uint32_t ctrl_enable_at(struct host *h, uint16_t entries, uint32_t cc, uint64_t asq, uint64_t acq)
{
	uint64_t sq = halloc(h, (uint64_t)entries * 64), cq = halloc(h, (uint64_t)entries * 16);

	host_rings(h, 0, sq, entries, cq, entries, &h->asq, &h->acq);
	wr32(h, NKV_REG_AQA, (uint32_t)(entries - 1) | (uint32_t)(entries - 1) << 16);
	wr64(h, NKV_REG_ASQ, asq ? asq : sq);
	wr64(h, NKV_REG_ACQ, acq ? acq : cq);
	wr32(h, NKV_REG_CC, cc);
	return wait_any(h, NKV_CSTS_RDY | NKV_CSTS_CFS, TMO_MS);
}

static uint32_t ctrl_enable(struct host *h)
{
	return ctrl_enable_at(h, 32, CC_ENABLE, 0, 0);
}

/**
 * CC.EN = 0 and wait for the reset to be done: RDY, CFS and SHST all clear (the controller sees CC
 * by polling, so with RDY already 0 after a failed enable the host waits for CFS to clear instead).
 * @return CSTS.
 */
static uint32_t ctrl_disable(struct host *h)
{
	wr32(h, NKV_REG_CC, 0);
	return wait_csts(h, NKV_CSTS_RDY | NKV_CSTS_CFS | NKV_CSTS_SHST_MASK, 0, TMO_MS);
}

/* ---- commands and completions -------------------------------------------------------------------- */

/**
 * Wait (bounded) for the next CQE of @cq, check it (phase via nkv_cq_peek; SQHD within the SQ and
 * not beyond what was submitted), consume it and, with @ring, write the head doorbell.
 * @return 1, or 0 on timeout.
 */
static int wait_cqe(struct nkv_dev_cq *cq, struct nkv_dev_sq *sq, struct nkv_cqe *out, int ms, bool ring)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	unsigned spins = 0;

	for (;;) {
		if (nkv_cq_peek(cq, out))
			break;
		if (++spins > 256) {
			if (now_ms() >= end)
				return 0;
			usleep(20);
		}
	}
	uint16_t sqhd = nkv_get16(&out->sqhd);
	EXPECT((nkv_get16(&out->status) & 1u) == cq->phase, "CQE phase");
	if (sq) {
		unsigned pending = (unsigned)(sq->tail + sq->size - sq->head) % sq->size;
		unsigned moved = (unsigned)(sqhd + sq->size - sq->head) % sq->size;
		EXPECT(sqhd < sq->size && moved <= pending, "SQHD %u: head was %u, tail %u, size %u", sqhd, sq->head,
		       sq->tail, sq->size);
	}
	nkv_cq_advance(cq, sq, out);
	if (ring)
		nkv_cq_ring(cq);
	return 1;
}

/** Submit one command and wait for its CQE. @return the status code (SCT << 8 | SC) or ST_TIMEOUT. */
static int exec_cmd(struct host *h, struct nkv_dev_sq *sq, struct nkv_dev_cq *cq, struct nkv_sqe *sqe,
		    struct nkv_cqe *cqe, int ms)
{
	struct nkv_cqe tmp;

	if (!cqe)
		cqe = &tmp;
	if (submit(h, sq, sqe) < 0)
		return ST_TIMEOUT;
	if (!wait_cqe(cq, sq, cqe, ms, true))
		return ST_TIMEOUT;
	EXPECT(cqe->cid == sqe->cid, "CQE CID %u for CID %u", cqe->cid, sqe->cid);
	return cqe_code(cqe);
}

static int admin_cmd(struct host *h, struct nkv_sqe *sqe, struct nkv_cqe *cqe)
{
	return exec_cmd(h, &h->asq, &h->acq, sqe, cqe, TMO_MS);
}

static int io_cmd(struct host *h, struct qpair *q, struct nkv_sqe *sqe, struct nkv_cqe *cqe)
{
	return exec_cmd(h, &q->sq, &q->cq, sqe, cqe, TMO_MS);
}

static void set_prps(struct nkv_sqe *s, uint64_t prp1, uint64_t prp2)
{
	nkv_put64(s->dptr, prp1);
	nkv_put64(s->dptr + 8, prp2);
}

static int set_num_queues(struct host *h, uint16_t n, uint32_t *dw0)
{
	struct nkv_sqe s = sqe_adm(NKV_ADM_SET_FEATURES, NKV_FEAT_NUM_QUEUES, (uint32_t)(n - 1) << 16 | (uint16_t)(n - 1), 0);
	struct nkv_cqe e;
	int st = admin_cmd(h, &s, &e);

	if (dw0)
		*dw0 = nkv_get32(&e.dw0);
	return st;
}

static int create_cq(struct host *h, uint16_t qid, uint32_t entries, uint64_t base, bool pc)
{
	struct nkv_sqe s = sqe_adm(NKV_ADM_CREATE_CQ, qid | (entries - 1) << 16, pc ? 1 : 0, base);
	return admin_cmd(h, &s, NULL);
}

static int create_sq(struct host *h, uint16_t qid, uint32_t entries, uint16_t cqid, uint64_t base, bool pc)
{
	struct nkv_sqe s = sqe_adm(NKV_ADM_CREATE_SQ, qid | (entries - 1) << 16, (pc ? 1u : 0u) | (uint32_t)cqid << 16, base);
	return admin_cmd(h, &s, NULL);
}

static int delete_q(struct host *h, uint8_t opc, uint16_t qid)
{
	struct nkv_sqe s = sqe_adm(opc, qid, 0, 0);
	return admin_cmd(h, &s, NULL);
}

/** Create CQ @qid then SQ @qid (@sqn / @cqn entries) in the main region. @return the first failing status. */
static int create_qpair(struct host *h, uint16_t qid, uint16_t sqn, uint16_t cqn, struct qpair *q)
{
	uint64_t sq = halloc(h, (uint64_t)sqn * 64), cq = halloc(h, (uint64_t)cqn * 16);
	int st;

	if (!sq || !cq)
		return ST_TIMEOUT;
	if ((st = create_cq(h, qid, cqn, cq, true)) != 0 || (st = create_sq(h, qid, sqn, qid, sq, true)) != 0)
		return st;
	q->qid = qid;
	host_rings(h, qid, sq, sqn, cq, cqn, &q->sq, &q->cq);
	return 0;
}

/** Connect, register, enable, grant @nq queues, create qpair 1 of @depth. @return 0 or a status. */
static int host_ready(struct host *h, const char *path, uint64_t mem, uint16_t nq, uint16_t depth, struct qpair *q)
{
	int rc = host_setup(h, path, mem);

	if (rc != 0)
		return rc;
	if ((ctrl_enable(h) & (NKV_CSTS_RDY | NKV_CSTS_CFS)) != NKV_CSTS_RDY)
		return -EIO;
	if ((rc = set_num_queues(h, nq, NULL)) != 0)
		return rc;
	return q ? create_qpair(h, 1, depth, depth, q) : 0;
}

/* ---- KV commands and data buffers ------------------------------------------------------------- */

static struct nkv_sqe sqe_kv(uint8_t opc, uint32_t nsid, const char *key, uint32_t size)
{
	struct nkv_sqe s;
	nkv_sqe_kv(&s, opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), size, 0);
	return s;
}

/** A data buffer: its pages (IOVA and address here) and the offset of its first byte in page 0. */
struct dbuf {
	uint32_t len, off, npages;
	uint64_t *iova;
};

/**
 * Allocate a buffer of @len bytes starting @off bytes into its first page; @scatter: every other
 * page of a run, in reverse order (never contiguous in IOVA space: the bounce path).
 */
static bool dbuf_alloc(struct host *h, struct dbuf *d, uint32_t len, uint32_t off, bool scatter)
{
	d->len = len;
	d->off = off;
	d->npages = len ? nkv_prp_pages(off, len) : 1;
	d->iova = calloc(d->npages, sizeof(*d->iova));
	uint64_t base = halloc(h, (uint64_t)d->npages * PG * (scatter ? 2 : 1));
	if (!d->iova || !base)
		return false;
	for (uint32_t i = 0; i < d->npages; i++)
		d->iova[i] = base + (scatter ? 2ull * (d->npages - 1 - i) : i) * PG;
	return true;
}

static void dbuf_free(struct dbuf *d)
{
	free(d->iova);
	d->iova = NULL;
}

/** Byte @i of the buffer, here. */
static uint8_t *dbuf_at(struct host *h, const struct dbuf *d, uint32_t i)
{
	uint32_t x = d->off + i;
	return (uint8_t *)hva(h, d->iova[x / PG]) + x % PG;
}

static uint8_t pattern(uint32_t seed, uint32_t i)
{
	return (uint8_t)((i * 2654435761u + seed * 40503u) >> 13);
}

static void dbuf_fill(struct host *h, const struct dbuf *d, uint32_t seed)
{
	for (uint32_t i = 0; i < d->len; i++)
		*dbuf_at(h, d, i) = pattern(seed, i);
}

static void dbuf_set(struct host *h, const struct dbuf *d, uint8_t v)
{
	for (uint32_t i = 0; i < d->len; i++)
		*dbuf_at(h, d, i) = v;
}

/** @return the first mismatching byte index, or -1 if all @len bytes match the pattern. */
static long dbuf_check(struct host *h, const struct dbuf *d, uint32_t seed, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (*dbuf_at(h, d, i) != pattern(seed, i))
			return (long)i;
	return -1;
}

/** PRP1/PRP2 for @d (docs/nvme-kv-wire.md B.5): a second page, or a PRP list chained across list pages. */
static void dbuf_prps(struct host *h, const struct dbuf *d, struct nkv_sqe *s)
{
	uint64_t prp2 = 0;

	if (d->len && d->npages == 2) {
		prp2 = d->iova[1];
	} else if (d->len && d->npages > 2) {
		uint64_t list = halloc(h, PG);
		uint8_t *lp = hva(h, list);
		unsigned slot = 0;
		prp2 = list;
		for (uint32_t i = 1; i < d->npages; i++) {
			if (slot == PG / 8 - 1 && d->npages - i > 1) { /* last slot, more to come: chain */
				uint64_t next = halloc(h, PG);
				nkv_put64(lp + slot * 8, next);
				lp = hva(h, next);
				slot = 0;
			}
			nkv_put64(lp + slot++ * 8, d->iova[i]);
		}
	}
	set_prps(s, d->len ? d->iova[0] + d->off : 0, prp2);
}

static int kv_io(struct host *h, struct qpair *q, uint8_t opc, uint32_t nsid, const char *key, const struct dbuf *d,
		 struct nkv_cqe *cqe)
{
	struct nkv_sqe s = sqe_kv(opc, nsid, key, d ? d->len : 0);
	if (d)
		dbuf_prps(h, d, &s);
	return io_cmd(h, q, &s, cqe);
}

/** Store @len bytes under @key and read them back, both through buffers of the given shape. */
static void kv_roundtrip(struct host *h, struct qpair *q, const char *key, uint32_t len, uint32_t off, bool scatter)
{
	struct dbuf w = {0}, r = {0};
	struct nkv_cqe e;
	uint32_t seed = len + off + (scatter ? 7 : 0);
	int st;

	if (!dbuf_alloc(h, &w, len, off, scatter) || !dbuf_alloc(h, &r, len, off, scatter)) {
		CHECK(false, "buffers for %u bytes", len);
		goto out;
	}
	dbuf_fill(h, &w, seed);
	dbuf_set(h, &r, 0xee);
	st = kv_io(h, q, NKV_KV_STORE, 1, key, &w, &e);
	CHECK(st == 0, "Store %u B (offset %u, %s): status %03x", len, off, scatter ? "scattered" : "contiguous", st);
	st = kv_io(h, q, NKV_KV_RETRIEVE, 1, key, &r, &e);
	CHECK(st == 0 && nkv_get32(&e.dw0) == len, "Retrieve %u B (%s): status %03x DW0 %u", len,
	      scatter ? "scattered" : "contiguous", st, nkv_get32(&e.dw0));
	CHECK(st != 0 || nkv_get32(&e.dw1) == len, "Retrieve %u B: DW1 (bytes moved, NKV_SHM_FEAT_XFER) %u", len,
	      nkv_get32(&e.dw1));
	long bad = dbuf_check(h, &r, seed, len);
	CHECK(bad < 0, "Retrieve %u B (%s): byte %ld differs", len, scatter ? "scattered" : "contiguous", bad);
out:
	dbuf_free(&w);
	dbuf_free(&r);
}

/** A new controller on @path still does a 4 KiB Store and Retrieve. */
static void fresh_check(const char *path, const char *what)
{
	struct host h;
	struct qpair q;
	int rc = host_ready(&h, path, 4 * MIB, 1, 8, &q);

	CHECK(rc == 0, "after %s: a new controller comes up (%d)", what, rc);
	if (rc == 0)
		kv_roundtrip(&h, &q, "fresh", 4096, 0, false);
	host_close(&h);
}

/* ---- HELLO and registration ------------------------------------------------------------------- */

/* Descriptors open in this process (the target's included). */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static void test_hello(void)
{
	struct host h, g;
	int rc;

	rc = host_connect(&h, g_acl, BADHOST);
	CHECK(rc == -EACCES, "HELLO from an unknown host on the allowlisted subsystem: %d", rc);
	CHECK(sock_closed(h.sock, TMO_MS), "connection closed after -EACCES");
	host_close(&h);
	rc = host_connect(&h, g_acl, GOODHOST);
	CHECK(rc == 0 && h.hello.max_queues == 64 && h.hello.reg_size >= nkv_shm_reg_size(64) &&
		      h.hello.hdr.magic == NKV_SHM_MAGIC && h.hello.hdr.op == NKV_SHM_HELLO,
	      "HELLO from the allowed host: %d, max_queues %u, reg_size %u", rc, h.hello.max_queues, h.hello.reg_size);
	host_close(&h);

	/* Not our protocol: bad magic, then a truncated message. */
	struct nkv_shm_hello m;
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, NKV_SHM_HELLO);
	m.hdr.magic = 0x12345678;
	int s = unix_connect(g_s1);
	CHECK(s >= 0 && send(s, &m, sizeof(m), MSG_NOSIGNAL) == sizeof(m) && sock_closed(s, TMO_MS),
	      "bad magic: connection closed");
	if (s >= 0)
		close(s);
	hdr_init(&m.hdr, NKV_SHM_HELLO);
	s = unix_connect(g_s1);
	CHECK(s >= 0 && send(s, &m, 12, MSG_NOSIGNAL) == 12 && sock_closed(s, TMO_MS), "short HELLO: connection closed");
	if (s >= 0)
		close(s);
	/* Empty messages read as the end of the stream, with or without HELLO first; a descriptor sent
	 * with one must not stay open in the target (found by fuzz_shm: each leaked one). */
	int before = open_fds(), mfd = mem_create(PG, true, NULL);
	for (int i = 0; i < 32; i++) {
		memset(&h, 0, sizeof(h));
		h.memfd = -1;
		if (i % 2 ? host_connect(&h, g_s1, GOODHOST) != 0
			  : (h.sock = unix_connect(g_s1)) < 0) {
			CHECK(false, "connection %d for the empty message", i);
			host_close(&h);
			continue;
		}
		CHECK(nkv_send_fd(h.sock, "", 0, i % 4 < 2 ? mfd : -1) == 0 && sock_closed(h.sock, TMO_MS),
		      "an empty message (%s, %s): connection closed", i % 2 ? "after HELLO" : "before HELLO",
		      i % 4 < 2 ? "with a descriptor" : "alone");
		host_close(&h);
	}
	close(mfd);
	int after = open_fds();
	for (uint64_t end = now_ms() + TMO_MS; after > before && now_ms() < end; after = open_fds())
		usleep(10 * 1000); /* the pollers free departed controllers (their register memfds) a little later */
	CHECK(after <= before, "empty messages: %d descriptors open in the process, %d before", after, before);
	/* REG before HELLO. */
	s = unix_connect(g_s1);
	memset(&h, 0, sizeof(h));
	h.sock = s;
	h.memfd = -1;
	rc = host_req(&h, NKV_SHM_REG, MAIN_IOVA, PG, 0, 0, -1);
	CHECK(rc == -EPROTO && sock_closed(s, TMO_MS), "REG before HELLO: connection closed (%d)", rc);
	host_close(&h);

	/* Registration errors on the default transport. */
	rc = host_setup(&h, g_s1, 4 * MIB);
	CHECK(rc == 0, "HELLO + REG of the main region: %d", rc);
	if (rc != 0) {
		host_close(&h);
		return;
	}
	uint8_t *va;
	int fd = mem_create(16 * PG, true, &va);
	rc = reg_mem(&h, fd, 0x200000000ull + 0x800, 4 * PG, 0, 0);
	CHECK(rc == -EINVAL, "REG at an unaligned IOVA: %d", rc);
	rc = reg_mem(&h, fd, 0x200000000ull, 4 * PG + 100, 0, 0);
	CHECK(rc == -EINVAL, "REG of an unaligned length: %d", rc);
	rc = reg_mem(&h, fd, 0x200000000ull, 4 * PG, 100, 0);
	CHECK(rc == -EINVAL, "REG at an unaligned offset: %d", rc);
	rc = reg_mem(&h, fd, 0x200000000ull, 0, 0, 0);
	CHECK(rc == -EINVAL, "REG of 0 bytes: %d", rc);
	rc = reg_mem(&h, fd, 0x200000000ull, 32 * PG, 0, 0);
	CHECK(rc == -EINVAL, "REG past the end of the memfd: %d", rc);
	rc = reg_mem(&h, fd, MAIN_IOVA + 4 * MIB - PG, 4 * PG, 0, 0);
	CHECK(rc == -EEXIST, "REG overlapping the main region's end: %d", rc);
	rc = reg_mem(&h, fd, MAIN_IOVA - PG, 4 * PG, 0, 0);
	CHECK(rc == -EEXIST, "REG overlapping the main region's start: %d", rc);
	rc = reg_mem(&h, fd, MAIN_IOVA + 4 * MIB, 4 * PG, 0, 0);
	CHECK(rc == 0, "REG right after the main region: %d", rc);
	rc = reg_mem(&h, fd, 0xfffffffffffff000ull, 4 * PG, 0, 0);
	CHECK(rc == -EINVAL || rc == -EEXIST, "REG wrapping the IOVA space: %d", rc);
	int ufd = mem_create(4 * PG, false, NULL);
	rc = reg_mem(&h, ufd, 0x300000000ull, 4 * PG, 0, 0);
	CHECK(rc == -EPERM, "REG of an unsealed memfd: %d", rc);
	close(ufd);
	rc = host_req(&h, NKV_SHM_REG, 0x300000000ull, 4 * PG, 0, 0, -1);
	CHECK(rc < 0 && rc != -EPROTO, "REG without an fd: %d", rc);
	rc = host_req(&h, NKV_SHM_DEREG, 0x400000000ull, 0, 0, 0, -1);
	CHECK(rc == -ENOENT, "DEREG of an unknown IOVA: %d", rc);
	rc = host_req(&h, NKV_SHM_DEREG, MAIN_IOVA + 4 * MIB, 0, 0, 0, -1);
	CHECK(rc == 0, "DEREG of an unused region: %d", rc);
	/* The admin queues live in the main region: it is busy while they exist. */
	uint32_t csts = ctrl_enable(&h);
	CHECK((csts & 3) == NKV_CSTS_RDY, "enable: CSTS %x", csts);
	rc = host_req(&h, NKV_SHM_DEREG, MAIN_IOVA, 0, 0, 0, -1);
	CHECK(rc == -EBUSY, "DEREG of the region holding the admin queues: %d", rc);
	rc = reg_mem(&h, fd, MAIN_IOVA + 4 * MIB, 4 * PG, 0, 0);
	if (set_num_queues(&h, 1, NULL) == 0 && rc == 0) {
		/* An I/O CQ in the second region pins it. */
		rc = create_cq(&h, 1, 4, MAIN_IOVA + 4 * MIB, true);
		CHECK(rc == 0, "Create I/O CQ in the second region: %03x", rc);
		rc = host_req(&h, NKV_SHM_DEREG, MAIN_IOVA + 4 * MIB, 0, 0, 0, -1);
		CHECK(rc == -EBUSY, "DEREG of a region holding an I/O CQ: %d", rc);
		rc = delete_q(&h, NKV_ADM_DELETE_CQ, 1);
		CHECK(rc == 0, "Delete I/O CQ: %03x", rc);
		rc = host_req(&h, NKV_SHM_DEREG, MAIN_IOVA + 4 * MIB, 0, 0, 0, -1);
		CHECK(rc == 0, "DEREG once the CQ is deleted: %d", rc);
	}
	ctrl_disable(&h);
	rc = host_req(&h, NKV_SHM_DEREG, MAIN_IOVA, 0, 0, 0, -1);
	CHECK(rc == 0, "DEREG of the main region after CC.EN = 0: %d", rc);
	munmap(va, 16 * PG);
	close(fd);
	host_close(&h);

	/* Limits, on the small transport. */
	rc = host_connect(&g, g_s2, GOODHOST);
	CHECK(rc == 0 && g.hello.max_regions == SMALL_MAX_REGIONS && g.hello.max_reg_bytes == SMALL_MAX_BYTES,
	      "HELLO reports the limits: %d, %u regions, %llu bytes", rc, g.hello.max_regions,
	      (unsigned long long)g.hello.max_reg_bytes);
	fd = mem_create(SMALL_MAX_BYTES * 2, true, NULL);
	for (unsigned i = 0; i < SMALL_MAX_REGIONS; i++) {
		rc = reg_mem(&g, fd, 0x100000000ull * (i + 1), PG, (uint64_t)i * PG, 0);
		CHECK(rc == 0, "REG region %u of %u: %d", i + 1, SMALL_MAX_REGIONS, rc);
	}
	rc = reg_mem(&g, fd, 0x100000000ull * 10, PG, 0, 0);
	CHECK(rc == -ENOSPC, "REG of one region too many: %d", rc);
	rc = host_req(&g, NKV_SHM_DEREG, 0x100000000ull, 0, 0, 0, -1);
	CHECK(rc == 0, "DEREG: %d", rc);
	rc = reg_mem(&g, fd, 0x100000000ull * 10, SMALL_MAX_BYTES, 0, 0);
	CHECK(rc == -ENOSPC, "REG past max_reg_bytes: %d", rc);
	rc = reg_mem(&g, fd, 0x100000000ull * 10, SMALL_MAX_BYTES - 3 * PG, 0, 0);
	CHECK(rc == 0, "REG up to max_reg_bytes exactly: %d", rc);
	close(fd);
	host_close(&g);
}

/* REG_CUDA with a handle no GPU knows: a clean error (no CUDA runtime: -ENOTSUP; a runtime but no
 * such allocation or no device: -ENODEV), bad fields -EINVAL first, and the socket keeps serving. */
static int reg_cuda(struct host *h, uint64_t iova, uint64_t len)
{
	struct nkv_shm_reg_cuda m = {.iova = iova, .len = len, .device = 0};
	struct nkv_shm_reply rep;

	hdr_init(&m.hdr, NKV_SHM_REG_CUDA);
	memset(m.handle, 0x5a, sizeof(m.handle));
	if (nkv_send_fd(h->sock, &m, sizeof(m), -1) != (ssize_t)sizeof(m) || recv_reply(h->sock, &rep, NULL, TMO_MS) != 1 ||
	    rep.hdr.op != NKV_SHM_REG_CUDA)
		return -EPROTO;
	return rep.status;
}

static void test_reg_cuda(void)
{
	struct host h;
	int rc = host_connect(&h, g_s1, GOODHOST);

	CHECK(rc == 0, "HELLO: %d", rc);
	rc = reg_cuda(&h, 0x7000000001ull, PG);
	CHECK(rc == -EINVAL, "REG_CUDA at an unaligned IOVA: %d", rc);
	rc = reg_cuda(&h, 0x7000000000ull, 0);
	CHECK(rc == -EINVAL, "REG_CUDA of 0 bytes: %d", rc);
	rc = reg_cuda(&h, 0x7000000000ull, 16 * PG);
	CHECK(rc == -ENOTSUP || rc == -ENODEV, "REG_CUDA of an unknown handle: %d (-ENOTSUP or -ENODEV)", rc);
	rc = host_req(&h, NKV_SHM_DEREG, 0x7000000000ull, 0, 0, 0, -1);
	CHECK(rc == -ENOENT, "nothing was registered: DEREG %d", rc);
	int fd = mem_create(PG, true, NULL);
	rc = reg_mem(&h, fd, 0x7000000000ull, PG, 0, 0);
	CHECK(rc == 0, "the socket still serves: REG %d", rc);
	close(fd);
	host_close(&h);
}

/* ---- registers and controller bring-up ----------------------------------------------------------- */

static void check_cap(const char *path, unsigned mqes)
{
	struct host h;
	int rc = host_connect(&h, path, GOODHOST);

	CHECK(rc == 0, "HELLO on %s: %d", path, rc);
	if (rc != 0) {
		host_close(&h);
		return;
	}
	uint64_t cap = rd64(&h, NKV_REG_CAP);
	CHECK(NKV_CAP_MQES(cap) == mqes, "CAP.MQES %u, want %u", NKV_CAP_MQES(cap), mqes);
	CHECK((cap & NKV_CAP_CQR) != 0, "CAP.CQR set");
	CHECK(((cap >> NKV_CAP_DSTRD_SHIFT) & 0xf) == 0, "CAP.DSTRD 0");
	CHECK(((cap >> NKV_CAP_TO_SHIFT) & 0xff) == 20, "CAP.TO %u", (unsigned)((cap >> NKV_CAP_TO_SHIFT) & 0xff));
	CHECK((cap & NKV_CAP_CSS_NVM) && (cap & NKV_CAP_CSS_IOCS), "CAP.CSS bits 37 and 43: %016llx",
	      (unsigned long long)cap);
	CHECK(((cap >> NKV_CAP_MPSMIN_SHIFT) & 0xf) == 0 && ((cap >> NKV_CAP_MPSMAX_SHIFT) & 0xf) == 0,
	      "CAP.MPSMIN/MPSMAX 0 (4 KiB)");
	CHECK(rd32(&h, NKV_REG_VS) == NKV_VS_2_0, "VS %08x", rd32(&h, NKV_REG_VS));
	CHECK(rd32(&h, NKV_REG_CSTS) == 0, "CSTS %x before enable", rd32(&h, NKV_REG_CSTS));
	host_close(&h);
}

static void test_registers(void)
{
	struct host h;
	struct qpair q;
	uint32_t csts;
	int rc;

	check_cap(g_s1, 4095);
	check_cap(g_s2, 255);

	if ((rc = host_setup(&h, g_s1, 4 * MIB)) != 0) {
		CHECK(false, "host setup: %d", rc);
		host_close(&h);
		return;
	}
	uint64_t t0 = now_ms();
	csts = ctrl_enable(&h);
	uint64_t dt = now_ms() - t0;
	CHECK((csts & 3) == NKV_CSTS_RDY && dt <= 20 * 500, "enable: CSTS %x after %llu ms", csts,
	      (unsigned long long)dt);
	CHECK(rd32(&h, NKV_REG_CC) == CC_ENABLE, "CC reads back");
	struct nkv_sqe s = sqe_adm(NKV_ADM_IDENTIFY, NKV_CNS_CTRLR, 0, halloc(&h, PG));
	CHECK(admin_cmd(&h, &s, NULL) == 0, "Identify after enable");
	CHECK((ctrl_disable(&h) & 3) == 0, "EN 1 -> 0: RDY 0");

	/* Invalid CC: CFS, never RDY. */
	static const struct {
		uint32_t cc;
		const char *what;
	} bad[] = {
		{CC_ENABLE | 1u << 7, "MPS 1"},
		{(CC_ENABLE & ~(0xfu << 16)) | 5u << 16, "IOSQES 5"},
		{(CC_ENABLE & ~(0xfu << 20)) | 3u << 20, "IOCQES 3"},
		{(CC_ENABLE & ~(7u << 4)) | 1u << 4, "CSS 001b"},
		{CC_ENABLE | 1u << 11, "AMS 001b"},
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		csts = ctrl_enable_at(&h, 32, bad[i].cc, 0, 0);
		if (!(csts & NKV_CSTS_CFS))
			csts = wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
		CHECK((csts & 3) == NKV_CSTS_CFS, "CC with %s: CSTS %x (want CFS, not RDY)", bad[i].what, csts);
		csts = ctrl_disable(&h);
		CHECK((csts & 3) == 0, "EN 0 after %s: CSTS %x", bad[i].what, csts);
	}
	/* Admin queues the controller cannot use. */
	csts = ctrl_enable_at(&h, 32, CC_ENABLE, 0xdead000000ull, 0);
	csts = csts & NKV_CSTS_CFS ? csts : wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
	CHECK((csts & 3) == NKV_CSTS_CFS, "ASQ outside any region: CSTS %x", csts);
	ctrl_disable(&h);
	csts = ctrl_enable_at(&h, 32, CC_ENABLE, 0, 0xdead000000ull);
	csts = csts & NKV_CSTS_CFS ? csts : wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
	CHECK((csts & 3) == NKV_CSTS_CFS, "ACQ outside any region: CSTS %x", csts);
	ctrl_disable(&h);
	csts = ctrl_enable_at(&h, 32, CC_ENABLE, MAIN_IOVA + 0x40, 0);
	csts = csts & NKV_CSTS_CFS ? csts : wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
	CHECK((csts & 3) == NKV_CSTS_CFS, "unaligned ASQ: CSTS %x", csts);
	ctrl_disable(&h);
	csts = ctrl_enable_at(&h, 128, CC_ENABLE, MAIN_IOVA + 4 * MIB - PG, 0); /* 128 x 64 B runs off the end */
	csts = csts & NKV_CSTS_CFS ? csts : wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
	CHECK((csts & 3) == NKV_CSTS_CFS, "ASQ straddling the region end: CSTS %x", csts);
	ctrl_disable(&h);
	wr32(&h, NKV_REG_AQA, 0); /* 1-entry admin queues */
	wr32(&h, NKV_REG_CC, CC_ENABLE);
	csts = wait_csts(&h, NKV_CSTS_CFS | NKV_CSTS_RDY, NKV_CSTS_CFS, TMO_MS);
	CHECK((csts & 3) == NKV_CSTS_CFS, "AQA of 1 entry: CSTS %x", csts);
	ctrl_disable(&h);

	/* Re-enable after all that; then EN 1 -> 0 drops the I/O queues. */
	csts = ctrl_enable(&h);
	CHECK((csts & 3) == NKV_CSTS_RDY, "re-enable after CFS: CSTS %x", csts);
	rc = set_num_queues(&h, 2, NULL);
	rc = rc ? rc : create_qpair(&h, 1, 8, 8, &q);
	CHECK(rc == 0, "qpair 1: %03x", rc);
	if (rc == 0)
		kv_roundtrip(&h, &q, "reg-1", 512, 0, false);
	CHECK((ctrl_disable(&h) & 1) == 0, "EN 1 -> 0 with I/O queues");
	csts = ctrl_enable(&h);
	CHECK((csts & 3) == NKV_CSTS_RDY, "re-enable: CSTS %x", csts);
	rc = set_num_queues(&h, 2, NULL);
	CHECK(rc == 0, "Set Features Number of Queues after reset: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_SQ, 1);
	CHECK(rc == SC(1, 1), "the reset deleted SQ 1: Delete SQ %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_CQ, 1);
	CHECK(rc == SC(1, 1), "the reset deleted CQ 1: Delete CQ %03x", rc);
	rc = create_qpair(&h, 1, 8, 8, &q);
	CHECK(rc == 0, "qpair 1 again: %03x", rc);
	if (rc == 0)
		kv_roundtrip(&h, &q, "reg-2", 512, 0, false);

	/* Normal shutdown, with two Asynchronous Event Requests held. As a PCIe controller does, it
	 * posts nothing for them: a host completes its own AERs before CC.SHN (SPDK's does, and finds
	 * a CQE for a command it no longer has an error), and a reset drops them. */
	struct nkv_sqe aer = sqe_adm(NKV_ADM_ASYNC_EVENT, 0, 0, 0);
	struct nkv_cqe ce;
	CHECK(submit(&h, &h.asq, &aer) >= 0 && submit(&h, &h.asq, &aer) >= 0, "two AERs submitted");
	usleep(50 * 1000);
	CHECK(!nkv_cq_peek(&h.acq, &ce), "the AERs are held (no event)");
	wr32(&h, NKV_REG_CC, CC_ENABLE | 1u << 14);
	csts = wait_csts(&h, NKV_CSTS_SHST_MASK, NKV_CSTS_SHST_DONE, TMO_MS);
	CHECK((csts & NKV_CSTS_SHST_MASK) == NKV_CSTS_SHST_DONE, "CC.SHN 01b: SHST %x", (csts >> 2) & 3);
	usleep(50 * 1000);
	CHECK(!nkv_cq_peek(&h.acq, &ce), "no CQE for the held AERs at shutdown (got CID %u status %03x)", ce.cid,
	      cqe_code(&ce));
	csts = ctrl_disable(&h);
	CHECK((csts & (NKV_CSTS_RDY | NKV_CSTS_SHST_MASK)) == 0, "EN 0 after shutdown: CSTS %x", csts);
	csts = ctrl_enable(&h);
	CHECK((csts & 3) == NKV_CSTS_RDY, "enable after shutdown: CSTS %x", csts);
	CHECK(set_num_queues(&h, 1, NULL) == 0, "admin works after shutdown + enable");
	host_close(&h);
}

/* ---- admin: Identify, Number of Queues, queue management ------------------------------------- */

static void test_admin(void)
{
	struct host h;
	struct nkv_cqe e;
	int rc;

	if ((rc = host_setup(&h, g_s1, 8 * MIB)) != 0 || (ctrl_enable(&h) & 3) != NKV_CSTS_RDY) {
		CHECK(false, "host setup: %d", rc);
		host_close(&h);
		return;
	}
	/* Identify Controller into one page, then into two half pages (PRP1 offset + PRP2). */
	uint64_t id1 = halloc(&h, PG), id2 = halloc(&h, 4 * PG);
	struct nkv_sqe s = sqe_adm(NKV_ADM_IDENTIFY, NKV_CNS_CTRLR, 0, id1);
	rc = admin_cmd(&h, &s, &e);
	const uint8_t *id = hva(&h, id1);
	CHECK(rc == 0, "Identify Controller: %03x", rc);
	CHECK(id[512] == 0x66 && id[513] == 0x44, "Identify SQES %02x CQES %02x", id[512], id[513]);
	CHECK(nkv_get16(id + 78) == h.hello.cntlid, "Identify CNTLID %u, HELLO said %u", nkv_get16(id + 78),
	      h.hello.cntlid);
	CHECK(strcmp((const char *)id + 768, SUBNQN) == 0, "Identify SUBNQN '%.64s'", (const char *)id + 768);
	memset(hva(&h, id2), 0xee, 4 * PG);
	s = sqe_adm(NKV_ADM_IDENTIFY, NKV_CNS_CTRLR, 0, 0);
	set_prps(&s, id2 + 0x800, id2 + 3 * PG); /* second page not adjacent */
	rc = admin_cmd(&h, &s, NULL);
	const uint8_t *p1 = (const uint8_t *)hva(&h, id2) + 0x800, *p2 = hva(&h, id2 + 3 * PG);
	CHECK(rc == 0 && memcmp(p1, id, 0x800) == 0 && memcmp(p2, id + 0x800, 0x800) == 0,
	      "Identify through PRP1 + 0x800 and PRP2: %03x, data %s", rc,
	      memcmp(p1, id, 0x800) || memcmp(p2, id + 0x800, 0x800) ? "differs" : "matches");
	CHECK(((const uint8_t *)hva(&h, id2))[0x7ff] == 0xee && p2[0x800] == 0xee, "nothing written outside the PRPs");

	/* Number of Queues. */
	uint32_t dw0 = 0;
	rc = set_num_queues(&h, 4, &dw0);
	CHECK(rc == 0 && dw0 == (3u | 3u << 16), "Set Features Number of Queues 4: %03x DW0 %08x", rc, dw0);
	s = sqe_adm(NKV_ADM_SET_FEATURES, NKV_FEAT_NUM_QUEUES, 0xffffu, 0);
	rc = admin_cmd(&h, &s, NULL);
	CHECK(rc == SC(0, 2), "Number of Queues NSQR FFFFh: %03x", rc);
	rc = set_num_queues(&h, 1000, &dw0);
	CHECK(rc == 0 && dw0 == (63u | 63u << 16), "Number of Queues 1000 is capped to 64: %03x DW0 %08x", rc, dw0);
	rc = set_num_queues(&h, 4, &dw0);

	uint64_t cqb = halloc(&h, 64 * 1024), sqb = halloc(&h, 256 * 1024 + PG);
	rc = create_cq(&h, 1, 4097, cqb, true);
	CHECK(rc == SC(1, 2), "Create I/O CQ of 4097 entries (MQES 4095): %03x", rc);
	rc = create_cq(&h, 1, 1, cqb, true);
	CHECK(rc == SC(1, 2), "Create I/O CQ with QSIZE 0: %03x", rc);
	rc = create_cq(&h, 0, 8, cqb, true);
	CHECK(rc == SC(1, 1), "Create I/O CQ 0: %03x", rc);
	rc = create_cq(&h, 5, 8, cqb, true);
	CHECK(rc == SC(1, 1), "Create I/O CQ 5 with 4 granted: %03x", rc);
	rc = create_cq(&h, 1, 8, cqb, false);
	CHECK(rc == SC(0, 2), "Create I/O CQ with PC 0: %03x", rc);
	rc = create_cq(&h, 1, 8, 0xdead000000ull, true);
	CHECK(rc == SC(0, 2), "Create I/O CQ outside any region: %03x", rc);
	rc = create_cq(&h, 1, 4096, MAIN_IOVA + h.mem_len - PG, true);
	CHECK(rc == SC(0, 2), "Create I/O CQ straddling the region end: %03x", rc);
	rc = create_cq(&h, 1, 8, cqb + 0x100, true);
	CHECK(rc == SC(0, 0x13), "Create I/O CQ at an unaligned base: %03x", rc);
	rc = create_sq(&h, 1, 8, 1, sqb, true);
	CHECK(rc == SC(1, 0), "Create I/O SQ on a missing CQ: %03x", rc);
	rc = create_sq(&h, 1, 8, 0, sqb, true);
	CHECK(rc == SC(1, 0), "Create I/O SQ on the admin CQ: %03x", rc);
	rc = create_cq(&h, 1, 4096, cqb, true);
	CHECK(rc == 0, "Create I/O CQ of 4096 entries: %03x", rc);
	rc = create_cq(&h, 1, 8, cqb, true);
	CHECK(rc == SC(1, 1), "Create I/O CQ 1 twice: %03x", rc);
	rc = create_sq(&h, 1, 4097, 1, sqb, true);
	CHECK(rc == SC(1, 2), "Create I/O SQ of 4097 entries: %03x", rc);
	rc = create_sq(&h, 1, 1, 1, sqb, true);
	CHECK(rc == SC(1, 2), "Create I/O SQ with QSIZE 0: %03x", rc);
	rc = create_sq(&h, 0, 8, 1, sqb, true);
	CHECK(rc == SC(1, 1), "Create I/O SQ 0: %03x", rc);
	rc = create_sq(&h, 5, 8, 1, sqb, true);
	CHECK(rc == SC(1, 1), "Create I/O SQ 5 with 4 granted: %03x", rc);
	rc = create_sq(&h, 1, 8, 1, sqb, false);
	CHECK(rc == SC(0, 2), "Create I/O SQ with PC 0: %03x", rc);
	rc = create_sq(&h, 1, 8, 1, 0xdead000000ull, true);
	CHECK(rc == SC(0, 2), "Create I/O SQ outside any region: %03x", rc);
	rc = create_sq(&h, 1, 8, 1, sqb + 0x40, true);
	CHECK(rc == SC(0, 0x13), "Create I/O SQ at an unaligned base: %03x", rc);
	rc = create_sq(&h, 1, 4096, 1, sqb, true);
	CHECK(rc == 0, "Create I/O SQ of 4096 entries: %03x", rc);
	rc = create_sq(&h, 1, 8, 1, sqb, true);
	CHECK(rc == SC(1, 1), "Create I/O SQ 1 twice: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_CQ, 1);
	CHECK(rc == SC(1, 0x0c), "Delete I/O CQ with an SQ attached: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_SQ, 0);
	CHECK(rc == SC(1, 1), "Delete SQ 0: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_SQ, 2);
	CHECK(rc == SC(1, 1), "Delete SQ 2 that does not exist: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_SQ, 1);
	CHECK(rc == 0, "Delete I/O SQ: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_CQ, 1);
	CHECK(rc == 0, "Delete I/O CQ after its SQ: %03x", rc);
	rc = delete_q(&h, NKV_ADM_DELETE_CQ, 1);
	CHECK(rc == SC(1, 1), "Delete I/O CQ twice: %03x", rc);
	/* Two SQs on one CQ. */
	rc = create_cq(&h, 2, 16, cqb, true);
	int rc2 = create_sq(&h, 2, 8, 2, sqb, true), rc3 = create_sq(&h, 3, 8, 2, sqb + PG, true);
	CHECK(rc == 0 && rc2 == 0 && rc3 == 0, "two SQs on CQ 2: %03x %03x %03x", rc, rc2, rc3);
	CHECK(delete_q(&h, NKV_ADM_DELETE_SQ, 2) == 0 && delete_q(&h, NKV_ADM_DELETE_CQ, 2) == SC(1, 0x0c) &&
		      delete_q(&h, NKV_ADM_DELETE_SQ, 3) == 0 && delete_q(&h, NKV_ADM_DELETE_CQ, 2) == 0,
	      "CQ 2 deletable only once both SQs are gone");
	/* Unknown admin opcode; Fabrics on PCIe. */
	s = sqe_adm(0xc3, 0, 0, 0);
	CHECK(admin_cmd(&h, &s, NULL) == SC(0, 1), "unknown admin opcode: Invalid Opcode");
	s = sqe_adm(NKV_ADM_FABRICS, 0, 0, 0);
	s.nsid = 0x04; /* fctype Property Set */
	CHECK(admin_cmd(&h, &s, NULL) == SC(0, 1), "Fabrics command on the PCIe-style controller: Invalid Opcode");
	host_close(&h);

	/* The article's bug: MQES 255 means 256 entries at most, and a request for 1024 is refused. */
	if ((rc = host_setup(&h, g_s2, 4 * MIB)) != 0 || (ctrl_enable(&h) & 3) != NKV_CSTS_RDY ||
	    set_num_queues(&h, 2, NULL) != 0) {
		CHECK(false, "host setup on the MQES 255 transport: %d", rc);
		host_close(&h);
		return;
	}
	cqb = halloc(&h, 1024 * 16);
	sqb = halloc(&h, 1024 * 64);
	rc = create_cq(&h, 1, 1024, cqb, true);
	CHECK(rc == SC(1, 2), "MQES 255: Create I/O CQ of 1024 entries refused: %03x", rc);
	rc = create_cq(&h, 1, 257, cqb, true);
	CHECK(rc == SC(1, 2), "MQES 255: Create I/O CQ of 257 entries refused: %03x", rc);
	rc = create_cq(&h, 1, 256, cqb, true);
	CHECK(rc == 0, "MQES 255: Create I/O CQ of 256 entries: %03x", rc);
	rc = create_sq(&h, 1, 1024, 1, sqb, true);
	CHECK(rc == SC(1, 2), "MQES 255: Create I/O SQ of 1024 entries refused: %03x", rc);
	rc = create_sq(&h, 1, 256, 1, sqb, true);
	CHECK(rc == 0, "MQES 255: Create I/O SQ of 256 entries: %03x", rc);
	if (rc == 0) {
		struct qpair q = {.qid = 1};
		host_rings(&h, 1, sqb, 256, cqb, 256, &q.sq, &q.cq);
		kv_roundtrip(&h, &q, "mqes255", 4096, 0, false);
	}
	host_close(&h);
}

/* ---- KV I/O over PRPs -------------------------------------------------------------------------- */

static void test_kv(void)
{
	struct host h;
	struct qpair q;
	struct nkv_cqe e;
	int rc = host_ready(&h, g_s1, 64 * MIB, 2, 64, &q);

	CHECK(rc == 0, "host ready: %d", rc);
	if (rc != 0) {
		host_close(&h);
		return;
	}
	static const uint32_t sizes[] = {0, 100, 4096, 5000, 8192, MIB, 3 * MIB};
	char key[16];
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(key, sizeof(key), "kv-%u", sizes[i]);
		kv_roundtrip(&h, &q, key, sizes[i], 0, false);
		if (sizes[i] >= 4096)
			kv_roundtrip(&h, &q, key, sizes[i], 0, true);
	}
	kv_roundtrip(&h, &q, "kv-off", 100, 0x10, false);       /* PRP1 with an offset, one page */
	kv_roundtrip(&h, &q, "kv-off2", 6000, 0xf00, false);    /* offset, two pages */
	kv_roundtrip(&h, &q, "kv-off3", 6000, 0xf00, true);
	kv_roundtrip(&h, &q, "kv-offl", MIB, 0x204, false);     /* offset, PRP list */
	kv_roundtrip(&h, &q, "kv-offl", MIB + 3, 0x204, true);

	/* A PRP list starting 16 bytes before its page end: one data entry, then the chain (B.5). */
	uint64_t data = halloc(&h, 8 * PG), l1 = halloc(&h, PG), l2 = halloc(&h, PG);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t at = pass * 4 * PG; /* pass 0 stores from pages 0-3, pass 1 retrieves into 4-7 */
		nkv_put64((uint8_t *)hva(&h, l1) + 0xff0, data + at + PG);
		nkv_put64((uint8_t *)hva(&h, l1) + 0xff8, l2);
		nkv_put64((uint8_t *)hva(&h, l2), data + at + 2 * PG);
		nkv_put64((uint8_t *)hva(&h, l2) + 8, data + at + 3 * PG);
		uint8_t *v = hva(&h, data + at);
		for (unsigned i = 0; i < 4 * PG; i++)
			v[i] = pass ? 0 : pattern(77, i);
		struct nkv_sqe sl = sqe_kv(pass ? NKV_KV_RETRIEVE : NKV_KV_STORE, 1, "kv-list-off", 4 * PG);
		set_prps(&sl, data + at, l1 + 0xff0);
		rc = io_cmd(&h, &q, &sl, &e);
		CHECK(rc == 0, "%s through a PRP list at page offset FF0h: %03x", pass ? "Retrieve" : "Store", rc);
	}
	uint8_t *v0 = hva(&h, data), *v1 = hva(&h, data + 4 * PG);
	CHECK(memcmp(v0, v1, 4 * PG) == 0, "the value through an offset PRP list reads back intact");

	/* A buffer across two adjacent regions: each page is valid, so the command is too. */
	uint8_t *adj;
	int afd = mem_create(4 * PG, true, &adj);
	rc = reg_mem(&h, afd, MAIN_IOVA + h.mem_len, 4 * PG, 0, 0);
	CHECK(rc == 0, "REG of a region adjacent to the main region: %d", rc);
	uint64_t last = MAIN_IOVA + h.mem_len - PG;
	uint8_t *lastva = hva(&h, last);
	for (unsigned i = 0; i < PG; i++) {
		lastva[i] = pattern(88, i);
		adj[i] = pattern(88, i + PG);
	}
	struct nkv_sqe sa = sqe_kv(NKV_KV_STORE, 1, "kv-adjacent", 2 * PG);
	set_prps(&sa, last, MAIN_IOVA + h.mem_len);
	rc = io_cmd(&h, &q, &sa, NULL);
	CHECK(rc == 0, "Store from pages in two adjacent regions: %03x", rc);
	memset(lastva, 0, PG);
	memset(adj, 0, PG);
	sa.opc = NKV_KV_RETRIEVE;
	rc = io_cmd(&h, &q, &sa, &e);
	bool same = rc == 0;
	for (unsigned i = 0; i < PG && same; i++)
		same = lastva[i] == pattern(88, i) && adj[i] == pattern(88, i + PG);
	CHECK(rc == 0 && same, "Retrieve into pages in two adjacent regions: %03x, data %s", rc,
	      same ? "intact" : "differs");
	munmap(adj, 4 * PG);
	close(afd);

	/* Retrieve into a smaller buffer: truncated, DW0 the full size. */
	struct dbuf d = {0};
	dbuf_alloc(&h, &d, 1000, 0, false);
	rc = kv_io(&h, &q, NKV_KV_RETRIEVE, 1, "kv-4096", &d, &e);
	CHECK(rc == 0 && nkv_get32(&e.dw0) == 4096 && nkv_get32(&e.dw1) == 1000 &&
		      dbuf_check(&h, &d, 4096 + 7, 1000) < 0, /* seed: scattered */
	      "Retrieve 4096 B into 1000 B: %03x DW0 %u DW1 %u", rc, nkv_get32(&e.dw0), nkv_get32(&e.dw1));
	dbuf_free(&d);

	struct nkv_sqe s0 = sqe_kv(NKV_KV_RETRIEVE, 1, "kv-4096", 0);
	rc = io_cmd(&h, &q, &s0, &e);
	CHECK(rc == 0 && nkv_get32(&e.dw0) == 4096 && nkv_get32(&e.dw1) == 0,
	      "Retrieve with a 0-byte buffer: %03x DW0 %u DW1 %u", rc, nkv_get32(&e.dw0), nkv_get32(&e.dw1));

	/* Read-only namespace. */
	dbuf_alloc(&h, &d, 100, 0, false);
	rc = kv_io(&h, &q, NKV_KV_STORE, 2, "ro", &d, NULL);
	CHECK(rc == SC(0, 0x20), "Store to the read-only NSID 2: %03x", rc);
	rc = kv_io(&h, &q, NKV_KV_RETRIEVE, 2, "ro", &d, NULL);
	CHECK(rc == SC(0, 0x87), "Retrieve from NSID 2 of an absent key: %03x", rc);
	rc = kv_io(&h, &q, NKV_KV_STORE, 3, "ro", &d, NULL);
	CHECK(rc == SC(0, 0x0b), "Store to NSID 3 (none): %03x", rc);
	dbuf_free(&d);

	/* List from the start. */
	dbuf_alloc(&h, &d, 4096, 0, false);
	dbuf_set(&h, &d, 0xee);
	struct nkv_sqe s = sqe_kv(NKV_KV_LIST, 1, "", 4096);
	dbuf_prps(&h, &d, &s);
	rc = io_cmd(&h, &q, &s, NULL);
	const uint8_t *l = hva(&h, d.iova[0]);
	uint32_t nrk = nkv_get32(l), at = 4;
	bool seen0 = false, seen1m = false, ok = true;
	for (uint32_t i = 0; i < nrk && ok; i++) {
		unsigned kl = nkv_get16(l + at);
		if (kl == 0 || kl > 16 || at + nkv_list_entry_size(kl) > 4096) {
			ok = false;
			break;
		}
		seen0 |= kl == 4 && memcmp(l + at + 2, "kv-0", 4) == 0;
		seen1m |= kl == 10 && memcmp(l + at + 2, "kv-1048576", 10) == 0;
		at += nkv_list_entry_size(kl);
	}
	CHECK(rc == 0 && ok && nrk >= 8 && seen0 && seen1m, "List: %03x, NRK %u, entries %s, kv-0 %d, kv-1048576 %d",
	      rc, nrk, ok ? "well formed" : "malformed", seen0, seen1m);
	dbuf_free(&d);

	/* Exist / Delete. */
	rc = kv_io(&h, &q, NKV_KV_EXIST, 1, "kv-100", NULL, NULL);
	CHECK(rc == 0, "Exist: %03x", rc);
	rc = kv_io(&h, &q, NKV_KV_DELETE, 1, "kv-100", NULL, NULL);
	CHECK(rc == 0, "Delete: %03x", rc);
	rc = kv_io(&h, &q, NKV_KV_EXIST, 1, "kv-100", NULL, NULL);
	CHECK(rc == SC(0, 0x87), "Exist after Delete: %03x", rc);
	rc = kv_io(&h, &q, NKV_KV_DELETE, 1, "kv-100", NULL, NULL);
	CHECK(rc == SC(0, 0x87), "Delete of an absent key: %03x", rc);
	dbuf_alloc(&h, &d, 100, 0, false);
	rc = kv_io(&h, &q, NKV_KV_RETRIEVE, 1, "kv-100", &d, NULL);
	CHECK(rc == SC(0, 0x87), "Retrieve after Delete: %03x", rc);
	dbuf_free(&d);
	host_close(&h);
}

/* ---- queues -------------------------------------------------------------------------------------- */

/**
 * Run @n Exist commands through @q, @batch at a time (all in flight at once), checking CID, status,
 * phase and SQHD of every CQE. @return commands that completed correctly.
 */
static unsigned run_laps(struct host *h, struct qpair *q, unsigned n, unsigned batch)
{
	unsigned done = 0, bad = 0;
	uint16_t first = 0;

	while (done < n) {
		unsigned k = 0;
		for (; k < batch && done + k < n; k++) {
			struct nkv_sqe s = sqe_kv(NKV_KV_EXIST, 1, "laps", 0);
			s.cid = ++h->cid;
			if (k == 0)
				first = s.cid;
			if (nkv_sq_put(&q->sq, &s) < 0)
				break;
		}
		nkv_sq_ring(&q->sq);
		for (unsigned j = 0; j < k; j++) {
			struct nkv_cqe e;
			if (!wait_cqe(&q->cq, &q->sq, &e, TMO_MS, true)) {
				CHECK(false, "lap: CQE %u of %u timed out (qid %u)", done + j, n, q->qid);
				return done;
			}
			if (cqe_code(&e) != 0 || (uint16_t)(e.cid - first) >= k || nkv_get16(&e.sqid) != q->qid)
				bad++;
		}
		done += k;
	}
	EXPECT(bad == 0, "%u bad CQEs (status, CID or SQID) on qid %u", bad, q->qid);
	return done - bad;
}

/** Queue pair @qid with an 8-entry SQ on a 2-entry CQ, and 5 Exist commands submitted. */
static int full_cq_start(struct host *h, uint16_t qid, struct qpair *q)
{
	uint64_t sqb = halloc(h, 8 * 64), cqb = halloc(h, 2 * 16);
	int rc = create_cq(h, qid, 2, cqb, true);

	if (rc == 0 && (rc = create_sq(h, qid, 8, qid, sqb, true)) != 0)
		delete_q(h, NKV_ADM_DELETE_CQ, qid);
	if (rc != 0)
		return rc;
	q->qid = qid;
	host_rings(h, qid, sqb, 8, cqb, 2, &q->sq, &q->cq);
	for (int i = 0; i < 5; i++) {
		struct nkv_sqe s = sqe_kv(NKV_KV_EXIST, 1, "laps", 0);
		s.cid = ++h->cid;
		nkv_sq_put(&q->sq, &s);
	}
	nkv_sq_ring(&q->sq);
	return 0;
}

static void test_queues(void)
{
	struct host h;
	struct qpair q2, q4k, qf;
	struct nkv_sqe s;
	int rc = host_ready(&h, g_s1, 16 * MIB, 17, 0, NULL);

	CHECK(rc == 0, "host ready: %d", rc);
	if (rc != 0) {
		host_close(&h);
		return;
	}
	struct dbuf d = {0};
	dbuf_alloc(&h, &d, 16, 0, false);
	rc = create_qpair(&h, 1, 2, 2, &q2);
	CHECK(rc == 0, "2-entry queue pair: %03x", rc);
	if (rc == 0) {
		rc = kv_io(&h, &q2, NKV_KV_STORE, 1, "laps", &d, NULL);
		CHECK(rc == 0, "Store: %03x", rc);
		s = sqe_kv(NKV_KV_EXIST, 1, "laps", 0);
		CHECK(nkv_sq_put(&q2.sq, &s) >= 0 && nkv_sq_put(&q2.sq, &s) < 0, "a 2-entry SQ takes 1 command");
		q2.sq.tail = q2.sq.head; /* take it back, unsubmitted */
		unsigned ok = run_laps(&h, &q2, 500, 1);
		CHECK(ok == 500, "2-entry queue: %u of 500 commands (250 laps)", ok);
		CHECK(q2.cq.phase == 1 && q2.cq.head == 1, "2-entry CQ after 501 CQEs (250 wraps): head %u phase %u",
		      q2.cq.head, q2.cq.phase);
	}
	rc = create_qpair(&h, 2, 4096, 4096, &q4k);
	CHECK(rc == 0, "4096-entry queue pair: %03x", rc);
	if (rc == 0) {
		unsigned n = 0;
		s = sqe_kv(NKV_KV_EXIST, 1, "laps", 0);
		while (nkv_sq_put(&q4k.sq, &s) >= 0)
			n++;
		CHECK(n == 4095, "a 4096-entry SQ takes %u commands (want 4095)", n);
		q4k.sq.tail = q4k.sq.head;
		unsigned ok = run_laps(&h, &q4k, 3 * 4095 + 100, 4095);
		CHECK(ok == 3 * 4095 + 100, "4096-entry queue: %u of %u commands over 3 laps", ok, 3 * 4095 + 100);
		ok = run_laps(&h, &q4k, 2000, 7);
		CHECK(ok == 2000, "4096-entry queue, 7 at a time: %u of 2000", ok);
	}

	/* A 2-entry CQ behind an 8-entry SQ: one CQE at a time until the head doorbell moves. */
	rc = full_cq_start(&h, 3, &qf);
	CHECK(rc == 0, "8-entry SQ on a 2-entry CQ: %03x", rc);
	if (rc == 0) {
		unsigned got = 0;
		struct nkv_cqe e;
		for (int round = 0; round < 5; round++) {
			if (!wait_cqe(&qf.cq, &qf.sq, &e, TMO_MS, false)) {
				CHECK(false, "full CQ: CQE %d never came", round);
				break;
			}
			got++;
			EXPECT(cqe_code(&e) == 0, "full CQ: status %03x", cqe_code(&e));
			usleep(100 * 1000); /* the controller has had time to post more, if it would */
			struct nkv_cqe peek;
			EXPECT(!nkv_cq_peek(&qf.cq, &peek), "full CQ: a CQE posted before the head doorbell moved (round %d)",
			       round);
			/* the unconsumed slot was not overwritten either */
			volatile struct nkv_cqe *prev = &qf.cq.ring[(qf.cq.head + 1) % 2];
			EXPECT(prev->cid == e.cid, "full CQ: the consumed-not-released entry was overwritten");
			nkv_cq_ring(&qf.cq);
		}
		CHECK(got == 5, "full CQ: 5 CQEs one at a time (%u)", got);
		CHECK(delete_q(&h, NKV_ADM_DELETE_SQ, 3) == 0 && delete_q(&h, NKV_ADM_DELETE_CQ, 3) == 0,
		      "delete the full-CQ queue pair");
	}
	/* Delete the SQ while completions wait for CQ room (they are dropped), then its CQ. */
	rc = full_cq_start(&h, 3, &qf);
	if (rc == 0) {
		struct nkv_cqe e;
		CHECK(wait_cqe(&qf.cq, &qf.sq, &e, TMO_MS, false), "full CQ: first CQE");
		usleep(50 * 1000);
		rc = delete_q(&h, NKV_ADM_DELETE_SQ, 3);
		int rc2 = delete_q(&h, NKV_ADM_DELETE_CQ, 3);
		CHECK(rc == 0 && rc2 == 0, "Delete SQ with completions waiting for CQ room, then its CQ: %03x %03x", rc,
		      rc2);
		rc = create_qpair(&h, 3, 8, 8, &qf);
		CHECK(rc == 0, "queue pair 3 again: %03x", rc);
		if (rc == 0)
			kv_roundtrip(&h, &qf, "after-full", 200, 0, false);
		delete_q(&h, NKV_ADM_DELETE_SQ, 3);
		delete_q(&h, NKV_ADM_DELETE_CQ, 3);
	} else {
		CHECK(false, "full CQ queue pair again: %03x", rc);
	}

	/* 16 queue pairs at once (QIDs 2..17 after freeing 1 and 2). */
	delete_q(&h, NKV_ADM_DELETE_SQ, 1);
	delete_q(&h, NKV_ADM_DELETE_CQ, 1);
	delete_q(&h, NKV_ADM_DELETE_SQ, 2);
	delete_q(&h, NKV_ADM_DELETE_CQ, 2);
	struct qpair qs[16];
	struct dbuf bufs[16], rbufs[16];
	bool up = true;
	for (unsigned i = 0; i < 16 && up; i++) {
		rc = create_qpair(&h, (uint16_t)(i + 2), 16, 16, &qs[i]);
		up = rc == 0;
		CHECK(up, "queue pair %u of 16: %03x", i + 2, rc);
	}
	if (up) {
		char key[16];
		for (int pass = 0; pass < 2; pass++) {
			for (unsigned i = 0; i < 16; i++) {
				struct dbuf *b = pass ? &rbufs[i] : &bufs[i];
				dbuf_alloc(&h, b, 12288, 0, i & 1);
				if (pass)
					dbuf_set(&h, b, 0);
				else
					dbuf_fill(&h, b, 100 + i);
				snprintf(key, sizeof(key), "multi-%u", i);
				for (unsigned j = 0; j < 4; j++) { /* 4 in flight per queue */
					s = sqe_kv(pass ? NKV_KV_RETRIEVE : NKV_KV_STORE, 1, key, b->len);
					dbuf_prps(&h, b, &s);
					s.cid = ++h.cid;
					nkv_sq_put(&qs[i].sq, &s);
				}
				nkv_sq_ring(&qs[i].sq);
			}
			unsigned good = 0;
			for (unsigned i = 0; i < 16; i++)
				for (unsigned j = 0; j < 4; j++) {
					struct nkv_cqe e;
					if (wait_cqe(&qs[i].cq, &qs[i].sq, &e, TMO_MS, true) && cqe_code(&e) == 0 &&
					    nkv_get16(&e.sqid) == i + 2)
						good++;
				}
			CHECK(good == 64, "16 queue pairs x 4 %s in flight: %u of 64 good", pass ? "Retrieves" : "Stores",
			      good);
		}
		unsigned same = 0;
		for (unsigned i = 0; i < 16; i++) {
			same += dbuf_check(&h, &rbufs[i], 100 + i, 12288) < 0;
			dbuf_free(&bufs[i]);
			dbuf_free(&rbufs[i]);
		}
		CHECK(same == 16, "16 queue pairs: %u of 16 values read back intact", same);
	}
	/* Reset (CC.EN = 0) while completions wait for CQ room; then the controller works again. */
	delete_q(&h, NKV_ADM_DELETE_SQ, 3);
	delete_q(&h, NKV_ADM_DELETE_CQ, 3);
	rc = full_cq_start(&h, 3, &qf);
	if (rc == 0) {
		struct nkv_cqe e;
		CHECK(wait_cqe(&qf.cq, &qf.sq, &e, TMO_MS, false), "full CQ: first CQE");
		usleep(50 * 1000);
		uint32_t csts = ctrl_disable(&h);
		CHECK((csts & 3) == 0, "EN 0 with completions waiting for CQ room: CSTS %x", csts);
		csts = ctrl_enable(&h);
		rc = (csts & 3) == NKV_CSTS_RDY ? set_num_queues(&h, 2, NULL) : -EIO;
		rc = rc ? rc : create_qpair(&h, 1, 8, 8, &qf);
		CHECK(rc == 0, "re-enable and a queue pair after that reset: %03x", rc);
		if (rc == 0)
			kv_roundtrip(&h, &qf, "after-reset", 300, 0, true);
	} else {
		CHECK(false, "full CQ queue pair for the reset: %03x", rc);
	}
	dbuf_free(&d);
	host_close(&h);
}

/* ---- malicious host ------------------------------------------------------------------------------ */

/** A Store or Retrieve of @len bytes with PRP1/PRP2 as given. @return the status. */
static int raw_io(struct host *h, struct qpair *q, uint8_t opc, uint32_t len, uint64_t prp1, uint64_t prp2)
{
	struct nkv_sqe s = sqe_kv(opc, 1, opc == NKV_KV_STORE ? "evil-w" : BIG_KEY, len);
	set_prps(&s, prp1, prp2);
	return io_cmd(h, q, &s, NULL);
}

static void test_malicious(void)
{
	struct host h;
	struct qpair q;
	int rc = host_ready(&h, g_s1, 16 * MIB, 2, 64, &q);

	CHECK(rc == 0, "host ready: %d", rc);
	if (rc != 0) {
		host_close(&h);
		return;
	}
	uint64_t pg = halloc(&h, 4 * PG), end = MAIN_IOVA + h.mem_len;
	uint64_t far = 0xdead000000ull;

	rc = raw_io(&h, &q, NKV_KV_STORE, 4096, far, 0);
	CHECK(rc == SC(0, 4), "Store with PRP1 outside any region: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_RETRIEVE, 4096, far, 0);
	CHECK(rc == SC(0, 4), "Retrieve with PRP1 outside any region: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 4096, end - 2048, end);
	CHECK(rc == SC(0, 4), "Store straddling the region end (PRP2 past it): %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_RETRIEVE, 4096, end - 2048, end);
	CHECK(rc == SC(0, 4), "Retrieve straddling the region end (PRP2 past it): %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 8192, pg, far);
	CHECK(rc == SC(0, 4), "Store with PRP2 outside any region: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 100, pg + 2, 0);
	CHECK(rc == SC(0, 0x13), "PRP1 not dword aligned: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 8192, pg, pg + PG + 8);
	CHECK(rc == SC(0, 0x13), "PRP2 not page aligned (2 pages): %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 16384, pg, far);
	CHECK(rc == SC(0, 4), "PRP list pointer outside any region: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 16384, pg, end - 8);
	CHECK(rc == SC(0, 4), "PRP list running off the region end: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 16384, pg, pg + 4);
	CHECK(rc == SC(0, 0x13), "PRP list pointer not qword aligned: %03x", rc);
	uint64_t list = halloc(&h, PG);
	uint8_t *lp = hva(&h, list);
	nkv_put64(lp, pg + PG);
	nkv_put64(lp + 8, pg + 2 * PG + 0x10); /* misaligned entry */
	nkv_put64(lp + 16, pg + 3 * PG);
	rc = raw_io(&h, &q, NKV_KV_STORE, 16384, pg, list);
	CHECK(rc == SC(0, 0x13), "a misaligned PRP list entry: %03x", rc);
	nkv_put64(lp + 8, far);
	rc = raw_io(&h, &q, NKV_KV_STORE, 16384, pg, list);
	CHECK(rc == SC(0, 4), "a PRP list entry outside any region: %03x", rc);
	nkv_put64(lp + 8, pg + 2 * PG);
	rc = raw_io(&h, &q, NKV_KV_STORE, 16384, pg, list);
	CHECK(rc == 0, "the same list, repaired: %03x", rc);

	/* A list whose chain entry points back at its own page: bounded by the length. */
	uint64_t data = halloc(&h, 8 * PG);
	for (unsigned i = 0; i < PG / 8; i++)
		nkv_put64(lp + i * 8, data + (i % 8) * PG);
	nkv_put64(lp + PG - 8, list); /* slot 511: chain to itself */
	uint64_t t0 = now_ms();
	rc = raw_io(&h, &q, NKV_KV_STORE, 3 * MIB, data, list);
	CHECK(rc != ST_TIMEOUT && now_ms() - t0 < TMO_MS, "self-chained PRP list (Store 3 MiB): %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_RETRIEVE, 3 * MIB, data, list);
	CHECK(rc != ST_TIMEOUT, "self-chained PRP list (Retrieve 3 MiB): %03x", rc);
	nkv_put64(lp + PG - 8, far); /* chain to nowhere */
	rc = raw_io(&h, &q, NKV_KV_STORE, 3 * MIB, data, list);
	CHECK(rc == SC(0, 4), "PRP list chaining outside any region: %03x", rc);
	nkv_put64(lp + PG - 8, list + 4); /* misaligned chain */
	rc = raw_io(&h, &q, NKV_KV_STORE, 3 * MIB, data, list);
	CHECK(rc == SC(0, 0x13), "PRP list chain pointer misaligned: %03x", rc);

	/* A read-only region: the controller may read it, never write it. */
	uint8_t *rova;
	int rofd = mem_create(16 * PG, true, &rova);
	uint64_t ro = 0x7000000000ull;
	rc = reg_mem(&h, rofd, ro, 16 * PG, 0, NKV_SHM_REG_READONLY);
	CHECK(rc == 0, "REG read-only: %d", rc);
	memset(rova, 0x5a, 16 * PG);
	rc = raw_io(&h, &q, NKV_KV_STORE, 4096, ro, 0);
	CHECK(rc == 0, "Store from a read-only region: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_STORE, 8192, ro, data); /* read-only + a normal page: bounce */
	CHECK(rc == 0, "Store from a read-only and a normal page: %03x", rc);
	memset(rova, 0x5a, 16 * PG);
	rc = raw_io(&h, &q, NKV_KV_RETRIEVE, 4096, ro, 0);
	CHECK(rc == SC(0, 4), "Retrieve into a read-only region: %03x", rc);
	rc = raw_io(&h, &q, NKV_KV_RETRIEVE, 8192, data, ro);
	CHECK(rc == SC(0, 4), "Retrieve with PRP2 in a read-only region: %03x", rc);
	bool intact = true;
	for (unsigned i = 0; i < 16 * PG; i++)
		intact &= rova[i] == 0x5a;
	CHECK(intact, "the read-only region was not written");
	uint64_t rsq = 0x7000000000ull;
	rc = create_cq(&h, 2, 4, rsq, true);
	CHECK(rc == SC(0, 2), "Create I/O CQ in a read-only region: %03x", rc);

	/* PSDT != 0 (SGL) and FUSE on the PCIe-style transport. */
	struct nkv_sqe s = sqe_kv(NKV_KV_STORE, 1, "evil-w", 100);
	set_prps(&s, pg, 0);
	s.flags = NKV_SQE_PSDT_SGL;
	rc = io_cmd(&h, &q, &s, NULL);
	CHECK(rc == SC(0, 2), "PSDT 01b: %03x", rc);
	s.flags = 0x80;
	rc = io_cmd(&h, &q, &s, NULL);
	CHECK(rc == SC(0, 2), "PSDT 10b: %03x", rc);
	s.flags = 1;
	rc = io_cmd(&h, &q, &s, NULL);
	CHECK(rc == SC(0, 2), "FUSE 01b: %03x", rc);

	/* Garbage SQEs: each completes with some status and the controller lives on. */
	srand(12345);
	unsigned completed = 0, total = 600;
	for (unsigned n = 0; n < total; n += 32) {
		unsigned k = total - n < 32 ? total - n : 32;
		for (unsigned j = 0; j < k; j++) {
			uint8_t *b = (uint8_t *)&s;
			for (unsigned i = 0; i < sizeof(s); i++)
				b[i] = (uint8_t)rand();
			if (j % 2) { /* half of them a KV opcode on NSID 1, to get past the first checks */
				static const uint8_t ops[] = {1, 2, 6, 0x10, 0x14, 0};
				s.opc = ops[rand() % 6];
				nkv_put32(&s.nsid, 1);
				if (j % 4 == 1)
					s.flags = 0;
				if (j % 8 == 1)
					nkv_put32(&s.cdw10, (uint32_t)rand() % (2 * MIB));
			}
			s.cid = ++h.cid;
			nkv_sq_put(&q.sq, &s);
		}
		nkv_sq_ring(&q.sq);
		for (unsigned j = 0; j < k; j++) {
			struct nkv_cqe e;
			if (!wait_cqe(&q.cq, &q.sq, &e, TMO_MS, true))
				break;
			completed++;
		}
	}
	CHECK(completed == total, "garbage SQEs: %u of %u completed", completed, total);
	CHECK((rd32(&h, NKV_REG_CSTS) & 3) == NKV_CSTS_RDY, "garbage SQEs: controller still ready");
	kv_roundtrip(&h, &q, "after-garbage", 5000, 0, false);

	/* A doorbell beyond the queue size is fatal for the controller. */
	wr32(&h, nkv_db_sq_tail(1), 64 + 5);
	uint32_t csts = wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
	CHECK(csts & NKV_CSTS_CFS, "SQ tail doorbell beyond the queue size: CSTS %x", csts);
	munmap(rova, 16 * PG);
	close(rofd);
	host_close(&h);
	fresh_check(g_s1, "an SQ doorbell beyond the queue");

	rc = host_ready(&h, g_s1, 4 * MIB, 2, 8, &q);
	if (rc == 0) {
		wr32(&h, nkv_db_cq_head(1), 1000);
		s = sqe_kv(NKV_KV_EXIST, 1, "laps", 0);
		submit(&h, &q.sq, &s);
		csts = wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
		CHECK(csts & NKV_CSTS_CFS, "CQ head doorbell beyond the queue size: CSTS %x", csts);
		/* A reset recovers the controller. */
		ctrl_disable(&h);
		csts = ctrl_enable(&h);
		CHECK((csts & 3) == NKV_CSTS_RDY, "reset after CFS: CSTS %x", csts);
		rc = set_num_queues(&h, 2, NULL);
		rc = rc ? rc : create_qpair(&h, 1, 8, 8, &q);
		CHECK(rc == 0, "queues after the reset: %03x", rc);
		if (rc == 0)
			kv_roundtrip(&h, &q, "after-cfs", 300, 0, false);
		wr32(&h, nkv_db_sq_tail(0), 0xffff);
		csts = wait_csts(&h, NKV_CSTS_CFS, NKV_CSTS_CFS, TMO_MS);
		CHECK(csts & NKV_CSTS_CFS, "admin SQ tail doorbell beyond the queue size: CSTS %x", csts);
	} else {
		CHECK(false, "host ready: %d", rc);
	}
	host_close(&h);
	fresh_check(g_s1, "a CQ doorbell beyond the queue");

	/* Host memory deregistered... never while in use; and a host that leaves with queues live. */
	rc = host_ready(&h, g_s1, 4 * MIB, 2, 8, &q);
	if (rc == 0) {
		s = sqe_kv(NKV_KV_EXIST, 1, "laps", 0);
		for (int i = 0; i < 7; i++)
			nkv_sq_put(&q.sq, &s);
		nkv_sq_ring(&q.sq);
	}
	host_close(&h); /* closes with commands in flight and CQEs unreaped */
	fresh_check(g_s1, "a host closing with commands in flight");
}

/* ---- host death ---------------------------------------------------------------------------------- */

struct child {
	pid_t pid;
	int go, ready; /* parent's ends */
};

/* The child: wait for the go, then connect, start 32 Retrieves of 1 MiB, report, and die. */
static void child_main(int go, int ready, bool wait_kill)
{
	struct host h;
	struct qpair q;
	struct pollfd pf = {.fd = go, .events = POLLIN};
	char c = 0;

	alarm(60);
	if (poll(&pf, 1, 60000) <= 0 || read(go, &c, 1) != 1 || c != 'g')
		_exit(2);
	if (host_ready(&h, g_s1, 72 * MIB, 1, 64, &q) != 0)
		_exit(3);
	uint64_t base = halloc(&h, 64 * MIB);
	if (!base)
		_exit(4);
	for (unsigned i = 0; i < 32; i++) { /* even: contiguous (zero copy); odd: scattered (bounce) */
		struct nkv_sqe s = sqe_kv(NKV_KV_RETRIEVE, 1, BIG_KEY, MIB);
		struct dbuf d = {.len = MIB, .npages = 256, .iova = NULL};
		uint64_t pages[256];
		for (unsigned p = 0; p < 256; p++)
			pages[p] = base + (uint64_t)i * 2 * MIB + (i & 1 ? 2ull * (255 - p) : p) * PG;
		d.iova = pages;
		dbuf_prps(&h, &d, &s);
		s.cid = (uint16_t)i;
		nkv_sq_put(&q.sq, &s);
	}
	nkv_sq_ring(&q.sq);
	c = 'r';
	if (write(ready, &c, 1) != 1)
		_exit(5);
	if (wait_kill)
		for (;;)
			pause();
	_exit(0);
}

static bool child_spawn(struct child *k, bool wait_kill)
{
	int go[2], ready[2];

	if (pipe(go) < 0 || pipe(ready) < 0)
		return false;
	k->pid = fork();
	if (k->pid < 0)
		return false;
	if (k->pid == 0) {
		close(go[1]);
		close(ready[0]);
		child_main(go[0], ready[1], wait_kill);
		_exit(9);
	}
	close(go[0]);
	close(ready[1]);
	k->go = go[1];
	k->ready = ready[0];
	return true;
}

/** Release the child, wait until its commands are out, kill it (@kill) or let it exit. */
static void child_run(struct child *k, bool kill_it)
{
	char c = 'g';
	struct pollfd pf = {.fd = k->ready, .events = POLLIN};
	int status = 0;

	CHECK(write(k->go, &c, 1) == 1, "child go");
	bool ready = poll(&pf, 1, 10000) == 1 && read(k->ready, &c, 1) == 1 && c == 'r';
	CHECK(ready, "child %s: connected and started 32 Retrieves of 1 MiB", kill_it ? "(SIGKILL)" : "(_exit)");
	if (kill_it || !ready)
		kill(k->pid, SIGKILL);
	uint64_t end = now_ms() + 10000;
	pid_t w;
	while ((w = waitpid(k->pid, &status, WNOHANG)) == 0 && now_ms() < end)
		usleep(1000);
	if (w == 0) {
		kill(k->pid, SIGKILL);
		waitpid(k->pid, &status, 0);
	}
	CHECK(w == k->pid, "child reaped");
	close(k->go);
	close(k->ready);
}

static void test_host_death(struct child *kids)
{
	struct host h;
	struct qpair q;
	int rc = host_ready(&h, g_s1, 32 * MIB, 1, 8, &q);

	CHECK(rc == 0, "host ready: %d", rc);
	if (rc != 0) {
		host_close(&h);
		return;
	}
	kv_roundtrip(&h, &q, BIG_KEY, MIB, 0, false);
	child_run(&kids[0], false);
	kv_roundtrip(&h, &q, "survivor-1", 64 * 1024, 0, true);
	child_run(&kids[1], true);
	kv_roundtrip(&h, &q, "survivor-2", MIB, 0, false);
	usleep(200 * 1000); /* let the target reap both controllers */
	kv_roundtrip(&h, &q, "survivor-3", 3 * MIB, 0, true);
	host_close(&h);
	fresh_check(g_s1, "two hosts dying mid-I/O");
}

/* ---- main ------------------------------------------------------------------------------------------ */

int main(void)
{
	struct nkv_target *tgt = NULL;
	struct nkv_subsys *ss, *acl;
	struct nkv_shm *shm1 = NULL, *shm2 = NULL;
	struct child kids[2];
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	snprintf(g_dir, sizeof(g_dir), "/tmp/shm_proto.XXXXXX");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(g_s1, sizeof(g_s1), "%s/s1.sock", g_dir);
	snprintf(g_s2, sizeof(g_s2), "%s/s2.sock", g_dir);
	snprintf(g_acl, sizeof(g_acl), "%s/acl.sock", g_dir);
	/* Forked while single-threaded: the children never share the target's threads or locks. */
	if (!child_spawn(&kids[0], false) || !child_spawn(&kids[1], true)) {
		perror("fork");
		return 1;
	}

	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_ns_conf ns1 = {.nsid = 1, .rados_ns = "shm-proto"};
	struct nkv_ns_conf ns2 = {.nsid = 2, .rados_ns = "shm-proto-ro", .read_only = true};
	struct nkv_ns_conf ns3 = {.nsid = 1, .rados_ns = "shm-proto-acl"};
	struct nkv_shm_conf small = {.mqes = 255, .max_regions = SMALL_MAX_REGIONS, .max_reg_bytes = SMALL_MAX_BYTES};
	if ((rc = nkv_target_create(&bc, &tgt)) < 0 || (rc = nkv_subsys_add(tgt, SUBNQN, "nkv", &ss)) < 0 ||
	    (rc = nkv_ns_add(ss, &ns1)) < 0 || (rc = nkv_ns_add(ss, &ns2)) < 0 ||
	    (rc = nkv_subsys_add(tgt, ACLNQN, "nkv", &acl)) < 0 || (rc = nkv_ns_add(acl, &ns3)) < 0 ||
	    (rc = nkv_subsys_allow_host(acl, GOODHOST)) < 0 || (rc = nkv_shm_create(tgt, NULL, &shm1)) < 0 ||
	    (rc = nkv_shm_create(tgt, &small, &shm2)) < 0 || (rc = nkv_shm_listen(shm1, SUBNQN, g_s1)) < 0 ||
	    (rc = nkv_shm_listen(shm1, ACLNQN, g_acl)) < 0 || (rc = nkv_shm_listen(shm2, SUBNQN, g_s2)) < 0) {
		fprintf(stderr, "shm_proto: target setup failed: %s\n", strerror(-rc));
		kill(kids[0].pid, SIGKILL);
		kill(kids[1].pid, SIGKILL);
		return 1;
	}

	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {
		{"hello", test_hello},     {"reg_cuda", test_reg_cuda}, {"registers", test_registers}, {"admin", test_admin},
		{"kv", test_kv},           {"queues", test_queues},       {"malicious", test_malicious},
	};
	for (unsigned i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		unsigned f0 = h_fail;
		uint64_t t0 = now_ms();
		groups[i].fn();
		printf("%-10s %s (%llu ms)\n", groups[i].name, h_fail == f0 ? "ok" : "FAILED",
		       (unsigned long long)(now_ms() - t0));
	}
	unsigned f0 = h_fail;
	test_host_death(kids);
	printf("%-10s %s\n", "death", h_fail == f0 ? "ok" : "FAILED");
	fresh_check(g_s2, "everything (MQES 255 transport)");

	nkv_shm_destroy(shm1, 1000);
	nkv_shm_destroy(shm2, 1000);
	nkv_target_destroy(tgt);
	unlink(g_s1);
	unlink(g_s2);
	unlink(g_acl);
	rmdir(g_dir);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
