"""``polybag info FILE --yaml``: rosbag's layout for bags, the --json dict as YAML otherwise."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import polybag
from paths import CORPORA
from polybag.cli import main, render
from polybag.cli.info import to_yaml

BAG = CORPORA / "rosbag" / "foxglove-rosbag" / "example-lz4.bag"
OTHERS = [
    CORPORA / "ulog" / "sample.ulg",
    CORPORA / "mcap-samples" / "lichtblick" / "example.mcap",
]


def test_bag_yaml_is_the_rosbag_layout(capsys):
    assert main(["info", "--yaml", str(BAG)]) == 0
    out = capsys.readouterr().out
    with polybag.open(BAG) as r:
        assert out == render.info_yaml(r)
        n = r.summary.message_count
    doc = yaml.safe_load(out)
    assert doc["messages"] == n
    assert doc["compression"] == "lz4"
    assert {t["topic"] for t in doc["topics"]}


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_other_formats_yaml_has_rosbags_keys(path, capsys):
    # issue 27: --yaml gives rosbag info --yaml's keys for every format (not the --json dict)
    assert main(["info", "--json", str(path)]) == 0
    want = json.loads(capsys.readouterr().out)
    assert main(["info", "--yaml", str(path)]) == 0
    out = capsys.readouterr().out
    doc = yaml.safe_load(out)
    assert {"path", "version", "duration", "start", "end", "size", "messages", "compression", "types", "topics"} <= set(doc)
    assert doc["messages"] == want["message_count"] and doc["size"] == want["file_size"]
    assert not out.lstrip().startswith("{")  # block style, not JSON


def test_json_and_yaml_exclusive(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info", "--json", "--yaml", str(BAG)])
    assert e.value.code == 2


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(d=st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), JSONISH, max_size=5))
def test_to_yaml_round_trips(d):
    assert yaml.safe_load(to_yaml(d)) == (d if d else {})
