"""The last small gaps of issue 27, at the user's level:

* converting a log whose ROS 2 types polybag does not know (rosbag2's own 2020 test bag:
  test_msgs, not bundled, no definitions in the bag) says once per type that it is written
  without a definition (exit 0: nothing was lost); with ``--types`` it is written with the
  full definition and nothing is said;
* ``split --at 5`` on a log of this century warns that ``+5`` was likely meant, as
  ``filter --start 5`` does;
* a record config's ``snapshot_window`` takes the time texts ``--snapshot-window`` takes,
  bounded, a mistake naming the file and the key;
* ``info`` of a rosbag2 bag shows a topic's lifespan (deadline, liveliness) when set.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import polybag
import polybag.codecs.ros2.store
from paths import ROOT
from polybag.cli import main
from polybag.codecs.type_set import TypeSet
from polybag.errors import UsageError
from polybag.formats.rosbag2.metadata import qos_summary
from polybag.record.group import load_config

CDR_TEST = ROOT / "tests" / "corpus" / "rosbag2" / "v4_cdr_test_2020-04"

TYPES = ("test_msgs/msg/Arrays", "test_msgs/msg/BasicTypes")

BASIC_TYPES = """\
bool bool_value
byte byte_value
char char_value
float32 float32_value
float64 float64_value
int8 int8_value
uint8 uint8_value
int16 int16_value
uint16 uint16_value
int32 int32_value
uint32 uint32_value
int64 int64_value
uint64 uint64_value
"""

SCALARS = ("bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
ARRAYS = (
    "".join(f"{t}[3] {t}_values\n" for t in SCALARS)
    + "string[3] string_values\nBasicTypes[3] basic_types_values\nConstants[3] constants_values\n"
    + "Defaults[3] defaults_values\n"
    + "".join(f"{t}[3] {t}_values_default\n" for t in SCALARS)
    + "string[3] string_values_default\nint32 alignment_check\n"
)
CONSTANTS = "bool BOOL_CONST=true\nint32 INT32_CONST=-123\n"
DEFAULTS = "".join(f"{t} {t}_value\n" for t in SCALARS)


@pytest.fixture(autouse=True)
def _own_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--types`` adds to the process's known types: each test starts without them."""
    monkeypatch.setattr(polybag.codecs.ros2.store, "_user", TypeSet("ros2"))


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if ": warning: " in line]


def _schemas(path: Path) -> dict[str, tuple[str, bytes]]:
    with polybag.open(path) as r:
        return {c.schema.name: (c.schema.encoding, bytes(c.schema.data)) for c in r.summary.channels.values() if c.schema}


def test_convert_of_unknown_types_warns_once_per_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.mcap"
    assert main(["convert", str(CDR_TEST), str(out)]) == 0
    warned = _warnings(capsys.readouterr().err)
    assert warned == [
        "polybag convert: warning: test_msgs/msg/Arrays on /array_topic is written without a definition "
        "(polybag has none: add it with --types DIR); other tools cannot decode it",
        "polybag convert: warning: test_msgs/msg/BasicTypes on /test_topic is written without a definition "
        "(polybag has none: add it with --types DIR); other tools cannot decode it",
    ]
    # nothing was lost: every message is there, with the (empty) schema the bag has
    with polybag.open(out) as r:
        assert sum(1 for _ in r.messages()) == 7
    assert {k: v[1] for k, v in _schemas(out).items()} == dict.fromkeys(TYPES, b"")


def test_rosbag2_output_and_split_say_it_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(CDR_TEST), str(tmp_path / "bag"), "-F", "rosbag2"]) == 0
    assert len(_warnings(capsys.readouterr().err)) == 2
    # a split into three parts names each type once, not once per part
    assert main(["split", str(CDR_TEST), "--at", "+0.05", "+0.1", "-o", str(tmp_path / "parts")]) == 0
    warned = _warnings(capsys.readouterr().err)
    assert len(os.listdir(tmp_path / "parts")) == 3
    assert sorted(w.split()[3] for w in warned if "without a definition" in w) == list(TYPES)


def test_convert_with_types_writes_full_definitions_and_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    msg = tmp_path / "ws" / "test_msgs" / "msg"
    msg.mkdir(parents=True)
    for name, text in (("BasicTypes", BASIC_TYPES), ("Arrays", ARRAYS), ("Constants", CONSTANTS), ("Defaults", DEFAULTS)):
        (msg / f"{name}.msg").write_text(text)
    out = tmp_path / "out.mcap"
    assert main(["convert", str(CDR_TEST), str(out), "--types", str(tmp_path / "ws")]) == 0
    assert _warnings(capsys.readouterr().err) == []
    schemas = _schemas(out)
    enc, basic = schemas["test_msgs/msg/BasicTypes"]
    assert enc == "ros2msg" and basic.decode().startswith(BASIC_TYPES.rstrip("\n"))
    _, arrays = schemas["test_msgs/msg/Arrays"]
    for part in ("int32 alignment_check", "MSG: test_msgs/msg/BasicTypes", "MSG: test_msgs/msg/Defaults"):
        assert part in arrays.decode()
    # the definition written decodes the messages as rosbag2's test wrote them
    with polybag.open(out) as r:
        basic = [d.int32_value for _m, d in r.decoded_messages(topics=["/test_topic"])]
        strings = [list(d.string_values) for _m, d in r.decoded_messages(topics=["/array_topic"])]
    assert basic == [123] * 3
    assert strings == [["Complex Hello1", "Complex Hello2", "Complex Hello3"]] * 4


def test_split_at_a_bare_number_warns_that_plus_was_meant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["split", str(CDR_TEST), "--at", "5", "-o", str(tmp_path / "p")]) == 0
    warned = _warnings(capsys.readouterr().err)
    assert any("'5' is 1970-01-01T00:00:05Z" in w and "'+5'" in w for w in warned), warned
    # a relative time says nothing of the kind
    assert main(["split", str(CDR_TEST), "--at", "+5", "-o", str(tmp_path / "q")]) == 0
    assert not any("'+5'" in w for w in _warnings(capsys.readouterr().err))


def _config(tmp_path: Path, window: str) -> Path:
    cfg = tmp_path / "rec.yaml"
    cfg.write_text(f"recorders:\n  - all: true\n    snapshot: true\n    snapshot_window: {window}\n")
    return cfg


@pytest.mark.parametrize(("window", "seconds"), [('"1.5m"', 90.0), ('"500ms"', 0.5), ("10", 10.0), ("2.5", 2.5), ('"+3s"', 3.0)])
def test_config_snapshot_window_takes_time_texts(tmp_path: Path, window: str, seconds: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    opts = load_config(_config(tmp_path, window))["recorders"][0]
    assert opts.snapshot_window == seconds
    assert opts.window_ns == int(seconds * 1e9)


@pytest.mark.parametrize("window", ['"soon"', '"-5"', "0", '"99999999999"', '"2026-01-01"', "true", "[1]", "1e300"])
def test_config_snapshot_window_mistakes_name_file_and_key(tmp_path: Path, window: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path, window)
    with pytest.raises(UsageError) as e:
        load_config(cfg)
    assert str(cfg) in str(e.value) and "snapshot_window" in str(e.value)


def test_qos_summary_shows_what_is_set() -> None:
    inf = "{sec: 2147483647, nsec: 4294967295}"
    base = "- history: 1\n  depth: 10\n  reliability: 1\n  durability: 2\n"
    defaults = base + f"  deadline: {inf}\n  lifespan: {{sec: 0, nsec: 0}}\n  liveliness: 1\n  liveliness_lease_duration: {inf}\n"
    assert qos_summary(defaults) == "reliable volatile keep_last(10)"
    int64_inf = "{sec: 9223372036, nsec: 854775807}"
    assert qos_summary(defaults.replace(f"deadline: {inf}", f"deadline: {int64_inf}")) == "reliable volatile keep_last(10)"
    full = base + (
        "  deadline: {sec: 0, nsec: 100000000}\n  lifespan: {sec: 10, nsec: 0}\n  liveliness: 3\n"
        "  liveliness_lease_duration: {sec: 2, nsec: 500000000}\n"
    )
    assert qos_summary(full) == (
        "reliable volatile keep_last(10) deadline(0.1s) lifespan(10s) manual_by_topic liveliness_lease(2.5s)"
    )


def test_info_of_a_real_bag_shows_rosout_lifespan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ros2 bag's own talker bag: /rosout is offered with a 10 s lifespan, the others with none
    bag = tmp_path / "bag"
    shutil.copytree(ROOT / "tests" / "corpus" / "rosbag2" / "v4_talker_py_2020-06", bag)
    assert main(["info", str(bag)]) == 0
    lines = {line.split("|")[0].split("Topic:")[-1].strip(): line for line in capsys.readouterr().out.splitlines() if "QoS:" in line}
    assert "lifespan(10s)" in lines["/rosout"]
    assert all("lifespan" not in v for k, v in lines.items() if k != "/rosout")
