# SPDX-License-Identifier: Apache-2.0
"""Mirrors lmcache/v1/storage_backend/connector/__init__.py between LMCache PR #2225 (2025-12-10:
remote connector plugins) and PR #2314: ConnectorContext(url, loop, local_cpu_backend, config,
metadata); ConnectorAdapter(schema); ConnectorManager loading the adapters of
config.remote_connector_plugins from extra_config["remote_connector.<name>.module_path" /
".class_name"] (the class must be a ConnectorAdapter), and create_connector() calling
init_chunk_meta(config, metadata) and post_init() on the connector the first parsing adapter
builds for the URL (config.remote_url). The built-in adapters are left out. Written for the
tests."""

from abc import ABC, abstractmethod
import importlib
import inspect

from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector


class ConnectorContext:
    def __init__(self, url, loop, local_cpu_backend, config, metadata):
        self.url = url
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata


class ConnectorAdapter(ABC):
    def __init__(self, schema: str = "") -> None:
        self.schema = schema

    @abstractmethod
    def can_parse(self, url: str) -> bool:
        pass

    @abstractmethod
    def create_connector(self, context: ConnectorContext) -> RemoteConnector:
        pass


class ConnectorManager:
    def __init__(self, url, loop, local_cpu_backend, config=None, metadata=None) -> None:
        self.context = ConnectorContext(url, loop, local_cpu_backend, config, metadata)
        self.adapters = []
        for name in set(config.remote_connector_plugins or []):
            module_path = config.extra_config.get("remote_connector.%s.module_path" % name)
            class_name = config.extra_config.get("remote_connector.%s.class_name" % name)
            cls = getattr(importlib.import_module(module_path), class_name)
            if inspect.isclass(cls) and issubclass(cls, ConnectorAdapter):
                self.adapters.append(cls())

    def create_connector(self) -> RemoteConnector:
        for adapter in self.adapters:
            if adapter.can_parse(self.context.url):
                connector = adapter.create_connector(self.context)
                connector.init_chunk_meta(self.context.config, self.context.metadata)
                connector.post_init()
                return connector
        raise ValueError("No adapter found for URL: %s" % self.context.url)
