"""An operation's inputs: opening them, naming them, reading them tolerantly, and keeping
every output apart from them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import polybag
from polybag.errors import EmptySelectionError, FormatError, OutputExistsError, PolybagError
from polybag.model import Channel
from polybag.ops.options import Input, PathLike, is_path
from polybag.reader import Reader, TopicSelector, topic_filter

T = TypeVar("T")


@contextmanager
def open_input(target: Input, **options: Any) -> Iterator[Reader]:
    """Open a path (closing it afterwards) or pass an already open reader through.

    A writing command (convert, filter, sort, merge, split, export) opens its input with
    ``tolerant=True`` (:func:`polybag.open`): a log of a format with tolerant options is read
    so (:attr:`~polybag.formats.registry.FormatSpec.tolerant_options`: a ULog, where a log
    cut by power loss is the normal case, is read recovering), so every intact message is
    written and the damage reported after the copy (as pyulog reads such logs); other
    formats are read plainly and keep what reads before the damage
    (:class:`~polybag.ops.copying.CopyJob`).  Its ``strict`` reads plainly
    (``tolerant=False``), so a damaged input is refused."""
    if isinstance(target, Reader):
        yield target
        return
    reader = polybag.open(target, **options)
    try:
        yield reader
    finally:
        reader.close()


def require_topics(topics: TopicSelector, channels: Iterable[Channel]) -> set[int] | None:
    """The ids of the ``channels`` that ``topics`` selects (:func:`polybag.reader.topic_filter`;
    None: no selection, every channel).  A selection that matches no topic is an
    :class:`~polybag.errors.EmptySelectionError` listing the topics there are: an operation
    says so instead of printing or writing nothing (reading just gives no message)."""
    chans = list(channels)
    ids = topic_filter(topics, chans)
    if ids is not None and not ids:
        raise EmptySelectionError(topics, (c.topic for c in chans))
    return ids


def input_name(target: Input) -> str:
    """How an input is named in results and messages (``<stream>`` when it has no name)."""
    if isinstance(target, Reader):
        return str(target.path or "<stream>")
    if not is_path(target):
        return str(getattr(target, "name", None) or "<stream>")
    return os.fspath(target)


def same_file(a: Input, b: PathLike) -> bool:
    """Whether input ``a`` (a path, a reader, an open file such as stdin) is the file ``b``
    (also through a symlink or a hard link)."""
    if isinstance(a, Reader):
        if a.path is None:
            return False
        a = a.path
    if not is_path(b):
        return False
    if not is_path(a):
        try:  # an open file (stdin redirected from the output file)
            st = os.fstat(a.fileno())
            st2 = os.stat(os.fspath(b))
        except (AttributeError, OSError, ValueError):
            return False
        return (st.st_dev, st.st_ino) == (st2.st_dev, st2.st_ino)
    try:
        return os.path.samefile(os.fspath(a), os.fspath(b))
    except OSError:
        return False


def check_distinct(src: Input, dst: PathLike) -> None:
    """OutputExistsError if writing ``dst`` would touch the input ``src`` (the output itself, or
    the ``dst.active`` it is written as, is the input): never allowed, even with overwrite."""
    if not is_path(dst):
        return
    p = os.fspath(dst)
    for q in (p, p + ".active"):
        if same_file(src, q):
            raise OutputExistsError(
                f"{p}: output is the input {input_name(src)}"
                + ("" if q == p else f" (the output is written as {q})")
                + "; the input is never modified"
            )


def _input_paths(src: Input) -> list[str]:
    """The local paths an input is read from: its path (a file or a bag directory), and for
    a bag opened by its ``metadata.yaml`` the directory too; none for a stream or a URL."""
    if isinstance(src, Reader):
        if src.path is None:
            return []
        src = src.path
    if not is_path(src):
        return []
    p = os.fspath(src)
    if "://" in p:
        from polybag.io.urls import is_url

        if is_url(p):
            return []
    out = [p]
    if os.path.basename(p) == "metadata.yaml" and not os.path.isdir(p):
        out.append(os.path.dirname(os.path.abspath(p)))
    return out


def _inside(a: str, b: str) -> bool:
    """Whether the real path ``a`` is ``b`` or lies inside it."""
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def check_apart(src: Input, dst: PathLike) -> None:
    """OutputExistsError if the output ``dst`` is, contains or lies inside the input ``src``
    (real paths: through symbolic links), or is the same file as any file directly inside an
    input directory (a hard link): never allowed, even with overwrite."""
    if not is_path(dst):
        return
    p = os.fspath(dst)
    out = os.path.realpath(p)
    for q in _input_paths(src):
        real = os.path.realpath(q)
        if _inside(out, real):
            what = "is the input" if out == real else "lies inside the input"
            raise OutputExistsError(f"{p}: output {what} {q}; the input is never modified")
        if _inside(real, out):
            raise OutputExistsError(
                f"{p}: output contains the input {q}; the input is never modified or removed"
            )
        if os.path.isdir(real) and os.path.lexists(p):
            try:
                entries = list(os.scandir(real))
            except OSError:
                entries = []
            for e in entries:
                if same_file(e.path, p):
                    raise OutputExistsError(
                        f"{p}: output is the input's file {e.path}; the input is never modified"
                    )


def summary_count(reader: Reader) -> int:
    """The messages the reader's summary counts (0 when it cannot tell)."""
    try:
        return int(reader.summary.message_count)
    except PolybagError:
        return 0


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
    for c in (c for u in reader.ulogs for c in u.corruptions):
        where = c.get("offset") if isinstance(c, dict) else None
        text = c.get("error", c) if isinstance(c, dict) else c
        out.append(f"offset {where}: {text}" if where is not None else str(text))
    return out


def damage_verdict(where: str, problems: list[str]) -> str:
    """The one-line verdict on a damaged file (``polybag info``'s error line, the ``error``
    column of :func:`polybag.dask.file_summaries`): the first problem, how many more."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    first = problems[0]
    if not first.startswith(where):
        first = f"{where}: {first}"
    return (
        f"the file is damaged: {first}{more}; "
        "`polybag check` lists every problem, `polybag recover` keeps the intact messages"
    )


def until_damage(messages: Iterable[T], damaged: Callable[[FormatError, int], None]) -> Iterator[T]:
    """``messages`` until the reader raises a :class:`FormatError` (a log cut short, a damaged
    chunk): ``damaged(error, messages_before)`` is called and the stream ends there, so what
    was read before the damage is kept."""
    it = iter(messages)
    n = 0
    while True:
        try:
            m = next(it)
        except StopIteration:
            return
        except FormatError as e:
            damaged(e, n)
            return
        n += 1
        yield m
