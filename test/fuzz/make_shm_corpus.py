#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz_shm (test/fuzz/fuzz_shm.c has the input format): a well-behaved
host's bring-up, Store and Retrieve through every PRP shape, then the hostile variations a fuzzer
would take long to find on its own (bad doorbells, queue parameters, PRP lists that chain, loop or
point outside registered memory, REG/DEREG errors, hosts that vanish mid-I/O).

Usage: make_shm_corpus.py [OUTDIR]   (default: corpus_shm next to this file)"""
import os
import struct
import sys

(OP_POLL, OP_REGW, OP_DB, OP_MEMW, OP_MEMW64, OP_SUBMIT, OP_REAP, OP_QMODEL, OP_REG, OP_DEREG, OP_MSG,
 OP_HANGUP) = range(12)
PG = 4096
IOVA_A = 0x10000000
IOVA_B = 0x20000000
CC_ENABLE = 1 | (6 << 4) | (6 << 16) | (4 << 20)
AQA, ASQ, ACQ, CC = 0x24, 0x28, 0x30, 0x14
MAGIC, VERSION = 0x53564B4E, 1
HELLO, REG, DEREG, REG_CUDA = 1, 2, 3, 4
HOST_NQN = b"nqn.2026-11.io.rados-nkv:fuzz-shm-host"

# prologue bits
P_HELLO, P_REG_A, P_ADMIN, P_IOQ, P_SS2, P_BADHOST, P_REG_B = 1, 2, 4, 8, 0x10, 0x20, 0x40
UP = P_HELLO | P_REG_A | P_ADMIN | P_IOQ  # I/O queue pair 1: SQ at A page 3, CQ at A page 2, 64 entries

# opcodes
STORE, RETRIEVE, LIST, DELETE, EXIST, RANGE = 0x01, 0x02, 0x06, 0x10, 0x14, 0xF2
DEL_SQ, CREATE_SQ, GET_LOG, DEL_CQ, CREATE_CQ, IDENTIFY, ABORT, SET_FEAT, GET_FEAT, AER, KEEP_ALIVE = (
    0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0A, 0x0C, 0x18)


def A(page, off=0):
    return IOVA_A + page * PG + off


# ---- operations --------------------------------------------------------------------------------------

def poll(n=1):
    out = b""
    while n > 0:
        k = min(n, 32)
        out += bytes([OP_POLL, k - 1])
        n -= k
    return out


def regw(off, v):
    return bytes([OP_REGW]) + struct.pack("<HI", off // 4, v & 0xFFFFFFFF)


def regw64(off, v):
    return regw(off, v) + regw(off + 4, v >> 32)


def db_sq(q, v):
    return bytes([OP_DB, q]) + struct.pack("<H", v)


def db_cq(q, v):
    return bytes([OP_DB, 0x80 | q]) + struct.pack("<H", v)


def memw(page, off, data):
    out = b""
    while data:
        chunk, data = data[:255], data[255:]
        out += bytes([OP_MEMW, page]) + struct.pack("<HB", off, len(chunk)) + chunk
        off += len(chunk)
        if off >= PG:
            page, off = page + 1, off - PG
    return out


def memw64(page, idx, v):
    return bytes([OP_MEMW64, page]) + struct.pack("<HQ", idx, v)


def prp_list(page, entries, first=0):
    """PRP list entries (IOVAs) written at A page @page from entry @first."""
    return b"".join(memw64(page, first + i, e) for i, e in enumerate(entries))


def submit(q, sqe, ring=True):
    assert len(sqe) == 64
    return bytes([OP_SUBMIT, q | (0 if ring else 0x80)]) + sqe


def reap(q):
    return bytes([OP_REAP, q])


def qmodel(q, sqpg, cqpg, sqn, cqn):
    return bytes([OP_QMODEL, q, sqpg, cqpg, sqn - 1, cqn - 1])


def reg(sel, iova, offpg, lenpg, ro=False, half_len=False, half_off=False):
    flags = sel | (4 if ro else 0) | (8 if half_len else 0) | (0x10 if half_off else 0)
    return bytes([OP_REG, flags]) + struct.pack("<QBB", iova, offpg, lenpg)


def dereg(iova):
    return bytes([OP_DEREG]) + struct.pack("<Q", iova)


def msg(data, fdsel=3):
    assert len(data) <= 512
    return bytes([OP_MSG]) + struct.pack("<HB", len(data), fdsel) + data


def hangup():
    return bytes([OP_HANGUP])


def hdr(op, magic=MAGIC, version=VERSION):
    return struct.pack("<IHH", magic, version, op)


# ---- SQEs --------------------------------------------------------------------------------------------

def sqe(opc, cid, nsid=0, cdw10=0, cdw11=0, prp1=0, prp2=0, key=b"", flags=0, cdw12=0, cdw13=0):
    k = key[:16].ljust(16, b"\0")
    cdw2, cdw3, cdw14, cdw15 = struct.unpack("<IIII", k)
    if key:
        cdw11 = (cdw11 & ~0xFF) | len(key)
    return struct.pack("<BBHIIIQQQIIIIII", opc, flags, cid, nsid, cdw2, cdw3, 0, prp1, prp2,
                       cdw10, cdw11, cdw12, cdw13, cdw14, cdw15)


def kv(opc, cid, key, size, prp1=0, prp2=0, nsid=1, opts=0, flags=0, cdw12=0, cdw13=0):
    return sqe(opc, cid, nsid, size, opts << 8, prp1, prp2, key, flags, cdw12, cdw13)


def create_cq(cid, qid, n, base, pc=1):
    return sqe(CREATE_CQ, cid, 0, ((n - 1) << 16) | qid, pc, base)


def create_sq(cid, qid, n, base, cqid, pc=1):
    return sqe(CREATE_SQ, cid, 0, ((n - 1) << 16) | qid, (cqid << 16) | pc, base)


def set_nq(cid, n=4):
    return sqe(SET_FEAT, cid, 0, 0x07, ((n - 1) << 16) | (n - 1))


def enable(sqpg=0, cqpg=1, n=16, cc=CC_ENABLE):
    return (qmodel(0, sqpg, cqpg, n, n) + regw(AQA, ((n - 1) << 16) | (n - 1)) + regw64(ASQ, A(sqpg)) +
            regw64(ACQ, A(cqpg)) + regw(CC, cc) + poll())


def io_pair(qid, sqpg, cqpg, n, cid):
    """Create CQ qid and SQ qid on the admin queue (host model included)."""
    return (submit(0, create_cq(cid, qid, n, A(cqpg))) + submit(0, create_sq(cid + 1, qid, n, A(sqpg), qid)) +
            qmodel(qid, sqpg, cqpg, n, n) + poll(2) + reap(0))


def pattern(n, seed=0):
    return bytes((i * 7 + seed + (i >> 8)) & 0xFF for i in range(n))


def run(q, *sqes, polls=4):
    return b"".join(submit(q, s) for s in sqes) + poll(polls) + reap(q)


# ---- seeds -------------------------------------------------------------------------------------------

seeds = {}


def seed(name, prologue, *ops):
    seeds[name] = bytes([prologue]) + b"".join(ops)


# A well-behaved host: everything set up by the harness, a value stored and read back, Exist and Delete.
seed("store_retrieve", UP,
     memw(8, 0, b"hello, shared memory" * 5),
     run(1, kv(STORE, 10, b"k1", 100, A(8))),
     run(1, kv(RETRIEVE, 11, b"k1", PG, A(9)), kv(EXIST, 12, b"k1", 0), kv(DELETE, 13, b"k1", 0),
         kv(EXIST, 14, b"k1", 0)))

# The same bring-up done by the fuzzer's own operations: REG, AQA/ASQ/ACQ, CC.EN, Identify, Set
# Features, Create CQ/SQ, I/O; then a controller reset (EN 0, queues gone), a re-enable, a shutdown.
seed("manual_bringup", P_HELLO,
     reg(0, IOVA_A, 0, 64), enable(),
     run(0, sqe(IDENTIFY, 1, 0, 1, 0, A(10)), set_nq(2)),
     io_pair(1, 3, 2, 16, 3),
     memw(8, 0, pattern(300)),
     run(1, kv(STORE, 1, b"manual", 300, A(8)), kv(RETRIEVE, 2, b"manual", 512, A(9))),
     regw(CC, CC_ENABLE & ~1), poll(2), enable(4, 5, 8), run(0, set_nq(1, 2)), io_pair(2, 6, 7, 8, 2),
     run(2, kv(EXIST, 1, b"manual", 0)),
     regw(CC, CC_ENABLE | (1 << 14)), poll(2))

# Two pages through PRP1 (at an offset) + PRP2: contiguous (zero copy) and not (bounce).
seed("prp2", UP,
     memw(8, 0x800, pattern(6000, 1)),
     run(1, kv(STORE, 20, b"two", 6000, A(8, 0x800), A(9))),
     run(1, kv(RETRIEVE, 21, b"two", 6000, A(20, 0x10), A(30))),
     run(1, kv(STORE, 22, b"two-apart", 6000, A(8, 0x800), A(12))),
     run(1, kv(RETRIEVE, 23, b"two-apart", 8192, A(40), A(41))))

# PRP lists: scattered pages (bounce), contiguous pages via a list (zero copy), the list pointer at
# an offset inside its page.
seed("prp_list", UP,
     memw(16, 0, pattern(300, 2)), prp_list(30, [A(18), A(20), A(22), A(24), A(26)]),
     run(1, kv(STORE, 30, b"scattered", 5 * PG + 123, A(16), A(30))),
     prp_list(31, [A(41), A(42), A(43), A(44), A(45)]),
     run(1, kv(RETRIEVE, 31, b"scattered", 6 * PG, A(40), A(31))),
     prp_list(32, [A(50), A(49), A(48), A(47)], first=100),
     run(1, kv(RETRIEVE, 32, b"scattered", 4 * PG, A(51, 0x40), A(32, 800))))

# A list longer than its page: the last slot chains to the next list page.
seed("prp_list_chain", UP,
     prp_list(31, [A(10), A(32)], first=510), prp_list(32, [A(11 + i) for i in range(12)]),
     run(1, kv(STORE, 40, b"chain", 14 * PG, A(9), A(31, 510 * 8))),
     prp_list(33, [A(40), A(34)], first=510), prp_list(34, [A(41 + i) for i in range(12)]),
     run(1, kv(RETRIEVE, 41, b"chain", 14 * PG, A(39), A(33, 510 * 8))))

# Lists that loop: the walk must end by length. A chain slot naming its own list page's last data
# slot (valid until the command's last entry, which then falls on the chain slot: 13h), and a list
# page naming itself as every data page and as its chain (valid: one page read again and again).
seed("prp_list_loop", UP,
     prp_list(31, [A(10), A(31, 4080)], first=510),
     run(1, kv(STORE, 50, b"loop", 16 * PG, A(9), A(31, 4080))),
     run(1, kv(RETRIEVE, 51, b"loop", 16 * PG, A(9), A(31, 4080))),
     prp_list(35, [A(35)] * 512),
     run(1, kv(STORE, 52, b"self", 32 * PG, A(9), A(35))))

# Bad PRPs: unregistered, misaligned, list entries misaligned or outside, a Retrieve into read-only
# memory, SGL on PCIe, a buffer that runs off the end of the region.
seed("prp_bad", UP | P_REG_B,
     run(1, kv(STORE, 60, b"bad", 100, 0xDEAD0000), kv(STORE, 61, b"bad", 100, A(8, 3)),
         kv(STORE, 62, b"bad", 6000, A(8, 0x800), A(9, 8)), kv(RETRIEVE, 63, b"bad", 100, IOVA_B)),
     prp_list(30, [A(18), A(20) + 0x10, 0xDEAD0000]),
     run(1, kv(STORE, 64, b"bad", 3 * PG, A(16), A(30)), kv(STORE, 65, b"bad", 4 * PG, A(16), A(30)),
         kv(STORE, 66, b"bad", 3 * PG, A(16), 0xBEEF0000), kv(STORE, 67, b"bad", 3 * PG, A(16), A(30, 4))),
     run(1, kv(STORE, 68, b"bad", 100, A(8), flags=0x40), kv(STORE, 69, b"bad", PG, A(63, 0x800), A(64)),
         kv(RETRIEVE, 70, b"bad", 2 * PG, A(63), IOVA_B), kv(STORE, 71, b"bad", 128 * 1024 + 1, A(8))),
     prp_list(29, [IOVA_B + i * PG for i in range(8)]),
     run(1, kv(STORE, 72, b"ro-src", 8 * PG, IOVA_B, A(29)), kv(RETRIEVE, 73, b"ro-src", 8 * PG, A(40), A(29))))

# Doorbells beyond the queue's size: CSTS.CFS, then a reset (EN 0) and a new bring-up.
seed("doorbell_sq_beyond", UP,
     db_sq(1, 64), poll(2), run(1, kv(EXIST, 1, b"x", 0)),
     regw(CC, 0), poll(2), enable(), run(0, set_nq(1)), io_pair(1, 3, 2, 64, 2),
     run(1, kv(EXIST, 2, b"x", 0)))
seed("doorbell_cq_beyond", UP,
     db_cq(1, 0xFFFF), run(1, kv(EXIST, 1, b"x", 0)), db_sq(0, 200), poll(),
     regw(CC, 0), poll(2), enable(), db_cq(0, 16), run(0, set_nq(1)))
seed("doorbell_unknown_queue", UP,
     db_sq(4, 3), db_cq(4, 3), db_sq(7, 9), db_cq(7, 9), poll(2), run(1, kv(EXIST, 1, b"x", 0)))

# Queue management with hostile parameters.
seed("queue_mgmt", UP,
     run(0, create_cq(10, 0, 8, A(20)), create_cq(11, 5, 8, A(20)), create_cq(12, 2, 1, A(20)),
         create_cq(13, 2, 65, A(20)), create_cq(14, 2, 8, A(20), pc=0), create_cq(15, 2, 8, A(20, 0x100)),
         create_cq(16, 2, 8, 0xDEAD0000), create_cq(17, 2, 8, A(3))),
     run(0, create_cq(18, 2, 8, A(20)), create_cq(19, 2, 8, A(21)), create_sq(20, 2, 8, A(22), 3),
         create_sq(21, 2, 8, A(22), 0), create_sq(22, 2, 8, A(20), 2), create_sq(23, 1, 8, A(22), 2),
         create_sq(24, 3, 8, A(22), 2, pc=0), create_sq(25, 3, 0x10000, A(22), 2)),
     run(0, sqe(DEL_CQ, 26, 0, 1), sqe(DEL_SQ, 27, 0, 0), sqe(DEL_SQ, 28, 0, 9), sqe(DEL_CQ, 29, 0, 0),
         sqe(DEL_CQ, 30, 0, 3)),
     run(0, create_sq(31, 2, 8, A(22), 2), create_sq(32, 3, 8, A(23), 2)), qmodel(2, 22, 20, 8, 8),
     submit(1, kv(STORE, 33, b"inflight", 9000, A(8), A(30))), submit(2, kv(EXIST, 34, b"x", 0)),
     run(0, sqe(DEL_SQ, 35, 0, 1), sqe(DEL_SQ, 36, 0, 2), sqe(DEL_CQ, 37, 0, 1)),
     run(0, sqe(DEL_SQ, 38, 0, 3), sqe(DEL_CQ, 39, 0, 2), create_cq(40, 1, 64, A(2)),
         create_sq(41, 1, 64, A(3), 1)), qmodel(1, 3, 2, 64, 64), run(1, kv(EXIST, 42, b"x", 0)))

# Create queues before CC.IOSQES/IOCQES are set, and with more queues than Set Features allowed.
seed("queue_mgmt_cc", P_HELLO | P_REG_A,
     enable(cc=1 | (6 << 4)),
     run(0, create_cq(1, 1, 8, A(20)), create_sq(2, 1, 8, A(21), 1)),
     regw(CC, 0), poll(2), enable(),
     run(0, set_nq(3, 1), create_cq(4, 1, 8, A(20)), create_cq(5, 2, 8, A(22)), create_sq(6, 1, 8, A(21), 1),
         create_sq(7, 2, 8, A(23), 1), create_cq(8, 4, 8, A(24)), create_cq(9, 3, 8, A(25))))

# A CQ smaller than the work: completions wait for room, then come as the host reaps.
seed("cq_full", UP,
     run(0, create_cq(10, 2, 2, A(20)), create_sq(11, 2, 16, A(21), 2)), qmodel(2, 21, 20, 16, 2),
     b"".join(submit(2, kv(EXIST, 20 + i, b"x", 0), ring=(i == 5)) for i in range(6)),
     poll(4), reap(2), poll(2), reap(2), poll(2), reap(2), poll(2), reap(2), poll(2), reap(2), poll(2), reap(2))

# Scattered Stores larger than the controller's bounce budget (64 KiB): the SQ waits.
seed("bounce_budget", UP,
     prp_list(30, [A(8 + 2 * i) for i in range(1, 16)]),
     b"".join(submit(1, kv(STORE, 30 + i, b"big%d" % i, 60 * 1024, A(8), A(30)), ring=(i == 3)) for i in range(4)),
     poll(3), reap(1), poll(8), reap(1),
     prp_list(31, [A(63 - i) for i in range(15)]),
     run(1, *[kv(RETRIEVE, 40 + i, b"big%d" % i, 64 * 1024, A(40), A(31)) for i in range(4)], polls=12))

# REG/DEREG: overlap, unsealed memfd, no fd, bad alignment and lengths, offsets past the end,
# deregistering memory in use, unknown IOVAs, the region and byte limits.
seed("reg_dereg", P_HELLO | P_REG_A | P_ADMIN,
     reg(1, IOVA_B, 0, 16), reg(1, IOVA_B, 0, 16), reg(0, IOVA_A + 8 * PG, 0, 1), reg(2, 0x30000000, 0, 4),
     reg(3, 0x31000000, 0, 1), reg(1, 0x32000000, 0, 0), reg(1, 0x32000000, 0, 1, half_len=True),
     reg(1, 0x32000000, 0, 1, half_off=True), reg(1, 0x32000800, 0, 1), reg(1, 0x33000000, 15, 2),
     reg(1, 0x34000000, 200, 1), reg(1, 0xFFFFFFFFFFFFF000, 0, 2),
     dereg(IOVA_A), dereg(0x12345000), dereg(IOVA_B), dereg(IOVA_B),
     b"".join(reg(0, 0x40000000 + i * 0x1000000, 0, 64) for i in range(4)),
     b"".join(reg(1, 0x50000000 + i * 0x1000000, 0, 1) for i in range(4)),
     dereg(0x40000000), reg(1, 0x50000000 + 9 * 0x1000000, 0, 1),
     run(0, sqe(IDENTIFY, 1, 0, 1, 0, 0x40000000 + 0x1000000)))

# Raw control messages: REG_CUDA (no CUDA here), a HELLO after HELLO, short, long and foreign ones.
cuda = hdr(REG_CUDA) + struct.pack("<QQQiI", 0x60000000, PG, 0, 0, 0) + bytes(64)
seed("msg_cuda", UP, msg(cuda), run(1, kv(EXIST, 1, b"x", 0)))
seed("msg_hello_twice", UP,
     msg(hdr(HELLO) + b"fuzz-shm-hostid!" + HOST_NQN.ljust(256, b"\0")),
     run(1, kv(EXIST, 1, b"x", 0)))
# Each of these closes the connection: the controller must go away with its queues and regions.
for name, m, fdsel in [("short", b"\x01", 3), ("short_hdr", hdr(REG)[:6], 3),
                       ("dereg_short", hdr(DEREG) + struct.pack("<Q", IOVA_A), 3),
                       ("unknown_op", hdr(9) + bytes(32), 0), ("bad_magic", hdr(REG, magic=0x1234) + bytes(32), 0),
                       ("bad_version", hdr(REG, version=2) + bytes(32), 0), ("too_long", bytes(400), 0),
                       ("empty_with_fd", b"", 0), ("empty", b"", 3)]:
    seed("msg_" + name, UP, submit(1, kv(STORE, 1, b"m", 100, A(8))), msg(m, fdsel), run(1, kv(EXIST, 2, b"m", 0)))
seed("msg_hello_raw", 0,
     msg(hdr(HELLO) + b"fuzz-shm-hostid!" + HOST_NQN.ljust(256, b"\0")),
     reg(0, IOVA_A, 0, 64), enable(), run(0, set_nq(1)))
seed("msg_reg_raw", P_HELLO,
     msg(hdr(REG) + struct.pack("<QQQII", IOVA_A, 64 * PG, 0, 0, 0), 0),
     msg(hdr(REG) + struct.pack("<QQQII", IOVA_B, 16 * PG, 0, 1, 0), 1),
     msg(hdr(DEREG) + struct.pack("<QQQII", IOVA_B, 0, 0, 0, 0)),
     enable(), run(0, set_nq(1)))
seed("msg_before_hello", 0, reg(0, IOVA_A, 0, 64), dereg(IOVA_A), msg(cuda))

# Hosts the subsystem refuses, and the allowed host on the subsystem with an allowlist.
seed("hello_denied", P_HELLO | P_REG_A | P_SS2 | P_BADHOST, enable(), run(0, set_nq(1)))
seed("acl_host", UP | P_SS2,
     run(1, kv(STORE, 1, b"acl", 4096, A(8)), kv(STORE, 2, b"acl", 4097, A(8), A(9)),
         kv(RETRIEVE, 3, b"acl", 8192, A(20), A(21))))

# Hosts that vanish: with bounce copies and held AERs in flight; after a shutdown request.
seed("hangup_inflight", UP,
     prp_list(30, [A(8 + 2 * i) for i in range(1, 8)]),
     submit(0, sqe(AER, 5)), submit(1, kv(STORE, 1, b"gone", 30000, A(8), A(30)), ring=False),
     submit(1, kv(RETRIEVE, 2, b"gone", 30000, A(40), A(30))), poll(1), hangup(), poll(4))
seed("shutdown_inflight", UP,
     prp_list(30, [A(8 + 2 * i) for i in range(1, 8)]),
     submit(1, kv(STORE, 1, b"shn", 30000, A(8), A(30))), poll(1), regw(CC, CC_ENABLE | (1 << 14)), poll(3),
     regw(CC, 0), poll(2), enable(), run(0, set_nq(1)))
seed("disable_inflight", UP,
     prp_list(30, [A(8 + 2 * i) for i in range(1, 8)]),
     submit(1, kv(STORE, 1, b"dis", 30000, A(8), A(30))), poll(1), regw(CC, CC_ENABLE & ~1), poll(1),
     dereg(IOVA_A), poll(3), dereg(IOVA_A), reg(0, IOVA_A, 0, 64), enable(), run(0, set_nq(1)))

# A small SQ reused lap after lap, with the host re-using a slot whose command is still running.
seed("sq_wrap", UP,
     run(0, create_cq(10, 2, 4, A(20)), create_sq(11, 2, 4, A(21), 2)), qmodel(2, 21, 20, 4, 4),
     b"".join(run(2, kv(EXIST, i, b"w", 0), kv(STORE, 100 + i, b"w", 8, A(8)), polls=1) for i in range(12)),
     submit(2, kv(EXIST, 1, b"w", 0)), submit(2, kv(EXIST, 2, b"w", 0)), submit(2, kv(EXIST, 3, b"w", 0)),
     submit(2, kv(EXIST, 4, b"w", 0)), poll(3), reap(2), poll(2), reap(2))

# The host rewrites an SQE after ringing the doorbell and before the controller fetches it, and
# rewrites a PRP list while a bounced copy is in flight.
seed("sqe_rewrite", UP,
     submit(1, kv(STORE, 1, b"rw", 100, A(8))), memw(3, 0, bytes(64)), poll(2), reap(1),
     prp_list(30, [A(8 + 2 * i) for i in range(1, 40)]),
     submit(1, kv(STORE, 2, b"rw2", 100 * 1024, A(8), A(30))), poll(1),
     prp_list(30, [0xDEAD0000] * 20), poll(4), reap(1))

# Admin commands that move data: Identify and logs through PRP1/PRP2/lists, features, AER, Abort,
# Keep Alive, an unknown opcode, data into unregistered memory.
seed("admin_data", UP,
     prp_list(30, [A(12), A(14)]),
     run(0, sqe(IDENTIFY, 10, 0, 1, 0, A(10)), sqe(IDENTIFY, 11, 1, 0, 0, A(11, 0x800), A(12)),
         sqe(IDENTIFY, 12, 0, 6 | (0 << 16), 1 << 24, A(10)), sqe(IDENTIFY, 13, 0, 2, 0, 0xDEAD0000),
         sqe(GET_LOG, 14, 0xFFFFFFFF, 2 | ((512 // 4 - 1) << 16), 0, A(13, 0xE00), A(14)),
         sqe(GET_LOG, 15, 0, 5 | ((4096 // 4 - 1) << 16), 0, A(15), 0, cdw12=0)),
     run(0, sqe(GET_FEAT, 16, 0, 7), sqe(SET_FEAT, 17, 0, 0x0F, 1500), sqe(AER, 18), sqe(ABORT, 19, 0, 1 | (5 << 16)),
         sqe(KEEP_ALIVE, 20), sqe(0x42, 21), sqe(IDENTIFY, 22, 0, 1, 0, A(10), flags=0x40),
         sqe(GET_LOG, 23, 0, 2 | ((8192 // 4 - 1) << 16), 0, A(16), A(30, 4))))

# List, Exec (H2C and C2H directions), Retrieve Range, Flush, the read-only namespace.
seed("kv_misc", UP,
     memw(8, 0, pattern(64)),
     run(1, kv(STORE, 1, b"a", 64, A(8)), kv(STORE, 2, b"b", 0), kv(STORE, 3, b"c", 64, A(8), opts=2),
         kv(LIST, 4, b"", 4096, A(10)), kv(LIST, 5, b"a", 8192, A(10, 0x20), A(11)), kv(LIST, 6, b"", 2)),
     run(1, kv(RANGE, 7, b"a", 16, A(12), cdw12=8), kv(RANGE, 8, b"a", 16, A(12), cdw12=100),
         kv(0x81, 9, b"a", 64, A(8)), kv(0x82, 10, b"a", 64, A(12)), kv(0x86, 11, b"a", 0),
         sqe(0x00, 12, 1), kv(STORE, 13, b"ro", 8, A(8), nsid=2), kv(RETRIEVE, 14, b"a", 64, A(12), nsid=2),
         kv(RETRIEVE, 15, b"a", 64, A(12), nsid=9), kv(STORE, 16, b"x" * 17, 8, A(8))))

# Queues in read-only memory: an SQ may live there, a CQ may not; and queues outside any region.
seed("ro_queues", UP | P_REG_B,
     run(0, create_cq(1, 2, 8, IOVA_B), create_cq(2, 2, 8, A(20)), create_sq(3, 2, 8, IOVA_B, 2),
         create_sq(4, 3, 8, IOVA_B + 15 * PG + 0x1000, 2), create_cq(5, 3, 64, A(63)),
         create_sq(6, 3, 64, A(63), 2)))

# Two SQs on one CQ; commands from both interleaved; one SQ deleted while the other keeps going.
seed("shared_cq", UP,
     run(0, create_sq(1, 2, 16, A(20), 1)), qmodel(2, 20, 2, 16, 64),
     submit(1, kv(EXIST, 1, b"s", 0)), submit(2, kv(EXIST, 2, b"s", 0)), submit(1, kv(EXIST, 3, b"s", 0)),
     poll(2), reap(1), run(0, sqe(DEL_SQ, 4, 0, 2)), run(1, kv(EXIST, 5, b"s", 0)))

# A maximum-size value through a full PRP list, and the same buffer at a large PRP1 offset.
seed("big_value", UP,
     prp_list(40, [A(8 + i) for i in range(1, 32)]),
     run(1, kv(STORE, 1, b"max", 128 * 1024, A(8), A(40)), kv(RETRIEVE, 2, b"max", 128 * 1024, A(8), A(40)),
         kv(RETRIEVE, 3, b"max", 128 * 1024, A(8, 0xFFC), A(40), cdw12=0), polls=8))

# Unusable admin queues (CSTS.CFS at enable): sizes of 1, misaligned or unregistered bases, ASQ and
# ACQ on one page, ACQ in read-only memory; each followed by a reset and a good enable.
for name, aqa, asq, acq in [("aqa_size1", 0, A(0), A(1)), ("asq_misaligned", 0xF000F, A(0, 64), A(1)),
                            ("acq_unregistered", 0xF000F, A(0), 0xDEAD0000), ("asq_on_acq", 0xF000F, A(1), A(1)),
                            ("acq_readonly", 0xF000F, A(0), IOVA_B), ("asq_off_end", 0xFFF0FFF, A(63), A(1))]:
    seed("admin_" + name, P_HELLO | P_REG_A | P_REG_B,
         qmodel(0, 0, 1, 16, 16), regw(AQA, aqa), regw64(ASQ, asq), regw64(ACQ, acq), regw(CC, CC_ENABLE), poll(2),
         regw(CC, 0), poll(2), enable(), run(0, set_nq(1)))

# An SQ deleted while its bounced Store is between its copy and its completion: the SQ lives on as
# a zombie until the command returns into nothing.
seed("zombie_sq", UP,
     prp_list(30, [A(8 + 2 * i) for i in range(1, 20)]),
     submit(1, kv(STORE, 1, b"zombie", 80 * 1024, A(8), A(30))), poll(1),
     submit(0, sqe(DEL_SQ, 4, 0, 1), ring=False), db_sq(0, 4), poll(4), reap(0),
     run(0, sqe(DEL_CQ, 5, 0, 1), create_cq(6, 1, 8, A(2)), create_sq(7, 1, 8, A(3), 1)))

# More commands in flight than the controller's request table (32): a CQ of 2 holds the rest back.
seed("max_cmds", UP,
     run(0, create_cq(10, 2, 2, A(20)), create_sq(11, 2, 64, A(21), 2)), qmodel(2, 21, 20, 64, 2),
     b"".join(submit(2, kv(EXIST, 100 + i, b"m", 0), ring=(i == 47)) for i in range(48)),
     poll(6), b"".join(reap(2) + poll(2) for _ in range(6)))

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_shm")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
