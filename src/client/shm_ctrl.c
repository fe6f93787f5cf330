/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_ctrl.c - the controller side of libnkv's shared-memory (PCIe-style) transport: the registers,
 * bring-up as a PCIe driver does it (docs/nvme-kv-wire.md B.3), shutdown, the registered buffers of
 * nkv_buf_alloc(), all through an attach protocol (shm_int.h); and the first attach protocol, the
 * Unix socket of nkv_shm.h (HELLO and the register memfd, REG/DEREG of memory regions, SET_IRQ and
 * SET_KICK). The second, vfio-user, is vfio_user.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/shm_int.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "nkv/nkv_devq.h"

/* ---- registers --------------------------------------------------------------------------------- */

/*
 * Registers are either mapped (nkv_shm.h's register page; a vfio-user BAR0 whose first page is
 * mappable) or reached by a message per access (vfio-user REGION_READ/WRITE: the usual case, the
 * controller then sees every register write as it happens). A failed message reads as all ones, as
 * a PCIe read of a device that is gone does: CSTS then shows CFS and the host stops.
 */
static uint32_t rd32(const struct nkv_shm_ctrl *s, uint32_t off)
{
	if (!s->regs) {
		uint32_t v = UINT32_MAX;
		(void)s->at->reg_rw(s->ctrl, off, &v, 4, false);
		return v;
	}
	/* acquire: what the controller wrote before the register (CSTS.RDY after its setup) is visible */
	return __atomic_load_n((const uint32_t *)(s->regs + off), __ATOMIC_ACQUIRE);
}

static uint64_t rd64(const struct nkv_shm_ctrl *s, uint32_t off)
{
	if (!s->regs) {
		uint64_t v = UINT64_MAX;
		(void)s->at->reg_rw(s->ctrl, off, &v, 8, false);
		return v;
	}
	return __atomic_load_n((const uint64_t *)(s->regs + off), __ATOMIC_ACQUIRE);
}

static void wr32(struct nkv_shm_ctrl *s, uint32_t off, uint32_t v)
{
	if (!s->regs) {
		(void)s->at->reg_rw(s->ctrl, off, &v, 4, true);
		return;
	}
	/* release: the controller that sees this value (CC.EN) also sees AQA/ASQ/ACQ and the queues */
	__atomic_store_n((uint32_t *)(s->regs + off), v, __ATOMIC_RELEASE);
}

/* CC, then a kick: a poller asleep until kicked does not watch CC by itself. */
static void wr_cc(struct nkv_shm_ctrl *s, uint32_t v)
{
	wr32(s, NKV_REG_CC, v);
	nkv_shm_kick(s);
}

static void wr64(struct nkv_shm_ctrl *s, uint32_t off, uint64_t v)
{
	if (!s->regs) {
		(void)s->at->reg_rw(s->ctrl, off, &v, 8, true);
		return;
	}
	__atomic_store_n((uint64_t *)(s->regs + off), v, __ATOMIC_RELEASE);
}

volatile uint32_t *nkv_shm_doorbell(struct nkv_ctrl *ctrl, uint32_t off)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (!s->db_map || off < s->db_off || (uint64_t)off + 4 > (uint64_t)s->db_off + s->db_len)
		return NULL;
	return (volatile uint32_t *)(s->db_map + (off - s->db_off));
}

static void nap_us(unsigned us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000L};
	nanosleep(&ts, NULL);
}

/** CAP.TO in ms (at least 500). */
static int64_t cap_to_ms(uint64_t cap)
{
	int64_t to = (int64_t)((cap >> NKV_CAP_TO_SHIFT) & 0xff) * 500;
	return to < 500 ? 500 : to;
}

/** Wait for (CSTS & @mask) == @want within CAP.TO. @return 0, -ETIMEDOUT, or -EIO on CFS (@cfs). */
static int wait_csts(struct nkv_shm_ctrl *s, uint32_t mask, uint32_t want, bool cfs, uint32_t *last)
{
	int64_t deadline = nkv_client_now_ms() + cap_to_ms(s->cap);
	unsigned us = 10;
	for (;;) {
		uint32_t csts = rd32(s, NKV_REG_CSTS);
		*last = csts;
		if (csts == UINT32_MAX)
			return -ENODEV; /* all ones: the device is gone (a lost vfio-user socket) */
		if (cfs && (csts & NKV_CSTS_CFS))
			return -EIO;
		if ((csts & mask) == want)
			return 0;
		if (nkv_client_now_ms() >= deadline)
			return -ETIMEDOUT;
		nap_us(us);
		us = us < 1000 ? us * 2 : 1000;
	}
}

/* ---- socket protocol --------------------------------------------------------------------------- */

static void hdr_init(struct nkv_shm_hdr *h, uint16_t op)
{
	nkv_put32(&h->magic, NKV_SHM_MAGIC);
	nkv_put16(&h->version, NKV_SHM_VERSION);
	nkv_put16(&h->op, op);
}

/**
 * Send one request (with @fd_in when >= 0) and receive its reply (with *@fd_out when asked).
 * A lost or late reply leaves the stream out of step: the socket is shut down, which ends the
 * controller. @return 0 with *@rep filled, or -errno (socket); the reply's own status is the caller's.
 */
static int request(struct nkv_shm_ctrl *s, const void *msg, size_t len, int fd_in, struct nkv_shm_reply *rep,
		   int *fd_out)
{
	int rc = 0;
	ssize_t n;

	if (fd_out)
		*fd_out = -1;
	pthread_mutex_lock(&s->sock_mu);
	if (s->sock < 0) {
		rc = -ENOTCONN;
		goto out;
	}
	n = nkv_send_fd(s->sock, msg, len, fd_in);
	if (n != (ssize_t)len) {
		rc = n < 0 ? (n == -EAGAIN ? -ETIMEDOUT : (int)n) : -EPROTO;
		goto broken;
	}
	n = nkv_recv_fd(s->sock, rep, sizeof(*rep), fd_out, 0);
	if (n <= 0) {
		rc = n == 0 ? -ECONNRESET : n == -EAGAIN ? -ETIMEDOUT : n == -EMSGSIZE ? -EPROTO : (int)n;
		goto broken;
	}
	if (n != (ssize_t)sizeof(*rep) || nkv_get32(&rep->hdr.magic) != NKV_SHM_MAGIC) {
		NKV_WARN("shm: bad reply (%zd bytes, magic %#x)", n, nkv_get32(&rep->hdr.magic));
		rc = -EPROTO;
		goto broken;
	}
	goto out;
broken:
	if (fd_out && *fd_out >= 0) {
		close(*fd_out);
		*fd_out = -1;
	}
	shutdown(s->sock, SHUT_RDWR);
out:
	pthread_mutex_unlock(&s->sock_mu);
	return rc;
}

static int sock_map(struct nkv_ctrl *ctrl, int fd, uint64_t offset, uint64_t len, uint64_t iova, uint32_t flags)
{
	struct nkv_shm_reg m;
	struct nkv_shm_reply r;
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, NKV_SHM_REG);
	nkv_put64(&m.iova, iova);
	nkv_put64(&m.len, len);
	nkv_put64(&m.offset, offset);
	nkv_put32(&m.flags, flags);
	int rc = request(ctrl->shm, &m, sizeof(m), fd, &r, NULL);
	if (rc == 0)
		rc = (int32_t)nkv_get32(&r.status);
	if (rc)
		NKV_DEBUG("shm REG iova %#llx len %llu flags %#x: %s", (unsigned long long)iova,
			  (unsigned long long)len, flags, strerror(-rc));
	return rc;
}

static int sock_unmap(struct nkv_ctrl *ctrl, uint64_t iova, uint64_t len)
{
	(void)len; /* the region at @iova, whatever its length */
	struct nkv_shm_reg m;
	struct nkv_shm_reply r;
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, NKV_SHM_DEREG);
	nkv_put64(&m.iova, iova);
	int rc = request(ctrl->shm, &m, sizeof(m), -1, &r, NULL);
	if (rc == 0)
		rc = (int32_t)nkv_get32(&r.status);
	if (rc)
		NKV_DEBUG("shm DEREG iova %#llx: %s", (unsigned long long)iova, strerror(-rc));
	return rc;
}

int nkv_shm_reg_cuda(struct nkv_ctrl *ctrl, const void *ipc_handle64, int device, uint64_t offset, uint64_t len,
		     uint64_t *iova_out, uint32_t flags)
{
	if (iova_out)
		*iova_out = 0;
	if (!ctrl || !ctrl->shm || ctrl->discovery || !ipc_handle64 || !iova_out || device < 0 || !len ||
	    (len & 0xfff) || (flags & ~NKV_SHM_REG_READONLY))
		return -EINVAL;
	if (ctrl->shm->at != &nkv_shm_attach_sock)
		return -ENOTSUP; /* GPU memory by IPC handle is nkv_shm.h's message */
	struct nkv_shm_reg_cuda m;
	struct nkv_shm_reply r;
	uint64_t iova = nkv_shm_iova_alloc(ctrl->shm, len);
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, NKV_SHM_REG_CUDA);
	nkv_put64(&m.iova, iova);
	nkv_put64(&m.len, len);
	nkv_put64(&m.offset, offset);
	nkv_put32(&m.device, (uint32_t)device);
	nkv_put32(&m.flags, flags);
	memcpy(m.handle, ipc_handle64, sizeof(m.handle));
	int rc = request(ctrl->shm, &m, sizeof(m), -1, &r, NULL);
	if (rc == 0)
		rc = (int32_t)nkv_get32(&r.status);
	if (rc) {
		NKV_DEBUG("shm REG_CUDA device %d offset %llu len %llu at iova %#llx: %s", device,
			  (unsigned long long)offset, (unsigned long long)len, (unsigned long long)iova, strerror(-rc));
		return rc;
	}
	*iova_out = iova;
	return 0;
}

int nkv_shm_dereg_cuda(struct nkv_ctrl *ctrl, uint64_t iova)
{
	if (!ctrl || !ctrl->shm || ctrl->discovery || !iova)
		return -EINVAL;
	if (ctrl->shm->at != &nkv_shm_attach_sock)
		return -ENOTSUP;
	return sock_unmap(ctrl, iova, 0);
}

/* SET_KICK / SET_IRQ of @fd (-1: unbind the kick). @return the target's status or a socket -errno. */
static int bind_fd(struct nkv_shm_ctrl *s, uint16_t op, uint16_t vector, int fd)
{
	struct nkv_shm_bind m;
	struct nkv_shm_reply r;
	memset(&m, 0, sizeof(m));
	hdr_init(&m.hdr, op);
	nkv_put16(&m.vector, vector);
	int rc = request(s, &m, sizeof(m), fd, &r, NULL);
	if (rc == 0)
		rc = (int32_t)nkv_get32(&r.status);
	if (rc)
		NKV_DEBUG("shm %s vector %u: %s", op == NKV_SHM_SET_KICK ? "SET_KICK" : "SET_IRQ", vector, strerror(-rc));
	return rc;
}

static int sock_irq_bind(struct nkv_ctrl *ctrl, uint16_t vector, int fd)
{
	return bind_fd(ctrl->shm, NKV_SHM_SET_IRQ, vector, fd);
}

static int sock_kick_bind(struct nkv_ctrl *ctrl, int fd)
{
	return bind_fd(ctrl->shm, NKV_SHM_SET_KICK, 0, fd);
}

/*
 * After HELLO: bind a doorbell kick when the target offers notifications (an older target leaves the
 * feature register zero and would close the socket on a message it does not know, so nothing is sent
 * to it). Any refusal leaves the controller polled, as before.
 */
static void sock_notify_setup(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (!(rd32(s, NKV_SHM_REG_FEAT) & NKV_SHM_FEAT_NOTIFY))
		return;
	uint32_t off = rd32(s, NKV_SHM_REG_NOTIFY);
	if ((off & 63) || off < NKV_SHM_DB_BASE ||
	    (uint64_t)off + NKV_SHM_NOTIFY_ARM + 4ull * ((uint64_t)s->max_queues + 1) > s->reg_size) {
		NKV_WARN("shm: notification area at %#x does not fit the %u-byte register page: polling", off,
			 s->reg_size);
		return;
	}
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return;
	if (bind_fd(s, NKV_SHM_SET_KICK, 0, fd) != 0) {
		close(fd);
		return;
	}
	s->kick_fd = fd;
	s->wakeup = (uint32_t *)(s->regs + off + NKV_SHM_NOTIFY_WAKEUP);
	s->arm = (uint32_t *)(s->regs + off + NKV_SHM_NOTIFY_ARM);
	s->notify = true;
}

static int hello(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct nkv_shm_hello h;
	struct nkv_shm_reply r;
	int fd = -1;
	memset(&h, 0, sizeof(h));
	hdr_init(&h.hdr, NKV_SHM_HELLO);
	memcpy(h.hostid, ctrl->hostid, 16);
	memcpy(h.hostnqn, ctrl->hostnqn, strnlen(ctrl->hostnqn, sizeof(h.hostnqn) - 1));
	int rc = request(s, &h, sizeof(h), -1, &r, &fd);
	if (rc == 0)
		rc = (int32_t)nkv_get32(&r.status);
	if (rc == 0 && fd < 0) {
		NKV_WARN("shm: HELLO reply without the register memfd");
		rc = -EPROTO;
	}
	uint32_t size = nkv_get32(&r.reg_size);
	if (rc == 0 && (size < NKV_SHM_DB_BASE + 8 || (size & 0xfff))) {
		NKV_WARN("shm: register page of %u bytes", size);
		rc = -EPROTO;
	}
	if (rc == 0) {
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			rc = -errno;
		else
			s->regs = m;
	}
	if (fd >= 0)
		close(fd);
	if (rc)
		return rc;
	s->reg_size = size;
	/* the doorbells are in the register page */
	s->db_map = s->regs;
	s->db_off = 0;
	s->db_len = size;
	ctrl->cntlid = nkv_get16(&r.cntlid);
	s->max_queues = nkv_get16(&r.max_queues);
	return 0;
}

static int sock_attach(struct nkv_ctrl *ctrl, const char *path, bool notify)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	int rc = nkv_shm_sock_open(path, SOCK_SEQPACKET, ctrl->opts.timeout_ms);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->sock_mu);
	s->sock = rc;
	pthread_mutex_unlock(&s->sock_mu);
	rc = hello(ctrl);
	if (rc == 0 && notify)
		sock_notify_setup(ctrl);
	return rc;
}

static void sock_detach(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (s->regs)
		munmap(s->regs, s->reg_size);
}

const struct nkv_shm_attach_ops nkv_shm_attach_sock = {
	.name = "shm",
	.attach = sock_attach,
	.map = sock_map,
	.unmap = sock_unmap,
	.irq_bind = sock_irq_bind,
	.kick_bind = sock_kick_bind,
	.detach = sock_detach,
};

/* ---- through the attach protocol --------------------------------------------------------------- */

int nkv_shm_reg(struct nkv_ctrl *ctrl, int fd, uint64_t offset, uint64_t len, uint64_t iova, uint32_t flags)
{
	return ctrl->shm->at->map(ctrl, fd, offset, len, iova, flags);
}

int nkv_shm_dereg(struct nkv_ctrl *ctrl, uint64_t iova, uint64_t len)
{
	return ctrl->shm->at->unmap(ctrl, iova, len);
}

int nkv_shm_irq_bind(struct nkv_ctrl *ctrl, struct nkv_shm_qp *q, uint16_t vector)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (!s->notify)
		return -ENOTSUP;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	int rc = s->at->irq_bind(ctrl, vector, fd);
	if (rc) {
		close(fd);
		return rc;
	}
	q->irq_fd = fd;
	q->arm = s->arm ? s->arm + vector : NULL;
	return 0;
}

int nkv_shm_kick_unbind(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	/* The target clears NEED_WAKEUP when it applies this and never sets it again: hosts stop
	 * kicking by themselves, so s->wakeup (read by every submitter) is left as it is. */
	return s->wakeup && s->at->kick_bind ? s->at->kick_bind(ctrl, -1) : 0;
}

/* Does the host want notifications? NKV_SHM_NOTIFY=0|off|no|false turns them off (A/B runs, or a
 * host that prefers to poll). */
bool nkv_shm_notify_wanted(void)
{
	const char *v = getenv("NKV_SHM_NOTIFY");
	return !v || !(strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0 || strcasecmp(v, "no") == 0 ||
		       strcasecmp(v, "false") == 0);
}

int nkv_shm_memfd(const char *name, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* The controller maps it: sealed against shrinking, so it can never be cut from under it. */
	if (ftruncate(fd, (off_t)len) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

uint64_t nkv_shm_iova_alloc(struct nkv_shm_ctrl *s, uint64_t len)
{
	pthread_mutex_lock(&s->iova_mu);
	uint64_t iova = s->iova_next;
	s->iova_next += (len + 2 * NKV_SHM_IOVA_ALIGN - 1) & ~(NKV_SHM_IOVA_ALIGN - 1); /* + a guard gap */
	pthread_mutex_unlock(&s->iova_mu);
	return iova;
}

int nkv_shm_alive(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct pollfd p = {.fd = s->sock, .events = POLLRDHUP};
	if (s->sock < 0 || (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)))) {
		NKV_DEBUG("shm: the target closed the socket");
		return -ECONNRESET;
	}
	if (rd32(s, NKV_REG_CSTS) & NKV_CSTS_CFS) {
		NKV_WARN("shm: controller fatal status (CSTS.CFS)");
		return -EIO;
	}
	return 0;
}

/* ---- bring-up ---------------------------------------------------------------------------------- */

int nkv_shm_sock_open(const char *path, int type, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno == EAGAIN ? -ETIMEDOUT : -errno;
		close(fd);
		return e;
	}
	return fd;
}

/** Disable if needed, program the admin queue, CC.EN = 1, wait for CSTS.RDY (docs/nvme-kv-wire.md B.3). */
static int enable(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct nkv_shm_qp *a = ctrl->admin->shm;
	uint32_t csts;
	int rc;

	s->cap = ctrl->cap = rd64(s, NKV_REG_CAP);
	if (((s->cap >> NKV_CAP_MPSMIN_SHIFT) & 0xf) != 0 || ((s->cap >> NKV_CAP_DSTRD_SHIFT) & 0xf) != 0) {
		NKV_WARN("shm: CAP %#llx: MPSMIN and DSTRD must be 0", (unsigned long long)s->cap);
		return -EPROTO;
	}
	uint32_t cc = rd32(s, NKV_REG_CC);
	csts = rd32(s, NKV_REG_CSTS);
	if ((cc & NKV_CC_EN) || (csts & NKV_CSTS_RDY)) {
		wr_cc(s, cc & ~NKV_CC_EN);
		rc = wait_csts(s, NKV_CSTS_RDY, 0, false, &csts);
		if (rc) {
			NKV_WARN("shm: CSTS.RDY stayed 1 after CC.EN = 0 (CSTS %#x)", csts);
			return rc;
		}
	}
	wr32(s, NKV_REG_AQA, (uint32_t)(a->entries - 1) | (uint32_t)(a->entries - 1) << 16);
	wr64(s, NKV_REG_ASQ, a->sq_iova);
	wr64(s, NKV_REG_ACQ, a->cq_iova);
	uint32_t css = NKV_CC_CSS_NVM;
	if (s->cap & NKV_CAP_CSS_IOCS)
		css = NKV_CC_CSS_IOCS;
	else if ((s->cap & NKV_CAP_CSS_ADMIN_ONLY) && !(s->cap & NKV_CAP_CSS_NVM))
		css = NKV_CC_CSS_ADMIN;
	wr_cc(s, NKV_CC_EN | css << 4 | 6u << 16 | 4u << 20); /* MPS 0, AMS 0, IOSQES 6, IOCQES 4 */
	rc = wait_csts(s, NKV_CSTS_RDY, NKV_CSTS_RDY, true, &csts);
	if (rc) {
		NKV_WARN("shm: enable failed: %s (CSTS %#x, CC %#x)",
			 rc == -EIO ? "controller fatal status" : "CSTS.RDY not set within CAP.TO", csts,
			 rd32(s, NKV_REG_CC));
		return rc;
	}
	ctrl->vs = rd32(s, NKV_REG_VS);
	return 0;
}

const char *nkv_shm_traddr_path(const char *traddr, bool *vfio_user)
{
	*vfio_user = false;
	if (traddr && strncmp(traddr, "shm:", 4) == 0)
		return traddr + 4;
	if (traddr && strncmp(traddr, "vfio-user:", 10) == 0) {
		*vfio_user = true;
		return traddr + 10;
	}
	return NULL;
}

const char *nkv_shm_scheme(const struct nkv_ctrl *ctrl)
{
	return ctrl->shm ? ctrl->shm->at->name : NULL;
}

/* Close the association's socket, eventfds and mappings (the buffers stay). */
static void assoc_close(struct nkv_shm_ctrl *s)
{
	pthread_mutex_lock(&s->sock_mu);
	if (s->sock >= 0)
		close(s->sock);
	s->sock = -1;
	pthread_mutex_unlock(&s->sock_mu);
	if (s->kick_fd >= 0)
		close(s->kick_fd);
	s->kick_fd = -1;
	s->wakeup = s->arm = NULL;
	s->notify = false;
	if (s->at->detach)
		s->at->detach(s->ctrl);
	s->regs = s->db_map = NULL;
	s->reg_size = s->db_off = s->db_len = 0;
}

static void shm_state_free(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (!s)
		return;
	while (s->bufs) {
		struct nkv_shm_buf *b = s->bufs;
		s->bufs = b->next;
		if (!b->user) /* the caller's registered memory stays theirs, mapped */
			munmap(b->va, b->len);
		if (b->fd >= 0)
			close(b->fd);
		free(b);
	}
	assoc_close(s);
	free(s->at_priv);
	pthread_mutex_destroy(&s->sock_mu);
	pthread_mutex_destroy(&s->iova_mu);
	pthread_rwlock_destroy(&s->buf_lock);
	free(s);
	ctrl->shm = NULL;
}

static void admin_free(struct nkv_ctrl *ctrl)
{
	if (!ctrl->admin)
		return;
	nkv_shm_ops.fail(ctrl->admin, -ECONNABORTED);
	/* No DEREG: the controller keeps the admin queue until the socket closes, which frees it all. */
	ctrl->admin->shm->ro_reg = ctrl->admin->shm->rw_reg = false;
	nkv_shm_qp_free(ctrl->admin);
	ctrl->admin = NULL;
}

/* Register every buffer of nkv_buf_alloc() and nkv_buf_register() again, at its IOVA, with a new
 * controller: the memory and its memfd are the host's and outlive the target. */
static int buffers_reregister(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	int rc = 0;
	pthread_rwlock_rdlock(&s->buf_lock);
	for (struct nkv_shm_buf *b = s->bufs; b && rc == 0; b = b->next)
		if (b->fd >= 0 && b->len)
			rc = nkv_shm_reg(ctrl, b->fd, 0, b->len, b->iova, 0);
	pthread_rwlock_unlock(&s->buf_lock);
	return rc;
}

/**
 * A new association on a new socket to ctrl->traddr: attach (HELLO, a new controller; or the
 * vfio-user handshake), notifications, the buffers again when @rereg, the admin queue (published in
 * ctrl->admin under admin_mu), CC.EN, Identify into @id, MDTS. @return 0 or -errno (what was set up
 * stays for the caller to free).
 */
static int shm_associate(struct nkv_ctrl *ctrl, struct nkv_id_ctrlr *id, bool rereg)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	s->max_xfer = NKV_SHM_ADMIN_BOUNCE;
	int rc = s->at->attach(ctrl, ctrl->traddr, nkv_shm_notify_wanted());
	if (rc == 0)
		s->xfer_dw1 = (rd32(s, NKV_SHM_REG_FEAT) & NKV_SHM_FEAT_XFER) != 0;
	if (rc == 0 && rereg)
		rc = buffers_reregister(ctrl);
	struct nkv_qpair *admin = NULL;
	if (rc == 0)
		rc = nkv_shm_qp_alloc(ctrl, 0, NKV_SHM_ADMIN_ENTRIES, NKV_ADMIN_SLOTS, NKV_SHM_ADMIN_BOUNCE,
				      NKV_SHM_ADMIN_BOUNCE, &admin);
	if (rc == 0) {
		admin->shm->created = true;
		(void)nkv_shm_irq_bind(ctrl, admin->shm, 0); /* the admin CQ's vector; else it is polled */
		pthread_mutex_lock(&ctrl->admin_mu);
		ctrl->admin = admin;
		pthread_mutex_unlock(&ctrl->admin_mu);
		rc = enable(ctrl);
	}
	if (rc == 0)
		rc = nkv_ctrl_identify_cmd(ctrl, NKV_CNS_CTRLR, 0, 0, id);
	if (rc == 0 && s->at == &nkv_shm_attach_vfio_user)
		ctrl->cntlid = nkv_get16(&id->cntlid); /* no HELLO: Identify names the controller */
	if (rc == 0 && nkv_get16(&id->cntlid) != ctrl->cntlid) {
		NKV_WARN("shm: Identify CNTLID %u differs from the HELLO CNTLID %u", nkv_get16(&id->cntlid),
			 ctrl->cntlid);
		rc = -EPROTO;
	}
	if (rc == 0) {
		uint64_t mdts = id->mdts ? (uint64_t)NKV_IDENTIFY_SIZE << id->mdts : NKV_SHM_MAX_XFER_UNLIMITED;
		s->max_xfer = (uint32_t)(mdts > NKV_SHM_MAX_XFER_UNLIMITED ? NKV_SHM_MAX_XFER_UNLIMITED : mdts);
	}
	return rc;
}

/** Number of Queues: as many I/O queue pairs as HELLO (or the mapped doorbells) allow, up to what
 *  the host wants. */
static int shm_num_queues(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	unsigned want = s->max_queues < NKV_WANT_IO_QUEUES ? s->max_queues : NKV_WANT_IO_QUEUES;
	ctrl->nio = 0;
	return want ? nkv_ctrl_set_num_queues(ctrl, want) : 0;
}

int nkv_connect_shm_nqn(const char *path, bool vfio_user, const char *subnqn, const struct nkv_conn_opts *opts,
			struct nkv_ctrl **out)
{
	int rc;
	if (!path || !*path || !out || (opts && opts->tls)) /* TLS is NVMe/TCP's */
		return -EINVAL;
	struct nkv_ctrl *ctrl = nkv_ctrl_alloc(path, "", subnqn ? subnqn : "", opts, true, &rc);
	if (!ctrl)
		return rc == -EINVAL && strlen(path) > 256 ? -ENAMETOOLONG : rc;
	ctrl->ops = &nkv_shm_ops;
	ctrl->kato_ms = 0; /* PCIe: no Keep Alive */
	struct nkv_shm_ctrl *s = ctrl->shm = calloc(1, sizeof(*s));
	if (!s) {
		nkv_ctrl_free_mem(ctrl);
		return -ENOMEM;
	}
	s->ctrl = ctrl;
	s->at = vfio_user ? &nkv_shm_attach_vfio_user : &nkv_shm_attach_sock;
	s->sock = -1;
	s->kick_fd = -1;
	s->iova_next = NKV_SHM_IOVA_BASE;
	pthread_mutex_init(&s->sock_mu, NULL);
	pthread_mutex_init(&s->iova_mu, NULL);
	pthread_rwlock_init(&s->buf_lock, NULL);

	rc = shm_associate(ctrl, &ctrl->id, false);
	if (rc == 0) {
		char nqn[257];
		snprintf(nqn, sizeof(nqn), "%.*s", (int)strnlen(ctrl->id.subnqn, 256), ctrl->id.subnqn);
		if (subnqn && *subnqn && strcmp(nqn, subnqn) != 0) {
			NKV_DEBUG("%s: %s serves %s, not %s", s->at->name, path, nqn, subnqn);
			rc = -ENOENT;
		}
		memcpy(ctrl->subnqn, nqn, sizeof(nqn));
	}
	if (rc == 0)
		rc = shm_num_queues(ctrl);
	if (rc) {
		NKV_DEBUG("%s connect %s failed: %s", s->at->name, path, strerror(-rc));
		admin_free(ctrl);
		shm_state_free(ctrl);
		nkv_ctrl_free_mem(ctrl);
		return rc;
	}
	NKV_INFO("connected to %s at %s:%s, cntlid %u, %u I/O queues, MQES %u", ctrl->subnqn, s->at->name, path,
		 ctrl->cntlid, ctrl->nio, NKV_CAP_MQES(s->cap));
	*out = ctrl;
	return 0;
}

void nkv_shm_ctrl_drop(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	pthread_mutex_lock(&ctrl->admin_mu);
	struct nkv_qpair *old = ctrl->admin;
	ctrl->admin = NULL;
	pthread_mutex_unlock(&ctrl->admin_mu);
	if (old) { /* its memory was the old controller's to use: that one is gone with its socket */
		nkv_shm_ops.fail(old, -ECONNABORTED);
		old->shm->ro_reg = old->shm->rw_reg = false;
		nkv_shm_qp_free(old);
	}
	/* The old association: no queue pair is left to ring its doorbells or read its registers. */
	assoc_close(s);
}

int nkv_shm_ctrl_reconnect(struct nkv_ctrl *ctrl, struct nkv_id_ctrlr *id)
{
	nkv_shm_ctrl_drop(ctrl);
	int rc = shm_associate(ctrl, id, true);
	if (rc == 0)
		rc = shm_num_queues(ctrl);
	return rc;
}

int nkv_shm_ctrl_fd(const struct nkv_ctrl *ctrl)
{
	return ctrl->shm ? ctrl->shm->sock : -1;
}

int nkv_connect_shm(const char *path, const struct nkv_conn_opts *opts, struct nkv_ctrl **out)
{
	return nkv_connect_shm_nqn(path, false, NULL, opts, out);
}

void nkv_shm_ctrl_close(struct nkv_ctrl *ctrl)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	if (s && s->sock >= 0 && ctrl->admin && !ctrl->admin->err) {
		/* Normal shutdown (CC.SHN = 01b), then wait for SHST = 10b within CAP.TO. */
		uint32_t cc = rd32(s, NKV_REG_CC), csts;
		wr_cc(s, (cc & ~(3u << 14)) | 1u << 14);
		if (wait_csts(s, NKV_CSTS_SHST_MASK, NKV_CSTS_SHST_DONE, false, &csts))
			NKV_DEBUG("shm: shutdown not complete within CAP.TO (CSTS %#x)", csts);
	}
	admin_free(ctrl);
	shm_state_free(ctrl);
}

/* ---- registered buffers ------------------------------------------------------------------------ */

void *nkv_shm_buf_alloc(struct nkv_ctrl *ctrl, size_t len)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct nkv_shm_buf *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->len = ((len ? len : 1) + 0xfff) & ~(size_t)0xfff;
	b->fd = nkv_shm_memfd("nkv-buf", b->len);
	if (b->fd < 0)
		goto fail;
	void *m = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	b->va = m;
	b->iova = nkv_shm_iova_alloc(s, b->len);
	if (nkv_shm_reg(ctrl, b->fd, 0, b->len, b->iova, 0))
		goto fail;
	pthread_rwlock_wrlock(&s->buf_lock);
	b->next = s->bufs;
	s->bufs = b;
	pthread_rwlock_unlock(&s->buf_lock);
	return b->va;
fail:
	if (b->va)
		munmap(b->va, b->len);
	if (b->fd >= 0)
		close(b->fd);
	free(b);
	return NULL;
}

void nkv_shm_buf_free(struct nkv_ctrl *ctrl, void *p)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	struct nkv_shm_buf *b = NULL;
	pthread_rwlock_wrlock(&s->buf_lock);
	for (struct nkv_shm_buf **pp = &s->bufs; *pp; pp = &(*pp)->next)
		if ((*pp)->va == p && !(*pp)->user) {
			b = *pp;
			*pp = b->next;
			break;
		}
	pthread_rwlock_unlock(&s->buf_lock);
	if (!b) {
		NKV_WARN("nkv_buf_free(%p): not a buffer of this controller", p);
		return;
	}
	nkv_shm_dereg(ctrl, b->iova, b->len);
	munmap(b->va, b->len);
	close(b->fd);
	free(b);
}

uint64_t nkv_shm_buf_iova(struct nkv_ctrl *ctrl, const void *p, uint32_t len)
{
	struct nkv_shm_ctrl *s = ctrl->shm;
	uint64_t iova = 0;
	const uint8_t *q = p;
	pthread_rwlock_rdlock(&s->buf_lock);
	for (struct nkv_shm_buf *b = s->bufs; b; b = b->next)
		if (q >= b->va && q < b->va + b->len && len <= (size_t)(b->va + b->len - q)) {
			iova = b->iova + (uint64_t)(q - b->va);
			break;
		}
	pthread_rwlock_unlock(&s->buf_lock);
	return iova;
}
