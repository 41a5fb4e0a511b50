"""``RecordOptions``: every ``rosbag record`` option, with rosbag's names and meanings.

Names follow rosbag's long options (``--output-prefix`` -> ``output_prefix``).  Sizes are
in rosbag's units: ``size`` and ``buffsize`` in MB (1 MB = 1048576 bytes, as rosbag
counts), ``chunksize`` in KB, ``min_space`` as rosbag's text (``1G``, ``500M``, ``10k``) or
bytes.  ``duration`` is seconds, or ``5m`` / ``2h`` like rosbag's ``--duration``.

Bag naming is rosbag's: ``-O NAME`` writes ``NAME.bag``; ``-o PREFIX`` writes
``PREFIX_YYYY-MM-DD-HH-MM-SS.bag``; neither writes ``YYYY-MM-DD-HH-MM-SS.bag``; with
``--split`` the parts end ``_0``, ``_1``...  A name ending ``.mcap`` writes MCAP (``ros1``
profile) instead of a bag.  While a file is written it is ``NAME.active``.

A recording never replaces a file: ``NAME.active`` is created exclusively (a symlink there
is refused, never followed) and renamed to ``NAME`` only if that is free; an existing
``-O NAME`` is refused before recording starts (rosbag would overwrite it), and later parts
or dated names that are taken get ``-1``, ``-2``...  Every option is checked by
:meth:`RecordOptions.validate`: numbers finite and in range (``-b inf`` is refused), text
without control characters (a NUL cannot name a file).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, fields
from typing import Any

from polybag.errors import UsageError
from polybag.formats import registry
from polybag.formats.registry import FormatSpec
from polybag.selection import DURATION_FORMS, duration_ns

MB = 1 << 20
KB = 1 << 10

_SPACE_UNITS = {"": 1, "K": KB, "M": MB, "G": 1 << 30, "T": 1 << 40}

#: the largest ``--size`` / ``-b`` in MB (1 EiB in all: above any disk or memory)
MAX_MB = float(1 << 40)
#: the largest ``--chunksize`` in KB (1 GiB chunks)
MAX_CHUNK_KB = 1 << 20
#: the largest ``--duration`` / ``--snapshot-window`` in seconds (about 31 years)
MAX_SECONDS = 1e9
#: the largest ``-l`` / ``--max-splits``
MAX_COUNT = (1 << 62) - 1
#: the largest ``--min-space`` in bytes
MAX_SPACE = 1 << 60
#: the longest path (``-O``, ``-o``, ``directory``) and the longest other text (topics, regexes)
MAX_PATH = 4096
MAX_TEXT = 4096
#: the longest file name given (-O/-o), leaving room for the date, part number and extension
MAX_NAME = 200
#: the most topics one recorder names
MAX_TOPICS = 10000

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: the format a recording writes when neither ``format`` nor a name's extension asks for
#: another (rosbag's bag)
DEFAULT_FORMAT = "bag"
#: the same for a ROS 2 recording (``polybag record --ros2``: a rosbag2 bag, a directory)
ROS2_DEFAULT_FORMAT = "rosbag2"


def holds(spec: FormatSpec, encoding: str) -> bool:
    """Whether files of ``spec`` hold messages of ``encoding`` (``ros1``, ``cdr``) as they came."""
    return spec.holds is None or encoding in spec.holds


def recordable(name: str) -> FormatSpec | None:
    """The format called ``name`` (exactly) if a recording can write ROS 1 messages to it
    as they came (their connection headers as channel metadata), else None."""
    spec = registry.lookup(name)
    return spec if spec is not None and spec.name == name and spec.writer is not None and holds(spec, "ros1") else None


def named_format(name: str | None) -> str | None:
    """The format a file name's extension asks a recording for (``run.mcap``: ``mcap``),
    among those :func:`recordable` names; None for any other name."""
    if not name:
        return None
    low = name.lower()
    for spec in registry.formats():
        if spec.extensions and low.endswith(spec.extensions) and recordable(spec.name) is not None:
            return spec.name
    return None


def check_text(what: str, value: object, *, limit: int = MAX_TEXT, empty: bool = True) -> str:
    """``value`` if it is text of at most ``limit`` characters without control characters
    (a NUL cannot name a file); else a :class:`UsageError` naming ``what``."""
    if not isinstance(value, str):
        raise UsageError(f"{what}: expected text, got {type(value).__name__}")
    if not empty and not value:
        raise UsageError(f"{what}: must not be empty")
    if len(value) > limit:
        raise UsageError(f"{what}: longer than {limit} characters ({len(value)})")
    bad = _CONTROL.search(value)
    if bad:
        raise UsageError(f"{what}: {value[:80]!r} contains the control character {bad.group()!r}")
    return value


def check_number(what: str, value: object, *, high: float, integer: bool = False, positive: bool = False) -> float:
    """``value`` as a number: finite, not negative (``positive``: above 0), at most ``high``
    (an integer when ``integer``); else a :class:`UsageError` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raw: Any = value  # (anything: what cannot be converted raises TypeError, caught)
        try:
            value = float(raw) if not integer else int(raw)
        except (TypeError, ValueError, OverflowError):
            raise UsageError(f"{what}: expected a number, got {value!r}") from None
    if integer and not isinstance(value, int):
        if value != value or value in (float("inf"), float("-inf")) or value != int(value):
            raise UsageError(f"{what}: expected an integer, got {value!r}")
    v = float(value) if not isinstance(value, int) else value
    if v != v or v in (float("inf"), float("-inf")):
        raise UsageError(f"{what}: expected a finite{' positive' if positive else ''} number, got {value!r}")
    if v < 0:
        raise UsageError(f"{what} cannot be negative ({value})")
    if positive and v <= 0:
        raise UsageError(f"{what} must be positive ({value})")
    if v > high:
        raise UsageError(f"{what}: {value} is more than the largest allowed ({high:g})")
    return v


def parse_min_space(text: str | int) -> int:
    """rosbag's ``--min-space`` text (``1G``, ``500M``, ``10k``, ``4096``) in bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return int(check_number("--min-space", text, high=MAX_SPACE, integer=True))
    if not isinstance(text, str) or len(text) > 100:
        raise UsageError(f"--min-space {str(text)[:100]!r}: expected a number with an optional k, M or G multiplier")
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([kKmMgGtT]?)[bB]?\s*", text)
    if not m:
        raise UsageError(f"--min-space {text!r}: expected a number with an optional k, M or G multiplier")
    value = float(m.group(1)) * _SPACE_UNITS[m.group(2).upper()]
    return int(check_number("--min-space", value, high=MAX_SPACE))


def parse_duration(text: str | float | int | None) -> float | None:
    """rosbag's ``--duration`` in seconds: a number of seconds, or a text as every time option
    reads a length of time (``30``, ``1.5m``, ``2h``, ``500ms``; :mod:`polybag.selection`)."""
    if text is None or text == "":
        return None
    if isinstance(text, bool):
        raise UsageError(f"--duration {text!r}: expected seconds")
    if isinstance(text, (int, float)):
        value = check_number("--duration", text, high=MAX_SECONDS, positive=True)
    elif not isinstance(text, str) or len(text) > 100:
        raise UsageError(f"--duration {str(text)[:100]!r}: expected {DURATION_FORMS}")
    else:
        try:
            value = duration_ns(text) / 1e9
        except UsageError as e:
            raise UsageError(f"--duration: {e}") from None
        check_number(f"--duration {text!r}", value, high=MAX_SECONDS, positive=True)
    return value


def parse_snapshot_window(text: str) -> tuple[float | None, float | None]:
    """``--snapshot-window PRE[:POST]`` in seconds, each part as every time option reads a
    length of time (``10``, ``1.5m``, ``500ms``): ``(PRE, POST)``; ``"10"`` is ``(10, None)``
    (the last 10 s, as before), ``":5"`` is ``(None, 5)`` (all the ring holds, bounded by
    ``--buffsize``, and 5 s after the trigger).  Positive and bounded: :meth:`RecordOptions.validate`."""
    if not isinstance(text, str) or len(text) > 100:
        raise UsageError(f"--snapshot-window {str(text)[:100]!r}: expected PRE[:POST], each {DURATION_FORMS}")
    pre_text, colon, post_text = text.partition(":")
    if colon and (not post_text.strip() or ":" in post_text):
        raise UsageError(
            f"--snapshot-window {text!r}: expected PRE[:POST] (10, 10:5 or :5; POST: the seconds recorded after the trigger)"
        )
    try:
        pre = duration_ns(pre_text) / 1e9 if pre_text.strip() or not colon else None
        post = duration_ns(post_text) / 1e9 if colon else None
    except UsageError as e:
        raise UsageError(f"--snapshot-window: {e}") from None
    return pre, post


def stamp(t: float | None = None) -> str:
    """rosbag's date stamp (local time): ``YYYY-MM-DD-HH-MM-SS``."""
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.localtime(time.time() if t is None else t))


@dataclass
class RecordOptions:
    """The options of ``rosbag record`` (``polybag record``); see the module docstring."""

    topics: list[str] = field(default_factory=list)
    all: bool = False  # -a: every published topic (the master is polled every second)
    regex: bool = False  # -e: topics are regular expressions (full match, as boost::regex_match)
    exclude: str | None = None  # -x: drop topics matching this regular expression
    quiet: bool = False  # -q
    publish: bool = False  # -p: publish std_msgs/Empty on begin_write when a bag starts
    output_prefix: str | None = None  # -o PREFIX -> PREFIX_<date>.bag
    output_name: str | None = None  # -O NAME -> NAME.bag (NAME.mcap writes MCAP)
    split: bool = False  # --split: start a new file at --size/--duration (else stop there)
    max_splits: int = 0  # --max-splits N: keep N finished parts (+ the one being written)
    size: float = 0  # --size MB (0: no limit)
    duration: str | float | None = None  # --duration 30 / 5m / 2h
    buffsize: float = 256  # -b MB (0: infinite)
    chunksize: int = 768  # --chunksize KB
    limit: int = 0  # -l NUM messages per topic (0: no limit)
    min_space: str | int = "1G"  # -L / --min-space
    bz2: bool = False  # -j
    lz4: bool = False  # --lz4
    node: str | None = None  # --node: the topics that node subscribes to
    tcpnodelay: bool = False  # --tcpnodelay
    udp: bool = False  # --udp (refused: polybag speaks TCPROS only)
    repeat_latched: bool = False  # --repeat-latched: latched messages again at the start of each part
    snapshot: bool = False  # -s / --snapshot: keep the last buffsize MB; write them on a trigger
    snapshot_window: float | str | None = None  # --snapshot-window PRE[:POST]: the ring keeps the last PRE s per topic
    snapshot_post: float | None = None  # (--snapshot-window PRE:POST) each snapshot goes on POST s after its trigger
    namespace: str | None = None  # --namespace / __ns: the node's namespace (its snapshot_trigger topic)
    append_date: bool | None = None  # None: rosbag's rule (yes unless -O)
    format: str | None = None  # "bag" or "mcap"; None: from the -O/-o extension, else bag
    directory: str | None = None  # where relative names go (default: the current directory)
    node_name: str = "/record"  # our node's name on the master (made anonymous)
    name_tag: str | None = None  # added after the date (a group's recorders sharing a generated name)

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):
            self.topics = [self.topics]
        self.topics = list(self.topics)
        if isinstance(self.snapshot_window, str):  # "10", "1.5m", "500ms", "10:5", ":5": as every time option
            pre, post = parse_snapshot_window(self.snapshot_window)
            self.snapshot_window = pre
            if post is not None:
                self.snapshot_post = post

    # --- derived values ------------------------------------------------------------------------
    @property
    def window_ns(self) -> int:
        """--snapshot-window in ns (0: no time window)."""
        w = self.snapshot_window
        return 0 if w is None else int(float(w) * 1_000_000_000)

    @property
    def post_ns(self) -> int:
        """The POST of ``--snapshot-window PRE:POST`` in ns (0: a snapshot ends at its trigger)."""
        p = self.snapshot_post
        return 0 if p is None else int(float(p) * 1_000_000_000)

    @property
    def ns(self) -> str:
        """The namespace, normalised: ``""`` (the root) or ``/robot1`` (no trailing slash)."""
        n = (self.namespace or "").strip("/")
        return "/" + n if n else ""

    @property
    def trigger_topic(self) -> str:
        """The snapshot trigger topic in this recorder's namespace (rosbag's relative ``snapshot_trigger``)."""
        return f"{self.ns}/snapshot_trigger"

    @property
    def begin_write_topic(self) -> str:
        """The ``-p`` topic in this recorder's namespace."""
        return f"{self.ns}/begin_write"

    @property
    def buffer_bytes(self) -> int:
        """-b in bytes (0: infinite)."""
        return int(float(self.buffsize) * MB)

    @property
    def chunk_bytes(self) -> int:
        return max(1, int(self.chunksize) * KB)

    @property
    def max_size_bytes(self) -> int:
        return int(float(self.size) * MB)

    @property
    def max_duration_ns(self) -> int:
        d = parse_duration(self.duration)
        return 0 if d is None else int(d * 1_000_000_000)

    @property
    def min_space_bytes(self) -> int:
        return parse_min_space(self.min_space)

    @property
    def compression(self) -> str:
        if self.bz2:
            return "bz2"
        if self.lz4:
            return "lz4"
        return "none"

    @property
    def output_format(self) -> str:
        """The format recorded to: ``format``, else the one a name's extension asks for
        (``-O run.mcap``), else :data:`DEFAULT_FORMAT`."""
        if self.format:
            return self.format
        named = [f for f in map(named_format, (self.output_name, self.output_prefix)) if f]
        return next((f for f in named if f != DEFAULT_FORMAT), DEFAULT_FORMAT)

    @property
    def ros2_format(self) -> str:
        """The format a ROS 2 recording writes: :attr:`output_format` when its files hold CDR
        messages (MCAP, the ``ros2`` profile), a ROS 1 bag when a name asks for one
        (``-O run.bag``: each message converted), else :data:`ROS2_DEFAULT_FORMAT`."""
        fmt = self.output_format
        spec = recordable(fmt)
        if spec is not None and holds(spec, "cdr"):
            return fmt
        if any(named_format(n) == fmt for n in (self.output_name, self.output_prefix)):
            return fmt
        return ROS2_DEFAULT_FORMAT

    @property
    def extension(self) -> str:
        """The extension of the files recorded (that of :data:`DEFAULT_FORMAT` while the
        format is not one a recording writes)."""
        spec = recordable(self.output_format) or registry.get(DEFAULT_FORMAT)
        return spec.extension

    def validate(self, *, live: bool = False) -> None:
        """Raise ``UsageError`` for what rosbag refuses (or polybag cannot do)."""
        self._check_texts()
        if self.udp:
            raise UsageError(
                "--udp is not supported: polybag subscribes over TCPROS only (drop --udp; "
                "--tcpnodelay gives low latency over TCP)"
            )
        if self.bz2 and self.lz4:
            raise UsageError("can only use one type of compression (-j/--bz2 or --lz4)")
        spec = recordable(self.output_format)
        if spec is None:
            known = sorted(s.name for s in registry.formats() if recordable(s.name) is not None)
            raise UsageError(f"cannot record to format {self.output_format!r} ({' or '.join(known)})")
        if self.bz2 and "bz2" not in spec.compressions:
            raise UsageError(
                f"{spec.description} chunks cannot be bz2 compressed (use --lz4, or the default "
                f"{spec.default_compression})"
            )
        if self.output_name and self.output_prefix:
            raise UsageError("use -o/--output-prefix or -O/--output-name, not both")
        for given in (self.output_name, self.output_prefix, self.directory):
            if isinstance(given, str) and re.match(r"[A-Za-z][A-Za-z0-9+.\-]*://", given):
                raise UsageError(
                    f"{given}: record writes local files (NAME.active while recording, splits, free-space "
                    "checks); record locally, then copy to the URL (polybag convert IN URL)"
                )
        for given, what in ((self.output_name, "-O/--output-name"), (self.output_prefix, "-o/--output-prefix")):
            if given and (given.endswith(("/", os.sep)) or os.path.basename(given) in (".", "..")):
                raise UsageError(f"{what} {given!r} names a folder, not a file (use directory: for the folder)")
            if given and len(os.path.basename(given).encode("utf-8", "surrogatepass")) > MAX_NAME:
                raise UsageError(f"{what} {given[:60]!r}...: a file name of at most {MAX_NAME} bytes (the date, part and extension are added)")
        for given, what in ((self.output_name, "-O/--output-name"), (self.output_prefix, "-o/--output-prefix"), (self.directory, "directory")):
            if given and any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in given.split("/")):
                raise UsageError(f"{what} {given[:60]!r}...: a folder name longer than 255 bytes")
        check_number("--size", self.size, high=MAX_MB)
        check_number("-b/--buffsize", self.buffsize, high=MAX_MB)
        check_number("-l/--limit", self.limit, high=MAX_COUNT, integer=True)
        check_number("--max-splits", self.max_splits, high=MAX_COUNT, integer=True)
        check_number("--chunksize", self.chunksize, high=MAX_CHUNK_KB, integer=True, positive=True)
        if self.max_splits and not self.split:
            raise UsageError("--max-splits needs --split")
        if self.snapshot_window is not None:
            check_number("--snapshot-window", self.snapshot_window, high=MAX_SECONDS, positive=True)
            if not self.snapshot:
                raise UsageError("--snapshot-window needs snapshot mode (-s/--snapshot; snapshot=True)")
        if self.snapshot_post is not None:
            check_number("--snapshot-window POST (after the trigger)", self.snapshot_post, high=MAX_SECONDS, positive=True)
            if not self.snapshot:
                raise UsageError("--snapshot-window PRE:POST needs snapshot mode (-s/--snapshot; snapshot=True)")
        if self.namespace is not None and not re.fullmatch(
            r"/?([A-Za-z]\w*(/[A-Za-z]\w*)*/?)?", self.namespace
        ):
            raise UsageError(f"--namespace {self.namespace!r} is not a ROS namespace (/robot1)")
        parse_duration(self.duration)
        parse_min_space(self.min_space)
        for pattern in ([*self.topics] if self.regex else []) + ([self.exclude] if self.exclude else []):
            try:
                re.compile(pattern)
            except re.error as e:
                raise UsageError(f"bad regular expression {pattern!r}: {e}") from None
        if live and not (self.topics or self.all or self.node):
            raise UsageError("no topics given: name topics, or use -a/--all, -e/--regex or --node")

    def _check_texts(self) -> None:
        """Every text option: text, no control characters (a NUL cannot name a file), bounded."""
        if not isinstance(self.topics, list) or len(self.topics) > MAX_TOPICS:
            raise UsageError(f"at most {MAX_TOPICS} topics per recorder ({len(self.topics)} given)")
        for t in self.topics:
            check_text("topic", t, empty=False)
        for what, value, limit in (
            ("-O/--output-name", self.output_name, MAX_PATH),
            ("-o/--output-prefix", self.output_prefix, MAX_PATH),
            ("directory", self.directory, MAX_PATH),
            ("-x/--exclude", self.exclude, MAX_TEXT),
            ("--node", self.node, MAX_TEXT),
            ("--namespace", self.namespace, MAX_TEXT),
            ("format", self.format, 20),
            ("name_tag", self.name_tag, 100),
        ):
            if value is not None:
                check_text(what, value, limit=limit)
        check_text("node name", self.node_name, empty=False)
        if self.duration is not None and not isinstance(self.duration, (str, int, float)):
            raise UsageError(f"--duration {self.duration!r}: expected seconds")
        if not isinstance(self.min_space, (str, int)):
            raise UsageError(f"--min-space {self.min_space!r}: expected a number with an optional k, M or G multiplier")

    # --- topic selection -------------------------------------------------------------------------
    def _compiled(self) -> tuple[list[re.Pattern[str]], re.Pattern[str] | None]:
        cache: Any = self.__dict__.get("_regex_cache")
        key = (tuple(self.topics), self.regex, self.exclude)
        if cache is None or cache[0] != key:
            pats = [re.compile(t) for t in self.topics] if self.regex else []
            exc = re.compile(self.exclude) if self.exclude else None
            cache = (key, pats, exc)
            self.__dict__["_regex_cache"] = cache
        return cache[1], cache[2]

    def selects(self, topic: str, *, explicit_required: bool = False) -> bool:
        """Whether ``topic`` is recorded: -a / -e regexes / named topics, minus -x.

        With no topics, no -a and no --node (an in-process recorder) every topic is taken
        unless ``explicit_required``.
        """
        pats, exc = self._compiled()
        if exc is not None and exc.fullmatch(topic):
            return False
        if self.all or self.node:
            return True
        if self.regex:
            return any(p.fullmatch(topic) for p in pats)
        if self.topics:
            names = {_global(t) for t in self.topics}
            return topic in names or _global(topic) in names
        return not explicit_required

    @property
    def dated(self) -> bool:
        """Whether the file names carry the date (rosbag's rule: yes unless -O)."""
        return bool(self.append_date if self.append_date is not None else not self.output_name)

    # --- file names ------------------------------------------------------------------------------
    def base_name(self, t: float | None = None) -> str:
        """The file name without split number and extension (rosbag's updateFilenames)."""
        parts: list[str] = []
        prefix = self.output_name if self.output_name else (self.output_prefix or "")
        for ext in registry.file_extensions():  # a name given with its extension (run.bag)
            if ext != ".active" and prefix.lower().endswith(ext):
                prefix = prefix[: -len(ext)]
        if prefix:
            parts.append(prefix)
        if self.dated:
            parts.append(stamp(t))
        if self.name_tag:
            parts.append(self.name_tag)
        if not parts:
            raise UsageError("the bag name is empty (give -o/-O or keep the date)")
        name = "_".join(parts)
        if self.directory and not os.path.isabs(name):
            name = os.path.join(self.directory, name)
        return name

    def file_name(self, split_index: int | None = None, t: float | None = None) -> str:
        name = self.base_name(t)
        if self.split and split_index is not None:
            name += f"_{split_index}"
        return name + self.extension

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: The library's name for the options (``RecorderOptions(snapshot=True, snapshot_window=2.0)``).
RecorderOptions = RecordOptions


def _global(name: str) -> str:
    return name if name.startswith("/") else "/" + name
