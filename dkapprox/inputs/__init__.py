"""Every input through one door: the form told apart, validated, frames read and written back, rows read."""

from ._lazy import as_frame, as_input, compute, frame_as_dask, persist_if_fits
from ._rows import InMemoryRows, row_source
from ._validation import FLOAT_DTYPES, BlockCheck, check_input
