"""Block outputs that reuse the memory of earlier ones nothing refers to (dkapprox.backends._recycle)."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest

import dkapprox
from dkapprox.backends import _recycle
from dkapprox.backends._recycle import MIN_BYTES, Recycler

ROWS = MIN_BYTES // (1024 * 4) + 8  # a float32 (ROWS, 1024) output is just over the smallest recycled size


def address(a):
    return a.__array_interface__["data"][0]


def _pickled_out_of_band(a):
    frames = []
    pickle.dumps(a, protocol=5, buffer_callback=frames.append)
    return frames


HOLDERS = {  # what can keep an output alive without being it, and how to read the values back
    "a view": (lambda a: a[:, :1], np.asarray),
    "a memoryview": (lambda a: memoryview(a[5:]), np.asarray),
    "a pickle's out-of-band buffer": (_pickled_out_of_band, lambda f: np.frombuffer(f[0].raw(), np.float32)),
}


def test_a_dropped_output_is_reused_and_one_still_referred_to_never_is():
    r = Recycler()
    a = r.empty((ROWS, 1024), np.float32)
    first = address(a)
    assert a.shape == (ROWS, 1024) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    del a
    b = r.empty((ROWS, 1024), np.float32)
    assert address(b) == first and r.reused == 1
    for name, (hold, read) in HOLDERS.items():
        b.fill(7)
        kept = hold(b)
        del b
        c = r.empty((ROWS, 1024), np.float32)
        assert address(c) != first, name
        c.fill(1)
        assert (read(kept) == 7).all(), name
        del kept, c
        b = r.empty((ROWS, 1024), np.float32)  # both free now: the first one is taken again
        assert address(b) == first, name
    assert r.held_bytes() >= 2 * MIN_BYTES and len(r._held) == 2


def test_outputs_taken_by_many_threads_at_once_never_share_memory():
    """Four threads, released together by a barrier, take outputs while the others hold theirs."""
    r = Recycler()
    n, rounds = 4, 6
    barrier = threading.Barrier(n, timeout=60)
    addresses, errors = [[None] * n for _ in range(rounds)], []

    def work(k):
        for i in range(rounds):
            barrier.wait()  # all take at once (the last round's outputs are dropped: free to reuse)
            a = r.empty((ROWS, 1024), np.float32)
            addresses[i][k] = address(a)
            a.fill(k * 100 + i)
            barrier.wait()  # every output of this round is live and written
            if not (a[:: 997] == k * 100 + i).all():
                errors.append((k, i))
            barrier.wait()
            del a

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    with dask.config.set({"dkapprox.recycle.idle-seconds": 600}):  # no sweep between rounds on a slow machine
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and not errors
    assert all(len(set(round_)) == n for round_ in addresses)  # live outputs never share memory
    assert r.reused >= n * (rounds - 1)  # and every round after the first took the last round's memory


def test_free_memory_is_unmapped_after_the_idle_time_and_beyond_max_free():
    r = Recycler()
    with dask.config.set({"dkapprox.recycle.idle-seconds": 0.2, "dkapprox.recycle.max-free": 1}):
        kept = [r.empty((ROWS, 1024), np.float32) for _ in range(3)]
        assert len(r._held) == 3
        kept.clear()
        r.empty((100, 1024), np.float32)  # small: a plain array, no trim
        assert len(r._held) == 3
        out = r.empty((ROWS, 1024), np.float32)  # reuses one and unmaps all free but one
        assert r.reused == 1 and len(r._held) == 2
        deadline = time.monotonic() + 10
        while len(r._held) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(r._held) == 1 and r.held_bytes() >= out.nbytes  # the free one went; the busy one stays
        del out
        while r._held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.held_bytes() == 0


def test_max_free_zero_gives_plain_arrays_and_bad_settings_are_value_errors():
    r = Recycler()
    with dask.config.set({"dkapprox.recycle.max-free": 0}):
        a = r.empty((ROWS, 1024), np.float32)
    assert a.flags.owndata and r.held_bytes() == 0
    for key, value in [("max-free", -1), ("max-free", 2.5), ("max-free", True), ("idle-seconds", -1.0),
                       ("idle-seconds", "2"), ("idle-seconds", float("nan"))]:
        with dask.config.set({f"dkapprox.recycle.{key}": value}), \
                pytest.raises(ValueError, match=f"dkapprox.recycle.{key} must be"):
            r.empty((ROWS, 1024), np.float32)


def test_a_forked_child_has_its_own_recycler():
    held = _recycle.empty((ROWS, 1024), np.float32)
    held.fill(3)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply(_child_takes_two, (), ) == (True, 0)
    assert (held[:: 1001] == 3).all()


def test_a_forked_childs_writes_to_an_inherited_output_are_its_own():
    # an output is memory the process holds, not shared memory: a child's writes never reach the
    # parent (with mmap's default MAP_SHARED they did: the parent read the child's 7s)
    held = _recycle.empty((ROWS, 1024), np.float32)
    held.fill(3)
    pid = os.fork()
    if pid == 0:  # the child: write, then leave at once (no pytest teardown in it)
        try:
            held.fill(7)
            os._exit(0 if held[0, 0] == 7 else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (held[:: 1001] == 3).all()


def _child_takes_two():
    a = _recycle.empty((ROWS, 1024), np.float32)
    first = address(a)
    del a
    b = _recycle.empty((ROWS, 1024), np.float32)
    return address(b) == first, len(_recycle._RECYCLER._held) - 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_features_through_dask_with_recycled_blocks_equal_fresh_ones(dtype):
    """Blocks reduced as they are made reuse memory; blocks all held at once (compute) never do."""
    X = da.random.default_rng(0).random((4 * ROWS, 16), chunks=(ROWS, 16)).astype(dtype)
    est = dkapprox.RBFSampler(n_components=1024, random_state=0).fit(X[:100].compute())
    with dask.config.set({"dkapprox.recycle.max-free": 0}):
        fresh = est.transform(X).compute(scheduler="sync")
    before = _recycle._RECYCLER.reused
    sums = est.transform(X).sum(axis=1).compute(scheduler="sync")
    assert _recycle._RECYCLER.reused > before
    held = est.transform(X).compute(scheduler="threads", num_workers=2)
    np.testing.assert_array_equal(held, fresh)
    np.testing.assert_array_equal(sums, fresh.sum(axis=1))


def test_by_default_a_wave_of_one_output_a_core_is_kept_for_the_next_wave(monkeypatch):
    """The threaded scheduler frees one output a core at once; the next wave takes them all."""
    wave = 6  # a 6-core machine: more than the 4 kept before
    monkeypatch.setattr(os, "cpu_count", lambda: wave)
    recycler = Recycler()
    outs = [recycler.empty((MIN_BYTES // 4,), np.float32) for _ in range(wave)]
    del outs
    again = [recycler.empty((MIN_BYTES // 4,), np.float32) for _ in range(wave)]
    assert recycler.reused == wave
    assert len(again) == wave
