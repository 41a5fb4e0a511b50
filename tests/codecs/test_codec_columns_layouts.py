"""ROS 1 columns of types fixed-size but for their strings, against the general walk.

``_fixed_layout`` (every payload the same layout: typed views or copies of the rows) and
``_string_layout`` (strings of mixed lengths: segments gathered per block) must give the
same column names, dtypes, shapes and values as ``Walker`` (the general path) and as
decoding every message; damage is left to the walk (same errors).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybag
from _codec_helpers import _equal, _lookup
from polybag.codecs import columns as C
from polybag.codecs.columns import payload_columns
from polybag.codecs.ros1 import codec_for_type, definition_for
from polybag.errors import DecodeError

NAMED = (
    "string a\nfloat32 f\nstring[2] pair\nItem[2] items\ntime t\nduration d\nuint8[3] u3\nbool b\n"
    "float64[70] big\nint16 i\nstring last\n"
    "================================================================================\n"
    "MSG: pkg/Item\nstring name\nfloat64 v\nint32 k\n"
)


def _imu(frame_ids: list[str]) -> tuple[Any, list[bytes]]:
    codec = codec_for_type("sensor_msgs/Imu", definition_for("sensor_msgs/Imu"))
    o = codec.message_class()
    out = []
    for i, f in enumerate(frame_ids):
        o.header.seq = i
        o.header.stamp.sec, o.header.stamp.nsec = 1_700_000_000 + i, (i * 7919) % 1_000_000_000
        o.header.frame_id = f
        o.orientation.x, o.orientation.w = float(i), -float(i)
        o.angular_velocity.z = i / 3
        o.linear_acceleration_covariance[8] = float(i * i)
        out.append(codec.encode(o))
    return codec, out


def _named(n: int, strings: list[str], seed: int = 1) -> tuple[Any, list[bytes]]:
    codec = codec_for_type("pkg/Named", NAMED)
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        out.append(
            codec.encode(
                {
                    "a": rnd.choice(strings),
                    "f": float(np.float32(i / 7)),
                    "pair": [rnd.choice(strings), rnd.choice(strings)],
                    "items": [{"name": rnd.choice(strings), "v": i * 0.5, "k": -i} for _ in range(2)],
                    "t": {"sec": rnd.randrange(1 << 32), "nsec": rnd.randrange(1_000_000_000)},
                    "d": {"sec": rnd.randrange(-(1 << 31), 1 << 31), "nsec": rnd.randrange(-(1 << 31), 1 << 31)},
                    "u3": bytes([i % 256, 1, 2]),
                    "b": i % 3 == 0,
                    "big": [float(i + j) for j in range(70)],
                    "i": (i % 60000) - 30000,
                    "last": rnd.choice(strings),
                }
            )
        )
    return codec, out


def _blob(datas: list[bytes], owned: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sizes = np.array([len(d) for d in datas], np.int64)
    starts = np.zeros(len(datas), np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    blob = np.frombuffer(b"".join(datas), np.uint8)
    return (blob.copy() if owned else blob), starts, sizes


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        if a[k].dtype == object:  # strings, or one array per message
            assert all(_equal(x, y) for x, y in zip(a[k].tolist(), b[k].tolist(), strict=True)), k
        else:
            assert a[k].tolist() == b[k].tolist(), k


def _walk(codec: Any, blob: np.ndarray, starts: np.ndarray, sizes: np.ndarray, fields: list[str] | None = None) -> dict[str, np.ndarray]:
    return C.Walker(codec, blob, starts, sizes, C._wanted(fields), "/t").run()


def _decoded(codec: Any, datas: list[bytes], cols: dict[str, np.ndarray]) -> None:
    """Every column value equals the field of the message decoded on its own."""
    for i, d in enumerate(datas):
        m = codec.to_dict(d)
        for name, col in cols.items():
            assert _equal(col[i], _lookup(m, name)), (name, i)


# --- strings of mixed lengths --------------------------------------------------------------
@pytest.mark.parametrize(
    "frame_ids",
    [
        ["imu", "imu_link", "", "x", "base_link_imu"],  # mixed, with an empty string
        ["", "a"],
        ["ab", "abc"],
        [f"frame_{'x' * k}" for k in range(40)],  # more lengths than are decoded per length
        ["caf\u00e9", "\u00ff\u00fe", "plain"],  # non-ASCII
    ],
)
def test_mixed_string_lengths_equal_the_walk(frame_ids: list[str]) -> None:
    rnd = random.Random(7)
    codec, datas = _imu([rnd.choice(frame_ids) for _ in range(500)])
    blob, starts, sizes = _blob(datas)
    walk = _walk(codec, blob, starts, sizes)
    if len({len(f.encode()) for f in frame_ids}) > 1:
        assert C._fixed_layout(codec, blob, starts, sizes, C._wanted(None)) is None
    got = C._string_layout(codec, blob, starts, sizes, C._wanted(None))
    assert got is not None
    _same(got, walk)
    _same(payload_columns(codec, datas), walk)
    _decoded(codec, datas[:50], got)
    sel = ["header", "orientation_covariance", "angular_velocity.z"]
    _same(payload_columns(codec, datas, sel), _walk(codec, blob, starts, sizes, sel))


def test_invalid_utf8_is_replaced_as_the_walk_replaces_it() -> None:
    codec = codec_for_type("std_msgs/Header", definition_for("std_msgs/Header"))
    raw = [b"\xff\xfe", b"ok", b"\xc3", b"", b"\xc3\xa9t\xc3\xa9"]
    datas = [codec.encode({"seq": i, "frame_id": "x"}) for i in range(len(raw) * 3)]
    # replace the 1-byte frame id by raw bytes (length prefix adjusted)
    datas = [d[:12] + len(raw[i % len(raw)]).to_bytes(4, "little") + raw[i % len(raw)] for i, d in enumerate(datas)]
    blob, starts, sizes = _blob(datas)
    got = C._string_layout(codec, blob, starts, sizes, C._wanted(None))
    assert got is not None
    _same(got, _walk(codec, blob, starts, sizes))
    assert got["frame_id"][0] == "\ufffd\ufffd"  # as rosbag (genpy) decodes it


@pytest.mark.parametrize("strings", [["", "a", "bb", "ccc"], ["same"], [""], [f"s{i}" * (i % 5) for i in range(30)]])
def test_several_strings_arrays_and_nested_equal_the_walk(strings: list[str]) -> None:
    codec, datas = _named(300, strings)
    blob, starts, sizes = _blob(datas)
    walk = _walk(codec, blob, starts, sizes)
    fixed = C._fixed_layout(codec, blob, starts, sizes, C._wanted(None))
    varying = C._string_layout(codec, blob, starts, sizes, C._wanted(None))
    assert varying is not None
    _same(varying, walk)
    if len({len(s) for s in strings}) == 1:
        assert fixed is not None
        _same(fixed, walk)
    else:
        assert fixed is None
    _same(payload_columns(codec, datas), walk)
    _decoded(codec, datas[:20], walk)
    sel = ["a", "items", "t", "big", "last"]
    _same(C._string_layout(codec, blob, starts, sizes, C._wanted(sel)) or {}, _walk(codec, blob, starts, sizes, sel))


@pytest.mark.parametrize("gather_bytes", [1, 700, 5000])
def test_blocks_with_different_length_mixes(monkeypatch: pytest.MonkeyPatch, gather_bytes: int) -> None:
    # tiny blocks: some hold one length only, some several, some a single row
    monkeypatch.setattr(C, "_GATHER_BYTES", gather_bytes)
    ids = ["a"] * 40 + ["bb", "a", "", "cccc"] * 10 + ["zz"] * 30 + [""] * 20
    codec, datas = _imu(ids)
    blob, starts, sizes = _blob(datas)
    got = C._string_layout(codec, blob, starts, sizes, C._wanted(None))
    assert got is not None
    _same(got, _walk(codec, blob, starts, sizes))
    assert got["header.frame_id"].tolist() == ids


def test_payloads_in_any_order_with_gaps() -> None:
    # starts out of order, payloads not back to back (as a reader's buffer may hold them)
    codec, datas = _imu(["a", "bcd", "", "ef"] * 25)
    rnd = random.Random(3)
    order = list(range(len(datas)))
    rnd.shuffle(order)
    buf = bytearray(b"\xee" * 5)
    where = {}
    for i in order:
        where[i] = len(buf)
        buf += datas[i] + b"\xee" * rnd.randrange(4)
    blob = np.frombuffer(bytes(buf), np.uint8)
    starts = np.array([where[i] for i in range(len(datas))], np.int64)
    sizes = np.array([len(d) for d in datas], np.int64)
    got = C._string_layout(codec, blob, starts, sizes, C._wanted(None))
    assert got is not None
    _same(got, _walk(codec, blob, starts, sizes))
    _same(got, payload_columns(codec, datas))


def test_damage_is_left_to_the_walk() -> None:
    codec, datas = _imu(["a", "bcd", ""] * 10)
    for bad in (
        [d[:-1] if i == 7 else d for i, d in enumerate(datas)],  # one payload short
        [d + b"\0" if i == 7 else d for i, d in enumerate(datas)],  # bytes left over
        # a string length running past the payload
        [d[:12] + (10_000).to_bytes(4, "little") + d[16:] if i == 7 else d for i, d in enumerate(datas)],
        [d[:10] for d in datas],  # shorter than the first segment
    ):
        blob, starts, sizes = _blob(bad)
        assert C._string_layout(codec, blob, starts, sizes, C._wanted(None)) is None
        with pytest.raises(DecodeError):
            payload_columns(codec, bad)
    blob, starts, sizes = _blob(datas)
    assert C._string_layout(codec, blob, starts - 1, sizes, C._wanted(None)) is None  # outside the blob


def test_types_the_string_layout_declines() -> None:
    # variable-length arrays, wstrings: the walk; types without strings: the fixed path only
    for text in ("float64[] xs\nstring s\n", "wstring w\nfloat64 x\n"):
        codec = codec_for_type("pkg/V", text)
        datas = [codec.encode({"xs": [1.0] * i, "s": "a" * i, "w": "w" * i, "x": 1.0}) for i in range(5)]
        blob, starts, sizes = _blob(datas)
        assert C._string_layout(codec, blob, starts, sizes, C._wanted(None)) is None
        _same(payload_columns(codec, datas), _walk(codec, blob, starts, sizes))
    codec = codec_for_type("pkg/F", "float64 x\nint8 y\n")
    datas = [codec.encode({"x": float(i), "y": i}) for i in range(5)]
    blob, starts, sizes = _blob(datas)
    assert C._string_layout(codec, blob, starts, sizes, C._wanted(None)) is None
    assert C._fixed_layout(codec, blob, starts, sizes, C._wanted(None)) is not None


# --- the uniform layout: views of an owned blob, copies otherwise ----------------------------
def test_views_of_an_owned_blob_equal_copies() -> None:
    codec, datas = _named(200, ["same"])
    blob, starts, sizes = _blob(datas, owned=True)
    views = C._fixed_layout(codec, blob, starts, sizes, C._wanted(None))
    copies = C._fixed_layout(codec, np.frombuffer(blob.tobytes(), np.uint8), starts, sizes, C._wanted(None))
    assert views is not None and copies is not None
    _same(views, copies)
    _same(views, _walk(codec, blob, starts, sizes))
    assert not views["f"].flags.c_contiguous and views["big"].shape == (200, 70)
    assert all(c.flags.c_contiguous for c in copies.values())
    # a view's memory is the blob's, which numpy owns (dask's _detach keeps such columns)
    base = views["items[1].v"]
    while base.base is not None:
        base = base.base
    assert base is blob
    # time and string columns are always computed
    assert views["t"].flags.owndata or views["t"].base is not blob
    assert views["a"].dtype == object


def test_narrow_selection_copies_instead_of_pinning_every_row() -> None:
    codec, datas = _imu(["imu_link"] * 300)
    blob, starts, sizes = _blob(datas, owned=True)
    few = C._fixed_layout(codec, blob, starts, sizes, C._wanted(["orientation.x", "header.seq"]))
    assert few is not None and list(few) == ["header.seq", "orientation.x"]
    assert all(c.flags.c_contiguous and c.base is not blob for c in few.values())
    _same(few, _walk(codec, blob, starts, sizes, ["orientation.x", "header.seq"]))


def test_copy_runs_with_interleaved_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    # fields of one dtype interrupted by others, several output blocks per dtype
    codec = codec_for_type("pkg/Mix", "float64 a\nfloat64 b\nfloat32 c\nfloat64 d\nfloat64[3] e\nint64 f\ntime t\nint64 g\n")
    datas = [
        codec.encode({"a": i, "b": -i, "c": i / 2, "d": 2 * i, "e": [i, i + 1, i + 2], "f": -7 * i, "t": {"sec": i, "nsec": 5}, "g": i})
        for i in range(100)
    ]
    blob, starts, sizes = _blob(datas)
    walk = _walk(codec, blob, starts, sizes)
    for block_bytes in (1 << 62, 8 * 100 * 2, 1):
        monkeypatch.setattr(C, "_BLOCK_BYTES", block_bytes)
        got = C._fixed_layout(codec, blob, starts, sizes, C._wanted(None))
        assert got is not None
        _same(got, walk)
        assert all(c.flags.c_contiguous for c in got.values())


# --- through the files: bag and MCAP topic_columns ----------------------------------------
@pytest.mark.parametrize("fmt", ["bag", "mcap"])
@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_topic_columns_of_files_with_mixed_frame_ids(tmp_path: Path, fmt: str, compression: str) -> None:
    rnd = random.Random(11)
    ids = [rnd.choice(["imu", "imu_link", "", "left/imu_link_2"]) for _ in range(3000)]
    uniform = ["imu_link"] * 3000
    for name, frame_ids in (("mixed", ids), ("uniform", uniform)):
        codec, datas = _imu(frame_ids)
        path = tmp_path / f"{name}.{fmt}"
        w = polybag.Writer(str(path), compression=compression, chunk_size=64 << 10)
        sid = w.add_schema("sensor_msgs/Imu", "ros1msg", definition_for("sensor_msgs/Imu").encode())
        ch = w.add_channel("/imu", "ros1", sid, {"md5sum": codec.md5sum})
        for i, d in enumerate(datas):
            w.write(ch, d, 1_000 + i, 1_000 + i, i)
        w.close()
        with polybag.open(str(path)) as r:
            cols = r.topic_columns("/imu")
            msgs = list(r.messages(topics=["/imu"]))
        assert cols["log_time"].tolist() == [m.log_time for m in msgs]
        assert cols["header.frame_id"].tolist() == frame_ids
        # the reader's gathered blob is numpy's: one frame id gives views of it, several copies
        assert cols["orientation.x"].flags.c_contiguous == (name == "mixed")
        blob, starts, sizes = _blob(datas)
        walk = _walk(codec, blob, starts, sizes)
        _same({k: v for k, v in cols.items() if k != "log_time"}, walk)
        _decoded(codec, datas[:: 97], {k: v[:: 97] for k, v in cols.items() if k != "log_time"})
