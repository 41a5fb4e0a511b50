"""Hostile ``polybag record --config`` files (issue 26, "Recorder configs").

A config is untrusted input: every field is checked (types, finite numbers in range, text
without control characters, unknown or repeated keys, relative paths that climb out with
``..``), its size and YAML (aliases) are bounded, no two recorders ever write one file
(every spelling of a path, generated date names made unique), a recorder never opens a
file that exists (``NAME.active`` is created exclusively; planted symlinks are refused),
and a group whose start fails stops what it started and removes only what it created.

No ROS graph is needed: the CLI is run against a master that does not answer (recording
starts and waits for it), or the group is built in-process (``live=False``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from polybag.cli import main
from polybag.errors import OutputExistsError, PolybagError, UsageError, WriteError
from polybag.record import RecorderGroup, RecordOptions, load_config
from polybag.record.group import MAX_CONFIG_BYTES, MAX_RECORDERS, plan_outputs

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the snapshot the fuzz targets use lives in the top-level fuzz/ package
    sys.path.insert(0, str(ROOT))

from fuzz.sandbox import snapshot  # noqa: E402

NO_MASTER = "http://127.0.0.1:9"  # (discard port: nothing answers; the recorder retries)
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
STRING_DEF = "string data\n"


def ser_string(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(4, "little") + raw


def write_config(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def record_config(cfg: Path, *extra: str) -> int:
    """``polybag record --config CFG`` in-process: only for configs refused before recording."""
    return main(["record", "--config", str(cfg), "--master-uri", NO_MASTER, "-q", *extra])


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working directory (the recorders' relative names land here) beside a sentinel tree."""
    cwd = tmp_path / "out"
    cwd.mkdir()
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_bytes(b"do not touch\n")
    (sentinel / "run.bag").write_bytes(b"not a bag, not polybag's\n")
    monkeypatch.chdir(cwd)
    return cwd


# --- one output file per recorder ----------------------------------------------------------------
# (ROS 2: NAME is a rosbag2 directory, NAME.bag a ROS 1 bag: those two differ)
SAME_OUTPUT = {
    "dot-slash": ("output_name: same.bag", "output_name: ./same.bag", True),
    "extension added": ("output_name: x", "output_name: x.bag", False),
    "extension added (mcap)": ("output_name: x.mcap", "{output_name: x, format: mcap}", True),
    "folder plus name": ("{output_name: run.bag, directory: d}", "output_name: d/run.bag", True),
    "dot inside": ("output_name: d/./run", "output_name: ./d/run", True),
    "symlinked folder": ("output_name: d/run", "output_name: link/run", True),
    "split part": ("output_name: x_0", "{output_name: x, split: true, size: 1}", True),
    "same name, split": ("{output_name: p, split: true, size: 1}", "{output_name: ./p.bag, split: true, duration: 5}", False),
    "rosbag2 directory": ("output_name: bag", "{output_name: bag, directory: .}", True),
}
#: a recorder that starts by mistake stops at once (the disk never has 1000 TB free)
STOP = "min_space: 1000T"


@pytest.mark.parametrize("ros2", [False, True], ids=["ros1", "ros2"])
@pytest.mark.parametrize("pair", list(SAME_OUTPUT.values()), ids=list(SAME_OUTPUT))
def test_two_recorders_writing_one_file_are_refused(work, capsys, pair, ros2):
    if ros2 and not pair[2]:
        pytest.skip("two different outputs in ROS 2")
    (work / "d").mkdir()
    (work / "link").symlink_to("d")
    a, b = (p if p.startswith("{") else "{" + p + "}" for p in pair[:2])
    cfg = write_config(work / "c.yaml", f"recorders:\n  - {a[:-1]}, topics: [/a], {STOP}}}\n  - {b[:-1]}, topics: [/b], {STOP}}}\n")
    before = snapshot(work)
    assert record_config(cfg, *(["--ros2"] if ros2 else [])) == 2
    err = capsys.readouterr().err
    assert "c.yaml" in err and "recorders[0] and recorders[1] would write the same file" in err
    assert "unexpected" not in err
    assert snapshot(work) == before


def test_different_outputs_are_accepted(work):
    cfg = write_config(
        work / "c.yaml",
        """\
        recorders:
          - {topics: [/a], output_name: x.bag}
          - {topics: [/a], output_name: x.mcap}
          - {topics: [/a], output_name: x_1}
          - {topics: [/a], output_prefix: x}
          - {topics: [/a], output_name: y, split: true}
          - {topics: [/a], output_name: p_2026-01-02-03-04-05}
          - {topics: [/a], output_prefix: p}
        """,
    )
    recs = load_config(cfg)["recorders"]
    assert [r.output_name for r in recs] == ["x.bag", "x.mcap", "x_1", None, "y", "p_2026-01-02-03-04-05", None]
    # (a dated name that could meet an earlier recorder's file is told apart)
    assert [r.name_tag for r in recs] == [None] * 6 + ["rec6"]


def _put(group: RecorderGroup, topic: str, text: str, t: int) -> int:
    return group.write(topic, ser_string(text), "std_msgs/String", md5sum=STRING_MD5, definition=STRING_DEF, receive_time=t)


def test_generated_names_are_unique_and_keep_every_recorders_messages(work):
    cfg = write_config(
        work / "c.yaml",
        """\
        recorders:
          - {topics: [/a], min_space: 0}
          - {topics: [/b], min_space: 0}
          - {topics: [/a], output_prefix: crash, min_space: 0}
          - {topics: [/b], output_prefix: ./crash, min_space: 0}
          - {topics: [/c], output_prefix: crash.bag, min_space: 0}
          - {topics: [/c], output_prefix: crash, split: true, size: 1, min_space: 0}
        """,
    )
    opts = load_config(cfg)["recorders"]
    # deterministic: the first keeps rosbag's name, later ones get _recN (N: their place)
    # (split parts, crash_DATE_0.bag, never meet crash_DATE.bag: no tag)
    assert [o.name_tag for o in opts] == [None, "rec1", None, "rec3", "rec4", None]
    assert load_config(cfg)["recorders"] == opts
    group = RecorderGroup(opts, live=False, log=lambda _text: None)
    with group:
        for i in range(3):
            _put(group, "/a", f"a{i}", 1_700_000_000_000_000_000 + i)
            _put(group, "/b", f"b{i}", 1_700_000_000_000_000_000 + i)
            _put(group, "/c", f"c{i}", 1_700_000_000_000_000_000 + i)
    files = [rep["files"] for rep in (r.report() for r in group.recorders)]
    flat = [os.path.realpath(f) for fs in files for f in fs]
    assert len(flat) == len(set(flat)) == 6
    assert not list(work.glob("*.active"))
    want = ["a", "b", "a", "b", "c", "c"]
    for fs, topic in zip(files, want):
        with polybag.open(fs[0]) as r:
            got = [bytes(m.data)[4:].decode() for m in r.messages()]
        assert got == [f"{topic}{i}" for i in range(3)]
    assert os.path.basename(files[1][0]).endswith("_rec1.bag")
    assert os.path.basename(files[4][0]).endswith("_rec4.bag")
    assert os.path.basename(files[5][0]).endswith("_0.bag")


CLI = "import sys; from polybag.cli import main; sys.exit(main(sys.argv[1:]))"


def test_cli_two_default_named_recorders_write_two_files(tmp_path):
    """The real command: two recorders without names, against a master that never answers;
    SIGINT finishes both files, which are distinct."""
    cfg = write_config(
        tmp_path / "c.yaml",
        """\
        recorders:
          - {topics: [/a], min_space: 0}
          - {topics: [/b], min_space: 0}
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "record", "--config", str(cfg), "--master-uri", NO_MASTER, "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        while proc.poll() is None and len(list(tmp_path.glob("*.bag.active"))) < 2:
            threading.Event().wait(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    bags = sorted(p.name for p in tmp_path.glob("*.bag"))
    assert len(bags) == 2 and bags[0] != bags[1], bags
    assert [b for b in bags if b.endswith("_rec1.bag")], bags
    assert not list(tmp_path.glob("*.active"))


# --- never opening a file that exists --------------------------------------------------------------
@pytest.mark.parametrize("planted", ["file", "symlink", "dangling", "active-symlink", "active-file"])
def test_existing_output_or_planted_symlink_is_never_written(work, tmp_path, capsys, planted):
    outside = tmp_path / "sentinel" / "run.bag"
    before_outside = snapshot(tmp_path / "sentinel")
    if planted == "file":
        (work / "run.bag").write_bytes(b"an earlier recording\n")
    elif planted == "symlink":
        (work / "run.bag").symlink_to(outside)
    elif planted == "dangling":
        (work / "run.bag").symlink_to(tmp_path / "sentinel" / "new.bag")
    elif planted == "active-symlink":
        (work / "run.bag.active").symlink_to(outside)
    else:
        (work / "run.bag.active").write_bytes(b"a recording in progress\n")
    cfg = write_config(work / "c.yaml", "recorders:\n  - {topics: [/a], output_name: run.bag, " + STOP + "}\n")
    before = snapshot(work)
    assert record_config(cfg) == 2
    err = capsys.readouterr().err
    assert "exists; a recording never replaces a file" in err and "run.bag" in err
    assert snapshot(work) == before
    assert snapshot(tmp_path / "sentinel") == before_outside


def test_planted_symlink_at_a_generated_name_is_skipped(work, tmp_path):
    """Split parts and snapshots take ``-1``... when their name is taken: never writing through it."""
    outside = tmp_path / "sentinel" / "keep.txt"
    for part in ("x_1.bag", "x_1.bag.active", "x_2.bag"):
        (work / part).symlink_to(outside)
    rec = RecordOptions(topics=["/a"], output_name="x", split=True, size=0.0001, min_space=0, quiet=True)
    group = RecorderGroup([rec], live=False)
    with group:
        for i in range(4):
            _put(group, "/a", "m" * 200 + str(i), 1_700_000_000_000_000_000 + i)
    files = [os.path.basename(f) for f in group.recorders[0].report()["files"]]
    assert files[0] == "x_0.bag" and "x_1.bag" not in files and "x_2.bag" not in files
    assert "x_1-1.bag" in files
    assert outside.read_bytes() == b"do not touch\n"
    assert all(os.path.islink(work / p) for p in ("x_1.bag", "x_1.bag.active", "x_2.bag"))


# --- every field checked ------------------------------------------------------------------------------
BAD_FIELDS = [
    "size: .nan",
    "size: .inf",
    "size: -.inf",
    "size: 1e400",
    "size: -1",
    "size: " + "9" * 400,
    "duration: .nan",
    "duration: .inf",
    "duration: '" + "9" * 400 + "'",
    "duration: -3",
    "duration: true",
    "buffsize: .inf",
    "buffsize: .nan",
    "buffsize: 1e300",
    "chunksize: 0",
    "chunksize: 99999999999999999999",
    "chunksize: 1.5",
    "limit: -1",
    "limit: " + "9" * 40,
    "max_splits: 3",
    "min_space: .inf",
    "min_space: '" + "9" * 400 + "G'",
    "min_space: -5",
    "min_space: [1]",
    "snapshot_window: .nan",
    "split: .inf",
    "output_name: \"x\\0y\"",
    "output_name: \"a\\nb\"",
    "output_name: \"run\\e[2J\"",
    "output_prefix: \"p\\0\"",
    "directory: \"d\\0\"",
    "output_name: 'd/'",
    "output_name: '..'",
    "output_name: " + "a" * 5000,
    "exclude: \"\\0\"",
    "exclude: '('",
    "topics: [\"/a\\0\"]",
    "topics: [1, 2]",
    "topics: {a: 1}",
    "namespace: \"/ns\\0\"",
    "namespace: 'bad ns'",
    "format: rosbag2",
    "format: \"bag\\0\"",
    "compression: zip",
    "bz2: 1",
    "udp: true",
    "all: 'yes'",
    "output_name: [a]",
    "output_name: 2001-12-14",
    "output_name: !!binary aGVsbG8=",
    "unknown_key: 1",
    "1: 2",
    "output_name: ../escape",
    "output_name: d/../../escape",
    "output_prefix: ../escape",
    "directory: ../..",
    "{directory: d, output_name: ../../escape}",
    "{directory: link, output_name: d/../../x}",
    "output_name: d/../x",
    "output_prefix: " + "a" * 250,
    "directory: " + "b" * 300,
    "output-name: a, output_name: b",
    "output_name: a, output_name: b",
]


@pytest.mark.parametrize("field", BAD_FIELDS)
@pytest.mark.parametrize("ros2", [False, True], ids=["ros1", "ros2"])
def test_bad_field_is_a_usage_error_naming_file_and_recorder(work, capsys, field, ros2):
    entry = field[1:-1] if field.startswith("{") else field
    if "min_space" not in entry:
        entry += ", " + STOP
    cfg = write_config(work / "c.yaml", "recorders:\n  - {topics: [/a], " + STOP + "}\n  - {topics: [/b], " + entry + "}\n")
    before = snapshot(work)
    assert record_config(cfg, *(["--ros2"] if ros2 else [])) == 2
    err = capsys.readouterr().err
    assert "unexpected" not in err and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("polybag record: error: ")
    assert "c.yaml" in last and ("recorders[1]" in last or "line 3" in last), last
    assert len(last) < 600
    assert snapshot(work) == before


BAD_TOP = [
    "master_uri: \"http://h\\0:1\"",
    "master_uri: ftp://x",
    "master_uri: 5",
    "namespace: 'a b'",
    "node_name: \"/rec\\n\"",
    "node_name: ''",
    "extra: 1",
]


@pytest.mark.parametrize("top", BAD_TOP)
def test_bad_top_level_field(work, capsys, top):
    cfg = write_config(work / "c.yaml", f"{top}\nrecorders:\n  - {{topics: [/a]}}\n")
    assert record_config(cfg) == 2
    err = capsys.readouterr().err
    assert "c.yaml" in err and "unexpected" not in err


@pytest.mark.parametrize(
    "argv",
    [["-b", "inf"], ["-b", "nan"], ["--size", "inf"], ["--size", "nan"], ["--split=inf"], ["--duration", "9" * 400],
     ["--snapshot-window", "inf"], ["-L", "9" * 400], ["-O", "x\0y"], ["-o", "p\x1b]0;t\x07"], ["--chunksize", str(1 << 40)]],
)  # fmt: skip
@pytest.mark.parametrize("ros2", [False, True], ids=["ros1", "ros2"])
def test_bad_command_line_numbers_and_names(work, capsys, argv, ros2):
    assert main(["record", "/a", "--master-uri", NO_MASTER, "-q", *argv, *(["--ros2"] if ros2 else [])]) == 2
    err = capsys.readouterr().err
    assert "unexpected" not in err
    assert not os.listdir(work)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "expected a mapping"),
        ("recorders: []", "non-empty list"),
        ("recorders: 5", "non-empty list"),
        ("- a\n- b", "expected a mapping"),
        ("recorders:\n  - 5", "expected a mapping of options"),
        ("recorders: [{topics: [/a]}]\nrecorders: [{topics: [/b]}]", "given twice"),
        ("recorders: [{topics: [/a", "not valid YAML"),
        ("recorders: !!python/object:os.system [ls]", "not valid YAML"),
        ("[" * 5000 + "]" * 5000, "config"),
        ("recorders:\n  - {topics: [/a]}\n" + "\t" * 3 + "x: 1", "not valid YAML"),
    ],
)
def test_malformed_config(work, capsys, text, needle):
    cfg = work / "c.yaml"
    cfg.write_text(text)
    assert record_config(cfg) == 2
    err = capsys.readouterr().err
    assert needle in err and "c.yaml" in err and "unexpected" not in err


def test_not_utf8_and_unreadable(work, capsys):
    cfg = work / "c.yaml"
    cfg.write_bytes(b"recorders:\n  - {topics: [/\xff]}\n")
    assert record_config(cfg) == 2
    assert "not UTF-8" in capsys.readouterr().err
    assert record_config(work / "missing.yaml") == 2
    assert "cannot read the config" in capsys.readouterr().err


# --- bounded: size, aliases, recorders ------------------------------------------------------------------
def _bomb(levels: int = 9, width: int = 10) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    lines.append(f"recorders:\n  - {{topics: *a{levels - 1}}}")
    return "\n".join(lines) + "\n"


def _peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


BOMBS = {
    "billion laughs": _bomb(),
    "merge-key laughs": "a0: &a0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8, k8: 9, k9: 10}\n"
    + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
    + "recorders:\n  - {<<: *a0, topics: *a8}\n",
    "recursive alias": "recorders: &r [{topics: [/a]}, *r]\n",
    "deep nesting": "recorders: " + "[" * 200 + "]" * 200 + "\n",
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_yaml_bombs_fail_cleanly_with_bounded_memory(work, capsys, name):
    cfg = work / "c.yaml"
    cfg.write_text(BOMBS[name])
    assert cfg.stat().st_size < 2000

    def run():
        assert record_config(cfg) == 2

    peak = _peak_of(run)
    err = capsys.readouterr().err
    assert "c.yaml" in err and "unexpected" not in err
    assert any(w in err for w in ("nodes", "nested", "refers to itself")), err
    # the 10**9-node tree is never built: a few MB at most (measured: well under 5 MB)
    assert peak < 20 * 1024 * 1024, peak


def test_large_config_refused_before_parsing(work, capsys):
    cfg = work / "c.yaml"
    cfg.write_text("recorders:\n  - {topics: [/a]}\n# " + "x" * MAX_CONFIG_BYTES + "\n")

    def run():
        assert record_config(cfg) == 2

    peak = _peak_of(run)
    assert "larger than" in capsys.readouterr().err
    assert peak < 4 * MAX_CONFIG_BYTES


def test_too_many_recorders(work, capsys):
    cfg = work / "c.yaml"
    cfg.write_text("recorders:\n" + "".join(f"  - {{topics: [/t{i}], output_name: r{i}, {STOP}}}\n" for i in range(300)))
    assert record_config(cfg) == 2
    err = capsys.readouterr().err
    assert f"at most {MAX_RECORDERS}" in err and "c.yaml" in err
    assert sorted(os.listdir(work)) == ["c.yaml"]
    with pytest.raises(UsageError, match="at most"):
        RecorderGroup([RecordOptions(topics=["/a"], output_name=f"r{i}") for i in range(MAX_RECORDERS + 1)], live=False)


# --- a failed start: stop what started, remove only what this run created --------------------------------------
def test_start_failure_removes_only_this_runs_files(work, tmp_path, capsys):
    (work / "old.bag").write_bytes(b"from yesterday\n")
    (work / "r3.bag").write_bytes(b"someone else's\n")
    cfg = work / "c.yaml"
    cfg.write_text("recorders:\n" + "".join(f"  - {{topics: [/t{i}], output_name: r{i}, {STOP}}}\n" for i in range(6)))
    before = snapshot(work)
    sentinel = snapshot(tmp_path / "sentinel")
    assert record_config(cfg) == 2
    err = capsys.readouterr().err
    assert "recorders[3]" in err and "r3.bag exists" in err and "unexpected" not in err
    assert snapshot(work) == before
    assert snapshot(tmp_path / "sentinel") == sentinel


def test_ros2_start_failure_removes_only_this_runs_outputs(work, tmp_path, capsys):
    """``--ros2 --config``: recorder 2's rosbag2 directory exists: recorders 0 and 1 (a
    rosbag2 directory and an MCAP file, started on DDS) are stopped and their outputs
    removed; the existing directory and everything else stay."""
    pytest.importorskip("cyclonedds")
    (work / "r2").mkdir()
    (work / "r2" / "notes.txt").write_bytes(b"mine\n")
    cfg = work / "c.yaml"
    cfg.write_text(
        "recorders:\n  - {topics: [/t0], output_name: r0, min_space: 0}\n"
        "  - {topics: [/t1], output_name: r1.mcap, min_space: 0}\n  - {topics: [/t2], output_name: r2, min_space: 0}\n"
    )
    before = snapshot(work)
    assert record_config(cfg, "--ros2") == 2
    err = capsys.readouterr().err
    assert "recorders[2]" in err and "r2 exists" in err and "unexpected" not in err
    assert snapshot(work) == before


def test_thread_start_failure_is_clean(work, monkeypatch):
    """Starting the 5th writer thread fails (as under an address-space cap): the error is
    a WriteError, every recorder started is stopped and no file is left behind."""
    started = []
    real_start = threading.Thread.start

    def start(self):
        if self.name == "polybag-record-writer":
            if len(started) == 4:
                raise RuntimeError("can't start new thread")
            started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    opts = [RecordOptions(topics=[f"/t{i}"], output_name=f"r{i}.bag", min_space=0, quiet=True) for i in range(8)]
    group = RecorderGroup(opts, live=False)
    with pytest.raises(WriteError, match=r"recorders\[4\]: cannot start recording .*r4\.bag.*can't start new thread"):
        group.start()
    assert sorted(os.listdir(work)) == []
    assert all(not t.is_alive() for t in started)
    assert all(r.done.is_set() for r in group.recorders)


RLIMIT_SCRIPT = r"""
import os, resource, sys
from polybag.cli import main
vm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmSize:"):
        vm = int(line.split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + int(sys.argv[2]) * 1024 * 1024, resource.RLIM_INFINITY))
sys.exit(main(["record", "--config", sys.argv[1], "--master-uri", "http://127.0.0.1:9", "-q"]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc")
def test_many_recorders_under_an_address_space_cap(tmp_path):
    """64 recorders (the most a config may have) with a 160 MB address-space margin: thread
    stacks (8 MB each) run out part way; the command fails with one clear line and leaves
    no file.  (Should every recorder start after all, SIGINT ends the recording.)"""
    out = tmp_path / "out"
    out.mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("recorders:\n" + "".join(f"  - {{topics: [/t{i}], output_name: r{i}, min_space: 0}}\n" for i in range(MAX_RECORDERS)))
    proc = subprocess.Popen(
        [sys.executable, "-c", RLIMIT_SCRIPT, str(cfg), "160"], cwd=out, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        while proc.poll() is None and len(list(out.glob("*.active"))) < MAX_RECORDERS:
            threading.Event().wait(0.05)
        all_started = proc.poll() is None
        if all_started:
            proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "unexpected" not in err and "Traceback" not in err, err
    if all_started:  # (not what happens here: measured, the 4th recorder's thread fails)
        assert proc.returncode in (0, 1), err
        return
    assert proc.returncode == 3, err  # (a WriteError: the input is fine, the machine is not)
    assert "polybag record: error:" in err and "cannot start" in err
    assert os.listdir(out) == []


# --- the library: plan_outputs, and hypothesis over random configs ------------------------------------------
def test_library_paths_through_links_and_dot_dot(work):
    """Outside a config ``..`` is allowed: compared as the writer will open it, and a path
    the system cannot open is a WriteError naming it (never a bare OSError)."""
    (work / "d").mkdir()
    (work / "link").symlink_to("d")
    with pytest.raises(UsageError, match="same file"):
        plan_outputs([RecordOptions(output_name="d/../run"), RecordOptions(output_name="run.bag")])
    with pytest.raises(UsageError, match="same file"):
        plan_outputs([RecordOptions(output_name="link/run"), RecordOptions(output_name="d/run.bag")])
    (work / "d" / "e").mkdir()
    (work / "deep").symlink_to("d/e")
    # (after a symlinked folder, '..' is the link target's parent, as the system opens it)
    with pytest.raises(UsageError, match="same file"):
        plan_outputs([RecordOptions(output_name="deep/../run"), RecordOptions(output_name="d/run.bag")])
    assert len(plan_outputs([RecordOptions(output_name="deep/../run"), RecordOptions(output_name="run.bag")])) == 2
    (work / "d" / "e").rmdir()
    (work / "deep").unlink()
    group = RecorderGroup([RecordOptions(directory="link", output_name="d/../../x", min_space=0, quiet=True)], live=False)
    with pytest.raises(WriteError, match=r"cannot record to link/d/\.\./\.\./x\.bag"):
        group.start()
    assert sorted(os.listdir(work)) == ["d", "link"] and os.listdir(work / "d") == []


def test_plan_outputs_is_deterministic_and_keeps_given_options(work):
    a = RecordOptions(topics=["/a"])
    b = RecordOptions(topics=["/b"])
    planned = plan_outputs([a, b])
    assert planned[0] is a and planned[1] is not b and planned[1].name_tag == "rec1" and b.name_tag is None
    assert plan_outputs([a, b]) == planned
    with pytest.raises(UsageError, match="same file"):
        plan_outputs([RecordOptions(output_name="q"), RecordOptions(output_name=str(work / "q.bag"))])


_KEY_VALUES = st.sampled_from(
    ["output_name", "output_prefix", "directory", "split", "size", "duration", "buffsize", "chunksize", "limit",
     "min_space", "snapshot", "snapshot_window", "format", "topics", "exclude", "namespace"]
)  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from(["x", "x.bag", "./x", "x.mcap", "d/x", "d/../x", "..", "../x", "/", "", "5m", "1G", "bag", "mcap"]),
    st.text(max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(_KEY_VALUES, _VALUES, max_size=5), min_size=1, max_size=5))
def test_random_configs_give_usage_errors_or_distinct_outputs(work, entries):
    (work / "d").mkdir(exist_ok=True)
    cfg = work / "c.yaml"
    for e in entries:
        e.setdefault("topics", ["/a"])
    cfg.write_text(yaml.safe_dump({"recorders": entries}))
    try:
        recs = load_config(cfg)["recorders"]
    except UsageError as e:
        assert "c.yaml" in str(e)
        return
    # an absolute path in a config is allowed (the user's own disk layout); relative ones stay here
    absolute = any(
        isinstance(v, str) and v.startswith("/")
        for e in entries for k, v in e.items() if k in ("output_name", "output_prefix", "directory")
    )  # fmt: skip
    names = set()
    for o in recs:
        first = os.path.realpath(o.file_name(0 if o.split else None, 0.0))
        assert first not in names
        names.add(first)
        assert absolute or first.startswith(str(work.resolve()) + os.sep)


def test_existing_behaviour_named_outputs_still_record(work):
    """A config whose outputs are all distinct records every recorder to its own file."""
    cfg = write_config(
        work / "c.yaml",
        """\
        recorders:
          - {topics: [/a], output_name: a.bag, min_space: 0}
          - {topics: [/a], output_name: a.mcap, min_space: 0}
        """,
    )
    group = RecorderGroup(load_config(cfg)["recorders"], live=False, log=lambda _t: None)
    with group:
        assert _put(group, "/a", "hello", 1_700_000_000_000_000_000) == 2
    for name in ("a.bag", "a.mcap"):
        with polybag.open(work / name) as r:
            assert [bytes(m.data)[4:] for m in r.messages()] == [b"hello"]
    with pytest.raises(OutputExistsError):
        RecorderGroup(load_config(cfg)["recorders"], live=False, log=lambda _t: None).start()
    assert isinstance(OutputExistsError("x"), PolybagError)


# --- live: a real ROS 1 graph ------------------------------------------------------------------------------
@pytest.mark.live
@pytest.mark.skipif(not (shutil.which("rosmaster") and shutil.which("rostopic")), reason="Debian ROS 1 tools not installed")
def test_live_generated_names_keep_every_recorders_messages(tmp_path):
    """Two default-named recorders and two with one ``output_prefix`` on a live graph
    (each stops by itself after 5 messages): four files, each with its own topic."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ros1_graph import Graph, wait_for

    graph = Graph(tmp_path)
    try:
        cfg = write_config(
            tmp_path / "c.yaml",
            """\
            recorders:
              - {topics: [/a], limit: 5, min_space: 0}
              - {topics: [/b], limit: 5, min_space: 0}
              - {topics: [/a], output_prefix: crash, limit: 5, min_space: 0}
              - {topics: [/b], output_prefix: ./crash, limit: 5, min_space: 0}
            """,
        )
        graph.start(["rostopic", "pub", "-r", "20", "/a", "std_msgs/String", "data: a"])
        graph.start(["rostopic", "pub", "-r", "20", "/b", "std_msgs/String", "data: b"])
        wait_for(lambda: graph.publishers("/a") and graph.publishers("/b"), 120, "publishers")
        rec = graph.start([sys.executable, "-c", CLI, "record", "--config", str(cfg), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = rec.communicate(timeout=600)  # (a hang guard: -l 5 ends the recording by itself)
    finally:
        graph.close()
    assert rec.returncode == 0, err.decode()
    reps = __import__("json").loads(out)["recorders"]
    files = [rep["files"] for rep in reps]
    assert all(len(f) == 1 for f in files) and len({os.path.realpath(tmp_path / f[0]) for f in files}) == 4, files
    assert os.path.basename(files[1][0]).endswith("_rec1.bag") and os.path.basename(files[3][0]).endswith("_rec3.bag")
    for f, topic in zip(files, ["/a", "/b", "/a", "/b"]):
        with polybag.open(tmp_path / f[0]) as r:
            got = [(m.channel.topic, bytes(m.data)[4:]) for m in r.messages()]
        assert got == [(topic, topic[1:].encode())] * 5
    assert not list(tmp_path.glob("*.active"))
