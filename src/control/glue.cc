/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glue.cc - what the control plane's gRPC server and client share (glue.h): the service's
 * descriptor, the JSON options, the errno <-> status tables and the address check.
 */
#include <arpa/inet.h>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <atomic>

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include "control/glue.h"
#include "rados_nkv/v1/control.pb.h"

extern "C" {
#include "common/log.h"
}

namespace nkv_glue {

namespace {

const google::protobuf::ServiceDescriptor *service()
{
	/* Naming a generated message keeps control.pb.o in the link (the glue is a static library) and
	 * gets the file whose descriptor registered the service. */
	static const google::protobuf::ServiceDescriptor *s =
		rados_nkv::v1::GatewayInfo::descriptor()->file()->FindServiceByName("Control");
	return s;
}

std::atomic<const char *> g_log_origin{"rados-nkv"};
std::atomic<int> g_log_error_level{NKV_LOG_WARN};

void grpc_log(gpr_log_func_args *a)
{
	enum nkv_log_level lvl = a->severity == GPR_LOG_SEVERITY_ERROR ? static_cast<enum nkv_log_level>(g_log_error_level.load())
								       : NKV_LOG_DEBUG;
	if (nkv_log_enabled(lvl))
		nkv_log_at(g_log_origin.load(), "grpc", a->file, lvl, "%s:%d: %s", a->file, a->line, a->message);
}

/* protobuf's own lines (a string field that is not UTF-8 in a request...): a client's doing */
void protobuf_log(google::protobuf::LogLevel level, const char *file, int line, const std::string &msg)
{
	enum nkv_log_level lvl = level >= google::protobuf::LOGLEVEL_ERROR ? NKV_LOG_INFO : NKV_LOG_DEBUG;
	if (nkv_log_enabled(lvl))
		nkv_log_at(g_log_origin.load(), "protobuf", file, lvl, "%s(%d): %s", file, line, msg.c_str());
}

} // namespace

void route_grpc_log(const char *origin, int error_level)
{
	g_log_origin.store(origin);
	g_log_error_level.store(error_level);
	gpr_set_log_function(grpc_log);
	google::protobuf::SetLogHandler(protobuf_log);
}

const google::protobuf::MethodDescriptor *find_method(const std::string &name)
{
	const google::protobuf::ServiceDescriptor *s = service();
	return s ? s->FindMethodByName(name) : nullptr;
}

std::string method_path(const google::protobuf::MethodDescriptor *m)
{
	return "/" + m->service()->full_name() + "/" + m->name();
}

google::protobuf::util::JsonPrintOptions print_options()
{
	google::protobuf::util::JsonPrintOptions o;
	o.preserve_proto_field_names = true;
	o.always_print_primitive_fields = true;
	return o;
}

google::protobuf::util::JsonParseOptions parse_options()
{
	google::protobuf::util::JsonParseOptions o;
	o.ignore_unknown_fields = false;
	return o;
}

grpc::StatusCode status_of_errno(int err)
{
	switch (-err) {
	case ENOENT:
		return grpc::StatusCode::NOT_FOUND;
	case EEXIST:
		return grpc::StatusCode::ALREADY_EXISTS;
	case EINVAL:
		return grpc::StatusCode::INVALID_ARGUMENT;
	case EPERM:
		return grpc::StatusCode::FAILED_PRECONDITION;
	case EAGAIN:
		return grpc::StatusCode::ABORTED;
	case EIO:
	case ETIMEDOUT:
		return grpc::StatusCode::UNAVAILABLE;
	case ENOSYS:
		return grpc::StatusCode::UNIMPLEMENTED;
	default:
		return grpc::StatusCode::INTERNAL;
	}
}

int errno_of_status(grpc::StatusCode code)
{
	switch (code) {
	case grpc::StatusCode::OK:
		return 0;
	case grpc::StatusCode::NOT_FOUND:
		return -ENOENT;
	case grpc::StatusCode::ALREADY_EXISTS:
		return -EEXIST;
	case grpc::StatusCode::INVALID_ARGUMENT:
		return -EINVAL;
	case grpc::StatusCode::FAILED_PRECONDITION:
		return -EPERM;
	case grpc::StatusCode::ABORTED:
		return -EAGAIN;
	case grpc::StatusCode::UNAVAILABLE:
		return -ECONNREFUSED;
	case grpc::StatusCode::DEADLINE_EXCEEDED:
		return -ETIMEDOUT;
	case grpc::StatusCode::UNAUTHENTICATED:
	case grpc::StatusCode::PERMISSION_DENIED:
		return -EACCES;
	case grpc::StatusCode::UNIMPLEMENTED:
		return -ENOSYS;
	case grpc::StatusCode::CANCELLED:
		return -ECANCELED;
	case grpc::StatusCode::RESOURCE_EXHAUSTED: /* a message over the receiver's limit */
		return -EMSGSIZE;
	case grpc::StatusCode::OUT_OF_RANGE:
		return -ERANGE;
	default: /* INTERNAL, UNKNOWN, DATA_LOSS */
		return -EPROTO;
	}
}

char *dup_cstr(const std::string &s)
{
	char *p = static_cast<char *>(malloc(s.size() + 1));
	if (p)
		memcpy(p, s.c_str(), s.size() + 1);
	return p;
}

int read_file(const char *path, std::string *out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	char b[4096];
	size_t n;
	while ((n = fread(b, 1, sizeof(b), f)) > 0)
		out->append(b, n);
	int rc = ferror(f) ? -EIO : 0;
	fclose(f);
	return rc;
}

} // namespace nkv_glue

extern "C" {

const char *nkv_ctl_code_name(int code)
{
	static const char *const names[] = {
		"OK",		  "CANCELLED",		 "UNKNOWN",	 "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
		"NOT_FOUND",	  "ALREADY_EXISTS",	 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION", "ABORTED",	 "OUT_OF_RANGE", "UNIMPLEMENTED",    "INTERNAL",
		"UNAVAILABLE",	  "DATA_LOSS",		 "UNAUTHENTICATED",
	};
	if (code < 0 || code >= static_cast<int>(sizeof(names) / sizeof(names[0])))
		return "UNKNOWN";
	return names[code];
}

static int addr_bad(char *why, size_t len, const char *fmt, const char *arg)
{
	if (len)
		snprintf(why, len, fmt, arg);
	return -EINVAL;
}

int nkv_ctl_addr_check(const char *addr, int listen, char *why, size_t len)
{
	if (!addr || !*addr)
		return addr_bad(why, len, "%sno address", "");
	if (strncmp(addr, "unix:", 5) == 0) {
		size_t n = strlen(addr + 5);
		if (n == 0)
			return addr_bad(why, len, "'%s': no socket path after unix:", addr);
		if (n > 107) /* sizeof(sun_path) - 1 */
			return addr_bad(why, len, "'%s': a Unix socket path has at most 107 bytes", addr);
		return 0;
	}
	const char *colon = strrchr(addr, ':');
	if (!colon)
		return addr_bad(why, len, "'%s': want HOST:PORT, [IPV6]:PORT or unix:PATH", addr);
	std::string host(addr, static_cast<size_t>(colon - addr));
	const char *port = colon + 1;
	if (host.empty())
		return addr_bad(why, len, "'%s': no host before the port (0.0.0.0 or [::] for every address)", addr);
	if (host[0] == '[') {
		unsigned char a6[16];
		if (host.size() < 3 || host.back() != ']' ||
		    inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), a6) != 1)
			return addr_bad(why, len, "'%s': not an IPv6 address in brackets", addr);
	} else {
		if (host.find(':') != std::string::npos)
			return addr_bad(why, len, "'%s': an IPv6 address goes in brackets: [::1]:5500", addr);
		for (char ch : host)
			if (!(isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_'))
				return addr_bad(why, len, "'%s': the host is not an IPv4 address or a name", addr);
	}
	unsigned long v = 0;
	size_t nd = strlen(port);
	if (nd == 0 || nd > 5 || strspn(port, "0123456789") != nd || (v = strtoul(port, nullptr, 10)) > 65535)
		return addr_bad(why, len, "'%s': the port is a number, 1 to 65535", addr);
	if (v == 0 && !listen)
		return addr_bad(why, len, "'%s': port 0 (a server's 'any port') cannot be called", addr);
	return 0;
}

} // extern "C"
