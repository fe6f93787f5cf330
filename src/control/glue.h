/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glue.h - what the control plane's gRPC glue (server.cc, client.cc) adds to the contract of ctl.h:
 * a few C functions for the daemon, nkv-ctl and the tests, and (C++ only) the pieces the server and
 * the client share, defined in glue.cc.
 *
 * The errno <-> status tables are ctl.h's. One refinement: with every error that nkv_ctl_call()
 * returns, the server sends the errno itself in the trailing metadata "nkv-errno", and the client
 * returns that errno when it belongs to the status received (UNAVAILABLE carries -EIO or -ETIMEDOUT
 * from the server; without the trailer, from a server that cannot be reached or another
 * implementation of the API, UNAVAILABLE is -ECONNREFUSED).
 */
#ifndef NKV_CONTROL_GLUE_H
#define NKV_CONTROL_GLUE_H

#include <stddef.h>

#include "control/ctl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The TCP port @srv listens on (the one chosen when its address asked for port 0); 0 for "unix:". */
int nkv_ctl_server_port(const struct nkv_ctl_server *srv);

/**
 * Check a control-plane address: "HOST:PORT" (an IPv4 literal or a name), "[IPV6]:PORT" or
 * "unix:PATH" (at most 107 bytes). @listen: PORT may be 0 (any free port). Nothing is resolved.
 * @return 0, or -EINVAL with the reason in @why (@len bytes, may be 0).
 */
int nkv_ctl_addr_check(const char *addr, int listen, char *why, size_t len);

/**
 * nkv_ctl_client_call() that also returns the gRPC status code in *@code: 0 (OK) and up as grpc
 * numbers them, or -1 when no call was made (bad arguments, an unknown method, a request that does
 * not match its message, an unreadable TLS file).
 */
int nkv_ctl_client_call_code(const struct nkv_ctl_client_conf *conf, const char *method,
			     const char *req_json, char **resp_json, char **err_msg, int *code);

/** The name of gRPC status code @code ("NOT_FOUND"), or "UNKNOWN" for a number grpc does not use. */
const char *nkv_ctl_code_name(int code);

#ifdef __cplusplus
}

#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/support/status.h>

namespace nkv_glue {

/** Trailing metadata of an error: the errno nkv_ctl_call() returned, as a positive decimal. */
constexpr const char kErrnoTrailer[] = "nkv-errno";

/** rados_nkv.v1.Control's method @name ("CreateSubsystem"), or nullptr. */
const google::protobuf::MethodDescriptor *find_method(const std::string &name);

/** "/rados_nkv.v1.Control/<name>": the HTTP/2 path of @m. */
std::string method_path(const google::protobuf::MethodDescriptor *m);

/** The JSON mapping both sides use: original field names, every primitive field printed. */
google::protobuf::util::JsonPrintOptions print_options();
/** Parsing JSON: unknown fields are errors (a mismatch between the C core and the proto is a bug). */
google::protobuf::util::JsonParseOptions parse_options();

/** ctl.h's table: the status for nkv_ctl_call()'s -errno @err. */
grpc::StatusCode status_of_errno(int err);
/** The inverse, for a status without (or with an inconsistent) errno trailer: a negative errno. */
int errno_of_status(grpc::StatusCode code);

/**
 * Send grpc's (and protobuf's) own log lines through the project's log (one format, rate limited) under @origin
 * ("rados-nkv", "nkv-ctl"): its errors at @error_level (the server: warn, e.g. failed TLS
 * handshakes; the client: info, as nkv-ctl reports every failure itself), the rest at debug;
 * protobuf's errors at info.
 * Process-wide; any thread.
 */
void route_grpc_log(const char *origin, int error_level);

/** Read a whole (PEM) file into @out. @return 0 or -errno. */
int read_file(const char *path, std::string *out);

/** A malloc'ed copy of @s (NUL-terminated), or NULL without memory. */
char *dup_cstr(const std::string &s);

} // namespace nkv_glue
#endif
#endif
