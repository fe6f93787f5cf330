# SPDX-License-Identifier: Apache-2.0
"""The man pages (man/*.scd) cannot drift from the programs they describe.

  - every option that `PROGRAM --help` prints, and every command it lists with the options of
    `PROGRAM COMMAND --help`, appears in the page;
  - every key the daemon's JSON configuration accepts (the key lists of tools/rados-nkv/config.c)
    appears in rados-nkv(8);
  - each page has the sections an admin looks for, and scdoc turns it into roff without an error
    (where scdoc is installed).

With --docs, docs/configuration.md instead: every option of `rados-nkv --help` in a row of its flag
table, every JSON key in its JSON key tables.

Usage: man_pages.py SOURCE_DIR RADOS_NKV NKV [NKV_CTL]   (exit 0 pass, 1 fail)
       man_pages.py --docs SOURCE_DIR RADOS_NKV"""
import os
import re
import shutil
import subprocess
import sys

DOCS = sys.argv[1] == "--docs"
if DOCS:
    SRC, DAEMON = sys.argv[2:4]
    NKV = CTL = None
else:
    SRC, DAEMON, NKV = sys.argv[1:4]
    CTL = sys.argv[4] if len(sys.argv) > 4 else None
fails = 0
passes = 0


def check(cond, what):
    global fails, passes
    if cond:
        passes += 1
    else:
        fails += 1
        print("FAIL - " + what)
    return cond


def help_of(argv):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    return p.stdout + p.stderr


def options_in(text):
    """The options the help lists: those in the option column (lines that start with a flag, up to
    the description) and those of the usage lines ("usage: ..." and their indented continuations)."""
    found = set()
    usage = False
    for line in text.split("\n"):
        if line.startswith("usage:"):
            usage = True
            spec = line
        elif usage and re.match(r"^\s+[\[-]", line):
            spec = line
        else:
            usage = False
            m = re.match(r"^ {1,8}(-.*?)(?: {2,}|$)", line)
            if not m:
                continue
            spec = m.group(1)
        found |= set(re.findall(r"(?<![A-Za-z0-9-])(--?[A-Za-z0-9][a-z0-9-]*)", spec))
    found.discard("-")
    return {o for o in found if not re.fullmatch(r"-[0-9]+", o)}


def mentions(page, opt):
    """@opt in an entry's header line (one that starts with *...*), not only in some prose."""
    return re.search(r"^\*.*" + re.escape(opt) + r"(?![A-Za-z0-9-])", page, re.M) is not None


def page_text(name):
    path = os.path.join(SRC, "man", name + ".scd")
    if not check(os.path.isfile(path), "%s exists" % path):
        return None
    with open(path) as f:
        return f.read()


def check_sections(name, page, sections):
    heads = set(re.findall(r"^# ([A-Z][A-Z ]+)$", page, re.M))
    for s in sections:
        check(s in heads, "%s has a %s section" % (name, s))
    scdoc = shutil.which("scdoc")
    if scdoc:
        p = subprocess.run([scdoc], input=page, capture_output=True, text=True)
        check(p.returncode == 0 and ".TH" in p.stdout, "scdoc renders %s: %s" % (name, p.stderr.strip()))


def check_options(name, page, prog, text, where):
    for opt in sorted(options_in(text)):
        check(mentions(page, opt), "%s: %s (from %s --help) has no entry in the page" % (name, opt, where))


def commands_in(text, multiword):
    """Command names from the help's 'commands:' list."""
    m = re.search(r"^commands:\n(.*?)\n\n", text, re.M | re.S)
    cmds = []
    for line in (m.group(1) if m else "").split("\n"):
        mm = re.match(r"^  ([a-z][a-z0-9-]*)((?: [a-z][a-z0-9-]*)*)", line)
        if not mm:
            continue
        words = [mm.group(1)] + (mm.group(2).split() if multiword else [])
        cmds.append(" ".join(words[:2]))
    return cmds


def config_keys():
    """Every key the daemon's JSON parser knows: the NULL-terminated key lists of config.c."""
    with open(os.path.join(SRC, "tools", "rados-nkv", "config.c")) as f:
        conf = f.read()
    keys = set()
    for body in re.findall(r"static const char \*const \w+\[\] = \{(.*?)\};", conf, re.S):
        if "NULL" in body:  # the key lists end in NULL; other tables (level names) do not
            keys |= set(re.findall(r'"([a-z0-9_]+)"', body))
    check(len(keys) > 50, "config.c's key lists found (%d keys)" % len(keys))
    return keys


if DOCS:
    path = os.path.join(SRC, "docs", "configuration.md")
    check(os.path.isfile(path), "%s exists" % path)
    text = open(path).read() if os.path.isfile(path) else ""
    flags = text.split("\n## Flags", 1)[-1].split("\n## ", 1)[0]
    rows = "\n".join(l for l in flags.split("\n") if l.startswith("|"))
    for opt in sorted(options_in(help_of([DAEMON]))):
        check(re.search(r"(?<![A-Za-z0-9-])" + re.escape(opt) + r"(?![A-Za-z0-9-])", rows) is not None,
              "configuration.md: %s (rados-nkv --help) has no row in the flag table" % opt)
    jsect = text.split("\n## JSON keys", 1)[-1] if "\n## JSON keys" in text else ""
    jrows = "\n".join(l for l in jsect.split("\n") if l.startswith("|"))
    for k in sorted(config_keys()):
        check(re.search(r"(?<![a-z0-9_])" + re.escape(k) + r"(?![a-z0-9_])", jrows) is not None,
              "configuration.md: JSON key %s (tools/rados-nkv/config.c) has no row in the key tables" % k)
    print("docs_configuration: %d passed, %d failed" % (passes, fails))
    sys.exit(1 if fails else 0)

BASE = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]

# --- rados-nkv(8) -------------------------------------------------------------------------------
page = page_text("rados-nkv.8")
if page:
    check_sections("rados-nkv.8", page, BASE + ["OPTIONS", "CONFIGURATION", "SIGNALS"])
    check_options("rados-nkv.8", page, DAEMON, help_of([DAEMON]), "rados-nkv")
    keys = config_keys()
    for k in sorted(keys):
        check(re.search(r"\*" + re.escape(k) + r"\*", page) is not None,
              "rados-nkv.8: JSON key %s (tools/rados-nkv/config.c) is not in CONFIGURATION" % k)

# --- nkv(1) and nkv-ctl(8): every option, and every command with its own options ------------------
def check_tool(name, prog, page, ctl, min_cmds):
    tool = name.rsplit(".", 1)[0]
    check_sections(name, page, BASE + ["COMMANDS", "OPTIONS"])
    text = help_of([prog])
    check_options(name, page, prog, text, tool)
    cmds = commands_in(text, ctl)
    check(len(cmds) >= min_cmds, "%s --help lists its commands (%s)" % (tool, cmds))
    for c in cmds:
        check(re.search(r"^\*" + re.escape(tool + " " + c) + r"\*", page, re.M) is not None,
              "%s: command '%s' has no entry (*%s %s* ...)" % (name, c, tool, c))
        check_options(name, page, prog, help_of([prog] + c.split()), tool + " " + c)


page = page_text("nkv.1")
if page:
    check_tool("nkv.1", NKV, page, False, 10)
page = page_text("nkv-ctl.8")
if page and CTL:
    check_tool("nkv-ctl.8", CTL, page, True, 15)

print("man_pages: %d passed, %d failed" % (passes, fails))
sys.exit(1 if fails else 0)
