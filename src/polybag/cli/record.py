"""``polybag record TOPIC...``: record a live ROS 1 graph like ``rosbag record``.

Same options and file naming as rosbag (``-O NAME.mcap`` writes MCAP).  SIGINT/SIGTERM
finish the file (``NAME.active`` is renamed).  With ``-s``, SIGUSR1 (or a message on
``snapshot_trigger`` in ``--namespace``/``__ns:=NS``) writes the snapshot ring to a new file
while recording goes on (``--snapshot-window S`` keeps only the last S seconds; ``PRE:POST``
also records POST seconds after each trigger, overlapping snapshots each whole).
``--config FILE.yaml`` runs several recorders on one node (``recorders:``, a list of
mappings of the long option names); SIGUSR1 triggers every snapshot recorder, SIGINT stops
all and finishes every file.  The config is checked before anything starts (bounded YAML,
every field, at most 64 recorders, no two recorders writing one file, also with
``--ros2``); a recording never replaces an existing file (exit 2 naming it).  At the end a per-topic report is printed
(received, written, dropped) on stderr, or as JSON on stdout with ``--json``.  While it records,
a table per topic (messages, rate, bandwidth, drops, last seen; file size, part, free disk,
time left) is shown in place on stderr when it is a terminal (not with ``-q``), and
``--json-stats SEC`` writes the same figures as a JSON line to stdout every SEC seconds
(:mod:`polybag.record.stats`).  Exit 0;
1 if messages were lost because the buffer was full (not counting the snapshot ring's
oldest), or the recording stopped on a write error or low disk space; 2 bad options.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from polybag.cli.text import DURATION_HELP, print_json
from polybag.errors import UsageError

#: ``polybag record``'s arguments: each one's names (flags) and its ``add_argument`` keywords, in
#: the order ``--help`` lists them
_ARGUMENTS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("topics",), {"nargs": "*", "metavar": "TOPIC", "help": "topics (regular expressions with -e)"}),
    (("--topic",), {"action": "append", "default": [], "dest": "extra_topics", "help": "topic to record"}),
    (("--topics",), {"nargs": "+", "action": "extend", "default": [], "dest": "extra_topics", "metavar": "TOPIC", "help": "topics to record, as the TOPIC arguments (regular expressions with -e); repeatable"}),
    (("-a", "--all"), {"action": "store_true", "help": "record all topics"}),
    (("-e", "--regex"), {"action": "store_true", "help": "match topics using regular expressions"}),
    (("-x", "--exclude"), {"metavar": "EXCLUDE_REGEX", "help": "exclude topics matching this regular expression"}),
    (("-q", "--quiet"), {"action": "store_true", "help": "suppress console output"}),
    (("-p", "--publish"), {"action": "store_true", "help": "publish a msg (std_msgs/Empty on begin_write) when a bag begins"}),
    (("-o", "--output-prefix"), {"metavar": "PREFIX", "help": "prepend PREFIX to the bag name (name ends with the date)"}),
    (("-O", "--output-name"), {"metavar": "NAME", "help": "record to NAME.bag (NAME.mcap: MCAP)"}),
    (("--split",), {"nargs": "?", "const": 0, "default": None, "type": float, "metavar": "MB", "help": "split the bag when --size or --duration is reached (rosbag's --split=MB also works)"}),
    (("--max-splits",), {"type": int, "default": 0, "metavar": "N", "help": "keep at most N finished parts, deleting the oldest"}),
    (("--size",), {"type": float, "default": 0, "metavar": "MB", "help": "maximum size of the bag in MB"}),
    (("--duration",), {"metavar": "DURATION", "help": f"maximum duration: {DURATION_HELP}"}),
    (("-b", "--buffsize"), {"type": float, "default": 256, "metavar": "MB", "help": "internal buffer in MB (default 256, 0 = infinite)"}),
    (("--chunksize",), {"type": int, "default": 768, "metavar": "KB", "help": "chunk size in KB (default 768)"}),
    (("-l", "--limit"), {"type": int, "default": 0, "metavar": "NUM", "help": "only record NUM messages on each topic"}),
    (("-L", "--min-space"), {"default": "1G", "metavar": "SIZE", "help": "minimum free space on the disk (G, M, k multipliers; default 1G)"}),
    (("-j", "--bz2"), {"action": "store_true", "help": "use BZ2 compression"}),
    (("--lz4",), {"action": "store_true", "help": "use LZ4 compression"}),
    (("--node",), {"help": "record all topics subscribed to by this node"}),
    (("--tcpnodelay",), {"action": "store_true", "help": "use TCP_NODELAY when subscribing"}),
    (("--udp",), {"action": "store_true", "help": "UDP transport (not supported: refused)"}),
    (("--repeat-latched",), {"action": "store_true", "help": "repeat latched messages at the start of each new bag"}),
    (("-s", "--snapshot"), {"action": "store_true", "help": "keep the last --buffsize MB in memory; a message on snapshot_trigger writes them to a new bag"}),
    (("--snapshot-window",), {"metavar": "PRE[:POST]", "help": f"snapshot: keep only the last PRE seconds of each topic (also bounded by --buffsize; implies -s); with :POST each snapshot also records POST seconds after its trigger, overlapping snapshots each get every message of their window (':POST' alone: all the ring holds, then POST s; at most 8 recording at once): {DURATION_HELP}"}),
    (("--namespace",), {"metavar": "NS", "help": "the recorder node's namespace (its snapshot_trigger topic); also __ns:=NS"}),
    (("--config",), {"metavar": "FILE.yaml", "help": "several recorders on one node: a YAML file with 'recorders:', entries of long option names"}),
    (("--master-uri",), {"help": "ROS master (default: $ROS_MASTER_URI or http://localhost:11311)"}),
    (("--json",), {"action": "store_true", "help": "print the final report as JSON"}),
    (("--json-stats",), {"type": float, "default": None, "metavar": "SEC", "help": "every SEC seconds (0.1 or more) write the live figures (per topic and totals; one line per recorder) as a JSON line to stdout, and a last one with \"final\": true at the end"}),
    (("--ros2",), {"action": "store_true", "help": "record a live ROS 2 graph (DDS, $ROS_DOMAIN_ID) to a rosbag2 bag (-O NAME.mcap: MCAP)"}),
    (("--storage",), {"choices": ("sqlite3", "mcap"), "default": "sqlite3", "help": "--ros2: the rosbag2 storage (default sqlite3)"}),
    (("--types",), {"action": "append", "default": [], "metavar": "DIR", "help": "--ros2: .msg/.idl files of a workspace's own types"}),
    (("--include-hidden-topics",), {"action": "store_true", "help": "--ros2: -a/-e also take hidden topics (a name part starting with _)"}),
    (("--type-timeout",), {"type": float, "default": 5.0, "metavar": "SECONDS", "help": "--ros2: how long to wait for a publisher's type description service for a type not known (0: never ask; default 5)"}),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "record",
        help="record a live ROS 1 graph to a bag or MCAP file (like rosbag record), or a ROS 2 graph "
        "to a rosbag2 bag with --ros2 (like ros2 bag record)",
    )
    for flags, kwargs in _ARGUMENTS:
        p.add_argument(*flags, **kwargs)
    p.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> Any:
    from polybag.record.options import RecordOptions

    split = args.split is not None
    size = args.size
    topics, namespace, node_name = _remaps(list(args.topics) + list(args.extra_topics))
    namespace = args.namespace if args.namespace is not None else namespace
    if split and args.split and not size:  # rosbag's --split=SIZE
        size = args.split
    return RecordOptions(
        topics=topics,
        all=args.all,
        regex=args.regex,
        exclude=args.exclude,
        quiet=args.quiet or args.json,
        publish=args.publish,
        output_prefix=args.output_prefix,
        output_name=args.output_name,
        split=split,
        max_splits=args.max_splits,
        size=size,
        duration=args.duration,
        buffsize=args.buffsize,
        chunksize=args.chunksize,
        limit=args.limit,
        min_space=args.min_space,
        bz2=args.bz2,
        lz4=args.lz4,
        node=args.node,
        tcpnodelay=args.tcpnodelay,
        udp=args.udp,
        repeat_latched=args.repeat_latched,
        snapshot=args.snapshot or args.snapshot_window is not None,
        snapshot_window=args.snapshot_window,
        namespace=namespace,
        node_name=node_name or "/record",
    )


def _remaps(words: list[str]) -> tuple[list[str], str | None, str | None]:
    """The topics, and ROS's ``__ns:=NS`` / ``__name:=NAME`` special arguments among them."""
    topics: list[str] = []
    ns = name = None
    for w in words:
        if ":=" not in w:
            topics.append(w)
            continue
        key, _, value = w.partition(":=")
        if key == "__ns":
            ns = value
        elif key == "__name":
            name = value
        else:
            raise UsageError(
                f"{w}: remapping topics is not supported by polybag record (only __ns:= and __name:=)"
            )
    return topics, ns, name


def report_lines(report: dict[str, Any]) -> list[str]:
    from polybag.util.text import peer_text

    topics = report["topics"]
    label = {t: peer_text(t) for t in topics}  # (names come from peers)
    width = max([5] + [len(t) for t in label.values()])
    lines = [f"{'topic':<{width}}  {'received':>9}  {'written':>9}  {'dropped':>9}"]
    for t, s in topics.items():
        why = [
            f"{n} {k}"
            for k, n in (
                ("buffer full", s["dropped_buffer"]),
                ("over limit", s["dropped_limit"]),
                ("after stop", s["dropped_stopped"]),
                ("older than the window", s.get("dropped_window", 0)),
                ("other type", s.get("dropped_type", 0)),
            )
            if n
        ]
        lines.append(
            f"{label[t]:<{width}}  {s['received']:>9}  {s['written']:>9}  {s['dropped']:>9}"
            + (f"  ({', '.join(why)})" if why else "")
        )
    tot = report["totals"]
    lines.append(f"{'total':<{width}}  {tot['received']:>9}  {tot['written']:>9}  {tot['dropped']:>9}")
    for f in report["files"]:
        lines.append(f"wrote {f}")
    for snap in report.get("snapshots", []):  # (--snapshot-window PRE:POST: each one's window)
        if snap["end_ns"] != snap["trigger_ns"] and snap["file"]:
            at, start = snap["trigger_ns"], snap["start_ns"]
            pre = "all the ring" if start is None else f"{(at - start) / 1e9:g} s"
            what = "" if snap["complete"] else ", cut short by the stop"
            lines.append(
                f"snapshot {snap['file']}: {snap['messages']} messages, {pre} before its trigger "
                f"to {(snap['end_ns'] - at) / 1e9:g} s after{what}"
            )
    if report.get("snapshots_not_listed"):  # (the report lists the last MAX_LISTED_SNAPSHOTS)
        lines.append(f"{report['snapshots_not_listed']} earlier snapshots not listed")
    for f in report["deleted"]:
        lines.append(f"deleted {f} (--max-splits)")
    if report["stop_reason"] and report["stop_reason"] != "stopped":
        lines.append(f"stopped: {report['stop_reason']}")
    for w in report.get("warnings", []):
        lines.append(f"polybag record: warning: {w}")  # (as every command's warnings)
    for e in report["errors"]:
        lines.append(f"polybag record: error: {e}")
    return lines


def _bad(opts: Any, report: dict[str, Any]) -> bool:
    """Whether a recorder's report means exit 1 (lost messages, a write error, no space)."""
    reason = report["stop_reason"] or ""
    # (in snapshot mode the ring drops its oldest messages by design)
    lost = 0 if opts.snapshot else sum(t["dropped_buffer"] for t in report["topics"].values())
    return bool(report["errors"] or lost or reason.startswith(("less than", "write error")))


def _group_options(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """The recorders of ``--config`` (command-line recording options are refused with it)."""
    from dataclasses import replace

    from polybag.record.group import load_config
    from polybag.record.options import RecordOptions

    single = options_from_args(args)
    if replace(single, quiet=False, namespace=None) != RecordOptions():
        raise UsageError(
            "--config takes the recording options from the file; give only --master-uri, -q, --json, --json-stats"
        )
    cfg = load_config(args.config, ros2=bool(args.ros2))
    ns = args.namespace if args.namespace is not None else (single.namespace or cfg.get("namespace"))
    recorders = cfg["recorders"]
    for o in recorders:
        if single.quiet:
            o.quiet = True
        if o.namespace is None and ns:
            o.namespace = ns
    return recorders, {
        "master_uri": args.master_uri or cfg.get("master_uri"),
        "namespace": ns or "",
        "node_name": cfg.get("node_name", "/record"),
    }


def run(args: argparse.Namespace) -> int:
    from polybag.record.group import RecorderGroup
    from polybag.record.stats import check_json_every

    check_json_every(args.json_stats)  # (a bad SEC: exit 2 before anything starts)
    if args.ros2:
        return _run_ros2(args)
    if args.config:
        all_opts, kw = _group_options(args)
    else:
        opts = options_from_args(args)
        opts.validate(live=True)
        if not (opts.topics or opts.all or opts.node):
            raise UsageError("no topics given")
        all_opts, kw = (
            [opts],
            {"master_uri": args.master_uri, "namespace": opts.ns, "node_name": opts.node_name},
        )
    stop = threading.Event()
    group = RecorderGroup(all_opts, **kw)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_usr1(signum: int, frame: FrameType | None) -> None:
        # (a thread: the handler must not wait for a lock the interrupted code may hold)
        threading.Thread(target=group.trigger, name="polybag-record-sigusr1", daemon=True).start()

    sigs = {signal.SIGINT: on_signal, signal.SIGTERM: on_signal}
    if sys.platform != "win32" and any(o.snapshot for o in all_opts):  # (no SIGUSR1 on Windows)
        sigs[signal.SIGUSR1] = on_usr1
    old = {s: signal.signal(s, h) for s, h in sigs.items()}
    view = _view(args, group.recorders)
    try:
        group.start()
        view.start()
        while not stop.is_set() and not group.done:
            stop.wait(0.2)
        reports = group.close(raise_errors=False)
    finally:
        view.finish()
        for s, h in old.items():
            signal.signal(s, h)
    src = group.source
    return _report(args, all_opts, reports, src.errors[:5] if src is not None else [], src.warnings[:5] if src is not None else [])


def _run_ros2(args: argparse.Namespace) -> int:
    """``polybag record --ros2``: recorders fed by one :class:`polybag.record.live_ros2.Ros2Source`
    (several with ``--config``, each topic subscribed once)."""
    from polybag.codecs.ros2 import add_types
    from polybag.record.live_ros2 import Ros2Member, Ros2Source
    from polybag.record.ros2_recorder import Ros2Recorder

    for folder in args.types:
        add_types(folder)
    from polybag.record.files import NameRegistry
    from polybag.record.group import plan_outputs, start_all

    if args.config:
        all_opts, _kw = _group_options(args)
        all_opts = plan_outputs(all_opts, ros2=True, where=args.config)
    else:
        opts = options_from_args(args)
        opts.validate(live=True)
        all_opts = [opts]
    if any(o.node for o in all_opts):
        raise UsageError("--node is a ROS 1 option")
    stop = threading.Event()
    source = Ros2Source(
        None if args.config else all_opts[0],
        include_hidden=args.include_hidden_topics,
        type_timeout=max(0.0, args.type_timeout),
    )
    recs = [
        Ros2Recorder(o, Ros2Member(source) if args.config else source, storage=args.storage) for o in all_opts
    ]
    shared = NameRegistry()
    for r in recs:
        r.share_names(shared)  # (no two recorders ever take one name)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def trigger_all() -> None:
        for r in recs:
            if r.options.snapshot:
                r.trigger()

    def on_usr1(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=trigger_all, name="polybag-record-sigusr1", daemon=True).start()

    sigs = {signal.SIGINT: on_signal, signal.SIGTERM: on_signal}
    if sys.platform != "win32" and any(o.snapshot for o in all_opts):
        sigs[signal.SIGUSR1] = on_usr1
    old = {s: signal.signal(s, h) for s, h in sigs.items()}
    view = _view(args, recs)
    try:
        start_all(recs)
        view.start()
        while not stop.is_set() and not all(r.done.is_set() for r in recs):
            stop.wait(0.2)
        reports = [r.close(raise_errors=False) for r in recs]
    finally:
        view.finish()
        for s, h in old.items():
            signal.signal(s, h)
    return _report(args, all_opts, reports, source.errors[:5], source.warnings[:20])


def _view(args: argparse.Namespace, recorders: list[Any]) -> Any:
    """The live stats view of ``recorders``: the table on stderr when it is a terminal (not
    with ``-q``), JSON lines on stdout with ``--json-stats SEC``."""
    from polybag.record.stats import StatsView, check_json_every, plain_terminal

    every = check_json_every(args.json_stats)
    err = sys.stderr
    try:
        tty = not args.quiet and err.isatty()
    except (AttributeError, ValueError):
        tty = False
    return StatsView(
        recorders, indexed=bool(args.config), term=err if tty else None, plain=plain_terminal(), json_every=every
    )


def _report(args: argparse.Namespace, all_opts: list[Any], reports: list[dict[str, Any]], errors: list[str], warnings: list[str]) -> int:
    """Add the source's ``errors``/``warnings`` to every recorder's report, print them (JSON,
    or the text report unless ``-q`` and all went well) and return the exit status."""
    bad = False
    for o, rep in zip(all_opts, reports):
        rep["errors"] += [f"source: {e}" for e in errors]
        rep["warnings"] += [f"source: {w}" for w in warnings]
        bad = _bad(o, rep) or bad
    out: dict[str, Any] = reports[0] if not args.config else {"recorders": reports}
    if args.json:
        print_json(out)
    elif bad or not args.quiet:  # (-q: the report only when something went wrong)
        for i, rep in enumerate(reports):
            if args.config:
                print(f"recorder {i}:", file=sys.stderr)
            for line in report_lines(rep):
                print(line, file=sys.stderr)
    return 1 if bad else 0
