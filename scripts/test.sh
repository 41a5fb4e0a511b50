#!/usr/bin/env bash
# Set up everything on a fresh machine and run the whole test suite (.ci/run calls this).
set -euo pipefail
cd "$(dirname "$0")/.."
# The Debian ROS 1 packages the live tests use (real rosmaster, rosbag info/check/play).
ROS_PKGS="python3-rosbag python3-rosmaster python3-rostopic python3-rospy python3-std-msgs
  python3-sensor-msgs python3-geometry-msgs python3-tf2-msgs"
if ! command -v rosmaster >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  $SUDO apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $ROS_PKGS >/dev/null
fi
# nginx, the real web server of the HTTP remote tests (tests/remote/nginx.py starts it on a free port)
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nginx-light >/dev/null
fi
# Debian's chromium, the browser of the docs site check (tests/docs/test_docs_site_browser.py drives
# it with Playwright through executable_path: Playwright's own browser downloads are not reachable),
# and zsh and fish, the shells the completion tests (and docs/install.md) complete in
if { [ ! -x /usr/bin/chromium ] || ! command -v zsh >/dev/null 2>&1 || ! command -v fish >/dev/null 2>&1; } \
    && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium zsh fish >/dev/null
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'
.venv/bin/ruff check src tests bench fuzz scripts
# the typed API: no mypy --strict error in src/ (tests/test_typed_public_api.py also checks what the public API reveals)
.venv/bin/python -m mypy --strict --no-error-summary src/polybag
# the wheel as users get it: sdist + wheel built and twine-checked, the wheel installed with [all]
# into a clean venv outside the checkout, the README's first command and the docs' examples run on it
.venv/bin/python scripts/wheel_check.py
.venv/bin/python -m pytest -n 2 -q "$@"
