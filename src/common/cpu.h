/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpu.h - a spin-wait hint for busy-polling loops (the shared-memory poller and libnkv's CQ spin).
 *
 * Why: a loop that rereads a cache line the other side writes (a doorbell, a CQ entry) pulls the
 * line away from its writer on every pass; with no pause between passes the writer stalls on its
 * own stores. PAUSE (x86) and YIELD (arm64) space the rereads out and tell a sibling hyperthread
 * it may run.
 */
#ifndef NKV_CPU_H
#define NKV_CPU_H

/** One spin-wait hint: about 40-150 cycles on x86, a compiler barrier at least. */
static inline void nkv_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
