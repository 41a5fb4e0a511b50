"""Sphinx configuration of polybag's documentation site (docs/about-these-docs.md tells how
it is built and tested)."""

from __future__ import annotations

from polybag._version import __version__

project = "polybag"
author = "the polybag authors"
copyright = "the polybag authors"  # noqa: A001 - Sphinx's name
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# pages are MyST Markdown: ::: fences for directives, and anchors for headings down to ###
# (so `[options](../commands/convert.md#options)` resolves and the build checks it)
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# the API pages: autodoc reads the reStructuredText docstrings of the installed package
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
nitpicky = False

suppress_warnings = [
    # myst asks every domain to resolve a link it cannot; sphinx-argparse's domain cannot
    # answer that question (the link itself still warns when it resolves nowhere)
    "myst.domains",
]

html_theme = "furo"
html_title = f"polybag {release}"
html_static_path = ["_static"]
html_favicon = "_static/polybag.svg"
html_copy_source = False
html_show_sourcelink = False

