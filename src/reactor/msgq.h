/*
 * msgq.h - multi-producer, single-consumer message queue with an eventfd, the hand-off that brings
 * backend completions (fired on librados threads) back to the thread that owns the queue pair.
 */
#ifndef NKV_MSGQ_H
#define NKV_MSGQ_H

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
	int efd;                        /* eventfd: readable while messages may be pending */
};

/** @return 0 or -errno (eventfd creation). */
int nkv_msgq_init(struct nkv_msgq *q);
void nkv_msgq_fini(struct nkv_msgq *q);

/** Enqueue @m to run @fn on the consumer. Any thread; lock-free; never fails. */
void nkv_msgq_send(struct nkv_msgq *q, struct nkv_msg *m, nkv_msg_fn fn);

/**
 * Consumer: is the queue empty as far as the consumer can see? A producer in the middle of a send
 * may still land a message (its eventfd write follows), so only a consumer that knows nobody else
 * sends (the shared-memory transport's single-threaded test mode) can skip nkv_msgq_poll on it.
 */
static inline bool nkv_msgq_empty(struct nkv_msgq *q)
{
	return q->tail == &q->stub && atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL;
}

/**
 * Consumer: run pending messages. If none ran and @timeout_ms != 0, wait on the eventfd up to
 * @timeout_ms (< 0: forever) and try again. @return messages run (>= 0), or -ETIMEDOUT.
 */
int nkv_msgq_poll(struct nkv_msgq *q, int timeout_ms);

#endif
