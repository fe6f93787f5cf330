# SPDX-License-Identifier: Apache-2.0
"""nkv-weights as a user runs it: exit codes, messages, progress bar only on a terminal."""

import os
import pty
import select
import subprocess
import sys

import pytest

from rados_nkv import longname
from rados_nkv.weights import chunk_name

from weights_helpers import write_model, run_cli, cli_env


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    write_model(str(d))
    return str(d)


def test_cli_lifecycle(target_args, model_dir, model_name, client):
    r = run_cli(*target_args, "upload", model_dir, "--model", model_name, "--rev", "v1", "--chunk-size", "4k")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("uploaded %s v1: 2 files, 13 tensors" % model_name)
    assert "chunks of 4.0 KiB" in r.stdout
    # target options after the command work too
    r = run_cli("verify", "--model", model_name, "--rev", "v1", "--dir", model_dir, *target_args)
    assert r.returncode == 0, r.stderr
    assert "every SHA-256 matches" in r.stdout
    r = run_cli(*target_args, "ls")
    assert r.returncode == 0 and model_name in r.stdout
    r = run_cli(*target_args, "ls", "--model", model_name, "--rev", "v1", "--tensors")
    assert r.returncode == 0
    assert "model-00001-of-00002.safetensors" in r.stdout and "layers.1.mlp.weight" in r.stdout
    assert "BF16" in r.stdout and "[3, 3001]" in r.stdout
    r = run_cli(*target_args, "load", "--model", model_name, "--rev", "v1", "--window", "8k", "--read-size", "1000")
    assert r.returncode == 0, r.stderr
    assert "13 tensors" in r.stdout
    # already there: exit 3
    r = run_cli(*target_args, "upload", model_dir, "--model", model_name, "--rev", "v1")
    assert r.returncode == 3 and "--force" in r.stderr
    # a corrupted chunk: verify says which, exit 1
    name = chunk_name(model_name, "v1", "model-00002-of-00002.safetensors", 3)
    payload = bytearray(client.get_named(name))
    payload[0] ^= 1
    client.put_named(name, bytes(payload))
    r = run_cli(*target_args, "verify", "--model", model_name, "--rev", "v1")
    assert r.returncode == 1
    assert "model-00002-of-00002.safetensors chunk 3 (%s): SHA-256" % name in r.stderr
    assert "FAILED: 2 problem(s)" in r.stderr
    # a foreign object under a chunk's key
    client.store(longname.key_for(name), b"not a chunk")
    r = run_cli(*target_args, "verify", "--model", model_name, "--rev", "v1")
    assert r.returncode == 1 and "is not this chunk" in r.stderr
    r = run_cli(*target_args, "load", "--model", model_name, "--rev", "v1")
    assert r.returncode == 1 and "chunk 3" in r.stderr and "Traceback" not in r.stderr
    # --force repairs it
    r = run_cli(*target_args, "upload", model_dir, "--model", model_name, "--rev", "v1", "--force", "--chunk-size", "4096")
    assert r.returncode == 0, r.stderr
    r = run_cli(*target_args, "verify", "--model", model_name, "--rev", "v1")
    assert r.returncode == 0, r.stderr
    r = run_cli(*target_args, "rm", "--model", model_name, "--rev", "v1")
    assert r.returncode == 0 and r.stdout.startswith("removed %s v1: 2 files" % model_name)
    for cmd in ("verify", "rm", "load"):
        r = run_cli(*target_args, cmd, "--model", model_name, "--rev", "v1")
        assert r.returncode == 2, (cmd, r.stderr)
        assert "no such upload" in r.stderr
    r = run_cli(*target_args, "ls", "--model", model_name, "--rev", "v1")
    assert r.returncode == 2


@pytest.mark.parametrize("args, msg", [
    ([], "a command is required"),
    (["upload"], "required"),
    (["upload", "DIR", "--model", "m"], "--rev"),
    (["verify", "--rev", "r"], "--model"),
    (["upload", "DIR", "--model", "m", "--rev", "r", "--chunk-size", "abc"], "--chunk-size"),
    (["upload", "DIR", "--model", "m", "--rev", "r", "--chunk-size", "0"], "--chunk-size"),
    (["--nsid", "0", "ls"], "--nsid"),
    (["--queues", "x", "ls"], "--queues"),
    (["-t", "host:99999", "ls"], "--target"),
    (["-t", "shm:", "ls"], "--target"),
    (["ls", "--model", "m"], "--model and --rev go together"),
    (["ls", "--tensors"], "--tensors needs"),
    (["verify", "--model", "", "--rev", "r"], "must not be empty"),
    (["verify", "--model", "m" * 5000, "--rev", "r"], "too long"),
    (["frobnicate"], "invalid choice"),
    (["load", "--model", "m", "--rev", "r", "--workers", "0"], "--workers"),
])
def test_usage_errors(args, msg):
    r = run_cli(*args)
    assert r.returncode == 64, (args, r.stdout, r.stderr)
    assert msg in r.stderr, r.stderr
    assert r.stderr.startswith("nkv-weights: ") and "usage: nkv-weights" in r.stderr
    assert "Traceback" not in r.stderr


def test_chunk_size_over_namespace_limit(target_args, model_dir, model_name):
    r = run_cli(*target_args, "upload", model_dir, "--model", model_name, "--rev", "r", "--chunk-size", "1G")
    assert r.returncode == 64
    assert "more than the namespace takes" in r.stderr and "at most" in r.stderr


def test_discovery_on_the_target_port(daemon):
    """-t HOST:PORT without --subnqn: the discovery log at PORT (every rados-nkv listener serves it),
    the rule of every client (nkv, rados_nkv.connect), not the well-known port 8009."""
    r = run_cli("-t", "127.0.0.1:%d" % daemon.port, "--timeout", "10", "ls")
    assert r.returncode == 0, r.stderr


def test_connection_refused(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = run_cli("-t", "127.0.0.1:%d" % port, "--subnqn", "nqn.2026-11.io.example:x", "--timeout", "5", "ls")
    assert r.returncode == 1 and "refused" in r.stderr.lower(), r.stderr
    r = run_cli("-t", "shm:%s" % (tmp_path / "none.sock"), "--subnqn", "nqn.2026-11.io.example:x", "ls")
    assert r.returncode == 1 and "nkv-weights: connect to shm:" in r.stderr, r.stderr


def _run_on_pty(args):
    """Run the CLI with stderr on a pseudo-terminal; returns (rc, stdout, terminal output)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "rados_nkv.weights.cli", *args], stdout=subprocess.PIPE,
                         stderr=slave, stdin=subprocess.DEVNULL, env=cli_env())
    os.close(slave)
    term = b""
    while True:
        r, _, _ = select.select([master], [], [], 60)
        if not r:
            break
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not b:
            break
        term += b
    out = p.stdout.read()
    p.wait(60)
    os.close(master)
    return p.returncode, out.decode(), term.decode(errors="replace")


def test_progress_only_on_a_terminal(target_args, model_dir, model_name):
    rc, out, term = _run_on_pty([*target_args, "upload", model_dir, "--model", model_name, "--rev", "p",
                                 "--chunk-size", "4k"])
    assert rc == 0, term
    assert "upload %s p" % model_name in term and "B/s" in term  # tqdm's bar
    rc, out, term = _run_on_pty([*target_args, "load", "--model", model_name, "--rev", "p"])
    assert rc == 0 and "load %s p" % model_name in term and "B/s" in term, term
    rc, out, term = _run_on_pty([*target_args, "--no-progress", "verify", "--model", model_name, "--rev", "p"])
    assert rc == 0 and "B/s" not in term, term
    # stderr not a terminal: no bar
    r = run_cli(*target_args, "verify", "--model", model_name, "--rev", "p")
    assert r.returncode == 0 and r.stderr == ""
    assert run_cli(*target_args, "rm", "--model", model_name, "--rev", "p").returncode == 0
