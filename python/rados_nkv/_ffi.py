# SPDX-License-Identifier: Apache-2.0
"""ctypes mirror of libnkv's public API (include/nkv/nkv.h): the library, its structures and the
prototypes of the functions the package calls.

Every structure here mirrors its C declaration field for field; sizes and offsets are checked at
import (and against the C compiler by tests/test_abi.py), because a wrong layout would not fail
loudly: the library would read garbage.

ctypes.CDLL releases the GIL for the duration of every foreign call, so a thread waiting in
nkv_engine_run() lets the other Python threads run.
"""

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

__all__ = [
    "Op", "ConnOpts", "EngineOpts", "DiscEntry", "lib", "library_path", "make_op", "op_array",
    "OP_STORE", "OP_RETRIEVE", "OP_DELETE", "OP_EXIST", "OP_LIST",
    "STORE_MUST_EXIST", "STORE_MUST_NOT_EXIST", "STORE_NO_COMPRESS", "OP_PIN", "OP_HASH", "TTL_DEFAULT",
    "TTL_NONE",
    "STATUS_HOST_PATH", "LNAME_MAX", "KEY_MAX",
]

# enum nkv_op_type
OP_STORE = 1
OP_RETRIEVE = 2
OP_DELETE = 3
OP_EXIST = 4
OP_LIST = 5

# Store options (nkv_spec.h)
STORE_MUST_EXIST = 0x01
STORE_MUST_NOT_EXIST = 0x02
STORE_NO_COMPRESS = 0x04

# Store TTL (F1h; nkv_spec.h, nkv.h): struct nkv_op .flags and .ttl_s
OP_PIN = 0x1               # NKV_OP_PIN: a pinned (explicit) entry
OP_HASH = 0x2              # NKV_OP_HASH: .offset is the engine's block hash (cache events)
TTL_DEFAULT = 0            # NKV_TTL_DEFAULT: the namespace's default TTL
TTL_NONE = 0xFFFFFFFF      # NKV_TTL_NONE: never expires

STATUS_HOST_PATH = 0x370  # SCT 3h SC 70h: the queue failed before the CQE arrived
LNAME_MAX = 4096          # NKV_LNAME_MAX: longest long name
KEY_MAX = 16              # an NVMe KV key is 1..16 bytes
U32_MAX = 0xFFFFFFFF


class Op(ctypes.Structure):
    """struct nkv_op: one command of an engine batch (72 bytes, fixed layout).

    The caller owns the op and the memory at .buf until its batch completes; .rc, .status,
    .value_size and .xfer are valid only then.
    """

    _fields_ = [
        ("type", ctypes.c_uint8),
        ("klen", ctypes.c_uint8),
        ("opts", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),      # STORE: OP_PIN, OP_HASH
        ("nsid", ctypes.c_uint32),
        ("key", ctypes.c_uint8 * 16),
        ("buf", ctypes.c_void_p),
        ("len", ctypes.c_uint32),
        ("ttl_s", ctypes.c_uint32),     # STORE: TTL seconds (TTL_*); nonzero or OP_PIN: Store TTL
        ("offset", ctypes.c_uint64),    # RETRIEVE: byte offset; STORE with OP_HASH: the block hash
        ("user", ctypes.c_uint64),
        ("rc", ctypes.c_int32),
        ("status", ctypes.c_uint16),
        ("retries", ctypes.c_uint16),   # a multipath engine: times the op was resent on another path
        ("value_size", ctypes.c_uint32),
        ("xfer", ctypes.c_uint32),
    ]

    @property
    def key_bytes(self):
        """The key as bytes (its first klen bytes)."""
        return bytes(self.key[: self.klen])

    def __repr__(self):
        return ("Op(type=%d, key=%s, nsid=%d, len=%d, offset=%d, rc=%d, status=%#x, value_size=%d, "
                "xfer=%d)" % (self.type, self.key_bytes.hex(), self.nsid, self.len, self.offset,
                              self.rc, self.status, self.value_size, self.xfer))


class ConnOpts(ctypes.Structure):
    """struct nkv_conn_opts."""

    _fields_ = [
        ("hostnqn", ctypes.c_char_p),
        ("hostid", ctypes.c_uint8 * 16),
        ("hdgst", ctypes.c_bool),
        ("ddgst", ctypes.c_bool),
        ("kato_ms", ctypes.c_uint32),
        ("no_keepalive", ctypes.c_bool),
        ("queue_depth", ctypes.c_uint16),
        ("timeout_ms", ctypes.c_int),
        ("shm_bounce_kib", ctypes.c_uint32),
        ("dhchap_secret", ctypes.c_char_p),
        ("dhchap_ctrl_secret", ctypes.c_char_p),
        ("tls", ctypes.c_bool),
        ("tls_key", ctypes.c_char_p),
        ("tls_identity", ctypes.c_uint8),
    ]


class EngineOpts(ctypes.Structure):
    """struct nkv_engine_opts."""

    _fields_ = [
        ("queues", ctypes.c_uint),
        ("depth", ctypes.c_uint16),
        ("timeout_ms", ctypes.c_int),
        ("max_ops", ctypes.c_uint),
        ("reconnect_min_ms", ctypes.c_int),
        ("reconnect_max_ms", ctypes.c_int),
        ("reconnect_wait_ms", ctypes.c_int),
    ]


class DiscEntry(ctypes.Structure):
    """struct nkv_disc_entry: one discovery log entry, decoded."""

    _fields_ = [
        ("trtype", ctypes.c_uint8),
        ("adrfam", ctypes.c_uint8),
        ("subtype", ctypes.c_uint8),
        ("treq", ctypes.c_uint8),
        ("portid", ctypes.c_uint16),
        ("cntlid", ctypes.c_uint16),
        ("asqsz", ctypes.c_uint16),
        ("trsvcid", ctypes.c_char * 33),
        ("traddr", ctypes.c_char * 257),
        ("subnqn", ctypes.c_char * 257),
    ]


# The C layouts (sizes and offsets as gcc lays them out on LP64; test_abi.py asks the compiler).
_LAYOUT = {
    Op: (72, {"flags": 3, "nsid": 4, "key": 8, "buf": 24, "len": 32, "ttl_s": 36, "offset": 40, "user": 48, "rc": 56,
              "status": 60, "value_size": 64, "xfer": 68}),
    ConnOpts: (88, {"hostid": 8, "hdgst": 24, "ddgst": 25, "kato_ms": 28, "no_keepalive": 32,
                    "queue_depth": 34, "timeout_ms": 36, "shm_bounce_kib": 40, "dhchap_secret": 48,
                    "dhchap_ctrl_secret": 56, "tls": 64, "tls_key": 72, "tls_identity": 80}),
    EngineOpts: (28, {"depth": 4, "timeout_ms": 8, "max_ops": 12, "reconnect_min_ms": 16,
                      "reconnect_max_ms": 20, "reconnect_wait_ms": 24}),
    DiscEntry: (558, {"portid": 4, "cntlid": 6, "asqsz": 8, "trsvcid": 10, "traddr": 43,
                      "subnqn": 300}),
}
for _t, (_size, _offs) in _LAYOUT.items():
    if ctypes.sizeof(_t) != _size:
        raise ImportError("rados_nkv: ctypes %s is %d bytes, C has %d" % (_t.__name__, ctypes.sizeof(_t), _size))
    for _f, _o in _offs.items():
        if getattr(_t, _f).offset != _o:
            raise ImportError("rados_nkv: %s.%s at %d, C has %d" % (_t.__name__, _f, getattr(_t, _f).offset, _o))

# Identify data the package reads (offsets in nkv_spec.h's pinned layouts).
ID_CTRLR_SUBNQN = 768      # struct nkv_id_ctrlr.subnqn, 256 bytes
ID_NS_KV_SIZE = 4096
ID_NS_KV_NSATTR = 43       # bit 0: write protected
ID_NS_KV_KVFC = 29         # bits 3:0: the KV format in use
ID_NS_KV_KVF = 72          # struct nkv_kv_format kvf[16], 16 bytes each; kvvml at +4

# Discovery log subtypes
DISC_SUBTYPE_REFERRAL = 1
DISC_SUBTYPE_NVME = 2
DISC_SUBTYPE_CURRENT = 3


# ---- the library -------------------------------------------------------------------------------

_SONAMES = ("libnkv.so.0.1", "libnkv.so.0", "libnkv.so")


def _repo_root():
    """The checkout this package sits in (python/rados_nkv/_ffi.py -> the repository), or None."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "include" / "nkv" / "nkv.h").is_file() else None


def _asan_loaded():
    """Is AddressSanitizer's runtime in this process (LD_PRELOAD)? A sanitized libnkv cannot load
    without it: the runtime aborts the whole process instead of failing dlopen()."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return b"libasan" in f.read()
    except OSError:
        return False


def _is_asan_build(path):
    try:
        with open(path, "rb") as f:
            return b"libasan.so" in f.read()
    except OSError:
        return False


def _candidates():
    """Library paths to try, in the documented order, each with a reason it was chosen."""
    env = os.environ.get("NKV_LIBRARY")
    if env:
        yield env, "$NKV_LIBRARY"
        return
    root = _repo_root()
    if root is not None:
        for preset in ("asan", "release", "debug"):
            for name in _SONAMES:
                p = root / "build" / preset / name
                if p.exists():
                    yield str(p), "build tree"
                    break
    found = ctypes.util.find_library("nkv")
    if found:
        yield found, "find_library"
    for name in _SONAMES:
        yield name, "installed"


def _load():
    tried = []
    asan = _asan_loaded()
    for path, why in _candidates():
        if why != "installed" and why != "find_library" and os.path.exists(path) and \
                _is_asan_build(path) and not asan:
            tried.append("%s (%s): built with AddressSanitizer; run with "
                         "LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0"
                         % (path, why))
            if why == "$NKV_LIBRARY":
                break
            continue
        try:
            return ctypes.CDLL(path, use_errno=False), path
        except OSError as e:
            tried.append("%s (%s): %s" % (path, why, e))
            if why == "$NKV_LIBRARY":
                break
    hint = ("NKV_LIBRARY names a library that does not load" if os.environ.get("NKV_LIBRARY") else
            "set NKV_LIBRARY=/path/to/libnkv.so.0.1 (e.g. build/release/libnkv.so.0.1 or "
            "PREFIX/lib/libnkv.so.0.1), or install libnkv where the loader finds it")
    raise ImportError("rados_nkv: libnkv not found: %s; tried:\n  %s" % (hint, "\n  ".join(tried)))


lib, library_path = _load()

_vp = ctypes.c_void_p
_u32 = ctypes.c_uint32
_cp = ctypes.c_char_p
_sz = ctypes.c_size_t


def _proto(name, restype, *argtypes):
    try:
        f = getattr(lib, name)
    except AttributeError:
        # An older libnkv: importing still works (and says which library it found); the call fails.
        def missing(*_args):
            raise OSError(38, "%s lacks %s(): a libnkv older than this package" % (library_path, name))
        missing.__name__ = name
        return missing
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


nkv_version = _proto("nkv_version", _cp)
nkv_status_string = _proto("nkv_status_string", _cp, ctypes.c_uint16)
nkv_status_errno = _proto("nkv_status_errno", ctypes.c_int, ctypes.c_uint16)
nkv_connect = _proto("nkv_connect", ctypes.c_int, _cp, _cp, _cp, ctypes.POINTER(ConnOpts), ctypes.POINTER(_vp))
nkv_connect_shm = _proto("nkv_connect_shm", ctypes.c_int, _cp, ctypes.POINTER(ConnOpts), ctypes.POINTER(_vp))
nkv_disconnect = _proto("nkv_disconnect", None, _vp)
nkv_discover = _proto("nkv_discover", ctypes.c_int, _cp, _cp, ctypes.POINTER(ConnOpts),
                      ctypes.POINTER(ctypes.POINTER(DiscEntry)), ctypes.POINTER(ctypes.c_uint))
nkv_discover_subsys = _proto("nkv_discover_subsys", ctypes.c_int, _cp, _cp, ctypes.POINTER(ConnOpts),
                             ctypes.POINTER(DiscEntry), ctypes.POINTER(ctypes.POINTER(DiscEntry)),
                             ctypes.POINTER(ctypes.c_uint))
nkv_ctrl_identify = _proto("nkv_ctrl_identify", _vp, _vp)
nkv_ns_identify = _proto("nkv_ns_identify", ctypes.c_int, _vp, _u32, _vp)
nkv_buf_alloc = _proto("nkv_buf_alloc", _vp, _vp, _sz)
nkv_buf_free = _proto("nkv_buf_free", None, _vp, _vp)
nkv_buf_register = _proto("nkv_buf_register", ctypes.c_int, _vp, _vp, _sz)
nkv_buf_unregister = _proto("nkv_buf_unregister", ctypes.c_int, _vp, _vp)
nkv_engine_create = _proto("nkv_engine_create", ctypes.c_int, _vp, ctypes.POINTER(EngineOpts), ctypes.POINTER(_vp))
nkv_engine_destroy = _proto("nkv_engine_destroy", None, _vp)
nkv_engine_submit = _proto("nkv_engine_submit", ctypes.c_int, _vp, _vp, ctypes.c_uint, ctypes.c_uint64)
nkv_engine_run = _proto("nkv_engine_run", ctypes.c_int, _vp, _vp, ctypes.c_uint)
nkv_engine_reap = _proto("nkv_engine_reap", ctypes.c_int, _vp, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint,
                         ctypes.c_int)
nkv_engine_eventfd = _proto("nkv_engine_eventfd", ctypes.c_int, _vp)
nkv_engine_queues = _proto("nkv_engine_queues", ctypes.c_uint, _vp)
nkv_engine_connect = _proto("nkv_engine_connect", ctypes.c_int, _cp, _cp, ctypes.POINTER(ConnOpts),
                            ctypes.POINTER(EngineOpts), ctypes.POINTER(_vp))
nkv_engine_paths = _proto("nkv_engine_paths", ctypes.c_uint, _vp)
nkv_engine_ctrl = _proto("nkv_engine_ctrl", _vp, _vp, ctypes.c_uint)
nkv_engine_path_active = _proto("nkv_engine_path_active", ctypes.c_int, _vp, _u32)
nkv_lname_key = _proto("nkv_lname_key", ctypes.c_int, _vp, _sz, _vp)
nkv_lname_hdr_size = _proto("nkv_lname_hdr_size", _u32, _sz)
nkv_lname_hdr_pack = _proto("nkv_lname_hdr_pack", ctypes.c_int, _vp, _sz, ctypes.c_uint64, _vp, _sz)
nkv_lname_hdr_check = _proto("nkv_lname_hdr_check", ctypes.c_int, _vp, _sz, _vp, _sz,
                             ctypes.POINTER(ctypes.c_uint64))

# libc free() for nkv_discover()'s and nkv_discover_subsys()'s arrays
_libc = ctypes.CDLL(None)
libc_free = _libc.free
libc_free.restype = None
libc_free.argtypes = [_vp]


# ---- op helpers (for integrations driving Client.engine directly) ------------------------------

def op_array(n):
    """A zeroed ctypes array of @n struct nkv_op (what Engine.submit() and Engine.run() take)."""
    if not isinstance(n, int) or n <= 0:
        raise ValueError("op_array: n must be a positive int, got %r" % (n,))
    return (Op * n)()


def make_op(op_type, key, buf=0, length=0, *, nsid=1, offset=0, opts=0, user=0, op=None, ttl=None, pin=False):
    """Fill an Op (a new one, or @op, e.g. an element of op_array()) and return it.

    @key: bytes or str (UTF-8), 1..16 bytes (LIST: 0..16). @buf: an address (int) or None, @length
    its size in bytes: the caller keeps that memory alive and unmoved until the batch completes
    (rados_nkv.buffers.address() gives the address of a buffer or torch tensor). STORE only: @ttl
    (seconds; TTL_DEFAULT 0: the namespace's default; TTL_NONE: never) and @pin make it a Store TTL
    (F1h) on a cache namespace, as Client.store().
    """
    if op_type not in (OP_STORE, OP_RETRIEVE, OP_DELETE, OP_EXIST, OP_LIST):
        raise ValueError("make_op: unknown op type %r" % (op_type,))
    k = _key_bytes(key, allow_empty=(op_type == OP_LIST))
    if buf is None:
        buf = 0
    if not isinstance(buf, int) or buf < 0:
        raise TypeError("make_op: buf must be an address (int), got %s" % type(buf).__name__)
    if not isinstance(length, int) or length < 0 or length > U32_MAX:
        raise ValueError("make_op: length must be an int in 0..2**32-1, got %r" % (length,))
    if length and not buf:
        raise ValueError("make_op: a nonzero length needs a buffer")
    if not isinstance(offset, int) or offset < 0:
        raise ValueError("make_op: offset must be a non-negative int, got %r" % (offset,))
    ttl_s, flags = ttl_fields(ttl, pin)
    if (ttl is not None or pin) and op_type != OP_STORE:
        raise ValueError("make_op: ttl and pin are for OP_STORE")
    if op is None:
        op = Op()
    else:
        ctypes.memset(ctypes.addressof(op), 0, ctypes.sizeof(Op))
    op.type = op_type
    op.klen = len(k)
    op.opts = opts
    op.nsid = nsid
    ctypes.memmove(op.key, k, len(k))
    op.buf = buf or None
    op.len = length
    op.offset = offset
    op.user = user
    op.ttl_s = ttl_s
    op.flags = flags
    return op


def ttl_fields(ttl, pin):
    """(ttl_s, flags) of an op for Client.store()'s @ttl and @pin: (0, 0) for a plain Store.

    @ttl: None (no TTL asked for), an int of seconds 0..2**32-2 (0: the namespace's default) or
    TTL_NONE (never expires). @pin: a pinned entry (its TTL: @ttl, else the namespace's default)."""
    if not isinstance(pin, bool):
        raise TypeError("pin must be True or False, not %s" % type(pin).__name__)
    if ttl is None:
        return 0, (OP_PIN if pin else 0)
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise TypeError("ttl must be an int of seconds (or rados_nkv.TTL_NONE), not %s" % type(ttl).__name__)
    if ttl < 0 or ttl > TTL_NONE:
        raise ValueError("ttl %d out of range: 0..2**32-2 seconds (0: the namespace's default), or "
                         "rados_nkv.TTL_NONE (never expires)" % ttl)
    # With ttl 0 and no pin the engine sends a standard Store (it sends F1h only for a nonzero ttl_s
    # or OP_PIN): on a cache namespace that is the same as F1h with CDW12 = 0 (nkv_spec.h).
    return ttl, (OP_PIN if pin else 0)


def _key_bytes(key, allow_empty=False):
    """A key as bytes: bytes-like or str (UTF-8), 1..16 bytes (0 allowed for List)."""
    if isinstance(key, str):
        k = key.encode("utf-8")
    elif isinstance(key, (bytes, bytearray, memoryview)):
        k = bytes(key)
    else:
        raise TypeError("key must be bytes or str, not %s" % type(key).__name__)
    if len(k) > KEY_MAX:
        raise ValueError("key of %d bytes: a key is 1 to 16 bytes (use the *_named calls for longer "
                         "names)" % len(k))
    if not k and not allow_empty:
        raise ValueError("empty key: a key is 1 to 16 bytes")
    return k


if sys.byteorder != "little":  # pragma: no cover - the wire and the structures are little endian
    raise ImportError("rados_nkv: big-endian hosts are not supported")
