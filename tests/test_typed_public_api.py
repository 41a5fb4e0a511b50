"""The public API is typed and checked: ``mypy --strict`` passes on the public modules
(the package root, ``model``, ``errors``, ``selection``, ``reader``, ``writer``, and the
``codecs``, ``ops``, ``dask`` and ``sensors`` packages' entry points), and a caller's mistakes are caught
(``order="bogus"``), while its right uses type-check (a decoded message's fields, a topic's
payloads, a recovery report).  The writer factory ``polybag.open_writer`` types a literal
``format=`` as that format's writer class (``McapWriter``, ``UlogWriter``...) with that
format's options, so ``compression=3`` or an MCAP writer with ``bz2`` chunks is an error.

mypy runs in a subprocess (it is in the ``test`` extra); the same check by hand::

    .venv/bin/python -m mypy --strict --follow-imports=silent \\
        src/polybag/__init__.py src/polybag/model.py src/polybag/errors.py src/polybag/selection.py \\
        src/polybag/reader.py src/polybag/writer.py src/polybag/codecs/__init__.py \\
        src/polybag/ops/__init__.py src/polybag/dask/__init__.py src/polybag/sensors/__init__.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

SRC = Path(__file__).resolve().parent.parent / "src"
PUBLIC = [
    SRC / "polybag" / name
    for name in (
        "__init__.py", "model.py", "errors.py", "selection.py", "reader.py", "writer.py",
        "codecs/__init__.py", "ops/__init__.py", "dask/__init__.py", "sensors/__init__.py",
    )
]  # fmt: skip

# a caller of the typed API: every line type-checks but the one marked WRONG
CALLER = '''\
from __future__ import annotations

from typing import Any

from polybag.model import Message, RecoveryReport, TopicPayloads
from polybag.reader import Reader
from polybag.selection import MessageOrder, TopicSelector, topic_filter


def use(r: Reader, topics: TopicSelector, order: MessageOrder) -> int:
    n = 0
    for item in r.decoded_messages(topics, order=order):
        pair: tuple[Message, Any] = item
        message: Message = pair[0]
        n += message.log_time
    got: TopicPayloads | None = r.topic_payloads("/a")
    if got is not None:
        n += len(got.log_times) + len(got.blob) + len(got.starts) + len(got.sizes)
    report: RecoveryReport | None = r.recovery_report
    if report is not None:
        n += report["messages"] + report["bytes_skipped"] + len(report["errors"])
    if r.ulog is not None:
        n += r.ulog.version + len(r.ulog.corruptions)
    ids = topic_filter(topics, r.summary.channels.values())
    for _ in r.messages(order="file"):
        n += 1 if ids is None else len(ids)
    for _ in r.messages(order="bogus"):  # WRONG
        n += 1
    return n
'''

# a caller of the typed writer factory: `polybag.open_writer` with a literal `format=` is that
# format's writer class with that format's options; every line type-checks but those marked WRONG
WRITER_CALLER = '''\
from __future__ import annotations

import polybag
from polybag.formats.bag.writer import BagWriter
from polybag.formats.mcap.writer import McapWriter
from polybag.formats.rosbag2.writer import Rosbag2Writer
from polybag.formats.ulog.writer import UlogWriter


def use(fmt: str, compression: str) -> list[polybag.Writer]:
    mcap: McapWriter = polybag.open_writer("x.mcap", format="mcap", compression="zstd", chunk_size=1 << 20)
    ulog: UlogWriter = polybag.open_writer("x.ulg", format="ulg", spool_size=1 << 20)
    bag: BagWriter = polybag.open_writer("x.bag", format="rosbag", compression="bz2")
    bag2: Rosbag2Writer = polybag.open_writer("out", format="rosbag2", storage="mcap", compression_mode="message")
    reveal_type(polybag.open_writer("x.mcap", format="mcap"))
    reveal_type(polybag.open_writer("x.ulg", format="ulog"))
    reveal_type(McapWriter("x.mcap", compression="zstd"))
    reveal_type(polybag.Writer("x.mcap", compression="zstd"))
    any_format: polybag.Writer = polybag.open_writer("x.mcap", format=fmt, compression=compression)
    by_extension: polybag.Writer = polybag.open_writer("x.mcap")
    polybag.open_writer("x.mcap", format="mcap", compression=3)  # WRONG
    no_bz2: McapWriter = polybag.open_writer("x.mcap", format="mcap", compression="bz2")  # WRONG
    no_compression: UlogWriter = polybag.open_writer("x.ulg", format="ulog", compression="zstd")  # WRONG
    return [mcap, ulog, bag, bag2, any_format, by_extension, no_bz2, no_compression]
'''


def _wrong_lines(text: str) -> list[str]:
    return [str(n) for n, line in enumerate(text.splitlines(), 1) if line.endswith("# WRONG")]


def _mypy(*paths: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
            "--cache-dir", str(cache), "--python-version", f"{sys.version_info[0]}.{sys.version_info[1]}",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        cwd=SRC.parent,
        check=False,
    )  # fmt: skip


def test_public_modules_pass_mypy_strict(tmp_path: Path) -> None:
    caller = tmp_path / "caller.py"
    caller.write_text(CALLER, encoding="utf-8")
    writer_caller = tmp_path / "writer_caller.py"
    writer_caller.write_text(WRITER_CALLER, encoding="utf-8")
    got = _mypy(*PUBLIC, caller, writer_caller, cache=tmp_path / "cache")
    lines = got.stdout.splitlines()
    errors = [line for line in lines if ": error:" in line]
    # the public modules: no error at all
    assert not [e for e in errors if not e.startswith((str(caller), str(writer_caller)))], got.stdout + got.stderr
    # the caller: one error, on the line that passes an order no reader knows
    reader_errors = [e for e in errors if e.startswith(f"{caller}:")]
    assert [e.split(":")[1] for e in reader_errors] == _wrong_lines(CALLER), got.stdout + got.stderr
    assert '"order"' in reader_errors[0] and "Literal" in reader_errors[0], errors
    # the writer caller: a literal format is its writer class, and only the wrong options are
    # errors (an int compression; a compression MCAP has not, which is no `McapWriter`; a
    # compression for ULog, which has none)
    writer_errors = [e for e in errors if e.startswith(f"{writer_caller}:")]
    assert [e.split(":")[1] for e in writer_errors] == _wrong_lines(WRITER_CALLER), got.stdout + got.stderr
    revealed = [line.split("Revealed type is ")[1] for line in lines if "Revealed type is" in line]
    assert revealed == [
        '"polybag.formats.mcap.writer.McapWriter"',
        '"polybag.formats.ulog.writer.UlogWriter"',
        # a format's writer class constructs itself; `polybag.Writer(...)` (the factory through
        # the class, see `polybag.writer.WriterFactory`) types as the base: the format's class
        # is the package root's `open_writer`'s to name (`polybag.writer` sits below the formats)
        '"polybag.formats.mcap.writer.McapWriter"',
        '"polybag.writer.Writer"',
    ], got.stdout


def test_open_writer_is_the_writer_factory() -> None:
    """``polybag.open_writer`` is :func:`polybag.writer.open_writer` itself (its overloads
    exist only for the type checker), what ``polybag.Writer(...)`` calls."""
    import polybag
    import polybag.writer

    assert polybag.open_writer is polybag.writer.open_writer
    assert "open_writer" in polybag.__all__


def test_writer_options_are_the_writers_keywords() -> None:
    """Each format's options (what ``polybag.open_writer`` types them as) are its writer's
    keyword arguments, and the output options (``storage_options``, ``progress``: a URL's)."""
    import inspect

    from polybag.formats.bag.writer import BagWriter
    from polybag.formats.mcap.writer import McapWriter
    from polybag.formats.rosbag2.writer import Rosbag2Writer
    from polybag.formats.ulog.writer import UlogWriter
    from polybag.writer import (
        BagOptions,
        McapOptions,
        OutputOptions,
        Rosbag2Options,
        UlogOptions,
        WriterOptions,
    )

    output = set(OutputOptions.__annotations__) - {"overwrite"}
    every: set[str] = set()
    for options, cls in [
        (McapOptions, McapWriter), (BagOptions, BagWriter), (UlogOptions, UlogWriter), (Rosbag2Options, Rosbag2Writer)
    ]:  # fmt: skip
        keywords = {
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "format"
        }
        assert set(options.__annotations__) - output == keywords, cls.__name__
        every |= keywords
    assert set(WriterOptions.__annotations__) - output == every


def test_open_writer_overloads_name_every_writable_format() -> None:
    """The package root's ``open_writer`` overloads (read with :mod:`ast`: they exist only
    for the type checker) name every writable format of the registry with all its aliases,
    each format once."""
    import ast

    from polybag.formats import registry

    tree = ast.parse((SRC / "polybag" / "__init__.py").read_text(encoding="utf-8"))
    typed: list[set[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "open_writer":
            fmt = next((a for a in node.args.kwonlyargs if a.arg == "format"), None)
            annotation = fmt.annotation if fmt is not None else None
            if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "Literal":
                typed.append({ast.literal_eval(e) for e in ast.walk(annotation.slice) if isinstance(e, ast.Constant)})
    specs = [s for s in registry.formats() if s.writer is not None]
    assert sorted(map(sorted, typed)) == sorted(sorted({s.name, *s.aliases}) for s in specs)
