/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_shm.c - libFuzzer target playing a malicious host against the shared-memory transport's
 * controller (src/transport/shm.c, shm_data.c). Everything runs in this thread: the transport's
 * testing hooks (shm_int.h) let the harness serve the control socket and run poller passes itself,
 * so a run is deterministic and an input costs a fresh controller, not a sleep.
 *
 * One target (mem backend) serves every input; its namespaces are emptied after each, so an input
 * runs the same alone as in a long run. Each input gets a fresh transport (MQES 63, 4 I/O queue
 * pairs, 8 regions, 32 commands in flight, bounce budgets of 128 KiB / 64 KiB so that scattered
 * buffers run into them) and one host connection on a socketpair. The host owns three memfds,
 * zeroed for every input: A (64 pages, sealed, "main memory"), B (16 pages, sealed) and C (4
 * pages, not sealed: REG must refuse it).
 *
 * Input: a prologue byte, then operations until the input ends (a truncated one is dropped).
 *   prologue  bit 0  the harness says HELLO (else only the fuzzer's raw messages can)
 *             bit 1  REG A at IOVA_A (read-write)
 *             bit 2  admin queues: ASQ at A page 0 (32 entries), ACQ at A page 1 (32), CC.EN = 1
 *             bit 3  Set Features Number of Queues (4/4), I/O CQ 1 at A page 2 and SQ 1 at A page 3
 *                    (64 entries each), the admin CQEs reaped
 *             bit 4  connect to the second subsystem (an allowlist that names the harness's host)
 *             bit 5  HELLO with a host NQN that is not on that allowlist
 *             bit 6  REG B at IOVA_B read-only
 *   operations (first byte modulo 12, then its arguments, little-endian):
 *     0 POLL     n                    (n & 31) + 1 rounds of nkv_shm_test_poll, fewer if one finds
 *                                     nothing to do (at most 1,024 rounds per input)
 *     1 REGW     u16 dword, u32 v     a register write anywhere in the register page
 *     2 DB       q, u16 v             doorbell of queue q & 7 (bit 7: the CQ head, else the SQ tail),
 *                                     any value (beyond the queue's size included)
 *     3 MEMW     pg, u16 off, n, bytes   host memory A at page pg % 64, byte off % 4096 (clipped to
 *                                     A and to the input)
 *     4 MEMW64   pg, u16 idx, u64 v   the 8-byte word idx % 512 of A page pg % 64 (PRP list entries)
 *     5 SUBMIT   q, sqe[64]           the SQE at the host's SQ tail of queue (q & 127) % 5, tail + 1,
 *                                     doorbell (q bit 7: no doorbell, for batches)
 *     6 REAP     q                    take the CQEs of queue q % 5 whose phase is current, CQ head
 *     7 QMODEL   q, sqpg, cqpg, sqn, cqn   the host's idea of queue q % 5: rings at A pages sqpg,
 *                                     cqpg (mod 64), sizes sqn + 1 and cqn + 1 (host side only)
 *     8 REG      sel, u64 iova, offpg, lenpg   REG of memfd sel & 3 (A, B, C, none), sel bit 2 read-only,
 *                                     bit 3 length + 2 KiB, bit 4 offset + 2 KiB; then one round
 *     9 DEREG    u64 iova             then one round
 *    10 MSG      u16 n, fdsel, bytes[n]   a raw control message (any header, up to 512 bytes) with
 *                                     memfd fdsel & 3 attached (A, B, C, none); then one round
 *    11 HANGUP                        the host closes its socket (the controller is gone; commands in
 *                                     flight must still come back before it is freed)
 * Replies to REG/DEREG/MSG are read and dropped (a HELLO reply's register memfd is mapped if the
 * host has none yet). Registers, doorbells and SQ slots are plain memory writes: nothing stops the
 * host from writing garbage anywhere in its own memory or the register page at any time.
 *
 * What must hold: no crash, no sanitizer report (regions are mapped between guard pages, so a
 * translation that strays outside registered memory faults), no leak (LeakSanitizer for memory;
 * after every input, no descriptor opened during it may still be open), and no hang: after the
 * input, closing the socket must let the transport reap the controller within 10,000 poller
 * passes. At setup and at exit a well-behaved host must still get a Store and a Retrieve through
 * (direct PRPs and a scattered PRP list).
 *
 * The self-check also runs after every NKV_FUZZ_SHM_CHECK inputs (default 10,000; 0: never) and
 * aborts when it fails, so a long run stops (keeping the last input) once something global has gone
 * wrong instead of fuzzing a target that refuses everything; with N = 1 it finds the input after
 * which a well-behaved host no longer gets through.
 * NKV_FUZZ_SHM_TRACE=1 prints what the host sees (replies, reaped CQEs, CSTS) and the transport's
 * log (and skips the self-check): for checking what a seed does (make_shm_corpus.py).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/log.h"
#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"
#include "nkv/nkv_target.h"
#include "transport/shm_int.h"

#define SS_NQN "nqn.2026-11.io.rados-nkv:fuzz-shm"
#define SS2_NQN "nqn.2026-11.io.rados-nkv:fuzz-shm-acl"
#define HOST_NQN "nqn.2026-11.io.rados-nkv:fuzz-shm-host"
#define BAD_HOST_NQN "nqn.2026-11.io.rados-nkv:stranger"
#define PG 4096u
#define A_PAGES 64u
#define B_PAGES 16u
#define C_PAGES 4u
#define IOVA_A 0x10000000ull
#define IOVA_B 0x20000000ull
#define MAXQ 4u                /* I/O queue pairs per controller */
#define NQ (MAXQ + 1)          /* queues the host model knows: admin + I/O */
#define MAX_ROUNDS 1024u       /* poll rounds per input */
#define FD_WINDOW 64           /* descriptors checked after each input for leaks */
#define REAP_PASSES 10000u     /* teardown: poller passes before a controller that is not reaped is a hang */
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))

enum { OP_POLL, OP_REGW, OP_DB, OP_MEMW, OP_MEMW64, OP_SUBMIT, OP_REAP, OP_QMODEL, OP_REG, OP_DEREG, OP_MSG,
       OP_HANGUP, NOPS };

struct hq {                    /* the host's view of one queue pair */
	bool set;
	uint32_t sq_off, cq_off;   /* byte offsets of the rings in A */
	uint16_t sq_n, cq_n, sq_tail, cq_head;
	uint8_t phase;
};

struct cqe_log {               /* the CQEs reaped by the current input (for the self-check) */
	uint16_t qid, cid, status; /* status without the phase bit */
	uint32_t dw0;
};

static struct nkv_target *g_tgt;
static struct nkv_shm *g_shm;
static struct nkv_loop_ctrlr *g_wc[2]; /* in-process controllers of both subsystems, to wipe them */
static struct nkv_loop_qp *g_wq[2];
static uint8_t g_list[4096]; /* within MDTS of both subsystems */
static int g_memfd[3] = {-1, -1, -1};
static uint8_t *g_mem[3];
static const uint32_t g_pages[3] = {A_PAGES, B_PAGES, C_PAGES};
static int g_sock = -1, g_fd_floor = -1;
static uint64_t g_fd_open;     /* descriptors of the window open before the input */
static uint8_t *g_regs;
static uint32_t g_reg_size;
static struct hq g_q[NQ];
static unsigned g_rounds;
static struct cqe_log g_log[64];
static unsigned g_nlog;
static unsigned long g_inputs, g_check_every = 10000;
static bool g_ready, g_trace;

/* ---- the target ------------------------------------------------------------------------------------ */

static void target_up(void)
{
	static const struct nkv_exec_rule rules[] = {
		{.opcode = 0x81, .cls = "hello", .method = "record_hello", .write = true, .create = true},
		{.opcode = 0x82, .cls = "hello", .method = "say_hello"},
	};
	struct nkv_backend_conf bc = {.name = "mem", .mem_max_object = 1 << 20, .stats_interval_ms = 3600000};
	struct nkv_ns_conf ns1 = {.nsid = 1, .rados_ns = "", .max_value = 128 * 1024, .exec = rules, .nexec = 2};
	struct nkv_ns_conf ns2 = {.nsid = 2, .rados_ns = "", .read_only = true};
	struct nkv_ns_conf ns3 = {.nsid = 1, .rados_ns = "acl", .max_value = 4096};
	struct nkv_subsys *ss, *ss2;

	if (nkv_target_create(&bc, &g_tgt) || nkv_subsys_add(g_tgt, SS_NQN, "nkv", &ss) || nkv_ns_add(ss, &ns1) ||
	    nkv_ns_add(ss, &ns2) || nkv_subsys_add(g_tgt, SS2_NQN, "nkv", &ss2) || nkv_ns_add(ss2, &ns3) ||
	    nkv_subsys_allow_host(ss2, HOST_NQN)) {
		fprintf(stderr, "fuzz_shm: cannot set up the target\n");
		abort();
	}
	for (unsigned i = 0; i < 2; i++)
		if (nkv_loop_connect(g_tgt, i ? SS2_NQN : SS_NQN, HOST_NQN, &g_wc[i]) || nkv_loop_enable(g_wc[i]) ||
		    nkv_loop_qp_create(g_wc[i], 1, 4, &g_wq[i]))
			abort();
}

static void target_down(void)
{
	for (unsigned i = 0; i < 2; i++) {
		nkv_loop_qp_destroy(g_wq[i]);
		nkv_loop_disconnect(g_wc[i]);
	}
	nkv_target_destroy(g_tgt);
	g_tgt = NULL;
}

/* Delete every key of namespace 1 of subsystem @i, so that no input sees what an earlier one
 * stored: each input then runs the same way alone (a reproducer) as in a long run. */
static void wipe(unsigned i)
{
	for (;;) {
		struct nkv_sqe s;
		struct nkv_cqe q;
		uint32_t xfer = 0, nrk, at = NKV_LIST_HDR;

		nkv_sqe_kv(&s, NKV_KV_LIST, 1, NULL, 0, sizeof(g_list), 0);
		if (nkv_loop_qp_exec(g_wq[i], &s, g_list, sizeof(g_list), &q, &xfer) || (nkv_get16(&q.status) >> 1) != 0) {
			fprintf(stderr, "fuzz_shm: wipe: List answered %#x\n", nkv_get16(&q.status) >> 1);
			abort();
		}
		if ((nrk = nkv_get32(g_list)) == 0)
			return;
		if (xfer < NKV_LIST_HDR + 2) { /* keys, none of which fits: this would loop */
			fprintf(stderr, "fuzz_shm: wipe: List of %u keys moved %u bytes\n", nrk, xfer);
			abort();
		}
		for (uint32_t k = 0; k < nrk && at + 2 <= xfer; k++) {
			unsigned kl = nkv_get16(g_list + at);
			nkv_sqe_kv(&s, NKV_KV_DELETE, 1, g_list + at + 2, kl, 0, 0);
			if (nkv_loop_qp_exec(g_wq[i], &s, NULL, 0, &q, NULL) || (nkv_get16(&q.status) >> 1) != 0) {
				fprintf(stderr, "fuzz_shm: wipe: Delete answered %#x\n", nkv_get16(&q.status) >> 1);
				abort();
			}
			at += nkv_list_entry_size(kl);
		}
	}
}

static void transport_up(void)
{
	struct nkv_shm_conf conf = {.mqes = 63, .max_io_queues = MAXQ, .max_regions = 8, .max_reg_bytes = 1 << 20,
				    .bounce_budget = 128 * 1024, .bounce_ctrl_budget = 64 * 1024, .max_cmds = 32};

	if (nkv_shm_test_create(g_tgt, &conf, &g_shm)) {
		fprintf(stderr, "fuzz_shm: cannot create the transport\n");
		abort();
	}
}

/* ---- the host ------------------------------------------------------------------------------------- */

static void regw(uint32_t off, uint32_t v)
{
	if (g_regs && off + 4 <= g_reg_size)
		__atomic_store_n((uint32_t *)(g_regs + off), v, __ATOMIC_RELEASE);
}

static uint32_t regr(uint32_t off)
{
	return g_regs && off + 4 <= g_reg_size ? __atomic_load_n((uint32_t *)(g_regs + off), __ATOMIC_ACQUIRE) : 0;
}

/* Up to @n rounds of the transport; @conns: serve the control socket too (something was sent). A
 * round that did nothing ends it: with the host idle and the mem backend completing at once, the
 * next would do nothing either (only the host's writes or a completion can give it work). */
static void poll_rounds(unsigned n, bool conns)
{
	for (unsigned i = 0; i < n && g_rounds < MAX_ROUNDS; i++) {
		g_rounds++;
		if (!nkv_shm_test_poll(g_shm, conns))
			break;
	}
}

/* Read and drop the replies waiting; map the register page from a successful HELLO's. */
static void drain_replies(void)
{
	struct nkv_shm_reply rep;
	ssize_t n;
	int fd;

	while (g_sock >= 0 && (n = nkv_recv_fd(g_sock, &rep, sizeof(rep), &fd, MSG_DONTWAIT)) > 0) {
		if (g_trace)
			fprintf(stderr, "  reply op %u status %d%s\n", rep.hdr.op, rep.status, fd >= 0 ? " (fd)" : "");
		if (fd < 0)
			continue;
		if (!g_regs && n == (ssize_t)sizeof(rep) && rep.hdr.op == NKV_SHM_HELLO && rep.status == 0 &&
		    rep.reg_size >= NKV_SHM_DB_BASE + 8 && rep.reg_size <= (1u << 20)) {
			void *p = mmap(NULL, rep.reg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (p != MAP_FAILED) {
				g_regs = p;
				g_reg_size = rep.reg_size;
			}
		}
		close(fd);
	}
}

/* One control message (with memfd @sel attached, 3: none), one round, the replies. */
static void send_msg(const void *m, size_t len, unsigned sel)
{
	if (g_sock < 0)
		return;
	(void)nkv_send_fd(g_sock, m, len, sel < 3 ? g_memfd[sel] : -1);
	poll_rounds(1, true);
	drain_replies();
}

static void say_hello(const char *hostnqn)
{
	struct nkv_shm_hello h = {.hdr = {NKV_SHM_MAGIC, NKV_SHM_VERSION, NKV_SHM_HELLO}};

	memcpy(h.hostid, "fuzz-shm-hostid!", 16);
	snprintf(h.hostnqn, sizeof(h.hostnqn), "%s", hostnqn);
	send_msg(&h, sizeof(h), 3);
}

static void reg_msg(uint16_t op, unsigned sel, uint64_t iova, uint64_t off, uint64_t len, uint32_t flags)
{
	struct nkv_shm_reg m = {.hdr = {NKV_SHM_MAGIC, NKV_SHM_VERSION, op}, .iova = iova, .len = len, .offset = off,
				.flags = flags};
	send_msg(&m, sizeof(m), op == NKV_SHM_REG ? sel : 3);
}

static void qmodel(unsigned q, unsigned sqpg, unsigned cqpg, unsigned sqn, unsigned cqn)
{
	g_q[q] = (struct hq){.set = true, .sq_off = (sqpg % A_PAGES) * PG, .cq_off = (cqpg % A_PAGES) * PG,
			     .sq_n = (uint16_t)sqn, .cq_n = (uint16_t)cqn, .phase = 1};
}

static void submit(unsigned q, const struct nkv_sqe *sqe, bool ring)
{
	struct hq *h = &g_q[q];

	if (!h->set)
		return;
	uint64_t at = h->sq_off + (uint64_t)h->sq_tail * 64;
	if (at + 64 <= A_PAGES * PG)
		memcpy(g_mem[0] + at, sqe, 64);
	h->sq_tail = (uint16_t)((h->sq_tail + 1u) % h->sq_n);
	if (ring)
		regw(nkv_db_sq_tail((uint16_t)q), h->sq_tail);
}

static void reap(unsigned q)
{
	struct hq *h = &g_q[q];
	unsigned n = 0;

	if (!h->set)
		return;
	while (n < h->cq_n) {
		uint64_t at = h->cq_off + (uint64_t)h->cq_head * 16;
		struct nkv_cqe e;
		if (at + 16 > A_PAGES * PG)
			break;
		memcpy(&e, g_mem[0] + at, 16);
		if ((nkv_get16(&e.status) & 1) != h->phase)
			break;
		if (g_trace)
			fprintf(stderr, "  CQ %u: SQ %u CID %u status %03x dw0 %u sqhd %u\n", q, nkv_get16(&e.sqid),
				nkv_get16(&e.cid), nkv_get16(&e.status) >> 1, nkv_get32(&e.dw0), nkv_get16(&e.sqhd));
		if (g_nlog < sizeof(g_log) / sizeof(g_log[0]))
			g_log[g_nlog++] = (struct cqe_log){.qid = (uint16_t)q, .cid = nkv_get16(&e.cid),
							   .status = (uint16_t)(nkv_get16(&e.status) >> 1),
							   .dw0 = nkv_get32(&e.dw0)};
		if (++h->cq_head == h->cq_n) {
			h->cq_head = 0;
			h->phase ^= 1;
		}
		n++;
	}
	regw(nkv_db_cq_head((uint16_t)q), h->cq_head);
}

static struct nkv_sqe sqe_adm(uint8_t opc, uint16_t cid, uint32_t c10, uint32_t c11, uint64_t prp1)
{
	struct nkv_sqe s;

	memset(&s, 0, sizeof(s));
	s.opc = opc;
	nkv_put16(&s.cid, cid);
	nkv_put64(s.dptr, prp1);
	nkv_put32(&s.cdw10, c10);
	nkv_put32(&s.cdw11, c11);
	return s;
}

/* Prologue bits 2 and 3: the standard bring-up, as a well-behaved host does it. */
static void bring_up(bool io)
{
	qmodel(0, 0, 1, 32, 32);
	regw(NKV_REG_AQA, (31u << 16) | 31u);
	regw(NKV_REG_ASQ, (uint32_t)IOVA_A);
	regw(NKV_REG_ASQ + 4, (uint32_t)(IOVA_A >> 32));
	regw(NKV_REG_ACQ, (uint32_t)(IOVA_A + PG));
	regw(NKV_REG_ACQ + 4, (uint32_t)((IOVA_A + PG) >> 32));
	regw(NKV_REG_CC, CC_ENABLE);
	poll_rounds(1, false);
	if (!io)
		return;
	struct nkv_sqe s = sqe_adm(NKV_ADM_SET_FEATURES, 1, NKV_FEAT_NUM_QUEUES, ((MAXQ - 1) << 16) | (MAXQ - 1), 0);
	submit(0, &s, true);
	s = sqe_adm(NKV_ADM_CREATE_CQ, 2, (63u << 16) | 1u, 1, IOVA_A + 2 * PG);
	submit(0, &s, true);
	s = sqe_adm(NKV_ADM_CREATE_SQ, 3, (63u << 16) | 1u, (1u << 16) | 1u, IOVA_A + 3 * PG);
	submit(0, &s, true);
	qmodel(1, 3, 2, 64, 64);
	poll_rounds(2, false);
	reap(0);
}

/* ---- one input ------------------------------------------------------------------------------------ */

/* Which of the FD_WINDOW descriptors from g_fd_floor are open (bit i: g_fd_floor + i), in one
 * poll(2). Those opened during an input are numbered from the lowest free one, a few at a time. */
static uint64_t fds_open(void)
{
	struct pollfd pf[FD_WINDOW];
	uint64_t open = 0;
	int r;

	for (int i = 0; i < FD_WINDOW; i++)
		pf[i] = (struct pollfd){.fd = g_fd_floor + i};
	while ((r = poll(pf, FD_WINDOW, 0)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		perror("fuzz_shm: poll over the descriptors");
		abort();
	}
	for (int i = 0; i < FD_WINDOW; i++)
		if (!(pf[i].revents & POLLNVAL))
			open |= 1ull << i;
	return open;
}

static void setup(void);

static void input_begin(uint8_t pro)
{
	int sv[2];

	if (!g_ready)
		setup();
	g_fd_floor = dup(0); /* the lowest free descriptor: the window checked at the end starts here */
	close(g_fd_floor);
	g_fd_open = fds_open(); /* libFuzzer's own may sit above a hole */
	transport_up();
	for (unsigned i = 0; i < 3; i++)
		memset(g_mem[i], 0, (size_t)g_pages[i] * PG);
	memset(g_q, 0, sizeof(g_q));
	g_rounds = 0;
	g_nlog = 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("fuzz_shm: socketpair");
		abort();
	}
	g_sock = sv[0];
	if (nkv_shm_test_adopt(g_shm, (pro & 0x10) ? SS2_NQN : SS_NQN, sv[1]) < 0)
		abort();
	if (pro & 0x01)
		say_hello((pro & 0x20) ? BAD_HOST_NQN : HOST_NQN);
	if (pro & 0x02)
		reg_msg(NKV_SHM_REG, 0, IOVA_A, 0, A_PAGES * PG, 0);
	if (pro & 0x40)
		reg_msg(NKV_SHM_REG, 1, IOVA_B, 0, B_PAGES * PG, NKV_SHM_REG_READONLY);
	if (pro & 0x04)
		bring_up(pro & 0x08);
}

static void input_end(void)
{
	if (g_trace)
		fprintf(stderr, "  CSTS %08x after %u rounds\n", regr(NKV_REG_CSTS), g_rounds);
	/* Let what was started finish (bounded), then the host leaves and the controller must go. */
	for (unsigned i = 0; i < 16 && nkv_shm_test_poll(g_shm, true); i++)
		;
	if (g_sock >= 0)
		close(g_sock);
	g_sock = -1;
	if (nkv_shm_test_destroy(g_shm, REAP_PASSES) < 0) {
		fprintf(stderr, "fuzz_shm: the controller was not reaped within %u poller passes of the host leaving\n",
			REAP_PASSES);
		abort();
	}
	g_shm = NULL;
	if (g_regs)
		munmap(g_regs, g_reg_size);
	g_regs = NULL;
	wipe(0);
	wipe(1);
	/* Every descriptor opened during the input (the socket pair, the register memfd, descriptors
	 * passed with messages, the transport's eventfd) is closed again. */
	uint64_t leaked = fds_open() & ~g_fd_open;
	if (leaked) {
		int fd = g_fd_floor + __builtin_ctzll(leaked);
		char link[64], what[256] = "?";
		ssize_t n;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		if ((n = readlink(link, what, sizeof(what) - 1)) > 0)
			what[n] = 0;
		fprintf(stderr, "fuzz_shm: descriptor leak: fd %d (%s) is open after the input\n", fd, what);
		abort();
	}
}

static size_t take(const uint8_t **d, size_t *n, size_t k)
{
	if (*n < k)
		return 0;
	*d += k;
	*n -= k;
	return k;
}

static void run_ops(const uint8_t *d, size_t n)
{
	while (n > 0) {
		const uint8_t *a = d + 1;
		unsigned op = d[0] % NOPS;
		take(&d, &n, 1);
		switch (op) {
		case OP_POLL:
			if (!take(&d, &n, 1))
				return;
			poll_rounds((a[0] & 31u) + 1, false);
			break;
		case OP_REGW:
			if (!take(&d, &n, 6))
				return;
			if (g_regs)
				regw((nkv_get16(a) % (g_reg_size / 4)) * 4, nkv_get32(a + 2));
			break;
		case OP_DB:
			if (!take(&d, &n, 3))
				return;
			regw((a[0] & 0x80) ? nkv_db_cq_head(a[0] & 7) : nkv_db_sq_tail(a[0] & 7), nkv_get16(a + 1));
			break;
		case OP_MEMW: {
			if (!take(&d, &n, 4))
				return;
			size_t off = (a[0] % A_PAGES) * PG + nkv_get16(a + 1) % PG, len = a[3];
			if (len > n)
				len = n;
			if (len > A_PAGES * PG - off)
				len = A_PAGES * PG - off;
			memcpy(g_mem[0] + off, d, len);
			take(&d, &n, len);
			break;
		}
		case OP_MEMW64:
			if (!take(&d, &n, 11))
				return;
			memcpy(g_mem[0] + (a[0] % A_PAGES) * PG + (nkv_get16(a + 1) % (PG / 8)) * 8, a + 3, 8);
			break;
		case OP_SUBMIT: {
			struct nkv_sqe s;
			if (!take(&d, &n, 65))
				return;
			memcpy(&s, a + 1, 64);
			submit((a[0] & 0x7fu) % NQ, &s, !(a[0] & 0x80));
			break;
		}
		case OP_REAP:
			if (!take(&d, &n, 1))
				return;
			reap(a[0] % NQ);
			break;
		case OP_QMODEL:
			if (!take(&d, &n, 5))
				return;
			qmodel(a[0] % NQ, a[1], a[2], a[3] + 1u, a[4] + 1u);
			break;
		case OP_REG: {
			if (!take(&d, &n, 11))
				return;
			unsigned sel = a[0] & 3;
			uint64_t off = (uint64_t)a[9] * PG + ((a[0] & 0x10) ? 2048 : 0);
			uint64_t len = (uint64_t)a[10] * PG + ((a[0] & 0x08) ? 2048 : 0);
			reg_msg(NKV_SHM_REG, sel, nkv_get64(a + 1), off, len, (a[0] & 4) ? NKV_SHM_REG_READONLY : 0);
			break;
		}
		case OP_DEREG:
			if (!take(&d, &n, 8))
				return;
			reg_msg(NKV_SHM_DEREG, 3, nkv_get64(a), 0, 0, 0);
			break;
		case OP_MSG: {
			uint8_t m[512];
			if (!take(&d, &n, 3))
				return;
			size_t len = nkv_get16(a) % (sizeof(m) + 1);
			if (len > n)
				len = n;
			memcpy(m, d, len);
			take(&d, &n, len);
			send_msg(m, len, a[2] & 3);
			break;
		}
		case OP_HANGUP: /* the transport sees it in the next round, with whatever is in flight */
			if (g_sock >= 0)
				close(g_sock);
			g_sock = -1;
			poll_rounds(1, true);
			break;
		}
	}
}

static bool self_check(void);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	g_inputs++;
	input_begin(data[0]);
	run_ops(data + 1, size - 1);
	input_end();
	if (g_check_every && g_inputs % g_check_every == 0 && !self_check()) {
		fprintf(stderr, "fuzz_shm: a well-behaved host fails after %lu inputs, this one last\n", g_inputs);
		abort();
	}
	return 0;
}

/* ---- the self-check: a well-behaved host still gets its data through ------------------------------- */

static const struct cqe_log *logged(uint16_t qid, uint16_t cid)
{
	for (unsigned i = 0; i < g_nlog; i++)
		if (g_log[i].qid == qid && g_log[i].cid == cid)
			return &g_log[i];
	return NULL;
}

static bool self_check(void)
{
	static const uint8_t key[] = "fuzz-shm-check";
	const uint32_t small = 5000, big = 5 * PG + 123; /* direct (PRP1 + PRP2), and a scattered list */
	const struct cqe_log *e;
	struct nkv_sqe s;
	bool ok = true;

	input_begin(0x0f);
	for (uint32_t i = 0; i < 16 * PG; i++)
		g_mem[0][8 * PG + i] = (uint8_t)(i * 7 + (i >> 9));
	ok = (regr(NKV_REG_CSTS) & (NKV_CSTS_RDY | NKV_CSTS_CFS)) == NKV_CSTS_RDY;
	for (uint16_t cid = 1; cid <= 3; cid++)
		ok = ok && (e = logged(0, cid)) && e->status == 0;
	/* Store small from A page 8 (offset 0x100, so it spans into page 9 through PRP2), then big
	 * from the pages 16, 18, 20, 22, 24, 26 through a PRP list on page 30. */
	nkv_sqe_kv(&s, NKV_KV_STORE, 1, key, 14, small, 0);
	nkv_put16(&s.cid, 10);
	nkv_put64(s.dptr, IOVA_A + 8 * PG + 0x100);
	nkv_put64(s.dptr + 8, IOVA_A + 9 * PG);
	submit(1, &s, true);
	for (uint32_t i = 0; i < 6; i++)
		nkv_put64(g_mem[0] + 30 * PG + 8 * i, IOVA_A + (18 + 2 * i) * PG); /* entries 2..7 */
	nkv_sqe_kv(&s, NKV_KV_STORE, 1, key + 1, 13, big, 0);
	nkv_put16(&s.cid, 11);
	nkv_put64(s.dptr, IOVA_A + 16 * PG);
	nkv_put64(s.dptr + 8, IOVA_A + 30 * PG);
	submit(1, &s, true);
	poll_rounds(8, false);
	/* Retrieve both into fresh pages: small into page 40 + 0x200 and 41 (direct), big through a list on
	 * page 31 naming pages 48, 46, 44, 42, 50 after PRP1 = page 52. */
	for (uint32_t i = 0; i < 5; i++)
		nkv_put64(g_mem[0] + 31 * PG + 8 * i, IOVA_A + (i == 4 ? 50 : 48 - 2 * i) * PG);
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, 1, key, 14, small, 0);
	nkv_put16(&s.cid, 12);
	nkv_put64(s.dptr, IOVA_A + 40 * PG + 0x200);
	nkv_put64(s.dptr + 8, IOVA_A + 41 * PG);
	submit(1, &s, true);
	nkv_sqe_kv(&s, NKV_KV_RETRIEVE, 1, key + 1, 13, 6 * PG, 0);
	nkv_put16(&s.cid, 13);
	nkv_put64(s.dptr, IOVA_A + 52 * PG);
	nkv_put64(s.dptr + 8, IOVA_A + 31 * PG);
	submit(1, &s, true);
	poll_rounds(8, false);
	reap(1);
	for (uint16_t cid = 10; cid <= 13; cid++)
		ok = ok && (e = logged(1, cid)) && e->status == 0;
	ok = ok && logged(1, 12)->dw0 == small && logged(1, 13)->dw0 == big;
	ok = ok && (regr(NKV_REG_CSTS) & (NKV_CSTS_RDY | NKV_CSTS_CFS)) == NKV_CSTS_RDY;
	ok = ok && memcmp(g_mem[0] + 40 * PG + 0x200, g_mem[0] + 8 * PG + 0x100, small) == 0;
	for (uint32_t i = 0; ok && i < big; i++) {
		uint32_t src = i < PG ? 16 * PG + i : (18 + 2 * ((i - PG) / PG)) * PG + (i % PG);
		uint32_t page = i / PG, dst = (page == 0 ? 52 : page == 5 ? 50 : 48 - 2 * (page - 1)) * PG + i % PG;
		ok = g_mem[0][dst] == g_mem[0][src];
	}
	if (!ok) { /* what the well-behaved host saw */
		fprintf(stderr, "fuzz_shm: self-check: CSTS %08x;", regr(NKV_REG_CSTS));
		for (unsigned i = 0; i < g_nlog; i++)
			fprintf(stderr, " q%u cid %u: %03x dw0 %u;", g_log[i].qid, g_log[i].cid, g_log[i].status, g_log[i].dw0);
		fprintf(stderr, "\n");
	}
	input_end();
	return ok;
}

static void at_exit(void)
{
	bool ok = self_check();
	printf("fuzz_shm: %lu inputs; a well-behaved host after them (bring-up, Store and Retrieve, direct and "
	       "through PRP lists): %s\n", g_inputs, ok ? "ok" : "FAILED");
	fflush(stdout);
	if (!ok)
		_exit(1);
	target_down();
	for (unsigned i = 0; i < 3; i++) {
		munmap(g_mem[i], (size_t)g_pages[i] * PG);
		close(g_memfd[i]);
	}
}

static void setup(void)
{
	const char *e = getenv("NKV_FUZZ_SHM_TRACE");

	g_trace = e && atoi(e) > 0;
	if ((e = getenv("NKV_FUZZ_SHM_CHECK")))
		g_check_every = strtoul(e, NULL, 0);
	nkv_log_set_level(g_trace ? NKV_LOG_INFO : NKV_LOG_ERROR); /* every refused doorbell or queue warns */
	for (unsigned i = 0; i < 3; i++) {
		int fd = memfd_create("fuzz-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || ftruncate(fd, (off_t)g_pages[i] * PG) < 0 ||
		    (i < 2 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) ||
		    (g_mem[i] = mmap(NULL, (size_t)g_pages[i] * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
			perror("fuzz_shm: host memory");
			abort();
		}
		g_memfd[i] = fd;
	}
	target_up();
	g_ready = true;
	if (g_trace)
		return; /* only what the inputs do */
	if (!self_check()) {
		fprintf(stderr, "fuzz_shm: a well-behaved host does not get through: the harness or the transport is broken\n");
		abort();
	}
	atexit(at_exit);
}
