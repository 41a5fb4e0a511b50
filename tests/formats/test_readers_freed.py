"""A reader is freed as soon as its last reference goes: its parts hold no reference cycle
(which would keep the mapped file, its buffers and decoded definitions alive until the
cyclic garbage collector runs -- files left mapped and memory returned late, for every log
opened in a loop), closed or not.  ``reader.ulog`` still works after its reader is gone."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybag
from paths import ROOT

CORPUS = ROOT / "tests" / "corpus"
SINGLE_FILES = [
    ROOT / "samples" / "demo.mcap",
    CORPUS / "mcap" / "rosbag2_reindex_multiple_files_0.mcap",
    CORPUS / "bag" / "webviz_example.lz4.bag",
    CORPUS / "bag" / "rosbag2_rosbag_v2_test.bag",
    CORPUS / "ulog" / "pyulog_sample_2016-11.ulg",
    CORPUS / "ulog" / "foxglove_mcap_test_ulog.ulg",
]
DIRECTORIES = [CORPUS / "rosbag2" / "v4_cdr_test_2020-04", CORPUS / "rosbag2" / "v6_cdr_test_mcap_2022-12"]


def _use(path: Path, close: bool) -> None:
    r = polybag.open(path)
    summary = r.summary
    assert summary.message_count >= 0
    for reverse in (False, True):
        try:
            for _ in r.messages(reverse=reverse):
                pass
        except polybag.PolybagError:  # a damaged corpus log: what it gives is enough here
            pass
    if summary.channels:
        ch = next(iter(summary.channels.values()))
        try:
            list(r.messages([ch.topic], order="file"))
        except polybag.PolybagError:
            pass
    if close:
        r.close()


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _cyclic_garbage_after(path: Path, close: bool) -> int:
    _use(path, close)  # once first: caches and lazily made classes of the first use
    gc.collect()
    _use(path, close)
    return gc.collect()


@pytest.mark.parametrize("close", [True, False], ids=["closed", "unclosed"])
@pytest.mark.parametrize("path", SINGLE_FILES, ids=lambda p: p.name)
def test_a_reader_of_a_file_leaves_no_cycle(path: Path, close: bool, no_collector: None) -> None:
    assert path.exists()
    assert _cyclic_garbage_after(path, close) == 0


@pytest.mark.parametrize("path", DIRECTORIES, ids=lambda p: p.name)
def test_a_closed_reader_of_a_directory_leaves_no_cycle(path: Path, no_collector: None) -> None:
    assert path.exists()
    assert _cyclic_garbage_after(path, True) == 0


def test_a_ulog_outlives_its_reader() -> None:
    path = CORPUS / "ulog" / "pyulog_sample_2016-11.ulg"
    with polybag.open(path) as r:
        assert r.ulog is not None
        want = (r.ulog.last_timestamp, r.ulog.dropouts, r.ulog.start_timestamp)
    ulog = polybag.open(path).ulog  # the reader is gone at once; its facts are worked out later
    gc.collect()
    assert ulog is not None
    assert (ulog.last_timestamp, ulog.dropouts, ulog.start_timestamp) == want
    assert want[0] > want[2]


@pytest.mark.parametrize("path", SINGLE_FILES, ids=lambda p: p.name)
def test_a_read_outlives_its_reader(path: Path) -> None:
    """An iterator of messages taken from a reader nobody keeps still reads to its end (its
    parts do not need the reader itself), recovering or not."""
    try:
        with polybag.open(path) as r:
            want = sum(1 for _ in r.messages(order="file"))
    except polybag.PolybagError:
        pytest.skip("a damaged corpus log")
    it = polybag.open(path).messages(order="file")
    gc.collect()
    assert sum(1 for _ in it) == want
    options = {} if path.suffix == ".bag" else {"recover": True}
    it = polybag.open(path, **options).messages(order="file")
    gc.collect()
    assert sum(1 for _ in it) == want
