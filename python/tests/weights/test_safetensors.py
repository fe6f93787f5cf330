# SPDX-License-Identifier: Apache-2.0
"""The safetensors reader/writer and the manifest parser (no daemon needed)."""

import json
import struct

import pytest
import torch

from rados_nkv.weights.safetensors import (read_header, save_file, SafetensorsError, torch_dtype, dtype_name,
                                           DTYPES)
from rados_nkv.weights.manifest import (Manifest, ManifestError, chunk_name, manifest_name, FileEntry)
from rados_nkv.weights.sizes import parse_size

from weights_helpers import make_tensors, raw_bytes


def test_roundtrip_every_dtype(tmp_path):
    tensors = {}
    for fname, ts in make_tensors():
        tensors.update(ts)
    p = tmp_path / "m.safetensors"
    hdr = save_file(tensors, str(p), {"format": "pt"})
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and n == hdr.header_len
    j = json.loads(raw[8:8 + n])
    assert j["__metadata__"] == {"format": "pt"}
    h = read_header(str(p))
    assert h.data_start == 8 + n
    assert h.metadata == {"format": "pt"}
    assert [t.name for t in h.tensors] == list(tensors)  # packed in insertion order
    end = 0
    for t in h.tensors:
        src = tensors[t.name]
        assert t.begin == end  # packed: no gaps
        end = t.end
        assert t.shape == tuple(src.shape)
        assert torch_dtype(t.dtype) == src.dtype
        assert raw[h.data_start + t.begin:h.data_start + t.end] == raw_bytes(src)
    assert len(raw) == h.data_start + end


def test_aligned_writer(tmp_path):
    p = tmp_path / "a.safetensors"
    save_file({"x": torch.ones(3, dtype=torch.uint8), "y": torch.ones(2, dtype=torch.float64)}, str(p), align=8)
    h = read_header(str(p))
    assert [(t.name, t.begin, t.end) for t in h.tensors] == [("x", 0, 3), ("y", 8, 24)]


def test_dtype_names():
    assert dtype_name(torch.bfloat16) == "BF16" and dtype_name(torch.int64) == "I64"
    assert DTYPES["BF16"][0] == 2 and DTYPES["I64"][0] == 8
    with pytest.raises(ValueError, match="U16"):
        torch_dtype("U16")  # no torch 1.13 equivalent


def _write(p, header, data=b"", n=None):
    raw = json.dumps(header).encode() if isinstance(header, dict) else header
    p.write_bytes(struct.pack("<Q", len(raw) if n is None else n) + raw + data)
    return str(p)


@pytest.mark.parametrize("header, data, n, msg", [
    (b"", b"", None, "too short|not JSON|does not start"),
    (b"not json", b"", None, "does not start with"),
    (b"{bad json", b"", None, "not JSON"),
    ([1, 2], b"", None, "not JSON|does not start"),
    ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, 1 << 40, "is over"),
    ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, 500, "runs past the end of the file"),
    ({"t": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "unknown dtype 'Q7'"),
    ({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "hold 8 bytes, but F32 \\[3\\] needs 12"),
    ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, None, "run past the end of the data"),
    ({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "non-negative"),
    ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, None, "BEGIN <= END"),
    ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}}, b"\0" * 8, None, "unknown field"),
    ({"t": [1]}, b"", None, "not an object"),
    ({"__metadata__": {"a": 1}}, b"", None, "__metadata__"),
])
def test_bad_files(tmp_path, header, data, n, msg):
    if isinstance(header, list):
        header = json.dumps(header).encode()
    p = _write(tmp_path / "bad.safetensors", header, data, n)
    if header == b"":
        (tmp_path / "bad.safetensors").write_bytes(b"\1\0\0")
    with pytest.raises(SafetensorsError, match=msg) as ei:
        read_header(p)
    assert "bad.safetensors" in str(ei.value)  # the message names the file


def test_names_are_unambiguous():
    assert chunk_name("org/name", "main", "f.safetensors", 3) == "weights/org%2Fname/main/f.safetensors/3"
    assert manifest_name("org", "name/main") == "weights/org/name%2Fmain/manifest"
    assert manifest_name("org/name", "main") != manifest_name("org", "name/main")
    with pytest.raises(ValueError):
        manifest_name("", "main")


def _manifest():
    from rados_nkv.weights.safetensors import TensorInfo
    f = FileEntry("a.safetensors", 8 + 8 + 12, "0" * 64, 10, ["1" * 64] * 3, 8, None,
                  [TensorInfo("t", "F32", [3], 0, 12)])
    return Manifest("m", "r", 10, [f])


def test_manifest_roundtrip():
    m = _manifest()
    m2 = Manifest.decode(m.encode())
    assert m2.to_json() == m.to_json()
    assert [n for _f, _i, n in m2.chunk_names()] == ["weights/m/r/a.safetensors/%d" % i for i in range(3)]
    assert [m2.files[0].chunk_len(i) for i in range(3)] == [10, 10, 8]


@pytest.mark.parametrize("edit, msg", [
    (lambda d: d.update(format="x"), "not a rados-nkv-weights manifest"),
    (lambda d: d.update(version=9), "version 9"),
    (lambda d: d.update(chunk_size=0), "chunk_size"),
    (lambda d: d["files"][0].update(chunks=2), "3 chunks|2 chunks"),
    (lambda d: d["files"][0].update(sha256="xyz"), "sha256"),
    (lambda d: d["files"][0].update(chunk_sha256=[]), "chunk_sha256"),
    (lambda d: d["files"][0]["tensors"][0].update(shape=[4]), "needs 16"),
    (lambda d: d["files"][0].update(name="a/b"), "bad or repeated file name"),
])
def test_manifest_rejects(edit, msg):
    d = _manifest().to_json()
    edit(d)
    with pytest.raises(ManifestError, match=msg):
        Manifest.decode(json.dumps(d).encode())
    with pytest.raises(ManifestError, match="not JSON"):
        Manifest.decode(b"{")


def test_sizes():
    assert parse_size("4096") == 4096 and parse_size("4k") == 4096 and parse_size("64M") == 64 << 20
    assert parse_size("1GiB") == 1 << 30 and parse_size(7) == 7
    for bad in ("", "x", "1.5G", "-3", None):
        with pytest.raises(ValueError):
            parse_size(bad)
