# SPDX-License-Identifier: Apache-2.0
"""Mirrors the plugin path of lmcache/v1/storage_backend/connector/__init__.py as on LMCache's dev
branch after PR #2666 (2026-04-07, DynamicConnectorAdapter), read 2026-12-03: ConnectorContext
(url, loop, local_cpu_backend, config, metadata, plugin_name), ConnectorAdapter, and
DynamicConnectorAdapter, which builds a RemoteConnector class named by a plugin as
cls(loop=, local_cpu_backend=, config=): no metadata, no plugin name. ConnectorManager loads the
adapters of config.remote_storage_plugins from extra_config["remote_storage_plugin.<name>.
module_path" / ".class_name"] (a ConnectorAdapter class is instantiated with no argument; a
RemoteConnector class is wrapped; an error while loading is logged and that plugin skipped) and
create_connector() returns the first parsing adapter's connector as it is: no init_chunk_meta(),
no post_init(). CreateConnector() wraps it in InstrumentedRemoteConnector. The built-in adapters
(discovered from LMCache's own package) are left out. Written for the tests."""

from abc import ABC, abstractmethod
from typing import List, Optional
import importlib
import inspect
import logging

from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
from lmcache.v1.storage_backend.connector.instrumented_connector import InstrumentedRemoteConnector

logger = logging.getLogger("lmcache.standin.connector")


def extract_plugin_type(plugin_name: str) -> str:
    return plugin_name.split(".", 1)[0]


class ConnectorContext:
    def __init__(self, url, loop, local_cpu_backend, config, metadata, plugin_name=None):
        self.url = url
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata
        self.plugin_name = plugin_name


class ConnectorAdapter(ABC):
    def __init__(self, schema: str = "") -> None:
        self.schema = schema

    def can_parse(self, url: str) -> bool:
        return self.schema != "" and url.startswith(self.schema)

    @abstractmethod
    def create_connector(self, context: ConnectorContext) -> RemoteConnector:
        pass


class DynamicConnectorAdapter(ConnectorAdapter):
    def __init__(self, plugin_name: str, connector_class: type) -> None:
        super().__init__("plugin://%s" % extract_plugin_type(plugin_name))
        self._plugin_name = plugin_name
        self._connector_class = connector_class

    def can_parse(self, url: str) -> bool:
        if url.startswith(self.schema):
            return True
        if url.startswith("plugin://"):
            return extract_plugin_type(url[len("plugin://"):]) == extract_plugin_type(self._plugin_name)
        return False

    def create_connector(self, context: ConnectorContext) -> RemoteConnector:
        return self._connector_class(loop=context.loop, local_cpu_backend=context.local_cpu_backend,
                                     config=context.config)


class ConnectorManager:
    def __init__(self, url, loop, local_cpu_backend, config=None, metadata=None,
                 plugin_name: Optional[str] = None) -> None:
        self.context = ConnectorContext(url, loop, local_cpu_backend, config, metadata, plugin_name)
        self.adapters: List[ConnectorAdapter] = []
        self._remote_adapters_plugin_launcher(config)

    def _remote_adapters_plugin_launcher(self, config) -> None:
        if config is None:
            return
        for name in set(config.remote_storage_plugins or []):
            try:
                extra = config.extra_config
                module_path = extra.get("remote_storage_plugin.%s.module_path" % name) if extra else None
                class_name = extra.get("remote_storage_plugin.%s.class_name" % name) if extra else None
                if not module_path or not class_name:
                    logger.warning("Remote connector %s missing adapter module_path or class_name", name)
                    continue
                loaded_class = getattr(importlib.import_module(module_path), class_name)
                if inspect.isclass(loaded_class) and issubclass(loaded_class, ConnectorAdapter):
                    adapter = loaded_class()
                elif inspect.isclass(loaded_class) and issubclass(loaded_class, RemoteConnector):
                    adapter = DynamicConnectorAdapter(plugin_name=name, connector_class=loaded_class)
                else:
                    logger.warning("Remote connector %s class %s is neither a ConnectorAdapter nor a "
                                   "RemoteConnector subclass", name, class_name)
                    continue
                self.adapters.append(adapter)
            except (ImportError, AttributeError) as e:
                logger.error("Failed to load remote connector %s due to import/attribute error: %s", name, e)
            except Exception as e:
                logger.error("Failed to create remote connector %s adapter: %s", name, e)

    def create_connector(self) -> RemoteConnector:
        for adapter in self.adapters:
            if adapter.can_parse(self.context.url):
                return adapter.create_connector(self.context)
        raise ValueError("No adapter found for URL: %s" % self.context.url)


def CreateConnector(url, loop, local_cpu_backend, config=None, metadata=None,
                    plugin_name: Optional[str] = None) -> InstrumentedRemoteConnector:
    if "://" not in url:
        raise ValueError("Invalid remote url %s: missing scheme" % url)
    manager = ConnectorManager(url, loop, local_cpu_backend, config, metadata, plugin_name)
    return InstrumentedRemoteConnector(manager.create_connector())
