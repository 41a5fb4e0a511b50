"""The documentation site builds with ``sphinx-build -W --keep-going`` (any warning fails:
a broken cross-reference, a docstring Sphinx cannot read, a toctree entry that names no page),
every page of docs/ becomes an HTML page, and the pages the site promises exist."""

from __future__ import annotations

import pytest
from docs_site import Site
from run_examples import DOCS

#: the pages the index promises (a toctree entry naming no page also fails the -W build; this
#: says which pages the site must have)
PROMISED = [
    "index.md",
    "install.md",
    "start/ros1.md",
    "start/ros2.md",
    "start/px4.md",
    "start/data.md",
    "commands/index.md",
    "formats.md",
    "security.md",
    "errors.md",
    "about-these-docs.md",
    "api/reading.md",
    "api/writing.md",
    "api/decoding.md",
    "api/sensors.md",
    "api/dask.md",
    "api/errors.md",
]


def test_site_builds_without_warnings(built_site: Site, record_property: pytest.RecordProperty) -> None:
    record_property("docs_summary", f"docs build: {built_site.seconds:.1f} s")
    assert built_site.returncode == 0, built_site.log[-20000:]
    assert "WARNING" not in built_site.log, built_site.log[-20000:]


def test_every_page_has_html(built_site: Site) -> None:
    pages = sorted(p.relative_to(DOCS).with_suffix(".html") for p in DOCS.rglob("*.md"))
    assert pages
    missing = [str(p) for p in pages if not (built_site.html / p).is_file()]
    assert not missing, f"pages without HTML: {missing}\n{built_site.log[-5000:]}"
    assert (built_site.html / "search.html").is_file() and (built_site.html / "searchindex.js").is_file()


def test_promised_pages_exist() -> None:
    missing = [p for p in PROMISED if not (DOCS / p).is_file()]
    assert not missing, f"pages the site promises but docs/ lacks: {missing}"
    assert any((DOCS / "recipes").glob("*.md")), "no recipe in docs/recipes/"
    commands = {p.stem for p in (DOCS / "commands").glob("*.md")} - {"index"}
    assert {"info", "convert", "cat", "filter"} <= commands, sorted(commands)
