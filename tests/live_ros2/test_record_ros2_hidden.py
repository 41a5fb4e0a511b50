"""Which topics ``Ros2Source`` takes: hidden ones (a name part starting with ``_``) only when
named, or with ``include_hidden`` (``--include-hidden-topics``), as ``ros2 bag record``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from polybag.record.live_ros2 import Ros2Source
from polybag.record.options import RecordOptions


def _source(include_hidden: bool, **opts: object) -> Ros2Source:
    o = RecordOptions(quiet=True, **opts)  # type: ignore[arg-type]
    src = Ros2Source(o, include_hidden=include_hidden, log=lambda _text: None)
    rec = SimpleNamespace(options=o)
    src._recs = (rec,)
    src._rec_done[id(rec)] = set()
    return src


HIDDEN = ["/_hidden", "/vis/_priv/x", "/fib/_action/status", "/add/_service_event"]


@pytest.mark.parametrize("opts", [{"all": True}, {"regex": True, "topics": [".*"]}])
def test_all_and_regex_skip_hidden_topics_unless_asked(opts: dict) -> None:
    src = _source(False, **opts)
    assert src._wanted("/chatter") and src._wanted("/a_b/c_")
    assert not any(src._wanted(t) for t in HIDDEN)
    src = _source(True, **opts)
    assert all(src._wanted(t) for t in HIDDEN)


def test_named_hidden_topic_is_taken_and_exclude_still_applies() -> None:
    src = _source(False, topics=["/_hidden"])
    assert src._wanted("/_hidden") and not src._wanted("/vis/_priv/x")
    src = _source(True, all=True, exclude="/_hid.*")
    assert not src._wanted("/_hidden") and src._wanted("/vis/_priv/x")
