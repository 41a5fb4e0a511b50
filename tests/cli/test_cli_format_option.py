"""``--format`` of ``polybag cat`` / ``polybag info``: a version-0 bag (no header line, see
tests/bag_helpers.py) read from stdin is found only when named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bag_helpers import MSGS, build_v11, expected
from mcap_helpers import Pipe
from polybag.cli import main


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    class Stdin:
        buffer = Pipe(data)

    monkeypatch.setattr("sys.stdin", Stdin())


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


V0 = build_v11(b"")  # versions-overview "Version 0": records straight away


def test_cat_stdin_version0_needs_format(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _stdin(monkeypatch, V0)
    code, _, err = _run(capsys, "cat", "-", "--json")
    assert code == 3 and "magic" in err
    _stdin(monkeypatch, V0)
    code, out, _ = _run(capsys, "cat", "-", "--json", "--format", "bag", "--file-order")
    assert code == 0
    lines: list[dict[str, Any]] = [json.loads(x) for x in out.splitlines()]
    assert [(x["topic"], x["log_time"]) for x in lines] == [(t, ns) for t, ns, _d in expected()]
    assert len(lines) == len(MSGS)


def test_cat_format_bag_on_file_without_extension(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "old.log"
    p.write_bytes(V0)
    assert _run(capsys, "cat", str(p))[0] == 3
    code, out, _ = _run(capsys, "cat", str(p), "--format", "bag", "--topics", "/count", "--json")
    assert code == 0
    assert [json.loads(x)["log_time"] for x in out.splitlines()] == sorted(
        ns for t, ns, _d in expected() if t == "/count"
    )


def test_info_stdin_version0_with_format(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _stdin(monkeypatch, V0)
    assert _run(capsys, "info", "-", "--json")[0] == 3
    _stdin(monkeypatch, V0)
    code, out, _ = _run(capsys, "info", "-", "--json", "--format", "bag")
    assert code == 0
    d = json.loads(out)
    assert d["message_count"] == len(MSGS)
    assert d["format"] == "bag"


def test_format_choices_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["cat", "x.bag", "--format", "rosbag3"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_wrong_format_is_a_polybag_error(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "old.bag"
    p.write_bytes(V0)
    assert _run(capsys, "info", str(p), "--format", "bag", "--json")[0] == 0
    code, _, err = _run(capsys, "info", str(p), "--format", "mcap", "--json")
    assert code == 3 and "old.bag" in err
