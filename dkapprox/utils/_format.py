"""One way to say a size in a message or a repr: dask's, so that ours read like the dashboard's."""

from __future__ import annotations

from dask.utils import format_bytes


def format_size(nbytes) -> str:
    """Bytes as dask says them (binary prefixes, two decimals, the larger unit from 0.9 of it on).

    >>> format_size(1440), format_size(600 * 2**20), format_size(512)
    ('1.41 kiB', '600.00 MiB', '512 B')
    """
    return format_bytes(int(nbytes))
