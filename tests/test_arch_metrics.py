"""``scripts/arch_metrics.py`` (issue 29's figures) counts what it says, on a tiny package built here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "arch_metrics.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arch_metrics", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["arch_metrics"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


am = _load()

FILES = {
    "__init__.py": "",
    # a <-> b: a circle only through b's import inside a function
    "a.py": "from toy.b import thing\n",
    "b.py": "thing = 1\n\ndef f():\n    from toy import a\n    return a\n",
    # c <-> d: a circle only through c's `if TYPE_CHECKING:` import
    "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.d import D\nC = 1\n",
    "d.py": "from toy.c import C\nD = C\n",
    # p -> q -> r -> p and q <-> r, at module level: one component, two elementary cycles
    "p.py": "import toy.q\n",
    "q.py": "from . import r\n",
    "r.py": "import toy.p\nimport toy.q\n",
    "reader.py": "class Base:\n    pass\n",
    "formats/__init__.py": "",
    "formats/registry.py": "register(FormatSpec(name='mcap', aliases=('m2',), opener='x:y'))\n",
    "formats/mcap/__init__.py": "_helper = 1\nok = 'x' == 'mcap'  # inside formats/: not counted\n",
    "formats/mcap/reader.py": (
        "from toy.reader import Base\n"
        "class Mixin(Base):\n    pass\n"
        "class McapReader(Mixin, Base):\n"
        "    kind = 'mcap'\n"
        "    def __init__(self):\n        self.a = 1\n        self.b, self.c = 2, 3\n"
    ),
    "ops/__init__.py": "",
    "ops/_common.py": "def _shared():\n    return 1\n",
    "ops/convert.py": (
        "from toy.ops._common import _shared\n"  # private name, within one package
        "from toy.ops import _common\n"  # private module, within one package
        "from toy.formats.mcap import _helper\n"  # private name, across packages
        "from toy.ops._common import __doc__ as doc\n"  # a dunder: not private
        "def run(fmt, r, ch):\n"
        "    if fmt == 'mcap':\n        pass\n"  # counted
        "    ok = r.format in ('m2', 'zip')\n"  # counted, on .format
        "    enc = ch.message_encoding == 'mcap'\n"  # an encoding: apart
        "    ros = fmt == 'ros1'\n"  # not a format name
        "    plain = fmt == 'zip'\n"
        "    sizes = {'mcap': 1, 'm2': 2}\n"  # a format-keyed dict
        "    if r.ulog is not None:\n        pass\n"
        "    x = getattr(r, 'q', None)\n"  # a probe
        "    y = getattr(r, 'q')\n"  # no default: not a probe
        "    z = hasattr(r, 'q')\n"
        "    return ok, enc, ros, plain, sizes, x, y, z\n"
    ),
}


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    root = tmp_path / "toy"
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_import_kinds_and_circles(pkg: Path) -> None:
    tree = am.Tree.load(pkg)
    imports = am.all_imports(tree)
    kinds = {(i.module, i.target): i.kind for i in imports}
    assert kinds[("toy.b", "toy.a")] == "lazy"
    assert kinds[("toy.c", "toy.d")] == "type_checking"
    assert kinds[("toy.q", "toy.r")] == "module"  # a relative import of a module
    assert kinds[("toy.a", "toy.b")] == "module"

    every = am.graph(imports, {"module", "lazy", "type_checking"})
    runtime = am.graph(imports, {"module", "lazy"})
    module_level = am.graph(imports, {"module"})
    pqr = ["toy.p", "toy.q", "toy.r"]
    assert am.components(every) == [["toy.a", "toy.b"], ["toy.c", "toy.d"], pqr]
    assert am.components(runtime) == [["toy.a", "toy.b"], pqr]
    assert am.components(module_level) == [pqr]
    found, cut = am.cycles(module_level, bound=8)
    assert not cut
    assert found == [["toy.q", "toy.r"], ["toy.p", "toy.q", "toy.r"]]
    assert am.cycles(module_level, bound=2)[0] == [["toy.q", "toy.r"]]


def test_private_imports_within_and_across_packages(pkg: Path) -> None:
    tree = am.Tree.load(pkg)
    rows = am.private_imports(tree, am.all_imports(tree))
    got = sorted((r["name"], r["what"], r["scope"]) for r in rows)
    assert got == [
        ("toy.formats.mcap._helper", "name", "across"),
        ("toy.ops._common", "module", "within"),
        ("toy.ops._common._shared", "name", "within"),
    ]


def test_format_comparisons_outside_formats(pkg: Path) -> None:
    tree = am.Tree.load(pkg)
    names = am.format_names(tree)
    assert names == {"mcap", "m2"}
    found = am.format_comparisons(tree, names)
    assert [c["code"] for c in found["comparisons"]] == ["fmt == 'mcap'", "r.format in ('m2', 'zip')"]
    assert [c["on_format_attr"] for c in found["comparisons"]] == ["False", "True"]
    assert [c["code"] for c in found["encoding_comparisons"]] == ["ch.message_encoding == 'mcap'"]
    assert [c["where"] for c in found["ulog_tests"]] == ["ops/convert.py:13"]
    assert len(found["format_dicts"]) == 1


def test_probes_classes_and_mixins(pkg: Path) -> None:
    tree = am.Tree.load(pkg)
    assert am.probes(tree) == {"ops/convert.py": {"getattr_default": 1, "hasattr": 1}}
    by_name = {c["class"]: c for c in am.classes(tree)}
    reader = by_name["toy.formats.mcap.reader.McapReader"]
    assert reader["attributes"] == 4  # kind, a, b, c
    assert reader["lines"] == 5  # class line, kind, def, two assignments
    (mix,) = am.mixins(tree)
    assert mix["class"] == "toy.formats.mcap.reader.McapReader"
    assert mix["bases"] == 2
    assert mix["mro"] == ["toy.formats.mcap.reader.Mixin", "toy.reader.Base"]


def test_the_command_writes_the_table_and_json(pkg: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    assert am.main(["--package", str(pkg), "--no-mypy", "--no-duplicates", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| import circles, every import: components / elementary cycles (<= 8 modules) | 3 / 4 |" in table
    assert "| format-name comparisons outside formats/ (by folder) | 2 (ops 2) |" in table
    data = json.loads(out.read_text(encoding="utf-8"))
    assert len(data["private_imports"]) == 3
    assert data["root"]["modules"] == ["toy.a", "toy.b", "toy.c", "toy.d", "toy.p", "toy.q", "toy.r", "toy.reader"]
    assert "mypy" not in data


def test_bad_input_is_a_message_naming_the_file(pkg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (pkg / "broken.py").write_text("def (:\n", encoding="utf-8")
    assert am.main(["--package", str(pkg), "--no-mypy", "--no-duplicates"]) == 2
    assert "broken.py" in capsys.readouterr().err
    assert am.main(["--package", str(pkg / "ops" / "_common.py"), "--no-mypy"]) == 2
    assert "not a package folder" in capsys.readouterr().err
