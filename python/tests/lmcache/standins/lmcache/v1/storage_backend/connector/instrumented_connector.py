# SPDX-License-Identifier: Apache-2.0
"""Mirrors InstrumentedRemoteConnector of lmcache/v1/storage_backend/connector/
instrumented_connector.py (read 2026-12-03), without its metrics: the wrapper LMCache's remote
backend talks to. It forwards each method to the connector; put() drops the MemoryObj's reference
after the put (also when it raised), batched_put() logs an exception instead of raising and drops
every reference; batched_contains(keys) -> int."""

from typing import List, Optional
import logging

from lmcache.utils import CacheEngineKey
from lmcache.v1.memory_management import MemoryObj
from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector

logger = logging.getLogger("lmcache.standin.instrumented")


class InstrumentedRemoteConnector(RemoteConnector):
    def __init__(self, connector: RemoteConnector):
        self._connector = connector
        self.name = self.__repr__()

    async def put(self, key: CacheEngineKey, memory_obj: MemoryObj) -> None:
        try:
            await self._connector.put(key, memory_obj)
        finally:
            memory_obj.ref_count_down()

    async def get(self, key: CacheEngineKey) -> Optional[MemoryObj]:
        return await self._connector.get(key)

    async def exists(self, key: CacheEngineKey) -> bool:
        return await self._connector.exists(key)

    def exists_sync(self, key: CacheEngineKey) -> bool:
        return self._connector.exists_sync(key)

    async def list(self) -> List[str]:
        return await self._connector.list()

    async def close(self) -> None:
        await self._connector.close()

    def getWrappedConnector(self) -> RemoteConnector:
        return self._connector

    def support_ping(self) -> bool:
        return self._connector.support_ping()

    async def ping(self) -> int:
        return await self._connector.ping()

    def support_batched_put(self) -> bool:
        return self._connector.support_batched_put()

    def support_batched_get(self) -> bool:
        return self._connector.support_batched_get()

    def support_batched_async_contains(self) -> bool:
        return self._connector.support_batched_async_contains()

    async def batched_async_contains(self, lookup_id: str, keys: List[CacheEngineKey],
                                     pin: bool = False) -> int:
        return await self._connector.batched_async_contains(lookup_id, keys, pin)

    def support_batched_get_non_blocking(self) -> bool:
        return self._connector.support_batched_get_non_blocking()

    async def batched_get_non_blocking(self, lookup_id: str,
                                       keys: List[CacheEngineKey]) -> List[MemoryObj]:
        return await self._connector.batched_get_non_blocking(lookup_id, keys)

    async def batched_get(self, keys: List[CacheEngineKey]) -> List[Optional[MemoryObj]]:
        return await self._connector.batched_get(keys)

    async def batched_put(self, keys: List[CacheEngineKey], memory_objs: List[MemoryObj]):
        try:
            await self._connector.batched_put(keys, memory_objs)
        except Exception as e:
            logger.warning("batched put error: %s", e)
        finally:
            for memory_obj in memory_objs:
                memory_obj.ref_count_down()

    def remove_sync(self, key: CacheEngineKey) -> bool:
        return self._connector.remove_sync(key)

    def batched_contains(self, keys: List[CacheEngineKey]) -> int:
        return self._connector.batched_contains(keys)

    def support_batched_contains(self) -> bool:
        return self._connector.support_batched_contains()

    def reshape_partial_chunk(self, memory_obj: MemoryObj, bytes_read: int) -> MemoryObj:
        return self._connector.reshape_partial_chunk(memory_obj, bytes_read)

    def post_init(self):
        return self._connector.post_init()

    def __repr__(self) -> str:
        return "InstrumentedRemoteConnector(%s)" % self._connector
