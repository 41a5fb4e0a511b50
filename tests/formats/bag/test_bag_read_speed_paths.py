"""The bag reader's bulk payload positions (``ChunkReader._payloads``: each record's header
and data lengths read as little-endian u32s through one view with an item at every byte)
give the payloads rosbags reads, and a length that points past the chunk is a
FormatError, never an IndexError or a wrong slice."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rosbags.rosbag1 import Reader as PeerReader

import polybag
from polybag.errors import FormatError

messages_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 10**12), st.binary(max_size=700)), min_size=1, max_size=80
)


def _write(path: Path, msgs: list[tuple[int, int, bytes]], compression: str, chunk_size: int) -> None:
    with polybag.Writer(str(path), format="bag", compression=compression, chunk_size=chunk_size, overwrite=True) as w:
        schema = w.add_schema("std_msgs/String", "ros1msg", "string data\n")
        chans = [w.add_channel(f"/t{i}", "ros1", schema) for i in range(3)]
        for k, t, data in msgs:
            w.write(chans[k], data, t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=messages_strategy, compression=st.sampled_from(["none", "lz4"]), chunk_size=st.sampled_from([1, 900, 1 << 16]))
def test_topic_payloads_are_the_peers(tmp_path: Path, msgs: list[tuple[int, int, bytes]], compression: str, chunk_size: int) -> None:
    path = tmp_path / "m.bag"
    _write(path, msgs, compression, chunk_size)
    with PeerReader(path) as r:
        peer = [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]
    with polybag.open(str(path)) as bag:
        for k in range(3):
            topic = f"/t{k}"
            want = sorted(((t, d) for tp, t, d in peer if tp == topic), key=lambda e: e[0])  # (stable: file order)
            if not want:
                continue
            times, blob, starts, sizes = bag.topic_payloads(topic)
            got = [(int(t), bytes(blob[s : s + n])) for t, s, n in zip(times, starts, sizes)]
            assert got == want


def _one_chunk_bag(tmp_path: Path) -> tuple[Path, bytes, int]:
    path = tmp_path / "one.bag"
    _write(path, [(0, i, b"payload-%03d" % i) for i in range(20)], "none", 1 << 20)
    data = path.read_bytes()
    return path, data, data.index(b"payload-007")


@pytest.mark.parametrize("value", [0xFFFFFFFF, 0x7FFFFFFF, 1 << 20, 12 + 10**6])
def test_data_length_past_the_chunk_is_format_error(tmp_path: Path, value: int) -> None:
    path, data, at = _one_chunk_bag(tmp_path)
    bad = bytearray(data)
    struct.pack_into("<I", bad, at - 4, value)  # the data length before the payload
    path.write_bytes(bytes(bad))
    with polybag.open(str(path)) as bag, pytest.raises(FormatError, match="runs past the chunk end"):
        bag.topic_payloads("/t0")


def test_header_length_past_the_chunk_is_format_error(tmp_path: Path) -> None:
    path, data, at = _one_chunk_bag(tmp_path)
    # the header length of the record holding payload-007: [u32 header length][header,
    # 38 bytes][u32 data length][payload]
    head_len = struct.unpack_from("<I", data, at - 4 - 38 - 4)[0]
    assert head_len == 38  # op, conn, time (as the writer lays them out)
    bad = bytearray(data)
    struct.pack_into("<I", bad, at - 4 - 38 - 4, 0xFFFFFF00)
    path.write_bytes(bytes(bad))
    with polybag.open(str(path)) as bag, pytest.raises(FormatError):
        bag.topic_payloads("/t0")


def test_u32_view_reads_every_offset() -> None:
    """The every-byte u32 view reads the same values as struct at any offset, also the last one."""
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, 1001, dtype=np.uint8).tobytes()
    arr = np.frombuffer(raw, np.uint8)
    every = np.ndarray((len(raw) - 3,), "<u4", arr, 0, (1,))
    idx = np.arange(len(raw) - 3)
    assert every[idx].tolist() == [struct.unpack_from("<I", raw, i)[0] for i in idx]
