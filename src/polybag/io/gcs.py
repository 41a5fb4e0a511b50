"""``gs://bucket/object`` read without gcsfs: Google Cloud Storage's XML API over
:class:`polybag.io.http_ranges.HttpRanges`.

GCS serves every object at ``https://storage.googleapis.com/<bucket>/<object>`` (the XML
API): ``HEAD`` gives its size and ``GET`` with ``Range`` its bytes, so a ``gs://`` URL is read
by range requests like any ``https://`` URL, with no extra package.  When gcsfs *is*
installed it is used instead (through fsspec, as for any other URL scheme); listing (glob
URLs) and writing need it.

Where the requests go: ``storage_options={"endpoint_url": ...}``, else the environment
variable ``STORAGE_EMULATOR_HOST`` (as Google's client libraries honour it: ``host:port``
or a URL; an emulator such as fake-gcs-server), else ``https://storage.googleapis.com``.

Authentication: ``storage_options={"token": "<OAuth 2 access token>"}`` or the environment
variable ``GOOGLE_OAUTH_ACCESS_TOKEN`` is sent as ``Authorization: Bearer <token>``;
otherwise requests are anonymous (public buckets).  ``token="anon"`` forces anonymous.
Other credential kinds (service account files, application default credentials) need gcsfs.
The token goes to the endpoint's scheme, host and port only, never to where a redirect
points elsewhere (:mod:`polybag.io.redirects`).  ``timeout`` and ``deadline`` are polybag's
request and operation deadlines, as for ``http(s)://``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from polybag.errors import UsageError
from polybag.io.http_ranges import HttpRanges
from polybag.io.remote_limits import limits

#: the public endpoint of the XML API
ENDPOINT = "https://storage.googleapis.com"

#: the storage options this transport understands (others: gcsfs only)
OPTIONS = {"endpoint_url", "token", "headers", "timeout", "deadline"}


def have_gcsfs() -> bool:
    """Whether gcsfs can be imported (then fsspec reads ``gs://`` through it)."""
    try:
        import gcsfs  # type: ignore[import-not-found,unused-ignore]  # noqa: F401 - optional, ships no type hints
    except ImportError:
        return False
    return True


def is_gcs_url(url: str) -> bool:
    """A ``gs://`` (or ``gcs://``) URL."""
    return url.lower().startswith(("gs://", "gcs://"))


def endpoint(storage_options: dict[str, Any] | None = None) -> str:
    """Where the XML API requests go (see the module notes), without a trailing ``/``."""
    given = (storage_options or {}).get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST") or ENDPOINT
    given = str(given).rstrip("/")
    if "://" not in given:
        given = "http://" + given  # the emulator convention: host:port, plain HTTP
    return given


def http_url(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """The XML API URL of the object ``gs://bucket/object``: everything after the bucket is
    the object's name (``?`` and ``#`` included, as GCS allows them), quoted."""
    rest = url.split("://", 1)[1]
    bucket, _, name = rest.partition("/")
    if not bucket or not name:
        raise UsageError(f"{url}: a gs:// URL names a bucket and an object (gs://bucket/path/to/object)")
    return f"{endpoint(storage_options)}/{quote(bucket, safe='')}/{quote(name, safe='/')}"


def headers(url: str, storage_options: dict[str, Any] | None = None) -> dict[str, str]:
    """The request headers: ``storage_options["headers"]`` and the bearer token, if any."""
    opts = storage_options or {}
    out = dict(opts.get("headers") or {})
    token = opts.get("token", os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN"))
    if token in (None, "", "anon", False):
        return out
    if not isinstance(token, str):
        raise UsageError(
            f"{url}: token must be an OAuth 2 access token string without gcsfs "
            "(service accounts and other credentials need gcsfs: pip install gcsfs)"
        )
    out["Authorization"] = f"Bearer {token}"
    return out


def no_listing(url: str) -> UsageError:
    """The error of a glob ``gs://`` URL without gcsfs."""
    return UsageError(
        f"{url}: listing gs:// URLs (a glob) needs gcsfs (pip install gcsfs); without it name each object"
    )


def gcs_transport(url: str, storage_options: dict[str, Any] | None) -> HttpRanges | None:
    """An :class:`~polybag.io.http_ranges.HttpRanges` reading the ``gs://`` ``url`` through the XML
    API, or None when gcsfs is installed (then fsspec and gcsfs read it)."""
    if have_gcsfs():
        return None
    unknown = set(storage_options or {}) - OPTIONS
    if unknown:
        raise UsageError(
            f"{url}: storage option(s) {', '.join(sorted(unknown))} need gcsfs (pip install gcsfs); "
            f"without it gs:// takes {', '.join(sorted(OPTIONS))}"
        )
    timeout, deadline, _rest = limits(url, storage_options)
    return HttpRanges(
        url, headers(url, storage_options), target=http_url(url, storage_options), timeout=timeout, deadline=deadline
    )
