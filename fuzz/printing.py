"""The ``printing`` target: the commands that print text from a file, over hostile names.

Each case writes an MCAP file whose topic, type, metadata and attachment names (and a
metadata value, a channel's metadata) are random strings full of control characters (escape
sequences, BEL, a carriage return, C1 controls, DEL, bidi overrides, line breaks), or takes the
case's bytes as a file as they are, then runs the commands that print names --
``list channels|schemas|attachments|metadata``, ``info`` (table, ``-v``, ``-y``), ``cat``
(and ``--topics`` that matches nothing: the error listing the topics there are), ``du`` and
``export`` -- in this process, capturing what they print.

Invariants beyond "only PolybagError comes out":

- nothing printed (stdout or stderr) holds a character below 0x20 but a line break or a tab,
  nor one in 0x7f-0x9f: text from a file is written as escapes, never raw to a terminal;
- no command ends in an "unexpected" error (an exception that is not a polybag error);
- ``export`` makes no hidden file (a table name never starts with ``.``).
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import polybag
from fuzz.sandbox import InvariantBroken
from fuzz.targets import Stats, Target, attempt, pack, unpack

#: what may never reach the terminal raw
BAD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PIECES = (
    "\x1b[2J", "\x1b]0;owned\x07", "\x1b[31m", "\x07", "\r", "\n", "\t", "\x00", "\x7f", "\x9b31m",
    "\x85", "\u202e", "\u2028", "\u200b", "/", "/..", "/.", ".", "..", "~", " ", "a", "evil", "\u00e9",
)  # fmt: skip
COMMANDS = (
    ["list", "channels"], ["list", "schemas"], ["list", "attachments"], ["list", "metadata"],
    ["info"], ["info", "-v"], ["info", "-y"], ["cat"], ["cat", "--topics", "/nothing-here"], ["du"],
)  # fmt: skip


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8)))


class Printing(Target):
    name = "printing"
    doc = "commands that print names from a file (list, info, cat, du, export) over hostile names"

    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="polybag-fuzz-printing-"))

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        names = [_name(rng) for _ in range(rng.randint(2, 10))]
        return pack(b"PR", [n.encode("utf-8") for n in names])

    def run(self, data: bytes, stats: Stats) -> None:
        case = Path(tempfile.mkdtemp(dir=self.root))
        try:
            self._run(case, data, stats)
        finally:
            shutil.rmtree(case, ignore_errors=True)

    def _run(self, case: Path, data: bytes, stats: Stats) -> None:
        log = case / "log.mcap"
        got = unpack(data)
        if got is None or got[0] != b"PR" or len(got[1]) < 2:
            log.write_bytes(data)  # the case's bytes as a file, as they are
            stats.mark("raw")
        else:
            names = [p.decode("utf-8", "replace") for p in got[1]]
            stats.mark("names", len(names))

            def write() -> None:
                with polybag.Writer(str(log)) as w:
                    schema = w.add_schema(names[1], "jsonschema", b'{"type": "object"}')
                    for i, topic in enumerate(names):
                        c = w.add_channel(topic, "json", schema, {names[i - 1]: topic})
                        w.write(c, b'{"a": 1}', log_time=1_000 + i)
                    w.add_metadata(names[-1], {names[0]: names[-1]})
                    w.add_attachment(names[0], names[-1], b"x", 1, 1)

            attempt(write)
        for argv in COMMANDS:
            self._check([*argv, str(log)], stats)
        out = case / "tables"
        self._check(["export", str(log), "-o", str(out)], stats)
        if out.is_dir():
            hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
            if hidden:
                raise InvariantBroken(f"export made hidden files: {hidden!r}")

    def _check(self, argv: list[str], stats: Stats) -> None:
        from polybag.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        stats.mark(f"{argv[0]}-{code}")
        for what, text in (("stdout", out.getvalue()), ("stderr", err.getvalue())):
            hit = BAD.search(text)
            if hit is not None:
                raise InvariantBroken(f"polybag {' '.join(argv[:-1])}: raw {hit.group()!r} on {what}: {text[:300]!r}")
        if "error: unexpected" in err.getvalue():
            raise InvariantBroken(f"polybag {argv[0]}: {err.getvalue()[:300]}")


TARGETS = [Printing]
