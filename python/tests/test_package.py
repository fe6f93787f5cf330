# SPDX-License-Identifier: Apache-2.0
"""The package as shipped: version, imports, and a wheel built the way `pip install ./python` does."""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import rados_nkv
from conftest import ROOT


def test_version_is_the_projects():
    m = re.search(r"project\(rados-nkv VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    assert m and rados_nkv.__version__ == m.group(1)
    assert rados_nkv.lib_version() == m.group(1)


def test_import_pulls_no_integration():
    """Importing rados_nkv must work whether or not the lmcache/weights subpackages exist or import."""
    code = ("import sys, rados_nkv; "
            "bad = [m for m in sys.modules if m.startswith(('rados_nkv.lmcache', 'rados_nkv.weights', 'torch', 'numpy'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT / "python")),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_library_lookup_env(tmp_path):
    """$NKV_LIBRARY wins; a wrong one fails the import with the paths tried."""
    code = "import rados_nkv"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), NKV_LIBRARY=str(tmp_path / "libnope.so"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "libnope.so" in r.stderr and "NKV_LIBRARY" in r.stderr
    env["NKV_LIBRARY"] = rados_nkv.library_path
    r = subprocess.run([sys.executable, "-c", "import rados_nkv; print(rados_nkv.library_path)"], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == rados_nkv.library_path


def test_library_missing_names_the_fix(tmp_path):
    """No libnkv anywhere it looks: the error says how to point the package at one."""
    shutil.copytree(ROOT / "python" / "rados_nkv", tmp_path / "rados_nkv",
                    ignore=shutil.ignore_patterns("__pycache__"))  # away from the build tree
    env = {k: v for k, v in os.environ.items() if k not in ("NKV_LIBRARY", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["PYTHONPATH"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", "import rados_nkv"], env=env, capture_output=True, text=True,
                       cwd=str(tmp_path))
    if r.returncode == 0:
        pytest.skip("a libnkv is installed where the loader finds it")
    assert "set NKV_LIBRARY=/path/to/libnkv.so.0.1" in r.stderr, r.stderr


def test_wheel(tmp_path):
    """pip builds a wheel from a copy of python/ (no build isolation: Debian's setuptools) with the
    console script and the vLLM plugin entry point."""
    import importlib.util
    if not importlib.util.find_spec("pip") or not importlib.util.find_spec("setuptools"):
        pytest.skip("pip or setuptools missing")
    src = tmp_path / "src"
    shutil.copytree(ROOT / "python", src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                        "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list((tmp_path / "dist").glob("rados_nkv-%s-*.whl" % rados_nkv.__version__))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
        ep = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for mod in ("__init__", "_ffi", "client", "aio", "buffers", "errors", "longname"):
        assert "rados_nkv/%s.py" % mod in names
    assert not any(n.startswith("tests/") for n in names)
    assert "[console_scripts]" in ep and "nkv-weights = rados_nkv.weights.cli:main" in ep
    assert "[vllm.general_plugins]" in ep and "rados_nkv = rados_nkv.weights.vllm_plugin:register" in ep
