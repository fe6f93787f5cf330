# SPDX-License-Identifier: Apache-2.0
"""Mirrors LocalCPUBackend's surface that remote connectors use (lmcache/v1/storage_backend/
local_cpu_backend.py, read 2026-12-03): LocalCPUBackend(config, metadata=None, dst_device=,
lmcache_worker=, memory_allocator=) keeping .config and .metadata (where LMCache's own connectors
take the engine metadata from: super().__init__(local_cpu_backend.config,
local_cpu_backend.metadata)), allocate(shapes, dtypes, fmt=None, eviction=, busy_loop=) taking a
shape and dtype or lists of them -> MemoryObj or None when the arena is full, and .memory_allocator
(MixedMemoryAllocator). The allocator is passed in, as upstream's own tests do."""

from typing import Optional

from lmcache.v1.memory_management import MemoryFormat, MemoryObj, MixedMemoryAllocator


class LocalCPUBackend:
    def __init__(self, config, metadata=None, dst_device: str = "cpu", lmcache_worker=None,
                 memory_allocator: Optional[MixedMemoryAllocator] = None):
        assert metadata is not None or memory_allocator is not None
        self.memory_allocator = memory_allocator
        self.layerwise = config.use_layerwise
        self.config = config
        self.metadata = metadata

    def allocate(self, shapes, dtypes, fmt: Optional[MemoryFormat] = None, eviction: bool = True,
                 busy_loop: bool = True) -> Optional[MemoryObj]:
        if fmt is None:
            fmt = MemoryFormat.KV_T2D if self.layerwise else MemoryFormat.KV_2LTD
        return self.memory_allocator.allocate(shapes, dtypes, fmt)
