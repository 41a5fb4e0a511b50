"""``polybag.open(path, tolerant=True)``: a writing command's read of its input, with the
options each format's registry entry names (``FormatSpec.tolerant_options``: a ULog is read
recovering), for a local log file only; the file is sniffed once, by the open itself."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybag
from polybag.errors import FormatError
from polybag.formats import registry

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT.parent / "shared" / "corpora" / "ulog" / "sample.ulg"
DEMO = ROOT / "samples" / "demo.mcap"


@pytest.fixture
def damaged_ulog(tmp_path: Path) -> Path:
    """The sample ULog with 40 bytes overwritten two thirds in: a plain read stops there."""
    if not SAMPLE.exists():
        pytest.skip(f"{SAMPLE} is not here")
    data = SAMPLE.read_bytes()
    at = len(data) * 2 // 3
    p = tmp_path / "damaged.ulg"
    p.write_bytes(data[:at] + b"\xff" * 40 + data[at + 40 :])
    return p


def _count(reader: polybag.Reader) -> int:
    return sum(1 for _ in reader.messages())


def test_only_ulog_has_tolerant_options() -> None:
    assert {s.name: s.tolerant_options for s in registry.formats()} == {
        "mcap": (), "bag": (), "ulog": (("recover", True),), "rosbag2": ()
    }  # fmt: skip


def test_a_tolerant_read_of_a_ulog_recovers(damaged_ulog: Path) -> None:
    with polybag.open(damaged_ulog) as plain, pytest.raises(FormatError):
        _count(plain)
    with polybag.open(damaged_ulog, recover=True) as recovering:
        expected = (_count(recovering), recovering.recovery_report)
    with polybag.open(damaged_ulog, tolerant=True) as tolerant:
        assert (_count(tolerant), tolerant.recovery_report) == expected
    with polybag.open(str(damaged_ulog), tolerant=True) as tolerant:
        assert _count(tolerant) == expected[0]


def test_options_given_win_over_the_tolerant_ones(damaged_ulog: Path) -> None:
    with polybag.open(damaged_ulog, tolerant=True, recover=False) as r, pytest.raises(FormatError):
        _count(r)


@pytest.mark.parametrize("how", ["stream", "buffer", "file_url"])
def test_only_a_local_path_is_read_tolerantly(damaged_ulog: Path, how: str) -> None:
    """A stream, a buffer or a URL (even ``file://``) is read plainly, as before
    ``tolerant`` was an open option (the writing commands sniffed local files only)."""
    with open(damaged_ulog, "rb") as f:
        target = {"stream": f, "buffer": damaged_ulog.read_bytes(), "file_url": damaged_ulog.as_uri()}[how]
        with polybag.open(target, tolerant=True) as r, pytest.raises(FormatError):
            _count(r)


def test_other_formats_read_plainly_when_tolerant() -> None:
    if not DEMO.exists():
        pytest.skip(f"{DEMO} is not here")
    with polybag.open(DEMO, tolerant=True) as tolerant, polybag.open(DEMO) as plain:
        assert _count(tolerant) == _count(plain) and tolerant.recovery_report is plain.recovery_report is None


def test_the_file_is_opened_once(damaged_ulog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The format is sniffed by the open itself: the file is opened once (it was opened
    twice when the writing commands sniffed their inputs before opening them)."""
    import builtins

    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(file) == str(damaged_ulog):
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    with polybag.open(damaged_ulog, tolerant=True) as r:
        assert r.format == "ulog"
    assert len(opened) == 1
