"""A real web server for the remote tests: nginx (the Debian package) serving a folder on
127.0.0.1 with a generated config, Range and multi-range as nginx does them by default; the
same folder under a few prefixes configured otherwise (``Nginx.url_as``: no Range support,
single ranges only, 403, GET refused, a redirect, a required header)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unavailable(reason: str) -> None:
    """Skip the test with ``reason``, except in CI (``CI=true``) where it fails."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: a missing server fails the tests)")
    pytest.skip(reason)


#: the header value the ``token`` location requires (``X-Token``)
TOKEN = "polybag-test-token"
#: the locations serving the root as a differently configured server would (see ``_config``)
VARIANTS = ("norange", "onerange", "forbidden", "headonly", "moved", "token")


def _config(root: Path, prefix: Path, port: int) -> str:
    user = "user root root;\n" if os.geteuid() == 0 else ""  # the worker reads pytest's 0700 dirs
    temps = "\n".join(
        f"  {k}_temp_path {prefix / 'tmp' / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
  access_log {prefix / "access.log"};
{temps}
  default_type application/octet-stream;
  sendfile on;
  tcp_nodelay on;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    autoindex off;
    location / {{ }}
    # the same files as a server configured otherwise (``Nginx.url_as``): no Range support
    # (200 and the whole body), single ranges only (a multi-range request gets the whole
    # body, as from S3), every request refused, HEAD allowed but GET refused, a redirect to ``/`` (a relative Location,
    # kept on the counting proxy in front), and the files only for
    # requests carrying ``X-Token: {TOKEN}`` (403 otherwise)
    location /norange/ {{ alias {root}/; max_ranges 0; }}
    location /onerange/ {{ alias {root}/; max_ranges 1; }}
    location /forbidden/ {{ return 403; }}
    location /headonly/ {{ alias {root}/; limit_except HEAD {{ deny all; }} }}
    location /moved/ {{ absolute_redirect off; rewrite ^/moved/(.*)$ /$1 redirect; }}
    location /token/ {{
      if ($http_x_token != "{TOKEN}") {{ return 403; }}
      alias {root}/;
    }}
  }}
}}
"""


class Nginx:
    """A running nginx serving ``root`` at ``url``."""

    def __init__(self, root: Path, prefix: Path, exe: str) -> None:
        self.root = root
        self.prefix = prefix
        (prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.conf = prefix / "nginx.conf"
        last = ""
        for _ in range(5):  # another process may take the free port before nginx binds it
            self.port = free_port()
            self.conf.write_text(_config(root, prefix, self.port))
            self.proc = subprocess.Popen(
                [
                    exe,
                    "-c",
                    str(self.conf),
                    "-p",
                    str(prefix),
                    "-e",
                    str(prefix / "error.log"),
                    "-g",
                    "daemon off;",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            last = self._wait_ready()
            if not last:
                return
            self.stop()
        raise RuntimeError(f"nginx did not start: {last}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_as(self, variant: str) -> str:
        """The root's URL on a server configured as ``variant`` (one of ``VARIANTS``)."""
        assert variant in VARIANTS, variant
        return f"{self.url}/{variant}"

    def _wait_ready(self, timeout: float = 30.0) -> str:
        """Poll until nginx answers a request; '' when it does, else why not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                log = self.prefix / "error.log"
                return f"exited with {self.proc.returncode}: {err.strip()} {log.read_text() if log.exists() else ''}"
            try:
                with urllib.request.urlopen(f"{self.url}/", timeout=2):
                    return ""
            except urllib.error.HTTPError:
                return ""  # any HTTP answer (403/404 without autoindex) means it is serving
            except OSError:
                time.sleep(0.05)
        return f"no answer on {self.url} after {timeout:.0f} s"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()


def serve_nginx(root: Path, prefix: Path) -> Iterator[Nginx]:
    """nginx serving ``root`` (config, pid, logs and temp files in ``prefix``), stopped after;
    skips (fails in CI) when nginx is not installed or does not start."""
    exe = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if exe is None:
        unavailable("nginx is not installed (scripts/test.sh apt-installs nginx-light)")
        return
    try:
        server = Nginx(root, prefix, exe)
    except RuntimeError as e:
        unavailable(str(e))
        return
    try:
        yield server
    finally:
        server.stop()
