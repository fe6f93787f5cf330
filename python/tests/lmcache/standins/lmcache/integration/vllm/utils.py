# SPDX-License-Identifier: Apache-2.0
"""Mirrors get_size_bytes() of lmcache/integration/vllm/utils.py (LMCache PR #2220): the bytes of
all (shape, dtype) pairs together."""

from lmcache.v1.memory_management import element_size


def get_size_bytes(shapes, kv_dtypes):
    assert len(shapes) == len(kv_dtypes)
    total = 0
    for shape, dtype in zip(shapes, kv_dtypes):
        n = element_size(dtype)
        for d in shape:
            n *= d
        total += n
    return total
