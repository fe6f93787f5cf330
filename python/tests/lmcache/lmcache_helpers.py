# SPDX-License-Identifier: Apache-2.0
"""Helpers of the LMCache integration tests (imported after conftest put the stand-ins first)."""

import asyncio
import os
import signal
import time
import uuid

import torch

from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.kv_layer_groups import KVLayerGroupInfo, KVLayerGroupsManager
from lmcache.v1.memory_management import MemoryFormat, MixedMemoryAllocator
from lmcache.v1.metadata import LMCacheMetadata
from lmcache.v1.storage_backend.connector import CreateConnector
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

LAYERS, TOKENS, HEADS, HEAD_SIZE = 4, 16, 2, 32      # a chunk: [2, 4, 16, 64] = 8192 elements


def model():
    """A model name of its own per test: no keys shared between tests or runs."""
    return "test/model-" + uuid.uuid4().hex[:10]


def key(model_name, i, dtype=torch.bfloat16, tags=None):
    configs = {"lmcache.tag." + k: v for k, v in (tags or {}).items()}
    return CacheEngineKey(model_name, 1, 0, 0x9E3779B97F4A7C15 * (i + 1) % (1 << 64), dtype, configs)


def chunk(backend, dtype, seed, tokens=TOKENS):
    """A KV_2LTD MemoryObj of random values from @backend."""
    shape = torch.Size([2, LAYERS, tokens, HEADS * HEAD_SIZE])
    obj = backend.allocate(shape, dtype, MemoryFormat.KV_2LTD)
    assert obj is not None, "the test arena is full"
    g = torch.Generator().manual_seed(seed)
    obj.tensor.copy_(torch.randn(shape, generator=g).to(dtype))
    return obj


def metadata(dtype=torch.bfloat16, groups=None, use_mla=False):
    """LMCache's engine metadata of a model of chunks of TOKENS tokens: one group [2, LAYERS,
    TOKENS, HEADS x HEAD_SIZE] of @dtype, or @groups: [(num_layers, hidden_dim_size, dtype), ...]
    (KV layer groups of their own shapes and dtypes, as MLA/DSA and hybrid models have)."""
    mgr = KVLayerGroupsManager([KVLayerGroupInfo(*g) for g in groups or []])
    return LMCacheMetadata("test/model", 1, 1, 0, 0, dtype, (LAYERS, 2, TOKENS, HEADS, HEAD_SIZE),
                           use_mla=use_mla, chunk_size=TOKENS, kv_layer_groups_manager=mgr)


def group_chunk(backend, meta, seed):
    """A MemoryObj of every KV layer group of @meta, of random values, from @backend."""
    fmt = MemoryFormat.KV_MLA_FMT if meta.use_mla else MemoryFormat.KV_2LTD
    obj = backend.allocate(meta.get_shapes(), meta.get_dtypes(), fmt)
    assert obj is not None, "the test arena is full"
    g = torch.Generator().manual_seed(seed)
    for i, (shape, dtype) in enumerate(zip(meta.get_shapes(), meta.get_dtypes())):
        obj.get_tensor(i).copy_(torch.randn(shape, generator=g).to(dtype))
    return obj


def config(endpoint, plugin="rados_nkv", class_name="RadosNkvConnector", extra=None, instance_keys=False):
    """LMCache's config for the plugin @plugin whose settings reach @endpoint."""
    ptype = plugin.split(".", 1)[0]
    prefix = "remote_storage_plugin.%s." % (plugin if instance_keys else ptype)
    ec = {
        "remote_storage_plugin.%s.module_path" % plugin: "rados_nkv.lmcache",
        "remote_storage_plugin.%s.class_name" % plugin: class_name,
        prefix + "target": endpoint["target"],
        prefix + "subnqn": endpoint["subnqn"],
        prefix + "queues": 2,
    }
    ec.update(extra or {})
    return LMCacheEngineConfig(remote_storage_plugins=[plugin], extra_config=ec)


def connector(endpoint, backend, plugin="rados_nkv", class_name="RadosNkvConnector", extra=None,
              instance_keys=False, wrapped=False):
    """A connector built the way LMCache's RemoteBackend builds a remote storage plugin's:
    CreateConnector("plugin://<plugin>", loop, local_cpu_backend, config, metadata, plugin_name),
    with the engine metadata of @backend. The RadosNkvConnector inside LMCache's
    InstrumentedRemoteConnector (that wrapper itself with @wrapped)."""
    cfg = config(endpoint, plugin, class_name, extra, instance_keys)
    c = CreateConnector("plugin://" + plugin, None, backend, cfg, backend.metadata, plugin_name=plugin)
    return c if wrapped else c.getWrappedConnector()


def arena(size=64 << 20, meta=None):
    """LMCache's CPU backend: an arena of @size bytes, with engine metadata @meta (default: one
    bfloat16 group, as metadata())."""
    return LocalCPUBackend(LMCacheEngineConfig(), meta if meta is not None else metadata(),
                           memory_allocator=MixedMemoryAllocator(size))


def run(coro):
    return asyncio.run(coro)


def freeze(proc, timeout=10.0):
    """SIGSTOP @proc and wait until every thread of it is stopped: kill() returns before they are,
    and until the thread that takes the signal runs, the others still serve commands."""
    proc.send_signal(signal.SIGSTOP)
    task = "/proc/%d/task" % proc.pid
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = []
        for tid in os.listdir(task):
            try:
                with open("%s/%s/stat" % (task, tid)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass                      # a thread that just ended
        if states and all(st in ("T", "t") for st in states):
            return
        time.sleep(0.001)
    raise AssertionError("pid %d not stopped within %.0f s of SIGSTOP" % (proc.pid, timeout))
