# SPDX-License-Identifier: Apache-2.0
"""Mirrors LMCacheMetadata of lmcache/v1/metadata.py (read 2026-12-03): its fields, and the
get_shapes() / get_dtypes() / get_num_groups() that RemoteConnector.__init__ reads: with KV layer
groups one [kv, layers, tokens, hidden] shape per group (kv 1 with MLA, else 2), without them one
[kv_shape[1], kv_shape[0], tokens, heads x head_size] shape of kv_dtype."""

from dataclasses import dataclass, field
from typing import Optional

import torch

from lmcache.v1.kv_layer_groups import KVLayerGroupsManager


@dataclass
class LMCacheMetadata:
    model_name: str
    world_size: int
    local_world_size: int
    worker_id: int
    local_worker_id: int
    kv_dtype: torch.dtype
    # (num_layer, 2, chunk_size, num_kv_head, head_size)
    kv_shape: tuple
    use_mla: bool = False
    role: Optional[str] = None
    first_rank = 0
    served_model_name: Optional[str] = None
    chunk_size: int = 256
    kv_layer_groups_manager: KVLayerGroupsManager = field(default_factory=KVLayerGroupsManager)

    def get_shapes(self, num_tokens: Optional[int] = None) -> list:
        if num_tokens is None:
            num_tokens = self.chunk_size
        if self.kv_layer_groups_manager.kv_layer_groups:
            kv_size = 1 if self.use_mla else 2
            return [torch.Size([kv_size, g.num_layers, num_tokens, g.hidden_dim_size])
                    for g in self.kv_layer_groups_manager.kv_layer_groups]
        return [torch.Size([self.kv_shape[1], self.kv_shape[0], num_tokens,
                            self.kv_shape[3] * self.kv_shape[4]])]

    def get_dtypes(self) -> list:
        if self.kv_layer_groups_manager.kv_layer_groups:
            return [g.dtype for g in self.kv_layer_groups_manager.kv_layer_groups]
        return [self.kv_dtype]

    def get_num_groups(self) -> int:
        if self.kv_layer_groups_manager.kv_layer_groups:
            return self.kv_layer_groups_manager.num_groups
        return 1
