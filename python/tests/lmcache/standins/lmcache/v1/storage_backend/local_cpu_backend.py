"""Mirrors LocalCPUBackend's allocation entry point (lmcache/v1/storage_backend/
local_cpu_backend.py): allocate(shape, dtype, fmt) -> MemoryObj or None when the arena is full;
.memory_allocator is the arena's allocator (MixedMemoryAllocator)."""

from typing import Optional

from lmcache.v1.memory_management import MemoryFormat, MemoryObj, MixedMemoryAllocator


class LocalCPUBackend:
    def __init__(self, size: int = 64 << 20):
        self.memory_allocator = MixedMemoryAllocator(size)

    def allocate(self, shape, dtype, fmt: MemoryFormat = MemoryFormat.KV_2LTD, eviction: bool = True,
                 busy_loop: bool = True) -> Optional[MemoryObj]:
        return self.memory_allocator.allocate(shape, dtype, fmt)
