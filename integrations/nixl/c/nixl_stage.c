/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nixl_stage.c - staging buffers of the RADOS_NKV backend's writes (header + payload in one value).
 *
 * A write copies its payload once, into a staging buffer, on the stager thread after it is posted
 * (nixl_stager.c). The buffers come from
 * nkv_buf_alloc(): over shared memory they are registered with the controller, so the Store leaves
 * from them with no second copy through the bounce area; over TCP they are plain memory. Allocating
 * and registering one per write would cost a memfd, a registration round trip and the page faults
 * of fresh memory every time, so finished ones are kept for reuse: up to STAGE_KEEP buffers and
 * opts.staging_mb MiB (0: none kept).
 *
 * Buffers are given back under req_lock (a completing write, a released request), where freeing
 * one over shm would be a deregistration round trip to the target: nixl_stage_put() never frees.
 * One that is not kept goes on a list, linked through its own first bytes, and is freed by the
 * stager's next nixl_stage_reclaim() (never on a caller's thread) or at destroy.
 */
#include <stdlib.h>

#include "nixl_int.h"

#define STAGE_ALIGN (64u << 10) /* sizes are rounded up to this, so near sizes share buffers */

/* A buffer waiting to be freed; it lives in the buffer's own first bytes (STAGE_ALIGN >= its size). */
struct stage_dead {
	struct stage_dead *next;
	size_t cap;
	bool lib;
};

void *nixl_stage_get(struct nkv_nixl *b, size_t size, size_t *cap, bool *lib)
{
	size_t best = NKV_NIXL_STAGE_KEEP;
	nixl_stage_reclaim(b);
	pthread_mutex_lock(&b->stage_lock);
	for (size_t i = 0; i < b->nstage; i++)
		if (b->stage[i].cap >= size && (best == NKV_NIXL_STAGE_KEEP || b->stage[i].cap < b->stage[best].cap))
			best = i;
	if (best != NKV_NIXL_STAGE_KEEP) {
		struct nixl_stage s = b->stage[best];
		b->stage[best] = b->stage[--b->nstage];
		b->stage_bytes -= s.cap;
		pthread_mutex_unlock(&b->stage_lock);
		*cap = s.cap;
		*lib = s.lib;
		return s.p;
	}
	pthread_mutex_unlock(&b->stage_lock);
	size_t c = (size + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
	if (!c)
		c = STAGE_ALIGN;
	void *p = b->mp ? NULL : nkv_buf_alloc(b->ctrl, c); /* several controllers: plain memory */
	*lib = p != NULL;
	if (!p) /* the controller's registration limits: plain memory, through the bounce area */
		p = malloc(c);
	*cap = c;
	return p;
}

void nixl_stage_put(struct nkv_nixl *b, void *p, size_t cap, bool lib)
{
	if (!p)
		return;
	pthread_mutex_lock(&b->stage_lock);
	if (b->nstage < NKV_NIXL_STAGE_KEEP && b->stage_bytes + cap <= (size_t)b->o.staging_mb << 20) {
		b->stage[b->nstage++] = (struct nixl_stage){p, cap, lib};
		b->stage_bytes += cap;
	} else {
		struct stage_dead *d = p;
		*d = (struct stage_dead){b->stage_dead, cap, lib};
		b->stage_dead = d;
	}
	pthread_mutex_unlock(&b->stage_lock);
}

void nixl_stage_reclaim(struct nkv_nixl *b)
{
	pthread_mutex_lock(&b->stage_lock);
	struct stage_dead *d = b->stage_dead;
	b->stage_dead = NULL;
	pthread_mutex_unlock(&b->stage_lock);
	while (d) {
		struct stage_dead *next = d->next;
		if (d->lib)
			nkv_buf_free(b->ctrl, d);
		else
			free(d);
		d = next;
	}
}

void nixl_stage_drain(struct nkv_nixl *b)
{
	nixl_stage_reclaim(b);
	pthread_mutex_lock(&b->stage_lock);
	for (size_t i = 0; i < b->nstage; i++) {
		if (b->stage[i].lib)
			nkv_buf_free(b->ctrl, b->stage[i].p);
		else
			free(b->stage[i].p);
	}
	b->nstage = 0;
	b->stage_bytes = 0;
	pthread_mutex_unlock(&b->stage_lock);
}
