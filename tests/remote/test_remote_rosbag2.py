"""Remote rosbag2 directories (polybag.formats.rosbag2.remote): over HTTP (nginx, counted by the
proxy in front where bytes matter) and S3 (SeaweedFS)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from counting_proxy import CountingProxy
from nginx import Nginx
from seaweed import SeaweedS3, upload

import polybag


def _layouts(tmp: Path) -> list[Path]:
    """The local layouts of remote bags left in the temporary folder ``tmp``."""
    return list(tmp.glob("polybag-rosbag2-*"))

N = 3000


def _write(out: Path, storage: str) -> Path:
    with polybag.Writer(str(out), format="rosbag2", storage=storage) as w:
        s = w.add_schema("std_msgs/msg/Float64", "ros2msg", b"float64 data\n")
        a = w.add_channel("/a", "cdr", s)
        b = w.add_channel("/b", "cdr", s)
        for i in range(N):
            w.write(a, b"\x00\x01\x00\x00" + struct.pack("<d", i * 0.5), log_time=10**18 + i * 1000)
            if i % 3 == 0:
                w.write(b, b"\x00\x01\x00\x00" + struct.pack("<d", -i), log_time=10**18 + i * 1000 + 1)
    return out


#: the bags' folder in the folder nginx serves, and their key prefix in SeaweedFS's bucket
HERE = "rosbag2_read"


@pytest.fixture(scope="module")
def bags(nginx_root: Path) -> Path:
    d = nginx_root / HERE
    if not (d / "run_sqlite" / "metadata.yaml").exists():
        d.mkdir(exist_ok=True)
        _write(d / "run_mcap", "mcap")
        _write(d / "run_sqlite", "sqlite3")
    return d


@pytest.fixture
def server(nginx: Nginx, bags: Path) -> str:
    """The URL of ``bags`` on nginx."""
    return f"{nginx.url}/{HERE}"


@pytest.fixture
def proxy(nginx_proxy: CountingProxy, bags: Path) -> CountingProxy:
    """The counting proxy in front of nginx, its counts reset: ``bags`` at ``/{HERE}``."""
    nginx_proxy.reset()
    return nginx_proxy


def _rows(r: polybag.Reader) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]


@pytest.mark.parametrize("name", ["run_mcap", "run_sqlite"])
@pytest.mark.parametrize("tail", ["/", "/metadata.yaml"])
def test_remote_rosbag2_equals_local(
    server: str, bags: Path, name: str, tail: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with polybag.open(str(bags / name)) as local:
        expect = _rows(local)
        summary = local.summary
    with polybag.open(f"{server}/{name}{tail}") as r:
        assert r.format == "rosbag2"
        assert r.summary.message_count == summary.message_count == N + N // 3
        assert _rows(r) == expect
        assert r.path == f"{server}/{name}{tail}"
        tmp = r.local_layout  # type: ignore[attr-defined]
        assert os.path.isdir(tmp)
    assert not os.path.exists(tmp)  # the local layout goes with the reader
    assert not _layouts(tmp_path)


def test_mcap_storage_is_read_by_ranges(proxy: CountingProxy, bags: Path) -> None:
    (mcap,) = [p for p in (bags / "run_mcap").iterdir() if p.suffix == ".mcap"]
    with polybag.open(f"{proxy.url}/{HERE}/run_mcap/") as r:
        assert r.summary.message_count == N + N // 3
    counts = proxy.per_path()
    assert set(counts) == {f"/{HERE}/run_mcap/metadata.yaml", f"/{HERE}/run_mcap/{mcap.name}"}, counts
    # metadata.yaml, the 16-byte head, then the MCAP's head and summary: not the whole file
    meta = (bags / "run_mcap" / "metadata.yaml").stat().st_size
    assert proxy.bytes < 2 * 16384 + 65536 + meta + 200
    assert counts[f"/{HERE}/run_mcap/{mcap.name}"][1] < mcap.stat().st_size


def test_sqlite_storage_is_fetched_whole(proxy: CountingProxy, bags: Path) -> None:
    (db,) = [p for p in (bags / "run_sqlite").iterdir() if p.suffix == ".db3"]
    with polybag.open(f"{proxy.url}/{HERE}/run_sqlite/") as r:
        assert r.summary.message_count == N + N // 3
    assert proxy.per_path()[f"/{HERE}/run_sqlite/{db.name}"][1] >= db.stat().st_size


def test_missing_metadata_is_a_clear_error(server: str) -> None:
    with pytest.raises(polybag.PolybagError, match=r"nothere/metadata.yaml: cannot open: no such object"):
        polybag.open(f"{server}/nothere/")


def test_a_missing_storage_file_is_a_clear_error(
    server: str, bags: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    broken = bags / "broken"
    if not broken.exists():
        shutil.copytree(bags / "run_mcap", broken)
        for p in broken.iterdir():
            if p.suffix == ".mcap":
                p.unlink()
    with pytest.raises(polybag.PolybagError, match="cannot open: no such object"):
        polybag.open(f"{server}/broken/")
    assert not _layouts(tmp_path)  # nothing left of the layout


def test_a_storage_path_leaving_the_directory_is_refused(server: str, bags: Path) -> None:
    evil = bags / "evil"
    evil.mkdir(exist_ok=True)
    text = (bags / "run_mcap" / "metadata.yaml").read_text()
    (mcap,) = [p.name for p in (bags / "run_mcap").iterdir() if p.suffix == ".mcap"]
    (evil / "metadata.yaml").write_text(text.replace(mcap, "../run_mcap/" + mcap))
    with pytest.raises(polybag.FormatError, match="outside the bag directory|leaves the bag directory"):
        polybag.open(f"{server}/evil/")


def test_s3_rosbag2_directory(seaweed: SeaweedS3, bags: Path) -> None:
    for name in ("run_mcap", "run_sqlite"):
        upload(seaweed, "logs", {f"{HERE}/{name}/{p.name}": p for p in (bags / name).iterdir()})
    for name in ("run_mcap", "run_sqlite"):
        with polybag.open(str(bags / name)) as local:
            expect = _rows(local)
        assert len(expect) == N + N // 3
        with polybag.open(f"s3://logs/{HERE}/{name}/", storage_options=seaweed.storage_options()) as r:
            assert r.format == "rosbag2"
            assert _rows(r) == expect
