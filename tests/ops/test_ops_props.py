"""Property tests: random logs survive convert round trips; damaged input only raises polybag errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polybag
from ops_helpers import CORPORA, rows
from polybag import ops

TYPES = [
    ("std_msgs/String", "string data\n"),
    ("std_msgs/Int32", "int32 data\n"),
    ("pkg/Custom", "uint8[] blob\nfloat64 x\n"),
]

message = st.tuples(
    st.integers(0, 4),  # channel index
    st.integers(0, 2**32 - 1).map(lambda s: s * 10**9) | st.integers(0, 4 * 10**9),  # log time
    st.binary(max_size=300),
)


@st.composite
def logs(draw):  # type: ignore[no-untyped-def]
    n_ch = draw(st.integers(1, 5))
    chans = []
    for i in range(n_ch):
        t = draw(st.sampled_from(TYPES))
        md = {"callerid": f"/n{i}"} if draw(st.booleans()) else {}
        if draw(st.booleans()):
            md["latching"] = "1"
        chans.append((draw(st.sampled_from(["/a", "/b", f"/c{i}"])), t, md))
    msgs = draw(st.lists(message, max_size=60))
    return chans, [(c % n_ch, t, d) for c, t, d in msgs]


def _write(path: Path, log, **opts) -> None:  # type: ignore[no-untyped-def]
    chans, msgs = log
    with polybag.Writer(str(path), **opts) as w:
        out = []
        for topic, (tname, text), md in chans:
            s = w.add_schema(tname, "ros1msg", text.encode())
            out.append(w.add_channel(topic, "ros1", s, md))
        for c, t, d in msgs:
            w.write(out[c], d, log_time=t, publish_time=t)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    log=logs(),
    first=st.sampled_from([".bag", ".mcap"]),
    comp=st.sampled_from([None, "none", "lz4"]),
    chunk=st.sampled_from([None, 64, 4096]),
)
def test_round_trip_random_logs(tmp_path_factory: pytest.TempPathFactory, log, first, comp, chunk) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("rt")
    src = d / f"src{first}"
    _write(src, log)
    second = ".mcap" if first == ".bag" else ".bag"
    mid = d / f"mid{second}"
    back = d / f"back{first}"
    ops.convert(src, mid, compression=comp, chunk_size=chunk)
    ops.convert(mid, back, compression=comp, chunk_size=chunk)
    want = rows(src)
    assert len(want) == len(log[1])
    assert rows(mid) == want
    assert rows(back) == want
    # sort and a full-window filter agree with the brute-force answer too
    ops.sort(src, d / f"sorted{second}")
    assert rows(d / f"sorted{second}") == sorted(want, key=lambda r: r[1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    which=st.sampled_from(["bag", "mcap"]),
)
def test_damaged_input_only_polybag_errors(tmp_path_factory: pytest.TempPathFactory, data, which) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("dmg")
    base = CORPORA / "rosbag" / "frost" / "decompressed.bag"
    src = d / f"src.{which}"
    if which == "bag":
        raw = bytearray(base.read_bytes())
    else:
        ops.convert(base, src, chunk_size=2048)
        raw = bytearray(src.read_bytes())
    # flip some bytes and maybe cut
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(len(raw) // 2, len(raw)))
    src.write_bytes(bytes(raw[:cut]))
    for op in ("convert", "recover", "filter", "sort"):
        out = d / f"out_{op}.mcap"
        try:
            if op == "filter":
                ops.filter(src, out, start="+1s")
            else:
                getattr(ops, op)(src, out)
        except polybag.PolybagError:
            pass
        assert not os.path.exists(str(out) + ".active")
    # recover either refuses with a polybag error (e.g. the magic is gone) or verifies its output
    try:
        res = ops.recover(src, d / "rec.mcap")
    except polybag.PolybagError:
        assert not (d / "rec.mcap.active").exists()
        return
    assert res.verified and res.messages == len(rows(d / "rec.mcap"))
