# SPDX-License-Identifier: Apache-2.0
"""Memory the library reads from or writes into: any C-contiguous buffer (bytes, bytearray,
memoryview, array.array, mmap, numpy arrays) or a contiguous CPU torch tensor.

No bytes are copied here: the library gets the buffer's own address. The object returned as
"keep" pins the memory (a memoryview holds the buffer export, so a bytearray cannot be resized
and a numpy array cannot be freed under a command in flight); keep it until the command completes.
"""

import ctypes
import sys

__all__ = ["address", "buffer_info"]

PyBUF_SIMPLE = 0


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (stable layout since 3.3)."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _mv_address(mv):
    """Start address of a C-contiguous memoryview's bytes (read-only ones too, which ctypes'
    from_buffer refuses). The memoryview keeps the export alive after the release here."""
    view = _PyBuffer()
    _get_buffer(mv, ctypes.byref(view), PyBUF_SIMPLE)
    try:
        return view.buf or 0
    finally:
        _release_buffer(ctypes.byref(view))


def _torch_info(obj, what):
    if obj.device.type != "cpu":
        raise ValueError("%s is a torch tensor on %s: only CPU tensors can be used (copy with .cpu(), or "
                         "use pinned CPU memory)" % (what, obj.device))
    if not obj.is_contiguous():
        raise ValueError("%s is a non-contiguous torch tensor: call .contiguous() first" % what)
    if obj.layout != sys.modules["torch"].strided:
        raise ValueError("%s is a %s torch tensor: only dense (strided) tensors" % (what, obj.layout))
    return obj.data_ptr(), obj.numel() * obj.element_size(), obj


def buffer_info(obj, writable, what="buffer"):
    """(address, nbytes, keep) for @obj. @writable: the library will write into it (a read).

    Raises TypeError for an object without the buffer protocol, or a read-only one where
    @writable; ValueError for memory that is not one contiguous run (or a non-CPU tensor).
    """
    torch = sys.modules.get("torch")  # never imported here: torch is heavy and optional
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_info(obj, what)
    if isinstance(obj, (str, int, float)) or obj is None:
        raise TypeError("%s must be a bytes-like object (bytes, bytearray, memoryview, numpy array) or a "
                        "CPU torch tensor, not %s" % (what, type(obj).__name__))
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("%s must be a bytes-like object (bytes, bytearray, memoryview, numpy array) or a "
                        "CPU torch tensor, not %s" % (what, type(obj).__name__)) from None
    if writable and mv.readonly:
        raise TypeError("%s is read-only (%s): a read needs writable memory (bytearray, numpy array, "
                        "torch tensor, Client.alloc())" % (what, type(obj).__name__))
    if not mv.c_contiguous:
        raise ValueError("%s is not C-contiguous (%s): pass one contiguous run of memory"
                         % (what, type(obj).__name__))
    return _mv_address(mv), mv.nbytes, mv


def address(obj, writable=False):
    """(address, nbytes) of a buffer or CPU torch tensor, for make_op(). The caller keeps @obj alive
    and unresized while a command uses the address."""
    addr, n, _ = buffer_info(obj, writable)
    return addr, n
