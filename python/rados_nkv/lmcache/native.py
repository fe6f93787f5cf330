# SPDX-License-Identifier: Apache-2.0
"""NativePlugin: the connector object of LMCache's multi-process mode L2 adapter "native_plugin".

LMCache builds it as NativePlugin(**adapter_params) and drives it from its own threads: submits
batches (submit_batch_get/set/exists/delete, each returning a future id at once), polls event_fd()
for readability on a demux thread and then calls drain_completions(), which returns
(future_id, ok, error, result_bools) for every batch that finished. This maps one to one onto
libnkv's engine: a batch is one nkv_engine_submit() under a fresh tag, event_fd() is the engine's
eventfd (readable while finished batches wait to be reaped) and drain_completions() reaps them.

Keys are LMCache's object-key strings, stored as long names (rados_nkv.longname): the value is the
long-name header, then the object's bytes (no LMCache metadata: the multi-process mode knows the
layout). A value of another name under the same 16-byte key, or not a long-name value at all, is
a miss. Loads are zero copy: the bytes are read with a Retrieve Range straight into the
memoryviews LMCache hands over; a store copies each object once into a staging buffer (header and
payload are one Store).

Results: get: result_bools[i] is True when the object was found and filled the view exactly (a
value of another size is a miss: a load must not leave part of an L1 object stale); set: True when
stored; exists: True when present with this name; delete: True when a value of this name was
deleted (a value of another name under the key is left alone). ok is False when some item failed
for a reason other than absence (error says the first), True otherwise.
"""

import ctypes
import errno as E
import itertools
import threading

from .. import _ffi
from .. import longname as _ln
from ..buffers import buffer_info
from ..errors import NkvError, op_error
from . import settings as _settings
from .staging import StagingPool

REAP_MAX = 64
_EMPTY_KEY = b"rados_nkv.empty"   # the carrier op of an empty batch (see _submit)

_GET, _SET, _EXISTS, _DEL_CHECK, _DEL = "get", "set", "exists", "delete-check", "delete"


class _Batch:
    """One submitted batch: what it was, and everything its ops point to (kept alive until it
    completes)."""

    __slots__ = ("kind", "fid", "n", "ops", "names", "hdrs", "keep", "stagings", "lens", "items")

    def __init__(self, kind, fid, n):
        self.kind, self.fid, self.n = kind, fid, n
        self.ops = self.names = self.hdrs = self.keep = self.stagings = self.lens = self.items = None


class NativePlugin:
    """LMCache native_plugin connector over a rados-nkv target. Keyword arguments (LMCache's
    adapter_params): target / shm_socket, subnqn, nsid, queues, depth, timeout, hostnqn,
    discovery_port, staging_mb (see rados_nkv.lmcache.settings); or client= an open
    rados_nkv.Client of its own (its completions are this plugin's: do not use it elsewhere)."""

    def __init__(self, client=None, **params):
        self.settings = _settings.from_kwargs(**params)
        if client is None:
            self._client = _settings.connect(self.settings)
            self._owns = True
        else:
            self._client = client
            self._owns = False
        self._eng = self._client.engine
        self._nsid = self._client.nsid
        self._staging = StagingPool(self._client, self.settings["staging_mb"] << 20)
        self._lock = threading.Lock()
        self._tags = itertools.count(1)
        self._pending = {}        # engine tag -> _Batch
        self._closed = False

    @property
    def client(self):
        return self._client

    def event_fd(self):
        """The engine's eventfd: readable while finished batches wait for drain_completions()."""
        return self._eng.eventfd()

    # ---- submitting ----------------------------------------------------------------------------

    def _submit(self, batch, ops, n):
        """Hand @ops to the engine under a new tag; the batch is known before it can complete."""
        if n == 0:
            # an empty batch still completes through the eventfd: one harmless Exist carries it
            ops = _ffi.op_array(1)
            _ffi.make_op(_ffi.OP_EXIST, _EMPTY_KEY, nsid=self._nsid, op=ops[0])
            n = 1
        batch.ops = ops
        with self._lock:
            if self._closed:
                raise NkvError(E.ESHUTDOWN, "native plugin: closed")
            tag = next(self._tags)
            self._pending[tag] = batch
        try:
            self._eng.submit(ops, tag)
        except BaseException:
            with self._lock:
                self._pending.pop(tag, None)
            self._release(batch)
            raise
        return tag

    def _new(self, kind, n):
        with self._lock:
            fid = next(self._tags)
        return _Batch(kind, fid, n)

    def _names(self, keys):
        return [_ln.name_bytes(k) for k in keys]

    def submit_batch_get(self, keys, memoryviews):
        """Load each keys[i] into memoryviews[i] (writable; its nbytes is the object's size).
        Returns the future id."""
        keys, views = list(keys), list(memoryviews)
        if len(keys) != len(views):
            raise ValueError("%d keys but %d memoryviews" % (len(keys), len(views)))
        b = self._new(_GET, len(keys))
        b.names = self._names(keys)
        b.keep, b.hdrs, b.lens = [], [], []
        ops = _ffi.op_array(2 * len(keys)) if keys else None
        for i, name in enumerate(b.names):
            addr, nbytes, keep = buffer_info(views[i], True, "memoryviews[%d]" % i)
            if nbytes > _ffi.U32_MAX:
                raise ValueError("memoryviews[%d] of %d bytes: at most 2**32-1" % (i, nbytes))
            key = _ln.key_for(name)
            h = _ln.header_size(name)
            hdr = ctypes.create_string_buffer(h)
            b.keep.append(keep)
            b.hdrs.append(hdr)
            b.lens.append(nbytes)
            _ffi.make_op(_ffi.OP_RETRIEVE, key, ctypes.addressof(hdr), h, nsid=self._nsid, op=ops[2 * i])
            _ffi.make_op(_ffi.OP_RETRIEVE, key, addr, nbytes, nsid=self._nsid, offset=h, op=ops[2 * i + 1])
        self._submit(b, ops, 2 * len(keys))
        return b.fid

    def submit_batch_set(self, keys, memoryviews):
        """Store memoryviews[i] under keys[i] (one copy each into a staging buffer). Returns the
        future id."""
        keys, views = list(keys), list(memoryviews)
        if len(keys) != len(views):
            raise ValueError("%d keys but %d memoryviews" % (len(keys), len(views)))
        b = self._new(_SET, len(keys))
        b.names = self._names(keys)
        b.stagings = []
        ops = _ffi.op_array(len(keys)) if keys else None
        try:
            for i, name in enumerate(b.names):
                saddr, nbytes, skeep = buffer_info(views[i], False, "memoryviews[%d]" % i)
                h = _ln.header_size(name)
                total = h + nbytes
                if total > _ffi.U32_MAX:
                    raise ValueError("memoryviews[%d] of %d bytes: header and payload must fit 2**32-1" % (i, nbytes))
                st = self._staging.get(total)
                b.stagings.append(st)
                st[:h] = _ln.pack_header(name, nbytes)
                daddr = buffer_info(st, True, "staging")[0]
                ctypes.memmove(daddr + h, saddr, nbytes)
                del skeep
                _ffi.make_op(_ffi.OP_STORE, _ln.key_for(name), daddr, total, nsid=self._nsid, op=ops[i])
        except BaseException:
            self._release(b)
            raise
        self._submit(b, ops, len(keys))
        return b.fid

    def _header_reads(self, b):
        b.hdrs = []
        ops = _ffi.op_array(b.n) if b.n else None
        for i, name in enumerate(b.names):
            h = _ln.header_size(name)
            hdr = ctypes.create_string_buffer(h)
            b.hdrs.append(hdr)
            _ffi.make_op(_ffi.OP_RETRIEVE, _ln.key_for(name), ctypes.addressof(hdr), h, nsid=self._nsid,
                         op=ops[i])
        return ops

    def submit_batch_exists(self, keys):
        """Which keys exist (their headers read and checked). Returns the future id."""
        b = self._new(_EXISTS, len(keys))
        b.names = self._names(keys)
        self._submit(b, self._header_reads(b), b.n)
        return b.fid

    def submit_batch_delete(self, keys):
        """Delete the values of these names: their headers are read first and only values that
        carry the name are deleted (a second batch, started by drain_completions()). Returns the
        future id."""
        b = self._new(_DEL_CHECK, len(keys))
        b.names = self._names(keys)
        self._submit(b, self._header_reads(b), b.n)
        return b.fid

    # ---- completing ----------------------------------------------------------------------------

    def drain_completions(self):
        """[(future_id, ok, error, result_bools)] of every batch finished since the last call
        (none waiting: []). Never blocks."""
        out = []
        while True:
            tags = self._eng.reap(REAP_MAX, 0)
            for tag in tags:
                with self._lock:
                    b = self._pending.pop(tag, None)
                if b is not None:
                    try:
                        done = self._finish(b)
                    except Exception as e:  # noqa: BLE001 - the batch must complete either way
                        self._release(b)
                        done = (b.fid, False, "%s: %s" % (b.kind, e), [False] * b.n)
                    if done is not None:
                        out.append(done)
            if len(tags) < REAP_MAX:
                return out

    def _header_ok(self, b, i, op):
        """For a header read: (present with this name, error or None)."""
        if op.rc == -E.ENOENT:
            return False, None
        if op.rc:
            return False, op_error(op, b.kind)
        plen = _ln.check_header(memoryview(b.hdrs[i])[:op.xfer], b.names[i])
        if plen is None:          # another name's value (hash collision) or a foreign object
            return False, None
        return op.value_size == len(b.hdrs[i]) + plen, None

    def _finish(self, b):
        """The completion tuple of batch @b, or None when it went on to a second batch."""
        n = b.n
        res, errs = [False] * n, []
        ops = b.ops
        if b.kind == _GET:
            for i in range(n):
                oh, od = ops[2 * i], ops[2 * i + 1]
                found, err = self._header_ok(b, i, oh)
                if err is None and found and od.rc and od.rc != -E.ENOENT:
                    err = op_error(od, "get")
                if err is not None:
                    errs.append((i, err))
                    continue
                if not found or od.rc:
                    continue
                plen = oh.value_size - _ln.header_size(b.names[i])
                res[i] = (od.value_size == oh.value_size and plen == b.lens[i] and od.xfer == b.lens[i])
        elif b.kind == _SET:
            for i in range(n):
                if ops[i].rc:
                    errs.append((i, op_error(ops[i], "set")))
                else:
                    res[i] = True
        elif b.kind in (_EXISTS, _DEL_CHECK):
            for i in range(n):
                found, err = self._header_ok(b, i, ops[i])
                if err is not None:
                    errs.append((i, err))
                res[i] = found
            if b.kind == _DEL_CHECK:
                return self._delete_found(b, res, errs)
        elif b.kind == _DEL:
            for j, i in enumerate(b.items):
                if ops[j].rc == -E.ENOENT:
                    continue
                if ops[j].rc:
                    errs.append((i, op_error(ops[j], "delete")))
                else:
                    res[i] = True
        self._release(b)
        if errs:
            errs.sort(key=lambda e: e[0])
            first = errs[0]
            msg = "%d of %d items failed; first: item %d: %s" % (len(errs), n, first[0], first[1])
            return (b.fid, False, msg, res)
        return (b.fid, True, "", res)

    def _delete_found(self, b, found, errs):
        """Second step of a delete: delete the keys whose headers carry the name."""
        which = [i for i in range(b.n) if found[i]]
        self._release(b)
        if errs or not which:
            if errs:
                first = errs[0]
                return (b.fid, False, "%d of %d items failed; first: item %d: %s"
                        % (len(errs), b.n, first[0], first[1]), [False] * b.n)
            return (b.fid, True, "", [False] * b.n)
        d = _Batch(_DEL, b.fid, b.n)
        d.items = which           # the item index of each delete op
        ops = _ffi.op_array(len(which))
        for j, i in enumerate(which):
            _ffi.make_op(_ffi.OP_DELETE, _ln.key_for(b.names[i]), nsid=self._nsid, op=ops[j])
        try:
            self._submit(d, ops, len(which))
        except NkvError as e:
            return (b.fid, False, "delete: %s" % e, [False] * b.n)
        return None

    def _release(self, b):
        for st in b.stagings or ():
            self._staging.put(st)
        b.stagings = None
        b.keep = None

    # ---- closing -------------------------------------------------------------------------------

    def close(self):
        """Finish what is in flight (each op within its deadline), then close the connection
        (when this plugin opened it). Batches not drained are dropped. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns:
            self._client.close()
        with self._lock:
            pending, self._pending = self._pending, {}
        for b in pending.values():
            self._release(b)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
