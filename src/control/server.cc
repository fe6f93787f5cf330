/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.cc - the control plane's gRPC server (ctl.h: nkv_ctl_server_start/stop). Glue only: one
 * generic handler serves every method of rados_nkv.v1.Control. It parses the request message the
 * method's descriptor names, prints it as JSON (original field names, every primitive field),
 * calls nkv_ctl_call(), and parses the JSON it returns into the response message, unknown fields
 * being an error: a C core and a proto that disagree answer INTERNAL with the parse error, never a
 * silently dropped field.
 *
 * Threads: an AsyncGenericService with one completion queue that kNumThreads threads of ours
 * drive. nkv_ctl_call() may block (a commit to RADOS) and runs on those threads, never on grpc's.
 * Each call is a small state machine (struct call): requested -> request read -> finished.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "control/glue.h"

#define NKV_LOG_COMPONENT "control"
extern "C" {
#include "common/log.h"
#include "common/unix_sock.h"
}

namespace {

constexpr int kNumThreads = 2;              /* calls served at once; nkv_ctl_call() serialises anyway */
constexpr unsigned kDefaultMaxMessage = 4u << 20;

struct call;

} // namespace

struct nkv_ctl_server {
	struct nkv_ctl *ctl = nullptr;
	grpc::AsyncGenericService service;
	std::unique_ptr<grpc::ServerCompletionQueue> cq;
	std::unique_ptr<grpc::Server> server;
	std::vector<std::thread> threads;
	std::mutex lock;       /* orders every operation a call starts against the queue's shutdown */
	std::condition_variable idle;
	bool stopping = false; /* under lock: calls start no operation any more */
	int busy = 0;          /* under lock: calls in proceed() (which may start operations) */
	int port = 0;
	std::string addr;
	/* "unix:": our own listening socket; the acceptor checks each peer and hands the connection to
	 * grpc (AddInsecureChannelFromFd). */
	int unix_fd = -1;
	int wake[2] = {-1, -1}; /* the acceptor's stop signal */
	struct stat unix_st {};
	std::string unix_path;
	gid_t peer_gid = (gid_t)-1;
	std::thread acceptor;
};

namespace {

/** One RPC in flight. Its address is the completion-queue tag of each of its steps. */
struct call {
	enum phase {
		REQUESTED, /* waiting for an RPC to arrive */
		READING,   /* reading its request message */
		FINISHING, /* its status (and response) on the way */
	};
	nkv_ctl_server *srv;
	grpc::GenericServerContext ctx;
	grpc::GenericServerAsyncReaderWriter stream{&ctx};
	grpc::ByteBuffer buf;
	phase ph = REQUESTED;

	explicit call(nkv_ctl_server *s) : srv(s) {}

	/** Ask for the next RPC (the server is not stopping: the caller is busy, or starting it). */
	static void request(nkv_ctl_server *s)
	{
		call *c = new call(s);
		s->service.RequestCall(&c->ctx, &c->stream, s->cq.get(), s->cq.get(), c);
	}

	/**
	 * Advance on a completion; @ok: grpc's verdict on the step. Once the server stops, a call
	 * starts no operation (the queue is about to shut down: grpc aborts on an operation started
	 * after that) and is freed, whatever its step: the server cancelled it already.
	 */
	void proceed(bool ok)
	{
		{
			std::lock_guard<std::mutex> g(srv->lock);
			if (srv->stopping) {
				delete this;
				return;
			}
			srv->busy++;
		}
		nkv_ctl_server *s = srv;
		advance(ok); /* may free this */
		std::lock_guard<std::mutex> g(s->lock);
		if (--s->busy == 0)
			s->idle.notify_all();
	}

	void advance(bool ok)
	{
		switch (ph) {
		case REQUESTED:
			if (!ok) { /* the server is shutting down: no RPC came */
				delete this;
				return;
			}
			request(srv);
			ph = READING;
			stream.Read(&buf, this);
			return;
		case READING:
			ph = FINISHING;
			if (!ok) { /* the client went away, or half-closed without a message */
				stream.Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"), this);
				return;
			}
			serve();
			return;
		case FINISHING:
			delete this;
			return;
		}
	}

	/** Run the method and finish the RPC. */
	void serve()
	{
		grpc::ByteBuffer out;
		int err = 0;
		grpc::Status status = handle(&out, &err);
		if (err)
			ctx.AddTrailingMetadata(nkv_glue::kErrnoTrailer, std::to_string(-err));
		if (status.ok())
			stream.WriteAndFinish(out, grpc::WriteOptions(), status, this);
		else
			stream.Finish(status, this);
	}

	grpc::Status handle(grpc::ByteBuffer *out, int *err_out)
	{
		namespace pb = google::protobuf;
		const std::string &path = ctx.method();
		const pb::MethodDescriptor *m = nullptr;
		size_t slash = path.rfind('/');
		if (slash != std::string::npos && slash > 0)
			m = nkv_glue::find_method(path.substr(slash + 1));
		if (!m || nkv_glue::method_path(m) != path)
			return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + path);
		if (m->client_streaming() || m->server_streaming()) /* none today; the glue is unary */
			return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "streaming method " + path);

		pb::MessageFactory *f = pb::MessageFactory::generated_factory();
		std::unique_ptr<pb::Message> req(f->GetPrototype(m->input_type())->New());
		std::unique_ptr<pb::Message> resp(f->GetPrototype(m->output_type())->New());
		{
			grpc::ProtoBufferReader reader(&buf);
			if (!req->ParseFromZeroCopyStream(&reader))
				return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
						    "the request is not a " + m->input_type()->full_name() + " message");
		}
		std::string json;
		pb::util::Status js = pb::util::MessageToJsonString(*req, &json, nkv_glue::print_options());
		if (!js.ok())
			return grpc::Status(grpc::StatusCode::INTERNAL, "request to JSON: " + js.ToString());

		char *resp_json = nullptr, *err_msg = nullptr;
		int rc = nkv_ctl_call(srv->ctl, m->name().c_str(), json.c_str(), &resp_json, &err_msg);
		bool answered = resp_json != nullptr;
		std::string rj = resp_json ? resp_json : "", em = err_msg ? err_msg : "";
		free(resp_json);
		free(err_msg);
		NKV_DEBUG("%s from %s: %d", m->name().c_str(), ctx.peer().c_str(), rc);
		if (rc < 0) {
			*err_out = rc;
			if (em.empty())
				em = strerror(-rc);
			return grpc::Status(nkv_glue::status_of_errno(rc), em);
		}
		if (rc > 0 || !answered) {
			NKV_ERR("%s returned %d%s", m->name().c_str(), rc, answered ? "" : " without a response");
			return grpc::Status(grpc::StatusCode::INTERNAL, m->name() + ": the control core returned no response");
		}
		js = pb::util::JsonStringToMessage(rj, resp.get(), nkv_glue::parse_options());
		if (!js.ok()) {
			/* A bug: the C core and the proto disagree. Say so loudly, on both sides. */
			std::string why = m->name() + ": the control core's response does not match " +
					  m->output_type()->full_name() + ": " + js.ToString();
			NKV_ERR("%s", why.c_str());
			return grpc::Status(grpc::StatusCode::INTERNAL, why);
		}
		std::string wire;
		if (!resp->SerializeToString(&wire))
			return grpc::Status(grpc::StatusCode::INTERNAL, m->name() + ": cannot serialise the response");
		grpc::Slice slice(wire);
		*out = grpc::ByteBuffer(&slice, 1);
		return grpc::Status::OK;
	}
};

void drive(nkv_ctl_server *s)
{
	void *tag;
	bool ok;
	while (s->cq->Next(&tag, &ok))
		static_cast<call *>(tag)->proceed(ok);
}

/*
 * The Unix socket's acceptor: each connection's peer is checked (SO_PEERCRED; the socket file's
 * mode already keeps others out, this holds even if someone opens it up); an allowed one is given to
 * grpc, any other closed at once and logged.
 */
void accept_loop(nkv_ctl_server *s)
{
	struct pollfd p[2] = {{s->unix_fd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			NKV_ERR("control socket %s: poll: %s", s->unix_path.c_str(), strerror(errno));
			return;
		}
		if (p[1].revents)
			return;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(s->unix_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				NKV_WARN("control socket %s: accept: %s", s->unix_path.c_str(), strerror(errno));
			if (errno == EMFILE || errno == ENFILE)
				poll(nullptr, 0, 100); /* out of fds: do not spin */
			continue;
		}
		uid_t uid;
		pid_t pid;
		if (!nkv_peer_allowed(fd, s->peer_gid, &uid, &pid)) {
			NKV_WARN("control socket %s: refused a connection from uid %ld (pid %ld): only this daemon's user (uid %ld), root%s may "
				 "call the control plane", s->unix_path.c_str(), (long)(int)uid, (long)pid, (long)geteuid(),
				 s->peer_gid != (gid_t)-1 ? " and --control-group" : "");
			close(fd);
			continue;
		}
		grpc::AddInsecureChannelFromFd(s->server.get(), fd); /* grpc owns fd now */
	}
}


/* The first certificate of @pem, or nullptr (caller frees). */
X509 *pem_cert(const std::string &pem)
{
	BIO *b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
	X509 *x = b ? PEM_read_bio_X509(b, nullptr, nullptr, nullptr) : nullptr;
	BIO_free(b);
	return x;
}

/**
 * Load and check the TLS files, so a bad one is reported by name and reason here rather than as a
 * port grpc could not add. @return 0 or -EINVAL (logged).
 */
int load_tls(const nkv_ctl_server_conf *conf, grpc::SslServerCredentialsOptions *o)
{
	if (!conf->tls_cert || !conf->tls_key) {
		NKV_ERR("TLS needs both a certificate and its key (%s missing)", conf->tls_cert ? "key" : "certificate");
		return -EINVAL;
	}
	std::string cert, key, ca;
	struct {
		const char *path, *what;
		std::string *out;
	} files[] = {{conf->tls_cert, "certificate", &cert}, {conf->tls_key, "key", &key}, {conf->client_ca, "client CA", &ca}};
	for (auto &f : files) {
		if (!f.path)
			continue;
		int rc = nkv_glue::read_file(f.path, f.out);
		if (rc < 0) {
			NKV_ERR("cannot read the TLS %s %s: %s", f.what, f.path, strerror(-rc));
			return -EINVAL;
		}
	}
	X509 *x = pem_cert(cert);
	BIO *kb = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
	EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr) : nullptr;
	BIO_free(kb);
	X509 *cax = conf->client_ca ? pem_cert(ca) : nullptr;
	int rc = -EINVAL;
	if (!x)
		NKV_ERR("%s holds no PEM certificate", conf->tls_cert);
	else if (!k)
		NKV_ERR("%s holds no PEM private key (or it is encrypted)", conf->tls_key);
	else if (X509_check_private_key(x, k) != 1)
		NKV_ERR("the key %s does not belong to the certificate %s", conf->tls_key, conf->tls_cert);
	else if (conf->client_ca && !cax)
		NKV_ERR("%s holds no PEM CA certificate", conf->client_ca);
	else
		rc = 0;
	ERR_clear_error(); /* the failed PEM reads leave this thread's queue dirty for its next TLS call */
	X509_free(x);
	X509_free(cax);
	EVP_PKEY_free(k);
	if (rc)
		return rc;
	o->pem_key_cert_pairs.push_back({key, cert});
	if (conf->client_ca) {
		o->pem_root_certs = ca;
		o->client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
	} else {
		o->client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
	}
	return 0;
}

/** Split "HOST:PORT" / "[V6]:PORT" (checked) into the host without brackets and the port. */
void split_hostport(const std::string &a, std::string *host, std::string *port)
{
	size_t c = a.rfind(':');
	*host = a.substr(0, c);
	*port = a.substr(c + 1);
	if (!host->empty() && (*host)[0] == '[')
		*host = host->substr(1, host->size() - 2);
}

/** Before grpc binds a TCP address: its host must resolve, its port be free. @return 0, -EADDRINUSE
 * or -EINVAL (logged). */
int bind_errno(const std::string &addr, int *why);

int precheck(const std::string &addr)
{
	std::string host, port;
	split_hostport(addr, &host, &port);
	struct addrinfo hints = {}, *ai = nullptr;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	int g = getaddrinfo(host.c_str(), port.c_str(), &hints, &ai);
	if (g) {
		NKV_ERR("cannot resolve %s: %s", host.c_str(), gai_strerror(g));
		return -EINVAL;
	}
	freeaddrinfo(ai);
	/* A port in use is the caller's to report (the daemon serves on without its default address):
	 * found here, before grpc logs its own error about it. */
	int why = 0;
	if (bind_errno(addr, &why) == -EADDRINUSE && why == EADDRINUSE) {
		NKV_DEBUG("%s is in use", addr.c_str());
		return -EADDRINUSE;
	}
	return 0;
}

/**
 * grpc could not bind the TCP address @addr and does not say why: bind it ourselves (a Unix socket
 * is ours, bound by nkv_unix_listen()). @return -EADDRINUSE, -EACCES or -EINVAL (a non-local
 * address, or a failure that was not the bind), and in
 * *@why what bind(2) said (0: it worked here).
 */
int bind_errno(const std::string &addr, int *why)
{
	*why = 0;
	std::string host, port;
	split_hostport(addr, &host, &port);
	struct addrinfo hints = {}, *ai = nullptr;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if (getaddrinfo(host.c_str(), port.c_str(), &hints, &ai))
		return -EINVAL;
	for (struct addrinfo *p = ai; p && !*why; p = p->ai_next) {
		int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as grpc does */
		if (bind(fd, p->ai_addr, p->ai_addrlen) != 0)
			*why = errno;
		close(fd);
	}
	freeaddrinfo(ai);
	return *why == EADDRINUSE || *why == EACCES ? -*why : -EINVAL;
}

int start(struct nkv_ctl *ctl, const nkv_ctl_server_conf *conf, nkv_ctl_server **out)
{
	char why[256];
	if (!conf || nkv_ctl_addr_check(conf->addr, 1, why, sizeof(why))) {
		NKV_ERR("bad address: %s", conf ? why : "no configuration");
		return -EINVAL;
	}
	if (conf->client_ca && !conf->tls_cert) {
		NKV_ERR("a client CA (mTLS) needs the server's certificate and key (TLS)");
		return -EINVAL;
	}
	nkv_glue::route_grpc_log(NKV_LOG_ORIGIN, NKV_LOG_WARN);
	std::string addr = conf->addr;
	bool is_unix = addr.compare(0, 5, "unix:") == 0;
	if (is_unix && (conf->tls_cert || conf->tls_key)) {
		NKV_ERR("%s: TLS is for TCP addresses (a Unix socket's callers are checked by their user id)", addr.c_str());
		return -EINVAL;
	}
	int rc = is_unix ? 0 : precheck(addr);
	if (rc)
		return rc;

	std::shared_ptr<grpc::ServerCredentials> creds;
	if (conf->tls_cert || conf->tls_key) {
		grpc::SslServerCredentialsOptions o;
		if ((rc = load_tls(conf, &o)))
			return rc;
		creds = grpc::SslServerCredentials(o);
	} else {
		creds = grpc::InsecureServerCredentials();
	}

	std::unique_ptr<nkv_ctl_server> s(new nkv_ctl_server);
	s->ctl = ctl;
	s->addr = addr;
	grpc::ServerBuilder b;
	unsigned max = conf->max_message ? conf->max_message : kDefaultMaxMessage;
	b.SetMaxReceiveMessageSize(max > INT32_MAX ? INT32_MAX : static_cast<int>(max));
	/* grpc sets SO_REUSEPORT by default: a second server on the same port would share it silently */
	b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
	if (is_unix) {
		/* Our own socket, not grpc's: its mode and group are set before its path is visible, and
		 * each peer is checked before grpc sees the connection. */
		s->unix_path = addr.substr(5);
		s->peer_gid = conf->peer_group_set ? (gid_t)conf->peer_gid : (gid_t)-1;
		int fd = nkv_unix_listen(s->unix_path.c_str(), SOCK_STREAM | SOCK_NONBLOCK, 64, 0660, s->peer_gid, &s->unix_st);
		if (fd < 0) {
			NKV_ERR("cannot listen on %s: %s%s", addr.c_str(), strerror(-fd),
				fd == -EADDRINUSE ? " (a server is listening on this socket)"
				: fd == -EEXIST	  ? " (it exists and is not a socket)"
						  : "");
			return fd == -EADDRINUSE || fd == -EEXIST ? -EADDRINUSE : fd == -EPERM || fd == -EACCES ? -EACCES : -EINVAL;
		}
		s->unix_fd = fd;
		if (pipe2(s->wake, O_CLOEXEC) < 0) {
			rc = -errno;
			close(fd);
			nkv_unix_unlink_if(s->unix_path.c_str(), &s->unix_st);
			return rc;
		}
	} else {
		b.AddListeningPort(addr, creds, &s->port);
	}
	b.RegisterAsyncGenericService(&s->service);
	s->cq = b.AddCompletionQueue();
	s->server = b.BuildAndStart();
	if (is_unix && !s->server) {
		NKV_ERR("cannot start the gRPC server on %s (its log says why)", addr.c_str());
		close(s->unix_fd);
		close(s->wake[0]);
		close(s->wake[1]);
		nkv_unix_unlink_if(s->unix_path.c_str(), &s->unix_st);
		return -EINVAL;
	}
	if (!is_unix && (!s->server || s->port == 0)) {
		int why;
		rc = bind_errno(addr, &why);
		NKV_ERR("cannot listen on %s: %s", addr.c_str(), why ? strerror(why) : "grpc refused it (its log says why)");
		/* No call was requested; the queue is destroyed without Shutdown(), which would only
		 * warn that a server (the one BuildAndStart() gave up on) still names it. */
		return rc;
	}
	if (is_unix)
		s->port = 0;
	for (int i = 0; i < kNumThreads; i++)
		call::request(s.get());
	for (int i = 0; i < kNumThreads; i++)
		s->threads.emplace_back(drive, s.get());
	if (is_unix)
		s->acceptor = std::thread(accept_loop, s.get());
	NKV_INFO("gRPC server on %s%s%s", addr.c_str(), conf->tls_cert ? " (TLS" : "",
		 conf->tls_cert ? (conf->client_ca ? ", client certificates required)" : ")") : "");
	*out = s.release();
	return 0;
}

} // namespace

extern "C" {

int nkv_ctl_server_start(struct nkv_ctl *ctl, const struct nkv_ctl_server_conf *conf, struct nkv_ctl_server **out)
{
	*out = nullptr;
	try {
		return start(ctl, conf, out);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (const std::system_error &e) { /* std::thread */
		NKV_ERR("%s", e.what());
		return -ENOMEM;
	}
}

void nkv_ctl_server_stop(struct nkv_ctl_server *srv, int grace_ms)
{
	if (!srv)
		return;
	/* Refuse new calls, let those in flight finish until the deadline, then cancel them (their
	 * clients get CANCELLED at once). A call whose nkv_ctl_call() is still running is waited for:
	 * its thread must be out of proceed() before the queue shuts down. */
	auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms > 0 ? grace_ms : 0);
	if (srv->unix_fd >= 0) { /* no new connections first */
		if (write(srv->wake[1], "x", 1) < 0)
			NKV_WARN("control socket: cannot wake the acceptor: %s", strerror(errno));
		if (srv->acceptor.joinable())
			srv->acceptor.join();
		close(srv->unix_fd);
		close(srv->wake[0]);
		close(srv->wake[1]);
		nkv_unix_unlink_if(srv->unix_path.c_str(), &srv->unix_st);
	}
	srv->server->Shutdown(deadline);
	{
		std::unique_lock<std::mutex> g(srv->lock);
		srv->stopping = true;
		srv->idle.wait(g, [srv] { return srv->busy == 0; });
	}
	srv->cq->Shutdown(); /* always after the server's, and once no call can start an operation */
	for (auto &t : srv->threads)
		t.join();
	NKV_INFO("gRPC server on %s stopped", srv->addr.c_str());
	delete srv;
}

int nkv_ctl_server_port(const struct nkv_ctl_server *srv)
{
	return srv ? srv->port : 0;
}

} // extern "C"
