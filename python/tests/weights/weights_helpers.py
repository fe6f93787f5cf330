# SPDX-License-Identifier: Apache-2.0
"""Test helpers: a small model in safetensors, a module with vLLM's load_weights() contract, and
the CLI run as a user runs it."""

import os
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from rados_nkv.weights.safetensors import save_file, read_header

ROOT = Path(__file__).resolve().parents[3]


def make_tensors(seed=1):
    """Two files' worth of tensors: every common dtype, an empty tensor, a scalar, odd sizes (so
    with 4096-byte chunks many tensors straddle a chunk boundary, some span several chunks)."""
    g = torch.Generator().manual_seed(seed)
    f1 = {
        "embed.weight": torch.randn(37, 29, generator=g).to(torch.bfloat16),     # 2146 B
        "layers.0.attn.qkv.weight": torch.randn(1001, generator=g).to(torch.float16),  # 2002 B
        "layers.0.attn.out.bias": torch.randn(7, 3, 5, generator=g),              # 420 B
        "layers.0.positions": torch.randint(-2 ** 62, 2 ** 62, (129,), generator=g),  # int64, 1032 B
        "layers.0.empty": torch.empty(0, 4),                                    # 0 B
        "layers.0.mask": torch.rand(13, generator=g) > 0.5,                     # bool, 13 B
        "layers.0.scale": torch.tensor(3.5),                                    # scalar f32
        "layers.1.mlp.weight": torch.randn(3, 3001, generator=g).to(torch.bfloat16),  # 18006 B: 5 chunks
        "layers.1.ids": torch.randint(0, 2 ** 31 - 1, (11,), generator=g, dtype=torch.int32),
        "layers.1.u8": torch.randint(0, 255, (4099,), generator=g, dtype=torch.uint8),
        "layers.1.f64": torch.randn(17, generator=g, dtype=torch.float64),
    }
    f2 = {
        "lm_head.weight": torch.randn(5, 1237, generator=g),                    # 24740 B
        "norm.weight": torch.randn(4097, generator=g).to(torch.float16),         # 8194 B
    }
    return [("model-00001-of-00002.safetensors", f1), ("model-00002-of-00002.safetensors", f2)]


def write_model(d, seed=1, align=None):
    """Write make_tensors() into directory @d; returns {name: tensor} of all of them."""
    os.makedirs(d, exist_ok=True)
    out = {}
    for fname, ts in make_tensors(seed):
        save_file(ts, os.path.join(d, fname), {"format": "pt", "seed": str(seed)}, align=align)
        out.update(ts)
    return out


def file_bytes_of(d):
    """{tensor name: its raw bytes as in the files of @d}."""
    out = {}
    for fname in sorted(os.listdir(d)):
        if not fname.endswith(".safetensors"):
            continue
        p = os.path.join(d, fname)
        h = read_header(p)
        raw = open(p, "rb").read()
        for t in h.tensors:
            out[t.name] = raw[h.data_start + t.begin:h.data_start + t.end]
    return out


def raw_bytes(t):
    t = t.contiguous()
    if t.numel() == 0:
        return b""
    return t.view(-1).view(torch.uint8).numpy().tobytes()


class Holder(nn.Module):
    """A module tree with one parameter (float dtypes) or buffer (others) per tensor name, shaped
    and typed like @tensors and zeroed, with the load_weights(weights) -> set of names contract
    vLLM models have."""

    def __init__(self, tensors):
        super().__init__()
        for name, t in tensors.items():
            mod = self
            *path, leaf = name.split(".")
            for p in path:
                if not hasattr(mod, p):
                    mod.add_module(p, nn.Module())
                mod = getattr(mod, p)
            z = torch.zeros(t.shape, dtype=t.dtype)
            if t.dtype.is_floating_point:
                mod.register_parameter(leaf, nn.Parameter(z, requires_grad=False))
            else:
                mod.register_buffer(leaf, z)
        self.seen = []

    def load_weights(self, weights):
        named = dict(self.named_parameters())
        named.update(dict(self.named_buffers()))
        loaded = set()
        for name, t in weights:
            self.seen.append((name, t.dtype, tuple(t.shape)))
            dst = named[name]
            assert dst.shape == t.shape and dst.dtype == t.dtype, (name, dst.shape, t.shape, dst.dtype, t.dtype)
            dst.data.copy_(t)
            loaded.add(name)
        return loaded

    def tensor(self, name):
        named = dict(self.named_parameters())
        named.update(dict(self.named_buffers()))
        return named[name].data


def cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_cli(*args, timeout=300, stdin=None):
    """Run nkv-weights (python -m rados_nkv.weights.cli) -> CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "rados_nkv.weights.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=cli_env(), stdin=stdin or subprocess.DEVNULL)
