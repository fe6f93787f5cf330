/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_ctl.c - libFuzzer target over the control plane's JSON core, nkv_ctl_call() (src/control/ctl.c):
 * what every gRPC request becomes once the glue has printed it as JSON, and what a caller of the
 * control socket fully controls.
 *
 * Input: calls separated by '\n'. Each call: one byte choosing the method (its value modulo the
 * number of methods + 1; the last is a name no method has), then the request's JSON text (not
 * necessarily an object, or JSON at all). Each input runs on a fresh target (mem backend) and a
 * fresh control plane (state in memory, shm sockets confined to a directory that does not exist),
 * so that one input's calls build on each other (a subsystem, then its namespaces) and inputs
 * stay independent.
 *
 * Checked: nothing crashes or leaks (ASan/LeakSanitizer); every call returns 0 with a response that
 * is a JSON object and no message, or a negative errno with a message and no response (ctl.h's
 * contract); no listener or shm socket is opened (the hooks only count).
 * NKV_FUZZ_LOG=1: the log at debug level and each call's answer on stderr.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/log.h"
#include "control/ctl.h"
#include "nkv/nkv_target.h"

static const char *const g_methods[] = {
	"CreateSubsystem", "DeleteSubsystem", "ListSubsystems", "GetSubsystem", "AddNamespace",
	"RemoveNamespace", "ListNamespaces", "SetNamespaceReadOnly", "SetNamespaceMaxValue", "GetNamespaceStats",
	"SetCachePolicy", "GetUsage", "AllowHost", "DisallowHost", "ListHosts",
	"ListConnections", "AddListener", "RemoveListener", "ListListeners", "GetGatewayInfo", "CheckState", "RepairState",
	"NoSuchMethod",
};
#define NMETHODS (sizeof(g_methods) / sizeof(g_methods[0]))

static const char *EMPTY = "{\"epoch\":0,\"subsystems\":{},\"listeners\":{}}";

static int hk_listen(void *arg, const char *addr, unsigned port, bool tls)
{
	(void)arg, (void)addr, (void)tls;
	return (int)port;
}
static int hk_unlisten(void *arg, const char *addr, unsigned port)
{
	(void)arg, (void)addr, (void)port;
	return 0;
}
static int hk_shm(void *arg, const char *nqn, const char *path)
{
	(void)arg, (void)nqn, (void)path;
	return -EINVAL; /* never made: the fuzzer must not create files */
}

static void one_call(struct nkv_ctl *ctl, const uint8_t *rec, size_t len)
{
	if (!len)
		return;
	const char *method = g_methods[rec[0] % NMETHODS];
	char *req = malloc(len), *resp = NULL, *err = NULL;
	if (!req)
		return;
	memcpy(req, rec + 1, len - 1);
	req[len - 1] = '\0'; /* an embedded NUL ends the text early, as a C string would */
	int rc = nkv_ctl_call(ctl, method, req, &resp, &err);
	if (getenv("NKV_FUZZ_LOG")) /* corpus work: what each call answered */
		fprintf(stderr, "%s %s -> %d %s\n", method, req, rc, rc ? err : resp);
	if (rc == 0) {
		json_object *o = resp ? json_tokener_parse(resp) : NULL;
		if (!o || !json_object_is_type(o, json_type_object) || err) {
			fprintf(stderr, "%s %s: rc 0 with response '%s' and message '%s'\n", method, req, resp ? resp : "(none)",
				err ? err : "(none)");
			abort();
		}
		json_object_put(o);
	} else if (rc > 0 || resp || !err) {
		fprintf(stderr, "%s %s: rc %d with response '%s' and message '%s'\n", method, req, rc, resp ? resp : "(none)",
			err ? err : "(none)");
		abort();
	}
	free(resp);
	free(err);
	free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool once;
	if (!once) {
		once = true;
		nkv_log_set_level(getenv("NKV_FUZZ_LOG") ? NKV_LOG_DEBUG : NKV_LOG_ERROR);
	}
	struct nkv_backend_conf bc = {.name = "mem"};
	struct nkv_target *tgt = NULL;
	if (nkv_target_create(&bc, &tgt) < 0)
		abort();
	struct nkv_ctl_conf cc = {.tgt = tgt,
				  .hooks = {.tcp_listen = hk_listen, .tcp_unlisten = hk_unlisten, .shm_listen = hk_shm},
				  .gateway = "gw-fuzz",
				  .backend = "mem",
				  .version = "fuzz",
				  .drain_ms = 100,
				  .shm_dir = "/nonexistent-nkv-fuzz"};
	struct nkv_ctl *ctl = NULL;
	if (nkv_ctl_create(&cc, EMPTY, &ctl) < 0)
		abort();
	for (size_t off = 0, n = 0; off < size && n < 64; n++) {
		const uint8_t *nl = memchr(data + off, '\n', size - off);
		size_t len = nl ? (size_t)(nl - (data + off)) : size - off;
		one_call(ctl, data + off, len);
		off += len + 1;
	}
	nkv_ctl_destroy(ctl);
	nkv_target_destroy(tgt);
	return 0;
}
