"""The engine: every dask graph of dkapprox, the threads its block tasks run with; it knows nothing above it."""
