"""The launcher's Paddle environment contract per role and mode, and its bounded pserver wait."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from paddle_nbext_server.runtime import launcher

PSERVERS = "127.0.0.1:7001,127.0.0.1:7002"
TRAINERS = "127.0.0.1:7101,127.0.0.1:7102"


def inputs(**overrides: str) -> dict[str, str]:
    base = {
        "PATH": "/usr/bin:/bin",
        "PADDLE_NBEXT_JOB": "mnist-ps-1",
        "PADDLE_NBEXT_MODE": "ps",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "1",
        "PADDLE_NBEXT_PSERVER_ENDPOINTS": PSERVERS,
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": TRAINERS,
        "PADDLE_NBEXT_ENTRY": "python train.py",
        "PADDLE_NBEXT_WORKDIR": "/home/alice/.paddle-jobs/mnist-ps-1/package",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def test_ps_pserver_gets_its_own_endpoint_and_the_list() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_ROLE="pserver", PADDLE_NBEXT_INDEX="1"))
    assert env["TRAINING_ROLE"] == "PSERVER"
    assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == PSERVERS
    # POD_IP:PADDLE_PORT must be exactly the list entry at the server's index.
    assert f"{env['POD_IP']}:{env['PADDLE_PORT']}" == PSERVERS.split(",")[1]
    assert env["PADDLE_TRAINERS_NUM"] == "2"
    assert env["FLAGS_enable_pir_api"] == "0"
    assert "PADDLE_TRAINER_ID" not in env


def test_ps_trainer_has_stable_id_and_pserver_list() -> None:
    env = launcher.build_env(inputs())
    assert env["TRAINING_ROLE"] == "TRAINER"
    assert env["PADDLE_TRAINER_ID"] == "1"
    assert env["PADDLE_TRAINERS_NUM"] == "2"
    assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == PSERVERS
    assert (env["POD_IP"], env["PADDLE_PORT"]) == ("127.0.0.1", "7102")
    assert env["FLAGS_enable_pir_api"] == "0"
    assert launcher.endpoints_to_wait_for(inputs()) == [("127.0.0.1", 7001), ("127.0.0.1", 7002)]


def test_design_variables_are_set_for_every_role() -> None:
    env = launcher.build_env(inputs())
    assert env["PADDLE_JOB_NAME"] == "mnist-ps-1"
    assert (env["TRAINERS"], env["PSERVERS"]) == ("2", "2")
    assert env["ENTRY"] == "python train.py"
    assert env["TRAINER_PACKAGE"] == "/home/alice/.paddle-jobs/mnist-ps-1/package"


def test_collective_trainer_gets_endpoints_and_gloo() -> None:
    env = launcher.build_env(
        inputs(PADDLE_NBEXT_MODE="collective", PADDLE_NBEXT_INDEX="0", PADDLE_NBEXT_PSERVER_ENDPOINTS="")
    )
    assert env["PADDLE_TRAINER_ID"] == "0"
    assert env["PADDLE_TRAINERS_NUM"] == "2"
    assert env["PADDLE_TRAINER_ENDPOINTS"] == TRAINERS
    assert env["PADDLE_CURRENT_ENDPOINT"] == "127.0.0.1:7101"
    assert env["PADDLE_DISTRI_BACKEND"] == "gloo"
    assert "FLAGS_enable_pir_api" not in env
    assert "PADDLE_PSERVERS_IP_PORT_LIST" not in env
    assert launcher.endpoints_to_wait_for(inputs(PADDLE_NBEXT_MODE="collective")) == []


def test_collective_with_visible_gpu_does_not_force_gloo() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_MODE="collective", CUDA_VISIBLE_DEVICES="0"))
    assert "PADDLE_DISTRI_BACKEND" not in env


def test_stale_contract_variables_are_replaced() -> None:
    env = launcher.build_env(
        inputs(PADDLE_NBEXT_ROLE="pserver", PADDLE_NBEXT_INDEX="0", PADDLE_TRAINER_ID="7", PADDLE_CURRENT_ENDPOINT="x:1")
    )
    assert "PADDLE_TRAINER_ID" not in env
    assert "PADDLE_CURRENT_ENDPOINT" not in env


def test_cpu_sets_thread_counts_rounded_up() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_CPU="1.5"))
    assert (env["CPU_NUM"], env["OMP_NUM_THREADS"]) == ("2", "2")
    env = launcher.build_env(inputs(PADDLE_NBEXT_CPU="0.5"))
    assert env["CPU_NUM"] == "1"


def test_kubernetes_completion_index_is_the_replica_index() -> None:
    env = launcher.build_env(inputs(PADDLE_NBEXT_INDEX="", JOB_COMPLETION_INDEX="0"))
    assert env["PADDLE_TRAINER_ID"] == "0"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"PADDLE_NBEXT_ROLE": None}, "PADDLE_NBEXT_ROLE"),
        ({"PADDLE_NBEXT_MODE": "sync"}, "PADDLE_NBEXT_MODE"),
        ({"PADDLE_NBEXT_INDEX": "5"}, "index 5"),
        ({"PADDLE_NBEXT_PSERVER_ENDPOINTS": ""}, "PADDLE_NBEXT_PSERVER_ENDPOINTS"),
        ({"PADDLE_NBEXT_TRAINER_ENDPOINTS": "localhost"}, "PADDLE_NBEXT_TRAINER_ENDPOINTS"),
        ({"PADDLE_NBEXT_ENTRY": " "}, "PADDLE_NBEXT_ENTRY"),
    ],
)
def test_bad_inputs_name_the_variable(overrides: dict[str, str | None], named: str) -> None:
    with pytest.raises(launcher.LaunchError, match=named):
        launcher.build_env(inputs(**overrides))  # type: ignore[arg-type]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_trainer_gives_up_naming_the_unreachable_pserver(tmp_path) -> None:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    dead = _closed_port()
    try:
        env = inputs(
            PADDLE_NBEXT_PSERVER_ENDPOINTS=f"127.0.0.1:{listening.getsockname()[1]},127.0.0.1:{dead}",
            PADDLE_NBEXT_WORKDIR=str(tmp_path),
            PADDLE_NBEXT_ENTRY="touch entry-ran",
            PADDLE_NBEXT_WAIT_TIMEOUT="1",
        )
        result = subprocess.run(
            [sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        listening.close()
    assert result.returncode == launcher.WAIT_EXIT_CODE
    assert f"pserver 1 at 127.0.0.1:{dead}" in result.stderr
    assert not (tmp_path / "entry-ran").exists()


def test_entry_runs_in_the_workdir_with_the_contract(tmp_path) -> None:
    env = inputs(
        PADDLE_NBEXT_MODE="collective",
        PADDLE_NBEXT_WORKDIR=str(tmp_path),
        PADDLE_NBEXT_ENTRY='echo "$PADDLE_TRAINER_ID $PADDLE_CURRENT_ENDPOINT" > out.txt; exit 4',
    )
    result = subprocess.run([sys.executable, launcher.__file__], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 4  # the entry point's own exit code, not the launcher's
    assert (tmp_path / "out.txt").read_text().strip() == "1 127.0.0.1:7102"
