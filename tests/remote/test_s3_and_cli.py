"""Logs on a real S3 server (SeaweedFS, the ``seaweed`` fixture) and the CLI over URLs of a
real web server (nginx, the ``web`` fixture)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from remote_helpers import STEP, T0
from seaweed import SeaweedS3

import polybag
from polybag.io.remote_source import RemoteSource

pytest.importorskip("s3fs")


def _rows(r: polybag.Reader, **kw: Any) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(**kw)]


@pytest.mark.parametrize("name", ["mid.mcap", "mid.bag"])
def test_s3_info_window_and_full_read(seaweed: SeaweedS3, remote_dir: Path, name: str) -> None:
    size = (remote_dir / name).stat().st_size
    url = f"s3://logs/{name}"
    with polybag.open(url, storage_options=seaweed.storage_options()) as r:
        assert isinstance(r.source, RemoteSource)
        n = r.summary.message_count
        info = r.source.stats
    assert n == 165
    assert info is not None and info["bytes_fetched"] < 300_000 < size
    lo = T0 + 70 * STEP
    with polybag.open(url, storage_options=seaweed.storage_options()) as r:
        got = _rows(r, start=lo, end=lo + 3 * STEP)
        window = r.source.stats
    assert [t for t, _lt, _d in got] == ["/big", "/small", "/big", "/big"]
    assert window is not None and window["bytes_fetched"] < size // 3
    with polybag.open(str(remote_dir / name)) as local:
        expect = _rows(local)
    with polybag.open(url, storage_options=seaweed.storage_options()) as r:
        assert _rows(r) == expect


def test_s3_ulog_is_read_whole(seaweed: SeaweedS3, remote_dir: Path) -> None:
    with polybag.open(str(remote_dir / "flight.ulg")) as local:
        expect = _rows(local)
    with polybag.open("s3://logs/flight.ulg", storage_options=seaweed.storage_options()) as r:
        assert _rows(r) == expect
        assert r.source.stats is not None and r.source.stats["bytes_fetched"] == r.source.size


def test_s3_missing_object_is_a_clear_error(seaweed: SeaweedS3) -> None:
    with pytest.raises(polybag.PolybagError, match="s3://logs/nope.mcap: cannot open"):
        polybag.open("s3://logs/nope.mcap", storage_options=seaweed.storage_options())


def _polybag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_info_json_reports_bytes_fetched(web: str) -> None:
    p = _polybag("info", "--json", f"{web}/big.mcap")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["message_count"] == 2200
    assert d["fetched"]["requests"] >= 1
    assert 0 < d["fetched"]["bytes_fetched"] < 1 << 20
    assert d["fetched"]["size"] == d["file_size"]


def test_cli_info_stats_prints_to_stderr(web: str) -> None:
    p = _polybag("info", "--stats", f"{web}/mid.bag")
    assert p.returncode == 0, p.stderr
    assert "/big" in p.stdout
    assert "polybag info: fetched " in p.stderr and " requests" in p.stderr


def test_cli_cat_and_convert_take_urls(web: str, remote_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mid.mcap"
    p = _polybag("convert", f"{web}/mid.bag", str(out))
    assert p.returncode == 0, p.stderr
    with polybag.open(str(out)) as a, polybag.open(str(remote_dir / "mid.bag")) as b:
        assert [(m.log_time, bytes(m.data)) for m in a.messages()] == [
            (m.log_time, bytes(m.data)) for m in b.messages()
        ]
    p = _polybag("info", f"{web}/nope.bag")
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and "nope.bag" in p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["cat", "{u}", "--topics", "/small"],
        ["list", "channels", "{u}"],
        ["du", "{u}"],
        ["check", "{u}"],
        ["filter", "{u}", "{out}/f.bag", "--include-topic", "/small"],
        ["sort", "{u}", "{out}/s.bag"],
        ["export", "{u}", "--topics", "/small", "-o", "{out}/e"],
    ],
)
def test_cli_commands_take_urls(web: str, tmp_path: Path, args: list[str]) -> None:
    u = f"{web}/mid.bag"
    p = _polybag(*(a.format(u=u, out=tmp_path) for a in args))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr


def test_s3_full_mcap_read_fetches_each_chunk_once_in_few_requests(
    seaweed: SeaweedS3, remote_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log-time read of a remote MCAP fetches its chunks, not their Message Indexes (the
    chunks are walked: tests/remote/test_mcap_fetch_economy.py), the first one alone and the
    rest hinted ahead in large requests: the same messages as locally, each chunk once.  (The
    read-ahead is cut to 4 MiB so that this 15 MB file stands for one far larger than it.)"""
    import polybag.io.read_ahead

    monkeypatch.setattr(polybag.io.read_ahead, "HINT_AHEAD", 4 << 20)
    path = remote_dir / "mid.mcap"
    with polybag.open(str(path)) as local:
        want = _rows(local)
        chunks = len(local.summary.chunks)
        chunk_bytes = sum(ci.chunk_length for ci in local.chunk_indexes)  # type: ignore[attr-defined]
    assert chunks > 10
    with polybag.open("s3://logs/mid.mcap", storage_options=seaweed.storage_options()) as r:
        assert _rows(r) == want
        st = r.source.stats
    size = path.stat().st_size
    assert chunk_bytes <= st["bytes_fetched"] < size * 1.01  # (a few present blocks re-read to join requests)
    # the edges, the first chunk, then the hinted stream topped up every HINT_AHEAD / 2
    assert st["requests"] <= 3 + size // (2 << 20) + 2 < chunks
