"""The transport registry by URL scheme (polybag.io.transports), as fsspec's
``known_implementations``: polybag's own ranged transports, else fsspec."""

from __future__ import annotations

import pytest

from polybag.io import transports
from polybag.io.gcs import have_gcsfs
from polybag.io.http_ranges import HttpRanges
from polybag.io.transports import TRANSPORTS, register_transport, scheme, transport_for


def test_schemes_and_their_transports() -> None:
    assert {"http", "https", "gs", "gcs"} <= set(TRANSPORTS)
    assert scheme("HTTPS://h/x") == "https"
    assert scheme("/local/path") == ""
    assert isinstance(transport_for("http://h/x.bag", None), HttpRanges)
    assert transport_for("http://h/x.bag", {"client_kwargs": {}}) is None  # fsspec's option: fsspec
    assert transport_for("s3://b/x.bag", None) is None  # not registered: fsspec
    assert transport_for("memory://x.bag", None) is None


@pytest.mark.skipif(have_gcsfs(), reason="gcsfs installed: gs:// goes through fsspec")
def test_gs_without_gcsfs_is_the_xml_api() -> None:
    t = transport_for("gs://bucket/run.mcap", None)
    assert isinstance(t, HttpRanges)
    t.close()


def test_a_registered_scheme_is_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transports, "TRANSPORTS", dict(TRANSPORTS))
    seen: list[str] = []

    def mine(url: str, storage_options: object) -> None:
        seen.append(url)

    register_transport("Mine", mine)
    assert transports.transport_for("mine://x", None) is None
    assert seen == ["mine://x"]
