# SPDX-License-Identifier: Apache-2.0
"""connect(), discover(), close(), and every argument refused before anything is sent."""

import errno
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rados_nkv
from rados_nkv import NkvError
from conftest import Daemon, _accepts, daemon_binary, free_port


def test_discover(daemon):
    log = rados_nkv.discover("127.0.0.1", daemon.disc_port, timeout=10)
    subs = [e for e in log if e["subtype"] == 2]
    assert subs and subs[0]["subnqn"] == "nqn.2026-11.io.rados-nkv:nkv"
    assert subs[0]["traddr"] == "127.0.0.1" and subs[0]["trsvcid"] == str(daemon.port)
    assert set(subs[0]) == {"subnqn", "traddr", "trsvcid", "trtype", "adrfam", "subtype", "portid"}
    assert subs[0]["trtype"] == 3      # TCP


def test_connect_forms(daemon):
    nqn = "nqn.2026-11.io.rados-nkv:nkv"
    # explicit subsystem and port
    with rados_nkv.connect("127.0.0.1:%d" % daemon.port, subnqn=nqn, queues=2, depth=32, timeout=10) as c:
        assert c.queues == 2 and c.transport == "tcp" and c.subnqn == nqn
        c.store(b"f1", b"x")
        assert c.retrieve(b"f1") == b"x"
    # discovery picks the subsystem and its port
    with rados_nkv.connect("localhost", discovery_port=daemon.disc_port) as c:
        assert c.subnqn == nqn and c.retrieve(b"f1") == b"x"
    # shm, with and without the subsystem named
    with rados_nkv.connect("shm:" + daemon.sock, nsid=3) as c:
        assert c.transport == "shm" and c.nsid == 3 and c.read_only and c.retrieve(b"f1") == b"x"
    with rados_nkv.connect("shm:" + daemon.sock, subnqn=nqn) as c:
        assert c.delete(b"f1") is True
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("shm:" + daemon.sock, subnqn="nqn.2026-11.io.rados-nkv:other")
    assert ei.value.errno == errno.ENOENT
    # with digests
    with rados_nkv.connect("127.0.0.1:%d" % daemon.port, subnqn=nqn, hdgst=True, ddgst=True) as c:
        c.store(b"dg", bytes(100000))
        assert c.retrieve(b"dg") == bytes(100000) and c.delete(b"dg")


def test_connect_failures(daemon):
    port = free_port()
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("127.0.0.1:%d" % port, subnqn="nqn.x:y", timeout=5)
    assert ei.value.errno == errno.ECONNREFUSED and ei.value.status is None
    assert "127.0.0.1:%d" % port in str(ei.value)
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("127.0.0.1:%d" % daemon.port, subnqn="nqn.2026-11.io.rados-nkv:nope", timeout=5)
    assert ei.value.errno == errno.ENOENT
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("127.0.0.1", discovery_port=port, timeout=5)     # no discovery there
    assert ei.value.errno == errno.ECONNREFUSED
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("shm:/nonexistent/nkv.sock", timeout=5)
    assert ei.value.errno in (errno.ENOENT, errno.ECONNREFUSED)
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("shm:" + daemon.sock, nsid=77)    # no such namespace
    assert ei.value.errno == errno.ENOENT


@pytest.mark.parametrize("target, exc", [
    (42, TypeError), ("", ValueError), ("shm:", ValueError), ("host:0", ValueError),
    ("host:65536", ValueError), ("host:http", ValueError), ("[::1", ValueError), (":4420", ValueError),
])
def test_bad_targets(target, exc):
    with pytest.raises(exc):
        rados_nkv.connect(target, subnqn="nqn.x:y")


@pytest.mark.parametrize("kw, exc", [
    ({"queues": 0}, ValueError), ({"queues": "4"}, TypeError), ({"depth": 0}, ValueError),
    ({"depth": 70000}, ValueError), ({"timeout": 0}, ValueError), ({"timeout": "1"}, ValueError),
    ({"nsid": 0}, ValueError), ({"hostnqn": "not-an-nqn"}, ValueError), ({"subnqn": 5}, TypeError),
])
def test_bad_connect_options(kw, exc):
    with pytest.raises(exc):
        rados_nkv.connect("127.0.0.1:1", **dict({"subnqn": "nqn.x:y"}, **kw))


def test_bad_call_arguments(client, key):
    k = key("k")
    for bad_key, exc in ((None, TypeError), (5, TypeError), (b"", ValueError), (b"x" * 17, ValueError),
                         ([1, 2], TypeError)):
        for call in (lambda: client.store(bad_key, b"v"), lambda: client.retrieve(bad_key),
                     lambda: client.exist(bad_key), lambda: client.delete(bad_key),
                     lambda: client.retrieve_into(bad_key, bytearray(1))):
            with pytest.raises(exc):
                call()
    with pytest.raises(TypeError):
        client.store(k, "a str value")
    with pytest.raises(TypeError):
        client.store(k, 12345)
    with pytest.raises(TypeError):
        client.store(k, None)
    with pytest.raises(TypeError, match="read-only"):
        client.retrieve_into(k, b"bytes are read-only")
    with pytest.raises(TypeError, match="read-only"):
        client.retrieve_into(k, memoryview(bytearray(4)).toreadonly())
    with pytest.raises(ValueError, match="negative offset"):
        client.retrieve_into(k, bytearray(4), offset=-1)
    with pytest.raises(TypeError):
        client.retrieve_into(k, bytearray(4), offset=1.5)
    with pytest.raises(ValueError):
        client.retrieve_into(k, np.zeros((4, 4))[:, 1])
    with pytest.raises(ValueError):
        client.retrieve(k, nsid=0)
    with pytest.raises(TypeError):
        client.retrieve(k, nsid="1")
    with pytest.raises(ValueError):
        client.list(limit=-1)
    with pytest.raises(ValueError):
        client.list(b"x" * 17)
    with pytest.raises(ValueError):
        client.alloc(0)
    with pytest.raises(TypeError):
        client.alloc(1.0)
    with pytest.raises(TypeError):
        client.register("str")
    with pytest.raises(ValueError):
        client.unregister(bytearray(10))
    assert client.exist(k) is False       # none of it reached the target


def test_close_is_idempotent_and_final(daemon, transport):
    c = daemon.connect(transport)
    mv = c.alloc(8192)
    mv[0] = 1
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(ValueError, match="closed"):
        c.retrieve(b"x")
    with pytest.raises(ValueError, match="closed"):
        c.store_many([b"x"], [b"y"])
    with pytest.raises(ValueError):
        mv[0]          # the alloc()ed memory went with the client; the view was released
    assert "closed" in repr(c)


def test_namespaces_on_one_client(client, key):
    k = key("ns")
    client.store(k, b"in 1")
    client.store(k, b"in 2", nsid=2)
    assert client.retrieve(k) == b"in 1" and client.retrieve(k, nsid=2) == b"in 2"
    assert client.delete(k) and client.delete(k, nsid=2)
    with pytest.raises(NkvError) as ei:
        client.retrieve(k, nsid=99)
    assert ei.value.status is not None and ei.value.errno == errno.ENXIO   # Invalid Namespace (0Bh)


def test_errors_pickle(client, key):
    import pickle
    with pytest.raises(NkvError) as ei:
        client.store(key("p"), b"v", must_exist=True)
    e2 = pickle.loads(pickle.dumps(ei.value))
    assert type(e2) is NkvError and e2.errno == ei.value.errno and e2.status == ei.value.status
    assert str(e2) == str(ei.value)


def test_close_releases_threads_and_fds(daemon, transport):
    """Each client owns an engine (a thread per queue pair), sockets and, over shm, memfds: close()
    gives all of them back."""
    import os

    def counts():
        return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))
    daemon.connect(transport).close()          # first-use allocations (libraries, caches) out of the way
    before = counts()
    for _ in range(10):
        c = daemon.connect(transport, queues=3)
        c.alloc(1 << 20)
        c.store(b"cyc", b"x")
        c.aio                                   # an AsyncClient too
        c.close()
    # pthread_join returns once the kernel clears the thread's tid, a moment before it drops the
    # task from /proc/self/task, so a joined thread can still be listed briefly: wait for that
    # (a thread that was never joined stays listed and still fails here).
    import time
    deadline = time.monotonic() + 2.0
    while counts() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert counts() == before


def test_discovery_on_the_given_port(daemon):
    """"HOST:PORT" without a subnqn: the discovery log at PORT (every rados-nkv listener serves it),
    the rule the nkv CLI follows, not the well-known port 8009."""
    with rados_nkv.connect("127.0.0.1:%d" % daemon.port, timeout=10) as c:
        assert c.subnqn == "nqn.2026-11.io.rados-nkv:nkv"
        c.store(b"gp", b"v")
        assert c.retrieve(b"gp") == b"v" and c.delete(b"gp")
    port = free_port()
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect("127.0.0.1:%d" % port, timeout=5)
    assert ei.value.errno == errno.ECONNREFUSED
    assert str(ei.value).startswith("nothing listening at 127.0.0.1:%d" % port), str(ei.value)


class TwoSubsystems(Daemon):
    """A mem daemon with two subsystems on one listener (and no discovery listener)."""
    NQNS = ("nqn.2026-11.io.rados-nkv:two-a", "nqn.2026-11.io.rados-nkv:two-b")

    def __init__(self, tmp):
        self.backend = "mem"
        self.label = "mem, two subsystems"
        self.port = free_port()
        self.log_path = os.path.join(tmp, "daemon-two.log")
        conf = {"backend": {"type": "mem"}, "listeners": [{"address": "127.0.0.1", "port": self.port}],
                "discovery": False, "log_level": "warn",
                "subsystems": [{"nqn": n, "pool": "nkv", "namespaces": [{"nsid": 1, "rados_namespace": n[-5:]}]}
                               for n in self.NQNS]}
        path = os.path.join(tmp, "two.json")
        with open(path, "w") as f:
            json.dump(conf, f)
        self._start([daemon_binary(), "-c", path], lambda: _accepts(self.port))


@pytest.fixture(scope="module")
def two_subsystems(tmp_session):
    d = TwoSubsystems(tmp_session)
    yield d
    d.stop()


def test_several_subsystems_need_a_subnqn(two_subsystems):
    """Without a subnqn, a discovery log that lists several subsystems is an error naming them, never
    "the first" (which would move when an administrator adds one)."""
    target = "127.0.0.1:%d" % two_subsystems.port
    with pytest.raises(NkvError) as ei:
        rados_nkv.connect(target, timeout=10)
    assert ei.value.errno == errno.ENOTUNIQ
    assert all(n in str(ei.value) for n in TwoSubsystems.NQNS) and "subnqn" in str(ei.value), str(ei.value)
    for n in TwoSubsystems.NQNS:
        with rados_nkv.connect(target, subnqn=n, timeout=10) as c:
            assert c.subnqn == n
    # the nkv CLI follows the same rule (exit 64, the candidates on stderr)
    cli = Path(daemon_binary()).parent / "nkv"   # built next to the daemon
    if cli.exists():
        r = subprocess.run([str(cli), "--timeout", "10000", "-s", str(two_subsystems.port), "exist", "k"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 64 and all(n in r.stderr for n in TwoSubsystems.NQNS), r.stderr
