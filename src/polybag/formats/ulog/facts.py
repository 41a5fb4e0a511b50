"""What a ULog says about itself, as ``reader.ulog`` gives it: :class:`UlogData` (the
ULog-only facts of a log, named like pyulog's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polybag.codecs.ulog import FormatDef
from polybag.formats.ulog import records as rec


class UlogData:
    """The ULog-only facts of a log (``reader.ulog``), named like pyulog's where they exist.

    A plain class written out (compared and shown like the dataclass it was): a
    ``@dataclass`` of this size costs ~1 ms of import time in every process that reads a
    ULog log."""

    # (name, default factory) of the fields, in order; the facts that need every data
    # timestamp (the private ones) are worked out on first use and not shown
    _FIELDS: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("version", int),
        ("start_timestamp", int),  # us
        ("compat_flags", lambda: [0] * 8),
        ("incompat_flags", lambda: [0] * 8),
        ("appended_offsets", list),
        ("formats", dict),
        ("info", dict),
        ("info_types", dict),
        ("info_multiple", dict),
        ("info_multiple_types", dict),
        ("params", dict),
        ("default_params", dict),
        ("logged_messages", list),
        ("subscriptions", list),
        ("unsubscriptions", list),  # (offset, msg_id)
        ("sync_count", int),
        ("sync_offsets", list),  # file offset of each sync (S) message
        ("corruptions", list),
        ("warnings", list),
        ("unreported_damage", int),  # damage beyond the first reports (counted only)
        ("unknown_types", dict),  # skipped (unknown) message types -> count
    )
    _PRIVATE = ("_last_timestamp", "_changed_params", "_dropouts", "_syncs")

    version: int
    start_timestamp: int
    compat_flags: list[int]
    incompat_flags: list[int]
    appended_offsets: list[int]
    formats: dict[str, FormatDef]
    info: dict[str, Any]
    info_types: dict[str, str]
    info_multiple: dict[str, list[list[Any]]]
    info_multiple_types: dict[str, str]
    params: dict[str, int | float]
    default_params: dict[int, dict[str, int | float]]
    logged_messages: list[rec.LoggedMessage]
    subscriptions: list[rec.Subscription]
    unsubscriptions: list[tuple[int, int]]
    sync_count: int
    sync_offsets: list[int]
    corruptions: list[dict[str, Any]]
    warnings: list[str]
    unreported_damage: int
    unknown_types: dict[str, int]
    _last_timestamp: int | None
    _changed_params: list[tuple[int, str, int | float]] | None
    _dropouts: list[rec.Dropout] | None
    _syncs: list[int] | None
    _resolve: Callable[[], None] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = [n for n, _ in self._FIELDS] + [*self._PRIVATE, "_resolve"]
        if len(args) > len(names):
            raise TypeError(f"UlogData takes at most {len(names)} positional arguments")
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in given:
                raise TypeError(f"UlogData got an unexpected or repeated argument {k!r}")
            given[k] = v
        for n, make in self._FIELDS:
            setattr(self, n, given[n] if n in given else make())
        for n in (*self._PRIVATE, "_resolve"):
            setattr(self, n, given.get(n))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._FIELDS)
        return f"UlogData({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = [n for n, _ in self._FIELDS] + list(self._PRIVATE)
        return all(getattr(self, n) == getattr(other, n) for n in names)

    # mutable: unhashable; typeshed types __hash__ as a method, not as the None that
    # Python's data model asks for here
    __hash__ = None  # type: ignore[assignment]

    def defer_timed_facts(self, resolve: Callable[[], None]) -> None:
        """The facts that need every data timestamp are worked out by ``resolve`` on first
        use (it calls :meth:`set_timed_facts`)."""
        self._resolve = resolve

    def set_timed_facts(
        self,
        last_timestamp: int,
        changed_params: list[tuple[int, str, int | float]],
        dropouts: list[rec.Dropout],
        syncs: list[int],
    ) -> None:
        """The facts that need every data timestamp (see the properties of the same names)."""
        self._last_timestamp = last_timestamp
        self._changed_params = changed_params
        self._dropouts = dropouts
        self._syncs = syncs

    def _need(self) -> None:
        """Work out the facts that need every data timestamp (once)."""
        if self._resolve is not None:
            self._resolve()

    @property
    def last_timestamp(self) -> int:
        """The largest data timestamp (us), or the start timestamp."""
        self._need()
        return self._last_timestamp if self._last_timestamp is not None else self.start_timestamp

    @property
    def changed_params(self) -> list[tuple[int, str, int | float]]:
        """(timestamp us, name, value) of parameters set in the data section."""
        self._need()
        return self._changed_params if self._changed_params is not None else []

    @property
    def dropouts(self) -> list[rec.Dropout]:
        """(timestamp us, duration ms) of every dropout mark."""
        self._need()
        return self._dropouts if self._dropouts is not None else []

    @property
    def syncs(self) -> list[int]:
        """Timestamp (us) of each sync message: the largest data timestamp before it (like
        dropouts), so a writer can put them back in the same places of the data."""
        self._need()
        return self._syncs if self._syncs is not None else []

    @property
    def has_default_parameters(self) -> bool:
        """Whether the log has default parameters (compat flag)."""
        return bool(self.compat_flags[0] & rec.COMPAT_DEFAULT_PARAMETERS)

    @property
    def has_data_appended(self) -> bool:
        """Whether data was appended to the log (incompat flag; see ``appended_offsets``)."""
        return bool(self.incompat_flags[0] & rec.INCOMPAT_DATA_APPENDED)

    @property
    def file_corruption(self) -> bool:
        """Whether any damage was found."""
        return bool(self.corruptions)

    @property
    def initial_parameters(self) -> dict[str, int | float]:
        """The parameters of the definitions section (pyulog's name)."""
        return self.params

    @property
    def logged_messages_untagged(self) -> list[rec.LoggedMessage]:
        """The logged strings without a tag."""
        return [m for m in self.logged_messages if m.tag is None]

    @property
    def logged_messages_tagged(self) -> dict[int, list[rec.LoggedMessage]]:
        """The tagged logged strings by tag."""
        out: dict[int, list[rec.LoggedMessage]] = {}
        for m in self.logged_messages:
            if m.tag is not None:
                out.setdefault(m.tag, []).append(m)
        return out

    def get_default_parameters(self, default_type: int) -> dict[str, int | float]:
        """The default parameters of one type bit (0: system, 1: current setup)."""
        return self.default_params.get(default_type, {})

    def version_info_str(self, key: str = "ver_sw_release") -> str | None:
        """The software release of an info key as ``v1.2.3 (beta)``, or None."""
        val = self.info.get(key)
        if not isinstance(val, int):
            return None
        major, minor, patch, typ = (val >> 24) & 0xFF, (val >> 16) & 0xFF, (val >> 8) & 0xFF, val & 0xFF
        if typ < 64:
            return None
        kind = " (alpha)" if typ < 128 else " (beta)" if typ < 192 else " (RC)" if typ < 255 else ""
        return f"v{major}.{minor}.{patch}{kind}"
