/* SPDX-License-Identifier: Apache-2.0 */
/* clock.h - monotonic time, shared by the target and the client library. */
#ifndef NKV_CLOCK_H
#define NKV_CLOCK_H

#include <stdint.h>
#include <time.h>

/** Milliseconds on CLOCK_MONOTONIC. */
static inline uint64_t nkv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/** Milliseconds since the Unix epoch (CLOCK_REALTIME): cache expiry times, shared by the gateways
 *  of a namespace (whose clocks NTP keeps together). */
static inline uint64_t nkv_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/**
 * Nanoseconds on CLOCK_MONOTONIC: command latencies (the target's metrics). A vDSO call, no system
 * call where the clock source is the TSC; CLOCK_MONOTONIC_COARSE would be cheaper but moves in
 * 1-4 ms steps, far coarser than a command.
 */
static inline uint64_t nkv_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * The CLOCK_MONOTONIC time @ms from now, as pthread_cond_timedwait() wants it (the condition
 * variable must be created with pthread_condattr_setclock(CLOCK_MONOTONIC): wall-clock jumps must
 * not stretch or cut a wait).
 */
static inline struct timespec nkv_abstime_in_ms(uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
