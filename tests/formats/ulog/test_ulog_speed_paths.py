"""A fresh process that reads a ULog log imports only what the ULog path needs.

The fixed cost of a new interpreter is most of what a short ULog read costs (issue 13), so
``import polybag`` and reading a ULog log must not import the chunk compressors
(zstandard, lz4), ISA-L (the CRC-32 of MCAP) or ``concurrent.futures`` (which imports
``logging``); they are imported on first use, and compression still works once they are; and the whole read path (open, one
topic, summary, every topic, every message) imports no other format, codec, writer,
operation, the CLI, nor the stream spool's ``tempfile``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from ulog_helpers import pyulog_columns, synthetic_log, write

SRC = str(Path(__file__).resolve().parents[3] / "src")
LAZY = ("zstandard", "lz4", "lz4.frame", "concurrent.futures", "logging", "isal", "isal.isal_zlib")

CHILD = """
import json, sys
sys.path.insert(0, {src!r})
import polybag
after_import = sorted(m for m in {lazy!r} if m in sys.modules)
with polybag.open(sys.argv[1]) as r:
    cols = r.topic_columns("pos")
after_read = sorted(m for m in {lazy!r} if m in sys.modules)
print(json.dumps({{"import": after_import, "read": after_read, "n": len(cols["timestamp"]),
                   "ts": [int(t) for t in cols["timestamp"]]}}))
"""


def test_ulog_read_imports_no_compressor_nor_thread_pool(tmp_path: Path) -> None:
    data, _spans = synthetic_log(30)
    path = write(tmp_path, "a.ulg", data)
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(src=SRC, lazy=LAZY), path], capture_output=True, text=True, check=True
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["import"] == []
    assert got["read"] == []
    want = pyulog_columns(path)[("pos", 0)]["timestamp"]
    assert got["n"] == len(want) == 30
    assert np.array_equal(np.array(got["ts"], np.uint64), want.astype(np.uint64))


def test_compressors_load_on_first_use() -> None:
    code = f"""
import sys
sys.path.insert(0, {SRC!r})
from polybag.io import compression
assert "zstandard" not in sys.modules and "lz4" not in sys.modules
data = bytes(range(256)) * 1000
for name in ("zstd", "lz4", "bz2"):
    packed = compression.compress(name, data)
    assert packed != data
    assert bytes(compression.decompress(name, packed, len(data))) == data
assert "zstandard" in sys.modules and "lz4.frame" in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ok"


# What a ULog read has no use for: other formats and codecs, writers, operations, the CLI,
# remote access, YAML, data frames, the stream spool (tempfile: shutil, random, bz2, lzma).
# Each costs import time in every fresh process that only reads a ULog log (issue 13).
NOT_NEEDED = (
    "tempfile",
    "shutil",
    "random",
    "lzma",
    "bz2",
    "yaml",
    "pandas",
    "pyarrow",
    "polybag.formats.mcap",
    "polybag.formats.bag",
    "polybag.formats.ulog.writer",
    "polybag.formats.ulog.events",
    "polybag.codecs.ros1",
    "polybag.codecs.cdr",
    "polybag.codecs.columns",
    "polybag.ops",
    "polybag.cli",
    "polybag.io.remote",
    "polybag.dask",
    "polybag.net",
)

CHILD_ALL = """
import json, sys
sys.path.insert(0, {src!r})
import polybag
with polybag.open(sys.argv[1]) as r:
    one = r.topic_columns("pos", 1)
    n = {{ch.topic + "/" + ch.metadata.get("multi_id", ""): len(r.topic_columns(ch.topic, ch.metadata.get("multi_id", "0"))["timestamp"])
         for ch in r.summary.channels.values()}}
    span = [r.summary.start_time, r.summary.end_time]
    msgs = sum(1 for _ in r.messages())
loaded = sorted(m for m in sys.modules if any(m == x or m.startswith(x + ".") for x in {names!r}))
print(json.dumps({{"loaded": loaded, "n": n, "span": span, "msgs": msgs,
                   "one": [int(t) for t in one["timestamp"]]}}))
"""


def test_ulog_read_path_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """A fresh process that opens a ULog log, reads one topic, the summary, every topic's
    columns and every message imports none of :data:`NOT_NEEDED`; and reads what pyulog
    reads."""
    data, _spans = synthetic_log(25)
    path = write(tmp_path, "b.ulg", data)
    out = subprocess.run(
        [sys.executable, "-c", CHILD_ALL.format(src=SRC, names=NOT_NEEDED), path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["loaded"] == []
    theirs = pyulog_columns(path)
    assert got["n"] == {
        "pos/0": len(theirs[("pos", 0)]["timestamp"]),
        "pos/1": len(theirs[("pos", 1)]["timestamp"]),
        "nest/0": len(theirs[("nest", 0)]["timestamp"]),
        "log_message/": 3,  # hello, the tagged warning, bye
    }
    assert np.array_equal(np.array(got["one"], np.uint64), theirs[("pos", 1)]["timestamp"].astype(np.uint64))
    first = min(int(v["timestamp"][0]) for v in theirs.values())
    assert got["span"][0] <= first * 1000 < got["span"][1]
    assert got["msgs"] == sum(got["n"].values())
