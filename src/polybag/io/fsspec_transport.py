"""Objects read through fsspec (every scheme polybag has no transport of its own for):
the filesystem of a URL (:func:`fs_for`; over ``http(s)://`` with polybag's redirect rules
added to aiohttp's, :func:`guarded_options`), S3 reads pinned to the version that was opened
(:class:`S3Pinned`), and a transport's exception as a
:class:`~polybag.errors.PolybagError` naming the URL without its secrets
(:func:`transport_error`, :func:`not_found`)."""

from __future__ import annotations

from typing import Any

from polybag.errors import PolybagError, UsageError
from polybag.io.redaction import redact, scrub, secrets_of
from polybag.io.redirects import RedirectRefused, aiohttp_guard, refused_redirect
from polybag.io.remote_limits import MAX_OBJECT_BYTES, limits


def guarded_options(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The options of an ``http(s)://`` URL read through fsspec's HTTP filesystem: the
    caller's ``client_kwargs`` (kept) with polybag's redirect rules added to their
    ``trace_configs`` (:func:`polybag.io.redirects.aiohttp_guard`)."""
    kwargs = opts.get("client_kwargs")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise UsageError(f"{redact(url)}: the storage option client_kwargs must be a dict")
    theirs = kwargs.get("trace_configs") or []
    if not isinstance(theirs, (list, tuple)):
        raise UsageError(f"{redact(url)}: client_kwargs['trace_configs'] must be a list")
    try:
        guard = aiohttp_guard()
    except ImportError as e:  # pragma: no cover - the remote extra
        raise UsageError(f"{redact(url)}: reading this URL needs aiohttp (pip install 'polybag[remote]')") from e
    return {**opts, "client_kwargs": {**kwargs, "trace_configs": [*theirs, guard]}}


def fs_for(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the object's path in it (polybag's own options
    taken out; over ``http(s)://`` with polybag's redirect rules)."""
    _timeout, _deadline, opts = limits(url, storage_options)  # polybag's own options stay here
    try:
        import fsspec.core  # type: ignore[import-untyped]  # fsspec ships no type hints
    except ImportError as e:  # pragma: no cover - the remote extra
        raise UsageError(f"{redact(url)}: reading URLs needs fsspec (pip install 'polybag[remote]')") from e
    if url.lower().startswith(("http://", "https://")):
        opts = guarded_options(url, opts)  # aiohttp under fsspec: the redirect rules of HttpRanges
    try:
        fs, fpath = fsspec.core.url_to_fs(url, **opts)
        return fs, fpath
    except (ImportError, ValueError) as e:
        raise UsageError(f"{redact(url)}: cannot read this URL: {scrub(str(e), secrets_of(url))}") from e


def transport_error(url: str, what: str, e: BaseException) -> PolybagError:
    """A transport's exception as a PolybagError naming ``url`` (no secrets, no raw text); a
    refused redirect (fsspec's HTTP filesystem) as a :class:`RedirectRefused`."""
    reason = refused_redirect(e)
    if reason is not None:
        return RedirectRefused(f"{redact(url)}: {what}: {scrub(reason, secrets_of(url))}")
    return PolybagError(f"{redact(url)}: {what}: {scrub(f'{type(e).__name__}: {e}', secrets_of(url))}")


def not_found(url: str, e: FileNotFoundError) -> PolybagError:
    """fsspec's FileNotFoundError: no such object, or (over HTTP, where fsspec turns every
    failure of its size request into one) a refused redirect."""
    if refused_redirect(e) is not None:
        return transport_error(url, "cannot open", e)
    return PolybagError(f"{redact(url)}: cannot open: no such object")


def check_size(url: str, size: int) -> None:
    """A size over :data:`~polybag.io.remote_limits.MAX_OBJECT_BYTES` is an error."""
    if size > MAX_OBJECT_BYTES:
        raise PolybagError(
            f"{redact(url)}: the server says the object is {size} bytes, more than polybag reads "
            f"({MAX_OBJECT_BYTES} bytes)"
        )


class S3Pinned:
    """An s3fs filesystem whose reads are of the object as it was opened: its ``VersionId``
    when the bucket keeps versions, else ``If-Match`` with its ``ETag`` (S3 answers 412 when
    the object was replaced); every answer's ETag is compared too.  No more bytes are read
    of an answer than were asked for (and one)."""

    def __init__(self, fs: Any, info: dict[str, Any], url: str) -> None:
        self._fs = fs
        self._url = url
        vid = info.get("VersionId")
        self._version = vid if isinstance(vid, str) and vid not in ("", "null") else None
        etag = info.get("ETag")
        self._etag = etag if isinstance(etag, str) and etag else None

    def _changed(self, detail: str) -> PolybagError:
        return PolybagError(f"{redact(self._url)}: the object changed while it was read ({detail})")

    async def _get(self, path: str, start: int, end: int) -> bytes:
        bucket, key, _vers = self._fs.split_path(path)
        kw: dict[str, Any] = {}
        if self._version:
            kw["VersionId"] = self._version
        elif self._etag:
            kw["IfMatch"] = self._etag
        try:
            resp = await self._fs._call_s3(
                "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **kw
            )
        except Exception as e:  # noqa: BLE001 - s3fs/botocore errors of any kind
            text = f"{type(e).__name__}: {e}"
            if "PreconditionFailed" in text or "412" in text or "pre-conditions you specified did not hold" in text:
                raise self._changed("S3 answered 412 Precondition Failed on the pinned ETag") from None
            raise
        body = resp["Body"]
        want = end - start + 1  # one more than asked for: a longer answer is caught, not read
        parts: list[bytes] = []
        got = 0
        try:
            while got < want:
                piece = await body.read(want - got)
                if not piece:
                    break
                parts.append(piece)
                got += len(piece)
        finally:
            body.close()
        data = b"".join(parts)
        now = resp.get("ETag")
        if self._etag and isinstance(now, str) and now != self._etag:
            raise self._changed(f"ETag was {self._etag}, now {now}")
        return data

    def cat_file(self, path: str, start: int, end: int) -> bytes:
        from fsspec.asyn import sync  # type: ignore[import-untyped]  # fsspec ships no type hints

        return sync(self._fs.loop, self._get, path, start, end)  # type: ignore[no-any-return]

    def cat_ranges(self, paths: list[str], starts: list[int], ends: list[int]) -> list[Any]:
        import asyncio

        from fsspec.asyn import sync

        async def all_of() -> list[Any]:
            return await asyncio.gather(
                *(self._get(p, s, e) for p, s, e in zip(paths, starts, ends)), return_exceptions=True
            )

        return sync(self._fs.loop, all_of)  # type: ignore[no-any-return]


def pinned(fs: Any, fpath: str, info: dict[str, Any]) -> Any:
    """The filesystem to read ``fpath`` through: for S3 (s3fs), one pinned to the version
    that ``info`` describes (:class:`S3Pinned`); others as they are (their answers carry no
    validator polybag can check through fsspec, only the size)."""
    if type(fs).__name__ == "S3FileSystem" and hasattr(fs, "_call_s3") and hasattr(fs, "split_path"):
        return S3Pinned(fs, info, fs.unstrip_protocol(fpath) if hasattr(fs, "unstrip_protocol") else fpath)
    return fs
