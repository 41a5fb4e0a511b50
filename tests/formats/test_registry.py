"""The format registry (issue 15): one list of formats that everything asks.

* Each registered format's opener and writer load, its magic bytes sniff to it, its
  extensions name it, its aliases resolve.
* ``polybag.open``, ``polybag.Writer``, the CLI's ``--format`` choices, ``play``'s file
  arguments, ``compress`` and ``dask`` follow the registry: a format registered in a test
  (a directory format with a path probe, like a ROS 2 bag) is opened by ``polybag.open`` and
  sniffed by ``dask`` without touching anything else.
* No module outside the registry and the format packages spells a format's magic bytes or
  keeps its own extension list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polybag
from polybag.cli import main
from polybag.errors import UnsupportedError
from polybag.formats import registry
from polybag.io.source import MappedSource
from polybag.model import Channel, Message, Schema, Summary
from polybag.reader import Reader

SRC = Path(__file__).resolve().parents[2] / "src" / "polybag"


def test_every_format_is_complete() -> None:
    assert registry.names() == ["mcap", "bag", "ulog", "rosbag2"]
    for spec in registry.formats():
        assert callable(spec.load_opener())
        cls = spec.load_writer()
        assert issubclass(cls, polybag.Writer)
        # a directory format (rosbag2) is found by its probe, not by an extension
        assert (spec.extensions or spec.probe is not None) and all(e.startswith(".") for e in spec.extensions)
        assert spec.default_compression in spec.compressions
        for m in spec.magics:
            assert registry.sniff(m + b"rest") == spec.name
        for e in spec.extensions:
            assert registry.format_for_path("x" + e) == spec.name
            assert registry.format_for_path("x" + e + ".active") == spec.name
        for a in spec.aliases:
            assert registry.get(a) is spec and registry.get(a.upper()) is spec


def test_lookups_and_their_errors() -> None:
    assert registry.sniff(b"nothing known") is None
    assert registry.by_extension("a/b.BAG.active") == "bag"
    assert registry.by_extension("a/b.bag", headless=True) == "bag"
    assert registry.by_extension("a/b.mcap", headless=True) is None  # MCAP always has magic
    with pytest.raises(UnsupportedError, match=r"unknown format 'xyz' \(known: mcap, bag, ulog, rosbag2\)"):
        registry.get("xyz")
    with pytest.raises(UnsupportedError, match="cannot tell the format from the extension '.txt'"):
        registry.format_for_path("out.txt")
    with pytest.raises(UnsupportedError, match="no writer for format 'xyz'"):
        registry.writer_spec("xyz")
    assert registry.get("mcap").chunk_compression("BZ2") == "zstd"
    with pytest.raises(UnsupportedError, match="bag chunks can be none, bz2, lz4, not zstd"):
        registry.get("bag").chunk_compression("zstd")
    assert registry.file_extensions() == (".mcap", ".bag", ".ulg", ".ulog", ".active")


def test_writer_and_ops_follow_the_registry(tmp_path: Path) -> None:
    from polybag.ops.outputs import ext_for, target_format

    for spec in registry.formats():
        w = polybag.Writer(str(tmp_path / f"a{spec.extension}"), format=None if spec.extensions else spec.name)
        assert type(w) is spec.load_writer()
        w.abort(discard=True)
        assert ext_for(spec.name) == spec.extension
        assert target_format("whatever", spec.name) == spec.name
    assert target_format("x", "ULG") == "ulog"  # aliases, any case
    with pytest.raises(UnsupportedError, match="no writer for format"):
        polybag.Writer(str(tmp_path / "a.mcap"), format="nope")


def test_cli_format_choices_are_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    from polybag.cli.info import FORMAT_CHOICES

    assert list(FORMAT_CHOICES) == registry.names()
    with pytest.raises(SystemExit):
        main(["info", "--format", "nope", "x"])
    err = capsys.readouterr().err
    assert "choose from" in err and all(n in err for n in registry.names())


# --- a format added in one place ---------------------------------------------------------------
class _DirReader(Reader):
    """A toy directory format: every ``*.txt`` file in the directory is one message."""

    format = "toydir"

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(MappedSource(path, b""), path)
        self.options = options
        self._files = sorted(Path(path).glob("*.txt"))
        schema = Schema(1, "toy/Text", "", b"")
        self._channel = Channel(1, "/text", "toy", schema, {})

    @property
    def summary(self) -> Summary:
        return Summary(
            format="toydir",
            channels={1: self._channel},
            schemas={1: self._channel.schema} if self._channel.schema else {},
            message_counts={1: len(self._files)},
        )

    def messages(self, topics: Any = None, start: Any = None, end: Any = None, **kw: Any) -> Iterator[Message]:
        for i, f in enumerate(self._files):
            yield Message(self._channel, i, i, i, f.read_bytes())


def _probe(path: str) -> bool:
    p = Path(path)
    return p.is_dir() and (p / "toy.yaml").is_file()


@pytest.fixture
def toydir() -> Iterator[registry.FormatSpec]:
    spec = registry.register(
        registry.FormatSpec(
            name="toydir",
            magics=(),
            extensions=(),
            opener="polybag.formats.bag.reader:open_bag",  # unused: opened by path
            probe=_probe,
            open_path=f"{__name__}:_DirReader",
        )
    )
    try:
        yield spec
    finally:
        registry._FORMATS.pop("toydir", None)
        registry._ALIASES.pop("toydir", None)


def test_a_directory_format_is_one_registry_entry(toydir: registry.FormatSpec, tmp_path: Path) -> None:
    d = tmp_path / "run_0"
    d.mkdir()
    (d / "toy.yaml").write_text("x: 1\n")
    for i in range(3):
        (d / f"{i}.txt").write_text(f"m{i}")
    with polybag.open(d, some_option=5) as r:
        assert r.format == "toydir" and r.options == {"some_option": 5}
        assert [bytes(m.data) for m in r.messages()] == [b"m0", b"m1", b"m2"]
        assert r.summary.message_counts == {1: 3}
    from polybag.dask import _sniff_path

    assert _sniff_path(str(d)) == "toydir"
    assert registry.sniff_path(str(d)) == "toydir"
    # a directory that is no format's is still a clear error
    other = tmp_path / "plain"
    other.mkdir()
    with pytest.raises(polybag.PolybagError, match="directory"):
        polybag.open(other)


# --- nobody else keeps a list -------------------------------------------------------------------
def test_no_module_outside_the_registry_lists_formats() -> None:
    """The magic bytes and the extension list appear only in the registry and in the format
    packages themselves (which write them)."""
    magic = re.compile(r"\\x89MCAP0|ULog\\x01|#ROSBAG V|#ROSRECORD V")
    ext_list = re.compile(r"""["']\.ulg["'].*["']\.mcap["']|["']\.mcap["'].*["']\.ulg["']|["']\.bag["'].*["']\.mcap["']""")
    offenders = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel == "formats/registry.py" or rel.startswith(("formats/mcap/", "formats/bag/", "formats/ulog/")):
            continue
        text = path.read_text()
        for i, line in enumerate(text.splitlines(), 1):
            if magic.search(line) or ext_list.search(line):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
