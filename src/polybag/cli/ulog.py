"""``polybag ulog messages|params|info FILE``: PX4 ULog facts, like pyulog's tools.

* ``messages``: logged strings as ``H:MM:SS LEVEL: text`` (``ulog_messages``); on PX4 logs
  the events decoded with the definitions stored in the log are merged in, and the plain
  strings PX4 duplicates for them (ending in a tab) are dropped.
* ``params``: ``name,value[,later values...]`` lines sorted by name (``ulog_params``);
  ``--initial`` leaves out later changes; ``--defaults`` prints the default values
  (``--default-type system|current_setup``).
* ``info``: what ``ulog_info -v`` prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from polybag.cli import render
from polybag.cli.render import hms
from polybag.cli.text import print_json
from polybag.util.text import safe_line, safe_text


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("ulog", help="PX4 ULog tools: logged messages, parameters, info")
    sub = p.add_subparsers(dest="ulog_command", metavar="SUBCOMMAND")
    sub.required = True

    m = sub.add_parser("messages", help="logged strings (and PX4 events) as 'H:MM:SS LEVEL: text'")
    m.add_argument("file")
    m.add_argument("--no-events", action="store_true", help="do not decode PX4 events")
    m.add_argument("--json", action="store_true", help="machine-readable output")
    m.set_defaults(func=cmd_messages)

    q = sub.add_parser("params", help="parameters as 'name,value' lines")
    q.add_argument("file")
    q.add_argument("--defaults", action="store_true", help="print default parameter values")
    q.add_argument(
        "--default-type",
        choices=("system", "current_setup"),
        default="system",
        help="which defaults with --defaults (default: system)",
    )
    q.add_argument(
        "-i", "--initial", action="store_true", help="only the initial values (not the later changes)"
    )
    q.add_argument("-l", "--delimiter", default=",", help="field delimiter (default ',')")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_params)

    i = sub.add_parser("info", help="what ulog_info -v prints")
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--brief", action="store_true", help="hide perf counters and multi-info values")
    i.add_argument(
        "-m", "--message", metavar="KEY", help="print one multi-info entry (e.g. boot_console_output)"
    )
    i.add_argument("-n", "--newline", action="store_true", help="with -m: one line per part")
    i.set_defaults(func=cmd_info)


def _open(path: str, topics: list[str] | None = None) -> Any:
    import polybag
    from polybag.errors import UnsupportedError

    r = polybag.open(path, format="ulog", recover=True, warn=False, topics=topics)
    if not r.ulogs:
        raise UnsupportedError(f"{path}: not a ULog file")
    return r


def logged_lines(reader: Any, events: bool = True) -> list[tuple[int, str, str]]:
    """(timestamp us, level name, text) of the logged strings, with PX4 events merged in."""
    from polybag.formats import registry

    u = reader.ulog
    plain = [(m.timestamp, m.level_name, m.text) for m in u.logged_messages if m.tag is None]
    if not events or u.info.get("sys_name", "") != "PX4":
        return plain
    logged_events = registry.get(reader.format).load_events()
    decoded = logged_events(reader) if logged_events is not None else None
    if decoded is None:  # no definitions in the log: keep PX4's plain copies of the events
        return [(t, lv, txt.rstrip("\t")) for t, lv, txt in plain]
    out = list(decoded)
    out.extend(x for x in plain if not x[2].endswith("\t"))
    out.sort(key=lambda x: x[0])
    return out


def cmd_messages(args: argparse.Namespace) -> int:
    with _open(args.file, topics=["event", "log_message"]) as r:
        lines = logged_lines(r, not args.no_events)
        if args.json:
            print_json([{"timestamp_us": t, "level": lv, "text": txt} for t, lv, txt in lines])
        else:
            out = sys.stdout
            for t, lv, txt in lines:
                out.write(safe_line(f"{hms(t)} {lv}: {txt}") + "\n")  # (text from the file)
    return 0


def cmd_params(args: argparse.Namespace) -> int:
    # parameter changes are dated by the data around them: read the data unless not needed
    with _open(args.file, topics=[] if args.initial or args.defaults else None) as r:
        u = r.ulog
        if args.defaults:
            params = u.get_default_parameters(0 if args.default_type == "system" else 1)
        else:
            params = u.params
        changes: dict[str, list[tuple[int, Any]]] = {}
        if not args.initial and not args.defaults:
            for t, name, value in u.changed_params:
                changes.setdefault(name, []).append((t, value))
        if args.json:
            print_json(
                {
                    k: ({"value": params[k], "changes": changes[k]} if k in changes else params[k])
                    for k in sorted(params)
                }
            )
            return 0
        d = args.delimiter
        out = sys.stdout
        for k in sorted(params):
            vals = [str(params[k])] + [str(v) for _, v in changes.get(k, [])]
            out.write(safe_text(k + d + d.join(vals)) + "\n")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    if args.message:
        with _open(args.file, topics=[]) as r:
            sets = r.ulog.info_multiple.get(args.message)
            if sets is None:
                print(safe_line(f"polybag ulog: error: {args.file}: message {args.message} not found"), file=sys.stderr)
                return 1
            sep = "\n" if args.newline else ""
            for i, parts in enumerate(sets):
                if parts and isinstance(parts[0], (bytes, bytearray)):
                    print(f"# {args.message} {i} (len: {sum(len(p) for p in parts)}):")
                    print(sep.join(" ".join(f"{x:02x}" for x in p) for p in parts))
                else:
                    print(safe_line(f"# {args.message} {i}:"))
                    print(safe_text(sep.join(str(p) for p in parts)))
        return 0
    with _open(args.file) as r:
        if args.json:
            print_json(r.info_extras())
        else:
            sys.stdout.write(f"{safe_text(render.info_text(r, verbose=not args.brief) or '')}\n")
        return 1 if r.ulog.corruptions else 0
