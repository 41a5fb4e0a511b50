"""An S3 object opened with one ranged GET (issue 30): the last bytes and the object's size
(``Content-Range``) in one request instead of a HEAD and then a read, on a real S3 server
(SeaweedFS).  Each byte is still fetched once (the partly held block before the tail is
completed with a request that stops where the tail began), the pinning still holds, and a
missing object or an empty one says what it did before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seaweed import SeaweedS3, upload

import polybag
from polybag.io.block_map import BLOCK
from polybag.io.fsspec_transport import _content_range
from polybag.io.remote import open_url, read_head_counted
from polybag.io.remote_source import HEAD, TAIL

pytest.importorskip("s3fs")

#: sizes around the edges: smaller than the tail, one byte over it, the tail plus a block
#: and an unaligned remainder, and large
SIZES = [1, 5000, TAIL + BLOCK, TAIL + BLOCK + 1, HEAD + TAIL + BLOCK + 777, 3 * (1 << 20) + 12345]


@pytest.fixture(scope="module")
def objects(seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> dict[int, bytes]:
    d = tmp_path_factory.mktemp("ranged_open")
    out: dict[int, bytes] = {}
    files: dict[str, Path] = {}
    for n in SIZES:
        data = os.urandom(n)
        p = d / f"obj{n}"
        p.write_bytes(data)
        files[f"ranged/obj{n}"] = p
        out[n] = data
    (d / "empty").write_bytes(b"")
    files["ranged/empty"] = d / "empty"
    upload(seaweed, "logs", files)
    return out


@pytest.mark.parametrize("n", SIZES)
def test_open_takes_one_request_then_each_byte_once(seaweed: SeaweedS3, objects: dict[int, bytes], n: int) -> None:
    src = open_url(f"s3://logs/ranged/obj{n}", seaweed.storage_options())
    try:
        opened = src.stats
        assert opened["size"] == n
        # the tail with the size; the head only when the tail did not hold it
        assert opened["requests"] == (1 if n <= TAIL + BLOCK else 2)
        # (a head close to the tail is fetched with the bytes between them, in one request)
        assert opened["bytes_fetched"] <= n
        if n > 2 * (HEAD + TAIL):
            assert opened["bytes_fetched"] == TAIL + BLOCK + HEAD
        assert bytes(src.view[:HEAD]) == objects[n][:HEAD]
        assert bytes(src.view[max(0, n - TAIL) :]) == objects[n][max(0, n - TAIL) :]
        src.need_all()
        assert bytes(src.view) == objects[n]
        done = src.stats
        assert done["bytes_fetched"] == n  # no byte twice: the partial block's fetch stops at the tail
    finally:
        src.close()


def test_the_block_before_the_tail_alone(seaweed: SeaweedS3, objects: dict[int, bytes]) -> None:
    n = SIZES[-1]
    src = open_url(f"s3://logs/ranged/obj{n}", seaweed.storage_options())
    try:
        start = n - TAIL - BLOCK
        assert start % BLOCK  # the tail begins inside a block
        before = src.stats["bytes_fetched"]
        src.need(start - 10, 20)  # the bytes either side of where the tail begins
        assert bytes(src.view[start - 10 : start + 10]) == objects[n][start - 10 : start + 10]
        assert src.stats["bytes_fetched"] - before == start - start // BLOCK * BLOCK
    finally:
        src.close()


def test_read_head_is_one_request(seaweed: SeaweedS3, objects: dict[int, bytes]) -> None:
    n = SIZES[-1]
    data, requests = read_head_counted(f"s3://logs/ranged/obj{n}", 100, seaweed.storage_options())
    assert (data, requests) == (objects[n][:100], 1)
    data, requests = read_head_counted(f"s3://logs/ranged/obj{SIZES[0]}", 100, seaweed.storage_options())
    assert (data, requests) == (objects[SIZES[0]], 1)


def test_an_empty_object_and_a_missing_one_say_what_they_did(seaweed: SeaweedS3, objects: dict[int, bytes]) -> None:
    src = open_url("s3://logs/ranged/empty", seaweed.storage_options())
    try:
        assert src.size == 0  # asked the HEAD way after the ranged GET found nothing to range
    finally:
        src.close()
    assert read_head_counted("s3://logs/ranged/empty", 10, seaweed.storage_options())[0] == b""
    with pytest.raises(polybag.PolybagError, match=r"no such object \(no such key ranged/nope in bucket logs\)"):
        open_url("s3://logs/ranged/nope", seaweed.storage_options())
    with pytest.raises(polybag.PolybagError, match="no such bucket nobucket"):
        open_url("s3://nobucket/ranged/obj1", seaweed.storage_options())
    with pytest.raises(polybag.PolybagError, match="no such key ranged/nope"):
        read_head_counted("s3://logs/ranged/nope", 10, seaweed.storage_options())


def test_a_replaced_object_is_still_caught(seaweed: SeaweedS3, objects: dict[int, bytes], tmp_path: Path) -> None:
    n = SIZES[-1]
    key = "ranged/replaced"
    p = tmp_path / "v1"
    p.write_bytes(objects[n])
    upload(seaweed, "logs", {key: p})
    src = open_url(f"s3://logs/{key}", seaweed.storage_options())
    try:
        p.write_bytes(os.urandom(n))
        upload(seaweed, "logs", {key: p})
        # the pinned version (or ETag) of the ranged GET: the old bytes, or an error saying so
        try:
            src.need_all()
        except polybag.PolybagError as e:
            assert "changed while it was read" in str(e)
        else:
            assert bytes(src.view) == objects[n]
    finally:
        src.close()


@given(st.text(max_size=40))
def test_content_range_parsing_never_raises(text: str) -> None:
    got = _content_range(text)
    if got is not None:
        a, b, n = got
        assert 0 <= a <= b < n
        assert text.strip() == f"bytes {a}-{b}/{n}" or text.strip().startswith("bytes ")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("bytes 0-9/10", (0, 9, 10)),
        ("bytes 10-19/20", (10, 19, 20)),
        ("bytes 5-4/10", None),
        ("bytes 0-10/10", None),
        ("bytes 0-9/*", None),
        ("bytes */10", None),
        ("items 0-9/10", None),
        ("bytes -1-9/10", None),
        (None, None),
    ],
)
def test_content_range_forms(text: str | None, want: tuple[int, int, int] | None) -> None:
    assert _content_range(text) == want


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int) -> bytes:
        out, self._data = self._data[:n], self._data[n:]
        return out

    def close(self) -> None:
        pass


class S3FileSystem:
    """A hostile S3 answer (no server sends these on purpose: a broken proxy or a lying
    one): what its GetObject says is ``content_range`` with ``body``."""

    def __init__(self, content_range: str | None, body: bytes) -> None:
        from fsspec.asyn import get_loop

        self.loop = get_loop()
        self.content_range = content_range
        self.body = body

    def split_path(self, path: str) -> tuple[str, str, None]:
        bucket, _, key = path.partition("/")
        return bucket, key, None

    async def _call_s3(self, method: str, **kw: object) -> dict[str, object]:
        assert method == "get_object"
        return {"ContentRange": self.content_range, "Body": _Body(self.body), "ETag": '"e"'}


@pytest.mark.parametrize(
    ("content_range", "body", "says"),
    [
        ("bytes 0-99/100", b"x" * 50, "its body has 50 bytes"),
        ("bytes 0-99/100", b"x" * 150, "its body has 101 bytes"),
        ("bytes 0-999999999/1000000000", b"x", "asked for at most"),
    ],
)
def test_a_lying_answer_is_an_error_naming_the_url(content_range: str, body: bytes, says: str) -> None:
    from polybag.io.fsspec_transport import s3_ranged_get

    fs = S3FileSystem(content_range, body)
    with pytest.raises(polybag.PolybagError, match=f"s3://b/k: .*{says}"):
        s3_ranged_get(fs, "b/k", "s3://b/k", "bytes=-100", 100 if "at most" not in says else 1000)


def test_an_answer_without_a_size_is_asked_the_head_way() -> None:
    from polybag.io.fsspec_transport import s3_ranged_get

    assert s3_ranged_get(S3FileSystem(None, b"abc"), "b/k", "s3://b/k", "bytes=-100", 100) is None
    assert s3_ranged_get(S3FileSystem("bytes 0-2/*", b"abc"), "b/k", "s3://b/k", "bytes=-100", 100) is None
