"""PX4 ULog: polybag against pyulog in one run.

    .venv/bin/python bench/bench_ulog.py [--size-mb 100] [--repeat 3] [--keep PATH]

* every file of ../shared/corpora/ulog: full parse into columns (polybag: open + every
  topic's columns; pyulog: ``ULog(path)``, which builds every topic's numpy arrays);
* a generated log of about ``--size-mb`` MB with 23 topic instances at 100-250 Hz (one
  format repeats ``_padding0``): full parse, one topic selected up front (pyulog's
  ``message_name_filter_list``), each in this process (imports done, file cached) and in a
  fresh process per run (what a user's script costs: interpreter, imports, open, columns),
  and peak memory of the
  polybag full parse (a child process's max RSS above an import-only baseline, and the
  tracemalloc peak of Python/numpy allocations) against the file size.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
CORPUS = ROOT.parent / "shared" / "corpora" / "ulog"

import polybag  # noqa: E402
from polybag.formats.ulog.writer import UlogWriter  # noqa: E402

# (name, format text, rate Hz, multi instances)
TOPICS: list[tuple[str, str, int, int]] = [
    (
        "sensor_combined",
        "sensor_combined:uint64_t timestamp;float[3] gyro_rad;uint32_t gyro_integral_dt;"
        "int32_t accelerometer_timestamp_relative;float[3] accelerometer_m_s2;uint32_t accelerometer_integral_dt;"
        "uint8_t accelerometer_clipping;uint8_t[3] _padding0;",
        250,
        1,
    ),
    (
        "vehicle_attitude",
        "vehicle_attitude:uint64_t timestamp;uint64_t timestamp_sample;float[4] q;"
        "float[4] delta_q_reset;uint8_t quat_reset_counter;uint8_t[7] _padding0;",
        250,
        1,
    ),
    (
        "vehicle_angular_velocity",
        "vehicle_angular_velocity:uint64_t timestamp;uint64_t timestamp_sample;"
        "float[3] xyz;float[3] xyz_derivative;",
        250,
        1,
    ),
    (
        "actuator_outputs",
        "actuator_outputs:uint64_t timestamp;uint32_t noutputs;float[16] output;uint8_t[4] _padding0;",
        200,
        2,
    ),
    (
        "sensor_accel",
        "sensor_accel:uint64_t timestamp;uint64_t timestamp_sample;uint32_t device_id;"
        "float x;float y;float z;float temperature;uint32_t error_count;uint8_t[3] clip_counter;"
        "uint8_t samples;uint8_t[4] _padding0;",
        200,
        3,
    ),
    (
        "sensor_gyro",
        "sensor_gyro:uint64_t timestamp;uint64_t timestamp_sample;uint32_t device_id;"
        "float x;float y;float z;float temperature;uint32_t error_count;uint8_t samples;uint8_t[3] _padding0;",
        200,
        3,
    ),
    (
        "estimator_states",
        "estimator_states:uint64_t timestamp;uint64_t timestamp_sample;float[24] states;"
        "float[24] covariances;uint8_t n_states;uint8_t[7] _padding0;",
        100,
        1,
    ),
    (
        "vehicle_local_position",
        "vehicle_local_position:uint64_t timestamp;uint64_t timestamp_sample;"
        "uint64_t ref_timestamp;double ref_lat;double ref_lon;float x;float y;float z;float[2] delta_xy;"
        "float delta_z;float vx;float vy;float vz;float z_deriv;float[2] delta_vxy;float delta_vz;float ax;"
        "float ay;float az;float heading;float delta_heading;float ref_alt;float dist_bottom;float eph;float epv;"
        "float evh;float evv;bool xy_valid;bool z_valid;bool v_xy_valid;bool v_z_valid;uint8_t xy_reset_counter;"
        "uint8_t z_reset_counter;uint8_t vxy_reset_counter;uint8_t vz_reset_counter;uint8_t heading_reset_counter;"
        "bool heading_good_for_control;bool xy_global;bool z_global;bool dist_bottom_valid;"
        "uint8_t[3] _padding0;",
        100,
        1,
    ),
    (
        "esc_report",
        "esc_report:uint32_t esc_errorcount;int32_t esc_rpm;float esc_voltage;float esc_current;"
        "float esc_temperature;uint8_t esc_address;uint8_t esc_cmdcount;uint8_t esc_state;uint8_t[1] _padding0;",
        0,
        0,
    ),
    (
        "esc_status",
        "esc_status:uint64_t timestamp;uint16_t counter;uint8_t esc_count;uint8_t esc_connectiontype;"
        "uint8_t esc_online_flags;uint8_t esc_armed_flags;uint8_t[2] _padding0;esc_report[8] esc;",
        100,
        1,
    ),
    (
        "vehicle_rates_setpoint",
        "vehicle_rates_setpoint:uint64_t timestamp;float roll;float pitch;float yaw;"
        "float[3] thrust_body;bool reset_integral;uint8_t[7] _padding0;",
        250,
        1,
    ),
    (
        "vehicle_attitude_setpoint",
        "vehicle_attitude_setpoint:uint64_t timestamp;float roll_body;float pitch_body;"
        "float yaw_body;float yaw_sp_move_rate;float[4] q_d;float[3] thrust_body;bool reset_integral;"
        "bool fw_control_yaw_wheel;uint8_t[6] _padding0;",
        250,
        1,
    ),
    (
        "rate_ctrl_status",
        "rate_ctrl_status:uint64_t timestamp;float rollspeed_integ;float pitchspeed_integ;"
        "float yawspeed_integ;float wheel_rate_integ;",
        250,
        1,
    ),
    (
        "sensor_mag",
        "sensor_mag:uint64_t timestamp;uint64_t timestamp_sample;uint32_t device_id;float x;float y;"
        "float z;float temperature;uint32_t error_count;bool is_external;uint8_t[7] _padding0;",
        100,
        2,
    ),
    (
        "sensor_baro",
        "sensor_baro:uint64_t timestamp;uint64_t timestamp_sample;uint32_t device_id;"
        "float pressure;float temperature;uint32_t error_count;",
        100,
        1,
    ),
    (
        # two padding gaps both named _padding0, the second trailing (as PX4 formats with several
        # gaps have; issue 12's case): read in full by both sides, and by polybag's fast scan
        "sensor_padded",
        "sensor_padded:uint64_t timestamp;uint8_t flags;uint8_t[3] _padding0;float value;"
        "uint16_t count;uint8_t[6] _padding0;",
        200,
        1,
    ),
    (
        "vehicle_imu",
        "vehicle_imu:uint64_t timestamp;uint64_t timestamp_sample;uint32_t accel_device_id;"
        "uint32_t gyro_device_id;float[3] delta_angle;float[3] delta_velocity;uint16_t delta_angle_dt;"
        "uint16_t delta_velocity_dt;uint8_t delta_angle_clipping;uint8_t delta_velocity_clipping;"
        "uint8_t accel_calibration_count;uint8_t gyro_calibration_count;",
        200,
        2,
    ),
]
FORMAT_ONLY = {"esc_report"}


def generate(path: str, size_mb: float) -> int:
    """A log of about ``size_mb`` MB; returns its size."""
    from polybag.codecs.ulog import compile_type, parse_format

    formats = {n: parse_format(f) for n, f, _, _ in TOPICS}
    types = {n: compile_type(n, formats) for n, _, _, _ in TOPICS if n not in FORMAT_ONLY}
    bytes_per_s = sum(
        (types[n].min_size + 5) * hz * inst for n, _, hz, inst in TOPICS if n not in FORMAT_ONLY
    )
    seconds = max(1, int(size_mb * 1e6 / bytes_per_s))
    rng = np.random.default_rng(1)
    start = 10_000_000
    with UlogWriter(path, start_timestamp=start) as w:
        for _, f, _, _ in TOPICS:
            w.add_format(f)
        w.add_info("sys_name", "PX4")
        w.add_info("ver_hw", "BENCH")
        for i in range(300):
            w.add_param(f"PARAM_{i:03d}", float(i) / 7 if i % 2 else i)
        chans = {}
        for n, _, _hz, inst in TOPICS:
            if n in FORMAT_ONLY:
                continue
            for m in range(inst):
                chans[(n, m)] = w.add_subscription(n, m)
        block = 20  # seconds per interleaved block
        for t0 in range(0, seconds, block):
            dur = min(block, seconds - t0)
            items = []
            for (n, m), ch in chans.items():
                hz = next(h for nn, _, h, _ in TOPICS if nn == n)
                k = dur * hz
                ts = start + (t0 * 1_000_000) + np.arange(k, dtype=np.uint64) * (1_000_000 // hz) + m * 7
                cols: dict[str, Any] = {"timestamp": ts}
                for fld in types[n].flat:
                    if fld.name == "timestamp" or fld.padding:
                        continue
                    dt = np.dtype(types[n].dtype.fields[fld.name][0])
                    if dt.kind == "f":
                        cols[fld.name] = rng.standard_normal(k).astype(dt)
                    else:
                        cols[fld.name] = rng.integers(0, 100, k).astype(dt)
                items.append((ch, cols))
            w.write_columns_many(items)
            w.add_logged_string("INFO", f"[bench] block {t0}", start + t0 * 1_000_000)
    return os.path.getsize(path)


def timings(fn: Callable[[], Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def best(fn: Callable[[], Any], repeat: int) -> float:
    return min(timings(fn, repeat))


def polybag_full(path: str) -> int:
    with polybag.open(path) as r:
        return sum(len(c["timestamp"]) for c in r.all_topic_columns().values())


def pyulog_full(path: str) -> int:
    from pyulog import ULog

    u = ULog(path)
    return sum(len(d.data["timestamp"]) for d in u.data_list)


def polybag_one(path: str, topic: str, hint: bool = True) -> int:
    """One topic's columns; ``hint``: name the topic when opening (``topics=[topic]``)."""
    with polybag.open(path, **({"topics": [topic]} if hint else {})) as r:
        return len(r.topic_columns(topic)["timestamp"])


def pyulog_one(path: str, topic: str) -> int:
    from pyulog import ULog

    u = ULog(path, [topic])
    return len(u.get_dataset(topic).data["timestamp"])


# --- one fresh process per run: what a user's script costs ----------------------------------
_FRESH = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {src!r})
{imports}
t1 = time.perf_counter()
path, topic = sys.argv[1], sys.argv[2]
{body}
t2 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "work": t2 - t1, "rows": rows}}))
"""
# every topic instance, one topic_columns call each (the logged strings are read too, but not
# counted: pyulog keeps them outside data_list); the channels listed with channels() (the
# summary's time span would read every timestamp first: its own row)
_POLYBAG_FULL = """
rows = 0
with polybag.open(path) as r:
    for ch in list(r.channels().values()):
        cols = r.topic_columns(ch.topic, ch.metadata.get("multi_id", "0"))
        if ch.topic != "log_message":
            rows += len(cols["timestamp"])
"""
_FRESH_CODE = {
    ("polybag", "full"): ("import polybag", _POLYBAG_FULL),
    # the same from a script that imports numpy before polybag (as many do): numpy's
    # OpenBLAS then starts a worker thread per core but one, each spinning ~60 ms for work
    # before it sleeps (``polybag/__init__`` shortens that spin only when it is imported
    # first); on a 2-core machine the scan's second thread shares a core with it (open of
    # the 30 MB log: 45 ms with OPENBLAS_NUM_THREADS=1, 57 ms with the spinner, the same as
    # one thread; the whole run 196 against 178 ms with polybag imported first)
    ("polybag", "full_numpy_first"): (
        "import numpy\nimport polybag",
        _POLYBAG_FULL,
    ),
    ("polybag", "full_summary"): (
        "import polybag",
        """
rows = 0
with polybag.open(path) as r:
    for ch in list(r.summary.channels.values()):
        cols = r.topic_columns(ch.topic, ch.metadata.get("multi_id", "0"))
        if ch.topic != "log_message":
            rows += len(cols["timestamp"])
""",
    ),
    ("polybag", "one"): (
        "import polybag",
        """
with polybag.open(path) as r:
    rows = len(r.topic_columns(topic)["timestamp"])
""",
    ),
    # the imports alone (what polybag.open of a .ulg imports: numpy, the registry, the
    # ULog reader and its codec), the fixed cost each side pays before any work
    ("polybag", "import"): (
        "import polybag, polybag.io.compression, polybag.formats.registry, polybag.formats.ulog.reader",
        "rows = 0",
    ),
    ("pyulog", "import"): ("from pyulog import ULog", "rows = 0"),
    ("pyulog", "full"): (
        "from pyulog import ULog",
        """
u = ULog(path)
rows = sum(len(d.data["timestamp"]) for d in u.data_list)
""",
    ),
    ("pyulog", "one"): (
        "from pyulog import ULog",
        """
u = ULog(path, message_name_filter_list=[topic])
rows = len(u.get_dataset(topic).data["timestamp"])
""",
    ),
}


def fresh_code(side: str, what: str) -> str:
    imports, body = _FRESH_CODE[(side, what)]
    return _FRESH.format(src=str(ROOT / "src"), imports=imports, body=body)


_FRESH_ENV: dict[str, str] | None = None


def fresh_env() -> dict[str, str]:
    """The fresh processes' environment: bytecode caches kept and written (in
    ``bench/data/.pycache``), as an installed package has them.  Without this, a shell with
    ``PYTHONDONTWRITEBYTECODE=1`` recompiles every polybag module edited since its last
    ``.pyc`` in each run (a few ms per module), while pyulog's installed ``.pyc`` files are
    current: an unequal start."""
    global _FRESH_ENV
    if _FRESH_ENV is None:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(ROOT / "bench" / "data" / ".pycache")
        _FRESH_ENV = env
    return _FRESH_ENV


def fresh(side: str, what: str, path: str, topic: str = "") -> dict[str, float]:
    """One run in a new interpreter (``side``: polybag or pyulog, ``what``: full or one):
    ``wall`` (start to exit), ``cpu`` (the child's user + system time, all threads),
    ``import`` and ``work`` (timed inside the child) and the data ``rows`` read.  The first
    run of each kind compiles and caches the bytecode (:func:`fresh_env`); ``run_all`` and
    :func:`main` warm it before timing."""
    env = fresh_env()
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-c", fresh_code(side, what), path, topic], stdout=subprocess.PIPE, env=env
    )
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{side} {what} exited with {p.returncode}")
    res = json.loads(out.decode().strip().splitlines()[-1])
    res.update(wall=wall, cpu=ru.ru_utime + ru.ru_stime)
    return res


_REEXEC_GUARD = "_ROS_WHEELS_BOOTSTRAP_COMPLETE"


def bare(code: str, reexec: bool = False) -> dict[str, float]:
    """``python -c code`` in a new interpreter with the fresh runs' environment (the floor
    rows: ``pass``, ``import numpy``): ``wall`` (start to exit) and ``cpu`` (the child's
    user + system time).

    ``reexec``: without the guard variable of the ``ros_wheels_bootstrapper`` ``.pth`` that
    the ROS 2 test wheels put in this venv.  Started from a shell, every interpreter of the
    venv runs ``site``, imports that module (and ``pathlib``) and ``execve``'s itself once
    to set ``LD_LIBRARY_PATH``; a process started from one of them (as every fresh run
    here) inherits the guard and starts once.  Both sides pay the same either way."""
    env = fresh_env()
    if reexec:
        env = {k: v for k, v in env.items() if k != _REEXEC_GUARD}
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code], env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"python -c {code!r} exited with {p.returncode}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime}


def profile_fresh(side: str, what: str, path: str, topic: str = "", top: int = 35) -> str:
    """cProfile of one fresh run (cumulative time, ``top`` lines) and its ``-X importtime``
    heaviest imports."""
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, f"{side}_{what}.py")
        with open(script, "w") as f:
            f.write(fresh_code(side, what))
        prof = subprocess.run(
            [sys.executable, "-m", "cProfile", "-s", "cumulative", script, path, topic],
            capture_output=True, text=True, check=True, env=fresh_env(),
        ).stdout.splitlines()
        imp = subprocess.run(
            [sys.executable, "-X", "importtime", script, path, topic], capture_output=True, text=True, check=True,
            env=fresh_env(),
        ).stderr.splitlines()
    # importtime lines: "import time: self [us] | cumulative | imported package"
    rows = []
    for line in imp[1:]:
        parts = line.split("|")
        if len(parts) == 3 and not parts[2].startswith("   "):  # top-level imports only
            rows.append((int(parts[1]), parts[2].strip()))
    heavy = ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in sorted(rows, reverse=True)[:8])
    return "\n".join(prof[: top + 8]) + f"\nheaviest top-level imports: {heavy}"


_CHILD = """
import sys
sys.path.insert(0, {src!r})
import numpy, polybag
from polybag.formats.ulog import reader


def hwm():  # this process's peak resident set (ru_maxrss would include the parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


base = hwm()
import tracemalloc
tracemalloc.start()
with polybag.open({path!r}) as r:
    cols = r.all_topic_columns()
    peak = tracemalloc.get_traced_memory()[1]
print(base, hwm(), peak)
"""


def peak_memory(path: str) -> tuple[int, int]:
    """(max RSS growth of a child process doing the full parse, tracemalloc peak), bytes."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(src=str(ROOT / "src"), path=path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    base, final, traced = (int(x) for x in out)
    return (final - base) * 1024, traced


def report(what: str, peer: list[float], ours: list[float], goal: float) -> None:
    """Best and median of each side and their ratios (same repeat count for both sides)."""
    pb, pm = min(peer), float(np.median(peer))
    ob, om = min(ours), float(np.median(ours))
    print(
        f"{what:<42} pyulog best {pb:6.3f}s median {pm:6.3f}s | polybag best {ob:6.3f}s median {om:6.3f}s"
        f" | ratio best {pb / ob:5.1f}x median {pm / om:5.1f}x  (goal >= {goal:g}x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="write the generated log here (and reuse it if present)")
    args = ap.parse_args()

    print(f"{'file':<48} {'MB':>7} {'pyulog s':>9} {'polybag s':>9} {'ratio':>7}")
    for f in sorted(CORPUS.glob("*.ulg")):
        p = str(f)
        a = best(lambda p=p: pyulog_full(p), args.repeat)
        b = best(lambda p=p: polybag_full(p), args.repeat)
        print(f"{f.name:<48} {f.stat().st_size / 1e6:7.2f} {a:9.3f} {b:9.3f} {a / b:6.1f}x")

    tmpdir = tempfile.mkdtemp(prefix="bench_ulog_")
    path = args.keep or os.path.join(tmpdir, "big.ulg")
    if not os.path.exists(path):
        t = time.perf_counter()
        size = generate(path, args.size_mb)
        print(f"generated {path}: {size / 1e6:.1f} MB in {time.perf_counter() - t:.1f}s")
    size = os.path.getsize(path)
    with polybag.open(path) as r:
        nmsg = r.summary.message_count
        ntopics = len(r.summary.channels)
    print(f"big log: {size / 1e6:.1f} MB, {ntopics} channels, {nmsg} messages")
    a_t = timings(lambda: pyulog_full(path), max(1, args.repeat // 2))
    b_t = timings(lambda: polybag_full(path), args.repeat)
    report("full parse to columns:", a_t, b_t, 5)
    topic = "vehicle_local_position"
    a_t = timings(lambda: pyulog_one(path, topic), args.repeat)
    b_t = timings(lambda: polybag_one(path, topic), args.repeat)
    report(f"one topic ({topic}):", a_t, b_t, 10)
    n = max(3, args.repeat)
    for what, goal in (("full", 5), ("one", 10)):
        fresh("pyulog", what, path, topic), fresh("polybag", what, path, topic)  # (bytecode cached)
        a_t = [fresh("pyulog", what, path, topic)["wall"] for _ in range(n)]
        b_t = [fresh("polybag", what, path, topic)["wall"] for _ in range(n)]
        report(f"fresh process, {'full parse' if what == 'full' else 'one topic'}:", a_t, b_t, goal)
    # reference: a script that imports numpy before polybag (see _FRESH_CODE "full_numpy_first")
    fresh("polybag", "full_numpy_first", path, topic)
    a_t = [fresh("pyulog", "full", path, topic)["wall"] for _ in range(n)]
    b_t = [fresh("polybag", "full_numpy_first", path, topic)["wall"] for _ in range(n)]
    report("fresh, full, numpy imported first (ref):", a_t, b_t, 5)
    rss, traced = peak_memory(path)
    print(
        f"polybag full parse peak memory: RSS +{rss / 1e6:.1f} MB ({rss / size:.2f}x file, mapped file pages "
        f"included), allocations {traced / 1e6:.1f} MB ({traced / size:.2f}x file)  (goal <= 1.5x)"
    )
    print(f"(own CPU time {resource.getrusage(resource.RUSAGE_SELF).ru_utime:.1f}s)")
    if not args.keep:
        os.unlink(path)
        os.rmdir(tmpdir)


if __name__ == "__main__":
    main()
