"""``polybag check FILE...``: structural check; exit status 1 when anything is wrong.

Bags: every record and chunk is parsed, chunks are decompressed, the index data and chunk
infos are compared with the records they describe, and md5sums with the definitions.  MCAP
and ULog files are read completely and every error is reported.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from polybag.cli.text import plain, print_json
from polybag.formats import registry
from polybag.util.text import safe_line


def _run(args: argparse.Namespace) -> int:
    from polybag.cli.compress import sniff_format
    from polybag.errors import PolybagError
    from polybag.ops.check import check_any

    worst = 0
    results = []
    for path in args.files:
        res: dict[str, Any] | None = None
        spec: registry.FormatSpec | None
        try:
            spec = registry.get(sniff_format(path))
        except PolybagError as e:
            spec = _headless(path)  # a file of a format whose files may lack magic bytes (a bag)
            if spec is None:
                res = {"problems": [str(e)], "notes": [], "messages": 0}
        if res is None:
            check = spec.load_check() if spec is not None else None
            res = check(path) if check is not None else check_any(path)  # the format's own, or the reader's
        res["path"] = path
        results.append(res)
        if res["problems"]:
            worst = 1
    for res in results:
        res["problems"] = [_problem(p) for p in res["problems"]]
    if args.json:
        print_json(results)
        return worst
    for res in results:
        status = "OK" if not res["problems"] else f"{len(res['problems'])} problem(s)"
        print(safe_line(f"{res['path']}: {status}, {res['messages']} messages read"))
        for p in res["problems"]:
            print(f"  problem: {safe_line(str(p['message']))}")
        if args.verbose:
            for n in res["notes"]:
                print(f"  note: {safe_line(str(n))}")
    sys.stdout.flush()
    return worst


def _headless(path: str) -> registry.FormatSpec | None:
    """The format whose files may lack magic bytes (ROSLOG version 0 bags) that ``path``'s
    extension names (also as ``NAME.EXT.active``), or None."""
    for spec in registry.formats():
        exts = spec.headless_extensions
        if exts and path.endswith((*exts, *(e + ".active" for e in exts))):
            return spec
    return None


_OFFSET = re.compile(r"\boffset (\d+)")


def _problem(p: Any) -> dict[str, Any]:
    """``{"message", "offset"}``: checks give dicts or strings naming ``offset N``."""
    if isinstance(p, dict):
        return {"message": str(p.get("message", "")), "offset": p.get("offset")}
    text = str(p)
    m = _OFFSET.search(text) or re.search(r"\bat (\d+)\b", text)
    return {"message": text, "offset": int(m.group(1)) if m else None}


def register(sub: Any) -> None:
    p = sub.add_parser("check", help="structural check of bags (and MCAP/ULog); exit 1 on problems", description=plain(__doc__))
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("-v", "--verbose", action="count", default=0, help="also print notes (gaps, skipped checks); on stderr: what was read, timings (-vv: more)")
    p.set_defaults(func=_run)
