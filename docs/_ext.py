"""Helpers of docs/conf.py: the small sizes the gallery runs the examples at.

The examples in examples/ default to sizes worth running by hand (minutes);
the gallery runs each at the size its test in tests/test_examples.py uses,
so the whole site builds in about a minute.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# example file name -> the command-line arguments the gallery runs it with
GALLERY_ARGS = {
    "featurize_zarr_store.py": ["--rows", "20000", "--chunk-rows", "5000", "--n-components", "64"],
    "nystroem_pipeline.py": ["--n-samples", "2000"],
    "plot_kernel_approximation.py": ["--max-components", "200", "--n-samples", "1000"],
    "learning_study.py": ["--quick", "--n-rows", "4000", "--no-cluster", "--svc-budget", "30", "--repeats", "1"],
    "plot_compare_methods.py": ["--small"],
    "plot_xarray_zarr.py": ["--rows", "20000"],
}


# the notebooks (examples/notebook_*.py) take their size from the environment, as a kernel would
# give it them (tests/test_notebooks.py runs them in a Jupyter kernel at 10,000 rows)
NOTEBOOK_ENV = {"DKAPPROX_EXAMPLE_ROWS": "20000"}


def gallery_argv(gallery_conf, script_vars):
    """sys.argv[1:] for one example: its small size, and a scratch directory for its files.

    A notebook gets its small size from ``NOTEBOOK_ENV``, set here, just before it runs.
    """
    name = Path(script_vars["src_file"]).name
    if name.startswith("notebook_"):
        os.environ.update(NOTEBOOK_ENV)
    args = list(GALLERY_ARGS.get(name, []))
    scratch = tempfile.mkdtemp(prefix=f"dkapprox-docs-{Path(name).stem}-")
    if name in ("featurize_zarr_store.py", "plot_xarray_zarr.py"):
        args += ["--dir", scratch]
    elif name in ("learning_study.py",):
        args += ["--out", scratch]
    elif name == "plot_kernel_approximation.py":
        args += ["--out", os.path.join(scratch, "kernel_approximation.png")]
    return args
