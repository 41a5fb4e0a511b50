"""Where the checkout and the shared conformance corpora are (imported by tests as
``from paths import CORPORA``; not from ``conftest``, which names a different module in each
folder that has one)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPORA = SHARED / "corpora"
