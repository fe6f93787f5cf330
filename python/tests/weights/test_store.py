# SPDX-License-Identifier: Apache-2.0
"""Upload, verify and load against a real rados-nkv (mem or rados backend) over NVMe/TCP and shm."""

import os

import pytest
import torch

from rados_nkv import longname
from rados_nkv.weights import (upload, verify, get_manifest, remove, read_index, iter_tensors, NotFound,
                               AlreadyExists, BadChunkSize, LoadError, chunk_name, manifest_name)

from weights_helpers import write_model, file_bytes_of, raw_bytes, Holder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    tensors = write_model(str(d))
    return str(d), tensors


def _check_all(got, tensors, fbytes):
    assert set(got) == set(tensors)
    for name, src in tensors.items():
        t = got[name]
        assert t.dtype == src.dtype and t.shape == src.shape, name
        assert torch.equal(t, src), name
        assert raw_bytes(t) == fbytes[name] == raw_bytes(src), name


@pytest.mark.parametrize("chunk", [4096, 3001, None])
def test_upload_verify_load(client, model_dir, model_name, chunk):
    d, tensors = model_dir
    m = upload(client, d, model_name, "main", chunk_size=chunk, progress=False)
    if chunk is None:
        assert m.chunk_size == min(64 << 20, (client.max_value - 4096) // 4096 * 4096) or \
            m.chunk_size <= client.max_value
    else:
        assert m.chunk_size == chunk
    assert [f.name for f in m.files] == sorted(os.listdir(d))
    for f in m.files:
        assert f.size == os.path.getsize(os.path.join(d, f.name))
        assert f.chunks == -(-f.size // m.chunk_size)
    # the manifest as stored is the one returned
    assert get_manifest(client, model_name, "main").to_json() == m.to_json()
    m2, problems = verify(client, model_name, "main", model_dir=d, progress=False)
    assert problems == []
    # every chunk's value is the long-name header + exactly the file's bytes at that place
    f = m.files[0]
    raw = open(os.path.join(d, f.name), "rb").read()
    for i in range(f.chunks):
        assert client.get_named(chunk_name(model_name, "main", f.name, i)) == raw[i * m.chunk_size:(i + 1) * m.chunk_size]
    got = dict(iter_tensors(client, m))
    _check_all(got, tensors, file_bytes_of(d))
    assert any(u["model"] == model_name and u["rev"] == "main" for u in read_index(client))
    remove(client, model_name, "main")
    assert get_manifest(client, model_name, "main") is None
    assert not client.exists_named(chunk_name(model_name, "main", f.name, 0))
    assert not any(u["model"] == model_name for u in read_index(client))
    with pytest.raises(NotFound):
        verify(client, model_name, "main")


@pytest.mark.parametrize("window, read_size, workers, prefetch", [
    (4096, 1000, 1, 0),        # many windows, reads split below chunk size, no read-ahead
    (10000, 777, 3, 2),        # read-ahead of two windows on three threads
    (1 << 30, 8 << 20, 4, 1),  # the defaults: one window
])
def test_load_into_module(client, model_dir, model_name, window, read_size, workers, prefetch, caplog):
    """The loader's load_weights contract: model.load_weights(iterator of (name, tensor))."""
    d, tensors = model_dir
    m = upload(client, d, model_name, "r1", chunk_size=4096, progress=False)
    model = Holder(tensors)
    with caplog.at_level("WARNING", logger="rados_nkv.weights"):
        loaded = model.load_weights(iter_tensors(client, m, window=window, read_size=read_size, workers=workers,
                                                 prefetch=prefetch, batch=5000))
    assert not caplog.records  # over shm every window registered (zero copy), no fallback
    assert loaded == set(tensors)
    fb = file_bytes_of(d)
    _check_all({n: model.tensor(n) for n in tensors}, tensors, fb)
    # order: file by file, in data order
    assert [n for n, _dt, _s in model.seen] == [t.name for f in m.files for t in f.tensors]
    remove(client, model_name, "r1")


def test_tensors_outlive_client(daemon, transport, model_dir, model_name):
    """Tensors handed out stay valid after the client closes (windows are the tensors' memory,
    unregistered before they are handed out)."""
    d, tensors = model_dir
    with daemon.connect(transport) as c:
        m = upload(c, d, model_name, "main", chunk_size=4096, progress=False)
        got = dict(iter_tensors(c, m, window=8192))
    for name, src in tensors.items():
        assert torch.equal(got[name], src)
    got["lm_head.weight"].add_(1)  # writable, own memory
    with daemon.connect(transport) as c:
        remove(c, model_name, "main")


def test_upload_twice_and_force(client, model_dir, model_name, tmp_path):
    d, tensors = model_dir
    m1 = upload(client, d, model_name, "main", chunk_size=4096, progress=False)
    with pytest.raises(AlreadyExists, match="--force"):
        upload(client, d, model_name, "main", progress=False)
    # a different model under the same name and revision, with a larger chunk size: fewer chunks
    d2 = str(tmp_path / "m2")
    t2 = write_model(d2, seed=2)
    m2 = upload(client, d2, model_name, "main", chunk_size=8192, force=True, progress=False)
    assert m2.chunk_size == 8192
    old = {n for _f, _i, n in m1.chunk_names()} - {n for _f, _i, n in m2.chunk_names()}
    assert old and not any(client.exists_named_many(sorted(old)))  # the stale chunks are gone
    _check_all(dict(iter_tensors(client, m2)), t2, file_bytes_of(d2))
    assert verify(client, model_name, "main", model_dir=d2, progress=False)[1] == []
    # against the first directory, every file differs
    probs = verify(client, model_name, "main", model_dir=d, progress=False)[1]
    assert len(probs) == 2 and all("local SHA-256" in p for p in probs)
    remove(client, model_name, "main")
    # the transfer buffers (Client.alloc memory, which lives as long as the client) are reused
    from rados_nkv.weights import store
    assert 1 <= len(store._cache[client]) <= 2


def test_chunk_size_limits(client, model_dir, model_name):
    d, _ = model_dir
    with pytest.raises(BadChunkSize, match="at most"):
        upload(client, d, model_name, "main", chunk_size=client.max_value, progress=False)
    assert get_manifest(client, model_name, "main") is None


def test_corruption_detected(client, model_dir, model_name):
    d, tensors = model_dir
    m = upload(client, d, model_name, "main", chunk_size=4096, progress=False)
    f = m.files[0]
    # 1. chunk 1 rewritten through the client with other bytes of the same length
    n1 = chunk_name(model_name, "main", f.name, 1)
    orig = client.get_named(n1)
    bad = bytearray(orig)
    bad[100] ^= 0xFF
    client.put_named(n1, bytes(bad))
    _m, probs = verify(client, model_name, "main", progress=False)
    assert any("%s chunk 1 " % f.name in p and "SHA-256" in p for p in probs), probs
    assert any(p.startswith(f.name + ": SHA-256 of the stored chunks") for p in probs), probs
    assert len(probs) == 2
    # 2. chunk 2 replaced by a plain value (no long-name header): a foreign object
    client.put_named(n1, orig)
    n2 = chunk_name(model_name, "main", f.name, 2)
    client.store(longname.key_for(n2), b"x" * 5000)
    probs = verify(client, model_name, "main", progress=False)[1]
    assert any("chunk 2" in p and "is not this chunk" in p for p in probs), probs
    with pytest.raises(LoadError, match="chunk 2 .* is not this chunk"):
        list(iter_tensors(client, m))
    # 3. chunk 0 deleted; chunk 2 truncated (right header, fewer bytes)
    client.put_named(n2, b"y" * 100)
    client.delete_named(chunk_name(model_name, "main", f.name, 0))
    probs = verify(client, model_name, "main", progress=False)[1]
    assert any("chunk 0" in p and "missing" in p for p in probs), probs
    assert any("chunk 2" in p and "holds 100 payload bytes" in p for p in probs), probs
    assert any("not hashed whole" in p for p in probs), probs
    with pytest.raises(LoadError, match="chunk 0 .* is missing"):
        list(iter_tensors(client, m))
    # the second file is intact: loading only its tensors works
    names = {t.name for t in m.files[1].tensors}
    got = dict(iter_tensors(client, m, names=names))
    assert set(got) == names and all(torch.equal(got[n], tensors[n]) for n in names)
    remove(client, model_name, "main")


def test_not_found_and_bad_dir(client, model_name, tmp_path):
    assert get_manifest(client, model_name, "nope") is None
    with pytest.raises(NotFound):
        remove(client, model_name, "nope")
    from rados_nkv.weights import WeightsError
    with pytest.raises(WeightsError, match="no .safetensors file"):
        upload(client, str(tmp_path), model_name, "main", progress=False)
    with pytest.raises(WeightsError, match="not a directory"):
        upload(client, str(tmp_path / "missing"), model_name, "main", progress=False)
    (tmp_path / "x.safetensors").write_bytes(b"\x08\0\0\0\0\0\0\0{\"a\":1} ")
    with pytest.raises(WeightsError, match="x.safetensors"):
        upload(client, str(tmp_path), model_name, "main", progress=False)
    assert not client.exists_named(manifest_name(model_name, "main"))


def _big_model(d, n=24, size=9000):
    """@n tensors of @size bytes (f32): two per 20,000-byte window: 12 windows."""
    from rados_nkv.weights.safetensors import save_file
    g = torch.Generator().manual_seed(5)
    ts = {"t%02d" % i: torch.randn(size // 4, generator=g) for i in range(n)}
    os.makedirs(d, exist_ok=True)
    save_file(ts, os.path.join(d, "model.safetensors"))
    return ts


def test_windows_recycled_when_dropped(client, model_name, tmp_path):
    """A consumer that copies each tensor and drops it (vLLM's pattern) gets its windows recycled:
    few mappings for many windows, over shm registered once reused; every tensor still exact."""
    d = str(tmp_path / "m")
    ts = _big_model(d)
    m = upload(client, d, model_name, "main", chunk_size=4096, progress=False)
    model = Holder(ts)
    stats = {}
    model.load_weights(iter_tensors(client, m, window=20000, read_size=3000, stats=stats))
    assert all(torch.equal(model.tensor(n), t) for n, t in ts.items())
    assert stats["windows"] == 12 and stats["slots"] <= 4 and stats["reused"] >= 8, stats
    assert stats["retired"] == 0, stats
    if client.transport == "shm":
        assert stats["registered"] == stats["slots"], stats  # each slot once, when made
    else:
        assert stats["registered"] == 0, stats
    stats = {}
    model = Holder(ts)
    model.load_weights(iter_tensors(client, m, window=20000, register="reuse", stats=stats))
    assert all(torch.equal(model.tensor(n), t) for n, t in ts.items())
    assert 1 <= stats["registered"] <= stats["slots"] < stats["windows"], stats  # on first reuse only
    for mode in ("always", "never"):
        stats = {}
        model = Holder(ts)
        model.load_weights(iter_tensors(client, m, window=20000, register=mode, stats=stats))
        assert all(torch.equal(model.tensor(n), t) for n, t in ts.items())
        assert (stats["registered"] == 0) == (mode == "never"), (mode, stats)  # (a no-op over TCP)
    remove(client, model_name, "main")


def test_windows_kept_by_consumer_never_overwritten(client, model_name, tmp_path):
    """A consumer keeping tensors, or only views of them, never sees them overwritten by later
    windows: memory still referenced is never reused."""
    d = str(tmp_path / "m")
    ts = _big_model(d)
    m = upload(client, d, model_name, "main", chunk_size=4096, progress=False)
    stats = {}
    views = {n: t[1:-1].view(torch.int32)[::3] for n, t in iter_tensors(client, m, window=20000, stats=stats)}
    for n, v in views.items():
        assert torch.equal(v, ts[n][1:-1].view(torch.int32)[::3]), n
    assert stats["reused"] == 0 and stats["retired"] >= 1, stats
    # every other tensor kept: their windows stay theirs, the others may be reused
    kept, stats = {}, {}
    for i, (n, t) in enumerate(iter_tensors(client, m, window=20000, stats=stats)):
        if i % 4 == 0:
            kept[n] = t
    assert len(kept) == 6 and all(torch.equal(t, ts[n]) for n, t in kept.items())
    remove(client, model_name, "main")
