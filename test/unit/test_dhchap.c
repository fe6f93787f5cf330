/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dhchap.c - DH-HMAC-CHAP computations (src/common/dhchap.c) against known answers from two
 * independent sources: nvme-cli 2.3 (`nvme gen-dhchap-key`, whose output with --secret and --hmac is
 * the transformed key) and Python's hmac/hashlib/zlib/pow (test/unit/dhchap_vectors.py, which wrote
 * dhchap_vectors.h): secret parsing, CRC-32, key transformation, responses, augmented challenges
 * and the ffdhe2048 shared secret; plus DH round trips on every group and the values a peer must
 * not be allowed to send.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <isa-l/crc.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "common/dhchap.h"
#include "dhchap_vectors.h"

static void test_crc32(void **state)
{
	(void)state;
	/* The CRC-32 check value, and the CRC nvme-cli appended to the 32 bytes 00..1f (8a 7e 26 91
	 * at the end of "DHHC-1:00:AAECAwQF...Hh+KfiaR:", little endian). */
	assert_int_equal(crc32_gzip_refl(0, (const uint8_t *)"123456789", 9), 0xcbf43926u);
	uint8_t k[32];
	for (int i = 0; i < 32; i++)
		k[i] = (uint8_t)i;
	assert_int_equal(crc32_gzip_refl(0, k, 32), 0x91267e8au);
}

static void test_parse_nvme_cli(void **state)
{
	(void)state;
	/* nvme gen-dhchap-key --secret=000102...1f (--hmac=0), and the 48/64-byte ones */
	static const struct {
		const char *s;
		uint8_t hash, len;
	} ok[] = {
		{"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", 0, 32},
		{"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:", 0, 48},
		{"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P4zODhA=:", 0, 64},
		{"DHHC-1:01:WulleCBkG4oCs0iIC3Cit9gBDCLWiZ9PNXuhqytWkBIZkvGy:", 1, 32},
		{"DHHC-1:02:JzC2BNNCN092uBY9oK1bbG/xrkLudbjqzPRjAtH00YqVJN1+2TpCZUPYxrwS09Qxpo/5Jw==:", 2, 48},
		{"DHHC-1:03:d9FmVEvkZD5WUqUkzVMj3JFzwudZt1EtUNK4zK6+E9Dd42mroGA4ub4Yju0aNPtAr2w0xZFyCxz8d1Q12rImDko3x34=:", 3, 64},
		/* Linux also takes it without the closing ':' */
		{"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR", 0, 32},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct nkv_dhchap_key k;
		const char *why = NULL;
		assert_int_equal(nkv_dhchap_key_parse(ok[i].s, &k, &why), 0);
		assert_int_equal(k.hash, ok[i].hash);
		assert_int_equal(k.len, ok[i].len);
		if (ok[i].hash == 0)
			for (int b = 0; b < k.len; b++)
				assert_int_equal(k.key[b], b);
	}
}

static void test_parse_errors(void **state)
{
	(void)state;
	static const char *const bad[] = {
		NULL,
		"",
		"DHHC-2:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",  /* version */
		"dhhc-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",  /* case */
		"DHHC-1:04:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",  /* hh 04 */
		"DHHC-1:0:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",   /* hh one digit */
		"DHHC-1:00:",                                                    /* no key */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaS:",  /* CRC (last byte) */
		"DHHC-1:00:AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",  /* a key byte */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+Kfia:",   /* length not 4k */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+Kfi!R:",  /* alphabet */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+K fiaR:", /* space */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR::", /* two colons */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:x", /* trailing text */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMU=FRYXGBkaGxwdHh+KfiaR:", /* padding inside */
		"DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUaXrDkQ==:",              /* 21-byte key (+CRC) */
		/* 32-byte key (valid CRC) claiming SHA-384 / SHA-512: lengths must match hh */
		"DHHC-1:02:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",
		"DHHC-1:03:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",
		/* 48-byte key claiming SHA-256 */
		"DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nkv_dhchap_key k;
		const char *why = NULL;
		assert_int_equal(nkv_dhchap_key_parse(bad[i], &k, &why), -EINVAL);
		assert_non_null(why);
		assert_int_equal(k.len, 0);
	}
}

/* nvme-cli's transformed keys: gen-dhchap-key --secret=<00..> --hmac=N --nqn=<NQN> prints the key
 * after HMAC(secret, NQN || "NVMe-over-Fabrics"). */
static void test_transform_nvme_cli(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} v[] = {
		{"DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:",
		 "DHHC-1:01:WulleCBkG4oCs0iIC3Cit9gBDCLWiZ9PNXuhqytWkBIZkvGy:"},
		{"DHHC-1:02:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:",
		 "DHHC-1:02:JzC2BNNCN092uBY9oK1bbG/xrkLudbjqzPRjAtH00YqVJN1+2TpCZUPYxrwS09Qxpo/5Jw==:"},
		{"DHHC-1:03:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P4zODhA=:",
		 "DHHC-1:03:d9FmVEvkZD5WUqUkzVMj3JFzwudZt1EtUNK4zK6+E9Dd42mroGA4ub4Yju0aNPtAr2w0xZFyCxz8d1Q12rImDko3x34=:"},
	};
	for (size_t i = 0; i < 3; i++) {
		struct nkv_dhchap_key in, want;
		uint8_t out[NKV_DHCHAP_MAX_HASH];
		assert_int_equal(nkv_dhchap_key_parse(v[i].in, &in, NULL), 0);
		assert_int_equal(nkv_dhchap_key_parse(v[i].out, &want, NULL), 0);
		assert_int_equal(nkv_dhchap_transform(&in, "nqn.2014-08.org.nvmexpress:uuid:test", out), want.len);
		assert_memory_equal(out, want.key, want.len);
	}
	/* hh 00: the key as it is */
	struct nkv_dhchap_key k;
	uint8_t out[NKV_DHCHAP_MAX_HASH];
	assert_int_equal(nkv_dhchap_key_parse("DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", &k, NULL), 0);
	assert_int_equal(nkv_dhchap_transform(&k, "nqn.x", out), 32);
	assert_memory_equal(out, k.key, 32);
}

static void test_python_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(g_vec) / sizeof(g_vec[0]); i++) {
		const struct vec *v = &g_vec[i];
		size_t n = nkv_dhchap_hash_len(v->hash);
		struct nkv_dhchap_key hk, ck;
		uint8_t th[64], tc[64], out[64], aug[64];

		assert_int_equal(nkv_dhchap_key_parse(v->host_secret, &hk, NULL), 0);
		assert_int_equal(nkv_dhchap_key_parse(v->ctrl_secret, &ck, NULL), 0);
		assert_int_equal(nkv_dhchap_transform(&hk, VEC_HOSTNQN, th), v->tkey_len);
		assert_memory_equal(th, v->tkey_host, v->tkey_len);
		assert_int_equal(nkv_dhchap_transform(&ck, VEC_SUBNQN, tc), v->tkey_len);
		assert_memory_equal(tc, v->tkey_ctrl, v->tkey_len);
		/* null DH group: the challenges as sent */
		assert_int_equal(nkv_dhchap_response(v->hash, th, v->tkey_len, v->c1, VEC_SEQ1, VEC_TID, 0, "HostHost",
						     VEC_HOSTNQN, VEC_SUBNQN, out), 0);
		assert_memory_equal(out, v->r1, n);
		assert_int_equal(nkv_dhchap_response(v->hash, tc, v->tkey_len, v->c2, VEC_SEQ2, VEC_TID, 0, "Controller",
						     VEC_SUBNQN, VEC_HOSTNQN, out), 0);
		assert_memory_equal(out, v->r2, n);
		/* ffdhe2048: augmented with H(shared secret) */
		assert_int_equal(nkv_dhchap_augment(v->hash, vec_dh_secret, sizeof(vec_dh_secret), v->c1, aug), 0);
		assert_memory_equal(aug, v->aug1, n);
		assert_int_equal(nkv_dhchap_response(v->hash, th, v->tkey_len, aug, VEC_SEQ1, VEC_TID, 0, "HostHost",
						     VEC_HOSTNQN, VEC_SUBNQN, out), 0);
		assert_memory_equal(out, v->r1_dh, n);
		assert_int_equal(nkv_dhchap_augment(v->hash, vec_dh_secret, sizeof(vec_dh_secret), v->c2, aug), 0);
		assert_int_equal(nkv_dhchap_response(v->hash, tc, v->tkey_len, aug, VEC_SEQ2, VEC_TID, 0, "Controller",
						     VEC_SUBNQN, VEC_HOSTNQN, out), 0);
		assert_memory_equal(out, v->r2_dh, n);
		/* one bit of the challenge, the sequence number or the NQN changes the response */
		uint8_t c[64];
		memcpy(c, v->c1, n);
		c[n - 1] ^= 1;
		assert_int_equal(nkv_dhchap_response(v->hash, th, v->tkey_len, c, VEC_SEQ1, VEC_TID, 0, "HostHost",
						     VEC_HOSTNQN, VEC_SUBNQN, out), 0);
		assert_memory_not_equal(out, v->r1, n);
		assert_int_equal(nkv_dhchap_response(v->hash, th, v->tkey_len, v->c1, VEC_SEQ1 + 1, VEC_TID, 0,
						     "HostHost", VEC_HOSTNQN, VEC_SUBNQN, out), 0);
		assert_memory_not_equal(out, v->r1, n);
		assert_int_equal(nkv_dhchap_response(v->hash, th, v->tkey_len, v->c1, VEC_SEQ1, VEC_TID, 0, "HostHost",
						     VEC_SUBNQN, VEC_HOSTNQN, out), 0);
		assert_memory_not_equal(out, v->r1, n);
	}
	uint8_t out[64];
	assert_int_equal(nkv_dhchap_response(4, g_vec[0].tkey_host, 32, g_vec[0].c1, 1, 1, 0, "HostHost", "a", "b", out),
			 -EINVAL);
}

/* The fixed ffdhe2048 key pair (x1, y1) of the vectors, as OpenSSL holds it. */
static EVP_PKEY *vec_key(void)
{
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	BIGNUM *x = BN_bin2bn(vec_dh_x1, sizeof(vec_dh_x1), NULL), *y = BN_bin2bn(vec_dh_y1, sizeof(vec_dh_y1), NULL);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL);
	EVP_PKEY *k = NULL;
	OSSL_PARAM *p;

	assert_non_null(bld);
	assert_int_equal(OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "ffdhe2048", 0), 1);
	assert_int_equal(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, x), 1);
	assert_int_equal(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PUB_KEY, y), 1);
	assert_non_null(p = OSSL_PARAM_BLD_to_param(bld));
	assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
	assert_int_equal(EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_KEYPAIR, p), 1);
	OSSL_PARAM_free(p);
	OSSL_PARAM_BLD_free(bld);
	EVP_PKEY_CTX_free(ctx);
	BN_free(x);
	BN_free(y);
	return k;
}

static void test_dh_known_answer(void **state)
{
	(void)state;
	EVP_PKEY *k = vec_key();
	uint8_t s[256];
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, vec_dh_y2, sizeof(vec_dh_y2), s), 0);
	assert_memory_equal(s, vec_dh_secret, 256);

	/* values a peer must not get accepted: 0, 1, p - 1, p, p + 1 (and 2^2048 - 1), wrong lengths */
	uint8_t y[257];
	memset(y, 0, sizeof(y));
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, y, 256, s), -EINVAL);
	y[255] = 1;
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, y, 256, s), -EINVAL);
	memcpy(y, vec_dh_p, 256);
	y[255] -= 1; /* p ends in ...FF: p - 1 */
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, y, 256, s), -EINVAL);
	memcpy(y, vec_dh_p, 256);
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, y, 256, s), -EINVAL);
	memset(y, 0xff, 256);
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, y, 256, s), -EINVAL);
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, vec_dh_y2, 255, s), -EINVAL);
	memset(y, 0, sizeof(y));
	memcpy(y + 1, vec_dh_y2, 256);
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE2048, y, 257, s), -EINVAL);
	/* the group the key is not on */
	assert_int_equal(nkv_dhchap_dh_derive(k, NKV_DHCHAP_FFDHE3072, vec_dh_y2, 256, s), -EINVAL);
	nkv_dhchap_dh_free(k);
}

static void test_dh_round_trip(void **state)
{
	(void)state;
	for (uint8_t g = NKV_DHCHAP_FFDHE2048; g <= NKV_DHCHAP_FFDHE8192; g++) {
		int len = nkv_dhchap_dh_len(g);
		uint8_t pa[1024], pb[1024], sa[1024], sb[1024];
		struct evp_pkey_st *a, *b;
		assert_int_equal(len, 256 + (g == 2 ? 128 : g == 3 ? 256 : g == 4 ? 512 : g == 5 ? 768 : 0));
		assert_int_equal(nkv_dhchap_dh_gen(g, &a, pa), 0);
		assert_int_equal(nkv_dhchap_dh_gen(g, &b, pb), 0);
		assert_memory_not_equal(pa, pb, (size_t)len);
		assert_int_equal(nkv_dhchap_dh_derive(a, g, pb, (size_t)len, sa), 0);
		assert_int_equal(nkv_dhchap_dh_derive(b, g, pa, (size_t)len, sb), 0);
		assert_memory_equal(sa, sb, (size_t)len);
		nkv_dhchap_dh_free(a);
		nkv_dhchap_dh_free(b);
	}
	struct evp_pkey_st *k = (struct evp_pkey_st *)1;
	uint8_t p[16];
	assert_int_equal(nkv_dhchap_dh_gen(NKV_DHCHAP_DH_NULL, &k, p), -EINVAL);
	assert_null(k);
	assert_int_equal(nkv_dhchap_dh_gen(6, &k, p), -EINVAL);
}

static void test_names(void **state)
{
	(void)state;
	assert_int_equal(nkv_dhchap_hash_id("sha256"), 1);
	assert_int_equal(nkv_dhchap_hash_id("sha384"), 2);
	assert_int_equal(nkv_dhchap_hash_id("hmac(sha512)"), 3);
	assert_int_equal(nkv_dhchap_hash_id("sha1"), -EINVAL);
	assert_int_equal(nkv_dhchap_hash_id("hmac(sha512"), -EINVAL);
	assert_int_equal(nkv_dhchap_hash_id(NULL), -EINVAL);
	assert_int_equal(nkv_dhchap_dh_id("null"), 0);
	assert_int_equal(nkv_dhchap_dh_id("ffdhe8192"), 5);
	assert_int_equal(nkv_dhchap_dh_id("ffdhe1024"), -EINVAL);
	assert_string_equal(nkv_dhchap_hash_name(2), "sha384");
	assert_null(nkv_dhchap_hash_name(0));
	assert_string_equal(nkv_dhchap_dh_name(3), "ffdhe4096");
	assert_null(nkv_dhchap_dh_name(6));
	assert_int_equal(nkv_dhchap_hash_len(0), 0);
	assert_int_equal(nkv_dhchap_hash_len(4), 0);
	assert_int_equal(nkv_dhchap_dh_len(0), 0);
	assert_int_equal(nkv_dhchap_dh_len(6), -EINVAL);
	assert_true(nkv_dhchap_equal("abc", "abc", 3));
	assert_false(nkv_dhchap_equal("abc", "abd", 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32),
		cmocka_unit_test(test_parse_nvme_cli),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_transform_nvme_cli),
		cmocka_unit_test(test_python_vectors),
		cmocka_unit_test(test_dh_known_answer),
		cmocka_unit_test(test_dh_round_trip),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
