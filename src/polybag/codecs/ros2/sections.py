"""The sections of a ROS 2 definition text, and the types of a service.

A definition as rosbag2 and MCAP store it is the main type's text, then one section per type
it uses, each after a ``====`` line and a header (``MSG: pkg/msg/Type``, ``IDL: ...``,
``SRV: pkg/srv/Name``).  A service ``pkg/srv/Name`` gives three types: ``Name_Request``,
``Name_Response`` and ``Name_Event`` (rosidl's event type); this module builds their texts
from the service's definition.  Text only: nothing here parses a type.
"""

from __future__ import annotations

import re

__all__ = ["SECTION_SEPARATOR", "idl_service", "service_of", "service_sections", "service_types"]

#: the line between two sections of a definition text (``====...``); no ``\s*`` around it,
#: see :data:`polybag.codecs.msg_parser._SEPARATOR`
SECTION_SEPARATOR = re.compile(r"^[ \t\f\v\r]*={3,}[ \t\f\v\r]*$", re.MULTILINE)


_SRV_SUFFIXES = ("_Event", "_Request", "_Response")
_SRV_HEAD_RE = re.compile(r"\A\s*={3,}[ \t\f\v\r]*\n[ \t]*SRV:[^\n]*\n?")
_SRV_SPLIT_RE = re.compile(r"^---[ \t\f\v\r]*$", re.MULTILINE)


def service_of(name: str) -> tuple[str, str, str] | None:
    """``pkg/srv/Name_Event`` (``_Request``, ``_Response``) -> ``("pkg", "Name", "_Event")``;
    None for any other name."""
    parts = name.strip().split("/")
    if len(parts) != 3 or parts[1] != "srv":
        return None
    for suffix in _SRV_SUFFIXES:
        if parts[2].endswith(suffix) and len(parts[2]) > len(suffix):
            return parts[0], parts[2][: -len(suffix)], suffix
    return None


def service_sections(base: str, text: str) -> tuple[dict[str, str], str] | None:
    """The ``.msg`` texts of service ``base``'s (``pkg/srv/Name``) types built from its
    definition (``request --- response``, then ``MSG:`` sections), as rosbag2 stores one: the
    ``.srv`` text alone (MCAP storage), or after an ``SRV: pkg/srv/Name`` section header
    (rosbag2 from Jazzy).  ``({"_Event": ..., "_Request": ..., "_Response": ...}, the MSG:
    sections after the service's)``; the event type is rosidl's: ``service_msgs/ServiceEventInfo
    info``, ``Name_Request[<=1] request``, ``Name_Response[<=1] response``.  None when
    ``text`` is no service definition."""
    text = _SRV_HEAD_RE.sub("", text, count=1)
    m = SECTION_SEPARATOR.search(text)
    main, tail = (text[: m.start()], text[m.start() :]) if m else (text, "")
    halves = _SRV_SPLIT_RE.split(main, maxsplit=1)
    if len(halves) != 2:
        return None
    req, resp = halves
    event = (
        "service_msgs/ServiceEventInfo info\n"
        f"{base}_Request[<=1] request\n"
        f"{base}_Response[<=1] response\n"
    )
    return {"_Event": event, "_Request": req, "_Response": resp}, tail


def service_types(name: str, text: str) -> str | None:
    """The full ``ros2msg`` text of ``name`` (``pkg/srv/Name_Event``, ``_Request`` or
    ``_Response``) from its service's definition (:func:`service_sections`): that type first,
    the other two as ``MSG:`` sections (keeping their ``srv/`` names, as the event's type hash
    names them), then the dependencies the text carries.  None when ``name`` is no service
    type or ``text`` no service definition."""
    parts = service_of(name)
    if parts is None:
        return None
    pkg, srv, suffix = parts
    base = f"{pkg}/srv/{srv}"
    got = service_sections(base, text)
    if got is None:
        return None
    sections, tail = got
    sep = "=" * 80
    out = [sections.pop(suffix).rstrip("\n") + "\n"]
    out += [f"{sep}\nMSG: {base}{k}\n{v.strip(chr(10))}\n" for k, v in sections.items()]
    return "".join(out) + tail.lstrip("\n")


def idl_service(name: str, text: str) -> tuple[str, str] | None:
    """A ``ros2idl`` definition of a service type as rosbag2 stores one whose dependencies
    are ``.idl`` files: an ``SRV:`` section, then ``MSG:`` sections (empty for the IDL types)
    and ``IDL:`` sections.  ``(the service type's ros2msg text, the IDL sections)``, or None
    for any other definition."""
    if service_of(name) is None or not _SRV_HEAD_RE.match(text):
        return None
    sep = "=" * 80
    msg, idl = [], []
    for part in SECTION_SEPARATOR.split(text):
        head, _, body = part.lstrip("\n").partition("\n")
        if head.startswith("IDL:"):
            idl.append(f"{sep}\n{head}\n{body}")
        elif head.startswith(("SRV:", "MSG:")) and body.strip():
            msg.append(f"{sep}\n{head}\n{body}")
    srv = service_types(name, "\n".join(msg))
    return (srv, "\n".join(idl)) if srv is not None else None
