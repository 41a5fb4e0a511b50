"""Every operation that writes a bag turns ROS 2 (CDR) messages into ROS 1 ones, as convert does.

filter, sort, recover, merge and split copy through the same channel map as convert
(:class:`polybag.bridges.ChannelMap`), so a ROS 2 input written to a bag keeps every
message, with the values convert gives, instead of dropping the CDR channels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybag
from ops_helpers import CORPORA
from polybag import ops
from polybag.codecs import message_to_dict

SAMPLE = CORPORA / "mcap-samples" / "rosbag2" / "cdr_test" / "cdr_test_0.mcap"


def _contents(path: Path) -> list[tuple[str, int, str, object]]:
    with polybag.open(path) as r:
        return [
            (m.channel.topic, m.log_time, m.channel.metadata.get("md5sum", ""), message_to_dict(m.channel, m.data))
            for m in r.messages()
        ]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, int, str, object]]:
    out = tmp_path_factory.mktemp("conv") / "c.bag"
    r = ops.convert(SAMPLE, out)
    assert r.dropped_messages == 0 and r.messages > 0
    return _contents(out)


@pytest.mark.parametrize("op", ["filter", "sort", "recover"])
def test_one_input_ops_convert_cdr_into_a_bag(op: str, tmp_path: Path, converted: list) -> None:
    out = tmp_path / "o.bag"
    r = getattr(ops, op)(SAMPLE, out)
    assert r.dropped_messages == 0 and not r.dropped_topics
    got = _contents(out)
    if op == "filter":  # file order; the others log-time order, like convert's input here
        got.sort(key=lambda x: x[1])
    assert sorted(got, key=lambda x: (x[1], x[0])) == sorted(converted, key=lambda x: (x[1], x[0]))
    assert all(md5 for _, _, md5, _ in got)


def test_merge_of_ros2_and_ros1_into_a_bag(tmp_path: Path, converted: list) -> None:
    bag = tmp_path / "ros1.bag"
    ops.convert(SAMPLE, bag)
    out = tmp_path / "m.bag"
    r = ops.merge(out, [SAMPLE, bag])
    assert r.dropped_messages == 0
    got = _contents(out)
    assert len(got) == 2 * len(converted)
    assert sorted(got, key=lambda x: (x[1], x[0])) == sorted(converted * 2, key=lambda x: (x[1], x[0]))


def test_split_into_bags_converts_every_part(tmp_path: Path, converted: list) -> None:
    r = ops.split(SAMPLE, at=["+0.0001"], output_dir=tmp_path, format="bag")
    assert r.dropped_messages == 0
    got = [x for p in r.parts for x in _contents(Path(p.path))]
    assert sorted(got, key=lambda x: (x[1], x[0])) == sorted(converted, key=lambda x: (x[1], x[0]))


def test_an_mcap_output_keeps_cdr_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "f.mcap"
    ops.filter(SAMPLE, out)
    with polybag.open(SAMPLE) as a, polybag.open(out) as b:
        assert [(m.channel.message_encoding, bytes(m.data)) for m in b.messages()] == [
            (m.channel.message_encoding, bytes(m.data)) for m in a.messages()
        ]


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_convert_to_rosbag2_storage_from_the_cli(storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``convert IN OUTDIR --storage S``: an output without an extension is a rosbag2 bag
    directory, written with the storage asked for, read back by rosbags message for message."""
    from rosbags.rosbag2 import Reader as RosbagsReader

    from polybag.cli import main

    out = tmp_path / "run"
    assert main(["convert", str(SAMPLE), str(out), "--storage", storage]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert "metadata.yaml" in files and any(f.endswith(".db3" if storage == "sqlite3" else ".mcap") for f in files)
    with polybag.open(SAMPLE) as a:
        want = [(m.channel.topic, m.log_time, bytes(m.data)) for m in a.messages()]
    with RosbagsReader(out) as rb:
        got = [(c.topic, t, bytes(d)) for c, t, d in rb.messages()]
    assert got == want


def test_storage_does_not_apply_to_other_formats(tmp_path: Path) -> None:
    from polybag.errors import PolybagError

    with pytest.raises(PolybagError, match="storage"):
        ops.filter(SAMPLE, tmp_path / "x.mcap", storage="sqlite3")
    assert not (tmp_path / "x.mcap").exists() and not (tmp_path / "x.mcap.active").exists()
