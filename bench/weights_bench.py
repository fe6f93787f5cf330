#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Model weights through rados-nkv against local disk: upload and load GB/s, one run, one table.

    bench/weights_bench.py [--size 1G] [--files 2] [--backends mem[,rados]] [--transports tcp,shm]

1. Writes a synthetic safetensors model of --size bytes in --files files (bf16/f16/f32 tensors of
   256 KiB to 64 MiB, a few odd-sized) into a temporary directory.
2. Local baseline: every tensor read from the files into torch.empty() storage with preadv, as a
   loader without mmap does; once cold (the files' pages dropped with posix_fadvise(DONTNEED) after
   fsync: only these files, the rest of the page cache is left alone; mincore says how much was
   resident), once from the page cache, and once from the page cache into one reused, already
   faulted-in buffer (the copy alone, no page faults: what the loader's recycled windows get).
3. For each backend (mem; rados too when a cluster is configured: NKV_CEPH_CONF, as
   `scripts/ceph-dev.sh env` prints) it starts a rados-nkv daemon serving NVMe/TCP and shared memory,
   and for each transport: `upload` (chunks + manifest, timed), `load` (rados_nkv.weights.iter_tensors,
   what the vLLM loader runs: every tensor read into its memory, timed), then an untimed check that
   every loaded tensor equals the file's bytes, then `rm`.

GB/s are 10^9 bytes per second of file bytes (upload) or tensor bytes (load). The build: --build
(default build/release, else build/asan: the script re-executes itself with the ASan runtime
preloaded; an asan build is much slower and the table says so).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="1G", help="model size (default 1G; K/M/G)")
    p.add_argument("--files", type=int, default=2, help="safetensors files (default 2)")
    p.add_argument("--backends", default=None,
                   help="mem,rados (default: mem, plus rados when NKV_CEPH_CONF is set)")
    p.add_argument("--transports", default="tcp,shm", help="tcp,shm (default both)")
    p.add_argument("--chunk-size", default=None, help="upload chunk size (default: nkv-weights' default)")
    p.add_argument("--queues", type=int, default=4, help="queue pairs per client (default 4)")
    p.add_argument("--window", default=None, help="loader window (default: the loader's)")
    p.add_argument("--read-size", default="8M", help="loader's largest read (default 8M)")
    p.add_argument("--workers", type=int, default=4, help="loader threads (default 4)")
    p.add_argument("--register", default=None, choices=("always", "reuse", "never"),
                   help="window registration over shm (default: the loader's: always)")
    p.add_argument("--build", default=None, help="build directory (default build/release, else build/asan)")
    p.add_argument("--workdir", default=None, help="where the model files go (default a temporary directory)")
    p.add_argument("--no-check", action="store_true", help="skip the bit-exact check after each load")
    p.add_argument("--json", default=None, help="also write the results to this file")
    return p.parse_args()


def build_dir(arg):
    if arg:
        return Path(arg)
    for preset in ("release", "asan"):
        d = ROOT / "build" / preset
        if (d / "rados-nkv").exists() and (d / "libnkv.so.0.1").exists():
            return d
    sys.exit("weights_bench: build rados-nkv and libnkv first (cmake --preset release && cmake --build "
             "--preset release --target rados-nkv nkv_shared)")


def ensure_runtime(bd):
    """Point rados_nkv at this build's libnkv; an asan libnkv needs the ASan runtime preloaded."""
    lib = bd / "libnkv.so.0.1"
    os.environ["NKV_LIBRARY"] = str(lib)
    asan = b"libasan.so" in lib.read_bytes()
    if asan and "libasan" not in os.environ.get("LD_PRELOAD", ""):
        rt = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
        os.environ["LD_PRELOAD"] = rt
        os.environ["ASAN_OPTIONS"] = "detect_leaks=0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    return asan


# ---- the synthetic model -------------------------------------------------------------------------

def write_model(d, total, files):
    """Files of bf16/f16/f32 tensors (64 MiB down to 256 KiB, some odd sizes) totalling ~@total bytes."""
    import numpy as np
    import torch
    from rados_nkv.weights.safetensors import save_file
    pool = np.random.default_rng(7).integers(0, 256, size=(32 << 20) + 4096, dtype=np.uint8)
    shapes = [((4096, 8192), torch.bfloat16), ((4096, 2048), torch.bfloat16), ((2048, 1024), torch.float32),
              ((1024, 2048), torch.float16), ((8191, 65), torch.bfloat16), ((128, 1024), torch.float32),
              ((333, 333), torch.float16)]
    per = total // files
    names, k = [], 0
    for fi in range(files):
        tensors, n = {}, 0
        while n < per:
            shape, dt = shapes[k % len(shapes)]
            nbytes = shape[0] * shape[1] * torch.empty(0, dtype=dt).element_size()
            if n + nbytes > per:  # the file's last tensor: whatever is left, as f32
                nbytes = max(4, (per - n) // 4 * 4)
                shape, dt = (nbytes // 4,), torch.float32
            # bytes from a random pool at a rotating offset: distinct tensors, cheap to make
            off = (k * 7919 * 4096) % (len(pool) - nbytes) if nbytes < len(pool) else 0
            if nbytes <= len(pool):
                buf = pool[off:off + nbytes].copy()
            else:
                buf = np.resize(pool, nbytes)
            tensors["layers.%d.w%d" % (k // 4, k % 4)] = torch.from_numpy(buf).view(dt).view(shape)
            n += nbytes
            k += 1
        name = "model-%05d-of-%05d.safetensors" % (fi + 1, files)
        save_file(tensors, os.path.join(d, name), {"format": "pt"})
        names.append(name)
    return names


# ---- local baseline ------------------------------------------------------------------------------

def local_load(d, names, check=None, reuse=False):
    """Read every tensor into torch.empty() storage with preadv (@reuse: into one buffer, reused);
    returns (tensor bytes, seconds)."""
    import torch
    from rados_nkv.weights.safetensors import read_header, torch_dtype
    total, t0 = 0, time.monotonic()
    buf = None
    for n in names:
        p = os.path.join(d, n)
        h = read_header(p)
        fd = os.open(p, os.O_RDONLY)
        try:
            for t in h.tensors:
                if reuse:
                    if buf is None or buf.numel() < t.nbytes:
                        buf = torch.empty(max(t.nbytes, 64 << 20), dtype=torch.uint8)
                        buf.fill_(0)  # faulted in once, as the loader's recycled windows are
                    ten = buf[:t.nbytes].view(torch_dtype(t.dtype)).view(t.shape)
                else:
                    ten = torch.empty(t.shape, dtype=torch_dtype(t.dtype))
                if t.nbytes:
                    mv = memoryview(ten.view(-1).view(torch.uint8).numpy())
                    got = 0
                    while got < t.nbytes:
                        got += os.preadv(fd, [mv[got:]], h.data_start + t.begin + got)
                total += t.nbytes
                if check is not None:
                    check[t.name] = ten
        finally:
            os.close(fd)
    return total, time.monotonic() - t0


def drop_file_cache(d, names):
    """Evict only these files' pages (fsync first: dirty pages cannot be dropped)."""
    for n in names:
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_fraction(d, names):
    """Fraction of the files' pages in the page cache (mmap + mincore through libc), or None."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = os.sysconf("SC_PAGE_SIZE")
    tot = res = 0
    for n in names:
        size = os.path.getsize(os.path.join(d, n))
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            pages = (size + page - 1) // page
            vec = (ctypes.c_ubyte * pages)()
            rc = libc.mincore(addr, size, vec)
            libc.munmap(addr, size)
            if rc:
                return None
            tot += pages
            res += sum(v & 1 for v in vec)
        finally:
            os.close(fd)
    return res / tot if tot else None


# ---- the daemon ----------------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, bd, backend, tmp):
        self.port, self.disc = free_port(), free_port()
        self.sock = os.path.join(tmp, "kv-%s.sock" % backend)
        self.logf = open(os.path.join(tmp, "daemon-%s.log" % backend), "wb")
        args = [str(bd / "rados-nkv"), "--backend", backend, "-l", "127.0.0.1:%d" % self.port,
                "-d", "127.0.0.1:%d" % self.disc, "-S", self.sock, "--log-level", "warn"]
        if backend == "rados":
            args += ["--ceph-conf", os.environ["NKV_CEPH_CONF"], "--pool", os.environ.get("NKV_CEPH_POOL", "nkv"),
                     "--client-id", os.environ.get("NKV_CEPH_USER", "admin"),
                     "--ns", "1:weights-bench-%d" % os.getpid()]
            if os.environ.get("NKV_CEPH_KEYRING"):
                args += ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit("weights_bench: rados-nkv (%s) did not start; see %s" % (backend, self.logf.name))
            time.sleep(0.05)
        time.sleep(0.2)

    def target(self, transport):
        return "127.0.0.1:%d" % self.port if transport == "tcp" else "shm:" + self.sock

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


# ---- one transport -------------------------------------------------------------------------------

def run_remote(daemon, transport, d, names, a, rev):
    import torch
    import rados_nkv
    from rados_nkv.weights import upload, iter_tensors, remove
    from rados_nkv.weights.sizes import parse_size
    kw = dict(queues=a.queues)
    if transport == "tcp":
        kw["discovery_port"] = daemon.disc
    out = {}
    with rados_nkv.connect(daemon.target(transport), **kw) as c:
        cs = parse_size(a.chunk_size) if a.chunk_size else None
        t0 = time.monotonic()
        m = upload(c, d, "bench/synthetic", rev, chunk_size=cs, force=True, progress=False)
        out["upload_s"] = time.monotonic() - t0
        out["upload_bytes"] = m.total_bytes
        out["chunk_size"] = m.chunk_size
        from rados_nkv.weights.reader import DEFAULT_WINDOW
        win, rs = parse_size(a.window) if a.window else DEFAULT_WINDOW, parse_size(a.read_size)
        total, t0, stats = 0, time.monotonic(), {}
        for _n, t in iter_tensors(c, m, window=win, read_size=rs, workers=a.workers, register=a.register,
                                  stats=stats):
            total += t.numel() * t.element_size()
            del t  # as vLLM does: copy into the model, drop
        out["load_s"] = time.monotonic() - t0
        out["load_bytes"] = total
        out["windows"] = stats
        if not a.no_check:
            ref = {}
            local_load(d, names, ref)
            bad = [n for n, t in iter_tensors(c, m, window=win, read_size=rs, workers=a.workers, register=a.register)
                   if not torch.equal(t.view(-1).view(torch.uint8), ref[n].view(-1).view(torch.uint8))]
            out["check"] = "bit-exact" if not bad else "MISMATCH in %d tensors" % len(bad)
            if bad:
                print("weights_bench: %s: %d tensors differ: %s" % (transport, len(bad), bad[:5]), file=sys.stderr)
        remove(c, "bench/synthetic", rev)
    return out


def main():
    a = parse_args()
    bd = build_dir(a.build)
    asan = ensure_runtime(bd)
    from rados_nkv.weights.sizes import parse_size, fmt_size
    size = parse_size(a.size)
    backends = a.backends.split(",") if a.backends else ["mem"] + (["rados"] if os.environ.get("NKV_CEPH_CONF") else [])
    transports = a.transports.split(",")
    tmp = tempfile.mkdtemp(prefix="nkv-weights-bench-")
    d = a.workdir or os.path.join(tmp, "model")
    os.makedirs(d, exist_ok=True)
    t0 = time.monotonic()
    names = write_model(d, size, a.files)
    file_bytes = sum(os.path.getsize(os.path.join(d, n)) for n in names)
    from rados_nkv.weights.safetensors import read_header
    ntensors = sum(len(read_header(os.path.join(d, n)).tensors) for n in names)
    print("model: %s in %d files, %d tensors (written in %.1f s to %s)" % (fmt_size(file_bytes), len(names), ntensors,
                                                                         time.monotonic() - t0, d))
    rows, results = [], {"size": file_bytes, "files": len(names), "tensors": ntensors, "build": str(bd),
                         "asan": asan, "nproc": os.cpu_count(), "loadavg_start": os.getloadavg()[0]}
    drop_file_cache(d, names)
    rf = resident_fraction(d, names)
    nb, s = local_load(d, names)
    rows.append(("local disk, cold (fadvise DONTNEED; %s resident before)" % ("%.0f%%" % (rf * 100) if rf is not None
                                                                              else "?"), None, nb / s))
    nb, s = local_load(d, names)
    rf2 = resident_fraction(d, names)
    rows.append(("local disk, page cache (%s resident)" % ("%.0f%%" % (rf2 * 100) if rf2 is not None else "?"),
                 None, nb / s))
    nb, s = local_load(d, names, reuse=True)
    rows.append(("local disk, page cache, into one reused buffer (copy only)", None, nb / s))
    results["local"] = {"cold_GBps": rows[0][2] / 1e9, "cached_GBps": rows[1][2] / 1e9,
                        "cached_reused_GBps": rows[2][2] / 1e9, "resident_before_cold": rf, "resident_cached": rf2}
    for b in backends:
        dm = Daemon(bd, b, tmp)
        try:
            for tr in transports:
                r = run_remote(dm, tr, d, names, a, "%s-%s" % (b, tr))
                results["%s/%s" % (b, tr)] = r
                rows.append(("%s backend, %s%s" % (b, "NVMe/TCP" if tr == "tcp" else "shm",
                                                    "" if a.no_check else ", " + r["check"]),
                             r["upload_bytes"] / r["upload_s"], r["load_bytes"] / r["load_s"]))
        finally:
            dm.stop()
    results["loadavg_end"] = os.getloadavg()[0]
    print()
    print("%-66s %12s %12s" % ("path", "upload GB/s", "load GB/s"))
    for name, up, ld in rows:
        print("%-66s %12s %12.2f" % (name, "-" if up is None else "%.2f" % (up / 1e9), ld / 1e9))
    cs = next((r["chunk_size"] for k, r in results.items() if isinstance(r, dict) and "chunk_size" in r), None)
    from rados_nkv.weights.reader import DEFAULT_WINDOW
    print("\n%s, chunks of %s, %d queue pairs, loader window %s, reads up to %s, %d threads, registration %s; "
          "%s build%s; %d CPUs, load average %.1f -> %.1f"
          % (fmt_size(file_bytes), fmt_size(cs) if cs else "-", a.queues, a.window or fmt_size(DEFAULT_WINDOW),
             a.read_size, a.workers, a.register or "always (shm)",
             bd.name, " (AddressSanitizer: slow)" if asan else "", os.cpu_count(), results["loadavg_start"],
             results["loadavg_end"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)  # daemon logs (and the model unless --workdir)
    return 0 if all("MISMATCH" not in r[0] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
