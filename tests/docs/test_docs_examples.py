"""Every code example of every documentation page runs (tests/docs/run_examples.py has the
rules; docs/about-these-docs.md explains them to authors): one test per page, and one that
lists the examples (every skip has a reason, no example hides in a language that never runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_examples import DOCS, Fixtures, NotAvailable, all_pages, inventory, parse_page, run_page, unavailable

PAGES = all_pages()


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_page_examples(page: Path, page_fixtures: Fixtures, tmp_path: Path) -> None:
    try:
        result = run_page(page, tmp_path / "page", page_fixtures)
    except NotAvailable as e:
        unavailable(str(e))
    assert result.ok, result.report()
    # every console/python/sh block of the page either ran or was skipped
    planned = [b for b in parse_page(page) if b.runs]
    assert sorted(b.line for b in result.ran + result.skipped) == [b.line for b in planned], result.report()


def test_docs_examples_listed(record_property: pytest.RecordProperty) -> None:
    inv = inventory(PAGES)
    assert PAGES, "no page under docs/"
    assert not inv.problems, "\n".join(inv.problems)
    print(inv.summary())
    for b in inv.skipped:
        print(f"skipped: {b.where}: {b.skip}")
    assert inv.run, "no example runs"
    record_property("docs_summary", inv.summary())
