/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vfio_user.c - libnkv's vfio-user host driver: the second attach protocol of the PCIe-style
 * controller (shm_int.h). It reaches the same controller as nkv_shm.h's socket, the way a VMM (QEMU's
 * vfio-user-pci) or SPDK's NVMe host library does: VERSION, DEVICE_GET_INFO, the regions (BAR0's
 * registers and doorbells mapped through its sparse mmap area; config space and the MSI-X table by
 * REGION_READ/WRITE), DMA_MAP/DMA_UNMAP of the host's memfds at IOVAs of its choosing, and MSI-X
 * vectors bound to eventfds with SET_IRQS. Everything after that (bring-up, queues, PRPs, bounce,
 * registered buffers, polling and interrupt waits) is shm_ctrl.c's and shm.c's.
 *
 * Protocol: src/common/vfio_user.h (QEMU's docs/interop/vfio-user.rst, version 0.0). The server is
 * not trusted: every reply is checked (type, id, command, size) before it is used, and one that does
 * not fit ends the connection (-EPROTO) rather than the host.
 *
 * Interrupts: a standard MSI-X device interrupts after every batch of CQEs it posts, so the host's
 * eventfd counts posts it may already have reaped; shm.c drains it before it sleeps. Where the
 * controller offers the shm notification area (its offset at NKV_SHM_REG_NOTIFY), the host opts in
 * to its ARM words (NKV_VFU_HOSTFEAT_ARM) and is interrupted only when it waits. There is no doorbell kick:
 * a vfio-user controller watches its doorbells by itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client/shm_int.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "common/vfio_user.h"

#define VFU_REPLY_MAX 4096u      /* the largest reply payload taken (region info with its capabilities) */
#define VFU_MAX_AREAS 16u        /* sparse mmap areas looked at */
#define VFU_MAX_CAPS 16u         /* capability chain entries followed */
#define PCI_COMMAND 0x04u
#define PCI_COMMAND_MEMORY 0x2u
#define PCI_COMMAND_MASTER 0x4u
#define PCI_STATUS 0x06u
#define PCI_STATUS_CAP_LIST 0x10u
#define PCI_CAP_PTR 0x34u
#define PCI_CAP_ID_MSIX 0x11u
#define PCI_MSIX_ENABLE 0x8000u
#define PCI_MSIX_MASKALL 0x4000u

/** The vfio-user association's own state (s->at_priv). */
struct vfu {
	uint16_t next_id;
	struct {                 /* the mapped sparse areas of BAR0, each its own mapping */
		uint8_t *va;
		uint64_t off, len;
	} maps[VFU_MAX_AREAS];
	unsigned nmaps;
	uint32_t msix_count;     /* MSI-X vectors (GET_IRQ_INFO) */
	bool msix_table;         /* vector masks are written in the table of BAR NKV_VFU_MSIX_BAR */
	uint32_t msix_table_off; /* the table's offset in that BAR */
};

bool nkv_vfu_arm_off;
bool nkv_vfu_trap_regs;

static struct vfu *vfu_of(struct nkv_shm_ctrl *s)
{
	return s->at_priv;
}

/* ---- messages ---------------------------------------------------------------------------------- */

static void fds_close(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Read exactly @len bytes (a stream), keeping the descriptors that come with them (at most @fmax;
 * more are closed and counted in *@nfd all the same). @return 0, -ECONNRESET, -ETIMEDOUT or -errno. */
static int read_full(int sock, void *buf, size_t len, int *fds, unsigned fmax, unsigned *nfd)
{
	size_t got = 0;
	while (got < len) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(8 * sizeof(int))];
		} cm;
		struct iovec iov = {.iov_base = (uint8_t *)buf + got, .iov_len = len - got};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (unsigned i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (*nfd < fmax)
					fds[*nfd] = fd;
				else
					close(fd);
				(*nfd)++;
			}
		}
		if (mh.msg_flags & MSG_CTRUNC)
			(*nfd) += 1000; /* descriptors were lost: the reply cannot be used */
		if (n == 0)
			return -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

/* Send the whole message, @fd (when >= 0) on its first byte. */
static int send_full(int sock, const void *msg, size_t len, int fd)
{
	size_t sent = 0;
	while (sent < len) {
		ssize_t n = nkv_send_fd(sock, (const uint8_t *)msg + sent, len - sent, sent == 0 ? fd : -1);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n == -EAGAIN || n == -EWOULDBLOCK ? -ETIMEDOUT : (int)n;
		sent += (size_t)n;
	}
	return 0;
}

/**
 * One command and its reply. @msg starts with a struct nkv_vfu_hdr this fills in (id, command,
 * size); @fd_in goes with it when >= 0. The reply's payload (after its header) goes to @rep, at most
 * @cap bytes, its length to *@rep_len; a descriptor that comes with it to *@fd_out (when asked; else
 * it is closed). A reply that is not this command's (type, id, command), larger than @cap or
 * VFU_REPLY_MAX, or carries more than one descriptor leaves the stream out of step: the socket is
 * shut down, which ends the controller. @return 0, the server's -errno (an error reply), or -errno.
 */
static int vfu_request(struct nkv_shm_ctrl *s, uint16_t cmd, void *msg, size_t len, int fd_in, void *rep,
		       size_t cap, size_t *rep_len, int *fd_out)
{
	struct nkv_vfu_hdr *h = msg, r;
	int fds[2] = {-1, -1};
	unsigned nfd = 0;
	int rc;

	if (fd_out)
		*fd_out = -1;
	if (rep_len)
		*rep_len = 0;
	pthread_mutex_lock(&s->sock_mu);
	if (s->sock < 0) {
		pthread_mutex_unlock(&s->sock_mu);
		return -ENOTCONN;
	}
	struct vfu *v = vfu_of(s);
	uint16_t id = ++v->next_id;
	memset(h, 0, sizeof(*h));
	h->msg_id = id;
	h->cmd = cmd;
	h->msg_size = (uint32_t)len;
	h->flags = NKV_VFU_F_COMMAND;
	rc = send_full(s->sock, msg, len, fd_in);
	if (rc)
		goto broken;
	rc = read_full(s->sock, &r, sizeof(r), fds, 2, &nfd);
	if (rc)
		goto broken;
	uint32_t plen = r.msg_size >= sizeof(r) ? r.msg_size - (uint32_t)sizeof(r) : UINT32_MAX;
	if ((r.flags & NKV_VFU_F_TYPE_MASK) != NKV_VFU_F_REPLY || r.msg_id != id || r.cmd != cmd ||
	    plen > VFU_REPLY_MAX || plen > cap) {
		NKV_WARN("vfio-user: bad reply to command %u id %u: type %u id %u command %u, %u bytes", cmd, id,
			 r.flags & NKV_VFU_F_TYPE_MASK, r.msg_id, r.cmd, r.msg_size);
		rc = -EPROTO;
		goto broken;
	}
	if (plen) {
		rc = read_full(s->sock, rep, plen, fds, 2, &nfd);
		if (rc)
			goto broken;
	}
	if (nfd > 1) {
		NKV_WARN("vfio-user: reply to command %u with %u descriptors", cmd, nfd);
		rc = -EPROTO;
		goto broken;
	}
	pthread_mutex_unlock(&s->sock_mu);
	if (r.flags & NKV_VFU_F_ERROR) {
		fds_close(fds, nfd);
		NKV_DEBUG("vfio-user: command %u: the server answers error %u", cmd, r.error);
		/* an errno from the server; 0 or nonsense still says it failed */
		return r.error > 0 && r.error < 4096 ? -(int)r.error : -EIO;
	}
	if (rep_len)
		*rep_len = plen;
	if (fd_out)
		*fd_out = fds[0];
	else
		fds_close(fds, nfd);
	return 0;
broken:
	fds_close(fds, nfd < 2 ? nfd : 2);
	shutdown(s->sock, SHUT_RDWR);
	pthread_mutex_unlock(&s->sock_mu);
	if (rc == -ECONNRESET || rc == -EPIPE) {
		/* e.g. a socket that already serves a client refuses another */
		NKV_DEBUG("vfio-user: the server closed the connection (command %u)", cmd);
		rc = -ECONNRESET;
	}
	return rc;
}

/* ---- regions ----------------------------------------------------------------------------------- */

/* REGION_READ / REGION_WRITE of @len bytes (at most 8) at @off of @region. */
static int region_rw(struct nkv_shm_ctrl *s, uint32_t region, uint64_t off, void *buf, uint32_t len, bool write)
{
	struct {
		struct nkv_vfu_region_rw m;
		uint8_t data[8];
	} q;
	struct {
		struct nkv_vfu_region_rw m; /* its header part is not filled: the payload starts at offset */
		uint8_t data[8];
	} a;
	size_t got;
	if (len > 8)
		return -EINVAL;
	memset(&q, 0, sizeof(q));
	q.m.offset = off;
	q.m.region = region;
	q.m.count = len;
	if (write)
		memcpy(q.data, buf, len);
	uint8_t *pay = (uint8_t *)&a + sizeof(struct nkv_vfu_hdr);
	size_t want = sizeof(a.m) - sizeof(struct nkv_vfu_hdr) + (write ? 0 : len);
	int rc = vfu_request(s, write ? NKV_VFU_REGION_WRITE : NKV_VFU_REGION_READ, &q,
			     sizeof(q.m) + (write ? len : 0), -1, pay, want, &got, NULL);
	if (rc)
		return rc;
	if (got != want || a.m.count != len || a.m.region != region || a.m.offset != off) {
		NKV_WARN("vfio-user: region %u %s at %#llx: reply of %zu bytes, count %u", region,
			 write ? "write" : "read", (unsigned long long)off, got, a.m.count);
		return -EPROTO;
	}
	if (!write)
		memcpy(buf, a.data, len);
	return 0;
}

static int vfu_reg_rw(struct nkv_ctrl *ctrl, uint32_t off, void *buf, uint32_t len, bool write)
{
	return region_rw(ctrl->shm, NKV_VFU_PCI_BAR0, off, buf, len, write);
}

static int cfg_read(struct nkv_shm_ctrl *s, uint32_t off, void *buf, uint32_t len)
{
	return region_rw(s, NKV_VFU_PCI_CONFIG, off, buf, len, false);
}

static int cfg_write(struct nkv_shm_ctrl *s, uint32_t off, const void *buf, uint32_t len)
{
	return region_rw(s, NKV_VFU_PCI_CONFIG, off, (void *)buf, len, true);
}

/**
 * DEVICE_GET_REGION_INFO of @index into @ri (32 bytes) and its capabilities into @caps (@cap bytes
 * of the payload from its start); *@fd: the region's mmap fd (-1: none).
 */
static int region_info(struct nkv_shm_ctrl *s, uint32_t index, uint8_t *pay, size_t cap, size_t *got, int *fd)
{
	struct nkv_vfu_region_info q;
	memset(&q, 0, sizeof(q));
	q.argsz = (uint32_t)cap;
	q.index = index;
	int rc = vfu_request(s, NKV_VFU_DEVICE_GET_REGION_INFO, &q, sizeof(q), -1, pay, cap, got, fd);
	if (rc)
		return rc;
	if (*got < NKV_VFU_REGION_INFO_PAYLOAD) {
		NKV_WARN("vfio-user: region %u info of %zu bytes", index, *got);
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	return 0;
}

/*
 * Map BAR0's mappable areas (the sparse mmap capability's, or the whole region) and take the
 * doorbells from them, and the registers when an area starts at 0. The server's numbers are checked
 * against the region and the reply before any is used.
 */
static int bar0_map(struct nkv_shm_ctrl *s)
{
	struct vfu *v = vfu_of(s);
	uint8_t pay[VFU_REPLY_MAX];
	size_t got;
	int fd = -1;
	int rc = region_info(s, NKV_VFU_PCI_BAR0, pay, sizeof(pay), &got, &fd);
	if (rc)
		return rc;
	struct nkv_vfu_region_info ri;
	memcpy((uint8_t *)&ri + sizeof(struct nkv_vfu_hdr), pay, NKV_VFU_REGION_INFO_PAYLOAD);
	struct nkv_vfu_sparse_area areas[VFU_MAX_AREAS];
	unsigned na = 0;
	rc = -ENOTSUP;
	if (!(ri.flags & NKV_VFU_REGION_MMAP) || fd < 0 || ri.size < NKV_SHM_DB_BASE + 8) {
		NKV_WARN("vfio-user: BAR0 of %llu bytes, flags %#x: the doorbells cannot be mapped",
			 (unsigned long long)ri.size, ri.flags);
		goto out;
	}
	if (ri.flags & NKV_VFU_REGION_CAPS) {
		uint32_t off = ri.cap_offset;
		for (unsigned n = 0; off && n < VFU_MAX_CAPS; n++) {
			struct nkv_vfu_cap_hdr ch;
			if (off < NKV_VFU_REGION_INFO_PAYLOAD || (uint64_t)off + sizeof(ch) > got || (off & 3)) {
				NKV_WARN("vfio-user: BAR0 capability at %u of a %zu-byte reply", off, got);
				rc = -EPROTO;
				goto out;
			}
			memcpy(&ch, pay + off, sizeof(ch));
			if (ch.id == NKV_VFU_CAP_SPARSE_MMAP) {
				struct nkv_vfu_sparse_mmap sm;
				if ((uint64_t)off + sizeof(sm) > got) {
					rc = -EPROTO;
					goto out;
				}
				memcpy(&sm, pay + off, sizeof(sm));
				if (sm.nr_areas > VFU_MAX_AREAS ||
				    (uint64_t)off + sizeof(sm) + (uint64_t)sm.nr_areas * sizeof(areas[0]) > got) {
					NKV_WARN("vfio-user: BAR0 sparse mmap of %u areas", sm.nr_areas);
					rc = -EPROTO;
					goto out;
				}
				memcpy(areas, pay + off + sizeof(sm), sm.nr_areas * sizeof(areas[0]));
				na = sm.nr_areas;
				break;
			}
			off = ch.next;
		}
	} else {
		areas[0] = (struct nkv_vfu_sparse_area){.offset = 0, .size = ri.size};
		na = 1;
	}
	/* A file shorter than an area would fault this host at its first access past the end: refused.
	 * One not sealed against shrinking could be cut later (this server's is sealed; others may not
	 * be, and are taken). */
	struct stat st;
	bool sized = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		NKV_DEBUG("vfio-user: BAR0's file is not sealed against shrinking");
	for (unsigned i = 0; i < na; i++) {
		uint64_t ao = areas[i].offset, al = areas[i].size;
		if (!al || (ao & 0xfff) || (al & 0xfff) || ao > ri.size || al > ri.size - ao || al > UINT32_MAX ||
		    ri.offset + ao < ri.offset) {
			NKV_WARN("vfio-user: BAR0 area %u (%#llx, %llu bytes) outside the %llu-byte BAR", i,
				 (unsigned long long)ao, (unsigned long long)al, (unsigned long long)ri.size);
			rc = -EPROTO;
			goto out;
		}
		if (sized && (uint64_t)st.st_size < ri.offset + ao + al) {
			NKV_WARN("vfio-user: BAR0 area %u ends at %#llx of a %lld-byte file", i,
				 (unsigned long long)(ri.offset + ao + al), (long long)st.st_size);
			rc = -EPROTO;
			goto out;
		}
		void *m = mmap(NULL, al, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(ri.offset + ao));
		if (m == MAP_FAILED) {
			rc = -errno;
			NKV_WARN("vfio-user: mmap of BAR0 area %u: %s", i, strerror(errno));
			goto out;
		}
		v->maps[v->nmaps].va = m;
		v->maps[v->nmaps].off = ao;
		v->maps[v->nmaps].len = al;
		v->nmaps++;
		/* the doorbells: the area holding the admin queue's (at 1000h) */
		if (ao <= NKV_SHM_DB_BASE && ao + al >= NKV_SHM_DB_BASE + 8 && !s->db_map) {
			s->db_map = m;
			s->db_off = (uint32_t)ao;
			s->db_len = (uint32_t)al;
		}
		/* the registers, when their page is mapped too: no message per register access */
		if (ao == 0 && al >= NKV_SHM_DB_BASE && !s->regs && !nkv_vfu_trap_regs) {
			s->regs = m;
			s->reg_size = (uint32_t)al;
		}
	}
	if (!s->db_map) {
		NKV_WARN("vfio-user: no mappable BAR0 area holds the doorbells at %#x", NKV_SHM_DB_BASE);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static void vfu_detach(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct vfu *v = vfu_of(s);
	if (!v)
		return;
	for (unsigned i = 0; i < v->nmaps; i++)
		munmap(v->maps[i].va, v->maps[i].len);
	v->nmaps = 0;
}

/* ---- PCI bring-up ------------------------------------------------------------------------------ */

/*
 * Memory space and bus mastering on, MSI-X enabled and unmasked as a whole, as a PCI driver does
 * (Linux: pci_enable_device_mem, pci_set_master, pci_alloc_irq_vectors): a device may hold DMA and
 * interrupts back without them. The MSI-X capability also says where the vector table is.
 */
static int pci_enable(struct nkv_shm_ctrl *s)
{
	struct vfu *v = vfu_of(s);
	uint16_t cmd, status;
	int rc = cfg_read(s, PCI_COMMAND, &cmd, 2);
	if (rc == 0) {
		cmd |= PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
		rc = cfg_write(s, PCI_COMMAND, &cmd, 2);
	}
	if (rc == 0)
		rc = cfg_read(s, PCI_STATUS, &status, 2);
	if (rc) {
		NKV_WARN("vfio-user: PCI command register: %s", strerror(-rc));
		return rc;
	}
	if (!(status & PCI_STATUS_CAP_LIST) || !v->msix_count)
		return 0;
	uint8_t ptr;
	if ((rc = cfg_read(s, PCI_CAP_PTR, &ptr, 1)) != 0)
		return rc;
	for (unsigned n = 0; ptr >= 0x40 && n < 48; n++) { /* 48 capabilities fill the 192 bytes */
		uint8_t hdr[2];
		if ((rc = cfg_read(s, ptr & ~3u, hdr, 2)) != 0)
			return rc;
		if (hdr[0] == PCI_CAP_ID_MSIX) {
			uint16_t ctl;
			uint32_t table;
			uint32_t base = ptr & ~3u;
			if ((rc = cfg_read(s, base + 2, &ctl, 2)) != 0 || (rc = cfg_read(s, base + 4, &table, 4)) != 0)
				return rc;
			if ((table & 7u) == NKV_VFU_MSIX_BAR) {
				v->msix_table = true;
				v->msix_table_off = table & ~7u;
			}
			ctl = (uint16_t)((ctl | PCI_MSIX_ENABLE) & ~PCI_MSIX_MASKALL);
			return cfg_write(s, base + 2, &ctl, 2);
		}
		ptr = hdr[1];
	}
	return 0;
}

/* ---- the attach protocol ----------------------------------------------------------------------- */

static int version(struct nkv_shm_ctrl *s)
{
	static const char caps[] = "{\"capabilities\":{\"max_msg_fds\":1,\"pgsizes\":4096}}";
	struct {
		struct nkv_vfu_version m;
		char json[sizeof(caps)];
	} q;
	uint8_t pay[512];
	size_t got;
	memset(&q, 0, sizeof(q));
	q.m.major = NKV_VFU_MAJOR;
	q.m.minor = NKV_VFU_MINOR;
	memcpy(q.json, caps, sizeof(caps));
	/* the JSON's NUL ends the message: no padding after it */
	int rc = vfu_request(s, NKV_VFU_VERSION, &q, sizeof(q.m) + sizeof(caps), -1, pay, sizeof(pay), &got, NULL);
	if (rc)
		return rc;
	uint16_t major, minor;
	if (got < 4)
		return -EPROTO;
	memcpy(&major, pay, 2);
	memcpy(&minor, pay + 2, 2);
	if (major != NKV_VFU_MAJOR || minor > NKV_VFU_MINOR) {
		NKV_WARN("vfio-user: the server answers version %u.%u to %u.%u", major, minor, NKV_VFU_MAJOR,
			 NKV_VFU_MINOR);
		return -EPROTO;
	}
	return 0;
}

static int device_info(struct nkv_shm_ctrl *s)
{
	struct nkv_vfu_device_info q, a;
	size_t got;
	memset(&q, 0, sizeof(q));
	q.argsz = sizeof(q) - sizeof(q.hdr);
	uint8_t *pay = (uint8_t *)&a + sizeof(a.hdr);
	int rc = vfu_request(s, NKV_VFU_DEVICE_GET_INFO, &q, sizeof(q), -1, pay, sizeof(a) - sizeof(a.hdr), &got, NULL);
	if (rc)
		return rc;
	if (got != sizeof(a) - sizeof(a.hdr) || !(a.flags & NKV_VFU_DEV_PCI) || a.num_regions < NKV_VFU_PCI_NUM_REGIONS) {
		NKV_WARN("vfio-user: not a PCI device (%zu bytes, flags %#x, %u regions)", got, a.flags, a.num_regions);
		return -EPROTO;
	}
	struct vfu *v = vfu_of(s);
	v->msix_count = 0;
	if (a.num_irqs > NKV_VFU_PCI_MSIX_IRQ) {
		struct nkv_vfu_irq_info iq, ia;
		memset(&iq, 0, sizeof(iq));
		iq.argsz = sizeof(iq) - sizeof(iq.hdr);
		iq.index = NKV_VFU_PCI_MSIX_IRQ;
		pay = (uint8_t *)&ia + sizeof(ia.hdr);
		rc = vfu_request(s, NKV_VFU_DEVICE_GET_IRQ_INFO, &iq, sizeof(iq), -1, pay, sizeof(ia) - sizeof(ia.hdr),
				 &got, NULL);
		if (rc)
			return rc;
		if (got != sizeof(ia) - sizeof(ia.hdr) || ia.index != NKV_VFU_PCI_MSIX_IRQ)
			return -EPROTO;
		if (ia.flags & NKV_VFU_IRQ_INFO_EVENTFD)
			v->msix_count = ia.count > 2048 ? 2048 : ia.count; /* MSI-X has at most 2048 */
	}
	return 0;
}

/*
 * Opt in to the ARM-word interrupt suppression where the controller offers it: it publishes the
 * notification area's offset (NKV_SHM_REG_NOTIFY; FEAT_NOTIFY stays clear, there is no kick channel
 * over vfio-user), the host sets NKV_VFU_HOSTFEAT_ARM before CC.EN = 1. A standard NVMe controller
 * reads 0 there: every CQ post interrupts.
 */
static void arm_setup(struct nkv_shm_ctrl *s)
{
	if (!s->regs || nkv_vfu_arm_off)
		return;
	uint32_t off = __atomic_load_n((uint32_t *)(s->regs + NKV_SHM_REG_NOTIFY), __ATOMIC_ACQUIRE);
	if (!off)
		return;
	if ((off & 63) || off < NKV_SHM_DB_BASE ||
	    (uint64_t)off + NKV_SHM_NOTIFY_ARM + 4ull * ((uint64_t)s->max_queues + 1) > s->reg_size) {
		NKV_WARN("vfio-user: notification area at %#x does not fit the %u mapped bytes: every CQ post "
			 "interrupts", off, s->reg_size);
		return;
	}
	uint32_t *hf = (uint32_t *)(s->regs + NKV_VFU_REG_HOSTFEAT);
	__atomic_store_n(hf, __atomic_load_n(hf, __ATOMIC_RELAXED) | NKV_VFU_HOSTFEAT_ARM, __ATOMIC_RELEASE);
	s->arm = (uint32_t *)(s->regs + off + NKV_SHM_NOTIFY_ARM);
}

static int vfu_attach(struct nkv_ctrl *ctrl, const char *path, bool notify)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (!s->at_priv && !(s->at_priv = calloc(1, sizeof(struct vfu))))
		return -ENOMEM;
	int rc = nkv_shm_sock_open(path, SOCK_STREAM, ctrl->opts.timeout_ms);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->sock_mu);
	s->sock = rc;
	pthread_mutex_unlock(&s->sock_mu);
	if ((rc = version(s)) != 0 || (rc = device_info(s)) != 0 || (rc = bar0_map(s)) != 0 ||
	    (rc = pci_enable(s)) != 0)
		return rc;
	struct vfu *v = vfu_of(s);
	/* I/O queues: as many as there are mapped doorbell pairs past the admin queue's */
	uint64_t pairs = ((uint64_t)s->db_off + s->db_len - NKV_SHM_DB_BASE) / 8;
	s->max_queues = (uint16_t)(pairs - 1 > UINT16_MAX ? UINT16_MAX : pairs - 1);
	ctrl->cntlid = 0; /* Identify's */
	if (notify && v->msix_count) {
		/* a CQ's vector is its QID: queues past the vectors would have none */
		if (s->max_queues > v->msix_count - 1)
			s->max_queues = (uint16_t)(v->msix_count - 1);
		s->notify = true;
		arm_setup(s);
	}
	return 0;
}

static int vfu_map(struct nkv_ctrl *ctrl, int fd, uint64_t offset, uint64_t len, uint64_t iova, uint32_t flags)
{
	struct nkv_vfu_dma_map q;
	memset(&q, 0, sizeof(q));
	q.argsz = sizeof(q) - sizeof(q.hdr);
	q.flags = NKV_VFU_DMA_READ_OK | (flags & NKV_SHM_REG_READONLY ? 0 : NKV_VFU_DMA_WRITE_OK);
	q.offset = offset;
	q.addr = iova;
	q.size = len;
	int rc = vfu_request(ctrl->shm, NKV_VFU_DMA_MAP, &q, sizeof(q), fd, NULL, 0, NULL, NULL);
	if (rc)
		NKV_DEBUG("vfio-user DMA_MAP iova %#llx len %llu flags %#x: %s", (unsigned long long)iova,
			  (unsigned long long)len, q.flags, strerror(-rc));
	return rc;
}

static int vfu_unmap(struct nkv_ctrl *ctrl, uint64_t iova, uint64_t len)
{
	struct nkv_vfu_dma_unmap q;
	uint8_t pay[64];
	size_t got;
	memset(&q, 0, sizeof(q));
	q.argsz = sizeof(q) - sizeof(q.hdr);
	q.addr = iova;
	q.size = len;
	int rc = vfu_request(ctrl->shm, NKV_VFU_DMA_UNMAP, &q, sizeof(q), -1, pay, sizeof(pay), &got, NULL);
	if (rc)
		NKV_DEBUG("vfio-user DMA_UNMAP iova %#llx len %llu: %s", (unsigned long long)iova,
			  (unsigned long long)len, strerror(-rc));
	return rc;
}

static int vfu_irq_bind(struct nkv_ctrl *ctrl, uint16_t vector, int fd)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct vfu *v = vfu_of(s);
	if (vector >= v->msix_count)
		return -EINVAL;
	struct nkv_vfu_irq_set q;
	memset(&q, 0, sizeof(q));
	q.argsz = sizeof(q) - sizeof(q.hdr);
	q.flags = NKV_VFU_IRQ_SET_DATA_EVENTFD | NKV_VFU_IRQ_SET_ACTION_TRIGGER;
	q.index = NKV_VFU_PCI_MSIX_IRQ;
	q.start = vector;
	q.count = 1;
	int rc = vfu_request(s, NKV_VFU_DEVICE_SET_IRQS, &q, sizeof(q), fd, NULL, 0, NULL, NULL);
	if (rc == 0 && v->msix_table) {
		/* the vector's Vector Control: unmasked (a PCI function starts with every vector masked) */
		uint32_t ctl = 0;
		rc = region_rw(s, NKV_VFU_MSIX_BAR, (uint64_t)v->msix_table_off + 16u * vector + 12u, &ctl, 4, true);
	}
	if (rc)
		NKV_DEBUG("vfio-user SET_IRQS MSI-X vector %u: %s", vector, strerror(-rc));
	return rc;
}

const struct nkv_shm_attach_ops nkv_shm_attach_vfio_user = {
	.name = "vfio-user",
	.attach = vfu_attach,
	.map = vfu_map,
	.unmap = vfu_unmap,
	.irq_bind = vfu_irq_bind,
	.kick_bind = NULL,
	.reg_rw = vfu_reg_rw,
	.detach = vfu_detach,
};
