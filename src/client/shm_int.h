/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_int.h - libnkv's shared-memory (PCIe-style) transport, shared by shm_ctrl.c (registers,
 * bring-up, registered buffers, and the nkv_shm.h socket protocol), vfio_user.c (the vfio-user
 * protocol) and shm.c (queue pairs: rings, PRPs, bounce area, submit/poll). Not installed.
 *
 * One controller model, two ways to reach it: the attach protocol (struct nkv_shm_attach_ops) says
 * how the host connects, maps the doorbells (and the registers, where they are mapped), hands its
 * memory to the controller and binds interrupt eventfds; everything else is shared.
 *
 * Memory: every queue pair (the admin one too) owns one memfd split into two registered regions,
 *   read-only for the controller: [SQ ring][PRP list pages]
 *   read-write:                   [CQ ring][bounce pages]
 * at IOVAs from a per-controller bump allocator (never 0, so a stray zero PRP fails on the target).
 */
#ifndef NKV_CLIENT_SHM_INT_H
#define NKV_CLIENT_SHM_INT_H

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/spin_pay.h"
#include "nkv/nkv_dev.h"
#include "nkv/nkv_shm.h"

#define NKV_SHM_IOVA_BASE (1ull << 32)   /* first IOVA handed out */
#define NKV_SHM_IOVA_ALIGN (2ull << 20)  /* regions start 2 MiB aligned, with a gap between them */
#define NKV_SHM_ADMIN_ENTRIES 32u        /* admin SQ/CQ entries (AQA 0's based: 31) */
#define NKV_SHM_ADMIN_BOUNCE (1u << 20)  /* admin bounce area: Identify, logs */
#define NKV_SHM_BOUNCE_MIN (1u << 20)
#define NKV_SHM_BOUNCE_MAX (256u << 20)
#define NKV_SHM_MAX_XFER_UNLIMITED (256u << 20) /* MDTS 0: what the PRP list area is sized for */

/** A buffer from nkv_buf_alloc(): a registered memfd mapping. */
struct nkv_shm_buf {
	struct nkv_shm_buf *next;
	uint8_t *va;
	size_t len;
	uint64_t iova;
	int fd;
	void *user;                /* nkv_buf_register(): the caller's address (va..va+len: its whole pages) */
};

struct nkv_shm_ctrl;

/**
 * The attach protocol: how a host reaches the PCIe-style controller. nkv_shm.h's socket
 * (nkv_shm_attach_sock, shm_ctrl.c) or vfio-user (nkv_shm_attach_vfio_user, vfio_user.c). Every
 * call but attach runs with s->sock connected; socket failures shut the socket down (the controller
 * is then gone, and waits notice the hang-up).
 */
struct nkv_shm_attach_ops {
	const char *name; /* "shm", "vfio-user": the address scheme and log lines */
	/** Connect to @path and set up an association: s->sock, the doorbell mapping (s->db_map,
	 *  s->db_off, s->db_len), the register page when mapped (s->regs, s->reg_size), s->max_queues,
	 *  ctrl->cntlid (0: take Identify's), and s->notify, s->kick_fd, s->wakeup, s->arm where offered
	 *  and wanted (@notify). @return 0 or -errno; what was set up is the caller's to detach. */
	int (*attach)(struct nkv_ctrl *ctrl, const char *path, bool notify);
	/** Let the controller reach @len bytes of @fd from @offset at @iova (@flags: NKV_SHM_REG_*). */
	int (*map)(struct nkv_ctrl *ctrl, int fd, uint64_t offset, uint64_t len, uint64_t iova, uint32_t flags);
	/** Take the mapping at @iova (@len bytes, as mapped) away again. */
	int (*unmap)(struct nkv_ctrl *ctrl, uint64_t iova, uint64_t len);
	/** Bind eventfd @fd to interrupt vector @vector. */
	int (*irq_bind)(struct nkv_ctrl *ctrl, uint16_t vector, int fd);
	/** Bind (@fd >= 0) or unbind (-1) the doorbell kick; NULL: the protocol has none. */
	int (*kick_bind)(struct nkv_ctrl *ctrl, int fd);
	/** Read or write @len (4 or 8) bytes of the registers at @off; NULL: they are mapped (s->regs). */
	int (*reg_rw)(struct nkv_ctrl *ctrl, uint32_t off, void *buf, uint32_t len, bool write);
	/** Close what attach set up (the socket is closed by the caller); NULL: nothing more. */
	void (*detach)(struct nkv_ctrl *ctrl);
};

extern const struct nkv_shm_attach_ops nkv_shm_attach_sock;
extern const struct nkv_shm_attach_ops nkv_shm_attach_vfio_user;
/** Testing: a vfio-user host that does not opt in to the ARM words (every CQ post interrupts). */
extern bool nkv_vfu_arm_off;
/** Testing: a vfio-user host that reaches the registers by REGION_READ/WRITE even where their page
 *  is mappable (as with a server that traps them), the doorbells still mapped. */
extern bool nkv_vfu_trap_regs;

/** Controller-wide shm state. */
struct nkv_shm_ctrl {
	struct nkv_ctrl *ctrl;      /* the controller this is the state of */
	const struct nkv_shm_attach_ops *at;
	void *at_priv;             /* the attach protocol's own state */
	int sock;                  /* the socket to the target; closing it ends the controller */
	pthread_mutex_t sock_mu;   /* one request and its reply at a time */
	uint8_t *regs;             /* register page (BAR0 layout) when mapped shared; NULL: at->reg_rw */
	uint32_t reg_size;
	uint8_t *db_map;           /* BAR0 bytes [db_off, db_off + db_len), mapped: the doorbells */
	uint32_t db_off, db_len;
	uint16_t max_queues;       /* I/O queue pairs the controller may create (their doorbells are mapped) */
	uint64_t cap;
	uint32_t max_xfer;         /* MDTS in bytes (before Identify: the admin bounce); sizes the PRP list
				    * and bounce areas; the controller itself enforces MDTS and KVVML */
	pthread_mutex_t iova_mu;
	uint64_t iova_next;
	pthread_rwlock_t buf_lock; /* the registered buffer list: read on every submit */
	bool xfer_dw1;             /* NKV_SHM_FEAT_XFER: a Retrieve's CQE DW1 says the bytes moved */
	struct nkv_shm_buf *bufs;
	/* Notifications (nkv_shm.h), when the target offers them and the host has not turned them off: */
	bool notify;               /* SET_IRQ works: I/O CQs interrupt (set before any I/O queue pair) */
	int kick_fd;               /* doorbell kick eventfd (bound; -1: none). Open until close, even once
				    * unbound: another thread may be about to write it */
	uint32_t *wakeup;          /* NEED_WAKEUP in the register page (NULL: no kick bound) */
	uint32_t *arm;             /* ARM[0] in the register page (NULL: no suppression, every post interrupts) */
};

/** A contiguous-run page allocator over a bitmap (bounce area, PRP list area). */
struct nkv_page_pool {
	uint64_t *bits;
	uint32_t npages;
	uint32_t nfree;
};

/** One command slot; its index is the CID. */
struct nkv_shm_slot {
	nkv_cb cb;
	void *arg;
	void *ubuf;          /* the caller's buffer */
	uint32_t len;
	uint32_t cdw10;      /* KV: value size / host buffer size */
	uint64_t offset;     /* Retrieve Range: CDW13:CDW12, the first byte of the value asked for */
	uint32_t bounce_pg;  /* first bounce page; bounce_n 0: zero copy or no data */
	uint32_t bounce_n;
	uint32_t list_pg;    /* first PRP list page; list_n 0: none */
	uint32_t list_n;
	uint8_t opc;
	uint8_t dir;         /* 0 none, 1 host to controller, 2 controller to host */
	uint8_t busy;
	int32_t next;        /* free list */
};

/** Per queue pair shm state. */
struct nkv_shm_qp {
	int fd;                    /* the memfd behind both regions */
	uint8_t *mem;
	size_t mem_len;
	size_t ro_len;             /* [0, ro_len): SQ + lists; [ro_len, mem_len): CQ + bounce */
	uint64_t iova;             /* IOVA of mem[0]; the RW region follows at iova + ro_len */
	bool ro_reg, rw_reg;       /* regions registered with the controller */
	bool created;              /* I/O queues created on the controller (Delete them on destroy) */
	struct nkv_dev_sq sq;
	struct nkv_dev_cq cq;
	uint64_t sq_iova, cq_iova;
	uint16_t entries;          /* ring entries (slots + 1) */
	uint16_t rung_tail;        /* SQ tail last written to the doorbell */
	uint64_t *lists;
	uint64_t lists_iova;
	struct nkv_page_pool list_pool;
	uint8_t *bounce;
	uint64_t bounce_iova;
	struct nkv_page_pool bounce_pool;
	struct nkv_shm_slot *slots;
	int32_t free_head;
	uint32_t max_xfer;
	int64_t next_check_ms;     /* next liveness check (socket hang-up, CSTS.CFS) while waiting */
	int irq_fd;                /* interrupt eventfd bound to vector qid (-1: no interrupts: poll) */
	uint32_t *arm;             /* ARM[qid]; NULL: the controller interrupts on every CQ post (MSI-X) */
	uint64_t irq_sleeps;       /* sleeps on the interrupt */
	uint64_t irq_late;         /* of which timed out with a CQE there: an interrupt lost (tests: 0) */
	struct nkv_spin_pay spin_pay; /* recent spins that found a CQE (common/spin_pay.h) */
	uint64_t waits;            /* waits for a completion with an interrupt bound */
	uint64_t spun;             /* of which spun before arming (the others armed at once) */
};

/* shm_ctrl.c */
/** A memfd of @len bytes sealed against shrinking (the controller requires F_SEAL_SHRINK). @return fd or -errno. */
int nkv_shm_memfd(const char *name, size_t len);
/** Reserve @len bytes of IOVA space (aligned, with a guard gap). */
uint64_t nkv_shm_iova_alloc(struct nkv_shm_ctrl *s, uint64_t len);
/** Map a region of @fd for the controller (REG, DMA_MAP). @return 0 or the target's -errno (or a socket -errno). */
int nkv_shm_reg(struct nkv_ctrl *ctrl, int fd, uint64_t offset, uint64_t len, uint64_t iova, uint32_t flags);
/** Unmap the region at @iova of @len bytes (DEREG, DMA_UNMAP). */
int nkv_shm_dereg(struct nkv_ctrl *ctrl, uint64_t iova, uint64_t len);
/** IOVA of [@p, @p + @len) when it lies inside one buffer from nkv_buf_alloc(); 0 otherwise. */
uint64_t nkv_shm_buf_iova(struct nkv_ctrl *ctrl, const void *p, uint32_t len);
/** Is the controller still there? @return 0, -ECONNRESET (socket hung up) or -EIO (CSTS.CFS). */
int nkv_shm_alive(struct nkv_ctrl *ctrl);
/** Doorbell register @off (from nkv_db_sq_tail / nkv_db_cq_head). */
volatile uint32_t *nkv_shm_doorbell(struct nkv_ctrl *ctrl, uint32_t off);
/** Bind a new eventfd to interrupt vector @vector, the one of @q's CQ: sets q->irq_fd and q->arm.
 *  @return 0, or -errno (@q is then polled). */
int nkv_shm_irq_bind(struct nkv_ctrl *ctrl, struct nkv_shm_qp *q, uint16_t vector);
/** Unbind the doorbell kick (before a GPU, which cannot kick, rings this controller's doorbells). */
int nkv_shm_kick_unbind(struct nkv_ctrl *ctrl);
/** A Unix socket of @type connected to @path, with @timeout_ms send and receive timeouts. @return fd or -errno. */
int nkv_shm_sock_open(const char *path, int type, int timeout_ms);
/** Does the host want notifications (NKV_SHM_NOTIFY unset, or not 0/off/no/false)? */
bool nkv_shm_notify_wanted(void);

/**
 * After a doorbell (or CC) write: wake the controller's poller if it said it may sleep. The full
 * fence orders the doorbell store before the NEED_WAKEUP load, against the poller's NEED_WAKEUP store
 * before its last look at the doorbells (Dekker).
 */
static inline void nkv_shm_kick(struct nkv_shm_ctrl *s)
{
	if (!s->wakeup)
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(s->wakeup, __ATOMIC_RELAXED)) {
		uint64_t one = 1;
		(void)!write(s->kick_fd, &one, sizeof(one));
	}
}

/** Transport ops: shutdown and teardown of the controller; nkv_buf_alloc / nkv_buf_free. */
void nkv_shm_ctrl_close(struct nkv_ctrl *ctrl);
void *nkv_shm_buf_alloc(struct nkv_ctrl *ctrl, size_t len);
void nkv_shm_buf_free(struct nkv_ctrl *ctrl, void *p);
/** Transport ops (shm_bufreg.c): nkv_buf_register / nkv_buf_unregister. */
int nkv_shm_buf_register(struct nkv_ctrl *ctrl, void *addr, size_t len);
int nkv_shm_buf_unregister(struct nkv_ctrl *ctrl, void *addr);

/* shm.c */
/** Allocate and register a queue pair's memory (@entries ring entries, @slots <= entries - 1). */
int nkv_shm_qp_alloc(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t entries, uint16_t slots, uint32_t bounce,
		     uint32_t max_xfer, struct nkv_qpair **out);
/** Deregister and free a queue pair's memory (the controller must no longer use it). */
void nkv_shm_qp_free(struct nkv_qpair *qp);

#endif
