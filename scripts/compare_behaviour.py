"""Record what polybag does with real logs, to compare two versions of the code (a refactor's
"old vs new" check, issue 29).

    # with the tree to record first on sys.path (PYTHONPATH=/path/to/src), then compare:
    PYTHONPATH=old/src python scripts/compare_behaviour.py record old.json
    PYTHONPATH=new/src python scripts/compare_behaviour.py record new.json
    python scripts/compare_behaviour.py diff old.json new.json

``record`` opens every log of ``../shared/corpora``, ``tests/corpus`` and ``samples`` (and
copies of them cut in half and with a flipped byte in the middle) through the public API
and the command line, in-process, and writes one digest per (log, question): the summary;
the messages in log-time order, file order, reversed, a time window and one topic (topic,
times, sequence and a hash of the bytes); decoded dictionaries of the first messages of each
topic; the warnings; ``info --json``, ``check``, ``cat -n 5`` (output, exit code); and
``convert`` to MCAP, bag and rosbag2 (exit code, messages of the output).  Paths of the
machine are replaced by placeholders so two checkouts compare equal.  Uses only what both
versions have: ``polybag.open``, ``Reader`` methods and ``polybag.cli.main``.

``diff`` prints every (log, question) whose digest differs and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
SUFFIXES = {".bag", ".mcap", ".ulg", ".ulog", ".db3", ".active"}
DECODED_PER_TOPIC = 5


def _inputs() -> list[Path]:
    out: list[Path] = []
    for base in (CORPORA, ROOT / "tests" / "corpus", ROOT / "samples"):
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and p.suffix in SUFFIXES and p.stat().st_size < (64 << 20):
                if p.suffix == ".db3" and (p.parent / "metadata.yaml").is_file():
                    continue  # a rosbag2 directory: opened as the directory below
                out.append(p)
            elif p.is_dir() and (p / "metadata.yaml").is_file():
                out.append(p)
    return out


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _h(obj: Any) -> str:
    text = _ADDRESS.sub("", json.dumps(obj, sort_keys=True, default=repr))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Scrub:
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = sorted(pairs, key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        for real, name in self.pairs:
            text = text.replace(real, name)
        return text


def _error(e: BaseException, scrub: Scrub) -> str:
    return f"{type(e).__name__}: {scrub(str(e))}"


def _messages(r: Any, **kw: Any) -> dict[str, Any]:
    rows = []
    err = None
    try:
        for m in r.messages(**kw):
            rows.append((m.channel.topic, m.log_time, m.publish_time, m.sequence, hashlib.sha1(bytes(m.data)).hexdigest()[:12]))
    except Exception as e:  # noqa: BLE001 - recorded, compared
        err = f"{type(e).__name__}"
    return {"n": len(rows), "hash": _h(rows), "error": err}


def _summary(r: Any, scrub: Scrub) -> Any:
    s = r.summary
    chans = sorted(
        (c.topic, c.message_encoding, c.schema.name if c.schema else None, c.schema.encoding if c.schema else None)
        for c in s.channels.values()
    )
    counts = sorted((s.channels[k].topic, v) for k, v in s.message_counts.items() if k in s.channels)
    return {
        "channels": chans,
        "counts": counts,
        "start": s.start_time,
        "end": s.end_time,
        "n": s.message_count,
        "head": [s.format, s.profile, s.library, s.version, s.indexed, s.attachment_count, s.metadata_count],
        "chunks": _h([repr(c) for c in s.chunks]),
        "extras": _h(scrub(_ADDRESS.sub("", json.dumps(s.extras, sort_keys=True, default=repr)))),
    }


def _decoded(r: Any) -> Any:
    seen: dict[str, int] = {}
    out = []
    try:
        for m in r.messages(order="file"):
            t = m.channel.topic
            if seen.get(t, 0) >= DECODED_PER_TOPIC:
                continue
            seen[t] = seen.get(t, 0) + 1
            try:
                out.append((t, _h(m.to_dict())))
            except Exception as e:  # noqa: BLE001
                out.append((t, type(e).__name__))
    except Exception as e:  # noqa: BLE001
        out.append(("!", type(e).__name__))
    return _h(out), len(out)


def _api(path: Path, scrub: Scrub) -> dict[str, Any]:
    import polybag

    res: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = polybag.open(str(path))
        except Exception as e:  # noqa: BLE001
            return {"open": _error(e, scrub)}
        with r:
            for name, fn in (
                ("summary", lambda: _summary(r, scrub)),
                ("log_order", lambda: _messages(r)),
                ("file_order", lambda: _messages(r, order="file")),
                ("reverse", lambda: _messages(r, reverse=True)),
            ):
                try:
                    res[name] = fn()
                except Exception as e:  # noqa: BLE001
                    res[name] = _error(e, scrub)
            try:
                s = r.summary
                if s.start_time is not None and s.end_time is not None and s.end_time > s.start_time:
                    q = (s.end_time - s.start_time) // 4
                    res["window"] = _messages(r, start=s.start_time + q, end=s.end_time - q)
                topics = sorted({c.topic for c in s.channels.values()})
                if topics:
                    res["one_topic"] = _messages(r, topics=[topics[0]])
            except Exception as e:  # noqa: BLE001
                res["window"] = _error(e, scrub)
            res["decoded"] = _decoded(r)
    res["warnings"] = sorted({f"{w.category.__name__}: {scrub(str(w.message))}" for w in caught})
    return res


def _cli(argv: list[str], scrub: Scrub) -> dict[str, Any]:
    from polybag.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    code: Any
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        except Exception as e:  # noqa: BLE001
            code = f"raised {type(e).__name__}"
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(scrub(stream.buffer.getvalue().decode("utf-8", "replace")))  # type: ignore[attr-defined]
    return {"code": code, "stdout": texts[0], "stderr": texts[1]}


def _digest_output(path: Path, scrub: Scrub) -> Any:
    import polybag

    try:
        with polybag.open(str(path)) as r:
            return {"summary": _summary(r, scrub), "msgs": _messages(r)}
    except Exception as e:  # noqa: BLE001
        return _error(e, scrub)


def _damaged_copies(src: Path, tmp: Path) -> Iterator[tuple[str, Path]]:
    if not src.is_file() or src.stat().st_size < 64:
        return
    data = src.read_bytes()
    cut = tmp / f"cut{src.suffix}"
    cut.write_bytes(data[: len(data) // 2])
    yield "cut", cut
    flip = tmp / f"flip{src.suffix}"
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    flip.write_bytes(bytes(b))
    yield "flip", flip


def record(out_path: Path, limit: int | None, suffixes: tuple[str, ...] = ()) -> None:
    import polybag

    results: dict[str, Any] = {"polybag": os.path.dirname(polybag.__file__)}
    inputs = _inputs()
    if suffixes:  # only logs whose name ends so (e.g. .mcap), and rosbag2 directories for "/"
        inputs = [p for p in inputs if str(p).lower().endswith(suffixes) or ("/" in suffixes and Path(p).is_dir())]
    inputs = inputs[:limit] if limit else inputs
    for i, path in enumerate(inputs):
        rel = str(path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path)
        print(f"[{i + 1}/{len(inputs)}] {rel}", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="pb-compare-") as tmpd:
            tmp = Path(tmpd)
            scrub = Scrub([(str(path), "<IN>"), (tmpd, "<TMP>"), (str(ROOT.parent), "<WORK>")])
            small = "mcap-conformance" in path.parts  # 416 tiny files: the API and info only
            variants: list[tuple[str, Path]] = [("", path)]
            if not small:
                variants += list(_damaged_copies(path, tmp))
            for tag, p in variants:
                sc = Scrub([*scrub.pairs, (str(p), "<IN>")])
                key = rel + (f" [{tag}]" if tag else "")
                entry: dict[str, Any] = {"api": _api(p, sc)}
                entry["info"] = _cli(["info", "--json", str(p)], sc)
                if small:
                    results[key] = entry
                    continue
                entry["check"] = _cli(["check", str(p)], sc)
                entry["cat"] = _cli(["cat", "-n", "5", str(p)], sc)
                if not tag:
                    for fmt, ext in (("mcap", ".mcap"), ("bag", ".bag"), ("rosbag2", "")):
                        dst = tmp / f"out-{fmt}{ext}"
                        got = _cli(["convert", "-F", fmt, str(p), str(dst)], sc)
                        got["output"] = _digest_output(dst, sc) if dst.exists() else None
                        entry[f"convert_{fmt}"] = got
                        if dst.is_dir():
                            shutil.rmtree(dst)
                        elif dst.exists():
                            dst.unlink()
                results[key] = entry
    out_path.write_text(json.dumps(results, indent=1, sort_keys=True, default=repr))
    print(f"{len(results) - 1} logs recorded in {out_path}", file=sys.stderr)


# what differs from run to run: durations and rates in the summary lines
_TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|min|[KMG]?B/s|msg/s)\b")


def _steady(obj: Any) -> Any:
    if isinstance(obj, str):
        return _TIMING.sub("<T>", obj)
    if isinstance(obj, dict):
        return {k: _steady(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_steady(v) for v in obj]
    return obj


def diff(a_path: Path, b_path: Path) -> int:
    a = _steady(json.loads(a_path.read_text()))
    b = _steady(json.loads(b_path.read_text()))
    bad = 0
    for key in sorted(set(a) | set(b)):
        if key == "polybag":
            continue
        ea, eb = a.get(key), b.get(key)
        if ea is None or eb is None:
            print(f"{key}: only in {'new' if ea is None else 'old'}")
            bad += 1
            continue
        for q in sorted(set(ea) | set(eb)):
            if ea.get(q) != eb.get(q):
                bad += 1
                print(f"{key}: {q} differs")
                _show(ea.get(q), eb.get(q))
    n = len(set(a) - {"polybag"})
    print(f"{n} logs compared, {bad} differences", file=sys.stderr)
    return 1 if bad else 0


def _show(x: Any, y: Any, indent: str = "    ") -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if x.get(k) != y.get(k):
                print(f"{indent}{k}:")
                _show(x.get(k), y.get(k), indent + "  ")
        return
    print(f"{indent}old: {str(x)[:400]}")
    print(f"{indent}new: {str(y)[:400]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--limit", type=int)
    rec.add_argument("--only", action="append", default=[], metavar="SUFFIX", help="only logs named ...SUFFIX (.mcap, .bag, .ulg; / for rosbag2 directories); repeatable")
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args.out, args.limit, tuple(s.lower() for s in args.only))
        return 0
    return diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
