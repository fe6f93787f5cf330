/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_host.c - the raw shared-memory host shared by shm_proto.c and shm_abuse.c (see shm_host.h).
 * Nothing here counts a check: each test decides what a failure means for it.
 */
#include "shm_host.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/fdpass.h"

uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

uint32_t rd32(struct host *h, uint32_t off)
{
	return __atomic_load_n((uint32_t *)(h->regs + off), __ATOMIC_ACQUIRE);
}

void wr32(struct host *h, uint32_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(h->regs + off), v, __ATOMIC_RELEASE);
}

uint64_t rd64(struct host *h, uint32_t off)
{
	return rd32(h, off) | (uint64_t)rd32(h, off + 4) << 32;
}

void wr64(struct host *h, uint32_t off, uint64_t v)
{
	wr32(h, off, (uint32_t)v);
	wr32(h, off + 4, (uint32_t)(v >> 32));
}

void hdr_init(struct nkv_shm_hdr *hd, uint16_t op)
{
	hd->magic = NKV_SHM_MAGIC;
	hd->version = NKV_SHM_VERSION;
	hd->op = op;
}

int recv_reply(int sock, struct nkv_shm_reply *rep, int *fd, int ms)
{
	struct pollfd pf = {.fd = sock, .events = POLLIN};
	int got;

	if (fd)
		*fd = -1;
	if (poll(&pf, 1, ms) <= 0)
		return -1;
	ssize_t n = nkv_recv_fd(sock, rep, sizeof(*rep), &got, 0);
	if (n == 0 || n == -ECONNRESET)
		return 0;
	if (n != (ssize_t)sizeof(*rep)) {
		if (got >= 0)
			close(got);
		return -1;
	}
	if (fd)
		*fd = got;
	else if (got >= 0)
		close(got);
	return 1;
}

bool sock_closed(int sock, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	char b[64];

	/* poll wakes at once on EOF; the 50 ms tick only bounds how late after @ms the answer is "no"
	 * (shm_abuse asks with @ms as short as 50). */
	while (now_ms() < end) {
		struct pollfd pf = {.fd = sock, .events = POLLIN};
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t n = recv(sock, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
	}
	return false;
}

int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (strlen(path) >= sizeof(sa.sun_path)) { /* the tests' paths fit; say so if one does not */
		fprintf(stderr, "socket path too long: %s\n", path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int host_hello(struct host *h, const char *path, const uint8_t hostid[16], const char *hostnqn)
{
	struct nkv_shm_hello m;
	int fd;

	memset(h, 0, sizeof(*h));
	h->memfd = -1;
	if ((h->sock = unix_connect(path)) < 0)
		return -EPROTO;
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, NKV_SHM_HELLO);
	memcpy(m.hostid, hostid, sizeof(m.hostid));
	snprintf(m.hostnqn, sizeof(m.hostnqn), "%s", hostnqn);
	if (send(h->sock, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -EPROTO;
	if (recv_reply(h->sock, &h->hello, &fd, TMO_MS) != 1)
		return -EPROTO;
	if (h->hello.status != 0) {
		if (fd >= 0)
			close(fd);
		return h->hello.status;
	}
	if (fd < 0 || h->hello.reg_size < NKV_SHM_DB_BASE + 8)
		return -EPROTO;
	h->reg_size = h->hello.reg_size;
	h->regs = mmap(NULL, h->reg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h->regs == MAP_FAILED) {
		h->regs = NULL;
		return -EPROTO;
	}
	return 0;
}

int host_req(struct host *h, uint16_t op, uint64_t iova, uint64_t len, uint64_t off, uint32_t flags, int fd)
{
	struct nkv_shm_reg m = {.iova = iova, .len = len, .offset = off, .flags = flags};
	struct nkv_shm_reply rep;

	hdr_init(&m.hdr, op);
	if (nkv_send_fd(h->sock, &m, sizeof(m), fd) != (ssize_t)sizeof(m))
		return -EPROTO;
	if (recv_reply(h->sock, &rep, NULL, TMO_MS) != 1 || rep.hdr.op != op)
		return -EPROTO;
	return rep.status;
}

int mem_create(uint64_t len, bool seal, uint8_t **va)
{
	int fd = memfd_create("shm-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)len) < 0 || (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)) {
		close(fd);
		return -1;
	}
	if (va && (*va = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		*va = NULL;
		close(fd);
		return -1;
	}
	return fd;
}

int host_main_region(struct host *h, uint64_t len)
{
	/* Sealed: the target refuses a region the host could shrink under it. */
	if ((h->memfd = mem_create(len, true, &h->mem)) < 0)
		return -ENOMEM;
	h->mem_len = len;
	return host_req(h, NKV_SHM_REG, MAIN_IOVA, len, 0, 0, h->memfd);
}

void host_close(struct host *h)
{
	if (h->sock >= 0)
		close(h->sock);
	if (h->regs)
		munmap(h->regs, h->reg_size);
	if (h->mem)
		munmap(h->mem, h->mem_len);
	if (h->memfd >= 0)
		close(h->memfd);
	memset(h, 0, sizeof(*h));
	h->sock = h->memfd = -1;
}

void *hva(struct host *h, uint64_t iova)
{
	return h->mem + (iova - MAIN_IOVA);
}

void host_rings(struct host *h, uint16_t qid, uint64_t sq_iova, uint16_t sqn, uint64_t cq_iova, uint16_t cqn,
		struct nkv_dev_sq *sq, struct nkv_dev_cq *cq)
{
	*sq = (struct nkv_dev_sq){.ring = hva(h, sq_iova), .db = (volatile uint32_t *)(h->regs + nkv_db_sq_tail(qid)),
				  .size = sqn};
	*cq = (struct nkv_dev_cq){.ring = hva(h, cq_iova), .db = (volatile uint32_t *)(h->regs + nkv_db_cq_head(qid)),
				  .size = cqn, .phase = 1};
}

uint32_t wait_any(struct host *h, uint32_t bits, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	uint32_t v;

	while (!((v = rd32(h, NKV_REG_CSTS)) & bits) && now_ms() < end)
		usleep(200);
	return v;
}

int cqe_code(const struct nkv_cqe *e)
{
	return (int)((nkv_get16(&e->status) >> 1) & 0x7ffu);
}

int submit(struct host *h, struct nkv_dev_sq *sq, struct nkv_sqe *sqe)
{
	sqe->cid = ++h->cid;
	int slot = nkv_sq_put(sq, sqe);
	if (slot >= 0)
		nkv_sq_ring(sq);
	return slot;
}

struct nkv_sqe sqe_adm(uint8_t opc, uint32_t cdw10, uint32_t cdw11, uint64_t prp1)
{
	struct nkv_sqe s;

	memset(&s, 0, sizeof(s));
	s.opc = opc;
	nkv_put32(&s.cdw10, cdw10);
	nkv_put32(&s.cdw11, cdw11);
	nkv_put64(s.dptr, prp1);
	return s;
}
