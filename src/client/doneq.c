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
#include "common/log.h"

int nkv_doneq_init(struct nkv_doneq *q)
{
	q->head = q->tail = NULL;
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

void nkv_doneq_push(struct nkv_doneq *q, struct nkv_doneq_node *n)
{
	pthread_mutex_lock(&q->mu);
	n->next = NULL;
	bool was_empty = q->tail == NULL;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	if (was_empty) { /* one write per empty -> non-empty edge: reap drains it when it empties */
		uint64_t one = 1;
		if (write(q->fd, &one, sizeof(one)) < 0)
			NKV_WARN("engine: eventfd write: %s", strerror(errno));
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

int nkv_doneq_reap(struct nkv_doneq *q, uint64_t *tags, unsigned max, int timeout_ms, nkv_doneq_free free_fn)
{
	pthread_mutex_lock(&q->mu);
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
		free_fn(n);
	}
	if (!q->head) {
		uint64_t v;
		if (read(q->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			NKV_WARN("engine: eventfd read: %s", strerror(errno));
	}
	pthread_mutex_unlock(&q->mu);
	return (int)got;
}
