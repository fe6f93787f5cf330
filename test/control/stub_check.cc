/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stub_check.cc - the part of glue_test that needs C++ (grpc's generated code):
 *   - the generated rados_nkv::v1::Control::Stub against the glue's generic server: typed requests
 *     arrive as the JSON the C core expects, typed responses carry what the C core answered, and an
 *     error carries its status, message and nkv-errno trailer; raw calls through grpc::GenericStub
 *     to unknown methods (UNIMPLEMENTED) and with bytes that are no message (INVALID_ARGUMENT)
 *     never reach nkv_ctl_call();
 *   - the glue's client against a generated Control service (another implementation of the API,
 *     without the nkv-errno trailer): the status table alone decides the errno, and a trailer that
 *     does not belong to the status is ignored.
 */
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "rados_nkv/v1/control.grpc.pb.h"

extern "C" {
#include "check.h"
}
#include "fake_ctl.h"
#include "glue_test.h"

namespace v1 = rados_nkv::v1;

namespace {

std::string trailer(const grpc::ClientContext &ctx)
{
	auto md = ctx.GetServerTrailingMetadata();
	auto it = md.find("nkv-errno");
	return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

grpc::Status raw_call(grpc::GenericStub *stub, const std::string &path, const std::string &bytes)
{
	grpc::CompletionQueue cq;
	grpc::ClientContext ctx;
	ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
	grpc::Slice s(bytes);
	grpc::ByteBuffer req(&s, 1), resp;
	grpc::Status st;
	{
		auto r = stub->PrepareUnaryCall(&ctx, path, req, &cq);
		r->StartCall();
		r->Finish(&resp, &st, &cq);
		void *tag;
		bool ok;
		cq.Next(&tag, &ok);
	}
	cq.Shutdown();
	void *tag;
	bool ok;
	while (cq.Next(&tag, &ok))
		;
	return st;
}

/* A second implementation of the API: GetSubsystem answers by the NQN it is given. */
class Foreign final : public v1::Control::Service {
	grpc::Status GetSubsystem(grpc::ServerContext *ctx, const v1::GetSubsystemRequest *req, v1::Subsystem *resp) override
	{
		const std::string &n = req->nqn();
		if (n == "ok") {
			resp->set_nqn("ok");
			resp->set_pool("p");
			return grpc::Status::OK;
		}
		if (n == "mismatch") { /* an errno that is no NOT_FOUND: ignored */
			ctx->AddTrailingMetadata("nkv-errno", "5");
			return grpc::Status(grpc::StatusCode::NOT_FOUND, "nope");
		}
		if (n == "garbage") {
			ctx->AddTrailingMetadata("nkv-errno", "x2");
			return grpc::Status(grpc::StatusCode::NOT_FOUND, "nope");
		}
		static const struct {
			const char *nqn;
			grpc::StatusCode code;
		} t[] = {
			{"notfound", grpc::StatusCode::NOT_FOUND}, {"unavailable", grpc::StatusCode::UNAVAILABLE},
			{"internal", grpc::StatusCode::INTERNAL},  {"perm", grpc::StatusCode::PERMISSION_DENIED},
			{"unauth", grpc::StatusCode::UNAUTHENTICATED}, {"aborted", grpc::StatusCode::ABORTED},
			{"unknown", grpc::StatusCode::UNKNOWN},	   {"range", grpc::StatusCode::OUT_OF_RANGE},
		};
		for (auto &e : t)
			if (n == e.nqn)
				return grpc::Status(e.code, "foreign " + n);
		return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "?");
	}
};

} // namespace

extern "C" void stub_checks(const char *addr)
{
	auto ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
	auto stub = v1::Control::NewStub(ch);

	char *resp = jq("{'nqn':'nqn.2026-11.io.rados-nkv:s','pool':'kv','max_namespaces':3,'allow_any_host':true,"
			"'hosts':['h1','h2'],'namespaces':[{'nqn':'nqn.2026-11.io.rados-nkv:s','nsid':1,"
			"'rados_namespace':'t','max_value':'67108864','read_only':true,'nguid':'00'}],"
			"'serial_number':'sn','shm_socket':''}");
	fake_answer(0, resp, nullptr);
	free(resp);
	{
		grpc::ClientContext ctx;
		v1::CreateSubsystemRequest req;
		req.set_nqn("nqn.2026-11.io.rados-nkv:s");
		req.set_pool("kv");
		req.set_max_namespaces(3);
		v1::Subsystem out;
		grpc::Status st = stub->CreateSubsystem(&ctx, req, &out);
		CHECK(st.ok(), "stub CreateSubsystem: %d %s", st.error_code(), st.error_message().c_str());
		char *want = jq("{'nqn':'nqn.2026-11.io.rados-nkv:s','pool':'kv','max_namespaces':3,"
				"'allow_any_host':false,'shm_socket':'','vfio_user_socket':'','vfio_user_host':''}");
		CHECK(strcmp(fake_last_method(), "CreateSubsystem") == 0 && strcmp(fake_last_req(), want) == 0,
		      "stub CreateSubsystem reached nkv_ctl_call as %s %s", fake_last_method(), fake_last_req());
		free(want);
		CHECK(out.nqn() == "nqn.2026-11.io.rados-nkv:s" && out.pool() == "kv" && out.max_namespaces() == 3 &&
			      out.allow_any_host() && out.hosts_size() == 2 && out.hosts(1) == "h2" &&
			      out.namespaces_size() == 1 && out.namespaces(0).max_value() == 67108864u &&
			      out.namespaces(0).read_only() && out.serial_number() == "sn",
		      "stub CreateSubsystem response: %s", out.ShortDebugString().c_str());
	}
	fake_answer(0, "{\"bytes_read\":\"18446744073709551615\",\"nsid\":4294967295}", nullptr);
	{
		grpc::ClientContext ctx;
		v1::GetNamespaceStatsRequest req;
		req.set_nqn("n");
		req.set_nsid(4294967295u);
		v1::NamespaceStats out;
		grpc::Status st = stub->GetNamespaceStats(&ctx, req, &out);
		CHECK(st.ok() && out.bytes_read() == UINT64_MAX && out.nsid() == 4294967295u,
		      "stub GetNamespaceStats: %d %s", st.error_code(), out.ShortDebugString().c_str());
		CHECK(strcmp(fake_last_req(), "{\"nqn\":\"n\",\"nsid\":4294967295}") == 0, "stub stats request %s",
		      fake_last_req());
	}
	fake_answer(-ENOENT, nullptr, "no subsystem nqn.x");
	{
		grpc::ClientContext ctx;
		v1::DeleteSubsystemRequest req;
		req.set_nqn("nqn.x");
		v1::DeleteSubsystemResponse out;
		grpc::Status st = stub->DeleteSubsystem(&ctx, req, &out);
		CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND && st.error_message() == "no subsystem nqn.x" &&
			      trailer(ctx) == "2",
		      "stub error: %d '%s' trailer '%s'", st.error_code(), st.error_message().c_str(), trailer(ctx).c_str());
	}
	fake_answer(-EIO, nullptr, "cluster unreachable");
	{
		grpc::ClientContext ctx;
		v1::ListSubsystemsResponse out;
		grpc::Status st = stub->ListSubsystems(&ctx, v1::ListSubsystemsRequest(), &out);
		CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE && trailer(ctx) == "5", "stub -EIO: %d trailer '%s'",
		      st.error_code(), trailer(ctx).c_str());
	}

	grpc::GenericStub g(ch);
	unsigned before = fake_entered();
	fake_answer(0, "{}", nullptr);
	grpc::Status st = raw_call(&g, "/rados_nkv.v1.Control/NoSuchMethod", "");
	CHECK(st.error_code() == grpc::StatusCode::UNIMPLEMENTED, "unknown method: %d %s", st.error_code(),
	      st.error_message().c_str());
	st = raw_call(&g, "/other.v1.Control/GetSubsystem", "");
	CHECK(st.error_code() == grpc::StatusCode::UNIMPLEMENTED, "another service: %d", st.error_code());
	st = raw_call(&g, "/rados_nkv.v1.Control/GetSubsystem/x", "");
	CHECK(st.error_code() == grpc::StatusCode::UNIMPLEMENTED, "a longer path: %d", st.error_code());
	st = raw_call(&g, "/rados_nkv.v1.Control/GetSubsystem", std::string("\xff\xff\xff", 3));
	CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT, "bytes that are no message: %d %s",
	      st.error_code(), st.error_message().c_str());
	st = raw_call(&g, "/rados_nkv.v1.Control/GetSubsystem", std::string("\x0a\x05\xc3\x28xyz", 7));
	CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT, "a string field that is not UTF-8: %d %s",
	      st.error_code(), st.error_message().c_str());
	CHECK(fake_entered() == before, "refused raw calls reached nkv_ctl_call (%u)", fake_entered() - before);
	st = raw_call(&g, "/rados_nkv.v1.Control/GetSubsystem", std::string("\x0a\x01x", 3));
	CHECK(st.ok() && fake_entered() == before + 1 && strcmp(fake_last_req(), "{\"nqn\":\"x\"}") == 0,
	      "a raw GetSubsystem: %d %s", st.error_code(), fake_last_req());
}

extern "C" void foreign_server_checks(void)
{
	Foreign svc;
	grpc::ServerBuilder b;
	int port = 0;
	b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
	b.RegisterService(&svc);
	std::unique_ptr<grpc::Server> srv = b.BuildAndStart();
	CHECK(srv && port > 0, "a generated Control service");
	if (!srv)
		return;
	std::string addr = "127.0.0.1:" + std::to_string(port);
	struct nkv_ctl_client_conf cc = {};
	cc.addr = addr.c_str();
	static const struct {
		const char *nqn;
		int rc, code;
	} t[] = {
		{"notfound", -ENOENT, 5}, {"unavailable", -ECONNREFUSED, 14}, {"internal", -EPROTO, 13},
		{"perm", -EACCES, 7},	  {"unauth", -EACCES, 16},	     {"aborted", -EAGAIN, 10},
		{"unknown", -EPROTO, 2},  {"range", -ERANGE, 11},	     {"mismatch", -ENOENT, 5},
		{"garbage", -ENOENT, 5},
	};
	for (auto &e : t) {
		std::string req = std::string("{\"nqn\":\"") + e.nqn + "\"}";
		struct res r;
		do_call(&cc, "GetSubsystem", req.c_str(), &r);
		CHECK(r.rc == e.rc && r.code == e.code && r.err && strstr(r.err, e.nqn[0] == 'm' || e.nqn[0] == 'g' ? "nope" : e.nqn),
		      "foreign %s: rc %d code %d '%s'", e.nqn, r.rc, r.code, r.err ? r.err : "");
		res_free(&r);
	}
	struct res r;
	do_call(&cc, "GetSubsystem", "{\"nqn\":\"ok\"}", &r);
	CHECK(r.rc == 0 && r.resp &&
		      strcmp(r.resp, "{\"nqn\":\"ok\",\"pool\":\"p\",\"max_namespaces\":0,\"allow_any_host\":false,"
				     "\"hosts\":[],\"namespaces\":[],\"serial_number\":\"\",\"shm_socket\":\"\","
				     "\"loopback_any_host\":false,\"vfio_user_socket\":\"\",\"vfio_user_host\":\"\"}") == 0,
	      "foreign ok: %d %s", r.rc, r.resp ? r.resp : r.err);
	res_free(&r);
	do_call(&cc, "ListHosts", "{}", &r); /* not implemented by that service */
	CHECK(r.rc == -ENOSYS && r.code == 12, "foreign unimplemented method: %d %d", r.rc, r.code);
	res_free(&r);
	srv->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}
