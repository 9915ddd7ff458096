#!/usr/bin/env bash
# Sets up everything paddle-nbext needs on a fresh Debian machine with Python 3.10+ and Node 20:
# Chromium (browser tests), a virtualenv in .venv with the package (editable) and its test and
# paddle extras, and the JupyterLab extension built from labextension/ before the Python install
# (the wheel ships the prebuilt assets; stale assets are never reused).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# The venv's tools (jupyter-builder, jupyter) must be found by npm scripts and by jupyter itself.
export PATH="$ROOT/.venv/bin:$PATH"

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing (browser tests need it): sudo apt-get install chromium" >&2
  fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The builder (jupyter-builder) comes with JupyterLab; install it before building the assets.
.venv/bin/python -m pip install -q "jupyterlab>=4.4,<5"

if [ -f labextension/package.json ]; then
  (
    cd labextension
    npm ci --no-audit --no-fund --loglevel=error
    npm run build:prod
  )
fi

.venv/bin/python -m pip install -q -e ".[test,paddle]"
# An editable install does not place data files; do what the wheel's data files do
# (tests/test_packaging.py checks the real wheel carries them).
mkdir -p .venv/etc/jupyter/jupyter_server_config.d
cp jupyter-config/jupyter_server_config.d/paddle_nbext_server.json .venv/etc/jupyter/jupyter_server_config.d/
if [ -d paddle_nbext/labextension ]; then
  .venv/bin/jupyter-builder develop --overwrite . >/dev/null
fi
echo "setup: done (.venv ready)"
