#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python retrieve_many() against the C client for the same shape: N blocks of S bytes read into one
preallocated buffer, over shared memory and NVMe/TCP (docs/benchmarks.md, "Python client").

Starts its own rados-nkv daemon (free ports, a shm socket in a temporary directory): the mem
backend, or rados on the micro cluster when its variables are set (eval "$(scripts/ceph-dev.sh env)")
or with --backend rados. For each transport:
  - Python: connect(queues=Q, depth=D), store the N blocks once (store_many), then time
    retrieve_many() of all N keys into one buffer (Client.alloc() over shm: zero copy; a numpy
    array over TCP), --iters times after one warm-up; the buffer is checked against what was
    stored after the timed runs;
  - C: `nkv bench mode=raw size=S keys=N conns=Q qd=N/Q` (the same number of commands in flight:
    N/Q per queue pair on Q queue pairs), whose retrieve phase reads the same N x S bytes once
    and verifies each value as it arrives.
Prints GB/s (10^9 bytes per second) side by side and the ratio Python / C; --json FILE writes them.

    python3 bench/py_retrieve_many.py                      # 256 x 4 MiB, mem backend, release build
    python3 bench/py_retrieve_many.py --blocks 64 --block-size 1M --iters 10 --transports shm
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def build_dir(preset):
    d = ROOT / "build" / preset
    if not (d / "rados-nkv").exists() or not (d / "nkv").exists():
        sys.exit("bench: %s lacks rados-nkv or nkv: cmake --preset %s && cmake --build --preset %s" % (d, preset, preset))
    return d


class Daemon:
    def __init__(self, binary, backend, tmp):
        self.port, self.disc = free_port(), free_port()
        self.sock = os.path.join(tmp, "kv.sock")
        self.log = open(os.path.join(tmp, "daemon.log"), "wb")
        ns = "pybench-%d" % os.getpid()
        args = [str(binary), "--backend", backend, "-l", "127.0.0.1:%d" % self.port, "-d", "127.0.0.1:%d" % self.disc,
                "-S", self.sock, "--log-level", "warn", "--ns", "1:%s" % ns]
        if backend == "rados":
            args += ["--ceph-conf", os.environ["NKV_CEPH_CONF"], "--pool", os.environ.get("NKV_CEPH_POOL", "nkv"),
                     "--client-id", os.environ.get("NKV_CEPH_USER", "admin")]
            if os.environ.get("NKV_CEPH_KEYRING"):
                args += ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if self.proc.poll() is not None:
                sys.exit("bench: rados-nkv exited at startup (%d); log in %s" % (self.proc.returncode, self.log.name))
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                if os.path.exists(self.sock):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        sys.exit("bench: rados-nkv not listening after 30 s")

    def target(self, tr):
        return "127.0.0.1:%d" % self.port if tr == "tcp" else "shm:" + self.sock

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def python_point(rados_nkv, np, daemon, tr, a):
    n, bs = a.blocks, a.block_size
    c = rados_nkv.connect(daemon.target(tr), subnqn="nqn.2026-11.io.rados-nkv:nkv", queues=a.queues,
                          depth=a.depth, timeout=120)
    try:
        keys = [b"pyb%08x" % i for i in range(n)]
        src = np.empty(n * bs, dtype=np.uint8)
        rng = np.random.default_rng(1)
        src[:] = rng.integers(0, 256, n * bs, dtype=np.uint8)
        for i in range(0, n, 32):   # stored in batches of 32 (the store path is not what is measured)
            c.store_many(keys[i:i + 32], [src[j * bs:(j + 1) * bs] for j in range(i, min(n, i + 32))])
        if tr == "shm":
            arena = np.frombuffer(c.alloc(n * bs), dtype=np.uint8)   # registered: zero copy
            kind = "Client.alloc()"
        else:
            arena = np.empty(n * bs, dtype=np.uint8)
            kind = "numpy array"
        outs = [arena[i * bs:(i + 1) * bs] for i in range(n)]
        times = []
        for it in range(a.iters + 1):
            arena[::4096] = 0
            t0 = time.perf_counter()
            sizes = c.retrieve_many(keys, outs)
            dt = time.perf_counter() - t0
            if it:
                times.append(dt)
            assert sizes == [bs] * n, sizes[:4]
        ok = bool(np.array_equal(arena, src))
        c.delete_many(keys)
    finally:
        c.close()
    if not ok:
        sys.exit("bench: %s: the buffer does not hold what was stored" % tr)
    total = n * bs
    return {"gb_s_mean": total * len(times) / sum(times) / 1e9, "gb_s_best": total / min(times) / 1e9,
            "median_s": statistics.median(times), "iters": len(times), "buffer": kind}


def c_point(nkv, daemon, tr, a):
    qd = max(1, a.blocks // a.queues)
    args = [str(nkv), "-o", "json"]
    if tr == "shm":
        args += ["-t", "shm:" + daemon.sock]
    else:
        args += ["-s", str(daemon.port), "-n", "nqn.2026-11.io.rados-nkv:nkv"]
    args += ["--timeout", "120000", "bench", "mode=raw", "size=%d" % a.block_size, "keys=%d" % a.blocks,
             "conns=%d" % a.queues, "qd=%d" % qd, "time=120", "prefix=cb"]
    runs = []
    for _ in range(a.c_runs):
        r = subprocess.run(args, capture_output=True, text=True, timeout=600)
        try:
            rep = json.loads(r.stdout)
        except ValueError:
            sys.exit("bench: nkv bench printed no JSON (exit %d): %s" % (r.returncode, r.stderr[-2000:]))
        if r.returncode != 0 or rep.get("error"):
            sys.exit("bench: nkv bench failed: %s" % (rep.get("error") or r.stderr[-2000:]))
        ret = next(x for x in rep["results"] if x["op"] == "retrieve")
        runs.append(ret["mb_s"] / 1e3)
    return {"gb_s_mean": statistics.mean(runs), "gb_s_best": max(runs), "runs": runs, "qd": qd,
            "conns": a.queues}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=256, help="blocks per retrieve_many (default 256)")
    ap.add_argument("--block-size", type=size_arg, default=4 << 20, help="bytes per block, K/M/G (default 4M)")
    ap.add_argument("--queues", type=int, default=4, help="engine queue pairs = nkv bench conns (default 4)")
    ap.add_argument("--depth", type=int, default=0, help="entries per queue (default blocks/queues, at least 32)")
    ap.add_argument("--iters", type=int, default=5, help="timed retrieve_many runs after one warm-up (default 5)")
    ap.add_argument("--c-runs", type=int, default=3, help="nkv bench runs per transport, best kept (default 3)")
    ap.add_argument("--transports", default="shm,tcp", help="comma list of shm, tcp (default both)")
    ap.add_argument("--backend", choices=("mem", "rados"), default=None,
                    help="default: rados when NKV_CEPH_CONF is set, else mem")
    ap.add_argument("--preset", default="release", help="build/PRESET holds rados-nkv, nkv, libnkv (default release)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    a = ap.parse_args()
    if a.blocks <= 0 or a.block_size <= 0 or a.queues <= 0 or a.iters <= 0:
        ap.error("blocks, block size, queues and iters must be positive")
    a.depth = a.depth or max(32, -(-a.blocks // a.queues))
    backend = a.backend or ("rados" if os.environ.get("NKV_CEPH_CONF") else "mem")
    if backend == "rados" and not os.environ.get("NKV_CEPH_CONF"):
        ap.error("--backend rados needs the cluster variables (eval \"$(scripts/ceph-dev.sh env)\")")
    bdir = build_dir(a.preset)
    lib = next((bdir / n for n in ("libnkv.so.0.1", "libnkv.so") if (bdir / n).exists()), None)
    if lib is not None:
        os.environ.setdefault("NKV_LIBRARY", str(lib))
    import numpy as np
    import rados_nkv

    tmp = tempfile.mkdtemp(prefix="nkv-pybench-")
    d = Daemon(bdir / "rados-nkv", backend, tmp)
    rows = []
    try:
        for tr in [t.strip() for t in a.transports.split(",") if t.strip()]:
            if tr not in ("shm", "tcp"):
                ap.error("unknown transport %r" % tr)
            py = python_point(rados_nkv, np, d, tr, a)
            cc = c_point(bdir / "nkv", d, tr, a)
            rows.append({"transport": tr, "python": py, "c": cc, "ratio": py["gb_s_mean"] / cc["gb_s_mean"]})
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    shape = "%d x %s blocks, %d queues x depth %d, %s backend, libnkv %s (%s)" % (
        a.blocks, "%d MiB" % (a.block_size >> 20) if a.block_size % (1 << 20) == 0 else "%d B" % a.block_size,
        a.queues, a.depth, backend, rados_nkv.lib_version(), a.preset)
    print("py_retrieve_many: " + shape)
    print("%-9s %-15s %12s %12s %12s %12s %7s" % ("transport", "python buffer", "python GB/s", "(best)",
                                                  "C GB/s", "(best)", "py / C"))
    for r in rows:
        p, c = r["python"], r["c"]
        print("%-9s %-15s %12.2f %12.2f %12.2f %12.2f %6.0f%%" % (r["transport"], p["buffer"], p["gb_s_mean"],
                                                              p["gb_s_best"], c["gb_s_mean"], c["gb_s_best"],
                                                              100 * r["ratio"]))
    print("python: mean of %d retrieve_many() runs after a warm-up; C: mean of %d `nkv bench` retrieve phases "
          "(which verify each value as it arrives)" % (a.iters, a.c_runs))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": shape, "blocks": a.blocks, "block_size": a.block_size, "queues": a.queues,
                       "depth": a.depth, "backend": backend, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
