"""Which transport reads a URL, by its scheme (as fsspec's ``known_implementations``).

polybag has its own ranged transports for a few schemes: ``http(s)://`` is read by
:func:`polybag.io.http_ranges.http_transport` (keep-alive ``http.client`` connections, multi-range
requests), ``gs://`` (``gcs://``) without gcsfs by :func:`polybag.io.gcs.gcs_transport` (GCS's
XML API over the same client).  A transport answers None when it does not take the URL as
given (storage options only fsspec understands, gcsfs installed): then, as for every other
scheme (``s3://``, ``memory://``, ``az://``...), fsspec reads it
(:func:`polybag.io.remote.open_url`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polybag.io.gcs import gcs_transport
from polybag.io.http_ranges import HttpRanges, http_transport

#: ``transport(url, storage_options) -> HttpRanges | None`` (None: fsspec reads the URL)
Transport = Callable[[str, "dict[str, Any] | None"], "HttpRanges | None"]

#: URL scheme (lower case) -> the transport of its URLs; schemes not here go to fsspec
TRANSPORTS: dict[str, Transport] = {
    "http": http_transport,
    "https": http_transport,
    "gs": gcs_transport,
    "gcs": gcs_transport,
}


def scheme(url: str) -> str:
    """The scheme of ``url``, lower case (``""`` for a string without ``://``)."""
    head, sep, _rest = url.partition("://")
    return head.lower() if sep else ""


def register_transport(name: str, transport: Transport) -> None:
    """Read URLs of the scheme ``name`` with ``transport`` (replacing what read them)."""
    TRANSPORTS[name.lower()] = transport


def transport_for(url: str, storage_options: dict[str, Any] | None) -> HttpRanges | None:
    """polybag's own transport of ``url`` (see the module notes), or None: fsspec reads it."""
    transport = TRANSPORTS.get(scheme(url))
    return None if transport is None else transport(url, storage_options)
