"""The public API is typed and checked: ``mypy --strict`` passes on the public modules
(the package root, ``model``, ``errors``, ``selection``, ``reader``, ``writer``, and the
``codecs``, ``ops``, ``dask`` and ``sensors`` packages' entry points), and a caller's mistakes are caught
(``order="bogus"``), while its right uses type-check (a decoded message's fields, a topic's
payloads, a recovery report).

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
    got = _mypy(*PUBLIC, caller, cache=tmp_path / "cache")
    errors = [line for line in got.stdout.splitlines() if ": error:" in line]
    wrong = CALLER.splitlines().index(next(x for x in CALLER.splitlines() if x.endswith("# WRONG"))) + 1
    # the public modules: no error at all
    assert not [e for e in errors if not e.startswith(str(caller))], got.stdout + got.stderr
    # the caller: one error, on the line that passes an order no reader knows
    assert [e.split(":")[1] for e in errors] == [str(wrong)], got.stdout + got.stderr
    assert '"order"' in errors[0] and "Literal" in errors[0], errors
