"""What ``polybag info`` shows of a ULog: the extras of its summary.  Its ``ulog_info``
layout is :mod:`polybag.cli.render`'s (from ``reader.ulog`` and these extras).

:class:`_Info` is a part of :class:`~polybag.formats.ulog.reader.UlogReader` and works on its
state.
"""

from __future__ import annotations

from typing import Any

from polybag.formats.ulog.definitions import UlogData, _Sub


class _Info:
    """Info extras (a part of the ULog reader)."""

    #: ULog channels become ROS 1 in other formats (an MCAP written from a ULog gets the
    #: ``ros1`` profile)
    native_profile = "ros1"
    #: ``polybag info`` lays a ULog out as pyulog's ``ulog_info`` does: :mod:`polybag.cli.render`
    info_style = "ulog"
    ulog: UlogData
    _subs: list[_Sub]

    def info_extras(self) -> dict[str, Any]:
        """The ULog facts of ``polybag info`` (the summary's ``extras``)."""
        self._ensure_counts()
        u = self.ulog
        subs = []
        for s in self._subs:
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
