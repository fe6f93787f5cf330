/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_int.h - internals shared by the shared-memory transport's files: shm.c (registers, queues,
 * pollers, control socket, API) and shm_data.c (IOVA translation, PRP walks, bounce memory and the
 * sliced copies). Not an API: every function here runs on the thread its comment names.
 */
#ifndef NKV_SHM_INT_H
#define NKV_SHM_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/core.h"
#include "nkv/nkv_target.h"
#include "reactor/msgq.h"

#define PAGE 4096u
#define ST(sct, sc) nkv_status_make(NKV_SCT_##sct, NKV_SC_##sc, 1)

/* map_data's answer when a bounce budget is spent: leave the SQE in the SQ and retry later. */
#define WAIT_BUDGET 0xffffu

struct shm_ctrl;
struct shm_sq;

struct shm_region {
	uint64_t iova, len;
	uint8_t *va;             /* host regions: our mapping */
	void *map;               /* host regions: the reservation around it, guards included (munmap) */
	size_t map_len;
	bool ro;
	bool gpu;                /* GPU memory (REG_CUDA): reached only through nkv_cuda_copy */
	int device;              /* gpu: CUDA device */
	void *gpu_base;          /* gpu: what cudaIpcOpenMemHandle returned (closed on release) */
	uint8_t *gpu_va;         /* gpu: device address of the region's first byte */
	int refs;                /* queues and commands using it (ctrl->mu) */
};

/* Walks a command's PRPs (docs/nvme-kv-wire.md B.5) page by page, reading list entries as it goes. */
struct prp_iter {
	struct shm_ctrl *c;
	uint64_t prp1, prp2, at; /* at: IOVA of the next list entry */
	uint32_t len, pages, page;
	bool locked;             /* the walker holds c->mu (list entries are read without taking it) */
};

struct shm_req {
	struct nkv_req req;      /* first: the core's view */
	struct shm_sq *sq;
	uint16_t slot;           /* its SQ entry, busy until the CQE is posted */
	bool direct;             /* req.data points into host memory */
	bool to_host;            /* copy direction: bounce -> host pages (a Retrieve's data) */
	uint8_t *bounce;         /* data staged here when the host buffer is not contiguous */
	uint32_t charged;        /* bounce bytes counted against the budgets (transport and controller) */
	struct shm_region *pinned; /* the region a direct buffer lives in, pinned until completion */
	/* A bounce copy in progress: the poller moves a slice per scan (nkv_shm_copy_poll). */
	struct prp_iter cit;     /* the page cursor */
	uint64_t run, la_iova;   /* the contiguous run being copied; one page of lookahead */
	uint32_t run_len, la_n, copied, copy_len;
	bool la;
	struct shm_req *next;    /* on the free list, the copy queue or a CQ's post queue */
};

struct shm_cq {
	uint16_t qid, size, tail, sqs;
	uint8_t phase;
	bool live;
	uint64_t base;           /* IOVA of the ring (overlap checks) */
	struct nkv_cqe *ring;
	struct shm_region *reg;
	struct shm_req *post_head, **post_tail; /* completions waiting for CQ room */
	bool ien;                /* Create I/O CQ IEN (the admin CQ: always), vector iv */
	bool fire;               /* CQEs posted since the last interrupt check (irq_flush) */
	uint16_t iv;
};

struct shm_sq {
	struct nkv_qpair qp;     /* first: qp.qid, qp.size; the core's queue */
	struct shm_ctrl *c;
	uint16_t head, cqid;
	bool live;
	uint64_t base;           /* IOVA of the ring (overlap checks) */
	struct nkv_sqe *ring;
	struct shm_region *reg;
	uint64_t *busy;          /* a bit per entry: its command has not completed */
	uint32_t wait_len;       /* the head SQE waits for this much bounce memory (0: none) */
	unsigned outstanding;
	struct shm_sq *next_zombie; /* deleted while commands still run */
};

struct shm_ctrl {
	struct nkv_msg msg;      /* hand-off to the poller */
	struct nkv_shm *s;
	struct shm_poller *p;
	struct shm_ctrl *next;   /* in the poller's list */
	struct nkv_ctrlr *ctrlr;
	int sock;
	uint8_t *regs;           /* the shared register page */
	uint32_t reg_size;
	uint32_t last_cc;
	bool enabled, failed;
	atomic_bool gone;        /* the host closed its socket */
	pthread_mutex_t mu;      /* regions: the socket thread adds/removes, pollers translate */
	struct shm_region **regions; /* each allocated on its own: pins point at them */
	unsigned nregions;
	uint64_t reg_bytes;
	struct shm_sq **sqs;     /* by QID, max_io_queues + 1 */
	struct shm_cq *cqs;
	struct shm_sq *zombies;
	unsigned outstanding;    /* commands in the core or backend, all queues */
	/* Poller only: */
	bool reaping;            /* the host is gone and that was logged; freed once nothing is outstanding */
	struct shm_req *free_reqs; /* request table, grown on demand up to conf.max_cmds */
	unsigned nreqs;
	uint64_t bounced;        /* bounce bytes charged to this controller (conf.bounce_ctrl_budget) */
	struct shm_req *copy_head, **copy_tail; /* bounce copies, FIFO, a slice per scan */
	uint32_t walked;         /* PRP entries walked this scan (WALK_BUDGET) */
	/* Notifications (nkv_shm.h), poller only but for binds, which the socket thread counts: */
	int kick_fd;             /* the host's doorbell kick eventfd; -1: none (poll this controller) */
	int *irq_fds;            /* by interrupt vector (max_io_queues + 1), -1: none */
	bool irq_pending;        /* some CQ has fire set */
	atomic_int binds;        /* SET_KICK / SET_IRQ messages not yet applied: not freed before they are */
	uint32_t *wakeup;        /* NEED_WAKEUP and ARM[] in the register page */
	uint32_t *arm;
	/* vfio-user controllers (vfio_user.c): */
	bool vfu;                /* reached over vfio-user: a PCI function with MSI-X */
	bool batch_irq;          /* interrupt after every batch of CQEs (no ARM words; latched at CC.EN) */
	uint8_t *irq_masked;     /* by vector: masked (SET_IRQS MASK, the MSI-X table or function mask) */
	_Atomic uint8_t *irq_pend; /* by vector: an interrupt held back by the mask (the MSI-X PBA) */
	uint32_t irq_pass;       /* batch_irq: irq_flush calls, so that a vector shared by CQs fires */
	uint32_t *irq_pass_at;   /* once per call (by vector: the call that last fired it) */
	atomic_uint resets;      /* DEVICE_RESETs applied by the poller */
};

struct shm_poller {
	struct nkv_shm *s;
	pthread_t thread;
	struct nkv_msgq msgq;
	struct shm_ctrl *ctrls;
	unsigned id;
	atomic_uint_fast64_t inflight; /* I/O commands of its controllers (the queue depth metric) */
	/* The fds it sleeps on: [0] its message queue, then the kick eventfds of its controllers. */
	struct pollfd *pfds;
	struct shm_ctrl **pfd_ctrl;  /* the controller of pfds[i] (i >= 1) */
	unsigned npfds, pfd_cap;
	bool pfds_dirty;             /* a kick was bound or unbound, a controller freed: rebuild */
	atomic_uint_fast64_t kicks, irqs, sleeps; /* kicks taken, interrupts sent, sleeps (metrics) */
	atomic_uint_fast64_t late;   /* sleeps until kicked that timed out and then found work: a kick
				      * lost (tests assert 0) */
	bool deep_timeout;           /* the last sleep was one until kicked, and it timed out */
};

enum ep_kind { EP_STOP, EP_LISTENER, EP_CONN }; /* what an epoll event of the socket thread is for */

struct shm_conn;

/*
 * A front door to the controllers: the protocol a listener's hosts speak on their socket. Both
 * reach the same controller model (registers in a memfd, host memory as IOVA regions, pollers):
 * shm.c's own protocol (nkv_shm.h) and vfio-user (vfio_user.c). Socket thread only.
 */
struct shm_front {
	const char *name;        /* in logs: "shm", "vfio-user" */
	int sock_type;           /* SOCK_SEQPACKET, SOCK_STREAM */
	/* A connection was accepted on a listener of this front (conn_new done): check the peer, set
	 * up k->fs. @return 0, or -errno to close it. NULL: nothing to do. */
	int (*opened)(struct nkv_shm *s, struct shm_conn *k);
	/* The socket is readable: serve what came. @return false when the connection must close. */
	bool (*message)(struct nkv_shm *s, struct shm_conn *k);
	/* The connection closes: free k->fs (its controller, if any, is reaped by its poller after). */
	void (*closed)(struct nkv_shm *s, struct shm_conn *k);
};

extern const struct shm_front nkv_shm_front_shm;
extern const struct shm_front nkv_vfu_front;

struct shm_listener {
	enum ep_kind kind;       /* first: EP_LISTENER */
	struct shm_listener *next;
	const struct shm_front *front;
	struct nkv_subsys *ss;
	int fd;
	char path[108];
	char hostnqn[NKV_NQN_MAX]; /* vfio-user: the host NQN its clients act as ("": by peer uid) */
	dev_t dev;               /* the socket file this listener created: unlinked at destroy only if */
	ino_t ino;               /* the path still names it (another daemon may have taken it over) */
};

/* A connected host socket: its state for the socket thread. */
struct shm_conn {
	enum ep_kind kind;  /* first: EP_CONN */
	struct shm_conn *next;
	int fd;
	struct shm_listener *l;
	struct shm_ctrl *c; /* after HELLO (vfio-user: VERSION) */
	uint64_t since;     /* accepted at (ms): HELLO is due by since + conf.hello_timeout_ms */
	char hostnqn[NKV_NQN_MAX]; /* after HELLO */
	void *fs;           /* the front's state */
};

struct nkv_shm {
	struct nkv_target *tgt;
	struct nkv_shm_conf conf;
	struct shm_poller *pollers;
	unsigned next_poller;
	pthread_t sock_thread;
	int epfd, stop_efd;
	pthread_mutex_t mu;      /* listeners */
	struct shm_listener *listeners;
	struct shm_conn *conns;  /* socket thread only */
	unsigned pending;        /* socket thread only: connections that have not said HELLO */
	enum ep_kind stop_kind;  /* epoll tag of stop_efd */
	atomic_bool stop, draining; /* stop: the socket thread ends (closing every host connection) */
	atomic_bool pollers_stop;  /* set once the socket thread is joined: pollers reap and end */
	bool single;             /* the testing hooks' one thread: nothing may wait for a poller */
	atomic_int nctrls;
	atomic_uint_fast64_t bounced; /* bounce bytes in use, all controllers (conf.bounce_budget) */
	struct nkv_transport_reg reg; /* its gauges, for the target's metrics */
};

/* ---- shm_data.c: IOVA translation (any thread; takes c->mu) ---- */

/** Drop a pin taken by nkv_shm_map_range (NULL-safe; clears *@pin). */
void nkv_shm_unpin(struct shm_ctrl *c, struct shm_region **pin);

/** Translate and pin [@iova, +@len) in host memory, writable if @write. @return the address or NULL. */
uint8_t *nkv_shm_map_range(struct shm_ctrl *c, uint64_t iova, uint64_t len, bool write, struct shm_region **pin);

/* ---- shm_data.c: data buffers (poller thread) ---- */

/**
 * Give @r a data buffer of @len bytes: host memory in place when contiguous in one region, else
 * charged bounce memory. @return 0, a status, or WAIT_BUDGET (nothing held; sq->wait_len set).
 */
nkv_status nkv_shm_map_data(struct shm_ctrl *c, struct shm_req *r, uint32_t len, bool h2c);

/** Uncharge and free @r's bounce memory (no-op without one). */
void nkv_shm_bounce_release(struct shm_req *r);

/** Could a command needing @len bounce bytes be charged now? */
bool nkv_shm_bounce_room(struct shm_ctrl *c, uint32_t len);

/** Queue a copy of @len bytes between @r's bounce buffer and its PRPs. @return 0 or a status. */
nkv_status nkv_shm_copy_start(struct shm_ctrl *c, struct shm_req *r, uint32_t len, bool to_host);

/** Move up to one slice of queued copies; each finished one goes to nkv_shm_copied. @return work done. */
unsigned nkv_shm_copy_poll(struct shm_ctrl *c);

/** Drop @sq's requests from the copy queue, returning them with @release. */
void nkv_shm_copy_drop(struct shm_ctrl *c, struct shm_sq *sq, void (*release)(struct shm_req *));

/* ---- shm.c ---- */

/** A queued copy finished (@ok: every page was valid): run the Store or post the Retrieve's CQE. */
void nkv_shm_copied(struct shm_ctrl *c, struct shm_req *r, bool ok);

/* ---- shm.c: the controller core, for the fronts (socket thread) ---- */

/**
 * A controller for host @hostnqn / @hostid on @l's subsystem: allowlist, controller limits, the
 * register page. Not running until nkv_shm_ctrl_start. @return the register memfd (the caller's to
 * close), or -EACCES (host not allowed), -EUSERS (controller limit), -ENOMEM, -errno.
 */
int nkv_shm_ctrl_open(struct nkv_shm *s, struct shm_listener *l, int sock, const char *hostnqn,
		      const uint8_t hostid[16], bool vfu, struct shm_ctrl **out);

/** Hand an opened controller to a poller: it runs from now on, and only its poller frees it. */
void nkv_shm_ctrl_start(struct shm_ctrl *c);

/** Free a controller opened but never started. */
void nkv_shm_ctrl_discard(struct shm_ctrl *c);

/**
 * Map @len bytes of @fd from @off at @iova (a memfd sealed against shrinking; if @may_shrink, also
 * an unsealed regular file on tmpfs or hugetlbfs: for a host that could stop the daemon anyway),
 * read-only if @ro. @return 0, -EINVAL (alignment, length, beyond the fd), -EPERM (not sealed, or
 * not memory), -ENOSPC (the conf's region count or byte limit; @extra regions the caller holds
 * elsewhere count too), -EEXIST (overlap), -errno.
 */
int nkv_shm_region_map(struct shm_ctrl *c, uint64_t iova, uint64_t len, uint64_t off, bool ro, int fd,
		       unsigned extra, bool may_shrink);

/** Does [@iova, +@len) overlap a mapped region? */
bool nkv_shm_region_overlaps(struct shm_ctrl *c, uint64_t iova, uint64_t len);

/**
 * Unmap the region at @iova of @len bytes (@len 0: whatever its length). Never while a queue or a
 * command in flight uses it. @return 0, -ENOENT, -EBUSY.
 */
int nkv_shm_region_unmap(struct shm_ctrl *c, uint64_t iova, uint64_t len);

/** Unmap every region no queue or command uses. @return 0, or -EBUSY when some stayed. */
int nkv_shm_region_unmap_all(struct shm_ctrl *c);

enum shm_post_op {
	SHM_POST_KICK,    /* bind @fd as the doorbell kick (-1: unbind) */
	SHM_POST_IRQ,     /* bind @fd to @vector (-1: unbind) */
	SHM_POST_MASK,    /* mask @vector: its interrupts are held pending */
	SHM_POST_UNMASK,  /* unmask it, sending one held pending */
	SHM_POST_TRIGGER, /* interrupt @vector now (as the device would) */
	SHM_POST_RESET,   /* reset the controller as CC.EN 1 -> 0 does */
};

/**
 * Hand @op to @c's poller, which owns the eventfds and the interrupt state. @fd (SHM_POST_KICK,
 * SHM_POST_IRQ) is an eventfd already checked and made O_NONBLOCK, or -1; it belongs to the poller
 * after a 0 return. @return 0 or -ENOMEM.
 */
int nkv_shm_ctrl_post(struct shm_ctrl *c, enum shm_post_op op, uint16_t vector, int fd);

/** Is @fd an eventfd? On success it is made O_NONBLOCK. */
bool nkv_shm_eventfd_ok(int fd);

/* ---- testing hooks (fuzz_shm): the transport driven by one thread, without its own ----------------
 * Not an API (nothing installed declares them): a test harness plays the socket thread and the
 * poller itself, so a run is deterministic and a controller is set up and torn down in microseconds. */

/** A transport with one poller and no threads (conf.pollers is ignored). @return 0 or -errno. */
int nkv_shm_test_create(struct nkv_target *tgt, const struct nkv_shm_conf *conf, struct nkv_shm **out);

/** Take @fd (a SOCK_SEQPACKET socket, e.g. one end of a socketpair) as a host connected to subsystem
 * @subnqn, as if accepted on a listener of it; the transport closes it. @return 0, -ENOENT, -ENOMEM. */
int nkv_shm_test_adopt(struct nkv_shm *s, const char *subnqn, int fd);

/** As nkv_shm_test_adopt, for a vfio-user client (@fd: a SOCK_STREAM socket); the listener's host NQN
 * is empty, so the client acts as the peer uid's NQN (vfio_user.c). @return 0, -ENOENT, -ENOMEM,
 * -EACCES (the peer check refused it; @fd is closed). */
int nkv_vfu_test_adopt(struct nkv_shm *s, const char *subnqn, int fd);

/** One round: if @conns, every message waiting on the connections (HELLO, REG, DEREG...; EOF closes;
 * a poll(2) each, which a harness that sent nothing can skip), then one poller pass over the
 * controllers. @return work done (0: nothing happened). */
unsigned nkv_shm_test_poll(struct nkv_shm *s, bool conns);

/** Close every connection, reap the controllers within @max_passes poller passes, free @s.
 * @return 0, or -EBUSY (a controller still had commands out; nothing is freed). */
int nkv_shm_test_destroy(struct nkv_shm *s, unsigned max_passes);

#endif /* NKV_SHM_INT_H */
