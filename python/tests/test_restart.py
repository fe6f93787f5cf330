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
