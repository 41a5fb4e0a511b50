"""The known ROS 2 types: the bundled common interfaces and a workspace's own.

Files that carry no definition text (rosbag2 bags written before Iron store a type name and
no ``message_definitions``; some MCAP writers leave a ``ros2msg`` schema empty) are decoded
from the known types: the bundled ROS 2 Jazzy interface packages (``msgs/pkg/msg/Type.msg``)
plus the folders added with :func:`add_types` (``pkg/msg/Name.msg`` or ``pkg/msg/Name.idl``
files, ``pkg/srv/Name.srv`` for a service's ``Name_Request``, ``Name_Response`` and
``Name_Event``; the command line's ``--types DIR``).  Added types come before the bundled
ones.  Adding types signals :func:`polybag.codecs.cache.definitions_added`, so the codecs
made from the known types are made again.
"""

from __future__ import annotations

import os
from pathlib import Path

from polybag.codecs.cache import definitions_added
from polybag.codecs.definition_limits import MsgDefError
from polybag.codecs.definition_model import canonical
from polybag.codecs.msg_parser import add_folder, parse_msg
from polybag.codecs.ros2.idl import parse_idl
from polybag.codecs.ros2.sections import service_sections
from polybag.codecs.type_set import TypeSet
from polybag.errors import UnsupportedError

__all__ = ["MSGS_DIR", "add_types", "bundled", "full_name", "known_types"]

MSGS_DIR = Path(__file__).with_name("msgs")

_bundled: TypeSet | None = None
_user = TypeSet("ros2")


def bundled() -> TypeSet:
    """The bundled ROS 2 (Jazzy) definitions of the common interface packages."""
    global _bundled
    if _bundled is None:
        ts = TypeSet("ros2")
        add_folder(ts, str(MSGS_DIR))
        for d in ts.types.values():
            d.full_name = full_name(d.name)
        _bundled = ts
    return _bundled


def known_types() -> TypeSet:
    """The types added with :func:`add_types` first, then the bundled ones."""
    _user.fallback = bundled()
    return _user


def full_name(name: str) -> str:
    """``pkg/Type`` (or ``pkg/msg/Type``) -> ``pkg/msg/Type``."""
    c = canonical(name)
    pkg, _, rest = c.partition("/")
    if not rest or "/" in rest:
        return c
    return f"{pkg}/msg/{rest}"


def add_types(folder: str | os.PathLike[str]) -> list[str]:
    """Add the ``.msg``, ``.srv`` and ``.idl`` files under ``folder`` to the known ROS 2 types.

    The package of ``.../pkg/msg/Type.msg`` is ``pkg`` (the parent of ``msg/``), or the
    parent folder's name otherwise; an ``.idl`` file names its own modules.  Returns the
    names (``pkg/msg/Type``) added.  A file that cannot be parsed is a
    :class:`~polybag.errors.UnsupportedError` naming it.
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise UnsupportedError(f"--types {folder}: not a directory")
    ts = known_types()
    added: list[str] = []
    try:
        added += add_folder(ts, str(root))
        for p in sorted(root.rglob("*.srv")):
            added += _add_service(ts, p)
        for p in sorted(root.rglob("*.idl")):
            for d in parse_idl(p.read_text(encoding="utf-8")):
                ts.add(d)
                added.append(d.name)
        ts.finalize()
    except (MsgDefError, OSError, UnicodeDecodeError) as e:
        raise UnsupportedError(f"types folder {folder}: {e}") from None
    for name in added:
        known = ts.types.get(name)
        if known is not None and not known.full_name.count("/") == 2:
            known.full_name = full_name(name)
    definitions_added()  # the codecs made from the known types, and failed schemas, are dropped
    return [full_name(n) for n in added]


def _add_service(ts: TypeSet, path: Path) -> list[str]:
    """A ``pkg/srv/Name.srv`` file's ``Name_Request``, ``Name_Response`` and ``Name_Event``
    types (the package: the parent of ``srv/``, or the parent folder otherwise)."""
    pkg = path.parent.parent.name if path.parent.name == "srv" else path.parent.name
    base = f"{pkg}/srv/{path.stem}"
    got = service_sections(base, path.read_text(encoding="utf-8").replace("\r\n", "\n"))
    if got is None:
        raise MsgDefError(f"{path}: no '---' line between the request and the response")
    names = []
    for suffix, text in got[0].items():
        d = parse_msg(base + suffix, text, "ros2")
        d.full_name = base + suffix
        ts.add(d)
        names.append(d.name)
    ts.finalize()
    return names
