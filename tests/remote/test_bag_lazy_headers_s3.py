"""A 2.0 bag's lazy chunk headers (issue 17) over S3: the requests of open, a 1% window, a
full read and ``summary`` of a 6 MB bag of ~60 chunks on a real S3 server (SeaweedFS, the
``seaweed`` fixture), through s3fs.  The same jobs over HTTP without multi-range, and the
rest of the lazy-header tests: tests/formats/bag/test_bag_lazy_headers.py (moved here from
there, issue 30, so that it reaches the ``seaweed`` fixture instead of starting moto)."""

from __future__ import annotations

from pathlib import Path

import pytest
from remote_helpers import check_lazy_bag_counts, lazy_bag, lazy_bag_jobs
from seaweed import SeaweedS3, upload

pytest.importorskip("s3fs")


def test_s3_requests_of_a_lazy_bag(seaweed: SeaweedS3, tmp_path: Path) -> None:
    p, n_chunks, size = lazy_bag(tmp_path / "lazy.bag")
    upload(seaweed, "lazy", {p.name: p})
    got = lazy_bag_jobs(f"s3://lazy/{p.name}", {"storage_options": seaweed.storage_options()})
    check_lazy_bag_counts(got, n_chunks, size)
