"""Peak memory and time of ``polybag export`` on an image bag, streamed vs whole-topic.

Generates ``bench/data/export_images.bag`` (N 640x480 rgb8 ``sensor_msgs/Image``, default
300 frames, about 276 MB) and exports it to parquet and csv, each in its own subprocess
(peak RSS from ``getrusage``).  The whole-topic route (``topic_columns`` of the topic, then
one ``pyarrow`` table written at once: what export did before streaming) runs the same way
for the ratio.  Target: streamed peak RSS a small constant (a few batches), not the topic.

    python bench/bench_export.py            # 300 frames
    python bench/bench_export.py --frames 60
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

STREAMED = """
import sys
from polybag import ops
res = ops.export(sys.argv[1], sys.argv[2], format=sys.argv[3])
assert res.failed == 0, res.warnings
"""

WHOLE = """
import sys
import pyarrow.parquet as pq
import polybag
from polybag.codecs.columns import columns_to_arrow
with polybag.open(sys.argv[1]) as r:
    for topic in r.summary.topics():
        pq.write_table(columns_to_arrow(dict(r.topic_columns(topic))), sys.argv[2] + "/whole.parquet")
"""


def run(code: str, *argv: str) -> tuple[float, float]:
    """(seconds, peak RSS MB) of ``python -c code argv`` (in a fresh process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    # each case in a wrapper process so RUSAGE_CHILDREN's max is that case's own
    wrapper = (
        "import resource, subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', sys.argv[1], *sys.argv[2:]], check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, code, *argv], check=True, capture_output=True, text=True)
    dt = time.perf_counter() - t
    del before
    return dt, int(out.stdout.split()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=300)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_convert import ensure, make_image_bag

    DATA.mkdir(exist_ok=True)
    bag = DATA / "export_images.bag"
    ensure(bag, make_image_bag, args.frames)
    size_mb = bag.stat().st_size / 1e6
    print(f"input: {bag.name} {size_mb:.0f} MB, {args.frames} frames")
    with tempfile.TemporaryDirectory() as d:
        base_t, base_rss = run("pass")
        print(f"python baseline: {base_rss:.0f} MB RSS")
        whole_t, whole_rss = run(WHOLE, str(bag), d)
        print(f"whole-topic parquet : {whole_t:6.2f}s  peak RSS {whole_rss:7.0f} MB")
        for fmt in ("parquet", "csv", "jsonl"):
            t, rss = run(STREAMED, str(bag), f"{d}/{fmt}", fmt)
            line = f"streamed {fmt:<11}: {t:6.2f}s  peak RSS {rss:7.0f} MB"
            if fmt == "parquet":
                line += f"  (RSS {whole_rss / rss:.1f}x less than whole-topic, time {t / whole_t:.2f}x)"
            print(line)


if __name__ == "__main__":
    main()
