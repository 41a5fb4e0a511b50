"""The remote CLI as a user types it (issue 30), on the real servers: glob URLs among the
inputs of every command taking several (the expansion of ``polybag.dask``, bounded, an empty
one said, none over HTTP), the destination bucket checked before any work, a missing bucket
told from a missing key, a refused secret or an endpoint typo naming the endpoint and where
the credentials came from, and the request counts including the open's HEAD."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from counting_proxy import CountingProxy, serve_proxy
from nginx import free_port
from seaweed import SeaweedS3, upload

import polybag
from polybag.errors import PolybagError, UsageError
from polybag.io import remote
from polybag.io.fsspec_transport import S3_ATTEMPTS, fs_for

pytest.importorskip("s3fs")

N_EACH = 40
WRONG = "wrong-secret-0123456789"


def _polybag(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polybag", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


def _bag(path: Path, k: int) -> None:
    with polybag.Writer(str(path)) as w:
        s = w.add_schema("std_msgs/Float64", "ros1msg", b"float64 data\n")
        c = w.add_channel(f"/t{k}", "ros1", s)
        for j in range(N_EACH):
            w.write(c, struct.pack("<d", j), log_time=10**18 + (k * 1000 + j) * 1000)


@pytest.fixture(scope="module")
def many(seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three small bags under ``s3://logs/habits/many/`` (and a .txt beside them); the prefix."""
    d = tmp_path_factory.mktemp("habits")
    for k in range(3):
        _bag(d / f"r{k}.bag", k)
    (d / "notes.txt").write_text("not a log\n")
    upload(seaweed, "logs", {f"habits/many/{p.name}": p for p in d.iterdir()})
    return "s3://logs/habits/many/"


@pytest.fixture(scope="module")
def s3_proxy(seaweed: SeaweedS3) -> Iterator[CountingProxy]:
    """The counting proxy in front of SeaweedFS (reads: GET and HEAD)."""
    port = urlsplit(seaweed.endpoint).port
    assert port is not None
    yield from serve_proxy(("127.0.0.1", port))


def _via(seaweed: SeaweedS3, proxy: CountingProxy) -> dict[str, str]:
    env = seaweed.env()
    env["FSSPEC_S3_ENDPOINT_URL"] = proxy.url
    return env


# --- 1. glob URLs among the inputs ------------------------------------------------------------
def test_info_expands_a_glob_url_as_dask_does(seaweed: SeaweedS3, many: str, tmp_path: Path) -> None:
    want = remote.expand_url(many + "*.bag", seaweed.storage_options())
    assert want == [f"{many}r{k}.bag" for k in range(3)]  # sorted, objects only (no notes.txt)
    import importlib

    plan = importlib.import_module("polybag.dask._plan")
    assert plan.expand_url is remote.expand_url  # one expansion for both
    p = _polybag(seaweed.env(), tmp_path, "info", "--json", many + "*.bag")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert [d["path"] for d in got] == want
    assert [d["message_count"] for d in got] == [N_EACH] * 3
    p = _polybag(seaweed.env(), tmp_path, "info", "s3://logs/habits/**/r[02].bag")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("path:") == 2 and f"{many}r1.bag" not in p.stdout


def test_convert_merge_check_take_a_glob_url(seaweed: SeaweedS3, many: str, tmp_path: Path) -> None:
    env = seaweed.env()
    p = _polybag(env, tmp_path, "convert", many + "r?.bag", "out")
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == ["r0.mcap", "r1.mcap", "r2.mcap"]
    with polybag.open(str(tmp_path / "out" / "r2.mcap")) as r:
        assert r.summary.message_count == N_EACH and {m.channel.topic for m in r.messages()} == {"/t2"}
    p = _polybag(env, tmp_path, "convert", many + "r[1].bag", "one.mcap")  # one match: IN OUT
    assert p.returncode == 0, p.stderr
    with polybag.open(str(tmp_path / "one.mcap")) as r:
        assert r.summary.message_count == N_EACH
    p = _polybag(env, tmp_path, "merge", "merged.mcap", many + "*.bag")
    assert p.returncode == 0, p.stderr
    assert "from 3 inputs" in p.stdout
    with polybag.open(str(tmp_path / "merged.mcap")) as r:
        assert r.summary.message_count == 3 * N_EACH
    p = _polybag(env, tmp_path, "check", many + "*.bag")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(": OK,") == 3
    p = _polybag(env, tmp_path, "cat", "-n", "1", many + "*.bag")  # one input: must match one
    assert p.returncode == 2
    assert "matches 3 objects" in p.stderr and "Traceback" not in p.stderr


def test_an_empty_glob_is_said(seaweed: SeaweedS3, many: str, tmp_path: Path) -> None:
    p = _polybag(seaweed.env(), tmp_path, "info", many + "*.mcap")
    assert p.returncode == 2
    assert f"polybag info: error: no object matches {many}*.mcap" in p.stderr
    p = _polybag(seaweed.env(), tmp_path, "info", "s3://no-such-bucket-h4/*.bag")
    assert p.returncode == 3
    assert "no such bucket no-such-bucket-h4" in p.stderr


def test_a_glob_is_bounded(seaweed: SeaweedS3, many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "MAX_GLOB_MATCHES", 2)
    with pytest.raises(UsageError, match=r"matches 3 objects, more than .* \(MAX_GLOB_MATCHES = 2\)"):
        remote.expand_url(many + "*.bag", seaweed.storage_options())
    assert len(remote.expand_url(many + "r[01].bag", seaweed.storage_options())) == 2


def test_no_glob_over_http(nginx_proxy: CountingProxy, nginx_root: Path, tmp_path: Path) -> None:
    _bag(nginx_root / "habits.bag", 0)
    nginx_proxy.reset()
    p = _polybag(dict(os.environ), tmp_path, "info", f"{nginx_proxy.url}/*.bag")
    assert p.returncode == 2
    assert "needs a listing, which HTTP servers do not give" in p.stderr
    assert nginx_proxy.requests == 0  # said before asking the server anything
    p = _polybag(dict(os.environ), tmp_path, "info", "--json", f"{nginx_proxy.url}/habits.bag?sig=x")
    assert p.returncode == 0, p.stderr  # a query's ? is no glob
    assert json.loads(p.stdout)["message_count"] == N_EACH


# --- 2. the destination is checked before any work ---------------------------------------------
def test_a_missing_bucket_fails_before_the_input_is_read(seaweed: SeaweedS3, tmp_path: Path) -> None:
    _bag(tmp_path / "in.bag", 0)
    _bag(tmp_path / "in2.bag", 1)
    # the input does not exist: the destination's error comes first, so it was checked first
    p = _polybag(seaweed.env(), tmp_path, "convert", "missing.bag", "s3://no-such-bucket-h4/out.mcap")
    assert p.returncode == 3
    assert "s3://no-such-bucket-h4/out.mcap: cannot write: no such bucket no-such-bucket-h4" in p.stderr
    for args in (
        ("convert", "in.bag", "s3://no-such-bucket-h4/out.mcap"),
        ("convert", "in.bag", "in2.bag", "s3://no-such-bucket-h4/dir/"),  # a batch's OUTDIR
        ("merge", "s3://no-such-bucket-h4/m.mcap", "in.bag", "in2.bag"),
    ):
        p = _polybag(seaweed.env(), tmp_path, *args)
        assert p.returncode == 3, (args, p.stderr)
        assert "no such bucket no-such-bucket-h4" in p.stderr and "Traceback" not in p.stderr
        assert "messages" not in p.stdout  # nothing converted
    with pytest.raises(PolybagError, match="no such bucket no-such-bucket-h4"):
        polybag.Writer("s3://no-such-bucket-h4/w.mcap", storage_options=seaweed.storage_options())
    buckets = [b["Name"] for b in seaweed.client().list_buckets()["Buckets"]]
    assert "no-such-bucket-h4" not in buckets


def test_refused_credentials_fail_before_the_work(seaweed: SeaweedS3, tmp_path: Path) -> None:
    p = _polybag(seaweed.env(secret=WRONG), tmp_path, "convert", "missing.bag", "s3://logs/habits/out.mcap")
    assert p.returncode == 3
    assert "cannot write to bucket logs: PermissionError: Forbidden" in p.stderr
    assert seaweed.endpoint in p.stderr and WRONG not in p.stderr


# --- 3. a missing bucket is no missing key -----------------------------------------------------
def test_missing_bucket_or_key_on_read(seaweed: SeaweedS3, tmp_path: Path) -> None:
    opts = seaweed.storage_options()
    with pytest.raises(PolybagError, match=r"s3://no-such-bucket-h4/mid\.mcap: cannot open: no such bucket no-such-bucket-h4$"):
        polybag.open("s3://no-such-bucket-h4/mid.mcap", storage_options=opts)
    with pytest.raises(PolybagError, match=r"s3://logs/nope\.mcap: cannot open: no such object \(no such key nope\.mcap in bucket logs\)"):
        polybag.open("s3://logs/nope.mcap", storage_options=opts)
    p = _polybag(seaweed.env(), tmp_path, "info", "s3://no-such-bucket-h4/mid.mcap")
    assert p.returncode == 3
    assert "cannot open: no such bucket no-such-bucket-h4" in p.stderr


# --- 4. refused secret, endpoint typo ----------------------------------------------------------
def test_a_wrong_secret_names_endpoint_and_credential_source(seaweed: SeaweedS3, tmp_path: Path) -> None:
    with pytest.raises(PolybagError) as e:
        polybag.open("s3://logs/mid.mcap", storage_options=seaweed.storage_options(secret=WRONG))
    text = str(e.value)
    # (the open's first request is a ranged GET, whose answer has a body saying why: the
    # signature; a HEAD's has none: "Forbidden")
    assert text.startswith("s3://logs/mid.mcap: cannot open: PermissionError: ")
    assert "Forbidden" in text or "signature" in text
    assert f"endpoint {seaweed.endpoint} from the storage options" in text
    assert "credentials: key/secret given to s3fs (storage options key/secret" in text
    assert WRONG not in text and seaweed.key not in text
    p = _polybag(seaweed.env(secret=WRONG), tmp_path, "info", "s3://logs/mid.mcap")
    assert p.returncode == 3
    assert f"endpoint {seaweed.endpoint} from FSSPEC_S3_ENDPOINT_URL" in p.stderr
    assert "credentials: the environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)" in p.stderr
    assert WRONG not in p.stderr and "Traceback" not in p.stderr


def test_an_endpoint_typo_fails_after_few_attempts(seaweed: SeaweedS3, tmp_path: Path) -> None:
    typo = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = seaweed.env()
    env["FSSPEC_S3_ENDPOINT_URL"] = typo
    p = _polybag(env, tmp_path, "info", "s3://logs/mid.mcap")
    assert p.returncode == 3
    assert f"no connection to the S3 server after {S3_ATTEMPTS} attempts; endpoint {typo} from FSSPEC_S3_ENDPOINT_URL" in p.stderr
    # the bound is botocore's: attempts per request (its default is 5, with back-off)
    fs, _path = fs_for("s3://logs/mid.mcap", {**seaweed.storage_options(), "client_kwargs": {"endpoint_url": typo}})
    with pytest.raises(Exception, match="Could not connect to the endpoint"):
        fs.info("logs/mid.mcap")
    assert fs._s3.meta.config.retries == {"mode": "standard", "total_max_attempts": S3_ATTEMPTS}
    # a caller's own retries are kept
    fs2, _path = fs_for("s3://logs/mid.mcap", {**seaweed.storage_options(), "config_kwargs": {"retries": {"max_attempts": 7}}})
    assert fs2.config_kwargs["retries"] == {"max_attempts": 7}


# --- 5. request counts include the open ---------------------------------------------------------
def test_http_request_count_includes_the_head(nginx_proxy: CountingProxy, nginx_root: Path, tmp_path: Path) -> None:
    _bag(nginx_root / "habits.bag", 0)
    nginx_proxy.reset()
    p = _polybag(dict(os.environ), tmp_path, "info", "--json", f"{nginx_proxy.url}/habits.bag")
    assert p.returncode == 0, p.stderr
    fetched = json.loads(p.stdout)["fetched"]
    assert fetched["requests"] == nginx_proxy.requests >= 2  # HEAD + what info read
    nginx_proxy.reset()
    p = _polybag(dict(os.environ), tmp_path, "info", "--stats", f"{nginx_proxy.url}/habits.bag")
    assert p.returncode == 0, p.stderr
    assert f"in {nginx_proxy.requests} requests" in p.stdout + p.stderr


def test_s3_request_count_includes_the_head(seaweed: SeaweedS3, s3_proxy: CountingProxy, tmp_path: Path) -> None:
    s3_proxy.reset()
    opts = seaweed.storage_options()
    opts["client_kwargs"] = {**opts["client_kwargs"], "endpoint_url": s3_proxy.url}
    with polybag.open("s3://logs/mid.mcap", storage_options=opts) as r:
        assert r.summary.message_count == 165
        st = r.source.stats
    assert st is not None
    assert st["requests"] == s3_proxy.requests >= 2  # HeadObject + the summary's ranges
    s3_proxy.reset()
    p = _polybag(_via(seaweed, s3_proxy), tmp_path, "info", "--json", "s3://logs/mid.bag")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["fetched"]["requests"] == s3_proxy.requests
