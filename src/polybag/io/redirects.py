"""Which redirects polybag follows, over :mod:`http.client` (:func:`redirect_target`, used by
:class:`~polybag.io.http_ranges.HttpRanges`) and through fsspec's HTTP filesystem (aiohttp:
:func:`aiohttp_guard`).

At most :data:`~polybag.io.remote_limits.MAX_REDIRECTS`, only to ``http(s)://``, never from
``https`` to ``http``; the caller's headers (``Authorization``, the ``gs://`` bearer token,
``storage_options["headers"]``) go only to the URL's scheme, host and port.  A redirect
polybag does not follow is a :class:`RedirectRefused`."""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urljoin, urlsplit

from polybag.errors import PolybagError
from polybag.io.redaction import clean, redact
from polybag.io.remote_limits import MAX_REDIRECTS


class RedirectRefused(PolybagError):
    """A redirect polybag does not follow: from https to http, off the URL's scheme, host or
    port with the caller's headers, to a URL that is not http(s), or one too many."""


def redirect_target(url: str, location: str) -> tuple[str, str | None]:
    """``(where a redirect from url to location leads, why polybag does not follow it)``;
    the reason is None when it follows it (the caller decides whether its headers go along)."""
    try:
        nxt = urljoin(url, location.strip())
        nparts = urlsplit(nxt)
        _ = nparts.port
    except ValueError:
        return "", "a redirect to a malformed URL"
    if nparts.scheme not in ("http", "https") or not nparts.hostname:
        return nxt, f"a redirect to a URL that is not http(s): {redact(nxt)}"
    if urlsplit(url).scheme == "https" and nparts.scheme == "http":
        return nxt, f"refused a redirect from https to http ({redact(nxt)})"
    return nxt, None


# --- the same rules for fsspec's HTTP filesystem (aiohttp) ----------------------------------------
class _Refused(Exception):
    """Raised inside aiohttp by the hook of :func:`aiohttp_guard`: the reason a redirect is
    not followed (no URL of the caller's: :func:`polybag.io.fsspec_transport.transport_error` adds
    it, redacted)."""


#: request headers that are no credentials of the caller's (fsspec adds them), or that aiohttp
#: itself removes on a redirect to another origin; any other header (``X-Api-Key``, ...) is one
_NOT_CARRIED = frozenset({"range", "accept-encoding", "authorization", "cookie", "proxy-authorization"})
_GUARD: Any = None
_GUARD_LOCK = threading.Lock()


def _yarl_origin(url: Any) -> tuple[str, str, int | None]:
    return url.scheme.lower(), (url.host or "").lower(), url.port


async def _on_request_start(session: Any, ctx: Any, params: Any) -> None:
    ctx.pb_origin = _yarl_origin(params.url)
    ctx.pb_hops = 0


async def _on_request_redirect(session: Any, ctx: Any, params: Any) -> None:
    """Before aiohttp follows a redirect (``params.response``): raising here ends the request
    with nothing sent to where it points."""
    from yarl import URL

    ctx.pb_hops = getattr(ctx, "pb_hops", 0) + 1
    if ctx.pb_hops > MAX_REDIRECTS:
        raise _Refused(f"more than {MAX_REDIRECTS} redirects")
    here = params.url
    origin = getattr(ctx, "pb_origin", None) or _yarl_origin(here)
    loc = params.response.headers.get("Location") or params.response.headers.get("URI")
    if loc is None:
        return  # not followed
    try:  # parsed as aiohttp parses it
        nxt = URL(loc, encoded=not getattr(session, "requote_redirect_url", True))
        if not nxt.scheme or (nxt.scheme == here.scheme and nxt.host is None):
            nxt = here.join(nxt)
    except ValueError:
        raise _Refused("a redirect to a malformed URL") from None
    shown = clean(redact(str(nxt)), 200)
    if nxt.scheme.lower() not in ("http", "https"):
        raise _Refused(f"a redirect to a URL that is not http(s): {shown}")
    if here.scheme.lower() == "https" and nxt.scheme.lower() == "http":
        raise _Refused(f"refused a redirect from https to http ({shown})")
    if nxt.host is None:
        raise _Refused(f"a redirect to a URL without a host ({shown})")
    if _yarl_origin(nxt) != origin:
        carried = sorted({k.lower() for k in params.headers} - _NOT_CARRIED)
        if carried:
            raise _Refused(
                f"refused a redirect to another scheme, host or port ({shown}): the request carries the "
                f"caller's headers ({', '.join(clean(k, 40) for k in carried)}), which go only to the URL's origin"
            )


def aiohttp_guard() -> Any:
    """An :class:`aiohttp.TraceConfig` giving requests through fsspec's HTTP filesystem the
    redirect rules of :class:`~polybag.io.http_ranges.HttpRanges`: https never to http, only
    http(s), at most :data:`~polybag.io.remote_limits.MAX_REDIRECTS`; a redirect off the URL's
    scheme, host or port is refused when the request carries caller headers other than those
    aiohttp drops there itself (``Authorization``, ``Cookie``).  One shared instance (fsspec
    caches filesystems by their options)."""
    global _GUARD
    with _GUARD_LOCK:
        if _GUARD is None:
            import aiohttp

            guard = aiohttp.TraceConfig()
            guard.on_request_start.append(_on_request_start)
            guard.on_request_redirect.append(_on_request_redirect)
            _GUARD = guard
        return _GUARD


def refused_redirect(e: BaseException | None) -> str | None:
    """Why a redirect was refused, when ``e`` (or what it was raised from) is such a
    refusal by :func:`aiohttp_guard`; else None."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, _Refused):
            return str(e)
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None
