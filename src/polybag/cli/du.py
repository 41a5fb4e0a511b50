"""``polybag du IN``: bytes per topic and per schema."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from polybag.cli._ops import add_json, emit
from polybag.cli.text import format_size

if TYPE_CHECKING:
    from polybag.ops.du import Usage


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("du", help="payload bytes per topic and per schema")
    p.add_argument("input", metavar="IN")
    add_json(p)
    p.set_defaults(func=run)


def _table(title: str, rows: list[Usage]) -> list[str]:
    width = max([len(title)] + [len(u.name) for u in rows])
    out = [f"{title:<{width}}  {'messages':>10}  {'bytes':>12}  {'share':>6}"]
    for u in rows:
        out.append(f"{u.name:<{width}}  {u.messages:>10}  {format_size(u.bytes):>12}  {u.share * 100:5.1f}%")
    return out


def run(args: argparse.Namespace) -> int:
    from polybag.ops import du

    r = du(args.input, progress=None)
    lines = [
        f"{r.input} ({r.format}): {format_size(r.file_size)} on disk, "
        f"{format_size(r.payload_bytes)} of payload in {r.messages} messages",
        "",
    ]
    lines += _table("topic", r.topics) + [""] + _table("schema", r.schemas)
    emit("du", args, r, lines, data=True)
    return 0
