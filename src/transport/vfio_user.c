/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user.c - the vfio-user front door to the shared-memory transport's controllers: a client
 * (QEMU's vfio-user-pci device, SPDK's vfio-user NVMe host, libnkv's driver) sees one PCI NVMe
 * function per socket (protocol and layout: src/common/vfio_user.h).
 *
 * The controller behind it is shm.c's: the register page is BAR0 (mmapped by the client as a sparse
 * area, so doorbells cost no message; REGION_READ/WRITE of BAR0 reach the same page), DMA_MAP with
 * an fd is a region registration, MSI-X vectors are the controller's interrupt eventfds. This file
 * only speaks the protocol; queues, PRPs, budgets and limits are the core's.
 *
 * A message is read whole (header, then exactly msg_size bytes, so descriptors sent with the next
 * message never mix with this one's), then parsed (vfu_parse: sizes and fields checked, no state
 * touched), then executed (vfu_exec). Errors get an error reply with an errno; unknown commands too.
 * A connection closes only when framing is lost (msg_size below 16 or above the limit), on a
 * VERSION the server cannot accept, or when a reply cannot be sent.
 *
 * Who may attach: the socket file is made as shm's (mode 0600 or the conf's, never through a link);
 * the peer must pass the control socket's check (SO_PEERCRED: the daemon's user, root, or the
 * socket group); then the host NQN it acts as (the listener's, or one made from the peer's uid)
 * must pass the subsystem's allowlist and the controller limits, at VERSION.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/unix_sock.h"
#include "common/vfio_user.h"
#include "nkv/nkv_shm.h"
#include "transport/shm_int.h"
#include "transport/vfio_user_int.h"

#define VFU_MAX_FDS 16u            /* descriptors one message may carry (SET_IRQS: a vector each) */
#define VFU_MAX_XFER 65536u        /* our max_data_xfer_size: REGION_READ/WRITE count */
#define VFU_MSG_MAX (32u + VFU_MAX_XFER) /* the largest message: a REGION_WRITE of VFU_MAX_XFER */
#define VFU_SEND_MS 200            /* a reply the client does not take within this closes it */
#define VFU_RESET_MS 2000          /* DEVICE_RESET waits this long for the poller */
#define VFU_UID_NQN "nqn.2026-12.io.rados-nkv:vfio-user:uid:"

/* What an exec_* function returns besides 0 (reply with no payload) and a positive errno (error
 * reply): */
#define REPLIED (-1)     /* it sent its reply */
#define SEND_FAILED (-2) /* its reply could not be sent: the connection closes */
#define SENT(rc) ((rc) < 0 ? SEND_FAILED : REPLIED)

struct vfu_nofd {
	uint64_t addr, size;     /* a DMA_MAP without an fd: known, never touched */
};

struct vfu_conn {
	uint8_t *buf;            /* the message being read */
	uint32_t have;
	int fds[VFU_MAX_FDS];
	unsigned nfds;
	bool fds_bad;            /* more descriptors than VFU_MAX_FDS came, or they were cut */
	uid_t uid;
	int regs_fd;             /* after VERSION: the controller's register memfd, BAR0's fd */
	uint32_t bar0_size;
	uint16_t nvec;
	struct vfu_nofd *nofd;
	unsigned nnofd;
	struct vfu_pci pci;
};

/* A parsed command: the header and its payload, checked against the command's layout. */
struct vfu_cmd {
	struct nkv_vfu_hdr hdr;
	const uint8_t *p;        /* payload */
	uint32_t plen;
	unsigned nfds;
	union {
		struct { uint16_t major, minor; struct vfu_caps caps; } ver;
		struct { uint32_t flags; uint64_t off, addr, size; } map;
		struct { uint32_t flags; uint64_t addr, size; } unmap;
		struct { uint32_t argsz, index; } info;
		struct { uint32_t flags, index, start, count; const uint8_t *bools; } irqs;
		struct { uint64_t off; uint32_t region, count; const uint8_t *data; } rw;
	} u;
};

/* ---- replies ----------------------------------------------------------------------------------- */

/* Send all of @len bytes, @fd (>= 0) with the first; wait at most VFU_SEND_MS for room. */
static int send_all(int sock, const void *buf, size_t len, int fd)
{
	const uint8_t *b = buf;
	uint64_t end = nkv_now_ms() + VFU_SEND_MS;

	while (len) {
		ssize_t n = nkv_send_fd_flags(sock, b, len, fd, MSG_DONTWAIT);
		if (n > 0) {
			b += n;
			len -= (size_t)n;
			fd = -1;
			continue;
		}
		if (n == -EINTR)
			continue;
		if (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK)
			return (int)n;
		uint64_t now = nkv_now_ms();
		struct pollfd pf = {.fd = sock, .events = POLLOUT};
		if (now >= end || poll(&pf, 1, (int)(end - now)) <= 0)
			return -ETIMEDOUT;
	}
	return 0;
}

/* The reply to @c: its header with @plen payload bytes from @payload (copied after it). */
static int reply(struct shm_conn *k, const struct vfu_cmd *c, const void *payload, uint32_t plen, int fd)
{
	struct nkv_vfu_hdr h = {.msg_id = c->hdr.msg_id, .cmd = c->hdr.cmd, .msg_size = 16 + plen,
				.flags = NKV_VFU_F_REPLY};

	if (c->hdr.flags & NKV_VFU_F_NO_REPLY)
		return 0;
	if (!plen)
		return send_all(k->fd, &h, sizeof(h), fd);
	uint8_t *m = malloc(16 + (size_t)plen);
	if (!m)
		return -ENOMEM;
	memcpy(m, &h, 16);
	memcpy(m + 16, payload, plen);
	int rc = send_all(k->fd, m, 16 + (size_t)plen, fd);
	free(m);
	return rc;
}

static int reply_err(struct shm_conn *k, const struct vfu_cmd *c, int err)
{
	struct nkv_vfu_hdr h = {.msg_id = c->hdr.msg_id, .cmd = c->hdr.cmd, .msg_size = 16,
				.flags = NKV_VFU_F_REPLY | NKV_VFU_F_ERROR, .error = (uint32_t)err};

	if (c->hdr.flags & NKV_VFU_F_NO_REPLY)
		return 0;
	return send_all(k->fd, &h, sizeof(h), -1);
}

/* ---- parse: the message alone, no state --------------------------------------------------------- */

/* Check @msg (@len bytes, its header's msg_size) against its command's layout into @c.
 * @return 0, or a positive errno for the error reply. */
static int vfu_parse(const uint8_t *msg, uint32_t len, unsigned nfds, struct vfu_cmd *c)
{
	memset(c, 0, sizeof(*c));
	memcpy(&c->hdr, msg, sizeof(c->hdr));
	c->p = msg + 16;
	c->plen = len - 16;
	c->nfds = nfds;
	const uint8_t *p = c->p;
	uint32_t n = c->plen;

	switch (c->hdr.cmd) {
	case NKV_VFU_VERSION:
		if (n < 4 || nfds)
			return EINVAL;
		c->u.ver.major = nkv_get16(p);
		c->u.ver.minor = nkv_get16(p + 2);
		c->u.ver.caps = (struct vfu_caps){.max_msg_fds = NKV_VFU_DEF_MAX_FDS, .max_data_xfer_size = NKV_VFU_DEF_MAX_XFER,
						  .max_dma_maps = NKV_VFU_DEF_MAX_DMA_MAPS, .pgsizes = NKV_VFU_DEF_PGSIZES};
		if (n > 4) { /* JSON, NUL-terminated within the message */
			const char *js = (const char *)p + 4;
			size_t jl = n - 4;
			if (js[jl - 1] != 0 || strnlen(js, jl) != jl - 1 || vfu_json_caps(js, jl - 1, &c->u.ver.caps) < 0)
				return EINVAL;
		}
		return 0;
	case NKV_VFU_DMA_MAP:
		if (n != 32 || nkv_get32(p) != 32 || nfds > 1)
			return EINVAL;
		c->u.map.flags = nkv_get32(p + 4);
		c->u.map.off = nkv_get64(p + 8);
		c->u.map.addr = nkv_get64(p + 16);
		c->u.map.size = nkv_get64(p + 24);
		if (c->u.map.flags & ~(NKV_VFU_DMA_READ_OK | NKV_VFU_DMA_WRITE_OK))
			return EINVAL;
		if (!c->u.map.size || ((c->u.map.addr | c->u.map.size | c->u.map.off) & 4095) ||
		    c->u.map.addr + c->u.map.size < c->u.map.addr || c->u.map.off + c->u.map.size < c->u.map.off)
			return EINVAL;
		return 0;
	case NKV_VFU_DMA_UNMAP:
		/* one fd is ignored (and closed): SPDK's host sends the region's again, as with DMA_MAP */
		if (n != 24 || nkv_get32(p) < 24 || nfds > 1)
			return EINVAL;
		c->u.unmap.flags = nkv_get32(p + 4);
		c->u.unmap.addr = nkv_get64(p + 8);
		c->u.unmap.size = nkv_get64(p + 16);
		if (c->u.unmap.flags & NKV_VFU_UNMAP_DIRTY_BITMAP)
			return ENOTSUP;
		if (c->u.unmap.flags & ~NKV_VFU_UNMAP_ALL)
			return EINVAL;
		if ((c->u.unmap.flags & NKV_VFU_UNMAP_ALL) && (c->u.unmap.addr || c->u.unmap.size))
			return EINVAL;
		return 0;
	/* The info queries: the structure, and possibly more. SPDK's host sends its whole reply buffer
	 * (argsz bytes, as the VFIO ioctls take it); bytes past the structure are ignored. */
	case NKV_VFU_DEVICE_GET_INFO:
		if (n < 16 || nkv_get32(p) < 16 || nfds)
			return EINVAL;
		return 0;
	case NKV_VFU_DEVICE_GET_REGION_INFO:
	case NKV_VFU_DEVICE_GET_IRQ_INFO: {
		uint32_t fixed = c->hdr.cmd == NKV_VFU_DEVICE_GET_IRQ_INFO ? 16 : 32;
		if (n < fixed || nkv_get32(p) < fixed || nfds)
			return EINVAL;
		c->u.info.argsz = nkv_get32(p);
		c->u.info.index = nkv_get32(p + 8);
		if (c->u.info.index >= (c->hdr.cmd == NKV_VFU_DEVICE_GET_IRQ_INFO ? (uint32_t)NKV_VFU_PCI_NUM_IRQS
										: (uint32_t)NKV_VFU_PCI_NUM_REGIONS))
			return EINVAL;
		return 0;
	}
	case NKV_VFU_DEVICE_SET_IRQS: {
		if (n < 20 || nkv_get32(p) != n)
			return EINVAL;
		uint32_t fl = nkv_get32(p + 4), data = fl & NKV_VFU_IRQ_SET_DATA_MASK, act = fl & NKV_VFU_IRQ_SET_ACTION_MASK_ALL;
		c->u.irqs.flags = fl;
		c->u.irqs.index = nkv_get32(p + 8);
		c->u.irqs.start = nkv_get32(p + 12);
		c->u.irqs.count = nkv_get32(p + 16);
		if ((fl & ~(NKV_VFU_IRQ_SET_DATA_MASK | NKV_VFU_IRQ_SET_ACTION_MASK_ALL)) || __builtin_popcount(data) != 1 ||
		    __builtin_popcount(act) != 1 || c->u.irqs.index >= NKV_VFU_PCI_NUM_IRQS)
			return EINVAL;
		if (c->u.irqs.start + (uint64_t)c->u.irqs.count > VFU_MAX_VEC)
			return EINVAL;
		if (data == NKV_VFU_IRQ_SET_DATA_BOOL) {
			if (n != 20 + c->u.irqs.count || nfds)
				return EINVAL;
			c->u.irqs.bools = p + 20;
		} else if (n != 20) {
			return EINVAL;
		}
		if (data == NKV_VFU_IRQ_SET_DATA_NONE && nfds)
			return EINVAL;
		if (data == NKV_VFU_IRQ_SET_DATA_EVENTFD) {
			if (nfds && nfds != c->u.irqs.count)
				return EINVAL;
			if (act != NKV_VFU_IRQ_SET_ACTION_TRIGGER)
				return ENOTSUP; /* an eventfd told of masking: not offered */
		}
		return 0;
	}
	case NKV_VFU_REGION_READ:
	case NKV_VFU_REGION_WRITE: {
		if (n < 16 || nfds)
			return EINVAL;
		c->u.rw.off = nkv_get64(p);
		c->u.rw.region = nkv_get32(p + 8);
		c->u.rw.count = nkv_get32(p + 12);
		if (c->u.rw.count > VFU_MAX_XFER || c->u.rw.region >= NKV_VFU_PCI_NUM_REGIONS)
			return EINVAL;
		if (n != 16 + (c->hdr.cmd == NKV_VFU_REGION_WRITE ? c->u.rw.count : 0))
			return EINVAL;
		c->u.rw.data = p + 16;
		return 0;
	}
	case NKV_VFU_DEVICE_RESET:
		return n || nfds ? EINVAL : 0;
	case NKV_VFU_DEVICE_GET_REGION_IO_FDS:
	case NKV_VFU_DMA_READ:
	case NKV_VFU_DMA_WRITE:
	case NKV_VFU_REGION_WRITE_MULTI:
	case NKV_VFU_DEVICE_FEATURE:
	case NKV_VFU_MIG_DATA_READ:
	case NKV_VFU_MIG_DATA_WRITE:
		return ENOTSUP; /* known, not offered (no ioeventfds, no migration, no write_multiple) */
	default:
		return ENOSYS;
	}
}

/* ---- execute ------------------------------------------------------------------------------------ */

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 4096;

	while (p < v)
		p <<= 1;
	return p;
}

/* The host NQN a client acts as: the listener's, else one naming the peer's uid. */
static void client_nqn(struct shm_conn *k, struct vfu_conn *v, char *out, size_t len)
{
	if (*k->l->hostnqn)
		snprintf(out, len, "%s", k->l->hostnqn);
	else
		snprintf(out, len, VFU_UID_NQN "%u", (unsigned)v->uid);
}

static int exec_version(struct nkv_shm *s, struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c, bool *keep)
{
	char nqn[NKV_NQN_MAX], js[256];
	uint8_t hostid[16] = {'v', 'f', 'i', 'o', '-', 'u', 's', 'e', 'r'};
	struct shm_ctrl *ctrl;

	if (k->c)
		return EINVAL; /* negotiated already */
	if (c->u.ver.major != NKV_VFU_MAJOR) {
		NKV_WARN("vfio-user %s: client proposes version %u.%u; this server speaks %u.%u", k->l->path,
			 c->u.ver.major, c->u.ver.minor, NKV_VFU_MAJOR, NKV_VFU_MINOR);
		*keep = false;
		return ENOTSUP;
	}
	nkv_put32(hostid + 12, (uint32_t)v->uid);
	client_nqn(k, v, nqn, sizeof(nqn));
	int rfd = nkv_shm_ctrl_open(s, k->l, k->fd, nqn, hostid, true, &ctrl);
	if (rfd < 0) {
		*keep = false;
		return -rfd;
	}
	uint32_t nvec = (uint32_t)s->conf.max_io_queues + 1u;
	v->nvec = (uint16_t)(nvec < VFU_MAX_VEC ? nvec : VFU_MAX_VEC);
	v->bar0_size = pow2_at_least(ctrl->reg_size);
	v->regs_fd = rfd;
	vfu_pci_init(&v->pci, v->bar0_size, v->nvec);
	int jn = snprintf(js, sizeof(js),
			  "{\"capabilities\":{\"max_msg_fds\":%u,\"max_data_xfer_size\":%u,\"pgsizes\":4096,"
			  "\"max_dma_maps\":%u}}",
			  VFU_MAX_FDS, VFU_MAX_XFER, s->conf.max_regions);
	uint8_t rep[4 + sizeof(js)];
	nkv_put16(rep, NKV_VFU_MAJOR);
	nkv_put16(rep + 2, NKV_VFU_MINOR); /* the only minor there is: never above the proposal */
	memcpy(rep + 4, js, (size_t)jn + 1);
	if (reply(k, c, rep, 4 + (uint32_t)jn + 1, -1) < 0) {
		nkv_shm_ctrl_discard(ctrl);
		close(rfd);
		v->regs_fd = -1;
		return SEND_FAILED;
	}
	k->c = ctrl;
	memcpy(k->hostnqn, nqn, sizeof(nqn));
	s->pending--; /* it has a controller now, limited as such */
	nkv_shm_ctrl_start(ctrl);
	NKV_INFO("vfio-user %s: controller %u for '%s' (uid %u)", k->l->path, ctrl->ctrlr->cntlid, nqn, (unsigned)v->uid);
	return REPLIED;
}

static bool nofd_overlaps(const struct vfu_conn *v, uint64_t addr, uint64_t size)
{
	for (unsigned i = 0; i < v->nnofd; i++)
		if (addr < v->nofd[i].addr + v->nofd[i].size && v->nofd[i].addr < addr + size)
			return true;
	return false;
}

static int exec_dma_map(struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c, const int *fds)
{
	struct shm_ctrl *ctrl = k->c;
	uint64_t addr = c->u.map.addr, size = c->u.map.size;

	if (nofd_overlaps(v, addr, size))
		return EEXIST;
	if (c->nfds == 1) {
		/* Root and the daemon's own user could stop it anyway: their memory need not be sealed
		 * (SPDK's host maps DPDK's hugetlbfs files, or an unsealed memfd with --no-huge). */
		bool may_shrink = v->uid == 0 || v->uid == geteuid();
		int rc = nkv_shm_region_map(ctrl, addr, size, c->u.map.off, !(c->u.map.flags & NKV_VFU_DMA_WRITE_OK), fds[0],
					    v->nnofd, may_shrink);
		return rc < 0 ? -rc : 0;
	}
	/* Without an fd the memory is only reachable through DMA_READ/WRITE messages, which this server
	 * does not send: it is recorded (overlaps, limits, unmap) and any command using it fails. */
	if (nkv_shm_region_overlaps(ctrl, addr, size))
		return EEXIST;
	if (ctrl->nregions + v->nnofd >= ctrl->s->conf.max_regions)
		return ENOSPC;
	struct vfu_nofd *n = realloc(v->nofd, (v->nnofd + 1) * sizeof(*n));
	if (!n)
		return ENOMEM;
	v->nofd = n;
	v->nofd[v->nnofd++] = (struct vfu_nofd){addr, size};
	return 0;
}

static int exec_dma_unmap(struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c)
{
	if (c->u.unmap.flags & NKV_VFU_UNMAP_ALL) {
		v->nnofd = 0;
		return -nkv_shm_region_unmap_all(k->c);
	}
	for (unsigned i = 0; i < v->nnofd; i++)
		if (v->nofd[i].addr == c->u.unmap.addr && v->nofd[i].size == c->u.unmap.size) {
			v->nofd[i] = v->nofd[--v->nnofd];
			return 0;
		}
	/* A region a queue or a command in flight uses is not unmapped (EBUSY): the specification asks
	 * the server to drop every reference before it replies, and the controller cannot drop a queue
	 * ring the host still has nor wait for a backend here without stalling every other host. */
	return -nkv_shm_region_unmap(k->c, c->u.unmap.addr, c->u.unmap.size);
}

/* Region sizes: BAR0, BAR4 (MSI-X) and config space; the others are absent. */
static uint64_t region_size(const struct vfu_conn *v, uint32_t idx)
{
	switch (idx) {
	case NKV_VFU_PCI_BAR0:
		return v->bar0_size;
	case NKV_VFU_MSIX_BAR:
		return NKV_VFU_MSIX_BAR_SIZE;
	case NKV_VFU_PCI_CONFIG:
		return NKV_VFU_CONFIG_SIZE;
	default:
		return 0;
	}
}

static int exec_region_info(struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c)
{
	uint32_t idx = c->u.info.index;
	uint8_t rep[64] = {0};
	uint32_t full = 32, flags = 0;
	int fd = -1;

	if (idx == NKV_VFU_PCI_BAR0 || idx == NKV_VFU_MSIX_BAR || idx == NKV_VFU_PCI_CONFIG)
		flags = NKV_VFU_REGION_READ_OK | NKV_VFU_REGION_WRITE_OK;
	if (idx == NKV_VFU_PCI_BAR0) {
		/* the register page, mmappable as one sparse area; the rest of the BAR is read as zero.
		 * CAPS only when the capability is in this reply: the specification says the flag means
		 * "found in the reply", and QEMU refuses a CAPS reply whose cap_offset is not inside it
		 * (it asks again with the argsz this reply names). */
		flags |= NKV_VFU_REGION_MMAP;
		full = 64;
		fd = v->regs_fd;
		if (c->u.info.argsz >= full) {
			flags |= NKV_VFU_REGION_CAPS;
			nkv_put32(rep + 12, 32); /* cap_offset */
			nkv_put16(rep + 32, NKV_VFU_CAP_SPARSE_MMAP);
			nkv_put16(rep + 34, 1);
			nkv_put32(rep + 36, 0);  /* next: none */
			nkv_put32(rep + 40, 1);  /* nr_areas */
			nkv_put64(rep + 48, 0);
			nkv_put64(rep + 56, k->c->reg_size);
		}
	}
	nkv_put32(rep, full);
	nkv_put32(rep + 4, flags);
	nkv_put32(rep + 8, idx);
	nkv_put64(rep + 16, region_size(v, idx));
	nkv_put64(rep + 24, 0); /* mmap offset in the fd */
	return SENT(reply(k, c, rep, c->u.info.argsz >= full ? full : 32, fd));
}

static int exec_irq_info(struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c)
{
	uint8_t rep[16];
	uint32_t idx = c->u.info.index;
	bool msix = idx == NKV_VFU_PCI_MSIX_IRQ;

	nkv_put32(rep, 16);
	nkv_put32(rep + 4, msix ? NKV_VFU_IRQ_INFO_EVENTFD | NKV_VFU_IRQ_INFO_MASKABLE : NKV_VFU_IRQ_INFO_EVENTFD);
	nkv_put32(rep + 8, idx);
	nkv_put32(rep + 12, msix ? v->nvec : 0); /* no INTx pin, no MSI, no error or request IRQs */
	return SENT(reply(k, c, rep, sizeof(rep), -1));
}

/* SET_IRQS on MSI-X. The poller owns the eventfds and the mask state: every change is posted. */
static int exec_set_irqs(struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c, int *fds)
{
	uint32_t data = c->u.irqs.flags & NKV_VFU_IRQ_SET_DATA_MASK, act = c->u.irqs.flags & NKV_VFU_IRQ_SET_ACTION_MASK_ALL;
	uint32_t start = c->u.irqs.start, count = c->u.irqs.count;

	if (c->u.irqs.index != NKV_VFU_PCI_MSIX_IRQ)
		return count == 0 ? 0 : EINVAL; /* other types have no vectors: turning them off is a no-op */
	if (count == 0) {
		if (data != NKV_VFU_IRQ_SET_DATA_NONE || act != NKV_VFU_IRQ_SET_ACTION_TRIGGER)
			return start == 0 ? 0 : EINVAL;
		/* every vector off: unbound, unmasked (nothing stays pending) */
		for (uint16_t i = 0; i < v->nvec; i++)
			if (nkv_shm_ctrl_post(k->c, SHM_POST_IRQ, i, -1) < 0 || nkv_shm_ctrl_post(k->c, SHM_POST_UNMASK, i, -1) < 0)
				return ENOMEM;
		return 0;
	}
	if (start + count > v->nvec)
		return EINVAL;
	if (data == NKV_VFU_IRQ_SET_DATA_EVENTFD) {
		for (unsigned i = 0; i < c->nfds; i++)
			if (!nkv_shm_eventfd_ok(fds[i]))
				return EINVAL;
		for (uint32_t i = 0; i < count; i++) {
			int fd = c->nfds ? fds[i] : -1;
			if (nkv_shm_ctrl_post(k->c, SHM_POST_IRQ, (uint16_t)(start + i), fd) < 0)
				return ENOMEM;
			if (c->nfds)
				fds[i] = -1; /* the poller's now */
		}
		return 0;
	}
	enum shm_post_op op = act == NKV_VFU_IRQ_SET_ACTION_MASK ? SHM_POST_MASK
			      : act == NKV_VFU_IRQ_SET_ACTION_UNMASK ? SHM_POST_UNMASK : SHM_POST_TRIGGER;
	for (uint32_t i = 0; i < count; i++)
		if ((data == NKV_VFU_IRQ_SET_DATA_NONE || c->u.irqs.bools[i]) &&
		    nkv_shm_ctrl_post(k->c, op, (uint16_t)(start + i), -1) < 0)
			return ENOMEM;
	return 0;
}

/* BAR0 registers a client may write by message; the rest (CAP, VS, CSTS, the feature words) are
 * the controller's. Doorbells and the notification area are the host's. */
static bool bar0_writable(uint32_t off, uint32_t reg_size)
{
	switch (off) {
	case NKV_REG_INTMS:
	case NKV_REG_INTMC:
	case NKV_REG_CC:
	case NKV_REG_NSSR:
	case NKV_REG_AQA:
	case NKV_REG_ASQ:
	case NKV_REG_ASQ + 4:
	case NKV_REG_ACQ:
	case NKV_REG_ACQ + 4:
	case NKV_VFU_REG_HOSTFEAT:
		return true;
	default:
		return off >= NKV_SHM_DB_BASE && off < reg_size;
	}
}

static int exec_region_rw(struct shm_conn *k, struct vfu_conn *v, const struct vfu_cmd *c)
{
	uint32_t idx = c->u.rw.region, n = c->u.rw.count;
	uint64_t off = c->u.rw.off, size = region_size(v, idx);
	bool wr = c->hdr.cmd == NKV_VFU_REGION_WRITE;
	struct shm_ctrl *ctrl = k->c;

	if (off > size || n > size - off)
		return EINVAL;
	if (idx == NKV_VFU_PCI_BAR0 && wr && ((off | n) & 3))
		return EINVAL; /* registers and doorbells are dwords */
	uint8_t *rep = malloc(16 + (size_t)n);
	if (!rep)
		return ENOMEM;
	memcpy(rep, c->p, 16);
	uint8_t *d = rep + 16;
	switch (idx) {
	case NKV_VFU_PCI_CONFIG:
		if (wr)
			vfu_pci_cfg_write(&v->pci, (uint32_t)off, n, c->u.rw.data);
		else
			vfu_pci_cfg_read(&v->pci, (uint32_t)off, n, d);
		break;
	case NKV_VFU_MSIX_BAR:
		if (wr)
			vfu_pci_msix_write(&v->pci, (uint32_t)off, n, c->u.rw.data);
		else
			vfu_pci_msix_read(&v->pci, ctrl->irq_pend, (uint32_t)off, n, d);
		break;
	case NKV_VFU_PCI_BAR0:
		/* The page the poller watches: a CC written here is seen as one written through the
		 * mapping. Dword accesses are single loads and stores, as a CPU's to a BAR would be. */
		for (uint32_t i = 0; i < n;) {
			uint32_t o = (uint32_t)off + i;
			if (wr) {
				if (bar0_writable(o, ctrl->reg_size))
					__atomic_store_n((uint32_t *)(ctrl->regs + o), nkv_get32(c->u.rw.data + i), __ATOMIC_RELEASE);
				i += 4;
			} else if (o >= ctrl->reg_size) {
				d[i++] = 0;
			} else if (!(o & 3) && n - i >= 4) {
				nkv_put32(d + i, __atomic_load_n((uint32_t *)(ctrl->regs + o), __ATOMIC_ACQUIRE));
				i += 4;
			} else {
				d[i++] = __atomic_load_n(ctrl->regs + o, __ATOMIC_ACQUIRE);
			}
		}
		break;
	}
	int rc = reply(k, c, rep, wr ? 16 : 16 + n, -1);
	free(rep);
	return SENT(rc);
}

static int exec_reset(struct nkv_shm *s, struct shm_conn *k)
{
	unsigned want = atomic_load(&k->c->resets) + 1;

	if (nkv_shm_ctrl_post(k->c, SHM_POST_RESET, 0, -1) < 0)
		return ENOMEM;
	if (s->single)
		return 0; /* the testing hooks' thread runs the poller after this */
	/* The reply says the reset is done: a client may write CC.EN = 1 right after it. */
	for (uint64_t end = nkv_now_ms() + VFU_RESET_MS; atomic_load(&k->c->resets) < want;) {
		if (nkv_now_ms() >= end)
			return ETIMEDOUT;
		usleep(200);
	}
	return 0;
}

/*
 * Serve one whole message (@len bytes, its msg_size) with the @nfds descriptors that came with it;
 * the descriptors this does not keep are closed. Without a socket of its own it is what a fuzzer
 * drives (replies go to k->fd). @return false when the connection must close.
 */
static bool vfu_handle(struct nkv_shm *s, struct shm_conn *k, const uint8_t *msg, uint32_t len, int *fds,
		       unsigned nfds, bool fds_bad)
{
	struct vfu_conn *v = k->fs;
	struct vfu_cmd c;
	bool keep = true;
	int err;

	memset(&c, 0, sizeof(c));
	memcpy(&c.hdr, msg, sizeof(c.hdr));
	if ((c.hdr.flags & NKV_VFU_F_TYPE_MASK) != NKV_VFU_F_COMMAND) {
		err = 0; /* a reply: this server sends no commands, so it answers none */
		goto out;
	}
	if (fds_bad)
		err = EINVAL;
	else if ((err = vfu_parse(msg, len, nfds, &c)) == 0 && !k->c && c.hdr.cmd != NKV_VFU_VERSION)
		err = EINVAL; /* VERSION first */
	if (err == 0) {
		switch (c.hdr.cmd) {
		case NKV_VFU_VERSION:
			err = exec_version(s, k, v, &c, &keep);
			break;
		case NKV_VFU_DMA_MAP:
			err = exec_dma_map(k, v, &c, fds);
			break;
		case NKV_VFU_DMA_UNMAP:
			if ((err = exec_dma_unmap(k, v, &c)) == 0) /* the reply repeats the request */
				err = SENT(reply(k, &c, c.p, 24, -1));
			break;
		case NKV_VFU_DEVICE_GET_INFO: {
			uint8_t rep[16];
			nkv_put32(rep, 16);
			nkv_put32(rep + 4, NKV_VFU_DEV_RESET | NKV_VFU_DEV_PCI);
			nkv_put32(rep + 8, NKV_VFU_PCI_NUM_REGIONS);
			nkv_put32(rep + 12, NKV_VFU_PCI_NUM_IRQS);
			err = SENT(reply(k, &c, rep, sizeof(rep), -1));
			break;
		}
		case NKV_VFU_DEVICE_GET_REGION_INFO:
			err = exec_region_info(k, v, &c);
			break;
		case NKV_VFU_DEVICE_GET_IRQ_INFO:
			err = exec_irq_info(k, v, &c);
			break;
		case NKV_VFU_DEVICE_SET_IRQS:
			err = exec_set_irqs(k, v, &c, fds);
			break;
		case NKV_VFU_REGION_READ:
		case NKV_VFU_REGION_WRITE:
			err = exec_region_rw(k, v, &c);
			break;
		case NKV_VFU_DEVICE_RESET:
			err = exec_reset(s, k);
			break;
		}
		if (err == SEND_FAILED)
			keep = false;
	}
	if (err > 0) {
		if (reply_err(k, &c, err) < 0)
			keep = false;
	} else if (err == 0 && reply(k, &c, NULL, 0, -1) < 0) {
		keep = false;
	}
out:
	for (unsigned i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]); /* a mapped region keeps its own mapping; bound eventfds were taken */
	return keep;
}

/* ---- the connection ------------------------------------------------------------------------------ */

static int vfu_opened(struct nkv_shm *s, struct shm_conn *k)
{
	gid_t gid = s->conf.socket_group_set ? (gid_t)s->conf.socket_gid : (gid_t)-1;
	struct vfu_conn *v;
	uid_t uid;
	pid_t pid;

	if (!nkv_peer_allowed(k->fd, gid, &uid, &pid)) {
		NKV_WARN("vfio-user %s: refused a client of uid %d (pid %d): not the daemon's user, root or the socket group",
			 k->l->path, (int)uid, (int)pid);
		return -EACCES;
	}
	/* One client per socket, as a PCI function has one driver: a second waits its turn elsewhere. */
	for (struct shm_conn *o = s->conns; o; o = o->next)
		if (o != k && o->l == k->l) {
			NKV_WARN("vfio-user %s: refused a second client (uid %d, pid %d) while one is attached",
				 k->l->path, (int)uid, (int)pid);
			return -EBUSY;
		}
	if (!(v = calloc(1, sizeof(*v))) || !(v->buf = malloc(VFU_MSG_MAX))) {
		if (v)
			free(v);
		return -ENOMEM;
	}
	v->uid = uid;
	v->regs_fd = -1;
	k->fs = v;
	return 0;
}

static void vfu_closed(struct nkv_shm *s, struct shm_conn *k)
{
	struct vfu_conn *v = k->fs;

	(void)s;
	if (!v)
		return;
	for (unsigned i = 0; i < v->nfds; i++)
		close(v->fds[i]);
	if (v->regs_fd >= 0)
		close(v->regs_fd);
	free(v->nofd);
	free(v->buf);
	free(v);
	k->fs = NULL;
}

/* Read what is there of the current message: its header, then exactly the rest of it. A message
 * served whole resets the buffer. @return false when the connection must close. */
static bool vfu_message(struct nkv_shm *s, struct shm_conn *k)
{
	struct vfu_conn *v = k->fs;
	uint32_t need = v->have < 16 ? 16 : ((struct nkv_vfu_hdr *)v->buf)->msg_size;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(VFU_MAX_FDS * sizeof(int))];
	} cm;
	struct iovec iov = {.iov_base = v->buf + v->have, .iov_len = need - v->have};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	ssize_t n = recvmsg(k->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (v->nfds < VFU_MAX_FDS)
				v->fds[v->nfds++] = f;
			else {
				close(f);
				v->fds_bad = true;
			}
		}
	}
	if (mh.msg_flags & MSG_CTRUNC)
		v->fds_bad = true;
	if (n == 0)
		return false; /* the client hung up */
	v->have += (uint32_t)n;
	if (v->have == 16) {
		need = ((struct nkv_vfu_hdr *)v->buf)->msg_size;
		if (need < 16 || need > VFU_MSG_MAX) {
			NKV_WARN("vfio-user %s: message of %u bytes (limit %u): closed", k->l->path, need, VFU_MSG_MAX);
			return false;
		}
	}
	if (v->have < need || v->have < 16)
		return true;
	unsigned nfds = v->nfds;
	bool bad = v->fds_bad;
	int fds[VFU_MAX_FDS];
	memcpy(fds, v->fds, sizeof(fds));
	v->have = 0;
	v->nfds = 0;
	v->fds_bad = false;
	return vfu_handle(s, k, v->buf, need, fds, nfds, bad);
}

const struct shm_front nkv_vfu_front = {
	.name = "vfio-user",
	.sock_type = SOCK_STREAM,
	.opened = vfu_opened,
	.message = vfu_message,
	.closed = vfu_closed,
};
