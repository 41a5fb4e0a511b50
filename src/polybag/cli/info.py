"""``polybag info FILE [--json]``: what a log holds, from its index when it has one.

Generic over every reader: format, profile/library, duration, start/end, message counts
and frequency per channel, schemas, chunks and their compression, attachments, metadata,
and the format's own extras (``reader.info_extras()``).  On an MCAP file with a summary
section this reads only the summary, never the data section.

A damaged file (the summary lists errors: a cut or corrupt chunk, a summary that does not
parse, ULog corruption) is still described, with ``error:`` lines, and the exit status is 1
with one ``polybag info: error: ...`` line on stderr; an unreadable one exits 3.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

from polybag.cli._common import _json_default, format_duration, format_ns, format_size, print_json
from polybag.cli.render import info_text as format_text
from polybag.cli.render import info_yaml as format_yaml
from polybag.formats import registry
from polybag.reader import Reader


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("info", help="summarize a log (format, topics, counts, times, chunks)")
    p.add_argument("file", help="log file (bag, mcap, ulog), a URL (s3://, gs://, http(s)://), or - for stdin")
    add_format_option(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON instead of a table")
    fmt.add_argument(
        "--yaml", action="store_true", help="print YAML (for bags the `rosbag info --yaml` layout)"
    )
    p.add_argument(
        "--stats",
        action="store_true",
        help="a URL: print the bytes fetched and the requests made to stderr (--json has them as 'fetched')",
    )
    p.set_defaults(func=run)


FORMAT_CHOICES = tuple(registry.names())


def add_format_option(p: Any) -> None:
    """``--format``: the input's format when its magic bytes do not tell (a version-0 bag
    has no header line, so ``polybag cat - < old.bag`` needs ``--format bag``)."""
    p.add_argument(
        "--format",
        dest="input_format",
        choices=FORMAT_CHOICES,
        default=None,
        help="input format, instead of guessing it from the first bytes",
    )


def open_input(name: str, format: str | None = None) -> Reader:  # noqa: A002
    import polybag

    if name == "-":
        return polybag.open(sys.stdin.buffer, format=format)
    return polybag.open(name, format=format)


def info_dict(reader: Reader) -> dict[str, Any]:
    s = reader.summary
    dur = s.duration
    secs = dur / 1e9
    unknown = s.extras.get("message_counts") == "unknown"  # the file's counts cannot be trusted
    channels = []
    for cid, ch in sorted(s.channels.items()):
        n: int | None = None if unknown else s.message_counts.get(cid, 0)
        channels.append(
            {
                "id": cid,
                "topic": ch.topic,
                "type": ch.type_name,
                "message_encoding": ch.message_encoding,
                "schema_id": ch.schema.id if ch.schema is not None else 0,
                "message_count": n,
                "frequency_hz": (n / secs) if secs > 0 and n is not None and n > 1 else None,
            }
        )
    comp: dict[str, int] = {}
    for c in s.chunks:
        comp[c.compression] = comp.get(c.compression, 0) + 1
    return {
        "path": reader.path,
        "format": s.format,
        "version": s.version,
        "profile": s.profile,
        "library": s.library,
        "file_size": s.file_size,
        "indexed": s.indexed,
        "message_count": None if unknown else s.message_count,
        "start_time": s.start_time,
        "end_time": s.end_time,
        "duration_ns": dur,
        "channels": channels,
        "schemas": [
            {"id": sid, "name": sc.name, "encoding": sc.encoding, "size": len(sc.data)}
            for sid, sc in sorted(s.schemas.items())
        ],
        "chunks": {
            "count": s.chunk_count,
            "compression": comp,
            "compressed_size": sum(c.compressed_size for c in s.chunks),
            "uncompressed_size": sum(c.uncompressed_size for c in s.chunks),
        },
        "attachment_count": s.attachment_count,
        "metadata_count": s.metadata_count,
        "extras": reader.info_extras(),
    } | fetched(reader)


def fetched(reader: Reader) -> dict[str, Any]:
    """``{"fetched": {requests, bytes_fetched, size, url}}`` of a remote log; {} for a local one."""
    stats = reader.fetch_stats
    return {} if stats is None else {"fetched": stats}


def print_stats(reader: Reader, prog: str = "polybag") -> None:
    """What reading a remote log cost, on stderr (nothing for a local one)."""
    stats = reader.fetch_stats
    if stats is not None:
        print(
            f"{prog}: fetched {stats['bytes_fetched']} of {stats['size']} bytes in {stats['requests']} requests",
            file=sys.stderr,
        )


def _table(rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i < len(r) - 1 else c for i, (c, w) in enumerate(zip(r, widths))) for r in rows]


def render(d: dict[str, Any]) -> str:
    lines = []

    def kv(k: str, v: object) -> None:
        lines.append(f"{k + ':':<13} {v}")

    kv("path", d["path"])
    fmt = d["format"] + (f" (version {d['version']})" if d["version"] else "")
    kv("format", fmt)
    if d["profile"]:
        kv("profile", d["profile"])
    if d["library"]:
        kv("library", d["library"])
    kv("size", format_size(d["file_size"]))
    if not d["indexed"]:
        kv("index", "none (summary from a scan of the data)")
    kv("messages", "unknown" if d["message_count"] is None else d["message_count"])
    kv("duration", format_duration(d["duration_ns"]))
    kv("start", format_ns(d["start_time"]))
    kv("end", format_ns(d["end_time"]))
    ch = d["chunks"]
    if ch["count"]:
        comp = ", ".join(f"{k or 'none'}: {v}" for k, v in sorted(ch["compression"].items()))
        ratio = ""
        if ch["uncompressed_size"]:
            ratio = f", {format_size(ch['compressed_size'])} / {format_size(ch['uncompressed_size'])}"
        kv("chunks", f"{ch['count']} ({comp}{ratio})")
    if d["channels"]:
        lines.append("channels:")
        rows = []
        for c in d["channels"]:
            hz = f"{c['frequency_hz']:.2f} Hz" if c["frequency_hz"] else "-"
            rows.append(
                [f"  ({c['id']})", c["topic"], f"{'?' if c['message_count'] is None else c['message_count']} msgs", hz, f": {c['type'] or '-'}", f"[{c['message_encoding']}]"]
            )
        lines.extend(_table(rows))
    if d["schemas"]:
        lines.append("schemas:")
        lines.extend(
            _table([[f"  ({s['id']})", s["name"], f"[{s['encoding'] or '-'}]", format_size(s["size"])] for s in d["schemas"]])
        )
    kv("attachments", d["attachment_count"])
    kv("metadata", d["metadata_count"])
    extras = {k: v for k, v in d["extras"].items() if k not in ("chunk_compression", "indexed")}
    for k, v in extras.items():
        if isinstance(v, dict):
            lines.append(f"{k}:")
            for k2, v2 in v.items():
                lines.append(f"  {k2}: {v2}")
        elif isinstance(v, list):
            lines.append(f"{k}:")
            for item in v:
                lines.append(f"  {item}")
        else:
            kv(k, v)
    return "\n".join(lines)


_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*\Z")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        r = repr(v)
        if "e" in r and "." not in r:  # YAML 1.1 floats need a dot: 1e-05 -> 1.0e-05
            r = r.replace("e", ".0e", 1)
        return r
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return _yaml_quoted(s)


def _yaml_quoted(s: str) -> str:
    """A YAML double-quoted scalar: printable ASCII kept, everything else escaped."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def _yaml_lines(v: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(v, dict):
        for k, x in v.items():
            key = _yaml_scalar(str(k))
            if isinstance(x, (dict, list)) and x:
                out.append(f"{pad}{key}:")
                out.extend(_yaml_lines(x, indent + 2))
            else:
                out.append(f"{pad}{key}: {_yaml_inline(x)}")
    else:
        for x in v:
            if isinstance(x, (dict, list)) and x:
                inner = _yaml_lines(x, indent + 2)
                out.append(f"{pad}- {inner[0][indent + 2 :]}")
                out.extend(inner[1:])
            else:
                out.append(f"{pad}- {_yaml_inline(x)}")
    return out


def _yaml_inline(x: Any) -> str:
    if isinstance(x, dict):
        return "{}"
    if isinstance(x, list):
        return "[]"
    return _yaml_scalar(x)


def to_yaml(d: dict[str, Any]) -> str:
    """A block-style YAML document of a JSON-like dict (what ``--json`` prints, as YAML)."""
    plain = json.loads(json.dumps(d, default=_json_default))
    return "\n".join(_yaml_lines(plain, 0)) + "\n" if plain else "{}\n"


def damage(reader: Reader) -> list[str]:
    """The errors a reader noted while summarizing a damaged file (empty when it is sound):
    the ``error``/``summary_error``/``errors`` of the summary's extras, and ULog corruption."""
    out: list[str] = []
    extras = reader.summary.extras or {}
    for key in ("error", "summary_error"):
        if extras.get(key):
            out.append(str(extras[key]))
    errors = extras.get("errors")
    if isinstance(errors, (list, tuple)):
        out.extend(str(e) for e in errors)
    elif errors:
        out.append(str(errors))
    for c in reader.ulog.corruptions if reader.ulog is not None else ():
        where = c.get("offset") if isinstance(c, dict) else None
        text = c.get("error", c) if isinstance(c, dict) else c
        out.append(f"offset {where}: {text}" if where is not None else str(text))
    return out


def _describe(reader: Reader, args: argparse.Namespace) -> None:
    # the layout of the reader's info_style (rosbag info's, ulog_info's) or, when it has none, ours
    if getattr(args, "yaml", False):
        text = format_yaml(reader)
        sys.stdout.write(text if text is not None else to_yaml(info_dict(reader)))
        return
    if args.json:
        print_json(info_dict(reader))
        return
    text = format_text(reader)
    print(text if text is not None else render(info_dict(reader)))


def run(args: argparse.Namespace) -> int:
    with open_input(args.file, getattr(args, "input_format", None)) as reader:
        _describe(reader, args)
        if getattr(args, "stats", False):
            print_stats(reader, "polybag info")
        problems = damage(reader)
        if problems:
            sys.stdout.flush()
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            first = problems[0]
            name = str(reader.path or args.file)
            if not first.startswith(name):
                first = f"{name}: {first}"
            print(
                f"polybag info: error: the file is damaged: {first}{more}; "
                "`polybag check` lists every problem, `polybag recover` keeps the intact messages",
                file=sys.stderr,
            )
            return 1
    return 0
