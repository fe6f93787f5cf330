# SPDX-License-Identifier: Apache-2.0
"""Settings of the LMCache integration: where the rados-nkv target is and how to reach it.

The remote connector reads them from LMCache's extra_config, under the plugin's names (LMCache's
convention for remote storage plugins), first match wins:

    remote_storage_plugin.<instance>.<key>   e.g. remote_storage_plugin.rados_nkv.primary.target
    remote_storage_plugin.rados_nkv.<key>
    remote_connector.rados_nkv.<key>         (the prefix of older LMCache releases)

The native plugin (LMCache's multi-process mode) gets the same keys as its adapter_params.
Values may be strings (YAML, environment variables): numbers and booleans are converted, and a
value that does not convert is a ValueError naming the key.
"""

PLUGIN_TYPE = "rados_nkv"
URL_SCHEME = "rados_nkv://"
PLUGIN_SCHEME = "plugin://"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _bool_or_auto(key, v):
    if v is None or v == "auto":
        return "auto"
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in _TRUE + _FALSE:
        return v.strip().lower() in _TRUE
    raise ValueError("%s must be true, false or auto, got %r" % (key, v))


def _int(lo, hi):
    def conv(key, v):
        try:
            if isinstance(v, bool):
                raise ValueError
            n = int(v)
        except (TypeError, ValueError):
            raise ValueError("%s must be an integer, got %r" % (key, v)) from None
        if not lo <= n <= hi:
            raise ValueError("%s must be %d..%d, got %d" % (key, lo, hi, n))
        return n
    return conv


def _float(key, v):
    try:
        if isinstance(v, bool):
            raise ValueError
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number of seconds, got %r" % (key, v)) from None
    if not f > 0:
        raise ValueError("%s must be positive, got %r" % (key, v))
    return f


def _str(key, v):
    if not isinstance(v, str) or not v:
        raise ValueError("%s must be a non-empty string, got %r" % (key, v))
    return v


def _target(key, v):
    """One target, or several paths of one subsystem: a list of targets or one string with commas
    (the string rados_nkv.connect() takes, commas and all)."""
    if isinstance(v, (list, tuple)):
        if not v or not all(isinstance(t, str) and t and "," not in t for t in v):
            raise ValueError("%s must be a non-empty list of targets (\"HOST:PORT\" strings), got %r" % (key, v))
        return ",".join(v)
    return _str(key, v)


# key: (converter, default, what it is). Every key is documented in docs/lmcache.md.
KEYS = {
    "target": (_target, None, 'NVMe/TCP "HOST[:PORT]" / "[v6]:PORT", or "shm:/path/to/socket"; several '
                              'paths of one subsystem (a gateway group): a list, or commas between them'),
    "shm_socket": (_str, None, "shared-memory socket path (same as target shm:PATH)"),
    "subnqn": (_str, None, "subsystem NQN (TCP: None asks the discovery controller)"),
    "nsid": (_int(1, 0xFFFFFFFE), 1, "KV namespace"),
    "queues": (_int(1, 1024), 4, "queue pairs (one thread each)"),
    "depth": (_int(1, 65535), 128, "entries per queue pair"),
    "timeout": (_float, 30.0, "seconds for the connect and for every command"),
    "hostnqn": (_str, None, "host NQN (default: /etc/nvme/hostnqn or a generated one)"),
    "discovery_port": (_int(1, 65535), None, "discovery controller port (TCP without subnqn; default: the "
                                              "target's port, else 8009)"),
    "register_arena": (_bool_or_auto, "auto", "register LMCache's CPU arena over shm"),
    "staging_mb": (_int(0, 1 << 20), 256, "registered staging memory for stores, MiB"),
}


def convert(key, value, label=None):
    """@value of setting @key, converted and checked (ValueError naming @label, the key as the
    user wrote it, default @key)."""
    if key not in KEYS:
        raise ValueError("unknown rados_nkv setting %r (known: %s)" % (key, ", ".join(sorted(KEYS))))
    conv, _default, _what = KEYS[key]
    return conv(label or key, value)


def plugin_names(plugin_name):
    """Config prefixes to look in, most specific first."""
    names = []
    if plugin_name and plugin_name != PLUGIN_TYPE:
        names.append("remote_storage_plugin.%s." % plugin_name)
    names.append("remote_storage_plugin.%s." % PLUGIN_TYPE)
    names.append("remote_connector.%s." % PLUGIN_TYPE)
    return names


def from_extra_config(extra_config, plugin_name=None, url=None):
    """Settings dict (every key of KEYS) from LMCache's extra_config; @url "rados_nkv://TARGET"
    gives the target when extra_config does not."""
    extra = extra_config or {}
    out = {}
    prefixes = plugin_names(plugin_name)
    for key, (_conv, default, _what) in KEYS.items():
        value = default
        for p in prefixes:
            if p + key in extra and extra[p + key] is not None:
                value = convert(key, extra[p + key], p + key)
                break
        out[key] = value
    if url and url.startswith(URL_SCHEME) and out["target"] is None and out["shm_socket"] is None:
        rest = url[len(URL_SCHEME):]
        if rest:
            out["target"] = rest
    return out


def from_kwargs(**kwargs):
    """Settings dict from keyword arguments (the native plugin's adapter_params)."""
    out = {key: default for key, (_c, default, _w) in KEYS.items()}
    for key, value in kwargs.items():
        if value is not None:
            out[key] = convert(key, value)
    return out


def connect_args(s):
    """(target, keyword arguments of rados_nkv.connect()) for settings @s."""
    if s["target"] and s["shm_socket"]:
        raise ValueError("rados_nkv: set either target or shm_socket, not both")
    target = "shm:" + s["shm_socket"] if s["shm_socket"] else s["target"]
    if not target:
        raise ValueError('rados_nkv: no target: set remote_storage_plugin.rados_nkv.target '
                         '("HOST:PORT" or "shm:/path") or .shm_socket')
    kw = {"subnqn": s["subnqn"], "nsid": s["nsid"], "queues": s["queues"], "depth": s["depth"],
          "timeout": s["timeout"], "hostnqn": s["hostnqn"], "discovery_port": s["discovery_port"]}
    return target, kw


def connect(s):
    """A rados_nkv.Client for settings @s."""
    import rados_nkv
    target, kw = connect_args(s)
    return rados_nkv.connect(target, **kw)
