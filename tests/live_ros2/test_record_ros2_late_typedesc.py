"""``polybag record --ros2``: a topic whose first publisher never described its type (its
type description service does not answer) takes the description a later publisher of the
same type gives, for the whole topic (rosbag2 sqlite3: the type's definition in the bag)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ros2_graph import (
    POLYBAG,
    cyclone_problem,
    finish,
    node,
    rclpy_problem,
    ros2_env,
    wait_ready,
)

pytestmark = pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")


def _test_msgs_problem() -> str:
    try:
        import test_msgs.msg  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"ros-jazzy-test-msgs cannot be imported: {e}"
    return rclpy_problem()


needs_test_msgs = pytest.mark.skipif(bool(_test_msgs_problem()), reason=_test_msgs_problem() or "test_msgs")

N = 8


def _wait_text(path: Path, text: str, p: subprocess.Popen[str], timeout: float = 60) -> None:
    """Until ``text`` is in the file ``path`` (the recorder's stderr), bounded."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in path.read_text(errors="replace"):
            return
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the recorder did not say {text!r}:\n{path.read_text(errors='replace')}")


@needs_test_msgs
def test_later_publisher_description_is_used_for_the_whole_topic(tmp_path: Path) -> None:
    import polybag

    env = ros2_env()
    out = tmp_path / "late"
    log = tmp_path / "stderr.txt"
    args = ["record", "--ros2", "/arr", "/basic", "--type-timeout", "1.5", "-O", str(out), "--storage", "sqlite3"]
    with node("typed", N, "nospin", env=env) as first:
        wait_ready(first)
        with log.open("w") as err_file:
            rec = subprocess.Popen(
                [*POLYBAG, *args], env=env, stdout=subprocess.PIPE, stderr=err_file, text=True, start_new_session=True
            )
        try:
            code1, _out1, err1 = finish(first, 90)
            assert code1 == 0, err1
            _wait_text(log, "did not answer", rec)  # (the first N are written raw)
            with node("typed", N, env=env) as second:
                wait_ready(second)
                code2, _out2, err2 = finish(second, 90)
                assert code2 == 0, err2
            _wait_text(log, "from a later publisher", rec)
            rec.send_signal(signal.SIGINT)
            rec.communicate(timeout=30)
        finally:
            if rec.poll() is None:
                os.killpg(rec.pid, signal.SIGKILL)
                rec.communicate(timeout=10)
    err = log.read_text(errors="replace")
    assert rec.returncode == 0, err
    assert err.count("from a later publisher") == 2, err  # (/arr and /basic)
    with polybag.open(out) as r:
        msgs = list(r.messages(topics=["/basic"]))
        assert len(msgs) == 2 * N, err
        assert len(list(r.messages(topics=["/arr"]))) == 2 * N, err
        schemas = {bytes(m.channel.schema.data) for m in msgs if m.channel.schema is not None}
        assert len(schemas) == 1 and b"int16 int16_value" in next(iter(schemas)), schemas
        # every message decodes with it, the first publisher's too
        values = [m.decode().int16_value for m in msgs]
    assert sorted(values) == sorted([i - 100 for i in range(N)] * 2)
