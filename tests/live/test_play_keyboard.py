"""Keyboard controls like rosbag play's, through a pseudo-terminal: space pauses and resumes,
``s`` steps one message while paused (and does nothing while playing), the terminal's
settings are restored after; nothing is read when stdin is not a terminal.  In-process with
the CallbackSink, and the CLI on a live graph (``--pause-topics`` then space to go on)."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from play_helpers import NS, T0, make_bag
from polybag.cli.play import keyboard
from polybag.play import CallbackSink, Player, PlayOptions


def _until(pred: Callable[[], object], timeout: float = 60, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


class Playing:
    """A Player running in a thread, its messages collected."""

    def __init__(self, bag: Path, **kw: object) -> None:
        self.got: list[int] = []
        self.player = Player(bag, PlayOptions(delay=0, **kw), CallbackSink(lambda m: self.got.append(m.log_time)))
        self.thread = threading.Thread(target=self.player.run)

    def __enter__(self) -> Playing:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.player.stop()
        self.thread.join(60)
        self.player.close()


@pytest.fixture
def tty():
    master, slave = pty.openpty()
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)


def test_s_steps_while_paused_then_space_resumes(tmp_path, tty):
    master, slave = tty
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i * NS // 100) for i in range(20)])
    before = termios.tcgetattr(slave)
    with Playing(bag, pause=True) as p, keyboard(p.player, slave) as keys:
        assert keys
        assert not termios.tcgetattr(slave)[3] & termios.ICANON  # cbreak while playing
        assert p.got == [] and p.player.paused
        for k in (1, 2, 3):
            os.write(master, b"s")
            _until(lambda k=k: len(p.got) >= k, what=f"step {k}")
        time.sleep(0.3)
        assert p.got == [T0, T0 + NS // 100, T0 + 2 * NS // 100]  # one message per s, still paused
        assert p.player.paused and p.player.time == T0 + 2 * NS // 100
        os.write(master, b" ")
        p.thread.join(60)
        assert not p.thread.is_alive()
    assert p.got == [T0 + i * NS // 100 for i in range(20)]
    assert termios.tcgetattr(slave) == before  # the terminal's settings are back


def test_space_pauses_a_playing_bag_and_s_is_ignored_while_playing(tmp_path, tty):
    master, slave = tty
    bag = make_bag(tmp_path / "x.bag", [("/a", T0 + i * NS // 20) for i in range(60)])  # 3 s at 20 Hz
    with Playing(bag) as p, keyboard(p.player, slave):
        _until(lambda: len(p.got) >= 2, what="playback")
        os.write(master, b" ")
        _until(lambda: p.player.paused, what="the pause")
        n = len(p.got)
        os.write(master, b"x")  # other keys do nothing
        time.sleep(0.4)
        assert len(p.got) == n and p.player.paused
        os.write(master, b" ")
        _until(lambda: not p.player.paused, what="the resume")
        os.write(master, b"s")  # ignored while playing: no message out of schedule
        p.thread.join(60)
        assert not p.thread.is_alive()
    assert p.got == [T0 + i * NS // 20 for i in range(60)]
    assert p.player.stats.published == 60


def test_no_keys_without_a_terminal(tmp_path):
    bag = make_bag(tmp_path / "x.bag", [("/a", T0)])
    r, w = os.pipe()
    try:
        with Player(bag, PlayOptions(delay=0), CallbackSink(lambda m: None)) as player:
            with keyboard(player, r) as keys:
                assert keys is False
            with keyboard(player, io.StringIO()) as keys:  # no file descriptor at all
                assert keys is False
    finally:
        os.close(r)
        os.close(w)


# --- the CLI on a live graph --------------------------------------------------------------------
@pytest.mark.live
@pytest.mark.skipif(not shutil.which("rosmaster"), reason="Debian ROS 1 (rosmaster) not installed")
def test_cli_pause_topics_then_space_goes_on(tmp_path, tty):
    from polybag.net.ros1 import Node
    from ros1_graph import Graph, wait_for

    master, slave = tty
    items = [("/a", T0), ("/a", T0 + NS // 10), ("/p", T0 + 2 * NS // 10)] + [
        ("/a", T0 + i * NS // 10) for i in range(3, 8)
    ]
    bag = make_bag(tmp_path / "in.bag", items)
    got: list[tuple[str, bytes]] = []
    g = Graph(tmp_path, PYTHONUNBUFFERED="1")
    try:
        with Node("/kbd", g.uri, host="127.0.0.1", anonymous=True) as node:
            node.subscribe("/a", lambda m: got.append(("/a", m.data)))
            node.subscribe("/p", lambda m: got.append(("/p", m.data)))
            play = g.start([sys.executable, "-m", "polybag", "play", "--wait-for-subscribers", "-d", "0",
                            "--pause-topics", "/p", str(bag)], stdin=slave, stderr=subprocess.PIPE)
            assert play.stderr is not None
            line = ""
            while "Hit space" not in line:
                line = play.stderr.readline().decode()
                assert line, "the player ended before reading the keyboard"
            wait_for(lambda: len(got) >= 3, 60, "the messages up to the pause topic")
            time.sleep(0.5)
            assert [t for t, _ in got] == ["/a", "/a", "/p"]  # paused after /p
            assert play.poll() is None
            os.write(master, b" ")
            wait_for(lambda: len(got) >= 8, 60, "the rest after space")
            assert play.wait(60) == 0
    finally:
        g.close()
    assert [t for t, _ in got] == [t for t, _ in items]
