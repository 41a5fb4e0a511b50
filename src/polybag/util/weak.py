"""A bound method held without holding its object (:func:`weak_method`): the parts of a
reader that call back into one another would otherwise make reference cycles, which keep a
reader, its mapped file and its buffers alive after the last reference until the cyclic
garbage collector runs (files left mapped, memory freed late), where one object holding
everything was freed at once."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def weak_method(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` (a bound method) called through a weak reference to its object; calling it
    after that object is gone raises ``ReferenceError``."""
    ref = weakref.WeakMethod(method)
    name = method.__qualname__  # (not ``method`` itself: the closure would hold its object)

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = ref()
        if bound is None:
            raise ReferenceError(f"{name}: its object is gone")
        return bound(*args, **kwargs)

    call.__qualname__ = f"weak {name}"
    return call
