"""What ``polybag info`` shows of a ULog: the extras of its summary and the text
``ulog_info -v`` prints.

:class:`_Info` is a part of :class:`~polybag.formats.ulog.reader.UlogReader` and works on its
state.
"""

from __future__ import annotations

from typing import Any

from polybag.formats.ulog.definitions import UlogData, _Sub


class _Info:
    """Info extras and text (a part of the ULog reader)."""

    #: ULog channels become ROS 1 in other formats (an MCAP written from a ULog gets the
    #: ``ros1`` profile)
    native_profile = "ros1"
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

    def info_text(self, verbose: bool = True) -> str:
        """What ``ulog_info -v`` prints: start, duration, dropouts, info, subscriptions."""
        u = self.ulog
        lines = []
        if u.file_corruption:
            lines.append("Warning: file has data corruption(s)")

        def hms(us: int) -> str:
            m, s = divmod(int(us / 1e6), 60)
            h, m = divmod(m, 60)
            return f"{h:d}:{m:02d}:{s:02d}"

        lines.append(
            f"Logging start time: {hms(u.start_timestamp)}, duration: {hms(u.last_timestamp - u.start_timestamp)}"
        )
        durs = [d.duration for d in u.dropouts]
        if not durs:
            lines.append("No Dropouts")
        else:
            lines.append(
                f"Dropouts: count: {len(durs)}, total duration: {sum(durs) / 1000.0:.1f} s, "
                f"max: {max(durs)} ms, mean: {int(sum(durs) / len(durs))} ms"
            )
        ver = u.version_info_str()
        if ver is not None:
            lines.append(f"SW Version: {ver}")
        lines.append("Info Messages:")
        for k in sorted(u.info):
            if verbose or not k.startswith("perf_"):
                lines.append(f" {k}: {u.info[k]}")
        if u.info_multiple:
            if verbose:
                lines.append("Info Multiple Messages:")
                for k in sorted(u.info_multiple):
                    lines.append(f" {k}: {u.info_multiple[k]}")
            else:
                lines.append(
                    "Info Multiple Messages: "
                    + ", ".join(f"[{k}: {len(u.info_multiple[k])}]" for k in sorted(u.info_multiple))
                )
        lines.append("")
        lines.append(
            "{:<41} {:7}, {:10}".format(
                "Name (multi id, message size in bytes)", "number of data points", "total bytes"
            )
        )
        self._ensure_counts()
        rows = [s for s in self._subs if s.count]
        rows.sort(key=lambda s: s.sub.name + str(s.sub.multi_id))
        for s in rows:
            assert s.type is not None
            size = s.type.min_size
            cnt = s.count
            name_id = f"{s.sub.name} ({s.sub.multi_id}, {size})"
            lines.append(f" {name_id:<40} {cnt:7d} {size * cnt:10d}")
        return "\n".join(lines)
