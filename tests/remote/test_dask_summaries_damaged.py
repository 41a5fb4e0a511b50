"""``polybag.dask.file_summaries`` of a truncated MCAP and bag, local and on a real S3 server
(SeaweedFS): the ``error`` column holds the verdict ``polybag info`` prints for the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from remote_helpers import write_big
from seaweed import SeaweedS3, upload

pytest.importorskip("dask.dataframe")
import polybag.dask as pbd  # noqa: E402

NAMES = ("cut.mcap", "cut.bag")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sound MCAP and bag, and each cut in half (its last chunk runs past the end)."""
    d = tmp_path_factory.mktemp("damaged")
    for ext in ("mcap", "bag"):
        write_big(d / f"whole.{ext}", n=6)
        data = (d / f"whole.{ext}").read_bytes()
        (d / f"cut.{ext}").write_bytes(data[: len(data) // 2])
    return d


def _info_verdict(path: str, env: dict[str, str] | None = None) -> str:
    p = subprocess.run([sys.executable, "-m", "polybag", "info", path], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 1, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    prefix = "polybag info: error: "
    assert line.startswith(prefix + "the file is damaged: "), line
    return line[len(prefix) :]


def test_local_truncated_files_get_info_verdict(logs: Path) -> None:
    paths = [str(logs / n) for n in (*NAMES, "whole.mcap", "whole.bag")]
    df = pbd.file_summaries(paths).compute().set_index("path")
    for n in NAMES:
        p = str(logs / n)
        assert df.loc[p, "error"] == _info_verdict(p)
    for n in ("whole.mcap", "whole.bag"):
        assert df["error"].isna()[str(logs / n)]
    with pytest.raises(Exception, match="the file is damaged"):
        pbd.file_summaries([str(logs / "cut.mcap")], errors="raise").compute()


def test_seaweed_truncated_files_get_info_verdict(seaweed: SeaweedS3, logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("s3fs")
    env = seaweed.env()  # file_summaries takes no storage options: the user's S3 environment
    for k, v in env.items():
        if os.environ.get(k) != v:
            monkeypatch.setenv(k, v)
    import fsspec.config  # reads FSSPEC_S3_* when imported: give it the endpoint too

    monkeypatch.setitem(fsspec.config.conf, "s3", {**fsspec.config.conf.get("s3", {}), "endpoint_url": seaweed.endpoint})
    upload(seaweed, "damaged", {n: logs / n for n in (*NAMES, "whole.mcap")})
    urls = [f"s3://damaged/{n}" for n in (*NAMES, "whole.mcap")]
    import dask

    with dask.config.set(scheduler="sync"):
        df = pbd.file_summaries(urls).compute().set_index("path")
    for u in urls[:2]:
        assert df.loc[u, "error"] == _info_verdict(u, env)
        assert "the file is damaged" in df.loc[u, "error"]
    assert df["error"].isna()[urls[2]]
