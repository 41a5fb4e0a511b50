"""A 2.0 bag's lazy chunk headers (issue 17) over S3: the requests of open, a 1% window, a
full read and ``summary`` of a 6 MB bag of ~60 chunks on a real S3 server (SeaweedFS, the
``seaweed`` fixture), through s3fs.  The same jobs over HTTP without multi-range, and the
rest of the lazy-header tests: tests/formats/bag/test_bag_lazy_headers.py (moved here from
there, issue 30, so that it reaches the ``seaweed`` fixture instead of starting moto)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from remote_helpers import STEP, T0, write_big
from seaweed import SeaweedS3, upload

import polybag

pytest.importorskip("s3fs")


@pytest.fixture(scope="module")
def lazy_bag(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, int]]:
    """A 6 MB bag of 600 messages of 10 KB, ~60 chunks of 100 KB."""
    d = tmp_path_factory.mktemp("lazy_s3")
    p = write_big(d / "lazy.bag", n=600, payload=10_000, chunk_size=100_000)
    with polybag.open(str(p)) as r:
        n_chunks = len(r.chunks)  # type: ignore[attr-defined]
    yield p, n_chunks, p.stat().st_size


def _jobs(url: str, opts: dict[str, Any], n: int = 600) -> dict[str, tuple[int, int]]:
    """Requests and bytes fetched by each job, each on a new reader."""
    out = {}
    for job in ("open", "window", "full", "info"):
        with polybag.open(url, **opts) as r:
            if job == "window":
                lo = T0 + n // 2 * STEP
                assert sum(1 for m in r.messages(start=lo, end=lo + n // 100 * STEP) if m.topic == "/big") == 6
            elif job == "full":
                assert sum(1 for _ in r.messages()) == n + n // 10
            elif job == "info":
                assert r.summary.message_count == n + n // 10
            st = r.source.stats
            out[job] = (st["requests"], st["bytes_fetched"])
    return out


def test_s3_requests_of_a_lazy_bag(seaweed: SeaweedS3, lazy_bag: tuple[Path, int, int]) -> None:
    p, n_chunks, size = lazy_bag
    upload(seaweed, "lazy", {p.name: p})
    got = _jobs(f"s3://lazy/{p.name}", {"storage_options": seaweed.storage_options()})
    assert n_chunks > 40
    # the open's requests: the HEAD and the first and last bytes (one range a request)
    assert got["open"][0] <= 3 and got["open"][1] < size // 20, got
    assert got["window"][0] <= 5 and got["window"][1] < size // 10, got  # not one per chunk
    # hinted: the first chunk alone (a first message costs one chunk), then a few requests
    # growing from 4 MiB (a read stopped early fetched little beyond it), not one per chunk
    assert got["full"][0] <= 6, got
    assert got["info"][0] <= n_chunks + 2, got  # every chunk header (no multi-range on S3)
