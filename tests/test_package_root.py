"""The package root (issue 29, item 7): ``polybag.__all__`` names what exists, every error a
user can receive is ``polybag.X``, ``dir(polybag)`` shows the API and not the root's helper
imports, and importing polybag leaves the process's environment alone (the OpenBLAS short
spin is the ``polybag`` command's, ``polybag/cli/__init__.py``)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types

import polybag
from polybag import errors


def _user_errors() -> list[type]:
    """Every exception and warning class ``polybag.errors`` defines (all reach users)."""
    return [
        v
        for _, v in inspect.getmembers(errors, inspect.isclass)
        if v.__module__ == errors.__name__ and issubclass(v, (errors.PolybagError, errors.PolybagWarning))
    ]


def test_every_name_in_all_exists() -> None:
    assert len(polybag.__all__) == len(set(polybag.__all__))
    missing = [n for n in polybag.__all__ if not hasattr(polybag, n)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from polybag import *", namespace)
    assert set(polybag.__all__) <= set(namespace)


def test_every_error_users_receive_is_at_the_root() -> None:
    found = _user_errors()
    names = {c.__name__ for c in found}
    # the ones the issue names, and the rest of the family
    assert {"UsageError", "OutputExistsError", "EmptySelectionError", "DecodeError", "FormatError"} <= names
    assert {"TruncatedError", "UnsupportedError", "WriteError", "ChecksumError", "UnknownFormatError"} <= names
    for cls in found:
        assert getattr(polybag, cls.__name__, None) is cls, cls.__name__
        assert cls.__name__ in polybag.__all__, cls.__name__
        assert cls.__name__ in errors.__all__, cls.__name__
        assert cls.__name__ in dir(polybag), cls.__name__


def test_an_error_from_the_api_is_caught_by_its_root_name() -> None:
    """What a user writes: ``except polybag.UsageError`` around a bad argument."""
    try:
        polybag.open(b"\x89MCAP0\r\n", max_chunk_bytes="a lot")
    except polybag.UsageError as e:
        assert "a lot" in str(e)
    else:
        raise AssertionError("a size that is not a size was accepted")


def test_dir_shows_no_helper_modules_or_names() -> None:
    listed = dir(polybag)
    for helper in ("os", "sys", "Any", "BinaryIO", "ModuleType", "annotations", "open_source", "MappedSource"):
        assert helper not in listed, helper
    for name in listed:
        value = getattr(polybag, name)
        if isinstance(value, types.ModuleType):
            # only polybag's own public subpackages (polybag.errors, polybag.codecs...)
            assert value.__name__ == f"polybag.{name}" and not name.startswith("_"), name
    assert set(polybag.__all__) <= set(listed)
    assert "__version__" in listed and "__doc__" in listed


def test_dir_lists_a_subpackage_once_it_is_imported() -> None:
    import polybag.ops

    assert "ops" in dir(polybag)
    assert polybag.ops.__name__ == "polybag.ops"


_SNAPSHOT = """
import json, os, sys
before = dict(os.environ)
import polybag
after = dict(os.environ)
import numpy
print(json.dumps({"before": before, "after": after, "numpy_loaded": "numpy" in sys.modules}))
"""


def test_importing_polybag_sets_no_environment_variable() -> None:
    """In a fresh process with a small clean environment (no OPENBLAS_THREAD_TIMEOUT, the
    variable polybag used to set at import): ``import polybag``, then numpy, changes nothing."""
    keep = ("PATH", "HOME", "SYSTEMROOT", "TMPDIR", "LANG")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    out = subprocess.run([sys.executable, "-c", _SNAPSHOT], env=env, capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    assert "OPENBLAS_THREAD_TIMEOUT" not in seen["before"]
    assert seen["after"] == seen["before"]
    assert seen["numpy_loaded"]  # (numpy, imported after polybag, is there)
