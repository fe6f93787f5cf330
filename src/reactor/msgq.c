/* SPDX-License-Identifier: Apache-2.0 */
/* msgq.c - intrusive MPSC queue (Vyukov's algorithm) woken through an eventfd. */
#include "msgq.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

int nkv_msgq_init(struct nkv_msgq *q)
{
	atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
	atomic_store_explicit(&q->head, &q->stub, memory_order_relaxed);
	q->tail = &q->stub;
	atomic_init(&q->sleeping, false);
	atomic_init(&q->lends, false);
	q->after = NULL;
	pthread_mutex_init(&q->own, NULL);
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return q->efd < 0 ? -errno : 0;
}

void nkv_msgq_fini(struct nkv_msgq *q)
{
	if (q->efd >= 0) {
		close(q->efd);
		pthread_mutex_destroy(&q->own);
	}
	q->efd = -1;
}

static void push(struct nkv_msgq *q, struct nkv_msg *m)
{
	atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
	struct nkv_msg *prev = atomic_exchange_explicit(&q->head, m, memory_order_acq_rel);
	/* Pairs with the acquire load of ->next in pop(): publishes m's contents to the consumer. */
	atomic_store_explicit(&prev->next, m, memory_order_release);
}

void nkv_msgq_send(struct nkv_msgq *q, struct nkv_msg *m, nkv_msg_fn fn)
{
	uint64_t one = 1;

	m->fn = fn;
	push(q, m);
	/* Dekker with nkv_msgq_sleep_begin: our push, then their flag; their flag, then our head. One of
	 * the two sees the other: the consumer does not block, or we wake it. Written after the link is
	 * published, so a consumer woken by it finds the message (or finds a producer mid-push in pop(),
	 * whose own push came before that producer's flag check). Only the first producer to see the
	 * flag writes; the consumer clears the flag whenever it wakes. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&q->sleeping, memory_order_relaxed) &&
	    atomic_exchange_explicit(&q->sleeping, false, memory_order_relaxed))
		while (write(q->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
}

void nkv_msgq_lend(struct nkv_msgq *q, void (*after)(void *arg), void *arg)
{
	q->after = after;
	q->after_arg = arg;
	pthread_mutex_lock(&q->own);
	atomic_store(&q->lends, true);
}

void nkv_msgq_unlend(struct nkv_msgq *q)
{
	if (atomic_exchange(&q->lends, false))
		pthread_mutex_unlock(&q->own);
}

void nkv_msgq_send_or_run(struct nkv_msgq *q, struct nkv_msg *m, nkv_msg_fn fn)
{
	/* Free only while the consumer blocks (or has just woken and not yet taken it back): its state
	 * is ours until we drop it. Lending is checked again under the lock, for a consumer that
	 * stopped lending (nkv_msgq_unlend) between our load and the trylock. */
	if (atomic_load_explicit(&q->lends, memory_order_relaxed) && pthread_mutex_trylock(&q->own) == 0) {
		if (atomic_load_explicit(&q->lends, memory_order_relaxed)) {
			fn(m);
			if (q->after)
				q->after(q->after_arg);
			pthread_mutex_unlock(&q->own);
			return;
		}
		pthread_mutex_unlock(&q->own);
	}
	nkv_msgq_send(q, m, fn);
}

bool nkv_msgq_sleep_begin(struct nkv_msgq *q)
{
	atomic_store_explicit(&q->sleeping, true, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	/* Drained means the stub is both ends; a producer's exchange on head makes it differ, even while
	 * its link is not yet stored. */
	if (q->tail == &q->stub && atomic_load_explicit(&q->head, memory_order_relaxed) == &q->stub)
		return true;
	atomic_store_explicit(&q->sleeping, false, memory_order_relaxed);
	return false;
}

void nkv_msgq_ack(struct nkv_msgq *q)
{
	uint64_t cnt;
	(void)!read(q->efd, &cnt, sizeof(cnt));
}

static struct nkv_msg *pop(struct nkv_msgq *q)
{
	struct nkv_msg *tail = q->tail;
	struct nkv_msg *next = atomic_load_explicit(&tail->next, memory_order_acquire);

	if (tail == &q->stub) {
		if (!next)
			return NULL;
		q->tail = next;
		tail = next;
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next) {
		q->tail = next;
		return tail;
	}
	if (tail != atomic_load_explicit(&q->head, memory_order_acquire))
		return NULL; /* a producer is between its exchange and its link store */
	push(q, &q->stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (next) {
		q->tail = next;
		return tail;
	}
	return NULL;
}

static int drain(struct nkv_msgq *q)
{
	int n = 0;
	struct nkv_msg *m;

	while ((m = pop(q)) != NULL) {
		m->fn(m);
		n++;
	}
	return n;
}

int nkv_msgq_poll(struct nkv_msgq *q, int timeout_ms)
{
	int n = drain(q);

	if (n || timeout_ms == 0)
		return n;
	if (nkv_msgq_sleep_begin(q)) {
		struct pollfd p = {.fd = q->efd, .events = POLLIN};
		int r;
		while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
			;
		nkv_msgq_sleep_end(q);
		if (r > 0)
			nkv_msgq_ack(q);
		else if (r == 0 && !(n = drain(q)))
			return -ETIMEDOUT;
	}
	return n + drain(q);
}
