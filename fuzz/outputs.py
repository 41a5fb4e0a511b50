"""The ``outputs`` target: commands that write, over hostile directory trees (issue 26).

Each case lays out a small tree of entries -- logs (MCAP, ROS 1 bag), rosbag2 bag directories
(exactly a bag, a bag with something else in it, a fake one), text and empty files, nested
directories, ``NAME.active`` folders holding notes, symbolic links pointing outside to a
sentinel tree (to a log, a bag, a text file, a name that does not exist yet) or inside -- and
runs one command on it: ``convert`` (to MCAP, bag, rosbag2), ``filter``, ``sort``, ``merge``,
``split``, ``export``, rosbag2 ``reindex`` and ``compress``, with or without ``--force``
(``overwrite``), its output chosen among existing names, new names, the input itself, the
folder holding the input, names inside an input bag directory.

Invariants beyond "only PolybagError comes out":

- the sentinel tree outside the case is the same after it, byte for byte, link for link;
- nothing in the case tree changes but the outputs the command was asked for (an output's
  path, the tables/parts of its output folder, a compressed or reindexed input and its
  backup), and an input never changes (but for in-place ``compress``/``reindex``);
- an existing output that changed was something polybag may replace: a log file (by its
  kind), exactly a bag directory, a table file of the kind written;
- no ``NAME.active``, ``.NAME.*.tmp`` or ``NAME.replaced-*`` is left behind, and nothing in
  the worker's private ``TMPDIR``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polybag
from fuzz.sandbox import InvariantBroken, changed, empty, snapshot
from fuzz.targets import Stats, Target, attempt, pack, unpack

#: what a tree entry can be
KINDS = (
    "mcap", "bag", "bagdir", "bagdir-mcap", "bagdir+extra", "fakebag", "text", "empty", "dir",
    "activedir", "link-log", "link-bag", "link-text", "link-dangling", "link-inside",
)  # fmt: skip
#: kinds that ``--force`` may replace (a log file, exactly a bag)
REPLACEABLE = {"mcap", "bag", "bagdir", "bagdir-mcap"}
NAMES = (
    "in.mcap", "in.bag", "out.mcap", "out.bag", "out", "runs", "bag", "t", "x.db3", "in_000.mcap",
    "in_001.mcap", "out.mcap.active", "out.active", "a.b.csv", "a.b.csv.active", "a_b.jsonl",
    "in.orig.mcap", "bag.orig", "metadata.yaml", "metadata.yaml.tmp", "notes.txt", "monday.mcap",
    "session.active", "sub",
)  # fmt: skip
DIRS = ("", "d1", "d1/d2", "d3")
COMMANDS = ("convert", "filter", "sort", "merge", "split", "export", "reindex", "compress")
LEFTOVER = re.compile(r"(\.active$)|(^\..*\.tmp$)|(\.replaced-[0-9a-f]{8}$)|(\.new$)|(\.old$)")


def _under(rel: str, top: str) -> bool:
    """Whether the relative path ``rel`` is ``top`` or lies under it (``.``: everything)."""
    top = os.path.normpath(top)
    return top == "." or rel == top or rel.startswith(top + "/")


class Outputs(Target):
    name = "outputs"
    doc = "commands that write (convert/filter/sort/merge/split/export/reindex/compress, --force) over hostile trees"

    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="polybag-fuzz-outputs-"))
        self.tmp = self.root / "tmp"
        self.tmp.mkdir()
        os.environ["TMPDIR"] = str(self.tmp)
        tempfile.tempdir = str(self.tmp)
        made = self.made = self.root / "made"
        made.mkdir()
        log = made / "log.mcap"
        with polybag.Writer(str(log)) as w:
            s = w.add_schema("std_msgs/String", "ros1msg", b"string data\n")
            chans = [w.add_channel(t, "ros1", s) for t in ("/a/b", "/a.b", "/a b", "/c")]
            for i in range(40):
                raw = f"m{i}".encode()
                w.write(chans[i % 4], len(raw).to_bytes(4, "little") + raw, 1_000_000_000 + i * 50_000_000)
        from polybag import ops

        ops.convert(str(log), str(made / "log.bag"))
        for name, storage in (("bag", "sqlite3"), ("bagm", "mcap")):
            with polybag.Writer(str(made / name), format="rosbag2", storage=storage) as w:
                s = w.add_schema("std_msgs/msg/String", "ros2msg", b"string data\n")
                a, b = w.add_channel("/x/y", "cdr", s), w.add_channel("/x.y", "cdr", s)
                for i in range(30):
                    w.write(a if i % 2 else b, b"\x00\x01\x00\x00\x04\x00\x00\x00abc\x00", 2_000_000_000 + i * 10**8)
        self.sentinel = self.root / "sentinel"
        self._make_sentinel()
        self.before = snapshot(self.sentinel)
        self.info["seeds"] = 0

    def _make_sentinel(self) -> None:
        s = self.sentinel
        shutil.rmtree(s, ignore_errors=True)
        s.mkdir()
        shutil.copyfile(self.made / "log.mcap", s / "precious.mcap")
        shutil.copytree(self.made / "bag", s / "precious_bag")
        (s / "notes.txt").write_bytes(b"keep me\n")
        (s / "dir").mkdir()
        (s / "dir" / "inner.txt").write_bytes(b"and me\n")

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # --- inputs -----------------------------------------------------------------------------
    def generate(self, rng: random.Random, pool: Sequence[bytes]) -> bytes:
        if pool and rng.random() < 0.3:
            got = unpack(rng.choice(pool))
            if got is not None and got[1]:
                try:
                    spec = json.loads(got[1][0])
                    if rng.random() < 0.5:
                        spec["cmd"]["force"] = not spec["cmd"].get("force")
                    else:
                        spec["entries"].append(self._entry(rng))
                    return pack(b"OU", [json.dumps(spec).encode()])
                except (ValueError, KeyError, TypeError, AttributeError):
                    pass
        entries = [["d1", "dir"], ["d1/d2", "dir"], ["d3", "dir"]]
        entries += [["in.mcap", "mcap"], ["bag", rng.choice(("bagdir", "bagdir-mcap"))]]
        entries += [self._entry(rng) for _ in range(rng.randint(1, 7))]
        paths = [e[0] for e in entries]
        logs = [e[0] for e in entries if e[1] in ("mcap", "bag", "bagdir", "bagdir-mcap", "link-log", "link-bag")]
        cmd: dict[str, Any] = {"name": rng.choice(COMMANDS), "force": rng.random() < 0.6}
        src = rng.choice(logs) if rng.random() < 0.9 else rng.choice(paths)
        if rng.random() < 0.1 and src.split("/")[-1] == "bag":
            src += rng.choice(("/metadata.yaml", "/bag_0.db3"))
        cmd["src"] = src
        cmd["src2"] = rng.choice(logs)
        d = rng.choice(DIRS)
        choice = rng.random()
        if choice < 0.35:
            out = rng.choice(paths)
        elif choice < 0.5:
            out = src
        elif choice < 0.6:
            out = os.path.dirname(src) or "."
        elif choice < 0.7:
            out = f"{src}/{rng.choice(NAMES)}"
        else:
            out = f"{d}/{rng.choice(NAMES)}".lstrip("/")
        cmd["out"] = out
        cmd["format"] = rng.choice((None, None, "mcap", "bag", "rosbag2"))
        cmd["table"] = rng.choice(("csv", "jsonl", "dataset"))  # dataset: parquet, topic=<table>/part-0.parquet
        cmd["in_place"] = rng.random() < 0.4
        return pack(b"OU", [json.dumps({"entries": entries, "cmd": cmd}).encode()])

    def _entry(self, rng: random.Random) -> list[str]:
        kind = rng.choice(KINDS)
        d = rng.choice(DIRS + ("bag",))
        name = rng.choice(NAMES)
        return [f"{d}/{name}".lstrip("/"), kind]

    # --- a case ---------------------------------------------------------------------------------
    def _lay_out(self, w: Path, entries: list[list[str]]) -> dict[str, str]:
        """Make the entries under ``w`` (the later of two with one name wins, an entry whose
        folder is missing or is not a directory is skipped); returns each path's kind."""
        kinds: dict[str, str] = {}
        for rel, kind in entries:
            if not isinstance(rel, str) or not isinstance(kind, str) or ".." in rel.split("/") or rel.startswith("/"):
                continue
            p = w / rel
            if not p.parent.is_dir() or p.parent.is_symlink() or not _inside_real(p.parent, w):
                continue
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)
            self._make(p, kind)
            kinds[rel] = kind
            for k in list(kinds):  # anything put inside an exact bag spoils it
                if k != rel and _under(rel, k) and kinds[k] in ("bagdir", "bagdir-mcap"):
                    kinds[k] = "bagdir+extra"
        return kinds

    def _make(self, p: Path, kind: str) -> None:
        m, s = self.made, self.sentinel
        if kind == "mcap":
            shutil.copyfile(m / "log.mcap", p)
        elif kind == "bag":
            shutil.copyfile(m / "log.bag", p)
        elif kind in ("bagdir", "bagdir+extra", "bagdir-mcap"):
            src = m / ("bagm" if kind == "bagdir-mcap" else "bag")
            p.mkdir()
            for f in src.iterdir():  # the storage file renamed as metadata.yaml lists it
                shutil.copyfile(f, p / f.name)
            if kind == "bagdir+extra":
                (p / "notes.txt").write_bytes(b"my notes\n")
        elif kind == "fakebag":
            p.mkdir()
            (p / "metadata.yaml").write_bytes(b"rosbag2_bagfile_information:\n  version: 5\n")
            (p / "x_0.db3").write_bytes(b"not sqlite\n")
        elif kind == "text":
            p.write_bytes(b"my notes, not a log\n")
        elif kind == "empty":
            p.write_bytes(b"")
        elif kind == "dir":
            p.mkdir()
        elif kind == "activedir":
            (p / "raw").mkdir(parents=True)
            (p / "raw" / "notes.txt").write_bytes(b"a recording's notes\n")
        elif kind == "link-log":
            p.symlink_to(s / "precious.mcap")
        elif kind == "link-bag":
            p.symlink_to(s / "precious_bag")
        elif kind == "link-text":
            p.symlink_to(s / "notes.txt")
        elif kind == "link-dangling":
            p.symlink_to(s / "dir" / "not_yet.mcap")
        else:  # link-inside
            p.symlink_to(p.parent / "in.mcap" if p.name != "in.mcap" else p.parent / "out.mcap")

    def run(self, data: bytes, stats: Stats) -> None:
        got = unpack(data)
        if got is None or not got[1]:
            return
        try:
            spec = json.loads(got[1][0])
            entries, cmd = spec["entries"], spec["cmd"]
            if not isinstance(entries, list) or not isinstance(cmd, dict):
                return
        except (ValueError, KeyError, TypeError):
            return
        case = self.root / "case"
        shutil.rmtree(case, ignore_errors=True)
        empty(self.tmp)
        w = case / "w"
        w.mkdir(parents=True)
        kinds = self._lay_out(w, entries)
        before = snapshot(w)
        name = str(cmd.get("name"))
        force = bool(cmd.get("force"))
        src = str(w / str(cmd.get("src", "in.mcap")))
        out = str(w / str(cmd.get("out", "out.mcap"))).rstrip("/")
        allowed, inputs = self._allowed(w, name, cmd, src, out)
        stats.mark(f"cmd-{name}-{int(force)}")
        res = attempt(lambda: self._command(name, cmd, src, out, force))
        if res is not None:
            stats.mark(f"ok-{name}")
        self._check(w, before, kinds, allowed, inputs, name)

    def _allowed(self, w: Path, name: str, cmd: dict[str, Any], src: str, out: str) -> tuple[list[Any], list[str]]:
        """What the command may change -- ``("tree", path)``: the path and what is under it;
        ``("names", folder, rx)``: entries of ``folder`` named like ``rx``; ``("new", path)``:
        the path created (a new output folder) -- and its inputs (relative to ``w``)."""
        rel = lambda p: os.path.normpath(os.path.relpath(p, w))  # noqa: E731
        inputs = [rel(src)]
        if name == "merge":
            inputs.append(os.path.normpath(str(cmd.get("src2", "in.mcap"))))
        # a file inside a bag directory stands for the bag (metadata.yaml, a storage file)
        # (not the case folder itself: a metadata.yaml there never makes in.mcap part of a bag)
        inputs += [d for i in inputs if (d := os.path.dirname(i)) and os.path.isfile(w / d / "metadata.yaml")]
        if name in ("convert", "filter", "sort", "merge"):
            return [("tree", rel(out))], inputs
        if name == "split":
            # in place: beside the input; a bag directory named by its metadata.yaml is the input,
            # so its parts go beside the directory
            beside = os.path.dirname(src)
            if os.path.basename(os.path.normpath(src)) == "metadata.yaml":
                beside = os.path.dirname(beside)
            folder = rel(out) if not cmd.get("in_place") else rel(beside)
            # a file's stem; a bag directory's whole name (given as the folder or a file in it)
            base = os.path.basename(os.path.normpath(src))
            stems = {os.path.splitext(base)[0], base, os.path.basename(os.path.dirname(os.path.normpath(src)))}
            rx = "|".join(re.escape(s) for s in sorted(stems) if s)
            return [("names", folder, re.compile(f"(?:{rx})" + r"_\d{3,}(\.[a-z0-9]+)?")), ("new", folder)], inputs
        if name == "export":
            table = str(cmd.get("table", "csv"))
            rx = re.compile(r"topic=.*" if table == "dataset" else r".*\." + table)
            return [("names", rel(out), rx), ("new", rel(out))], inputs
        if name == "reindex":
            from polybag.ops.compress import backup_path

            if os.path.isdir(src):
                return [("tree", rel(os.path.join(src, "metadata.yaml")))], []
            s = os.path.normpath(src)
            return [("tree", rel(s)), ("tree", rel(backup_path(s)))], []
        # compress
        if cmd.get("in_place"):
            from polybag.ops.compress import backup_path

            s = os.path.normpath(src)
            return [("tree", rel(s)), ("tree", rel(backup_path(s)))], []
        base = os.path.basename(os.path.normpath(src)).removesuffix(".active")
        return [("tree", rel(os.path.join(out, base))), ("new", rel(out))], inputs

    def _command(self, name: str, cmd: dict[str, Any], src: str, out: str, force: bool) -> Any:
        from polybag import ops

        fmt = cmd.get("format") if cmd.get("format") in ("mcap", "bag", "rosbag2") else None
        if name == "convert":
            return ops.convert(src, out, format=fmt, overwrite=force)
        if name == "filter":
            return ops.filter(src, out, include_topics=["/a.*", "/x.*"], format=fmt, overwrite=force)
        if name == "sort":
            return ops.sort(src, out, format=fmt, overwrite=force)
        if name == "merge":
            src2 = str(self.root / "case" / "w" / str(cmd.get("src2", "in.mcap")))
            return ops.merge(out, [src, src2], format=fmt, overwrite=force)
        if name == "split":
            outdir = None if cmd.get("in_place") else out
            return ops.split(src, duration="0.3s", output_dir=outdir, format=fmt, overwrite=force)
        if name == "export":
            if cmd.get("table") == "dataset":
                return ops.export(src, out, format="parquet", layout="dataset", overwrite=force)
            return ops.export(src, out, format=str(cmd.get("table", "csv")), overwrite=force)
        if name == "reindex":
            from polybag.formats.rosbag2.reindex import reindex_rosbag2

            if not os.path.isdir(src):
                return _cli(["reindex", src, "-q"] + (["--force"] if force else []))
            return reindex_rosbag2(src, overwrite=force)
        outdir = None if cmd.get("in_place") else out
        return ops.compress(src, output_dir=outdir, force=force)

    def _sentinel_rules(self, w: Path, allowed: list[Any]) -> list[Any]:
        """The rules of ``allowed`` whose path the user named through a symbolic link into the
        sentinel tree (an output folder that is a link is followed: the user named it), as
        paths of the sentinel tree; they allow new entries there only."""
        out = []
        sent = os.path.realpath(self.sentinel)
        for rule in allowed:
            real = os.path.realpath(w / rule[1])
            if real == sent or real.startswith(sent + os.sep):
                out.append((rule[0], os.path.relpath(real, sent), *rule[2:]))
        return out

    def _check(
        self, w: Path, before: dict[str, Any], kinds: dict[str, str], allowed: list[Any], inputs: list[str], name: str
    ) -> None:
        now = snapshot(self.sentinel)
        if now != self.before:
            rules = self._sentinel_rules(w, allowed)
            # new entries only, but for a compress/reindex in place of what the user named
            in_place = name in ("compress", "reindex")
            bad = [
                k for k in changed(self.before, now)
                if (k in self.before and not in_place) or not any(_fits(r, k, self.before) for r in rules)
            ]  # fmt: skip
            if bad:
                self._make_sentinel()
                raise InvariantBroken(f"the sentinel tree outside the case changed: {bad[:5]}")
            self._make_sentinel()
        after = snapshot(w)
        in_place = name in ("compress", "reindex")
        roots = {os.path.normpath(r[1]) for r in allowed}
        for k in changed(before, after):
            moved = in_place and any(after.get(k) == v and os.path.basename(k) == os.path.basename(b) for b, v in before.items())
            if k in after and k not in before and k not in roots and not moved and LEFTOVER.search(os.path.basename(k)):
                raise InvariantBroken(f"{name} left {k} behind")
            rule = next((a for a in allowed if _fits(a, k, before)), None)
            if rule is None:
                raise InvariantBroken(f"{name} changed {k!r}, which is not an output it was asked for")
            for i in inputs:
                if k in before and _under(k, i):
                    raise InvariantBroken(f"{name} changed its input {i!r} ({k!r})")
            if in_place:
                continue
            if rule[0] == "tree" and k != rule[1] and rule[1] in before:
                # inside an output that was there: only exactly a bag is replaced (with its files)
                top = kinds.get(rule[1], "the case folder" if rule[1] == "." else "?")
                if top not in ("bagdir", "bagdir-mcap"):
                    raise InvariantBroken(f"{name} changed {k!r} inside {rule[1]!r}, a {top}")
            if k in before and not (rule[0] == "tree" and k != rule[1]):  # (inside: checked above)
                kind = kinds.get(k, "?")
                table = rule[0] == "names" and name == "export" and kind in ("text", "empty")
                if kind not in REPLACEABLE and not table:
                    raise InvariantBroken(f"{name} replaced {k!r}, a {kind} (not something polybag wrote)")
        left = os.listdir(self.tmp)
        if left:
            empty(self.tmp)
            raise InvariantBroken(f"left in the private TMPDIR: {left[:5]}")


def _fits(rule: Any, k: str, before: dict[str, Any]) -> bool:
    """Whether the change of ``k`` is one ``rule`` allows."""
    if rule[0] == "tree":
        return _under(k, rule[1])
    if rule[0] == "new":
        return k == rule[1] and k not in before
    _, folder, rx = rule  # an entry of the folder named like rx, or what is under it
    folder = os.path.normpath(folder)
    rest = k if folder == "." else k[len(folder) + 1 :] if k.startswith(folder + "/") else None
    return rest is not None and bool(rx.fullmatch(rest.split("/", 1)[0]))


def _inside_real(p: Path, top: Path) -> bool:
    real, t = os.path.realpath(p), os.path.realpath(top)
    return real == t or real.startswith(t + os.sep)


def _cli(args: list[str]) -> int:
    """A CLI command; an "unexpected" error or a traceback on stderr is an escape."""
    from polybag.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    text = err.getvalue()
    if "unexpected" in text or "Traceback" in text:
        raise InvariantBroken(f"polybag {' '.join(args[:1])}: {text.strip()[:300]}")
    return code


TARGETS = [Outputs]
