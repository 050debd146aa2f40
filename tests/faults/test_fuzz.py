"""Property-based input fuzzing of every estimator (issue 7, scenario 5).

Hypothesis draws an input (1-60 rows, 1-8 features; a dtype among float16/32/64,
int8/32/64, uint8, bool, object of floats, object and NumPy arrays of strings,
complex64/128; one NaN, infinity, negative, too-small, overflowing or
non-numeric value in one element of one block; C, Fortran, strided or
reversed-column layout, read-only or not; row chunks with empty blocks,
column chunks, unknown (NaN) chunk sizes from a boolean mask or a dask
dataframe; CSR/CSC with explicit zeros) and takes it through ``fit`` and
``transform`` of every estimator in ``tests/_estimators.py``, on NumPy and on
dask. The property, for each input:

* the dask result equals the NumPy result (same dtype, same shape, values to
  a tolerance per dtype; RandomBinningFeatures exactly, its cells are integers),
  and the NumPy result does not depend on layout or read-only flags, and sparse
  input (explicit zeros included) gives the dense input's result;
* or both raise ``ValueError``/``TypeError`` whose message names what
  :func:`_fuzz_inputs.problems` finds wrong with the data itself (``contains
  NaN``, ``contains infinity``, ``Negative values``, ``Complex data not
  supported``, ...): a success where the data is bad, an error where it is
  good, another exception type (IndexError, ZeroDivisionError, dask
  internals), a message that names nothing, or no answer within the time
  limit all fail;
* scikit-learn's estimator of the same name, on the same NumPy input, gives
  the same numbers or the same kind of error, except where dkapprox deviates
  on purpose (:func:`sklearn_deviation` lists each case and why).

Examples come from a fixed seed per test (CI sees the same ones every run) and are counted; each
test prints how many it tried and checks that it tried them all.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
import warnings
import zlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.kernel_approximation as sk_kernel_approximation
import sklearn.random_projection as sk_random_projection
from _estimators import CONTRACT_ESTIMATORS, ident
from _rounding import assert_within_bound, restriction_bound, transform_bound
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import DataDimensionalityWarning
from sklearn.metrics.pairwise import pairwise_kernels

import dkapprox
from dkapprox.linear_model import Ridge

sys.path.insert(0, str(Path(__file__).parent))
import _fuzz_inputs as fz  # noqa: E402

#: Examples whose body ran to the end, per test id (printed, and checked against max_examples).
TRIED = Counter()
#: Seconds one example may take before it counts as a hang (a few ms is usual).
TIME_LIMIT = 30
#: Multiplies every test's number of examples (DKAPPROX_FUZZ_SCALE=20 for a deeper local search).
SCALE = float(os.environ.get("DKAPPROX_FUZZ_SCALE", "1"))


def examples(n):
    return max(1, int(n * SCALE))


def fuzz_settings(n, test_id):
    """``n`` examples from a fixed seed per test (reproducible in CI, different for each estimator:
    ``derandomize=True`` would give every parametrized copy of a test the same examples)."""
    settings_ = settings(max_examples=n, deadline=None, database=None, print_blob=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

    def decorate(test):
        return seed(zlib.crc32(test_id.encode()))(settings_(test))

    return decorate


@pytest.fixture(scope="module", autouse=True)
def report_counts(request):
    yield
    lines = [f"  {name}: {count}" for name, count in sorted(TRIED.items())]
    lines += [f"  scikit-learn deviations met: {dict(sorted(DEVIATIONS.items()))}"]
    text = "\n".join([f"hypothesis examples tried in {Path(__file__).name}: {sum(TRIED.values())}", *lines])
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + text)


@pytest.fixture(autouse=True)
def synchronous():
    """Tasks in this thread unless a test asks for threads (a cluster another module left as the
    default client must not take these computations)."""
    with dask.config.set(scheduler="synchronous"):
        yield


def run_counted(test_id, fuzz, n):
    """Run the Hypothesis test ``fuzz`` and check that all of its ``n`` examples ran to the end."""
    before = TRIED[test_id]
    fuzz()
    tried = TRIED[test_id] - before
    assert tried >= n, f"{test_id}: only {tried} of {n} examples ran"


# -- outcomes -------------------------------------------------------------------------
class Hang(Exception):
    """No answer within TIME_LIMIT seconds."""


@contextmanager
def time_limit(seconds=TIME_LIMIT):
    def alarm(signum, frame):
        raise Hang(f"no answer after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    value: object = None
    error: BaseException | None = None
    trace: str = ""

    @property
    def ok(self):
        return self.error is None


def attempt(fn):
    try:
        return Outcome(value=fn())
    except Exception as exc:  # every exception is judged by check_outcome
        return Outcome(error=exc, trace=traceback.format_exc())


@contextmanager
def quiet():
    """Warnings that valid small inputs give on purpose (n_components above the data's size)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataDimensionalityWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


def fit_transform(est, X):
    with quiet():
        fitted = clone(est).fit(X)
        return fitted.transform(X)


def fit_transform_dask(est, Xd):
    """Fit and transform lazily, compute, and check the declared metadata against the blocks."""
    with quiet():
        fitted = clone(est).fit(Xd)
        lazy = fitted.transform(Xd)
    assert isinstance(lazy, da.Array), type(lazy)
    out = lazy.compute()
    assert out.dtype == lazy.dtype, (lazy.dtype, out.dtype)
    assert sp.issparse(out) == sp.issparse(lazy._meta)
    assert out.shape[1] == lazy.shape[1]
    if not np.isnan(lazy.shape[0]):
        assert out.shape[0] == lazy.shape[0]
    return out


def check_outcome(label, outcome, expected):
    """Success on good data; on bad data a ValueError/TypeError whose message names the problem."""
    if outcome.ok:
        assert not expected, f"{label}: a result for an input with {sorted(expected)}"
        return
    exc = outcome.error
    assert fz.explains(exc, expected), (
        f"{label}: {type(exc).__name__}: {exc}\n(the input has {sorted(expected) or 'no problem'})\n"
        f"{outcome.trace}")


def dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def tolerance(dtype, scale, amplified=False):
    """Same arithmetic: a few ulps. ``amplified``: another arithmetic (sparse against dense
    products) whose rounding is multiplied: by Nystroem's K^(-1/2), up to 1/sqrt(its cut-off),
    sqrt(n_components * eps) ~ 7e-8 in float64, sqrt(eps(float32)) ~ 3e-4 in float32; and in
    float32 by the size of cos's argument |x.w| (heavy-tailed laplacian and cauchy frequencies:
    hundreds, so 1e-5 absolute). A mishandled zero or NaN is off by O(1) and still fails."""
    if np.dtype(dtype) == np.float32:
        return dict(rtol=1e-3, atol=1e-3 * scale) if amplified else dict(rtol=2e-5, atol=2e-6 * scale)
    return dict(rtol=1e-7, atol=1e-7 * scale) if amplified else dict(rtol=1e-10, atol=1e-12 * scale)


def amplifies(est):
    return isinstance(est, dkapprox.Nystroem)


def rounding_picks_landmarks(est):
    """k-means++ seeds and leverage-score keys are discrete choices made from distances, which
    sparse and dense products round differently: sparse and dense input may choose different
    landmarks (scikit-learn's own kmeans_plusplus picks other seeds for the CSR copy of the same
    data in 11 of 300 small random cases), so only sparse NumPy against sparse dask is compared."""
    return isinstance(est, dkapprox.Nystroem) and est.landmarks in ("kmeans", "leverage")


def assert_same(got, expected, label, exact=False, check_dtype=True, amplified=False):
    assert sp.issparse(got) == sp.issparse(expected) or not check_dtype, (label, type(got), type(expected))
    got, expected = dense(got), dense(expected)
    assert got.shape == expected.shape, (label, got.shape, expected.shape)
    if check_dtype:
        assert got.dtype == expected.dtype, (label, got.dtype, expected.dtype)
    if exact:
        np.testing.assert_array_equal(got, expected, err_msg=label)
        return
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got, expected, err_msg=label, **tolerance(got.dtype, scale, amplified))


def fit_reads_data(est):
    """Fits whose state is a statistic of the data (a variance, k-means centroids, leverage-ranked
    landmarks): on dask it folds the blocks in another order, so its state is not NumPy's."""
    return (isinstance(est, dkapprox.RBFSampler) and est.gamma == "scale") or rounding_picks_landmarks(est)


def assert_promise(est, X, got, expected, label, sparse_vs_dense=False):
    """dkapprox against itself on the same values (another chunking, layout, sparse or dense, dask
    or NumPy): within the rounding bound of tests/_rounding.py for the state NumPy fits on ``X``.
    Where the fit reads the data, the two states also differ by their own rounding: the two
    differences add, so the bound is widened by the tolerance above; so is Nystroem's for
    sparse against dense input, whose normalization (an inverse square root of the landmarks'
    kernel) comes from a kernel rounded another way (``amplifies``). A rank-restricted
    Nystroem's state (``n_landmarks > n_components``) reads the data too, the top eigenvectors of
    a Gram matrix summed over the rows in each fit's own order: ``restriction_bound`` derives what
    that moves the features by (tests/_rounding.py), the term the fixed-state bound misses."""
    with quiet():
        fitted = clone(est).fit(X)
        checked = fitted._check(X, reset=False)
    got, expected = dense(got), dense(expected)
    assert got.dtype == expected.dtype, (label, got.dtype, expected.dtype)
    bound = transform_bound(fitted, checked)
    if isinstance(fitted, dkapprox.Nystroem):
        bound = bound + restriction_bound(fitted, checked)
    amplified = sparse_vs_dense and amplifies(est)
    if fit_reads_data(est) or amplified:
        finite = np.abs(expected[np.isfinite(expected)])
        tol = tolerance(got.dtype, max(1.0, float(finite.max())) if finite.size else 1.0, amplified)
        bound = bound + tol["atol"] + tol["rtol"] * np.abs(expected)
    assert_within_bound(got, expected, bound, label)


def exact_for(est):
    """Random binning puts each row in integer cells: any difference is a different cell."""
    return isinstance(est, dkapprox.RandomBinningFeatures)


# -- scikit-learn as the oracle ------------------------------------------------------------
def sklearn_twin(est):
    """scikit-learn's estimator of the same name and parameters (None where there is none)."""
    name = type(est).__name__
    if name == "Nystroem":
        if not (isinstance(est.landmarks, str) and est.landmarks == "uniform") or est.n_landmarks is not None:
            return None  # k-means, leverage and rpcholesky landmarks and the rank restriction are dkapprox's own
        params = {k: v for k, v in est.get_params().items()
                  if k not in ("landmarks", "landmark_params", "n_landmarks")}
        return sk_kernel_approximation.Nystroem(**params)
    cls = getattr(sk_kernel_approximation, name, None) or getattr(sk_random_projection, name, None)
    return None if cls is None else cls(**est.get_params())


def sklearn_fit_transform(est, X):
    with quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log(0) of AdditiveChi2Sampler's explicit zeros
        fitted = est.fit(X)
        return fitted, fitted.transform(X)


def sklearn_deviation(est, X, ours, theirs):
    """Why dkapprox may answer differently from scikit-learn on this input, or None.

    Each is a deliberate, documented deviation:

    * ``str-dtype``: arrays of numeric strings (NumPy 'U' dtype) are converted to
      float, as scikit-learn's random projections and all estimators' object
      arrays do; most scikit-learn estimators' ``fit`` refuses the 'U' dtype.
    * ``chi2-read-only``: scikit-learn's chi2 kernel fails on read-only arrays
      ("buffer source array is read-only"); dkapprox's Nystroem computes it.
    * ``chi2-explicit-zeros``: scikit-learn's AdditiveChi2Sampler maps explicitly
      stored zeros of sparse input to NaN (log(0)); dkapprox maps them to 0, as
      every other zero.
    * ``integer-chi2``: AdditiveChi2Sampler converts non-float input (ints,
      bool, float16) to float64; scikit-learn keeps the dtype and truncates.
    * ``float16-scale``: RBFSampler(gamma='scale') computes the variance of
      float16 input after the float64 conversion; scikit-learn in float16.
    * ``nystroem-conditioning``: Nystroem's normalization drops eigenvalues below
      a relative cut-off where scikit-learn clips singular values at 1e-12: the
      numbers agree only for a well-conditioned landmark kernel.
    * ``float32-sketch``: PolynomialCountSketch keeps float32 (scikit-learn: float64).
    """
    name = type(est).__name__
    dtype = getattr(X, "dtype", None)
    if dtype is not None and dtype.kind == "U" and not theirs.ok and "bytes/strings" in str(theirs.error):
        return "str-dtype"
    if (not theirs.ok and "buffer source array is read-only" in str(theirs.error)
            and name == "Nystroem" and not sp.issparse(X) and not X.flags.writeable):
        return "chi2-read-only"
    if ours.ok and theirs.ok:
        if name == "AdditiveChi2Sampler" and dtype not in (np.float32, np.float64):
            return "integer-chi2"
        if name == "AdditiveChi2Sampler" and sp.issparse(X) and (X.data == 0).any():
            return "chi2-explicit-zeros"
        if name == "RBFSampler" and est.gamma == "scale" and dtype == np.float16:
            return "float16-scale"
    return None


def nystroem_well_conditioned(fitted):
    K = pairwise_kernels(fitted.components_, metric=fitted.kernel, filter_params=True,
                         **{k: v for k, v in (("gamma", fitted.gamma), ("degree", fitted.degree),
                                              ("coef0", fitted.coef0)) if v is not None})
    return np.linalg.cond(dense(K)) < 1e6


def check_against_sklearn(est, X, ours, expected):
    twin = sklearn_twin(est)
    if twin is None:
        return None
    theirs = attempt(lambda: sklearn_fit_transform(twin, X))
    deviation = sklearn_deviation(est, X, ours, theirs)
    if deviation == "chi2-explicit-zeros":
        mine, sk = dense(ours.value), dense(theirs.value[1])
        assert np.all(mine[np.isnan(sk)] == 0) and np.isfinite(mine).all()
        assert_same(mine, np.where(np.isnan(sk), 0.0, sk).astype(mine.dtype), "vs scikit-learn (NaN as 0)")
        return deviation
    if deviation is not None:
        return deviation
    if not theirs.ok:
        check_outcome(f"scikit-learn's {type(twin).__name__}", theirs, expected)
        assert not ours.ok, f"scikit-learn raised {theirs.error!r}, dkapprox did not"
        if len(expected) == 1:  # with two problems, either may be reported first
            assert type(ours.error) is type(theirs.error), (ours.error, theirs.error)
        return None
    assert ours.ok, f"dkapprox raised {ours.error!r}, scikit-learn did not"
    fitted, out = theirs.value
    if type(est).__name__ == "Nystroem":  # the same landmarks, whatever the conditioning
        with quiet():
            landmarks = clone(est).fit(X).components_
        np.testing.assert_array_equal(dense(landmarks), dense(fitted.components_).astype(landmarks.dtype))
        if not nystroem_well_conditioned(fitted):
            return "nystroem-conditioning"
    same_dtype = not (type(est).__name__ == "PolynomialCountSketch" and dense(ours.value).dtype == np.float32)
    expected_out = out if same_dtype else dense(out).astype(np.float32)
    # Nystroem: SVD against eigh of a rounded K (float32: its own rounding), amplified by K^(-1/2)
    assert_same(ours.value, expected_out, "vs scikit-learn", check_dtype=same_dtype, amplified=amplifies(est))
    return None if same_dtype else "float32-sketch"


# -- the property -------------------------------------------------------------------------
DEVIATIONS = Counter()


def check_case(est, case, test_id):
    A, Xd = fz.build(case)
    expected = fz.problems(est, A)
    with time_limit():
        ours = attempt(lambda: fit_transform(est, A))
        lazy = attempt(lambda: fit_transform_dask(est, Xd))
        check_outcome("NumPy input", ours, expected)
        check_outcome("dask input", lazy, expected)
        if ours.ok:
            assert_promise(est, A, lazy.value, ours.value, "dask vs NumPy")
            plain = fz.as_float(A)[0] if sp.issparse(A) else np.array(A, order="C", copy=True)
            if not sp.issparse(A) or (A.dtype.kind == "f" and not rounding_picks_landmarks(est)):
                reference = fit_transform(est, plain.astype(A.dtype) if sp.issparse(A) else plain)
                label = "sparse vs dense" if sp.issparse(A) else "layout/read-only vs C-contiguous copy"
                assert_promise(est, A, ours.value, reference, label, sparse_vs_dense=sp.issparse(A))
        elif len(expected) == 1:  # with two problems, either may be reported first
            assert type(lazy.error) is type(ours.error), (ours.error, lazy.error)
        deviation = check_against_sklearn(est, A, ours, expected)
    if deviation:
        DEVIATIONS[deviation] += 1
    TRIED[test_id] += 1


N_PER_ESTIMATOR = examples(60)


@pytest.mark.slow
@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
def test_fuzzed_input_gives_numpys_answer_or_names_the_problem(estimator):
    test_id = f"fuzz[{ident(estimator)}]"

    @fuzz_settings(N_PER_ESTIMATOR, test_id)
    @given(case=fz.cases())
    def fuzz(case):
        with dask.config.set(scheduler="synchronous"):
            check_case(estimator, case, test_id)

    run_counted(test_id, fuzz, N_PER_ESTIMATOR)


# -- fit on faulty dask data: report the fault, or be untouched by it ----------------------
N_FIT_PER_ESTIMATOR = examples(25)


def fit_quiet(est, X):
    with quiet():
        return clone(est).fit(X)


def check_fit_on_faulty_dask(est, case, test_id):
    """A fit that reads a bad value reports it; a fit that succeeds is the clean data's fit.

    Fits on dask read only what they need (nothing for a data-independent
    state, landmark blocks for Nystroem): a bad value they do not read cannot
    change the fitted state, one they read must fail with its message.
    """
    A, Xd = fz.build(case)
    clean, _ = fz.build(replace(case, fault=None))
    expected = fz.problems(est, A)
    with time_limit():
        fitted = attempt(lambda: fit_quiet(est, Xd))
        if not fitted.ok:
            check_outcome("fit on dask", fitted, expected)
        elif not fz.problems(est, clean):
            reference = fit_quiet(est, clean if expected else A)  # bad data: as if it were clean
            with quiet():
                assert_same(fitted.value.transform(clean), reference.transform(clean),
                            "fit on dask vs fit on the clean NumPy data", exact=exact_for(est))
    TRIED[test_id] += 1


@pytest.mark.slow
@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
def test_fit_on_faulty_dask_reports_the_fault_or_is_untouched_by_it(estimator):
    test_id = f"fit[{ident(estimator)}]"

    @fuzz_settings(N_FIT_PER_ESTIMATOR, test_id)
    @given(case=fz.cases(containers=("dask", "unknown_mask", "sparse"),
                         faults=("nan", "inf", "-inf", "negative", "below_skew", "bad_string", "none")))
    def fuzz(case):
        with dask.config.set(scheduler="synchronous"):
            check_fit_on_faulty_dask(estimator, case, test_id)

    run_counted(test_id, fuzz, N_FIT_PER_ESTIMATOR)


# -- the threaded scheduler ---------------------------------------------------------------
N_THREADED = examples(40)


@pytest.mark.slow
def test_fuzzed_input_on_the_threaded_scheduler():
    """The same property with tasks on two threads (errors raised in a worker thread)."""

    @fuzz_settings(N_THREADED, "threads")
    @given(estimator=st.sampled_from(CONTRACT_ESTIMATORS), case=fz.cases())
    def fuzz(estimator, case):
        with dask.config.set(scheduler="threads", num_workers=2):
            check_case(estimator, case, "threads")

    run_counted("threads", fuzz, N_THREADED)


# -- a learner, lightly ------------------------------------------------------------------------
N_RIDGE = examples(60)


def targets(case, n_rows, chunks_like):
    """y for the rows of X, as a dask array cut like X's rows (unknown sizes where X's are)."""
    y = np.random.default_rng(case.seed).normal(size=n_rows)
    yd = da.from_array(y, chunks=(fz.row_chunks(case, n_rows),))
    if case.container == "dataframe":
        yd = yd.to_dask_dataframe().to_dask_array()
    assert yd.numblocks[0] == chunks_like.numblocks[0]
    return y, yd


def check_ridge(case):
    A, Xd = fz.build(case)
    expected = fz.problems(Ridge(), A) - {"sparse"}  # Ridge takes sparse X
    y, yd = targets(case, A.shape[0], Xd)

    def fit_predict(X, y):
        model = Ridge(alpha=1.0).fit(X, y)
        out = model.predict(X)
        return out.compute() if isinstance(out, da.Array) else out

    with time_limit():
        ours = attempt(lambda: fit_predict(A, y))
        lazy = attempt(lambda: fit_predict(Xd, yd))
    check_outcome("Ridge on NumPy", ours, expected)
    check_outcome("Ridge on dask", lazy, expected)
    if ours.ok:
        # normal equations folded in another order than the one-slice NumPy fit
        tol = 1e-5 if ours.value.dtype == np.float32 else 1e-9
        np.testing.assert_allclose(lazy.value, ours.value, rtol=tol, atol=tol)
    TRIED["ridge"] += 1


@pytest.mark.slow
def test_ridge_on_fuzzed_input():
    """dkapprox.linear_model.Ridge: fit and predict on fuzzed X, dask against NumPy.

    Empty row blocks included: they made Ridge's fit fail with NumPy's "cannot
    reshape array of size 0 into shape (0,newaxis)" (NumericTargets.encode) until
    the fuzzing found it.
    """

    @fuzz_settings(N_RIDGE, "ridge")
    @given(case=fz.cases(containers=("dask", "dataframe", "sparse")))
    def fuzz(case):
        with dask.config.set(scheduler="synchronous"):
            check_ridge(case)

    run_counted("ridge", fuzz, N_RIDGE)


# -- explicit edge cases: each listed case, always covered ---------------------------------------
def positive(rows, cols, seed=0):
    return np.random.default_rng(seed).random((rows, cols)) * 3.0 + 0.05


def numpy_and_dask(est, X, chunks=(7, -1)):
    """fit + transform on X and on its dask twin; the two agree; returns the NumPy result."""
    ours = fit_transform(est, X)
    lazy = fit_transform_dask(est, da.from_array(X, chunks=chunks, asarray=not sp.issparse(X)))
    assert_promise(est, X, lazy, ours, "dask vs NumPy")
    return ours


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("shape", [(1, 5), (30, 1), (1, 1)], ids=["one_row", "one_feature", "one_by_one"])
def test_one_row_and_one_feature(estimator, shape):
    X = positive(*shape)
    ours = numpy_and_dask(estimator, X)
    assert ours.shape[0] == shape[0]
    deviation = check_against_sklearn(estimator, X, Outcome(value=ours), set())
    assert deviation in (None, "nystroem-conditioning")  # chi2 on one feature: a near-singular K


@pytest.mark.parametrize("cls", [dkapprox.GaussianRandomProjection, dkapprox.SparseRandomProjection])
def test_more_components_than_features_warns_like_sklearn(cls):
    X = positive(20, 3)
    twin = getattr(sk_random_projection, cls.__name__)(n_components=10, random_state=0)
    with pytest.warns(DataDimensionalityWarning) as theirs:
        expected = twin.fit(X).transform(X)
    for data in (X, da.from_array(X, chunks=7)):
        with pytest.warns(DataDimensionalityWarning) as ours:
            est = cls(n_components=10, random_state=0).fit(data)
        assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
        out = est.transform(data)
        assert_same(out.compute() if isinstance(out, da.Array) else out, expected, "vs scikit-learn")


@pytest.mark.parametrize("estimator", [e for e in CONTRACT_ESTIMATORS if isinstance(
    e, (dkapprox.RBFSampler, dkapprox.SkewedChi2Sampler, dkapprox.PolynomialCountSketch,
        dkapprox.RandomFourierFeatures, dkapprox.RandomBinningFeatures))], ids=ident)
def test_more_components_than_features_is_the_normal_case_for_kernel_features(estimator):
    X = positive(20, 2)  # n_components is 30 to 64: far more than 2 features, and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = fit_transform(estimator, X)
        lazy = fit_transform_dask(estimator, da.from_array(X, chunks=7))
    assert ours.shape == (20, estimator.n_components)
    assert_promise(estimator, X, lazy, ours, "dask vs NumPy")


def test_nystroem_more_components_than_samples_warns_like_sklearn():
    X = positive(8, 3)
    twin = sk_kernel_approximation.Nystroem(n_components=20, random_state=0)
    with pytest.warns(UserWarning, match="n_components > n_samples") as theirs:
        expected = twin.fit(X).transform(X)
    for data in (X, da.from_array(X, chunks=3)):
        with pytest.warns(UserWarning, match="n_components > n_samples") as ours:
            est = dkapprox.Nystroem(n_components=20, random_state=0).fit(data)
        assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
        out = est.transform(data)
        assert_same(out.compute() if isinstance(out, da.Array) else out, expected, "vs scikit-learn")
    assert expected.shape == (8, 8)


NON_FLOAT_KINDS = ["float16", "bool", "int8", "uint8", "int64", "object", "object-str", "str"]


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("kind", NON_FLOAT_KINDS)
def test_non_float_input_is_converted_to_float64(estimator, kind):
    """float16, bool, integers, objects and numeric strings: float64 out, as for their float64 values.

    scikit-learn's validation converts them the same way (dkapprox's NumPy path is
    its ``validate_data``); its exceptions, kept out of dkapprox on purpose, are in
    :func:`sklearn_deviation`: AdditiveChi2Sampler keeps float16/int/bool (and
    truncates ints), RBFSampler(gamma='scale') takes float16's variance in
    float16, and most estimators' fit refuses the NumPy string dtype.
    """
    case = fz.Case(n_samples=25, n_features=4, dtype=kind, seed=3, zero_fraction=0.2, fault=None,
                   fault_at=(0, 0), layout="C", read_only=False, container="dask", sparse_format="csr",
                   row_cuts=(7, 7, 20), column_cuts=(), keep_seed=0)
    A, Xd = fz.build(case)
    as_float64 = np.asarray(A, dtype=np.float64)
    expected = fit_transform(estimator, as_float64)
    ours = fit_transform(estimator, A)
    lazy = fit_transform_dask(estimator, Xd)
    assert dense(ours).dtype == dense(lazy).dtype == np.float64
    assert_same(ours, expected, f"{kind} vs its float64 values", exact=True)
    assert_promise(estimator, as_float64, lazy, expected, f"dask {kind} vs its float64 values")


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("kind", ["object-str", "str"])
def test_strings_that_are_not_numbers_raise_naming_the_conversion(estimator, kind):
    A = fz.dense_input(fz.Case(25, 4, kind, 0, 0.0, "bad_string", (17, 2), "C", False, "dask", "csr",
                               (), (), 0))
    message = "could not convert string to float: .*'abc'"
    with pytest.raises(ValueError, match=message):
        fit_transform(estimator, A)
    with pytest.raises(ValueError, match=message):  # at fit (a data statistic) or at compute
        fit_transform_dask(estimator, da.from_array(A, chunks=(10, -1)))
    twin = sklearn_twin(estimator)
    if twin is not None and kind == "object-str":
        with pytest.raises(ValueError, match=message):
            sklearn_fit_transform(twin, A)


def _never_computed(block):
    raise AssertionError("a block was computed to check metadata")


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_input_is_refused_without_computing(estimator, dtype):
    X = positive(20, 4).astype(dtype)
    with pytest.raises(ValueError, match="Complex data not supported"):
        fit_quiet(estimator, X)
    poisoned = da.from_array(X, chunks=7).map_blocks(_never_computed, dtype=dtype)
    with pytest.raises(ValueError, match="Complex data not supported"):
        fit_quiet(estimator, poisoned)
    fitted = fit_quiet(estimator, positive(20, 4))
    with pytest.raises(ValueError, match="Complex data not supported"):
        fitted.transform(poisoned)
    twin = sklearn_twin(estimator)
    if twin is not None:
        with pytest.raises(ValueError, match="Complex data not supported"):
            sklearn_fit_transform(twin, X)


@pytest.mark.parametrize("estimator", [e for e in CONTRACT_ESTIMATORS if not fz.accepts_sparse(e)], ids=ident)
def test_complex_sparse_is_reported_as_complex_as_scikit_learn_does(estimator):
    """Complex and sparse for a dense-only estimator: check_array names the complex data first."""
    S = sp.csr_matrix(positive(20, 4).astype(np.complex128))
    for data in (S, da.from_array(S, chunks=(7, -1), asarray=False)):
        with pytest.raises(ValueError, match="Complex data not supported"):
            fit_quiet(estimator, data)


def with_explicit_zeros(fmt, rows=30, cols=5):
    X = positive(rows, cols)
    X[X < 1.2] = 0.0
    S = sp.csr_matrix(X)
    S.data[::2] = 0.0  # stored, but zero
    S = S.asformat(fmt)
    assert (S.data == 0).any() and S.nnz > np.count_nonzero(S.toarray())
    return S


@pytest.mark.parametrize("estimator", [e for e in CONTRACT_ESTIMATORS if fz.accepts_sparse(e)], ids=ident)
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_with_explicit_zeros_equals_dense(estimator, fmt):
    S = with_explicit_zeros(fmt)
    stored = S.nnz
    ours = fit_transform(estimator, S)
    if not rounding_picks_landmarks(estimator):
        expected = fit_transform(estimator, S.toarray())
        assert_promise(estimator, S, dense(ours), dense(expected), "sparse vs dense", sparse_vs_dense=True)
    lazy = fit_transform_dask(estimator, da.from_array(S.tocsr(), chunks=(7, -1), asarray=False))
    assert_promise(estimator, S, lazy, ours, "dask sparse vs sparse")
    assert S.nnz == stored  # the input is not modified


def test_additive_chi2_explicit_zeros_give_zeros_where_sklearn_gives_nan():
    S = with_explicit_zeros("csr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = sk_kernel_approximation.AdditiveChi2Sampler(sample_steps=3).fit_transform(S).toarray()
    ours = dkapprox.AdditiveChi2Sampler(sample_steps=3).fit_transform(S).toarray()
    assert np.isnan(theirs).any() and np.isfinite(ours).all()
    assert_same(ours, np.where(np.isnan(theirs), 0.0, theirs), "vs scikit-learn with NaN as 0")


def zero_row_chunks(X):
    return da.from_array(X, chunks=((0, 7, 0, 13, 0), -1)), slice(None)


def empty_block_of_unknown_size(X):
    keep = np.ones(len(X), dtype=bool)
    keep[:7] = False  # the first block is emptied by the mask
    Xd = da.from_array(X, chunks=(7, -1))
    return Xd[da.from_array(keep, chunks=7)], keep


def dataframe_blocks(X):
    # unknown (NaN) chunk sizes and read-only blocks (pandas' copy-on-write)
    return da.from_array(X, chunks=(6, -1)).to_dask_dataframe().to_dask_array(), slice(None)


def column_chunks(X):
    return da.from_array(X, chunks=(6, 2)), slice(None)


def one_row_blocks(X):
    return da.from_array(X, chunks=(1, -1)), slice(None)


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("make", [zero_row_chunks, empty_block_of_unknown_size, dataframe_blocks,
                                  column_chunks, one_row_blocks], ids=lambda f: f.__name__)
def test_chunkings_give_numpys_result(estimator, make):
    X = positive(20, 5)
    Xd, rows = make(X)
    expected = fit_transform(estimator, X[rows])
    assert_promise(estimator, X[rows], fit_transform_dask(estimator, Xd), expected, make.__name__)


LAYOUTS = {
    "read_only": lambda X: X,
    "fortran": np.asfortranarray,
    "rows_strided": lambda X: np.repeat(X, 2, axis=0)[::2],
    "cols_reversed": lambda X: np.ascontiguousarray(X[:, ::-1])[:, ::-1],
}


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read_only"])
def test_read_only_and_non_contiguous_arrays(estimator, layout, read_only):
    X = positive(20, 5)
    V = LAYOUTS[layout](X.copy())
    V.setflags(write=not read_only)
    expected = fit_transform(estimator, X)
    assert_promise(estimator, X, fit_transform(estimator, V), expected, layout)
    assert_promise(estimator, X, fit_transform_dask(estimator, da.from_array(V, chunks=(7, -1))), expected,
                   f"dask {layout}")
    np.testing.assert_array_equal(V, X)  # not written to


@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=ident)
@pytest.mark.parametrize("value,message", [(np.nan, "Input X contains NaN"), (np.inf, "Input X contains infinity"),
                                           (-np.inf, "Input X contains infinity")], ids=["nan", "inf", "-inf"])
def test_one_bad_value_in_one_block_is_named_at_fit_or_compute(estimator, value, message):
    X = positive(40, 5)
    X[27, 3] = value
    with pytest.raises(ValueError, match=message):
        fit_quiet(estimator, X)
    # on dask: at fit where the fit reads the block (gamma='scale', Nystroem), else at compute
    with pytest.raises(ValueError, match=message):
        fit_transform_dask(estimator, da.from_array(X, chunks=(10, -1)))
