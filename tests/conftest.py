"""Shared test fixtures: where the conformance corpora live."""

from __future__ import annotations

from pathlib import Path

import pytest

from paths import CORPORA, ROOT, SHARED  # noqa: F401 - importable from here as before


@pytest.fixture(scope="session")
def corpora() -> Path:
    assert CORPORA.is_dir(), f"the shared corpora must be beside the checkout: {CORPORA}"
    return CORPORA


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests against a live ROS 1 graph (real rosmaster, rostopic and rosbag processes) depend
    on process start-up and network timing we do not control: each may run up to three
    times, so that only a failure that repeats fails the suite.  Everything else runs once."""
    for item in items:
        if item.get_closest_marker("live") is not None and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=2, reruns_delay=1))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the docs' numbers (tests/docs/: examples, pages, build and browser times) the tests recorded
    with ``record_property("docs_summary", ...)``."""
    lines = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", ()):
                if key == "docs_summary" and getattr(report, "when", "call") == "call":
                    lines.append(str(value))
    if lines:
        terminalreporter.write_sep("-", "documentation")
        for line in sorted(set(lines)):
            terminalreporter.write_line(line)
