"""A nightly featurization job, run as a real process by the kill-and-resume tests.

python _featurize_job.py INPUT OUT SECONDS_PER_BLOCK

Fits RBFSampler(random_state=0) on the Zarr array INPUT (float32), featurizes
it to OUT with write_features (threaded scheduler, 2 threads) and prints the
WriteReport as JSON. Each input block is slowed down by SECONDS_PER_BLOCK so
that a test can kill the process part-way; the numbers do not change.
"""

import json
import sys
import time

import dask


def slow(block, seconds):
    time.sleep(seconds)
    return block


def main(source, out, seconds):
    from dkapprox.io import open_array, write_features
    from dkapprox.kernel_approximation import RBFSampler
    from dkapprox.models import fingerprint

    X = open_array(source)
    est = RBFSampler(n_components=64, gamma=0.5, random_state=0).fit(X)
    features = est.transform(X.map_blocks(slow, seconds, dtype=X.dtype))
    plan = {"input": {"path": source, "shape": list(X.shape), "chunks": [X.chunks[0][0], X.chunks[1][0]]},
            "model": fingerprint(est), "params": est.get_params()}
    with dask.config.set(scheduler="threads", num_workers=2):
        report = write_features(features, out, plan=plan)
    print(json.dumps(report.to_dict()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
