"""The bag readers' bulk payload gathering: :mod:`polybag.formats.shared.payloads` (one module for every
format that offers ``topic_payloads``), under the name the bag readers import."""

from __future__ import annotations

from polybag.formats.shared.payloads import _FEW_SIZES, _SIZES_SORT_MAX, Arena, gather, in_file_order

__all__ = ["Arena", "_FEW_SIZES", "_SIZES_SORT_MAX", "gather", "in_file_order"]
