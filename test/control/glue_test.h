/* SPDX-License-Identifier: Apache-2.0 */
/* glue_test.h - what glue_test.c shares with its C++ part, stub_check.cc. */
#ifndef NKV_TEST_GLUE_TEST_H
#define NKV_TEST_GLUE_TEST_H

#include "control/glue.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One client call's outcome (nkv_ctl_client_call_code) and how long it took. */
struct res {
	int rc, code;
	char *resp, *err;
	long ms;
};

extern struct nkv_ctl *const g_cookie; /* the ctl pointer every test server is started with */

long now_ms(void);
/** A malloc'ed copy of @s with ' turned into " (JSON written readably in C strings). */
char *jq(const char *s);
void do_call(const struct nkv_ctl_client_conf *c, const char *method, const char *req, struct res *r);
void res_free(struct res *r);

/** stub_check.cc: the generated Control::Stub and grpc::GenericStub against the glue's server at @addr. */
void stub_checks(const char *addr);
/** stub_check.cc: nkv_ctl_client_call against a generated Control service that sends no nkv-errno. */
void foreign_server_checks(void);

#ifdef __cplusplus
}
#endif
#endif
