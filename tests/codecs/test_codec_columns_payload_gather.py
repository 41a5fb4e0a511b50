"""The bag readers' payload gatherer (``topic_payloads``, the input of the columns): every
path of ``polybag.formats.shared.payloads.gather`` against copying the payloads one by one."""

from __future__ import annotations

import random

import numpy as np
import pytest

from polybag.formats.shared import payloads as P


def _reference(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> tuple[bytes, list[bytes]]:
    order = sorted(range(len(starts)), key=lambda i: (int(starts[i]), i))
    blob = b"".join(a[int(starts[i]) : int(starts[i]) + int(sizes[i])].tobytes() for i in order)
    return blob, [a[int(s) : int(s) + int(n)].tobytes() for s, n in zip(starts, sizes)]


def _check(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
    starts, sizes = starts.astype(np.int64), sizes.astype(np.int64)
    out = np.empty(int(sizes.sum()), np.uint8)
    new = P.gather(a, starts, sizes, out)
    blob, each = _reference(a, starts, sizes)
    assert out.tobytes() == blob
    assert [out[int(s) : int(s) + int(n)].tobytes() for s, n in zip(new, sizes)] == each


def _records(rnd: random.Random, n: int, sizes: list[int], gap: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint payloads with gaps between them (record headers), sizes drawn from ``sizes``."""
    starts, lens = [], []
    pos = rnd.randrange(5)
    for _ in range(n):
        pos += rnd.randint(*gap)
        k = rnd.choice(sizes)
        starts.append(pos)
        lens.append(k)
        pos += k
    a = np.frombuffer(rnd.randbytes(pos + rnd.randrange(5)), np.uint8)
    return a, np.array(starts), np.array(lens)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "sizes",
    [
        [313, 315, 312, 320],  # a few sizes (frame ids of a few lengths): size by size
        [0, 7, 0, 1],  # with empty payloads
        [64],  # one size, irregular gaps (other connections' records between)
        list(range(1, 40)),  # many sizes: the byte mask
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],  # exactly the limit
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],  # one over it
    ],
)
def test_gather_matches_one_by_one(seed: int, sizes: list[int]) -> None:
    rnd = random.Random(seed)
    a, starts, lens = _records(rnd, rnd.randint(1, 300), sizes, (0, 40))
    _check(a, starts, lens)
    # the same payloads asked for in another order (log-time order differs from file order)
    perm = list(range(len(starts)))
    rnd.shuffle(perm)
    _check(a, starts[perm], lens[perm])


def test_gather_edge_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(9)
    a, starts, lens = _records(rnd, 500, [3, 5, 8], (0, 6))
    _check(a, starts, lens)
    # back to back (no gaps) and payloads ending exactly at the buffer's end
    b = np.arange(60, dtype=np.uint8)
    _check(b, np.array([0, 3, 8, 11, 16, 21]), np.array([3, 5, 3, 5, 5, 39]))
    _check(b, np.array([10, 10, 20]), np.array([0, 4, 0]))  # empty payloads sharing starts
    # a non-contiguous source and too many payloads to sort: the byte mask
    _check(a[::2].copy()[::1], starts // 2 // 9 * 9, np.minimum(lens, 3))
    strided = np.frombuffer(rnd.randbytes(400), np.uint8)[::2]
    _check(strided, np.array([0, 10, 30, 50]), np.array([4, 5, 4, 5]))
    monkeypatch.setattr(P, "_SIZES_SORT_MAX", 10)
    _check(a, starts, lens)


def test_arena_of_mixed_sized_chunks() -> None:
    rnd = random.Random(4)
    ar = P.Arena(16)
    want: list[tuple[int, bytes]] = []
    t = 0
    for _ in range(5):
        a, starts, lens = _records(rnd, 50, [10, 12, 0, 31], (2, 9))
        times = np.arange(t, t + len(starts), dtype=np.int64)
        t += len(starts)
        ar.add(a, times, starts, lens)
        want += [(int(x), a[int(s) : int(s) + int(n)].tobytes()) for x, s, n in zip(times, starts, lens)]
    lt, blob, starts, sizes = ar.result()
    b = blob.tobytes()
    assert [(int(x), b[int(s) : int(s) + int(n)]) for x, s, n in zip(lt, starts, sizes)] == want
