"""``polybag record --ros2``: a topic whose first publisher never described its type (its
type description service does not answer) takes the description a later publisher of the
same type gives, for the whole topic (rosbag2 sqlite3: the type's definition in the bag)."""

from __future__ import annotations

from pathlib import Path

import pytest
from record_helpers import check_late_described, record_late_description, typedesc_problem
from ros2_graph import cyclone_problem, ros2_env

pytestmark = pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")

needs_test_msgs = pytest.mark.skipif(bool(typedesc_problem()), reason=typedesc_problem() or "test_msgs")

N = 8


@needs_test_msgs
def test_later_publisher_description_is_used_for_the_whole_topic(tmp_path: Path) -> None:

    env = ros2_env()
    out = tmp_path / "late"
    log = tmp_path / "stderr.txt"
    args = ["record", "--ros2", "/arr", "/basic", "--type-timeout", "1.5", "-O", str(out), "--storage", "sqlite3"]
    code = record_late_description(args, env, log, N, 30)
    err = log.read_text(errors="replace")
    assert code == 0, err
    assert err.count("from a later publisher") == 2, err  # (/arr and /basic)
    check_late_described(out, err, N)
