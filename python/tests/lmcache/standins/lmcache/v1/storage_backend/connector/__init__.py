"""Mirrors the plugin path of lmcache/v1/storage_backend/connector/__init__.py (the version with
DynamicConnectorAdapter): ConnectorContext, ConnectorAdapter, DynamicConnectorAdapter (a
RemoteConnector class named by the plugin is built as cls(loop=, local_cpu_backend=, config=)) and
the plugin loader reading extra_config["remote_storage_plugin.<name>.module_path" / ".class_name"],
then, as ConnectorManager.create_connector() does in the releases that have it,
init_chunk_meta(config, metadata) and post_init() on the new connector. Written for the tests."""

import importlib
import inspect

from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector


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


class ConnectorAdapter:
    def __init__(self, schema: str = "") -> None:
        self.schema = schema

    def can_parse(self, url: str) -> bool:
        return self.schema != "" and url.startswith(self.schema)

    def create_connector(self, context: ConnectorContext) -> RemoteConnector:
        raise NotImplementedError


class DynamicConnectorAdapter(ConnectorAdapter):
    def __init__(self, plugin_name: str, connector_class: type) -> None:
        super().__init__("plugin://" + extract_plugin_type(plugin_name))
        self._plugin_name = plugin_name
        self._connector_class = connector_class

    def can_parse(self, url: str) -> bool:
        if url.startswith("plugin://"):
            return extract_plugin_type(url[len("plugin://"):]) == extract_plugin_type(self._plugin_name)
        return False

    def create_connector(self, context: ConnectorContext) -> RemoteConnector:
        return self._connector_class(loop=context.loop, local_cpu_backend=context.local_cpu_backend,
                                     config=context.config)


def load_plugin_adapters(config):
    """The adapters config.remote_storage_plugins names (ConnectorManager's plugin launcher)."""
    adapters = []
    for name in config.remote_storage_plugins or []:
        extra = config.extra_config or {}
        module_path = extra.get("remote_storage_plugin.%s.module_path" % name)
        class_name = extra.get("remote_storage_plugin.%s.class_name" % name)
        cls = getattr(importlib.import_module(module_path), class_name)
        if inspect.isclass(cls) and issubclass(cls, ConnectorAdapter):
            adapters.append(cls())
        elif inspect.isclass(cls) and issubclass(cls, RemoteConnector):
            adapters.append(DynamicConnectorAdapter(name, cls))
        else:
            raise TypeError("%s is neither a ConnectorAdapter nor a RemoteConnector" % class_name)
    return adapters


def create_plugin_connector(plugin_name, loop, local_cpu_backend, config, metadata=None):
    """What LMCache does for remote_storage_plugins: [plugin_name]: find the adapter for
    plugin://<plugin_name>, create the connector, init_chunk_meta(), post_init()."""
    url = "plugin://" + plugin_name
    context = ConnectorContext(url, loop, local_cpu_backend, config, metadata, plugin_name)
    for adapter in load_plugin_adapters(config):
        if adapter.can_parse(url):
            connector = adapter.create_connector(context)
            connector.init_chunk_meta(config, metadata)
            connector.post_init()
            return connector
    raise ValueError("No adapter found for URL: %s" % url)
