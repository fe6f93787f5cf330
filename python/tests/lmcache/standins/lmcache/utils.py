# SPDX-License-Identifier: Apache-2.0
"""Mirrors CacheEngineKey of lmcache/utils.py at 0353be82: the fields, the dtype names and
to_string() = "model@world_size@worker_id@chunk_hash_hex@dtype[@tag%value...]"."""

from dataclasses import dataclass, field
from typing import Optional

import torch

TORCH_DTYPE_TO_STR_DTYPE = {
    torch.half: "half",
    torch.float16: "half",
    torch.bfloat16: "bfloat16",
    torch.float: "float",
    torch.float32: "float",
    torch.double: "double",
    torch.float64: "double",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.bool: "bool",
}
for _attr, _name in (("float8_e4m3fn", "fp8_e4m3fn"), ("float8_e5m2", "fp8_e5m2")):
    if hasattr(torch, _attr):  # torch >= 2.1
        TORCH_DTYPE_TO_STR_DTYPE[getattr(torch, _attr)] = _name
STR_DTYPE_TO_TORCH_DTYPE = {v: k for k, v in TORCH_DTYPE_TO_STR_DTYPE.items()}

TAG_PREFIX = "lmcache.tag."


@dataclass
class CacheEngineKey:
    model_name: str
    world_size: int
    worker_id: int
    chunk_hash: int
    dtype: torch.dtype
    request_configs: Optional[dict] = field(default_factory=dict)

    def __post_init__(self):
        if self.dtype not in TORCH_DTYPE_TO_STR_DTYPE:
            raise ValueError("Unsupported dtype in CacheEngineKey: %s" % self.dtype)
        tags = [(k[len(TAG_PREFIX):], v) for k, v in (self.request_configs or {}).items()
                if k.startswith(TAG_PREFIX)]
        self.tags = tuple(tags) if tags else None

    def __hash__(self):
        return hash((self.model_name, self.world_size, self.worker_id, self.chunk_hash,
                     TORCH_DTYPE_TO_STR_DTYPE[self.dtype], self.tags))

    @property
    def chunk_hash_hex(self) -> str:
        if isinstance(self.chunk_hash, bytes):
            return self.chunk_hash.hex()
        return "%x" % self.chunk_hash

    def to_string(self):
        s = "@".join([self.model_name, str(self.world_size), str(self.worker_id),
                      self.chunk_hash_hex, TORCH_DTYPE_TO_STR_DTYPE[self.dtype]])
        if self.tags:
            s += "@" + "@".join("%s%%%s" % (k, v) for k, v in self.tags)
        return s

    @staticmethod
    def from_string(s):
        parts = s.split("@")
        if len(parts) < 5:
            raise ValueError("Invalid key string: %s" % s)
        configs = None
        if len(parts) > 5:
            configs = {}
            for kv in parts[5:]:
                k, sep, v = kv.partition("%")
                if not sep:
                    raise ValueError("Invalid key string: %s" % s)
                configs[TAG_PREFIX + k] = v
        return CacheEngineKey(parts[0], int(parts[1]), int(parts[2]), int(parts[3], 16),
                              STR_DTYPE_TO_TORCH_DTYPE[parts[4]], configs)
