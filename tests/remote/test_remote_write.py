"""Outputs written to URLs (issue 17): a local file uploaded with fsspec to a real S3 server
(SeaweedFS: the ``seaweed`` fixture),
read back with polybag and the peer readers; refusals, --force, failed uploads, rosbag2
directories, and every command that writes an output."""

from __future__ import annotations

import glob
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from remote_helpers import write_big, write_chatter
from seaweed import SeaweedS3

import polybag
from polybag.errors import OutputExistsError, PolybagError, UsageError

s3fs = pytest.importorskip("s3fs")


@pytest.fixture(autouse=True)
def own_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporary directory of each test's own (not in ``tmp_path``, which tests check is
    left empty): the staging directories are counted there (tests in other workers stage
    theirs at the same time)."""
    d = tmp_path_factory.mktemp("staging")
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", str(d))


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small generated logs: 40 messages of 2 KB on /big and 4 on /small."""
    d = tmp_path_factory.mktemp("write-in")
    return {
        "mcap": write_big(d / "in.mcap", n=40, payload=2000),
        "bag": write_big(d / "in.bag", n=40, payload=2000),
        "other": write_big(d / "other.bag", n=10, payload=500),
    }


@pytest.fixture
def s3(seaweed: SeaweedS3) -> dict[str, Any]:
    """The storage options reaching the SeaweedFS server (bucket ``logs``)."""
    return seaweed.storage_options()


@pytest.fixture
def fs(s3: dict[str, Any]) -> Iterator[Any]:
    """An s3fs filesystem on the SeaweedFS server (``s3``: its storage options)."""
    s3fs.S3FileSystem.clear_instance_cache()
    f = s3fs.S3FileSystem(**s3)
    yield f
    f.invalidate_cache()


@pytest.fixture
def env(seaweed: SeaweedS3) -> dict[str, str]:
    """The environment of a polybag subprocess reaching the SeaweedFS server (the AWS
    credentials and fsspec's config variable: what a user sets for an S3-compatible store)."""
    return seaweed.env()


def _polybag(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def _rows(r: polybag.Reader) -> list[tuple[str, int, bytes]]:
    return [(m.channel.topic, m.log_time, bytes(m.data)) for m in r.messages()]


def _local_rows(path: Path) -> list[tuple[str, int, bytes]]:
    with polybag.open(str(path)) as r:
        return _rows(r)


def _uploads() -> set[str]:
    """polybag's staging directories in the temporary directory."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "polybag-upload-*")))


def _mcap_rows(data: bytes) -> list[tuple[str, int, bytes]]:
    from mcap.reader import make_reader

    reader = make_reader(io.BytesIO(data))
    return [(ch.topic, m.log_time, bytes(m.data)) for _s, ch, m in reader.iter_messages(log_time_order=True)]


def _rosbags_rows(path: Path) -> list[tuple[str, int, bytes]]:
    from rosbags.rosbag1 import Reader

    with Reader(path) as r:
        return sorted(((c.topic, t, bytes(d)) for c, t, d in r.messages()), key=lambda x: (x[1], x[0]))


def _sorted(rows: list[tuple[str, int, bytes]]) -> list[tuple[str, int, bytes]]:
    return sorted(rows, key=lambda x: (x[1], x[0]))


@pytest.mark.parametrize(("src", "ext"), [("bag", ".mcap"), ("mcap", ".bag"), ("mcap", ".mcap")])
def test_cli_convert_to_s3_then_read_back(
    small: dict[str, Path],
    fs: Any,
    s3: dict[str, Any],
    env: dict[str, str],
    tmp_path: Path,
    src: str,
    ext: str,
) -> None:
    url = f"s3://logs/out/conv-{src}{ext}"
    before = _uploads()
    p = _polybag(env, tmp_path, "convert", str(small[src]), url)
    assert p.returncode == 0, p.stderr
    assert url in p.stdout
    assert list(tmp_path.iterdir()) == []  # nothing local: no ./s3:/logs/... (the old bug)
    assert _uploads() == before  # the staging directory is gone
    expect = _sorted(_local_rows(small[src]))
    assert len(expect) == 44
    with polybag.open(url, storage_options=s3) as r:
        assert r.format == ext[1:]
        assert _sorted(_rows(r)) == expect
    data = fs.cat_file(url)
    if ext == ".mcap":
        assert _mcap_rows(data) == expect
    else:
        local = tmp_path / "copy.bag"
        local.write_bytes(data)
        assert _rosbags_rows(local) == expect


def test_cli_refuses_an_existing_object_without_force(
    small: dict[str, Path], fs: Any, env: dict[str, str], tmp_path: Path
) -> None:
    url = "s3://logs/out/force.mcap"
    assert _polybag(env, tmp_path, "convert", str(small["bag"]), url).returncode == 0
    first = fs.cat_file(url)
    p = _polybag(env, tmp_path, "filter", str(small["bag"]), url, "--include-topic", "/small")
    assert p.returncode == 2
    assert f"{url}: output exists; not overwritten (--force replaces it" in p.stderr
    assert "Traceback" not in p.stderr
    fs.invalidate_cache()
    assert fs.cat_file(url) == first  # untouched
    p = _polybag(env, tmp_path, "filter", str(small["bag"]), url, "--include-topic", "/small", "--force")
    assert p.returncode == 0, p.stderr
    fs.invalidate_cache()
    assert [t for t, _lt, _d in _mcap_rows(fs.cat_file(url))] == ["/small"] * 4
    assert list(tmp_path.iterdir()) == []


def test_cli_refuses_http_outputs_and_writes_nothing_locally(
    small: dict[str, Path], env: dict[str, str], tmp_path: Path
) -> None:
    for args in (
        ["convert", str(small["bag"]), "http://127.0.0.1:9/x.bag"],
        ["convert", str(small["bag"]), "https://example.invalid/out/x.mcap"],
        ["sort", str(small["bag"]), "http://127.0.0.1:9/s.bag"],
        ["export", str(small["bag"]), "-o", "http://127.0.0.1:9/tables"],
        ["split", str(small["bag"]), "--size", "20K", "-o", "http://127.0.0.1:9/parts"],
        ["convert", str(small["bag"]), str(small["other"]), "http://127.0.0.1:9/batch", "--jobs", "1"],
        ["decompress", str(small["bag"]), "-o", "http://127.0.0.1:9/plain"],
    ):
        p = _polybag(env, tmp_path, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert "cannot write to an http" in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_writing_gs_without_gcsfs_names_gcsfs(
    small: dict[str, Path], env: dict[str, str], tmp_path: Path
) -> None:
    pytest.importorskip("polybag.io.gcs")
    try:
        import gcsfs  # noqa: F401

        pytest.skip("gcsfs is installed: gs:// is written through it")
    except ImportError:
        pass
    with pytest.raises(UsageError, match="gcsfs"):
        polybag.Writer("gs://bucket/x.mcap")
    p = _polybag(env, tmp_path, "convert", str(small["bag"]), "gs://bucket/x.mcap")
    assert p.returncode == 2
    assert "writing gs:// URLs needs gcsfs" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_file_url_outputs_are_local_paths(
    small: dict[str, Path], env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "sub" / "x.mcap"
    p = _polybag(env, tmp_path, "convert", str(small["bag"]), f"file://{out}")
    assert p.returncode == 0, p.stderr
    assert _sorted(_local_rows(out)) == _sorted(_local_rows(small["bag"]))
    assert sorted(x.name for x in tmp_path.iterdir()) == ["sub"]  # no ./file:/...
    p = _polybag(env, tmp_path, "convert", str(small["bag"]), f"file://{out}")
    assert p.returncode == 2 and "output exists" in p.stderr
    with polybag.Writer(f"file://{tmp_path}/w.bag") as w:
        w.write(w.add_channel("/a", "ros1", w.add_schema("std_msgs/Empty", "ros1msg", b"")), b"", 1)
    assert (tmp_path / "w.bag").is_file()


def _write_one(w: polybag.Writer, n: int = 3) -> None:
    sch = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
    ch = w.add_channel("/chatter", "ros1", sch)
    for i in range(n):
        w.write(ch, len(b"hi").to_bytes(4, "little") + b"hi", 1000 + i)


def test_library_writer_to_s3(fs: Any, s3: dict[str, Any]) -> None:
    url = "s3://logs/lib/w.bag"
    w = polybag.Writer(url, storage_options=s3, overwrite=False)
    assert w.format == "bag"
    _write_one(w)
    assert not fs.exists(url)  # nothing at the URL until it is complete
    w.close()
    with polybag.open(url, storage_options=s3) as r:
        assert [bytes(m.data)[4:] for m in r.messages()] == [b"hi"] * 3
    with pytest.raises(OutputExistsError, match="s3://logs/lib/w.bag: output exists"):
        polybag.Writer(url, storage_options=s3, overwrite=False)
    w = polybag.Writer(url, storage_options=s3)  # overwrite=True by default, as for paths
    _write_one(w, 5)
    w.close()
    with polybag.open(url, storage_options=s3) as r:
        assert r.summary.message_count == 5


def test_url_writer_is_the_format_writer_wired_to_an_upload(fs: Any, s3: dict[str, Any]) -> None:
    """``Writer(url)`` is the format's own writer (its own members, no proxy) on the staging
    path of an :class:`~polybag.io.upload.Upload`."""
    from polybag.formats.ulog.writer import UlogWriter
    from polybag.io.upload import Upload

    url = "s3://logs/lib/wired.ulg"
    w = polybag.Writer(url, storage_options=s3)
    assert type(w) is UlogWriter
    assert isinstance(w.upload, Upload) and w.upload.url == url
    w.start_timestamp = 5  # a ULog writer's own setting, on the writer itself
    assert w.start_timestamp == 5
    w.abort()
    fs.invalidate_cache()
    assert not fs.exists(url)


def test_aborted_writer_leaves_nothing(fs: Any, s3: dict[str, Any]) -> None:
    url = "s3://logs/lib/aborted.mcap"
    before = _uploads()
    w = polybag.Writer(url, storage_options=s3)
    _write_one(w)
    assert _uploads() - before  # the local staging file
    w.abort(discard=True)
    assert _uploads() == before
    fs.invalidate_cache()
    assert not fs.exists(url)


class _Boom(Exception):
    pass


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_failed_upload_leaves_no_object(
    fs: Any, s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A put that fails (``before``: nothing sent; ``after``: the object was stored, then the
    connection broke) leaves nothing at the URL and no staging file."""
    url = f"s3://logs/lib/failed-{when}.mcap"
    real = s3fs.S3FileSystem._put_file

    async def failing(self: Any, lpath: str, rpath: str, *args: Any, **kwargs: Any) -> None:
        if when == "after":
            await real(self, lpath, rpath, *args, **kwargs)
            assert await self._exists(rpath)
        raise _Boom("connection reset by peer")

    monkeypatch.setattr(s3fs.S3FileSystem, "_put_file", failing)
    s3fs.S3FileSystem.clear_instance_cache()  # instances bind put_file when made
    before = _uploads()
    w = polybag.Writer(url, storage_options=s3)
    _write_one(w)
    with pytest.raises(PolybagError, match=f"{url}: upload failed: _Boom: connection reset by peer"):
        w.close()
    w.abort(discard=True)  # what the operations do after a failed close: harmless
    assert _uploads() == before
    monkeypatch.setattr(s3fs.S3FileSystem, "_put_file", real)
    s3fs.S3FileSystem.clear_instance_cache()
    fs.invalidate_cache()
    assert not fs.exists(url)


def test_an_interrupted_operation_uploads_nothing(
    small: dict[str, Path], fs: Any, monkeypatch: pytest.MonkeyPatch, s3: dict[str, Any]
) -> None:
    """Ctrl-C in the middle of a convert: the writer is aborted, nothing is uploaded."""
    from polybag import ops

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("polybag.ops.copying.copy_messages", interrupted)
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3["client_kwargs"]["endpoint_url"])
    import fsspec.config

    monkeypatch.setitem(
        fsspec.config.conf,
        "s3",
        {"endpoint_url": s3["client_kwargs"]["endpoint_url"], "key": s3["key"], "secret": s3["secret"]},
    )
    s3fs.S3FileSystem.clear_instance_cache()
    before = _uploads()
    url = "s3://logs/lib/interrupted.mcap"
    with pytest.raises(KeyboardInterrupt):
        ops.convert(str(small["bag"]), url)
    assert _uploads() == before
    fs.invalidate_cache()
    assert not fs.exists(url)


def test_rosbag2_directory_to_s3(
    fs: Any, s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A rosbag2 bag written to ``s3://.../run``: its files uploaded, metadata.yaml last;
    polybag reads it from S3, rosbags reads the downloaded copy."""
    order: list[str] = []
    real = s3fs.S3FileSystem._put_file

    async def recording(self: Any, lpath: str, rpath: str, *args: Any, **kwargs: Any) -> Any:
        order.append(rpath.rsplit("/", 1)[1])
        return await real(self, lpath, rpath, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_put_file", recording)
    s3fs.S3FileSystem.clear_instance_cache()  # instances bind put_file when made
    url = "s3://logs/r2/run"
    for storage in ("sqlite3", "mcap"):
        order.clear()
        target = f"{url}_{storage}"
        w = polybag.Writer(target, storage_options=s3, storage=storage)
        assert w.format == "rosbag2"
        payloads = write_chatter(w)
        assert order[-1] == "metadata.yaml" and len(order) >= 2
        with polybag.open(target + "/", storage_options=s3) as r:
            assert r.format == "rosbag2"
            assert [bytes(m.data) for m in r.messages()] == payloads
        local = tmp_path / f"copy_{storage}"
        fs.invalidate_cache()
        fs.get(target + "/", str(local), recursive=True)
        from rosbags.rosbag2 import Reader

        with Reader(local) as rr:
            assert [bytes(d) for _c, _t, d in rr.messages()] == payloads


def test_cli_every_output_takes_s3(
    small: dict[str, Path], fs: Any, env: dict[str, str], tmp_path: Path
) -> None:
    bag = str(small["bag"])
    cases: list[tuple[list[str], list[str]]] = [
        (["sort", bag, "s3://logs/cli/sorted.bag"], ["cli/sorted.bag"]),
        (["merge", "s3://logs/cli/merged.mcap", bag, str(small["mcap"])], ["cli/merged.mcap"]),
        (["recover", bag, "s3://logs/cli/recovered.bag"], ["cli/recovered.bag"]),
        (
            ["split", bag, "--size", "40K", "-o", "s3://logs/cli/parts"],
            ["cli/parts/in_000.bag", "cli/parts/in_001.bag"],
        ),
        (["export", bag, "--topics", "/small", "-o", "s3://logs/cli/tables"], ["cli/tables/small.csv"]),
        (["decompress", bag, "-o", "s3://logs/cli/plain"], ["cli/plain/in.bag"]),
        (["reindex", bag, "-o", "s3://logs/cli/reindexed"], ["cli/reindexed/in.bag"]),
        (
            ["export", bag, str(small["other"]), "--topics", "/small", "-o", "s3://logs/cli/many", "--jobs", "2"],
            ["cli/many/in/small.csv", "cli/many/other/small.csv"],
        ),
        (["compress", str(small["mcap"]), "-o", "s3://logs/cli/zstd"], ["cli/zstd/in.mcap"]),
        (
            ["convert", bag, str(small["other"]), "s3://logs/cli/batch/", "--jobs", "2"],
            ["cli/batch/in.mcap", "cli/batch/other.mcap"],
        ),
        (["convert", bag, "s3://logs/cli/r2run", "--format", "rosbag2"], ["cli/r2run/metadata.yaml"]),
    ]
    for args, keys in cases:
        p = _polybag(env, tmp_path, *args)
        assert p.returncode in (0, 1), (args, p.stderr)
        assert "Traceback" not in p.stderr
        fs.invalidate_cache()
        for k in keys:
            assert fs.exists(f"logs/{k}"), (args, k, fs.find("logs/cli"))
    demo = Path(__file__).resolve().parents[2] / "samples" / "demo.mcap"
    if demo.is_file():
        p = _polybag(
            env, tmp_path, "get", "attachment", str(demo), "calibration.yaml", "-o", "s3://logs/cli/cal.yaml"
        )
        assert p.returncode == 0, p.stderr
        with polybag.open(str(demo)) as r:
            assert fs.cat_file("logs/cli/cal.yaml") == bytes(next(iter(r.attachments())).data)
    assert list(tmp_path.iterdir()) == []
    with polybag.open("s3://logs/cli/sorted.bag", storage_options=fs.storage_options) as r:
        assert r.summary.message_count == 44
    parts = sorted(fs.find("logs/cli/parts"))
    total = 0
    for part in parts:
        with polybag.open(f"s3://{part}", storage_options=fs.storage_options) as r:
            total += r.summary.message_count
    assert total == 44
    assert fs.cat_file("logs/cli/tables/small.csv").count(b"\n") == 5  # header + 4 rows
    with polybag.open("s3://logs/cli/r2run/", storage_options=fs.storage_options) as r:
        assert r.summary.message_count == 44
    # a second split/export without --force is refused before anything is written
    for args in (
        ["split", bag, "--size", "40K", "-o", "s3://logs/cli/parts"],
        ["export", bag, "--topics", "/small", "-o", "s3://logs/cli/tables"],
    ):
        p = _polybag(env, tmp_path, *args)
        assert p.returncode == 2 and "exist" in p.stderr, (args, p.stderr)


def test_convert_onto_its_own_input_url_is_refused(
    fs: Any, env: dict[str, str], tmp_path: Path, small: dict[str, Path]
) -> None:
    url = "s3://logs/self/x.mcap"
    assert _polybag(env, tmp_path, "convert", str(small["bag"]), url).returncode == 0
    p = _polybag(env, tmp_path, "convert", url, url, "--force")
    assert p.returncode == 2 and "output is the input" in p.stderr


def test_upload_progress_only_when_asked_or_on_a_terminal(
    fs: Any, s3: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    w = polybag.Writer("s3://logs/lib/quiet.mcap", storage_options=s3)  # stderr is not a terminal here
    _write_one(w)
    w.close()
    assert capsys.readouterr().err == ""
    w = polybag.Writer("s3://logs/lib/bar.mcap", storage_options=s3, progress=True)
    _write_one(w)
    w.close()
    err = capsys.readouterr().err
    assert "upload s3://logs/lib/bar.mcap" in err and "100.0%" in err


@pytest.mark.parametrize("field", ["output_name", "output_prefix", "directory"])
def test_record_refuses_url_outputs(field: str) -> None:
    """A recording stays local (NAME.active, splits, free-space checks): a URL is a usage error."""
    from polybag.record.options import RecordOptions

    with pytest.raises(UsageError, match="record writes local files"):
        RecordOptions(**{field: "s3://logs/rec/run"}).validate()
    RecordOptions(**{field: "run"}).validate()


def test_ulog_outputs_to_s3_match_local_ones(
    remote_dir: Path, fs: Any, s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ULog outputs (convert, split: the ULog writer's own settings such as its start
    timestamp reach it through the URL writer) equal the same outputs written locally."""
    import fsspec.config

    from polybag import ops

    monkeypatch.setitem(fsspec.config.conf, "s3", dict(s3))
    s3fs.S3FileSystem.clear_instance_cache()
    src = str(remote_dir / "flight.ulg")
    ops.convert(src, str(tmp_path / "flight.ulg"))
    ops.convert(src, "s3://logs/ulog/flight.ulg")
    local = ops.split(src, size=1000, output_dir=str(tmp_path / "parts"))
    remote = ops.split(src, size=1000, output_dir="s3://logs/ulog/parts")
    assert len(local.parts) == len(remote.parts) >= 2
    pairs = [(str(tmp_path / "flight.ulg"), "s3://logs/ulog/flight.ulg")]
    pairs += [(a.path, b.path) for a, b in zip(local.parts, remote.parts)]
    for a, b in pairs:
        assert b.startswith("s3://logs/ulog/")
        fs.invalidate_cache()
        assert fs.cat_file(b) == Path(a).read_bytes()
        with polybag.open(b, storage_options=s3) as r:
            assert r.format == "ulog" and _rows(r) == _local_rows(Path(a))


def _r2(url: str, s3: dict[str, Any], n: int, **kw: Any) -> None:
    w = polybag.Writer(url, storage_options=s3, **kw)
    ch = w.add_channel("/c", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n"))
    for i in range(n):
        w.write(ch, b"\x00\x01\x00\x00" + (3).to_bytes(4, "little") + b"h%d\x00" % i, 10_000 + i)
    w.close()


def test_replacing_a_bag_directory_removes_only_its_old_files(fs: Any, s3: dict[str, Any]) -> None:
    url = "s3://logs/replace/run"
    _r2(url, s3, 3, storage="mcap")
    fs.pipe("logs/replace/run/notes.txt", b"keep me")  # not the bag's: never removed
    with pytest.raises(OutputExistsError, match="output exists"):
        _r2(url, s3, 5, overwrite=False)
    _r2(url, s3, 5, storage="sqlite3")  # overwrite=True
    fs.invalidate_cache()
    names = sorted(p.rsplit("/", 1)[1] for p in fs.find("logs/replace/run"))
    assert names == ["metadata.yaml", "notes.txt", "run_0.db3"]  # the old run_0.mcap is gone
    with polybag.open(url + "/", storage_options=s3) as r:
        assert r.summary.message_count == 5
    fs.pipe("logs/replace/other/data.bin", b"x")
    with pytest.raises(OutputExistsError, match="not a rosbag2 bag.*not replaced, even with --force"):
        _r2("s3://logs/replace/other", s3, 1)
    fs.invalidate_cache()
    assert fs.cat_file("logs/replace/other/data.bin") == b"x"
    with pytest.raises(UsageError, match="not the bucket itself"):
        _r2("s3://logs", s3, 1)


def test_ctrl_c_during_the_upload_leaves_no_object(
    fs: Any, s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt while the object is being put: the put under way is waited for, then
    removed (it runs on fsspec's event loop, which the interrupt does not stop)."""
    import _thread
    import asyncio

    url = "s3://logs/lib/ctrl-c.mcap"
    real = s3fs.S3FileSystem._put_file
    started = threading.Event()
    fired = threading.Event()

    async def slow(self: Any, lpath: str, rpath: str, *args: Any, **kwargs: Any) -> Any:
        started.set()
        for _ in range(400):  # until the interrupt is sent, however loaded the machine
            if fired.is_set():
                break
            await asyncio.sleep(0.025)
        await asyncio.sleep(0.3)
        return await real(self, lpath, rpath, *args, **kwargs)  # completes after the interrupt

    monkeypatch.setattr(s3fs.S3FileSystem, "_put_file", slow)
    s3fs.S3FileSystem.clear_instance_cache()
    before = _uploads()
    w = polybag.Writer(url, storage_options=s3)
    _write_one(w)

    # Ctrl-C is Python's KeyboardInterrupt even where this process was started with SIGINT
    # ignored (a background job of a shell): interrupt_main() does nothing then
    old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupt() -> None:
        started.wait(10)
        _thread.interrupt_main()
        fired.set()

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            w.close()
    finally:
        signal.signal(signal.SIGINT, old_handler)
    assert _uploads() == before
    time.sleep(1.0)  # a put left running in the background would have completed by now
    monkeypatch.setattr(s3fs.S3FileSystem, "_put_file", real)
    s3fs.S3FileSystem.clear_instance_cache()
    fs.invalidate_cache()
    assert not fs.exists(url)


def test_compress_a_bag_directory_into_s3(fs: Any, s3: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    bag = tmp_path / "in" / "run"
    bag.parent.mkdir()
    w = polybag.Writer(str(bag), format="rosbag2")
    ch = w.add_channel("/c", "cdr", w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n"))
    payloads = [b"\x00\x01\x00\x00" + (3).to_bytes(4, "little") + b"h%d\x00" % i for i in range(7)]
    for i, p in enumerate(payloads):
        w.write(ch, p, 10_000 + i)
    w.close()
    p = _polybag(env, tmp_path, "compress", str(bag), "-o", "s3://logs/r2z")
    assert p.returncode == 0, p.stderr
    fs.invalidate_cache()
    names = sorted(x.rsplit("/", 1)[1] for x in fs.find("logs/r2z/run"))
    assert "metadata.yaml" in names and any(n.endswith(".zstd") for n in names), names
    with polybag.open("s3://logs/r2z/run/", storage_options=s3) as r:
        assert [bytes(m.data) for m in r.messages()] == payloads
    assert sorted(x.name for x in tmp_path.iterdir()) == ["in"]
