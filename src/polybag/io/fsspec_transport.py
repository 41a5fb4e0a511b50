"""Objects read through fsspec (every scheme polybag has no transport of its own for):
the filesystem of a URL (:func:`fs_for`; over ``http(s)://`` with polybag's redirect rules
added to aiohttp's, :func:`guarded_options`), S3 reads pinned to the version that was opened
(:class:`S3Pinned`), and a transport's exception as a
:class:`~polybag.errors.PolybagError` naming the URL without its secrets
(:func:`transport_error`, :func:`not_found`).

S3 (s3fs) is given few attempts per request (:func:`s3_defaults`: an endpoint typo fails in
about a second, not after botocore's five attempts with back-off), and its errors say which
endpoint was asked and where the credentials came from (:func:`s3_context`; never a key or
secret).  A missing object on a store with buckets says whether the bucket or the key is
missing (:func:`not_found`)."""

from __future__ import annotations

import os
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


#: URL schemes read by s3fs
S3_SCHEMES = ("s3", "s3a")
#: botocore's attempts per S3 request (its own default, 5 with exponential back-off, made an
#: endpoint typo or a refused connection take 8-16 s before the error); throttling
#: (SlowDown) and timeouts are still retried by s3fs itself
S3_ATTEMPTS = 2
#: URL schemes whose first path component is a bucket
BUCKET_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"})


def _scheme(url: str) -> str:
    head, sep, _rest = url.partition("://")
    return head.lower() if sep else ""


def s3_defaults(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` of an ``s3://`` URL with botocore's retries bounded to :data:`S3_ATTEMPTS`
    (``config_kwargs={"retries": ...}``), unless the caller set retries (in
    ``config_kwargs``, or ``AWS_MAX_ATTEMPTS``/``AWS_RETRY_MODE`` in the environment)."""
    if _scheme(url) not in S3_SCHEMES or "AWS_MAX_ATTEMPTS" in os.environ or "AWS_RETRY_MODE" in os.environ:
        return opts
    ck = opts.get("config_kwargs")
    if ck is None:
        ck = {}
    if not isinstance(ck, dict) or "retries" in ck:
        return opts
    return {**opts, "config_kwargs": {**ck, "retries": {"mode": "standard", "total_max_attempts": S3_ATTEMPTS}}}


def fs_for(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` and the object's path in it (polybag's own options
    taken out; over ``http(s)://`` with polybag's redirect rules; S3 with bounded retries)."""
    _timeout, _deadline, opts = limits(url, storage_options)  # polybag's own options stay here
    opts = s3_defaults(url, opts)
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


def _credential_source(fs: Any, method: str | None) -> str:
    """Where botocore took the credentials from (its provider's ``method``), in words."""
    if getattr(fs, "anon", False):
        return "no credentials (anonymous: anon=True)"
    profile = getattr(fs, "kwargs", {}).get("profile") or os.environ.get("AWS_PROFILE") or "default"
    words = {
        "explicit": "key/secret given to s3fs (storage options key/secret, or FSSPEC_S3_KEY/FSSPEC_S3_SECRET)",
        "env": "the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)",
        "shared-credentials-file": f"profile {profile} of the shared credentials file (~/.aws/credentials)",
        "config-file": f"profile {profile} of the AWS config file (~/.aws/config)",
        "iam-role": "the instance's IAM role",
        "container-role": "the container's role",
        "assume-role": f"an assumed role (profile {profile})",
        "sso": f"AWS SSO (profile {profile})",
    }
    if method is None:
        return "none found (no AWS_ACCESS_KEY_ID, profile or storage options key/secret)"
    return words.get(method, f"botocore's {method} provider")


def _endpoint_source(fs: Any, endpoint: str) -> str:
    """Where the S3 endpoint was set (fsspec's or AWS's environment, storage options)."""
    for var in ("FSSPEC_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(var, "").rstrip("/") == endpoint.rstrip("/"):
            return var
    kw = getattr(fs, "client_kwargs", None) or {}
    if isinstance(kw, dict) and kw.get("endpoint_url") or getattr(fs, "endpoint_url", None):
        return "the storage options"
    return "AWS's default for the region"


def s3_context(fs: Any) -> str | None:
    """``endpoint URL (from where); credentials from where`` of an s3fs filesystem (None for
    other filesystems): what a refused request or a failed connection depends on.  Never a
    key, a secret or a token."""
    if type(fs).__name__ != "S3FileSystem":
        return None
    client = getattr(fs, "_s3", None)
    meta = getattr(client, "meta", None)
    endpoint = getattr(meta, "endpoint_url", None)
    if not isinstance(endpoint, str):
        kw = getattr(fs, "client_kwargs", None) or {}
        endpoint = (kw.get("endpoint_url") if isinstance(kw, dict) else None) or getattr(fs, "endpoint_url", None)
    creds = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    method = getattr(creds, "method", None) if creds is not None else None
    if client is None:
        source = "not resolved yet"
    else:
        source = _credential_source(fs, method if isinstance(method, str) else None)
    where = f"endpoint {redact(endpoint)} from {_endpoint_source(fs, endpoint)}" if isinstance(endpoint, str) else "endpoint unknown"
    return f"{where}; credentials: {source}"


def _connection_failure(e: BaseException) -> bool:
    """Whether ``e`` is a failure to reach the server (refused, unknown host, timeout)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        name = type(e).__name__
        if isinstance(e, (ConnectionError, TimeoutError)) or "Connect" in name or "Timeout" in name:
            return True
        if "Could not connect to the endpoint" in str(e):
            return True
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False


def transport_error(url: str, what: str, e: BaseException, fs: Any = None) -> PolybagError:
    """A transport's exception as a PolybagError naming ``url`` (no secrets, no raw text); a
    refused redirect (fsspec's HTTP filesystem) as a :class:`RedirectRefused`.  With ``fs``
    (s3fs): a refusal (403) or a failed connection also names the endpoint and where the
    credentials came from (:func:`s3_context`)."""
    reason = refused_redirect(e)
    if reason is not None:
        return RedirectRefused(f"{redact(url)}: {what}: {scrub(reason, secrets_of(url))}")
    text = f"{redact(url)}: {what}: {scrub(f'{type(e).__name__}: {e}', secrets_of(url))}"
    context = s3_context(fs) if fs is not None else None
    if context is not None:
        if isinstance(e, PermissionError) or "Forbidden" in str(e) or "AccessDenied" in str(e):
            text += f" (the server refused the credentials, or they may not read this; {context})"
        elif _connection_failure(e):
            text += f" (no connection to the S3 server after {S3_ATTEMPTS} attempts; {context})"
    return PolybagError(text)


def _bucket_missing(e: BaseException) -> bool:
    """Whether a FileNotFoundError (or what caused it) says the bucket does not exist."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if "NoSuchBucket" in type(e).__name__ or "NoSuchBucket" in str(e) or "bucket does not exist" in str(e):
            return True
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False


def bucket_and_key(url: str, fs: Any, fpath: str) -> tuple[str, str] | None:
    """``(bucket, key)`` of a URL of a store with buckets (s3://, gs://, az://...), else None."""
    if _scheme(url) not in BUCKET_SCHEMES:
        return None
    bucket, _sep, key = fpath.strip("/").partition("/")
    return bucket, key


def bucket_exists(fs: Any, bucket: str) -> bool | None:
    """Whether ``bucket`` exists (one request: S3's HeadBucket through ``fs.exists``); None
    when the answer is no answer (refused, no connection)."""
    try:
        fs.info(bucket)  # (s3fs's exists() says False for a bucket it may not see, too)
        return True
    except FileNotFoundError:
        return False
    except Exception:  # noqa: BLE001 - any transport error (refused, no connection): unknown
        return None


def not_found(url: str, e: FileNotFoundError, fs: Any = None, fpath: str | None = None) -> PolybagError:
    """fsspec's FileNotFoundError: no such object, or (over HTTP, where fsspec turns every
    failure of its size request into one) a refused redirect.  On a store with buckets (and
    ``fs``, ``fpath`` given) it says which is missing: ``no such bucket B``, or ``no such
    object (no such key K in bucket B)`` (a HeadBucket request when the error does not say)."""
    if refused_redirect(e) is not None:
        return transport_error(url, "cannot open", e)
    parts = bucket_and_key(url, fs, fpath) if fs is not None and fpath is not None else None
    if parts is not None and parts[0]:
        bucket, key = parts
        missing = _bucket_missing(e) or bucket_exists(fs, bucket) is False
        if missing:
            return PolybagError(f"{redact(url)}: cannot open: no such bucket {bucket}")
        if key:
            return PolybagError(f"{redact(url)}: cannot open: no such object (no such key {key} in bucket {bucket})")
    return PolybagError(f"{redact(url)}: cannot open: no such object")


def check_size(url: str, size: int) -> None:
    """A size over :data:`~polybag.io.remote_limits.MAX_OBJECT_BYTES` is an error."""
    if size > MAX_OBJECT_BYTES:
        raise PolybagError(
            f"{redact(url)}: the server says the object is {size} bytes, more than polybag reads "
            f"({MAX_OBJECT_BYTES} bytes)"
        )


async def read_body(body: Any, most: int) -> bytes:
    """At most ``most`` bytes of an S3 answer's streaming ``body`` (closed after)."""
    parts: list[bytes] = []
    got = 0
    try:
        while got < most:
            piece = await body.read(most - got)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
    finally:
        body.close()
    return b"".join(parts)


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
        data = await read_body(resp["Body"], end - start + 1)  # one more than asked: a longer answer is caught
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
    if _is_s3(fs):
        return S3Pinned(fs, info, fs.unstrip_protocol(fpath) if hasattr(fs, "unstrip_protocol") else fpath)
    return fs


def _is_s3(fs: Any) -> bool:
    return type(fs).__name__ == "S3FileSystem" and hasattr(fs, "_call_s3") and hasattr(fs, "split_path")


def _content_range(text: Any) -> tuple[int, int, int] | None:
    """``(first, last, total)`` of a ``Content-Range: bytes first-last/total`` answer (None:
    absent, or not of that form)."""
    if not isinstance(text, str):
        return None
    unit, _sp, rest = text.strip().partition(" ")
    span, sep, total = rest.partition("/")
    first, dash, last = span.partition("-")
    if unit != "bytes" or not sep or not dash or not (first.isdigit() and last.isdigit() and total.isdigit()):
        return None
    a, b, n = int(first), int(last), int(total)
    return (a, b, n) if a <= b < n else None


def s3_ranged_get(fs: Any, fpath: str, url: str, range_header: str, most: int) -> tuple[dict[str, Any], bytes] | None:
    """One S3 ``GetObject`` of ``range_header`` (``bytes=-N``: the last N bytes; ``bytes=0-M``:
    the first) instead of a ``HeadObject`` and then a read: ``(info, data)`` where ``info``
    has what a HEAD gives (``size`` from ``Content-Range``, ``ETag``, ``VersionId``), and
    ``data`` the bytes (at most ``most``) from ``info["start"]``.  None when ``fs`` is no s3fs filesystem, or for an
    answer that does not say the object's size (an empty object: 416, or no Content-Range):
    the caller asks the HEAD way.  A missing object raises the FileNotFoundError of s3fs
    (the caller turns it into its message); other failures as :func:`transport_error`."""
    if not _is_s3(fs):
        return None
    from fsspec.asyn import sync

    bucket, key, version = fs.split_path(fpath)
    if not key:
        return None  # a bucket: the HEAD way says what it is

    async def get() -> tuple[dict[str, Any], bytes] | None:
        kw: dict[str, Any] = {"VersionId": version} if version else {}
        try:
            resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=range_header, **kw)
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001 - an empty object answers 416 InvalidRange
            text = f"{type(e).__name__}: {e}"
            if "InvalidRange" in text or "416" in text or "not satisfiable" in text:
                return None
            raise
        body = resp["Body"]
        span = _content_range(resp.get("ContentRange"))
        if span is None or span[1] - span[0] + 1 > most:
            body.close()
            if span is None:
                return None
            raise PolybagError(f"{redact(url)}: asked for at most {most} bytes, the answer says {span}")
        first, last, total = span
        data = await read_body(body, last - first + 2)  # one more than can be right: a longer answer is caught
        if len(data) != last - first + 1:
            raise PolybagError(
                f"{redact(url)}: the answer says bytes {first}..{last + 1}, its body has {len(data)} bytes"
            )
        info = {"size": total, "start": first, "ETag": resp.get("ETag"), "VersionId": resp.get("VersionId"), "type": "file"}
        return info, data

    try:
        return sync(fs.loop, get)  # type: ignore[no-any-return]
    except FileNotFoundError:
        raise
    except PolybagError:
        raise
    except Exception as e:  # noqa: BLE001 - s3fs/botocore errors of any kind
        raise transport_error(url, "cannot open", e, fs) from None



def s3_listing(fs: Any) -> Any:
    """For an s3fs filesystem, ``walk(bucket, prefix, most, visit)``: calls ``visit(info)``
    for each object under ``prefix`` (no delimiter: every level), listed a page at a time
    (s3fs's ``_iterdir``), at most ``most`` of them; ``visit`` raising stops the listing.
    None for other filesystems."""
    if not _is_s3(fs) or not hasattr(fs, "_iterdir"):
        return None

    def walk(bucket: str, prefix: str, most: int, visit: Any) -> None:
        from fsspec.asyn import sync

        async def all_of() -> None:
            # (no max_items: s3fs asks MaxKeys=2*max_items, which some servers refuse; the
            # count is ours, and the pages are the server's, at most 1000 keys each)
            pages: Any = fs._iterdir(bucket, delimiter="", prefix=prefix)
            seen = 0
            try:
                async for info in pages:
                    seen += 1
                    if seen > most:
                        return
                    visit(info)
            finally:
                await pages.aclose()

        sync(fs.loop, all_of)

    return walk
