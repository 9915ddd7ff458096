"""Real Paddle, two collective trainers through the launcher: the trainer that starts while rank
0's store is not up yet connects at once (to its launcher's relay) and never takes Paddle's 3 s
"Retry to connect ... while the server is not yet listening" sleep; both train to the end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from paddle_nbext_server.jobfiles import runtime_files

pytestmark = pytest.mark.paddle

SCRIPT = """
import paddle
import paddle.distributed as dist

dist.init_parallel_env()
total = paddle.to_tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
print("sum of ranks", float(total.numpy()[0]), flush=True)
"""
RETRY = "while the server is not yet listening"
CONNECTED = "Successfully connected to 127.0.0.1:"


def unused_ports(count: int) -> list[int]:
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def start_trainer(bundle: Path, workdir: Path, index: int, endpoints: str) -> subprocess.Popen[str]:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "PADDLE_NBEXT_JOB": "start-race",
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": str(index),
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": endpoints,
        "PADDLE_NBEXT_ENTRY": "python rendezvous.py",
        "PADDLE_NBEXT_WORKDIR": str(workdir),
        "GLOG_minloglevel": "0",  # Paddle's INFO lines: the connect and its retries
    }
    return subprocess.Popen(
        [sys.executable, str(bundle / "launcher.py")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_a_trainer_that_starts_before_rank_0_connects_at_once_and_both_finish(tmp_path: Path) -> None:
    bundle, workdir = tmp_path / "runtime", tmp_path / "package"
    runtime_files.write_bundle(bundle)
    workdir.mkdir()
    (workdir / "rendezvous.py").write_text(SCRIPT, encoding="utf-8")
    endpoints = ",".join(f"127.0.0.1:{port}" for port in unused_ports(2))
    late = start_trainer(bundle, workdir, 1, endpoints)
    early: list[str] = []
    assert late.stdout is not None
    for line in late.stdout:  # rank 0 is not started yet: nothing serves the store
        early.append(line)
        if CONNECTED in line or RETRY in line:
            break
    first = start_trainer(bundle, workdir, 0, endpoints)
    first_out, _ = first.communicate(timeout=240)
    late_rest, _ = late.communicate(timeout=240)
    late_out = "".join(early) + late_rest
    assert RETRY not in late_out, late_out
    assert first.returncode == 0 and late.returncode == 0, first_out + late_out
    assert "sum of ranks 3.0" in first_out and "sum of ranks 3.0" in late_out
