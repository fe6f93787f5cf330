# SPDX-License-Identifier: Apache-2.0
"""Mirrors RemoteConnector of lmcache/v1/storage_backend/connector/base_connector.py at 01712fbd:
the abstract methods and the optional ones with their exact names and parameters (the interface
test compares signatures against this file), the class attributes of the header-less mode, and
init_chunk_meta() / reshape_partial_chunk() with the same behaviour, written anew."""

from typing import List, Optional
import abc

import torch

from lmcache.config import LMCacheEngineMetadata
from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.memory_management import MemoryFormat, MemoryObj, element_size


class RemoteConnector(metaclass=abc.ABCMeta):
    save_chunk_meta: bool = True
    meta_shape: Optional[torch.Size] = None
    meta_dtype: Optional[torch.dtype] = None
    meta_fmt: Optional[MemoryFormat] = None
    full_chunk_size: Optional[int] = None
    single_token_size: Optional[int] = None

    def init_chunk_meta(self, config: Optional[LMCacheEngineConfig],
                        metadata: Optional[LMCacheEngineMetadata]) -> None:
        # header-less mode only when asked for (extra_config.save_chunk_meta: false), not layerwise
        if config is None or metadata is None or config.extra_config is None:
            return
        if config.extra_config.get("save_chunk_meta", True) or config.use_layerwise:
            return
        layers, kv, tokens, heads, head_size = metadata.kv_shape
        self.save_chunk_meta = False
        self.meta_shape = torch.Size([kv, layers, tokens, heads * head_size])
        self.meta_dtype = metadata.kv_dtype
        self.meta_fmt = MemoryFormat.KV_MLA_FMT if metadata.use_mla else MemoryFormat.KV_2LTD
        elements = 1
        for d in metadata.kv_shape:
            elements *= d
        self.full_chunk_size = elements * element_size(metadata.kv_dtype)
        self.single_token_size = self.full_chunk_size // tokens

    def reshape_partial_chunk(self, memory_obj: MemoryObj, bytes_read: int) -> MemoryObj:
        if bytes_read > self.full_chunk_size or bytes_read % self.single_token_size:
            raise ValueError("bytes_read: %d is illegal, single_token_size: %d, full_chunk_size: %d"
                             % (bytes_read, self.single_token_size, self.full_chunk_size))
        if bytes_read == self.full_chunk_size:
            return memory_obj
        shape = list(memory_obj.meta.shape)
        shape[2] = bytes_read // self.single_token_size
        memory_obj.raw_data = memory_obj.raw_data[:bytes_read]
        memory_obj.meta.shape = torch.Size(shape)
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
        return False

    async def batched_async_contains(self, lookup_id: str, keys: List[CacheEngineKey],
                                     pin: bool = False) -> int:
        raise NotImplementedError

    def support_batched_get_non_blocking(self) -> bool:
        return False

    async def batched_get_non_blocking(self, lookup_id: str,
                                       keys: List[CacheEngineKey]) -> List[MemoryObj]:
        raise NotImplementedError

    def remove_sync(self, key: CacheEngineKey) -> bool:
        raise NotImplementedError

    def batched_contains(self, keys: List[CacheEngineKey],
                         stop_after_first_not_exits: bool = True) -> List[bool]:
        raise NotImplementedError

    def support_batched_contains(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<%s>" % self.__class__.__name__
