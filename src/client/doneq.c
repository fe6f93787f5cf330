/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doneq.c - the completed-batch queue of the engines (doneq.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/doneq.h"
#include "common/clock.h"
#include "common/log.h"

int nkv_doneq_init(struct nkv_doneq *q)
{
	q->head = q->tail = NULL;
	q->signalled = false;
	q->queued = 0;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL); /* CLOCK_REALTIME: reap's deadline below */
	q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return q->fd < 0 ? -errno : 0;
}

void nkv_doneq_fini(struct nkv_doneq *q, nkv_doneq_free free_fn)
{
	for (struct nkv_doneq_node *n = q->head, *next; n; n = next) {
		next = n->next;
		free_fn(n);
	}
	q->head = q->tail = NULL;
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
}

/* The done queue whose reap's drive hook runs on this thread: what it queues does not write the
 * eventfd (nkv_doneq_reap takes it before returning). */
static _Thread_local struct nkv_doneq *t_driving;

/** Make the eventfd readable (once: it stays so until reap reads it back). Under mu. */
static void signal_fd(struct nkv_doneq *q)
{
	if (q->signalled)
		return;
	uint64_t one = 1;
	if (write(q->fd, &one, sizeof(one)) < 0)
		NKV_WARN("engine: eventfd write: %s", strerror(errno));
	q->signalled = true;
}

void nkv_doneq_push(struct nkv_doneq *q, struct nkv_doneq_node *n)
{
	pthread_mutex_lock(&q->mu);
	n->next = NULL;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	__atomic_add_fetch(&q->queued, 1, __ATOMIC_RELEASE);
	if (t_driving != q) /* one write per empty -> non-empty edge: reap drains it when it empties */
		signal_fd(q);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

int nkv_doneq_reap(struct nkv_doneq *q, uint64_t *tags, unsigned max, int timeout_ms, nkv_doneq_free free_fn,
		   nkv_doneq_drive drive, void *drive_arg)
{
	pthread_mutex_lock(&q->mu);
	if (!q->head && drive) {
		pthread_mutex_unlock(&q->mu);
		t_driving = q;
		uint64_t t0 = timeout_ms > 0 ? nkv_now_ns() : 0;
		drive(drive_arg, timeout_ms);
		if (timeout_ms > 0) { /* the wait below gets what the drive left of the timeout */
			int64_t left = timeout_ms - (int64_t)((nkv_now_ns() - t0) / 1000000);
			timeout_ms = left > 0 ? (int)left : 0;
		}
		t_driving = NULL;
		pthread_mutex_lock(&q->mu);
	}
	if (!q->head && timeout_ms != 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t ns = (int64_t)ts.tv_nsec + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
		ts.tv_sec += ns / 1000000000;
		ts.tv_nsec = ns % 1000000000;
		while (!q->head) {
			if (timeout_ms < 0)
				pthread_cond_wait(&q->cv, &q->mu);
			else if (pthread_cond_timedwait(&q->cv, &q->mu, &ts) == ETIMEDOUT)
				break;
		}
	}
	unsigned got = 0;
	while (got < max && q->head) {
		struct nkv_doneq_node *n = q->head;
		q->head = n->next;
		if (!q->head)
			q->tail = NULL;
		tags[got++] = n->tag;
		__atomic_sub_fetch(&q->queued, 1, __ATOMIC_RELAXED);
		free_fn(n);
	}
	if (!q->head && q->signalled) {
		uint64_t v;
		if (read(q->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			NKV_WARN("engine: eventfd read: %s", strerror(errno));
		q->signalled = false;
	} else if (q->head) { /* left over, maybe queued by this reaper's drive hook */
		signal_fd(q);
	}
	pthread_mutex_unlock(&q->mu);
	return (int)got;
}

void nkv_doneq_batch_init(struct nkv_doneq_batch *b, bool run, uint64_t tag)
{
	b->run = run;
	b->done = false;
	b->dn.tag = tag;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
}

void nkv_doneq_batch_fini(struct nkv_doneq_batch *b)
{
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
}

void nkv_doneq_batch_finish(struct nkv_doneq *q, struct nkv_doneq_batch *b)
{
	if (!b->run) {
		nkv_doneq_push(q, &b->dn);
		return;
	}
	pthread_mutex_lock(&b->mu);
	b->done = true;
	pthread_cond_signal(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void nkv_doneq_batch_wait(struct nkv_doneq_batch *b)
{
	pthread_mutex_lock(&b->mu);
	while (!b->done)
		pthread_cond_wait(&b->cv, &b->mu);
	pthread_mutex_unlock(&b->mu);
}
