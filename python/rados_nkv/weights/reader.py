# SPDX-License-Identifier: Apache-2.0
"""Stream a model revision's tensors out of the store, straight into tensor memory.

For each tensor, every chunk its bytes overlap is read with a Retrieve Range (Client.retrieve_many
with offsets = the chunk's long-name header size + the tensor's offset inside the chunk) directly
into the tensor's storage at the matching offset; reads longer than `read_size` are split so that
one large tensor still spreads over every queue pair. No byte is copied on the host.

Memory: tensors are laid out in windows of about `window` bytes; a tensor larger than that gets a
window of its own. A window lives in a slot: an anonymous private mapping (page aligned) shared by
the tensors handed out of it, each a 64-byte aligned view with its own dtype and shape
(torch.frombuffer: the tensors keep the mapping alive; it is unmapped when the last of them goes).
Slots are recycled: once the consumer has dropped every tensor of a window (Python's reference
count of the mapping says so exactly; vLLM's load_weights copies each tensor into the model and
drops it), the slot takes a later window, its pages already faulted in. Memory a consumer keeps is
never reused.

Over shm, every slot is registered with Client.register() when it is made ("always", the default):
nkv_buf_register turns its pages into registered memory in place, so the target writes the tensor
bytes straight into them (zero copy). Registering costs a copy of the region into a memfd and the
target's page faults on its new mapping, paid once per slot; recycling spreads it over every
window the slot takes. With small windows (64 MiB) that beats the library's bounce buffers (one
more copy per read); "never" uses them, "reuse" registers a slot only when it is reused. Up to
`prefetch` windows are read ahead while the consumer works on the current one; reads run in
batches of about `batch` bytes on `workers` threads, each batch one retrieve_many() with all its
reads in flight across the queue pairs.

Before any data moves, the header of every chunk is read (one small batch) and checked: it must be
the chunk's own long-name header announcing the manifest's length, so a missing chunk, a foreign
object or a half-replaced upload fails loudly instead of loading wrong bytes. The full value size
each data read reports is checked again.
"""

import concurrent.futures as cf
import logging
import mmap
import sys

from .. import longname
from ..errors import NkvError, BatchError
from .manifest import chunk_name
from .safetensors import torch_dtype

__all__ = ["LoadError", "iter_tensors", "load_state_dict", "DEFAULT_WINDOW", "DEFAULT_READ", "DEFAULT_WORKERS",
           "DEFAULT_BATCH"]

log = logging.getLogger("rados_nkv.weights")

DEFAULT_WINDOW = 64 << 20    # bytes of tensors per window
DEFAULT_READ = 8 << 20       # largest single read
DEFAULT_BATCH = 64 << 20     # bytes per retrieve_many() batch (the progress bar's step)
DEFAULT_WORKERS = 4          # threads running batches
DEFAULT_PREFETCH = 1         # windows read ahead of the one being handed out
ALIGN = 64
MAX_OPS = 1024               # reads per batch at most


class LoadError(RuntimeError):
    """A tensor could not be loaded (missing or wrong chunk, read failure); the message names the
    model, file, chunk and tensor."""


class _Piece:
    """One read: @length bytes at @offset of chunk @name's payload into window bytes [dst, dst + length)."""

    __slots__ = ("name", "key", "hdr", "offset", "dst", "length", "expect")

    def __init__(self, name, key, hdr, offset, dst, length, expect):
        self.name, self.key, self.hdr, self.offset = name, key, hdr, offset
        self.dst, self.length, self.expect = dst, length, expect


class _Window:
    """Tensors [(file entry, tensor info, offset in the window)] laid out in one slot of memory."""

    def __init__(self):
        self.items = []
        self.size = 0
        self.slot = None
        self.futures = []

    def add(self, fe, t):
        off = (self.size + ALIGN - 1) // ALIGN * ALIGN
        self.items.append((fe, t, off))
        self.size = off + t.nbytes


class _Slot:
    """An anonymous private mapping windows are read into; .idle_refs is its reference count when
    nothing but the pool (and the client, while registered) holds it."""

    def __init__(self, size):
        self.size = size
        self.mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.registered = False
        self.uses = 0
        self.last = -1  # the window that used it last
        self.idle_refs = sys.getrefcount(self.mm)

    def idle(self):
        """No tensor (nor anything else) of an earlier window still uses this memory. Every tensor
        made from it holds, through torch.frombuffer's storage, a reference to the mapping."""
        return sys.getrefcount(self.mm) == self.idle_refs


class _SlotPool:
    """Memory for windows, reused once the consumer has dropped every tensor of a window.

    A consumer that copies each tensor away and drops it (vLLM's load_weights copies into the
    model's parameters) gets its windows recycled: the pages are already faulted in and, over shm,
    already registered, so reads land in them at memory speed with no copy. A slot still in use by
    the consumer when the pool looks for memory is retired: unregistered (its memory stays mapped
    for the tensors) and left to them."""

    def __init__(self, client, mode, keep):
        self.client, self.mode, self.keep = client, mode, keep
        self.slots = []
        self.warned = False
        self.stats = {"windows": 0, "slots": 0, "reused": 0, "registered": 0, "retired": 0}

    def _register(self, s):
        try:
            self.client.register(s.mm)
            s.registered = True
            self.stats["registered"] += 1
        except NkvError as e:
            if not self.warned:
                self.warned = True
                log.warning("rados_nkv weights: cannot register a %d-byte window (%s): reads go through the "
                            "bounce buffer", s.size, e)
        s.idle_refs = sys.getrefcount(s.mm)

    def _retire(self, s):
        self.slots.remove(s)
        if s.registered:
            self.client.unregister(s.mm)
            s.registered = False

    def acquire(self, size, busy, now, win):
        """A slot of at least @size bytes for window @win, not in @busy (slots of windows being read
        or handed out), while the consumer works on window @now."""
        free = [s for s in self.slots if s not in busy and s.size >= size and s.idle()]
        if free:
            s = min(free, key=lambda x: x.size)
            self.stats["reused"] += 1
            if self.mode == "reuse" and not s.registered:
                self._register(s)
        else:
            # The consumer may still hold the last tensor of the window before @now (a loop variable
            # is rebound only when the next item arrives); older windows still held are its to keep.
            for old in [x for x in self.slots if x not in busy and x.last < now - 1 and not x.idle()]:
                self._retire(old)
                self.stats["retired"] += 1
            while len(self.slots) >= self.keep:
                idle = [x for x in self.slots if x not in busy and x.idle()]
                if not idle:
                    break
                self._retire(min(idle, key=lambda x: x.size))
            s = _Slot((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE)
            if self.mode == "always":
                self._register(s)
            self.slots.append(s)
            self.stats["slots"] += 1
        s.uses += 1
        s.last = win
        self.stats["windows"] += 1
        return s

    def close(self):
        for s in list(self.slots):
            self._retire(s)


def _plan_windows(m, window, names):
    wins, cur = [], _Window()
    for fe in m.files:
        for t in fe.tensors:
            if names is not None and t.name not in names:
                continue
            if cur.items and cur.size + t.nbytes > window:
                wins.append(cur)
                cur = _Window()
            cur.add(fe, t)
    if cur.items:
        wins.append(cur)
    return wins


def _pieces(m, win, read_size, hsize):
    """The reads filling @win: each tensor's file range cut at chunk boundaries and at @read_size."""
    out = []
    cs = m.chunk_size
    for fe, t, woff in win.items:
        pos, end = fe.data_start + t.begin, fe.data_start + t.end
        while pos < end:
            idx, coff = divmod(pos, cs)
            n = min(end - pos, cs - coff, read_size)
            name = chunk_name(m.model, m.rev, fe.name, idx)
            h = hsize[name]
            out.append(_Piece(name, longname.key_for(name), h, h + coff, woff + (pos - fe.data_start - t.begin),
                              n, h + fe.chunk_len(idx)))
            pos += n
    return out


def _check_headers(client, m, chunks):
    """Read the header of every chunk in @chunks [(file entry, index, name)] and check it."""
    bad = []
    for i in range(0, len(chunks), MAX_OPS):
        part = chunks[i:i + MAX_OPS]
        bufs = [bytearray(longname.header_size(nm)) for _f, _i, nm in part]
        try:
            sizes = client.retrieve_many([longname.key_for(nm) for _f, _i, nm in part], bufs)
        except BatchError as e:
            f, ix, nm = part[e.errors[0][0]]
            raise LoadError("%s %s: reading the header of %s chunk %d (%s) failed: %s"
                            % (m.model, m.rev, f.name, ix, nm, e.errors[0][1].strerror)) from None
        for (fe, ix, nm), b, size in zip(part, bufs, sizes):
            want = fe.chunk_len(ix)
            where = "%s chunk %d (%s)" % (fe.name, ix, nm)
            if size is None:
                bad.append("%s is missing" % where)
                continue
            plen = longname.check_header(b, nm) if size >= len(b) else None
            if plen is None:
                bad.append("%s: the object under its key is not this chunk" % where)
            elif plen != want or size != len(b) + want:
                bad.append("%s holds %d bytes, the manifest says %d (re-uploaded under way?)"
                           % (where, size - len(b), want))
    if bad:
        more = " (and %d more)" % (len(bad) - 3) if len(bad) > 3 else ""
        raise LoadError("%s %s: %s%s; `nkv-weights verify` checks the whole upload"
                        % (m.model, m.rev, "; ".join(bad[:3]), more))


def _run_batch(client, m, mv, pieces):
    try:
        sizes = client.retrieve_many([p.key for p in pieces], [mv[p.dst:p.dst + p.length] for p in pieces],
                                     offsets=[p.offset for p in pieces])
    except BatchError as e:
        i, err = e.errors[0]
        raise LoadError("%s %s: reading %s at offset %d failed (%d of %d reads failed): %s"
                        % (m.model, m.rev, pieces[i].name, pieces[i].offset - pieces[i].hdr, len(e.errors),
                           len(pieces), err.strerror)) from None
    except NkvError as e:
        raise LoadError("%s %s: reading chunks failed: %s" % (m.model, m.rev, e)) from None
    for p, size in zip(pieces, sizes):
        if size is None:
            raise LoadError("%s %s: chunk %s disappeared while loading" % (m.model, m.rev, p.name))
        if size != p.expect:
            raise LoadError("%s %s: chunk %s changed while loading (%d bytes, expected %d)"
                            % (m.model, m.rev, p.name, size - p.hdr, p.expect - p.hdr))
    return sum(p.length for p in pieces)


def iter_tensors(client, manifest, *, window=DEFAULT_WINDOW, read_size=DEFAULT_READ, batch=DEFAULT_BATCH,
                 workers=DEFAULT_WORKERS, prefetch=DEFAULT_PREFETCH, register=None, progress=None, names=None,
                 stats=None):
    """Yield (name, CPU torch tensor) for every tensor of @manifest (a Manifest), file by file in
    data order. @register: "always" (register each slot when made), "reuse" (when first reused),
    "never", True (always), False (never), None ("always" over shm, "never" over TCP, where
    registering is a no-op).
    @progress: a tqdm-like object with update(nbytes), or None. @names: only these tensor names (a
    set). @stats: a dict filled at the end with windows, slots, reused, registered, retired.
    Raises LoadError."""
    import torch

    for arg, v in (("window", window), ("read_size", read_size), ("batch", batch), ("workers", workers)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError("%s must be a positive integer, got %r" % (arg, v))
    if prefetch < 0:
        raise ValueError("prefetch must be >= 0")
    m = manifest
    wins = _plan_windows(m, window, names)
    used = {}
    for w in wins:
        for fe, t, _off in w.items:
            if t.nbytes:
                for idx in range((fe.data_start + t.begin) // m.chunk_size,
                                 (fe.data_start + t.end - 1) // m.chunk_size + 1):
                    used[(fe.name, idx)] = fe
    chunks = [(fe, idx, chunk_name(m.model, m.rev, fe.name, idx)) for (_n, idx), fe in used.items()]
    _check_headers(client, m, chunks)
    hsize = {nm: longname.header_size(nm) for _f, _i, nm in chunks}
    dtypes = {}
    for w in wins:
        for _fe, t, _off in w.items:
            if t.dtype not in dtypes:
                dtypes[t.dtype] = torch_dtype(t.dtype)

    if register is None:
        mode = "always" if client.transport in ("shm", "vfio-user") else "never"
    else:
        mode = {True: "always", False: "never"}.get(register, register)
        if mode not in ("always", "never", "reuse"):
            raise ValueError("register must be True, False, None, \"always\", \"never\" or \"reuse\"")
    slots = _SlotPool(client, mode, prefetch + 3)  # being read, handed out, just handed out, reusable
    pool = cf.ThreadPoolExecutor(workers, thread_name_prefix="nkv-weights")

    def start(w, busy, now, idx):
        if w.size:
            w.slot = slots.acquire(w.size, busy, now, idx)
            mv = memoryview(w.slot.mm)
        else:
            mv = None
        cur, nbytes = [], 0
        for p in _pieces(m, w, read_size, hsize):
            if cur and (nbytes + p.length > batch or len(cur) >= MAX_OPS):
                w.futures.append(pool.submit(_run_batch, client, m, mv, cur))
                cur, nbytes = [], 0
            cur.append(p)
            nbytes += p.length
        if cur:
            w.futures.append(pool.submit(_run_batch, client, m, mv, cur))

    def finish(w):
        try:
            for f in w.futures:
                done = f.result()
                if progress is not None:
                    progress.update(done)
        finally:
            for f in w.futures:
                f.cancel()
            cf.wait(w.futures)
            w.futures = []

    started = 0
    try:
        for i, w in enumerate(wins):
            while started < len(wins) and started <= i + prefetch:
                busy = {x.slot for x in wins[i:started] if x is not None and x.slot is not None}
                start(wins[started], busy, i, started)
                started += 1
            finish(w)
            arena = torch.frombuffer(w.slot.mm, dtype=torch.uint8) if w.slot is not None else None
            for fe, t, off in w.items:
                dt = dtypes[t.dtype]
                if t.nbytes:
                    ten = arena[off:off + t.nbytes].view(dt).view(t.shape)
                else:
                    ten = torch.empty(t.shape, dtype=dt)
                yield t.name, ten
                del ten  # hold nothing of the window once the consumer has it
            del arena
            wins[i] = None
    finally:
        for w in wins[:started]:
            if w is None:
                continue
            for f in w.futures:
                f.cancel()
            cf.wait(w.futures)
        pool.shutdown(wait=True)
        if stats is not None:
            stats.update(slots.stats)
        slots.close()


def load_state_dict(client, manifest, **kw):
    """{name: tensor} of every tensor (iter_tensors() collected)."""
    return dict(iter_tensors(client, manifest, **kw))

