/* SPDX-License-Identifier: Apache-2.0 */
/* check.h - the CHECK macro of the functional tests: count a pass, or print the failure and count it. */
#ifndef NKV_TEST_CHECK_H
#define NKV_TEST_CHECK_H

#include <stdio.h>

extern unsigned h_pass, h_fail;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			h_pass++;                                                                  \
		} else {                                                                           \
			h_fail++;                                                                  \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

#endif
