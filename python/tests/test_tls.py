# SPDX-License-Identifier: Apache-2.0
"""TLS from Python: connect(tls_key=, tls_identity=) against a mem daemon of its own with a plain
listener and a --listen-tls listener, whose subsystem has a TLS PSK for one host NQN."""

import base64
import errno
import os
import subprocess
import time
import zlib

import pytest

import rados_nkv
from conftest import _accepts, daemon_binary, free_port

SUB = "nqn.2026-11.io.rados-nkv:py-tls"
HOST = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000e5"
OTHER_HOST = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000e6"


def psk(hh, key):
    """The PSK interchange format (as nvme gen-tls-key prints it): BASE64(key + CRC-32 LE)."""
    return "NVMeTLSkey-1:%02d:%s:" % (hh, base64.b64encode(key + zlib.crc32(key).to_bytes(4, "little")).decode())


KEY = psk(1, bytes(range(32)))
WRONG = psk(1, bytes(range(1, 33)))


@pytest.fixture(scope="module")
def ports(request, tmp_path_factory):
    """(plain port, TLS port, key file) of the daemon."""
    if request.config.getoption("--nkv-backend") == "rados":
        pytest.skip("runs on its own mem daemon")
    tmp = tmp_path_factory.mktemp("tls")
    keyfile = tmp / "host.key"
    keyfile.write_text(KEY + "\n")
    os.chmod(keyfile, 0o600)
    p, pt = free_port(), free_port()
    log = open(tmp / "daemon.log", "wb")
    proc = subprocess.Popen([daemon_binary(), "--backend", "mem", "-l", "127.0.0.1:%d" % p,
                             "--listen-tls", "127.0.0.1:%d" % pt, "-d", "none", "-s", SUB,
                             "--tls-key", "%s=%s" % (HOST, KEY), "--control", "none", "--log-level", "warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not (_accepts(p) and _accepts(pt)):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp / "daemon.log").read_text()
        time.sleep(0.05)
    yield p, pt, str(keyfile)
    proc.terminate()
    assert proc.wait(20) == 0, (tmp / "daemon.log").read_text()
    log.close()


def conn(port, subnqn=SUB, hostnqn=HOST, **kw):
    return rados_nkv.connect("127.0.0.1:%d" % port, subnqn=subnqn, hostnqn=hostnqn, queues=2, timeout=10, **kw)


@pytest.mark.parametrize("identity", [0, 1])
@pytest.mark.parametrize("how", ["key", "file", "discovered"])
def test_store_retrieve_over_tls(ports, how, identity):
    """Every queue over TLS 1.3 with the PSK (given as the string, as @FILE, or with the subsystem
    read from the discovery log of the TLS port itself), identity versions 0 and 1."""
    _, pt, keyfile = ports
    key = "@" + keyfile if how == "file" else KEY
    sub = None if how == "discovered" else SUB
    k = b"tls-%s-%d" % (how[:4].encode(), identity)
    with conn(pt, subnqn=sub, tls_key=key, tls_identity=identity) as c:
        v = os.urandom(300_000)
        c.store(k, v)
        assert c.retrieve(k) == v
        bufs = [bytearray(len(v)) for _ in range(8)]
        assert c.retrieve_many([k] * 8, bufs) == [len(v)] * 8 and all(b == v for b in bufs)
        assert c.delete(k)


@pytest.mark.parametrize("where, kw, err", [
    ("tls", {"tls_key": WRONG}, errno.EKEYREJECTED),                           # not this host's PSK
    ("tls", {"tls_key": KEY, "hostnqn": OTHER_HOST}, errno.EKEYREJECTED),      # no PSK for that host
    ("tls", {}, errno.ECONNRESET),                                             # plain to a TLS port
    ("plain", {"tls_key": KEY}, errno.ECONNRESET),                             # TLS to a plain port
    ("tls", {"tls_key": "NVMeTLSkey-1:01:AAAA:"}, None),                       # no valid PSK
    ("tls", {"tls_key": "@/nonexistent/rados-nkv.key"}, errno.ENOENT),
], ids=["wrong-key", "other-host", "no-tls", "tls-to-plain", "malformed-key", "missing-file"])
def test_refused(ports, where, kw, err):
    p, pt, _ = ports
    with pytest.raises(rados_nkv.NkvError) as e:
        conn(pt if where == "tls" else p, **kw)
    if err is None:
        assert e.value.errno in (errno.EINVAL, errno.EMSGSIZE, errno.EBADMSG), e.value
    else:
        assert e.value.errno == err, e.value


def test_plain_port_still_serves_plain(ports):
    p, _, _ = ports
    with conn(p) as c:
        c.store(b"tls-plain", b"x" * 100)
        assert c.retrieve(b"tls-plain") == b"x" * 100


def test_bad_arguments(ports, tmp_path):
    _, pt, _ = ports
    for bad in ("not a key", "DHHC-1:01:AAAA:", "@", b"NVMeTLSkey-1:01:x:", KEY + "\0"):
        with pytest.raises(ValueError):
            conn(pt, tls_key=bad)
    for identity in (2, -1, True, "1"):
        with pytest.raises(ValueError):
            conn(pt, tls_key=KEY, tls_identity=identity)
    with pytest.raises(ValueError):
        conn(pt, tls_identity=1)                       # an identity version without a key
    with pytest.raises(ValueError, match="shared-memory"):
        rados_nkv.connect("shm:%s" % (tmp_path / "s.sock"), tls_key=KEY)
