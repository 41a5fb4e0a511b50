"""An unknown option is the command's usage error: its own usage line and
``polybag CMD: error: unrecognized arguments: ...`` (exit 2), as argparse says it for a
command's other mistakes, not the top-level usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybag.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.mark.parametrize(
    ("words", "prog"),
    [
        (["info", "--frobnicate", str(SAMPLES / "robot.bag")], "polybag info"),
        (["convert", str(SAMPLES / "robot.bag"), "x.mcap", "--nope"], "polybag convert"),
        (["ulog", "info", "--frob", str(SAMPLES / "flight.ulg")], "polybag ulog info"),
        (["--frob"], "polybag"),
    ],
)
def test_unknown_option_names_the_command(words: list[str], prog: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(words)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"usage: {prog} ")
    assert f"\n{prog}: error: unrecognized arguments: " in err
    assert not list(tmp_path.iterdir())  # nothing written
