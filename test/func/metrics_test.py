#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""metrics_test.py - the daemon's Prometheus endpoint (--metrics) end to end.

Starts rados-nkv with --metrics 127.0.0.1:0 (the port read from its log), runs known commands with
`nkv` and checks every sample of the scrape, parsed with prometheus_client's own text parser:
commands by opcode and status class, bytes, latency histogram counts, namespace gauges; then
connections, controllers, I/O queues and queue depth while `nkv bench` holds connections over
NVMe/TCP and shared memory; 404/405 for anything but GET /metrics; on mem, slow clients that hold
every connection slot while scrapes must get through (slowloris()); a clean exit.

    metrics_test.py PATH/rados-nkv PATH/nkv mem|rados

rados needs NKV_CEPH_CONF (NKV_CEPH_USER, NKV_CEPH_KEYRING, NKV_CEPH_POOL as the other tests);
without it: exit 77, or 1 with NKV_REQUIRE_RADOS=1. Prints "ok - ..." / "FAIL - ..." lines and
"N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_check  # noqa: E402
from daemon_check import check, finish  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("skip: python3-prometheus-client is not installed (scripts/deps.sh)")
    sys.exit(77)

DAEMON, NKV, BACKEND = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "mem")
pool = os.environ.get("NKV_CEPH_POOL", "nkv")
args = daemon_check.backend_args(BACKEND)

tmp = tempfile.mkdtemp(prefix="nkv-metrics.")
tag = "m%d" % os.getpid()
A = "nqn.2026-12.io.rados-nkv:metrics-a-" + tag   # the counted commands
B = "nqn.2026-12.io.rados-nkv:metrics-b-" + tag   # bench load, for the connection gauges
shm = os.path.join(tmp, "b.sock")
log_path = os.path.join(tmp, "d.log")
cmd = [DAEMON] + args + ["-l", "127.0.0.1:0", "-d", "none", "--control", "none", "--metrics", "127.0.0.1:0",
                         "--pid-file", os.path.join(tmp, "pid"), "--log-level", "info",
                         "-s", A, "-p", pool, "--ns", "1:%s-1" % tag, "--ns", "2:%s-2:4K" % tag,
                         "--ns", "3:%s-3::ro" % tag,
                         "-s", B, "-p", pool, "--ns", "1:%s-b" % tag, "--shm", shm]
logf = open(log_path, "w")
daemon = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)


def cleanup():
    if daemon.poll() is None:
        daemon.kill()
        daemon.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def log_text():
    with open(log_path) as f:
        return f.read()


def fail_start(why):
    check(False, why)
    sys.stdout.write(log_text())
    cleanup()
    finish(1)


mport = tport = None
deadline = time.time() + 60
while time.time() < deadline and daemon.poll() is None and not (os.path.exists(os.path.join(tmp, "pid")) and os.path.getsize(os.path.join(tmp, "pid")) > 0):
    time.sleep(0.05)
text = log_text()
m = re.search(r"metrics on 127\.0\.0\.1:(\d+) ", text)
t = re.search(r"NVMe/TCP on 127\.0\.0\.1:(\d+)", text)
if daemon.poll() is not None or not m or not t:
    fail_start("the daemon starts and logs its metrics and NVMe/TCP ports")
mport, tport = int(m.group(1)), int(t.group(1))
check(mport > 0 and mport != tport, "the metrics port is logged (%d)" % mport)
URL = "http://127.0.0.1:%d" % mport


def http(path, method="GET"):
    req = urllib.request.Request(URL + path, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape():
    """{(name, frozenset(labels)): value} of every sample, and the families by name."""
    status, headers, body = http("/metrics")
    if status != 200:
        raise RuntimeError("GET /metrics: HTTP %d" % status)
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    samples = {}
    for f in fams.values():
        for s in f.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, fams, headers, body


def val(samples, name, **labels):
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def slowloris():
    """4 connections from each of 127.0.0.2-5 that send a request line, then a header line every
    second, reconnecting when closed (every slot the endpoint has), after one more from 127.0.0.6
    that never reconnects. A scrape from 127.0.0.1 must get through at once (a new connection makes
    room), and the lone trickling connection must be closed by the 5 s request deadline although
    it is never idle."""
    import select
    import socket
    import threading
    hdr = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"

    def open_slow(src):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.bind((src, 0))
        s.connect(("127.0.0.1", mport))
        s.sendall(hdr)
        return s

    def gone(s):
        """The server closed @s (end of stream or reset)? Never waits."""
        if not select.select([s], [], [], 0)[0]:
            return False
        try:
            return s.recv(4096) == b""
        except OSError:
            return True

    stop = threading.Event()
    socks = {}
    stats = {"opened": 0, "closed": 0, "lone_closed": None}

    def attacker():
        while not stop.is_set():
            if stats["lone_closed"] is None:  # never idle: a line a second
                try:
                    if gone(lone):
                        stats["lone_closed"] = time.time() - t_lone
                    else:
                        lone.sendall(b"X-b: c\r\n")
                except OSError:
                    stats["lone_closed"] = time.time() - t_lone
            for src in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
                for i in range(4):
                    s = socks.get((src, i))
                    try:
                        if s is not None and gone(s):
                            stats["closed"] += 1
                            s.close()
                            s = socks[(src, i)] = None
                        if s is None:
                            socks[(src, i)] = open_slow(src)
                            stats["opened"] += 1
                        else:
                            s.sendall(b"X-a: b\r\n")
                    except OSError:
                        if socks.get((src, i)) is not None:
                            socks[(src, i)].close()
                        socks[(src, i)] = None
            stop.wait(1.0)

    lone = open_slow("127.0.0.6")  # before the others: it has a slot on any version
    t_lone = time.time()
    th = threading.Thread(target=attacker, daemon=True)
    th.start()
    try:
        t0 = time.time()
        while stats["opened"] < 16 and time.time() - t0 < 10:
            time.sleep(0.05)
        check(stats["opened"] >= 16, "slow clients: 16 connections from 127.0.0.2-5 open (%d)" % stats["opened"])
        # scrapes from 127.0.0.1 while they hold every slot
        ok, first, t1 = 0, None, time.time()
        for _ in range(3):
            while True:
                try:
                    code, _, body = http("/metrics")
                    if code == 200 and "rados_nkv_" in body:
                        ok += 1
                        first = first or time.time() - t1
                        break
                except (OSError, urllib.error.URLError):
                    pass
                if time.time() - t1 > 10:
                    break
                time.sleep(0.5)
            time.sleep(1)
        check(first is not None and first < 8, "a scrape from 127.0.0.1 gets through while 16 slow clients "
              "hold the slots (after %s s)" % (None if first is None else round(first, 2)))
        check(ok == 3, "every one of 3 scrapes gets through (%d)" % ok)
        # the lone slow client: a header line every second, so never idle, closed at the deadline
        while stats["lone_closed"] is None and time.time() - t_lone < 15:
            time.sleep(0.1)
        closed_at = stats["lone_closed"]
        check(closed_at is not None and closed_at >= 4, "a client that sends a header line every second is "
              "closed by the 5 s request deadline (after %s s)" % (None if closed_at is None else round(closed_at, 1)))
        check("no complete request and response within 5 s" in log_text(), "the daemon says why")
    finally:
        stop.set()
        th.join()
        for s in socks.values():
            if s is not None:
                s.close()
        lone.close()


def nkv(*a, nsid=1, nqn=A, stdin=None, transport=None):
    c = [NKV, "-a", "127.0.0.1", "-s", str(tport), "-n", nqn, "--nsid", str(nsid), "--timeout", "20000"]
    if transport:
        c = [NKV, "-t", transport, "--nsid", str(nsid), "--timeout", "20000"]
    p = subprocess.run(c + list(a), input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout


try:
    # ---- before any command: the families, every counter at zero, the content type ----
    samples, fams, headers, body = scrape()
    check(headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
          "Content-Type text/plain; version=0.0.4 (%s)" % headers.get("Content-Type"))
    check(all(("# HELP " + n) in body and ("# TYPE " + n) in body for n in
              ("rados_nkv_commands_total", "rados_nkv_command_latency_seconds", "rados_nkv_transport_connections")),
          "HELP and TYPE lines")
    check(val(samples, "rados_nkv_build_info", version=re.search(r'version="([^"]+)"', body).group(1)) == 1,
          "rados_nkv_build_info")
    check(val(samples, "rados_nkv_metrics_namespaces_omitted") == 0, "no namespace omitted")
    zero = [k for k, v in samples.items() if k[0] == "rados_nkv_commands_total" and v != 0]
    check(not zero and val(samples, "rados_nkv_commands_total", subsystem=A, nsid=1, opcode="store",
                           status="success") == 0, "every command counter starts at 0")
    check(fams["rados_nkv_command_latency_seconds"].type == "histogram" and
          fams["rados_nkv_commands"].type == "counter", "types: histogram, counter")
    check(val(samples, "rados_nkv_transport_connections", transport="tcp") == 0 and
          val(samples, "rados_nkv_transport_connections", transport="shm") == 0, "no connection yet")

    # ---- known commands on subsystem A ----
    sizes = [1000, 1500, 2000, 2500, 3000]
    vals = {}
    for i, n in enumerate(sizes):
        vals["k%d" % i] = bytes((i * 7 + j) & 0xff for j in range(n))
        rc, _ = nkv("store", "k%d" % i, "-", stdin=vals["k%d" % i])
        check(rc == 0, "store k%d (%d bytes)" % (i, n))
    rc, out = nkv("retrieve", "k0", "-")
    check(rc == 0 and out == vals["k0"], "retrieve k0")
    rc, out = nkv("retrieve", "k3", "-")
    check(rc == 0 and out == vals["k3"], "retrieve k3")
    for k in ("nope1", "nope2"):
        rc, _ = nkv("retrieve", k, "-")
        check(rc == 2, "retrieve %s: not found (exit %d)" % (k, rc))
    rc, out = nkv("retrieve", "k1", "-", "--offset", "100")
    check(rc == 0 and out == vals["k1"][100:], "retrieve k1 from byte 100 (Retrieve Range)")
    rc, _ = nkv("exist", "k2")
    check(rc == 0, "exist k2")
    rc, _ = nkv("exist", "nope3")
    check(rc == 2, "exist nope3: absent (exit %d)" % rc)
    rc, _ = nkv("store", "--must-not-exist", "k2", "-", stdin=b"again")
    check(rc == 3, "store --must-not-exist k2: exists (exit %d)" % rc)
    rc, _ = nkv("delete", "k4")
    check(rc == 0, "delete k4")
    rc, _ = nkv("delete", "nope4")
    check(rc == 2, "delete an absent key: not found (EDNEK is set by default) (exit %d)" % rc)
    rc, out = nkv("list")
    keys = out.decode().split()
    check(rc == 0 and keys == ["k0", "k1", "k2", "k3"], "list: %s" % keys)
    # namespace 2 (max value 4 KiB): one Store that fits, one too large
    rc, _ = nkv("store", "small", "-", stdin=b"s" * 4096, nsid=2)
    check(rc == 0, "store 4096 bytes on nsid 2")
    rc, _ = nkv("store", "big", "-", stdin=b"b" * 5000, nsid=2)
    check(rc == 1, "store 5000 bytes on nsid 2 (max 4 KiB): refused (exit %d)" % rc)
    # namespace 3 is read-only
    rc, _ = nkv("store", "ro", "-", stdin=b"x", nsid=3)
    check(rc == 1, "store on the read-only nsid 3: refused (exit %d)" % rc)

    list_bytes = 4 + 4 * 4   # NRK + four entries of a 2-byte key: (2 + 2 + 3) & ~3 = 4 each
    expect = {  # (nsid, opcode, status) -> commands; every other counter must be 0
        (1, "store", "success"): 5, (1, "store", "exists"): 1,
        (1, "retrieve", "success"): 2, (1, "retrieve", "not_found"): 2,
        (1, "retrieve_range", "success"): 1,
        (1, "exist", "success"): 1, (1, "exist", "not_found"): 1,
        (1, "delete", "success"): 1, (1, "delete", "not_found"): 1,
        (1, "list", "success"): 1,
        (2, "store", "success"): 1, (2, "store", "size"): 1,
        (3, "store", "refused"): 1,
    }
    rbytes = {(1, "retrieve"): 1000 + 2500, (1, "retrieve_range"): 1500 - 100, (1, "list"): list_bytes}
    wbytes = {(1, "store"): sum(sizes), (2, "store"): 4096}
    groups = {}
    for (ns, op, st), n in expect.items():
        g = "store" if op == "store" else "retrieve" if op in ("retrieve", "retrieve_range") else "other"
        groups[(ns, g)] = groups.get((ns, g), 0) + n

    samples, fams, _, body = scrape()
    seen = {}
    for (name, lbl), v in samples.items():
        d = dict(lbl)
        if d.get("subsystem") != A:
            continue
        if name == "rados_nkv_commands_total":
            seen[(int(d["nsid"]), d["opcode"], d["status"])] = v
    wrong = {k: (seen.get(k, 0), expect.get(k, 0)) for k in set(seen) | set(expect)
             if seen.get(k, 0) != expect.get(k, 0)}
    check(not wrong, "every rados_nkv_commands_total of subsystem A as done (%d series; wrong: %s)" % (len(seen), wrong))
    for ns in (1, 2, 3):
        for op in ("store", "retrieve", "retrieve_range", "delete", "exist", "list", "exec", "other"):
            r = val(samples, "rados_nkv_read_bytes_total", subsystem=A, nsid=ns, opcode=op)
            w = val(samples, "rados_nkv_written_bytes_total", subsystem=A, nsid=ns, opcode=op)
            if (r or 0) != rbytes.get((ns, op), 0) or (w or 0) != wbytes.get((ns, op), 0):
                check(False, "bytes of nsid %d %s: read %s (want %d), written %s (want %d)" % (
                    ns, op, r, rbytes.get((ns, op), 0), w, wbytes.get((ns, op), 0)))
                break
        else:
            check(True, "read and written bytes of nsid %d by opcode" % ns)
    for ns in (1, 2, 3):
        for g in ("store", "retrieve", "other"):
            cnt = val(samples, "rados_nkv_command_latency_seconds_count", subsystem=A, nsid=ns, op_group=g)
            inf = val(samples, "rados_nkv_command_latency_seconds_bucket", subsystem=A, nsid=ns, op_group=g, le="+Inf")
            tot = val(samples, "rados_nkv_command_latency_seconds_sum", subsystem=A, nsid=ns, op_group=g)
            buckets = sorted((float(dict(l)["le"]), v) for (n, l), v in samples.items()
                             if n == "rados_nkv_command_latency_seconds_bucket" and dict(l).get("subsystem") == A
                             and dict(l).get("nsid") == str(ns) and dict(l).get("op_group") == g)
            mono = all(buckets[i][1] <= buckets[i + 1][1] for i in range(len(buckets) - 1))
            want = groups.get((ns, g), 0)
            check(cnt == want and inf == want and mono and len(buckets) == 22 and
                  ((0 < tot < want * 20) if want else tot == 0),
                  "latency histogram nsid %d %s: count %s = %d commands, +Inf %s, 22 cumulative buckets, sum %s s"
                  % (ns, g, cnt, want, inf, tot))
    check(buckets[0][0] == 8e-06 and abs(buckets[-2][0] - 8.388608) < 1e-9, "bucket bounds 8 us .. 8.388608 s, +Inf")
    check(all(val(samples, "rados_nkv_namespace_in_flight", subsystem=A, nsid=n) == 0 for n in (1, 2, 3)),
          "nothing in flight")
    check(val(samples, "rados_nkv_namespace_max_value_bytes", subsystem=A, nsid=2) == 4096 and
          val(samples, "rados_nkv_namespace_max_value_bytes", subsystem=A, nsid=1) == 64 << 20, "max value gauges")
    check(val(samples, "rados_nkv_namespace_read_only", subsystem=A, nsid=3) == 1 and
          val(samples, "rados_nkv_namespace_read_only", subsystem=A, nsid=1) == 0, "read-only gauges")
    check(val(samples, "rados_nkv_namespace_used_bytes", subsystem=A, nsid=1) is not None, "used bytes gauge")
    check(val(samples, "rados_nkv_controllers", subsystem=A, transport="tcp") == 0,
          "subsystem A has no controller left (every nkv disconnected)")
    absent = [n for n in fams if re.search(r"pinned|evict|expir|hours|capacity", n)]
    check(not absent, "no cache metric exported before the cache exists (%s)" % absent)

    # ---- copies: rados_nkv_data_bytes_total and rados_nkv_copied_bytes_total per transport and
    # direction, as deltas over one command each. What each path copies, and so the exact count:
    # - a 4 KiB Store over TCP: data below DIRECT_READ_MIN (16 KiB) comes into the connection's
    #   receive buffer with its PDU header and is copied into the request buffer (4096), then the
    #   backend copies it (mem: into its slab; rados: librados' C API into its bufferlist) = 8192;
    # - a 1 MiB Store over TCP: R2T'd, so the target reads each H2CData header alone and the data
    #   straight into the request buffer (no transport copy); mem keeps that buffer as the value (0),
    #   rados' write_full copies it once (1 MiB);
    # - a 1 MiB Retrieve over TCP: the backend writes the value into the request buffer (mem: memcpy;
    #   rados: the C API's copy of the reply), which sendmsg sends as it is = 1 MiB;
    # - over shared memory nkv's buffers are one registered region: the target maps the host's pages
    #   (no bounce), and the backend's copy is the only one (4096 for a 4 KiB Store, 1 MiB for a
    #   1 MiB Retrieve);
    # - a Retrieve that finds nothing moves and copies nothing. ----
    def copies():
        s = scrape()[0]
        return {(t, d, k): val(s, "rados_nkv_%s_bytes_total" % k, transport=t, dir=d)
                for t in ("tcp", "shm", "loop") for d in ("h2c", "c2h") for k in ("data", "copied")}

    MiB = 1 << 20
    big = bytes((j * 131) & 0xff for j in range(MiB))
    small = b"c" * 4096
    c0 = copies()
    check(all(v is not None for v in c0.values()), "copy counters exported for tcp, shm, loop x h2c, c2h")
    want_big_store = MiB if BACKEND == "rados" else 0
    steps = [
        ("a 4 KiB Store over TCP", lambda: nkv("store", "cp4k", "-", stdin=small)[0] == 0,
         {("tcp", "h2c", "data"): 4096, ("tcp", "h2c", "copied"): 8192}),
        ("a 1 MiB Store over TCP", lambda: nkv("store", "cp1m", "-", stdin=big)[0] == 0,
         {("tcp", "h2c", "data"): MiB, ("tcp", "h2c", "copied"): want_big_store}),
        ("a 1 MiB Retrieve over TCP", lambda: nkv("retrieve", "cp1m", "-") == (0, big),
         {("tcp", "c2h", "data"): MiB, ("tcp", "c2h", "copied"): MiB}),
        ("a Retrieve of an absent key over TCP", lambda: nkv("retrieve", "cp-none", "-")[0] == 2, {}),
        ("a 4 KiB Store over shared memory", lambda: nkv("store", "cp4k", "-", stdin=small,
                                                         transport="shm:" + shm)[0] == 0,
         {("shm", "h2c", "data"): 4096, ("shm", "h2c", "copied"): 4096}),
        ("a 1 MiB Store over shared memory", lambda: nkv("store", "cp1m", "-", stdin=big,
                                                         transport="shm:" + shm)[0] == 0,
         {("shm", "h2c", "data"): MiB, ("shm", "h2c", "copied"): MiB}),
        ("a 1 MiB Retrieve over shared memory", lambda: nkv("retrieve", "cp1m", "-", transport="shm:" + shm) ==
         (0, big), {("shm", "c2h", "data"): MiB, ("shm", "c2h", "copied"): MiB}),
    ]
    before = c0
    for what, run, want in steps:
        ok = run()
        after = copies()
        delta = {k: after[k] - before[k] for k in after if after[k] != before[k]}
        want = {k: v for k, v in want.items() if v}  # a counter that must not move is left out
        check(ok and delta == want, "%s: data and copies %s (want %s)" % (what, delta, want))
        before = after

    # ---- waits, kicks and interrupts over a QD 1 bench on each transport. Without --tcp-poll-us a
    # reactor waits in epoll_wait after each command it answers, so about once per command (23.8k
    # waits for 23.8k commands on mem); a shm poller takes a kick only while it waits (one host: at
    # most one per wait) and interrupts a host at most once per completion. ----
    def qd1_bench(*transport):
        p = subprocess.run([NKV, *transport, "-o", "json", "bench", "mode=mix", "qd=1", "conns=1", "size=4K",
                            "keys=16", "time=1", "warmup=0", "prefix=w"], capture_output=True, timeout=60)
        try:
            r = json.loads(p.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {}
        return sum(x.get("ops", 0) for x in r.get("results", [])) if p.returncode == 0 and r.get("ok") else 0

    def wake_counts(t):
        s = scrape()[0]
        return [val(s, "rados_nkv_transport_%s_total" % k, transport=t) for k in ("waits", "kicks", "interrupts")]

    w0 = wake_counts("tcp")
    ops = qd1_bench("-a", "127.0.0.1", "-s", str(tport), "-n", B)
    w1 = wake_counts("tcp")
    ratio = (w1[0] - w0[0]) / ops if ops and w0[0] is not None else -1
    check(0.3 <= ratio <= 4 and w0[1:] == [None, None] and w1[1:] == [None, None],
          "tcp: %.2f reactor waits per command over %d QD 1 commands (0.3 .. 4), no kicks or interrupts (%s)"
          % (ratio, ops, w1[1:]))
    w0 = wake_counts("shm")
    ops = qd1_bench("-t", "shm:" + shm)
    w1 = wake_counts("shm")
    d = [b - a for a, b in zip(w0, w1)] if None not in w0 + w1 else None
    check(ops > 0 and d is not None and d[1] <= d[0] and d[2] <= ops + 32,
          "shm: over %d QD 1 commands %s waits, kicks (at most one per wait), interrupts (at most one per "
          "command)" % (ops, d))

    # ---- connections and queue depth while bench holds them: 2 TCP I/O connections + an admin
    # one on B, one shm controller with one I/O queue ----
    bt = subprocess.Popen([NKV, "-a", "127.0.0.1", "-s", str(tport), "-n", B, "-o", "json", "bench", "mode=mix",
                           "qd=8", "conns=2", "size=4K", "keys=64", "time=4", "warmup=0", "prefix=t"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    bs = subprocess.Popen([NKV, "-t", "shm:" + shm, "-o", "json", "bench", "mode=mix", "qd=4", "conns=1", "size=4K",
                           "keys=64",
                           "time=4", "warmup=0", "prefix=s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    best, observed = None, set()
    end = time.time() + 3.5
    while time.time() < end:
        s, _, _, _ = scrape()
        got = (val(s, "rados_nkv_transport_connections", transport="tcp"),
               val(s, "rados_nkv_controllers", subsystem=B, transport="tcp"),
               val(s, "rados_nkv_io_queues", subsystem=B, transport="tcp"),
               val(s, "rados_nkv_transport_connections", transport="shm"),
               val(s, "rados_nkv_controllers", subsystem=B, transport="shm"),
               val(s, "rados_nkv_io_queues", subsystem=B, transport="shm"),
               val(s, "rados_nkv_transport_queue_depth", transport="tcp"),
               val(s, "rados_nkv_transport_queue_depth", transport="shm"))
        observed.add(got[:6])
        if got[:6] == (3, 1, 2, 1, 1, 1):
            if best is None or got[6] + got[7] > best[6] + best[7]:
                best = got
        time.sleep(0.2)
    check(best is not None, "during bench: tcp connections 3 (admin + 2 I/O), 1 controller with 2 I/O queues; "
          "shm 1 controller with 1 I/O queue (%s; seen %s)" % (best, sorted(observed, key=str)))
    check(best is not None and 0 <= best[6] <= 16 and 0 <= best[7] <= 4 and best[6] + best[7] > 0,
          "queue depth seen under load within the bench's queue depths: tcp %s <= 16, shm %s <= 4" %
          ((best[6], best[7]) if best else (None, None)))
    for name, p in (("tcp", bt), ("shm", bs)):
        o, e = p.communicate(timeout=60)
        try:
            r = json.loads(o.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {}
        check(p.returncode == 0 and r.get("ok") is True, "bench over %s: exit %d, ok %s %s" % (
            name, p.returncode, r.get("ok"), e.decode()[-300:]))
    for _ in range(50):   # the connections close once both benches exit
        s, _, _, _ = scrape()
        if val(s, "rados_nkv_transport_connections", transport="tcp") == 0 and \
                val(s, "rados_nkv_transport_connections", transport="shm") == 0:
            break
        time.sleep(0.1)
    check(val(s, "rados_nkv_transport_connections", transport="tcp") == 0 and
          val(s, "rados_nkv_transport_connections", transport="shm") == 0 and
          val(s, "rados_nkv_transport_queue_depth", transport="tcp") == 0 and
          val(s, "rados_nkv_transport_queue_depth", transport="shm") == 0,
          "connections and queue depth back to 0 after the benches")
    bcmds = sum(v for (n, l), v in s.items() if n == "rados_nkv_commands_total" and dict(l)["subsystem"] == B)
    bfail = sum(v for (n, l), v in s.items() if n == "rados_nkv_commands_total" and dict(l)["subsystem"] == B
                and dict(l)["status"] != "success")
    bhist = sum(v for (n, l), v in s.items() if n == "rados_nkv_command_latency_seconds_count"
                and dict(l)["subsystem"] == B)
    check(bcmds > 0 and bfail == 0 and bhist == bcmds, "subsystem B: %d commands, all successful, histogram "
          "counts add up to them (%d)" % (bcmds, bhist))

    # ---- other paths and methods ----
    for path in ("/metric", "/metrics/", "/metrics.json", "/favicon.ico", "/../metrics"):
        code, _, _ = http(path)
        check(code == 404, "GET %s: 404 (%d)" % (path, code))
    code, hdr, body = http("/")
    check(code == 200 and (hdr.get("Content-Type") or "").startswith("text/html") and 'href="/metrics"' in body,
          "GET /: 200, an HTML page that links /metrics (%d, %s)" % (code, hdr.get("Content-Type")))

    # ---- the process families (Prometheus' process collector names), against /proc ----
    s = scrape()[0]
    pid = daemon.pid
    with open("/proc/%d/statm" % pid) as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGESIZE")
    nfd = len(os.listdir("/proc/%d/fd" % pid))
    p_rss, p_fds, p_max = (val(s, "process_" + n) for n in ("resident_memory_bytes", "open_fds", "max_fds"))
    p_cpu, p_start = val(s, "process_cpu_seconds_total"), val(s, "process_start_time_seconds")
    check(p_rss is not None and 0.5 * rss <= p_rss <= 2 * rss, "process_resident_memory_bytes %s (/proc: %d)" %
          (p_rss, rss))
    check(p_fds is not None and abs(p_fds - nfd) <= 4 and p_max >= p_fds, "process_open_fds %s (/proc: %d), "
          "max %s" % (p_fds, nfd, p_max))
    check(p_cpu is not None and 0 < p_cpu < 3600 and p_start is not None and
          time.time() - 3600 < p_start <= time.time(), "process_cpu_seconds_total %s, process_start_time_seconds "
          "%s (now %.0f)" % (p_cpu, p_start, time.time()))
    code, hdr, _ = http("/metrics", "POST")
    check(code == 405 and "GET" in (hdr.get("Allow") or ""), "POST /metrics: 405 with Allow: GET (%d)" % code)
    code, _, body = http("/metrics", "HEAD")
    check(code == 200 and body == "", "HEAD /metrics: 200, no body")

    # ---- slow clients: a deadline per request, and room for a scraper ----
    if BACKEND == "mem":  # HTTP only: once is enough
        slowloris()

    # ---- configuration errors, --check, a port in use ----
    def run_d(*a, stdin=None):
        p = subprocess.run([DAEMON] + list(a), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        return p.returncode, p.stdout.decode()
    rc, out = run_d("--backend", "mem", "--metrics", "bogus")
    check(rc == 64 and "--metrics" in out, "--metrics bogus: usage error 64 (%d)" % rc)
    rc, out = run_d("--backend", "mem", "--metrics", "127.0.0.1:70000")
    check(rc == 64, "--metrics with port 70000: usage error 64 (%d)" % rc)
    conf = os.path.join(tmp, "m.json")
    for body, want in (('{"metrics": {"address": "x:y"}}', '"address" must be'),
                       ('{"metrics": {"adress": "127.0.0.1:1"}}', '"adress" is not a known key'),
                       ('{"metrics": "127.0.0.1:1"}', 'must be an object')):
        with open(conf, "w") as f:
            f.write(body)
        rc, out = run_d("-c", conf, "--backend", "mem", "--check")
        check(rc == 1 and want in out, "config %s: exit 1 naming the key (%d: %s)" % (body, rc, out.strip()[:120]))
    with open(conf, "w") as f:
        f.write('{"metrics": {"address": "127.0.0.1:9470"}}')
    rc, out = run_d("-c", conf, "--backend", "mem", "--check")
    check(rc == 0 and "metrics: GET /metrics on 127.0.0.1:9470" in out, "--check prints the metrics address")
    rc, out = run_d("-c", conf, "--backend", "mem", "--metrics", "none", "--check")
    check(rc == 0 and "metrics" not in out, "--metrics none overrides the file")
    rc, out = run_d("--backend", "mem", "-l", "127.0.0.1:0", "-d", "none", "--control", "none",
                    "--metrics", "127.0.0.1:%d" % mport)
    check(rc == 1 and "cannot serve metrics on 127.0.0.1:%d: Address already in use" % mport in out,
          "a second daemon on the same metrics port: exit 1, 'Address already in use'")

    # ---- a clean stop ----
    daemon.send_signal(signal.SIGTERM)
    try:
        rc = daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc == 0, "SIGTERM: the daemon exits 0 (%s)" % rc)
    if daemon_check.failed():
        sys.stdout.write(log_text()[-4000:])
finally:
    cleanup()
finish()
