"""A fresh process that reads a ULog log imports only what the ULog path needs.

The fixed cost of a new interpreter is most of what a short ULog read costs (issue 13), so
``import polybag`` and reading a ULog log must not import the chunk compressors
(zstandard, lz4) or ``concurrent.futures`` (which imports ``logging``); they are imported on
first use, and compression still works once they are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from ulog_helpers import pyulog_columns, synthetic_log, write

SRC = str(Path(__file__).resolve().parents[3] / "src")
LAZY = ("zstandard", "lz4", "lz4.frame", "concurrent.futures", "logging")

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
from polybag import compression
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
