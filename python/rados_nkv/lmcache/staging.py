# SPDX-License-Identifier: Apache-2.0
"""Staging buffers for stores.

A long-name value is the header followed by the payload in one contiguous Store, and LMCache's
chunk is elsewhere in its arena, so a store copies the chunk once into a staging buffer. The
buffers come from Client.alloc() (registered: the shm target reads them in place), are reused by
size class, and their total is capped: alloc()ed memory lives until the client closes. Past the
cap, or when the controller refuses more registrations, a plain bytearray does (over shm the
target then copies through its bounce area; over TCP it makes no difference).
"""

import threading

from ..errors import NkvError

GRAIN = 1 << 16   # buffers are whole multiples of 64 KiB


class StagingPool:
    """Reusable staging memoryviews; thread-safe. A request takes the smallest free buffer that
    holds it without wasting more than its own size (best fit), else a new one."""

    def __init__(self, client, limit_bytes):
        self._client = client
        self._limit = limit_bytes
        self._used = 0          # bytes alloc()ed (registered) so far
        self._free = []         # idle registered buffers
        self._lock = threading.Lock()
        self.reused = 0
        self.plain = 0          # buffers that had to be plain bytearrays

    def get(self, n):
        """A writable memoryview of at least @n bytes (slice it to @n)."""
        with self._lock:
            best = None
            for i, mv in enumerate(self._free):
                if n <= mv.nbytes <= 2 * n + GRAIN and (best is None or mv.nbytes < self._free[best].nbytes):
                    best = i
            if best is not None:
                self.reused += 1
                return self._free.pop(best)
            c = max(GRAIN, -(-n // GRAIN) * GRAIN)
            grow = self._used + c <= self._limit
            if grow:
                self._used += c
        if grow:
            try:
                return self._client.alloc(c)
            except NkvError:
                with self._lock:
                    self._used -= c
                    self._limit = self._used   # the controller's limits: stop asking
        with self._lock:
            self.plain += 1
        return memoryview(bytearray(n))

    def put(self, mv):
        """Give back a buffer from get() (plain ones are dropped)."""
        if isinstance(mv.obj, bytearray):
            return
        with self._lock:
            self._free.append(mv)
