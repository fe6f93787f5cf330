# SPDX-License-Identifier: Apache-2.0
"""Client.engine: the low-level batch interface the integrations use (Op arrays, submit, the
eventfd, reap), and its one-consumer rule with Client.aio."""

import errno
import os
import select

import pytest

from rados_nkv import NkvError, _ffi
from rados_nkv._ffi import Op, make_op, op_array, OP_STORE, OP_RETRIEVE, OP_EXIST, OP_DELETE
from rados_nkv.buffers import address


def test_submit_eventfd_reap(client, key):
    eng = client.engine
    assert eng.queues == client.queues
    n = 32
    vals = [os.urandom(1000 + i) for i in range(n)]
    ops = op_array(n)
    for i, v in enumerate(vals):
        a, ln = address(v)
        make_op(OP_STORE, key("e%d" % i), a, ln, nsid=client.nsid, user=i, op=ops[i])
    eng.submit(ops, 7)
    fd = eng.eventfd()
    r, _, _ = select.select([fd], [], [], 10)
    assert r == [fd]                                   # readable once the batch completed
    assert eng.reap(timeout_ms=1000) == [7]
    assert all(ops[i].rc == 0 and ops[i].user == i for i in range(n))
    assert eng.reap() == []                            # nothing left; the eventfd is quiet again
    assert select.select([fd], [], [], 0)[0] == []
    # retrieve them back in two batches, reaped in one call
    outs = [bytearray(len(v)) for v in vals]
    a1, a2 = op_array(16), op_array(16)
    for i in range(n):
        a, ln = address(outs[i], writable=True)
        make_op(OP_RETRIEVE, key("e%d" % i), a, ln, op=(a1 if i < 16 else a2)[i % 16])
    eng.submit(a1, 1)
    eng.submit(a2, 2)
    got = []
    while len(got) < 2:
        got += eng.reap(max=4, timeout_ms=5000)
    assert sorted(got) == [1, 2]
    assert outs == vals and all(o.value_size == len(vals[i]) for i, o in enumerate(list(a1) + list(a2)))
    # run(): synchronous, returns the failures (a miss counts)
    ex = op_array(3)
    make_op(OP_EXIST, key("e0"), op=ex[0])
    make_op(OP_EXIST, key("none"), op=ex[1])
    make_op(OP_DELETE, key("e1"), op=ex[2])
    assert eng.run(ex) == 1 and ex[1].rc == -errno.ENOENT and ex[1].status == 0x87
    single = make_op(OP_EXIST, key("e1"))
    assert isinstance(single, Op) and eng.run(single) == 1
    for i in range(n):
        client.delete(key("e%d" % i))


def test_engine_refuses_bad_input(client, key):
    eng = client.engine
    with pytest.raises(TypeError):
        eng.submit([make_op(OP_EXIST, key("x"))], 1)     # a list is not an Op array
    with pytest.raises(ValueError):
        eng.submit(op_array(1), -1)
    ops = op_array(1)                                     # type 0: the engine refuses the batch
    with pytest.raises(NkvError) as ei:
        eng.submit(ops, 1)
    assert ei.value.errno == errno.EINVAL and ops[0].rc == -errno.EINVAL
    with pytest.raises(ValueError):
        make_op(99, b"k")
    with pytest.raises(ValueError):
        make_op(OP_STORE, b"k", 0, 10)                    # a length without a buffer
    with pytest.raises(ValueError):
        make_op(OP_STORE, b"x" * 17)
    with pytest.raises(ValueError):
        op_array(0)


def test_one_consumer_of_completions(daemon, transport, key):
    import asyncio
    with daemon.connect(transport) as c:
        c.engine.reap()
        with pytest.raises(RuntimeError, match="cannot share"):
            asyncio.run(c.aio.exist(key("x")))
    with daemon.connect(transport) as c:
        assert asyncio.run(c.aio.exist(key("x"))) is False
        with pytest.raises(RuntimeError):
            c.engine.reap()


def test_struct_sizes():
    import ctypes
    assert ctypes.sizeof(Op) == 72 and ctypes.sizeof(_ffi.ConnOpts) == 88  # with the DH-HMAC-CHAP and TLS fields
    assert ctypes.sizeof(_ffi.EngineOpts) == 28 and ctypes.sizeof(_ffi.DiscEntry) == 558
