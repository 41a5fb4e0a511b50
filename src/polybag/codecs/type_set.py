"""A set of message definitions (:class:`TypeSet`): types by canonical name, with name resolution
(package-relative names, ``Header``), depth and expansion checks and ROS 1 md5sums.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from polybag.codecs.definition_limits import DEFAULT_LIMITS, DefinitionLimits, MsgDefError
from polybag.codecs.definition_model import (
    BUILTIN_BASES,
    PRIMITIVE_FORMATS,
    Field,
    FieldType,
    MsgDef,
    canonical,
    render_msg,
)


def _package(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else ""


class TypeSet:
    """Message definitions by canonical name, with resolution and md5 computation."""

    def __init__(
        self, dialect: str = "ros1", fallback: TypeSet | None = None, limits: DefinitionLimits | None = None
    ) -> None:
        self.dialect = dialect
        self.types: dict[str, MsgDef] = {}
        self.fallback = fallback
        #: depth and expansion limits of :meth:`check` (None: :data:`DEFAULT_LIMITS`)
        self.limits = limits
        self._md5: dict[str, str] = {}
        self._shape: dict[str, tuple[int, int]] = {}  # checked type -> (depth, expanded fields)
        self._short: dict[str, list[str]] | None = None

    def __contains__(self, name: str) -> bool:
        return self.lookup(name) is not None

    def lookup(self, name: str) -> MsgDef | None:
        key = canonical(name)
        d = self.types.get(key)
        if d is None and self.fallback is not None:
            d = self.fallback.lookup(key)
        return d

    def get(self, name: str) -> MsgDef:
        d = self.lookup(name)
        if d is None:
            raise MsgDefError(f"unknown message type {name!r}", type_name=name)
        return d

    def add(self, d: MsgDef) -> None:
        self.types[d.name] = d
        self._md5.clear()
        self._shape.clear()
        self._short = None

    def resolve(self, base: str, package: str) -> str:
        """The canonical name of type ``base`` used inside ``package``."""
        if "/" in base:
            return canonical(base)
        if base == "Header":
            cand = f"{package}/Header" if package else ""
            if cand and cand in self.types:
                return cand
            return "std_msgs/Header"
        if package:
            cand = f"{package}/{base}"
            if self.lookup(cand) is not None:
                return cand
        # not in its own package: take a unique type of that name from anywhere in the text
        matches = self._by_short().get(base, [])
        if len(matches) == 1:
            return matches[0]
        if self.fallback is not None:
            fm = self.fallback._by_short().get(base, [])
            if len(fm) == 1:
                return fm[0]
        return f"{package}/{base}" if package else base

    def _by_short(self) -> dict[str, list[str]]:
        """Type names by their last part (one pass, kept until a type is added)."""
        if self._short is None:
            self._short = {}
            for n in self.types:
                self._short.setdefault(n.rsplit("/", 1)[-1], []).append(n)
        return self._short

    def finalize(self) -> None:
        """Resolve package-relative names of every field (after all sections are added)."""
        for d in self.types.values():
            pkg = _package(d.name)
            new = []
            changed = False
            for f in d.fields:
                t = f.type
                if t.base not in PRIMITIVE_FORMATS and t.base not in (
                    "string",
                    "wstring",
                    "time",
                    "duration",
                ):
                    full = self.resolve(t.base, pkg)
                    if full != t.base:
                        t = FieldType(full, t.array, t.bound, t.string_bound, t.raw)
                        changed = True
                new.append(Field(f.name, t))
            if changed:
                d.fields = new
        self._md5.clear()
        self._shape.clear()

    def check(self, name: str) -> None:
        """Raise :class:`MsgDefError` if ``name`` or a dependency is undefined or recursive, or
        the type nests deeper than :data:`~polybag.codecs.definition_limits.MAX_DEPTH` or
        expands to more than :data:`~polybag.codecs.definition_limits.MAX_FIELDS`.

        The walk is iterative (no Python recursion, whatever the definition) and stops as soon
        as the chain it follows is too deep; results are kept per type.
        """
        key = canonical(name)
        if key in self._shape:
            return
        max_depth = (self.limits or DEFAULT_LIMITS).depth
        shape = self._shape
        path: list[str] = []
        on_path: set[str] = set()
        todo: list[Iterator[Field]] = []

        def enter(n: str) -> None:
            d = self.lookup(n)
            if d is None:
                raise MsgDefError(f"definition of {n} is missing", type_name=key)
            if len(path) >= max_depth:
                raise MsgDefError(
                    f"message types nested more than {max_depth} levels deep ({_chain([*path, n])}; "
                    "the limit is DefinitionLimits.depth)",
                    type_name=key,
                )
            path.append(n)
            on_path.add(n)
            todo.append(iter(d.fields))

        enter(key)
        while path:
            n = path[-1]
            for f in todo[-1]:
                b = f.type.base
                if b in BUILTIN_BASES or b in shape:
                    continue
                if b in on_path:
                    loop = path[path.index(b) :] + [b]
                    raise MsgDefError(f"recursive message definition: {_chain(loop)}", type_name=key)
                enter(b)
                break
            else:
                shape[n] = self._measure(n, key)
                path.pop()
                on_path.discard(n)
                todo.pop()

    def _measure(self, n: str, top: str) -> tuple[int, int]:
        """(depth, expanded fields) of ``n`` from its (already measured) nested types."""
        limits = self.limits or DEFAULT_LIMITS
        depth, size = 1, 1
        for f in self.get(n).fields:
            t = f.type
            if t.base in BUILTIN_BASES:
                size += 1
                continue
            sub_depth, sub_size = self._shape[t.base]
            depth = max(depth, sub_depth + 1)
            if t.array is None:
                size += sub_size
            elif t.array >= 0:
                size += 1 + t.array * sub_size
            else:  # a sequence: its elements are paid for by payload bytes (or bounded when empty)
                size += 1
            if size > limits.expanded_fields:
                raise MsgDefError(
                    f"{n} expands to more than {limits.expanded_fields} fields (nested messages and fixed-size "
                    "arrays of messages counted field by field; the limit is DefinitionLimits.expanded_fields)",
                    type_name=top,
                )
        if depth > limits.depth:
            raise MsgDefError(
                f"message types nested more than {limits.depth} levels deep (in {n}; the limit is "
                "DefinitionLimits.depth)",
                type_name=top,
            )
        return depth, size

    def depth(self, name: str) -> int:
        """Message nesting levels of a type (1: only primitive fields); checks it first."""
        key = canonical(name)
        self.check(key)
        return self._shape[key][0]

    def size(self, name: str) -> int:
        """Fields of a type fully expanded (see :data:`~polybag.codecs.definition_limits.MAX_FIELDS`); checks it first."""
        key = canonical(name)
        self.check(key)
        return self._shape[key][1]

    # --- md5 ----------------------------------------------------------------------------
    def md5_text(self, name: str) -> str:
        d = self.get(name)
        lines = list(d.md5_constants)
        for f, (raw, _base, fname) in zip(d.fields, d.md5_fields):
            if raw:
                lines.append(f"{raw} {fname}")
            else:
                lines.append(f"{self.md5(f.type.base)} {fname}")
        return "\n".join(lines).strip()

    def md5(self, name: str) -> str:
        key = canonical(name)
        v = self._md5.get(key)
        if v is None:
            self.check(key)
            v = self._md5[key] = hashlib.md5(self.md5_text(key).encode()).hexdigest()
        return v

    def full_text(self, name: str) -> str:
        """A ROS 1 style full definition text (main type and all dependencies)."""
        sep = "=" * 80
        out = [render_msg(self.get(name))]
        for dep in self.dependencies(name):
            out.append(f"{sep}\nMSG: {dep}\n{render_msg(self.get(dep))}")
        return "\n".join(out)

    def dependencies(self, name: str) -> list[str]:
        """Every message type ``name`` uses (depth first, each once), walked without recursion."""
        out: list[str] = []
        seen: set[str] = set()
        todo: list[Iterator[Field]] = [iter(self.get(name).fields)]
        while todo:
            for f in todo[-1]:
                b = f.type.base
                if f.type.is_nested and b not in seen:
                    seen.add(b)
                    out.append(b)
                    todo.append(iter(self.get(b).fields))
                    break
            else:
                todo.pop()
        return out


def _chain(names: list[str], keep: int = 6) -> str:
    """``a -> b -> c``, the middle of a long chain elided."""
    if len(names) > 2 * keep:
        names = [*names[:keep], f"... ({len(names) - 2 * keep} more)", *names[-keep:]]
    return " -> ".join(names)


def defined_fields(ts: TypeSet) -> int:
    """Fields written in a type set's own definitions: what compiling its types costs."""
    return sum(len(d.fields) for d in ts.types.values())
