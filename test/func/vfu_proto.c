/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfu_proto.c - the vfio-user server (src/transport/vfio_user*.c) driven by a raw client that
 * speaks the protocol byte by byte (no libnkv): version negotiation, device, region and IRQ info,
 * PCI config space (class code, BAR sizing, the capability chain), DMA map/unmap and their limits,
 * SET_IRQS, BAR0 through messages and through the mmapped register page, a bring-up to CSTS.RDY
 * with Identify and a KV Store/Retrieve from SQEs written into mapped memory, DEVICE_RESET, unmap
 * of memory in use, a client gone mid-I/O, unknown commands, broken framing, who may attach
 * (another uid, a host NQN off the allowlist, a second client), and whose memory may be mapped
 * unsealed (this process's user: a tmpfs memfd or a hugetlbfs file, as SPDK's host sends; not a
 * socket-group member of another uid; never a device or a disk file).
 *
 * Usage: vfu_proto mem|rados. Every wait is bounded; the last line is "N passed, N failed".
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/vfio_user.h"
#include "harness.h"
#include "nkv/nkv_dev.h"
#undef SC /* shm_host.h's is the same, typed */
#include "shm_host.h"

#define ACLNQN "nqn.2026-11.io.rados-nkv:vfu-acl"
#define NAMEDHOST "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000f00d"
#define MAX_REGIONS 8
#define NVEC 65u /* max_io_queues 64 + the admin queue */
#define MIB_ (1u << 20)

static char g_dir[64], g_sock[128], g_acl[128], g_named[128], g_open[128], g_grp[128];
static uint16_t g_id;

/* ---- a raw vfio-user client ------------------------------------------------------------------------ */

static int vconnect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send a command: header, @plen payload bytes, @nfds descriptors. @return its message ID or -1. */
static int vsend(int fd, uint16_t cmd, uint32_t flags, const void *pl, uint32_t plen, const int *fds, unsigned nfds)
{
	uint8_t *m = malloc(16 + (size_t)plen);
	struct nkv_vfu_hdr h = {.msg_id = ++g_id, .cmd = cmd, .msg_size = 16 + plen, .flags = flags};
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(32 * sizeof(int))];
	} cm;
	memcpy(m, &h, 16);
	if (plen)
		memcpy(m + 16, pl, plen);
	struct iovec iov = {.iov_base = m, .iov_len = 16 + (size_t)plen};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	free(m);
	return n == (ssize_t)(16 + plen) ? h.msg_id : -1;
}

static bool read_full(int fd, void *buf, size_t len, int *rfd, int ms)
{
	uint8_t *b = buf;
	uint64_t end = now_ms() + (uint64_t)ms;

	while (len) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = (int)(end - now_ms());
		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return false;
		union {
			struct cmsghdr c;
			char b[CMSG_SPACE(4 * sizeof(int))];
		} cm;
		struct iovec iov = {.iov_base = b, .iov_len = len};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return false;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int f;
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (rfd && *rfd < 0)
					*rfd = f;
				else
					close(f);
			}
		b += n;
		len -= (size_t)n;
	}
	return true;
}

/* Receive one reply into @buf (its payload: up to @cap bytes). @return its error (0 ok, an errno),
 * -1 when none came (closed, timeout, a malformed one). *@plen: the payload length. */
static int vrecv(int fd, uint16_t id, void *buf, uint32_t cap, uint32_t *plen, int *rfd)
{
	struct nkv_vfu_hdr h;

	if (rfd)
		*rfd = -1;
	if (!read_full(fd, &h, 16, rfd, TMO_MS) || h.msg_size < 16 || h.msg_size - 16 > cap)
		return -1;
	if (!read_full(fd, buf, h.msg_size - 16, rfd, TMO_MS))
		return -1;
	if (plen)
		*plen = h.msg_size - 16;
	if (h.msg_id != id || (h.flags & NKV_VFU_F_TYPE_MASK) != NKV_VFU_F_REPLY)
		return -1;
	return (h.flags & NKV_VFU_F_ERROR) ? (int)h.error : 0;
}

static uint8_t g_rep[70000];

/* One command and its reply (payload in g_rep). @return as vrecv. */
static int vcall(int fd, uint16_t cmd, const void *pl, uint32_t plen, const int *fds, unsigned nfds, uint32_t *rlen,
		 int *rfd)
{
	int id = vsend(fd, cmd, 0, pl, plen, fds, nfds);
	return id < 0 ? -1 : vrecv(fd, (uint16_t)id, g_rep, sizeof(g_rep), rlen, rfd);
}

static int version(int fd, uint16_t major, const char *json)
{
	uint8_t b[512] = {0};
	size_t jl = json ? strlen(json) + 1 : 0;

	nkv_put16(b, major);
	nkv_put16(b + 2, 0);
	if (json)
		memcpy(b + 4, json, jl);
	return vcall(fd, NKV_VFU_VERSION, b, 4 + (uint32_t)jl, NULL, 0, NULL, NULL);
}

#define QEMU_CAPS "{\"capabilities\":{\"migration\":{\"pgsize\":4096,\"max_bitmap_size\":268435456},\"max_msg_fds\":16," \
		  "\"max_data_xfer_size\":1048576,\"pgsizes\":4096,\"max_dma_maps\":65535,\"write_multiple\":true}}"

/* A negotiated connection to @path, or -1. */
static int vopen(const char *path)
{
	int fd = vconnect(path);

	if (fd >= 0 && version(fd, 0, QEMU_CAPS) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool closed_by_peer(int fd)
{
	char b[256];
	uint64_t end = now_ms() + TMO_MS;

	while (now_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 50) <= 0)
			continue;
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
	}
	return false;
}

static int rw(int fd, bool wr, uint32_t region, uint64_t off, void *data, uint32_t n)
{
	uint8_t b[16 + 4096];
	uint32_t rl = 0;

	nkv_put64(b, off);
	nkv_put32(b + 8, region);
	nkv_put32(b + 12, n);
	if (wr)
		memcpy(b + 16, data, n);
	int rc = vcall(fd, wr ? NKV_VFU_REGION_WRITE : NKV_VFU_REGION_READ, b, 16 + (wr ? n : 0), NULL, 0, &rl, NULL);
	if (rc == 0 && !wr) {
		if (rl != 16 + n)
			return -1;
		memcpy(data, g_rep + 16, n);
	}
	return rc;
}

static uint32_t rd_cfg32(int fd, uint32_t off)
{
	uint8_t b[4] = {0xff, 0xff, 0xff, 0xff};
	rw(fd, false, NKV_VFU_PCI_CONFIG, off, b, 4);
	return nkv_get32(b);
}

static void wr_cfg32(int fd, uint32_t off, uint32_t v)
{
	uint8_t b[4];
	nkv_put32(b, v);
	rw(fd, true, NKV_VFU_PCI_CONFIG, off, b, 4);
}

static uint32_t rd_bar0(int fd, uint32_t off)
{
	uint8_t b[4] = {0};
	rw(fd, false, NKV_VFU_PCI_BAR0, off, b, 4);
	return nkv_get32(b);
}

static int wr_bar0(int fd, uint32_t off, uint32_t v)
{
	uint8_t b[4];
	nkv_put32(b, v);
	return rw(fd, true, NKV_VFU_PCI_BAR0, off, b, 4);
}

static int dma_map(int fd, uint64_t addr, uint64_t size, uint64_t off, uint32_t flags, const int *fds, unsigned nfds)
{
	uint8_t b[32];

	nkv_put32(b, 32);
	nkv_put32(b + 4, flags);
	nkv_put64(b + 8, off);
	nkv_put64(b + 16, addr);
	nkv_put64(b + 24, size);
	return vcall(fd, NKV_VFU_DMA_MAP, b, 32, fds, nfds, NULL, NULL);
}

static int dma_unmap(int fd, uint64_t addr, uint64_t size, uint32_t flags)
{
	uint8_t b[24];
	uint32_t rl = 0;

	nkv_put32(b, 24);
	nkv_put32(b + 4, flags);
	nkv_put64(b + 8, addr);
	nkv_put64(b + 16, size);
	int rc = vcall(fd, NKV_VFU_DMA_UNMAP, b, 24, NULL, 0, &rl, NULL);
	return rc == 0 && (rl != 24 || memcmp(g_rep, b, 24) != 0) ? -1 : rc;
}

static int set_irqs(int fd, uint32_t flags, uint32_t index, uint32_t start, uint32_t count, const int *fds, unsigned nfds)
{
	uint8_t b[20];

	nkv_put32(b, 20);
	nkv_put32(b + 4, flags);
	nkv_put32(b + 8, index);
	nkv_put32(b + 12, start);
	nkv_put32(b + 16, count);
	return vcall(fd, NKV_VFU_DEVICE_SET_IRQS, b, 20, fds, nfds, NULL, NULL);
}

static int region_info(int fd, uint32_t index, uint32_t argsz, uint32_t *rl, int *rfd)
{
	uint8_t b[32] = {0};

	nkv_put32(b, argsz);
	nkv_put32(b + 8, index);
	return vcall(fd, NKV_VFU_DEVICE_GET_REGION_INFO, b, 32, NULL, 0, rl, rfd);
}

static bool efd_fired(int efd, int ms)
{
	struct pollfd pf = {.fd = efd, .events = POLLIN};
	uint64_t v;

	if (poll(&pf, 1, ms) != 1)
		return false;
	return read(efd, &v, sizeof(v)) == sizeof(v);
}

/* ---- version, info, config space ------------------------------------------------------------------- */

static void test_version(void)
{
	int fd = vconnect(g_sock);
	uint8_t junk[4] = {0};

	CHECK(fd >= 0, "connect %s", g_sock);
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_INFO, junk, 4, NULL, 0, NULL, NULL) == EINVAL, "a command before VERSION");
	CHECK(version(fd, 0, "{") == EINVAL, "VERSION with broken JSON");
	CHECK(version(fd, 0, "[]") == EINVAL, "VERSION with JSON that is not an object");
	CHECK(version(fd, 0, "{\"capabilities\":[1]}") == EINVAL, "capabilities not an object");
	CHECK(version(fd, 0, "{\"capabilities\":{\"max_msg_fds\":\"many\"}}") == EINVAL, "max_msg_fds a string");
	CHECK(version(fd, 0, "{\"capabilities\":{\"pgsizes\":-4096}}") == EINVAL, "pgsizes negative");
	CHECK(version(fd, 0, "{\"a\":[[[[[[[[[[[[1]]]]]]]]]]]]}") == EINVAL, "JSON nested too deep");
	uint8_t nonul[8] = {0, 0, 0, 0, '{', '}', 'x', 'x'};
	CHECK(vcall(fd, NKV_VFU_VERSION, nonul, sizeof(nonul), NULL, 0, NULL, NULL) == EINVAL, "JSON without its NUL");
	uint32_t rl = 0;
	uint8_t v[4] = {0};
	int rc = vcall(fd, NKV_VFU_VERSION, v, 4, NULL, 0, &rl, NULL);
	CHECK(rc == 0 && rl > 5 && nkv_get16(g_rep) == 0 && nkv_get16(g_rep + 2) == 0 && g_rep[rl - 1] == 0 &&
	      strstr((char *)g_rep + 4, "\"max_msg_fds\":16") && strstr((char *)g_rep + 4, "\"pgsizes\":4096") &&
	      !strstr((char *)g_rep + 4, "migration"),
	      "VERSION 0.0 without capabilities: rc %d, reply '%.*s'", rc, rl > 4 ? (int)rl - 4 : 0, (char *)g_rep + 4);
	CHECK(version(fd, 0, QEMU_CAPS) == EINVAL, "a second VERSION");
	close(fd);

	fd = vconnect(g_sock);
	CHECK(version(fd, 1, NULL) == ENOTSUP && closed_by_peer(fd), "VERSION 1.0: refused and closed");
	close(fd);
	fd = vopen(g_sock);
	CHECK(fd >= 0, "VERSION with QEMU's capabilities");
	close(fd);
}

static void test_info(void)
{
	int fd = vopen(g_sock), rfd = -1;
	uint8_t b[16] = {0};
	uint32_t rl = 0;

	nkv_put32(b, 16);
	int rc = vcall(fd, NKV_VFU_DEVICE_GET_INFO, b, 16, NULL, 0, &rl, NULL);
	CHECK(rc == 0 && rl == 16 && nkv_get32(g_rep + 4) == (NKV_VFU_DEV_RESET | NKV_VFU_DEV_PCI) &&
	      nkv_get32(g_rep + 8) == 9 && nkv_get32(g_rep + 12) == 5, "DEVICE_GET_INFO: rc %d flags %x regions %u irqs %u",
	      rc, nkv_get32(g_rep + 4), nkv_get32(g_rep + 8), nkv_get32(g_rep + 12));

	rc = region_info(fd, NKV_VFU_PCI_BAR0, 32, &rl, &rfd);
	/* too small for the capability: the size needed, and no CAPS flag (QEMU refuses a CAPS reply
	 * whose cap_offset is outside it, and asks again with the argsz given) */
	CHECK(rc == 0 && rl == 32 && nkv_get32(g_rep) == 64 && !(nkv_get32(g_rep + 4) & NKV_VFU_REGION_CAPS) &&
	      nkv_get32(g_rep + 12) == 0 && (nkv_get32(g_rep + 4) & NKV_VFU_REGION_MMAP) && rfd >= 0,
	      "BAR0 info with argsz 32: argsz %u (64 needed), flags %x, fd %d", nkv_get32(g_rep), nkv_get32(g_rep + 4), rfd);
	if (rfd >= 0)
		close(rfd);
	rc = region_info(fd, NKV_VFU_PCI_BAR0, 64, &rl, &rfd);
	uint64_t size = nkv_get64(g_rep + 16);
	CHECK(rc == 0 && rl == 64 && (nkv_get32(g_rep + 4) & NKV_VFU_REGION_CAPS) && nkv_get32(g_rep + 12) == 32 &&
	      nkv_get16(g_rep + 32) == NKV_VFU_CAP_SPARSE_MMAP &&
	      nkv_get32(g_rep + 40) == 1 && nkv_get64(g_rep + 48) == 0 && nkv_get64(g_rep + 56) == nkv_shm_reg_size(64) &&
	      size >= 8192 && !(size & (size - 1)), "BAR0 sparse mmap area [%llu, +%llu), BAR size %llu",
	      (unsigned long long)nkv_get64(g_rep + 48), (unsigned long long)nkv_get64(g_rep + 56), (unsigned long long)size);
	if (rfd >= 0)
		close(rfd);
	rc = region_info(fd, NKV_VFU_PCI_CONFIG, 32, &rl, NULL);
	CHECK(rc == 0 && nkv_get64(g_rep + 16) == 4096 && nkv_get32(g_rep + 4) == 3, "config region: 4 KiB read/write");
	rc = region_info(fd, NKV_VFU_MSIX_BAR, 32, &rl, NULL);
	CHECK(rc == 0 && nkv_get64(g_rep + 16) == NKV_VFU_MSIX_BAR_SIZE, "BAR4 (MSI-X) size");
	rc = region_info(fd, NKV_VFU_PCI_BAR2, 32, &rl, NULL);
	CHECK(rc == 0 && nkv_get64(g_rep + 16) == 0 && nkv_get32(g_rep + 4) == 0, "BAR2 absent");
	CHECK(region_info(fd, 9, 32, &rl, NULL) == EINVAL, "region index 9");
	CHECK(region_info(fd, 0, 8, &rl, NULL) == EINVAL, "region info with argsz 8");
	/* SPDK's host (lib/vfio_user/host) sends its whole reply buffer as the request, as for the VFIO
	 * ioctl: argsz 4064 bytes of payload, the structure followed by zeros. The bytes past the
	 * structure are ignored. */
	static uint8_t big[4064];
	nkv_put32(big, sizeof(big));
	nkv_put32(big + 8, NKV_VFU_PCI_BAR0);
	rfd = -1;
	rc = vcall(fd, NKV_VFU_DEVICE_GET_REGION_INFO, big, sizeof(big), NULL, 0, &rl, &rfd);
	CHECK(rc == 0 && rl == 64 && (nkv_get32(g_rep + 4) & NKV_VFU_REGION_CAPS) && rfd >= 0,
	      "BAR0 info sent as a 4064-byte buffer (SPDK): rc %d, %u bytes, fd %d", rc, rl, rfd);
	if (rfd >= 0)
		close(rfd);
	nkv_put32(big, 16);
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_REGION_INFO, big, sizeof(big), NULL, 0, &rl, NULL) == EINVAL,
	      "region info with trailing bytes and argsz 16");

	uint8_t q[16] = {0};
	nkv_put32(q, 16);
	nkv_put32(q + 8, NKV_VFU_PCI_MSIX_IRQ);
	rc = vcall(fd, NKV_VFU_DEVICE_GET_IRQ_INFO, q, 16, NULL, 0, &rl, NULL);
	CHECK(rc == 0 && nkv_get32(g_rep + 12) == NVEC && (nkv_get32(g_rep + 4) & NKV_VFU_IRQ_INFO_EVENTFD) &&
	      (nkv_get32(g_rep + 4) & NKV_VFU_IRQ_INFO_MASKABLE), "MSI-X: %u vectors, flags %x", nkv_get32(g_rep + 12),
	      nkv_get32(g_rep + 4));
	nkv_put32(q + 8, NKV_VFU_PCI_INTX_IRQ);
	rc = vcall(fd, NKV_VFU_DEVICE_GET_IRQ_INFO, q, 16, NULL, 0, &rl, NULL);
	CHECK(rc == 0 && nkv_get32(g_rep + 12) == 0, "no INTx");
	nkv_put32(q + 8, 5);
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_IRQ_INFO, q, 16, NULL, 0, &rl, NULL) == EINVAL, "IRQ index 5");
	close(fd);
}

static void test_config(void)
{
	int fd = vopen(g_sock);

	CHECK((rd_cfg32(fd, 0x08) >> 8) == 0x010802, "class code %06x", rd_cfg32(fd, 0x08) >> 8);
	CHECK((rd_cfg32(fd, 0x00) & 0xffff) == NKV_VFU_PCI_VENDOR, "vendor ID");
	CHECK((rd_cfg32(fd, 0x04) >> 16) & 0x10, "status: capability list");
	wr_cfg32(fd, 0x00, 0x12345678);
	CHECK((rd_cfg32(fd, 0x00) & 0xffff) == NKV_VFU_PCI_VENDOR, "vendor ID is read-only");
	/* BAR sizing: all ones in, the size mask out */
	uint32_t bar0 = rd_cfg32(fd, 0x10);
	CHECK((bar0 & 0xf) == 0x4, "BAR0: 64-bit memory, not prefetchable (%08x)", bar0);
	wr_cfg32(fd, 0x10, 0xffffffffu);
	wr_cfg32(fd, 0x14, 0xffffffffu);
	uint32_t lo = rd_cfg32(fd, 0x10), hi = rd_cfg32(fd, 0x14);
	uint32_t size = ~(lo & ~0xfu) + 1;
	CHECK(hi == 0xffffffffu && (lo & 0xf) == 4 && size >= 8192 && !(size & (size - 1)), "BAR0 sizing: %08x %08x", lo, hi);
	wr_cfg32(fd, 0x10, 0xfe000000u);
	CHECK(rd_cfg32(fd, 0x10) == (0xfe000000u | 4), "BAR0 address programmed");
	wr_cfg32(fd, 0x18, 0xffffffffu);
	CHECK(rd_cfg32(fd, 0x18) == 0, "BAR2 sizing: absent");
	wr_cfg32(fd, 0x20, 0xffffffffu);
	CHECK(rd_cfg32(fd, 0x20) == ~(NKV_VFU_MSIX_BAR_SIZE - 1u), "BAR4 sizing: %08x", rd_cfg32(fd, 0x20));
	/* the capability chain: power management, MSI-X, PCI Express, then the end */
	uint8_t want[] = {0x01, 0x11, 0x10}, got = 0;
	uint32_t at = rd_cfg32(fd, 0x34) & 0xff, msix = 0;
	for (int i = 0; at && i < 8; i++) {
		uint32_t h = rd_cfg32(fd, at);
		if (got < sizeof(want) && (h & 0xff) == want[got])
			got++;
		if ((h & 0xff) == 0x11)
			msix = at;
		at = (h >> 8) & 0xff;
	}
	CHECK(got == 3 && at == 0, "capability chain PM, MSI-X, PCIe (%u found, ends at %02x)", got, at);
	if (msix) {
		uint32_t h = rd_cfg32(fd, msix);
		CHECK(((h >> 16) & 0x7ff) == NVEC - 1, "MSI-X table size %u", ((h >> 16) & 0x7ff) + 1);
		CHECK(rd_cfg32(fd, msix + 4) == NKV_VFU_MSIX_BAR && rd_cfg32(fd, msix + 8) == (NKV_VFU_MSIX_PBA | NKV_VFU_MSIX_BAR),
		      "MSI-X table and PBA in BAR4");
		wr_cfg32(fd, msix, h | 0x80000000u);
		CHECK(rd_cfg32(fd, msix) >> 31, "MSI-X enable is writable");
	}
	CHECK(rd_cfg32(fd, 0x100) == 0, "no extended capabilities");
	uint8_t b[8];
	CHECK(rw(fd, false, NKV_VFU_PCI_CONFIG, 4092, b, 8) == EINVAL, "config read past its end");
	CHECK(rw(fd, false, NKV_VFU_PCI_BAR2, 0, b, 4) == EINVAL, "read of an absent BAR");
	uint8_t big[16];
	nkv_put64(big, 0);
	nkv_put32(big + 8, NKV_VFU_PCI_CONFIG);
	nkv_put32(big + 12, 1u << 20);
	CHECK(vcall(fd, NKV_VFU_REGION_READ, big, 16, NULL, 0, NULL, NULL) == EINVAL, "a read above max_data_xfer_size");
	close(fd);
}

/* ---- DMA, IRQs --------------------------------------------------------------------------------------- */

/* A hugetlbfs mount of this machine with a free huge page, or "" (no huge pages here). */
static void hugetlbfs_dir(char *out, size_t len)
{
	FILE *m = fopen("/proc/mounts", "re");
	char dev[256], dir[256], type[64];

	*out = 0;
	while (m && fscanf(m, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3)
		if (!strcmp(type, "hugetlbfs") && access(dir, W_OK) == 0) {
			snprintf(out, len, "%s", dir);
			break;
		}
	if (m)
		fclose(m);
}

/*
 * Which descriptors DMA_MAP takes without seals. A client of the daemon's own user (this process)
 * or root could stop the daemon anyway, so memory it could shrink is accepted from it: a tmpfs
 * memfd without seals (DPDK's --no-huge memory, what SPDK's host maps) and a hugetlbfs file (DPDK's
 * huge pages, which cannot be sealed). Never anything but a regular file of memory: not a device
 * (/dev/zero), not a file on a disk.
 */
static void dma_fd_kinds(int fd, int loose)
{
	CHECK(dma_map(fd, 0x300000, 4 * PG, 0, 3, &loose, 1) == 0,
	      "DMA_MAP of a memfd not sealed against shrinking, from the daemon's own user");
	CHECK(dma_unmap(fd, 0x300000, 4 * PG, 0) == 0, "its DMA_UNMAP");
	int zero = open("/dev/zero", O_RDWR | O_CLOEXEC);
	CHECK(zero >= 0 && dma_map(fd, 0x300000, 4 * PG, 0, 3, &zero, 1) == EPERM, "DMA_MAP of /dev/zero");
	if (zero >= 0)
		close(zero);
	char path[192], huge[256];
	snprintf(path, sizeof(path), "%s/disk-file", g_dir);
	int disk = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	struct statfs sf;
	if (disk >= 0 && ftruncate(disk, 4 * PG) == 0 && fstatfs(disk, &sf) == 0 && sf.f_type != TMPFS_MAGIC)
		CHECK(dma_map(fd, 0x300000, 4 * PG, 0, 3, &disk, 1) == EPERM, "DMA_MAP of a file on a disk filesystem");
	if (disk >= 0)
		close(disk);
	unlink(path);
	hugetlbfs_dir(huge, sizeof(huge));
	snprintf(path, sizeof(path), "%s/vfu_proto.%d", huge, (int)getpid());
	int h = *huge ? open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600) : -1;
	if (h >= 0)
		unlink(path);
	if (h >= 0 && fallocate(h, 0, 0, 2 * MIB_) == 0) {
		CHECK(dma_map(fd, 0x40000000, 2 * MIB_, 0, 3, &h, 1) == 0, "DMA_MAP of a hugetlbfs file (%s)", huge);
		CHECK(dma_unmap(fd, 0x40000000, 2 * MIB_, 0) == 0, "its DMA_UNMAP");
	} else {
		printf("  (no hugetlbfs with a free huge page here: that DMA_MAP is not tried)\n");
	}
	if (h >= 0)
		close(h);
}

static void test_dma(void)
{
	int fd = vopen(g_sock), p[2];
	uint8_t *va;
	int mem = mem_create(64 * PG, true, &va), loose = mem_create(4 * PG, false, NULL);

	CHECK(pipe(p) == 0, "pipe");
	CHECK(dma_map(fd, 0x100000, 4 * PG, 0, 3, &p[0], 1) == EPERM, "DMA_MAP of a pipe");
	dma_fd_kinds(fd, loose);
	CHECK(dma_map(fd, 0x100800, 4 * PG, 0, 3, &mem, 1) == EINVAL, "DMA_MAP at an unaligned address");
	CHECK(dma_map(fd, 0x100000, 0, 0, 3, &mem, 1) == EINVAL, "DMA_MAP of 0 bytes");
	CHECK(dma_map(fd, 0x100000, 128 * PG, 0, 3, &mem, 1) == EINVAL, "DMA_MAP past the fd's end");
	CHECK(dma_map(fd, 0xfffffffffffff000ull, 4 * PG, 0, 3, &mem, 1) == EINVAL, "DMA_MAP wrapping around");
	CHECK(dma_map(fd, 0x100000, 4 * PG, 0, 0x4, &mem, 1) == EINVAL, "DMA_MAP with unknown flags");
	int two[2] = {mem, mem};
	CHECK(dma_map(fd, 0x100000, 4 * PG, 0, 3, two, 2) == EINVAL, "DMA_MAP with two fds");
	CHECK(dma_map(fd, 0x100000, 4 * PG, 0, 3, &mem, 1) == 0, "DMA_MAP");
	CHECK(dma_map(fd, 0x102000, 4 * PG, 0, 3, &mem, 1) == EEXIST, "DMA_MAP overlapping");
	CHECK(dma_map(fd, 0x200000, 4 * PG, 0, 3, NULL, 0) == 0, "DMA_MAP without an fd");
	CHECK(dma_map(fd, 0x201000, 4 * PG, 0, 3, &mem, 1) == EEXIST, "DMA_MAP overlapping one without an fd");
	CHECK(dma_unmap(fd, 0x100000, 8 * PG, 0) == ENOENT, "DMA_UNMAP of the wrong size");
	CHECK(dma_unmap(fd, 0x200000, 4 * PG, 0) == 0, "DMA_UNMAP of the one without an fd");
	/* SPDK's host sends the region's fd again with DMA_UNMAP: it is ignored (and closed) */
	uint8_t um[24];
	nkv_put32(um, 24);
	nkv_put32(um + 4, 0);
	nkv_put64(um + 8, 0x100000);
	nkv_put64(um + 16, 4 * PG);
	CHECK(vcall(fd, NKV_VFU_DMA_UNMAP, um, 24, two, 2, NULL, NULL) == EINVAL, "DMA_UNMAP with two fds");
	CHECK(vcall(fd, NKV_VFU_DMA_UNMAP, um, 24, &mem, 1, NULL, NULL) == 0, "DMA_UNMAP with the region's fd (SPDK)");
	CHECK(dma_map(fd, 0x100000, 4 * PG, 0, 3, &mem, 1) == 0, "DMA_MAP again");
	CHECK(dma_unmap(fd, 0x100000, 4 * PG, 1) == ENOTSUP, "DMA_UNMAP asking for a dirty bitmap");
	/* the region limit counts both kinds */
	int n = 1, rc = 0;
	for (uint64_t a = 0x1000000; n < MAX_REGIONS + 2 && (rc = dma_map(fd, a, PG, 0, 1, n % 2 ? &mem : NULL, n % 2)) == 0;
	     a += 0x1000000)
		n++;
	CHECK(n == MAX_REGIONS && rc == ENOSPC, "regions mapped before ENOSPC: %d (limit %d), rc %d", n, MAX_REGIONS, rc);
	CHECK(dma_unmap(fd, 0, 0, NKV_VFU_UNMAP_ALL) == 0, "DMA_UNMAP of everything");
	CHECK(dma_unmap(fd, 0x100000, 4 * PG, 0) == ENOENT, "nothing left after unmapping everything");
	close(fd);
	close(p[0]);
	close(p[1]);
	close(loose);
	close(mem);
	munmap(va, 64 * PG);
}

static void test_irqs(void)
{
	int fd = vopen(g_sock), efd = eventfd(0, EFD_CLOEXEC), p[2];
	const uint32_t TRIG_EFD = NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_TRIGGER;
	const uint32_t TRIG = NKV_VFU_IRQ_SET_DATA_NONE | NKV_VFU_IRQ_SET_ACTION_TRIGGER;

	CHECK(pipe(p) == 0, "pipe");
	CHECK(set_irqs(fd, TRIG_EFD, NKV_VFU_PCI_MSIX_IRQ, 0, 1, &p[1], 1) == EINVAL, "a pipe as an interrupt eventfd");
	CHECK(set_irqs(fd, TRIG_EFD, NKV_VFU_PCI_MSIX_IRQ, NVEC - 1, 2, &efd, 1) == EINVAL, "vectors past the last");
	CHECK(set_irqs(fd, TRIG_EFD, NKV_VFU_PCI_INTX_IRQ, 0, 1, &efd, 1) == EINVAL, "an INTx vector");
	CHECK(set_irqs(fd, NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_MASK, NKV_VFU_PCI_MSIX_IRQ, 0, 1, &efd, 1) ==
		      ENOTSUP, "an eventfd for mask events");
	CHECK(set_irqs(fd, TRIG | NKV_VFU_IRQ_SET_DATA_BOOL, NKV_VFU_PCI_MSIX_IRQ, 0, 1, NULL, 0) == EINVAL,
	      "two data flags");
	CHECK(set_irqs(fd, TRIG_EFD, NKV_VFU_PCI_MSIX_IRQ, 3, 1, &efd, 1) == 0, "bind vector 3");
	CHECK(set_irqs(fd, TRIG, NKV_VFU_PCI_MSIX_IRQ, 3, 1, NULL, 0) == 0 && efd_fired(efd, TMO_MS), "trigger vector 3");
	CHECK(set_irqs(fd, NKV_VFU_IRQ_SET_DATA_NONE | NKV_VFU_IRQ_SET_ACTION_MASK, NKV_VFU_PCI_MSIX_IRQ, 3, 1, NULL, 0) == 0,
	      "mask vector 3");
	CHECK(set_irqs(fd, TRIG, NKV_VFU_PCI_MSIX_IRQ, 3, 1, NULL, 0) == 0 && !efd_fired(efd, 200),
	      "a masked vector does not fire");
	uint8_t pba[4] = {0};
	CHECK(rw(fd, false, NKV_VFU_MSIX_BAR, NKV_VFU_MSIX_PBA, pba, 4) == 0 && pba[0] == 0x08, "PBA: vector 3 pending (%02x)",
	      pba[0]);
	CHECK(set_irqs(fd, NKV_VFU_IRQ_SET_DATA_NONE | NKV_VFU_IRQ_SET_ACTION_UNMASK, NKV_VFU_PCI_MSIX_IRQ, 3, 1, NULL, 0) ==
			  0 && efd_fired(efd, TMO_MS), "unmasking sends the pending interrupt");
	CHECK(rw(fd, false, NKV_VFU_MSIX_BAR, NKV_VFU_MSIX_PBA, pba, 4) == 0 && pba[0] == 0, "PBA clear again");
	uint8_t vc[4];
	CHECK(rw(fd, false, NKV_VFU_MSIX_BAR, 3 * 16 + 12, vc, 4) == 0 && nkv_get32(vc) == 1, "MSI-X entry starts masked");
	nkv_put32(vc, 0);
	CHECK(rw(fd, true, NKV_VFU_MSIX_BAR, 3 * 16 + 12, vc, 4) == 0, "MSI-X table write");
	CHECK(set_irqs(fd, TRIG, NKV_VFU_PCI_MSIX_IRQ, 0, 0, NULL, 0) == 0, "every vector off (count 0)");
	CHECK(set_irqs(fd, TRIG, NKV_VFU_PCI_MSIX_IRQ, 3, 1, NULL, 0) == 0 && !efd_fired(efd, 200),
	      "no interrupt after the teardown");
	close(fd);
	close(efd);
	close(p[0]);
	close(p[1]);
}

/* ---- bring-up, KV, reset, in-use unmap, client death ------------------------------------------------- */

struct vhost {
	int fd, regfd, efd[2];
	struct host h;           /* regs: the mmapped BAR0; mem: the main region */
};

static uint64_t g_brk;

static uint64_t halloc(struct host *h, uint64_t len)
{
	uint64_t at = g_brk;
	g_brk += (len + PG - 1) & ~(uint64_t)(PG - 1);
	memset(h->mem + at, 0, (size_t)((len + PG - 1) & ~(uint64_t)(PG - 1)));
	return MAIN_IOVA + at;
}

static int wait_cqe(struct nkv_dev_cq *cq, struct nkv_cqe *out)
{
	uint64_t end = now_ms() + TMO_MS;

	while (!nkv_cq_peek(cq, out))
		if (now_ms() >= end)
			return ST_TIMEOUT;
		else
			usleep(20);
	nkv_cq_advance(cq, NULL, out);
	nkv_cq_ring(cq);
	return cqe_code(out);
}

static int run(struct vhost *v, struct nkv_dev_sq *sq, struct nkv_dev_cq *cq, struct nkv_sqe *s, struct nkv_cqe *e)
{
	if (submit(&v->h, sq, s) < 0)
		return ST_TIMEOUT;
	return wait_cqe(cq, e);
}

/* Connect, map BAR0, map 4 MiB of main memory, bind vectors 0 and 1, enable through messages
 * (with @arm: opted into the ARM-word interrupt scheme first). */
static bool vhost_up_arm(struct vhost *v, const char *path, bool arm)
{
	uint32_t rl;

	memset(v, 0, sizeof(*v));
	g_brk = 0;
	v->h.sock = v->h.memfd = v->regfd = -1;
	if ((v->fd = vopen(path)) < 0 || region_info(v->fd, NKV_VFU_PCI_BAR0, 64, &rl, &v->regfd) != 0 || v->regfd < 0)
		return false;
	v->h.reg_size = (uint32_t)nkv_get64(g_rep + 56);
	v->h.regs = mmap(NULL, v->h.reg_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->regfd, (off_t)nkv_get64(g_rep + 24));
	if (v->h.regs == MAP_FAILED)
		return false;
	v->h.mem_len = 4 * MIB_;
	if ((v->h.memfd = mem_create(v->h.mem_len, true, &v->h.mem)) < 0 ||
	    dma_map(v->fd, MAIN_IOVA, v->h.mem_len, 0, 3, &v->h.memfd, 1) != 0)
		return false;
	v->efd[0] = eventfd(0, EFD_CLOEXEC);
	v->efd[1] = eventfd(0, EFD_CLOEXEC);
	if (set_irqs(v->fd, NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_TRIGGER, NKV_VFU_PCI_MSIX_IRQ, 0, 2, v->efd,
		     2) != 0)
		return false;
	uint64_t asq = halloc(&v->h, 32 * 64), acq = halloc(&v->h, 32 * 16);
	host_rings(&v->h, 0, asq, 32, acq, 32, &v->h.asq, &v->h.acq);
	/* the admin queue registers and CC by REGION_WRITE: the same page the mapping shows */
	if (wr_bar0(v->fd, NKV_REG_AQA, 31u | 31u << 16) || wr_bar0(v->fd, NKV_REG_ASQ, (uint32_t)asq) ||
	    wr_bar0(v->fd, NKV_REG_ASQ + 4, (uint32_t)(asq >> 32)) || wr_bar0(v->fd, NKV_REG_ACQ, (uint32_t)acq) ||
	    wr_bar0(v->fd, NKV_REG_ACQ + 4, (uint32_t)(acq >> 32)) ||
	    (arm && wr_bar0(v->fd, NKV_VFU_REG_HOSTFEAT, NKV_VFU_HOSTFEAT_ARM)) || wr_bar0(v->fd, NKV_REG_CC, CC_ENABLE))
		return false;
	uint64_t end = now_ms() + TMO_MS;
	while (!(rd_bar0(v->fd, NKV_REG_CSTS) & (NKV_CSTS_RDY | NKV_CSTS_CFS)) && now_ms() < end)
		usleep(500);
	return (rd_bar0(v->fd, NKV_REG_CSTS) & (NKV_CSTS_RDY | NKV_CSTS_CFS)) == NKV_CSTS_RDY;
}

static bool vhost_up(struct vhost *v, const char *path)
{
	return vhost_up_arm(v, path, false);
}

static void vhost_down(struct vhost *v)
{
	if (v->fd >= 0)
		close(v->fd);
	if (v->regfd >= 0)
		close(v->regfd);
	if (v->h.regs && v->h.regs != MAP_FAILED)
		munmap(v->h.regs, v->h.reg_size);
	if (v->h.mem)
		munmap(v->h.mem, v->h.mem_len);
	if (v->h.memfd >= 0)
		close(v->h.memfd);
	for (int i = 0; i < 2; i++)
		if (v->efd[i] > 0)
			close(v->efd[i]);
	memset(v, 0, sizeof(*v));
}

/* I/O queue pair 1 (IEN, vector 1) of @n entries. */
static bool io_queues(struct vhost *v, struct qpair *q, uint16_t n)
{
	struct nkv_cqe e;
	uint64_t sq = halloc(&v->h, (uint64_t)n * 64), cq = halloc(&v->h, (uint64_t)n * 16);
	struct nkv_sqe s = sqe_adm(NKV_ADM_CREATE_CQ, (uint32_t)(n - 1) << 16 | 1, 1u << 16 | 3, cq);

	q->qid = 1;
	if (run(v, &v->h.asq, &v->h.acq, &s, &e) != 0)
		return false;
	s = sqe_adm(NKV_ADM_CREATE_SQ, (uint32_t)(n - 1) << 16 | 1, 1u << 16 | 1, sq);
	if (run(v, &v->h.asq, &v->h.acq, &s, &e) != 0)
		return false;
	host_rings(&v->h, 1, sq, n, cq, n, &q->sq, &q->cq);
	return true;
}

static int kv(struct vhost *v, struct qpair *q, uint8_t opc, const char *key, uint64_t buf, uint32_t len, struct nkv_cqe *e)
{
	struct nkv_sqe s;

	nkv_dev_sqe_kv(&s, opc, 1, (const uint8_t *)key, (unsigned)strlen(key), len, buf, len > PG ? buf + PG : 0);
	return run(v, &q->sq, &q->cq, &s, e);
}

static void test_bringup(void)
{
	struct vhost v;
	struct qpair q;
	struct nkv_cqe e;

	bool up = vhost_up(&v, g_sock);
	CHECK(up, "bring-up to CSTS.RDY through REGION_WRITE");
	if (!up)
		goto out;
	CHECK(rd32(&v.h, NKV_REG_CSTS) & NKV_CSTS_RDY, "CSTS.RDY in the mmapped page too");
	CHECK(rd64(&v.h, NKV_REG_CAP) == ((uint64_t)rd_bar0(v.fd, 4) << 32 | rd_bar0(v.fd, 0)), "CAP the same both ways");
	uint32_t cap = rd_bar0(v.fd, 0);
	CHECK(wr_bar0(v.fd, NKV_REG_CAP, 0) == 0 && rd_bar0(v.fd, 0) == cap, "CAP is not writable by message");
	uint8_t odd[2] = {0};
	CHECK(rw(v.fd, true, NKV_VFU_PCI_BAR0, NKV_REG_CC, odd, 2) == EINVAL, "a 2-byte BAR0 write");
	uint64_t id = halloc(&v.h, PG);
	struct nkv_sqe s = sqe_adm(NKV_ADM_IDENTIFY, 1, 0, id);
	(void)efd_fired(v.efd[0], 0);
	CHECK(run(&v, &v.h.asq, &v.h.acq, &s, &e) == 0, "Identify Controller by SQE in mapped memory");
	CHECK(nkv_get16(v.h.mem + (id - MAIN_IOVA) + 78) != 0 || v.h.mem[(id - MAIN_IOVA) + 4] != 0,
	      "Identify data written (serial number)");
	CHECK(efd_fired(v.efd[0], TMO_MS), "admin CQ interrupt on vector 0 (no ARM word needed)");
	CHECK(io_queues(&v, &q, 64), "I/O queue pair with IEN on vector 1");
	uint64_t w = halloc(&v.h, 2 * PG), r = halloc(&v.h, 2 * PG);
	for (unsigned i = 0; i < 2 * PG; i++)
		v.h.mem[w - MAIN_IOVA + i] = (uint8_t)(i * 7 + 1);
	(void)efd_fired(v.efd[1], 0);
	int st = kv(&v, &q, NKV_KV_STORE, "vfu-key", w, 2 * PG, &e);
	CHECK(st == 0, "KV Store over vfio-user: %03x", st);
	CHECK(efd_fired(v.efd[1], TMO_MS), "I/O CQ interrupt on vector 1");
	st = kv(&v, &q, NKV_KV_RETRIEVE, "vfu-key", r, 2 * PG, &e);
	CHECK(st == 0 && nkv_get32(&e.dw0) == 2 * PG && memcmp(v.h.mem + (w - MAIN_IOVA), v.h.mem + (r - MAIN_IOVA), 2 * PG) == 0,
	      "KV Retrieve reads it back: %03x, %u bytes", st, nkv_get32(&e.dw0));

	/* memory a queue uses is not unmapped */
	CHECK(dma_unmap(v.fd, MAIN_IOVA, v.h.mem_len, 0) == EBUSY, "DMA_UNMAP of memory holding live queues");
	CHECK(dma_unmap(v.fd, 0, 0, NKV_VFU_UNMAP_ALL) == EBUSY, "DMA_UNMAP of everything while queues are live");
	/* DEVICE_RESET: as CC.EN 1 -> 0, done when the reply comes */
	int rc = vcall(v.fd, NKV_VFU_DEVICE_RESET, NULL, 0, NULL, 0, NULL, NULL);
	CHECK(rc == 0 && !(rd_bar0(v.fd, NKV_REG_CSTS) & NKV_CSTS_RDY) && rd_bar0(v.fd, NKV_REG_CC) == 0,
	      "DEVICE_RESET: rc %d, CSTS %x, CC %x", rc, rd_bar0(v.fd, NKV_REG_CSTS), rd_bar0(v.fd, NKV_REG_CC));
	CHECK(dma_unmap(v.fd, MAIN_IOVA, v.h.mem_len, 0) == 0, "DMA_UNMAP once the reset dropped the queues");
out:
	vhost_down(&v);
}

/* A host that sets NKV_VFU_HOSTFEAT_ARM before CC.EN is interrupted only for a CQ it armed. */
static void test_arm(void)
{
	struct vhost v;
	struct nkv_cqe e;

	bool up = vhost_up_arm(&v, g_sock, true);
	CHECK(up, "bring-up with the ARM-word feature bit");
	if (up) {
		uint64_t id = halloc(&v.h, PG);
		uint32_t arm0 = rd32(&v.h, NKV_SHM_REG_NOTIFY) + NKV_SHM_NOTIFY_ARM;
		CHECK(!(rd32(&v.h, NKV_SHM_REG_FEAT) & NKV_SHM_FEAT_NOTIFY) && rd32(&v.h, NKV_SHM_REG_NOTIFY) != 0,
		      "no kick channel offered, the notification area is there");
		(void)efd_fired(v.efd[0], 0);
		struct nkv_sqe s = sqe_adm(NKV_ADM_IDENTIFY, 1, 0, id);
		CHECK(run(&v, &v.h.asq, &v.h.acq, &s, &e) == 0 && !efd_fired(v.efd[0], 200),
		      "an unarmed CQ does not interrupt");
		wr32(&v.h, arm0, 1);
		s = sqe_adm(NKV_ADM_IDENTIFY, 1, 0, id);
		CHECK(run(&v, &v.h.asq, &v.h.acq, &s, &e) == 0 && efd_fired(v.efd[0], TMO_MS) && rd32(&v.h, arm0) == 0,
		      "an armed CQ interrupts once and is disarmed");
	}
	vhost_down(&v);
}

/* A client that leaves with commands in flight: its controller ends, its memory is let go only once
 * they are done, and the socket takes a new client. */
static void test_death(void)
{
	struct vhost v;
	struct qpair q;

	bool up = vhost_up(&v, g_sock) && io_queues(&v, &q, 256);
	CHECK(up, "bring-up for the death test");
	if (up) {
		uint64_t buf = halloc(&v.h, 64 * 1024);
		for (int i = 0; i < 200; i++) {
			struct nkv_sqe s;
			char key[32];
			snprintf(key, sizeof(key), "vfu-death-%d", i);
			nkv_dev_sqe_kv(&s, NKV_KV_STORE, 1, (const uint8_t *)key, (unsigned)strlen(key), 4096, buf + (uint64_t)(i % 16) * PG, 0);
			if (submit(&v.h, &q.sq, &s) < 0)
				break;
		}
	}
	vhost_down(&v); /* gone mid-I/O: socket, mappings and memfd closed at once */
	uint64_t end = now_ms() + TMO_MS;
	int fd = -1;
	while (now_ms() < end && (fd = vopen(g_sock)) < 0)
		usleep(10000);
	CHECK(fd >= 0, "the socket takes a new client after one died mid-I/O");
	if (fd >= 0)
		close(fd);
	up = vhost_up(&v, g_sock);
	CHECK(up, "a full bring-up after it");
	vhost_down(&v);
}

/* ---- error paths and access ------------------------------------------------------------------------- */

static void test_errors(void)
{
	int fd = vopen(g_sock);
	uint8_t b[16] = {0};
	uint32_t rl;

	nkv_put32(b, 16);
	CHECK(vcall(fd, 99, b, 16, NULL, 0, NULL, NULL) == ENOSYS, "an unknown command gets ENOSYS");
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_REGION_IO_FDS, b, 16, NULL, 0, NULL, NULL) == ENOTSUP, "GET_REGION_IO_FDS: ENOTSUP");
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_INFO, b, 16, NULL, 0, &rl, NULL) == 0, "the connection stays");
	/* NO_REPLY: no answer, not even an error; the next command's reply is the next message */
	vsend(fd, 99, NKV_VFU_F_NO_REPLY, b, 16, NULL, 0);
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_INFO, b, 16, NULL, 0, &rl, NULL) == 0, "NO_REPLY is not answered");
	int efd = eventfd(0, EFD_CLOEXEC);
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_INFO, b, 16, &efd, 1, &rl, NULL) == EINVAL, "an fd where none belongs");
	int many[20];
	for (int i = 0; i < 20; i++)
		many[i] = efd;
	uint8_t irq[20] = {0};
	nkv_put32(irq, 20);
	nkv_put32(irq + 4, NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_TRIGGER);
	nkv_put32(irq + 8, NKV_VFU_PCI_MSIX_IRQ);
	nkv_put32(irq + 16, 20);
	CHECK(vcall(fd, NKV_VFU_DEVICE_SET_IRQS, irq, 20, many, 20, NULL, NULL) == EINVAL, "20 fds (limit 16)");
	CHECK(vcall(fd, NKV_VFU_DEVICE_GET_INFO, b, 16, NULL, 0, &rl, NULL) == 0, "still served");
	close(efd);
	/* framing: a size below the header's closes the connection */
	struct nkv_vfu_hdr h = {.msg_id = 1, .cmd = NKV_VFU_DEVICE_GET_INFO, .msg_size = 8};
	CHECK(send(fd, &h, 16, MSG_NOSIGNAL) == 16 && closed_by_peer(fd), "msg_size 8: closed");
	close(fd);
	fd = vopen(g_sock);
	h.msg_size = 1u << 30;
	CHECK(send(fd, &h, 16, MSG_NOSIGNAL) == 16 && closed_by_peer(fd), "msg_size 1 GiB: closed");
	close(fd);
}

static void test_access(void)
{
	int fd = vopen(g_sock);
	CHECK(fd >= 0, "first client");
	int fd2 = vconnect(g_sock);
	CHECK(fd2 < 0 || closed_by_peer(fd2), "a second client while one is attached is refused");
	if (fd2 >= 0)
		close(fd2);
	close(fd);

	/* the subsystem's allowlist applies to the NQN a client acts as */
	fd = vconnect(g_acl);
	CHECK(fd >= 0 && version(fd, 0, NULL) == EACCES && closed_by_peer(fd), "a uid NQN off the allowlist: EACCES");
	if (fd >= 0)
		close(fd);
	fd = vopen(g_named);
	CHECK(fd >= 0, "the listener's configured host NQN is on the allowlist");
	if (fd >= 0)
		close(fd);

	/* a client that never says VERSION is closed after the HELLO timeout (300 ms on that socket) */
	fd = vconnect(g_open);
	uint64_t t0 = now_ms();
	CHECK(fd >= 0 && closed_by_peer(fd) && now_ms() - t0 >= 250, "no VERSION within the timeout: closed after %llu ms",
	      (unsigned long long)(now_ms() - t0));
	if (fd >= 0)
		close(fd);

	/* another uid: the socket file (0600) refuses it, and on a world-writable socket the peer check */
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		int a = vconnect(g_sock), a_err = errno;
		int b = vconnect(g_open);
		bool refused = b >= 0 && (version(b, 0, NULL) < 0 || closed_by_peer(b));
		_exit(a < 0 && a_err == EACCES ? (refused ? 0 : 3) : 4);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "another uid cannot attach (exit %d)", WEXITSTATUS(st));

	/* a member of the socket's group (another uid) may attach, but must seal its memory: it could
	 * not stop the daemon otherwise, and shrinking a file the daemon maps would (SIGBUS) */
	if (!*g_grp) {
		printf("  (not root: the socket-group client is not tried)\n");
		return;
	}
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		int c = vopen(g_grp), loose = mem_create(4 * PG, false, NULL), sealed = mem_create(4 * PG, true, NULL);
		if (c < 0 || loose < 0 || sealed < 0)
			_exit(3);
		if (dma_map(c, 0x100000, 4 * PG, 0, 3, &loose, 1) != EPERM)
			_exit(4);
		_exit(dma_map(c, 0x100000, 4 * PG, 0, 3, &sealed, 1) == 0 ? 0 : 5);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "a socket-group client of another uid: unsealed memfd refused, sealed one mapped (exit %d)", WEXITSTATUS(st));
}

static void test_paths(struct nkv_shm *shm)
{
	char link[160], other[160];

	snprintf(link, sizeof(link), "%s/link.sock", g_dir);
	snprintf(other, sizeof(other), "%s/victim", g_dir);
	int f = open(other, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (f >= 0)
		close(f);
	CHECK(symlink(other, link) == 0, "symlink");
	CHECK(nkv_shm_listen_vfio_user(shm, SUBNQN, link, NULL) == -EEXIST, "a symlink at the path is not replaced");
	struct stat st;
	CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode) && stat(other, &st) == 0 && S_ISREG(st.st_mode),
	      "the symlink and its target are left alone");
	CHECK(nkv_shm_listen(shm, SUBNQN, g_sock) == -EADDRINUSE, "the vfio-user socket is not taken by an shm listener");
	CHECK(stat(g_sock, &st) == 0 && (st.st_mode & 0777) == 0600, "socket mode %o", st.st_mode & 0777);
	unlink(link);
	unlink(other);
}

int main(int argc, char **argv)
{
	struct nkv_shm *shm = NULL, *open_shm = NULL;
	struct nkv_subsys *acl;
	char uidnqn[96];
	int rc;

	signal(SIGPIPE, SIG_IGN);
	h_init(argc, argv, "vfu_proto");
	h_add_ns(1, "vfu", 0, false);
	snprintf(g_dir, sizeof(g_dir), "/tmp/vfu_proto.XXXXXX");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	chmod(g_dir, 0755); /* the other-uid child must reach the sockets to be refused by them */
	snprintf(g_sock, sizeof(g_sock), "%s/cntrl", g_dir);
	snprintf(g_acl, sizeof(g_acl), "%s/acl", g_dir);
	snprintf(g_named, sizeof(g_named), "%s/named", g_dir);
	snprintf(g_open, sizeof(g_open), "%s/open", g_dir);
	snprintf(uidnqn, sizeof(uidnqn), "nqn.2026-12.io.rados-nkv:vfio-user:uid:%u", (unsigned)getuid());
	struct nkv_shm_conf conf = {.max_regions = MAX_REGIONS}, open_conf = {.socket_mode = 0666, .hello_timeout_ms = 300};
	struct nkv_ns_conf ns = {.nsid = 1, .rados_ns = "vfu-acl"};
	if ((rc = nkv_subsys_add(H.tgt, ACLNQN, H.pool, &acl)) < 0 || (rc = nkv_ns_add(acl, &ns)) < 0 ||
	    (rc = nkv_subsys_allow_host(acl, NAMEDHOST)) < 0 || (rc = nkv_shm_create(H.tgt, &conf, &shm)) < 0 ||
	    (rc = nkv_shm_create(H.tgt, &open_conf, &open_shm)) < 0 ||
	    (rc = nkv_shm_listen_vfio_user(shm, SUBNQN, g_sock, NULL)) < 0 ||
	    (rc = nkv_shm_listen_vfio_user(shm, ACLNQN, g_acl, NULL)) < 0 ||
	    (rc = nkv_shm_listen_vfio_user(shm, ACLNQN, g_named, NAMEDHOST)) < 0 ||
	    (rc = nkv_shm_listen_vfio_user(open_shm, SUBNQN, g_open, NULL)) < 0) {
		fprintf(stderr, "vfu_proto: setup failed: %s\n", strerror(-rc));
		return 1;
	}
	(void)uidnqn;
	/* a socket of group 65534 (mode 0660) for the group-member client; giving a socket a group
	 * takes CAP_CHOWN */
	struct nkv_shm_conf grp_conf = {.max_regions = MAX_REGIONS, .socket_mode = 0660, .socket_group_set = true,
					.socket_gid = 65534};
	struct nkv_shm *grp_shm = NULL;
	if (geteuid() == 0) {
		snprintf(g_grp, sizeof(g_grp), "%s/grp", g_dir);
		if ((rc = nkv_shm_create(H.tgt, &grp_conf, &grp_shm)) < 0 ||
		    (rc = nkv_shm_listen_vfio_user(grp_shm, SUBNQN, g_grp, NULL)) < 0) {
			fprintf(stderr, "vfu_proto: setup failed: %s\n", strerror(-rc));
			return 1;
		}
	}
	static const struct {
		const char *name;
		void (*fn)(void);
	} groups[] = {
		{"version", test_version}, {"info", test_info},       {"config", test_config}, {"dma", test_dma},
		{"irqs", test_irqs},       {"bringup", test_bringup}, {"arm", test_arm},         {"death", test_death},   {"errors", test_errors},
		{"access", test_access},
	};
	for (unsigned i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		unsigned f0 = h_fail;
		uint64_t t0 = now_ms();
		groups[i].fn();
		printf("%-10s %s (%llu ms)\n", groups[i].name, h_fail == f0 ? "ok" : "FAILED",
		       (unsigned long long)(now_ms() - t0));
	}
	test_paths(shm);
	nkv_shm_destroy(shm, 1000);
	nkv_shm_destroy(open_shm, 1000);
	if (grp_shm)
		nkv_shm_destroy(grp_shm, 1000);
	nkv_target_destroy(H.tgt);
	rmdir(g_dir);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
