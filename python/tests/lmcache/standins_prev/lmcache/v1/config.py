# SPDX-License-Identifier: Apache-2.0
"""Mirrors the LMCacheEngineConfig fields the remote-connector path read between LMCache PR #2225
and PR #2314 (lmcache/v1/config.py): remote_url, remote_connector_plugins, extra_config,
use_layerwise."""

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class LMCacheEngineConfig:
    chunk_size: int = 256
    remote_url: Optional[str] = None
    remote_connector_plugins: Optional[List[str]] = None
    extra_config: Optional[dict] = field(default_factory=dict)
    use_layerwise: bool = False
    local_cpu: bool = False
