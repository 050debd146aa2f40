"""Block functions through the array API, checked on the CPU with array-api-strict.

array-api-strict's ``Device('device1')`` behaves as a GPU does for CuPy: NumPy refuses to
convert its arrays ("Can't convert array on the ... device to a NumPy array") and arrays of
two devices do not mix. So a block function that calls NumPy on its block, or forgets to
move a part of its state to the block's device, fails here, on a CPU, as it would on a GPU.
NumPy in stays on NumPy's path (compiled kernels and all): its output is what it was.
"""

import gc
import subprocess
import sys

import array_api_strict as xs
import numpy as np
import pytest
from _estimators import CONTRACT
from _rounding import assert_chunking_promise

import dkapprox
from dkapprox import _registry, engine
from dkapprox.backends import _stats, _xp
from dkapprox.engine import _blocks
from dkapprox.kernel_approximation.rbf import fourier_features

DEVICE = xs.Device("device1")
CPU = xs.Device("CPU_DEVICE")
ON_HOST_ONLY = {"RandomBinningFeatures"}

NYSTROEM_KERNELS = [dict(kernel=k, n_components=25, random_state=0)
                    for k in ("rbf", "laplacian", "linear", "polynomial", "sigmoid", "cosine", "chi2",
                              "additive_chi2")]
CASES = [(cls, params) for cls in _registry.TRANSFORMERS if cls.__name__ not in ON_HOST_ONLY
         for params in CONTRACT[cls.__name__]]
CASES += [(dkapprox.Nystroem, params) for params in NYSTROEM_KERNELS]
CASES += [(dkapprox.RandomFourierFeatures, dict(n_components=40, features="sincos", random_state=2)),
          (dkapprox.RandomFourierFeatures, dict(n_components=40, sampling="structured", random_state=2)),
          (dkapprox.PolynomialCountSketch, dict(n_components=32, random_state=2)),
          (dkapprox.AdditiveChi2Sampler, dict(sample_steps=1))]


def on_device(a):
    return xs.asarray(a, device=DEVICE)


def to_host(a):
    return np.asarray(a.to_device(CPU))


def data(dtype=np.float64, n=230, d=7):
    X = np.random.default_rng(0).random((n, d)).astype(dtype)
    X[::7, 2] = 0.0  # zeros: the additive chi2 map's own case
    return X


def case_id(case):
    cls, params = case
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in params.items() if k != "random_state")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_a_device_array_in_gives_an_array_of_its_namespace_on_its_device_within_the_bound(case, dtype):
    cls, params = case
    X = data(dtype)
    est = cls(**params).fit(data(dtype))
    expected = est.transform(X)  # NumPy's path, as before
    got = est.transform(on_device(X))
    assert _xp.namespace(got) is xs and got.device == DEVICE
    assert _xp.numpy_dtype(got) == expected.dtype
    assert got.shape == expected.shape
    assert_chunking_promise(est, X, to_host(got), expected, what=f"{case_id(case)} on array-api-strict")


def test_precomputed_nystroem_takes_the_landmark_columns_on_the_device():
    X = data()
    K = X @ X.T
    est = dkapprox.Nystroem(kernel="precomputed", n_components=30, random_state=0).fit(K)
    got = est.transform(on_device(K))
    assert got.device == DEVICE
    np.testing.assert_allclose(to_host(got), est.transform(K), rtol=1e-12, atol=1e-12)


def test_a_callable_nystroem_kernel_says_it_runs_on_numpy_blocks_only():
    est = dkapprox.Nystroem(kernel=lambda x, y: float(x @ y), n_components=10, random_state=0).fit(data(n=40))
    with pytest.raises(TypeError, match="runs on NumPy blocks only"):
        est.transform(on_device(data(n=40)))


def test_random_binning_stays_on_the_host_and_says_how_to_get_there():
    est = dkapprox.RandomBinningFeatures(n_components=32, n_grids=4, random_state=0).fit(data())
    with pytest.raises(TypeError, match=r"runs on NumPy blocks only.*copy it to the host first"):
        est.transform(on_device(data()))


def test_a_fit_on_a_device_array_draws_the_same_numpy_state_as_on_numpy():
    X = data(np.float32)
    on_numpy = dkapprox.RBFSampler(gamma="scale", n_components=20, random_state=3).fit(X)
    on_dev = dkapprox.RBFSampler(gamma="scale", n_components=20, random_state=3).fit(on_device(X))
    assert isinstance(on_dev.random_weights_, np.ndarray) and on_dev.random_weights_.dtype == np.float32
    np.testing.assert_array_equal(on_dev.random_weights_, on_numpy.random_weights_)
    assert on_dev._gamma == on_numpy._gamma


def test_the_state_reaches_a_device_once_whatever_the_number_of_blocks():
    est = dkapprox.RBFSampler(n_components=16, random_state=0).fit(data())
    state = est._state(np.dtype(np.float64))
    before = _xp.copies["count"]
    blocks = [on_device(b) for b in np.array_split(data(), 5)]
    # the engine's own task function, as a worker runs it: the shipped state object, block after block
    outs = [_blocks._run_block(b, state, fourier_features, None) for b in blocks]
    assert _xp.copies["count"] - before == 1
    np.testing.assert_allclose(np.vstack([to_host(o) for o in outs]),
                               np.vstack([fourier_features(to_host(b), state) for b in blocks]), atol=1e-12)
    # another device is another copy; the copy goes when the shipped state does
    _blocks._run_block(xs.asarray(data(), device=xs.Device("device2")), state, fourier_features, None)
    assert _xp.copies["count"] - before == 2
    keys = [k for k in _xp._cache if k[0] == id(state)]
    assert len(keys) == 2
    del state, outs
    gc.collect()
    assert not [k for k in _xp._cache if k in keys]


@pytest.mark.parametrize("bad, message", [
    (np.nan, "Input X contains NaN"),
    (np.inf, "Input X contains infinity"),
])
def test_bad_values_on_a_device_raise_scikit_learns_messages(bad, message):
    est = dkapprox.RBFSampler(n_components=8, random_state=0).fit(data())
    X = data()
    X[3, 1] = bad
    with pytest.raises(ValueError, match=message):
        est.transform(on_device(X))


def test_device_input_is_checked_as_scikit_learn_checks_numpy():
    est = dkapprox.RBFSampler(n_components=8, random_state=0).fit(data())
    with pytest.raises(ValueError, match="X has 3 features, but RBFSampler is expecting 7 features"):
        est.transform(on_device(data(d=3)))
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        est.transform(on_device(data()[:, 0]))
    with pytest.raises(ValueError, match="Negative values in data passed to X in AdditiveChi2Sampler"):
        dkapprox.AdditiveChi2Sampler().fit(data()).transform(on_device(-data()))
    with pytest.raises(ValueError, match="X may not contain entries smaller than -skewedness"):
        dkapprox.SkewedChi2Sampler(n_components=8, random_state=0).fit(data()).transform(on_device(data() - 5))
    integers = est.transform(on_device(np.arange(70).reshape(10, 7)))  # cast to float64, as scikit-learn does
    assert _xp.numpy_dtype(integers) == np.float64


def test_the_variance_pass_reduces_a_device_block_where_it_lives():
    X = data()
    got, expected = _stats.moments(on_device(X)), _stats.moments(X)
    assert got[0] == expected[0] and got[3] == expected[3]
    np.testing.assert_allclose(got[1:3], expected[1:3], rtol=1e-12)


def test_numpy_input_imports_neither_cupy_nor_array_api_compat():
    code = ("import sys, numpy as np, dask.array as da, dkapprox\n"
            "X = np.random.default_rng(0).random((50, 4))\n"
            "dkapprox.RBFSampler(n_components=8).fit_transform(X)\n"
            "dkapprox.Nystroem(n_components=8).fit(X).transform(da.from_array(X, chunks=10)).compute()\n"
            "print(sorted(m for m in ('cupy', 'array_api_compat', 'array_api_strict') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_nystroem_fit_on_a_device_array_decomposes_its_landmark_kernel_there():
    X = data(n=300)
    on_numpy = dkapprox.Nystroem(n_components=60, random_state=0).fit(X)
    calls = []
    eigh = xs.linalg.eigh
    xs.linalg.eigh = lambda a: calls.append(a.device) or eigh(a)
    try:
        on_dev = dkapprox.Nystroem(n_components=60, random_state=0).fit(on_device(X))
    finally:
        xs.linalg.eigh = eigh
    assert calls == [DEVICE]  # the eigendecomposition ran on the data's device, once
    assert isinstance(on_dev.normalization_, np.ndarray) and on_dev.normalization_.dtype == np.float64
    np.testing.assert_array_equal(on_dev.components_, on_numpy.components_)
    # the same inverse square root from another eigensolver: within its rounding, scaled by the largest entry
    scale = np.abs(on_numpy.normalization_).max()
    np.testing.assert_allclose(on_dev.normalization_, on_numpy.normalization_, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("landmarks, n_landmarks", [("uniform", None), ("kmeans", None), ("leverage", None),
                                                    ("rpcholesky", None), ("leverage", 48)])
def test_landmark_passes_over_dask_blocks_on_a_device_choose_what_numpy_blocks_choose(landmarks, n_landmarks):
    import dask.array as da

    X = data(n=1_200)
    host = da.from_array(X, chunks=(300, -1))
    # blocks on the device behind NumPy meta (array-api-strict arrays cannot be dask's meta): every
    # pass's block function meets device arrays, as with dask arrays of CuPy chunks
    dev = host.map_blocks(on_device, dtype=X.dtype, meta=np.empty((0, 0)))
    params = dict(n_components=24, n_landmarks=n_landmarks, landmarks=landmarks, random_state=0)
    want = dkapprox.Nystroem(**params).fit(host)
    got = dkapprox.Nystroem(**params).fit(dev)
    assert isinstance(got.components_, np.ndarray)
    assert got.landmark_passes_ == want.landmark_passes_
    np.testing.assert_array_equal(got.component_indices_, want.component_indices_)
    # Lloyd's float64 sums in another order (a product with the one-hot assignments on the device)
    np.testing.assert_allclose(got.components_, want.components_, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad, message", [
    (np.nan, "Input X contains NaN"),
    (-1.0, "Negative values in data passed to X in AdditiveChi2Sampler"),
])
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the map of the bad block, queued
def test_a_bad_device_block_raises_after_its_work_is_queued(bad, message):
    """The check of a device block in a dask task is waited for after the block's work."""
    import dask.array as da

    X = data()
    X[200, 1] = bad
    est = dkapprox.AdditiveChi2Sampler().fit(np.abs(data()))
    # blocks on the device behind NumPy meta, as in the landmark test above
    lazy = da.from_array(X, chunks=(50, -1)).map_blocks(on_device, dtype=X.dtype, meta=np.empty((0, 0)))
    with pytest.raises(ValueError, match=message):
        est.transform(lazy).compute(scheduler="threads", num_workers=4)


@pytest.mark.parametrize("turns", [True, False])
def test_one_thread_at_a_time_queues_work_on_a_device(turns):
    """Device block tasks of dask's threaded scheduler take turns on their device; NumPy blocks never wait."""
    import threading
    import time

    import dask
    import dask.array as da

    running, most, lock = [0], [0], threading.Lock()

    def block_fn(block, state):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return np.zeros(block.shape)

    X = da.from_array(data(n=80), chunks=(10, -1)).map_blocks(on_device, dtype=np.float64, meta=np.empty((0, 0)))
    with dask.config.set({"dkapprox.device-turns": turns}):
        Z = engine.map_rows(X, block_fn, None, n_out=7, dtype=np.float64, name="turns")
        Z.compute(scheduler="threads", num_workers=4)
    assert most[0] == 1 if turns else most[0] > 1
    running[0] = most[0] = 0
    host = da.from_array(data(n=80), chunks=10)
    Z = engine.map_rows(host, block_fn, None, n_out=7, dtype=np.float64, name="turns-host")
    Z.compute(scheduler="threads", num_workers=4)
    assert most[0] > 1
