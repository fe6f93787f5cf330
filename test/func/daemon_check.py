# SPDX-License-Identifier: Apache-2.0
"""Shared by the Python tests that drive the daemon (metrics_test.py, events_test.py): pass/fail
counting with the summary line CTest reads, and the daemon's backend flags for `mem` or the micro
cluster ($NKV_CEPH_CONF...; exit 77 without one unless $NKV_REQUIRE_RADOS=1)."""
import os
import sys

counts = {"pass": 0, "fail": 0}


def check(cond, what):
    counts["pass" if cond else "fail"] += 1
    print(("ok - " if cond else "FAIL - ") + what)
    return cond


def failed():
    return counts["fail"]


def finish(code=None):
    print("%d passed, %d failed" % (counts["pass"], counts["fail"]))
    sys.exit(code if code is not None else (1 if counts["fail"] else 0))


def backend_args(backend):
    """The daemon's flags for @backend ("mem" or "rados")."""
    if backend != "rados":
        return ["--backend", "mem"]
    if not os.environ.get("NKV_CEPH_CONF"):
        if os.environ.get("NKV_REQUIRE_RADOS") == "1":
            check(False, "a cluster (NKV_CEPH_CONF unset with NKV_REQUIRE_RADOS=1)")
            finish()
        print("skip: no cluster (NKV_CEPH_CONF unset)")
        sys.exit(77)
    args = ["--ceph-conf", os.environ["NKV_CEPH_CONF"], "--client-id", os.environ.get("NKV_CEPH_USER", "admin"),
            "--op-timeout", "10"]
    if os.environ.get("NKV_CEPH_KEYRING"):
        args += ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
    return args
