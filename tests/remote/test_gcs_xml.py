"""``gs://`` URLs read without gcsfs (issue 17): GCS's XML API by range requests, against the
tests' Range HTTP server standing in as the storage emulator (``STORAGE_EMULATOR_HOST``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from remote_helpers import BIG_N, STEP, T0, RangeServer, _Handler, serve, write_chatter

import polybag
from polybag.errors import PolybagError, UsageError
from polybag.io.remote import expand_url
from polybag.io.remote_source import RemoteSource

MB = 1 << 20

try:
    import gcsfs  # noqa: F401

    pytest.skip(
        "gcsfs is installed: gs:// goes through it, not the XML API transport", allow_module_level=True
    )
except ImportError:
    pass


class _Recording(_Handler):
    """The Range handler, recording each request's path and Authorization header; with
    ``server.require`` set, a request without ``Authorization: Bearer <require>`` gets 401."""

    def _serve(self, head: bool) -> None:
        srv: Any = self.server
        with srv.lock:
            srv.seen.append((self.command, self.path, self.headers.get("Authorization")))
        need = getattr(srv, "require", None)
        if need is not None and self.headers.get("Authorization") != f"Bearer {need}":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super()._serve(head)


@pytest.fixture(scope="module")
def gcs_root(remote_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The emulator's files: bucket ``logs`` holding the generated logs (linked), one under
    a name that needs quoting."""
    root = tmp_path_factory.mktemp("gcs")
    bucket = root / "logs"
    (bucket / "runs 2026").mkdir(parents=True)
    for name in ("big.mcap", "big.bag", "mid.mcap", "mid.bag", "flight.ulg"):
        os.symlink(remote_dir / name, bucket / name)
    os.symlink(remote_dir / "mid.mcap", bucket / "runs 2026" / "a+b #1.mcap")
    return root


@pytest.fixture(scope="module")
def gcs(gcs_root: Path) -> Iterator[RangeServer]:
    for srv in serve(gcs_root):
        srv.RequestHandlerClass = _Recording
        srv.seen = []  # type: ignore[attr-defined]
        srv.require = None  # type: ignore[attr-defined]
        yield srv


@pytest.fixture
def emulator(gcs: RangeServer, monkeypatch: pytest.MonkeyPatch) -> RangeServer:
    """The server as ``STORAGE_EMULATOR_HOST`` (``host:port``, as the emulators document it)."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url.split("://", 1)[1])
    monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN", raising=False)
    gcs.reset()
    gcs.seen.clear()  # type: ignore[attr-defined]
    gcs.require = None  # type: ignore[attr-defined]
    return gcs


def _rows(r: polybag.Reader, **kw: Any) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages(**kw)]


@pytest.mark.parametrize("name", ["big.mcap", "big.bag"])
def test_info_over_gs_fetches_under_1mb(emulator: RangeServer, remote_dir: Path, name: str) -> None:
    size = (remote_dir / name).stat().st_size
    with polybag.open(f"gs://logs/{name}") as r:
        assert isinstance(r.source, RemoteSource)
        s = r.summary
        stats = r.source.stats
    with polybag.open(str(remote_dir / name)) as local:
        expect = local.summary
    assert s.message_count == expect.message_count == BIG_N + BIG_N // 10
    assert s.start_time == expect.start_time and s.end_time == expect.end_time
    assert stats is not None and stats["url"] == f"gs://logs/{name}" and stats["size"] == size
    assert stats["bytes_fetched"] < MB
    assert emulator.bytes_served == stats["bytes_fetched"]
    assert emulator.requests + 1 == stats["requests"]  # polybag counts the open's HEAD (issue 30); the emulator counts GETs only
    paths = {p for _m, p, _a in emulator.seen}  # type: ignore[attr-defined]
    assert paths == {f"/logs/{name}"}  # the XML API's /<bucket>/<object>
    assert all(a is None for _m, _p, a in emulator.seen)  # type: ignore[attr-defined]  # anonymous


@pytest.mark.parametrize("name", ["big.mcap", "big.bag"])
def test_a_1_percent_window_over_gs_fetches_under_10_percent(
    emulator: RangeServer, remote_dir: Path, name: str
) -> None:
    size = (remote_dir / name).stat().st_size
    lo = T0 + BIG_N // 2 * STEP
    hi = lo + BIG_N // 100 * STEP
    with polybag.open(f"gs://logs/{name}") as r:
        got = _rows(r, start=lo, end=hi)
    stats = r.source.stats  # after close: fetches still running then are counted too
    with polybag.open(str(remote_dir / name)) as local:
        expect = _rows(local, start=lo, end=hi)
    assert len(expect) == BIG_N // 100 + BIG_N // 1000
    assert got == expect
    assert stats is not None and stats["bytes_fetched"] < size // 10
    assert emulator.bytes_served < size // 10


@pytest.mark.parametrize("name", ["mid.mcap", "mid.bag", "flight.ulg"])
def test_full_read_over_gs_equals_the_local_read(emulator: RangeServer, remote_dir: Path, name: str) -> None:
    size = (remote_dir / name).stat().st_size
    with polybag.open(f"gs://logs/{name}") as r:
        got = _rows(r)
    stats = r.source.stats  # after close: fetches still running then are counted too
    with polybag.open(str(remote_dir / name)) as local:
        assert got == _rows(local)
    assert stats is not None
    assert size * 0.9 < stats["bytes_fetched"] <= size * 1.01  # about each byte once
    assert emulator.bytes_served == stats["bytes_fetched"]
    assert emulator.requests + 1 == stats["requests"]  # polybag counts the open's HEAD (issue 30); the emulator counts GETs only


def test_object_names_are_quoted(emulator: RangeServer, remote_dir: Path) -> None:
    with polybag.open("gs://logs/runs 2026/a+b #1.mcap") as r:
        assert r.summary.message_count == 165
    assert {p for _m, p, _a in emulator.seen} == {"/logs/runs%202026/a%2Bb%20%231.mcap"}  # type: ignore[attr-defined]


def test_missing_object_is_an_error_naming_the_url(emulator: RangeServer) -> None:
    with pytest.raises(PolybagError, match=r"gs://logs/nope\.mcap: cannot open: no such object"):
        polybag.open("gs://logs/nope.mcap")
    p = subprocess.run(
        [sys.executable, "-m", "polybag", "info", "gs://logs/nope.bag"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert p.returncode != 0
    assert "gs://logs/nope.bag: cannot open" in p.stderr and "Traceback" not in p.stderr


def test_token_is_sent_as_a_bearer_header(emulator: RangeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    emulator.require = "tok-123"  # type: ignore[attr-defined]
    with pytest.raises(PolybagError, match=r"gs://logs/mid\.mcap: cannot open: HTTP 401"):
        polybag.open("gs://logs/mid.mcap")
    emulator.seen.clear()  # type: ignore[attr-defined]
    with polybag.open("gs://logs/mid.mcap", storage_options={"token": "tok-123"}) as r:
        assert r.summary.message_count == 165
    assert emulator.seen and all(a == "Bearer tok-123" for _m, _p, a in emulator.seen)  # type: ignore[attr-defined]
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "tok-123")
    with polybag.open("gs://logs/mid.bag") as r:
        assert r.summary.message_count == 165
    with pytest.raises(PolybagError, match="HTTP 401"):  # token="anon": no header, whatever the environment
        polybag.open("gs://logs/mid.bag", storage_options={"token": "anon"})


def test_endpoint_url_storage_option(gcs: RangeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_OAUTH_ACCESS_TOKEN", raising=False)
    gcs.require = None  # type: ignore[attr-defined]
    with polybag.open("gs://logs/mid.mcap", storage_options={"endpoint_url": gcs.url + "/"}) as r:
        assert r.summary.message_count == 165


def test_what_needs_gcsfs_says_so(emulator: RangeServer) -> None:
    with pytest.raises(UsageError, match="listing gs:// URLs .* needs gcsfs"):
        expand_url("gs://logs/*.mcap")
    with pytest.raises(UsageError, match="need gcsfs"):
        polybag.open("gs://logs/mid.mcap", storage_options={"project": "p"})
    with pytest.raises(UsageError, match="service accounts and other credentials need gcsfs"):
        polybag.open("gs://logs/mid.mcap", storage_options={"token": {"client_email": "x"}})
    with pytest.raises(UsageError, match="writing gs:// URLs needs gcsfs"):
        polybag.Writer("gs://logs/out.mcap")
    with pytest.raises(UsageError, match="names a bucket and an object"):
        polybag.open("gs://logs")


def test_concurrent_readers_share_nothing(emulator: RangeServer, remote_dir: Path) -> None:
    """Two threads reading different gs:// objects at once: each gets its own bytes."""
    out: dict[str, list[tuple[str, int, bytes]]] = {}

    def read(name: str) -> None:
        with polybag.open(f"gs://logs/{name}") as r:
            out[name] = _rows(r, topics=["/small"])

    ts = [threading.Thread(target=read, args=(n,)) for n in ("mid.mcap", "mid.bag")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for name in ("mid.mcap", "mid.bag"):
        with polybag.open(str(remote_dir / name)) as local:
            assert out[name] == _rows(local, topics=["/small"])


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_rosbag2_directory_over_gs(emulator: RangeServer, gcs_root: Path, storage: str) -> None:
    bag = gcs_root / "logs" / f"r2_{storage}"
    payloads = write_chatter(polybag.Writer(str(bag), format="rosbag2", storage=storage))
    with polybag.open(f"gs://logs/r2_{storage}/") as r:
        assert r.format == "rosbag2"
        assert [bytes(m.data) for m in r.messages()] == payloads
    assert any(p == f"/logs/r2_{storage}/metadata.yaml" for _m, p, _a in emulator.seen)  # type: ignore[attr-defined]
