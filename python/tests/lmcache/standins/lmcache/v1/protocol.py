"""Mirrors RemoteMetadata of lmcache/v1/protocol.py at 0851d06c: 7 native (little-endian on
x86-64 and aarch64) int32 = length, memory format, dtype code, shape[0..3]; 28 bytes."""

from dataclasses import dataclass
from typing import Optional
import struct

import torch

from lmcache.v1.memory_management import MemoryFormat

DTYPE_TO_INT = {None: 0, torch.half: 1, torch.float16: 2, torch.bfloat16: 3, torch.float: 4,
                torch.float32: 4, torch.float64: 5, torch.double: 5, torch.uint8: 6}
INT_TO_DTYPE = {0: None, 1: torch.half, 2: torch.float16, 3: torch.bfloat16, 4: torch.float,
                5: torch.float64, 6: torch.uint8}
for _code, _attr in ((7, "float8_e4m3fn"), (8, "float8_e5m2")):
    if hasattr(torch, _attr):  # torch >= 2.1
        DTYPE_TO_INT[getattr(torch, _attr)] = _code
        INT_TO_DTYPE[_code] = getattr(torch, _attr)

_FMT = "iiiiiii"


@dataclass
class RemoteMetadata:
    length: int
    shape: torch.Size
    dtype: Optional[torch.dtype]
    fmt: MemoryFormat

    def serialize(self) -> bytes:
        assert len(self.shape) == 4, "Shape dimension should be 4"
        return struct.pack(_FMT, self.length, int(self.fmt.value), DTYPE_TO_INT[self.dtype],
                           *[int(d) for d in self.shape])

    @staticmethod
    def deserialize(s) -> "RemoteMetadata":
        length, fmt, dtype, s0, s1, s2, s3 = struct.unpack_from(_FMT, s)
        return RemoteMetadata(length, torch.Size([s0, s1, s2, s3]), INT_TO_DTYPE[dtype],
                              MemoryFormat(fmt))
