# SPDX-License-Identifier: Apache-2.0
"""The block hash the LMCache connector gives each chunk's Store (rados_nkv.lmcache.connector): the
key's chunk_hash, the number LMCache's own KV events name the chunk by, so that the gateway's llm-d
events (BlockStored / BlockRemoved) name the chunk the same way. An int is masked to 64 bits as llm-d
masks it (LMCache's builtin hash may be negative); bytes pass as they are (the client takes their
last 8 bytes); a key without one (a plain string name) gives none."""

import torch

from lmcache.utils import CacheEngineKey

from rados_nkv.lmcache import connector


def test_chunk_hash_is_the_block_hash():
    key = CacheEngineKey("m", 1, 0, 0x9E3779B97F4A7C15, torch.bfloat16, {})
    assert connector._block_hash(key) == 0x9E3779B97F4A7C15
    key = CacheEngineKey("m", 1, 0, -2, torch.bfloat16, {})
    assert connector._block_hash(key) == (1 << 64) - 2
    key = CacheEngineKey("m", 1, 0, bytes(range(32)), torch.bfloat16, {})
    assert connector._block_hash(key) == bytes(range(32))


def test_no_chunk_hash_no_block_hash():
    assert connector._block_hash("model@1@0@abc@bfloat16") is None
    key = CacheEngineKey("m", 1, 0, b"", torch.bfloat16, {})
    assert connector._block_hash(key) is None
