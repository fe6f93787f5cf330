/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - libnkv internals shared by tcp.c (PDU engine), ctrl.c (controller bring-up, admin,
 * discovery, keep alive) and kv.c (KV commands, status helpers). Not installed.
 */
#ifndef NKV_CLIENT_INTERNAL_H
#define NKV_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/nvme_psk.h"
#include "nkv/nkv.h"

#define NKV_DEFAULT_TIMEOUT_MS 30000
#define NKV_DEFAULT_KATO_MS 10000u
#define NKV_DEFAULT_DEPTH 128u
#define NKV_MAX_DEPTH 1024u     /* slots are preallocated: keep one queue's memory bounded */
#define NKV_ADMIN_SQSIZE 31u    /* admin Connect SQSIZE (0's based): 32 entries, as Linux and SPDK */
#define NKV_ADMIN_SLOTS 4u      /* the admin queue is serialized by a mutex: few slots are needed */
#define NKV_WANT_IO_QUEUES 64u  /* Number of Queues asked for at connect */
#define NKV_RX_STAGE 65536u     /* receive staging buffer (headers and small data) */
#define NKV_RX_DIRECT_MIN 4096u /* data runs this long are received straight into the caller's buffer */

/* Request slot states. */
enum req_state {
	REQ_FREE,   /* on the free list */
	REQ_TX_CMD, /* capsule queued for sending */
	REQ_WAIT,   /* capsule sent; waiting for R2T, C2HData or CapsuleResp */
	REQ_TX_H2C, /* an H2CData PDU answering an R2T is queued for sending */
};

enum req_dir {
	DIR_NONE, /* no data */
	DIR_H2C,  /* host to controller */
	DIR_C2H,  /* controller to host */
};

/** One command slot; its index is the CID. */
struct nkv_req {
	uint8_t hdr[72 + 4];   /* current PDU header (CapsuleCmd or H2CData) + header digest */
	uint8_t ddgst[4];      /* data digest of the current outgoing PDU */
	uint32_t hdr_len;      /* header bytes (HLEN + digest) */
	uint32_t pad;          /* PDO padding */
	const uint8_t *tx_data;/* data of the current outgoing PDU */
	uint32_t tx_len;
	void *buf;
	uint32_t len;
	uint8_t state;         /* enum req_state */
	uint8_t dir;           /* enum req_dir */
	bool icd;              /* host-to-controller data went in-capsule */
	bool data_err;         /* a C2HData data digest did not match: fail the command */
	bool rsp_pending;      /* CapsuleResp arrived while an H2CData PDU was half sent */
	bool r2t_active;
	uint16_t ttag;
	uint32_t r2t_next;     /* next byte to send in the current R2T */
	uint32_t r2t_end;      /* end of the current R2T */
	uint32_t c2h_next;     /* next expected DATAO */
	struct nkv_cpl cpl;    /* stashed completion (rsp_pending) */
	nkv_cb cb;
	void *arg;
	int32_t next;          /* free list / send queue link (-1: none) */
	int32_t more_next;     /* H2C data to continue after this send (tx_flush only) */
};

/* Receive states. */
enum rx_state {
	RX_HDR,   /* collecting the common header, the PDU header and its digest */
	RX_PAD,   /* skipping PDO padding */
	RX_DATA,  /* C2HData payload */
	RX_DDGST, /* C2HData data digest */
	RX_TERM,  /* the rest of a C2HTermReq */
};

struct nkv_shm_qp;
struct nkv_shm_ctrl;
struct nkv_client_tls;

/* Internal submit flags. */
#define NKV_SUBMIT_RAW_DPTR 0x1u /* shm: keep the SQE's DPTR as given (queue creation carries PRP1 itself) */

/**
 * A client transport: what differs between NVMe/TCP (tcp.c) and the shared-memory PCIe-style
 * controller (shm*.c). The public calls in nkv.h dispatch through it (qpair.c, ctrl.c).
 */
struct nkv_transport_ops {
	const char *name;
	/** Open I/O queue pair @qid with @depth usable slots (TCP: socket, ICReq, Connect; shm: rings,
	 *  Create I/O CQ/SQ). @return 0 or -errno. */
	int (*qp_create)(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t depth, struct nkv_qpair **out);
	/** Tear an I/O queue pair down and free it; outstanding commands complete with HOST_PATH. */
	void (*qp_destroy)(struct nkv_qpair *qp);
	/** Queue one command (nkv_submit semantics; @flags: NKV_SUBMIT_*). */
	int (*submit)(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, nkv_cb cb,
		      void *arg, unsigned flags);
	/** nkv_qpair_flush / nkv_qpair_poll semantics. */
	int (*flush)(struct nkv_qpair *qp);
	int (*poll)(struct nkv_qpair *qp, int timeout_ms);
	/** Fail the queue pair: every outstanding command completes with NKV_STATUS_HOST_PATH. */
	void (*fail)(struct nkv_qpair *qp, int err);
	/** Controller teardown once the I/O queues are gone: shutdown notification, admin queue. */
	void (*ctrl_close)(struct nkv_ctrl *ctrl);
	/** nkv_buf_alloc / nkv_buf_free. */
	void *(*buf_alloc)(struct nkv_ctrl *ctrl, size_t len);
	void (*buf_free)(struct nkv_ctrl *ctrl, void *p);
	/** nkv_buf_register / nkv_buf_unregister; NULL: nothing to register (0). */
	int (*buf_register)(struct nkv_ctrl *ctrl, void *addr, size_t len);
	int (*buf_unregister)(struct nkv_ctrl *ctrl, void *addr);
};

extern const struct nkv_transport_ops nkv_tcp_ops;
extern const struct nkv_transport_ops nkv_shm_ops;

/**
 * A queue pair: the fields the public layer uses, then the NVMe/TCP state (one TCP connection, its
 * Connect, its command slots) or, for shm, a pointer to the shared-memory state.
 */
struct nkv_qpair {
	struct nkv_ctrl *ctrl;
	const struct nkv_transport_ops *ops;
	struct nkv_shm_qp *shm;    /* shm transport state (NULL over TCP) */
	struct nkv_qpair *next_qp; /* ctrl's list of I/O queue pairs */
	int fd;
	struct nkv_client_tls *tls;/* the connection's TLS session (tls.c); NULL: plain TCP */
	uint16_t qid;
	uint16_t depth;            /* slots = commands outstanding at most */
	bool hdgst, ddgst;
	uint8_t cpda;              /* controller's PDU data alignment (0's based dwords) */
	uint32_t maxh2cdata;
	uint32_t icd_max;          /* largest in-capsule data */
	int timeout_ms;
	int err;                   /* 0, or the -errno that failed the connection */
	unsigned outstanding;
	uint64_t ncompleted;       /* completions run so far (poll returns the difference) */
	struct nkv_req *reqs;
	int32_t free_head;
	int32_t txq_head, txq_tail;
	uint32_t tx_off;           /* bytes of the head PDU already sent */
	/* receive side */
	uint8_t rx_state;
	uint8_t rxh[160];          /* header being received (a TermReq may be up to 152 bytes) */
	uint32_t rxh_have, rxh_need;
	uint32_t rx_left;          /* bytes left in the current RX_PAD / RX_DATA / RX_DDGST / RX_TERM step */
	struct nkv_req *rx_req;    /* C2HData destination */
	uint8_t *rx_dst;
	uint32_t rx_crc;
	uint8_t rx_ddgst[4];
	uint8_t rx_flags;
	uint8_t *stage;
	uint32_t stage_off, stage_len;
};

/** A controller association. */
struct nkv_ctrl {
	const struct nkv_transport_ops *ops;
	struct nkv_shm_ctrl *shm;  /* shm transport state (NULL over TCP) */
	char traddr[257];          /* TCP address, or the shm socket path */
	char trsvcid[33];
	char subnqn[257];
	char hostnqn[257];
	uint8_t hostid[16];
	struct nkv_conn_opts opts;
	struct nkv_psk psk;        /* opts.tls: the configured PSK (opts.tls_key is not kept) */
	uint32_t kato_ms;          /* sent in the admin Connect (0: none) */
	struct nkv_qpair *admin;
	pthread_mutex_t admin_mu;  /* serializes the admin queue */
	pthread_mutex_t qp_mu;     /* qid bitmap and the I/O queue pair list */
	struct nkv_qpair *qps;
	uint8_t qid_used[(NKV_WANT_IO_QUEUES + 1 + 7) / 8];
	uint16_t nio;              /* I/O queues granted */
	uint16_t cntlid;
	uint64_t cap;
	uint32_t vs;
	bool discovery;
	struct nkv_id_ctrlr id;
	/* DH-HMAC-CHAP (auth.c): the secrets, transformed (host's with the host NQN, controller's with the
	 * subsystem NQN); lengths 0: none */
	uint8_t dh_tkey[64], dh_tckey[64];
	uint8_t dh_tkey_len, dh_tckey_len;
	_Atomic uint16_t dh_tid;   /* next transaction identifier */
	_Atomic uint32_t dh_seq;   /* last sequence number S2 */
	/* keep alive */
	pthread_t ka_thread;
	bool ka_running;
	bool ka_stop;
	pthread_mutex_t ka_mu;
	pthread_cond_t ka_cv;
};

/* tcp.c */
/** Open a TCP connection, exchange ICReq/ICResp, allocate @slots command slots. */
int nkv_tcp_qp_open(struct nkv_ctrl *ctrl, uint16_t qid, uint16_t slots, struct nkv_qpair **out);
/** Close the socket and free the queue pair (outstanding commands complete with HOST_PATH). */
void nkv_tcp_qp_close(struct nkv_qpair *qp);
/** Fail the connection: every outstanding command completes with NKV_STATUS_HOST_PATH. */
void nkv_tcp_qp_fail(struct nkv_qpair *qp, int err);
/**
 * The poll(2) events a thread waiting for @qp's socket asks for, or 0 when it must not wait: its TLS
 * session holds decrypted bytes, which the socket will not signal again.
 */
short nkv_tcp_qp_events(const struct nkv_qpair *qp);

/* shm.c: waiting for an shm queue pair's interrupt (nkv_shm.h notifications) from an event loop */
/**
 * Arm @qp's CQ interrupt before sleeping. @return the eventfd to wait on (POLLIN), -1 when the queue
 * pair has no interrupt (poll the CQ instead), or -2 when a CQE is already there (do not sleep). After
 * waiting, with any result >= 0, call nkv_shm_qp_disarm().
 */
int nkv_shm_qp_arm(struct nkv_qpair *qp);
/** Disarm @qp's CQ interrupt and consume a pending one (the caller is polling the CQ again). */
void nkv_shm_qp_disarm(struct nkv_qpair *qp);

/* tls.c */
/** Handshake on @qp's connected socket (ctrl->psk, identity for ctrl's host and subsystem) by
 *  @deadline. @return 0 or -errno as nkv_connect() documents for TLS (-ETIMEDOUT past the deadline). */
int nkv_tcp_tls_open(struct nkv_qpair *qp, int64_t deadline);
/** End @qp's TLS session (close_notify when healthy) and free it; the socket stays open. */
void nkv_tcp_tls_close(struct nkv_qpair *qp);
/** @qp's session (NULL over plain TCP). */
struct nkv_tls *nkv_tcp_tls_io(const struct nkv_qpair *qp);

/** Monotonic milliseconds (the common clock, signed: the client computes time left as a difference). */
static inline int64_t nkv_client_now_ms(void)
{
	return (int64_t)nkv_now_ms();
}

/* ctrl.c */
/**
 * Allocate a controller and settle its identity (host NQN and ID, timeouts). @subnqn may be empty
 * only when @allow_empty_nqn (shm: the socket names the subsystem). @return NULL with *err set.
 */
struct nkv_ctrl *nkv_ctrl_alloc(const char *traddr, const char *trsvcid, const char *subnqn,
				const struct nkv_conn_opts *opts, bool allow_empty_nqn, int *err);
/** Free a controller whose transport state is already gone (ops->ctrl_close ran or never started). */
void nkv_ctrl_free_mem(struct nkv_ctrl *ctrl);
/** Identify (CNS @cns, CSI @csi) into @buf (4096 bytes) over the admin queue. */
int nkv_ctrl_identify_cmd(struct nkv_ctrl *ctrl, uint8_t cns, uint8_t csi, uint32_t nsid, void *buf);
/** Set Features Number of Queues asking for @want pairs; sets ctrl->nio to the grant (<= @want). */
int nkv_ctrl_set_num_queues(struct nkv_ctrl *ctrl, unsigned want);
/** Admin command with internal submit flags (NKV_SUBMIT_*), serialized like nkv_admin(). */
int nkv_admin_flags(struct nkv_ctrl *ctrl, const struct nkv_sqe *sqe, void *buf, uint32_t len,
		    struct nkv_cpl *cpl, unsigned flags);
/** Fabrics: CC.SHN = 01b on the way out (TCP ctrl_close). */
void nkv_ctrl_fabrics_shutdown(struct nkv_ctrl *ctrl);

/* qpair.c */
/** nkv_exec with internal submit flags. */
int nkv_exec_flags(struct nkv_qpair *qp, const struct nkv_sqe *sqe, void *buf, uint32_t len, struct nkv_cpl *cpl,
		   unsigned flags);

/**
 * Replace @ctrl's association, lost with its target (a restart, a lost connection), by a new one to
 * the same address: the old admin queue is closed without a shutdown notification, then, as at
 * connect time, a new admin queue, a Connect with the dynamic controller ID (shm: HELLO, a new
 * controller), CC.EN, Identify, Number of Queues and Keep Alive; over shm the buffers of
 * nkv_buf_alloc() and nkv_buf_register() are registered again at their IOVAs. The caller's handle
 * stays valid. Every I/O queue pair of @ctrl must be destroyed first (their doorbells and sockets
 * belong to the old association). Admin commands of other threads meanwhile fail (-ENOTCONN, or the
 * new controller's status while it is brought up).
 * @return 0; -EBUSY (I/O queue pairs remain); -ESTALE (the address now serves another subsystem);
 * -EINVAL (a discovery controller); or -errno as nkv_connect().
 */
int nkv_ctrl_reconnect(struct nkv_ctrl *ctrl);
/** Has @ctrl's target closed the association (its admin connection, or the shm socket, hung up)?
 *  A cheap check before opening an I/O queue pair on it. Not during nkv_ctrl_reconnect(). */
bool nkv_ctrl_hung_up(const struct nkv_ctrl *ctrl);

/* shm_ctrl.c */
/** The shm half of nkv_ctrl_reconnect(): a new socket, HELLO, registrations and admin queue;
 *  Identify into @id (the caller checks the subsystem). */
int nkv_shm_ctrl_reconnect(struct nkv_ctrl *ctrl, struct nkv_id_ctrlr *id);
/** What is left of an association (admin queue, socket, register page): closed, no shutdown
 *  notification; the buffers stay. No I/O queue pair may remain. */
void nkv_shm_ctrl_drop(struct nkv_ctrl *ctrl);
/** The controller's socket (polled for a hang-up: the target went away); -1 over TCP. */
int nkv_shm_ctrl_fd(const struct nkv_ctrl *ctrl);
/** Parse "shm:/path" or "vfio-user:/path" (nkv_connect's forms of the PCIe-style controller).
 *  @return the path (*@vfio_user says which), or NULL. */
const char *nkv_shm_traddr_path(const char *traddr, bool *vfio_user);
/** nkv_connect_shm (or its vfio-user twin when @vfio_user), then check the controller's SUBNQN
 *  against @subnqn (NULL or "": any). */
int nkv_connect_shm_nqn(const char *path, bool vfio_user, const char *subnqn, const struct nkv_conn_opts *opts,
			struct nkv_ctrl **out);
/** "shm" or "vfio-user": the scheme of a PCIe-style controller's address (NULL over TCP). */
const char *nkv_shm_scheme(const struct nkv_ctrl *ctrl);

/* auth.c */
/** Parse and transform the secrets of @opts into @ctrl (its host and subsystem NQNs set).
 *  @return 0 or -EINVAL (malformed; logged without the secret). */
int nkv_auth_setup(struct nkv_ctrl *ctrl, const struct nkv_conn_opts *opts);
/** One DH-HMAC-CHAP transaction on @qp (the caller owns it; admin queue: under admin_mu or before
 *  other threads use it). @return 0, -ENOKEY, -EACCES, -EKEYREJECTED, -EOPNOTSUPP, -EPROTO or the
 *  queue's error. */
int nkv_auth_run(struct nkv_ctrl *ctrl, struct nkv_qpair *qp);
/** After a successful Connect answered @dw0: authenticate when asked (or, on the admin queue,
 *  when a controller secret was given). @return as nkv_auth_run(), or -EOPNOTSUPP (ASCR). */
int nkv_auth_after_connect(struct nkv_ctrl *ctrl, struct nkv_qpair *qp, uint32_t dw0);

/* engine.c, for mpath.c */
struct nkv_mp;
/** Check one op as nkv_engine_submit() does. @return 0 or -EINVAL. */
int nkv_engine_op_check(const struct nkv_op *op);
/** Has @e (a single-path engine) lost its controller (reconnecting)? */
bool nkv_engine_is_down(const struct nkv_engine *e);
/** A public engine handle for multipath engine @mp (every call goes to mpath.c). NULL: no memory. */
struct nkv_engine *nkv_engine_wrap_mp(struct nkv_mp *mp);

/* mpath.c: the multipath engine behind nkv_engine_connect() (nkv.h "multipath") */
int nkv_mp_submit(struct nkv_mp *mp, struct nkv_op *ops, unsigned n, uint64_t tag);
int nkv_mp_run(struct nkv_mp *mp, struct nkv_op *ops, unsigned n);
int nkv_mp_reap(struct nkv_mp *mp, uint64_t *tags, unsigned max, int timeout_ms);
int nkv_mp_eventfd(const struct nkv_mp *mp);
unsigned nkv_mp_queues(const struct nkv_mp *mp);
unsigned nkv_mp_paths(const struct nkv_mp *mp);
struct nkv_ctrl *nkv_mp_ctrl(const struct nkv_mp *mp, unsigned i);
int nkv_mp_active(struct nkv_mp *mp, uint32_t nsid);
/** Wait for every accepted op, stop the threads, destroy the paths' engines and controllers. */
void nkv_mp_destroy(struct nkv_mp *mp);
/** Did the op that completed as @s fail for its path (Host Pathing Error, -ETIMEDOUT on the path,
 *  never sent, an ANA status) rather than for what it asked? */
bool nkv_mp_path_error(const struct nkv_op *s);
/** May @op, which failed for its path as @s, be sent again on another (docs/multipath.md)? */
bool nkv_mp_may_resend(const struct nkv_op *op, const struct nkv_op *s);

/** One namespace's ANA state as a controller's ANA log page reports it. */
struct nkv_ana_ns {
	uint32_t nsid;
	uint8_t state; /* enum nkv_ana_state */
};
/**
 * Decode an ANA log page (0Ch, with NSID lists) of @len bytes into up to @max (nsid, state) pairs.
 * @return the pairs stored, or -EPROTO (a header or descriptor runs past @len, a state outside
 * enum nkv_ana_state).
 */
int nkv_ana_parse(const void *buf, size_t len, struct nkv_ana_ns *out, unsigned max);

/** Fabrics Connect on @qp (QID qp->qid), then DH-HMAC-CHAP when the controller asks.
 *  @return 0 or -errno (see connect_errno in ctrl.c, nkv_auth_after_connect). */
int nkv_ctrl_fabrics_connect(struct nkv_ctrl *ctrl, struct nkv_qpair *qp, uint16_t sqsize, uint16_t cntlid,
			     uint16_t *cntlid_out);

#endif
