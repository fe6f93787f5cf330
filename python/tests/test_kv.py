# SPDX-License-Identifier: Apache-2.0
"""The synchronous single-key calls, on every backend and transport (the client fixture)."""

import errno
import os

import pytest

import rados_nkv
from rados_nkv import NkvError
from conftest import NS_RO, NS_SMALL, NS_LIST, SMALL_MAX

MiB = 1 << 20


def test_attributes(client, daemon, transport):
    assert client.transport == transport
    assert client.nsid == 1
    assert client.queues == 4
    assert client.subnqn == "nqn.2026-11.io.rados-nkv:nkv"
    assert client.max_value == 64 * MiB
    assert not client.read_only
    assert repr(client).startswith("<rados_nkv.Client %s" % transport)


def test_store_retrieve_small(client, key):
    k = key("a")
    assert client.store(k, b"hello") is None
    assert client.retrieve(k) == b"hello"
    assert client.exist(k) is True
    client.store(k, bytearray(b"world!"))
    assert client.retrieve(k) == b"world!"
    assert client.delete(k) is True
    assert client.delete(k) is False
    assert client.exist(k) is False
    assert client.retrieve(k) is None


def test_sizes(client, key):
    """0 B, 1 B, around the retrieve() guess (64 KiB), 1 MiB + 1: each read back whole."""
    k = key("sz")
    for n in (0, 1, 2, 65535, 65536, 65537, MiB + 1):
        v = os.urandom(n)
        client.store(k, v)
        got = client.retrieve(k)
        assert type(got) is bytes and got == v, n
        out = bytearray(n + 7)
        assert client.retrieve_into(k, out) == n
        assert bytes(out[:n]) == v and out[n:] == b"\0" * 7


def test_64mib_value(client, key):
    k = key("big")
    v = os.urandom(64 * MiB)   # the namespace's max value
    client.store(k, v)
    assert client.retrieve(k) == v
    out = bytearray(64 * MiB)
    assert client.retrieve_into(k, out) == 64 * MiB
    assert out == v
    # a range from the middle, straight into a smaller buffer
    part = bytearray(3 * MiB)
    assert client.retrieve_into(k, part, offset=40 * MiB + 5) == 64 * MiB
    assert part == v[40 * MiB + 5: 43 * MiB + 5]
    client.delete(k)


def test_value_over_max(client, key):
    with pytest.raises(NkvError) as ei:
        client.store(key("over"), bytearray(SMALL_MAX + 1), nsid=NS_SMALL)
    assert ei.value.errno in (errno.EFBIG, errno.EINVAL)
    assert client.retrieve(key("over"), nsid=NS_SMALL) is None


def test_misses(client, key):
    k = key("absent")
    assert client.retrieve(k) is None
    assert client.retrieve_into(k, bytearray(10)) is None
    assert client.retrieve_into(k, bytearray(10), offset=3) is None
    assert client.exist(k) is False
    assert client.delete(k) is False


def test_keys_16_bytes_binary_and_str(client, key):
    k16 = bytes(range(16))          # binary, with 00h
    assert len(k16) == 16
    client.store(k16, b"sixteen")
    assert client.retrieve(k16) == b"sixteen"
    assert client.retrieve(bytearray(k16)) == b"sixteen"
    assert client.retrieve(memoryview(k16)) == b"sixteen"
    client.delete(k16)
    s = "kéy-" + key("").hex()[:6]    # str keys are UTF-8
    client.store(s, b"utf8")
    assert client.retrieve(s.encode("utf-8")) == b"utf8"
    client.delete(s)


def test_key_17_bytes(client):
    with pytest.raises(ValueError, match="17 bytes"):
        client.store(b"x" * 17, b"v")
    with pytest.raises(ValueError):
        client.retrieve("é" * 9)    # 18 bytes of UTF-8
    with pytest.raises(ValueError):
        client.exist(b"")


def test_store_options(client, key):
    k = key("opt")
    with pytest.raises(NkvError) as ei:
        client.store(k, b"v", must_exist=True)
    assert ei.value.errno == errno.ENOENT
    assert ei.value.status == 0x087 and "Key Does Not Exist" in ei.value.status_name
    assert k.hex() in str(ei.value)
    client.store(k, b"v1", must_not_exist=True)
    with pytest.raises(NkvError) as ei:
        client.store(k, b"v2", must_not_exist=True)
    assert ei.value.errno == errno.EEXIST and ei.value.status == 0x089
    client.store(k, b"v3", must_exist=True)
    assert client.retrieve(k) == b"v3"
    with pytest.raises(ValueError):
        client.store(k, b"v", must_exist=True, must_not_exist=True)
    client.delete(k)


def test_read_only_namespace(client, key):
    k = key("ro")
    client.store(k, b"via ns 1")
    assert client.retrieve(k, nsid=NS_RO) == b"via ns 1"   # the same RADOS namespace
    with pytest.raises(NkvError) as ei:
        client.store(k, b"x", nsid=NS_RO)
    assert ei.value.errno == errno.EROFS and ei.value.status == 0x20
    assert isinstance(ei.value, OSError)
    client.delete(k)


def test_retrieve_into_partial_and_range(client, key):
    k = key("rng")
    v = bytes(range(256)) * 40   # 10240 bytes
    client.store(k, v)
    small = bytearray(100)
    assert client.retrieve_into(k, small) == len(v)     # the full size; 100 bytes written
    assert small == v[:100]
    out = bytearray(b"\xee" * 300)
    assert client.retrieve_into(k, out, offset=10000) == len(v)
    assert out[:240] == v[10000:] and out[240:] == b"\xee" * 60
    out = bytearray(b"\xee" * 8)
    assert client.retrieve_into(k, out, offset=len(v)) == len(v)     # at the end: nothing moves
    assert client.retrieve_into(k, out, offset=len(v) + 99) == len(v)
    assert out == b"\xee" * 8
    mv = memoryview(bytearray(64))[16:48]                              # a slice of a buffer
    assert client.retrieve_into(k, mv, offset=1) == len(v)
    assert mv.obj[16:48] == v[1:33] and mv.obj[:16] == b"\0" * 16
    client.delete(k)


def test_list(client, key):
    # namespace 4 is the List namespace: empty it first (the other transport's run left keys)
    for k in client.list(nsid=NS_LIST):
        client.delete(k, nsid=NS_LIST)
    assert client.list(nsid=NS_LIST) == []
    keys = [b"L%04d" % i for i in range(300)] + [b"M", b"\x00z", bytes(range(16))]
    client.store_many(keys, [b"v"] * len(keys), nsid=NS_LIST)
    want = sorted(keys)   # byte order, shorter first on a common prefix: Python's bytes order
    assert client.list(nsid=NS_LIST) == want
    assert client.list(b"L0100", nsid=NS_LIST) == [k for k in want if k >= b"L0100"]
    assert client.list(b"L0100", nsid=NS_LIST, limit=3) == [b"L0100", b"L0101", b"L0102"]
    assert client.list("M", nsid=NS_LIST) == [b"M"]
    assert client.list(b"N", nsid=NS_LIST) == []
    assert client.list(nsid=NS_LIST, limit=0) == []


def test_list_paging(client, key, monkeypatch):
    """Small List pages: resuming at the last key of a page (inclusive) loses and repeats nothing."""
    import rados_nkv.client as rc
    for k in client.list(nsid=NS_LIST):
        client.delete(k, nsid=NS_LIST)
    keys = [os.urandom(1 + i % 16) for i in range(500)]
    client.store_many(keys, [b""] * len(keys), nsid=NS_LIST)
    monkeypatch.setattr(rc, "LIST_PAGE", 256)   # 4-byte count + at most 12 entries per page
    assert client.list(nsid=NS_LIST) == sorted(set(keys))


def test_values_from_every_buffer_kind(client, key):
    import array
    k = key("kinds")
    for v, want in ((b"bytes", b"bytes"), (bytearray(b"ba"), b"ba"), (memoryview(b"xmvx")[1:3], b"mv"),
                    (array.array("I", [1, 2]), bytes(array.array("I", [1, 2])))):
        client.store(k, v)
        assert client.retrieve(k) == want
    client.delete(k)


def test_lib_version():
    assert rados_nkv.lib_version() == rados_nkv.__version__
