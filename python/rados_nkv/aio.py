# SPDX-License-Identifier: Apache-2.0
"""AsyncClient: the Client's calls as asyncio coroutines, over the same engine.

Each batch goes to the engine with nkv_engine_submit() under a fresh tag, and the coroutine awaits
a future. The engine's eventfd is registered with the running loop (loop.add_reader): when it
becomes readable, nkv_engine_reap() hands over the tags of completed batches and their futures are
resolved. No thread is spent per call and the loop never blocks, so many tasks may await at once.
The calls run the very plans the synchronous methods run (client.py), so arguments, results and
errors are the same.
"""

import asyncio
import ctypes
import errno as E
import itertools
import threading
import time

from . import _ffi
from .client import CHUNK, _OP_SIZE
from .errors import NkvError, op_error

__all__ = ["AsyncClient"]

REAP_MAX = 64


class AsyncClient:
    """Coroutines with the names and arguments of Client's calls. Get it as Client.aio; it uses one
    event loop at a time (the loop of the first call; another loop may take over once nothing is
    in flight)."""

    def __init__(self, client):
        self._client = client
        self._loop = None
        self._fd = None
        self._pending = {}           # tag -> [future, ops, keep]
        self._tags = itertools.count(1)
        self._space = []             # futures of submitters waiting for the engine's max_ops
        self._mu = threading.Lock()
        self._reap_buf = (ctypes.c_uint64 * REAP_MAX)()

    # ---- the event loop side --------------------------------------------------------------------

    def _attach(self, loop):
        if self._loop is loop:
            return
        with self._mu:
            if self._loop is loop:
                return
            if self._loop is not None:
                if self._pending:
                    raise RuntimeError("rados_nkv AsyncClient: commands are in flight on another event loop")
                self._detach_locked()
            self._client.engine._claim("Client.aio")
            fd = _ffi.nkv_engine_eventfd(self._client._handle())
            loop.add_reader(fd, self._on_ready)
            self._loop, self._fd = loop, fd

    def _detach_locked(self):
        loop, fd = self._loop, self._fd
        self._loop = self._fd = None
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or not loop.is_running():
            loop.remove_reader(fd)
            return
        done = threading.Event()

        def remove():
            loop.remove_reader(fd)
            done.set()
        loop.call_soon_threadsafe(remove)
        done.wait(10)

    def _detach(self):
        """Stop watching the eventfd (Client.close(), before the engine and its eventfd go)."""
        with self._mu:
            self._detach_locked()

    def _on_ready(self):
        """The eventfd is readable: take every completed batch and wake its coroutine."""
        eng = self._client._eng
        if eng is None:
            return
        tags = self._reap_buf
        while True:
            n = _ffi.nkv_engine_reap(eng, tags, REAP_MAX, 0)
            if n <= 0:
                break
            for t in tags[:n]:
                entry = self._pending.pop(t, None)
                if entry is not None and not entry[0].done():
                    entry[0].set_result(None)
            if n < REAP_MAX:
                break
        space, self._space = self._space, []
        for f in space:
            if not f.done():
                f.set_result(None)

    def _complete_all(self):
        """After nkv_engine_destroy() (Client.close()): every accepted op has completed, so every
        waiting coroutine may read its results."""
        pending, self._pending = self._pending, {}
        space, self._space = self._space, []
        for fut, _ops, _keep in pending.values():
            _resolve(fut)
        for fut in space:
            _resolve(fut)

    # ---- running plans -------------------------------------------------------------------------

    async def _wait_space(self, loop):
        fut = loop.create_future()
        self._space.append(fut)
        try:
            # our own completions wake us; other threads' batches (sync calls) do not: poll too
            await asyncio.wait_for(asyncio.shield(fut), 0.01 if self._pending else 0.001)
        except asyncio.TimeoutError:
            pass

    async def _submit_wait(self, ops, n, keep):
        loop = asyncio.get_running_loop()
        self._attach(loop)
        base = ctypes.addressof(ops)
        futs = []
        start, deadline = 0, None
        while start < n:
            cnt = min(CHUNK, n - start)
            tag = next(self._tags)
            fut = loop.create_future()
            self._pending[tag] = (fut, ops, keep)
            with self._client._use() as h:
                rc = _ffi.nkv_engine_submit(h, base + start * _OP_SIZE, cnt, tag)
            if rc:
                del self._pending[tag]
                if rc == -E.EAGAIN:
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + self._client.timeout_ms / 1000.0
                    elif now > deadline:
                        raise NkvError(rc, "engine busy (max_ops in flight) for the whole timeout")
                    await self._wait_space(loop)
                    continue
                if rc == -E.EINVAL:
                    for i in range(start, start + cnt):
                        if ops[i].rc == -E.EINVAL:
                            raise op_error(ops[i])
                raise NkvError(rc, "engine submit of %d ops" % cnt)
            futs.append(fut)
            start += cnt
            deadline = None
        for f in futs:
            await f

    async def _drive(self, plan):
        try:
            step = next(plan)
            while True:
                await self._submit_wait(*step)
                step = plan.send(None)
        except StopIteration as stop:
            return stop.value

    # ---- the calls (documented on Client) ------------------------------------------------------

    async def store(self, key, value, *, nsid=None, must_exist=False, must_not_exist=False, ttl=None, pin=False,
                    block_hash=None):
        """Client.store() as a coroutine."""
        return await self._drive(self._client._plan_store(key, value, nsid, must_exist, must_not_exist, ttl, pin,
                                                          block_hash))

    async def retrieve(self, key, *, nsid=None):
        """Client.retrieve() as a coroutine."""
        return await self._drive(self._client._plan_retrieve(key, nsid))

    async def retrieve_into(self, key, out, *, offset=0, nsid=None):
        """Client.retrieve_into() as a coroutine."""
        return await self._drive(self._client._plan_retrieve_into(key, out, offset, nsid))

    async def exist(self, key, *, nsid=None):
        """Client.exist() as a coroutine."""
        return await self._drive(self._client._plan_exist(key, nsid))

    async def delete(self, key, *, nsid=None):
        """Client.delete() as a coroutine."""
        return await self._drive(self._client._plan_delete(key, nsid))

    async def list(self, start=b"", *, nsid=None, limit=None):
        """Client.list() as a coroutine."""
        return await self._drive(self._client._plan_list(start, nsid, limit))

    async def store_many(self, keys, values, *, nsid=None, ttl=None, pin=False, block_hashes=None):
        """Client.store_many() as a coroutine."""
        return await self._drive(self._client._plan_store_many(keys, values, nsid, ttl, pin, block_hashes))

    async def retrieve_many(self, keys, outs, *, offsets=None, nsid=None):
        """Client.retrieve_many() as a coroutine."""
        return await self._drive(self._client._plan_retrieve_many(keys, outs, offsets, nsid))

    async def exist_many(self, keys, *, nsid=None):
        """Client.exist_many() as a coroutine."""
        return await self._drive(self._client._plan_exist_many(keys, nsid))

    async def delete_many(self, keys, *, nsid=None):
        """Client.delete_many() as a coroutine."""
        return await self._drive(self._client._plan_delete_many(keys, nsid))

    async def put_named(self, name, payload, *, nsid=None, ttl=None, pin=False):
        """Client.put_named() as a coroutine."""
        return await self._drive(self._client._plan_put_named(name, payload, nsid, ttl, pin))

    async def get_named(self, name, *, nsid=None):
        """Client.get_named() as a coroutine."""
        return await self._drive(self._client._plan_get_named(name, nsid))

    async def get_named_into(self, name, out, *, nsid=None):
        """Client.get_named_into() as a coroutine."""
        return await self._drive(self._client._plan_get_named_into(name, out, nsid))

    async def exists_named(self, name, *, nsid=None):
        """Client.exists_named() as a coroutine."""
        return await self._drive(self._client._plan_exists_named(name, nsid))

    async def delete_named(self, name, *, nsid=None):
        """Client.delete_named() as a coroutine."""
        return await self._drive(self._client._plan_delete_named(name, nsid))

    async def put_named_many(self, names, payloads, *, nsid=None, ttl=None, pin=False):
        """Client.put_named_many() as a coroutine."""
        return await self._drive(self._client._plan_put_named_many(names, payloads, nsid, ttl, pin))

    async def get_named_many(self, names, outs, *, nsid=None):
        """Client.get_named_many() as a coroutine."""
        return await self._drive(self._client._plan_get_named_many(names, outs, nsid))

    async def exists_named_many(self, names, *, nsid=None):
        """Client.exists_named_many() as a coroutine."""
        return await self._drive(self._client._plan_exists_named_many(names, nsid))

    async def aclose(self):
        """Close the client (Client.close()) without blocking the loop."""
        await asyncio.get_running_loop().run_in_executor(None, self._client.close)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
        return False


def _resolve(fut):
    loop = fut.get_loop()
    if loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None

    def done():
        if not fut.done():
            fut.set_result(None)
    if running is loop:
        done()
    else:
        loop.call_soon_threadsafe(done)
