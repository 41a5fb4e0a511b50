"""What ``polybag info`` shows of a ULog: the extras of its summary.  Its ``ulog_info``
layout is :mod:`polybag.cli.render`'s (from ``reader.ulog`` and these extras)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polybag.formats.ulog.facts import UlogData
from polybag.formats.ulog.subscriptions import SubscriptionEntry


def info_extras(u: UlogData, subscriptions: Sequence[SubscriptionEntry]) -> dict[str, Any]:
    """The ULog facts of ``polybag info`` (the summary's ``extras``) of a log's facts and
    subscriptions (their counts made)."""
    subs = []
    for s in subscriptions:
        assert s.type is not None
        subs.append(
            {
                "name": s.sub.name,
                "multi_id": s.sub.multi_id,
                "msg_id": s.sub.msg_id,
                "message_size": s.type.min_size,
                "count": s.count,
            }
        )
    return {
        "ulog_version": u.version,
        "start_timestamp_us": u.start_timestamp,
        "last_timestamp_us": u.last_timestamp,
        "duration_us": u.last_timestamp - u.start_timestamp,
        "compat_flags": list(u.compat_flags),
        "incompat_flags": list(u.incompat_flags),
        "appended_offsets": list(u.appended_offsets),
        "info": {k: (v.hex() if isinstance(v, bytes) else v) for k, v in u.info.items()},
        "info_multiple": {
            k: [[(x.hex() if isinstance(x, bytes) else x) for x in vs] for vs in v]
            for k, v in u.info_multiple.items()
        },
        "param_count": len(u.params),
        "default_param_counts": {str(k): len(v) for k, v in u.default_params.items()},
        "changed_param_count": len(u.changed_params),
        "logged_message_count": len(u.logged_messages),
        "dropouts": [{"timestamp_us": d.timestamp, "duration_ms": d.duration} for d in u.dropouts],
        "sync_count": u.sync_count,
        "subscriptions": subs,
        "corruptions": list(u.corruptions),
    }
