"""Operations on logs, composed from the public readers, writers and codecs.

Each is a function returning a small result object (counts, warnings; ``to_dict()``)::

    from polybag import ops
    ops.convert("in.bag", "out.mcap")
    ops.filter("in.mcap", "out.mcap", include_topics=["/imu"], start="+10s", expression="m.x > 0")
    ops.merge("out.mcap", ["a.bag", "b.mcap"])
    ops.split("in.mcap", duration="60s")
    ops.recover("cut.mcap", "fixed.mcap")
    ops.sort("in.bag", "sorted.bag")
    ops.du("in.mcap")
    ops.export("in.mcap", "tables/", format="parquet")
    ops.compress("in.bag", "lz4"); ops.decompress("in.mcap")
    ops.plot("in.mcap", ["/odom.pose.pose.position.x"], "odom.png")
"""

from __future__ import annotations

from polybag.ops.compress import CompressResult, compress, decompress
from polybag.ops.convert import ConvertResult, convert
from polybag.ops.du import DuResult, du
from polybag.ops.export import ExportResult, export
from polybag.ops.export_aligned import export_aligned
from polybag.ops.filter import FilterResult, filter  # noqa: A004
from polybag.ops.merge import MergeResult, merge
from polybag.ops.plot import PlotResult, plot
from polybag.ops.recover import RecoverResult, recover
from polybag.ops.sort import SortResult, sort
from polybag.ops.split import SplitResult, split

__all__ = [
    "CompressResult",
    "ConvertResult",
    "DuResult",
    "ExportResult",
    "FilterResult",
    "MergeResult",
    "PlotResult",
    "RecoverResult",
    "SortResult",
    "SplitResult",
    "compress",
    "convert",
    "decompress",
    "du",
    "export",
    "export_aligned",
    "filter",
    "merge",
    "plot",
    "recover",
    "sort",
    "split",
]
