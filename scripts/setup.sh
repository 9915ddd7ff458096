#!/usr/bin/env bash
# Sets up paddle-nbext on a fresh Debian machine with Python 3.10+ and Node 20 (docs/development.md:
# "Set-up"); what it cannot bring it names in one sentence, with how to get it.
#   bash scripts/setup.sh          everything the test suite needs (scripts/test.sh): Chromium
#                                  (browser tests), the real nodes' and Ceph's Debian packages (as
#                                  root), Go with the pinned toolchain (scripts/setup_go.sh: the
#                                  control plane build), the panel's dev tools, JupyterHub's proxy,
#                                  and .venv with the package (editable) and its test and paddle extras
#   bash scripts/setup.sh --demo   only what scripts/demo.sh uses: .venv with the package and its
#                                  paddle extra, and JupyterLab to explore the demo in
# Both need Python's venv module (Debian: python3-venv, which root gets installed) and Node.js 20+
# with npm.  The package build itself builds the JupyterLab panel (setup.py:
# build_labextension runs npm ci + npm run build:prod in labextension/ when the assets are
# missing or stale) and the editable install enables the panel and the server extension, exactly
# as `pip install .` does; for the tests the panel is then linked to the build folder for the dev loop.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# The venv's tools (jupyter-builder, jupyter) must be found by npm scripts and by jupyter itself.
export PATH="$ROOT/.venv/bin:$PATH"

# shellcheck source=scripts/apt_get.sh
source scripts/apt_get.sh

demo=""
case "${1:-}" in
  --demo) demo=1 ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--demo]" >&2; exit 2 ;;
esac
say() { printf 'setup: %s\n' "$*" >&2; }
# Debian packages come through apt-get, as root; a machine without apt-get is not Debian, and the
# set-up says what to do there instead of failing with the shell's "apt-get: command not found".
has_apt_get() { command -v apt-get >/dev/null 2>&1; }

# Python 3.10 to 3.13 whose venv module can make .venv (Debian splits ensurepip off into python3-venv).
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if ! command -v "$PYTHON" >/dev/null 2>&1 || ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    if has_apt_get; then
      say "Python 3.10 or newer is missing ($PYTHON): install Debian's python3 (apt-get install python3 python3-venv) or set PYTHON to one."
    else
      say "Python 3.10 or newer is missing ($PYTHON): install one with its venv module from your system's packages, or set PYTHON to one."
    fi
    exit 1
  fi
  # The paddle extra pins paddlepaddle==3.0.0, whose wheels stop at CPython 3.13 (docs/user-guide.md:
  # "Installing"); pip would only say "No matching distribution found".
  version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "${version#3.}" -ge 14 ]; then
    say "$PYTHON is Python $version, for which paddlepaddle 3.0.0 (the paddle extra) has no wheel: set PYTHON to a Python 3.10 to 3.13."
    exit 1
  fi
  if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && has_apt_get && [[ "$(readlink -f "$(command -v "$PYTHON")")" == /usr/bin/* ]]; then
      apt_get update -qq
      apt_get install -y -qq python3-venv >/dev/null
    fi
    if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
      if has_apt_get; then
        say "$PYTHON cannot make the virtualenv .venv (its venv module has no ensurepip): install Debian's python3-venv (apt-get install python3-venv, as root) or set PYTHON to a Python 3.10+ that has it."
      else
        say "$PYTHON cannot make the virtualenv .venv (its venv module has no ensurepip): install your system's package of Python's venv module, or set PYTHON to a Python 3.10+ that has it."
      fi
      exit 1
    fi
  fi
fi
if ! command -v npm >/dev/null 2>&1; then
  say "npm is missing (the package build builds the JupyterLab panel with it): install Node.js 20 or newer with npm."
  exit 1
fi

# What the test suite needs from Debian bookworm (the demo needs none of it):
# - Chromium, for the browser tests;
# - the real node of the cluster suite (tests/support/controlplane/realnode.py): containerd, runc
#   and the CNI plugins, iptables for kube-proxy, mmdebstrap and buildah for the images;
# - the real Ceph of the CephFS tests (tests/support/ceph): monitor, OSD, MDS, ceph-fuse and the
#   admin's tools (no service starts by itself; the suite runs the daemons), and libcephfs's
#   Python binding that deploy/cephfs/provision_home.py uses.
NODE_PACKAGES="containerd runc containernetworking-plugins iptables mmdebstrap buildah"
NODE_TOOLS="containerd ctr /usr/sbin/runc /usr/lib/cni/bridge iptables mmdebstrap buildah"
CEPH_PACKAGES="ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common python3-cephfs"
CEPH_TOOLS="ceph-mon ceph-osd ceph-mds ceph-fuse ceph monmaptool"
missing_chromium=""
command -v chromium >/dev/null 2>&1 || missing_chromium="chromium"
missing_node_tool=""
for tool in $NODE_TOOLS; do
  command -v "$tool" >/dev/null 2>&1 || missing_node_tool="$tool"
done
missing_ceph_tool=""
for tool in $CEPH_TOOLS; do
  command -v "$tool" >/dev/null 2>&1 || missing_ceph_tool="$tool"
done
/usr/bin/python3 -c "import cephfs" >/dev/null 2>&1 || missing_ceph_tool="python3-cephfs"

if [ -z "$demo" ] && ! has_apt_get && [ -n "$missing_chromium$missing_node_tool$missing_ceph_tool" ]; then
  needed=$(printf '%s ' $missing_chromium ${missing_node_tool:+$NODE_PACKAGES} ${missing_ceph_tool:+$CEPH_PACKAGES})
  say "this machine has no apt-get, so the set-up cannot install the Debian bookworm packages the test suite needs (${needed% }): run it on Debian 12, or run \`bash scripts/setup.sh --demo\` for the demo, which needs none of them."
  exit 1
fi

if [ -z "$demo" ] && [ -n "$missing_chromium" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt_get update -qq
    apt_get install -y -qq chromium >/dev/null
  else
    say "chromium is missing (browser tests need it): sudo apt-get install chromium"
  fi
fi

if [ -z "$demo" ] && [ -n "$missing_node_tool" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt_get update -qq
    # shellcheck disable=SC2086
    apt_get install -y -qq $NODE_PACKAGES >/dev/null
  else
    say "$missing_node_tool is missing (the real-node tests need it): sudo apt-get install $NODE_PACKAGES"
  fi
fi

if [ -z "$demo" ] && [ -n "$missing_ceph_tool" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt_get update -qq
    # shellcheck disable=SC2086
    apt_get install -y -qq --no-install-recommends $CEPH_PACKAGES >/dev/null
  else
    say "$missing_ceph_tool is missing (the CephFS tests need it): sudo apt-get install --no-install-recommends $CEPH_PACKAGES"
  fi
fi

# Go with the toolchain the project pins, for the control plane build of the cluster suite (it
# says in one sentence what is missing; the other tests run without it).
if [ -z "$demo" ]; then
  bash scripts/setup_go.sh || true
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if [ -n "$demo" ]; then
  # The demo's server, CLI and Paddle, and JupyterLab to explore the job in (demo.sh's last words).
  .venv/bin/python -m pip install -q -e ".[paddle]" jupyterlab
  echo "setup: done (.venv ready for the demo)"
  exit 0
fi
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
