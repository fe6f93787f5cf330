/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_psk.c - the NVMe/TCP TLS PSK code (src/common/nvme_psk.c): the interchange format, PSK
 * identities and TLS PSKs.
 *
 * Vectors: the interchange strings and version 1 identities are libnvme's own test vectors
 * (test/psk.c of linux-nvme/libnvme: a version 1 identity embeds an HMAC of the retained PSK, so it
 * checks the retained-key derivation too); the TLS PSKs were computed by test/unit/psk_vectors.py,
 * an independent HKDF-Expand-Label in Python (hmac/hashlib), which ctest also runs against random keys.
 */
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

#include "common/nvme_psk.h"

#define HOST "nqn.psk-test-host"
#define SUB "nqn.psk-test-subsys"

static const uint8_t g_key[48] = {
	0x55, 0x12, 0xDB, 0xB6, 0x73, 0x7D, 0x01, 0x06, 0xF6, 0x59, 0x75, 0xB7, 0x73, 0xDF, 0xB0, 0x11,
	0xFF, 0xC3, 0x44, 0xBC, 0xF4, 0x42, 0xE2, 0xDD, 0x6D, 0x8B, 0xC4, 0x87, 0x0B, 0x5D, 0x5B, 0x03,
	0xFF, 0xC3, 0x44, 0xBC, 0xF4, 0x42, 0xE2, 0xDD, 0x6D, 0x8B, 0xC4, 0x87, 0x0B, 0x5D, 0x5B, 0x03,
};

static const struct {
	const char *key;
	uint8_t len, hmac;
	const char *id[2], *psk[2];
} g_vec[] = {
	{"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", 32, 1,
	 {"NVMe0R01 " HOST " " SUB, "NVMe1R01 " HOST " " SUB " iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU="},
	 {"05c6503551ad136e6ee32e6eeb3f6d500b69701d84ec71e328f65c7f51566f68",
	  "8fc3c0badfd4c0c66fa3ca33aadd0314f85536cc9bc47338b60f3e6e563786ca"}},
	{"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:", 48, 2,
	 {"NVMe0R02 " HOST " " SUB,
	  "NVMe1R02 " HOST " " SUB " QhW2+Rp6RzHlNtCslyRxMnwJ11tKKhz8JCAQpQ+XUD8f9td1VeH5h53yz2wKJG1a"},
	 {"f42ba63824cdfe421914c582921f85b5b5b7e2d4df084caeedc9be20b212e8bb0fe8a23e9d59a1c8fc6449da4970a78d",
	  "a2b2f943f479fc682555cec89857c80ed004ce92f32a973d5764155bb7e36b17a85368a0666d250afac9282dda2e62ca"}},
	{"NVMeTLSkey-1:00:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", 32, 0,
	 {"NVMe0R01 " HOST " " SUB, "NVMe1R01 " HOST " " SUB " quJVUJjp/BImWR0UQay/MjSfEgyAr6TyBOWybS/B404="},
	 {"ec85300ba827726bd3bc4fc07f3a34aec5fe7c8ccac05fefc2f021c74e0df9ef",
	  "a45d08ee4639c7570729bb3e57e905e466a49a15ece5401af906830c4d3bdb0b"}},
};

static void hex(const uint8_t *b, unsigned n, char *out)
{
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void interchange_round_trip(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(g_vec) / sizeof(g_vec[0]); i++) {
		struct nkv_psk k;
		char s[NKV_PSK_STR_MAX];
		assert_int_equal(nkv_psk_parse(g_vec[i].key, &k), 0);
		assert_int_equal(k.len, g_vec[i].len);
		assert_int_equal(k.hmac, g_vec[i].hmac);
		assert_memory_equal(k.key, g_key, k.len);
		assert_int_equal(nkv_psk_format(&k, s, sizeof(s)), (int)strlen(g_vec[i].key));
		assert_string_equal(s, g_vec[i].key);
	}
}

static void identities_and_tls_psks(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(g_vec) / sizeof(g_vec[0]); i++)
		for (unsigned v = 0; v < 2; v++) {
			struct nkv_psk k;
			struct nkv_tls_psk t;
			char h[2 * NKV_PSK_MAX + 1];
			assert_int_equal(nkv_psk_parse(g_vec[i].key, &k), 0);
			assert_int_equal(nkv_psk_derive(&k, v, HOST, SUB, &t), 0);
			assert_string_equal(t.identity, g_vec[i].id[v]);
			assert_int_equal(t.len, k.len);
			assert_int_equal(t.cipher, k.len == 48 ? 2 : 1);
			hex(t.key, t.len, h);
			assert_string_equal(h, g_vec[i].psk[v]);
		}
}

static void bad_keys(void **state)
{
	(void)state;
	struct nkv_psk k;
	const char *good = g_vec[0].key;
	char s[128];

	assert_int_equal(nkv_psk_parse("", &k), -EINVAL);
	assert_int_equal(nkv_psk_parse(NULL, &k), -EINVAL);
	assert_int_equal(nkv_psk_parse("DHHC-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", &k), -EINVAL);
	assert_int_equal(nkv_psk_parse("NVMeTLSkey-2:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", &k), -EINVAL);
	assert_int_equal(nkv_psk_parse("NVMeTLSkey-1:03:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", &k), -EINVAL);
	assert_int_equal(nkv_psk_parse("NVMeTLSkey-1:1:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", &k), -EINVAL);
	snprintf(s, sizeof(s), " %s", good); /* surrounding text: only files are trimmed */
	assert_int_equal(nkv_psk_parse(s, &k), -EINVAL);
	snprintf(s, sizeof(s), "%.*s", (int)strlen(good) - 1, good); /* no final ':' */
	assert_int_equal(nkv_psk_parse(s, &k), -EINVAL);
	snprintf(s, sizeof(s), "%s", good);
	s[20] = '*'; /* not base64 */
	assert_int_equal(nkv_psk_parse(s, &k), -EINVAL);
	snprintf(s, sizeof(s), "%s", good);
	s[20] = '='; /* padding in the middle */
	assert_int_equal(nkv_psk_parse(s, &k), -EINVAL);
	snprintf(s, sizeof(s), "%s", good);
	s[20] = s[20] == 'A' ? 'B' : 'A'; /* one character mistyped: the CRC-32 catches it */
	assert_int_equal(nkv_psk_parse(s, &k), -EBADMSG);
	/* hh 01 names SHA-256: a 48-byte key is refused; hh 02 needs 48 bytes */
	assert_int_equal(nkv_psk_parse("NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:", &k),
			 -EMSGSIZE);
	assert_int_equal(nkv_psk_parse("NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", &k), -EMSGSIZE);
	/* a 16-byte key with a valid CRC: not 32 or 48 bytes */
	struct nkv_psk shortk = {.len = 32, .hmac = 0};
	char s2[NKV_PSK_STR_MAX];
	assert_int_equal(nkv_psk_format(&shortk, s2, sizeof(s2)) > 0, 1);
	shortk.len = 16;
	assert_int_equal(nkv_psk_format(&shortk, s2, sizeof(s2)), -EINVAL);
	assert_string_not_equal(nkv_psk_strerror(-EBADMSG), "");
}

static void key_files(void **state)
{
	(void)state;
	char path[] = "/tmp/nkv-psk-XXXXXX";
	int fd = mkstemp(path);
	struct nkv_psk k;
	char spec[64];

	assert_true(fd >= 0);
	snprintf(spec, sizeof(spec), "@%s", path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "\n  %s\n", g_vec[1].key); /* surrounding whitespace, as an editor leaves it */
	fclose(f);
	assert_int_equal(nkv_psk_load(spec, &k), 0);
	assert_int_equal(k.len, 48);
	assert_memory_equal(k.key, g_key, 48);
	f = fopen(path, "w");
	for (int i = 0; i < 5000; i++)
		fputc(' ', f);
	fclose(f);
	assert_int_equal(nkv_psk_load(spec, &k), -EFBIG);
	unlink(path);
	assert_int_equal(nkv_psk_load(spec, &k), -ENOENT);
	assert_int_equal(nkv_psk_load(g_vec[0].key, &k), 0); /* not a file: the string itself */
}

static void derive_limits(void **state)
{
	(void)state;
	struct nkv_psk k;
	struct nkv_tls_psk t;
	char host[224], sub[224];

	assert_int_equal(nkv_psk_parse(g_vec[0].key, &k), 0);
	assert_int_equal(nkv_psk_derive(&k, 2, HOST, SUB, &t), -EINVAL);
	assert_int_equal(nkv_psk_derive(&k, 0, "", SUB, &t), -EINVAL);
	assert_int_equal(nkv_psk_derive(&k, 0, HOST, "nqn.a b", &t), -EINVAL); /* a space would split the identity */
	memset(host, 'h', 223);
	host[223] = '\0';
	memset(sub, 's', 223);
	sub[223] = '\0';
	/* Version 0: the identity is the HKDF context, one length byte: at most 255 bytes. */
	assert_int_equal(nkv_psk_derive(&k, 0, host, sub, &t), -ENAMETOOLONG);
	assert_int_equal(t.len, 0);
	/* Version 1 hashes the NQNs into a digest: any NQN lengths work. */
	assert_int_equal(nkv_psk_derive(&k, 1, host, sub, &t), 0);
	assert_int_equal(strncmp(t.identity, "NVMe1R01 hhh", 12), 0);
	/* Different host or subsystem: different TLS PSK (the identity is bound into it). */
	struct nkv_tls_psk a, b;
	assert_int_equal(nkv_psk_derive(&k, 0, HOST, SUB, &a), 0);
	assert_int_equal(nkv_psk_derive(&k, 0, HOST "x", SUB, &b), 0);
	assert_memory_not_equal(a.key, b.key, a.len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(interchange_round_trip), cmocka_unit_test(identities_and_tls_psks),
		cmocka_unit_test(bad_keys), cmocka_unit_test(key_files), cmocka_unit_test(derive_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
