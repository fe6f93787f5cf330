#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""report.py - turn bench/compare.sh's JSON lines into the results page (markdown tables with each
figure and its ratio to raw librados, the issue's targets met or missed), PREFIX-summary.jsonl (the
aggregated figures, one object per point, system and phase) and gnuplot scripts for the charts.
Usage: report.py JSONL OUT.md PREFIX CMDLINE MACHINE VERSIONS ELAPSED BYTES TIME [NOTE...]

With several repetitions (compare.sh --reps N: every row carries "rep"), each figure is the median
over the reps and each ratio is the median of the per-rep ratios (system / raw librados of the same
rep: compare.sh interleaves the reps, so both figures of a pair were measured close in time) with its
min-max; a ratio whose spread (max - min) is wider than its gap (|1 - median|) is flagged: that run
cannot tell the two apart at that point.

"CPU per operation": per phase (store, retrieve), the client's CPU time per operation (the harness's
getrusage), the gateway's and the OSD's (the harness's watch=: /proc/PID/stat around the phase), their
total and its ratio to raw librados' total, with the same medians and per-rep ratios.

"Copies and gateway CPU per MiB": for rados-nkv's systems, the bytes its gateway copied per byte it
served (the daemon's rados_nkv_copied_bytes_total over rados_nkv_data_bytes_total, read before and after
each point: h2c for the store phase, c2h for the retrieve phase) and the gateway's CPU per MiB moved
(its CPU per op of the phase / the value size), medians over the reps with their min-max.

"Goals": at every point, rados-nkv's total CPU per op over raw librados' (at most 1.10x), shared memory's
throughput and p50 against NVMe/TCP's of the same rep (at least 1.0x), and copies per byte (at most 1)."""
import json
import os
import statistics
import sys

jsonl, out_md, prefix, cmdline, machine, versions, elapsed, budget, tlimit = sys.argv[1:10]
notes = sys.argv[10:]
pts = [json.loads(l) for l in open(jsonl) if l.strip()]
for p in pts:
    p.setdefault("rep", 1)  # rows from a run without --reps (and older .jsonl files) are rep 1

NAMES = {"rados": "raw librados", "tcp": "rados-nkv TCP", "shm": "rados-nkv shm",
         "shmpoll": "rados-nkv shm, polling", "rgw": "RGW S3", "mem": "rados-nkv mem TCP", "redis": "Redis"}
ORDER = [s for s in ["rados", "tcp", "shm", "shmpoll", "rgw", "mem", "redis"] if any(p["system"] == s for p in pts)]
REPS = sorted({p["rep"] for p in pts})
MULTI = len(REPS) > 1  # one rep: the page looks as it always did (no medians, no spreads)
FLAG = "\u2020"  # dagger: the ratio's spread over the reps is wider than its gap to 1.00x


def size_bytes(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s)


sizes = sorted({p["size_arg"] for p in pts}, key=size_bytes)
qds = sorted({p["qd_arg"] for p in pts})
idx = {(p["system"], p["size_arg"], p["qd_arg"], p["rep"]): p for p in pts}


def res(sysname, size, qd, phase, rep):
    """One rep's result of one phase, or None when that run has none."""
    p = idx.get((sysname, size, qd, rep))
    if not p or not p.get("results"):
        return None
    for r in p["results"]:
        if r["phase"] == phase:
            return r
    return None


def metric(r, m):
    if r is None:
        return None
    return {"p50": r["lat_us"]["p50"], "p99": r["lat_us"]["p99"], "ops": r["ops_s"], "mbs": r["mb_s"]}[m]


def med(sysname, size, qd, phase, m):
    """The median of a metric over the reps that measured it (None when none did)."""
    vs = [v for v in (metric(res(sysname, size, qd, phase, k), m) for k in REPS) if v is not None]
    return statistics.median(vs) if vs else None


class Ratio:
    """Per-rep ratios a/b of one point (pairs from the same rep only): median, min, max, count."""

    def __init__(self, vals):
        self.n = len(vals)
        self.med, self.lo, self.hi = statistics.median(vals), min(vals), max(vals)

    def flagged(self):
        # the run cannot tell the two apart: the ratio moved more between reps than its distance from 1
        return self.n > 1 and self.hi - self.lo > abs(1.0 - self.med)

    def text(self):
        """'0.86x (0.81-0.92)' (a marker when flagged, the count when some reps lack the pair)."""
        if not MULTI:
            return "%.2fx" % self.med
        t = "%.2fx (%.2f-%.2f)" % (self.med, self.lo, self.hi)
        if self.n < len(REPS):
            t += " [%d of %d reps]" % (self.n, len(REPS))
        return t + (FLAG if self.flagged() else "")


def ratio_of(a_sys, b_sys, size, qd, phase, m):
    """Ratio of a_sys's metric to b_sys's at one point over the reps, or None if no rep has both."""
    vals = []
    for k in REPS:
        a = metric(res(a_sys, size, qd, phase, k), m)
        b = metric(res(b_sys, size, qd, phase, k), m)
        if a and b:
            vals.append(a / b)
    return Ratio(vals) if vals else None


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "us":
        return "%.0f" % v if v >= 100 else "%.1f" % v
    if unit == "ops":
        return "%.0f" % v
    return "%.0f" % v if v >= 100 else "%.1f" % v


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
if MULTI:
    L.append("- repetitions: %d of every point, interleaved (rep 1 of every point and system, then rep 2, ...; "
             "each rep starts the systems at a different one of them); every figure is the median over the "
             "reps; a ratio is the median of the per-rep ratios (each rep's figure over the other system's "
             "figure of the same rep) followed by their min-max; %s marks a ratio whose spread (max - min) is "
             "wider than its gap (|1 - median|): this run cannot tell the two apart there" % (len(REPS), FLAG))
L.append("- measurement time: %s s" % elapsed)
for n in notes:
    L.append("- note: %s" % n)
bad = [p for p in pts if not p.get("ok")]


def where(p):
    return "%s/%s/qd%d%s" % (p["system"], p["size_arg"], p["qd_arg"], "/rep%d" % p["rep"] if MULTI else "")


L.append("- verification: %d %s, %d values retrieved and verified, %d mismatches, %d errors%s" % (
    len(pts), "runs of a point" if MULTI else "points", sum(p.get("verified", 0) for p in pts),
    sum(p.get("mismatches", 0) for p in pts), sum(p.get("errors", 0) for p in pts),
    "" if not bad else "; FAILED points: " + ", ".join(where(p) for p in bad)))
L.append("")
FOOT = ("%s the ratio's spread over the %d reps (max - min) is wider than its gap to 1.00x (|1 - median|): "
        "this run cannot tell the system from raw librados%s at that point." % (
            FLAG, len(REPS), " (in the mem / Redis column: mem from Redis)" if "mem" in ORDER and "redis" in ORDER
            else ""))

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
        flagged = False
        for size in sizes:
            for qd in qds:
                cells = []
                for s in ORDER:
                    c = fmt(med(s, size, qd, phase, m), unit)
                    r = None if s == "rados" else ratio_of(s, "rados", size, qd, phase, m)
                    if r:
                        c += (" (%s)" if not MULTI else " \u00b7 %s") % r.text()
                        flagged |= r.flagged()
                    cells.append(c)
                if "mem" in ORDER and "redis" in ORDER:
                    r = ratio_of("mem", "redis", size, qd, phase, m)
                    cells.append(r.text() if r else "-")
                    flagged |= bool(r and r.flagged())
                L.append("| %s | %d | %s |" % (size, qd, " | ".join(cells)))
        L.append("")
        if flagged:
            L.append(FOOT)
            L.append("")

# ---- CPU per operation ---------------------------------------------------------------------------------
# Who is on each system's path: the OSD serves every system but mem and Redis (its CPU over their points is
# its background work, left out of their totals); raw librados has no gateway (its client is librados).
ON_OSD = {"rados", "tcp", "shm", "rgw"}
HAS_GW = {"tcp", "shm", "rgw", "mem", "redis"}
COARSE = 20  # ticks: a gateway / OSD figure from fewer is marked (more than +-5 % from the tick cut alone)


def cpu(r, sysname):
    """One rep's CPU per op of a phase result: {client, gw, osd, total} in us (None: not measured), or None."""
    if r is None or r.get("cpu_us_per_op") is None:
        return None
    w = r.get("watch") or {}

    def of(k):
        return (w.get(k) or {}).get("us_per_op")

    def coarse(k):
        # fewer than COARSE ticks of that process in the phase: each end is cut to a whole tick
        x = w.get(k) or {}
        return x.get("cpu_s") is not None and x.get("tick_s") and x["cpu_s"] < COARSE * x["tick_s"]
    c = {"client": r["cpu_us_per_op"], "gw": of("gw") if sysname in HAS_GW else None,
         "osd": of("osd") if sysname in ON_OSD else None}
    missing = (sysname in HAS_GW and c["gw"] is None) or (sysname in ON_OSD and c["osd"] is None)
    c["total"] = None if missing else sum(v for v in c.values() if v is not None)
    c["coarse"] = {"gw": bool(sysname in HAS_GW and coarse("gw")), "osd": bool(sysname in ON_OSD and coarse("osd"))}
    return c


def cpu_med(sysname, size, qd, phase, part):
    vs = [c[part] for c in (cpu(res(sysname, size, qd, phase, k), sysname) for k in REPS)
          if c and c[part] is not None]
    return statistics.median(vs) if vs else None


def cpu_cell(sysname, size, qd, phase, part):
    """The median, marked '~' when some rep's figure came from fewer than COARSE clock ticks."""
    t = fmt(cpu_med(sysname, size, qd, phase, part), "us")
    if part in ("gw", "osd") and any(c and c["coarse"][part] for c in (cpu(res(sysname, size, qd, phase, k), sysname)
                                                                       for k in REPS)):
        t = "~" + t
    return t


def cpu_ratio(sysname, size, qd, phase):
    """Per-rep ratios of a system's total CPU per op to raw librados' (same rep), or None."""
    vals = []
    for k in REPS:
        a, b = cpu(res(sysname, size, qd, phase, k), sysname), cpu(res("rados", size, qd, phase, k), "rados")
        if a and b and a["total"] is not None and b["total"]:
            vals.append(a["total"] / b["total"])
    return Ratio(vals) if vals else None


if any(cpu(r, p["system"]) for p in pts for r in p.get("results") or []):
    L.append("## CPU per operation")
    L.append("")
    L.append("CPU time (user + system, every thread) per operation of the phase, in us: the client process "
             "(for raw librados that includes librados' own threads), the gateway serving the system "
             "(rados-nkv, radosgw, redis-server) and the OSD, each sampled just before the phase's first "
             "operation and after its last; total = their sum, and its ratio to raw librados' total. The OSD "
             "is not on the mem and Redis paths (`-`, not in their totals). Gateway and OSD figures come in "
             "whole clock ticks (`getconf CLK_TCK`; 10 ms at 100 Hz): few ticks in a phase make them coarse. "
             "Kernel work done in softirq context (loopback TCP delivery) is charged to whichever process "
             "was running (or, with CONFIG_IRQ_TIME_ACCOUNTING, to none), so part of one side's network cost "
             "can land on the other; see docs/benchmarks.md.")
    L.append("")
    for phase, title in (("read", "Retrieve (read phase)"), ("write", "Store (write phase)")):
        L.append("### %s: CPU us per operation" % title)
        L.append("")
        L.append("| size | QD | system | client | gateway | OSD | total | total / librados |")
        L.append("|---|---|---|---|---|---|---|---|")
        flagged = coarse = False
        for size in sizes:
            for qd in qds:
                for s in ORDER:
                    if not any(cpu(res(s, size, qd, phase, k), s) for k in REPS):
                        continue
                    r = None if s == "rados" else cpu_ratio(s, size, qd, phase)
                    flagged |= bool(r and r.flagged())
                    row = [cpu_cell(s, size, qd, phase, part) for part in ("client", "gw", "osd", "total")]
                    coarse |= any(c.startswith("~") for c in row)
                    L.append("| %s | %d | %s | %s | %s |" % (
                        size, qd, NAMES[s], " | ".join(row), "1.00x" if s == "rados" else (r.text() if r else "-")))
        L.append("")
        if coarse:
            L.append("~ from fewer than %d clock ticks of that process in the phase (in at least one rep): the "
                     "tick cut at either end alone can move it by more than 5 %%." % COARSE)
            L.append("")
        if flagged:
            L.append(FOOT.replace(" (in the mem / Redis column: mem from Redis)", ""))
            L.append("")

# ---- copies per byte and gateway CPU per MiB -------------------------------------------------------------
COPY_DIR = {"write": "h2c", "read": "c2h"}  # the store phase moves data to the gateway, retrieve back


def copies_per_byte(sysname, size, qd, phase, rep):
    """One rep's bytes copied per byte served by the gateway in a phase, or None (no counters, no data)."""
    p = idx.get((sysname, size, qd, rep))
    c = ((p or {}).get("copies") or {}).get(COPY_DIR[phase])
    return c["copied"] / c["data"] if c and c.get("data") else None


def gw_us_per_mib(sysname, size, qd, phase, rep):
    c = cpu(res(sysname, size, qd, phase, rep), sysname)
    return c["gw"] / (size_bytes(size) / float(1 << 20)) if c and c["gw"] is not None else None


class Spread:
    """Median and min-max over the reps of one figure (not a ratio: never flagged)."""

    def __init__(self, vals):
        self.n, self.med, self.lo, self.hi = len(vals), statistics.median(vals), min(vals), max(vals)

    def text(self, f):
        if not MULTI:
            return f % self.med
        return (f + " (" + f + "-" + f + ")") % (self.med, self.lo, self.hi)

    def json(self):
        return {"median": self.med, "min": self.lo, "max": self.hi, "n": self.n}


def spread(fn, sysname, size, qd, phase):
    vs = [v for v in (fn(sysname, size, qd, phase, k) for k in REPS) if v is not None]
    return Spread(vs) if vs else None


COPY_SYS = [s for s in ORDER if s in ("tcp", "shm", "shmpoll", "mem")]
if any(spread(copies_per_byte, s, size, qd, ph) for s in COPY_SYS for size in sizes for qd in qds
       for ph in COPY_DIR):
    L.append("## Copies and gateway CPU per MiB")
    L.append("")
    L.append("Bytes the rados-nkv gateway copied from one buffer into another per byte it served "
             "(`rados_nkv_copied_bytes_total` / `rados_nkv_data_bytes_total` of the system's transport, "
             "read before and after each point: docs/operations.md, \"Metrics\", says which copies count; "
             "the kernel's socket copies do not), and the gateway's CPU per MiB moved (its CPU per operation "
             "above / the value size), in us%s." % (": median (min-max) over the reps" if MULTI else ""))
    L.append("")
    L.append("| size | QD | system | Store: copies per byte | Store: gateway us per MiB | Retrieve: copies per byte "
             "| Retrieve: gateway us per MiB |")
    L.append("|---|---|---|---|---|---|---|")
    for size in sizes:
        for qd in qds:
            for s in COPY_SYS:
                cells = []
                for ph in ("write", "read"):
                    c, g = spread(copies_per_byte, s, size, qd, ph), spread(gw_us_per_mib, s, size, qd, ph)
                    cells += [c.text("%.2f") if c else "-", g.text("%.0f") if g else "-"]
                if any(x != "-" for x in cells):
                    L.append("| %s | %d | %s | %s |" % (size, qd, NAMES[s], " | ".join(cells)))
    L.append("")

# ---- the targets -------------------------------------------------------------------------------
T = []


MET = []


def check(desc, r, goal, ok, rows=T, mets=MET, unit="x"):
    """One target row; r is a Ratio or Spread (met or missed by its median) or None (not measured)."""
    if r is None:
        rows.append("| %s | - | %s | not measured |" % (desc, goal))
        return
    met = ok(r.med)
    mets.append(met)
    verdict = "met" if met else "**missed**"
    if MULTI and ok(r.lo) != ok(r.hi):
        verdict += ", the spread straddles the goal"  # another run could well come out the other way
    measured = ("%.2f" + unit + " (%.2f-%.2f)") % (r.med, r.lo, r.hi) if MULTI else ("%.2f" + unit) % r.med
    rows.append("| %s | %s | %s | %s |" % (desc, measured, goal, verdict))


rat = ratio_of


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
    met = sum(MET)
    L.insert(L.index("## Retrieve (read phase): p50 latency, us"), "\n".join(
        ["## Targets (issue 5): %d of %d met" % (met, len(T)), "",
         "| target | measured | goal | |", "|---|---|---|---|"] + T + [""]))

# ---- the performance goals: CPU against librados, shm against TCP, copies per byte ------------------------
G, GMET = [], []
PH = (("read", "retrieve"), ("write", "store"))
SHORT = {"tcp": "TCP", "shm": "shm"}
for size in sizes:
    for qd in qds:
        for s in [x for x in ("tcp", "shm") if x in ORDER]:
            for ph, op in PH:
                check("%s total CPU per op / librados, %s, %s QD %d" % (SHORT[s], op, size, qd),
                      cpu_ratio(s, size, qd, ph), "<= 1.10x", lambda v: v <= 1.10, G, GMET)
        if "shm" in ORDER and "tcp" in ORDER:
            for ph, op in PH:
                check("shm / TCP %s MB/s, %s QD %d" % (op, size, qd), rat("shm", "tcp", size, qd, ph, "mbs"),
                      ">= 1.0x", lambda v: v >= 1.0, G, GMET)
                check("shm / TCP %s p50, %s QD %d" % (op, size, qd), rat("tcp", "shm", size, qd, ph, "p50"),
                      ">= 1.0x (TCP p50 / shm p50)", lambda v: v >= 1.0, G, GMET)
        for s in [x for x in ("tcp", "shm") if x in COPY_SYS]:
            for ph, op in PH:
                # counted to the byte: 1.0012 is a few PDUs' data that arrived while another's was due
                check("%s copies per byte, %s, %s QD %d" % (SHORT[s], op, size, qd),
                      spread(copies_per_byte, s, size, qd, ph), "<= 1.00", lambda v: v < 1.005, G, GMET, "")
if GMET:
    L.insert(L.index("## Retrieve (read phase): p50 latency, us"), "\n".join(
        ["## Goals: CPU per op against librados, shm against TCP, copies per byte: %d of %d met"
         % (sum(GMET), len(GMET)), "",
         "Total CPU per operation (client + gateway + OSD, \"CPU per operation\" below) over raw librados' at the "
         "same point, shared memory's throughput and p50 against NVMe/TCP's of the same rep, and the bytes the "
         "gateway copied per byte served (\"Copies and gateway CPU per MiB\").", "",
         "| goal | measured | target | |", "|---|---|---|---|"] + G + [""]))

# ---- charts ----------------------------------------------------------------------------------------------
charts = []
base = os.path.basename(prefix)
for s in ORDER:
    with open("%s-%s.dat" % (prefix, s), "w") as f:
        for qd in qds:
            for size in sizes:
                f.write("%d %d %s %s %s %s\n" % (qd, size_bytes(size),
                                                 med(s, size, qd, "read", "p50") or "NaN",
                                                 med(s, size, qd, "read", "mbs") or "NaN",
                                                 med(s, size, qd, "write", "p50") or "NaN",
                                                 med(s, size, qd, "write", "mbs") or "NaN"))
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
L.append("Raw reports (one JSON object per point%s, as the harnesses print them): `%s`; the aggregated "
         "figures, one object per point, system and phase: `%s`." % (
             " and rep" if MULTI else "", os.path.basename(jsonl), os.path.basename(prefix) + "-summary.jsonl"))
open(out_md, "w").write("\n".join(L) + "\n")

# ---- the aggregated figures, machine-readable ----------------------------------------------------------------
with open(prefix + "-summary.jsonl", "w") as f:
    for size in sizes:
        for qd in qds:
            for s in ORDER:
                for phase in ("write", "read"):
                    row = {"system": s, "size_arg": size, "qd_arg": qd, "phase": phase,
                           "reps": sum(1 for k in REPS if res(s, size, qd, phase, k))}
                    if not row["reps"]:
                        continue
                    for m, key in (("p50", "p50_us"), ("p99", "p99_us"), ("ops", "ops_s"), ("mbs", "mb_s")):
                        row[key] = med(s, size, qd, phase, m)
                    if s != "rados":
                        for m, key in (("p50", "p50_ratio"), ("mbs", "mb_s_ratio")):
                            r = ratio_of(s, "rados", size, qd, phase, m)
                            if r:
                                row[key] = {"median": r.med, "min": r.lo, "max": r.hi, "n": r.n,
                                            "flagged": r.flagged()}
                    if any(cpu(res(s, size, qd, phase, k), s) for k in REPS):
                        row["cpu_us_per_op"] = {part: cpu_med(s, size, qd, phase, part)
                                                for part in ("client", "gw", "osd", "total")}
                        r = cpu_ratio(s, size, qd, phase) if s != "rados" else None
                        if r:
                            row["cpu_ratio"] = {"median": r.med, "min": r.lo, "max": r.hi, "n": r.n,
                                                "flagged": r.flagged()}
                    for key, fn in (("copies_per_byte", copies_per_byte), ("gw_cpu_us_per_mib", gw_us_per_mib)):
                        sp = spread(fn, s, size, qd, phase) if s in COPY_SYS else None
                        if sp:
                            row[key] = sp.json()
                    f.write(json.dumps(row) + "\n")
