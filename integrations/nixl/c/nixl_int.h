/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_int.h - internals of the RADOS_NKV NIXL table shared by nixl_reg.c (backend, registrations)
 * and nixl_xfer.c (requests, query).
 *
 * Locks: reg_lock guards the devId table and the registration list; stage_lock the kept staging
 * buffers (taken inside req_lock, never the other way round); req_lock guards the request list, the backlog and every
 * request's state, and is held around nkv_engine_submit()/nkv_engine_reap() so that a batch's tag
 * is never reaped before its request says it is in flight. reg_lock is never held with another.
 */
#ifndef NKV_NIXL_INT_H
#define NKV_NIXL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "nkv/nkv.h"
#include "nkv_nixl.h"

/**
 * A registration. OBJ ones are reference counted: one reference is the caller's (dropped by
 * nkv_nixl_deregister()), one more per request using it, so a request keeps the name it was
 * prepared with even when the devId is registered again or deregistered while it is in flight.
 */
struct nkv_nixl_md {
	int mem;                 /* NKV_NIXL_DRAM_SEG or NKV_NIXL_OBJ_SEG */
	atomic_uint refs;        /* OBJ: the caller's + one per request */
	/* DRAM */
	void *addr;
	size_t len;
	bool buf_registered;     /* nkv_buf_register() took it (shm) */
	/* OBJ */
	uint64_t dev_id;
	uint64_t base, span;     /* valid object offsets [base, base + span); span 0: unbounded */
	struct nkv_nixl_md *hnext; /* OBJ: devId hash chain */
	bool in_table;           /* OBJ: the devId's current registration (under reg_lock) */
	struct nkv_nixl_md *prev, *next; /* b->regs: registrations not yet deregistered */
	uint8_t key[16];
	uint32_t hdr_size;       /* nkv_lname_hdr_size(name_len) */
	size_t name_len;
	char name[];             /* name_len bytes + NUL */
};

/** State of a request (under req_lock). */
enum nixl_req_state {
	REQ_IDLE,   /* prepared, never posted */
	REQ_STAGING, /* a posted write, waiting for the stager to copy it into staging */
	REQ_QUEUED, /* posted, waiting in the backlog for engine room */
	REQ_POSTED, /* its batch is in the engine */
	REQ_DONE,   /* its batch completed; result holds the status */
};

/** One descriptor pair of a request. */
struct nixl_xd {
	struct nkv_nixl_md *md; /* referenced */
	uint64_t off;           /* payload offset (remote addr) */
	uint64_t len;
	void *local;
	unsigned op;            /* index of its payload op (read with len 0: none, UINT32_MAX) */
	unsigned hdr;           /* read: index of its object's header op */
};

struct nkv_nixl_req {
	struct nkv_nixl *b;
	struct nkv_nixl_req *prev, *next;       /* b->reqs (all live requests) */
	struct nkv_nixl_req *q_next;             /* b->backlog, or b->sq while REQ_STAGING */
	int op;                                  /* NKV_NIXL_READ / WRITE */
	enum nixl_req_state state;
	bool detached;                           /* released while in flight: free on completion */
	int result;                              /* REQ_DONE: the status */
	unsigned nd, nops;
	struct nixl_xd *xd;
	struct nkv_op *ops;
	uint8_t *bufs;                           /* read: header buffers; write: staging (header + payload) */
	size_t stage_cap;                        /* write: the staging buffer's size */
	bool stage_lib;                          /* write: it came from nkv_buf_alloc() */
};

#define NKV_NIXL_STAGE_KEEP 32 /* staging buffers kept for reuse, at most */
struct stage_dead;         /* nixl_stage.c */

/** A staging buffer kept for reuse. */
struct nixl_stage {
	void *p;
	size_t cap;
	bool lib; /* from nkv_buf_alloc() (else malloc) */
};

struct nkv_nixl {
	struct nkv_nixl_opts o;
	struct nkv_ctrl *ctrl;
	struct nkv_engine *eng;
	bool shm;
	bool mp;   /* "paths": a multipath engine owns the controllers; buffers are plain memory */
	/* the namespace's largest value (KVVML), header + payload; 0: unknown (the target judges) */
	_Atomic uint64_t max_value;
	/* devId -> current OBJ registration: chained hash, power-of-two buckets (under reg_lock) */
	pthread_mutex_t reg_lock;
	struct nkv_nixl_md **tab;
	size_t tab_size, tab_count;
	/* requests */
	pthread_mutex_t req_lock;
	struct nkv_nixl_req *reqs;               /* every live request (to free them at destroy) */
	struct nkv_nixl_req *backlog, *backlog_tail;
	unsigned live;
	struct nkv_nixl_md *regs;                /* registrations not deregistered (under reg_lock; freed at destroy) */
	/* staging buffers of finished writes (nixl_stage.c) */
	pthread_mutex_t stage_lock;
	struct nixl_stage stage[NKV_NIXL_STAGE_KEEP];
	size_t nstage, stage_bytes;
	struct stage_dead *stage_dead;           /* given back, not kept: freed by nixl_stage_reclaim() */
	/* the stager thread (nixl_stager.c): copies posted writes into staging and frees staging, so
	 * that posting never waits on a copy or a free */
	pthread_mutex_t sq_lock;                 /* never held with another lock */
	pthread_cond_t sq_cv;
	pthread_t stager;
	bool stager_up;
	struct nkv_nixl_req *sq, *sq_tail;       /* writes waiting to be staged, in post order */
	bool sq_kick, sq_stop, sq_hold;          /* kick: staging to free; hold: a test's pause */
	unsigned long sq_staged;                 /* writes staged so far (tests) */
};

/** Ask the target for the namespace's largest value again. @return it, or 0 when the target did not answer. */
uint64_t nixl_max_value_refresh(struct nkv_nixl *b);
/** Take a reference on an OBJ registration. */
void nixl_md_get(struct nkv_nixl_md *md);
/** Drop one; the last frees it. */
void nixl_md_put(struct nkv_nixl_md *md);
/** The devId's current OBJ registration, referenced, or NULL. */
struct nkv_nixl_md *nixl_md_lookup(struct nkv_nixl *b, uint64_t dev_id);
/** A staging buffer of at least @size bytes (*@cap: its size; *@lib: from nkv_buf_alloc()), or NULL. */
void *nixl_stage_get(struct nkv_nixl *b, size_t size, size_t *cap, bool *lib);
/** Give a staging buffer back: kept for reuse within the limits, else queued for
 *  nixl_stage_reclaim(); never frees (callers hold req_lock). NULL: no-op. */
void nixl_stage_put(struct nkv_nixl *b, void *p, size_t cap, bool lib);
/** Free the buffers queued by nixl_stage_put() (not under req_lock: over shm a free is a round trip). */
void nixl_stage_reclaim(struct nkv_nixl *b);
/** Free every kept staging buffer (destroy, before disconnecting). */
void nixl_stage_drain(struct nkv_nixl *b);
/** Start the stager thread. @return 0 or -errno. */
int nixl_stager_start(struct nkv_nixl *b);
/** Stage and submit every write queued, then stop the stager (destroy, before the engine goes). */
void nixl_stager_stop(struct nkv_nixl *b);
/** Queue a posted write (REQ_STAGING) for the stager. */
void nixl_stager_push(struct nkv_nixl *b, struct nkv_nixl_req *r);
/** Wake the stager to free staging buffers given back (call without req_lock). */
void nixl_stager_kick(struct nkv_nixl *b);
/** Tests: while @hold, the stager stages nothing (frees nothing); @return writes staged so far. */
unsigned long nixl_stager_hold(struct nkv_nixl *b, bool hold);
/** The stager's work on one write: copy into staging, then submit it (or finish it with an error). */
void nixl_stage_and_submit(struct nkv_nixl *b, struct nkv_nixl_req *r);
/** Free every request left (destroy, after the engine is gone). */
void nixl_reqs_free_all(struct nkv_nixl *b);

#endif
