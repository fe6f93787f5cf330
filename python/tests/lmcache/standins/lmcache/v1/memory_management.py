# SPDX-License-Identifier: Apache-2.0
"""Mirrors lmcache/v1/memory_management.py (MemoryFormat values of 004446a0; the KV layer groups of
LMCache PR #2220 as read 2026-12-03): MemoryFormat, MemoryObjMetadata with shapes/dtypes lists,
MemoryObj's interface with get_shapes()/get_dtypes(), TensorMemoryObj (a flat uint8 slice of an
arena holding every group's bytes one after the other; byte_array is a writable memoryview over all
of it, get_tensor(i) group i viewed as its dtype + shape, tensor the one group's), and an arena
allocator whose allocate() takes a shape and dtype or lists of them, and whose .buffer is the
whole arena (MixedMemoryAllocator.pin_allocator.buffer upstream).

The allocator here is a plain first-fit free list written for the tests, not LMCache's: it keeps
the properties the connector depends on (objects carved out of one arena, 512-byte alignment,
allocate() returning None when full, ref_count_down() to 0 freeing) and logs what it hands out.
"""

from dataclasses import dataclass
from enum import Enum
from typing import List, Optional
import abc
import ctypes
import threading

import torch


class MemoryFormat(Enum):
    UNDEFINED = 0
    KV_2LTD = 1
    KV_T2D = 2
    KV_2TD = 3
    BINARY = 4
    BINARY_BUFFER = 5
    KV_MLA_FMT = 6


def element_size(dtype):
    """Bytes per element (torch < 2.1 has no dtype.itemsize)."""
    return torch.empty(0, dtype=dtype).element_size()


@dataclass
class MemoryObjMetadata:
    shape: torch.Size
    dtype: Optional[torch.dtype]
    address: int
    phy_size: int
    ref_count: int
    is_pin: bool = False
    fmt: MemoryFormat = MemoryFormat.UNDEFINED
    cached_positions: Optional[torch.Tensor] = None
    shapes: Optional[List[torch.Size]] = None
    dtypes: Optional[List[torch.dtype]] = None

    def get_size(self):
        if self.shapes is not None and self.dtypes is not None:
            return sum(s.numel() * element_size(d) for s, d in zip(self.shapes, self.dtypes))
        if self.dtype is None:
            return 0
        return self.shape.numel() * element_size(self.dtype)


class MemoryObj(metaclass=abc.ABCMeta):
    def __init__(self, metadata: MemoryObjMetadata):
        self.meta = metadata

    @abc.abstractmethod
    def get_size(self) -> int: ...

    @abc.abstractmethod
    def get_shape(self) -> torch.Size: ...

    def get_dtype(self) -> Optional[torch.dtype]:
        return None

    @abc.abstractmethod
    def get_shapes(self) -> List[torch.Size]: ...

    @abc.abstractmethod
    def get_dtypes(self) -> List[torch.dtype]: ...

    @abc.abstractmethod
    def get_memory_format(self) -> MemoryFormat: ...

    @abc.abstractmethod
    def ref_count_up(self): ...

    @abc.abstractmethod
    def ref_count_down(self): ...

    @abc.abstractmethod
    def get_ref_count(self) -> int: ...

    @property
    @abc.abstractmethod
    def tensor(self) -> Optional[torch.Tensor]: ...

    @property
    @abc.abstractmethod
    def byte_array(self): ...


class TensorMemoryObj(MemoryObj):
    def __init__(self, raw_data: torch.Tensor, metadata: MemoryObjMetadata, parent_allocator=None):
        super().__init__(metadata)
        self.raw_data = raw_data
        self.parent_allocator = parent_allocator
        self.lock = threading.Lock()
        self.valid = True

    def get_size(self) -> int:
        return self.raw_data.numel() * self.raw_data.element_size()

    def get_shape(self) -> torch.Size:
        return self.meta.shape

    def get_dtype(self) -> Optional[torch.dtype]:
        return self.meta.dtype

    def get_shapes(self) -> List[torch.Size]:
        return self.meta.shapes if self.meta.shapes is not None else [self.meta.shape]

    def get_dtypes(self) -> List[torch.dtype]:
        return self.meta.dtypes if self.meta.dtypes is not None else [self.meta.dtype]

    def get_memory_format(self) -> MemoryFormat:
        return self.meta.fmt

    def get_physical_size(self) -> int:
        return self.meta.phy_size

    def ref_count_up(self):
        with self.lock:
            self.meta.ref_count += 1

    def ref_count_down(self):
        with self.lock:
            self.meta.ref_count -= 1
            free = self.meta.ref_count == 0 and not self.meta.is_pin
        if free and self.parent_allocator is not None:
            self.parent_allocator.free(self)

    def get_ref_count(self) -> int:
        with self.lock:
            return self.meta.ref_count

    @property
    def metadata(self):
        return self.meta

    def get_tensor(self, index: int) -> torch.Tensor:
        shapes, dtypes = self.get_shapes(), self.get_dtypes()
        start = sum(s.numel() * element_size(d) for s, d in zip(shapes[:index], dtypes[:index]))
        n = shapes[index].numel() * element_size(dtypes[index])
        return self.raw_data[start:start + n].view(dtypes[index]).view(shapes[index])

    @property
    def tensor(self) -> Optional[torch.Tensor]:
        if not self.valid:
            return None
        return self.raw_data.view(self.meta.dtype).view(self.meta.shape)

    @property
    def byte_array(self):
        n = self.raw_data.numel()
        return memoryview((ctypes.c_ubyte * n).from_address(self.raw_data.data_ptr()))


class TensorMemoryAllocator:
    """Objects carved out of one uint8 arena (.buffer, page aligned), first fit, 512-byte aligned."""

    ALIGN_BYTES = 512

    def __init__(self, size: int, align_bytes: int = ALIGN_BYTES):
        # torch.empty of this size is private anonymous memory (malloc -> mmap): registrable over shm
        raw = torch.empty(size + 4096, dtype=torch.uint8)
        skew = (-raw.data_ptr()) % 4096
        self._raw = raw
        self.buffer = raw[skew:skew + size]
        self.align_bytes = align_bytes
        self._free = [(0, size)]     # sorted (start, size)
        self._lock = threading.Lock()
        self.allocated = []           # (start, nbytes) of every allocation, for the tests
        self.live = 0

    def allocate(self, shapes, dtypes, fmt: MemoryFormat = MemoryFormat.UNDEFINED) -> Optional[TensorMemoryObj]:
        if isinstance(shapes, list):
            shapes, dtypes = [torch.Size(s) for s in shapes], list(dtypes)
        else:
            shapes, dtypes = [torch.Size(shapes)], [dtypes]
        assert len(shapes) == len(dtypes)
        nbytes = sum(s.numel() * element_size(d) for s, d in zip(shapes, dtypes))
        need = max(self.align_bytes, -(-nbytes // self.align_bytes) * self.align_bytes)
        with self._lock:
            for i, (start, size) in enumerate(self._free):
                if size >= need:
                    if size == need:
                        del self._free[i]
                    else:
                        self._free[i] = (start + need, size - need)
                    break
            else:
                return None
            self.allocated.append((start, nbytes))
            self.live += 1
        meta = MemoryObjMetadata(shapes[0], dtypes[0], start, need, 1, False, fmt, None, shapes, dtypes)
        return TensorMemoryObj(self.buffer[start:start + nbytes], meta, self)

    def free(self, obj: TensorMemoryObj):
        start, size = obj.meta.address, obj.meta.phy_size
        with self._lock:
            self.live -= 1
            self._free.append((start, size))
            self._free.sort()
            merged = []
            for s, n in self._free:
                if merged and merged[-1][0] + merged[-1][1] == s:
                    merged[-1] = (merged[-1][0], merged[-1][1] + n)
                else:
                    merged.append((s, n))
            self._free = merged


class MixedMemoryAllocator:
    """The allocator LocalCPUBackend holds; .pin_allocator.buffer is the arena (as upstream)."""

    def __init__(self, size: int):
        self.pin_allocator = TensorMemoryAllocator(size)

    def allocate(self, shapes, dtypes, fmt: MemoryFormat = MemoryFormat.UNDEFINED):
        return self.pin_allocator.allocate(shapes, dtypes, fmt)
