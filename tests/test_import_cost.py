"""``polybag record`` imports only what recording uses (issue 28: on a loaded machine the
imports of every other command -- numpy, the operations, the bridges, the formats' readers --
kept a recorder launched beside ``rosbag record`` from recording for seconds).

Each check runs in a fresh interpreter (``python -c``) and looks at ``sys.modules``; no
timing.  The live counterpart (the modules imported when a real recording got its first
message) is ``tests/live/test_record_start.py``; the time itself is measured by
``bench/bench_record_start.py``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: what a ROS 1 recording to a bag must not import: modules of other commands and their
#: third-party dependencies
HEAVY = (
    "numpy",
    "pandas",
    "pyarrow",
    "yaml",
    "polybag.ops",
    "polybag.bridges",
    "polybag.dask",
    "polybag.sensors",
    "polybag.play",
    "polybag.net.ros2",
    "polybag.formats.mcap",
    "polybag.formats.ulog",
    "polybag.formats.rosbag2",
    "polybag.formats.bag.reader",
    "polybag.cli.convert",
    "polybag.cli.info",
    "polybag.cli.play",
    "xmlrpc.server",  # (the node's slave API answers on socketserver: no pydoc, http.server, html)
    "pydoc",
)


def _modules(code: str, *args: str, cwd: Path | None = None) -> set[str]:
    """The modules ``code`` left imported in a fresh interpreter (it ends by printing them)."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


PRINT = "print(); print(json.dumps(sorted(sys.modules)))"


def test_record_help_imports_only_record():
    mods = _modules(
        f"""
        import contextlib, io, json, sys
        from polybag.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
            main(["record", "--help"])
        assert "--output-name" in out.getvalue(), out.getvalue()
        {PRINT}
        """
    )
    assert "polybag.cli.record" in mods
    assert _heavy(mods) == []
    others = sorted(m for m in mods if m.startswith("polybag.cli.") and m not in ("polybag.cli.record", "polybag.cli.text", "polybag.cli._ops"))
    assert others == []


def test_the_start_of_a_recording_imports_no_heavy_module(tmp_path):
    """What ``polybag record -O run.bag /t`` does before its first message, short of the
    graph: parse the command line, open the bag (a recorder started without a source),
    import the live source and the ROS 1 node."""
    mods = _modules(
        f"""
        import json, sys
        from polybag.cli import build_parser, _command_word
        words = ["record", "-O", "run.bag", "/t"]
        args = build_parser(_command_word(words)).parse_args(words)
        from polybag.cli.record import options_from_args
        from polybag.record.recorder import Recorder
        import polybag.record.group, polybag.record.live, polybag.net.ros1
        opts = options_from_args(args)
        opts.validate(live=True)
        rec = Recorder(opts).start()
        assert rec.current_file is not None, rec.report()
        {PRINT}
        rec.close()
        """,
        cwd=tmp_path,
    )
    assert "polybag.formats.bag.writer" in mods and "polybag.net.ros1.node" in mods
    assert _heavy(mods) == []


def test_a_bag_written_without_numpy_at_start_is_the_same(tmp_path):
    """The bag writer imports numpy at its first large chunk index, not with the module: the
    file it writes is unchanged (the bytes' hashes are pinned in tests/formats/bag)."""
    mods = _modules(
        f"""
        import json, sys
        import polybag
        with polybag.Writer("a.bag") as w:
            schema = w.add_schema("std_msgs/String", "ros1msg", b"string data")
            # (the md5sum as a recording has it from the connection header)
            ch = w.add_channel("/t", "ros1", schema, dict(md5sum="992ce8a1687cec8c8bd883ec73ca41d1"))
            assert "numpy" not in sys.modules
            for i in range(100):  # (32 or more entries of a connection: packed by numpy)
                w.write(ch, b"\\x01\\x00\\x00\\x00x", log_time=1_000_000_000 + i)
        r = polybag.open("a.bag")
        assert [m.log_time for m in r.messages()] == [1_000_000_000 + i for i in range(100)]
        {PRINT}
        """,
        cwd=tmp_path,
    )
    assert "numpy" in mods  # (imported when the chunk's index was built)


@pytest.mark.parametrize(
    ("words", "command"),
    [
        (["record", "/t"], "record"),
        (["--max-chunk", "1G", "record", "/t"], "record"),
        (["--types", "record", "info", "x.bag"], "info"),
        (["--max-chunk=1G", "cat", "x.bag"], "cat"),
        (["--max", "1G", "--ty", "info", "record", "/t"], "record"),
        (["--", "record"], None),
        (["-h", "record"], None),  # (the top-level help lists every command)
        (["--max-chunk", "1G", "--help", "record"], None),
        (["--version"], None),
    ],
)
def test_command_word(words, command):
    from polybag.cli import _command_word

    assert _command_word(words) == command


def test_one_command_parser_is_the_full_parsers_command():
    """The parser built for one command parses and helps as the full one does."""
    from polybag.cli import _command_parser, build_parser

    full = build_parser()
    only = build_parser("record")
    assert _command_parser(full, "record").format_help() == _command_parser(only, "record").format_help()
    words = ["record", "--max-chunk", "2M", "-O", "x.bag", "--split", "--duration", "5", "/a", "/b"]
    assert vars(full.parse_args(words)) == vars(only.parse_args(words))
    # a word naming no command (or a helper module, cli/text.py) gets every command
    for word in ("nosuch", "text", None):
        commands = next(a for a in build_parser(word)._actions if a.dest == "command").choices
        assert {"info", "record", "convert", "play"} <= set(commands), word
