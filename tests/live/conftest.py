"""Fixtures of the live ROS 1 tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ros1_graph import Graph


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    """A ``rosmaster`` on a free port for one test, and everything the test started in it,
    stopped at the end."""
    g = Graph(tmp_path)
    try:
        yield g
    finally:
        g.close()
