/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvme_psk.h - NVMe/TCP TLS pre-shared keys (TP 8011, NVMe/TCP transport 1.0c and later): the PSK
 * interchange format "NVMeTLSkey-1:hh:<base64(PSK || CRC-32)>:", the PSK identity and the derivation
 * configured PSK -> retained PSK -> TLS PSK, computed as the specification and Linux's host tools
 * (nvme-cli / libnvme) do, so a key made with `nvme gen-tls-key` works unchanged on both ends.
 *
 *   retained = hh 00: the configured PSK as is;
 *              hh 01/02: HKDF-Expand-Label(HKDF-Extract(0, configured), "HostNQN", host NQN, len)
 *              with SHA-256 / SHA-384
 *   identity = "NVMe0Rxx <hostnqn> <subnqn>"               (version 0, TP 8011: Linux's default)
 *              "NVMe1Rxx <hostnqn> <subnqn> <PSK digest>"  (version 1, TP 8018)
 *              xx = 01 (SHA-256: TLS_AES_128_GCM_SHA256) or 02 (SHA-384: TLS_AES_256_GCM_SHA384),
 *              from hh, or for hh 00 from the key length (32 or 48 bytes)
 *   digest   = base64(HMAC(retained, "<hostnqn> <subnqn> NVMe-over-Fabrics"))  (version 1)
 *   TLS PSK  = HKDF-Expand-Label(HKDF-Extract(0, retained), "nvme-tls-psk", context, len), context =
 *              the identity (version 0) or "xx <digest>" (version 1)
 *
 * HKDF-Expand-Label is TLS 1.3's (RFC 8446 7.1: length, "tls13 " + label, context, each with its
 * length), HKDF RFC 5869's, from OpenSSL's libcrypto. Thread-safe (no shared state).
 */
#ifndef NKV_NVME_PSK_H
#define NKV_NVME_PSK_H

#include <stddef.h>
#include <stdint.h>

#define NKV_PSK_MAX 48       /* bytes of the longest PSK (SHA-384) */
#define NKV_PSK_ID_MAX 640   /* "NVMe1R02 " + two NQNs of 223 bytes + a 64-character digest, with room */
#define NKV_PSK_STR_MAX 96   /* the longest interchange string (48-byte key) and its NUL */

/** A configured PSK, as the interchange format carries it. */
struct nkv_psk {
	uint8_t key[NKV_PSK_MAX];
	uint8_t len;   /* 32 or 48 */
	uint8_t hmac;  /* hh: 0 = use as is, 1 = SHA-256, 2 = SHA-384 */
};

/** What one TLS connection uses: the PSK identity and the TLS PSK derived for it. */
struct nkv_tls_psk {
	char identity[NKV_PSK_ID_MAX];
	uint8_t key[NKV_PSK_MAX];
	uint8_t len;     /* = the configured PSK's length */
	uint8_t cipher;  /* 1: SHA-256, TLS_AES_128_GCM_SHA256; 2: SHA-384, TLS_AES_256_GCM_SHA384 */
};

/**
 * Parse an interchange string (exactly "NVMeTLSkey-1:hh:BASE64:" with nothing around it).
 * @return 0, -EINVAL (not that format: prefix, hh other than 00/01/02, bad base64), -EMSGSIZE (the
 * key is not 32 or 48 bytes, or not the length its hh names: 01 needs 32, 02 needs 48), -EBADMSG
 * (the CRC-32 after the key does not match: a mistyped or truncated key).
 */
int nkv_psk_parse(const char *s, struct nkv_psk *out);

/**
 * A key given on a command line or in a configuration: the interchange string itself, or "@PATH"
 * naming a file that holds it (surrounding whitespace ignored; at most 4 KiB).
 * @return as nkv_psk_parse(), or the -errno of opening/reading the file (-ENOENT, -EACCES, -EFBIG).
 */
int nkv_psk_load(const char *spec, struct nkv_psk *out);

/** Write @k in the interchange format into @out (NKV_PSK_STR_MAX bytes suffice). @return its length, -EINVAL. */
int nkv_psk_format(const struct nkv_psk *k, char *out, size_t cap);

/** A one-line reason for a negative return of nkv_psk_parse()/nkv_psk_load()/nkv_psk_derive(). */
const char *nkv_psk_strerror(int rc);

/** The hash the identity and cipher suite use: 1 (SHA-256) or 2 (SHA-384). */
uint8_t nkv_psk_cipher(const struct nkv_psk *k);

/**
 * Derive the PSK identity and TLS PSK of configured key @k for host @hostnqn and subsystem @subnqn,
 * identity version @version (0: NVMe0Rxx, 1: NVMe1Rxx with the PSK digest).
 * @return 0, -EINVAL (version above 1, an empty or over-long NQN, a bad key), -ENAMETOOLONG (a
 * version 0 identity longer than 255 bytes: it is the HKDF context, whose length is one byte),
 * -ENOMEM / -EIO (libcrypto failed).
 */
int nkv_psk_derive(const struct nkv_psk *k, unsigned version, const char *hostnqn, const char *subnqn,
		   struct nkv_tls_psk *out);

/** Overwrite key material (not optimised away). */
void nkv_psk_wipe(void *p, size_t n);

#endif
