# SPDX-License-Identifier: Apache-2.0
"""The ctypes structures against the C compiler's layout of include/nkv/nkv.h (every field's
offset and each size), and the identify offsets the package reads."""

import ctypes
import shutil
import subprocess

import pytest

from conftest import ROOT
from rados_nkv import _ffi

FIELDS = {
    "nkv_op": (_ffi.Op, [f[0] for f in _ffi.Op._fields_]),
    "nkv_conn_opts": (_ffi.ConnOpts, [f[0] for f in _ffi.ConnOpts._fields_]),
    "nkv_engine_opts": (_ffi.EngineOpts, [f[0] for f in _ffi.EngineOpts._fields_]),
    "nkv_disc_entry": (_ffi.DiscEntry, [f[0] for f in _ffi.DiscEntry._fields_]),
}


def test_layouts_match_the_compiler(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include \"nkv/nkv.h\"", "int main(void) {"]
    for s, (_t, fields) in FIELDS.items():
        lines.append('printf("%s size %%zu\\n", sizeof(struct %s));' % (s, s))
        for f in fields:
            lines.append('printf("%s %s %%zu\\n", offsetof(struct %s, %s));' % (s, f, s, f))
    lines.append('printf("id_ctrlr subnqn %zu\\n", offsetof(struct nkv_id_ctrlr, subnqn));')
    lines.append('printf("id_ns_kv kvfc %zu\\n", offsetof(struct nkv_id_ns_kv, kvfc));')
    lines.append('printf("id_ns_kv nsattr %zu\\n", offsetof(struct nkv_id_ns_kv, nsattr));')
    lines.append('printf("id_ns_kv kvf %zu\\n", offsetof(struct nkv_id_ns_kv, kvf));')
    lines.append('printf("kv_format kvvml %zu\\n", offsetof(struct nkv_kv_format, kvvml));')
    lines.append('printf("consts %d %d %d %d %d %d %d %d %d %u\\n", NKV_OP_STORE, NKV_OP_RETRIEVE, NKV_OP_DELETE, '
                 'NKV_OP_EXIST, NKV_OP_LIST, NKV_STORE_MUST_EXIST, NKV_STORE_MUST_NOT_EXIST, NKV_STATUS_HOST_PATH, '
                 'NKV_STORE_NO_COMPRESS, NKV_LNAME_MAX);')
    lines.append("return 0; }")
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=gnu11", "-I", str(ROOT / "include"), "-I", str(ROOT / "build" / "asan" / "include"),
                    "-I", str(ROOT / "build" / "release" / "include"), str(src), "-o", str(exe)], check=True)
    out, consts = {}, None
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        words = line.split()
        if words[0] == "consts":
            consts = [int(w) for w in words[1:]]
        else:
            out[(words[0], words[1])] = int(words[2])
    for s, (t, fields) in FIELDS.items():
        assert out[(s, "size")] == ctypes.sizeof(t), s
        for f in fields:
            assert out[(s, f)] == getattr(t, f).offset, (s, f)
    assert out[("id_ctrlr", "subnqn")] == _ffi.ID_CTRLR_SUBNQN
    assert out[("id_ns_kv", "kvfc")] == _ffi.ID_NS_KV_KVFC
    assert out[("id_ns_kv", "nsattr")] == _ffi.ID_NS_KV_NSATTR
    assert out[("id_ns_kv", "kvf")] == _ffi.ID_NS_KV_KVF
    assert out[("kv_format", "kvvml")] == 4
    assert consts == [_ffi.OP_STORE, _ffi.OP_RETRIEVE, _ffi.OP_DELETE, _ffi.OP_EXIST, _ffi.OP_LIST,
                      _ffi.STORE_MUST_EXIST, _ffi.STORE_MUST_NOT_EXIST, _ffi.STATUS_HOST_PATH,
                      _ffi.STORE_NO_COMPRESS, _ffi.LNAME_MAX]
