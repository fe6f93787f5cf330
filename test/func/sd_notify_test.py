# SPDX-License-Identifier: Apache-2.0
"""The daemon's readiness notification (systemd's sd_notify protocol, tools/rados-nkv/notify.c), with
this test as the service manager: a Unix datagram socket named by $NOTIFY_SOCKET.

  - READY=1 comes once, from the daemon's own pid (NotifyAccess=main), and when it comes the NVMe/TCP
    listener, the discovery listener, the metrics endpoint and the control socket all accept;
  - SIGHUP: RELOADING=1 with MONOTONIC_USEC=, then READY=1 again; SIGTERM: STOPPING=1, exit 0;
  - a daemon that cannot start (its port taken) never says READY=1;
  - an abstract socket ("@name") works; a $NOTIFY_SOCKET that names nothing does not stop the daemon.

Usage: sd_notify_test.py RADOS_NKV control|nocontrol   (the daemon built with the gRPC control plane or
without; mem backend, loopback ports chosen free at run time)"""
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_check import check, finish  # noqa: E402

DAEMON = sys.argv[1]
CONTROL = sys.argv[2] == "control"
TMP = tempfile.mkdtemp(prefix="nkv-notify-")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def accepts(port=None, path=None):
    """True when a TCP connect to 127.0.0.1:port (or a Unix stream connect to path) succeeds."""
    s = socket.socket(socket.AF_UNIX if path else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(path if path else ("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Manager:
    """The service manager's end: a datagram socket that sees the sender's pid (SCM_CREDENTIALS)."""

    def __init__(self, name, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        if abstract:
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            self.env = os.path.join(TMP, name)
            self.sock.bind(self.env)

    def recv(self, timeout):
        """The next message as (fields, sender pid), or (None, None) after @timeout seconds."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None, None
        data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
        return fields, pid

    def wait_for(self, key, timeout, seen=None):
        """Messages until one has @key (returned with its pid); the others are appended to @seen."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            fields, pid = self.recv(end - time.monotonic())
            if fields is None:
                break
            if key in fields:
                return fields, pid
            if seen is not None:
                seen.append(fields)
        return None, None


def start(manager_env, args, env_extra=None):
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    if manager_env is not None:
        env["NOTIFY_SOCKET"] = manager_env
    env.update(env_extra or {})
    log = open(os.path.join(TMP, "daemon.log"), "ab")
    return subprocess.Popen([DAEMON, "--backend", "mem"] + args, env=env, stdout=log, stderr=log)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


# --- READY=1 only when everything accepts; RELOADING/READY on SIGHUP; STOPPING on SIGTERM -----------
m = Manager("notify.sock")
io, disc, met = free_port(), free_port(), free_port()
run = os.path.join(TMP, "run")
conf = os.path.join(TMP, "conf.json")
with open(conf, "w") as f:
    f.write('{"log_level": "info"}\n')
ctl = os.path.join(run, "control.sock")
d = start(m.env, ["-c", conf, "-l", "127.0.0.1:%d" % io, "-d", "127.0.0.1:%d" % disc, "--metrics",
                  "127.0.0.1:%d" % met, "--run-dir", run])
before = []
ready, pid = m.wait_for("READY", 30, before)
if check(ready is not None and ready.get("READY") == "1", "READY=1 arrives (got %r)" % ready):
    # at once, before anything else: each of these must already accept
    up = {"NVMe/TCP 127.0.0.1:%d" % io: accepts(io), "discovery 127.0.0.1:%d" % disc: accepts(disc),
          "metrics 127.0.0.1:%d" % met: accepts(met)}
    if CONTROL:
        up["control socket " + ctl] = accepts(path=ctl)
    for what, ok in up.items():
        check(ok, "at READY=1 the %s accepts" % what)
    check(pid == d.pid, "READY=1 was sent by the daemon's main pid %d (NotifyAccess=main), got %s" % (d.pid, pid))
    check("STATUS" in ready and "serving" in ready["STATUS"], "READY=1 carries STATUS= (%r)" % ready.get("STATUS"))
check(all("READY" not in f for f in before), "no READY=1 before that one (%r)" % before)

d.send_signal(signal.SIGHUP)
reloading, _ = m.wait_for("RELOADING", 10)
check(reloading is not None and reloading.get("RELOADING") == "1", "SIGHUP: RELOADING=1 (%r)" % reloading)
check(reloading is not None and re.fullmatch(r"[0-9]+", reloading.get("MONOTONIC_USEC", "")) is not None,
      "RELOADING=1 comes with MONOTONIC_USEC= (systemd 253's Type=notify-reload needs it)")
again, _ = m.wait_for("READY", 10)
check(again is not None and again.get("READY") == "1", "after the reload: READY=1 again (%r)" % again)

d.send_signal(signal.SIGTERM)
stopping, _ = m.wait_for("STOPPING", 10)
check(stopping is not None and stopping.get("STOPPING") == "1", "SIGTERM: STOPPING=1 (%r)" % stopping)
check(stop(d) == 0, "the daemon exits 0")

# --- a daemon that cannot start never says READY=1 ----------------------------------------------------
busy = socket.socket()
busy.bind(("127.0.0.1", 0))
busy.listen(1)
m2 = Manager("notify2.sock")
d = start(m2.env, ["-l", "127.0.0.1:%d" % busy.getsockname()[1], "-d", "none", "--run-dir", run + "2"])
rc = d.wait(timeout=30)
check(rc == 1, "port in use: the daemon exits 1 (rc %d)" % rc)
seen = []
r, _ = m2.wait_for("READY", 0.5, seen)
check(r is None, "port in use: no READY=1 (messages: %r)" % seen)
busy.close()

# --- an abstract socket; a $NOTIFY_SOCKET that names nothing -------------------------------------------
m3 = Manager("nkv-notify-%d" % os.getpid(), abstract=True)
io = free_port()
d = start(m3.env, ["-l", "127.0.0.1:%d" % io, "-d", "none", "--run-dir", run + "3"])
r, _ = m3.wait_for("READY", 30)
check(r is not None and accepts(io), "abstract $NOTIFY_SOCKET (@name): READY=1 and the port accepts")
check(stop(d) == 0, "abstract socket: exit 0")

io = free_port()
d = start(os.path.join(TMP, "nobody-listens.sock"), ["-l", "127.0.0.1:%d" % io, "-d", "none", "--run-dir",
                                                      run + "4"])
deadline = time.monotonic() + 30
while time.monotonic() < deadline and d.poll() is None and not accepts(io):
    time.sleep(0.05)
check(d.poll() is None and accepts(io), "$NOTIFY_SOCKET naming no socket: the daemon serves anyway")
check(stop(d) == 0, "$NOTIFY_SOCKET naming no socket: exit 0")

subprocess.run(["rm", "-rf", TMP])
finish()
