"""A ``**`` glob on S3 (issue 30): listed page by page under the pattern's fixed prefix,
keeping only the matches, with bounds on what is listed (MAX_LISTED_OBJECTS) and what is kept
(MAX_GLOB_MATCHES); the same objects as fsspec's own ``glob``, on a real S3 server
(SeaweedFS)."""

from __future__ import annotations

from pathlib import Path

import pytest
from seaweed import SeaweedS3, upload

from polybag.errors import PolybagError, UsageError
from polybag.io import remote
from polybag.io.fsspec_transport import fs_for

pytest.importorskip("s3fs")

KEYS = [
    "deep/a.bag",
    "deep/x/b.bag",
    "deep/x/y/c.bag",
    "deep/x/y/z/d.mcap",
    "deep/x/notes.txt",
    "deep/xx/e.bag",
    "deep/x/y/z/w/f.bag",
    "deeper/g.bag",  # shares the fixed prefix's text, not its folder
]
PATTERNS = [
    "s3://logs/deep/**/*.bag",
    "s3://logs/deep/**",
    "s3://logs/deep/x/**/*.bag",
    "s3://logs/deep/**/z/*",
    "s3://logs/deep/**/[bc].bag",
]


@pytest.fixture(scope="module")
def tree(seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> None:
    d = tmp_path_factory.mktemp("globtree")
    files: dict[str, Path] = {}
    for i, key in enumerate(KEYS):
        p = d / f"f{i}"
        p.write_bytes(b"x" * (i + 1))
        files[key] = p
    upload(seaweed, "logs", files)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_same_objects_as_fsspec_glob(seaweed: SeaweedS3, tree: None, pattern: str) -> None:
    opts = seaweed.storage_options()
    fs, _ = fs_for(pattern, opts)
    fs.invalidate_cache()
    want = sorted(fs.unstrip_protocol(p) for p, i in fs.glob(pattern, detail=True).items() if i["type"] == "file")
    got = remote.expand_url(pattern, opts)
    assert got == want and got  # and something matched


def test_listing_and_matches_are_bounded(seaweed: SeaweedS3, tree: None, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = seaweed.storage_options()
    assert len(remote.expand_url("s3://logs/deep/**/*.bag", opts)) == 5
    monkeypatch.setattr(remote, "MAX_LISTED_OBJECTS", 4)
    with pytest.raises(UsageError, match=r"the listing under logs/deep/ passes 4 objects \(MAX_LISTED_OBJECTS\)"):
        remote.expand_url("s3://logs/deep/**/*.bag", opts)
    monkeypatch.setattr(remote, "MAX_LISTED_OBJECTS", 1000)
    monkeypatch.setattr(remote, "MAX_GLOB_MATCHES", 3)
    with pytest.raises(UsageError, match=r"matches more than 3 objects \(MAX_GLOB_MATCHES\)"):
        remote.expand_url("s3://logs/deep/**/*.bag", opts)


def test_nothing_matched_and_no_bucket_are_said(seaweed: SeaweedS3, tree: None) -> None:
    opts = seaweed.storage_options()
    with pytest.raises(UsageError, match=r"no object matches s3://logs/deep/\*\*/\*\.ulg"):
        remote.expand_url("s3://logs/deep/**/*.ulg", opts)
    with pytest.raises(UsageError, match=r"not a glob polybag can list: .*'\*\*' can only be an entire path component"):
        remote.expand_url("s3://logs/dee**/*.bag", opts)
    with pytest.raises(PolybagError, match="no such bucket nobucket-glob"):
        remote.expand_url("s3://nobucket-glob/**/*.bag", opts)
