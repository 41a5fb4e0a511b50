"""The documentation site for the tests: built once (``sphinx-build -W --keep-going``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from run_examples import DOCS, ROOT


@dataclass
class Site:
    """The built site: ``html`` (the output folder), the build's exit status, log and time."""

    html: Path
    returncode: int
    log: str
    seconds: float


def build(out: Path) -> Site:
    t0 = time.monotonic()
    html = out / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(out / "doctrees"), str(DOCS), str(html)]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    return Site(html, p.returncode, p.stdout + p.stderr, time.monotonic() - t0)
