"""Helpers shared by the live tests of the recorder's table on a terminal (ROS 1 and ROS 2):
what a pty's reader got, and the checks that the table was drawn in place, then erased."""

from __future__ import annotations

import os
import re
import threading


class PtyText:
    """Everything written to the pty whose ``master`` end this reads (in a daemon thread,
    until every writer has closed it)."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.got = bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # (EIO: every writer of the pty has closed it)
                return
            if not chunk:
                return
            self.got.extend(chunk)

    def text(self) -> str:
        """What it got so far, the pty's ``\\r\\n`` as ``\\n``."""
        return bytes(self.got).decode(errors="replace").replace("\r\n", "\n")


def check_table_cleared(text: str, topics: list[str]) -> str:
    """Redrawn in place; at the end the table erased (up over all its lines, cleared), then
    plain text with a row of each of ``topics`` (returned: what came after the erase)."""
    assert re.search(r"\r\x1b\[\d+A", text)
    last_draw = text.rindex("\x1b[K\n")
    start = text.rindex("\r", 0, text.rindex("msgs", 0, last_draw))  # (the last drawing's carriage return)
    drawn = text[start:last_draw].count("\x1b[K\n") + 1
    erase = f"\r\x1b[{drawn}A\x1b[J"
    assert erase in text[last_draw:], text[last_draw:]
    after = text[text.rindex(erase) + len(erase) :]
    assert "\x1b" not in after
    for t in topics:
        assert re.search(rf"^{re.escape(t)} +\d+ +\d+ +\d+\b", after, re.M), after
    return after
