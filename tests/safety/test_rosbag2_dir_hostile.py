"""Hostile rosbag2 directories (issue 26): metadata.yaml bombs, storage file listing, zstd
FILE bombs.

* ``metadata.yaml`` (and the QoS YAML strings inside it) is loaded by ``polybag.util.safe_yaml``:
  a "billion laughs" of aliases, a recursive alias, a merge-key bomb or deep nesting is a
  clear error naming the file and the limit, measured by traced allocations;
* a ``compression_mode: FILE`` storage file is decompressed only when its first bytes are
  an SQLite or MCAP file, never past ``max_storage_bytes`` (by default 1024 times its size,
  at least 256 MiB), never into the last 256 MiB of the temporary filesystem; every error
  names the input, never only the temporary copy (bytes written are capped in a child
  process with RLIMIT_FSIZE: writing past the cap would fail differently);
* listed paths are normalised and deduplicated by the file they are, none may leave the bag
  directory (``..``, absolute, a symbolic link out); storage files beside the listed ones
  that metadata.yaml does not list are reported (``info`` warns, ``check`` fails), not read;
  a bag of many files keeps a bounded number open (file descriptors counted while reading).
"""

from __future__ import annotations

import heapq
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.errors import FormatError, PolybagError, UsageError
from polybag.formats.rosbag2 import metadata as md
from polybag.formats.rosbag2 import opening, storage
from polybag.formats.rosbag2.reader import _lazy_merged
from polybag.util import safe_yaml as _yaml

MiB = 1 << 20
STRING = "std_msgs/msg/String"


# --- building bags -------------------------------------------------------------------------------
def _write_bag(path: Path, *, n: int = 12, compression: str | None = None, storage: str = "sqlite3") -> list[tuple[str, int, bytes]]:
    """A bag of two String topics written by rosbags; ``(topic, time, data)`` written."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    w = Writer(path, version=8, storage_plugin=plugin)  # type: ignore[arg-type]
    if compression:
        w.set_compression(CompressionMode[compression.upper()], CompressionFormat.ZSTD)
    out = []
    with w:
        a = w.add_connection("/a", STRING, typestore=ts)
        b = w.add_connection("/b", STRING, typestore=ts)
        for i in range(n):
            data = ts.serialize_cdr(ts.types[STRING](data=f"m{i}"), STRING)
            t = 1_000 + 10 * i
            w.write(a if i % 2 else b, t, data)
            out.append(("/a" if i % 2 else "/b", t, bytes(data)))
    return out


def _meta(bag: Path) -> dict[str, Any]:
    return yaml.safe_load((bag / "metadata.yaml").read_text())  # type: ignore[no-any-return]


def _set_meta(bag: Path, doc: dict[str, Any]) -> None:
    (bag / "metadata.yaml").write_text(yaml.safe_dump(doc))


def _list_files(bag: Path, names: list[str]) -> None:
    doc = _meta(bag)
    info = doc["rosbag2_bagfile_information"]
    info["relative_file_paths"] = names
    info.pop("files", None)
    _set_meta(bag, doc)


def _messages(path: Path | str, **kw: Any) -> list[tuple[str, int, bytes]]:
    with polybag.open(path, **kw) as r:
        return [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def bag(tmp_path: Path) -> Path:
    p = tmp_path / "bag"
    _write_bag(p)
    return p


def _peak(fn: Any) -> int:
    """Peak traced allocation (bytes) while ``fn()`` runs."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# --- metadata.yaml: YAML bombs ---------------------------------------------------------------------
def _laughs(levels: int = 9, width: int = 10, indent: str = "    ") -> list[str]:
    lines = [f"{indent}a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return lines


def _with_custom_data(bag: Path, lines: list[str]) -> None:
    text = (bag / "metadata.yaml").read_text()
    text = text.replace("  custom_data: null\n", "").rstrip("\n") + "\n  custom_data:\n" + "\n".join(lines) + "\n"
    (bag / "metadata.yaml").write_text(text)


def test_billion_laughs_in_custom_data_is_a_clear_error(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _with_custom_data(bag, _laughs())  # 10**10 scalars when expanded, in under 2 KB
    assert (bag / "metadata.yaml").stat().st_size < 4096
    code, _out, err = _cli(["info", str(bag)], capsys)
    assert code != 0
    assert f"{bag / 'metadata.yaml'}: YAML expands to more than {_yaml.MAX_YAML_NODES} nodes" in err
    assert "unexpected" not in err

    def open_it() -> None:
        with pytest.raises(FormatError, match="the limit"):
            polybag.open(bag)

    assert _peak(open_it) < 16 * MiB


@pytest.mark.parametrize(
    ("custom", "what"),
    [
        (["    a: &r [x, *r]"], "refers to itself"),
        (["    a: &r {k: *r}"], "refers to itself"),
        (["    a: " + "[" * 80 + "]" * 80], "nested more than"),
        (
            # merge keys: each level copies ten times the pairs of the one below
            ["    m0: &m0 {" + ", ".join(f"k{i}: {i}" for i in range(10)) + "}"]
            + [f"    m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}" for i in range(1, 10)],
            "expands to more than",
        ),
        (["    big: &b '" + "x" * 60_000 + "'"] + [f"    c{i}: [" + ", ".join(["*b"] * 100) + "]" for i in range(12)], "bytes of text"),
    ],
    ids=["recursive-list", "recursive-map", "deep", "merge-keys", "long-scalar-aliased"],
)
def test_other_yaml_bombs_are_clear_errors(bag: Path, custom: list[str], what: str) -> None:
    _with_custom_data(bag, custom)  # the long scalar: 72 MB of text once expanded

    def open_it() -> None:
        with pytest.raises(FormatError, match=what) as e:
            polybag.open(bag)
        assert str(e.value).startswith(str(bag / "metadata.yaml"))

    assert _peak(open_it) < 24 * MiB


def test_a_qos_string_bomb_is_not_expanded(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Version 8 keeps each topic's QoS as a YAML document in a string: parsed with the same bounds."""
    doc = _meta(bag)
    bomb = "\n".join(_laughs(indent="")) + "\n"
    for t in doc["rosbag2_bagfile_information"]["topics_with_message_count"]:
        t["topic_metadata"]["offered_qos_profiles"] = bomb
    _set_meta(bag, doc)

    def read() -> None:
        with polybag.open(bag) as r:
            assert r.summary.message_count == 12
            assert sum(1 for _ in r.messages()) == 12

    assert _peak(read) < 32 * MiB
    code, out, _err = _cli(["info", str(bag)], capsys)
    assert code == 0 and "/a" in out


def test_aliases_within_the_bounds_still_load(bag: Path) -> None:
    _with_custom_data(bag, ["    who: &w alice", "    also: *w", "    n: 3"])
    with polybag.open(bag) as r:
        assert r.summary.extras["custom_data"] == {"who": "alice", "also": "alice", "n": "3"}
        assert sum(1 for _ in r.messages()) == 12


def test_metadata_over_the_size_cap_is_refused_before_parsing(bag: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opening, "MAX_METADATA_BYTES", 100)
    with pytest.raises(FormatError, match="over 100 bytes") as e:
        polybag.open(bag)
    assert e.value.path == str(bag / "metadata.yaml")


def test_metadata_that_links_out_or_is_not_a_file_is_refused(tmp_path: Path, bag: Path) -> None:
    secret = tmp_path / "secret.yaml"
    shutil.move(bag / "metadata.yaml", secret)
    (bag / "metadata.yaml").symlink_to(secret)
    with pytest.raises(FormatError, match="metadata.yaml links to .*, outside the bag directory"):
        polybag.open(bag)
    (bag / "metadata.yaml").unlink()
    os.mkfifo(bag / "metadata.yaml")  # opening it for reading would wait for a writer forever
    with pytest.raises(PolybagError):
        polybag.open(bag)
    with pytest.raises(FormatError, match="not a regular file"):
        opening._read_metadata(str(bag / "metadata.yaml"))


@pytest.mark.parametrize("error", [FormatError, UsageError])
@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("\n".join(_laughs(indent="")), "expands to more than"),
        ("a: &x [*x]", "refers to itself"),
        ("[" * 70 + "]" * 70, "nested more than 64"),
        ("a: [1", "not valid YAML"),
        ("a: 2001-13-45", "not valid YAML"),
        (b"a: \xff\xfe", "not valid YAML"),
    ],
)
def test_shared_loader_raises_the_callers_error(error: type[PolybagError], text: str | bytes, what: str) -> None:
    """polybag.util.safe_yaml.load is shared (record configs take UsageError): every failure is the
    caller's error type naming the file, whatever that type derives from."""
    with pytest.raises(error, match=what) as e:
        _yaml.load(text, "cfg.yaml", error=error)
    assert "cfg.yaml" in str(e.value)


_scalars = st.one_of(st.integers(-(10**6), 10**6), st.text("abc xyz:-#&*[]{},'\"\n", max_size=8), st.booleans(), st.none())


@st.composite
def _yaml_docs(draw: Any) -> str:
    """YAML text with anchors and aliases (flow style), some of it well formed."""
    anchors: list[str] = []

    def node(depth: int) -> str:
        kind = draw(st.integers(0, 4 if depth < 6 else 1))
        anchor = ""
        if draw(st.integers(0, 4)) == 0:
            anchor = f"&a{len(anchors)} "
        if kind == 0:
            text = anchor + yaml.safe_dump(draw(_scalars), default_flow_style=True).strip().removesuffix("...").strip()
        elif kind == 1 and anchors:
            return "*" + draw(st.sampled_from(anchors))
        elif kind in (1, 2):
            text = anchor + "[" + ", ".join(node(depth + 1) for _ in range(draw(st.integers(0, 4)))) + "]"
        else:
            keys = draw(st.lists(st.text("kxyz", min_size=1, max_size=3), max_size=4, unique=True))
            text = anchor + "{" + ", ".join(f"{k}: {node(depth + 1)}" for k in keys) + "}"
        if anchor:
            anchors.append(anchor[1:-1])
        return text

    text = node(0)
    if draw(st.booleans()):  # damage it
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["", "]", "{", "*a0", "&a0 ", ": ", "\x00", "!!binary ", "<<: "])) + text[i:]
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_yaml_docs(), st.integers(1, 200), st.integers(1, 8))
def test_bounded_load_is_safe_load_or_a_clear_error(text: str, max_nodes: int, max_depth: int) -> None:
    """Within the bounds the result is PyYAML's safe loader's; past them, or on bad YAML, a
    FormatError naming the file (never a YAML exception)."""
    try:
        want: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        ok = True
    except Exception:  # noqa: BLE001 - any failure of the reference
        ok = False
    try:
        got = _yaml.load(text, "t.yaml", max_nodes=max_nodes, max_depth=max_depth)
    except FormatError as e:
        assert e.path == "t.yaml"
        return
    assert ok, "the bounded loader took what PyYAML refuses"
    assert repr(got) == repr(want)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 2000))
def test_damaged_metadata_is_read_or_refused(noise: bytes, at: int) -> None:
    """Any bytes spliced into a real metadata.yaml: a BagInfo or a PolybagError naming the file."""
    info = md.BagInfo(files=[md.FileInfo("b_0.db3")], topics=[md.TopicInfo("/a", STRING)])
    text = md.dump_metadata(info).encode()
    at = min(at, len(text))
    try:
        got = md.parse_metadata(text[:at] + noise + text[at:], "m.yaml")
    except PolybagError as e:
        assert "m.yaml" in str(e)
        return
    for f in got.files:
        assert not os.path.isabs(f.path) and not f.path.startswith("..") and "./" not in f.path


_names = st.text("ab_0./", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(_names, max_size=6), st.lists(st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 5)), max_size=4))
def test_metadata_round_trip_and_paths_normalised(names: list[str], topics: list[tuple[str, int]]) -> None:
    """What polybag writes it reads back; listed paths come back normalised, once each, never outside."""
    info = md.BagInfo(
        files=[md.FileInfo(n) for n in names],
        topics=[md.TopicInfo(n, STRING, message_count=c) for n, c in topics],
        custom_data={"k": "v"},
    )
    try:
        got = md.parse_metadata(md.dump_metadata(info).encode(), "m.yaml")
    except FormatError as e:
        assert "outside the bag directory" in str(e) or "not a file name" in str(e)
        assert any(os.path.normpath(n) in (".", "..") or n.startswith(("/", "../")) or "/../" in n or n.endswith("/..") for n in names)
        return
    want = list(dict.fromkeys(os.path.normpath(n) for n in names))
    assert [f.path for f in got.files] == want
    assert [(t.name, t.message_count) for t in got.topics] == topics
    assert got.custom_data == {"k": "v"}


# --- compression_mode: FILE bombs ------------------------------------------------------------------
def _zstd_bag(bag: Path, head: bytes, total: int, piece: int = 64 * MiB) -> Path:
    """A FILE-compressed bag whose one storage file expands to ``total`` bytes: ``head``, then zeros."""
    bag.mkdir(parents=True)
    c = zstandard.ZstdCompressor(level=1)
    first = c.compress(head + bytes(min(piece, total) - len(head)))
    rest = c.compress(bytes(piece))
    with open(bag / "b_0.db3.zstd", "wb") as f:
        f.write(first)
        for _ in range(max(0, total // piece - 1)):
            f.write(rest)
    _set_meta(
        bag,
        {
            "rosbag2_bagfile_information": {
                "version": 5,
                "storage_identifier": "sqlite3",
                "relative_file_paths": ["b_0.db3.zstd"],
                "compression_format": "zstd",
                "compression_mode": "FILE",
                "message_count": 0,
                "topics_with_message_count": [],
            }
        },
    )
    return bag


@pytest.fixture()
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private TMPDIR (for this process and its children)."""
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setenv("TMPDIR", str(t))
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    return t


def _child(code: str, fsize: int) -> subprocess.CompletedProcess[str]:
    """``code`` in a child Python whose files may not grow past ``fsize`` bytes (a write
    past it fails with EFBIG)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, preexec_fn=limit)


def test_file_bomb_stops_at_the_ratio_bound_and_names_the_input(tmp_path: Path, tmpdir_env: Path) -> None:
    """A 3 GiB expansion from ~100 KB: the copy stops at the ratio bound (lowered here to 16
    times the compressed size, floor 1 MiB; 1024 and 256 MiB by default) with the limit's
    error naming the input; the child's files may not grow 1 MiB past that bound, so a copy
    that went on would fail with a write error instead."""
    bag = _zstd_bag(tmp_path / "bag", b"SQLite format 3\x00", 3 << 30)
    size = (bag / "b_0.db3.zstd").stat().st_size
    assert size < 200_000
    cap = max(MiB, 16 * size)
    r = _child(
        f"""
        from polybag.formats.rosbag2 import storage
        from polybag.cli import main
        storage.STORAGE_RATIO_FLOOR = 1 << 20
        storage.MAX_STORAGE_RATIO = 16
        raise SystemExit(main(["info", {str(bag)!r}]))
        """,
        cap + MiB,
    )
    assert r.returncode == 3, r.stderr
    want = f"{bag / 'b_0.db3.zstd'}: zstd-compressed storage file decompresses to more than {cap} bytes (16 times its compressed size"
    assert want in r.stderr
    assert "File too large" not in r.stderr and str(tmpdir_env) not in r.stderr
    assert list(tmpdir_env.iterdir()) == []  # the copy is gone


def test_file_bomb_default_bounds(tmp_path: Path, tmpdir_env: Path) -> None:
    """With the defaults: at most 256 MiB (the floor) of temporary file for a small input."""
    bag = _zstd_bag(tmp_path / "bag", b"SQLite format 3\x00", 1 << 30, piece=128 * MiB)
    r = _child(
        f"""
        from polybag.cli import main
        raise SystemExit(main(["info", {str(bag)!r}]))
        """,
        storage.STORAGE_RATIO_FLOOR + MiB,
    )
    assert r.returncode == 3, r.stderr
    assert f"decompresses to more than {storage.STORAGE_RATIO_FLOOR} bytes" in r.stderr
    assert "File too large" not in r.stderr
    assert list(tmpdir_env.iterdir()) == []


def test_file_bomb_max_storage_bytes_setting(tmp_path: Path, tmpdir_env: Path) -> None:
    bag = _zstd_bag(tmp_path / "bag", b"SQLite format 3\x00", 64 * MiB)
    with pytest.raises(FormatError, match=r"more than 2097152 bytes \(the max_storage_bytes setting") as e:
        polybag.open(bag, max_storage_bytes="2M")
    assert e.value.path == str(bag / "b_0.db3.zstd")
    assert list(tmpdir_env.iterdir()) == []


def test_file_bomb_cap_from_the_environment(tmp_path: Path, tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line sets the cap with POLYBAG_MAX_STORAGE_BYTES; a real bag under it reads."""
    bag = _zstd_bag(tmp_path / "bag", b"SQLite format 3\x00", 64 * MiB)
    monkeypatch.setenv("POLYBAG_MAX_STORAGE_BYTES", "3M")
    code, _out, err = _cli(["info", str(bag)], capsys)
    assert code == 3 and "more than 3145728 bytes (the max_storage_bytes setting, POLYBAG_MAX_STORAGE_BYTES)" in err
    want = _write_bag(tmp_path / "real", compression="file")
    assert _messages(tmp_path / "real") == want
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.parametrize("bad", [0, -5, "lots", 1.5, True])
def test_a_bad_max_storage_bytes_is_a_usage_error(tmp_path: Path, tmpdir_env: Path, bad: Any) -> None:
    bag = _zstd_bag(tmp_path / "bag", b"SQLite format 3\x00", MiB, piece=MiB)
    with pytest.raises(UsageError, match="max_storage_bytes|expected a size"):
        polybag.open(bag, max_storage_bytes=bad)
    assert list(tmpdir_env.iterdir()) == []


def test_file_that_is_not_a_storage_file_is_refused_before_anything_is_written(
    tmp_path: Path, tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bag = _zstd_bag(tmp_path / "bag", b"\x00" * 16, 1 << 30, piece=128 * MiB)

    def no_temp(*a: Any, **k: Any) -> str:
        raise AssertionError("a temporary folder was made before the content was checked")

    monkeypatch.setattr(tempfile, "mkdtemp", no_temp)
    with pytest.raises(FormatError, match="does not hold an SQLite or MCAP file") as e:
        polybag.open(bag)
    assert e.value.path == str(bag / "b_0.db3.zstd")


def test_file_bomb_stops_before_filling_the_temporary_filesystem(
    tmp_path: Path, tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary filesystem of 300 MiB: the copy stops 256 MiB before it is full."""
    bag = _zstd_bag(tmp_path / "bag", b"SQLite format 3\x00", 128 * MiB)

    class Usage:
        def __init__(self, p: str) -> None:
            used = sum(f.stat().st_size for f in tmpdir_env.rglob("*") if f.is_file())
            self.free = 300 * MiB - used

    monkeypatch.setattr(storage.shutil, "disk_usage", Usage)
    with pytest.raises(FormatError, match="would leave less than 268435456 bytes free in the temporary folder") as e:
        polybag.open(bag, max_storage_bytes="1G")
    assert e.value.path == str(bag / "b_0.db3.zstd") and str(tmpdir_env) in str(e.value)
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.parametrize("head", [b"SQLite format 3\x00", b"\x89MCAP0\r\n"], ids=["sqlite", "mcap"])
def test_errors_in_a_decompressed_file_name_the_input(tmp_path: Path, tmpdir_env: Path, head: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    bag = tmp_path / "bag"
    _zstd_bag(bag, head + os.urandom(5000), 1 << 16, piece=1 << 16)
    code, _out, err = _cli(["info", str(bag)], capsys)
    assert code == 3
    assert f"{bag / 'b_0.db3.zstd'} (decompressed)" in err, err
    assert str(tmpdir_env) not in err and "unexpected" not in err
    assert list(tmpdir_env.iterdir()) == []


def test_a_real_file_compressed_bag_still_reads(tmp_path: Path, tmpdir_env: Path) -> None:
    want = _write_bag(tmp_path / "bag", compression="file")
    assert _messages(tmp_path / "bag") == want
    assert list(tmpdir_env.iterdir()) == []  # closed: the copy is gone


# --- the storage file list -------------------------------------------------------------------------
def test_a_file_listed_twice_is_read_once(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    want = _messages(bag)
    name = _meta(bag)["rosbag2_bagfile_information"]["relative_file_paths"][0]
    (bag / "link.db3").symlink_to(name)
    os.link(bag / name, bag / "hard.db3")
    _list_files(bag, [name, f"./{name}", f"sub/../{name}", "link.db3", "hard.db3"])
    with pytest.warns(polybag.PolybagWarning, match="listed twice"):
        assert _messages(bag) == want
    code, out, _err = _cli(["cat", str(bag)], capsys)
    assert code == 0 and len(out.strip().splitlines()) == len(want)


@pytest.mark.parametrize("listed", ["../outside.db3", "/tmp/x.db3", "..", "."])
def test_listed_paths_that_leave_the_directory_are_refused(bag: Path, listed: str) -> None:
    _list_files(bag, [listed])
    with pytest.raises(FormatError, match="outside the bag directory|not a file name") as e:
        polybag.open(bag)
    assert e.value.path == str(bag / "metadata.yaml")


def test_a_listed_symlink_out_of_the_directory_is_refused(tmp_path: Path, bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    _write_bag(other)
    target = next(other.glob("*.db3"))
    (bag / "x.db3").symlink_to(target)
    _list_files(bag, ["x.db3"])
    with pytest.raises(FormatError, match="links to .*, outside the bag directory") as e:
        polybag.open(bag)
    assert e.value.path == str(bag / "metadata.yaml")
    # recovering (no metadata.yaml): the link is not read either
    (bag / "metadata.yaml").unlink()
    for f in bag.glob("*.db3"):
        if not f.is_symlink():
            f.unlink()
    with polybag.open(bag, recover=True) as r:
        assert sum(1 for _ in r.messages()) == 0
        assert any("outside the bag directory" in e for e in r.recovery_report["errors"])


def test_a_listed_device_or_folder_is_refused(bag: Path) -> None:
    (bag / "d.db3").mkdir()
    _list_files(bag, ["d.db3"])
    with pytest.raises(FormatError, match="not a regular file"):
        polybag.open(bag)
    (bag / "z.db3").symlink_to("/dev/zero")
    _list_files(bag, ["z.db3"])
    with pytest.raises(FormatError, match="outside the bag directory"):
        polybag.open(bag)


def test_unlisted_storage_files_are_reported_not_read(bag: Path, capsys: pytest.CaptureFixture[str]) -> None:
    want = _messages(bag)
    name = _meta(bag)["rosbag2_bagfile_information"]["relative_file_paths"][0]
    shutil.copy(bag / name, bag / "bag_1.db3")
    with pytest.warns(polybag.PolybagWarning, match=r"does not list storage file\(s\) bag_1.db3"):
        assert _messages(bag) == want  # as rosbag2: only the listed files
    code, out, err = _cli(["info", str(bag)], capsys)
    assert code == 0 and "warning:" in err and "bag_1.db3" in err
    code, out, err = _cli(["check", str(bag)], capsys)
    assert code == 1 and "bag_1.db3" in out + err
    # recover reads them
    with polybag.open(bag, recover=True) as r:
        assert sum(1 for _ in r.messages()) == 2 * len(want)


def test_the_number_of_storage_files_is_capped(bag: Path) -> None:
    _list_files(bag, [f"f_{i}.db3" for i in range(md.MAX_STORAGE_FILES + 1)])
    with pytest.raises(FormatError, match=f"lists {md.MAX_STORAGE_FILES + 1} storage files, more than the {md.MAX_STORAGE_FILES}"):
        polybag.open(bag)


def test_the_number_of_storage_files_is_capped_when_recovering(bag: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without metadata.yaml the files found are the list: the same cap (lowered here to 2)."""
    name = _meta(bag)["rosbag2_bagfile_information"]["relative_file_paths"][0]
    for i in range(2):
        shutil.copy(bag / name, bag / f"more_{i}.db3")
    (bag / "metadata.yaml").unlink()
    monkeypatch.setattr(opening, "MAX_STORAGE_FILES", 2)
    with pytest.raises(FormatError, match="3 storage files, more than the 2 polybag opens") as e:
        polybag.open(bag, recover=True)
    assert e.value.path == str(bag)


def _many_files(bag: Path, n: int, shift: bool, storage: str = "sqlite3") -> list[tuple[str, int, bytes]]:
    """A bag of ``n`` copies of one storage file (times shifted per file when ``shift``,
    SQLite only); the messages in log-time order, ties in file order."""
    written = _write_bag(bag, storage=storage)
    name = _meta(bag)["rosbag2_bagfile_information"]["relative_file_paths"][0]
    names = []
    want = []
    for i in range(n):
        nm = f"c_{i}{Path(name).suffix}"
        shutil.copy(bag / name, bag / nm)
        if shift:
            c = sqlite3.connect(bag / nm)
            c.execute("UPDATE messages SET timestamp = timestamp + ?", (i * 10**6,))
            c.commit()
            c.close()
        names.append(nm)
        want += [(t, ts + (i * 10**6 if shift else 0), i, d) for t, ts, d in written]
    (bag / name).unlink()
    _list_files(bag, names)
    want.sort(key=lambda w: (w[1], w[2]))
    return [(t, ts, d) for t, ts, _i, d in want]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
@pytest.mark.parametrize("reverse", [False, True])
def test_many_files_keep_few_open(tmp_path: Path, reverse: bool) -> None:
    n = 3 * opening.MAX_OPEN_STORAGES
    want = _many_files(tmp_path / "bag", n, shift=True)
    base = _fds()
    seen = 0
    got = []
    with polybag.open(tmp_path / "bag") as r:
        after_open = _fds() - base
        for m in r.messages(reverse=reverse):
            got.append((m.topic, m.log_time, bytes(m.data)))
            seen = max(seen, _fds() - base)
    assert got == (want[::-1] if reverse else want)
    # each open storage file holds ~2 descriptors; all n files would hold 2n
    assert after_open <= 2 * opening.MAX_OPEN_STORAGES + 2, after_open
    assert seen <= 2 * opening.MAX_OPEN_STORAGES + 4, seen


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_many_overlapping_files_merge_in_order(tmp_path: Path, storage: str) -> None:
    """Files over the same times (every message tied n ways): log-time order, ties in file order."""
    n = opening.MAX_OPEN_STORAGES + 4
    want = _many_files(tmp_path / "bag", n, shift=False, storage=storage)
    assert _messages(tmp_path / "bag") == want
    with polybag.open(tmp_path / "bag") as r:
        s = r.summary
        assert s.message_count == len(want) // n  # metadata.yaml's count (one file's)
        got = [(m.topic, m.log_time) for m in r.messages(start=1_050, end=1_080, reverse=True)]
    window = [(t, ts) for t, ts, _d in want if 1_050 <= ts < 1_080]
    assert len(window) == 3 * n
    assert got == sorted(window, key=lambda w: -w[1])  # newest first, ties in file order


def test_many_file_compressed_files_keep_few_copies(tmp_path: Path, tmpdir_env: Path) -> None:
    """FILE-compressed splits: a copy is decompressed while its file is open, so the
    temporary folder holds at most MAX_OPEN_STORAGES copies, none after closing."""
    n = 2 * opening.MAX_OPEN_STORAGES + 3
    bag = tmp_path / "bag"
    want = _many_files(bag, n, shift=True)
    info = _meta(bag)
    names = []
    for name in info["rosbag2_bagfile_information"]["relative_file_paths"]:
        (bag / f"{name}.zstd").write_bytes(zstandard.ZstdCompressor().compress((bag / name).read_bytes()))
        (bag / name).unlink()
        names.append(f"{name}.zstd")
    info["rosbag2_bagfile_information"].update(relative_file_paths=names, compression_mode="FILE", compression_format="zstd")
    _set_meta(bag, info)
    most = 0
    got = []
    with polybag.open(bag) as r:
        most = len(list(tmpdir_env.iterdir()))
        for m in r.messages():
            got.append((m.topic, m.log_time, bytes(m.data)))
            most = max(most, len(list(tmpdir_env.iterdir())))
    assert got == want
    assert 0 < most <= opening.MAX_OPEN_STORAGES
    assert list(tmpdir_env.iterdir()) == []


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 50), max_size=8), min_size=2, max_size=12),
    st.lists(st.integers(0, 5), min_size=12, max_size=12),
    st.booleans(),
)
def test_lazy_merge_is_heapq_merge(runs: list[list[int]], slack: list[int], reverse: bool) -> None:
    """The lazy merge gives heapq.merge's order (ties in stream order) for any bound that is
    at or before a stream's first item."""
    runs = [sorted(r, reverse=reverse) for r in runs]
    items = [[(t, i, k) for k, t in enumerate(r)] for i, r in enumerate(runs)]
    def stream(i: int) -> Iterator[tuple[int, int, int]]:
        yield from items[i]

    def bound(i: int) -> int | None:
        if not runs[i]:
            return None if slack[i] == 0 else 10_000 * (-1 if reverse else 1)
        return runs[i][0] + (slack[i] if reverse else -slack[i])

    key = lambda x: x[0]  # noqa: E731
    want = list(heapq.merge(*items, key=key, reverse=reverse))
    got = list(_lazy_merged([stream(i) for i in range(len(runs))], [lambda i=i: bound(i) for i in range(len(runs))], reverse, key))
    assert got == want


def test_errors_of_a_remote_bag_name_the_url(tmp_path: Path, tmpdir_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A remote bag is laid out in a temporary folder: its errors name the URL, never the layout."""
    import functools
    import http.server
    import threading

    _zstd_bag(tmp_path / "site" / "bag", b"SQLite format 3\x00" + os.urandom(5000), 1 << 16, piece=1 << 16)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path / "site")))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/bag/"
        code, _out, err = _cli(["info", url], capsys)
    finally:
        srv.shutdown()
        thread.join()
    assert code == 3
    assert f"error: {url}b_0.db3.zstd" in err, err
    assert str(tmpdir_env) not in err and "unexpected" not in err
    assert list(tmpdir_env.iterdir()) == []


def test_shown_as_names_what_the_user_gave(tmp_path: Path, tmpdir_env: Path) -> None:
    """``shown_as`` (what a remote bag laid out locally is shown as): every error, at
    open and while reading, names it instead of the local folder."""
    bag = tmp_path / "layout" / "bag"
    _zstd_bag(bag, b"SQLite format 3\x00" + os.urandom(5000), 1 << 16, piece=1 << 16)
    with pytest.raises(FormatError) as e:
        polybag.open(bag, shown_as="s3://bucket/run/")
    assert str(e.value).startswith("s3://bucket/run/b_0.db3.zstd (decompressed): ")
    assert str(tmp_path) not in str(e.value)
    good = tmp_path / "good"
    _write_bag(good)
    name = _meta(good)["rosbag2_bagfile_information"]["relative_file_paths"][0]
    c = sqlite3.connect(good / name)
    c.execute("UPDATE messages SET topic_id = 99 WHERE id = 3")  # a message on no declared topic
    c.commit()
    c.close()
    with polybag.open(good, shown_as="s3://bucket/good/") as r, pytest.raises(FormatError) as e:
        list(r.messages())
    assert "s3://bucket/good/" in str(e.value) and str(tmp_path) not in str(e.value)
