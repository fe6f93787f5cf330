# SPDX-License-Identifier: Apache-2.0
"""Long names: keys of any length up to 4096 bytes over 16-byte NVMe KV keys (libnkv's nkv_lname_*).

The key is SHA-256(name)[0:16]; the value is a header carrying the whole name, then the payload:

    bytes 0-3  "NKVL"   4-5  header size H (LE, multiple of 8)   6  version 1   7  flags 0
    bytes 8-15 payload length (LE)   16-17 name length (LE)   18-23 zero   24.. the name, zero padded to H

H depends only on the name's length, so a reader that knows the name reads the payload at offset H
straight into its buffer beside a small read of the header, and checks the header afterwards: a
header of another name (a hash collision) or bytes that are no header (a foreign object) is a miss.
"""

import ctypes
import errno as _errno

from . import _ffi

__all__ = ["key_for", "header_size", "pack_header", "check_header", "name_bytes", "NAME_MAX"]

NAME_MAX = _ffi.LNAME_MAX


def name_bytes(name):
    """@name as bytes (str: UTF-8), checked: 1..4096 bytes."""
    if isinstance(name, str):
        b = name.encode("utf-8")
    elif isinstance(name, (bytes, bytearray, memoryview)):
        b = bytes(name)
    else:
        raise TypeError("name must be bytes or str, not %s" % type(name).__name__)
    if not b:
        raise ValueError("empty name: a long name is 1 to %d bytes" % NAME_MAX)
    if len(b) > NAME_MAX:
        raise ValueError("name of %d bytes: a long name is 1 to %d bytes" % (len(b), NAME_MAX))
    return b


def key_for(name):
    """The 16-byte key of @name (str or bytes): SHA-256(name)[0:16]."""
    b = name_bytes(name)
    key = (ctypes.c_uint8 * 16)()
    rc = _ffi.nkv_lname_key(b, len(b), key)
    if rc:
        raise OSError(-rc, "nkv_lname_key: " + _errno.errorcode.get(-rc, str(rc)))
    return bytes(key)


def header_size(name):
    """The header size H for @name (a multiple of 8; the payload starts at byte H of the value)."""
    b = name_bytes(name)
    return int(_ffi.nkv_lname_hdr_size(len(b)))


def _pack_into(b, payload_len, addr, size):
    rc = _ffi.nkv_lname_hdr_pack(b, len(b), payload_len, addr, size)
    if rc < 0:
        raise OSError(-rc, "nkv_lname_hdr_pack: " + _errno.errorcode.get(-rc, str(rc)))
    return rc


def pack_header(name, payload_len):
    """The header (H bytes) for @name and a payload of @payload_len bytes."""
    b = name_bytes(name)
    if not isinstance(payload_len, int) or payload_len < 0 or payload_len >= 1 << 64:
        raise ValueError("payload_len must be an int in 0..2**64-1, got %r" % (payload_len,))
    h = _ffi.nkv_lname_hdr_size(len(b))
    out = ctypes.create_string_buffer(h)
    _pack_into(b, payload_len, out, h)
    return out.raw


def _check(buf_addr, buf_len, b):
    """(H, payload_len) when the bytes at @buf_addr are @b's header, else None."""
    plen = ctypes.c_uint64()
    rc = _ffi.nkv_lname_hdr_check(buf_addr, buf_len, b, len(b), ctypes.byref(plen))
    if rc >= 0:
        return rc, plen.value
    if rc in (-_errno.ENOENT, -_errno.EPROTO):
        return None
    raise OSError(-rc, "nkv_lname_hdr_check: " + _errno.errorcode.get(-rc, str(rc)))


def check_header(buf, name):
    """The payload length when @buf (a value's first bytes, at least the header) holds @name's
    header; None when it holds another name's header (a hash collision) or no header at all."""
    from .buffers import buffer_info
    b = name_bytes(name)
    addr, n, keep = buffer_info(buf, False, "header buffer")
    r = _check(addr, n, b)
    del keep
    return None if r is None else r[1]
