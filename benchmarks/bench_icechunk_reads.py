"""One input chunk read from an Icechunk repository against the same chunk from a plain Zarr store (issue 50).

    python benchmarks/bench_icechunk_reads.py [--chunks 100] [--rows 10000] [--repeats 5] [--root /dev/shm]

The same float32 array (chunks of ``--rows`` x 32, zstd, as ``bench_icechunk.py``'s input) is written to a
local Zarr store and to a local Icechunk repository; each chunk is then read in turn, warm (the files in the
page cache), as the bare stored bytes (``store.get``) and as the decoded array (``array[rows]``). It prints
the wall and CPU milliseconds per chunk side by side and Icechunk's cost over Zarr's, best of ``--repeats``.

The CPU column is the point: on two cores a featurization job is bound by its CPU, so what a read costs
in CPU, on any thread (icechunk reads on its own Tokio threads), is what the job pays. With ``--settings``
it also reads through icechunk's concurrency settings (requests per object, ideal request size).
"""

import argparse
import os
import shutil
import tempfile
import time

import numpy as np

os.environ.setdefault("ICECHUNK_LOG", "error")


def _write(root, chunks, rows):
    import icechunk
    import zarr

    data = np.random.default_rng(0).random((chunks * rows, 32)).astype(np.float32)
    zarr.create_array(f"{root}/x.zarr", shape=data.shape, chunks=(rows, 32), dtype="f4")[...] = data
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(f"{root}/repo"))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="X", shape=data.shape, chunks=(rows, 32), dtype="f4")[...] = data
    session.commit("input")


def _icechunk_array(root, per_object=None, request_size=None):
    import icechunk
    import zarr

    config = None
    if per_object:
        concurrency = icechunk.StorageConcurrencySettings(max_concurrent_requests_for_object=per_object,
                                                          ideal_concurrent_request_size=request_size)
        config = icechunk.RepositoryConfig(storage=icechunk.StorageSettings(concurrency=concurrency))
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(f"{root}/repo"), config=config)
    return zarr.open_array(repo.readonly_session(branch="main").store, path="X", mode="r")


def _per_chunk(read, chunks, repeats):
    """Best (wall, CPU) milliseconds per chunk over ``repeats`` passes (CPU: this process, every thread)."""
    best = None
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(chunks):
            read(i)
        got = ((time.perf_counter() - wall) * 1e3 / chunks, (time.process_time() - cpu) * 1e3 / chunks)
        best = got if best is None or got[1] < best[1] else best
    return best


def _readers(array, rows):
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    prototype, store = default_buffer_prototype(), array.store
    prefix = f"{array.path}/" if array.path else ""
    return {"bytes": lambda i: sync(store.get(f"{prefix}c/{i}/0", prototype)),
            "array": lambda i: array[i * rows:(i + 1) * rows]}


def main():
    import icechunk
    import zarr

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--root", default=None, help="where the two stores go (default: a temporary folder)")
    parser.add_argument("--settings", action="store_true", help="also icechunk's request settings")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="dkapprox-icechunk-reads-", dir=args.root)
    try:
        _write(root, args.chunks, args.rows)
        size = os.path.getsize(f"{root}/x.zarr/c/0/0")
        print(f"icechunk {icechunk.__version__}, zarr {zarr.__version__}: {args.chunks} chunks of {args.rows:,} x 32 "
              f"float32, zstd, {size / 1e6:.2f} MB stored each; best of {args.repeats}, ms per chunk")
        plain = _readers(zarr.open_array(f"{root}/x.zarr", mode="r"), args.rows)
        kinds = [("default", _icechunk_array(root))]
        if args.settings:
            kinds += [(f"{n} requests of {s >> 10} KiB", _icechunk_array(root, n, s))
                      for n, s in ((1, 64 << 20), (2, 1 << 20), (10, 128 << 10))]
        for what in ("bytes", "array"):
            zw, zc = _per_chunk(plain[what], args.chunks, args.repeats)
            for name, array in kinds:
                iw, ic = _per_chunk(_readers(array, args.rows)[what], args.chunks, args.repeats)
                print(f"{what:<6} Zarr wall {zw:5.2f} CPU {zc:5.2f}   Icechunk ({name}) wall {iw:5.2f} CPU {ic:5.2f}   "
                      f"Icechunk/Zarr: wall {iw / zw:4.2f}x, CPU {ic / zc:4.2f}x, CPU +{ic - zc:.2f} ms a chunk")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
