/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spin_pay.h - whether spinning (or polling) for the next event pays: the rule the shared-memory host's
 * CQ wait (src/client/shm.c) and the NVMe/TCP reactor's polling after work (src/reactor/reactor.c)
 * share. A spin costs a core; sleeping costs a wake-up (5-30 us here). Each side folds whether its
 * spins found what they waited for into a moving fraction (weight 1/8) and spins while more than 1 in
 * 16 recent ones did; every 64th chance it spins anyway, so a peer that became fast again is noticed.
 * Against the mem backend nearly every spin pays; against RADOS at QD 1 none does (an op takes
 * hundreds of microseconds), and about 20 misses stop the spinning. struct nkv_spin_window applies
 * the rule to a loop that keeps looking for work for a while after it found some (the NVMe/TCP
 * reactor, the shm poller with hosts that cannot kick it).
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

/** A loop's window of looking on after work: @ns long, opened while windows keep finding work. */
struct nkv_spin_window {
	uint64_t ns;      /* window length */
	uint64_t until;   /* end of the open window; 0: none open */
	uint64_t chances; /* works after which a window could open */
	struct nkv_spin_pay pay;
};

/** A window of @ns, none open yet. */
static inline void nkv_spin_window_init(struct nkv_spin_window *w, uint64_t ns)
{
	*w = (struct nkv_spin_window){.ns = ns};
	nkv_spin_pay_init(&w->pay);
}

/** The loop found work at @now: an open window paid; open the next one if @may_open and it pays. */
static inline void nkv_spin_window_work(struct nkv_spin_window *w, bool may_open, uint64_t now)
{
	if (w->until)
		nkv_spin_pay_note(&w->pay, true);
	w->until = may_open && nkv_spin_pay_worth(&w->pay, ++w->chances) ? now + w->ns : 0;
}

/** The loop found nothing at @now: is a window still open? One that ran out without work did not pay. */
static inline bool nkv_spin_window_open(struct nkv_spin_window *w, uint64_t now)
{
	if (!w->until)
		return false;
	if (now < w->until)
		return true;
	nkv_spin_pay_note(&w->pay, false);
	w->until = 0;
	return false;
}

#endif
