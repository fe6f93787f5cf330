# SPDX-License-Identifier: Apache-2.0
"""Several paths to one subsystem: connect() with a list of targets runs libnkv's multipath engine.
Two gateways of one group on the cluster (rados-nkv --group, one configuration); a store_many load
through connect([A, B]); A is killed (SIGKILL): no call fails, every stored value reads back, the time
to resume is printed; A restarts and takes the I/O again, B is killed: the same. An ANA drain of A
with nkv-ctl moves the I/O to B and back without an error. Bad target lists are refused before
anything connects."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

import rados_nkv
from conftest import _cluster_or_skip, _accepts, daemon_binary, free_port
from rados_nkv import NkvError

NQN = "nqn.2026-12.io.rados-nkv:pympath"
N, SIZE = 8, 8192
TIMEOUT_S = 4.0
RESUME_MAX_S = 3.0


class Group:
    """Two rados-nkv gateways of one group serving NQN's namespace 1 from the same RADOS namespace."""

    def __init__(self, tmp):
        self.tmp = tmp
        tag = "%d-%d" % (os.getpid(), int(time.time() * 1000) % 1000000)
        self.group, self.rns = "pympath-" + tag, "pympath-" + tag
        self.ports = [free_port(), free_port()]
        self.procs = [None, None]
        for g in (0, 1):
            self.start(g)

    def start(self, g):
        env = os.environ
        conf = {"backend": {"type": "rados", "ceph_conf": env["NKV_CEPH_CONF"], "keyring": env.get("NKV_CEPH_KEYRING", ""),
                            "client_id": env.get("NKV_CEPH_USER", "admin")},
                "listeners": [{"address": "127.0.0.1", "port": self.ports[g]}],
                "group": {"name": self.group, "pool": env.get("NKV_CEPH_POOL", "nkv")},
                "control": {"address": "unix:%s/%d.sock" % (self.tmp, g)},
                "subsystems": [{"nqn": NQN, "pool": env.get("NKV_CEPH_POOL", "nkv"), "allow_any_host": True,
                                "namespaces": [{"nsid": 1, "rados_namespace": self.rns}]}]}
        path = os.path.join(self.tmp, "gw%d.json" % g)
        with open(path, "w") as f:
            json.dump(conf, f)
        log = open(os.path.join(self.tmp, "gw%d.log" % g), "ab")
        self.procs[g] = subprocess.Popen([daemon_binary(), "-c", path, "--gateway-name", "gw-%d" % g,
                                          "-d", "127.0.0.1:%d" % free_port(), "--op-timeout", "5",
                                          "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 30
        while not _accepts(self.ports[g]):
            assert self.procs[g].poll() is None and time.monotonic() < deadline, "gateway %d did not start" % g
            time.sleep(0.05)

    def kill(self, g):
        self.procs[g].send_signal(signal.SIGKILL)
        self.procs[g].wait()

    def targets(self):
        return ["127.0.0.1:%d" % p for p in self.ports]

    def close(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        env = os.environ
        subprocess.run(["rados", "-c", env["NKV_CEPH_CONF"]] +
                       (["--keyring", env["NKV_CEPH_KEYRING"]] if env.get("NKV_CEPH_KEYRING") else []) +
                       ["-p", env.get("NKV_CEPH_POOL", "nkv"), "rm", "rados_nkv.group." + self.group],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture
def group(request):
    if request.config.getoption("--nkv-backend") == "mem":
        pytest.skip("two gateways of a group share a RADOS pool: the rados backend's run covers this")
    _cluster_or_skip()
    tmp = tempfile.mkdtemp(prefix="nkv-mp-")
    g = Group(tmp)
    yield g
    g.close()
    shutil.rmtree(tmp, ignore_errors=True)


def _load_and_kill(c, group, victim, what, seq0):
    stop = threading.Event()
    log = []  # (t0, t1, keys, values, error or None)

    def load():
        seq = seq0
        while not stop.is_set():
            keys = [b"pm%d.%d" % (seq, i) for i in range(N)]
            vals = [os.urandom(SIZE) for _ in range(N)]
            t0 = time.monotonic()
            err = None
            try:
                c.store_many(keys, vals)
            except NkvError as e:  # BatchError included
                err = e
            log.append((t0, time.monotonic(), keys, vals, err))
            seq += 1
            time.sleep(0.002)

    th = threading.Thread(target=load)
    th.start()
    time.sleep(0.8)
    t_kill = time.monotonic()
    group.kill(victim)
    time.sleep(2.0)
    stop.set()
    th.join()
    errors = [e for (_, _, _, _, e) in log if e is not None]
    around = [t1 - t0 for (t0, t1, _, _, _) in log if t1 >= t_kill]
    after = [t1 for (t0, t1, _, _, _) in log if t0 >= t_kill]
    resume = (after[0] - t_kill) if after else None
    print("%s: %d batches, %d failed at the application; time to resume: longest batch around the kill "
          "%.0f ms, kill -> first batch started after it done %.0f ms"
          % (what, len(log), len(errors), 1000 * max(around or [0]), 1000 * (resume if resume is not None else -1)))
    assert not errors, "%s: %d batch(es) failed: %r" % (what, len(errors), errors[:3])
    assert around and resume is not None and resume < RESUME_MAX_S and max(around) < RESUME_MAX_S
    bad = 0
    for (_, _, keys, vals, _) in log:
        bad += sum(1 for k, v in zip(keys, vals) if c.retrieve(k) != v)
    assert bad == 0, "%s: %d stored values missing or different" % (what, bad)


def test_gateway_killed_under_load(group):
    with rados_nkv.connect(group.targets(), subnqn=NQN, queues=2, depth=16, timeout=TIMEOUT_S) as c:
        assert c.paths == 2
        _load_and_kill(c, group, 0, "python failover (A killed)", 0)
        group.start(0)
        t0 = time.monotonic()
        eng = c.engine._handle()
        while rados_nkv._ffi.nkv_engine_path_active(eng, 1) != 0:
            assert time.monotonic() - t0 < 5, "A never became the active path again"
            time.sleep(0.01)
        print("python fail back: I/O on A again %.0f ms after its restart" % (1000 * (time.monotonic() - t0)))
        _load_and_kill(c, group, 1, "python fail back (B killed)", 100000)
        # the comma form names the same paths
    with rados_nkv.connect(",".join(group.targets()), subnqn=NQN, timeout=TIMEOUT_S) as c:
        assert c.paths == 2 and c.exist(b"pm0.0")


def _ctl_binary():
    p = os.environ.get("NKV_CTL")
    if p:
        return p
    for preset in ("asan", "release", "debug"):
        q = os.path.join(os.path.dirname(__file__), "..", "..", "build", preset, "tools", "nkv-ctl", "nkv-ctl")
        if os.path.exists(q):
            return q
    pytest.skip("no nkv-ctl (built with gRPC): set NKV_CTL")


def test_ana_drain(group):
    """An operator drains gateway A with nkv-ctl ana set (docs/nvme-kv-wire.md B.10): the engine
    moves new I/O to B without an error at the application, and back to A once A is optimized again."""
    ctl = _ctl_binary()

    def ana(state):  # through B; its gRPC server starts after it joined the group (a 2 s name probe)
        t0 = time.monotonic()
        while True:
            rc = subprocess.run([ctl, "--server", "unix:%s/1.sock" % group.tmp, "ana", "set", "1", state,
                                 "--gateway", "gw-0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if rc.returncode != 69 or time.monotonic() - t0 > 15:  # 69: not reachable yet
                break
            time.sleep(0.1)
        assert rc.returncode == 0, rc.stderr

    with rados_nkv.connect(group.targets(), subnqn=NQN, queues=2, depth=16, timeout=TIMEOUT_S) as c:
        eng = c.engine._handle()

        def wait_active(i, what):
            t0 = time.monotonic()
            while rados_nkv._ffi.nkv_engine_path_active(eng, 1) != i:
                assert time.monotonic() - t0 < 5, "%s: path %d never became active" % (what, i)
                time.sleep(0.01)
            return 1000 * (time.monotonic() - t0)

        wait_active(0, "start")
        stop, errors, done = threading.Event(), [], [0]

        def load():
            seq = 0
            while not stop.is_set():
                try:
                    c.store_many([b"ad%d.%d" % (seq, i) for i in range(N)], [os.urandom(SIZE) for _ in range(N)])
                    done[0] += 1
                except NkvError as e:
                    errors.append(e)
                seq += 1

        th = threading.Thread(target=load)
        th.start()
        try:
            ana("non-optimized")
            ms_drain = wait_active(1, "drain")
            ana("inaccessible")
            time.sleep(1.5)  # I/O sent to A now would fail with 0302h: the engine must not send it there
            assert rados_nkv._ffi.nkv_engine_path_active(eng, 1) == 1
            ana("optimized")
            ms_back = wait_active(0, "undrain")
        finally:
            stop.set()
            th.join()
        print("ANA drain: I/O on B %.0f ms after ana set non-optimized, back on A %.0f ms after optimized; "
              "%d batches, %d failed" % (ms_drain, ms_back, done[0], len(errors)))
        assert not errors, errors[:3]


@pytest.mark.parametrize("bad, exc", [
    ([], ValueError), (["127.0.0.1:1", 5], TypeError), ("127.0.0.1:1,", ValueError),
    (["127.0.0.1:99999", "127.0.0.1:1"], ValueError), (["shm:", "127.0.0.1:1"], ValueError),
    (["127.0.0.1:%d" % (i + 1) for i in range(17)], ValueError),
])
def test_bad_target_lists(bad, exc):
    with pytest.raises(exc):
        rados_nkv.connect(bad, subnqn=NQN)


def test_discovery_port_with_several_targets():
    with pytest.raises(ValueError, match="discovery_port"):
        rados_nkv.connect(["127.0.0.1:1", "127.0.0.1:2"], discovery_port=8009)
