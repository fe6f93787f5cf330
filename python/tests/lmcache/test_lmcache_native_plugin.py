# SPDX-License-Identifier: Apache-2.0
"""NativePlugin driven the way LMCache's multi-process L2 adapter (NativeConnectorL2Adapter) drives
a native_plugin connector: submits from the caller's threads, and a demux thread that polls the
eventfd, drains completions and routes them by future id."""

import select
import threading
import uuid

import numpy as np
import pytest

from rados_nkv import NkvError, longname
from rados_nkv.lmcache import NativePlugin

REQUIRED = ["event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists", "drain_completions",
            "close"]


class Demux(threading.Thread):
    """LMCache's demux loop: poll(eventfd, 500 ms) -> drain_completions() -> route by future id."""

    def __init__(self, plugin):
        super().__init__(daemon=True)
        self.plugin = plugin
        self.results = {}
        self.problems = []
        self.cv = threading.Condition()
        self.halt = threading.Event()
        self.wakeups = 0
        self.empty = 0

    def run(self):
        poller = select.poll()
        poller.register(self.plugin.event_fd(), select.POLLIN)
        while not self.halt.is_set():
            if not poller.poll(100):
                continue
            comps = self.plugin.drain_completions()
            self.wakeups += 1
            if not comps:
                self.empty += 1
            with self.cv:
                for fid, ok, error, bools in comps:
                    if fid in self.results:
                        self.problems.append("future %d completed twice" % fid)
                    if not isinstance(ok, bool) or not isinstance(error, str):
                        self.problems.append("bad completion %r" % ((fid, ok, error, bools),))
                    self.results[fid] = (ok, error, bools)
                self.cv.notify_all()

    def wait(self, fid, timeout=30):
        with self.cv:
            assert self.cv.wait_for(lambda: fid in self.results, timeout), "future %d never completed" % fid
            return self.results.pop(fid)

    def stop(self):
        self.halt.set()
        self.join(5)


@pytest.fixture
def plugin(lmc_endpoint):
    p = NativePlugin(target=lmc_endpoint["target"], subnqn=lmc_endpoint["subnqn"], queues="2")
    d = Demux(p)
    d.start()
    yield p, d
    d.stop()
    p.close()
    assert not d.problems, d.problems


def names(n):
    base = "test-model-%s@0000000%d@0@" % (uuid.uuid4().hex[:8], 1)
    return [base + "%064x" % (i * 7919 + 1) for i in range(n)]


def test_has_the_methods_lmcache_requires():
    for m in REQUIRED + ["submit_batch_delete"]:
        assert callable(getattr(NativePlugin, m, None)), m


def test_set_exists_get_delete(plugin):
    p, d = plugin
    keys = names(8)
    rng = np.random.default_rng(1)
    # objects of several sizes; one is a 2-D memoryview (len() is its rows, nbytes its bytes)
    objs = [rng.integers(0, 256, size=4096 * (i + 1), dtype=np.uint8) for i in range(7)]
    objs.append(rng.integers(0, 256, size=(64, 256), dtype=np.uint8))
    views = [memoryview(o) for o in objs]
    assert len(views[7]) == 64 and views[7].nbytes == 16384

    f_set = p.submit_batch_set(keys, views)
    assert d.wait(f_set) == (True, "", [True] * 8)

    absent = names(2)
    f_ex = p.submit_batch_exists(keys[:3] + absent + keys[3:])
    assert d.wait(f_ex) == (True, "", [True] * 3 + [False] * 2 + [True] * 5)

    outs = [np.zeros_like(o) for o in objs]
    f_get = p.submit_batch_get(keys, [memoryview(o) for o in outs])
    assert d.wait(f_get) == (True, "", [True] * 8)
    for o, want in zip(outs, objs):
        assert np.array_equal(o, want)

    # a view of another size than the stored object, and an absent key: not loaded, not errors
    short = np.zeros(100, dtype=np.uint8)
    f_get2 = p.submit_batch_get([keys[0], absent[0]], [memoryview(short), memoryview(np.zeros(10, np.uint8))])
    assert d.wait(f_get2) == (True, "", [False, False])

    f_del = p.submit_batch_delete([keys[0], absent[0], keys[1]])
    assert d.wait(f_del) == (True, "", [True, False, True])
    f_ex2 = p.submit_batch_exists(keys[:3])
    assert d.wait(f_ex2) == (True, "", [False, False, True])

    fids = [f_set, f_ex, f_get, f_get2, f_del, f_ex2]
    assert len(set(fids)) == len(fids) and fids == sorted(fids)
    # everything drained: the eventfd is not readable (the demux thread does not spin)
    poller = select.poll()
    poller.register(p.event_fd(), select.POLLIN)
    assert poller.poll(0) == []
    assert d.empty <= 1, "%d of %d wakeups found nothing to drain" % (d.empty, d.wakeups)


def test_foreign_object_and_collision(plugin):
    p, d = plugin
    k_foreign, k_coll, k_real = names(3)
    # a foreign object under k_foreign's key; under k_coll's key, k_real's whole valid value
    p.client.store(longname.key_for(k_foreign), b"raw bytes, no header" * 50)
    data = np.arange(1000, dtype=np.uint8)
    assert d.wait(p.submit_batch_set([k_real], [memoryview(data)])) == (True, "", [True])
    p.client.store(longname.key_for(k_coll), p.client.retrieve(longname.key_for(k_real)))

    assert d.wait(p.submit_batch_exists([k_foreign, k_coll, k_real])) == (True, "", [False, False, True])
    outs = [np.zeros(1000, np.uint8) for _ in range(3)]
    r = d.wait(p.submit_batch_get([k_foreign, k_coll, k_real], [memoryview(o) for o in outs]))
    assert r == (True, "", [False, False, True]) and np.array_equal(outs[2], data)
    assert d.wait(p.submit_batch_delete([k_foreign, k_coll])) == (True, "", [False, False])
    assert p.client.retrieve(longname.key_for(k_foreign)) == b"raw bytes, no header" * 50   # left alone
    assert p.client.exist(longname.key_for(k_coll))


def test_empty_batches_complete(plugin):
    p, d = plugin
    for f in (p.submit_batch_exists([]), p.submit_batch_get([], []), p.submit_batch_set([], []),
              p.submit_batch_delete([])):
        assert d.wait(f) == (True, "", [])


def test_many_threads_many_batches(plugin):
    """4 submitting threads x 12 batches of set + get while the demux thread routes everything."""
    p, d = plugin
    errors = []

    def worker(w):
        try:
            rng = np.random.default_rng(w)
            for b in range(12):
                keys = names(4)
                objs = [rng.integers(0, 256, size=int(rng.integers(1, 70000)), dtype=np.uint8) for _ in keys]
                r = d.wait(p.submit_batch_set(keys, [memoryview(o) for o in objs]))
                if r != (True, "", [True] * 4):
                    errors.append(("set", w, b, r))
                outs = [np.zeros_like(o) for o in objs]
                r = d.wait(p.submit_batch_get(keys, [memoryview(o) for o in outs]))
                if r != (True, "", [True] * 4) or not all(np.array_equal(a, o) for a, o in zip(outs, objs)):
                    errors.append(("get", w, b, r))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(("exception", w, repr(e)))

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors[:5]


def test_bad_arguments_and_close(lmc_endpoint):
    p = NativePlugin(target=lmc_endpoint["target"], subnqn=lmc_endpoint["subnqn"])
    with pytest.raises(ValueError):
        p.submit_batch_get(["a"], [])
    with pytest.raises(TypeError):
        p.submit_batch_get(["a"], [memoryview(b"read-only")])
    with pytest.raises(ValueError):
        p.submit_batch_exists([""])
    p.close()
    p.close()
    with pytest.raises(NkvError, match="closed"):
        p.submit_batch_exists(["x"])
    with pytest.raises(ValueError, match="queues"):
        NativePlugin(target=lmc_endpoint["target"], queues=0)
