"""Small things the storage modules share: the package version, time stamps, canonical JSON."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from .._version import __version__


def package_version() -> str:
    return str(__version__)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def canonical_json(obj) -> str:
    """One spelling of a JSON document (sorted keys, no spaces, no NaN), for comparing and hashing."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True)
