/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doneq.h - the completed-batch queue behind nkv_engine_reap() and nkv_engine_eventfd(), shared by
 * the engine (engine.c) and the multipath engine (mpath.c): a FIFO of batch tags behind a mutex, a
 * condition variable for reap's waiters, and an eventfd that is readable while the FIFO holds any;
 * and how a finished batch reaches whoever waits for it (nkv_doneq_batch).
 */
#ifndef NKV_CLIENT_DONEQ_H
#define NKV_CLIENT_DONEQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/** The link a batch embeds to sit on a done queue. */
struct nkv_doneq_node {
	struct nkv_doneq_node *next;
	uint64_t tag;
};

struct nkv_doneq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct nkv_doneq_node *head, *tail;
	int fd;          /* eventfd: readable while head != NULL, except for what a reaper's drive hook
			  * queued (it takes those itself, nkv_doneq_reap) */
	bool signalled;  /* the eventfd holds a count (written, not yet read back) */
	_Atomic unsigned queued; /* batches on the queue: read without mu by a driving reaper */
};

/**
 * A reap's drive hook (nkv_doneq_reap): completes work on the calling thread until a batch is
 * queued (nkv_doneq_ready), up to @timeout_ms (< 0: no limit), or until it cannot go on; returns
 * at once when it has nothing to drive.
 */
typedef void (*nkv_doneq_drive)(void *arg, int timeout_ms);

/** Is a batch queued? A hint without the lock, for a drive hook's loop. */
static inline bool nkv_doneq_ready(struct nkv_doneq *q)
{
	return __atomic_load_n(&q->queued, __ATOMIC_ACQUIRE) != 0;
}

/** Frees a batch taken off the queue, given its link. */
typedef void (*nkv_doneq_free)(struct nkv_doneq_node *n);

/** Set up @q (empty). @return 0, or -errno when no eventfd can be made (@q is then ready for fini). */
int nkv_doneq_init(struct nkv_doneq *q);

/** Free what is still queued with @free_fn, close the eventfd, destroy the locks. */
void nkv_doneq_fini(struct nkv_doneq *q, nkv_doneq_free free_fn);

/** Queue @n (its tag set): wake reap's waiters, make the eventfd readable. Any thread. */
void nkv_doneq_push(struct nkv_doneq *q, struct nkv_doneq_node *n);

/**
 * Take up to @max tags in completion order, freeing each batch with @free_fn; wait up to
 * @timeout_ms (0: not at all, < 0: until one arrives) while none is queued. When @drive is given
 * and nothing is queued, it runs first (with the whole timeout) and the wait is only for what it
 * left; batches it queues meanwhile do not write the eventfd, which would only be read back before
 * this returns (two system calls per reap); other threads' do, so a drive hook may sleep on it.
 * On return the eventfd is readable exactly when tags remain queued. @return the number of tags taken.
 */
int nkv_doneq_reap(struct nkv_doneq *q, uint64_t *tags, unsigned max, int timeout_ms, nkv_doneq_free free_fn,
		   nkv_doneq_drive drive, void *drive_arg);

/** The completion part both engines' batches embed: a thread waiting in nkv_engine_run(), or a tag
 *  for reap. */
struct nkv_doneq_batch {
	bool run;  /* nkv_engine_run(): a thread waits on cv; else the tag goes to a done queue */
	bool done; /* run: set under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct nkv_doneq_node dn;
};

/** Set up @b for a run() waiter (@run) or for reap under @tag. */
void nkv_doneq_batch_init(struct nkv_doneq_batch *b, bool run, uint64_t tag);

/** Destroy @b's locks (the batch itself is its owner's to free). */
void nkv_doneq_batch_fini(struct nkv_doneq_batch *b);

/** The batch's last op completed: wake its run() waiter, or queue its tag on @q. */
void nkv_doneq_batch_finish(struct nkv_doneq *q, struct nkv_doneq_batch *b);

/** run(): wait until nkv_doneq_batch_finish() (every op has a deadline, so this ends). */
void nkv_doneq_batch_wait(struct nkv_doneq_batch *b);

#endif
