#!/usr/bin/env python3
"""report.py - turn bench/compare.sh's JSON lines into the results page (markdown tables with each
figure and its ratio to raw librados, the issue's targets met or missed) and gnuplot scripts for the
charts. Usage: report.py JSONL OUT.md PREFIX CMDLINE MACHINE VERSIONS ELAPSED BYTES TIME [NOTE...]"""
import json
import os
import sys

jsonl, out_md, prefix, cmdline, machine, versions, elapsed, budget, tlimit = sys.argv[1:10]
notes = sys.argv[10:]
pts = [json.loads(l) for l in open(jsonl) if l.strip()]

NAMES = {"rados": "raw librados", "tcp": "rados-nkv TCP", "shm": "rados-nkv shm", "rgw": "RGW S3",
         "mem": "rados-nkv mem TCP", "redis": "Redis"}
ORDER = [s for s in ["rados", "tcp", "shm", "rgw", "mem", "redis"] if any(p["system"] == s for p in pts)]


def size_bytes(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s)


sizes = sorted({p["size_arg"] for p in pts}, key=size_bytes)
qds = sorted({p["qd_arg"] for p in pts})
idx = {(p["system"], p["size_arg"], p["qd_arg"]): p for p in pts}


def res(sysname, size, qd, phase):
    p = idx.get((sysname, size, qd))
    if not p or not p.get("results"):
        return None
    for r in p["results"]:
        if r["phase"] == phase:
            return r
    return None


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "us":
        return "%.0f" % v if v >= 100 else "%.1f" % v
    if unit == "ops":
        return "%.0f" % v
    return "%.0f" % v if v >= 100 else "%.1f" % v


def metric(r, m):
    if r is None:
        return None
    return {"p50": r["lat_us"]["p50"], "p99": r["lat_us"]["p99"], "ops": r["ops_s"], "mbs": r["mb_s"]}[m]


def ratio(v, base, lower_better):
    if v is None or base is None or base == 0 or v == 0:
        return ""
    return " (%.2fx)" % (v / base)


L = []
L.append("# rados-nkv benchmark: %s" % os.path.basename(out_md)[:-3])
L.append("")
L.append("Command line (from the repository root):")
L.append("")
L.append("```sh\n%s\n```" % cmdline)
L.append("")
L.append("- machine: %s" % machine)
L.append("- software: %s" % versions)
L.append(("- cluster: scripts/ceph-dev.sh micro cluster (1 mon + 1 OSD, %s, size 1, loopback); every "
          "system runs on this same machine as the cluster, so client, gateway and OSD share the CPUs")
         % os.environ.get("BENCH_STORE", "bluestore on a 10 GiB sparse file"))
L.append("- workload: read-after-write per point: store N values then retrieve the same N (every value "
         "verified: header + key/version pattern), N = %s / value size, each phase also bounded to %s s "
         "(small values at low QD stop on time: the op counts show it); one connection, QD requests in "
         "flight; ratios are to raw librados at the same point (for `mem` and `Redis` too, plus mem/Redis)"
         % (budget, tlimit))
L.append("- measurement time: %s s" % elapsed)
for n in notes:
    L.append("- note: %s" % n)
bad = [p for p in pts if not p.get("ok")]
L.append("- verification: %d points, %d values retrieved and verified, %d mismatches, %d errors%s" % (
    len(pts), sum(p.get("verified", 0) for p in pts), sum(p.get("mismatches", 0) for p in pts),
    sum(p.get("errors", 0) for p in pts),
    "" if not bad else "; FAILED points: " + ", ".join("%s/%s/qd%d" % (p["system"], p["size_arg"], p["qd_arg"])
                                                       for p in bad)))
L.append("")

for phase, title in (("read", "Retrieve (read phase)"), ("write", "Store (write phase)")):
    for m, mt, unit in (("p50", "p50 latency, us", "us"), ("p99", "p99 latency, us", "us"),
                        ("ops", "operations/s", "ops"), ("mbs", "MB/s (10^6 bytes/s)", "mbs")):
        L.append("## %s: %s" % (title, mt))
        L.append("")
        hdr = "| size | QD | " + " | ".join(NAMES[s] for s in ORDER)
        if "mem" in ORDER and "redis" in ORDER:
            hdr += " | mem / Redis"
        L.append(hdr + " |")
        L.append("|---|---|" + "---|" * (len(ORDER) + (1 if "mem" in ORDER and "redis" in ORDER else 0)))
        for size in sizes:
            for qd in qds:
                base = metric(res("rados", size, qd, phase), m)
                cells = []
                for s in ORDER:
                    v = metric(res(s, size, qd, phase), m)
                    cells.append(fmt(v, unit) + ("" if s == "rados" else ratio(v, base, m in ("p50", "p99"))))
                if "mem" in ORDER and "redis" in ORDER:
                    a, b = metric(res("mem", size, qd, phase), m), metric(res("redis", size, qd, phase), m)
                    cells.append("%.2fx" % (a / b) if a and b else "-")
                L.append("| %s | %d | %s |" % (size, qd, " | ".join(cells)))
        L.append("")

# ---- the targets -------------------------------------------------------------------------------
T = []


def check(desc, val, goal, ok):
    if val is None:
        T.append("| %s | - | %s | not measured |" % (desc, goal))
    else:
        T.append("| %s | %.2fx | %s | %s |" % (desc, val, goal, "met" if ok(val) else "**missed**"))


def rat(a_sys, b_sys, size, qd, phase, m):
    a, b = metric(res(a_sys, size, qd, phase), m), metric(res(b_sys, size, qd, phase), m)
    return a / b if a and b else None


for size in sizes:
    if 1 in qds:
        check("TCP / librados retrieve p50, %s QD 1" % size, rat("tcp", "rados", size, 1, "read", "p50"),
              "<= 1.10x", lambda v: v <= 1.10)
for qd in [q for q in qds if q >= 16]:
    if "4K" in sizes:
        for ph in ("read", "write"):
            check("TCP / librados %s IOPS, 4K QD %d" % ("retrieve" if ph == "read" else "store", qd),
                  rat("tcp", "rados", "4K", qd, ph, "ops"), ">= 0.95x", lambda v: v >= 0.95)
for size in [s for s in sizes if s in ("4M", "32M")]:
    for qd in qds:
        for ph in ("read", "write"):
            check("TCP / librados %s MB/s, %s QD %d" % ("retrieve" if ph == "read" else "store", size, qd),
                  rat("tcp", "rados", size, qd, ph, "mbs"), ">= 0.95x", lambda v: v >= 0.95)
if "shm" in ORDER:
    for size in sizes:
        for qd in qds:
            check("shm / librados retrieve p50, %s QD %d" % (size, qd), rat("rados", "shm", size, qd, "read", "p50"),
                  ">= 1.0x (librados p50 / shm p50)", lambda v: v >= 1.0)
            check("shm / librados retrieve MB/s, %s QD %d" % (size, qd), rat("shm", "rados", size, qd, "read", "mbs"),
                  ">= 1.0x", lambda v: v >= 1.0)
            check("shm / librados store MB/s, %s QD %d" % (size, qd), rat("shm", "rados", size, qd, "write", "mbs"),
                  ">= 1.0x", lambda v: v >= 1.0)
if "rgw" in ORDER:
    for size in [s for s in sizes if s in ("4K", "256K")]:
        for qd in qds:
            for ph in ("read", "write"):
                check("RGW p50 / TCP p50 (%s), %s QD %d" % ("retrieve" if ph == "read" else "store", size, qd),
                      rat("rgw", "tcp", size, qd, ph, "p50"), ">= 3x", lambda v: v >= 3.0)
if "mem" in ORDER and "redis" in ORDER:
    for size in [s for s in sizes if size_bytes(s) >= 256 << 10]:
        for qd in qds:
            for ph in ("read", "write"):
                check("mem / Redis %s MB/s, %s QD %d" % ("retrieve" if ph == "read" else "store", size, qd),
                      rat("mem", "redis", size, qd, ph, "mbs"), ">= 1.0x", lambda v: v >= 1.0)
if T:
    met = sum(1 for t in T if t.endswith("| met |"))
    L.insert(L.index("## Retrieve (read phase): p50 latency, us"), "\n".join(
        ["## Targets (issue 5): %d of %d met" % (met, len(T)), "",
         "| target | measured | goal | |", "|---|---|---|---|"] + T + [""]))

# ---- charts ----------------------------------------------------------------------------------------------
charts = []
base = os.path.basename(prefix)
for s in ORDER:
    with open("%s-%s.dat" % (prefix, s), "w") as f:
        for qd in qds:
            for size in sizes:
                r, w = res(s, size, qd, "read"), res(s, size, qd, "write")
                f.write("%d %d %s %s %s %s\n" % (qd, size_bytes(size),
                                                 metric(r, "p50") or "NaN", metric(r, "mbs") or "NaN",
                                                 metric(w, "p50") or "NaN", metric(w, "mbs") or "NaN"))
            f.write("\n\n")
for kind, col, ylab, logy in (("latency", 3, "retrieve p50 latency (us, log)", True),
                              ("throughput", 4, "retrieve MB/s", False),
                              ("store-throughput", 6, "store MB/s", False)):
    png = "%s-%s.png" % (prefix, kind)
    gp = "%s-%s.gp" % (prefix, kind)
    with open(gp, "w") as f:
        f.write('set terminal pngcairo size 1500,480 font ",10"\nset output "%s"\n' % png)
        f.write("set multiplot layout 1,%d title \"%s by value size, one panel per queue depth (%s)\"\n"
                % (len(qds), ylab, base))
        f.write("set logscale x 2\nset xlabel \"value size\"\nset ylabel \"%s\"\nset grid\nset key top left\n" % ylab)
        f.write('set xtics ("4K" 4096, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304, "32M" 33554432)\n')
        f.write("set xrange [%d:%d]\n" % (size_bytes(sizes[0]) // 2, size_bytes(sizes[-1]) * 2))
        if logy:
            f.write("set logscale y 10\n")
        else:
            f.write("unset logscale y\n")
        for i, qd in enumerate(qds):
            f.write('set title "QD %d"\n' % qd)
            f.write("plot " + ", ".join('"%s-%s.dat" index %d using 2:%d with linespoints lw 2 title "%s"'
                                         % (prefix, s, i, col, NAMES[s]) for s in ORDER) + "\n")
        f.write("unset multiplot\n")
    charts.append((kind, os.path.basename(png)))

L.append("## Charts")
L.append("")
for kind, png in charts:
    L.append("![%s](%s)" % (kind, png))
    L.append("")
L.append("Raw reports (one JSON object per point, as the harnesses print them): `%s`." % os.path.basename(jsonl))
open(out_md, "w").write("\n".join(L) + "\n")
