"""The fuzz harness (fuzz/) in CI: a fixed number of cases per target, with a fixed seed.

Each target runs in worker processes under the harness's invariants: only
``polybag.errors.PolybagError`` comes out of the API, each case ends within 20 s (a bound
for hangs only), and the worker's address space is capped at 1.5 GiB with peak resident
memory checked against 1 GiB, so memory cannot follow what an input declares.  A failure
prints each escape's type, place, saved input and traceback; replay one with
``python -m fuzz --target NAME --replay FILE`` (see fuzz/README.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the harness is the top-level fuzz/ package of the checkout
    sys.path.insert(0, str(ROOT))

from fuzz import engine  # noqa: E402

SEED = "ci-1"
# cases per target: about 10-20 s of CPU each on this machine
CASES = {
    "mcap_indexed": 3000,
    "mcap_stream": 3000,
    "bag": 2000,
    "ulog": 800,
    "ros1": 1000,  # (definition bombs up to the limits: a case costs more than a payload one)
    "cdr": 1000,
    "ulog_decoder": 3000,
    "tcpros": 10000,
    "xmlrpc": 2000,
    # the newer surfaces (issue 26), each with its own invariants on top (fuzz/<surface>.py)
    "rosbag2_dir": 300,
    "db3_pages": 1000,
    "db3_journal": 1500,  # issue 28: a killed writer's -journal, against SQLite's own rollback
    "outputs": 800,
    "ros2_peer": 2000,
    "http": 600,
    "record_config": 1200,
    # issue 30: hostile MCAP and bag files read by ranges (memory://), against the local read
    "mcap_remote": 1500,
    "bag_remote": 400,
    # the S3 open by one ranged GET (issue 30), against hostile answers
    "s3_answers": 1500,
    # text from a file never printed raw: list/info/cat/du/export over hostile names (BUG-A)
    "printing": 150,
}
# Escapes found by the fuzzer in code other engineers own, handed over with a reproducer in
# fuzz/repros/: target -> {kind:type@file (line-independent): reproducer}.  Remove an entry
# when its fix lands.
KNOWN: dict[str, dict[str, str]] = {}


def _known(target: str, signature: str) -> bool:
    head, _, where = signature.partition("@")
    return f"{head}@{where.rsplit(':', 1)[0]}" in KNOWN.get(target, {})


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-work")


def _report(res: engine.Result) -> str:
    lines = [f"{res.target}: {res.cases} cases, escapes:"]
    for sig, info in res.signatures.items():
        lines.append(f"  {sig} ({info['count']} cases): {info['message'][:300]}")
        if info.get("file"):
            lines.append(f"    input: {info['file']}")
            txt = Path(info["file"]).with_suffix(".txt")
            if txt.exists():
                lines.append("    " + txt.read_text()[-3000:].replace("\n", "\n    "))
    return "\n".join(lines)


@pytest.mark.parametrize("target", list(CASES))
def test_fuzz_target_has_no_escapes(target: str, work: Path) -> None:
    res = engine.run(
        target,
        seed=SEED,
        cases=CASES[target],
        case_timeout=20.0,
        mem_mb=1536,
        rss_mb=1024,
        work=work,
        crashes=work / "crashes",
        resume=False,
    )
    assert res.cases == CASES[target], _report(res)
    new = {s: i for s, i in res.signatures.items() if not _known(target, s)}
    assert not new, _report(res)
    assert res.max_rss_kb < 1024 * 1024


def test_harness_catches_every_kind_of_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The invariants are really checked: an escape, a MemoryError hidden behind a
    PolybagError, an allocation past the address-space cap, resident memory past the bound,
    a case past its time bound and a case deaf to the alarm are each reported with the input."""
    monkeypatch.setenv("POLYBAG_FUZZ_HARD_GRACE", "2")
    res = engine.run(
        "_selftest", seed="self", cases=40, case_timeout=1.0, mem_mb=1536, rss_mb=256,
        work=tmp_path, crashes=tmp_path / "crashes", resume=False,
    )
    assert res.cases == 40
    kinds = {s.split("@")[0] for s in res.signatures}
    assert kinds == {
        "escape:KeyError", "masked:MemoryError", "escape:MemoryError", "memory:MemoryError", "timeout:Timeout",
        "hang:Killed",
    }, _report(res)
    for info in res.signatures.values():
        assert info["file"] and Path(info["file"]).is_file()
    # an allowed PolybagError (k == 6) and a plain pass are not failures
    assert len(res.failures) < 40


def test_runs_are_reproducible_and_resumable(tmp_path: Path) -> None:
    """The same seed makes the same cases; a stopped run resumes where it stopped."""
    a = engine.run("tcpros", seed="r", cases=300, work=tmp_path / "a", crashes=tmp_path / "ca")
    b = engine.run("tcpros", seed="r", cases=150, work=tmp_path / "b", crashes=tmp_path / "cb")
    b2 = engine.run("tcpros", seed="r", cases=150, work=tmp_path / "b", crashes=tmp_path / "cb")
    assert a.cases == b.cases + b2.cases == 300
    pool_a = sorted(p.name for p in (tmp_path / "a" / "tcpros" / "pool").iterdir())
    pool_b = sorted(p.name for p in (tmp_path / "b" / "tcpros" / "pool").iterdir())
    assert pool_a == pool_b and pool_a
    assert '"next": 300' in (tmp_path / "b" / "tcpros" / "state.json").read_text()


def test_known_escape_reproducers_exist() -> None:
    for known in KNOWN.values():
        for path in known.values():
            assert (ROOT / path).is_file(), path
    assert os.path.isdir(ROOT / "fuzz" / "repros")


REPROS = sorted((ROOT / "fuzz" / "repros").glob("*.bin"))


@pytest.mark.parametrize("repro", REPROS, ids=[p.name for p in REPROS])
def test_fixed_reproducer_no_longer_escapes(repro: Path) -> None:
    """Every saved reproducer of a fixed escape replays cleanly (in a fresh process, as
    ``python -m fuzz --target NAME --replay FILE`` does); a known one stays listed in KNOWN."""
    import subprocess

    target = repro.name.split("-", 1)[0]
    if any(str(repro.relative_to(ROOT)) in known.values() for known in KNOWN.values()):
        pytest.skip("a known open escape")
    r = subprocess.run(
        [sys.executable, "-m", "fuzz", "--target", target, "--replay", str(repro)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": ok (" in r.stdout


# --- escapes the fuzzer found in the parsers this harness owns, as plain regression tests -------
def _answer(body: bytes, head: bytes = b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\n") -> bytes:
    return head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body


def _dumps(value: object) -> bytes:
    import xmlrpc.client

    return xmlrpc.client.dumps((value,), methodresponse=True).encode()


@pytest.mark.parametrize(
    "response,call",
    [
        # a Content-Length of 1 TiB (Python's http.client allocates what the peer declares)
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n<methodResponse>", "get_uri"),
        (b"HTTP/1.1 500 Oops\r\nContent-Length: 1099511627776\r\n\r\nx", "get_uri"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n<methodResponse>", "get_uri"),
        (_answer(b"<methodResponse><params><param><value><i4>1</i4></para"), "get_uri"),  # ExpatError
        (_answer(_dumps([1, "ok", ["x"]])), "unregister_publisher"),  # int() of a list
        (_answer(_dumps([1, "ok", ["x"]])), "get_uri"),
        (_answer(b"<methodResponse><params><param><value>" + b"<array><data><value>" * 5000
                 + b"</value></data></array>" * 5000 + b"</value></param></params></methodResponse>"), "get_uri"),
        (_answer(b"<methodResponse><fault><value><struct></struct></value></fault></methodResponse>"), "get_uri"),
    ],
)
def test_master_client_answers_are_graph_errors(response: bytes, call: str) -> None:
    from fuzz.net import _FakeHttpServer

    from polybag.net.ros1 import MasterClient, RosGraphError

    server = _FakeHttpServer()
    try:
        server.response = response
        client = MasterClient(f"http://127.0.0.1:{server.port}/", "/t", caller_api="http://127.0.0.1:1/")
        with pytest.raises(RosGraphError) as info:
            getattr(client, call)(*(("/t",) if call.startswith("unregister") else ()))
        assert len(str(info.value)) < 1000
    finally:
        server.close()


def test_bag_index_data_naming_an_unknown_connection_is_not_a_key_error() -> None:
    """Index data records that name a connection the chunk info does not list: the chunk's
    own records are read instead (all messages, on their real connections)."""
    import io
    import struct

    from fuzz.formats import bag_records

    import polybag
    from polybag.formats.bag.writer import BagWriter

    out = io.BytesIO()
    w = BagWriter(out, compression="none")
    ch = w.add_channel("/n", "ros1", w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data\n"))
    for i in range(5):
        w.write(ch, struct.pack("<i", i), 10**9 + i)
    w.close()
    data = bytearray(out.getvalue())
    for r in bag_records(bytes(data), 13, len(data)):
        fields = {n: (v, ln) for n, _s, v, ln in r.fields}
        if data[fields["op"][0]] == 0x04:
            v, _ln = fields["conn"]
            data[v : v + 4] = struct.pack("<I", 256)
    with polybag.open(bytes(data)) as r:
        got = [(m.topic, bytes(m.data)) for m in r.messages()]
    assert got == [("/n", struct.pack("<i", i)) for i in range(5)]


def _bag_with_unknown_conn_in_chunk() -> bytes:
    """A bag whose chunk holds a message of connection 7, which no connection record defines,
    with its index data damaged so the chunk's records are read."""
    import io
    import struct

    from polybag.formats.bag.writer import BagWriter

    out = io.BytesIO()
    w = BagWriter(out, compression="none")
    ch = w.add_channel("/n", "ros1", w.add_schema("std_msgs/Int32", "ros1msg", b"int32 data\n"))
    for i in range(3):
        w.write(ch, struct.pack("<i", i), 10**9 + i)
    w.close()
    data = bytearray(out.getvalue())
    # the second message's conn field (records are "op=\x02", "conn=<u32>", "time=<8>")
    head = b"conn=\x00\x00\x00\x00\x0d\x00\x00\x00time="
    first = data.find(head)
    second = data.find(head, first + 1)
    assert 0 < first < second
    data[second + 5 : second + 9] = struct.pack("<I", 7)
    i = data.find(b"ver=\x01\x00\x00\x00", second)  # the index data's version: now damaged
    assert i > second
    data[i + 4] = 9
    return bytes(data)


def test_bag_chunk_message_of_an_undefined_connection() -> None:
    import polybag
    from polybag.errors import FormatError

    data = _bag_with_unknown_conn_in_chunk()
    with polybag.open(data) as r, pytest.raises(FormatError, match="connection 7"):
        list(r.messages())
    with polybag.open(data, recover=True) as r:
        assert [bytes(m.data)[0] for m in r.messages()] == [0, 2]


def test_bag_v12_message_data_without_a_type_field() -> None:
    """A 1.2 message data record that lacks its 'type' field: an error, and the frequencies
    of `info` (message_times) still work on what was read."""
    from fuzz.seeds import _bag_v12

    import polybag
    from polybag.errors import FormatError

    data = bytearray(_bag_v12(indexed=False))
    i = data.rfind(b"type=std_msgs/Int32")  # in the last message data record
    data[i : i + 4] = b"tipe"
    for recover in (False, True):
        with polybag.open(bytes(data), recover=recover) as r:
            times = r.message_times()  # (was an IndexError: one more time than connections)
            assert sum(len(v) for v in times.values()) == len(r.table.times)
    with polybag.open(bytes(data)) as r, pytest.raises(FormatError):
        list(r.messages())


def test_remote_plan_targets_catch_a_remote_read_that_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The remote-plan oracle really compares: a remote read that loses its last message (or
    fetches more than the bound) is an escape, on a file both reads take."""
    from fuzz import remote_plans
    from fuzz.targets import Stats

    target = remote_plans.McapRemote()
    target.setup()
    data = (ROOT / "samples" / "demo.mcap").read_bytes()
    target.run(data, Stats())  # the honest read: equal, within the bound
    real = remote_plans._messages
    calls: list[int] = []

    def lossy(r, kw):  # type: ignore[no-untyped-def]
        out = real(r, kw)
        calls.append(len(out))
        return out[:-1] if len(calls) == 1 and out else out  # the first call is the remote read

    monkeypatch.setattr(remote_plans, "_messages", lossy)
    with pytest.raises(remote_plans.RemotePlanEscape, match="missing remotely"):
        target.run(data, Stats())
    monkeypatch.setattr(remote_plans, "_messages", real)
    monkeypatch.setattr(remote_plans, "FETCH_SLACK", -(3 * len(data)))
    with pytest.raises(remote_plans.RemotePlanEscape, match="fetched"):
        target.run(data, Stats())


def test_s3_answers_target_catches_a_read_that_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The s3_answers oracle really compares: a read after truthful answers that lacks a
    message the local read has, and answers taking more than the bound, are escapes; the
    honest case passes."""
    from fuzz import s3_answers
    from fuzz.targets import Stats, pack

    target = s3_answers.S3Answers()
    target.setup()
    big = len(target.logs) - 1  # the MCAP of about 200 KiB, the last of the logs
    honest = pack(b"S3", [bytes([big]), bytes(8)])
    stats = Stats()
    target.run(honest, stats)
    assert "read:1" in stats.marks
    real = s3_answers._messages
    monkeypatch.setattr(s3_answers, "_messages", lambda r: real(r)[:-1])  # the local ones are read
    with pytest.raises(s3_answers.S3Escape, match="truthful answers"):
        target.run(honest, Stats())
    monkeypatch.setattr(s3_answers, "_messages", real)
    monkeypatch.setattr(s3_answers, "SLACK", -(10 << 20))
    with pytest.raises(s3_answers.S3Escape, match="body bytes"):
        target.run(honest, Stats())
