# SPDX-License-Identifier: Apache-2.0
"""Mirrors RemoteMetadata of lmcache/v1/protocol.py after LMCache PR #2315, read 2026-12-03:
native int32 = length, memory format, then dtype code and shape[0..3] per KV layer group
(8 + 20 x groups bytes; init_remote_metadata_info(num_groups) sets the process-wide format that
serialize/deserialize use); shapes of fewer than 4 dimensions padded with zeros, trailing zeros
stripped when read."""

from dataclasses import dataclass
from typing import Optional
import struct

import torch

from lmcache.v1.memory_management import MemoryFormat

REMOTE_METADATA_FMT: Optional[str] = None
REMOTE_METADATA_BYTES: Optional[int] = None

DTYPE_TO_INT = {None: 0, torch.half: 1, torch.float16: 2, torch.bfloat16: 3, torch.float: 4,
                torch.float32: 4, torch.float64: 5, torch.double: 5, torch.uint8: 6}
INT_TO_DTYPE = {0: None, 1: torch.half, 2: torch.float16, 3: torch.bfloat16, 4: torch.float,
                5: torch.float64, 6: torch.uint8}
for _code, _attr in ((7, "float8_e4m3fn"), (8, "float8_e5m2")):
    if hasattr(torch, _attr):  # torch >= 2.1 (upstream requires it)
        DTYPE_TO_INT[getattr(torch, _attr)] = _code
        INT_TO_DTYPE[_code] = getattr(torch, _attr)


def _pad_shape_to_4d(shape) -> tuple:
    dims = list(shape)
    while len(dims) < 4:
        dims.append(0)
    return tuple(dims[:4])


def _strip_shape_trailing_zeros(shape) -> torch.Size:
    dims = list(shape)
    while len(dims) > 0 and dims[-1] == 0:
        dims.pop()
    return torch.Size(dims)


def init_remote_metadata_info(num_groups: int):
    global REMOTE_METADATA_FMT, REMOTE_METADATA_BYTES
    fmt_length = 2 + 5 * num_groups
    REMOTE_METADATA_FMT = "i" * fmt_length
    REMOTE_METADATA_BYTES = 4 * fmt_length


def get_remote_metadata_bytes():
    assert REMOTE_METADATA_BYTES is not None
    return REMOTE_METADATA_BYTES


@dataclass
class RemoteMetadata:
    length: int
    shapes: list
    dtypes: list
    fmt: MemoryFormat

    def _prepare_params(self):
        params = [self.length, int(self.fmt.value)]
        if len(self.shapes) != len(self.dtypes):
            raise ValueError("zip() arguments differ in length")   # zip(strict=True) upstream
        for shape, dtype in zip(self.shapes, self.dtypes):
            padded = _pad_shape_to_4d(shape)
            params.append(DTYPE_TO_INT[dtype])
            params.extend(padded)
        return params

    def serialize_into(self, buffer):
        assert REMOTE_METADATA_FMT is not None
        struct.pack_into(REMOTE_METADATA_FMT, buffer, 0, *self._prepare_params())

    def serialize(self) -> bytes:
        assert REMOTE_METADATA_FMT is not None
        return struct.pack(REMOTE_METADATA_FMT, *self._prepare_params())

    @staticmethod
    def deserialize(s) -> "RemoteMetadata":
        assert REMOTE_METADATA_FMT is not None
        result = struct.unpack_from(REMOTE_METADATA_FMT, s)
        shapes, dtypes = [], []
        for i in range(2, len(result), 5):
            shapes.append(_strip_shape_trailing_zeros(torch.Size(result[i + 1:i + 5])))
            dtypes.append(INT_TO_DTYPE[result[i]])
        return RemoteMetadata(result[0], shapes, dtypes, MemoryFormat(result[1]))
