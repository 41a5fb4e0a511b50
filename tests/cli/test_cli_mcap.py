"""The generic read commands (info, cat, list, get) on MCAP files and on any Reader."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polybag
from mcap_helpers import Pipe, to_bytes
from polybag.cli import main, render
from polybag.model import Channel, Message, Summary
from polybag.reader import Reader

DEMO = Path(__file__).resolve().parents[2] / "samples" / "demo.mcap"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_info_human_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "info", str(DEMO))
    assert code == 0
    for text in ("mcap", "ros1", "polybag samples", "/chatter", "/imu/accel", "std_msgs/String", "geometry_msgs/Vector3", "zstd"):
        assert text in out
    assert "10.05 Hz" in out and "20.10 Hz" in out
    code, out, _ = run(capsys, "info", str(DEMO), "--json")
    d = json.loads(out)
    assert d["format"] == "mcap" and d["profile"] == "ros1" and d["indexed"] is True
    assert d["message_count"] == 300 and d["attachment_count"] == 1 and d["metadata_count"] == 1
    assert {c["topic"]: c["message_count"] for c in d["channels"]} == {"/chatter": 100, "/imu/accel": 200}
    assert d["chunks"]["count"] >= 1 and set(d["chunks"]["compression"]) == {"zstd"}
    assert d["start_time"] == 1_700_000_000_000_000_000 and d["duration_ns"] == 9_951_000_000
    assert d["extras"]["statistics"]["message_count"] == 300


def test_info_reads_only_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(DEMO.read_bytes())
    with polybag.open(bytes(data)) as r:
        summary_start = r.footer.summary_start  # type: ignore[attr-defined]
    data[40 : summary_start - 20] = bytes(summary_start - 60)  # wipe the data section
    p = tmp_path / "wiped.mcap"
    p.write_bytes(bytes(data))
    code, out, _ = run(capsys, "info", str(p), "--json")
    assert code == 0 and json.loads(out)["message_count"] == 300
    code, _, err = run(capsys, "cat", str(p))
    assert code == 3 and "wiped.mcap" in err


def test_info_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    class Stdin:
        buffer = Pipe(DEMO.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin())
    code, out, _ = run(capsys, "info", "-", "--json")
    assert code == 0 and json.loads(out)["message_count"] == 300


def test_cat_json_and_filters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cat", str(DEMO), "--json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(lines) == 300
    assert [x["log_time"] for x in lines] == sorted(x["log_time"] for x in lines)
    first = lines[0]
    assert first["topic"] == "/chatter" and first["sequence"] == 0 and first["publish_time"] == first["log_time"]
    if "message" in first:  # a ros1 codec is installed
        assert first["message"] == {"data": "hello world 0"}
    else:
        assert base64.b64decode(first["data"]) == b"\x0d\x00\x00\x00hello world 0"
    code, out, _ = run(capsys, "cat", str(DEMO), "--json", "--topics", "/imu/.*", "--start", "+1s", "--end", "+2s")
    lines = [json.loads(x) for x in out.splitlines()]
    assert len(lines) == 20 and {x["topic"] for x in lines} == {"/imu/accel"}
    assert all(1_700_000_001_000_000_000 <= x["log_time"] < 1_700_000_002_000_000_000 for x in lines)
    code, out, _ = run(capsys, "cat", str(DEMO), "--topics", "/chatter", "-n", "3", "--reverse")
    assert code == 0 and len(out.splitlines()) == 3 and "/chatter" in out and "9.900000000" in out.splitlines()[0]


def test_cat_without_codec_prints_raw_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "raw.mcap"
    p.write_bytes(to_bytes([("/d", 5, 5, 1, b"\x00\x01binary"), ("/b/c", 6, 6, 2, b"\x01")]))
    code, out, err = run(capsys, "cat", str(p), "--json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["topic"] == "/d" and base64.b64decode(lines[0]["data"]) == b"\x00\x01binary"
    # /b/c claims ros1 `int32 x` but holds 1 byte: a decode error falls back to raw data, is
    # reported once and makes the exit status 1 (/d has no codec: not a problem)
    assert base64.b64decode(lines[1]["data"]) == b"\x01"
    assert code == 1 and "warning: /b/c: cannot decode" in err and "/d" not in err
    code, out, _ = run(capsys, "cat", str(p))
    assert code == 1 and "00 01 62" in out


def test_list_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "channels", str(DEMO))
    assert code == 0 and "/chatter" in out and "geometry_msgs/Vector3" in out
    code, out, _ = run(capsys, "list", "channels", str(DEMO), "--json")
    chans = json.loads(out)
    assert [(c["id"], c["topic"], c["message_count"]) for c in chans] == [(1, "/chatter", 100), (2, "/imu/accel", 200)]
    assert chans[0]["metadata"]["md5sum"] == "992ce8a1687cec8c8bd883ec73ca41d1"
    code, out, _ = run(capsys, "list", "schemas", str(DEMO), "--json")
    assert [s["name"] for s in json.loads(out)] == ["std_msgs/String", "geometry_msgs/Vector3"]
    code, out, _ = run(capsys, "list", "attachments", str(DEMO), "--json")
    att = json.loads(out)
    assert att == [
        {
            "name": "calibration.yaml",
            "media_type": "application/yaml",
            "size": 31,
            "log_time": 1_700_000_000_000_000_000,
            "create_time": 1_700_000_000_000_000_000,
        }
    ]
    code, out, _ = run(capsys, "list", "metadata", str(DEMO))
    assert code == 0 and "robot" in out and "serial=0001" in out
    code, out, _ = run(capsys, "list", "metadata", str(DEMO), "--json")
    assert json.loads(out) == [{"name": "robot", "metadata": {"name": "demo", "serial": "0001"}}]


def test_get_attachment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_path = tmp_path / "calib.yaml"
    code, _, _ = run(capsys, "get", "attachment", str(DEMO), "calibration.yaml", "-o", str(out_path))
    assert code == 0 and out_path.read_bytes() == b"camera: {fx: 500.0, fy: 500.0}\n"
    code, _, err = run(capsys, "get", "attachment", str(DEMO), "nope", "-o", str(tmp_path / "nope.yaml"))
    assert code == 1 and "nope" in err


def test_unreadable_input_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "junk.mcap"
    p.write_bytes(b"\x89MCAP0\r\n" + b"\x01" + b"\xff" * 8)
    for cmd in (["info", str(p)], ["cat", str(p)], ["list", "channels", str(p)]):
        code, _, err = run(capsys, *cmd)
        assert code == 3 and "junk.mcap" in err
    code, _, err = run(capsys, "info", str(tmp_path / "missing.mcap"))
    assert code == 3


class _FakeReader(Reader):
    format = "fake"

    def __init__(self, text: bool) -> None:
        self.path = "fake.log"
        ch = Channel(7, "/x", "raw", None, {})
        self._summary = Summary(format="fake", channels={7: ch}, message_counts={7: 2}, start_time=0, end_time=10**9)
        self._msgs = [Message(ch, 0, 0, 0, b"ab"), Message(ch, 10**9, 10**9, 1, b"cd")]
        if text:  # a layout of its own, drawn by the renderer the test registers for it
            self.info_style = "fake"

    @property
    def summary(self) -> Summary:
        return self._summary

    def messages(self, topics: Any = None, start: Any = None, end: Any = None, reverse: bool = False, order: str = "log_time") -> Iterator[Message]:
        return iter(self._msgs[::-1] if reverse else self._msgs)

    def info_extras(self) -> dict[str, Any]:
        return {"fake_fact": 42}

    def close(self) -> None:
        pass


def test_generic_over_any_reader(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(polybag, "open", lambda *_a, **_k: _FakeReader(text=False))
    code, out, _ = run(capsys, "info", "whatever")
    assert code == 0 and "fake" in out and "/x" in out and "fake_fact:    42" in out
    code, out, _ = run(capsys, "info", "whatever", "--json")
    d = json.loads(out)
    assert d["format"] == "fake" and d["extras"] == {"fake_fact": 42} and d["channels"][0]["frequency_hz"] == 2.0
    code, out, _ = run(capsys, "cat", "whatever", "--json")
    assert [json.loads(x)["data"] for x in out.splitlines()] == [base64.b64encode(b"ab").decode(), base64.b64encode(b"cd").decode()]
    code, out, _ = run(capsys, "info", "whatever", "--yaml")
    generic_yaml = out
    assert code == 0 and "fake_fact: 42" in out
    monkeypatch.setattr(polybag, "open", lambda *_a, **_k: _FakeReader(text=True))
    monkeypatch.setitem(render.STYLES, "fake", (lambda _r, _verbose: "custom fake summary", None))
    code, out, _ = run(capsys, "info", "whatever")
    assert out.strip() == "custom fake summary"
    # a style without a YAML layout: the generic YAML
    code, out, _ = run(capsys, "info", "whatever", "--yaml")
    assert code == 0 and out == generic_yaml


def test_main_module_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "polybag", "info", str(DEMO), "--json"], capture_output=True, check=True)
    assert json.loads(out.stdout)["message_count"] == 300
    _ = io  # keep the import used
