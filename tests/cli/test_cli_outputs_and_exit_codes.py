"""Issue 12, "silent changes of meaning" in operations and the CLI.

* Commands that write refuse to replace an existing file unless ``--force`` (library:
  ``overwrite=True``), exit 2, and never write over an input (same path, symlink, hard
  link, the ``.active`` it is written as, stdin redirected from it), even with ``--force``.
* A full disk / ``ulimit -f`` while writing: the error names the output, nothing is left.
* Errors and interrupts leave no ``NAME.active``; a split or export is complete or absent.
* ``info`` of a damaged file exits non-zero; anything that prints ``error:`` exits non-zero.
* A FIFO is read as a stream; ``/dev/zero``, ``/dev/null``, a directory are clear errors.
* The dropped-topics warning names the topics (and why) without ``--json``.
* Every CLI error is one ``polybag CMD: error: ...`` line, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag import ops
from polybag.cli import main
from polybag.errors import OutputExistsError, PolybagError
from polybag.formats.mcap.writer import McapWriter
from polybag.io.source import MappedSource, open_source

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "samples" / "demo.mcap"
CORPORA = ROOT.parent / "shared" / "corpora"
BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example.bag"
ULOG = CORPORA / "ulog" / "sample_log_small.ulg"
ULOG_BIG = CORPORA / "ulog" / "sample.ulg"
UNRELATED = b"my unrelated notes, not a log\n"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.rglob("*") if p.name.endswith(".active"))


def one_error_line(err: str, cmd: str) -> str:
    """The stderr of a failed command: exactly one error line, no traceback."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(f"polybag {cmd}: error: ")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    shutil.copy(DEMO, tmp_path / "in.mcap")
    shutil.copy(BAG, tmp_path / "in.bag")
    return tmp_path


# --- 1. no silent overwrite ------------------------------------------------------------------

SINGLE_OUTPUT = {
    "convert": lambda i, o: ["convert", i, o],
    "filter": lambda i, o: ["filter", i, o],
    "sort": lambda i, o: ["sort", i, o],
    "merge": lambda i, o: ["merge", o, i],
    "merge-o": lambda i, o: ["merge", i, "-o", o],
    "recover": lambda i, o: ["recover", i, o],
}


@pytest.mark.parametrize("name", sorted(SINGLE_OUTPUT))
def test_existing_output_is_refused_then_replaced_with_force(
    name: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = work / "in.mcap", work / "out.mcap"
    dst.write_bytes(UNRELATED)
    args = SINGLE_OUTPUT[name](str(src), str(dst))
    code, _, err = run(capsys, *args)
    assert code == 2
    line = one_error_line(err, args[0])
    assert str(dst) in line and "exists" in line and "--force" in line
    assert "usage:" not in err  # an existing output is no syntax problem
    assert dst.read_bytes() == UNRELATED
    assert leftovers(work) == []
    code, _, err = run(capsys, *args, "--force")  # not a log: never replaced (issue 26)
    assert code == 2 and "not a log" in one_error_line(err, args[0]) and dst.read_bytes() == UNRELATED
    shutil.copy(BAG, dst)  # a log: replaced with --force
    code, _, err = run(capsys, *args, "--force")
    assert code == 0, err
    with polybag.open(dst) as r:
        assert r.summary.message_count == 300
    assert leftovers(work) == []


def test_merge_hint_names_the_output_argument(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = work / "a.mcap"
    shutil.copy(DEMO, a)
    code, _, err = run(capsys, "merge", str(a), str(work / "in.mcap"))  # meant: both are inputs
    assert code == 2 and "first PATH is the output" in one_error_line(err, "merge")
    assert a.read_bytes() == DEMO.read_bytes()


@pytest.mark.parametrize("kind", ["same", "relative", "symlink", "hardlink"])
@pytest.mark.parametrize("cmd", ["convert", "sort", "filter", "recover", "merge"])
def test_an_input_is_never_overwritten_even_with_force(
    cmd: str, kind: str, work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = work / "in.mcap"
    before = src.read_bytes()
    if kind == "same":
        dst = str(src)
    elif kind == "relative":
        monkeypatch.chdir(work)
        dst = "./in.mcap"
    elif kind == "symlink":
        (work / "link.mcap").symlink_to(src)
        dst = str(work / "link.mcap")
    else:
        os.link(src, work / "hard.mcap")
        dst = str(work / "hard.mcap")
    args = ["merge", dst, str(BAG), str(src)] if cmd == "merge" else [cmd, str(src), dst]
    code, _, err = run(capsys, *args, "--force")
    assert code == 2
    assert "is the input" in one_error_line(err, cmd)
    assert src.read_bytes() == before
    assert leftovers(work) == []


def test_input_that_is_the_outputs_active_file_is_never_touched(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a killed recorder's rec.bag.active; "convert rec.bag.active rec.bag" would write rec.bag.active
    active = work / "rec.bag.active"
    shutil.copy(BAG, active)
    before = active.read_bytes()
    code, _, err = run(capsys, "convert", str(active), str(work / "rec.bag"), "--force")
    assert code == 2 and "input" in one_error_line(err, "convert")
    assert active.read_bytes() == before and not (work / "rec.bag").exists()


def test_a_recording_in_progress_is_never_overwritten(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    active = work / "out.bag.active"
    active.write_bytes(b"#ROSBAG V2.0\n recording...")
    for force in ([], ["--force"]):
        code, _, err = run(capsys, "convert", str(work / "in.mcap"), str(work / "out.bag"), *force)
        assert code == 2 and "out.bag.active exists" in one_error_line(err, "convert")
        assert active.read_bytes() == b"#ROSBAG V2.0\n recording..."
    with pytest.raises(OutputExistsError):
        McapWriter(work / "out.bag", overwrite=False)
    assert active.read_bytes() == b"#ROSBAG V2.0\n recording..."


def test_stdin_redirected_from_the_output_is_refused(work: Path) -> None:
    out = work / "out.mcap"
    shutil.copy(DEMO, out)
    with out.open("rb") as f:
        p = subprocess.run(
            [sys.executable, "-m", "polybag", "convert", "-", str(out), "--force"], stdin=f, capture_output=True
        )
    assert p.returncode == 2
    assert "is the input" in one_error_line(p.stderr.decode(), "convert")
    assert out.read_bytes() == DEMO.read_bytes()


def test_split_refuses_existing_parts(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = work / "parts"
    parts.mkdir()
    (parts / "in_001.mcap").write_bytes(UNRELATED)
    args = ["split", str(work / "in.mcap"), "--duration", "2s", "-o", str(parts)]
    code, _, err = run(capsys, *args)
    assert code == 2 and "in_001.mcap" in one_error_line(err, "split")
    assert sorted(p.name for p in parts.iterdir()) == ["in_001.mcap"]  # nothing written at all
    shutil.copy(BAG, parts / "in_001.mcap")  # (only a log is replaced, issue 26)
    code, _, err = run(capsys, *args, "--force")
    assert code == 0, err
    names = sorted(p.name for p in parts.iterdir())
    assert names == [f"in_{i:03d}.mcap" for i in range(5)]
    assert sum(polybag.open(parts / n).summary.message_count for n in names) == 300


def test_split_warns_about_older_parts_left_with_force(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = work / "parts"
    parts.mkdir()
    (parts / "in_007.mcap").write_bytes(UNRELATED)
    code, _, err = run(capsys, "split", str(work / "in.mcap"), "--duration", "5s", "-o", str(parts), "--force")
    assert code == 0
    assert "older parts" in err and "in_007.mcap" in err
    assert (parts / "in_007.mcap").read_bytes() == UNRELATED


def test_split_part_that_is_the_input_is_refused_even_with_force(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = work / "run_000.mcap"
    shutil.copy(DEMO, src)
    code, _, err = run(capsys, "split", str(src), "--duration", "2s", "--prefix", "run", "--force")
    assert code == 2 and "is the input" in one_error_line(err, "split")
    assert src.read_bytes() == DEMO.read_bytes()
    assert sorted(p.name for p in work.iterdir() if p.name.startswith("run_")) == ["run_000.mcap"]


def test_export_refuses_existing_tables(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "tables"
    out.mkdir()
    (out / "imu.accel.csv").write_bytes(UNRELATED)
    code, _, err = run(capsys, "export", str(work / "in.mcap"), "-o", str(out))
    assert code == 2 and "imu.accel.csv" in one_error_line(err, "export")
    assert sorted(p.name for p in out.iterdir()) == ["imu.accel.csv"]
    assert (out / "imu.accel.csv").read_bytes() == UNRELATED
    code, _, err = run(capsys, "export", str(work / "in.mcap"), "-o", str(out), "--force")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["chatter.csv", "imu.accel.csv"]
    assert (out / "imu.accel.csv").read_bytes().startswith(b"log_time,")


def test_export_table_that_is_the_input_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "tables"
    out.mkdir()
    os.link(work / "in.mcap", out / "chatter.csv")  # the input, under a table's name
    code, _, err = run(capsys, "export", str(work / "in.mcap"), "-o", str(out), "--force")
    assert code == 2 and "is the input" in one_error_line(err, "export")
    assert (work / "in.mcap").read_bytes() == DEMO.read_bytes()


@pytest.mark.parametrize("cmd", ["compress", "decompress"])
def test_compress_output_dir_refuses_existing(cmd: str, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    od = work / "od"
    od.mkdir()
    (od / "in.bag").write_bytes(UNRELATED)
    code, _, err = run(capsys, cmd, str(work / "in.bag"), "--output-dir", str(od), "-q")
    assert code == 2 and "exists" in one_error_line(err, cmd)
    assert (od / "in.bag").read_bytes() == UNRELATED
    shutil.copy(DEMO, od / "in.bag")  # (only a log is replaced, issue 26)
    code, _, err = run(capsys, cmd, str(work / "in.bag"), "--output-dir", str(od), "-q", "-f")
    assert code == 0, err
    assert polybag.open(od / "in.bag").summary.message_count == 8647
    assert (work / "in.bag").read_bytes() == BAG.read_bytes()


def test_compress_output_dir_that_is_the_input_dir_via_symlink(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "alias").symlink_to(work)
    code, _, err = run(capsys, "compress", str(work / "in.bag"), "--output-dir", str(work / "alias"), "-f", "-q")
    assert code == 2 and "input" in one_error_line(err, "compress")
    assert (work / "in.bag").read_bytes() == BAG.read_bytes()


def test_in_place_compress_keeps_its_documented_backup(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "compress", "--lz4", str(work / "in.bag"), "-q")
    assert code == 0, err
    assert (work / "in.orig.bag").read_bytes() == BAG.read_bytes()
    assert polybag.open(work / "in.bag").summary.message_count == 8647
    code, _, err = run(capsys, "compress", "--bz2", str(work / "in.bag"), "-q")  # the backup exists
    assert code == 1 and "in.orig.bag exists" in one_error_line(err, "compress")
    assert (work / "in.orig.bag").read_bytes() == BAG.read_bytes()
    assert leftovers(work) == []


def test_reindex_output_dir_refuses_existing(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    od = work / "od"
    od.mkdir()
    (od / "in.bag").write_bytes(UNRELATED)
    code, _, err = run(capsys, "reindex", str(work / "in.bag"), "--output-dir", str(od), "-q")
    assert code == 2 and "exists" in one_error_line(err, "reindex")
    assert (od / "in.bag").read_bytes() == UNRELATED
    shutil.copy(DEMO, od / "in.bag")  # (only a log is replaced, issue 26)
    code, _, err = run(capsys, "reindex", str(work / "in.bag"), "--output-dir", str(od), "-q", "-f")
    assert code == 0, err


def test_get_attachment_refuses_existing(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "calib.yaml"
    out.write_bytes(UNRELATED)
    code, _, err = run(capsys, "get", "attachment", str(work / "in.mcap"), "calibration.yaml", "-o", str(out))
    assert code == 2 and "exists" in one_error_line(err, "get")
    assert out.read_bytes() == UNRELATED
    code, _, _ = run(capsys, "get", "attachment", str(work / "in.mcap"), "calibration.yaml", "-o", str(out), "--force")
    assert code == 0 and out.read_bytes() == b"camera: {fx: 500.0, fy: 500.0}\n"


def test_plot_refuses_existing(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    out = work / "p.png"
    out.write_bytes(UNRELATED)
    args = ["plot", str(work / "in.mcap"), "/imu/accel.x", "-o", str(out)]
    code, _, err = run(capsys, *args)
    assert code == 2 and "exists" in one_error_line(err, "plot")
    assert out.read_bytes() == UNRELATED
    out.write_bytes(b"\x89PNG\r\n\x1a\n")  # (only a file of its kind is replaced, issue 26)
    code, _, err = run(capsys, *args, "--force")
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG") and len(out.read_bytes()) > 8
    assert leftovers(work) == []


def test_library_ops_refuse_unless_overwrite(work: Path) -> None:
    dst = work / "out.bag"
    dst.write_bytes(UNRELATED)
    for call in (
        lambda ow: ops.convert(work / "in.mcap", dst, overwrite=ow),
        lambda ow: ops.filter(work / "in.mcap", dst, include_topics="/chatter", overwrite=ow),
        lambda ow: ops.sort(work / "in.mcap", dst, overwrite=ow),
        lambda ow: ops.merge(dst, [work / "in.mcap"], overwrite=ow),
        lambda ow: ops.recover(work / "in.mcap", dst, overwrite=ow),
    ):
        dst.write_bytes(UNRELATED)
        with pytest.raises(OutputExistsError, match="exists"):
            call(False)
        assert dst.read_bytes() == UNRELATED
        shutil.copy(BAG, dst)  # (only a log is replaced, issue 26)
        call(True)
        assert polybag.open(dst).summary.message_count > 0
    with pytest.raises(OutputExistsError, match="is the input"):
        ops.convert(work / "in.mcap", work / "in.mcap", overwrite=True)


def test_writer_overwrite_option(work: Path) -> None:
    dst = work / "w.mcap"
    dst.write_bytes(UNRELATED)
    with pytest.raises(OutputExistsError):
        polybag.Writer(dst, overwrite=False)
    assert dst.read_bytes() == UNRELATED and leftovers(work) == []
    with polybag.Writer(dst) as w:  # the default replaces, like open(path, "w")
        w.add_channel("/x", "json")
    assert polybag.open(dst).summary.message_count == 0


@pytest.mark.parametrize("fmt", ["mcap", "bag", "ulog"])
def test_final_rename_never_clobbers_a_file_that_appeared(fmt: str, work: Path) -> None:
    dst = work / f"late.{ {'ulog': 'ulg'}.get(fmt, fmt) }"
    w = polybag.Writer(dst, overwrite=False)
    if fmt == "ulog":
        w.add_format("t:uint64_t timestamp;")  # type: ignore[attr-defined]
        ch = w.add_subscription("t")  # type: ignore[attr-defined]
        w.write(ch, (1000).to_bytes(8, "little"), log_time=1_000_000)
    else:
        s = w.add_schema("std_msgs/Empty", "ros1msg", b"")
        ch = w.add_channel("/e", "ros1", s, {"md5sum": "d41d8cd98f00b204e9800998ecf8427e"} if fmt == "bag" else None)
        w.write(ch, b"", log_time=1)
    dst.write_bytes(UNRELATED)  # another program creates the name while we write
    with pytest.raises(OutputExistsError, match="appeared"):
        w.close()
    assert dst.read_bytes() == UNRELATED
    assert leftovers(work) == []


# --- 2. a full disk, ulimit -f, failing compression threads, interrupts -------------------------

_CHILD = """
import resource, signal, sys
if sys.argv[1] == "ign":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
sys.argv = ["polybag"] + sys.argv[3:]
from polybag.cli import main
sys.exit(main())
"""


def _limited(tmp: Path, limit: int, *args: str, ignore: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, "ign" if ignore else "dfl", str(limit), *args],
        capture_output=True,
        text=True,
        cwd=tmp,
    )


@pytest.mark.parametrize("ignore", [True, False], ids=["SIGXFSZ-ignored", "SIGXFSZ-default"])
@pytest.mark.parametrize(("src", "out", "extra"), [
    (ULOG_BIG, "out.mcap", []),
    (BAG, "out.bag", ["--compression", "none"]),
    (ULOG_BIG, "out.ulg", []),
    (BAG, "out.mcap", ["--compression", "none", "--chunk-size", "64K"]),
])
def test_full_disk_during_convert(src: Path, out: str, extra: list[str], ignore: bool, tmp_path: Path) -> None:
    # without SIG_IGN in the child, the CLI itself must turn SIGXFSZ into an EFBIG error
    p = _limited(tmp_path, 200_000, "convert", str(src), out, *extra, ignore=ignore)
    assert p.returncode == 3, p.stderr
    line = one_error_line(p.stderr, "convert")
    assert out in line and "File too large" in line
    assert list(tmp_path.iterdir()) == []  # no output, no .active


def test_full_disk_during_convert_library_error_names_the_output(tmp_path: Path) -> None:
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))\n"
        "from polybag import ops\n"
        "try:\n"
        f"    ops.convert({str(ULOG_BIG)!r}, 'o.mcap')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__, e.errno, e.filename)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    import errno

    assert p.stdout.split() == ["OSError", str(errno.EFBIG), "o.mcap"], p.stderr
    assert list(tmp_path.iterdir()) == []


def test_full_disk_during_export_and_split_leaves_nothing(tmp_path: Path) -> None:
    p = _limited(tmp_path, 100_000, "export", str(ULOG_BIG), "-o", "tables")
    assert p.returncode == 3 and "File too large" in one_error_line(p.stderr, "export")
    assert list(tmp_path.iterdir()) == []  # not even the directory it made
    p = _limited(tmp_path, 300_000, "split", str(ULOG_BIG), "--duration", "60s", "-F", "mcap", "-o", "parts")
    assert p.returncode == 3 and "File too large" in one_error_line(p.stderr, "split")
    assert list((tmp_path / "parts").iterdir()) == []  # complete parts of the run removed too


class Boom(Exception):
    pass


@pytest.mark.parametrize("comp", ["lz4", "bz2"])
def test_bag_writer_thread_compression_error_propagates(
    comp: str, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polybag.formats.bag.writer as bw

    calls = 0
    real = bw.compress

    def failing(*a: Any, **k: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls >= 3:
            raise Boom("compressor failed")
        return real(*a, **k)

    monkeypatch.setattr(bw, "compress", failing)
    with pytest.raises(Boom):
        ops.convert(work / "in.bag", work / "out.bag", compression=comp, chunk_size=16 * 1024)
    assert calls >= 3
    assert not (work / "out.bag").exists() and leftovers(work) == []


def test_mcap_writer_thread_compression_error_propagates(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = McapWriter._compress

    def failing(self: McapWriter, raw: Any) -> bytes:
        nonlocal calls
        calls += 1
        if calls >= 3:
            raise Boom("compressor failed")
        return real(self, raw)

    monkeypatch.setattr(McapWriter, "_compress", failing)
    with pytest.raises(Boom):
        ops.convert(work / "in.bag", work / "out.mcap", compression="zstd", chunk_size=16 * 1024)
    assert calls >= 3
    assert not (work / "out.mcap").exists() and leftovers(work) == []


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, cls: type, n: int) -> None:
    real = cls.write
    count = 0

    def write(self: Any, *a: Any, **k: Any) -> Any:
        nonlocal count
        count += 1
        if count > n:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(cls, "write", write)


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{bag}", "{d}/o.mcap"],
        ["filter", "{bag}", "{d}/o.mcap", "-i", "/tf.*"],
        ["sort", "{bag}", "{d}/o.mcap"],
        ["merge", "{d}/o.mcap", "{bag}", "{mcap}"],
        ["recover", "{bag}", "{d}/o.mcap"],
        ["split", "{bag}", "--duration", "3s", "-F", "mcap", "-o", "{d}/parts"],
    ],
    ids=lambda a: a[0],
)
def test_keyboard_interrupt_leaves_no_active(
    args: list[str], work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = work / "out"
    out.mkdir()
    _interrupt_after(monkeypatch, McapWriter, 1000)
    argv = [a.format(bag=work / "in.bag", mcap=work / "in.mcap", d=out) for a in args]
    code, _, err = run(capsys, *argv)
    assert code == 130 and "interrupted" in err and "Traceback" not in err
    assert [p for p in out.rglob("*") if p.is_file()] == []


def test_keyboard_interrupt_during_export_removes_its_tables(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ex = sys.modules["polybag.ops.export"]  # (polybag.ops.export is also the function)
    real = ex._CsvSink.write
    seen: list[int] = []

    def write(self: Any, cols: Any, n: int) -> None:
        seen.append(n)
        if len(seen) > 1:
            raise KeyboardInterrupt
        real(self, cols, n)

    monkeypatch.setattr(ex._CsvSink, "write", write)
    code, _, _ = run(capsys, "export", str(work / "in.mcap"), "-o", str(work / "t"))
    assert code == 130
    assert not (work / "t").exists()  # the directory it made, and the first table, are gone


# --- 3. anything that reports an error exits non-zero ------------------------------------------


def _damaged(tmp: Path) -> Iterator[Path]:
    for src in (DEMO, BAG, ULOG):
        data = src.read_bytes()
        for frac in (0.3, 0.5, 0.9):
            p = tmp / f"cut{int(frac * 100)}_{src.name}"
            p.write_bytes(data[: int(len(data) * frac)])
            yield p


def test_info_of_a_damaged_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for p in _damaged(tmp_path):
        for extra in ([], ["--json"]):
            code, out, err = run(capsys, "info", str(p), *extra)
            assert code in (1, 3), (p, extra, code)
            line = one_error_line(err, "info")
            assert p.name in line
            if code == 1:  # described, with the damage in the output too
                assert out.strip() and ("error" in out.lower() or "corruption" in out.lower())


def test_info_of_sound_files_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    for p in (DEMO, BAG, ULOG):
        code, _, err = run(capsys, "info", str(p))
        assert code == 0 and "error" not in err


def test_info_damage_reported_for_each_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The three formats, cut in half: described (exit 1), not refused (exit 3)."""
    for src in (DEMO, BAG, ULOG):
        p = tmp_path / f"half_{src.name}"
        data = src.read_bytes()
        p.write_bytes(data[: len(data) // 2])
        code, _, err = run(capsys, "info", str(p))
        assert code == 1, (src, err)
        assert "damaged" in one_error_line(err, "info")


@pytest.mark.parametrize(
    "cmd", [["info"], ["info", "--json"], ["info", "--yaml"], ["cat"], ["du"], ["check"], ["list", "channels"]]
)
def test_no_command_prints_error_and_exits_0(cmd: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for p in _damaged(tmp_path):
        code, out, err = run(capsys, *cmd, str(p))
        said_error = bool(re.search(r"^(polybag \S+: )?error:|^error:\s", err + "\n" + out, re.MULTILINE))
        said_error = said_error or '"error":' in out or "problem" in out
        assert not (said_error and code == 0), (cmd, p.name, out[-300:], err)
        assert "Traceback" not in err


# --- 4. FIFOs, devices, directories --------------------------------------------------------------


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    def run_() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    t = threading.Thread(target=run_, daemon=True)
    t.start()
    return t


def test_fifo_is_read_as_a_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe.mcap"
    os.mkfifo(fifo)
    t = _feed(fifo, DEMO.read_bytes())
    code, out, err = run(capsys, "info", str(fifo), "--json")
    t.join()
    assert code == 0, err
    d = json.loads(out)
    assert d["message_count"] == 300 and d["path"] == str(fifo)
    t = _feed(fifo, BAG.read_bytes())
    code, _, err = run(capsys, "convert", str(fifo), str(tmp_path / "o.mcap"))
    t.join()
    assert code == 0, err
    assert polybag.open(tmp_path / "o.mcap").summary.message_count == 8647
    t = _feed(fifo, DEMO.read_bytes())
    with polybag.open(fifo) as r:
        assert not r.source.seekable
        assert sum(1 for _ in r.messages()) == 300
    t.join()


def test_fifo_where_a_file_is_needed_is_a_clear_error_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.bag"
    os.mkfifo(fifo)  # nobody writes: opening it would wait forever
    for cmd in (["reindex", str(fifo)], ["compress", str(fifo)]):
        code, _, err = run(capsys, *cmd)
        assert code == 3 and "named pipe" in one_error_line(err, cmd[0])
    with pytest.raises(PolybagError, match="named pipe"):
        MappedSource.from_path(fifo)


_BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # an endless read would fail, not hang
"""


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_devices_are_clear_errors(dev: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists(dev):
        pytest.skip(f"no {dev}")
    for cmd in (["info"], ["cat"], ["check"], ["convert"]):
        argv = [*cmd, dev] + (["/nonexistent/x.mcap"] if cmd == ["convert"] else [])
        code, out, err = run(capsys, *argv)
        assert code in (1, 3)
        text = err if cmd != ["check"] else out
        assert "character device" in text and "empty" not in text
    with pytest.raises(PolybagError, match="character device"):
        open_source(dev)


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/null"])
@pytest.mark.parametrize("fmt", [[], ["--format", "bag"], ["--format", "ulog"]])
def test_stdin_from_a_device_is_refused(dev: str, fmt: list[str]) -> None:
    code = _BOUNDED + "from polybag.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    with open(dev, "rb") as f:
        p = subprocess.run([sys.executable, "-c", code, "info", *fmt, "-"], stdin=f, capture_output=True, text=True)
    assert p.returncode == 3
    assert "character device" in one_error_line(p.stderr, "info")


def test_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in (["info"], ["cat"], ["du"], ["compress"]):
        code, _, err = run(capsys, *cmd, str(tmp_path))
        assert code == 3 and "is a directory" in one_error_line(err, cmd[0])


# --- 5. dropped topics are named without --json ----------------------------------------------------


@pytest.mark.parametrize("cmd", ["convert", "sort", "filter", "merge", "recover"])
def test_dropped_topics_are_named_in_the_human_output(cmd: str, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(work / "o.ulg")
    argv = ["merge", out, str(work / "in.mcap")] if cmd == "merge" else [cmd, str(work / "in.mcap"), out]
    code, stdout, err = run(capsys, *argv)
    assert code == 1  # messages were lost
    assert "--json" not in err.replace("(--json lists them all", "")
    summary = [ln for ln in err.splitlines() if "not written" in ln]
    assert len(summary) == 1, err
    assert "/chatter (100)" in summary[0] and summary[0].startswith(f"polybag {cmd}: warning: ")
    assert any("/chatter" in ln and "string field" in ln for ln in err.splitlines())  # the reason
    code, stdout, _ = run(capsys, *argv, "--json", "--force")
    assert json.loads(stdout)["dropped_topics"] == {"/chatter": 100}


def test_split_dropped_topics_are_named(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "split", str(work / "in.mcap"), "--duration", "5s", "-F", "ulog", "-o", str(work / "p"))
    assert code == 1
    assert any("/chatter (100)" in ln for ln in err.splitlines())


# --- 6. one line, never a traceback ----------------------------------------------------------------


def test_unexpected_exception_is_one_line(work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import polybag.ops as pops

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("something nobody foresaw\nsecond line")

    monkeypatch.setattr(pops, "convert", broken)
    monkeypatch.delenv("POLYBAG_DEBUG", raising=False)
    code, _, err = run(capsys, "convert", str(work / "in.mcap"), str(work / "o.bag"))
    assert code == 3
    line = one_error_line(err, "convert")
    assert "RuntimeError" in line and "something nobody foresaw" in line and "second line" not in err


def test_errors_from_bad_inputs_are_single_lines(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bag"
    junk.write_bytes(b"#ROSBAG V2.0\n" + b"\xff" * 64)
    cases = [
        ["info", str(junk)],
        ["cat", str(junk)],
        ["convert", str(junk), str(tmp_path / "o.mcap")],
        ["convert", str(tmp_path / "missing.mcap"), str(tmp_path / "o.mcap")],
        ["export", str(DEMO), "-o", str(tmp_path / "e"), "--topics", "nothing"],
        ["get", "attachment", str(DEMO), "nope", "-o", str(tmp_path / "n")],
        ["merge", str(tmp_path / "only_output.mcap")],
    ]
    for argv in cases:
        p = subprocess.run([sys.executable, "-m", "polybag", *argv], capture_output=True, text=True)
        assert p.returncode != 0, argv
        one_error_line(p.stderr, argv[0])
    assert leftovers(tmp_path) == []


def test_sigint_to_a_real_process_leaves_no_active(tmp_path: Path) -> None:
    """A real SIGINT (not a patched exception) while convert writes: no .active, exit 130."""
    code = (
        "import os, signal, sys\n"
        # (SIGINT is Python's KeyboardInterrupt even if this test runs where it is ignored)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from polybag.formats.mcap import writer as w\n"
        "real = w.McapWriter.write\n"
        "n = 0\n"
        "def write(self, *a, **k):\n"
        "    global n\n"
        "    n += 1\n"
        "    if n == 2000:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(self, *a, **k)\n"
        "w.McapWriter.write = write\n"
        "from polybag.cli import main\n"
        f"sys.exit(main(['convert', {str(BAG)!r}, 'o.mcap']))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 130, p.stderr
    assert "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []
