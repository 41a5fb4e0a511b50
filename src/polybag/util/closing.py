"""One context-manager base for everything that is closed when done with.

Readers, ROS nodes, publishers, subscriptions and players all say ``with x: ...`` and
close on the way out; :class:`Closing` gives them ``__enter__``/``__exit__`` once.
"""

from __future__ import annotations

from typing import TypeVar

_C = TypeVar("_C", bound="Closing")


class Closing:
    """``with obj:`` returns ``obj`` and calls ``obj.close()`` at the end (subclasses define
    :meth:`close`)."""

    def close(self) -> None:
        """Release what the object holds (each subclass says what)."""
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
