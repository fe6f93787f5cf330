/* clock.h - monotonic milliseconds, shared by the target and the client library. */
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

#endif
