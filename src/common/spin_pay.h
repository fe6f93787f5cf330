/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spin_pay.h - whether spinning (or polling) for the next event pays: the rule the shared-memory host's
 * CQ wait (src/client/shm.c) and the NVMe/TCP reactor's polling after work (src/reactor/reactor.c)
 * share. A spin costs a core; sleeping costs a wake-up (5-30 us here). Each side folds whether its
 * spins found what they waited for into a moving fraction (weight 1/8) and spins while more than 1 in
 * 16 recent ones did; every 64th chance it spins anyway, so a peer that became fast again is noticed.
 * Against the mem backend nearly every spin pays; against RADOS at QD 1 none does (an op takes
 * hundreds of microseconds), and about 20 misses stop the spinning.
 */
#ifndef NKV_SPIN_PAY_H
#define NKV_SPIN_PAY_H

#include <stdbool.h>
#include <stdint.h>

#define NKV_SPIN_PAY_ONE 65536u /* the fraction's scale: 1.0 */
#define NKV_SPIN_PAY_MIN 16u    /* spin while more than 1 in this many recent spins paid */
#define NKV_SPIN_PAY_PROBE 64u  /* else every this many chances spin anyway */

/** Recent spins that paid, a moving fraction in 1/65536ths. Start at nkv_spin_pay_init(). */
struct nkv_spin_pay {
	uint32_t frac;
};

/** Until spins say otherwise, they pay. */
static inline void nkv_spin_pay_init(struct nkv_spin_pay *p)
{
	p->frac = NKV_SPIN_PAY_ONE;
}

/** A spin ended: @paid when it found the event within its time. */
static inline void nkv_spin_pay_note(struct nkv_spin_pay *p, bool paid)
{
	int32_t d = (paid ? (int32_t)NKV_SPIN_PAY_ONE : 0) - (int32_t)p->frac;
	p->frac = (uint32_t)((int32_t)p->frac + d / 8);
}

/** Whether to spin at the chance numbered @chance (a counter the caller moves once per chance). */
static inline bool nkv_spin_pay_worth(const struct nkv_spin_pay *p, uint64_t chance)
{
	return p->frac > NKV_SPIN_PAY_ONE / NKV_SPIN_PAY_MIN || chance % NKV_SPIN_PAY_PROBE == 0;
}

#endif
