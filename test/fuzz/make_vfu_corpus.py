#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Write the seed corpus of fuzz_vfu (test/fuzz/corpus_vfu): inputs in its format (see fuzz_vfu.c)
that negotiate, query every region and IRQ type, read and write config space, map and unmap DMA,
bind, mask and trigger vectors, bring the controller up and run Identify, queue creation, a KV
Store and Retrieve from SQEs in mapped memory, reset and hang up mid-I/O, and send broken frames.

Usage: make_vfu_corpus.py DIR
"""
import hashlib
import os
import struct
import sys

POLL, RAW, CMD, MEMW, BARW, RESET, HANGUP = range(7)
VERSION, DMA_MAP, DMA_UNMAP, GET_INFO, REGION_INFO, IO_FDS, IRQ_INFO, SET_IRQS, REGION_READ, REGION_WRITE = range(1, 11)
DEVICE_RESET = 13
IOVA_A = 0x10000000
PG = 4096


def cmd(c, payload=b"", flags=0, fdsel=3):
    return bytes([CMD, c, flags]) + struct.pack("<H", len(payload)) + bytes([fdsel]) + payload


def raw(b, fdsel=3):
    return bytes([RAW]) + struct.pack("<H", len(b)) + bytes([fdsel]) + b


def poll(n=8):
    return bytes([POLL, n])


def memw(pg, off, data):
    return bytes([MEMW, pg]) + struct.pack("<H", off) + bytes([len(data)]) + data


def barw(off, v):
    return bytes([BARW]) + struct.pack("<HI", off // 4, v)


def rr(region, off, count):
    return cmd(REGION_READ, struct.pack("<QII", off, region, count))


def rw(region, off, data):
    return cmd(REGION_WRITE, struct.pack("<QII", off, region, len(data)) + data)


def sqe(opc, cid, nsid=0, prp1=0, prp2=0, cdw10=0, cdw11=0, cdw12=0, key=b""):
    b = bytearray(64)
    b[0] = opc
    struct.pack_into("<HI", b, 2, cid, nsid)
    struct.pack_into("<QQ", b, 24, prp1, prp2)
    struct.pack_into("<III", b, 40, cdw10, cdw11, cdw12)
    if key:  # KV: key length in CDW11, the key in CDW2-3 and CDW14-15
        k = key.ljust(16, b"\0")
        b[8:16] = k[:8]
        b[56:64] = k[8:16]
        struct.pack_into("<I", b, 44, len(key) | cdw11)
    return bytes(b)


def submit(q, slot, s, pg):
    return memw(pg, slot * 64, s) + barw(0x1000 + 8 * q, slot + 1)


def seeds():
    out = {}
    out["none"] = bytes([0]) + cmd(GET_INFO, struct.pack("<IIII", 16, 0, 0, 0)) + \
        cmd(VERSION, struct.pack("<HH", 0, 0) + b'{"capabilities":{"max_msg_fds":"x"}}\0') + \
        cmd(VERSION, struct.pack("<HH", 1, 0)) + cmd(VERSION, struct.pack("<HH", 0, 0) + b"{}\0")
    info = b"".join(cmd(REGION_INFO, struct.pack("<IIIIQQ", 64, 0, i, 0, 0, 0)) for i in range(10))
    info += b"".join(cmd(IRQ_INFO, struct.pack("<IIII", 16, 0, i, 0)) for i in range(6))
    out["info"] = bytes([1]) + cmd(GET_INFO, struct.pack("<IIII", 16, 0, 0, 0)) + info
    cfg = rr(7, 0, 256) + rw(7, 0x10, b"\xff" * 8) + rr(7, 0x10, 8) + rw(7, 0x04, b"\x06\x04") + \
        rw(7, 0x52, b"\x00\xc0") + rr(7, 0x40, 64) + rr(7, 0xffc, 8) + rr(4, 0, 64) + rw(4, 12, b"\0\0\0\0") + \
        rr(4, 0x2000, 8) + rr(0, 0, 64) + rw(0, 0x14, b"\x01\0\0\0") + rr(0, 0x1000, 16)
    out["config"] = bytes([1]) + cfg
    dma = cmd(DMA_MAP, struct.pack("<IIQQQ", 32, 3, 0, 0x100000, 4 * PG), fdsel=4 | 0) + \
        cmd(DMA_MAP, struct.pack("<IIQQQ", 32, 3, 0, 0x102000, 4 * PG), fdsel=4 | 0) + \
        cmd(DMA_MAP, struct.pack("<IIQQQ", 32, 3, 0, 0x200000, 4 * PG), fdsel=4 | 1) + \
        cmd(DMA_MAP, struct.pack("<IIQQQ", 32, 1, 0, 0x300000, 4 * PG)) + \
        cmd(DMA_MAP, struct.pack("<IIQQQ", 32, 3, 0, 0x400000, PG), fdsel=8 | 0) + \
        cmd(DMA_UNMAP, struct.pack("<IIQQ", 24, 0, 0x300000, 4 * PG)) + \
        cmd(DMA_UNMAP, struct.pack("<IIQQ", 24, 0, 0x100000, 8 * PG)) + \
        cmd(DMA_UNMAP, struct.pack("<IIQQ", 24, 2, 0, 0))
    out["dma"] = bytes([1]) + dma
    irq = cmd(SET_IRQS, struct.pack("<IIIII", 20, 0x21, 2, 0, 2)) + \
        cmd(SET_IRQS, struct.pack("<IIIII", 20, 0x09, 2, 1, 1)) + \
        cmd(SET_IRQS, struct.pack("<IIIII", 20, 0x21, 2, 1, 1)) + rr(4, 0x2000, 8) + \
        cmd(SET_IRQS, struct.pack("<IIIII", 22, 0x12, 2, 0, 2) + b"\x01\x01") + \
        cmd(SET_IRQS, struct.pack("<IIIII", 20, 0x24, 2, 3, 1), fdsel=4 | 2) + \
        cmd(SET_IRQS, struct.pack("<IIIII", 20, 0x21, 2, 0, 0))
    out["irqs"] = bytes([9]) + irq
    # bring-up: Identify, Create I/O CQ 1 (A page 2, IEN, vector 1) and SQ 1 (A page 3), Store, Retrieve
    up = submit(0, 0, sqe(0x06, 1, prp1=IOVA_A + 8 * PG, cdw10=1), 0) + poll(16)
    up += submit(0, 1, sqe(0x05, 2, prp1=IOVA_A + 2 * PG, cdw10=(15 << 16) | 1, cdw11=(1 << 16) | 3), 0) + poll(8)
    up += submit(0, 2, sqe(0x01, 3, prp1=IOVA_A + 3 * PG, cdw10=(15 << 16) | 1, cdw11=(1 << 16) | 1), 0) + poll(8)
    up += memw(9, 0, b"v" * 200)
    up += submit(1, 0, sqe(0x01, 1, nsid=1, prp1=IOVA_A + 9 * PG, cdw10=200, key=b"seed-key"), 3) + poll(16)
    up += submit(1, 1, sqe(0x02, 2, nsid=1, prp1=IOVA_A + 10 * PG, cdw10=4096, key=b"seed-key"), 3) + poll(16)
    out["bringup"] = bytes([15]) + up
    out["reset"] = bytes([15]) + up + bytes([RESET]) + poll(4) + rr(0, 0x1c, 4) + \
        cmd(DMA_UNMAP, struct.pack("<IIQQ", 24, 0, IOVA_A, 64 * PG))
    out["hangup"] = bytes([15]) + up[:len(up) // 2] + \
        submit(1, 2, sqe(0x01, 3, nsid=1, prp1=IOVA_A + 9 * PG, cdw10=200, key=b"late"), 3) + bytes([HANGUP]) + poll(8)
    out["frames"] = bytes([1]) + raw(struct.pack("<HHIII", 1, 4, 8, 0, 0)) + \
        raw(struct.pack("<HHIII", 2, 4, 1 << 30, 0, 0))
    out["partial"] = bytes([1]) + raw(struct.pack("<HHIII", 3, 4, 32, 0, 0)[:10]) + poll(2) + \
        raw(struct.pack("<HHIII", 3, 4, 32, 0, 0)[10:] + struct.pack("<IIII", 16, 0, 0, 0)) + \
        cmd(99, b"\0" * 8) + cmd(IO_FDS, b"\0" * 16) + cmd(GET_INFO, b"\0" * 16, flags=0x10) + \
        cmd(GET_INFO, struct.pack("<IIII", 16, 0, 0, 0), fdsel=12 | 2)
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus_vfu")
    os.makedirs(d, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
