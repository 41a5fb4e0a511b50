"""The layering of ``src/polybag``: imports point down, never up, and never in a circle.

Every import is read with :mod:`ast`: module-level ones, those inside functions and
``if TYPE_CHECKING:`` blocks, and ``importlib.import_module("...")`` with a literal name (a
lazy import that dodges a circle is still a circle).  The layers, bottom up::

    errors, _version, util/          nothing of polybag
    model, selection, util.safe_yaml errors
    codecs                           model (never the readers, formats, ops or CLI)
    io/, reader, writer              codecs
    bridges                          codecs, model, writer, errors (never formats, ops, record, play)
    formats/<format>                 the layers below, never another format, ops or CLI
    ops                              formats (through polybag.open and the registry)
    cli                              everything
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PKG = SRC / "polybag"
SCRIPTS = SRC.parent / "scripts"

# the import graph of scripts/arch_metrics.py (issue 29's measurements), shared with this test
sys.path.insert(0, str(SCRIPTS))
try:
    import arch_metrics
finally:
    sys.path.remove(str(SCRIPTS))


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. polybag.ops.filter
    path: str  # its file, e.g. src/polybag/ops/filter.py
    line: int
    target: str  # the module imported, e.g. polybag.cli.text (or polybag: the package root)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    """Whether ``name`` (``polybag.x.y``) is a module or package of the source tree."""
    rel = Path(*name.split("."))
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def _imports_of(path: Path) -> Iterator[Import]:
    module = _module_name(path)
    rel = str(path.relative_to(SRC.parent))
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, rel, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = arch_metrics.resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                # `from polybag import model` imports a module; `from polybag import open` the root
                yield Import(module, rel, node.lineno, sub if _is_module(sub) else base)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0].value
            if called in ("import_module", "__import__") and isinstance(arg, str):
                yield Import(module, rel, node.lineno, arg)


def _all_imports() -> list[Import]:
    out: list[Import] = []
    for path in sorted(PKG.rglob("*.py")):
        out.extend(i for i in _imports_of(path) if i.target == "polybag" or i.target.startswith("polybag."))
    return out


IMPORTS = _all_imports()


def _within(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _format_package(name: str) -> str | None:
    """``polybag.formats.mcap`` for any module inside the MCAP package (None outside one)."""
    parts = name.split(".")
    if (
        len(parts) >= 3
        and parts[:2] == ["polybag", "formats"]
        and parts[2] != "shared"  # parts several formats share, not a format
        and _is_package(".".join(parts[:3]))
    ):
        return ".".join(parts[:3])
    return None


def _is_package(name: str) -> bool:
    return (SRC / Path(*name.split(".")) / "__init__.py").is_file()


# the modules at the bottom and the polybag modules each may import
BOTTOM: dict[str, set[str]] = {
    "polybag.errors": set(),
    "polybag._version": set(),
    "polybag.util.progress": set(),
    "polybag.util.closing": set(),
    "polybag.model": {"polybag.errors"},
    "polybag.selection": {"polybag.errors"},
    "polybag.util.text": set(),
    "polybag.util.safe_yaml": {"polybag.errors"},
}

# (importer, target) pairs that break a rule today in a file this refactor does not own;
# each names the rule and why it is left.  Empty: none.
KNOWN: set[tuple[str, str]] = set()


def _bottom(i: Import) -> bool:
    return i.module in BOTTOM and i.target not in BOTTOM[i.module]


def _formats_up(i: Import) -> bool:
    return _within(i.module, "polybag.formats") and _within(i.target, "polybag.cli", "polybag.ops")


def _formats_each_other(i: Import) -> bool:
    mine = _format_package(i.module)
    theirs = _format_package(i.target)
    return mine is not None and theirs is not None and mine != theirs


def _formats_root(i: Import) -> bool:
    # `import polybag` (open, __version__...): the root imports the formats, not the other way
    return _within(i.module, "polybag.formats") and i.target == "polybag"


def _ops_up(i: Import) -> bool:
    return _within(i.module, "polybag.ops") and _within(i.target, "polybag.cli")


def _codecs_up(i: Import) -> bool:
    return _within(i.module, "polybag.codecs") and (
        i.target == "polybag"
        or _within(i.target, "polybag.formats", "polybag.ops", "polybag.cli", "polybag.reader", "polybag.writer")
    )


def _sensors_up(i: Import) -> bool:
    # polybag.sensors sits beside the codecs: the reader and the operations use it
    return _within(i.module, "polybag.sensors") and (
        i.target == "polybag"
        or _within(
            i.target, "polybag.formats", "polybag.ops", "polybag.cli", "polybag.dask", "polybag.reader", "polybag.writer"
        )
    )


def _cli_from_outside(i: Import) -> bool:
    # polybag.__main__ is the program (`python -m polybag`): the one place above the CLI
    return (
        _within(i.target, "polybag.cli")
        and not _within(i.module, "polybag.cli")
        and i.module != "polybag.__main__"
    )


def _bridges_up(i: Import) -> bool:
    # the bridges sit between the codecs and the operations (the writer: for the channel map)
    return _within(i.module, "polybag.bridges") and not _within(
        i.target, "polybag.bridges", "polybag.model", "polybag.codecs", "polybag.writer", "polybag.errors"
    )


def _bag_check_root(i: Import) -> bool:
    return i.module == "polybag.formats.bag.check" and i.target == "polybag"


RULES: dict[str, Callable[[Import], bool]] = {
    "errors, _version, util (progress, closing, text, safe_yaml), model and selection import nothing above them": _bottom,
    "formats never import polybag.cli or polybag.ops": _formats_up,
    "a format package never imports another format package": _formats_each_other,
    "formats never import the package root polybag": _formats_root,
    "ops never import polybag.cli": _ops_up,
    "codecs never import formats, ops, cli, reader, writer or the package root": _codecs_up,
    "sensors never import formats, ops, cli, dask, reader, writer or the package root": _sensors_up,
    "nothing outside polybag.cli imports polybag.cli": _cli_from_outside,
    "formats/bag/check.py does not import the package root polybag": _bag_check_root,
    "bridges import only model, codecs, writer and errors (never formats, ops, record, play, cli)": _bridges_up,
}


def test_imports_are_found() -> None:
    """The scan sees function-level imports too (a broken scan would pass every rule)."""
    targets = {(i.module, i.target) for i in IMPORTS}
    assert ("polybag.reader", "polybag.codecs.columns") in targets  # inside a method
    assert ("polybag.codecs", "polybag.model") in targets  # `from polybag import model`
    assert ("polybag.ops.check", "polybag") in targets  # `import polybag`
    assert all(_is_module(i.target) for i in IMPORTS), [str(i) for i in IMPORTS if not _is_module(i.target)]


@pytest.mark.parametrize("rule", list(RULES))
def test_layer_rule(rule: str) -> None:
    broken = [i for i in IMPORTS if RULES[rule](i) and (i.module, i.target) not in KNOWN]
    if broken:
        pytest.fail(f"{rule}:\n" + "\n".join(f"  {i}" for i in broken), pytrace=False)


def test_known_exceptions_still_exist() -> None:
    """An exception that no longer occurs is taken off the list."""
    found = {(i.module, i.target) for i in IMPORTS}
    assert KNOWN <= found, sorted(KNOWN - found)


@pytest.mark.parametrize(
    ("lower", "upper"),
    [("polybag.model", "polybag.codecs"), ("polybag.codecs.columns", "polybag.reader")],
)
def test_former_circles_point_one_way(lower: str, upper: str) -> None:
    """``model`` <- ``codecs`` and ``codecs.columns`` <- ``reader``: the upper layer imports
    the lower one, never the reverse (not even lazily or for type checking)."""
    back = [i for i in IMPORTS if _within(i.module, lower) and _within(i.target, upper)]
    if back:
        pytest.fail(f"{lower} must not import {upper}:\n" + "\n".join(f"  {i}" for i in back), pytrace=False)


def test_model_decodes_with_codecs_installed() -> None:
    """The model does not import the codecs; importing any part of polybag installs them."""
    code = (
        "import polybag.model as m\n"
        "from polybag.codecs import codec_for\n"
        "assert m._codec_for is codec_for, m._codec_for\n"
        "ch = m.Channel(1, '/a', 'json', m.Schema(1, 'T', 'jsonschema', b''))\n"
        "msg = m.Message(ch, 1, 1, 0, b'{\"x\": 1}')\n"
        "assert msg.to_dict() == {'x': 1}, msg.to_dict()\n"
        "assert msg.codec() is codec_for(ch)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=SRC)


def test_old_names_still_importable() -> None:
    from polybag import __version__
    from polybag._version import __version__ as v
    from polybag.cli.text import Progress as P2
    from polybag.cli.text import format_duration, format_ns, parse_time
    from polybag.codecs import Codec
    from polybag.model import Codec as C2
    from polybag.selection import format_ns as f2
    from polybag.selection import parse_time as p2
    from polybag.util.progress import Progress

    assert __version__ == v
    assert Progress is P2 and Codec is C2 and format_ns is f2 and parse_time is p2
    assert parse_time("+1.5s", 10) == 1_500_000_010
    assert format_duration(90 * 10**9) == "1:30.000 (90.000s)"


# --- import circles, counting every import (the graph of scripts/arch_metrics.py) -------------
def _circles() -> list[frozenset[str]]:
    """The strongly connected components of the import graph of ``src/polybag``, counting
    module-level imports, those inside functions and under ``TYPE_CHECKING`` (each a set of
    modules), as ``scripts/arch_metrics.py`` counts them for issue 29."""
    tree = arch_metrics.Tree.load(PKG)
    graph = arch_metrics.graph(arch_metrics.all_imports(tree), {"module", "lazy", "type_checking"})
    return [frozenset(c) for c in arch_metrics.components(graph)]


CIRCLES = _circles()


def _ms(*names: str) -> frozenset[str]:
    return frozenset(f"polybag.{n}" for n in names)


# the import circles left today, each with why; this list may only shrink
ALLOWED_CIRCLES: dict[frozenset[str], str] = {
}


def test_circles_are_found(tmp_path: Path) -> None:
    """The scan sees lazy and TYPE_CHECKING imports (a broken scan would find no circle): a
    toy package whose two circles are closed by an import inside a function and by one
    under ``TYPE_CHECKING``."""
    toy = tmp_path / "toy"
    toy.mkdir()
    (toy / "__init__.py").write_text("")
    (toy / "a.py").write_text("from toy import b\n")
    (toy / "b.py").write_text("def f():\n    from toy import a\n")
    (toy / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy import d\n")
    (toy / "d.py").write_text("import toy.c\n")
    tree = arch_metrics.Tree.load(toy)
    graph = arch_metrics.graph(arch_metrics.all_imports(tree), {"module", "lazy", "type_checking"})
    found = {frozenset(c) for c in arch_metrics.components(graph)}
    assert found == {frozenset({"toy.a", "toy.b"}), frozenset({"toy.c", "toy.d"})}
    assert all(len(c) > 1 for c in CIRCLES)


def test_no_import_circle_but_the_allowed() -> None:
    """No new import circle, not even through a lazy or a TYPE_CHECKING import."""
    new = [sorted(c) for c in CIRCLES if c not in ALLOWED_CIRCLES]
    if new:
        pytest.fail("import circles not on ALLOWED_CIRCLES:\n" + "\n".join(f"  {c}" for c in new), pytrace=False)


def test_allowed_circles_still_exist() -> None:
    """A circle broken (or changed) is taken off ALLOWED_CIRCLES, which only shrinks."""
    gone = [sorted(c) for c in ALLOWED_CIRCLES if c not in CIRCLES]
    assert not gone, gone


@pytest.mark.parametrize(
    "modules",
    [
        _ms("net.ros1", "net.ros1.sockets", "net.ros1.master", "net.ros1.node", "net.ros1.tcpros"),
        _ms("io.http_ranges", "io.gcs"),
        _ms("formats.registry", "formats.rosbag2", "formats.rosbag2.storage"),
    ],
    ids=["net.ros1 package and its modules", "io.http_ranges and io.gcs", "registry and rosbag2"],
)
def test_broken_circles_stay_broken(modules: frozenset[str]) -> None:
    """Circles broken in issue 29 (the errors moved to net/ros1/errors.py; gcs_transport
    moved into remote_http; the registry names the rosbag2 probe as a string, like its
    openers): no circle holds any two of these modules again."""
    assert not [sorted(c) for c in CIRCLES if len(c & modules) > 1]


def test_moved_names_still_importable() -> None:
    from polybag.errors import FormatError, PolybagError
    from polybag.net.ros1 import RosGraphError, TcprosError
    from polybag.net.ros1.errors import RosGraphError as R2
    from polybag.net.ros1.errors import TcprosError as T2

    assert RosGraphError is R2 and TcprosError is T2
    assert issubclass(TcprosError, RosGraphError) and issubclass(TcprosError, FormatError)
    assert issubclass(RosGraphError, PolybagError)


# --- private names (issue 29 item 6) ----------------------------------------------------------
# private names imported from another module that is not named as internal, each with why
# (``polybag.pkg.module._name`` -> reason); this list may only shrink
ALLOWED_PRIVATE_IMPORTS: dict[str, str] = {}


def test_private_names_cross_modules_only_from_internal_modules() -> None:
    """A name ``_x`` is imported from another polybag module only from a module named as
    internal to its package (its own name starts with ``_``, as ``dask/_plan.py``), and only
    inside that package; a name other modules need is public.  A private module (``_ops``)
    is imported only inside its package.  Dunders (``__version__``) are not private.  The
    imports are those ``scripts/arch_metrics.py`` counts (every ``from polybag.x import _y``)."""
    tree = arch_metrics.Tree.load(PKG)
    found = arch_metrics.private_imports(tree, arch_metrics.all_imports(tree))

    def internal(p: dict[str, object]) -> bool:
        holder = str(p["name"]).rpartition(".")[0]
        from_internal = p["what"] == "module" or holder.rpartition(".")[2].startswith("_")
        return from_internal and p["scope"] == "within"

    broken = sorted(
        f"{p['where']}: {p['name']}" for p in found if not internal(p) and p["name"] not in ALLOWED_PRIVATE_IMPORTS
    )
    assert not broken, "private names imported from a module not named as internal:\n" + "\n".join(broken)
    stale = set(ALLOWED_PRIVATE_IMPORTS) - {str(p["name"]) for p in found if not internal(p)}
    assert not stale, f"no longer imported (take off ALLOWED_PRIVATE_IMPORTS): {sorted(stale)}"
