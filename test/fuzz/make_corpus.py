#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz_sqe: one file per interesting command sequence.
Record: queue byte (0 admin, 1 I/O), 64-byte SQE, u16 LE data length, data."""
import os, struct, sys

def sqe(opc, nsid=0, cdw10=0, cdw11=0, key=b"", cdw12=0, cdw13=0, cdw14=0, flags=0):
    k = key.ljust(16, b"\0")
    return (struct.pack("<BBHI", opc, flags, 0, nsid) + k[:8] + bytes(8) + bytes(16) +
            struct.pack("<II", cdw10, cdw11 | len(key) if key else cdw11) +
            struct.pack("<II", cdw12, cdw13) + (k[8:] if key else struct.pack("<II", cdw14, 0)))

def rec(q, s, data=b"", dlen=None):
    assert len(s) == 64
    return bytes([q]) + s + struct.pack("<H", len(data) if dlen is None else dlen) + data

seeds = {
    "store_retrieve": rec(1, sqe(1, 1, 5, key=b"k1"), b"hello") + rec(1, sqe(2, 1, 16, key=b"k1"), dlen=16),
    "list": rec(1, sqe(1, 1, 1, key=b"\0\1"), b"x") + rec(1, sqe(6, 1, 64, key=b""), dlen=64),
    "options": rec(1, sqe(1, 1, 1, 0x200, key=b"o"), b"a") + rec(1, sqe(1, 1, 1, 0x300, key=b"o"), b"b"),
    "delete_exist": rec(1, sqe(0x10, 1, key=b"k1")) + rec(1, sqe(0x14, 1, key=b"k1")),
    "readonly": rec(1, sqe(1, 2, 1, key=b"r"), b"r"),
    "identify": b"".join(rec(0, sqe(6, n, cns, csi << 24), dlen=4096)
                         for cns, n, csi in [(1, 0, 0), (2, 0, 0), (3, 1, 0), (5, 1, 1), (6, 0, 1), (7, 0, 1), (8, 1, 0), (0x1c, 0, 0)]),
    "logs": b"".join(rec(0, sqe(2, 0xffffffff, lid | ((n // 4 - 1) << 16), cdw12=ofs, cdw14=csi << 24), dlen=n)
                     for lid, n, ofs, csi in [(0, 1024, 0, 0), (2, 512, 0, 0), (2, 64, 64, 0), (3, 512, 0, 0), (5, 4096, 0, 1)]),
    "features": b"".join(rec(0, sqe(op, 0, fid, v), dlen=16)
                         for op, fid, v in [(9, 7, 0x30003), (10, 7, 0), (9, 0xf, 1500), (9, 0x19, 0), (9, 0x20, 0), (10, 0x81, 1), (10, 0x20 | 0x300, 0)]),
    "bad": rec(1, sqe(0x81, 1, key=b"k")) + rec(1, sqe(2, 99, 8, key=b"k"), dlen=8) + rec(1, sqe(2, 1, 8, 17), dlen=8)
           + rec(1, sqe(2, 1, 8, key=b"k", flags=1), dlen=8) + rec(0, sqe(0x42)),
}
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
