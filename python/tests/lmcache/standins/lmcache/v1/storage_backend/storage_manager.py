# SPDX-License-Identifier: Apache-2.0
"""Mirrors StorageManager.batched_contains of lmcache/v1/storage_backend/storage_manager.py (read
2026-12-03): each backend, in order, answers batched_contains(keys, pin) with its hit count by
prefix; the manager records keys[:hit_chunks] as that backend's block and goes on with the rest.
The backends are handed in here (upstream builds them from the config)."""

from typing import Dict, List, Optional


class StorageManager:
    def __init__(self, storage_backends: Dict[str, object]):
        self.storage_backends = dict(storage_backends)

    def get_active_storage_backends(self, search_range: Optional[List[str]] = None):
        for name, backend in self.storage_backends.items():
            if search_range is None or name in search_range:
                yield name, backend

    def batched_contains(self, keys: List, search_range: Optional[List[str]] = None, pin: bool = False):
        total_keys = len(keys)
        total_hit_chunks = 0
        block_mapping = {}
        for backend_name, backend in self.get_active_storage_backends(search_range=search_range):
            pin_in_backend = pin if backend_name != "PDBackend" else False
            hit_chunks = backend.batched_contains(keys, pin_in_backend)
            if hit_chunks == 0:
                continue
            block_mapping[backend_name] = keys[:hit_chunks]
            total_hit_chunks += hit_chunks
            if total_hit_chunks == total_keys:
                break
            keys = keys[hit_chunks:]
        return total_hit_chunks, block_mapping
