"""YAML from input, loaded with bounds: polybag's one way to read YAML it did not write.

PyYAML's safe loaders share a node that an alias names, so a "billion laughs" document (ten
aliases of ten aliases of ...) loads as a small graph -- but anything that walks it (``str``,
a copy, a comparison, merge keys ``<<``) expands it, and a 2 KB file becomes gigabytes and
minutes.  :func:`load` first streams the document's events through the C parser (no node is
kept) counting what the document would be *with every alias expanded*: nodes, bytes of
scalars, nesting depth; an alias of a collection still open (a recursive structure) is
refused.  Only a document inside every bound is then loaded (the C loader when PyYAML has
it).  Each refusal says which limit it met.

Used for rosbag2's ``metadata.yaml``; record configs (``record --config``) can use it too::

    from polybag.util.safe_yaml import load
    doc = load(data, path, error=UsageError)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polybag.errors import FormatError, PolybagError

#: bytes of a YAML file polybag reads (a rosbag2 metadata.yaml is a few KiB per topic)
MAX_YAML_BYTES = 64 << 20
#: nodes (scalars, sequences, mappings) of a document with every alias expanded
MAX_YAML_NODES = 500_000
#: collections nested in one another
MAX_YAML_DEPTH = 64

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_NODES", "dump", "load"]


def _yaml() -> Any:
    import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

    return yaml


def _loader() -> Any:
    yaml = _yaml()
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _fail(error: Callable[..., PolybagError], path: str | None, message: str) -> PolybagError:
    """``error`` naming ``path``: a FormatError takes it as its path, others in the text."""
    make = error  # (the checks below narrow ``error`` to a bare type)
    if isinstance(error, type) and issubclass(error, FormatError):
        format_error: type[FormatError] = error
        return format_error(message, path)
    return make(f"{path}: {message}" if path else message)


def check_expansion(
    data: bytes | str,
    path: str | None = None,
    *,
    max_nodes: int = MAX_YAML_NODES,
    max_bytes: int = MAX_YAML_BYTES,
    max_depth: int = MAX_YAML_DEPTH,
    error: Callable[..., PolybagError] = FormatError,
) -> None:
    """Raise ``error`` when ``data``, its aliases expanded, would hold more than
    ``max_nodes`` nodes or ``max_bytes`` bytes of scalars, nest deeper than ``max_depth``,
    or hold a recursive alias.  YAML syntax errors are left to the loader."""
    yaml = _yaml()
    nodes = 0  # expanded so far, in the whole stream
    size = 0
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, expanded bytes)
    stack: list[tuple[str | None, int, int]] = []  # open collections: anchor, nodes, bytes at start
    open_anchors: set[str] = set()
    scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
    start = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    end = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    try:
        for ev in yaml.parse(data, Loader=_loader()):
            if isinstance(ev, scalar):
                nodes += 1
                n = len(ev.value)
                size += n
                if ev.anchor is not None:
                    anchors[ev.anchor] = (1, n)
            elif isinstance(ev, alias):
                if ev.anchor in open_anchors:
                    raise _fail(error, path, f"YAML alias *{ev.anchor} refers to itself (a recursive structure)")
                got = anchors.get(ev.anchor)
                if got is None:
                    continue  # an undefined alias: the loader's error says where
                nodes += got[0]
                size += got[1]
            elif isinstance(ev, start):
                nodes += 1
                if len(stack) >= max_depth:
                    raise _fail(error, path, f"YAML nested more than {max_depth} levels deep (the limit)")
                stack.append((ev.anchor, nodes, size))
                if ev.anchor is not None:
                    open_anchors.add(ev.anchor)
            elif isinstance(ev, end):
                if not stack:
                    continue
                anchor, n0, s0 = stack.pop()
                if anchor is not None:
                    open_anchors.discard(anchor)
                    anchors[anchor] = (nodes - n0 + 1, size - s0)
            elif isinstance(ev, yaml.DocumentStartEvent):
                anchors.clear()
            else:
                continue
            if nodes > max_nodes:
                raise _fail(
                    error,
                    path,
                    f"YAML expands to more than {max_nodes} nodes (the limit; aliases counted as often as they are used)",
                )
            if size > max_bytes:
                raise _fail(
                    error,
                    path,
                    f"YAML expands to more than {max_bytes} bytes of text (the limit; aliases counted as often as they are used)",
                )
    except PolybagError:
        raise  # a bound met (UsageError is a ValueError too)
    except (yaml.YAMLError, UnicodeDecodeError, ValueError):
        return  # the loader reports the syntax error


def load(
    data: bytes | str,
    path: str | None = None,
    *,
    max_nodes: int = MAX_YAML_NODES,
    max_bytes: int = MAX_YAML_BYTES,
    max_depth: int = MAX_YAML_DEPTH,
    error: Callable[..., PolybagError] = FormatError,
    unique_keys: bool = False,
) -> Any:
    """The YAML document ``data`` (one document; None when empty) with PyYAML's safe loader,
    after :func:`check_expansion`.  Anything wrong -- too big, a bound met, not YAML, not
    text, a value its tag cannot take, with ``unique_keys`` a key given twice in one mapping
    -- is ``error`` naming ``path`` (a :class:`~polybag.errors.FormatError` by default),
    never a YAML exception."""
    yaml = _yaml()
    if len(data) > max_bytes:
        raise _fail(error, path, f"YAML file is over {max_bytes} bytes (the limit)")
    check_expansion(data, path, max_nodes=max_nodes, max_bytes=max_bytes, max_depth=max_depth, error=error)
    try:
        if not unique_keys:
            return yaml.load(data, Loader=_loader())
        loader = _loader()(data)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_unique_keys(node, path, error)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except PolybagError:
        raise
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise _fail(error, path, f"not valid YAML: {first}") from None
    except UnicodeDecodeError as e:
        raise _fail(error, path, f"not valid YAML text: {e}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        raise _fail(error, path, f"not valid YAML: {type(e).__name__}: {str(e)[:200]}") from None


def _check_unique_keys(root: Any, path: str | None, error: Callable[..., PolybagError]) -> None:
    """No key twice in one mapping of the composed tree ``root`` (each node visited once:
    an alias is the node it names, so the walk is as long as the text)."""
    yaml = _yaml()
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            keys: set[tuple[str, str]] = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if (k.tag, k.value) in keys:
                        line = k.start_mark.line + 1 if k.start_mark is not None else "?"
                        raise _fail(error, path, f"line {line}: key {k.value[:80]!r} given twice")
                    keys.add((k.tag, k.value))
                stack.extend((k, v))


def dump(value: Any, **kwargs: Any) -> str:
    """``value`` as YAML text with PyYAML's safe dumper (the C one when PyYAML has it)."""
    yaml = _yaml()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return str(yaml.dump(value, Dumper=dumper, **kwargs))
