"""Fixtures of the documentation tests: what the examples need (a SeaweedFS S3 server, a
ROS 1 master: run_examples.Fixtures) and the built site (one sphinx-build per test session,
shared by the xdist workers through a file lock)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_site import Site, build
from run_examples import Fixtures


@pytest.fixture(scope="session")
def docs_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixtures]:
    """Starts what a page's ``needs`` comments ask, lazily (see run_examples.Fixtures)."""
    fixtures = Fixtures(tmp_path_factory.mktemp("docs-fixtures"))
    try:
        yield fixtures
    finally:
        fixtures.close()


@pytest.fixture
def page_fixtures(docs_fixtures: Fixtures) -> Iterator[Fixtures]:
    """``docs_fixtures`` with the page's own (a ROS 1 master) stopped after the test."""
    try:
        yield docs_fixtures
    finally:
        docs_fixtures.page_done()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site built once per test session (``sphinx-build -W --keep-going``); under xdist
    the first worker builds it and the others wait on the lock and reuse it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return build(tmp_path_factory.mktemp("site"))
    shared = tmp_path_factory.getbasetemp().parent / "docs-site"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "result.json"
        if done.exists():
            data = json.loads(done.read_text())
            return Site(Path(data["html"]), data["returncode"], data["log"], data["seconds"])
        site = build(shared)
        done.write_text(json.dumps({"html": str(site.html), "returncode": site.returncode, "log": site.log, "seconds": site.seconds}))
        return site
