"""The Paddle preflight names the installed versions and the fix, before Paddle is imported.

Each case runs the shipped file as a job image runs it (a plain script beside `contract.py`, from
the runtime bundle) with fake distributions' metadata first on the path, as an interpreter with
that wheel installed would report them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paddle_nbext_server.jobfiles import runtime_files


def fake_distribution(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")


def facts(tmp_path: Path, *distributions: tuple[str, str]) -> dict[str, object]:
    """Run the bundle's preflight.py without site-packages (`-S`: this venv's own Paddle stays
    out), so the fake distributions are all the interpreter has."""
    bundle = tmp_path / "bundle"
    runtime_files.write_bundle(bundle)
    site = tmp_path / "site"
    site.mkdir()
    for name, version in distributions:
        fake_distribution(site, name, version)
    command = [sys.executable, "-S", str(bundle / "preflight.py")]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    return dict(json.loads(done.stdout))


def test_paddle_3_0_with_old_protobuf_runs_both_modes(tmp_path: Path) -> None:
    found = facts(tmp_path, ("paddlepaddle", "3.0.0"), ("protobuf", "6.31.1"))
    assert found["paddle"] == "3.0.0"
    assert found["modes"] == ["ps", "collective"]
    assert found["problems"] == {}


def test_ps_mode_on_paddle_3_3_is_refused_naming_the_versions_and_the_fix(tmp_path: Path) -> None:
    found = facts(tmp_path, ("paddlepaddle", "3.3.1"), ("protobuf", "6.31.1"))
    assert found["modes"] == ["collective"]
    problems = found["problems"]
    assert isinstance(problems, dict) and set(problems) == {"ps"}
    sentence = problems["ps"]
    assert "paddlepaddle 3.3.1 is installed" in sentence
    assert "mode=collective" in sentence and "paddlepaddle==3.0.0" in sentence


def test_gpu_wheel_counts_as_paddle(tmp_path: Path) -> None:
    found = facts(tmp_path, ("paddlepaddle-gpu", "3.1.1"))
    assert (found["distribution"], found["paddle"], found["modes"]) == ("paddlepaddle-gpu", "3.1.1", ["collective"])


def test_protobuf_7_beside_paddle_3_0_is_named(tmp_path: Path) -> None:
    found = facts(tmp_path, ("paddlepaddle", "3.0.0"), ("protobuf", "7.34.0"))
    assert found["modes"] == []
    problems = found["problems"]
    assert isinstance(problems, dict)
    assert "protobuf 7.34.0" in problems["collective"] and '"protobuf<7"' in problems["collective"]


def test_no_paddle_says_how_to_install_it(tmp_path: Path) -> None:
    found = facts(tmp_path)
    assert found["paddle"] is None and found["modes"] == []
    problems = found["problems"]
    assert isinstance(problems, dict)
    assert "PaddlePaddle is not installed" in problems["ps"] and "pip install" in problems["ps"]


@pytest.mark.parametrize(
    ("version", "modes"), [("2.6.2", ("ps", "collective")), ("3.0.0rc1", ("ps", "collective")), ("3.1.0", ("collective",))]
)
def test_supported_modes_by_release(version: str, modes: tuple[str, ...]) -> None:
    from paddle_nbext_server.runtime import preflight

    assert preflight.supported_modes(version) == modes


def test_a_server_whose_replicas_have_no_paddle_says_local_jobs_cannot_run_and_how_to_install(tmp_path: Path) -> None:
    from paddle_nbext_server.backends.local.paddle_env import PaddleEnvironment

    bare = tmp_path / "python-without-site-packages"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n', encoding="utf-8")
    bare.chmod(0o755)
    environment = PaddleEnvironment(str(bare))
    facts = environment.facts()
    assert facts.paddle is None and facts.modes == ()
    assert facts.summary.startswith("Local jobs cannot run: PaddlePaddle is not installed") and "pip install" in facts.summary
    refused = environment.problem("collective")
    assert refused is not None and refused[0] == "mode" and "PaddlePaddle is not installed" in refused[1]


def test_an_interpreter_that_cannot_start_is_named(tmp_path: Path) -> None:
    from paddle_nbext_server.backends.local.paddle_env import PaddleEnvironment

    facts = PaddleEnvironment(str(tmp_path / "no-such-python")).facts()
    assert facts.error is not None and "c.LocalBackend.python" in facts.error
