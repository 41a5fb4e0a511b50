"""The declared reader interface (``polybag.reader.ReaderProtocol``) and its "not here" answers.

Every registered format's reader satisfies the protocol and answers each optional member
with a value of the declared type; the operations, the command line and ``polybag.dask``
ask those members and never probe a reader or writer with ``getattr``/``hasattr`` or
branch on ``reader.format`` (checked on their source with :mod:`ast`).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybag
from polybag.cli import render
from polybag.formats import registry
from polybag.io.source import MappedSource
from polybag.model import Channel, Message, Summary
from polybag.reader import Reader, ReaderProtocol

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "polybag"
CORPORA = ROOT.parent / "shared" / "corpora"
DEMO = ROOT / "samples" / "demo.mcap"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bag_helpers import build_v11, build_v12  # noqa: E402 - the old-bag builders


# --- one small sample per reader class -------------------------------------------------------
def _bag_v2(tmp: Path) -> Path:
    p = tmp / "small.bag"
    with polybag.Writer(str(p)) as w:
        s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
        ch = w.add_channel("/chatter", "ros1", s)
        for i in range(3):
            text = f"hello {i}".encode()
            w.write(ch, len(text).to_bytes(4, "little") + text, (i + 1) * 10**9)
    return p


def _rosbag2(tmp: Path) -> Path:
    p = tmp / "small_rosbag2"
    with polybag.Writer(str(p), format="rosbag2") as w:
        s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
        ch = w.add_channel("/chatter", "cdr", s)
        for i in range(3):
            text = f"hello {i}".encode() + b"\0"
            w.write(ch, b"\0\1\0\0" + len(text).to_bytes(4, "little") + text, (i + 1) * 10**9)
    return p


def _old_bag(data: bytes, name: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        p = tmp / name
        p.write_bytes(data)
        return p

    return make


def _file(path: Path) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        if not path.exists():
            pytest.skip(f"{path} is not here")
        return path

    return make


SAMPLES: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "mcap": ("mcap", _file(DEMO)),
    "bag-2.0": ("bag", _bag_v2),
    "bag-1.2": ("bag", _old_bag(build_v12(with_index=True), "v12.bag")),
    "bag-text": ("bag", _old_bag(build_v11(b"#ROSRECORD V1.1\n"), "v11.bag")),
    "ulog": ("ulog", _file(CORPORA / "ulog" / "sample.ulg")),
    "rosbag2": ("rosbag2", _rosbag2),
}


def test_every_registered_format_has_a_sample() -> None:
    """A new format is added here too, so that its reader is checked against the protocol."""
    assert set(registry.names()) <= {fmt for fmt, _ in SAMPLES.values()}


@pytest.fixture(params=list(SAMPLES), ids=list(SAMPLES))
def reader(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Reader]:
    fmt, make = SAMPLES[request.param]
    with polybag.open(make(tmp_path)) as r:
        assert r.format == fmt
        yield r


def test_reader_satisfies_the_protocol(reader: Reader) -> None:
    assert isinstance(reader, ReaderProtocol)
    assert isinstance(reader.format, str) and registry.lookup(reader.format) is not None
    assert isinstance(reader.summary, Summary)
    assert isinstance(reader.info_extras(), dict)
    assert isinstance(reader.has_index, bool)
    counts = reader.chunk_message_counts()
    assert counts is None or isinstance(counts, list)


def test_optional_members_answer_with_the_declared_types(reader: Reader) -> None:
    assert reader.native_profile is None or isinstance(reader.native_profile, str)
    report = reader.recovery_report
    assert report is None or (isinstance(report, dict) and set(report) <= {"messages", "bytes_skipped", "errors"})
    problems = reader.definition_problems
    assert isinstance(problems, Sequence) and not isinstance(problems, str)
    assert all(isinstance(p, str) for p in problems)
    spec = reader.record_problems()
    assert isinstance(spec, list) and all(isinstance(p, str) for p in spec)
    assert reader.info_style is None or reader.info_style in render.STYLES
    for text in (render.info_text(reader), render.info_yaml(reader)):
        assert text is None or isinstance(text, str)
    assert isinstance(reader.source_size, int) and reader.source_size >= 0
    if reader.seekable and reader.path is not None and Path(reader.path).is_file():  # (a rosbag2 bag is a directory)
        assert reader.source_size == Path(reader.path).stat().st_size
    assert reader.release_pages() is None
    assert reader.ulogs == (() if reader.ulog is None else (reader.ulog,))
    if reader.ulog is not None:
        from polybag.formats.ulog.reader import UlogData

        assert isinstance(reader.ulog, UlogData)
        assert isinstance(reader.ulog.info, dict) and isinstance(reader.ulog.corruptions, list)
    # the pages given back are mapped again when read: every message is still there
    assert sum(1 for _ in reader.messages()) == reader.summary.message_count


def test_topic_payloads_are_the_messages_or_not_offered(reader: Reader) -> None:
    for topic in sorted({c.topic for c in reader.summary.channels.values()}):
        got = reader.topic_payloads(topic)
        if got is None:
            continue
        times, blob, starts, sizes = (np.asarray(a) for a in got)
        msgs = list(reader.messages(topics=[topic]))
        assert times.tolist() == [m.log_time for m in msgs]
        assert [bytes(blob[s : s + n]) for s, n in zip(starts.tolist(), sizes.tolist())] == [bytes(m.data) for m in msgs]


@pytest.mark.parametrize(
    ("sample", "profile", "has_ulog", "style"),
    [
        ("mcap", None, False, None),
        ("bag-2.0", "ros1", False, "rosbag"),
        ("bag-1.2", "ros1", False, "rosbag"),
        ("ulog", "ros1", True, "ulog"),
    ],
)
def test_what_each_format_offers(sample: str, profile: str | None, has_ulog: bool, style: str | None, tmp_path: Path) -> None:
    """The capabilities the operations rely on: bags and ULogs are ROS 1 whatever they hold,
    only a ULog has ULog data, bags and ULogs have their own ``info`` layout (``rosbag
    info``, with its YAML; ``ulog_info``), drawn by :mod:`polybag.cli.render`."""
    _, make = SAMPLES[sample]
    with polybag.open(make(tmp_path)) as r:
        assert r.native_profile == profile
        assert (r.ulog is not None) is has_ulog
        assert r.ulogs == ((r.ulog,) if has_ulog else ())
        assert r.info_style == style
        assert (render.info_text(r) is not None) is (style is not None)
        assert (render.info_yaml(r) is not None) is (style == "rosbag")
        assert (r.topic_payloads(next(iter(r.summary.channels.values())).topic) is not None) is (r.format != "ulog")


class _Minimal(Reader):
    """A reader that implements only what a format must: every optional member is the base's."""

    format = "minimal"

    def __init__(self) -> None:
        super().__init__(MappedSource(None, b""))
        self._channel = Channel(1, "/x", "raw", None, {})

    @property
    def summary(self) -> Summary:
        return Summary(format="minimal", channels={1: self._channel}, message_counts={1: 1})

    def messages(self, topics: Any = None, start: Any = None, end: Any = None, reverse: bool = False, order: str = "log_time") -> Iterator[Message]:
        yield Message(self._channel, 1, 1, 0, b"ab")


def test_the_base_answers_not_here() -> None:
    r = _Minimal()
    assert isinstance(r, ReaderProtocol)
    assert r.native_profile is None and r.recovery_report is None and r.ulog is None and r.ulogs == ()
    assert tuple(r.definition_problems) == () and r.record_problems() == []
    assert r.topic_payloads("/x") is None
    assert r.info_style is None and render.info_text(r) is None and render.info_yaml(r) is None
    assert r.source_size == 0 and r.release_pages() is None
    assert list(r.attachments()) == [] and list(r.metadata()) == [] and r.info_extras() == {}


def test_writer_format_extras(tmp_path: Path) -> None:
    """``add_format_extras``: the ULog writer takes its info/parameter records back, every
    other writer answers False (the caller writes them as metadata)."""
    for fmt in registry.writable():
        path = tmp_path / f"out{registry.get(fmt).extension}"
        w = polybag.Writer(str(path), format=fmt)
        try:
            took = w.add_format_extras("ulog_params", {"P": "1"})
            assert took is (fmt == "ulog")
            assert w.add_format_extras("other", {"a": "b"}) is False
        finally:
            w.abort(discard=True)


def test_ulog_writer_takes_info_and_params_back(tmp_path: Path) -> None:
    src = CORPORA / "ulog" / "sample.ulg"
    if not src.exists():
        pytest.skip(f"{src} is not here")
    mid = tmp_path / "mid.mcap"
    back = tmp_path / "back.ulg"
    from polybag.ops import convert

    convert(str(src), str(mid))
    convert(str(mid), str(back))
    with polybag.open(src) as a, polybag.open(back) as b:
        assert a.ulog is not None and b.ulog is not None
        assert b.ulog.params == a.ulog.params
        assert b.ulog.info.get("sys_name") == a.ulog.info.get("sys_name")


# --- no probing in the operations, the command line and dask ----------------------------------
def _sources() -> list[Path]:
    return sorted([*(PKG / "ops").glob("*.py"), *(PKG / "cli").glob("*.py"), *(PKG / "dask").glob("*.py")])


# getattr/hasattr on things that are not readers or writers: (module, first argument) -> why
ALLOWED: dict[tuple[str, str], str] = {
    ("cli/__init__.py", "mod"): "a subcommand module's optional register()",
    ("cli/__init__.py", "args"): "argparse namespace: options some subcommands do not define",
    ("cli/__init__.py", "signal"): "SIGXFSZ exists on POSIX only",
    ("cli/cat.py", "args"): "argparse namespace: options some subcommands do not define",
    ("cli/batch.py", "args"): "argparse namespace: options some subcommands do not define",
    ("cli/text.py", "o"): "an object turned into JSON (numpy, slots, dataclasses; cat's decoded messages too)",
    ("cli/_ops.py", "result"): "an operation's result: only some have warnings",
    ("cli/_ops.py", "args"): "argparse namespace: options some subcommands do not define",
    ("cli/info.py", "args"): "argparse namespace: options some subcommands do not define",
    ("cli/compress.py", "args"): "argparse namespace: compress and decompress share the code",
    ("ops/plot.py", "obj"): "a field path walked through a decoded message",
    ("ops/export.py", "o"): "a decoded message object (to_dict when the codec gives one)",
    ("ops/export.py", "sink"): "the parquet sink notes late columns, the CSV sink does not",
    ("ops/inputs.py", "target"): "an input stream's name, when it has one",
}

# never looked up by name: the members of the reader and writer interfaces and what formats offer
NEVER_PROBED = {
    name for name in dir(ReaderProtocol) if not name.startswith("__")
} | set(ReaderProtocol.__annotations__) | {
    "add_format_extras", "add_info", "add_param", "add_default_param", "copy_extras", "size",
    "syncs", "default_params", "corruptions", "info", "params", "version",
}  # fmt: skip


def _format_name(node: ast.expr) -> bool:
    """A string constant (or a tuple/list/set of them) naming a registered format."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return registry.lookup(node.value) is not None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_format_name(e) for e in node.elts)
    return False


def _is_format_attr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "format"


def probes(tree: ast.AST, rel: str) -> list[str]:
    """What ``rel``'s source does that the interface forbids (one line each)."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if not node.args:
                continue
            first = ast.unparse(node.args[0])
            attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            where = f"{rel}:{node.lineno}: {ast.unparse(node)}"
            if (rel, first) not in ALLOWED:
                out.append(f"{where}: {node.func.id} on {first} (not in ALLOWED)")
            elif attr in NEVER_PROBED:
                out.append(f"{where}: {attr!r} is a declared member: ask it, do not probe")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_format_attr(s) for s in sides) and any(_format_name(s) for s in sides):
                out.append(f"{rel}:{node.lineno}: {ast.unparse(node)}: a branch on a format name")
    return out


def test_the_checker_sees_probes() -> None:
    code = (
        "if reader.format == 'ulog' and getattr(reader, 'ulog', None) is not None: pass\n"
        "x = r.format in ('bag', 'ulog')\n"
        "y = hasattr(writer, 'add_param')\n"
        "z = getattr(args, 'recovery_report', None)\n"
        "ok = fmt == 'mcap' or args.format == 'csv'\n"
    )
    found = probes(ast.parse(code), "cli/info.py")
    assert len(found) == 5, found
    assert sum("format name" in f for f in found) == 2


def test_allowed_uses_still_exist() -> None:
    """An allowance that is no longer needed is taken off the list."""
    seen = set()
    for path in _sources():
        rel = path.relative_to(PKG).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
                if node.args:
                    seen.add((rel, ast.unparse(node.args[0])))
    assert set(ALLOWED) <= seen, sorted(set(ALLOWED) - seen)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.relative_to(PKG).as_posix())
def test_no_probing_and_no_format_branches(path: Path) -> None:
    rel = path.relative_to(PKG).as_posix()
    found = probes(ast.parse(path.read_text(encoding="utf-8"), str(path)), rel)
    assert not found, "\n".join(found)


# --- no format name compared outside formats/ ------------------------------------------------
#: what names a format: every registered name and alias, and a rosbag2 storage's
FORMAT_NAMES = frozenset(a.lower() for s in registry.formats() for a in (s.name, *s.aliases)) | {"sqlite3"}

# format names compared or used as dict keys outside formats/: (module, code) -> why; each a
# shared vocabulary that happens to spell a format's name, never a branch on the format
NOT_FORMATS: dict[tuple[str, str], str] = {
    ("cli/info.py", "_RECORD_STYLES"): "keyed by info style (reader.info_style), which formats answer",
    ("cli/render.py", "STYLES"): "keyed by info style (reader.info_style), which formats answer",
    ("cli/render.py", "COMMAND_STYLES"): "keyed by info style (reader.info_style), which formats answer",
}

# left for the helpers of issue 29 that own these packages: (module, code) -> why; only shrinks
RECORD_LEFT: dict[tuple[str, str], str] = {}
BRIDGES_LEFT: dict[tuple[str, str], str] = {}


def _names_a_format(node: ast.expr | None) -> bool:
    """A string constant (or a tuple/list/set of them) naming a format (:data:`FORMAT_NAMES`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower() in FORMAT_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_format(e) for e in node.elts)
    return False


def _not_a_format(node: ast.expr) -> bool:
    """An ``*encoding`` (``ch.message_encoding == "ulog"``: ULog is an encoding too) or an
    ``info_style`` (``"rosbag"``: a style) on the other side: not a format."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.endswith("encoding") or name == "info_style"


def _tests_for_ulog(node: ast.Compare) -> bool:
    """``x.ulog is None`` or ``x.ulog is not None``: a test for the format by another name
    (iterate ``reader.ulogs``, :attr:`polybag.reader.Reader.ulogs`, instead)."""
    sides = [node.left, *node.comparators]
    return (
        all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
        and any(isinstance(s, ast.Attribute) and s.attr == "ulog" for s in sides)
        and any(isinstance(s, ast.Constant) and s.value is None for s in sides)
    )


def _keyed_by_format(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and _names_a_format(k) for k in node.keys)


def format_names_used(tree: ast.AST, rel: str) -> dict[tuple[str, str], str]:
    """(module, code) -> ``module:line: code``: every comparison with a format name (==, !=,
    in, not in...), every ``x.ulog is (not) None`` test, and every dict literal keyed by a
    format name (a table assigned to a name: by its name), in ``rel``'s source."""
    out: dict[tuple[str, str], str] = {}
    tables: set[int] = set()  # the dict literals assigned to a name, listed by the name
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _keyed_by_format(node.value):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name):
                tables.add(id(node.value))
                out[(rel, target.id)] = f"{rel}:{node.lineno}: {target.id} = {{...}}"
    for node in ast.walk(tree):
        code = None
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_a_format(s) for s in sides) and not any(_not_a_format(s) for s in sides):
                code = ast.unparse(node)
            elif _tests_for_ulog(node):
                code = ast.unparse(node)
        elif _keyed_by_format(node) and id(node) not in tables:
            code = ast.unparse(node)
        if code is not None:
            out.setdefault((rel, code), f"{rel}:{getattr(node, 'lineno', 0)}: {code}")
    return out


def _outside_formats() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "formats")


def _all_format_names_used() -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for path in _outside_formats():
        rel = path.relative_to(PKG).as_posix()
        found.update(format_names_used(ast.parse(path.read_text(encoding="utf-8"), str(path)), rel))
    return found


def test_the_checker_sees_format_names() -> None:
    code = (
        "if fmt == 'mcap': pass\n"
        "x = kept in ('sqlite3', 'other')\n"
        "y = name not in ['ULG']\n"
        "SIZES = {'bag': 1, 'x': 2}\n"
        "f({'rosbag2': 3})\n"
        "ok = ch.message_encoding == 'ulog' or reader.info_style == 'rosbag' or fmt == 'csv'\n"
        "keys = {('ulog', 'ulog'): 1}\n"
        "if reader.ulog is not None or self.ulog is None: pass\n"
        "fine = [u.corruptions for u in reader.ulogs] or ulog is None or reader.ulog == other\n"
    )
    found = format_names_used(ast.parse(code), "ops/x.py")
    assert sorted(found) == sorted(
        [
            ("ops/x.py", "fmt == 'mcap'"),
            ("ops/x.py", "kept in ('sqlite3', 'other')"),
            ("ops/x.py", "name not in ['ULG']"),
            ("ops/x.py", "SIZES"),
            ("ops/x.py", "{'rosbag2': 3}"),
            ("ops/x.py", "reader.ulog is not None"),
            ("ops/x.py", "self.ulog is None"),
        ]
    ), found


def test_no_format_name_compared_outside_formats() -> None:
    """What a format can do is the registry's (:class:`~polybag.formats.registry.FormatSpec`)
    or its reader's and writer's answer: outside ``formats/`` no code compares a format name,
    tests ``x.ulog is None`` (it iterates ``reader.ulogs``) or keys a table by a format name,
    except the named allowances."""
    allowed = {**NOT_FORMATS, **RECORD_LEFT, **BRIDGES_LEFT}
    assert all(k[0].startswith("record/") for k in RECORD_LEFT)
    assert all(k[0].startswith("bridges/") for k in BRIDGES_LEFT)
    found = _all_format_names_used()
    bad = [where for key, where in sorted(found.items()) if key not in allowed]
    assert not bad, "\n".join(bad)


def test_format_name_allowances_still_needed() -> None:
    """An allowance that is no longer needed is taken off its list."""
    allowed = {**NOT_FORMATS, **RECORD_LEFT, **BRIDGES_LEFT}
    gone = sorted(set(allowed) - set(_all_format_names_used()))
    assert not gone, gone
