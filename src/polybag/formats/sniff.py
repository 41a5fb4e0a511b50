"""Magic bytes -> format name."""

from __future__ import annotations

MCAP_MAGIC = b"\x89MCAP0\r\n"
ULOG_MAGIC = b"ULog\x01\x12\x35"
BAG_MAGICS = (b"#ROSBAG V", b"#ROSRECORD V", b"#ROSLOG V")

SNIFF_BYTES = 16

READERS = {
    "mcap": "polybag.formats.mcap.reader:open_mcap",
    "bag": "polybag.formats.bag.reader:open_bag",
    "ulog": "polybag.formats.ulog.reader:open_ulog",
}


def sniff(head: bytes) -> str | None:
    """The format whose magic ``head`` starts with, or None."""
    if head.startswith(MCAP_MAGIC):
        return "mcap"
    if head.startswith(ULOG_MAGIC):
        return "ulog"
    if any(head.startswith(m) for m in BAG_MAGICS):
        return "bag"
    return None
