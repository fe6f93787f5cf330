#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_report_test.py REPO - bench/report.py's aggregation over repetitions (compare.sh --reps), on
synthetic JSON lines whose medians, per-rep ratios and spreads are known: the rendered cells, the
dagger and its footnote (spread wider than the gap to 1.00x), the targets' verdicts, the summary
JSON lines, a failed rep and a rep missing for one system; and that a one-rep file renders as before
(no spreads, no flags). The "CPU per operation" tables: client / gateway / OSD / total per op, medians
over the reps, the total's per-rep ratio to librados with its spread and flag, the '~' on figures from
few clock ticks, the OSD left out of mem's total, no section for reports without CPU figures. The
performance goals: total CPU / librados, shm against TCP (throughput and p50), copies per byte.
Needs no cluster."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
REPORT = os.path.join(REPO, "bench", "report.py")
DAGGER = "\u2020"
fails = 0
checks = 0


def check(cond, what):
    global fails, checks
    checks += 1
    if not cond:
        fails += 1
        print("FAIL: %s" % what)


def size_bytes(s):
    return int(s[:-1]) * {"K": 1 << 10, "M": 1 << 20}[s[-1]]


CPU_OPS = 10000  # phase_ops of the synthetic CPU figures: 1 us/op is 0.01 s, one clock tick of 10 ms


def row(system, size, qd, rep, read, write=(1000.0, 10.0), ok=True, cpu=None):
    """A harness report: read/write = (p50 us, MB/s); p99 = 2 x p50, ops/s from MB/s and the size.
    cpu: {"read"/"write": (client, gw, osd) us per op, None for a process not watched}; absent: no CPU
    figures (a harness without them)."""
    def phase(name, p50, mbs):
        ph = {"phase": name, "op": name, "ops": 100, "bytes": 100 * size_bytes(size), "seconds": 1.0,
              "ops_s": round(mbs * 1e6 / size_bytes(size), 1), "mb_s": mbs,
              "lat_us": {"min": p50 / 2, "mean": p50, "p50": p50, "p90": p50 * 1.5, "p99": p50 * 2,
                         "p999": p50 * 3, "max": p50 * 4}, "misses": 0, "errors": 0, "mismatches": 0}
        if cpu and name in cpu:
            client, gw, osd = cpu[name]
            ph.update({"phase_ops": CPU_OPS, "cpu_us_per_op": client, "cpu_user_us_per_op": client * 0.7,
                       "cpu_sys_us_per_op": client * 0.3, "watch": {
                           k: {"pid": 1, "cpu_s": v * CPU_OPS / 1e6, "us_per_op": v, "tick_s": 0.01}
                           for k, v in (("gw", gw), ("osd", osd)) if v is not None}})
        return ph
    r = {"tool": "synthetic", "results": [phase("write", *write), phase("read", *read)],
         "verified": 100 if ok else 0, "errors": 0 if ok else 1, "mismatches": 0, "ok": ok,
         "system": system, "size_arg": size, "qd_arg": qd, "exit": 0 if ok else 1}
    if rep is not None:
        r["rep"] = rep
    return r


def render(rows):
    d = tempfile.mkdtemp(prefix="nkv-report-test.")
    jl = os.path.join(d, "t.jsonl")
    with open(jl, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    subprocess.run([sys.executable, REPORT, jl, os.path.join(d, "t.md"), os.path.join(d, "t"), "cmd", "machine",
                    "versions", "9", "8M", "1"], check=True)
    md = open(os.path.join(d, "t.md")).read()
    summary = [json.loads(l) for l in open(os.path.join(d, "t-summary.jsonl"))]
    shutil.rmtree(d)
    return md, summary


def table(md, title):
    """The lines of one '## title' section (up to the next heading)."""
    out, on = [], False
    for line in md.splitlines():
        if line.startswith("## "):
            on = line == "## " + title
            continue
        if on:
            out.append(line)
    check(out, "section '%s' present" % title)
    return out


def cells(lines, size, qd):
    for line in lines:
        if line.startswith("| %s | %d |" % (size, qd)):
            return [c.strip() for c in line.strip("|").split("|")][2:]
    check(False, "row %s QD %d present" % (size, qd))
    return []


# ---- three reps --------------------------------------------------------------------------------------
rows = []
# 4K QD 1 read p50: librados 100, 110, 90 (median 100); TCP 120, 121, 135: ratios 1.20, 1.10, 1.50 ->
# median 1.20, spread 0.40 > gap 0.20: flagged. TCP's own median p50 is 121.
# 4K QD 16 read p50: librados 100 x3; TCP 150, 160, 155: ratios 1.50-1.60, median 1.55, spread 0.10 < gap
# 0.55: not flagged.
# MB/s at 4K QD 1: librados 10 x3, TCP 9, 8, 8.5 -> 0.85x (0.80-0.90), spread 0.10 < gap 0.15: not flagged.
# mem / Redis read MB/s at 4K QD 1: mem 100 x3, Redis 95.2381, 105.2632, 100 -> ratios 1.05, 0.95, 1.00:
# median 1.00, spread 0.10 > gap 0: flagged.
R = {1: (100, 110, 90), 16: (100, 100, 100)}
T = {1: (120, 121, 135), 16: (150, 160, 155)}
TM = (9.0, 8.0, 8.5)
REDIS = (95.2381, 105.2632, 100.0)
# CPU per op at 4K QD 1 only (QD 16 has none: no rows there), us:
# retrieve: librados client 100 + OSD 200/220/180 = 300/320/280; TCP 20 + 150 + 190/210/170 = 360/380/340:
# per-rep ratios 1.2, 1.1875, 1.2143 -> 1.20x (1.19-1.21), not flagged; medians 20, 150, 190, 360.
# mem: client 10 + gw 12 (0.12 s: 12 ticks, marked '~'); its OSD figure (5, background) is left out: 22.
# store: librados 50 + 400 = 450; TCP 10 + 100 + 400/600/400 = 510/710/510: 1.13x (1.13-1.58), flagged.
# Redis has no CPU figures (an older harness): no row.
CR = {"read": (200, 220, 180), "write": (400, 400, 400)}
CT = {"read": (190, 210, 170), "write": (400, 600, 400)}
for k in (1, 2, 3):
    for qd in (1, 16):
        c1 = qd == 1
        rows.append(row("rados", "4K", qd, k, (R[qd][k - 1], 10.0), cpu=c1 and {
            "read": (100.0, None, CR["read"][k - 1]), "write": (50.0, None, CR["write"][k - 1])}))
        rows.append(row("tcp", "4K", qd, k, (T[qd][k - 1], TM[k - 1] if qd == 1 else 10.0), cpu=c1 and {
            "read": (20.0, 150.0, CT["read"][k - 1]), "write": (10.0, 100.0, CT["write"][k - 1])}))
        rows.append(row("mem", "4K", qd, k, (20.0, 100.0), cpu=c1 and {"read": (10.0, 12.0, 5.0)}))
        rows.append(row("redis", "4K", qd, k, (20.0, REDIS[k - 1] if qd == 1 else 100.0)))
# 4M QD 1: TCP's rep 3 is missing (2 of 3 reps) and its rep 2 failed verification.
for k in (1, 2, 3):
    rows.append(row("rados", "4M", 1, k, (1000.0, 400.0)))
    if k != 3:
        rows.append(row("tcp", "4M", 1, k, (1100.0, 300.0 + k), ok=k != 2))
md, summary = render(rows)

p50 = table(md, "Retrieve (read phase): p50 latency, us")
c = cells(p50, "4K", 1)
check(c[:2] == ["100", "121 \u00b7 1.20x (1.10-1.50)" + DAGGER], "4K QD 1 p50 cells: %s" % c[:2])
c = cells(p50, "4K", 16)
check(c[:2] == ["100", "155 \u00b7 1.55x (1.50-1.60)"], "4K QD 16 p50 cells (no flag): %s" % c[:2])
c = cells(p50, "4M", 1)
check(c[:2] == ["1000", "1100 \u00b7 1.10x (1.10-1.10) [2 of 3 reps]"], "4M QD 1 with a rep missing: %s" % c[:2])
check(any(l.startswith(DAGGER + " the ratio's spread over the 3 reps") for l in p50), "p50 table has the footnote")

mbs = table(md, "Retrieve (read phase): MB/s (10^6 bytes/s)")
c = cells(mbs, "4K", 1)
check(c[1] == "8.5 \u00b7 0.85x (0.80-0.90)", "4K QD 1 TCP MB/s (no flag): %s" % c[1])
check(c[-1] == "1.00x (0.95-1.05)" + DAGGER, "mem / Redis column flagged: %s" % c[-1])
check(cells(mbs, "4K", 16)[-1] == "1.00x (1.00-1.00)", "mem / Redis at 4K QD 16: no spread, no flag")
check(any(l.startswith(DAGGER) and "mem from Redis" in l for l in mbs), "MB/s table has the footnote")
wr = table(md, "Store (write phase): p50 latency, us")
check(not any(DAGGER in l for l in wr), "store p50 (every ratio 1.00x, no spread): no dagger, no footnote")

check("- repetitions: 3 of every point, interleaved" in md, "the header names the reps")
check("- verification: 29 runs of a point" in md and "FAILED points: tcp/4M/qd1/rep2" in md,
      "verification line counts runs and names the failed rep")
check("| TCP / librados retrieve p50, 4K QD 1 | 1.20x (1.10-1.50) | <= 1.10x | **missed**, the spread straddles "
      "the goal |" in md, "target verdict by the median, with the straddle")
check("| TCP / librados store IOPS, 4K QD 16 | 1.00x (1.00-1.00) | >= 0.95x | met |" in md, "a target met")

s = {(r["system"], r["size_arg"], r["qd_arg"], r["phase"]): r for r in summary}
t = s.get(("tcp", "4K", 1, "read"), {})
check(t.get("reps") == 3 and t.get("p50_us") == 121 and t.get("mb_s") == 8.5, "summary medians: %s" % t)
pr = t.get("p50_ratio", {})
check(abs(pr.get("median", 0) - 1.2) < 1e-9 and abs(pr.get("min", 0) - 1.1) < 1e-9 and
      abs(pr.get("max", 0) - 1.5) < 1e-9 and pr.get("n") == 3 and pr.get("flagged") is True, "summary ratio: %s" % pr)
t = s.get(("tcp", "4K", 16, "read"), {})
check(t.get("p50_ratio", {}).get("flagged") is False, "summary: 4K QD 16 not flagged")
check(s.get(("tcp", "4M", 1, "read"), {}).get("reps") == 2, "summary: 4M QD 1 TCP has 2 reps")
check("p50_ratio" not in s.get(("rados", "4K", 1, "read"), {"p50_ratio": 1}), "summary: no ratio for librados")

cpu_md = table(md, "CPU per operation")
cr = [l for l in cpu_md[cpu_md.index("### Retrieve (read phase): CPU us per operation"):
                        cpu_md.index("### Store (write phase): CPU us per operation")] if l.startswith("| 4K")]
check(cr == ["| 4K | 1 | raw librados | 100 | - | 200 | 300 | 1.00x |",
             "| 4K | 1 | rados-nkv TCP | 20.0 | 150 | 190 | 360 | 1.20x (1.19-1.21) |",
             "| 4K | 1 | rados-nkv mem TCP | 10.0 | ~12.0 | - | 22.0 | 0.07x (0.07-0.08) |"],
      "CPU retrieve rows (medians, ratio, '~', no OSD for mem, no Redis row, no QD 16 rows): %s" % cr)
cw = [l for l in cpu_md[cpu_md.index("### Store (write phase): CPU us per operation"):] if l.startswith("| 4K")]
check(cw == ["| 4K | 1 | raw librados | 50.0 | - | 400 | 450 | 1.00x |",
             "| 4K | 1 | rados-nkv TCP | 10.0 | 100 | 400 | 510 | 1.13x (1.13-1.58)" + DAGGER + " |"],
      "CPU store rows (flagged ratio): %s" % cw)
check(sum(l.startswith(DAGGER + " the ratio's spread") for l in cpu_md) == 1,
      "one dagger footnote in the CPU section (the store table's)")
check(sum(l.startswith("~ from fewer than 20 clock ticks") for l in cpu_md) == 1,
      "one '~' footnote in the CPU section (the retrieve table's)")
t = s.get(("tcp", "4K", 1, "read"), {})
check(t.get("cpu_us_per_op") == {"client": 20.0, "gw": 150.0, "osd": 190.0, "total": 360.0},
      "summary CPU medians: %s" % t.get("cpu_us_per_op"))
cr = t.get("cpu_ratio", {})
check(abs(cr.get("median", 0) - 1.2) < 1e-9 and abs(cr.get("min", 0) - 380 / 320) < 1e-9 and
      abs(cr.get("max", 0) - 340 / 280) < 1e-9 and cr.get("n") == 3 and cr.get("flagged") is False,
      "summary CPU ratio: %s" % cr)
check(s.get(("tcp", "4K", 1, "write"), {}).get("cpu_ratio", {}).get("flagged") is True, "summary: CPU store flagged")
m = s.get(("mem", "4K", 1, "read"), {}).get("cpu_us_per_op", {})
check(m.get("osd") is None and m.get("total") == 22.0, "summary: mem's OSD left out: %s" % m)
check("cpu_us_per_op" not in s.get(("redis", "4K", 1, "read"), {}) and
      "cpu_us_per_op" not in s.get(("tcp", "4K", 16, "read"), {}), "summary: no CPU where none was measured")
check("cpu_ratio" not in s.get(("rados", "4K", 1, "read"), {"cpu_ratio": 1}), "summary: no CPU ratio for librados")

# ---- one rep (no "rep" field: a run without --reps, or an older file) --------------------------------
# Without mem and Redis the footnote does not speak of their column.
md2, _ = render([row("rados", "4K", 1, k, (100.0, 10.0)) for k in (1, 2)] +
                [row("tcp", "4K", 1, k, ((95.0, 115.0)[k - 1], 8.0)) for k in (1, 2)])
check(DAGGER + " the ratio's spread over the 2 reps" in md2 and "mem from Redis" not in md2,
      "footnote without a mem / Redis column")

md1, _ = render([row("rados", "4K", 1, None, (100.0, 10.0), cpu={"read": (100.0, None, 200.0)}),
                 row("tcp", "4K", 1, None, (150.0, 8.0), cpu={"read": (20.0, 150.0, 190.0)})])
check("| 4K | 1 | rados-nkv TCP | 20.0 | 150 | 190 | 360 | 1.20x |" in md1, "one rep: the plain CPU row")
check("### Store (write phase): CPU us per operation\n\n| size | QD | system | client | gateway | OSD | total | "
      "total / librados |\n|---|---|---|---|---|---|---|---|\n\n" in md1, "one rep: a phase without CPU figures: no rows")
c = cells(table(md1, "Retrieve (read phase): p50 latency, us"), "4K", 1)
check(c == ["100", "150 (1.50x)"], "one rep: the plain cells: %s" % c)
check(DAGGER not in md1 and "repetitions" not in md1 and "- verification: 2 points," in md1,
      "one rep: no flags, no repetitions line")
check("| TCP / librados retrieve p50, 4K QD 1 | 1.50x | <= 1.10x | **missed** |" in md1, "one rep: target row")
check("CPU per operation" not in md2, "reports without CPU figures: no CPU section")

# ---- the performance goals: CPU / librados, shm against TCP, copies per byte ---------------------------
check("| TCP total CPU per op / librados, retrieve, 4K QD 1 | 1.20x (1.19-1.21) | <= 1.10x | **missed** |" in md,
      "goal row: CPU ratio over the reps")
check("| TCP total CPU per op / librados, retrieve, 4K QD 1 | 1.20x | <= 1.10x | **missed** |" in md1,
      "one rep: goal row")
tcp = row("tcp", "4K", 1, None, (150.0, 8.0), cpu={"read": (20.0, 90.0, 190.0)})
tcp["copies"] = {"h2c": {"copied": 200, "data": 100}, "c2h": {"copied": 100, "data": 100}}
shm = row("shm", "4K", 1, None, (120.0, 9.0))
shm["copies"] = {"h2c": {"copied": 100, "data": 100}, "c2h": {"copied": 1001, "data": 1000}}
md3, _ = render([row("rados", "4K", 1, None, (100.0, 10.0), cpu={"read": (100.0, None, 200.0)}), tcp, shm])
g = table(md3, "Goals: CPU per op against librados, shm against TCP, copies per byte: 8 of 9 met")
for want in ("| TCP total CPU per op / librados, retrieve, 4K QD 1 | 1.00x | <= 1.10x | met |",
             "| shm / TCP retrieve MB/s, 4K QD 1 | 1.12x | >= 1.0x | met |",
             "| shm / TCP retrieve p50, 4K QD 1 | 1.25x | >= 1.0x (TCP p50 / shm p50) | met |",
             "| shm / TCP store MB/s, 4K QD 1 | 1.00x | >= 1.0x | met |",
             "| TCP copies per byte, store, 4K QD 1 | 2.00 | <= 1.00 | **missed** |",
             "| TCP copies per byte, retrieve, 4K QD 1 | 1.00 | <= 1.00 | met |",
             "| shm copies per byte, retrieve, 4K QD 1 | 1.00 | <= 1.00 | met |"):
    check(want in g, "goal row %r in %s" % (want, g))
check("| TCP total CPU per op / librados, store, 4K QD 1 | - | <= 1.10x | not measured |" in g,
      "goal row without CPU figures: not measured, not counted")

print("bench_report_test: %d checks, %d failed" % (checks, fails))
sys.exit(1 if fails else 0)
