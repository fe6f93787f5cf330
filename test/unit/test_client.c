/* SPDX-License-Identifier: Apache-2.0 */
/* test_client.c - libnkv pieces that need no target: the List walker and the status tables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/internal.h"
#include "nkv/nkv.h"

/* Build List data: NRK, then {KL, key, pad to 4}. @return bytes used. */
static uint32_t pack(uint8_t *buf, uint32_t nrk, const char *const *keys, unsigned n)
{
	uint32_t off = 4;
	nkv_put32(buf, nrk);
	for (unsigned i = 0; i < n; i++) {
		unsigned kl = (unsigned)strlen(keys[i]);
		nkv_put16(buf + off, (uint16_t)kl);
		memcpy(buf + off + 2, keys[i], kl);
		off += nkv_list_entry_size(kl);
	}
	return off;
}

static void list_walk(void **state)
{
	(void)state;
	static const char *const keys[] = {"a", "bb", "ccc", "dddd", "0123456789abcdef"};
	uint8_t buf[256];
	memset(buf, 0xee, sizeof(buf)); /* garbage past the entries must not be read as entries */
	uint32_t len = pack(buf, 5, keys, 5);
	assert_int_equal(len, 4 + 4 + 4 + 8 + 8 + 20);

	uint64_t pos = 0;
	uint8_t k[16];
	unsigned kl;
	for (unsigned i = 0; i < 5; i++) {
		assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), 1);
		assert_int_equal(kl, strlen(keys[i]));
		assert_memory_equal(k, keys[i], kl);
	}
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), 0);
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), 0);
}

static void list_empty_and_malformed(void **state)
{
	(void)state;
	uint8_t buf[64] = {0};
	uint64_t pos = 0;
	uint8_t k[16];
	unsigned kl;

	assert_int_equal(nkv_list_next(buf, 4, &pos, k, &kl), 0);       /* NRK 0 */
	assert_int_equal(nkv_list_next(buf, 3, &pos, k, &kl), -EPROTO); /* shorter than the header */

	static const char *const one[] = {"key1"};
	uint32_t len = pack(buf, 2, one, 1); /* claims 2 keys, holds 1 */
	pos = 0;
	assert_int_equal(nkv_list_next(buf, len, &pos, k, &kl), 1);
	assert_int_equal(nkv_list_next(buf, len, &pos, k, &kl), -EPROTO);

	pos = 0;
	nkv_put32(buf, 1);
	nkv_put16(buf + 4, 17); /* KL > 16 */
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), -EPROTO);
	pos = 0;
	nkv_put16(buf + 4, 0); /* KL 0 */
	assert_int_equal(nkv_list_next(buf, sizeof(buf), &pos, k, &kl), -EPROTO);
	pos = 0;
	nkv_put16(buf + 4, 16); /* entry runs past len */
	assert_int_equal(nkv_list_next(buf, 12, &pos, k, &kl), -EPROTO);
}

static void status_errno(void **state)
{
	(void)state;
	assert_int_equal(nkv_status_errno(0), 0);
	assert_int_equal(nkv_status_errno(0x4000), 0); /* DNR alone is still success */
	assert_int_equal(nkv_status_errno(0x087), -ENOENT);
	assert_int_equal(nkv_status_errno(0x4087), -ENOENT);
	assert_int_equal(nkv_status_errno(0x187), -ENOENT);
	assert_int_equal(nkv_status_errno(0x089), -EEXIST);
	assert_int_equal(nkv_status_errno(0x189), -EEXIST);
	assert_int_equal(nkv_status_errno(0x085), -EFBIG);
	assert_int_equal(nkv_status_errno(0x086), -EINVAL);
	assert_int_equal(nkv_status_errno(0x081), -ENOSPC);
	assert_int_equal(nkv_status_errno(0x082), -EAGAIN);
	assert_int_equal(nkv_status_errno(0x088), -EIO);
	assert_int_equal(nkv_status_errno(0x002), -EINVAL);
	assert_int_equal(nkv_status_errno(0x00b), -ENXIO);
	assert_int_equal(nkv_status_errno(0x020), -EROFS);
	assert_int_equal(nkv_status_errno(0x004), -EIO);
	assert_int_equal(nkv_status_errno(0x184), -EACCES);
	assert_int_equal(nkv_status_errno(NKV_STATUS_HOST_PATH), -ENOTCONN);
	assert_int_equal(nkv_status_errno(0x3ff), -ENOTCONN); /* unknown path status */
	assert_int_equal(nkv_status_errno(0x0ff), -EIO);      /* unknown generic status */
}

/* Vendor Exec statuses: C0h is -EOPNOTSUPP; C1h is the method's errno from DW0 (-EIO without one). */
static void exec_status_errno(void **state)
{
	(void)state;
	assert_int_equal(nkv_status_errno(0x0c0), -EOPNOTSUPP);
	assert_int_equal(nkv_status_errno(0x40c0), -EOPNOTSUPP);
	assert_int_equal(nkv_status_errno(0x0c1), -EIO); /* the status alone has no errno */
	assert_int_equal(nkv_status_errno(0x001), -EOPNOTSUPP); /* opcode not allowlisted */
	struct nkv_cpl c = {.status = 0x40c1, .dnr = true, .dw0 = ENOENT};
	assert_int_equal(nkv_cpl_errno(&c), -ENOENT);
	c.dw0 = EPERM;
	assert_int_equal(nkv_cpl_errno(&c), -EPERM);
	c.dw0 = 0; /* no errno: the table's -EIO */
	assert_int_equal(nkv_cpl_errno(&c), -EIO);
	c.dw0 = 4096;
	assert_int_equal(nkv_cpl_errno(&c), -EIO);
	c.dw0 = 0xffffffffu; /* a negative errno sent by mistake is not trusted either */
	assert_int_equal(nkv_cpl_errno(&c), -EIO);
	c.status = 0x1c1; /* SCT 1 C1h is not Method Failed: DW0 means nothing */
	c.dw0 = ENOENT;
	assert_int_equal(nkv_cpl_errno(&c), -EIO);
	c.status = 0x0c0; /* C0h ignores DW0 */
	assert_int_equal(nkv_cpl_errno(&c), -EOPNOTSUPP);
	c.status = 0; /* success: DW0 is the output length, not an errno */
	c.dw0 = 5;
	assert_int_equal(nkv_cpl_errno(&c), 0);
	c.status = 0x087;
	assert_int_equal(nkv_cpl_errno(&c), -ENOENT);
	assert_int_equal(nkv_cpl_errno(NULL), -EINVAL);
	assert_string_equal(nkv_status_string(0x0c0), "Class or Method Not Available (SCT 0h SC C0h)");
	assert_string_equal(nkv_status_string(0x40c1), "Method Failed (SCT 0h SC C1h)");
}

static void status_string(void **state)
{
	(void)state;
	assert_string_equal(nkv_status_string(0x087), "Key Does Not Exist (SCT 0h SC 87h)");
	assert_string_equal(nkv_status_string(0x4187), "Key Does Not Exist (SCT 1h SC 87h)");
	assert_string_equal(nkv_status_string(0x085), "Invalid Value Size (SCT 0h SC 85h)");
	assert_string_equal(nkv_status_string(0x0fe), "Unknown Status (SCT 0h SC FEh)");
	assert_non_null(strstr(nkv_status_string(NKV_STATUS_HOST_PATH), "Host Pathing Error"));
}

static void connect_args(void **state)
{
	(void)state;
	struct nkv_ctrl *c = NULL;
	/* A port is a number; a name that does not resolve is -ENXIO, not "unreachable". */
	assert_int_equal(nkv_connect("127.0.0.1", "nvme", "nqn.x:y", NULL, &c), -EINVAL);
	assert_int_equal(nkv_connect("127.0.0.1", "65536", "nqn.x:y", NULL, &c), -EINVAL);
	assert_int_equal(nkv_connect("no-such-host.invalid", "4420", "nqn.x:y", NULL, &c), -ENXIO);
	assert_null(c);
}

static void kv_args(void **state)
{
	(void)state;
	/* bad keys are refused before anything is queued (a NULL queue pair is never touched) */
	assert_int_equal(nkv_store_async(NULL, 1, "k", 0, "v", 1, 0, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_retrieve_async(NULL, 1, "0123456789abcdefX", 17, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_delete_async(NULL, 1, NULL, 3, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_submit(NULL, NULL, NULL, 0, NULL, NULL), -EINVAL);
	/* vendor Exec: opcode, direction, inline and buffer rules, all before the queue pair is used */
	uint8_t in[9] = {0}, out[16];
	uint32_t osz = 77;
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x02, NULL, 0, out, 16, &osz, NULL), -EINVAL); /* < 80h */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x7e, NULL, 0, out, 16, &osz, NULL), -EINVAL);
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x83, in, 4, out, 16, &osz, NULL), -EINVAL); /* 11b */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0xff, NULL, 0, NULL, 0, &osz, NULL), -EINVAL);
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x82, in, 9, out, 16, &osz, NULL), -EINVAL); /* inline > 8 */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x80, in, 9, NULL, 0, &osz, NULL), -EINVAL);
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x80, NULL, 0, out, 16, &osz, NULL), -EINVAL); /* 00b + out */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x81, in, 4, out, 16, &osz, NULL), -EINVAL); /* 01b + out */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x81, NULL, 4, NULL, 0, &osz, NULL), -EINVAL); /* NULL in */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 1, 0x82, in, 8, NULL, 16, &osz, NULL), -EINVAL); /* NULL out */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "k", 0, 0x82, in, 8, out, 16, &osz, NULL), -EINVAL); /* KL 0 */
	assert_int_equal(nkv_vendor_exec(NULL, 1, "0123456789abcdefX", 17, 0x82, in, 8, out, 16, &osz, NULL), -EINVAL);
	assert_int_equal(nkv_vendor_exec_async(NULL, 1, "k", 1, 0x83, NULL, 0, NULL, 0, NULL, NULL), -EINVAL);
	assert_int_equal(nkv_vendor_exec_async(NULL, 1, "k", 1, 0x82, in, 9, out, 16, NULL, NULL), -EINVAL);
	assert_int_equal(osz, 77); /* untouched on failure */
	/* valid arguments reach the queue pair: a NULL one is refused there */
	assert_int_equal(nkv_vendor_exec_async(NULL, 1, "k", 1, 0x82, in, 8, out, 16, NULL, NULL), -EINVAL);
}

/* Write @text to a fresh temporary file; @return its path (static per @slot). */
static const char *tmpfile_with(int slot, const char *text)
{
	static char paths[4][64];
	snprintf(paths[slot], sizeof(paths[slot]), "/tmp/nkv-host-%ld-%d", (long)getpid(), slot);
	FILE *f = fopen(paths[slot], "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return paths[slot];
}

static void host_ident(void **state)
{
	(void)state;
	struct nkv_host_ident h, h2;
	uint8_t u[16];
	char s[37];

	assert_int_equal(nkv_uuid_parse("0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F0", u), 0);
	nkv_uuid_format(u, s);
	assert_string_equal(s, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0");
	assert_int_equal(nkv_uuid_parse("0f1e2d3c4b5a-4978-8695-a4b3c2d1e0f0-", u), -EINVAL);
	assert_int_equal(nkv_uuid_parse("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0fg", u), -EINVAL);
	assert_int_equal(nkv_hostnqn_check("nqn.2014-08.org.example:host"), 0);
	assert_int_equal(nkv_hostnqn_check("iqn.2014-08.org.example:host"), -EINVAL);
	assert_int_equal(nkv_hostnqn_check("nqn.a b"), -EINVAL);

	/* Both files, padded: trimmed, and each the source of its part. */
	setenv("NKV_HOSTNQN_FILE", tmpfile_with(0, "\n  nqn.2014-08.org.example:host-a \t\n"), 1);
	setenv("NKV_HOSTID_FILE", tmpfile_with(1, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0\n"), 1);
	assert_int_equal(nkv_host_ident_load(&h), 0);
	assert_string_equal(h.hostnqn, "nqn.2014-08.org.example:host-a");
	nkv_uuid_format(h.hostid, s);
	assert_string_equal(s, "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0");
	assert_int_equal(h.hostnqn_src, NKV_HOST_SRC_FILE);
	assert_int_equal(h.hostid_src, NKV_HOST_SRC_FILE);

	/* libnkv's default (no hostnqn, zero hostid in the options) is that identity. */
	int err;
	struct nkv_ctrl *c = nkv_ctrl_alloc("127.0.0.1", "4420", "nqn.x:y", NULL, false, &err);
	assert_non_null(c);
	assert_string_equal(c->hostnqn, "nqn.2014-08.org.example:host-a");
	assert_memory_equal(c->hostid, h.hostid, 16);
	nkv_ctrl_free_mem(c);

	/* No host ID file: a uuid NQN's UUID is the host ID (nvme-cli). */
	setenv("NKV_HOSTNQN_FILE", tmpfile_with(2, "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555"), 1);
	setenv("NKV_HOSTID_FILE", "/nonexistent/hostid", 1);
	assert_int_equal(nkv_host_ident_load(&h), 0);
	nkv_uuid_format(h.hostid, s);
	assert_string_equal(s, "11111111-2222-4333-8444-555555555555");
	assert_int_equal(h.hostid_src, NKV_HOST_SRC_NQN);

	/* No files (and, here, no readable DMI UUID, or a DMI one): the same identity all process long. */
	setenv("NKV_HOSTNQN_FILE", "/nonexistent/hostnqn", 1);
	assert_int_equal(nkv_host_ident_load(&h), 0);
	assert_int_equal(nkv_host_ident_load(&h2), 0);
	assert_string_equal(h.hostnqn, h2.hostnqn);
	assert_memory_equal(h.hostid, h2.hostid, 16);
	assert_true(h.hostid_src == NKV_HOST_SRC_DMI || h.hostid_src == NKV_HOST_SRC_RANDOM);
	nkv_uuid_format(h.hostid, s);
	assert_non_null(strstr(h.hostnqn, s));

	/* A malformed file: -EINVAL, which one, and an identity that ignores it. */
	setenv("NKV_HOSTID_FILE", tmpfile_with(3, "not-a-uuid\n"), 1);
	assert_int_equal(nkv_host_ident_load(&h), -EINVAL);
	assert_false(h.bad_hostnqn);
	assert_memory_equal(h.hostid, h2.hostid, 16);
	setenv("NKV_HOSTNQN_FILE", tmpfile_with(3, "host a\n"), 1);
	setenv("NKV_HOSTID_FILE", "/nonexistent/hostid", 1);
	assert_int_equal(nkv_host_ident_load(&h), -EINVAL);
	assert_true(h.bad_hostnqn);
	assert_string_equal(h.hostnqn, h2.hostnqn);
	for (int i = 0; i < 4; i++) {
		char p[64];
		snprintf(p, sizeof(p), "/tmp/nkv-host-%ld-%d", (long)getpid(), i);
		unlink(p);
	}
	unsetenv("NKV_HOSTNQN_FILE");
	unsetenv("NKV_HOSTID_FILE");
}

/* Long names: the key is SHA-256's first 16 bytes (FIPS 180-2 "abc" vector); the header round trips,
 * tells a collision (-ENOENT) from bytes that are no header at all (-EPROTO). */
static void lname(void **state)
{
	(void)state;
	static const uint8_t abc[16] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
					0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23};
	uint8_t key[16];
	assert_int_equal(nkv_lname_key("abc", 3, key), 0);
	assert_memory_equal(key, abc, 16);
	assert_int_equal(nkv_lname_key("abc", 0, key), -EINVAL);
	assert_int_equal(nkv_lname_key("abc", NKV_LNAME_MAX + 1, key), -EINVAL);

	assert_int_equal(nkv_lname_hdr_size(0), 0);
	assert_int_equal(nkv_lname_hdr_size(1), 32);
	assert_int_equal(nkv_lname_hdr_size(8), 32);
	assert_int_equal(nkv_lname_hdr_size(9), 40);
	uint8_t h[64];
	uint64_t plen = 0;
	assert_int_equal(nkv_lname_hdr_pack("model@1@0@ab", 12, 1234567, h, sizeof(h)), 40);
	assert_memory_equal(h, "NKVL", 4);
	assert_int_equal(nkv_lname_hdr_pack("model@1@0@ab", 12, 1, h, 39), -EINVAL);
	assert_int_equal(nkv_lname_hdr_check(h, 40, "model@1@0@ab", 12, &plen), 40);
	assert_int_equal(plen, 1234567);
	assert_int_equal(nkv_lname_hdr_check(h, 40, "model@1@0@ac", 12, &plen), -ENOENT); /* same length */
	assert_int_equal(nkv_lname_hdr_check(h, 40, "model@1@0@abcdefgh", 18, &plen), -ENOENT);
	assert_int_equal(nkv_lname_hdr_check(h, 39, "model@1@0@ab", 12, &plen), -EPROTO); /* cut short */
	assert_int_equal(nkv_lname_hdr_check(h, 20, "model@1@0@ab", 12, &plen), -EPROTO);
	h[4] ^= 8; /* H that does not match the name length */
	assert_int_equal(nkv_lname_hdr_check(h, 40, "model@1@0@ab", 12, &plen), -EPROTO);
	memset(h, 0x5a, sizeof(h)); /* a foreign value */
	assert_int_equal(nkv_lname_hdr_check(h, 40, "model@1@0@ab", 12, &plen), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(list_walk),
		cmocka_unit_test(list_empty_and_malformed),
		cmocka_unit_test(status_errno),
		cmocka_unit_test(status_string),
		cmocka_unit_test(exec_status_errno),
		cmocka_unit_test(kv_args),
		cmocka_unit_test(connect_args),
		cmocka_unit_test(host_ident),
		cmocka_unit_test(lname),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
