#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz_tcp (test/fuzz/fuzz_tcp.c): one file per PDU stream.

Every seed is two option bytes (see fuzz_tcp.c) then the PDU bytes the harness writes after its
prologue: byte 0 bits 1:0 prologue (0 raw, 1 ICReq, 2 ICReq + admin Connect + CC.EN, 3 I/O queue
with QID 1 connected), bit 2/3 header/data digests, bit 4 digest fix-up, bit 5 linger, bits 7:6
Connect target; byte 1 bits 1:0 HPDA, bit 2 SQFC off, bits 4:3 SQSIZE, bit 5 split writes.
Digests in the seeds are computed here, so seeds with and without the fix-up bit both pass them.
TTAGs assume the queue's requests are handed out in order (1, 2, ... after the Connect).
Stdlib only."""
import os
import struct
import sys

# ---- CRC32C (Castagnoli, reflected 0x82F63B78) --------------------------------------------------
_T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283

SS = b"nqn.2026-11.io.rados-nkv:fuzz"
HOST = b"nqn.2014-08.org.nvmexpress:uuid:0f0f0f0f-1111-2222-3333-444444444444"
DISC = b"nqn.2014-08.org.nvmexpress.discovery"
ICREQ, H2C_TERM, CMD, H2C_DATA = 0x00, 0x02, 0x04, 0x06
F_HDGST, F_DDGST, F_LAST = 1, 2, 4
SGL_ICD, SGL_TDB = 0x01, 0x5A
CC_EN = 1 | (6 << 4) | (6 << 16) | (4 << 20)


def opts(pro=0, hd=False, dd=False, fix=False, linger=False, sub=0, hpda=0, sqfc_off=False, sqsize=0, split=False):
    return bytes([pro | (hd << 2) | (dd << 3) | (fix << 4) | (linger << 5) | (sub << 6),
                  hpda | (sqfc_off << 2) | (sqsize << 3) | (split << 5)])


# ---- PDUs -------------------------------------------------------------------------------------------
def icreq(hpda=0, dgst=0, pfv=0, plen=128, hlen=128, maxr2t=0):
    return struct.pack("<BBBBIHBBI", ICREQ, 0, hlen, 0, plen, pfv, hpda, dgst, maxr2t) + bytes(112)


def mk(type_, body, data=b"", hd=False, dd=False, flags=0, pdo=None, plen=None, hlen=None):
    hl = 8 + len(body)
    hdl = hl + (4 if hd else 0)
    fl = flags | (F_HDGST if hd else 0) | (F_DDGST if dd and data else 0)
    p_pdo = (hdl if data else 0) if pdo is None else pdo
    p_plen = (hdl + (len(data) + (4 if dd else 0) if data else 0)) if plen is None else plen
    h = struct.pack("<BBBBI", type_, fl, hl if hlen is None else hlen, p_pdo, p_plen) + body
    out = h + (struct.pack("<I", crc32c(h)) if hd else b"")
    if data:
        out += bytes(max(0, p_pdo - hdl)) + data + (struct.pack("<I", crc32c(data)) if dd else b"")
    return out


def sgl(length, icd):
    return struct.pack("<QI", 0, length) + bytes([0, 0, 0, SGL_ICD if icd else SGL_TDB])


def sqe(opc, cid, nsid=0, dptr=None, cdw=(0,) * 6, flags=0x40, cdw23=(0, 0)):
    """64-byte SQE: cdw = CDW10..CDW15."""
    d = dptr if dptr is not None else bytes(16)
    return struct.pack("<BBHIII", opc, flags, cid, nsid, *cdw23) + bytes(8) + d + struct.pack("<6I", *cdw)


def fabrics(fctype, cid, spec=bytes(24), dptr=None):
    s = bytearray(sqe(0x7F, cid, dptr=dptr if dptr is not None else sgl(0, False)))
    s[4] = fctype
    s[40:64] = spec.ljust(24, b"\0")
    return bytes(s)


def cmd(s, data=b"", hd=False, dd=False, **kw):
    return mk(CMD, s, data, hd, dd, **kw)


def connect(cid=1, qid=0, sqsize=31, cntlid=0xFFFF, sub=SS, host=HOST, hd=False, dd=False, kato=0,
            via_r2t=False, recfmt=0, cattr=0):
    data = b"fuzz-tcp-hostid!" + struct.pack("<H", cntlid) + bytes(238) + sub.ljust(256, b"\0") + \
        host.ljust(256, b"\0") + bytes(256)
    spec = struct.pack("<HHHBBI", recfmt, qid, sqsize, cattr, 0, kato)
    s = fabrics(0x01, cid, spec, sgl(len(data), not via_r2t))
    if via_r2t:
        return cmd(s, b"", hd, dd) + h2c(cid, 0, 0, data, hd=hd, dd=dd)
    return cmd(s, data, hd, dd)


def prop_set(cid, ofs, val, size8=False, hd=False, dd=False):
    return cmd(fabrics(0x00, cid, struct.pack("<BBBBIQ", 1 if size8 else 0, 0, 0, 0, ofs, val)), b"", hd, dd)


def prop_get(cid, ofs, size8=False, hd=False, dd=False):
    return cmd(fabrics(0x04, cid, struct.pack("<BBBBI", 1 if size8 else 0, 0, 0, 0, ofs)), b"", hd, dd)


def h2c(cid, ttag, datao, data, last=True, hd=False, dd=False, datal=None, **kw):
    body = struct.pack("<HHIII", cid, ttag, datao, len(data) if datal is None else datal, 0)
    return mk(H2C_DATA, body, data, hd, dd, flags=F_LAST if last else 0, **kw)


def admin(opc, cid, nsid=0, buflen=4096, cdw=(0,) * 6, data=b"", hd=False, dd=False):
    icd = bool(data)
    return cmd(sqe(opc, cid, nsid, sgl(len(data) if icd else buflen, icd), cdw), data, hd, dd)


def identify(cid, cns, nsid=0, csi=0, **kw):
    return admin(0x06, cid, nsid, 4096, (cns, csi << 24, 0, 0, 0, 0), **kw)


def getlog(cid, lid, nbytes, nsid=0xFFFFFFFF, ofs=0, csi=0, **kw):
    return admin(0x02, cid, nsid, nbytes, (lid | ((nbytes // 4 - 1) << 16), 0, ofs, 0, csi << 24, 0), **kw)


def kv(opc, cid, nsid, key, size, data=b"", opts_=0, buflen=None, icd=None, hd=False, dd=False):
    k = key.ljust(16, b"\0")
    length = len(data) if data else (size if buflen is None else buflen)
    in_caps = bool(data) if icd is None else icd
    s = (struct.pack("<BBHI", opc, 0x40, cid, nsid) + k[:8] + bytes(8) + sgl(length, in_caps) +
         struct.pack("<II", size, len(key) | (opts_ << 8)) + bytes(8) + k[8:16])
    return cmd(s, data if in_caps else b"", hd, dd)


def pattern(n, seed=0):
    return bytes((i * 31 + seed + (i >> 7)) & 0xFF for i in range(n))


# ---- seeds -----------------------------------------------------------------------------------------
seeds = {}


def add(name, o, body):
    seeds[name] = o + body


def sess(hd=False, dd=False, sub=SS):
    """A whole admin session in the raw stream (prologue 0)."""
    dg = (1 if hd else 0) | (2 if dd else 0)
    return icreq(0, dg) + connect(1, hd=hd, dd=dd, sub=sub) + prop_set(2, 0x14, CC_EN, hd=hd, dd=dd)


for hd, dd in [(False, False), (True, False), (False, True), (True, True)]:
    tag = ("h" if hd else "") + ("d" if dd else "") or "plain"
    # raw, the harness adds nothing
    add(f"raw_icreq_{tag}", opts(), icreq(0, hd | (dd << 1)))
    add(f"raw_session_{tag}", opts(),
        sess(hd, dd) + identify(3, 1, hd=hd, dd=dd) + prop_get(4, 0x1C, hd=hd, dd=dd) + prop_get(5, 0, True, hd=hd, dd=dd))
    # raw I/O Connect with a guessed CNTLID (mostly Invalid Parameter)
    add(f"raw_ioconnect_{tag}", opts(), icreq(0, hd | (dd << 1)) + connect(1, qid=1, cntlid=1, hd=hd, dd=dd) +
        kv(0x01, 2, 1, b"k", 5, b"hello", hd=hd, dd=dd))
    # admin prologue
    add(f"adm_identify_{tag}", opts(2, hd, dd),
        b"".join(identify(10 + i, cns, n, csi, hd=hd, dd=dd) for i, (cns, n, csi) in
                 enumerate([(1, 0, 0), (2, 0, 0), (3, 1, 0), (5, 1, 1), (6, 0, 1), (7, 0, 1), (8, 1, 0), (0x1C, 0, 0), (0, 1, 0)])))
    # I/O prologue: the KV commands
    add(f"io_store_retrieve_{tag}", opts(3, hd, dd),
        kv(0x01, 1, 1, b"key-1", 32, pattern(32), hd=hd, dd=dd) + kv(0x02, 2, 1, b"key-1", 0, buflen=64, hd=hd, dd=dd))
    big = pattern(6000, 1)
    add(f"io_store_r2t_{tag}", opts(3, hd, dd),
        kv(0x01, 1, 1, b"key-r2t", len(big), icd=False, hd=hd, dd=dd) +
        h2c(1, 1, 0, big[:4000], last=False, hd=hd, dd=dd) + h2c(1, 1, 4000, big[4000:], hd=hd, dd=dd) +
        kv(0x02, 2, 1, b"key-r2t", 0, buflen=8192, hd=hd, dd=dd))
    add(f"io_list_{tag}", opts(3, hd, dd),
        kv(0x01, 1, 1, b"\x00\x01", 1, b"x", hd=hd, dd=dd) + kv(0x01, 2, 1, b"abcdefghijklmnop", 3, b"xyz", hd=hd, dd=dd) +
        kv(0x06, 3, 1, b"", 0, buflen=256, hd=hd, dd=dd))

# digests with the harness fix-up (digest fields zero here)
add("fix_raw_session_hd_dd", opts(fix=True), sess(True, True) + identify(3, 1, hd=True, dd=True))
zeroed = bytearray(kv(0x01, 1, 1, b"z", 16, pattern(16), hd=True, dd=True))
zeroed[72:76] = bytes(4)
zeroed[-4:] = bytes(4)
add("fix_io_store_hd_dd", opts(3, True, True, fix=True), bytes(zeroed) + kv(0x02, 2, 1, b"z", 0, buflen=16, hd=True, dd=True))
add("fix_io_h2c_dd", opts(3, False, True, fix=True),
    kv(0x01, 1, 1, b"fx", 100, icd=False, dd=True) + h2c(1, 1, 0, pattern(100), dd=True)[:-4] + bytes(4))

# more admin commands
add("adm_logs", opts(2), b"".join(getlog(10 + i, lid, n, ofs=ofs, csi=csi) for i, (lid, n, ofs, csi) in
                                  enumerate([(0, 1024, 0, 0), (1, 64, 0, 0), (2, 512, 0, 0), (3, 512, 0, 0), (5, 4096, 0, 1),
                                             (2, 64, 64, 0), (0x70, 4096, 0, 0), (0x04, 4096, 0, 0)])))
add("adm_features", opts(2), b"".join(
    admin(op, 10 + i, 0, 0, (fid, v, 0, 0, 0, 0)) for i, (op, fid, v) in
    enumerate([(9, 7, 0x30003), (10, 7, 0), (9, 0xF, 1500), (9, 0x19, 0), (9, 0x20, 1), (10, 0x81, 0), (10, 0x320, 0),
               (9, 0xB, 0xFFFF), (10, 0x0B, 0)])))
add("adm_hostid_in_capsule", opts(2), admin(0x09, 10, 0, 0, (0x81, 1, 0, 0, 0, 0), data=pattern(16)))
add("adm_keepalive_aer", opts(2), admin(0x18, 10, buflen=0) + admin(0x0C, 11, buflen=0) + admin(0x0C, 12, buflen=0) +
    admin(0x18, 13, buflen=0))
add("adm_disconnect", opts(2), cmd(fabrics(0x08, 10)) + identify(11, 1))
add("adm_cc_reset_shutdown", opts(2), prop_set(10, 0x14, 0) + prop_set(11, 0x14, CC_EN | (1 << 14)) +
    prop_get(12, 0x1C) + prop_set(13, 0x14, 0x10) + prop_set(14, 0x1C, 0) + prop_get(15, 0x99, True))
add("adm_queue_mgmt", opts(2), b"".join(admin(op, 10 + op, 0, 0, (0x10001, 1, 0, 0, 0, 0)) for op in (0, 1, 4, 5, 8)))
add("adm_bad_sgl", opts(2),
    cmd(sqe(0x06, 10, 0, struct.pack("<QI", 0, 4096) + bytes([0, 0, 0, 0x20]), (1, 0, 0, 0, 0, 0))) +
    cmd(sqe(0x06, 11, 0, sgl(4096, True), (1, 0, 0, 0, 0, 0))) +
    admin(0x06, 12, 0, 0, (1, 0, 0, 0, 0, 0), data=pattern(64)) +
    cmd(sqe(0x06, 13, 0, sgl(64, True), (1, 0, 0, 0, 0, 0)), pattern(32)) +
    cmd(sqe(0x06, 14, 0, sgl(4096, False), (1, 0, 0, 0, 0, 0), flags=0x00)) +
    cmd(sqe(0x06, 15, 0, sgl(4096, False), (1, 0, 0, 0, 0, 0), flags=0x41)))
add("adm_flow_control_sqsize1", opts(2, sqsize=1), b"".join(identify(10 + i, 1) for i in range(6)))
add("adm_sqfc_off", opts(2, sqfc_off=True, linger=True), identify(10, 1) + prop_get(11, 0x1C))
add("adm_discovery", opts(2, sub=3), getlog(10, 0x70, 4096, nsid=0) + identify(11, 1) + getlog(12, 0x70, 1024, nsid=0))
add("adm_acl_allowed", opts(2, sub=1), identify(10, 2))
add("adm_acl_denied", opts(2, sub=2), identify(10, 1))
add("adm_hpda3_linger", opts(2, hpda=3, linger=True), identify(10, 1) + getlog(11, 2, 512))
add("adm_split", opts(2, split=True, hd=True, dd=True), identify(10, 1, hd=True, dd=True) + prop_get(11, 0x1C, hd=True, dd=True))
add("adm_connect_again", opts(2), connect(10))

# raw protocol breakage
ic = icreq()
add("raw_empty", opts(), b"")
add("raw_bad_type", opts(), struct.pack("<BBBBI", 0x0A, 0, 24, 0, 24) + bytes(16))
add("raw_type_ff", opts(), struct.pack("<BBBBI", 0xFF, 0, 8, 0, 8))
add("raw_cmd_before_icreq", opts(), connect(1))
add("raw_icreq_hlen", opts(), icreq(hlen=127))
add("raw_icreq_plen", opts(), icreq(plen=132) + bytes(4))
add("raw_icreq_pfv", opts(), icreq(pfv=1))
add("raw_icreq_hpda32", opts(), icreq(hpda=32))
add("raw_icreq_trunc", opts(), ic[:77])
add("raw_icreq_twice", opts(), ic + ic)
add("raw_h2cterm", opts(), ic + mk(H2C_TERM, struct.pack("<H", 1) + bytes(14), plen=40) + bytes(16))
add("raw_h2cterm_long", opts(), ic + mk(H2C_TERM, struct.pack("<H", 1) + bytes(14), plen=200) + bytes(176))
add("raw_c2h_types", opts(), ic + b"".join(struct.pack("<BBBBI", t, 0, 24, 0, 24) + bytes(16) for t in (1, 3, 5, 7, 9)))
add("raw_cmd_hlen", opts(), ic + cmd(fabrics(1, 1), hlen=64))
add("raw_cmd_plen_small", opts(), ic + cmd(fabrics(1, 1), plen=40))
add("raw_cmd_pdo_bad", opts(), ic + connect(1)[:3] + bytes([70]) + connect(1)[4:])
add("raw_cmd_pdo_big", opts(), ic + cmd(sqe(0x7F, 1, dptr=sgl(1024, True)), bytes(1024), pdo=200))
add("raw_cmd_trunc", opts(), ic + connect(1)[:500])
add("raw_hdgst_bad", opts(), icreq(0, 1) + bytes(x ^ (1 if i == 72 else 0) for i, x in enumerate(connect(1, hd=True))))
add("raw_hdgst_flag_missing", opts(), icreq(0, 1) + connect(1))
add("raw_ddgst_bad", opts(), icreq(0, 2) + connect(1, dd=True)[:-1] + b"\x00")
add("raw_ddgst_short", opts(), icreq(0, 2) + cmd(sqe(0x7F, 1, dptr=sgl(2, True)), b"ab", dd=True, plen=72 + 2 + 2))
add("raw_connect_r2t", opts(), ic + connect(1, via_r2t=True) + prop_set(2, 0x14, CC_EN) + identify(3, 1))
add("raw_connect_bad", opts(), ic + connect(1, sqsize=0) + connect(2, recfmt=1) + connect(3, cntlid=5) +
    connect(4, sub=b"nqn.nope") + connect(5, host=b"") + connect(6, sqsize=2000) + connect(7, kato=1))
add("raw_connect_short_data", opts(), ic + cmd(fabrics(1, 1, struct.pack("<HHH", 0, 0, 31), sgl(512, True)), bytes(512)))
add("raw_connect_big_sgl", opts(), ic + cmd(fabrics(1, 1, struct.pack("<HHH", 0, 0, 31), sgl(0xFFFFFFFF, False))))
add("raw_discovery", opts(), ic + connect(1, sub=DISC) + prop_set(2, 0x14, 1) + getlog(3, 0x70, 3072, nsid=0))
add("raw_kato", opts(), ic + connect(1, kato=100) + prop_set(2, 0x14, CC_EN) + admin(0x18, 3, buflen=0))
add("raw_split", opts(split=True), sess() + identify(3, 1))

# I/O queue: data path breakage
d = pattern(300, 7)
add("io_h2c_no_r2t", opts(3), h2c(1, 1, 0, d))
add("io_h2c_bad_ttag", opts(3), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(1, 9, 0, d))
add("io_h2c_ttag0", opts(3), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(1, 0, 0, d))
add("io_h2c_bad_cccid", opts(3), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(7, 1, 0, d))
add("io_h2c_datao", opts(3), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(1, 1, 100, d[:200]))
add("io_h2c_overrun", opts(3), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(1, 1, 0, d[:200], last=False) + h2c(1, 1, 200, d))
add("io_h2c_datal", opts(3), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(1, 1, 0, d, datal=299))
add("io_h2c_maxh2c", opts(3), kv(0x01, 1, 1, b"t", 20000, icd=False) + h2c(1, 1, 0, pattern(20000)))
add("io_h2c_pad", opts(3, hpda=1), kv(0x01, 1, 1, b"t", 300, icd=False) + h2c(1, 1, 0, d, pdo=32))
add("io_store_big_value", opts(3), kv(0x01, 1, 1, b"big", 300000, icd=False) + h2c(1, 1, 0, pattern(16000), last=False))
add("io_store_too_big_icd", opts(3), kv(0x01, 1, 1, b"x", 5000, pattern(5000)))
add("io_icd_mismatch", opts(3), cmd(kv(0x01, 1, 1, b"x", 64, pattern(64))[8:72], pattern(32)))
add("io_retrieve_huge_buffer", opts(3), kv(0x01, 1, 1, b"h", 4, b"abcd") + kv(0x02, 2, 1, b"h", 0, buflen=0xFFFFFFF0) +
    kv(0x06, 3, 1, b"", 0, buflen=0x7FFFFFFF))
add("io_retrieve_missing", opts(3), kv(0x02, 1, 1, b"nope", 0, buflen=100) + kv(0x14, 2, 1, b"nope", 0, buflen=0))
add("io_delete_exist", opts(3), kv(0x01, 1, 1, b"d", 1, b"d") + kv(0x14, 2, 1, b"d", 0, buflen=0) +
    kv(0x10, 3, 1, b"d", 0, buflen=0) + kv(0x14, 4, 1, b"d", 0, buflen=0))
add("io_readonly_ns", opts(3), kv(0x01, 1, 2, b"r", 1, b"r") + kv(0x10, 2, 2, b"r", 0, buflen=0) +
    kv(0x02, 3, 2, b"key-1", 0, buflen=64))
add("io_store_options", opts(3), kv(0x01, 1, 1, b"o", 1, b"a", opts_=2) + kv(0x01, 2, 1, b"o", 1, b"b", opts_=2) +
    kv(0x01, 3, 1, b"o2", 1, b"c", opts_=1) + kv(0x01, 4, 1, b"o", 1, b"d", opts_=3))
add("io_bad_ns_key", opts(3), kv(0x01, 1, 9, b"k", 1, b"k") + kv(0x02, 2, 1, b"", 0, buflen=8) +
    kv(0x02, 3, 1, b"k" * 17, 0, buflen=8) + kv(0x99, 4, 1, b"k", 0, buflen=0))
add("io_flush_disconnect", opts(3), kv(0x00, 1, 1, b"", 0, buflen=0) + cmd(fabrics(0x08, 2)) + kv(0x02, 3, 1, b"k", 0, buflen=8))
add("io_admin_on_io", opts(3), identify(1, 1) + prop_get(2, 0x1C))
add("io_connect_again", opts(3), connect(1, qid=1, cntlid=1))
add("io_pipeline_sqsize1", opts(3, sqsize=1), b"".join(kv(0x01, i, 1, b"p%d" % i, 8, pattern(8, i)) for i in range(1, 6)))
add("io_r2t_two_outstanding", opts(3),
    kv(0x01, 1, 1, b"a", 3000, icd=False) + kv(0x01, 2, 1, b"b", 3000, icd=False) +
    h2c(2, 2, 0, pattern(3000, 2)) + h2c(1, 1, 0, pattern(3000, 1)))
add("io_ddgst_bad", opts(3, dd=True), kv(0x01, 1, 1, b"dd", 50, pattern(50), dd=True)[:-4] + b"\xde\xad\xbe\xef" +
    kv(0x02, 2, 1, b"dd", 0, buflen=64, dd=True))
add("io_split_r2t", opts(3, split=True, hd=True), kv(0x01, 1, 1, b"s", 500, icd=False, hd=True) + h2c(1, 1, 0, pattern(500), hd=True))
add("io_linger_retrieve", opts(3, linger=True, hpda=2), kv(0x01, 1, 1, b"l", 700, pattern(700)) +
    kv(0x02, 2, 1, b"l", 0, buflen=1024))
add("io_acl_ns", opts(3, sub=1), kv(0x01, 1, 1, b"a", 5000, icd=False) + h2c(1, 1, 0, pattern(5000)))

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_tcp")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds ({sum(map(len, seeds.values()))} bytes) to {out}")
