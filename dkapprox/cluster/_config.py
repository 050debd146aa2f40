"""Read a cluster config: plain YAML only, checked against its kind's schema."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ClusterConfigError
from ._schema import SCHEMAS, check_mapping

MAX_CONFIG_BYTES = 1 << 20  # a cluster config is a few hundred bytes


@dataclass(frozen=True)
class ClusterConfig:
    """A validated config: its ``kind``, its checked ``options`` and where it came from."""

    kind: str
    options: dict = field(default_factory=dict)
    source: str = "<config>"


def load_config(path) -> ClusterConfig:
    """Read and validate a cluster config file.

    Relative paths inside it (TLS certificates) are taken relative to the
    file, so a config and its certificates can move together.

    Raises
    ------
    ClusterConfigError
        Unreadable, not plain YAML (e.g. a ``!!python/object`` tag: it is
        refused, never run), an unknown kind or key, or a value of the
        wrong type; the message names the file and the key.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ClusterConfigError(f"{path}: {size} bytes is too large for a cluster config")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ClusterConfigError(f"{path}: no such cluster config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterConfigError(f"{path}: cannot read it ({exc})") from None
    config = parse_config(text, source=str(path))
    return _resolve_paths(config, path.parent)


def parse_config(text: str, source: str = "<config>") -> ClusterConfig:
    """Validate a config given as YAML text (see :func:`load_config`)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ClusterConfigError(
            f"{source}: not a plain YAML config ({problem}{where}); configs are read with "
            "yaml.safe_load, so tags such as !!python/object are refused and never run"
        ) from None
    if not isinstance(raw, dict):
        raise ClusterConfigError(f"{source}: expected a mapping with a 'kind' key, got {type(raw).__name__}")
    raw = dict(raw)
    kind = raw.pop("kind", None)
    if kind not in SCHEMAS:
        kinds = ", ".join(SCHEMAS)
        if kind is None:
            raise ClusterConfigError(f"{source}: missing required key 'kind' (one of {kinds})")
        close = difflib.get_close_matches(str(kind), list(SCHEMAS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ClusterConfigError(f"{source}: unknown kind {kind!r}{hint}; known kinds: {kinds}")
    try:
        options = check_mapping(SCHEMAS[kind], raw, "")
    except ClusterConfigError as exc:
        raise ClusterConfigError(f"{source}: {exc}") from None
    if kind in ("slurm", "pbs") and "jobs" in options and "adapt" in options:
        raise ClusterConfigError(f"{source}: give either 'jobs' or 'adapt', not both")
    if kind in ("slurm", "pbs") and options.get("insecure") and options.get("tls"):
        raise ClusterConfigError(f"{source}: give either 'tls' (site certificates) or 'insecure: true', not both")
    if kind in ("slurm", "pbs"):
        from ._jobqueue import check

        try:
            check(kind, options)
        except ClusterConfigError as exc:
            raise ClusterConfigError(f"{source}: {exc}") from None
    if kind == "kubernetes" and "n_workers" in options and "adapt" in options:
        raise ClusterConfigError(f"{source}: give either 'n_workers' or 'adapt', not both")
    if kind == "cuda":
        devices, workers = options.get("CUDA_VISIBLE_DEVICES"), options.get("n_workers")
        if devices is not None and workers is not None and workers > len(devices):
            raise ClusterConfigError(
                f"{source}: n_workers ({workers}) is more than the GPUs in CUDA_VISIBLE_DEVICES "
                f"({len(devices)}): dask-cuda runs one worker per GPU")
    return ClusterConfig(kind, options, source)


def _resolve_paths(config: ClusterConfig, base: Path) -> ClusterConfig:
    tls = config.options.get("tls")
    if not tls:
        return config
    resolved = {k: (os.path.join(base, os.path.expanduser(v)) if k in ("ca_file", "cert", "key")
                    and isinstance(v, str) else v)
                for k, v in tls.items()}
    return ClusterConfig(config.kind, dict(config.options, tls=resolved), config.source)
