# SPDX-License-Identifier: Apache-2.0
"""Stand-in for vllm/config/load.py (vllm-project/vllm 030eb6656cb22709afff2f689dc92c04939a5e07):
LoadConfig, the weights-loading part of vLLM's configuration. Upstream it is a pydantic config
class; here a dataclass with the same field names and defaults for the fields loaders read. The
load format is lower-cased, as upstream's validator does."""

from dataclasses import dataclass, field


@dataclass
class LoadConfig:
    load_format: str = "auto"
    download_dir: str = None
    safetensors_load_strategy: str = None
    model_loader_extra_config: dict = field(default_factory=dict)
    device: str = None
    ignore_patterns: list = field(default_factory=lambda: ["original/**/*"])
    use_tqdm_on_load: bool = True
    pt_load_map_location: str = "cpu"

    def __post_init__(self):
        self.load_format = self.load_format.lower()
