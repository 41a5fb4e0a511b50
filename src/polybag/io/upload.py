"""Logs written to URLs: ``polybag.Writer("s3://bucket/run.mcap")`` and every command's output.

An object store has no ``NAME.active`` to rename, and a half-written object must never be
seen under the output's name, so an output URL is written **locally first and uploaded
once complete**:

- :class:`Upload` holds a private temporary directory; the format's own writer writes the
  file (or, for a directory format such as a rosbag2 bag, the directory) there, and
  :meth:`Upload.commit` puts it at the URL with fsspec's ``put_file`` (S3 completes a
  multipart upload atomically: readers see the old object or the whole new one).  A bag
  directory is uploaded file by file with ``metadata.yaml`` last, so a reader never finds
  metadata naming files not there yet.  The temporary directory goes in every case.
- An existing object is refused unless ``overwrite`` (checked before any work and again
  just before the upload); a failed or interrupted upload removes what this upload put
  there when nothing was there before (an existing object being replaced is left as it
  was: S3 keeps the old object when a put fails); Ctrl-C during the upload waits for the put
  under way (it runs on fsspec's event loop, which the interrupt does not stop), then removes
  it.  What a crash (a killed process) can
  leave: the local temporary directory, an unfinished multipart upload (invisible to
  readers; S3 lifecycle rules expire them), and, for a bag directory, the storage files
  uploaded before ``metadata.yaml``.
- ``http(s)://`` outputs are refused (:class:`~polybag.errors.UsageError`: nothing is
  written anywhere); ``gs://`` needs gcsfs to write (reading works without it,
  :mod:`polybag.io.gcs`); ``file://`` URLs are local paths (written as ``NAME.active``
  and renamed, as always).

:class:`RemoteWriter` is what ``polybag.Writer(url, ...)`` constructs for a URL: the
format's writer on the local file, uploaded by ``close``, discarded by ``abort``.  The
operations reach this module through :mod:`polybag.ops._common` (``check_output``,
``make_writer``, ``placed``) and :func:`staged`.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from polybag.errors import OutputExistsError, PolybagError, UsageError
from polybag.io.remote import file_url_path, is_url
from polybag.writer import Writer

#: the file of a directory output uploaded last (readers open a bag through it)
LAST = "metadata.yaml"
#: URL schemes whose first path component is a bucket (an output names something inside one)
_BUCKETS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"}


def output_url(target: object) -> str | None:
    """The URL an output names (``s3://``, ``gs://``, ``memory://``, ``http://``...), or None
    for a local path, a ``file://`` URL (a local path) or a stream."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not is_url(target):
        return None
    assert isinstance(target, str)
    return None if file_url_path(target) is not None else target


def local_output(target: Any) -> Any:
    """``target`` with a ``file://`` URL turned into its local path (anything else as is)."""
    if isinstance(target, str) and is_url(target):
        local = file_url_path(target)
        if local is not None:
            return local
    return target


def join(base: str, *names: str) -> str:
    """``base/name/...`` for a URL prefix (query strings are not supported in output URLs)."""
    return posixpath.join(base, *names)


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower()


def writable_fs(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem and path an output URL is uploaded to; a
    :class:`~polybag.errors.UsageError` (exit 2) for a URL that cannot be written."""
    scheme = _scheme(url)
    if scheme in ("http", "https"):
        raise UsageError(
            f"{url}: cannot write to an {scheme}:// URL (HTTP servers take no uploads); "
            "write to a local path or an object store URL (s3://, gs:// ...)"
        )
    if scheme in ("gs", "gcs"):
        try:
            import gcsfs  # noqa: F401
        except ImportError as e:
            raise UsageError(
                f"{url}: writing gs:// URLs needs gcsfs (pip install gcsfs); reading them works without it"
            ) from e
    if "?" in url or "#" in url:
        raise UsageError(f"{url}: an output URL cannot have a query or fragment")
    try:
        import fsspec.core
    except ImportError as e:  # pragma: no cover - the remote extra
        raise UsageError(f"{url}: writing URLs needs fsspec (pip install 'polybag[remote]')") from e
    try:
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError, TypeError) as e:
        raise UsageError(f"{url}: cannot write this URL: {e}") from e


def _exists(fs: Any, fpath: str, url: str) -> bool:
    try:
        return bool(fs.exists(fpath))
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise PolybagError(f"{url}: cannot check the output: {type(e).__name__}: {e}") from e


def refuse_existing_url(
    url: str, storage_options: dict[str, Any] | None = None, what: str = "output"
) -> None:
    """OutputExistsError when an object (or a directory prefix) exists at ``url``."""
    fs, fpath = writable_fs(url, storage_options)
    if _exists(fs, fpath, url):
        raise OutputExistsError(
            f"{url}: {what} exists; not overwritten (--force replaces it; in Python overwrite=True)"
        )


def check_url_output(
    url: str, inputs: Sequence[str], overwrite: bool, storage_options: dict[str, Any] | None = None
) -> None:
    """Before any work: ``url`` can be written, is none of ``inputs`` (never allowed, even
    with ``overwrite``) and holds no object unless ``overwrite``."""
    writable_fs(url, storage_options)
    norm = url.rstrip("/")
    for name in inputs:
        if isinstance(name, str) and name.rstrip("/") == norm:
            raise OutputExistsError(f"{url}: output is the input {name}; the input is never modified")
    if not overwrite:
        refuse_existing_url(url, storage_options)


def list_names(url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The names directly under the URL prefix ``url`` (none when it does not exist)."""
    fs, fpath = writable_fs(url, storage_options)
    try:
        entries = fs.ls(fpath, detail=False)
    except FileNotFoundError:
        return []
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise PolybagError(f"{url}: cannot list: {type(e).__name__}: {e}") from e
    return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)


def remove(url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Remove the object (or directory prefix) at ``url``; quietly nothing if absent."""
    try:
        fs, fpath = writable_fs(url, storage_options)
        fs.rm(fpath, recursive=True)
    except Exception:  # noqa: BLE001 - cleaning up after a failure: the failure is what matters
        pass


def _upload_bar(total: int, label: str) -> Any:
    """An fsspec callback drawing polybag's progress bar of ``total`` bytes (``.bar``)."""
    from fsspec.callbacks import Callback

    from polybag.util.progress import Progress

    bar = Progress(total, label, enabled=True)

    class _Bar(Callback):  # type: ignore[misc]
        def call(self, *args: Any, **kwargs: Any) -> None:
            bar.update(int(self.value or 0) - bar.done)

    cb = _Bar()
    cb.bar = bar
    return cb


class Upload:
    """A local staging place for the output at ``url``, uploaded by :meth:`commit` (see the
    module notes).  ``local`` is the path to write: a file, or with ``directory=True`` a
    directory (not yet created).  ``merge=True`` (a directory of separate files, such as
    ``export``'s tables): the prefix may exist; each file is refused if it exists (unless
    ``overwrite``) and a failed upload removes only the files it added.  ``progress``: an
    upload bar (None: only on a terminal)."""

    def __init__(
        self,
        url: str,
        *,
        directory: bool = False,
        overwrite: bool = False,
        merge: bool = False,
        storage_options: dict[str, Any] | None = None,
        progress: bool | None = None,
    ) -> None:
        self.url = url
        self.directory = directory or merge
        self.merge = merge
        self.overwrite = overwrite
        self.progress = progress
        self.fs, self.fpath = writable_fs(url, storage_options)
        top = _scheme(url) in _BUCKETS and "/" not in self.fpath.strip("/")
        if not self.fpath.strip("/") or (top and not merge):
            raise UsageError(f"{url}: name an object (or a folder) in the bucket, not the bucket itself")
        self.existed = not merge and _exists(self.fs, self.fpath, url)
        if self.existed and not overwrite:
            raise OutputExistsError(
                f"{url}: output exists; not overwritten (--force replaces it; in Python overwrite=True)"
            )
        self._old_files: list[str] = []  # a replaced bag directory's files (from its metadata.yaml)
        if self.existed and self.directory:
            self._old_files = self._bag_files(url)
        self._tmp = tempfile.mkdtemp(prefix="polybag-upload-")
        name = posixpath.basename(self.fpath.rstrip("/")) or "output"
        self.local = os.path.join(self._tmp, name)
        self.done = False
        self._put: list[str] = []  # remote paths put by this upload (removed if it fails)
        self._kept: set[str] = set()  # (merge) objects that existed before: never removed

    def _bag_files(self, url: str) -> list[str]:
        """The files the rosbag2 bag at the URL lists (metadata.yaml too): what replacing it
        may remove.  Anything else there is refused, even with overwrite: replacing a folder
        that is not a bag would mean deleting what is in it."""
        from polybag.formats.rosbag2.metadata import MAX_METADATA_BYTES, parse_metadata

        meta = posixpath.join(self.fpath, LAST)
        try:
            size = int(self.fs.size(meta))
            if size > MAX_METADATA_BYTES:
                raise PolybagError("metadata.yaml too large")
            info = parse_metadata(bytes(self.fs.cat_file(meta)), join(url, LAST))
        except Exception as e:  # noqa: BLE001 - no readable metadata.yaml: not a bag
            raise OutputExistsError(
                f"{url}: exists and is not a rosbag2 bag ({type(e).__name__}: {e}); not replaced, even with --force"
            ) from None
        return [LAST] + [posixpath.normpath(f.path) for f in info.files]

    def _files(self) -> list[tuple[str, str]]:
        """(local file, path relative to the output) of a directory output, metadata.yaml last."""
        out: list[tuple[str, str]] = []
        for root, _dirs, files in os.walk(self.local):
            for f in files:
                full = os.path.join(root, f)
                out.append((full, os.path.relpath(full, self.local).replace(os.sep, "/")))
        out.sort(key=lambda t: (t[1] == LAST, t[1]))
        return out

    def commit(self) -> None:
        """Upload what was written to ``local`` and remove the staging directory; on any
        failure (an interrupt too) what this upload put at the URL is removed (see the module
        notes) and the error raised."""
        if self.done:
            return
        try:
            if self.directory:
                if not os.path.isdir(self.local):
                    raise PolybagError(f"{self.url}: nothing was written to upload")
                items = [(lp, posixpath.join(self.fpath, rel)) for lp, rel in self._files()]
            else:
                if not os.path.isfile(self.local):
                    raise PolybagError(f"{self.url}: nothing was written to upload")
                items = [(self.local, self.fpath)]
            if self.merge:
                taken = [rp for _lp, rp in items if _exists(self.fs, rp, self.url)]
                if taken and not self.overwrite:
                    raise OutputExistsError(
                        f"{self.fs.unstrip_protocol(taken[0])}: output exists; not overwritten "
                        "(--force replaces it; in Python overwrite=True)"
                    )
                self._kept = set(taken)
            elif not self.overwrite and _exists(self.fs, self.fpath, self.url):
                raise OutputExistsError(
                    f"{self.url}: an object of that name appeared while writing; not overwritten "
                    "(the new output was discarded)"
                )
            stale: list[str] = []
            if self.directory and self.existed and not self.merge:
                have = {rel for _lp, rel in self._files()}
                stale = [
                    posixpath.join(self.fpath, rel)
                    for rel in self._old_files
                    if rel not in have and not rel.startswith(("..", "/"))
                ]
            total = sum(os.path.getsize(lp) for lp, _rp in items)
            enabled = sys.stderr.isatty() if self.progress is None else self.progress
            cb = _upload_bar(total, f"upload {self.url}") if enabled and total else None
            try:
                self._put_all(items, {"callback": cb} if cb is not None else {})
            finally:
                if cb is not None:
                    cb.bar.close()
            for p in stale:  # files of the replaced bag directory the new one does not have
                try:
                    self.fs.rm_file(p)
                except Exception:  # noqa: BLE001 - leftovers of the old bag, not named by its metadata
                    pass
            self.done = True
        except BaseException:
            self._undo()
            raise
        finally:
            self.discard()

    def _put_all(self, items: list[tuple[str, str]], kw: dict[str, Any]) -> None:
        """``put_file`` of every (local, remote) item, in order, in a thread of its own: an
        interrupt (Ctrl-C) in the caller stops it after the put under way, which is waited
        for so that what it put can then be removed (fsspec runs a put on its own event loop,
        where an interrupt of the calling thread would not stop it)."""
        errors: list[BaseException] = []
        stop = threading.Event()

        def work() -> None:
            try:
                for lp, rp in items:
                    if stop.is_set():
                        return
                    self._put.append(rp)
                    self.fs.put_file(lp, rp, **kw)
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)

        t = threading.Thread(target=work, name="polybag-upload", daemon=True)
        t.start()
        try:
            while t.is_alive():
                t.join(0.2)
        except BaseException:
            stop.set()
            t.join()  # a second interrupt stops waiting: the put under way may then complete
            raise
        if errors:
            e = errors[0]
            if isinstance(e, PolybagError):
                raise e
            raise PolybagError(f"{self.url}: upload failed: {type(e).__name__}: {e}") from e

    def _undo(self) -> None:
        """After a failed upload: remove what it put, unless it replaced existing objects
        (those keep their old content where the store keeps it on a failed put)."""
        if self.existed:
            return
        for rp in self._put:
            if rp in self._kept:
                continue
            try:
                self.fs.rm_file(rp)
            except Exception:  # noqa: BLE001 - already failing; the object may not exist
                pass
        if self.directory and not self.merge:
            try:
                self.fs.rm(self.fpath, recursive=True)
            except Exception:  # noqa: BLE001 - already failing
                pass

    def discard(self) -> None:
        """Remove the staging directory (nothing is uploaded)."""
        shutil.rmtree(self._tmp, ignore_errors=True)


@contextmanager
def staged(
    url: str,
    *,
    directory: bool = False,
    overwrite: bool = False,
    merge: bool = False,
    storage_options: dict[str, Any] | None = None,
    progress: bool | None = None,
) -> Iterator[str]:
    """Yields a local path to write the output at ``url`` to (a file, or with ``directory``
    or ``merge`` a directory to create, or fill, there; see :class:`Upload`); uploaded when
    the block ends, discarded if it fails."""
    up = Upload(
        url,
        directory=directory,
        overwrite=overwrite,
        merge=merge,
        storage_options=storage_options,
        progress=progress,
    )
    try:
        yield up.local
    except BaseException:
        up.discard()
        raise
    up.commit()


def _is_directory_format(fmt: str) -> bool:
    from polybag.formats import registry

    spec = registry.get(fmt)
    return spec.open_path is not None


def _url_format(url: str, format: str | None) -> str:  # noqa: A002
    from polybag.errors import UnsupportedError
    from polybag.formats import registry

    if format:
        return registry.writer_spec(format).name
    try:
        return registry.format_for_path(url.rstrip("/"))
    except UnsupportedError:
        dirs = [s.name for s in registry.formats() if s.writer is not None and s.open_path is not None]
        if posixpath.splitext(url.rstrip("/"))[1] or len(dirs) != 1:
            raise
        return dirs[0]


class RemoteWriter(Writer):
    """``polybag.Writer(url, ...)`` for a URL: the format's writer on a local temporary
    file (directory, for a rosbag2 bag), uploaded by :meth:`close` and dropped by
    :meth:`abort` (see the module notes).  ``storage_options`` go to fsspec; ``overwrite``
    (default True, as for paths) replaces an existing object; ``progress``: an upload bar
    (None: only on a terminal).  A ``file://`` URL is written as its local path."""

    def __new__(cls, *args: Any, **kwargs: Any) -> RemoteWriter:
        return object.__new__(cls)

    def __init__(
        self,
        url: str,
        *args: Any,
        format: str | None = None,  # noqa: A002
        overwrite: bool = True,
        storage_options: dict[str, Any] | None = None,
        progress: bool | None = None,
        **options: Any,
    ) -> None:
        self.url = url
        fmt = _url_format(url, format)
        local = file_url_path(url)
        self._upload: Upload | None = None
        if local is None:
            self._upload = Upload(
                url,
                directory=_is_directory_format(fmt),
                overwrite=overwrite,
                storage_options=storage_options,
                progress=progress,
            )
            local, overwrite = self._upload.local, True
        try:
            self._inner = Writer(local, *args, format=fmt, overwrite=overwrite, **options)
        except BaseException:
            if self._upload is not None:
                self._upload.discard()
            raise
        self.format = self._inner.format
        self.local_path = local
        self._closed = False
        inner = self._inner
        # the hot calls go straight to the format's writer
        self.add_schema = inner.add_schema  # type: ignore[method-assign]
        self.add_channel = inner.add_channel  # type: ignore[method-assign]
        self.write = inner.write  # type: ignore[method-assign]
        self.add_attachment = inner.add_attachment  # type: ignore[method-assign]
        self.add_metadata = inner.add_metadata  # type: ignore[method-assign]
        self.add_format_extras = inner.add_format_extras  # type: ignore[method-assign]
        self.undefined_types = inner.undefined_types  # type: ignore[method-assign]

    def __getattr__(self, name: str) -> Any:
        # a format writer's own members (the ULog writer's add_format, add_subscription...)
        if name.startswith("__") or "_inner" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["_inner"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        # settings of the format's writer (the ULog writer's start_timestamp) go to it
        inner = self.__dict__.get("_inner")
        if (
            inner is not None
            and name not in self.__dict__
            and not hasattr(type(self), name)
            and hasattr(inner, name)
        ):
            setattr(inner, name, value)
        else:
            object.__setattr__(self, name, value)

    def close(self) -> None:
        """Finish the file and upload it (the local copy is removed either way)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._inner.close()
        except BaseException:
            self._abort_inner()
            raise
        if self._upload is not None:
            self._upload.commit()

    def _abort_inner(self) -> None:
        try:
            self._inner.abort(discard=True)
        except BaseException:  # noqa: BLE001 - already failing
            pass
        if self._upload is not None:
            self._upload.discard()

    def abort(self, *, discard: bool = False) -> None:
        """Stop without finishing: nothing is uploaded and the local file is removed
        (``discard`` is implied for a URL: there is no ``NAME.active`` to recover)."""
        if self._upload is None:
            self._inner.abort(discard=discard)
            return
        if not self._closed:
            self._closed = True
            self._abort_inner()
        elif not self._upload.done:
            self._upload.discard()


def check_url_files(
    url: str, names: Sequence[str], overwrite: bool, storage_options: dict[str, Any] | None = None
) -> None:
    """Before any work: the files ``names`` under the URL prefix ``url`` can be written (an
    existing one is refused unless ``overwrite``)."""
    writable_fs(url, storage_options)
    if overwrite:
        return
    have = set(list_names(url, storage_options))
    taken = [n for n in names if n in have]
    if taken:
        more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
        raise OutputExistsError(
            f"{join(url, taken[0])}{more}: output exists; not overwritten (--force replaces them; in Python overwrite=True)"
        )
