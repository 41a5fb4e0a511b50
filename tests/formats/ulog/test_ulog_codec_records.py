"""The ULog codec's records (:class:`FieldDef`, :class:`FormatDef`, :class:`FlatField`,
:class:`UlogType`) behave as dataclasses (three of them are; :class:`UlogType` is a plain class):
compared and shown field by field, the two format records frozen and hashable, the
compiled ones mutable and unhashable, and all of them copied and pickled intact."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polybag.codecs.ulog import FieldDef, FlatField, UlogType, compile_type, parse_format
from ulog_helpers import INNER_FMT, NEST_FMT, POS_FMT


def test_format_records_are_frozen_values() -> None:
    f = parse_format(POS_FMT)
    g = parse_format(f.text())
    assert f == g and hash(f) == hash(g) and f is not g
    assert f != parse_format(POS_FMT.replace("k;", "kk;"))
    assert f.fields[0] == FieldDef("uint64_t", 0, "timestamp")
    assert repr(f.fields[1]) == "FieldDef(type='float', array=3, name='xyz')"
    assert repr(f).startswith("FormatDef(name='pos', fields=(FieldDef(")  # names not shown
    assert f.names == ("timestamp", "xyz", "k", "_padding0")
    assert {f: 1}[g] == 1
    with pytest.raises(AttributeError):
        f.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del f.fields[0].name
    assert (f == 3) is False and f.__eq__(3) is NotImplemented
    for copied in (copy.copy(f), copy.deepcopy(f), pickle.loads(pickle.dumps(f))):
        assert copied == f and copied.names == f.names


def test_compiled_types_are_mutable_and_unhashable() -> None:
    formats = {x.name: x for x in map(parse_format, (NEST_FMT, INNER_FMT))}
    t = compile_type("nest", formats)
    same = compile_type("nest", formats)
    assert t == same
    with pytest.raises(TypeError):
        hash(t)
    with pytest.raises(TypeError):
        hash(t.flat[0])
    assert t.flat[0] == FlatField("timestamp", "uint64_t", 0, False)
    assert repr(t.flat[0]) == "FlatField(name='timestamp', type='uint64_t', offset=0, padding=False)"
    assert t.dtype.itemsize == t.min_size  # made on first use, then kept
    assert t != same  # (same has no dtype yet: compared field by field, as before)
    assert same.dtype == t.dtype and t == same
    for copied in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert copied == t and copied.column_names() == t.column_names()
    u = UlogType("x", {})
    assert u.flat == [] and u.flat is not UlogType("y", {}).flat
    u.size = 5
    assert u.size == 5


@given(st.lists(st.tuples(st.sampled_from(["uint8_t", "float", "double", "int16_t"]), st.integers(0, 4)), min_size=1, max_size=8))
def test_parsed_formats_round_trip_through_their_text(fields: list[tuple[str, int]]) -> None:
    text = "t:" + "".join(f"{ty}[{n}] f{i};" if n else f"{ty} f{i};" for i, (ty, n) in enumerate(fields))
    f = parse_format(text)
    assert f.text() == text and parse_format(f.text()) == f and hash(parse_format(text)) == hash(f)
