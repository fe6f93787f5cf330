# SPDX-License-Identifier: Apache-2.0
"""LMCache integration of rados-nkv.

- RadosNkvConnector: LMCache's RemoteConnector (remote_storage_plugins, or remote_url external://).
- RadosNkvAdapter: LMCache's ConnectorAdapter for plugin://rados_nkv[.INSTANCE] and
  rados_nkv://TARGET URLs (named plugin instances with their own settings).
- NativePlugin: the connector object of the multi-process mode's "native_plugin" L2 adapter.

See docs/lmcache.md for the configuration keys and a complete LMCache YAML example. LMCache itself
is optional here: without it the classes import with object as their base.
"""

from .connector import RadosNkvConnector, RadosNkvAdapter, HAVE_LMCACHE
from .native import NativePlugin

__all__ = ["RadosNkvConnector", "RadosNkvAdapter", "NativePlugin", "HAVE_LMCACHE"]
