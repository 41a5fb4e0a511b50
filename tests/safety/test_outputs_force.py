"""Issue 26, "--force and outputs: never remove or replace what polybag did not write".

* ``--force`` replaces a file that is a log by its magic bytes (or, for tables, images and
  videos, a file of that kind), or a rosbag2 directory that is exactly a bag (a readable
  metadata.yaml and only the storage files it lists); never a folder of other things, a text
  file, a symbolic link, and never a path that is, contains or lies inside an input (real
  paths, every file of an input directory).
* Every file polybag writes is created exclusively (never through a symbolic link planted at
  its name: ``NAME.active``, ``metadata.yaml``'s temporary file, export tables) and renamed.
* ``export`` gives every topic its own table (``/a/b``, ``/a.b``, ``/a b``, ``/a_b``), and
  images of topics with colliding names their own frames.
* Replacing with ``--force`` keeps the old output until the new one is complete: a killed
  command leaves the old output and a recoverable ``NAME.active``.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import OutputExistsError

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the snapshot the fuzz targets use lives in the top-level fuzz/ package
    sys.path.insert(0, str(ROOT))

from fuzz.sandbox import snapshot  # noqa: E402

DEMO = ROOT / "samples" / "demo.mcap"
NOTES = b"my notes, not a log\n"


# --- helpers ---------------------------------------------------------------------------------
def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "unexpected" not in err, err
    return code, out, err


def cdr_string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return b"\x00\x01\x00\x00" + struct.pack("<I", len(raw)) + raw


def ros1_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<I", len(raw)) + raw


def write_bag(path: Path, n: int, topic: str = "/chatter") -> Path:
    """A rosbag2 directory with ``n`` std_msgs/String messages (sqlite3 storage)."""
    with polybag.Writer(str(path), format="rosbag2") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        ch = w.add_channel(topic, "cdr", s)
        for i in range(n):
            w.write(ch, cdr_string(f"m{i}"), 1_000_000_000 + i * 1000)
    return path


def write_mcap(path: Path, topics: dict[str, int], pad: int = 0) -> Path:
    """An MCAP file (ROS 1 std_msgs/String) with ``topics[t]`` messages on each topic, each
    message's text naming its topic (then ``pad`` characters of random hex, so that chunks do
    not compress to nothing)."""
    with polybag.Writer(str(path)) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        t = 1_000_000_000
        for topic, n in topics.items():
            ch = w.add_channel(topic, "ros1", s)
            for i in range(n):
                w.write(ch, ros1_string(f"{topic}#{i}" + random.randbytes(pad // 2).hex()), t)
                t += 1000
    return path


def count(path: Path) -> int:
    with polybag.open(path) as r:
        return int(r.summary.message_count)


# --- --force replaces only what polybag could have written -----------------------------------------
def test_convert_force_never_wipes_a_folder_that_is_not_a_bag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_mcap(tmp_path / "input.mcap", {"/a": 5})
    runs = tmp_path / "runs"
    (runs / "session.active" / "raw").mkdir(parents=True)
    (runs / "session.active" / "raw" / "notes.txt").write_bytes(NOTES)
    shutil.copy(src, runs / "monday.mcap")
    shutil.copy(src, runs / "tuesday.mcap")
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "convert", src, runs, "--format", "rosbag2", "--force")
    assert code == 2 and "not a rosbag2 bag" in err and "not replaced" in err
    assert snapshot(tmp_path) == before
    # the folder holding the input: refused for that reason first, input untouched
    code, _, err = run(capsys, "convert", runs / "monday.mcap", runs, "--format", "rosbag2", "--force")
    assert code == 2 and "contains the input" in err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("what", ["extra-file", "subdir", "symlink-entry", "no-metadata", "bad-metadata", "link-to-bag"])
def test_force_replaces_a_directory_only_when_it_is_exactly_a_bag(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(NOTES)
    out = tmp_path / "out"
    write_bag(out, 7)
    if what == "extra-file":
        (out / "notes.txt").write_bytes(NOTES)
    elif what == "subdir":
        (out / "raw").mkdir()
    elif what == "symlink-entry":
        (out / "out_1.db3").symlink_to(outside / "victim.txt")
    elif what == "no-metadata":
        (out / "metadata.yaml").unlink()
    elif what == "bad-metadata":
        (out / "metadata.yaml").write_bytes(b"rosbag2_bagfile_information: [unclosed\n")
    elif what == "link-to-bag":
        real = tmp_path / "realbag"
        out.rename(real)
        out.symlink_to(real)
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "convert", src, out, "--format", "rosbag2", "--force")
    assert code == 2 and "not replaced" in err, err
    assert snapshot(tmp_path) == before


def test_force_replaces_exactly_a_bag_and_nothing_is_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    out = write_bag(tmp_path / "out", 7)
    code, _, err = run(capsys, "convert", src, out, "--format", "rosbag2", "--force")
    assert code == 0, err
    assert count(out) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mcap", "out"]  # no old bag aside, no .active
    assert sorted(p.name for p in out.iterdir()) == ["metadata.yaml", "out_0.db3"]


@pytest.mark.parametrize("what", ["text", "directory", "symlink", "fifo", "empty"])
def test_force_replaces_a_file_only_when_it_is_a_log(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    victim = tmp_path / "victim.mcap"
    shutil.copy(src, victim)
    out = tmp_path / "out.mcap"
    if what == "text":
        out.write_bytes(NOTES)
    elif what == "directory":
        out.mkdir()
        (out / "x").write_bytes(NOTES)
    elif what == "symlink":
        out.symlink_to(victim)  # a log behind it, but a link is never what polybag wrote
    elif what == "fifo":
        os.mkfifo(out)
    else:
        out.write_bytes(b"")
    before = snapshot(tmp_path)
    for cmd in (["convert", src, out], ["filter", src, out], ["sort", src, out], ["merge", out, src]):
        code, _, err = run(capsys, *cmd, "--force")
        assert code == 2 and "not replaced" in err, (cmd, err)
        assert snapshot(tmp_path) == before
    # a log there is replaced
    if what == "text":
        shutil.copy(DEMO, out)
        code, _, err = run(capsys, "convert", src, out, "--force")
        assert code == 0, err
        assert count(out) == 3


def test_library_overwrite_follows_the_same_rule(tmp_path: Path) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    out = tmp_path / "out.bag"
    out.write_bytes(NOTES)
    with pytest.raises(OutputExistsError, match="not a log"):
        ops.convert(src, out, overwrite=True)
    assert out.read_bytes() == NOTES
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep").write_bytes(NOTES)
    with pytest.raises(OutputExistsError, match="not a rosbag2 bag"):
        polybag.Writer(str(d), format="rosbag2", overwrite=True)
    assert (d / "keep").read_bytes() == NOTES and not (tmp_path / "d.active").exists()


# --- never an input, inside one, or holding one ---------------------------------------------
def test_filter_into_the_input_bag_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = write_bag(tmp_path / "in", 300)
    before = snapshot(tmp_path)
    for args in (
        ["filter", bag, bag / "in_0.db3", "--format", "mcap", "--force"],
        ["filter", bag, bag / "in_0.db3", "--format", "bag", "--force"],
        ["filter", bag / "metadata.yaml", bag / "in_0.db3", "--format", "mcap", "--force"],
        ["filter", bag, bag / "new.mcap"],
        ["convert", bag, bag, "--force"],
        ["convert", bag, bag / "sub", "--format", "rosbag2"],
        ["convert", bag / "in_0.db3", tmp_path, "--format", "rosbag2", "--force"],
        ["merge", bag / "merged.mcap", bag],
        ["split", bag, "--duration", "1s", "-o", bag],
        ["export", bag, "-o", bag],
        ["export", bag, "-o", bag / "tables"],
    ):
        code, _, err = run(capsys, *args)
        assert code == 2, (args, err)
        assert "input" in err, (args, err)
        assert snapshot(tmp_path) == before, args
    assert count(bag) == 300


def test_an_output_linked_into_the_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = write_bag(tmp_path / "in", 30)
    (tmp_path / "alias.mcap").symlink_to(bag / "in_0.db3")
    os.link(bag / "in_0.db3", tmp_path / "hard.mcap")
    (tmp_path / "bagalias").symlink_to(bag)
    before = snapshot(tmp_path)
    for args in (
        ["filter", bag, tmp_path / "alias.mcap", "--force"],
        ["filter", bag, tmp_path / "hard.mcap", "--force"],
        ["filter", bag, tmp_path / "bagalias" / "x.mcap"],
        ["convert", tmp_path / "bagalias", bag, "--force"],
    ):
        code, _, err = run(capsys, *args)
        assert code == 2 and "input" in err, (args, err)
        assert snapshot(tmp_path) == before, args
    assert count(bag) == 30


def test_split_parts_are_checked_one_by_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 40})
    parts = tmp_path / "parts"
    parts.mkdir()
    outside = tmp_path / "victim.mcap"
    shutil.copy(DEMO, outside)
    (parts / "in_001.mcap").symlink_to(outside)
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "split", src, "--duration", "0.00001s", "-o", parts, "--force")
    assert code == 2 and "symbolic link" in err and "not replaced" in err
    assert snapshot(tmp_path) == before  # the parts written before it were removed again
    (parts / "in_001.mcap").unlink()
    (parts / "in_003.mcap").write_bytes(NOTES)
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "split", src, "--duration", "0.00001s", "-o", parts, "--force")
    assert code == 2 and "in_003.mcap" in err and "not a log" in err
    assert snapshot(tmp_path) == before
    shutil.copy(DEMO, parts / "in_003.mcap")
    code, _, err = run(capsys, "split", src, "--duration", "0.00001s", "-o", parts, "--force")
    assert code == 0, err
    assert sum(count(p) for p in parts.iterdir()) == 40


def test_compress_never_replaces_what_is_not_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.mcap"
    shutil.copy(DEMO, src)
    od = tmp_path / "od"
    od.mkdir()
    (od / "in.mcap").write_bytes(NOTES)
    (tmp_path / "in.orig.mcap").write_bytes(NOTES)  # a "backup" that is not one
    before = snapshot(tmp_path)
    for args in (["compress", src, "--output-dir", od, "-f", "-q"], ["compress", src, "-f", "-q"]):
        code, _, err = run(capsys, *args)
        assert code == 2 and "not a log" in err, (args, err)
        assert snapshot(tmp_path) == before
    bag = write_bag(tmp_path / "bag", 20)
    (tmp_path / "bag.orig").mkdir()
    (tmp_path / "bag.orig" / "notes.txt").write_bytes(NOTES)
    before = snapshot(tmp_path)
    for args in (["compress", bag, "-f", "-q"], ["compress", bag, "--output-dir", bag, "-f", "-q"]):
        code, _, err = run(capsys, *args)
        assert code == 2, (args, err)
        assert snapshot(tmp_path) == before
    assert count(bag) == 20


# --- no symbolic link planted in an input or output folder is followed ------------------------------
def test_reindex_never_writes_through_a_planted_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = write_bag(tmp_path / "bag", 12)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(NOTES)
    (bag / "metadata.yaml").unlink()
    (bag / "metadata.yaml.tmp").symlink_to(victim)
    code, _, err = run(capsys, "reindex", bag, "-q")
    assert code == 0, err
    assert victim.read_bytes() == NOTES
    assert count(bag) == 12
    assert (bag / "metadata.yaml").is_file() and not (bag / "metadata.yaml").is_symlink()
    # metadata.yaml itself a link to a file outside: never replaced (nor written through)
    (bag / "metadata.yaml").unlink()
    (bag / "metadata.yaml").symlink_to(victim)
    code, _, err = run(capsys, "reindex", bag, "-q", "--force")
    assert code == 2 and "symbolic link" in err
    assert victim.read_bytes() == NOTES
    assert sorted(p.name for p in bag.iterdir() if not p.name.startswith(".")) == ["bag_0.db3", "metadata.yaml", "metadata.yaml.tmp"]
    assert not [p for p in bag.iterdir() if p.name.endswith(".tmp") and p.name != "metadata.yaml.tmp"]


def test_active_names_are_never_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3, "/b": 2})
    victim = tmp_path / "victim.mcap"
    shutil.copy(DEMO, victim)
    victim_dir = tmp_path / "vdir"
    victim_dir.mkdir()
    (victim_dir / "keep").write_bytes(NOTES)
    (tmp_path / "out.mcap.active").symlink_to(victim)
    (tmp_path / "bag.active").symlink_to(victim_dir)
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "a.csv.active").symlink_to(victim)
    before = snapshot(tmp_path)
    for args in (
        ["convert", src, tmp_path / "out.mcap", "--force"],
        ["convert", src, tmp_path / "bag", "--format", "rosbag2", "--force"],
        ["export", src, "-o", tables, "--force"],
    ):
        code, _, err = run(capsys, *args)
        assert code == 2 and ".active" in err, (args, err)
        assert snapshot(tmp_path) == before, args
    # the library writers too
    with pytest.raises(OutputExistsError):
        polybag.Writer(str(tmp_path / "out.mcap"), overwrite=True)
    with pytest.raises(OutputExistsError):
        polybag.Writer(str(tmp_path / "bag"), format="rosbag2", overwrite=True)
    assert snapshot(tmp_path) == before


# --- export: every topic its own table ---------------------------------------------------------------
COLLIDING = {"/a/b": 3, "/a.b": 5, "/a b": 7, "/a_b": 11}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_gives_every_topic_its_own_table(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    src = write_mcap(tmp_path / "in.mcap", COLLIDING)
    out = tmp_path / "t"
    for force in ([], ["--force"]):
        code, stdout, err = run(capsys, "export", src, "-o", out, "--format", fmt, "--layout", "flat", "--json", *force)
        assert code == 0, err
        res = json.loads(stdout)
        tables = {t["topic"]: Path(t["path"]) for t in res["tables"]}
        assert set(tables) == set(COLLIDING)
        assert len(set(tables.values())) == 4
        assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in tables.values())
        for topic, path in tables.items():
            texts = _table_texts(path, fmt)
            assert texts == [f"{topic}#{i}" for i in range(COLLIDING[topic])], (topic, path)
    # the first topic (in order) keeps the plain name
    assert (out / f"a.b.{fmt}").exists() and (out / f"a_b.{fmt}").exists()


def _table_texts(path: Path, fmt: str) -> list[str]:
    if fmt == "csv":
        import csv

        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        return [r["data"] for r in rows]
    if fmt == "jsonl":
        return [json.loads(ln)["message"]["data"] for ln in path.read_text().splitlines()]
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    assert (t.schema.metadata or {}).get(b"polybag.topic", b"").decode() in {k for k in COLLIDING}
    return [str(x) for x in t.column("data").to_pylist()]


_TOPIC = st.text(alphabet="ab/._ -Aé", min_size=1, max_size=6).map(lambda s: "/" + s)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(topics=st.lists(_TOPIC, min_size=1, max_size=6, unique=True))
def test_export_tables_are_one_per_topic_whatever_the_names(topics: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    d = tmp_path_factory.mktemp("ex")
    spec = {t: i + 1 for i, t in enumerate(topics)}
    src = write_mcap(d / "in.mcap", spec)
    res = ops.export(src, d / "out", format="jsonl")
    assert sorted(t.topic for t in res.tables) == sorted(topics)
    assert len({t.path for t in res.tables}) == len(topics)
    assert len({Path(t.path).name.casefold() for t in res.tables}) == len(topics)
    for t in res.tables:
        assert [json.loads(ln)["message"]["data"] for ln in Path(t.path).read_text().splitlines()] == [
            f"{t.topic}#{i}" for i in range(spec[t.topic])
        ]


def test_export_force_keeps_the_old_tables_when_it_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3, "/b": 4})
    out = tmp_path / "t"
    ops.export(src, out)
    before = snapshot(out)
    ex = importlib.import_module("polybag.ops.export")

    real = ex._CsvSink.write
    calls = []

    def failing(self: object, cols: object, n: int) -> None:
        calls.append(n)
        if len(calls) == 2:  # the second table: after the first one is complete
            raise KeyboardInterrupt
        real(self, cols, n)  # type: ignore[arg-type]

    monkeypatch.setattr(ex._CsvSink, "write", failing)
    with pytest.raises(KeyboardInterrupt):
        ops.export(src, out, overwrite=True)
    assert snapshot(out) == before


# --- export_media: frames of colliding topics -----------------------------------------------------
IMAGE_DEF = (
    b"std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\n"
    b"uint32 step\nuint8[] data\n"
    b"================================================================================\n"
    b"MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
)


def _image(value: int) -> bytes:
    data = bytes([value]) * 4  # 2x2 mono8
    return (
        struct.pack("<III", 0, 1, 0) + ros1_string("cam")
        + struct.pack("<II", 2, 2) + ros1_string("mono8") + struct.pack("<BI", 0, 2)
        + struct.pack("<I", len(data)) + data
    )  # fmt: skip


def test_export_images_of_colliding_topics_get_their_own_frames(tmp_path: Path) -> None:
    src = tmp_path / "cams.mcap"
    topics = ["/cam/a", "/cam.a", "/cam a", "/cam_a"]
    with polybag.Writer(str(src)) as w:
        s = w.add_schema("sensor_msgs/Image", "ros1msg", IMAGE_DEF)
        for i, topic in enumerate(topics):
            ch = w.add_channel(topic, "ros1", s)
            for t in (100, 200):  # the same log times on every topic
                w.write(ch, _image(10 * i + t // 100), t)
    out = tmp_path / "frames"
    export_images = importlib.import_module("polybag.ops.export_media").export_images
    res = export_images(src, out, format="npy")
    assert res.files == 8 and res.failed == 0
    import numpy as np

    values = sorted(int(np.load(p)[0, 0]) for p in out.iterdir())
    assert values == sorted(10 * i + k for i in range(4) for k in (1, 2))
    # again with overwrite: the same 8 files, replaced
    res = export_images(src, out, format="npy", overwrite=True)
    assert res.files == 8 and len(list(out.iterdir())) == 8


# --- killed while replacing: the old output stays, the new one is recoverable ------------------------
@pytest.mark.parametrize("fmt", ["mcap", "rosbag2"])
def test_a_killed_force_keeps_the_old_output(fmt: str, tmp_path: Path) -> None:
    """The filter expression blocks on a FIFO nobody writes to once half the messages are
    through, so the command is certainly in the middle of writing its new output when it is
    killed (no timing involved).  The old output is the same all along and after; the new
    one's ``.active`` is there for ``recover``."""
    src = write_mcap(tmp_path / "in.mcap", {"/a": 4000}, pad=2000)  # 4 chunks before the gate
    if fmt == "mcap":
        out = tmp_path / "out.mcap"
        shutil.copy(DEMO, out)
        active = tmp_path / "out.mcap.active"
        extra: list[str] = []
    else:
        out = write_bag(tmp_path / "out", 9)
        active = tmp_path / "out.active"
        extra = ["--format", "rosbag2"]
    before = snapshot(out) if out.is_dir() else out.read_bytes()
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    half = 1_000_000_000 + 2000 * 1000
    expression = f"t < {half} or open({str(gate)!r}).read() == 'go'"
    proc = subprocess.Popen(
        [sys.executable, "-m", "polybag", "filter", str(src), str(out), expression, "--force", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    gate_fd = None
    try:
        # the command is at the gate (it has the FIFO open for reading: opening it for writing
        # without blocking works from then on), half its messages handed to the writer ...
        while gate_fd is None:
            try:
                gate_fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                assert e.errno == errno.ENXIO, e
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                os.sched_yield()
        # ... and what the writer's threads finish of them reaches the disk
        while _size(active) == 0:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            os.sched_yield()
        # the same old output while the new one is being written ...
        assert (snapshot(out) if out.is_dir() else out.read_bytes()) == before
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if gate_fd is not None:
            os.close(gate_fd)
    # ... and after the command died
    assert (snapshot(out) if out.is_dir() else out.read_bytes()) == before
    assert active.exists()  # what was written so far, for recover
    fixed = tmp_path / ("fixed.mcap" if fmt == "mcap" else "fixed")
    code = main(["recover", str(active), str(fixed)] + extra)
    assert code in (0, 1)
    if fmt == "mcap":  # finished chunks are on disk (SQLite commits in larger batches)
        assert count(fixed) > 0


def _size(p: Path) -> int:
    """Bytes in a file, or in the files directly in a directory."""
    if p.is_dir():
        return sum(q.stat().st_size for q in p.iterdir() if q.is_file() and q.suffix in (".db3", ".mcap"))
    return p.stat().st_size


@pytest.mark.parametrize("name", ["notes.csv", "table.parquet", "frame.png"])
def test_force_judges_by_the_format_written_not_the_name(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file named like a table or an image is not replaced by a log written there with
    --format (fuzz target outputs: `merge a.b.csv IN --force -F bag` replaced a text file,
    judged as a csv table by its name; reproducer in fuzz/repros/)."""
    src = write_mcap(tmp_path / "in.mcap", {"/a": 3})
    out = tmp_path / name
    out.write_bytes(NOTES)
    before = snapshot(tmp_path)
    for cmd in (["convert", src, out], ["filter", src, out], ["sort", src, out], ["merge", out, src]):
        code, _, err = run(capsys, *cmd, "-F", "bag", "--force")
        assert code == 2 and "not a log" in err and "not replaced" in err, (cmd, err)
        assert snapshot(tmp_path) == before
    with pytest.raises(OutputExistsError, match="not a log"):
        ops.convert(src, out, format="mcap", overwrite=True)
    assert out.read_bytes() == NOTES
