"""PX4 ULog: opening a log and the first read, polybag against pyulog (and another polybag).

    .venv/bin/python bench/bench_ulog_open.py [--repeat 40] [--against SRC] [--files a.ulg ...]

Each file of ../shared/corpora/ulog, in process (imports done, file cached), three rows:

* ``open``: ``polybag.open(path)`` and its channels; pyulog ``ULog(path, [])`` (every
  message walked, no topic's data kept);
* ``first``: open and the first channel's ``topic_columns``; pyulog ``ULog(path, [topic])``
  and that topic's data;
* ``info``: open and ``reader.summary`` (counts, time span, info extras); pyulog
  ``ULog(path)``, what its ``ulog_info`` loads.

Each side runs in its own long-lived process and the sides take turns, run by run
(``--repeat`` runs each); a run's time is the process CPU time (``time.process_time``,
every thread) with the garbage collector off, and each side keeps its best run.
ratio = pyulog / polybag.  ``--against SRC`` adds a third side, polybag imported from
``SRC`` (e.g. ``git archive REV src | tar -x -C /tmp/old`` then ``--against /tmp/old/src``),
with the ratio this tree / that tree (above 1: this tree is slower): the old-vs-new check of
a refactor.  Then, in fresh processes (best of ``--fresh-repeat``), the import time of what
opening a ULog imports beyond ``import polybag`` and numpy (the registry, the ULog reader
and its codec), each tree with compiled bytecode, as an installed package has it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "ulog"

_WORKER = r'''
import gc, json, sys, time
side, src = sys.argv[1], sys.argv[2]
if side == "polybag":
    sys.path.insert(0, src)
    import polybag
    assert polybag.__file__.startswith(src), polybag.__file__
else:
    from pyulog import ULog

def first_topic(path):
    with polybag.open(path) as r:
        ch = min(r.channels().values(), key=lambda c: c.id)
        return [ch.topic, int(ch.metadata.get("multi_id", "0"))]

def run(what, path, topic, mid):
    if side == "polybag":
        with polybag.open(path) as r:
            if what == "open":
                r.channels()
            elif what == "first":
                r.topic_columns(topic, mid)
            else:
                r.summary
    elif what == "open":
        ULog(path, [])
    elif what == "first":
        ULog(path, [topic]).get_dataset(topic, mid)
    else:
        ULog(path)

for line in sys.stdin:
    ask = json.loads(line)
    if ask["what"] == "topic":
        print(json.dumps(first_topic(ask["path"])), flush=True)
        continue
    gc.collect()
    gc.disable()
    t = time.process_time()
    run(ask["what"], ask["path"], ask["topic"], ask["mid"])
    t = time.process_time() - t
    gc.enable()
    print(json.dumps(t), flush=True)
'''

# numpy and the standard modules the reader uses are imported before the clock starts
_IMPORTS = (
    "import time, sys; sys.path.insert(0, {src!r}); import polybag, numpy, struct, threading, mmap,"
    " pickle, platform, ctypes, textwrap, zlib;"
    " t = time.process_time(); import polybag.formats.registry, polybag.formats.ulog.reader;"
    " print(time.process_time() - t)"
)


class Side:
    """One side's long-lived process: ``polybag`` from a source tree, or ``pyulog``."""

    def __init__(self, kind: str, src: str = "") -> None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        self.p = subprocess.Popen(
            [sys.executable, "-c", _WORKER, kind, src], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def ask(self, **what: Any) -> Any:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(json.dumps(what) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait()


def import_time(src: str, repeat: int) -> float:
    """The best CPU time of the ULog reader's imports after ``import polybag`` in a fresh
    process, with the bytecode of ``src`` compiled into ``bench/data/.pycache``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(ROOT / "bench" / "data" / ".pycache")
    code = _IMPORTS.format(src=src)
    times = []
    for _ in range(repeat + 1):  # the first run compiles
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return min(times[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--fresh-repeat", type=int, default=15)
    ap.add_argument("--against", default="", help="another polybag source tree (its src/ folder)")
    ap.add_argument("--files", nargs="*", default=None)
    a = ap.parse_args()
    files = [Path(f) for f in a.files] if a.files else sorted(CORPUS.glob("*.ulg"))
    sides = {"polybag": Side("polybag", str(ROOT / "src")), "pyulog": Side("pyulog")}
    if a.against:
        sides["against"] = Side("polybag", str(Path(a.against).resolve()))
    head = f"{'file':<46} {'row':<6} {'polybag ms':>10} {'pyulog ms':>10} {'ratio':>6}"
    print(head + (f" {'against ms':>10} {'this/against':>12}" if a.against else ""))
    try:
        for path in files:
            topic, mid = sides["polybag"].ask(what="topic", path=str(path))
            for what in ("open", "first", "info"):
                best = dict.fromkeys(sides, float("inf"))
                order = list(sides)
                for i in range(a.repeat):
                    for name in order if i % 2 == 0 else order[::-1]:
                        t = sides[name].ask(what=what, path=str(path), topic=topic, mid=mid)
                        best[name] = min(best[name], t)
                pb, pu = best["polybag"] * 1e3, best["pyulog"] * 1e3
                line = f"{path.name:<46} {what:<6} {pb:10.2f} {pu:10.2f} {pu / pb:5.1f}x"
                if a.against:
                    ag = best["against"] * 1e3
                    line += f" {ag:10.2f} {pb / ag:12.3f}"
                print(line, flush=True)
    finally:
        for s in sides.values():
            s.close()
    print(f"\nimports when a ULog is first opened (fresh process, best of {a.fresh_repeat}, ms):")
    print(f"  this tree {import_time(str(ROOT / 'src'), a.fresh_repeat) * 1e3:.2f}")
    if a.against:
        print(f"  against   {import_time(str(Path(a.against).resolve()), a.fresh_repeat) * 1e3:.2f}")


if __name__ == "__main__":
    main()
