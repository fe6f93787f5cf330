# SPDX-License-Identifier: Apache-2.0
"""rados_nkv.weights: model weights (safetensors) stored in rados-nkv and streamed into models.

- upload(), verify(), get_manifest(), remove(), read_index(): the `nkv-weights` commands (store.py)
- iter_tensors(), load_state_dict(): tensors straight from the store into tensor memory (reader.py)
- the vLLM loader `rados_nkv` (loader.py) and its plugin entry point (vllm_plugin.register)
- save_file(), read_header(): the safetensors format, without the safetensors package

Nothing here imports torch or vLLM until a function needs them.
"""

from .manifest import Manifest, manifest_name, chunk_name
from .safetensors import read_header, save_file, SafetensorsError
from .store import (upload, verify, get_manifest, remove, read_index, WeightsError, NotFound, AlreadyExists,
                    BadChunkSize)
from .reader import iter_tensors, load_state_dict, LoadError

__all__ = ["Manifest", "manifest_name", "chunk_name", "read_header", "save_file", "SafetensorsError", "upload",
           "verify", "get_manifest", "remove", "read_index", "WeightsError", "NotFound", "AlreadyExists",
           "BadChunkSize", "iter_tensors", "load_state_dict", "LoadError"]
