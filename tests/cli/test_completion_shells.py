"""Shell completion (``polybag completion bash|zsh|fish``) in the real shells: the script is
sourced as users do, then the shell's own completion entry point is asked (bash: the
completion function with COMP_WORDS/COMP_LINE; fish: ``complete -C``; zsh: an interactive
shell in a ``zpty``, TAB typed).  Also: topics after ``--topics`` come from the input on the
line, and a hostile input (garbage, a truncated bag, a FIFO that never ends) gives no topic,
no traceback, no file written, in bounded time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_ARGCOMPLETE", "COMP_", "_ARC"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), TERM="dumb", LC_ALL="C.UTF-8")
    return env


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "samples", tmp_path / "samples", ignore=shutil.ignore_patterns("*.py"))
    (tmp_path / "home").mkdir()
    return tmp_path


def _run(cmd: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(cwd / "home"), input=stdin, capture_output=True, text=True, timeout=300, check=False)


def _bash(work: Path, line: str) -> list[str]:
    """COMPREPLY of bash's completion of ``line`` (the cursor at its end)."""
    script = r"""
eval "$(polybag completion bash)"
read -r -a COMP_WORDS <<< "$LINE"
if [[ "$LINE" == *" " ]]; then COMP_WORDS+=(""); fi
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$LINE"
COMP_POINT=${#COMP_LINE}
COMP_TYPE=9
prev=""; (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}
func=$(complete -p polybag | sed -E 's/.* -F ([^ ]+) .*/\1/')
"$func" polybag "${COMP_WORDS[COMP_CWORD]}" "$prev"
printf '%s\n' "${COMPREPLY[@]}"
"""
    env = _env(work / "home")
    env["LINE"] = line
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    return [w.strip() for w in res.stdout.splitlines() if w.strip()]


def test_completion_prints_a_script_per_shell(work: Path) -> None:
    for shell in ("bash", "zsh", "fish"):
        res = _run(["polybag", "completion", shell], work)
        assert res.returncode == 0 and res.stderr == "", res.stderr
        assert "polybag" in res.stdout and "_ARGCOMPLETE" in res.stdout
    res = _run(["polybag", "completion", "tcsh"], work)
    assert res.returncode == 2 and "invalid choice" in res.stderr and res.stdout == ""


@pytest.mark.skipif(not shutil.which("bash"), reason="bash not installed")
def test_bash_completes_commands_options_choices_files_and_topics(work: Path) -> None:
    assert "convert" in _bash(work, "polybag conv")
    assert {"completion", "info", "record", "play", "ulog"} <= set(_bash(work, "polybag "))
    assert "--format" in _bash(work, "polybag info --for")
    assert {"--topics", "--exclude-topics", "--quiet", "--verbose"} <= set(_bash(work, "polybag convert --"))
    assert set(_bash(work, "polybag info --format ")) == {"mcap", "bag", "ulog", "rosbag2"}
    assert {"zstd", "lz4", "bz2", "none"} <= set(_bash(work, "polybag convert --compression "))
    assert set(_bash(work, "polybag convert --storage ")) == {"sqlite3", "mcap"}
    assert {"mcap", "bag", "rosbag2"} <= set(_bash(work, "polybag convert --format "))
    assert set(_bash(work, "polybag completion ")) == {"bash", "zsh", "fish"}
    assert "samples/robot.bag" in _bash(work, "polybag info samples/rob")
    assert "samples/robot_ros2/" in _bash(work, "polybag convert samples/robot_")
    topics = set(_bash(work, "polybag cat samples/robot.bag --topics "))
    assert topics == {"/chatter", "/imu", "/gps", "/odom", "/scan", "/camera/image_raw"}
    assert "/imu/accel" in _bash(work, "polybag filter samples/demo.mcap out.mcap -x /imu")
    assert "/gps" in _bash(work, "polybag export samples/robot_ros2 -o tables --topics /g")


@pytest.mark.skipif(not shutil.which("bash"), reason="bash not installed")
def test_topic_completion_of_hostile_inputs_is_empty_bounded_and_writes_nothing(work: Path) -> None:
    (work / "garbage.bag").write_bytes(b"#ROSBAG V2.0\n" + os.urandom(4096))
    (work / "cut.bag").write_bytes((work / "samples" / "robot.bag").read_bytes()[:3000])
    (work / "huge.mcap").write_bytes(b"\x89MCAP0\r\n" + b"\xff" * 64)
    os.mkfifo(work / "pipe.bag")  # (a reader waits for ever: the completer must give up)
    (work / "fake_ros2").mkdir()
    (work / "fake_ros2" / "metadata.yaml").write_text("rosbag2_bagfile_information: {version: !!python/object:os.system x}\n")
    before = sorted((str(p.relative_to(work)), p.stat().st_mtime_ns) for p in work.rglob("*") if not p.is_fifo())
    for name in ("garbage.bag", "cut.bag", "huge.mcap", "pipe.bag", "fake_ros2"):
        got = _bash(work, f"polybag cat {name} --topics ")
        assert all(not w.startswith("/") and "Error" not in w for w in got), (name, got)
    after = sorted((str(p.relative_to(work)), p.stat().st_mtime_ns) for p in work.rglob("*") if not p.is_fifo())
    assert after == before


@pytest.mark.skipif(not shutil.which("fish"), reason="fish not installed")
def test_fish_completes_from_the_sourced_script(work: Path) -> None:
    def fish(line: str) -> list[str]:
        res = _run(["fish", "--no-config", "-c", f'source (polybag completion fish | psub); complete -C "{line}"'], work)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        return [w.split("\t")[0] for w in res.stdout.splitlines()]

    assert "convert" in fish("polybag conv")
    assert "--compression" in fish("polybag convert --comp")
    assert {"zstd", "lz4"} <= set(fish("polybag convert --compression "))
    assert "samples/flight.ulg" in fish("polybag info samples/fl")
    assert "vehicle_attitude" in fish("polybag cat samples/flight.ulg --topics veh")


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh not installed")
def test_zsh_loads_the_script_and_completes_in_an_interactive_shell(work: Path) -> None:
    # an interactive zsh in a zpty: compinit, the script, then "polybag conv" and TAB; zpty -r
    # waits for the patterns (the line rewritten by the completion), no sleep
    script = r"""
zmodload zsh/zpty || exit 3
zpty -b z 'zsh -f -i'
zpty -w z 'PS1="> "; autoload -U compinit; compinit -u -D; eval "$(polybag completion zsh)" && echo LOADED-$((40+2))'
zpty -r z out '*LOADED-42*' || exit 4
zpty -w -n z $'polybag conv\t'
zpty -r z out '*polybag convert*' || exit 5
zpty -w -n z $'\x15polybag info --format mc\t'
zpty -r z out '*--format mcap*' || exit 6
zpty -d z
print COMPLETED
"""
    res = _run(["zsh", "-f", "-c", script], work)
    assert res.returncode == 0 and "COMPLETED" in res.stdout, (res.returncode, res.stdout, res.stderr)


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh not installed")
def test_zsh_script_answers_through_argcomplete_protocol(work: Path) -> None:
    # the script's own run function, called as zsh's completion calls it: the answers come back
    script = r"""
autoload -U compinit; compinit -u -D
eval "$(polybag completion zsh)" || exit 3
(( $+functions[_python_argcomplete] )) || exit 4
COMP_LINE="polybag completion " COMP_POINT=19 _ARGCOMPLETE=1 _ARGCOMPLETE_SHELL=zsh _ARGCOMPLETE_SUPPRESS_SPACE=1 \
  __python_argcomplete_run polybag
"""
    res = _run(["zsh", "-f", "-c", script], work)
    assert res.returncode == 0, (res.stdout, res.stderr)
    for shell in ("bash", "zsh", "fish"):
        assert shell in res.stdout


def test_normal_runs_do_not_import_argcomplete(work: Path) -> None:
    code = "import sys; from polybag.cli import main; main(['info', 'samples/robot.bag']); print('argcomplete' in sys.modules)"
    res = _run([sys.executable, "-c", code], work)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "False"
