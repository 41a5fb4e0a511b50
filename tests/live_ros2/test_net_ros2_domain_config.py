"""polybag's Cyclone DDS domain configuration: fragmentation for large messages in every
discovery range, and a user's ``CYCLONEDDS_URI`` merged after it (the user's settings win)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ros2_graph import cyclone_problem

from polybag.net.ros2 import cyclone_config
from polybag.net.ros2.graph import FRAGMENT_SIZE, MAX_MESSAGE_SIZE

FRAG = f"<FragmentSize>{FRAGMENT_SIZE}</FragmentSize><MaxMessageSize>{MAX_MESSAGE_SIZE}</MaxMessageSize>"


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"ROS_LOCALHOST_ONLY": "1"},
        {"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"},
        {"ROS_STATIC_PEERS": "10.0.0.2"},
    ],
)
def test_fragmentation_in_every_discovery_range(env: dict[str, str]) -> None:
    cfg = cyclone_config(env)
    assert cfg.count(FRAG) == 1 and cfg.count("<General>") == 1, cfg
    assert "," not in cfg  # (no user URI: polybag's XML alone)


def test_user_uri_comes_last() -> None:
    user = "file:///etc/my dds.xml,<CycloneDDS><Domain><General><MaxMessageSize>9000B</MaxMessageSize></General></Domain></CycloneDDS>"
    cfg = cyclone_config({"CYCLONEDDS_URI": f"  {user} "})
    assert cfg == f"{cyclone_config({})},{user}"
    assert cyclone_config({"CYCLONEDDS_URI": "  "}) == cyclone_config({})


_PROBE = """
import sys
from cyclonedds.domain import Domain, DomainParticipant
from polybag.net.ros2 import cyclone_config
cfg = cyclone_config()
d = Domain(int(sys.argv[1]), cfg)
p = DomainParticipant(int(sys.argv[1]))
print("ok")
"""


def _effective(tmp_path: Path, user: str | None) -> dict[str, str]:
    """Cyclone's effective General settings for polybag's configuration (its config trace)."""
    trace = tmp_path / "trace.log"
    tracing = (
        f'<CycloneDDS><Domain id="any"><Tracing><Verbosity>config</Verbosity>'
        f"<OutputFile>{trace}</OutputFile></Tracing></Domain></CycloneDDS>"
    )
    import os

    env = dict(os.environ)
    env["ROS_LOCALHOST_ONLY"] = "1"
    env["CYCLONEDDS_URI"] = f"{user},{tracing}" if user else tracing
    # (domain 200: outside the live tests' random 0..101)
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, "200"], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    text = trace.read_text()
    out = {}
    for name in ("FragmentSize", "MaxMessageSize"):
        m = re.search(rf"Domain/General/{name}/#text: ([^{{]+?) \{{", text)
        assert m, f"{name} not in the config trace"
        out[name] = m.group(1)
    return out


@pytest.mark.skipif(bool(cyclone_problem()), reason=cyclone_problem() or "cyclonedds")
def test_cyclone_applies_polybag_settings_and_user_overrides(tmp_path: Path) -> None:
    assert _effective(tmp_path, None) == {"FragmentSize": "8000 B", "MaxMessageSize": "65000 B"}
    user = tmp_path / "user.xml"
    user.write_text(
        '<CycloneDDS><Domain id="any"><General><MaxMessageSize>20000B</MaxMessageSize>'
        "</General></Domain></CycloneDDS>"
    )
    # the user's file overrides what it sets and keeps polybag's other settings
    assert _effective(tmp_path, f"file://{user}") == {"FragmentSize": "8000 B", "MaxMessageSize": "20000 B"}
