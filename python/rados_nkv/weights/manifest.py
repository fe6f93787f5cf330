# SPDX-License-Identifier: Apache-2.0
"""Object names and the manifest of an uploaded model revision.

Every object is a long-name value (rados_nkv.longname: key SHA-256(name)[0:16], a header carrying the
name, then the payload):

    weights/<model>/<rev>/manifest          the manifest (JSON, below)
    weights/<model>/<rev>/<file>/<index>    chunk <index> (0-based) of <file>: its bytes
                                            [index * chunk_size, (index + 1) * chunk_size)
    weights/index                           the list of uploads, for `nkv-weights ls`

<model>, <rev> and <file> are percent-encoded (every byte but letters, digits and "_.-~"), so
model "org/name" and revision "main" never meet model "org" and revision "name/main".

The manifest (format "rados-nkv-weights", version 1):

    {"format": "rados-nkv-weights", "version": 1, "model": M, "rev": R, "chunk_size": C,
     "created": "2026-12-01T10:11:12Z", "total_bytes": B,
     "files": [{"name": F, "size": S, "sha256": HEX, "chunks": K, "chunk_sha256": [HEX, ...],
                "header_len": N, "data_start": 8 + N, "metadata": {...} or null,
                "tensors": [{"name", "dtype", "shape", "data_offsets": [BEGIN, END]}, ...]}]}

K = ceil(S / C); every chunk holds C bytes but the last (S - (K - 1) * C). Offsets in
data_offsets are relative to data_start, as in the file.
"""

import json
import math
import time
from urllib.parse import quote

from .safetensors import parse_header, SafetensorsError

__all__ = ["FORMAT", "VERSION", "INDEX_NAME", "ManifestError", "Manifest", "FileEntry", "component",
           "prefix", "manifest_name", "chunk_name", "chunk_len"]

FORMAT = "rados-nkv-weights"
VERSION = 1
INDEX_NAME = "weights/index"


class ManifestError(ValueError):
    """A manifest that does not parse or does not hold together."""


def component(s, what):
    """@s percent-encoded for use inside an object name; ValueError for an empty one."""
    if not isinstance(s, str) or not s:
        raise ValueError("%s must be a non-empty string" % what)
    return quote(s, safe="")


def prefix(model, rev):
    return "weights/%s/%s/" % (component(model, "model name"), component(rev, "revision"))


def manifest_name(model, rev):
    return prefix(model, rev) + "manifest"


def chunk_name(model, rev, file, index):
    return "%s%s/%d" % (prefix(model, rev), component(file, "file name"), index)


def chunk_len(size, chunk_size, index):
    """Bytes in chunk @index of a file of @size bytes."""
    return max(0, min(chunk_size, size - index * chunk_size))


class FileEntry:
    """One file of a manifest."""

    def __init__(self, name, size, sha256, chunk_size, chunk_sha256, header_len, metadata, tensors):
        self.name = name
        self.size = size
        self.sha256 = sha256
        self.chunk_size = chunk_size
        self.chunks = math.ceil(size / chunk_size) if size else 0
        self.chunk_sha256 = chunk_sha256
        self.header_len = header_len
        self.data_start = 8 + header_len
        self.metadata = metadata
        self.tensors = tensors

    def chunk_len(self, index):
        return chunk_len(self.size, self.chunk_size, index)

    def to_json(self):
        return {"name": self.name, "size": self.size, "sha256": self.sha256, "chunks": self.chunks,
                "chunk_sha256": self.chunk_sha256, "header_len": self.header_len,
                "data_start": self.data_start, "metadata": self.metadata,
                "tensors": [t.to_json() for t in self.tensors]}


def _hex64(v):
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)


class Manifest:
    """A model revision's manifest: model, rev, chunk_size, created, files (FileEntry list)."""

    def __init__(self, model, rev, chunk_size, files, created=None):
        self.model = model
        self.rev = rev
        self.chunk_size = chunk_size
        self.files = files
        self.created = created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    @property
    def total_bytes(self):
        return sum(f.size for f in self.files)

    @property
    def tensor_count(self):
        return sum(len(f.tensors) for f in self.files)

    def to_json(self):
        return {"format": FORMAT, "version": VERSION, "model": self.model, "rev": self.rev,
                "chunk_size": self.chunk_size, "created": self.created, "total_bytes": self.total_bytes,
                "files": [f.to_json() for f in self.files]}

    def encode(self):
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")

    def chunk_names(self):
        """[(file entry, index, object name)] of every chunk, in file order."""
        return [(f, i, chunk_name(self.model, self.rev, f.name, i)) for f in self.files for i in range(f.chunks)]

    @classmethod
    def decode(cls, raw, where="manifest"):
        """Parse and check a manifest (bytes). Raises ManifestError naming what is wrong."""
        def bad(msg):
            raise ManifestError("%s: %s" % (where, msg))
        try:
            d = json.loads(bytes(raw).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            bad("not JSON (%s)" % e)
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            bad("not a %s manifest" % FORMAT)
        if d.get("version") != VERSION:
            bad("version %r; this program reads version %d" % (d.get("version"), VERSION))
        model, rev, cs, files = d.get("model"), d.get("rev"), d.get("chunk_size"), d.get("files")
        if not isinstance(model, str) or not isinstance(rev, str) or not model or not rev:
            bad("model and rev must be non-empty strings")
        if not isinstance(cs, int) or isinstance(cs, bool) or cs <= 0:
            bad("chunk_size must be a positive integer, got %r" % (cs,))
        if not isinstance(files, list):
            bad("files must be a list")
        out, seen = [], set()
        for fd in files:
            if not isinstance(fd, dict):
                bad("a file entry is not an object")
            name, size, sha = fd.get("name"), fd.get("size"), fd.get("sha256")
            if not isinstance(name, str) or not name or "/" in name or name in seen:
                bad("bad or repeated file name %r" % (name,))
            seen.add(name)
            fw = "%s, file %s" % (where, name)
            if not isinstance(size, int) or isinstance(size, bool) or size < 8:
                bad("file %s: bad size %r" % (name, size))
            if not _hex64(sha):
                bad("file %s: sha256 must be 64 lowercase hex digits" % name)
            hl = fd.get("header_len")
            if not isinstance(hl, int) or isinstance(hl, bool) or hl < 0 or 8 + hl > size:
                bad("file %s: bad header_len %r" % (name, hl))
            chunks = math.ceil(size / cs)
            if fd.get("chunks") != chunks:
                bad("file %s: %r chunks, but %d bytes in chunks of %d make %d" % (name, fd.get("chunks"), size,
                                                                                   cs, chunks))
            csha = fd.get("chunk_sha256")
            if not isinstance(csha, list) or len(csha) != chunks or not all(_hex64(x) for x in csha):
                bad("file %s: chunk_sha256 must list %d SHA-256 digests" % (name, chunks))
            raw_t = fd.get("tensors")
            if not isinstance(raw_t, list):
                bad("file %s: tensors must be a list" % name)
            hdr = {}
            for t in raw_t:
                if not isinstance(t, dict) or not isinstance(t.get("name"), str) or t["name"] in hdr:
                    bad("file %s: bad or repeated tensor entry" % name)
                hdr[t["name"]] = {k: t.get(k) for k in ("dtype", "shape", "data_offsets")}
            try:
                tensors, _ = parse_header(json.dumps(hdr).encode(), size - 8 - hl, fw)
            except SafetensorsError as e:
                raise ManifestError(str(e)) from None
            meta = fd.get("metadata")
            if meta is not None and not isinstance(meta, dict):
                bad("file %s: metadata must be an object or null" % name)
            out.append(FileEntry(name, size, sha, cs, csha, hl, meta, tensors))
        created = d.get("created") if isinstance(d.get("created"), str) else None
        return cls(model, rev, cs, out, created)

