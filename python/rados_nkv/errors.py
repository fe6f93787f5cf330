# SPDX-License-Identifier: Apache-2.0
"""NkvError and BatchError: failures with the errno libnkv returned and, when the command reached a
controller, the exact NVMe status it answered."""

import os

from . import _ffi

__all__ = ["NkvError", "BatchError", "status_name"]

_OP_NAMES = {_ffi.OP_STORE: "store", _ffi.OP_RETRIEVE: "retrieve", _ffi.OP_DELETE: "delete",
             _ffi.OP_EXIST: "exist", _ffi.OP_LIST: "list"}


def status_name(status):
    """nkv_status_string(): "Key Does Not Exist (SCT 1h SC 87h)"."""
    return _ffi.nkv_status_string(status).decode("utf-8", "replace")


class NkvError(OSError):
    """A failed call. .errno: the positive errno; .status: the NVMe status (SCT << 8 | SC) the
    controller answered, or None when the command never got an answer (a bad argument libnkv
    refused, a lost connection before the CQE: then status is 0x370 Host Pathing Error, a timeout);
    .status_name: its name (None without a status); .op and .key: what failed, when known."""

    def __init__(self, errno, message, *, status=None, op=None, key=None, _detail=True):
        errno = abs(int(errno))
        self.status = status if status else None
        self.status_name = status_name(status) if status else None
        self.op = op
        self.key = key
        text = message
        if _detail:
            detail = os.strerror(errno) if errno else "error"
            if self.status_name:
                detail += ", NVMe status " + self.status_name
            text = "%s: %s" % (message, detail)
        super().__init__(errno, text)

    def __reduce__(self):
        return (_rebuild, (type(self), self.errno, self.strerror, self.status, self.op, self.key))

    def __str__(self):
        return self.strerror


def _rebuild(cls, errno, text, status, op, key, errors=None):
    e = cls.__new__(cls)
    OSError.__init__(e, errno, text)
    e.status, e.op, e.key = status, op, key
    e.status_name = status_name(status) if status else None
    if errors is not None:
        e.errors = errors
    return e


def op_error(op, what=None):
    """NkvError for a completed struct nkv_op that failed (op.rc != 0)."""
    name = _OP_NAMES.get(op.type, "op %d" % op.type)
    key = op.key_bytes
    msg = "%s of key %s" % (what or name, key.hex() or "(none)")
    if op.type == _ffi.OP_RETRIEVE and op.offset:
        msg += " at offset %d" % op.offset
    return NkvError(-op.rc, msg, status=op.status, op=what or name, key=key)


class BatchError(NkvError):
    """Some items of a batch failed: .errors lists (index, NkvError) for each, in index order; the
    errno and status are the first failure's. Items not listed succeeded (or were misses where the
    call reports misses as None/False)."""

    def __init__(self, errors, total, what):
        self.errors = list(errors)
        first = self.errors[0][1]
        msg = "%s: %d of %d items failed; first: item %d: %s" % (what, len(self.errors), total,
                                                                 self.errors[0][0], first.strerror)
        super().__init__(first.errno, msg, status=first.status, op=what, key=first.key, _detail=False)

    def __reduce__(self):
        return (_rebuild, (type(self), self.errno, self.strerror, self.status, self.op, self.key, self.errors))
