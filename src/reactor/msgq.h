/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msgq.h - multi-producer, single-consumer message queue with an eventfd, the hand-off that brings
 * backend completions (fired on librados threads) back to the thread that owns the queue pair.
 */
#ifndef NKV_MSGQ_H
#define NKV_MSGQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct nkv_msg;
typedef void (*nkv_msg_fn)(struct nkv_msg *m);

/** Intrusive message: embed it in the object to hand over. */
struct nkv_msg {
	_Atomic(struct nkv_msg *) next;
	nkv_msg_fn fn; /* runs on the consumer thread */
};

struct nkv_msgq {
	_Atomic(struct nkv_msg *) head; /* producers swap themselves in here */
	struct nkv_msg *tail;           /* consumer only */
	struct nkv_msg stub;
	int efd;                        /* eventfd: written when a message lands while the consumer sleeps */
	atomic_bool sleeping;           /* the consumer is (about to be) blocked on efd */
	/* Lending (nkv_msgq_lend): the consumer holds @own except while it blocks, so a producer that
	 * finds @own free may run its message itself (nkv_msgq_send_or_run), then @after, under it. */
	pthread_mutex_t own;
	atomic_bool lends;
	void (*after)(void *arg);       /* the consumer's after-a-batch work (flush sends, interrupts) */
	void *after_arg;
};

/** @return 0 or -errno (eventfd creation). */
int nkv_msgq_init(struct nkv_msgq *q);
void nkv_msgq_fini(struct nkv_msgq *q);

/**
 * Enqueue @m to run @fn on the consumer. Any thread; lock-free; never fails. The eventfd is written
 * only when the consumer said it sleeps (nkv_msgq_sleep_begin): a busy consumer finds the message
 * on its next nkv_msgq_poll, with no system call on either side.
 */
void nkv_msgq_send(struct nkv_msgq *q, struct nkv_msg *m, nkv_msg_fn fn);

/**
 * Consumer: run pending messages. If none ran and @timeout_ms != 0, wait on the eventfd up to
 * @timeout_ms (< 0: forever) and try again. @return messages run (>= 0), or -ETIMEDOUT.
 * With @timeout_ms 0 it makes no system call.
 */
int nkv_msgq_poll(struct nkv_msgq *q, int timeout_ms);

/**
 * Consumer, before blocking on efd itself (with other descriptors: epoll, ppoll): announce it, so
 * that producers write the eventfd. @return false when messages are already pending (do not block;
 * the announcement is withdrawn). After a true return, call nkv_msgq_sleep_end() once awake.
 */
bool nkv_msgq_sleep_begin(struct nkv_msgq *q);

/** Consumer: awake again; producers stop writing the eventfd. */
static inline void nkv_msgq_sleep_end(struct nkv_msgq *q)
{
	atomic_store_explicit(&q->sleeping, false, memory_order_relaxed);
}

/**
 * Consumer thread, once at its start: lend the thread's state to producers while it blocks. From
 * now on the consumer holds q->own whenever it runs, and drops it only around a blocking wait
 * (nkv_msgq_unlock / nkv_msgq_lock). @after (may be NULL) runs after each lent message, as the
 * consumer's own loop runs it after each batch.
 */
void nkv_msgq_lend(struct nkv_msgq *q, void (*after)(void *arg), void *arg);

/** Consumer thread, when it exits: stop lending (later messages only queue) and drop q->own. */
void nkv_msgq_unlend(struct nkv_msgq *q);

/** Consumer, around a blocking wait: let producers run messages meanwhile (no-op unless lending). */
static inline void nkv_msgq_unlock(struct nkv_msgq *q)
{
	if (atomic_load_explicit(&q->lends, memory_order_relaxed))
		pthread_mutex_unlock(&q->own);
}

static inline void nkv_msgq_lock(struct nkv_msgq *q)
{
	if (atomic_load_explicit(&q->lends, memory_order_relaxed))
		pthread_mutex_lock(&q->own);
}

/**
 * As nkv_msgq_send, but when the consumer lends and is blocked, run @fn(@m) and the consumer's
 * after-work on the calling thread instead: the consumer is not woken, which saves a thread
 * wake-up (tens of microseconds on a loaded machine) per message. The caller must hold no lock
 * that @fn might take (it may submit new work), and must be able to afford @fn's time.
 */
void nkv_msgq_send_or_run(struct nkv_msgq *q, struct nkv_msg *m, nkv_msg_fn fn);

/** Consumer: efd was readable: reset it (one system call), then run the messages with nkv_msgq_poll(q, 0). */
void nkv_msgq_ack(struct nkv_msgq *q);

#endif
