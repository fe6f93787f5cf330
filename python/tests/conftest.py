# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a rados-nkv daemon per backend (mem, and rados on the micro cluster), clients over
NVMe/TCP and shared memory (and vfio-user: test_vfio_user.py), per-test keys.

The daemon is the built rados-nkv binary ($NKV_DAEMON, else build/asan or build/release of this
checkout), started on ports the kernel says are free, with a shm socket in a temporary directory,
and stopped with SIGTERM at the end of the session: it must exit 0 (a nonzero exit is usually a
sanitizer report in its log, which the failure prints).

Backends: --nkv-backend mem|rados|all (default all; $NKV_PY_BACKEND). rados needs the cluster
variables of `scripts/ceph-dev.sh env` (NKV_CEPH_CONF, ...): without them its tests are skipped,
or fail when NKV_REQUIRE_RADOS=1. Each session uses its own RADOS namespaces, so runs never see
each other's keys.

Namespaces every daemon serves: 1 (the tests' default), 2 (max value 1 MiB: oversized values fail
per item), 3 (read-only, over namespace 1's keys), 4 (for List, emptied by the test using it), 5
(read-only, over namespace 1's keys, max value 1 MiB: values above its own limit).
"""

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import rados_nkv  # noqa: E402  (after the path: the checkout's package, not an installed one)

NS_MAIN, NS_SMALL, NS_RO, NS_LIST, NS_VIEW = 1, 2, 3, 4, 5
SMALL_MAX = 1 << 20


def pytest_addoption(parser):
    parser.addoption("--nkv-backend", choices=("mem", "rados", "all"),
                     default=os.environ.get("NKV_PY_BACKEND", "all"),
                     help="daemon backends to test (rados needs scripts/ceph-dev.sh env)")


def daemon_binary():
    env = os.environ.get("NKV_DAEMON")
    if env:
        return env
    for preset in ("asan", "release", "debug"):
        p = ROOT / "build" / preset / "rados-nkv"
        if p.exists():
            return str(p)
    pytest.fail("no rados-nkv binary: build it (cmake --build --preset asan --target rados-nkv) or set NKV_DAEMON")


def free_port():
    """A port the kernel says is free now (a fixed or pid-derived one can collide)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _sock_accepts(path):
    """The shm socket answers (a killed daemon leaves its file behind)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """A rados-nkv child process: backend, ports, shm socket, log."""

    def __init__(self, backend, tmp):
        self.backend = backend
        self.label = backend  # in failure messages
        self.port = free_port()
        self.disc_port = free_port()
        self.sock = os.path.join(tmp, "kv-%s.sock" % backend)
        self.vfu_sock = os.path.join(tmp, "kv-%s.vfu" % backend)   # the same subsystem over vfio-user
        self.log_path = os.path.join(tmp, "daemon-%s.log" % backend)
        self.rados_ns = "pytest-%d-%d" % (os.getpid(), int(time.time()))
        ns = self.rados_ns
        args = [daemon_binary(), "--backend", backend, "-l", "127.0.0.1:%d" % self.port,
                "-d", "127.0.0.1:%d" % self.disc_port, "-S", self.sock, "--vfio-user", self.vfu_sock,
                "--log-level", "warn",
                "--grace-ms", "2000",
                "--ns", "%d:%s" % (NS_MAIN, ns), "--ns", "%d:%s-small:%d" % (NS_SMALL, ns, SMALL_MAX),
                "--ns", "%d:%s::ro" % (NS_RO, ns), "--ns", "%d:%s-list" % (NS_LIST, ns),
                "--ns", "%d:%s:%d:ro" % (NS_VIEW, ns, SMALL_MAX)]
        if backend == "rados":
            args += ["--ceph-conf", os.environ["NKV_CEPH_CONF"], "--pool", os.environ.get("NKV_CEPH_POOL", "nkv"),
                     "--client-id", os.environ.get("NKV_CEPH_USER", "admin"), "--op-timeout", "20"]
            if os.environ.get("NKV_CEPH_KEYRING"):
                args += ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
        self.args = args
        self._start(args, self._ready)

    def _ready(self):
        # the vfio-user socket is renamed into place once it listens (a probe would take its one client)
        return (_accepts(self.port) and _accepts(self.disc_port) and _sock_accepts(self.sock) and
                os.path.exists(self.vfu_sock))

    def kill(self):
        """SIGKILL, as a crash; restart() brings it back."""
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def restart(self):
        """The same command line again (ports, socket, namespaces). Returns time.monotonic() once it
        accepts on every port and its socket."""
        self._start(self.args, self._ready)
        return time.monotonic()

    def kill_restart(self, down_s):
        """kill(), @down_s seconds away, then restart()."""
        self.kill()
        time.sleep(down_s)
        return self.restart()

    def _start(self, args, ready):
        """Run @args with its output in self.log_path; wait up to 30 s until ready() holds."""
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail("rados-nkv (%s) exited with %d at startup:\n%s" % (self.label, self.proc.returncode,
                                                                              self.log_text()))
            if ready():
                return
            time.sleep(0.05)
        self.proc.kill()
        pytest.fail("rados-nkv (%s) not listening after 30 s:\n%s" % (self.label, self.log_text()))

    def log_text(self):
        self.log.flush()
        return Path(self.log_path).read_text(errors="replace")[-8000:]

    def target(self, transport):
        if transport == "vfio-user":
            return "vfio-user:" + self.vfu_sock
        return "127.0.0.1:%d" % self.port if transport == "tcp" else "shm:" + self.sock

    def connect(self, transport, **kw):
        if transport == "tcp":
            kw.setdefault("discovery_port", self.disc_port)
        return rados_nkv.connect(self.target(transport), **kw)

    def stop(self):
        """SIGTERM; the daemon must exit 0 within 20 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.log.close()
                pytest.fail("rados-nkv (%s) still running 20 s after SIGTERM:\n%s" % (self.label, self.log_text()))
        self.log.close()
        if self.proc.returncode != 0:
            pytest.fail("rados-nkv (%s) exited with %d (sanitizer report?):\n%s"
                        % (self.label, self.proc.returncode, self.log_text()))


def _cluster_or_skip():
    if os.environ.get("NKV_CEPH_CONF"):
        return
    if os.environ.get("NKV_REQUIRE_RADOS") == "1":
        pytest.fail("NKV_REQUIRE_RADOS=1 but no cluster: eval \"$(scripts/ceph-dev.sh env)\" first")
    pytest.skip("no Ceph cluster (NKV_CEPH_CONF unset; scripts/ceph-dev.sh env)")


@pytest.fixture(scope="session")
def tmp_session():
    d = tempfile.mkdtemp(prefix="nkv-pytest-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def pytest_generate_tests(metafunc):
    """Tests using a daemon run once per selected backend."""
    if "daemon" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--nkv-backend")
        backends = ["mem", "rados"] if chosen == "all" else [chosen]
        metafunc.parametrize("daemon", backends, indirect=True, scope="session")


@pytest.fixture(scope="session")
def daemon(request, tmp_session):
    """The rados-nkv daemon of one backend (started once per session)."""
    backend = request.param
    if backend == "rados":
        _cluster_or_skip()
    d = Daemon(backend, tmp_session)
    yield d
    d.stop()


@pytest.fixture(params=["tcp", "shm"])
def transport(request):
    return request.param


@pytest.fixture
def client(daemon, transport):
    """A Client of the daemon over one transport (closed after the test)."""
    c = daemon.connect(transport)
    yield c
    c.close()


@pytest.fixture
def key(request):
    """key("name") -> a key unique to this test (and transport/backend), at most 16 bytes."""
    tag = hashlib.sha256(request.node.nodeid.encode()).digest()[:5]

    def make(name=""):
        k = tag + (name.encode() if isinstance(name, str) else name)
        assert len(k) <= 16, "test key too long"
        return k
    return make


@pytest.fixture
def name(request):
    """name("x") -> a long name unique to this test."""
    tag = request.node.nodeid

    def make(suffix=""):
        return "%s@%s" % (tag, suffix)
    return make
