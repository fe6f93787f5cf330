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
 *   - negatives: an opcode not allowlisted, or allowlisted on another namespace only (01h); a class
 *     or method the OSD lacks (C0h); a method error (C1h, errno in DW0); a write method on a
 *     read-only namespace (20h); host input above the rule's limit (85h); reserved CDW11 bits and
 *     inline input on a host-to-controller opcode (02h); the target keeps serving after each;
 *   - Commands Supported and Effects (log 05h, CSI 01h) lists exactly the allowlisted opcodes, write
 *     methods with LBCC; a live allowlist change takes effect for the next command.
 * Usage: exec_func rados [loop|tcp|shm]   (mem: every allowlisted opcode answers C0h; checked too)
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
#define NS_RO 2
#define NS_NONE 3
#define ADDS_PER_WORKER 250
#define LUA_VALUE (1u << 20)

/* numops.add input: two Ceph-encoded strings (u32 length, bytes): the omap key and the addend. */
static const uint8_t g_add_in[] = {1, 0, 0, 0, 'n', 1, 0, 0, 0, '1'};

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

static void rules(struct nkv_exec_rule *r, unsigned *n, const char *lua_json)
{
	unsigned i = 0;
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_SAY, .cls = "hello", .method = "say_hello", .input = "rados-",
					.input_len = 6};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_RECORD, .cls = "hello", .method = "record_hello", .write = true,
					.create = true, .max_input = 100};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_REPLAY, .cls = "hello", .method = "replay"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_ADD, .cls = "numops", .method = "add", .write = true,
					.create = true, .input = g_add_in, .input_len = sizeof(g_add_in)};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_LUA, .cls = "lua", .method = "eval_json", .input = lua_json,
					.input_len = (uint32_t)strlen(lua_json)};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_NOCLASS, .cls = "nosuchclass", .method = "method"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_NOMETH, .cls = "hello", .method = "no_such_method"};
	r[i++] = (struct nkv_exec_rule){.opcode = OPC_SAY_IN, .cls = "hello", .method = "say_hello", .max_input = 200};
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
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(nkv_ns_set_exec(H.ss, 1, &bad[i], 1) == -EINVAL, "bad rule %u refused", i);
	struct nkv_exec_rule twice[] = {{.opcode = 0x84, .cls = "a", .method = "b"}, {.opcode = 0x84, .cls = "a", .method = "c"}};
	CHECK(nkv_ns_set_exec(H.ss, 1, twice, 2) == -EINVAL, "an opcode allowlisted twice is refused");
	CHECK(nkv_ns_set_exec(H.ss, 77, twice, 1) == -ENOENT, "no such namespace");
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

int main(int argc, char **argv)
{
	static uint8_t big[LUA_VALUE], buf[4096];
	struct nkv_exec_rule r[16];
	char lua_json[2048], expect[32];
	uint32_t dw0 = 0, xfer = 0;
	unsigned n;
	bool rados = argc > 1 && strcmp(argv[1], "rados") == 0;

	h_init(argc, argv, "exec_func");
	CHECK(nkv_lua_sum_json(lua_json, sizeof(lua_json)) > 0, "the Lua script's JSON fits");
	rules(r, &n, lua_json);

	char rns[128];
	snprintf(rns, sizeof(rns), "%s-x", H.rados_ns);
	struct nkv_ns_conf ns1 = {.nsid = 1, .rados_ns = rns, .exec = r, .nexec = n};
	struct nkv_ns_conf ns2 = {.nsid = NS_RO, .rados_ns = rns, .read_only = true, .exec = r, .nexec = n};
	struct nkv_ns_conf ns3 = {.nsid = NS_NONE, .rados_ns = rns};
	CHECK(nkv_ns_add(H.ss, &ns1) == 0 && nkv_ns_add(H.ss, &ns2) == 0 && nkv_ns_add(H.ss, &ns3) == 0, "namespaces");
	test_bad_rules();

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
