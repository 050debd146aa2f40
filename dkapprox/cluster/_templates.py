"""The cluster config templates dkapprox ships: ``cluster_configs/*.yaml``, at the repository's top.

That folder is their one copy. The wheel carries it as package data, ``dkapprox/cluster/configs/``
(pyproject.toml maps the data-only package ``dkapprox.cluster.configs`` to ``cluster_configs/``),
so the templates reach a ``pip install`` user as well as a clone: ``dkapprox cluster-config slurm >
slurm.yaml`` prints one to copy and edit. A clone (``pip install -e .``, or the checkout on
``sys.path``) runs this module from its ``dkapprox/`` folder and reads the top-level folder itself.
The tests check that each one is a valid config of its kind (``tests/cluster/test_config.py``) and
that the command prints the top-level files byte for byte (``tests/cli/test_commands.py``).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..errors import ClusterConfigError

#: where a built package (wheel, sdist install) holds them, beside this module
_PACKAGED = "configs"
#: where a clone holds them, relative to the folder above ``dkapprox/``
_CHECKOUT = "cluster_configs"


def _folder() -> Traversable:
    """The templates' folder: the package data where an installed wheel put it, else the clone's top folder.

    The package data comes first: in site-packages, the folder above ``dkapprox/`` is everyone's, and a
    ``cluster_configs`` there would belong to some other distribution.
    """
    packaged = resources.files(__package__).joinpath(_PACKAGED)
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / _CHECKOUT


def template_names() -> list[str]:
    """The names of the shipped templates (one per kind: ``local``, ``slurm``, ...), sorted."""
    return sorted(entry.name[: -len(".yaml")] for entry in _folder().iterdir() if entry.name.endswith(".yaml"))


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
    return _folder().joinpath(f"{name}.yaml").read_bytes().decode("utf-8")  # the file exactly, line ends too
