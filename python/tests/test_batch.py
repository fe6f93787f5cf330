# SPDX-License-Identifier: Apache-2.0
"""Batched calls: one engine batch of many ops (many commands in flight over several queues)."""

import errno
import os
import threading

import numpy as np
import pytest

from rados_nkv import BatchError, NkvError
from conftest import NS_SMALL, SMALL_MAX

MiB = 1 << 20


def test_store_retrieve_many(client, key):
    n = 256
    keys = [key("%d" % i) for i in range(n)]
    vals = [os.urandom(1000 + 37 * i) for i in range(n)]
    assert client.store_many(keys, vals) is None
    outs = [bytearray(len(v)) for v in vals]
    assert client.retrieve_many(keys, outs) == [len(v) for v in vals]
    assert all(o == v for o, v in zip(outs, vals))
    assert client.exist_many(keys) == [True] * n
    # misses are None/False in place, not errors
    mixed = [keys[0], key("nope1"), keys[1], key("nope2")]
    outs = [bytearray(2000) for _ in mixed]
    assert client.retrieve_many(mixed, outs) == [len(vals[0]), None, len(vals[1]), None]
    assert outs[0][:len(vals[0])] == vals[0] and outs[1] == bytearray(2000)
    assert client.exist_many(mixed) == [True, False, True, False]
    assert client.delete_many(mixed) == [True, False, True, False]
    assert client.delete_many(keys) == [False, False] + [True] * (n - 2)
    assert client.exist_many(keys) == [False] * n


def test_retrieve_many_into_one_buffer_with_offsets(client, key):
    """256 blocks into slices of one preallocated array, plus Retrieve Range offsets."""
    n, bs = 256, 8 * 1024
    keys = [key("b%d" % i) for i in range(n)]
    data = np.random.randint(0, 256, n * bs, dtype=np.uint8)
    client.store_many(keys, [data[i * bs:(i + 1) * bs] for i in range(n)])
    arena = np.zeros(n * bs, dtype=np.uint8)
    assert client.retrieve_many(keys, [arena[i * bs:(i + 1) * bs] for i in range(n)]) == [bs] * n
    assert np.array_equal(arena, data)
    half = np.zeros((n, bs // 2), dtype=np.uint8)
    assert client.retrieve_many(keys, list(half), offsets=[bs // 2] * n) == [bs] * n
    assert np.array_equal(half, data.reshape(n, bs)[:, bs // 2:])
    client.delete_many(keys)


def test_many_64mib_values(client, key):
    keys = [key("L1"), key("L2")]
    vals = [os.urandom(64 * MiB), os.urandom(64 * MiB)]
    client.store_many(keys, vals)
    outs = [bytearray(64 * MiB), bytearray(64 * MiB)]
    assert client.retrieve_many(keys, outs) == [64 * MiB] * 2
    assert outs == vals
    client.delete_many(keys)


def test_batch_error_lists_failed_items(client, key):
    keys = [key("e%d" % i) for i in range(5)]
    vals = [b"ok", bytearray(SMALL_MAX + 1), b"ok", bytearray(SMALL_MAX + 4096), b"ok"]
    with pytest.raises(BatchError) as ei:
        client.store_many(keys, vals, nsid=NS_SMALL)
    e = ei.value
    assert isinstance(e, NkvError) and isinstance(e, OSError)
    assert [i for i, _ in e.errors] == [1, 3]
    for _i, err in e.errors:
        assert isinstance(err, NkvError) and err.errno in (errno.EFBIG, errno.EINVAL)
    assert e.errno == e.errors[0][1].errno
    assert "2 of 5 items failed" in str(e)
    # the others were stored
    assert client.exist_many(keys, nsid=NS_SMALL) == [True, False, True, False, True]
    client.delete_many(keys, nsid=NS_SMALL)


def test_empty_batches(client):
    assert client.store_many([], []) is None
    assert client.retrieve_many([], []) == []
    assert client.exist_many([]) == []
    assert client.delete_many(()) == []


def test_batch_argument_errors(client, key):
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        client.store_many([key("a"), key("b")], [b"x"])
    with pytest.raises(TypeError):
        client.store_many(b"abc", [b"x", b"y", b"z"])    # bytes is not a list of keys
    with pytest.raises(ValueError):
        client.store_many([key("a"), b"x" * 17], [b"1", b"2"])
    with pytest.raises(TypeError):
        client.retrieve_many([key("a")], [b"read-only"])
    with pytest.raises(ValueError):
        client.retrieve_many([key("a")], [bytearray(1)], offsets=[-1])
    with pytest.raises(ValueError):
        client.retrieve_many([key("a")], [bytearray(1)], offsets=[0, 0])
    with pytest.raises(TypeError):
        client.exist_many([key("a"), 5])
    assert client.exist(key("a")) is False     # nothing was sent by any of the above


def test_threads_share_a_client(client, key):
    """8 threads at once, each its own keys, sync calls and batches interleaved."""
    errors = []

    def worker(t):
        try:
            for r in range(10):
                k = key("t%d-%d" % (t, r))
                v = os.urandom(4096 + t * 100 + r)
                client.store(k, v)
                assert client.retrieve(k) == v
                ks = [key("t%d-%d-%d" % (t, r, i)) for i in range(8)]
                client.store_many(ks, [v] * 8)
                outs = [bytearray(len(v)) for _ in ks]
                assert client.retrieve_many(ks, outs) == [len(v)] * 8
                assert all(o == v for o in outs)
                assert client.delete_many(ks + [k]) == [True] * 9
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append((t, e))

    th = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in th:
        t.start()
    for t in th:
        t.join(60)
    assert not errors, errors


def test_store_many_256_r2t_values_tcp(daemon, key):
    """256 Stores needing an R2T each (16 KiB > the 8 KiB in-capsule size) at once on 4 TCP queues."""
    with daemon.connect("tcp", timeout=3) as c:
        keys = [key("r%d" % i) for i in range(256)]
        vals = [os.urandom(16384) for _ in keys]
        c.store_many(keys, vals)
        outs = [bytearray(16384) for _ in keys]
        assert c.retrieve_many(keys, outs) == [16384] * 256
        assert outs == vals
        c.delete_many(keys)
