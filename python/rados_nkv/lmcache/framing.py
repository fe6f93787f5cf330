"""LMCache's value framing: the 28-byte RemoteMetadata its simple connectors put before a chunk's
bytes (lmcache/v1/protocol.py): seven little-endian int32 = payload length, memory format, dtype
code, shape[0..3]. Written here so the connector reads and writes the same bytes as LMCache's
own connectors without importing LMCache's protocol module, and so bad bytes are a miss rather
than an exception deep inside LMCache."""

import struct

META_SIZE = 28
_META = struct.Struct("<7i")

# dtype codes (protocol.py: 0 none, 1 half, 2 float16, 3 bfloat16, 4 float32, 5 float64, 6 uint8,
# 7 fp8 e4m3, 8 fp8 e5m2). torch.half is torch.float16: LMCache writes 2 for it, reads 1 and 2.
_CODE_NAMES = {1: "float16", 2: "float16", 3: "bfloat16", 4: "float32", 5: "float64", 6: "uint8",
               7: "float8_e4m3fn", 8: "float8_e5m2"}
_NAME_CODES = {"float16": 2, "bfloat16": 3, "float32": 4, "float64": 5, "uint8": 6,
               "float8_e4m3fn": 7, "float8_e5m2": 8}


def dtype_code(dtype):
    """The code of a torch dtype (None: 0). ValueError for a dtype LMCache's framing lacks."""
    if dtype is None:
        return 0
    name = str(dtype).replace("torch.", "")
    try:
        return _NAME_CODES[name]
    except KeyError:
        raise ValueError("dtype %s has no code in LMCache's RemoteMetadata" % dtype) from None


def code_dtype(code):
    """The torch dtype of a code (0: None). ValueError for an unknown code, or one this torch
    lacks (fp8 before torch 2.1)."""
    if code == 0:
        return None
    import torch
    name = _CODE_NAMES.get(code)
    dt = getattr(torch, name, None) if name else None
    if dt is None:
        raise ValueError("dtype code %d is unknown to this torch" % code)
    return dt


def pack_into(buf, offset, length, fmt_value, dtype, shape):
    """Write the metadata at buf[offset:offset + 28]. @shape must have 4 dimensions (LMCache's
    framing: a bytes object is [n, 0, 0, 0])."""
    dims = [int(d) for d in shape]
    if len(dims) != 4:
        raise ValueError("LMCache's RemoteMetadata holds 4 dimensions, the object has shape %s" % (list(dims),))
    _META.pack_into(buf, offset, int(length), int(fmt_value), dtype_code(dtype), *dims)


def unpack(buf, offset=0):
    """(length, fmt value, dtype, shape tuple) from 28 bytes; ValueError when they make no sense
    (negative length or dimension, unknown dtype code)."""
    length, fmt, code, s0, s1, s2, s3 = _META.unpack_from(buf, offset)
    if length < 0 or min(s0, s1, s2, s3) < 0 or fmt < 0:
        raise ValueError("metadata with a negative field")
    return length, fmt, code_dtype(code), (s0, s1, s2, s3)
