"""rosbag2 read: polybag vs rosbags' ``rosbag2.Reader``, sqlite3 and mcap storage, side by side.

Each bag holds ``-n`` (default 100,000) ``sensor_msgs/msg/Imu`` messages on one topic and a
``std_msgs/msg/String`` topic (every tenth message), written once by rosbags' own rosbag2
Writer (version 9) into ``bench/data``.  Rows:

* ``read``: every message's topic, time and bytes (``bytes(data)`` on both sides)
* ``raw``: the same through ``raw_messages()`` (tuples, as rosbags gives them)
* ``read+decode``: every Imu decoded (polybag's compiled CDR codec; rosbags' typestore)
* ``window``: the middle tenth of the time range, one topic (pushed down to SQL / chunks)
* ``columns``: the Imu topic as numpy columns (``topic_columns``, every field) vs rosbags
  decoding every Imu and gathering seven fields into arrays

Then a sqlite3 bag of ``--small`` (default 1,000,000) small messages on four topics (the
issue's size), in CPU time, best and median: ``read`` (``messages()``, a Message object per
message, vs rosbags' ``Reader.messages()``), ``raw`` (``raw_messages()``: ``(channel,
log_time, data)`` tuples, the shape rosbags' ``Reader.messages()`` gives), ``payloads`` (every topic's times and payloads in bulk through
``topic_payloads`` vs rosbags' messages gathered per topic), and the floors: a bare loop over
the same rows through the standard library's ``sqlite3`` and through apsw, and SQLite alone.

The two sides alternate ``--repeat`` times; times are CPU time of this process (the machine
is shared), best and median; the ratios are rosbags / polybag (above 1: polybag faster).

    .venv/bin/python bench/bench_rosbag2.py
    .venv/bin/python bench/bench_rosbag2.py -n 20000 --repeat 2 --storage sqlite3
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import polybag  # noqa: E402

IMU = "sensor_msgs/msg/Imu"
STRING = "std_msgs/msg/String"
T0 = 1_700_000_000_000_000_000


def make_bag(path: Path, n: int, storage: str) -> None:
    """``n`` messages written by rosbags (reused when already there)."""
    if (path / "metadata.yaml").exists():
        return
    import numpy as np
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    shutil.rmtree(path, ignore_errors=True)
    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    vals = np.random.default_rng(1).normal(size=(n, 10)).tolist()
    cov = np.zeros(9, dtype=np.float64)
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(path, version=9, storage_plugin=plugin) as w:
        a = w.add_connection("/imu", IMU, typestore=ts)
        b = w.add_connection("/status", STRING, typestore=ts)
        for i in range(n):
            stamp = T0 + i * 5_000_000
            if i % 10 == 9:
                w.write(b, stamp, ts.serialize_cdr(t[STRING](data=f"status {i}"), STRING))
                continue
            v = vals[i]
            sec, nsec = divmod(stamp, 1_000_000_000)
            msg = t[IMU](
                header=t["std_msgs/msg/Header"](
                    stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id="imu_link"
                ),
                orientation=t["geometry_msgs/msg/Quaternion"](x=v[0], y=v[1], z=v[2], w=v[3]),
                orientation_covariance=cov,
                angular_velocity=t["geometry_msgs/msg/Vector3"](x=v[4], y=v[5], z=v[6]),
                angular_velocity_covariance=cov,
                linear_acceleration=t["geometry_msgs/msg/Vector3"](x=v[7], y=v[8], z=v[9]),
                linear_acceleration_covariance=cov,
            )
            w.write(a, stamp, ts.serialize_cdr(msg, IMU))


SMALL = (
    ("/count", "std_msgs/msg/Int32"),
    ("/value", "std_msgs/msg/Float64"),
    ("/point", "geometry_msgs/msg/Point"),
    ("/state", "std_msgs/msg/String"),
)


def make_small_bag(path: Path, n: int) -> None:
    """``n`` small messages round robin on four topics (Int32, Float64, Point, String: 8 to
    32 bytes each), written by rosbags' sqlite3 Writer (reused when already there)."""
    if (path / "metadata.yaml").exists():
        return
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    shutil.rmtree(path, ignore_errors=True)
    ts = get_typestore(Stores.ROS2_HUMBLE)
    t = ts.types
    pay = [
        [bytes(ts.serialize_cdr(t["std_msgs/msg/Int32"](data=i), "std_msgs/msg/Int32")) for i in range(97)],
        [bytes(ts.serialize_cdr(t["std_msgs/msg/Float64"](data=i / 7), "std_msgs/msg/Float64")) for i in range(97)],
        [
            bytes(ts.serialize_cdr(t["geometry_msgs/msg/Point"](x=i, y=-i, z=0.5), "geometry_msgs/msg/Point"))
            for i in range(97)
        ],
        [bytes(ts.serialize_cdr(t["std_msgs/msg/String"](data=f"ok {i}"), "std_msgs/msg/String")) for i in range(97)],
    ]
    with Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3) as w:
        conns = [w.add_connection(topic, typ, typestore=ts) for topic, typ in SMALL]
        for i in range(n):
            k = i % 4
            w.write(conns[k], T0 + i * 1_000_000, pay[k][i % 97])


# --- the two sides ------------------------------------------------------------------------------
def pb_read(path: Path) -> int:
    n = 0
    with polybag.open(path) as r:
        for m in r.messages():
            bytes(m.data)
            n += 1
    return n


def pb_raw(path: Path) -> int:
    """``raw_messages()``: (channel, log_time, data) tuples, the shape rosbags gives."""
    n = 0
    with polybag.open(path) as r:
        for _c, _t, d in r.raw_messages():
            bytes(d)
            n += 1
    return n


def rb_read(path: Path) -> int:
    from rosbags.rosbag2 import Reader

    n = 0
    with Reader(path) as r:
        for _c, _t, d in r.messages():
            bytes(d)
            n += 1
    return n


def pb_decode(path: Path) -> int:
    n = 0
    with polybag.open(path) as r:
        for _m, o in r.decoded_messages(topics=["/imu"]):
            n += o.header.stamp.sec > 0
    return n


def rb_decode(path: Path) -> int:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    n = 0
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/imu"]
        for c, _t, d in r.messages(connections=conns):
            n += ts.deserialize_cdr(d, c.msgtype).header.stamp.sec > 0
    return n


def pb_columns(path: Path) -> int:
    """Every field of the Imu topic as numpy columns (``topic_columns``: CDR fixed layout)."""
    with polybag.open(path) as r:
        cols = r.topic_columns("/imu")
    return int((cols["header.stamp"] > 0).sum()) + len(cols["orientation.x"]) * 0


def rb_columns(path: Path) -> int:
    """rosbags: read the topic, decode every message, gather the same fields into arrays."""
    import numpy as np
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/imu"]
        msgs = [ts.deserialize_cdr(d, c.msgtype) for c, _t, d in r.messages(connections=conns)]
    stamp = np.array([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in msgs])
    cols = {
        "header.stamp": stamp,
        "header.frame_id": np.array([m.header.frame_id for m in msgs], dtype=object),
        "orientation.x": np.array([m.orientation.x for m in msgs]),
        "orientation.w": np.array([m.orientation.w for m in msgs]),
        "angular_velocity.z": np.array([m.angular_velocity.z for m in msgs]),
        "linear_acceleration.x": np.array([m.linear_acceleration.x for m in msgs]),
        "orientation_covariance": np.stack([m.orientation_covariance for m in msgs]),
    }
    return int((cols["header.stamp"] > 0).sum())


def _window(path: Path) -> tuple[int, int]:
    with polybag.open(path) as r:
        s = r.summary
        assert s.start_time is not None and s.end_time is not None
        span = s.end_time - s.start_time
        return s.start_time + span * 45 // 100, s.start_time + span * 55 // 100


def pb_window(path: Path) -> int:
    lo, hi = _window(path)
    with polybag.open(path) as r:
        return sum(1 for m in r.messages(topics=["/status"], start=lo, end=hi) if bytes(m.data))


def rb_window(path: Path) -> int:
    from rosbags.rosbag2 import Reader

    lo, hi = _window(path)
    with Reader(path) as r:
        conns = [c for c in r.connections if c.topic == "/status"]
        return sum(1 for _c, _t, d in r.messages(connections=conns, start=lo, stop=hi) if bytes(d))


# --- the 1M small-message bag ------------------------------------------------------------------
def pb_payloads(path: Path) -> int:
    """Every topic's log times and payloads in bulk (``topic_payloads``: numpy arrays)."""
    n = 0
    with polybag.open(path) as r:
        for topic in sorted({c.topic for c in r.summary.channels.values()}):
            got = r.topic_payloads(topic)
            assert got is not None
            n += len(got[0])
    return n


def rb_payloads(path: Path) -> int:
    """The same with rosbags: its messages, log times and payloads gathered per topic."""
    from rosbags.rosbag2 import Reader

    times: dict[str, list[int]] = {}
    datas: dict[str, list[bytes]] = {}
    with Reader(path) as r:
        for c, t, d in r.messages():
            times.setdefault(c.topic, []).append(t)
            datas.setdefault(c.topic, []).append(d)
    return sum(len(v) for v in times.values())


def _db(path: Path) -> str:
    return str(next(path.glob("*.db3")).resolve())


def floor_sqlite3(path: Path) -> int:
    """The floor of the standard library: a bare loop over the index-ordered rows."""
    import sqlite3

    conn = sqlite3.connect(Path(_db(path)).as_uri() + "?mode=ro&immutable=1", uri=True)
    n = 0
    for _row in conn.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id"):
        n += 1
    conn.close()
    return n


def floor_apsw(path: Path) -> int:
    """The same bare loop through apsw (what rosbags reads with)."""
    import apsw

    conn = apsw.Connection(_db(path), flags=apsw.SQLITE_OPEN_READONLY)
    n = 0
    for _row in conn.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id"):
        n += 1
    conn.close()
    return n


def floor_sql(path: Path) -> int:
    """SQLite alone, no row reaching Python: the rows counted in C."""
    import sqlite3

    conn = sqlite3.connect(Path(_db(path)).as_uri() + "?mode=ro&immutable=1", uri=True)
    q = "SELECT COUNT(*), SUM(LENGTH(data)) FROM (SELECT data FROM messages ORDER BY timestamp, id)"
    n = int(conn.execute(q).fetchone()[0])
    conn.close()
    return n


def floor_messages(path: Path) -> int:
    """The floor of any reader that gives one ``Message`` object per message: the objects
    built from ready lists (times, channels, payload slices of one buffer) one at a time as
    the loop takes them (``map``, as the reader does), and the same consumer loop as
    ``read`` (``bytes(m.data)``), with no file read at all."""
    from itertools import chain, repeat

    from polybag.model import Message

    with polybag.open(path) as r:
        n = r.summary.message_count
        ch = next(iter(r.summary.channels.values()))
    blob = bytes(16 * 2048)
    times = list(range(2048))
    chans = [ch] * 2048
    datas = [blob[i * 16 : i * 16 + 16] for i in range(2048)]

    def batches() -> Iterator[Iterator[Message]]:
        for lo in range(0, n, 2048):
            k = min(2048, n - lo)
            yield map(Message, chans[:k], times[:k], times[:k], repeat(0), datas[:k])

    k = 0
    for m in chain.from_iterable(batches()):
        bytes(m.data)
        k += 1
    return k


SMALL_ROWS: dict[str, tuple[Callable[[Path], int], Callable[[Path], int]]] = {
    "read": (pb_read, rb_read),
    "raw": (pb_raw, rb_read),
    "payloads": (pb_payloads, rb_payloads),
}
FLOORS: dict[str, Callable[[Path], int]] = {
    "stdlib sqlite3 bare row loop": floor_sqlite3,
    "apsw bare row loop": floor_apsw,
    "SQLite in C (count, no rows)": floor_sql,
    "Message objects + loop, no file": floor_messages,
}


def cpu_runs(fn: Callable[[Path], int], path: Path) -> tuple[float, int]:
    """One run in CPU time of this process (the machine is shared)."""
    gc.collect()
    t = time.process_time()
    out = fn(path)
    return time.process_time() - t, out


def bench_small(n: int, repeat: int) -> None:
    """The 1M small-message sqlite3 bag: both sides alternating, best and median CPU time."""
    path = HERE / "data" / f"rosbag2_small_sqlite3_{n}"
    make_small_bag(path, n)
    print(f"\nsqlite3 bag of {n} small messages (4 topics), CPU s: best / median of {repeat}")
    print(f"{'row':<10} {'polybag':>15} {'rosbags':>15} {'ratio best':>11} {'ratio median':>13}")
    for row in SMALL_ROWS:
        pb, rb = SMALL_ROWS[row]
        tp: list[float] = []
        tr: list[float] = []
        for _ in range(repeat):
            a, na = cpu_runs(pb, path)
            b, nb = cpu_runs(rb, path)
            if na != nb:
                raise SystemExit(f"{row}: polybag counted {na}, rosbags {nb}")
            tp.append(a)
            tr.append(b)
        mp, mr = sorted(tp)[len(tp) // 2], sorted(tr)[len(tr) // 2]
        print(
            f"{row:<10} {min(tp):>7.3f} / {mp:<6.3f} {min(tr):>7.3f} / {mr:<6.3f} "
            f"{min(tr) / min(tp):>11.2f} {mr / mp:>13.2f}"
        )
    for label, fn in FLOORS.items():
        runs = sorted(cpu_runs(fn, path)[0] for _ in range(repeat))
        print(f"  floor: {label:<32} {runs[0]:.3f} / {runs[len(runs) // 2]:.3f}")


ROWS: dict[str, tuple[Callable[[Path], int], Callable[[Path], int]]] = {
    "read": (pb_read, rb_read),
    "raw": (pb_raw, rb_read),
    "read+decode": (pb_decode, rb_decode),
    "window": (pb_window, rb_window),
    "columns": (pb_columns, rb_columns),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=100_000, help="messages (default 100,000)")
    ap.add_argument("--storage", nargs="*", default=["sqlite3", "mcap"])
    ap.add_argument("--rows", nargs="*", default=list(ROWS))
    ap.add_argument("--repeat", type=int, default=3, help="alternate runs per side (default 3)")
    ap.add_argument(
        "--small", type=int, default=1_000_000, help="messages of the small-message sqlite3 bag (0: skip it)"
    )
    args = ap.parse_args()
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    print(
        f"rosbag2 read, {args.n} messages; CPU s, best / median of {args.repeat} "
        "(rosbags/polybag: above 1, polybag faster)"
    )
    print(f"{'storage':<8} {'row':<12} {'polybag':>15} {'rosbags':>15} {'ratio best':>11} {'ratio median':>13}")
    for storage in args.storage:
        path = data / f"rosbag2_{storage}_{args.n}"
        make_bag(path, args.n, storage)
        for row in args.rows:
            pb, rb = ROWS[row]
            tp: list[float] = []
            tr: list[float] = []
            for _ in range(args.repeat):  # alternate the sides
                a, na = cpu_runs(pb, path)
                b, nb = cpu_runs(rb, path)
                if na != nb:
                    raise SystemExit(f"{storage} {row}: polybag counted {na}, rosbags {nb}")
                tp.append(a)
                tr.append(b)
            mp, mr = sorted(tp)[len(tp) // 2], sorted(tr)[len(tr) // 2]
            print(
                f"{storage:<8} {row:<12} {min(tp):>7.3f} / {mp:<6.3f} {min(tr):>7.3f} / {mr:<6.3f} "
                f"{min(tr) / min(tp):>11.2f} {mr / mp:>13.2f}"
            )
    if args.small:
        bench_small(args.small, args.repeat)


if __name__ == "__main__":
    main()
