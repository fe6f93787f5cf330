/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doneq.h - the completed-batch queue behind nkv_engine_reap() and nkv_engine_eventfd(), shared by
 * the engine (engine.c) and the multipath engine (mpath.c): a FIFO of batch tags behind a mutex, a
 * condition variable for reap's waiters, and an eventfd that is readable while the FIFO holds any.
 */
#ifndef NKV_CLIENT_DONEQ_H
#define NKV_CLIENT_DONEQ_H

#include <pthread.h>
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
	int fd; /* eventfd: readable while head != NULL */
};

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
 * @timeout_ms (0: not at all, < 0: until one arrives) while none is queued. The eventfd is drained
 * once the queue is empty. @return the number of tags taken.
 */
int nkv_doneq_reap(struct nkv_doneq *q, uint64_t *tags, unsigned max, int timeout_ms, nkv_doneq_free free_fn);

#endif
