"""Pixels for people: any image array as 8-bit RGB (or grey) for files and video.

:func:`to_rgb8` turns what :func:`~polybag.sensors.image_to_numpy` gives into ``uint8``
``(h, w)`` grey or ``(h, w, 3)`` RGB (``(h, w, 4)`` RGBA kept with ``alpha=True``): colour
orders are put right (``bgr8`` -> RGB), 16-bit colour is shifted to 8 bits, single-channel
16-bit, signed and float images (depth) are scaled to their finite range, Bayer mosaics are
demosaiced (each 2x2 cell's red, mean green and blue), packed 4:2:2 (``uyvy``/``yuyv``) is
converted with the BT.601 matrix.  Numpy only.
"""

from __future__ import annotations

import numpy as np

from polybag.sensors.image import Encoding


def scale_to_u8(a: np.ndarray) -> np.ndarray:
    """A single-channel array of any type mapped to ``uint8``: ``uint8`` as is, anything
    else from its finite minimum..maximum to 0..255 (non-finite values 0)."""
    if a.dtype == np.uint8:
        return a
    f = a.astype(np.float64)
    finite = np.isfinite(f)
    if not finite.any():
        return np.zeros(a.shape, np.uint8)
    lo = float(f[finite].min())
    hi = float(f[finite].max())
    span = hi - lo if hi > lo else 1.0
    out = np.where(finite, (f - lo) * (255.0 / span), 0.0)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _u8(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.uint8:
        return a
    if a.dtype == np.uint16:
        return (a >> 8).astype(np.uint8)
    return scale_to_u8(a)


def _demosaic(a: np.ndarray, pattern: str) -> np.ndarray:
    """RGB of a Bayer mosaic: every pixel of a 2x2 cell gets the cell's red, the mean of
    its two greens and its blue (odd edges repeat the last row/column)."""
    h, w = a.shape
    p = np.pad(a, ((0, h % 2), (0, w % 2)), mode="edge").astype(np.float32)
    cells = {
        (0, 0): p[0::2, 0::2],
        (0, 1): p[0::2, 1::2],
        (1, 0): p[1::2, 0::2],
        (1, 1): p[1::2, 1::2],
    }
    where: dict[str, list[np.ndarray]] = {ch: [] for ch in "rgb"}
    for i, ch in enumerate(pattern):
        where[ch].append(cells[(i // 2, i % 2)])
    r = where["r"][0]
    g = (where["g"][0] + where["g"][1]) / 2
    b = where["b"][0]
    rgb = np.stack([r, g, b], axis=-1)
    rgb = np.repeat(np.repeat(rgb, 2, axis=0), 2, axis=1)[:h, :w]
    if a.dtype == np.uint16:
        scaled: np.ndarray = rgb / 256.0
        return scaled.astype(np.uint8)
    rounded: np.ndarray = np.clip(np.rint(rgb), 0, 255)
    return rounded.astype(np.uint8)


def yuv422_to_rgb(a: np.ndarray, kind: str) -> np.ndarray:
    """RGB of packed 4:2:2 pixels ``(h, w, 2)`` (``uyvy``: U Y V Y; ``yuyv``: Y U Y V), BT.601
    video range as OpenCV's ``COLOR_YUV2RGB_UYVY``/``_YUYV`` (an odd last pixel, which has
    no V, gets neutral V)."""
    h, w, _ = a.shape
    if w % 2:  # an odd last pixel has no V of its own: neutral chroma
        extra = np.array([128, 16] if kind == "uyvy" else [16, 128], a.dtype)
        a = np.concatenate([a, np.broadcast_to(extra, (h, 1, 2))], axis=1)
    flat = a.reshape(h, -1).astype(np.float32)
    if kind == "uyvy":
        y = flat[:, 1::2][:, :w]
        u_pairs, v_pairs = flat[:, 0::4], flat[:, 2::4]
    else:
        y = flat[:, 0::2][:, :w]
        u_pairs, v_pairs = flat[:, 1::4], flat[:, 3::4]
    u = np.repeat(u_pairs, 2, axis=1)[:, :w] - 128.0
    v = np.repeat(v_pairs, 2, axis=1)[:, :w] - 128.0
    yy = (y - 16.0) * 1.164
    r = yy + 1.596 * v
    g = yy - 0.391 * u - 0.813 * v
    b = yy + 2.018 * u
    rgb: np.ndarray = np.clip(np.rint(np.stack([r, g, b], axis=-1)), 0, 255)
    return rgb.astype(np.uint8)


def to_rgb8(a: np.ndarray, enc: Encoding, alpha: bool = False) -> np.ndarray:
    """``a`` (pixels of encoding ``enc``) as ``uint8`` grey ``(h, w)`` or RGB ``(h, w, 3)``
    (RGBA with ``alpha``).  See the module notes."""
    kind = enc.kind
    if a.size == 0:  # no pixels: nothing to convert
        return np.zeros(
            a.shape[:2] + ((3,) if kind not in ("mono", "generic") or a.ndim == 3 else ()), np.uint8
        )
    if kind == "mono":
        return scale_to_u8(a)
    if kind.startswith("bayer_"):
        return _demosaic(a, kind[len("bayer_") :])
    if kind in ("uyvy", "yuyv"):
        return yuv422_to_rgb(a, kind)
    if kind in ("rgb", "bgr", "rgba", "bgra"):
        c = _u8(a)
        order = [2, 1, 0] if kind.startswith("bgr") else [0, 1, 2]
        if alpha and kind.endswith("a"):
            order.append(3)
        return np.ascontiguousarray(c[..., order])
    # generic multi-channel: 3 and 4 channels as RGB(A), others by their first channel
    if a.ndim == 3 and a.shape[2] in (3, 4):
        c = np.stack(
            [_u8(a[..., i]) if a.dtype != np.uint8 else a[..., i] for i in range(a.shape[2])], axis=-1
        )
        return np.ascontiguousarray(c if alpha and a.shape[2] == 4 else c[..., :3])
    return scale_to_u8(a[..., 0] if a.ndim == 3 else a)
