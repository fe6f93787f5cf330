/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dhchap.h - the computations of DH-HMAC-CHAP (NVMe in-band authentication, base specification 2.0
 * section 8.13), shared by the target (src/core/auth.c) and libnkv (src/client/auth.c): secrets in
 * the "DHHC-1:hh:<base64(key || CRC-32)>:" representation, the key transformation, responses,
 * augmented challenges and the finite-field Diffie-Hellman exchange on the RFC 7919 groups. Every
 * primitive is OpenSSL 3's (EVP_MAC HMAC, EVP_Digest, EVP_PKEY DH on named groups, RAND_bytes);
 * nothing here implements a hash, a MAC or modular arithmetic. Wire formats: docs/nvme-kv-wire.md C.12.
 * All functions are thread-safe (no shared state).
 */
#ifndef NKV_COMMON_DHCHAP_H
#define NKV_COMMON_DHCHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NKV_DHCHAP_MAX_HASH 64    /* longest digest (SHA-512) */
#define NKV_DHCHAP_MAX_DH 1024    /* largest DH value (ffdhe8192) */
#define NKV_DHCHAP_SECRET_MAX 128 /* "DHHC-1:03:" + 92 base64 characters + ":" and the NUL, rounded up */

/* Hash function identifiers (HashID). */
#define NKV_DHCHAP_SHA256 1
#define NKV_DHCHAP_SHA384 2
#define NKV_DHCHAP_SHA512 3
/* Diffie-Hellman group identifiers (DHgID). */
#define NKV_DHCHAP_DH_NULL 0
#define NKV_DHCHAP_FFDHE2048 1
#define NKV_DHCHAP_FFDHE3072 2
#define NKV_DHCHAP_FFDHE4096 3
#define NKV_DHCHAP_FFDHE6144 4
#define NKV_DHCHAP_FFDHE8192 5

/** A secret as configured: the key bytes and the hash of its transformation (hh; 0 = none). */
struct nkv_dhchap_key {
	uint8_t hash;      /* hh: 0 (used as is), or the HashID that transforms it */
	uint8_t len;       /* 32, 48 or 64 */
	uint8_t key[64];
};

/**
 * Parse "DHHC-1:hh:<base64>:" (the trailing ':' may be left out, as Linux accepts): hh 00-03, the
 * base64 of a 32, 48 or 64-byte key followed by its CRC-32 (little endian); with hh 01/02/03 the key
 * must be as long as that hash's digest (32/48/64 bytes). @why (may be NULL) gets a static
 * explanation on failure ("its CRC-32 does not match the key ..."), never the secret. @return 0 or -EINVAL.
 */
int nkv_dhchap_key_parse(const char *s, struct nkv_dhchap_key *k, const char **why);

/**
 * The transformed key (8.13.5.7): the key itself when hh is 0, else HMAC-hh(key, @nqn ||
 * "NVMe-over-Fabrics"), the host's key with the host NQN and the controller's with the subsystem
 * NQN. @out holds NKV_DHCHAP_MAX_HASH bytes. @return its length, or -EINVAL / -ENOMEM.
 */
int nkv_dhchap_transform(const struct nkv_dhchap_key *k, const char *nqn, uint8_t *out);

/** Digest length of HashID @id (32, 48, 64), or 0 for an unknown one. */
size_t nkv_dhchap_hash_len(uint8_t id);
/** "sha256", "sha384", "sha512", or NULL. */
const char *nkv_dhchap_hash_name(uint8_t id);
/** The HashID of "sha256"/"sha384"/"sha512" (also "hmac(sha256)"...). @return 1..3 or -EINVAL. */
int nkv_dhchap_hash_id(const char *name);
/** Bytes of a DH value of group @id (256..1024; 0 for the null group), or -EINVAL for an unknown one. */
int nkv_dhchap_dh_len(uint8_t id);
/** "null", "ffdhe2048", ..., "ffdhe8192", or NULL. */
const char *nkv_dhchap_dh_name(uint8_t id);
/** The DHgID of "null", "ffdhe2048", ... "ffdhe8192". @return 0..5 or -EINVAL. */
int nkv_dhchap_dh_id(const char *name);

/**
 * The response of one side (8.13.5.5/6): HMAC(@tkey, @chal || le32(@seq) || le16(@tid) || @scc ||
 * @label || @nqn1 || 00h || @nqn2), with @label "HostHost" (host: NQNh, NQNc) or "Controller"
 * (controller: NQNc, NQNh), @chal the challenge (augmented when a DH group is used), hash_len(@hash)
 * bytes. @out holds that many. @return 0 or -EINVAL / -ENOMEM.
 */
int nkv_dhchap_response(uint8_t hash, const uint8_t *tkey, size_t tkey_len, const uint8_t *chal, uint32_t seq,
			uint16_t tid, uint8_t scc, const char *label, const char *nqn1, const char *nqn2, uint8_t *out);

/** The augmented challenge: HMAC(H(@skey), @chal), hash_len(@hash) bytes each. @return 0 or -errno. */
int nkv_dhchap_augment(uint8_t hash, const uint8_t *skey, size_t skey_len, const uint8_t *chal, uint8_t *out);

struct evp_pkey_st; /* OpenSSL's EVP_PKEY: a DH key pair of one exchange */

/**
 * A fresh ephemeral key pair on group @group (1..5); its public value, big endian and padded to the
 * group's size (nkv_dhchap_dh_len), goes to @pub. @return 0 (free *@key with nkv_dhchap_dh_free) or
 * -EINVAL / -ENOMEM / -EIO.
 */
int nkv_dhchap_dh_gen(uint8_t group, struct evp_pkey_st **key, uint8_t *pub);

/**
 * The shared secret g^xy mod p with the peer's public value @peer (exactly the group's size; it
 * is checked to lie in 2 .. p - 2), padded to the group's size, into @secret.
 * @return 0, -EINVAL (a value of the wrong length or outside the group), -ENOMEM, -EIO.
 */
int nkv_dhchap_dh_derive(struct evp_pkey_st *key, uint8_t group, const uint8_t *peer, size_t peer_len,
			 uint8_t *secret);

/** Free a key pair (NULL is fine). */
void nkv_dhchap_dh_free(struct evp_pkey_st *key);

/** @n random bytes from OpenSSL's CSPRNG. @return 0 or -EIO. */
int nkv_dhchap_random(void *buf, size_t n);

/** Compare @n bytes in constant time. @return true when equal. */
bool nkv_dhchap_equal(const void *a, const void *b, size_t n);

/** Erase secret material (not optimised away). */
void nkv_dhchap_wipe(void *p, size_t n);

#endif
