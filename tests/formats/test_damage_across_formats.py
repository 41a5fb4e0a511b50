"""Damage cases found by cross-checking the formats: each must give a polybag error
(strict) or be recovered (recover=True)."""

from __future__ import annotations

import pytest

import polybag
from polybag.writer import Writer


def _mcap(tmp_path):
    path = tmp_path / "t.mcap"
    with Writer(path, chunk_size=200) as w:
        s = w.add_schema("x/Y", "ros1msg", b"int32 a")
        c = w.add_channel("/a", "ros1", s)
        for i in range(20):
            w.write(c, i.to_bytes(4, "little"), i, i, i)
    return path.read_bytes()


@pytest.mark.parametrize("pos", range(17, 30))
def test_mcap_damaged_header_fields_recovered(tmp_path, pos):
    """Bytes 17.. are the Header record's profile/library strings."""
    data = bytearray(_mcap(tmp_path))
    data[pos] ^= 0xFF
    with pytest.raises(polybag.FormatError, match="Header"):
        list(polybag.open(bytes(data)).messages())
    r = polybag.open(bytes(data), recover=True)
    got = [int.from_bytes(m.data, "little") for m in r.messages(order="file")]
    assert got == list(range(20))
    assert r.recovery_report is not None
    assert any("Header" in e for e in r.recovery_report["errors"])


def test_bag_cut_right_after_its_header_is_truncated(tmp_path):
    path = tmp_path / "t.bag"
    with Writer(path) as w:
        s = w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data")
        c = w.add_channel("/a", "ros1", s)
        for i in range(20):
            w.write(c, i.to_bytes(4, "little"), 10**9 + i)
    data = path.read_bytes()
    cut = data[: 13 + 4096]  # magic and the 4096-byte bag header record
    with pytest.raises(polybag.TruncatedError, match="index"):
        list(polybag.open(cut).messages())
    r = polybag.open(cut, recover=True)
    assert list(r.messages()) == []


@pytest.mark.parametrize("suffix", ["mcap", "bag", "ulg"])
def test_unknown_order_is_a_usage_error(tmp_path, suffix):
    from polybag.errors import UsageError

    src = {"mcap": "samples/demo.mcap"}.get(suffix)
    if suffix == "mcap":
        path = src
    elif suffix == "bag":
        path = tmp_path / "t.bag"
        with Writer(path) as w:
            c = w.add_channel("/a", "ros1", w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data"))
            w.write(c, b"\0\0\0\0", 1)
    else:
        from tests.conftest import CORPORA

        path = CORPORA / "ulog" / "sample.ulg"
    with polybag.open(path) as r, pytest.raises(UsageError, match="order"):
        next(r.messages(order="sideways"))


@pytest.mark.parametrize("suffix", ["bag", "mcap"])
def test_foreign_channel_is_refused(tmp_path, suffix):
    with Writer(tmp_path / f"other.{suffix}") as other:
        foreign = other.add_channel("/x", "ros1", other.add_schema("std_msgs/Int32", "ros1msg", b"int32 data"))
    with Writer(tmp_path / f"t.{suffix}") as w, pytest.raises(polybag.WriteError):
        w.write(foreign, b"\0\0\0\0", 1)
