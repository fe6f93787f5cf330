/* SPDX-License-Identifier: Apache-2.0 */
/* dhchap.c - DH-HMAC-CHAP computations over OpenSSL 3 (see dhchap.h). */
#include "common/dhchap.h"

#include <errno.h>
#include <isa-l/crc.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/dh.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <string.h>

#include "nkv/nkv_spec.h"

static const struct {
	const char *name;   /* as users and OpenSSL write it */
	const char *digest; /* OpenSSL's digest name */
	size_t len;
} g_hash[] = {
	[NKV_DHCHAP_SHA256] = {"sha256", "SHA256", 32},
	[NKV_DHCHAP_SHA384] = {"sha384", "SHA384", 48},
	[NKV_DHCHAP_SHA512] = {"sha512", "SHA512", 64},
};

static const struct {
	const char *name; /* also OpenSSL's group name (RFC 7919) */
	int len;          /* bytes of p, so of every value of the group */
} g_dh[] = {
	[NKV_DHCHAP_DH_NULL] = {"null", 0},       [NKV_DHCHAP_FFDHE2048] = {"ffdhe2048", 256},
	[NKV_DHCHAP_FFDHE3072] = {"ffdhe3072", 384}, [NKV_DHCHAP_FFDHE4096] = {"ffdhe4096", 512},
	[NKV_DHCHAP_FFDHE6144] = {"ffdhe6144", 768}, [NKV_DHCHAP_FFDHE8192] = {"ffdhe8192", 1024},
};

size_t nkv_dhchap_hash_len(uint8_t id)
{
	return id >= 1 && id <= 3 ? g_hash[id].len : 0;
}

const char *nkv_dhchap_hash_name(uint8_t id)
{
	return id >= 1 && id <= 3 ? g_hash[id].name : NULL;
}

int nkv_dhchap_hash_id(const char *name)
{
	if (name && strncmp(name, "hmac(", 5) == 0) { /* Linux's configfs spelling */
		size_t n = strlen(name);
		char inner[16];
		if (n < 7 || n - 6 >= sizeof(inner) || name[n - 1] != ')')
			return -EINVAL;
		memcpy(inner, name + 5, n - 6);
		inner[n - 6] = '\0';
		return nkv_dhchap_hash_id(inner);
	}
	for (int i = 1; name && i <= 3; i++)
		if (strcmp(name, g_hash[i].name) == 0)
			return i;
	return -EINVAL;
}

int nkv_dhchap_dh_len(uint8_t id)
{
	return id <= 5 ? g_dh[id].len : -EINVAL;
}

const char *nkv_dhchap_dh_name(uint8_t id)
{
	return id <= 5 ? g_dh[id].name : NULL;
}

int nkv_dhchap_dh_id(const char *name)
{
	for (int i = 0; name && i <= 5; i++)
		if (strcmp(name, g_dh[i].name) == 0)
			return i;
	return -EINVAL;
}

/* ---- secrets ----------------------------------------------------------------------------------- */

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Strict RFC 4648 base64 (padded, no whitespace). @return the bytes decoded into @out (at most
 * @cap), or -1. */
static int b64_decode(const char *s, size_t n, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (n == 0 || n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			v[k] = b64val(s[i + k]);
			if (s[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (v[k] < 0 || pad) {
				return -1; /* a bad character, or data after padding */
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		uint8_t b[3] = {(uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w};
		if (o + 3 - (size_t)pad > cap)
			return -1;
		memcpy(out + o, b, 3 - (size_t)pad);
		o += 3 - (size_t)pad;
	}
	return (int)o;
}

int nkv_dhchap_key_parse(const char *s, struct nkv_dhchap_key *k, const char **why)
{
	uint8_t buf[72];
	const char *dummy;
	int n;

	if (!why)
		why = &dummy;
	memset(k, 0, sizeof(*k));
	if (!s || strncmp(s, "DHHC-1:", 7) != 0) {
		*why = "it does not start with \"DHHC-1:\"";
		return -EINVAL;
	}
	s += 7;
	if (s[0] != '0' || s[1] < '0' || s[1] > '3' || s[2] != ':') {
		*why = "its hash indicator (hh in DHHC-1:hh:) is not 00, 01, 02 or 03";
		return -EINVAL;
	}
	k->hash = (uint8_t)(s[1] - '0');
	s += 3;
	size_t len = strlen(s);
	if (len && s[len - 1] == ':')
		len--;
	if (memchr(s, ':', len)) {
		*why = "it has text after the key's closing ':'";
		return -EINVAL;
	}
	if ((n = b64_decode(s, len, buf, sizeof(buf))) < 0) {
		*why = "its key is not valid base64";
		return -EINVAL;
	}
	if (n != 36 && n != 52 && n != 68) {
		*why = "its key is not 32, 48 or 64 bytes long (plus a 4-byte CRC)";
		nkv_dhchap_wipe(buf, sizeof(buf));
		return -EINVAL;
	}
	n -= 4;
	if (k->hash && (size_t)n != nkv_dhchap_hash_len(k->hash)) {
		*why = "its key length does not match its hash indicator (01: 32, 02: 48, 03: 64 bytes)";
		nkv_dhchap_wipe(buf, sizeof(buf));
		return -EINVAL;
	}
	/* CRC-32 as zlib and the Linux kernel compute it (reflected 04C11DB7h), stored little endian. */
	if (crc32_gzip_refl(0, buf, (uint64_t)n) != nkv_get32(buf + n)) {
		*why = "its CRC-32 does not match the key (mistyped or truncated?)";
		nkv_dhchap_wipe(buf, sizeof(buf));
		return -EINVAL;
	}
	k->len = (uint8_t)n;
	memcpy(k->key, buf, (size_t)n);
	nkv_dhchap_wipe(buf, sizeof(buf));
	return 0;
}

/* ---- HMAC and hashes ------------------------------------------------------------------------------ */

struct part {
	const void *p;
	size_t n;
};

/* HMAC-@hash(@key) over the concatenation of @parts. */
static int hmac(uint8_t hash, const uint8_t *key, size_t key_len, const struct part *parts, unsigned nparts,
		uint8_t *out)
{
	size_t len = nkv_dhchap_hash_len(hash), outl = 0;
	EVP_MAC *mac;
	EVP_MAC_CTX *ctx = NULL;
	int rc = -ENOMEM;

	if (!len || !key_len)
		return -EINVAL;
	if (!(mac = EVP_MAC_fetch(NULL, "HMAC", NULL)))
		return -EIO;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)g_hash[hash].digest, 0),
		OSSL_PARAM_construct_end(),
	};
	if ((ctx = EVP_MAC_CTX_new(mac)) && EVP_MAC_init(ctx, key, key_len, params) == 1) {
		rc = 0;
		for (unsigned i = 0; i < nparts && rc == 0; i++)
			if (parts[i].n && EVP_MAC_update(ctx, parts[i].p, parts[i].n) != 1)
				rc = -EIO;
		if (rc == 0 && (EVP_MAC_final(ctx, out, &outl, len) != 1 || outl != len))
			rc = -EIO;
	}
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return rc;
}

int nkv_dhchap_transform(const struct nkv_dhchap_key *k, const char *nqn, uint8_t *out)
{
	if (!k->len || !nqn)
		return -EINVAL;
	if (k->hash == 0) {
		memcpy(out, k->key, k->len);
		return k->len;
	}
	const struct part parts[] = {{nqn, strlen(nqn)}, {"NVMe-over-Fabrics", 17}};
	int rc = hmac(k->hash, k->key, k->len, parts, 2, out);
	return rc < 0 ? rc : (int)nkv_dhchap_hash_len(k->hash);
}

int nkv_dhchap_response(uint8_t hash, const uint8_t *tkey, size_t tkey_len, const uint8_t *chal, uint32_t seq,
			uint16_t tid, uint8_t scc, const char *label, const char *nqn1, const char *nqn2, uint8_t *out)
{
	uint8_t s[4], t[2], zero = 0;

	nkv_put32(s, seq);
	nkv_put16(t, tid);
	const struct part parts[] = {
		{chal, nkv_dhchap_hash_len(hash)}, {s, 4}, {t, 2}, {&scc, 1}, {label, strlen(label)},
		{nqn1, strlen(nqn1)}, {&zero, 1}, {nqn2, strlen(nqn2)},
	};
	return hmac(hash, tkey, tkey_len, parts, 8, out);
}

int nkv_dhchap_augment(uint8_t hash, const uint8_t *skey, size_t skey_len, const uint8_t *chal, uint8_t *out)
{
	size_t len = nkv_dhchap_hash_len(hash);
	uint8_t h[NKV_DHCHAP_MAX_HASH];
	unsigned hl = 0;

	if (!len)
		return -EINVAL;
	const EVP_MD *md = hash == NKV_DHCHAP_SHA256 ? EVP_sha256() : hash == NKV_DHCHAP_SHA384 ? EVP_sha384() : EVP_sha512();
	if (EVP_Digest(skey, skey_len, h, &hl, md, NULL) != 1 || hl != len)
		return -EIO;
	const struct part parts[] = {{chal, len}};
	int rc = hmac(hash, h, len, parts, 1, out);
	nkv_dhchap_wipe(h, sizeof(h));
	return rc;
}

/* ---- Diffie-Hellman ------------------------------------------------------------------------------- */

int nkv_dhchap_dh_gen(uint8_t group, struct evp_pkey_st **key, uint8_t *pub)
{
	EVP_PKEY_CTX *ctx;
	EVP_PKEY *k = NULL;
	BIGNUM *y = NULL;
	int rc = -ENOMEM;

	*key = NULL;
	if (group < 1 || group > 5)
		return -EINVAL;
	if (!(ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL)))
		return -ENOMEM;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)g_dh[group].name, 0),
		OSSL_PARAM_construct_end(),
	};
	if (EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_CTX_set_params(ctx, params) != 1 ||
	    EVP_PKEY_generate(ctx, &k) != 1)
		rc = -EIO;
	else if (EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PUB_KEY, &y) != 1 ||
		 BN_bn2binpad(y, pub, g_dh[group].len) != g_dh[group].len)
		rc = -EIO;
	else
		rc = 0;
	BN_free(y);
	EVP_PKEY_CTX_free(ctx);
	if (rc == 0)
		*key = k;
	else
		EVP_PKEY_free(k);
	return rc;
}

/* The peer's public value as a key of @group (not yet validated). */
static EVP_PKEY *peer_key(uint8_t group, const uint8_t *peer, size_t len)
{
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	EVP_PKEY *k = NULL;
	BIGNUM *y = BN_bin2bn(peer, (int)len, NULL);

	if (bld && y && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, g_dh[group].name, 0) == 1 &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PUB_KEY, y) == 1 && (params = OSSL_PARAM_BLD_to_param(bld)) &&
	    (ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL)) && EVP_PKEY_fromdata_init(ctx) == 1 &&
	    EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params) != 1)
		k = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	BN_free(y);
	return k;
}

int nkv_dhchap_dh_derive(struct evp_pkey_st *key, uint8_t group, const uint8_t *peer, size_t peer_len,
			 uint8_t *secret)
{
	EVP_PKEY_CTX *ctx = NULL;
	EVP_PKEY *pk;
	int rc = -EINVAL;

	if (!key || group < 1 || group > 5 || peer_len != (size_t)g_dh[group].len)
		return -EINVAL;
	if (!(pk = peer_key(group, peer, peer_len)))
		return -EINVAL;
	size_t n = (size_t)g_dh[group].len;
	/* The peer's value must lie in 2 .. p - 2 (OpenSSL's quick public check), so a host or a
	 * controller cannot force a degenerate secret (0, 1 or p - 1 to any power). The full check
	 * (y^q = 1 mod p) would cost a modular exponentiation with the whole q: 100+ ms per queue on
	 * ffdhe8192, on a reactor thread; for these safe-prime groups the range check leaves at most
	 * the order-2q subgroup, which leaks one bit of an ephemeral exponent used once. Padded to the
	 * size of p, as the Linux kernel's KPP produces it. */
	EVP_PKEY_CTX *vctx = EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL);
	bool valid = vctx && EVP_PKEY_public_check_quick(vctx) == 1;
	EVP_PKEY_CTX_free(vctx);
	if (!valid) {
		EVP_PKEY_free(pk);
		return -EINVAL;
	}
	if ((ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL)) && EVP_PKEY_derive_init(ctx) == 1 &&
	    EVP_PKEY_CTX_set_dh_pad(ctx, 1) == 1) {
		if (EVP_PKEY_derive_set_peer_ex(ctx, pk, 0) != 1)
			rc = -EINVAL;
		else if (EVP_PKEY_derive(ctx, secret, &n) != 1 || n != (size_t)g_dh[group].len)
			rc = -EIO;
		else
			rc = 0;
	} else {
		rc = -ENOMEM;
	}
	EVP_PKEY_CTX_free(ctx);
	EVP_PKEY_free(pk);
	return rc;
}

void nkv_dhchap_dh_free(struct evp_pkey_st *key)
{
	EVP_PKEY_free(key);
}

int nkv_dhchap_random(void *buf, size_t n)
{
	return RAND_bytes(buf, (int)n) == 1 ? 0 : -EIO;
}

bool nkv_dhchap_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

void nkv_dhchap_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}
