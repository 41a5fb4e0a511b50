"""Logs written to URLs: ``polybag.Writer("s3://bucket/run.mcap")`` and every command's output.

An object store has no ``NAME.active`` to rename, and a half-written object must never be
seen under the output's name, so an output URL is written **locally first and uploaded
once complete**:

- :class:`Upload` holds a private temporary directory; the format's own writer writes the
  file (or, for a directory format such as a rosbag2 bag, the directory) there, and
  :meth:`Upload.commit` puts it at the URL with fsspec's ``put_file`` (S3 completes a
  multipart upload atomically: readers see the old object or the whole new one).  A
  directory output is uploaded file by file in the order its writer gives
  (:meth:`polybag.writer.Writer.upload_order`: a rosbag2 bag's ``metadata.yaml`` last, so a
  reader never finds metadata naming files not there yet).  The temporary directory goes in
  every case.
- An existing object is refused unless ``overwrite`` (checked before any work and again
  just before the upload); a failed or interrupted upload removes what this upload put
  there when nothing was there before (an existing object being replaced is left as it
  was: S3 keeps the old object when a put fails); Ctrl-C during the upload waits for the put
  under way (it runs on fsspec's event loop, which the interrupt does not stop), then removes
  it.  What a crash (a killed process) can
  leave: the local temporary directory, an unfinished multipart upload (invisible to
  readers; S3 lifecycle rules expire them), and, for a bag directory, the storage files
  uploaded before ``metadata.yaml``.
- The destination is checked before any work (:func:`check_destination`): the bucket of an
  object store URL must exist and answer these credentials (one request, S3's HeadBucket;
  once per bucket and process), so a typo in a bucket's name or a refused key fails at
  once, not at the upload after the whole conversion.  (Whether the credentials may *write*
  is known only at the upload: S3 has no cheap check of that.)
- ``http(s)://`` outputs are refused (:class:`~polybag.errors.UsageError`: nothing is
  written anywhere); ``gs://`` needs gcsfs to write (reading works without it,
  :mod:`polybag.io.gcs`); ``file://`` URLs are local paths (written as ``NAME.active``
  and renamed, as always).

``polybag.Writer(url, ...)`` is the format's writer on :attr:`Upload.local`, wired to its
:class:`Upload` (:func:`polybag.writer.open_writer`): ``close`` uploads, ``abort`` drops.  The
operations reach this module through :mod:`polybag.ops.outputs` and :func:`staged`.  This
module knows no format: what a directory output's files are, and in which order they go,
its writer says (:class:`StagedFiles`).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from polybag.errors import OutputExistsError, PolybagError, UsageError
from polybag.io.urls import file_url_path, is_url

#: URL schemes whose first path component is a bucket (an output names something inside one)
_BUCKETS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"}

#: the bytes the last uploads put, by URL (the newest :data:`_UPLOADED_KEPT`): what the
#: command's summary reports as written there (:func:`uploaded_bytes`)
_UPLOADED: dict[str, int] = {}
_UPLOADED_KEPT = 256


def uploaded_bytes(url: str) -> int | None:
    """The bytes the last completed upload to ``url`` put, or the uploads under the prefix
    ``url`` (None: no upload to it here)."""
    if url in _UPLOADED:
        return _UPLOADED[url]
    under = url.rstrip("/") + "/"
    sizes = [n for u, n in _UPLOADED.items() if u.startswith(under)]
    return sum(sizes) if sizes else None


def output_url(target: object) -> str | None:
    """The URL an output names (``s3://``, ``gs://``, ``memory://``, ``http://``...), or None
    for a local path, a ``file://`` URL (a local path) or a stream."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not is_url(target):
        return None
    assert isinstance(target, str)
    return None if file_url_path(target) is not None else target


class StagedFiles(Protocol):
    """What the writer of a directory output says about its files (a writer class,
    :class:`polybag.writer.Writer`)."""

    def upload_order(self, files: Sequence[str]) -> list[str]:
        """The files (relative ``/``-separated paths) in the order they are uploaded."""
        ...

    def replaceable_files(self, read: Callable[[str, int], bytes], url: str) -> list[str]:
        """The files of the existing output at ``url`` a new one may replace (``read(name,
        most)``: one of its files, at most ``most`` bytes); OutputExistsError if none may be."""
        ...


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
            import gcsfs  # type: ignore[import-not-found,unused-ignore]  # noqa: F401 - optional, ships no type hints
        except ImportError as e:
            raise UsageError(
                f"{url}: writing gs:// URLs needs gcsfs (pip install gcsfs); reading them works without it"
            ) from e
    if "?" in url or "#" in url:
        raise UsageError(f"{url}: an output URL cannot have a query or fragment")
    try:
        import fsspec.core  # type: ignore[import-untyped]  # fsspec ships no type hints
    except ImportError as e:  # pragma: no cover - the remote extra
        raise UsageError(f"{url}: writing URLs needs fsspec (pip install 'polybag[remote]')") from e
    from polybag.io.fsspec_transport import s3_defaults

    try:
        fs, fpath = fsspec.core.url_to_fs(url, **s3_defaults(url, dict(storage_options or {})))
        return fs, fpath
    except (ImportError, ValueError, TypeError) as e:
        raise UsageError(f"{url}: cannot write this URL: {e}") from e


#: (filesystem, bucket) pairs :func:`check_destination` found there in this process
_BUCKETS_SEEN: set[tuple[str, str]] = set()


def check_destination(url: str, storage_options: dict[str, Any] | None = None, fs: Any = None, fpath: str | None = None) -> None:
    """Before any work: the bucket of the output URL ``url`` exists and answers these
    credentials (one request: ``info`` of the bucket, S3's HeadBucket; once per bucket and
    filesystem in a process).  A missing bucket, refused credentials or no connection is a
    :class:`~polybag.errors.PolybagError` naming the bucket (and the S3 endpoint and where
    the credentials came from)."""
    if fs is None or fpath is None:
        fs, fpath = writable_fs(url, storage_options)
    if _scheme(url) not in _BUCKETS:
        return
    bucket = fpath.strip("/").split("/", 1)[0]
    token = str(getattr(fs, "_fs_token", id(fs)))  # (fsspec's token of the filesystem and its options)
    if not bucket or (token, bucket) in _BUCKETS_SEEN:
        return
    from polybag.io.fsspec_transport import transport_error

    try:
        fs.info(bucket)
    except FileNotFoundError:
        raise PolybagError(
            f"{url}: cannot write: no such bucket {bucket} (checked before any work: create the bucket, or fix its name)"
        ) from None
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise transport_error(url, f"cannot write to bucket {bucket}", e, fs) from None
    _BUCKETS_SEEN.add((token, bucket))


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
    check_destination(url, storage_options)
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
    from fsspec.callbacks import Callback  # type: ignore[import-untyped]  # fsspec ships no type hints

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
    upload bar (None: only on a terminal).  ``files``: what the directory output's writer
    says of its files (their upload order, what of an existing output it may replace)."""

    def __init__(
        self,
        url: str,
        *,
        directory: bool = False,
        overwrite: bool = False,
        merge: bool = False,
        storage_options: dict[str, Any] | None = None,
        progress: bool | None = None,
        files: StagedFiles | None = None,
    ) -> None:
        self.url = url
        self.files = files
        self.directory = directory or merge
        self.merge = merge
        self.overwrite = overwrite
        self.progress = progress
        self.fs, self.fpath = writable_fs(url, storage_options)
        top = _scheme(url) in _BUCKETS and "/" not in self.fpath.strip("/")
        if not self.fpath.strip("/") or (top and not merge):
            raise UsageError(f"{url}: name an object (or a folder) in the bucket, not the bucket itself")
        check_destination(url, fs=self.fs, fpath=self.fpath)
        self.existed = not merge and _exists(self.fs, self.fpath, url)
        if self.existed and not overwrite:
            raise OutputExistsError(
                f"{url}: output exists; not overwritten (--force replaces it; in Python overwrite=True)"
            )
        self._old_files: list[str] = []  # a replaced directory output's files (its writer says which)
        if self.existed and self.directory:
            self._old_files = self._replaceable(url)
        self._tmp = tempfile.mkdtemp(prefix="polybag-upload-")
        name = posixpath.basename(self.fpath.rstrip("/")) or "output"
        self.local = os.path.join(self._tmp, name)
        self.done = False  # uploaded
        self.closed = False  # the writer of the output was closed or aborted (Writer(url))
        self._put: list[str] = []  # remote paths put by this upload (removed if it fails)
        self._kept: set[str] = set()  # (merge) objects that existed before: never removed

    def _replaceable(self, url: str) -> list[str]:
        """The files of the existing directory output at the URL that replacing it may remove,
        as its writer says (``files``); without one, the directory is not replaced."""
        if self.files is None:
            raise OutputExistsError(f"{url}: exists and is a folder; not replaced, even with --force")

        def read(name: str, most: int) -> bytes:
            path = posixpath.join(self.fpath, name)
            if int(self.fs.size(path)) > most:
                raise PolybagError(f"{name} too large")
            return bytes(self.fs.cat_file(path))

        return self.files.replaceable_files(read, url)

    def _files(self) -> list[tuple[str, str]]:
        """(local file, path relative to the output) of a directory output, in upload order."""
        found: dict[str, str] = {}
        for root, _dirs, files in os.walk(self.local):
            for f in files:
                full = os.path.join(root, f)
                found[os.path.relpath(full, self.local).replace(os.sep, "/")] = full
        order = self.files.upload_order(list(found)) if self.files is not None else sorted(found)
        return [(found[rel], rel) for rel in order]

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
            _UPLOADED.pop(self.url, None)
            _UPLOADED[self.url] = total
            while len(_UPLOADED) > _UPLOADED_KEPT:
                del _UPLOADED[next(iter(_UPLOADED))]
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
    files: StagedFiles | None = None,
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
        files=files,
    )
    try:
        yield up.local
    except BaseException:
        up.discard()
        raise
    up.commit()


def check_url_files(
    url: str, names: Sequence[str], overwrite: bool, storage_options: dict[str, Any] | None = None
) -> None:
    """Before any work: the files ``names`` under the URL prefix ``url`` can be written (an
    existing one is refused unless ``overwrite``)."""
    check_destination(url, storage_options)
    if overwrite:
        return
    have = set(list_names(url, storage_options))
    taken = [n for n in names if n in have]
    if taken:
        more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
        raise OutputExistsError(
            f"{join(url, taken[0])}{more}: output exists; not overwritten (--force replaces them; in Python overwrite=True)"
        )
