# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the LMCache integration tests: the rados-nkv daemon of python/tests/conftest.py (mem
backend; rados on the micro cluster named by NKV_CEPH_CONF; --nkv-backend picks), reached over
NVMe/TCP and shared memory, and LMCache's classes: the stand-ins in standins/ (LMCache cannot be
installed here), put first on sys.path before anything imports rados_nkv.lmcache, so the connector
subclasses the stand-in RemoteConnector exactly as it subclasses the real one under LMCache."""

import sys
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


@pytest.fixture
def lmc_endpoint(daemon, transport):
    """The settings (extra_config values) reaching the daemon of python/tests/conftest.py (one per
    backend: mem, and rados on the micro cluster) over one transport. TCP names the subsystem (as
    discovered); shm leaves it unset (the socket's own subsystem)."""
    subnqn = None
    if transport == "tcp":
        subnqn = _subnqn(daemon)
    return {"target": daemon.target(transport), "subnqn": subnqn, "transport": transport,
            "daemon": daemon}


_subnqns = {}


def _subnqn(daemon):
    if daemon.disc_port not in _subnqns:
        import rados_nkv
        log = rados_nkv.discover("127.0.0.1", daemon.disc_port)
        _subnqns[daemon.disc_port] = [e["subnqn"] for e in log if e["subtype"] == 2][0]
    return _subnqns[daemon.disc_port]
