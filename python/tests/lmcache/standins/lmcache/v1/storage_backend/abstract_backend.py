# SPDX-License-Identifier: Apache-2.0
"""Mirrors StorageBackendInterface.batched_contains of lmcache/v1/storage_backend/
abstract_backend.py: the default counts keys from the first while contains() holds."""


class StorageBackendInterface:
    def __init__(self, dst_device: str = "cpu"):
        self.dst_device = dst_device

    def contains(self, key, pin: bool = False) -> bool:
        raise NotImplementedError

    def batched_contains(self, keys, pin: bool = False) -> int:
        hit_chunks = 0
        for key in keys:
            if not self.contains(key, pin):
                break
            hit_chunks += 1
        return hit_chunks
