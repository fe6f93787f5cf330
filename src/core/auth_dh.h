/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth_dh.h - the Diffie-Hellman computations of DH-HMAC-CHAP (auth.c), run off the reactor threads
 * and bounded per peer. A key generation on ffdhe8192 costs about 9 ms, and any peer that knows an
 * allowed host NQN (not a secret) can ask for one per transaction: on a reactor thread that time
 * would delay every other host's commands on it. So:
 *
 *  - each computation is a job for a small pool of worker threads, with a bounded queue; the result
 *    comes back to the queue's owner thread through its message queue (reactor/msgq.h), as backend
 *    completions do;
 *  - the transactions of associations that have not authenticated yet (the only ones a peer without
 *    the secret can start) draw on two token buckets before they may use a DH group: one per host
 *    NQN and one per source address. An I/O queue (its admin queue proved the secret) and a
 *    re-authentication of an authenticated queue are not charged; they still go through the pool.
 *
 * Test hook: NKV_TEST_DH_DELAY_MS=N in the environment makes every job sleep N ms (capped at 10 s)
 * before it computes, so that a test can hold a computation in progress; the daemon warns when it is
 * set.
 */
#ifndef NKV_CORE_AUTH_DH_H
#define NKV_CORE_AUTH_DH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dhchap.h"
#include "reactor/msgq.h"

#define NKV_DH_THREADS 2      /* workers: the most DH computations running at once */
#define NKV_DH_MAX_QUEUED 64  /* jobs queued or running, all peers together */
/* Token buckets of unauthenticated transactions that use a DH group. A host connecting once costs
 * one token (its I/O queues none); the burst covers a host that retries or connects to several
 * subsystems at once, the rate a host that keeps reconnecting after failures. */
#define NKV_DH_NQN_BURST 16   /* per host NQN */
#define NKV_DH_NQN_RATE 4     /* tokens per second */
#define NKV_DH_ADDR_BURST 64  /* per source address (every NQN from it) */
#define NKV_DH_ADDR_RATE 16

struct nkv_dh_pool;
struct nkv_dh_job;
struct nkv_req;
struct nkv_auth_txn;

/** What a job computes. */
enum nkv_dh_op {
	NKV_DH_GEN,    /* a fresh key pair: key and pub out */
	NKV_DH_DERIVE, /* the shared secret of key (in, consumed) and peer (in): secret out */
};

/** One computation, owned by the queue's owner thread except while the pool holds it. */
struct nkv_dh_job {
	struct nkv_msg msg;          /* the hand-back to the owner thread */
	struct nkv_dh_job *next;     /* in the pool's queue */
	struct nkv_msgq *msgq;       /* the owner's */
	void (*done)(struct nkv_dh_job *j); /* runs on the owner thread with the result */
	struct nkv_req *req;         /* the command that waits for it */
	struct nkv_auth_txn *txn;    /* owner thread only: the transaction, NULL once it was dropped */
	enum nkv_dh_op op;
	uint8_t group;
	int rc;                      /* 0 or -errno, set by the worker */
	struct evp_pkey_st *key;     /* GEN: out; DERIVE: in, freed by the worker */
	uint8_t val[NKV_DHCHAP_MAX_DH];    /* GEN: our public value; DERIVE: the peer's */
	uint8_t secret[NKV_DHCHAP_MAX_DH]; /* DERIVE: the shared secret */
};

/** A pool for one target; threads start with the first job. @return it or NULL (-ENOMEM). */
struct nkv_dh_pool *nkv_dh_pool_create(void);

/** Stop the workers and free the pool. Every queue pair must be gone, so no job is left (their
 *  commands kept the queues open). NULL is fine. */
void nkv_dh_pool_destroy(struct nkv_dh_pool *p);

/**
 * Charge one DH transaction of an unauthenticated association of @hostnqn from @addr (16 bytes,
 * IPv4 as v4-mapped IPv6; NULL: the transport has no address, only the NQN is charged). Both
 * buckets must hold a token; neither is charged otherwise. Any thread.
 * @return 0, -EAGAIN (the host NQN's share is spent) or -EADDRINUSE (the address's).
 */
int nkv_dh_admit(struct nkv_dh_pool *p, const char *hostnqn, const uint8_t *addr);

/**
 * Queue @j (op, group, inputs, msgq, done, req and txn filled in). The worker computes, then sends
 * j->msg to j->msgq; done(j) runs there and must free @j (nkv_dh_job_free). Any thread.
 * @return 0, -EBUSY (NKV_DH_MAX_QUEUED jobs already), -EAGAIN (no worker thread could start).
 */
int nkv_dh_submit(struct nkv_dh_pool *p, struct nkv_dh_job *j);

/** A zeroed job. @return it or NULL. */
struct nkv_dh_job *nkv_dh_job_new(void);

/** Erase and free a job and whatever key it still holds (NULL is fine). */
void nkv_dh_job_free(struct nkv_dh_job *j);

#endif
