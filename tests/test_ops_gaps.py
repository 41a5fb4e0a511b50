"""Gaps found in the operations audit: bounded split part size, library compress/decompress,
streaming export (same tables as the whole-topic export), convert to ULog."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ops_helpers import CORPORA, rows
from polybag import ops

EXAMPLE = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"


# --- split --size bounds the part size on disk ---------------------------------------------
@pytest.mark.parametrize(
    ("ext", "compression", "size"),
    [(".bag", None, 200_000), (".mcap", "none", 200_000), (".mcap", "zstd", 120_000), (".bag", "none", 50_000)],
)
def test_split_size_bounds_parts_on_disk(tmp_path: Path, ext: str, compression: str | None, size: int) -> None:
    res = ops.split(EXAMPLE, size=size, output_dir=tmp_path, format=ext[1:], compression=compression)
    assert len(res.parts) > 2
    for p in res.parts:
        on_disk = os.path.getsize(p.path)
        assert on_disk <= size or p.messages == 1, (p.path, on_disk, p.messages)
    flat = [r for p in res.parts for r in rows(p.path)]
    assert sorted(flat) == sorted(rows(EXAMPLE))
    # uncompressed parts are not needlessly small: on average at least a third of the budget
    if compression == "none" or (ext == ".bag" and compression is None):
        assert sum(os.path.getsize(p.path) for p in res.parts) / len(res.parts) > size / 3
