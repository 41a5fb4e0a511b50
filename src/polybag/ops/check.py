"""The check of any log polybag reads: read everything, report what fails.

Format-neutral: it opens the file with :func:`polybag.open` and uses the reader's public
members only.  The deeper structural check of a bag (chunks against their index) is
:func:`polybag.formats.bag.check.check_bag`.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import polybag
from polybag.codecs.checks import md5_problems
from polybag.errors import PolybagError

__all__ = ["check_any", "md5_problems"]

_OFFSET_RE = re.compile(r"\boffset (\d+)")


def check_any(path: str) -> dict[str, Any]:
    """Any format polybag reads: iterate everything, report what fails.

    ``{"problems": [...], "notes": [...], "messages": n, "format": name}``; a problem is a
    string or a ``{"message", "offset"}`` dict.
    """
    problems: list[str | dict[str, Any]] = []
    n = 0
    try:
        with polybag.open(path) as r:
            s = r.summary
            # records the spec forbids that the lenient read takes (MCAP: too short, no Data
            # End); asked first, so a chunk it opens is let go before the read holds its own
            spec_problems = r.record_problems()
            try:
                for _m in r.messages(order="file"):
                    n += 1
            except PolybagError as e:
                problems.append(str(e))
            try:
                for _a in r.attachments():
                    pass
                for _md in r.metadata():
                    pass
            except PolybagError as e:
                problems.append(str(e))
            if s.indexed and s.message_count and s.message_count != n:
                problems.append(f"{path}: summary counts {s.message_count} messages, reading found {n}")
            # MCAP: a Schema/Channel id defined twice with different content (read as written,
            # but the spec forbids it and other readers give every message one of the two)
            problems.extend(r.definition_problems)
            problems.extend(spec_problems)
            problems.extend(md5_problems(path, s.channels.values()))
            fmt = s.format
    except PolybagError as e:
        problems.append(str(e))
        fmt = "?"
    notes: list[str] = []
    if problems and fmt != "?":
        _all_damage(path, problems, notes)
    once: dict[str, str | dict[str, Any]] = {}  # each problem once (two checks may meet the same place)
    for p in problems:
        once.setdefault(repr(sorted(p.items())) if isinstance(p, dict) else str(p), p)
    return {"problems": list(once.values()), "notes": notes, "messages": n, "format": fmt}


def _all_damage(path: str, problems: list[str | dict[str, Any]], notes: list[str]) -> None:
    """A strict read stops at the first damage; a second pass in recovery mode lists every
    damaged place (the reader's ``recovery_report``) in place of that first one."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with polybag.open(path, recover=True) as r:
                m = sum(1 for _ in r.messages(order="file"))
                report = r.recovery_report
    except PolybagError:
        return  # nothing more to learn than the strict read's error
    errors = [str(e) for e in (report.get("errors", ()) if report else ())]
    if len(errors) > 1:
        first = str(problems[0])
        where = _OFFSET_RE.search(first)
        # the strict read's error is one of the damaged places: keep its wording, add the rest
        rest = [e for e in errors if where is None or f"offset {where.group(1)}:" not in e]
        from polybag.ops.batch import name_once

        problems[1:1] = [name_once(str(path), e) for e in rest]
    skipped = report.get("bytes_skipped", 0) if report else 0
    notes.append(f"recovery mode reads {m} messages past the damage ({skipped} bytes skipped)")
