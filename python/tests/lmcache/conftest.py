"""Fixtures of the LMCache integration tests: a real rados-nkv daemon (mem backend; the rados
backend on the micro cluster named by NKV_CEPH_CONF), reached over NVMe/TCP and shared memory, and
LMCache's classes: the stand-ins in standins/ (LMCache cannot be installed here), put first on
sys.path before anything imports rados_nkv.lmcache, so the connector subclasses the stand-in
RemoteConnector exactly as it subclasses the real one under LMCache."""

import os
import shutil
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
STANDINS = HERE / "standins"
REPO = HERE.parents[2]


sys.path.insert(0, str(STANDINS))
for _m in [m for m in sys.modules if m == "lmcache" or m.startswith("lmcache.")]:
    del sys.modules[_m]     # e.g. this directory imported as a namespace package "lmcache"
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

SUBNQN = "nqn.2026-11.io.rados-nkv:lmcache-test"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon_binary():
    env = os.environ.get("NKV_DAEMON")
    if env:
        return env
    for preset in ("asan", "release", "debug"):
        p = REPO / "build" / preset / "rados-nkv"
        if p.exists():
            return str(p)
    found = shutil.which("rados-nkv")
    if found:
        return found
    pytest.fail("rados-nkv not built (cmake --build --preset asan --target rados-nkv) and NKV_DAEMON unset")


class Daemon:
    """A rados-nkv process serving one subsystem over NVMe/TCP and shared memory."""

    def __init__(self, backend):
        self.backend = backend
        self.dir = tempfile.mkdtemp(prefix="nkv-lmc-")
        self.port = _free_port()
        self.disc = _free_port()
        self.sock = os.path.join(self.dir, "kv.sock")
        self.log_path = os.path.join(self.dir, "daemon.log")
        args = [_daemon_binary(), "-l", "127.0.0.1:%d" % self.port, "-d", "127.0.0.1:%d" % self.disc]
        if backend == "mem":
            args += ["-b", "mem", "-s", SUBNQN, "-S", self.sock]
        else:
            args += ["-b", "rados", "--ceph-conf", os.environ["NKV_CEPH_CONF"],
                     "--client-id", os.environ.get("NKV_CEPH_USER", "admin")]
            if os.environ.get("NKV_CEPH_KEYRING"):
                args += ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
            # a RADOS namespace of its own: nothing of other runs in the way
            args += ["-s", SUBNQN, "-p", os.environ.get("NKV_CEPH_POOL", "nkv"),
                     "-n", "1:lmcache-%s" % uuid.uuid4().hex[:12], "-S", self.sock]
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        env.pop("LD_PRELOAD", None)      # the daemon links its sanitizer itself
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rados-nkv exited %d:\n%s" % (self.proc.returncode, self.log()))
            if b"ready:" in open(self.log_path, "rb").read():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("rados-nkv not ready in 30 s:\n" + self.log())

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def target(self, transport):
        """(target, subnqn) for rados_nkv.connect()."""
        if transport == "shm":
            return "shm:" + self.sock
        return "127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_daemons = {}


def _get_daemon(backend):
    if backend == "rados" and not os.environ.get("NKV_CEPH_CONF"):
        if os.environ.get("NKV_REQUIRE_RADOS") == "1":
            pytest.fail("NKV_REQUIRE_RADOS=1 but NKV_CEPH_CONF is not set (scripts/ceph-dev.sh env)")
        pytest.skip("no cluster: NKV_CEPH_CONF not set (scripts/ceph-dev.sh start; eval \"$(scripts/ceph-dev.sh env)\")")
    d = _daemons.get(backend)
    if d is None:
        d = _daemons[backend] = Daemon(backend)
    return d


def pytest_sessionfinish(session, exitstatus):
    for d in _daemons.values():
        d.stop()
    _daemons.clear()


ENDPOINTS = ["mem-tcp", "mem-shm", "rados-tcp", "rados-shm"]


@pytest.fixture(params=ENDPOINTS)
def lmc_endpoint(request):
    """Settings (the extra_config values) reaching one daemon over one transport."""
    backend, transport = request.param.split("-")
    d = _get_daemon(backend)
    return {"target": d.target(transport), "subnqn": SUBNQN, "transport": transport, "daemon": d}


@pytest.fixture(params=["mem-tcp", "mem-shm"])
def lmc_mem_endpoint(request):
    backend, transport = request.param.split("-")
    d = _get_daemon(backend)
    return {"target": d.target(transport), "subnqn": SUBNQN, "transport": transport, "daemon": d}
