# SPDX-License-Identifier: Apache-2.0
"""Store TTL from Python (Client.store(..., ttl=, pin=), store_many, put_named, the aio calls, make_op)
against a rados-nkv daemon whose JSON configuration gives namespaces a cache; and the argument checks,
which need no daemon.

The daemon here is this module's own (the session daemon's namespaces have no cache): nsid 1 without
a cache, 2 a cache with no default TTL, 3 a cache with a 1 s default TTL, 4 a cache with a 1000-byte
pin quota, 5 a cache whose max_ttl is 86400 s. Each test waits out its short TTLs itself (2.5 s past a
1 s TTL).
"""

import asyncio
import errno
import json
import os
import time
from pathlib import Path

import pytest

import rados_nkv
from rados_nkv import NkvError, BatchError, _ffi
from conftest import Daemon, _accepts, _cluster_or_skip, daemon_binary, free_port

NS_PLAIN, NS_CACHE, NS_DEFTTL, NS_QUOTA, NS_MAXTTL = 1, 2, 3, 4, 5
NQN = "nqn.2026-11.io.rados-nkv:pycache"
EXPIRE_WAIT = 2.5


# ---- no daemon: arguments ----------------------------------------------------------------------

def test_op_fields_follow_the_c_layout():
    names = [f[0] for f in _ffi.Op._fields_]
    assert "flags" in names and "ttl_s" in names
    assert "rsvd0" not in names and "rsvd1" not in names
    assert _ffi.Op.flags.offset == 3 and _ffi.Op.ttl_s.offset == 36
    assert rados_nkv.TTL_NONE == 0xFFFFFFFF
    assert _ffi.OP_PIN == 1


def test_make_op_ttl_and_pin():
    buf = bytearray(8)
    addr, _ = rados_nkv.buffers.address(buf)
    op = _ffi.make_op(_ffi.OP_STORE, b"k", addr, 8, ttl=30, pin=True)
    assert (op.ttl_s, op.flags) == (30, _ffi.OP_PIN)
    op = _ffi.make_op(_ffi.OP_STORE, b"k", addr, 8, ttl=rados_nkv.TTL_NONE)
    assert (op.ttl_s, op.flags) == (0xFFFFFFFF, 0)
    op = _ffi.make_op(_ffi.OP_STORE, b"k", addr, 8, pin=True)
    assert (op.ttl_s, op.flags) == (0, _ffi.OP_PIN)
    op = _ffi.make_op(_ffi.OP_STORE, b"k", addr, 8)
    assert (op.ttl_s, op.flags) == (0, 0)
    with pytest.raises(ValueError, match="ttl and pin are for OP_STORE"):
        _ffi.make_op(_ffi.OP_RETRIEVE, b"k", addr, 8, ttl=5)
    with pytest.raises(ValueError, match="ttl and pin are for OP_STORE"):
        _ffi.make_op(_ffi.OP_DELETE, b"k", pin=True)


@pytest.mark.parametrize("ttl,exc,msg", [
    (-1, ValueError, "out of range"),
    (1 << 32, ValueError, "out of range"),
    (1.5, TypeError, "ttl must be an int"),
    ("60", TypeError, "ttl must be an int"),
    (True, TypeError, "ttl must be an int"),
])
def test_bad_ttl(ttl, exc, msg):
    with pytest.raises(exc, match=msg):
        _ffi.ttl_fields(ttl, False)


def test_bad_pin():
    with pytest.raises(TypeError, match="pin must be True or False"):
        _ffi.ttl_fields(5, 1)


# ---- a daemon with cache namespaces ------------------------------------------------------------

def pytest_generate_tests(metafunc):
    if "cache_daemon" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--nkv-backend")
        backends = ["mem", "rados"] if chosen == "all" else [chosen]
        metafunc.parametrize("cache_daemon", backends, indirect=True, scope="module")


class CacheDaemon(Daemon):
    """conftest's daemon, configured by a JSON file with cache namespaces."""

    def __init__(self, backend, tmp):
        self.backend = backend
        self.label = backend + ", cache namespaces"
        self.port = free_port()
        self.sock = os.path.join(tmp, "cache-%s.sock" % backend)
        self.log_path = os.path.join(tmp, "cache-daemon-%s.log" % backend)
        ns = "pycache-%d-%d" % (os.getpid(), int(time.time()))
        if backend == "rados":
            be = {"type": "rados", "ceph_conf": os.environ["NKV_CEPH_CONF"],
                  "client_id": os.environ.get("NKV_CEPH_USER", "admin"), "op_timeout_s": 20}
            if os.environ.get("NKV_CEPH_KEYRING"):
                be["keyring"] = os.environ["NKV_CEPH_KEYRING"]
        else:
            be = {"type": "mem"}
        conf = {"backend": be, "listeners": [{"address": "127.0.0.1", "port": self.port}], "discovery": False,
                "subsystems": [{"nqn": NQN, "pool": os.environ.get("NKV_CEPH_POOL", "nkv"), "shm_socket": self.sock,
                                "namespaces": [
                                    {"nsid": NS_PLAIN, "rados_namespace": ns + "-plain"},
                                    {"nsid": NS_CACHE, "rados_namespace": ns + "-cache", "cache": {}},
                                    {"nsid": NS_DEFTTL, "rados_namespace": ns + "-def", "cache": {"default_ttl": 1}},
                                    {"nsid": NS_QUOTA, "rados_namespace": ns + "-quota",
                                     "cache": {"pin_quota": 1000}},
                                    {"nsid": NS_MAXTTL, "rados_namespace": ns + "-max",
                                     "cache": {"max_ttl": 86400}}]}],
                "log_level": "warn"}
        self.conf_path = os.path.join(tmp, "cache-%s.json" % backend)
        Path(self.conf_path).write_text(json.dumps(conf))
        self._start([daemon_binary(), "-c", self.conf_path],
                    lambda: _accepts(self.port) and os.path.exists(self.sock))

    def connect(self, transport, nsid):
        return rados_nkv.connect(self.target(transport), subnqn=NQN if transport == "tcp" else None, nsid=nsid)


@pytest.fixture(scope="module")
def cache_daemon(request, tmp_session):
    if request.param == "rados":
        _cluster_or_skip()
    d = CacheDaemon(request.param, tmp_session)
    yield d
    d.stop()


@pytest.fixture
def cc(cache_daemon, transport):
    """A client whose default namespace is the cache without a default TTL."""
    c = cache_daemon.connect(transport, NS_CACHE)
    yield c
    c.close()


def test_ttl_expires(cc, key):
    k1, k30, kn, kp = key("t1"), key("t30"), key("tn"), key("p")
    cc.store(k1, b"one second", ttl=1)
    cc.store(k30, b"thirty", ttl=30)
    cc.store(kn, b"never", ttl=rados_nkv.TTL_NONE)
    cc.store(kp, b"pinned", ttl=60, pin=True)
    assert cc.retrieve(k1) == b"one second"
    assert cc.exist(k1) is True
    time.sleep(EXPIRE_WAIT)
    assert cc.retrieve(k1) is None
    assert cc.exist(k1) is False
    assert cc.retrieve(k30) == b"thirty"
    assert cc.retrieve(kn) == b"never"
    assert cc.retrieve(kp) == b"pinned"


def test_default_ttl_namespace(cc, key):
    k, kn, kp = key("d"), key("dn"), key("dp")
    cc.store(k, b"plain store", nsid=NS_DEFTTL)                     # the namespace's 1 s default
    cc.store(kn, b"never", nsid=NS_DEFTTL, ttl=rados_nkv.TTL_NONE)
    cc.store(kp, b"pinned with the default", nsid=NS_DEFTTL, pin=True)
    assert cc.retrieve(k, nsid=NS_DEFTTL) == b"plain store"
    time.sleep(EXPIRE_WAIT)
    assert cc.retrieve(k, nsid=NS_DEFTTL) is None
    assert cc.retrieve(kp, nsid=NS_DEFTTL) is None                  # a pin expires like any entry
    assert cc.retrieve(kn, nsid=NS_DEFTTL) == b"never"


def test_pin_needs_a_finite_ttl(cc, key):
    k = key("p0")
    for kw in ({"pin": True}, {"pin": True, "ttl": rados_nkv.TTL_NONE}):
        with pytest.raises(NkvError) as ei:
            cc.store(k, b"x", **kw)
        assert ei.value.errno == errno.EINVAL and ei.value.status == 0x002, kw
        assert "pin" in str(ei.value) and "TTL" in str(ei.value), str(ei.value)
    assert cc.exist(k) is False


def test_no_cache_namespace(cc, key):
    k = key("nc")
    for kw in ({"ttl": 5}, {"ttl": 5, "pin": True}, {"pin": True}):
        with pytest.raises(NkvError) as ei:
            cc.store(k, b"x", nsid=NS_PLAIN, **kw)
        assert ei.value.errno == errno.EINVAL and ei.value.status == 0x002, kw
        # the cause, as the nkv CLI names it, not only "Invalid Field in Command"
        assert "namespace %d has no cache" % NS_PLAIN in str(ei.value), str(ei.value)
    assert cc.exist(k, nsid=NS_PLAIN) is False
    cc.store(k, b"x", nsid=NS_PLAIN)                                # a plain Store still works there
    assert cc.delete(k, nsid=NS_PLAIN) is True


@pytest.mark.parametrize("h,exc,msg", [
    (-1, ValueError, "out of range"),
    (1 << 64, ValueError, "out of range"),
    (b"", ValueError, "empty"),
    ("abc", TypeError, "block_hash must be an int or bytes"),
    (True, TypeError, "block_hash must be an int or bytes"),
])
def test_bad_block_hash(cc, key, h, exc, msg):
    with pytest.raises(exc, match=msg):
        cc.store(key("bh"), b"x", block_hash=h)
    with pytest.raises(ValueError, match="2 keys but 1 block_hashes"):
        cc.store_many([key("b1"), key("b2")], [b"x", b"y"], block_hashes=[1])


def test_block_hash_on_every_namespace(cc, key):
    """A block hash rides on a Store TTL (CDW13 bit 1): a cache namespace keeps it (with a TTL and a
    pin too), a plain namespace takes the Store as a plain one; the value is unchanged."""
    k, kp, kt = key("bh1"), key("bh2"), key("bh3")
    assert cc.store(k, b"cached", block_hash=(1 << 64) - 1) is None
    assert cc.store(kt, b"ttl", block_hash=bytes(32), ttl=60, pin=True) == 60
    assert cc.store(kp, b"plain", nsid=NS_PLAIN, block_hash=5) is None
    assert cc.store_many([k, kt], [b"m1", b"m2"], block_hashes=[None, 3]) is None
    assert (cc.retrieve(k), cc.retrieve(kt), cc.retrieve(kp, nsid=NS_PLAIN)) == (b"m1", b"m2", b"plain")
    assert cc.delete(kp, nsid=NS_PLAIN) is True
    with pytest.raises(NkvError) as ei:                             # a TTL still needs a cache
        cc.store(kp, b"x", nsid=NS_PLAIN, ttl=5, block_hash=5)
    assert ei.value.status == 0x002


def test_pin_quota(cc, key):
    q1, q2, q3 = key("q1"), key("q2"), key("q3")
    cc.store(q1, bytes(600), nsid=NS_QUOTA, ttl=60, pin=True)
    with pytest.raises(NkvError) as ei:
        cc.store(q2, bytes(600), nsid=NS_QUOTA, ttl=60, pin=True)
    assert ei.value.errno == errno.ENOSPC and ei.value.status == 0x081
    assert cc.exist(q2, nsid=NS_QUOTA) is False
    cc.store(q3, bytes(600), nsid=NS_QUOTA, ttl=60)                 # automatic entries are not pins
    cc.delete(q1, nsid=NS_QUOTA)
    cc.delete(q3, nsid=NS_QUOTA)


def test_store_many_and_named(cc, key, name):
    keys = [key("m%d" % i) for i in range(8)]
    cc.store_many(keys, [b"v%d" % i for i in range(8)], ttl=1)
    cc.put_named(name("a"), b"named payload", ttl=1)
    cc.put_named_many([name("b"), name("c")], [b"b", b"c"], ttl=60, pin=True)
    assert cc.retrieve(keys[3]) == b"v3"
    assert cc.get_named(name("a")) == b"named payload"
    with pytest.raises(BatchError) as ei:
        cc.store_many(keys[:2], [b"x", b"y"], nsid=NS_PLAIN, ttl=5)
    assert [i for i, _ in ei.value.errors] == [0, 1]
    assert all(e.errno == errno.EINVAL for _, e in ei.value.errors)
    time.sleep(EXPIRE_WAIT)
    assert cc.exist_many(keys) == [False] * 8
    assert cc.get_named(name("a")) is None
    assert cc.get_named(name("b")) == b"b"
    assert cc.get_named(name("c")) == b"c"


def test_aio(cc, key):
    k1, k2 = key("a1"), key("a2")

    async def main():
        await cc.aio.store(k1, b"async", ttl=1)
        await cc.aio.store_many([k2], [b"pinned"], ttl=60, pin=True)
        assert await cc.aio.retrieve(k1) == b"async"
        with pytest.raises(NkvError) as ei:
            await cc.aio.store(k1, b"x", nsid=NS_PLAIN, ttl=5)
        assert ei.value.errno == errno.EINVAL
        await asyncio.sleep(EXPIRE_WAIT)
        assert await cc.aio.retrieve(k1) is None
        assert await cc.aio.retrieve(k2) == b"pinned"
    asyncio.run(main())


def test_engine_ops(cc, key):
    eng = cc.engine
    ops = _ffi.op_array(2)
    b1, b2 = bytearray(b"engine ttl"), bytearray(b"engine pin")
    _ffi.make_op(_ffi.OP_STORE, key("e1"), rados_nkv.buffers.address(b1)[0], len(b1), nsid=NS_CACHE, ttl=1, op=ops[0])
    _ffi.make_op(_ffi.OP_STORE, key("e2"), rados_nkv.buffers.address(b2)[0], len(b2), nsid=NS_CACHE, ttl=60, pin=True,
                 op=ops[1])
    assert eng.run(ops) == 0
    assert (ops[0].rc, ops[1].rc) == (0, 0)
    time.sleep(EXPIRE_WAIT)
    assert cc.retrieve(key("e1")) is None
    assert cc.retrieve(key("e2")) == b"engine pin"


def test_ttl_applied_is_returned(cc, key, name):
    """store() returns the TTL the target applied (CQE DW0), not the one asked for: max_ttl cuts."""
    k = key("mx")
    assert cc.store(k, b"v", nsid=NS_MAXTTL, ttl=999999) == 86400
    assert cc.store(k, b"v", nsid=NS_MAXTTL, ttl=rados_nkv.TTL_NONE) == 86400
    assert cc.store(k, b"v", nsid=NS_MAXTTL, ttl=60) == 60
    assert cc.store(k, b"v", nsid=NS_MAXTTL, ttl=999999, pin=True) == 86400
    assert cc.store(k, b"v", nsid=NS_MAXTTL, ttl=3600, pin=True) == 3600
    assert cc.store(k, b"v", nsid=NS_CACHE, ttl=rados_nkv.TTL_NONE) == rados_nkv.TTL_NONE
    assert cc.store(k, b"v", nsid=NS_DEFTTL, pin=True) == 1          # the namespace's default
    assert cc.store(k, b"v", nsid=NS_DEFTTL) is None                 # a standard Store says nothing
    assert cc.store_many([k, key("mx2")], [b"a", b"b"], nsid=NS_MAXTTL, ttl=10 ** 6) == [86400, 86400]
    assert cc.store_many([k], [b"a"], nsid=NS_MAXTTL) is None
    assert cc.put_named(name("mx"), b"p", nsid=NS_MAXTTL, ttl=10 ** 6) == 86400
    assert cc.put_named_many([name("mx")], [b"p"], nsid=NS_MAXTTL, ttl=30) == [30]

    async def main():
        assert await cc.aio.store(k, b"v", nsid=NS_MAXTTL, ttl=10 ** 7) == 86400
    asyncio.run(main())


def test_pin_never_refused_under_max_ttl(cc, key):
    """A pin asked for "never" is refused on a namespace with a max_ttl too (not cut to it and
    reported as never): as on a namespace without one."""
    k = key("mp")
    for kw in ({"pin": True}, {"pin": True, "ttl": rados_nkv.TTL_NONE}):
        with pytest.raises(NkvError) as ei:
            cc.store(k, b"x", nsid=NS_MAXTTL, **kw)
        assert ei.value.errno == errno.EINVAL and ei.value.status == 0x002, kw
    assert cc.exist(k, nsid=NS_MAXTTL) is False
