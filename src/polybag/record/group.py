"""Several recorders in one process, fed by one ROS node (``polybag record --config FILE``).

>>> from polybag.record import RecorderGroup, RecorderOptions
>>> group = RecorderGroup([                                             # doctest: +SKIP
...     RecorderOptions(topics=["/imu"], output_name="imu.bag"),
...     RecorderOptions(all=True, snapshot=True, snapshot_window=10, output_prefix="crash"),
... ])
>>> with group:                                                          # doctest: +SKIP
...     ...
...     group.trigger()      # every snapshot recorder writes a new file (futures of the paths)

One :class:`~polybag.record.live.LiveSource` subscribes once per topic and hands every
message to each recorder that selects it.  :meth:`RecorderGroup.close` stops the source,
then finishes every recorder's file.

The YAML file of ``--config`` is ``recorders:``, a list of mappings whose keys are the CLI's
long option names (``output_name`` or ``output-name``): see :func:`load_config`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from polybag.errors import UsageError
from polybag.record.live import LiveSource, Member
from polybag.record.options import RecordOptions
from polybag.record.recorder import Recorder, _remove_if_unwritten

# key -> (RecordOptions field, kind); kinds: bool, int, float, str, topics, duration, size
_KEYS: dict[str, tuple[str, str]] = {
    "topics": ("topics", "topics"),
    "topic": ("topics", "topics"),
    "all": ("all", "bool"),
    "regex": ("regex", "bool"),
    "exclude": ("exclude", "str"),
    "quiet": ("quiet", "bool"),
    "publish": ("publish", "bool"),
    "output_prefix": ("output_prefix", "str"),
    "output_name": ("output_name", "str"),
    "split": ("split", "split"),
    "max_splits": ("max_splits", "int"),
    "size": ("size", "float"),
    "duration": ("duration", "duration"),
    "buffsize": ("buffsize", "float"),
    "chunksize": ("chunksize", "int"),
    "limit": ("limit", "int"),
    "min_space": ("min_space", "size"),
    "bz2": ("bz2", "bool"),
    "lz4": ("lz4", "bool"),
    "compression": ("compression", "compression"),
    "node": ("node", "str"),
    "tcpnodelay": ("tcpnodelay", "bool"),
    "udp": ("udp", "bool"),
    "repeat_latched": ("repeat_latched", "bool"),
    "snapshot": ("snapshot", "bool"),
    "snapshot_window": ("snapshot_window", "float"),
    "namespace": ("namespace", "str"),
    "format": ("format", "str"),
    "directory": ("directory", "str"),
}


def _value(where: str, key: str, kind: str, value: Any) -> Any:
    def bad(expected: str) -> UsageError:
        return UsageError(f"{where}: {key}: expected {expected}, got {value!r}")

    if kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        return float(value)
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
        return value
    if kind == "topics":
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
            raise bad("a topic or a list of topics")
        return list(value)
    if kind in ("duration", "size"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise bad("a number or a text such as 5m / 1G")
        return value
    raise AssertionError(kind)  # pragma: no cover


def options_from_mapping(entry: Mapping[str, Any], where: str = "recorder") -> RecordOptions:
    """One ``recorders:`` entry (CLI long option names, ``-`` or ``_``) as :class:`RecordOptions`."""
    if not isinstance(entry, Mapping):
        raise UsageError(f"{where}: expected a mapping of options, got {type(entry).__name__}")
    kw: dict[str, Any] = {}
    for raw_key, value in entry.items():
        if not isinstance(raw_key, str):
            raise UsageError(f"{where}: option names are text, got {raw_key!r}")
        key = raw_key.strip().lstrip("-").replace("-", "_")
        spec = _KEYS.get(key)
        if spec is None:
            raise UsageError(
                f"{where}: unknown option {raw_key!r} (use the long option names of polybag record)"
            )
        field, kind = spec
        if kind == "split":  # true/false, or rosbag's --split=MB
            if isinstance(value, bool):
                kw["split"] = value
            else:
                mb = _value(where, key, "float", value)
                kw["split"] = True
                kw.setdefault("size", mb)
            continue
        if kind == "compression":
            text = _value(where, key, "str", value).lower()
            if text not in ("none", "bz2", "lz4"):
                raise UsageError(f"{where}: compression: expected none, bz2 or lz4, got {value!r}")
            kw["bz2"] = text == "bz2"
            kw["lz4"] = text == "lz4"
            continue
        if field == "topics":
            kw["topics"] = kw.get("topics", []) + _value(where, key, kind, value)
            continue
        kw[field] = _value(where, key, kind, value)
    opts = RecordOptions(**kw)
    opts.validate(live=True)
    return opts


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``--config`` YAML file: ``{"recorders": [RecordOptions...], "master_uri": ...,
    "namespace": ..., "node_name": ...}``.  Every mistake is a UsageError naming the entry."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - a dependency
        raise UsageError("--config needs PyYAML (pip install pyyaml)") from None
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise UsageError(f"cannot read the config {name}: {e.strerror or e}") from None
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        raise UsageError(f"{name}: not valid YAML: {str(e)[:300]}") from None
    if not isinstance(doc, dict) or "recorders" not in doc:
        raise UsageError(f"{name}: expected a mapping with a 'recorders:' list")
    unknown = set(doc) - {"recorders", "master_uri", "namespace", "node_name"}
    if unknown:
        raise UsageError(f"{name}: unknown top-level key(s) {sorted(map(str, unknown))}")
    entries = doc["recorders"]
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{name}: 'recorders:' must be a non-empty list")
    out: dict[str, Any] = {}
    for key in ("master_uri", "namespace", "node_name"):
        if key in doc:
            out[key] = _value(name, key, "str", doc[key])
    out["recorders"] = [options_from_mapping(e, f"{name}: recorders[{i}]") for i, e in enumerate(entries)]
    return out


class RecorderGroup:
    """Several :class:`~polybag.record.recorder.Recorder` fed by one ROS node.

    ``recorders``: :class:`RecordOptions` (a recorder is made for each) or recorders made
    without a source.  ``live=False`` makes an in-process group: :meth:`write` hands each
    message to every recorder that selects it.  ``log(text)`` replaces the console output.
    """

    def __init__(
        self,
        recorders: Iterable[RecordOptions | Recorder],
        *,
        master_uri: str | None = None,
        node: Any = None,
        poll: float = 1.0,
        live: bool = True,
        node_name: str = "/record",
        namespace: str | None = None,
        log: Any = None,
    ) -> None:
        self.source: LiveSource | None = (
            LiveSource(
                None,
                master_uri=master_uri,
                node=node,
                poll=poll,
                node_name=node_name,
                namespace=namespace or "",
            )
            if live
            else None
        )
        self.recorders: list[Recorder] = []
        for r in recorders:
            member = Member(self.source) if self.source is not None else None
            if isinstance(r, RecordOptions):
                rec = Recorder(r, member, log=log)
            elif isinstance(r, Recorder):
                if r.source is not None and member is not None:
                    raise UsageError(
                        "a recorder of a group takes its messages from the group (made without a source)"
                    )
                rec = r
                rec.source = member
            else:
                raise UsageError(f"RecorderGroup takes RecordOptions or Recorder, not {type(r).__name__}")
            self.recorders.append(rec)
        if not self.recorders:
            raise UsageError("a recorder group needs at least one recorder")
        names = [r.options.output_name for r in self.recorders if r.options.output_name]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UsageError(f"two recorders write the same file: {sorted(dup)[0]}")
        self._started = False

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> RecorderGroup:
        """Start every recorder, then subscribe (once per topic)."""
        if self._started:
            return self
        self._started = True
        try:
            for rec in self.recorders:
                rec.start()
            if self.source is not None:
                self.source.start()
        except BaseException:
            self.close(raise_errors=False)
            for rec in self.recorders:
                _remove_if_unwritten(rec.report(), rec.files)
            raise
        return self

    @property
    def done(self) -> bool:
        """Every recorder has ended (by itself: -l, --duration without --split, disk full)."""
        return all(r.done.is_set() for r in self.recorders)

    def write(self, topic: str, data: bytes | bytearray | memoryview, type: str, **kw: Any) -> int:  # noqa: A002
        """In-process: hand one message to every recorder; how many took it."""
        if not self._started:
            self.start()
        return sum(1 for r in self.recorders if r.write(topic, data, type, **kw))

    def trigger(self, path_prefix: str | None = None) -> list[Future[Path]]:
        """Trigger every snapshot recorder (each returns at once; see :meth:`Recorder.trigger`)."""
        out: list[Future[Path]] = []
        for i, r in enumerate(self.recorders):
            if r.options.snapshot:
                out.append(r.trigger(None if path_prefix is None else f"{path_prefix}_{i}"))
        return out

    def stop(self) -> None:
        """Stop the source (no more messages), then every recorder."""
        if self.source is not None:
            self.source.stop()
        for r in self.recorders:
            r.stop()

    def close(self, *, raise_errors: bool = True) -> list[dict[str, Any]]:
        """Stop, and finish every recorder's file; their reports, in order."""
        self.stop()
        reports = [r.close(raise_errors=False) for r in self.recorders]
        if raise_errors:
            for r in self.recorders:
                if r.errors:
                    r.close()  # raises the WriteError
        return reports

    def __enter__(self) -> RecorderGroup:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(raise_errors=exc_type is None)

    def report(self) -> dict[str, Any]:
        """Every recorder's report, and what the shared source met."""
        src = self.source
        return {
            "recorders": [r.report() for r in self.recorders],
            "source": {
                "errors": list(src.errors) if src is not None else [],
                "reregistrations": src.reregistrations if src is not None else 0,
            },
        }
