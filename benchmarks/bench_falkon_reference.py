"""Falkon itself (PyTorch, CPU) on the learning study's data: the reference for KernelRidge (issue 33).

Runs ``falkon.Falkon`` on the learning study's synthetic classification (examples/learning_study.py's
``synthetic()``: ``--rows`` training rows, a tenth as many test rows, 20 float32 features), with the
RBF kernel of benchmarks/bench_kernel_ridge.py's learning section (gamma=0.05, so Falkon's
``GaussianKernel(sigma)`` with sigma = sqrt(1 / (2 gamma))) and the same alpha: ours is scikit-learn's
unnormalized alpha, ``||K_nm a - y||^2 + alpha a^T K_mm a``; Falkon minimizes
``(1/n) ||K_nm a - y||^2 + penalty a^T K_mm a``, so ``penalty = alpha / n``. Targets are the labels as
+-1, the prediction's sign is the class. Uniform centers (Falkon's own selector, seed 0), CPU only,
float32, ``torch.set_num_threads(2)``: the two cores LocalCluster(2x1) gets in bench_kernel_ridge.py,
in one process here. Prints accuracy, fit and predict seconds per m.

    /tmp/falkon-venv/bin/python benchmarks/bench_falkon_reference.py              # 10^6 rows, m = 2048, 8192
    /tmp/falkon-venv/bin/python benchmarks/bench_falkon_reference.py --rows 50000 --centers 1024

Not run by the test suite, and not with the project's venv: it needs PyTorch and falkon, which
dkapprox does not depend on.

Why not ``pip install falkon``: falkon is not on PyPI (https://pypi.org/simple/falkon/ answers 404). Its
wheels are served from its own index, https://falkon.dibris.unige.it/torch-<version>_<cuda>.html, which
this machine cannot reach (only the package registries are; ``pip download falkon`` finds "versions:
none"), and even there they are built for torch 2.4-2.7 (its README's table), not the 2.13.0 on this
disk, whose C++ ABI a compiled extension must match. So it is built from its GitHub source
(FalkonML/falkon, 0.9.0, commit 387d456 of 2025-07-17, here a snapshot at
/work/.mirror/FalkonML+falkon/repo) against the CPU build of torch 2.13.0 that pip takes from this
machine's disk. Its C++ extension is needed (falkon calls its ops, e.g. ``square_norm``, in every RBF
kernel evaluation): with ``NO_BUILD_EXT=1`` falkon installs but compiles the extension at first use, and
that JIT path finds ``nvcc`` on PATH (this machine has a CUDA 13 toolkit, /usr/local/bin/nvcc) and fails
on the CPU-only torch, whose CUDA_HOME is None ("TypeError: expected str, bytes or os.PathLike object,
not NoneType" in falkon/c_ext/_backend.py). ``FORCE_ONLY_CPU=1`` at install time builds the CPU
extension instead (about 10 minutes on one job).

The venv, as it was made here (Python 3.11.7, every step under ``nice -n 19``; 40 s, 17 s, 9 s, 597 s)::

    mkdir /tmp/falkon-src
    git --git-dir=/work/.mirror/FalkonML+falkon/repo archive HEAD | tar -x -C /tmp/falkon-src
    python3.11 -m venv /tmp/falkon-venv
    /tmp/falkon-venv/bin/pip install torch==2.13.0          # the CPU build on local disk; a plain
                                                            # "torch" pulls a CUDA build of several GB
    /tmp/falkon-venv/bin/pip install numpy scipy scikit-learn psutil wheel ninja
    cd /tmp/falkon-src
    # installs, with keopscore 2.3, pykeops 2.3 and pybind11 from PyPI, but fails at the first fit (above):
    NO_BUILD_EXT=1 FORCE_ONLY_CPU=1 /tmp/falkon-venv/bin/pip install --no-build-isolation .
    # builds falkon/c_ext/_C.so for the CPU (one compile job at a time: the machine has 2 cores):
    FORCE_ONLY_CPU=1 MAX_JOBS=1 /tmp/falkon-venv/bin/pip install --no-build-isolation --no-deps --force-reinstall .

(The last command without ``--no-deps --force-reinstall`` should do both falkon steps at once; it was
not run as such. ``--no-build-isolation`` makes the build use the venv's torch: an isolated build
would fetch its own "torch", a CUDA build.) KeOps stays off unless ``--keops auto``: on the CPU it
compiles a kernel per formula with the system g++, and its passes were 4x slower than PyTorch's
here (50,000 rows, m = 1,024: 1.4-1.6 s a pass against 0.33 s).

Falkon in float32 solves a slightly different problem: its preconditioner's jitter,
``pc_epsilon_32 = 1e-5`` times m on the diagonal of K_mm, also enters the penalty (it applies
``penalty * T^T T`` with ``T = chol(K_mm + 1e-5 m I)``), so its answer is the Nystroem solution for
``alpha (K_mm + 1e-5 m I)``. On 20,000 rows, m = 1,000, the same centers, that puts its predictions
0.6-1 % (relative 2-norm) from the exact Nystroem solve and from KernelRidge's, and within 3e-5-1.5e-4
of the jittered solve; 99.8-99.9 % of the signs and the test accuracy agree. In float64 (jitter
1e-13 m) the two agree to 3e-10 after 20 iterations: the same preconditioned CG.

The data are ``synthetic()`` itself, read out of examples/learning_study.py and run alone: importing
that module needs dask and dkapprox, which this venv does not have.
"""

from __future__ import annotations

import argparse
import ast
import functools
import math
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402

STUDY = os.path.join(os.path.dirname(__file__), "..", "examples", "learning_study.py")


def synthetic(n_train, n_test):
    """examples/learning_study.py's ``synthetic()``, its source executed without the module's imports."""
    from sklearn.datasets import make_classification

    with open(STUDY) as f:
        tree = ast.parse(f.read(), STUDY)
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "synthetic"]
    namespace = {"np": np, "make_classification": make_classification}
    exec(compile(ast.Module([node], type_ignores=[]), STUDY, "exec"), namespace)
    return namespace["synthetic"](n_train, n_test, chunk_rows=None)


def count_passes(conjgrad, stats):
    """Record each fit's CG iterations and passes over X: Falkon keeps neither on the model.

    A pass is one ``mmv``, ``K_nm^T (K_nm v)`` (one an iteration, and one more each
    ``cg_full_gradient_every`` = 10 iterations for the full residual), plus the right-hand side's.
    """
    solve = conjgrad.ConjugateGradient.solve

    @functools.wraps(solve)
    def counted(self, X0, B, mmv, max_iter, callback=None):
        calls = [0]

        def counted_mmv(v):
            calls[0] += 1
            return mmv(v)

        beta = solve(self, X0, B, counted_mmv, max_iter, callback)
        stats.update(iterations=self.num_iter + 1, passes=calls[0] + 1)
        return beta

    conjgrad.ConjugateGradient.solve = counted


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows (test rows: a tenth)")
    parser.add_argument("--centers", default="2048,8192", help="m, comma separated")
    parser.add_argument("--alpha", type=float, default=0.1, help="our (scikit-learn's) alpha; penalty = alpha / n")
    parser.add_argument("--maxiter", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--keops", choices=["no", "auto", "force"], default="no",
                        help="FalkonOptions.keops_active (no: PyTorch's own kernels)")
    args = parser.parse_args()
    centers = [int(c) for c in args.centers.split(",")]

    import falkon
    import torch
    from falkon.c_ext import _backend
    from falkon.optim import conjgrad

    stats = {}
    count_passes(conjgrad, stats)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, falkon {falkon.__version__} (C extension loaded: {_backend._HAS_EXT}), "
          f"{torch.get_num_threads()} threads, keops_active={args.keops}", flush=True)

    start = time.perf_counter()
    data = synthetic(args.rows, args.rows // 10)
    dtype = getattr(torch, args.dtype)
    X = torch.from_numpy(data["X_train"]).to(dtype)
    y = torch.from_numpy(np.where(data["y_train"] == 1, 1.0, -1.0)).to(dtype).reshape(-1, 1)
    X_test = torch.from_numpy(data["X_test"]).to(dtype)
    y_test = np.where(data["y_test"] == 1, 1.0, -1.0)
    gamma, n = data["gamma"], X.shape[0]
    sigma, penalty = math.sqrt(1 / (2 * gamma)), args.alpha / n
    print(f"data: {n:,} train, {len(y_test):,} test rows, {X.shape[1]} features, {args.dtype} "
          f"({time.perf_counter() - start:.1f} s); gamma={gamma:g} -> sigma={sigma:.4g}, "
          f"alpha={args.alpha:g} -> penalty={penalty:.3g}", flush=True)

    rows = []
    for m in centers:
        model = falkon.Falkon(kernel=falkon.kernels.GaussianKernel(sigma), penalty=penalty, M=m,
                              maxiter=args.maxiter, seed=0,
                              options=falkon.FalkonOptions(use_cpu=True, keops_active=args.keops))
        start = time.perf_counter()
        model.fit(X, y)
        fit = time.perf_counter() - start
        start = time.perf_counter()
        predicted = model.predict(X_test).numpy().ravel()
        predict = time.perf_counter() - start
        accuracy = float(np.mean(np.where(predicted >= 0, 1.0, -1.0) == y_test))
        # fit_times_[0]: centers and the preconditioner (Cholesky of the m x m kernel), before CG
        cg = fit - model.fit_times_[0]
        rows.append([m, accuracy, fit + predict, fit, stats["iterations"], stats["passes"], model.fit_times_[0], cg,
                     cg / stats["passes"], predict, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024])
        print(f"Falkon m={m}: accuracy {accuracy:.4f}, fit {fit:.1f} s ({stats['iterations']} iterations), "
              f"predict {predict:.1f} s", flush=True)
    print_table(f"Falkon {falkon.__version__} (torch {torch.__version__}, CPU, {args.threads} threads, {args.dtype}) "
                f"on the learning study: {n:,} training rows, {len(y_test):,} test rows; penalty = alpha / n = "
                f"{args.alpha:g} / {n:,}, maxiter={args.maxiter}, keops_active={args.keops}",
                ["m", "accuracy", "s (fit+predict)", "fit s", "CG iters", "passes", "preconditioner s", "CG s",
                 "CG s / pass", "predict s", "peak RSS MiB (so far)"], rows)


if __name__ == "__main__":
    main()
