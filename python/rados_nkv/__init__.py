# SPDX-License-Identifier: Apache-2.0
"""rados_nkv: Python client for rados-nkv (NVMe Key-Value over Ceph RADOS), over libnkv.

    import rados_nkv
    with rados_nkv.connect("127.0.0.1:4420") as c:          # or "shm:/run/rados-nkv/kv.sock"
        c.store(b"key", b"value")
        assert c.retrieve(b"key") == b"value"

See docs/python.md. The integrations (rados_nkv.lmcache, rados_nkv.weights) are
subpackages imported on their own; nothing here imports them.
"""

from ._version import __version__
from . import _ffi
from .errors import NkvError, BatchError
from .client import connect, discover, Client, Engine
from .aio import AsyncClient
from . import longname

__all__ = ["__version__", "lib_version", "connect", "discover", "Client", "AsyncClient", "Engine",
           "NkvError", "BatchError", "longname", "library_path", "TTL_NONE"]

TTL_NONE = _ffi.TTL_NONE  # Client.store(..., ttl=TTL_NONE): the entry never expires

library_path = _ffi.library_path


def lib_version():
    """The version of the libnkv loaded (nkv_version())."""
    return _ffi.nkv_version().decode()
