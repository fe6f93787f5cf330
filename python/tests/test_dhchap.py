# SPDX-License-Identifier: Apache-2.0
"""DH-HMAC-CHAP from Python: connect(dhchap_secret=, dhchap_ctrl_secret=) against a mem daemon of
its own whose subsystem requires authentication of one host NQN (with a controller secret)."""

import base64
import errno
import os
import subprocess
import time
import zlib

import pytest

import rados_nkv
from conftest import _accepts, daemon_binary, free_port

SUB = "nqn.2026-11.io.rados-nkv:py-dhchap"
HOST = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000d4"


def secret(hh, key):
    """The DHHC-1 representation (as nvme gen-dhchap-key prints it)."""
    return "DHHC-1:%02d:%s:" % (hh, base64.b64encode(key + zlib.crc32(key).to_bytes(4, "little")).decode())


KEY = secret(1, bytes(range(32)))
CKEY = secret(0, bytes(range(100, 148)))
WRONG = secret(1, bytes(range(1, 33)))


@pytest.fixture(scope="module")
def port(request, tmp_path_factory):
    if request.config.getoption("--nkv-backend") == "rados":
        pytest.skip("runs on its own mem daemon")
    tmp = tmp_path_factory.mktemp("dhchap")
    conf = tmp / "conf.json"
    conf.write_text('{"subsystems": [{"nqn": "%s", "allowed_hosts": [{"nqn": "%s", "dhchap_key": "%s", '
                    '"dhchap_ctrl_key": "%s"}]}]}' % (SUB, HOST, KEY, CKEY))
    os.chmod(conf, 0o600)
    p = free_port()
    log = open(tmp / "daemon.log", "wb")
    proc = subprocess.Popen([daemon_binary(), "-c", str(conf), "--backend", "mem", "-l", "127.0.0.1:%d" % p,
                             "-d", "none", "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not _accepts(p):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp / "daemon.log").read_text()
        time.sleep(0.05)
    yield p
    proc.terminate()
    assert proc.wait(20) == 0, (tmp / "daemon.log").read_text()
    log.close()


def conn(port, **kw):
    return rados_nkv.connect("127.0.0.1:%d" % port, subnqn=SUB, hostnqn=HOST, queues=2, timeout=10, **kw)


@pytest.mark.parametrize("ctrl", [None, CKEY], ids=["unidirectional", "bidirectional"])
def test_authenticated_store_retrieve(port, ctrl):
    with conn(port, dhchap_secret=KEY, dhchap_ctrl_secret=ctrl) as c:
        c.store(b"py-auth", b"v" * 5000)
        assert c.retrieve(b"py-auth") == b"v" * 5000
        assert c.delete(b"py-auth")


@pytest.mark.parametrize("kw, err", [
    ({}, errno.ENOKEY),
    ({"dhchap_secret": WRONG}, errno.EACCES),
    ({"dhchap_secret": KEY, "dhchap_ctrl_secret": WRONG}, errno.EKEYREJECTED),
    ({"dhchap_secret": "DHHC-1:01:AAAA:"}, errno.EINVAL),
], ids=["no-secret", "wrong-secret", "wrong-ctrl-secret", "malformed"])
def test_refused(port, kw, err):
    with pytest.raises(rados_nkv.NkvError) as e:
        conn(port, **kw)
    assert e.value.errno == err


def test_bad_arguments(port):
    with pytest.raises(ValueError):
        conn(port, dhchap_secret="not a secret")
    with pytest.raises(ValueError):
        conn(port, dhchap_ctrl_secret=CKEY)
