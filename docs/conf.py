"""Sphinx configuration of the dkapprox documentation site.

Build (from the repository root; offline, the gallery executed at small sizes):

    .venv/bin/python -m sphinx -W --keep-going -n -b html docs docs/_build/html

Nothing is fetched at build time: no intersphinx; references to scikit-learn,
NumPy and the other libraries become plain links (``_external_link`` below) or
stay plain text; MathJax is copied from Debian's ``libjs-mathjax`` when it is
installed (``apt-get install libjs-mathjax``), so formulas render without a CDN.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from docutils import nodes

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS))  # docs/_ext.py: the API page list and the small gallery sizes


import dkapprox  # noqa: E402

project = "dkapprox"
author = "the dkapprox developers"
copyright = "the dkapprox developers, BSD-3-Clause"
release = version = dkapprox.__version__ if hasattr(dkapprox, "__version__") else "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json", "auto_examples/*.codeobj.json"]
root_doc = "index"
nitpicky = True
suppress_warnings = ["myst.header"]  # CONTRIBUTING.md and ARCHITECTURE.md start at level 2 when included

# --- API pages ------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types, in words
numpydoc_show_class_members = False  # the class template lists the methods itself
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
numpydoc_attributes_as_param_list = True

# --- references outside this site: plain links, never fetched ----------------------------------
# Names of other libraries that docstrings mention in roles (:class:`sklearn...`, :func:`numpy...`),
# and the types numpydoc sees in "Parameters" lines, cannot resolve without intersphinx; these do
# not count as broken. scikit-learn's get a link to their page in its API reference (_external_link).
nitpick_ignore_regex = [
    (r"py:.*", r"(sklearn|numpy|np|scipy|dask|distributed|zarr|xarray|pandas|polars|numba|click|"
               r"threadpoolctl|joblib|dask_jobqueue|dask_kubernetes)(\..*)?"),
    (r"py:.*", r"(int|float|str|bool|bytes|dict|list|tuple|set|None|callable|object|type|Path|"
               r"os\.PathLike|pathlib\.Path|Exception|ValueError|TypeError|OSError|RuntimeError|"
               r"MemoryError|KeyError|FileNotFoundError|FileExistsError|NotImplementedError)"),
]

# --- math without a CDN -----------------------------------------------------------------------
MATHJAX_SOURCE = Path("/usr/share/javascript/mathjax")  # Debian's libjs-mathjax (MathJax 2.7)
if (MATHJAX_SOURCE / "MathJax.js").is_file():
    mathjax_path = "mathjax/MathJax.js?config=TeX-AMS_SVG"
    mathjax2_config = {"SVG": {"font": "TeX"}, "messageStyle": "none"}

# --- HTML -------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "dkapprox"
html_static_path = ["_static"]
html_css_files = ["dkapprox.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 5,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    # gallery pages are mostly code: no right-hand contents column, so the code gets the width
    # (the theme refuses overlapping patterns, so the others are named)
    "secondary_sidebar_items": {**{page: ["page-toc"] for page in (
        "index", "getting_started", "choosing", "precision", "jobs", "storage", "clusters", "learning", "survives",
        "performance", "api",
        "changelog", "contributing", "user_guide/*", "generated/*")}, "auto_examples/*": []},
}
# pages without sub-pages have no section navigation: no left sidebar either, so that their text
# (code, the measured tables) gets the width (at 1280 px the empty sidebar left a 620 px column)
html_sidebars = {page: [] for page in ("index", "getting_started", "choosing", "precision", "jobs", "storage",
                                       "clusters", "learning", "survives", "performance", "changelog",
                                       "contributing")}
html_last_updated_fmt = None

# --- gallery ----------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py$",  # every example runs, not only plot_*
    "ignore_pattern": r"(__init__|_common)\.py$",
    "reset_argv": "_ext.gallery_argv",  # small sizes: seconds per example
    "image_scrapers": ("matplotlib",),
    "doc_module": ("dkapprox",),  # "Examples using X" on the API pages
    "backreferences_dir": "generated/backreferences",
    "remove_config_comments": True,
    "download_all_examples": False,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "capture_repr": (),
    "show_memory": False,
    "show_signature": False,
    "min_reported_time": 1,
    "within_subsection_order": "FileNameSortKey",
    "write_computation_times": False,
    "matplotlib_animations": False,
}


def _external_link(app, env, node, contnode):
    """A reference to scikit-learn's API: a plain link to its page, like intersphinx without the fetch."""
    target = node.get("reftarget", "")
    if node.get("refdomain") == "py" and re.match(r"sklearn\.[\w.]+$", target):
        parts = target.split(".")
        # sklearn.a.b.Name -> generated/sklearn.a.b.Name.html; a method: the class's page with an anchor
        page = target if not (len(parts) > 3 and parts[-2][:1].isupper()) else ".".join(parts[:-1])
        url = f"https://scikit-learn.org/stable/modules/generated/{page}.html"
        if page != target:
            url += f"#{target}"
        if node.get("reftype") == "mod":
            url = "https://scikit-learn.org/stable/api/" + target + ".html"
        reference = nodes.reference("", "", internal=False, refuri=url, reftitle=target)
        reference.append(contnode)
        return reference
    return None


PUBLIC_MODULES = ("dkapprox", "dkapprox.io", "dkapprox.models", "dkapprox.linear_model", "dkapprox.metrics",
                  "dkapprox.errors")


def _resolve_in_package(app, env, node, contnode):
    """Resolve a docstring's short or submodule reference to dkapprox's public page of the same object.

    ``:func:`fingerprint``` in ``dkapprox.save`` (also ``dkapprox.models.save``), ``:obj:`classes_``` in a
    class's Attributes: tried as a member of the class, then under each public module. A reference to
    a private module (``dkapprox.io._zarr_store``) stays code text: private modules have no page.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = [f"{module}.{cls}.{target}"] if module and cls else []
    candidates += [f"{m}.{target.rsplit('.', 1)[-1]}" for m in PUBLIC_MODULES]
    py = env.get_domain("py")
    for candidate in candidates:
        if candidate in py.objects:
            resolved = py.resolve_xref(env, node["refdoc"], app.builder, "obj", candidate, node, contnode)
            if resolved is not None:
                return resolved
    if target.startswith("dkapprox.") and any(part.startswith("_") for part in target.split(".")):
        return contnode
    return None


def _copy_mathjax(app, exception):
    """Copy the parts of Debian's MathJax 2 that TeX-AMS_SVG loads into _static/mathjax."""
    if exception is not None or app.builder.format != "html" or not (MATHJAX_SOURCE / "MathJax.js").is_file():
        return
    target = Path(app.outdir) / "_static" / "mathjax"
    if (target / "MathJax.js").is_file():
        return
    parts = ["MathJax.js", "config/TeX-AMS_SVG.js", "extensions", "jax/input/TeX", "jax/element",
             "jax/output/SVG/jax.js", "jax/output/SVG/config.js", "jax/output/SVG/autoload",
             "jax/output/SVG/fonts/TeX", "localization/en"]
    for part in parts:
        source = (MATHJAX_SOURCE / part).resolve()
        destination = target / part
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, destination, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, destination)


def setup(app):
    app.connect("missing-reference", _external_link)
    app.connect("missing-reference", _resolve_in_package)
    app.connect("build-finished", _copy_mathjax)
    os.environ.setdefault("DKAPPROX_DOCS_BUILD", "1")
