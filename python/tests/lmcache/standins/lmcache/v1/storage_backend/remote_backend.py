# SPDX-License-Identifier: Apache-2.0
"""Mirrors the construction and lookup path of RemoteBackend in lmcache/v1/storage_backend/
remote_backend.py (read 2026-12-03): RemoteBackend(config, metadata, loop, local_cpu_backend,
dst_device=, plugin_name=) builds its connector with CreateConnector("plugin://<plugin_name>"
or config.remote_url, ...) in init_connection(), where any exception but an irrecoverable one is
logged as a warning and leaves self.connection None (LMCache then runs with no remote tier);
contains() asks exists() on the event loop (exists_sync() with extra_config use_exists_sync);
batched_contains(keys, pin) -> int returns connection.batched_contains(keys) when the connector
supports it (0 on an exception), else the interface's default. Serde, metrics, puts, gets and the
MLA worker-id rewrite are left out."""

import asyncio
import logging
from typing import List, Optional

from lmcache.v1.storage_backend.abstract_backend import StorageBackendInterface
from lmcache.v1.storage_backend.connector import CreateConnector

logger = logging.getLogger("lmcache.standin.remote_backend")


class RemoteBackend(StorageBackendInterface):
    def __init__(self, config, metadata, loop, local_cpu_backend, dst_device: str = "cpu",
                 plugin_name: Optional[str] = None):
        super().__init__(dst_device=dst_device)
        self.plugin_name = plugin_name
        if plugin_name is not None:
            self.remote_url = "plugin://%s" % plugin_name
        else:
            if config.remote_url is None:
                raise ValueError("remote_url must be provided when not using plugin_name")
            self.remote_url = config.remote_url
        self.local_cpu_backend = local_cpu_backend
        self.loop = loop
        self.config = config
        self.metadata = metadata
        self.connection = None
        self.init_connection()

    def __str__(self):
        return self.__class__.__name__

    def init_connection(self):
        if self.connection is not None:
            return
        try:
            self.connection = CreateConnector(self.remote_url, self.loop, self.local_cpu_backend,
                                              self.config, self.metadata, plugin_name=self.plugin_name)
        except Exception as e:
            logger.warning("Failed to initialize/re-establish remote connection: %s", e)
            self.connection = None

    def contains(self, key, pin: bool = False) -> bool:
        if self.connection is None:
            return False
        try:
            if self.config.extra_config is not None and self.config.extra_config.get("use_exists_sync", False):
                return self.connection.exists_sync(key)
            return asyncio.run_coroutine_threadsafe(self.connection.exists(key), self.loop).result()
        except Exception as e:
            logger.warning("Remote connection failed in contains: %s", e)
            return False

    def batched_contains(self, keys: List, pin: bool = False) -> int:
        if self.connection is None:
            logger.warning("Connection is None in batched_contains, returning 0")
            return 0
        if not self.connection.support_batched_contains():
            return super().batched_contains(keys, pin)
        try:
            return self.connection.batched_contains(keys)
        except Exception as e:
            logger.warning("Remote connection failed in batched_contains: %s", e)
            return 0
