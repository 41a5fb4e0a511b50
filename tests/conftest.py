"""Shared test fixtures: where the conformance corpora live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPORA = SHARED / "corpora"


@pytest.fixture(scope="session")
def corpora() -> Path:
    assert CORPORA.is_dir(), f"the shared corpora must be beside the checkout: {CORPORA}"
    return CORPORA
