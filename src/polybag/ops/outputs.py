"""An operation's outputs: which format, whether it may be written (or replaced), the
writer for it, and a file another library writes, put in place when done."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from polybag.errors import OutputExistsError, PolybagError, UnsupportedError, UsageError, WriteError
from polybag.formats import registry
from polybag.io.output_files import (
    MEDIA_MAGICS,
    as_output_error,
    create_new,
    file_refusal,
    named_os_error,
    place_file,
    refuse_existing,
    refuse_replacing,
)
from polybag.ops.inputs import check_apart, check_distinct, input_name
from polybag.ops.options import Input, Output, PathLike, is_path
from polybag.writer import Writer, format_for_path, open_writer


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
            cls: type[Writer] = spec.load_writer()
            reason = cls.replace_refusal(dst)
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
    if not is_path(dst):
        return
    if _url_output(dst):  # an object store URL: written locally, then uploaded
        from polybag.io.upload import check_url_output

        check_url_output(os.fspath(dst), [input_name(s) for s in inputs], overwrite)
        return
    dst = _local_output(dst)
    for src in inputs:
        check_distinct(src, dst)  # type: ignore[arg-type]
        check_apart(src, dst)  # type: ignore[arg-type]
    p = os.fspath(dst)  # type: ignore[arg-type]
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
def target_format(path: Output, format: str | None) -> str:  # noqa: A002
    """The writable format for an output: ``format`` (a name or alias) or the path's extension."""
    if format:
        return registry.writer_spec(format).name
    if not is_path(path):
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
        cls: type[Writer] = registry.get(fmt).load_writer()
        sig = inspect.signature(cls.__init__)
    except (ImportError, AttributeError, ValueError, TypeError):
        return False
    for p in sig.parameters.values():
        if p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD:
            return True
    return False


def _names_profile(fmt: str) -> bool:
    """Whether the writer class of ``fmt`` names a ``profile`` keyword (not just ``**kwargs``):
    its output has a profile (MCAP: ``ros1``, ``ros2``)."""
    try:
        cls: type[Writer] = registry.get(fmt).load_writer()
        return "profile" in inspect.signature(cls.__init__).parameters
    except (ImportError, AttributeError, ValueError, TypeError):
        return False


def make_writer(
    path: Output,
    fmt: str,
    compression: str | None = None,
    chunk_size: int | None = None,
    profile: str | None = None,
    overwrite: bool = False,
    **extra: Any,
) -> Writer:
    """A writer for ``path`` (its directory is created); ``overwrite=False``: never replaces an
    existing file (see :class:`polybag.io.output_files.AtomicFile`)."""
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
    if not is_path(path):  # a stream (stdout)
        return open_writer(path, format=fmt, **kwargs)
    if _url_output(path):  # a URL (uploaded on close)
        return open_writer(os.fspath(path), format=fmt, **kwargs)
    local = os.fspath(_local_output(path))
    make_folder(os.path.dirname(os.path.abspath(local)) or ".")
    return open_writer(local, format=fmt, **kwargs)


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
    to ``NAME`` when the block ends (see :func:`polybag.io.output_files.place_file`), removed if it
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
    try:
        os.close(create_new(tmp))
    except OutputExistsError:
        raise
    except OSError as e:  # (named by the output, not its NAME.active)
        raise as_output_error(e, p) from None
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
