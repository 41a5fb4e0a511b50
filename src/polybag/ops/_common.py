"""What every operation shares: opening inputs, making writers, mapping channels, results.

Operations are compositions of the public pieces only: :func:`polybag.open`, a
:class:`polybag.Writer`, the codecs.  Nothing here imports a format's internals.
"""

from __future__ import annotations

import inspect
import os
import stat as _stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, TypedDict

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        pass
    else:
        pass

import polybag
from polybag.bridges.channels import ChannelMap, Transform
from polybag.errors import (
    EmptySelectionError,
    FormatError,
    OutputExistsError,
    PolybagError,
    UnsupportedError,
    UsageError,
    WriteError,
)
from polybag.formats import registry
from polybag.model import Attachment, Channel, Message, Metadata
from polybag.reader import Reader, TopicSelector, topic_filter
from polybag.writer import (
    MEDIA_MAGICS,
    Writer,
    create_new,
    file_refusal,
    format_for_path,
    named_os_error,
    place_file,
    refuse_existing,
    refuse_replacing,
)

PathLike = str | os.PathLike[str]
Input = PathLike | Reader | BinaryIO
Output = PathLike | BinaryIO

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


class WriteOptions(TypedDict, total=False):
    """The keywords every operation that writes logs takes (``**options: Unpack[WriteOptions]``).

    ``format``: the output format (default: from the extension); ``compression``,
    ``chunk_size``: the writer's chunking (the format's defaults); ``progress``: a progress
    bar (None: only on a terminal); ``overwrite``: replace an existing output (refused
    otherwise; an input never is); ``storage``: a rosbag2 output's storage (``sqlite3`` or
    ``mcap``); ``strict``: refuse a damaged input (no output) instead of writing every
    message read before the damage and reporting it (:func:`tolerant_options`)."""

    format: str | None
    compression: str | None
    chunk_size: int | None
    progress: bool | None
    overwrite: bool
    storage: str | None
    strict: bool


@dataclass(frozen=True)
class Writing:
    """:class:`WriteOptions` with their defaults filled in, as attributes."""

    format: str | None = None
    compression: str | None = None
    chunk_size: int | None = None
    progress: bool | None = False
    overwrite: bool = False
    storage: str | None = None
    strict: bool = False

    @classmethod
    def of(cls, operation: str, options: Mapping[str, Any]) -> Writing:
        """The options an operation was called with (a TypeError names any unknown keyword,
        as for any function)."""
        for k in options:
            if k not in WriteOptions.__annotations__:
                raise TypeError(f"{operation}() got an unexpected keyword argument {k!r}")
        return cls(**options)



def apply_transform(tf: Any, data: bytes | memoryview, log_time: int) -> bytes | memoryview | None:
    """``tf(data)``, or ``tf(data, log_time)`` for transforms that need the time."""
    if getattr(tf, "timed", False):
        return tf(data, log_time)
    return tf(data)


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


# --- inputs --------------------------------------------------------------------------------
class opened:  # noqa: N801 - used like a function in `with`
    """Open a path (closing it afterwards) or pass an already open reader through."""

    def __init__(self, target: Input, **options: Any) -> None:
        self._own = not isinstance(target, Reader)
        self.reader: Reader = polybag.open(target, **options) if self._own else target  # type: ignore[arg-type]

    def __enter__(self) -> Reader:
        return self.reader

    def __exit__(self, *exc: object) -> None:
        if self._own:
            self.reader.close()


def _is_path(target: Any) -> bool:
    return isinstance(target, (str, os.PathLike))


def tolerant_options(target: Input, strict: bool = False) -> dict[str, Any]:
    """The reader options of an input that a writing command (convert, filter, sort, merge,
    split, export) reads: a ULog file is read recovering (a log cut by power loss is the normal
    case for ULog, and its recovering read costs no more), so every intact message is
    written and the damage reported after the copy (as pyulog reads such logs); other
    formats are read plainly and keep what reads before the damage (:class:`CopyJob`).
    ``strict``: read plainly, so a damaged input is refused."""
    if strict or not _is_path(target) or isinstance(target, Reader):
        return {}
    p = os.fspath(target)  # type: ignore[arg-type]
    try:
        if "://" in p or not os.path.isfile(p) or not _stat.S_ISREG(os.stat(p).st_mode):
            return {}  # (a FIFO is never read here: its bytes are the reader's)
        with open(p, "rb") as f:
            head = f.read(registry.SNIFF_BYTES)
    except (OSError, ValueError):
        return {}
    return {"recover": True} if registry.sniff(head) == "ulog" else {}


def _url_output(target: Any) -> bool:
    """Whether an output names a URL to upload to (not a path, a ``file://`` URL or a stream)."""
    if not isinstance(target, str) or "://" not in target:
        return False
    from polybag.io.upload import output_url

    return output_url(target) is not None


def _local_output(target: Any) -> Any:
    """An output with a ``file://`` URL turned into its local path."""
    if isinstance(target, str) and "://" in target:
        from polybag.io.upload import local_output

        return local_output(target)
    return target


def input_name(target: Input) -> str:
    if isinstance(target, Reader):
        return str(target.path or "<stream>")
    if not _is_path(target):
        return str(getattr(target, "name", None) or "<stream>")
    return os.fspath(target)


def same_file(a: Input, b: PathLike) -> bool:
    """Whether input ``a`` (a path, a reader, an open file such as stdin) is the file ``b``
    (also through a symlink or a hard link)."""
    if isinstance(a, Reader):
        if a.path is None:
            return False
        a = a.path
    if not _is_path(b):
        return False
    if not _is_path(a):
        try:  # an open file (stdin redirected from the output file)
            st = os.fstat(a.fileno())  # type: ignore[union-attr]
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
    if not _is_path(dst):
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
    if not _is_path(src):
        return []
    p = os.fspath(src)
    if "://" in p:
        from polybag.io.remote import is_url

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
    if not _is_path(dst):
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


def replace_refusal(dst: str, fmt: str | None = None) -> str | None:
    """Why ``--force`` may not replace what is at ``dst`` (None: nothing there, or it may):
    for a format's output its writer says (a file writer: a log file by its magic bytes; a
    rosbag2 output: exactly a bag directory); without a format, a log file or exactly a bag of
    a directory format; never a symbolic link, a device or another directory."""
    if not os.path.lexists(dst):
        return None
    specs = []
    if fmt:
        try:
            specs = [registry.writer_spec(fmt)]
        except PolybagError:
            specs = []
    if not specs:
        if os.path.isdir(dst) and not os.path.islink(dst):
            specs = [s for s in registry.formats() if s.writer is not None and s.open_path is not None]
        elif os.path.splitext(dst)[1].lower() in MEDIA_MAGICS:  # an image, a video, a table
            return file_refusal(dst)
        else:
            return file_refusal(dst, "log")
    reason: str | None = "is not an output polybag writes"
    for spec in specs:
        try:
            reason = spec.load_writer().replace_refusal(dst)
        except (ImportError, AttributeError, UnsupportedError):
            continue
        if reason is None:
            return None
    return reason


def check_output(
    dst: Output, inputs: Sequence[Input], overwrite: bool, fmt: str | None = None, *, any_file: bool = False
) -> None:
    """Before any work starts: the output is none of the inputs, contains none and lies
    inside none (never allowed), does not exist unless ``overwrite`` -- and then is something
    polybag could have written (:func:`replace_refusal`; ``any_file``: an output of any
    content, such as an attachment, replaces any regular file) -- and has no ``NAME.active``
    (a recording in progress, or an interrupted write, is never overwritten)."""
    if not _is_path(dst):
        return
    if _url_output(dst):  # an object store URL: written locally, then uploaded
        from polybag.io.upload import check_url_output

        check_url_output(os.fspath(dst), [input_name(s) for s in inputs], overwrite)
        return
    dst = _local_output(dst)
    for src in inputs:
        check_distinct(src, dst)  # type: ignore[arg-type]
        check_apart(src, dst)  # type: ignore[arg-type]
    p = os.fspath(dst)
    if not overwrite:
        refuse_existing(p)
    elif any_file:
        refuse_replacing(p, file_refusal(p))
    else:
        if fmt is None:
            try:
                fmt = target_format(p, None)
            except PolybagError:
                fmt = None
        refuse_replacing(p, replace_refusal(p, fmt))
    if os.path.lexists(p + ".active"):
        raise OutputExistsError(
            f"{p}.active exists (a recording in progress, or an interrupted write?); not overwritten: "
            "move it away, or rebuild it with `polybag reindex`/`polybag recover`"
        )


def make_folder(path: PathLike) -> None:
    """``os.makedirs(path, exist_ok=True)`` for an output folder; something in the way (a
    file where a folder should be) is a :class:`UsageError`, a failure to make it a
    :class:`WriteError`, each naming the path."""
    p = os.fspath(path)
    try:
        os.makedirs(p, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"{p}: not a directory (a file is in the way); nothing written") from None
    except OSError as e:
        raise WriteError(f"{p}: cannot make the output folder: {e.strerror or e}") from None


# --- writers -------------------------------------------------------------------------------
def target_format(path: PathLike, format: str | None) -> str:  # noqa: A002
    """The writable format for an output: ``format`` (a name or alias) or the path's extension."""
    if format:
        return registry.writer_spec(format).name
    if not _is_path(path):
        raise UnsupportedError(
            f"writing to a stream needs an explicit format (--format {'|'.join(registry.writable())})"
        )
    try:
        return format_for_path(path)
    except UnsupportedError:
        # no extension: a directory format's output (a rosbag2 bag), when exactly one is writable
        dirs = [s.name for s in registry.formats() if s.writer is not None and s.open_path is not None]
        if os.path.splitext(os.fspath(path))[1] or len(dirs) != 1:
            raise
        return dirs[0]


def writer_accepts(fmt: str, name: str) -> bool:
    """Whether the writer class of ``fmt`` takes keyword ``name`` (or ``**kwargs``)."""
    try:
        cls = registry.get(fmt).load_writer()
        sig = inspect.signature(cls.__init__)
    except (ImportError, AttributeError, ValueError, TypeError):
        return False
    for p in sig.parameters.values():
        if p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD:
            return True
    return False


def _names_profile(fmt: str) -> bool:
    """Whether the writer class of ``fmt`` names a ``profile`` keyword (not just ``**kwargs``)."""
    try:
        return "profile" in inspect.signature(registry.get(fmt).load_writer().__init__).parameters
    except (ImportError, AttributeError, ValueError, TypeError):
        return False


def make_writer(
    path: PathLike,
    fmt: str,
    compression: str | None = None,
    chunk_size: int | None = None,
    profile: str | None = None,
    overwrite: bool = False,
    **extra: Any,
) -> Writer:
    """A writer for ``path`` (its directory is created); ``overwrite=False``: never replaces an
    existing file (see :class:`polybag.writer.AtomicFile`)."""
    kwargs: dict[str, Any] = {"overwrite": overwrite}
    if compression is not None:
        kwargs["compression"] = "none" if compression in ("", "none") else compression
    if chunk_size is not None:
        kwargs["chunk_size"] = chunk_size
    if profile is not None and _names_profile(fmt):  # the MCAP profile: only for a writer that has one
        kwargs["profile"] = profile
    for k, v in extra.items():
        if v is None:
            continue
        if not writer_accepts(fmt, k):
            raise UsageError(f"{k} {v!r} does not apply to a {fmt} output")
        kwargs[k] = v
    if not _is_path(path) or _url_output(path):  # a stream (stdout), or a URL (uploaded on close)
        return Writer(path if not _is_path(path) else os.fspath(path), format=fmt, **kwargs)
    path = _local_output(path)
    make_folder(os.path.dirname(os.path.abspath(os.fspath(path))) or ".")
    return Writer(os.fspath(path), format=fmt, **kwargs)


def abort_writer(w: Writer, path: Output | None = None) -> None:
    """After a failure or an interrupt: stop the writer and leave no half-written output
    (its ``NAME.active``) behind.  Never raises: the original error is what matters."""
    try:
        w.abort(discard=True)
    except BaseException:  # noqa: BLE001 - already failing
        pass


@contextmanager
def placed(output: PathLike, overwrite: bool) -> Iterator[str]:
    """For a file another library writes (a plot): yields ``NAME.active`` to write, renamed
    to ``NAME`` when the block ends (see :func:`polybag.writer.place_file`), removed if it
    fails.  A failed write names ``NAME``.  A URL: a local file, uploaded when the block ends."""
    if _url_output(output):
        from polybag.io.upload import staged

        with staged(os.fspath(output), overwrite=overwrite) as local:
            yield local
        return
    p = os.fspath(_local_output(output))
    tmp = p + ".active"
    if os.path.lexists(tmp):
        raise OutputExistsError(f"{tmp} exists (an interrupted write?); not overwritten: move it away")
    if overwrite:  # a file of its kind (by extension: .png, .mp4...), never a link or a directory
        refuse_replacing(p, file_refusal(p))
    else:
        refuse_existing(p)
    # created now, exclusively, so no link planted at the name is followed by the library
    os.close(create_new(tmp))
    try:
        yield tmp
        place_file(tmp, p, overwrite)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename is None:
            raise named_os_error(e, p) from e
        raise


def ext_for(fmt: str) -> str:
    """The preferred file extension of a format (``.mcap``)."""
    spec = registry.lookup(fmt)
    return spec.extension if spec is not None else "." + fmt


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


RELEASE_EVERY = 64 << 20  # payload bytes between releases of the input's mapped pages


def _page_releaser(*readers: Reader) -> Callable[[], None] | None:
    """A call that drops the mapped pages of ``readers`` (:meth:`Reader.release_pages`), or
    None when none of them reads a mapped file (a stream)."""
    mapped = [r for r in readers if r.seekable]
    if not mapped:
        return None
    if len(mapped) == 1:
        return mapped[0].release_pages

    def release() -> None:
        for r in mapped:
            r.release_pages()

    return release


def copy_messages(
    messages: Iterable[Message],
    cmap: ChannelMap,
    progress: Any | None = None,
    on_message: Callable[[Message], None] | None = None,
    readers: Sequence[Reader] = (),
) -> tuple[int, int]:
    """Write ``messages`` through ``cmap``; returns (written, dropped).

    With ``readers`` (those the messages come from), the inputs' mapped pages are released
    every 64 MB of payload so resident memory stays bounded on huge files.
    """
    write = cmap.writer.write
    get = cmap.get
    release = _page_releaser(*readers)
    budget = RELEASE_EVERY
    # (channel, target channel, transform) by id(channel); the channel is kept so ids stay unique
    cache: dict[int, tuple[Channel, Channel | None, Transform | None]] = {}
    dropped = 0
    n = 0  # messages written
    last = 0  # n at the last housekeeping (progress, page release), done every 64 messages
    for m in messages:
        ch = m.channel
        ent = cache.get(id(ch))
        if ent is None or ent[0] is not ch:
            out, tf = get(ch)
            ent = cache[id(ch)] = (ch, out, tf)
        out, tf = ent[1], ent[2]
        if out is None:
            dropped += 1
            cmap.dropped[ch.topic] = cmap.dropped.get(ch.topic, 0) + 1
            continue
        data = m.data
        if tf is not None:
            data = tf(data, m.log_time) if getattr(tf, "timed", False) else tf(data)
            if data is None:
                dropped += 1
                cmap.dropped[ch.topic] = cmap.dropped.get(ch.topic, 0) + 1
                continue
        write(out, data, m.log_time, m.publish_time, m.sequence)
        if on_message is not None:
            on_message(m)
        n += 1
        if not n & 63:
            if progress is not None:
                progress.update(n - last)
            if release is not None:
                budget -= len(data) * (n - last)  # an estimate from every 64th message
                if budget < 0:
                    release()
                    budget = RELEASE_EVERY
            last = n
    if progress is not None and n > last:
        progress.update(n - last)
    return n, dropped


def copy_attachments_and_metadata(
    reader: Reader, writer: Writer, fmt: str, result: OpResult
) -> tuple[int, int, int, int]:
    """Copy attachments and metadata; returns (attachments kept, dropped, metadata kept, dropped)."""
    kept_a = drop_a = kept_m = drop_m = 0
    atts: Iterator[Attachment] = reader.attachments()
    for a in atts:
        try:
            writer.write_attachment(a)
            kept_a += 1
        except (UnsupportedError, NotImplementedError):
            drop_a += 1
    metas: Iterator[Metadata] = reader.metadata()
    for md in metas:
        if writer.add_format_extras(md.name, md.metadata):  # a ULog's info/params back home
            kept_m += 1
            continue
        try:
            writer.write_metadata(md)
            kept_m += 1
        except (UnsupportedError, NotImplementedError):
            drop_m += 1
    if drop_a:
        result.warn(f"{fmt} files cannot hold attachments: {drop_a} attachment(s) not copied")
    if drop_m:
        result.warn(f"{fmt} files cannot hold metadata: {drop_m} metadata record(s) not copied")
    return kept_a, drop_a, kept_m, drop_m


def profile_for(channels: Iterable[Channel], *readers: Reader) -> str | None:
    """``ros1`` when every channel is (or becomes) ROS 1, ``ros2`` for all-CDR, else None.

    Readers of a format whose channels always have one profile (``native_profile``: bags
    and ULogs give ROS 1 channels) give it even when empty.
    """
    natives = {r.native_profile for r in readers}
    if len(natives) == 1 and None not in natives:
        return natives.pop()
    encs = {c.message_encoding for c in channels}
    encs = {"ros1" if e == "ulog" else e for e in encs}
    if encs == {"ros1"}:
        return "ros1"
    if encs == {"cdr"}:
        return "ros2"
    return None


def make_progress(total: int, label: str, enabled: bool | None) -> Any:
    """A :class:`polybag.util.progress.Progress` (``enabled=None``: only on a terminal)."""
    from polybag.util.progress import Progress

    if enabled is None:
        enabled = sys.stderr.isatty()
    return Progress(total, label, enabled=enabled and total > 0)


def summary_count(reader: Reader) -> int:
    try:
        return int(reader.summary.message_count)
    except PolybagError:
        return 0


def until_damage(messages: Iterable[Any], damaged: Callable[[FormatError, int], None]) -> Iterator[Any]:
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
