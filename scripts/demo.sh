#!/usr/bin/env bash
# The demo: set up what it uses (scripts/setup.sh --demo), start a Jupyter server with the extension on
# 127.0.0.1, and run a real 2-pserver + 2-trainer parameter-server job on the local backend
# through the REST API (the `paddle-nbext` CLI), following trainer 0's log until it succeeds.
# The job record stays in ~/.paddle-jobs so you can look at it afterwards in JupyterLab.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# The server takes trainer code only from under the home (on Kubernetes the home volume is what
# the replicas mount), so the demo copies the examples into the home and runs them from there:
# a clone anywhere (/opt, /tmp, a CI workspace) works.  Checked before the set-up's minutes.
DEMO_DIR="${HOME:-}/paddle-nbext-demo"
if [ -z "${HOME:-}" ] || ! mkdir -p "$DEMO_DIR" 2>/dev/null; then
  problem="$DEMO_DIR cannot be made"
  [ -n "${HOME:-}" ] || problem="HOME is not set"
  echo "demo: the demo runs its job from a copy of the examples in your home directory, but $problem: set HOME to a directory you can write to and run it again." >&2
  exit 1
fi

bash scripts/setup.sh --demo

cp examples/ps_train.py examples/collective_train.py examples/demo.ipynb "$DEMO_DIR/"

PORT=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TOKEN=$(.venv/bin/python -c 'import secrets; print(secrets.token_hex(16))')
LOG=$(mktemp -t paddle-nbext-demo-server.XXXXXX.log)
ROOT_FLAG=()
[ "$(id -u)" = 0 ] && ROOT_FLAG=(--allow-root)
# The token goes through the environment, never the command line (`ps` shows every argument).
JUPYTER_TOKEN="$TOKEN" .venv/bin/jupyter server "${ROOT_FLAG[@]}" --no-browser --ip=127.0.0.1 --port="$PORT" \
  --ServerApp.root_dir="$HOME" >"$LOG" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT
echo "== Jupyter server on 127.0.0.1:$PORT (its log: $LOG)"

export PADDLE_NBEXT_API_URL="http://127.0.0.1:$PORT/paddle/api/v1" PADDLE_NBEXT_TOKEN="$TOKEN"
for _ in $(seq 1 60); do
  if .venv/bin/python - 2>/dev/null <<'PY'
import os, urllib.request
base = os.environ["PADDLE_NBEXT_API_URL"].rsplit("/paddle/", 1)[0]
request = urllib.request.Request(base + "/api/status", headers={"Authorization": "token " + os.environ["PADDLE_NBEXT_TOKEN"]})
urllib.request.urlopen(request, timeout=1)
PY
  then
    break
  fi
  sleep 0.5
done

echo "== Submitting a 2 pserver + 2 trainer parameter-server job (local backend)"
echo "== Following trainer 0's log until the job ends (every replica's log: paddle-nbext logs NAME --role pserver --index 0)"
.venv/bin/paddle-nbext submit --package "$DEMO_DIR" --entry "python ps_train.py" \
  --pservers 2 --trainers 2 --trainer-mem 2Gi --pserver-mem 2Gi --follow
echo
.venv/bin/paddle-nbext list
echo
echo "Done. To explore in JupyterLab (panel, widgets, demo notebook):"
echo "  $ROOT/.venv/bin/jupyter lab ${ROOT_FLAG[*]} $DEMO_DIR/demo.ipynb"
echo "The server log of this run: $LOG"
