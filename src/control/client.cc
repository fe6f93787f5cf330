/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.cc - the control plane's gRPC client (ctl.h: nkv_ctl_client_call), for nkv-ctl. Generic
 * like the server: the method's descriptor names its request and response messages, the request
 * JSON is parsed into the first (unknown fields are an error), the call goes out through
 * grpc::GenericStub, and the response is printed back as JSON with the server's options (original
 * field names, every primitive field; 64-bit integers as decimal strings, as proto3's JSON mapping
 * writes them).
 */
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "control/glue.h"

extern "C" {
#include "common/log.h"
}

namespace {

constexpr unsigned kDefaultTimeoutMs = 10000;
constexpr int kMaxResponse = 64 << 20; /* a large group's ListSubsystems stays far below */

int fail(char **err_msg, int rc, const std::string &why)
{
	*err_msg = nkv_glue::dup_cstr(why);
	return rc;
}


/** The channel's credentials from conf's TLS files. @return 0 or -EINVAL (*err_msg set). */
int credentials(const nkv_ctl_client_conf *conf, std::shared_ptr<grpc::ChannelCredentials> *out, char **err_msg)
{
	if (!conf->tls_ca) {
		if (conf->tls_cert || conf->tls_key || conf->tls_server_name)
			return fail(err_msg, -EINVAL, "a client certificate or a server name needs TLS: the CA of the server's certificate");
		*out = grpc::InsecureChannelCredentials();
		return 0;
	}
	if (!conf->tls_cert != !conf->tls_key)
		return fail(err_msg, -EINVAL, "a client certificate needs its key, and a key its certificate");
	grpc::SslCredentialsOptions o;
	struct {
		const char *path, *what;
		std::string *out;
	} files[] = {{conf->tls_ca, "CA", &o.pem_root_certs},
		     {conf->tls_cert, "client certificate", &o.pem_cert_chain},
		     {conf->tls_key, "client key", &o.pem_private_key}};
	for (auto &f : files) {
		if (!f.path)
			continue;
		int rc = nkv_glue::read_file(f.path, f.out);
		if (rc < 0)
			return fail(err_msg, -EINVAL, std::string("cannot read the TLS ") + f.what + " " + f.path + ": " + strerror(-rc));
		if (f.out->find("-----BEGIN ") == std::string::npos)
			return fail(err_msg, -EINVAL, std::string("the TLS ") + f.what + " " + f.path + " is not PEM");
	}
	*out = grpc::SslCredentials(o);
	return 0;
}

/** The errno for a failed call: the server's trailer when it belongs to @st's code, else the table. */
int call_errno(const grpc::ClientContext &ctx, const grpc::Status &st)
{
	auto md = ctx.GetServerTrailingMetadata();
	auto it = md.find(nkv_glue::kErrnoTrailer);
	if (it != md.end()) {
		std::string v(it->second.data(), it->second.size());
		char *end = nullptr;
		long e = strtol(v.c_str(), &end, 10);
		if (!v.empty() && *end == '\0' && e > 0 && e < 4096 &&
		    nkv_glue::status_of_errno(static_cast<int>(-e)) == st.error_code())
			return static_cast<int>(-e);
	}
	return nkv_glue::errno_of_status(st.error_code());
}

int call(const nkv_ctl_client_conf *conf, const char *method, const char *req_json, char **resp_json,
	 char **err_msg, int *code)
{
	namespace pb = google::protobuf;
	char why[256];
	if (!conf || !method)
		return fail(err_msg, -EINVAL, "no configuration or method");
	if (nkv_ctl_addr_check(conf->addr, 0, why, sizeof(why)))
		return fail(err_msg, -EINVAL, why);
	const pb::MethodDescriptor *m = nkv_glue::find_method(method);
	if (!m)
		return fail(err_msg, -ENOSYS, std::string("unknown method ") + method);

	pb::MessageFactory *f = pb::MessageFactory::generated_factory();
	std::unique_ptr<pb::Message> req(f->GetPrototype(m->input_type())->New());
	std::unique_ptr<pb::Message> resp(f->GetPrototype(m->output_type())->New());
	pb::util::Status js =
		pb::util::JsonStringToMessage(req_json && *req_json ? req_json : "{}", req.get(), nkv_glue::parse_options());
	if (!js.ok())
		return fail(err_msg, -EINVAL, "the request does not match " + m->input_type()->full_name() + ": " + js.ToString());

	std::shared_ptr<grpc::ChannelCredentials> creds;
	int rc = credentials(conf, &creds, err_msg);
	if (rc)
		return rc;
	static std::once_flag log_once; /* process-wide handlers: set once, not on every call */
	std::call_once(log_once, [] { nkv_glue::route_grpc_log("nkv-ctl", NKV_LOG_INFO); });
	grpc::ChannelArguments args;
	args.SetMaxReceiveMessageSize(kMaxResponse);
	args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0); /* the control plane is reached directly, never through $http_proxy */
	if (conf->tls_server_name)
		args.SetSslTargetNameOverride(conf->tls_server_name);
	std::shared_ptr<grpc::Channel> ch = grpc::CreateCustomChannel(conf->addr, creds, args);

	std::string wire;
	if (!req->SerializeToString(&wire))
		return fail(err_msg, -EINVAL, "cannot serialise the request");
	grpc::Slice slice(wire);
	grpc::ByteBuffer req_bb(&slice, 1), resp_bb;
	grpc::Status st;

	grpc::ClientContext ctx;
	unsigned ms = conf->timeout_ms ? conf->timeout_ms : kDefaultTimeoutMs;
	ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
	grpc::CompletionQueue cq;
	grpc::GenericStub stub(ch);
	{
		std::unique_ptr<grpc::GenericClientAsyncResponseReader> r =
			stub.PrepareUnaryCall(&ctx, nkv_glue::method_path(m), req_bb, &cq);
		r->StartCall();
		r->Finish(&resp_bb, &st, &cq);
		void *tag;
		bool ok;
		cq.Next(&tag, &ok); /* the only tag; the deadline bounds it */
	}
	cq.Shutdown();
	void *tag;
	bool ok;
	while (cq.Next(&tag, &ok))
		;
	*code = st.error_code();
	if (!st.ok()) {
		rc = call_errno(ctx, st);
		std::string msg = st.error_message();
		return fail(err_msg, rc, msg.empty() ? nkv_ctl_code_name(st.error_code()) : msg);
	}
	{
		grpc::ProtoBufferReader reader(&resp_bb);
		if (!resp->ParseFromZeroCopyStream(&reader))
			return fail(err_msg, -EPROTO, "the response is not a " + m->output_type()->full_name() + " message");
	}
	std::string out;
	js = pb::util::MessageToJsonString(*resp, &out, nkv_glue::print_options());
	if (!js.ok())
		return fail(err_msg, -EPROTO, "response to JSON: " + js.ToString());
	if (!(*resp_json = nkv_glue::dup_cstr(out)))
		return -ENOMEM;
	return 0;
}

} // namespace

extern "C" {

int nkv_ctl_client_call_code(const struct nkv_ctl_client_conf *conf, const char *method, const char *req_json,
			     char **resp_json, char **err_msg, int *code)
{
	*resp_json = nullptr;
	*err_msg = nullptr;
	*code = -1;
	try {
		return call(conf, method, req_json, resp_json, err_msg, code);
	} catch (const std::bad_alloc &) {
		free(*resp_json);
		*resp_json = nullptr;
		return -ENOMEM;
	}
}

int nkv_ctl_client_call(const struct nkv_ctl_client_conf *conf, const char *method, const char *req_json,
			char **resp_json, char **err_msg)
{
	int code;
	return nkv_ctl_client_call_code(conf, method, req_json, resp_json, err_msg, &code);
}

} // extern "C"
