# SPDX-License-Identifier: Apache-2.0
"""Every code block of README.md is either run, as written, or checked.

README.md has at most 300 lines, and docs/README.md lists every page of docs/ exactly once.
Each fenced block must follow a marker line: `<!-- run ... -->` or `<!-- not run: REASON -->`.

  - The "run" blocks are joined, in their order, into one bash script (set -euo pipefail) that runs
    from the source directory in a private network and mount namespace (loopback up, a fresh /run
    and /tmp), so the README's default ports (4420, 8009) and paths are free and nothing of the
    machine's own daemons is reached. Jobs the blocks leave running are stopped at the end, and
    files they write in the source directory (value.txt) are removed.
  - In every block, each command of this project (rados-nkv, nkv, nkv-ctl, nkv-weights, make) may
    use only the subcommands and options its --help lists (make: the Makefile's targets).

The environment may add: CMAKE_BUILD_PARALLEL_LEVEL (2 unless set), NKV_LIBRARY (the release
libnkv the quick start builds, so that Python does not pick another build of the checkout).

Usage: readme_blocks.py SOURCE_DIR [--check-only]   (root: unshare needs it; exit 0 pass, 1 fail)"""
import os
import re
import shlex
import subprocess
import sys

SRC = os.path.abspath(sys.argv[1])
CHECK_ONLY = "--check-only" in sys.argv
fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL - " + msg)


def blocks(path):
    """(line, info, marker, body) for each fenced block."""
    out = []
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = lines[k].strip() if k >= 0 else ""
        out.append((i + 1, m.group(1), marker, "\n".join(lines[i + 1:j])))
        i = j + 1
    return out


HELP = {}


def help_text(argv):
    key = tuple(argv)
    if key not in HELP:
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"))
        d = tools_dir()
        if d and argv[0] == sys.executable:  # the Python package loads libnkv
            env["NKV_LIBRARY"] = os.path.join(d, "libnkv.so")
            if os.path.basename(d) == "asan":
                lib = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True)
                env["LD_PRELOAD"] = lib.stdout.strip()
                env["ASAN_OPTIONS"] = "detect_leaks=0"
        p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60, env=env)
        HELP[key] = p.stdout + p.stderr
    return HELP[key]


def tools_dir():
    for d in ("build/release", "build/asan", "build/debug"):
        if os.path.exists(os.path.join(SRC, d, "nkv")):
            return os.path.join(SRC, d)
    return None


def check_command(where, words):
    """@words: one simple command of a block; check it against the program's --help."""
    prog = os.path.basename(words[0])
    args = words[1:]
    if prog == "make":
        mk = open(os.path.join(SRC, "Makefile")).read()
        for t in [a for a in args if not a.startswith("-") and "=" not in a]:
            if not re.search(r"^" + re.escape(t) + r":", mk, re.M):
                fail("%s: make %s: no such Makefile target" % (where, t))
        return
    if prog not in ("rados-nkv", "nkv", "nkv-ctl", "nkv-weights"):
        return
    if prog == "nkv-weights":
        base = [sys.executable, "-m", "rados_nkv.weights.cli"]
    else:
        d = tools_dir()
        if not d or not os.path.exists(os.path.join(d, prog)):
            fail("%s: %s not built; cannot check it" % (where, prog))
            return
        base = [os.path.join(d, prog)]
    text = help_text(base)
    # subcommands: leading bare words the help lists as commands (nkv-ctl: up to two)
    sub = []
    for a in args:
        if a.startswith("-") or len(sub) == 2:
            break
        if re.search(r"^\s+" + re.escape(" ".join(sub + [a])) + r"\b", text, re.M) or \
           re.search(r"[{,]" + re.escape(a) + r"[,}]", text):
            sub.append(a)
        else:
            break
    texts = text + (help_text(base + sub) if sub else "")
    for a in args:
        if re.match(r"^--?[A-Za-z]", a):
            opt = a.split("=", 1)[0]
            if not re.search(r"(?<![A-Za-z0-9-])" + re.escape(opt) + r"(?![A-Za-z0-9-])", texts):
                fail("%s: %s %s: option %s is not in its --help" % (where, prog, " ".join(sub), opt))


def commands_of(body):
    """Simple commands of a shell block: continuation lines joined, comments dropped, split at
    ;, &&, ||, | and &."""
    text = re.sub(r"\\\n", " ", body)
    cmds = []
    for line in text.split("\n"):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        cur = []
        for w in words:
            if w in (";", "&&", "||", "|", "&"):
                if cur:
                    cmds.append(cur)
                cur = []
            elif w.endswith("&") and w != "&":
                cur.append(w[:-1])
                cmds.append(cur)
                cur = []
            else:
                cur.append(w)
        if cur:
            cmds.append(cur)
    return cmds


readme = os.path.join(SRC, "README.md")
# the README is a first screen, not the reference; the index lists every page of docs/
n = open(readme).read().count("\n")
if n > 300:
    fail("README.md has %d lines; at most 300 (the reference belongs in docs/)" % n)
index = os.path.join(SRC, "docs", "README.md")
listed = re.findall(r"^\| \[([a-z0-9-]+\.md)\]\((?:\./)?\1\) \|", open(index).read(), re.M) if os.path.exists(index) else []
pages = sorted(f for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md") and f != "README.md")
for f in pages:
    if listed.count(f) != 1:
        fail("docs/README.md lists %s %d times (once: every page of docs/ in the index)" % (f, listed.count(f)))
for f in set(listed) - set(pages):
    fail("docs/README.md lists %s, which does not exist" % f)
script = []
for line, info, marker, body in blocks(readme):
    where = "README.md:%d" % line
    run = marker.startswith("<!-- run")
    if not run and not re.match(r"^<!-- not run: \S.*-->$", marker):
        fail("%s: a ```%s block without a '<!-- run -->' or '<!-- not run: REASON -->' line before it"
             % (where, info))
        continue
    if run and info not in ("sh", "bash"):
        fail("%s: only sh blocks can be run (this one is ```%s)" % (where, info))
        continue
    if info in ("sh", "bash"):
        for words in commands_of(body):
            check_command(where, [w for w in words if not re.match(r"^[A-Z_]+=", w)] or words)
    if run:
        script.append("# --- %s\n%s" % (where, body))

if not script:
    fail("README.md has no block to run (the quick start)")
if CHECK_ONLY or fails:
    print("readme_blocks: %d failure(s); %d block(s) to run" % (len(fails), len(script)))
    sys.exit(1 if fails else 0)

inner = "\n".join([
    "set -euo pipefail",
    "trap 'for j in $(jobs -p); do kill $j 2>/dev/null; done; wait 2>/dev/null; rm -f value.txt' EXIT",
    "cd " + shlex.quote(SRC),
] + script + ["echo 'readme_blocks: every run block succeeded'"])
outer = "ip link set lo up && mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /tmp && exec bash -c " + \
    shlex.quote(inner)
env = dict(os.environ)
env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
env["NKV_LIBRARY"] = os.path.join(SRC, "build", "release", "libnkv.so")
print("readme_blocks: running %d block(s) in a private network namespace" % len(script))
sys.stdout.flush()
p = subprocess.run(["unshare", "--net", "--mount", "--", "bash", "-c", outer], env=env, cwd=SRC)
if p.returncode != 0:
    fail("the README's run blocks failed (exit %d; the failing command is printed above)" % p.returncode)
sys.exit(1 if fails else 0)
