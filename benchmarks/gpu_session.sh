#!/usr/bin/env bash
# One session on a lent GPU machine (issues 32, 41), as one prepared call: install the wheels carried in
# .whl/ (dask, distributed, zarr, dask-cuda, ...: the machine has CuPy, numba, scikit-learn but not
# these), then benchmarks/bench_big_box.py (every core and the GPU on dask's default scheduler, against
# their limits), the tests marked gpu, benchmarks/bench_gpu.py. Everything lands under $OUT.
#   BIG_BOX=0 / TESTS=0 / BENCH=0 skip a part; BIG_BOX_ARGS and BENCH_ARGS are passed to the benchmarks;
#   *_TIMEOUT in seconds.
set -u
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheels did not install"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
lscpu >"$OUT/lscpu.txt" 2>&1
python3 - <<'PY' 2>&1 | tee "$OUT/versions.txt"
import cupy, numpy, scipy, sklearn, numba, dask, distributed, zarr, dask_cuda, array_api_compat
print({m.__name__: m.__version__ for m in (cupy, numpy, scipy, sklearn, numba, dask, distributed, zarr, dask_cuda,
                                           array_api_compat)})
print("CUDA runtime", cupy.cuda.runtime.runtimeGetVersion(), "driver", cupy.cuda.runtime.driverGetVersion())
PY
if [ "${BIG_BOX:-1}" = 1 ]; then
  timeout "${BIG_BOX_TIMEOUT:-300}" python3 benchmarks/bench_big_box.py ${BIG_BOX_ARGS:-} 2>&1 | tee "$OUT/big_box.txt"
fi
if [ "${TESTS:-1}" = 1 ]; then
  timeout "${TEST_TIMEOUT:-180}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/backends/test_gpu.py ${TEST_ARGS:-} \
    2>&1 | tee "$OUT/tests.txt"
fi
if [ "${BENCH:-1}" = 1 ]; then
  timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_gpu.py ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt"
fi
