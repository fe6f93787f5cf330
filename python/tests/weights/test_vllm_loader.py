# SPDX-License-Identifier: Apache-2.0
"""The vLLM loader and plugin, against the stand-ins of vLLM's loader interface (standins/)."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rados_nkv.weights import upload, remove
from rados_nkv.weights.loader import LoaderOptions, loader_class, LOAD_FORMAT

from weights_helpers import write_model, Holder, file_bytes_of, raw_bytes, cli_env

STANDINS = str(Path(__file__).resolve().parent / "standins")


@pytest.fixture
def vllm_standins(monkeypatch):
    """Put the vLLM stand-ins on sys.path for one test and forget them (and the plugin's state)
    afterwards."""
    from rados_nkv.weights import vllm_plugin
    monkeypatch.syspath_prepend(STANDINS)
    for m in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setattr(vllm_plugin, "_done", [])
    yield
    for m in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[m]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    return str(d), write_model(str(d))


def test_plugin_without_vllm(caplog, monkeypatch):
    from rados_nkv.weights import vllm_plugin
    monkeypatch.setattr(vllm_plugin, "_done", [])
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm fails, as where it is not installed
    with caplog.at_level(logging.INFO, logger="rados_nkv.weights"):
        assert vllm_plugin.register() is False
        assert vllm_plugin.register() is False
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs and all("vLLM is not importable" in m and "rados_nkv load format is not registered" in m for m in msgs)


def test_plugin_imports_without_vllm():
    """A fresh interpreter with no vllm anywhere: the plugin module imports and register() is a no-op."""
    code = ("import sys; sys.modules['vllm'] = None\n"
            "import logging; logging.basicConfig(level=logging.INFO)\n"
            "from rados_nkv.weights import vllm_plugin\n"
            "assert vllm_plugin.register() is False\n"
            "assert 'torch' not in sys.modules, 'the plugin imported torch'\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert "rados_nkv load format is not registered" in r.stderr


def test_plugin_registers_once(vllm_standins, caplog):
    from rados_nkv.weights import vllm_plugin
    from vllm.model_executor import model_loader as ml
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader
    with caplog.at_level(logging.INFO):
        assert vllm_plugin.register() is True
        assert vllm_plugin.register() is True
        vllm_plugin._done.clear()  # as a second copy of the plugin would
        assert vllm_plugin.register() is True
    cls = ml._LOAD_FORMAT_TO_MODEL_LOADER[LOAD_FORMAT]
    assert issubclass(cls, BaseModelLoader) and cls is loader_class(BaseModelLoader)
    assert ml.overwrites == []  # never re-registered over itself
    assert sum("registered the rados_nkv load format" in r.getMessage() for r in caplog.records) == 1


def _load_config(**extra):
    from vllm.config import LoadConfig
    return LoadConfig(load_format="RADOS_NKV", model_loader_extra_config=extra)


def test_loader_through_vllm_registry(vllm_standins, daemon, transport, client, subnqn, model_dir, model_name):
    """--load-format rados_nkv + --model-loader-extra-config, as vLLM resolves them, then
    load_model -> load_weights -> model.load_weights(iterator): every tensor bit-exact."""
    from rados_nkv.weights import vllm_plugin
    from vllm.config import ModelConfig
    from vllm.model_executor.model_loader import get_model_loader
    d, tensors = model_dir
    upload(client, d, model_name, "abc123", chunk_size=4096, progress=False)
    assert vllm_plugin.register()
    lc = _load_config(target=daemon.target(transport), subnqn=subnqn, window="8k", read_size=1500,
                      workers=2, queues=2)
    loader = get_model_loader(lc)
    assert type(loader).__name__ == "RadosNkvModelLoader"
    mc = ModelConfig(model_name, revision="abc123")
    loader.download_model(mc)  # checks the upload exists
    model = loader.load_model(Holder(tensors), mc)
    fb = file_bytes_of(d)
    for name, src in tensors.items():
        t = model.tensor(name)
        assert torch.equal(t, src) and raw_bytes(t) == fb[name], name
    # model/rev from the extra config instead of vLLM's --model/--revision
    lc2 = _load_config(target=daemon.target(transport), subnqn=subnqn, model=model_name, rev="abc123")
    m2 = Holder(tensors)
    get_model_loader(lc2).load_weights(m2, ModelConfig("/some/local/path"))
    assert all(torch.equal(m2.tensor(n), tensors[n]) for n in tensors)
    # missing revision: a clear error from download_model and load_weights
    with pytest.raises(RuntimeError, match="not uploaded.*nkv-weights upload"):
        loader.download_model(ModelConfig(model_name, revision="other"))
    with pytest.raises(RuntimeError, match="not uploaded"):
        loader.load_weights(Holder(tensors), ModelConfig(model_name, revision="other"))
    remove(client, model_name, "abc123")


def test_loader_strict(vllm_standins, daemon, client, subnqn, model_dir, model_name):
    """A model parameter the upload does not have fails the load (strict, the default)."""
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader
    from vllm.config import ModelConfig
    d, tensors = model_dir
    upload(client, d, model_name, "main", chunk_size=4096, progress=False)
    extra = dict(tensors)
    extra["extra.weight"] = torch.zeros(3)
    cls = loader_class(BaseModelLoader)
    lc = _load_config(target=daemon.target("tcp"), subnqn=subnqn)
    with pytest.raises(ValueError, match="did not initialize these parameters: extra.weight"):
        cls(lc).load_weights(Holder(extra), ModelConfig(model_name, revision="main"))
    lc = _load_config(target=daemon.target("tcp"), subnqn=subnqn, strict=False)
    cls(lc).load_weights(Holder(extra), ModelConfig(model_name, revision="main"))
    remove(client, model_name, "main")


@pytest.mark.parametrize("extra, msg", [
    ({"target": "x", "bogus": 1}, "unknown option\\(s\\) bogus"),
    ({"target": "x", "window": "lots"}, "window: bad size"),
    ({"target": "x", "window": 0}, "window must be positive"),
    ({"target": "x", "workers": 0}, "workers must be an integer >= 1"),
    ({"target": "x", "nsid": "1"}, "nsid must be an integer"),
    ({"target": ""}, "target must be a non-empty string"),
    ({"target": "x", "register": "yes"}, 'register must be "reuse"'),
    ({"target": "x", "timeout": -1}, "timeout must be a positive"),
    ({}, "no target"),
])
def test_loader_options_rejected(extra, msg, monkeypatch):
    monkeypatch.delenv("NKV_WEIGHTS_TARGET", raising=False)
    with pytest.raises(ValueError, match=msg):
        LoaderOptions.from_extra_config(extra)


def test_loader_options_defaults(monkeypatch):
    monkeypatch.setenv("NKV_WEIGHTS_TARGET", "shm:/run/x.sock")
    o = LoaderOptions.from_extra_config(json.loads('{"window": "512M", "read_size": 4194304}'))
    assert o.target == "shm:/run/x.sock" and o.window == 512 << 20 and o.read_size == 4 << 20
    assert o.nsid == 1 and o.queues == 4 and o.register is None and o.strict is True
    with pytest.raises(ValueError, match="JSON object"):
        LoaderOptions.from_extra_config([1])


def test_installed_entry_points(tmp_path, daemon, subnqn):
    """pip-installed (from a copy of python/): vLLM finds the plugin through the
    vllm.general_plugins entry point (as vllm.plugins.load_general_plugins does, with
    importlib.metadata) and registers the loader, and the nkv-weights console script runs."""
    import importlib.util
    import shutil
    if not importlib.util.find_spec("pip") or not importlib.util.find_spec("setuptools"):
        pytest.skip("pip or setuptools missing")
    root = Path(__file__).resolve().parents[3]
    src, inst = tmp_path / "src", tmp_path / "inst"
    shutil.copytree(root / "python", src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                        "--target", str(inst), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    import rados_nkv
    env = cli_env()
    env["NKV_LIBRARY"] = rados_nkv.library_path  # the installed copy finds no build tree
    env["PYTHONPATH"] = os.pathsep.join([str(inst), STANDINS])
    code = ("import importlib.metadata as md, rados_nkv\n"
            "assert rados_nkv.__file__.startswith(%r), rados_nkv.__file__\n"
            "eps = [e for e in md.entry_points(group='vllm.general_plugins') if e.name == 'rados_nkv']\n"
            "assert len(eps) == 1, eps\n"
            "fn = eps[0].load()\n"
            "assert fn() is True and fn() is True\n"
            "from vllm.model_executor.model_loader import get_model_loader, _LOAD_FORMAT_TO_MODEL_LOADER\n"
            "from vllm.config import LoadConfig\n"
            "l = get_model_loader(LoadConfig(load_format='rados_nkv', model_loader_extra_config={'target': 'x'}))\n"
            "print(type(l).__name__)\n" % str(inst))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "RadosNkvModelLoader", r.stdout + r.stderr
    script = inst / "bin" / "nkv-weights"
    assert script.exists()
    env["PYTHONPATH"] = str(inst)
    r = subprocess.run([sys.executable, str(script), "-t", daemon.target("shm"), "--subnqn", subnqn, "ls"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, str(script), "bogus"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 64
