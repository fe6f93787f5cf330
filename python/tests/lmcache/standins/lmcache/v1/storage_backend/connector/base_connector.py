# SPDX-License-Identifier: Apache-2.0
"""Mirrors RemoteConnector of lmcache/v1/storage_backend/connector/base_connector.py as on LMCache's
dev branch after PR #2314 (2025-12-28: __init__(config, metadata), meta_shapes/meta_dtypes lists,
full_chunk_size_bytes, remote_metadata_bytes) and PR #2315 (multi-group RemoteMetadata), read
2026-12-03: resolve_save_chunk_meta(), __init__ asserting metadata, reshape_partial_chunk(), the
abstract methods and the optional ones with their exact names, parameters and return types
(the interface test compares signatures against this file), the default batched_async_contains /
batched_get_non_blocking, and batched_contains(keys) -> int (hit chunks by prefix). Written anew
for the tests. Left out: the methods for externally owned pages and remote fill of some later
revisions, which the remote backend never calls on a connector like this one."""

from typing import List, Optional
import abc
import asyncio

import torch

from lmcache.integration.vllm.utils import get_size_bytes
from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.memory_management import MemoryFormat, MemoryObj
from lmcache.v1.metadata import LMCacheMetadata
from lmcache.v1.protocol import get_remote_metadata_bytes, init_remote_metadata_info


def resolve_save_chunk_meta(config: LMCacheEngineConfig) -> bool:
    extra = config.extra_config
    if extra is not None and "save_chunk_meta" in extra:
        return bool(extra["save_chunk_meta"])
    if extra is None:
        return True
    if config.use_layerwise:
        return True
    return bool(extra.get("save_chunk_meta", True))


def layerwise_connector_meta_shapes(shapes: list) -> list:
    adjusted = []
    for shape in shapes:
        if len(shape) == 4 and shape[1] > 1:
            adjusted.append(torch.Size([shape[0], 1, shape[2], shape[3]]))
        else:
            adjusted.append(shape)
    return adjusted


class RemoteConnector(metaclass=abc.ABCMeta):
    def __init__(self, config: LMCacheEngineConfig, metadata: Optional[LMCacheMetadata]):
        assert metadata is not None
        self.save_chunk_meta: bool = resolve_save_chunk_meta(config)
        self.meta_shapes: list = metadata.get_shapes()
        if config.use_layerwise and not self.save_chunk_meta:
            self.meta_shapes = layerwise_connector_meta_shapes(self.meta_shapes)
        self.meta_dtypes: list = metadata.get_dtypes()
        self.meta_fmt: MemoryFormat = MemoryFormat.KV_MLA_FMT if metadata.use_mla else MemoryFormat.KV_2LTD
        self.full_chunk_size_bytes: int = get_size_bytes(self.meta_shapes, self.meta_dtypes)
        assert self.full_chunk_size_bytes % metadata.chunk_size == 0
        self.single_token_size = self.full_chunk_size_bytes // metadata.chunk_size
        init_remote_metadata_info(metadata.get_num_groups())
        self.remote_metadata_bytes = get_remote_metadata_bytes()

    def reshape_partial_chunk(self, memory_obj: MemoryObj, bytes_read: int) -> MemoryObj:
        assert self.full_chunk_size_bytes is not None
        assert self.single_token_size is not None
        if (bytes_read == 0 or bytes_read % self.single_token_size != 0
                or bytes_read > self.full_chunk_size_bytes):
            raise ValueError("bytes_read: %d is illegal, single_token_size: %d, full_chunk_size_bytes: %d"
                             % (bytes_read, self.single_token_size, self.full_chunk_size_bytes))
        if bytes_read == self.full_chunk_size_bytes:
            return memory_obj
        shape_list = list(memory_obj.meta.shape)
        shape_list[2] = bytes_read // self.single_token_size
        actual_shape = torch.Size(shape_list)
        memory_obj.raw_data = memory_obj.raw_data[:bytes_read]
        memory_obj.meta.shape = actual_shape
        if memory_obj.meta.shapes:
            memory_obj.meta.shapes = [actual_shape]
        return memory_obj

    def post_init(self):
        pass

    @abc.abstractmethod
    async def exists(self, key: CacheEngineKey) -> bool:
        raise NotImplementedError

    @abc.abstractmethod
    def exists_sync(self, key: CacheEngineKey) -> bool:
        raise NotImplementedError

    @abc.abstractmethod
    async def get(self, key: CacheEngineKey) -> Optional[MemoryObj]:
        raise NotImplementedError

    @abc.abstractmethod
    async def put(self, key: CacheEngineKey, memory_obj: MemoryObj):
        raise NotImplementedError

    @abc.abstractmethod
    async def list(self) -> List[str]:
        raise NotImplementedError

    @abc.abstractmethod
    async def close(self):
        raise NotImplementedError

    def support_ping(self) -> bool:
        return False

    async def ping(self) -> int:
        raise NotImplementedError

    def support_batched_get(self) -> bool:
        return False

    async def batched_get(self, keys: List[CacheEngineKey]) -> List[Optional[MemoryObj]]:
        raise NotImplementedError

    def support_batched_put(self) -> bool:
        return False

    async def batched_put(self, keys: List[CacheEngineKey], memory_objs: List[MemoryObj]):
        raise NotImplementedError

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id: str, keys: List[CacheEngineKey],
                                     pin: bool = False) -> int:
        results = await asyncio.gather(*[self.exists(key) for key in keys])
        if False in results:
            return results.index(False)
        return len(results)

    def support_batched_get_non_blocking(self) -> bool:
        return True

    async def batched_get_non_blocking(self, lookup_id: str,
                                       keys: List[CacheEngineKey]) -> List[MemoryObj]:
        results = await asyncio.gather(*(self.get(key) for key in keys), return_exceptions=True)
        memory_objs, found_failure = [], False
        for result in results:
            if found_failure:
                if isinstance(result, MemoryObj):
                    result.ref_count_down()
            elif isinstance(result, MemoryObj):
                memory_objs.append(result)
            else:
                found_failure = True
        return memory_objs

    def remove_sync(self, key: CacheEngineKey) -> bool:
        raise NotImplementedError

    def batched_contains(self, keys: List[CacheEngineKey]) -> int:
        raise NotImplementedError

    def support_batched_contains(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<%s>" % self.__class__.__name__
