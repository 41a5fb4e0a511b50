"""Real logs nobody here wrote, read by polybag and by the reference readers, compared.

Every log of ``tests/corpus/`` (listed, with its origin and checksum, in ``MANIFEST.toml``)
and of ``../shared/corpora/{rosbag,ulog,mcap-samples}`` is read by polybag and by the
reference reader of its format:

* ROS 1 bags: rosbags (topics, counts, times, raw bytes) and rosbag-standalone (decoded values);
* rosbag2 directories: rosbags (``AnyReader``, which decodes with the bag's own definitions
  where it has them and the ROS 2 Humble types otherwise);
* a lone ``.db3``: the SQLite tables themselves (Python's ``sqlite3``), decoded by rosbags' CDR;
* MCAP: the ``mcap`` reader with the ``mcap_ros1`` / ``mcap_ros2`` decoders (JSON by ``json``);
* ULog: pyulog.

Compared: the topics, the message count of each topic, the first and last log time of each
topic and of the log, the raw bytes (a hash per topic of every (log time, sha256 of the
bytes) pair), the decoded values of a sample of messages (first, middle, last of each
topic), and every conversion (to MCAP, to a ROS 1 bag, to a rosbag2 directory, where the
types allow) read back by the reference.

A difference that is known and explained is written in the manifest, per log and per
check (``[log.expect]`` / ``[[shared]]``); such a check is expected to fail (strictly, so a
fix shows up), except where the reason starts with "issue 27" (work still being merged:
non-strict).  Anything else that differs fails.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import io
import json
import math
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    tomllib = pytest.importorskip("tomli")

import polybag
from paths import CORPORA
from polybag.cli import main
from polybag.errors import PolybagError, TruncatedError

HERE = Path(__file__).resolve().parent
MANIFEST = tomllib.loads((HERE / "MANIFEST.toml").read_text(encoding="utf-8"))
# files of this folder that are not logs
OWN_FILES = {"MANIFEST.toml", "README.md", "test_real_logs.py", "__init__.py", "conftest.py"}
SHARED_DIRS = ("rosbag", "ulog", "mcap-samples")
# the ROS 2 types a reference uses when a rosbag2 bag or a lone .db3 carries no definitions
DEFAULT_STORE = "ROS2_HUMBLE"
# the checks, in the order the report lists them
CHECKS = ("topics", "counts", "times", "raw", "decode")
CONVERSIONS = ("mcap", "bag", "rosbag2")


# ---------------------------------------------------------------------------------------------
# the logs


@dataclasses.dataclass(frozen=True)
class Log:
    id: str
    path: Path
    format: str  # bag | mcap | rosbag2 | db3 | ulog | other
    expect: tuple[tuple[str, str], ...] = ()
    big: bool = False
    convert: tuple[str, ...] | None = None  # the manifest's choice of conversions (None: all)

    def reason(self, check: str) -> str | None:
        return dict(self.expect).get(check)


def _kind(path: Path) -> str:
    if path.is_dir():
        return "rosbag2"
    return {".bag": "bag", ".mcap": "mcap", ".db3": "db3", ".ulg": "ulog"}.get(path.suffix, "other")


def _logs() -> list[Log]:
    out = []
    for entry in MANIFEST.get("log", []):
        path = HERE / entry["path"]
        out.append(
            Log(
                "corpus/" + entry["path"],
                path,
                _kind(path),
                tuple(sorted(entry.get("expect", {}).items())),
                path.is_file() and path.stat().st_size > 1_500_000,
                tuple(entry["convert"]) if "convert" in entry else None,
            )
        )
    shared_expect = {
        e["path"]: tuple(sorted(e.get("expect", {}).items())) for e in MANIFEST.get("shared", [])
    }
    for top in SHARED_DIRS:
        base = CORPORA / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(CORPORA).as_posix()
            if path.is_dir():
                if not (path / "metadata.yaml").is_file():
                    continue
            elif path.suffix not in (".bag", ".mcap", ".ulg") and rel not in shared_expect:
                continue
            elif (path.parent / "metadata.yaml").is_file():
                continue  # a file of a rosbag2 directory: the directory is the log
            out.append(
                Log(
                    "shared/" + rel,
                    path,
                    _kind(path),
                    shared_expect.get(rel, ()),
                    path.is_file() and path.stat().st_size > 1_500_000,
                )
            )
    return out


LOGS = _logs()
LOG_IDS = [log.id for log in LOGS]
BY_ID = {log.id: log for log in LOGS}


def _expect(request: pytest.FixtureRequest, log: Log, check: str) -> None:
    """Mark a check the manifest expects to differ: strict, unless issue 27 is still on it."""
    reason = log.reason(check)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=not reason.startswith("issue 27")))


# ---------------------------------------------------------------------------------------------
# the facts both sides give: per topic, the sorted (log time, sha256) keys and a few decoded values


@dataclasses.dataclass
class Facts:
    keys: dict[str, list[tuple[int, str]]]  # topic -> sorted (log_time, sha256 of the bytes)
    start: int | None = None  # what the reader's summary says, where it says it
    end: int | None = None
    raw: bool = True  # the keys hash real bytes (False: ULog, where pyulog has no bytes)
    decoded: dict[tuple[str, int, str], Any] = dataclasses.field(default_factory=dict)
    undecodable: dict[str, str] = dataclasses.field(default_factory=dict)  # topic -> why
    damage: str | None = None  # what polybag said after the last intact message

    def counts(self) -> dict[str, int]:
        """Messages per topic, of the topics that have any (which empty topics a reader
        lists differs: ULog subscriptions without data, rosbag2 topics of the database)."""
        return {t: len(k) for t, k in self.keys.items() if k}

    def times(self) -> dict[str, tuple[int, int]]:
        return {t: (k[0][0], k[-1][0]) for t, k in self.keys.items() if k}

    def digest(self) -> dict[str, str]:
        return {t: hashlib.sha256(repr(k).encode()).hexdigest() for t, k in self.keys.items() if k}


class Wanted:
    """Which messages a reader decodes: those of ``keys`` (topic -> (log time, sha256)), or,
    without keys, the first it meets of each topic."""

    def __init__(self, keys: dict[str, set[tuple[int, str]]] | None = None) -> None:
        self.keys = keys
        self.met: set[str] = set()

    def __call__(self, topic: str, key: tuple[int, str]) -> bool:
        if self.keys is None:
            if topic in self.met:
                return False
            self.met.add(topic)
            return True
        return key in self.keys.get(topic, ())

    def of(self, topic: str) -> set[tuple[int, str]]:
        return set() if self.keys is None else self.keys.get(topic, set())

    def topics(self) -> list[str] | None:
        return None if self.keys is None else list(self.keys)


def _sha(data: Any) -> str:
    return hashlib.sha256(bytes(data)).hexdigest()


def sample_keys(keys: dict[str, list[tuple[int, str]]]) -> dict[str, list[tuple[int, str]]]:
    """First, middle and last message of each topic (by log time, then bytes)."""
    out = {}
    for topic, k in keys.items():
        if k:
            out[topic] = sorted({k[0], k[len(k) // 2], k[-1]})
    return out


def plain(v: Any) -> Any:
    """A decoded value as plain Python, whichever reader made it (times as sec/nanosec)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return "nan" if math.isnan(v) else v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return list(bytes(v))
    mod = type(v).__module__
    if mod == "numpy":
        if hasattr(v, "tolist"):
            return plain(v.tolist())
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        d = {k: plain(x) for k, x in v.items()}
    elif hasattr(v, "to_dict") and callable(v.to_dict):
        d = {k: plain(x) for k, x in v.to_dict().items()}
    elif dataclasses.is_dataclass(v):
        # rosbags' classes: ``__msgtype__`` and the constants (upper case) are not fields
        d = {
            f.name: plain(getattr(v, f.name))
            for f in dataclasses.fields(v)
            if not f.name.startswith("_") and not f.name.isupper()
        }
    elif hasattr(v, "__slots__"):
        d = {s: plain(getattr(v, s)) for s in v.__slots__ if not s.startswith("_")}
    elif hasattr(v, "__dict__"):
        d = {k: plain(x) for k, x in vars(v).items() if not k.startswith("_")}
    else:
        return repr(v)
    for a, b in (("secs", "nsecs"), ("sec", "nsec"), ("sec", "nanosec")):
        if set(d) == {a, b}:
            return {"sec": d[a], "nanosec": d[b]}
    return d


def _flat(prefix: str, v: Any, out: dict[str, Any]) -> None:
    """A decoded ULog message as pyulog's columns: ``a.b``, ``c[2]``."""
    if isinstance(v, dict):
        for k, x in v.items():
            _flat(f"{prefix}.{k}" if prefix else k, x, out)
    elif isinstance(v, list) and not isinstance(v, str):
        for i, x in enumerate(v):
            _flat(f"{prefix}[{i}]", x, out)
    else:
        out[prefix] = v


# ---------------------------------------------------------------------------------------------
# polybag's side


def _ulog_topic(ch: polybag.Channel) -> str:
    mid = ch.metadata.get("multi_id")
    return ch.topic if mid is None else f"{ch.topic}:{mid}"


@cache
def polybag_facts(log_id: str) -> Facts:
    log = BY_ID[log_id]
    with polybag.open(log.path) as r:
        summary = r.summary
        name = _ulog_topic if log.format == "ulog" else (lambda ch: ch.topic)
        keys: dict[str, list[tuple[int, str]]] = {name(ch): [] for ch in summary.channels.values()}
        wanted: dict[str, set[tuple[int, str]]] = {}
        damage = None
        try:
            for m in r.messages():
                topic = name(m.channel)
                keys[topic].append((m.log_time, "" if log.format == "ulog" else _sha(m.data)))
        except TruncatedError as exc:  # every intact message was given first
            damage = str(exc)
        for k in keys.values():
            k.sort()
        facts = Facts(keys, summary.start_time, summary.end_time, raw=log.format != "ulog", damage=damage)
        for topic, ks in sample_keys(keys).items():
            wanted[topic] = set(ks)
        seen: set[tuple[str, int, str]] = set()
        for m in _intact(r.messages()):
            topic = name(m.channel)
            key = (m.log_time, "" if log.format == "ulog" else _sha(m.data))
            if key not in wanted.get(topic, ()) or (topic, *key) in seen:
                continue
            seen.add((topic, *key))
            try:
                value = plain(m.decode())
            except PolybagError as exc:
                facts.undecodable[topic] = f"{type(exc).__name__}: {exc}"
                continue
            if log.format == "ulog":
                flat: dict[str, Any] = {}
                _flat("", value, flat)
                value = {k: v for k, v in flat.items() if "_padding" not in k}
            facts.decoded[(topic, *key)] = value
    return facts


def _intact(messages: Iterator[polybag.Message]) -> Iterator[polybag.Message]:
    try:
        yield from messages
    except TruncatedError:
        return


# ---------------------------------------------------------------------------------------------
# the references


_COPIES = Path(tempfile.mkdtemp(prefix="polybag-corpus-refs-"))
atexit.register(shutil.rmtree, _COPIES, True)


@cache
def _private(path: Path) -> Path:
    """A copy of a rosbag2 directory for a reference reader: rosbags opens its ``.db3`` files
    through SQLite without ``immutable``, and SQLite removes the ``-wal``/``-shm`` beside a
    database when it closes it; the corpus keeps them as published (their checksums are
    tested).  Files are given as they are."""
    if not path.is_dir():
        return path
    dest = _COPIES / f"{len(list(_COPIES.iterdir()))}" / path.name
    shutil.copytree(path, dest, symlinks=True)
    return dest


def _rosbags_facts(path: Path, wanted: Wanted) -> Facts:
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.typesys import Stores, get_typestore

    paths = [path]
    keys: dict[str, list[tuple[int, str]]] = {}
    facts = Facts(keys)
    reader = AnyReader(paths, default_typestore=get_typestore(getattr(Stores, DEFAULT_STORE)))
    try:
        reader.open()
    except AnyReaderError as exc:  # its lower-level reader may still give topics, times and bytes
        return _rosbags_raw_facts(path, f"rosbags AnyReader: {exc}")
    try:
        for c in reader.connections:
            keys.setdefault(c.topic, [])
        facts.start, facts.end = (
            (reader.start_time, reader.end_time - 1) if reader.message_count else (None, None)
        )
        for c, t, data in reader.messages():
            key = (t, _sha(data))
            keys[c.topic].append(key)
            if (c.topic, *key) not in facts.decoded and wanted(c.topic, key):
                try:
                    facts.decoded[(c.topic, *key)] = plain(reader.deserialize(data, c.msgtype))
                except Exception as exc:  # noqa: BLE001 - the reference's own failure, recorded
                    facts.undecodable[c.topic] = f"rosbags: {type(exc).__name__}: {exc}"
    finally:
        reader.close()
    for k in keys.values():
        k.sort()
    return facts


def _rosbags_raw_facts(path: Path, why: str) -> Facts:
    """rosbags' format reader, without its decoding layer (which refused the log: ``why``)."""
    from rosbags.rosbag1 import Reader as Reader1
    from rosbags.rosbag2 import Reader as Reader2
    from rosbags.rosbag2 import ReaderError

    keys: dict[str, list[tuple[int, str]]] = {}
    facts = Facts(keys)
    try:
        reader = Reader2(path) if path.is_dir() else Reader1(path)
        reader.open()
    except ReaderError as exc:
        if not path.is_dir():
            raise
        # rosbags refuses the directory: its storage files, read by SQLite or the mcap reader
        files = sorted(path.glob("*.db3")) or sorted(path.glob("*.mcap"))
        out = _sqlite_facts(files, Wanted({})) if files[0].suffix == ".db3" else _mcap_files_facts(files)
        out.undecodable = dict.fromkeys(out.keys, f"rosbags: {exc}")
        return out
    try:
        for c in reader.connections:
            keys.setdefault(c.topic, [])
            facts.undecodable[c.topic] = why
        if reader.message_count:
            facts.start, facts.end = reader.start_time, reader.end_time - 1
        for c, t, data in reader.messages():
            keys[c.topic].append((t, _sha(data)))
    finally:
        reader.close()
    for k in keys.values():
        k.sort()
    return facts


def _rosbag1_decoded(path: Path, wanted: Wanted) -> tuple[dict, dict]:
    """rosbag-standalone's decoded values of the wanted messages."""
    import rosbag

    decoded: dict[tuple[str, int, str], Any] = {}
    undecodable: dict[str, str] = {}
    with rosbag.Bag(str(path)) as bag:
        for topic, (_dt, data, _md5, _pos, pytype), t in bag.read_messages(topics=wanted.topics(), raw=True):
            key = (t.to_nsec(), _sha(data))
            if (topic, *key) in decoded or not wanted(topic, key):
                continue
            try:
                decoded[(topic, *key)] = plain(pytype().deserialize(data))
            except Exception as exc:  # noqa: BLE001 - the reference's own failure, recorded
                undecodable[topic] = f"rosbag: {type(exc).__name__}: {exc}"
    return decoded, undecodable


def _db3_facts(path: Path, wanted: Wanted) -> Facts:
    return _sqlite_facts([path], wanted)


def _sqlite_facts(paths: list[Path], wanted: Wanted) -> Facts:
    """The ``topics`` and ``messages`` tables of rosbag2 .db3 files, read by SQLite itself
    (decoded by rosbags' CDR with the ROS 2 Humble types, where it knows the type)."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(getattr(Stores, DEFAULT_STORE))
    keys: dict[str, list[tuple[int, str]]] = {}
    facts = Facts(keys)
    for path in paths:
        _sqlite_file(path, store, keys, facts, wanted)
    for k in keys.values():
        k.sort()
    return facts


def _sqlite_file(
    path: Path,
    store: Any,
    keys: dict[str, list[tuple[int, str]]],
    facts: Facts,
    wanted: Wanted,
) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        topics = {i: (n, t) for i, n, t in con.execute("SELECT id, name, type FROM topics")}
        for _, (n, _) in topics.items():
            keys.setdefault(n, [])
        for tid, ts, data in con.execute("SELECT topic_id, timestamp, data FROM messages"):
            n, typ = topics[tid]
            key = (ts, _sha(data))
            keys[n].append(key)
            if (n, *key) not in facts.decoded and wanted(n, key):
                try:
                    facts.decoded[(n, *key)] = plain(store.deserialize_cdr(data, typ))
                except Exception as exc:  # noqa: BLE001 - the reference's own failure, recorded
                    facts.undecodable[n] = f"rosbags: {type(exc).__name__}: {exc}"
    finally:
        con.close()


def _mcap_facts(path: Path, wanted: Wanted) -> Facts:
    from mcap.reader import make_reader
    from mcap_ros1.decoder import DecoderFactory as Ros1Decoders
    from mcap_ros2.decoder import DecoderFactory as Ros2Decoders

    keys: dict[str, list[tuple[int, str]]] = {}
    facts = Facts(keys)
    factories = [Ros1Decoders(), Ros2Decoders()]
    decoders: dict[int, Callable[[bytes], Any] | None] = {}
    with path.open("rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        if summary is not None:
            for ch in summary.channels.values():
                keys.setdefault(ch.topic, [])
            st = summary.statistics
            if st is not None and st.message_count:
                facts.start, facts.end = st.message_start_time, st.message_end_time
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            key = (message.log_time, _sha(message.data))
            keys.setdefault(channel.topic, []).append(key)
            if (channel.topic, *key) in facts.decoded or not wanted(channel.topic, key):
                continue
            if channel.id not in decoders:
                dec = None
                if channel.message_encoding == "json":
                    dec = json.loads
                try:
                    for fac in factories:
                        dec = dec or fac.decoder_for(channel.message_encoding, schema)
                except Exception as exc:  # noqa: BLE001 - the reference's own failure, recorded
                    facts.undecodable[channel.topic] = f"mcap: {type(exc).__name__}: {exc}"
                    decoders[channel.id] = None
                    continue
                decoders[channel.id] = dec
            dec = decoders[channel.id]
            if dec is None and channel.topic in facts.undecodable:
                continue
            if dec is None:
                facts.undecodable[channel.topic] = f"mcap: no decoder for {channel.message_encoding!r}"
                continue
            try:
                facts.decoded[(channel.topic, *key)] = plain(dec(message.data))
            except Exception as exc:  # noqa: BLE001 - the reference's own failure, recorded
                facts.undecodable[channel.topic] = f"mcap: {type(exc).__name__}: {exc}"
    for k in keys.values():
        k.sort()
    return facts


def _mcap_files_facts(files: list[Path]) -> Facts:
    keys: dict[str, list[tuple[int, str]]] = {}
    for f in files:
        for t, k in _mcap_facts(f, Wanted({})).keys.items():
            keys.setdefault(t, []).extend(k)
    for k in keys.values():
        k.sort()
    return Facts(keys)


def _ulog_facts(path: Path, wanted: Wanted) -> Facts:
    import pyulog

    u = pyulog.ULog(str(path))
    keys: dict[str, list[tuple[int, str]]] = {}
    facts = Facts(keys, raw=False)
    for d in u.data_list:
        topic = f"{d.name}:{d.multi_id}"
        ts = d.data["timestamp"]
        keys[topic] = sorted((int(t) * 1000, "") for t in ts)
        want = {k[0] for k in wanted.of(topic)}
        cols = [c for c in d.data if "_padding" not in c]
        chars = {f.field_name for f in d.field_data if f.type_str == "char"}
        for i, t in enumerate(ts):
            t = int(t) * 1000
            if t in want and (topic, t, "") not in facts.decoded:
                facts.decoded[(topic, t, "")] = _char_arrays(
                    {c: plain(d.data[c][i].item()) for c in cols}, chars
                )
    logged = [(m.timestamp, m.log_level, m.message, None) for m in u.logged_messages]
    for tag, ms in u.logged_messages_tagged.items():
        logged += [(m.timestamp, m.log_level, m.message, tag) for m in ms]
    if logged:
        keys["log_message"] = sorted((ts * 1000, "") for ts, *_ in logged)
        want = {k[0] for k in wanted.of("log_message")}
        for ts, level, text, tag in sorted(logged, key=lambda x: x[0]):
            if ts * 1000 in want and ("log_message", ts * 1000, "") not in facts.decoded:
                facts.decoded[("log_message", ts * 1000, "")] = {
                    "log_level": level,
                    "tag": tag,
                    "timestamp": ts,
                    "message": text,
                }
    times = [k[0] for ks in keys.values() for k in ks]
    facts.start, facts.end = (min(times), max(times)) if times else (None, None)
    return facts


def _char_arrays(row: dict[str, Any], chars: set[str]) -> dict[str, Any]:
    """pyulog gives a ``char[N]`` field as N columns of numbers; polybag gives the text (up to
    the first NUL), as PX4's own tools print it: the columns joined the same way."""
    out: dict[str, Any] = {}
    for c, v in row.items():
        if c in chars and c.endswith("]"):
            base = c[: c.rindex("[")]
            out.setdefault(base, bytearray()).append(v & 0xFF)
        else:
            out[c] = v
    for c, v in out.items():
        if isinstance(v, bytearray):
            out[c] = bytes(v).split(b"\0", 1)[0].decode("utf-8", "replace")
    return out


@cache
def reference_facts(log_id: str) -> Facts:
    log = BY_ID[log_id]
    wanted = Wanted({t: set(k) for t, k in sample_keys(polybag_facts(log_id).keys).items()})
    if log.format == "ulog":
        return _ulog_facts(log.path, wanted)
    if log.format == "mcap":
        return _mcap_facts(log.path, wanted)
    if log.format == "db3":
        return _db3_facts(log.path, wanted)
    facts = _rosbags_facts(_private(log.path), wanted)
    if log.format == "bag":  # decoded values: rosbag-standalone's (rosbags' only where it has none)
        decoded, undecodable = _rosbag1_decoded(log.path, wanted)
        for k, v in decoded.items():
            facts.decoded[k] = v
        facts.undecodable = {t: w for t, w in undecodable.items() if not any(k[0] == t for k in decoded)}
    return facts


# ---------------------------------------------------------------------------------------------
# the manifest


def _corpus_files() -> set[str]:
    return {
        p.relative_to(HERE).as_posix()
        for p in HERE.rglob("*")
        if p.is_file() and p.name not in OWN_FILES and "__pycache__" not in p.parts
    }


def test_every_file_is_listed_and_matches_its_checksum() -> None:
    listed: dict[str, dict[str, Any]] = {}
    for entry in MANIFEST["log"]:
        base = HERE / entry["path"]
        assert entry["license"] and entry["repository"] and len(entry["commit"]) == 40, entry["path"]
        for f in entry["files"]:
            rel = (base / f["name"]).relative_to(HERE).as_posix() if base.is_dir() else entry["path"]
            listed[rel] = f
    files = _corpus_files()
    assert files == set(listed), {
        "not listed": sorted(files - set(listed)),
        "missing": sorted(set(listed) - files),
    }
    for rel, f in listed.items():
        data = (HERE / rel).read_bytes()
        assert len(data) == f["size"], rel
        assert hashlib.sha256(data).hexdigest() == f["sha256"], rel
    total = sum(f["size"] for f in listed.values())
    assert total < 25_000_000


def test_the_corpus_covers_every_format_and_rosbag2_metadata_version() -> None:
    kinds = {log.format for log in LOGS}
    assert {"bag", "mcap", "rosbag2", "db3", "ulog"} <= kinds
    versions = set()
    for log in LOGS:
        if log.format == "rosbag2":
            text = (log.path / "metadata.yaml").read_text(encoding="utf-8")
            line = next((ln for ln in text.splitlines() if ln.strip().startswith("version:")), None)
            versions.add(int(line.split(":")[1]) if line else 0)
    # 2 and 9 are absent: no public repository available here has a bag of either
    assert {0, 1, 3, 4, 5, 6, 7, 8} <= versions


def test_shared_expectations_name_real_files() -> None:
    for entry in MANIFEST.get("shared", []):
        assert (CORPORA / entry["path"]).exists(), entry["path"]


# ---------------------------------------------------------------------------------------------
# the comparison


def _open_or_refusal(request: pytest.FixtureRequest, log: Log) -> None:
    """A log both sides refuse is checked once, by ``test_refused``; one only the reference
    refuses, by ``test_reference_refuses``; the others read here."""
    if log.reason("refused") is not None:
        pytest.skip("refused by polybag and by the reference: see test_refused")
    if log.reason("reference_refuses") is not None:
        pytest.skip("the reference refuses it: see test_reference_refuses")
    _expect(request, log, "open")


REFUSED = [log.id for log in LOGS if log.reason("refused") is not None]
REFERENCE_REFUSES = [log.id for log in LOGS if log.reason("reference_refuses") is not None]


def _reference_refusals(log: Log) -> dict[str, str | None]:
    """Each reference reader of the log's format, opening it and reading every message:
    what it raised (None: it read the log)."""
    import pyulog
    import rosbag
    from mcap.reader import make_reader
    from rosbags.rosbag1 import Reader as Reader1
    from rosbags.rosbag2 import Reader as Reader2

    def read_rosbags1() -> None:
        with Reader1(log.path) as r:
            for _ in r.messages():
                pass

    def read_rosbags2() -> None:
        with Reader2(_private(log.path)) as r:
            for _ in r.messages():
                pass

    def read_rosbag() -> None:
        with rosbag.Bag(str(log.path)) as b:
            for _ in b.read_messages(raw=True):
                pass

    def read_mcap() -> None:
        with log.path.open("rb") as f:
            for _ in make_reader(f).iter_messages():
                pass

    readers: dict[str, Callable[[], object]] = {
        "rosbag2": {"rosbags": read_rosbags2},
        "mcap": {"mcap": read_mcap},
        "ulog": {"pyulog": lambda: pyulog.ULog(str(log.path))},
        "db3": {"sqlite3": lambda: _sqlite_facts([log.path], Wanted({}))},
    }.get(log.format, {"rosbags": read_rosbags1, "rosbag": read_rosbag})
    out: dict[str, str | None] = {}
    for name, read in readers.items():
        try:
            read()
        except Exception as exc:  # noqa: BLE001 - any refusal of the reference's own
            out[name] = f"{type(exc).__name__}: {exc}"
        else:
            out[name] = None
    return out


@pytest.mark.parametrize("log_id", REFERENCE_REFUSES)
def test_reference_refuses(log_id: str) -> None:
    """polybag reads it (what the README's corpus notes say it finds); the reference refuses it."""
    facts = polybag_facts(log_id)
    assert facts.damage is None
    refusals = _reference_refusals(BY_ID[log_id])
    assert all(refusals.values()), refusals


@pytest.mark.parametrize("log_id", [log.id for log in LOGS if log.reason("refused") is None])
def test_damage_is_said_where_expected(log_id: str) -> None:
    """polybag names damage (a log that ends inside a message: TruncatedError, with the file
    and offset, after every intact message) exactly where the manifest says there is some."""
    log = BY_ID[log_id]
    facts = polybag_facts(log_id)
    if log.reason("damaged") is None:
        assert facts.damage is None
    else:
        assert facts.damage is not None
        assert log.path.name in facts.damage and "offset" in facts.damage


@pytest.mark.parametrize("log_id", REFUSED)
def test_refused(log_id: str) -> None:
    """polybag refuses it with a PolybagError naming the file, and the reference refuses it too."""
    log = BY_ID[log_id]
    with pytest.raises(PolybagError) as err:
        polybag_facts.__wrapped__(log_id)
    assert log.path.name in str(err.value)
    refusals = _reference_refusals(log)
    assert all(refusals.values()), refusals


@pytest.mark.parametrize("log_id", LOG_IDS)
def test_topics(request: pytest.FixtureRequest, log_id: str) -> None:
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    _expect(request, log, "topics")
    ours, ref = polybag_facts(log_id), reference_facts(log_id)
    assert set(ours.counts()) == set(ref.counts())  # the topics with messages
    assert set(ref.keys) <= set(ours.keys)  # and polybag lists every topic the reference lists


@pytest.mark.parametrize("log_id", LOG_IDS)
def test_counts(request: pytest.FixtureRequest, log_id: str) -> None:
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    _expect(request, log, "counts")
    assert polybag_facts(log_id).counts() == reference_facts(log_id).counts()


@pytest.mark.parametrize("log_id", LOG_IDS)
def test_times(request: pytest.FixtureRequest, log_id: str) -> None:
    """First and last log time of every topic, and the log's start and end in its summary."""
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    _expect(request, log, "times")
    ours, ref = polybag_facts(log_id), reference_facts(log_id)
    assert ours.times() == ref.times()
    if ref.start is not None:  # the reference's own summary (bags, rosbag2, indexed MCAP)
        assert (ours.start, ours.end) == (ref.start, ref.end)
    else:  # else the times of the messages
        every = [t for k in ref.keys.values() for t, _ in k]
        assert (ours.start, ours.end) == ((min(every), max(every)) if every else (None, None))


@pytest.mark.parametrize("log_id", LOG_IDS)
def test_raw_bytes(request: pytest.FixtureRequest, log_id: str) -> None:
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    if log.format == "ulog":
        pytest.skip("pyulog keeps no message bytes: decoded values compared instead")
    _expect(request, log, "raw")
    assert polybag_facts(log_id).digest() == reference_facts(log_id).digest()


@pytest.mark.parametrize("log_id", LOG_IDS)
def test_decoded_values(request: pytest.FixtureRequest, log_id: str) -> None:
    """First, middle and last message of every topic decode to the same values on both sides;
    what the reference cannot decode polybag may (said in the README), never the reverse."""
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    _expect(request, log, "decode")
    ours, ref = polybag_facts(log_id), reference_facts(log_id)
    compared = 0
    for key, value in ref.decoded.items():
        assert key[0] not in ours.undecodable, (key, ours.undecodable[key[0]])
        assert key in ours.decoded, key
        assert ours.decoded[key] == value, key
        compared += 1
    if any(ref.keys.values()) and not ref.undecodable:
        assert compared, "nothing decoded"


def _storage(log: Log, suffix: str) -> list[Path]:
    """The storage files a rosbag2 directory's metadata lists, if all end in ``suffix``."""
    import yaml

    if log.format != "rosbag2":
        return []
    text = (log.path / "metadata.yaml").read_text(encoding="utf-8")
    meta = yaml.safe_load(text)["rosbag2_bagfile_information"]
    files = [log.path / f for f in meta.get("relative_file_paths", [])]
    return files if files and all(f.suffix == suffix for f in files) else []


def _sqlite_storage(log: Log) -> list[Path]:
    return _storage(log, ".db3")


def _mcap_storage(log: Log) -> list[Path]:
    return _storage(log, ".mcap")


STORAGE_DIRS = [log.id for log in LOGS if _sqlite_storage(log) or _mcap_storage(log)]


@pytest.mark.parametrize("log_id", STORAGE_DIRS)
def test_rosbag2_storage_files_match(request: pytest.FixtureRequest, log_id: str) -> None:
    """Whatever rosbags makes of the metadata, polybag gives exactly the messages of the
    storage files the metadata lists, as SQLite (the ``messages`` table) or the mcap reader
    reads them: topics, counts, times, bytes."""
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    _expect(request, log, "storage")
    ours = polybag_facts(log_id)
    sqlite_files = _sqlite_storage(log)
    storage = (
        _sqlite_facts(sqlite_files, Wanted({})) if sqlite_files else _mcap_files_facts(_mcap_storage(log))
    )
    assert ours.counts() == storage.counts()
    assert ours.digest() == storage.digest()


# ---------------------------------------------------------------------------------------------
# conversions, read back by the reference


def _targets(log: Log) -> list[str]:
    if log.format == "other":
        return []
    out = [t for t in CONVERSIONS if not (log.format == t or (log.format == "db3" and t == "rosbag2"))]
    if log.format == "mcap" and log.path.parent.name == "lichtblick":
        out = []  # JSON messages have no ROS type to become
    if log.big:
        out = out[:1]  # big files are converted once, to MCAP
    if log.convert is not None:
        out = [t for t in out if t in log.convert]
    return out


CONVERSION_CASES = [(log.id, t) for log in LOGS for t in _targets(log)]


def _read_back(path: Path, target: str) -> Facts:
    """The converted log as the reference reads it, with the first message of each topic
    decoded (by mcap_ros1/mcap_ros2 from an MCAP; rosbags from rosbag2; rosbag-standalone
    from a bag): the output carries definitions the reference can use."""
    back = (_mcap_facts if target == "mcap" else _rosbags_facts)(path, Wanted())
    if target == "bag":
        decoded, undecodable = _rosbag1_decoded(path, Wanted())
        back.decoded.update(decoded)
        back.undecodable = {t: w for t, w in undecodable.items() if not any(k[0] == t for k in decoded)}
    return back


_CONVERTED: dict[tuple[str, str], Path] = {}


def _converted(tmp: pytest.TempPathFactory, log: Log, target: str) -> Path:
    """``polybag convert`` of the log (once per log and target: both conversion tests use it)."""
    if (log.id, target) in _CONVERTED:
        return _CONVERTED[(log.id, target)]
    base = tmp.mktemp("convert")
    out = base / ("out" if target == "rosbag2" else f"out.{target}")
    argv = ["convert", str(log.path), str(out), "-q"]
    if target == "rosbag2":
        argv += ["--format", "rosbag2"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    if log.reason("damaged") is not None:  # every intact message written, the damage named, exit 1
        assert code == 1, (argv, code, err.getvalue()[-2000:])
        assert "offset" in err.getvalue() and log.path.name in err.getvalue()
    else:
        assert code == 0, (argv, code, err.getvalue()[-2000:])
    _CONVERTED[(log.id, target)] = out
    return out


_READ_BACK: dict[tuple[str, str], Facts] = {}


def _converted_read_back(tmp: pytest.TempPathFactory, log: Log, target: str) -> Facts:
    if (log.id, target) not in _READ_BACK:
        _READ_BACK[(log.id, target)] = _read_back(_converted(tmp, log, target), target)
    return _READ_BACK[(log.id, target)]


def _merged(log: Log, name: str) -> str:
    """A source topic's name in a conversion: ULog instance k becomes /<name>_k (0: /<name>)."""
    if log.format != "ulog":
        return name
    base, _, mid = name.partition(":")
    return f"/{base}" if mid in ("", "0") else f"/{base}_{mid}"


@pytest.mark.parametrize(("log_id", "target"), CONVERSION_CASES)
def test_conversion_read_back_by_the_reference(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, log_id: str, target: str
) -> None:
    """polybag converts the log; the reference reads the result with the same topics, counts,
    times (and bytes, where the encoding does not change)."""
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    _expect(request, log, f"convert-{target}")
    src = polybag_facts(log_id)
    back = _converted_read_back(tmp_path_factory, log, target)
    counts: dict[str, int] = {}
    times: list[int] = []
    for t, k in src.keys.items():
        if k:
            counts[_merged(log, t)] = counts.get(_merged(log, t), 0) + len(k)
            times += [x for x, _ in k]
    assert back.counts() == counts
    assert sorted(x for k in back.keys.values() for x, _ in k) == sorted(times)
    same_encoding = {("bag", "mcap"), ("mcap", "rosbag2"), ("rosbag2", "mcap"), ("db3", "mcap")}
    if (log.format, target) in same_encoding and src.raw and not _profile_changes(log, target):
        assert back.digest() == {t: d for t, d in src.digest().items() if src.keys[t]}


@pytest.mark.parametrize(("log_id", "target"), CONVERSION_CASES)
def test_conversion_decoded_by_the_reference(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, log_id: str, target: str
) -> None:
    """Every topic polybag decodes in the source decodes from the output, by the reference:
    the output carries definitions other tools can use."""
    log = BY_ID[log_id]
    _open_or_refusal(request, log)
    check = f"convert-{target}-decode"
    _expect(request, log, check if log.reason(check) is not None else f"convert-{target}")
    src = polybag_facts(log_id)
    back = _converted_read_back(tmp_path_factory, log, target)
    undecodable = {_merged(log, t) for t in src.undecodable}
    decoded = 0
    for t, k in back.keys.items():
        if k and t not in undecodable:
            assert t not in back.undecodable, (t, back.undecodable[t])
            assert any(d[0] == t for d in back.decoded), t
            decoded += 1
    if any(k for t, k in back.keys.items() if t not in undecodable):
        assert decoded


def _profile_changes(log: Log, target: str) -> bool:
    """A ROS 1 bag into rosbag2 or an MCAP of ros1 messages into rosbag2 changes the bytes."""
    return target == "rosbag2" and log.format in ("bag", "mcap") and _is_ros1(log)


@cache
def _is_ros1_cached(path: Path) -> bool:
    with polybag.open(path) as r:
        return any(ch.message_encoding == "ros1" for ch in r.summary.channels.values())


def _is_ros1(log: Log) -> bool:
    return _is_ros1_cached(log.path)
