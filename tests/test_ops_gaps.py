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


# --- ops.compress / ops.decompress ----------------------------------------------------------
@pytest.mark.parametrize(("ext", "comp", "want"), [(".bag", "lz4", "lz4"), (".bag", "bz2", "bz2"), (".mcap", "lz4", "lz4")])
def test_ops_compress_then_decompress(tmp_path: Path, ext: str, comp: str, want: str) -> None:
    import polybag

    src = tmp_path / f"in{ext}"
    if ext == ".bag":
        src.write_bytes(EXAMPLE.read_bytes())
    else:
        ops.convert(EXAMPLE, src)
    before = rows(src)
    res = ops.compress(src, comp)
    assert not res.skipped and res.output == str(src) and res.compression == want
    assert res.messages == len(before)
    assert Path(res.backup or "").exists() and Path(res.backup or "").read_bytes() != src.read_bytes()
    with polybag.open(src) as r:
        comps = {c.compression for c in r.summary.chunks}
    assert comps == {want}
    assert rows(src) == before
    # a second in-place run finds the backup and skips (with a warning), unless forced
    again = ops.compress(src, comp)
    assert again.skipped and again.warnings and again.output is None
    out = ops.decompress(src, output_dir=tmp_path / "plain")
    assert out.output == str(tmp_path / "plain" / src.name) and out.backup is None
    with polybag.open(out.output) as r:
        assert {c.compression for c in r.summary.chunks} <= {"none", ""}
    assert rows(out.output) == before


def test_ops_compress_rejects_ulog(tmp_path: Path) -> None:
    from polybag.errors import PolybagError

    ulg = next((CORPORA / "ulog").rglob("*.ulg"))
    with pytest.raises(PolybagError, match="no chunk compression"):
        ops.compress(ulg, output_dir=tmp_path)
