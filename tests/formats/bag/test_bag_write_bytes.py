"""The bag writer's bytes do not change when its inside does (issue 13: the fast write path).

The hashes below were computed with the writer as it was before the per-message work was cut
(commit f7492d1): the same calls must still give the same file, byte for byte, for each
chunk compression, with and without the worker threads, to a path and to a stream; and
rosbag-standalone and rosbags must still read it.
"""

from __future__ import annotations

import hashlib
import io
import struct

import pytest

import polybag
from polybag.formats.bag.writer import BagWriter
from polybag.util import threads as _threads

STRING_DEF = b"string data\n"
STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"
T0 = 1_700_000_000 * 10**9

GOLDEN = {
    # (compression, chunk_size): sha256 of the file
    ("none", 1): "23be8f697c9810e80fd4bac15536fcf96b54c21c449c8dd440de664743e2066c",
    ("none", 4096): "deb56654182f95c8177e3ea8f22ec80cc9fa664c600f362c8d21ded13b4819d6",
    ("none", 786432): "90b48cae190e21b89bddb0d37d6b0d0ef6f3cf73823617a1725b7e2ebf332bc9",
    ("bz2", 1): "a2d0f769a531fc79347af933d8fcdfb500caca479217210eb57908bbe8e8af76",
    ("bz2", 4096): "57a80f2fce16ca9c8e148672828990578a0c13a8247e2a1099db822a0bff7d7f",
    ("bz2", 786432): "18dcc971eac8a604391e40f02e3d01a93ac74036fb7890f28a4ed94c96b698b2",
    ("lz4", 1): "4b6a0c473bef28761bdc6ca03bc0444d3310d71f818dea2f4ab03d93b00e3131",
    ("lz4", 4096): "504028847724aff67878a2f49d0e7659b4d691fe9a284731c203e54ac19ca5ac",
    ("lz4", 786432): "ee3812e2938580bdb846fbf90efa44b43387218bb911ef52c556f266cc07a79f",
}


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def _write(w: BagWriter) -> list[tuple[str, int, bytes]]:
    """Three connections (one added late), times out of order and equal inside a chunk, an
    empty and a large message, times at 0 and near the 32-bit-seconds end."""
    s = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
    a = w.add_channel("/a", "ros1", s, {"callerid": "/talker", "latching": "true"})
    b = w.add_channel("/b", "ros1", s, {"md5sum": STRING_MD5})
    written = []
    late = None
    for i in range(3000):
        k = i % 7
        if i == 1200:
            late = w.add_channel("/late", "ros1", s, {"callerid": "/x", "latching": "0"})
        ch = a if k < 3 else b if (late is None or k < 6) else late
        t = T0 + (i // 5) * 1_000_000 - (i % 5) * 333  # bursts that go back in time
        if i == 17:
            t = 0
        if i == 2900:
            t = (0xFFFFFFFF * 10**9) + 999_999_999
        if i == 500:
            data = b""
        elif i == 1500:
            data = _string("x" * 70_000)
        else:
            data = _string(f"message {i} {'y' * (i % 97)}")
        w.write(ch, data, t, t, i)
        written.append((ch.topic, t, data))
    return written


def _digest(p) -> str:  # type: ignore[no-untyped-def]
    return hashlib.sha256(p.read_bytes()).hexdigest()


CASES = [(c, cs) for c in ("none", "bz2", "lz4") for cs in (1, 4096, 768 * 1024)]


@pytest.mark.parametrize(("compression", "chunk_size"), CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_bytes_unchanged(tmp_path, monkeypatch, compression, chunk_size, threads):
    monkeypatch.setattr(_threads, "workers", lambda: threads)
    p = tmp_path / "out.bag"
    with BagWriter(p, compression=compression, chunk_size=chunk_size) as w:
        written = _write(w)
    assert _digest(p) == GOLDEN[(compression, chunk_size)]
    # the same bytes to a seekable stream and to a pipe-like one
    s = io.BytesIO()
    with BagWriter(s, compression=compression, chunk_size=chunk_size) as w:
        _write(w)
    assert hashlib.sha256(s.getvalue()).hexdigest() == GOLDEN[(compression, chunk_size)]
    if chunk_size != 4096:
        return
    in_order = sorted(written, key=lambda m: m[1])  # (stable: equal times keep their order)
    with polybag.open(p) as r:
        assert [(m.topic, m.log_time, bytes(m.data)) for m in r.messages()] == in_order
    from rosbags.rosbag1 import Reader

    with Reader(p) as rr:
        assert sorted((c.topic, t, bytes(d)) for c, t, d in rr.messages()) == sorted(written)
    import rosbag

    with rosbag.Bag(str(p)) as bb:
        got = [(tp, t.to_nsec(), bytes(m[1])) for tp, m, t in bb.read_messages(raw=True)]
    assert sorted(got) == sorted(written)


COPIES = {
    # what recompress_bag / reindex_bag (write_chunk: chunks handed over whole) make of the
    # ("none", 4096) file: sha256
    "recompress none": "deb56654182f95c8177e3ea8f22ec80cc9fa664c600f362c8d21ded13b4819d6",
    "recompress bz2": "57a80f2fce16ca9c8e148672828990578a0c13a8247e2a1099db822a0bff7d7f",
    "recompress lz4": "504028847724aff67878a2f49d0e7659b4d691fe9a284731c203e54ac19ca5ac",
    "reindex cut": "bceb49d7c742781755ac39efc257306600c72466a69419c5f62bba376116ad8a",
}


def _copies(src, d):  # type: ignore[no-untyped-def]
    from polybag.formats.bag.reindex import recompress_bag, reindex_bag

    out = {}
    for comp in ("none", "bz2", "lz4"):
        q = d / f"re_{comp}.bag"
        recompress_bag(str(src), q, comp)
        out[f"recompress {comp}"] = _digest(q)
    cut = d / "cut.bag"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size * 2 // 3])  # no index, a cut chunk
    q = d / "reindexed.bag"
    reindex_bag(str(cut), q)
    out["reindex cut"] = _digest(q)
    return out


@pytest.mark.parametrize("threads", [1, 2])
def test_copied_chunks_bytes_unchanged(tmp_path, monkeypatch, threads):
    monkeypatch.setattr(_threads, "workers", lambda: threads)
    src = tmp_path / "src.bag"
    with BagWriter(src, compression="none", chunk_size=4096) as w:
        _write(w)
    assert _copies(src, tmp_path) == COPIES


def test_refused_message_leaves_no_trace(tmp_path):
    """A message refused by ``write`` (a float or out-of-range time, data that is not bytes)
    is a WriteError and leaves nothing in the chunk: the file is as if it was never written."""
    from polybag.errors import WriteError

    def run(p, bad):  # type: ignore[no-untyped-def]
        with BagWriter(p, compression="none") as w:
            s = w.add_schema("std_msgs/String", "ros1msg", STRING_DEF)
            a = w.add_channel("/a", "ros1", s)
            w.write(a, _string("one"), T0)
            if bad:
                for args in ((_string("x"), 1.5e18), ("text", T0), (None, T0), (b"x", -1), (b"x", 2**32 * 10**9)):
                    with pytest.raises(WriteError):
                        w.write(a, *args)
            w.write(a, _string("two"), T0 + 1)

    run(tmp_path / "a.bag", False)
    run(tmp_path / "b.bag", True)
    assert (tmp_path / "a.bag").read_bytes() == (tmp_path / "b.bag").read_bytes()


def test_closed_writer_refuses(tmp_path):
    from polybag.errors import WriteError

    w = BagWriter(tmp_path / "c.bag")
    a = w.add_channel("/a", "ros1", w.add_schema("std_msgs/String", "ros1msg", STRING_DEF))
    w.write(a, _string("one"), T0)
    w.close()
    with pytest.raises(WriteError, match="closed"):
        w.write(a, _string("two"), T0)


if __name__ == "__main__":  # print the table (run with the old writer to make GOLDEN)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        for c, cs in CASES:
            p = Path(d) / "g.bag"
            with BagWriter(p, compression=c, chunk_size=cs) as w:
                _write(w)
            print(f'    ("{c}", {cs}): "{_digest(p)}",')
        src = Path(d) / "src.bag"
        with BagWriter(src, compression="none", chunk_size=4096) as w:
            _write(w)
        for k, v in _copies(src, Path(d)).items():
            print(f'    "{k}": "{v}",')
