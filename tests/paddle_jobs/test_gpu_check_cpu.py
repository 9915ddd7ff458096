"""scripts/gpu_check.py's CPU dry path end to end: it starts a Jupyter server of its own (local
backend) in a throw-away home, submits 1 trainer x 3 gloo ranks of real Paddle through the REST
API, and every check passes; the job is deleted afterwards and the server stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.paddle

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def test_the_cpu_dry_path_runs_gloo_ranks_and_passes_every_check(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PADDLE_NBEXT_"))}
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
        JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
        JUPYTER_RUNTIME_DIR=str(home / ".local/share/jupyter/runtime"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu", "--ranks", "3", "--trainer-mem", "4Gi", "--timeout", "300"],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    verdicts = [line.split()[:2] for line in result.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert verdicts == [["PASS", name] for name in ("ranks", "selected", "device", "backend", "all_reduce", "job")], output
    assert "sum of rank+1 over 3 ranks = [6.0, 6.0, 6.0]" in result.stdout
    assert (home / "paddle-nbext-gpu-check" / "gpu_probe.py").is_file()
    # The job was deleted: nothing left of it in the local backend's jobs dir.
    assert not any((home / ".paddle-jobs").glob("gpu-check*")), list((home / ".paddle-jobs").iterdir())
