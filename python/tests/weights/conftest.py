"""Fixtures for the rados_nkv.weights tests: a real rados-nkv daemon serving NVMe/TCP and shared
memory, on the mem backend, or on the rados backend against the micro cluster when
NKV_WEIGHTS_BACKEND=rados (run_tests.py sets it, and checks for the cluster first).

The daemon binary: $NKV_DAEMON, else the build tree's (asan, release, debug). Ports are free ones
picked at start; the daemon is stopped (SIGTERM, then SIGKILL) by pid at the end of the session.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(HERE))  # the helpers module

SUBNQN = "nqn.2026-11.io.rados-nkv:weights"


def _daemon_binary():
    env = os.environ.get("NKV_DAEMON")
    if env:
        return env
    for preset in ("asan", "release", "debug"):
        p = ROOT / "build" / preset / "rados-nkv"
        if p.exists():
            return str(p)
    pytest.exit("rados-nkv not built: build it (cmake --build --preset asan --target rados-nkv) or set "
                "NKV_DAEMON", returncode=1)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A running rados-nkv: .tcp and .shm targets, .subnqn, .backend, .log (its output file)."""

    def __init__(self, backend, workdir):
        self.backend = backend
        self.subnqn = SUBNQN
        self.port, self.disc = _free_port(), _free_port()
        self.sock = os.path.join(workdir, "kv.sock")
        self.log = os.path.join(workdir, "daemon.log")
        args = [_daemon_binary(), "--backend", backend, "-l", "127.0.0.1:%d" % self.port,
                "-d", "127.0.0.1:%d" % self.disc, "--log-level", "info"]
        if backend == "rados":
            args += ["--ceph-conf", os.environ["NKV_CEPH_CONF"], "--keyring", os.environ["NKV_CEPH_KEYRING"],
                     "--client-id", os.environ.get("NKV_CEPH_USER", "admin")]
        args += ["-s", SUBNQN, "--shm", self.sock]
        if backend == "rados":
            # a RADOS namespace of its own: reruns and other tests never see these objects
            self.rados_ns = "weights-%s" % uuid.uuid4().hex[:12]
            args += ["--pool", os.environ.get("NKV_CEPH_POOL", "nkv"), "--ns", "1:%s" % self.rados_ns]
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        env.pop("LD_PRELOAD", None)  # the daemon links its own sanitizer runtime
        self._out = open(self.log, "wb")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rados-nkv exited with %d:\n%s" % (self.proc.returncode, open(self.log).read()))
            if b"ready:" in open(self.log, "rb").read():
                break
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError("rados-nkv not ready within 30 s:\n%s" % open(self.log).read())
        self.tcp = "127.0.0.1:%d" % self.port
        self.shm = "shm:" + self.sock

    def target(self, transport):
        return self.tcp if transport == "tcp" else self.shm

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()


def backend_name():
    return os.environ.get("NKV_WEIGHTS_BACKEND", "mem")


@pytest.fixture(scope="session")
def daemon():
    b = backend_name()
    if b == "rados" and not os.environ.get("NKV_CEPH_CONF"):
        pytest.skip("no cluster (NKV_CEPH_CONF unset)")
    with tempfile.TemporaryDirectory(prefix="nkv-weights-") as d:
        dm = Daemon(b, d)
        try:
            yield dm
        finally:
            dm.stop()
            if dm.proc.returncode not in (0, -signal.SIGTERM):
                sys.stderr.write(open(dm.log).read())
            assert dm.proc.returncode == 0, "rados-nkv exited with %d on SIGTERM" % dm.proc.returncode


@pytest.fixture(params=["tcp", "shm"])
def transport(request):
    return request.param


@pytest.fixture
def client(daemon, transport):
    import rados_nkv
    c = rados_nkv.connect(daemon.target(transport), subnqn=daemon.subnqn, queues=4, timeout=30)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def target_args(daemon, transport):
    """The CLI's target options for this daemon and transport."""
    return ["-t", daemon.target(transport), "--subnqn", daemon.subnqn]


@pytest.fixture
def model_name(request, transport):
    """A model name no other test uses."""
    return "test/%s-%s-%s" % (request.node.originalname, transport, uuid.uuid4().hex[:6])
