# SPDX-License-Identifier: Apache-2.0
"""Long names: SHA-256 keys, the header with the whole name, payloads read straight into the
caller's buffer; hash collisions and foreign objects are misses."""

import hashlib
import os
import struct

import numpy as np
import pytest

from rados_nkv import BatchError, longname
from conftest import NS_SMALL, SMALL_MAX

torch = pytest.importorskip("torch")


def test_helpers_match_the_documented_layout():
    name = "model@world@worker@" + "ab" * 40 + "@bfloat16"
    b = name.encode()
    assert longname.key_for(name) == hashlib.sha256(b).digest()[:16]
    assert longname.key_for(b) == longname.key_for(bytearray(b))
    h = longname.header_size(name)
    assert h % 8 == 0 and h >= 24 + len(b)
    hdr = longname.pack_header(name, 12345)
    assert len(hdr) == h
    assert hdr[0:4] == b"NKVL"
    assert struct.unpack_from("<HBBQH", hdr, 4) == (h, 1, 0, 12345, len(b))
    assert hdr[18:24] == b"\0" * 6 and hdr[24:24 + len(b)] == b and hdr[24 + len(b):] == b"\0" * (h - 24 - len(b))
    assert longname.check_header(hdr, name) == 12345
    assert longname.check_header(hdr + b"payload", name) == 12345
    assert longname.check_header(longname.pack_header(name + "x", 5), name) is None   # another name
    assert longname.check_header(b"\0" * h, name) is None                              # no header
    assert longname.check_header(hdr[:-1], name) is None                               # too short
    assert longname.header_size("x" * 4096) >= 4096 + 24


def test_helpers_bad_arguments():
    with pytest.raises(ValueError):
        longname.key_for("")
    with pytest.raises(ValueError):
        longname.key_for(b"x" * 4097)
    with pytest.raises(TypeError):
        longname.key_for(42)
    with pytest.raises(ValueError):
        longname.pack_header("n", -1)


def test_put_get(client, name):
    n = name("a")
    assert len(n.encode()) > 16
    payload = os.urandom(100000)
    client.put_named(n, payload)
    assert client.get_named(n) == payload
    assert client.exists_named(n) is True
    out = bytearray(100000)
    assert client.get_named_into(n, out) == 100000 and out == payload
    # the value under the key is header + payload
    raw = client.retrieve(longname.key_for(n))
    h = longname.header_size(n)
    assert raw[:h] == longname.pack_header(n, 100000) and raw[h:] == payload
    # a smaller buffer gets the first bytes; the full payload length comes back
    small = bytearray(10)
    assert client.get_named_into(n, small) == 100000 and small == payload[:10]
    assert client.delete_named(n) is True
    assert client.delete_named(n) is False
    assert client.get_named(n) is None
    assert client.get_named_into(n, out) is None
    assert client.exists_named(n) is False


def test_payload_lands_in_the_callers_buffer(client, name):
    n = name("t")
    src = torch.randn(64, 1024)
    client.put_named(n, src)
    dst = torch.empty(64, 1024)
    ptr = dst.data_ptr()
    assert client.get_named_into(n, dst) == src.numel() * 4
    assert dst.data_ptr() == ptr and torch.equal(dst, src)
    arr = np.zeros((64, 1024), dtype=np.float32)
    assert client.get_named_into(n, arr) == arr.nbytes
    assert np.array_equal(arr, src.numpy())
    mv = client.alloc(arr.nbytes)
    assert client.get_named_into(n, mv) == arr.nbytes
    assert bytes(mv) == src.numpy().tobytes()
    client.delete_named(n)


def test_name_sizes_and_kinds(client, name):
    for nm in ("short", b"\x00binary\xffname", "é" * 2048, "x" * 4096):
        client.put_named(nm, b"p:" + (nm.encode() if isinstance(nm, str) else nm)[:8])
        assert client.get_named(nm) == b"p:" + (nm.encode() if isinstance(nm, str) else nm)[:8]
        assert client.delete_named(nm)
    client.put_named(name("empty"), b"")
    assert client.get_named(name("empty")) == b""
    assert client.get_named_into(name("empty"), bytearray(4)) == 0
    client.delete_named(name("empty"))


def test_large_payload(client, name):
    n = name("big")
    payload = os.urandom(64 * (1 << 20) - 8192)   # header + payload within the 64 MiB value limit
    client.put_named(n, payload)
    out = bytearray(len(payload))
    assert client.get_named_into(n, out) == len(payload)
    assert out == payload
    assert client.get_named(n) == payload
    client.delete_named(n)


def test_collision_is_a_miss(client, name):
    """Another name's value under our key (what a hash collision would look like)."""
    ours, theirs = name("ours"), name("theirs")
    k = longname.key_for(ours)
    value = longname.pack_header(theirs, 5) + b"THEIR"
    client.store(k, value)
    assert client.get_named(ours) is None
    assert client.get_named_into(ours, bytearray(100)) is None
    assert client.exists_named(ours) is False
    assert client.delete_named(ours) is False          # someone else's value stays
    assert client.retrieve(k) == value
    client.delete(k)


def test_foreign_object_is_a_miss(client, name):
    n = name("foreign")
    k = longname.key_for(n)
    for plain in (b"just a plain value", b"", os.urandom(5000)):
        client.store(k, plain)
        assert client.get_named(n) is None
        assert client.get_named_into(n, bytearray(64)) is None
        assert client.exists_named(n) is False
        assert client.delete_named(n) is False
        assert client.retrieve(k) == plain
    # a header of our name but a value of another length (truncated): not a hit either
    client.store(k, longname.pack_header(n, 100) + b"short")
    assert client.exists_named(n) is False
    from rados_nkv import NkvError
    with pytest.raises(NkvError):
        client.get_named(n)
    client.delete(k)


def test_named_many(client, name):
    names = [name("m%d" % i) for i in range(64)]
    payloads = [os.urandom(1000 + i) for i in range(64)]
    client.put_named_many(names, payloads)
    outs = [bytearray(2000) for _ in names]
    probe = names[:10] + [name("absent")] + names[10:]
    outs = [bytearray(2000) for _ in probe]
    res = client.get_named_many(probe, outs)
    assert res[10] is None and outs[10] == bytearray(2000)
    got = res[:10] + res[11:]
    assert got == [len(p) for p in payloads]
    for o, p in zip(outs[:10] + outs[11:], payloads):
        assert o[:len(p)] == p
    assert client.exists_named_many(probe) == [True] * 10 + [False] + [True] * 54
    assert all(client.delete_named(n) for n in names)
    assert client.exists_named_many(names) == [False] * 64
    assert client.put_named_many([], []) is None and client.get_named_many([], []) == []


def test_put_named_many_batch_error(client, name):
    names = [name("s%d" % i) for i in range(3)]
    with pytest.raises(BatchError) as ei:
        client.put_named_many(names, [b"a", bytearray(SMALL_MAX), b"c"], nsid=NS_SMALL)   # header pushes it over
    assert [i for i, _ in ei.value.errors] == [1]
    assert client.exists_named_many(names, nsid=NS_SMALL) == [True, False, True]
    for n in names:
        client.delete_named(n, nsid=NS_SMALL)


def test_named_bad_arguments(client, name):
    with pytest.raises(ValueError):
        client.put_named("", b"x")
    with pytest.raises(ValueError):
        client.get_named("n" * 4097)
    with pytest.raises(TypeError):
        client.put_named(123, b"x")
    with pytest.raises(TypeError):
        client.get_named_into(name("x"), b"read-only")
    with pytest.raises(TypeError):
        client.put_named(name("x"), "a str payload")
    with pytest.raises(ValueError):
        client.get_named_many([name("a")], [])
