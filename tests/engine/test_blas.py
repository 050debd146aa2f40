"""BLAS threads inside block tasks (dkapprox.engine._blas): one each under every scheduler, as on a
cluster (so a block's bits never depend on what runs beside it), and the user's own setting back after
every compute, whichever thread ran the last task."""

import threading

import dask
import dask.array as da
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from dkapprox import engine
from dkapprox.engine import _blas


def blas_threads():
    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})


class recorder:  # noqa: N801 (read as a function: recorder(seen, barrier) is the block function)
    """A block function that records the BLAS threads it runs with (after meeting its partner task)."""

    def __init__(self, seen, barrier=None):
        self.seen, self.barrier = seen, barrier

    def __call__(self, block, state):
        if self.barrier is not None:
            self.barrier.wait(timeout=30)  # two tasks running at once, for sure
        self.seen.append(blas_threads())
        if self.barrier is not None:
            self.barrier.wait(timeout=30)  # neither leaves before the other has looked
        return block[:, :1].copy()

    def __dask_tokenize__(self):  # array expressions tokenize a map_blocks function; a lock has no token
        return ("blas-recorder", id(self))


def graph(block_fn, n_blocks=4):
    X = da.ones((40 * n_blocks, 3), chunks=(40, 3))
    return engine.map_rows(X, block_fn, {"unused": 0}, n_out=1, dtype=X.dtype, name="blas-test")


def test_two_tasks_at_once_run_on_one_blas_thread_each_and_the_users_setting_comes_back():
    seen = []
    with threadpool_limits(limits=3, user_api="blas"):  # the user's own setting, above cores // 2 on 2 cores
        user = blas_threads()
        graph(recorder(seen, threading.Barrier(2))).compute(scheduler="threads", num_workers=2)
        after = blas_threads()
    assert user == [3]
    assert seen == [[1]] * 4
    assert after == user and _blas.limit() is None  # restored, whichever thread ran the last task


def test_one_task_at_a_time_runs_on_one_thread_too_so_a_blocks_bits_never_depend_on_the_scheduler():
    seen = []
    with threadpool_limits(limits=3, user_api="blas"):
        graph(recorder(seen)).compute(scheduler="sync")
        assert blas_threads() == [3]
    assert seen == [[1]] * 4


def test_the_same_block_gives_the_same_bits_alone_or_beside_another():
    """A product large enough for OpenBLAS to use its threads: computed alone (sync) and two at a
    time (threads), the bits agree, and equal NumPy's on the block under one BLAS thread."""
    rng = np.random.default_rng(0)  # 600 terms a product: OpenBLAS on two threads rounded 74% of it otherwise
    W = rng.standard_normal((600, 600)).astype(np.float32)
    X = rng.standard_normal((4_000, 600)).astype(np.float32)
    Xd = da.from_array(X, chunks=(1_000, 600))

    def product(block, state):
        return block @ state

    lazy = engine.map_rows(Xd, product, W, n_out=600, dtype=np.float32, name="bits-test")
    with threadpool_limits(limits=2, user_api="blas"):
        alone = lazy.compute(scheduler="sync")
        beside = lazy.compute(scheduler="threads", num_workers=2)
    with threadpool_limits(limits=1, user_api="blas"):
        numpy = np.concatenate([X[i:i + 1_000] @ W for i in range(0, 4_000, 1_000)])
    np.testing.assert_array_equal(alone, beside)
    np.testing.assert_array_equal(alone, numpy)


def test_a_lower_setting_of_the_user_is_never_raised():
    seen = []
    with threadpool_limits(limits=1, user_api="blas"):
        graph(recorder(seen, threading.Barrier(2))).compute(scheduler="threads", num_workers=2)
        assert blas_threads() == [1]
    assert seen == [[1]] * 4


def test_pass_functions_run_under_the_same_sharing():
    seen = []
    barrier = threading.Barrier(2)

    def chunk(block):
        barrier.wait(timeout=30)
        seen.append(blas_threads())
        barrier.wait(timeout=30)
        return block.sum()

    with threadpool_limits(limits=3, user_api="blas"):
        total = engine.tree_reduce(da.ones((80, 2), chunks=(40, 2)), chunk, sum)
        assert dask.compute(total, scheduler="threads", num_workers=2)[0] == 160
        assert blas_threads() == [3]
    assert seen == [[1]] * 2


def test_in_memory_blocks_run_two_at_a_time_on_one_blas_thread_each_in_order():
    seen, barrier = [], threading.Barrier(2)

    def block(i):
        barrier.wait(timeout=30)  # fails unless two calls run at once
        seen.append(blas_threads())
        barrier.wait(timeout=30)
        return i * i

    with threadpool_limits(limits=3, user_api="blas"):
        assert engine.map_in_threads(block, range(6), threads=2) == [0, 1, 4, 9, 16, 25]
        assert blas_threads() == [3]  # the user's setting back
    assert seen == [[1]] * 6


def test_one_in_memory_block_is_a_plain_call_in_the_callers_thread_on_blas_threads():
    """A one-row predict is one block: no thread pool to start, and its products on BLAS's own threads."""
    seen = []

    def block(i):
        seen.append((threading.current_thread(), blas_threads()))
        return i

    with threadpool_limits(limits=2, user_api="blas"):
        assert engine.map_in_threads(block, [7], threads=4) == [7]
        assert engine.map_in_threads(block, [8, 9], threads=1) == [8, 9]  # blocks: one BLAS thread each
    assert seen == [(threading.current_thread(), [2])] + [(threading.current_thread(), [1])] * 2


def test_in_memory_blocks_take_no_more_threads_than_blas_is_given_nor_any_off_the_main_thread():
    """threadpool_limits(1) (a dask worker process's, joblib's share) and a call from a dask task's thread run
    every block in the caller's thread: no cores oversubscribed."""
    def callers(threads):
        return set(engine.map_in_threads(lambda i: threading.current_thread(), range(4), threads=threads))

    with threadpool_limits(limits=1, user_api="blas"):
        assert callers(4) == {threading.current_thread()}
    found = []
    inner = threading.Thread(target=lambda: found.append((callers(4), threading.current_thread())))
    inner.start()
    inner.join(timeout=30)
    assert found and found[0][0] == {found[0][1]}


def test_in_memory_blocks_give_the_bits_of_a_dask_pass_whatever_the_threads():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((600, 600)).astype(np.float32)
    X = rng.standard_normal((4_000, 600)).astype(np.float32)
    blocks = lambda threads: engine.map_in_threads(lambda s: X[s:s + 1_000] @ W, range(0, 4_000, 1_000), threads)  # noqa: E731
    lazy = engine.map_rows(da.from_array(X, chunks=(1_000, 600)), lambda b, w: b @ w, W, n_out=600,
                           dtype=np.float32, name="bits-in-memory")
    with threadpool_limits(limits=2, user_api="blas"):
        one, two, dasks = np.concatenate(blocks(1)), np.concatenate(blocks(2)), lazy.compute(scheduler="threads")
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, dasks)


def test_in_memory_row_blocks_are_written_into_one_output_and_must_agree_on_its_dtype():
    X = np.arange(10.0)
    out = engine.map_rows_in_threads(X, lambda b, s: np.stack([b, b * s], axis=1), 2.0, rows=3, threads=2)
    np.testing.assert_array_equal(out, np.stack([X, 2 * X], axis=1))
    with pytest.raises(ValueError, match="block_fn must give every block one dtype and width"):
        engine.map_rows_in_threads(X, lambda b, s: b.astype(np.float32 if b[0] else np.float64), None, rows=3,
                                   threads=1)
