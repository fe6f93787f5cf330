/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados_nkv_plugin.cpp - the RADOS_NKV NIXL storage backend: a thin C++20 adapter from NIXL's
 * nixlBackendEngine (backend API version 1) to the C table in ../c/nkv_nixl.h, where all the logic
 * lives and is tested. Every method converts its arguments and calls one nkv_nixl_* function.
 *
 * Built only against a NIXL (-DNIXL_PREFIX=<its meson install>, or -DNIXL_SOURCE_DIR and -DNIXL_LIB_DIR
 * for a wheel: integrations/nixl/CMakeLists.txt): NIXL does not check a plugin's ABI when it loads
 * it, so it must be built against the very NIXL it is loaded into.
 */
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "backend/backend_plugin.h"
#include "nkv_nixl.h"

#ifndef RADOS_NKV_PLUGIN_VERSION
#define RADOS_NKV_PLUGIN_VERSION "0.0.0"
#endif

// The C table returns NIXL's own values; a NIXL that renumbers them must fail to build this.
#define SAME(a, b) (static_cast<int>(a) == static_cast<int>(b))
static_assert(SAME(NKV_NIXL_SUCCESS, NIXL_SUCCESS) && SAME(NKV_NIXL_IN_PROG, NIXL_IN_PROG) &&
	      SAME(NKV_NIXL_ERR_NOT_POSTED, NIXL_ERR_NOT_POSTED) &&
	      SAME(NKV_NIXL_ERR_INVALID_PARAM, NIXL_ERR_INVALID_PARAM) && SAME(NKV_NIXL_ERR_BACKEND, NIXL_ERR_BACKEND) &&
	      SAME(NKV_NIXL_ERR_NOT_FOUND, NIXL_ERR_NOT_FOUND) && SAME(NKV_NIXL_ERR_MISMATCH, NIXL_ERR_MISMATCH) &&
	      SAME(NKV_NIXL_ERR_NOT_ALLOWED, NIXL_ERR_NOT_ALLOWED) &&
	      SAME(NKV_NIXL_ERR_REPOST_ACTIVE, NIXL_ERR_REPOST_ACTIVE) && SAME(NKV_NIXL_ERR_UNKNOWN, NIXL_ERR_UNKNOWN) &&
	      SAME(NKV_NIXL_ERR_NOT_SUPPORTED, NIXL_ERR_NOT_SUPPORTED) &&
	      SAME(NKV_NIXL_ERR_REMOTE_DISCONNECT, NIXL_ERR_REMOTE_DISCONNECT) &&
	      SAME(NKV_NIXL_ERR_CANCELED, NIXL_ERR_CANCELED));
static_assert(SAME(NKV_NIXL_DRAM_SEG, DRAM_SEG) && SAME(NKV_NIXL_VRAM_SEG, VRAM_SEG) &&
	      SAME(NKV_NIXL_BLK_SEG, BLK_SEG) && SAME(NKV_NIXL_OBJ_SEG, OBJ_SEG) && SAME(NKV_NIXL_FILE_SEG, FILE_SEG));
static_assert(SAME(NKV_NIXL_READ, NIXL_READ) && SAME(NKV_NIXL_WRITE, NIXL_WRITE));
#undef SAME

namespace {

nixl_status_t st(int s)
{
	return static_cast<nixl_status_t>(s);
}

class radosNkvMD : public nixlBackendMD {
public:
	explicit radosNkvMD(nkv_nixl_md *m) : nixlBackendMD(true), md(m) {}
	nkv_nixl_md *md;
};

class radosNkvReqH : public nixlBackendReqH {
public:
	explicit radosNkvReqH(nkv_nixl_req *r) : req(r) {}
	nkv_nixl_req *req;
};

// Copy a NIXL descriptor list into the C table's plain descriptors.
std::vector<nkv_nixl_desc> descs(const nixl_meta_dlist_t &l)
{
	std::vector<nkv_nixl_desc> v(static_cast<size_t>(l.descCount()));
	for (size_t i = 0; i < v.size(); i++)
		v[i] = {static_cast<uint64_t>(l[i].addr), static_cast<uint64_t>(l[i].len), l[i].devId};
	return v;
}

class nixlRadosNkvEngine : public nixlBackendEngine {
public:
	explicit nixlRadosNkvEngine(const nixlBackendInitParams *init) : nixlBackendEngine(init)
	{
		std::vector<nkv_nixl_param> p;
		if (init->customParams)
			for (const auto &[k, v] : *init->customParams)
				p.push_back({k.c_str(), v.c_str()});
		char err[512] = "";
		if (nkv_nixl_create(p.data(), p.size(), &b_, err, sizeof(err)) != NKV_NIXL_SUCCESS) {
			std::fprintf(stderr, "RADOS_NKV: %s\n", err);
			initErr = true;
		}
	}
	~nixlRadosNkvEngine() override { nkv_nixl_destroy(b_); }

	bool supportsRemote() const override { return false; }
	bool supportsLocal() const override { return true; }
	bool supportsNotif() const override { return false; }
	nixl_mem_list_t getSupportedMems() const override { return {DRAM_SEG, OBJ_SEG}; }

	nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem, nixlBackendMD *&out) override
	{
		nkv_nixl_md *m = nullptr;
		int s = nkv_nixl_register(b_, nixl_mem, mem.addr, mem.len, mem.devId, mem.metaInfo.data(),
					  mem.metaInfo.size(), &m);
		if (s != NKV_NIXL_SUCCESS)
			return st(s);
		out = new (std::nothrow) radosNkvMD(m);
		if (!out) {
			nkv_nixl_deregister(b_, m);
			return NIXL_ERR_BACKEND;
		}
		return NIXL_SUCCESS;
	}

	nixl_status_t deregisterMem(nixlBackendMD *meta) override
	{
		auto *m = static_cast<radosNkvMD *>(meta);
		if (!m)
			return NIXL_SUCCESS;
		int s = nkv_nixl_deregister(b_, m->md);
		if (s == NKV_NIXL_SUCCESS)
			delete m;
		return st(s);
	}

	nixl_status_t connect(const std::string &) override { return NIXL_SUCCESS; }
	nixl_status_t disconnect(const std::string &) override { return NIXL_SUCCESS; }
	nixl_status_t unloadMD(nixlBackendMD *) override { return NIXL_SUCCESS; }
	nixl_status_t loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) override
	{
		output = input;
		return NIXL_SUCCESS;
	}

	nixl_status_t prepXfer(const nixl_xfer_op_t &op, const nixl_meta_dlist_t &local,
			       const nixl_meta_dlist_t &remote, const std::string &, nixlBackendReqH *&handle,
			       const nixl_opt_b_args_t *) const override
	{
		if (local.descCount() != remote.descCount())
			return NIXL_ERR_MISMATCH;
		std::vector<nkv_nixl_desc> l = descs(local), r = descs(remote);
		nkv_nixl_req *req = nullptr;
		int s = nkv_nixl_prep(b_, op, local.getType(), l.data(), remote.getType(), r.data(), l.size(), &req);
		if (s != NKV_NIXL_SUCCESS)
			return st(s);
		handle = new (std::nothrow) radosNkvReqH(req);
		if (!handle) {
			nkv_nixl_release(b_, req);
			return NIXL_ERR_BACKEND;
		}
		return NIXL_SUCCESS;
	}

	// The descriptors were fixed at prepXfer; a second post of a finished handle reposts them.
	nixl_status_t postXfer(const nixl_xfer_op_t &, const nixl_meta_dlist_t &, const nixl_meta_dlist_t &,
			       const std::string &, nixlBackendReqH *&handle, const nixl_opt_b_args_t *) const override
	{
		if (!handle)
			return NIXL_ERR_INVALID_PARAM;
		return st(nkv_nixl_post(b_, static_cast<radosNkvReqH *>(handle)->req));
	}

	nixl_status_t checkXfer(nixlBackendReqH *handle) const override
	{
		if (!handle)
			return NIXL_ERR_INVALID_PARAM;
		return st(nkv_nixl_check(b_, static_cast<radosNkvReqH *>(handle)->req));
	}

	nixl_status_t releaseReqH(nixlBackendReqH *handle) const override
	{
		auto *h = static_cast<radosNkvReqH *>(handle);
		if (!h)
			return NIXL_ERR_INVALID_PARAM;
		nkv_nixl_release(b_, h->req); // never blocks: an in-flight request is detached
		delete h;
		return NIXL_SUCCESS;
	}

	nixl_status_t queryMem(const nixl_reg_dlist_t &d, std::vector<nixl_query_resp_t> &resp) const override
	{
		size_t n = static_cast<size_t>(d.descCount());
		std::vector<const char *> names(n);
		std::vector<size_t> lens(n);
		std::vector<nkv_nixl_qresp> q(n);
		for (size_t i = 0; i < n; i++) {
			names[i] = d[i].metaInfo.data();
			lens[i] = d[i].metaInfo.size();
		}
		resp.assign(n, std::nullopt);
		int s = nkv_nixl_query(b_, names.data(), lens.data(), n, q.data());
		if (s != NKV_NIXL_SUCCESS)
			return st(s);
		for (size_t i = 0; i < n; i++)
			if (q[i].present)
				resp[i] = nixl_b_params_t{{"size", std::to_string(q[i].size)}};
		return NIXL_SUCCESS;
	}

private:
	nkv_nixl *b_ = nullptr;
};

// The keys the backend reads, advertised with empty values: an empty value counts as not given,
// so a framework passing these back unchanged still gets the environment and the defaults.
const nixl_b_params_t kOptions = {{"traddr", ""},  {"port", ""},    {"subnqn", ""},      {"shm", ""},
				  {"hostnqn", ""}, {"nsid", ""},    {"queues", ""},      {"queue_depth", ""},
				  {"timeout_ms", ""}, {"max_ops", ""}, {"staging_mb", ""},
				  {"reconnect_max_ms", ""}, {"reconnect_wait_ms", ""}, {"paths", ""}};

// The plugin record, filled by hand rather than by nixlBackendPluginCreator: that template logs
// through NIXL's logging macros, which in NIXL are Abseil's (plugin/compat/common/nixl_log.h).
nixlBackendEngine *create_engine(const nixlBackendInitParams *init)
{
	try {
		return new nixlRadosNkvEngine(init);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "RADOS_NKV: %s\n", e.what());
		return nullptr;
	}
}

void destroy_engine(nixlBackendEngine *e)
{
	delete e;
}

const char *plugin_name()
{
	return "RADOS_NKV";
}

const char *plugin_version()
{
	return RADOS_NKV_PLUGIN_VERSION;
}

nixl_b_params_t plugin_options()
{
	return kOptions;
}

nixl_mem_list_t plugin_mems()
{
	return {DRAM_SEG, OBJ_SEG};
}

nixlBackendPlugin g_plugin = {NIXL_PLUGIN_API_VERSION, create_engine, destroy_engine, plugin_name,
			      plugin_version,          plugin_options, plugin_mems};

} // namespace

extern "C" NIXL_PLUGIN_EXPORT nixlBackendPlugin *nixl_plugin_init()
{
	return &g_plugin;
}

extern "C" NIXL_PLUGIN_EXPORT void nixl_plugin_fini() {}
