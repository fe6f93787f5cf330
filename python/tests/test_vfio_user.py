# SPDX-License-Identifier: Apache-2.0
"""The binding over vfio-user: connect("vfio-user:PATH") reaches the daemon's subsystem through
libnkv's vfio-user host driver (the same controller as shm: PRPs, registered memory, MSI-X
interrupts), on every backend. A vfio-user socket serves one client at a time, so these tests
connect one by one instead of through the tcp/shm `transport` matrix."""

import asyncio
import errno
import os

import numpy as np
import pytest

import rados_nkv
from rados_nkv import NkvError
from conftest import NS_LIST, NS_RO


@pytest.fixture
def vclient(daemon):
    c = daemon.connect("vfio-user")
    yield c
    c.close()


def test_attributes(vclient, daemon):
    assert vclient.transport == "vfio-user"
    assert vclient.subnqn == "nqn.2026-11.io.rados-nkv:nkv"
    assert vclient.target == "vfio-user:" + daemon.vfu_sock
    assert repr(vclient).startswith("<rados_nkv.Client vfio-user")


def test_every_call(vclient, key):
    c = vclient
    k = key("a")
    assert c.store(k, b"hello") is None
    assert c.retrieve(k) == b"hello" and c.exist(k) is True
    out = bytearray(3)
    assert c.retrieve_into(k, out, offset=1) == 5 and out == b"ell"
    with pytest.raises(NkvError) as ei:
        c.store(k, b"x", must_not_exist=True)
    assert ei.value.errno == errno.EEXIST
    assert c.retrieve(k, nsid=NS_RO) == b"hello"          # the read-only view of namespace 1
    with pytest.raises(NkvError) as ei:
        c.store(k, b"x", nsid=NS_RO)
    assert ei.value.errno == errno.EROFS
    big = os.urandom((3 << 20) + 17)                       # PRP lists, bounced through the queue's area
    c.store(key("big"), big)
    assert c.retrieve(key("big")) == big
    for lk in c.list(nsid=NS_LIST):
        c.delete(lk, nsid=NS_LIST)
    c.store_many([b"V1", b"V2"], [b"1", b"2"], nsid=NS_LIST)
    assert c.list(nsid=NS_LIST) == [b"V1", b"V2"]
    assert c.delete(k) is True and c.delete(k) is False and c.retrieve(k) is None
    ks = [key("m%d" % i) for i in range(256)]
    vals = [os.urandom(100 + i) for i in range(256)]
    c.store_many(ks, vals)
    outs = [bytearray(len(v)) for v in vals]
    assert c.retrieve_many(ks, outs) == [len(v) for v in vals] and outs == vals
    assert c.delete_many(ks) == [True] * 256
    c.put_named("a name longer than a key: " + "x" * 40, b"payload")
    assert c.get_named("a name longer than a key: " + "x" * 40) == b"payload"


def test_registered_memory(vclient, key):
    """alloc(): memory the controller was given with DMA_MAP; Retrieves land there directly."""
    mv = vclient.alloc(1 << 20)
    arr = np.frombuffer(mv, dtype=np.uint8)
    data = np.random.randint(0, 256, 1 << 20, dtype=np.uint8)
    vclient.store(key("z"), data)
    assert vclient.retrieve_into(key("z"), mv) == 1 << 20
    assert np.array_equal(arr, data)


def test_aio(vclient, key):
    aio = vclient.aio

    async def main():
        assert await aio.store(key("q"), b"async") is None
        assert await aio.retrieve(key("q")) == b"async"
        assert await aio.delete(key("q")) is True
    asyncio.run(main())


def test_one_client_per_socket(vclient, daemon):
    """A second client while one is attached is refused cleanly (one driver per PCI function)."""
    with pytest.raises(NkvError) as ei:
        daemon.connect("vfio-user", timeout=5)
    assert ei.value.errno == errno.ECONNRESET
    assert vclient.exist(b"still-works") is False


def test_bad_targets(tmp_path):
    with pytest.raises(ValueError, match="vfio-user target without a socket path"):
        rados_nkv.connect("vfio-user:")
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("vfio-user:%s" % (tmp_path / "none.vfu"), timeout=5)
    assert ei.value.errno == errno.ENOENT
    with pytest.raises(ValueError, match="tls_key is for NVMe/TCP"):
        rados_nkv.connect("vfio-user:%s" % (tmp_path / "none.vfu"), tls_key="@x")
