"""The MCAP conformance suite: every file streamed, the indexed-mode files, the writer mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from paths import CORPORA
from polybag.formats.mcap import conformance

SUITE = CORPORA / "mcap-conformance"
FILES = sorted(SUITE.glob("*/*.mcap"))


def _features(p: Path) -> set[str]:
    spec = json.loads(p.with_suffix(".json").read_text())
    return set(spec["meta"]["variant"]["features"])


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


INDEXED = [
    p for p in FILES if p.name.startswith(("OneMessage", "TenMessages")) and {"ch", "chx", "rch", "rsh"} <= _features(p)
]
WRITE = [p for p in FILES if "pad" not in _features(p)]


def test_suite_is_complete() -> None:
    assert len(FILES) == 416
    assert len(INDEXED) == 32
    assert len(WRITE) == 208


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_streamed(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text())
    with open(path, "rb") as f:  # a real, forward-only stream
        got = conformance.streamed(f, str(path))
    assert got == {"records": expected["records"]}


def _indexed_expectation(records: list[dict[str, Any]]) -> dict[str, Any]:
    def first(kind: str) -> list[dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}
        for r in records:
            if r["type"] == kind:
                seen.setdefault(dict(r["fields"])["id"], r)
        return [seen[k] for k in sorted(seen, key=int)]

    msgs = [r for r in records if r["type"] == "Message"]
    msgs.sort(key=lambda r: int(dict(r["fields"])["log_time"]))
    return {
        "schemas": first("Schema"),
        "channels": first("Channel"),
        "messages": msgs,
        "statistics": [r for r in records if r["type"] == "Statistics"],
    }


@pytest.mark.parametrize("path", INDEXED, ids=_ids(INDEXED))
def test_indexed(path: Path) -> None:
    expected = json.loads(path.with_suffix(".json").read_text())
    got = conformance.indexed(path.read_bytes(), str(path))
    assert got == _indexed_expectation(expected["records"])


@pytest.mark.parametrize("path", WRITE, ids=_ids(WRITE))
def test_write(path: Path) -> None:
    spec = json.loads(path.with_suffix(".json").read_text())
    assert conformance.write_spec(spec) == path.read_bytes()


def test_command_line_modes(tmp_path: Path) -> None:
    path = SUITE / "TenMessages" / "TenMessages-ch-chx-mx-pad-rch-rsh-st-sum.mcap"
    exp = json.loads(path.with_suffix(".json").read_text())
    run = [sys.executable, "-m", "polybag.formats.mcap.conformance"]
    out = subprocess.run([*run, str(path), "streamed"], capture_output=True, check=True).stdout
    assert json.loads(out) == {"records": exp["records"]}
    out = subprocess.run([*run, str(path), "indexed"], capture_output=True, check=True).stdout
    assert json.loads(out) == _indexed_expectation(exp["records"])
    plain = SUITE / "TenMessages" / "TenMessages-ch-chx-mx-rch-rsh-st-sum.mcap"
    out = subprocess.run([*run, "write", str(plain.with_suffix(".json"))], capture_output=True, check=True).stdout
    assert out == plain.read_bytes()
    bad = subprocess.run([*run, str(path), "sideways"], capture_output=True)
    assert bad.returncode == 2
