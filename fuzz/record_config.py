"""The ``record_config`` target: hostile ``polybag record --config`` files (issue 26).

Each case is a YAML config -- built from valid recorder entries whose fields are then set
to hostile values (names and paths with ``..``, ``./``, extensions, folders, symlinked
folders, NUL and control characters, huge numbers, ``.nan``/``.inf``, wrong types, unknown
and repeated keys, many recorders), sometimes with a YAML alias bomb, a recursive alias or
byte-level damage -- and a layout of entries planted in the case's output folder first:
files and ``NAME.active`` files at the names the recorders will use, symbolic links there
pointing into a sentinel tree outside the folder (to a file, or to a name that does not
exist yet), a sub-folder and a link to it.

The config is loaded (:func:`polybag.record.group.load_config`, as ROS 1 and as ``--ros2``);
when it is accepted, the recorders are run in-process (a :class:`RecorderGroup` with
``live=False``, started, fed a few messages, snapshot recorders triggered, closed).

Invariants beyond "only PolybagError comes out":

- no two accepted recorders share an output path (normalized, absolute, folder symlinks
  resolved; planned again it gives the same names), and every output lies in the case's
  folder;
- the sentinel tree outside the folder is the same after the case, byte for byte, link
  for link; every planted entry is unchanged (never opened, never replaced);
- a new entry in the folder is one of the files the recorders report (nothing else, no
  ``NAME.active`` left), no two recorders report one file, and the folder holds at most
  :data:`MAX_CASE_BYTES` afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fuzz.mutate import generic
from fuzz.sandbox import InvariantBroken, snapshot
from fuzz.targets import Stats, Target, attempt, pack, unpack

#: the most bytes a case may leave in its output folder
MAX_CASE_BYTES = 32 << 20

STRING_MD5 = "992ce8a1687cec8c8bd883ec73ca41d1"

NAMES = (
    "x", "x.bag", "./x", "./x.bag", "x.mcap", "x_0", "x_1.bag", "same.bag", "./same.bag", "d/x", "d/../x",
    "d/./x.bag", "link/x", "link/x.bag", "../x", "../sentinel/keep", "d/../../x", "..", ".", "d/", "", " ",
    "run", "run.bag.active", "crash", "./crash", "crash.bag", "p_2026-01-02-03-04-05", "x\x00y", "x\ny",
    "\x1b[2Jx", "a" * 300, "a" * 5000, "ünï", "x.db3", "x.BAG", "X.bag", "metadata.yaml", "~/x", "$HOME/x",
    "file:///tmp/x", "http://h/x",
)  # fmt: skip
DIRECTORIES = (".", "d", "./d", "link", "d/..", "..", "../sentinel", "missing", "d\x00", "", "x.bag")
NUMBERS: tuple[Any, ...] = (
    0, 1, 0.5, -1, 1e-300, 1e300, 1e400, -1e400, float("nan"), float("inf"), float("-inf"), 2**63, 2**64 + 1,
    10**40, True, False, None, "5m", "1G", "nan", "inf", "9" * 400, "-5", "1e9", [], {}, "0", "1000T",
)  # fmt: skip
TOPICS: tuple[Any, ...] = ("/a", "/b", "/c", "a", "/a\x00", "(", ".*", "/" + "t" * 5000, 1, None, "")
KEYS = (
    "topics", "topic", "all", "regex", "exclude", "quiet", "publish", "output_prefix", "output_name",
    "output-name", "--output-name", "split", "max_splits", "size", "duration", "buffsize", "chunksize",
    "limit", "min_space", "bz2", "lz4", "compression", "node", "tcpnodelay", "udp", "repeat_latched",
    "snapshot", "snapshot_window", "namespace", "format", "directory", "unknown", "append_date", "name_tag",
)  # fmt: skip
#: what the case folder can hold before the recorders run
PLANTS = ("file", "active-file", "link-file", "link-dangling", "active-link", "dir")


def _size(root: Path) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for n in filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, n)).st_size
    return total


def _entry(rng: random.Random) -> dict[str, Any]:
    """A valid recorder entry (then mutated)."""
    e: dict[str, Any] = {"topics": rng.choice((["/a"], ["/b"], ["/a", "/b"], "/c")), "min_space": 0, "quiet": True}
    kind = rng.random()
    if kind < 0.35:
        e["output_name"] = rng.choice(("x", "x.bag", "same.bag", "d/x", "run", "x.mcap", "link/y"))
    elif kind < 0.6:
        e["output_prefix"] = rng.choice(("crash", "./crash", "d/p", "crash.bag"))
    if rng.random() < 0.2:
        e["split"] = True
        e["size"] = rng.choice((0.0001, 1, 5))
    if rng.random() < 0.15:
        e["snapshot"] = True
    if rng.random() < 0.15:
        e["directory"] = rng.choice(("d", "link", "."))
    if rng.random() < 0.1:
        e["format"] = "mcap"
    return e


def _mutate_entry(rng: random.Random, e: dict[str, Any]) -> None:
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        key = rng.choice(KEYS)
        r = rng.random()
        if key in ("output_name", "output-name", "--output-name", "output_prefix"):
            e[key] = rng.choice(NAMES) if r < 0.9 else rng.choice(NUMBERS)
        elif key == "directory":
            e[key] = rng.choice(DIRECTORIES) if r < 0.9 else rng.choice(NUMBERS)
        elif key in ("topics", "topic"):
            e[key] = [rng.choice(TOPICS) for _ in range(rng.choice((0, 1, 2)))] if r < 0.7 else rng.choice(TOPICS)
        elif key in ("all", "regex", "quiet", "publish", "bz2", "lz4", "tcpnodelay", "udp", "repeat_latched", "snapshot"):
            e[key] = rng.choice((True, False, 1, "yes", None))
        elif key in ("compression", "format", "namespace", "exclude", "node"):
            e[key] = rng.choice(("none", "lz4", "bz2", "bag", "mcap", "rosbag2", "/ns", "bad ns", "(", "\x00", "a" * 5000, 5, None))
        else:
            e[key] = rng.choice(NUMBERS)


def _plants(rng: random.Random) -> list[list[str]]:
    names = ["x.bag", "x.bag.active", "same.bag", "run.bag", "x_1.bag", "x_0.bag", "d/x.bag", "x.mcap", "x", "y.bag"]
    now = time.time()
    from polybag.record.options import stamp

    for t in (now, now + 1, now + 2):  # the date names recorders are about to take
        names += [f"{stamp(t)}.bag", f"crash_{stamp(t)}.bag", f"{stamp(t)}.bag.active", f"{stamp(t)}_rec1.bag"]
    return [[rng.choice(names), rng.choice(PLANTS)] for _ in range(rng.choice((0, 0, 1, 2, 4)))]


def _bomb(rng: random.Random) -> str:
    kind = rng.choice(("laughs", "recursive", "deep", "merge"))
    if kind == "laughs":
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, rng.choice((3, 6, 9))):
            lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
        return "\n".join(lines) + f"\nrecorders:\n  - {{topics: *a{len(lines) - 1}}}\n"
    if kind == "recursive":
        return "recorders: &r [{topics: [/a]}, *r]\n"
    if kind == "deep":
        n = rng.choice((20, 40, 2000))
        return "recorders: " + "[" * n + "]" * n + "\n"
    return "base: &b {topics: [/a], output_name: same.bag}\nrecorders:\n  - {<<: *b}\n  - {<<: *b, quiet: true}\n"


class RecordConfig(Target):
    name = "record_config"
    doc = "record --config YAML files (paths, symlinks, NUL, nan/inf, aliases, many recorders) loaded and run in-process"

    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="polybag-fuzz-recconf-"))
        self.sentinel = self.root / "sentinel"
        self.sentinel.mkdir()
        (self.sentinel / "keep").write_bytes(b"keep me\n")
        (self.sentinel / "run.bag").write_bytes(b"not polybag's\n")
        (self.sentinel / "dir").mkdir()
        (self.sentinel / "dir" / "inner.txt").write_bytes(b"and me\n")
        self.before = snapshot(self.sentinel)
        self.case = self.root / "out"
        self.home = os.getcwd()
        self.info["seeds"] = 0

    def teardown(self) -> None:
        os.chdir(self.home)
        shutil.rmtree(self.root, ignore_errors=True)

    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        import yaml

        if pool and rng.random() < 0.3:
            got = unpack(rng.choice(pool))
            if got is not None and len(got[1]) == 3:
                text, layout, flags = got[1]
                if rng.random() < 0.5:
                    text = generic(rng, text)[: 1 << 16]
                else:
                    layout = json.dumps(_plants(rng)).encode()
                return pack(b"RC", [text, layout, flags])
        r = rng.random()
        if r < 0.08:
            text = _bomb(rng)
        else:
            n = rng.choice((1, 2, 2, 3, 4, 6)) if r < 0.97 else rng.choice((64, 65, 300))
            entries = [_entry(rng) for _ in range(n)]
            for e in entries:
                if rng.random() < 0.4:
                    _mutate_entry(rng, e)
            doc: dict[str, Any] = {"recorders": entries}
            if rng.random() < 0.1:
                doc[rng.choice(("master_uri", "namespace", "node_name", "extra"))] = rng.choice(
                    ("http://127.0.0.1:9", "ftp://x", "/ns", "a b", "\x00", 5, "/record")
                )
            try:
                text = yaml.safe_dump(doc, allow_unicode=rng.random() < 0.5)
            except yaml.YAMLError:
                text = "recorders: [{topics: [/a]}]\n"
            if rng.random() < 0.1:  # a key twice, or an entry repeated by alias
                text = text.replace("- ", "- &e ", 1) + "  - *e\n" if rng.random() < 0.5 else text + text.splitlines()[0] + "\n"
        data = text.encode("utf-8", "surrogatepass")
        if rng.random() < 0.1:
            data = generic(rng, data)[: 1 << 16]
        flags = bytes([rng.randrange(256)])
        return pack(b"RC", [data, json.dumps(_plants(rng)).encode(), flags])

    # --- one case ------------------------------------------------------------------------------------
    def _lay_out(self, layout: list[Any]) -> None:
        w = self.case
        shutil.rmtree(w, ignore_errors=True)
        w.mkdir()
        (w / "d").mkdir()
        (w / "link").symlink_to("d")
        for item in layout:
            if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
                continue
            name, kind = item
            if "\x00" in name or name.startswith("/") or ".." in name:
                continue
            p = w / name
            if os.path.lexists(p) or os.path.lexists(str(p) + ".active"):
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            if kind == "file":
                p.write_bytes(b"planted\n")
            elif kind == "active-file":
                Path(str(p) + ".active").write_bytes(b"a recording in progress\n")
            elif kind == "link-file":
                p.symlink_to(self.sentinel / "keep")
            elif kind == "link-dangling":
                p.symlink_to(self.sentinel / "new-file")
            elif kind == "active-link":
                Path(str(p) + ".active").symlink_to(self.sentinel / "run.bag")
            elif kind == "dir":
                p.mkdir()

    def run(self, data: bytes, stats: Stats) -> None:
        got = unpack(data)
        if got is None or len(got[1]) != 3:
            return
        text, layout_raw, flags = got[1]
        try:
            layout = json.loads(layout_raw.decode("utf-8", "replace"))
        except ValueError:
            layout = []
        self._lay_out(layout if isinstance(layout, list) else [])
        w = self.case
        (w / "c.yaml").write_bytes(text)
        before = snapshot(w)
        os.chdir(w)
        try:
            self._case(stats, flags[0] if flags else 0, before)
        finally:
            os.chdir(self.home)

    def _case(self, stats: Stats, flag: int, before: dict[str, tuple[str, str]]) -> None:
        from polybag.record.group import load_config

        w = self.case
        ros2 = flag & 5 == 5  # (a quarter of the cases load as --ros2: planned, not recorded)
        cfg: dict[str, Any] | None = attempt(lambda: load_config("c.yaml", ros2=ros2))
        reports: list[dict[str, Any]] = []
        if cfg is not None:
            recs = cfg["recorders"]
            stats.mark("recorders", len(recs))
            self._check_plan(recs, ros2=ros2)
            if not ros2:
                reports = self._record(recs, stats, flag)
        self._check_after(before, reports)
        if _size(w) > MAX_CASE_BYTES:
            raise InvariantBroken(f"the case left {_size(w)} bytes in its folder")

    def _check_plan(self, recs: list[Any], *, ros2: bool) -> None:
        from polybag.record.files import path_key
        from polybag.record.group import plan_outputs

        again = plan_outputs(recs, ros2=ros2)
        if [o.name_tag for o in again] != [o.name_tag for o in recs]:
            raise InvariantBroken("planning the accepted recorders again changed their names")
        # (lexically: a config's relative paths never climb out; a planted link to a folder
        # outside is the user's own choice of folder, and the sentinel check covers it)
        top = os.path.abspath(self.case)
        seen: dict[str, int] = {}
        for i, o in enumerate(recs):
            name = o.file_name(0 if o.split else None, 0.0)
            given = o.output_name or o.output_prefix or ""
            if ros2 and o.output_format != "mcap" and not given.lower().endswith(".bag"):
                name = name[: -len(".bag")]  # (ROS 2: a rosbag2 bag directory)
            first = path_key(name)
            if not (os.path.abspath(name) + os.sep).startswith(top + os.sep):
                raise InvariantBroken(f"recorders[{i}] writes {name}, outside the case folder")
            if first in seen:
                raise InvariantBroken(f"recorders[{seen[first]}] and recorders[{i}] both write {first}")
            seen[first] = i

    def _record(self, recs: list[Any], stats: Stats, flag: int) -> list[dict[str, Any]]:
        from polybag.record.group import RecorderGroup

        for o in recs:
            o.quiet = True
        group = attempt(lambda: RecorderGroup(recs, live=False, log=lambda _text: None))
        if group is None:
            return []
        if attempt(group.start) is None and not group._started:
            return []
        try:
            t0 = 1_700_000_000_000_000_000
            for i in range(3 + flag % 8):
                for topic in ("/a", "/b", "/c"):
                    raw = f"{topic}{i}".encode() * (1 + (flag >> 4))
                    attempt(
                        lambda raw=raw, topic=topic, i=i: group.write(
                            topic, len(raw).to_bytes(4, "little") + raw, "std_msgs/String",
                            md5sum=STRING_MD5, definition="string data\n", receive_time=t0 + i * 1000,
                        )
                    )  # fmt: skip
            if flag & 2:
                for fut in group.trigger():
                    attempt(lambda fut=fut: fut.result(30))
        finally:
            attempt(lambda: group.close(raise_errors=False))
        reports = [r.report() for r in group.recorders]
        stats.mark("files", sum(len(rep["files"]) for rep in reports))
        return reports

    def _check_after(self, before: dict[str, tuple[str, str]], reports: list[dict[str, Any]]) -> None:
        from polybag.record.files import path_key

        now = snapshot(self.sentinel)
        if now != self.before:
            bad = sorted(k for k in set(now) | set(self.before) if now.get(k) != self.before.get(k))
            shutil.rmtree(self.sentinel)
            self.setup_sentinel_again()
            raise InvariantBroken(f"the sentinel tree outside the case folder changed: {bad[:5]}")
        after = snapshot(self.case)
        changed = [k for k in before if after.get(k) != before[k]]
        if changed:
            raise InvariantBroken(f"planted entries changed: {changed[:5]}")
        top = os.path.realpath(self.case)
        reported: dict[str, int] = {}
        for i, rep in enumerate(reports):
            for f in rep["files"] + rep["deleted"]:
                k = path_key(f)
                if k in reported and reported[k] != i:
                    raise InvariantBroken(f"recorders[{reported[k]}] and recorders[{i}] both wrote {k}")
                reported[k] = i
        for k in after:
            if k in before:
                continue
            real = os.path.realpath(os.path.join(self.case, k))
            if k.endswith(".active") or ".active/" in k:
                raise InvariantBroken(f"{k} left behind")
            if os.path.isdir(real) and not os.path.islink(os.path.join(self.case, k)):
                if any(r.startswith(real + os.sep) for r in reported):
                    continue  # (a folder the outputs are in: a rosbag2 bag)
            inside_reported = path_key(os.path.join(self.case, k)) in reported or any(
                path_key(os.path.join(self.case, k)).startswith(r + os.sep) for r in reported
            )
            if not inside_reported or not (real + os.sep).startswith(top + os.sep):
                raise InvariantBroken(f"{k}: a new entry no recorder reports")

    def setup_sentinel_again(self) -> None:
        s = self.sentinel
        s.mkdir()
        (s / "keep").write_bytes(b"keep me\n")
        (s / "run.bag").write_bytes(b"not polybag's\n")
        (s / "dir").mkdir()
        (s / "dir" / "inner.txt").write_bytes(b"and me\n")


TARGETS = [RecordConfig]
