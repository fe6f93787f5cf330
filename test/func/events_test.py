#!/usr/bin/python3
"""events_test.py - the daemon's cache events (--events) and cache metrics end to end.

Starts rados-nkv with two cache namespaces (one small-capacity LRU namespace that must evict, one
whose entries expire after 2 s) and a plain one, --events on a free TCP port and --metrics; a
python3-zmq subscriber and python3-msgpack decode every message. Checks: three frames per message,
the topic kv@<gateway>@<RADOS namespace>, sequence numbers from 0 without gaps, one BlockRemoved per
evicted or expired entry whose hash is the key's bytes, and that the keys reported evicted are exactly
the keys Retrieve no longer finds; the scrape (python3-prometheus-client's parser) has the cache
families with the policy, the eviction and expiry counts equal to the events received, and the
publisher's counters; then the map layout and a nil medium, and --events usage errors.

    events_test.py PATH/rados-nkv PATH/nkv mem|rados

rados needs NKV_CEPH_CONF (NKV_CEPH_USER, NKV_CEPH_KEYRING, NKV_CEPH_POOL as the other tests);
without it: exit 77, or 1 with NKV_REQUIRE_RADOS=1. Prints "ok - ..." / "FAIL - ..." lines and
"N passed, N failed".
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_check  # noqa: E402
from daemon_check import check, finish  # noqa: E402

try:
    import msgpack
    import zmq
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print("skip: %s (python3-zmq, python3-msgpack, python3-prometheus-client: scripts/deps.sh)" % e)
    sys.exit(77)

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
daemons = []


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
                                     stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
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
    def __init__(self, endpoint):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.sock.connect(endpoint)
        self.msgs = []     # (topic, seq, decoded payload)
        self.bad = []      # what was not three frames with an 8-byte sequence

    def drain(self, seconds):
        """Receive for up to @seconds, returning early 1 s after the last message."""
        end = time.time() + seconds
        quiet = None
        while time.time() < end and (quiet is None or time.time() < quiet):
            if not self.sock.poll(100):
                continue
            frames = self.sock.recv_multipart()
            if len(frames) != 3 or len(frames[1]) != 8:
                self.bad.append(frames)
                continue
            self.msgs.append((frames[0].decode(), int.from_bytes(frames[1], "big"),
                              msgpack.unpackb(frames[2], raw=False)))
            quiet = time.time() + 1.0

    def close(self):
        self.sock.close(0)
        self.ctx.term()


def removed_keys(msgs, topic, layout="array"):
    """Keys of the BlockRemoved events of @topic; None if an event is not a well-formed BlockRemoved."""
    keys = []
    for t, _, p in msgs:
        if t != topic:
            continue
        if layout == "array":
            if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], float) and p[2] is None and len(p[1]) == 1):
                return None
            ev = p[1][0]
            if not (len(ev) == 3 and ev[0] == "BlockRemoved" and len(ev[1]) == 1 and isinstance(ev[1][0], bytes)):
                return None
            keys.append(ev[1][0])
        else:
            if not (isinstance(p, dict) and set(p) == {"ts", "events", "data_parallel_rank"} and len(p["events"]) == 1):
                return None
            ev = p["events"][0]
            if not (ev.get("type") == "BlockRemoved" and len(ev.get("block_hashes", [])) == 1):
                return None
            keys.append(ev["block_hashes"][0])
    return keys


try:
    # ---- usage errors first: nothing to clean up ----
    for args, code, what in ((["--events", "bogus"], 64, "--events without TRANSPORT://"),
                             (["--events-format", "xml"], 64, "--events-format xml"),
                             (["--events-medium", "m" * 64], 64, "--events-medium of 64 bytes")):
        p = subprocess.run([DAEMON, "--backend", "mem", "--check"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        check(p.returncode == code and b"--events" in p.stderr, "%s: exit %d (%d: %s)" %
              (what, code, p.returncode, p.stderr.decode().strip()))
    bad = os.path.join(tmp, "bad.json")
    for doc, key in (({"events": 5}, '"events"'), ({"events": {"endpoint": "tcp://127.0.0.1:1", "format": "xml"}},
                                                    '"format"'), ({"events": {"port": 1}}, '"port"')):
        with open(bad, "w") as f:
            json.dump(doc, f)
        p = subprocess.run([DAEMON, "-c", bad, "--backend", "mem", "--check"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        check(p.returncode == 1 and key.encode() in p.stderr, "JSON %s: exit 1 naming %s (%d: %s)" %
              (json.dumps(doc), key, p.returncode, p.stderr.decode().strip()))
    ep = "tcp://127.0.0.1:%d" % free_port()
    p = subprocess.run([DAEMON, "--backend", "mem", "--check", "--events", ep, "--events-format", "map",
                        "--gateway-name", GW], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0 and ("cache events: ZMQ PUB on %s, topic kv@%s@<RADOS namespace>, map layout" %
                                 (ep, GW)).encode() in p.stdout, "--check prints the events plan")
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
    check(("cache events: ZMQ PUB on %s, topic kv@%s@<RADOS namespace>, array layout, medium storage" %
           (ep, GW)) in d.log(), "the log names the events endpoint and topic")
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
        evicted = removed_keys(sub.msgs, "kv@%s@%s" % (GW, NS_EVICT)) or []
        expired = removed_keys(sub.msgs, "kv@%s@%s" % (GW, NS_EXPIRE)) or []
        samples, fams, body = d.scrape()
        used = val(samples, "rados_nkv_cache_used_bytes", subsystem=NQN, nsid=1)
        if used is not None and used <= CAPACITY and len(expired) >= len(expiring):
            break
    sub.drain(2.0)  # anything still on its way
    topics = {t for t, _, _ in sub.msgs}
    check(not sub.bad, "every message is three frames with an 8-byte sequence (%d bad)" % len(sub.bad))
    check(topics <= {"kv@%s@%s" % (GW, NS_EVICT), "kv@%s@%s" % (GW, NS_EXPIRE)},
          "topics kv@<gateway>@<RADOS namespace>, none for the plain namespace: %s" % sorted(topics))
    seqs = [s for _, s, _ in sub.msgs]
    check(seqs == list(range(len(seqs))), "sequence numbers 0..%d without a gap" % (len(seqs) - 1))
    evicted = removed_keys(sub.msgs, "kv@%s@%s" % (GW, NS_EVICT))
    expired = removed_keys(sub.msgs, "kv@%s@%s" % (GW, NS_EXPIRE))
    check(evicted is not None and expired is not None, "every payload is [ts, [[\"BlockRemoved\", [key], medium]], nil]")
    evicted, expired = evicted or [], expired or []
    check(all(p[1][0][2] == "storage" for _, _, p in sub.msgs), "medium \"storage\"")
    now = time.time()
    check(all(now - 120 < p[0] <= now + 1 for _, _, p in sub.msgs), "timestamps are the time of the removal")
    check(len(evicted) > 0, "entries were evicted (%d events)" % len(evicted))
    check(len(set(evicted)) == len(evicted), "one event per evicted entry (no duplicates)")
    missing = set()
    for k in stored:
        rc, out = d.nkv("retrieve", k, "-", nsid=1)
        if rc == 2:
            missing.add(k.encode())
        elif rc != 0 or out != stored[k]:
            check(False, "retrieve %s: exit %d" % (k, rc))
    check(not set(evicted) & {k.encode() for k in refused}, "no event for a Store that was refused")
    check(set(evicted) == missing, "the keys reported evicted are exactly the keys gone (%d events, %d gone)" %
          (len(evicted), len(missing)))
    check(sorted(expired) == sorted(k.encode() for k in expiring),
          "one BlockRemoved per expired entry, with its key: %s" % sorted(expired))
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
        check(left == {k.encode().hex() for k in stored if k.encode() not in set(evicted)},
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
    while time.time() < deadline and len(sub.msgs) < 2:
        sub.drain(1.0)
    keys = removed_keys(sub.msgs, "kv@%s@%s-m" % (GW, NS_EXPIRE), "map")
    check(keys is not None and sorted(keys) == [b"m0", b"m1"], "map layout: two BlockRemoved with the keys (%s)" % keys)
    check(all(p["events"][0]["medium"] is None for _, _, p in sub.msgs), "medium nil")
    check([s for _, s, _ in sub.msgs] == [0, 1], "the sequence starts at 0 again")
    sub.close()
    check(d.stop() == 0, "SIGTERM: exit 0")
finally:
    cleanup()
finish()
