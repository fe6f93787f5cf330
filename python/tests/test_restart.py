# SPDX-License-Identifier: Apache-2.0
"""A daemon killed (SIGKILL) and started again under a batch load: the client's engine reconnects the
whole controller by itself, over NVMe/TCP and shm. Every batch ends (none hangs); each item is stored
or fails with a retryable errno (ENOTCONN: in flight when the connection went, it may have run;
EAGAIN: never sent); a batch after the restart succeeds within 2 s of it; every store reported by a
batch submitted after the restart reads back intact."""

import errno
import os
import shutil
import tempfile
import threading
import time

import pytest

from conftest import Daemon, _cluster_or_skip
from rados_nkv import BatchError, NkvError

RETRYABLE = (errno.ENOTCONN, errno.EAGAIN)
N, SIZE = 16, 4096
TIMEOUT_S = 5.0
RECOVERY_MAX_S = 2.0


@pytest.fixture
def own_daemon(request):
    """A daemon of this test's own (the session's stays up for the others)."""
    backend = request.config.getoption("--nkv-backend")
    backend = "mem" if backend == "all" else backend
    if backend == "rados":
        _cluster_or_skip()
    tmp = tempfile.mkdtemp(prefix="nkv-rs-")
    d = Daemon(backend, tmp)
    yield d
    d.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def test_kill_restart_under_batch_load(own_daemon, transport):
    c = own_daemon.connect(transport, queues=2, depth=16, timeout=TIMEOUT_S)
    stop = threading.Event()
    log = []  # (t_submit, t_end, keys, values, per-item errno or None)

    def load():
        seq = 0
        while not stop.is_set():
            keys = [b"rs%d.%d" % (seq, i) for i in range(N)]
            vals = [os.urandom(SIZE) for _ in range(N)]
            errs = [None] * N
            t0 = time.monotonic()
            try:
                c.store_many(keys, vals)
            except BatchError as e:
                for i, err in e.errors:
                    errs[i] = err.errno
            except NkvError as e:
                errs = [e.errno] * N
            log.append((t0, time.monotonic(), keys, vals, errs))
            seq += 1
            time.sleep(0.005)

    th = threading.Thread(target=load, daemon=True)
    th.start()
    try:
        time.sleep(0.3)
        t_up = own_daemon.kill_restart(0.5)
        time.sleep(1.5)
    finally:
        stop.set()
        th.join(TIMEOUT_S * 3)
    assert not th.is_alive(), "a batch never ended"

    bad = [(k, e) for _, _, keys, _, errs in log for k, e in zip(keys, errs) if e is not None and e not in RETRYABLE]
    assert not bad, "items failed with a non-retryable errno: %r" % bad[:5]
    worst = max(t1 - t0 for t0, t1, _, _, _ in log)
    assert worst < TIMEOUT_S + 3, "a batch took %.1f s" % worst
    ends = [t1 for _, t1, _, _, errs in log if t1 > t_up and None in errs]
    assert ends, "no item succeeded after the restart"
    recovery = min(ends) - t_up
    lost = sum(e == errno.ENOTCONN for *_, errs in log for e in errs)
    never = sum(e == errno.EAGAIN for *_, errs in log for e in errs)
    print("%s: %d batches, %d items lost in flight (ENOTCONN), %d never sent (EAGAIN); recovery "
          "(restart -> first success) %.0f ms" % (transport, len(log), lost, never, recovery * 1e3))
    assert recovery < RECOVERY_MAX_S, "first success %.0f ms after the restart" % (recovery * 1e3)

    # What batches submitted after the restart reported stored is there, intact (the mem backend lost
    # whatever the killed daemon had).
    keys = [k for t0, _, ks, _, errs in log if t0 > t_up for k, e in zip(ks, errs) if e is None]
    want = [v for t0, _, _, vs, errs in log if t0 > t_up for v, e in zip(vs, errs) if e is None]
    assert keys
    outs = [bytearray(SIZE) for _ in keys]
    assert c.retrieve_many(keys, outs) == [SIZE] * len(keys)
    assert outs == want
    c.close()


def test_reconnect_options(own_daemon, transport):
    """connect()'s reconnect_wait bounds how long a call waits for a lost gateway (EAGAIN, never
    sent), well before the command timeout; reconnect_max bounds the gap between tries, so the first
    call after the restart succeeds within about that gap."""
    with pytest.raises(ValueError):
        own_daemon.connect(transport, reconnect_min=0)
    with pytest.raises(ValueError):
        own_daemon.connect(transport, reconnect_min=0.5, reconnect_max=0.1)
    with pytest.raises(TypeError):
        own_daemon.connect(transport, reconnect_wait="1")
    c = own_daemon.connect(transport, queues=1, timeout=TIMEOUT_S, reconnect_min=0.02, reconnect_max=0.1,
                           reconnect_wait=0.3)
    c.store(b"before", b"x" * 64)
    own_daemon.kill()
    time.sleep(0.2)  # the engine notices the hang-up while idle
    t0 = time.monotonic()
    with pytest.raises(NkvError) as ei:
        c.store(b"while-down", b"y" * 64)
    waited = time.monotonic() - t0
    assert ei.value.errno in RETRYABLE, ei.value
    assert waited < 1.5, "a call waited %.2f s for a gateway that is down (reconnect_wait 0.3 s)" % waited
    t_up = own_daemon.restart()
    while True:
        try:
            c.store(b"after", b"z" * 64)
            break
        except NkvError as e:
            assert e.errno in RETRYABLE, e
            assert time.monotonic() - t_up < RECOVERY_MAX_S, "no success %.1f s after the restart" % RECOVERY_MAX_S
    recovery = time.monotonic() - t_up
    print("%s: a call failed after %.0f ms while down (reconnect_wait 300 ms); first success %.0f ms after "
          "the restart (reconnect_max 100 ms)" % (transport, waited * 1e3, recovery * 1e3))
    assert recovery < 0.6, "first success %.0f ms after the restart with reconnect_max 0.1 s" % (recovery * 1e3)
    c.close()


def test_reconnect_wait_zero_fails_fast(own_daemon, transport):
    """reconnect_wait=0: a call made while the gateway is away fails at once with EAGAIN."""
    c = own_daemon.connect(transport, queues=1, timeout=TIMEOUT_S, reconnect_wait=0)
    c.store(b"k", b"v")
    own_daemon.kill()
    time.sleep(0.2)
    t0 = time.monotonic()
    with pytest.raises(NkvError) as ei:
        c.store(b"k2", b"v")
    assert ei.value.errno in RETRYABLE, ei.value
    assert time.monotonic() - t0 < 0.2, "waited %.2f s with reconnect_wait=0" % (time.monotonic() - t0)
    own_daemon.restart()
    c.close()
