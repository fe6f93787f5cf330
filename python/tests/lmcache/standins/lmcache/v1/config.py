# SPDX-License-Identifier: Apache-2.0
"""Mirrors the LMCacheEngineConfig fields the remote-connector path reads (lmcache/v1/config.py):
chunk_size, remote_url, remote_storage_plugins, remote_serde, extra_config, use_layerwise,
local_cpu, get_extra_config_value()."""

from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass
class LMCacheEngineConfig:
    chunk_size: int = 256
    remote_url: Optional[str] = None
    remote_storage_plugins: Optional[List[str]] = None
    remote_serde: Optional[str] = "naive"
    extra_config: Optional[dict] = field(default_factory=dict)
    use_layerwise: bool = False
    local_cpu: bool = False

    def get_extra_config_value(self, key: str, default: Any = None) -> Any:
        if self.extra_config is None:
            return default
        return self.extra_config.get(key, default)
