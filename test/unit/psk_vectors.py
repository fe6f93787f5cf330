#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""psk_vectors.py - checks rados-nkv's NVMe/TCP TLS PSK code (src/common/nvme_psk.c) against an
independent implementation: HKDF (RFC 5869) and HKDF-Expand-Label (RFC 8446 7.1) written here from
Python's hmac/hashlib, the identity and derivation rules of the NVMe/TCP transport specification
(TP 8011 / TP 8018) as Linux's host tools apply them, and zlib's CRC-32 for the interchange format.

usage: psk_vectors.py PATH_TO_psk_derive [N_RANDOM]
psk_derive KEY VERSION HOSTNQN SUBNQN prints the identity and the TLS PSK (hex), or "error -N".
Exit 0 when every case agrees, 1 otherwise.
"""
import base64
import hashlib
import hmac
import os
import random
import struct
import subprocess
import sys
import zlib

HASH = {1: hashlib.sha256, 2: hashlib.sha384}


def hkdf_extract(h, salt, ikm):
    return hmac.new(salt if salt else b"\0" * h().digest_size, ikm, h).digest()


def hkdf_expand(h, prk, info, length):
    out, t, i = b"", b"", 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes([i]), h).digest()
        out += t
        i += 1
    return out[:length]


def expand_label(h, secret, label, context, length):
    full = b"tls13 " + label
    info = struct.pack(">H", length) + bytes([len(full)]) + full + bytes([len(context)]) + context
    return hkdf_expand(h, hkdf_extract(h, b"", secret), info, length)


def interchange(key, hh):
    raw = key + struct.pack("<I", zlib.crc32(key) & 0xFFFFFFFF)
    return "NVMeTLSkey-1:%02x:%s:" % (hh, base64.b64encode(raw).decode())


def derive(key, hh, version, host, sub):
    """The identity and TLS PSK for configured key @key with hash indicator hh."""
    cipher = hh if hh else (1 if len(key) == 32 else 2)
    h = HASH[cipher]
    retained = key if hh == 0 else expand_label(HASH[hh], key, b"HostNQN", host.encode(), len(key))
    if version == 0:
        identity = "NVMe0R%02d %s %s" % (cipher, host, sub)
        context = identity.encode()
    else:
        mac = hmac.new(retained, ("%s %s NVMe-over-Fabrics" % (host, sub)).encode(), h).digest()
        digest = base64.b64encode(mac).decode()
        identity = "NVMe1R%02d %s %s %s" % (cipher, host, sub, digest)
        context = ("%02d %s" % (cipher, digest)).encode()
    return identity, expand_label(h, retained, b"nvme-tls-psk", context, len(key)).hex()


def run(tool, key, version, host, sub):
    out = subprocess.run([tool, key, str(version), host, sub], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()


def main():
    tool = sys.argv[1]
    nrand = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rng = random.Random(8011)
    cases = []
    # The configured key of libnvme's own test vectors, then random keys and NQNs.
    fixed = bytes.fromhex("5512DBB6737D0106F65975B773DFB011FFC344BCF442E2DD6D8BC4870B5D5B03")
    cases.append((fixed, 1, "nqn.psk-test-host", "nqn.psk-test-subsys"))
    cases.append((fixed + fixed[16:], 2, "nqn.psk-test-host", "nqn.psk-test-subsys"))
    cases.append((fixed, 0, "nqn.psk-test-host", "nqn.psk-test-subsys"))
    cases.append((fixed + fixed[16:], 0, "nqn.psk-test-host", "nqn.psk-test-subsys"))
    for _ in range(nrand):
        hh = rng.choice([0, 1, 2])
        n = 48 if hh == 2 else 32 if hh == 1 else rng.choice([32, 48])
        key = bytes(rng.getrandbits(8) for _ in range(n))
        host = "nqn.2014-08.org.nvmexpress:uuid:%08x-0000-4000-8000-%012x" % (rng.getrandbits(32), rng.getrandbits(48))
        sub = "nqn.2026-11.io.example:" + "".join(rng.choice("abcdefgh0123-.") for _ in range(rng.randint(1, 60)))
        cases.append((key, hh, host, sub))
    fails = checks = 0
    for key, hh, host, sub in cases:
        s = interchange(key, hh)
        for version in (0, 1):
            want = list(derive(key, hh, version, host, sub))
            got = run(tool, s, version, host, sub)
            checks += 1
            if got != want:
                fails += 1
                print("MISMATCH key %s version %d host %s sub %s\n  want %s\n  got  %s" % (s, version, host, sub, want, got))
    # A version 0 identity is the HKDF context: longer than 255 bytes cannot be encoded.
    long_sub = "nqn.2026-11.io.example:" + "x" * 200
    got = run(tool, interchange(fixed, 1), 0, "nqn.2014-08.org.nvmexpress:uuid:" + "a" * 36, long_sub)
    checks += 1
    if got != ["error -%d" % 36]:  # ENAMETOOLONG
        fails += 1
        print("MISMATCH: an identity over 255 bytes gave %s" % got)
    print("%d checks, %d mismatches (%d keys: libnvme's test key and %d random ones)" % (checks, fails, len(cases), nrand))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
