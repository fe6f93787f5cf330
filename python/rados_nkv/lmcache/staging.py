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

_CLASS = 1 << 16   # sizes are rounded up to 64 KiB, then to a power of two above 1 MiB


def size_class(n):
    """The buffer size serving @n bytes."""
    c = max(_CLASS, -(-n // _CLASS) * _CLASS)
    if c > 1 << 20:
        c = 1 << (c - 1).bit_length()
    return c


class StagingPool:
    """Reusable staging memoryviews; thread-safe."""

    def __init__(self, client, limit_bytes):
        self._client = client
        self._limit = limit_bytes
        self._used = 0          # bytes alloc()ed (registered) so far
        self._free = {}         # size class -> [memoryview]
        self._lock = threading.Lock()
        self.registered_hits = 0
        self.plain = 0          # buffers that had to be plain bytearrays

    def get(self, n):
        """A writable memoryview of at least @n bytes (slice it to @n)."""
        c = size_class(n)
        with self._lock:
            lst = self._free.get(c)
            if lst:
                self.registered_hits += 1
                return lst.pop()
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
            self._free.setdefault(mv.nbytes, []).append(mv)
