# SPDX-License-Identifier: Apache-2.0
"""LMCache's value framing: the RemoteMetadata its connectors put before a chunk's bytes
(lmcache/v1/protocol.py). Native little-endian int32: payload length, memory format, then for
each KV layer group its dtype code and shape[0..3]: 8 + 20 x groups bytes. A model with one group
(most models) has 28 bytes; MLA/DSA and hybrid models have several groups of their own shapes and
dtypes. Shapes of fewer than 4 dimensions are padded with zeros, and trailing zeros are dropped
when read, as LMCache does.

Written here so the connector reads and writes the same bytes as LMCache's own connectors without
importing LMCache's protocol module (whose format is a process-wide global set from the engine's
group count), and so bad bytes are a miss rather than an exception deep inside LMCache."""

import struct

HEAD_SIZE = 8            # length, memory format
GROUP_SIZE = 20          # dtype code, shape[0..3]
MAX_GROUPS = 64          # far above any model's; bounds what a value's bytes can ask for
META_SIZE = HEAD_SIZE + GROUP_SIZE   # one group: the 28 bytes of LMCache before PR #2315
_HEAD = struct.Struct("<2i")
_GROUP = struct.Struct("<5i")

# dtype codes (protocol.py: 0 none, 1 half, 2 float16, 3 bfloat16, 4 float32, 5 float64, 6 uint8,
# 7 fp8 e4m3, 8 fp8 e5m2). torch.half is torch.float16: LMCache writes 2 for it, reads 1 and 2.
_CODE_NAMES = {1: "float16", 2: "float16", 3: "bfloat16", 4: "float32", 5: "float64", 6: "uint8",
               7: "float8_e4m3fn", 8: "float8_e5m2"}
_NAME_CODES = {"float16": 2, "bfloat16": 3, "float32": 4, "float64": 5, "uint8": 6,
               "float8_e4m3fn": 7, "float8_e5m2": 8}


def meta_size(groups):
    """Bytes of the metadata of a chunk of @groups KV layer groups."""
    if not 1 <= groups <= MAX_GROUPS:
        raise ValueError("a chunk has 1..%d KV layer groups, not %d" % (MAX_GROUPS, groups))
    return HEAD_SIZE + GROUP_SIZE * groups


def groups_of(nbytes):
    """The group count of @nbytes of metadata (LMCache's remote_metadata_bytes), or None when no
    count gives that size."""
    if nbytes is None or nbytes < META_SIZE or (nbytes - HEAD_SIZE) % GROUP_SIZE:
        return None
    n = (nbytes - HEAD_SIZE) // GROUP_SIZE
    return n if n <= MAX_GROUPS else None


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


def _dims(shape):
    dims = [int(d) for d in shape]
    if not 1 <= len(dims) <= 4:
        raise ValueError("LMCache's RemoteMetadata holds 1 to 4 dimensions, the object has shape %s"
                         % (dims,))
    return dims + [0] * (4 - len(dims))


def pack_into(buf, offset, length, fmt_value, dtypes, shapes):
    """Write the metadata of a chunk of len(@shapes) groups at buf[offset:offset + meta_size()].
    ValueError for a dtype without a code, a shape of more than 4 dimensions, or dtypes and shapes
    of different counts."""
    if len(dtypes) != len(shapes):
        raise ValueError("%d dtypes for %d shapes" % (len(dtypes), len(shapes)))
    groups = [(dtype_code(dt), _dims(s)) for dt, s in zip(dtypes, shapes)]
    meta_size(len(groups))
    _HEAD.pack_into(buf, offset, int(length), int(fmt_value))
    for i, (code, dims) in enumerate(groups):
        _GROUP.pack_into(buf, offset + HEAD_SIZE + GROUP_SIZE * i, code, *dims)


def unpack(buf, offset, groups):
    """(length, fmt value, [dtype per group], [shape tuple per group]) from the metadata of a chunk
    of @groups groups; ValueError when the bytes make no sense (a negative field, an unknown dtype
    code)."""
    meta_size(groups)
    length, fmt = _HEAD.unpack_from(buf, offset)
    if length < 0 or fmt < 0:
        raise ValueError("metadata with a negative field")
    dtypes, shapes = [], []
    for i in range(groups):
        code, *dims = _GROUP.unpack_from(buf, offset + HEAD_SIZE + GROUP_SIZE * i)
        if min(dims) < 0:
            raise ValueError("metadata with a negative dimension")
        while dims and dims[-1] == 0:
            dims.pop()
        dtypes.append(code_dtype(code))
        shapes.append(tuple(dims))
    return length, fmt, dtypes, shapes
