"""The precision promises under every OpenBLAS kernel this CPU can run (docs/precision.md).

OpenBLAS picks its micro-kernels by the CPU it detects at import, and each kernel
rounds a block's products in its own order: a test that passed because one kernel
happened to round every shape alike fails on the next machine. Here the parity and
chunking subset runs in subprocesses under each core type selected with
``OPENBLAS_CORETYPE``, so such a test fails on every machine instead. Core types
that need instructions this CPU lacks are not run (they would die of SIGILL); each
run checks that OpenBLAS really loaded the kernel asked for, and the test reports
which ran. The kernel this process runs is left out when the same session runs the
subset itself (the whole suite does): run again in a subprocess it only cost 40 s
of the suite's time and checked nothing new.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

#: core type -> the /proc/cpuinfo flags its kernels execute
CORE_TYPES = {
    "Prescott": {"pni"},
    "Nehalem": {"ssse3", "sse4_2"},
    "Sandybridge": {"avx"},
    "Haswell": {"avx2", "fma"},
    "Zen": {"avx2", "fma"},
    "SkylakeX": {"avx512f", "avx512vl", "avx512bw", "avx512dq"},
    "Cooperlake": {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512_bf16"},
}
#: names OpenBLAS reports for a core type whose kernels are another's (a build without its own)
ALIASES = {"Prescott": {"Katmai"}, "Zen": {"Haswell"}, "Cooperlake": {"SkylakeX"}}

SUBSET = [
    "tests/test_contract.py", "tests/random_features/test_rff.py", "tests/nystroem/test_landmarks.py",
    "tests/nystroem/test_kernels.py", "tests/kernel_approximation/test_parity.py",
    "tests/random_projection/test_parity.py", "tests/nystroem/test_parity.py",
    "tests/io/test_write_features.py",
]
SELECT = "chunk_invariant or same_blocks or fit_on_dask_equals or one_row or parity or featurize_a_zarr_store"


def cpu_flags() -> set:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def runnable_core_types(flags) -> list:
    return [name for name, needs in CORE_TYPES.items() if needs <= flags]


def _env(core_type):
    return dict(os.environ, OPENBLAS_CORETYPE=core_type, OPENBLAS_NUM_THREADS="1", DKAPPROX_SEEDS="1")


def _probe(core_type):
    """The kernel OpenBLAS really loads when asked for ``core_type`` (its architecture name)."""
    return subprocess.run(
        [sys.executable, "-c", "import numpy, threadpoolctl; "
         "print([i['architecture'] for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas'][0])"],
        env=_env(core_type), capture_output=True, text=True, timeout=120)


def _run(core_type):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *SUBSET, "-k", SELECT],
        env=_env(core_type), capture_output=True, text=True, timeout=900, cwd=TESTS.parent)


def crash_report(stderr: str) -> str:
    """The part of a run's stderr that says what failed: from a fatal error's first line (faulthandler's
    traceback of the crashed thread comes before the extension modules it lists last), else the tail."""
    start = stderr.find("Fatal Python error")
    return stderr[start:start + 3000] if start >= 0 else stderr[-1000:]


def own_kernel() -> str | None:
    """The OpenBLAS kernel this process loaded (None without OpenBLAS)."""
    import threadpoolctl

    found = [i["architecture"] for i in threadpoolctl.threadpool_info() if i["internal_api"] == "openblas"]
    return found[0] if found else None


def subset_in_session(items) -> bool:
    """True if ``items`` (the session's collected tests) hold every file of the subset."""
    files = {str(item.path.relative_to(TESTS.parent)) for item in items if hasattr(item, "path")}
    return set(SUBSET) <= files


@pytest.mark.slow
def test_parity_and_chunking_hold_under_every_openblas_kernel_this_cpu_runs(request):
    flags = cpu_flags()
    if not flags:
        if os.environ.get("CI") == "true":
            pytest.fail("no /proc/cpuinfo on the CI machine: the host matrix cannot choose its core types")
        pytest.skip("no /proc/cpuinfo: cannot tell which OpenBLAS kernels this CPU executes")
    core_types = runnable_core_types(flags)
    assert {"Prescott", "Nehalem"} <= set(core_types), f"an x86-64 CPU runs SSE kernels: {sorted(flags)[:20]}..."
    with ThreadPoolExecutor(max_workers=2) as pool:  # one BLAS thread each, two cores
        probes = dict(zip(core_types, pool.map(_probe, core_types)))
        report, failures, first = [], [], {}
        for core_type, probe in probes.items():
            loaded = probe.stdout.strip()
            if loaded not in {core_type} | ALIASES.get(core_type, set()):
                failures.append(f"{core_type}: OpenBLAS loaded {loaded!r} ({probe.stderr.strip()[-300:]})")
            first.setdefault(loaded, core_type)
        # a core type whose build reuses another's kernels (Zen -> Haswell) rounds as that one: run each kernel once;
        # the kernel of this process once more only if this session does not run the subset under it already
        here = own_kernel() if subset_in_session(request.session.items) else None
        chosen = [core_type for loaded, core_type in first.items() if loaded != here]
        runs = dict(zip(chosen, pool.map(_run, chosen)))
    for core_type, probe in probes.items():
        loaded = probe.stdout.strip()
        tests = runs.get(core_type)
        if tests is None and loaded == here:
            report.append(f"{core_type} -> {loaded}: this process's kernel, which ran the subset in this session")
            continue
        if tests is None:
            report.append(f"{core_type} -> {loaded}: the same kernel as {first[loaded]}, run once")
            continue
        report.append(f"{core_type} -> {loaded}: " + (tests.stdout.strip().splitlines() or ["(no output)"])[-1])
        if tests.returncode != 0:
            failures.append(f"{core_type} (exit {tests.returncode}):\n{tests.stdout[-3000:]}\n"
                            f"{crash_report(tests.stderr)}")
    print("OpenBLAS core types exercised:\n  " + "\n  ".join(report))
    assert not failures, "\n".join(failures)
    assert len(runs) + (here in first) >= 3, f"fewer distinct kernels than the CPU offers: {report}"


def test_core_types_are_chosen_by_the_cpus_flags():
    assert runnable_core_types({"pni", "ssse3", "sse4_2", "avx", "avx2", "fma"}) == [
        "Prescott", "Nehalem", "Sandybridge", "Haswell", "Zen"]
    avx512 = {"pni", "ssse3", "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq"}
    assert "SkylakeX" in runnable_core_types(avx512) and "Cooperlake" not in runnable_core_types(avx512)
    assert "SkylakeX" not in runnable_core_types(avx512 - {"avx512dq"})


def test_the_subset_counts_as_run_only_when_the_session_holds_all_of_it(request):
    class Item:
        def __init__(self, path):
            self.path = TESTS.parent / path

    assert subset_in_session([Item(path) for path in SUBSET + ["tests/cli/test_commands.py"]])
    assert not subset_in_session([Item(path) for path in SUBSET[1:]])


def test_a_crashed_runs_report_starts_at_its_fatal_error_not_at_the_extension_modules_it_lists_last():
    crash = ("collected\nFatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
             '  File "tests/io/test_write_features.py", line 42 in test_x\n\nExtension modules: '
             + ", ".join(f"module{i}" for i in range(300)) + " (total: 300)\n")
    report = crash_report(crash)
    assert report.startswith("Fatal Python error") and "test_write_features.py" in report
    assert crash_report("E   AssertionError\n" * 200).endswith("E   AssertionError\n")
    assert len(crash_report("x" * 5000)) == 1000
