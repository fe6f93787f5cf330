# SPDX-License-Identifier: Apache-2.0
"""connect(), discover() and Client: the synchronous API over libnkv's engine.

Every call is a "plan": a generator that checks its arguments, builds one or more batches of
struct nkv_op, yields each batch, and reads the results once the batch has run. The synchronous
methods run each batch with one nkv_engine_run() (the calling thread waits in C, GIL released);
AsyncClient (aio.py) runs the same plans with nkv_engine_submit() and awaits the engine's eventfd.
So both APIs share one implementation of every call, argument checks included.
"""

import ctypes
import errno as E
import re
import threading
import time
import weakref

from . import _ffi
from ._ffi import (Op, OP_STORE, OP_RETRIEVE, OP_DELETE, OP_EXIST, OP_LIST, U32_MAX, KEY_MAX,
                   _key_bytes)
from .buffers import buffer_info
from .errors import NkvError, BatchError, op_error
from . import longname as _ln

__all__ = ["connect", "discover", "Client", "Engine"]

LIST_PAGE = 256 * 1024      # List buffer per round trip (12,000 to 32,000 keys)
RETRIEVE_GUESS_MIN = 64 * 1024
CHUNK = 4096                # ops per nkv_engine_run()/submit(): far below the engine's max_ops
EAGAIN_SLEEP = 0.001
_OP_SIZE = ctypes.sizeof(Op)

_bytes_new = ctypes.pythonapi.PyBytes_FromStringAndSize
_bytes_new.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
_bytes_new.restype = ctypes.py_object
_bytes_ptr = ctypes.pythonapi.PyBytes_AsString
_bytes_ptr.argtypes = [ctypes.py_object]
_bytes_ptr.restype = ctypes.c_void_p


def _new_bytes(n):
    """(bytes object of @n bytes, its address): retrieve() reads straight into the bytes it returns
    (no copy). The object is fresh and unshared until returned, so filling it is safe; sizes below
    2 use a bytearray instead (CPython shares its 0-byte bytes object)."""
    if n < 2:
        b = bytearray(max(n, 1))
        return b, ctypes.addressof((ctypes.c_char * len(b)).from_buffer(b))
    b = _bytes_new(None, n)
    return b, _bytes_ptr(b)


def _as_bytes(buf, n):
    """The first @n bytes of a buffer from _new_bytes() as a bytes object (no copy when whole)."""
    if isinstance(buf, bytes) and len(buf) == n:
        return buf
    return bytes(memoryview(buf)[:n])


def _moved_error(op):
    """None when a successful Retrieve moved exactly min(value size - offset, buffer) bytes, as the
    command set says; otherwise an NkvError EIO (the buffer would hold a prefix, or stale bytes, under
    the full size). libnkv already fails such a command where it can tell (NVMe/TCP, shm targets
    that report the bytes moved); this holds for every transport and target."""
    want = min(max(op.value_size - op.offset, 0), op.len)
    if op.xfer == want:
        return None
    return NkvError(E.EIO, "retrieve of key %s: the target moved %d bytes, %d expected from a %d-byte value"
                    % (op.key_bytes.hex(), op.xfer, want, op.value_size), op="retrieve", key=op.key_bytes)


def _ttl_error(op, nsid, ttl, pin, tf):
    """For 02h on a Store TTL (F1h): what the request makes possible, as the nkv CLI says it (the
    status alone cannot tell a namespace without a cache from a pin without a finite TTL); None for
    other failures and for plain Stores."""
    if op.rc != -E.EINVAL or (op.status & 0x7FF) != 0x002 or tf == (0, 0):
        return None
    if not pin:
        why = "namespace %d has no cache: ttl needs a cache namespace" % nsid
    elif ttl == _ffi.TTL_NONE:
        why = "a pin needs a finite TTL, not TTL_NONE (or namespace %d has no cache)" % nsid
    elif not ttl:
        why = "namespace %d has no cache, or no default TTL for a pin: give ttl=SECONDS" % nsid
    else:
        why = "namespace %d has no cache: pin needs a cache namespace" % nsid
    return NkvError(E.EINVAL, "store of key %s: %s" % (op.key_bytes.hex(), why), status=op.status, op="store",
                    key=op.key_bytes)


def _block_hash(h, name="block_hash"):
    """A block hash as the 64-bit number a Store carries: an int 0..2**64-1, or bytes (vLLM's hashes
    are bytes: their last 8 bytes as a big-endian number, zero-padded on the left, as llm-d reads
    them)."""
    if isinstance(h, (bytes, bytearray, memoryview)):
        b = bytes(h)
        if not b:
            raise ValueError("%s is empty" % name)
        return int.from_bytes(b[-8:], "big")
    if isinstance(h, bool) or not isinstance(h, int):
        raise TypeError("%s must be an int or bytes, not %s" % (name, type(h).__name__))
    if not 0 <= h < 1 << 64:
        raise ValueError("%s %d out of range: 0..2**64-1" % (name, h))
    return h


def _set_hash(op, h):
    """Give a Store op the engine's block hash @h (None: none): a Store TTL naming it (OP_HASH)."""
    if h is not None:
        op.flags |= _ffi.OP_HASH
        op.offset = h


def _check_nsid(nsid, default):
    if nsid is None:
        return default
    if isinstance(nsid, bool) or not isinstance(nsid, int):
        raise TypeError("nsid must be an int, not %s" % type(nsid).__name__)
    if not 1 <= nsid <= 0xFFFFFFFE:
        raise ValueError("nsid %d out of range (1..0xfffffffe)" % nsid)
    return nsid


def _check_offset(offset):
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError("offset must be an int, not %s" % type(offset).__name__)
    if offset < 0:
        raise ValueError("negative offset %d" % offset)
    if offset >= 1 << 64:
        raise ValueError("offset %d does not fit 64 bits" % offset)
    return offset


def _seq(name, items):
    """@items as a list (any iterable but str/bytes, which would be taken item by item)."""
    if isinstance(items, (str, bytes, bytearray, memoryview)) or items is None:
        raise TypeError("%s must be a sequence (list, tuple...), not %s" % (name, type(items).__name__))
    try:
        return list(items)
    except TypeError:
        raise TypeError("%s must be a sequence (list, tuple...), not %s" % (name, type(items).__name__)) from None


def _ttl_applied(op, tf):
    """The TTL a completed Store TTL got (CQE DW0: seconds, TTL_NONE for never), or None for a
    standard Store (@tf == (0, 0)) and from targets that do not report it (DW0 0)."""
    if tf == (0, 0) or not op.value_size:
        return None
    return int(op.value_size)


def _set_op(op, op_type, key, nsid, addr=0, length=0, offset=0, opts=0, ttl=(0, 0)):
    """Fill an element of a zeroed op array (the key and arguments are already checked; @ttl: the
    (ttl_s, flags) pair of _ffi.ttl_fields())."""
    op.type = op_type
    op.klen = len(key)
    op.opts = opts
    op.ttl_s, op.flags = ttl
    op.nsid = nsid
    ctypes.memmove(op.key, key, len(key))
    op.buf = addr or None
    op.len = length
    op.offset = offset


# The PCIe-style controller's two sockets: nkv_shm.h's and vfio-user's (the socket names the subsystem).
_LOCAL_SCHEMES = ("shm", "vfio-user")


def _parse_target(target):
    """("shm" or "vfio-user", path, None) or ("tcp", host, port or None) from a connect() target string."""
    if not isinstance(target, str):
        raise TypeError("target must be a str (\"HOST[:PORT]\", \"[v6]:PORT\", \"shm:/path\" or "
                        "\"vfio-user:/path\"), not %s" % type(target).__name__)
    for scheme in _LOCAL_SCHEMES:
        if target.startswith(scheme + ":"):
            path = target[len(scheme) + 1:]
            if not path:
                raise ValueError("%s target without a socket path: \"%s:/path/to/socket\"" % (scheme, scheme))
            return scheme, path, None
    if target.startswith("["):
        m = re.fullmatch(r"\[([0-9A-Fa-f:.%A-Za-z]+)\](?::([^:]*))?", target)
        if not m:
            raise ValueError("bad target %r: an IPv6 address is written [ADDR] or [ADDR]:PORT" % target)
        host, port = m.group(1), m.group(2)
    elif target.count(":") == 1:
        host, port = target.split(":")
    else:  # a host name, IPv4, or a bare IPv6 address (no port)
        host, port = target, None
    if not host:
        raise ValueError("bad target %r: no host" % target)
    if port is not None:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("bad target %r: the port must be a number from 1 to 65535" % target)
        port = int(port)
    return "tcp", host, port


def _conn_opts(timeout, hostnqn, hdgst=False, ddgst=False, depth=0, dhchap_secret=None,
               dhchap_ctrl_secret=None, tls_key=None, tls_identity=0):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError("timeout must be a positive number of seconds, got %r" % (timeout,))
    o = _ffi.ConnOpts()
    o.timeout_ms = max(1, min(int(timeout * 1000), 0x7FFFFFFF))
    keep = []  # the bytes the struct points to, alive until the call returns
    if hostnqn is not None:
        if not isinstance(hostnqn, str):
            raise TypeError("hostnqn must be a str, not %s" % type(hostnqn).__name__)
        b = hostnqn.encode("utf-8")
        if not b.startswith(b"nqn.") or len(b) > 223:
            raise ValueError("bad hostnqn %r: \"nqn.\" and at most 223 bytes" % hostnqn)
        keep.append(b)
        o.hostnqn = b
    for name, v in (("dhchap_secret", dhchap_secret), ("dhchap_ctrl_secret", dhchap_ctrl_secret)):
        if v is None:
            continue
        if not isinstance(v, str) or not v.startswith("DHHC-1:"):
            raise ValueError("%s must be a str \"DHHC-1:hh:<base64>:\" (nvme gen-dhchap-key)" % name)
        b = v.encode("ascii")
        keep.append(b)
        setattr(o, name, b)
    if dhchap_ctrl_secret is not None and dhchap_secret is None:
        raise ValueError("dhchap_ctrl_secret needs dhchap_secret")
    if tls_key is not None:
        if (not isinstance(tls_key, str) or "\0" in tls_key or
                not (tls_key.startswith("NVMeTLSkey-1:") or (tls_key.startswith("@") and len(tls_key) > 1))):
            raise ValueError("tls_key must be a str \"NVMeTLSkey-1:hh:<base64>:\" (nvme gen-tls-key) or "
                             "\"@FILE\" of a file holding it")
        b = tls_key.encode("utf-8")
        keep.append(b)
        o.tls = True
        o.tls_key = b
    if isinstance(tls_identity, bool) or tls_identity not in (0, 1):
        raise ValueError("tls_identity must be 0 (NVMe0R, TP 8011) or 1 (NVMe1R, TP 8018), got %r"
                         % (tls_identity,))
    if tls_identity and tls_key is None:
        raise ValueError("tls_identity needs tls_key")
    o.tls_identity = tls_identity
    o.hdgst = bool(hdgst)
    o.ddgst = bool(ddgst)
    o.queue_depth = depth
    return o, keep


def discover(host, port=8009, *, timeout=30.0, hostnqn=None):
    """Read the discovery log of the discovery controller at @host:@port. Returns one dict per
    entry: subnqn, traddr, trsvcid (str), trtype, adrfam, subtype (2: NVMe subsystem, 3: the
    discovery controller itself), portid."""
    if not isinstance(host, str) or not host:
        raise TypeError("host must be a non-empty str")
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError("port must be a number from 1 to 65535, got %r" % (port,))
    opts, keep = _conn_opts(timeout, hostnqn)
    entries = ctypes.POINTER(_ffi.DiscEntry)()
    n = ctypes.c_uint()
    rc = _ffi.nkv_discover(host.encode(), str(port).encode(), ctypes.byref(opts), ctypes.byref(entries),
                           ctypes.byref(n))
    del keep
    if rc:
        raise NkvError(rc, "discovery at %s:%d" % (host, port))
    out = []
    try:
        for i in range(n.value):
            e = entries[i]
            out.append({"subnqn": e.subnqn.decode("utf-8", "replace"),
                        "traddr": e.traddr.decode("utf-8", "replace"),
                        "trsvcid": e.trsvcid.decode("utf-8", "replace"),
                        "trtype": e.trtype, "adrfam": e.adrfam, "subtype": e.subtype,
                        "portid": e.portid})
    finally:
        _ffi.libc_free(ctypes.cast(entries, ctypes.c_void_p))
    return out


def _find_subsys(host, dport, opts):
    """(subnqn, trsvcid) of the one NVMe/TCP subsystem the discovery log at @host:@dport (None: 8009)
    lists: libnkv's nkv_discover_subsys(), the rule the nkv CLI follows too."""
    sub = _ffi.DiscEntry()
    entries = ctypes.POINTER(_ffi.DiscEntry)()
    n = ctypes.c_uint()
    rc = _ffi.nkv_discover_subsys(host.encode(), str(dport).encode() if dport else None, ctypes.byref(opts),
                                  ctypes.byref(sub), ctypes.byref(entries), ctypes.byref(n))
    where = "%s:%s" % (("[%s]" % host) if ":" in host else host, dport or 8009)
    names = []
    if entries:
        try:
            names = ["%s (port %s)" % (entries[i].subnqn.decode("utf-8", "replace"),
                                       entries[i].trsvcid.decode("utf-8", "replace"))
                     for i in range(n.value) if entries[i].subtype == _ffi.DISC_SUBTYPE_NVME]
        finally:
            _ffi.libc_free(ctypes.cast(entries, ctypes.c_void_p))
    if rc == -E.ENOTUNIQ:
        raise NkvError(E.ENOTUNIQ, "no subnqn given and the discovery log at %s lists several subsystems: %s; "
                       "pass subnqn=" % (where, ", ".join(names)), _detail=False)
    if rc == -E.ENOENT:
        raise NkvError(E.ENOENT, "no NVMe/TCP subsystem in the discovery log at %s" % where)
    if rc == -E.ECONNREFUSED:
        raise NkvError(rc, "nothing listening at %s (is rados-nkv running there?); without subnqn, connect() "
                       "reads the subsystem from the discovery log at that port" % where)
    if rc:
        raise NkvError(rc, "discovery at %s" % where)
    return sub.subnqn.decode("utf-8", "replace"), sub.trsvcid.decode("ascii", "replace")


def connect(target, *, subnqn=None, nsid=1, queues=4, depth=128, timeout=30.0, hostnqn=None,
            hdgst=False, ddgst=False, discovery_port=None, dhchap_secret=None, dhchap_ctrl_secret=None,
            tls_key=None, tls_identity=0, reconnect_min=None, reconnect_max=None, reconnect_wait=None):
    """Connect to a rados-nkv subsystem (or any NVMe KV controller) and start an engine of
    @queues queue pairs of @depth entries.

    @target: "HOST[:PORT]" or "[IPv6]:PORT" for NVMe/TCP (port 4420 unless given, or the discovery
    log's when @subnqn is None), "shm:/path/to/socket" for the shared-memory transport, or
    "vfio-user:/path/to/socket" for the same controller as a vfio-user PCI device; or
    several paths to one subsystem (the gateways of a group), as a list of such strings or one
    string separated by commas: libnkv's multipath engine (nkv_engine_connect) then sends I/O to the
    first usable optimized path and resends what a dying path had in flight on another, so calls
    see no error unless every path is gone past @timeout (docs/multipath.md); without @subnqn the
    first path's discovery log also adds every other path it lists for the subsystem.
    @subnqn None over TCP: ask the discovery controller at HOST:PORT (every rados-nkv listener serves
    discovery), at HOST:@discovery_port when given, else at HOST:8009, and take the NVMe subsystem it
    lists (several: NkvError ENOTUNIQ naming them; pass @subnqn), as the nkv CLI does. @nsid: the default namespace of every call. @timeout: seconds for the connect
    and for every command (its deadline). @dhchap_secret / @dhchap_ctrl_secret: DH-HMAC-CHAP secrets
    ("DHHC-1:..." as nvme gen-dhchap-key prints them) for a subsystem that requires authentication,
    and to make the controller authenticate itself. @tls_key: the TLS PSK of this host and subsystem
    ("NVMeTLSkey-1:..." as nvme gen-tls-key prints it, or "@FILE" of a file holding it) for a port
    that requires TLS (rados-nkv --listen-tls): the admin and every I/O queue run over TLS 1.3, and
    without @subnqn the discovery at that port too; NVMe/TCP only. @tls_identity: the PSK identity
    version, 0 (TP 8011, the Linux default) or 1 (TP 8018). @reconnect_min / @reconnect_max /
    @reconnect_wait: seconds; when the connection is lost (the gateway restarted) the engine
    reconnects the whole controller by itself, first after @reconnect_min (default 0.05), the gap
    doubling up to @reconnect_max (default 1.0); a call that waits longer than @reconnect_wait
    (default @timeout; 0: it does not wait) for the connection to come back fails with EAGAIN (it
    was never sent).
    Raises NkvError (errno ECONNREFUSED,
    ETIMEDOUT, ENOENT for an unknown subsystem or namespace, EACCES for a host not allowed or a
    refused secret, ENOKEY when authentication is required and no secret given, EKEYREJECTED when the
    controller fails to prove the controller secret or the TLS handshake fails on the key,
    ECONNRESET when the port closes the connection (TLS to a plain port, or none to a TLS one),
    EINVAL/EMSGSIZE/EBADMSG for a key that is no valid PSK, ...)."""
    if isinstance(target, (list, tuple)) or (isinstance(target, str) and "," in target):
        return _connect_multi(target, subnqn=subnqn, nsid=nsid, queues=queues, depth=depth, timeout=timeout,
                              hostnqn=hostnqn, hdgst=hdgst, ddgst=ddgst, discovery_port=discovery_port,
                              dhchap_secret=dhchap_secret, dhchap_ctrl_secret=dhchap_ctrl_secret,
                              tls_key=tls_key, tls_identity=tls_identity,
                              reconnect=_reconnect_ms(reconnect_min, reconnect_max, reconnect_wait))
    kind, where, port = _parse_target(target)
    if subnqn is not None and not isinstance(subnqn, str):
        raise TypeError("subnqn must be a str, not %s" % type(subnqn).__name__)
    nsid = _check_nsid(nsid, 1)
    for name, v, hi in (("queues", queues, 1024), ("depth", depth, 65535)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("%s must be an int, not %s" % (name, type(v).__name__))
        if not 1 <= v <= hi:
            raise ValueError("%s must be 1..%d, got %d" % (name, hi, v))
    reconnect = _reconnect_ms(reconnect_min, reconnect_max, reconnect_wait)
    opts, keep = _conn_opts(timeout, hostnqn, hdgst, ddgst, depth, dhchap_secret, dhchap_ctrl_secret,
                            tls_key, tls_identity)
    if kind in _LOCAL_SCHEMES and tls_key is not None:
        raise ValueError("tls_key is for NVMe/TCP targets, not the local shared-memory transports (%s:)" % kind)
    if kind in _LOCAL_SCHEMES:
        desc = "%s:%s" % (kind, where)
        traddr, trsvcid = desc.encode(), None
    else:
        if subnqn is None:
            if discovery_port is not None and (isinstance(discovery_port, bool) or
                                               not isinstance(discovery_port, int) or
                                               not 1 <= discovery_port <= 65535):
                raise ValueError("discovery_port must be a number from 1 to 65535, got %r" % (discovery_port,))
            subnqn, sub_port = _find_subsys(where, discovery_port or port, opts)
            if port is None and sub_port.isdigit():
                port = int(sub_port)
        if port is None:
            port = 4420
        traddr, trsvcid = where.encode(), str(port).encode()
        desc = "%s:%d" % (("[%s]" % where) if ":" in where else where, port)
    ctrl = ctypes.c_void_p()
    if kind == "shm" and subnqn is None:
        rc = _ffi.nkv_connect_shm(where.encode(), ctypes.byref(opts), ctypes.byref(ctrl))
    else:  # nkv_connect() checks a given SUBNQN against the socket's subsystem (None: any)
        rc = _ffi.nkv_connect(traddr, trsvcid, subnqn.encode() if subnqn is not None else None,
                              ctypes.byref(opts), ctypes.byref(ctrl))
    del keep
    if rc:
        raise NkvError(rc, "connect to %s%s" % (desc, " (%s)" % subnqn if subnqn else ""))
    return Client(ctrl, kind, nsid, queues, depth, opts.timeout_ms, desc, reconnect)


def _reconnect_ms(rmin, rmax, rwait):
    """The engine's reconnect options in ms from seconds (None: the engine's default, 0 there)."""
    out = {}
    for name, v in (("reconnect_min", rmin), ("reconnect_max", rmax), ("reconnect_wait", rwait)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("%s must be a number of seconds, not %s" % (name, type(v).__name__))
        if name == "reconnect_wait" and v == 0:
            out["reconnect_wait_ms"] = -1  # the engine's "do not wait"; its 0 means "the default"
            continue
        if not 0.001 <= v <= 3600:
            raise ValueError("%s must be 0.001..3600 seconds, got %r" % (name, v))
        out[name + "_ms"] = int(round(v * 1000))
    if rmin is not None and rmax is not None and rmax < rmin:  # one alone: the engine raises the cap
        raise ValueError("reconnect_max (%r) is below reconnect_min (%r)" % (rmax, rmin))
    return out


def _check_sizes(queues, depth):
    for name, v, hi in (("queues", queues, 1024), ("depth", depth, 65535)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("%s must be an int, not %s" % (name, type(v).__name__))
        if not 1 <= v <= hi:
            raise ValueError("%s must be 1..%d, got %d" % (name, hi, v))


def _connect_multi(targets, *, subnqn, nsid, queues, depth, timeout, hostnqn, hdgst, ddgst, discovery_port,
                   dhchap_secret, dhchap_ctrl_secret, tls_key, tls_identity, reconnect):
    """connect() with several paths: one multipath engine over all (nkv_engine_connect())."""
    if isinstance(targets, str):
        targets = targets.split(",")
    targets = [t.strip() if isinstance(t, str) else t for t in targets]
    if not targets:
        raise ValueError("no target: give one or more \"HOST[:PORT]\" / \"shm:/path\" / \"vfio-user:/path\"")
    if len(targets) > 16:
        raise ValueError("%d targets: at most 16 paths to one subsystem" % len(targets))
    paths = []
    for t in targets:
        kind, where, port = _parse_target(t)
        if kind in _LOCAL_SCHEMES:
            if "," in where:
                raise ValueError("%s socket path %r: a path in a list of targets has no comma" % (kind, where))
            paths.append("%s:%s" % (kind, where))
        else:
            host = "[%s]" % where if ":" in where else where
            paths.append(host if port is None else "%s:%d" % (host, port))
    if discovery_port is not None:
        raise ValueError("discovery_port is for one target; with several, give each HOST:PORT (the discovery "
                         "log is read at the first path's port, or 8009 without one)")
    if subnqn is not None and not isinstance(subnqn, str):
        raise TypeError("subnqn must be a str, not %s" % type(subnqn).__name__)
    nsid = _check_nsid(nsid, 1)
    _check_sizes(queues, depth)
    opts, keep = _conn_opts(timeout, hostnqn, hdgst, ddgst, depth, dhchap_secret, dhchap_ctrl_secret,
                            tls_key, tls_identity)
    eo = _ffi.EngineOpts(queues=queues, depth=depth, timeout_ms=opts.timeout_ms, **reconnect)
    eng = ctypes.c_void_p()
    desc = ",".join(paths)
    rc = _ffi.nkv_engine_connect(desc.encode(), subnqn.encode() if subnqn else None, ctypes.byref(opts),
                                 ctypes.byref(eo), ctypes.byref(eng))
    del keep
    if rc:
        raise NkvError(rc, "connect to %s%s" % (desc, " (%s)" % subnqn if subnqn else ""))
    n = int(_ffi.nkv_engine_paths(eng))
    ctrl = next((c for c in (_ffi.nkv_engine_ctrl(eng, i) for i in range(n)) if c), None)
    kinds = {p.split(":", 1)[0] for p in paths}
    kind = kinds.pop() if len(kinds) == 1 and paths[0].split(":", 1)[0] in _LOCAL_SCHEMES else "tcp"
    return Client(ctypes.c_void_p(ctrl), kind, nsid, queues, depth, opts.timeout_ms, desc, reconnect, eng=eng)


class Engine:
    """The nkv_engine under a Client (Client.engine), for integrations that build their own
    batches of rados_nkv._ffi.Op (op_array(), make_op()) and drive completions themselves.

    Completions of submit() are taken by reap() or by the client's AsyncClient, not both: the
    first of the two to take completions owns them (the other raises RuntimeError)."""

    def __init__(self, client):
        self._client = weakref.proxy(client)
        self._reaper = None

    def _handle(self):
        return self._client._handle()

    @staticmethod
    def _ops_ptr(ops):
        if isinstance(ops, Op):
            return ctypes.addressof(ops), 1
        if isinstance(ops, ctypes.Array) and ops._type_ is Op:
            return ctypes.addressof(ops), len(ops)
        raise TypeError("ops must be a ctypes array of Op (op_array()) or one Op, not %s"
                        % type(ops).__name__)

    @property
    def queues(self):
        """Queue pairs the engine drives."""
        return int(_ffi.nkv_engine_queues(self._handle()))

    def submit(self, ops, tag):
        """nkv_engine_submit(): start @ops (an Op array; it and every buffer it points to must stay
        alive until @tag is reaped) as one batch named @tag (0..2**64-1). Raises NkvError: EINVAL
        (a bad op, whose rc says so), EAGAIN (the engine's max_ops reached), ESHUTDOWN."""
        addr, n = self._ops_ptr(ops)
        if isinstance(tag, bool) or not isinstance(tag, int) or not 0 <= tag < 1 << 64:
            raise ValueError("tag must be an int in 0..2**64-1, got %r" % (tag,))
        with self._client._use() as h:
            rc = _ffi.nkv_engine_submit(h, addr, n, tag)
        if rc:
            raise NkvError(rc, "engine submit of %d ops" % n)

    def run(self, ops):
        """nkv_engine_run(): run @ops and wait for all; returns how many failed (rc != 0)."""
        addr, n = self._ops_ptr(ops)
        with self._client._use() as h:
            rc = _ffi.nkv_engine_run(h, addr, n)
        if rc < 0:
            raise NkvError(rc, "engine run of %d ops" % n)
        return rc

    def _claim(self, who):
        if self._reaper is None:
            self._reaper = who
        elif self._reaper != who:
            raise RuntimeError("this client's completions are taken by %s; Engine.reap() and "
                               "Client.aio cannot share one client" % self._reaper)

    def reap(self, max=64, timeout_ms=0):  # noqa: A002 - the contract's name
        """Tags of up to @max completed batches, oldest first, waiting up to @timeout_ms for the
        first (0: no wait, < 0: forever; the GIL is released while waiting)."""
        if isinstance(max, bool) or not isinstance(max, int) or max <= 0:
            raise ValueError("max must be a positive int, got %r" % (max,))
        self._claim("Engine.reap()")
        tags = (ctypes.c_uint64 * max)()
        with self._client._use() as h:
            rc = _ffi.nkv_engine_reap(h, tags, max, int(timeout_ms))
        if rc < 0:
            raise NkvError(rc, "engine reap")
        return list(tags[:rc])

    def eventfd(self):
        """The engine's eventfd: readable while completed batches wait for reap(). Do not read or
        close it."""
        return int(_ffi.nkv_engine_eventfd(self._handle()))


class _Use:
    """Context manager marking a call in progress on a client (close() waits for them)."""

    __slots__ = ("c",)

    def __init__(self, c):
        self.c = c

    def __enter__(self):
        c = self.c
        with c._cv:
            if c._closed:
                raise ValueError("I/O on a closed rados_nkv.Client")
            c._active += 1
        return c._eng

    def __exit__(self, *exc):
        c = self.c
        with c._cv:
            c._active -= 1
            if not c._active:
                c._cv.notify_all()
        return False


class Client:
    """A connection to one subsystem with an engine of several queue pairs. Thread-safe: any thread
    may call any method at once. A context manager; close() is idempotent. Made by connect()."""

    def __init__(self, ctrl, transport, nsid, queues, depth, timeout_ms, desc, reconnect=None, eng=None):
        self._ctrl = ctrl
        # a multipath engine (several paths) owns its controllers; buffers are then plain memory
        self._mp = eng is not None
        self._cv = threading.Condition()
        self._closed = False
        self._active = 0
        self._eng = None
        self._allocs = {}       # address -> (ctypes array, memoryview)
        self._registered = {}   # address -> (object, keep)
        self._aio = None
        self._retrieve_guess = RETRIEVE_GUESS_MIN
        self.transport = transport
        self.nsid = nsid
        self.target = desc
        self.timeout_ms = timeout_ms
        try:
            idc = _ffi.nkv_ctrl_identify(ctrl)
            self.subnqn = ctypes.string_at(idc + _ffi.ID_CTRLR_SUBNQN, 256).split(b"\0")[0].decode("utf-8", "replace")
            self.max_value, self.read_only = self._ns_info(nsid)
            if eng is None:
                eo = _ffi.EngineOpts(queues=queues, depth=depth, timeout_ms=timeout_ms, **(reconnect or {}))
                eng = ctypes.c_void_p()
                rc = _ffi.nkv_engine_create(ctrl, ctypes.byref(eo), ctypes.byref(eng))
                if rc:
                    raise NkvError(rc, "engine of %d queue pairs on %s" % (queues, desc))
        except BaseException:
            self._closed = True
            self._ctrl = None
            if self._mp:
                _ffi.nkv_engine_destroy(eng)
            else:
                _ffi.nkv_disconnect(ctrl)
            raise
        self._eng = eng
        self.queues = int(_ffi.nkv_engine_queues(eng))
        self.paths = int(_ffi.nkv_engine_paths(eng))
        self.engine = Engine(self)

    # ---- lifetime ------------------------------------------------------------------------------

    def _ns_info(self, nsid):
        buf = ctypes.create_string_buffer(_ffi.ID_NS_KV_SIZE)
        rc = _ffi.nkv_ns_identify(self._ctrl, nsid, buf)
        if rc:
            raise NkvError(rc, "identify namespace %d of %s" % (nsid, self.subnqn))
        raw = buf.raw
        fmt = raw[_ffi.ID_NS_KV_KVFC] & 0xF
        off = _ffi.ID_NS_KV_KVF + 16 * fmt + 4
        return int.from_bytes(raw[off:off + 4], "little"), bool(raw[_ffi.ID_NS_KV_NSATTR] & 1)

    def _use(self):
        return _Use(self)

    def _handle(self):
        if self._closed:
            raise ValueError("I/O on a closed rados_nkv.Client")
        return self._eng

    @property
    def closed(self):
        return self._closed

    def close(self):
        """Wait for calls in progress, stop the engine, release alloc()ed and registered memory,
        disconnect. Idempotent. Coroutines of .aio waiting on a batch get its results (every accepted op completes first)."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            while self._active:
                self._cv.wait()
        aio = self._aio
        if aio is not None:
            aio._detach()
        if self._eng is not None:
            _ffi.nkv_engine_destroy(self._eng)   # waits for every accepted op
            self._eng = None
        if aio is not None:
            aio._complete_all()
        for addr in list(self._registered):
            if not self._mp:
                _ffi.nkv_buf_unregister(self._ctrl, addr)
        self._registered.clear()
        for addr, (arr, mv) in list(self._allocs.items()):
            try:
                mv.release()   # later use of the view raises ValueError instead of touching freed memory
            except (BufferError, ValueError):
                pass           # still exported (numpy/torch views of it): the memory goes regardless
            if not self._mp:
                _ffi.nkv_buf_free(self._ctrl, addr)
        self._allocs.clear()
        if self._ctrl and not self._mp:   # a multipath engine disconnected its paths itself
            _ffi.nkv_disconnect(self._ctrl)
        self._ctrl = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            if not self._closed and self._ctrl:
                self.close()
        except Exception:  # pragma: no cover - interpreter teardown
            pass

    def __repr__(self):
        return "<rados_nkv.Client %s %s nsid=%d queues=%d%s>" % (
            self.transport, self.target, self.nsid, self.queues if self._eng or self._closed else 0,
            " closed" if self._closed else "")

    @property
    def aio(self):
        """The AsyncClient over this client's engine (one per client)."""
        if self._aio is None:
            from .aio import AsyncClient
            with self._cv:
                if self._aio is None:
                    self._aio = AsyncClient(self)
        return self._aio

    # ---- running plans -------------------------------------------------------------------------

    def _run_ops(self, ops, n):
        """nkv_engine_run() on @ops[0:n], in chunks; EAGAIN (other threads filled max_ops) waits."""
        base = ctypes.addressof(ops)
        deadline = None
        with self._use() as h:
            start = 0
            while start < n:
                cnt = min(CHUNK, n - start)
                rc = _ffi.nkv_engine_run(h, base + start * _OP_SIZE, cnt)
                if rc == -E.EAGAIN:
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + self.timeout_ms / 1000.0
                    elif now > deadline:
                        raise NkvError(rc, "engine busy (max_ops in flight) for the whole timeout")
                    time.sleep(EAGAIN_SLEEP)
                    continue
                if rc == -E.EINVAL:
                    for i in range(start, start + cnt):
                        if ops[i].rc == -E.EINVAL:
                            raise op_error(ops[i])
                if rc < 0:
                    raise NkvError(rc, "engine run of %d ops" % cnt)
                start += cnt
                deadline = None

    def _drive(self, plan):
        """Run a plan synchronously: each batch it yields through nkv_engine_run()."""
        try:
            step = next(plan)
            while True:
                ops, n, _keep = step
                self._run_ops(ops, n)
                step = plan.send(None)
        except StopIteration as stop:
            return stop.value

    # ---- plans: argument checks, batches, results (shared with AsyncClient) -------------------

    def _plan_store(self, key, value, nsid=None, must_exist=False, must_not_exist=False, ttl=None, pin=False,
                    block_hash=None):
        k = _key_bytes(key)
        nsid = _check_nsid(nsid, self.nsid)
        tf = _ffi.ttl_fields(ttl, pin)
        bh = None if block_hash is None else _block_hash(block_hash)
        if must_exist and must_not_exist:
            raise ValueError("must_exist and must_not_exist exclude each other")
        addr, n, keep = buffer_info(value, False, "value")
        if n > U32_MAX:
            raise ValueError("value of %d bytes: at most 2**32-1 (the namespace takes %d)" % (n, self.max_value))
        opts = (_ffi.STORE_MUST_EXIST if must_exist else 0) | (_ffi.STORE_MUST_NOT_EXIST if must_not_exist else 0)
        ops = (Op * 1)()
        _set_op(ops[0], OP_STORE, k, nsid, addr, n, opts=opts, ttl=tf)
        _set_hash(ops[0], bh)
        yield ops, 1, keep
        if ops[0].rc:
            raise _ttl_error(ops[0], nsid, ttl, pin, tf) or op_error(ops[0])
        return _ttl_applied(ops[0], tf)

    def _plan_retrieve(self, key, nsid=None):
        k = _key_bytes(key)
        nsid = _check_nsid(nsid, self.nsid)
        guess = min(max(self._retrieve_guess, RETRIEVE_GUESS_MIN), max(self.max_value, RETRIEVE_GUESS_MIN))
        ops = (Op * 1)()
        for _ in range(8):
            buf, addr = _new_bytes(guess)
            _set_op(ops[0], OP_RETRIEVE, k, nsid, addr, guess)
            yield ops, 1, buf
            op = ops[0]
            if op.rc == -E.ENOENT:
                return None
            if op.rc:
                raise op_error(op)
            bad = _moved_error(op)
            if bad:
                raise bad
            size = op.value_size
            if size <= guess:
                self._retrieve_guess = max(size, RETRIEVE_GUESS_MIN)
                return _as_bytes(buf, size)
            guess = size  # larger than the guess: read it whole again (a second half could be newer)
            ctypes.memset(ctypes.addressof(op), 0, _OP_SIZE)
        raise NkvError(E.EAGAIN, "retrieve of key %s: the value kept growing while being read" % k.hex())

    def _plan_retrieve_into(self, key, out, offset=0, nsid=None):
        k = _key_bytes(key)
        nsid = _check_nsid(nsid, self.nsid)
        offset = _check_offset(offset)
        addr, n, keep = buffer_info(out, True, "out")
        ops = (Op * 1)()
        _set_op(ops[0], OP_RETRIEVE, k, nsid, addr, min(n, U32_MAX), offset)
        yield ops, 1, keep
        op = ops[0]
        if op.rc == -E.ENOENT:
            return None
        if op.rc:
            raise op_error(op)
        bad = _moved_error(op)
        if bad:
            raise bad
        return int(op.value_size)

    def _plan_flag(self, op_type, key, nsid):
        k = _key_bytes(key)
        nsid = _check_nsid(nsid, self.nsid)
        ops = (Op * 1)()
        _set_op(ops[0], op_type, k, nsid)
        yield ops, 1, None
        op = ops[0]
        if op.rc == -E.ENOENT:
            return False
        if op.rc:
            raise op_error(op)
        return True

    def _plan_exist(self, key, nsid=None):
        return (yield from self._plan_flag(OP_EXIST, key, nsid))

    def _plan_delete(self, key, nsid=None):
        return (yield from self._plan_flag(OP_DELETE, key, nsid))

    def _plan_list(self, start=b"", nsid=None, limit=None):
        cur = _key_bytes(start, allow_empty=True)
        nsid = _check_nsid(nsid, self.nsid)
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int):
                raise TypeError("limit must be an int or None, not %s" % type(limit).__name__)
            if limit < 0:
                raise ValueError("negative limit %d" % limit)
            if limit == 0:
                return []
        page = ctypes.create_string_buffer(LIST_PAGE)
        ops = (Op * 1)()
        keys = []
        resumed = False
        while True:
            ctypes.memset(ops, 0, _OP_SIZE)
            _set_op(ops[0], OP_LIST, cur, nsid, ctypes.addressof(page), LIST_PAGE)
            yield ops, 1, page
            op = ops[0]
            if op.rc:
                raise op_error(op)
            got = _parse_list(page, op.xfer, cur)
            if resumed and got and got[0] == cur:
                got = got[1:]   # List starts at its key inclusive: the previous page's last key
            if not got:
                return keys
            keys.extend(got)
            if limit is not None and len(keys) >= limit:
                return keys[:limit]
            cur = keys[-1]
            resumed = True

    # batched

    def _plan_store_many(self, keys, values, nsid=None, ttl=None, pin=False, block_hashes=None):
        keys = _seq("keys", keys)
        values = _seq("values", values)
        if len(keys) != len(values):
            raise ValueError("%d keys but %d values" % (len(keys), len(values)))
        if block_hashes is not None:
            block_hashes = _seq("block_hashes", block_hashes)
            if len(block_hashes) != len(keys):
                raise ValueError("%d keys but %d block_hashes" % (len(keys), len(block_hashes)))
            block_hashes = [None if h is None else _block_hash(h, "block_hashes[%d]" % i)
                            for i, h in enumerate(block_hashes)]
        nsid = _check_nsid(nsid, self.nsid)
        tf = _ffi.ttl_fields(ttl, pin)
        n = len(keys)
        if not n:
            return None
        ops = (Op * n)()
        keep = []
        for i, (key, val) in enumerate(zip(keys, values)):
            k = _key_bytes(key)
            addr, ln, kp = buffer_info(val, False, "values[%d]" % i)
            if ln > U32_MAX:
                raise ValueError("values[%d] of %d bytes: at most 2**32-1" % (i, ln))
            keep.append(kp)
            _set_op(ops[i], OP_STORE, k, nsid, addr, ln, ttl=tf)
            _set_hash(ops[i], block_hashes[i] if block_hashes else None)
        yield ops, n, keep
        errs = [(i, op_error(ops[i])) for i in range(n) if ops[i].rc]
        if errs:
            raise BatchError(errs, n, "store_many")
        if tf == (0, 0):
            return None
        return [_ttl_applied(ops[i], tf) for i in range(n)]

    def _plan_retrieve_many(self, keys, outs, offsets=None, nsid=None):
        keys = _seq("keys", keys)
        outs = _seq("outs", outs)
        if len(keys) != len(outs):
            raise ValueError("%d keys but %d outs" % (len(keys), len(outs)))
        if offsets is not None:
            offsets = _seq("offsets", offsets)
            if len(offsets) != len(keys):
                raise ValueError("%d keys but %d offsets" % (len(keys), len(offsets)))
        nsid = _check_nsid(nsid, self.nsid)
        n = len(keys)
        if not n:
            return []
        ops = (Op * n)()
        keep = []
        for i in range(n):
            k = _key_bytes(keys[i])
            off = _check_offset(offsets[i]) if offsets is not None else 0
            addr, ln, kp = buffer_info(outs[i], True, "outs[%d]" % i)
            keep.append(kp)
            _set_op(ops[i], OP_RETRIEVE, k, nsid, addr, min(ln, U32_MAX), off)
        yield ops, n, keep
        res, errs = [], []
        for i in range(n):
            op = ops[i]
            if op.rc == -E.ENOENT:
                res.append(None)
            elif op.rc:
                res.append(None)
                errs.append((i, op_error(op)))
            elif _moved_error(op):
                res.append(None)
                errs.append((i, _moved_error(op)))
            else:
                res.append(int(op.value_size))
        if errs:
            raise BatchError(errs, n, "retrieve_many")
        return res

    def _plan_flag_many(self, op_type, what, keys, nsid):
        keys = _seq("keys", keys)
        nsid = _check_nsid(nsid, self.nsid)
        n = len(keys)
        if not n:
            return []
        ops = (Op * n)()
        for i in range(n):
            _set_op(ops[i], op_type, _key_bytes(keys[i]), nsid)
        yield ops, n, None
        res, errs = [], []
        for i in range(n):
            rc = ops[i].rc
            res.append(rc == 0)
            if rc and rc != -E.ENOENT:
                errs.append((i, op_error(ops[i])))
        if errs:
            raise BatchError(errs, n, what)
        return res

    def _plan_exist_many(self, keys, nsid=None):
        return (yield from self._plan_flag_many(OP_EXIST, "exist_many", keys, nsid))

    def _plan_delete_many(self, keys, nsid=None):
        return (yield from self._plan_flag_many(OP_DELETE, "delete_many", keys, nsid))

    # long names

    def _named_value(self, name, payload, what):
        """(key, staging value = header + payload, its address and size): one copy of the payload,
        since a Store moves one contiguous buffer."""
        b = _ln.name_bytes(name)
        key = _ln.key_for(b)
        h = int(_ffi.nkv_lname_hdr_size(len(b)))
        paddr, pn, pkeep = buffer_info(payload, False, what)
        total = h + pn
        if total > U32_MAX:
            raise ValueError("%s of %d bytes: header and payload must fit 2**32-1 bytes" % (what, pn))
        val = bytearray(total)
        vaddr = ctypes.addressof((ctypes.c_char * total).from_buffer(val))
        _ln._pack_into(b, pn, vaddr, h)
        if pn:
            ctypes.memmove(vaddr + h, paddr, pn)
        del pkeep
        return key, val, vaddr, total

    def _plan_put_named(self, name, payload, nsid=None, ttl=None, pin=False):
        nsid = _check_nsid(nsid, self.nsid)
        tf = _ffi.ttl_fields(ttl, pin)
        key, val, vaddr, total = self._named_value(name, payload, "payload")
        ops = (Op * 1)()
        _set_op(ops[0], OP_STORE, key, nsid, vaddr, total, ttl=tf)
        yield ops, 1, val
        if ops[0].rc:
            raise op_error(ops[0], "put_named")
        return _ttl_applied(ops[0], tf)

    def _named_pair(self, ops, i, b, key, nsid, addr, n):
        """ops[i]: the header read; ops[i + 1]: the payload read at offset H into (addr, n)."""
        h = int(_ffi.nkv_lname_hdr_size(len(b)))
        hdr = ctypes.create_string_buffer(h)
        _set_op(ops[i], OP_RETRIEVE, key, nsid, ctypes.addressof(hdr), h)
        _set_op(ops[i + 1], OP_RETRIEVE, key, nsid, addr, min(n, U32_MAX), h)
        return hdr

    @staticmethod
    def _named_result(ops, i, b, hdr, what):
        """Payload length, None for a miss (absent, collision, foreign), or "retry" when the value
        changed between the two reads."""
        oh, op = ops[i], ops[i + 1]
        if oh.rc == -E.ENOENT or op.rc == -E.ENOENT:
            return None
        if oh.rc:
            raise op_error(oh, what)
        if op.rc:
            raise op_error(op, what)
        bad = _moved_error(oh) or _moved_error(op)
        if bad:
            raise bad
        r = _ln._check(ctypes.addressof(hdr), oh.xfer, b)
        if r is None:
            return None
        h, plen = r
        if oh.value_size != op.value_size:
            return "retry"
        if oh.value_size != h + plen:
            raise NkvError(E.EBADMSG, "%s of key %s: the header says %d payload bytes, the value holds %d"
                           % (what, oh.key_bytes.hex(), plen, oh.value_size - h), op=what, key=oh.key_bytes)
        return plen

    def _plan_get_named_into(self, name, out, nsid=None):
        b = _ln.name_bytes(name)
        nsid = _check_nsid(nsid, self.nsid)
        addr, n, keep = buffer_info(out, True, "out")
        key = _ln.key_for(b)
        for _ in range(8):
            ops = (Op * 2)()
            hdr = self._named_pair(ops, 0, b, key, nsid, addr, n)
            yield ops, 2, (keep, hdr)
            r = self._named_result(ops, 0, b, hdr, "get_named_into")
            if r != "retry":
                return r
        raise NkvError(E.EAGAIN, "get_named_into: the value kept changing while being read")

    def _plan_get_named(self, name, nsid=None):
        b = _ln.name_bytes(name)
        nsid = _check_nsid(nsid, self.nsid)
        key = _ln.key_for(b)
        guess = min(max(self._retrieve_guess, RETRIEVE_GUESS_MIN), max(self.max_value, RETRIEVE_GUESS_MIN))
        for _ in range(8):
            buf, addr = _new_bytes(guess)
            ops = (Op * 2)()
            hdr = self._named_pair(ops, 0, b, key, nsid, addr, guess)
            yield ops, 2, (buf, hdr)
            r = self._named_result(ops, 0, b, hdr, "get_named")
            if r is None:
                return None
            if r != "retry":
                if r <= guess:
                    self._retrieve_guess = max(r, RETRIEVE_GUESS_MIN)
                    return _as_bytes(buf, r)
                guess = r
        raise NkvError(E.EAGAIN, "get_named: the value kept changing while being read")

    def _plan_exists_named(self, name, nsid=None):
        res = yield from self._plan_exists_named_many([name], nsid)
        return res[0]

    def _plan_delete_named(self, name, nsid=None):
        """Delete only what holds @name's header (never another name's value under the same key)."""
        b = _ln.name_bytes(name)
        nsid = _check_nsid(nsid, self.nsid)
        if not (yield from self._plan_exists_named_many([b], nsid))[0]:
            return False
        return (yield from self._plan_flag(OP_DELETE, _ln.key_for(b), nsid))

    def _plan_put_named_many(self, names, payloads, nsid=None, ttl=None, pin=False):
        names = _seq("names", names)
        payloads = _seq("payloads", payloads)
        if len(names) != len(payloads):
            raise ValueError("%d names but %d payloads" % (len(names), len(payloads)))
        nsid = _check_nsid(nsid, self.nsid)
        tf = _ffi.ttl_fields(ttl, pin)
        n = len(names)
        if not n:
            return None
        ops = (Op * n)()
        keep = []
        for i in range(n):
            key, val, vaddr, total = self._named_value(names[i], payloads[i], "payloads[%d]" % i)
            keep.append(val)
            _set_op(ops[i], OP_STORE, key, nsid, vaddr, total, ttl=tf)
        yield ops, n, keep
        errs = [(i, op_error(ops[i], "put_named")) for i in range(n) if ops[i].rc]
        if errs:
            raise BatchError(errs, n, "put_named_many")
        if tf == (0, 0):
            return None
        return [_ttl_applied(ops[i], tf) for i in range(n)]

    def _plan_get_named_many(self, names, outs, nsid=None):
        names = _seq("names", names)
        outs = _seq("outs", outs)
        if len(names) != len(outs):
            raise ValueError("%d names but %d outs" % (len(names), len(outs)))
        nsid = _check_nsid(nsid, self.nsid)
        n = len(names)
        if not n:
            return []
        bs = [_ln.name_bytes(x) for x in names]
        bufs = [buffer_info(outs[i], True, "outs[%d]" % i) for i in range(n)]
        keys = [_ln.key_for(b) for b in bs]
        res = [None] * n
        todo = list(range(n))
        for _ in range(8):
            ops = (Op * (2 * len(todo)))()
            hdrs = [self._named_pair(ops, 2 * j, bs[i], keys[i], nsid, bufs[i][0], bufs[i][1])
                    for j, i in enumerate(todo)]
            yield ops, 2 * len(todo), (bufs, hdrs)
            again, errs = [], []
            for j, i in enumerate(todo):
                try:
                    r = self._named_result(ops, 2 * j, bs[i], hdrs[j], "get_named")
                except NkvError as e:
                    errs.append((i, e))
                    continue
                if r == "retry":
                    again.append(i)
                else:
                    res[i] = r
            if errs:
                raise BatchError(errs, n, "get_named_many")
            if not again:
                return res
            todo = again
        raise NkvError(E.EAGAIN, "get_named_many: values kept changing while being read")

    def _plan_exists_named_many(self, names, nsid=None):
        names = _seq("names", names)
        nsid = _check_nsid(nsid, self.nsid)
        n = len(names)
        if not n:
            return []
        bs = [_ln.name_bytes(x) for x in names]
        ops = (Op * n)()
        hdrs = []
        for i, b in enumerate(bs):
            h = int(_ffi.nkv_lname_hdr_size(len(b)))
            hdr = ctypes.create_string_buffer(h)
            hdrs.append(hdr)
            _set_op(ops[i], OP_RETRIEVE, _ln.key_for(b), nsid, ctypes.addressof(hdr), h)
        yield ops, n, hdrs
        res, errs = [], []
        for i in range(n):
            op = ops[i]
            if op.rc == -E.ENOENT:
                res.append(False)
            elif op.rc:
                res.append(False)
                errs.append((i, op_error(op, "exists_named")))
            else:
                r = _ln._check(ctypes.addressof(hdrs[i]), op.xfer, bs[i])
                res.append(r is not None and op.value_size == r[0] + r[1])
        if errs:
            raise BatchError(errs, n, "exists_named_many")
        return res

    # ---- the synchronous API -------------------------------------------------------------------

    def store(self, key, value, *, nsid=None, must_exist=False, must_not_exist=False, ttl=None, pin=False,
              block_hash=None):
        """Store @value (bytes, bytearray, memoryview, numpy array, CPU torch tensor: its bytes, no
        copy) under @key (bytes or str, 1..16 bytes). @must_exist: fail with ENOENT when absent;
        @must_not_exist: fail with EEXIST when present.

        On a cache namespace (rados-nkv's Store TTL, F1h): @ttl, seconds after which the entry
        expires (then retrieve() returns None), or rados_nkv.TTL_NONE (never); @pin=True: an
        explicit entry the cache never evicts until it expires, counted against the namespace's
        pin quota. A pin takes @ttl, else the namespace's default TTL; it needs a finite one.
        ttl=0 without a pin is a plain Store (which takes the namespace's default TTL).
        Returns the TTL the entry got (seconds, rados_nkv.TTL_NONE for never): the namespace's
        default for ttl=0, its max_ttl where that cut @ttl; None for a plain Store (or a target
        that does not report it).
        Errors: NkvError EINVAL (status 02h: the namespace has no cache, or a pin without a finite
        TTL, also where the namespace has a max_ttl), ENOSPC (81h: past the pin quota; nothing
        stored), EOPNOTSUPP (a target without Store TTL).
        @block_hash: the serving engine's hash of the KV block in @value, an int 0..2**64-1 or bytes
        (their last 8 bytes, big-endian); on a cache namespace the gateway names the entry by it in
        its llm-d KV events (BlockStored, BlockRemoved), elsewhere it is ignored."""
        return self._drive(self._plan_store(key, value, nsid, must_exist, must_not_exist, ttl, pin, block_hash))

    def retrieve(self, key, *, nsid=None):
        """The value of @key as bytes, or None when there is no such key."""
        return self._drive(self._plan_retrieve(key, nsid))

    def retrieve_into(self, key, out, *, offset=0, nsid=None):
        """Read @key's value from byte @offset straight into @out (a writable buffer or CPU torch
        tensor). Returns the value's full size (min(nbytes(out), size - offset) bytes were written),
        or None when there is no such key. @offset > 0 is a Retrieve Range."""
        return self._drive(self._plan_retrieve_into(key, out, offset, nsid))

    def exist(self, key, *, nsid=None):
        """Does @key exist?"""
        return self._drive(self._plan_exist(key, nsid))

    def delete(self, key, *, nsid=None):
        """Delete @key; False when it was absent."""
        return self._drive(self._plan_delete(key, nsid))

    def list(self, start=b"", *, nsid=None, limit=None):
        """Every key >= @start (all keys for b""), ascending (byte order, shorter first), at most
        @limit of them."""
        return self._drive(self._plan_list(start, nsid, limit))

    def store_many(self, keys, values, *, nsid=None, ttl=None, pin=False, block_hashes=None):
        """Store values[i] under keys[i], all in flight at once; @ttl and @pin as store(), for every
        item; block_hashes[i] (None: none) as store()'s @block_hash. Raises BatchError listing the
        items that failed (the others were stored). With @ttl or @pin, returns the TTL each entry got
        (as store()); else None."""
        return self._drive(self._plan_store_many(keys, values, nsid, ttl, pin, block_hashes))

    def retrieve_many(self, keys, outs, *, offsets=None, nsid=None):
        """Read each keys[i] into outs[i] (from offsets[i]), all in flight at once. Returns the full
        value sizes, None for missing keys; BatchError for other failures."""
        return self._drive(self._plan_retrieve_many(keys, outs, offsets, nsid))

    def exist_many(self, keys, *, nsid=None):
        """[exist(k) for k in keys], in one batch."""
        return self._drive(self._plan_exist_many(keys, nsid))

    def delete_many(self, keys, *, nsid=None):
        """[delete(k) for k in keys], in one batch."""
        return self._drive(self._plan_delete_many(keys, nsid))

    def put_named(self, name, payload, *, nsid=None, ttl=None, pin=False):
        """Store @payload under the long name @name (str or bytes, 1..4096 bytes); @ttl and @pin as
        store(), and so is the value returned."""
        return self._drive(self._plan_put_named(name, payload, nsid, ttl, pin))

    def get_named(self, name, *, nsid=None):
        """The payload stored under @name, or None (absent, or the key holds another name's value
        or a value that is not a long-name value)."""
        return self._drive(self._plan_get_named(name, nsid))

    def get_named_into(self, name, out, *, nsid=None):
        """Read @name's payload straight into @out (Retrieve Range at the header size, beside a
        small header read). Returns the payload length (min(nbytes(out), length) bytes written),
        or None for a miss (absent, hash collision, foreign object)."""
        return self._drive(self._plan_get_named_into(name, out, nsid))

    def exists_named(self, name, *, nsid=None):
        """Does @name's value exist (the header under its key checked)?"""
        return self._drive(self._plan_exists_named(name, nsid))

    def delete_named(self, name, *, nsid=None):
        """Delete @name's value; False when absent or when the key holds something else (which is
        left alone)."""
        return self._drive(self._plan_delete_named(name, nsid))

    def put_named_many(self, names, payloads, *, nsid=None, ttl=None, pin=False):
        """put_named() for each pair, in one batch (BatchError for failed items); @ttl and @pin as
        store(), for every item (returned as by store_many())."""
        return self._drive(self._plan_put_named_many(names, payloads, nsid, ttl, pin))

    def get_named_many(self, names, outs, *, nsid=None):
        """get_named_into() for each pair, all reads in flight at once."""
        return self._drive(self._plan_get_named_many(names, outs, nsid))

    def exists_named_many(self, names, *, nsid=None):
        """exists_named() for each name, in one batch."""
        return self._drive(self._plan_exists_named_many(names, nsid))

    # ---- memory --------------------------------------------------------------------------------

    def alloc(self, nbytes):
        """@nbytes of memory registered with the controller (nkv_buf_alloc: zero copy over shm; plain
        memory over TCP) as a writable memoryview; it lives until the client closes."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise TypeError("nbytes must be an int, not %s" % type(nbytes).__name__)
        if nbytes <= 0:
            raise ValueError("nbytes must be positive, got %d" % nbytes)
        if self._mp:  # several controllers: plain memory, as over TCP
            arr = (ctypes.c_char * nbytes)()
            mv = memoryview(arr).cast("B")
            self._allocs[ctypes.addressof(arr)] = (arr, mv)
            return mv
        with self._use():
            p = _ffi.nkv_buf_alloc(self._ctrl, nbytes)
        if not p:
            raise NkvError(E.ENOMEM, "alloc of %d bytes (out of memory, or the controller's registration "
                           "limits)" % nbytes)
        arr = (ctypes.c_char * nbytes).from_address(p)
        mv = memoryview(arr).cast("B")
        self._allocs[p] = (arr, mv)
        return mv

    def register(self, obj):
        """Register @obj's memory (a buffer or CPU torch tensor) with the controller, so commands on
        it move no copy over shm (a no-op over TCP). The client keeps @obj alive until
        unregister() or close(). Raises NkvError: EINVAL (not private anonymous memory), EEXIST
        (overlaps a registered buffer), ENOSPC (registration limits)."""
        addr, n, keep = buffer_info(obj, False, "buffer")
        if not n:
            raise ValueError("cannot register an empty buffer")
        with self._use():
            if addr in self._registered:
                raise NkvError(E.EEXIST, "register: %#x is already registered" % addr)
            rc = 0 if self._mp else _ffi.nkv_buf_register(self._ctrl, addr, n)
            if rc:
                raise NkvError(rc, "register of %d bytes at %#x" % (n, addr))
            self._registered[addr] = (obj, keep)

    def unregister(self, obj):
        """Undo register(@obj). Raises ValueError when @obj is not registered, NkvError(EBUSY) while
        a command still uses it."""
        addr, _n, _keep = buffer_info(obj, False, "buffer")
        with self._use():
            if addr not in self._registered:
                raise ValueError("unregister: this buffer is not registered with this client")
            rc = 0 if self._mp else _ffi.nkv_buf_unregister(self._ctrl, addr)
            if rc:
                raise NkvError(rc, "unregister of %#x" % addr)
            del self._registered[addr]


def _parse_list(page, xfer, start):
    """Keys of a List answer ({u32 count, then u16 KL, key, pad to 4} little endian)."""
    raw = page.raw[:xfer] if xfer <= len(page) else None
    if raw is None or len(raw) < 4:
        if xfer == 0:
            return []
        raise NkvError(E.EPROTO, "list from %s: %d bytes of List data" % (start.hex(), xfer))
    count = int.from_bytes(raw[0:4], "little")
    pos, keys = 4, []
    for _ in range(count):
        if pos + 2 > len(raw):
            raise NkvError(E.EPROTO, "list from %s: entry past the data" % start.hex())
        kl = raw[pos] | raw[pos + 1] << 8
        if not 1 <= kl <= KEY_MAX or pos + 2 + kl > len(raw):
            raise NkvError(E.EPROTO, "list from %s: malformed entry (key length %d)" % (start.hex(), kl))
        keys.append(raw[pos + 2:pos + 2 + kl])
        pos += (2 + kl + 3) & ~3
    return keys
