# SPDX-License-Identifier: Apache-2.0
"""Stand-in for vllm/model_executor/model_loader/base_loader.py (vllm-project/vllm
01f62d3ec2d08e2e2c818871f69099831dd02f44): the abstract base of every model loader.

Upstream: constructed with the LoadConfig (kept as .load_config); download_model(model_config) and
load_weights(model, model_config) are abstract; load_model(vllm_config, model_config) builds the
model on the target device and then calls self.load_weights(model, model_config) and returns
model.eval(). Building a model needs all of vLLM, so this stand-in's load_model() takes the model
already built (a plain nn.Module) and does the rest the same way."""

from abc import ABC, abstractmethod


class BaseModelLoader(ABC):
    def __init__(self, load_config):
        self.load_config = load_config

    @abstractmethod
    def download_model(self, model_config):
        raise NotImplementedError

    @abstractmethod
    def load_weights(self, model, model_config):
        raise NotImplementedError

    def load_model(self, model, model_config):
        self.load_weights(model, model_config)
        return model.eval()
