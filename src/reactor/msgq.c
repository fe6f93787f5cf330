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
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return q->efd < 0 ? -errno : 0;
}

void nkv_msgq_fini(struct nkv_msgq *q)
{
	if (q->efd >= 0)
		close(q->efd);
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
	/* Written after the link is published, so a consumer woken by it finds the message (or finds a
	 * producer mid-push in pop() and is woken again by that producer's own write). */
	while (write(q->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
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
	uint64_t cnt;
	int n = 0;
	struct nkv_msg *m;

	/* Reset the counter first: a send racing with the drain below re-arms it. */
	(void)!read(q->efd, &cnt, sizeof(cnt));
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
	struct pollfd p = {.fd = q->efd, .events = POLLIN};
	int r;
	while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -ETIMEDOUT;
	return drain(q);
}
