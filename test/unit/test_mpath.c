/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mpath.c - the multipath engine's pure parts: the ANA log page (0Ch) decoder on pages built
 * here byte by byte per the NVMe base specification (2.0c, 5.16.1.13: a 16-byte header with the
 * change count and the number of group descriptors; 32-byte descriptors with ANAGRPID, NNSIDS,
 * the change count and the state in bits 3:0 of byte 16, each followed by its NSIDs), malformed
 * pages refused; and the checks of an engine vendor Exec op (NKV_OP_EXEC).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client/internal.h"

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/** A page of groups {grpid, state, nsids...}; @return its length. */
static size_t page(uint8_t *b, size_t cap)
{
	memset(b, 0, cap);
	b[0] = 7;  /* CHGCNT */
	b[8] = 3;  /* NGRPS */
	size_t off = 16;
	/* group 1: optimized, NSIDs 1 and 3 */
	le32(b + off, 1);
	le32(b + off + 4, 2);
	b[off + 16] = NKV_ANA_OPTIMIZED;
	off += 32;
	le32(b + off, 1);
	le32(b + off + 4, 3);
	off += 8;
	/* group 2: inaccessible, NSID 2; reserved high bits of the state byte set (ignored) */
	le32(b + off, 2);
	le32(b + off + 4, 1);
	b[off + 16] = 0xf0 | NKV_ANA_INACCESSIBLE;
	off += 32;
	le32(b + off, 2);
	off += 4;
	/* group 3: non-optimized, no namespaces */
	le32(b + off, 3);
	b[off + 16] = NKV_ANA_NON_OPTIMIZED;
	off += 32;
	return off;
}

static void ana_parse_groups(void **state)
{
	(void)state;
	uint8_t b[512];
	struct nkv_ana_ns ns[8];
	size_t len = page(b, sizeof(b));
	assert_int_equal(nkv_ana_parse(b, len, ns, 8), 3);
	assert_int_equal(ns[0].nsid, 1);
	assert_int_equal(ns[0].state, NKV_ANA_OPTIMIZED);
	assert_int_equal(ns[1].nsid, 3);
	assert_int_equal(ns[1].state, NKV_ANA_OPTIMIZED);
	assert_int_equal(ns[2].nsid, 2);
	assert_int_equal(ns[2].state, NKV_ANA_INACCESSIBLE);
	/* a longer buffer (the host reads the size Identify gives; the rest is zero) parses the same */
	assert_int_equal(nkv_ana_parse(b, sizeof(b), ns, 8), 3);
	/* more NSIDs than room: the first ones are kept */
	assert_int_equal(nkv_ana_parse(b, len, ns, 2), 2);
	/* no groups */
	uint8_t z[16] = {0};
	assert_int_equal(nkv_ana_parse(z, sizeof(z), ns, 8), 0);
}

static void ana_parse_malformed(void **state)
{
	(void)state;
	uint8_t b[512];
	struct nkv_ana_ns ns[8];
	size_t len = page(b, sizeof(b));
	for (size_t cut = 0; cut < len; cut++) /* every truncation: refused, never read past */
		assert_int_equal(nkv_ana_parse(b, cut, ns, 8), -EPROTO);
	assert_int_equal(nkv_ana_parse(NULL, 16, ns, 8), -EPROTO);
	uint8_t bad[512];
	memcpy(bad, b, sizeof(b));
	bad[16 + 16] = 0x5; /* a state the specification does not define */
	assert_int_equal(nkv_ana_parse(bad, len, ns, 8), -EPROTO);
	memcpy(bad, b, sizeof(b));
	le32(bad + 16 + 4, 0xffffffffu); /* NNSIDS far past the page */
	assert_int_equal(nkv_ana_parse(bad, len, ns, 8), -EPROTO);
	memcpy(bad, b, sizeof(b));
	bad[8] = 0xff; /* more descriptors than the page holds */
	bad[9] = 0xff;
	assert_int_equal(nkv_ana_parse(bad, len, ns, 8), -EPROTO);
}

static void exec_op_checks(void **state)
{
	(void)state;
	uint8_t out[64], in[64];
	struct nkv_op op = {.type = NKV_OP_EXEC, .klen = 3, .nsid = 1, .key = "abc", .opts = 0x80};
	assert_int_equal(nkv_engine_op_check(&op), 0); /* 00b, no data */
	op.flags = NKV_OP_IDEMPOTENT;
	assert_int_equal(nkv_engine_op_check(&op), 0);
	op.flags = NKV_OP_PIN;
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL);
	op = (struct nkv_op){.type = NKV_OP_EXEC, .klen = 3, .key = "abc", .opts = 0x82, .buf = out,
			     .len = sizeof(out), .offset = 0x6f6c6c6568, .ttl_s = 5};
	assert_int_equal(nkv_engine_op_check(&op), 0); /* 10b with 5 inline bytes */
	op.ttl_s = 9;
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* more than 8 inline bytes */
	op = (struct nkv_op){.type = NKV_OP_EXEC, .klen = 3, .key = "abc", .opts = 0x81, .buf = in, .len = 8};
	assert_int_equal(nkv_engine_op_check(&op), 0); /* 01b */
	op.ttl_s = 1;
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* inline bytes on 01b */
	op = (struct nkv_op){.type = NKV_OP_EXEC, .klen = 3, .key = "abc", .opts = 0x80, .buf = in, .len = 8};
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* a buffer on 00b */
	op = (struct nkv_op){.type = NKV_OP_EXEC, .klen = 3, .key = "abc", .opts = 0x83};
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* 11b */
	op.opts = 0x7c;
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* not a vendor opcode */
	op.opts = 0xf0;
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* a built-in one */
	op = (struct nkv_op){.type = NKV_OP_EXEC, .klen = 0, .opts = 0x80};
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* no key */
	op = (struct nkv_op){.type = NKV_OP_DELETE, .klen = 1, .key = "k", .flags = NKV_OP_IDEMPOTENT};
	assert_int_equal(nkv_engine_op_check(&op), -EINVAL); /* the flag is Exec's */
}

/* What is a path error, and what is sent again after one (docs/multipath.md "Retries"). */
static void retry_rules(void **state)
{
	(void)state;
	const uint16_t ana_inacc = NKV_SCT_PATH << 8 | NKV_SC_ANA_INACCESSIBLE;
	struct nkv_op lost = {.rc = -ENOTCONN, .status = NKV_STATUS_HOST_PATH};
	struct nkv_op late = {.rc = -ETIMEDOUT, .status = NKV_STATUS_HOST_PATH};
	struct nkv_op unsent = {.rc = -EAGAIN, .status = 0};
	struct nkv_op ana = {.rc = -EIO, .status = ana_inacc};
	struct nkv_op trans = {.rc = -EIO, .status = NKV_SCT_PATH << 8 | NKV_SC_ANA_TRANSITION};
	struct nkv_op loss = {.rc = -EIO, .status = NKV_SCT_PATH << 8 | NKV_SC_ANA_PERSISTENT_LOSS};
	assert_true(nkv_mp_path_error(&lost) && nkv_mp_path_error(&late) && nkv_mp_path_error(&unsent));
	assert_true(nkv_mp_path_error(&ana) && nkv_mp_path_error(&trans) && nkv_mp_path_error(&loss));
	/* the command's own answers are not path errors */
	struct nkv_op miss = {.rc = -ENOENT, .status = 0x87};
	struct nkv_op busy = {.rc = -EAGAIN, .status = 0x82};        /* KV not ready: the target said so */
	struct nkv_op tmo = {.rc = -ETIMEDOUT, .status = 0x19};       /* the target's own timeout */
	struct nkv_op other_path = {.rc = -EIO, .status = NKV_SCT_PATH << 8 | 0x04};
	struct nkv_op ok = {0};
	assert_false(nkv_mp_path_error(&miss) || nkv_mp_path_error(&busy) || nkv_mp_path_error(&tmo) ||
		     nkv_mp_path_error(&other_path) || nkv_mp_path_error(&ok));
	/* every KV command is sent again after any path error */
	for (uint8_t t = NKV_OP_STORE; t <= NKV_OP_LIST; t++) {
		struct nkv_op op = {.type = t};
		assert_true(nkv_mp_may_resend(&op, &lost) && nkv_mp_may_resend(&op, &late));
		assert_true(nkv_mp_may_resend(&op, &unsent) && nkv_mp_may_resend(&op, &ana));
	}
	/* an Exec that may have run only when declared idempotent; one that surely did not, always */
	struct nkv_op exec = {.type = NKV_OP_EXEC}, idem = {.type = NKV_OP_EXEC, .flags = NKV_OP_IDEMPOTENT};
	assert_false(nkv_mp_may_resend(&exec, &lost));
	assert_false(nkv_mp_may_resend(&exec, &late));
	assert_true(nkv_mp_may_resend(&exec, &unsent) && nkv_mp_may_resend(&exec, &ana));
	assert_true(nkv_mp_may_resend(&idem, &lost) && nkv_mp_may_resend(&idem, &late));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ana_parse_groups),
		cmocka_unit_test(ana_parse_malformed),
		cmocka_unit_test(exec_op_checks),
		cmocka_unit_test(retry_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
