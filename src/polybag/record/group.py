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
long option names (``output_name`` or ``output-name``): see :func:`load_config`.  A config is
untrusted input: it is read bounded (:data:`MAX_CONFIG_BYTES`, YAML events and alias
expansion capped by :data:`MAX_CONFIG_NODES`, nesting by :data:`MAX_CONFIG_DEPTH`), at most
:data:`MAX_RECORDERS` recorders, every value checked (unknown or repeated keys, types,
finite numbers in range, text without control characters, relative paths that stay in the
current directory), and :func:`plan_outputs` makes sure no two recorders of a group ever
write one file: normalized absolute paths are compared (the writer's extension added,
symlinked folders resolved, any date and split number), recorders whose date names would
meet get ``_recN`` after the date, and two explicit names that meet are refused.  If a
recorder cannot start, those started are stopped and only the files this start created
are removed (:func:`start_all`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from polybag.errors import OutputExistsError, UsageError, WriteError
from polybag.formats import registry
from polybag.record.files import NameRegistry
from polybag.record.live import LiveSource, Member
from polybag.record.options import (
    MAX_PATH,
    MAX_SECONDS,
    MAX_TOPICS,
    RecordOptions,
    check_number,
    check_text,
    parse_snapshot_window,
    stamp,
)
from polybag.record.recorder import Recorder, remove_unwritten, start_failure
from polybag.selection import parse_duration

# key -> (RecordOptions field, kind); kinds: bool, int, float, seconds, str, topics, duration, size
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
    "snapshot_window": ("snapshot_window", "window"),
    "namespace": ("namespace", "str"),
    "format": ("format", "str"),
    "directory": ("directory", "str"),
}


#: the largest ``--config`` file read (bytes)
MAX_CONFIG_BYTES = 1 << 20
#: the most YAML nodes a config may hold, aliases counted as often as they are used
MAX_CONFIG_NODES = 100_000
#: the deepest nesting of a config
MAX_CONFIG_DEPTH = 32
#: the most recorders one config (or group) may run: each has a writer thread and a buffer
MAX_RECORDERS = 64


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _value(where: str, key: str, kind: str, value: Any) -> Any:
    def bad(expected: str) -> UsageError:
        return UsageError(f"{where}: {key}: expected {expected}, got {_shown(value)}")

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
        try:
            return float(value)
        except OverflowError:
            raise bad("a number of sane size") from None
    if kind == "window" and isinstance(value, str) and ":" in value:  # PRE:POST or :POST, as --snapshot-window
        check_text(f"{where}: {key}", value, limit=100)
        try:
            pre, post = parse_snapshot_window(value)
            for part in (pre, post):
                if part is not None:
                    check_number(f"{where}: {key}", part, high=MAX_SECONDS, positive=True)
        except UsageError as e:
            raise UsageError(f"{where}: {key}: {e}") from None
        return value
    if kind in ("seconds", "window"):  # a number of seconds, or a text as --snapshot-window takes ("1.5m", "500ms")
        if isinstance(value, str):
            check_text(f"{where}: {key}", value, limit=100)
            try:
                value = parse_duration(value) / 1e9
            except UsageError as e:
                raise UsageError(f"{where}: {key}: {e}") from None
        seconds = _value(where, key, "float", value)
        return check_number(f"{where}: {key}", seconds, high=MAX_SECONDS, positive=True)
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
        return check_text(f"{where}: {key}", value, limit=MAX_PATH)
    if kind == "topics":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
            raise bad("a topic or a list of topics")
        if len(value) > MAX_TOPICS:
            raise UsageError(f"{where}: {key}: at most {MAX_TOPICS} topics ({len(value)} given)")
        return [check_text(f"{where}: {key}", t, empty=False) for t in value]
    if kind in ("duration", "size"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise bad("a number or a text such as 5m / 1G")
        if isinstance(value, str):
            check_text(f"{where}: {key}", value, limit=100)
        return value
    raise AssertionError(kind)  # pragma: no cover


def _inside(where: str, key: str, path: str | None) -> None:
    """A relative path of a config stays inside the current directory: no ``..`` in it at
    all (after a symlinked folder ``..`` would lead elsewhere than it reads)."""
    if path is None or os.path.isabs(path):
        return
    if ".." in path.replace("\\", "/").split("/"):
        raise UsageError(
            f"{where}: {key}: {path!r}: a config's relative paths may not use '..' "
            "(they stay inside the current directory; write an absolute path to record elsewhere)"
        )


def options_from_mapping(entry: Mapping[str, Any], where: str = "recorder", *, confined: bool = False) -> RecordOptions:
    """One ``recorders:`` entry (CLI long option names, ``-`` or ``_``) as :class:`RecordOptions`.

    ``confined`` (a config file's entries): relative ``output_name``, ``output_prefix`` and
    ``directory`` may not use ``..`` (they stay inside the current directory).
    """
    if not isinstance(entry, Mapping):
        raise UsageError(f"{where}: expected a mapping of options, got {type(entry).__name__}")
    kw: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for raw_key, value in entry.items():
        if not isinstance(raw_key, str):
            raise UsageError(f"{where}: option names are text, got {_shown(raw_key)}")
        key = raw_key.strip().lstrip("-").replace("-", "_")
        spec = _KEYS.get(key)
        if spec is None:
            raise UsageError(
                f"{where}: unknown option {_shown(raw_key)} (use the long option names of polybag record)"
            )
        field, kind = spec
        if key in seen and key not in ("topic", "topics"):
            raise UsageError(f"{where}: option {key} given twice ({seen[key]!r} and {raw_key!r})")
        seen[key] = raw_key
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
                raise UsageError(f"{where}: compression: expected none, bz2 or lz4, got {_shown(value)}")
            kw["bz2"] = text == "bz2"
            kw["lz4"] = text == "lz4"
            continue
        if field == "topics":
            kw["topics"] = kw.get("topics", []) + _value(where, key, kind, value)
            if len(kw["topics"]) > MAX_TOPICS:
                raise UsageError(f"{where}: at most {MAX_TOPICS} topics ({len(kw['topics'])} given)")
            continue
        kw[field] = _value(where, key, kind, value)
    try:
        opts = RecordOptions(**kw)
        opts.validate(live=True)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None
    if confined:
        for key in ("directory", "output_name", "output_prefix"):
            _inside(where, key, getattr(opts, key))
    return opts


def _read_config(name: str) -> str:
    """The text of config file ``name``, at most :data:`MAX_CONFIG_BYTES`."""
    try:
        with open(name, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise UsageError(f"cannot read the config {name}: {e.strerror or e}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise UsageError(f"{name}: the config is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{name}: not UTF-8 text (offset {e.start})") from None


def load_yaml_bounded(text: str, name: str) -> Any:
    """The config's YAML through :func:`polybag.util.safe_yaml.load`, held to the config's bounds
    (:data:`MAX_CONFIG_NODES` nodes with aliases expanded, :data:`MAX_CONFIG_DEPTH` levels,
    :data:`MAX_CONFIG_BYTES`) and refusing a key given twice; every problem is a
    :class:`UsageError` naming ``name``."""
    from polybag.util.safe_yaml import load

    return load(
        text, name, max_nodes=MAX_CONFIG_NODES, max_bytes=MAX_CONFIG_BYTES, max_depth=MAX_CONFIG_DEPTH,
        error=UsageError, unique_keys=True,
    )


def load_config(path: str | os.PathLike[str], *, ros2: bool = False) -> dict[str, Any]:
    """Read a ``--config`` YAML file: ``{"recorders": [RecordOptions...], "master_uri": ...,
    "namespace": ..., "node_name": ...}``.  Every mistake is a UsageError naming the file
    and the entry.

    Bounded: the file at most :data:`MAX_CONFIG_BYTES`, its YAML at most
    :data:`MAX_CONFIG_NODES` nodes with aliases expanded, at most :data:`MAX_RECORDERS`
    recorders; every value checked (types, finite numbers in range, text without control
    characters, relative paths inside the current directory), unknown or repeated keys
    refused, and no two recorders writing one file (:func:`plan_outputs`)."""
    name = os.fspath(path)
    doc = load_yaml_bounded(_read_config(name), name)
    if not isinstance(doc, dict) or "recorders" not in doc:
        raise UsageError(f"{name}: expected a mapping with a 'recorders:' list")
    unknown = set(doc) - {"recorders", "master_uri", "namespace", "node_name"}
    if unknown:
        raise UsageError(f"{name}: unknown top-level key(s) {_shown(sorted(map(str, unknown)))}")
    entries = doc["recorders"]
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{name}: 'recorders:' must be a non-empty list")
    if len(entries) > MAX_RECORDERS:
        raise UsageError(f"{name}: {len(entries)} recorders; at most {MAX_RECORDERS} in one config")
    out: dict[str, Any] = {}
    for key in ("master_uri", "namespace", "node_name"):
        if key in doc:
            out[key] = _value(name, key, "str", doc[key])
    if "namespace" in out and not re.fullmatch(r"/?([A-Za-z]\w*(/[A-Za-z]\w*)*/?)?", out["namespace"]):
        raise UsageError(f"{name}: namespace {out['namespace']!r} is not a ROS namespace (/robot1)")
    if "node_name" in out and not re.fullmatch(r"/?[A-Za-z~][\w/]*", out["node_name"]):
        raise UsageError(f"{name}: node_name {out['node_name']!r} is not a ROS node name (/record)")
    if "master_uri" in out and not re.fullmatch(r"https?://[^\s/]+/?", out["master_uri"]):
        raise UsageError(f"{name}: master_uri {out['master_uri']!r}: expected http://HOST:PORT")
    recorders = [options_from_mapping(e, f"{name}: recorders[{i}]", confined=True) for i, e in enumerate(entries)]
    out["recorders"] = plan_outputs(recorders, ros2=ros2, where=name)
    return out


# --- output paths: no two recorders of a group write one file -----------------------------------

_STAMP = r"\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d"
_SAMPLE_STAMP = "2000-01-01-00-00-00"


def _output_shape(o: RecordOptions, ros2: bool) -> tuple[str, str]:
    """A sample path of what ``o`` writes (a fixed date, split part 0) and a regular
    expression of every path it can write (any date, any part), both normalized absolute
    (the folder's symlinks resolved)."""
    from polybag.record.files import path_key

    sample = o.file_name(0 if o.split else None, 0.0)
    ext = o.extension
    if ros2 and not registry.get(o.ros2_format).extensions:
        sample = sample[: -len(ext)] if sample.endswith(ext) else sample
        ext = ""  # a rosbag2 bag: a directory
    stem = sample[: len(sample) - len(ext)] if ext else sample
    if o.split:
        stem = stem[: -len("_0")]
    key = path_key(stem + ext)
    folder = os.path.dirname(key)
    base = os.path.basename(stem)
    if o.name_tag:
        base = base[: -len("_" + o.name_tag)]
    pieces = []
    if o.dated:
        given = base[: -len(stamp(0.0))].rstrip("_") if base.endswith(stamp(0.0)) else base
        if given:
            pieces.append(re.escape(given))
        pieces.append(_STAMP)
        sample_base = "_".join(([given] if given else []) + [_SAMPLE_STAMP])
    else:
        pieces.append(re.escape(base))
        sample_base = base
    if o.name_tag:
        pieces.append(re.escape(o.name_tag))
        sample_base += "_" + o.name_tag
    regex = re.escape(folder + os.sep) + "_".join(pieces) + (r"_\d+" if o.split else "")
    regex += (r"(-\d+)?" if o.dated or o.split or o.snapshot else "") + re.escape(ext)
    sample_path = os.path.join(folder, sample_base + ("_0" if o.split else "") + ext)
    return sample_path, regex


def _collide(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return bool(re.fullmatch(b[1], a[0]) or re.fullmatch(a[1], b[0]))


def plan_outputs(options: list[RecordOptions], *, ros2: bool = False, where: str = "") -> list[RecordOptions]:
    """Make sure no two of ``options`` write one file: compare their output paths
    (normalized, absolute, folder symlinks resolved, the extension the writer adds,
    generated names with any date and split number).  Recorders whose names carry the date
    and would meet (two default names, one ``output_prefix``) are told apart
    deterministically: the later ones get ``_recN`` (N: their place in the list) after the
    date.  Two that still meet are a :class:`UsageError`.  Returns the options (copies
    where a tag was added)."""
    from dataclasses import replace

    if len(options) > MAX_RECORDERS:
        raise UsageError(f"{where + ': ' if where else ''}{len(options)} recorders; at most {MAX_RECORDERS} in one group")
    out = list(options)
    for o in out:
        o.validate()
    shapes = [_output_shape(o, ros2) for o in out]
    for i in range(len(out)):
        if out[i].dated and any(_collide(shapes[i], shapes[j]) for j in range(i)):
            out[i] = replace(out[i], name_tag=f"rec{i}")
            shapes[i] = _output_shape(out[i], ros2)
    for i in range(len(out)):
        for j in range(i):
            if _collide(shapes[i], shapes[j]):
                raise UsageError(
                    f"{where + ': ' if where else ''}recorders[{j}] and recorders[{i}] would write the same file "
                    f"{shapes[j][0] if re.fullmatch(shapes[i][1], shapes[j][0]) else shapes[i][0]} "
                    "(give each recorder its own output_name / output_prefix)"
                )
    return out


def start_all(recorders: Sequence[Recorder]) -> None:
    """Start ``recorders`` in order; if one fails, stop those started, remove only the
    files this start created (empty: no message written) and raise the error naming the
    recorder."""
    i = 0
    try:
        for i, rec in enumerate(recorders):  # noqa: B007 - (i names the failed one)
            rec.start()
    except BaseException as e:
        for rec in recorders:
            try:
                remove_unwritten(rec.close(raise_errors=False))
            except Exception:  # noqa: BLE001,S110 - cleaning up after the real error
                pass
        if type(e) in (UsageError, OutputExistsError, WriteError) and len(recorders) > 1:
            raise type(e)(f"recorders[{i}]: {e}") from None
        raise


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
        given = list(recorders)
        if len(given) > MAX_RECORDERS:
            raise UsageError(f"{len(given)} recorders; at most {MAX_RECORDERS} in one group")
        planned = iter(plan_outputs([r if isinstance(r, RecordOptions) else r.options for r in given if isinstance(r, (RecordOptions, Recorder))]))
        shared = NameRegistry()
        self.recorders: list[Recorder] = []
        for r in given:
            member = Member(self.source) if self.source is not None else None
            if isinstance(r, RecordOptions):
                rec = Recorder(next(planned), member, log=log)
            elif isinstance(r, Recorder):
                if r.source is not None and member is not None:
                    raise UsageError(
                        "a recorder of a group takes its messages from the group (made without a source)"
                    )
                rec = r
                rec.options = next(planned)
                rec.source = member
            else:
                raise UsageError(f"RecorderGroup takes RecordOptions or Recorder, not {type(r).__name__}")
            rec.share_names(shared)  # (no two recorders of the group ever take one name)
            self.recorders.append(rec)
        if not self.recorders:
            raise UsageError("a recorder group needs at least one recorder")
        self._started = False

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> RecorderGroup:
        """Start every recorder, then subscribe (once per topic)."""
        if self._started:
            return self
        self._started = True
        start_all(self.recorders)
        try:
            if self.source is not None:
                self.source.start()
        except BaseException as e:
            self.close(raise_errors=False)
            for rec in self.recorders:
                remove_unwritten(rec.report())
            failure = start_failure(e, "the ROS node of the recorders")
            if failure is not None:
                raise failure from None
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
