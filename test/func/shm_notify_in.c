/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shm_notify_in.c - what shm_notify.c reads inside the target's shm transport and inside libnkv's shm
 * queue pairs (their internal headers cannot meet in one file: both define struct nkv_qpair). Here,
 * the target's side; shm_notify_lib.c has libnkv's.
 */
#include <errno.h>

#include "shm_notify.h"
#include "transport/shm_int.h"

int sn_poller(struct nkv_shm *s, unsigned i, struct sn_poller *out)
{
	if (i >= s->conf.pollers)
		return -EINVAL;
	struct shm_poller *p = &s->pollers[i];
	out->thread = p->thread;
	out->kicks = atomic_load(&p->kicks);
	out->irqs = atomic_load(&p->irqs);
	out->sleeps = atomic_load(&p->sleeps);
	out->late = atomic_load(&p->late);
	return 0;
}
