"""On a real LocalCluster (2 worker processes x 1 thread): the same models, features made on the workers."""

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream
from sklearn.datasets import make_classification
from sklearn.linear_model import SGDClassifier
from sklearn.pipeline import make_pipeline

from dkapprox import RBFSampler
from dkapprox.linear_model import Incremental, Ridge, RidgeClassifier, RidgeCV


def models():
    def features():
        return RBFSampler(gamma=0.1, n_components=64, random_state=0)

    return {
        "ridge": make_pipeline(features(), Ridge(alpha=0.1)),
        "ridge_cv": make_pipeline(features(), RidgeCV(np.logspace(-3, 2, 6), n_folds=4, random_state=1)),
        "classifier": make_pipeline(features(), RidgeClassifier(alpha=0.1)),
        "incremental": make_pipeline(features(), Incremental(SGDClassifier(random_state=0), n_epochs=2,
                                                             random_state=5)),
    }


def coefficients(pipe):
    last = pipe[-1]
    return last.estimator_.coef_ if isinstance(last, Incremental) else last.coef_


def test_cluster_fits_equal_local_fits_and_features_are_made_on_workers():
    X, y = make_classification(n_samples=2000, n_features=8, n_informative=5, n_classes=3, random_state=4)
    Xd, yd = da.from_array(X, chunks=250), da.from_array(y, chunks=250)
    targets = {"ridge": X[:, 0] ** 2, "ridge_cv": X[:, 0] ** 2, "classifier": yd, "incremental": yd}
    local = {name: pipe.fit(Xd, targets[name]) for name, pipe in models().items()}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        remote = {}
        for name, pipe in models().items():
            with get_task_stream() as stream:
                remote[name] = pipe.fit(Xd, targets[name])
            keys = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data]
            # every block's features, made by a worker: as tasks of their own (Incremental's blocks), or
            # inside the pass task of their row, which folds them (dkapprox.engine.reduce_aligned_rows)
            made = [k for k in keys if str(k).startswith(("rbfsampler-transform", "block_moments"))]
            assert len(made) >= Xd.numblocks[0], name
            assert {t["worker"] for t in stream.data} <= workers
        scores = {name: remote[name].score(Xd, targets[name]) for name in remote}
    for name in local:
        # the folding order is fixed by the graph (and blocks are realigned on the workers), so the
        # cluster gives the local bits exactly; the incremental route is a fixed partial_fit sequence
        np.testing.assert_array_equal(coefficients(remote[name]), coefficients(local[name]))
        assert scores[name] == pytest.approx(local[name].score(Xd, targets[name]), rel=1e-9)
