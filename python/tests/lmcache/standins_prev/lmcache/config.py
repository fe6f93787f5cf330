# SPDX-License-Identifier: Apache-2.0
"""Mirrors LMCacheEngineMetadata (lmcache/config.py; the fields RemoteConnector.init_chunk_meta()
of base_connector.py at 01712fbd reads: kv_shape, kv_dtype, use_mla)."""

from dataclasses import dataclass
from typing import Optional, Tuple

import torch


@dataclass
class LMCacheEngineMetadata:
    model_name: str
    world_size: int
    worker_id: int
    fmt: str
    kv_dtype: torch.dtype
    # (num_layers, 2, chunk_size, num_kv_heads, head_size)
    kv_shape: Tuple[int, int, int, int, int]
    use_mla: bool = False
    role: Optional[str] = None
