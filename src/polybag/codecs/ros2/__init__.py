"""ROS 2 message definitions: the bundled common interfaces and a workspace's own.

Files that carry no definition text (rosbag2 bags written before Iron store a type name and
no ``message_definitions``; some MCAP writers leave a ``ros2msg`` schema empty) are decoded
from the known types: the bundled ROS 2 Jazzy interface packages (``msgs/pkg/msg/Type.msg``:
builtin_interfaces, std_msgs, geometry_msgs, sensor_msgs, nav_msgs, tf2_msgs,
diagnostic_msgs, visualization_msgs, rcl_interfaces, action_msgs, shape_msgs,
trajectory_msgs, stereo_msgs, unique_identifier_msgs, rosgraph_msgs, service_msgs,
lifecycle_msgs, statistics_msgs, actionlib_msgs) plus the folders added with
:func:`add_types` (``pkg/msg/Name.msg`` or ``pkg/msg/Name.idl`` files, ``pkg/srv/Name.srv`` for a
service's ``Name_Request``, ``Name_Response`` and ``Name_Event``; the command line's
``--types DIR``).  Added types come before the bundled ones.

:func:`definition_for` gives a known type's full ``ros2msg`` text (the main type, then one
``MSG: pkg/msg/Type`` section per dependency), as MCAP and rosbag2 writers store it.
"""

from __future__ import annotations

from pathlib import Path

from polybag.codecs.ros1.msgdef import (
    PRIMITIVE_FORMATS,
    FieldType,
    MsgDef,
    MsgDefError,
    TypeSet,
    add_folder,
    canonical,
    parse_msg,
)
from polybag.errors import UnsupportedError

__all__ = [
    "MSGS_DIR",
    "add_types",
    "bundled",
    "definition_for",
    "full_definition",
    "full_name",
    "known_types",
    "render_ros2",
    "type_hash_of",
]

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


def add_types(folder: str | Path) -> list[str]:
    """Add the ``.msg``, ``.srv`` and ``.idl`` files under ``folder`` to the known ROS 2 types.

    The package of ``.../pkg/msg/Type.msg`` is ``pkg`` (the parent of ``msg/``), or the
    parent folder's name otherwise; an ``.idl`` file names its own modules.  Returns the
    names (``pkg/msg/Type``) added.  A file that cannot be parsed is a
    :class:`~polybag.errors.UnsupportedError` naming it.
    """
    from polybag.codecs.cdr import parse_idl

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
        d = ts.types.get(name)
        if d is not None and not d.full_name.count("/") == 2:
            d.full_name = full_name(name)
    from polybag.codecs import forget_failures
    from polybag.codecs.cdr import forget_known

    forget_known()
    forget_failures()
    return [full_name(n) for n in added]


def _add_service(ts: TypeSet, path: Path) -> list[str]:
    """A ``pkg/srv/Name.srv`` file's ``Name_Request``, ``Name_Response`` and ``Name_Event``
    types (the package: the parent of ``srv/``, or the parent folder otherwise)."""
    from polybag.codecs.cdr import service_sections

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


def _type_text(t: FieldType) -> str:
    """A field type as ``.msg`` text (nested types as ``pkg/Type``, which rosidl requires)."""
    if t.base in PRIMITIVE_FORMATS or t.base in ("string", "wstring"):
        if t.raw:
            return t.raw
        base = t.base
        if t.string_bound is not None:
            base += f"<={t.string_bound}"
    else:
        base = canonical(t.base)
    if t.array is None:
        return base
    if t.array >= 0:
        return f"{base}[{t.array}]"
    return f"{base}[<={t.bound}]" if t.bound is not None else f"{base}[]"


def _value_text(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple, bytes)):
        return "[" + ", ".join(_value_text(x) for x in v) + "]"
    return repr(v)


def render_ros2(d: MsgDef) -> str:
    """One type as ``.msg`` text (constants, then fields with their default values; nested
    types with their package)."""
    lines = [f"{c.type} {c.name}={c.text}" for c in d.constants]
    for f in d.fields:
        default = "" if f.default is None else " " + _value_text(f.default)
        lines.append(f"{_type_text(f.type)} {f.name}{default}")
    return "\n".join(lines) + "\n"


def definition_for(name: str, types: TypeSet | None = None) -> str:
    """The full ``ros2msg`` text of a type (main type, then ``MSG:`` sections for every
    dependency), from ``types`` or the known types."""
    ts = types if types is not None else known_types()
    key = canonical(name)
    ts.check(key)
    sep = "=" * 80
    out = [render_ros2(ts.get(key))]
    for dep in ts.dependencies(key):
        out.append(f"{sep}\nMSG: {full_name(dep)}\n{render_ros2(ts.get(dep))}")
    return "\n".join(out)


def full_definition(name: str, encoding: str, data: bytes | memoryview) -> tuple[str, bytes]:
    """``(encoding, data)`` to write for a CDR type ``name`` whose definition in its file is
    ``data``: a ``ros2msg`` (or unnamed) schema with no text (rosbag2 before Iron, some MCAP
    writers) becomes the known type's full text (:func:`definition_for`: ``--types`` first,
    then the bundled types), the definition polybag decodes it with; any other schema, and a
    type known nowhere (a message without fields, or a missing definition), as it is."""
    if encoding not in ("ros2msg", "") or bytes(data).strip() or not name:
        return encoding, bytes(data)
    ts = known_types()
    try:
        if ts.lookup(name) is None:
            return encoding, bytes(data)
        return "ros2msg", definition_for(name, ts).encode("utf-8")
    except MsgDefError:
        return encoding, bytes(data)


def undefined_type(name: str, encoding: str, data: bytes | memoryview) -> bool:
    """True when a CDR type's schema (``encoding``, ``data``) has no text and ``name`` is
    known nowhere (not bundled, not added with ``--types``): it is written without a
    definition, which other tools cannot decode with."""
    if encoding not in ("ros2msg", "") or bytes(data).strip() or not name:
        return False
    try:
        return known_types().lookup(name) is None
    except MsgDefError:
        return True


def type_hash_of(name: str, encoding: str, data: bytes | memoryview) -> str:
    """The REP 2011 ``RIHS01_...`` hash of type ``name`` as its ``ros2msg``/``ros2idl``
    definition ``data`` describes it (empty: the known type's), or ``""`` when the
    definition cannot be read."""
    from polybag.codecs.cdr import ros2_typeset
    from polybag.codecs.ros2.typehash import type_hash

    encoding, data = full_definition(name, encoding, data)
    if encoding not in ("ros2msg", "ros2idl") or not data.strip():
        return ""
    try:
        ts = ros2_typeset(name, data, encoding)
        if ts.lookup(name) is None:
            return ""
        return type_hash(ts, name)
    except (MsgDefError, KeyError, UnsupportedError):
        return ""
