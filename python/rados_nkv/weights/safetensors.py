# SPDX-License-Identifier: Apache-2.0
"""The safetensors file format, read and written here (the `safetensors` package is not needed).

A file is:

    bytes 0-7      N, the header length (unsigned 64-bit little endian)
    bytes 8..8+N   a JSON object: {TENSOR_NAME: {"dtype": "BF16", "shape": [2, 3],
                   "data_offsets": [BEGIN, END]}, ..., "__metadata__": {STR: STR}} (optional),
                   padded with spaces (the writer here pads to a multiple of 8)
    bytes 8+N..    the data: each tensor's bytes, row-major little endian, at [BEGIN, END)
                   relative to the start of the data

Parsing checks everything the loader relies on (sizes, offsets inside the file, dtypes known,
END - BEGIN = product(shape) * item size), so a bad file fails with a message naming the file and
the tensor instead of a wrong tensor later. torch is imported only by the functions that need it.
"""

import json
import math
import os
import struct

__all__ = ["DTYPES", "TensorInfo", "Header", "SafetensorsError", "parse_header", "read_header",
           "save_file", "torch_dtype", "dtype_name", "MAX_HEADER"]

# dtype name -> (item size in bytes, torch attribute or None when torch 1.13 has no such type)
DTYPES = {
    "BOOL": (1, "bool"),
    "U8": (1, "uint8"),
    "I8": (1, "int8"),
    "I16": (2, "int16"),
    "U16": (2, None),
    "F16": (2, "float16"),
    "BF16": (2, "bfloat16"),
    "I32": (4, "int32"),
    "U32": (4, None),
    "F32": (4, "float32"),
    "F64": (8, "float64"),
    "I64": (8, "int64"),
    "U64": (8, None),
    "C64": (8, "complex64"),
    "F8_E4M3": (1, "float8_e4m3fn"),
    "F8_E5M2": (1, "float8_e5m2"),
}

# A header larger than this is refused: real checkpoints have headers of a few MB at most, and the
# whole header is read into memory.
MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """A file that is not valid safetensors (the message names the file and what is wrong)."""


class TensorInfo:
    """One tensor of a file: name, dtype (safetensors name), shape, and [begin, end) relative to
    the data start."""

    __slots__ = ("name", "dtype", "shape", "begin", "end")

    def __init__(self, name, dtype, shape, begin, end):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self.begin = begin
        self.end = end

    @property
    def nbytes(self):
        return self.end - self.begin

    def to_json(self):
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape),
                "data_offsets": [self.begin, self.end]}

    def __repr__(self):
        return "TensorInfo(%r, %s, %s, [%d, %d))" % (self.name, self.dtype, list(self.shape), self.begin,
                                                      self.end)


class Header:
    """A parsed header: header_len (N), data_start (8 + N), tensors (in data order), metadata."""

    __slots__ = ("header_len", "data_start", "tensors", "metadata")

    def __init__(self, header_len, tensors, metadata):
        self.header_len = header_len
        self.data_start = 8 + header_len
        self.tensors = tensors
        self.metadata = metadata


def _fail(where, msg):
    raise SafetensorsError("%s: %s" % (where, msg))


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def parse_header(raw, data_len, where="safetensors header"):
    """Parse the JSON header @raw (bytes, without the 8-byte length) of a file whose data section
    holds @data_len bytes. Returns (tensors sorted by offset, metadata dict or None)."""
    try:
        obj = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        _fail(where, "the header is not JSON (%s)" % e)
    if not isinstance(obj, dict):
        _fail(where, "the header is JSON but not an object")
    meta = obj.pop("__metadata__", None)
    if meta is not None:
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in meta.items()):
            _fail(where, "__metadata__ must map strings to strings")
    tensors = []
    for name, d in obj.items():
        if not isinstance(d, dict):
            _fail(where, "tensor %r: its entry is not an object" % name)
        dt, shape, offs = d.get("dtype"), d.get("shape"), d.get("data_offsets")
        if dt not in DTYPES:
            _fail(where, "tensor %r: unknown dtype %r (known: %s)" % (name, dt, ", ".join(sorted(DTYPES))))
        if not isinstance(shape, list) or not all(_int(x) and x >= 0 for x in shape):
            _fail(where, "tensor %r: shape must be a list of non-negative integers, got %r" % (name, shape))
        if (not isinstance(offs, list) or len(offs) != 2 or not all(_int(x) for x in offs)
                or not 0 <= offs[0] <= offs[1]):
            _fail(where, "tensor %r: data_offsets must be [BEGIN, END] with 0 <= BEGIN <= END, got %r"
                  % (name, offs))
        if offs[1] > data_len:
            _fail(where, "tensor %r: data_offsets %r run past the end of the data (%d bytes)"
                  % (name, offs, data_len))
        want = math.prod(shape) * DTYPES[dt][0]
        if offs[1] - offs[0] != want:
            _fail(where, "tensor %r: data_offsets %r hold %d bytes, but %s %s needs %d"
                  % (name, offs, offs[1] - offs[0], dt, shape, want))
        extra = set(d) - {"dtype", "shape", "data_offsets"}
        if extra:
            _fail(where, "tensor %r: unknown field(s) %s" % (name, ", ".join(sorted(extra))))
        tensors.append(TensorInfo(name, dt, shape, offs[0], offs[1]))
    tensors.sort(key=lambda t: (t.begin, t.end, t.name))
    return tensors, meta


def read_header(path):
    """Read and check the header of the safetensors file at @path. Returns a Header."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            _fail(path, "%d bytes: too short for a safetensors file (8-byte header length first)" % size)
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            _fail(path, "header length %d is over %d bytes: not a safetensors file?" % (n, MAX_HEADER))
        if 8 + n > size:
            _fail(path, "header length %d runs past the end of the file (%d bytes)" % (n, size))
        raw = f.read(n)
    if not raw.lstrip()[:1] == b"{":
        _fail(path, "the header does not start with '{': not a safetensors file")
    tensors, meta = parse_header(raw, size - 8 - n, path)
    return Header(n, tensors, meta)


def torch_dtype(name):
    """The torch dtype for safetensors dtype @name; ValueError when this torch has none."""
    import torch
    if name not in DTYPES:
        raise ValueError("unknown safetensors dtype %r" % (name,))
    attr = DTYPES[name][1]
    dt = getattr(torch, attr, None) if attr else None
    if dt is None:
        raise ValueError("safetensors dtype %s has no torch %s equivalent" % (name, torch.__version__))
    return dt


def dtype_name(dtype):
    """The safetensors name of torch dtype @dtype."""
    for name, (_size, attr) in DTYPES.items():
        if attr and str(dtype) == "torch." + attr:
            return name
    raise ValueError("torch dtype %s has no safetensors name" % dtype)


def _tensor_bytes(t):
    """A tensor's bytes (row-major, native = little endian here) as a memoryview, no copy."""
    import torch
    t = t.detach().cpu().contiguous()
    if t.numel() == 0:
        return memoryview(b"")
    return memoryview(t.view(-1).view(torch.uint8).numpy())


def save_file(tensors, path, metadata=None, align=None):
    """Write @tensors (a dict name -> CPU torch tensor, written in its order) to @path as
    safetensors. @align: start each tensor's data at a multiple of this many bytes (None: packed,
    no gaps). Returns the Header written."""
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("metadata must map strings to strings")
    hdr, infos, off = {}, [], 0
    for name, t in tensors.items():
        if name == "__metadata__":
            raise ValueError("a tensor cannot be named __metadata__")
        if align and off % align:
            off += align - off % align
        n = t.numel() * t.element_size()
        info = TensorInfo(name, dtype_name(t.dtype), list(t.shape), off, off + n)
        hdr[name] = {"dtype": info.dtype, "shape": list(info.shape), "data_offsets": [info.begin, info.end]}
        infos.append((info, t))
        off += n
    if metadata is not None:
        hdr["__metadata__"] = dict(metadata)
    raw = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        pos = 0
        for info, t in infos:
            if info.begin > pos:
                f.write(b"\0" * (info.begin - pos))
            f.write(_tensor_bytes(t))
            pos = info.end
    os.replace(tmp, path)
    return Header(len(raw), [i for i, _ in infos], metadata)
