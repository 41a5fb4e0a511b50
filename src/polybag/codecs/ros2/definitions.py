"""ROS 2 definitions read and written: a schema's text parsed into a resolved type set, and
a known type's full text as writers store it.

:func:`ros2_typeset` parses a ``ros2msg`` or ``ros2idl`` schema (a service type from its
service's definition too); what the text leaves out comes from the known types
(:mod:`polybag.codecs.ros2.store`).  :func:`definition_for` gives a known type's full
``ros2msg`` text (the main type, then one ``MSG: pkg/msg/Type`` section per dependency), as
MCAP and rosbag2 writers store it.
"""

from __future__ import annotations

from polybag.codecs.definition_limits import DEFAULT_LIMITS, DefinitionLimits, MsgDefError
from polybag.codecs.definition_model import PRIMITIVE_FORMATS, FieldType, MsgDef, canonical
from polybag.codecs.msg_parser import parse_full
from polybag.codecs.ros2.idl import parse_idl
from polybag.codecs.ros2.sections import idl_service, service_types
from polybag.codecs.ros2.store import full_name, known_types
from polybag.codecs.type_set import TypeSet

__all__ = [
    "check_definition",
    "definition_for",
    "full_definition",
    "render_ros2",
    "ros2_typeset",
    "undefined_type",
]


def ros2_typeset(
    name: str, text: str | bytes, encoding: str = "ros2msg", limits: DefinitionLimits | None = None
) -> TypeSet:
    """Parse a ``ros2msg`` or ``ros2idl`` schema into a resolved :class:`TypeSet`.

    A definition over ``limits`` (:data:`~polybag.codecs.definition_limits.DEFAULT_LIMITS`: text
    size, types, fields, name length; nesting and expansion are checked when a type is
    compiled, :meth:`TypeSet.check`) is a :class:`MsgDefError` naming the limit.  A service
    type (``pkg/srv/Name_Event``, ``_Request``, ``_Response``) given its service's definition
    is built from it (:func:`service_types`)."""
    limits = limits or DEFAULT_LIMITS
    limits.check_text(text, name)
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    text = text.replace("\r\n", "\n")
    if encoding == "ros2idl":
        ts = TypeSet("ros2", fallback=known_types(), limits=limits)
        mixed = idl_service(name, text)
        if mixed is not None:
            text = mixed[1]
        for d in parse_idl(text, limits, name):
            if d.name not in ts.types:
                ts.add(d)
        ts.finalize()
        if mixed is not None:  # the service's types, over the IDL types they use
            return parse_full(name, mixed[0], "ros2", fallback=ts, limits=limits)
        return ts
    srv = service_types(name, text)
    if srv is not None:
        text = srv
    return parse_full(name, text, "ros2", fallback=known_types(), limits=limits)


def check_definition(
    name: str, text: str | bytes, encoding: str = "ros2msg", limits: DefinitionLimits | None = None
) -> TypeSet:
    """Parse a ``ros2msg``/``ros2idl`` definition and check type ``name`` against ``limits``
    (text, types, fields, names, nesting, expansion), without compiling anything; a
    :class:`MsgDefError` naming the limit, else the resolved :class:`TypeSet`.  A recorder
    taking definitions from live peers calls it with lower limits before storing one."""
    ts = ros2_typeset(name, text, encoding, limits)
    if ts.lookup(name) is None:
        raise MsgDefError(f"the definition does not define {name}", type_name=name)
    ts.check(name)
    return ts


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
