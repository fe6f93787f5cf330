/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfu_irq.c - the interrupt rule of vfio-user controllers, checked pass by pass: the shm transport's
 * testing hooks (shm_int.h) run the controller on this thread, so which CQEs a poller pass posts is
 * deterministic. Two I/O CQs share MSI-X vector 1; a Store on each of their SQs is posted in one pass;
 * the vector's eventfd must then count exactly one interrupt (one write per pass and vector), and a
 * CQ alone on its vector one per pass that posted to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/vfio_user.h"
#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"
#include "nkv/nkv_target.h"
#include "transport/shm_int.h"

#define NQN "nqn.2026-11.io.rados-nkv:vfu-irq"
#define PG 4096u
#define PAGES 64u
#define IOVA 0x10000000ull
#define CC_ENABLE (NKV_CC_EN | (NKV_CC_CSS_IOCS << 4) | (6u << 16) | (4u << 20))

static unsigned g_pass, g_fail;
#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (c) {                                                                           \
			g_pass++;                                                                  \
		} else {                                                                           \
			g_fail++;                                                                  \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

static struct nkv_shm *g_shm;
static int g_sock = -1;
static uint8_t *g_mem, *g_bar;
static uint16_t g_id;

/* One command (@fd attached when >= 0), the transport run until it answered; the reply's first fd
 * into *@rfd. @return the reply's error (0: ok), or -1 without one. */
static int call(uint16_t cmd, const void *pl, uint32_t n, int fd, int *rfd)
{
	uint8_t m[64], r[256];
	struct nkv_vfu_hdr h = {.msg_id = ++g_id, .cmd = cmd, .msg_size = 16 + n};
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	int fds[2] = {fd, fd};
	unsigned nfd = fd >= 0 ? (cmd == NKV_VFU_DEVICE_SET_IRQS ? 2 : 1) : 0;

	memcpy(m, &h, 16);
	memcpy(m + 16, pl, n);
	struct iovec iov = {.iov_base = m, .iov_len = 16 + n};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
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
	if (sendmsg(g_sock, &mh, MSG_NOSIGNAL) != (ssize_t)(16 + n))
		return -1;
	nkv_shm_test_poll(g_shm, true);
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} rc;
	struct iovec riov = {.iov_base = r, .iov_len = sizeof(r)};
	struct msghdr rh = {.msg_iov = &riov, .msg_iovlen = 1, .msg_control = rc.b, .msg_controllen = sizeof(rc.b)};
	ssize_t got = recvmsg(g_sock, &rh, MSG_DONTWAIT);
	if (got < 16)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&rh);
	if (c && c->cmsg_type == SCM_RIGHTS) {
		int f;
		memcpy(&f, CMSG_DATA(c), sizeof(int));
		if (rfd)
			*rfd = f;
		else
			close(f);
	}
	memcpy(&h, r, 16);
	return (h.flags & NKV_VFU_F_ERROR) ? (int)h.error : 0;
}

static struct nkv_sqe adm(uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint64_t prp1)
{
	struct nkv_sqe s;

	memset(&s, 0, sizeof(s));
	s.opc = opc;
	nkv_put32(&s.cdw10, cdw10);
	nkv_put32(&s.cdw11, cdw11);
	nkv_put64(s.dptr, prp1);
	return s;
}

static void bar_wr(uint32_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(g_bar + off), v, __ATOMIC_RELEASE);
}

/* Put @s at slot @slot of the SQ at page @pg, ring SQ @q's doorbell with @slot + 1. */
static void submit(uint16_t q, unsigned pg, unsigned slot, struct nkv_sqe s, uint16_t cid)
{
	s.cid = cid;
	memcpy(g_mem + pg * PG + slot * 64, &s, 64);
	bar_wr(nkv_db_sq_tail(q), slot + 1);
}

/* The status of the CQE at slot @slot of the CQ at page @pg, or -1 while its phase is not 1. */
static int cqe(unsigned pg, unsigned slot)
{
	const uint8_t *e = g_mem + pg * PG + slot * 16;
	uint16_t st = nkv_get16(e + 14);
	return (st & 1) ? (int)(st >> 1) : -1;
}

/* Poller passes until the CQEs at (@pa, @sa) and (@pb, @sb) are both posted (a completion comes back
 * through the poller's message queue, one pass after its command started). @return the passes run,
 * or 0 when they were not posted by the same pass (or not within 20). */
static int passes_until(unsigned pa, unsigned sa, unsigned pb, unsigned sb)
{
	for (int i = 1; i <= 20; i++) {
		nkv_shm_test_poll(g_shm, false);
		bool a = cqe(pa, sa) >= 0, b = cqe(pb, sb) >= 0;
		if (a || b)
			return a && b ? i : 0;
	}
	return 0;
}

static uint64_t efd_count(int efd)
{
	uint64_t v = 0;
	return read(efd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

int main(void)
{
	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_ns_conf ns = {.nsid = 1, .rados_ns = "vfu-irq"};
	struct nkv_shm_conf conf = {.max_io_queues = 4};
	struct nkv_target *tgt;
	struct nkv_subsys *ss;
	int sv[2], memfd, regfd = -1, efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (nkv_target_create(&bc, &tgt) || nkv_subsys_add(tgt, NQN, "nkv", &ss) || nkv_ns_add(ss, &ns) ||
	    nkv_shm_test_create(tgt, &conf, &g_shm) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    nkv_vfu_test_adopt(g_shm, NQN, sv[1]) < 0) {
		fprintf(stderr, "vfu_irq: setup failed\n");
		return 1;
	}
	g_sock = sv[0];
	memfd = memfd_create("vfu-irq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0 || ftruncate(memfd, PAGES * PG) || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) ||
	    (g_mem = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)) == MAP_FAILED)
		return 1;
	uint8_t v[4] = {0}, ri[32] = {0}, map[32], irq[20];
	CHECK(call(NKV_VFU_VERSION, v, 4, -1, NULL) == 0, "VERSION");
	nkv_put32(ri, 64);
	CHECK(call(NKV_VFU_DEVICE_GET_REGION_INFO, ri, 32, -1, &regfd) == 0 && regfd >= 0, "BAR0 info with its fd");
	g_bar = mmap(NULL, nkv_shm_reg_size(4), PROT_READ | PROT_WRITE, MAP_SHARED, regfd, 0);
	nkv_put32(map, 32);
	nkv_put32(map + 4, 3);
	nkv_put64(map + 8, 0);
	nkv_put64(map + 16, IOVA);
	nkv_put64(map + 24, PAGES * PG);
	CHECK(call(NKV_VFU_DMA_MAP, map, 32, memfd, NULL) == 0, "DMA_MAP");
	nkv_put32(irq, 20);
	nkv_put32(irq + 4, NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_TRIGGER);
	nkv_put32(irq + 8, NKV_VFU_PCI_MSIX_IRQ);
	nkv_put32(irq + 12, 1);
	nkv_put32(irq + 16, 2); /* vectors 1 and 2 on the same eventfd: the count below is vector 1's + 2's */
	CHECK(call(NKV_VFU_DEVICE_SET_IRQS, irq, 20, efd, NULL) == 0, "SET_IRQS vectors 1-2");
	if (g_bar == MAP_FAILED || g_fail)
		return 1;

	/* admin SQ page 0, CQ page 1; I/O CQ 1 page 2 and CQ 2 page 3 on vector 1, CQ 3 page 4 on vector 2;
	 * SQs 1-3 pages 5-7 */
	bar_wr(NKV_REG_AQA, 15u | 15u << 16);
	bar_wr(NKV_REG_ASQ, (uint32_t)IOVA);
	bar_wr(NKV_REG_ASQ + 4, (uint32_t)(IOVA >> 32));
	bar_wr(NKV_REG_ACQ, (uint32_t)(IOVA + PG));
	bar_wr(NKV_REG_ACQ + 4, (uint32_t)((IOVA + PG) >> 32));
	bar_wr(NKV_REG_CC, CC_ENABLE);
	for (int i = 0; i < 10 && !(__atomic_load_n((uint32_t *)(g_bar + NKV_REG_CSTS), __ATOMIC_ACQUIRE) & NKV_CSTS_RDY); i++)
		nkv_shm_test_poll(g_shm, false);
	CHECK(__atomic_load_n((uint32_t *)(g_bar + NKV_REG_CSTS), __ATOMIC_ACQUIRE) & NKV_CSTS_RDY, "CSTS.RDY");
	unsigned slot = 0;
	submit(0, 0, slot, adm(0x09, 0x07, 2u << 16 | 2u, 0), 1); /* Set Features Number of Queues: 3 and 3 */
	slot++;
	for (uint16_t q = 1; q <= 3; q++) {
		nkv_shm_test_poll(g_shm, false);
		uint32_t iv = q == 3 ? 2 : 1;
		submit(0, 0, slot, adm(NKV_ADM_CREATE_CQ, (15u << 16) | q, iv << 16 | 3, IOVA + (1 + q) * PG), (uint16_t)(slot + 1));
		slot++;
		nkv_shm_test_poll(g_shm, false);
		submit(0, 0, slot, adm(NKV_ADM_CREATE_SQ, (15u << 16) | q, (uint32_t)q << 16 | 1, IOVA + (4 + q) * PG),
		       (uint16_t)(slot + 1));
		slot++;
		nkv_shm_test_poll(g_shm, false);
	}
	for (unsigned i = 0; i < slot; i++)
		CHECK(cqe(1, i) == 0, "admin command %u: status %d", i, cqe(1, i));
	(void)efd_count(efd);

	/* a Store on SQ 1 and SQ 2 (both CQs on vector 1), posted by one pass: one interrupt */
	struct nkv_sqe s;
	memset(g_mem + 10 * PG, 'v', PG);
	nkv_dev_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"k1", 2, PG, IOVA + 10 * PG, 0);
	submit(1, 5, 0, s, 1);
	nkv_dev_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"k2", 2, PG, IOVA + 10 * PG, 0);
	submit(2, 6, 0, s, 1);
	int seen = passes_until(2, 0, 3, 0);
	CHECK(seen > 0, "both Stores completed, their CQEs posted by one pass (%d, %d)", cqe(2, 0), cqe(3, 0));
	uint64_t n = efd_count(efd);
	CHECK(n == 1, "CQs 1 and 2 share vector 1: %llu interrupt(s) for one pass (want 1)", (unsigned long long)n);
	/* CQ 1 and CQ 3 (vectors 1 and 2) in one pass: one interrupt each */
	nkv_dev_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"k3", 2, PG, IOVA + 10 * PG, 0);
	submit(1, 5, 1, s, 2);
	nkv_dev_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)"k4", 2, PG, IOVA + 10 * PG, 0);
	submit(3, 7, 0, s, 1);
	CHECK(passes_until(2, 1, 4, 0) > 0, "CQEs of CQs 1 and 3 posted by one pass");
	n = efd_count(efd);
	CHECK(cqe(2, 1) == 0 && cqe(4, 0) == 0 && n == 2, "vectors 1 and 2 in one pass: %llu interrupts (want 2)",
	      (unsigned long long)n);

	close(g_sock);
	CHECK(nkv_shm_test_destroy(g_shm, 10000) == 0, "the controller is reaped");
	munmap(g_bar, nkv_shm_reg_size(4));
	munmap(g_mem, PAGES * PG);
	close(regfd);
	close(memfd);
	close(efd);
	nkv_target_destroy(tgt);
	printf("%u passed, %u failed\n", g_pass, g_fail);
	return g_fail ? 1 : 0;
}
