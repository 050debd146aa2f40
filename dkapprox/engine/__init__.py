"""The engine: every dask graph of dkapprox, the threads its block tasks run with; it knows nothing above it.

Its modules, by job: ``_blocks`` (row blocks mapped, folded, taken, counted, made), ``_state`` (the fitted
state as one graph key, weighed and realigned), ``_store`` (writes of chosen blocks, one task a block),
``_dask_compat`` (the one module that knows dask's graph mode and private task spec), ``_blas`` (one BLAS
thread a block task; in-memory blocks mapped on threads that way) and ``_device_turns`` (one thread at a
time queueing work on a device).
"""

from ._blas import map_in_threads, map_rows_in_threads, reduce_in_threads
from ._blocks import (
    generate_rows,
    is_sparse_meta,
    iter_row_blocks,
    map_rows,
    reduce_aligned_rows,
    row_blocks,
    row_sizes,
    take_rows,
    tree_reduce,
    with_row_sizes,
)
from ._dask_compat import array_from_graph, expression_mode, from_zarr
from ._state import SizedState, byte_aligned, graph_constants, nbytes, shipped_states
from ._store import store_blocks, written_keys
