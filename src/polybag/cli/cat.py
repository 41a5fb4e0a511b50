"""``polybag cat FILE [--topics PATTERN...] [--exclude-topics PATTERN...] [--start T --end T] [--json] [--format F]``: print messages.

``--format {mcap,bag,ulog}`` names the input's format when its first bytes do not (a
version-0 bag read from stdin: ``polybag cat --format bag - < old.bag``).

``--json`` prints one JSON object per line: topic, log_time, publish_time, sequence and
the decoded ``message`` when a codec exists for the channel, else ``data`` (base64).

A message whose definition cannot be used (a repeated field name, a missing type) or whose
payload does not match it is still printed (``data`` in base64, or a hex preview), with one
``polybag cat: warning: TOPIC: cannot decode (REASON); ...`` line per topic on stderr, and
the command exits 1 at the end.  A channel whose encoding has no codec at all is printed
the same way without a warning.

``--topics`` that matches no topic of the file is an error naming the topics there are (exit 1).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from polybag.cli._ops import add_topic_options, log, topic_selection
from polybag.cli.info import add_format_option, open_input
from polybag.cli.text import TIME_HELP, format_ns, json_default
from polybag.errors import PolybagError, UnsupportedError
from polybag.model import Channel, Message
from polybag.selection import TimeWindow
from polybag.util.text import safe_line

_RELEASE_EVERY = 16 << 20  # payload bytes printed between releases of the input's mapped pages


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("cat", help="print messages (decoded when a codec exists)")
    p.add_argument("file", help="log file, or - for stdin")
    add_topic_options(p, what="print only")
    p.add_argument("--start", metavar="T", help=f"first log time: {TIME_HELP}")
    p.add_argument("--end", metavar="T", help="log time to stop before (same forms as --start)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--reverse", action="store_true", help="newest first")
    p.add_argument("--file-order", action="store_true", help="file order instead of log-time order")
    p.add_argument("-n", "--limit", type=int, default=None, help="stop after this many messages")
    add_format_option(p)
    p.set_defaults(func=run)


class _Decoder:
    """Per-channel decoding with fallback to raw bytes when no codec is available.

    A message that cannot be decoded although a codec exists (an unusable definition, a
    payload that does not match it) is reported once per topic on stderr and counted in
    ``problems``."""

    def __init__(self, fallback: str) -> None:
        self._broken: set[int] = set()
        self._warned: set[str] = set()
        self._fallback = fallback
        self.problems = 0

    def to_dict(self, m: Message) -> tuple[bool, Any]:
        key = id(m.channel)
        if key in self._broken:
            return False, None
        try:
            return True, m.to_dict()
        except (PolybagError, ImportError, NotImplementedError) as e:
            no_codec = isinstance(e, (UnsupportedError, ImportError, NotImplementedError))
            if not _is_decode_error(e):
                self._broken.add(key)
            if not no_codec:
                self.problems += 1
                self._warn(m.channel.topic, e)
            return False, None

    def _warn(self, topic: str, e: Exception) -> None:
        if topic in self._warned:
            return
        self._warned.add(topic)
        reason = str(e).replace("\n", " ")
        sys.stderr.write(safe_line(f"polybag cat: warning: {topic}: cannot decode ({reason}); payload printed as {self._fallback}") + "\n")
        sys.stderr.flush()


def _is_decode_error(e: Exception) -> bool:
    from polybag.errors import DecodeError

    return isinstance(e, DecodeError)


def _jsonable(o: Any) -> Any:
    """JSON for decoded messages' values (message objects by their slots)."""
    return json_default(o, slots=True)


def _preview(data: bytes | memoryview, n: int = 16) -> str:
    b = bytes(data[:n])
    more = "..." if len(data) > n else ""
    return b.hex(" ") + more


def run(args: argparse.Namespace) -> int:
    dec = _Decoder("base64" if args.json else "a hex preview")
    out = sys.stdout
    with open_input(args.file, getattr(args, "input_format", None)) as reader:
        since_release = 0  # payload bytes since the input's mapped pages were last released
        start, end = TimeWindow.parse(args.start, args.end, lambda: reader.summary.start_time or 0)
        topics = topic_selection(args)
        it = reader.messages(
            topics=topics,
            start=start,
            end=end,
            reverse=args.reverse,
            order="file" if args.file_order else "log_time",
        )
        count = 0
        labels: dict[tuple[str, str], str] = {}  # "TOPIC [TYPE]" escaped (names from the file)
        for m in it:
            if args.limit is not None and count >= args.limit:
                break
            count += 1
            since_release += len(m.data)
            if since_release >= _RELEASE_EVERY:
                # keeps the resident memory of a long pass bounded (the reader's current
                # source: a stream's spooled copy is mapped once reading starts)
                since_release = 0
                out.flush()
                reader.release_pages()
            ch: Channel = m.channel
            if args.json:
                obj: dict[str, Any] = {
                    "topic": ch.topic,
                    "log_time": m.log_time,
                    "publish_time": m.publish_time,
                    "sequence": m.sequence,
                }
                ok, msg = dec.to_dict(m)
                if ok:
                    obj["message"] = msg
                else:
                    obj["data"] = base64.b64encode(bytes(m.data)).decode("ascii")
                out.write(json.dumps(obj, default=_jsonable, separators=(",", ":")) + "\n")
            else:
                ok, msg = dec.to_dict(m)
                body = json.dumps(msg, default=_jsonable) if ok else f"[{len(m.data)} bytes] {_preview(m.data)}"
                key = (ch.topic, ch.type_name or ch.message_encoding)
                label = labels.get(key)
                if label is None:
                    label = labels[key] = safe_line(f"{key[0]} [{key[1]}]")
                out.write(f"{format_ns(m.log_time)} {label} {body}\n")
        if count == 0 and topics is not None:  # nothing printed: say why if --topics is it
            from polybag.ops.inputs import require_topics

            require_topics(topics, reader.summary.channels.values())
        log.info("%d messages printed", count)
    return 1 if dec.problems else 0
