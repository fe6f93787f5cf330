# SPDX-License-Identifier: Apache-2.0
"""RadosNkvConnector against a real rados-nkv daemon, driven as LMCache drives a remote storage
plugin (the stand-ins of LMCache's classes: see standins/)."""

import asyncio
import inspect
import logging
import os
import signal
import struct
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import torch

import lmcache_helpers as H
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
from lmcache.v1.storage_backend.remote_backend import RemoteBackend
from lmcache.v1.storage_backend.storage_manager import StorageManager

import rados_nkv
from rados_nkv import longname
from rados_nkv.lmcache import RadosNkvConnector, RadosNkvAdapter, framing
from rados_nkv.lmcache.settings import KEYS

UPSTREAM_METHODS = [
    "exists", "exists_sync", "get", "put", "list", "close", "post_init", "reshape_partial_chunk",
    "support_ping", "ping", "support_batched_get", "batched_get",
    "support_batched_put", "batched_put", "support_batched_async_contains", "batched_async_contains",
    "support_batched_get_non_blocking", "batched_get_non_blocking", "remove_sync", "batched_contains",
    "support_batched_contains",
]


# ---- the interface ------------------------------------------------------------------------------

def test_implements_remote_connector():
    assert issubclass(RadosNkvConnector, RemoteConnector)
    assert not getattr(RadosNkvConnector, "__abstractmethods__", None), RadosNkvConnector.__abstractmethods__
    abstract = RemoteConnector.__abstractmethods__
    assert abstract == {"exists", "exists_sync", "get", "put", "list", "close"}
    for name in UPSTREAM_METHODS:
        base = getattr(RemoteConnector, name)
        mine = getattr(RadosNkvConnector, name)
        if name in abstract or name.startswith(("support_", "batched_", "ping", "remove_")):
            assert mine is not base, "%s is not implemented" % name
        assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(base), name
        bp = list(inspect.signature(base).parameters.values())
        mp = list(inspect.signature(mine).parameters.values())
        assert [p.name for p in mp] == [p.name for p in bp], name
        assert [p.default for p in mp] == [p.default for p in bp], name
    for name in UPSTREAM_METHODS:
        if name.startswith("support_"):
            assert getattr(RadosNkvConnector, name)(object.__new__(RadosNkvConnector)) is True, name


def test_imports_without_lmcache():
    """No LMCache on the path: the module imports, with object as the base."""
    code = ("import sys; import rados_nkv.lmcache as m; assert 'lmcache' not in sys.modules; "
            "assert not m.HAVE_LMCACHE; assert m.RadosNkvConnector.__bases__ == (object,); "
            "assert m.RadosNkvAdapter.__bases__ == (object,); print('ok')")
    env = dict(os.environ, PYTHONPATH=str(H.__file__).rsplit("/tests/", 1)[0])
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_settings_errors():
    from rados_nkv.lmcache import settings
    with pytest.raises(ValueError, match="remote_storage_plugin.rados_nkv.queues"):
        settings.from_extra_config({"remote_storage_plugin.rados_nkv.queues": "many"})
    with pytest.raises(ValueError, match="nsid"):
        settings.from_kwargs(nsid=0)
    with pytest.raises(ValueError, match="no target"):
        settings.connect_args(settings.from_extra_config({}))
    with pytest.raises(ValueError, match="either target or shm_socket"):
        settings.connect_args(settings.from_kwargs(target="h:1", shm_socket="/s"))
    s = settings.from_extra_config({"remote_storage_plugin.rados_nkv.primary.queues": "8",
                                    "remote_storage_plugin.rados_nkv.queues": 2,
                                    "remote_connector.rados_nkv.depth": "64",
                                    "remote_storage_plugin.rados_nkv.register_arena": "false"},
                                   "rados_nkv.primary", "rados_nkv://10.0.0.1:4420")
    assert (s["queues"], s["depth"], s["register_arena"], s["target"]) == (8, 64, False, "10.0.0.1:4420")
    assert settings.connect_args(settings.from_kwargs(shm_socket="/run/k.sock"))[0] == "shm:/run/k.sock"
    # several paths of one gateway group: a list, or commas, both reach connect() as one list string
    s = settings.from_extra_config({"remote_storage_plugin.rados_nkv.target": ["10.0.0.1:4420", "10.0.0.2:4420"]})
    assert settings.connect_args(s)[0] == "10.0.0.1:4420,10.0.0.2:4420"
    s = settings.from_kwargs(target="10.0.0.1:4420,10.0.0.2:4420")
    assert settings.connect_args(s)[0] == "10.0.0.1:4420,10.0.0.2:4420"
    with pytest.raises(ValueError, match="list of targets"):
        settings.from_extra_config({"remote_storage_plugin.rados_nkv.target": ["10.0.0.1:4420", 5]})
    assert set(KEYS) >= {"target", "shm_socket", "subnqn", "nsid", "queues", "register_arena"}


def test_framing_matches_protocol():
    """The metadata is byte for byte LMCache's RemoteMetadata: 28 bytes for one KV layer group,
    8 + 20 x groups for several; shapes under 4 dimensions padded with zeros."""
    from lmcache.v1.protocol import RemoteMetadata, init_remote_metadata_info
    init_remote_metadata_info(1)
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.uint8):
        shape = torch.Size([2, 3, 5, 7])
        ours = bytearray(28)
        framing.pack_into(ours, 0, 1234, MemoryFormat.KV_2LTD.value, [dtype], [shape])
        assert bytes(ours) == RemoteMetadata(1234, [shape], [dtype], MemoryFormat.KV_2LTD).serialize()
        assert framing.unpack(ours, 0, 1) == (1234, 1, [dtype], [(2, 3, 5, 7)])
    init_remote_metadata_info(3)
    shapes = [torch.Size([1, 4, 16, 576]), torch.Size([1, 4, 16, 128]), torch.Size([16, 3])]
    dtypes = [torch.bfloat16, torch.uint8, torch.float32]
    ours = bytearray(framing.meta_size(3))
    assert len(ours) == 68
    framing.pack_into(ours, 0, 99, MemoryFormat.KV_MLA_FMT.value, dtypes, shapes)
    theirs = RemoteMetadata(99, shapes, dtypes, MemoryFormat.KV_MLA_FMT).serialize()
    assert bytes(ours) == theirs
    assert framing.unpack(theirs, 0, 3) == (99, 6, dtypes, [tuple(s) for s in shapes])
    back = RemoteMetadata.deserialize(bytes(ours))
    assert back.shapes == shapes and back.dtypes == dtypes and back.length == 99
    assert framing.groups_of(68) == 3 and framing.groups_of(28) == 1 and framing.groups_of(30) is None
    with pytest.raises(ValueError):
        framing.pack_into(bytearray(28), 0, 1, 1, [torch.int32], [(1, 1, 1, 1)])
    with pytest.raises(ValueError):
        framing.pack_into(bytearray(28), 0, 1, 1, [torch.float16], [(1, 1, 1, 1, 1)])
    with pytest.raises(ValueError):
        framing.pack_into(bytearray(48), 0, 1, 1, [torch.float16], [(1,), (2,)])
    with pytest.raises(ValueError):
        framing.unpack(bytes([1, 0, 0, 0, 1, 0, 0, 0, 99, 0, 0, 0]) + bytes(16), 0, 1)
    with pytest.raises(ValueError):
        framing.unpack(bytes(28), 0, 0)


# ---- LMCache's own construction and lookup path ---------------------------------------------------

@pytest.mark.parametrize("class_name", ["RadosNkvConnector", "RadosNkvAdapter"])
def test_remote_backend_builds_the_connector(lmc_endpoint, class_name, caplog):
    """LMCache's RemoteBackend for remote_storage_plugins: [rados_nkv] builds the connector from the
    plugin's class_name: a RemoteConnector class (DynamicConnectorAdapter: cls(loop=,
    local_cpu_backend=, config=), whose base takes (config, metadata)) or the adapter. LMCache only
    logs a warning when that fails and runs with no remote tier, so the connection must exist; and
    its StorageManager slices keys[:n] with the connector's batched_contains."""
    be = H.arena()
    cfg = H.config(lmc_endpoint, class_name=class_name)
    with caplog.at_level(logging.WARNING):
        rb = RemoteBackend(cfg, be.metadata, None, be, plugin_name="rados_nkv")
    assert rb.connection is not None, caplog.text
    c = rb.connection.getWrappedConnector()
    try:
        assert isinstance(c, RadosNkvConnector) and c.save_chunk_meta is True
        assert c.meta_shapes == be.metadata.get_shapes() and c.remote_metadata_bytes == 28
        m = H.model()
        keys = [H.key(m, i) for i in range(6)]
        o = H.chunk(be, torch.bfloat16, 3)
        H.run(rb.connection.batched_put([keys[i] for i in (0, 1, 2, 4)], [o] * 4))   # 3 is missing
        sm = StorageManager({"RemoteBackend": rb})
        assert sm.batched_contains(keys) == (3, {"RemoteBackend": keys[:3]})
        assert sm.batched_contains(keys[4:5]) == (1, {"RemoteBackend": keys[4:5]})
        assert rb.batched_contains(keys[3:]) == 0 and sm.batched_contains(keys[5:]) == (0, {})
        got = H.run(rb.connection.get(keys[4]))
        assert torch.equal(got.tensor, o.tensor)
    finally:
        c.close_sync()


def test_without_engine_metadata(lmc_endpoint, caplog):
    """A CPU backend without engine metadata: the current base (which asserts metadata) is not
    called with None; chunks with metadata are read as one group, the header-less mode reads
    nothing (logged) instead of failing."""
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.memory_management import MixedMemoryAllocator
    from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
    be = LocalCPUBackend(LMCacheEngineConfig(), None, memory_allocator=MixedMemoryAllocator(8 << 20))
    c = RadosNkvConnector(loop=None, local_cpu_backend=be, config=H.config(lmc_endpoint))
    ch = RadosNkvConnector(loop=None, local_cpu_backend=be,
                           config=H.config(lmc_endpoint, extra={"save_chunk_meta": False}))
    try:
        assert c.save_chunk_meta is True and ch.save_chunk_meta is False
        k = H.key(H.model(), 0)
        o = H.chunk(be, torch.bfloat16, 8)
        H.run(c.put(k, o))
        got = H.run(c.get(k))
        assert torch.equal(got.tensor, o.tensor) and c.batched_contains([k]) == 1
        with caplog.at_level(logging.WARNING, logger="rados_nkv.lmcache"):
            assert H.run(ch.get(k)) is None
        assert "no engine metadata" in caplog.text
    finally:
        c.close_sync()
        ch.close_sync()


GROUPS = [(H.LAYERS, 576, torch.bfloat16), (H.LAYERS, 132, torch.uint8)]   # MLA latent, DSA indexer


def test_two_kv_layer_groups(lmc_endpoint):
    """A model of 2 KV layer groups of different shapes and dtypes: the value carries LMCache's
    RemoteMetadata of 8 + 20 x 2 bytes (checked field by field), reads back into both groups, in
    the header-less mode too; a one-group model's connector takes such a value for a miss, and the
    other way round."""
    meta = H.metadata(groups=GROUPS, use_mla=True)
    be = H.arena(meta=meta)
    c = H.connector(lmc_endpoint, be)
    c1 = H.connector(lmc_endpoint, H.arena())            # one group (LMCache's format is reset to 28)
    ch = H.connector(lmc_endpoint, be, extra={"save_chunk_meta": False})
    try:
        assert c.remote_metadata_bytes == 48 and c1.remote_metadata_bytes == 28
        m = H.model()
        k, k1, k2 = H.key(m, 0), H.key(m, 1), H.key(m, 2)
        obj = H.group_chunk(be, meta, 5)
        n = obj.get_size()
        assert n == H.LAYERS * H.TOKENS * (576 * 2 + 132)
        H.run(c.put(k, obj))
        name = k.to_string()
        raw = c.client.retrieve(longname.key_for(name))
        h = longname.header_size(name)
        assert len(raw) == h + 48 + n
        assert struct.unpack_from("<12i", raw, h) == (n, MemoryFormat.KV_MLA_FMT.value,
                                                      3, 1, H.LAYERS, H.TOKENS, 576,
                                                      6, 1, H.LAYERS, H.TOKENS, 132)
        assert raw[h + 48:] == bytes(obj.byte_array)
        for _ in range(2):                               # the second read: the layout guessed right
            got = H.run(c.get(k))
            assert got.get_shapes() == obj.get_shapes() and got.get_dtypes() == obj.get_dtypes()
            assert got.get_memory_format() == MemoryFormat.KV_MLA_FMT
            assert bytes(got.byte_array) == bytes(obj.byte_array)
            assert torch.equal(got.get_tensor(0), obj.get_tensor(0))
            assert torch.equal(got.get_tensor(1), obj.get_tensor(1))
            got.ref_count_down()
        assert H.run(c1.get(k)) is None                  # 48 bytes of metadata: not a one-group chunk
        o1 = H.chunk(c1.local_cpu_backend, torch.bfloat16, 6)
        H.run(c1.put(k1, o1))
        assert H.run(c.get(k1)) is None                  # 28 bytes: not a two-group chunk
        # metadata of the right size that describes no chunk: a miss each time
        bad = bytearray(48)
        for fields in ((0, 6, 3, 1, 4, 0, 576, 6, 1, 4, 0, 132),             # an empty chunk
                       (n, 6, 3, 1, 4, 16, 576, 6, 1, 4, 16, 133),           # shapes != length
                       (n, 6, 3, 1, 4, 16, 576, 99, 1, 4, 16, 132),          # unknown dtype code
                       (n, 6, 3, -1, 4, 16, 576, 6, 1, 4, 16, 132)):         # negative dimension
            struct.pack_into("<12i", bad, 0, *fields)
            c.client.put_named(H.key(m, 9).to_string(), bytes(bad) + bytes(fields[0]))
            assert H.run(c.get(H.key(m, 9))) is None, fields
        H.run(ch.put(k2, obj))                           # header-less: the payload alone
        raw2 = c.client.retrieve(longname.key_for(k2.to_string()))
        assert len(raw2) == longname.header_size(k2.to_string()) + n
        got = H.run(ch.get(k2))
        assert got.get_shapes() == obj.get_shapes() and bytes(got.byte_array) == bytes(obj.byte_array)
        got.ref_count_down()
        obj.ref_count_down()
        assert be.memory_allocator.pin_allocator.live == 0
    finally:
        for conn in (c, c1, ch):
            conn.close_sync()


_PREVIOUS = r"""
import asyncio, sys, uuid
import torch
import rados_nkv.lmcache.connector as rc
from rados_nkv import longname
from lmcache.config import LMCacheEngineMetadata
from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.memory_management import MemoryFormat, MixedMemoryAllocator
from lmcache.v1.storage_backend.connector import ConnectorManager
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

assert not rc.BASE_TAKES_METADATA and rc.CONTAINS_RETURNS_LIST
target, subnqn = sys.argv[1], sys.argv[2] or None
meta = LMCacheEngineMetadata("test/model", 1, 0, "vllm", torch.bfloat16, (4, 2, 16, 2, 32))
be = LocalCPUBackend(LMCacheEngineConfig(), None, memory_allocator=MixedMemoryAllocator(16 << 20))
model = "test/prev-" + uuid.uuid4().hex[:10]
for headerless in (False, True):
    ec = {"remote_connector.rados_nkv.module_path": "rados_nkv.lmcache",
          "remote_connector.rados_nkv.class_name": "RadosNkvAdapter",
          "remote_connector.rados_nkv.subnqn": subnqn}
    if headerless:
        ec["save_chunk_meta"] = False
    cfg = LMCacheEngineConfig(remote_url="rados_nkv://" + target, remote_connector_plugins=["rados_nkv"],
                              extra_config=ec)
    c = ConnectorManager(cfg.remote_url, None, be, cfg, meta).create_connector()
    assert c.save_chunk_meta is not headerless
    keys = [CacheEngineKey(model, 1, 0, 3 * i + headerless + 1, torch.bfloat16) for i in range(3)]
    o = be.allocate(torch.Size([2, 4, 16, 64]), torch.bfloat16, MemoryFormat.KV_2LTD)
    o.tensor.copy_(torch.randn(2, 4, 16, 64).to(torch.bfloat16))
    asyncio.run(c.batched_put([keys[0], keys[2]], [o, o]))
    assert c.batched_contains(keys) == [True, False, False]
    assert c.batched_contains(keys, stop_after_first_not_exits=False) == [True, False, True]
    got = asyncio.run(c.get(keys[0]))
    assert got.get_shape() == o.get_shape() and torch.equal(got.tensor, o.tensor)
    name = keys[0].to_string()
    raw = c.client.retrieve(longname.key_for(name))
    assert len(raw) == longname.header_size(name) + (0 if headerless else 28) + o.get_size()
    c.close_sync()
print("ok")
"""


def test_previous_lmcache_interface(lmc_endpoint):
    """LMCache before PR #2314 (the stand-ins of standins_prev/ laid over standins/): the adapter
    from remote_connector_plugins for remote_url rados_nkv://TARGET, a base with no __init__ and
    init_chunk_meta() from the ConnectorManager, batched_contains(keys, stop_after_first_not_exits)
    -> List[bool], 28-byte RemoteMetadata; both modes round-trip."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [os.path.join(here, "standins_prev"), os.path.join(here, "standins"),
            os.path.join(here, "..", "..")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    r = subprocess.run([sys.executable, "-c", _PREVIOUS, lmc_endpoint["target"], lmc_endpoint["subnqn"] or ""],
                       env=env, cwd="/", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# ---- round trips --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_chunk_round_trip(lmc_endpoint, dtype):
    be = H.arena()
    c = H.connector(lmc_endpoint, be)
    try:
        m = H.model()
        full = H.chunk(be, dtype, 1)
        part = H.chunk(be, dtype, 2, tokens=5)      # the last, partial chunk of a sequence
        k_full, k_part = H.key(m, 0, dtype), H.key(m, 1, dtype, tags={"user": "alice"})

        async def go():
            assert await c.get(k_full) is None
            await c.put(k_full, full)
            await c.put(k_part, part)
            assert await c.exists(k_full) and c.exists_sync(k_part)
            a = await c.get(k_full)
            b = await c.get(k_part)          # another layout: read again at its own shape
            a2 = await c.get(k_full)
            return a, b, a2
        a, b, a2 = H.run(go())
        for got, want in ((a, full), (b, part), (a2, full)):
            assert got is not None and got is not want
            assert got.get_dtype() == dtype and got.get_shape() == want.get_shape()
            assert got.get_memory_format() == MemoryFormat.KV_2LTD
            assert torch.equal(got.tensor, want.tensor)
        # on the target: header + 28-byte metadata + the chunk's bytes, under SHA-256(name)[:16]
        name = k_full.to_string()
        raw = c.client.retrieve(longname.key_for(name))
        h = longname.header_size(name)
        assert len(raw) == h + 28 + full.get_size()
        assert longname.check_header(raw, name) == 28 + full.get_size()
        assert framing.unpack(raw, h, 1) == (full.get_size(), 1, [dtype], [tuple(full.get_shape())])
        assert raw[h + 28:] == bytes(full.byte_array)
    finally:
        c.close_sync()


def test_headerless_mode(lmc_endpoint):
    """save_chunk_meta: false: the payload alone; the layout comes from LMCache's metadata and a
    shorter value is a partial chunk (reshape_partial_chunk)."""
    dtype = torch.bfloat16
    be = H.arena(meta=H.metadata(dtype))
    c = H.connector(lmc_endpoint, be, extra={"save_chunk_meta": False})
    try:
        assert c.save_chunk_meta is False
        assert c.full_chunk_size_bytes == 2 * H.LAYERS * H.TOKENS * H.HEADS * H.HEAD_SIZE * 2
        m = H.model()
        full, part = H.chunk(be, dtype, 3), H.chunk(be, dtype, 4, tokens=7)
        k1, k2 = H.key(m, 0, dtype), H.key(m, 1, dtype)

        async def go():
            await c.batched_put([k1, k2], [full, part])
            return await c.batched_get([k1, k2, H.key(m, 2, dtype)])
        a, b, none = H.run(go())
        assert none is None
        assert torch.equal(a.tensor, full.tensor) and a.get_shape() == full.get_shape()
        assert b.get_shape() == part.get_shape() and torch.equal(b.tensor, part.tensor)
        name = k2.to_string()
        raw = c.client.retrieve(longname.key_for(name))
        assert len(raw) == longname.header_size(name) + part.get_size()   # no metadata
        # a value that is not a whole number of tokens is a miss, not a crash
        c.client.put_named(H.key(m, 3, dtype).to_string(), b"\x01" * 1000)
        assert H.run(c.get(H.key(m, 3, dtype))) is None
    finally:
        c.close_sync()


@pytest.mark.parametrize("meta", [True, False], ids=["meta", "headerless"])
def test_foreign_object_and_collision_are_misses(lmc_endpoint, meta):
    be = H.arena()
    dtype = torch.bfloat16
    c = H.connector(lmc_endpoint, be, extra=None if meta else {"save_chunk_meta": False})
    try:
        m = H.model()
        k, k2, k3 = H.key(m, 0), H.key(m, 1), H.key(m, 2)
        key16 = longname.key_for(k.to_string())
        # a foreign object under the very same 16-byte key
        c.client.store(key16, b"not an LMCache chunk" * 100)
        # a hash collision: k3's complete, valid value (header, metadata, a full chunk) under k2's
        # key: only the name in the header tells them apart
        o = H.chunk(be, dtype, 3)
        H.run(c.put(k3, o))
        c.client.store(longname.key_for(k2.to_string()), c.client.retrieve(longname.key_for(k3.to_string())))
        got3 = H.run(c.get(k3))
        assert got3 is not None and torch.equal(got3.tensor, o.tensor)
        got3.ref_count_down()
        o.ref_count_down()

        async def go():
            return (await c.get(k), await c.get(k2), await c.exists(k), await c.exists(k2),
                    await c.batched_async_contains("l", [k, k2]), await c.batched_get([k, k2]),
                    await c.batched_async_contains("l", [k3, k2]))
        g1, g2, e1, e2, n, bg, n3 = H.run(go())
        assert (g1, g2, e1, e2, n, bg, n3) == (None, None, False, False, 0, [None, None], 1)
        assert not c.exists_sync(k) and c.batched_contains([k2]) == 0
        assert c.remove_sync(k) is False and c.remove_sync(k2) is False     # left alone
        assert c.client.retrieve(key16) == b"not an LMCache chunk" * 100
        assert c.client.exist(longname.key_for(k2.to_string()))
        assert be.memory_allocator.pin_allocator.live == 0   # nothing leaked from the arena
    finally:
        c.close_sync()


def test_32_concurrent_puts_and_gets(lmc_endpoint):
    be = H.arena(128 << 20)
    c = H.connector(lmc_endpoint, be)
    try:
        m = H.model()
        dtypes = [torch.bfloat16, torch.float16]
        objs = [H.chunk(be, dtypes[i % 2], 100 + i, tokens=16 - i % 4) for i in range(32)]
        keys = [H.key(m, i, dtypes[i % 2]) for i in range(32)]

        async def go():
            await asyncio.gather(*(c.put(k, o) for k, o in zip(keys, objs)))
            return await asyncio.gather(*(c.get(k) for k in keys))
        got = H.run(go())
        for g, o in zip(got, objs):
            assert g is not None and g.get_shape() == o.get_shape() and torch.equal(g.tensor, o.tensor)
        assert {k.to_string() for k in keys} <= set(H.run(c.list()))
    finally:
        c.close_sync()


def test_prefix_contains(lmc_endpoint):
    be = H.arena()
    c = H.connector(lmc_endpoint, be)
    try:
        m = H.model()
        keys = [H.key(m, i) for i in range(8)]
        o = H.chunk(be, torch.bfloat16, 7)

        async def go():
            await c.batched_put([keys[i] for i in (0, 1, 2, 3, 4, 6, 7)], [o] * 7)   # 5 is missing
            return (await c.batched_async_contains("a", keys), await c.batched_async_contains("b", keys[5:]),
                    await c.batched_async_contains("c", keys[:5], pin=True), await c.batched_async_contains("d", []),
                    await c.batched_async_contains("e", keys[6:]))
        assert H.run(go()) == (5, 0, 5, 0, 2)
        n = c.batched_contains(keys)
        assert type(n) is int and n == 5                     # the hit count by prefix
        assert (c.batched_contains(keys[6:]), c.batched_contains(keys[5:]), c.batched_contains([])) == (2, 0, 0)

        async def nb():
            return await c.batched_get_non_blocking("x", keys)
        got = H.run(nb())
        assert len(got) == 5 and all(torch.equal(g.tensor, o.tensor) for g in got)
        for g in got:
            g.ref_count_down()
        o.ref_count_down()
        assert be.memory_allocator.pin_allocator.live == 0   # the two read past the gap were released
    finally:
        c.close_sync()


def test_zero_copy_into_the_memory_obj(lmc_endpoint):
    """The chunk lands in the MemoryObj's own memory, inside LMCache's arena: the object the
    allocator handed out, its bytes right there, and no buffer of chunk size made on the way."""
    be = H.arena()
    alloc = be.memory_allocator.pin_allocator
    c = H.connector(lmc_endpoint, be)
    try:
        if lmc_endpoint["transport"] == "shm":
            assert c.arena_registered            # the whole arena is registered with the controller
        m = H.model()
        src = H.chunk(be, torch.bfloat16, 11, tokens=128)   # 128 KiB
        k = H.key(m, 0)
        H.run(c.put(k, src))
        H.run(c.get(k)).ref_count_down()        # warm up: learns the layout, imports everything
        n_before = len(alloc.allocated)

        async def traced_get():
            tracemalloc.start()
            try:
                got = await c.get(k)
                return got, tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        got, peak = H.run(traced_get())
        assert len(alloc.allocated) == n_before + 1          # one allocation: the result itself
        start, nbytes = alloc.allocated[-1]
        base = alloc.buffer.data_ptr()
        assert got.tensor.data_ptr() == base + start and nbytes == src.get_size()
        arena_bytes = bytes(memoryview(alloc.buffer.numpy())[start:start + nbytes])
        assert arena_bytes == bytes(src.byte_array)
        assert peak < src.get_size() // 4, "%d bytes allocated by Python during a get of %d" % (peak, src.get_size())
        if lmc_endpoint["transport"] == "shm":
            # the MemoryObj's pages are the registered shared mapping the target writes into
            mapping = _mapping_of(got.tensor.data_ptr(), nbytes)
            assert mapping is not None and "rw-s" in mapping and "memfd:nkv" in mapping, mapping
    finally:
        c.close_sync()


def _mapping_of(addr, n):
    """The /proc/self/maps line whose mapping holds [addr, addr + n), or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr and addr + n <= hi:
                return line.strip()
    return None


def test_allocation_failure_is_a_miss(lmc_endpoint):
    be = H.arena(64 << 10)                               # room for four 16 KiB chunks
    c = H.connector(lmc_endpoint, be)
    try:
        m = H.model()
        o = H.chunk(be, torch.bfloat16, 5)
        k = H.key(m, 0)
        H.run(c.put(k, o))
        hold = [be.allocate(o.get_shape(), torch.bfloat16, MemoryFormat.KV_2LTD) for _ in range(4)]
        assert hold[-2] is not None and hold[-1] is None  # the arena is full now
        assert H.run(c.get(k)) is None
        assert H.run(c.batched_get([k, k])) == [None, None]
        for h in hold:
            if h is not None:
                h.ref_count_down()
        got = H.run(c.get(k))
        assert got is not None and torch.equal(got.tensor, o.tensor)
    finally:
        c.close_sync()


def test_list_remove_ping_close(lmc_endpoint):
    be = H.arena()
    c = H.connector(lmc_endpoint, be)
    m = H.model()
    long_model = m + "/" + "x" * 700                     # a name longer than list()'s first read
    keys = [H.key(m, 0), H.key(long_model, 1)]
    o = H.chunk(be, torch.bfloat16, 9)

    async def go():
        await c.batched_put(keys, [o, o])
        names = await c.list()
        return names, await c.ping()
    names, ping = H.run(go())
    assert {k.to_string() for k in keys} <= set(names) and ping == 0
    assert c.remove_sync(keys[0]) is True and c.remove_sync(keys[0]) is False
    assert not c.exists_sync(keys[0]) and c.exists_sync(keys[1])
    H.run(c.close())
    H.run(c.close())                                      # idempotent
    assert c.client.closed


def test_adapter_plugin_instance(lmc_endpoint, caplog):
    """class_name RadosNkvAdapter with a plugin instance: plugin://rados_nkv.primary, settings
    under remote_storage_plugin.rados_nkv.primary.*; an unknown setting is reported."""
    be = H.arena()
    ep = dict(lmc_endpoint, subnqn=None)          # TCP: the subsystem from the discovery controller
    extra = {"remote_storage_plugin.rados_nkv.primary.queus": 3,
             "remote_storage_plugin.rados_nkv.primary.discovery_port": lmc_endpoint["daemon"].disc_port}
    with caplog.at_level(logging.WARNING, logger="rados_nkv.lmcache"):
        c = H.connector(ep, be, plugin="rados_nkv.primary", class_name="RadosNkvAdapter", instance_keys=True,
                        extra=extra)
    try:
        assert isinstance(c, RadosNkvConnector) and c.plugin_name == "rados_nkv.primary"
        assert c.client.queues == 2 and c.client.transport == lmc_endpoint["transport"]
        assert "remote_storage_plugin.rados_nkv.primary.queus" in caplog.text
        a = RadosNkvAdapter()
        assert a.can_parse("plugin://rados_nkv") and a.can_parse("plugin://rados_nkv.x")
        assert a.can_parse("rados_nkv://127.0.0.1:4420") and not a.can_parse("plugin://fs")
    finally:
        c.close_sync()


def test_put_on_a_closed_connection_raises(lmc_endpoint):
    """A put that cannot be sent fails loudly (LMCache logs it), never silently."""
    be = H.arena()
    c = H.connector(lmc_endpoint, be)
    try:
        o = H.chunk(be, torch.bfloat16, 1)
        c.client.close()                                  # the connection is gone
        with pytest.raises(ValueError):
            H.run(c.put(H.key(H.model(), 0), o))
    finally:
        c.close_sync()


def test_bad_target_fails_construction(lmc_endpoint):
    be = H.arena()
    bad = dict(lmc_endpoint, target="127.0.0.1:1")
    with pytest.raises(rados_nkv.NkvError):
        H.connector(bad, be)


def test_staging_pool():
    """Stores reuse registered staging buffers (best fit), and past the cap fall back to plain
    memory rather than failing."""
    from rados_nkv.lmcache.staging import StagingPool

    class FakeClient:
        def __init__(self):
            self.allocs = []

        def alloc(self, n):
            self.allocs.append(n)
            return memoryview(np.zeros(n, np.uint8)).cast("B")

    fc = FakeClient()
    pool = StagingPool(fc, 1 << 20)
    a = pool.get(100_000)
    assert a.nbytes == 131072 and fc.allocs == [131072]
    pool.put(a)
    b = pool.get(70_000)                      # fits the idle 128 KiB buffer
    assert b is a and pool.reused == 1
    c = pool.get(900_000)                     # 128 KiB + 896 KiB = the 1 MiB cap
    assert c.nbytes == 917504 and len(fc.allocs) == 2
    d = pool.get(10)                          # over the cap: plain memory
    assert isinstance(d.obj, bytearray) and pool.plain == 1
    pool.put(d)
    pool.put(c)
    pool.put(b)
    assert pool.get(60_000) is b              # the smallest that fits, not the 896 KiB one
    e = pool.get(300_000)                     # c would waste more than the request: not taken
    assert e is not c and isinstance(e.obj, bytearray)
    assert pool.get(500_000) is c


def test_cancelled_get_and_put_release_only_after_the_io(lmc_endpoint):
    """LMCache may cancel a get or put: the MemoryObj (get) and the staging buffer (put) go back
    only when the command is over (the target could still write into or read from them), and then
    nothing leaks. The daemon is stopped (SIGSTOP) so the commands are surely in flight."""
    be = H.arena()
    alloc = be.memory_allocator.pin_allocator
    c = H.connector(lmc_endpoint, be)
    proc = lmc_endpoint["daemon"].proc
    try:
        m = H.model()
        o = H.chunk(be, torch.bfloat16, 21, tokens=64)
        k = H.key(m, 0)
        H.run(c.put(k, o))
        H.run(c.get(k)).ref_count_down()          # learn the layout: the next get reads at once
        base, idle0 = alloc.live, len(c._staging._free)

        async def go():
            H.freeze(proc)
            try:
                g = asyncio.ensure_future(c.get(k))
                p = asyncio.ensure_future(c.put(H.key(m, 1), o))
                await asyncio.sleep(0.2)              # both submitted, no answer possible
                g.cancel()
                p.cancel()
                for t in (g, p):
                    with pytest.raises(asyncio.CancelledError):
                        await t
                await asyncio.sleep(0.2)
                held = (alloc.live, len(c._staging._free))
            finally:
                proc.send_signal(signal.SIGCONT)
            for _ in range(1000):                     # the commands finish; then the memory comes back
                if alloc.live == base and len(c._staging._free) == idle0:
                    break
                await asyncio.sleep(0.01)
            return held, (alloc.live, len(c._staging._free))
        held, after = H.run(go())
        assert held == (base + 1, idle0 - 1), held    # still lent to the commands in flight
        assert after == (base, idle0), after
        got = H.run(c.get(k))
        assert torch.equal(got.tensor, o.tensor)
    finally:
        proc.send_signal(signal.SIGCONT)
        c.close_sync()
