# SPDX-License-Identifier: Apache-2.0
"""Zero copy: values land in the very memory the caller passed (numpy arrays, torch tensors,
Client.alloc() buffers, registered memory), and are stored from it."""

import ctypes
import os

import numpy as np
import pytest

from rados_nkv.buffers import address

torch = pytest.importorskip("torch")

MiB = 1 << 20


def test_numpy_into_the_array_itself(client, key):
    k = key("np")
    v = np.arange(1 << 18, dtype=np.float32)          # 1 MiB
    client.store(k, v)
    out = np.zeros((512, 512), dtype=np.float32)
    ptr = out.ctypes.data
    assert client.retrieve_into(k, out) == v.nbytes
    assert out.ctypes.data == ptr                     # the same array, not a new one
    assert np.array_equal(out.reshape(-1), v)
    # a view into the middle of a bigger array: the bytes around it are untouched
    big = np.full(3 << 18, -1.0, dtype=np.float32)
    view = big[1 << 18: 2 << 18]
    assert client.retrieve_into(k, view) == v.nbytes
    assert np.array_equal(big[1 << 18: 2 << 18], v)
    assert (big[:1 << 18] == -1).all() and (big[2 << 18:] == -1).all()
    client.delete(k)


def test_torch_into_the_tensor_itself(client, key):
    k = key("pt")
    src = torch.randn(256, 1024, dtype=torch.float16)
    client.store(k, src)                               # from data_ptr(), 512 KiB
    dst = torch.zeros(256, 1024, dtype=torch.float16)
    ptr = dst.data_ptr()
    assert client.retrieve_into(k, dst) == src.numel() * 2
    assert dst.data_ptr() == ptr and torch.equal(dst, src)
    # a tensor that is a slice of a larger storage (contiguous rows): only its bytes change
    arena = torch.zeros(4, 256, 1024, dtype=torch.float16)
    assert client.retrieve_into(k, arena[2]) == src.numel() * 2
    assert torch.equal(arena[2], src) and not arena[1].any() and not arena[3].any()
    # Retrieve Range into a tensor: the second half of the value
    half = torch.zeros(128, 1024, dtype=torch.float16)
    assert client.retrieve_into(k, half, offset=128 * 1024 * 2) == src.numel() * 2
    assert torch.equal(half, src[128:])
    client.delete(k)


def test_torch_bad_tensors(client, key):
    with pytest.raises(ValueError, match="non-contiguous"):
        client.store(key("x"), torch.zeros(8, 8).t())
    with pytest.raises(ValueError, match="meta"):
        client.retrieve_into(key("x"), torch.empty(8, device="meta"))
    with pytest.raises(ValueError, match="C-contiguous"):
        client.retrieve_into(key("x"), np.zeros((8, 8))[:, ::2])
    with pytest.raises(TypeError, match="read-only"):
        ro = np.zeros(8)
        ro.flags.writeable = False
        client.retrieve_into(key("x"), ro)


def test_alloc_buffer_numpy_torch_views(client, key):
    """alloc(): a registered buffer (zero copy over shm); numpy and torch views of it share its
    memory, so a retrieve into the view is in the alloc()ed memory."""
    k = key("al")
    n = 4 * MiB
    mv = client.alloc(n)
    assert isinstance(mv, memoryview) and not mv.readonly and mv.nbytes == n
    base, _ = address(mv)
    arr = np.frombuffer(mv, dtype=np.uint8)
    t = torch.frombuffer(mv, dtype=torch.uint8)
    assert arr.ctypes.data == base and t.data_ptr() == base
    v = os.urandom(n)
    arr[:] = np.frombuffer(v, dtype=np.uint8)
    client.store(k, mv)                                # stored from the registered memory
    arr[:] = 0
    assert client.retrieve_into(k, t) == n             # into the tensor view ...
    assert bytes(mv) == v                              # ... which is the alloc()ed memory
    assert client.retrieve(k) == v
    part = t[MiB: 2 * MiB]
    part.zero_()
    assert client.retrieve_into(k, part, offset=MiB) == n
    assert bytes(mv) == v
    client.delete(k)


def test_register_unregister(client, key, transport):
    k = key("reg")
    n = 8 * MiB
    arena = np.zeros(n, dtype=np.uint8)
    ptr = arena.ctypes.data
    client.register(arena)
    v = np.random.randint(0, 256, n, dtype=np.uint8)
    client.store(k, v)
    assert client.retrieve_into(k, arena) == n
    assert arena.ctypes.data == ptr and np.array_equal(arena, v)   # same memory, same contents
    sub = arena[4096 + 1: 2 * MiB]                     # inside the registered pages, unaligned start
    sub[:] = 0
    assert client.retrieve_into(k, sub, offset=4097) == n
    assert np.array_equal(arena, v)
    from rados_nkv import NkvError
    with pytest.raises(NkvError):
        client.register(arena)                         # already registered: EEXIST
    client.unregister(arena)
    with pytest.raises(ValueError):
        client.unregister(arena)
    assert np.array_equal(arena, v)                    # contents survive unregistering
    # a tensor registers too
    t = torch.zeros(n // 4, dtype=torch.float32)
    client.register(t)
    assert client.retrieve_into(k, t) == n
    assert np.array_equal(t.numpy().view(np.uint8), v)
    client.unregister(t)
    client.delete(k)


def test_retrieve_returns_bytes_it_read_into(client, key, monkeypatch):
    """retrieve() reads into the bytes object it returns (no copy once it knows the value size)."""
    import rados_nkv.client as rc
    made = []
    real = rc._new_bytes

    def spy(n):
        b, a = real(n)
        made.append(b)
        return b, a
    monkeypatch.setattr(rc, "_new_bytes", spy)
    k = key("rb")
    v = os.urandom(3 * MiB)
    client.store(k, v)
    client.retrieve(k)                   # learns the size
    made.clear()
    got = client.retrieve(k)
    assert got == v and type(got) is bytes
    assert len(made) == 1 and got is made[0]
    client.delete(k)


def test_address_helper():
    b = bytearray(10)
    a, n = address(b)
    assert n == 10 and a == ctypes.addressof((ctypes.c_char * 10).from_buffer(b))
    t = torch.arange(6, dtype=torch.int64)
    assert address(t) == (t.data_ptr(), 48)
