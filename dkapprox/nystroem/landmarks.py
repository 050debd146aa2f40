"""Landmark selectors: small objects behind one interface, choosing by global row index.

``selector.select(rows, n_components, kernel, random_state) -> Landmarks``
where ``rows`` is an :class:`~dkapprox.inputs._rows.InMemoryRows` or
:class:`~dkapprox.inputs._rows.DaskRows`. Every random choice is a function
of the seed and of global row indices only, so no random choice depends on
how a dask array is chunked. k-means labels and leverage scores are computed
from products whose last bits depend on a block's shape and on the BLAS
kernel: a choice can differ only where two candidates tie within that
rounding (float64 Lloyd distances; leverage scores in the block's dtype).

Passes over the data, in memory or on dask (add one for a dask array whose
row chunk sizes are unknown, to count its rows):

=========== ======================== =========================================
selector    passes                   what each pass does
=========== ======================== =========================================
Uniform     1                        gather the chosen rows (only the blocks
                                     holding one are read)
KMeans      1 + n_iter (default 4)   gather a uniform subsample for k-means++;
                                     then one Lloyd step per pass (assign,
                                     per-block sums, tree reduction)
Leverage    2                        gather a uniform subsample; recursive ridge
                                     leverage scores run on it in memory and
                                     leave a dictionary; then score every row
                                     against it, sample and carry the chosen
                                     rows in one tree reduction
RPCholesky  1                        gather a uniform subsample; randomly
                                     pivoted Cholesky runs on it in memory
Given       0                        the user's array
=========== ======================== =========================================

Rank restriction (``Nystroem(n_landmarks=l)`` with ``l > n_components``) adds one
pass to any of them: the sum of ``Z^T Z`` over every row (:mod:`.restriction`).
So ``landmarks='rpcholesky'`` with rank restriction reads the data twice,
``'leverage'`` 3 times, whatever ``n_components``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import kmeans_plusplus
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.random import sample_without_replacement

from .. import backends
from ..engine import SizedState
from ..kernels import DEVICE_SLICE_ELEMENTS, row_slices
from ..utils import GOLDEN, splitmix64
from .leverage import leverage_scores, recursive_state
from .rpcholesky import rpcholesky

#: Up to this many rows, uniform landmarks are ``random_state.permutation(n)[:m]``,
#: scikit-learn's own draw (80 MB of int64 at this size); above it an
#: O(n_components)-memory draw without replacement (scikit-learn's
#: ``sample_without_replacement(method="tracking_selection")``).
PERMUTATION_MAX_ROWS = 10_000_000


@dataclass(frozen=True, eq=False)
class Landmarks:
    """Chosen landmarks: ``components`` rows and their global row ``indices`` (int64)."""

    components: object
    indices: np.ndarray


def uniform_indices(n_rows, n_select, random_state, max_permutation_rows=PERMUTATION_MAX_ROWS):
    """``n_select`` distinct global row indices, uniformly, in random order (int64)."""
    if n_rows <= max_permutation_rows:
        return random_state.permutation(n_rows)[:n_select].astype(np.int64, copy=False)
    return sample_without_replacement(n_rows, n_select, method="tracking_selection",
                                      random_state=random_state).astype(np.int64, copy=False)


def _check_options(selector, **minimum):
    """Every option of a selector is an int >= its minimum (or None where None means a default)."""
    for name, low in minimum.items():
        value = getattr(selector, name)
        if value is None and name in ("sample_size", "pilot_size", "rank"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(
                f"landmark_params[{name!r}] must be an int >= {low}"
                f"{' or None' if name in ('sample_size', 'pilot_size', 'rank') else ''}; got {value!r}."
            )


def _dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def _stack(parts):
    return sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)


@dataclass(frozen=True)
class Uniform:
    """Uniform sampling without replacement; scikit-learn's draw up to ``max_permutation_rows``."""

    max_permutation_rows: int = PERMUTATION_MAX_ROWS

    def __post_init__(self):
        _check_options(self, max_permutation_rows=0)

    def select(self, rows, n_components, kernel, random_state):
        indices = uniform_indices(rows.n_rows, n_components, random_state, self.max_permutation_rows)
        return Landmarks(rows.take(indices), indices)


# -- k-means ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class LloydState(SizedState):
    centroids: np.ndarray  # (m, n_features) float64


def lloyd_partial(row_start, state, block):
    """Per-block Lloyd statistics: (sum of rows per nearest centroid, count per centroid).

    A device block (CuPy) is assigned and summed on its device (:func:`_lloyd_on_device`);
    the statistics, ``m x (n_features + 1)`` numbers, come back as NumPy.
    """
    xp = backends.namespace(block)
    if xp is not None:
        return _lloyd_on_device(xp, block, state.centroids)
    C = state.centroids
    m = C.shape[0]
    sq = np.einsum("ij,ij->i", C, C)
    sums = np.zeros_like(C)
    counts = np.zeros(m, dtype=np.int64)
    for s in row_slices(block.shape[0], m):
        part = block[s]
        # ||x - c||^2 up to ||x||^2, which does not change the argmin
        labels = np.argmin(sq - 2.0 * _dense(safe_sparse_dot(part, C.T)), axis=1)
        members = sp.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))),
                                shape=(m, labels.size))
        sums += _dense(members @ part)
        counts += np.bincount(labels, minlength=m)
    return sums, counts


def _lloyd_on_device(xp, block, centroids):
    """:func:`lloyd_partial` in the block's namespace, in float64 as on the host.

    The array API has no scatter-add: the sums per centroid are a product with the slice's
    one-hot assignment matrix (``m x rows``), which a GPU does as fast as the distances.
    """
    device = backends.device_of(block)
    C = xp.asarray(centroids, device=device)
    m = C.shape[0]
    sq = xp.sum(C * C, axis=1)
    ids = xp.arange(m, device=device)[:, None]
    sums = xp.zeros(C.shape, dtype=xp.float64, device=device)
    counts = xp.zeros((m,), dtype=xp.float64, device=device)
    for s in row_slices(block.shape[0], m, DEVICE_SLICE_ELEMENTS):
        part = xp.astype(block[s, :], xp.float64)
        labels = xp.argmin(sq[None, :] - 2.0 * (part @ C.T), axis=1)
        members = xp.astype(labels[None, :] == ids, xp.float64)
        sums += members @ part
        counts += xp.sum(members, axis=1)
    return backends.to_numpy(sums), backends.to_numpy(counts).astype(np.int64)


def lloyd_combine(parts):
    sums, counts = parts[0]
    sums, counts = sums.copy(), counts.copy()
    for s, c in parts[1:]:
        sums += s
        counts += c
    return sums, counts


@dataclass(frozen=True)
class KMeans:
    """k-means++ seeds from a uniform subsample, then ``n_iter`` Lloyd steps over all rows.

    ``sample_size`` defaults to ``max(10_000, 20 * n_components)`` rows. An
    empty cluster keeps its centroid. The landmarks are centroids, not rows;
    their ``indices`` are the global rows that seeded them.
    """

    n_iter: int = 4
    sample_size: int | None = None

    def __post_init__(self):
        _check_options(self, n_iter=0, sample_size=1)

    def select(self, rows, n_components, kernel, random_state):
        n = rows.n_rows
        size = self.sample_size or max(10_000, 20 * n_components)
        sample_indices = uniform_indices(n, min(n, max(size, n_components)), random_state)
        sample = rows.take(sample_indices)
        centroids, seeds = kmeans_plusplus(sample, n_components, random_state=random_state)
        centroids = np.asarray(centroids, dtype=np.float64)
        for _ in range(self.n_iter):
            sums, counts = rows.reduce(lloyd_partial, lloyd_combine, LloydState(centroids))
            filled = counts > 0
            centroids = centroids.copy()
            centroids[filled] = sums[filled] / counts[filled, None]
        return Landmarks(centroids, sample_indices[seeds].astype(np.int64))


# -- ridge leverage scores ---------------------------------------------------


def row_uniforms(key: int, rows) -> np.ndarray:
    """Uniform numbers in (0, 1), one per global row index: SplitMix64 of (key, row).

    A counter-based draw: the number of a row depends on the key and the row
    index only, never on which block the row is in.
    """
    z = splitmix64((np.asarray(rows, dtype=np.uint64) + np.uint64(1)) * GOLDEN + np.uint64(key))
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def leverage_partial(row_start, state, block):
    """Score the rows of a block, draw their keys, keep the block's best ``n_select``.

    key = log(u) / score with u a per-row uniform (Efraimidis-Spirakis: the
    largest keys are a sample without replacement, weighted by the scores).
    """
    global_rows = row_start + np.arange(block.shape[0], dtype=np.int64)
    keys = np.log(row_uniforms(state.key, global_rows)) / leverage_scores(block, state)
    return _best(keys, global_rows, block, state.n_select)


def _best(keys, global_rows, data, n_select):
    """The ``n_select`` largest keys (ties: smaller row first), a total order, so folding is associative."""
    order = np.lexsort((global_rows, -keys))[:n_select]
    xp = backends.namespace(data)
    if xp is not None:  # a device block: only its chosen rows come to the host
        chosen = xp.take(data, xp.asarray(order, device=backends.device_of(data)), axis=0)
        return keys[order], global_rows[order], backends.to_numpy(chosen), n_select
    return keys[order], global_rows[order], data[order], n_select


def best_combine(parts):
    return _best(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                 _stack([p[2] for p in parts]), parts[0][3])


#: The default subsample of RPCholesky and of the leverage recursion: at least this many rows ...
SAMPLE_MIN = 10_000
#: ... and at least this many times the number of landmarks: RPCholesky (see :class:`RPCholesky` for why) ...
SAMPLE_FACTOR = 8
#: ... and the leverage recursion (see :class:`Leverage` for why).
LEVERAGE_SAMPLE_FACTOR = 2


def subsample_rows(sample_size, n_rows, n_landmarks, factor=SAMPLE_FACTOR):
    """Rows in a selector's subsample: ``sample_size`` (or its default), never fewer than the landmarks."""
    size = sample_size or max(SAMPLE_MIN, factor * n_landmarks)
    return min(n_rows, max(size, n_landmarks))


def default_rank(n_landmarks):
    """The rank whose tail sets the ridge: ``n_landmarks // 16`` (at least 1); see :class:`Leverage`."""
    return max(1, n_landmarks // 16)


@dataclass(frozen=True)
class Leverage:
    """Recursive ridge leverage score sampling (Musco & Musco 2017), in two passes.

    Pass 1 gathers ``sample_size`` uniform rows (by global row index; default
    ``max(10_000, 2 l)`` for ``l`` landmarks). In memory, Musco &
    Musco's recursion (:func:`.leverage.recursive_state`) runs on them: the rows of
    a prefix of at most ``2 pilot_size`` of them are a dictionary; it scores a
    prefix twice as long, which draws a dictionary of about ``pilot_size``
    (default ``l``) rows with probability increasing in their scores (weights
    ``1 / sqrt(p)``), and so on up to the whole subsample. Every level's ridge
    ``lambda`` is the mean eigenvalue of the weighted dictionary kernel beyond
    ``rank``. Pass 2 scores every row against the last dictionary (``k(x, x) -
    k(x, D) (K_DD + lambda W^-2)^-1 k(D, x)``, its ridge leverage score up to a
    constant factor) and samples ``l`` distinct rows with probability increasing
    in the score by Efraimidis-Spirakis keys from per-row counter-based uniforms;
    the chosen rows travel through the same tree reduction, so no third pass is
    needed. The subsample and the draws of the recursion come from the seed and
    the global row indices: no chunking changes them.

    Why ``rank = l // 16`` by default: the ridge is tied to the rank that ``l``
    landmarks resolve, not to the output width. Musco & Musco's own code takes
    ``k = l / (4 ln l)`` (``l / 17`` at ``l = 64``, ``l / 28`` at ``l = 1024``).
    Measured (rbf, ratio to the optimal rank-m Frobenius error, 3 seeds): on
    standardized digits (m = 64, 256; l = m, 4 m; two gammas) ``l // 16`` was
    within 1% of the better of ``l / (4 ln l)`` and ``l // 4`` (the output
    width m at ``l = 4 m``) in all 8 cases; on 3,000 rows of clusters of uneven
    density ``l // 4`` gave 18.6 at m = l = 64 (scores that favour outliers)
    where ``l // 16`` gave 4.9 and uniform landmarks 10.1. Why a recursion: a
    ridge and scores estimated from a uniform pilot are only as good as that
    pilot's view of the kernel; the recursion's dictionary is drawn by the
    scores themselves, Musco & Musco's guarantee whatever the data. Measured,
    it chose landmarks as good as a uniform pilot of ``l`` rows did (the
    previous 'leverage') on digits and on 3,000 and 40,000 rows of uneven
    clusters, at most 2 more ``sample_size x pilot_size`` kernel products and
    ``O(sample_size pilot_size^2)`` arithmetic in memory.

    Why ``max(10_000, 2 l)`` rows, where 'rpcholesky' takes ``8 l``: the
    scoring pass reads every row, so the subsample only has to give a good
    dictionary. Measured (benchmarks/bench_nystroem.py, section 7; 40,000 rows
    of clusters of uneven density and of random widths, rank m restricted from
    l = 4 m landmarks, m = 64 and 256, 3 seeds): every s from 2 l to all the
    rows gave the same error within 0.4% (RPCholesky at 2 l: up to 1.39x its
    error on all the rows). A larger subsample costs memory and time on the
    driver (about ``4 sample_size pilot_size^2`` multiply-adds) for nothing
    measured.
    """

    sample_size: int | None = None
    pilot_size: int | None = None
    rank: int | None = None

    def __post_init__(self):
        _check_options(self, sample_size=1, pilot_size=1, rank=1)

    def select(self, rows, n_components, kernel, random_state):
        n = rows.n_rows
        size = subsample_rows(self.sample_size, n, n_components, LEVERAGE_SAMPLE_FACTOR)
        sample_indices = uniform_indices(n, size, random_state)
        state = self.state(rows.take(sample_indices), n_components, kernel, random_state)
        _, indices, components, _ = rows.reduce(leverage_partial, best_combine, state)
        return Landmarks(components, indices.astype(np.int64))

    def state(self, sample, n_components, kernel, random_state):
        """Everything the scoring pass needs, from the uniform subsample (on the driver)."""
        key = int(random_state.randint(0, 2**63 - 1, dtype=np.int64))
        return recursive_state(sample, self.pilot_size or n_components, self.rank or default_rank(n_components),
                               kernel, random_state, key=key, n_select=n_components)


# -- randomly pivoted Cholesky -------------------------------------------------
@dataclass(frozen=True)
class RPCholesky:
    """Randomly pivoted Cholesky (accelerated, :mod:`.rpcholesky`) on a uniform subsample: one pass.

    The pass gathers ``sample_size`` uniform rows (by global row index, as
    'kmeans' gathers its k-means++ sample); RPCholesky then chooses the
    landmarks among them in memory, each pivot with probability proportional
    to its residual kernel diagonal, every draw from ``random_state``. The
    landmarks are rows of X, and no choice depends on the chunking: the
    subsample is a function of the seed and the global row indices, and the
    pivots of the seed and the subsample.

    ``sample_size`` defaults to ``max(10_000, 8 * l)`` rows for ``l``
    landmarks (all the rows when there are fewer). Why 8 l: the subsample
    must show RPCholesky the parts of the data that the landmarks have to
    cover, and it costs memory and time on the driver: RPCholesky holds a
    ``sample_size x l`` float64 factor (64 l^2 bytes: 67 MB at l = 1024,
    1.1 GB at l = 4096) and does ``O(sample_size l^2)`` work. Measured
    (benchmarks/bench_nystroem.py, section 7; 40,000 rows, rank m restricted
    from l = 4 m landmarks, error as a ratio to RPCholesky on all 40,000
    rows, mean of 3 seeds): on clusters of uneven density, where a small
    subsample misses the small dense clusters, s = 2 l gave 1.19 (m = 64)
    and 1.39 (m = 256), 4 l 1.06 and 1.18, 8 l 1.02 and 1.05, 16 l 1.00 and
    1.00; on clusters of random widths every s from 2 l was within 4%.
    16 l would buy the last 5% at twice the memory and time (2.1 GB at
    l = 4096); pass ``sample_size`` for it, or a smaller one where ``l`` is
    large (the factor at l = 16_384 and 8 l is 17 GB).
    """

    sample_size: int | None = None

    def __post_init__(self):
        _check_options(self, sample_size=1)

    def sample_rows(self, n_rows, n_landmarks):
        """Rows in the subsample: ``sample_size`` (or its default), never fewer than the landmarks."""
        return subsample_rows(self.sample_size, n_rows, n_landmarks)

    def select(self, rows, n_components, kernel, random_state):
        sample_indices = uniform_indices(rows.n_rows, self.sample_rows(rows.n_rows, n_components), random_state)
        sample = rows.take(sample_indices)
        pivots = rpcholesky(sample, n_components, kernel, random_state)
        return Landmarks(sample[pivots], sample_indices[pivots].astype(np.int64))


@dataclass(frozen=True, eq=False)
class Given:
    """The user's landmarks; ``indices`` are -1 (no training row)."""

    components: object

    def select(self, rows, n_components, kernel, random_state):
        return Landmarks(self.components, np.full(self.components.shape[0], -1, dtype=np.int64))


SELECTORS = {"uniform": Uniform, "kmeans": KMeans, "leverage": Leverage, "rpcholesky": RPCholesky}


def make_selector(method, params):
    """The selector for a ``landmarks`` string and its ``landmark_params`` dict."""
    cls = SELECTORS[method]
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(params or {}) - allowed)
    if unknown:
        raise ValueError(
            f"landmark_params {unknown} are not options of landmarks={method!r}; "
            f"valid options: {sorted(allowed) or 'none'}."
        )
    return cls(**(params or {}))
