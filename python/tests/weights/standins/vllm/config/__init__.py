# SPDX-License-Identifier: Apache-2.0
"""Stand-in for vllm.config: LoadConfig (load.py) and a ModelConfig with the attributes model
loaders read. Upstream ModelConfig (vllm/config/model.py) has many more; loaders such as
runai_streamer_loader.py (vllm-project/vllm 04883019b60ebf7f71a2b140427479f1a8fcd16f) read
.model, .revision and, when present, .model_weights; the default loader also checks .quantization."""

from .load import LoadConfig


class ModelConfig:
    def __init__(self, model, revision=None, quantization=None, dtype=None):
        self.model = model
        self.model_weights = model
        self.revision = revision
        self.quantization = quantization
        self.dtype = dtype


__all__ = ["LoadConfig", "ModelConfig"]
