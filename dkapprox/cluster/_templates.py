"""The cluster config templates dkapprox ships: ``dkapprox/cluster/configs/*.yaml``.

They are package data, so they reach a ``pip install`` user as well as a clone:
``dkapprox cluster-config slurm > slurm.yaml`` prints one to copy and edit. The
tests check that each one is a valid config of its kind (``tests/cluster/test_config.py``).
"""

from __future__ import annotations

from importlib import resources

from ..errors import ClusterConfigError

_FOLDER = "configs"


def template_names() -> list[str]:
    """The names of the shipped templates (one per kind: ``local``, ``slurm``, ...), sorted."""
    folder = resources.files(__package__).joinpath(_FOLDER)
    return sorted(entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def template(name: str) -> str:
    """The text of the shipped template ``name`` (see :func:`template_names`), comments included.

    Raises
    ------
    ClusterConfigError
        No template has that name; the message lists the names there are.
    """
    names = template_names()
    if name not in names:
        raise ClusterConfigError(f"no cluster config template {name!r}; the templates are: {', '.join(names)}")
    return resources.files(__package__).joinpath(_FOLDER, f"{name}.yaml").read_text(encoding="utf-8")
