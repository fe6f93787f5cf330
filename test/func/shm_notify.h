/* SPDX-License-Identifier: Apache-2.0 */
/* shm_notify.h - the internals shm_notify.c looks at (shm_notify_in.c, shm_notify_lib.c). */
#ifndef NKV_TEST_SHM_NOTIFY_H
#define NKV_TEST_SHM_NOTIFY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct nkv_shm;
struct nkv_qpair;
struct nkv_ctrl;

/** A poller of the target's shm transport: its thread and notification counters. */
struct sn_poller {
	pthread_t thread;
	uint64_t kicks, irqs, sleeps, late;
};

/** Poller @i of @s. @return 0 or -EINVAL. */
int sn_poller(struct nkv_shm *s, unsigned i, struct sn_poller *out);

/** A libnkv shm queue pair: does its CQ interrupt, how often it slept on it, how often too late. */
struct sn_qpair {
	bool irq;
	uint64_t sleeps, late;
	uint64_t waits, spun; /* waits for a completion; of which spun before arming */
};

void sn_qpair(struct nkv_qpair *qp, struct sn_qpair *out);

/** Did libnkv bind a doorbell kick for @ctrl? */
bool sn_kick_bound(struct nkv_ctrl *ctrl);

#endif
