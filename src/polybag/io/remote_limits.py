"""The limits of every remote read: the deadline of one request and of one operation (an
open, a ``need``, a download), how long one receive may wait, how many redirects are
followed, how large an object may be; :func:`limits` reads the deadlines from a URL's
storage options or the environment."""

from __future__ import annotations

import math
import os
from typing import Any

from polybag.errors import UsageError
from polybag.io.redaction import clean, redact

#: how many redirects are followed
MAX_REDIRECTS = 5
#: the overall deadline of one request (connection, redirects, headers and body), seconds
TIMEOUT = 120.0
#: the overall deadline of one operation of :mod:`polybag.io.remote` (an open, one read), seconds
DEADLINE = 3600.0
#: the longest a single receive (or the connection) waits, seconds
RECV_TIMEOUT = 60.0
#: the environment variables that set :data:`TIMEOUT` and :data:`DEADLINE`
TIMEOUT_ENV = "POLYBAG_HTTP_TIMEOUT"
DEADLINE_ENV = "POLYBAG_REMOTE_DEADLINE"
#: the largest object polybag reads (its block map and sparse cache are sized from it)
MAX_OBJECT_BYTES = 1 << 40


def _seconds(value: Any, what: str, url: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise UsageError(f"{redact(url)}: {what} must be a positive number of seconds, not {clean(repr(value), 40)}")
    return v


def limits(url: str, storage_options: dict[str, Any] | None) -> tuple[float, float, dict[str, Any]]:
    """``(timeout, deadline, the other storage options)``: the request deadline and the
    operation deadline from ``storage_options`` (``timeout``, ``deadline``), else the
    environment (:data:`TIMEOUT_ENV`, :data:`DEADLINE_ENV`), else the defaults."""
    opts = dict(storage_options or {})
    t = opts.pop("timeout", None)
    d = opts.pop("deadline", None)
    if t is None:
        t = os.environ.get(TIMEOUT_ENV) or TIMEOUT
        tw = f"{TIMEOUT_ENV}"
    else:
        tw = "storage option timeout"
    if d is None:
        d = os.environ.get(DEADLINE_ENV) or DEADLINE
        dw = f"{DEADLINE_ENV}"
    else:
        dw = "storage option deadline"
    return _seconds(t, tw, url), _seconds(d, dw, url), opts
