"""The package metadata as users get it: the ``all`` extra holds every other user extra, the
license is an SPDX expression (setuptools >= 77, no deprecation warning), and
``polybag --version`` says the version the metadata has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # (Python 3.11+; the metadata is the same on 3.10)

ROOT = Path(__file__).resolve().parent.parent


def _project() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    return data


def test_all_holds_every_user_extra() -> None:
    data = _project()
    extras: dict[str, list[str]] = data["project"]["optional-dependencies"]  # type: ignore[index]
    users = {k: v for k, v in extras.items() if k not in ("test", "all", "docs")}
    assert users, "no extras?"
    want = sorted({req for reqs in users.values() for req in reqs})
    assert sorted(extras["all"]) == want


def test_license_is_an_spdx_expression() -> None:
    data = _project()
    assert data["project"]["license"] == "Apache-2.0"  # type: ignore[index]
    needs = data["build-system"]["requires"]  # type: ignore[index]
    assert any(r.replace(" ", "").startswith("setuptools>=") and int(r.split(">=")[1].split(".")[0]) >= 77 for r in needs)


def test_version_flag_says_the_package_version() -> None:
    from polybag import __version__

    p = subprocess.run([sys.executable, "-m", "polybag", "--version"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    assert p.stdout.strip() == f"polybag {__version__}"
