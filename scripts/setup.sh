#!/usr/bin/env bash
# Sets up everything paddle-nbext needs on a fresh Debian machine with Python 3.10+ and Node 20:
# Chromium (browser tests) and a virtualenv in .venv with the package (editable) and its test and
# paddle extras.  The package build itself builds the JupyterLab panel (setup.py:
# build_labextension runs npm ci + npm run build:prod in labextension/ when the assets are
# missing or stale) and the editable install enables the panel and the server extension, exactly
# as `pip install .` does; the panel is then linked to the build folder for the dev loop.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# The venv's tools (jupyter-builder, jupyter) must be found by npm scripts and by jupyter itself.
export PATH="$ROOT/.venv/bin:$PATH"

# shellcheck source=scripts/apt_get.sh
source scripts/apt_get.sh

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt_get update -qq
    apt_get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing (browser tests need it): sudo apt-get install chromium" >&2
  fi
fi

# The real node of the cluster suite (tests/support/controlplane/realnode.py): containerd, runc and
# the CNI plugins from Debian bookworm, iptables for kube-proxy, mmdebstrap for the Paddle image.
NODE_PACKAGES="containerd runc containernetworking-plugins iptables mmdebstrap"
NODE_TOOLS="containerd ctr /usr/sbin/runc /usr/lib/cni/bridge iptables mmdebstrap"
missing_node_tool=""
for tool in $NODE_TOOLS; do
  command -v "$tool" >/dev/null 2>&1 || missing_node_tool="$tool"
done
if [ -n "$missing_node_tool" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt_get update -qq
    # shellcheck disable=SC2086
    apt_get install -y -qq $NODE_PACKAGES >/dev/null
  else
    echo "setup: $missing_node_tool is missing (the real-node tests need it): sudo apt-get install $NODE_PACKAGES" >&2
  fi
fi

# The real Ceph of the CephFS tests (tests/support/ceph): monitor, OSD, MDS, ceph-fuse and the
# admin's tools from Debian bookworm (no service starts by itself; the suite runs the daemons),
# and libcephfs's Python binding that deploy/cephfs/provision_home.py uses.
CEPH_PACKAGES="ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common python3-cephfs"
CEPH_TOOLS="ceph-mon ceph-osd ceph-mds ceph-fuse ceph monmaptool"
missing_ceph_tool=""
for tool in $CEPH_TOOLS; do
  command -v "$tool" >/dev/null 2>&1 || missing_ceph_tool="$tool"
done
/usr/bin/python3 -c "import cephfs" >/dev/null 2>&1 || missing_ceph_tool="python3-cephfs"
if [ -n "$missing_ceph_tool" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt_get update -qq
    # shellcheck disable=SC2086
    apt_get install -y -qq --no-install-recommends $CEPH_PACKAGES >/dev/null
  else
    echo "setup: $missing_ceph_tool is missing (the CephFS tests need it): sudo apt-get install --no-install-recommends $CEPH_PACKAGES" >&2
  fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The panel's dev tools (eslint, prettier, vitest: scripts/check.sh) need node_modules even when
# the build below finds the assets up to date; the build skips its own `npm ci` after this one.
INSTALLED=labextension/node_modules/.package-lock.json
if [ ! "$INSTALLED" -nt labextension/package-lock.json ] || [ ! "$INSTALLED" -nt labextension/package.json ]; then
  (cd labextension && npm ci --no-audit --no-fund --loglevel=error)
fi
# JupyterHub's proxy for the JupyterHub recipe and its tests (deploy/jupyterhub/proxy pins it).
PROXY_INSTALLED=deploy/jupyterhub/proxy/node_modules/.package-lock.json
if [ ! "$PROXY_INSTALLED" -nt deploy/jupyterhub/proxy/package-lock.json ]; then
  (cd deploy/jupyterhub/proxy && npm ci --no-audit --no-fund --loglevel=error)
fi
# Builds the panel (needs node and npm on PATH; the build requirements bring jupyter-builder)
# and installs the package with the panel's assets and the server extension's enable file.
.venv/bin/python -m pip install -q -e ".[test,paddle]"
# Dev loop: serve the panel from paddle_nbext/labextension/ itself, so `npm run build` in
# labextension/ shows on the next page load without reinstalling.
.venv/bin/jupyter-builder develop --overwrite . >/dev/null
echo "setup: done (.venv ready)"
