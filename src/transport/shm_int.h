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

/* ---- testing hooks (fuzz_shm): the transport driven by one thread, without its own ----------------
 * Not an API (nothing installed declares them): a test harness plays the socket thread and the
 * poller itself, so a run is deterministic and a controller is set up and torn down in microseconds. */

/** A transport with one poller and no threads (conf.pollers is ignored). @return 0 or -errno. */
int nkv_shm_test_create(struct nkv_target *tgt, const struct nkv_shm_conf *conf, struct nkv_shm **out);

/** Take @fd (a SOCK_SEQPACKET socket, e.g. one end of a socketpair) as a host connected to subsystem
 * @subnqn, as if accepted on a listener of it; the transport closes it. @return 0, -ENOENT, -ENOMEM. */
int nkv_shm_test_adopt(struct nkv_shm *s, const char *subnqn, int fd);

/** One round: if @conns, every message waiting on the connections (HELLO, REG, DEREG...; EOF closes;
 * a poll(2) each, which a harness that sent nothing can skip), then one poller pass over the
 * controllers. @return work done (0: nothing happened). */
unsigned nkv_shm_test_poll(struct nkv_shm *s, bool conns);

/** Close every connection, reap the controllers within @max_passes poller passes, free @s.
 * @return 0, or -EBUSY (a controller still had commands out; nothing is freed). */
int nkv_shm_test_destroy(struct nkv_shm *s, unsigned max_passes);

#endif /* NKV_SHM_INT_H */
