#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz_group: the omap entries of a gateway group's object.
Record: u16 LE key length, key, u16 LE value length, value."""
import json, os, struct, sys

def rec(k, v):
    k = k.encode() if isinstance(k, str) else k
    v = v.encode() if isinstance(v, str) else v
    return struct.pack("<H", len(k)) + k + struct.pack("<H", len(v)) + v

def js(o):
    return json.dumps(o, separators=(",", ":"))

X = "nqn.2026-12.io.example:kv"
SS = {"nqn": X, "pool": "nkv", "max_namespaces": 0, "allow_any_host": False, "shm_socket": ""}
HOST = {"host_nqn": "nqn.2014-08.org.nvmexpress:uuid:1", "dhchap_key": "", "dhchap_ctrl_key": "", "nqn": X}
NS = {"nsid": 1, "rados_namespace": "t", "max_value": 0, "read_only": False, "nqn": X}
CACHE = dict(NS, nsid=2, cache={"capacity_bytes": "8388608", "eviction": "fifo", "default_ttl_s": 600})
LST = {"gateway": "gw-a", "address": "127.0.0.1", "port": 4420, "tls": False}
EPOCH = rec("epoch", "%020d" % 7)
good = (EPOCH + rec("s/" + X, js(SS)) + rec("h/%s/%s" % (X, HOST["host_nqn"]), js(HOST)) +
        rec("n/%s/1" % X, js(NS)) + rec("n/%s/2" % X, js(CACHE)) + rec("l/gw-a/127.0.0.1/4420", js(LST)))
XS = X + "/nqn.y"
slash = (EPOCH + rec("s/" + X, js(SS)) + rec("s/" + XS.replace("/", "%2F"), js(dict(SS, nqn=XS))) +
         rec("h/%s/nqn.y%%2Fnqn.z" % X, js(dict(HOST, host_nqn="nqn.y/nqn.z"))) +
         rec("h/%s/nqn.z" % XS.replace("/", "%2F"), js(dict(HOST, host_nqn="nqn.z", nqn=XS))))
legacy = (EPOCH + rec("s/" + XS, js(dict(SS, nqn=XS))) + rec("h/%s/nqn.z" % XS, js(dict(HOST, host_nqn="nqn.z", nqn=XS))) +
          rec("n/%s/3" % XS, js(dict(NS, nsid=3, nqn=XS))))
seeds = {
    "good": good,
    "slash": slash,
    "legacy": legacy,
    "not_json": EPOCH + rec("s/nqn.garbage", "{{{not json") + rec("s/" + X, js(SS)),
    "long_keys": EPOCH + b"".join(rec("x" * 1100 + "%05d" % i, "{}") for i in range(8)),
    "orphans": EPOCH + rec("h/nqn.none/nqn.h", js(dict(HOST, nqn="nqn.none"))) + rec("n/nqn.none/1", js(dict(NS, nqn="nqn.none"))),
    "mismatch": EPOCH + rec("s/nqn.other", js(SS)) + rec("l/gw-b/127.0.0.1/1", js(LST)) + rec("q/what", "{}"),
    "duplicates": good + rec("h/%s/%s" % (X, HOST["host_nqn"].replace(":", ":")), js(HOST)) + rec("s/" + X, js(SS)),
    "types": EPOCH + rec("s/" + X, js(dict(SS, pool=5, max_namespaces=-1))) + rec("s/nqn.a", js({"nqn": "nqn.a", "pool": "p", "max_namespaces": "12"})) +
             rec("n/nqn.a/0", js(dict(NS, nsid=0, nqn="nqn.a"))) + rec("n/nqn.a/5", js(dict(NS, nsid="5", nqn="nqn.a", cache={"eviction": "bogus"}))),
    "no_epoch": rec("s/" + X, js(SS)),
    "nul_key": EPOCH + rec(b"s/nqn.a\0b", js({"nqn": "nqn.a", "pool": "p"})) + rec("s/nqn.a", js({"nqn": "nqn.a", "pool": "p"})),
}
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus_group")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
