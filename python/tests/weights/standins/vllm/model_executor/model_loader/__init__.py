# SPDX-License-Identifier: Apache-2.0
"""Stand-in for vllm/model_executor/model_loader/__init__.py (vllm-project/vllm
e9234694f494887ddbeafed08095a1dfa5745369): the load-format registry.

Upstream behaviour mirrored: a module-level dict maps load-format names to loader classes;
register_model_loader(name) returns a class decorator that logs a warning when the name is
already taken (and replaces it), raises ValueError for a class that is not a BaseModelLoader
subclass, stores it and returns the class unchanged; get_model_loader(load_config) instantiates
the class of load_config.load_format with the load config, or raises ValueError for an unknown
format. The built-in loaders are not reproduced."""

import logging

from .base_loader import BaseModelLoader

logger = logging.getLogger("vllm.model_executor.model_loader")

_LOAD_FORMAT_TO_MODEL_LOADER = {}
overwrites = []  # test aid: (format, class) of every overwrite warned about


def register_model_loader(load_format):
    def wrap(cls):
        if load_format in _LOAD_FORMAT_TO_MODEL_LOADER:
            logger.warning("load format %s already registered; replaced by %s", load_format, cls)
            overwrites.append((load_format, cls))
        if not issubclass(cls, BaseModelLoader):
            raise ValueError("a model loader must subclass BaseModelLoader")
        _LOAD_FORMAT_TO_MODEL_LOADER[load_format] = cls
        logger.info("registered model loader %s for load format %s", cls, load_format)
        return cls
    return wrap


def get_model_loader(load_config):
    fmt = load_config.load_format
    if fmt not in _LOAD_FORMAT_TO_MODEL_LOADER:
        raise ValueError("Load format `%s` is not supported" % fmt)
    return _LOAD_FORMAT_TO_MODEL_LOADER[fmt](load_config)


__all__ = ["BaseModelLoader", "register_model_loader", "get_model_loader"]
