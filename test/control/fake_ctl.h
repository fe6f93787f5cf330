/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_ctl.h - a fake nkv_ctl_call() for the control plane's glue tests: it records what reaches it
 * (method, request JSON, the ctl pointer) and answers what the test set: a response JSON, or an
 * errno with a message, optionally after a delay. Thread-safe.
 */
#ifndef NKV_TEST_FAKE_CTL_H
#define NKV_TEST_FAKE_CTL_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nkv_ctl;

/** Answer every following call with @rc (0 or -errno), @resp (rc 0; NULL: none) or @err (rc < 0; NULL: none). */
void fake_answer(int rc, const char *resp, const char *err);
/** Make the next call (only it) sleep @ms before answering. */
void fake_delay_next(int ms);
/** Calls that entered / returned since the start. */
unsigned fake_entered(void);
unsigned fake_returned(void);
/** Wait until fake_entered() reaches @n; @return false after @timeout_ms. */
bool fake_wait_entered(unsigned n, int timeout_ms);
/** Wait until fake_returned() reaches @n; @return false after @timeout_ms. */
bool fake_wait_returned(unsigned n, int timeout_ms);
/** The last call's method, request JSON and ctl pointer ("" / NULL before any call). Copies: the
 *  strings stay valid until the next fake_last_*() of the same kind. */
const char *fake_last_method(void);
const char *fake_last_req(void);
struct nkv_ctl *fake_last_ctl(void);

#ifdef __cplusplus
}
#endif
#endif
