# SPDX-License-Identifier: Apache-2.0
"""vLLM plugin: registers the `rados_nkv` load format in every vLLM process.

Declared in pyproject.toml as the `vllm.general_plugins` entry point
`rados_nkv = rados_nkv.weights.vllm_plugin:register`; vLLM calls register() in each process it
starts (engine core, workers), possibly more than once, so it is idempotent. Without vLLM it does
nothing but log one line, so installing this package never breaks anything.
"""

import logging

from .loader import LOAD_FORMAT, loader_class

__all__ = ["register"]

log = logging.getLogger("rados_nkv.weights")
_done = []


def register():
    """Register the rados_nkv model loader with vLLM. Returns True when it is registered (now or
    before), False when vLLM is not importable."""
    if _done:
        return True
    try:
        from vllm.model_executor import model_loader as ml
        from vllm.model_executor.model_loader.base_loader import BaseModelLoader
    except ImportError as e:
        log.info("rados_nkv: vLLM is not importable (%s); the %s load format is not registered", e, LOAD_FORMAT)
        return False
    cls = loader_class(BaseModelLoader)
    # An earlier copy of this module (a reload, a second plugin path) may have registered it: leave
    # that one, rather than make vLLM warn about an overwrite.
    table = getattr(ml, "_LOAD_FORMAT_TO_MODEL_LOADER", None)
    prior = table.get(LOAD_FORMAT) if isinstance(table, dict) else None
    if prior is None or prior.__module__ != cls.__module__ or prior.__name__ != cls.__name__:
        ml.register_model_loader(LOAD_FORMAT)(cls)
        log.info("rados_nkv: registered the %s load format with vLLM", LOAD_FORMAT)
    _done.append(cls)
    return True
