"""``polybag record TOPIC...``: record a live ROS 1 graph like ``rosbag record``.

Same options and file naming as rosbag (``-O NAME.mcap`` writes MCAP).  SIGINT/SIGTERM
finish the file (``NAME.active`` is renamed).  At the end a per-topic report is printed
(received, written, dropped) on stderr, or as JSON on stdout with ``--json``.  Exit 0;
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

from polybag.cli._common import print_json
from polybag.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="record ROS 1 topics to a bag or MCAP file (like rosbag record)")
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics (regular expressions with -e)")
    p.add_argument("--topic", action="append", default=[], dest="extra_topics", help="topic to record")
    p.add_argument("-a", "--all", action="store_true", help="record all topics")
    p.add_argument("-e", "--regex", action="store_true", help="match topics using regular expressions")
    p.add_argument(
        "-x", "--exclude", metavar="EXCLUDE_REGEX", help="exclude topics matching this regular expression"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="suppress console output")
    p.add_argument(
        "-p",
        "--publish",
        action="store_true",
        help="publish a msg (std_msgs/Empty on begin_write) when a bag begins",
    )
    p.add_argument(
        "-o",
        "--output-prefix",
        metavar="PREFIX",
        help="prepend PREFIX to the bag name (name ends with the date)",
    )
    p.add_argument("-O", "--output-name", metavar="NAME", help="record to NAME.bag (NAME.mcap: MCAP)")
    p.add_argument(
        "--split",
        nargs="?",
        const=0,
        default=None,
        type=float,
        metavar="MB",
        help="split the bag when --size or --duration is reached (rosbag's --split=MB also works)",
    )
    p.add_argument(
        "--max-splits",
        type=int,
        default=0,
        metavar="N",
        help="keep at most N finished parts, deleting the oldest",
    )
    p.add_argument("--size", type=float, default=0, metavar="MB", help="maximum size of the bag in MB")
    p.add_argument(
        "--duration", metavar="DURATION", help="maximum duration: seconds, or with m or h appended"
    )
    p.add_argument(
        "-b",
        "--buffsize",
        type=float,
        default=256,
        metavar="MB",
        help="internal buffer in MB (default 256, 0 = infinite)",
    )
    p.add_argument("--chunksize", type=int, default=768, metavar="KB", help="chunk size in KB (default 768)")
    p.add_argument(
        "-l", "--limit", type=int, default=0, metavar="NUM", help="only record NUM messages on each topic"
    )
    p.add_argument(
        "-L",
        "--min-space",
        default="1G",
        metavar="SIZE",
        help="minimum free space on the disk (G, M, k multipliers; default 1G)",
    )
    p.add_argument("-j", "--bz2", action="store_true", help="use BZ2 compression")
    p.add_argument("--lz4", action="store_true", help="use LZ4 compression")
    p.add_argument("--node", help="record all topics subscribed to by this node")
    p.add_argument("--tcpnodelay", action="store_true", help="use TCP_NODELAY when subscribing")
    p.add_argument("--udp", action="store_true", help="UDP transport (not supported: refused)")
    p.add_argument(
        "--repeat-latched", action="store_true", help="repeat latched messages at the start of each new bag"
    )
    p.add_argument(
        "-s",
        "--snapshot",
        action="store_true",
        help="keep the last --buffsize MB in memory; a message on snapshot_trigger writes them to a new bag",
    )
    p.add_argument("--master-uri", help="ROS master (default: $ROS_MASTER_URI or http://localhost:11311)")
    p.add_argument("--json", action="store_true", help="print the final report as JSON")
    p.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> Any:
    from polybag.record.options import RecordOptions

    split = args.split is not None
    size = args.size
    if split and args.split and not size:  # rosbag's --split=SIZE
        size = args.split
    return RecordOptions(
        topics=list(args.topics) + list(args.extra_topics),
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
        snapshot=args.snapshot,
    )


def report_lines(report: dict[str, Any]) -> list[str]:
    topics = report["topics"]
    width = max([5] + [len(t) for t in topics])
    lines = [f"{'topic':<{width}}  {'received':>9}  {'written':>9}  {'dropped':>9}"]
    for t, s in topics.items():
        why = [
            f"{n} {k}"
            for k, n in (
                ("buffer full", s["dropped_buffer"]),
                ("over limit", s["dropped_limit"]),
                ("after stop", s["dropped_stopped"]),
            )
            if n
        ]
        lines.append(
            f"{t:<{width}}  {s['received']:>9}  {s['written']:>9}  {s['dropped']:>9}"
            + (f"  ({', '.join(why)})" if why else "")
        )
    tot = report["totals"]
    lines.append(f"{'total':<{width}}  {tot['received']:>9}  {tot['written']:>9}  {tot['dropped']:>9}")
    for f in report["files"]:
        lines.append(f"wrote {f}")
    for f in report["deleted"]:
        lines.append(f"deleted {f} (--max-splits)")
    if report["stop_reason"] and report["stop_reason"] != "stopped":
        lines.append(f"stopped: {report['stop_reason']}")
    for e in report["errors"]:
        lines.append(f"error: {e}")
    return lines


def run(args: argparse.Namespace) -> int:
    from polybag.record.live import LiveSource
    from polybag.record.recorder import Recorder

    opts = options_from_args(args)
    opts.validate(live=True)
    if not (opts.topics or opts.all or opts.node):
        raise UsageError("no topics given")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        source = LiveSource(opts, master_uri=args.master_uri)
        rec = Recorder(opts, source)
        rec.start()
        while not stop.is_set() and not rec.done.is_set():
            stop.wait(0.2)
        report = rec.close(raise_errors=False)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    report["errors"] += [f"source: {e}" for e in source.errors[:5]]
    reason = report["stop_reason"] or ""
    # (in snapshot mode the ring drops its oldest messages by design)
    lost = 0 if opts.snapshot else sum(t["dropped_buffer"] for t in report["topics"].values())
    bad = bool(report["errors"] or lost or reason.startswith(("less than", "write error")))
    if args.json:
        print_json(report)
    elif bad or not args.quiet:  # (-q: the report only when something went wrong)
        for line in report_lines(report):
            print(line, file=sys.stderr)
    return 1 if bad else 0
