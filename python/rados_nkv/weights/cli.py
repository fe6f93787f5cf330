# SPDX-License-Identifier: Apache-2.0
"""nkv-weights: upload safetensors models to rados-nkv, verify them, list and remove them, load them.

Exit status: 0 success, 1 failure (connection, I/O, a verify that found problems), 2 no such
upload, 3 upload exists (without --force), 64 bad usage (as the nkv CLI).
"""

import argparse
import logging
import os
import sys
import time

from .. import longname
from ..errors import NkvError
from .manifest import chunk_name
from .sizes import parse_size, fmt_size

PROG = "nkv-weights"
EX_OK, EX_FAIL, EX_NOTFOUND, EX_EXISTS, EX_USAGE = 0, 1, 2, 3, 64

DESCRIPTION = """\
Store safetensors model weights in a rados-nkv namespace and stream them back.

commands:
  upload MODEL_DIR --model NAME --rev REV   store every *.safetensors of MODEL_DIR (chunks + manifest)
  verify --model NAME --rev REV [--dir D]   re-read every chunk, check SHA-256 (and against D's files)
  ls [--model NAME --rev REV [--tensors]]   list uploads, or one upload's files (and tensors)
  rm --model NAME --rev REV                 delete an upload
  load --model NAME --rev REV               stream every tensor into memory and report the rate

exit status: 0 ok, 1 failure, 2 no such upload, 3 already uploaded (upload without --force),
64 bad usage."""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _size_arg(s):
    try:
        v = parse_size(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return v


def _pos_int(lo, hi):
    def conv(s):
        try:
            v = int(s, 0)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not a number" % s) from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError("%d is out of range %d..%d" % (v, lo, hi))
        return v
    return conv


def _pos_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % s) from None
    if not v > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return v


def _target_opts(p, suppress):
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    g = p.add_argument_group("target")
    g.add_argument("-t", "--target", default=d(None), metavar="HOST[:PORT]|shm:PATH",
                   help="NVMe/TCP address (port 4420, or the discovery log's) or shm:/path/to/socket "
                        "(default: $NKV_WEIGHTS_TARGET, else 127.0.0.1)")
    g.add_argument("--subnqn", default=d(None), metavar="NQN",
                   help="subsystem NQN (TCP; default: the one NVMe subsystem the discovery log at the "
                        "target's port, else 8009, lists)")
    g.add_argument("--nsid", type=_pos_int(1, 0xFFFFFFFE), default=d(1), metavar="N", help="namespace (default 1)")
    g.add_argument("--queues", type=_pos_int(1, 1024), default=d(4), metavar="N",
                   help="I/O queue pairs (default 4)")
    g.add_argument("--timeout", type=_pos_float, default=d(30.0), metavar="SEC",
                   help="connect and per-command timeout (default 30)")
    g.add_argument("--progress", dest="progress", action="store_true", default=d(None),
                   help="always show a progress bar (default: when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false", default=d(None),
                   help="never show a progress bar")
    g.add_argument("-v", "--verbose", action="store_true", default=d(False), help="log what happens")


def _model_opts(p, required=True):
    p.add_argument("--model", required=required, metavar="NAME", help="model name (any text, e.g. org/name)")
    p.add_argument("--rev", required=required, metavar="REV", help="revision (any text, e.g. main or a commit)")


def build_parser():
    p = _Parser(prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__
    p.add_argument("-V", "--version", action="version", version="%s %s" % (PROG, __version__))
    _target_opts(p, False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    u = sub.add_parser("upload", help="store a model directory's safetensors files")
    u.add_argument("model_dir", metavar="MODEL_DIR")
    _model_opts(u)
    u.add_argument("--chunk-size", type=_size_arg, metavar="SIZE",
                   help="bytes per stored object (default 64M, or less if the namespace's largest value is "
                        "smaller); K/M/G suffixes")
    u.add_argument("--inflight", type=_size_arg, default=512 << 20, metavar="SIZE",
                   help="memory for chunks in flight (default 512M)")
    u.add_argument("--force", action="store_true", help="replace an existing upload of this model and revision")
    _target_opts(u, True)

    v = sub.add_parser("verify", help="re-read every chunk and check the SHA-256 digests")
    _model_opts(v)
    v.add_argument("--dir", dest="model_dir", metavar="MODEL_DIR",
                   help="also check that this directory's files match the manifest")
    v.add_argument("--inflight", type=_size_arg, default=512 << 20, metavar="SIZE",
                   help="memory for chunks in flight (default 512M)")
    _target_opts(v, True)

    ls = sub.add_parser("ls", help="list uploads, or one upload's files")
    _model_opts(ls, required=False)
    ls.add_argument("--tensors", action="store_true", help="with --model/--rev: list every tensor too")
    _target_opts(ls, True)

    rm = sub.add_parser("rm", help="delete an upload (manifest, chunks, index entry)")
    _model_opts(rm)
    _target_opts(rm, True)

    ld = sub.add_parser("load", help="stream every tensor into memory (as the vLLM loader does) and report "
                                     "the rate; nothing is kept")
    _model_opts(ld)
    ld.add_argument("--window", type=_size_arg, default=64 << 20, metavar="SIZE",
                    help="tensor bytes allocated and read at once (default 64M)")
    ld.add_argument("--read-size", type=_size_arg, default=8 << 20, metavar="SIZE",
                    help="largest single read (default 8M)")
    ld.add_argument("--workers", type=_pos_int(1, 256), default=4, metavar="N",
                    help="threads running batches of reads (default 4)")
    ld.add_argument("--register", choices=("reuse", "always", "never"), default=None,
                    help="shm: register window memory when made (always, the default), when first reused, "
                         "or never (bounce buffers)")
    _target_opts(ld, True)
    return p


def _connect(a):
    import rados_nkv
    return rados_nkv.connect(a.target, subnqn=a.subnqn, nsid=a.nsid, queues=a.queues, timeout=a.timeout)


def _check_target(a):
    a.target = a.target or os.environ.get("NKV_WEIGHTS_TARGET") or "127.0.0.1"
    try:
        from ..client import _parse_target
        _parse_target(a.target)
    except (TypeError, ValueError) as e:
        raise UsageError("--target: %s" % e) from None


def _check_names(a):
    if a.model is None and a.rev is None:
        return
    if not a.model or not a.rev:
        raise UsageError("--model and --rev go together and must not be empty")
    try:
        name = chunk_name(a.model, a.rev, "x" * 255 + ".safetensors", 10 ** 9)
        longname.name_bytes(name)
    except ValueError as e:
        raise UsageError("model name and revision too long (object names are at most 4096 bytes): %s" % e) \
            from None


def _rate(nbytes, secs):
    return "%.2f GB/s" % (nbytes / secs / 1e9) if secs > 0 else "-"


def cmd_upload(a, c):
    from .store import upload
    t0 = time.monotonic()
    m = upload(c, a.model_dir, a.model, a.rev, chunk_size=a.chunk_size, force=a.force, inflight=a.inflight,
               progress=a.progress)
    dt = time.monotonic() - t0
    chunks = sum(f.chunks for f in m.files)
    print("uploaded %s %s: %d files, %d tensors, %s in %d chunks of %s, %.2f s (%s)"
          % (m.model, m.rev, len(m.files), m.tensor_count, fmt_size(m.total_bytes), chunks,
             fmt_size(m.chunk_size), dt, _rate(m.total_bytes, dt)))
    return EX_OK


def cmd_verify(a, c):
    from .store import verify
    t0 = time.monotonic()
    m, problems = verify(c, a.model, a.rev, model_dir=a.model_dir, inflight=a.inflight, progress=a.progress)
    dt = time.monotonic() - t0
    chunks = sum(f.chunks for f in m.files)
    if problems:
        for p in problems:
            print("%s: %s" % (PROG, p), file=sys.stderr)
        print("%s: verify %s %s FAILED: %d problem(s) in %d files, %d chunks"
              % (PROG, a.model, a.rev, len(problems), len(m.files), chunks), file=sys.stderr)
        return EX_FAIL
    print("verified %s %s: %d files, %d chunks, %s, every SHA-256 matches%s, %.2f s (%s)"
          % (m.model, m.rev, len(m.files), chunks, fmt_size(m.total_bytes),
             " (and %s)" % a.model_dir if a.model_dir else "", dt, _rate(m.total_bytes, dt)))
    return EX_OK


def cmd_ls(a, c):
    from .store import read_index, get_manifest, NotFound
    if a.model is None:
        ups = read_index(c)
        if not ups:
            print("no uploads")
            return EX_OK
        from .manifest import manifest_name
        present = c.exists_named_many([manifest_name(u["model"], u["rev"]) for u in ups])
        print("%-40s %-16s %5s %8s %10s  %s" % ("MODEL", "REV", "FILES", "TENSORS", "SIZE", "CREATED"))
        for u, ok in zip(ups, present):
            print("%-40s %-16s %5s %8s %10s  %s%s" % (u["model"], u["rev"], u.get("files", "?"), u.get("tensors", "?"),
                                                    fmt_size(u.get("bytes", 0)), u.get("created", "?"),
                                                    "" if ok else "  (manifest missing)"))
        return EX_OK
    m = get_manifest(c, a.model, a.rev)
    if m is None:
        raise NotFound("%s %s: no such upload" % (a.model, a.rev))
    print("%s %s: %d files, %d tensors, %s, chunks of %s, created %s"
          % (m.model, m.rev, len(m.files), m.tensor_count, fmt_size(m.total_bytes), fmt_size(m.chunk_size),
             m.created))
    for f in m.files:
        print("  %s  %d bytes  %d chunks  %d tensors  sha256 %s" % (f.name, f.size, f.chunks, len(f.tensors),
                                                                    f.sha256))
        if a.tensors:
            for t in f.tensors:
                print("    %-60s %-8s %-20s [%d, %d)" % (t.name, t.dtype, list(t.shape), t.begin, t.end))
    return EX_OK


def cmd_rm(a, c):
    from .store import remove
    m = remove(c, a.model, a.rev)
    print("removed %s %s: %d files, %d chunks" % (m.model, m.rev, len(m.files), sum(f.chunks for f in m.files)))
    return EX_OK


def cmd_load(a, c):
    from .store import get_manifest, NotFound
    from .reader import iter_tensors
    from .store import _progress
    m = get_manifest(c, a.model, a.rev)
    if m is None:
        raise NotFound("%s %s: no such upload" % (a.model, a.rev))
    total = sum(t.nbytes for f in m.files for t in f.tensors)
    bar = _progress(a.progress, total, "load %s %s" % (a.model, a.rev))
    t0 = time.monotonic()
    n = 0
    try:
        for _name, _t in iter_tensors(c, m, window=a.window, read_size=a.read_size, workers=a.workers,
                                      register=a.register, progress=bar):
            n += 1
            del _t  # nothing is kept: windows are recycled
    finally:
        if bar is not None:
            bar.close()
    dt = time.monotonic() - t0
    print("loaded %s %s: %d tensors, %s in %.2f s (%s)" % (m.model, m.rev, n, fmt_size(total), dt,
                                                          _rate(total, dt)))
    return EX_OK


COMMANDS = {"upload": cmd_upload, "verify": cmd_verify, "ls": cmd_ls, "rm": cmd_rm, "load": cmd_load}


def main(argv=None):
    p = build_parser()
    try:
        a = p.parse_args(argv)
        if a.command is None:
            raise UsageError("a command is required (upload, verify, ls, rm, load); %s -h lists them" % PROG)
        _check_names(a)
        _check_target(a)
        if a.command == "ls" and (a.model is None) != (a.rev is None):
            raise UsageError("ls: give both --model and --rev, or neither")
        if a.command == "ls" and a.tensors and a.model is None:
            raise UsageError("ls: --tensors needs --model and --rev")
        if a.command in ("upload",) and a.chunk_size is not None and a.chunk_size < 1:
            raise UsageError("--chunk-size must be positive")
    except UsageError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        print(p.format_usage().rstrip(), file=sys.stderr)
        return EX_USAGE
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING,
                        format="%(asctime)s " + PROG + " %(levelname)s %(message)s")
    from .store import WeightsError, NotFound, AlreadyExists, BadChunkSize
    from .reader import LoadError
    try:
        with _connect(a) as c:
            return COMMANDS[a.command](a, c)
    except (UsageError, BadChunkSize) as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        print(p.format_usage().rstrip(), file=sys.stderr)
        return EX_USAGE
    except NotFound as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return EX_NOTFOUND
    except AlreadyExists as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return EX_EXISTS
    except (WeightsError, LoadError, NkvError, OSError, ValueError) as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return EX_FAIL
    except KeyboardInterrupt:
        print("%s: interrupted" % PROG, file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
