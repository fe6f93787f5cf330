# SPDX-License-Identifier: Apache-2.0
"""RadosNkvConnector: an LMCache remote connector (RemoteConnector) over a rados-nkv target.

Each chunk is one long-name value (rados_nkv.longname): the key is SHA-256(key.to_string())[0:16]
and the value is the long-name header (which carries the whole name), then LMCache's
RemoteMetadata (8 + 20 bytes per KV layer group; unless extra_config.save_chunk_meta is false),
then the chunk's bytes. A value whose header carries another name (a hash collision) or is no
long-name header at all (a foreign object under the same key) is a miss, never someone else's data.

Reads are zero copy: a get allocates the MemoryObj from LMCache's CPU backend first and reads the
chunk straight into its memory with a Retrieve Range at the payload's offset, beside a small read
of the header (+ metadata) in the same batch. The chunk layout of the previous hit is the guess for
the next one, so a get with the metadata on is one round trip unless the layout changed (then a
second). Over shm, LMCache's whole CPU arena is registered once (as Mooncake's connector does), so
the target writes into the MemoryObj in place. A store copies the chunk once into a registered
staging buffer: a value is one contiguous Store and the header must precede the chunk.

LMCache is imported only to subclass its RemoteConnector and ConnectorAdapter; without LMCache the
classes still import (their base is object) so tooling and tests can load this module. Both the
current base (RemoteConnector.__init__(config, metadata), LMCache PR #2314 on; batched_contains ->
int) and the previous one (no __init__, init_chunk_meta(); batched_contains -> List[bool]) are
served: which one is read from the base class itself.
"""

import asyncio
import ctypes
import inspect
import logging

from .. import longname as _ln
from ..buffers import buffer_info
from ..errors import NkvError
from . import framing
from . import settings as _settings
from .staging import StagingPool

log = logging.getLogger("rados_nkv.lmcache")

try:
    from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector as _ConnectorBase
except ImportError:      # LMCache not installed: importable all the same
    _ConnectorBase = object
try:
    from lmcache.v1.storage_backend.connector import ConnectorAdapter as _AdapterBase
except ImportError:
    _AdapterBase = object

HAVE_LMCACHE = _ConnectorBase is not object


def _params(func):
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []


# The base's generation: the current one takes (config, metadata) and sets the header-less
# attributes itself (meta_shapes, meta_dtypes, full_chunk_size_bytes, remote_metadata_bytes); the
# previous one has no __init__ and gets init_chunk_meta(config, metadata) from LMCache's
# ConnectorManager. Likewise batched_contains returns the prefix hit count now, a List[bool] before.
BASE_TAKES_METADATA = "metadata" in _params(_ConnectorBase.__init__)
CONTAINS_RETURNS_LIST = "stop_after_first_not_exits" in _params(
    getattr(_ConnectorBase, "batched_contains", None) or (lambda self, keys: 0))
ATTEMPTS = 4        # reads of one chunk whose value or layout changed under us before giving up
LIST_HEAD = 512     # bytes read per value by list() to find its name (more when the name is longer)
PING_KEY = b"rados_nkv.ping"


def _block_hash(key):
    """The hash the gateway's KV events name @key's chunk by: LMCache's chunk hash, the number LMCache's
    own KV events give the chunk (an int, masked to 64 bits as llm-d does, or bytes); None for a key
    without one."""
    h = getattr(key, "chunk_hash", None)
    if isinstance(h, int) and not isinstance(h, bool):
        return h & 0xFFFFFFFFFFFFFFFF
    return bytes(h) if isinstance(h, (bytes, bytearray)) and h else None


def _name(key):
    """The long name of an LMCache key: key.to_string() (bytes, UTF-8)."""
    s = key.to_string() if hasattr(key, "to_string") else key
    if isinstance(s, str):
        return s.encode("utf-8")
    if isinstance(s, (bytes, bytearray)):
        return bytes(s)
    raise TypeError("an LMCache key (CacheEngineKey) or a str, not %s" % type(key).__name__)


def _element_size(dtype):
    import torch
    return torch.empty(0, dtype=dtype).element_size()


def _memory_format(value):
    """LMCache's MemoryFormat for an int (the int itself without LMCache)."""
    try:
        from lmcache.v1.memory_management import MemoryFormat
    except ImportError:
        return value
    return MemoryFormat(value)


def _chunk_view(obj):
    """A writable byte view of a MemoryObj's own memory (its byte_array: no copy)."""
    ba = getattr(obj, "byte_array", None)
    return ba if ba is not None else obj.tensor


class RadosNkvConnector(_ConnectorBase):
    """LMCache RemoteConnector over rados-nkv. Built by LMCache as
    cls(loop=, local_cpu_backend=, config=) (remote_storage_plugins with this class:
    DynamicConnectorAdapter), or by RadosNkvAdapter with the engine metadata and the plugin
    instance; the settings come from config.extra_config (see rados_nkv.lmcache.settings and the
    docs).

    @metadata: LMCache's engine metadata (default: local_cpu_backend.metadata, where LMCache's own
    connectors take it from): the chunk layout of the header-less mode and the KV layer group count
    of the metadata on each value. Without it (a backend with no engine metadata) only the
    metadata-on mode reads chunks, assuming one group.
    @plugin_name: the plugin instance ("rados_nkv" or "rados_nkv.<instance>") whose settings to read.
    @url: "rados_nkv://TARGET" supplies the target when the settings do not.
    @client: an open rados_nkv.Client to use instead of connecting (the caller keeps owning it).
    """

    # the header-less attributes, for when LMCache's base does not set them (no LMCache, the
    # previous base before init_chunk_meta(), or no engine metadata)
    save_chunk_meta = True
    meta_fmt = None
    single_token_size = None

    def __init__(self, loop=None, local_cpu_backend=None, config=None, metadata=None, plugin_name=None,
                 url=None, client=None):
        if config is None:
            config = getattr(local_cpu_backend, "config", None)
        if metadata is None:
            metadata = getattr(local_cpu_backend, "metadata", None)
        self._init_base(config, metadata)
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        self.config = config
        self.metadata = metadata
        self.plugin_name = plugin_name or _settings.PLUGIN_TYPE
        extra = getattr(config, "extra_config", None) or {}
        _warn_unknown_keys(extra, self.plugin_name)
        self.settings = _settings.from_extra_config(extra, self.plugin_name, url)
        if client is None:
            self._client = _settings.connect(self.settings)
            self._owns_client = True
        else:
            self._client = client
            self._owns_client = False
        self._staging = StagingPool(self._client, self.settings["staging_mb"] << 20)
        self._last_layout = None       # (shapes, dtypes, fmt value) of the last chunk read
        self._arena = None             # LMCache's CPU arena, once registered
        self.arena_registered = False
        self._closed = False
        self._register_arena()
        log.info("rados_nkv connector %s: %s %s nsid %d, %d queues, chunk metadata %s (%d groups), "
                 "arena %s", self.plugin_name, self._client.transport, self._client.target,
                 self._client.nsid, self._client.queues, "on" if self.save_chunk_meta else "off",
                 self._groups, "registered" if self.arena_registered else "not registered")

    def _init_base(self, config, metadata):
        """Initialise LMCache's RemoteConnector as the base of this LMCache release wants it."""
        if BASE_TAKES_METADATA:
            if metadata is not None and config is not None:
                super().__init__(config, metadata)    # asserts metadata; sets the layout attributes
            else:
                extra = getattr(config, "extra_config", None) or {}
                self.save_chunk_meta = bool(extra.get("save_chunk_meta", True))
        else:
            super().__init__()
            if metadata is not None and HAVE_LMCACHE and hasattr(self, "init_chunk_meta"):
                self.init_chunk_meta(config, metadata)
        groups = _framing_groups(self, metadata)
        self._groups = groups
        self._meta_size = framing.meta_size(groups)

    def _headerless_layout(self):
        """(shapes, dtypes, fmt, full chunk bytes) of the header-less mode, from the base's
        attributes under their current names (meta_shapes, meta_dtypes, full_chunk_size_bytes) or
        their previous ones (meta_shape, meta_dtype, full_chunk_size); None when unknown."""
        shapes = getattr(self, "meta_shapes", None)
        dtypes = getattr(self, "meta_dtypes", None)
        full = getattr(self, "full_chunk_size_bytes", None)
        if shapes is None and getattr(self, "meta_shape", None) is not None:
            shapes, dtypes = [self.meta_shape], [self.meta_dtype]
            full = getattr(self, "full_chunk_size", None)
        if not shapes or not dtypes or full is None or self.meta_fmt is None:
            return None
        fmt = getattr(self.meta_fmt, "value", self.meta_fmt)
        return tuple(tuple(int(d) for d in s) for s in shapes), tuple(dtypes), fmt, full

    # ---- setup ---------------------------------------------------------------------------------

    @property
    def client(self):
        """The rados_nkv.Client underneath."""
        return self._client

    def post_init(self):
        """After LMCache built the connector: register its CPU arena over shm (idempotent)."""
        self._register_arena()

    def _arena_buffer(self):
        alloc = getattr(self.local_cpu_backend, "memory_allocator", None)
        pin = getattr(alloc, "pin_allocator", None)
        buf = getattr(pin, "buffer", None)
        if buf is None:
            buf = getattr(alloc, "buffer", None)
        return buf

    def _register_arena(self):
        """Register LMCache's whole CPU arena (memory_allocator.pin_allocator.buffer) with the shm
        controller so reads land in MemoryObjs with no copy by the target. "auto" skips memory that
        CUDA has pinned: registration remaps the pages in place, which a GPU's DMA mapping of them
        would not follow."""
        mode = self.settings["register_arena"]
        if self.arena_registered or mode is False or self._client.transport not in ("shm", "vfio-user"):
            return
        buf = self._arena_buffer()
        if buf is None:
            return
        if mode == "auto":
            try:
                pinned = bool(buf.is_pinned())
            except (AttributeError, RuntimeError):
                pinned = False
            if pinned:
                log.info("rados_nkv: LMCache's arena is CUDA-pinned memory: not registered "
                         "(register_arena: true forces it); reads go through the shm bounce area")
                return
        try:
            self._client.register(buf)
        except (NkvError, ValueError, TypeError) as e:
            log.warning("rados_nkv: could not register LMCache's arena (%s); reads are copied by the "
                        "target through its bounce area", e)
            return
        self._arena = buf
        self.arena_registered = True

    # ---- reads ---------------------------------------------------------------------------------

    def _allocate(self, layout):
        """A MemoryObj of @layout from LMCache's CPU backend, or None when it is full. One group is
        asked for as (shape, dtype), which every LMCache release takes; several as lists."""
        shapes, dtypes, fmt = layout
        import torch
        try:
            if len(shapes) == 1:
                return self.local_cpu_backend.allocate(torch.Size(shapes[0]), dtypes[0], _memory_format(fmt))
            return self.local_cpu_backend.allocate([torch.Size(s) for s in shapes], list(dtypes),
                                                   _memory_format(fmt))
        except ValueError:
            return None

    def _layout_of(self, hdr, h, plen, name):
        """(shapes, dtypes, fmt value) from the metadata after the header, or None when it does not
        describe a chunk of plen - metadata bytes of this model's group count."""
        meta = self._meta_size
        if plen < meta:
            return None
        try:
            length, fmt, dtypes, shapes = framing.unpack(hdr, h, self._groups)
            _memory_format(fmt)
        except ValueError as e:
            log.warning("rados_nkv: %s: bad chunk metadata (%s): a miss", name, e)
            return None
        if length != plen - meta or length == 0:
            log.warning("rados_nkv: %s: metadata says %d bytes, the value holds %d after %d bytes of "
                        "metadata (%d KV layer groups): a miss", name, length, plen - meta, meta,
                        self._groups)
            return None
        n = 0
        for dtype, shape in zip(dtypes, shapes):
            if dtype is None or not shape:
                log.warning("rados_nkv: %s: a chunk group without a dtype or shape: a miss", name)
                return None
            k = _element_size(dtype)
            for d in shape:
                k *= d
            n += k
        if n != length:
            log.warning("rados_nkv: %s: metadata says %d bytes of shapes %s, which hold %d: a miss",
                        name, length, [list(s) for s in shapes], n)
            return None
        return tuple(shapes), tuple(dtypes), fmt

    async def _read_chunks(self, keys):
        """MemoryObj or None for each key; all reads of a round in one batch."""
        n = len(keys)
        names = [_name(k) for k in keys]
        kk = [_ln.key_for(b) for b in names]
        hs = [_ln.header_size(b) for b in names]
        meta = self._meta_size if self.save_chunk_meta else 0
        # layouts[i]: what to allocate for key i; known[i]: it comes from key i's own metadata (or
        # the header-less mode's fixed chunk), not from a guess
        if self.save_chunk_meta:
            layouts = [self._last_layout] * n
            known = [False] * n
        else:
            hl = self._headerless_layout()
            if hl is None:
                log.warning("rados_nkv: save_chunk_meta is false but LMCache gave no chunk layout "
                            "(no engine metadata): %d chunks not read", n)
                return [None] * n
            layouts = [hl[:3]] * n
            known = [True] * n
        out = [None] * n
        todo = list(range(n))
        for _ in range(ATTEMPTS):
            if not todo:
                break
            objs, hdrs, rkeys, routs, roffs, slots = {}, {}, [], [], [], {}
            for i in todo:
                obj = None
                if layouts[i] is not None:
                    obj = self._allocate(layouts[i])
                    if obj is None and known[i]:
                        continue          # LMCache's buffer is full: a miss, as its connectors do
                hdrs[i] = bytearray(hs[i] + meta)
                slots[i] = len(rkeys)
                rkeys.append(kk[i])
                routs.append(hdrs[i])
                roffs.append(0)
                if obj is not None:
                    objs[i] = obj
                    rkeys.append(kk[i])
                    routs.append(_chunk_view(obj))
                    roffs.append(hs[i] + meta)
            if not rkeys:
                break
            taken = list(objs.values())

            def release(taken=taken):
                for obj in taken:
                    obj.ref_count_down()
            try:
                sizes = await _io(self._client.aio.retrieve_many(rkeys, routs, offsets=roffs), release)
            except NkvError as e:
                log.warning("rados_nkv: read of %d chunks failed: %s", len(hdrs), e)
                release()
                return out
            except asyncio.CancelledError:
                raise                     # release() runs once the reads are over
            except BaseException:
                release()
                raise
            again = []
            for i in hdrs:
                obj = objs.get(i)
                r = self._evaluate(i, names[i], hdrs[i], hs[i], sizes, slots[i], obj, layouts)
                if r == "retry":
                    known[i] = True
                    again.append(i)
                    if obj is not None:
                        obj.ref_count_down()
                elif r is None:
                    if obj is not None:
                        obj.ref_count_down()
                else:
                    out[i] = r
            todo = again
        for i in todo:
            log.warning("rados_nkv: %s kept changing while being read: a miss", names[i].decode(errors="replace"))
        return out

    def _evaluate(self, i, name, hdr, h, sizes, slot, obj, layouts):
        """The MemoryObj of a read, None for a miss, or "retry" (layouts[i] then says what to
        allocate)."""
        size = sizes[slot]
        if size is None:
            return None
        plen = _ln.check_header(hdr[:h], name)
        if plen is None:          # another name's value (hash collision) or a foreign object
            return None
        pname = name.decode(errors="replace")
        if size != h + plen:
            log.warning("rados_nkv: %s: header says %d payload bytes, the value holds %d: a miss",
                        pname, plen, size - h)
            return None
        data_size = sizes[slot + 1] if obj is not None else None
        if self.save_chunk_meta:
            layout = self._layout_of(hdr, h, plen, pname)
            if layout is None:
                return None
            if obj is None or data_size != size or layouts[i] != layout:
                layouts[i] = layout
                return "retry"
            self._last_layout = layout
            return obj
        if data_size is None:
            return "retry"
        if data_size != size:
            return "retry"
        full = self._headerless_layout()[3]
        if plen > full or plen == 0:
            log.warning("rados_nkv: %s: %d bytes, not 1..%d (a chunk): a miss", pname, plen, full)
            return None
        try:
            return self.reshape_partial_chunk(obj, plen)
        except ValueError as e:
            log.warning("rados_nkv: %s: %s: a miss", pname, e)
            return None

    async def get(self, key):
        """The chunk of @key in a MemoryObj from LMCache's CPU backend, or None (absent, another
        name's or a foreign value, LMCache's buffer full, or a failed read: logged)."""
        return (await self._read_chunks([key]))[0]

    def support_batched_get(self):
        return True

    async def batched_get(self, keys):
        """get() for each key, every read in flight at once."""
        if not keys:
            return []
        return await self._read_chunks(list(keys))

    def support_batched_get_non_blocking(self):
        return True

    async def batched_get_non_blocking(self, lookup_id, keys):
        """The MemoryObjs of the leading run of hits (a prefix cache uses nothing past the first
        miss); the objects read past it are released."""
        objs = await self.batched_get(keys)
        out = []
        for j, obj in enumerate(objs):
            if obj is None:
                for rest in objs[j + 1:]:
                    if rest is not None:
                        rest.ref_count_down()
                break
            out.append(obj)
        return out

    # ---- writes --------------------------------------------------------------------------------

    def _stage(self, key, obj, stagings):
        """(16-byte key, a view of header + [metadata] + chunk in a staging buffer). The metadata
        has one group per group of @obj (get_shapes()/get_dtypes(), or its one shape and dtype)."""
        name = _name(key)
        src = _chunk_view(obj)
        saddr, n, skeep = buffer_info(src, False, "memory_obj")
        h = _ln.header_size(name)
        shapes = dtypes = None
        meta = 0
        if self.save_chunk_meta:
            shapes, dtypes = _groups_of_obj(obj)
            meta = framing.meta_size(len(shapes))
        total = h + meta + n
        st = self._staging.get(total)
        stagings.append(st)
        st[:h] = _ln.pack_header(name, meta + n)
        if meta:
            fmt = obj.get_memory_format()
            framing.pack_into(st, h, n, getattr(fmt, "value", fmt), dtypes, shapes)
        daddr = buffer_info(st, True, "staging")[0]
        ctypes.memmove(daddr + h + meta, saddr, n)
        del skeep
        return _ln.key_for(name), st[:total]

    async def _write_chunks(self, keys, objs):
        stagings, kk, vals, hashes = [], [], [], []

        def release():
            for v in vals:
                v.release()
            for st in stagings:
                self._staging.put(st)
        try:
            for key, obj in zip(keys, objs):
                k, v = self._stage(key, obj, stagings)
                kk.append(k)
                vals.append(v)
                hashes.append(_block_hash(key))
            await _io(self._client.aio.store_many(kk, vals, block_hashes=hashes), release)
        except asyncio.CancelledError:
            raise                         # release() runs once the stores are over
        except BaseException:
            release()
            raise
        release()

    async def put(self, key, memory_obj):
        """Store @memory_obj's chunk under @key (LMCache drops its reference afterwards). Raises
        NkvError when the target refuses or cannot be reached."""
        await self._write_chunks([key], [memory_obj])

    def support_batched_put(self):
        return True

    async def batched_put(self, keys, memory_objs):
        """put() for each pair, in one batch (BatchError names the chunks not stored)."""
        if len(keys) != len(memory_objs):
            raise ValueError("%d keys but %d memory objects" % (len(keys), len(memory_objs)))
        if keys:
            await self._write_chunks(list(keys), list(memory_objs))

    # ---- lookups -------------------------------------------------------------------------------

    async def _contains(self, keys):
        names = [_name(k) for k in keys]
        try:
            return await self._client.aio.exists_named_many(names)
        except NkvError as e:
            log.warning("rados_nkv: lookup of %d keys failed: %s", len(names), e)
            return [False] * len(names)

    async def exists(self, key):
        """Does @key's chunk exist (its header checked: another name's value is absent)?"""
        return (await self._contains([key]))[0]

    def exists_sync(self, key):
        """exists(), from any thread, blocking."""
        try:
            return self._client.exists_named(_name(key))
        except NkvError as e:
            log.warning("rados_nkv: lookup failed: %s", e)
            return False

    def support_batched_async_contains(self):
        return True

    async def batched_async_contains(self, lookup_id, keys, pin=False):
        """How many keys, from the first, exist in a row (one batch of header reads). @pin: no
        effect (the target evicts nothing)."""
        if not keys:
            return 0
        hits = await self._contains(list(keys))
        for j, hit in enumerate(hits):
            if not hit:
                return j
        return len(hits)

    def support_batched_contains(self):
        return True

    def _exist_many(self, keys):
        try:
            return self._client.exists_named_many([_name(k) for k in keys])
        except NkvError as e:
            log.warning("rados_nkv: lookup of %d keys failed: %s", len(keys), e)
            return [False] * len(keys)

    def _batched_contains_prefix(self, keys):
        """How many keys, from the first, exist in a row (one batch of header reads, from any
        thread): LMCache's StorageManager takes keys[:n] of them from this tier."""
        keys = list(keys)
        if not keys:
            return 0
        hits = self._exist_many(keys)
        return hits.index(False) if False in hits else len(hits)

    def _batched_contains_list(self, keys, stop_after_first_not_exits=True):
        """exists_sync() for each key in one batch; with @stop_after_first_not_exits everything
        after the first miss is False (LMCache before batched_contains returned the hit count)."""
        keys = list(keys)
        if not keys:
            return []
        hits = self._exist_many(keys)
        if stop_after_first_not_exits and False in hits:
            j = hits.index(False)
            hits = hits[:j] + [False] * (len(hits) - j)
        return hits

    # the form of the base this module was imported under (its signature and return type)
    batched_contains = _batched_contains_list if CONTAINS_RETURNS_LIST else _batched_contains_prefix

    async def list(self):
        """The names (key.to_string()) of every chunk in the namespace; values that are not
        long-name values are skipped. Reads every value's first bytes: for tooling, not the hot path."""
        aio = self._client.aio
        keys = await aio.list()
        names = []
        for start in range(0, len(keys), 256):
            part = keys[start:start + 256]
            bufs = [bytearray(LIST_HEAD) for _ in part]
            try:
                await aio.retrieve_many(part, bufs)
            except NkvError as e:
                log.warning("rados_nkv: list: %s", e)
                continue
            for k, buf in zip(part, bufs):
                name = await self._name_in(k, buf)
                if name is not None:
                    names.append(name.decode("utf-8", "replace"))
        return names

    async def _name_in(self, key, buf):
        """The name a value's header carries, checked, or None."""
        if len(buf) < 24 or bytes(buf[0:4]) != b"NKVL":
            return None
        nlen = int.from_bytes(buf[16:18], "little")
        if nlen == 0 or nlen > _ln.NAME_MAX:
            return None
        if 24 + nlen > len(buf):
            buf = bytearray(24 + nlen + 8)
            if await self._client.aio.retrieve_into(key, buf) is None:
                return None
        name = bytes(buf[24:24 + nlen])
        if _ln.check_header(buf, name) is None or _ln.key_for(name) != bytes(key):
            return None
        return name

    # ---- the rest ------------------------------------------------------------------------------

    def remove_sync(self, key):
        """Delete @key's chunk; False when absent, when the key holds something else (left
        alone), or on a failure (logged)."""
        try:
            return self._client.delete_named(_name(key))
        except NkvError as e:
            log.warning("rados_nkv: remove failed: %s", e)
            return False

    def support_ping(self):
        return True

    async def ping(self):
        """0 when the target answers a command, else the errno of the failure."""
        try:
            await self._client.aio.exist(PING_KEY)
            return 0
        except NkvError as e:
            return e.errno or 1

    async def close(self):
        """Close the connection (when this connector opened it). Idempotent."""
        self.close_sync()

    def close_sync(self):
        """close(), without an event loop."""
        if self._closed:
            return
        self._closed = True
        if self.arena_registered and not self._client.closed:
            try:
                self._client.unregister(self._arena)
            except (NkvError, ValueError) as e:
                log.warning("rados_nkv: unregistering LMCache's arena: %s", e)
            self.arena_registered = False
        if self._owns_client:
            self._client.close()

    def __repr__(self):
        return "<RadosNkvConnector %s %s>" % (self.plugin_name, self._client)


def _framing_groups(connector, metadata):
    """The KV layer group count of the metadata on each value: the base's remote_metadata_bytes
    (current LMCache), else the engine metadata's get_num_groups(), else one group."""
    groups = framing.groups_of(getattr(connector, "remote_metadata_bytes", None))
    if groups is None:
        get = getattr(metadata, "get_num_groups", None)
        groups = int(get()) if callable(get) else 1
    return groups


def _groups_of_obj(obj):
    """([shape per group], [dtype per group]) of a MemoryObj: get_shapes()/get_dtypes() where the
    MemoryObj has them (LMCache with KV layer groups), else its one shape and dtype."""
    get_shapes = getattr(obj, "get_shapes", None)
    get_dtypes = getattr(obj, "get_dtypes", None)
    if callable(get_shapes) and callable(get_dtypes):
        shapes, dtypes = list(get_shapes()), list(get_dtypes())
        if shapes and len(shapes) == len(dtypes):
            return shapes, dtypes
    return [obj.get_shape()], [obj.get_dtype()]


async def _io(coro, release):
    """Await the I/O @coro. When the caller is cancelled, the I/O runs on (the target may still be
    writing into a MemoryObj or reading a staging buffer) and @release runs when it is over, so
    that memory is not handed to anyone else while a command uses it."""
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            release()
        else:
            def done(t):
                if not t.cancelled():
                    t.exception()         # retrieved: no "never retrieved" warning
                release()
            task.add_done_callback(done)
        raise


def _warn_unknown_keys(extra, plugin_name):
    known = set(_settings.KEYS) | {"module_path", "class_name"}
    for key in extra:
        for p in _settings.plugin_names(plugin_name):
            if isinstance(key, str) and key.startswith(p):
                rest = key[len(p):]
                if rest not in known and "." not in rest:
                    log.warning("rados_nkv: unknown setting %s (known: %s)", key, ", ".join(sorted(_settings.KEYS)))


class RadosNkvAdapter(_AdapterBase):
    """LMCache ConnectorAdapter: builds a RadosNkvConnector for plugin://rados_nkv[.INSTANCE]
    (remote_storage_plugins) and rados_nkv://TARGET (remote_url) URLs."""

    def __init__(self):
        if _AdapterBase is object:
            super().__init__()
            self.schema = _settings.URL_SCHEME
        else:
            super().__init__(_settings.URL_SCHEME)

    def can_parse(self, url):
        if url.startswith(_settings.URL_SCHEME):
            return True
        if url.startswith(_settings.PLUGIN_SCHEME):
            return url[len(_settings.PLUGIN_SCHEME):].split(".", 1)[0] == _settings.PLUGIN_TYPE
        return False

    def create_connector(self, context):
        """The connector for @context (LMCache's ConnectorContext: url, loop, local_cpu_backend,
        config, metadata, plugin_name)."""
        url = getattr(context, "url", "") or ""
        plugin = getattr(context, "plugin_name", None)
        if plugin is None and url.startswith(_settings.PLUGIN_SCHEME):
            plugin = url[len(_settings.PLUGIN_SCHEME):]
        return RadosNkvConnector(loop=context.loop, local_cpu_backend=context.local_cpu_backend,
                                 config=context.config, metadata=getattr(context, "metadata", None),
                                 plugin_name=plugin, url=url)

