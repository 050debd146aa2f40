"""Resume after a killed job (issue 7, scenario 4): SIGKILL the CLI at 25%, 50% and 90% of its blocks.

One real ``dkapprox transform`` on a LocalCluster of two worker processes is
killed with SIGKILL when a quarter of its blocks are recorded in the store,
rerun and killed again at half, rerun and killed at 90%, then rerun to the
end. After every kill: no completion mark, readers refuse the store, and no
process of the killed job is left. After every rerun, the store's own files
show that blocks finished before it were not touched and that the final run
wrote exactly the missing ones; the finished store is byte for byte the
store of an undisturbed run.

(tests/cli/test_commands.py interrupts an in-process cluster at other points, with
SIGTERM and a changed model; tests/io/test_kill_resume.py kills the library.)
"""

import os
import signal
import time

import numpy as np
import psutil
import pytest
from cli.test_commands import _start, cli, make_input

from dkapprox import io, models
from dkapprox.errors import IncompleteStoreError
from dkapprox.kernel_approximation import RBFSampler

ROWS, BLOCK = 120_000, 500  # 240 blocks of 500 x 256 float32 features (500 KiB each)
BLOCKS = ROWS // BLOCK
KILL_AT = (0.25, 0.50, 0.90)


def _recorded(out):
    """Block rows recorded done, read from the store's files (a marker file per finished block)."""
    root = os.path.join(out, "blocks_done", "c")
    if not os.path.isdir(root):
        return set()
    return {int(i) for i in os.listdir(root) if os.path.exists(os.path.join(root, i, "0"))}


def _stats(out, blocks):
    """(inode, mtime_ns, size) of each block's data chunk and its done marker, for the given blocks."""
    stat = lambda path: (lambda s: (s.st_ino, s.st_mtime_ns, s.st_size))(os.stat(path))  # noqa: E731
    return {i: (stat(os.path.join(out, "features", "c", str(i), "0")),
                stat(os.path.join(out, "blocks_done", "c", str(i), "0"))) for i in blocks}


def _data_stats(out):
    root = os.path.join(out, "features", "c")
    found = {}
    for i in os.listdir(root) if os.path.isdir(root) else ():
        path = os.path.join(root, i, "0")
        if os.path.exists(path):
            s = os.stat(path)
            found[int(i)] = (s.st_ino, s.st_mtime_ns, s.st_size)
    return found


def _kill_at(proc, out, at_least, timeout=180):
    """SIGKILL the CLI once ``at_least`` blocks are recorded; wait until its worker processes are gone too."""
    deadline = time.monotonic() + timeout
    while len(_recorded(out)) < at_least:
        assert proc.poll() is None, f"the job ended before block {at_least}: {proc.communicate()}"
        assert time.monotonic() < deadline, "the job never got there"
        time.sleep(0.002)
    family = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    proc.communicate()
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"processes of the killed job outlived it: {alive}"  # orphans would write on


def _same_bytes(a, b):
    """Differing bytes between the chunk files of two stores (the group's zarr.json holds times, not data)."""
    def files(root):
        return {os.path.relpath(os.path.join(d, f), root): os.path.join(d, f)
                for d, _, names in os.walk(root) for f in names if os.path.relpath(d, root) != "."}
    fa, fb = files(a), files(b)
    assert sorted(fa) == sorted(fb)  # the same chunks, array metadata, and no leftover temporary files
    differing = 0
    for name in fa:
        x = np.fromfile(fa[name], dtype=np.uint8)
        y = np.fromfile(fb[name], dtype=np.uint8)
        differing += abs(x.size - y.size) + int(np.count_nonzero(x[: y.size] != y[: x.size]))
    return differing, len(fa)


@pytest.mark.slow
def test_sigkill_at_25_50_90_percent_then_reruns_write_only_missing_blocks_and_the_undisturbed_bytes(tmp_path):
    X = make_input(tmp_path / "x.zarr", rows=ROWS, features=16, chunk=BLOCK)
    models.save(RBFSampler(n_components=256, gamma=0.5, random_state=0).fit(X), tmp_path / "model")
    (tmp_path / "procs.yaml").write_text("kind: local\nn_workers: 2\nthreads_per_worker: 1\ndashboard_address: null\n")
    job = ("transform", tmp_path / "x.zarr", "--model", tmp_path / "model", "--cluster", tmp_path / "procs.yaml")
    reference = _start(*job, "--out", tmp_path / "ref.zarr")  # undisturbed, beside the first run
    out = str(tmp_path / "z.zarr")

    kills = []
    for fraction in KILL_AT:
        done_before = _recorded(out)
        untouched = _stats(out, done_before)
        _kill_at(_start(*job, "--out", out), out, int(fraction * BLOCKS))
        described = io.describe(out)
        done = _recorded(out)
        assert described["blocks_done"] == len(done) and described["blocks_total"] == BLOCKS
        assert described["status"] == "writing" and described["completed"] is None  # no completion mark
        with pytest.raises(IncompleteStoreError, match=rf"incomplete dkapprox output \({len(done)} of {BLOCKS}"):
            io.open_features(out)
        assert fraction * BLOCKS <= len(done) < BLOCKS
        assert done >= done_before and _stats(out, done_before) == untouched  # finished blocks left alone
        kills.append((len(done), len(done - done_before)))
    assert reference.wait(timeout=300) == 0, reference.communicate()

    done_before = _recorded(out)
    untouched, data_before = _stats(out, done_before), _data_stats(out)
    final = cli(*job, "--out", out, timeout=300)
    assert final.returncode == 0, final.stderr
    missing = BLOCKS - len(done_before)
    assert f"{missing} blocks written, {len(done_before)} already there, of {BLOCKS}" in final.stdout
    assert _stats(out, done_before) == untouched
    rewritten = {i for i, s in _data_stats(out).items() if data_before.get(i) != s}
    assert rewritten == set(range(BLOCKS)) - done_before  # exactly the missing blocks, from the files
    assert io.describe(out)["status"] == "complete"

    differing, files = _same_bytes(out, str(tmp_path / "ref.zarr"))
    print(f"\nscenario 4: {BLOCKS} blocks; killed at (blocks done, written by that run): {kills}; "
          f"final rerun wrote {len(rewritten)} ({missing} missing); {len(done_before)} finished blocks' "
          f"files untouched; {differing} bytes differ in {files} files")
    assert differing == 0
