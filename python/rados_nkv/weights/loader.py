# SPDX-License-Identifier: Apache-2.0
"""The vLLM model loader `rados_nkv`: weights streamed from rados-nkv into the model.

    vllm serve MODEL --load-format rados_nkv \\
        --model-loader-extra-config '{"target": "shm:/run/rados-nkv/kv.sock", "rev": "main"}'

The loader follows vLLM's loader contract (vllm/model_executor/model_loader/base_loader.py): a
subclass of BaseModelLoader built from the load config, with download_model(model_config) and
load_weights(model, model_config), the latter calling model.load_weights() with an iterator of
(name, torch.Tensor). The class is made by loader_class(BaseModelLoader) so that this module
imports without vLLM; vllm_plugin.register() builds it over vLLM's own base class.

Options (the extra config, a JSON object; unknown keys are refused):

    target     "HOST[:PORT]" (NVMe/TCP) or "shm:/path" (shared memory); default $NKV_WEIGHTS_TARGET
    subnqn     subsystem NQN (TCP; default: the first one the discovery controller lists)
    nsid       namespace (default 1)          queues    queue pairs (default 4)
    timeout    seconds per command (default 30)
    model      the uploaded model name (default: vLLM's model, i.e. --model)
    rev        the uploaded revision (default: vLLM's --revision, else "main")
    window     bytes of tensors allocated and read at once (default 64M; "128M" style strings too)
    read_size  largest single read (default 8M)   batch  bytes per batch of reads (default 64M)
    workers    threads running batches (default 4)   prefetch  windows read ahead (default 1)
    register   shm: "always" (default: window memory registered, reads zero copy), "reuse" (registered
               when first recycled), "never" (bounce buffers); true/false = always/never
    strict     fail when the model has parameters the upload did not set (default true)
"""

import logging
import os

from .manifest import manifest_name
from .reader import (iter_tensors, DEFAULT_WINDOW, DEFAULT_READ, DEFAULT_BATCH, DEFAULT_WORKERS,
                     DEFAULT_PREFETCH)
from .sizes import parse_size

__all__ = ["LOAD_FORMAT", "LoaderOptions", "loader_class", "weights_iterator"]

LOAD_FORMAT = "rados_nkv"
log = logging.getLogger("rados_nkv.weights")


class LoaderOptions:
    """The loader's options, checked (ValueError naming the key)."""

    _SIZES = {"window": DEFAULT_WINDOW, "read_size": DEFAULT_READ, "batch": DEFAULT_BATCH}
    _INTS = {"nsid": 1, "queues": 4, "workers": DEFAULT_WORKERS, "prefetch": DEFAULT_PREFETCH}
    _STRS = ("target", "subnqn", "model", "rev")
    _BOOLS = {"strict": True}

    def __init__(self, **kw):
        unknown = (set(kw) - set(self._SIZES) - set(self._INTS) - set(self._STRS) - set(self._BOOLS)
                   - {"timeout", "register"})
        if unknown:
            raise ValueError("rados_nkv loader: unknown option(s) %s in the model loader extra config (known: %s)"
                             % (", ".join(sorted(unknown)), ", ".join(sorted(set(self._SIZES) | set(self._INTS) |
                                                                           set(self._STRS) | set(self._BOOLS) |
                                                                           {"timeout", "register"}))))
        for k, d in self._SIZES.items():
            v = kw.get(k, d)
            try:
                v = parse_size(v)
            except ValueError as e:
                raise ValueError("rados_nkv loader: %s: %s" % (k, e)) from None
            if v <= 0:
                raise ValueError("rados_nkv loader: %s must be positive" % k)
            setattr(self, k, v)
        for k, d in self._INTS.items():
            v = kw.get(k, d)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == "prefetch" else 1):
                raise ValueError("rados_nkv loader: %s must be an integer >= %d, got %r"
                                 % (k, 0 if k == "prefetch" else 1, v))
            setattr(self, k, v)
        for k in self._STRS:
            v = kw.get(k)
            if v is not None and (not isinstance(v, str) or not v):
                raise ValueError("rados_nkv loader: %s must be a non-empty string, got %r" % (k, v))
            setattr(self, k, v)
        for k, d in self._BOOLS.items():
            v = kw.get(k, d)
            if v is not None and not isinstance(v, bool):
                raise ValueError("rados_nkv loader: %s must be true or false, got %r" % (k, v))
            setattr(self, k, v)
        reg = kw.get("register")
        if reg is not None and reg not in (True, False, "reuse", "always", "never"):
            raise ValueError("rados_nkv loader: register must be \"reuse\", \"always\", \"never\", true or "
                             "false, got %r" % (reg,))
        self.register = reg
        t = kw.get("timeout", 30.0)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
            raise ValueError("rados_nkv loader: timeout must be a positive number of seconds, got %r" % (t,))
        self.timeout = float(t)
        if self.target is None:
            self.target = os.environ.get("NKV_WEIGHTS_TARGET") or None
        if self.target is None:
            raise ValueError("rados_nkv loader: no target: set \"target\" in --model-loader-extra-config "
                             "(\"HOST[:PORT]\" or \"shm:/path\") or NKV_WEIGHTS_TARGET")

    @classmethod
    def from_extra_config(cls, extra):
        if extra is None:
            extra = {}
        if not isinstance(extra, dict):
            raise ValueError("rados_nkv loader: the model loader extra config must be a JSON object, got %s"
                             % type(extra).__name__)
        return cls(**extra)

    def connect(self):
        import rados_nkv
        return rados_nkv.connect(self.target, subnqn=self.subnqn, nsid=self.nsid, queues=self.queues,
                                 timeout=self.timeout)

    def names(self, model_config):
        """(model, rev) to load for vLLM's @model_config."""
        model = self.model or getattr(model_config, "model_weights", None) or model_config.model
        rev = self.rev or getattr(model_config, "revision", None) or "main"
        return model, rev


def _manifest(client, model, rev):
    from .store import get_manifest
    m = get_manifest(client, model, rev)
    if m is None:
        raise RuntimeError("rados_nkv loader: %s %s is not uploaded to %s (no %s); upload it with "
                           "`nkv-weights upload DIR --model %s --rev %s`"
                           % (model, rev, client.target, manifest_name(model, rev), model, rev))
    return m


def weights_iterator(opts, model, rev, use_tqdm=True):
    """Yield (name, tensor) of @model @rev; the connection lives as long as the iteration."""
    client = opts.connect()
    bar = None
    try:
        m = _manifest(client, model, rev)
        if use_tqdm and os.isatty(2):
            try:
                from tqdm import tqdm
                bar = tqdm(total=sum(t.nbytes for f in m.files for t in f.tensors), unit="B", unit_scale=True,
                           unit_divisor=1024, desc="Loading %s %s (rados_nkv)" % (model, rev))
            except ImportError:
                bar = None
        yield from iter_tensors(client, m, window=opts.window, read_size=opts.read_size, batch=opts.batch,
                                workers=opts.workers, prefetch=opts.prefetch, register=opts.register,
                                progress=bar)
    finally:
        if bar is not None:
            bar.close()
        client.close()


def loader_class(base):
    """The loader class over @base (vLLM's BaseModelLoader, or a stand-in with its contract)."""
    cached = _classes.get(base)
    if cached is not None:
        return cached

    class RadosNkvModelLoader(base):
        """Loads safetensors weights uploaded with `nkv-weights upload` from a rados-nkv target."""

        def __init__(self, load_config):
            super().__init__(load_config)
            self.options = LoaderOptions.from_extra_config(getattr(load_config, "model_loader_extra_config", None))

        def download_model(self, model_config):
            """Nothing to download: check that the upload exists (and say how large it is)."""
            model, rev = self.options.names(model_config)
            with self.options.connect() as c:
                m = _manifest(c, model, rev)
            log.info("rados_nkv: %s %s on %s: %d files, %d tensors, %d bytes", model, rev, self.options.target,
                     len(m.files), m.tensor_count, m.total_bytes)

        def get_weights_iterator(self, model_config):
            model, rev = self.options.names(model_config)
            return weights_iterator(self.options, model, rev, getattr(self.load_config, "use_tqdm_on_load", True))

        def load_weights(self, model, model_config):
            """Stream every tensor into model.load_weights()."""
            loaded = model.load_weights(self.get_weights_iterator(model_config))
            if self.options.strict and isinstance(loaded, set) and getattr(model_config, "quantization", None) is None:
                missing = {n for n, _ in model.named_parameters()} - loaded
                if missing:
                    raise ValueError("rados_nkv loader: the upload did not initialize these parameters: %s"
                                     % ", ".join(sorted(missing)[:10]))

    RadosNkvModelLoader.__qualname__ = RadosNkvModelLoader.__name__
    _classes[base] = RadosNkvModelLoader
    return RadosNkvModelLoader


_classes = {}
