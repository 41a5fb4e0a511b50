"""Remote files (any fsspec URL): open one as a source read by range requests
(:func:`open_url`), read its first bytes (:func:`read_head`), copy it whole
(:func:`download`), list what a glob URL matches (:func:`expand_url`, :func:`expand_urls`:
the one expansion of ``polybag.dask`` and of every command taking several inputs).

The source is a :class:`~polybag.io.remote_source.RemoteSource`: the first 16 and the last
64 KiB are fetched at open, then what readers ``need``.  What reads a URL is looked up by its
scheme (:mod:`polybag.io.transports`): plain ``http(s)://`` URLs are read by
:mod:`polybag.io.http_ranges`, ``gs://`` URLs by gcsfs when it is installed, else through
GCS's XML API over the same transport (:mod:`polybag.io.gcs`); every other scheme through
:func:`fsspec.core.url_to_fs` (``s3://`` needs s3fs; :mod:`polybag.io.fsspec_transport`).
``file://`` URLs are mapped like local paths by :func:`polybag.io.source.open_source`.  This
module knows no format: a remote log that is no single object (a rosbag2 bag directory) is
its format's (the registry's ``open_url`` hook, :mod:`polybag.formats.rosbag2.remote`).

Servers are untrusted (see :mod:`polybag.io.http_ranges` for the HTTP details).  Every
operation here (an open, each ``need``, a ``download``) has an overall deadline:
``storage_options={"deadline": seconds}``, else ``POLYBAG_REMOTE_DEADLINE``, else one hour;
``storage_options={"timeout": seconds}`` (``POLYBAG_HTTP_TIMEOUT``, 120 s) bounds each HTTP
request (:mod:`polybag.io.remote_limits`).  Both are polybag's own options, never passed to
fsspec.  The object is pinned to the version that was opened: over HTTP by its
``ETag``/``Last-Modified`` (``If-Match``), on S3 (s3fs) by its ``VersionId`` or ``If-Match``
with its ``ETag``; a change is an error.  Sizes over
:data:`~polybag.io.remote_limits.MAX_OBJECT_BYTES` are refused, and messages name the URL
without its user info or query values.  An ``http(s)://`` URL given options only fsspec
takes (``client_kwargs``, ``ssl``, ...) is read by fsspec's HTTP filesystem (aiohttp) under
the redirect rules of :class:`~polybag.io.http_ranges.HttpRanges`, through a trace hook
added to its ``client_kwargs["trace_configs"]`` (:func:`~polybag.io.redirects.aiohttp_guard`):
a refused redirect is a :class:`~polybag.io.redirects.RedirectRefused`.

The source's request count (``stats["requests"]``) includes the open's requests (the HEAD,
or fsspec's ``info``), so it is what the server saw.  A glob URL (``*``, ``?``, ``[...]``,
``**``) is listed through fsspec's ``glob`` and expands to at most :data:`MAX_GLOB_MATCHES`
objects (more is an error naming the bound; none is an error too); HTTP has no listing, so a
glob character in an ``http(s)://`` URL's path is an error saying so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from polybag.errors import NoObjectError, PolybagError, UsageError
from polybag.io.block_map import BLOCK, PART
from polybag.io.fsspec_transport import (
    bucket_and_key,
    bucket_exists,
    check_size,
    fs_for,
    not_found,
    pinned,
    s3_listing,
    s3_ranged_get,
    transport_error,
)
from polybag.io.redaction import redact
from polybag.io.remote_limits import DEADLINE_ENV, limits
from polybag.io.remote_source import TAIL, RemoteSource
from polybag.io.transports import scheme, transport_for
from polybag.io.urls import has_glob, is_url


def _names_bag_directory(url: str, storage_options: dict[str, Any] | None, until: float) -> bool:
    """Whether ``URL/metadata.yaml`` is there (one request): ``url``, which names no object
    (no such object, a directory, a listing of no stated size), is a rosbag2 directory."""
    base = url.split("?", 1)[0]
    if base.endswith("/") or time.monotonic() > until:
        return False
    meta = base + "/metadata.yaml" + (url[len(base) :])
    try:
        fast = transport_for(meta, storage_options)
        if fast is None and scheme(url) in ("http", "https"):
            return False  # fsspec's HTTP says "not found" for every failure (redirect loops too)
        if fast is not None:
            try:
                fast.open(until)
            finally:
                fast.close()
            return True
        fs, fpath = fs_for(meta, storage_options)
        return bool(fs.info(fpath).get("type") != "directory")
    except Exception:  # noqa: BLE001 - no metadata.yaml, or any transport error: no hint
        return False


def _no_object(url: str, storage_options: dict[str, Any] | None, until: float, e: PolybagError) -> PolybagError:
    """``e`` (``url`` names no object), or the clear error when it names a rosbag2 directory."""
    if _names_bag_directory(url, storage_options, until):
        return PolybagError(f"{redact(url)}: URL names a rosbag2 directory: end it with /")
    return e


def read_head(url: str, n: int, storage_options: dict[str, Any] | None = None) -> bytes:
    """The first ``n`` bytes of the object at ``url`` (one small request; for sniffing)."""
    return read_head_counted(url, n, storage_options)[0]


def read_head_counted(url: str, n: int, storage_options: dict[str, Any] | None = None) -> tuple[bytes, int]:
    """:func:`read_head`, and the requests it took (1 over polybag's own transports; over
    fsspec, its size request and, for a non-empty object, the read)."""
    _timeout, deadline, _opts = limits(url, storage_options)
    until = time.monotonic() + deadline
    fast = transport_for(url, storage_options)
    if fast is not None:
        try:
            try:
                return fast.read_head(n, until), fast.requests  # one ranged GET, no HEAD first
            except NoObjectError as e:
                raise _no_object(url, storage_options, until, e) from None
        finally:
            fast.close()
    fs, fpath = fs_for(url, storage_options)
    if n > 0:
        try:  # S3: one GetObject of the first bytes, no HeadObject first
            first = s3_ranged_get(fs, fpath, url, f"bytes=0-{n - 1}", n)
        except FileNotFoundError:
            first = None  # asked the HEAD way below, whose errors say what is missing
        if first is not None:
            data = first[1]
            if first[0]["start"] != 0 or len(data) > n:
                raise PolybagError(f"{redact(url)}: asked for the first {n} bytes, got {len(data)} from {first[0]['start']}")
            return data, 1
    try:
        size = fs.size(fpath)
        if size is None:  # a directory (a prefix): no object
            raise _no_object(url, storage_options, until, PolybagError(f"{redact(url)}: is a directory, not a log file"))
        data = bytes(fs.cat_file(fpath, start=0, end=min(n, size))) if size else b""
    except PolybagError:
        raise
    except FileNotFoundError as e:
        raise _no_object(url, storage_options, until, not_found(url, e, fs, fpath)) from None
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise transport_error(url, "cannot open", e, fs) from None
    if len(data) > n:
        raise PolybagError(f"{redact(url)}: asked for {n} bytes, got {len(data)}")
    return data, 1 + bool(size)


#: the most objects one glob URL may expand to (a larger listing is an error naming this bound)
MAX_GLOB_MATCHES = 10_000

def expand_url(url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The URLs a glob URL (``s3://bucket/logs/*.mcap``, ``s3://b/**/*.bag``) matches, sorted;
    a plain URL as is.  Objects only (a pattern ending in ``/`` matches prefixes, as
    ``URL/``: rosbag2 directories).  No match is a :class:`~polybag.errors.UsageError` (``no
    object matches ...``), and so are more than :data:`MAX_GLOB_MATCHES` matches and a glob
    in an ``http(s)://`` URL (HTTP has no listing)."""
    if not has_glob(url):
        return [url]
    name = redact(url)
    if url.lower().startswith(("http://", "https://")):
        raise UsageError(
            f"{name}: a glob (*, ?, [...]) needs a listing, which HTTP servers do not give: "
            "name each URL, or use an object store URL (s3://, gs://, az://...)"
        )
    if url.lower().startswith(("gs://", "gcs://")):
        from polybag.io.gcs import have_gcsfs, no_listing

        if not have_gcsfs():
            raise no_listing(url)
    fs, _fpath = fs_for(url, storage_options)
    dirs = url.endswith("/")
    if not dirs and "**" in _fpath and s3_listing(fs) is not None:
        return _find_s3(url, fs, _fpath)
    parts = bucket_and_key(url, fs, _fpath)
    bucket = parts[0] if parts is not None else None
    try:
        found = fs.glob(url.rstrip("/") if dirs else url, detail=True)
    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
        raise _listing_error(url, fs, bucket, e) from None
    want = "directory" if dirs else "file"
    hits = sorted(str(p) for p, info in found.items() if isinstance(info, dict) and info.get("type") == want)
    if len(hits) > MAX_GLOB_MATCHES:
        raise UsageError(
            f"{name}: matches {len(hits)} objects, more than polybag expands one pattern to "
            f"(MAX_GLOB_MATCHES = {MAX_GLOB_MATCHES}): narrow the pattern"
        )
    if not hits:
        raise _no_match(url, fs, bucket, dirs)
    out = [h if is_url(h) else fs.unstrip_protocol(h) for h in hits]
    return [u.rstrip("/") + "/" for u in out] if dirs else out


#: the most objects a ``**`` listing on S3 goes through (a larger listing is an error naming
#: this bound; what is kept of it is the matches only, at most MAX_GLOB_MATCHES)
MAX_LISTED_OBJECTS = 1_000_000


def _find_s3(url: str, fs: Any, fpath: str) -> list[str]:
    """The objects of S3 that a ``**`` pattern matches, listed page by page (one listing of
    the pattern's fixed prefix, no delimiter), keeping only the matches: at most
    :data:`MAX_LISTED_OBJECTS` listed and :data:`MAX_GLOB_MATCHES` kept, else an error naming
    the bound.  The same objects as fsspec's ``glob`` (which lists every level below the
    prefix, all kept)."""
    import re

    from fsspec.utils import glob_translate  # type: ignore[import-untyped]  # fsspec ships no type hints

    name = redact(url)
    first = min(i for i in (fpath.find(c) for c in "*?[") if i >= 0)
    bucket, _sep, prefix = fpath[:first].partition("/")
    try:
        pattern = re.compile(glob_translate(fpath))
    except (ValueError, re.error) as e:
        raise UsageError(f"{name}: not a glob polybag can list: {e}") from None
    hits: list[str] = []
    listed = 0

    def visit(info: dict[str, Any]) -> None:
        nonlocal listed
        listed += 1
        if listed > MAX_LISTED_OBJECTS:
            raise UsageError(
                f"{name}: the listing under {bucket}/{prefix} passes {MAX_LISTED_OBJECTS} objects "
                f"(MAX_LISTED_OBJECTS): narrow the pattern's fixed prefix"
            )
        path = str(info.get("name", ""))
        if info.get("type") == "file" and pattern.fullmatch(path):
            hits.append(path)
            if len(hits) > MAX_GLOB_MATCHES:
                raise UsageError(
                    f"{name}: matches more than {MAX_GLOB_MATCHES} objects (MAX_GLOB_MATCHES): narrow the pattern"
                )

    try:
        s3_listing(fs)(bucket, prefix, MAX_LISTED_OBJECTS + 1, visit)
    except PolybagError:
        raise
    except Exception as e:  # noqa: BLE001 - transport errors of any kind
        raise _listing_error(url, fs, bucket, e) from None
    if not hits:
        raise _no_match(url, fs, bucket)
    return [fs.unstrip_protocol(h) for h in sorted(hits)]


def _listing_error(url: str, fs: Any, bucket: str | None, e: Exception) -> PolybagError:
    """What a failed listing of ``url`` raises: no such bucket (a FileNotFoundError where the
    bucket is missing), else the transport error."""
    if isinstance(e, FileNotFoundError) and bucket is not None and bucket_exists(fs, bucket) is False:
        return PolybagError(f"{redact(url)}: cannot list: no such bucket {bucket}")
    return transport_error(url, "cannot list", e, fs)


def _no_match(url: str, fs: Any, bucket: str | None, dirs: bool = False) -> PolybagError:
    """What a listing of ``url`` that matched nothing raises: no such bucket, else a usage
    error saying no object matches."""
    if bucket is not None and bucket_exists(fs, bucket) is False:
        return PolybagError(f"{redact(url)}: cannot list: no such bucket {bucket}")
    return UsageError(f"no object matches {redact(url)}" + (" (a pattern ending in / matches folders)" if dirs else ""))


def expand_urls(targets: Iterable[Any], storage_options: dict[str, Any] | None = None) -> list[Any]:
    """``targets`` with each glob URL replaced by what it matches (:func:`expand_url`, in
    order); paths, plain URLs and anything else (a stream, a reader) as they are."""
    out: list[Any] = []
    for t in targets:
        if isinstance(t, str) and is_url(t) and has_glob(t):
            out.extend(expand_url(t, storage_options))
        else:
            out.append(t)
    return out


def open_url(url: str, storage_options: dict[str, Any] | None = None) -> RemoteSource:
    """A :class:`RemoteSource` for ``url`` with its first 16 and last 64 KiB fetched.

    Plain ``http(s)://`` URLs (without storage options other than ``headers``, ``timeout``,
    ``deadline``) are read by :class:`polybag.io.http_ranges.HttpRanges`; everything else
    through fsspec.  The open (size, first and last bytes) is one operation under the
    ``deadline``."""
    _timeout, deadline, _opts = limits(url, storage_options)
    until = time.monotonic() + deadline
    fast = transport_for(url, storage_options)
    if fast is not None:
        try:
            size = fast.open(until)
        except NoObjectError as e:
            fast.close()
            raise _no_object(url, storage_options, until, e) from None
        except BaseException:
            fast.close()
            raise
        src = RemoteSource(url, fast, url, size, deadline)
        src.requests += fast.requests  # the open's requests (HEAD; a GET of one byte when HEAD does not say)
    else:
        fs, fpath = fs_for(url, storage_options)
        # S3: the last bytes and the size in one GetObject, no HeadObject first (a missing
        # object is asked the HEAD way below, whose errors say what is missing)
        try:
            first = s3_ranged_get(fs, fpath, url, f"bytes=-{TAIL + BLOCK}", TAIL + BLOCK)
        except FileNotFoundError:
            first = None
        if first is not None:
            info, tail = first
            size = int(info["size"])
            check_size(url, size)
            src = RemoteSource(url, pinned(fs, fpath, info), fpath, size, deadline)
            try:
                src.preload(int(info["start"]), tail)
                src.fetch_edges(until)
            except BaseException:
                src.close()
                raise
            return src
        try:
            info = fs.info(fpath)
        except FileNotFoundError as e:
            raise _no_object(url, storage_options, until, not_found(url, e, fs, fpath)) from None
        except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
            raise transport_error(url, "cannot open", e, fs) from None
        if info.get("type") == "directory":
            no_log = PolybagError(f"{redact(url)}: is a directory, not a log file (a rosbag2 bag: end the URL with /)")
            raise _no_object(url, storage_options, until, no_log)
        size = info.get("size")
        if not isinstance(size, int) or size < 0:
            no_size = PolybagError(f"{redact(url)}: the server does not say how large the object is")
            raise _no_object(url, storage_options, until, no_size)
        check_size(url, size)
        src = RemoteSource(url, pinned(fs, fpath, info), fpath, size, deadline)
        src.requests += 1  # the open: fsspec's info (S3: one HeadObject)
    try:
        src.fetch_edges(until)
    except BaseException:
        src.close()
        raise
    return src


def download(url: str, dest: str, storage_options: dict[str, Any] | None = None) -> int:
    """Copy the whole object at ``url`` to the local file ``dest`` in PART-sized pieces
    (memory stays one piece, whatever the object's size); returns the bytes copied.  For
    what needs a local file (a rosbag2 sqlite3 storage file: SQLite reads files only).
    The copy is one operation under the ``deadline``."""
    _timeout, deadline, _opts = limits(url, storage_options)
    until = time.monotonic() + deadline
    fast = transport_for(url, storage_options)
    fs: Any = None
    fpath = url
    name = redact(url)
    try:
        if fast is not None:
            size = fast.open(until)
        else:
            fs, fpath = fs_for(url, storage_options)
            try:
                info = fs.info(fpath)
                size = int(info["size"])
            except FileNotFoundError as e:
                raise not_found(url, e, fs, fpath) from None
            except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
                raise transport_error(url, "cannot open", e, fs) from None
            check_size(url, size)
            fs = pinned(fs, fpath, info)
        buf = bytearray(min(PART, size))
        view = memoryview(buf)
        try:
            with open(dest, "wb") as out:
                for start in range(0, size, PART):
                    end = min(size, start + PART)
                    if fast is not None:

                        def into(s: int, e: int, o: int = start) -> memoryview:
                            return view[s - o : e - o]

                        fast.read_into(start, end, into, until)
                        out.write(view[: end - start])
                        continue
                    if time.monotonic() > until:
                        raise PolybagError(
                            f"{name}: the copy did not finish within the deadline of {deadline:g} s "
                            f"(storage_options={{'deadline': seconds}} or {DEADLINE_ENV} sets it)"
                        )
                    try:
                        data = fs.cat_file(fpath, start=start, end=end)
                    except PolybagError:
                        raise
                    except Exception as e:  # noqa: BLE001 - transport errors of any filesystem
                        raise transport_error(url, f"cannot read bytes {start}..{end}", e) from None
                    if len(data) != end - start:
                        raise PolybagError(f"{name}: asked for bytes {start}..{end}, got {len(data)} bytes")
                    out.write(data)
        except OSError as e:
            raise PolybagError(f"{dest}: cannot write a copy of {name}: {e.strerror or e}") from e
        return size
    finally:
        if fast is not None:
            fast.close()
