# SPDX-License-Identifier: Apache-2.0
"""A Retrieve moves exactly min(value size - offset, buffer) bytes, or fails: for values above the
namespace's current max value (another NSID's over the same RADOS namespace, another gateway's with
a higher limit), and against a target that reports more than it moved (the client must notice)."""

import errno
import os
import socket
import struct
import threading

import pytest

import rados_nkv
from rados_nkv import NkvError
from rados_nkv import client as _client
from rados_nkv._ffi import Op
from conftest import (NS_MAIN, NS_VIEW, SMALL_MAX, Daemon, _accepts, _cluster_or_skip, daemon_binary,
                      free_port)

MiB = 1 << 20
NQN = "nqn.2026-11.io.rados-nkv:nkv"


def _check_whole(c, k, v, nsid):
    """Every read path returns @v whole (or exactly the part asked for) through namespace @nsid."""
    assert c.retrieve(k, nsid=nsid) == v
    out = bytearray(b"\xee" * (4 * MiB))
    assert c.retrieve_into(k, out, nsid=nsid) == len(v)
    assert out[:len(v)] == v and out[len(v):] == b"\xee" * (len(out) - len(v))
    out = bytearray(b"\xee" * (4 * MiB))
    assert c.retrieve_into(k, out, offset=MiB + 5, nsid=nsid) == len(v)
    assert out[:len(v) - MiB - 5] == v[MiB + 5:]
    part = bytearray(2 * MiB)   # smaller than the value: its first 2 MiB, DW0 the full size
    assert c.retrieve_into(k, part, nsid=nsid) == len(v) and part == v[:2 * MiB]
    outs = [bytearray(4 * MiB), bytearray(4 * MiB)]
    assert c.retrieve_many([k, k], outs, offsets=[0, 100000], nsid=nsid) == [len(v), len(v)]
    assert outs[0][:len(v)] == v and outs[1][:len(v) - 100000] == v[100000:]


def test_value_above_namespace_max(client, key):
    """Stored through nsid 1 (64 MiB), read through nsid 5: read-only over the same RADOS namespace
    with a 1 MiB max value. The limit is for Stores; the 3 MiB value reads whole."""
    k = key("view")
    v = os.urandom(3 * MiB + 77)
    client.store(k, v)
    _check_whole(client, k, v, NS_VIEW)
    with pytest.raises(NkvError) as ei:
        client.store(key("view2"), b"x", nsid=NS_VIEW)
    assert ei.value.errno == errno.EROFS


class LowerDaemon(Daemon):
    """A second gateway over the session daemon's RADOS namespace, with a 1 MiB max value (so MDTS,
    the most one command moves, is 1 MiB too): values the first one stored (its limit is 64 MiB) are
    above both."""

    def __init__(self, first, tmp):
        self.backend = "rados"
        self.label = "rados, 1 MiB max value"
        self.port = free_port()
        self.sock = os.path.join(tmp, "lower.sock")
        self.log_path = os.path.join(tmp, "daemon-lower.log")
        args = [daemon_binary(), "--backend", "rados", "-l", "127.0.0.1:%d" % self.port, "-d", "none",
                "-S", self.sock, "--log-level", "warn", "--ns", "%d:%s:%d" % (NS_MAIN, first.rados_ns, SMALL_MAX),
                "--ceph-conf", os.environ["NKV_CEPH_CONF"], "--pool", os.environ.get("NKV_CEPH_POOL", "nkv"),
                "--client-id", os.environ.get("NKV_CEPH_USER", "admin"), "--op-timeout", "20"]
        if os.environ.get("NKV_CEPH_KEYRING"):
            args += ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
        self._start(args, lambda: _accepts(self.port) and os.path.exists(self.sock))

    def connect(self, transport, **kw):
        return rados_nkv.connect(self.target(transport), subnqn=NQN if transport == "tcp" else None, **kw)


def test_value_above_what_a_gateway_moves(daemon, key, tmp_session):
    """A 3 MiB value stored through a gateway whose max value is 64 MiB, read through one that moves
    at most 1 MiB per command: a buffer that would take the value whole fails (85h), never its first
    MiB under the full size; up to 1 MiB at a time (truncated, or in ranges) it reads correctly."""
    if daemon.backend != "rados":
        pytest.skip("needs a second gateway over the same RADOS namespace (rados)")
    _cluster_or_skip()
    k = key("gw")
    v = os.urandom(3 * MiB + 4097)
    with daemon.connect("tcp") as c:
        c.store(k, v)
    low = LowerDaemon(daemon, tmp_session)
    try:
        for transport in ("tcp", "shm"):
            with low.connect(transport) as c:
                assert c.max_value == SMALL_MAX
                for call in (lambda: c.retrieve(k), lambda: c.retrieve_into(k, bytearray(4 * MiB)),
                             lambda: c.retrieve_into(k, bytearray(4 * MiB), offset=MiB)):
                    with pytest.raises(NkvError) as ei:
                        call()
                    if transport == "tcp":
                        assert ei.value.errno == errno.EFBIG and ei.value.status & 0xff == 0x85, ei.value
                    else:  # a buffer above MDTS: libnkv's PRP driver refuses it before sending
                        assert ei.value.errno == errno.EINVAL and ei.value.status is None, ei.value
                got = b""
                part = bytearray(MiB)
                while len(got) < len(v):
                    assert c.retrieve_into(k, part, offset=len(got)) == len(v)
                    got += part[:min(MiB, len(v) - len(got))]
                assert got == v
                with pytest.raises(NkvError) as ei:
                    c.store(key("gw2"), v)
                assert ei.value.errno == (errno.EFBIG if transport == "tcp" else errno.EINVAL)
    finally:
        low.stop()


# ---- a target that says more than it moved -----------------------------------------------------

class SizeLiar:
    """An NVMe/TCP proxy in front of the daemon that adds 4096 to DW0 of every Retrieve (02h) and
    Retrieve Range (F2h) completion on I/O queues, without moving more data: what a target looks
    like that reports a value's full size but moves a prefix."""

    def __init__(self, port):
        self.upstream = port
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.lied = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.lsock.close()

    def _accept(self):
        while True:
            try:
                host, _ = self.lsock.accept()
            except OSError:
                return
            target = socket.create_connection(("127.0.0.1", self.upstream))
            state = {"io": False, "retrieves": set()}
            threading.Thread(target=self._pump, args=(host, target, state, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(target, host, state, False), daemon=True).start()

    @staticmethod
    def _read(s, n):
        b = b""
        while len(b) < n:
            got = s.recv(n - len(b))
            if not got:
                raise EOFError
            b += got
        return b

    def _pump(self, src, dst, state, from_host):
        try:
            while True:
                ch = self._read(src, 8)
                plen = struct.unpack_from("<I", ch, 4)[0]
                pdu = bytearray(ch + self._read(src, plen - 8))
                if from_host and pdu[0] == 4:      # CapsuleCmd: the SQE from byte 8
                    opc, cid = pdu[8], struct.unpack_from("<H", pdu, 10)[0]
                    if opc == 0x7F and pdu[12] == 0x01:   # Fabrics Connect: QID in CDW10 31:16
                        state["io"] = struct.unpack_from("<H", pdu, 8 + 42)[0] != 0
                    elif state["io"] and opc in (0x02, 0xF2):
                        state["retrieves"].add(cid)
                elif not from_host and pdu[0] == 5:   # CapsuleResp: the CQE from byte 8
                    cid = struct.unpack_from("<H", pdu, 8 + 12)[0]
                    status = struct.unpack_from("<H", pdu, 8 + 14)[0] >> 1
                    if cid in state["retrieves"]:
                        state["retrieves"].discard(cid)
                        if status == 0:
                            dw0 = struct.unpack_from("<I", pdu, 8)[0]
                            struct.pack_into("<I", pdu, 8, dw0 + 4096)
                            self.lied += 1
                dst.sendall(pdu)
        except (OSError, EOFError):
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_client_catches_a_short_transfer(daemon, key):
    """libnkv counts the C2HData bytes: a success whose DW0 says more than moved is an EIO, never a
    size with stale bytes behind the ones that came."""
    if daemon.backend != "mem":
        pytest.skip("the client's check does not depend on the backend")
    k = key("liar")
    v = os.urandom(100000)
    with daemon.connect("tcp") as c:
        c.store(k, v)
    proxy = SizeLiar(daemon.port)
    try:
        with rados_nkv.connect("127.0.0.1:%d" % proxy.port, subnqn=NQN) as c:
            for call in (lambda: c.retrieve_into(k, bytearray(MiB)),
                         lambda: c.retrieve_into(k, bytearray(MiB), offset=10),
                         lambda: c.retrieve(k),
                         lambda: c.retrieve_many([k], [bytearray(MiB)])):
                with pytest.raises(NkvError) as ei:
                    call()
                assert ei.value.errno == errno.EIO, ei.value
            assert proxy.lied >= 4
            # a buffer smaller than the value: the host expects exactly the buffer, and got it
            part = bytearray(50000)
            assert c.retrieve_into(k, part) == len(v) + 4096 and part == v[:50000]
    finally:
        proxy.close()


def test_moved_check_of_every_completion():
    """The package's own check, whatever libnkv reported: bytes moved against DW0 and the buffer."""
    def op(value_size, length, xfer, offset=0):
        o = Op()
        o.value_size, o.len, o.xfer, o.offset = value_size, length, xfer, offset
        return o
    assert _client._moved_error(op(3 * MiB, 4 * MiB, 3 * MiB)) is None
    assert _client._moved_error(op(3 * MiB, 2 * MiB, 2 * MiB)) is None          # truncated: fine
    assert _client._moved_error(op(3 * MiB, 4 * MiB, MiB + 5, offset=2 * MiB - 5)) is None
    assert _client._moved_error(op(100, 4096, 0, offset=200)) is None             # past the end
    e = _client._moved_error(op(3 * MiB, 4 * MiB, MiB))
    assert isinstance(e, NkvError) and e.errno == errno.EIO and "1048576 bytes" in str(e)
    assert _client._moved_error(op(3 * MiB, 4 * MiB, MiB, offset=4096)).errno == errno.EIO
