# SPDX-License-Identifier: Apache-2.0
"""llmd_events.py - llm-d's reading of a KV-event message, written in Python from llm-d's Go code, so
that tests read what rados-nkv publishes the way llm-d's KV-cache indexer does (and fail where it
would drop or misread an event).

Written from llm-d/llm-d-kv-cache (Apache-2.0), not copied:
  main at 7be76e119ca50c5700b3bca65a19b6a0218a9b62 (2026-06-12)
    pkg/kvevents/zmq_subscriber.go        a message is exactly 3 frames: topic, sequence (at least
                                          8 bytes, big-endian uint64 of the first 8), payload
    pkg/kvevents/engineadapter/common.go  parseTopic: strings.Split(topic, "@"), 3 parts -> (pod,
                                          model), else (topic, ""); getHashAsUint64: uint64, int64 or
                                          []byte (last 8 bytes big-endian, shorter ones zero-padded
                                          on the left, empty refused), any other type refused
    pkg/kvevents/engineadapter/vllm_adapter.go
                                          msgpackVLLMEventBatch {_ `msgpack:",array"`; TS float64;
                                          Events []msgpack.RawMessage; DataParallelRank *int};
                                          convertBlockStoredEvent (fields [1]..[4] required: hashes
                                          array, parent hash|nil, token_ids array, block_size int;
                                          [5] lora_id, [6] medium string|nil, [7] lora_name, ...);
                                          convertBlockRemovedEvent ([1] hashes, [2] medium, [3] group)
  pull request #661 at c8b17564498952bd4dd196c7586e760efc6d41a8 (2026-06-11, merged)
    vllm_adapter.go decodeVLLMEvent / mapEventToFields: an event may also be a map (vLLM without
                                          array_like): its "type" is the tag, the fields are taken by
                                          name in the positional order (absent: nil)
The msgpack decoding is vmihailenco/msgpack v5 (v5.4.1 in llm-d's go.mod) into `any`: a positive
or negative fixint decodes as int8, uint 8/16/32/64 as uint8..uint64, int 8..64 as int8..int64,
bin as []byte, str as string, float 32/64 as float32/float64, arrays as []any, maps as
map[string]any. So a block hash sent in a compact form (a fixint, uint 8/16/32) reaches
getHashAsUint64 as int8..uint32 and the whole batch is refused. An array-encoded struct must have
exactly as many elements as the struct has fields (3 for the batch); a map-encoded batch is decoded
by Go field name ("TS", "Events"), so a batch of {"ts", "events"} decodes to no events at all.

python3-msgpack decodes every payload as well: the two decodings must agree.
"""
import struct

import msgpack


class Refused(Exception):
    """llm-d would log this message as undecodable and drop it."""


class GoInt:
    """A msgpack integer as vmihailenco/msgpack hands it to `any`: its Go type and value."""

    __slots__ = ("kind", "value")

    def __init__(self, kind, value):
        self.kind, self.value = kind, value

    def __repr__(self):
        return "%s(%d)" % (self.kind, self.value)


class _Reader:
    def __init__(self, buf):
        self.b, self.i = bytes(buf), 0

    def take(self, n):
        if self.i + n > len(self.b):
            raise Refused("msgpack: unexpected end of payload")
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def uint(self, n):
        return int.from_bytes(self.take(n), "big")

    def value(self):
        c = self.take(1)[0]
        if c <= 0x7F:
            return GoInt("int8", c)
        if c >= 0xE0:
            return GoInt("int8", c - 0x100)
        if 0x80 <= c <= 0x8F:
            return self.map(c & 0x0F)
        if 0x90 <= c <= 0x9F:
            return self.array(c & 0x0F)
        if 0xA0 <= c <= 0xBF:
            return self.take(c & 0x1F).decode("utf-8")
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if c in simple:
            return simple[c]
        if c in (0xC4, 0xC5, 0xC6):
            return self.take(self.uint({0xC4: 1, 0xC5: 2, 0xC6: 4}[c]))
        if c == 0xCA:
            return struct.unpack(">f", self.take(4))[0]
        if c == 0xCB:
            return struct.unpack(">d", self.take(8))[0]
        if 0xCC <= c <= 0xCF:
            n = 1 << (c - 0xCC)
            return GoInt("uint%d" % (8 * n), self.uint(n))
        if 0xD0 <= c <= 0xD3:
            n = 1 << (c - 0xD0)
            return GoInt("int%d" % (8 * n), int.from_bytes(self.take(n), "big", signed=True))
        if c in (0xD9, 0xDA, 0xDB):
            return self.take(self.uint({0xD9: 1, 0xDA: 2, 0xDB: 4}[c])).decode("utf-8")
        if c in (0xDC, 0xDD):
            return self.array(self.uint(2 if c == 0xDC else 4))
        if c in (0xDE, 0xDF):
            return self.map(self.uint(2 if c == 0xDE else 4))
        raise Refused("msgpack: code %#x (ext) has no place in a KV event" % c)

    def array(self, n):
        return [self.value() for _ in range(n)]

    def map(self, n):
        m = {}
        for _ in range(n):
            k = self.value()
            if not isinstance(k, str):
                raise Refused("map key is not a string: %r" % (k,))
            m[k] = self.value()
        return m


def decode_go(buf):
    """@buf decoded into `any` as vmihailenco/msgpack v5 does (see the module's text)."""
    r = _Reader(buf)
    v = r.value()
    if r.i != len(r.b):
        raise Refused("trailing bytes after the payload")
    return v


def plain(v):
    """A decode_go() value with the Go types dropped: what python3-msgpack gives."""
    if isinstance(v, GoInt):
        return v.value
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def hash_as_uint64(raw):
    """getHashAsUint64 (common.go)."""
    if isinstance(raw, GoInt) and raw.kind == "uint64":
        return raw.value
    if isinstance(raw, GoInt) and raw.kind == "int64":
        return raw.value & 0xFFFFFFFFFFFFFFFF
    if isinstance(raw, bytes):
        if not raw:
            raise Refused("hash byte slice is empty")
        return int.from_bytes(raw[-8:], "big")
    raise Refused("unsupported hash type: %s" % (raw.kind if isinstance(raw, GoInt) else type(raw).__name__))


def _to_int(raw, what):
    """toInt (vllm_adapter.go): any Go integer type, nothing else (nil included)."""
    if not isinstance(raw, GoInt):
        raise Refused("%s: unsupported numeric type: %s" % (what, type(raw).__name__))
    return raw.value


def _opt_str(raw, what):
    if raw is not None and not isinstance(raw, str):
        raise Refused("%s is not a string: %r" % (what, raw))
    return raw


STORED_ORDER = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
                "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"]
REMOVED_ORDER = ["block_hashes", "medium", "group_idx"]


def _fields(ev, map_events):
    """decodeVLLMEvent: the positional fields of one event (a map only with PR #661's @map_events)."""
    if isinstance(ev, list):
        return ev
    if isinstance(ev, dict) and map_events:
        if "type" not in ev:
            raise Refused('map-encoded event is missing the "type" tag')
        tag = ev["type"]
        if not isinstance(tag, str):
            raise Refused("map-encoded event tag is not a string")
        order = {"BlockStored": STORED_ORDER, "BlockRemoved": REMOVED_ORDER, "AllBlocksCleared": []}.get(tag)
        return [tag] + [ev.get(n) for n in order] if order is not None else [tag]
    raise Refused("failed to decode tagged union: an event that is not an array")


def _event(ev, map_events):
    f = _fields(ev, map_events)
    if not f or not isinstance(f[0], str):
        raise Refused("event tag is not a string")
    tag = f[0]
    at = (lambda i: f[i] if i < len(f) else None)
    if tag == "BlockStored":
        if len(f) < 5:
            raise Refused("BlockStored: need at least 5 fields, got %d" % len(f))
        if not isinstance(f[1], list):
            raise Refused("BlockStored: block_hashes is not an array")
        hashes = [hash_as_uint64(h) for h in f[1]]
        parent = hash_as_uint64(f[2]) if f[2] is not None else 0
        if not isinstance(f[3], list):
            raise Refused("BlockStored: token_ids is not an array")
        tokens = [_to_int(t, "token_ids") & 0xFFFFFFFF for t in f[3]]
        block_size = _to_int(f[4], "BlockStored: block_size")
        lora_id = _to_int(at(5), "BlockStored: lora_id") if at(5) is not None else None
        return {"type": tag, "block_hashes": hashes, "parent_hash": parent, "tokens": tokens,
                "block_size": block_size, "lora_id": lora_id, "device_tier": _opt_str(at(6), "medium") or "",
                "lora_name": _opt_str(at(7), "lora_name")}
    if tag == "BlockRemoved":
        if len(f) < 2:
            raise Refused("BlockRemoved: need at least 2 fields, got %d" % len(f))
        if not isinstance(f[1], list):
            raise Refused("BlockRemoved: block_hashes is not an array")
        return {"type": tag, "block_hashes": [hash_as_uint64(h) for h in f[1]],
                "device_tier": _opt_str(at(2), "medium") or ""}
    if tag == "AllBlocksCleared":
        return {"type": tag}
    raise Refused("unknown vLLM event tag: %s" % tag)


def parse_message(frames, map_events=True):
    """One ZMQ message as llm-d reads it: (pod, model, sequence, ts, [event dict]). Raises Refused for
    what llm-d drops. @map_events: PR #661's reader (map events); False: main before it.
    The events' "device_tier" is as sent; llm-d's pool lower-cases it ("" means gpu)."""
    if len(frames) != 3:
        raise Refused("unexpected frame count %d, want 3" % len(frames))
    topic, seq, payload = frames
    if len(seq) < 8:
        raise Refused("sequence frame too short")
    parts = topic.decode("utf-8", "replace").split("@")
    pod, model = (parts[1], parts[2]) if len(parts) == 3 else (topic.decode("utf-8", "replace"), "")
    batch = decode_go(payload)
    if plain(batch) != msgpack.unpackb(payload, raw=False, strict_map_key=False):
        raise Refused("python3-msgpack reads the payload otherwise")
    if isinstance(batch, dict):
        # decoded by Go field name: only "TS", "Events", "DataParallelRank" would land anywhere
        ts, events = batch.get("TS", 0.0), batch.get("Events") or []
    elif isinstance(batch, list):
        if len(batch) != 3:
            raise Refused("msgpack: number of fields in array-encoded struct has changed (%d, want 3)" % len(batch))
        ts, events, dp = batch
        if dp is not None and not isinstance(dp, GoInt):
            raise Refused("data_parallel_rank is not an int")
        if events is None:
            events = []
    else:
        raise Refused("failed to decode vLLM event batch")
    if isinstance(ts, GoInt):
        ts = float(ts.value)
    if not isinstance(ts, float):
        raise Refused("ts is not a number")
    if not isinstance(events, list):
        raise Refused("events is not an array")
    return pod, model, int.from_bytes(seq[:8], "big"), ts, [_event(e, map_events) for e in events]
