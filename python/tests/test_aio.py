# SPDX-License-Identifier: Apache-2.0
"""AsyncClient: the calls as coroutines over the engine's eventfd; many tasks at once."""

import asyncio
import errno
import os
import threading

import numpy as np
import pytest

from rados_nkv import BatchError, NkvError
from conftest import NS_SMALL, SMALL_MAX


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_every_call(client, key, name):
    aio = client.aio
    assert client.aio is aio

    async def main():
        k = key("a")
        assert await aio.store(k, b"value") is None
        assert await aio.retrieve(k) == b"value"
        assert await aio.retrieve(key("none")) is None
        out = bytearray(3)
        assert await aio.retrieve_into(k, out, offset=1) == 5 and out == b"alu"
        assert await aio.exist(k) is True
        assert k in await aio.list(k, limit=1)
        with pytest.raises(NkvError) as ei:
            await aio.store(k, b"x", must_not_exist=True)
        assert ei.value.errno == errno.EEXIST
        assert await aio.delete(k) is True and await aio.delete(k) is False
        ks = [key("m%d" % i) for i in range(32)]
        await aio.store_many(ks, [b"%d" % i for i in range(32)])
        outs = [bytearray(4) for _ in ks]
        assert await aio.retrieve_many(ks, outs) == [len(b"%d" % i) for i in range(32)]
        assert await aio.exist_many(ks) == [True] * 32
        assert await aio.delete_many(ks) == [True] * 32
        n = name("n")
        await aio.put_named(n, b"named payload")
        assert await aio.get_named(n) == b"named payload"
        buf = bytearray(13)
        assert await aio.get_named_into(n, buf) == 13 and buf == b"named payload"
        assert await aio.exists_named(n) is True
        await aio.put_named_many([name("x"), name("y")], [b"X", b"YY"])
        bufs = [bytearray(2), bytearray(2)]
        assert await aio.get_named_many([name("x"), name("y")], bufs) == [1, 2]
        assert await aio.exists_named_many([name("x"), name("nope")]) == [True, False]
        for nm in (n, name("x"), name("y")):
            assert await aio.delete_named(nm) is True
    run(main())


def test_64_tasks_at_once(client, key):
    """64 coroutines in flight together, each storing and reading back its own value."""
    aio = client.aio
    peak = {"now": 0, "max": 0}

    async def one(i):
        k = key("t%d" % i)
        v = os.urandom(4096 + 1000 * i)
        peak["now"] += 1
        peak["max"] = max(peak["max"], peak["now"])
        await aio.store(k, v)
        got = await aio.retrieve(k)
        out = np.zeros(len(v), dtype=np.uint8)
        size = await aio.retrieve_into(k, out)
        peak["now"] -= 1
        assert await aio.delete(k)
        return got == v and size == len(v) and out.tobytes() == v

    async def main():
        return await asyncio.gather(*(one(i) for i in range(64)))
    assert run(main()) == [True] * 64
    assert peak["max"] == 64     # all 64 had a command in flight before any finished its reads


def test_loop_keeps_running_while_waiting(client, key):
    """A large transfer does not block the loop: a ticker task runs meanwhile."""
    aio = client.aio
    k = key("big")
    v = os.urandom(32 << 20)

    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)
        t = asyncio.ensure_future(ticker())
        await aio.store(k, v)
        out = bytearray(len(v))
        assert await aio.retrieve_into(k, out) == len(v)
        stop.set()
        await t
        assert out == v
        await aio.delete(k)
        return ticks
    assert run(main()) > 10


def test_errors_and_bad_arguments(client, key):
    aio = client.aio

    async def main():
        with pytest.raises(ValueError):
            await aio.store(b"x" * 17, b"v")
        with pytest.raises(TypeError):
            await aio.retrieve_into(key("a"), b"read-only")
        with pytest.raises(ValueError):
            await aio.retrieve_into(key("a"), bytearray(1), offset=-5)
        with pytest.raises(BatchError) as ei:
            await aio.store_many([key("ok"), key("big")], [b"ok", bytearray(SMALL_MAX + 1)], nsid=NS_SMALL)
        assert [i for i, _ in ei.value.errors] == [1]
        assert await aio.delete(key("ok"), nsid=NS_SMALL)
    run(main())


def test_cancelled_task_does_not_disturb_others(client, key):
    aio = client.aio

    async def main():
        v = os.urandom(8 << 20)
        big = asyncio.ensure_future(aio.store(key("c"), v))
        await asyncio.sleep(0)
        big.cancel()
        # others carry on on the same engine
        res = await asyncio.gather(*(aio.store(key("o%d" % i), b"v%d" % i) for i in range(16)))
        assert res == [None] * 16
        assert await aio.retrieve_many([key("o%d" % i) for i in range(16)], [bytearray(3) for _ in range(16)]) \
            == [len(b"v%d" % i) for i in range(16)]
        with pytest.raises(asyncio.CancelledError):
            await big
        await aio.delete_many([key("o%d" % i) for i in range(16)])
        await aio.delete(key("c"))
    run(main())


def test_sync_and_async_together(client, key):
    """A thread runs synchronous calls on the client while the loop runs coroutines on it."""
    aio = client.aio
    errors = []

    def sync_side():
        try:
            for i in range(50):
                client.store(key("s%d" % i), b"sync")
                assert client.retrieve(key("s%d" % i)) == b"sync"
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    async def main():
        th = threading.Thread(target=sync_side)
        th.start()
        for i in range(50):
            await aio.store(key("a%d" % i), b"async")
            assert await aio.retrieve(key("a%d" % i)) == b"async"
        await asyncio.get_running_loop().run_in_executor(None, th.join)
    run(main())
    assert not errors
    client.delete_many([key("s%d" % i) for i in range(50)] + [key("a%d" % i) for i in range(50)])


def test_a_second_loop_after_the_first(client, key):
    run(client.aio.store(key("l"), b"1"))
    assert run(client.aio.retrieve(key("l"))) == b"1"     # asyncio.run makes a new loop each time
    assert client.delete(key("l"))


def test_aclose(daemon, transport, key):
    c = daemon.connect(transport)

    async def main():
        async with c.aio as aio:
            await aio.store(key("x"), b"1")
            assert await aio.delete(key("x"))
        assert c.closed
        with pytest.raises(ValueError, match="closed"):
            await aio.retrieve(key("x"))
    run(main())


def test_close_while_tasks_wait(daemon, transport, key):
    """close() from another thread while coroutines await their batches: the engine completes every
    accepted op first, so each waiting call gets its real result; later calls see a closed client."""
    c = daemon.connect(transport)
    v = os.urandom(16 << 20)
    c.store(key("w"), v)

    async def main():
        outs = [bytearray(len(v)) for _ in range(4)]
        tasks = [asyncio.ensure_future(c.aio.retrieve_into(key("w"), o)) for o in outs]
        await asyncio.sleep(0)          # all four submitted
        await asyncio.get_running_loop().run_in_executor(None, c.close)
        assert await asyncio.gather(*tasks) == [len(v)] * 4
        assert all(o == v for o in outs)
        with pytest.raises(ValueError):
            await c.aio.exist(key("w"))
    run(main())
    with daemon.connect(transport) as c2:
        assert c2.delete(key("w"))
