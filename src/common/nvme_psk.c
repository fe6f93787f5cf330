/* SPDX-License-Identifier: Apache-2.0 */
/* nvme_psk.c - the NVMe/TCP PSK interchange format, PSK identities and TLS PSK derivation (nvme_psk.h). */
#include "common/nvme_psk.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>

#define PREFIX "NVMeTLSkey-1:"
#define NQN_MAX 223

void nkv_psk_wipe(void *p, size_t n)
{
	OPENSSL_cleanse(p, n);
}

/* CRC-32 (IEEE 802.3, zlib's crc32()): what the interchange format appends to the key, little-endian. */
static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

static int b64val(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* Strict base64 (RFC 4648 with padding): @n a multiple of 4, '=' only at the end. @return bytes or -EINVAL. */
static int b64_decode(const char *s, size_t n, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (n == 0 || n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64val(s[i + k])) < 0)
				return -EINVAL; /* a letter after '=', or not in the alphabet */
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		if (o + 3 - (size_t)pad > cap)
			return -EINVAL;
		out[o++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)w;
	}
	return (int)o;
}

int nkv_psk_parse(const char *s, struct nkv_psk *out)
{
	uint8_t raw[NKV_PSK_MAX + 4 + 3];
	size_t n;
	int len;

	memset(out, 0, sizeof(*out));
	if (!s || strncmp(s, PREFIX, strlen(PREFIX)) != 0)
		return -EINVAL;
	s += strlen(PREFIX);
	if (s[0] != '0' || s[1] < '0' || s[1] > '2' || s[2] != ':')
		return -EINVAL;
	out->hmac = (uint8_t)(s[1] - '0');
	s += 3;
	n = strlen(s);
	if (n < 2 || s[n - 1] != ':')
		return -EINVAL;
	if ((len = b64_decode(s, n - 1, raw, sizeof(raw))) < 0)
		return len;
	len -= 4; /* the CRC-32 */
	if ((len != 32 && len != 48) || (out->hmac == 1 && len != 32) || (out->hmac == 2 && len != 48)) {
		nkv_psk_wipe(raw, sizeof(raw));
		return -EMSGSIZE;
	}
	uint32_t crc = (uint32_t)raw[len] | (uint32_t)raw[len + 1] << 8 | (uint32_t)raw[len + 2] << 16 |
		       (uint32_t)raw[len + 3] << 24;
	if (crc != crc32_ieee(raw, (size_t)len)) {
		nkv_psk_wipe(raw, sizeof(raw));
		return -EBADMSG;
	}
	memcpy(out->key, raw, (size_t)len);
	out->len = (uint8_t)len;
	nkv_psk_wipe(raw, sizeof(raw));
	return 0;
}

int nkv_psk_load(const char *spec, struct nkv_psk *out)
{
	char buf[4097];
	ssize_t n = 0, r;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if (!spec)
		return -EINVAL;
	if (spec[0] != '@')
		return nkv_psk_parse(spec, out);
	if ((fd = open(spec + 1, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	while (n < (ssize_t)sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - (size_t)n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			close(fd);
			return rc;
		}
		n += r;
	}
	close(fd);
	if (n == (ssize_t)sizeof(buf))
		return -EFBIG;
	buf[n] = '\0';
	char *b = buf, *e = buf + n;
	while (*b && isspace((unsigned char)*b))
		b++;
	while (e > b && isspace((unsigned char)e[-1]))
		*--e = '\0';
	rc = nkv_psk_parse(b, out);
	nkv_psk_wipe(buf, sizeof(buf));
	return rc;
}

int nkv_psk_format(const struct nkv_psk *k, char *out, size_t cap)
{
	uint8_t raw[NKV_PSK_MAX + 4];
	char b64[80];

	if ((k->len != 32 && k->len != 48) || k->hmac > 2 || (k->hmac == 1 && k->len != 32) ||
	    (k->hmac == 2 && k->len != 48))
		return -EINVAL;
	uint32_t crc = crc32_ieee(k->key, k->len);
	memcpy(raw, k->key, k->len);
	for (int i = 0; i < 4; i++)
		raw[k->len + i] = (uint8_t)(crc >> (8 * i));
	EVP_EncodeBlock((unsigned char *)b64, raw, k->len + 4);
	int n = snprintf(out, cap, PREFIX "%02u:%s:", (unsigned)k->hmac, b64);
	nkv_psk_wipe(raw, sizeof(raw));
	nkv_psk_wipe(b64, sizeof(b64));
	return n < 0 || (size_t)n >= cap ? -EINVAL : n;
}

const char *nkv_psk_strerror(int rc)
{
	switch (rc) {
	case -EINVAL: return "not a PSK in the interchange format NVMeTLSkey-1:hh:BASE64: (hh 00, 01 or 02)";
	case -EMSGSIZE: return "the key is not 32 or 48 bytes, or not the length its hh names (01: 32, 02: 48)";
	case -EBADMSG: return "the key's CRC-32 does not match (mistyped or truncated)";
	case -ENAMETOOLONG: return "host and subsystem NQN together are too long for a version 0 PSK identity (255 bytes)";
	case -EFBIG: return "the key file is larger than 4 KiB";
	default: return strerror(rc < 0 ? -rc : rc);
	}
}

uint8_t nkv_psk_cipher(const struct nkv_psk *k)
{
	return k->hmac ? k->hmac : k->len == 48 ? 2 : 1;
}

static const char *md_name(uint8_t hash)
{
	return hash == 2 ? "SHA384" : "SHA256";
}

/* HKDF-Expand-Label(HKDF-Extract(salt 0, @ikm), @label, @ctx, @len) with hash @hash (RFC 8446 7.1). */
static int expand_label(uint8_t hash, const uint8_t *ikm, size_t ikm_len, const char *label, const char *ctx,
			size_t ctx_len, uint8_t *out, size_t len)
{
	uint8_t info[2 + 1 + 255 + 1 + 255];
	size_t ll = 6 + strlen(label), n = 0;
	int rc = -EIO;

	if (ll > 255 || ctx_len > 255)
		return -ENAMETOOLONG;
	info[n++] = (uint8_t)(len >> 8);
	info[n++] = (uint8_t)len;
	info[n++] = (uint8_t)ll;
	memcpy(info + n, "tls13 ", 6);
	memcpy(info + n + 6, label, ll - 6);
	n += ll;
	info[n++] = (uint8_t)ctx_len;
	memcpy(info + n, ctx, ctx_len);
	n += ctx_len;

	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kc = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)md_name(hash), 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n),
		OSSL_PARAM_construct_end(),
	};
	if (!kc)
		rc = -ENOMEM;
	else if (EVP_KDF_derive(kc, out, len, params) == 1)
		rc = 0;
	EVP_KDF_CTX_free(kc);
	EVP_KDF_free(kdf);
	return rc;
}

static bool nqn_ok(const char *s)
{
	size_t n = s ? strnlen(s, NQN_MAX + 1) : 0;
	return n > 0 && n <= NQN_MAX && !strchr(s, ' ');
}

int nkv_psk_derive(const struct nkv_psk *k, unsigned version, const char *hostnqn, const char *subnqn,
		   struct nkv_tls_psk *out)
{
	uint8_t retained[NKV_PSK_MAX], mac[EVP_MAX_MD_SIZE];
	char ctx[NKV_PSK_ID_MAX], digest[100];
	uint8_t cipher = nkv_psk_cipher(k);
	unsigned maclen = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (version > 1 || !nqn_ok(hostnqn) || !nqn_ok(subnqn) || (k->len != 32 && k->len != 48) || k->hmac > 2)
		return -EINVAL;
	/* The retained PSK: the configured one, or bound to the host NQN by HKDF. */
	if (k->hmac == 0)
		memcpy(retained, k->key, k->len);
	else if ((rc = expand_label(k->hmac, k->key, k->len, "HostNQN", hostnqn, strlen(hostnqn), retained, k->len)) < 0)
		goto out;
	if (version == 0) {
		snprintf(out->identity, sizeof(out->identity), "NVMe0R%02u %s %s", cipher, hostnqn, subnqn);
		snprintf(ctx, sizeof(ctx), "%s", out->identity);
	} else {
		/* The PSK digest binds the identity to the key: HMAC over both NQNs and a fixed seed. */
		char msg[2 * NQN_MAX + 32];
		int ml = snprintf(msg, sizeof(msg), "%s %s NVMe-over-Fabrics", hostnqn, subnqn);
		if (!HMAC(cipher == 2 ? EVP_sha384() : EVP_sha256(), retained, k->len, (const uint8_t *)msg, (size_t)ml,
			  mac, &maclen)) {
			rc = -EIO;
			goto out;
		}
		EVP_EncodeBlock((unsigned char *)digest, mac, (int)maclen);
		snprintf(out->identity, sizeof(out->identity), "NVMe1R%02u %s %s %s", cipher, hostnqn, subnqn, digest);
		snprintf(ctx, sizeof(ctx), "%02u %s", cipher, digest);
	}
	rc = expand_label(cipher, retained, k->len, "nvme-tls-psk", ctx, strlen(ctx), out->key, k->len);
	if (rc == 0) {
		out->len = k->len;
		out->cipher = cipher;
	}
out:
	nkv_psk_wipe(retained, sizeof(retained));
	nkv_psk_wipe(mac, sizeof(mac));
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}
