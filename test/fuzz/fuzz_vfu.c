/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_vfu.c - libFuzzer target playing a malicious vfio-user client against the vfio-user server
 * (src/transport/vfio_user*.c) and the controller behind it. Everything runs in this thread: the
 * shm transport's testing hooks (shm_int.h) serve the client's socket (one end of a SOCK_STREAM
 * socketpair) and run poller passes, so a run is deterministic.
 *
 * One target (mem backend) serves every input; each input gets a fresh transport (4 I/O queue
 * pairs, 8 regions, 1 MiB of them, 32 commands in flight) and one client. The client owns memfd A
 * (64 pages, sealed), memfd C (4 pages, not sealed: the client is this process's own user, whose
 * unsealed memory the server maps) and an eventfd, zeroed or recreated per input.
 *
 * Input: a prologue byte, then operations until the input ends (a truncated one is dropped).
 *   prologue  bit 0  the harness negotiates VERSION and maps BAR0 (GET_REGION_INFO's fd)
 *             bit 1  DMA_MAP of A at IOVA_A
 *             bit 2  admin queues in A (ASQ page 0, ACQ page 1, 32 entries each) and CC.EN = 1, written
 *                    by REGION_WRITE
 *             bit 3  MSI-X vectors 0 and 1 bound to the eventfd
 *   operations (first byte modulo 7, then its arguments, little-endian):
 *     0 POLL    n                    (n & 31) + 1 rounds (at most 1,024 per input)
 *     1 RAW     u16 n, fdsel, bytes[n]   n % 1024 raw bytes on the socket (any header, any size),
 *                                    with (fdsel >> 2) & 3 copies of fd fdsel & 3 (A, C, eventfd, none)
 *     2 CMD     cmd, flags, u16 n, fdsel, bytes[n]   a well-framed command: a header with msg_size
 *                                    16 + n % 512, command cmd % 20, flags as given, the payload, fds
 *                                    as RAW
 *     3 MEMW    pg, u16 off, n, bytes    memory A at page pg % 64, offset off % 4096 (SQEs, PRP lists)
 *     4 BARW    u16 dword, u32 v     a store into the mmapped BAR0 (doorbells, CC), if mapped
 *     5 RESET                        DEVICE_RESET
 *     6 HANGUP                       the client closes its socket (commands in flight must still
 *                                    come back before the controller is freed)
 * Replies are read and dropped after every operation (their fds closed).
 *
 * What must hold: no crash, no sanitizer report, no leak (LeakSanitizer; after every input no
 * descriptor opened during it may still be open), no hang (after the input, closing the socket lets
 * the transport reap the controller within 10,000 poller passes).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/vfio_user.h"
#include "nkv/nkv_shm.h"
#include "nkv/nkv_target.h"
#include "transport/shm_int.h"

#define SS_NQN "nqn.2026-11.io.rados-nkv:fuzz-vfu"
#define PG 4096u
#define A_PAGES 64u
#define C_PAGES 4u
#define IOVA_A 0x10000000ull
#define MAX_ROUNDS 1024u
#define FD_WINDOW 64
#define REAP_PASSES 10000u
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))

enum { OP_POLL, OP_RAW, OP_CMD, OP_MEMW, OP_BARW, OP_RESET, OP_HANGUP, NOPS };

static struct nkv_target *g_tgt;
static struct nkv_shm *g_shm;
static int g_a = -1, g_c = -1, g_efd = -1, g_sock = -1, g_fd_floor = -1;
static uint8_t *g_mem;
static uint8_t *g_bar0;
static uint32_t g_bar0_len;
static uint64_t g_fd_open;
static unsigned g_rounds;
static uint16_t g_id;

static uint64_t fds_open(void)
{
	struct pollfd pf[FD_WINDOW];
	uint64_t m = 0;
	int r;

	for (int i = 0; i < FD_WINDOW; i++)
		pf[i] = (struct pollfd){.fd = g_fd_floor + i};
	while ((r = poll(pf, FD_WINDOW, 0)) < 0 && errno == EINTR)
		;
	for (int i = 0; i < FD_WINDOW; i++)
		if (!(pf[i].revents & POLLNVAL))
			m |= 1ull << i;
	return m;
}

static void setup(void)
{
	struct nkv_backend_conf bc = {.name = "mem", .mem_max_object = 1 << 20, .stats_interval_ms = 3600000};
	struct nkv_ns_conf ns = {.nsid = 1, .rados_ns = "", .max_value = 128 * 1024};
	struct nkv_subsys *ss;

	if (!getenv("NKV_FUZZ_VFU_TRACE"))
		nkv_log_set_level(NKV_LOG_ERROR); /* every refused message warns */
	if (nkv_target_create(&bc, &g_tgt) || nkv_subsys_add(g_tgt, SS_NQN, "nkv", &ss) || nkv_ns_add(ss, &ns)) {
		fprintf(stderr, "fuzz_vfu: cannot set up the target\n");
		abort();
	}
	g_a = memfd_create("fuzz-vfu-a", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	g_c = memfd_create("fuzz-vfu-c", MFD_CLOEXEC);
	if (g_a < 0 || g_c < 0 || ftruncate(g_a, A_PAGES * PG) || fcntl(g_a, F_ADD_SEALS, F_SEAL_SHRINK) ||
	    ftruncate(g_c, C_PAGES * PG) ||
	    (g_mem = mmap(NULL, A_PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, g_a, 0)) == MAP_FAILED)
		abort();
}

/* Read and drop whatever replies wait (closing their fds); keep BAR0's fd when asked. */
static void drain(int *keep_fd)
{
	uint8_t b[4096];

	for (;;) {
		union {
			struct cmsghdr c;
			char b[CMSG_SPACE(8 * sizeof(int))];
		} cm;
		struct iovec iov = {.iov_base = b, .iov_len = sizeof(b)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
		ssize_t n = g_sock >= 0 ? recvmsg(g_sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) : -1;
		if (n <= 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int f;
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (keep_fd && *keep_fd < 0)
					*keep_fd = f;
				else
					close(f);
			}
	}
}

static void rounds(unsigned n)
{
	for (unsigned i = 0; i < n && g_rounds < MAX_ROUNDS; i++) {
		g_rounds++;
		if (!nkv_shm_test_poll(g_shm, true))
			break;
	}
}

static void sendraw(const void *b, size_t len, unsigned fdsel)
{
	int fd = (fdsel & 3) == 0 ? g_a : (fdsel & 3) == 1 ? g_c : (fdsel & 3) == 2 ? g_efd : -1;
	unsigned nfd = fd >= 0 ? (fdsel >> 2) & 3 : 0;
	int fds[3] = {fd, fd, fd};
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(3 * sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = (void *)b, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (g_sock < 0 || !len)
		return;
	if (nfd) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
	}
	(void)!sendmsg(g_sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A well-framed command, one round, replies dropped (@keep: BAR0's fd from a region info reply). */
static void cmd(uint16_t c, uint32_t flags, const void *pl, uint32_t n, unsigned fdsel, int *keep)
{
	uint8_t m[16 + 600];
	struct nkv_vfu_hdr h = {.msg_id = ++g_id, .cmd = c, .msg_size = 16 + n, .flags = flags};

	memcpy(m, &h, 16);
	if (n)
		memcpy(m + 16, pl, n);
	sendraw(m, 16 + n, fdsel);
	rounds(1);
	drain(keep);
}

static void region_write32(uint32_t off, uint32_t v)
{
	uint8_t b[20];

	nkv_put64(b, off);
	nkv_put32(b + 8, NKV_VFU_PCI_BAR0);
	nkv_put32(b + 12, 4);
	nkv_put32(b + 16, v);
	cmd(NKV_VFU_REGION_WRITE, 0, b, 20, 3, NULL);
}

static void prologue(uint8_t p)
{
	if (p & 1) {
		uint8_t v[4] = {0};
		cmd(NKV_VFU_VERSION, 0, v, 4, 3, NULL);
		uint8_t ri[32] = {0};
		int fd = -1;
		nkv_put32(ri, 64);
		cmd(NKV_VFU_DEVICE_GET_REGION_INFO, 0, ri, 32, 3, &fd);
		if (fd >= 0) {
			g_bar0_len = nkv_shm_reg_size(4);
			void *m = mmap(NULL, g_bar0_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			g_bar0 = m == MAP_FAILED ? NULL : m;
			close(fd);
		}
	}
	if (p & 2) {
		uint8_t b[32];
		nkv_put32(b, 32);
		nkv_put32(b + 4, 3);
		nkv_put64(b + 8, 0);
		nkv_put64(b + 16, IOVA_A);
		nkv_put64(b + 24, A_PAGES * PG);
		cmd(NKV_VFU_DMA_MAP, 0, b, 32, 4 | 0, NULL);
	}
	if (p & 4) {
		region_write32(NKV_REG_AQA, 31u | 31u << 16);
		region_write32(NKV_REG_ASQ, (uint32_t)IOVA_A);
		region_write32(NKV_REG_ASQ + 4, (uint32_t)(IOVA_A >> 32));
		region_write32(NKV_REG_ACQ, (uint32_t)(IOVA_A + PG));
		region_write32(NKV_REG_ACQ + 4, (uint32_t)((IOVA_A + PG) >> 32));
		region_write32(NKV_REG_CC, CC_ENABLE);
		rounds(2);
	}
	if (p & 8) {
		uint8_t b[20];
		nkv_put32(b, 20);
		nkv_put32(b + 4, NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_TRIGGER);
		nkv_put32(b + 8, NKV_VFU_PCI_MSIX_IRQ);
		nkv_put32(b + 12, 0);
		nkv_put32(b + 16, 2);
		cmd(NKV_VFU_DEVICE_SET_IRQS, 0, b, 20, 2 | 8, NULL);
	}
}

static void teardown(void)
{
	if (g_sock >= 0)
		close(g_sock);
	g_sock = -1;
	if (g_bar0)
		munmap(g_bar0, g_bar0_len);
	g_bar0 = NULL;
	if (nkv_shm_test_destroy(g_shm, REAP_PASSES) < 0) {
		fprintf(stderr, "fuzz_vfu: the controller was not reaped within %u passes\n", REAP_PASSES);
		abort();
	}
	g_shm = NULL;
	close(g_efd);
	g_efd = -1;
	uint64_t leaked = fds_open() & ~g_fd_open;
	if (leaked) {
		char path[64], what[128] = "?";
		int fd = g_fd_floor + __builtin_ctzll(leaked);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t k = readlink(path, what, sizeof(what) - 1);
		what[k > 0 ? k : 1] = 0;
		fprintf(stderr, "fuzz_vfu: descriptor %d (%s) left open by an input\n", fd, what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct nkv_shm_conf conf = {.mqes = 63, .max_io_queues = 4, .max_regions = 8, .max_reg_bytes = 1 << 20,
				    .bounce_budget = 128 * 1024, .bounce_ctrl_budget = 64 * 1024, .max_cmds = 32};
	int sv[2];
	size_t at = 1;

	if (!g_tgt)
		setup();
	if (n < 1)
		return 0;
	memset(g_mem, 0, A_PAGES * PG);
	if (ftruncate(g_c, 0) || ftruncate(g_c, C_PAGES * PG)) /* zeroed: the last input's transport is gone */
		abort();
	g_rounds = 0;
	/* per input: libFuzzer's own descriptors (its symbolizer's pipes) may appear between inputs */
	g_fd_floor = dup(0);
	close(g_fd_floor);
	g_fd_open = fds_open();
	if (nkv_shm_test_create(g_tgt, &conf, &g_shm) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		abort();
	g_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g_sock = sv[0];
	if (nkv_vfu_test_adopt(g_shm, SS_NQN, sv[1]) < 0)
		abort();
	prologue(d[0]);
	while (at < n) {
		uint8_t op = d[at++] % NOPS;
		switch (op) {
		case OP_POLL:
			if (at + 1 > n)
				goto end;
			rounds((d[at++] & 31u) + 1);
			drain(NULL);
			break;
		case OP_RAW: {
			if (at + 3 > n)
				goto end;
			uint32_t len = nkv_get16(d + at) % 1024u;
			unsigned fdsel = d[at + 2];
			at += 3;
			if (at + len > n)
				goto end;
			sendraw(d + at, len, fdsel);
			at += len;
			rounds(1);
			drain(NULL);
			break;
		}
		case OP_CMD: {
			if (at + 5 > n)
				goto end;
			uint16_t c = d[at] % 20u;
			uint32_t flags = d[at + 1];
			uint32_t len = nkv_get16(d + at + 2) % 512u;
			unsigned fdsel = d[at + 4];
			at += 5;
			if (at + len > n)
				goto end;
			cmd(c, flags, d + at, len, fdsel, NULL);
			at += len;
			break;
		}
		case OP_MEMW: {
			if (at + 4 > n)
				goto end;
			uint32_t pg = d[at] % A_PAGES, off = nkv_get16(d + at + 1) % PG, len = d[at + 3];
			at += 4;
			if (at + len > n)
				goto end;
			uint32_t room = A_PAGES * PG - (pg * PG + off);
			memcpy(g_mem + pg * PG + off, d + at, len < room ? len : room);
			at += len;
			break;
		}
		case OP_BARW: {
			if (at + 6 > n)
				goto end;
			uint32_t off = (uint32_t)nkv_get16(d + at) * 4u, v = nkv_get32(d + at + 2);
			at += 6;
			if (g_bar0 && off + 4 <= g_bar0_len)
				__atomic_store_n((uint32_t *)(g_bar0 + off), v, __ATOMIC_RELEASE);
			break;
		}
		case OP_RESET:
			cmd(NKV_VFU_DEVICE_RESET, 0, NULL, 0, 3, NULL);
			rounds(1);
			break;
		case OP_HANGUP:
			if (g_sock >= 0)
				close(g_sock);
			g_sock = -1;
			rounds(2);
			break;
		}
	}
end:
	if (getenv("NKV_FUZZ_VFU_TRACE")) /* what the seeds' bring-up left in the CQs (make_vfu_corpus.py) */
		for (unsigned pg = 1; pg <= 2; pg++)
			for (unsigned i = 0; i < 4; i++) {
				const uint8_t *e = g_mem + pg * PG + i * 16;
				if (nkv_get16(e + 14) & 1)
					fprintf(stderr, "  CQ page %u entry %u: CID %u status %03x dw0 %u\n", pg, i,
						nkv_get16(e + 12), nkv_get16(e + 14) >> 1, nkv_get32(e));
			}
	teardown();
	return 0;
}
