"""``polybag plot IN TOPIC.FIELD... -o FILE.png``: fields against time."""

from __future__ import annotations

import argparse

from polybag.cli._ops import add_force, add_json, emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plot", help="plot message fields against time (PNG, or --html with plotly)", description="Fields are TOPIC.FIELD with flattened names (/odom.pose.pose.position.x, vehicle_attitude.q[0]); a bare TOPIC plots all its numeric fields.")
    p.add_argument("input", metavar="IN")
    p.add_argument("fields", nargs="+", metavar="TOPIC.FIELD")
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="FILE.png (or .html with --html)")
    p.add_argument("--html", action="store_true", help="an interactive page (needs plotly)")
    p.add_argument("--title")
    add_force(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from polybag.ops import plot

    r = plot(
        args.input, args.fields, args.output, html=args.html, title=args.title, progress=None, overwrite=args.force
    )
    lines = [f"{r.output}: {len(r.series)} series"] + [
        f"  {s.topic}.{s.field}: {s.points} points" for s in r.series
    ]
    emit("plot", args, r, lines)
    return 0
