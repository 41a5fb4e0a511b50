"""``polybag decompress FILE...``: rewrite bags (and MCAP files) with uncompressed chunks.

The original is kept as ``NAME.orig.EXT`` unless ``--no-backup``; the result replaces the
original only once complete.
"""

from __future__ import annotations

import argparse
from typing import Any

from polybag.cli.compress import add_common, run_many
from polybag.cli.text import plain


def register(sub: Any) -> None:
    p = sub.add_parser("decompress", help="rewrite bags / MCAP files with uncompressed chunks, keeping a .orig backup", description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    p.set_defaults(func=lambda args: run_many(args, "none"))
