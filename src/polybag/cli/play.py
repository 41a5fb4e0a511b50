"""``polybag play FILE...``: publish logs to a live ROS 1 graph, like ``rosbag play``.

Takes rosbag play's options (``-r``, ``-s``, ``-u``, ``-l``, ``--clock --hz``, ``--topics``,
``--pause-topics``, ``--pause``, ``-d``, ``-i``, ``--skip-empty``, ``-q``, ``-k``,
``--wait-for-subscribers``, ``--wait-for-known-subscribers`` (``--ros2``), ``-p``, ``--rate-control-topic``/``--rate-control-max-delay``) and any input polybag reads (bags, MCAP ``ros1``
channels, ULog as ``ulog_msgs/*``); several inputs are merged by log time.  When stdin is a
terminal, space pauses and resumes and ``s`` steps one message while paused.  ROS remapping
arguments ``/from:=/to`` (and ``__name:=``, ``__ns:=``, ``__master:=``) rename what is
published, as for any ROS node.  ``--json`` prints the counts and the send lateness
(median, p99, max) at the end.  ``--realtime`` plays from a ``SCHED_FIFO`` thread (Linux,
when permitted; a refusal is a warning and playback goes on as usual).

Exit codes: 0 played, 2 usage, 3 an input cannot be read or the master cannot be reached,
130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from polybag.cli._ops import TopicPattern, add_topic_options, split_commas, topic_selection
from polybag.cli.text import DURATION_HELP


def _is_log_file(arg: str) -> bool:
    """Whether a positional argument names a log file (an extension of a registered format)
    rather than a topic."""
    from polybag.formats import registry

    return arg.endswith(registry.file_extensions()) and os.path.isfile(arg)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "play",
        help="publish logs in real time to a ROS 1 master (like rosbag play), or to a ROS 2 graph "
        "with --ros2 (like ros2 bag play)",
        description="Play FILE... (ROS 1 bags, ROS 2 rosbag2 bags, MCAP, ULog; merged by log time) to the "
        "ROS master at ROS_MASTER_URI, or with --ros2 to the ROS 2 (DDS) graph. Space pauses/resumes and s steps when stdin is a terminal.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="logs to play")
    p.add_argument("--bags", nargs="+", default=[], metavar="FILE", help="more logs to play")
    p.add_argument("-p", "--prefix", default="", help="prefix all output topics")
    p.add_argument("-q", "--quiet", action="store_true", help="no console output")
    p.add_argument("-i", "--immediate", action="store_true", help="play all messages without waiting")
    p.add_argument("--pause", action="store_true", help="start paused")
    p.add_argument("--queue", type=int, default=100, help="outgoing queue size (accepted for rosbag compatibility)")
    p.add_argument("--clock", action="store_true", help="publish the bag time on /clock")
    p.add_argument("--hz", type=float, default=100.0, help="/clock frequency (default 100)")
    p.add_argument("-d", "--delay", default=0.2, metavar="SEC", help=f"sleep this long after advertising (default 0.2): {DURATION_HELP}")
    p.add_argument("-r", "--rate", type=float, default=1.0, help="multiply the publish rate by FACTOR")
    p.add_argument("-s", "--start", default=0.0, metavar="SEC", help=f"start this far into the logs (from their start, as rosbag's -s): {DURATION_HELP}")
    p.add_argument("-u", "--duration", default=None, metavar="SEC", help=f"play only this long: {DURATION_HELP}")
    p.add_argument("--skip-empty", default=None, metavar="SEC", help=f"skip gaps longer than this: {DURATION_HELP}")
    p.add_argument("-l", "--loop", action="store_true", help="loop playback")
    p.add_argument("--loop-count", type=int, default=None, metavar="N", help="with -l: stop after N passes")
    p.add_argument("-k", "--keep-alive", action="store_true", help="keep publishers alive after the end")
    p.add_argument("--try-future-version", action="store_true", help="accepted for rosbag compatibility")
    add_topic_options(p, short=False, what="play only")
    p.add_argument("--pause-topics", nargs="+", default=[], metavar="TOPIC", help="pause after these topics")
    p.add_argument("--wait-for-subscribers", action="store_true", help="wait for a subscriber on each topic")
    p.add_argument("--wait-for-known-subscribers", default=2.0, metavar="SEC",
                   help="with --ros2: before the clock starts, wait at most SEC (default 2; 0: not at all) "
                   "until every subscriber discovery already knows on each played topic is matched")
    p.add_argument("--rate-control-topic", default=None, metavar="TOPIC",
                   help="hold playback while bag time is ahead of this topic's header stamps")
    p.add_argument("--rate-control-max-delay", default=1.0, metavar="SEC",
                   help="how far ahead of --rate-control-topic playback may run (default 1)")
    p.add_argument("--node", default="/play", help="node name (default /play, made anonymous)")
    p.add_argument("--json", action="store_true", help="print the counts and lateness as JSON at the end")
    p.add_argument("--ros2", action="store_true",
                   help="publish to a live ROS 2 graph (DDS, $ROS_DOMAIN_ID) with the recorded QoS")
    p.add_argument("--realtime", action="store_true",
                   help="play from a SCHED_FIFO thread (Linux, needs the privilege): on-time messages "
                   "on a busy machine")
    p.add_argument("--realtime-priority", type=int, default=10, metavar="PRIO",
                   help="the SCHED_FIFO priority of --realtime (1..99, default 10)")
    p.set_defaults(func=run)


def _resolve(name: str, ns: str) -> str:
    """A ROS name resolved in namespace ``ns`` (global names stay; ``~private`` is refused)."""
    from polybag.errors import UsageError

    if name.startswith("~"):
        raise UsageError(f"remapping private name {name!r}: the player has no private topics")
    if name.startswith("/"):
        return name
    return ns.rstrip("/") + "/" + name


def remapping_arguments(argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """ROS remapping arguments ``FROM:=TO`` in ``argv``: ``(topic remaps, special ones)``.

    Special ones are ``__name``, ``__ns``, ``__master``, ``__ip``/``__hostname`` and ``__log``
    (the last is accepted and ignored); private parameters ``_param:=value`` are refused, as
    there is no parameter server client.  Topic names are resolved in ``__ns`` (default ``/``).
    """
    from polybag.errors import UsageError

    special: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for arg in argv:
        src, _, dst = arg.partition(":=")
        if not src or not dst:
            raise UsageError(f"remapping argument {arg!r} needs the form FROM:=TO")
        if src.startswith("__"):
            if src not in ("__name", "__ns", "__master", "__ip", "__hostname", "__log"):
                raise UsageError(f"unknown special remapping argument {arg!r}")
            special[src] = dst
        elif src.startswith("_"):
            raise UsageError(f"{arg!r}: private parameters are not supported by polybag play")
        else:
            pairs.append((src, dst))
    ns = special.get("__ns", "/")
    if not ns.startswith("/"):
        ns = "/" + ns
    special["__ns"] = ns
    return {_resolve(a, ns): _resolve(b, ns) for a, b in pairs}, special


def _split_inputs(args: argparse.Namespace) -> list[str]:
    """Files, plus log files rosbag-style ``--topics a b x.bag`` swallowed into the topics;
    ``FROM:=TO`` arguments anywhere among them go to ``args.remaps``."""
    remaps: list[str] = []
    files: list[str] = []
    for f in [*args.files, *args.bags]:
        (remaps if ":=" in f else files).append(f)

    def topics_only(names: list[str]) -> list[str]:
        topics: list[str] = []
        for t in names:
            (remaps if ":=" in t else files if _is_log_file(t) else topics).append(t)
        return topics

    if args.topics is not None:
        # (--topics /a,/b: two patterns, each named in an error)
        args.topics = [TopicPattern(p) for t in topics_only(args.topics) for p in split_commas(t.given if isinstance(t, TopicPattern) else t)] or None
    args.pause_topics = topics_only(args.pause_topics)
    args.remaps = remaps
    return files


@contextlib.contextmanager
def keyboard(player: Any, stdin: Any = None) -> Iterator[bool]:
    """Space toggles pause, ``s`` steps, while ``stdin`` (default ``sys.stdin``; a file or a
    file descriptor) is a terminal: cbreak mode meanwhile, the terminal's settings restored
    after.  Yields whether the keys are being read."""
    try:
        import select
        import termios
        import tty
    except ImportError:
        yield False
        return
    if stdin is None:
        stdin = sys.stdin
    if stdin is None:
        yield False
        return
    try:
        fd = stdin if isinstance(stdin, int) else stdin.fileno()
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's replaced stdin)
        yield False
        return
    if not os.isatty(fd):
        yield False
        return
    try:
        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
    except termios.error:
        yield False
        return
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            ch = os.read(fd, 1)
            if ch == b" ":
                player.toggle_pause()
            elif ch in (b"s", b"S"):
                player.step()
            elif not ch:
                return

    t = threading.Thread(target=loop, name="polybag-play-keys", daemon=True)
    t.start()
    try:
        yield True
    finally:
        done.set()
        t.join(1.0)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def header_stamp(data: bytes) -> int | None:
    """The ``std_msgs/Header`` stamp (ns) a message starts with (uint32 seq, uint32 secs, nsecs)."""
    if len(data) < 12:
        return None
    secs = int.from_bytes(data[4:8], "little")
    nsecs = int.from_bytes(data[8:12], "little")
    return secs * 1_000_000_000 + nsecs


def _rate_control(player: Any, data: bytes) -> None:
    stamp = header_stamp(data)
    if stamp is not None:
        player.rate_control(stamp)


def _status(player: Any, out: Any, done: threading.Event) -> None:
    """rosbag's status line, ten times a second (only on a terminal)."""
    start = player.start_time
    ends = [r.summary.end_time for r in player.readers if r.summary.end_time is not None]
    end = max(ends) if ends else None
    if player.end_time is not None:
        end = player.end_time if end is None else min(end, player.end_time)
    total = None if end is None else max(0, end - start) / 1e9
    while not done.wait(0.1):
        t = player.time
        state = "PAUSED " if player.paused else "DELAYED" if player.held else "RUNNING"
        tail = f" / {total:.6f}" if total is not None else ""
        out.write(f"\r [{state}]  Bag Time: {t / 1e9:17.6f}   Duration: {(t - start) / 1e9:.6f}{tail}   ")
        out.flush()


def run(args: argparse.Namespace) -> int:
    """``polybag play``: open the inputs and the sink, play, print the result."""
    import polybag
    from polybag.errors import UsageError
    from polybag.ops.inputs import require_topics
    from polybag.play import Player

    files = _split_inputs(args)
    if not files:
        raise UsageError("no input files")
    if args.loop_count is not None and not args.loop:
        args.loop = True
    remap, special = remapping_arguments(args.remaps)
    opts = _play_options(args, remap)
    opts.validate()
    out = sys.stderr  # (the status line, the opening and result lines: messages; --json on stdout)
    quiet = args.quiet or args.json
    ns = special["__ns"]
    node_name = _node_name(args, special)
    with contextlib.ExitStack() as stack:
        # inputs first: an unreadable file fails before anything is advertised
        readers = [stack.enter_context(polybag.open(f)) for f in files]
        selection = topic_selection(args)
        if selection is not None:  # --topics that no input has: said, before anything is advertised
            channels = [c for r in readers for c in r.summary.channels.values()]
            require_topics(selection, channels)
            rx = re.compile(selection)
            opts.topics = sorted({c.topic for c in channels if rx.fullmatch(c.topic)})
        sink, node = _open_sink(args, opts, special, node_name, stack)
        with Player(readers, opts, sink) as player:
            if opts.rate_control_topic:
                rc_topic = _resolve(opts.rate_control_topic, ns)
                rc_topic = remap.get(rc_topic, rc_topic)
                if node is None:  # (--ros2: a DDS reader, once the topic's publisher is known)
                    from polybag.play.ros2_sink import RateControl

                    warn = lambda text: print(f"polybag play: warning: {text}", file=sys.stderr)  # noqa: E731
                    stack.enter_context(RateControl(sink.graph, rc_topic, player.rate_control, warn))
                else:
                    node.subscribe(rc_topic, lambda m: _rate_control(player, m.data))
            if not quiet:
                for f in files:
                    out.write(f"[ INFO] Opening {f}\n")
                out.flush()
            stats = _play(player, opts, out, quiet)
            _print_result(args, stats, sink, out, quiet)
    return 0


def _play_options(args: argparse.Namespace, remap: dict[str, str]) -> Any:
    """The :class:`~polybag.play.PlayOptions` of the command line (not yet validated)."""
    from polybag.play import PlayOptions

    return PlayOptions(
        remap=remap,
        realtime=args.realtime_priority if args.realtime else None,
        rate=args.rate,
        start=args.start,
        duration=args.duration,
        loop=args.loop,
        loop_count=args.loop_count,
        clock=args.clock,
        hz=args.hz,
        topics=args.topics,
        pause_topics=args.pause_topics,
        pause=args.pause,
        delay=args.delay,
        immediate=args.immediate,
        skip_empty=args.skip_empty,
        queue=args.queue,
        quiet=args.quiet,
        keep_alive=args.keep_alive,
        wait_for_subscribers=args.wait_for_subscribers,
        wait_for_known_subscribers=args.wait_for_known_subscribers,
        prefix=args.prefix,
        rate_control_topic=args.rate_control_topic,
        rate_control_max_delay=args.rate_control_max_delay,
    )


def _node_name(args: argparse.Namespace, special: dict[str, str]) -> str:
    """The ROS 1 node's name: ``__name:=`` or ``--node``, resolved in ``__ns``."""
    ns = special["__ns"]
    name = special.get("__name")
    return _resolve(name, ns) if name else _resolve(args.node.lstrip("/") or "play", ns)


def _open_sink(
    args: argparse.Namespace, opts: Any, special: dict[str, str], node_name: str,
    stack: contextlib.ExitStack,
) -> tuple[Any, Any]:
    """The sink to publish to, closed by ``stack``: ``(sink, ROS 1 node)``, a ROS 2 graph's
    sink (node ``None``) with ``--ros2``."""
    from polybag.net.ros1.node import Node
    from polybag.play import Ros1Sink

    ns = special["__ns"]
    if args.ros2:
        from polybag.net.ros2 import Graph
        from polybag.play.ros2_sink import Ros2Sink

        graph = Graph()
        stack.callback(graph.close)
        return Ros2Sink(graph, prefix=args.prefix, namespace=ns), None
    host = special.get("__hostname") or special.get("__ip")
    node = stack.enter_context(
        Node(node_name, special.get("__master"), host=host, anonymous=special.get("__name") is None)
    )
    return Ros1Sink(node, prefix=args.prefix, namespace=ns), node


def _play(player: Any, opts: Any, out: Any, quiet: bool) -> Any:
    """Run ``player`` with the status line (on a terminal), SIGTERM stopping it and the
    keyboard read; its stats."""
    done = threading.Event()
    status = None
    if not quiet and out.isatty():
        status = threading.Thread(target=_status, args=(player, out, done), daemon=True)
        status.start()
    previous = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM ends playback cleanly: publishers flushed and unregistered
        previous = signal.signal(signal.SIGTERM, lambda *_: player.stop())
    try:
        with keyboard(player) as keys:
            if not quiet:
                if keys:
                    out.write("Hit space to toggle paused, or 's' to step.\n")
                if opts.pause:
                    out.write("Paused.\n")
                out.flush()
            return player.run()
    except KeyboardInterrupt:
        player.stop()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        done.set()
        if status is not None:
            status.join(1.0)
            out.write("\n")


def _print_result(args: argparse.Namespace, stats: Any, sink: Any, out: Any, quiet: bool) -> None:
    """The ``--realtime`` refusal warning, then the counts (as JSON with ``--json``)."""
    if stats.realtime not in (None, "granted"):
        print(f"polybag play: warning: --realtime: {stats.realtime}", file=sys.stderr)
    if args.json:
        from polybag.cli.text import print_json

        print_json({**stats.as_dict(), "skipped": sorted(set(sink.skipped))})
    elif not quiet:
        out.write(f"Done: {stats.published} messages on {len(stats.per_topic)} topics")
        out.write(f" ({stats.loops} passes)\n" if stats.loops > 1 else "\n")
        if stats.lateness.count:
            out.write(f"Timing: {stats.lateness.stats()}\n")
        if sink.skipped:
            from polybag.util.text import safe_line  # (topics from the files)

            out.write(safe_line(f"Skipped (not ROS {2 if args.ros2 else 1}): {', '.join(sorted(set(sink.skipped)))}") + "\n")
        out.flush()
