"""Text from a file is never printed raw to a terminal (BUG-A).

A topic, type, callerid, attachment or metadata name, a ULog info value or logged string
decides what the commands print: every command that prints them writes control characters
(escape sequences, BEL, C1 controls, a carriage return) as backslash escapes, so the output
holds no byte below 0x20 but line breaks and tabs and none in 0x7f-0x9f, and the name is still
recognisable in its escaped form.  ``export`` never makes a hidden table file from a topic
name, and an output that cannot be created is named as the user gave it, not as its
temporary ``NAME.active``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import polybag
import ulog_helpers as U
from polybag.cli import main
from polybag.ops.export import export, table_name

EVIL = "\x1b[2J\x1b]0;owned\x07\x9b31m\r\x7f"
ESCAPED = "\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\x0d\\x7f"
TOPIC = "/evil" + EVIL + "red"
TYPE = "pkg/Evil" + EVIL + "Type"
BAD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> None:
    hit = BAD.search(text)
    assert hit is None, f"raw control character {hit.group()!r} in {text!r}"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("hostile-names")
    mcap = str(d / "evil.mcap")
    with polybag.Writer(mcap) as w:
        s = w.add_schema(TYPE, "jsonschema", b'{"type": "object"}')
        c = w.add_channel(TOPIC, "json", s, {"k" + EVIL: "v" + EVIL})
        c2 = w.add_channel("/../..hidden" + EVIL, "json", s, {})
        for i in range(3):
            w.write(c, b'{"a": 1}', log_time=1_000_000_000 + i)
            w.write(c2, b'{"a": 2}', log_time=1_000_000_000 + i)
        w.add_metadata("meta" + EVIL, {"key" + EVIL: "value" + EVIL})
        w.add_attachment("att" + EVIL + ".txt", "text/" + EVIL, b"hi", 1, 1)
    bag = str(d / "evil.bag")
    with polybag.Writer(bag) as w:
        s = w.add_schema(TYPE.replace("\x9b", ""), "ros1msg", b"int32 x\n")
        c = w.add_channel(TOPIC, "ros1", s, {"callerid": "/node" + EVIL})
        for i in range(3):
            w.write(c, b"\x01\x00\x00\x00", log_time=1_000_000_000 + i)
    ulog = str(d / "evil.ulg")
    parts = [U.header(), U.flags(), U.fmt(U.POS_FMT), U.info_str("sys_name", "PX4" + EVIL)]
    parts += [U.multi("boot", "b" + EVIL, False), U.param("P_INT", 3), U.sub(0, 0, "pos")]
    parts += [U.data(0, U.pos_payload(1_001_000 + i, i)) for i in range(3)]
    parts += [U.log(ord("6"), 1_001_500, "hi" + EVIL)]
    Path(ulog).write_bytes(b"".join(parts))
    return {"mcap": mcap, "bag": bag, "ulog": ulog, "dir": str(d)}


CASES = [
    ("mcap", ["list", "channels", "{mcap}"], True),
    ("mcap", ["list", "schemas", "{mcap}"], True),
    ("mcap", ["list", "attachments", "{mcap}"], True),
    ("mcap", ["list", "metadata", "{mcap}"], True),
    ("mcap", ["info", "{mcap}"], True),
    ("mcap", ["info", "-v", "{mcap}"], True),
    ("mcap", ["info", "-y", "{mcap}"], True),
    ("mcap", ["info", "-k", "topics", "{mcap}"], True),
    ("mcap", ["info", "{mcap}", "{mcap}"], True),
    ("mcap", ["cat", "{mcap}"], True),
    ("mcap", ["cat", "{mcap}", "--topics", "/nope"], True),
    ("mcap", ["du", "{mcap}"], True),
    ("mcap", ["check", "{mcap}"], False),
    ("bag", ["info", "{bag}"], True),
    ("bag", ["info", "-y", "{bag}"], True),
    ("bag", ["list", "channels", "{bag}"], True),
    ("bag", ["cat", "{bag}"], True),
    ("ulog", ["info", "{ulog}"], True),
    ("ulog", ["ulog", "info", "{ulog}"], True),
    ("ulog", ["ulog", "messages", "{ulog}"], True),
    ("ulog", ["ulog", "params", "{ulog}"], False),
    ("ulog", ["ulog", "info", "-m", "boot", "{ulog}"], True),
]


@pytest.mark.parametrize(("kind", "argv", "named"), CASES, ids=[" ".join(a[:3]) for _, a, _ in CASES])
def test_file_text_is_printed_escaped(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], kind: str, argv: list[str], named: bool
) -> None:
    main([a.format(**files) for a in argv])
    out, err = capsys.readouterr()
    _clean(out)
    _clean(err)
    if named:
        assert ESCAPED in out + err or ESCAPED.replace("\\x9b", "") in out + err, out + err


def test_export_report_lines_are_escaped_and_tables_visible(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "tables"
    assert main(["export", files["mcap"], "-o", str(out_dir)]) == 0
    out, err = capsys.readouterr()
    _clean(out)
    _clean(err)
    assert f"/evil{ESCAPED}red -> " in out
    names = sorted(p.name for p in out_dir.iterdir())
    assert len(names) == 2 and not any(n.startswith(".") for n in names), names


@pytest.mark.parametrize(
    "topic",
    ["/../..evil", "/.hidden", "/..", "/.", ".", "..", "/./../.x", "/...", "/.a/.b", "/\x1b[2J", "/" + "." * 300, "/" + "a" * 300, "/." + "\u00e9" * 400],
)
def test_table_names_are_never_hidden(topic: str) -> None:
    name = table_name(topic)
    assert name and not name.startswith(".") and "/" not in name and name not in (".", ".."), name
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name) and len(name) <= 180, name


def test_long_table_names_stay_distinct() -> None:
    assert table_name("/" + "a" * 300 + "x") != table_name("/" + "a" * 300 + "y")


def test_export_of_hostile_topics_makes_no_hidden_file(tmp_path: Path) -> None:
    src = str(tmp_path / "t.mcap")
    topics = ["/../..evil", "/.hidden", "/..", "/.", "/./../.x", "/" + "a" * 300, "/" + "a" * 299 + "b"]
    with polybag.Writer(src) as w:
        for t in topics:
            c = w.add_channel(t, "json", None, {})
            w.write(c, b'{"a": 1}', log_time=1)
    res = export(src, str(tmp_path / "out"))
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(names) == len(topics) == len(res.tables), names
    assert not any(n.startswith(".") for n in names), names


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc (where no file can be created, even by root)")
def test_an_uncreatable_output_is_named_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = "/proc/polybag-robot.mcap"
    src = tmp_path / "in.mcap"
    with polybag.Writer(str(src)) as w:
        c = w.add_channel("/a", "json", None, {})
        w.write(c, b'{"a": 1}', log_time=1)
    assert main(["convert", str(src), out]) != 0
    err = capsys.readouterr().err
    assert f"{out}:" in err and ".active" not in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_temporary_names_are_not_in_output_errors() -> None:
    from polybag.io.output_files import AtomicFile, write_atomically

    for make in (lambda p: AtomicFile(p), lambda p: write_atomically(p, b"x")):
        with pytest.raises(OSError) as e:
            make("/proc/polybag-out.csv")
        assert e.value.filename == "/proc/polybag-out.csv" and e.value.filename2 is None, e.value
        assert ".active" not in str(e.value) and ".tmp" not in str(e.value), e.value


def test_a_table_that_cannot_be_created_is_named_as_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import sys

    export_mod = sys.modules[table_name.__module__]  # (polybag.ops.export: the name is the function)

    src = str(tmp_path / "t.mcap")
    with polybag.Writer(src) as w:
        c = w.add_channel("/a", "json", None, {})
        w.write(c, b'{"a": 1}', log_time=1)

    def refuse(path: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENAMETOOLONG, "File name too long", str(path))

    monkeypatch.setattr(export_mod, "open_new", refuse)
    with pytest.raises(OSError) as e:
        export(src, str(tmp_path / "out"))
    assert e.value.filename == str(tmp_path / "out" / "a.csv"), e.value
