#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""events_test.py - the daemon's cache events (--events) and cache metrics end to end.

Starts rados-nkv with two cache namespaces (one small-capacity LRU namespace that must evict, one
whose entries expire after 2 s) and a plain one, --events on a free TCP port and --metrics; a
python3-zmq subscriber reads every message and llmd_events.py (llm-d's own reading, written from its
Go code) decodes it. Checks: three frames per message, the topic kv@OBJECT_STORE@<RADOS namespace>,
sequence numbers from 0 without gaps, one BlockStored per Store and one BlockRemoved per evicted or
expired entry, named by the key's last 8 bytes (no block hash given), the keys reported evicted
exactly the keys Retrieve no longer finds; the scrape (python3-prometheus-client's parser) has the
cache families with the policy, the eviction and expiry counts equal to the events received, and
the publisher's counters; the map layout with a nil medium; the block hash round trip: Stores
through the Python package with the engine's block hashes, whose BlockStored, and the BlockRemoved
of their Delete, replacement and expiry, name those hashes, published to a subscriber that binds
(--events-mode connect, llm-d's global socket); and --events usage errors.

    events_test.py PATH/rados-nkv PATH/nkv mem|rados

The hash round trip needs libnkv (NKV_LIBRARY, as the Python suites). rados needs NKV_CEPH_CONF
(NKV_CEPH_USER, NKV_CEPH_KEYRING, NKV_CEPH_POOL as the other tests); without it: exit 77, or 1 with
NKV_REQUIRE_RADOS=1. Prints "ok - ..." / "FAIL - ..." lines and "N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import daemon_check  # noqa: E402
from daemon_check import check, finish  # noqa: E402

try:
    import msgpack
    import zmq
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print("skip: %s (python3-zmq, python3-msgpack, python3-prometheus-client: scripts/deps.sh)" % e)
    sys.exit(77)
import llmd_events  # noqa: E402

DAEMON, NKV, BACKEND = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "mem")
pool = os.environ.get("NKV_CEPH_POOL", "nkv")
backend_args = daemon_check.backend_args(BACKEND)

tmp = tempfile.mkdtemp(prefix="nkv-events.")
tag = "e%d" % os.getpid()
NQN = "nqn.2026-12.io.rados-nkv:events-" + tag
GW = "gw-" + tag
NS_EVICT, NS_EXPIRE, NS_PLAIN = "evict-" + tag, "expire-" + tag, "plain-" + tag
CAPACITY = 64 << 10
VSIZE = 4096
MEDIUM = "OBJECT_STORE"
daemons = []
# the daemons run without the interpreter's sanitizer settings (the Python suites' ASAN_OPTIONS and
# LD_PRELOAD are for libnkv inside this interpreter)
DAEMON_ENV = {k: v for k, v in os.environ.items() if k not in ("ASAN_OPTIONS", "LD_PRELOAD")}


def key_hash(k):
    """The hash an entry stored without one is published under: the key's last 8 bytes, big-endian."""
    return int.from_bytes(k[-8:], "big")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def write_conf(name, namespaces):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump({"subsystems": [{"nqn": NQN, "pool": pool, "namespaces": namespaces}]}, f)
    return path


class Daemon:
    def __init__(self, name, conf, extra):
        self.log_path = os.path.join(tmp, name + ".log")
        self.pid = os.path.join(tmp, name + ".pid")
        self.proc = subprocess.Popen([DAEMON, "-c", conf] + backend_args +
                                     ["-l", "127.0.0.1:0", "-d", "none", "--control", "none", "--metrics", "127.0.0.1:0",
                                      "--gateway-name", GW, "--pid-file", self.pid, "--log-level", "info"] + extra,
                                     stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT, env=DAEMON_ENV)
        daemons.append(self)
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None and not (os.path.exists(self.pid) and os.path.getsize(self.pid) > 0):
            time.sleep(0.05)
        text = self.log()
        m = re.search(r"metrics on 127\.0\.0\.1:(\d+) ", text)
        t = re.search(r"NVMe/TCP on 127\.0\.0\.1:(\d+)", text)
        if self.proc.poll() is not None or not m or not t:
            check(False, "the daemon %s starts" % name)
            sys.stdout.write(text)
            cleanup()
            finish(1)
        self.mport, self.tport = int(m.group(1)), int(t.group(1))

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def nkv(self, *a, nsid=1, stdin=None, err=False):
        c = [NKV, "-a", "127.0.0.1", "-s", str(self.tport), "-n", NQN, "--nsid", str(nsid), "--timeout", "20000"]
        p = subprocess.run(c + list(a), input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        return (p.returncode, p.stdout, p.stderr.decode()) if err else (p.returncode, p.stdout)

    def scrape(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.mport, timeout=10) as r:
            body = r.read().decode()
        samples = {}
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        for f in fams.values():
            for s in f.samples:
                samples[(s.name, frozenset(s.labels.items()))] = s.value
        return samples, fams, body

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def cleanup():
    for d in daemons:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def val(samples, name, **labels):
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


class Subscriber:
    """A SUB socket that connects (or, with @bind, binds: llm-d's global socket) and reads every
    message through llmd_events.parse_message()."""

    def __init__(self, endpoint, bind=False, map_events=True):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"kv@")
        (self.sock.bind if bind else self.sock.connect)(endpoint)
        self.map_events = map_events
        self.msgs = []     # (topic, seq, ts, [event]) as llm-d reads them
        self.bad = []      # (frames, why) llm-d would drop

    def drain(self, seconds):
        """Receive for up to @seconds, returning early 1 s after the last message."""
        end = time.time() + seconds
        quiet = None
        while time.time() < end and (quiet is None or time.time() < quiet):
            if not self.sock.poll(100):
                continue
            frames = self.sock.recv_multipart()
            try:
                pod, model, seq, ts, events = llmd_events.parse_message(frames, self.map_events)
                self.msgs.append(("kv@%s@%s" % (pod, model), seq, ts, events))
            except llmd_events.Refused as e:
                self.bad.append((frames, str(e)))
            quiet = time.time() + 1.0

    def close(self):
        self.sock.close(0)
        self.ctx.term()


def hashes(msgs, topic, typ):
    """The block hashes of the @typ events of @topic, in order; None if a message is not one event
    of the storage tier (medium OBJECT_STORE or none) as rados-nkv sends them."""
    out = []
    for t, _, _, evs in msgs:
        if t != topic:
            continue
        if len(evs) != 1 or len(evs[0].get("block_hashes", [])) != 1:
            return None
        if evs[0]["type"] == typ:
            out.append(evs[0]["block_hashes"][0])
    return out


try:
    # ---- usage errors first: nothing to clean up ----
    for args, code, what in ((["--events", "bogus"], 64, "--events without TRANSPORT://"),
                             (["--events-format", "xml"], 64, "--events-format xml"),
                             (["--events-mode", "listen"], 64, "--events-mode listen"),
                             (["--events-medium", "m" * 64], 64, "--events-medium of 64 bytes")):
        p = subprocess.run([DAEMON, "--backend", "mem", "--check"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        check(p.returncode == code and b"--events" in p.stderr, "%s: exit %d (%d: %s)" %
              (what, code, p.returncode, p.stderr.decode().strip()))
    bad = os.path.join(tmp, "bad.json")
    for doc, key in (({"events": 5}, '"events"'), ({"events": {"endpoint": "tcp://127.0.0.1:1", "format": "xml"}},
                                                    '"format"'), ({"events": {"port": 1}}, '"port"'),
                     ({"events": {"endpoint": "tcp://127.0.0.1:1", "mode": "listen"}}, '"mode"')):
        with open(bad, "w") as f:
            json.dump(doc, f)
        p = subprocess.run([DAEMON, "-c", bad, "--backend", "mem", "--check"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        check(p.returncode == 1 and key.encode() in p.stderr, "JSON %s: exit 1 naming %s (%d: %s)" %
              (json.dumps(doc), key, p.returncode, p.stderr.decode().strip()))
    ep = "tcp://127.0.0.1:%d" % free_port()
    p = subprocess.run([DAEMON, "--backend", "mem", "--check", "--events", ep, "--events-format", "map",
                        "--gateway-name", GW], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0 and ("cache events: ZMQ PUB bound to %s, topic kv@OBJECT_STORE@<RADOS namespace>, "
                                 "map layout, medium OBJECT_STORE" % ep).encode() in p.stdout,
          "--check prints the events plan")
    p = subprocess.run([DAEMON, "--backend", "mem", "--check", "--events", ep, "--events-mode", "connect",
                        "--events-medium", "none", "--gateway-name", GW], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0 and ("cache events: ZMQ PUB connected to %s, topic kv@%s@<RADOS namespace>, "
                                 "array layout, medium nil" % (ep, GW)).encode() in p.stdout,
          "--check prints the connect mode, and the gateway's name in the topic without a medium")
    # an address another socket holds: exit 1 with the reason
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    p = subprocess.run([DAEMON, "--backend", "mem", "-l", "127.0.0.1:0", "-d", "none", "--control", "none",
                        "--events", "tcp://127.0.0.1:%d" % holder.getsockname()[1]],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    holder.close()
    check(p.returncode == 1 and b"Address already in use" in p.stdout,
          "--events on an address in use: exit 1 with the reason (%d)" % p.returncode)

    # ---- the array layout: eviction and expiry ----
    conf = write_conf("a.json", [
        {"nsid": 1, "rados_namespace": NS_EVICT,
         "cache": {"capacity": "64K", "eviction": "lru", "reap_interval_s": 1}},
        {"nsid": 2, "rados_namespace": NS_EXPIRE, "cache": {"default_ttl": 2, "reap_interval_s": 1}},
        {"nsid": 3, "rados_namespace": NS_PLAIN}])
    ep = "tcp://127.0.0.1:%d" % free_port()
    d = Daemon("a", conf, ["--events", ep])
    check(("cache events: ZMQ PUB bound to %s, topic kv@OBJECT_STORE@<RADOS namespace>, array layout, "
           "medium OBJECT_STORE" % ep) in d.log(), "the log names the events endpoint and topic")
    sub = Subscriber(ep)
    time.sleep(1.0)  # a PUB socket sends nothing to a subscription it has not seen yet

    n_evict = 32  # 128 KiB of 4 KiB values into a 64 KiB capacity
    stored, refused = {}, []
    for i in range(n_evict):
        k = "v%02d" % i
        v = bytes([i]) * VSIZE
        rc, _, err = d.nkv("store", k, "-", stdin=v, nsid=1, err=True)
        if rc == 0:
            stored[k] = v
        elif "Capacity Exceeded" in err:
            refused.append(k)  # past capacity + overshoot while eviction catches up: 81h, as documented
        else:
            check(False, "store %s on the capacity namespace (exit %d: %s)" % (k, rc, err.strip()))
    check(len(stored) >= n_evict // 2, "%d Stores succeeded, %d refused with 81h (past the hard limit)" %
          (len(stored), len(refused)))
    expiring = ["x%d" % i for i in range(5)]
    for k in expiring:
        rc, _ = d.nkv("store", k, "-", stdin=b"e" * 1000, nsid=2)
        check(rc == 0, "store %s on the expiring namespace" % k)
    for k in ("p0", "p1"):
        d.nkv("store", k, "-", stdin=b"p" * VSIZE, nsid=3)

    # Evictions bring the namespace under its capacity; the expired entries are reaped within a few s.
    deadline = time.time() + 60
    evicted = expired = []
    while time.time() < deadline:
        sub.drain(1.5)
        evicted = hashes(sub.msgs, "kv@%s@%s" % (MEDIUM, NS_EVICT), "BlockRemoved") or []
        expired = hashes(sub.msgs, "kv@%s@%s" % (MEDIUM, NS_EXPIRE), "BlockRemoved") or []
        samples, fams, body = d.scrape()
        used = val(samples, "rados_nkv_cache_used_bytes", subsystem=NQN, nsid=1)
        if used is not None and used <= CAPACITY and len(expired) >= len(expiring):
            break
    sub.drain(2.0)  # anything still on its way
    topics = {t for t, _, _, _ in sub.msgs}
    check(not sub.bad, "llm-d reads every message (%d refused: %s)" % (len(sub.bad), sub.bad[:1]))
    check(topics <= {"kv@%s@%s" % (MEDIUM, NS_EVICT), "kv@%s@%s" % (MEDIUM, NS_EXPIRE)},
          "topics kv@OBJECT_STORE@<RADOS namespace>, none for the plain namespace: %s" % sorted(topics))
    seqs = [s for _, s, _, _ in sub.msgs]
    check(seqs == list(range(len(seqs))), "sequence numbers 0..%d without a gap" % (len(seqs) - 1))
    t_evict, t_expire = "kv@%s@%s" % (MEDIUM, NS_EVICT), "kv@%s@%s" % (MEDIUM, NS_EXPIRE)
    evicted = hashes(sub.msgs, t_evict, "BlockRemoved")
    expired = hashes(sub.msgs, t_expire, "BlockRemoved")
    check(evicted is not None and expired is not None, "every message is one event naming one block")
    evicted, expired = evicted or [], expired or []
    check(all(ev["device_tier"] == MEDIUM for _, _, _, evs in sub.msgs for ev in evs), "medium \"OBJECT_STORE\"")
    now = time.time()
    check(all(now - 120 < ts <= now + 1 for _, _, ts, _ in sub.msgs), "timestamps are the time of the event")
    check(sorted(hashes(sub.msgs, t_evict, "BlockStored") or []) == sorted(key_hash(k.encode()) for k in stored),
          "one BlockStored per Store the namespace took (%d), none for the %d refused, named by the key's last "
          "8 bytes" % (len(stored), len(refused)))
    check(sorted(hashes(sub.msgs, t_expire, "BlockStored") or []) == sorted(key_hash(k.encode()) for k in expiring),
          "one BlockStored per Store on the expiring namespace")
    check(all(ev["tokens"] == [] and ev["parent_hash"] == 0 and ev["block_size"] == 0 and ev["lora_id"] is None
              for _, _, _, evs in sub.msgs for ev in evs if ev["type"] == "BlockStored"),
          "BlockStored: no parent, tokens or block size (a storage tier knows none)")
    check(len(evicted) > 0, "entries were evicted (%d events)" % len(evicted))
    check(len(set(evicted)) == len(evicted), "one event per evicted entry (no duplicates)")
    missing = set()
    for k in stored:
        rc, out = d.nkv("retrieve", k, "-", nsid=1)
        if rc == 2:
            missing.add(key_hash(k.encode()))
        elif rc != 0 or out != stored[k]:
            check(False, "retrieve %s: exit %d" % (k, rc))
    check(not set(evicted) & {key_hash(k.encode()) for k in refused}, "no event for a Store that was refused")
    check(set(evicted) == missing, "the keys reported evicted are exactly the keys gone (%d events, %d gone)" %
          (len(evicted), len(missing)))
    check(sorted(expired) == sorted(key_hash(k.encode()) for k in expiring),
          "one BlockRemoved per expired entry, named by its key: %s" % sorted(expired))
    check(all(d.nkv("retrieve", k, "-", nsid=2)[0] == 2 for k in expiring), "the expired keys are gone (87h)")
    if BACKEND == "rados":
        # the objects themselves, as Ceph's own CLI lists them (object name = the key in lowercase hex)
        def objects(ns):
            c = ["rados", "-c", os.environ["NKV_CEPH_CONF"], "--id", os.environ.get("NKV_CEPH_USER", "admin"),
                 "-p", pool, "-N", ns, "ls"]
            if os.environ.get("NKV_CEPH_KEYRING"):
                c[3:3] = ["--keyring", os.environ["NKV_CEPH_KEYRING"]]
            p = subprocess.run(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
            return {n for n in p.stdout.decode().split() if re.fullmatch(r"[0-9a-f]{2,32}", n)} if p.returncode == 0 \
                else None
        left = objects(NS_EVICT)
        check(left == {k.encode().hex() for k in stored if key_hash(k.encode()) not in set(evicted)},
              "rados ls: the evicted objects are removed, the others are there (%s objects)" %
              (len(left) if left is not None else "no listing"))
        check(objects(NS_EXPIRE) == set(), "rados ls: the expired objects are removed")

    # ---- the metrics of the same run ----
    time.sleep(1.5)  # usage is read back from the backend about every second
    samples, fams, body = d.scrape()
    lbl1, lbl2 = dict(subsystem=NQN, nsid=1), dict(subsystem=NQN, nsid=2)
    for name, typ in (("rados_nkv_cache_used_bytes", "gauge"), ("rados_nkv_cache_keys", "gauge"),
                      ("rados_nkv_cache_pinned_bytes", "gauge"), ("rados_nkv_cache_pinned_keys", "gauge"),
                      ("rados_nkv_cache_capacity_bytes", "gauge"), ("rados_nkv_cache_capacity_keys", "gauge"),
                      ("rados_nkv_cache_pin_quota_bytes", "gauge"), ("rados_nkv_cache_evictions", "counter"),
                      ("rados_nkv_cache_evicted_bytes", "counter"), ("rados_nkv_cache_expirations", "counter"),
                      ("rados_nkv_cache_expired_bytes", "counter"), ("rados_nkv_cache_pinned_byte_hours", "gauge"),
                      ("rados_nkv_cache_eviction_lease", "gauge"), ("rados_nkv_cache_gateways", "gauge"),
                      ("rados_nkv_cache_events_published", "counter"), ("rados_nkv_cache_events_dropped", "counter")):
        check(name in fams and fams[name].type == typ, "family %s (%s)" % (name, typ))
    check(val(samples, "rados_nkv_cache_capacity_bytes", **lbl1) == CAPACITY, "capacity_bytes = 65536")
    check(val(samples, "rados_nkv_cache_capacity_bytes", **lbl2) == 0, "no capacity on nsid 2: 0")
    check(val(samples, "rados_nkv_cache_used_bytes", subsystem=NQN, nsid=3) is None,
          "no cache families for the plain namespace")
    check(val(samples, "rados_nkv_cache_evictions_total", **lbl1) == len(evicted),
          "evictions_total = the evicted events (%s)" % val(samples, "rados_nkv_cache_evictions_total", **lbl1))
    check(val(samples, "rados_nkv_cache_evicted_bytes_total", **lbl1) == len(evicted) * VSIZE,
          "evicted_bytes_total = %d x 4096" % len(evicted))
    check(val(samples, "rados_nkv_cache_keys", **lbl1) == len(stored) - len(evicted) and
          val(samples, "rados_nkv_cache_used_bytes", **lbl1) == (len(stored) - len(evicted)) * VSIZE,
          "keys and used_bytes = what is left (%s, %s)" % (val(samples, "rados_nkv_cache_keys", **lbl1),
                                                            val(samples, "rados_nkv_cache_used_bytes", **lbl1)))
    check(val(samples, "rados_nkv_cache_expirations_total", **lbl2) == len(expiring) and
          val(samples, "rados_nkv_cache_expired_bytes_total", **lbl2) == 1000 * len(expiring),
          "expirations_total = 5, expired_bytes_total = 5000")
    check(val(samples, "rados_nkv_cache_keys", **lbl2) == 0, "nothing left on the expiring namespace")
    check(val(samples, "rados_nkv_cache_eviction_lease", **lbl1) == 1 and
          val(samples, "rados_nkv_cache_gateways", **lbl1) == 1, "the only gateway holds the lease")
    check(val(samples, "rados_nkv_cache_pinned_token_hours", **lbl1) is None,
          "no token-hours without bytes_per_token")
    check(val(samples, "rados_nkv_cache_events_published_total") == len(sub.msgs) and
          val(samples, "rados_nkv_cache_events_dropped_total") == 0 and
          val(samples, "rados_nkv_cache_events_queued") == 0,
          "events published = %d received, 0 dropped, 0 queued" % len(sub.msgs))
    sub.close()
    check(d.stop() == 0, "SIGTERM: exit 0")

    # ---- the map layout, a nil medium ----
    conf = write_conf("b.json", [{"nsid": 1, "rados_namespace": NS_EXPIRE + "-m",
                                  "cache": {"default_ttl": 1, "reap_interval_s": 1}}])
    ep = "ipc://" + os.path.join(tmp, "ev.sock")
    d = Daemon("b", conf, ["--events", ep, "--events-format", "map", "--events-medium", "none"])
    sub = Subscriber(ep)
    time.sleep(1.0)
    for k in ("m0", "m1"):
        rc, _ = d.nkv("store", k, "-", stdin=b"m" * 100)
        check(rc == 0, "store %s (map layout run)" % k)
    deadline = time.time() + 30
    while time.time() < deadline and len(sub.msgs) < 4:
        sub.drain(1.0)
    t_m = "kv@%s@%s-m" % (GW, NS_EXPIRE)
    check(not sub.bad, "map layout: llm-d (with map events) reads every message (%s)" % sub.bad[:1])
    check(sorted(hashes(sub.msgs, t_m, "BlockStored") or []) == [key_hash(b"m0"), key_hash(b"m1")] and
          sorted(hashes(sub.msgs, t_m, "BlockRemoved") or []) == [key_hash(b"m0"), key_hash(b"m1")],
          "map layout: BlockStored and BlockRemoved for m0 and m1, topic kv@<gateway>@... without a medium")
    check(all(ev["device_tier"] == "" for _, _, _, evs in sub.msgs for ev in evs), "medium nil")
    check([s for _, s, _, _ in sub.msgs] == [0, 1, 2, 3], "the sequence starts at 0 again")
    sub.close()
    check(d.stop() == 0, "SIGTERM: exit 0")

    # ---- the engine's block hashes, round trip; a subscriber that binds (llm-d's global socket) ----
    try:
        import rados_nkv
    except Exception as e:  # noqa: BLE001 (ctypes raises OSError, ImportError...)
        rados_nkv = None
        check(False, "import rados_nkv (NKV_LIBRARY=%s): %s" % (os.environ.get("NKV_LIBRARY"), e))
    if rados_nkv:
        conf = write_conf("c.json", [
            {"nsid": 1, "rados_namespace": "llm-" + tag, "cache": {"default_ttl": 2, "reap_interval_s": 1}},
            {"nsid": 2, "rados_namespace": NS_PLAIN + "-c"}])
        ep = "tcp://127.0.0.1:%d" % free_port()
        sub = Subscriber(ep, bind=True, map_events=False)  # the array layout: llm-d before map events too
        d = Daemon("c", conf, ["--events", ep, "--events-mode", "connect"])
        check(("ZMQ PUB connected to %s" % ep) in d.log(), "the log says the publisher connects")
        c = rados_nkv.connect("127.0.0.1:%d" % d.tport, subnqn=NQN, nsid=1, queues=1, timeout=20)
        # a PUB socket that connects sends nothing until the connection is up: probe with a key
        # stored and deleted until its BlockStored arrives, then start from a clean slate
        deadline = time.time() + 20
        while time.time() < deadline and not sub.msgs:
            c.store(b"probe", b"p", block_hash=1)
            c.delete(b"probe")
            sub.drain(0.3)
        check(bool(sub.msgs), "events reach a subscriber that binds (--events-mode connect)")
        sub.drain(1.0)
        sub.msgs = []
        t_c = "kv@%s@llm-%s" % (MEDIUM, tag)
        H1, H4, H5, H6, H8 = 0xFEDCBA9876543210, 7, (1 << 64) - 1, 0x1122334455667788, 0x8000000000000001
        B2 = bytes(range(32))  # a vLLM block hash as bytes: llm-d reads its last 8 bytes
        h2 = int.from_bytes(B2[-8:], "big")
        v = b"v" * 512
        c.store(b"k1", v, block_hash=H1)
        c.store(b"k2", v, block_hash=B2)
        c.store(b"k3", v)                       # no hash: the key's last 8 bytes
        c.store(b"k4", v, block_hash=H4)        # a small hash: still a uint64 on the wire
        c.store(b"k4", v, block_hash=H5)        # replaced under another hash
        c.store_many([b"k6", b"k7"], [v, v], block_hashes=[H6, None])
        rc, _, err = d.nkv("store", "k8", "-", "--block-hash", "0x%x" % H8, stdin=v, err=True)
        check(rc == 0, "nkv store --block-hash: exit 0 (%s)" % err.strip())
        for bad in ("-1", "0x1" + "0" * 16, "12ab", "", "010"):
            rc, _, err = d.nkv("store", "k9", "-", "--block-hash", bad, stdin=v, err=True)
            check(rc == 64 and "bad --block-hash" in err, "nkv store --block-hash %r: usage error" % bad)
        rc, _, err = d.nkv("retrieve", "k8", "-", "--block-hash", "1", err=True)
        check(rc == 64 and "--block-hash is for store" in err, "--block-hash on retrieve: usage error")
        check(c.delete(b"k1") is True, "delete k1")
        c.store(b"p1", v, nsid=2, block_hash=H1)  # a plain namespace takes the hash, publishes nothing
        check(c.retrieve(b"p1", nsid=2) == v, "a Store with a block hash on a plain namespace is a plain Store")
        left = {h2, key_hash(b"k3"), H5, H6, key_hash(b"k7"), H8}
        deadline = time.time() + 30
        while time.time() < deadline and not left <= set(hashes(sub.msgs, t_c, "BlockRemoved") or []):
            sub.drain(1.0)
        sub.drain(1.5)
        c.close()
        check(not sub.bad, "llm-d reads every message (%s)" % sub.bad[:1])
        check({t for t, _, _, _ in sub.msgs} == {t_c}, "one topic, none for the plain namespace")
        seq = [(evs[0]["type"], evs[0]["block_hashes"][0]) for _, _, _, evs in sub.msgs]
        stored_h = [h for t, h in seq if t == "BlockStored"]
        removed_h = [h for t, h in seq if t == "BlockRemoved"]
        check(stored_h[:5] == [H1, h2, key_hash(b"k3"), H4, H5] and
              sorted(stored_h[5:7]) == sorted([H6, key_hash(b"k7")]) and stored_h[7:] == [H8],
              "BlockStored names the hash each Store gave (int, bytes, none, small, replaced, CLI): %s" %
              ["%x" % h for h in stored_h])
        check(seq[3:6] == [("BlockStored", H4), ("BlockRemoved", H4), ("BlockStored", H5)],
              "a Store that replaces an entry under another hash: BlockRemoved of the old one first")
        check(("BlockRemoved", H1) in seq and seq.index(("BlockRemoved", H1)) > seq.index(("BlockStored", H1)),
              "a host's Delete: BlockRemoved with the hash given at the Store")
        check(sorted(removed_h) == sorted([H4, H1] + list(left)),
              "expiries: BlockRemoved with the hashes kept in the entries' records: %s" %
              ["%x" % h for h in removed_h])
        check(all(ev["device_tier"] == MEDIUM for _, _, _, evs in sub.msgs for ev in evs),
              "medium OBJECT_STORE (llm-d's tier: object_store)")
        sub.close()
        check(d.stop() == 0, "SIGTERM: exit 0")
finally:
    cleanup()
finish()
