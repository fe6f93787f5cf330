#!/usr/bin/python3
"""Run the rados_nkv.weights tests as CTest does: run_tests.py mem|rados [pytest arguments].

- The libnkv and rados-nkv of the build directory $NKV_BUILD_DIR (CTest passes its binary dir),
  else the checkout's build/asan, build/release, build/debug.
- A sanitized (asan) libnkv needs the ASan runtime first in the process: the script re-executes
  itself with LD_PRELOAD=libasan and ASAN_OPTIONS=detect_leaks=0 (Python itself leaks by design).
- rados: exits 77 (skipped) without a cluster (NKV_CEPH_CONF), 1 with NKV_REQUIRE_RADOS=1.
Exit status: pytest's (0 all passed), 77 skipped, 64 bad usage.
"""

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def build_dir():
    env = os.environ.get("NKV_BUILD_DIR")
    if env:
        return Path(env)
    for preset in ("asan", "release", "debug"):
        d = ROOT / "build" / preset
        if (d / "rados-nkv").exists():
            return d
    return None


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("mem", "rados"):
        print("usage: run_tests.py mem|rados [pytest arguments]", file=sys.stderr)
        return 64
    backend, extra = sys.argv[1], sys.argv[2:]
    if backend == "rados" and not os.environ.get("NKV_CEPH_CONF"):
        if os.environ.get("NKV_REQUIRE_RADOS") == "1":
            print("run_tests.py: NKV_REQUIRE_RADOS=1 but no cluster (NKV_CEPH_CONF unset)", file=sys.stderr)
            return 1
        print("run_tests.py: no cluster (NKV_CEPH_CONF unset): skipped", file=sys.stderr)
        return 77
    env = dict(os.environ)
    bd = build_dir()
    if bd is not None:
        for name in ("libnkv.so.0.1", "libnkv.so.0", "libnkv.so"):
            if (bd / name).exists():
                env.setdefault("NKV_LIBRARY", str(bd / name))
                break
        if (bd / "rados-nkv").exists():
            env.setdefault("NKV_DAEMON", str(bd / "rados-nkv"))
    lib = env.get("NKV_LIBRARY")
    if lib and b"libasan.so" in Path(lib).read_bytes() and "libasan" not in env.get("LD_PRELOAD", ""):
        asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
        env["LD_PRELOAD"] = asan
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env["NKV_WEIGHTS_BACKEND"] = backend
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE), *extra]
    return subprocess.call(cmd, env=env, cwd=str(HERE))


if __name__ == "__main__":
    sys.exit(main())
