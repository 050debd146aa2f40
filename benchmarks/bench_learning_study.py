"""The seeds' study as a benchmark table: RFF vs Nystroem vs exact RBF SVC, accuracy and cost.

Runs examples/learning_study.py's measurements (digits, and a synthetic
problem of 1,000,000 training rows on LocalCluster(2 workers x 1 thread); the
exact SVC in a child process with a 10-minute budget, on growing training
sets until one does not finish) and prints one table per data set with
side-by-side ratios:

* Nys-RFF acc: Nystroem's accuracy minus RFF's at the same n_components;
* Nys/RFF time: Nystroem's fit+predict time over RFF's;
* RFF/SVC time, SVC-RFF acc: against the largest exact SVC that finished.

``--out DIR`` also writes the example's two PNG plots.

    python benchmarks/bench_learning_study.py --out plots     # full size (about 30 minutes)
    python benchmarks/bench_learning_study.py --quick         # 20,000 rows (about a minute)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from _common import print_table  # noqa: E402
from learning_study import parse_args, plot, run  # noqa: E402


def table(result):
    exact = result["svc"][-1] if result["svc"] else None
    rows = []
    for n, (rff_acc, rff_s), (nys_acc, nys_s) in zip(result["grid"], result["rff"], result["nystroem"]):
        rows.append([n, rff_acc, nys_acc, nys_acc - rff_acc, rff_s, nys_s, nys_s / rff_s,
                     rff_s / exact[2] if exact else float("nan"),
                     exact[1] - rff_acc if exact else float("nan")])
    svc = (f"exact SVC on {exact[0]:,} rows: accuracy {exact[1]:.4f}, {exact[2]:.2f} s" if exact
           else "no exact SVC finished")
    if result.get("svc_timeouts"):
        svc += f"; on {result['svc_timeouts'][0]:,} rows it did not finish in the budget"
    print_table(f"{result['name']}: {result['n_train']:,} training rows; {svc}; linear ridge "
                f"{result['linear'][0]:.4f} in {result['linear'][1]:.2f} s",
                ["n_components", "RFF acc", "Nys acc", "Nys-RFF acc", "RFF s", "Nys s", "Nys/RFF time",
                 "RFF/SVC time", "SVC-RFF acc"], rows)


def main():
    argv = sys.argv[1:]
    out = None
    if "--out" in argv:
        out = argv[argv.index("--out") + 1]
    args = parse_args(argv)
    results = run(args)
    for result in results:
        table(result)
        if out:
            os.makedirs(out, exist_ok=True)
            print("wrote", plot(result, out, args.svc_budget))


if __name__ == "__main__":
    main()
