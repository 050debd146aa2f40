"""The engine: every dask graph of dkapprox, the threads its block tasks run with; it knows nothing above it."""

from ._graph import (
    SizedState,
    array_from_graph,
    byte_aligned,
    expression_mode,
    generate_rows,
    graph_constants,
    is_sparse_meta,
    iter_row_blocks,
    map_rows,
    nbytes,
    reduce_aligned_rows,
    row_blocks,
    row_sizes,
    shipped_states,
    store_blocks,
    take_rows,
    tree_reduce,
    with_row_sizes,
    written_keys,
)
