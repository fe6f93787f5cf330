# SPDX-License-Identifier: Apache-2.0
"""Mirrors the part of lmcache/v1/kv_layer_groups.py that LMCacheMetadata.get_shapes()/get_dtypes()
/get_num_groups() read: a group's num_layers, hidden_dim_size and dtype, and the manager's
kv_layer_groups and num_groups. Written for the tests (the real group info has more fields)."""

from dataclasses import dataclass, field
from typing import List

import torch


@dataclass
class KVLayerGroupInfo:
    num_layers: int
    hidden_dim_size: int
    dtype: torch.dtype


@dataclass
class KVLayerGroupsManager:
    kv_layer_groups: List[KVLayerGroupInfo] = field(default_factory=list)

    @property
    def num_groups(self) -> int:
        return len(self.kv_layer_groups)
