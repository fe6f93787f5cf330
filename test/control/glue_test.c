/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glue_test.c - the control plane's gRPC glue (src/control/server.cc, client.cc) over real gRPC
 * connections on 127.0.0.1 (port 0), [::1] where it exists, and Unix sockets, against the fake
 * nkv_ctl_call() of fake_ctl.c:
 *   - every RPC of the proto (checked against the proto file's list) reaches nkv_ctl_call() with
 *     its method name and the exact JSON (original field names, every field, uint64 as a decimal
 *     string); every response round-trips; the C core's non-canonical JSON comes back canonical;
 *   - every errno maps to its status and back through the client (with and without the nkv-errno
 *     trailer); a response with unknown or mistyped fields, bad JSON or none is INTERNAL;
 *   - bad requests are refused by the client before any call; the server's message size limit;
 *   - TLS: plaintext against TLS and back fail, a wrong CA fails, server name override, mTLS without
 *     a client certificate and with one from another CA refused, with the right one accepted; TLS
 *     files that are missing, not PEM or mismatched are -EINVAL at start;
 *   - addresses: in use (-EADDRINUSE: a second server, a foreign socket, a live Unix socket that is
 *     not taken over), bad (-EINVAL), a stale Unix socket reused;
 *   - client timeout, nothing listening, 8 threads at once, a stop with a call in flight (within
 *     and past the grace), and calls after a stop;
 *   - a generated stub (C++, stub_check.cc) against the generic server, and the client against a
 *     generated service that sends no trailer.
 *
 *   glue_test PROTO_FILE MKCERTS_SCRIPT
 *
 * Every check counts; the last line is "N passed, N failed"; exit 0 when none failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "control/glue.h"
#include "fake_ctl.h"
#include "glue_test.h"

unsigned h_pass, h_fail;
struct nkv_ctl *const g_cookie = (struct nkv_ctl *)(uintptr_t)0x5eed;
static char g_dir[80];  /* temporary directory: certificates, sockets */

#define NQN "nqn.2026-11.io.rados-nkv:ctl"
#define HOST1 "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555"

long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

char *jq(const char *s)
{
	char *d = strdup(s);
	for (char *p = d; *p; p++)
		if (*p == '\'')
			*p = '"';
	return d;
}

void res_free(struct res *r)
{
	free(r->resp);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

void do_call(const struct nkv_ctl_client_conf *c, const char *method, const char *req, struct res *r)
{
	long t0 = now_ms();
	r->rc = nkv_ctl_client_call_code(c, method, req, &r->resp, &r->err, &r->code);
	r->ms = now_ms() - t0;
}

static struct nkv_ctl_server *start_plain(const char *addr, char *bound, size_t len)
{
	struct nkv_ctl_server_conf sc = {.addr = addr};
	struct nkv_ctl_server *s = NULL;
	int rc = nkv_ctl_server_start(g_cookie, &sc, &s);
	CHECK(rc == 0 && s, "start %s: %d", addr, rc);
	if (s && bound)
		snprintf(bound, len, "127.0.0.1:%d", nkv_ctl_server_port(s));
	return s;
}

static const char *cert(const char *name)
{
	static char buf[8][256];
	static unsigned n;
	char *b = buf[n++ % 8];
	snprintf(b, 256, "%s/%s", g_dir, name);
	return b;
}

/* ---- every RPC ----------------------------------------------------------------------------- */

struct rpc_case {
	const char *method;
	const char *req;  /* what the client passes ('' quotes) */
	const char *seen; /* what nkv_ctl_call() must get, exactly */
	const char *resp; /* the fake's answer, canonical: the client must return it unchanged */
};

/* CreateSubsystem's vfio-user fields, empty */
#define F ",'vfio_user_socket':'','vfio_user_host':''"
#define NS1                                                                                                  \
	"{'nqn':'" NQN "','nsid':1,'rados_namespace':'tenant-a','max_value':'67108864','read_only':false,"   \
	"'nguid':'0123456789abcdef0123456789abcdef','ana_group':1}"
#define NS2                                                                                                  \
	"{'nqn':'" NQN "','nsid':2,'rados_namespace':'tenant-b','max_value':'18446744073709551615',"          \
	"'read_only':true,'nguid':'fedcba9876543210fedcba9876543210','ana_group':2}"
#define SUB                                                                                                  \
	"{'nqn':'" NQN "','pool':'kv','max_namespaces':16,'allow_any_host':false,'hosts':['" HOST1 "'],"     \
	"'namespaces':[" NS1 "," NS2 "],'serial_number':'5e7a1c0ffee','shm_socket':'/run/kv.sock',"    \
	"'loopback_any_host':false,'vfio_user_socket':'/run/kv/cntrl','vfio_user_host':'" HOST1 "'}"
#define SUB_EMPTY                                                                                            \
	"{'nqn':'nqn.2026-11.io.rados-nkv:b','pool':'other','max_namespaces':0,'allow_any_host':true,"       \
	"'hosts':[],'namespaces':[],'serial_number':'','shm_socket':'','loopback_any_host':false,"        \
	"'vfio_user_socket':'','vfio_user_host':''}"
#define HOST_OBJ "{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap':true,'dhchap_bidirectional':false}"
#define LST1 "{'gateway':'gw-a','address':'10.0.0.1','port':4420,'tls':false,'active':true}"
#define LST2 "{'gateway':'gw-b','address':'fd00::2','port':4421,'tls':true,'active':false}"
#define CONN1                                                                                                \
	"{'nqn':'" NQN "','host_nqn':'" HOST1 "','cntlid':7,'io_queues':4,'transport':'tcp',"                \
	"'authenticated':true}"
#define CONN2                                                                                                \
	"{'nqn':'" NQN "','host_nqn':'" HOST1 "','cntlid':8,'io_queues':1,'transport':'shm',"                \
	"'authenticated':false}"

#define POL                                                                                                  \
	"{'capacity_bytes':'67108864','capacity_keys':'0','pin_quota_bytes':'1048576','default_ttl_s':60,"      \
	"'max_ttl_s':3600,'bytes_per_token':'131072','eviction':'fifo','low_watermark_pct':90,'overshoot_pct':10," \
	"'touch_interval_ms':10000,'reap_interval_s':10,'reap_rate':2000,'lease_ms':10000}"
#define POL0                                                                                                 \
	"{'capacity_bytes':'0','capacity_keys':'0','pin_quota_bytes':'0','default_ttl_s':0,'max_ttl_s':0,"     \
	"'bytes_per_token':'0','eviction':'','low_watermark_pct':0,'overshoot_pct':0,'touch_interval_ms':0,"    \
	"'reap_interval_s':0,'reap_rate':0,'lease_ms':0}"
#define NS3                                                                                                  \
	"{'nqn':'" NQN "','nsid':3,'rados_namespace':'cache','max_value':'67108864','read_only':false,"      \
	"'nguid':'00112233445566778899aabbccddeeff','cache':" POL ",'ana_group':1}"
#define USAGE                                                                                                \
	"{'nqn':'" NQN "','nsid':3,'gateway':'gw-a','policy':" POL ",'used_bytes':'50331648','keys':'700',"    \
	"'pinned_bytes':'1048576','pinned_keys':'2','evictions':'12','evicted_bytes':'12582912',"               \
	"'expirations':'5','expired_bytes':'4096','byte_hours':1536.25,'token_hours':0.01171875,"              \
	"'capacity_bytes':'67108864','capacity_keys':'0','evicting':true,'gateways':2}"

static const struct rpc_case g_rpcs[] = {
	{"CreateSubsystem", "{'nqn':'" NQN "','pool':'kv'}",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':0,'allow_any_host':false,'shm_socket':''" F "}", SUB},
	{"CreateSubsystem",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':16,'allow_any_host':true,'shm_socket':'/run/kv.sock'}",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':16,'allow_any_host':true,'shm_socket':'/run/kv.sock'" F "}",
	 SUB_EMPTY},
	{"CreateSubsystem",
	 "{'nqn':'" NQN "','pool':'kv','vfio_user_socket':'/run/kv/cntrl','vfio_user_host':'" HOST1 "'}",
	 "{'nqn':'" NQN "','pool':'kv','max_namespaces':0,'allow_any_host':false,'shm_socket':'',"
	 "'vfio_user_socket':'/run/kv/cntrl','vfio_user_host':'" HOST1 "'}",
	 SUB},
	{"DeleteSubsystem", "{'nqn':'" NQN "'}", "{'nqn':'" NQN "'}", "{}"},
	{"ListSubsystems", "{}", "{}", "{'subsystems':[" SUB "," SUB_EMPTY "]}"},
	{"ListSubsystems", "", "{}", "{'subsystems':[]}"},
	{"GetSubsystem", "{'nqn':'" NQN "'}", "{'nqn':'" NQN "'}", SUB},
	{"AddNamespace", "{'nqn':'" NQN "','rados_namespace':'tenant-a','max_value':67108864}",
	 "{'nqn':'" NQN "','nsid':0,'rados_namespace':'tenant-a','max_value':'67108864','read_only':false,'ana_group':0}",
	 NS1},
	{"AddNamespace", "{'nqn':'" NQN "','nsid':2,'max_value':'18446744073709551615','read_only':true}",
	 "{'nqn':'" NQN "','nsid':2,'rados_namespace':'','max_value':'18446744073709551615','read_only':true,"
	 "'ana_group':0}", NS2},
	/* a cache namespace: the policy's presence (even empty) is kept; every field reaches the core */
	{"AddNamespace", "{'nqn':'" NQN "','nsid':3,'rados_namespace':'cache','cache':{}}",
	 "{'nqn':'" NQN "','nsid':3,'rados_namespace':'cache','max_value':'0','read_only':false,'cache':" POL0
	 ",'ana_group':0}", NS3},
	{"AddNamespace",
	 "{'nqn':'" NQN "','nsid':3,'cache':{'capacity_bytes':67108864,'pin_quota_bytes':'1048576','default_ttl_s':60,"
	 "'max_ttl_s':3600,'bytes_per_token':131072,'eviction':'fifo','low_watermark_pct':90,'overshoot_pct':10,"
	 "'touch_interval_ms':10000,'reap_interval_s':10,'reap_rate':2000,'lease_ms':10000}}",
	 "{'nqn':'" NQN "','nsid':3,'rados_namespace':'','max_value':'0','read_only':false,'cache':" POL
	 ",'ana_group':0}", NS3},
	{"SetCachePolicy", "{'nqn':'" NQN "','nsid':3,'policy':{'capacity_bytes':'67108864'},'fields':['capacity_bytes']}",
	 "{'nqn':'" NQN "','nsid':3,'policy':{'capacity_bytes':'67108864','capacity_keys':'0','pin_quota_bytes':'0',"
	 "'default_ttl_s':0,'max_ttl_s':0,'bytes_per_token':'0','eviction':'','low_watermark_pct':0,'overshoot_pct':0,"
	 "'touch_interval_ms':0,'reap_interval_s':0,'reap_rate':0,'lease_ms':0},'fields':['capacity_bytes']}", NS3},
	{"SetCachePolicy", "{'nqn':'" NQN "','nsid':3}", "{'nqn':'" NQN "','nsid':3,'fields':[]}", NS3},
	{"GetUsage", "{'nqn':'" NQN "','nsid':3}", "{'nqn':'" NQN "','nsid':3}", "{'namespaces':[" USAGE "]}"},
	{"GetUsage", "{'nqn':'" NQN "'}", "{'nqn':'" NQN "','nsid':0}", "{'namespaces':[]}"},
	{"RemoveNamespace", "{'nqn':'" NQN "','nsid':4294967294}", "{'nqn':'" NQN "','nsid':4294967294}", "{}"},
	{"ListNamespaces", "{'nqn':'" NQN "'}", "{'nqn':'" NQN "'}", "{'namespaces':[" NS1 "," NS2 "]}"},
	{"SetNamespaceReadOnly", "{'nqn':'" NQN "','nsid':2,'read_only':true}",
	 "{'nqn':'" NQN "','nsid':2,'read_only':true}", NS2},
	{"SetNamespaceReadOnly", "{'nqn':'" NQN "','nsid':1}", "{'nqn':'" NQN "','nsid':1,'read_only':false}", NS1},
	{"SetNamespaceMaxValue", "{'nqn':'" NQN "','nsid':1,'max_value':'1048576'}",
	 "{'nqn':'" NQN "','nsid':1,'max_value':'1048576'}", NS1},
	{"GetNamespaceStats", "{'nqn':'" NQN "','nsid':1}", "{'nqn':'" NQN "','nsid':1}",
	 "{'nqn':'" NQN "','nsid':1,'gateway':'gw-a','stores':'1','retrieves':'2','deletes':'3','exists':'4',"
	 "'lists':'5','bytes_written':'6','bytes_read':'18446744073709551615','errors':'8','in_flight':'9',"
	 "'used_bytes':'4096'}"},
	{"AllowHost", "{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap_key':'DHHC-1:00:abc:'}",
	 "{'nqn':'" NQN "','host_nqn':'" HOST1 "','dhchap_key':'DHHC-1:00:abc:','dhchap_ctrl_key':''}", HOST_OBJ},
	{"DisallowHost", "{'nqn':'" NQN "','host_nqn':'" HOST1 "'}", "{'nqn':'" NQN "','host_nqn':'" HOST1 "'}",
	 "{'disconnected':2}"},
	{"ListHosts", "{'nqn':'" NQN "'}", "{'nqn':'" NQN "'}", "{'hosts':[" HOST_OBJ "]}"},
	{"ListConnections", "{}", "{'nqn':''}", "{'connections':[" CONN1 "," CONN2 "]}"},
	{"AddListener", "{'address':'10.0.0.1','port':4420}",
	 "{'gateway':'','address':'10.0.0.1','port':4420,'tls':false}", LST1},
	{"RemoveListener", "{'gateway':'gw-b','address':'fd00::2','port':4421}",
	 "{'gateway':'gw-b','address':'fd00::2','port':4421}", "{}"},
	{"ListListeners", "{}", "{'gateway':''}", "{'listeners':[" LST1 "," LST2 "]}"},
	{"GetGatewayInfo", "{}", "{}",
	 "{'name':'gw-a','version':'0.1.0','group':'g1','epoch':'42','uptime_s':'3600','backend':'rados',"
	 "'listeners':[" LST1 "],'connections':[" CONN1 "],'state_store':'rados:kv/rados-nkv.state',"
	 "'cntlid_min':2041,'cntlid_max':4080}"},
	{"CheckState", "{}", "{}",
	 "{'state_store':'rados:kv/rados_nkv.group.g1','epoch':'5','applied_epoch':'4','malformed':1,"
	 "'malformed_entries':[{'key':'s/nqn.bad\\\\x00','reason':'the value is not a JSON object'}]}"},
	/* a namespace in ANA group 2 on gateway A; "" is the answering gateway */
	{"AddNamespace", "{'nqn':'" NQN "','nsid':5,'ana_group':2}",
	 "{'nqn':'" NQN "','nsid':5,'rados_namespace':'','max_value':'0','read_only':false,'ana_group':2}", NS1},
	{"SetAnaState", "{'gateway':'gw-a','ana_group':2,'state':'non-optimized'}",
	 "{'gateway':'gw-a','ana_group':2,'state':'non-optimized'}",
	 "{'gateway':'gw-a','ana_group':2,'state':'non-optimized'}"},
	{"SetAnaState", "{'ana_group':1,'state':'inaccessible'}", "{'gateway':'','ana_group':1,'state':'inaccessible'}",
	 "{'gateway':'gw-b','ana_group':1,'state':'inaccessible'}"},
	{"GetAnaState", "{}", "{'gateway':''}",
	 "{'states':[{'gateway':'gw-a','ana_group':1,'state':'optimized'},"
	 "{'gateway':'gw-b','ana_group':1,'state':'inaccessible'}]}"},
	{"RepairState", "{'keys':['s/nqn.bad\\\\x00']}", "{'keys':['s/nqn.bad\\\\x00'],'all':false}",
	 "{'state_store':'rados:kv/rados_nkv.group.g1','epoch':'6','applied_epoch':'6','malformed':0,'malformed_entries':[]}"},
};

/* The RPC names of the proto file: "  rpc Name(" lines (comments skipped). */
static int proto_rpcs(const char *path, char names[][64], int max)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	char line[512];
	int n = 0;
	while (fgets(line, sizeof(line), f) && n < max) {
		char *p = line + strspn(line, " \t");
		if (strncmp(p, "rpc ", 4) == 0 && sscanf(p + 4, "%63[A-Za-z0-9_]", names[n]) == 1)
			n++;
	}
	fclose(f);
	return n;
}

static void test_every_rpc(const char *proto, const struct nkv_ctl_client_conf *cc)
{
	char names[64][64];
	int n = proto_rpcs(proto, names, 64);
	CHECK(n >= 18, "%s lists %d RPCs", proto, n);
	for (int i = 0; i < n; i++) {
		bool covered = false;
		for (size_t k = 0; k < sizeof(g_rpcs) / sizeof(g_rpcs[0]); k++)
			covered |= strcmp(g_rpcs[k].method, names[i]) == 0;
		CHECK(covered, "RPC %s of the proto has no case here", names[i]);
	}
	for (size_t k = 0; k < sizeof(g_rpcs) / sizeof(g_rpcs[0]); k++) {
		const struct rpc_case *t = &g_rpcs[k];
		bool in_proto = false;
		for (int i = 0; i < n; i++)
			in_proto |= strcmp(t->method, names[i]) == 0;
		CHECK(in_proto, "%s is not an RPC of the proto", t->method);
		char *req = jq(t->req), *seen = jq(t->seen), *resp = jq(t->resp);
		fake_answer(0, resp, NULL);
		unsigned before = fake_entered();
		struct res r;
		do_call(cc, t->method, req, &r);
		CHECK(r.rc == 0 && r.code == 0, "%s: rc %d code %d (%s)", t->method, r.rc, r.code, r.err ? r.err : "");
		CHECK(fake_entered() == before + 1, "%s reached nkv_ctl_call %u times", t->method, fake_entered() - before);
		CHECK(strcmp(fake_last_method(), t->method) == 0, "method '%s', want '%s'", fake_last_method(), t->method);
		CHECK(fake_last_ctl() == g_cookie, "%s: the ctl pointer was not passed through", t->method);
		CHECK(strcmp(fake_last_req(), seen) == 0, "%s: nkv_ctl_call got\n  %s\nwant\n  %s", t->method,
		      fake_last_req(), seen);
		CHECK(r.resp && strcmp(r.resp, resp) == 0, "%s: response\n  %s\nwant\n  %s", t->method,
		      r.resp ? r.resp : "(null)", resp);
		res_free(&r);
		free(req);
		free(seen);
		free(resp);
	}
}

/* The C core may write JSON loosely: numbers for uint64, missing fields, spaces. */
static void test_loose_responses(const struct nkv_ctl_client_conf *cc)
{
	static const struct {
		const char *method, *resp, *want;
	} t[] = {
		{"GetNamespaceStats", "{ 'nqn' : 'x', 'nsid': 3, 'stores': 5, 'bytes_read': '7' }",
		 "{'nqn':'x','nsid':3,'gateway':'','stores':'5','retrieves':'0','deletes':'0','exists':'0','lists':'0',"
		 "'bytes_written':'0','bytes_read':'7','errors':'0','in_flight':'0','used_bytes':'0'}"},
		{"GetSubsystem", "{'nqn':'x'}",
		 "{'nqn':'x','pool':'','max_namespaces':0,'allow_any_host':false,'hosts':[],'namespaces':[],"
		 "'serial_number':'','shm_socket':'','loopback_any_host':false,'vfio_user_socket':'','vfio_user_host':''}"},
		{"GetGatewayInfo", "{'epoch':18446744073709551615}",
		 "{'name':'','version':'','group':'','epoch':'18446744073709551615','uptime_s':'0','backend':'',"
		 "'listeners':[],'connections':[],'state_store':'','cntlid_min':0,'cntlid_max':0}"},
		{"DisallowHost", "{}", "{'disconnected':0}"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *resp = jq(t[i].resp), *want = jq(t[i].want);
		fake_answer(0, resp, NULL);
		struct res r;
		do_call(cc, t[i].method, "{}", &r);
		CHECK(r.rc == 0 && r.resp && strcmp(r.resp, want) == 0, "%s loose %s: rc %d\n  %s\nwant\n  %s", t[i].method,
		      resp, r.rc, r.resp ? r.resp : r.err, want);
		res_free(&r);
		free(resp);
		free(want);
	}
}

/* A response the proto cannot take is a bug in the C core: INTERNAL, with the parse error. */
static void test_bad_responses(const struct nkv_ctl_client_conf *cc)
{
	static const struct {
		int rc;
		const char *resp, *why;
	} t[] = {
		{0, "{'nqn':'x','bogus_field':1}", "bogus_field"},
		{0, "{'nqn':'x','nsid':'abc'}", "nsid"},
		{0, "{'nqn':'x','namespaces':'x'}", "namespaces"},
		{0, "{'nqn':'x','hosts':[1]}", "hosts"},
		{0, "{'nqn':", ""},
		{0, "[1,2]", ""},
		{0, NULL, "no response"},
		{1, "{}", "no response"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *resp = t[i].resp ? jq(t[i].resp) : NULL;
		fake_answer(t[i].rc, resp, NULL);
		struct res r;
		do_call(cc, "GetSubsystem", "{'nqn':'x'}", &r);
		CHECK(r.rc == -EPROTO && r.code == 13 && r.err && strstr(r.err, t[i].why),
		      "response %s (rc %d): client rc %d code %d: %s", resp ? resp : "NULL", t[i].rc, r.rc, r.code,
		      r.err ? r.err : "");
		CHECK(r.resp == NULL, "a failed call returned a response");
		res_free(&r);
		free(resp);
	}
}

static void test_errnos(const struct nkv_ctl_client_conf *cc)
{
	static const struct {
		int err, code;
	} t[] = {
		{ENOENT, 5},     {EEXIST, 6}, {EINVAL, 3}, {EPERM, 9},  {EAGAIN, 10}, {EIO, 14},
		{ETIMEDOUT, 14}, {ENOSYS, 12}, {ENOMEM, 13}, {EBUSY, 13}, {EROFS, 13},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char msg[96];
		snprintf(msg, sizeof(msg), "subsystem %s: case %zu", NQN, i);
		fake_answer(-t[i].err, "{}", msg);
		struct res r;
		do_call(cc, "DeleteSubsystem", "{'nqn':'" NQN "'}", &r);
		CHECK(r.rc == -t[i].err && r.code == t[i].code, "-%s: client rc %d (%s) code %d (%s), want code %d",
		      strerrorname_np(t[i].err), r.rc, r.rc < 0 ? strerrorname_np(-r.rc) : "", r.code,
		      nkv_ctl_code_name(r.code), t[i].code);
		CHECK(r.err && strcmp(r.err, msg) == 0, "-%s: message '%s', want '%s'", strerrorname_np(t[i].err),
		      r.err ? r.err : "(null)", msg);
		CHECK(r.resp == NULL, "an error came with a response");
		res_free(&r);
	}
	/* no message from the C core: strerror */
	fake_answer(-ENOENT, NULL, NULL);
	struct res r;
	do_call(cc, "GetSubsystem", "{}", &r);
	CHECK(r.rc == -ENOENT && r.err && strcmp(r.err, strerror(ENOENT)) == 0, "no message: %d '%s'", r.rc,
	      r.err ? r.err : "(null)");
	res_free(&r);
}

static void test_bad_requests(const struct nkv_ctl_client_conf *cc)
{
	static const struct {
		const char *method, *req;
		int rc;
	} t[] = {
		{"NoSuchMethod", "{}", -ENOSYS},
		{"createSubsystem", "{}", -ENOSYS},
		{"GetSubsystem", "{'nqn':", -EINVAL},
		{"GetSubsystem", "{'nqn':'x','bogus':1}", -EINVAL},
		{"GetSubsystem", "{'hostnqn':'x'}", -EINVAL},
		{"RemoveNamespace", "{'nqn':'x','nsid':'abc'}", -EINVAL},
		{"RemoveNamespace", "{'nqn':'x','nsid':4294967296}", -EINVAL},
		{"RemoveNamespace", "{'nqn':'x','nsid':-1}", -EINVAL},
		{"AddNamespace", "{'max_value':'18446744073709551616'}", -EINVAL},
		{"GetSubsystem", "[]", -EINVAL},
	};
	unsigned before = fake_entered();
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *req = jq(t[i].req);
		struct res r;
		do_call(cc, t[i].method, req, &r);
		CHECK(r.rc == t[i].rc && r.code == -1 && r.err, "%s %s: rc %d code %d (%s)", t[i].method, req, r.rc, r.code,
		      r.err ? r.err : "");
		res_free(&r);
		free(req);
	}
	CHECK(fake_entered() == before, "a refused request reached the server");
	struct nkv_ctl_client_conf bad = *cc;
	static const char *const addrs[] = {"127.0.0.1", "127.0.0.1:0", "::1:5500", "unix:", ""};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		bad.addr = addrs[i];
		struct res r;
		do_call(&bad, "GetSubsystem", "{}", &r);
		CHECK(r.rc == -EINVAL && r.code == -1, "client address '%s': rc %d", addrs[i], r.rc);
		res_free(&r);
	}
}

/* ---- addresses --------------------------------------------------------------------------- */

static void test_addresses(void)
{
	struct nkv_ctl_server *s = NULL, *s2 = NULL;
	static const char *const bad[] = {
		"nonsense",	"127.0.0.1",	   "127.0.0.1:",      "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x",
		":5500",	"::1:5500",	   "[::1:5500",	      "[nothost]:5500",  "[]:5500",	 "unix:",
		"192.0.2.1:0",	"host name:5500",  "unix:/nonexistent-dir-nkv/ctl.sock",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nkv_ctl_server_conf sc = {.addr = bad[i]};
		int rc = nkv_ctl_server_start(g_cookie, &sc, &s);
		CHECK(rc == -EINVAL && !s, "server address '%s': %d", bad[i], rc);
		if (s)
			nkv_ctl_server_stop(s, 0);
		s = NULL;
	}
	char longp[160];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = 0;
	memcpy(longp, "unix:/", 6);
	struct nkv_ctl_server_conf lsc = {.addr = longp};
	CHECK(nkv_ctl_server_start(g_cookie, &lsc, &s) == -EINVAL, "a 154-byte socket path");

	/* in use: a second server on the same port, a port some other socket listens on */
	char addr[64], addr2[64];
	s = start_plain("127.0.0.1:0", addr, sizeof(addr));
	CHECK(nkv_ctl_server_port(s) > 0, "port 0 chose port %d", nkv_ctl_server_port(s));
	struct nkv_ctl_server_conf sc = {.addr = addr};
	int rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == -EADDRINUSE && !s2, "a second server on %s: %d", addr, rc);
	struct nkv_ctl_client_conf cc = {.addr = addr};
	fake_answer(0, "{}", NULL);
	struct res r;
	do_call(&cc, "DeleteSubsystem", "{}", &r);
	CHECK(r.rc == 0, "the first server on %s still answers: %d %s", addr, r.rc, r.err ? r.err : "");
	res_free(&r);
	nkv_ctl_server_stop(s, 1000);

	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0 &&
		      getsockname(fd, (struct sockaddr *)&sa, &sl) == 0,
	      "a foreign listener");
	snprintf(addr2, sizeof(addr2), "127.0.0.1:%u", ntohs(sa.sin_port));
	sc.addr = addr2;
	s2 = NULL;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == -EADDRINUSE && !s2, "%s, taken by another socket: %d", addr2, rc);
	sc.addr = "0.0.0.0:0";
	rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == 0, "0.0.0.0:0: %d", rc);
	nkv_ctl_server_stop(s2, 0);
	s2 = NULL;
	/* "localhost" resolves; it is the same port as the foreign listener */
	snprintf(addr2, sizeof(addr2), "localhost:%u", ntohs(sa.sin_port));
	sc.addr = addr2;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == -EADDRINUSE && !s2, "%s, taken by another socket: %d", addr2, rc);
	close(fd);

	/* IPv6 loopback, where the machine has it */
	int f6 = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	bool v6 = f6 >= 0 && bind(f6, (struct sockaddr *)&s6, sizeof(s6)) == 0;
	if (f6 >= 0)
		close(f6);
	if (v6) {
		sc.addr = "[::1]:0";
		s2 = NULL;
		rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
		CHECK(rc == 0, "[::1]:0: %d", rc);
		snprintf(addr2, sizeof(addr2), "[::1]:%d", nkv_ctl_server_port(s2));
		cc.addr = addr2;
		do_call(&cc, "DeleteSubsystem", "{}", &r);
		CHECK(r.rc == 0, "a call over %s: %d %s", addr2, r.rc, r.err ? r.err : "");
		res_free(&r);
		nkv_ctl_server_stop(s2, 1000);
	} else {
		printf("# no IPv6 loopback here: [::1] not tested\n");
	}

	/* Unix sockets: served, not taken over while live, a stale one reused, a file refused */
	char ua[120], path[100];
	snprintf(path, sizeof(path), "%s/ctl.sock", g_dir);
	snprintf(ua, sizeof(ua), "unix:%s", path);
	sc.addr = ua;
	s = NULL;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s);
	CHECK(rc == 0 && nkv_ctl_server_port(s) == 0, "%s: %d", ua, rc);
	s2 = NULL;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == -EADDRINUSE && !s2, "a second server on %s: %d", ua, rc);
	cc.addr = ua;
	do_call(&cc, "DeleteSubsystem", "{}", &r);
	CHECK(r.rc == 0, "the first server on %s still answers: %d %s", ua, r.rc, r.err ? r.err : "");
	res_free(&r);
	nkv_ctl_server_stop(s, 1000);
	/* a stale socket file (its listener closed without unlinking) */
	int uf = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	unlink(path);
	CHECK(bind(uf, (struct sockaddr *)&un, sizeof(un)) == 0 && listen(uf, 1) == 0, "a Unix listener");
	s2 = NULL;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == -EADDRINUSE && !s2, "%s, served by another socket: %d", ua, rc);
	close(uf);
	struct stat st;
	CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode), "the stale socket file is there");
	s = NULL;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s);
	CHECK(rc == 0, "%s over a stale socket file: %d", ua, rc);
	do_call(&cc, "DeleteSubsystem", "{}", &r);
	CHECK(r.rc == 0, "a call over %s: %d %s", ua, r.rc, r.err ? r.err : "");
	res_free(&r);
	nkv_ctl_server_stop(s, 1000);
	unlink(path);
	FILE *f = fopen(path, "w");
	fclose(f);
	s2 = NULL;
	rc = nkv_ctl_server_start(g_cookie, &sc, &s2);
	CHECK(rc == -EADDRINUSE && !s2, "%s is a regular file: %d", ua, rc);
	unlink(path);
}

/* ---- TLS ----------------------------------------------------------------------------------- */

static int tls_server(const char *crt, const char *key, const char *ca, struct nkv_ctl_server **s, char *addr,
		      size_t len)
{
	struct nkv_ctl_server_conf sc = {.addr = "127.0.0.1:0", .tls_cert = crt, .tls_key = key, .client_ca = ca};
	*s = NULL;
	int rc = nkv_ctl_server_start(g_cookie, &sc, s);
	if (rc == 0)
		snprintf(addr, len, "127.0.0.1:%d", nkv_ctl_server_port(*s));
	return rc;
}

/* One call through @cc; @ok: whether it must succeed (and reach the fake) or fail before it. */
static void tls_expect(const struct nkv_ctl_client_conf *cc, bool ok, const char *what)
{
	fake_answer(0, "{}", NULL);
	unsigned before = fake_entered();
	struct res r;
	do_call(cc, "DeleteSubsystem", "{}", &r);
	if (ok)
		CHECK(r.rc == 0 && fake_entered() == before + 1, "%s: rc %d code %d: %s", what, r.rc, r.code,
		      r.err ? r.err : "");
	else
		CHECK(r.rc < 0 && r.code == 14 && fake_entered() == before, "%s must fail UNAVAILABLE: rc %d code %d: %s",
		      what, r.rc, r.code, r.err ? r.err : "");
	res_free(&r);
}

static void test_tls(void)
{
	struct nkv_ctl_server *s = NULL;
	char addr[64];
	int rc = tls_server(cert("srv.pem"), cert("srv.key"), NULL, &s, addr, sizeof(addr));
	CHECK(rc == 0, "TLS server: %d", rc);
	struct nkv_ctl_client_conf cc = {.addr = addr, .timeout_ms = 5000};
	tls_expect(&cc, false, "plaintext client, TLS server");
	cc.tls_ca = cert("ca.pem");
	tls_expect(&cc, true, "TLS client");
	cc.tls_ca = cert("rogue-ca.pem");
	tls_expect(&cc, false, "TLS client trusting another CA");
	cc.tls_ca = cert("ca.pem");
	cc.tls_server_name = "ctl.test";
	tls_expect(&cc, false, "TLS client expecting ctl.test from a localhost certificate");
	cc.tls_server_name = "localhost";
	tls_expect(&cc, true, "TLS client expecting localhost");
	nkv_ctl_server_stop(s, 1000);

	rc = tls_server(cert("name.pem"), cert("name.key"), NULL, &s, addr, sizeof(addr));
	CHECK(rc == 0, "TLS server (ctl.test): %d", rc);
	cc = (struct nkv_ctl_client_conf){.addr = addr, .tls_ca = cert("ca.pem"), .timeout_ms = 5000};
	tls_expect(&cc, false, "127.0.0.1 against a certificate for ctl.test only");
	cc.tls_server_name = "ctl.test";
	tls_expect(&cc, true, "--tls-server-name ctl.test");
	nkv_ctl_server_stop(s, 1000);

	rc = tls_server(cert("srv.pem"), cert("srv.key"), cert("ca.pem"), &s, addr, sizeof(addr));
	CHECK(rc == 0, "mTLS server: %d", rc);
	cc = (struct nkv_ctl_client_conf){.addr = addr, .tls_ca = cert("ca.pem"), .timeout_ms = 5000};
	tls_expect(&cc, false, "mTLS without a client certificate");
	cc.tls_cert = cert("rogue.pem");
	cc.tls_key = cert("rogue.key");
	tls_expect(&cc, false, "mTLS with a certificate of another CA");
	cc.tls_cert = cert("cli.pem");
	cc.tls_key = cert("cli.key");
	tls_expect(&cc, true, "mTLS with the client certificate");
	cc.tls_ca = NULL;
	cc.tls_cert = cc.tls_key = NULL;
	tls_expect(&cc, false, "plaintext client, mTLS server");
	nkv_ctl_server_stop(s, 1000);

	s = start_plain("127.0.0.1:0", addr, sizeof(addr));
	cc = (struct nkv_ctl_client_conf){.addr = addr, .tls_ca = cert("ca.pem"), .timeout_ms = 5000};
	tls_expect(&cc, false, "TLS client, plaintext server");
	nkv_ctl_server_stop(s, 1000);

	/* server configurations refused at start */
	static const struct {
		const char *crt, *key, *ca, *what;
	} bad[] = {
		{"missing.pem", "srv.key", NULL, "a missing certificate"},
		{"srv.pem", "missing.key", NULL, "a missing key"},
		{"notpem.pem", "srv.key", NULL, "a certificate that is not PEM"},
		{"srv.pem", "notpem.pem", NULL, "a key that is not PEM"},
		{"srv.pem", "cli.key", NULL, "a key of another certificate"},
		{"srv.pem", NULL, NULL, "a certificate without its key"},
		{NULL, "srv.key", NULL, "a key without a certificate"},
		{NULL, NULL, "ca.pem", "a client CA without TLS"},
		{"srv.pem", "srv.key", "notpem.pem", "a client CA that is not PEM"},
		{"srv.pem", "srv.key", "missing.pem", "a missing client CA"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nkv_ctl_server_conf sc = {.addr = "127.0.0.1:0",
						 .tls_cert = bad[i].crt ? cert(bad[i].crt) : NULL,
						 .tls_key = bad[i].key ? cert(bad[i].key) : NULL,
						 .client_ca = bad[i].ca ? cert(bad[i].ca) : NULL};
		s = NULL;
		rc = nkv_ctl_server_start(g_cookie, &sc, &s);
		CHECK(rc == -EINVAL && !s, "server with %s: %d", bad[i].what, rc);
	}
	/* client configurations refused before any call */
	static const struct {
		const char *ca, *crt, *key, *name, *what;
	} cbad[] = {
		{NULL, "cli.pem", "cli.key", NULL, "a client certificate without a CA"},
		{NULL, NULL, NULL, "ctl.test", "a server name without TLS"},
		{"ca.pem", "cli.pem", NULL, NULL, "a client certificate without its key"},
		{"missing.pem", NULL, NULL, NULL, "a missing CA"},
		{"notpem.pem", NULL, NULL, NULL, "a CA that is not PEM"},
		{"ca.pem", "cli.pem", "missing.key", NULL, "a missing client key"},
	};
	for (size_t i = 0; i < sizeof(cbad) / sizeof(cbad[0]); i++) {
		struct nkv_ctl_client_conf c = {.addr = "127.0.0.1:1",
						.tls_ca = cbad[i].ca ? cert(cbad[i].ca) : NULL,
						.tls_cert = cbad[i].crt ? cert(cbad[i].crt) : NULL,
						.tls_key = cbad[i].key ? cert(cbad[i].key) : NULL,
						.tls_server_name = cbad[i].name};
		struct res r;
		do_call(&c, "GetSubsystem", "{}", &r);
		CHECK(r.rc == -EINVAL && r.code == -1 && r.err, "client with %s: %d %s", cbad[i].what, r.rc,
		      r.err ? r.err : "");
		res_free(&r);
	}
}

/* ---- limits, timeouts, threads, stop ------------------------------------------------------- */

static void test_limits(void)
{
	struct nkv_ctl_server_conf sc = {.addr = "127.0.0.1:0", .max_message = 1024};
	struct nkv_ctl_server *s = NULL;
	CHECK(nkv_ctl_server_start(g_cookie, &sc, &s) == 0, "server with a 1 KiB limit");
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", nkv_ctl_server_port(s));
	struct nkv_ctl_client_conf cc = {.addr = addr};
	char req[2100];
	snprintf(req, sizeof(req), "{\"nqn\":\"%01900d\"}", 0);
	unsigned before = fake_entered();
	fake_answer(0, "{}", NULL);
	struct res r;
	do_call(&cc, "DeleteSubsystem", req, &r);
	CHECK(r.rc == -EMSGSIZE && r.code == 8 && fake_entered() == before, "a 1.9 KB request, 1 KiB limit: rc %d code %d",
	      r.rc, r.code);
	res_free(&r);
	snprintf(req, sizeof(req), "{\"nqn\":\"%0900d\"}", 0);
	do_call(&cc, "DeleteSubsystem", req, &r);
	CHECK(r.rc == 0 && fake_entered() == before + 1, "a 0.9 KB request: %d", r.rc);
	res_free(&r);
	nkv_ctl_server_stop(s, 1000);

	/* nothing listens any more */
	do_call(&cc, "DeleteSubsystem", "{}", &r);
	CHECK(r.rc == -ECONNREFUSED && r.code == 14 && r.ms < 3000, "a call after the stop: rc %d code %d in %ld ms",
	      r.rc, r.code, r.ms);
	res_free(&r);
}

struct worker {
	const char *addr;
	int ok;
	long ms;
	struct res r;
};

static void *one_call(void *p)
{
	struct worker *w = p;
	struct nkv_ctl_client_conf cc = {.addr = w->addr, .timeout_ms = 10000};
	do_call(&cc, "GetGatewayInfo", "{}", &w->r);
	return NULL;
}

static void *many_calls(void *p)
{
	struct worker *w = p;
	struct nkv_ctl_client_conf cc = {.addr = w->addr};
	for (int i = 0; i < 20; i++) {
		struct res r;
		do_call(&cc, "GetNamespaceStats", "{\"nqn\":\"x\",\"nsid\":1}", &r);
		w->ok += r.rc == 0 && r.resp && strstr(r.resp, "\"stores\":\"5\"");
		res_free(&r);
	}
	return NULL;
}

static void test_threads_and_stop(void)
{
	char addr[64];
	struct nkv_ctl_server *s = start_plain("127.0.0.1:0", addr, sizeof(addr));

	/* 8 clients x 20 calls */
	fake_answer(0, "{\"stores\":5}", NULL);
	struct worker w[8];
	pthread_t th[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){.addr = addr};
		pthread_create(&th[i], NULL, many_calls, &w[i]);
	}
	int total = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		total += w[i].ok;
	}
	CHECK(total == 160, "8 threads x 20 calls: %d answered right", total);

	/* the client's deadline */
	struct nkv_ctl_client_conf cc = {.addr = addr, .timeout_ms = 300};
	fake_answer(0, "{}", NULL);
	unsigned ret = fake_returned();
	fake_delay_next(1500);
	struct res r;
	do_call(&cc, "GetGatewayInfo", "{}", &r);
	CHECK(r.rc == -ETIMEDOUT && r.code == 4 && r.ms >= 250 && r.ms < 1400,
	      "a 1.5 s call with a 300 ms timeout: rc %d code %d after %ld ms", r.rc, r.code, r.ms);
	res_free(&r);
	CHECK(fake_wait_returned(ret + 1, 5000), "the slow call returned");

	/* a stop within the grace: the call in flight completes */
	unsigned ent = fake_entered();
	fake_delay_next(800);
	struct worker one = {.addr = addr};
	pthread_create(&th[0], NULL, one_call, &one);
	CHECK(fake_wait_entered(ent + 1, 5000), "the call is in nkv_ctl_call");
	long t0 = now_ms();
	nkv_ctl_server_stop(s, 5000);
	long stop_ms = now_ms() - t0;
	pthread_join(th[0], NULL);
	CHECK(one.r.rc == 0 && one.r.resp, "the call in flight during a 5 s grace: rc %d code %d %s", one.r.rc,
	      one.r.code, one.r.err ? one.r.err : "");
	CHECK(stop_ms >= 500 && stop_ms < 4000, "the stop waited for it: %ld ms", stop_ms);
	res_free(&one.r);

	/* a stop past the grace: the call is cancelled for the client at the grace, and the stop
	 * returns once nkv_ctl_call() has */
	s = start_plain("127.0.0.1:0", addr, sizeof(addr));
	ent = fake_entered();
	ret = fake_returned();
	fake_delay_next(2000);
	one = (struct worker){.addr = addr};
	pthread_create(&th[0], NULL, one_call, &one);
	CHECK(fake_wait_entered(ent + 1, 5000), "the call is in nkv_ctl_call");
	t0 = now_ms();
	nkv_ctl_server_stop(s, 200);
	stop_ms = now_ms() - t0;
	pthread_join(th[0], NULL);
	CHECK(one.r.rc < 0 && one.r.ms < 1800, "the call past a 200 ms grace: rc %d code %d (%s) after %ld ms",
	      one.r.rc, one.r.code, one.r.err ? one.r.err : "", one.r.ms);
	CHECK(fake_returned() == ret + 1 && stop_ms >= 1500 && stop_ms < 4000,
	      "the stop returned after nkv_ctl_call (%ld ms, %u returned)", stop_ms, fake_returned() - ret);
	res_free(&one.r);

	/* stop of an idle server, and of none */
	s = start_plain("127.0.0.1:0", addr, sizeof(addr));
	t0 = now_ms();
	nkv_ctl_server_stop(s, 5000);
	CHECK(now_ms() - t0 < 1000, "an idle server stops at once: %ld ms", now_ms() - t0);
	nkv_ctl_server_stop(NULL, 0);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s PROTO_FILE MKCERTS_SCRIPT\n", argv[0]);
		return 2;
	}
	snprintf(g_dir, sizeof(g_dir), "%s/nkv-ctl-glue.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "bash '%s' '%s'", argv[2], g_dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "cannot make the test certificates (%s)\n", cmd);
		return 1;
	}

	char addr[64];
	struct nkv_ctl_server *s = start_plain("127.0.0.1:0", addr, sizeof(addr));
	struct nkv_ctl_client_conf cc = {.addr = addr};
	printf("# every RPC\n");
	test_every_rpc(argv[1], &cc);
	printf("# responses\n");
	test_loose_responses(&cc);
	test_bad_responses(&cc);
	printf("# errors\n");
	test_errnos(&cc);
	test_bad_requests(&cc);
	printf("# generated stub and service\n");
	stub_checks(addr);
	foreign_server_checks();
	nkv_ctl_server_stop(s, 1000);
	printf("# addresses\n");
	test_addresses();
	printf("# TLS\n");
	test_tls();
	printf("# limits, threads, stop\n");
	test_limits();
	test_threads_and_stop();

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", g_dir);
	printf("%u passed, %u failed\n", h_pass, h_fail);
	return h_fail ? 1 : 0;
}
