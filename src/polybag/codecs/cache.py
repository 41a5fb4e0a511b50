"""Bounded caches of what the codecs compile from definitions, and the signal that new
definitions are known.

The bottom of :mod:`polybag.codecs`: the registry, the CDR and ROS 1 codecs, the ROS 2 type
store and the ULog codec import it, and it imports nothing of polybag.  A cache of things
made from definitions registers how to drop them with :func:`on_definitions_added`; whoever
makes new definitions known (``--types``, a ROS 1 ``.msg`` folder) calls
:func:`definitions_added`, so a type store never imports the caches above it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CostCache", "definition_key", "definitions_added", "on_definitions_added"]

_V = TypeVar("_V")


class CostCache(dict):  # type: ignore[type-arg]
    """A bounded cache of compiled things (codecs): at most ``max_items`` entries and
    ``max_cost`` total cost (what each entry was given, e.g. the fields it compiled); the
    least recently used entries are dropped past either bound, so what the cache holds never
    grows with the number or the size of the definitions an input declares.  A ``dict``
    (``clear()`` and lookups work as on one); add entries with :meth:`put`."""

    def __init__(self, max_cost: int, max_items: int) -> None:
        super().__init__()
        self.max_cost = max_cost
        self.max_items = max_items
        self._costs: dict[Any, int] = {}
        self.total = 0
        self.evictions = 0  # entries dropped so far (callers drop what they derived from them)

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            return default
        value = super().pop(key)
        super().__setitem__(key, value)  # most recently used last
        return value

    def put(self, key: Any, value: _V, cost: int = 1) -> _V:
        self.pop(key, None)
        cost = max(1, cost)
        while len(self) and (self.total + cost > self.max_cost or len(self) >= self.max_items):
            self.pop(next(iter(self)))
            self.evictions += 1
        super().__setitem__(key, value)
        self._costs[key] = cost
        self.total += cost
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def pop(self, key: Any, *default: Any) -> Any:
        self.total -= self._costs.pop(key, 0)
        return super().pop(key, *default)

    def __delitem__(self, key: Any) -> None:
        self.pop(key)

    def clear(self) -> None:
        super().clear()
        self._costs.clear()
        self.total = 0


def definition_key(text: str | bytes | bytearray | memoryview) -> tuple[int, bytes]:
    """A short key for a definition text (its length and a 128-bit digest), so caches do not
    hold copies of the texts themselves."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    return len(raw), hashlib.blake2b(raw, digest_size=16).digest()


_forgetters: list[Callable[[], None]] = []


def on_definitions_added(forget: Callable[[], None]) -> None:
    """Call ``forget`` (which drops what a cache made from the definitions known so far)
    each time new definitions are made known (:func:`definitions_added`)."""
    if forget not in _forgetters:
        _forgetters.append(forget)


def definitions_added() -> None:
    """New definitions are known (types added): every cache registered with
    :func:`on_definitions_added` drops what it made, in the order they registered."""
    for forget in list(_forgetters):
        forget()
