/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_stager.c - the RADOS_NKV backend's stager thread.
 *
 * A write's value is header + payload in one buffer, so its payload is copied into staging before
 * the Store goes out (nixl_stage.c). That copy runs at memory speed (about 1 s for 1 GiB) and
 * freeing a staging buffer over shm is a round trip to the target: done on the thread that calls
 * postXfer they stall a serving engine's scheduler. So posting a write only queues it here; this
 * thread copies it, submits it to the engine, and frees the staging buffers given back. The caller
 * keeps its local bytes unchanged until the transfer completes, as NIXL requires of every backend.
 *
 * Writes are staged one at a time in post order, so the engine sees them in that order.
 */
#include <errno.h>

#include "nixl_int.h"

static void *stager_main(void *arg)
{
	struct nkv_nixl *b = arg;
	for (;;) {
		pthread_mutex_lock(&b->sq_lock);
		while (!b->sq_stop && (b->sq_hold || (!b->sq && !b->sq_kick)))
			pthread_cond_wait(&b->sq_cv, &b->sq_lock);
		struct nkv_nixl_req *r = b->sq;
		if (!r && b->sq_stop) {
			pthread_mutex_unlock(&b->sq_lock);
			return NULL;
		}
		if (r) {
			b->sq = r->q_next;
			if (!b->sq)
				b->sq_tail = NULL;
			r->q_next = NULL;
		}
		b->sq_kick = false;
		pthread_mutex_unlock(&b->sq_lock);
		nixl_stage_reclaim(b);
		if (r) {
			nixl_stage_and_submit(b, r);
			pthread_mutex_lock(&b->sq_lock);
			b->sq_staged++;
			pthread_mutex_unlock(&b->sq_lock);
		}
	}
}

int nixl_stager_start(struct nkv_nixl *b)
{
	pthread_mutex_init(&b->sq_lock, NULL);
	pthread_cond_init(&b->sq_cv, NULL);
	int rc = pthread_create(&b->stager, NULL, stager_main, b);
	if (rc) {
		pthread_cond_destroy(&b->sq_cv);
		pthread_mutex_destroy(&b->sq_lock);
		return -rc;
	}
	b->stager_up = true;
	return 0;
}

void nixl_stager_stop(struct nkv_nixl *b)
{
	if (!b->stager_up)
		return;
	pthread_mutex_lock(&b->sq_lock);
	b->sq_stop = true;
	pthread_cond_signal(&b->sq_cv);
	pthread_mutex_unlock(&b->sq_lock);
	pthread_join(b->stager, NULL);
	b->stager_up = false;
	pthread_cond_destroy(&b->sq_cv);
	pthread_mutex_destroy(&b->sq_lock);
}

void nixl_stager_push(struct nkv_nixl *b, struct nkv_nixl_req *r)
{
	pthread_mutex_lock(&b->sq_lock);
	r->q_next = NULL;
	if (b->sq_tail)
		b->sq_tail->q_next = r;
	else
		b->sq = r;
	b->sq_tail = r;
	pthread_cond_signal(&b->sq_cv);
	pthread_mutex_unlock(&b->sq_lock);
}

void nixl_stager_kick(struct nkv_nixl *b)
{
	pthread_mutex_lock(&b->stage_lock);
	bool dead = b->stage_dead != NULL;
	pthread_mutex_unlock(&b->stage_lock);
	if (!dead)
		return;
	pthread_mutex_lock(&b->sq_lock);
	b->sq_kick = true;
	pthread_cond_signal(&b->sq_cv);
	pthread_mutex_unlock(&b->sq_lock);
}

unsigned long nixl_stager_hold(struct nkv_nixl *b, bool hold)
{
	pthread_mutex_lock(&b->sq_lock);
	b->sq_hold = hold;
	unsigned long n = b->sq_staged;
	pthread_cond_signal(&b->sq_cv);
	pthread_mutex_unlock(&b->sq_lock);
	return n;
}
