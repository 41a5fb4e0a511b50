"""URLs of any fsspec filesystem (gs:// goes this way once gcsfs is installed; without it,
through GCS's XML API: tests/remote/test_gcs_xml.py)."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

import polybag
from polybag.errors import UsageError
from polybag.io.remote_source import RemoteSource


def test_a_registered_fsspec_filesystem_is_read_by_ranges(remote_dir: Path) -> None:
    """memory:// stands for any filesystem fsspec knows (gcsfs registers gs:// the same way)."""
    fs = fsspec.filesystem("memory")
    data = (remote_dir / "mid.mcap").read_bytes()
    fs.pipe_file("/logs/mid.mcap", data)
    try:
        with polybag.open("memory://logs/mid.mcap") as r, polybag.open(str(remote_dir / "mid.mcap")) as local:
            assert isinstance(r.source, RemoteSource)
            assert r.summary.message_count == local.summary.message_count == 165
            stats = r.source.stats
            assert stats is not None and stats["bytes_fetched"] < len(data)  # the summary only
            got = [(m.log_time, bytes(m.data)) for m in r.messages()]
            assert got == [(m.log_time, bytes(m.data)) for m in local.messages()]
    finally:
        fs.rm("/logs", recursive=True)


def test_gs_without_gcsfs_says_what_needs_it() -> None:
    """Without gcsfs, gs:// is read through the XML API (tests/remote/test_gcs_xml.py);
    listing (a glob) and writing name gcsfs."""
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - gcsfs installed: the message is not shown
        pytest.skip("gcsfs is installed")
    from polybag.io.remote import expand_url

    with pytest.raises(UsageError, match=r"gs://bucket/\*.mcap: listing gs:// URLs .*needs gcsfs"):
        expand_url("gs://bucket/*.mcap")
    with pytest.raises(UsageError, match=r"gs://bucket/x.mcap: writing gs:// URLs needs gcsfs"):
        polybag.Writer("gs://bucket/x.mcap")
