/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec_func.c - vendor Exec commands run allowlisted RADOS class methods next to the data (issue 13),
 * on the micro cluster with the classes Debian's ceph-osd ships (hello, numops, lua):
 *   - hello.say_hello (read): bound input "rados-" + inline "nkv" -> "Hello, rados-nkv!", DW0 = 17;
 *     a 5-byte host buffer gets "Hello" and DW0 still 17;
 *   - hello.record_hello (write, may create; host input) then hello.replay (read) on the same key;
 *     recording twice answers 89h (the method's -EEXIST); replay of an absent key 87h;
 *   - numops.add (write, no data, bound input): 1,000 adds from 4 controllers sum exactly (the omap
 *     value read back with the rados CLI);
 *   - lua.eval_json with a bound script that sums a stored value's 64-bit words inside the OSD: the
 *     answer equals the sum computed here over a Retrieve of the same value;
 *   - Lua script rules (eval_json and eval_bufferlist): the host's input reaches the bound script only
 *     as its input, byte for byte (all 256 byte values, and a payload that tries to replace the
 *     script: it is stored verbatim, and through a harmless script the object stays unchanged); a
 *     rule binding a raw eval_json prefix for the host to complete is refused; the JSON document the
 *     OSD parses is one object with exactly the rule's script and handler (json-c);
 *   - a read-only namespace changes no object whatever a rule declares: numops.add and a Lua script
 *     that writes, both declared "read", answer 20h and leave the object as it was, while a read
 *     method's own -EINVAL stays C1h there;
 *   - negatives: an opcode not allowlisted, or allowlisted on another namespace only (01h); a class
 *     or method the OSD lacks (C0h); a method error (C1h, errno in DW0); a write method on a
 *     read-only namespace (20h); host input above the rule's limit (85h); reserved CDW11 bits,
 *     inline input on a host-to-controller opcode, inline input on a rule that binds its whole
 *     input (02h); the target keeps serving after each;
 *   - Commands Supported and Effects (log 05h, CSI 01h) lists exactly the allowlisted opcodes, write
 *     methods with LBCC; a live allowlist change takes effect for the next command; 400 changes
 *     under Exec load: each command runs one table's rule, replaced tables are freed (ASan).
 * Usage: exec_func rados [loop|tcp|shm]   (mem: every allowlisted opcode answers C0h; checked too)
 */
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"
#include "lua_sum.h"

#define OPC_SAY 0x82     /* C2H, read: hello.say_hello, bound "rados-" */
#define OPC_RECORD 0x81  /* H2C, write, create: hello.record_hello */
#define OPC_REPLAY 0x86  /* C2H, read: hello.replay */
#define OPC_ADD 0x80     /* none, write, create: numops.add "n" += 1 (bound input) */
#define OPC_LUA 0x8a     /* C2H, read: lua.eval_json, bound script */
#define OPC_NOCLASS 0x8e /* C2H, read: nosuchclass.method */
#define OPC_NOMETH 0x92  /* C2H, read: hello.no_such_method */
#define OPC_SAY_IN 0x85  /* H2C, read: hello.say_hello with the host's input (limit 200) */
#define OPC_FREE 0x9a    /* never allowlisted */
#define OPC_PUT_J 0x8d   /* H2C, write, create: lua.eval_json, a script that stores its input */
#define OPC_PUT_B 0x91   /* H2C, write, create: lua.eval_bufferlist, the same script */
#define OPC_NOOP_J 0x95  /* H2C, read: lua.eval_json, a script that does nothing */
#define OPC_ECHO_J 0x96  /* C2H, read: lua.eval_json, a script that returns its (inline) input */
#define OPC_ADD_R 0x88   /* none, declared read: numops.add (a writer in RADOS' eyes) */
#define OPC_LUA_W_R 0x9e /* C2H, declared read: lua.eval_json, a script that writes */
#define OPC_PREFIX 0x99  /* H2C: lua.eval_json with a raw bound prefix the host completes (refused) */
#define NS_RO 2
#define NS_NONE 3
#define ADDS_PER_WORKER 250
#define LUA_VALUE (1u << 20)

/* numops.add input: two Ceph-encoded strings (u32 length, bytes): the omap key and the addend. */
static const uint8_t g_add_in[] = {1, 0, 0, 0, 'n', 1, 0, 0, 0, '1'};

static const char g_put_script[] = "function put(input, output)\n  objclass.write_full(input)\nend\n"
				   "objclass.register(put)\n";
static const char g_noop_script[] = "function r(input, output) end objclass.register(r)";
static const char g_echo_script[] = "function echo(input, output) output:append(input:str()) end "
				    "objclass.register(echo)";
static const char g_write_script[] = "function w(input, output) local bl = bufferlist.new() bl:append('PWNED') "
				     "objclass.write(0, 5, bl) end objclass.register(w)";
/* A bound eval_json prefix left open at "input" for the host to complete, and a host input that
 * closes the string and names another script and handler (cls_lua keeps the last duplicate key). */
static const char g_prefix[] = "{\"script\": \"function r(i, o) end objclass.register(r)\", \"handler\": \"r\", "
			       "\"input\": \"";
static const char g_override[] =
	"x\", \"script\": \"function e(i,o) local bl=bufferlist.new() bl:append(\\\"EVIL!\\\") "
	"objclass.write(0,5,bl) end objclass.register(e)\", \"handler\": \"e\"}";

static unsigned ex(struct h_qp *q, uint8_t opc, uint32_t nsid, const char *key, const void *inl, unsigned inl_len,
		   void *buf, uint32_t len, uint32_t *dw0, uint32_t *xfer)
{
	struct nkv_sqe s;
	struct nkv_cqe cqe;
	uint32_t x = 0;

	nkv_sqe_exec(&s, opc, nsid, (const uint8_t *)key, (unsigned)strlen(key), len, inl, inl_len);
	if (h_exec(q, &s, len ? buf : NULL, len, &cqe, &x) < 0)
		return 0xffff;
	if (dw0)
		*dw0 = nkv_get32(&cqe.dw0);
	if (xfer)
		*xfer = x;
	return h_status(&cqe);
}

struct adder {
	pthread_t th;
	struct h_ctrl *c;
	struct h_qp *q;
	unsigned ok;
};

static void *add_main(void *arg)
{
	struct adder *a = arg;
	for (unsigned i = 0; i < ADDS_PER_WORKER; i++)
		a->ok += ex(a->q, OPC_ADD, 1, "counter", NULL, 0, NULL, 0, NULL, NULL) == 0;
	return NULL;
}

static void rules(struct nkv_exec_rule *r, unsigned *n)
{
	unsigned i = 0;
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_SAY, .cls = "hello", .method = "say_hello", .input = "rados-",
					.input_len = 6, .append_host_input = true};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_RECORD, .cls = "hello", .method = "record_hello", .write = true,
					.create = true, .max_input = 100};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_REPLAY, .cls = "hello", .method = "replay"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_ADD, .cls = "numops", .method = "add", .write = true,
					.create = true, .input = g_add_in, .input_len = sizeof(g_add_in)};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_LUA, .cls = "lua", .method = "eval_json",
					.script = nkv_lua_sum_script, .handler = "sum"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_NOCLASS, .cls = "nosuchclass", .method = "method"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_NOMETH, .cls = "hello", .method = "no_such_method"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_SAY_IN, .cls = "hello", .method = "say_hello", .max_input = 200};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_PUT_J, .cls = "lua", .method = "eval_json", .write = true,
					.create = true, .script = g_put_script, .handler = "put"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_PUT_B, .cls = "lua", .method = "eval_bufferlist", .write = true,
					.create = true, .script = g_put_script, .handler = "put"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_NOOP_J, .cls = "lua", .method = "eval_json", .script = g_noop_script,
					.handler = "r"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_ECHO_J, .cls = "lua", .method = "eval_json", .script = g_echo_script,
					.handler = "echo"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_ADD_R, .cls = "numops", .method = "add", .input = g_add_in,
					.input_len = sizeof(g_add_in)};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_LUA_W_R, .cls = "lua", .method = "eval_json",
					.script = g_write_script, .handler = "w"};
	*n = i;
}

/* Rules the core must refuse (validated before anything is published). */
static void test_bad_rules(void)
{
	struct nkv_exec_rule bad[] = {
		{.opcode = 0x7e, .cls = "hello", .method = "say_hello"},          /* not a vendor opcode */
		{.opcode = 0x83, .cls = "hello", .method = "say_hello"},          /* 11b: bidirectional */
		{.opcode = 0x82, .cls = "hello", .method = "record_hello", .write = true}, /* write with output */
		{.opcode = 0x84, .cls = "", .method = "x"},                       /* no class */
		{.opcode = 0x84, .cls = "hello", .method = "say_hello", .create = true}, /* read method "create" */
		{.opcode = 0xf2, .cls = "hello", .method = "say_hello"},          /* built-in: Retrieve Range */
		{.opcode = 0xf0, .cls = "hello", .method = "say_hello"},          /* built-in range, unassigned */
		{.opcode = 0xfe, .cls = "hello", .method = "say_hello"},
		/* lua runs its input as code: never raw bound input, never the host's appended, never
		 * without a bound script and handler; a script is for lua only */
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_json", .input = g_prefix,
		 .input_len = sizeof(g_prefix) - 1, .append_host_input = true},
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_json", .input = g_prefix, .input_len = sizeof(g_prefix) - 1},
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_bufferlist", .input = "x", .input_len = 1},
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_json"},
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_json", .script = g_noop_script},
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_json", .script = g_noop_script, .handler = "r",
		 .append_host_input = true},
		{.opcode = OPC_PREFIX, .cls = "lua", .method = "other", .script = g_noop_script, .handler = "r"},
		{.opcode = OPC_PREFIX, .cls = "hello", .method = "say_hello", .script = g_noop_script, .handler = "r"},
		/* bound input and the host's (01b) without declaring that one follows the other */
		{.opcode = 0x85, .cls = "hello", .method = "say_hello", .input = "rados-", .input_len = 6},
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(nkv_ns_set_exec(H.ss, 1, &bad[i], 1) == -EINVAL, "bad rule %u refused", i);
	struct nkv_exec_rule twice[] = {{.opcode = 0x84, .cls = "a", .method = "b"}, {.opcode = 0x84, .cls = "a", .method = "c"}};
	CHECK(nkv_ns_set_exec(H.ss, 1, twice, 2) == -EINVAL, "an opcode allowlisted twice is refused");
	CHECK(nkv_ns_set_exec(H.ss, 77, twice, 1) == -ENOENT, "no such namespace");
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(nkv_exec_rule_problem(&bad[i]) != NULL, "nkv_exec_rule_problem names bad rule %u", i);
}

/* The eval_json document the OSD gets for @host: json-c reads one object, nothing after it, with
 * exactly the keys script, handler and input, the first two the rule's, input the host's bytes. */
static bool json_doc_ok(const struct nkv_exec_entry *e, const char *script, const char *handler, const char *host)
{
	uint8_t *doc;
	uint32_t len;
	bool ok = false;

	if (nkv_exec_lua_input(e, host, (uint32_t)strlen(host), &doc, &len) < 0)
		return false;
	struct json_tokener *tok = json_tokener_new();
	json_object *o = json_tokener_parse_ex(tok, (const char *)doc, (int)len), *v;
	if (o && json_tokener_get_parse_end(tok) == len && json_object_is_type(o, json_type_object) &&
	    json_object_object_length(o) == 3 && json_object_object_get_ex(o, "script", &v) &&
	    strcmp(json_object_get_string(v), script) == 0 && json_object_object_get_ex(o, "handler", &v) &&
	    strcmp(json_object_get_string(v), handler) == 0 && json_object_object_get_ex(o, "input", &v) &&
	    strcmp(json_object_get_string(v), host) == 0)
		ok = true;
	json_object_put(o);
	json_tokener_free(tok);
	free(doc);
	return ok;
}

static void test_json_doc(void)
{
	struct nkv_ns *ns = nkv_ns_get(H.ss, 1);
	struct nkv_exec_table *t = ns ? atomic_load(&ns->exec) : NULL;
	const struct nkv_exec_entry *e = t ? t->by_opc[OPC_NOOP_J - NKV_EXEC_OPC_FIRST] : NULL;
	CHECK(e && json_doc_ok(e, g_noop_script, "r", g_override) && json_doc_ok(e, g_noop_script, "r", "") &&
		      json_doc_ok(e, g_noop_script, "r", "\"}\\\n\t\x01\x7f{\"script\":1}"),
	      "the eval_json document holds the host's input as the value of \"input\" only (json-c)");
	if (ns)
		nkv_ns_put(ns);
}

static void test_effects(struct h_qp *a, const struct nkv_exec_rule *r, unsigned n)
{
	static uint8_t log[4096];
	struct nkv_sqe s = {.opc = NKV_ADM_GET_LOG_PAGE};
	nkv_put32(&s.cdw10, NKV_LID_CMD_EFFECTS | ((4096 / 4 - 1) << 16));
	nkv_put32(&s.cdw14, (uint32_t)NKV_CSI_KV << 24);
	CHECK(h_admin(a, &s, log, sizeof(log), NULL) == 0, "log 05h for CSI 01h");
	const struct nkv_log_effects *e = (const struct nkv_log_effects *)log;
	unsigned listed = 0, wrong = 0;
	for (unsigned opc = NKV_EXEC_OPC_FIRST; opc < NKV_VS_OPC_FIRST; opc++) { /* F0h-FFh: built in */
		uint32_t v = nkv_get32(&e->iocs[opc]), want = 0;
		for (unsigned i = 0; i < n; i++)
			if (r[i].opcode == opc)
				want = NKV_EFFECTS_CSUPP | (r[i].write ? NKV_EFFECTS_LBCC : 0);
		listed += v != 0;
		wrong += v != want;
	}
	CHECK(listed == n && wrong == 0, "log 05h lists the %u allowlisted opcodes (%u listed, %u wrong)", n, listed, wrong);
	CHECK(nkv_get32(&e->iocs[NKV_VS_RETRIEVE_RANGE]) == NKV_EFFECTS_CSUPP, "log 05h lists the built-in F2h too");
}

/* Allowlists replaced under load: each command runs with the table it was parsed with, whole, and a
 * replaced table is freed once its commands end (ASan: no use after free; output from one table). */
struct sayer {
	pthread_t th;
	struct h_ctrl *c;
	struct h_qp *q;
	bool rados;
	atomic_bool *stop;
	unsigned runs, bad;
};

static void *say_main(void *arg)
{
	struct sayer *w = arg;
	uint8_t out[64];
	uint32_t xfer = 0;
	while (!atomic_load(w->stop)) {
		memset(out, 0, sizeof(out));
		unsigned st = ex(w->q, OPC_SAY, 1, "hello-key", "nkv", 3, out, sizeof(out), NULL, &xfer);
		bool good = w->rados ? st == 0 && xfer == 17 &&
					       (memcmp(out, "Hello, rados-nkv!", 17) == 0 ||
						memcmp(out, "Hello, RADOS-nkv!", 17) == 0)
				     : st == SC(NKV_SCT_GENERIC, NKV_SC_EXEC_UNAVAILABLE);
		w->runs++;
		w->bad += !good;
	}
	return NULL;
}

static void test_swap_under_load(bool rados)
{
	struct nkv_exec_rule a[24], b[24];
	unsigned n, swaps = 0, runs = 0, bad = 0;
	struct sayer w[2] = {0};
	atomic_bool stop = false;

	rules(a, &n);
	rules(b, &n);
	b[0].input = "RADOS-"; /* OPC_SAY's bound input: the output says which table ran */
	for (unsigned i = 0; i < 2; i++) {
		w[i] = (struct sayer){.c = h_connect(), .rados = rados, .stop = &stop};
		w[i].q = h_qp_create(w[i].c, 1, 4);
		pthread_create(&w[i].th, NULL, say_main, &w[i]);
	}
	for (unsigned i = 0; i < 400; i++) {
		swaps += nkv_ns_set_exec(H.ss, 1, i % 2 ? a : b, n) == 0;
		usleep(1000);
	}
	atomic_store(&stop, true);
	for (unsigned i = 0; i < 2; i++) {
		pthread_join(w[i].th, NULL);
		runs += w[i].runs;
		bad += w[i].bad;
		h_qp_destroy(w[i].q);
		h_disconnect(w[i].c);
	}
	CHECK(swaps == 400 && runs > 0 && bad == 0,
	      "400 allowlist swaps under %u Exec commands: every command ran one table's rule (%u wrong)", runs, bad);
	CHECK(nkv_ns_set_exec(H.ss, 1, a, n) == 0, "allowlist back to the first");
}

/* Retrieve @key on namespace 1 into @buf (up to @len bytes): @return the bytes read, or -1. */
static int get(struct h_qp *q, const char *key, void *buf, uint32_t len)
{
	uint32_t xfer = 0;
	return h_kv(q, NKV_KV_RETRIEVE, 1, key, (unsigned)strlen(key), len, 0, buf, len, NULL, &xfer) == 0 ? (int)xfer : -1;
}

/* The omap value of "n" on @key's object ("" when absent), read with the rados CLI. */
static void omap_n(const char *rns, const char *key_hex, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/exec_func-%d.omap", (int)getpid());
	unlink(path);
	out[0] = '\0';
	if (h_ceph_tool("rados", "-p", H.pool, "-N", rns, "getomapval", key_hex, "n", path, (char *)NULL) != 0)
		return;
	FILE *f = fopen(path, "r");
	if (f) {
		size_t got = fread(out, 1, n - 1, f);
		out[got] = '\0';
		fclose(f);
	}
	unlink(path);
}

/* Lua script rules: the host's bytes are the handler's input and nothing else. */
static void test_lua_input(struct h_qp *q)
{
	static uint8_t all[256], back[512];
	uint32_t dw0 = 0, xfer = 0;
	int got;

	for (unsigned i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	CHECK(ex(q, OPC_PUT_J, 1, "lua-put-j", NULL, 0, all, sizeof(all), NULL, NULL) == 0 &&
		      (got = get(q, "lua-put-j", back, sizeof(back))) == 256 && memcmp(back, all, 256) == 0,
	      "eval_json: the 256 byte values reach the script as its input, exactly");
	CHECK(ex(q, OPC_PUT_B, 1, "lua-put-b", NULL, 0, all, sizeof(all), NULL, NULL) == 0 &&
		      (got = get(q, "lua-put-b", back, sizeof(back))) == 256 && memcmp(back, all, 256) == 0,
	      "eval_bufferlist: the 256 byte values reach the script as its input, exactly");
	CHECK(ex(q, OPC_PUT_J, 1, "lua-put-e", NULL, 0, NULL, 0, NULL, NULL) == 0 && get(q, "lua-put-e", back, 16) == 0,
	      "eval_json: an empty input is an empty string");
	/* The payload that would replace the script: the bound script stores it as data. */
	memset(back, 0, sizeof(back));
	CHECK(ex(q, OPC_PUT_J, 1, "lua-put-o", NULL, 0, (void *)g_override, sizeof(g_override) - 1, NULL, NULL) == 0 &&
		      (got = get(q, "lua-put-o", back, sizeof(back))) == (int)sizeof(g_override) - 1 &&
		      memcmp(back, g_override, sizeof(g_override) - 1) == 0,
	      "a payload naming another script is stored verbatim by the bound one ('%.12s...')", back);
	/* Through a script that does nothing, the payload leaves the object as it was. */
	CHECK(h_kv(q, NKV_KV_STORE, 1, "victim", 6, 14, 0, "hello-original", 14, NULL, NULL) == 0, "store the victim");
	CHECK(ex(q, OPC_NOOP_J, 1, "victim", NULL, 0, (void *)g_override, sizeof(g_override) - 1, NULL, NULL) == 0,
	      "the payload through the do-nothing script: success");
	memset(back, 0, sizeof(back));
	CHECK(get(q, "victim", back, sizeof(back)) == 14 && memcmp(back, "hello-original", 14) == 0,
	      "and the object is unchanged ('%.14s')", back);
	/* The rule that bound an open prefix is refused; its opcode runs nothing. */
	struct nkv_exec_rule r[24];
	unsigned n;
	rules(r, &n);
	r[n++] = (struct nkv_exec_rule){.opcode = OPC_PREFIX, .cls = "lua", .method = "eval_json", .input = g_prefix,
					.input_len = sizeof(g_prefix) - 1, .append_host_input = true, .max_input = 65536};
	CHECK(nkv_ns_set_exec(H.ss, 1, r, n) == -EINVAL, "an allowlist binding an open eval_json prefix is refused");
	CHECK(ex(q, OPC_PREFIX, 1, "victim", NULL, 0, (void *)g_override, sizeof(g_override) - 1, NULL, NULL) != 0,
	      "the payload on that opcode fails");
	memset(back, 0, sizeof(back));
	CHECK(get(q, "victim", back, sizeof(back)) == 14 && memcmp(back, "hello-original", 14) == 0,
	      "and the object is still unchanged ('%.14s')", back);
	/* Inline input with quotes and a brace comes back as it went. */
	memset(back, 0, sizeof(back));
	CHECK(ex(q, OPC_ECHO_J, 1, "victim", "\"}\\{\x00\n\xff", 8, back, 64, &dw0, &xfer) == 0 && xfer == 8 &&
		      memcmp(back, "\"}\\{\x00\n\xff", 8) == 0,
	      "8 inline bytes with quote, brace, backslash, NUL reach the script as they are (%u bytes)", xfer);
}

/* A read-only namespace changes no object, whatever a rule declares (RADOS decides). */
static void test_read_only(struct h_qp *q, const char *rns)
{
	uint8_t back[64] = {0};
	uint32_t dw0 = 0;
	char omap[32];

	CHECK(h_kv(q, NKV_KV_STORE, 1, "ro-obj", 6, 14, 0, "hello-original", 14, NULL, NULL) == 0, "store ro-obj");
	CHECK(ex(q, OPC_ADD_R, NS_RO, "ro-obj", NULL, 0, NULL, 0, NULL, NULL) ==
		      SC(NKV_SCT_GENERIC, NKV_SC_NS_WRITE_PROTECTED),
	      "numops.add declared read on the read-only namespace: 20h");
	omap_n(rns, "726f2d6f626a", omap, sizeof(omap));
	CHECK(omap[0] == '\0', "and the object's omap has no 'n' ('%s')", omap);
	CHECK(ex(q, OPC_LUA_W_R, NS_RO, "ro-obj", NULL, 0, back, 64, NULL, NULL) ==
		      SC(NKV_SCT_GENERIC, NKV_SC_NS_WRITE_PROTECTED),
	      "a Lua script that writes, declared read, on the read-only namespace: 20h");
	CHECK(get(q, "ro-obj", back, sizeof(back)) == 14 && memcmp(back, "hello-original", 14) == 0,
	      "and the object is unchanged ('%.14s')", back);
	CHECK(ex(q, OPC_ADD_R, NS_RO, "ro-absent", NULL, 0, NULL, 0, NULL, NULL) != 0, "numops.add on an absent key there: refused");
	memset(back, 'a', sizeof(back));
	CHECK(ex(q, OPC_SAY_IN, NS_RO, "ro-obj", NULL, 0, back, 150, &dw0, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_EXEC_FAILED) &&
		      dw0 == EINVAL,
	      "a read method's own -EINVAL on the read-only namespace stays C1h (DW0 %u)", dw0);
	CHECK(ex(q, OPC_ADD_R, 1, "ro-obj", NULL, 0, NULL, 0, NULL, NULL) == 0, "the same rule on the writable namespace runs");
	omap_n(rns, "726f2d6f626a", omap, sizeof(omap));
	CHECK(strcmp(omap, "1") == 0, "and adds there ('%s')", omap);
}

int main(int argc, char **argv)
{
	static uint8_t big[LUA_VALUE], buf[4096];
	struct nkv_exec_rule r[24];
	char expect[32];
	uint32_t dw0 = 0, xfer = 0;
	unsigned n;
	bool rados = argc > 1 && strcmp(argv[1], "rados") == 0;

	h_init(argc, argv, "exec_func");
	rules(r, &n);

	char rns[128];
	snprintf(rns, sizeof(rns), "%s-x", H.rados_ns);
	struct nkv_ns_conf ns1 = {.nsid = 1, .rados_ns = rns, .exec = r, .nexec = n};
	struct nkv_ns_conf ns2 = {.nsid = NS_RO, .rados_ns = rns, .read_only = true, .exec = r, .nexec = n};
	struct nkv_ns_conf ns3 = {.nsid = NS_NONE, .rados_ns = rns};
	CHECK(nkv_ns_add(H.ss, &ns1) == 0 && nkv_ns_add(H.ss, &ns2) == 0 && nkv_ns_add(H.ss, &ns3) == 0, "namespaces");
	test_bad_rules();
	test_json_doc();

	struct h_ctrl *c = h_connect();
	struct h_qp *q = h_qp_create(c, 1, 8);
	CHECK(q != NULL, "I/O queue");
	if (!q)
		return h_finish();
	test_effects(h_admin_qp(c), r, n);

	if (!rados) { /* no object classes in memory: every allowlisted opcode is "unavailable" */
		CHECK(ex(q, OPC_SAY, 1, "k", "x", 1, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_EXEC_UNAVAILABLE),
		      "mem: allowlisted opcode answers C0h");
		CHECK(ex(q, OPC_FREE, 1, "k", NULL, 0, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_OPCODE),
		      "mem: an opcode not allowlisted answers 01h");
		test_swap_under_load(false);
		h_qp_destroy(q);
		h_disconnect(c);
		return h_finish();
	}

	/* hello.say_hello: bound "rados-" + inline "nkv"; then truncated to a 5-byte buffer. RADOS runs
	 * read methods only on objects that exist: the keys they run on are stored first. */
	CHECK(h_kv(q, NKV_KV_STORE, 1, "hello-key", 9, 2, 0, "hi", 2, NULL, NULL) == 0 &&
		      h_kv(q, NKV_KV_STORE, 1, "k", 1, 2, 0, "hi", 2, NULL, NULL) == 0,
	      "keys for the read methods");
	CHECK(ex(q, OPC_SAY, 1, "absent-key", "nkv", 3, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST),
	      "a read method on an absent key: 87h");
	memset(buf, 0, sizeof(buf));
	CHECK(ex(q, OPC_SAY, 1, "hello-key", "nkv", 3, buf, 64, &dw0, &xfer) == 0 && dw0 == 17 && xfer == 17 &&
		      memcmp(buf, "Hello, rados-nkv!", 17) == 0,
	      "say_hello -> '%.*s' (DW0 %u, %u bytes)", (int)xfer, buf, dw0, xfer);
	memset(buf, 0, sizeof(buf));
	CHECK(ex(q, OPC_SAY, 1, "hello-key", "nkv", 3, buf, 5, &dw0, &xfer) == 0 && dw0 == 17 && xfer == 5 &&
		      memcmp(buf, "Hello", 5) == 0 && buf[5] == 0,
	      "a 5-byte buffer gets 'Hello' and DW0 the full 17 (DW0 %u, %u bytes)", dw0, xfer);

	test_swap_under_load(true);

	/* record_hello (write, host input) then replay (read) on the same key. */
	char rkey[16];
	snprintf(rkey, sizeof(rkey), "rec-%d", (int)getpid() % 100000);
	memcpy(buf, "nkv", 3);
	CHECK(ex(q, OPC_RECORD, 1, rkey, NULL, 0, buf, 3, &dw0, NULL) == 0, "record_hello 'nkv'");
	memset(buf, 0, sizeof(buf));
	CHECK(ex(q, OPC_REPLAY, 1, rkey, NULL, 0, buf, 64, &dw0, &xfer) == 0 && dw0 == 11 &&
		      memcmp(buf, "Hello, nkv!", 11) == 0,
	      "replay -> '%.*s' (DW0 %u)", (int)xfer, buf, dw0);
	memcpy(buf, "nkv", 3);
	CHECK(ex(q, OPC_RECORD, 1, rkey, NULL, 0, buf, 3, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_EXISTS),
	      "record_hello on a recorded key: the method's -EEXIST is 89h");
	CHECK(ex(q, OPC_REPLAY, 1, "absent-key", NULL, 0, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_KV_KEY_NOT_EXIST),
	      "replay of an absent key: 87h");

	/* numops.add from 4 controllers at once: the omap counter sums exactly. */
	struct adder ad[4] = {0};
	unsigned added = 0;
	for (unsigned i = 0; i < 4; i++) {
		ad[i].c = h_connect();
		ad[i].q = h_qp_create(ad[i].c, 1, 4);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_create(&ad[i].th, NULL, add_main, &ad[i]);
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(ad[i].th, NULL);
		added += ad[i].ok;
		h_qp_destroy(ad[i].q);
		h_disconnect(ad[i].c);
	}
	CHECK(added == 4 * ADDS_PER_WORKER, "%u of %u numops.add succeeded", added, 4 * ADDS_PER_WORKER);
	char out[64], omap[32] = "";
	snprintf(out, sizeof(out), "/tmp/exec_func-%d.omap", (int)getpid());
	CHECK(h_ceph_tool("rados", "-p", H.pool, "-N", rns, "getomapval", "636f756e746572", "n", out, (char *)NULL) == 0,
	      "rados getomapval of the counter object");
	FILE *f = fopen(out, "r");
	if (f) {
		size_t got = fread(omap, 1, sizeof(omap) - 1, f);
		omap[got] = '\0';
		fclose(f);
		unlink(out);
	}
	CHECK(strcmp(omap, "1000") == 0, "the counter reads '%s' (want 1000)", omap);

	/* lua.eval_json: the OSD sums the value's words; the same sum here over a Retrieve. */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 2654435761u >> 13);
	CHECK(h_kv(q, NKV_KV_STORE, 1, "lua-value", 9, sizeof(big), 0, big, sizeof(big), NULL, NULL) == 0, "store 1 MiB");
	snprintf(expect, sizeof(expect), "%lld", (long long)nkv_lua_sum_local(big, sizeof(big)));
	memset(buf, 0, sizeof(buf));
	CHECK(ex(q, OPC_LUA, 1, "lua-value", NULL, 0, buf, 64, &dw0, &xfer) == 0 && xfer == strlen(expect) &&
		      memcmp(buf, expect, xfer) == 0,
	      "Lua sum in the OSD '%.*s' = '%s' computed here", (int)xfer, buf, expect);

	test_lua_input(q);
	test_read_only(q, rns);

	/* Negatives; the target keeps serving after each (the final say_hello). */
	CHECK(ex(q, OPC_FREE, 1, "k", NULL, 0, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_OPCODE),
	      "an opcode not allowlisted: 01h");
	CHECK(ex(q, OPC_SAY, NS_NONE, "k", NULL, 0, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_OPCODE),
	      "an opcode allowlisted on another namespace only: 01h");
	CHECK(ex(q, OPC_NOCLASS, 1, "k", NULL, 0, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_EXEC_UNAVAILABLE),
	      "a class the OSD lacks: C0h");
	CHECK(ex(q, OPC_NOMETH, 1, "k", NULL, 0, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_EXEC_UNAVAILABLE),
	      "a method the class lacks: C0h");
	memset(big, 'a', 150);
	CHECK(ex(q, OPC_SAY_IN, 1, "k", NULL, 0, big, 150, &dw0, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_EXEC_FAILED) &&
		      dw0 == EINVAL,
	      "say_hello refuses 150 bytes of input: C1h with errno %u (EINVAL) in DW0", dw0);
	CHECK(ex(q, OPC_SAY_IN, 1, "k", NULL, 0, big, 201, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_KV_INVALID_VALUE_SIZE),
	      "host input above the rule's 200 bytes: 85h");
	memcpy(buf, "ro", 2);
	CHECK(ex(q, OPC_RECORD, NS_RO, "ro-key", NULL, 0, buf, 2, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_NS_WRITE_PROTECTED),
	      "a write method on a read-only namespace: 20h");
	CHECK(ex(q, OPC_SAY, NS_RO, "hello-key", "ro", 2, buf, 64, &dw0, NULL) == 0 && dw0 == 16,
	      "a read method on the read-only namespace runs (DW0 %u)", dw0);
	CHECK(ex(q, OPC_RECORD, 1, rkey, "x", 1, buf, 3, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD),
	      "inline input on a host-to-controller opcode: 02h");
	CHECK(ex(q, OPC_ADD, 1, "counter", "x", 1, NULL, 0, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD),
	      "inline input on a rule that binds its whole input: 02h");
	struct nkv_sqe s;
	struct nkv_cqe cqe;
	nkv_sqe_exec(&s, OPC_SAY, 1, (const uint8_t *)"k", 1, 64, NULL, 0);
	nkv_put32(&s.cdw11, nkv_get32(&s.cdw11) | (1u << 12));
	CHECK(h_exec(q, &s, buf, 64, &cqe, NULL) == 0 && h_status(&cqe) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_FIELD),
	      "reserved CDW11 bits: 02h");

	/* Live: drop say_hello from namespace 1, then put it back. */
	CHECK(nkv_ns_set_exec(H.ss, 1, r + 1, n - 1) == 0, "allowlist replaced");
	CHECK(ex(q, OPC_SAY, 1, "hello-key", "nkv", 3, buf, 64, NULL, NULL) == SC(NKV_SCT_GENERIC, NKV_SC_INVALID_OPCODE),
	      "the next command sees the new allowlist: 01h");
	CHECK(nkv_ns_set_exec(H.ss, 1, r, n) == 0, "allowlist restored");
	memset(buf, 0, sizeof(buf));
	CHECK(ex(q, OPC_SAY, 1, "hello-key", "nkv", 3, buf, 64, &dw0, NULL) == 0 && dw0 == 17,
	      "and runs again; the target kept serving after every refusal");

	h_qp_destroy(q);
	h_disconnect(c);
	return h_finish();
}
