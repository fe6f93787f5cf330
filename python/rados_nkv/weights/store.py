# SPDX-License-Identifier: Apache-2.0
"""Upload, verify, list and remove model revisions (manifest.py says how they are laid out).

Chunks move through memory from Client.alloc() (registered with the controller: no copy over shm),
double buffered: while one batch of chunks is stored (or read back) by Client.store_many() /
retrieve_many() on a worker thread, the other is filled from the files (or hashed). A chunk's value
is the long-name header followed by the payload, built in place in that memory, so the payload is
read from the file straight into the bytes that are sent (Client.put_named() would stage a copy).
"""

import concurrent.futures as cf
import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import weakref

from .. import longname
from ..errors import NkvError, BatchError
from .manifest import (Manifest, FileEntry, ManifestError, INDEX_NAME, manifest_name, chunk_name)
from .safetensors import read_header

__all__ = ["WeightsError", "NotFound", "AlreadyExists", "BadChunkSize", "upload", "verify", "get_manifest",
           "remove", "read_index", "default_chunk_size", "DEFAULT_CHUNK", "DEFAULT_INFLIGHT"]

log = logging.getLogger("rados_nkv.weights")

DEFAULT_CHUNK = 64 << 20      # chunk size unless the namespace's largest value is smaller
DEFAULT_INFLIGHT = 512 << 20  # memory for chunks in flight (both halves of the double buffer)
PAGE = 4096
MAX_BATCH = 1024              # chunks per store_many()/retrieve_many() call


class WeightsError(Exception):
    """A failed upload, verify, list or remove; the message says what and where."""


class NotFound(WeightsError):
    """No such model revision (no manifest)."""


class AlreadyExists(WeightsError):
    """upload without force over an existing revision."""


class BadChunkSize(WeightsError, ValueError):
    """A chunk size the namespace cannot store."""


def _round_up(n, a):
    return (n + a - 1) // a * a


def _fmt_err(e):
    if isinstance(e, BatchError):
        return str(e)
    if isinstance(e, NkvError):
        return str(e)
    return "%s: %s" % (type(e).__name__, e)


def default_chunk_size(client, model, rev, files):
    """The chunk size to use: 64 MiB, or the namespace's largest value minus the longest chunk
    name's header if that is smaller (rounded down to 4 KiB)."""
    limit = client.max_value - _max_header(model, rev, files)
    return min(DEFAULT_CHUNK, limit // PAGE * PAGE if limit >= PAGE else limit)


def _max_header(model, rev, files, chunks=10 ** 9):
    # The header size grows with the name's length only: the longest file name with a long index.
    longest = max(files, key=len) if files else "x"
    return longname.header_size(chunk_name(model, rev, longest, chunks))


def get_manifest(client, model, rev):
    """The Manifest of @model @rev, or None when there is none."""
    name = manifest_name(model, rev)
    raw = client.get_named(name)
    if raw is None:
        return None
    try:
        return Manifest.decode(raw, "manifest %s" % name)
    except ManifestError as e:
        raise WeightsError(str(e)) from None


def _progress(enabled, total, desc):
    """A tqdm byte counter on stderr when @enabled (None: when stderr is a terminal), else None."""
    if enabled is None:
        enabled = os.isatty(2)
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, leave=False)


class _Slots:
    """Two halves of @n slots of @slot bytes each in Client.alloc() memory (registered over shm)."""

    def __init__(self, client, n, slot):
        self.n, self.slot = n, slot
        self.halves = [client.alloc(n * slot), client.alloc(n * slot)]

    def view(self, half, i, nbytes):
        base = i * self.slot
        return self.halves[half][base:base + nbytes]


# Client.alloc() memory lives as long as its client, so the buffers of one upload or verify are
# kept for the next call on the same client instead of allocating more each time; a call takes a
# set out of the cache and puts it back, so calls running at once never share one.
_cache = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


@contextlib.contextmanager
def _slots_for(client, n, slot):
    with _cache_lock:
        free = _cache.setdefault(client, [])
        fit = [x for x in free if x.slot >= slot and x.n >= n]
        got = min(fit, key=lambda x: x.n * x.slot) if fit else None
        if got is not None:
            free.remove(got)
    if got is None:
        got = _Slots(client, n, slot)
    try:
        yield got
    finally:
        with _cache_lock:
            free = _cache.setdefault(client, [])
            free.append(got)
            if len(free) > 2:  # keep the two largest
                free.sort(key=lambda x: x.n * x.slot)
                del free[0]


def _batches(items, per):
    for i in range(0, len(items), per):
        yield items[i:i + per]


# ---- upload --------------------------------------------------------------------------------------

def _scan_dir(model_dir):
    if not os.path.isdir(model_dir):
        raise WeightsError("%s: not a directory" % model_dir)
    names = sorted(n for n in os.listdir(model_dir)
                   if n.endswith(".safetensors") and os.path.isfile(os.path.join(model_dir, n)))
    if not names:
        raise WeightsError("%s: no .safetensors file in this directory" % model_dir)
    return names


def upload(client, model_dir, model, rev, *, chunk_size=None, force=False, inflight=DEFAULT_INFLIGHT,
           progress=None):
    """Store every *.safetensors file of @model_dir as @model @rev: chunks, then the manifest (so a
    manifest is only ever visible for a complete upload), then the index entry. @force replaces an
    existing revision (its manifest is deleted first, its chunks no longer used at the end).
    Returns the Manifest. Raises AlreadyExists, BadChunkSize, WeightsError."""
    files = _scan_dir(model_dir)
    headers = {}
    for n in files:
        try:
            headers[n] = read_header(os.path.join(model_dir, n))
        except (OSError, ValueError) as e:
            raise WeightsError(str(e)) from None
    hmax = _max_header(model, rev, files)
    limit = client.max_value - hmax
    if chunk_size is None:
        chunk_size = default_chunk_size(client, model, rev, files)
    elif chunk_size > limit:
        raise BadChunkSize("chunk size %d is more than the namespace takes (largest value %d bytes, less "
                           "%d bytes of long-name header): at most %d" % (chunk_size, client.max_value, hmax,
                                                                           limit))
    if chunk_size <= 0:
        raise BadChunkSize("chunk size must be positive (the namespace's largest value is %d bytes)"
                           % client.max_value)

    mname = manifest_name(model, rev)
    old = get_manifest(client, model, rev)
    if old is not None and not force:
        raise AlreadyExists("%s %s is already uploaded (%d files, %d bytes, %s); --force replaces it"
                            % (model, rev, len(old.files), old.total_bytes, old.created))
    if old is not None:
        client.delete_named(mname)

    sizes = {n: os.path.getsize(os.path.join(model_dir, n)) for n in files}
    entries = {n: FileEntry(n, sizes[n], None, chunk_size, [], headers[n].header_len, headers[n].metadata,
                            headers[n].tensors) for n in files}
    todo = [(entries[n], i) for n in files for i in range(entries[n].chunks)]
    slot = _round_up(hmax + chunk_size, PAGE)
    per = max(1, min(len(todo), MAX_BATCH, inflight // (2 * slot)))
    hold = _slots_for(client, per, slot)
    slots = hold.__enter__()
    bar = _progress(progress, sum(sizes.values()), "upload %s %s" % (model, rev))
    fsha = {n: hashlib.sha256() for n in files}
    fds = {}
    t0 = time.monotonic()
    try:
        with cf.ThreadPoolExecutor(2, thread_name_prefix="nkv-weights") as pool:
            pending = None  # (future, batch, bytes) being stored
            for bi, batch in enumerate(_batches(todo, per)):
                half = bi % 2
                keys, vals, csha = [], [], []
                for j, (fe, idx) in enumerate(batch):
                    name = chunk_name(model, rev, fe.name, idx)
                    n = fe.chunk_len(idx)
                    hdr = longname.pack_header(name, n)
                    v = slots.view(half, j, len(hdr) + n)
                    v[:len(hdr)] = hdr
                    _read_exact(fds, model_dir, fe, idx, v[len(hdr):])
                    keys.append(longname.key_for(name))
                    vals.append(v)
                    # chunk digests on the other thread, the file digest (sequential) here
                    csha.append(pool.submit(_sha256, v[len(hdr):]))
                    fsha[fe.name].update(v[len(hdr):])
                for (fe, idx), f in zip(batch, csha):
                    fe.chunk_sha256.append(f.result())
                if pending is not None:
                    _finish_store(pending, bar)
                pending = (pool.submit(client.store_many, keys, vals), batch,
                           sum(fe.chunk_len(i) for fe, i in batch))
            if pending is not None:
                _finish_store(pending, bar)
    finally:  # (the pool's exit waited for any store in flight: the buffers are free again)
        hold.__exit__(None, None, None)
        for f in fds.values():
            f.close()
        if bar is not None:
            bar.close()
    for n in files:
        entries[n].sha256 = fsha[n].hexdigest()
    m = Manifest(model, rev, chunk_size, [entries[n] for n in files])
    raw = m.encode()
    if len(raw) + longname.header_size(mname) > client.max_value:
        raise WeightsError("the manifest (%d bytes) does not fit the namespace's largest value (%d bytes): "
                           "use a larger --chunk-size (fewer chunk digests)" % (len(raw), client.max_value))
    client.put_named(mname, raw)
    log.info("uploaded %s %s: %d files, %d bytes in %.2f s", model, rev, len(files), m.total_bytes,
             time.monotonic() - t0)
    if old is not None:
        now = {nm for _f, _i, nm in m.chunk_names()}
        stale = [longname.key_for(nm) for _f, _i, nm in old.chunk_names() if nm not in now]
        for b in _batches(stale, MAX_BATCH):
            client.delete_many(b)
    _index_update(client, m, None)
    return m


def _sha256(buf):
    return hashlib.sha256(buf).hexdigest()


def _read_exact(fds, model_dir, fe, idx, out):
    f = fds.get(fe.name)
    if f is None:
        for k in list(fds):  # chunks come in file order: keep one file open
            fds.pop(k).close()
        f = fds[fe.name] = open(os.path.join(model_dir, fe.name), "rb", buffering=0)
    off, n = idx * fe.chunk_size, len(out)
    f.seek(off)
    got = 0
    while got < n:
        r = f.readinto(out[got:])
        if not r:
            raise WeightsError("%s: file shrank while being uploaded (wanted %d bytes at %d)"
                               % (os.path.join(model_dir, fe.name), n, off))
        got += r


def _finish_store(pending, bar):
    fut, batch, nbytes = pending
    try:
        fut.result()
    except BatchError as e:
        first = ["%s chunk %d: %s" % (batch[i][0].name, batch[i][1], err.strerror) for i, err in e.errors[:3]]
        raise WeightsError("storing %d of %d chunks failed: %s" % (len(e.errors), len(batch), "; ".join(first))) \
            from None
    except NkvError as e:
        raise WeightsError("storing chunks: %s" % e) from None
    if bar is not None:
        bar.update(nbytes)


# ---- verify --------------------------------------------------------------------------------------

def verify(client, model, rev, *, model_dir=None, inflight=DEFAULT_INFLIGHT, progress=None):
    """Read every chunk of @model @rev back and check it: present, its own long-name header, the
    length the manifest says, its SHA-256, and each file's SHA-256. With @model_dir, also check the
    local files against the manifest. Returns (manifest, problems: list of strings; empty = good).
    Raises NotFound without a manifest."""
    m = get_manifest(client, model, rev)
    if m is None:
        raise NotFound("%s %s: no such upload (no manifest %s)" % (model, rev, manifest_name(model, rev)))
    problems = []
    todo = m.chunk_names()
    hmax = max([longname.header_size(nm) for _f, _i, nm in todo] or [0])
    slot = _round_up(hmax + m.chunk_size, PAGE)
    per = max(1, min(len(todo) or 1, MAX_BATCH, inflight // (2 * slot)))
    hold = _slots_for(client, per, slot)
    slots = hold.__enter__()
    fsha = {f.name: hashlib.sha256() for f in m.files}
    broken = set()  # files with a chunk that could not be hashed in sequence
    bar = _progress(progress, m.total_bytes, "verify %s %s" % (model, rev))

    def read(half, batch):
        keys = [longname.key_for(nm) for _f, _i, nm in batch]
        outs = [slots.view(half, j, longname.header_size(nm) + fe.chunk_len(i))
                for j, (fe, i, nm) in enumerate(batch)]
        try:
            return client.retrieve_many(keys, outs), None
        except BatchError as e:
            return None, e

    try:
        with cf.ThreadPoolExecutor(2, thread_name_prefix="nkv-weights") as pool:
            batches = list(_batches(todo, per))
            fut = pool.submit(read, 0, batches[0]) if batches else None
            for bi, batch in enumerate(batches):
                sizes, err = fut.result()
                if bi + 1 < len(batches):
                    fut = pool.submit(read, (bi + 1) % 2, batches[bi + 1])
                half = bi % 2
                failed = {i: e for i, e in (err.errors if err else [])}
                digests = []
                for j, (fe, idx, nm) in enumerate(batch):
                    h, n = longname.header_size(nm), fe.chunk_len(idx)
                    what = "%s chunk %d (%s)" % (fe.name, idx, nm)
                    if j in failed:
                        problems.append("%s: read failed: %s" % (what, failed[j].strerror))
                        broken.add(fe.name)
                        digests.append(None)
                        continue
                    size = sizes[j] if sizes else None
                    v = slots.view(half, j, h + n)
                    plen = longname.check_header(v[:h], nm) if size is not None and size >= h else None
                    if size is None:
                        problems.append("%s: missing" % what)
                    elif plen is None:
                        problems.append("%s: the object under its key is not this chunk (another name's "
                                        "value or not a long-name value)" % what)
                    elif size != h + n or plen != n:
                        problems.append("%s: holds %d payload bytes (header says %d), the manifest says %d"
                                        % (what, size - h, plen, n))
                    else:
                        digests.append((fe, idx, pool.submit(_sha256, v[h:])))
                        if fe.name not in broken:
                            fsha[fe.name].update(v[h:])
                        continue
                    broken.add(fe.name)
                    digests.append(None)
                for d in digests:
                    if d is None:
                        continue
                    fe, idx, f = d
                    got = f.result()
                    if got != fe.chunk_sha256[idx]:
                        problems.append("%s chunk %d (%s): SHA-256 %s, the manifest says %s"
                                        % (fe.name, idx, chunk_name(model, rev, fe.name, idx), got,
                                           fe.chunk_sha256[idx]))
                if bar is not None:
                    bar.update(sum(fe.chunk_len(i) for fe, i, _nm in batch))
    except NkvError as e:
        raise WeightsError("reading chunks: %s" % _fmt_err(e)) from None
    finally:
        hold.__exit__(None, None, None)
        if bar is not None:
            bar.close()
    for f in m.files:
        if f.name in broken:
            problems.append("%s: not hashed whole (a chunk is missing or unreadable)" % f.name)
        elif fsha[f.name].hexdigest() != f.sha256:
            problems.append("%s: SHA-256 of the stored chunks %s, the manifest says %s"
                            % (f.name, fsha[f.name].hexdigest(), f.sha256))
    if model_dir is not None:
        problems += _check_local(m, model_dir)
    return m, problems


def _check_local(m, model_dir):
    out = []
    try:
        local = set(_scan_dir(model_dir))
    except WeightsError as e:
        return [str(e)]
    for f in m.files:
        p = os.path.join(model_dir, f.name)
        if f.name not in local:
            out.append("%s: in the manifest, not in %s" % (f.name, model_dir))
            continue
        size = os.path.getsize(p)
        if size != f.size:
            out.append("%s: %d bytes locally, %d in the manifest" % (p, size, f.size))
            continue
        h = hashlib.sha256()
        with open(p, "rb", buffering=0) as fh:
            while True:
                b = fh.read(16 << 20)
                if not b:
                    break
                h.update(b)
        if h.hexdigest() != f.sha256:
            out.append("%s: local SHA-256 %s, the manifest says %s" % (p, h.hexdigest(), f.sha256))
    for n in sorted(local - {f.name for f in m.files}):
        out.append("%s: in %s, not in the manifest" % (n, model_dir))
    return out


# ---- remove and the index ------------------------------------------------------------------------

def remove(client, model, rev):
    """Delete @model @rev: the manifest first (loaders stop finding it), then every chunk, then its
    index entry. Returns the removed Manifest. Raises NotFound."""
    m = get_manifest(client, model, rev)
    if m is None:
        raise NotFound("%s %s: no such upload (no manifest %s)" % (model, rev, manifest_name(model, rev)))
    client.delete_named(manifest_name(model, rev))
    keys = [longname.key_for(nm) for _f, _i, nm in m.chunk_names()]
    for b in _batches(keys, MAX_BATCH):
        client.delete_many(b)
    _index_update(client, None, (model, rev))
    return m


def read_index(client):
    """The uploads listed in the index: [{"model", "rev", "files", "tensors", "bytes", "created"}]."""
    raw = client.get_named(INDEX_NAME)
    if raw is None:
        return []
    try:
        d = json.loads(raw.decode("utf-8"))
        ups = d["uploads"]
        if not isinstance(ups, list) or not all(isinstance(u, dict) and isinstance(u.get("model"), str)
                                                and isinstance(u.get("rev"), str) for u in ups):
            raise ValueError("bad uploads list")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise WeightsError("the index %s is damaged (%s): re-upload a model to rewrite it" % (INDEX_NAME, e)) \
            from None
    return ups


def _index_update(client, add, drop):
    """Read-modify-write of the index (last writer wins when two uploads race: `ls` then misses one;
    the manifests themselves are unaffected)."""
    try:
        ups = read_index(client)
    except WeightsError:
        ups = []
    key = (add.model, add.rev) if add is not None else drop
    ups = [u for u in ups if (u["model"], u["rev"]) != key]
    if add is not None:
        ups.append({"model": add.model, "rev": add.rev, "files": len(add.files), "tensors": add.tensor_count,
                    "bytes": add.total_bytes, "chunk_size": add.chunk_size, "created": add.created})
    ups.sort(key=lambda u: (u["model"], u["rev"]))
    client.put_named(INDEX_NAME, json.dumps({"format": "rados-nkv-weights-index", "uploads": ups}).encode())

