#!/usr/bin/env python3
"""Architecture figures for ``src/polybag`` (issue 29's before/after), read with :mod:`ast`.

Nothing of polybag is imported: every figure comes from the source text, so the script runs
on a broken tree and on a synthetic package (``tests/test_arch_metrics.py``).

Definitions (what each figure counts):

- **import**: every ``import polybag...`` / ``from polybag... import ...`` (relative ones
  resolved), and ``importlib.import_module("polybag...")`` / ``__import__`` with a literal
  name.  Its *kind*: ``module`` (runs at import time), ``lazy`` (inside a function or
  lambda, or ``import_module``), ``type_checking`` (under ``if TYPE_CHECKING:``; wins over
  lazy).  An edge goes to the deepest module of the tree the import names
  (``from polybag.ops import _common`` -> ``polybag.ops._common``; ``from polybag.ops._common
  import x`` -> ``polybag.ops._common``); the parent packages an import also runs are not edges.
- **circle**: a strongly connected component of the module graph with more than one module;
  the elementary cycles (each listed once, up to ``--cycle-bound`` modules long) are listed
  too.  Counted on three graphs: every import; runtime (without ``TYPE_CHECKING``);
  module-level only (without lazy and ``TYPE_CHECKING``); and every import but those of a
  module from a package that holds it (a subpackage's ``__init__`` defining the errors its
  modules import while importing them: a circle Python tolerates by the order of lines).
- **private import**: ``from polybag.x import _y`` with ``_y`` one leading underscore (not a
  dunder) by a module other than ``polybag.x``; ``_y`` is a *name* or a *module* (a private
  module such as ``_common``).  *Within one package* when the importer's package (a package's
  ``__init__`` is its own package, any other module its parent) is the package that holds
  ``_y``; otherwise *across packages*.
- **format-name comparison** (outside ``formats/``): an ``ast.Compare`` (``==``, ``!=``,
  ``in``, ``not in``, ``is``...) one of whose sides is a string literal, or a tuple/list/set
  literal holding one, equal to a registered format name or alias (read from the
  ``FormatSpec(name=..., aliases=...)`` calls in ``formats/registry.py``; encodings such as
  ``"ros1"`` or ``"cdr"`` are not format names and are not counted), and ``case "mcap":``
  patterns.  A comparison with an attribute named ``*encoding`` on one side
  (``ch.message_encoding == "ulog"``: ULog is an encoding too) is listed apart, not counted.  The subset with a ``.format`` attribute on the other side is what
  ``tests/formats/test_reader_protocol.py::test_no_probing_and_no_format_branches`` forbids.
  Also counted: ``x.ulog is (not) None`` (a format test by attribute) and dict literals
  keyed by format names.
- **getattr probe**: ``getattr(obj, name, default)`` (three arguments); ``hasattr`` apart.
- **largest class**: by lines (``end_lineno - lineno + 1``) and by attributes (distinct
  ``self.x`` assigned in its methods, class-level assignments and ``__slots__``).
- **mixins**: for each class named ``*Reader`` / ``*Recorder``, the polybag classes in its
  MRO other than itself (bases resolved through the module's imports and re-exports).

Usage::

    .venv/bin/python scripts/arch_metrics.py [--json FILE] [--no-mypy] [--no-duplicates]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PKG = ROOT / "src" / "polybag"
FALLBACK_FORMATS = frozenset({"mcap", "bag", "rosbag", "bag1", "ulog", "ulg", "rosbag2", "ros2bag"})


# --- the tree --------------------------------------------------------------------------------
@dataclass
class Tree:
    """A package's modules: dotted name -> file."""

    pkg: Path
    name: str
    files: dict[str, Path] = field(default_factory=dict)
    trees: dict[str, ast.Module] = field(default_factory=dict)

    @classmethod
    def load(cls, pkg: Path) -> Tree:
        pkg = pkg.resolve()
        tree = cls(pkg, pkg.name)
        for path in sorted(pkg.rglob("*.py")):
            parts = [pkg.name, *path.relative_to(pkg).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            tree.files[name] = path
            tree.trees[name] = ast.parse(path.read_text(encoding="utf-8"), str(path))
        return tree

    def rel(self, module: str) -> str:
        return self.files[module].relative_to(self.pkg).as_posix()

    def is_package(self, module: str) -> bool:
        return module in self.files and self.files[module].name == "__init__.py"

    def package_of(self, module: str) -> str:
        return module if self.is_package(module) else module.rpartition(".")[0]

    def deepest(self, dotted: str) -> str | None:
        """The deepest module of the tree that ``dotted`` names (None outside the package)."""
        parts = dotted.split(".")
        while parts:
            name = ".".join(parts)
            if name in self.files:
                return name
            parts.pop()
        return None


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    line: int
    target: str  # the module the edge goes to
    kind: str  # module | lazy | type_checking
    names: tuple[str, ...] = ()  # for `from X import a, b`: a, b
    source: str = ""  # X as written, resolved (`from X import ...`)


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module a ``from`` import names (``level`` dots before ``name``) in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_with_kind(node: ast.AST, kind: str = "module") -> Iterator[tuple[ast.AST, str]]:
    for child in ast.iter_child_nodes(node):
        child_kind = kind
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "module":
            child_kind = "lazy"
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            yield child.test, kind
            for sub in child.body:
                yield sub, "type_checking"
                yield from _walk_with_kind(sub, "type_checking")
            for sub in child.orelse:
                yield sub, kind
                yield from _walk_with_kind(sub, kind)
            continue
        yield child, child_kind
        yield from _walk_with_kind(child, child_kind)


def imports_of(tree: Tree, module: str) -> list[Import]:
    out: list[Import] = []
    is_package = tree.is_package(module)
    prefix = tree.name

    def inside(dotted: str) -> bool:
        return dotted == prefix or dotted.startswith(prefix + ".")

    for node, kind in _walk_with_kind(tree.trees[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = tree.deepest(alias.name) if inside(alias.name) else None
                if target:
                    out.append(Import(module, node.lineno, target, kind, source=alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            if not inside(base):
                continue
            for alias in node.names:
                target = tree.deepest(f"{base}.{alias.name}")
                if target:
                    out.append(Import(module, node.lineno, target, kind, (alias.name,), base))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0].value
            if called in ("import_module", "__import__") and isinstance(arg, str) and inside(arg):
                target = tree.deepest(arg)
                if target:
                    out.append(
                        Import(module, node.lineno, target, "lazy" if kind == "module" else kind, source=arg)
                    )
    return out


def all_imports(tree: Tree) -> list[Import]:
    return [i for module in tree.files for i in imports_of(tree, module)]


# --- circles ---------------------------------------------------------------------------------
def graph(imports: list[Import], kinds: set[str], parent_edges: bool = True) -> dict[str, set[str]]:
    """The module graph of the imports of ``kinds``; without ``parent_edges``, no edge from a
    module to a package holding it (``from polybag.net.ros1 import RosGraphError`` in
    ``polybag.net.ros1.node``)."""
    g: dict[str, set[str]] = defaultdict(set)
    for i in imports:
        if i.kind in kinds and i.target != i.module:
            if parent_edges or not i.module.startswith(i.target + "."):
                g[i.module].add(i.target)
    return g


def components(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    nodes = sorted(set(g) | {t for ts in g.values() for t in ts})
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(g.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def cycles(g: dict[str, set[str]], bound: int, limit: int = 5000) -> tuple[list[list[str]], bool]:
    """Elementary cycles of at most ``bound`` modules, each once (starting at its least module).

    Returns the cycles and whether ``limit`` cut the list.
    """
    out: list[list[str]] = []
    for comp in components(g):
        members = set(comp)
        for start in comp:
            path = [start]
            seen = {start}
            work = [iter(sorted(t for t in g.get(start, ()) if t in members and t >= start))]
            while work:
                nxt = next(work[-1], None)
                if nxt is None:
                    work.pop()
                    seen.discard(path.pop())
                    continue
                if nxt == start:
                    out.append([*path])
                    if len(out) >= limit:
                        return out, True
                elif nxt not in seen and len(path) < bound:
                    path.append(nxt)
                    seen.add(nxt)
                    work.append(iter(sorted(t for t in g.get(nxt, ()) if t in members and t >= start)))
    return sorted(out, key=lambda c: (len(c), c)), False


# --- private names ---------------------------------------------------------------------------
def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(tree: Tree, imports: list[Import]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in imports:
        if not i.names or not _private(i.names[0]):
            continue
        name = i.names[0]
        is_module = i.target == f"{i.source}.{name}"
        holder = i.source if is_module else i.target  # the module (or package) that holds `name`
        if holder == i.module:
            continue
        holder_pkg = holder if tree.is_package(holder) or is_module else tree.package_of(holder)
        scope = "within" if tree.package_of(i.module) == holder_pkg else "across"
        out.append(
            {
                "module": i.module,
                "where": f"{tree.rel(i.module)}:{i.line}",
                "name": f"{holder}.{name}",
                "what": "module" if is_module else "name",
                "scope": scope,
                "kind": i.kind,
                # held by a module named as internal to its package (``_x.py``), in that package
                "internal": scope == "within" and not is_module and _private(holder.rsplit(".", 1)[-1]),
            }
        )
    return out


# --- format names ----------------------------------------------------------------------------
def format_names(tree: Tree) -> frozenset[str]:
    """The names and aliases in ``formats/registry.py``'s ``FormatSpec(...)`` calls."""
    reg = tree.trees.get(f"{tree.name}.formats.registry")
    if reg is None:
        return FALLBACK_FORMATS
    names: set[str] = set()
    for node in ast.walk(reg):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "FormatSpec"
        ):
            for kw in node.keywords:
                if kw.arg in ("name", "aliases"):
                    for c in ast.walk(kw.value):
                        if isinstance(c, ast.Constant) and isinstance(c.value, str):
                            names.add(c.value)
    return frozenset(names) or FALLBACK_FORMATS


def _names_format(node: ast.AST, names: frozenset[str]) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_format(e, names) for e in node.elts)
    return False


def format_comparisons(tree: Tree, names: frozenset[str]) -> dict[str, list[dict[str, str]]]:
    """Outside ``formats/``: comparisons with format names, ``.ulog is None`` tests, format-keyed dicts."""
    out: dict[str, list[dict[str, str]]] = {
        "comparisons": [],
        "encoding_comparisons": [],
        "ulog_tests": [],
        "format_dicts": [],
    }
    skip = f"{tree.name}.formats"
    for module, mod_tree in tree.trees.items():
        if module == skip or module.startswith(skip + "."):
            continue
        rel = tree.rel(module)
        for node in ast.walk(mod_tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                encoding = any(isinstance(s, ast.Attribute) and s.attr.endswith("encoding") for s in sides)
                if encoding and any(_names_format(s, names) for s in sides):
                    out["encoding_comparisons"].append(
                        {"where": f"{rel}:{node.lineno}", "code": ast.unparse(node)}
                    )
                elif any(_names_format(s, names) for s in sides):
                    attr = any(isinstance(s, ast.Attribute) and s.attr == "format" for s in sides)
                    out["comparisons"].append(
                        {
                            "where": f"{rel}:{node.lineno}",
                            "code": ast.unparse(node),
                            "on_format_attr": str(attr),
                        }
                    )
                if any(isinstance(s, ast.Attribute) and s.attr == "ulog" for s in sides) and any(
                    isinstance(s, ast.Constant) and s.value is None for s in sides
                ):
                    out["ulog_tests"].append({"where": f"{rel}:{node.lineno}", "code": ast.unparse(node)})
            elif isinstance(node, ast.MatchValue) and _names_format(node.value, names):
                out["comparisons"].append(
                    {
                        "where": f"{rel}:{node.lineno}",
                        "code": f"case {ast.unparse(node)}",
                        "on_format_attr": "False",
                    }
                )
            elif isinstance(node, ast.Dict) and sum(_names_format(k, names) for k in node.keys if k) >= 2:
                out["format_dicts"].append({"where": f"{rel}:{node.lineno}", "code": ast.unparse(node)[:100]})
    for rows in out.values():
        rows.sort(key=lambda r: r["where"])
    return out


def top_dir(rel: str) -> str:
    return rel.split("/")[0] if "/" in rel else "(root)"


# --- getattr probes, sizes, classes ----------------------------------------------------------
def probes(tree: Tree) -> dict[str, dict[str, int]]:
    """Per module: ``getattr`` with a default, and ``hasattr``."""
    out: dict[str, dict[str, int]] = {}
    for module, mod_tree in tree.trees.items():
        counts = Counter()
        for node in ast.walk(mod_tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id == "getattr" and len(node.args) == 3:
                    counts["getattr_default"] += 1
                elif node.func.id == "hasattr":
                    counts["hasattr"] += 1
        if counts:
            out[tree.rel(module)] = dict(counts)
    return out


def _attributes(cls: ast.ClassDef) -> set[str]:
    attrs: set[str] = set()
    for stmt in cls.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        for t in targets:
            if isinstance(t, ast.Name):
                if t.id == "__slots__" and isinstance(stmt, ast.Assign):
                    attrs.update(
                        c.value
                        for c in ast.walk(stmt.value)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    )
                elif not (t.id.startswith("__") and t.id.endswith("__")):
                    attrs.add(t.id)
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.args.args:
            me = stmt.args.args[0].arg
            for node in ast.walk(stmt):
                targets = []
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                    targets = [node.target]
                for t in targets:
                    for e in ast.walk(t):
                        if (
                            isinstance(e, ast.Attribute)
                            and isinstance(e.value, ast.Name)
                            and e.value.id == me
                        ):
                            attrs.add(e.attr)
    return attrs


def classes(tree: Tree) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for module, mod_tree in tree.trees.items():
        for node in ast.walk(mod_tree):
            if isinstance(node, ast.ClassDef):
                out.append(
                    {
                        "class": f"{module}.{node.name}",
                        "where": f"{tree.rel(module)}:{node.lineno}",
                        "lines": (node.end_lineno or node.lineno) - node.lineno + 1,
                        "attributes": len(_attributes(node)),
                    }
                )
    return out


def modules_by_size(tree: Tree) -> list[dict[str, object]]:
    rows = [
        {"module": tree.rel(m), "lines": len(p.read_text(encoding="utf-8").splitlines())}
        for m, p in tree.files.items()
    ]
    return sorted(rows, key=lambda r: (-int(r["lines"]), str(r["module"])))


def _bindings(tree: Tree, module: str) -> dict[str, str]:
    """Module-level names -> the dotted name they stand for (imports and local classes)."""
    out: dict[str, str] = {}
    is_package = tree.is_package(module)
    for node, _kind in _walk_with_kind(tree.trees[module]):
        if isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    out.setdefault(head, head)
    for node in tree.trees[module].body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = f"{module}.{node.name}"
    return out


def mixins(tree: Tree, suffixes: tuple[str, ...] = ("Reader", "Recorder")) -> list[dict[str, object]]:
    """For each ``*Reader``/``*Recorder`` class: its polybag classes in the MRO (itself excluded)."""
    defs: dict[str, ast.ClassDef] = {}
    for module, mod_tree in tree.trees.items():
        for node in mod_tree.body:
            if isinstance(node, ast.ClassDef):
                defs[f"{module}.{node.name}"] = node
    bindings = {m: _bindings(tree, m) for m in tree.files}

    def find(dotted: str, depth: int = 0) -> str | None:
        """The class ``dotted`` names, following re-exports (``from .x import C`` in a package)."""
        if dotted in defs:
            return dotted
        module, _, name = dotted.rpartition(".")
        if depth > 10 or module not in bindings or name not in bindings[module]:
            return None
        return find(bindings[module][name], depth + 1)

    def bases(qual: str) -> list[str]:
        module = qual.rpartition(".")[0]
        out = []
        for b in defs[qual].bases:
            text = ast.unparse(b.value if isinstance(b, ast.Subscript) else b)
            head, _, rest = text.partition(".")
            bound = bindings[module].get(head)
            if bound is None:
                continue
            found = find(f"{bound}.{rest}" if rest else bound)
            if found:
                out.append(found)
        return out

    out: list[dict[str, object]] = []
    for qual, node in defs.items():
        if not node.name.endswith(suffixes):
            continue
        seen: list[str] = []
        work = bases(qual)
        while work:
            b = work.pop(0)
            if b not in seen and b != qual:
                seen.append(b)
                work.extend(bases(b))
        out.append({"class": qual, "bases": len(node.bases), "polybag_in_mro": len(seen), "mro": seen})
    return sorted(out, key=lambda r: (-int(r["polybag_in_mro"]), str(r["class"])))


# --- external tools ---------------------------------------------------------------------------
def run_mypy(pkg: Path, strict: bool) -> dict[str, object]:
    try:
        import mypy  # noqa: F401
    except ImportError:
        return {"available": False}
    with tempfile.TemporaryDirectory() as cache:
        args = [sys.executable, "-m", "mypy", "--cache-dir", cache, "--no-error-summary", str(pkg)]
        if strict:
            args.insert(3, "--strict")
        proc = subprocess.run(args, capture_output=True, text=True, cwd=pkg.parent.parent)
    per_file: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for line in proc.stdout.splitlines():
        m = re.match(r"^(.+?):\d+(?::\d+)?: error: .*?(?:\[([a-z0-9-]+)\])?$", line)
        if m:
            per_file[m.group(1)] += 1
            codes[m.group(2) or "?"] += 1
    return {
        "available": True,
        "errors": sum(per_file.values()),
        "files": len(per_file),
        "top_files": per_file.most_common(10),
        "top_codes": codes.most_common(10),
    }


def run_duplicates(pkg: Path) -> dict[str, object]:
    exe = shutil.which("duplicates")
    if exe is None:
        return {"available": False}
    proc = subprocess.run(
        [exe, "--repo", str(pkg), "--seconds", "120", "--most", "10"], capture_output=True, text=True
    )
    lines = proc.stdout.splitlines()
    first = lines[0] if lines else ""
    m = re.match(r"(\d+) pairs", first)
    return {"available": True, "pairs": int(m.group(1)) if m else 0, "summary": first, "rows": lines[1:]}


# --- all of it -------------------------------------------------------------------------------
def measure(
    pkg: Path, cycle_bound: int = 8, with_mypy: bool = True, with_duplicates: bool = True
) -> dict[str, object]:
    tree = Tree.load(pkg)
    imports = all_imports(tree)
    kinds = Counter(i.kind for i in imports)
    circles = {}
    for label, ks, parents in (
        ("all", {"module", "lazy", "type_checking"}, True),
        ("runtime", {"module", "lazy"}, True),
        ("module_level", {"module"}, True),
        ("all_but_parent_package", {"module", "lazy", "type_checking"}, False),
    ):
        g = graph(imports, ks, parents)
        found, cut = cycles(g, cycle_bound)
        circles[label] = {"components": components(g), "cycles": found, "cycles_cut": cut}
    priv = private_imports(tree, imports)
    names = format_names(tree)
    fmt = format_comparisons(tree, names)
    probe = probes(tree)
    cls = classes(tree)
    root = [
        m for m in tree.files if m.count(".") == 1 and not tree.is_package(m) and not m.endswith("__main__")
    ]
    sub = [m for m in tree.files if m.count(".") == 1 and tree.is_package(m)]
    result: dict[str, object] = {
        "package": str(pkg),
        "modules": len(tree.files),
        "lines": sum(int(r["lines"]) for r in modules_by_size(tree)),
        "imports": {"total": len(imports), "by_kind": dict(kinds)},
        "circles": circles,
        "cycle_bound": cycle_bound,
        "private_imports": priv,
        "format_names": sorted(names),
        "format": fmt,
        "probes": probe,
        "largest_classes_by_lines": sorted(cls, key=lambda c: -int(c["lines"]))[:10],
        "largest_classes_by_attributes": sorted(cls, key=lambda c: -int(c["attributes"]))[:10],
        "largest_modules": modules_by_size(tree)[:10],
        "mixins": mixins(tree),
        "root": {"modules": sorted(root), "packages": sorted(sub)},
    }
    if with_mypy:
        result["mypy"] = run_mypy(pkg, strict=False)
        result["mypy_strict"] = run_mypy(pkg, strict=True)
    if with_duplicates:
        result["duplicates"] = run_duplicates(pkg)
    return result


def summary_rows(r: dict) -> list[tuple[str, str]]:
    c = r["circles"]
    priv = r["private_imports"]
    pc = Counter((p["scope"], p["what"]) for p in priv)
    comps = r["format"]["comparisons"]
    by_dir = Counter(top_dir(x["where"]) for x in comps)
    probe_total = sum(v.get("getattr_default", 0) for v in r["probes"].values())
    hasattr_total = sum(v.get("hasattr", 0) for v in r["probes"].values())
    big_c = r["largest_classes_by_lines"][0] if r["largest_classes_by_lines"] else None
    big_a = r["largest_classes_by_attributes"][0] if r["largest_classes_by_attributes"] else None
    big_m = r["largest_modules"][0] if r["largest_modules"] else None
    top_mixin = r["mixins"][0] if r["mixins"] else None
    kinds = r["imports"]["by_kind"]
    rows = [
        ("modules / lines", f"{r['modules']} / {r['lines']}"),
        (
            "polybag imports (module-level / lazy / TYPE_CHECKING)",
            f"{r['imports']['total']} ({kinds.get('module', 0)} / {kinds.get('lazy', 0)} / {kinds.get('type_checking', 0)})",
        ),
    ]
    for label, text in (
        ("all", "every import"),
        ("runtime", "without TYPE_CHECKING"),
        ("module_level", "module-level only"),
        ("all_but_parent_package", "every import but a module's of its own package's __init__"),
    ):
        rows.append(
            (
                f"import circles, {text}: components / elementary cycles (<= {r['cycle_bound']} modules)",
                f"{len(c[label]['components'])} / {len(c[label]['cycles'])}{'+' if c[label]['cycles_cut'] else ''}",
            )
        )
    rows += [
        (
            "private names imported across modules (names + private modules)",
            f"{len(priv)} ({sum(v for (s, w), v in pc.items() if w == 'name')} names + "
            f"{sum(v for (s, w), v in pc.items() if w == 'module')} modules)",
        ),
        (
            "  within one package (names / modules)",
            f"{pc[('within', 'name')] + pc[('within', 'module')]} ({pc[('within', 'name')]} / {pc[('within', 'module')]})",
        ),
        (
            "    of which from a module named as internal (`_x.py`) of that package",
            str(sum(1 for p in priv if p.get("internal"))),
        ),
        (
            "  across packages (names / modules)",
            f"{pc[('across', 'name')] + pc[('across', 'module')]} ({pc[('across', 'name')]} / {pc[('across', 'module')]})",
        ),
        (
            "format-name comparisons outside formats/ (by folder)",
            f"{len(comps)} (" + ", ".join(f"{k} {v}" for k, v in sorted(by_dir.items())) + ")",
        ),
        ("  of which on a `.format` attribute", str(sum(x["on_format_attr"] == "True" for x in comps))),
        (
            "  not counted: the same literal against an `*encoding` attribute ('ulog')",
            str(len(r["format"]["encoding_comparisons"])),
        ),
        ("`x.ulog is (not) None` tests outside formats/", str(len(r["format"]["ulog_tests"]))),
        ("dict literals keyed by format names outside formats/", str(len(r["format"]["format_dicts"]))),
        (
            "getattr(obj, name, default) probes / hasattr (modules)",
            f"{probe_total} / {hasattr_total} ({len(r['probes'])})",
        ),
    ]
    if big_c:
        rows.append(("largest class by lines", f"{big_c['class']} ({big_c['lines']} lines)"))
    if big_a:
        rows.append(("largest class by attributes", f"{big_a['class']} ({big_a['attributes']} attributes)"))
    if big_m:
        rows.append(("largest module", f"{big_m['module']} ({big_m['lines']} lines)"))
    if top_mixin:
        rows.append(
            (
                "most polybag classes in a reader's MRO",
                f"{top_mixin['class']} ({top_mixin['polybag_in_mro']})",
            )
        )
    rows.append(
        ("modules at the package root (besides __init__, __main__) / subpackages",
         f"{len(r['root']['modules'])} / {len(r['root']['packages'])}")
    )  # fmt: skip
    for key, label in (("mypy", "mypy errors (files)"), ("mypy_strict", "mypy --strict errors (files)")):
        m = r.get(key)
        if m is not None:
            rows.append((label, f"{m['errors']} ({m['files']})" if m["available"] else "mypy not installed"))
    d = r.get("duplicates")
    if d is not None:
        rows.append(
            ("`duplicates` on src/polybag: pairs", str(d["pairs"]) if d["available"] else "not installed")
        )
    return rows


def markdown(r: dict) -> str:
    out = ["| figure | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in summary_rows(r)]
    out += ["", "## Import circles (every import)", ""]
    for label in ("all", "runtime", "module_level", "all_but_parent_package"):
        c = r["circles"][label]
        out.append(f"**{label}**: {len(c['components'])} components")
        out += [f"- {' , '.join(comp)}" for comp in c["components"]]
        out.append("")
    cyc = r["circles"]["all"]["cycles"]
    out.append(f"Elementary cycles, every import ({len(cyc)}; the first 60, shortest first):")
    out += [f"- {' -> '.join([*cy, cy[0]])}" for cy in cyc[:60]]
    out += ["", "## Private names imported across packages", ""]
    across = Counter(f"{p['name']} ({p['what']})" for p in r["private_imports"] if p["scope"] == "across")
    out += [f"- {name}: {n}" for name, n in sorted(across.items(), key=lambda kv: (-kv[1], kv[0]))]
    out += ["", "## Format-name comparisons outside formats/", ""]
    out += [f"- {x['where']}: `{x['code']}`" for x in r["format"]["comparisons"]]
    out += [
        f"- {x['where']}: `{x['code']}` (an encoding: not counted)"
        for x in r["format"]["encoding_comparisons"]
    ]
    out += [f"- {x['where']}: `{x['code']}` (ulog test)" for x in r["format"]["ulog_tests"]]
    out += [f"- {x['where']}: `{x['code']}` (format-keyed dict)" for x in r["format"]["format_dicts"]]
    out += ["", "## getattr probes with a default, per module", ""]
    probes_sorted = sorted(r["probes"].items(), key=lambda kv: (-kv[1].get("getattr_default", 0), kv[0]))
    out += [f"- {m}: {v.get('getattr_default', 0)} (hasattr {v.get('hasattr', 0)})" for m, v in probes_sorted]
    out += ["", "## Largest classes and modules", ""]
    out += [f"- {c['class']}: {c['lines']} lines" for c in r["largest_classes_by_lines"][:5]]
    out += [f"- {c['class']}: {c['attributes']} attributes" for c in r["largest_classes_by_attributes"][:5]]
    out += [f"- {m['module']}: {m['lines']} lines" for m in r["largest_modules"][:5]]
    out += ["", "## Polybag classes in each reader's / recorder's MRO", ""]
    out += [f"- {m['class']}: {m['polybag_in_mro']} ({m['bases']} direct bases)" for m in r["mixins"]]
    for key in ("mypy", "mypy_strict"):
        m = r.get(key)
        if m and m["available"]:
            out += ["", f"## {key}: errors per file (top 10) and per code", ""]
            out += [f"- {f}: {n}" for f, n in m["top_files"]]
            out += [f"- [{c}]: {n}" for c, n in m["top_codes"]]
    d = r.get("duplicates")
    if d and d["available"]:
        out += ["", "## duplicates", "", "```", d["summary"], *d["rows"], "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", type=Path, default=DEFAULT_PKG, help="the package folder (src/polybag)")
    ap.add_argument("--json", type=Path, help="write every figure and list as JSON here")
    ap.add_argument("--cycle-bound", type=int, default=8, help="longest elementary cycle listed (modules)")
    ap.add_argument("--no-mypy", action="store_true")
    ap.add_argument("--no-duplicates", action="store_true")
    args = ap.parse_args(argv)
    if not (args.package / "__init__.py").is_file():
        print(f"arch_metrics: {args.package}: not a package folder", file=sys.stderr)
        return 2
    try:
        result = measure(args.package, args.cycle_bound, not args.no_mypy, not args.no_duplicates)
    except (SyntaxError, UnicodeDecodeError, OSError) as exc:
        print(f"arch_metrics: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=list), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
