"""``polybag check`` of a compressed MCAP decompresses each chunk once: ``record_problems``
keeps the chunks it opened (at most ``max_chunk_bytes`` of them, and 64 MiB) for the read that follows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import polybag
from mcap_helpers import to_bytes
from polybag.io import compression
from polybag.ops.check import check_any


def _count_decompressions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = compression.decompress

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(compression, "decompress", counting)
    return calls


def _file(tmp_path: Path, comp: str | None) -> tuple[Path, int]:
    rows = [("/a" if i % 2 else "/d", 1000 + i, 1000 + i, i, bytes([i % 251]) * 40) for i in range(600)]
    path = tmp_path / "c.mcap"
    path.write_bytes(to_bytes(rows, compression=comp, chunk_size=2000))
    with polybag.open(path) as r:
        chunks = len(r.summary.chunks)
    assert chunks > 5
    return path, chunks


@pytest.mark.parametrize("comp", ["zstd", "lz4"])
def test_check_decompresses_each_chunk_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, comp: str) -> None:
    path, chunks = _file(tmp_path, comp)
    calls = _count_decompressions(monkeypatch)
    report = check_any(str(path))
    assert report["problems"] == [] and report["messages"] == 600
    assert len(calls) == chunks


def test_what_is_kept_is_bounded_by_max_chunk_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, chunks = _file(tmp_path, "zstd")
    calls = _count_decompressions(monkeypatch)
    with polybag.open(path, max_chunk_bytes=5000) as r:  # room for two chunks of about 2 kB
        assert r.record_problems() == []
        kept = len(calls)
        assert sum(1 for _ in r.messages(order="file")) == 600
    assert kept == chunks and len(calls) == 2 * chunks - 2


def test_a_second_read_decompresses_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, chunks = _file(tmp_path, "zstd")
    calls = _count_decompressions(monkeypatch)
    with polybag.open(path) as r:
        r.record_problems()
        first = [bytes(m.data) for m in r.messages(order="file")]
        second = [bytes(m.data) for m in r.messages(order="file")]
    assert first == second and len(calls) == 2 * chunks


def test_what_is_kept_is_bounded_below_the_chunk_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """However large one chunk may be, a check keeps at most KEPT_CHUNK_BYTES between its walk
    and its read (here lowered to room for two chunks)."""
    from polybag.formats.mcap import context

    monkeypatch.setattr(context, "KEPT_CHUNK_BYTES", 5000)
    path, chunks = _file(tmp_path, "zstd")
    calls = _count_decompressions(monkeypatch)
    with polybag.open(path) as r:
        assert r.record_problems() == []
        assert sum(1 for _ in r.messages(order="file")) == 600
    assert len(calls) == 2 * chunks - 2
