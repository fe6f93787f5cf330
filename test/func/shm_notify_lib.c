/* SPDX-License-Identifier: Apache-2.0 */
/* shm_notify_lib.c - what shm_notify.c reads inside libnkv's shm queue pairs (see shm_notify_in.c). */
#include "client/shm_int.h"
#include "shm_notify.h"

void sn_qpair(struct nkv_qpair *qp, struct sn_qpair *out)
{
	struct nkv_shm_qp *s = qp->shm;
	out->irq = s->irq_fd >= 0;
	out->sleeps = s->irq_sleeps;
	out->late = s->irq_late;
	out->waits = s->waits;
	out->spun = s->spun;
}

bool sn_kick_bound(struct nkv_ctrl *ctrl)
{
	return ctrl->shm->wakeup != NULL;
}
