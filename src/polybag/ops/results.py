"""What an operation gives back and says: its result (counts, warnings), the warnings about
what an output could not hold, and its progress bar."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polybag.util.progress import Progress
    from polybag.writer import Writer


@dataclass
class OpResult:
    """What an operation did: counts and warnings (``to_dict()`` for ``--json``)."""

    messages: int = 0
    warnings: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def report_undefined(writer: Writer, result: OpResult, seen: set[str] | None = None) -> None:
    """A warning per ROS 2 type the closed ``writer`` wrote without a definition
    (:meth:`Writer.undefined_types`: other tools cannot decode it); ``seen``: the
    types already named (the parts of a split), updated."""
    for type_name, topic in sorted(writer.undefined_types().items()):
        if seen is not None:
            if type_name in seen:
                continue
            seen.add(type_name)
        result.warn(
            f"{type_name} on {topic} is written without a definition (polybag has none: add it "
            "with --types DIR); other tools cannot decode it"
        )


def report_dropped(result: OpResult, dropped: Mapping[str, int], fmt: str) -> None:
    """One warning that names every topic whose messages were not written (and how many),
    so the reason lines above it need no ``--json`` to be matched with their topics."""
    total = sum(dropped.values())
    if not total:
        return
    items = sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))
    most = 20
    names = ", ".join(f"{t} ({n})" for t, n in items[:most])
    if len(items) > most:
        names += f", and {len(items) - most} more topics (--json lists them all under dropped_topics)"
    result.warn(
        f"{total} message(s) on {len(items)} topic(s) not written ({fmt} files cannot hold them; "
        f"the warnings above say why): {names}"
    )


def make_progress(total: int, label: str, enabled: bool | None) -> Progress:
    """A :class:`polybag.util.progress.Progress` (``enabled=None``: only on a terminal)."""
    from polybag.util.progress import Progress

    if enabled is None:
        enabled = sys.stderr.isatty()
    return Progress(total, label, enabled=enabled and total > 0)
